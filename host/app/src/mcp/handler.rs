//! The MCP methods this server answers (`ServerHandler`): its capabilities,
//! `tools/list`, `tools/call`, the tasks extension's `tasks/get` and
//! `tasks/cancel`, revision 2025-11-25's renamed task requests, and
//! `logging/setLevel`.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CreateTaskResult, CustomRequest,
    CustomResult, ErrorCode, GetTaskParams, GetTaskResult, Implementation, JsonObject,
    ListToolsResult, LoggingLevel, PaginatedRequestParams, ServerCapabilities, ServerConfig,
    SetLevelRequestParams, Task, TaskStatus,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};
use serde_json::Value;

use super::JobsServer;
use super::channel::{Busy, CLAUDE_CHANNEL};
use super::logging::per_request;
use super::results::Answer;
use super::revision::{Revision, v2025_11_25, v2026_07_28};
use super::tasks::{self, Generation};

impl ServerHandler for JobsServer {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_logging()
            .build();
        if self.offer_tasks {
            capabilities
                .extensions
                .get_or_insert_with(Default::default)
                .insert(
                    rmcp::model::TASKS_EXTENSION_ID.to_owned(),
                    JsonObject::new(),
                );
        }
        if self.claude_channel.is_some() {
            capabilities
                .experimental
                .get_or_insert_with(Default::default)
                .insert(CLAUDE_CHANNEL.to_owned(), JsonObject::new());
        }
        let info = ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("jobs-host", env!("CARGO_PKG_VERSION")));
        match &self.instructions {
            Some(text) => info.with_instructions(text.clone()),
            None => info,
        }
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.note_revision(&context);
        // One page holds every tool, so no cursor was ever handed out.
        if let Some(cursor) = request.and_then(|r| r.cursor) {
            return Err(ErrorData::invalid_params(
                format!("invalid cursor \"{cursor}\": this server lists every tool on one page"),
                None,
            ));
        }
        Ok(ListToolsResult::with_all_items(self.tools.clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.note_revision(&context);
        let _busy = Busy::enter(self);
        // Held while the call runs: notices meanwhile go to a client that asked.
        let _opt_in = context
            .meta
            .0
            .get(v2026_07_28::LOG_LEVEL_META)
            .and_then(|level| serde_json::from_value::<LoggingLevel>(level.clone()).ok())
            .map(|level| self.opt_ins.enter(level));
        if !self.tools.iter().any(|t| t.name == request.name) {
            return Err(ErrorData::invalid_params(
                format!("unknown tool \"{}\"", request.name),
                None,
            ));
        }
        let args = Value::Object(request.arguments.unwrap_or_default());
        // The request's token: a client's `notifications/cancelled` (or the
        // connection closing) aborts the call before it consumes anything.
        // Aborted by the client's cancel of this request or by its leaving
        // while the call is in flight; a request read before the client left
        // but only reached now is still answered (a piped script's last line).
        let abort = if self.closing.is_cancelled() && self.answer_after_close {
            tokio_util::sync::CancellationToken::new()
        } else {
            self.closing.child_token()
        };
        // A start from a client that takes tasks answers with one, unless
        // the model asked to wait for the command (`yield_ms`).
        let as_task = self.offer_tasks
            && context
                .client_capabilities()
                .is_some_and(|c| c.supports_tasks())
            && args.get("yield_ms").is_none()
            && self.session.is_start_tool(&request.name).await;
        let call = async {
            if as_task {
                self.start_as_task(&args, &abort, Generation::Extension)
                    .await
                    .0
            } else {
                Answer::Reply(
                    self.session
                        .call_with_abort(&request.name, &args, &abort)
                        .await,
                )
            }
        };
        // A request that carried a progress token hears from a long call
        // (a wait) at a steady pace, so a client can keep it alive; the
        // reports stop when the call answers, before its answer goes out.
        let progress = async {
            match context.meta.get_progress_token() {
                Some(token) => {
                    self.report_progress(context.peer.clone(), token, &args)
                        .await
                }
                None => std::future::pending().await,
            }
        };
        tokio::pin!(call, progress);
        let answer = loop {
            tokio::select! {
                // The client's cancel of this request reaches the call's token
                // before the call is polled again: a wait whose job ended
                // after the cancel arrived then reads nothing.
                biased;
                () = context.ct.cancelled(), if !abort.is_cancelled() => abort.cancel(),
                reply = &mut call => break reply,
                () = &mut progress => unreachable!("progress never returns"),
            }
        };
        match answer {
            Answer::Reply(reply) => Ok(self.result_of(&reply).into()),
            Answer::Task(id) => {
                let seen = self.tasks.find(&self.session, &id, Generation::Extension)?;
                let view = seen.extension_view(&self.session).await;
                let task = Task::new(
                    id,
                    TaskStatus::Working,
                    view.task.created_at.clone(),
                    view.task.created_at,
                )
                .with_poll_interval_ms(tasks::POLL_INTERVAL_MS);
                let task = match view.task.status_message {
                    Some(message) if view.task.status == TaskStatus::Working => {
                        task.with_status_message(message)
                    }
                    _ => task,
                };
                Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
            }
        }
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let seen = self
            .tasks
            .find(&self.session, &request.task_id, Generation::Extension)?;
        Ok(GetTaskResult::new(seen.extension_view(&self.session).await))
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.cancel(&request.task_id, Generation::Extension)
            .await
            .map(|_| ())
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        let method = match request.method.strip_prefix(v2025_11_25::LEGACY_PREFIX) {
            Some(method) if self.legacy_tasks(&context) => method.to_owned(),
            _ => {
                return Err(ErrorData::new(
                    ErrorCode::METHOD_NOT_FOUND,
                    request.method,
                    None,
                ));
            }
        };
        let params = request.params.unwrap_or(Value::Null);
        self.legacy_request(&method, params, &context)
            .await
            .map(CustomResult::new)
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.note_revision(&context);
        // Revision 2026-07-28 removed the method: a level travels in each
        // request's `_meta` instead.
        let removed = Revision::of_request(&context).is_some_and(|r| !r.has_set_level());
        if removed || per_request(&context.peer, &self.handshake_free) {
            return Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                "logging/setLevel",
                None,
            ));
        }
        // Notices are the only log this server sends, at level `notice`: a
        // level above it stops them (they still come with the next result).
        self.log_level.set(request.level);
        Ok(())
    }
}
