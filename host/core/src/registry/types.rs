//! What a job is: its statuses, outcome, snapshot and start request.

use crate::owner::Owner;

/// The largest wait timeout a timer accepts, in milliseconds.
pub const MAX_TIMER_DELAY_MS: u64 = 2_147_483_647;
/// Largest integer a JSON (JavaScript) number holds exactly.
pub const MAX_SAFE_INTEGER: u64 = 9_007_199_254_740_991;
/// The most bytes of a label the registry keeps: a longer one is cut to a
/// character boundary and ends with `…` (U+2026), the same rule the guest applies
/// to every label it shows, so a job's label costs bounded memory on both sides.
pub const MAX_LABEL_BYTES: usize = 512;

/// `label`, cut to [`MAX_LABEL_BYTES`] as described there.
pub fn bounded_label(mut label: String) -> String {
    if label.len() <= MAX_LABEL_BYTES {
        return label;
    }
    let mut end = MAX_LABEL_BYTES - '\u{2026}'.len_utf8();
    while !label.is_char_boundary(end) {
        end -= 1;
    }
    label.truncate(end);
    label.push('\u{2026}');
    label
}

/// Default number of finished, seen jobs kept per owner (see
/// [`crate::RegistryConfig::with_max_retained_per_owner`]).
pub const DEFAULT_MAX_RETAINED_PER_OWNER: u64 = 1000;

/// Default admission limit per owner.
pub const DEFAULT_MAX_CONCURRENT_JOBS_PER_OWNER: u64 = 10;

/// Lifecycle of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobStatus {
    /// Registered and working.
    Running,
    /// Cancellation requested; the producer still holds its resources.
    Stopping,
    /// The producer finished (for a shell command, whatever its exit code).
    Completed,
    /// Stopped by cancellation or by a signal.
    Killed,
    /// The producer failed, or its outcome was converted to a failure.
    Failed,
}

impl JobStatus {
    /// Whether the job has settled.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            JobStatus::Completed | JobStatus::Killed | JobStatus::Failed
        )
    }

    /// The status word the model sees.
    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Running => "running",
            JobStatus::Stopping => "stopping",
            JobStatus::Completed => "completed",
            JobStatus::Killed => "killed",
            JobStatus::Failed => "failed",
        }
    }
}

/// A terminal status a producer can report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutcomeStatus {
    /// Finished.
    Completed,
    /// Stopped by cancellation or a signal.
    Killed,
    /// Failed.
    Failed,
}

/// How a job ended, as its producer reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobOutcome {
    /// Terminal status.
    pub status: OutcomeStatus,
    /// Short detail, for example `exit code: 0`.
    pub detail: Option<String>,
    /// The final output, for final-output jobs only.
    pub output: Option<String>,
}

impl JobOutcome {
    /// The end a previous host recorded of a job (its status and detail as
    /// words, `completed`, `killed` or `failed`), for the host that takes
    /// the job on; `None` for any other status (`running`, `stopping`).
    pub fn recorded(status: &str, detail: Option<&str>) -> Option<JobOutcome> {
        let status = match status {
            "completed" => OutcomeStatus::Completed,
            "killed" => OutcomeStatus::Killed,
            "failed" => OutcomeStatus::Failed,
            _ => return None,
        };
        Some(JobOutcome {
            status,
            detail: detail.map(str::to_owned),
            output: None,
        })
    }
}

/// A fresh view of one job record.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSnapshot {
    /// `<kind>-<n>`.
    pub id: String,
    /// Producer namespace.
    pub kind: String,
    /// One-line label.
    pub label: String,
    /// Producer's byte cap for everything the model sees about this job.
    pub output_limit_bytes: Option<u64>,
    /// Session id of the owner; `None` for unowned jobs.
    pub owner_session: Option<String>,
    /// Status.
    pub status: JobStatus,
    /// Settlement detail.
    pub detail: Option<String>,
    /// Registration time, epoch ms.
    pub started_at: u64,
    /// Settlement time, epoch ms; present exactly when terminal.
    pub finished_at: Option<u64>,
    /// Whether the outcome was observed, so no notice is due.
    pub reported: bool,
    /// The sandbox the job runs in; `None`: its user's full authority.
    pub sandbox: Option<crate::sandbox::Sandbox>,
    /// Where the job runs when that is not this host, in its runner's
    /// words (see [`Placement`]).
    pub placement: Option<String>,
}

/// Where a job runs when that is not this host, kept up to date by its
/// producer and read with every snapshot: `ray: raysubmit_Xy12 pending:
/// waiting for resources` while its engine queues it, `ray: raysubmit_Xy12`
/// once it runs.
#[derive(Debug, Clone, Default)]
pub struct Placement(std::sync::Arc<std::sync::Mutex<Option<String>>>);

impl Placement {
    /// A placement that says `words` until it is told otherwise.
    pub fn new(words: impl Into<String>) -> Placement {
        Placement(std::sync::Arc::new(std::sync::Mutex::new(Some(
            words.into(),
        ))))
    }

    /// Says `words` from now on.
    pub fn set(&self, words: impl Into<String>) {
        *crate::sync::lock(&self.0) = Some(words.into());
    }

    /// What it says now.
    pub fn get(&self) -> Option<String> {
        crate::sync::lock(&self.0).clone()
    }
}

impl JobSnapshot {
    /// Whether the job ended as a success: it completed, with exit code 0
    /// when it is a process.
    pub fn succeeded(&self) -> bool {
        self.status == JobStatus::Completed
            && self
                .detail
                .as_deref()
                .is_none_or(|d| d == crate::words::exit_code(0))
    }
}

/// What a producer asks to register.
#[derive(Debug, Clone)]
pub struct JobStart {
    /// Producer namespace and id prefix; must not be empty.
    pub kind: String,
    /// One-line label; must not be empty.
    pub label: String,
    /// Byte cap on everything the model sees about the job.
    pub output_limit_bytes: Option<u64>,
    /// The live agent that owns the job; `None` for an unowned job.
    pub owner: Option<Owner>,
    /// The sandbox the job runs in; `None`: its user's full authority.
    pub sandbox: Option<crate::sandbox::Sandbox>,
}

/// What a kill request did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillOutcome {
    /// The producer accepted the cancellation.
    Requested,
    /// The job had already settled.
    AlreadyFinished,
}

/// The parts of a job's record that change while it runs (see
/// [`crate::JobRegistry::job_states`]): cheap to take and compare, so a
/// host can tell which of many jobs it must record again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DurableState {
    /// Its status.
    pub status: JobStatus,
    /// Its end, epoch ms.
    pub finished_at: Option<u64>,
    /// How far the model has read stdout and stderr, in bytes.
    pub cursors: [u64; 2],
    /// Whether the model saw its end or was told of it.
    pub end_seen: bool,
    /// Its monitor's pid and start time, once spawned.
    pub monitor: Option<(i32, u64)>,
    /// Whether it outlives its host (runs under a monitor, or on a cluster
    /// engine with a copy of its log kept).
    pub durable: bool,
    /// Whether it runs on a cluster engine (it has no monitor), and
    /// whether the engine's id for it is known yet.
    pub remote: Option<bool>,
}

impl DurableState {
    /// A running job whose record waits for what names it for the next
    /// host: its monitor's pid, or the engine's id.
    pub fn unspawned(&self) -> bool {
        let unnamed = match self.remote {
            Some(named) => !named,
            None => self.monitor.is_none(),
        };
        self.durable && self.status == JobStatus::Running && unnamed
    }
}

/// What a host that outlives a crash records of a job that outlives it
/// (see [`crate::JobRegistry::durable_view`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurableView {
    /// The job's directory (its monitor's files).
    pub files: std::path::PathBuf,
    /// Its monitor's pid and start time (see
    /// [`crate::bash::process_start_time`]), once spawned.
    pub monitor: Option<(i32, u64)>,
    /// How far the model has read stdout and stderr, in bytes.
    pub cursors: [u64; 2],
    /// Whether the model saw its end or was told of it.
    pub end_seen: bool,
    /// A job on a cluster engine: its runner and the engine's id for it
    /// (see [`crate::registry::control::JobControl::remote`]).
    pub remote: Option<(String, String)>,
}
