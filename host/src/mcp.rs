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

use crate::owner::{Lane, NoticeMessage};
use crate::session::Session;

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
    ) -> Result<JobsServer, crate::PluginError> {
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
        let running = self.serve(rmcp::transport::stdio()).await?;
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
