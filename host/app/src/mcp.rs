//! `jobs-host mcp`: the session's tools as an MCP server over stdio.
//!
//! One MCP connection is one owner. Its tools are `bash` (start a background job)
//! and the plugin's tools, executed through the component. Completion notices take
//! the inject lane: each is placed as a text block before the next tool result, and
//! also sent at once as an MCP logging notification (level `notice`, logger: the
//! notice's plugin, `tool-jobs` under profile A). Profile C's batched update is
//! taken before each tool result the same way. When the connection closes, the
//! owner's jobs are cancelled.

// MCP logging is deprecated upstream (SEP-2577) but is still how clients surface
// server-pushed messages today, and it is the channel notices are promised on.
#![allow(deprecated)]

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, LoggingLevel, LoggingMessageNotificationParam, PaginatedRequestParams,
    ServerCapabilities, ServerConfig, SetLevelRequestParams, Tool,
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
}

fn object(json: &str) -> Map<String, Value> {
    match serde_json::from_str(json) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

/// MCP structured output must be an object; a tool whose canonical value is not
/// (the job list) carries it under `result`, so no client ever shows the model a
/// JSON copy in place of the text.
fn output_schema(json: &str) -> Map<String, Value> {
    let schema: Value = serde_json::from_str(json).unwrap_or(Value::Null);
    if schema.get("type").and_then(Value::as_str) == Some("object") {
        return object(json);
    }
    object(
        &json!({
            "type": "object",
            "properties": {"result": schema},
            "required": ["result"],
            "additionalProperties": false
        })
        .to_string(),
    )
}

fn structured(value: Value) -> Value {
    if value.is_object() {
        value
    } else {
        json!({ "result": value })
    }
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
    /// when the profile has one).
    ///
    /// # Errors
    ///
    /// When the plugin fails to list its tools.
    pub async fn new(
        session: Arc<Session>,
        instructions: Option<String>,
    ) -> Result<JobsServer, host::PluginError> {
        let tools = session
            .tool_definitions()
            .await?
            .into_iter()
            .map(|d| {
                let mut tool = Tool::new(d.name, d.description, Arc::new(object(&d.input_schema)));
                tool.output_schema = d
                    .output_schema
                    .as_deref()
                    .map(|schema| Arc::new(output_schema(schema)));
                tool
            })
            .collect();
        Ok(JobsServer {
            session,
            tools,
            instructions,
        })
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
        let (reader, writer, framing) = framed_stdio();
        let running = self.serve((reader, writer)).await?;
        let peer = running.peer().clone();
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
        session.close().await;
        framing.abort();
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

/// Checks one line of the stdio transport against JSON-RPC 2.0: text that is
/// not JSON is a parse error (`-32700`, `id: null`); JSON that is not a single
/// request, notification or response object is an invalid request (`-32600`,
/// with the request's id when it had a valid one).
pub fn judge_line(line: &str) -> Frame {
    if line.trim().is_empty() {
        return Frame::Blank;
    }
    let error = |code: i32, message: &str, id: Value| {
        Frame::Refused(
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
                .to_string(),
        )
    };
    let value: Value = match serde_json::from_str(line) {
        Ok(value) => value,
        Err(_) => return error(-32700, "Parse error", Value::Null),
    };
    let Value::Object(map) = &value else {
        return error(-32600, "Invalid Request", Value::Null);
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
        Frame::Message
    } else {
        error(-32600, "Invalid Request", reply_id)
    }
}

/// stdin and stdout behind a framing layer: each line from stdin is judged by
/// [`judge_line`]; well-formed ones reach the MCP service, bad ones are answered
/// here, and everything written to stdout goes out as whole lines, so an error
/// reply never splits a message of the service's.
fn framed_stdio() -> (
    tokio::io::DuplexStream,
    tokio::io::DuplexStream,
    tokio::task::JoinHandle<()>,
) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let (mut to_service, service_reads) = tokio::io::duplex(1 << 20);
    let (service_writes, from_service) = tokio::io::duplex(1 << 20);
    let (refusals, mut refused) = tokio::sync::mpsc::unbounded_channel::<String>();
    let output = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        let mut lines = BufReader::new(from_service).lines();
        loop {
            let line = tokio::select! {
                line = lines.next_line() => match line {
                    Ok(Some(line)) => line,
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
    tokio::spawn(async move {
        let mut lines = BufReader::new(tokio::io::stdin()).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            match judge_line(&line) {
                Frame::Blank => {}
                Frame::Refused(reply) => {
                    tracing::debug!("refused a malformed JSON-RPC line");
                    let _ = refusals.send(reply);
                }
                Frame::Message => {
                    if to_service
                        .write_all(format!("{line}\n").as_bytes())
                        .await
                        .is_err()
                    {
                        break;
                    }
                }
            }
        }
        // Dropping `to_service` is the service's end of input.
    });
    (service_reads, service_writes, output)
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
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if !self.tools.iter().any(|t| t.name == request.name) {
            return Err(ErrorData::invalid_params(
                format!("unknown tool \"{}\"", request.name),
                None,
            ));
        }
        let args = Value::Object(request.arguments.unwrap_or_default());
        let reply = self.session.call(&request.name, &args).await;
        let mut content: Vec<ContentBlock> = reply
            .notices
            .iter()
            .map(|n| ContentBlock::text(n.text.clone()))
            .collect();
        content.push(ContentBlock::text(reply.outcome.text));
        let mut result = if reply.outcome.is_error {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        };
        result.structured_content = reply.outcome.value.map(structured);
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
}
