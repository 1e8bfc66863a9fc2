//! The three model tools: definitions, UI cards, argument checks and the call flows.

use serde_json::{Map, Value, json};

use crate::caps::cap_result;
use crate::config::Config;
use crate::model::{JobSnapshot, JobsView, KillOutcome};
use crate::render::{list_text, read_text, registry_error_message, status_line};

/// `job_output`.
pub const JOB_OUTPUT: &str = "job_output";
/// `job_list`.
pub const JOB_LIST: &str = "job_list";
/// `job_kill`.
pub const JOB_KILL: &str = "job_kill";

const JOB_ID_DESCRIPTION: &str = "Job id returned by the tool that started the background work.";

/// The system-prompt section name.
pub const PROMPT_SECTION_NAME: &str = "tool:jobs";
/// Its order: after the shell tool's section (105).
pub const PROMPT_SECTION_ORDER: u32 = 106;
/// Its exact text.
pub const PROMPT_SECTION_TEXT: &str = "Track every background job id you start. You are notified in-session when a job finishes \u{2014} do not busy-poll or sleep on one; keep working on independent steps and do not duplicate a running job's work. Before giving a final answer, collect every still-relevant job with job_output (set wait: true only when you are genuinely blocked on it), and job_kill jobs that stopped mattering.";

/// One tool as the model receives it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDefinition {
    /// Tool name.
    pub name: &'static str,
    /// Exact description.
    pub description: &'static str,
    /// JSON Schema of the arguments.
    pub input_schema: Value,
    /// JSON Schema of the canonical value.
    pub output_schema: Value,
}

/// How a user interface presents one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UiCard {
    /// Card title.
    pub title: String,
    /// `read` or `execute`.
    pub kind: &'static str,
    /// The raw input shown (the job id).
    pub raw_input: Option<String>,
}

/// The result of one call: one text block, the error flag and the canonical value.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// Model-visible text, already capped.
    pub text: String,
    /// Whether the call failed.
    pub is_error: bool,
    /// The canonical value, on success.
    pub value: Option<Value>,
}

fn public_job_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "kind": {"type": "string"},
            "label": {"type": "string"},
            "status": {"type": "string", "enum": ["running", "stopping", "completed", "killed", "failed"]},
            "detail": {"type": "string"},
            "startedAt": {"type": "integer"},
            "finishedAt": {"type": "integer"}
        },
        "required": ["id", "kind", "label", "status", "startedAt"],
        "additionalProperties": false
    })
}

/// The three tools with their exact descriptions and schemas.
pub fn tool_definitions() -> Vec<ToolDefinition> {
    vec![
        ToolDefinition {
            name: JOB_OUTPUT,
            description: "Read a background job. Stream jobs return only output since the previous read; final-output jobs return their result after settlement. Every response ends with `[status: ...]`. Reads are non-blocking unless `wait: true`, which waits up to the configured cap.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "job_id": {"type": "string", "description": JOB_ID_DESCRIPTION},
                    "wait": {"type": "boolean", "description": "Block until the job reaches a terminal status or the timeout expires. A timed-out wait returns [status: running] and leaves the job alive."},
                    "timeout_ms": {"type": "number", "description": "Max wait in milliseconds (only meaningful with wait: true). Defaults to the configured wait timeout; capped by the configured maximum."}
                },
                "required": ["job_id"]
            }),
            output_schema: json!({
                "type": "object",
                "properties": {"text": {"type": "string"}, "job": public_job_schema()},
                "required": ["text", "job"],
                "additionalProperties": false
            }),
        },
        ToolDefinition {
            name: JOB_LIST,
            description: "List your background jobs (running and finished) with their ids, kinds, and statuses.",
            input_schema: json!({"type": "object", "properties": {}}),
            output_schema: json!({"type": "array", "items": public_job_schema()}),
        },
        ToolDefinition {
            name: JOB_KILL,
            description: "Request cancellation of a running background job by job id. Returns immediately; the job settles as killed once its work actually stops.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "job_id": {"type": "string", "description": JOB_ID_DESCRIPTION},
                    "reason": {"type": "string", "description": "Optional short reason, recorded in the log and forwarded to the job."}
                },
                "required": ["job_id"]
            }),
            output_schema: json!({
                "type": "object",
                "properties": {
                    "outcome": {"type": "string", "enum": ["cancellation-requested", "already-finished"]},
                    "job": public_job_schema()
                },
                "required": ["outcome", "job"],
                "additionalProperties": false
            }),
        },
    ]
}

/// The card for a call, or `None` for an unknown tool.
pub fn ui_card(tool: &str, args_json: &str) -> Option<UiCard> {
    let id = serde_json::from_str::<Value>(args_json)
        .ok()
        .and_then(|v| v.get("job_id").and_then(Value::as_str).map(str::to_owned));
    let titled = |base: &str| match &id {
        Some(id) => format!("{base} {id}"),
        None => base.to_owned(),
    };
    match tool {
        JOB_OUTPUT => Some(UiCard {
            title: titled("Read output from background job"),
            kind: "read",
            raw_input: id.clone(),
        }),
        JOB_LIST => Some(UiCard {
            title: "List background jobs".to_owned(),
            kind: "read",
            raw_input: None,
        }),
        JOB_KILL => Some(UiCard {
            title: titled("Kill background job"),
            kind: "execute",
            raw_input: id.clone(),
        }),
        _ => None,
    }
}

/// Declared parameter types, for the argument check.
#[derive(Clone, Copy)]
enum ParamType {
    String,
    Boolean,
    Number,
}

fn params(tool: &str) -> Option<&'static [(&'static str, ParamType, bool)]> {
    match tool {
        JOB_OUTPUT => Some(&[
            ("job_id", ParamType::String, true),
            ("wait", ParamType::Boolean, false),
            ("timeout_ms", ParamType::Number, false),
        ]),
        JOB_LIST => Some(&[]),
        JOB_KILL => Some(&[
            ("job_id", ParamType::String, true),
            ("reason", ParamType::String, false),
        ]),
        _ => None,
    }
}

/// Parses the arguments and checks them against the tool's schema. Undeclared keys
/// are accepted, as the schemas are open.
fn check_args(tool: &str, args_json: &str) -> Result<Map<String, Value>, String> {
    let declared = params(tool).unwrap_or(&[]);
    let value: Value = serde_json::from_str(args_json)
        .map_err(|e| format!("invalid arguments: not valid JSON ({e})"))?;
    let Value::Object(map) = value else {
        return Err(format!(
            "invalid arguments: expected an object, got {}",
            json_type(&value)
        ));
    };
    let mut violations = Vec::new();
    for (name, ty, required) in declared {
        match map.get(*name) {
            None if *required => violations.push(format!("missing required property \"{name}\"")),
            None => {}
            Some(v) => {
                let (ok, word) = match ty {
                    ParamType::String => (v.is_string(), "a string"),
                    ParamType::Boolean => (v.is_boolean(), "a boolean"),
                    ParamType::Number => (v.is_number(), "a number"),
                };
                if !ok {
                    violations.push(format!("\"{name}\" must be {word}"));
                }
            }
        }
    }
    if violations.is_empty() {
        Ok(map)
    } else {
        Err(format!("invalid arguments: {}", violations.join("; ")))
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The cap that applies to a call: the `output_limit_bytes` of the job named by
/// `job_id`, when that is a non-empty string naming a job the caller can see.
fn cap_for(view: &dyn JobsView, tool: &str, args_json: &str) -> Option<u64> {
    if tool != JOB_OUTPUT && tool != JOB_KILL {
        return None;
    }
    let value: Value = serde_json::from_str(args_json).ok()?;
    let id = value.get("job_id")?.as_str().filter(|id| !id.is_empty())?;
    view.get(id).ok()?.output_limit_bytes
}

fn error_result(message: &str, cap: Option<u64>) -> ToolResult {
    ToolResult {
        text: cap_result(&format!("Error: {message}"), cap),
        is_error: true,
        value: None,
    }
}

fn job_id(args: &Map<String, Value>) -> Result<&str, String> {
    // The schema check has already made job_id a string.
    let id = args
        .get("job_id")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if id.is_empty() {
        return Err("invalid job_id: expected a non-empty string, got \"\"".to_owned());
    }
    Ok(id)
}

/// Runs one tool call for the caller `view` stands for.
pub fn invoke(view: &dyn JobsView, config: &Config, tool: &str, args_json: &str) -> ToolResult {
    if params(tool).is_none() {
        return error_result(&format!("unknown tool \"{tool}\""), None);
    }
    let cap = cap_for(view, tool, args_json);
    let outcome = check_args(tool, args_json).and_then(|args| match tool {
        JOB_OUTPUT => job_output(view, config, &args, cap),
        JOB_LIST => Ok(job_list(view)),
        _ => job_kill(view, &args, cap),
    });
    outcome.unwrap_or_else(|message| error_result(&message, cap))
}

fn job_output(
    view: &dyn JobsView,
    config: &Config,
    args: &Map<String, Value>,
    cap: Option<u64>,
) -> Result<ToolResult, String> {
    let id = job_id(args)?;
    if args.get("wait") == Some(&Value::Bool(true)) {
        let asked = args
            .get("timeout_ms")
            .and_then(Value::as_f64)
            .unwrap_or(config.wait_timeout_ms);
        // Clamped down only: zero or negative values reach the registry and fail there.
        let timeout = asked.min(config.max_wait_timeout_ms);
        view.wait(id, timeout)
            .map_err(|e| registry_error_message(&e))?;
    }
    let (text, job) = view.read(id).map_err(|e| registry_error_message(&e))?;
    let rendered = read_text(&text, &job, cap);
    Ok(ToolResult {
        value: Some(json!({"text": text, "job": job.public()})),
        text: rendered,
        is_error: false,
    })
}

fn job_list(view: &dyn JobsView) -> ToolResult {
    let jobs = view.list_jobs();
    let public: Vec<_> = jobs.iter().map(JobSnapshot::public).collect();
    ToolResult {
        text: list_text(&jobs),
        is_error: false,
        value: Some(json!(public)),
    }
}

fn job_kill(
    view: &dyn JobsView,
    args: &Map<String, Value>,
    cap: Option<u64>,
) -> Result<ToolResult, String> {
    let id = job_id(args)?;
    let reason = args.get("reason").and_then(Value::as_str);
    if let Some(reason) = reason {
        view.log_info(&format!("job_kill {id}: {reason}"));
    }
    let outcome = view
        .kill(id, reason)
        .map_err(|e| registry_error_message(&e))?;
    // A separate, non-consuming look: pending output stays for the next read.
    let job = view.get(id).map_err(|e| registry_error_message(&e))?;
    let (text, word) = match outcome {
        KillOutcome::Requested => (
            format!("requested cancellation of job {id}"),
            "cancellation-requested",
        ),
        KillOutcome::AlreadyFinished => (
            format!("job {id} had already finished {}", status_line(&job)),
            "already-finished",
        ),
    };
    Ok(ToolResult {
        text: cap_result(&text, cap),
        is_error: false,
        value: Some(json!({"outcome": word, "job": job.public()})),
    })
}

/// One block of a result the harness rewrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContentBlock {
    /// Plain text.
    Text(String),
    /// Any other block, as JSON; never cut.
    Other(String),
}

/// Caps a harness-produced result for this call: a lone text block goes through the
/// generic path, any other shape comes back unchanged.
pub fn finalize(
    view: &dyn JobsView,
    tool: &str,
    args_json: &str,
    mut blocks: Vec<ContentBlock>,
) -> Vec<ContentBlock> {
    if let [ContentBlock::Text(text)] = blocks.as_mut_slice() {
        let cap = cap_for(view, tool, args_json);
        *text = cap_result(text, cap);
    }
    blocks
}
