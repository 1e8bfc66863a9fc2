//! A session's reply dressed for the wire: content blocks (the notices,
//! then the text), and under `--structured-output` the structured value and
//! the tools' output schemas; the tools' annotations.

use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ContentBlock, ToolAnnotations};
use serde_json::{Map, Value, json};

use host::session::SessionReply;

use super::JobsServer;

/// The answer of a `tools/call` before it is dressed for the wire.
pub(super) enum Answer {
    Reply(SessionReply),
    /// The call's job as a new task (tasks extension).
    Task(String),
}

pub(super) fn task_id_of(params: &Value) -> Result<&str, ErrorData> {
    params
        .get("taskId")
        .and_then(Value::as_str)
        .ok_or_else(|| ErrorData::invalid_params("Invalid params: taskId must be a string", None))
}

pub(super) fn object(json: &str) -> Map<String, Value> {
    match serde_json::from_str(json) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

/// The output schema under `--structured-output`: the text the model would
/// read and the notices placed before it, so a client that shows only the
/// structured value loses neither, plus the tool's canonical value (when it
/// has one) under `value`.
pub(super) fn output_schema(value_schema: Option<&str>) -> Map<String, Value> {
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
pub(super) fn structured(reply: &host::session::SessionReply) -> Value {
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
pub(super) fn annotations(hints: &host::plugin::ToolAnnotations) -> ToolAnnotations {
    ToolAnnotations::from_raw(
        Some(hints.title.clone()),
        Some(hints.read_only_hint),
        Some(hints.destructive_hint),
        Some(hints.idempotent_hint),
        Some(hints.open_world_hint),
    )
}

impl JobsServer {
    /// A reply as the tool result the model reads.
    pub(super) fn result_of(&self, reply: &SessionReply) -> CallToolResult {
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
}
