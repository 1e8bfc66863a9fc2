//! Completion delivery (contract 6 and the delivery, scoped-mount and notice tests
//! of 9.1), through the real component: the guest decides, the host acts.

use std::sync::Arc;

use crate::fixture::{Fixture, ScriptedJob, capture_logs, runtime};
use host::registry::OutcomeStatus;
use host::{
    Agent, AgentStatus, Inbox, JobRegistry, Lane, MessageSource, Mount, NoticeMessage, Owner,
    RegistryConfig, StartError,
};
use serde_json::json;

fn inbox(owner: &Owner) -> &Arc<Inbox> {
    owner.inbox().expect("built-in inbox")
}

/// Starts a job for `owner`, settles it with no waiter, and flushes the mount.
async fn settle_one(f: &Fixture, owner: &Owner) -> String {
    let (id, job) = f.start(ScriptedJob::stream(Some(owner))).unwrap();
    job.settle(OutcomeStatus::Completed, Some("exit code: 0"), None)
        .await;
    f.mount.flush_notices().await;
    id
}

async fn with_plugin_config(config: &str) -> Fixture {
    Fixture::with_config(config, RegistryConfig::default()).await
}

// --- Scoped mounts -------------------------------------------------------------

#[tokio::test]
async fn one_notice_from_the_owning_scope_when_two_mounts_share_a_registry() {
    let registry = JobRegistry::default();
    let preset_a = registry.create_scope(None);
    let preset_b = registry.create_scope(None);
    let mount_a = Mount::scoped(runtime(), registry.clone(), Some(preset_a), "{}")
        .await
        .unwrap();
    let mount_b = Mount::scoped(runtime(), registry.clone(), Some(preset_b), "{}")
        .await
        .unwrap();
    let agent_scope = registry.create_scope(Some(preset_a));
    let alice = Owner::builder("alice").scope(agent_scope).build();
    registry.agents().register(&alice);

    let (_, job) = ScriptedJob::stream(Some(&alice)).start(&registry).unwrap();
    job.settle(OutcomeStatus::Completed, None, None).await;
    mount_a.flush_notices().await;
    mount_b.flush_notices().await;
    assert_eq!(inbox(&alice).count(Lane::Inject), 1);
    assert_eq!(inbox(&alice).count(Lane::Followup), 0);
}

#[tokio::test]
async fn the_start_fence_follows_the_scope_chain() {
    let registry = JobRegistry::default();
    let served = registry.create_scope(None);
    let unserved = registry.create_scope(None);
    let mount = Mount::scoped(runtime(), registry.clone(), Some(served), "{}")
        .await
        .unwrap();
    let alice = Owner::builder("alice")
        .scope(registry.create_scope(Some(served)))
        .build();
    let bob = Owner::builder("bob")
        .scope(registry.create_scope(Some(unserved)))
        .build();
    registry.agents().register(&alice);
    registry.agents().register(&bob);
    assert!(ScriptedJob::stream(Some(&alice)).start(&registry).is_ok());
    let err = ScriptedJob::stream(Some(&bob))
        .start(&registry)
        .unwrap_err();
    assert_eq!(err, StartError::NoController);
    assert!(
        err.to_string()
            .contains("no job controller serves this agent")
    );
    // Unowned work needs a global controller.
    assert_eq!(
        ScriptedJob::stream(None).start(&registry).unwrap_err(),
        StartError::NoController
    );
    // A global controller serves both.
    let global = Mount::new(runtime(), registry.clone(), "{}").await.unwrap();
    assert!(ScriptedJob::stream(Some(&bob)).start(&registry).is_ok());
    assert!(ScriptedJob::stream(None).start(&registry).is_ok());
    // Unloading a scoped mount drops its layer: its agents are fenced again once
    // nothing else serves them.
    drop(global);
    drop(mount);
    assert_eq!(
        ScriptedJob::stream(Some(&alice))
            .start(&registry)
            .unwrap_err(),
        StartError::NoController
    );
}

// --- Delivery lanes ------------------------------------------------------------------

#[tokio::test]
async fn an_idle_owner_is_woken() {
    let f = Fixture::new().await;
    inbox(&f.alice).set_status(AgentStatus::Idle);
    settle_one(&f, &f.alice).await;
    assert_eq!(inbox(&f.alice).count(Lane::Followup), 1);
    assert_eq!(inbox(&f.alice).count(Lane::Inject), 0);
    assert_eq!(f.registry.wakes_spent(&f.alice), 1);
}

#[tokio::test]
async fn quiet_never_wakes() {
    let f = with_plugin_config(r#"{"completionDelivery":"quiet"}"#).await;
    inbox(&f.alice).set_status(AgentStatus::Idle);
    settle_one(&f, &f.alice).await;
    assert_eq!(inbox(&f.alice).count(Lane::Inject), 1);
    assert_eq!(inbox(&f.alice).count(Lane::Followup), 0);
    assert_eq!(f.registry.wakes_spent(&f.alice), 0);
}

#[tokio::test]
async fn falls_back_to_injection_once_the_budget_is_spent() {
    let f = with_plugin_config(r#"{"maxConsecutiveWakes":2}"#).await;
    inbox(&f.alice).set_status(AgentStatus::Idle);
    for _ in 0..3 {
        settle_one(&f, &f.alice).await;
    }
    assert_eq!(inbox(&f.alice).count(Lane::Followup), 2);
    assert_eq!(inbox(&f.alice).count(Lane::Inject), 1);
}

#[tokio::test]
async fn a_claimed_user_message_restores_the_budget() {
    let f = with_plugin_config(r#"{"maxConsecutiveWakes":1}"#).await;
    inbox(&f.alice).set_status(AgentStatus::Idle);
    settle_one(&f, &f.alice).await;
    settle_one(&f, &f.alice).await;
    assert_eq!(inbox(&f.alice).count(Lane::Followup), 1);
    f.registry.inbox_claimed(&f.alice, MessageSource::User);
    settle_one(&f, &f.alice).await;
    assert_eq!(inbox(&f.alice).count(Lane::Followup), 2);
}

#[tokio::test]
async fn the_budget_stays_spent_when_the_owner_only_claims_plugin_notices() {
    let f = with_plugin_config(r#"{"maxConsecutiveWakes":1}"#).await;
    inbox(&f.alice).set_status(AgentStatus::Idle);
    settle_one(&f, &f.alice).await;
    f.registry.inbox_claimed(&f.alice, MessageSource::Plugin);
    f.registry.inbox_claimed(&f.alice, MessageSource::Other);
    settle_one(&f, &f.alice).await;
    assert_eq!(inbox(&f.alice).count(Lane::Followup), 1);
    assert_eq!(inbox(&f.alice).count(Lane::Inject), 1);
}

#[tokio::test]
async fn a_same_session_replacement_starts_with_a_full_budget() {
    let f = with_plugin_config(r#"{"maxConsecutiveWakes":1}"#).await;
    inbox(&f.alice).set_status(AgentStatus::Idle);
    settle_one(&f, &f.alice).await;
    let alice2 = Owner::new("alice");
    f.registry.agents().register(&alice2);
    inbox(&alice2).set_status(AgentStatus::Idle);
    settle_one(&f, &alice2).await;
    assert_eq!(inbox(&alice2).count(Lane::Followup), 1);
}

#[tokio::test]
async fn owner_teardown_neither_wakes_nor_injects() {
    let f = Fixture::new().await;
    inbox(&f.alice).set_status(AgentStatus::Idle);
    let (id, job) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    tokio::join!(
        f.registry.dispose_owner(&f.alice),
        job.settle_when_cancelled(OutcomeStatus::Killed, Some("signal: SIGTERM"))
    );
    assert_eq!(job.cancels(), [Some("owner disposed".to_owned())]);
    f.mount.flush_notices().await;
    assert!(inbox(&f.alice).messages().is_empty());
    assert_eq!(
        f.registry.get(&id, Some(&f.alice)).unwrap_err().to_string(),
        format!("unknown job {id}")
    );
}

#[tokio::test]
async fn owner_teardown_with_a_throwing_cancel_is_silent_too() {
    let f = Fixture::new().await;
    let logs = capture_logs();
    inbox(&f.alice).set_status(AgentStatus::Idle);
    let (_, job) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    *job.cancel_error.lock().unwrap() = Some("cancel boom".into());
    f.registry.dispose_owner(&f.alice).await;
    f.mount.flush_notices().await;
    assert!(logs.text().contains("work may be orphaned"));
    assert!(inbox(&f.alice).messages().is_empty());
}

// --- Notices ---------------------------------------------------------------------

#[tokio::test]
async fn the_exact_notice_for_an_unreported_owned_job() {
    let f = Fixture::new().await;
    let (_, job) = f
        .start(ScriptedJob::stream(Some(&f.alice)).label("pnpm test"))
        .unwrap();
    job.settle(OutcomeStatus::Completed, Some("exit code: 0"), None)
        .await;
    f.mount.flush_notices().await;
    assert_eq!(
        inbox(&f.alice).messages(),
        [(
            Lane::Inject,
            NoticeMessage {
                text: "background job bash-1 (bash: pnpm test) finished [status: completed, exit code: 0]. Read its output with job_output.".into(),
                summary: Some("bash pnpm test [status: completed, exit code: 0]".into()),
                plugin: "tool-jobs".into(),
                form: Some("notice".into()),
            }
        )]
    );
}

#[tokio::test]
async fn bounded_notices_are_delivered_bounded() {
    let f = Fixture::new().await;
    let (_, job) = f
        .start(
            ScriptedJob::final_output(Some(&f.alice))
                .label(&"x".repeat(1000))
                .cap(61),
        )
        .unwrap();
    job.settle(OutcomeStatus::Completed, Some(&"d".repeat(1000)), None)
        .await;
    f.mount.flush_notices().await;
    let messages = inbox(&f.alice).messages();
    assert_eq!(
        messages[0].1.text,
        "background job subagent-1\nDone; job_output."
    );
    assert_eq!(
        messages[0].1.summary,
        Some(format!("subagent {}\u{2026}", "x".repeat(110)))
    );
}

#[tokio::test]
async fn no_notice_after_the_owner_kills_the_job() {
    let f = Fixture::new().await;
    let (id, job) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    f.call(Some(&f.alice), "job_kill", json!({"job_id": id}))
        .await;
    job.settle(OutcomeStatus::Killed, Some("signal: SIGTERM"), None)
        .await;
    f.mount.flush_notices().await;
    assert!(inbox(&f.alice).messages().is_empty());
}

#[tokio::test]
async fn no_notice_after_a_wait_returned_the_terminal_state() {
    let f = Fixture::new().await;
    let (id, job) = f.start(ScriptedJob::final_output(Some(&f.alice))).unwrap();
    let wait = f.call(
        Some(&f.alice),
        "job_output",
        json!({"job_id": id, "wait": true}),
    );
    let settle = async {
        crate::fixture::until_waiting(&f.registry, &id).await;
        job.settle(OutcomeStatus::Completed, None, Some("answer"))
            .await;
    };
    let (out, ()) = tokio::join!(wait, settle);
    assert!(out.text.contains("answer"));
    f.mount.flush_notices().await;
    assert!(inbox(&f.alice).messages().is_empty());
}

#[tokio::test]
async fn a_read_before_delivery_suppresses_the_notice() {
    let f = Fixture::new().await;
    let (id, job) = f.start(ScriptedJob::final_output(Some(&f.alice))).unwrap();
    let registry = f.registry.clone();
    // Read the outcome from inside settlement, before the mount can deliver.
    let read_id = id.clone();
    let _reader = f.registry.on_job_done(move |_, owner| {
        let (text, _) = registry.read(&read_id, owner).unwrap();
        assert_eq!(text, "answer");
    });
    job.settle(OutcomeStatus::Completed, None, Some("answer"))
        .await;
    f.mount.flush_notices().await;
    assert!(inbox(&f.alice).messages().is_empty());
    assert!(f.registry.inspect(&id).unwrap().reported);
}

#[tokio::test]
async fn a_global_and_a_scoped_mount_still_announce_once() {
    let registry = JobRegistry::default();
    let preset = registry.create_scope(None);
    let scoped = Mount::scoped(runtime(), registry.clone(), Some(preset), "{}")
        .await
        .unwrap();
    let global = Mount::new(runtime(), registry.clone(), "{}").await.unwrap();
    let alice = Owner::builder("alice")
        .scope(registry.create_scope(Some(preset)))
        .build();
    registry.agents().register(&alice);
    let (_, job) = ScriptedJob::stream(Some(&alice)).start(&registry).unwrap();
    job.settle(OutcomeStatus::Completed, None, None).await;
    scoped.flush_notices().await;
    global.flush_notices().await;
    assert_eq!(inbox(&alice).messages().len(), 1);
}

#[tokio::test]
async fn unowned_jobs_get_no_notice_and_no_error() {
    let f = Fixture::new().await;
    let logs = capture_logs();
    let (_, job) = f.start(ScriptedJob::stream(None)).unwrap();
    job.settle(OutcomeStatus::Completed, None, None).await;
    f.mount.flush_notices().await;
    assert!(inbox(&f.alice).messages().is_empty());
    assert!(inbox(&f.bob).messages().is_empty());
    assert!(!logs.text().contains("WARN"), "{}", logs.text());
}

#[tokio::test]
async fn no_routing_to_a_same_session_replacement() {
    let f = Fixture::new().await;
    let (_, job) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    f.registry.agents().unregister(&f.alice);
    let replacement = Owner::new("alice");
    f.registry.agents().register(&replacement);
    job.settle(OutcomeStatus::Completed, None, None).await;
    f.mount.flush_notices().await;
    assert_eq!(inbox(&f.alice).count(Lane::Inject), 1);
    assert!(inbox(&replacement).messages().is_empty());
}

/// An agent whose inbox is broken.
struct BrokenAgent;

impl Agent for BrokenAgent {
    fn status(&self) -> AgentStatus {
        AgentStatus::Running
    }

    fn inject(&self, _message: NoticeMessage) -> Result<(), host::DeliveryError> {
        Err(host::DeliveryError::Failed("unexpected inject bug".into()))
    }

    fn followup(&self, _message: NoticeMessage) -> Result<(), host::DeliveryError> {
        panic!("followup must not be used for a running agent")
    }
}

#[tokio::test]
async fn an_inject_failure_is_logged_and_contained() {
    let f = Fixture::new().await;
    let logs = capture_logs();
    let broken = Owner::builder("carol").agent(Arc::new(BrokenAgent)).build();
    f.registry.agents().register(&broken);
    let (id, job) = f.start(ScriptedJob::stream(Some(&broken))).unwrap();
    job.settle(OutcomeStatus::Completed, None, None).await;
    f.mount.flush_notices().await;
    assert!(
        logs.text().contains(&format!(
            "jobs: onJobDone listener threw for {id}: unexpected inject bug"
        )),
        "{}",
        logs.text()
    );
    // The mount keeps delivering to others.
    settle_one(&f, &f.alice).await;
    assert_eq!(inbox(&f.alice).count(Lane::Inject), 1);
}

#[tokio::test]
async fn the_exact_owner_is_still_used_after_it_leaves_the_directory() {
    let f = Fixture::new().await;
    let (_, a) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    let (_, b) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    f.registry.agents().unregister(&f.alice);
    a.settle(OutcomeStatus::Completed, None, None).await;
    b.settle(OutcomeStatus::Completed, None, None).await;
    f.mount.flush_notices().await;
    assert_eq!(inbox(&f.alice).count(Lane::Inject), 2);
}

#[tokio::test]
async fn a_guest_that_traps_while_deciding_fails_only_that_notice() {
    let registry = JobRegistry::default();
    let rogue = Arc::new(
        host::PluginRuntime::from_component_bytes(
            include_bytes!(env!("ROGUE_WASM")),
            host::SandboxLimits::default(),
            Some(&crate::fixture::cache_dir()),
        )
        .unwrap(),
    );
    let logs = capture_logs();
    let mount = Mount::new(rogue, registry.clone(), "{}").await.unwrap();
    let alice = Owner::new("alice");
    registry.agents().register(&alice);
    let (id, job) = ScriptedJob::stream(Some(&alice)).start(&registry).unwrap();
    job.settle(OutcomeStatus::Completed, None, None).await;
    mount.flush_notices().await;
    assert!(inbox(&alice).messages().is_empty());
    assert!(
        logs.text().contains(&format!(
            "jobs: onJobDone listener threw for {id}: plugin failed"
        )),
        "{}",
        logs.text()
    );
    // The mount's notice task survived the trap and handles the next settlement.
    let (next, job) = ScriptedJob::stream(Some(&alice)).start(&registry).unwrap();
    job.settle(OutcomeStatus::Completed, None, None).await;
    mount.flush_notices().await;
    assert!(logs.text().contains(&format!(
        "jobs: onJobDone listener threw for {next}: plugin failed"
    )));
}

// --- Cancelled and abandoned waits ---------------------------------------------

/// A plain (consuming) read of `id` by alice.
async fn read_as_alice(f: &Fixture, id: &str) -> host::ToolOutcome {
    f.mount
        .invoke(
            Some(&f.alice),
            "job_output",
            &json!({"job_id": id}).to_string(),
        )
        .await
}

/// A wait call for `id` by `owner`, driven until its wait is pending and then
/// left unpolled, so the test decides what happens before it resumes.
async fn parked_wait<'a>(
    f: &'a Fixture,
    owner: &'a Owner,
    args: &'a str,
    abort: &'a tokio_util::sync::CancellationToken,
    id: &str,
) -> std::pin::Pin<Box<impl std::future::Future<Output = host::ToolOutcome> + 'a>> {
    let mut call = Box::pin(
        f.mount
            .invoke_with_abort(Some(owner), "job_output", args, abort),
    );
    tokio::select! {
        out = &mut call => panic!("the wait ended early: {}", out.text),
        () = crate::fixture::until_waiting(&f.registry, id) => {}
    }
    call
}

#[tokio::test]
async fn a_wait_cancelled_after_it_saw_the_end_consumes_nothing_and_owes_the_notice() {
    let f = Fixture::new().await;
    let (id, job) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    job.push(&["built\n"]);
    let args = json!({"job_id": id, "wait": true}).to_string();
    let abort = tokio_util::sync::CancellationToken::new();
    let call = parked_wait(&f, &f.alice, &args, &abort, &id).await;
    // The job ends while the wait is pending (the wait counts it), then the
    // client cancels before the call could read.
    job.settle(OutcomeStatus::Completed, Some("exit code: 0"), None)
        .await;
    abort.cancel();
    assert_eq!(call.await.text, "Error: wait aborted");
    assert!(!f.registry.inspect(&id).unwrap().reported);
    f.mount.flush_notices().await;
    let notices = inbox(&f.alice).messages();
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(
        notices[0]
            .1
            .text
            .starts_with(&format!("background job {id} "))
    );
    // The output is all there for the next read, and no second notice comes.
    let out = read_as_alice(&f, &id).await;
    assert_eq!(out.text, "built\n[status: completed, exit code: 0]");
    f.mount.flush_notices().await;
    assert_eq!(inbox(&f.alice).messages().len(), 1);
}

#[tokio::test]
async fn a_wait_call_dropped_after_the_end_owes_the_notice_and_a_finished_one_does_not() {
    let f = Fixture::new().await;
    let (id, job) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    let args = json!({"job_id": id, "wait": true}).to_string();
    let abort = tokio_util::sync::CancellationToken::new();
    let call = parked_wait(&f, &f.alice, &args, &abort, &id).await;
    job.settle(OutcomeStatus::Completed, Some("exit code: 0"), None)
        .await;
    // An embedder drops the call (its own caller went away): the hold goes.
    drop(call);
    f.mount.flush_notices().await;
    assert_eq!(inbox(&f.alice).messages().len(), 1);

    // A wait that answered shows the outcome: no notice for it.
    let (id, job) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    let args = json!({"job_id": id, "wait": true}).to_string();
    let never = tokio_util::sync::CancellationToken::new();
    let call = parked_wait(&f, &f.alice, &args, &never, &id).await;
    job.settle(OutcomeStatus::Completed, Some("exit code: 0"), None)
        .await;
    assert_eq!(
        call.await.text,
        "(no new output)\n[status: completed, exit code: 0]"
    );
    assert!(f.registry.inspect(&id).unwrap().reported);
    f.mount.flush_notices().await;
    assert_eq!(inbox(&f.alice).messages().len(), 1);
}

#[tokio::test]
async fn two_waits_on_one_job_owe_the_notice_only_when_both_left() {
    let f = Fixture::new().await;
    let (id, job) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    let forever = host::registry::MAX_TIMER_DELAY_MS;
    let never = tokio_util::sync::CancellationToken::new();
    let registry = f.registry.clone();
    let plain = Default::default();
    let (first, second) = {
        let a = registry.wait_held(&id, forever, Some(&f.alice), &never, &plain);
        let b = registry.wait_held(&id, forever, Some(&f.alice), &never, &plain);
        let settle = async {
            crate::fixture::until_waiting(&registry, &id).await;
            while registry.waiter_count(&id) < 2 {
                tokio::task::yield_now().await;
            }
            job.settle(OutcomeStatus::Completed, None, None).await;
        };
        let (a, b, ()) = tokio::join!(a, b, settle);
        (a.unwrap().3, b.unwrap().3)
    };
    assert!(first.is_held() && second.is_held());
    assert!(f.registry.inspect(&id).unwrap().reported);
    drop(first);
    f.mount.flush_notices().await;
    assert!(
        inbox(&f.alice).messages().is_empty(),
        "the other wait still holds it"
    );
    assert!(f.registry.inspect(&id).unwrap().reported);
    drop(second);
    f.mount.flush_notices().await;
    assert_eq!(inbox(&f.alice).messages().len(), 1);
}

#[tokio::test]
async fn a_call_cancelled_before_it_runs_does_nothing() {
    let f = Fixture::new().await;
    let (id, job) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    job.push(&["x\n"]);
    let abort = tokio_util::sync::CancellationToken::new();
    abort.cancel();
    for tool in ["job_kill", "job_output"] {
        let out = f
            .mount
            .invoke_with_abort(
                Some(&f.alice),
                tool,
                &json!({"job_id": id}).to_string(),
                &abort,
            )
            .await;
        assert_eq!(out.text, "Error: cancelled before it ran");
    }
    let out = read_as_alice(&f, &id).await;
    assert_eq!(out.text, "x\n[status: running]");
}
