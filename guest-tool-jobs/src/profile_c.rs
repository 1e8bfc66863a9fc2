//! Profile C: the surface of the Go `jobs` plugin (`job_list`, `job_status`,
//! `job_wait`, `job_cancel`) over the same registry as profiles A and B.
//!
//! Its words differ from A's and B's in kind, not only in vocabulary: states are
//! `running`/`succeeded`/`failed`/`cancelled`, durations are written the way Go
//! writes a `time.Duration`, a job's result loses its middle past
//! `maxResultBytes`, errors read `error: <err>`, an unknown id and another
//! owner's id get the same answer, and completion notices are pulled by the host
//! before each step as one `Background job update:` message.

use serde_json::{Map, Value, json};

use crate::caps::{head, tail};
use crate::config::Config;
use crate::model::{
    ExcerptWindow, JobSnapshot, JobStatus, JobsView, MAX_TIMER_MS, RegistryError, Step,
    ToolAnnotations, ToolDefinition, ToolResult, UiCard, WaitRequest, Waited,
};

/// The plugin name on notices and in config errors.
pub const PLUGIN: &str = crate::wording::GO_STYLE_PLUGIN;
/// The error for an unknown id and for another owner's id alike.
pub const NOT_FOUND: &str = "agentcore: job not found";
/// The error for a missing or empty id.
pub const ID_REQUIRED: &str = "id is required";
/// First line of a batched completion notice.
pub const UPDATE_HEADER: &str = "Background job update:";
/// A succeeded job's result rides inline in a notice up to this many bytes.
pub const NOTICE_INLINE_LIMIT: usize = 2048;
/// Shown by `job_status` for a succeeded job with an empty result.
pub const NO_OUTPUT: &str = "(no output)";
/// Bytes kept back from the result budget for the truncation marker.
const MARKER_RESERVE: u64 = 64;
/// Appended to a head when the budget is too small for a head and a tail.
const SHORT_MARKER: &str = "\n\u{2026}[truncated]";

const LIST: &str = "job_list";
const STATUS: &str = "job_status";
const WAIT: &str = "job_wait";
const CANCEL: &str = "job_cancel";

/// The tool's description, exactly as the Go plugin states it.
const LIST_DESCRIPTION: &str = "List the background jobs this session started, newest first, with their state and duration. Jobs still running when you finish your answer are cancelled \u{2014} wait for the ones whose results you need.";
const STATUS_DESCRIPTION: &str =
    "Read one background job: its state, and its full output once it has finished.";
const WAIT_DESCRIPTION: &str = "Block until a background job finishes, then return its result. Bounded by a timeout \u{2014} if it returns while the job is still running, the job keeps going and you can wait again or continue with other work.";
const CANCEL_DESCRIPTION: &str = "Cancel a running background job.";
const TIMEOUT_DESCRIPTION: &str = "How long to wait before returning with the job still running.";

/// The Go state word for a registry status: a job that is stopping is still
/// running, a completed one succeeded, a killed one was cancelled.
pub fn state(status: JobStatus) -> &'static str {
    match status {
        JobStatus::Running | JobStatus::Stopping => "running",
        JobStatus::Completed => "succeeded",
        JobStatus::Killed => "cancelled",
        JobStatus::Failed => "failed",
    }
}

/// A whole number of milliseconds as Go's `time.Duration.String` writes it:
/// `0s`, `980ms`, `4.21s`, `1m1.4s`, `2m0s`, `1h0m0s`.
pub fn go_duration(ms: u64) -> String {
    if ms == 0 {
        return "0s".to_owned();
    }
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let hours = ms / 3_600_000;
    let minutes = ms / 60_000 % 60;
    let seconds = ms / 1000 % 60;
    let millis = ms % 1000;
    let seconds = if millis == 0 {
        seconds.to_string()
    } else {
        let fraction = format!("{millis:03}");
        format!("{seconds}.{}", fraction.trim_end_matches('0'))
    };
    if hours > 0 {
        format!("{hours}h{minutes}m{seconds}s")
    } else if minutes > 0 {
        format!("{minutes}m{seconds}s")
    } else {
        format!("{seconds}s")
    }
}

/// How long the job ran: to its settlement, or until `now` while it runs.
fn duration(job: &JobSnapshot, now: u64) -> String {
    let end = job.finished_at.unwrap_or(now);
    go_duration(end.saturating_sub(job.started_at))
}

/// The excerpt a result of at most `max` bytes needs: the whole when it fits;
/// otherwise about two thirds of the budget left after the marker's reserve from
/// the head and the rest from the tail (plus the few bytes a head cut back to a
/// character boundary gives up, which the tail may use), or only a head when
/// that budget is below 2 bytes: Go's `truncateBytes`, which keeps what the
/// short marker leaves of `max` (so the whole is at most `max` bytes), or all
/// of `max` when the marker alone is not shorter than it.
pub fn result_window(max: u64) -> ExcerptWindow {
    let budget = max.saturating_sub(MARKER_RESERVE);
    if budget < 2 {
        let marker = SHORT_MARKER.len() as u64;
        return ExcerptWindow {
            whole_up_to: max,
            head_bytes: if max > marker { max - marker } else { max },
            tail_bytes: 0,
        };
    }
    let head_bytes = budget * 2 / 3;
    ExcerptWindow {
        whole_up_to: max,
        head_bytes,
        tail_bytes: budget - head_bytes + MAX_BOUNDARY_SLACK,
    }
}

/// The most bytes a cut back to a UTF-8 character boundary gives up.
const MAX_BOUNDARY_SLACK: u64 = 3;

/// The head, the marker and the tail of a result of more than `max` bytes
/// whose middle was left out. As in the Go plugin, the tail gets whatever the
/// head left of the budget, so `tail_text` may be cut further here; `omitted`
/// counts the bytes between `head` and `tail_text`. `head_cut`: `head` is the
/// text's start cut back to a character boundary (possibly to nothing), not
/// output the producer no longer holds.
fn joined(head: &str, head_cut: bool, omitted: u64, tail_text: &str, max: u64) -> String {
    let budget = max.saturating_sub(MARKER_RESERVE);
    if budget < 2 {
        return format!("{head}{SHORT_MARKER}");
    }
    // An empty head that is not a cut is output the producer no longer holds:
    // where its cut would have fallen is unknown, so the tail keeps its own share.
    let head_len = if head.is_empty() && !head_cut {
        to_usize(result_window(max).head_bytes)
    } else {
        head.len()
    };
    let room = to_usize(budget).saturating_sub(head_len);
    let kept = tail(tail_text, room);
    let omitted = omitted + (tail_text.len() - kept.len()) as u64;
    format!("{head}\n\u{2026}[{omitted} bytes truncated]\u{2026}\n{kept}")
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// `text` bounded to `max` bytes by leaving out its middle. Cuts fall on
/// character boundaries; the tail uses what the head's cut gave up.
pub fn truncate_middle(text: &str, max: u64) -> String {
    if text.len() as u64 <= max {
        return text.to_owned();
    }
    let window = result_window(max);
    let kept_head = head(text, to_usize(window.head_bytes));
    let rest = &text[kept_head.len()..];
    joined(kept_head, true, 0, rest, max)
}

/// The job's result as the model sees it: its output bounded by
/// `maxResultBytes`, then the producer's detail (for example `[exit code: 1]` of
/// a shell command) on a line of its own, so a command's exit status is never
/// lost behind `succeeded`.
fn result_text(view: &dyn JobsView, config: &Config, job: &JobSnapshot) -> Result<String, String> {
    let max = config.max_result_bytes;
    let excerpt = view
        .output(&job.id, result_window(max))
        .map_err(|e| message(&e))?;
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

/// The registry error as the Go plugin words it.
pub(crate) fn message(error: &RegistryError) -> String {
    match error {
        RegistryError::UnknownJob(_) | RegistryError::ForeignJob(_) => NOT_FOUND.to_owned(),
        // The wait's context ended with the tool call's.
        RegistryError::WaitAborted => "context canceled".to_owned(),
        RegistryError::InvalidTimeout(ms) => format!("invalid wait timeout: {ms} ms"),
        RegistryError::ProducerFailed(m) => m.clone(),
        RegistryError::InvalidPattern(m) => format!("invalid pattern: {m}"),
        RegistryError::NoInput => "the job was started without open input".to_owned(),
        RegistryError::InputClosed => "the input of the job is closed".to_owned(),
        RegistryError::Unsupported(what) => {
            format!("this host does not support the \"{what}\" extension")
        }
    }
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
    match job.status {
        JobStatus::Running | JobStatus::Stopping => {
            if let Some(ports) = crate::extensions::ports_of(view, config, job) {
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
    for (name, schema) in crate::extensions::ready_properties(config, &crate::extensions::C) {
        wait_properties[name] = schema;
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
            json!({"type": "object", "properties": {"id": id()}, "required": ["id"]}),
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
    tools.extend(crate::extensions::tool_definitions(
        config,
        &crate::extensions::C,
    ));
    tools
}

/// The card for a call, or `None` for a tool this profile does not have.
pub fn ui_card(config: &Config, tool: &str, args_json: &str) -> Option<UiCard> {
    if let Some(card) = crate::extensions::ui_card(config, &crate::extensions::C, tool, args_json) {
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

/// Runs one step of a call of a profile C tool (see [`crate::tools::invoke`]
/// for `waited`).
pub fn invoke(
    view: &dyn JobsView,
    config: &Config,
    tool: &str,
    args_json: &str,
    waited: Option<&Waited>,
) -> Step<ToolResult> {
    if let Some(result) =
        crate::extensions::invoke(view, config, &crate::extensions::C, tool, args_json)
    {
        return Step::Done(result);
    }
    let outcome = match tool {
        LIST => Ok(Step::Done(list_text(view))),
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
fn list_text(view: &dyn JobsView) -> String {
    let (jobs, left_out) = crate::model::bounded_list(view.list_jobs());
    if jobs.is_empty() {
        return "No background jobs.".to_owned();
    }
    let now = view.now_ms();
    let mut rows = jobs
        .iter()
        .rev()
        .map(|job| {
            format!(
                "{}\t{}\t{}\t{}\t{}",
                job.id,
                state(job.status),
                job.kind,
                duration(job, now),
                job.label
            )
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
    let job = view.get(id).map_err(|e| message(&e))?;
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
    let ready = crate::extensions::ready_args(config, &crate::extensions::C, &args.map)?;
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
            view.get(id).map_err(|e| message(&e))?;
            return Ok(Step::Wait(WaitRequest {
                job_id: id.to_owned(),
                // The config bounds the seconds to what a timer holds.
                timeout_ms: u32::try_from(waited_ms).unwrap_or(MAX_TIMER_MS),
                until: ready.clone(),
            }));
        }
        Some(outcome) => outcome.as_ref().map_err(message)?,
    };
    let (job, end, matched) = (&job.job, job.end, job.matched.as_ref());
    if job.status.is_terminal() {
        return status_text(view, config, job).map(Step::Done);
    }
    let now = view.now_ms();
    match (end, matched, &ready) {
        (crate::model::WaitEnd::Matched, Some(m), Some(_)) => {
            return Ok(Step::Done(format!(
                "Job {id} is ready after {}: {} line {} matched.\n{}\nIt keeps running \u{2014} check job_status, or job_cancel it when done.",
                duration(job, now),
                m.line.stream.as_str(),
                m.line.number,
                crate::extensions::matched_lines(m)
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
    view.kill(id, None).map_err(|e| message(&e))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_go() {
        assert_eq!(go_duration(0), "0s");
        assert_eq!(go_duration(980), "980ms");
        assert_eq!(go_duration(1000), "1s");
        assert_eq!(go_duration(4210), "4.21s");
        assert_eq!(go_duration(61_400), "1m1.4s");
        assert_eq!(go_duration(120_000), "2m0s");
        assert_eq!(go_duration(3_600_000), "1h0m0s");
        assert_eq!(go_duration(3_723_005), "1h2m3.005s");
    }

    #[test]
    fn middle_truncation_keeps_two_thirds_of_the_head() {
        let text = "x".repeat(100_000);
        let cut = truncate_middle(&text, 200);
        assert!(cut.len() <= 200, "{}", cut.len());
        assert_eq!(
            cut,
            format!(
                "{}\n\u{2026}[99864 bytes truncated]\u{2026}\n{}",
                "x".repeat(90),
                "x".repeat(46)
            )
        );
        assert_eq!(truncate_middle("short", 200), "short");
    }

    #[test]
    fn middle_truncation_never_splits_a_character() {
        let text = "é".repeat(1000);
        let cut = truncate_middle(&text, 201);
        assert!(cut.len() <= 201);
        // 137 bytes of budget: a head of 91 and a tail of 46, both cut back to
        // whole two-byte characters.
        assert!(cut.starts_with(&"é".repeat(45)));
        assert!(cut.contains("[1864 bytes truncated]"), "{cut}");
    }

    #[test]
    fn the_tail_uses_the_bytes_the_head_gave_up() {
        // 138 bytes of budget: the head's 92 come back to 90 (30 three-byte
        // characters), so the tail may take 48 (16 characters), not 46 (15).
        let text = "界".repeat(1000);
        let cut = truncate_middle(&text, 202);
        assert_eq!(
            cut,
            format!(
                "{}\n\u{2026}[2862 bytes truncated]\u{2026}\n{}",
                "界".repeat(30),
                "界".repeat(16)
            )
        );
        // The same through an excerpt the host cut with `result_window`.
        let window = result_window(202);
        let host_head = head(&text, window.head_bytes as usize);
        let host_tail = tail(&text, window.tail_bytes as usize);
        let omitted = (text.len() - host_head.len() - host_tail.len()) as u64;
        assert_eq!(joined(host_head, true, omitted, host_tail, 202), cut);
    }

    #[test]
    fn a_tiny_budget_keeps_what_the_short_marker_leaves() {
        // Go's truncateBytes: the whole stays within the bound...
        let cut = truncate_middle(&"y".repeat(100), 40);
        assert_eq!(cut, format!("{}\n\u{2026}[truncated]", "y".repeat(25)));
        assert_eq!(cut.len(), 40);
        // ...cut back to a character boundary (20 - 15 = 5 bytes: one 界)...
        assert_eq!(
            truncate_middle(&"界".repeat(10), 20),
            "界\n\u{2026}[truncated]"
        );
        // ...unless the marker alone is not shorter than the bound.
        assert_eq!(truncate_middle("yy", 1), "y\n\u{2026}[truncated]");
        assert_eq!(
            truncate_middle(&"y".repeat(20), 15),
            format!("{}\n\u{2026}[truncated]", "y".repeat(15))
        );
        assert_eq!(
            truncate_middle(&"y".repeat(20), 16),
            "y\n\u{2026}[truncated]"
        );
        // A head is never cut inside a character, even when that leaves none.
        assert_eq!(truncate_middle("界界", 1), "\n\u{2026}[truncated]");
    }

    /// Go's `truncateMiddle` and `truncateBytes`, written out from the Go
    /// source for this comparison (`s[:budget]` backed off to a rune start).
    fn go_truncate_middle(s: &str, max: usize) -> String {
        fn go_truncate_bytes(s: &str, max: usize) -> String {
            if s.len() <= max {
                return s.to_owned();
            }
            let marker = "\n\u{2026}[truncated]";
            let mut budget = max as isize - marker.len() as isize;
            if budget <= 0 {
                budget = max as isize;
            }
            let mut budget = budget as usize;
            while budget > 0 && !s.is_char_boundary(budget) {
                budget -= 1;
            }
            format!("{}{marker}", &s[..budget])
        }
        if s.len() <= max {
            return s.to_owned();
        }
        let budget = max as isize - 64;
        if budget < 2 {
            return go_truncate_bytes(s, max);
        }
        let budget = budget as usize;
        let mut head = budget * 2 / 3;
        while head > 0 && !s.is_char_boundary(head) {
            head -= 1;
        }
        let mut start = s.len() - (budget - head);
        while start < s.len() && !s.is_char_boundary(start) {
            start += 1;
        }
        format!(
            "{}\n\u{2026}[{} bytes truncated]\u{2026}\n{}",
            &s[..head],
            start - head,
            &s[start..]
        )
    }

    #[test]
    fn every_bound_from_1_to_200_matches_go() {
        for text in [
            "y".repeat(300),
            "é".repeat(150),
            "界".repeat(100),
            "a😀".repeat(60),
        ] {
            for max in 1..=200 {
                assert_eq!(
                    truncate_middle(&text, max as u64),
                    go_truncate_middle(&text, max),
                    "{max} bytes of {:?}",
                    &text[..8]
                );
            }
        }
    }
}
