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

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::io::unix::AsyncFd;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use super::spawner::Spawner;
use super::vfork;
use crate::capture::{OutputLimits, OutputStream, SharedCapture, SpillBudget};
use crate::containment::{self, ActiveMode, Containment, ContainmentMode, JobContainer};
use crate::owner::Owner;
use crate::registry::control::{ControlError, JobControl, JobSignal, ListeningPort};
use crate::registry::{JobHooks, JobOutcome, JobRegistry, JobStart, OutcomeStatus, StartError};

/// The kind every shell job is registered under.
pub const BASH_KIND: &str = "bash";
/// Default time between SIGTERM and SIGKILL.
pub const DEFAULT_GRACE: Duration = Duration::from_millis(3000);
/// Default largest command accepted, in bytes.
pub const DEFAULT_MAX_COMMAND_BYTES: usize = 64 << 10;
/// Default disk budget for all spill files of one producer.
pub const DEFAULT_SPILL_TOTAL_BYTES: u64 = 512 << 20;
/// Host variables every job gets (when set), besides `LC_*`. Everything else is
/// left out unless the operator passes it on by name.
pub const PASSED_ENV: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "TERM", "TZ", "TMPDIR",
];

/// Settings of the shell producer.
#[derive(Debug, Clone)]
pub struct BashConfig {
    /// Time between SIGTERM and SIGKILL, and how long pipes may stay open after the
    /// leader exits.
    pub grace: Duration,
    /// Capture limits per job.
    pub limits: OutputLimits,
    /// Working directory when a request names none (else the host's own).
    pub default_workdir: Option<PathBuf>,
    /// The shell to run (`bash`, looked up in `PATH` once).
    pub shell: PathBuf,
    /// Host variables passed to jobs besides [`PASSED_ENV`] and `LC_*`.
    pub pass_env: Vec<String>,
    /// Variables set for every job (after the passed ones).
    pub set_env: Vec<(String, String)>,
    /// Largest command accepted, in bytes; a longer one is refused at start.
    pub max_command_bytes: usize,
    /// Disk budget for the spill files of all jobs together.
    pub spill_total_bytes: u64,
    /// How jobs are contained (see [`crate::containment`]).
    pub containment: ContainmentMode,
}

impl Default for BashConfig {
    fn default() -> Self {
        BashConfig {
            grace: DEFAULT_GRACE,
            limits: OutputLimits::default(),
            default_workdir: None,
            shell: PathBuf::from("bash"),
            pass_env: Vec::new(),
            set_env: Vec::new(),
            max_command_bytes: DEFAULT_MAX_COMMAND_BYTES,
            spill_total_bytes: DEFAULT_SPILL_TOTAL_BYTES,
            containment: ContainmentMode::Auto,
        }
    }
}

/// One background command.
#[derive(Debug, Clone, Default)]
pub struct BashRequest {
    /// The command line, run with `bash -c`.
    pub command: String,
    /// Working directory; relative paths resolve against the default.
    pub workdir: Option<PathBuf>,
    /// Extra environment from a trusted caller; applied last.
    pub env: Vec<(String, String)>,
    /// A pipe for stdin the caller can write to (`write_input`), instead of
    /// `/dev/null`.
    pub stdin: bool,
    /// A name: a start whose name is held by a live job of the same owner
    /// answers with that job instead.
    pub name: Option<String>,
    /// Limits on this job (none by default).
    pub limits: JobLimits,
}

/// Limits on one job; `None` is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JobLimits {
    /// Wall-clock milliseconds, then the job is killed.
    pub timeout_ms: Option<u64>,
    /// CPU seconds per process (`RLIMIT_CPU`).
    pub cpu_seconds: Option<u64>,
    /// Address space per process in bytes (`RLIMIT_AS`).
    pub memory_bytes: Option<u64>,
    /// Output bytes (both streams), then the job is killed.
    pub output_bytes: Option<u64>,
}

/// What a start did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Started {
    /// A new job with this id.
    New(String),
    /// The live job that already holds the requested name.
    Existing(String),
}

/// The longest job name accepted, in bytes.
pub const MAX_NAME_BYTES: usize = 128;

/// Characters that reorder displayed text (bidirectional embeddings,
/// overrides and isolates), which a terminal or a UI acts on.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// The most bytes of input a job may have waiting (written, not yet read by
/// the job); a write beyond it is refused whole.
pub const MAX_PENDING_INPUT_BYTES: u64 = 1 << 20;

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
    live: Mutex<Vec<Weak<ProcessControl>>>,
    budget: Arc<SpillBudget>,
    next_spawn: AtomicU64,
    containment: Containment,
    /// Live names per owner session (`None`: unowned) to job ids.
    names: Mutex<std::collections::HashMap<(Option<String>, String), String>>,
    handle: tokio::runtime::Handle,
    spill_dir: tempfile::TempDir,
}

/// The start acknowledgement the model sees.
pub fn started_text(job_id: &str) -> String {
    format!("started background job {job_id}")
}

impl BashProducer {
    /// A producer for `registry`. Spill files go to a private (0700) directory
    /// that is removed when the last clone of the producer is dropped (or, if the
    /// host dies first, by its watchdog). Sets up containment (see
    /// [`crate::containment`]) and makes the host process non-dumpable.
    ///
    /// # Errors
    ///
    /// When the spill directory, the spawner thread or the requested
    /// containment cannot be set up, or when called outside a tokio runtime.
    pub fn new(registry: JobRegistry, config: BashConfig) -> std::io::Result<BashProducer> {
        let handle = tokio::runtime::Handle::try_current().map_err(std::io::Error::other)?;
        let spill_dir = tempfile::Builder::new()
            .prefix("jobs-host-")
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir()?;
        let shell = resolve_in_path(&config.shell);
        let containment = Containment::new(config.containment, &shell, spill_dir.path())?;
        raise_open_file_limit();
        Ok(BashProducer {
            inner: Arc::new(Inner {
                registry,
                spawner: Spawner::start()?,
                names: Mutex::new(std::collections::HashMap::new()),
                handle,
                shell,
                live: Mutex::new(Vec::new()),
                budget: SpillBudget::new(config.spill_total_bytes),
                next_spawn: AtomicU64::new(1),
                containment,
                spill_dir,
                config,
            }),
        })
    }

    /// The directory spill files are written to.
    pub fn spill_dir(&self) -> &Path {
        self.inner.spill_dir.path()
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
        let Some(name) = request.name.clone() else {
            return self.start_unnamed(owner, request).map(Started::New);
        };
        if name.trim().is_empty() {
            return Err(StartError::Producer(
                "invalid name: expected a non-blank string".to_owned(),
            ));
        }
        // A name is shown in every list and status line: it may not move the
        // cursor, recolour a terminal or reorder text (the console escapes job
        // output, but a name is the model's own word, so it is refused).
        if let Some(c) = name.chars().find(|c| c.is_control() || is_bidi_control(*c)) {
            return Err(StartError::Producer(format!(
                "invalid name: it contains the control character U+{:04X}",
                u32::from(c)
            )));
        }
        if name.len() > MAX_NAME_BYTES {
            return Err(StartError::Producer(format!(
                "invalid name: {} bytes is more than the limit of {MAX_NAME_BYTES} bytes",
                name.len()
            )));
        }
        let key = (owner.as_ref().map(|o| o.session_id().to_owned()), name);
        // Held from the lookup to the registration, so two starts of one name
        // cannot both start. Names of jobs that have ended are free again.
        let mut names = lock_any(&self.inner.names);
        let registry = &self.inner.registry;
        names.retain(|_, held| {
            registry
                .inspect(held)
                .is_some_and(|job| !job.status.is_terminal())
        });
        if let Some(id) = names.get(&key) {
            return Ok(Started::Existing(id.clone()));
        }
        let id = self.start_unnamed(owner, request)?;
        names.insert(key, id.clone());
        Ok(Started::New(id))
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
        let spec = JobStart {
            kind: BASH_KIND.to_owned(),
            label: request.command.clone(),
            output_limit_bytes: None,
            owner,
        };
        self.inner
            .registry
            .start(spec, || self.spawn(&request, dir))
    }

    /// Stops every job of this producer now: SIGTERM to each whole tree, SIGKILL
    /// to whatever is left after `grace`, then a last sweep. For host shutdown;
    /// the jobs then settle as killed.
    pub async fn shutdown(&self, grace: Duration) {
        let live: Vec<Arc<ProcessControl>> = lock_any(&self.inner.live)
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
    fn spawn(&self, request: &BashRequest, dir: Option<PathBuf>) -> Result<JobHooks, String> {
        let inner = &self.inner;
        let n = inner.next_spawn.fetch_add(1, Ordering::Relaxed);
        let container = inner
            .containment
            .new_job()
            .map_err(|e| format!("spawn failed: cannot create the job's container: {e}"))?;
        let spec = self.spec(request, dir, &container)?;
        let mut setup = container.pre_exec();
        let create = container.creator();

        let capture = SharedCapture::new(
            &inner.spill_dir.path().join(format!("spawn-{n}")),
            inner.config.limits,
            Some(inner.budget.clone()),
        );
        let (exited, _) = watch::channel(false);
        let control = Arc::new(ProcessControl {
            state: Mutex::new(ControlState::default()),
            kill: Notify::new(),
            container: Mutex::new(container),
            exited,
            limit_hit: Mutex::new(None),
        });
        let (stdin_tx, stdin_rx) = tokio::sync::oneshot::channel();
        let extras = Arc::new(BashControl {
            process: control.clone(),
            input: Mutex::new(if request.stdin {
                InputState::Open(InputWriter::start(
                    stdin_rx,
                    control.exited.subscribe(),
                    &inner.handle,
                ))
            } else {
                InputState::None
            }),
        });

        let (started_tx, started_rx) = tokio::sync::oneshot::channel();
        let spawned = control.clone();
        inner
            .spawner
            .submit(move || {
                let result = create()
                    .map_err(|e| format!("cannot create the job's container: {e}"))
                    .and_then(|()| {
                        containment::start_leader(|| vfork::spawn(&spec, &mut setup))
                            .map_err(|e| e.to_string())
                    })
                    .map(|mut started| {
                        spawned.started(started.pid as u32);
                        if let Some(stdin) = started.stdin.take() {
                            let _ = stdin_tx.send(stdin);
                        }
                        started
                    });
                // The job's record may already be gone (a host shutting down);
                // its container then cleans up after the leader.
                let _ = started_tx.send(result);
            })
            .map_err(|e| format!("spawn failed: {e}"))?;
        {
            // Jobs the registry dropped are gone; keep the list to the others.
            let mut live = lock_any(&inner.live);
            live.retain(|w| w.strong_count() > 0);
            live.push(Arc::downgrade(&control));
        }

        let supervisor = Supervisor {
            capture: capture.clone(),
            control: control.clone(),
            grace: inner.config.grace,
            _spawner: inner.spawner.clone(),
            limits: request.limits,
        };
        let done = Box::pin(async move {
            Ok(match started_rx.await {
                Ok(Ok(started)) => supervisor.run(started).await,
                Ok(Err(why)) => supervisor.not_started(&why).await,
                Err(_) => supervisor.not_started("the spawner threads are gone").await,
            })
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
            done,
        })
    }

    /// What the job's leader runs: `bash --noprofile --norc -c <command>` with
    /// the job's environment (later entries win) and working directory.
    fn spec(
        &self,
        request: &BashRequest,
        dir: Option<PathBuf>,
        container: &JobContainer,
    ) -> Result<vfork::Spec, String> {
        let config = &self.inner.config;
        let c = |bytes: &[u8]| {
            CString::new(bytes).map_err(|_| {
                "spawn failed: a NUL byte in the command, its environment or its directory"
                    .to_owned()
            })
        };
        let shell = self.inner.shell.as_os_str().as_encoded_bytes();
        let argv = [
            shell,
            b"--noprofile",
            b"--norc",
            b"-c",
            request.command.as_bytes(),
        ]
        .into_iter()
        .map(c)
        .collect::<Result<Vec<_>, _>>()?;
        let mut env: Vec<(std::ffi::OsString, std::ffi::OsString)> =
            job_env(std::env::vars_os(), &config.pass_env);
        let more = [
            ("NO_COLOR", "1"),
            ("TERM", "dumb"),
            ("PAGER", "cat"),
            ("GIT_PAGER", "cat"),
        ]
        .into_iter()
        .chain(config.set_env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .chain(request.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .chain([container.marker_env()]);
        env.extend(more.map(|(k, v)| (k.into(), v.into())));
        // A later entry for the same name replaces an earlier one.
        let mut merged: Vec<(std::ffi::OsString, std::ffi::OsString)> = Vec::new();
        for (k, v) in env {
            match merged.iter_mut().find(|(name, _)| *name == k) {
                Some(slot) => slot.1 = v,
                None => merged.push((k, v)),
            }
        }
        let envp = merged
            .iter()
            .map(|(k, v)| {
                let mut entry = k.as_encoded_bytes().to_vec();
                entry.push(b'=');
                entry.extend_from_slice(v.as_encoded_bytes());
                c(&entry)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let cwd = dir
            .map(|d| c(d.as_os_str().as_encoded_bytes()))
            .transpose()?;
        let mut rlimits = Vec::new();
        // Jobs get the open-file limit the host was given, not the one it
        // raised for itself (programs using select() need at most 1,024).
        if let Some((soft, hard)) = *GIVEN_OPEN_FILE_LIMIT.get().unwrap_or(&None) {
            rlimits.push((libc::RLIMIT_NOFILE, soft, hard));
        }
        if let Some(seconds) = request.limits.cpu_seconds {
            // At the soft limit the kernel sends SIGXCPU, which names the
            // cause; at the hard one, a second later, SIGKILL.
            let soft = seconds as libc::rlim_t;
            rlimits.push((libc::RLIMIT_CPU, soft, soft.saturating_add(1)));
            // SIGXCPU dumps core by default; a job's limit leaves no core file.
            rlimits.push((libc::RLIMIT_CORE, 0, 0));
        }
        if let Some(bytes) = request.limits.memory_bytes {
            let bytes = bytes as libc::rlim_t;
            rlimits.push((libc::RLIMIT_AS, bytes, bytes));
        }
        Ok(vfork::Spec {
            program: c(shell)?,
            argv,
            envp,
            cwd,
            open_stdin: request.stdin,
            rlimits,
        })
    }
}

/// A job's leader, watched through its pidfd (it is our child: the wait reaps it).
struct Leader {
    pidfd: AsyncFd<OwnedFd>,
}

impl Leader {
    /// Waits until the leader exits and reaps it.
    async fn wait(&self) -> std::io::Result<ExitStatus> {
        use std::os::unix::process::ExitStatusExt;
        loop {
            let mut ready = self.pidfd.readable().await?;
            // SAFETY: waitid on our own pidfd into a zeroed siginfo.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            let r = unsafe {
                libc::waitid(
                    libc::P_PIDFD,
                    self.pidfd.get_ref().as_raw_fd() as libc::id_t,
                    &mut info,
                    libc::WEXITED | libc::WNOHANG,
                )
            };
            if r < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // SAFETY: filled by waitid for an exited child.
            let (pid, status) = unsafe { (info.si_pid(), info.si_status()) };
            if pid == 0 {
                ready.clear_ready();
                continue;
            }
            // The raw wait status, as waitpid would have written it.
            let raw = match info.si_code {
                libc::CLD_EXITED => (status & 0xff) << 8,
                libc::CLD_DUMPED => status | 0x80,
                _ => status,
            };
            return Ok(ExitStatus::from_raw(raw));
        }
    }

    /// SIGKILL to the leader alone (the rest of the job is the container's).
    fn kill(&self) {
        // SAFETY: pidfd_send_signal on our own pidfd.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.pidfd.get_ref().as_raw_fd(),
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            );
        }
    }
}

/// The environment a job gets: the allowlisted host variables ([`PASSED_ENV`],
/// `LC_*`, and `pass` by name) and nothing else.
pub fn job_env(
    vars: impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
    pass: &[String],
) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    vars.filter(|(name, _)| {
        let Some(name) = name.to_str() else {
            return false;
        };
        PASSED_ENV.contains(&name) || name.starts_with("LC_") || pass.iter().any(|p| p == name)
    })
    .collect()
}

/// The open-file limit (soft, hard) the process had before the first producer
/// raised it; `None` when it was not raised.
static GIVEN_OPEN_FILE_LIMIT: std::sync::OnceLock<Option<(libc::rlim_t, libc::rlim_t)>> =
    std::sync::OnceLock::new();

/// Raises this process's soft open-file limit to its hard limit, once. Every
/// live job holds three descriptors of the host (two pipes and a pidfd), so
/// the usual soft limit of 1,024 would fail spawns past about 300 jobs at once.
fn raise_open_file_limit() {
    GIVEN_OPEN_FILE_LIMIT.get_or_init(|| {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit and setrlimit on a valid struct.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0
                || limit.rlim_cur >= limit.rlim_max
            {
                return None;
            }
            let given = (limit.rlim_cur, limit.rlim_max);
            limit.rlim_cur = limit.rlim_max;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                tracing::info!(
                    "jobs: the open-file limit stays at {}: {}",
                    given.0,
                    std::io::Error::last_os_error()
                );
                return None;
            }
            tracing::info!(
                "jobs: open-file limit raised from {} to {}",
                given.0,
                given.1
            );
            Some(given)
        }
    });
}

/// `shell` as an absolute path when it is a bare name found in `PATH`, so every
/// spawn skips the lookup.
fn resolve_in_path(shell: &Path) -> PathBuf {
    if shell.components().count() != 1 {
        return shell.to_owned();
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|dir| dir.join(shell))
        .find(|candidate| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .unwrap_or_else(|| shell.to_owned())
}

fn lock_any<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[derive(Default)]
struct ControlState {
    kill_requested: bool,
    exited: bool,
    /// Whether the leader exists; before that, signals wait in `pending`.
    started: bool,
    pending: Vec<Signal>,
}

/// Shared between the cancel hook, the producer's shutdown and the supervisor.
struct ProcessControl {
    state: Mutex<ControlState>,
    kill: Notify,
    container: Mutex<JobContainer>,
    /// True once the leader has exited.
    exited: watch::Sender<bool>,
    /// The limit that stopped the job, in the words its status shows.
    limit_hit: Mutex<Option<String>>,
}

impl ProcessControl {
    /// `signal` to the whole job now; the supervisor escalates to SIGKILL after
    /// the grace period. Idempotent, and a no-op once the leader has exited.
    fn request_kill(&self, signal: Signal) {
        let mut state = lock_any(&self.state);
        if state.exited {
            return;
        }
        state.kill_requested = true;
        drop(state);
        self.send(signal);
        self.kill.notify_one();
    }

    /// `signal` to the whole job now, or as soon as its leader exists: each
    /// signal is sent exactly once, whichever side of the spawn it lands on.
    fn send(&self, signal: Signal) {
        let mut state = lock_any(&self.state);
        if !state.started {
            state.pending.push(signal);
            return;
        }
        drop(state);
        self.signal(signal);
    }

    /// The leader exists (called on the spawner thread right after the spawn):
    /// what was sent before now reaches the job.
    fn started(&self, pid: u32) {
        lock_any(&self.container).set_leader(pid);
        let pending = {
            let mut state = lock_any(&self.state);
            state.started = true;
            std::mem::take(&mut state.pending)
        };
        for signal in pending {
            self.signal(signal);
        }
    }

    /// `signal` to every process of the job that exists now.
    fn signal(&self, signal: Signal) {
        lock_any(&self.container).signal(signal);
    }

    /// Stops the job because it reached a limit: the first limit is the one
    /// its status names.
    fn stop_for_limit(&self, why: String) {
        {
            let mut hit = lock_any(&self.limit_hit);
            if hit.is_some() {
                return;
            }
            *hit = Some(why);
        }
        self.request_kill(Signal::SIGTERM);
    }
}

struct Supervisor {
    capture: SharedCapture,
    control: Arc<ProcessControl>,
    grace: Duration,
    /// Keeps the spawner threads (and so the jobs' death signal) alive.
    _spawner: Arc<Spawner>,
    limits: JobLimits,
}

impl Supervisor {
    /// The spawn failed: nothing ran, and the one next read says why.
    async fn not_started(self, why: &str) -> JobOutcome {
        lock_any(&self.control.state).exited = true;
        self.control.exited.send_replace(true);
        let control = self.control.clone();
        let _ = tokio::task::spawn_blocking(move || lock_any(&control.container).release()).await;
        self.capture.push(
            OutputStream::Stderr,
            format!("spawn failed: {why}").as_bytes(),
        );
        self.capture.close();
        process_outcome(None, true)
    }

    async fn run(self, started: vfork::Started) -> JobOutcome {
        let pid = started.pid as u32;
        let mut readers = Vec::new();
        for (fd, stream) in [
            (started.stdout, OutputStream::Stdout),
            (started.stderr, OutputStream::Stderr),
        ] {
            match tokio::net::unix::pipe::Receiver::from_owned_fd(fd) {
                Ok(pipe) => readers.push(self.pump(pipe, stream)),
                Err(e) => tracing::warn!("jobs: cannot read a job's {stream:?}: {e}"),
            }
        }
        // SAFETY: an OwnedFd stays open, on the same pidfd, for as long as the
        // AsyncFd owns it.
        let registered = unsafe {
            AsyncFd::register_with_interest(started.pidfd, tokio::io::Interest::READABLE)
        };
        let leader = match registered {
            Ok(pidfd) => Leader { pidfd },
            Err(e) => {
                tracing::warn!("jobs: cannot watch job leader {pid}: {e}");
                self.kill_all().await;
                return process_outcome(None, true);
            }
        };

        let time_limit = async {
            match self.limits.timeout_ms {
                Some(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(time_limit);
        let status = tokio::select! {
            biased;
            status = leader.wait() => status,
            () = self.control.kill.notified() => {
                self.stopped(&leader).await
            }
            () = &mut time_limit => {
                let ms = self.limits.timeout_ms.unwrap_or_default();
                self.control.stop_for_limit(format!("time limit reached ({ms} ms)"));
                self.stopped(&leader).await
            }
        };
        self.finish(pid, status, readers).await
    }

    /// After a kill request: the leader's end, within the grace period or by
    /// SIGKILL to the whole job.
    async fn stopped(&self, leader: &Leader) -> std::io::Result<ExitStatus> {
        match tokio::time::timeout(self.grace, leader.wait()).await {
            Ok(status) => status,
            Err(_) => {
                self.kill_all().await;
                leader.kill();
                leader.wait().await
            }
        }
    }

    async fn finish(
        &self,
        pid: u32,
        status: std::io::Result<ExitStatus>,
        mut readers: Vec<JoinHandle<()>>,
    ) -> JobOutcome {
        containment::remove_leader(pid);
        let kill_requested = {
            let mut state = lock_any(&self.control.state);
            state.exited = true;
            state.kill_requested
        };
        self.control.exited.send_replace(true);

        // Let the pipes drain, then make sure nothing of the job survives it:
        // background children, `setsid` escapees and double forks included.
        let drained = drain(&mut readers, self.grace).await;
        let control = self.control.clone();
        let _ = tokio::task::spawn_blocking(move || lock_any(&control.container).release()).await;
        if !drained && !drain(&mut readers, self.grace).await {
            // Only a process that escaped containment can still hold our pipes.
            for reader in &readers {
                reader.abort();
            }
        }
        // Wakes a ready wait for the last line, now complete.
        self.capture.close();
        let mut outcome = process_outcome(status.ok(), kill_requested);
        if let Some(why) = lock_any(&self.control.limit_hit).take() {
            outcome.status = OutcomeStatus::Killed;
            outcome.detail = Some(match outcome.detail {
                Some(detail) => format!("{why}, {detail}"),
                None => why,
            });
        } else if let (Some(seconds), Some("signal: SIGXCPU")) =
            (self.limits.cpu_seconds, outcome.detail.as_deref())
        {
            outcome.detail = Some(format!("CPU limit reached ({seconds} s), signal: SIGXCPU"));
        }
        outcome
    }

    /// SIGKILL to every process of the job, off the async workers (the fallback
    /// walks `/proc`).
    async fn kill_all(&self) {
        let control = self.control.clone();
        let _ = tokio::task::spawn_blocking(move || control.signal(Signal::SIGKILL)).await;
    }

    /// Reads one of the job's pipes into its capture until end of file.
    ///
    /// The read buffer exists only while the pipe has data: an idle job (most
    /// of them, when thousands run) holds no buffer, where a buffer kept
    /// across waits cost 128 KiB per job.
    fn pump(&self, pipe: tokio::net::unix::pipe::Receiver, stream: OutputStream) -> JoinHandle<()> {
        let capture = self.capture.clone();
        let control = self.control.clone();
        let ceiling = self.limits.output_bytes;
        tokio::spawn(async move {
            loop {
                if pipe.readable().await.is_err() {
                    return;
                }
                let mut buf = Vec::with_capacity(READ_CHUNK_BYTES);
                loop {
                    buf.clear();
                    match pipe.try_read_buf(&mut buf) {
                        Ok(0) => return,
                        Ok(_) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                        Err(_) => return,
                    }
                    let written = capture.push(stream, &buf);
                    if let Some(limit) = ceiling
                        && written > limit
                    {
                        control.stop_for_limit(format!("output limit reached ({limit} bytes)"));
                    }
                    // `try_read_buf` takes nothing from the task's budget, so a
                    // job that never stops writing would keep this worker from
                    // every other task; the budget makes the loop yield in turn.
                    tokio::task::coop::consume_budget().await;
                }
            }
        })
    }
}

/// The most one read of a job's pipe takes (a pipe holds 64 KiB by default).
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// Whether a job's stdin can still be written to.
enum InputState {
    /// Started with `/dev/null`.
    None,
    /// Open, through this writer.
    Open(InputWriter),
    /// Closed by the caller, or the job stopped reading for good.
    Closed,
}

enum InputChunk {
    Data(Vec<u8>),
    Close,
}

/// Writes queued input to a job's stdin from a task of its own, so a job that
/// does not read never blocks the caller; what waits is bounded by
/// [`MAX_PENDING_INPUT_BYTES`]. The task, and with it the pipe, ends when the
/// job's leader exits, not when the job's record is finally dropped.
struct InputWriter {
    queue: tokio::sync::mpsc::UnboundedSender<InputChunk>,
    pending: Arc<AtomicU64>,
    /// Set when the pipe broke (the job closed its stdin or ended).
    broken: Arc<std::sync::atomic::AtomicBool>,
}

impl InputWriter {
    /// A writer for the stdin whose write end `pipe` brings once the job is
    /// spawned; what is written before waits for it.
    fn start(
        pipe: tokio::sync::oneshot::Receiver<OwnedFd>,
        mut exited: watch::Receiver<bool>,
        handle: &tokio::runtime::Handle,
    ) -> InputWriter {
        use tokio::io::AsyncWriteExt;
        let (queue, mut chunks) = tokio::sync::mpsc::unbounded_channel();
        let pending = Arc::new(AtomicU64::new(0));
        let broken = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (left, failed) = (pending.clone(), broken.clone());
        handle.spawn(async move {
            let pipe = pipe
                .await
                .map_err(|_| std::io::Error::other("the job did not start"))
                .and_then(tokio::net::unix::pipe::Sender::from_owned_fd);
            let mut pipe = match pipe {
                Ok(pipe) => pipe,
                Err(e) => {
                    tracing::debug!("jobs: no stdin for a job: {e}");
                    failed.store(true, Ordering::SeqCst);
                    return;
                }
            };
            loop {
                let chunk = tokio::select! {
                    chunk = chunks.recv() => chunk,
                    _ = exited.wait_for(|exited| *exited) => None,
                };
                let Some(chunk) = chunk else {
                    return;
                };
                match chunk {
                    InputChunk::Data(bytes) => {
                        let written = pipe.write_all(&bytes).await;
                        left.fetch_sub(bytes.len() as u64, Ordering::SeqCst);
                        if written.is_err() {
                            failed.store(true, Ordering::SeqCst);
                            return;
                        }
                    }
                    // Dropping the pipe is the job's EOF.
                    InputChunk::Close => return,
                }
            }
        });
        InputWriter {
            queue,
            pending,
            broken,
        }
    }
}

/// The shell job's answers to the extension calls only a producer can serve.
struct BashControl {
    process: Arc<ProcessControl>,
    input: Mutex<InputState>,
}

impl JobControl for BashControl {
    fn write_input(&self, data: &[u8], close: bool) -> Result<u64, ControlError> {
        let mut input = lock_any(&self.input);
        let writer = match &*input {
            InputState::None => return Err(ControlError::NoInput),
            InputState::Closed => return Err(ControlError::InputClosed),
            InputState::Open(writer) => writer,
        };
        if writer.broken.load(Ordering::SeqCst) || lock_any(&self.process.state).exited {
            *input = InputState::Closed;
            return Err(ControlError::InputClosed);
        }
        let waiting = writer.pending.load(Ordering::SeqCst);
        if waiting + data.len() as u64 > MAX_PENDING_INPUT_BYTES {
            return Err(ControlError::Failed(format!(
                "the job is not reading its input: {waiting} bytes are still waiting (at most {MAX_PENDING_INPUT_BYTES}); nothing was written"
            )));
        }
        if !data.is_empty() {
            writer
                .pending
                .fetch_add(data.len() as u64, Ordering::SeqCst);
            if writer.queue.send(InputChunk::Data(data.to_vec())).is_err() {
                *input = InputState::Closed;
                return Err(ControlError::InputClosed);
            }
        }
        if close {
            let _ = writer.queue.send(InputChunk::Close);
            *input = InputState::Closed;
        }
        Ok(data.len() as u64)
    }

    fn signal(&self, signal: JobSignal) -> Result<(), ControlError> {
        let signal = match signal {
            JobSignal::Int => Signal::SIGINT,
            JobSignal::Term => Signal::SIGTERM,
            JobSignal::Hup => Signal::SIGHUP,
            JobSignal::Kill => Signal::SIGKILL,
            JobSignal::Stop => Signal::SIGSTOP,
            JobSignal::Cont => Signal::SIGCONT,
        };
        if lock_any(&self.process.state).exited {
            return Err(ControlError::Failed(
                "the job has already finished".to_owned(),
            ));
        }
        self.process.send(signal);
        Ok(())
    }

    fn ports(&self) -> Vec<ListeningPort> {
        let pids = lock_any(&self.process.container).pids();
        super::ports::listening_ports(&pids)
    }
}

/// Waits for every reader to finish, at most `limit`. True when all finished.
async fn drain(readers: &mut [JoinHandle<()>], limit: Duration) -> bool {
    let all = async {
        for reader in readers.iter_mut() {
            let _ = reader.await;
        }
    };
    tokio::time::timeout(limit, all).await.is_ok()
}

/// Maps how a process ended to a job outcome: a signal is `killed` with its name;
/// a kill with no signal recorded is `killed before exit`; any exit code (missing
/// counts as 0) is `completed`.
pub fn process_outcome(status: Option<ExitStatus>, kill_requested: bool) -> JobOutcome {
    use std::os::unix::process::ExitStatusExt;
    let signal = status.and_then(|s| s.signal());
    let (status, detail) = match (signal, kill_requested) {
        (Some(sig), _) => (
            OutcomeStatus::Killed,
            format!("signal: {}", signal_name(sig)),
        ),
        (None, true) => (OutcomeStatus::Killed, "killed before exit".to_owned()),
        (None, false) => {
            let code = status.and_then(|s| s.code()).unwrap_or(0);
            (OutcomeStatus::Completed, format!("exit code: {code}"))
        }
    };
    JobOutcome {
        status,
        detail: Some(detail),
        output: None,
    }
}

/// `SIGTERM` for 15, and so on; the number for signals without a name.
pub fn signal_name(signal: i32) -> String {
    Signal::try_from(signal).map_or_else(|_| format!("signal {signal}"), |s| s.as_str().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn outcomes_map_like_the_contract() {
        let term = ExitStatus::from_raw(15);
        assert_eq!(
            process_outcome(Some(term), true).detail.as_deref(),
            Some("signal: SIGTERM")
        );
        assert_eq!(
            process_outcome(Some(term), false).status,
            OutcomeStatus::Killed
        );
        let killed = process_outcome(None, true);
        assert_eq!(killed.status, OutcomeStatus::Killed);
        assert_eq!(killed.detail.as_deref(), Some("killed before exit"));
        let three = process_outcome(Some(ExitStatus::from_raw(3 << 8)), false);
        assert_eq!(three.status, OutcomeStatus::Completed);
        assert_eq!(three.detail.as_deref(), Some("exit code: 3"));
        assert_eq!(
            process_outcome(None, false).detail.as_deref(),
            Some("exit code: 0")
        );
    }

    #[test]
    fn only_allowlisted_variables_pass() {
        let vars = [
            ("PATH", "/bin"),
            ("GITHUB_TOKEN", "x"),
            ("DATABASE_URL", "postgres://u:p@h/db"),
            ("MYSQL_PWD", "z"),
            ("LC_ALL", "C"),
            ("HOME", "/root"),
            ("EXTRA", "1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()));
        let kept: Vec<String> = job_env(vars, &["EXTRA".to_owned()])
            .into_iter()
            .map(|(k, _)| k.into_string().unwrap())
            .collect();
        assert_eq!(kept, ["PATH", "LC_ALL", "HOME", "EXTRA"]);
    }
}
