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

use super::job_file::{FRAMES_AT, JobEnd, read_frames};
use super::monitor::stop_signal;
use crate::capture::{OutputStream, SharedCapture};
use crate::owner::Owner;
use crate::producers::bash::{BASH_KIND, BashProducer};
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
    /// Its file (see [`super::monitor`]).
    pub files: PathBuf,
    /// Its monitor's pid and start time (field 22 of `/proc/<pid>/stat`),
    /// when they were recorded.
    pub monitor: Option<(i32, u64)>,
    /// How far the model had read stdout and stderr, in bytes.
    pub cursors: [u64; 2],
    /// Whether the model had seen its end or been told of it: no notice
    /// then.
    pub end_seen: bool,
    /// Its status and detail as the old host recorded them, when not
    /// `running`: an end it recorded is the job's (a kill's, a limit's, with
    /// its words), and `stopping` means it was being killed.
    pub recorded: Option<(String, Option<String>)>,
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

/// The monitor of a job file that is held (see
/// [`super::job_file::file_in_use`]) but has no monitor line yet: a monitor
/// that is starting (its host died during the spawn), waited for a while.
fn starting_monitor(files: &Path) -> Option<(i32, u64)> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while super::job_file::file_in_use(files) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
        if let Some(found) = super::job_file::recorded_monitor(files) {
            return Some(found);
        }
    }
    super::job_file::recorded_monitor(files)
}

/// Whether the process of `pidfd` has not exited.
fn alive(pidfd: &OwnedFd) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: pidfd_send_signal with signal 0 (a check) on our pidfd.
    unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            0,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        ) == 0
    }
}

/// Reads the frames appended to a job's file since `offset` into
/// `capture`.
fn tail(file: &Path, offset: &mut u64, capture: &SharedCapture) {
    let Ok(file) = std::fs::File::open(file) else {
        return;
    };
    *offset = read_frames(&file, *offset, |tag, bytes| {
        let stream = if tag == 1 {
            OutputStream::Stdout
        } else {
            OutputStream::Stderr
        };
        capture.push(stream, bytes);
    });
}

/// The job's outcome: as the old host recorded it, else from its monitor's
/// end record (a kill the old host asked for counted as one), else lost.
fn outcome(
    files: &Path,
    monitor: Option<i32>,
    recorded: Option<&(String, Option<String>)>,
) -> JobOutcome {
    if let Some(end) =
        recorded.and_then(|(status, detail)| JobOutcome::recorded(status, detail.as_deref()))
    {
        return end;
    }
    let kill_requested = recorded.is_some_and(|(status, _)| status == "stopping");
    let Some(end) = JobEnd::read(files) else {
        return JobOutcome {
            status: OutcomeStatus::Failed,
            detail: Some(crate::words::lost(monitor)),
            output: None,
        };
    };
    let mut outcome =
        crate::producers::bash::process::process_outcome(Some(end.wait_status()), kill_requested);
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
    /// Its monitor (pid and start time, and a pidfd), while it runs.
    monitor: Option<(i32, u64, Arc<OwnedFd>)>,
    files: PathBuf,
}

impl AdoptedControl {
    /// The job's processes but its monitor, from its monitor's cgroup.
    fn processes(&self) -> Vec<i32> {
        let Some((monitor, _, pidfd)) = &self.monitor else {
            return Vec::new();
        };
        let monitor = *monitor;
        let Ok(own) = std::fs::read_to_string(format!("/proc/{monitor}/cgroup")) else {
            return Vec::new();
        };
        let Some(path) = own.lines().find_map(|l| l.strip_prefix("0::")) else {
            return Vec::new();
        };
        if !crate::containment::is_job_cgroup(path) {
            return Vec::new();
        }
        let pids: Vec<i32> =
            std::fs::read_to_string(format!("/sys/fs/cgroup{}/cgroup.procs", path.trim()))
                .map(|procs| {
                    procs
                        .lines()
                        .filter_map(|l| l.trim().parse().ok())
                        .filter(|pid| *pid != monitor)
                        .collect()
                })
                .unwrap_or_default();
        // Read by pid: only if that pid was still the monitor after the read
        // (its cgroup was then the job's).
        if alive(pidfd) { pids } else { Vec::new() }
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
        let signal = crate::producers::bash::extras::signal_of(signal);
        for pid in pids {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal);
        }
        Ok(())
    }

    fn ports(&self) -> Vec<ListeningPort> {
        crate::producers::ports::listening_ports(&self.processes())
    }

    fn leader_pid(&self) -> Option<i32> {
        self.monitor.as_ref().map(|m| m.0)
    }

    fn durable(&self) -> bool {
        true
    }

    fn monitor(&self) -> Option<(i32, u64)> {
        self.monitor.as_ref().map(|m| (m.0, m.1))
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
        let mut offset = FRAMES_AT;
        tail(&job.files, &mut offset, &capture);
        capture.set_cursors(job.cursors);
        // The monitor as the old host recorded it, or as it recorded itself
        // (a host killed before it recorded the pid).
        let job_monitor = job
            .monitor
            .or_else(|| super::job_file::recorded_monitor(&job.files))
            .or_else(|| starting_monitor(&job.files));
        let monitor = job_monitor
            .and_then(|(pid, start)| live_monitor(pid, start).map(|fd| (pid, start, fd)));
        let found = match (&monitor, JobEnd::read(&job.files), &job.recorded) {
            (Some(_), _, _) => Adopted::Running,
            (None, Some(_), _) => Adopted::Ended,
            (None, None, Some((status, _))) if status != "stopping" => Adopted::Ended,
            (None, None, _) => Adopted::Lost,
        };
        let recorded_end = job.recorded.clone();
        let files = job.files.clone();
        let recorded = job_monitor.map(|(pid, _)| pid);
        let (cancel, control, done): (
            crate::registry::CancelHook,
            Option<Arc<dyn JobControl>>,
            crate::registry::DoneFuture,
        ) = match monitor {
            Some((pid, start, pidfd)) => {
                let pidfd = Arc::new(pidfd);
                let stopper = pidfd.clone();
                let watched = capture.clone();
                let control: Arc<dyn JobControl> = Arc::new(AdoptedControl {
                    monitor: Some((pid, start, pidfd.clone())),
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
                        follow(pidfd, &files, &mut offset, &watched).await;
                        tail(&files, &mut offset, &watched);
                        watched.close();
                        Ok(outcome(&files, Some(pid), recorded_end.as_ref()))
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
                        Ok(outcome(&files, recorded, recorded_end.as_ref()))
                    }),
                )
            }
        };
        let stopping = found == Adopted::Running
            && job
                .recorded
                .as_ref()
                .is_some_and(|(status, _)| status == "stopping");
        let id = job.id.clone();
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
                placement: None,
                done,
            },
        )?;
        // Its old host was killing it: so is this one (its monitor is told
        // again, and the journal records it stopping).
        if stopping {
            let _ = inner.registry.cancel(&id, Some("its kill was under way"));
        }
        Ok(found)
    }
}

/// Reads the job's files into `capture` as they grow, until its monitor
/// exits.
async fn follow(pidfd: Arc<OwnedFd>, files: &Path, offset: &mut u64, capture: &SharedCapture) {
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
            () = tokio::time::sleep(TAIL_EVERY) => tail(files, offset, capture),
        }
    }
}
