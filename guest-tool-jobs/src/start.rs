//! The start tool (`bash`): its definition per profile and extensions, the
//! check of the model's arguments, and the words for what the host's start did.
//!
//! The host starts the process and words nothing: it gets a [`StartRequest`]
//! from [`check`] and hands what happened back to [`started`].
//!
//! (Over 500 lines: one tool's definition, its argument check field by field
//! (each extension's arguments among them) and its answers, which read
//! together; a third is their tests.)

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::config::{Config, JobLimits};
use crate::extensions::runners;
use crate::model::schema;
use crate::model::{
    DEFAULT_TERMINAL, JobsView, Json, MAX_TIMER_MS, Pair, Sandbox, SandboxFiles, SandboxNetwork,
    Step, TERMINAL_DIMENSIONS, ToolAnnotations, ToolResult, WaitRequest, Waited, dimension,
};
use crate::surface::Surface;
use crate::wording::StartWords;

/// The start tool's name.
pub const START_TOOL: &str = "bash";

/// The longest job name accepted, in bytes.
pub const MAX_NAME_BYTES: usize = 128;

/// The shortest and the longest yield a start may ask for, in milliseconds
/// (extension `yield`).
pub const YIELD_MS: std::ops::RangeInclusive<u32> = 250..=30_000;

/// The largest integer a JSON number carries exactly (2^53 - 1).
const MAX_SAFE_INTEGER: u64 = 9_007_199_254_740_991;

/// The start tool as the model receives it.
#[derive(Debug, Clone, PartialEq)]
pub struct StartTool {
    /// The exact description.
    pub description: String,
    /// JSON Schema of the arguments.
    pub input_schema: Value,
    /// JSON Schema of the canonical value.
    pub output_schema: Value,
    /// Title and behaviour hints.
    pub annotations: ToolAnnotations,
}

/// A checked start (see the WIT `start-request`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StartRequest {
    /// The command line, not blank.
    pub command: String,
    /// The working directory as the model wrote it.
    pub workdir: Option<String>,
    /// The model's description, not blank.
    pub description: Option<String>,
    /// Keep stdin open (extension `input`).
    pub stdin: bool,
    /// The job's name (extension `ports`).
    pub name: Option<String>,
    /// The job's limits (extension `limits`).
    pub limits: JobLimits,
    /// How long the start waits for the command to end (extension `yield`).
    pub yield_ms: Option<u32>,
    /// The sandbox to run it in (extension `sandbox`): the session's, or the
    /// narrower one asked for; `None`: full authority.
    pub sandbox: Option<Sandbox>,
    /// Run it on a terminal of this size (extension `terminal`).
    pub tty: Option<crate::model::TerminalSize>,
    /// Render its output though it has no terminal (the config's
    /// `renderOutput`).
    pub render: bool,
    /// The runner to run it on (extension `runners`); `None`: the host.
    pub runner: Option<String>,
    /// What it needs of its runner's engine (extension `runners`).
    pub resources: Option<crate::model::Resources>,
}

/// What the host's start did (see the WIT `start-made`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartMade {
    /// A new job.
    New(String),
    /// The live job that holds the requested name.
    Existing(String),
}

/// Why the host refused a start (see the WIT `start-error`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartError {
    /// No job controller serves the caller.
    NoController,
    /// The caller is not the live agent of its session.
    StaleOwner(String),
    /// The caller's live jobs are at the limit.
    LimitReached(u64),
    /// The host's own check or the spawn failed, in the host's words.
    Refused(String),
}

/// The start tool under `config`: the description names the profile's read and
/// kill tools; the extensions add arguments.
pub fn definition(config: &Config) -> StartTool {
    let base = Surface::of(config.profile).start_words().description;
    let mut description = if config.extensions.limits {
        base.replace(
            "No timeout applies.",
            "Optional limits (timeout_ms, cpu_seconds, memory_bytes, max_output_bytes) stop it when reached; the session's maxima apply to every job and cannot be raised.",
        )
    } else {
        base.to_owned()
    };
    if config.extensions.yields {
        description.push_str(" With yield_ms it first waits up to that long: a command that ends in time answers with its output, read; one that does not answers with what it printed so far and runs on.");
    }
    if runners::offered(config) {
        description.push_str(&runners::description(config));
    }
    let mut schema = json!({
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The command to run with bash -c."},
            "workdir": {"type": "string", "description": "Working directory; relative paths resolve against the session's."},
            "description": {"type": "string", "description": "Short description of what the command does."}
        },
        "required": ["command"]
    });
    let properties = &mut schema["properties"];
    if config.extensions.input {
        properties["stdin"] = schema::boolean(
            "Keep stdin open so the job can be written to (default: stdin is /dev/null).",
        );
    }
    if config.extensions.ports {
        properties["name"] = schema::string(
            "A name for the job; starting a name whose job is still running returns that job instead of a second one.",
        );
    }
    if config.extensions.limits {
        let limit = |what: &str| schema::typed("integer", what);
        properties["timeout_ms"] = limit("Kill the job after this many milliseconds.");
        properties["cpu_seconds"] = limit("CPU seconds each process of the job may use.");
        properties["memory_bytes"] =
            limit("Address space each process of the job may use, in bytes.");
        properties["max_output_bytes"] =
            limit("Kill the job once it has written this many bytes of output.");
    }
    if config.extensions.terminal {
        properties["tty"] = schema::boolean(
            "Run the job on a terminal (for prompts, REPLs and programs that need one): what it draws is rendered to text, and its input is open.",
        );
        properties["rows"] = schema::integer_in(
            &TERMINAL_DIMENSIONS,
            format!("The terminal's rows (default {}).", DEFAULT_TERMINAL.rows),
        );
        properties["cols"] = schema::integer_in(
            &TERMINAL_DIMENSIONS,
            format!(
                "The terminal's columns (default {}).",
                DEFAULT_TERMINAL.cols
            ),
        );
    }
    if config.extensions.sandbox {
        properties["sandbox"] = json!({
            "type": "object",
            "description": format!(
                "Run this job in a narrower sandbox than the session's ({}): files (full, workspace-write or read-only) and network (on, off, or a list of TCP ports); never a wider one.",
                config.sandbox.as_ref().unwrap_or(&Sandbox::FULL).words()
            ),
            "properties": {
                "files": {"type": "string", "enum": ["full", "workspace-write", "read-only"]},
                "network": {"oneOf": [
                    {"type": "string", "enum": ["on", "off"]},
                    {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 65535}}
                ]}
            },
            "additionalProperties": false
        });
    }
    if config.extensions.yields {
        properties["yield_ms"] = schema::typed(
            "integer",
            format!(
                "Wait up to this many milliseconds ({} to {}) for the command to end before answering; it is never killed for it.",
                YIELD_MS.start(),
                YIELD_MS.end()
            ),
        );
    }
    if runners::offered(config) {
        for (key, property) in runners::properties(config) {
            properties[key] = property;
        }
    }
    StartTool {
        description,
        input_schema: schema,
        output_schema: json!({
            "type": "object",
            "properties": {"kind": {"type": "string", "enum": ["background"]}, "jobId": {"type": "string"}},
            "required": ["kind", "jobId"],
            "additionalProperties": false
        }),
        // It runs any command: neither read-only nor closed-world, and a second
        // start is a second job.
        annotations: ToolAnnotations {
            title: "Run a background shell command".to_owned(),
            read_only: false,
            destructive: true,
            idempotent: false,
            open_world: true,
        },
    }
}

/// Checks the start tool's arguments: the start to make, or the error result.
/// The extensions' arguments are read only where `config` enables them
/// (elsewhere they are ignored, as any unknown key). A command longer than
/// `max_command_bytes` is refused before it is copied: the arguments may be
/// as large as the host's request bound, and the guest's memory is smaller.
///
/// # Errors
///
/// The exact result for the model when the arguments are refused.
pub fn check(
    config: &Config,
    args_json: &str,
    max_command_bytes: u64,
) -> Result<StartRequest, ToolResult> {
    request(config, args_json, max_command_bytes).map_err(|message| ToolResult {
        text: format!("Error: {message}"),
        is_error: true,
        value: None,
    })
}

/// The arguments as raw JSON borrowed from the call's text, by key (the last
/// of a repeated key wins, as in any JSON object).
type RawArgs<'a> = BTreeMap<String, &'a RawValue>;

/// A JSON string, borrowed from the call's text unless it has escapes.
#[derive(Deserialize)]
struct Text<'a>(#[serde(borrow)] Cow<'a, str>);

fn request(
    config: &Config,
    args_json: &str,
    max_command_bytes: u64,
) -> Result<StartRequest, String> {
    let whole: &RawValue =
        serde_json::from_str(args_json).map_err(|e| format!("invalid arguments: {e}"))?;
    if !whole.get().trim_start().starts_with('{') {
        return Err("invalid arguments: expected an object".to_owned());
    }
    let map: RawArgs<'_> =
        serde_json::from_str(whole.get()).map_err(|e| format!("invalid arguments: {e}"))?;
    let mut violations = Vec::new();
    let command = text(&map, "command", &mut violations);
    let workdir = text(&map, "workdir", &mut violations);
    let description = text(&map, "description", &mut violations);
    if !map.contains_key("command") {
        violations.push("missing required property \"command\"".to_owned());
    }
    if !violations.is_empty() {
        return Err(format!("invalid arguments: {}", violations.join("; ")));
    }
    if description.as_deref().is_some_and(|d| d.trim().is_empty()) {
        return Err("invalid description: expected a non-blank string".to_owned());
    }
    let mut request = StartRequest {
        workdir: workdir.map(Cow::into_owned),
        description: description.map(Cow::into_owned),
        ..StartRequest::default()
    };
    if config.extensions.input {
        request.stdin = match value(&map, "stdin") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => b,
            Some(_) => return Err("invalid arguments: \"stdin\" must be a boolean".to_owned()),
        };
    }
    if config.extensions.ports {
        request.name = match value(&map, "name") {
            None | Some(Value::Null) => None,
            Some(Value::String(name)) => Some(name),
            Some(_) => return Err("invalid arguments: \"name\" must be a string".to_owned()),
        };
    }
    if config.extensions.limits {
        let max = &config.limits;
        request.limits = JobLimits {
            timeout_ms: limit(&map, "timeout_ms", max.timeout_ms)?,
            cpu_seconds: limit(&map, "cpu_seconds", max.cpu_seconds)?,
            memory_bytes: limit(&map, "memory_bytes", max.memory_bytes)?,
            output_bytes: limit(&map, "max_output_bytes", max.output_bytes)?,
        };
    }
    if config.extensions.yields {
        request.yield_ms = match value(&map, "yield_ms") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .filter(|n| YIELD_MS.contains(n))
                    .ok_or_else(|| {
                        format!(
                            "invalid yield_ms: expected a whole number of milliseconds from {} to {}, got {v}",
                            YIELD_MS.start(),
                            YIELD_MS.end()
                        )
                    })?,
            ),
        };
    }
    if config.extensions.sandbox {
        request.sandbox = sandbox(config, value(&map, "sandbox"))?;
    }
    if config.extensions.terminal {
        request.tty = terminal(&map)?;
        if request.tty.is_some() {
            request.stdin = true;
        }
        request.render = config.render_output && request.tty.is_none();
    }
    if runners::offered(config) {
        (request.runner, request.resources) =
            runners::runner_args(config, value(&map, "runner"), value(&map, "resources"))?;
        if let Some(runner) = &request.runner {
            let asked = |key: &str| value(&map, key).is_some_and(|v| !v.is_null());
            runners::refuse_what_engines_lack(
                runner,
                &runners::RunnerAsks {
                    stdin: request.stdin,
                    tty: request.tty.is_some(),
                    workdir: request.workdir.is_some(),
                    sandbox: asked("sandbox"),
                    cpu_seconds: asked("cpu_seconds"),
                    memory_bytes: asked("memory_bytes"),
                },
            )?;
            // The engine's own sandbox, and no rendering of this host's.
            request.sandbox = None;
            request.render = false;
        }
    }
    // In the order the host checked them before: the name, then the command.
    if let Some(name) = &request.name {
        check_name(name)?;
    }
    let command = command.unwrap_or_default();
    if command.trim().is_empty() {
        return Err("invalid command: expected a non-blank string".to_owned());
    }
    if command.len() as u64 > max_command_bytes {
        return Err(format!(
            "invalid command: {} bytes is more than the limit of {max_command_bytes} bytes",
            command.len()
        ));
    }
    request.command = command.into_owned();
    Ok(request)
}

/// The terminal a start asks for (extension `terminal`): `tty: true` with
/// `rows` and `cols`. A terminal is the job's input, so `stdin: false`
/// beside it is refused.
fn terminal(map: &RawArgs<'_>) -> Result<Option<crate::model::TerminalSize>, String> {
    let tty = match value(map, "tty") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => b,
        Some(_) => return Err("invalid arguments: \"tty\" must be a boolean".to_owned()),
    };
    let rows = value(map, "rows").filter(|v| !v.is_null());
    let cols = value(map, "cols").filter(|v| !v.is_null());
    if !tty {
        if let Some(key) = [("rows", &rows), ("cols", &cols)]
            .into_iter()
            .find_map(|(k, v)| v.is_some().then_some(k))
        {
            return Err(format!(
                "invalid {key}: only a job started with \"tty\": true has a terminal"
            ));
        }
        return Ok(None);
    }
    if value(map, "stdin") == Some(Value::Bool(false)) {
        return Err(
            "invalid arguments: a job on a terminal reads its input from it; leave out \"stdin\" or set it to true"
                .to_owned(),
        );
    }
    Ok(Some(crate::model::TerminalSize {
        rows: dimension("rows", rows.as_ref(), DEFAULT_TERMINAL.rows)?,
        cols: dimension("cols", cols.as_ref(), DEFAULT_TERMINAL.cols)?,
    }))
}

/// The sandbox a start asks for (extension `sandbox`): each part the
/// session's unless given, and never wider than the session's.
fn sandbox(config: &Config, asked: Option<Value>) -> Result<Option<Sandbox>, String> {
    let session = config.sandbox.clone().unwrap_or(Sandbox::FULL);
    let asked = match asked {
        None | Some(Value::Null) => session.clone(),
        Some(Value::Object(map)) => {
            if let Some(key) = map.keys().find(|k| *k != "files" && *k != "network") {
                return Err(format!(
                    "invalid sandbox: unknown key \"{key}\" (known: files, network)"
                ));
            }
            let files = match map.get("files") {
                None | Some(Value::Null) => session.files,
                Some(v) => v.as_str().and_then(SandboxFiles::parse).ok_or_else(|| {
                    format!("invalid sandbox.files: expected \"full\", \"workspace-write\" or \"read-only\", got {v}")
                })?,
            };
            let network = match map.get("network") {
                None | Some(Value::Null) => session.network.clone(),
                Some(v) => SandboxNetwork::from_json(v).ok_or_else(|| {
                    format!("invalid sandbox.network: expected \"on\", \"off\" or a list of ports from 1 to 65535, got {v}")
                })?,
            };
            Sandbox { files, network }
        }
        Some(v) => {
            return Err(format!(
                "invalid sandbox: expected an object with files and network, got {v}"
            ));
        }
    };
    if !asked.within(&session) {
        return Err(format!(
            "invalid sandbox: {} is wider than this session's sandbox ({}); a start may only narrow it",
            asked.words(),
            session.words()
        ));
    }
    Ok(Some(asked).filter(|s| *s != Sandbox::FULL))
}

/// A string argument, or a violation when it is present and not a string.
fn text<'a>(map: &RawArgs<'a>, key: &str, violations: &mut Vec<String>) -> Option<Cow<'a, str>> {
    let raw = map.get(key)?;
    match serde_json::from_str::<Text<'a>>(raw.get()) {
        Ok(Text(s)) => Some(s),
        Err(_) => {
            violations.push(format!("\"{key}\" must be a string"));
            None
        }
    }
}

/// A small argument as a JSON value.
fn value(map: &RawArgs<'_>, key: &str) -> Option<Value> {
    map.get(key)
        .map(|raw| serde_json::from_str(raw.get()).unwrap_or(Value::Null))
}

/// A job name is shown in every list and status line: it may not move the
/// cursor, recolour a terminal or reorder text.
fn check_name(name: &str) -> Result<(), String> {
    if name.trim().is_empty() {
        return Err("invalid name: expected a non-blank string".to_owned());
    }
    if let Some(c) = name.chars().find(|c| c.is_control() || is_bidi_control(*c)) {
        return Err(format!(
            "invalid name: it contains the control character U+{:04X}",
            u32::from(c)
        ));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(format!(
            "invalid name: {} bytes is more than the limit of {MAX_NAME_BYTES} bytes",
            name.len()
        ));
    }
    Ok(())
}

/// Characters that reorder displayed text (bidirectional embeddings,
/// overrides and isolates), which a terminal or a UI acts on.
pub fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// One limit: what the call asks for (a whole number of at least 1, at most
/// the session's maximum), or else the maximum.
fn limit(map: &RawArgs<'_>, key: &str, max: Option<u64>) -> Result<Option<u64>, String> {
    let asked = match value(map, key) {
        None | Some(Value::Null) => return Ok(max),
        Some(v) => v
            .as_u64()
            .filter(|n| *n >= 1 && *n <= MAX_SAFE_INTEGER)
            .ok_or_else(|| {
                format!("invalid {key}: expected a whole number of at least 1, got {v}")
            })?,
    };
    if key == "timeout_ms" && asked > u64::from(MAX_TIMER_MS) {
        return Err(format!(
            "invalid timeout_ms: expected at most {MAX_TIMER_MS}, got {asked}"
        ));
    }
    match max {
        Some(max) if asked > max => Err(format!(
            "invalid {key}: {asked} is more than this session's limit of {max}"
        )),
        _ => Ok(Some(asked)),
    }
}

/// The start tool's result for `request`, given what the host's start did.
pub fn started(
    config: &Config,
    request: &StartRequest,
    made: Result<StartMade, StartError>,
) -> Step<ToolResult> {
    // A new job whose start yields is waited on first (see `resumed`).
    if let (Ok(StartMade::New(id)), Some(timeout_ms)) = (&made, request.yield_ms) {
        return Step::Wait(WaitRequest {
            job_id: id.clone(),
            timeout_ms,
            // A job on a terminal that stops at a prompt answers then, so the
            // model sees the question at once.
            until: request.tty.map(|_| crate::model::WaitUntil {
                pattern: None,
                quiet_ms: None,
                prompt_quiet_ms: Some(crate::extensions::PROMPT_QUIET_MS),
            }),
        });
    }
    Step::Done(answer(config, request, made))
}

fn answer(
    config: &Config,
    request: &StartRequest,
    made: Result<StartMade, StartError>,
) -> ToolResult {
    let (text, id) = match made {
        Ok(StartMade::New(id)) => (format!("started background job {id}"), id),
        Ok(StartMade::Existing(id)) => (
            format!(
                "background job {id} named \"{}\" is already running; not started again",
                request.name.as_deref().unwrap_or_default()
            ),
            id,
        ),
        Err(error) => {
            return ToolResult {
                text: format!(
                    "Error: {}",
                    refusal(Surface::of(config.profile).start_words(), error)
                ),
                is_error: true,
                value: None,
            };
        }
    };
    ToolResult {
        text,
        is_error: false,
        value: Some(Json::of(&Pair(("kind", "background"), ("jobId", &id)))),
    }
}

/// The answer to a start that yielded, once the host's wait on the new job
/// ended: a job that has ended is read as the profile reads it (profile A's
/// and B's consuming read, profile C's status with the result), and counts as
/// read (the host's wait saw its end); a job that runs on answers with the
/// start line and, for A and B, what it printed so far.
pub fn resumed(view: &dyn JobsView, config: &Config, waited: &Waited) -> ToolResult {
    match waited {
        Ok(outcome) => ToolResult {
            text: crate::surface::resumed_text(view, config, outcome),
            is_error: false,
            value: Some(Json::of(&Pair(
                ("kind", "background"),
                ("jobId", &outcome.job.id),
            ))),
        },
        Err(error) => ToolResult {
            text: crate::surface::resumed_error(config, error),
            is_error: true,
            value: None,
        },
    }
}

/// A refused start in the profile's words: the limit names the profile's own
/// kill tool.
fn refusal(words: &StartWords, error: StartError) -> String {
    let (noun, kill) = (words.noun, words.kill_tool);
    match error {
        StartError::NoController => words.no_controller.to_owned(),
        StartError::StaleOwner(session) => format!(
            "agent \"{session}\" is not the registered agent instance (background {noun} owner must be live)"
        ),
        StartError::LimitReached(limit) => format!(
            "background {noun} limit reached for this owner (limit: {limit}); use {kill} to stop an unneeded {noun}, wait for it to finish, then retry"
        ),
        StartError::Refused(message) => message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse_config;

    fn config(json: &str) -> Config {
        parse_config(json).expect("valid config")
    }

    #[test]
    fn arguments_are_checked_in_order() {
        let c = config(r#"{"extensions": true, "limits": {"timeoutMs": 5000}}"#);
        let error = |args: &str| check(&c, args, 65_536).expect_err(args).text;
        assert_eq!(
            error("{}"),
            "Error: invalid arguments: missing required property \"command\""
        );
        assert_eq!(
            error(r#"{"command": 1, "workdir": 2}"#),
            "Error: invalid arguments: \"command\" must be a string; \"workdir\" must be a string"
        );
        assert_eq!(
            error(r#"{"command": " ", "name": " "}"#),
            "Error: invalid name: expected a non-blank string"
        );
        assert_eq!(
            error(r#"{"command": " "}"#),
            "Error: invalid command: expected a non-blank string"
        );
        assert_eq!(
            error(r#"{"command": "x", "timeout_ms": 6000}"#),
            "Error: invalid timeout_ms: 6000 is more than this session's limit of 5000"
        );
        assert_eq!(error("[]"), "Error: invalid arguments: expected an object");
        // Refused before it is copied, in the host's bound.
        assert_eq!(
            error(&format!(r#"{{"command": "{}"}}"#, "a".repeat(70_000))),
            "Error: invalid command: 70000 bytes is more than the limit of 65536 bytes"
        );
        // Escapes and repeated keys read as JSON does.
        let ok = check(
            &c,
            r#"{"command": "x", "command": "echo \u00e9\n"}"#,
            65_536,
        )
        .unwrap();
        assert_eq!(ok.command, "echo \u{e9}\n");
        let ok = check(
            &c,
            r#"{"command": "make", "stdin": true, "name": "web"}"#,
            65_536,
        )
        .unwrap();
        assert_eq!(ok.limits.timeout_ms, Some(5000));
        assert!(ok.stdin);
        assert_eq!(ok.name.as_deref(), Some("web"));
    }

    #[test]
    fn extension_arguments_are_ignored_when_off() {
        let ok = check(
            &config("{}"),
            r#"{"command": "x", "stdin": 3, "name": 4}"#,
            65_536,
        )
        .unwrap();
        assert_eq!(
            ok,
            StartRequest {
                command: "x".into(),
                ..StartRequest::default()
            }
        );
    }

    #[test]
    fn the_limit_names_each_profile_s_kill_tool() {
        let request = StartRequest::default();
        let text = |profile: &str| match started(
            &config(&format!(r#"{{"profile": "{profile}"}}"#)),
            &request,
            Err(StartError::LimitReached(2)),
        ) {
            Step::Done(result) => result.text,
            Step::Wait(w) => panic!("a refused start waits: {w:?}"),
        };
        assert_eq!(
            text("a"),
            "Error: background job limit reached for this owner (limit: 2); use job_kill to stop an unneeded job, wait for it to finish, then retry"
        );
        assert_eq!(
            text("b"),
            "Error: background task limit reached for this owner (limit: 2); use task_kill to stop an unneeded task, wait for it to finish, then retry"
        );
        assert_eq!(
            text("c"),
            "Error: background job limit reached for this owner (limit: 2); use job_cancel to stop an unneeded job, wait for it to finish, then retry"
        );
    }
}
