//! The start tool through the real component: the guest defines `bash`,
//! checks its arguments and words every answer, and the host only starts.
//! What the model reads is the same under every profile's session as the
//! contract and the book give it; a refused start names the profile's own
//! tools.

use std::sync::Arc;

use host::bash::{BashConfig, BashProducer};
use host::session::Session;
use host::{AgentDirectory, JobRegistry, Mount, RegistryConfig};
use serde_json::{Value, json};

use crate::fixture::runtime;

async fn session(config: &str, limit: u64) -> Session {
    let registry = JobRegistry::new(
        RegistryConfig::with_max_concurrent_jobs_per_owner(limit).unwrap(),
        AgentDirectory::default(),
    );
    let producer = BashProducer::new(registry.clone(), BashConfig::default()).unwrap();
    let mount = Mount::new(runtime(), registry, config).await.unwrap();
    Session::open("starter", Arc::new(mount), producer).0
}

async fn call(session: &Session, tool: &str, args: Value) -> (String, bool, Option<Value>) {
    let reply = session.call(tool, &args).await;
    (
        reply.outcome.text,
        reply.outcome.is_error,
        reply.outcome.value,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admission_limit_names_each_profile_s_kill_tool() {
    for (profile, text) in [
        (
            "a",
            "Error: background job limit reached for this owner (limit: 1); use job_kill to stop an unneeded job, wait for it to finish, then retry",
        ),
        (
            "b",
            "Error: background task limit reached for this owner (limit: 1); use task_kill to stop an unneeded task, wait for it to finish, then retry",
        ),
        (
            "c",
            "Error: background job limit reached for this owner (limit: 1); use job_cancel to stop an unneeded job, wait for it to finish, then retry",
        ),
    ] {
        let s = session(&format!(r#"{{"profile": "{profile}"}}"#), 1).await;
        let (first, is_error, value) = call(&s, "bash", json!({"command": "sleep 30"})).await;
        assert_eq!(first, "started background job bash-1", "{profile}");
        assert!(!is_error);
        assert_eq!(
            value,
            Some(json!({"kind": "background", "jobId": "bash-1"}))
        );
        let (second, is_error, value) = call(&s, "bash", json!({"command": "sleep 30"})).await;
        assert_eq!(second, text, "{profile}");
        assert!(is_error);
        assert_eq!(value, None);
        // Nothing was registered for the refused start.
        assert_eq!(s.registry().list(Some(s.owner())).len(), 1, "{profile}");
        s.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_arguments_start_nothing_and_the_host_s_own_checks_pass_through() {
    let s = session(r#"{"extensions": ["ports"]}"#, 10).await;
    for (args, text) in [
        (
            json!({"command": "x", "name": "a\u{202e}b"}),
            "Error: invalid name: it contains the control character U+202E",
        ),
        (
            json!({"command": " "}),
            "Error: invalid command: expected a non-blank string",
        ),
        (
            json!({"command": "true", "workdir": "/etc/passwd"}),
            "Error: invalid workdir: /etc/passwd is not a directory",
        ),
        (
            json!({"command": "x".repeat(70_000)}),
            "Error: invalid command: 70000 bytes is more than the limit of 65536 bytes",
        ),
    ] {
        let (got, is_error, _) = call(&s, "bash", args).await;
        assert_eq!(got, text);
        assert!(is_error);
    }
    assert!(s.registry().list(Some(s.owner())).is_empty());
    let (first, ..) = call(&s, "bash", json!({"command": "sleep 30", "name": "web"})).await;
    assert_eq!(first, "started background job bash-1");
    let (again, is_error, value) =
        call(&s, "bash", json!({"command": "sleep 30", "name": "web"})).await;
    assert_eq!(
        again,
        "background job bash-1 named \"web\" is already running; not started again"
    );
    assert!(!is_error);
    assert_eq!(
        value,
        Some(json!({"kind": "background", "jobId": "bash-1"}))
    );
    s.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_lists_the_guest_s_start_tool_first() {
    for profile in ["a", "b", "c"] {
        let s = session(&format!(r#"{{"profile": "{profile}"}}"#), 10).await;
        let tools = s.tool_definitions().await.unwrap();
        let start = &tools[0];
        assert_eq!(start.name, "bash");
        assert!(
            start
                .description
                .starts_with("Run a shell command in the background")
        );
        assert!(start.annotations.open_world_hint && !start.annotations.read_only_hint);
        let schema: Value = serde_json::from_str(&start.input_schema).unwrap();
        assert_eq!(schema["required"], json!(["command"]));
        assert!(tools[1..].iter().all(|t| t.name != "bash"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_that_yields_answers_a_short_command_with_its_read() {
    let s = session(r#"{"extensions": ["yield"]}"#, 10).await;
    let (text, is_error, value) =
        call(&s, "bash", json!({"command": "echo hi", "yield_ms": 30000})).await;
    assert_eq!(text, "hi\n[status: completed, exit code: 0]");
    assert!(!is_error);
    assert_eq!(
        value,
        Some(json!({"kind": "background", "jobId": "bash-1"}))
    );
    // The yield saw the end and the answer showed it: read, so no notice.
    let reply = s.call("job_list", &json!({})).await;
    assert!(reply.notices.is_empty(), "{:?}", reply.notices);
    let (again, ..) = call(&s, "job_output", json!({"job_id": "bash-1"})).await;
    assert_eq!(again, "(no new output)\n[status: completed, exit code: 0]");
    s.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_that_yields_leaves_a_long_command_running() {
    let s = session(r#"{"extensions": ["yield"]}"#, 10).await;
    let (text, is_error, _) =
        call(&s, "bash", json!({"command": "sleep 30", "yield_ms": 250})).await;
    assert_eq!(
        text,
        "started background job bash-1\n(no new output)\n[status: running]"
    );
    assert!(!is_error);
    let job = s.registry().inspect("bash-1").unwrap();
    assert_eq!(job.status, host::JobStatus::Running);
    assert!(!job.reported);
    s.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_yielding_start_in_profile_c_answers_with_the_status_and_result() {
    let s = session(r#"{"profile": "c", "extensions": ["yield"]}"#, 10).await;
    let (text, _, _) = call(&s, "bash", json!({"command": "echo hi", "yield_ms": 30000})).await;
    assert!(
        text.starts_with("job bash-1 (bash) \u{2014} succeeded after "),
        "{text}"
    );
    assert!(text.ends_with("\nhi\n[exit code: 0]"), "{text}");
    // Seen, so no `Background job update:` follows.
    let reply = s.call("job_list", &json!({})).await;
    assert!(reply.notices.is_empty(), "{:?}", reply.notices);
    let (running, ..) = call(&s, "bash", json!({"command": "sleep 30", "yield_ms": 250})).await;
    assert_eq!(running, "started background job bash-2");
    s.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_yield_out_of_range_is_refused_and_one_without_the_extension_is_ignored() {
    let s = session(r#"{"extensions": ["yield"]}"#, 10).await;
    for (asked, shown) in [
        (json!(100), "100"),
        (json!(30001), "30001"),
        (json!("1s"), "\"1s\""),
    ] {
        let (text, is_error, _) =
            call(&s, "bash", json!({"command": "true", "yield_ms": asked})).await;
        assert!(is_error);
        assert_eq!(
            text,
            format!(
                "Error: invalid yield_ms: expected a whole number of milliseconds from 250 to 30000, got {shown}"
            )
        );
    }
    assert!(s.registry().list(Some(s.owner())).is_empty());
    let plain = session("{}", 10).await;
    let (text, ..) = call(&plain, "bash", json!({"command": "true", "yield_ms": 5000})).await;
    assert_eq!(text, "started background job bash-1");
    s.close().await;
    plain.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_yield_answers_wait_aborted_and_the_job_runs_on() {
    let s = Arc::new(session(r#"{"extensions": ["yield"]}"#, 10).await);
    let abort = host::CancellationToken::new();
    let call = {
        let (s, abort) = (s.clone(), abort.clone());
        tokio::spawn(async move {
            s.call_with_abort(
                "bash",
                &json!({"command": "sleep 30", "yield_ms": 30000}),
                &abort,
            )
            .await
        })
    };
    // Once the job is registered, the yield is under way (or about to be).
    while s.registry().inspect("bash-1").is_none() {
        tokio::task::yield_now().await;
    }
    abort.cancel();
    let reply = call.await.unwrap();
    assert!(reply.outcome.is_error);
    assert_eq!(reply.outcome.text, "Error: wait aborted");
    let job = s.registry().inspect("bash-1").unwrap();
    assert_eq!(job.status, host::JobStatus::Running);
    assert!(!job.reported);
    s.close().await;
}
