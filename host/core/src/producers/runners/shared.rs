//! What every runner does the same way: the registry's hooks of a job
//! whose task runs on the engine, the refusals of what no engine job can
//! have, and the outcomes' shapes.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::capture::{OutputLimits, SharedCapture, SpillBudget};
use crate::owner::Owner;
use crate::producer::{CommandRequest, JobControl};
use crate::registry::{
    JobHooks, JobOutcome, JobRegistry, JobStart, OutcomeStatus, Placement, StartError,
};

use super::RemoteAdopt;
use crate::sync::lock;

/// What a runner keeps of its jobs, whatever their engine: the directory
/// and budget their captures spill to, and the live ones (`T`, the
/// runner's own job), which its shutdown stops.
pub(crate) struct Kept<T> {
    spill_dir: tempfile::TempDir,
    budget: Arc<SpillBudget>,
    next: AtomicU64,
    live: Mutex<Vec<Weak<T>>>,
}

impl<T> Kept<T> {
    /// A spill directory in `parent` (the system's temporary one without),
    /// with `total_bytes` of budget.
    pub(crate) fn new(
        runner: &str,
        parent: Option<&Path>,
        total_bytes: u64,
    ) -> Result<Kept<T>, String> {
        let mut spill = tempfile::Builder::new();
        spill.prefix("jobs-host-remote-");
        let spill_dir = match parent {
            Some(parent) => spill.tempdir_in(parent),
            None => spill.tempdir(),
        }
        .map_err(|e| format!("runner {runner}: cannot make a spill directory: {e}"))?;
        Ok(Kept {
            spill_dir,
            budget: SpillBudget::new(total_bytes),
            next: AtomicU64::new(0),
            live: Mutex::new(Vec::new()),
        })
    }

    /// A new capture in the spill directory.
    pub(crate) fn capture(&self, limits: OutputLimits) -> SharedCapture {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let stem = self.spill_dir.path().join(format!("remote-{n}"));
        SharedCapture::new(&stem, limits, Some(self.budget.clone()))
    }

    /// Counts `job` among the live ones, forgetting those gone.
    pub(crate) fn keep(&self, job: &Arc<T>) {
        let mut live = lock(&self.live);
        live.retain(|r| r.strong_count() > 0);
        live.push(Arc::downgrade(job));
    }

    /// The live jobs that have not `ended`.
    pub(crate) fn running(&self, ended: impl Fn(&T) -> bool) -> Vec<Arc<T>> {
        lock(&self.live)
            .iter()
            .filter_map(Weak::upgrade)
            .filter(|job| !ended(job))
            .collect()
    }
}

/// One live job as a runner's shutdown sees it.
pub(crate) struct Live<'a> {
    /// Cancelled to stop it.
    pub stop: &'a CancellationToken,
    /// True once its task has ended.
    pub finished: &'a tokio::sync::watch::Sender<bool>,
    /// The engine's id, once it has one.
    pub engine_id: Option<&'a String>,
}

/// A runner's shutdown: with `outlive`, its jobs are left on the engine
/// (their engine ids logged); else each is stopped, and the host waits
/// until every job's task says the engine confirmed it, at most `wait`.
pub(crate) async fn stop_all(runner: &str, outlive: bool, live: &[Live<'_>], wait: Duration) {
    if outlive {
        for job in live {
            if let Some(id) = job.engine_id {
                tracing::info!(runner = %runner, engine_id = %id, "left running on the engine");
            }
        }
        return;
    }
    for job in live {
        job.stop.cancel();
    }
    // The stops themselves are sent by each job's task.
    let confirmed = async {
        for job in live {
            let mut finished = job.finished.subscribe();
            let _ = finished.wait_for(|done| *done).await;
        }
    };
    let _ = tokio::time::timeout(wait, confirmed).await;
}

/// Hands a job a previous host left to the registry under its old id,
/// with `hooks`; once the registry has it, `adopted` lets its task go on
/// (a job it refuses is neither followed nor written to), and a job its
/// old host was stopping is stopped again.
///
/// # Errors
///
/// The registry's refusal (an id taken, a stale owner).
pub(crate) fn adopt(
    registry: &JobRegistry,
    owner: Option<Owner>,
    job: RemoteAdopt,
    hooks: JobHooks,
    adopted: tokio::sync::oneshot::Sender<()>,
) -> Result<(), StartError> {
    let stopping = job
        .recorded
        .as_ref()
        .is_some_and(|(status, _)| status == "stopping");
    registry.adopt(
        JobStart {
            kind: crate::bash::BASH_KIND.to_owned(),
            label: job.label,
            output_limit_bytes: None,
            owner,
            sandbox: None,
        },
        &job.id,
        job.started_at,
        job.end_seen,
        hooks,
    )?;
    let _ = adopted.send(());
    if stopping {
        let _ = registry.cancel(&job.id, Some("its kill was under way"));
    }
    Ok(())
}

/// The registry's hooks of a remote job whose `task` follows it: a kill
/// cancels `stop`; a session's or host's teardown cancels `let_go`
/// instead when the runner lets jobs `outlive` them.
pub(crate) fn job_hooks(
    task: tokio::task::JoinHandle<JobOutcome>,
    stop: CancellationToken,
    let_go: CancellationToken,
    outlive: bool,
    capture: SharedCapture,
    control: Arc<dyn JobControl>,
    placement: Placement,
) -> JobHooks {
    let done = async move {
        Ok(match task.await {
            Ok(outcome) => outcome,
            Err(e) => failed(format!("the runner's task for this job ended: {e}")),
        })
    };
    JobHooks {
        cancel: Box::new(move |reason| {
            // A teardown, not a kill: with `outlive` the job runs on.
            let teardown = matches!(
                reason,
                Some(crate::registry::OWNER_DISPOSED | crate::registry::SERVICE_DISPOSED)
            );
            if outlive && teardown {
                let_go.cancel();
            } else {
                stop.cancel();
            }
            Ok(())
        }),
        capture: Some(capture),
        read_output: None,
        output_excerpt: None,
        control: Some(control),
        placement: Some(placement),
        done: Box::pin(done),
    }
}

/// Refuses, in words and before anything runs, what no job on an engine
/// can have: a blank or too long command, stdin, a terminal, rendering, a
/// sandbox of ours, our CPU and memory limits. The guest refuses the same;
/// a host's own caller may still ask.
pub(crate) fn refuse_what_engines_lack(
    runner: &str,
    request: &CommandRequest,
    max_command_bytes: usize,
) -> Result<(), StartError> {
    if request.command.trim().is_empty() {
        return Err(StartError::Producer(
            "invalid command: expected a non-blank string".to_owned(),
        ));
    }
    if request.command.len() > max_command_bytes {
        return Err(StartError::Producer(format!(
            "invalid command: {} bytes is more than the limit of {max_command_bytes} bytes",
            request.command.len()
        )));
    }
    let lacking = [
        ("stdin", request.stdin),
        ("tty", request.tty.is_some()),
        ("render", request.render),
        ("sandbox", request.sandbox.is_some()),
        ("cpu_seconds", request.limits.cpu_seconds.is_some()),
        ("memory_bytes", request.limits.memory_bytes.is_some()),
    ];
    match lacking.iter().find(|(_, asked)| *asked) {
        Some((what, _)) => Err(refusal(runner, what)),
        None => Ok(()),
    }
}

/// `invalid WHAT: a job on runner "NAME" cannot have it`.
pub(crate) fn refusal(runner: &str, what: &str) -> StartError {
    StartError::Producer(format!(
        "invalid {what}: a job on runner \"{runner}\" cannot have it"
    ))
}

/// Ended by itself with `code`.
pub(crate) fn completed(code: i32) -> JobOutcome {
    JobOutcome {
        status: OutcomeStatus::Completed,
        detail: Some(crate::words::exit_code(code)),
        output: None,
    }
}

/// Ended by a stop, a limit or a signal (`detail` says which where it is
/// not the owner's own kill).
pub(crate) fn killed(detail: Option<String>) -> JobOutcome {
    JobOutcome {
        status: OutcomeStatus::Killed,
        detail,
        output: None,
    }
}

/// Failed, with why.
pub(crate) fn failed(why: String) -> JobOutcome {
    JobOutcome {
        status: OutcomeStatus::Failed,
        detail: Some(why),
        output: None,
    }
}
