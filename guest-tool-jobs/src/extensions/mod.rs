//! The opt-in extensions (see the WIT `extension`): ready waits, input and
//! signals, paging and searching retained output, and listening ports. A config
//! without them never reaches this module, so the seed surfaces stay exactly as
//! the contract words them.
//!
//! Each profile gets the extension tools in its own words: profile A's
//! `job_input`, `job_signal`, `job_log` with `job_id`; profile B's `task_*` with
//! `task_id`; profile C's `job_*` with `id`, and C's `error: ` prefix and
//! not-found text.

use serde_json::{Value, json};

use crate::caps::cap_result;
use crate::config::Config;
use crate::model::{
    JobSignal, JobSnapshot, JobsView, RegistryError, ToolAnnotations, ToolDefinition, ToolResult,
    UiCard,
};
use crate::wording::ExtensionWords;

mod args;
mod input;
mod log;
mod ports;
mod ready;
pub mod runners;
mod terminal;

pub use log::{
    DEFAULT_CONTEXT_LINES, DEFAULT_MATCHES, DEFAULT_PAGE_LINES, MAX_CONTEXT_LINES,
    MAX_LOG_TEXT_BYTES, MAX_MATCHES, MAX_PAGE_LINES,
};
pub use ports::{listening, ports_of};

/// Where and how a job runs, as its status and list row show it: its
/// runner's placement (extension `runners`: `[ray: raysubmit_Xy12]`), then
/// its sandbox (extension `sandbox`: `[sandbox: workspace-write, network
/// off]`, and `[sandbox: the engine's]` for a job on an engine); `None` when
/// neither applies.
pub fn where_of(config: &crate::config::Config, job: &crate::model::JobSnapshot) -> Option<String> {
    let placement = runners::placement_of(config, job);
    let sandbox = if !config.extensions.sandbox {
        None
    } else if job.placement.is_some() {
        Some("[sandbox: the engine's]".to_owned())
    } else {
        job.sandbox.as_ref().map(crate::model::Sandbox::note)
    };
    match (placement, sandbox) {
        (Some(placement), Some(sandbox)) => Some(format!("{placement} {sandbox}")),
        (placement, sandbox) => placement.or(sandbox),
    }
}
pub use ready::{matched_lines, matched_note, ready_args, ready_properties, wait_note};
pub use terminal::{
    PROMPT_QUIET_MS, output_properties, prompt_note, screen_text, wants_screen, with_prompt,
};

/// The most bytes one `*_input` call writes.
pub const MAX_INPUT_BYTES: usize = 64 * 1024;

/// The longest pattern `until` or `search` may be: what a person writes to
/// find a line, with room to spare. The host holds patterns to the same bound
/// before compiling anything.
pub const MAX_PATTERN_BYTES: usize = 4096;

/// How a surface words and shapes the extension calls. Its words are data
/// ([`ExtensionWords`], on each surface's wording); what differs in kind (how
/// errors, ids and quiet waits read) is answered here, so this module never
/// asks which surface runs. Implemented by each surface.
pub trait Dialect {
    /// The extension tools' words.
    fn words(&self) -> &ExtensionWords;
    /// The unit of the quiet-wait argument.
    fn quiet(&self) -> Quiet;
    /// A registry failure in the surface's words.
    fn registry_error(&self, error: &RegistryError) -> String;
    /// A refused call's text, from its message.
    fn error_text(&self, message: &str) -> String;
    /// A call's text once it is done, with what the surface adds (a status line).
    fn done_text(&self, text: String, job: &JobSnapshot) -> String;
    /// The id argument as the surface reads it (the string given), or the error.
    fn job_id(&self, id: &str) -> Result<String, String>;
}

/// The quiet-wait argument a surface takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quiet {
    /// `quiet_ms`, a number of milliseconds (profiles A and B).
    Milliseconds,
    /// `quiet_seconds`, a whole number of seconds (profile C).
    Seconds,
}

/// Which extension tool a name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tool {
    Input,
    Signal,
    Log,
    Resize,
}

fn which(config: &Config, d: &dyn Dialect, tool: &str) -> Option<Tool> {
    let w = d.words();
    let ext = config.extensions;
    if ext.input && tool == w.input_tool {
        Some(Tool::Input)
    } else if ext.input && tool == w.signal_tool {
        Some(Tool::Signal)
    } else if ext.log && tool == w.log_tool {
        Some(Tool::Log)
    } else if ext.terminal && tool == w.resize_tool {
        Some(Tool::Resize)
    } else {
        None
    }
}

/// The extension tools this config enables, in the profile's words.
pub fn tool_definitions(config: &Config, d: &dyn Dialect) -> Vec<ToolDefinition> {
    let w = d.words();
    let id = json!({"type": "string", "description": format!("The {} id.", w.noun)});
    let mut tools = Vec::new();
    if config.extensions.input {
        tools.push(ToolDefinition {
            name: w.input_tool,
            description: w.input_description,
            input_schema: json!({
                "type": "object",
                "properties": {
                    w.id_param: id,
                    "text": {"type": "string", "description": format!("Text to write (at most {MAX_INPUT_BYTES} bytes).")},
                    "newline": {"type": "boolean", "description": "Append a newline to text (default true)."},
                    "close": {"type": "boolean", "description": "Close stdin after writing (EOF)."}
                },
                "required": [w.id_param]
            })
            .tap_keys(config.extensions.terminal),
            output_schema: None,
            // What a program does with its input is its own affair (it may be
            // the answer to "delete everything? [y/N]").
            annotations: ToolAnnotations::acts(format!("Write to a background {}'s input", w.noun), true, false),
        });
        tools.push(ToolDefinition {
            name: w.signal_tool,
            description: w.signal_description,
            input_schema: json!({
                "type": "object",
                "properties": {
                    w.id_param: id,
                    "signal": {"type": "string", "enum": JobSignal::ALL.iter().map(|s| s.name()).collect::<Vec<_>>()}
                },
                "required": [w.id_param, "signal"]
            }),
            output_schema: None,
            annotations: ToolAnnotations::acts(format!("Signal a background {}", w.noun), true, false),
        });
    }
    if config.extensions.log {
        tools.push(ToolDefinition {
            name: w.log_tool,
            description: w.log_description,
            input_schema: json!({
                "type": "object",
                "properties": {
                    w.id_param: id,
                    "stream": {"type": "string", "enum": ["stdout", "stderr"], "description": "The stream to page (default stdout); a search without it looks at both."},
                    "start_line": {"type": "integer", "description": "First line to show, from 1. Without it, the last lines are shown."},
                    "lines": {"type": "integer", "description": format!("How many lines (1 to {MAX_PAGE_LINES}, default {DEFAULT_PAGE_LINES}).")},
                    "search": {"type": "string", "description": "A regular expression; shows matching lines with context instead of a page."},
                    "context": {"type": "integer", "description": format!("Lines of context around each match (0 to {MAX_CONTEXT_LINES}, default {DEFAULT_CONTEXT_LINES}).")},
                    "max_matches": {"type": "integer", "description": format!("Most matches to show (1 to {MAX_MATCHES}, default {DEFAULT_MATCHES}).")}
                },
                "required": [w.id_param]
            })
            .tap_raw(config.extensions.terminal),
            output_schema: None,
            annotations: ToolAnnotations::reads(format!("Page a background {}'s output", w.noun), true),
        });
    }
    if config.extensions.terminal {
        tools.push(ToolDefinition {
            name: w.resize_tool,
            description: w.resize_description,
            input_schema: terminal::resize_schema(d),
            output_schema: None,
            annotations: ToolAnnotations::acts(
                format!("Resize a background {}'s terminal", w.noun),
                false,
                true,
            ),
        });
    }
    tools
}

/// The terminal extension's additions to other extension tools' schemas.
trait TerminalSchema {
    /// The input tool's `keys`.
    fn tap_keys(self, on: bool) -> Value;
    /// The log tool's `raw`.
    fn tap_raw(self, on: bool) -> Value;
}

impl TerminalSchema for Value {
    fn tap_keys(mut self, on: bool) -> Value {
        if on {
            self["properties"]["keys"] = terminal::keys_property();
        }
        self
    }

    fn tap_raw(mut self, on: bool) -> Value {
        if on {
            self["properties"]["raw"] = crate::model::schema::boolean(
                "Page or search the output as the program wrote it (stdout, or stderr with stream), escape sequences and redraws included, instead of the rendered text of a job on a terminal.",
            );
        }
        self
    }
}

/// The UI card for an extension tool call.
pub fn ui_card(config: &Config, d: &dyn Dialect, tool: &str, args_json: &str) -> Option<UiCard> {
    let w = d.words();
    let which = which(config, d, tool)?;
    let id = serde_json::from_str::<Value>(args_json)
        .ok()
        .and_then(|a| a.get(w.id_param).and_then(Value::as_str).map(str::to_owned));
    let (base, kind) = match which {
        Tool::Input => (format!("Write input to background {}", w.noun), "execute"),
        Tool::Signal => (format!("Signal background {}", w.noun), "execute"),
        Tool::Log => (format!("Page output of background {}", w.noun), "read"),
        Tool::Resize => (
            format!("Resize the terminal of background {}", w.noun),
            "execute",
        ),
    };
    Some(UiCard {
        title: match &id {
            Some(id) => format!("{base} {id}"),
            None => base,
        },
        kind,
        raw_input: id,
    })
}

/// The message for a registry failure in the extension calls: the input
/// errors name the job `id`; every other error reads as the profile's own
/// tools word it.
pub fn error_message(error: &RegistryError, d: &dyn Dialect, id: &str) -> String {
    let noun = d.words().noun;
    match error {
        RegistryError::NoInput => {
            format!("{noun} {id} was started without open input (start it with \"stdin\": true)")
        }
        RegistryError::InputClosed => format!("the input of {noun} {id} is closed"),
        RegistryError::NoTerminal => {
            format!("{noun} {id} was not started on a terminal (start it with \"tty\": true)")
        }
        other => d.registry_error(other),
    }
}

fn error_result(d: &dyn Dialect, message: &str, cap: Option<u64>) -> ToolResult {
    ToolResult {
        text: cap_result(&d.error_text(message), cap),
        is_error: true,
        value: None,
    }
}

fn done(d: &dyn Dialect, text: String, job: &JobSnapshot, cap: Option<u64>) -> ToolResult {
    ToolResult {
        text: cap_result(&d.done_text(text, job), cap),
        is_error: false,
        value: None,
    }
}

/// Runs an extension tool call.
pub fn invoke(
    view: &dyn JobsView,
    config: &Config,
    d: &dyn Dialect,
    tool: &str,
    args_json: &str,
) -> Option<ToolResult> {
    let which = which(config, d, tool)?;
    let args = match args::parse_object(args_json) {
        Ok(args) => args,
        Err(message) => return Some(error_result(d, &message, None)),
    };
    let id = match args::required_id(&args, d) {
        Ok(id) => id,
        Err(message) => return Some(error_result(d, &message, None)),
    };
    // One look at the job serves the cap and the tools; each checks its
    // arguments before it reports an id the caller cannot see.
    let found = view.get(&id).map_err(|e| error_message(&e, d, &id));
    let cap = found.as_ref().ok().and_then(|j| j.output_limit_bytes);
    let result = match which {
        Tool::Input => input::input(view, config, d, &id, &args, &found, cap),
        Tool::Signal => input::signal(view, d, &id, &args, &found, cap),
        Tool::Log => log::log(view, config, d, &id, &args, &found, cap),
        Tool::Resize => terminal::resize(view, d, &id, &args, &found, cap),
    };
    Some(result.unwrap_or_else(|message| error_result(d, &message, cap)))
}

/// The job [`invoke`] looked up, or the error for its id.
pub(super) type Found = Result<JobSnapshot, String>;

/// The job [`invoke`] looked up, if it is still live; else the error that
/// says it has finished (a signal or a resize reaches nothing then).
fn live(d: &dyn Dialect, id: &str, found: &Found) -> Result<JobSnapshot, String> {
    let job = found.clone()?;
    if job.status.is_terminal() {
        return Err(format!(
            "{} {id} has already finished {}",
            d.words().noun,
            crate::render::status_line(&job)
        ));
    }
    Ok(job)
}
