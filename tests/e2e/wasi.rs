//! Guests built with the usual toolchain (`wasm32-wasip2`) import WASI; the host
//! links it behind a deny-by-default context. Our own guest, built a second time
//! for that target, must behave exactly as the shipped one; a rogue built for it
//! must get WASI's errors, never data.

use std::sync::Arc;

use host::{JobRegistry, Mount, PluginRuntime, SandboxLimits};
use serde_json::json;

use crate::fixture::{ScriptedJob, cache_dir};

const TOOL_JOBS_WASIP2: &[u8] = include_bytes!(env!("TOOL_JOBS_WASIP2_WASM"));
const ROGUE_WASIP2: &[u8] = include_bytes!(env!("ROGUE_WASIP2_WASM"));

fn runtime_of(wasm: &[u8]) -> Arc<PluginRuntime> {
    Arc::new(
        PluginRuntime::from_component_bytes(wasm, SandboxLimits::default(), Some(&cache_dir()))
            .expect("the component loads"),
    )
}

#[test]
fn the_wasip2_build_imports_wasi_and_the_shipped_one_does_not() {
    let wasip2 = runtime_of(TOOL_JOBS_WASIP2);
    assert!(wasip2.imports_wasi());
    assert!(wasip2.imports().iter().any(|i| i.starts_with("wasi:cli/")));
    assert!(!crate::fixture::runtime().imports_wasi());
}

#[test]
fn the_wasip2_build_passes_every_conformance_vector() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance/vectors");
    let vectors = conformance::load_vectors(&dir).unwrap();
    assert!(vectors.len() >= 250);
    let runner = conformance::Runner::new(TOOL_JOBS_WASIP2).unwrap();
    let failures: Vec<String> = vectors
        .iter()
        .map(|v| runner.run(v))
        .filter_map(|o| o.failure.map(|f| format!("{}: {f}", o.id)))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// Both flavours: a guest call of a WASI component runs on a thread of its own.
#[tokio::test]
async fn the_wasip2_build_serves_calls_and_waits_through_the_host() {
    let registry = JobRegistry::default();
    let mount = Mount::new(runtime_of(TOOL_JOBS_WASIP2), registry.clone(), "{}")
        .await
        .unwrap();
    let (id, job) = ScriptedJob::stream(None).start(&registry).unwrap();
    job.push(&["hello\n"]);
    let read = mount
        .invoke(None, "job_output", &json!({"job_id": id}).to_string())
        .await;
    assert_eq!(read.text, "hello\n[status: running]");
    let waiting = {
        let (mount, id) = (Arc::new(mount), id.clone());
        let m = mount.clone();
        (
            tokio::spawn(async move {
                m.invoke(
                    None,
                    "job_output",
                    &json!({"job_id": id, "wait": true}).to_string(),
                )
                .await
            }),
            mount,
        )
    };
    crate::fixture::until_waiting(&registry, &id).await;
    job.settle(host::OutcomeStatus::Completed, Some("exit code: 0"), None)
        .await;
    let (call, mount) = waiting;
    assert_eq!(
        call.await.unwrap().text,
        "(no new output)\n[status: completed, exit code: 0]"
    );
    let defs = mount.tool_definitions().await.unwrap();
    assert_eq!(defs.len(), 3);
}

// One thread, so the captured log sees the call (the host hands the caller's
// log on to the call's own thread).
#[tokio::test]
async fn a_wasi_guest_gets_errors_not_files_environment_or_network() {
    let registry = JobRegistry::default();
    let mount = Mount::new(runtime_of(ROGUE_WASIP2), registry, "{}")
        .await
        .unwrap();
    let call = async |tool: &str| mount.invoke(None, tool, "{}").await;
    let file = call("read-file").await;
    assert!(file.text.starts_with("error: "), "{}", file.text);
    let dir = call("list-dir").await;
    assert!(dir.text.starts_with("error: "), "{}", dir.text);
    assert_eq!(call("env").await.text, "0 variables, 0 arguments");
    let socket = call("socket").await;
    assert!(socket.text.starts_with("error: "), "{}", socket.text);
    // Two megabytes of output reach a bounded log, and the call still answers.
    let logs = crate::fixture::capture_logs();
    assert_eq!(call("print").await.text, "printed");
    let text = logs.text();
    let logged: usize = text
        .lines()
        .filter(|l| l.contains("stdout: ") || l.contains("stderr: "))
        .map(|l| l.rsplit(": ").next().unwrap_or_default().len())
        .sum();
    assert!(
        logged > 0 && logged <= host::plugin::wasi::LOG_BYTES_PER_CALL,
        "{logged} bytes logged"
    );
    assert!(text.contains("is dropped"), "{text}");
    drop(logs);
    // An exit fails that call only.
    let exit = call("exit").await;
    assert!(exit.is_error, "{}", exit.text);
    assert!(
        exit.text.starts_with("Error: plugin failed: "),
        "{}",
        exit.text
    );
    assert_eq!(call("env").await.text, "0 variables, 0 arguments");
}

#[test]
fn an_import_beyond_the_linked_wasi_is_refused_by_name() {
    let wasm = wat::parse_str(
        r#"(component
            (import "wasi:http/outgoing-handler@0.2.0" (instance
                (export "handle" (func))))
        )"#,
    )
    .unwrap();
    let err = PluginRuntime::from_component_bytes(&wasm, SandboxLimits::default(), None)
        .err()
        .expect("refused");
    assert!(
        err.to_string().contains("wasi:http/outgoing-handler@0.2.0"),
        "{err}"
    );
}

// One thread, so the captured log sees the notice task.
#[tokio::test]
async fn a_wasi_guest_whose_notice_path_panics_fails_only_that_notice() {
    // The rogue's `deliver` panics; built for WASI, its standard library prints
    // the panic to stderr through WASI, which must happen off the tokio worker.
    let registry = JobRegistry::default();
    let mount = Mount::new(runtime_of(ROGUE_WASIP2), registry.clone(), "{}")
        .await
        .unwrap();
    let owner = host::Owner::new("alice");
    registry.agents().register(&owner);
    let (id, job) = ScriptedJob::stream(Some(&owner)).start(&registry).unwrap();
    let logs = crate::fixture::capture_logs();
    job.settle(host::OutcomeStatus::Completed, Some("exit code: 0"), None)
        .await;
    mount.flush_notices().await;
    let text = logs.text();
    assert!(
        text.contains(&format!(
            "jobs: onJobDone listener threw for {id}: plugin failed"
        )),
        "{text}"
    );
    assert!(text.contains("rogue guest refuses to deliver"), "{text}");
    drop(logs);
    assert_eq!(
        mount.invoke(Some(&owner), "env", "{}").await.text,
        "0 variables, 0 arguments"
    );
}
