//! Profile C: the surface of the Go `jobs` plugin (`job_list`, `job_status`,
//! `job_wait`, `job_cancel`) over the same registry as profiles A and B.
//!
//! Its words differ from A's and B's in kind, not only in vocabulary: states are
//! `running`/`succeeded`/`failed`/`cancelled`, durations are written the way Go
//! writes a `time.Duration`, a job's result loses its middle past
//! `maxResultBytes`, errors read `error: <err>`, an unknown id and another
//! owner's id get the same answer, and completion notices are pulled by the host
//! before each step as one `Background job update:` message.
//!
//! (Over 500 lines: the whole of profile C's surface, its four tools and its
//! notices, in the Go plugin's words; `text` holds its formatting.)

use serde_json::{Map, Value, json};

use crate::config::Config;
use crate::extensions::{self, Dialect, Quiet};

mod text;

use crate::model::{
    JobSnapshot, JobStatus, JobsView, MAX_TIMER_MS, RegistryError, Step, ToolAnnotations,
    ToolDefinition, ToolResult, UiCard, WaitRequest, Waited,
};
use crate::wording::ExtensionWords;
use crate::wording::go::{
    self, CANCEL, CANCEL_DESCRIPTION, ID_REQUIRED, LIST, LIST_DESCRIPTION, NO_OUTPUT, STATUS,
    STATUS_DESCRIPTION, TIMEOUT_DESCRIPTION, UPDATE_HEADER, WAIT, WAIT_DESCRIPTION,
};
use text::{duration, joined};
pub use text::{go_duration, result_window, state, truncate_middle};

/// The Go-style surface, as the extension calls see it: its words are
/// profile A's tools with an `id` argument; errors read `error: <err>` in the
/// Go plugin's words, ids are trimmed, quiet waits are in seconds, and no
/// status line follows an answer.
#[derive(Debug, Clone, Copy)]
pub struct GoStyle;

impl Dialect for GoStyle {
    fn words(&self) -> &ExtensionWords {
        &go::EXTENSIONS
    }

    fn quiet(&self) -> Quiet {
        Quiet::Seconds
    }

    fn registry_error(&self, error: &RegistryError) -> String {
        go::message(error)
    }

    fn error_text(&self, message: &str) -> String {
        format!("error: {message}")
    }

    fn done_text(&self, text: String, _job: &JobSnapshot) -> String {
        text
    }

    fn job_id(&self, id: &str) -> Result<String, String> {
        match id.trim() {
            "" => Err(ID_REQUIRED.to_owned()),
            id => Ok(id.to_owned()),
        }
    }
}

/// A succeeded job's result rides inline in a notice up to this many bytes.
pub const NOTICE_INLINE_LIMIT: usize = 2048;

/// The job's result as the model sees it: its output bounded by
/// `maxResultBytes`, then the producer's detail (for example `[exit code: 1]` of
/// a shell command) on a line of its own, so a command's exit status is never
/// lost behind `succeeded`.
fn result_text(view: &dyn JobsView, config: &Config, job: &JobSnapshot) -> Result<String, String> {
    let max = config.max_result_bytes;
    let excerpt = view
        .output(&job.id, result_window(max))
        .map_err(|e| go::message(&e))?;
    let mut text = if excerpt.omitted_bytes == 0 && excerpt.tail.is_empty() {
        // Whole; replacement characters may still have pushed it past the bound.
        truncate_middle(&excerpt.head, max)
    } else {
        // An empty head is a cut only where a character could be longer than
        // the head's share; past that, it is output no longer held.
        let head_cut = !excerpt.head.is_empty() || result_window(max).head_bytes < 4;
        joined(
            &excerpt.head,
            head_cut,
            excerpt.omitted_bytes,
            &excerpt.tail,
            max,
        )
    };
    if let Some(detail) = &job.detail {
        if text.ends_with('\n') {
            text.pop();
        }
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&format!("[{detail}]"));
    }
    Ok(text)
}

/// A failed or cancelled job's error, bounded like a result.
fn error_text(job: &JobSnapshot, config: &Config) -> Option<String> {
    job.detail
        .as_deref()
        .map(|d| truncate_middle(d, config.max_result_bytes))
}

/// `job <id> (<tool>) — <state> after <duration>`, then the result, the error,
/// or nothing while the job runs.
fn status_text(view: &dyn JobsView, config: &Config, job: &JobSnapshot) -> Result<String, String> {
    let now = view.now_ms();
    let mut text = format!(
        "job {} ({}) \u{2014} {} after {}",
        job.id,
        job.kind,
        state(job.status),
        duration(job, now)
    );
    if let Some(sandbox) = extensions::where_of(config, job) {
        text.push(' ');
        text.push_str(&sandbox);
    }
    match job.status {
        JobStatus::Running | JobStatus::Stopping => {
            if let Some(ports) = extensions::ports_of(view, config, job) {
                text.push('\n');
                text.push_str(&ports);
            }
        }
        JobStatus::Completed => {
            let result = result_text(view, config, job)?;
            text.push('\n');
            text.push_str(if result.is_empty() {
                NO_OUTPUT
            } else {
                &result
            });
        }
        JobStatus::Failed | JobStatus::Killed => {
            if let Some(err) = error_text(job, config) {
                text.push('\n');
                text.push_str(&err);
            }
        }
    }
    Ok(text)
}

/// The four tools with their exact descriptions and schemas. They return text
/// only, so they have no output schema.
pub fn tool_definitions(config: &Config) -> Vec<ToolDefinition> {
    let mut wait_properties = json!({
        "id": {"type": "string", "description": "The job id."},
        "timeout_seconds": {"type": "integer", "description": TIMEOUT_DESCRIPTION}
    });
    for (name, schema) in extensions::ready_properties(config, &GoStyle) {
        wait_properties[name] = schema;
    }
    let mut status_properties = json!({"id": {"type": "string", "description": "The job id."}});
    for (name, schema) in extensions::output_properties(config) {
        if name == "prompt" {
            wait_properties[name] = schema;
        } else {
            status_properties[name] = schema;
        }
    }
    let id = || json!({"type": "string", "description": "The job id."});
    let tool = |name, description, input_schema, annotations| ToolDefinition {
        name,
        description,
        input_schema,
        output_schema: None,
        annotations,
    };
    // Nothing here consumes output: a status or a wait shows the whole result
    // each time, so every looking tool is idempotent.
    let mut tools = vec![
        tool(
            LIST,
            LIST_DESCRIPTION,
            json!({"type": "object", "properties": {}, "required": []}),
            ToolAnnotations::reads("List background jobs", true),
        ),
        tool(
            STATUS,
            STATUS_DESCRIPTION,
            json!({"type": "object", "properties": status_properties, "required": ["id"]}),
            ToolAnnotations::reads("Show a background job's status", true),
        ),
        tool(
            WAIT,
            WAIT_DESCRIPTION,
            json!({
                "type": "object",
                "properties": wait_properties,
                "required": ["id"]
            }),
            ToolAnnotations::reads("Wait for a background job", true),
        ),
        tool(
            CANCEL,
            CANCEL_DESCRIPTION,
            json!({"type": "object", "properties": {"id": id()}, "required": ["id"]}),
            ToolAnnotations::acts("Cancel a background job", true, true),
        ),
    ];
    tools.extend(extensions::tool_definitions(config, &GoStyle));
    tools
}

/// The card for a call, or `None` for a tool this profile does not have.
pub fn ui_card(config: &Config, tool: &str, args_json: &str) -> Option<UiCard> {
    if let Some(card) = extensions::ui_card(config, &GoStyle, tool, args_json) {
        return Some(card);
    }
    let id = serde_json::from_str::<Value>(args_json)
        .ok()
        .and_then(|v| v.get("id").and_then(Value::as_str).map(str::to_owned));
    let titled = |base: &str| match &id {
        Some(id) => format!("{base} {id}"),
        None => base.to_owned(),
    };
    let (title, kind) = match tool {
        LIST => ("List background jobs".to_owned(), "read"),
        STATUS => (titled("Check background job"), "read"),
        WAIT => (titled("Wait for background job"), "read"),
        CANCEL => (titled("Cancel background job"), "execute"),
        _ => return None,
    };
    Some(UiCard {
        title,
        kind,
        raw_input: if tool == LIST { None } else { id },
    })
}

/// Arguments as the Go plugin decodes them: unknown keys are ignored, `null`
/// and absent keys take the zero value, and a wrong type fails the decode.
struct Args {
    /// The id trimmed of white space (what `job_status` and `job_cancel` use).
    id: String,
    /// The id as given (what `job_wait` waits on once its trimmed form is not
    /// empty, as the Go plugin's `job_wait` does).
    given_id: String,
    timeout_seconds: i64,
    /// Every key, for the extensions' arguments.
    map: Map<String, Value>,
}

fn parse_args(args_json: &str, with_timeout: bool) -> Result<Args, String> {
    let value: Value = serde_json::from_str(args_json)
        .map_err(|e| format!("invalid arguments: not valid JSON ({e})"))?;
    let map = match value {
        Value::Null => Map::new(),
        Value::Object(map) => map,
        other => {
            return Err(format!(
                "invalid arguments: expected a JSON object, got {other}"
            ));
        }
    };
    let given_id = match map.get("id") {
        None | Some(Value::Null) => String::new(),
        // As the Go plugin does: `"   "` is no id, `" job_1 "` is `job_1`
        // (except to `job_wait`, which checks the trimmed id and waits on the
        // one given).
        Some(Value::String(s)) => s.clone(),
        Some(other) => {
            return Err(format!(
                "invalid arguments: \"id\" must be a string, got {other}"
            ));
        }
    };
    let timeout_seconds = match map.get("timeout_seconds") {
        Some(v) if with_timeout && !v.is_null() => v.as_i64().ok_or_else(|| {
            format!("invalid arguments: \"timeout_seconds\" must be an integer, got {v}")
        })?,
        _ => 0,
    };
    Ok(Args {
        id: given_id.trim().to_owned(),
        given_id,
        timeout_seconds,
        map,
    })
}

fn text(text: String) -> ToolResult {
    ToolResult {
        text,
        is_error: false,
        value: None,
    }
}

fn error(message: &str) -> ToolResult {
    ToolResult {
        text: format!("error: {message}"),
        is_error: true,
        value: None,
    }
}

/// Runs one step of a call of a profile C tool (see `surface::worded::invoke`
/// for `waited`).
pub fn invoke(
    view: &dyn JobsView,
    config: &Config,
    tool: &str,
    args_json: &str,
    waited: Option<&Waited>,
) -> Step<ToolResult> {
    if let Some(result) = extensions::invoke(view, config, &GoStyle, tool, args_json) {
        return Step::Done(result);
    }
    let outcome = match tool {
        LIST => Ok(Step::Done(list_text(view, config))),
        STATUS => job_status(view, config, args_json).map(Step::Done),
        WAIT => job_wait(view, config, args_json, waited),
        CANCEL => job_cancel(view, args_json).map(Step::Done),
        _ => Err(format!("unknown tool \"{tool}\"")),
    };
    match outcome {
        Ok(Step::Done(t)) => Step::Done(text(t)),
        Ok(Step::Wait(request)) => Step::Wait(request),
        Err(message) => Step::Done(error(&message)),
    }
}

/// `job_list`: one tab-separated row per job, newest first.
///
/// A list longer than [`crate::model::MAX_LIST_ROWS`] shows the live jobs and the
/// newest finished ones, and ends with `<N> older jobs not shown.`
fn list_text(view: &dyn JobsView, config: &Config) -> String {
    let (jobs, left_out) = crate::model::bounded_list(view.list_jobs());
    if jobs.is_empty() {
        return "No background jobs.".to_owned();
    }
    let now = view.now_ms();
    let mut rows = jobs
        .iter()
        .rev()
        .map(|job| {
            let row = format!(
                "{}\t{}\t{}\t{}\t{}",
                job.id,
                state(job.status),
                job.kind,
                duration(job, now),
                job.label
            );
            match extensions::where_of(config, job) {
                Some(sandbox) => format!("{row}\t{sandbox}"),
                None => row,
            }
        })
        .collect::<Vec<_>>();
    if left_out > 0 {
        let plural = if left_out == 1 { "" } else { "s" };
        rows.push(format!("{left_out} older job{plural} not shown."));
    }
    rows.join("\n")
}

fn required_id(args: &Args) -> Result<&str, String> {
    if args.id.is_empty() {
        Err(ID_REQUIRED.to_owned())
    } else {
        Ok(&args.id)
    }
}

fn job_status(view: &dyn JobsView, config: &Config, args_json: &str) -> Result<String, String> {
    let args = parse_args(args_json, false)?;
    let id = required_id(&args)?;
    if extensions::wants_screen(config, &args.map)? {
        let screen = view
            .screen(id)
            .map_err(|e| extensions::error_message(&e, &GoStyle, id))?;
        let status = status_text(view, config, &screen.job)?;
        let first = status.lines().next().unwrap_or_default().to_owned();
        return Ok(format!("{first}\n{}", extensions::screen_text(&screen))
            .trim_end()
            .to_owned());
    }
    let job = view.get(id).map_err(|e| go::message(&e))?;
    status_text(view, config, &job)
}

fn job_wait(
    view: &dyn JobsView,
    config: &Config,
    args_json: &str,
    waited: Option<&Waited>,
) -> Result<Step<String>, String> {
    let args = parse_args(args_json, true)?;
    required_id(&args)?;
    let id = args.given_id.as_str();
    let ready = extensions::ready_args(config, &GoStyle, &args.map)?;
    let until = extensions::with_prompt(config, &args.map, ready.clone())?;
    // The config holds the cap in whole seconds' worth of milliseconds.
    let max_seconds = i64::try_from(config.max_wait_timeout_ms / 1000).unwrap_or(i64::MAX);
    let seconds = if args.timeout_seconds > 0 {
        args.timeout_seconds.min(max_seconds)
    } else {
        max_seconds
    };
    let waited_ms = seconds.max(1) as u64 * 1000;
    let job = match waited {
        None => {
            // An id the caller cannot see needs no wait.
            view.get(id).map_err(|e| go::message(&e))?;
            return Ok(Step::Wait(WaitRequest {
                job_id: id.to_owned(),
                // The config bounds the seconds to what a timer holds.
                timeout_ms: u32::try_from(waited_ms).unwrap_or(MAX_TIMER_MS),
                until: until.clone(),
            }));
        }
        Some(outcome) => outcome.as_ref().map_err(go::message)?,
    };
    let prompt = job.prompt.clone();
    let (job, end, matched) = (&job.job, job.end, job.matched.as_ref());
    if job.status.is_terminal() {
        return status_text(view, config, job).map(Step::Done);
    }
    let now = view.now_ms();
    if let (crate::model::WaitEnd::Prompt, Some(prompt)) = (end, prompt) {
        // Only a mount with the input extension has a tool to answer with.
        let next = if config.extensions.input {
            "Answer it with job_input, or job_cancel it."
        } else {
            "It keeps running \u{2014} job_cancel it when done."
        };
        return Ok(Step::Done(format!(
            "Job {id} is waiting for input after {}: {prompt}\n{next}",
            duration(job, now)
        )));
    }
    match (end, matched, &ready) {
        (crate::model::WaitEnd::Matched, Some(m), Some(_)) => {
            return Ok(Step::Done(format!(
                "Job {id} is ready after {}: {} line {} matched.\n{}\nIt keeps running \u{2014} check job_status, or job_cancel it when done.",
                duration(job, now),
                m.line.stream.as_str(),
                m.line.number,
                extensions::matched_lines(m)
            )));
        }
        (crate::model::WaitEnd::Quiet, _, Some(ready)) => {
            return Ok(Step::Done(format!(
                "Job {id} has written nothing for {} (running for {}). It keeps running \u{2014} check job_status later.",
                go_duration(u64::from(ready.quiet_ms.unwrap_or_default())),
                duration(job, now)
            )));
        }
        _ => {}
    }
    Ok(Step::Done(format!(
        "Job {id} is still running after {}. It was not cancelled \u{2014} continue with other work and check job_status later.",
        go_duration(waited_ms)
    )))
}

fn job_cancel(view: &dyn JobsView, args_json: &str) -> Result<String, String> {
    let args = parse_args(args_json, false)?;
    let id = required_id(&args)?;
    // A job that already finished is a no-op with the same answer.
    view.kill(id, None).map_err(|e| go::message(&e))?;
    Ok(format!("Cancellation requested for {id}."))
}

/// One job's line of a `Background job update:` message, with its result inline
/// when `result` is given and small enough.
fn update_line(job: &JobSnapshot, config: &Config, result: Option<&str>) -> String {
    let mut line = format!(
        "- {} ({}, {}, {})",
        job.id,
        job.kind,
        state(job.status),
        duration(job, job.finished_at.unwrap_or(job.started_at))
    );
    match job.status {
        JobStatus::Failed => {
            line.push_str(": ");
            line.push_str(&error_text(job, config).unwrap_or_default());
        }
        JobStatus::Completed => match result {
            Some(result) if result.len() <= NOTICE_INLINE_LIMIT => {
                line.push_str(":\n");
                line.push_str(result);
            }
            Some(result) => line.push_str(&format!(
                ": {} bytes of output \u{2014} call job_status with id \"{}\" to read it.",
                result.len(),
                job.id
            )),
            None => {}
        },
        JobStatus::Killed | JobStatus::Running | JobStatus::Stopping => {}
    }
    line.push('\n');
    line
}

/// The batched notice for `jobs`, or `None` when there is nothing to say. A job
/// whose record is gone by now (its owner was closed) is left out.
pub fn batch_notice(view: &dyn JobsView, config: &Config, jobs: &[JobSnapshot]) -> Option<String> {
    if config.suppress_completion_notice {
        return None;
    }
    let mut text = String::new();
    for job in jobs {
        let result = match job.status {
            JobStatus::Completed => match result_text(view, config, job) {
                Ok(result) => Some(result),
                Err(_) => continue,
            },
            _ => None,
        };
        text.push_str(&update_line(job, config, result.as_deref()));
    }
    if text.is_empty() {
        return None;
    }
    Some(format!("{UPDATE_HEADER}\n{}", text.trim_end_matches('\n')))
}

/// The notice for one settled job without a scope to read its result: its line
/// of an update, without the result a batch would inline.
pub fn single_notice(job: &JobSnapshot, config: &Config) -> String {
    let line = update_line(job, config, None);
    format!("{UPDATE_HEADER}\n{}", line.trim_end_matches('\n'))
}
