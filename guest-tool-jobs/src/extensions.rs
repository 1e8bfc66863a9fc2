//! The opt-in extensions (see the WIT `extension`): ready waits, input and
//! signals, paging and searching retained output, and listening ports. A config
//! without them never reaches this module, so the seed surfaces stay exactly as
//! the contract words them.
//!
//! Each profile gets the extension tools in its own words: profile A's
//! `job_input`, `job_signal`, `job_log` with `job_id`; profile B's `task_*` with
//! `task_id`; profile C's `job_*` with `id`, and C's `error: ` prefix and
//! not-found text.

use serde_json::{Map, Value, json};

use crate::caps::cap_result;
use crate::config::Config;
use crate::model::{
    JobSignal, JobSnapshot, JobsView, LineMatch, LinePage, LineQuery, ListeningPort, OutputLine,
    OutputStream, RegistryError, StreamExtent, ToolAnnotations, ToolDefinition, ToolResult, UiCard,
    WaitEnd, WaitOutcome, WaitUntil, json_type, timer_ms,
};
use crate::wording::{self, Wording};

/// The most bytes one `*_input` call writes.
pub const MAX_INPUT_BYTES: usize = 64 * 1024;
/// The longest pattern `until` or `search` may be: what a person writes to
/// find a line, with room to spare. The host holds patterns to the same bound
/// before compiling anything.
pub const MAX_PATTERN_BYTES: usize = 4096;

/// A pattern argument: non-empty and at most [`MAX_PATTERN_BYTES`].
fn pattern_arg<'a>(key: &str, pattern: &'a str) -> Result<&'a str, String> {
    if pattern.is_empty() {
        return Err(format!("invalid {key}: expected a non-empty pattern"));
    }
    if pattern.len() > MAX_PATTERN_BYTES {
        return Err(format!(
            "invalid {key}: the pattern is {} bytes, more than the limit of {MAX_PATTERN_BYTES}",
            pattern.len()
        ));
    }
    Ok(pattern)
}
/// The most lines one page returns.
pub const MAX_PAGE_LINES: u64 = 500;
/// Lines a page returns when the call names no count.
pub const DEFAULT_PAGE_LINES: u64 = 50;
/// The most context lines around a search match.
pub const MAX_CONTEXT_LINES: u64 = 10;
/// Context lines when the call names none.
pub const DEFAULT_CONTEXT_LINES: u64 = 2;
/// The most matches one search returns.
pub const MAX_MATCHES: u64 = 200;
/// Matches returned when the call names no bound.
pub const DEFAULT_MATCHES: u64 = 20;
/// The most bytes of lines one log answer shows; the rest is said, not shown.
pub const MAX_LOG_TEXT_BYTES: usize = 32 * 1024;

/// One profile's words for the extension tools.
#[derive(Debug, Clone, Copy)]
pub struct Vocab {
    /// `job` or `task`.
    pub noun: &'static str,
    /// The id argument.
    pub id_param: &'static str,
    /// The input tool.
    pub input_tool: &'static str,
    /// The signal tool.
    pub signal_tool: &'static str,
    /// The log tool.
    pub log_tool: &'static str,
    input_description: &'static str,
    signal_description: &'static str,
    log_description: &'static str,
    /// The worded surface's vocabulary, whose registry errors these calls
    /// share; `None` for profile C, which words errors its own way (`error: `,
    /// one not-found text) and shows no status lines.
    words: Option<&'static Wording>,
}

impl Vocab {
    fn go_style(&self) -> bool {
        self.words.is_none()
    }
}

/// Profile A's words.
pub const A: Vocab = Vocab {
    noun: "job",
    id_param: "job_id",
    input_tool: "job_input",
    signal_tool: "job_signal",
    log_tool: "job_log",
    input_description: JOB_INPUT_DESCRIPTION,
    signal_description: JOB_SIGNAL_DESCRIPTION,
    log_description: JOB_LOG_DESCRIPTION,
    words: Some(&wording::A),
};

/// Profile B's words.
pub const B: Vocab = Vocab {
    noun: "task",
    id_param: "task_id",
    input_tool: "task_input",
    signal_tool: "task_signal",
    log_tool: "task_log",
    input_description: "Write text to the stdin of a background task started with stdin: true, or close it (EOF). Returns the bytes written and the task's status.",
    signal_description: "Send a signal (INT, TERM, HUP, KILL, STOP or CONT) to every process of a running background task.",
    log_description: "Page or search a background task's retained output without consuming it: lines by number from the start (start_line) or the last lines, or lines matching a regular expression (search) with context. Reads by task_output are unaffected.",
    words: Some(&wording::B),
};

/// Profile C's words.
pub const C: Vocab = Vocab {
    noun: "job",
    id_param: "id",
    input_tool: "job_input",
    signal_tool: "job_signal",
    log_tool: "job_log",
    input_description: JOB_INPUT_DESCRIPTION,
    signal_description: JOB_SIGNAL_DESCRIPTION,
    log_description: JOB_LOG_DESCRIPTION,
    words: None,
};

const JOB_INPUT_DESCRIPTION: &str = "Write text to the stdin of a background job started with stdin: true, or close it (EOF). Returns the bytes written and the job's status.";
const JOB_SIGNAL_DESCRIPTION: &str = "Send a signal (INT, TERM, HUP, KILL, STOP or CONT) to every process of a running background job.";
const JOB_LOG_DESCRIPTION: &str = "Page or search a background job's retained output without consuming it: lines by number from the start (start_line) or the last lines, or lines matching a regular expression (search) with context. Other reads of the job are unaffected.";

const UNTIL_DESCRIPTION: &str = "Also stop waiting when an unread output line matches this regular expression (for example a server's ready line). Implies a wait.";
const QUIET_MS_DESCRIPTION: &str = "Also stop waiting once the job has written nothing for this many milliseconds. Implies a wait.";
const QUIET_SECONDS_DESCRIPTION: &str =
    "Also stop waiting once the job has written nothing for this many seconds.";

/// Which extension tool a name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tool {
    Input,
    Signal,
    Log,
}

fn which(config: &Config, v: &Vocab, tool: &str) -> Option<Tool> {
    let ext = config.extensions;
    if ext.input && tool == v.input_tool {
        Some(Tool::Input)
    } else if ext.input && tool == v.signal_tool {
        Some(Tool::Signal)
    } else if ext.log && tool == v.log_tool {
        Some(Tool::Log)
    } else {
        None
    }
}

/// The ready-wait properties an output or wait tool gains (extension `ready`).
pub fn ready_properties(config: &Config, v: &Vocab) -> Vec<(&'static str, Value)> {
    if !config.extensions.ready {
        return Vec::new();
    }
    let quiet = if v.go_style() {
        (
            "quiet_seconds",
            json!({"type": "integer", "description": QUIET_SECONDS_DESCRIPTION}),
        )
    } else {
        (
            "quiet_ms",
            json!({"type": "number", "description": QUIET_MS_DESCRIPTION}),
        )
    };
    vec![
        (
            "until",
            json!({"type": "string", "description": UNTIL_DESCRIPTION}),
        ),
        quiet,
    ]
}

/// The extension tools this config enables, in the profile's words.
pub fn tool_definitions(config: &Config, v: &Vocab) -> Vec<ToolDefinition> {
    let id = json!({"type": "string", "description": format!("The {} id.", v.noun)});
    let mut tools = Vec::new();
    if config.extensions.input {
        tools.push(ToolDefinition {
            name: v.input_tool,
            description: v.input_description,
            input_schema: json!({
                "type": "object",
                "properties": {
                    v.id_param: id,
                    "text": {"type": "string", "description": format!("Text to write (at most {MAX_INPUT_BYTES} bytes).")},
                    "newline": {"type": "boolean", "description": "Append a newline to text (default true)."},
                    "close": {"type": "boolean", "description": "Close stdin after writing (EOF)."}
                },
                "required": [v.id_param]
            }),
            output_schema: None,
            // What a program does with its input is its own affair (it may be
            // the answer to "delete everything? [y/N]").
            annotations: ToolAnnotations::acts(format!("Write to a background {}'s input", v.noun), true, false),
        });
        tools.push(ToolDefinition {
            name: v.signal_tool,
            description: v.signal_description,
            input_schema: json!({
                "type": "object",
                "properties": {
                    v.id_param: id,
                    "signal": {"type": "string", "enum": JobSignal::ALL.iter().map(|s| s.name()).collect::<Vec<_>>()}
                },
                "required": [v.id_param, "signal"]
            }),
            output_schema: None,
            annotations: ToolAnnotations::acts(format!("Signal a background {}", v.noun), true, false),
        });
    }
    if config.extensions.log {
        tools.push(ToolDefinition {
            name: v.log_tool,
            description: v.log_description,
            input_schema: json!({
                "type": "object",
                "properties": {
                    v.id_param: id,
                    "stream": {"type": "string", "enum": ["stdout", "stderr"], "description": "The stream to page (default stdout); a search without it looks at both."},
                    "start_line": {"type": "integer", "description": "First line to show, from 1. Without it, the last lines are shown."},
                    "lines": {"type": "integer", "description": format!("How many lines (1 to {MAX_PAGE_LINES}, default {DEFAULT_PAGE_LINES}).")},
                    "search": {"type": "string", "description": "A regular expression; shows matching lines with context instead of a page."},
                    "context": {"type": "integer", "description": format!("Lines of context around each match (0 to {MAX_CONTEXT_LINES}, default {DEFAULT_CONTEXT_LINES}).")},
                    "max_matches": {"type": "integer", "description": format!("Most matches to show (1 to {MAX_MATCHES}, default {DEFAULT_MATCHES}).")}
                },
                "required": [v.id_param]
            }),
            output_schema: None,
            annotations: ToolAnnotations::reads(format!("Page a background {}'s output", v.noun), true),
        });
    }
    tools
}

/// The UI card for an extension tool call.
pub fn ui_card(config: &Config, v: &Vocab, tool: &str, args_json: &str) -> Option<UiCard> {
    let which = which(config, v, tool)?;
    let id = serde_json::from_str::<Value>(args_json)
        .ok()
        .and_then(|a| a.get(v.id_param).and_then(Value::as_str).map(str::to_owned));
    let (base, kind) = match which {
        Tool::Input => (format!("Write input to background {}", v.noun), "execute"),
        Tool::Signal => (format!("Signal background {}", v.noun), "execute"),
        Tool::Log => (format!("Page output of background {}", v.noun), "read"),
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
pub fn error_message(error: &RegistryError, v: &Vocab, id: &str) -> String {
    let noun = v.noun;
    match (error, v.words) {
        (RegistryError::NoInput, _) => {
            format!("{noun} {id} was started without open input (start it with \"stdin\": true)")
        }
        (RegistryError::InputClosed, _) => format!("the input of {noun} {id} is closed"),
        (_, Some(words)) => crate::render::registry_error_message(error, words),
        (_, None) => crate::profile_c::message(error),
    }
}

fn error_result(v: &Vocab, message: &str, cap: Option<u64>) -> ToolResult {
    let prefix = if v.go_style() { "error: " } else { "Error: " };
    ToolResult {
        text: cap_result(&format!("{prefix}{message}"), cap),
        is_error: true,
        value: None,
    }
}

fn done(v: &Vocab, text: String, job: &JobSnapshot, cap: Option<u64>) -> ToolResult {
    let text = if v.go_style() {
        text
    } else {
        format!("{text}\n{}", crate::render::status_line(job))
    };
    ToolResult {
        text: cap_result(&text, cap),
        is_error: false,
        value: None,
    }
}

/// Runs an extension tool call.
pub fn invoke(
    view: &dyn JobsView,
    config: &Config,
    v: &Vocab,
    tool: &str,
    args_json: &str,
) -> Option<ToolResult> {
    let which = which(config, v, tool)?;
    let args = match parse_object(args_json) {
        Ok(args) => args,
        Err(message) => return Some(error_result(v, &message, None)),
    };
    let id = match required_id(&args, v) {
        Ok(id) => id,
        Err(message) => return Some(error_result(v, &message, None)),
    };
    // One look at the job serves the cap and the tools; each checks its
    // arguments before it reports an id the caller cannot see.
    let found = view.get(&id).map_err(|e| error_message(&e, v, &id));
    let cap = found.as_ref().ok().and_then(|j| j.output_limit_bytes);
    let result = match which {
        Tool::Input => input(view, v, &id, &args, &found, cap),
        Tool::Signal => signal(view, v, &id, &args, &found, cap),
        Tool::Log => log(view, v, &id, &args, &found, cap),
    };
    Some(result.unwrap_or_else(|message| error_result(v, &message, cap)))
}

fn parse_object(args_json: &str) -> Result<Map<String, Value>, String> {
    match serde_json::from_str::<Value>(args_json) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(format!(
            "invalid arguments: expected an object, got {}",
            json_type(&other)
        )),
        Err(e) => Err(format!("invalid arguments: not valid JSON ({e})")),
    }
}

fn required_id(args: &Map<String, Value>, v: &Vocab) -> Result<String, String> {
    let key = v.id_param;
    match args.get(key) {
        None => Err(format!(
            "invalid arguments: missing required property \"{key}\""
        )),
        Some(Value::String(id)) if v.go_style() && id.trim().is_empty() => {
            Err(crate::profile_c::ID_REQUIRED.to_owned())
        }
        Some(Value::String(id)) if v.go_style() => Ok(id.trim().to_owned()),
        Some(Value::String(id)) if id.is_empty() => Err(format!(
            "invalid {key}: expected a non-empty string, got \"\""
        )),
        Some(Value::String(id)) => Ok(id.clone()),
        Some(_) => Err(format!("invalid arguments: \"{key}\" must be a string")),
    }
}

fn optional_string<'a>(args: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format!("invalid arguments: \"{key}\" must be a string")),
    }
}

fn optional_bool(args: &Map<String, Value>, key: &str) -> Result<Option<bool>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(format!("invalid arguments: \"{key}\" must be a boolean")),
    }
}

/// A whole number argument within `min..=max`.
fn optional_count(
    args: &Map<String, Value>,
    key: &str,
    min: u64,
    max: u64,
) -> Result<Option<u64>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_f64() {
            Some(n) if n.fract() == 0.0 && n >= min as f64 && n <= max as f64 => Ok(Some(n as u64)),
            _ => Err(format!(
                "invalid {key}: expected a whole number from {min} to {max}, got {v}"
            )),
        },
    }
}

/// The job [`invoke`] looked up, or the error for its id.
type Found = Result<JobSnapshot, String>;

fn input(
    view: &dyn JobsView,
    v: &Vocab,
    id: &str,
    args: &Map<String, Value>,
    found: &Found,
    cap: Option<u64>,
) -> Result<ToolResult, String> {
    let text = optional_string(args, "text")?;
    let newline = optional_bool(args, "newline")?.unwrap_or(true);
    let close = optional_bool(args, "close")?.unwrap_or(false);
    if text.is_none() && !close {
        return Err("invalid arguments: give \"text\", \"close\": true, or both".to_owned());
    }
    let mut data = text.unwrap_or_default().to_owned();
    if text.is_some() && newline {
        data.push('\n');
    }
    if data.len() > MAX_INPUT_BYTES {
        return Err(format!(
            "invalid text: {} bytes is more than the limit of {MAX_INPUT_BYTES} bytes",
            data.len()
        ));
    }
    found.clone()?;
    // A finished job's input is closed: the registry answers `input-closed`.
    let written = view
        .write_input(id, &data, close)
        .map_err(|e| error_message(&e, v, id))?;
    let job = view.get(id).map_err(|e| error_message(&e, v, id))?;
    let noun = v.noun;
    let plural = if written == 1 { "" } else { "s" };
    let said = match (text.is_some(), close) {
        (true, true) => format!("wrote {written} byte{plural} to {noun} {id} and closed its input"),
        (true, false) => format!("wrote {written} byte{plural} to {noun} {id}"),
        _ => format!("closed the input of {noun} {id}"),
    };
    Ok(done(v, said, &job, cap))
}

fn signal(
    view: &dyn JobsView,
    v: &Vocab,
    id: &str,
    args: &Map<String, Value>,
    found: &Found,
    cap: Option<u64>,
) -> Result<ToolResult, String> {
    let names = JobSignal::ALL.iter().map(|s| s.name()).collect::<Vec<_>>();
    let asked = match args.get("signal") {
        None => return Err("invalid arguments: missing required property \"signal\"".to_owned()),
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err("invalid arguments: \"signal\" must be a string".to_owned()),
    };
    let upper = asked.trim().to_ascii_uppercase();
    let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
    let Some(sig) = JobSignal::ALL.into_iter().find(|s| s.name() == bare) else {
        return Err(format!(
            "invalid signal: expected one of {}, got \"{asked}\"",
            names.join(", ")
        ));
    };
    let job = found.clone()?;
    if job.status.is_terminal() {
        return Err(format!(
            "{} {id} has already finished {}",
            v.noun,
            crate::render::status_line(&job)
        ));
    }
    view.signal(id, sig).map_err(|e| error_message(&e, v, id))?;
    let job = view.get(id).map_err(|e| error_message(&e, v, id))?;
    Ok(done(
        v,
        format!("sent SIG{} to {} {id}", sig.name(), v.noun),
        &job,
        cap,
    ))
}

fn stream_arg(args: &Map<String, Value>) -> Result<Option<OutputStream>, String> {
    match optional_string(args, "stream")? {
        None => Ok(None),
        Some("stdout") => Ok(Some(OutputStream::Stdout)),
        Some("stderr") => Ok(Some(OutputStream::Stderr)),
        Some(other) => Err(format!(
            "invalid stream: expected \"stdout\" or \"stderr\", got \"{other}\""
        )),
    }
}

fn log(
    view: &dyn JobsView,
    v: &Vocab,
    id: &str,
    args: &Map<String, Value>,
    found: &Found,
    cap: Option<u64>,
) -> Result<ToolResult, String> {
    let stream = stream_arg(args)?;
    let start = optional_count(args, "start_line", 1, crate::model::MAX_SAFE_LINE)?;
    let count = optional_count(args, "lines", 1, MAX_PAGE_LINES)?;
    let search = optional_string(args, "search")?;
    let context = optional_count(args, "context", 0, MAX_CONTEXT_LINES)?;
    let max_matches = optional_count(args, "max_matches", 1, MAX_MATCHES)?;
    let query = match search {
        Some(pattern) => {
            let pattern = pattern_arg("search", pattern)?;
            if start.is_some() || count.is_some() {
                return Err(
                    "invalid arguments: \"search\" cannot be combined with \"start_line\" or \"lines\""
                        .to_owned(),
                );
            }
            LineQuery::Search {
                stream,
                pattern: pattern.to_owned(),
                context: context.unwrap_or(DEFAULT_CONTEXT_LINES) as u32,
                max_matches: max_matches.unwrap_or(DEFAULT_MATCHES) as u32,
            }
        }
        None => {
            if context.is_some() || max_matches.is_some() {
                return Err(
                    "invalid arguments: \"context\" and \"max_matches\" need \"search\"".to_owned(),
                );
            }
            let stream = stream.unwrap_or(OutputStream::Stdout);
            let count = count.unwrap_or(DEFAULT_PAGE_LINES) as u32;
            match start {
                Some(start) => LineQuery::Range {
                    stream,
                    start,
                    count,
                },
                None => LineQuery::Last { stream, count },
            }
        }
    };
    found.clone()?;
    let page = view
        .lines(id, &query)
        .map_err(|e| error_message(&e, v, id))?;
    let text = match &query {
        LineQuery::Search { pattern, .. } => search_text(&page, pattern, stream.is_none()),
        LineQuery::Range { stream, .. } | LineQuery::Last { stream, .. } => {
            page_text(&page, *stream)
        }
    };
    Ok(done(v, text, &page.job, cap))
}

fn extent_note(extent: &StreamExtent) -> Option<String> {
    (extent.dropped_bytes > 0).then(|| {
        format!(
            "{} before line {} ({} bytes) is no longer kept",
            extent.stream.as_str(),
            extent.first_line,
            extent.dropped_bytes
        )
    })
}

/// Adds lines to `out` until the byte bound; returns how many were left out.
fn push_lines<'a>(
    out: &mut String,
    lines: impl Iterator<Item = (String, &'a OutputLine)>,
) -> (usize, Option<u64>) {
    let mut left_out = 0;
    let mut next = None;
    for (row, line) in lines {
        if left_out > 0 || out.len() + row.len() + 1 > MAX_LOG_TEXT_BYTES {
            if left_out == 0 {
                next = Some(line.number);
            }
            left_out += 1;
            continue;
        }
        out.push('\n');
        out.push_str(&row);
    }
    (left_out, next)
}

/// A page: a header naming the lines and where the retained output begins,
/// then `<n>:<text>` rows (the `grep -n` form).
fn page_text(page: &LinePage, stream: OutputStream) -> String {
    let name = stream.as_str();
    let extent = page.extents.iter().find(|e| e.stream == stream);
    let last = extent.map_or(0, |e| e.last_line);
    let mut header = match (page.lines.first(), page.lines.last()) {
        (Some(first), Some(end)) => {
            format!("[{name} lines {}-{} of {last}", first.number, end.number)
        }
        _ if last == 0 => format!("[{name} is empty"),
        _ => format!("[no {name} lines there; it has lines up to {last}"),
    };
    if let Some(note) = extent.and_then(extent_note) {
        header.push_str("; ");
        header.push_str(&note);
    }
    header.push(']');
    let mut out = header;
    let rows = page
        .lines
        .iter()
        .map(|l| (format!("{}:{}", l.number, l.text), l));
    let (left_out, next) = push_lines(&mut out, rows);
    if let Some(next) = next {
        out.push_str(&format!(
            "\n[{left_out} more lines not shown; continue with start_line {next}]"
        ));
    }
    out
}

/// A search: a header with the match count, then the lines in `grep` form
/// (`<n>:` for a match, `<n>-` for context, `--` between groups), each with its
/// stream when both were searched.
fn search_text(page: &LinePage, pattern: &str, both: bool) -> String {
    let streams = page
        .extents
        .iter()
        .map(|e| e.stream.as_str())
        .collect::<Vec<_>>()
        .join(" and ");
    let shown = page.hits.len();
    let total = page.total_matches;
    let plural = if total == 1 { "" } else { "es" };
    let mut out = format!("[search /{pattern}/ in {streams}: {total} match{plural}");
    if (shown as u64) < total {
        out.push_str(&format!(", first {shown} shown"));
    }
    let notes = page
        .extents
        .iter()
        .filter_map(extent_note)
        .collect::<Vec<_>>();
    if !notes.is_empty() {
        out.push_str("; ");
        out.push_str(&notes.join("; "));
    }
    if let Some((stream, line)) = page.stopped {
        out.push_str(&format!(
            "; stopped early at {} line {line}: the search ran out of time, so later lines were not searched",
            stream.as_str()
        ));
    }
    out.push(']');
    let mut previous: Option<&OutputLine> = None;
    let mut rows = Vec::new();
    // Hits come in line order, so one pass over both marks them.
    let mut hits = page.hits.iter().peekable();
    for (index, line) in page.lines.iter().enumerate() {
        if let Some(prev) = previous
            && (prev.stream != line.stream || prev.number + 1 != line.number)
        {
            rows.push(("--".to_owned(), line));
        }
        let mark = if hits.next_if(|h| **h as usize == index).is_some() {
            ':'
        } else {
            '-'
        };
        let prefix = if both {
            format!("{}{mark}", line.stream.as_str())
        } else {
            String::new()
        };
        rows.push((format!("{prefix}{}{mark}{}", line.number, line.text), line));
        previous = Some(line);
    }
    let (left_out, _) = push_lines(&mut out, rows.into_iter());
    if left_out > 0 {
        out.push_str(&format!(
            "\n[{left_out} more lines not shown; narrow the search or lower max_matches]"
        ));
    }
    out
}

/// The ready-wait arguments as the wait request carries them, when the
/// extension is on and the call gives any: `until`, and `quiet_ms` for
/// profiles A and B or `quiet_seconds` for C.
pub fn ready_args(
    config: &Config,
    v: &Vocab,
    args: &Map<String, Value>,
) -> Result<Option<WaitUntil>, String> {
    if !config.extensions.ready {
        return Ok(None);
    }
    let pattern = match optional_string(args, "until")? {
        Some(p) => Some(pattern_arg("until", p)?.to_owned()),
        None => None,
    };
    let quiet_ms = if v.go_style() {
        optional_count(args, "quiet_seconds", 1, 2_147_483)?.map(|s| (s * 1000) as u32)
    } else {
        match args.get("quiet_ms") {
            None | Some(Value::Null) => None,
            Some(value) => {
                let ms = value.as_f64().and_then(timer_ms);
                Some(ms.ok_or_else(|| {
                    format!(
                        "invalid quiet_ms: expected a positive number of milliseconds no greater than 2147483647, got {value}"
                    )
                })?)
            }
        }
    };
    Ok((pattern.is_some() || quiet_ms.is_some()).then_some(WaitUntil { pattern, quiet_ms }))
}

/// The note that says why a ready wait ended, for profiles A and B: it comes
/// before the output the call then reads.
pub fn wait_note(v: &Vocab, outcome: &WaitOutcome, timeout_ms: u32, ready: &WaitUntil) -> String {
    match (outcome.end, &outcome.matched) {
        (WaitEnd::Matched, Some(m)) => matched_note(m),
        (WaitEnd::Quiet, _) => format!(
            "[wait ended: no output for {} ms]",
            ready.quiet_ms.unwrap_or_default()
        ),
        (WaitEnd::Settled, _) => format!("[wait ended: the {} finished]", v.noun),
        (WaitEnd::TimedOut | WaitEnd::Matched, _) => {
            format!("[wait ended: timed out after {timeout_ms} ms]")
        }
    }
}

/// `[wait ended: <stream> line <n> matched]`, then the lines before it (`<n>-`)
/// and the line itself (`<n>:`).
pub fn matched_note(m: &LineMatch) -> String {
    format!(
        "[wait ended: {} line {} matched]\n{}",
        m.line.stream.as_str(),
        m.line.number,
        matched_lines(m)
    )
}

/// The lines before a match (`<n>-<text>`) and the match (`<n>:<text>`).
pub fn matched_lines(m: &LineMatch) -> String {
    m.before
        .iter()
        .map(|line| format!("{}-{}", line.number, line.text))
        .chain([format!("{}:{}", m.line.number, m.line.text)])
        .collect::<Vec<_>>()
        .join("\n")
}

/// `listening on 127.0.0.1:8000, [::]:8000`, or `None` when there are none.
pub fn listening(ports: &[ListeningPort]) -> Option<String> {
    (!ports.is_empty()).then(|| {
        let list = ports
            .iter()
            .map(ListeningPort::display)
            .collect::<Vec<_>>()
            .join(", ");
        format!("listening on {list}")
    })
}

/// The listening ports of a live job, when the extension is on (errors and a
/// host without the call show nothing).
pub fn ports_of(view: &dyn JobsView, config: &Config, job: &JobSnapshot) -> Option<String> {
    if !config.extensions.ports || job.status.is_terminal() {
        return None;
    }
    listening(&view.ports(&job.id).ok()?)
}
