//! The sandbox: the guest imports nothing but our own interfaces, and a guest that
//! traps, spins, hoards memory or forges handles fails only its own call.

use std::sync::Arc;

use crate::fixture::{Fixture, ScriptedJob, runtime};
use host::plugin::{WIT_PACKAGE, wit_interface};
use host::{JobRegistry, Mount, PluginRuntime, SandboxLimits};
use serde_json::json;

const ROGUE_WASM: &[u8] = include_bytes!(env!("ROGUE_WASM"));

fn rogue_runtime(limits: SandboxLimits) -> Arc<PluginRuntime> {
    Arc::new(
        PluginRuntime::from_component_bytes(ROGUE_WASM, limits, Some(&crate::fixture::cache_dir()))
            .expect("the rogue component loads"),
    )
}

async fn rogue_mount(limits: SandboxLimits) -> (Mount, JobRegistry) {
    let registry = JobRegistry::default();
    let mount = Mount::new(rogue_runtime(limits), registry.clone(), "{}")
        .await
        .expect("rogue config loads");
    (mount, registry)
}

#[test]
fn the_guest_imports_only_harness_jobs_interfaces() {
    let imports = runtime().imports();
    assert!(!imports.is_empty());
    for name in &imports {
        assert!(
            name.starts_with("harness:jobs/"),
            "the guest imports {name}, which is not ours (WASI must not be reachable)"
        );
    }
    // Nothing outside the package may appear.
    let allowed = ["clock", "diag", "registry", "types"].map(wit_interface);
    assert!(imports.iter().all(|i| allowed.contains(i)), "{imports:?}");
    assert!(imports.contains(&wit_interface("registry")));
    // Profile C reads the clock for its durations.
    assert!(imports.contains(&wit_interface("clock")));
    let mut exports = runtime().exports();
    exports.sort();
    assert_eq!(exports, ["notices", "tools"].map(wit_interface));
    // The package the host names is the one `wit/` declares.
    let wit =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/wit/jobs.wit")).unwrap();
    assert!(wit.contains(&format!("\npackage {WIT_PACKAGE};\n")));
}

#[tokio::test]
async fn a_guest_panic_is_an_error_result_and_the_next_call_works() {
    let (mount, registry) = rogue_mount(SandboxLimits::default()).await;
    let failed = mount.invoke(None, "panic", "{}").await;
    assert!(failed.is_error);
    assert!(
        failed.text.starts_with("Error: plugin failed: "),
        "{}",
        failed.text
    );
    assert!(failed.text.contains("unreachable"), "{}", failed.text);

    let (id, _job) = ScriptedJob::stream(None).start(&registry).unwrap();
    let next = mount.invoke(None, "list", "{}").await;
    assert!(!next.is_error);
    assert_eq!(next.text, id);
}

#[tokio::test]
async fn a_warm_instance_serves_the_next_call_and_one_that_trapped_never_does() {
    let runtime = Arc::new(
        PluginRuntime::from_component_bytes(
            ROGUE_WASM,
            SandboxLimits::default(),
            Some(&crate::fixture::cache_dir()),
        )
        .unwrap()
        .with_warm_instances(),
    );
    let registry = JobRegistry::default();
    let mount = Mount::new(runtime.clone(), registry.clone(), "{}")
        .await
        .unwrap();
    // The configure call's instance waits for the next call.
    assert_eq!(runtime.warm_instances(), 1);
    let (id, _job) = ScriptedJob::stream(None).start(&registry).unwrap();
    for _ in 0..3 {
        let listed = mount.invoke(None, "list", "{}").await;
        assert_eq!(listed.text, id);
        assert_eq!(runtime.warm_instances(), 1, "one instance serves them all");
    }
    let failed = mount.invoke(None, "panic", "{}").await;
    assert!(failed.is_error, "{}", failed.text);
    assert_eq!(runtime.warm_instances(), 0, "a trapped instance is dropped");
    let next = mount.invoke(None, "list", "{}").await;
    assert_eq!(next.text, id);
    assert_eq!(runtime.warm_instances(), 1);
    // Without the opt-in, every call has a fresh one.
    let plain_runtime = rogue_runtime(SandboxLimits::default());
    let plain = Mount::new(plain_runtime.clone(), registry.clone(), "{}")
        .await
        .unwrap();
    assert_eq!(plain.invoke(None, "list", "{}").await.text, id);
    assert_eq!(plain_runtime.warm_instances(), 0);
    // A dropped runtime takes its warm instances, and with them its engine
    // and pool, along (the mount's notice task lets go of the runtime once
    // it sees the mount gone).
    let engine = runtime.engine().weak();
    drop((mount, runtime));
    for _ in 0..3000 {
        if engine.upgrade().is_none() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(
        engine.upgrade().is_none(),
        "warm instances outlived their runtime"
    );
}

#[tokio::test]
async fn the_built_in_guest_keeps_its_instance_warm_but_not_one_that_grew() {
    // A runtime of its own: other tests share the fixture's.
    let runtime = Arc::new(
        PluginRuntime::new(SandboxLimits::default(), Some(&crate::fixture::cache_dir())).unwrap(),
    );
    let registry = JobRegistry::default();
    let mount = Mount::new(runtime.clone(), registry.clone(), "{}")
        .await
        .unwrap();
    let (id, _job) = ScriptedJob::stream(None).start(&registry).unwrap();
    let args = json!({ "job_id": id }).to_string();
    for _ in 0..3 {
        let read = mount.invoke(None, "job_output", &args).await;
        assert!(!read.is_error, "{}", read.text);
        assert_eq!(runtime.warm_instances(), 1);
    }
    // Arguments of 6 MB grow the guest's memory well past its start: that
    // instance gives its pages back instead of waiting warm.
    let big = json!({ "job_id": id, "pad": "x".repeat(6 << 20) }).to_string();
    let answered = mount.invoke(None, "job_output", &big).await;
    assert!(
        !answered.text.starts_with("Error: plugin failed"),
        "the call itself ended cleanly: {}",
        &answered.text[..answered.text.len().min(200)]
    );
    assert_eq!(runtime.warm_instances(), 0);
    let read = mount.invoke(None, "job_output", &args).await;
    assert!(!read.is_error, "{}", read.text);
    assert_eq!(runtime.warm_instances(), 1);
}

#[tokio::test]
async fn a_runaway_guest_is_stopped_by_its_cpu_budget_without_starving_others() {
    let limits = SandboxLimits {
        cpu_ticks: 100,
        ..SandboxLimits::default()
    };
    let (mount, registry) = rogue_mount(limits).await;
    let (id, _job) = ScriptedJob::stream(None).start(&registry).unwrap();
    let mount = Arc::new(mount);
    let spinning = {
        let mount = mount.clone();
        tokio::spawn(async move { mount.invoke(None, "spin", "{}").await })
    };
    // On this single-threaded runtime the spinning guest must yield for this
    // honest call to run at all.
    tokio::task::yield_now().await;
    let honest = mount.invoke(None, "list", "{}").await;
    assert_eq!(honest.text, id);
    let spun = spinning.await.unwrap();
    assert!(spun.is_error);
    assert!(spun.text.contains("CPU budget"), "{}", spun.text);
    assert_eq!(mount.invoke(None, "list", "{}").await.text, id);
}

#[tokio::test]
async fn a_memory_bomb_hits_the_store_limit() {
    let (mount, _registry) = rogue_mount(SandboxLimits::default()).await;
    let out = mount.invoke(None, "grow", "{}").await;
    assert!(out.is_error);
    assert!(
        out.text.contains("forcing trap when growing memory"),
        "{}",
        out.text
    );
    assert!(!mount.invoke(None, "list", "{}").await.is_error);
}

#[tokio::test]
async fn a_forged_handle_reaches_nothing() {
    let (mount, registry) = rogue_mount(SandboxLimits::default()).await;
    let alice = host::Owner::new("alice");
    registry.agents().register(&alice);
    ScriptedJob::stream(Some(&alice)).start(&registry).unwrap();
    let out = mount.invoke(None, "forge", "{}").await;
    assert!(out.is_error, "a forged handle must trap, got {}", out.text);
    assert!(out.text.contains("unknown handle index"), "{}", out.text);
    // The honest view of a caller with no agent still shows nothing of alice's.
    assert_eq!(mount.invoke(None, "list", "{}").await.text, "");
}

#[tokio::test(start_paused = true)]
async fn the_host_holds_a_guest_wait_to_the_mount_cap() {
    // The rogue asks for the largest timer; its own config caps waits at 50 ms.
    let (mount, registry) = rogue_mount(SandboxLimits::default()).await;
    let (id, _job) = ScriptedJob::stream(None).start(&registry).unwrap();
    let started = tokio::time::Instant::now();
    let out = mount.invoke(None, "wait", &id).await;
    assert!(out.text.starts_with("Ok("), "{}", out.text);
    assert!(out.text.contains("Running"), "{}", out.text);
    assert!(started.elapsed() < std::time::Duration::from_secs(1));
}

#[tokio::test]
async fn a_guest_that_keeps_asking_to_wait_is_stopped_with_an_error() {
    let (mount, registry) = rogue_mount(SandboxLimits::default()).await;
    let (id, _job) = ScriptedJob::stream(None).start(&registry).unwrap();
    let out = mount.invoke(None, "wait-forever", &id).await;
    assert!(out.is_error);
    assert_eq!(
        out.text,
        "Error: plugin failed: the guest asked to wait more than 8 times in one call"
    );
    // Every wait was held to the rogue's 50 ms cap, and none is left behind.
    assert_eq!(registry.waiter_count(&id), 0);
    assert_eq!(mount.invoke(None, "list", "{}").await.text, id);
    // Up to the bound, waits are honoured and the answer comes through.
    assert_eq!(
        mount.invoke(None, "wait-eight", "{}").await.text,
        "waited 8 times"
    );
}

#[tokio::test]
async fn a_malformed_call_leaves_the_plugin_and_its_jobs_as_they_were() {
    let f = Fixture::new().await;
    let (id, job) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    job.push(&["hello\n"]);
    // A call the guest cannot even parse is an error result, not a trap...
    let bad = f
        .mount
        .invoke(Some(&f.alice), "job_output", "{not json")
        .await;
    assert!(bad.is_error);
    // ...and the state it saw is intact for the next call.
    let out = f
        .call(Some(&f.alice), "job_output", json!({"job_id": id}))
        .await;
    assert_eq!(out.text, "hello\n[status: running]");
}

#[tokio::test]
async fn a_greedy_excerpt_gets_at_most_the_host_bound_per_part() {
    let registry = JobRegistry::default();
    let mount = Mount::new(
        rogue_runtime(SandboxLimits::default()),
        registry.clone(),
        r#"{"profile":"c"}"#,
    )
    .await
    .unwrap();
    let owner = host::Owner::new("alice");
    registry.agents().register(&owner);
    let job = host::inproc::InProcessJob::new("export", "big").owner(owner.clone());
    let id = host::inproc::start_final(&registry, job, |_ctx| async { Ok("z".repeat(10 << 20)) })
        .unwrap();
    registry.settled(&id).await;
    // The guest asks for everything; the host hands over 4 MiB from each end.
    let notice = mount.pull_notice(&owner).await.unwrap().unwrap();
    assert_eq!(notice.text, format!("{id}: {} bytes", 8 << 20));
}

#[test]
fn the_pool_maps_no_fiber_stacks_and_few_regions() {
    // Each job spawn forks the host's mappings, so the pool must stay small: a
    // pool with (default) fiber stacks added some 2,000 regions and made 1,000
    // spawns twice as slow.
    let regions = || {
        std::fs::read_to_string("/proc/self/maps")
            .unwrap()
            .lines()
            .count()
    };
    let before = regions();
    let runtime =
        PluginRuntime::new(SandboxLimits::default(), Some(&crate::fixture::cache_dir())).unwrap();
    let added = regions().saturating_sub(before);
    assert!(added < 1000, "a runtime added {added} mappings");
    drop(runtime);
}

#[tokio::test]
async fn a_guest_that_traps_or_spins_on_the_start_tool_starts_nothing_or_answers_an_error() {
    let limits = SandboxLimits {
        cpu_ticks: 100,
        ..SandboxLimits::default()
    };
    let (mount, _registry) = rogue_mount(limits).await;
    // A trap in the check: the start is never made.
    let mut made = false;
    let failed = mount
        .start_with(None, r#"{"command": "panic"}"#, 65_536, &never(), |_| {
            made = true;
            Ok(host::plugin::StartMade::New("bash-1".into()))
        })
        .await;
    assert!(!made);
    assert!(failed.is_error);
    assert!(
        failed.text.starts_with("Error: plugin failed: "),
        "{}",
        failed.text
    );
    // A guest that spins while wording a start the host made: the CPU budget
    // ends it with an error, and the next call works.
    let spun = mount
        .start_with(None, "spin", 65_536, &never(), |_| {
            Ok(host::plugin::StartMade::New("bash-2".into()))
        })
        .await;
    assert!(spun.is_error);
    assert!(
        spun.text.starts_with("Error: plugin failed: "),
        "{}",
        spun.text
    );
    let next = mount
        .start_with(None, "true", 65_536, &never(), |_| {
            Ok(host::plugin::StartMade::New("bash-3".into()))
        })
        .await;
    assert!(!next.is_error);
    assert_eq!(next.text, "Ok(StartMade::New(\"bash-3\"))");
}

fn never() -> host::CancellationToken {
    host::CancellationToken::new()
}
