//! Profile B (`task_*`, contract 3.2, 4.4, 6.6 and the deltas of 9.5), through the
//! real component over the same registry as profile A.

use std::sync::Arc;

use crate::fixture::{Fixture, ScriptedJob, capture_logs, runtime};
use host::registry::OutcomeStatus;
use host::{Agent, AgentStatus, DeliveryError, Lane, Mount, NoticeMessage, Owner, RegistryConfig};
use serde_json::json;

async fn profile_b() -> Fixture {
    Fixture::with_config(
        r#"{"profile":"b"}"#,
        RegistryConfig::with_max_concurrent_jobs_per_owner(1000).unwrap(),
    )
    .await
}

#[tokio::test]
async fn the_task_tools_are_exact() {
    let f = profile_b().await;
    let defs = f.mount.tool_definitions().await.unwrap();
    let names: Vec<&str> = defs.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["task_output", "task_list", "task_kill"]);
    assert_eq!(
        defs[0].description,
        "Read a background task. Stream tasks return only output since the previous read; final-output tasks return their result after settlement. Every response ends with `[status: ...]`. Reads are non-blocking unless `wait: true`, which waits up to the configured cap."
    );
    assert_eq!(
        defs[1].description,
        "List your background tasks (running and finished) with their ids, kinds, and statuses."
    );
    assert_eq!(
        defs[2].description,
        "Request cancellation of a running background task by task id. Returns immediately; the task settles as killed once its work actually stops."
    );
    let output: serde_json::Value = serde_json::from_str(&defs[0].input_schema).unwrap();
    assert_eq!(
        output["properties"]["task_id"]["description"],
        "Task id returned by the tool that started the background work."
    );
    assert_eq!(
        output["properties"]["wait"]["description"],
        "Block until the task reaches a terminal status or the timeout expires. A timed-out wait returns [status: running] and leaves the task alive."
    );
    assert_eq!(output["required"], json!(["task_id"]));
    let kill: serde_json::Value = serde_json::from_str(&defs[2].input_schema).unwrap();
    assert_eq!(
        kill["properties"]["reason"]["description"],
        "Optional short reason, recorded in the log and forwarded to the task."
    );

    let prompt = f.mount.prompt_section().await.unwrap().unwrap();
    assert_eq!((prompt.name.as_str(), prompt.order), ("tool:tasks", 106));
    assert_eq!(
        prompt.text,
        "Track every background task id you start. You are notified in-session when a task finishes \u{2014} do not busy-poll or sleep on one; keep working on independent steps and do not duplicate a running task's work. Before giving a final answer, collect every still-relevant task with task_output (set wait: true only when you are genuinely blocked on it), and task_kill tasks that stopped mattering."
    );

    let card = |tool: &'static str| f.mount.ui_card(tool, r#"{"task_id":"bash-1"}"#);
    assert_eq!(
        card("task_output").await.unwrap().unwrap().title,
        "Read output from background task bash-1"
    );
    assert_eq!(
        card("task_list").await.unwrap().unwrap().title,
        "List background tasks"
    );
    assert_eq!(
        card("task_kill").await.unwrap().unwrap().title,
        "Kill background task bash-1"
    );
    assert!(card("job_output").await.unwrap().is_none());
}

#[tokio::test]
async fn reads_lists_and_kills_speak_of_tasks() {
    let f = profile_b().await;
    let empty = f.call(Some(&f.alice), "task_list", json!({})).await;
    assert_eq!(empty.text, "(no background tasks)");

    let (id, job) = f
        .start(ScriptedJob::stream(Some(&f.alice)).label("pnpm test"))
        .unwrap();
    job.push(&["line one\n"]);
    let read = f
        .call(Some(&f.alice), "task_output", json!({"task_id": id}))
        .await;
    assert_eq!(read.text, "line one\n[status: running]");
    let value = read.value.unwrap();
    assert_eq!(value["text"], "line one\n");
    assert_eq!(value["task"]["id"], "bash-1");

    let list = f.call(Some(&f.alice), "task_list", json!({})).await;
    assert_eq!(list.text, "bash-1 [bash] running \u{2014} pnpm test");

    let kill = f
        .call(
            Some(&f.alice),
            "task_kill",
            json!({"task_id": id, "reason": "superseded"}),
        )
        .await;
    assert_eq!(kill.text, "requested cancellation of task bash-1");
    assert_eq!(kill.value.unwrap()["task"]["status"], "stopping");
    assert_eq!(job.cancels(), [Some("superseded".to_owned())]);
    job.settle(OutcomeStatus::Completed, Some("exit code: 0"), None)
        .await;
    let again = f
        .call(Some(&f.alice), "task_kill", json!({"task_id": id}))
        .await;
    assert_eq!(
        again.text,
        "task bash-1 had already finished [status: completed, exit code: 0]"
    );
    assert_eq!(again.value.unwrap()["outcome"], "already-finished");
}

#[tokio::test]
async fn errors_speak_of_tasks() {
    let f = profile_b().await;
    let (id, _job) = f.start(ScriptedJob::stream(Some(&f.alice))).unwrap();
    let cases = [
        (
            json!({"task_id": ""}),
            "Error: invalid task_id: expected a non-empty string, got \"\"",
        ),
        (json!({"task_id": "bash-99"}), "Error: unknown task bash-99"),
        (
            json!({}),
            "Error: invalid arguments: missing required property \"task_id\"",
        ),
        (
            json!({"task_id": id, "wait": true, "timeout_ms": 0}),
            "Error: invalid wait timeout: expected a positive number of milliseconds, got 0",
        ),
    ];
    for (args, expected) in cases {
        let out = f.call(Some(&f.alice), "task_output", args.clone()).await;
        assert_eq!(out.text, expected, "{args}");
    }
    let foreign = f
        .call(Some(&f.bob), "task_kill", json!({"task_id": id}))
        .await;
    assert_eq!(
        foreign.text,
        "Error: task bash-1 belongs to another session"
    );
    let wrong = f
        .call(Some(&f.alice), "job_output", json!({"job_id": id}))
        .await;
    assert_eq!(wrong.text, "Error: unknown tool \"job_output\"");
}

#[tokio::test]
async fn config_errors_name_tool_tasks() {
    let registry = host::JobRegistry::default();
    for (config, expected) in [
        (
            r#"{"profile":"b","waitTimeoutMs":100,"maxWaitTimeoutMs":50}"#,
            "tool-tasks: waitTimeoutMs (100) exceeds maxWaitTimeoutMs (50)",
        ),
        (
            r#"{"profile":"b","completionDelivery":"wakeup"}"#,
            "tool-tasks: unknown config key \"completionDelivery\"",
        ),
    ] {
        let err = Mount::new(runtime(), registry.clone(), config)
            .await
            .err()
            .expect("refused");
        assert!(err.to_string().starts_with(expected), "{err}");
    }
}

#[tokio::test]
async fn notices_are_injected_in_task_words_without_summary_or_form() {
    let f = profile_b().await;
    let inbox = f.alice.inbox().unwrap().clone();
    // Even an idle owner is never woken in profile B.
    inbox.set_status(AgentStatus::Idle);
    let (_, job) = f
        .start(ScriptedJob::stream(Some(&f.alice)).label("pnpm test"))
        .unwrap();
    job.settle(OutcomeStatus::Completed, Some("exit code: 0"), None)
        .await;
    f.mount.flush_notices().await;
    assert_eq!(
        inbox.messages(),
        [(
            Lane::Inject,
            NoticeMessage {
                text: "background task bash-1 (bash: pnpm test) finished [status: completed, exit code: 0]. Read its output with task_output.".into(),
                summary: None,
                plugin: "tool-tasks".into(),
                form: None,
            }
        )]
    );
}

#[tokio::test]
async fn bounded_notices_use_the_longer_task_prefix() {
    let f = profile_b().await;
    for _ in 0..99 {
        f.start(ScriptedJob::stream(Some(&f.alice)).kind("pty-send"))
            .unwrap();
    }
    let notice = |job: ScriptedJob| {
        let f = &f;
        async move {
            let (id, control) = f.start(job).unwrap();
            control.settle(OutcomeStatus::Completed, None, None).await;
            let snapshot = f.registry.inspect(&id).unwrap();
            f.mount.completion_notice(&snapshot).await.unwrap().text
        }
    };
    assert_eq!(
        notice(
            ScriptedJob::final_output(Some(&f.alice))
                .label(&"x".repeat(1000))
                .cap(64)
        )
        .await,
        "background task subagent-1\n[notice truncated]\nDone; task_output."
    );
    assert_eq!(
        notice(
            ScriptedJob::stream(Some(&f.alice))
                .kind("pty-send")
                .label("s1: make")
                .cap(64)
        )
        .await,
        "background task pty-send-100\nDone; task_output."
    );
    assert_eq!(
        notice(
            ScriptedJob::stream(Some(&f.alice))
                .kind("pty-send")
                .label(&"x".repeat(100))
                .cap(32)
        )
        .await,
        "background ta\nDone; task_output."
    );
}

/// An owner whose agent was disposed while a notice was on its way.
struct DisposedAgent {
    message: &'static str,
}

impl DisposedAgent {
    /// A disposed agent says so in a typed error; anything else is a failure.
    fn error(&self) -> DeliveryError {
        match self.message.strip_suffix("\" is disposed") {
            Some(id) => DeliveryError::Disposed(id.trim_start_matches("agent \"").to_owned()),
            None => DeliveryError::Failed(self.message.to_owned()),
        }
    }
}

impl Agent for DisposedAgent {
    fn status(&self) -> AgentStatus {
        AgentStatus::Running
    }

    fn inject(&self, _message: NoticeMessage) -> Result<(), DeliveryError> {
        Err(self.error())
    }

    fn followup(&self, _message: NoticeMessage) -> Result<(), DeliveryError> {
        Err(self.error())
    }
}

#[tokio::test]
async fn a_disposed_owner_race_is_swallowed_and_other_failures_are_not() {
    let f = profile_b().await;
    let logs = capture_logs();
    let gone = Owner::builder("sess-1")
        .agent(Arc::new(DisposedAgent {
            message: "agent \"sess-1\" is disposed",
        }))
        .build();
    let broken = Owner::builder("sess-2")
        .agent(Arc::new(DisposedAgent {
            message: "unexpected inject bug",
        }))
        .build();
    f.registry.agents().register(&gone);
    f.registry.agents().register(&broken);
    let (gone_id, a) = f.start(ScriptedJob::stream(Some(&gone))).unwrap();
    let (broken_id, b) = f.start(ScriptedJob::stream(Some(&broken))).unwrap();
    a.settle(OutcomeStatus::Completed, None, None).await;
    b.settle(OutcomeStatus::Completed, None, None).await;
    f.mount.flush_notices().await;
    let text = logs.text();
    assert!(!text.contains(&gone_id), "{text}");
    assert!(
        text.contains(&format!(
            "jobs: onJobDone listener threw for {broken_id}: unexpected inject bug"
        )),
        "{text}"
    );
}

#[tokio::test]
async fn the_replacement_is_not_called_when_the_old_owner_is_disposed() {
    let f = profile_b().await;
    let old = Owner::builder("sess-1")
        .agent(Arc::new(DisposedAgent {
            message: "agent \"sess-1\" is disposed",
        }))
        .build();
    f.registry.agents().register(&old);
    let (_, job) = f.start(ScriptedJob::stream(Some(&old))).unwrap();
    let replacement = Owner::new("sess-1");
    f.registry.agents().register(&replacement);
    job.settle(OutcomeStatus::Completed, None, None).await;
    f.mount.flush_notices().await;
    assert!(replacement.inbox().unwrap().messages().is_empty());
}
