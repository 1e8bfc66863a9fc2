//! The tool-jobs controller tests (contract 9.1), through the real component.

use crate::fixture::{Fixture, ScriptedJob, runtime};
use host::plugin::ContentBlock;
use host::registry::{OutcomeStatus, StartError};
use host::{JobStatus, Mount, RegistryConfig};
use serde_json::json;

fn bytes(s: &str) -> usize {
    s.len()
}

// --- Setup -----------------------------------------------------------------

#[tokio::test]
async fn attaches_the_controller_on_load_and_detaches_it_with_the_plugin() {
    let f = Fixture::new().await;
    assert!(f.start(ScriptedJob::stream(Some(&f.alice))).is_ok());
    drop(f.mount);
    let err = ScriptedJob::stream(Some(&f.alice))
        .start(&f.registry)
        .unwrap_err();
    assert_eq!(err, StartError::NoController);
    assert_eq!(
        err.to_string(),
        "background jobs unavailable: no job controller serves this agent (load @buckeyestudio/toh-tool-jobs in its composition)"
    );
}

#[tokio::test]
async fn rejects_a_config_whose_default_wait_exceeds_the_cap() {
    let registry = host::JobRegistry::default();
    let err = Mount::new(
        runtime(),
        registry.clone(),
        r#"{"waitTimeoutMs":100,"maxWaitTimeoutMs":50}"#,
    )
    .await
    .err()
    .expect("config is rejected");
    assert_eq!(
        err.to_string(),
        "tool-jobs: waitTimeoutMs (100) exceeds maxWaitTimeoutMs (50)"
    );
    // A plugin that failed to load attaches nothing.
    assert_eq!(
        ScriptedJob::stream(None).start(&registry).unwrap_err(),
        StartError::NoController
    );
}

#[tokio::test]
async fn delivery_defaults_to_wakeup_and_an_unknown_lane_is_rejected() {
    let f = Fixture::new().await;
    let config = f.mount.config();
    assert_eq!(
        config.completion_delivery,
        host::plugin::CompletionDelivery::Wakeup
    );
    assert_eq!(config.max_consecutive_wakes, 3);
    assert_eq!(config.wait_timeout_ms, 30_000);
    assert_eq!(config.max_wait_timeout_ms, 600_000);
    for bad in [
        r#"{"completionDelivery":"loud"}"#,
        r#"{"maxConsecutiveWakes":0}"#,
    ] {
        assert!(
            Mount::new(runtime(), f.registry.clone(), bad)
                .await
                .is_err(),
            "{bad} must be rejected"
        );
    }
}

#[tokio::test]
async fn rejects_a_wake_budget_that_cannot_bound_anything() {
    let registry = host::JobRegistry::default();
    for bad in [
        r#"{"maxConsecutiveWakes":2.5}"#,
        r#"{"maxConsecutiveWakes":1e300}"#,
    ] {
        let err = Mount::new(runtime(), registry.clone(), bad)
            .await
            .err()
            .expect("rejected");
        assert!(err.to_string().contains("maxConsecutiveWakes"), "{err}");
    }
    let err = Mount::new(
        runtime(),
        registry.clone(),
        r#"{"maxConsecutiveWakes":2.5}"#,
    )
    .await
    .err()
    .unwrap();
    assert_eq!(
        err.to_string(),
        "tool-jobs: maxConsecutiveWakes (2.5) must be a whole number of turns"
    );
    let ok = Mount::new(runtime(), registry, r#"{"maxConsecutiveWakes":1}"#)
        .await
        .expect("1 loads");
    assert_eq!(ok.config().max_consecutive_wakes, 1);
}

#[tokio::test]
async fn renders_status_lines_with_and_without_detail() {
    let f = Fixture::new().await;
    let (id, job) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    assert_eq!(
        f.output(Some(&f.alice), &id).await,
        "(no new output)\n[status: running]"
    );
    job.settle(OutcomeStatus::Completed, Some("exit code: 0"), None)
        .await;
    assert_eq!(
        f.output(Some(&f.alice), &id).await,
        "(no new output)\n[status: completed, exit code: 0]"
    );
}

#[tokio::test]
async fn an_empty_config_registers_the_tools_and_attaches_the_controller() {
    let f = Fixture::new().await;
    let names: Vec<String> = f
        .mount
        .tool_definitions()
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.name)
        .collect();
    assert_eq!(names, ["job_output", "job_list", "job_kill"]);
    assert!(f.start(ScriptedJob::stream(None)).is_ok());
}

// --- job_output ------------------------------------------------------------

#[tokio::test]
async fn returns_the_consuming_delta_with_the_status_line() {
    let f = Fixture::new().await;
    let (id, job) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    job.push(&["line one\n", ""]);
    let first = f
        .call(Some(&f.alice), "job_output", json!({"job_id": id}))
        .await;
    assert!(!first.is_error);
    assert_eq!(first.text, "line one\n[status: running]");
    let value = first.value.unwrap();
    assert_eq!(value["text"], "line one\n");
    let public = value["job"].as_object().unwrap();
    assert_eq!(public["id"], "bash-1");
    assert_eq!(public["kind"], "bash");
    assert_eq!(public["label"], "sleep 60");
    assert_eq!(public["status"], "running");
    assert!(public["startedAt"].is_u64());
    let keys: Vec<&str> = public.keys().map(String::as_str).collect();
    assert_eq!(keys, ["id", "kind", "label", "status", "startedAt"]);
    assert_eq!(
        f.output(Some(&f.alice), &id).await,
        "(no new output)\n[status: running]"
    );
}

#[tokio::test]
async fn returns_the_final_output_of_a_settled_final_output_job() {
    let f = Fixture::new().await;
    let (id, job) = f.start(ScriptedJob::final_output(Some(&f.alice))).unwrap();
    assert_eq!(
        f.output(Some(&f.alice), &id).await,
        "(no new output)\n[status: running]"
    );
    job.settle(
        OutcomeStatus::Completed,
        Some("completed"),
        Some("the answer"),
    )
    .await;
    assert_eq!(
        f.output(Some(&f.alice), &id).await,
        "the answer\n[status: completed, completed]"
    );
    // Idempotent, not consuming.
    assert_eq!(
        f.output(Some(&f.alice), &id).await,
        "the answer\n[status: completed, completed]"
    );
}

#[tokio::test]
async fn caps_body_plus_status_to_the_producer_limit() {
    let f = Fixture::new().await;
    let (id, job) = f
        .start(ScriptedJob::stream(Some(&f.alice)).cap(48))
        .unwrap();
    job.push(&[&"界".repeat(100)]);
    let text = f.output(Some(&f.alice), &id).await;
    assert_eq!(text, "界界界\n[output truncated]\n[status: running]");
    assert_eq!(bytes(&text), 46);
}

#[tokio::test]
async fn keeps_empty_and_newline_terminated_output_exact_under_a_limit() {
    let f = Fixture::new().await;
    let (id, job) = f
        .start(ScriptedJob::stream(Some(&f.alice)).cap(64))
        .unwrap();
    job.push(&["", "line\n"]);
    assert_eq!(
        f.output(Some(&f.alice), &id).await,
        "(no new output)\n[status: running]"
    );
    assert_eq!(
        f.output(Some(&f.alice), &id).await,
        "line\n[status: running]"
    );
}

#[tokio::test]
async fn reproduces_the_read_path_worked_examples() {
    let f = Fixture::new().await;
    let (id, job) = f
        .start(ScriptedJob::stream(Some(&f.alice)).cap(64))
        .unwrap();
    job.push(&[&"a".repeat(1000)]);
    assert_eq!(
        f.output(Some(&f.alice), &id).await,
        "aaaaaaaaaaaaaaaaaaaaaaaaaaa\n[output truncated]\n[status: running]"
    );
    let (id, job) = f
        .start(ScriptedJob::stream(Some(&f.alice)).cap(30))
        .unwrap();
    job.push(&["abc\n[output truncated]"]);
    // The marker is reused, and the cut lands inside it.
    assert_eq!(
        f.output(Some(&f.alice), &id).await,
        "t truncated]\n[status: running]"
    );
}

#[tokio::test]
async fn caps_post_policy_output_without_restoring_the_status() {
    let f = Fixture::new().await;
    let (id, _job) = f
        .start(ScriptedJob::stream(Some(&f.alice)).cap(64))
        .unwrap();
    let args = json!({"job_id": id}).to_string();
    let out = f
        .mount
        .finalize(
            Some(&f.alice),
            "job_output",
            &args,
            vec![ContentBlock::Text("p".repeat(1000))],
        )
        .await
        .unwrap();
    let [ContentBlock::Text(text)] = out.as_slice() else {
        panic!("one text block expected: {out:?}");
    };
    assert!(bytes(text) <= 64);
    assert!(text.contains("[result truncated]"));
    assert!(!text.contains("[status: running]"));
    assert_eq!(text, &format!("{}\n[result truncated]", "p".repeat(45)));
}

#[tokio::test]
async fn caps_a_normalized_read_failure() {
    let f = Fixture::new().await;
    let (id, job) = f
        .start(ScriptedJob::stream(Some(&f.alice)).cap(64))
        .unwrap();
    *job.read_error.lock().unwrap() = Some(format!("read exploded: {}", "x".repeat(500)));
    let out = f
        .call(Some(&f.alice), "job_output", json!({"job_id": id}))
        .await;
    assert!(out.is_error);
    assert!(bytes(&out.text) <= 64, "{}", out.text);
    assert!(out.text.ends_with("\n[result truncated]"), "{}", out.text);
}

#[tokio::test]
async fn caps_harness_denials_and_pipeline_failures() {
    let f = Fixture::new().await;
    for tool in ["job_output", "job_kill"] {
        let (id, _job) = f
            .start(ScriptedJob::stream(Some(&f.alice)).cap(64))
            .unwrap();
        let args = json!({"job_id": id}).to_string();
        for message in [
            format!("Error: denied by policy: {}", "r".repeat(1000)),
            format!("Error: pre-execute hook threw: {}", "t".repeat(300)),
            format!("Error: post-execute hook threw: {}", "u".repeat(300)),
        ] {
            let out = f
                .mount
                .finalize(
                    Some(&f.alice),
                    tool,
                    &args,
                    vec![ContentBlock::Text(message)],
                )
                .await
                .unwrap();
            let [ContentBlock::Text(text)] = out.as_slice() else {
                panic!("{out:?}")
            };
            assert!(bytes(text) <= 64);
            assert!(text.contains("[result truncated]"));
        }
    }
}

#[tokio::test]
async fn wait_true_blocks_until_settlement() {
    let f = Fixture::new().await;
    let (id, job) = f.start(ScriptedJob::final_output(Some(&f.alice))).unwrap();
    let args = json!({"job_id": id, "wait": true});
    let call = f.call(Some(&f.alice), "job_output", args);
    let settle = async {
        // Settle only once the wait is really pending: no timing assumption.
        crate::fixture::until_waiting(&f.registry, &id).await;
        job.settle(OutcomeStatus::Completed, None, Some("done deal"))
            .await;
    };
    let (out, ()) = tokio::join!(call, settle);
    assert_eq!(out.text, "done deal\n[status: completed]");
    assert!(f.registry.inspect(&id).unwrap().reported);
}

#[tokio::test]
async fn a_timed_out_wait_honours_the_configured_cap_and_leaves_the_job_alive() {
    let f = Fixture::with_config(
        r#"{"waitTimeoutMs":10,"maxWaitTimeoutMs":20}"#,
        RegistryConfig::default(),
    )
    .await;
    let (id, _job) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    let out = f
        .call(
            Some(&f.alice),
            "job_output",
            json!({"job_id": id, "wait": true, "timeout_ms": 600000}),
        )
        .await;
    assert_eq!(out.text, "(no new output)\n[status: running]");
    let job = f.registry.inspect(&id).unwrap();
    assert_eq!(job.status, JobStatus::Running);
    assert!(!job.reported);
    assert_eq!(f.registry.waiter_count(&id), 0);
}

#[tokio::test]
async fn an_empty_or_unknown_id_is_an_error_result() {
    let f = Fixture::new().await;
    let empty = f
        .call(Some(&f.alice), "job_output", json!({"job_id": ""}))
        .await;
    assert!(empty.is_error);
    assert_eq!(
        empty.text,
        "Error: invalid job_id: expected a non-empty string, got \"\""
    );
    let unknown = f
        .call(Some(&f.alice), "job_output", json!({"job_id": "bash-99"}))
        .await;
    assert!(unknown.is_error);
    assert_eq!(unknown.text, "Error: unknown job bash-99");
}

// --- job_list --------------------------------------------------------------

#[tokio::test]
async fn lists_what_the_caller_can_see() {
    let f = Fixture::new().await;
    let empty = f.call(None, "job_list", json!({})).await;
    assert_eq!(empty.text, "(no background jobs)");
    assert_eq!(empty.value, Some(json!([])));

    f.start(ScriptedJob::stream(Some(&f.alice)).label("pnpm test"))
        .unwrap();
    f.start(ScriptedJob::final_output(None).label("open research"))
        .unwrap();
    let (_, build) = f
        .start(ScriptedJob::stream(Some(&f.alice)).label("build"))
        .unwrap();
    build
        .settle(OutcomeStatus::Completed, Some("exit code: 0"), None)
        .await;

    let alice = f.call(Some(&f.alice), "job_list", json!({})).await;
    assert_eq!(
        alice.text,
        "bash-1 [bash] running \u{2014} pnpm test\nsubagent-1 [subagent] running \u{2014} open research\nbash-2 [bash] completed \u{2014} build"
    );
    let entries = alice.value.unwrap();
    let entries = entries.as_array().unwrap();
    assert_eq!(entries.len(), 3);
    for entry in entries {
        assert!(entry.get("ownerSession").is_none());
        assert!(entry.get("reported").is_none());
        assert!(entry.get("outputLimitBytes").is_none());
    }
    assert_eq!(entries[2]["detail"], "exit code: 0");
    assert!(entries[2]["finishedAt"].is_u64());

    let bob = f.call(Some(&f.bob), "job_list", json!({})).await;
    assert_eq!(
        bob.text,
        "subagent-1 [subagent] running \u{2014} open research"
    );
}

#[tokio::test]
async fn job_list_is_never_capped() {
    let f = Fixture::new().await;
    f.start(
        ScriptedJob::stream(Some(&f.alice))
            .cap(8)
            .label(&"l".repeat(200)),
    )
    .unwrap();
    let out = f.call(Some(&f.alice), "job_list", json!({})).await;
    assert_eq!(
        out.text,
        format!("bash-1 [bash] running \u{2014} {}", "l".repeat(200))
    );
}

// --- job_kill --------------------------------------------------------------

#[tokio::test]
async fn requests_cancellation_and_forwards_the_reason() {
    let f = Fixture::new().await;
    let (id, job) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    let out = f
        .call(
            Some(&f.alice),
            "job_kill",
            json!({"job_id": id, "reason": "superseded"}),
        )
        .await;
    assert!(!out.is_error);
    assert_eq!(out.text, "requested cancellation of job bash-1");
    let value = out.value.unwrap();
    assert_eq!(value["outcome"], "cancellation-requested");
    assert_eq!(value["job"]["status"], "stopping");
    assert_eq!(job.cancels(), [Some("superseded".to_owned())]);
    assert!(f.registry.inspect(&id).unwrap().reported);
}

#[tokio::test]
async fn caps_the_kill_acknowledgement() {
    let f = Fixture::new().await;
    let (id, job) = f.start(ScriptedJob::stream(Some(&f.alice)).cap(8)).unwrap();
    let out = f
        .call(Some(&f.alice), "job_kill", json!({"job_id": id}))
        .await;
    assert_eq!(out.text, "uncated]");
    assert_eq!(job.cancels(), [None]);
}

#[tokio::test]
async fn caps_a_normalized_cancellation_failure() {
    let f = Fixture::new().await;
    let (id, job) = f
        .start(ScriptedJob::stream(Some(&f.alice)).cap(64))
        .unwrap();
    *job.cancel_error.lock().unwrap() = Some(format!("cancel boom {}", "z".repeat(400)));
    let out = f
        .call(Some(&f.alice), "job_kill", json!({"job_id": id}))
        .await;
    assert!(out.is_error);
    assert!(bytes(&out.text) <= 64);
    assert!(out.text.contains("[result truncated]"));
    let snapshot = f.registry.get(&id, Some(&f.alice)).unwrap();
    assert_eq!(snapshot.status, JobStatus::Running);
    assert!(!snapshot.reported);
}

#[tokio::test]
async fn caps_single_text_results_but_not_structured_ones() {
    let f = Fixture::new().await;
    let (id, _job) = f
        .start(ScriptedJob::stream(Some(&f.alice)).cap(64))
        .unwrap();
    let args = json!({"job_id": id}).to_string();
    let finalize =
        |blocks: Vec<ContentBlock>| f.mount.finalize(Some(&f.alice), "job_kill", &args, blocks);

    let replaced = finalize(vec![ContentBlock::Text("r".repeat(1000))])
        .await
        .unwrap();
    let [ContentBlock::Text(text)] = replaced.as_slice() else {
        panic!()
    };
    assert!(bytes(text) <= 64 && text.contains("[result truncated]"));

    let blocked = finalize(vec![ContentBlock::Text(format!(
        "Error: {}",
        "b".repeat(1000)
    ))])
    .await
    .unwrap();
    let [ContentBlock::Text(text)] = blocked.as_slice() else {
        panic!()
    };
    assert!(bytes(text) <= 64 && text.contains("[result truncated]"));

    let two = vec![
        ContentBlock::Text("first".into()),
        ContentBlock::Text("second".into()),
    ];
    assert_eq!(finalize(two.clone()).await.unwrap(), two);
    let reasoning = vec![ContentBlock::Other(
        json!({"type": "reasoning", "text": "x".repeat(1000)}).to_string(),
    )];
    assert_eq!(finalize(reasoning.clone()).await.unwrap(), reasoning);
}

#[tokio::test]
async fn an_already_finished_job_does_not_consume_the_pending_delta() {
    let f = Fixture::new().await;
    let (id, job) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    job.push(&["unread tail\n"]);
    job.settle(OutcomeStatus::Completed, Some("exit code: 0"), None)
        .await;
    let out = f
        .call(Some(&f.alice), "job_kill", json!({"job_id": id}))
        .await;
    assert_eq!(
        out.text,
        "job bash-1 had already finished [status: completed, exit code: 0]"
    );
    let value = out.value.unwrap();
    assert_eq!(value["outcome"], "already-finished");
    assert_eq!(value["job"]["status"], "completed");
    assert_eq!(value["job"]["detail"], "exit code: 0");
    assert_eq!(
        f.output(Some(&f.alice), &id).await,
        "unread tail\n[status: completed, exit code: 0]"
    );
    assert!(job.cancels().is_empty());
}

#[tokio::test]
async fn an_empty_kill_id_is_an_error_result() {
    let f = Fixture::new().await;
    let out = f
        .call(Some(&f.alice), "job_kill", json!({"job_id": ""}))
        .await;
    assert!(out.is_error);
    assert_eq!(
        out.text,
        "Error: invalid job_id: expected a non-empty string, got \"\""
    );
}

// --- Presentation ----------------------------------------------------------

#[tokio::test]
async fn generic_cards_match_the_catalog() {
    let f = Fixture::new().await;
    let card = |tool: &'static str, args: &'static str| f.mount.ui_card(tool, args);
    let output = card("job_output", r#"{"job_id":"bash-1"}"#)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(output.title, "Read output from background job bash-1");
    assert_eq!(output.kind, "read");
    assert_eq!(output.raw_input.as_deref(), Some("bash-1"));
    let list = card("job_list", "{}").await.unwrap().unwrap();
    assert_eq!(list.title, "List background jobs");
    assert_eq!(list.kind, "read");
    assert_eq!(list.raw_input, None);
    let kill = card("job_kill", r#"{"job_id":"bash-1"}"#)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(kill.title, "Kill background job bash-1");
    assert_eq!(kill.kind, "execute");
    assert_eq!(kill.raw_input.as_deref(), Some("bash-1"));
    assert!(card("nope", "{}").await.unwrap().is_none());
}

#[tokio::test]
async fn tool_descriptions_schemas_and_prompt_are_exact() {
    let f = Fixture::new().await;
    let defs = f.mount.tool_definitions().await.unwrap();
    let schema =
        |i: usize| -> serde_json::Value { serde_json::from_str(&defs[i].input_schema).unwrap() };
    assert_eq!(
        defs[0].description,
        "Read a background job. Stream jobs return only output since the previous read; final-output jobs return their result after settlement. Every response ends with `[status: ...]`. Reads are non-blocking unless `wait: true`, which waits up to the configured cap."
    );
    assert_eq!(
        schema(0),
        json!({
            "type": "object",
            "properties": {
                "job_id": {"type": "string", "description": "Job id returned by the tool that started the background work."},
                "wait": {"type": "boolean", "description": "Block until the job reaches a terminal status or the timeout expires. A timed-out wait returns [status: running] and leaves the job alive."},
                "timeout_ms": {"type": "number", "description": "Max wait in milliseconds (only meaningful with wait: true). Defaults to the configured wait timeout; capped by the configured maximum."}
            },
            "required": ["job_id"]
        })
    );
    assert_eq!(
        defs[1].description,
        "List your background jobs (running and finished) with their ids, kinds, and statuses."
    );
    assert_eq!(defs[1].input_schema, r#"{"type":"object","properties":{}}"#);
    assert_eq!(
        defs[2].description,
        "Request cancellation of a running background job by job id. Returns immediately; the job settles as killed once its work actually stops."
    );
    assert_eq!(
        schema(2),
        json!({
            "type": "object",
            "properties": {
                "job_id": {"type": "string", "description": "Job id returned by the tool that started the background work."},
                "reason": {"type": "string", "description": "Optional short reason, recorded in the log and forwarded to the job."}
            },
            "required": ["job_id"]
        })
    );
    let output: serde_json::Value =
        serde_json::from_str(defs[0].output_schema.as_deref().unwrap()).unwrap();
    assert_eq!(output["additionalProperties"], false);
    assert_eq!(output["required"], json!(["text", "job"]));
    assert_eq!(
        output["properties"]["job"]["required"],
        json!(["id", "kind", "label", "status", "startedAt"])
    );

    let prompt = f.mount.prompt_section().await.unwrap().unwrap();
    assert_eq!(prompt.name, "tool:jobs");
    assert_eq!(prompt.order, 106);
    assert_eq!(
        prompt.text,
        "Track every background job id you start. You are notified in-session when a job finishes \u{2014} do not busy-poll or sleep on one; keep working on independent steps and do not duplicate a running job's work. Before giving a final answer, collect every still-relevant job with job_output (set wait: true only when you are genuinely blocked on it), and job_kill jobs that stopped mattering."
    );
}

// --- Notice text (delivery itself is the host's) ---------------------------

async fn notice_for(f: &Fixture, job: ScriptedJob, detail: Option<&str>) -> host::NoticeMessage {
    let (id, control) = f.start(job).unwrap();
    control.settle(OutcomeStatus::Completed, detail, None).await;
    let snapshot = f.registry.inspect(&id).unwrap();
    f.mount.completion_notice(&snapshot).await.unwrap()
}

#[tokio::test]
async fn the_notice_for_an_unreported_owned_job_is_exact() {
    let f = Fixture::new().await;
    let notice = notice_for(
        &f,
        ScriptedJob::stream(Some(&f.alice)).label("pnpm test"),
        Some("exit code: 0"),
    )
    .await;
    assert_eq!(
        notice.text,
        "background job bash-1 (bash: pnpm test) finished [status: completed, exit code: 0]. Read its output with job_output."
    );
    assert_eq!(
        notice.summary.as_deref(),
        Some("bash pnpm test [status: completed, exit code: 0]")
    );
    assert_eq!(notice.plugin, "tool-jobs");
    assert_eq!(notice.form.as_deref(), Some("notice"));
}

#[tokio::test]
async fn bounded_notices_keep_the_id_and_the_collection_action() {
    let f = Fixture::new().await;
    let long = "x".repeat(1000);
    let detail = "d".repeat(1000);
    let job = |cap| {
        ScriptedJob::final_output(Some(&f.alice))
            .label(&long)
            .cap(cap)
    };
    let n61 = notice_for(&f, job(61), Some(&detail)).await;
    assert_eq!(n61.text, "background job subagent-1\nDone; job_output.");
    assert_eq!(
        n61.summary,
        Some(format!("subagent {}\u{2026}", "x".repeat(110)))
    );
    let n80 = notice_for(&f, job(80), Some(&detail)).await;
    assert_eq!(
        n80.text,
        "background job subagent-2 (subagent: xxxxxx\n[notice truncated]\nDone; job_output."
    );
    assert_eq!(bytes(&n80.text), 80);
}

#[tokio::test]
async fn the_pty_minimum_keeps_the_id_with_the_marker() {
    let f = Fixture::with_config(
        "{}",
        RegistryConfig::with_max_concurrent_jobs_per_owner(1000).unwrap(),
    )
    .await;
    for _ in 0..99 {
        f.start(ScriptedJob::stream(Some(&f.alice)).kind("pty-send"))
            .unwrap();
    }
    let notice = notice_for(
        &f,
        ScriptedJob::stream(Some(&f.alice))
            .kind("pty-send")
            .label("s1: make")
            .cap(64),
        Some("wait: inferred_idle"),
    )
    .await;
    assert_eq!(
        notice.text,
        "background job pty-send-100\n[notice truncated]\nDone; job_output."
    );
    assert_eq!(bytes(&notice.text), 64);
}

#[tokio::test]
async fn smaller_notice_budgets_keep_what_they_can() {
    let f = Fixture::new().await;
    let job = |cap| {
        ScriptedJob::stream(Some(&f.alice))
            .kind("pty-send")
            .label(&"x".repeat(100))
            .cap(cap)
    };
    assert_eq!(notice_for(&f, job(8), None).await.text, "_output.");
    assert_eq!(
        notice_for(&f, job(32), None).await.text,
        "background job\nDone; job_output."
    );
}

#[tokio::test]
async fn observed_outcomes_are_marked_reported() {
    let f = Fixture::new().await;
    // Killed by its owner.
    let (killed, control) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    f.call(Some(&f.alice), "job_kill", json!({"job_id": killed}))
        .await;
    control
        .settle(OutcomeStatus::Killed, Some("signal: SIGTERM"), None)
        .await;
    assert!(f.registry.inspect(&killed).unwrap().reported);
    // Read after settling. Unowned, so no notice claims it first.
    let (read, control) = f.start(ScriptedJob::final_output(None)).unwrap();
    control
        .settle(OutcomeStatus::Completed, None, Some("answer"))
        .await;
    f.mount.flush_notices().await;
    let job = f.registry.inspect(&read).unwrap();
    assert!(!job.reported && job.owner_session.is_none());
    let text = f.output(Some(&f.alice), &read).await;
    assert!(text.contains("answer"));
    assert!(f.registry.inspect(&read).unwrap().reported);
    // An owned job nobody observed is claimed by its notice.
    let (noticed, control) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    control.settle(OutcomeStatus::Completed, None, None).await;
    f.mount.flush_notices().await;
    assert!(f.registry.inspect(&noticed).unwrap().reported);
    assert_eq!(f.alice.inbox().unwrap().messages().len(), 1);
}

#[tokio::test]
async fn an_aborted_wait_is_an_error_result_and_the_job_lives_on() {
    let f = Fixture::new().await;
    let (id, _job) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    let abort = host::CancellationToken::new();
    let args = json!({"job_id": id, "wait": true}).to_string();
    let call = f
        .mount
        .invoke_with_abort(Some(&f.alice), "job_output", &args, &abort);
    let cancel = async {
        crate::fixture::until_waiting(&f.registry, &id).await;
        abort.cancel();
    };
    let (out, ()) = tokio::join!(call, cancel);
    assert!(out.is_error);
    assert_eq!(out.text, "Error: wait aborted");
    let job = f.registry.inspect(&id).unwrap();
    assert_eq!((job.status, job.reported), (JobStatus::Running, false));
    assert_eq!(f.registry.waiter_count(&id), 0);
}

#[tokio::test]
async fn a_failing_cancel_reports_the_producer_message() {
    let f = Fixture::new().await;
    let (id, job) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    *job.cancel_error.lock().unwrap() = Some("cancel boom".into());
    let out = f
        .call(Some(&f.alice), "job_kill", json!({"job_id": id}))
        .await;
    assert!(out.is_error);
    assert_eq!(out.text, "Error: cancel boom");
}
