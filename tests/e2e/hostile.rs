//! Hostile arguments a model may send with the extensions on: patterns that
//! cost memory to parse or time to match, lines far longer than anything
//! shown, names that would act on a terminal. Each is bounded before it costs
//! anything, or stops within its budget and says so, and the session goes on.

use std::sync::Arc;
use std::time::Duration;

use host::bash::{BashConfig, BashProducer};
use host::session::Session;
use host::{JobRegistry, Mount};
use serde_json::{Value, json};

use crate::fixture::runtime;

async fn session() -> Session {
    let registry = JobRegistry::default();
    let producer = BashProducer::new(registry.clone(), BashConfig::default()).unwrap();
    let mount = Mount::new(runtime(), registry, r#"{"extensions": true}"#)
        .await
        .unwrap();
    Session::open("hostile", Arc::new(mount), producer).0
}

async fn call(session: &Session, tool: &str, args: Value) -> (String, bool) {
    let reply = session.call(tool, &args).await;
    (reply.outcome.text, reply.outcome.is_error)
}

/// Starts `command` and waits until it has ended; its id.
async fn finished_job(session: &Session, command: &str) -> String {
    let (started, _) = call(session, "bash", json!({"command": command})).await;
    let id = started
        .strip_prefix("started background job ")
        .unwrap_or_else(|| panic!("{started}"))
        .to_owned();
    // A status list never consumes output: poll it until the job is done.
    for _ in 0..6000 {
        let (list, _) = call(session, "job_list", json!({})).await;
        if list.contains(&format!("{id} [bash] completed")) {
            return id;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{id} did not finish");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_patterns_are_refused_before_anything_is_compiled() {
    let s = session().await;
    let id = finished_job(&s, "echo hi").await;
    // A megabyte of `\w` once took gigabytes to parse.
    let huge = "\\w".repeat(500_000);
    let (text, is_error) = call(&s, "job_log", json!({"job_id": id, "search": huge})).await;
    assert!(is_error);
    assert_eq!(
        text,
        "Error: invalid search: the pattern is 1000000 bytes, more than the limit of 4096"
    );
    let (text, is_error) = call(
        &s,
        "job_output",
        json!({"job_id": id, "until": "\\pL".repeat(2000)}),
    )
    .await;
    assert!(is_error);
    assert!(
        text.starts_with("Error: invalid until: the pattern is 6000 bytes"),
        "{text}"
    );
    // The host holds the same bound for a guest that would not.
    let err = host::registry::control::compile_pattern(&"a".repeat(4097)).unwrap_err();
    assert_eq!(
        err,
        "the pattern is 4097 bytes, more than the limit of 4096"
    );
    // Nothing was consumed: the output is all there.
    let (text, _) = call(&s, "job_output", json!({"job_id": id})).await;
    assert_eq!(text, "hi\n[status: completed, exit code: 0]");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_search_stops_within_its_budget_and_says_where() {
    let s = session().await;
    // 300 lines on which `[a-z]{3000}[A-Z]` backtracks for a long time each.
    let id = finished_job(
        &s,
        "for i in $(seq 300); do head -c 4000 /dev/zero | tr '\\0' a; echo; done",
    )
    .await;
    let started = std::time::Instant::now();
    let (text, is_error) = call(
        &s,
        "job_log",
        json!({"job_id": id, "search": "[a-z]{3000}[A-Z]", "context": 0}),
    )
    .await;
    assert!(!is_error, "{text}");
    // Every line would take seconds in all; the budget is half a second.
    assert!(
        text.contains(": the search ran out of time, so later lines were not searched]"),
        "{text}"
    );
    assert!(text.starts_with("[search /[a-z]{3000}[A-Z]/ in stdout and stderr: 0 matches; stopped early at stdout line "), "{text}");
    // The call answered well within the guest's own budget (it did not trap).
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_of_megabytes_pages_as_its_first_kilobytes() {
    let s = session().await;
    let id = finished_job(
        &s,
        "head -c 20000000 /dev/zero | tr '\\0' x; echo; echo after",
    )
    .await;
    let (text, is_error) = call(&s, "job_log", json!({"job_id": id, "lines": 2})).await;
    assert!(!is_error, "{text}");
    let rows: Vec<&str> = text.lines().collect();
    // The long line is shown cut to the line bound with `…`; the next one whole.
    let first = rows.iter().find(|r| r.starts_with("1:")).unwrap();
    assert!(
        first.ends_with('\u{2026}'),
        "{}",
        &first[first.len() - 10..]
    );
    assert!(first.len() <= 4096 + 2, "{}", first.len());
    assert!(rows.contains(&"2:after"), "{text}");
    let (text, _) = call(
        &s,
        "job_log",
        json!({"job_id": id, "search": "^after$", "context": 1}),
    )
    .await;
    assert!(text.contains("2:after"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_that_would_act_on_a_terminal_are_refused() {
    let s = session().await;
    for name in ["web\u{1b}[31m", "a\rb", "x\u{202e}gnp.exe", "tab\there"] {
        let (text, is_error) = call(&s, "bash", json!({"command": "true", "name": name})).await;
        assert!(is_error, "{name:?}");
        assert!(
            text.starts_with("Error: invalid name: it contains the control character U+"),
            "{text}"
        );
    }
    let (text, _) = call(&s, "job_list", json!({})).await;
    assert_eq!(text, "(no background jobs)");
    let (text, is_error) = call(&s, "bash", json!({"command": "true", "name": "web-ü"})).await;
    assert!(!is_error, "{text}");
}
