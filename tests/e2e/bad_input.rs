//! Malformed tool calls get the contract's errors through the component and change
//! nothing.

use crate::fixture::{Fixture, ScriptedJob};
use host::{JobStatus, RegistryConfig};

#[tokio::test]
async fn malformed_calls_get_exact_errors_and_change_nothing() {
    let f = Fixture::with_config(
        r#"{"waitTimeoutMs":10,"maxWaitTimeoutMs":20}"#,
        RegistryConfig::default(),
    )
    .await;
    let (id, job) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    job.push(&["still unread\n"]);
    let huge_id = "b".repeat(100_000);

    let table: Vec<(&str, String, String)> = vec![
        ("job_output", "{}".into(), r#"Error: invalid arguments: missing required property "job_id""#.into()),
        ("job_output", r#"{"job_id":7}"#.into(), r#"Error: invalid arguments: "job_id" must be a string"#.into()),
        ("job_output", r#"{"job_id":null}"#.into(), r#"Error: invalid arguments: "job_id" must be a string"#.into()),
        (
            "job_output",
            format!(r#"{{"job_id":"{id}","wait":"yes"}}"#),
            r#"Error: invalid arguments: "wait" must be a boolean"#.into(),
        ),
        (
            "job_output",
            format!(r#"{{"job_id":"{id}","wait":true,"timeout_ms":"10"}}"#),
            r#"Error: invalid arguments: "timeout_ms" must be a number"#.into(),
        ),
        (
            "job_output",
            r#"{"job_id":1,"wait":1,"timeout_ms":true}"#.into(),
            r#"Error: invalid arguments: "job_id" must be a string; "wait" must be a boolean; "timeout_ms" must be a number"#.into(),
        ),
        ("job_output", r#"{"job_id":""}"#.into(), r#"Error: invalid job_id: expected a non-empty string, got """#.into()),
        (
            "job_output",
            format!(r#"{{"job_id":"{id}","wait":true,"timeout_ms":0}}"#),
            "Error: invalid wait timeout: expected a positive number of milliseconds no greater than 2147483647, got 0".into(),
        ),
        (
            "job_output",
            format!(r#"{{"job_id":"{id}","wait":true,"timeout_ms":-5}}"#),
            "Error: invalid wait timeout: expected a positive number of milliseconds no greater than 2147483647, got -5".into(),
        ),
        (
            "job_output",
            format!(r#"{{"job_id":"{id}","wait":true,"timeout_ms":-0.5}}"#),
            "Error: invalid wait timeout: expected a positive number of milliseconds no greater than 2147483647, got -0.5".into(),
        ),
        ("job_output", r#"{"job_id":"bash-99"}"#.into(), "Error: unknown job bash-99".into()),
        // The id is judged before the timeout, as the registry once did it.
        (
            "job_output",
            r#"{"job_id":"bash-99","wait":true,"timeout_ms":0}"#.into(),
            "Error: unknown job bash-99".into(),
        ),
        ("job_output", format!(r#"{{"job_id":"{huge_id}"}}"#), format!("Error: unknown job {huge_id}")),
        ("job_output", "[]".into(), "Error: invalid arguments: expected an object, got array".into()),
        ("job_output", "null".into(), "Error: invalid arguments: expected an object, got null".into()),
        ("job_list", "\"x\"".into(), "Error: invalid arguments: expected an object, got string".into()),
        ("job_kill", r#"{"reason":"x"}"#.into(), r#"Error: invalid arguments: missing required property "job_id""#.into()),
        (
            "job_kill",
            format!(r#"{{"job_id":"{id}","reason":5}}"#),
            r#"Error: invalid arguments: "reason" must be a string"#.into(),
        ),
        ("job_kill", r#"{"job_id":""}"#.into(), r#"Error: invalid job_id: expected a non-empty string, got """#.into()),
        ("job_kill", r#"{"job_id":"bash-99"}"#.into(), "Error: unknown job bash-99".into()),
        ("job_frobnicate", "{}".into(), r#"Error: unknown tool "job_frobnicate""#.into()),
    ];
    for (tool, args, expected) in &table {
        let out = f.mount.invoke(Some(&f.alice), tool, args).await;
        assert!(
            out.is_error,
            "{tool} {args}: expected an error, got {}",
            out.text
        );
        assert_eq!(&out.text, expected, "{tool} {args}");
        assert_eq!(out.value, None);
    }

    // Invalid JSON, including the non-finite numbers JSON cannot carry.
    for args in [
        "{",
        r#"{"job_id":"bash-1","timeout_ms":NaN}"#,
        r#"{"job_id":"bash-1","wait":true,"timeout_ms":1e999}"#,
    ] {
        let out = f.mount.invoke(Some(&f.alice), "job_output", args).await;
        assert!(out.is_error);
        assert!(
            out.text
                .starts_with("Error: invalid arguments: not valid JSON ("),
            "{args}: {}",
            out.text
        );
    }

    // Nothing changed: still running, not reported, no waiter, delta unread.
    let snap = f.registry.inspect(&id).unwrap();
    assert_eq!(snap.status, JobStatus::Running);
    assert!(!snap.reported);
    assert_eq!(f.registry.waiter_count(&id), 0);
    assert_eq!(
        f.output(Some(&f.alice), &id).await,
        "still unread\n[status: running]"
    );
}

#[tokio::test]
async fn odd_but_valid_timeouts_are_clamped_not_refused() {
    let f = Fixture::with_config(
        r#"{"waitTimeoutMs":10,"maxWaitTimeoutMs":20}"#,
        RegistryConfig::default(),
    )
    .await;
    let (id, _job) = f.start(ScriptedJob::stream(None)).unwrap();
    for args in [
        format!(r#"{{"job_id":"{id}","wait":true,"timeout_ms":1e300}}"#),
        format!(r#"{{"job_id":"{id}","wait":true,"timeout_ms":1.5}}"#),
        // Ignored unless wait is exactly true.
        format!(r#"{{"job_id":"{id}","timeout_ms":0}}"#),
        format!(r#"{{"job_id":"{id}","wait":false,"timeout_ms":-1}}"#),
        // Undeclared keys are accepted: the schemas are open.
        format!(r#"{{"job_id":"{id}","extra":{{"deep":[1,2]}}}}"#),
    ] {
        let out = f.mount.invoke(None, "job_output", &args).await;
        assert_eq!(out.text, "(no new output)\n[status: running]", "{args}");
    }
}

#[tokio::test]
async fn a_cap_above_the_timer_bound_still_gets_the_timer_error() {
    let f = Fixture::with_config(
        r#"{"waitTimeoutMs":10,"maxWaitTimeoutMs":3000000000}"#,
        RegistryConfig::default(),
    )
    .await;
    let (id, _job) = f.start(ScriptedJob::stream(None)).unwrap();
    let out = f
        .mount
        .invoke(
            None,
            "job_output",
            &format!(r#"{{"job_id":"{id}","wait":true,"timeout_ms":2500000000}}"#),
        )
        .await;
    assert_eq!(
        out.text,
        "Error: invalid wait timeout: expected a positive number of milliseconds no greater than 2147483647, got 2500000000"
    );
}

#[tokio::test]
async fn a_fraction_of_a_millisecond_is_a_wait_of_one() {
    // The host waits in whole milliseconds; 0.25 is valid and rounds up.
    let f = Fixture::new().await;
    let (id, job) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    job.push(&["partial\n"]);
    let out = f
        .mount
        .invoke(
            Some(&f.alice),
            "job_output",
            &format!(r#"{{"job_id":"{id}","wait":true,"timeout_ms":0.25}}"#),
        )
        .await;
    assert!(!out.is_error, "{}", out.text);
    assert_eq!(out.text, "partial\n[status: running]");
    assert_eq!(f.registry.waiter_count(&id), 0);
}

#[tokio::test]
async fn bad_plugin_configs_are_refused_with_a_clear_message() {
    let registry = host::JobRegistry::default();
    for (config, expected) in [
        ("[1]", "tool-jobs: config must be a JSON object, got [1]"),
        ("{", "tool-jobs: config is not valid JSON"),
        (
            r#"{"waitTimeoutMs":0}"#,
            "tool-jobs: waitTimeoutMs must be a number of at least 1, got 0",
        ),
        (
            r#"{"maxWaitTimeoutMs":"big"}"#,
            "tool-jobs: maxWaitTimeoutMs must be a number of at least 1, got \"big\"",
        ),
        (
            r#"{"completionDelivery":"loud"}"#,
            "tool-jobs: completionDelivery must be \"quiet\" or \"wakeup\", got \"loud\"",
        ),
        (r#"{"wait":1}"#, "tool-jobs: unknown config key \"wait\""),
    ] {
        let err = host::Mount::new(crate::fixture::runtime(), registry.clone(), config)
            .await
            .err()
            .expect("refused");
        assert!(err.to_string().starts_with(expected), "{config}: {err}");
    }
}

#[tokio::test]
async fn deeply_nested_arguments_are_refused_not_a_crash() {
    let f = Fixture::new().await;
    let deep = format!(
        r#"{{"job_id":"bash-1","extra":{}{}}}"#,
        "[".repeat(5000),
        "]".repeat(5000)
    );
    let out = f.mount.invoke(None, "job_output", &deep).await;
    assert!(out.is_error);
    assert!(
        out.text
            .starts_with("Error: invalid arguments: not valid JSON (recursion limit exceeded"),
        "{}",
        out.text
    );
    // A megabyte of arguments is handled like any other call.
    let big = format!(r#"{{"job_id":"bash-1","pad":"{}"}}"#, "p".repeat(1 << 20));
    let out = f.mount.invoke(None, "job_output", &big).await;
    assert_eq!(out.text, "Error: unknown job bash-1");
    // More than the guest's allocation arena: at once (6 MiB of arguments), and
    // by growing (an array whose buffer doubles past the arena's end).
    let bigger = format!(r#"{{"job_id":"bash-1","pad":"{}"}}"#, "p".repeat(6 << 20));
    let out = f.mount.invoke(None, "job_output", &bigger).await;
    assert_eq!(out.text, "Error: unknown job bash-1");
    let many = format!(r#"{{"job_id":"bash-1","pad":[{}1]}}"#, "1,".repeat(100_000));
    let out = f.mount.invoke(None, "job_output", &many).await;
    assert_eq!(out.text, "Error: unknown job bash-1");
    // And the next call, in a fresh instance, is as usual.
    let out = f
        .mount
        .invoke(None, "job_output", r#"{"job_id":"bash-1"}"#)
        .await;
    assert_eq!(out.text, "Error: unknown job bash-1");
}
