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

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, LoggingLevel, LoggingMessageNotificationParam, PaginatedRequestParams,
    ServerCapabilities, ServerConfig, SetLevelRequestParams, Tool, ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer, ServiceExt};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{Map, Value, json};

use host::owner::{Lane, NoticeMessage};
use host::session::Session;

/// The MCP server for one session.
pub struct JobsServer {
    session: Arc<Session>,
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
            tools,
            instructions,
            structured_output,
            progress_interval: DEFAULT_PROGRESS_INTERVAL,
            closing: tokio_util::sync::CancellationToken::new(),
        })
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

/// One line a client sent, as the framing layer judges it before the MCP
/// service sees it.
#[derive(Debug, PartialEq)]
pub enum Frame {
    /// A well-formed JSON-RPC 2.0 message: passed on as it is.
    Message,
    /// Blank: ignored.
    Blank,
    /// Refused with this JSON-RPC error response (one line, no newline).
    Refused(String),
}

/// The id of a request whose text the JSON parser refused, read by scanning
/// its top level only (nested values are skipped by their brackets, so depth
/// costs nothing); `None` unless the line is one object with a string or
/// integer `id` and a string `method` (a request: a notification is owed no
/// answer).
fn salvage_request_id(line: &str) -> Option<Value> {
    let bytes = line.as_bytes();
    let mut i = 0;
    let skip_ws = |i: &mut usize| {
        while *i < bytes.len() && bytes[*i].is_ascii_whitespace() {
            *i += 1;
        }
    };
    // The end of the string starting at `i` (a quote), just past its closing quote.
    let string_end = |mut i: usize| -> Option<usize> {
        i += 1;
        while i < bytes.len() {
            match bytes[i] {
                b'\\' => i += 2,
                b'"' => return Some(i + 1),
                _ => i += 1,
            }
        }
        None
    };
    skip_ws(&mut i);
    if bytes.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    let (mut id, mut method) = (None, false);
    loop {
        skip_ws(&mut i);
        match bytes.get(i)? {
            b'}' => break,
            b',' => {
                i += 1;
                continue;
            }
            b'"' => {}
            _ => return None,
        }
        let key_end = string_end(i)?;
        let key: String = serde_json::from_str(&line[i..key_end]).ok()?;
        i = key_end;
        skip_ws(&mut i);
        if bytes.get(i) != Some(&b':') {
            return None;
        }
        i += 1;
        skip_ws(&mut i);
        let start = i;
        // Skip one value: a string, or anything up to the next top-level
        // comma or brace, across brackets and strings.
        let mut depth = 0usize;
        while i < bytes.len() {
            match bytes[i] {
                b'"' => i = string_end(i)?,
                b'{' | b'[' => {
                    depth += 1;
                    i += 1;
                }
                b'}' | b']' if depth > 0 => {
                    depth -= 1;
                    i += 1;
                }
                b',' | b'}' if depth == 0 => break,
                _ => i += 1,
            }
        }
        let raw = line[start..i].trim();
        match key.as_str() {
            "id" => {
                id = serde_json::from_str::<Value>(raw)
                    .ok()
                    .filter(|v| v.is_string() || v.is_i64() || v.is_u64());
            }
            "method" => method = serde_json::from_str::<String>(raw).is_ok(),
            _ => {}
        }
    }
    id.filter(|_| method)
}

/// The answer to a line that is not JSON (or not UTF-8).
fn parse_error() -> String {
    json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error"}})
        .to_string()
}

/// Checks one line of the stdio transport against JSON-RPC 2.0: text that is
/// not JSON is a parse error (`-32700`, `id: null`); JSON that is not a single
/// request, notification or response object is an invalid request (`-32600`,
/// with the request's id when it had a valid one).
#[cfg(test)]
fn judge_line(line: &str) -> Frame {
    match check_line(line) {
        Ok(_) => Frame::Message,
        Err(frame) => frame,
    }
}

/// [`judge_line`], keeping the parsed message of a line that passes, so the
/// session's rules need not parse it again.
fn check_line(line: &str) -> Result<Map<String, Value>, Frame> {
    if line.trim().is_empty() {
        return Err(Frame::Blank);
    }
    let error = |code: i32, message: &str, id: Value| {
        Err(Frame::Refused(
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
                .to_string(),
        ))
    };
    let map = match serde_json::from_str(line) {
        Ok(Value::Object(map)) => map,
        Ok(_) => return error(-32600, "Invalid Request", Value::Null),
        // Valid by the JSON grammar but not to the parser (a lone surrogate
        // escape, a number beyond a double, nesting past 128): a request's id
        // can still be read, and it is owed an answer.
        Err(e) => {
            return match salvage_request_id(line) {
                Some(id) => error(-32602, &format!("Invalid params: {e}"), id),
                None => Err(Frame::Refused(parse_error())),
            };
        }
    };
    let id = map.get("id");
    let id_ok = id.is_none_or(|id| id.is_string() || id.is_i64() || id.is_u64() || id.is_null());
    let reply_id = match id {
        Some(id) if id_ok => id.clone(),
        _ => Value::Null,
    };
    if map.get("jsonrpc").and_then(Value::as_str) != Some("2.0") || !id_ok {
        return error(-32600, "Invalid Request", reply_id);
    }
    let valid = match map.get("method") {
        Some(Value::String(_)) => map
            .get("params")
            .is_none_or(|p| p.is_object() || p.is_array()),
        Some(_) => false,
        // A response to one of the server's own requests.
        None => id.is_some() && (map.contains_key("result") != map.contains_key("error")),
    };
    if valid {
        Ok(map)
    } else {
        error(-32600, "Invalid Request", reply_id)
    }
}

/// How often a waiting call reports progress when its request asked for it.
pub const DEFAULT_PROGRESS_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);

/// The longest line a client may send; a longer one is refused whole, without
/// being held (the largest argument the tools take is 64 KiB).
pub const MAX_LINE_BYTES: usize = 16 << 20;

/// The methods this server answers.
const KNOWN_METHODS: [&str; 5] = [
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "logging/setLevel",
];

/// The methods this server answers, with the shape their params must have.
/// A request for one of them whose params do not fit is refused here with
/// `-32602` and its id (the MCP service would answer it without the id).
fn params_problem(method: &str, params: Option<&Value>) -> Option<&'static str> {
    let params = match params {
        None | Some(Value::Null) => None,
        Some(Value::Object(map)) => Some(map),
        Some(_) => return Some("params must be an object"),
    };
    let field = |key: &str| params.and_then(|p| p.get(key));
    if field("_meta").is_some_and(|m| !m.is_object() && !m.is_null()) {
        return Some("_meta must be an object");
    }
    let is_string = |v: Option<&Value>| v.is_some_and(Value::is_string);
    match method {
        "tools/call" => {
            if !is_string(field("name")) {
                return Some("tools/call needs a tool name (a string)");
            }
            if field("arguments").is_some_and(|a| !a.is_object() && !a.is_null()) {
                return Some("arguments must be an object");
            }
        }
        "tools/list" if field("cursor").is_some_and(|c| !c.is_string() && !c.is_null()) => {
            return Some("cursor must be a string");
        }
        "initialize" => {
            let info = field("clientInfo");
            if !is_string(field("protocolVersion"))
                || !field("capabilities").is_some_and(Value::is_object)
                || !info.is_some_and(|i| is_string(i.get("name")) && is_string(i.get("version")))
            {
                return Some(
                    "initialize needs protocolVersion, capabilities and clientInfo (name, version)",
                );
            }
        }
        "logging/setLevel" => {
            const LEVELS: [&str; 8] = [
                "debug",
                "info",
                "notice",
                "warning",
                "error",
                "critical",
                "alert",
                "emergency",
            ];
            if !field("level")
                .and_then(Value::as_str)
                .is_some_and(|l| LEVELS.contains(&l))
            {
                return Some("level must be a logging level");
            }
        }
        _ => {}
    }
    None
}

/// The session state the framing layer keeps to answer what the MCP service
/// would mishandle: a notification or a response before the lifecycle began
/// (the service would end the session on it), a second `initialize`, and a
/// request whose id is still in flight (the service would answer only one of
/// the two).
///
/// The lifecycle begins with `initialize` or, from protocol revision
/// 2026-07-28 on (which has no handshake), with the first request that names
/// a known revision in its `_meta`. Other requests before it go on to the
/// service, which answers them (with their id) as the revisions say.
#[derive(Default)]
pub struct Framer {
    initialize_seen: bool,
    /// The lifecycle began (see the type's docs).
    started: bool,
    in_flight: InFlight,
}

/// Ids of requests passed on to the service and not yet answered (or
/// cancelled, which are never answered), as JSON text; shared between the
/// input side, which takes an id, and the output side, which frees it.
#[derive(Clone, Default)]
struct InFlight(Arc<std::sync::Mutex<std::collections::HashSet<String>>>);

impl InFlight {
    /// Takes `id`; false when it is taken already.
    fn take(&self, id: &Value) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.to_string())
    }

    /// Called with each line the service writes: an answer frees its id.
    fn answered(&self, line: &str) {
        #[derive(serde::Deserialize)]
        struct Reply {
            id: Option<Value>,
            method: Option<serde::de::IgnoredAny>,
        }
        if let Ok(Reply {
            id: Some(id),
            method: None,
        }) = serde_json::from_str::<Reply>(line)
        {
            self.0
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id.to_string());
        }
    }
}

impl Framer {
    /// Judges one line: [`judge_line`], then the session's rules.
    pub fn judge(&mut self, line: &str) -> Frame {
        let map = match check_line(line) {
            Ok(map) => map,
            Err(frame) => return frame,
        };
        let frame = Frame::Message;
        let method = map.get("method").and_then(Value::as_str);
        let id = map.get("id").filter(|id| !id.is_null());
        let error = |code: i32, message: &str| {
            Frame::Refused(
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
                    .to_string(),
            )
        };
        // A request must have a string or integer id (MCP); `"id": null` is
        // answered here, with that null, rather than by the service without one.
        if method.is_some() && map.get("id").is_some_and(Value::is_null) {
            return error(
                -32600,
                "Invalid Request: the id must be a string or an integer",
            );
        }
        // What the service cannot take would be answered without an id (a
        // request) or at all (a notification): an id beyond a signed 64-bit
        // integer, a duplicate key, a notification's params of the wrong shape.
        if let Err(e) = serde_json::from_str::<rmcp::model::ClientJsonRpcMessage>(line) {
            return match (method, id) {
                (Some(method), Some(_)) if KNOWN_METHODS.contains(&method) => {
                    error(-32602, &format!("Invalid params: {e}"))
                }
                (Some(_), Some(_)) => error(-32600, &format!("Invalid Request: {e}")),
                _ => {
                    tracing::debug!("dropped a message the service cannot read: {e}");
                    Frame::Blank
                }
            };
        }
        match (method, id) {
            // A response before initialize answers nothing the server asked,
            // and the service would end the session on it.
            (None, _) if !self.started => {
                tracing::debug!("dropped a response sent before initialize");
                Frame::Blank
            }
            // A response to the server, or a notification: nothing to answer.
            (None, _) => frame,
            (Some(_), None) if !self.started => {
                tracing::debug!("dropped a notification sent before initialize");
                Frame::Blank
            }
            // A cancelled request is never answered, so its id stays taken:
            // MCP forbids reusing it, and the service would hand a reused id
            // the cancelled call's answer.
            (Some(_), None) => frame,
            (Some(method), Some(id)) => {
                if let Some(problem) = params_problem(method, map.get("params")) {
                    return error(-32602, &format!("Invalid params: {problem}"));
                }
                match (method, self.initialize_seen) {
                    ("initialize", true) => {
                        return error(-32600, "Invalid Request: already initialized");
                    }
                    ("initialize", false) => {
                        self.initialize_seen = true;
                        self.started = true;
                    }
                    ("server/discover" | "ping", _) => {}
                    _ if names_a_revision(map.get("params")) => self.started = true,
                    _ => {}
                }
                if !self.in_flight.take(id) {
                    return error(
                        -32600,
                        "Invalid Request: a request with this id is in flight",
                    );
                }
                frame
            }
        }
    }

    /// Called with each line the service writes: an answer frees its id.
    #[cfg(test)]
    fn answered(&self, line: &str) {
        self.in_flight.answered(line);
    }
}

/// Whether a request's params carry what starts a session without
/// `initialize` (revision 2026-07-28): a known protocol revision in `_meta`,
/// with the client's capabilities from that revision on.
fn names_a_revision(params: Option<&Value>) -> bool {
    let Some(meta) = params.and_then(|p| p.get("_meta")) else {
        return false;
    };
    let Some(version) = meta
        .get("io.modelcontextprotocol/protocolVersion")
        .and_then(Value::as_str)
    else {
        return false;
    };
    let known = rmcp::model::ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .any(|v| v.as_str() == version);
    let inline = rmcp::model::ProtocolVersion::NO_INITIALIZE.as_str();
    known
        && (version < inline
            || meta
                .get("io.modelcontextprotocol/clientCapabilities")
                .is_some_and(Value::is_object))
}

/// One line of input, read without holding more than [`MAX_LINE_BYTES`].
enum Line {
    End,
    Whole,
    TooLong,
}

async fn read_line(
    input: &mut (impl tokio::io::AsyncBufRead + Unpin),
    line: &mut Vec<u8>,
) -> std::io::Result<Line> {
    use tokio::io::AsyncBufReadExt;
    line.clear();
    let mut too_long = false;
    loop {
        let buf = input.fill_buf().await?;
        if buf.is_empty() {
            return Ok(if line.is_empty() && !too_long {
                Line::End
            } else if too_long {
                Line::TooLong
            } else {
                Line::Whole
            });
        }
        let (chunk, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (&buf[..=i], true),
            None => (buf, false),
        };
        let used = chunk.len();
        if !too_long && line.len() + used <= MAX_LINE_BYTES {
            line.extend_from_slice(chunk);
        } else {
            too_long = true;
            line.clear();
        }
        input.consume(used);
        if done {
            return Ok(if too_long { Line::TooLong } else { Line::Whole });
        }
    }
}

/// stdin and stdout behind a framing layer: each line from stdin is judged by
/// [`Framer::judge`]; well-formed ones reach the MCP service, bad ones are
/// answered here, and everything written to stdout goes out as whole lines, so
/// an error reply never splits a message of the service's.
fn framed_stdio() -> (
    tokio::io::DuplexStream,
    tokio::io::DuplexStream,
    tokio::task::JoinHandle<()>,
    tokio_util::sync::CancellationToken,
) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let input_closed = tokio_util::sync::CancellationToken::new();
    let mut framer = Framer::default();
    let answers = framer.in_flight.clone();
    let (mut to_service, service_reads) = tokio::io::duplex(1 << 20);
    let (service_writes, from_service) = tokio::io::duplex(1 << 20);
    // Bounded: a client that writes bad lines without reading the answers is
    // held back, as its good lines are by the service's pipe.
    let (refusals, mut refused) = tokio::sync::mpsc::channel::<String>(256);
    let output = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        let mut lines = BufReader::new(from_service).lines();
        loop {
            let line = tokio::select! {
                line = lines.next_line() => match line {
                    Ok(Some(line)) => {
                        answers.answered(&line);
                        line
                    }
                    _ => break,
                },
                Some(line) = refused.recv() => line,
            };
            if stdout
                .write_all(format!("{line}\n").as_bytes())
                .await
                .is_err()
                || stdout.flush().await.is_err()
            {
                break;
            }
        }
    });
    let closed = input_closed.clone();
    tokio::spawn(async move {
        let mut input = BufReader::new(tokio::io::stdin());
        let mut raw = Vec::new();
        loop {
            let frame = match read_line(&mut input, &mut raw).await {
                Ok(Line::End) | Err(_) => break,
                Ok(Line::TooLong) => Frame::Refused(
                    json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600,
                        "message": format!("Invalid Request: a line longer than {MAX_LINE_BYTES} bytes")}})
                    .to_string(),
                ),
                // A line that is not UTF-8 is not JSON either: it is answered like
                // any other that does not parse, and the session goes on.
                Ok(Line::Whole) => match std::str::from_utf8(&raw) {
                    Ok(line) => framer.judge(line.trim_end_matches(['\n', '\r'])),
                    // Not UTF-8, so not JSON; a request's id may still be read.
                    Err(_) => match salvage_request_id(&String::from_utf8_lossy(&raw)) {
                        Some(id) => Frame::Refused(
                            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32700,
                                "message": "Parse error: the line is not UTF-8"}})
                            .to_string(),
                        ),
                        None => Frame::Refused(parse_error()),
                    },
                },
            };
            let line = String::from_utf8_lossy(&raw);
            match frame {
                Frame::Blank => {}
                Frame::Refused(reply) => {
                    tracing::debug!("refused a malformed JSON-RPC line");
                    if refusals.send(reply).await.is_err() {
                        break;
                    }
                }
                Frame::Message => {
                    if to_service
                        .write_all(format!("{}\n", line.trim_end_matches(['\n', '\r'])).as_bytes())
                        .await
                        .is_err()
                    {
                        break;
                    }
                }
            }
        }
        // Dropping `to_service` is the service's end of input.
        closed.cancel();
    });
    (service_reads, service_writes, output, input_closed)
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
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
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
        _request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        // Notices are the only log this server sends; they go out at any level.
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_judged_like_json_rpc() {
        assert_eq!(judge_line("  "), Frame::Blank);
        assert_eq!(
            judge_line("not json"),
            Frame::Refused(
                r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#
                    .into()
            )
        );
        let invalid = |id: &str| {
            Frame::Refused(format!(
                r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32600,"message":"Invalid Request"}}}}"#
            ))
        };
        assert_eq!(judge_line("[]"), invalid("null"));
        assert_eq!(judge_line("42"), invalid("null"));
        assert_eq!(judge_line(r#"{"id":1,"method":"ping"}"#), invalid("1"));
        assert_eq!(
            judge_line(r#"{"jsonrpc":"2.0","id":2,"method":7}"#),
            invalid("2")
        );
        assert_eq!(
            judge_line(r#"{"jsonrpc":"2.0","id":{},"method":"x"}"#),
            invalid("null")
        );
        assert_eq!(judge_line(r#"{"jsonrpc":"2.0","id":3}"#), invalid("3"));
        assert_eq!(
            judge_line(r#"{"jsonrpc":"2.0","id":3,"method":"x","params":1}"#),
            invalid("3")
        );
        assert_eq!(
            judge_line(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
            Frame::Message
        );
        assert_eq!(
            judge_line(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Frame::Message
        );
        assert_eq!(
            judge_line(r#"{"jsonrpc":"2.0","id":"a","result":{}}"#),
            Frame::Message
        );
    }

    fn refused(frame: Frame) -> Value {
        match frame {
            Frame::Refused(reply) => serde_json::from_str(&reply).unwrap(),
            other => panic!("not refused: {other:?}"),
        }
    }

    const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;

    #[test]
    fn the_session_rules_keep_every_id() {
        let mut f = Framer::default();
        // Before the lifecycle began: a notification (or response) is
        // dropped; requests go on, for the service to answer by revision.
        assert_eq!(
            f.judge(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Frame::Blank
        );
        assert_eq!(
            f.judge(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
            Frame::Message
        );
        assert_eq!(
            f.judge(r#"{"jsonrpc":"2.0","id":"x","method":"tools/list"}"#),
            Frame::Message
        );
        assert_eq!(f.judge(INIT), Frame::Message);
        f.answered(r#"{"jsonrpc":"2.0","id":0,"result":{}}"#);
        let again = refused(f.judge(INIT));
        assert_eq!(
            (again["id"].clone(), again["error"]["code"].clone()),
            (json!(0), json!(-32600))
        );
        // Params of the wrong shape: -32602 with the id.
        for line in [
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":[]}"#,
            r#"{"jsonrpc":"2.0","id":5,"method":"ping","params":[]}"#,
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":5}}"#,
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"_meta":5}}"#,
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"job_list","arguments":[]}}"#,
        ] {
            let reply = refused(f.judge(line));
            assert_eq!(reply["id"], 5, "{line}");
            assert_eq!(reply["error"]["code"], -32602, "{line}");
        }
        // An id still in flight is refused; once answered, it is free again.
        let call = r#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#;
        assert_eq!(f.judge(call), Frame::Message);
        assert_eq!(refused(f.judge(call))["id"], 7);
        f.answered(r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[]}}"#);
        assert_eq!(f.judge(call), Frame::Message);
        // What the service could not read is answered here with its id, or
        // (a notification) not at all.
        for (line, code) in [
            (
                r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"x","arguments":{"t":"a\ud800b"}}}"#,
                -32602,
            ),
            (
                r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"x","arguments":{"n":1e400}}}"#,
                -32602,
            ),
            (
                r#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"ping"}"#,
                -32602,
            ),
            (
                r#"{"jsonrpc":"2.0","id":"a","id":"b","method":"ping"}"#,
                -32602,
            ),
        ] {
            let reply = refused(f.judge(line));
            assert_eq!(reply["error"]["code"], code, "{line}");
            assert!(!reply["id"].is_null(), "{line}: {reply}");
        }
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{"name":"x","arguments":{{"d":{}1{}}}}}}}"#,
            "[".repeat(10_000),
            "]".repeat(10_000)
        );
        assert_eq!(refused(f.judge(&deep))["id"], 9);
        let null_id = refused(f.judge(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#));
        assert_eq!(
            (null_id["id"].clone(), null_id["error"]["code"].clone()),
            (Value::Null, json!(-32600))
        );
        assert_eq!(
            f.judge(r#"{"jsonrpc":"2.0","method":"notifications/initialized","params":[]}"#),
            Frame::Blank
        );
        // A cancelled one stays taken (it is never answered).
        let cancelled = r#"{"jsonrpc":"2.0","id":11,"method":"tools/list"}"#;
        assert_eq!(f.judge(cancelled), Frame::Message);
        f.judge(
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":11}}"#,
        );
        assert_eq!(refused(f.judge(cancelled))["id"], 11);
        // A response before initialize is dropped, not passed on.
        let mut fresh = Framer::default();
        assert_eq!(
            fresh.judge(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            Frame::Blank
        );
        // Revision 2026-07-28 has no handshake: a request that names it (with
        // the client's capabilities) begins the session, and notifications
        // then go on.
        let stateless = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
        assert_eq!(fresh.judge(stateless), Frame::Message);
        assert_eq!(
            fresh.judge(
                r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}"#
            ),
            Frame::Message
        );
    }
}
