//! The Ray runner: jobs on a Ray cluster through its dashboard's job API.
//!
//! - [`client`]: the HTTP API (submit, details, stop, logs) and its errors.
//! - [`tail`]: the log's WebSocket tail and our cursor over it.
//! - `job`: one job's life on the engine: its submit, the pump from the
//!   tail into its capture, its status, its stop and its end.
//! - `output`: the log as taken into the capture (the engine's own lines
//!   out, the output limit), and its copy for a job that outlives its host.
//! - `resume`: a job a previous host left on the engine, taken on again.
//!
//! A job runs under a small relay (`relay.py`, run by the engine's own
//! Python) that puts the command in a process group, merges its stderr,
//! keeps bytes that are not UTF-8 from ending Ray's log tail, forwards the
//! engine's stop to the whole group and kills what is left after the grace:
//! Ray's own stop reaches only the processes it saw when it began.

pub mod client;
#[cfg(test)]
mod engine_tests;
mod job;
mod output;
mod resume;
pub mod tail;

pub use super::{RemoteAdopt, Resumed};
pub use output::kept_output;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;

use self::client::{EngineError, RayClient, Version};
use crate::capture::{OutputLimits, SharedCapture};
use crate::owner::Owner;
use crate::producer::{
    CommandProducer, CommandRequest, ControlError, JobControl, JobSignal, Preflight, Started,
};
use crate::producers::names::Names;
use crate::registry::control::ListeningPort;
use crate::registry::{JobHooks, JobRegistry, JobStart, Placement, StartError};

/// The longest command a Ray job takes, in bytes: it travels in one
/// environment variable of the job, which Linux holds to 128 KiB.
pub const MAX_COMMAND_BYTES: usize = 100_000;

/// How a Ray runner runs its jobs.
#[derive(Debug, Clone)]
pub struct RayConfig {
    /// How long a stopped job's processes have between SIGTERM and SIGKILL
    /// (the relay's grace; the engine's `RAY_JOB_STOP_WAIT_TIME_S` is a
    /// little longer).
    pub grace: Duration,
    /// What each job's capture keeps in memory and spills.
    pub limits: OutputLimits,
    /// All spill files of this runner's jobs together.
    pub spill_total_bytes: u64,
    /// Whether jobs still running when the host shuts down are left on the
    /// engine (`--runner-jobs outlive`) instead of stopped.
    pub outlive: bool,
    /// Where the spill directory is made (`None`: the system's temporary
    /// directory). The shell producer's own spill directory is a good one:
    /// its watchdog removes it even when the host is killed.
    pub spill_parent: Option<std::path::PathBuf>,
    /// Where each job keeps a copy of its log as it is taken (a durable
    /// session's directory), so that a host that restarts takes the job on
    /// again from where it was ([`RayRunner::resume`]); `None`: a job is
    /// watched only by the host that started it.
    pub keep_logs: Option<std::path::PathBuf>,
}

impl Default for RayConfig {
    fn default() -> RayConfig {
        RayConfig {
            grace: Duration::from_secs(3),
            limits: OutputLimits::default(),
            spill_total_bytes: 1 << 30,
            outlive: false,
            spill_parent: None,
            keep_logs: None,
        }
    }
}

/// Runs the start tool's commands as jobs of a Ray cluster (see the module
/// docs). Cheap to clone.
#[derive(Clone)]
pub struct RayRunner {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    client: RayClient,
    registry: JobRegistry,
    config: RayConfig,
    /// Our submission ids' prefix: one per runner, so two hosts on one
    /// cluster never take each other's ids.
    prefix: String,
    kept: super::shared::Kept<Remote>,
    names: Names,
    version: OnceCell<Version>,
}

/// What the registry's hooks and the runner's shutdown share with a job's
/// task.
struct Remote {
    /// Asked to stop (a kill, a signal that stops, the host's shutdown).
    stop: CancellationToken,
    /// Let go of: its session or host ended and the runner lets jobs outlive
    /// them (`--runner-jobs outlive`), so it runs on unwatched.
    let_go: CancellationToken,
    /// The engine's id once it is chosen.
    submission_id: std::sync::OnceLock<String>,
    /// True once the job's task has ended.
    finished: tokio::sync::watch::Sender<bool>,
    /// The copy of its log, for a job that outlives its host.
    copy: Option<std::path::PathBuf>,
}

impl Remote {
    fn new(copy: Option<std::path::PathBuf>) -> Arc<Remote> {
        let (finished, _) = tokio::sync::watch::channel(false);
        Arc::new(Remote {
            stop: CancellationToken::new(),
            let_go: CancellationToken::new(),
            submission_id: std::sync::OnceLock::new(),
            finished,
            copy,
        })
    }
}

impl RayRunner {
    /// A runner named `name` for the Ray head whose dashboard is at
    /// `address`, with the token Ray's own
    /// clients would take ([`super::ray_token`]). Contacts nothing: the
    /// first start asks the engine whether it answers.
    ///
    /// # Errors
    ///
    /// A token file that cannot be read, a spill directory that cannot be
    /// made.
    pub fn new(
        name: &str,
        address: &str,
        registry: JobRegistry,
        config: RayConfig,
        names: Names,
    ) -> Result<RayRunner, String> {
        let token = super::ray_token()?;
        let client = RayClient::new(address, token)?;
        let kept = super::shared::Kept::new(
            name,
            config.spill_parent.as_deref(),
            config.spill_total_bytes,
        )?;
        Ok(RayRunner {
            inner: Arc::new(Inner {
                name: name.to_owned(),
                client,
                registry,
                config,
                prefix: format!("jobshost-{}", super::random_hex()),
                kept,
                names,
                version: OnceCell::new(),
            }),
        })
    }

    /// The runner's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The client of its engine.
    pub fn client(&self) -> &RayClient {
        &self.inner.client
    }

    /// The prefix of the engine ids of this runner's jobs.
    pub fn submission_prefix(&self) -> &str {
        &self.inner.prefix
    }

    fn start_unnamed(
        &self,
        owner: Option<Owner>,
        request: CommandRequest,
    ) -> Result<String, StartError> {
        refuse_what_the_engine_lacks(&self.inner.name, &request)?;
        let inner = &self.inner;
        let spec = JobStart {
            kind: crate::bash::BASH_KIND.to_owned(),
            label: request.command.clone(),
            output_limit_bytes: None,
            owner,
            sandbox: None,
        };
        let (id_tx, id_rx) = tokio::sync::oneshot::channel();
        let mut made = None;
        let id = inner.registry.start(spec, || {
            let (hooks, remote, placement) = self.hooks(request, id_rx)?;
            made = Some((remote, placement));
            Ok(hooks)
        })?;
        // Named before the start answers, so that a host that records the
        // job records where it runs; the job's task submits once it knows
        // the id too.
        if let Some((remote, placement)) = made {
            let submission_id = format!("{}-{id}", inner.prefix);
            placement.set(format!("{}: {submission_id} submitting", inner.name));
            let _ = remote.submission_id.set(submission_id);
        }
        let _ = id_tx.send(id.clone());
        Ok(id)
    }

    fn hooks(
        &self,
        request: CommandRequest,
        id: tokio::sync::oneshot::Receiver<String>,
    ) -> Result<(JobHooks, Arc<Remote>, Placement), String> {
        let inner = &self.inner;
        let copy = match &inner.config.keep_logs {
            Some(dir) => Some(output::LogCopy::make(dir).map_err(|e| {
                format!(
                    "runner {}: cannot keep the job's log in {}: {e}",
                    inner.name,
                    dir.display()
                )
            })?),
            None => None,
        };
        let capture = self.new_capture();
        let placement = Placement::new(format!("{}: submitting", inner.name));
        let remote = Remote::new(copy.as_ref().map(|c| c.path().to_owned()));
        let life = job::life(job::Job {
            runner: self.inner.clone(),
            remote: remote.clone(),
            capture: capture.clone(),
            placement: placement.clone(),
            request,
            id,
            copy,
        });
        let hooks = self.watch(remote.clone(), capture, placement.clone(), life);
        Ok((hooks, remote, placement))
    }

    /// A new capture in this runner's spill directory.
    fn new_capture(&self) -> SharedCapture {
        self.inner.kept.capture(self.inner.config.limits)
    }

    /// The registry's hooks of a job whose task runs `life`: its stop (or
    /// its letting go), its capture, its controls and its end.
    fn watch(
        &self,
        remote: Arc<Remote>,
        capture: SharedCapture,
        placement: Placement,
        life: impl std::future::Future<Output = crate::registry::JobOutcome> + Send + 'static,
    ) -> JobHooks {
        let inner = &self.inner;
        inner.kept.keep(&remote);
        let task = tokio::spawn(job::run(remote.clone(), capture.clone(), life));
        super::shared::job_hooks(
            task,
            remote.stop.clone(),
            remote.let_go.clone(),
            inner.config.outlive,
            capture,
            Arc::new(RemoteControl {
                runner: inner.name.clone(),
                remote,
            }),
            placement,
        )
    }
}

impl Inner {
    /// The engine's version, asked once it answers and kept.
    async fn version(&self) -> Result<&Version, EngineError> {
        self.version.get_or_try_init(|| self.client.version()).await
    }

    /// A refusal in this runner's name.
    fn refusal(&self, error: &EngineError) -> StartError {
        StartError::Producer(format!("runner {}: {error}", self.name))
    }
}

impl CommandProducer for RayRunner {
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

    /// The engine answers, takes our token, and has what the start asks of
    /// it; no job is made otherwise.
    fn preflight(&self, request: &CommandRequest) -> Option<Preflight<'_>> {
        let wants_memory = request
            .resources
            .as_ref()
            .is_some_and(|r| r.memory_bytes.is_some());
        Some(Box::pin(async move {
            let inner = &self.inner;
            let version = inner.version().await.map_err(|e| inner.refusal(&e))?;
            if wants_memory && !version.has_exit_codes() {
                return Err(StartError::Producer(format!(
                    "invalid resources: memory_bytes needs Ray 2.8 or later; runner {} runs Ray {}",
                    inner.name, version.ray_version
                )));
            }
            inner
                .client
                .check_auth()
                .await
                .map_err(|e| inner.refusal(&e))
        }))
    }

    /// Stops every job still on the engine (unless the runner lets them
    /// outlive the host) and waits until the engine says each has ended, at
    /// most `grace` and the engine's own stop time.
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
                    engine_id: r.submission_id.get(),
                })
                .collect();
            let (name, outlive) = (&self.inner.name, self.inner.config.outlive);
            super::shared::stop_all(name, outlive, &jobs, grace + job::ENGINE_STOP_SLACK * 2).await;
        })
    }
}

/// What a job on Ray cannot have, refused in words before anything runs:
/// what no engine job has, and a working directory (the engine's node has
/// its own).
fn refuse_what_the_engine_lacks(runner: &str, request: &CommandRequest) -> Result<(), StartError> {
    super::shared::refuse_what_engines_lack(runner, request, MAX_COMMAND_BYTES)?;
    if request.workdir.is_some() {
        return Err(super::shared::refusal(runner, "workdir"));
    }
    Ok(())
}

/// What a remote job offers the extensions: a stop, and nothing else.
struct RemoteControl {
    runner: String,
    remote: Arc<Remote>,
}

impl JobControl for RemoteControl {
    fn write_input(&self, _data: &[u8], _close: bool) -> Result<u64, ControlError> {
        Err(ControlError::NoInput)
    }

    fn signal(&self, signal: JobSignal) -> Result<(), ControlError> {
        if *self.remote.finished.borrow() {
            return Err(ControlError::Failed(
                "the job has already finished".to_owned(),
            ));
        }
        match signal {
            JobSignal::Term | JobSignal::Kill | JobSignal::Int => {
                self.remote.stop.cancel();
                Ok(())
            }
            JobSignal::Hup | JobSignal::Stop | JobSignal::Cont => {
                Err(ControlError::Failed(format!(
                    "a job on runner \"{}\" takes no signal but a stop (SIGTERM, SIGINT or SIGKILL)",
                    self.runner
                )))
            }
        }
    }

    fn ports(&self) -> Vec<ListeningPort> {
        Vec::new()
    }

    fn files(&self) -> Option<std::path::PathBuf> {
        self.remote.copy.clone()
    }

    fn durable(&self) -> bool {
        self.remote.copy.is_some()
    }

    fn remote(&self) -> Option<(String, Option<String>)> {
        Some((
            self.runner.clone(),
            self.remote.submission_id.get().cloned(),
        ))
    }
}
