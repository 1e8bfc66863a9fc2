//! Jobs a previous host started under their monitors (see
//! [`super::monitor`]), taken on by a new host after the old one died: a
//! monitor that still runs makes the job `running` again, its output read
//! from its files from where the model had read; a monitor that is gone
//! leaves the job's real end in its end file; with neither (a reboot, a
//! monitor killed), the job is lost, and said to be, never shown as
//! finished or killed.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::monitor::{JobEnd, STDERR_FILE, STDOUT_FILE, stop_signal};
use super::{BASH_KIND, BashProducer};
use crate::capture::{OutputStream, SharedCapture};
use crate::owner::Owner;
use crate::registry::control::{ControlError, JobControl, JobSignal, ListeningPort};
use crate::registry::{JobHooks, JobOutcome, JobStart, OutcomeStatus, StartError};

/// A job a previous host started under its monitor, as it recorded it.
#[derive(Debug, Clone)]
pub struct AdoptRequest {
    /// Its id (`bash-3`), kept.
    pub id: String,
    /// Its label.
    pub label: String,
    /// Its start, epoch ms.
    pub started_at: u64,
    /// Its directory (its monitor's files).
    pub files: PathBuf,
    /// Its monitor's pid and start time (field 22 of `/proc/<pid>/stat`),
    /// when they were recorded.
    pub monitor: Option<(i32, u64)>,
    /// How far the model had read stdout and stderr, in bytes.
    pub cursors: [u64; 2],
    /// Whether the model had seen its end or been told of it: no notice
    /// then.
    pub end_seen: bool,
}

/// What an adoption found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Adopted {
    /// Its monitor runs: the job goes on.
    Running,
    /// Its monitor recorded its end.
    Ended,
    /// Neither: the job is lost.
    Lost,
}

/// How often an adopted job's files are looked at for new output (its end
/// is heard at once, through its monitor's pidfd).
const TAIL_EVERY: Duration = Duration::from_millis(20);

/// The start time of process `pid` (field 22 of its `stat`, in clock
/// ticks since boot), which with the pid names one process for good;
/// `None` for a process that is gone or has exited (a zombie nobody has
/// reaped yet).
pub fn process_start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields count from
    // the last `)`.
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
    if matches!(fields.next(), Some("Z" | "X") | None) {
        return None;
    }
    fields.nth(18)?.parse().ok()
}

/// A pidfd of the monitor recorded as (`pid`, `start`), if that very
/// process still runs: opened first, then checked, so a reused pid is
/// never taken for it.
fn live_monitor(pid: i32, start: u64) -> Option<OwnedFd> {
    let fd = rustix::process::pidfd_open(
        rustix::process::Pid::from_raw(pid)?,
        rustix::process::PidfdFlags::empty(),
    )
    .ok()?;
    (process_start_time(pid) == Some(start)).then_some(fd)
}

/// Reads what was appended to a job's files since `offsets` into `capture`.
fn tail(files: &Path, offsets: &mut [u64; 2], capture: &SharedCapture) {
    use std::os::unix::fs::FileExt;
    for (n, (name, stream)) in [
        (STDOUT_FILE, OutputStream::Stdout),
        (STDERR_FILE, OutputStream::Stderr),
    ]
    .into_iter()
    .enumerate()
    {
        let Ok(file) = std::fs::File::open(files.join(name)) else {
            continue;
        };
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match file.read_at(&mut buf, offsets[n]) {
                Ok(0) | Err(_) => break,
                Ok(read) => {
                    capture.push(stream, &buf[..read]);
                    offsets[n] += read as u64;
                }
            }
        }
    }
}

/// The job's outcome from its monitor's end record, or lost.
fn outcome(files: &Path, monitor: Option<i32>) -> JobOutcome {
    let Some(end) = JobEnd::read(files) else {
        return JobOutcome {
            status: OutcomeStatus::Failed,
            detail: Some(crate::words::lost(monitor)),
            output: None,
        };
    };
    let mut outcome = super::process::process_outcome(Some(end.wait_status()), false);
    let mut notes = Vec::new();
    if end.lease_expired {
        notes.push(crate::words::LEASE_PASSED.to_owned());
    }
    for (bytes, stream) in end.not_kept.iter().zip(["stdout", "stderr"]) {
        if *bytes > 0 {
            notes.push(crate::words::not_kept(*bytes, stream));
        }
    }
    if !notes.is_empty() {
        outcome.detail = Some(match outcome.detail {
            Some(detail) => format!("{detail}; {}", notes.join("; ")),
            None => notes.join("; "),
        });
    }
    outcome
}

/// An adopted job's extension calls: its monitor is not this host's child
/// and its input pipe went with the old host, so it takes no input; signals
/// and ports reach its processes through its cgroup.
struct AdoptedControl {
    /// Its monitor, while it runs.
    monitor: Option<i32>,
    files: PathBuf,
}

impl AdoptedControl {
    /// The job's processes but its monitor, from its monitor's cgroup.
    fn processes(&self) -> Vec<i32> {
        let Some(monitor) = self.monitor else {
            return Vec::new();
        };
        let Ok(own) = std::fs::read_to_string(format!("/proc/{monitor}/cgroup")) else {
            return Vec::new();
        };
        let Some(path) = own.lines().find_map(|l| l.strip_prefix("0::")) else {
            return Vec::new();
        };
        if !path.contains("/job-") {
            return Vec::new();
        }
        std::fs::read_to_string(format!("/sys/fs/cgroup{}/cgroup.procs", path.trim()))
            .map(|procs| {
                procs
                    .lines()
                    .filter_map(|l| l.trim().parse().ok())
                    .filter(|pid| *pid != monitor)
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl JobControl for AdoptedControl {
    fn write_input(&self, _data: &[u8], _close: bool) -> Result<u64, ControlError> {
        Err(ControlError::NoInput)
    }

    fn signal(&self, signal: JobSignal) -> Result<(), ControlError> {
        let pids = self.processes();
        if pids.is_empty() {
            return Err(ControlError::Failed(
                crate::words::ADOPTED_NO_SIGNALS.to_owned(),
            ));
        }
        let signal = super::extras::signal_of(signal);
        for pid in pids {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal);
        }
        Ok(())
    }

    fn ports(&self) -> Vec<ListeningPort> {
        crate::producers::ports::listening_ports(&self.processes())
    }

    fn leader_pid(&self) -> Option<i32> {
        self.monitor
    }

    fn files(&self) -> Option<PathBuf> {
        Some(self.files.clone())
    }
}

impl BashProducer {
    /// Takes on `job`, which a previous host started under its monitor, for
    /// `owner`, under its old id (see the module's notes). Its output is read
    /// from its files, unread from where the model had read.
    ///
    /// # Errors
    ///
    /// The registry's refusal (an id taken, a stale owner); the job's
    /// processes are left as they were.
    pub fn adopt(&self, owner: Option<Owner>, job: AdoptRequest) -> Result<Adopted, StartError> {
        let inner = &self.inner;
        let n = inner
            .next_spawn
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let stem = inner.spill_dir.path().join(format!("adopted-{n}"));
        let capture = SharedCapture::new(&stem, inner.config.limits, Some(inner.budget.clone()));
        let mut offsets = [0u64; 2];
        tail(&job.files, &mut offsets, &capture);
        capture.set_cursors(job.cursors);
        // The monitor as the old host recorded it, or as it recorded itself
        // (a host killed before it recorded the pid).
        let job_monitor = job
            .monitor
            .or_else(|| super::monitor::recorded_monitor(&job.files));
        let monitor =
            job_monitor.and_then(|(pid, start)| live_monitor(pid, start).map(|fd| (pid, fd)));
        let found = match (&monitor, JobEnd::read(&job.files)) {
            (Some(_), _) => Adopted::Running,
            (None, Some(_)) => Adopted::Ended,
            (None, None) => Adopted::Lost,
        };
        let files = job.files.clone();
        let recorded = job_monitor.map(|(pid, _)| pid);
        let (cancel, control, done): (
            crate::registry::CancelHook,
            Option<Arc<dyn JobControl>>,
            crate::registry::DoneFuture,
        ) = match monitor {
            Some((pid, pidfd)) => {
                let pidfd = Arc::new(pidfd);
                let stopper = pidfd.clone();
                let watched = capture.clone();
                let control: Arc<dyn JobControl> = Arc::new(AdoptedControl {
                    monitor: Some(pid),
                    files: files.clone(),
                });
                (
                    Box::new(move |_reason| {
                        use std::os::fd::AsRawFd;
                        // SAFETY: pidfd_send_signal on our pidfd, with no
                        // siginfo. (rustix names only the standard signals.)
                        let sent = unsafe {
                            libc::syscall(
                                libc::SYS_pidfd_send_signal,
                                stopper.as_fd().as_raw_fd(),
                                stop_signal(),
                                std::ptr::null::<libc::siginfo_t>(),
                                0,
                            )
                        };
                        match sent {
                            0 => Ok(()),
                            _ => match std::io::Error::last_os_error() {
                                // Its monitor has just exited: so has the job.
                                e if e.raw_os_error() == Some(libc::ESRCH) => Ok(()),
                                e => Err(e.to_string()),
                            },
                        }
                    }),
                    Some(control),
                    Box::pin(async move {
                        follow(pidfd, &files, &mut offsets, &watched).await;
                        tail(&files, &mut offsets, &watched);
                        watched.close();
                        Ok(outcome(&files, Some(pid)))
                    }),
                )
            }
            None => {
                let ended = capture.clone();
                // Without a monitor, but with its files: the next host
                // after this one finds it again.
                let control: Arc<dyn JobControl> = Arc::new(AdoptedControl {
                    monitor: None,
                    files: files.clone(),
                });
                (
                    Box::new(|_reason| Ok(())),
                    Some(control),
                    Box::pin(async move {
                        ended.close();
                        Ok(outcome(&files, recorded))
                    }),
                )
            }
        };
        inner.registry.adopt(
            JobStart {
                kind: BASH_KIND.to_owned(),
                label: job.label,
                output_limit_bytes: None,
                owner,
                sandbox: None,
            },
            &job.id,
            job.started_at,
            job.end_seen,
            JobHooks {
                cancel,
                capture: Some(capture),
                read_output: None,
                output_excerpt: None,
                control,
                done,
            },
        )?;
        Ok(found)
    }
}

/// Reads the job's files into `capture` as they grow, until its monitor
/// exits.
async fn follow(
    pidfd: Arc<OwnedFd>,
    files: &Path,
    offsets: &mut [u64; 2],
    capture: &SharedCapture,
) {
    let Ok(duplicate) = pidfd.try_clone() else {
        return;
    };
    // SAFETY: an OwnedFd stays open, on the same pidfd, for as long as the
    // AsyncFd owns it.
    let Ok(exited) = (unsafe {
        tokio::io::unix::AsyncFd::register_with_interest(duplicate, tokio::io::Interest::READABLE)
    }) else {
        return;
    };
    loop {
        tokio::select! {
            ready = exited.readable() => {
                if ready.is_ok() {
                    return;
                }
            }
            () = tokio::time::sleep(TAIL_EVERY) => tail(files, offsets, capture),
        }
    }
}
