//! The registry tests (contract 9.2: start, reads and settlement, kill, wait, owner
//! isolation), against the host's registry and, where the model can see the
//! behaviour, through the real component.

use std::sync::{Arc, Mutex};

use crate::fixture::{Fixture, ScriptedJob, capture_logs};
use host::registry::{
    KillOutcome, MAX_SAFE_INTEGER, MAX_TIMER_DELAY_MS, OutcomeStatus, RegistryConfigError,
};
use host::{
    AgentDirectory, CancellationToken, JobRegistry, JobStatus, Owner, RegistryConfig,
    RegistryError, StartError,
};
use serde_json::json;

async fn limited(limit: u64) -> Fixture {
    Fixture::with_config(
        "{}",
        RegistryConfig::with_max_concurrent_jobs_per_owner(limit).unwrap(),
    )
    .await
}

fn no_abort() -> CancellationToken {
    CancellationToken::new()
}

/// The `reported` bit of every settlement the registry announces, in order.
fn reported_bits(
    registry: &host::JobRegistry,
) -> (Arc<Mutex<Vec<bool>>>, host::registry::ListenerRegistration) {
    let heard = Arc::new(Mutex::new(Vec::new()));
    let h = heard.clone();
    let registration = registry.on_job_done(move |snap, _| h.lock().unwrap().push(snap.reported));
    (heard, registration)
}

// --- start -------------------------------------------------------------------

#[tokio::test]
async fn keeps_the_owner_session_on_the_snapshot() {
    let f = Fixture::new().await;
    let (id, _job) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    let job = f.registry.get(&id, Some(&f.alice)).unwrap();
    assert_eq!(job.owner_session.as_deref(), Some("alice"));
    assert_eq!(job.status, JobStatus::Running);
    assert!(!job.reported);
    assert_eq!(job.finished_at, None);
}

#[tokio::test]
async fn refuses_to_start_without_a_controller() {
    let registry = JobRegistry::default();
    let err = ScriptedJob::stream(None).start(&registry).unwrap_err();
    assert_eq!(
        err.to_string(),
        "background jobs unavailable: no job controller serves this agent (load @buckeyestudio/toh-tool-jobs in its composition)"
    );
    // A controller attached straight on the registry (no plugin) serves starts too.
    let controller = registry.attach_controller();
    assert!(ScriptedJob::stream(None).start(&registry).is_ok());
    let second = registry.attach_controller();
    drop(controller);
    assert!(ScriptedJob::stream(None).start(&registry).is_ok());
    drop(second);
    assert_eq!(
        ScriptedJob::stream(None).start(&registry).unwrap_err(),
        StartError::NoController
    );
}

#[tokio::test]
async fn rejects_empty_kinds_labels_and_zero_caps() {
    let f = Fixture::new().await;
    let err = |job: ScriptedJob| f.start(job).unwrap_err().to_string();
    assert_eq!(
        err(ScriptedJob::stream(None).kind("")),
        "invalid job kind: expected a non-empty string"
    );
    assert_eq!(
        err(ScriptedJob::stream(None).label("")),
        "invalid job label: expected a non-empty string"
    );
    assert_eq!(
        err(ScriptedJob::stream(None).cap(0)),
        "invalid outputLimitBytes: expected a positive safe integer, got 0"
    );
    assert!(err(ScriptedJob::stream(None).cap(MAX_SAFE_INTEGER + 1)).contains("outputLimitBytes"));
    // None of these used up an id.
    assert_eq!(f.start(ScriptedJob::stream(None)).unwrap().0, "bash-1");
}

#[test]
fn rejects_invalid_admission_limits_at_load() {
    for bad in [
        json!(0),
        json!(-1),
        json!(1.5),
        json!("NaN"),
        json!(null),
        json!(MAX_SAFE_INTEGER + 1),
    ] {
        let result = RegistryConfig::from_json(&json!({ "maxConcurrentJobsPerOwner": bad }));
        let err: RegistryConfigError = result.expect_err("rejected");
        assert!(
            err.to_string().contains("maxConcurrentJobsPerOwner"),
            "{err}"
        );
    }
    assert!(
        RegistryConfig::from_json(&json!({"maxConcurrentJobsPerOwner": f64::INFINITY})).is_err()
    );
    let max = RegistryConfig::from_json(&json!({ "maxConcurrentJobsPerOwner": MAX_SAFE_INTEGER }))
        .unwrap();
    assert_eq!(max.max_concurrent_jobs_per_owner(), MAX_SAFE_INTEGER);
    let one = RegistryConfig::from_json(&json!({"maxConcurrentJobsPerOwner": 1})).unwrap();
    assert_eq!(one.max_concurrent_jobs_per_owner(), 1);
    assert!(RegistryConfig::from_json(&json!({"maxConcurrent": 1})).is_err());
}

#[tokio::test]
async fn the_eleventh_start_hits_the_default_limit_without_running() {
    let f = Fixture::new().await;
    for _ in 0..10 {
        f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    }
    let ran = Arc::new(Mutex::new(false));
    let flag = ran.clone();
    let err = f
        .registry
        .start(ScriptedJob::stream(Some(&f.alice)).spec, || {
            *flag.lock().unwrap() = true;
            Err("must not run".into())
        })
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("background job limit reached for this owner (limit: 10)")
    );
    assert!(!*ran.lock().unwrap());
}

#[tokio::test]
async fn a_limit_of_one_admits_again_after_settlement() {
    let f = limited(1).await;
    let (first, job) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    assert_eq!(first, "bash-1");
    let err = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap_err();
    assert_eq!(
        err.to_string(),
        "background job limit reached for this owner (limit: 1); use job_kill to stop an unneeded job, wait for it to finish, then retry"
    );
    job.settle(OutcomeStatus::Completed, None, None).await;
    assert_eq!(
        f.start(ScriptedJob::stream(Some(&f.alice))).unwrap().0,
        "bash-2"
    );
}

#[tokio::test]
async fn a_stopping_job_keeps_its_slot_until_it_settles() {
    let f = limited(1).await;
    let (id, job) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    f.registry.kill(&id, Some(&f.alice), None).unwrap();
    assert!(
        f.start(ScriptedJob::stream(Some(&f.alice)))
            .unwrap_err()
            .to_string()
            .contains("(limit: 1)")
    );
    job.settle(OutcomeStatus::Killed, Some("signal: SIGTERM"), None)
        .await;
    assert!(f.start(ScriptedJob::stream(Some(&f.alice))).is_ok());
}

#[tokio::test]
async fn every_terminal_status_frees_the_slot() {
    for status in [
        OutcomeStatus::Completed,
        OutcomeStatus::Killed,
        OutcomeStatus::Failed,
    ] {
        let f = limited(1).await;
        let (_, job) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
        job.settle(status, None, None).await;
        assert!(
            f.start(ScriptedJob::stream(Some(&f.alice))).is_ok(),
            "{status:?}"
        );
    }
}

#[tokio::test]
async fn buckets_are_per_exact_owner() {
    let f = limited(1).await;
    f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    // Another owner has a bucket of its own.
    f.start(ScriptedJob::stream(Some(&f.bob))).unwrap();
    // So does a same-session replacement...
    let alice2 = Owner::new("alice");
    f.registry.agents().register(&alice2);
    f.start(ScriptedJob::stream(Some(&alice2))).unwrap();
    // ...while the replaced instance is no longer live.
    let err = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap_err();
    assert_eq!(
        err.to_string(),
        "agent \"alice\" is not the registered agent instance (background job owner must be live)"
    );
    // Unowned jobs share one bucket.
    f.start(ScriptedJob::stream(None)).unwrap();
    assert!(matches!(
        f.start(ScriptedJob::stream(None)).unwrap_err(),
        StartError::LimitReached(1)
    ));
}

#[tokio::test]
async fn ids_count_per_kind() {
    let f = Fixture::new().await;
    let id = |kind: &str| f.start(ScriptedJob::stream(None).kind(kind)).unwrap().0;
    assert_eq!(id("bash"), "bash-1");
    assert_eq!(id("bash"), "bash-2");
    assert_eq!(id("subagent"), "subagent-1");
    assert_eq!(id("workflow"), "workflow-1");
}

#[tokio::test]
async fn a_failed_producer_start_registers_nothing_and_uses_no_id() {
    let f = Fixture::new().await;
    let err = f
        .registry
        .start(ScriptedJob::stream(None).spec, || {
            Err("spawn refused".into())
        })
        .unwrap_err();
    assert_eq!(err.to_string(), "spawn refused");
    assert!(f.registry.list(None).is_empty());
    assert_eq!(f.start(ScriptedJob::stream(None)).unwrap().0, "bash-1");
}

// --- reads and settlement ------------------------------------------------------

#[tokio::test]
async fn stream_reads_consume_and_keep_reading_after_settlement() {
    let f = Fixture::new().await;
    let (id, job) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    job.push(&["first", "", "rest"]);
    let (text, snap) = f.registry.read(&id, Some(&f.alice)).unwrap();
    assert_eq!(
        (text.as_str(), snap.status, snap.reported),
        ("first", JobStatus::Running, false)
    );
    assert_eq!(f.registry.read(&id, Some(&f.alice)).unwrap().0, "");
    job.settle(OutcomeStatus::Completed, Some("exit code: 0"), None)
        .await;
    let (text, snap) = f.registry.read(&id, Some(&f.alice)).unwrap();
    assert_eq!(text, "rest");
    assert_eq!(snap.status, JobStatus::Completed);
    assert_eq!(snap.detail.as_deref(), Some("exit code: 0"));
    assert!(snap.reported);
    assert!(snap.finished_at.unwrap() >= snap.started_at);
}

#[tokio::test]
async fn the_cap_shows_in_reads_and_gets() {
    let f = Fixture::new().await;
    let (id, _job) = f.start(ScriptedJob::stream(None).cap(64)).unwrap();
    assert_eq!(
        f.registry.read(&id, None).unwrap().1.output_limit_bytes,
        Some(64)
    );
    assert_eq!(
        f.registry.get(&id, None).unwrap().output_limit_bytes,
        Some(64)
    );
}

#[tokio::test]
async fn final_output_reads_are_empty_while_live_and_idempotent_after() {
    let f = Fixture::new().await;
    let (id, job) = f.start(ScriptedJob::final_output(None)).unwrap();
    assert_eq!(f.registry.read(&id, None).unwrap().0, "");
    job.settle(OutcomeStatus::Completed, None, Some("final answer"))
        .await;
    assert_eq!(f.registry.read(&id, None).unwrap().0, "final answer");
    assert_eq!(f.registry.read(&id, None).unwrap().0, "final answer");

    let (id, job) = f.start(ScriptedJob::final_output(None)).unwrap();
    job.settle(OutcomeStatus::Failed, Some("max-tokens"), None)
        .await;
    let (text, snap) = f.registry.read(&id, None).unwrap();
    assert_eq!(text, "");
    assert_eq!(snap.status, JobStatus::Failed);
    assert_eq!(snap.detail.as_deref(), Some("max-tokens"));
}

#[tokio::test]
async fn an_unknown_id_is_refused() {
    let f = Fixture::new().await;
    assert_eq!(
        f.registry.read("bash-99", None).unwrap_err().to_string(),
        "unknown job bash-99"
    );
}

#[tokio::test]
async fn done_listeners_fire_once_and_are_contained() {
    let f = Fixture::new().await;
    let logs = capture_logs();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let _boom = f.registry.on_job_done(|_, _| panic!("listener boom"));
    let record = seen.clone();
    let _later = f.registry.on_job_done(move |snap, owner| {
        record.lock().unwrap().push((
            snap.id.clone(),
            snap.reported,
            owner.map(|o| o.session_id().to_owned()),
        ));
    });
    let (id, job) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    job.settle(OutcomeStatus::Completed, None, None).await;
    job.settle(OutcomeStatus::Failed, None, None).await;
    assert_eq!(
        *seen.lock().unwrap(),
        [(id.clone(), false, Some("alice".to_owned()))]
    );
    assert!(
        logs.text()
            .contains(&format!("jobs: onJobDone listener threw for {id}"))
    );
}

#[tokio::test]
async fn a_rejected_done_becomes_failed() {
    let f = Fixture::new().await;
    let logs = capture_logs();
    let (id, job) = f.start(ScriptedJob::stream(None)).unwrap();
    job.reject("Error: transport exploded").await;
    let snap = f.registry.get(&id, None).unwrap();
    assert_eq!(snap.status, JobStatus::Failed);
    assert_eq!(snap.detail.as_deref(), Some("Error: transport exploded"));
    assert!(logs.text().contains("producer contract violation"));
}

#[tokio::test]
async fn a_dropped_registration_stops_listening() {
    let f = Fixture::new().await;
    let count = Arc::new(Mutex::new(0));
    let c = count.clone();
    let registration = f.registry.on_job_done(move |_, _| *c.lock().unwrap() += 1);
    let (_, a) = f.start(ScriptedJob::stream(None)).unwrap();
    a.settle(OutcomeStatus::Completed, None, None).await;
    drop(registration);
    let (_, b) = f.start(ScriptedJob::stream(None)).unwrap();
    b.settle(OutcomeStatus::Completed, None, None).await;
    assert_eq!(*count.lock().unwrap(), 1);
}

#[tokio::test]
async fn settlement_publishes_the_changed_set_before_completion() {
    let f = Fixture::new().await;
    let order = Arc::new(Mutex::new(Vec::new()));
    let o = order.clone();
    let _changed = f.registry.on_jobs_changed(move |owner| {
        o.lock()
            .unwrap()
            .push(format!("changed:{}", owner.map_or("-", |o| o.session_id())))
    });
    let o = order.clone();
    let _done = f
        .registry
        .on_job_done(move |_, _| o.lock().unwrap().push("done".to_owned()));
    let (id, job) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    f.registry.kill(&id, Some(&f.alice), None).unwrap();
    job.settle(OutcomeStatus::Killed, None, None).await;
    assert_eq!(
        *order.lock().unwrap(),
        ["changed:alice", "changed:alice", "changed:alice", "done"]
    );
}

// --- kill ----------------------------------------------------------------------

#[tokio::test]
async fn killing_a_live_job_cancels_first_then_stops() {
    let f = Fixture::new().await;
    let done = Arc::new(Mutex::new(Vec::new()));
    let d = done.clone();
    let _l = f
        .registry
        .on_job_done(move |snap, _| d.lock().unwrap().push((snap.status, snap.reported)));
    let (id, job) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    assert_eq!(
        f.registry
            .kill(&id, Some(&f.alice), Some("no longer needed"))
            .unwrap(),
        KillOutcome::Requested
    );
    assert_eq!(job.cancels(), [Some("no longer needed".to_owned())]);
    let listed = f.registry.list(Some(&f.alice));
    assert_eq!(
        (listed[0].status, listed[0].reported),
        (JobStatus::Stopping, true)
    );
    job.settle(OutcomeStatus::Killed, Some("signal: SIGTERM"), None)
        .await;
    assert_eq!(*done.lock().unwrap(), [(JobStatus::Killed, true)]);
    assert_eq!(
        f.registry.kill(&id, Some(&f.alice), None).unwrap(),
        KillOutcome::AlreadyFinished
    );
}

#[tokio::test]
async fn a_throwing_cancel_changes_nothing() {
    let f = Fixture::new().await;
    let (done, _l) = reported_bits(&f.registry);
    let (id, job) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    *job.cancel_error.lock().unwrap() = Some("cancel boom".into());
    assert_eq!(
        f.registry.kill(&id, Some(&f.alice), None).unwrap_err(),
        RegistryError::ProducerFailed("cancel boom".into())
    );
    let snap = f.registry.get(&id, Some(&f.alice)).unwrap();
    assert_eq!((snap.status, snap.reported), (JobStatus::Running, false));
    job.settle(OutcomeStatus::Completed, None, None).await;
    assert_eq!(*done.lock().unwrap(), [false]);
    assert_eq!(
        f.registry.kill(&id, Some(&f.alice), None).unwrap(),
        KillOutcome::AlreadyFinished
    );
}

// --- wait ------------------------------------------------------------------------

#[tokio::test]
async fn settling_during_a_wait_resolves_it_reported() {
    let f = Fixture::new().await;
    let (heard, _l) = reported_bits(&f.registry);
    let (id, job) = f.start(ScriptedJob::stream(None)).unwrap();
    let abort = no_abort();
    let wait = f.registry.wait(&id, 60_000, None, &abort);
    let settle = async {
        crate::fixture::until_waiting(&f.registry, &id).await;
        job.settle(OutcomeStatus::Completed, None, None).await;
    };
    let (snap, ()) = tokio::join!(wait, settle);
    let snap = snap.unwrap();
    assert_eq!((snap.status, snap.reported), (JobStatus::Completed, true));
    assert_eq!(*heard.lock().unwrap(), [true]);
}

#[tokio::test(start_paused = true)]
async fn timed_out_and_aborted_waits_leave_no_waiter() {
    let f = Fixture::new().await;
    let (id, _job) = f.start(ScriptedJob::stream(None)).unwrap();
    for _ in 0..3 {
        let snap = f.registry.wait(&id, 5, None, &no_abort()).await.unwrap();
        assert_eq!((snap.status, snap.reported), (JobStatus::Running, false));
        assert_eq!(f.registry.waiter_count(&id), 0);
    }
    let abort = CancellationToken::new();
    let wait = f.registry.wait(&id, 60_000, None, &abort);
    let cancel = async {
        crate::fixture::until_waiting(&f.registry, &id).await;
        abort.cancel();
    };
    let (result, ()) = tokio::join!(wait, cancel);
    assert_eq!(result.unwrap_err().to_string(), "wait aborted");
    assert_eq!(f.registry.waiter_count(&id), 0);
    assert_eq!(
        f.registry.get(&id, None).unwrap().status,
        JobStatus::Running
    );
}

#[tokio::test]
async fn a_dropped_wait_leaves_no_waiter() {
    let f = Fixture::new().await;
    let (id, _job) = f.start(ScriptedJob::stream(None)).unwrap();
    let abort = no_abort();
    let mut wait = Box::pin(f.registry.wait(&id, 60_000, None, &abort));
    tokio::select! {
        biased;
        _ = &mut wait => panic!("the job never settles"),
        () = async {
            crate::fixture::until_waiting(&f.registry, &id).await;
        } => {}
    }
    assert_eq!(f.registry.waiter_count(&id), 1);
    // Dropping the pending wait (a caller going away) un-counts it.
    drop(wait);
    assert_eq!(f.registry.waiter_count(&id), 0);
}

#[tokio::test]
async fn a_finished_job_returns_at_once_reported() {
    let f = Fixture::new().await;
    let (id, job) = f.start(ScriptedJob::stream(None)).unwrap();
    job.settle(OutcomeStatus::Completed, None, None).await;
    let snap = f
        .registry
        .wait(&id, MAX_TIMER_DELAY_MS, None, &no_abort())
        .await
        .unwrap();
    assert!(snap.reported);
}

#[tokio::test]
async fn invalid_timeouts_are_refused_before_any_waiter() {
    let f = Fixture::new().await;
    let (id, _job) = f.start(ScriptedJob::stream(None)).unwrap();
    for bad in [0, MAX_TIMER_DELAY_MS + 1, u64::MAX] {
        let err = f
            .registry
            .wait(&id, bad, None, &no_abort())
            .await
            .unwrap_err();
        assert!(err.to_string().starts_with("invalid wait timeout"), "{err}");
        assert_eq!(f.registry.waiter_count(&id), 0);
    }
    assert_eq!(
        f.registry.get(&id, None).unwrap().status,
        JobStatus::Running
    );
}

#[tokio::test]
async fn an_already_aborted_signal_rejects_at_once() {
    let f = Fixture::new().await;
    let (id, _job) = f.start(ScriptedJob::stream(None)).unwrap();
    let abort = CancellationToken::new();
    abort.cancel();
    assert_eq!(
        f.registry.wait(&id, 1000, None, &abort).await.unwrap_err(),
        RegistryError::WaitAborted
    );
}

#[tokio::test]
async fn an_abort_before_settlement_rejects_and_the_notice_stays_due() {
    let f = Fixture::new().await;
    let (heard, _l) = reported_bits(&f.registry);
    let (id, job) = f.start(ScriptedJob::stream(None)).unwrap();
    let abort = CancellationToken::new();
    let wait = f.registry.wait(&id, 60_000, None, &abort);
    let race = async {
        crate::fixture::until_waiting(&f.registry, &id).await;
        abort.cancel();
        job.settle(OutcomeStatus::Completed, None, None).await;
    };
    let (result, ()) = tokio::join!(wait, race);
    assert_eq!(result.unwrap_err(), RegistryError::WaitAborted);
    assert_eq!(*heard.lock().unwrap(), [false]);
}

#[tokio::test]
async fn an_abort_after_settlement_still_resolves_reported() {
    let f = Fixture::new().await;
    let abort = CancellationToken::new();
    let from_listener = abort.clone();
    let _l = f.registry.on_job_done(move |_, _| from_listener.cancel());
    let (id, job) = f.start(ScriptedJob::stream(None)).unwrap();
    let wait = f.registry.wait(&id, 60_000, None, &abort);
    let settle = async {
        crate::fixture::until_waiting(&f.registry, &id).await;
        job.settle(OutcomeStatus::Completed, None, None).await;
    };
    let (result, ()) = tokio::join!(wait, settle);
    let snap = result.unwrap();
    assert_eq!((snap.status, snap.reported), (JobStatus::Completed, true));
}

// --- owner isolation ---------------------------------------------------------------

#[tokio::test]
async fn owners_see_their_jobs_and_unowned_ones() {
    let f = Fixture::new().await;
    let (mine, _a) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    let (shared, _s) = f.start(ScriptedJob::stream(None).kind("subagent")).unwrap();
    let (bobs, _b) = f.start(ScriptedJob::stream(Some(&f.bob))).unwrap();
    assert!(f.registry.read(&mine, Some(&f.alice)).is_ok());
    assert!(f.registry.read(&shared, Some(&f.bob)).is_ok());
    assert!(f.registry.read(&shared, None).is_ok());
    let foreign = format!("job {mine} belongs to another session");
    assert_eq!(
        f.registry
            .read(&mine, Some(&f.bob))
            .unwrap_err()
            .to_string(),
        foreign
    );
    assert_eq!(
        f.registry.read(&mine, None).unwrap_err().to_string(),
        foreign
    );
    assert_eq!(
        f.registry
            .kill(&mine, Some(&f.bob), None)
            .unwrap_err()
            .to_string(),
        foreign
    );
    assert_eq!(
        f.registry
            .wait(&mine, 10, Some(&f.bob), &no_abort())
            .await
            .unwrap_err()
            .to_string(),
        foreign
    );
    let ids = |caller: Option<&Owner>| -> Vec<String> {
        f.registry.list(caller).into_iter().map(|j| j.id).collect()
    };
    assert_eq!(ids(Some(&f.alice)), [mine.clone(), shared.clone()]);
    assert_eq!(ids(Some(&f.bob)), [shared.clone(), bobs]);
    assert_eq!(ids(None), [shared]);

    // The same fence holds through the component.
    for (tool, args) in [
        ("job_output", json!({"job_id": mine})),
        (
            "job_output",
            json!({"job_id": mine, "wait": true, "timeout_ms": 10}),
        ),
        ("job_kill", json!({"job_id": mine})),
    ] {
        let out = f.call(Some(&f.bob), tool, args).await;
        assert!(out.is_error);
        assert_eq!(out.text, format!("Error: {foreign}"));
    }
    assert_eq!(
        f.registry.get(&mine, Some(&f.alice)).unwrap().status,
        JobStatus::Running
    );
}

#[tokio::test]
async fn a_ghost_owner_cannot_start_until_registered() {
    let registry = JobRegistry::new(RegistryConfig::default(), AgentDirectory::default());
    let _controller = registry.attach_controller();
    let ghost = Owner::new("ghost");
    let err = ScriptedJob::stream(Some(&ghost))
        .start(&registry)
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("is not the registered agent instance")
    );
    registry.agents().register(&ghost);
    assert_eq!(
        ScriptedJob::stream(Some(&ghost))
            .start(&registry)
            .unwrap()
            .0,
        "bash-1"
    );
}

#[tokio::test]
async fn a_stale_instance_is_refused_but_still_sees_its_session() {
    let f = Fixture::new().await;
    let current = Owner::new("alice");
    f.registry.agents().register(&current);
    let (id, _job) = f.start(ScriptedJob::stream(Some(&current))).unwrap();
    let stale = &f.alice;
    assert!(matches!(
        f.start(ScriptedJob::stream(Some(stale))).unwrap_err(),
        StartError::StaleOwner(_)
    ));
    let seen: Vec<String> = f
        .registry
        .list(Some(stale))
        .into_iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(seen, [id]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_under_way_while_its_owner_is_disposed_is_undone() {
    let f = Fixture::new().await;
    let alice = f.alice.clone();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
    let (gate_tx, gate_rx) = std::sync::mpsc::channel::<()>();
    let cancels = Arc::new(Mutex::new(Vec::<Option<String>>::new()));
    let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
    // The producer starts its work outside the registry's lock: hold it there.
    let start = {
        let (registry, alice, cancels) = (f.registry.clone(), alice.clone(), cancels.clone());
        let runtime = tokio::runtime::Handle::current();
        std::thread::spawn(move || {
            let _runtime = runtime.enter();
            let spec = ScriptedJob::stream(Some(&alice)).spec;
            registry.start(spec, move || {
                ready_tx.send(()).unwrap();
                gate_rx.recv().unwrap();
                Ok(host::JobHooks {
                    capture: None,
                    control: None,
                    placement: None,
                    cancel: Box::new(move |reason| {
                        cancels.lock().unwrap().push(reason.map(str::to_owned));
                        Ok(())
                    }),
                    read_output: None,
                    output_excerpt: None,
                    done: Box::pin(async move {
                        let _ = done_rx.await;
                        Ok(host::JobOutcome {
                            status: OutcomeStatus::Killed,
                            detail: None,
                            output: None,
                        })
                    }),
                })
            })
        })
    };
    tokio::task::spawn_blocking(move || ready_rx.recv().unwrap())
        .await
        .unwrap();
    // Other calls go on meanwhile, and the owner is torn down.
    assert!(f.registry.list(Some(&alice)).is_empty());
    f.registry.dispose_owner(&alice).await;
    gate_tx.send(()).unwrap();
    let result = tokio::task::spawn_blocking(move || start.join().unwrap())
        .await
        .unwrap();
    assert_eq!(result, Err(StartError::StaleOwner("alice".into())));
    assert_eq!(
        *cancels.lock().unwrap(),
        [Some("owner disposed".to_owned())]
    );
    assert!(f.registry.list(Some(&alice)).is_empty());
    assert!(f.registry.inspect("bash-1").is_none());
    let _ = done_tx.send(());
    // The slot it held is free again.
    let (id, _control) = f.start(ScriptedJob::stream(Some(&alice))).unwrap();
    assert_eq!(id, "bash-1");
}

// --- what a host that outlives a crash writes ---------------------------------

/// A job that outlives its host, as far as the registry sees one: a monitor
/// already spawned, nothing more.
struct Durable;

impl host::registry::control::JobControl for Durable {
    fn write_input(&self, _: &[u8], _: bool) -> Result<u64, host::registry::control::ControlError> {
        Err(host::registry::control::ControlError::NoInput)
    }
    fn signal(
        &self,
        _: host::registry::control::JobSignal,
    ) -> Result<(), host::registry::control::ControlError> {
        Ok(())
    }
    fn ports(&self) -> Vec<host::registry::control::ListeningPort> {
        Vec::new()
    }
    fn files(&self) -> Option<std::path::PathBuf> {
        Some("job-1".into())
    }
    fn monitor(&self) -> Option<(i32, u64)> {
        Some((1, 1))
    }
    fn durable(&self) -> bool {
        true
    }
}

/// Starts a durable job of `owner` whose output `capture` holds.
fn start_durable(
    registry: &JobRegistry,
    owner: &Owner,
    capture: &host::capture::SharedCapture,
) -> String {
    let capture = capture.clone();
    registry
        .start(ScriptedJob::stream(Some(owner)).spec, move || {
            Ok(host::JobHooks {
                capture: Some(capture),
                control: Some(Arc::new(Durable)),
                placement: None,
                cancel: Box::new(|_| Ok(())),
                read_output: None,
                output_excerpt: None,
                done: Box::pin(std::future::pending()),
            })
        })
        .unwrap()
}

#[tokio::test]
async fn a_durable_job_is_changed_again_after_each_read_and_settlement_only() {
    let f = Fixture::new().await;
    let dir = tempfile::tempdir().unwrap();
    let captures: Vec<_> = (0..3)
        .map(|n| {
            host::capture::SharedCapture::new(
                &dir.path().join(format!("job-{n}")),
                host::capture::OutputLimits::default(),
                None,
            )
        })
        .collect();
    let ids: Vec<String> = captures
        .iter()
        .map(|c| start_durable(&f.registry, &f.alice, c))
        .collect();
    let changed = |owner: &Owner| -> Vec<String> {
        let states = f.registry.changed_states(Some(owner));
        f.registry.mark_recorded(&states);
        states.into_iter().map(|(id, _)| id).collect()
    };
    // New jobs are changed, once; another owner sees none of them.
    assert!(changed(&f.bob).is_empty());
    assert_eq!(changed(&f.alice), ids);
    assert!(changed(&f.alice).is_empty());
    // Output alone moves no cursor; a read does, of that job only.
    captures[1].push(host::capture::OutputStream::Stdout, b"built\n");
    assert!(changed(&f.alice).is_empty());
    f.registry.read(&ids[1], Some(&f.alice)).unwrap();
    assert_eq!(changed(&f.alice), [ids[1].clone()]);
    // A read that moves nothing (no new output) changes nothing.
    f.registry.read(&ids[1], Some(&f.alice)).unwrap();
    assert!(changed(&f.alice).is_empty());
    // Changes made between the look and the write are not lost: the job
    // stays changed until what was written is what it is.
    captures[2].push(host::capture::OutputStream::Stderr, b"warning\n");
    let looked = f.registry.changed_states(Some(&f.alice));
    assert!(looked.is_empty());
    f.registry.read(&ids[2], Some(&f.alice)).unwrap();
    let looked = f.registry.changed_states(Some(&f.alice));
    assert_eq!(looked.len(), 1);
    captures[2].push(host::capture::OutputStream::Stderr, b"again\n");
    f.registry.read(&ids[2], Some(&f.alice)).unwrap();
    f.registry.mark_recorded(&looked);
    assert_eq!(changed(&f.alice), [ids[2].clone()]);
    assert!(changed(&f.alice).is_empty());
    // A kill changes the job's status.
    f.registry.kill(&ids[0], Some(&f.alice), None).unwrap();
    assert_eq!(changed(&f.alice), [ids[0].clone()]);
    // Every job's state, whether it changed or not, is still there to write.
    assert_eq!(f.registry.job_states(Some(&f.alice)).len(), 3);
}
