//! Owner cleanup, service disposal and `onJobsChanged` (contract 6.5, 8.4 and the
//! matching tests of 9.2).

use std::sync::{Arc, Mutex};

use crate::fixture::{Fixture, ScriptedJob, capture_logs};
use host::registry::OutcomeStatus;
use host::{JobRegistry, JobStatus, Owner};

type Seen = Arc<Mutex<Vec<String>>>;

fn name(owner: Option<&Owner>) -> String {
    owner.map_or("-".to_owned(), |o| o.session_id().to_owned())
}

/// Records `changed:<owner>` and `done:<id>:<status>:<reported>` in order.
fn observe(registry: &JobRegistry) -> (Seen, Vec<host::registry::ListenerRegistration>) {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    let changed = registry
        .on_jobs_changed(move |owner| s.lock().unwrap().push(format!("changed:{}", name(owner))));
    let s = seen.clone();
    let done = registry.on_job_done(move |job, _| {
        s.lock().unwrap().push(format!(
            "done:{}:{}:{}",
            job.id,
            job.status.as_str(),
            job.reported
        ))
    });
    (seen, vec![changed, done])
}

fn take(seen: &Seen) -> Vec<String> {
    std::mem::take(&mut *seen.lock().unwrap())
}

// --- Owner cleanup -------------------------------------------------------------------

#[tokio::test]
async fn disposing_an_owner_cancels_waits_and_drops_its_jobs() {
    let f = Fixture::new().await;
    let (seen, _guards) = observe(&f.registry);
    let (live, job) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    let (done, finished) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    finished.settle(OutcomeStatus::Completed, None, None).await;
    let (bobs, _b) = f.start(ScriptedJob::stream(Some(&f.bob))).unwrap();
    take(&seen);

    tokio::join!(
        f.registry.dispose_owner(&f.alice),
        job.settle_when_cancelled(OutcomeStatus::Killed, Some("signal: SIGTERM"))
    );

    assert_eq!(job.cancels(), [Some("owner disposed".to_owned())]);
    assert_eq!(
        take(&seen),
        [
            "changed:alice".to_owned(),
            "changed:alice".to_owned(),
            format!("done:{live}:killed:true"),
            "changed:alice".to_owned(),
        ]
    );
    for id in [&live, &done] {
        assert_eq!(
            f.registry.get(id, Some(&f.alice)).unwrap_err().to_string(),
            format!("unknown job {id}")
        );
    }
    assert!(f.registry.list(Some(&f.alice)).is_empty());
    // Bob's job is untouched.
    assert_eq!(
        f.registry.get(&bobs, Some(&f.bob)).unwrap().status,
        JobStatus::Running
    );
}

#[tokio::test]
async fn an_old_instance_cleanup_leaves_the_replacement_alone() {
    let f = Fixture::new().await;
    let (old_job, old) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    let replacement = Owner::new("alice");
    f.registry.agents().register(&replacement);
    let (new_job, new) = f.start(ScriptedJob::stream(Some(&replacement))).unwrap();
    tokio::join!(
        f.registry.dispose_owner(&f.alice),
        old.settle_when_cancelled(OutcomeStatus::Killed, None)
    );
    assert!(new.cancels().is_empty());
    let seen: Vec<String> = f
        .registry
        .list(Some(&replacement))
        .into_iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(seen, [new_job]);
    assert!(f.registry.inspect(&old_job).is_none());
}

#[tokio::test]
async fn a_throwing_teardown_cancel_force_fails_without_waiting() {
    let f = Fixture::new().await;
    let logs = capture_logs();
    let (seen, _guards) = observe(&f.registry);
    let (id, job) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    *job.cancel_error.lock().unwrap() = Some("cancel boom".into());
    take(&seen);
    // Finishes although the producer never settles.
    f.registry.dispose_owner(&f.alice).await;
    assert!(logs.text().contains(&format!(
        "jobs: cancel of {id} threw during teardown; job record forced failed and work may be orphaned: cancel boom"
    )));
    let events = take(&seen);
    let done: Vec<&String> = events.iter().filter(|e| e.starts_with("done:")).collect();
    assert_eq!(done, [&format!("done:{id}:failed:true")]);
    // A late outcome changes nothing.
    job.settle(OutcomeStatus::Completed, None, None).await;
    assert!(take(&seen).iter().all(|e| !e.starts_with("done:")));
    assert!(f.registry.list(Some(&f.alice)).is_empty());
}

#[tokio::test]
async fn the_forced_failure_detail_names_the_cause() {
    let f = Fixture::new().await;
    let details = Arc::new(Mutex::new(Vec::new()));
    let d = details.clone();
    let _l = f
        .registry
        .on_job_done(move |job, _| d.lock().unwrap().push(job.detail.clone()));
    let (_, job) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    *job.cancel_error.lock().unwrap() = Some("cancel boom".into());
    f.registry.dispose_owner(&f.alice).await;
    assert_eq!(
        *details.lock().unwrap(),
        [Some(
            "cancel threw during teardown; work may be orphaned: cancel boom".to_owned()
        )]
    );
}

#[tokio::test]
async fn removal_is_announced_only_when_the_owner_had_records() {
    let f = Fixture::new().await;
    let (seen, _guards) = observe(&f.registry);
    f.registry.dispose_owner(&f.bob).await;
    assert!(take(&seen).is_empty());
}

#[tokio::test]
async fn observers_see_stopping_then_killed_then_empty_during_teardown() {
    let f = Fixture::new().await;
    let (_, job) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    let statuses = Arc::new(Mutex::new(Vec::new()));
    let s = statuses.clone();
    let registry = f.registry.clone();
    let _l = f.registry.on_jobs_changed(move |owner| {
        let status = registry.list(owner).first().map(|j| j.status.as_str());
        s.lock().unwrap().push(status.unwrap_or("empty"));
    });
    tokio::join!(
        f.registry.dispose_owner(&f.alice),
        job.settle_when_cancelled(OutcomeStatus::Killed, None)
    );
    assert_eq!(*statuses.lock().unwrap(), ["stopping", "killed", "empty"]);
}

// --- Service disposal -------------------------------------------------------------

#[tokio::test]
async fn disposing_the_service_cancels_everything_silently() {
    let f = Fixture::new().await;
    let (seen, _guards) = observe(&f.registry);
    let (_, owned) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    let (_, unowned) = f.start(ScriptedJob::stream(None)).unwrap();
    take(&seen);
    let dispose = f.registry.dispose();
    let producers = async {
        for job in [&owned, &unowned] {
            job.settle_when_cancelled(OutcomeStatus::Killed, None).await;
        }
    };
    tokio::join!(dispose, producers);
    assert_eq!(owned.cancels(), [Some("jobs service disposed".to_owned())]);
    assert_eq!(
        unowned.cancels(),
        [Some("jobs service disposed".to_owned())]
    );
    let events = take(&seen);
    assert!(events.iter().all(|e| !e.starts_with("done:")), "{events:?}");
    // stopping, settled, emptied: for each of alice and the unowned set.
    assert_eq!(events.iter().filter(|e| *e == "changed:-").count(), 3);
    assert_eq!(events.iter().filter(|e| *e == "changed:alice").count(), 3);
    assert!(f.registry.list(None).is_empty());
    assert!(f.registry.list(Some(&f.alice)).is_empty());
    f.mount.flush_notices().await;
    assert!(f.alice.inbox().unwrap().messages().is_empty());
}

#[tokio::test]
async fn a_throwing_cancel_does_not_block_service_disposal() {
    let f = Fixture::new().await;
    let logs = capture_logs();
    let (seen, _guards) = observe(&f.registry);
    let (_, job) = f.start(ScriptedJob::stream(None)).unwrap();
    *job.cancel_error.lock().unwrap() = Some("cancel boom".into());
    f.registry.dispose().await;
    assert!(logs.text().contains("work may be orphaned"));
    assert!(take(&seen).iter().all(|e| !e.starts_with("done:")));
    assert!(f.registry.list(None).is_empty());
}

// --- onJobsChanged ------------------------------------------------------------------

#[tokio::test]
async fn registration_stopping_and_settlement_are_announced() {
    let f = Fixture::new().await;
    let (seen, _guards) = observe(&f.registry);
    let (id, job) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    f.registry.kill(&id, Some(&f.alice), None).unwrap();
    job.settle(OutcomeStatus::Killed, None, None).await;
    let changed: Vec<String> = take(&seen)
        .into_iter()
        .filter(|e| e.starts_with("changed:"))
        .collect();
    assert_eq!(changed, ["changed:alice"; 3]);

    let (_, job) = f.start(ScriptedJob::stream(None)).unwrap();
    assert_eq!(take(&seen), ["changed:-"]);
    drop(job);
}

#[tokio::test]
async fn a_throwing_observer_is_contained_and_a_dropped_one_is_gone() {
    let f = Fixture::new().await;
    let logs = capture_logs();
    let boom = f.registry.on_jobs_changed(|_| panic!("observer boom"));
    let count = Arc::new(Mutex::new(0));
    let c = count.clone();
    let counting = f.registry.on_jobs_changed(move |_| *c.lock().unwrap() += 1);
    f.start(ScriptedJob::stream(None)).unwrap();
    assert!(
        logs.text()
            .contains("jobs: onJobsChanged listener threw: observer boom")
    );
    assert_eq!(*count.lock().unwrap(), 1);
    drop(boom);
    drop(counting);
    f.start(ScriptedJob::stream(None)).unwrap();
    assert_eq!(*count.lock().unwrap(), 1);
}

#[tokio::test]
async fn scoped_observers_hear_only_their_chain() {
    let registry = JobRegistry::default();
    let preset = registry.create_scope(None);
    let elsewhere = registry.create_scope(None);
    let _controller = registry.attach_controller();
    let heard = Arc::new(Mutex::new(Vec::new()));
    let h = heard.clone();
    let _mine = registry.on_jobs_changed_in(Some(preset), move |o| {
        h.lock().unwrap().push(format!("preset:{}", name(o)))
    });
    let h = heard.clone();
    let _other = registry.on_jobs_changed_in(Some(elsewhere), move |o| {
        h.lock().unwrap().push(format!("elsewhere:{}", name(o)))
    });
    let alice = Owner::builder("alice")
        .scope(registry.create_scope(Some(preset)))
        .build();
    registry.agents().register(&alice);
    ScriptedJob::stream(Some(&alice)).start(&registry).unwrap();
    ScriptedJob::stream(None).start(&registry).unwrap();
    assert_eq!(*heard.lock().unwrap(), ["preset:alice"]);
}
