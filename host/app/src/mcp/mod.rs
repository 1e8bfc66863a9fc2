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

// MCP logging is deprecated upstream (SEP-2577) but is still how clients surface
// server-pushed messages today, and it is the channel notices are promised on.
#![allow(deprecated)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, LoggingLevel, LoggingMessageNotificationParam, PaginatedRequestParams,
    ProtocolVersion, ServerCapabilities, ServerConfig, SetLevelRequestParams, Tool,
    ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer, ServiceExt};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{Map, Value, json};

use host::owner::{Lane, NoticeMessage};
use host::session::Session;

mod framer;
mod wire;

pub use framer::DEFAULT_PROGRESS_INTERVAL;
use framer::framed_stdio;

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
        self.open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
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
        })
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

    /// Serves this connection over stdin and stdout until the client leaves, then
    /// closes the session. Notices are also pushed as logging notifications.
    ///
    /// # Errors
    ///
    /// When the MCP handshake or transport fails.
    pub async fn serve_stdio(
        self,
        mut announced: tokio::sync::mpsc::UnboundedReceiver<(Lane, NoticeMessage)>,
    ) -> anyhow::Result<()> {
        let session = self.session.clone();
        let closing = self.closing.clone();
        let (reader, writer, framing, input_closed) = framed_stdio();
        let threshold = self.log_level.clone();
        let handshake_free = self.handshake_free.clone();
        let opt_ins = self.opt_ins.clone();
        let running = match self.serve((reader, writer)).await {
            Ok(running) => running,
            Err(e) => {
                // What the service answered before it gave up (a ping, a
                // refusal) still reaches the client.
                let _ = tokio::time::timeout(std::time::Duration::from_secs(2), framing).await;
                return Err(e.into());
            }
        };
        let peer = running.peer().clone();
        // The client is gone once stdin closes: end the session's jobs now,
        // rather than after the service's grace for its handlers (a wait on
        // one of them ends with it), then abort whatever call is still in
        // flight. Requests the service already read are still answered, as
        // when a script is piped in.
        let closer = session.clone();
        let teardown = tokio::spawn(async move {
            input_closed.cancelled().await;
            closer.close().await;
            closing.cancel();
        });
        let forward = tokio::spawn(async move {
            while let Some((lane, notice)) = announced.recv().await {
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
                    break;
                }
            }
        });
        let result = running.waiting().await;
        forward.abort();
        // Also when the service ended for another reason (a transport error).
        teardown.abort();
        session.close().await;
        // The service is gone, so its output ends: what it wrote is flushed.
        let _ = tokio::time::timeout(std::time::Duration::from_secs(2), framing).await;
        result?;
        Ok(())
    }
}

impl ServerHandler for JobsServer {
    fn get_info(&self) -> ServerConfig {
        let info = ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_logging()
                .build(),
        )
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
        let abort = if self.closing.is_cancelled() {
            tokio_util::sync::CancellationToken::new()
        } else {
            self.closing.child_token()
        };
        let call = self.session.call_with_abort(&request.name, &args, &abort);
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
        let reply = loop {
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
            result.structured_content = Some(structured(&reply));
        }
        Ok(result.into())
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        // Notices are the only log this server sends, at level `notice`: a
        // level above it stops them (they still come with the next result).
        self.log_level.set(request.level);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
