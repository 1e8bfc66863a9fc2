//! Plain data the tool logic works on, free of any wasm binding type.
//!
//! (Over 500 lines: one plain type for each WIT record and variant the guest
//! uses, each documented, and the JSON helpers they share.)

use serde::Serialize;
use serde_json::Value;

mod json;
mod sandbox;
pub mod schema;
mod terminal;

pub use json::{Json, Pair};
pub use sandbox::{Sandbox, SandboxFiles, SandboxNetwork};
pub use terminal::{
    DEFAULT_TERMINAL, TERMINAL_DIMENSIONS, TerminalScreen, TerminalSize, dimension,
};

/// Lifecycle of a job (see the WIT `job-status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum JobStatus {
    /// Registered and working.
    Running,
    /// Cancellation requested; the producer still holds its resources.
    Stopping,
    /// The producer finished (a non-zero exit included).
    Completed,
    /// Stopped by cancellation or a signal.
    Killed,
    /// The producer failed, or its outcome was converted to a failure.
    Failed,
}

impl JobStatus {
    /// The model-visible word for this status.
    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Running => "running",
            JobStatus::Stopping => "stopping",
            JobStatus::Completed => "completed",
            JobStatus::Killed => "killed",
            JobStatus::Failed => "failed",
        }
    }

    /// Whether the job has settled.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            JobStatus::Completed | JobStatus::Killed | JobStatus::Failed
        )
    }
}

/// One tool as the model receives it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDefinition {
    /// Tool name.
    pub name: &'static str,
    /// Exact description.
    pub description: &'static str,
    /// JSON Schema of the arguments.
    pub input_schema: Value,
    /// JSON Schema of the canonical value; `None` for a tool that returns text only.
    pub output_schema: Option<Value>,
    /// Its title and behaviour hints.
    pub annotations: ToolAnnotations,
}

/// A tool's title and behaviour hints (MCP tool annotations): clients such as
/// Codex let a read-only tool run without asking a person, and ask before a
/// destructive one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolAnnotations {
    /// A human-readable name.
    pub title: String,
    /// Changes nothing a person would care about (reads and lists).
    pub read_only: bool,
    /// May destroy something (a kill ends processes).
    pub destructive: bool,
    /// Calling again with the same arguments has no further effect.
    pub idempotent: bool,
    /// Reaches beyond the jobs it names.
    pub open_world: bool,
}

impl ToolAnnotations {
    /// A tool that only looks at jobs. `idempotent` is false for a consuming
    /// read, whose second call answers only what came since.
    pub fn reads(title: impl Into<String>, idempotent: bool) -> ToolAnnotations {
        ToolAnnotations {
            title: title.into(),
            read_only: true,
            destructive: false,
            idempotent,
            open_world: false,
        }
    }

    /// A tool that acts on the jobs it names, and on nothing else.
    pub fn acts(title: impl Into<String>, destructive: bool, idempotent: bool) -> ToolAnnotations {
        ToolAnnotations {
            title: title.into(),
            read_only: false,
            destructive,
            idempotent,
            open_world: false,
        }
    }
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
    pub value: Option<Json>,
}

/// A request to wait for a job before a call can go on (see the WIT
/// `wait-request`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitRequest {
    /// The job, as the model named it.
    pub job_id: String,
    /// Whole milliseconds, 1 to [`MAX_TIMER_MS`].
    pub timeout_ms: u32,
    /// Other ends for the wait (extension `ready`).
    pub until: Option<WaitUntil>,
}

/// What besides settlement and the timeout ends a wait (see the WIT
/// `wait-until`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitUntil {
    /// A regular expression tried against each unread line.
    pub pattern: Option<String>,
    /// Quiet output for this many milliseconds.
    pub quiet_ms: Option<u32>,
    /// A terminal job quiet this long at a prompt (extension `terminal`).
    pub prompt_quiet_ms: Option<u32>,
}

/// Why a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitEnd {
    /// The job is terminal.
    Settled,
    /// The timeout came first.
    TimedOut,
    /// A line matched the pattern.
    Matched,
    /// The job was quiet long enough.
    Quiet,
    /// The job waits at a prompt.
    Prompt,
}

/// One output stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputStream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
    /// A terminal or rendered job's stdout as written (extension `terminal`).
    Raw,
    /// A rendered job's stderr as written (extension `terminal`).
    RawStderr,
}

impl OutputStream {
    /// `stdout`, `stderr`, `raw output` or `raw stderr`.
    pub fn as_str(self) -> &'static str {
        match self {
            OutputStream::Stdout => "stdout",
            OutputStream::Stderr => "stderr",
            OutputStream::Raw => "raw output",
            OutputStream::RawStderr => "raw stderr",
        }
    }
}

/// One numbered line of output (see the WIT `output-line`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputLine {
    /// Its stream.
    pub stream: OutputStream,
    /// Its number in the stream, from 1.
    pub number: u64,
    /// Its text, without the line ending.
    pub text: String,
}

/// The line that ended a wait, and the lines before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineMatch {
    /// The matching line.
    pub line: OutputLine,
    /// Up to two lines before it, oldest first.
    pub before: Vec<OutputLine>,
}

/// What a wait came to.
#[derive(Debug, Clone, PartialEq)]
pub struct WaitOutcome {
    /// The job when the wait ended.
    pub job: JobSnapshot,
    /// Which end came first.
    pub end: WaitEnd,
    /// The matching line, when `end` is [`WaitEnd::Matched`].
    pub matched: Option<LineMatch>,
    /// The prompt line, when `end` is [`WaitEnd::Prompt`].
    pub prompt: Option<String>,
}

/// A signal from the allowlist (see the WIT `job-signal`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobSignal {
    /// SIGINT.
    Int,
    /// SIGTERM.
    Term,
    /// SIGHUP.
    Hup,
    /// SIGKILL.
    Kill,
    /// SIGSTOP.
    Stop,
    /// SIGCONT.
    Cont,
}

impl JobSignal {
    /// Every signal the model may send, in the order the schema lists them.
    pub const ALL: [JobSignal; 6] = [
        JobSignal::Int,
        JobSignal::Term,
        JobSignal::Hup,
        JobSignal::Kill,
        JobSignal::Stop,
        JobSignal::Cont,
    ];

    /// The name without `SIG`: `INT`, `TERM`, ...
    pub fn name(self) -> &'static str {
        match self {
            JobSignal::Int => "INT",
            JobSignal::Term => "TERM",
            JobSignal::Hup => "HUP",
            JobSignal::Kill => "KILL",
            JobSignal::Stop => "STOP",
            JobSignal::Cont => "CONT",
        }
    }
}

/// Lines of retained output to fetch (see the WIT `line-query`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineQuery {
    /// `count` lines of `stream` from line `start` on.
    Range {
        /// The stream.
        stream: OutputStream,
        /// First line wanted, from 1.
        start: u64,
        /// At most this many.
        count: u32,
    },
    /// The last `count` lines of `stream`.
    Last {
        /// The stream.
        stream: OutputStream,
        /// At most this many.
        count: u32,
    },
    /// Matching lines with context.
    Search {
        /// One stream, or both.
        stream: Option<OutputStream>,
        /// The regular expression.
        pattern: String,
        /// Context lines before and after each match.
        context: u32,
        /// Matches returned at most.
        max_matches: u32,
    },
}

/// How much of one stream is retained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamExtent {
    /// The stream.
    pub stream: OutputStream,
    /// Bytes ever written.
    pub total_bytes: u64,
    /// Bytes from the start no longer retained.
    pub dropped_bytes: u64,
    /// Number of the first retained line.
    pub first_line: u64,
    /// Number of the last line; 0 when empty.
    pub last_line: u64,
}

/// An answer to a [`LineQuery`].
#[derive(Debug, Clone, PartialEq)]
pub struct LinePage {
    /// The lines, in stream order.
    pub lines: Vec<OutputLine>,
    /// Indexes into `lines` of the matching lines (search).
    pub hits: Vec<u32>,
    /// Every match in the retained output (search).
    pub total_matches: u64,
    /// The extent of each stream looked at.
    pub extents: Vec<StreamExtent>,
    /// Where a search stopped early (its stream and first untried line).
    pub stopped: Option<(OutputStream, u64)>,
    /// The job at the moment of the answer.
    pub job: JobSnapshot,
}

/// A listening TCP socket of a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListeningPort {
    /// The bound address as text.
    pub address: String,
    /// The port.
    pub port: u16,
}

impl ListeningPort {
    /// `127.0.0.1:8000`, or `[::]:8000` for an IPv6 address.
    pub fn display(&self) -> String {
        if self.address.contains(':') {
            format!("[{}]:{}", self.address, self.port)
        } else {
            format!("{}:{}", self.address, self.port)
        }
    }
}

/// One step of a call: its answer, or a wait the host runs before the call
/// resumes with the outcome.
#[derive(Debug, Clone, PartialEq)]
pub enum Step<T> {
    /// The answer.
    Done(T),
    /// Wait first; then call again with the outcome.
    Wait(WaitRequest),
}

/// What a wait came to: the job's snapshot then and which end came, or why
/// there was none.
pub type Waited = Result<WaitOutcome, RegistryError>;

/// The JSON type word of a value, for argument errors (`got number`).
pub fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The largest line number an argument may name (the largest integer a JSON
/// number holds exactly).
pub const MAX_SAFE_LINE: u64 = 9_007_199_254_740_991;

/// The longest wait a timer holds, in milliseconds (2^31 - 1).
pub const MAX_TIMER_MS: u32 = 2_147_483_647;

/// The whole milliseconds a wait of `ms` takes (rounded up), or `None` when
/// the value is not finite, not above zero, or above [`MAX_TIMER_MS`].
pub fn timer_ms(ms: f64) -> Option<u32> {
    (ms.is_finite() && ms > 0.0 && ms <= f64::from(MAX_TIMER_MS)).then(|| ms.ceil() as u32)
}

/// One block of a result the harness rewrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContentBlock {
    /// Plain text.
    Text(String),
    /// Any other block, as JSON; never cut.
    Other(String),
}

/// A number as `JSON.stringify` writes it: integers without a fraction, and
/// `null` for values JSON cannot hold.
pub fn js_number(value: f64) -> String {
    if !value.is_finite() {
        return "null".to_owned();
    }
    if value == 0.0 {
        return "0".to_owned();
    }
    if value.fract() == 0.0 && value.abs() < 1e21 {
        return format!("{value:.0}");
    }
    let abs = value.abs();
    if (1e-7..1e21).contains(&abs) {
        return format!("{value}");
    }
    // Exponent form, as JavaScript writes it: 1e+21, 1.5e-7.
    let exp = format!("{value:e}");
    match exp.split_once('e') {
        Some((mantissa, power)) if !power.starts_with('-') => format!("{mantissa}e+{power}"),
        _ => exp,
    }
}

/// The most bytes of a label any text shows (list rows, notices, cards, values).
/// A host may hand over longer labels; they are cut by [`bounded_label`].
pub const MAX_LABEL_BYTES: usize = 512;

/// The most rows a job list shows; the rest are counted in one closing line.
pub const MAX_LIST_ROWS: usize = 200;

/// `label` when it is at most [`MAX_LABEL_BYTES`]; otherwise its longest prefix
/// that ends on a character boundary and leaves room for `…` (U+2026), then `…`.
pub fn bounded_label(label: String) -> String {
    if label.len() <= MAX_LABEL_BYTES {
        return label;
    }
    let mut end = MAX_LABEL_BYTES - '\u{2026}'.len_utf8();
    while !label.is_char_boundary(end) {
        end -= 1;
    }
    let mut cut = label;
    cut.truncate(end);
    cut.push('\u{2026}');
    cut
}

/// The jobs a bounded list shows, in registration order, and how many it leaves
/// out: every live job first, then the newest finished ones, up to
/// [`MAX_LIST_ROWS`].
pub fn bounded_list(jobs: Vec<JobSnapshot>) -> (Vec<JobSnapshot>, usize) {
    if jobs.len() <= MAX_LIST_ROWS {
        return (jobs, 0);
    }
    let total = jobs.len();
    let mut order: Vec<usize> = (0..total).collect();
    // Live before finished; within each, newest (latest registered) first.
    order.sort_by_key(|&i| (jobs[i].status.is_terminal(), std::cmp::Reverse(i)));
    let mut keep = vec![false; total];
    for &i in order.iter().take(MAX_LIST_ROWS) {
        keep[i] = true;
    }
    let shown = jobs
        .into_iter()
        .zip(keep)
        .filter_map(|(job, kept)| kept.then_some(job))
        .collect();
    (shown, total - MAX_LIST_ROWS)
}

/// A snapshot of one job as the registry reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSnapshot {
    /// `<kind>-<n>`.
    pub id: String,
    /// Producer namespace, for example `bash`.
    pub kind: String,
    /// One-line label, for example the command.
    pub label: String,
    /// Current status.
    pub status: JobStatus,
    /// Settlement detail, for example `exit code: 0`.
    pub detail: Option<String>,
    /// Registration time, epoch ms.
    pub started_at: u64,
    /// Settlement time, epoch ms; present exactly when terminal.
    pub finished_at: Option<u64>,
    /// The producer's cap on everything the model sees about this job.
    pub output_limit_bytes: Option<u64>,
    /// Whether the outcome was already observed (no notice due).
    pub reported: bool,
    /// The sandbox the job runs in; `None`: its user's full authority.
    pub sandbox: Option<Sandbox>,
    /// Where the job runs when that is not the host, in the engine's words
    /// (extension `runners`): `ray: raysubmit_Xy12 pending: waiting for
    /// resources`.
    pub placement: Option<String>,
}

/// What a job on a cluster engine needs (extension `runners`, see the WIT
/// `resources`); absent: the engine's default.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Resources {
    /// CPUs.
    pub cpus: Option<f64>,
    /// GPUs.
    pub gpus: Option<f64>,
    /// Memory in bytes.
    pub memory_bytes: Option<u64>,
    /// The engine's other resources by name, in the order given.
    pub custom: Vec<(String, f64)>,
}

/// The public snapshot: the canonical value tools return. It leaves out the owner,
/// the `reported` bit and the byte cap on purpose.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PublicJob<'a> {
    /// Job id.
    pub id: &'a str,
    /// Producer namespace.
    pub kind: &'a str,
    /// One-line label.
    pub label: &'a str,
    /// Status word.
    pub status: JobStatus,
    /// Settlement detail, when settled with one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<&'a str>,
    /// Registration time, epoch ms.
    pub started_at: u64,
    /// Settlement time, epoch ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<u64>,
}

impl JobSnapshot {
    /// The public view of this snapshot.
    pub fn public(&self) -> PublicJob<'_> {
        PublicJob {
            id: &self.id,
            kind: &self.kind,
            label: &self.label,
            status: self.status,
            detail: self.detail.as_deref(),
            started_at: self.started_at,
            finished_at: self.finished_at,
        }
    }
}

/// What a kill request did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillOutcome {
    /// Cancellation was accepted; the job is stopping.
    Requested,
    /// The job had already settled.
    AlreadyFinished,
}

/// Expected failures of registry calls (see the WIT `registry-error`).
#[derive(Debug, Clone, PartialEq)]
pub enum RegistryError {
    /// The id was never issued, or its record is gone.
    UnknownJob(String),
    /// The job belongs to another session.
    ForeignJob(String),
    /// The wait timeout the model asked for was rejected (found by the guest;
    /// the host only ever receives valid timeouts).
    InvalidTimeout(f64),
    /// The caller cancelled the wait.
    WaitAborted,
    /// A producer hook failed with this message.
    ProducerFailed(String),
    /// A pattern did not compile; the compiler's message.
    InvalidPattern(String),
    /// The job was started without open input.
    NoInput,
    /// The job's input is closed.
    InputClosed,
    /// The host does not offer the call; what was asked for.
    Unsupported(String),
    /// The job was started without a terminal.
    NoTerminal,
}

/// Which part of a job's whole output to fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExcerptWindow {
    /// Output of at most this many bytes comes back whole.
    pub whole_up_to: u64,
    /// Otherwise at most this many bytes from the start...
    pub head_bytes: u64,
    /// ...and at most this many from the end.
    pub tail_bytes: u64,
}

/// A job's whole output, or its two ends.
#[derive(Debug, Clone, PartialEq)]
pub struct Excerpt {
    /// The output from its first byte (all of it when nothing was omitted).
    pub head: String,
    /// The last bytes, when the middle was left out.
    pub tail: String,
    /// Bytes left out between `head` and `tail`.
    pub omitted_bytes: u64,
    /// The job at the moment of the excerpt.
    pub job: JobSnapshot,
}

/// The registry as seen by one caller: the capability the host hands the guest.
pub trait JobsView {
    /// The caller's jobs and all unowned jobs, in registration order.
    fn list_jobs(&self) -> Vec<JobSnapshot>;
    /// A non-consuming snapshot.
    fn get(&self, id: &str) -> Result<JobSnapshot, RegistryError>;
    /// A (stream-consuming) read: the text and the snapshot after it.
    fn read(&self, id: &str) -> Result<(String, JobSnapshot), RegistryError>;
    /// A cancellation request.
    fn kill(&self, id: &str, reason: Option<&str>) -> Result<KillOutcome, RegistryError>;
    /// The whole output so far, non-consuming, or its two ends (see the WIT
    /// `owner-scope.output`).
    fn output(&self, id: &str, window: ExcerptWindow) -> Result<Excerpt, RegistryError>;
    /// Writes to the job's stdin, then closes it when `close` (extension
    /// `input`). A host without the extension answers `unsupported`.
    fn write_input(&self, id: &str, data: &str, close: bool) -> Result<u64, RegistryError> {
        let _ = (id, data, close);
        Err(RegistryError::Unsupported("input".to_owned()))
    }
    /// Sends a signal to the job's tree (extension `input`).
    fn signal(&self, id: &str, signal: JobSignal) -> Result<(), RegistryError> {
        let _ = (id, signal);
        Err(RegistryError::Unsupported("input".to_owned()))
    }
    /// Retained lines, non-consuming (extension `log`).
    fn lines(&self, id: &str, query: &LineQuery) -> Result<LinePage, RegistryError> {
        let _ = (id, query);
        Err(RegistryError::Unsupported("log".to_owned()))
    }
    /// Listening TCP ports of the job's processes (extension `ports`).
    fn ports(&self, id: &str) -> Result<Vec<ListeningPort>, RegistryError> {
        let _ = id;
        Err(RegistryError::Unsupported("ports".to_owned()))
    }
    /// Gives the job's terminal a new size (extension `terminal`).
    fn resize(&self, id: &str, size: TerminalSize) -> Result<(), RegistryError> {
        let _ = (id, size);
        Err(RegistryError::Unsupported("terminal".to_owned()))
    }
    /// What the job's terminal shows now (extension `terminal`).
    fn screen(&self, id: &str) -> Result<TerminalScreen, RegistryError> {
        let _ = id;
        Err(RegistryError::Unsupported("terminal".to_owned()))
    }
    /// Milliseconds since the Unix epoch, from the host's clock.
    fn now_ms(&self) -> u64;
    /// Writes a diagnostic line to the host's log.
    fn log_info(&self, message: &str);
}

#[cfg(test)]
mod bound_tests {
    use super::*;

    #[test]
    fn labels_are_cut_on_a_character_boundary_with_a_marker() {
        assert_eq!(bounded_label("short".into()), "short");
        let exact = "x".repeat(MAX_LABEL_BYTES);
        assert_eq!(bounded_label(exact.clone()), exact);
        let cut = bounded_label("x".repeat(MAX_LABEL_BYTES + 1));
        assert_eq!(cut, format!("{}\u{2026}", "x".repeat(MAX_LABEL_BYTES - 3)));
        assert_eq!(cut.len(), MAX_LABEL_BYTES);
        // 3-byte characters: 509 bytes is not a boundary, 507 is.
        let cut = bounded_label("界".repeat(400));
        assert_eq!(cut, format!("{}\u{2026}", "界".repeat(169)));
        assert!(cut.len() <= MAX_LABEL_BYTES);
    }
}
