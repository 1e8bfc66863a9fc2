//! In-process jobs: Rust futures as final-output or stream jobs, read and killed
//! through the real component.

use crate::fixture::{Fixture, settled};
use host::inproc::{InProcessJob, JobContext, start_final, start_stream};
use host::{JobRegistry, JobStatus, StartError};
use serde_json::json;
use tokio::sync::oneshot;

#[tokio::test]
async fn a_final_output_job_shows_its_result_once_done() {
    let f = Fixture::new().await;
    let (release, gate) = oneshot::channel::<()>();
    let job = InProcessJob::new("query", "count rows").owner(f.alice.clone());
    let id = start_final(&f.registry, job, |_ctx| async move {
        gate.await.map_err(|e| e.to_string())?;
        Ok("42 rows".to_owned())
    })
    .unwrap();
    assert_eq!(id, "query-1");
    assert_eq!(
        f.output(Some(&f.alice), &id).await,
        "(no new output)\n[status: running]"
    );
    release.send(()).unwrap();
    let out = f
        .call(
            Some(&f.alice),
            "job_output",
            json!({"job_id": id, "wait": true}),
        )
        .await;
    assert_eq!(out.text, "42 rows\n[status: completed]");
}

#[tokio::test]
async fn a_stream_job_is_read_as_deltas() {
    let f = Fixture::new().await;
    let (step_tx, mut step) = tokio::sync::mpsc::unbounded_channel::<&'static str>();
    let job = InProcessJob::new("crawl", "crawl docs").owner(f.alice.clone());
    let id = start_stream(&f.registry, job, |ctx: JobContext| async move {
        while let Some(line) = step.recv().await {
            ctx.write(line);
        }
        Ok(())
    })
    .unwrap();
    step_tx.send("page 1\n").unwrap();
    let first = f
        .call(Some(&f.alice), "job_output", json!({"job_id": id}))
        .await;
    // The write may not have happened yet; either way nothing is lost.
    let mut seen = first.text.clone();
    step_tx.send("page 2\n").unwrap();
    drop(step_tx);
    settled(&f.registry, &id, Some(&f.alice)).await;
    seen.push_str(&f.output(Some(&f.alice), &id).await);
    assert!(seen.contains("page 1\n"), "{seen}");
    assert!(seen.ends_with("page 2\n[status: completed]"), "{seen}");
    assert_eq!(seen.matches("page 1").count(), 1);
}

#[tokio::test]
async fn errors_and_panics_fail_the_job() {
    let f = Fixture::new().await;
    let failing = start_final(&f.registry, InProcessJob::new("query", "q"), |_| async {
        Err::<String, _>("query exploded".to_owned())
    })
    .unwrap();
    let panicking = start_final(&f.registry, InProcessJob::new("query", "q"), |_| async {
        if true {
            panic!("boom");
        }
        Ok(String::new())
    })
    .unwrap();
    for id in [&failing, &panicking] {
        settled(&f.registry, id, None).await;
    }
    let failed = f.registry.inspect(&failing).unwrap();
    assert_eq!(failed.status, JobStatus::Failed);
    assert_eq!(failed.detail.as_deref(), Some("query exploded"));
    let panicked = f.registry.inspect(&panicking).unwrap();
    assert_eq!(panicked.status, JobStatus::Failed);
    assert_eq!(panicked.detail.as_deref(), Some("job panicked: boom"));
    assert_eq!(
        f.output(None, &panicking).await,
        "(no new output)\n[status: failed, job panicked: boom]"
    );
}

#[tokio::test]
async fn cancellation_reaches_the_future_with_its_reason() {
    let f = Fixture::new().await;
    let job = InProcessJob::new("crawl", "crawl everything").owner(f.alice.clone());
    let id = start_final(&f.registry, job, |ctx: JobContext| async move {
        ctx.cancelled().await;
        Err(format!("stopped: {}", ctx.reason().unwrap_or_default()))
    })
    .unwrap();
    let kill = f
        .call(
            Some(&f.alice),
            "job_kill",
            json!({"job_id": id, "reason": "enough pages"}),
        )
        .await;
    assert_eq!(kill.text, "requested cancellation of job crawl-1");
    let out = f
        .call(
            Some(&f.alice),
            "job_output",
            json!({"job_id": id, "wait": true}),
        )
        .await;
    assert_eq!(
        out.text,
        "(no new output)\n[status: killed, stopped: enough pages]"
    );
}

#[tokio::test]
async fn work_that_finishes_despite_a_cancel_completes() {
    let f = Fixture::new().await;
    let (release, gate) = oneshot::channel::<()>();
    let id = start_final(
        &f.registry,
        InProcessJob::new("query", "q"),
        |_| async move {
            let _ = gate.await;
            Ok("done anyway".to_owned())
        },
    )
    .unwrap();
    f.registry.kill(&id, None, None).unwrap();
    release.send(()).unwrap();
    settled(&f.registry, &id, None).await;
    let job = f.registry.inspect(&id).unwrap();
    assert_eq!(job.status, JobStatus::Completed);
    assert_eq!(f.registry.read(&id, None).unwrap().0, "done anyway");
}

#[tokio::test]
async fn tools_can_tell_whether_background_jobs_are_available() {
    let registry = JobRegistry::default();
    assert!(!registry.serves(None));
    let mut ran = false;
    let err = start_final(&registry, InProcessJob::new("query", "q"), |_| {
        ran = true;
        async { Ok(String::new()) }
    })
    .unwrap_err();
    assert_eq!(err, StartError::NoController);
    assert!(!ran, "a refused start never runs the work");
    let f = Fixture::new().await;
    assert!(f.registry.serves(None));
    assert!(f.registry.serves(Some(&f.alice)));
}

/// The extensions an in-process job serves: the registry reads its capture
/// as it reads a shell job's.
const EXTENSIONS: &str = r#"{"extensions": true}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_job_is_paged_and_searched_through_job_log() {
    let f = Fixture::with_config(EXTENSIONS, host::RegistryConfig::default()).await;
    let (written_tx, written) = oneshot::channel::<()>();
    let (release, gate) = oneshot::channel::<()>();
    let job = InProcessJob::new("crawl", "crawl docs").owner(f.alice.clone());
    let id = start_stream(&f.registry, job, |ctx: JobContext| async move {
        ctx.write("fetched /\nfetched /guide\nskipped /private\nfetched /api\n");
        let _ = written_tx.send(());
        gate.await.map_err(|e| e.to_string())
    })
    .unwrap();
    written.await.unwrap();
    let last = f
        .call(Some(&f.alice), "job_log", json!({"job_id": id, "lines": 2}))
        .await;
    assert!(!last.is_error, "{}", last.text);
    assert_eq!(
        last.text,
        "[stdout lines 3-4 of 4]\n3:skipped /private\n4:fetched /api\n[status: running]"
    );
    let search = f
        .call(
            Some(&f.alice),
            "job_log",
            json!({"job_id": id, "search": "^skipped", "context": 1}),
        )
        .await;
    assert_eq!(
        search.text,
        "[search /^skipped/ in stdout and stderr: 1 match]\nstdout-2-fetched /guide\nstdout:3:skipped /private\nstdout-4-fetched /api\n[status: running]"
    );
    // Paging consumed nothing: the read still has all of it.
    assert_eq!(
        f.output(Some(&f.alice), &id).await,
        "fetched /\nfetched /guide\nskipped /private\nfetched /api\n[status: running]"
    );
    release.send(()).unwrap();
    settled(&f.registry, &id, Some(&f.alice)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ready_wait_ends_at_the_line_an_in_process_job_writes() {
    let f = Fixture::with_config(EXTENSIONS, host::RegistryConfig::default()).await;
    let (step_tx, mut step) = tokio::sync::mpsc::unbounded_channel::<&'static str>();
    let job = InProcessJob::new("index", "index docs").owner(f.alice.clone());
    let id = start_stream(&f.registry, job, |ctx: JobContext| async move {
        while let Some(line) = step.recv().await {
            ctx.write(line);
        }
        Ok(())
    })
    .unwrap();
    // The line arrives while the wait is pending: the capture's watch wakes it.
    let (out, ()) = tokio::join!(
        f.call(
            Some(&f.alice),
            "job_output",
            json!({"job_id": id, "until": "^index ready", "timeout_ms": 60000}),
        ),
        async {
            crate::fixture::until_waiting(&f.registry, &id).await;
            step_tx.send("loading\nindex ready: 3 docs\n").unwrap();
        }
    );
    assert!(!out.is_error, "{}", out.text);
    assert_eq!(
        out.text,
        "[wait ended: stdout line 2 matched]\n1-loading\n2:index ready: 3 docs\nloading\nindex ready: 3 docs\n[status: running]"
    );
    // Quiet output ends a wait too.
    let quiet = f
        .call(
            Some(&f.alice),
            "job_output",
            json!({"job_id": id, "quiet_ms": 200}),
        )
        .await;
    assert_eq!(
        quiet.text,
        "[wait ended: no output for 200 ms]\n(no new output)\n[status: running]"
    );
    drop(step_tx);
    settled(&f.registry, &id, Some(&f.alice)).await;
}
