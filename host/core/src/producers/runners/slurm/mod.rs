//! The Slurm runner: jobs as batch jobs of the Slurm cluster this machine
//! (a login node) submits to, through Slurm's own commands.
//!
//! - [`cli`]: `sbatch`, `squeue`, `scontrol`, `sacct` and `scancel`, and
//!   their machine formats read.
//! - `poll`: one `squeue` per interval for all of the runner's jobs.
//! - `job`: one job's life: its batch script and submit, the tail of its
//!   output files by byte offset, its exit record, its signals, its end.
//! - `durable`: a durable session's jobs: where their files are kept, and
//!   a job a previous host left, taken on again.
//!
//! A job runs under a small relay (`relay.py`, run by the node's Python)
//! that puts the command in a session of its own, passes the signals it is
//! sent on to the command's group, and writes how the command ended to an
//! exit record beside the output files: Slurm's own exit code can be wrong
//! (`COMPLETED 0:0` after `exit 1`) or gone (past `MinJobAge` with no
//! accounting), the record is the job's result. The output files and the
//! record live in a directory the login node and the compute nodes share
//! ([`SlurmConfig::dir`]): "Slurm does no movement of user files".

pub mod cli;
mod durable;
mod job;
mod poll;

pub use durable::kept_output;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use self::cli::Cancel;
use crate::capture::{OutputLimits, SharedCapture};
use crate::owner::Owner;
use crate::producer::{
    CommandProducer, CommandRequest, ControlError, JobControl, JobSignal, Preflight, Started,
};
use crate::producers::names::Names;
use crate::registry::control::ListeningPort;
use crate::registry::{JobHooks, JobRegistry, JobStart, Placement, StartError};

/// The longest command a Slurm job takes, in bytes (it travels in its batch
/// script, which slurmctld keeps; sites hold scripts to a few MiB).
pub const MAX_COMMAND_BYTES: usize = 100_000;

/// How a Slurm runner runs its jobs.
#[derive(Debug, Clone)]
pub struct SlurmConfig {
    /// The partition (`None`: the cluster's default).
    pub partition: Option<String>,
    /// More `sbatch` arguments for every job (`--account`, `--qos`,
    /// `--time`), as the operator gave them.
    pub args: Vec<String>,
    /// Where the jobs' output files and exit records are written: a
    /// directory this machine and the compute nodes share.
    pub dir: PathBuf,
    /// What each job's capture keeps in memory and spills.
    pub limits: OutputLimits,
    /// All spill files of this runner's jobs together.
    pub spill_total_bytes: u64,
    /// Whether jobs still running when the host shuts down are left on the
    /// cluster (`--runner-jobs outlive`) instead of cancelled.
    pub outlive: bool,
    /// Where the spill directory is made (`None`: the system's temporary
    /// directory).
    pub spill_parent: Option<PathBuf>,
    /// The working directory of a job that names none, and what a relative
    /// one resolves against (`None`: this host's own, as `sbatch` takes it).
    pub default_workdir: Option<PathBuf>,
    /// A durable session's directory, where each job keeps a file that
    /// says where its output is, so that a host that restarts takes the
    /// job on again ([`SlurmRunner::resume`]); `None`: a job is watched
    /// only by the host that started it.
    pub keep_logs: Option<PathBuf>,
}

/// Runs the start tool's commands as batch jobs of a Slurm cluster (see the
/// module docs). Cheap to clone.
#[derive(Clone)]
pub struct SlurmRunner {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    partition: Option<String>,
    registry: JobRegistry,
    config: SlurmConfig,
    /// Our job names' prefix: one per runner, so that two hosts sharing a
    /// directory never take each other's files.
    prefix: String,
    kept: super::shared::Kept<Remote>,
    names: Names,
    poller: poll::Poller,
}

/// What the registry's hooks, the job's control and the runner's shutdown
/// share with a job's task.
struct Remote {
    /// Asked to stop (a kill, the session's end, the host's shutdown).
    stop: CancellationToken,
    /// Let go of: its session or host ended and the runner lets jobs outlive
    /// them, so it runs on unwatched.
    let_go: CancellationToken,
    /// Slurm's job id once it is submitted.
    engine_id: std::sync::OnceLock<String>,
    /// True once the job's task has ended.
    finished: tokio::sync::watch::Sender<bool>,
    /// True once its submit has answered (or its task ended): a durable
    /// session records its Slurm id then.
    submitted: tokio::sync::watch::Sender<bool>,
    /// In a durable session, the file in the session's directory that says
    /// where the job's output files are (see `durable`).
    marker: Option<PathBuf>,
}

impl Remote {
    fn new(marker: Option<PathBuf>) -> Arc<Remote> {
        Arc::new(Remote {
            stop: CancellationToken::new(),
            let_go: CancellationToken::new(),
            engine_id: std::sync::OnceLock::new(),
            finished: tokio::sync::watch::channel(false).0,
            submitted: tokio::sync::watch::channel(false).0,
            marker,
        })
    }

    fn durable(&self) -> bool {
        self.marker.is_some()
    }
}

impl SlurmRunner {
    /// A runner named `name` for the cluster this machine's `sbatch`
    /// submits to. Contacts nothing: each start checks its job with
    /// `sbatch --test-only` first.
    ///
    /// # Errors
    ///
    /// The output directory or the spill directory cannot be made.
    pub fn new(
        name: &str,
        registry: JobRegistry,
        mut config: SlurmConfig,
        names: Names,
    ) -> Result<SlurmRunner, String> {
        // Slurm reads a relative --output against the job's --chdir, this
        // host against its own directory: one absolute path for both.
        // Every Slurm command here asks the local cluster: a job sent to
        // another would read lost at once and run on unwatched.
        if let Some(arg) = config.args.iter().find(|a| {
            a.starts_with("--clusters") || a.starts_with("--cluster=") || a.starts_with("-M")
        }) {
            return Err(format!(
                "runner {name}: --slurm-arg {arg} sends jobs to another cluster, which this runner cannot follow; run jobs-host where that cluster is the local one"
            ));
        }
        config.dir = std::path::absolute(&config.dir).map_err(|e| {
            format!(
                "runner {name}: the Slurm output directory {}: {e}",
                config.dir.display()
            )
        })?;
        std::fs::create_dir_all(&config.dir).map_err(|e| {
            format!(
                "runner {name}: cannot make the Slurm output directory {}: {e}",
                config.dir.display()
            )
        })?;
        let kept = super::shared::Kept::new(
            name,
            config.spill_parent.as_deref(),
            config.spill_total_bytes,
        )?;
        Ok(SlurmRunner {
            inner: Arc::new(Inner {
                name: name.to_owned(),
                partition: config.partition.clone(),
                registry,
                config,
                prefix: format!("jobshost-{}", super::random_hex()),
                kept,
                names,
                poller: poll::Poller::new(),
            }),
        })
    }

    /// The runner's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    fn start_unnamed(
        &self,
        owner: Option<Owner>,
        request: CommandRequest,
    ) -> Result<String, StartError> {
        refuse_what_slurm_lacks(&self.inner.name, &request)?;
        let inner = &self.inner;
        let spec = JobStart {
            kind: crate::bash::BASH_KIND.to_owned(),
            label: request.command.clone(),
            output_limit_bytes: None,
            owner,
            sandbox: None,
        };
        let (id_tx, id_rx) = tokio::sync::oneshot::channel();
        let id = inner.registry.start(spec, || self.hooks(request, id_rx))?;
        let _ = id_tx.send(id.clone());
        Ok(id)
    }

    fn hooks(
        &self,
        request: CommandRequest,
        id: tokio::sync::oneshot::Receiver<String>,
    ) -> Result<JobHooks, String> {
        let inner = &self.inner;
        let marker = match &inner.config.keep_logs {
            Some(dir) => Some(durable::make_marker(dir).map_err(|e| {
                format!(
                    "runner {}: cannot keep the job's place in {}: {e}",
                    inner.name,
                    dir.display()
                )
            })?),
            None => None,
        };
        let capture = self.new_capture();
        let placement = Placement::new(format!("{}: submitting", inner.name));
        let remote = Remote::new(marker);
        let life = job::life(job::Job {
            runner: inner.clone(),
            remote: remote.clone(),
            capture: capture.clone(),
            placement: placement.clone(),
            request,
            id,
        });
        Ok(self.watch(remote, capture, placement, life))
    }

    /// A new capture in this runner's spill directory.
    fn new_capture(&self) -> SharedCapture {
        self.inner.kept.capture(self.inner.config.limits)
    }

    /// The registry's hooks of a job whose task runs `life`.
    fn watch(
        &self,
        remote: Arc<Remote>,
        capture: SharedCapture,
        placement: Placement,
        life: impl std::future::Future<Output = crate::registry::JobOutcome> + Send + 'static,
    ) -> JobHooks {
        let inner = &self.inner;
        inner.kept.keep(&remote);
        let task = {
            let remote = remote.clone();
            let capture = capture.clone();
            tokio::spawn(async move {
                let outcome = life.await;
                capture.close();
                remote.submitted.send_replace(true);
                remote.finished.send_replace(true);
                outcome
            })
        };
        super::shared::job_hooks(
            task,
            remote.stop.clone(),
            remote.let_go.clone(),
            inner.config.outlive,
            capture,
            Arc::new(SlurmControl {
                runner: inner.name.clone(),
                remote,
            }),
            placement,
        )
    }
}

impl CommandProducer for SlurmRunner {
    fn max_command_bytes(&self) -> usize {
        MAX_COMMAND_BYTES
    }

    fn start(&self, owner: Option<Owner>, request: CommandRequest) -> Result<Started, StartError> {
        let name = request.name.clone();
        self.inner
            .names
            .start(&self.inner.registry, owner.as_ref(), name, || {
                self.start_unnamed(owner.clone(), request)
            })
    }

    /// The job as it would be submitted, checked by `sbatch --test-only`
    /// (the partition, the account, the resources); no job is made when
    /// Slurm refuses it.
    fn preflight(&self, request: &CommandRequest) -> Option<Preflight<'_>> {
        let inner = &self.inner;
        let files = job::Files {
            stem: inner.config.dir.join(format!("{}-check", inner.prefix)),
        };
        let (args, script) = job::batch(inner, "check", &files, request);
        Some(Box::pin(async move {
            cli::sbatch_test(&args, &script)
                .await
                .map_err(|e| StartError::Producer(format!("runner {}: {e}", inner.name)))
        }))
    }

    /// Cancels every job still on the cluster (unless the runner lets them
    /// outlive the host) and waits until each has ended, at most `grace`
    /// and the time a cancel takes.
    fn shutdown(
        &self,
        grace: Duration,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            let live = self.inner.kept.running(|r| *r.finished.borrow());
            let jobs: Vec<super::shared::Live<'_>> = live
                .iter()
                .map(|r| super::shared::Live {
                    stop: &r.stop,
                    finished: &r.finished,
                    engine_id: r.engine_id.get(),
                })
                .collect();
            let (name, outlive) = (&self.inner.name, self.inner.config.outlive);
            super::shared::stop_all(name, outlive, &jobs, grace + Duration::from_secs(10)).await;
        })
    }
}

/// What a Slurm batch job cannot have, refused in words before anything
/// runs: what no engine job has, a NUL in its command, and resources
/// other than Slurm's own three.
fn refuse_what_slurm_lacks(runner: &str, request: &CommandRequest) -> Result<(), StartError> {
    super::shared::refuse_what_engines_lack(runner, request, MAX_COMMAND_BYTES)?;
    if request.command.contains('\0') {
        return Err(StartError::Producer(
            "invalid command: a NUL byte cannot reach a batch script".to_owned(),
        ));
    }
    if let Some((key, _)) = request.env.iter().find(|(key, _)| !env_name(key)) {
        return Err(StartError::Producer(format!(
            "invalid env: {key:?} is not a variable's name"
        )));
    }
    // Each variable is one string of the relay's exec (at most 128 KiB);
    // all of them and the command share its environment.
    let total: usize = request.env.iter().map(|(k, v)| k.len() + v.len() + 2).sum();
    if let Some((key, _)) = request.env.iter().find(|(_, v)| v.contains('\0')) {
        return Err(StartError::Producer(format!(
            "invalid env: {key} holds a NUL byte"
        )));
    }
    if total + request.command.len() > MAX_COMMAND_BYTES {
        return Err(StartError::Producer(format!(
            "invalid env: the command and its environment are {} bytes, more than the limit of {MAX_COMMAND_BYTES} bytes",
            total + request.command.len()
        )));
    }
    if let Some(resources) = &request.resources
        && !resources.custom.is_empty()
    {
        return Err(StartError::Producer(format!(
            "invalid resources: runner \"{runner}\" takes cpus, gpus and memory_bytes; ask for other resources with --slurm-arg (for example --slurm-arg=--gres=NAME:N)"
        )));
    }
    Ok(())
}

/// Whether `key` can be a shell variable's name (`[A-Za-z_][A-Za-z0-9_]*`):
/// it goes into the batch script as it is.
fn env_name(key: &str) -> bool {
    let mut bytes = key.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// What a Slurm job offers the extensions: its signals and its stop.
struct SlurmControl {
    runner: String,
    remote: Arc<Remote>,
}

impl JobControl for SlurmControl {
    fn write_input(&self, _data: &[u8], _close: bool) -> Result<u64, ControlError> {
        Err(ControlError::NoInput)
    }

    /// Sends `signal` with `scancel` and answers what it says: the signals a process can catch go to the batch shell, whose
    /// relay passes them on to the command's group once; SIGKILL, SIGSTOP
    /// and SIGCONT go to every process of the job.
    fn signal(&self, signal: JobSignal) -> Result<(), ControlError> {
        if *self.remote.finished.borrow() {
            return Err(ControlError::Failed(
                "the job has already finished".to_owned(),
            ));
        }
        if self.remote.engine_id.get().is_none() {
            return Err(ControlError::Failed(format!(
                "the job is not on runner \"{}\" yet; try again once job_list shows its Slurm job id",
                self.runner
            )));
        }
        let how = match signal {
            JobSignal::Term => Cancel::Batch("TERM"),
            JobSignal::Int => Cancel::Batch("INT"),
            JobSignal::Hup => Cancel::Batch("HUP"),
            JobSignal::Kill => Cancel::Full("KILL"),
            JobSignal::Stop => Cancel::Full("STOP"),
            JobSignal::Cont => Cancel::Full("CONT"),
        };
        let id = self.remote.engine_id.get().cloned().unwrap_or_default();
        // scancel answers in milliseconds; its time limit bounds the rest,
        // off the runtime's async workers where it has others.
        let send = || cli::scancel_now(&id, how);
        let multi = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        if multi {
            tokio::task::block_in_place(send)
        } else {
            send()
        }
        .map_err(|e| ControlError::Failed(format!("runner {}: {e}", self.runner)))
    }

    fn ports(&self) -> Vec<ListeningPort> {
        Vec::new()
    }

    fn durable(&self) -> bool {
        self.remote.durable()
    }

    fn files(&self) -> Option<PathBuf> {
        self.remote.marker.clone()
    }

    fn spawned(&self) -> Option<tokio::sync::watch::Receiver<bool>> {
        Some(self.remote.submitted.subscribe())
    }

    fn remote(&self) -> Option<(String, Option<String>)> {
        Some((self.runner.clone(), self.remote.engine_id.get().cloned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_variables_name_reaches_the_batch_script() {
        for good in ["A", "_x", "PATH_2"] {
            assert!(env_name(good), "{good}");
        }
        for bad in ["", "2A", "A-B", "A=B", "A;rm -rf ~", "A B", "é"] {
            assert!(!env_name(bad), "{bad}");
        }
    }
}
