//! Profile C (`job_list`, `job_status`, `job_wait`, `job_cancel`; contract 3.3,
//! 4.5, 6.7, 7.4, 8.7 and the tests of 9.6), through the real component over the
//! same registry as profiles A and B.
//!
//! Every fixture runs on a manual clock, so each duration the model sees is
//! asserted exactly (`980ms`, `4.21s`, `1m1.4s`).

use std::sync::Arc;

use crate::fixture::{Fixture, ScriptedJob, runtime};
use host::bash::{BashConfig, BashProducer};
use host::clock::ManualClock;
use host::inproc::{InProcessJob, JobContext, start_final};
use host::registry::OutcomeStatus;
use host::session::Session;
use host::{JobStatus, Mount, Owner, RegistryConfig, StartError};
use serde_json::{Value, json};
use tokio::sync::oneshot;

/// A profile C fixture and the clock it runs on (fixed until advanced).
struct ProfileC {
    f: Fixture,
    clock: Arc<ManualClock>,
}

impl std::ops::Deref for ProfileC {
    type Target = Fixture;

    fn deref(&self) -> &Fixture {
        &self.f
    }
}

/// 2026-01-01T00:00:00Z: any fixed start works; durations are differences.
const START_MS: u64 = 1_767_225_600_000;

async fn profile_c(extra: &str) -> ProfileC {
    let clock = Arc::new(ManualClock::new(START_MS));
    let f = Fixture::with_clock(
        &format!(r#"{{"profile":"c"{extra}}}"#),
        RegistryConfig::with_max_concurrent_jobs_per_owner(1000).unwrap(),
        clock.clone(),
    )
    .await;
    ProfileC { f, clock }
}

async fn call(f: &Fixture, owner: &Owner, tool: &str, args: Value) -> host::ToolOutcome {
    f.call(Some(owner), tool, args).await
}

/// An in-process job of `alice` that finishes with `result` once released.
fn gated_job(f: &Fixture, kind: &str, result: Result<&str, &str>) -> (String, oneshot::Sender<()>) {
    let result = result.map(str::to_owned).map_err(str::to_owned);
    let (release, gate) = oneshot::channel::<()>();
    let job = InProcessJob::new(kind, format!("{kind} the data")).owner(f.alice.clone());
    let id = start_final(&f.registry, job, move |_ctx| async move {
        gate.await.map_err(|e| e.to_string())?;
        result
    })
    .unwrap();
    (id, release)
}

async fn finish(f: &Fixture, id: &str, release: oneshot::Sender<()>) {
    release.send(()).unwrap();
    f.registry.settled(id).await;
}

#[tokio::test]
async fn the_four_tools_are_exact() {
    let f = profile_c("").await;
    let defs = f.mount.tool_definitions().await.unwrap();
    let names: Vec<&str> = defs.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["job_list", "job_status", "job_wait", "job_cancel"]);
    let id = json!({"type": "string", "description": "The job id."});
    let schemas: Vec<Value> = defs
        .iter()
        .map(|d| serde_json::from_str(&d.input_schema).unwrap())
        .collect();
    assert_eq!(
        schemas[0],
        json!({"type": "object", "properties": {}, "required": []})
    );
    assert_eq!(
        schemas[1],
        json!({"type": "object", "properties": {"id": id}, "required": ["id"]})
    );
    assert_eq!(
        schemas[2],
        json!({"type": "object", "properties": {
            "id": id,
            "timeout_seconds": {"type": "integer", "description": "How long to wait before returning with the job still running."}
        }, "required": ["id"]})
    );
    assert_eq!(schemas[3], schemas[1]);
    assert!(
        schemas
            .iter()
            .all(|s| s.get("additionalProperties").is_none())
    );
    assert_eq!(
        defs[0].description,
        "List the background jobs this session started, newest first, with their state and duration. Jobs still running when you finish your answer are cancelled \u{2014} wait for the ones whose results you need."
    );
    assert_eq!(
        defs[1].description,
        "Read one background job: its state, and its full output once it has finished."
    );
    assert_eq!(
        defs[2].description,
        "Block until a background job finishes, then return its result. Bounded by a timeout \u{2014} if it returns while the job is still running, the job keeps going and you can wait again or continue with other work."
    );
    assert_eq!(defs[3].description, "Cancel a running background job.");
    // Text-only tools, and no prompt section.
    assert!(defs.iter().all(|d| d.output_schema.is_none()));
    assert!(f.mount.prompt_section().await.unwrap().is_none());
    let card = f
        .mount
        .ui_card("job_wait", r#"{"id":"bash-1"}"#)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (card.title.as_str(), card.kind.as_str()),
        ("Wait for background job bash-1", "read")
    );
    assert!(f.mount.ui_card("job_output", "{}").await.unwrap().is_none());
}

#[tokio::test]
async fn switching_a_mount_to_profile_c_is_one_config_value() {
    // 9.6 preset tests: the job tools exist only where the plugin is mounted, and
    // as the configured profile's.
    let registry = host::JobRegistry::default();
    let a = Mount::new(runtime(), registry.clone(), "{}").await.unwrap();
    let c = Mount::new(runtime(), registry.clone(), r#"{"profile":"c"}"#)
        .await
        .unwrap();
    let names = |defs: Vec<host::plugin::ToolDefinition>| {
        defs.into_iter().map(|d| d.name).collect::<Vec<_>>()
    };
    assert!(!names(a.tool_definitions().await.unwrap()).contains(&"job_status".to_owned()));
    assert!(names(c.tool_definitions().await.unwrap()).contains(&"job_status".to_owned()));
    assert!(c.pulls_notices() && !a.pulls_notices());
}

#[tokio::test]
async fn a_job_runs_then_succeeds_with_its_result() {
    let f = profile_c("").await;
    let (id, release) = gated_job(&f, "query", Ok("42 rows"));
    assert_eq!(id, "query-1");
    f.clock.advance(980);
    let running = call(&f, &f.alice, "job_status", json!({"id": id})).await;
    assert!(!running.is_error);
    assert!(running.value.is_none());
    assert_eq!(
        running.text,
        "job query-1 (query) \u{2014} running after 980ms"
    );

    f.clock.advance(3230);
    finish(&f, &id, release).await;
    let done = f.registry.inspect(&id).unwrap();
    assert_eq!(done.status, JobStatus::Completed);
    assert!(done.finished_at.is_some());
    let status = call(&f, &f.alice, "job_status", json!({"id": id})).await;
    assert_eq!(
        status.text,
        "job query-1 (query) \u{2014} succeeded after 4.21s\n42 rows"
    );
    // A finished job's duration no longer grows.
    f.clock.advance(60_000);
    let list = call(&f, &f.alice, "job_list", json!({})).await;
    assert_eq!(
        list.text,
        "query-1\tsucceeded\tquery\t4.21s\tquery the data"
    );
    // A finished job_wait answers like job_status.
    let waited = call(&f, &f.alice, "job_wait", json!({"id": id})).await;
    assert_eq!(waited.text, status.text);
}

#[tokio::test]
async fn an_error_and_a_panic_both_fail() {
    let f = profile_c("").await;
    let (id, release) = gated_job(&f, "query", Err("query exploded"));
    f.clock.advance(1500);
    finish(&f, &id, release).await;
    let status = call(&f, &f.alice, "job_status", json!({"id": id})).await;
    assert_eq!(
        status.text,
        "job query-1 (query) \u{2014} failed after 1.5s\nquery exploded"
    );

    let job = InProcessJob::new("query", "doomed").owner(f.alice.clone());
    let panicked = start_final(&f.registry, job, |_ctx| async move {
        if true {
            panic!("boom");
        }
        Ok(String::new())
    })
    .unwrap();
    // The job's task runs only when this (single-threaded) test yields.
    f.clock.advance(61_400);
    f.registry.settled(&panicked).await;
    let status = call(&f, &f.alice, "job_status", json!({"id": panicked})).await;
    assert_eq!(
        status.text,
        "job query-2 (query) \u{2014} failed after 1m1.4s\njob panicked: boom"
    );
}

#[tokio::test]
async fn another_owners_job_is_not_found_like_an_unknown_one() {
    let f = profile_c("").await;
    let (id, release) = gated_job(&f, "query", Ok("42 rows"));
    for tool in ["job_status", "job_wait", "job_cancel"] {
        let foreign = call(&f, &f.bob, tool, json!({"id": id, "timeout_seconds": 1})).await;
        assert!(foreign.is_error);
        assert_eq!(foreign.text, "error: agentcore: job not found", "{tool}");
        let unknown = call(&f, &f.bob, tool, json!({"id": "query-99"})).await;
        assert_eq!(unknown.text, foreign.text, "{tool}");
    }
    assert_eq!(
        call(&f, &f.bob, "job_list", json!({})).await.text,
        "No background jobs."
    );
    // Bob's cancel changed nothing.
    assert_eq!(f.registry.inspect(&id).unwrap().status, JobStatus::Running);

    f.clock.advance(42);
    finish(&f, &id, release).await;
    assert_eq!(f.mount.pull_notice(&f.bob).await.unwrap(), None);
    let notice = f.mount.pull_notice(&f.alice).await.unwrap().unwrap();
    assert_eq!(
        notice.text,
        "Background job update:\n- query-1 (query, succeeded, 42ms):\n42 rows"
    );
    assert_eq!(notice.plugin, "jobs");
    assert_eq!((notice.summary, notice.form), (None, None));
}

#[tokio::test]
async fn missing_ids_and_bad_arguments_are_errors() {
    let f = profile_c("").await;
    for args in [
        json!({}),
        json!({"id": ""}),
        json!({"id": null}),
        Value::Null,
    ] {
        let out = call(&f, &f.alice, "job_status", args).await;
        assert!(out.is_error);
        assert_eq!(out.text, "error: id is required");
    }
    let bad = call(
        &f,
        &f.alice,
        "job_wait",
        json!({"id": "query-1", "timeout_seconds": 1.5}),
    )
    .await;
    assert!(bad.is_error);
    assert!(
        bad.text.starts_with("error: invalid arguments: "),
        "{}",
        bad.text
    );
    let bad = call(&f, &f.alice, "job_cancel", json!({"id": 7})).await;
    assert!(bad.text.starts_with("error: invalid arguments: "));
    let not_json = f.mount.invoke(Some(&f.alice), "job_status", "{").await;
    assert!(not_json.text.starts_with("error: invalid arguments: "));
    assert_eq!(
        call(&f, &f.alice, "job_cancel", json!({"id": "nope-1"}))
            .await
            .text,
        "error: agentcore: job not found"
    );
}

#[tokio::test]
async fn cancel_is_requested_then_repeats_as_a_no_op() {
    let f = profile_c("").await;
    let job = InProcessJob::new("crawl", "crawl site").owner(f.alice.clone());
    let id = start_final(&f.registry, job, |ctx: JobContext| async move {
        ctx.cancelled().await;
        Err("context canceled".to_owned())
    })
    .unwrap();
    f.clock.advance(7);
    let first = call(&f, &f.alice, "job_cancel", json!({"id": id})).await;
    assert_eq!(first.text, "Cancellation requested for crawl-1.");
    f.registry.settled(&id).await;
    let second = call(&f, &f.alice, "job_cancel", json!({"id": id})).await;
    assert_eq!(second.text, first.text);
    assert!(!second.is_error);
    let status = call(&f, &f.alice, "job_status", json!({"id": id})).await;
    assert_eq!(
        status.text,
        "job crawl-1 (crawl) \u{2014} cancelled after 7ms\ncontext canceled"
    );
    // Cancelled jobs are announced too, with nothing after the line.
    let notice = f.mount.pull_notice(&f.alice).await.unwrap().unwrap();
    assert_eq!(
        notice.text,
        "Background job update:\n- crawl-1 (crawl, cancelled, 7ms)"
    );
}

#[tokio::test]
async fn closing_one_run_leaves_other_owners_jobs_alone() {
    let f = profile_c("").await;
    let (alice_job, alice_control) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    let (bob_job, _bob_control) = f.start(ScriptedJob::stream(Some(&f.bob))).unwrap();
    tokio::join!(
        f.registry.dispose_owner(&f.alice),
        alice_control.settle_when_cancelled(OutcomeStatus::Killed, Some("context canceled"))
    );
    assert_eq!(alice_control.cancels(), [Some("owner disposed".to_owned())]);
    assert!(f.registry.inspect(&alice_job).is_none());
    assert_eq!(
        f.registry.inspect(&bob_job).unwrap().status,
        JobStatus::Running
    );
    // Nothing is reported for the closed run.
    assert_eq!(f.mount.pull_notice(&f.alice).await.unwrap(), None);
}

#[tokio::test]
async fn a_drain_announces_each_job_once() {
    let f = profile_c("").await;
    assert_eq!(f.mount.pull_notice(&f.alice).await.unwrap(), None);
    let (id, release) = gated_job(&f, "query", Ok("42 rows"));
    assert_eq!(f.mount.pull_notice(&f.alice).await.unwrap(), None);
    finish(&f, &id, release).await;
    // Seen through job_wait first: still announced (no reported bit in C).
    call(&f, &f.alice, "job_wait", json!({"id": id})).await;
    assert!(f.mount.pull_notice(&f.alice).await.unwrap().is_some());
    assert_eq!(f.mount.pull_notice(&f.alice).await.unwrap(), None);
}

/// What `job_status` shows below its first line for a finished export whose
/// output is `output`, under `maxResultBytes: bound`.
async fn result_under(bound: u64, output: String) -> String {
    let f = profile_c(&format!(r#","maxResultBytes":{bound}"#)).await;
    let job = InProcessJob::new("export", "export").owner(f.alice.clone());
    let id = start_final(&f.registry, job, move |_ctx| async move { Ok(output) }).unwrap();
    f.registry.settled(&id).await;
    let status = call(&f, &f.alice, "job_status", json!({"id": id})).await;
    let (_, result) = status.text.split_once('\n').unwrap();
    result.to_owned()
}

#[tokio::test]
async fn results_lose_their_middle_past_max_result_bytes() {
    let result = result_under(200, "x".repeat(50_000) + &"y".repeat(50_000)).await;
    assert!(result.len() <= 200, "{} bytes", result.len());
    assert_eq!(
        result,
        format!(
            "{}\n\u{2026}[99864 bytes truncated]\u{2026}\n{}",
            "x".repeat(90),
            "y".repeat(46)
        )
    );
}

#[tokio::test]
async fn truncation_never_splits_a_character() {
    let result = result_under(100, "界".repeat(1000)).await;
    assert!(result.len() <= 100);
    // 36 bytes of budget: a head of 24 (8 characters) and a tail of 12 (4).
    assert_eq!(
        result,
        format!(
            "{}\n\u{2026}[2964 bytes truncated]\u{2026}\n{}",
            "界".repeat(8),
            "界".repeat(4)
        )
    );
}

#[tokio::test]
async fn the_tail_takes_what_the_heads_cut_gave_up() {
    // 138 bytes of budget: the head's 92 come back to 90 at a character
    // boundary, and the tail may use the 2 it gave up, as the Go plugin does.
    let result = result_under(202, "界".repeat(1000)).await;
    assert_eq!(
        result,
        format!(
            "{}\n\u{2026}[2862 bytes truncated]\u{2026}\n{}",
            "界".repeat(30),
            "界".repeat(16)
        )
    );
}

#[tokio::test]
async fn a_bound_too_small_for_both_ends_keeps_a_head_and_a_marker() {
    // Go's truncateBytes: at 40 the marker's 15 bytes leave a 25-byte head;
    // at 15 or less the marker alone is not shorter than the bound.
    let long = "0123456789".repeat(10);
    let result = result_under(40, long.clone()).await;
    assert_eq!(result, format!("{}\n\u{2026}[truncated]", &long[..25]));
    assert_eq!(result.len(), 40);
    for (bound, head) in [(1, "h"), (5, "hello")] {
        let result = result_under(bound, "hello, world".to_owned()).await;
        assert_eq!(result, format!("{head}\n\u{2026}[truncated]"));
    }
}

#[tokio::test]
async fn ids_are_trimmed_as_the_go_plugin_trims_them() {
    let f = profile_c("").await;
    let (id, release) = gated_job(&f, "query", Ok("rows"));
    for tool in ["job_status", "job_wait", "job_cancel"] {
        let blank = call(&f, &f.alice, tool, json!({"id": "   "})).await;
        assert!(blank.is_error);
        assert_eq!(blank.text, "error: id is required");
    }
    let padded = json!({"id": format!(" {id} ")});
    let status = call(&f, &f.alice, "job_status", padded.clone()).await;
    assert!(!status.is_error, "{}", status.text);
    assert!(status.text.starts_with(&format!("job {id} (query)")));
    finish(&f, &id, release).await;
    // Go's job_wait checks the trimmed id for emptiness but waits on the id
    // as given, so a padded id is not found there.
    let waited = call(&f, &f.alice, "job_wait", padded.clone()).await;
    assert_eq!(waited.text, "error: agentcore: job not found");
    let waited = call(&f, &f.alice, "job_wait", json!({"id": id})).await;
    assert!(waited.text.ends_with("\nrows"), "{}", waited.text);
    let cancel = call(&f, &f.alice, "job_cancel", padded).await;
    assert_eq!(cancel.text, format!("Cancellation requested for {id}."));
}

#[tokio::test]
async fn job_wait_times_out_and_leaves_the_job_running() {
    let f = profile_c("").await;
    let (id, release) = gated_job(&f, "crawl", Ok("done"));
    let out = call(
        &f,
        &f.alice,
        "job_wait",
        json!({"id": id, "timeout_seconds": 1}),
    )
    .await;
    assert!(!out.is_error);
    assert_eq!(
        out.text,
        "Job crawl-1 is still running after 1s. It was not cancelled \u{2014} continue with other work and check job_status later."
    );
    assert_eq!(f.registry.inspect(&id).unwrap().status, JobStatus::Running);
    // A wait that sees the end answers like job_status.
    let wait = call(&f, &f.alice, "job_wait", json!({"id": id}));
    tokio::pin!(wait);
    tokio::select! {
        _ = &mut wait => panic!("the job has not finished"),
        () = crate::fixture::until_waiting(&f.registry, &id) => {}
    }
    f.clock.advance(2500);
    release.send(()).unwrap();
    assert_eq!(
        wait.await.text,
        "job crawl-1 (crawl) \u{2014} succeeded after 2.5s\ndone"
    );
}

#[tokio::test]
async fn max_wait_seconds_bounds_every_wait() {
    let f = profile_c(r#","maxWaitSeconds":1"#).await;
    let (id, _release) = gated_job(&f, "crawl", Ok("done"));
    for args in [
        json!({"id": id, "timeout_seconds": 3600}),
        json!({"id": id, "timeout_seconds": 0}),
        json!({"id": id, "timeout_seconds": -5}),
        json!({"id": id}),
    ] {
        let out = call(&f, &f.alice, "job_wait", args).await;
        assert!(
            out.text
                .starts_with("Job crawl-1 is still running after 1s.")
        );
    }
}

#[tokio::test]
async fn the_list_is_newest_first_and_tab_separated() {
    let f = profile_c("").await;
    assert_eq!(
        call(&f, &f.alice, "job_list", json!({})).await.text,
        "No background jobs."
    );
    let (first, release) = gated_job(&f, "crawl", Err("dial tcp: connection refused"));
    let (_second, _keep) = gated_job(&f, "render", Ok("pdf"));
    f.clock.advance(1200);
    finish(&f, &first, release).await;
    f.clock.advance(800);
    let list = call(&f, &f.alice, "job_list", json!({})).await;
    assert_eq!(
        list.text,
        "render-1\trunning\trender\t2s\trender the data\ncrawl-1\tfailed\tcrawl\t1.2s\tcrawl the data"
    );
}

#[tokio::test]
async fn one_update_inlines_small_results_and_points_at_large_ones() {
    let f = profile_c("").await;
    let (small, release_small) = gated_job(&f, "crawl_site", Ok("3 pages"));
    let (big, release_big) = gated_job(&f, "render_pdf", Ok(&"p".repeat(5000)));
    let (failed, release_failed) = gated_job(&f, "crawl_site", Err("dial tcp: connection refused"));
    f.clock.advance(10);
    finish(&f, &small, release_small).await;
    f.clock.advance(20);
    finish(&f, &big, release_big).await;
    f.clock.advance(30);
    finish(&f, &failed, release_failed).await;
    let notice = f.mount.pull_notice(&f.alice).await.unwrap().unwrap();
    assert_eq!(
        notice.text,
        "Background job update:\n\
         - crawl_site-1 (crawl_site, succeeded, 10ms):\n3 pages\n\
         - render_pdf-1 (render_pdf, succeeded, 30ms): 5000 bytes of output \u{2014} call job_status with id \"render_pdf-1\" to read it.\n\
         - crawl_site-2 (crawl_site, failed, 60ms): dial tcp: connection refused"
    );
}

#[tokio::test]
async fn suppress_completion_notice_turns_the_update_off() {
    let f = profile_c(r#","suppressCompletionNotice":true"#).await;
    let (id, release) = gated_job(&f, "query", Ok("42 rows"));
    finish(&f, &id, release).await;
    assert_eq!(f.mount.pull_notice(&f.alice).await.unwrap(), None);
    // Nothing is pushed either.
    f.mount.flush_notices().await;
    assert!(f.alice.inbox().unwrap().messages().is_empty());
    let status = call(&f, &f.alice, "job_status", json!({"id": id})).await;
    assert!(status.text.ends_with("\n42 rows"));
}

#[tokio::test]
async fn launching_needs_the_plugin() {
    // 9.6: `From` is ok only with the plugin; a launcher without it fails.
    let registry = host::JobRegistry::default();
    let owner = Owner::new("alice");
    registry.agents().register(&owner);
    assert!(!registry.serves(Some(&owner)));
    let job = InProcessJob::new("query", "count").owner(owner.clone());
    let refused = start_final(&registry, job.clone(), |_ctx| async { Ok(String::new()) });
    assert_eq!(refused, Err(StartError::NoController));
    let _mount = Mount::new(runtime(), registry.clone(), r#"{"profile":"c"}"#)
        .await
        .unwrap();
    assert!(registry.serves(Some(&owner)));
    assert!(start_final(&registry, job, |_ctx| async { Ok(String::new()) }).is_ok());
}

/// A session of `id` with its own profile C mount (results up to 300 bytes)
/// and a real shell producer.
async fn bash_session(f: &Fixture, id: &str) -> (Session, BashProducer) {
    let bash = BashProducer::new(f.registry.clone(), BashConfig::default()).unwrap();
    let mount = Mount::new(
        runtime(),
        f.registry.clone(),
        r#"{"profile":"c","maxResultBytes":300}"#,
    )
    .await
    .unwrap();
    let (session, _announced) = Session::open(id, Arc::new(mount), bash.clone());
    (session, bash)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shell_job_shows_both_ends_of_its_output_and_its_exit_code() {
    let f = profile_c("").await;
    let (session, _bash) = bash_session(&f, "run-1").await;
    let started = session
        .call(
            "bash",
            &json!({"command": "seq 1 100000; echo oops >&2; exit 3"}),
        )
        .await;
    assert_eq!(started.outcome.text, "started background job bash-1");
    let done = session.call("job_wait", &json!({"id": "bash-1"})).await;
    let text = &done.outcome.text;
    let (header, result) = text.split_once('\n').unwrap();
    // The clock stands still, so a real process takes no time by it.
    assert_eq!(header, "job bash-1 (bash) \u{2014} succeeded after 0s");
    // 300 bytes: a head of 157 and a tail of 79, then the exit code.
    let (head, rest) = result.split_once("\n\u{2026}[").unwrap();
    assert!(head.starts_with("1\n2\n3\n"), "{head}");
    assert_eq!(head.len(), 157);
    let (_, tail) = rest.split_once("]\u{2026}\n").unwrap();
    assert!(
        tail.ends_with("99999\n100000\n[stderr]\noops\n[exit code: 3]"),
        "{tail}"
    );
    // One update, pulled at a step boundary, inlines the same (small) result.
    let notices: Vec<_> = started.notices.iter().chain(&done.notices).collect();
    assert_eq!(notices.len(), 1);
    assert_eq!(
        notices[0].text,
        format!("Background job update:\n- bash-1 (bash, succeeded, 0s):\n{result}")
    );
    session.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_a_run_cancels_its_jobs_and_reports_nothing_later() {
    let f = profile_c("").await;
    let (session, bash) = bash_session(&f, "durable").await;
    session.call("bash", &json!({"command": "sleep 30"})).await;
    session.close().await;
    assert!(f.registry.inspect("bash-1").is_none());
    // The next run of the same session starts clean.
    let mount = Arc::new(
        Mount::new(runtime(), f.registry.clone(), r#"{"profile":"c"}"#)
            .await
            .unwrap(),
    );
    let (next, _announced) = Session::open("durable", mount, bash);
    let list = next.call("job_list", &json!({})).await;
    assert_eq!(list.outcome.text, "No background jobs.");
    assert!(list.notices.is_empty());
    next.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_utf8_reads_as_replacement_characters() {
    let f = profile_c("").await;
    let (session, _bash) = bash_session(&f, "run-bytes").await;
    session
        .call("bash", &json!({"command": r"printf '\377\376abc'"}))
        .await;
    let done = session.call("job_wait", &json!({"id": "bash-1"})).await;
    let (_, result) = done.outcome.text.split_once('\n').unwrap();
    assert_eq!(result, "\u{FFFD}\u{FFFD}abc\n[exit code: 0]");
    session.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_no_longer_held_is_counted_as_truncated() {
    let f = profile_c("").await;
    // 100 bytes kept in memory, and no spill file past 200: the start of a
    // 1000-byte output is gone for good.
    let config = BashConfig {
        limits: host::capture::OutputLimits {
            max_output_bytes: 100,
            max_spill_bytes: 200,
        },
        ..BashConfig::default()
    };
    let bash = BashProducer::new(f.registry.clone(), config).unwrap();
    let mount = Mount::new(
        runtime(),
        f.registry.clone(),
        r#"{"profile":"c","maxResultBytes":300}"#,
    )
    .await
    .unwrap();
    let (session, _announced) = Session::open("run-lossy", Arc::new(mount), bash);
    session
        .call("bash", &json!({"command": "printf '%0999d\\n' 7"}))
        .await;
    let done = session.call("job_wait", &json!({"id": "bash-1"})).await;
    let (_, result) = done.outcome.text.split_once('\n').unwrap();
    // No head; the last 79 bytes of the tail, and the other 921 said to be cut.
    assert_eq!(
        result,
        format!(
            "\n\u{2026}[921 bytes truncated]\u{2026}\n{}7\n[exit code: 0]",
            "0".repeat(77)
        )
    );
    session.close().await;
}
