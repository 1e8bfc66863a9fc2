//! Jobs as MCP tasks under the tasks extension (revision 2026-07-28), through
//! the official Rust SDK's client, and Claude Code's channel, through a
//! line-by-line client that names itself Claude Code. (Revision 2025-11-25's
//! tasks are tested through the TypeScript SDK, in `tests/clients`.)

use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ClientInfo,
    GetTaskParams, Implementation, TaskPayload, TaskStatus,
};
use rmcp::service::{RunningService, ServiceError};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};

use super::cli::mcp_transport;
use super::containment::{Host, Options};
use super::harnesses::Gate;

/// A client that declares the tasks extension.
#[derive(Clone)]
struct TasksClient;

impl ClientHandler for TasksClient {
    fn get_info(&self) -> ClientInfo {
        ClientInfo::new(
            ClientCapabilities::builder().enable_tasks().build(),
            Implementation::new("tasks-test", "0"),
        )
    }
}

async fn tasks_client(flags: &[&str]) -> RunningService<RoleClient, TasksClient> {
    TasksClient.serve(mcp_transport(flags)).await.unwrap()
}

fn call(tool: &str, args: Value) -> CallToolRequestParams {
    let Value::Object(map) = args else {
        panic!("arguments must be an object")
    };
    CallToolRequestParams::new(tool.to_owned()).with_arguments(map)
}

async fn job_list(client: &RunningService<RoleClient, TasksClient>) -> String {
    match client
        .call_tool_once(call("job_list", json!({})))
        .await
        .unwrap()
    {
        CallToolResponse::Complete(result) => result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
            .next_back()
            .unwrap(),
        other => panic!("job_list answered {other:?}"),
    }
}

/// Starts `command` and returns its task's id (the start must answer with one).
async fn start_task(client: &RunningService<RoleClient, TasksClient>, command: &str) -> String {
    match client
        .call_tool_once(call("bash", json!({"command": command})))
        .await
        .unwrap()
    {
        CallToolResponse::Task(created) => {
            assert_eq!(created.task.status, TaskStatus::Working);
            assert_eq!(created.task.poll_interval_ms, Some(2000));
            created.task.task_id
        }
        other => panic!("a start answered {other:?}"),
    }
}

/// Polls the task until its status is `want` (bounded; a broken build fails).
async fn until_status(
    client: &RunningService<RoleClient, TasksClient>,
    id: &str,
    want: TaskStatus,
) -> rmcp::model::DetailedTask {
    for _ in 0..6000 {
        let got = client
            .get_task(GetTaskParams::new(id.to_owned()))
            .await
            .unwrap();
        if got.task.status() == want {
            return got.task;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("task {id} never became {want:?}");
}

fn error_of(result: Result<impl std::fmt::Debug, ServiceError>) -> rmcp::ErrorData {
    match result {
        Err(ServiceError::McpError(error)) => error,
        other => panic!("expected an MCP error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_is_a_task_polled_read_and_cancelled_under_the_tasks_extension() {
    let client = tasks_client(&[]).await;
    let gate = Gate::new();
    let command = format!("{}; exit 3", gate.command());
    let id = start_task(&client, &command).await;
    // A random 128-bit handle, not the job's guessable id.
    assert_eq!(id.len(), 32, "{id}");
    assert!(id.chars().all(|c| c.is_ascii_hexdigit()), "{id}");

    let working = client
        .get_task(GetTaskParams::new(id.clone()))
        .await
        .unwrap()
        .task;
    assert_eq!(working.status(), TaskStatus::Working);
    assert_eq!(
        working.task.status_message.as_deref(),
        Some("started background job bash-1")
    );
    assert_eq!(
        job_list(&client).await,
        format!("bash-1 [bash] running \u{2014} {command}")
    );

    gate.open();
    let done = until_status(&client, &id, TaskStatus::Completed).await;
    // A non-zero exit completes the task with an error result, as the
    // extension says; the result is the read the model would make.
    let TaskPayload::Completed { result } = &done.payload else {
        panic!("{done:?}")
    };
    assert_eq!(
        Value::Object(result.clone()),
        json!({"content": [{"type": "text", "text": "done\n[status: completed, exit code: 3]"}], "isError": true})
    );
    assert_eq!(done.task.status_message.as_deref(), Some("exit code: 3"));
    assert_eq!(
        job_list(&client).await,
        format!("bash-1 [bash] completed \u{2014} {command}")
    );
    // The same result every time: the read happened once.
    let again = client
        .get_task(GetTaskParams::new(id.clone()))
        .await
        .unwrap()
        .task;
    assert_eq!(again, done);
    // The task's read was the model's: the job has nothing new.
    let read = client
        .call_tool_once(call("job_output", json!({"job_id": "bash-1"})))
        .await
        .unwrap();
    let CallToolResponse::Complete(read) = read else {
        panic!("{read:?}")
    };
    let read_text = read.content.last().unwrap().as_text().unwrap().text.clone();
    assert_eq!(
        read_text,
        "(no new output)\n[status: completed, exit code: 3]"
    );

    // A finished task cannot be cancelled; nothing changes.
    let refused = error_of(client.cancel_task(CancelTaskParams::new(id.clone())).await);
    assert_eq!(refused.code.0, -32602, "{refused:?}");
    assert_eq!(
        refused.message,
        "Cannot cancel task: it is already completed"
    );

    // A cancel kills the job's tree; the list and the task agree.
    let long = start_task(&client, "sleep 300").await;
    client
        .cancel_task(CancelTaskParams::new(long.clone()))
        .await
        .unwrap();
    let cancelled = until_status(&client, &long, TaskStatus::Cancelled).await;
    assert_eq!(cancelled.payload, TaskPayload::Cancelled);
    assert!(
        job_list(&client)
            .await
            .contains("bash-2 [bash] killed \u{2014} sleep 300")
    );

    // Unknown ids, and the job's own id, name no task.
    for bogus in ["0123456789abcdef0123456789abcdef", "bash-1"] {
        let unknown = error_of(client.get_task(GetTaskParams::new(bogus.to_owned())).await);
        assert_eq!(unknown.code.0, -32602);
        assert_eq!(unknown.message, "Failed to retrieve task: Task not found");
        let unknown = error_of(
            client
                .cancel_task(CancelTaskParams::new(bogus.to_owned()))
                .await,
        );
        assert_eq!(unknown.code.0, -32602);
    }
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_tasks_a_start_answers_as_always() {
    // The client takes tasks, but the server was told not to offer them.
    let client = tasks_client(&["--no-tasks"]).await;
    let answer = client
        .call_tool_once(call("bash", json!({"command": "true"})))
        .await
        .unwrap();
    let CallToolResponse::Complete(result) = answer else {
        panic!("{answer:?}")
    };
    // The start's result last: a job this short may end before it, and its
    // notice then comes first.
    assert_eq!(
        result.content.last().unwrap().as_text().unwrap().text,
        "started background job bash-1"
    );
    let info = client.peer_info().unwrap();
    assert!(!info.capabilities.supports_tasks());
    let error = error_of(client.get_task(GetTaskParams::new("x".to_owned())).await);
    assert_eq!(error.code.0, -32601);
    client.cancel().await.unwrap();
}

const CHANNEL_FLAGS: &[&str] = &["--claude-channel", "--claude-channel-idle-ms", "0"];

/// A session with `--claude-channel` for a client named `client`, whose job
/// `bash-1` has started and is let go only once no call is in flight; the
/// job's command.
async fn channel_session(client: &str) -> (Host, String) {
    let options = Options {
        flags: CHANNEL_FLAGS,
        env: &[],
        user: None,
    };
    let init = json!({
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": client, "version": "2.1.300"}
    });
    let mut host = Host::start_with(options, init).await;
    let gate = Gate::new();
    let command = gate.command();
    let (texts, _) = host.call("bash", json!({ "command": command })).await;
    assert_eq!(texts, ["started background job bash-1"]);
    gate.open();
    (host, command)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_claude_code_session_hears_of_a_job_on_its_channel_once() {
    let (mut host, command) = channel_session("claude-code").await;
    // No call is in flight: the agent is idle, so the notice wakes it through
    // the channel.
    let pushed = host
        .recv_where(|m| m["method"] == "notifications/claude/channel")
        .await;
    assert_eq!(
        pushed["params"],
        json!({
            "content": format!("background job bash-1 (bash: {command}) finished [status: completed, exit code: 0]. Read its output with job_output."),
            "meta": {"plugin": "tool-jobs", "summary": format!("bash {command} [status: completed, exit code: 0]")}
        })
    );
    // Delivered there, it is not placed before the next result too, nor
    // logged.
    let (texts, _) = host.call("job_list", json!({})).await;
    assert_eq!(
        texts,
        [format!("bash-1 [bash] completed \u{2014} {command}")]
    );
    assert!(host.logged.is_empty(), "{:?}", host.logged);
    host.stdin.take();
    assert!(host.exit().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_does_not_take_the_channel_gets_the_notice_in_its_next_result() {
    let (mut host, command) = channel_session("some-client").await;
    let logged = host
        .recv_where(|m| m["method"] == "notifications/message")
        .await;
    let notice = logged["params"]["data"]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    let (texts, _) = host.call("job_list", json!({})).await;
    assert_eq!(
        texts,
        [
            notice,
            format!("bash-1 [bash] completed \u{2014} {command}")
        ]
    );
    host.stdin.take();
    assert!(host.exit().await.success());
}
