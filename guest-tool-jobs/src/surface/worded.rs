//! The worded surfaces (profiles A and B): their three tools' definitions, UI
//! cards, argument checks and call flows, all in the words of one [`Wording`].
//!
//! (Over 500 lines: the worded surface's tools (read, list, kill) for
//! profiles A and B, each call's check and answer in the words of a
//! `Wording`; a third is their tests.)

use serde_json::{Map, Value, json};

use crate::caps::cap_result;
use crate::config::Config;
use crate::extensions::{self, Dialect, Quiet};
use crate::model::{
    ContentBlock, JobSnapshot, JobsView, Json, KillOutcome, Pair, RegistryError, Step,
    ToolAnnotations, ToolDefinition, ToolResult, UiCard, WaitRequest, Waited, json_type, timer_ms,
};
use crate::render::{list_text, read_text_noted, registry_error_message, status_line};
use crate::wording::{ExtensionWords, Wording};

/// The prompt section's order: after the shell tool's section (105).
pub const PROMPT_SECTION_ORDER: u32 = 106;

/// Which of a profile's three tools a name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tool {
    Output,
    List,
    Kill,
}

fn which(tool: &str, words: &Wording) -> Option<Tool> {
    if tool == words.output_tool {
        Some(Tool::Output)
    } else if tool == words.list_tool {
        Some(Tool::List)
    } else if tool == words.kill_tool {
        Some(Tool::Kill)
    } else {
        None
    }
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

/// A worded surface's extension calls: its words are on the wording; errors
/// read as its own tools word them, and every answer ends with a status line.
impl Dialect for Wording {
    fn words(&self) -> &ExtensionWords {
        &self.extensions
    }

    fn quiet(&self) -> Quiet {
        Quiet::Milliseconds
    }

    fn registry_error(&self, error: &RegistryError) -> String {
        registry_error_message(error, self)
    }

    fn error_text(&self, message: &str) -> String {
        format!("Error: {message}")
    }

    fn done_text(&self, text: String, job: &JobSnapshot) -> String {
        format!("{text}\n{}", status_line(job))
    }

    fn job_id(&self, id: &str) -> Result<String, String> {
        if id.is_empty() {
            let key = self.extensions.id_param;
            return Err(format!(
                "invalid {key}: expected a non-empty string, got \"\""
            ));
        }
        Ok(id.to_owned())
    }
}

/// A profile's tools with their exact descriptions and schemas, then the
/// extension tools the config enables.
pub fn tool_definitions(config: &Config, w: &'static Wording) -> Vec<ToolDefinition> {
    let mut output_properties = json!({
        w.id_param: {"type": "string", "description": w.id_description},
        "wait": {"type": "boolean", "description": w.wait_description},
        "timeout_ms": {"type": "number", "description": "Max wait in milliseconds (only meaningful with wait: true). Defaults to the configured wait timeout; capped by the configured maximum."}
    });
    for (name, schema) in extensions::ready_properties(config, w)
        .into_iter()
        .chain(extensions::output_properties(config))
    {
        output_properties[name] = schema;
    }
    let mut tools = vec![
        ToolDefinition {
            name: w.output_tool,
            description: w.output_description,
            input_schema: json!({
                "type": "object",
                "properties": output_properties,
                "required": [w.id_param]
            }),
            output_schema: Some(json!({
                "type": "object",
                "properties": {"text": {"type": "string"}, w.value_key: public_job_schema()},
                "required": ["text", w.value_key],
                "additionalProperties": false
            })),
            annotations: ToolAnnotations::reads(
                format!("Read background {} output", w.noun),
                false,
            ),
        },
        ToolDefinition {
            name: w.list_tool,
            description: w.list_description,
            input_schema: json!({"type": "object", "properties": {}}),
            output_schema: Some(json!({"type": "array", "items": public_job_schema()})),
            annotations: ToolAnnotations::reads(format!("List background {}s", w.noun), true),
        },
        ToolDefinition {
            name: w.kill_tool,
            description: w.kill_description,
            input_schema: json!({
                "type": "object",
                "properties": {
                    w.id_param: {"type": "string", "description": w.id_description},
                    "reason": {"type": "string", "description": w.reason_description}
                },
                "required": [w.id_param]
            }),
            output_schema: Some(json!({
                "type": "object",
                "properties": {
                    "outcome": {"type": "string", "enum": ["cancellation-requested", "already-finished"]},
                    w.value_key: public_job_schema()
                },
                "required": ["outcome", w.value_key],
                "additionalProperties": false
            })),
            annotations: ToolAnnotations::acts(format!("Stop a background {}", w.noun), true, true),
        },
    ];
    tools.extend(extensions::tool_definitions(config, w));
    tools
}

/// The card for a call, or `None` for a tool the profile does not have.
pub fn ui_card(config: &Config, w: &Wording, tool: &str, args_json: &str) -> Option<UiCard> {
    if let Some(card) = extensions::ui_card(config, w, tool, args_json) {
        return Some(card);
    }
    let id = serde_json::from_str::<Value>(args_json)
        .ok()
        .and_then(|v| v.get(w.id_param).and_then(Value::as_str).map(str::to_owned));
    let titled = |base: String| match &id {
        Some(id) => format!("{base} {id}"),
        None => base,
    };
    Some(match which(tool, w)? {
        Tool::Output => UiCard {
            title: titled(format!("Read output from background {}", w.noun)),
            kind: "read",
            raw_input: id.clone(),
        },
        Tool::List => UiCard {
            title: format!("List background {}s", w.noun),
            kind: "read",
            raw_input: None,
        },
        Tool::Kill => UiCard {
            title: titled(format!("Kill background {}", w.noun)),
            kind: "execute",
            raw_input: id.clone(),
        },
    })
}

/// Declared parameter types, for the argument check.
#[derive(Clone, Copy)]
enum ParamType {
    String,
    Boolean,
    Number,
}

fn params(tool: Tool, w: &Wording, config: &Config) -> Vec<(&'static str, ParamType, bool)> {
    match tool {
        Tool::Output => {
            let mut declared = vec![
                (w.id_param, ParamType::String, true),
                ("wait", ParamType::Boolean, false),
                ("timeout_ms", ParamType::Number, false),
            ];
            if config.extensions.ready {
                declared.push(("until", ParamType::String, false));
                declared.push(("quiet_ms", ParamType::Number, false));
            }
            if config.extensions.terminal {
                declared.push(("view", ParamType::String, false));
                declared.push(("prompt", ParamType::Boolean, false));
            }
            declared
        }
        Tool::List => Vec::new(),
        Tool::Kill => vec![
            (w.id_param, ParamType::String, true),
            ("reason", ParamType::String, false),
        ],
    }
}

/// Parses the arguments and checks them against the tool's schema. Undeclared keys
/// are accepted, as the schemas are open.
fn check_args<'a>(
    declared: &[(&'static str, ParamType, bool)],
    value: &'a Value,
) -> Result<&'a Map<String, Value>, String> {
    let Value::Object(map) = value else {
        return Err(format!(
            "invalid arguments: expected an object, got {}",
            json_type(value)
        ));
    };
    let mut violations = Vec::new();
    for (name, ty, required) in declared.iter() {
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

/// The cap that applies to a call: the `output_limit_bytes` of the job named by
/// the id argument, when that is a non-empty string naming a job the caller can
/// see. Lists are never capped.
fn cap_for(
    view: &dyn JobsView,
    tool: Option<Tool>,
    w: &Wording,
    args: Option<&Value>,
) -> Option<u64> {
    if !matches!(tool, Some(Tool::Output | Tool::Kill)) {
        return None;
    }
    let id = args?
        .get(w.id_param)?
        .as_str()
        .filter(|id| !id.is_empty())?;
    view.get(id).ok()?.output_limit_bytes
}

fn error_result(message: &str, cap: Option<u64>) -> ToolResult {
    ToolResult {
        text: cap_result(&format!("Error: {message}"), cap),
        is_error: true,
        value: None,
    }
}

fn job_id<'a>(args: &'a Map<String, Value>, w: &Wording) -> Result<&'a str, String> {
    // The schema check has already made the id a string.
    let id = args
        .get(w.id_param)
        .and_then(Value::as_str)
        .unwrap_or_default();
    if id.is_empty() {
        return Err(format!(
            "invalid {}: expected a non-empty string, got \"\"",
            w.id_param
        ));
    }
    Ok(id)
}

/// Runs one step of a tool call for the caller `view` stands for: `waited` is
/// `None` on the first step, and the outcome of the wait it asked for after that.
pub fn invoke(
    view: &dyn JobsView,
    config: &Config,
    w: &Wording,
    tool: &str,
    args_json: &str,
    waited: Option<&Waited>,
) -> Step<ToolResult> {
    if let Some(result) = extensions::invoke(view, config, w, tool, args_json) {
        return Step::Done(result);
    }
    let Some(which) = which(tool, w) else {
        return Step::Done(error_result(&format!("unknown tool \"{tool}\""), None));
    };
    // Parsed once: the argument check and an error's cap lookup read the same value.
    let parsed = serde_json::from_str::<Value>(args_json)
        .map_err(|e| format!("invalid arguments: not valid JSON ({e})"));
    let outcome = parsed.as_ref().map_err(Clone::clone).and_then(|value| {
        let args = check_args(&params(which, w, config), value)?;
        match which {
            Tool::Output => job_output(view, config, w, args, waited),
            Tool::List => Ok(Step::Done(job_list(view, config, w))),
            Tool::Kill => job_kill(view, w, args).map(Step::Done),
        }
    });
    // The cap is looked up for an error only: a read or a kill that succeeds
    // caps its text by the job it already holds, one registry call fewer.
    outcome.unwrap_or_else(|message| {
        let cap = cap_for(view, Some(which), w, parsed.as_ref().ok());
        Step::Done(error_result(&message, cap))
    })
}

fn job_output(
    view: &dyn JobsView,
    config: &Config,
    w: &Wording,
    args: &Map<String, Value>,
    waited: Option<&Waited>,
) -> Result<Step<ToolResult>, String> {
    let id = job_id(args, w)?;
    let ready = extensions::ready_args(config, w, args)?;
    let screen = extensions::wants_screen(config, args)?;
    let until = extensions::with_prompt(config, args, ready.clone())?;
    let mut ended = None;
    if args.get("wait") == Some(&Value::Bool(true)) || ready.is_some() {
        let asked = args
            .get("timeout_ms")
            .and_then(Value::as_f64)
            .unwrap_or(config.wait_timeout_ms as f64);
        // Clamped down only: zero or negative values fail, after the id.
        let timeout = asked.min(config.max_wait_timeout_ms as f64);
        if waited.is_none() {
            // An id the caller cannot see is named at once (before a bad
            // timeout, as the registry orders its checks), without a wait.
            view.get(id).map_err(|e| registry_error_message(&e, w))?;
        }
        let Some(timeout_ms) = timer_ms(timeout) else {
            let invalid = RegistryError::InvalidTimeout(timeout);
            return Err(registry_error_message(&invalid, w));
        };
        match waited {
            None => {
                return Ok(Step::Wait(WaitRequest {
                    job_id: id.to_owned(),
                    timeout_ms,
                    until: until.clone(),
                }));
            }
            Some(Err(e)) => return Err(registry_error_message(e, w)),
            Some(Ok(outcome)) => ended = Some((outcome, timeout_ms)),
        }
    }
    let note = match (&ready, ended) {
        (Some(ready), Some((outcome, timeout_ms))) => {
            Some(extensions::wait_note(w, outcome, timeout_ms, ready))
        }
        (None, Some((outcome, _))) => extensions::prompt_note(w, outcome),
        _ => None,
    };
    if screen {
        return screen_result(view, config, w, id, note);
    }
    let (text, job) = view.read(id).map_err(|e| registry_error_message(&e, w))?;
    let cap = job.output_limit_bytes;
    let shown = with_ports(view, config, &job);
    let sandbox = extensions::where_of(config, &job);
    let rendered = match note {
        Some(note) => {
            let budget = cap.map(|c| c.saturating_sub(note.len() as u64 + 1));
            cap_result(
                &format!(
                    "{note}\n{}",
                    read_text_noted(&text, &shown, budget, sandbox.as_deref())
                ),
                cap,
            )
        }
        _ => read_text_noted(&text, &shown, cap, sandbox.as_deref()),
    };
    Ok(Step::Done(ToolResult {
        value: Some(Json::of(&Pair(
            ("text", &text),
            (w.value_key, job.public()),
        ))),
        text: rendered,
        is_error: false,
    }))
}

/// A `view: "screen"` read (extension `terminal`): what the job's terminal
/// shows, after the wait's note (when there is one), then the status line.
/// Consumes nothing.
fn screen_result(
    view: &dyn JobsView,
    config: &Config,
    w: &Wording,
    id: &str,
    note: Option<String>,
) -> Result<Step<ToolResult>, String> {
    let screen = view
        .screen(id)
        .map_err(|e| extensions::error_message(&e, w, id))?;
    let cap = screen.job.output_limit_bytes;
    let shown = with_ports(view, config, &screen.job);
    let sandbox = extensions::where_of(config, &screen.job);
    let mut text = note.map(|note| format!("{note}\n")).unwrap_or_default();
    let drawn = extensions::screen_text(&screen);
    text.push_str(&drawn);
    let rendered = read_text_noted(&text, &shown, cap, sandbox.as_deref());
    // The read's own value shape (its output schema), with the screen as its
    // text: a client that shows the model the structured value shows it that.
    Ok(Step::Done(ToolResult {
        value: Some(Json::of(&Pair(
            ("text", &drawn),
            (w.value_key, screen.job.public()),
        ))),
        text: rendered,
        is_error: false,
    }))
}

/// The job as its status line shows it: a live job's listening ports take the
/// place of the detail (extension `ports`). Without ports, the job itself.
fn with_ports<'a>(
    view: &dyn JobsView,
    config: &Config,
    job: &'a JobSnapshot,
) -> std::borrow::Cow<'a, JobSnapshot> {
    match extensions::ports_of(view, config, job) {
        Some(ports) if job.detail.is_none() => std::borrow::Cow::Owned(JobSnapshot {
            detail: Some(ports),
            ..job.clone()
        }),
        _ => std::borrow::Cow::Borrowed(job),
    }
}

fn job_list(view: &dyn JobsView, config: &Config, w: &Wording) -> ToolResult {
    let (jobs, left_out) = crate::model::bounded_list(view.list_jobs());
    let public: Vec<_> = jobs.iter().map(JobSnapshot::public).collect();
    let text = if config.extensions.ports || config.extensions.sandbox || config.extensions.runners
    {
        let rows: Vec<JobSnapshot> = jobs
            .iter()
            .map(|job| with_list_ports(view, config, job))
            .collect();
        list_text(&rows, left_out, w)
    } else {
        list_text(&jobs, left_out, w)
    };
    ToolResult {
        text,
        is_error: false,
        value: Some(Json::of(&public)),
    }
}

fn job_kill(
    view: &dyn JobsView,
    w: &Wording,
    args: &Map<String, Value>,
) -> Result<ToolResult, String> {
    let id = job_id(args, w)?;
    let reason = args.get("reason").and_then(Value::as_str);
    if let Some(reason) = reason {
        view.log_info(&format!("{} {id}: {reason}", w.kill_tool));
    }
    let outcome = view
        .kill(id, reason)
        .map_err(|e| registry_error_message(&e, w))?;
    // A separate, non-consuming look: pending output stays for the next read.
    let job = view.get(id).map_err(|e| registry_error_message(&e, w))?;
    let noun = w.noun;
    let (text, word) = match outcome {
        KillOutcome::Requested => (
            format!("requested cancellation of {noun} {id}"),
            "cancellation-requested",
        ),
        KillOutcome::AlreadyFinished => (
            format!("{noun} {id} had already finished {}", status_line(&job)),
            "already-finished",
        ),
    };
    Ok(ToolResult {
        text: cap_result(&text, job.output_limit_bytes),
        is_error: false,
        value: Some(Json::of(&Pair(
            ("outcome", word),
            (w.value_key, job.public()),
        ))),
    })
}

/// A list row's job: a live job's listening ports follow its label, then
/// where it runs and its sandbox (extensions `ports`, `runners` and
/// `sandbox`).
fn with_list_ports(view: &dyn JobsView, config: &Config, job: &JobSnapshot) -> JobSnapshot {
    let mut shown = job.clone();
    if let Some(ports) = extensions::ports_of(view, config, job) {
        shown.label = format!("{} ({ports})", shown.label);
    }
    if let Some(sandbox) = extensions::where_of(config, job) {
        shown.label = format!("{} {sandbox}", shown.label);
    }
    shown
}

/// Caps a harness-produced result for this call: a lone text block goes through the
/// generic path, any other shape comes back unchanged.
pub fn finalize(
    view: &dyn JobsView,
    w: &Wording,
    tool: &str,
    args_json: &str,
    mut blocks: Vec<ContentBlock>,
) -> Vec<ContentBlock> {
    if let [ContentBlock::Text(text)] = blocks.as_mut_slice() {
        let args = serde_json::from_str::<Value>(args_json).ok();
        let cap = cap_for(view, which(tool, w), w, args.as_ref());
        *text = cap_result(text, cap);
    }
    blocks
}
