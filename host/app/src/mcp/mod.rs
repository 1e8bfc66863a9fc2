//! `jobs-host mcp`: the session's tools as an MCP server over stdio.
//!
//! One MCP connection is one owner. Its tools are `bash` (start a background job)
//! and the plugin's tools, executed through the component. Completion notices take
//! the inject lane: each is placed as a text block before the next tool result, and
//! also sent at once as an MCP logging notification (level `notice`, logger: the
//! notice's plugin, `tool-jobs` under profile A). Profile C's batched update is
//! taken before each tool result the same way. When the connection closes, the
//! owner's jobs are cancelled and calls still in flight are aborted.
//!
//! A result is the contract's text as content blocks and nothing else: clients
//! that find `structuredContent` (Claude Code, Codex, pydantic-ai) show the model
//! that instead of the text, and drop the notices with it. `--structured-output`
//! adds it back for clients that want the canonical values, carrying the text
//! and the notices too.
//!
//! A client that takes MCP tasks (the tasks extension of revision 2026-07-28,
//! or revision 2025-11-25's core tasks) gets `bash` as a task (see
//! [`tasks`]); with `--claude-channel`, Claude Code hears of a job that ends
//! while it is idle on its channel.

// MCP logging is deprecated upstream (SEP-2577) but is still how clients surface
// server-pushed messages today, and it is the channel notices are promised on.
#![allow(deprecated)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock,
    CreateTaskResult, CustomNotification, CustomRequest, CustomResult, ErrorCode, GetTaskParams,
    GetTaskResult, Implementation, JsonObject, ListToolsResult, LoggingLevel,
    LoggingMessageNotificationParam, PaginatedRequestParams, ProtocolVersion, ServerCapabilities,
    ServerConfig, ServerNotification, SetLevelRequestParams, Task, TaskStatus, Tool,
    ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer, ServiceExt};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{Map, Value, json};

use host::owner::{Lane, NoticeMessage};
use host::plugin::StartMade;
use host::session::{Session, SessionReply};

mod framer;
mod tasks;
mod wire;

use tasks::{Generation, Tasks};

pub use framer::DEFAULT_PROGRESS_INTERVAL;
pub use framer::Io;
use framer::framed;

/// The level at or above which logging notifications go out: until the
/// client sets one, every notice does (the revisions let the server choose).
/// Held as a rank, 0 for `debug` up to 7 for `emergency`.
#[derive(Debug, Default)]
struct LogThreshold(std::sync::atomic::AtomicU8);

impl LogThreshold {
    fn rank(level: LoggingLevel) -> u8 {
        match level {
            LoggingLevel::Debug => 0,
            LoggingLevel::Info => 1,
            LoggingLevel::Notice => 2,
            LoggingLevel::Warning => 3,
            LoggingLevel::Error => 4,
            LoggingLevel::Critical => 5,
            LoggingLevel::Alert => 6,
            LoggingLevel::Emergency => 7,
        }
    }

    fn set(&self, level: LoggingLevel) {
        self.0
            .store(Self::rank(level), std::sync::atomic::Ordering::Relaxed);
    }

    fn allows(&self, level: LoggingLevel) -> bool {
        Self::rank(level) >= self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Whether the session's revision is 2026-07-28 or later, where
/// `notifications/message` belongs to a request that asked for a level in its
/// `_meta` (`io.modelcontextprotocol/logLevel`) and `logging/setLevel` is gone.
fn request_scoped_logging(peer: &rmcp::Peer<RoleServer>, handshake_free: &AtomicBool) -> bool {
    handshake_free.load(Ordering::Relaxed)
        || peer
            .peer_info()
            .is_some_and(|info| deprecates_logging(&info.protocol_version))
}

/// The `_meta` key with which a request of revision 2026-07-28 asks for the
/// logging notifications sent while it is handled.
const LOG_LEVEL_META: &str = "io.modelcontextprotocol/logLevel";

/// The requests in flight that asked for logging (revision 2026-07-28), each
/// with its level's rank: a notice that arrives while one that takes `notice`
/// runs is pushed, as that revision allows.
#[derive(Debug, Default)]
struct OptIns {
    open: std::sync::Mutex<Vec<(u64, u8)>>,
    next: std::sync::atomic::AtomicU64,
}

impl OptIns {
    /// Registers a request that asked for `level` until the guard drops.
    fn enter(self: &Arc<Self>, level: LoggingLevel) -> OptIn {
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock().push((key, LogThreshold::rank(level)));
        OptIn {
            owner: self.clone(),
            key,
        }
    }

    fn allows(&self, level: LoggingLevel) -> bool {
        let rank = LogThreshold::rank(level);
        self.lock().iter().any(|(_, asked)| *asked <= rank)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(u64, u8)>> {
        host::sync::lock(&self.open)
    }
}

/// One request's opt-in, for as long as it is handled.
struct OptIn {
    owner: Arc<OptIns>,
    key: u64,
}

impl Drop for OptIn {
    fn drop(&mut self) {
        self.owner.lock().retain(|(key, _)| *key != self.key);
    }
}

fn deprecates_logging(version: &ProtocolVersion) -> bool {
    version.as_str() >= ProtocolVersion::V_2026_07_28.as_str()
}

/// What a connection's end does to its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leave {
    /// The session ends: its jobs are killed (one connection, one session).
    Close,
    /// The session stays, with its jobs, for the next connection of its key;
    /// the number is the front end's (`Session::reattach`).
    Detach(u64),
}

/// The MCP server for one session.
pub struct JobsServer {
    session: Arc<Session>,
    /// The client's `logging/setLevel`, shared with the notice forwarder.
    log_level: Arc<LogThreshold>,
    /// Set once a request names revision 2026-07-28 or later in its `_meta`
    /// (a session without a handshake).
    handshake_free: Arc<AtomicBool>,
    /// Requests in flight that asked for logging (revision 2026-07-28).
    opt_ins: Arc<OptIns>,
    tools: Vec<Tool>,
    instructions: Option<String>,
    structured_output: bool,
    progress_interval: std::time::Duration,
    /// Cancelled when the client leaves: every call in flight is aborted.
    closing: tokio_util::sync::CancellationToken,
    /// Whether `bash` may answer with an MCP task (either generation).
    offer_tasks: bool,
    /// The connection's tasks.
    tasks: Arc<Tasks>,
    /// With `--claude-channel`: how long the client must be quiet before a
    /// notice goes out on Claude Code's channel instead of waiting.
    claude_channel: Option<std::time::Duration>,
    /// Set once the client took the channel (see [`JobsServer::with_claude_channel`]).
    channel_taken: Arc<AtomicBool>,
    /// Tool calls in flight, to tell the session when its agent is quiet.
    in_flight: Arc<AtomicUsize>,
    /// Whether a request read before the client left is still run (a piped
    /// script's last line). Not for a session that outlives its connection:
    /// nobody would read the answer, and the call would consume for nobody.
    answer_after_close: bool,
}

/// The experimental capability and the notification of Claude Code's channel.
const CLAUDE_CHANNEL: &str = "claude/channel";
const CLAUDE_CHANNEL_NOTIFICATION: &str = "notifications/claude/channel";

/// Whether the client takes Claude Code's channel: Claude Code itself (its
/// `clientInfo.name`), or a client that declares the capability.
fn takes_channel(info: &rmcp::model::InitializeRequestParams) -> bool {
    info.client_info.name.starts_with("claude-code")
        || info
            .capabilities
            .experimental
            .as_ref()
            .is_some_and(|e| e.contains_key(CLAUDE_CHANNEL))
}

/// A notice as Claude Code's channel carries it: the text, and string meta
/// values (they become attributes of the `<channel>` block the model reads).
fn channel_params(notice: &NoticeMessage) -> Value {
    let mut meta = json!({"plugin": notice.plugin});
    if let Some(summary) = &notice.summary {
        meta["summary"] = Value::String(summary.clone());
    }
    json!({"content": notice.text, "meta": meta})
}

/// Counts a tool call in flight; the last one to end tells the session its
/// agent is quiet (only when the channel is taken: otherwise the agent stays
/// in a turn, as without a channel).
struct Busy<'a> {
    server: &'a JobsServer,
}

impl<'a> Busy<'a> {
    fn enter(server: &'a JobsServer) -> Busy<'a> {
        server.in_flight.fetch_add(1, Ordering::AcqRel);
        if server.channel_taken.load(Ordering::Acquire) {
            server.session.set_active(true);
        }
        Busy { server }
    }
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        let left = self.server.in_flight.fetch_sub(1, Ordering::AcqRel) - 1;
        if left == 0 && self.server.channel_taken.load(Ordering::Acquire) {
            self.server.session.set_active(false);
        }
    }
}

/// The answer of a `tools/call` before it is dressed for the wire.
enum Answer {
    Reply(SessionReply),
    /// The call's job as a new task (tasks extension).
    Task(String),
}

fn task_id_of(params: &Value) -> Result<&str, ErrorData> {
    params
        .get("taskId")
        .and_then(Value::as_str)
        .ok_or_else(|| ErrorData::invalid_params("Invalid params: taskId must be a string", None))
}

fn object(json: &str) -> Map<String, Value> {
    match serde_json::from_str(json) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

/// The output schema under `--structured-output`: the text the model would
/// read and the notices placed before it, so a client that shows only the
/// structured value loses neither, plus the tool's canonical value (when it
/// has one) under `value`.
fn output_schema(value_schema: Option<&str>) -> Map<String, Value> {
    let mut properties = json!({
        "text": {"type": "string", "description": "The result exactly as the model reads it."},
        "notices": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Completion notices that arrived before this result, oldest first."
        }
    });
    if let Some(schema) = value_schema.and_then(|s| serde_json::from_str::<Value>(s).ok()) {
        properties["value"] = schema;
    }
    match json!({
        "type": "object",
        "properties": properties,
        "required": ["text", "notices"],
        "additionalProperties": false
    }) {
        Value::Object(map) => map,
        _ => unreachable!("an object literal"),
    }
}

/// The structured value of a result under `--structured-output`.
fn structured(reply: &host::session::SessionReply) -> Value {
    let mut value = json!({
        "text": reply.outcome.text,
        "notices": reply.notices.iter().map(|n| n.text.as_str()).collect::<Vec<_>>(),
    });
    if let Some(canonical) = &reply.outcome.value {
        value["value"] = canonical.clone();
    }
    value
}

/// MCP tool annotations from the guest's (or the `bash` tool's) hints.
fn annotations(hints: &host::plugin::ToolAnnotations) -> ToolAnnotations {
    ToolAnnotations::from_raw(
        Some(hints.title.clone()),
        Some(hints.read_only_hint),
        Some(hints.destructive_hint),
        Some(hints.idempotent_hint),
        Some(hints.open_world_hint),
    )
}

/// A notice as the logging notification's data.
pub fn notice_data(lane: Lane, notice: &NoticeMessage) -> Value {
    json!({
        "lane": match lane { Lane::Inject => "inject", Lane::Followup => "followup" },
        "text": notice.text,
        "summary": notice.summary,
        "source": {"kind": "plugin", "plugin": notice.plugin, "form": notice.form},
    })
}

impl JobsServer {
    /// A server for `session`, advertising `instructions` (the prompt section,
    /// when the profile has one). With `structured_output`, tools declare an
    /// output schema and results carry `structuredContent` (see the module
    /// docs).
    ///
    /// # Errors
    ///
    /// When the plugin fails to list its tools.
    pub async fn new(
        session: Arc<Session>,
        instructions: Option<String>,
        structured_output: bool,
    ) -> Result<JobsServer, host::PluginError> {
        let tools = session
            .tool_definitions()
            .await?
            .into_iter()
            .map(|d| {
                let mut tool = Tool::new(d.name, d.description, Arc::new(object(&d.input_schema)));
                tool.title = Some(d.annotations.title.clone());
                tool.annotations = Some(annotations(&d.annotations));
                if structured_output {
                    tool.output_schema = Some(Arc::new(output_schema(d.output_schema.as_deref())));
                }
                tool
            })
            .collect();
        Ok(JobsServer {
            session,
            log_level: Arc::default(),
            handshake_free: Arc::default(),
            opt_ins: Arc::default(),
            tools,
            instructions,
            structured_output,
            progress_interval: DEFAULT_PROGRESS_INTERVAL,
            closing: tokio_util::sync::CancellationToken::new(),
            offer_tasks: true,
            tasks: Arc::default(),
            claude_channel: None,
            channel_taken: Arc::default(),
            in_flight: Arc::default(),
            answer_after_close: true,
        })
    }

    /// Whether `bash` may answer with an MCP task: under revision 2026-07-28
    /// when the request declares the tasks extension, under 2025-11-25 when
    /// it asks with `params.task` (on by default).
    pub fn with_tasks(mut self, offer: bool) -> JobsServer {
        self.offer_tasks = offer;
        self
    }

    /// Declares Claude Code's channel (`capabilities.experimental
    /// ["claude/channel"]`). With a client that takes it, a notice the
    /// plugin would use to wake an idle agent (the follow-up lane, within the
    /// wake budget) goes out as `notifications/claude/channel` instead of
    /// waiting for the next tool result; the agent counts as idle once no
    /// call has been in flight for `idle_after`.
    pub fn with_claude_channel(mut self, idle_after: Option<std::time::Duration>) -> JobsServer {
        self.claude_channel = idle_after;
        self
    }

    /// Whether this connection speaks revision 2025-11-25's tasks.
    fn legacy_tasks(&self, context: &RequestContext<RoleServer>) -> bool {
        self.offer_tasks
            && context.peer.peer_info().is_some_and(|info| {
                info.protocol_version.as_str() == framer::LEGACY_TASKS_REVISION
                    && !info.capabilities.supports_tasks()
            })
    }

    /// A reply as the tool result the model reads.
    fn result_of(&self, reply: &SessionReply) -> CallToolResult {
        let mut content: Vec<ContentBlock> = reply
            .notices
            .iter()
            .map(|n| ContentBlock::text(n.text.clone()))
            .collect();
        content.push(ContentBlock::text(reply.outcome.text.clone()));
        let mut result = if reply.outcome.is_error {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        };
        if self.structured_output {
            result.structured_content = Some(structured(reply));
        }
        result
    }

    /// The start tool for a call that may become a task: a new job that the
    /// start made is named as a task of `generation`; anything else (a
    /// refusal, a name that already runs, an abort) is the ordinary reply.
    async fn start_as_task(
        &self,
        args: &Value,
        abort: &tokio_util::sync::CancellationToken,
        generation: Generation,
    ) -> (Answer, String) {
        let (outcome, made) = self.session.start_job(args, abort).await;
        match made {
            Some(StartMade::New(job)) if !outcome.is_error && !abort.is_cancelled() => {
                let id = self.tasks.create(&job, generation, &outcome.text);
                (Answer::Task(id), outcome.text)
            }
            _ => {
                let text = outcome.text.clone();
                (
                    Answer::Reply(self.session.reply(outcome, abort).await),
                    text,
                )
            }
        }
    }

    /// Revision 2025-11-25's task requests, renamed on their way in (see
    /// [`framer::LEGACY_PREFIX`]).
    async fn legacy_request(
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
    async fn legacy_call(
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
    fn watch_legacy_task(&self, seen: &tasks::Seen, peer: rmcp::Peer<RoleServer>) {
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

    /// Kills the job of task `id` (its whole tree), for `tasks/cancel`, and
    /// gives it a moment to settle. A task that has ended already is refused.
    async fn cancel(&self, id: &str, generation: Generation) -> Result<tasks::Seen, ErrorData> {
        let seen = self.tasks.find(&self.session, id, generation)?;
        if seen.job.status.is_terminal() || seen.phase() == tasks::Phase::Cancelling {
            return Err(ErrorData::invalid_params(
                format!(
                    "Cannot cancel task: it is already {}",
                    seen.job.status.as_str()
                ),
                None,
            ));
        }
        self.session
            .registry()
            .kill(
                seen.job_id(),
                Some(self.session.owner()),
                Some("tasks/cancel"),
            )
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        // A kill settles in milliseconds; a job that takes longer still
        // counts as cancelled (revision 2025-11-25) or working (the extension).
        let _ = tokio::time::timeout(
            std::time::Duration::from_secs(2),
            self.session.registry().settled(seen.job_id()),
        )
        .await;
        self.tasks.find(&self.session, id, generation)
    }

    /// Remembers a request that names revision 2026-07-28 or later itself:
    /// the session then has no handshake, and no pushed logging.
    fn note_revision(&self, context: &RequestContext<RoleServer>) {
        if context
            .meta
            .protocol_version()
            .is_some_and(|v| deprecates_logging(&v))
        {
            self.handshake_free.store(true, Ordering::Relaxed);
        }
    }

    /// How often a call that carries a `progressToken` and is still waiting
    /// sends `notifications/progress` ([`DEFAULT_PROGRESS_INTERVAL`] unless set).
    pub fn with_progress_interval(mut self, interval: std::time::Duration) -> JobsServer {
        self.progress_interval = interval.max(std::time::Duration::from_millis(10));
        self
    }

    /// Sends `notifications/progress` for the call `token` names every
    /// interval until it is dropped (when the call answers; it never returns):
    /// `progress`
    /// counts up, and the message says which job the call waits for and how
    /// long it has run, in a few dozen bytes.
    async fn report_progress(
        &self,
        peer: rmcp::Peer<RoleServer>,
        token: rmcp::model::ProgressToken,
        args: &Value,
    ) {
        let job = ["job_id", "task_id", "id"]
            .iter()
            .find_map(|key| args.get(*key).and_then(Value::as_str))
            .map(|id| id.chars().take(64).collect::<String>());
        let started = tokio::time::Instant::now();
        let mut ticks =
            tokio::time::interval_at(started + self.progress_interval, self.progress_interval);
        for n in 1u64.. {
            ticks.tick().await;
            let waited = started.elapsed().as_secs();
            let message = match job.as_deref().and_then(|id| {
                self.session
                    .registry()
                    .get(id, Some(self.session.owner()))
                    .ok()
            }) {
                Some(snapshot) => format!(
                    "waiting for {}: {} after {waited} s",
                    snapshot.id,
                    snapshot.status.as_str()
                ),
                None => format!("waiting after {waited} s"),
            };
            let param = rmcp::model::ProgressNotificationParam::new(token.clone(), n as f64)
                .with_message(message);
            if peer.notify_progress(param).await.is_err() {
                // The client is gone: nothing more to report, and the call
                // itself ends with the session.
                break;
            }
        }
        std::future::pending::<()>().await;
    }

    /// Serves this connection over `io` until the client leaves, then closes
    /// the session, or with [`Leave::Detach`] leaves it (and its jobs) for the
    /// next connection. Notices are also pushed as logging notifications.
    ///
    /// # Errors
    ///
    /// When the MCP handshake or transport fails.
    pub async fn serve_io(
        self,
        io: Io,
        mut announced: tokio::sync::mpsc::UnboundedReceiver<(Lane, NoticeMessage)>,
        leave: Leave,
    ) -> anyhow::Result<()> {
        let session = self.session.clone();
        let closing = self.closing.clone();
        let mut this = self;
        this.answer_after_close = leave == Leave::Close;
        let (reader, writer, framing, input_closed) = framed(io, this.offer_tasks);
        let channel = this.claude_channel;
        let channel_taken = this.channel_taken.clone();
        let threshold = this.log_level.clone();
        let handshake_free = this.handshake_free.clone();
        let opt_ins = this.opt_ins.clone();
        let running = match this.serve((reader, writer)).await {
            Ok(running) => running,
            Err(e) => {
                // What the service answered before it gave up (a ping, a
                // refusal) still reaches the client.
                let _ = tokio::time::timeout(std::time::Duration::from_secs(2), framing).await;
                return Err(e.into());
            }
        };
        let peer = running.peer().clone();
        if let Some(idle_after) = channel
            && peer.peer_info().is_some_and(|info| takes_channel(&info))
        {
            session.take_followups(idle_after);
            channel_taken.store(true, Ordering::Release);
            session.set_active(false);
        }
        // The client is gone once stdin closes: end the session's jobs now,
        // rather than after the service's grace for its handlers (a wait on
        // one of them ends with it), then abort whatever call is still in
        // flight. Requests the service already read are still answered, as
        // when a script is piped in.
        let closer = session.clone();
        let teardown = tokio::spawn(async move {
            input_closed.cancelled().await;
            match leave {
                Leave::Close => closer.close().await,
                // Nothing more is announced to this client; what settles
                // from now on waits for the next connection's first result.
                Leave::Detach(front_end) => closer.detach(front_end),
            }
            closing.cancel();
        });
        let forwarder = session.clone();
        let forward = tokio::spawn(async move {
            // Once the client is unreachable, the follow-ups handed to this
            // connection alone go back to wait for the next result.
            let mut gone = false;
            while let Some((lane, notice)) = announced.recv().await {
                let taken = lane == Lane::Followup && channel_taken.load(Ordering::Acquire);
                if gone {
                    if taken {
                        forwarder.requeue(notice);
                    }
                    continue;
                }
                // A follow-up notice the session handed over goes out on the
                // channel, and only there.
                if taken {
                    let notification = CustomNotification::new(
                        CLAUDE_CHANNEL_NOTIFICATION,
                        Some(channel_params(&notice)),
                    );
                    if peer
                        .send_notification(ServerNotification::CustomNotification(notification))
                        .await
                        .is_err()
                    {
                        // Handed to this client only, and it never got it:
                        // it waits for the next result instead.
                        forwarder.requeue(notice);
                        gone = true;
                    }
                    continue;
                }
                // Each notice is also placed before the next tool result, so
                // one that is not pushed here is still delivered.
                let pushed = if request_scoped_logging(&peer, &handshake_free) {
                    opt_ins.allows(LoggingLevel::Notice)
                } else {
                    threshold.allows(LoggingLevel::Notice)
                };
                if !pushed {
                    continue;
                }
                let data = notice_data(lane, &notice);
                let mut param = LoggingMessageNotificationParam::new(LoggingLevel::Notice, data);
                param.logger = Some(notice.plugin.clone());
                if peer.notify_logging_message(param).await.is_err() {
                    gone = true;
                }
            }
        });
        let result = running.waiting().await;
        // Also when the service ended for another reason (a transport error).
        teardown.abort();
        match leave {
            Leave::Close => {
                forward.abort();
                session.close().await;
            }
            Leave::Detach(front_end) => {
                // The session's announcements stop coming here, so the
                // forwarder drains what it holds (handing back what only this
                // client would have shown) and ends.
                session.detach(front_end);
                let _ = tokio::time::timeout(std::time::Duration::from_secs(2), forward).await;
            }
        }
        // The service is gone, so its output ends: what it wrote is flushed.
        let _ = tokio::time::timeout(std::time::Duration::from_secs(2), framing).await;
        result?;
        Ok(())
    }
}

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
            .get(LOG_LEVEL_META)
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
        let method = match request.method.strip_prefix(framer::LEGACY_PREFIX) {
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
        if request_scoped_logging(&context.peer, &self.handshake_free) {
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

#[cfg(test)]
mod tests;
