//! The background shell producer: `bash -c <command>` as a job.
//!
//! Each command runs non-login, without rc files, in a process group of its own,
//! with stdin from `/dev/null` and a scrubbed environment. Output is captured per
//! stream with a bounded tail and a bounded spill file ([`crate::output`]). A kill
//! sends SIGTERM to the whole group and SIGKILL after the grace period; when the
//! leader is gone, whatever is left of the group is killed too, so no process of the
//! job outlives it. Background commands have no timeout.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, Command};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::output::{Capture, OutputLimits, StreamName};
use crate::owner::Owner;
use crate::registry::{JobHooks, JobOutcome, JobRegistry, JobStart, OutcomeStatus, StartError};

/// The kind every shell job is registered under.
pub const BASH_KIND: &str = "bash";
/// Default time between SIGTERM and SIGKILL.
pub const DEFAULT_GRACE: Duration = Duration::from_millis(3000);

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
    /// The shell to run (`bash`).
    pub shell: PathBuf,
}

impl Default for BashConfig {
    fn default() -> Self {
        BashConfig {
            grace: DEFAULT_GRACE,
            limits: OutputLimits::default(),
            default_workdir: None,
            shell: PathBuf::from("bash"),
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
}

/// Starts shell commands as background jobs in a registry.
#[derive(Clone)]
pub struct BashProducer {
    registry: JobRegistry,
    config: Arc<BashConfig>,
    spill_dir: Arc<tempfile::TempDir>,
    next_spawn: Arc<AtomicU64>,
}

/// The start acknowledgement the model sees.
pub fn started_text(job_id: &str) -> String {
    format!("started background job {job_id}")
}

impl BashProducer {
    /// A producer for `registry`. Spill files go to a private (0700) directory
    /// that is removed when the last clone of the producer is dropped.
    ///
    /// # Errors
    ///
    /// When the spill directory cannot be created.
    pub fn new(registry: JobRegistry, config: BashConfig) -> std::io::Result<BashProducer> {
        let spill_dir = tempfile::Builder::new().prefix("jobs-host-").tempdir()?;
        Ok(BashProducer {
            registry,
            config: Arc::new(config),
            spill_dir: Arc::new(spill_dir),
            next_spawn: Arc::new(AtomicU64::new(1)),
        })
    }

    /// The directory spill files are written to.
    pub fn spill_dir(&self) -> &Path {
        self.spill_dir.path()
    }

    /// Starts `request` for `owner` and returns the job id. A spawn failure still
    /// registers the job: it settles `killed` (`killed before exit`) and its next
    /// read carries `spawn failed: <error>`.
    ///
    /// # Errors
    ///
    /// A blank command, or a [`StartError`] from the registry's preflight.
    pub fn start(&self, owner: Option<Owner>, request: BashRequest) -> Result<String, StartError> {
        if request.command.trim().is_empty() {
            return Err(StartError::Producer(
                "invalid command: expected a non-blank string".to_owned(),
            ));
        }
        let spec = JobStart {
            kind: BASH_KIND.to_owned(),
            label: request.command.clone(),
            output_limit_bytes: None,
            owner,
        };
        self.registry.start(spec, || Ok(self.spawn(&request)))
    }

    fn spawn(&self, request: &BashRequest) -> JobHooks {
        let n = self.next_spawn.fetch_add(1, Ordering::Relaxed);
        let capture = Arc::new(Mutex::new(Capture::new(
            &self.spill_dir.path().join(format!("spawn-{n}")),
            self.config.limits,
        )));
        let control = Arc::new(ProcessControl::default());

        let read_capture = capture.clone();
        let read_output = Box::new(move || Ok(lock(&read_capture).render_delta()));
        let excerpt_capture = capture.clone();
        let output_excerpt = Box::new(move |window| Ok(lock(&excerpt_capture).excerpt(window)));

        let mut cmd = self.command(request);
        let done: crate::registry::DoneFuture = match cmd.spawn() {
            Ok(child) => {
                let pgid = child.id().map(|pid| Pid::from_raw(pid as i32));
                *lock_control(&control) = ControlState {
                    pgid,
                    ..ControlState::default()
                };
                let supervisor = Supervisor {
                    capture,
                    control: control.clone(),
                    grace: self.config.grace,
                };
                Box::pin(async move { Ok(supervisor.run(child).await) })
            }
            Err(e) => {
                {
                    let mut c = lock(&capture);
                    c.push(StreamName::Stderr, format!("spawn failed: {e}").as_bytes());
                    c.closed = true;
                }
                lock_control(&control).exited = true;
                Box::pin(async {
                    Ok(JobOutcome {
                        status: OutcomeStatus::Killed,
                        detail: Some("killed before exit".to_owned()),
                        output: None,
                    })
                })
            }
        };

        let cancel_control = control.clone();
        JobHooks {
            cancel: Box::new(move |_reason| {
                cancel_control.request_kill();
                Ok(())
            }),
            read_output: Some(read_output),
            output_excerpt: Some(output_excerpt),
            done,
        }
    }

    fn command(&self, request: &BashRequest) -> Command {
        let mut cmd = Command::new(&self.config.shell);
        cmd.arg("--noprofile")
            .arg("--norc")
            .arg("-c")
            .arg(&request.command)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .env_clear()
            .envs(scrubbed_env(std::env::vars()))
            .envs([
                ("NO_COLOR", "1"),
                ("TERM", "dumb"),
                ("PAGER", "cat"),
                ("GIT_PAGER", "cat"),
            ])
            .envs(request.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let base = self.config.default_workdir.clone();
        let dir = match (&request.workdir, base) {
            (Some(dir), Some(base)) => Some(base.join(dir)),
            (Some(dir), None) => Some(dir.clone()),
            (None, base) => base,
        };
        if let Some(dir) = dir {
            cmd.current_dir(dir);
        }
        cmd
    }
}

/// The host environment without names that look like credentials.
pub fn scrubbed_env(vars: impl Iterator<Item = (String, String)>) -> Vec<(String, String)> {
    vars.filter(|(name, _)| {
        let upper = name.to_ascii_uppercase();
        !["KEY", "PASSWORD", "SECRET", "TOKEN"]
            .iter()
            .any(|word| upper.contains(word))
    })
    .collect()
}

fn lock(capture: &Mutex<Capture>) -> MutexGuard<'_, Capture> {
    capture.lock().unwrap_or_else(|p| p.into_inner())
}

#[derive(Default)]
struct ControlState {
    pgid: Option<Pid>,
    kill_requested: bool,
    exited: bool,
}

/// Shared between the cancel hook and the supervisor.
#[derive(Default)]
struct ProcessControl {
    state: Mutex<ControlState>,
    kill: Notify,
}

fn lock_control(control: &ProcessControl) -> MutexGuard<'_, ControlState> {
    control.state.lock().unwrap_or_else(|p| p.into_inner())
}

impl ProcessControl {
    /// SIGTERM to the group now; the supervisor escalates after the grace period.
    /// Idempotent, and a no-op once the process has exited.
    fn request_kill(&self) {
        let mut state = lock_control(self);
        if state.exited {
            return;
        }
        state.kill_requested = true;
        if let Some(pgid) = state.pgid {
            signal_group(pgid, Signal::SIGTERM);
        }
        drop(state);
        self.kill.notify_one();
    }
}

fn signal_group(pgid: Pid, signal: Signal) {
    // ESRCH: the group is already gone, which is what we wanted.
    let _ = killpg(pgid, signal);
}

struct Supervisor {
    capture: Arc<Mutex<Capture>>,
    control: Arc<ProcessControl>,
    grace: Duration,
}

/// Kills what is left of the group if the supervisor is dropped early (for
/// example when the runtime shuts down), so no job process is orphaned.
struct GroupGuard(Option<Pid>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.0 {
            signal_group(pgid, Signal::SIGKILL);
        }
    }
}

impl Supervisor {
    async fn run(self, mut child: Child) -> JobOutcome {
        let pgid = lock_control(&self.control).pgid;
        let guard = GroupGuard(pgid);
        let mut readers = Vec::new();
        if let Some(out) = child.stdout.take() {
            readers.push(self.pump(out, StreamName::Stdout));
        }
        if let Some(err) = child.stderr.take() {
            readers.push(self.pump(err, StreamName::Stderr));
        }

        let status = tokio::select! {
            status = child.wait() => status,
            () = self.control.kill.notified() => {
                match tokio::time::timeout(self.grace, child.wait()).await {
                    Ok(status) => status,
                    Err(_) => {
                        if let Some(pgid) = pgid {
                            signal_group(pgid, Signal::SIGKILL);
                        }
                        let _ = child.start_kill();
                        child.wait().await
                    }
                }
            }
        };
        let kill_requested = {
            let mut state = lock_control(&self.control);
            state.exited = true;
            state.kill_requested
        };

        // Let the pipes drain, then make sure nothing of the group survives the job.
        let drained = drain(&mut readers, self.grace).await;
        if let Some(pgid) = pgid {
            signal_group(pgid, Signal::SIGKILL);
        }
        if !drained && !drain(&mut readers, self.grace).await {
            // A process that left the group still holds our pipes; stop reading.
            for reader in &readers {
                reader.abort();
            }
        }
        drop(guard);
        lock(&self.capture).closed = true;
        process_outcome(status.ok(), kill_requested)
    }

    fn pump<R: AsyncRead + Unpin + Send + 'static>(
        &self,
        mut pipe: R,
        stream: StreamName,
    ) -> JoinHandle<()> {
        let capture = self.capture.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match pipe.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => lock(&capture).push(stream, &buf[..n]),
                }
            }
        })
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
    fn credentials_are_scrubbed() {
        let vars = [
            ("PATH", "/bin"),
            ("GITHUB_TOKEN", "x"),
            ("aws_secret_access_key", "y"),
            ("DB_PASSWORD", "z"),
            ("HOME", "/root"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        let kept: Vec<String> = scrubbed_env(vars).into_iter().map(|(k, _)| k).collect();
        assert_eq!(kept, ["PATH", "HOME"]);
    }
}
