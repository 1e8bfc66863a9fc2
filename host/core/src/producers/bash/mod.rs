//! The background shell producer: `bash -c <command>` as a job.
//!
//! Each command runs non-login, without rc files, in a process group and a
//! container of its own ([`crate::containment`]), with stdin from `/dev/null`, an
//! allowlisted environment and no inherited descriptor beyond 0-2. Output is
//! captured per stream with a bounded tail and a bounded spill file
//! ([`crate::capture`]), under one disk budget per producer. A kill sends SIGTERM to
//! every process of the job and SIGKILL after the grace period; when the leader is
//! gone, whatever is left of the job is killed too, so no process of it outlives
//! it. Background commands have no timeout.
//!
//! The rooms, by lifecycle: `config` (settings and requests), here the
//! producer and the spawn wiring, `exec` (the exec spec: argv, environment,
//! limits), `spawner` and `vfork` (the threads jobs are cloned from and the
//! clone itself), `reaper` (one watcher for every leader's end), `process`
//! (the leader and the job's signal state),
//! `supervisor` (the pumps, limits and the end of a job), `stdin` (the
//! writer of a job's input) and `extras` (the extension calls only a producer
//! can serve).
//!
//! (Over 500 lines: the producer and its spawn wiring, the one function that
//! puts a job's pieces together (container, fence, terminal, durable files,
//! capture, supervisor), which reads in order.)

mod config;
pub mod durable;
mod error;
mod exec;
mod extras;
mod process;
#[cfg(feature = "runners")]
pub(crate) use process::signal_name;
mod reaper;
mod spawner;
mod stdin;
mod supervisor;
mod trim;

pub use config::{
    BASH_KIND, BashConfig, BashRequest, DEFAULT_GRACE, DEFAULT_MAX_COMMAND_BYTES,
    DEFAULT_SPILL_TOTAL_BYTES, DurableJobs, JobLimits, MAX_NAME_BYTES, PASSED_ENV, Started,
};
pub use durable::adopt::{AdoptRequest, Adopted, process_start_time};
pub use durable::job_file::{JobEnd, file_in_use, read_frames, recorded_monitor};
pub use durable::launch::MONITOR_COMMAND;
pub use durable::monitor::run_monitor;
pub use durable::spare::SpareFiles;
pub use durable::zygote::{ZYGOTE_COMMAND, run_zygote};
use error::SpawnError;
pub use stdin::MAX_PENDING_INPUT_BYTES;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::sync::Notify;

use crate::capture::SharedCapture;
use crate::capture::SpillBudget;
use crate::containment::{self, ActiveMode, Containment};
use crate::owner::Owner;
use crate::registry::{JobHooks, JobRegistry, JobStart, StartError};
use crate::sync::{LazyWatch, lock};
use exec::{raise_open_file_limit, resolve_in_path};
use extras::BashControl;
use process::{ControlState, ProcessControl};
use spawner::Spawner;
use stdin::{InputState, InputWriter};
use supervisor::Supervisor;

/// Starts shell commands as background jobs in a registry.
#[derive(Clone)]
pub struct BashProducer {
    inner: Arc<Inner>,
}

/// Everything a producer shares with its clones. Field order is drop order: the
/// containment (which kills what is left and signals the watchdog) goes before
/// the spill directory.
struct Inner {
    registry: JobRegistry,
    config: BashConfig,
    shell: PathBuf,
    spawner: Arc<Spawner>,
    /// The threads network-off fenced jobs are spawned from, started with
    /// the first such job; `None` inside when they could not be started
    /// (such jobs then come from `spawner`, taking every fence step
    /// themselves).
    fenced_spawner: std::sync::OnceLock<Option<Arc<Spawner>>>,
    /// Watches the ends of the leaders spawned here (not those a monitors'
    /// parent forks, which are not our children).
    reaper: Arc<reaper::Reaper>,
    live: Mutex<LiveJobs>,
    budget: Arc<SpillBudget>,
    next_spawn: AtomicU64,
    containment: Containment,
    /// Live names per owner session (`None`: unowned) to job ids.
    names: crate::producers::names::Names,
    handle: tokio::runtime::Handle,
    /// The jobs' fence: made at start when the session has a sandbox, else
    /// once a job asks for one.
    fence: std::sync::OnceLock<Arc<crate::fence::Fence>>,
    spill_dir: tempfile::TempDir,
    trim: Arc<trim::Trim>,
}

/// The producer's jobs, for its shutdown: those the registry dropped are
/// pruned now and then, not at every start (a scan of every live job per
/// start made a storm quadratic in the jobs alive).
#[derive(Default)]
struct LiveJobs {
    jobs: Vec<Weak<ProcessControl>>,
    /// The length at which the next start prunes: twice what was left
    /// after the last prune, so each entry is scanned a bounded number of
    /// times on average, and the list holds at most about twice the jobs
    /// alive.
    prune_at: usize,
}

impl LiveJobs {
    fn push(&mut self, control: &Arc<ProcessControl>) {
        if self.jobs.len() >= self.prune_at {
            self.jobs.retain(|w| w.strong_count() > 0);
            self.prune_at = (self.jobs.len() * 2).max(64);
        }
        self.jobs.push(Arc::downgrade(control));
    }
}

impl BashProducer {
    /// The longest command this producer starts, in bytes.
    pub fn max_command_bytes(&self) -> usize {
        self.inner.config.max_command_bytes
    }

    /// A producer for `registry`. Spill files go to a private (0700) directory
    /// that is removed when the last clone of the producer is dropped (or, if the
    /// host dies first, by its watchdog). Sets up containment (see
    /// [`crate::containment`]) and makes the host process non-dumpable.
    ///
    /// # Errors
    ///
    /// When the spill directory, the spawner threads or the requested
    /// containment cannot be set up, or when called outside a tokio runtime.
    pub fn new(registry: JobRegistry, config: BashConfig) -> std::io::Result<BashProducer> {
        let handle = tokio::runtime::Handle::try_current().map_err(std::io::Error::other)?;
        let mut spill = tempfile::Builder::new();
        spill
            .prefix("jobs-host-")
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700));
        let spill_dir = match (&config.durable, config.fenced_spill_parent.as_deref()) {
            // Jobs that outlive the host keep their temporary directories
            // (in the spill directory) where the next host finds them.
            (Some(durable), _) => spill.tempdir_in(&durable.dir)?,
            // A full or read-only cache leaves it where it always was.
            (None, Some(parent)) if !config.sandbox.is_open() && private_to_us(parent) => {
                spill.tempdir_in(parent).or_else(|_| spill.tempdir())?
            }
            _ => spill.tempdir()?,
        };
        let shell = resolve_in_path(&config.shell);
        let containment = Containment::new(
            config.containment,
            &shell,
            spill_dir.path(),
            config.durable.is_none(),
        )?;
        raise_open_file_limit();
        let fence = std::sync::OnceLock::new();
        if !config.sandbox.is_open() {
            let _ = fence.set(make_fence(&config, spill_dir.path(), &shell));
        }
        Ok(BashProducer {
            inner: Arc::new(Inner {
                registry,
                spawner: Spawner::start()?,
                fenced_spawner: std::sync::OnceLock::new(),
                reaper: Arc::new(reaper::Reaper::start(&handle)?),
                names: crate::producers::names::Names::new(),
                handle,
                shell,
                live: Mutex::new(LiveJobs::default()),
                budget: SpillBudget::new(config.spill_total_bytes),
                next_spawn: AtomicU64::new(1),
                containment,
                fence,
                spill_dir,
                trim: Arc::default(),
                config,
            }),
        })
    }

    /// The job names this producer holds, to share with a runner routed
    /// beside it, so a name is one job wherever it runs.
    pub fn names(&self) -> crate::producers::names::Names {
        self.inner.names.clone()
    }

    /// The directory spill files are written to.
    pub fn spill_dir(&self) -> &Path {
        self.inner.spill_dir.path()
    }

    /// The fence jobs run in and what of it this kernel enforces; `None`
    /// when jobs run with full authority.
    pub fn sandbox(&self) -> Option<(&crate::fence::FencePolicy, crate::fence::FenceSupport)> {
        self.inner
            .fence
            .get()
            .map(|fence| (fence.policy(), fence.support()))
    }

    /// The containment mode in use: `cgroup` or `fallback`.
    pub fn containment_mode(&self) -> &ActiveMode {
        self.inner.containment.mode()
    }

    /// Bytes of spill files on disk now.
    pub fn spill_bytes(&self) -> u64 {
        self.inner.budget.used()
    }

    /// Starts `request` for `owner` and returns the job id.
    ///
    /// # Errors
    ///
    /// A blank or oversized command, a working directory that does not exist or
    /// is not a directory, a command that cannot be a process's argument (a NUL
    /// byte), or a [`StartError`] from the registry's preflight. Nothing is
    /// registered and no process is left. The spawn itself happens after the
    /// answer; when it fails, the job settles `killed before exit` and its
    /// stderr says `spawn failed: <error>`.
    pub fn start(&self, owner: Option<Owner>, request: BashRequest) -> Result<String, StartError> {
        self.start_named(owner, request)
            .map(|started| match started {
                Started::New(id) | Started::Existing(id) => id,
            })
    }

    /// [`BashProducer::start`], saying whether the request's name was held by
    /// a live job of the same owner (which is then answered instead).
    ///
    /// # Errors
    ///
    /// As [`BashProducer::start`]; a blank name, or one longer than
    /// [`MAX_NAME_BYTES`].
    pub fn start_named(
        &self,
        owner: Option<Owner>,
        request: BashRequest,
    ) -> Result<Started, StartError> {
        if let Some(runner) = &request.runner {
            return Err(StartError::Producer(format!(
                "invalid runner: the shell producer runs jobs on this host, not on \"{runner}\""
            )));
        }
        let name = request.name.clone();
        self.inner
            .names
            .start(&self.inner.registry, owner.as_ref(), name, || {
                self.start_unnamed(owner.clone(), request)
            })
    }

    fn start_unnamed(
        &self,
        owner: Option<Owner>,
        request: BashRequest,
    ) -> Result<String, StartError> {
        if request.command.trim().is_empty() {
            return Err(StartError::Producer(
                "invalid command: expected a non-blank string".to_owned(),
            ));
        }
        let max = self.inner.config.max_command_bytes;
        if request.command.len() > max {
            return Err(StartError::Producer(format!(
                "invalid command: {} bytes is more than the limit of {max} bytes",
                request.command.len()
            )));
        }
        let dir = self.workdir(&request);
        if let Some(dir) = &dir {
            match std::fs::metadata(dir) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    return Err(StartError::Producer(format!(
                        "invalid workdir: {} is not a directory",
                        dir.display()
                    )));
                }
                Err(e) => {
                    return Err(StartError::Producer(format!(
                        "invalid workdir: {}: {e}",
                        dir.display()
                    )));
                }
            }
        }
        // The job's sandbox: what its start asked for, else the session's;
        // never wider than the session's, whoever asked.
        let session = self.inner.config.sandbox.sandbox();
        let sandbox = request.sandbox.clone().unwrap_or_else(|| session.clone());
        if !sandbox.within(&session) {
            return Err(StartError::Producer(format!(
                "invalid sandbox: {} is wider than this session's sandbox ({})",
                sandbox.describe(),
                session.describe()
            )));
        }
        let sandbox = (!sandbox.is_open()).then_some(sandbox);
        // What the job's status shows: the part this kernel enforces (the
        // rest is named at its end).
        let shown = sandbox
            .as_ref()
            .map(|job| self.inner.fence().support_for(job).enforced(job))
            .filter(|shown| !shown.is_open());
        let spec = JobStart {
            kind: BASH_KIND.to_owned(),
            label: request.command.clone(),
            output_limit_bytes: None,
            owner,
            sandbox: shown,
        };
        self.inner.registry.start(spec, || {
            // The registry keeps the words the model reads.
            self.spawn(&request, dir, sandbox.as_ref())
                .map_err(|e| e.to_string())
        })
    }

    /// Stops every job of this producer now: SIGTERM to each whole tree, SIGKILL
    /// to whatever is left after `grace`, then a last sweep. For host shutdown;
    /// the jobs then settle as killed.
    pub async fn shutdown(&self, grace: Duration) {
        let live: Vec<Arc<ProcessControl>> = lock(&self.inner.live)
            .jobs
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        for control in &live {
            control.request_kill(Signal::SIGTERM);
        }
        let all_exited = async {
            for control in &live {
                let mut rx = control.exited.subscribe();
                let _ = rx.wait_for(|exited| *exited).await;
            }
        };
        let _ = tokio::time::timeout(grace, all_exited).await;
        for control in &live {
            control.signal(Signal::SIGKILL);
        }
        let inner = self.inner.clone();
        let _ = tokio::task::spawn_blocking(move || inner.containment.kill_everything()).await;
    }

    fn workdir(&self, request: &BashRequest) -> Option<PathBuf> {
        let base = self.inner.config.default_workdir.clone();
        match (&request.workdir, base) {
            (Some(dir), Some(base)) => Some(base.join(dir)),
            (Some(dir), None) => Some(dir.clone()),
            (None, base) => base,
        }
    }

    /// Registers what a job needs and hands its spawn to a spawner thread: the
    /// start answers without waiting for the leader to exist (as a shell's `&`
    /// does). A spawn that fails there settles the job `killed` (`killed before
    /// exit`) with `spawn failed: <error>` as its stderr, as the contract has it.
    fn spawn(
        &self,
        request: &BashRequest,
        dir: Option<PathBuf>,
        sandbox: Option<&crate::fence::Sandbox>,
    ) -> Result<JobHooks, SpawnError> {
        let inner = &self.inner;
        let n = inner.next_spawn.fetch_add(1, Ordering::Relaxed);
        let container = inner.containment.new_job();
        // A job that joins a mount namespace is moved to its root, and so
        // is a spawner thread that joined one (see `spawn::prelude`): its
        // working directory is entered again, so it must be named, and
        // whole.
        let dir = match (sandbox, dir) {
            (Some(_), None) => std::env::current_dir().ok(),
            (Some(_), Some(dir)) => Some(std::path::absolute(&dir).unwrap_or(dir)),
            (None, dir) => dir,
        };
        let mut fence = match sandbox {
            Some(job) => Some(inner.fence().prepare(dir.as_deref(), job)?),
            None => None,
        };
        // The terminal is made here, before the spawn is handed over, so a
        // resize has its controlling side from the start.
        let pty = request
            .tty
            .map(|size| crate::producers::spawn::Pty::open(size.rows, size.cols))
            .transpose()
            .map_err(SpawnError::Terminal)?;
        let master = pty
            .as_ref()
            .map(|p| p.master.try_clone())
            .transpose()
            .map_err(SpawnError::Terminal)?;
        let mut spec = self.spec(request, dir, &container, fence.as_ref(), pty)?;
        // A job on a terminal has no monitor: its output is the terminal's
        // (it dies with the host, as without durability); nor has a rendered
        // one, whose reads count rendered text, which its file does not hold.
        let files = match (&inner.config.durable, request.tty) {
            (Some(durable), None) if !request.render => {
                let (dir, fds) = durable::launch::prepare(durable, n).map_err(SpawnError::Files)?;
                durable::launch::wrap(&mut spec, durable, inner.config.grace, fds)?;
                Some(dir)
            }
            _ => None,
        };
        // The spawn holds the ruleset and the namespace until it is done;
        // after it, the ruleset is kept only with the job's temporary
        // directory (see `fence::JobTmp`), the namespace by the fence and
        // by the spawner threads that joined it.
        if let Some(fence) = fence.as_mut() {
            spec.hold.extend(fence.ruleset.take());
            spec.hold.extend(fence.mount_ns.take());
        }
        let create = container.creator();
        // A monitor is forked by the monitors' parent where it can be, not
        // exec'd (see `zygote`).
        let monitors_parent = files
            .as_ref()
            .and(inner.config.durable.as_ref())
            .map(|durable| durable.monitor.clone());

        let stem = inner.spill_dir.path().join(format!("spawn-{n}"));
        let budget = Some(inner.budget.clone());
        let capture = match (request.tty, request.render) {
            (Some(size), _) => {
                SharedCapture::with_terminal(&stem, inner.config.limits, budget, size)
            }
            (None, true) => SharedCapture::rendered(&stem, inner.config.limits, budget),
            (None, false) => SharedCapture::new(&stem, inner.config.limits, budget),
        };
        let control = Arc::new(ProcessControl {
            state: Mutex::new(ControlState::default()),
            kill: Notify::new(),
            container: Mutex::new(container),
            exited: LazyWatch::new(false),
            limit_hit: Mutex::new(None),
            none_left: std::sync::atomic::AtomicBool::new(false),
            leader_start: std::sync::OnceLock::new(),
            spawned: LazyWatch::new(false),
            durable: files.is_some(),
        });
        let (stdin_tx, stdin_rx) = tokio::sync::oneshot::channel();
        let extras = Arc::new(BashControl {
            process: control.clone(),
            input: Mutex::new(if request.stdin || request.tty.is_some() {
                InputState::Open(InputWriter::start(
                    stdin_rx,
                    control.exited.subscribe(),
                    &inner.handle,
                    request.tty.is_some(),
                ))
            } else {
                InputState::None
            }),
            files: files.clone(),
            terminal: master.map(|master| extras::TerminalControl {
                master: Mutex::new(Some(master)),
                capture: capture.clone(),
            }),
        });

        let (started_tx, started_rx) = tokio::sync::oneshot::channel();
        let spawned = control.clone();
        let reaper = inner.reaper.clone();
        let spawner = inner.spawner_for(&spec, files.is_some());
        spawner
            .submit(move || {
                let result = create()
                    .map_err(|e| format!("cannot create the job's container: {e}"))
                    .and_then(|()| {
                        containment::start_leader(
                            || match monitors_parent
                                .as_deref()
                                .and_then(|monitor| durable::zygote::spawn(monitor, &spec))
                            {
                                Some(forked) => forked.map(|(started, at)| (started, Some(at))),
                                // The reaper records our own child.
                                None => crate::producers::spawn::spawn_watched(
                                    &spec,
                                    crate::producers::spawn::Watch::Reaper,
                                )
                                .map(|started| (started, None)),
                            },
                            |(s, _)| s.pid,
                        )
                        .map_err(|e| e.to_string())
                    })
                    .map(|(mut started, start_time)| {
                        // Before the record: nothing reaps an unrecorded
                        // leader, so its pid is still its own here.
                        spawned.started(started.pid as u32, start_time);
                        if let Some(stdin) = started.stdin.take() {
                            let _ = stdin_tx.send(stdin);
                        }
                        // Our own child (not one the monitors' parent
                        // forked): the reaper watches it, and it has no
                        // pidfd, one descriptor fewer for every live job.
                        let exit = start_time.is_none().then(|| reaper.record(started.pid));
                        (started, exit)
                    });
                // The job's record may already be gone (a host shutting down);
                // its container then cleans up after the leader.
                let _ = started_tx.send(result);
            })
            .map_err(SpawnError::Spawner)?;
        lock(&inner.live).push(&control);
        inner.trim.after_start(&inner.handle);

        let supervisor = Supervisor {
            capture: capture.clone(),
            control: control.clone(),
            grace: inner.config.grace,
            _spawner: spawner,
            limits: request.limits,
            files,
        };
        // Boxed: this future lives as long as the job, and most jobs have
        // no fence, whose state would take room in every one of them.
        let fenced = inner.fence.get().cloned().zip(fence).map(Box::new);
        let ended_control = control.clone();
        let ended_extras = extras.clone();
        let done = Box::pin(async move {
            let mut outcome = match started_rx.await {
                Ok(Ok((started, exit))) => supervisor.run(started, exit).await,
                Ok(Err(why)) => Box::pin(supervisor.not_started(&why)).await,
                Err(_) => Box::pin(supervisor.not_started("the spawner threads are gone")).await,
            };
            ended_extras.ended();
            if let Some((fence, job)) = fenced.map(|f| *f) {
                // What the fence could not cover (a repository the job made
                // itself, a part this kernel lacks) is named in the job's
                // status, so the model and the person see it.
                let none_left = ended_control.none_left.load(Ordering::Acquire);
                let quick = fence.ends_quickly(&job);
                let end = move || {
                    let note = fence.end_note(&job);
                    fence.release(job, none_left);
                    note
                };
                let note = if quick {
                    // A few system calls: made here, rather than through
                    // two thread hand-offs on the way to the job's end.
                    end()
                } else {
                    tokio::task::spawn_blocking(end)
                        .await
                        .map_err(|e| e.to_string())?
                };
                if let Some(note) = note {
                    outcome.detail = Some(match outcome.detail {
                        Some(detail) => format!("{detail}; {note}"),
                        None => note,
                    });
                }
            }
            Ok(outcome)
        });
        let cancel_control = control;
        Ok(JobHooks {
            cancel: Box::new(move |_reason| {
                cancel_control.request_kill(Signal::SIGTERM);
                Ok(())
            }),
            capture: Some(capture),
            read_output: None,
            output_excerpt: None,
            control: Some(extras),
            placement: None,
            done,
        })
    }
}

impl Inner {
    /// The threads `spec` is spawned from: a network-off fenced job started
    /// here (not through a durable job's monitor, `monitored`) comes from
    /// the threads that took its fence's per-thread steps for it (see
    /// `spawn::prelude`).
    fn spawner_for(&self, spec: &crate::producers::spawn::Spec, monitored: bool) -> Arc<Spawner> {
        let filter = crate::fence::network_off_filter();
        let network_off = spec.setup.sandbox.as_ref().is_some_and(|s| {
            !filter.is_empty() && crate::producers::spawn::prelude::same_filter(&s.seccomp, filter)
        });
        if !network_off || monitored {
            return self.spawner.clone();
        }
        let fenced = self.fenced_spawner.get_or_init(|| {
            Spawner::start_fenced(filter)
                .inspect_err(|e| {
                    tracing::warn!("jobs: no fenced spawner threads ({e}); fenced jobs take every step themselves");
                })
                .ok()
        });
        fenced.clone().unwrap_or_else(|| self.spawner.clone())
    }

    /// The jobs' fence, made the first time a job needs one (a job may ask
    /// for a sandbox in a session that has none).
    fn fence(&self) -> &Arc<crate::fence::Fence> {
        self.fence
            .get_or_init(|| make_fence(&self.config, self.spill_dir.path(), &self.shell))
    }
}

/// Whether `dir` is a directory that belongs to this user and that nobody
/// else can write (so nobody else can move the spill directory made in it).
fn private_to_us(dir: &Path) -> bool {
    dir.is_dir() && crate::fs_trust::private_to_us(dir)
}

/// The fence of a producer configured with `config`: the host's private
/// directories are the spill directory (where jobs' temporary directories
/// live too), `config.private_dirs` and `config.covered_dirs`.
fn make_fence(config: &BashConfig, spill_dir: &Path, shell: &Path) -> Arc<crate::fence::Fence> {
    let mut private = config.private_dirs.clone();
    private.push(spill_dir.to_owned());
    if let Some(durable) = &config.durable {
        private.push(durable.dir.clone());
        private.extend(durable.state_dir.clone());
    }
    Arc::new(crate::fence::Fence::new(
        config.sandbox.clone(),
        &private,
        &config.covered_dirs,
        spill_dir,
        shell,
    ))
}
