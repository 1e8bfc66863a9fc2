//! Plain data the tool logic works on, free of any wasm binding type.

use serde::Serialize;
use serde_json::Value;

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

/// A request to wait for a job before a call can go on (see the WIT
/// `wait-request`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitRequest {
    /// The job, as the model named it.
    pub job_id: String,
    /// Whole milliseconds, 1 to [`MAX_TIMER_MS`].
    pub timeout_ms: u32,
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

/// What a wait came to: the job's snapshot then, or why there was none.
pub type Waited = Result<JobSnapshot, RegistryError>;

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
