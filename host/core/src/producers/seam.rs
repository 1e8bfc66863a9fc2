//! The seam between the registry and whatever produces jobs: what a
//! producer provides, and what the registry gives back. The shell producer
//! ([`crate::bash`]) and in-process work ([`crate::inproc`]) stand on it; a
//! runner that runs jobs on a cluster engine is a folder beside them that
//! implements the same, and touches nothing else.
//!
//! # What a producer provides
//!
//! - **A start.** It asks [`JobRegistry::start`] with a [`JobStart`] (kind,
//!   label, owner, sandbox) and a closure that starts the work; the
//!   registry runs the contract's preflight (a controller, a live owner, the
//!   owner's limit) first and calls the closure only then, without its lock.
//!   The closure answers the job's [`JobHooks`], or the producer's refusal in
//!   the words the model reads.
//! - **Output into a capture.** A stream job's bytes go into a
//!   [`SharedCapture`] (`JobHooks::capture`), per stream, as they arrive:
//!   the registry reads, excerpts, pages, searches and watches it, caps what
//!   the model reads, and keeps the read cursor. A producer never keeps a
//!   cursor of its own.
//! - **Signal or stop.** `JobHooks::cancel` asks for a stop (idempotent;
//!   the job then settles `killed` once its work has actually stopped), and
//!   `JobHooks::control` serves what only the producer can: input, signals,
//!   listening ports, a terminal's size ([`JobControl`]).
//! - **Its end.** `JobHooks::done` resolves once the producer has let go of
//!   everything the job held, with its [`JobOutcome`]: `completed` (its exit
//!   code in the detail), `failed` with why, or `killed`. It resolves once,
//!   whatever happens; the registry records the first end and no other.
//! - **Re-adoption.** A job that outlived its host (a durable record) comes
//!   back with [`JobRegistry::adopt`]: its old id and start time, the same
//!   hooks, and whether its end was already seen, so no notice is sent twice.
//!
//! # What the registry gives back
//!
//! The job's id (`<kind>-<n>`), calls of its hooks (a model's kill, a
//! session's end, the host's teardown), reads of its capture, and its
//! settlement: waits released, listeners told, the owner's notice decided
//! and delivered exactly once.
//!
//! # Producers the start tool reaches
//!
//! The model's start tool names a command. A producer that runs commands
//! implements [`CommandProducer`], which the session calls with the checked
//! [`CommandRequest`]: the shell on this machine, or a runner on an engine.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

pub use crate::bash::{BashRequest as CommandRequest, Started};
pub use crate::capture::SharedCapture;
pub use crate::registry::control::{ControlError, JobControl, JobSignal};
pub use crate::registry::{
    CancelHook, DoneFuture, JobHooks, JobOutcome, JobRegistry, JobStart, OutcomeStatus, StartError,
};

use crate::owner::Owner;
pub use crate::plugin::Preflight;

/// A producer of the start tool's commands: it starts each as a job of the
/// registry (see the module docs) and stops them all when the host goes.
pub trait CommandProducer: Send + Sync {
    /// The longest command it takes, in bytes: the guest refuses a longer
    /// one before it is copied.
    fn max_command_bytes(&self) -> usize;

    /// Starts `request` for `owner`, or answers the live job of the same
    /// owner that holds the requested name.
    ///
    /// # Errors
    ///
    /// The registry's preflight, or the producer's own refusal (in the words
    /// the model reads).
    fn start(&self, owner: Option<Owner>, request: CommandRequest) -> Result<Started, StartError>;

    /// What must hold before `request` is started, asked without blocking
    /// the start (a runner asks its engine whether it answers and takes its
    /// token); `None`: nothing, the start alone decides.
    fn preflight(&self, _request: &CommandRequest) -> Option<Preflight<'_>> {
        None
    }

    /// Stops every job it runs, now: each is asked to stop, and whatever is
    /// left after `grace` is killed. For the host's shutdown.
    fn shutdown(&self, grace: Duration) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;
}

impl CommandProducer for crate::bash::BashProducer {
    fn max_command_bytes(&self) -> usize {
        crate::bash::BashProducer::max_command_bytes(self)
    }

    fn start(&self, owner: Option<Owner>, request: CommandRequest) -> Result<Started, StartError> {
        self.start_named(owner, request)
    }

    fn shutdown(&self, grace: Duration) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(crate::bash::BashProducer::shutdown(self, grace))
    }
}

/// The start tool's commands routed by their runner: to this host's producer
/// when they name none, else to the runner of that name.
pub struct Routed {
    local: std::sync::Arc<dyn CommandProducer>,
    runners: Vec<(String, std::sync::Arc<dyn CommandProducer>)>,
}

impl Routed {
    /// Commands that name no runner go to `local`.
    pub fn new(local: impl CommandProducer + 'static) -> Routed {
        Routed {
            local: std::sync::Arc::new(local),
            runners: Vec::new(),
        }
    }

    /// Commands that name `name` go to `runner`.
    pub fn with_runner(
        mut self,
        name: impl Into<String>,
        runner: std::sync::Arc<dyn CommandProducer>,
    ) -> Routed {
        self.runners.push((name.into(), runner));
        self
    }

    /// The runners' names, in the order they were added.
    pub fn runner_names(&self) -> Vec<String> {
        self.runners.iter().map(|(name, _)| name.clone()).collect()
    }
}

impl CommandProducer for Routed {
    fn max_command_bytes(&self) -> usize {
        self.local.max_command_bytes()
    }

    fn start(&self, owner: Option<Owner>, request: CommandRequest) -> Result<Started, StartError> {
        let Some(name) = request.runner.clone() else {
            return self.local.start(owner, request);
        };
        match self.runners.iter().find(|(n, _)| *n == name) {
            Some((_, runner)) => runner.start(owner, request),
            // The guest offers only the mount's runners; a host's own
            // caller may still name another.
            None => Err(StartError::Producer(format!(
                "invalid runner: \"{name}\" is not one of this session's runners"
            ))),
        }
    }

    fn preflight(&self, request: &CommandRequest) -> Option<Preflight<'_>> {
        let name = request.runner.as_deref()?;
        let (_, runner) = self.runners.iter().find(|(n, _)| n == name)?;
        runner.preflight(request)
    }

    fn shutdown(&self, grace: Duration) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            let mut all = vec![self.local.shutdown(grace)];
            all.extend(self.runners.iter().map(|(_, r)| r.shutdown(grace)));
            for stopping in all {
                stopping.await;
            }
        })
    }
}
