//! Revision 2025-11-25's quirks: its core tasks (`tasks/get`, `tasks/result`,
//! `tasks/list`, `tasks/cancel`, and `tools/call` with `params.task`), which
//! the MCP service does not know. The framing layer renames them on their
//! way in ([`LEGACY_PREFIX`]) and declares the revision's `tasks`
//! capability in the `initialize` answer; the server serves them here.

use std::sync::Arc;

use rmcp::ErrorData;
use rmcp::model::{CustomNotification, ErrorCode, ServerNotification};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};

use super::Revision;
use crate::mcp::JobsServer;
use crate::mcp::results::{Answer, task_id_of};
use crate::mcp::tasks::{self, Generation};

/// The prefix of the methods that serve revision 2025-11-25's tasks: that
/// revision's `tasks/*` requests, and a `tools/call` or `tools/list` that
/// takes part in them, are renamed to these on their way to the service
/// (which knows only the tasks extension's `tasks/get` and `tasks/cancel`).
pub(in crate::mcp) const LEGACY_PREFIX: &str = "jobs-host/2025-11-25/";

/// Whether this connection negotiated revision 2025-11-25 with tasks on,
/// shared by the input side (which renames that revision's task requests)
/// and the output side (which learns it from the `initialize` answer and adds
/// the revision's `tasks` capability to it).
#[derive(Clone, Default)]
pub(in crate::mcp) struct LegacyTasks(pub(in crate::mcp) Arc<LegacyState>);

#[derive(Default)]
pub(in crate::mcp) struct LegacyState {
    /// Tasks are offered at all.
    pub(in crate::mcp) offered: std::sync::atomic::AtomicBool,
    /// The `initialize` request's id, as JSON text.
    pub(in crate::mcp) initialize_id: std::sync::Mutex<Option<String>>,
    /// The answer to it negotiated 2025-11-25.
    pub(in crate::mcp) active: std::sync::atomic::AtomicBool,
    /// The client declared the tasks extension instead: it speaks that one,
    /// whatever the revision.
    pub(in crate::mcp) extension_client: std::sync::atomic::AtomicBool,
}

impl LegacyTasks {
    /// Whether the connection speaks revision 2025-11-25's tasks.
    pub(in crate::mcp) fn is_active(&self) -> bool {
        self.0.active.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Called with each line the service writes: the answer to `initialize`
    /// under revision 2025-11-25 declares that revision's tasks (the service's
    /// types have no field for them). Returns the line to send.
    pub(in crate::mcp) fn dress(&self, line: String) -> String {
        use std::sync::atomic::Ordering;
        if !self.0.offered.load(Ordering::Relaxed) {
            return line;
        }
        let Some(id) = self
            .0
            .initialize_id
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
        else {
            return line;
        };
        let Ok(mut reply) = serde_json::from_str::<Value>(&line) else {
            return line;
        };
        if reply.get("id").map(Value::to_string).as_deref() != Some(id.as_str()) {
            return line;
        }
        *self
            .0
            .initialize_id
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = None;
        let negotiated = reply
            .pointer("/result/protocolVersion")
            .and_then(Value::as_str)
            .and_then(Revision::of);
        if negotiated.and_then(Revision::tasks) != Some(Generation::Legacy)
            || self.0.extension_client.load(Ordering::Relaxed)
        {
            return line;
        }
        let Some(capabilities) = reply
            .pointer_mut("/result/capabilities")
            .and_then(Value::as_object_mut)
        else {
            return line;
        };
        capabilities.insert(
            "tasks".to_owned(),
            json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}),
        );
        self.0.active.store(true, Ordering::Release);
        reply.to_string()
    }
}

/// The method that serves a request of revision 2025-11-25's tasks, if
/// `method` is one: its `tasks/*` methods, a `tools/call` that asks for a
/// task (`params.task`), and `tools/list` (whose tools declare which take
/// tasks).
pub(in crate::mcp) fn legacy_method(method: &str, params: Option<&Value>) -> Option<String> {
    let asks_for_task = || {
        params
            .and_then(|p| p.get("task"))
            .is_some_and(|t| !t.is_null())
    };
    match method {
        "tasks/get" | "tasks/result" | "tasks/list" | "tasks/cancel" | "tools/list" => {
            Some(format!("{LEGACY_PREFIX}{method}"))
        }
        "tools/call" if asks_for_task() => Some(format!("{LEGACY_PREFIX}{method}")),
        _ => None,
    }
}

impl JobsServer {
    /// Whether this connection speaks revision 2025-11-25's tasks.
    pub(in crate::mcp) fn legacy_tasks(&self, context: &RequestContext<RoleServer>) -> bool {
        self.offer_tasks
            && Revision::negotiated(context).and_then(Revision::tasks) == Some(Generation::Legacy)
            && context
                .peer
                .peer_info()
                .is_some_and(|info| !info.capabilities.supports_tasks())
    }

    /// Revision 2025-11-25's task requests, renamed on their way in (see
    /// `framer::LEGACY_PREFIX`).
    pub(in crate::mcp) async fn legacy_request(
        &self,
        method: &str,
        params: Value,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, ErrorData> {
        match method {
            "tools/list" => {
                if params.get("cursor").is_some_and(|c| !c.is_null()) {
                    return Err(ErrorData::invalid_params(
                        "invalid cursor: this server lists every tool on one page",
                        None,
                    ));
                }
                let mut tools = Vec::with_capacity(self.tools.len());
                for tool in &self.tools {
                    let mut value = serde_json::to_value(tool)
                        .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
                    if self.session.is_start_tool(&tool.name).await {
                        value["execution"] = json!({"taskSupport": "optional"});
                    }
                    tools.push(value);
                }
                Ok(json!({ "tools": tools }))
            }
            "tools/call" => self.legacy_call(params, context).await,
            "tasks/get" => {
                let seen =
                    self.tasks
                        .find(&self.session, task_id_of(&params)?, Generation::Legacy)?;
                Ok(seen.legacy_view())
            }
            "tasks/list" => {
                if params.get("cursor").is_some_and(|c| !c.is_null()) {
                    return Err(ErrorData::invalid_params(
                        "invalid cursor: this server lists every task on one page",
                        None,
                    ));
                }
                let tasks: Vec<Value> = self
                    .tasks
                    .list(&self.session, Generation::Legacy)
                    .iter()
                    .map(tasks::Seen::legacy_view)
                    .collect();
                Ok(json!({ "tasks": tasks }))
            }
            "tasks/result" => {
                let id = task_id_of(&params)?.to_owned();
                loop {
                    let seen = self.tasks.find(&self.session, &id, Generation::Legacy)?;
                    if seen.job.status.is_terminal() {
                        let mut result = seen.result(&self.session).await;
                        result["_meta"] = json!({ tasks::RELATED_TASK_META: {"taskId": id} });
                        return Ok(result);
                    }
                    tokio::select! {
                        () = self.session.registry().settled(seen.job_id()) => {}
                        () = context.ct.cancelled() => {
                            return Err(ErrorData::internal_error("the request was cancelled", None));
                        }
                        () = self.closing.cancelled() => {
                            return Err(ErrorData::internal_error("the session is closing", None));
                        }
                    }
                }
            }
            "tasks/cancel" => {
                let id = task_id_of(&params)?.to_owned();
                let seen = self.cancel(&id, Generation::Legacy).await?;
                Ok(seen.legacy_view())
            }
            _ => Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                method.to_owned(),
                None,
            )),
        }
    }

    /// A revision 2025-11-25 `tools/call` that asked for a task.
    pub(in crate::mcp) async fn legacy_call(
        &self,
        params: Value,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, ErrorData> {
        let name = params
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !self.session.is_start_tool(name).await {
            return Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!("tool \"{name}\" does not support tasks"),
                None,
            ));
        }
        let mut args = params
            .get("arguments")
            .cloned()
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({}));
        // The task is the wait: a yield would consume output the task's
        // result must show.
        if let Some(map) = args.as_object_mut() {
            map.remove("yield_ms");
        }
        let abort = self.closing.child_token();
        let call = self.start_as_task(&args, &abort, Generation::Legacy);
        tokio::pin!(call);
        let (answer, text) = tokio::select! {
            biased;
            () = context.ct.cancelled() => {
                abort.cancel();
                call.await
            }
            answer = &mut call => answer,
        };
        match answer {
            Answer::Reply(reply) => {
                let mut result = serde_json::to_value(self.result_of(&reply))
                    .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
                // Revision 2025-11-25 has no result types.
                if let Some(map) = result.as_object_mut() {
                    map.remove("resultType");
                }
                Ok(result)
            }
            Answer::Task(id) => {
                let seen = self.tasks.find(&self.session, &id, Generation::Legacy)?;
                let mut task = seen.legacy_view();
                task["status"] = json!("working");
                self.watch_legacy_task(&seen, context.peer.clone());
                Ok(json!({
                    "task": task,
                    "_meta": { tasks::IMMEDIATE_RESPONSE_META: text },
                }))
            }
        }
    }

    /// Sends `notifications/tasks/status` once the task's job has settled
    /// (revision 2025-11-25 lets a server push it; clients still poll).
    pub(in crate::mcp) fn watch_legacy_task(
        &self,
        seen: &tasks::Seen,
        peer: rmcp::Peer<RoleServer>,
    ) {
        let session = self.session.clone();
        let tasks = self.tasks.clone();
        let closing = self.closing.clone();
        let id = seen.id.clone();
        let job = seen.job_id().to_owned();
        tokio::spawn(async move {
            tokio::select! {
                () = session.registry().settled(&job) => {}
                () = closing.cancelled() => return,
            }
            if let Ok(seen) = tasks.find(&session, &id, Generation::Legacy) {
                let notification =
                    CustomNotification::new("notifications/tasks/status", Some(seen.legacy_view()));
                let _ = peer
                    .send_notification(ServerNotification::CustomNotification(notification))
                    .await;
            }
        });
    }
}
