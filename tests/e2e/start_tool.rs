//! The start tool through the real component: the guest defines `bash`,
//! checks its arguments and words every answer, and the host only starts.
//! What the model reads is the same under every profile's session as the
//! contract and the README give it; a refused start names the profile's own
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
