//! A job from its spawn to its end: the pumps that read its pipes into its
//! capture, its time and output limits, the grace period after a kill, and
//! the sweep that leaves nothing of it behind.

use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::io::unix::AsyncFd;
use tokio::task::JoinHandle;

use super::JobLimits;
use super::process::{Leader, ProcessControl, process_outcome};
use super::spawner::Spawner;
use crate::capture::{OutputStream, SharedCapture};
use crate::containment;
use crate::producers::spawn;
use crate::registry::{JobOutcome, OutcomeStatus};
use crate::sync::lock;

pub(super) struct Supervisor {
    pub(super) capture: SharedCapture,
    pub(super) control: Arc<ProcessControl>,
    pub(super) grace: Duration,
    /// Keeps the spawner threads (and so the jobs' death signal) alive.
    pub(super) _spawner: Arc<Spawner>,
    pub(super) limits: JobLimits,
    /// A durable job's directory: its monitor's record of the leader's end
    /// is the job's (the monitor itself may have been killed first).
    pub(super) files: Option<std::path::PathBuf>,
}

impl Supervisor {
    /// Kills what is left of the job and removes its container, off the
    /// async workers; notes whether that proved none of its processes is left.
    async fn release_container(&self) {
        // Most jobs leave nothing: their cgroup goes at once, without the
        // hop to a blocking thread, which is in the way of every notice. (A
        // container busy elsewhere, a kill's walk of `/proc`, is waited for
        // there.)
        let released = self
            .control
            .container
            .try_lock()
            .is_ok_and(|mut container| container.try_release_now());
        if released {
            self.control
                .none_left
                .store(true, std::sync::atomic::Ordering::Release);
            return;
        }
        let control = self.control.clone();
        let _ = tokio::task::spawn_blocking(move || {
            let gone = lock(&control.container).release();
            control
                .none_left
                .store(gone, std::sync::atomic::Ordering::Release);
        })
        .await;
    }

    /// The spawn failed: nothing ran, and the one next read says why.
    pub(super) async fn not_started(self, why: &str) -> JobOutcome {
        self.control.spawned.send_replace(true);
        lock(&self.control.state).exited = true;
        self.control.exited.send_replace(true);
        self.release_container().await;
        self.capture.push(
            OutputStream::Stderr,
            crate::words::spawn_failed(why).as_bytes(),
        );
        self.capture.close();
        process_outcome(None, true)
    }

    /// `exit`: the leader's end from the producer's reaper, when it records
    /// the leader (else its pidfd is watched).
    pub(super) async fn run(
        self,
        started: spawn::Started,
        exit: Option<std::sync::Arc<super::reaper::Exit>>,
    ) -> JobOutcome {
        let pid = started.pid as u32;
        let mut readers = Vec::new();
        match started.stderr {
            Some(stderr) => {
                for (fd, stream) in [
                    (started.stdout, OutputStream::Stdout),
                    (stderr, OutputStream::Stderr),
                ] {
                    match tokio::net::unix::pipe::Receiver::from_owned_fd(fd) {
                        Ok(pipe) => readers.push(self.pump(pipe, stream)),
                        Err(e) => tracing::warn!("jobs: cannot read a job's {stream:?}: {e}"),
                    }
                }
            }
            // On a terminal: one descriptor carries both streams.
            // SAFETY: an OwnedFd stays open, on the same terminal, for as
            // long as the AsyncFd owns it.
            None => match unsafe {
                AsyncFd::register_with_interest(started.stdout, tokio::io::Interest::READABLE)
            } {
                Ok(terminal) => readers.push(self.pump_terminal(terminal)),
                Err(e) => tracing::warn!("jobs: cannot read a job's terminal: {e}"),
            },
        }
        let registered = match (exit, started.pidfd) {
            (Some(exit), _) => Ok(Leader::Reaped {
                pid: started.pid,
                exit,
            }),
            (None, Some(pidfd)) => {
                // SAFETY: an OwnedFd stays open, on the same pidfd, for as
                // long as the AsyncFd owns it.
                let registered = unsafe {
                    AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE)
                };
                registered.map(Leader::Pidfd).map_err(std::io::Error::from)
            }
            (None, None) => Err(std::io::Error::other("it has no pidfd")),
        };
        let leader = match registered {
            Ok(leader) => leader,
            Err(e) => {
                tracing::warn!("jobs: cannot watch job leader {pid}: {e}");
                self.kill_all().await;
                // The job's end as every end is: its input writer (and with
                // it a terminal's last descriptor) goes, its output is done.
                lock(&self.control.state).exited = true;
                self.control.exited.send_replace(true);
                self.capture.close();
                return process_outcome(None, true);
            }
        };

        // The rare paths' state (a timer, a kill's grace) is boxed: this
        // future lives as long as the job, in every live job.
        let mut time_limit = self
            .limits
            .timeout_ms
            .map(|ms| Box::pin(tokio::time::sleep(Duration::from_millis(ms))));
        let time_limit = async {
            match time_limit.as_mut() {
                Some(sleep) => sleep.await,
                None => std::future::pending().await,
            }
        };
        let status = tokio::select! {
            biased;
            status = leader.wait() => status,
            () = self.control.kill.notified() => {
                Box::pin(self.stopped(&leader)).await
            }
            () = time_limit => {
                let ms = self.limits.timeout_ms.unwrap_or_default();
                self.control.stop_for_limit(format!("time limit reached ({ms} ms)"));
                Box::pin(self.stopped(&leader)).await
            }
        };
        if let Leader::Pidfd(_) = leader {
            // The reaper forgets the leaders it reaps itself.
            containment::remove_leader(pid);
        }
        self.finish(status, readers).await
    }

    /// After a kill request: the leader's end, within the grace period or by
    /// SIGKILL to the whole job.
    pub(super) async fn stopped(&self, leader: &Leader) -> std::io::Result<ExitStatus> {
        match tokio::time::timeout(self.grace, leader.wait()).await {
            Ok(status) => status,
            Err(_) => {
                self.kill_all().await;
                leader.kill();
                leader.wait().await
            }
        }
    }

    pub(super) async fn finish(
        &self,
        status: std::io::Result<ExitStatus>,
        mut readers: Vec<JoinHandle<()>>,
    ) -> JobOutcome {
        let status = match self.files.as_deref().and_then(super::JobEnd::read) {
            Some(end) => Ok(end.wait_status()),
            None => status,
        };
        let kill_requested = {
            let mut state = lock(&self.control.state);
            state.exited = true;
            state.kill_requested
        };
        self.control.exited.send_replace(true);

        // Let the pipes drain, then make sure nothing of the job survives it:
        // background children, `setsid` escapees and double forks included.
        let drained = drain(&mut readers, self.grace).await;
        self.release_container().await;
        if !drained && !drain(&mut readers, self.grace).await {
            // Only a process that escaped containment can still hold our
            // pipes: nothing proves the job left none behind.
            self.control
                .none_left
                .store(false, std::sync::atomic::Ordering::Release);
            // So a later sweep (a shutdown's) still looks for it by its mark.
            lock(&self.control.container).escaped();
            for reader in &readers {
                reader.abort();
            }
        }
        // Wakes a ready wait for the last line, now complete.
        self.capture.close();
        let mut outcome = process_outcome(status.ok(), kill_requested);
        if let Some(why) = lock(&self.control.limit_hit).take() {
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
    pub(super) async fn kill_all(&self) {
        let control = self.control.clone();
        let _ = tokio::task::spawn_blocking(move || control.signal(Signal::SIGKILL)).await;
    }

    /// Reads one of the job's pipes into its capture until end of file.
    ///
    /// The read buffer exists only while the pipe has data: an idle job (most
    /// of them, when thousands run) holds no buffer, where a buffer kept
    /// across waits cost 128 KiB per job.
    pub(super) fn pump(
        &self,
        pipe: tokio::net::unix::pipe::Receiver,
        stream: OutputStream,
    ) -> JoinHandle<()> {
        let capture = self.capture.clone();
        let control = self.control.clone();
        let ceiling = self.limits.output_bytes;
        tokio::spawn(async move {
            // Held while this pipe is widened; given back when the pump ends.
            let mut widened: Option<Widened> = None;
            // The kernel refused to widen it: not asked again.
            let mut refused = false;
            loop {
                if pipe.readable().await.is_err() {
                    return;
                }
                let size = if widened.is_some() {
                    BUSY_READ_CHUNK_BYTES
                } else {
                    READ_CHUNK_BYTES
                };
                let mut buf = Vec::with_capacity(size);
                loop {
                    buf.clear();
                    match pipe.try_read_buf(&mut buf) {
                        Ok(0) => return,
                        Ok(n) if n == buf.capacity() && widened.is_none() && !refused => {
                            // A writer that fills the pipe: a larger pipe and
                            // larger reads, for this job only.
                            match widen(&pipe) {
                                Ok(slot) => {
                                    widened = Some(slot);
                                    buf.reserve(BUSY_READ_CHUNK_BYTES - buf.len());
                                }
                                Err(Unwidened::KernelRefused) => refused = true,
                                Err(Unwidened::AllTaken) => {}
                            }
                        }
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

impl Supervisor {
    /// Reads a job's terminal into its capture until every process of the
    /// job has closed its side (the kernel then answers `EIO`).
    fn pump_terminal(&self, terminal: AsyncFd<std::os::fd::OwnedFd>) -> JoinHandle<()> {
        let capture = self.capture.clone();
        let control = self.control.clone();
        let ceiling = self.limits.output_bytes;
        tokio::spawn(async move {
            loop {
                let Ok(mut ready) = terminal.readable().await else {
                    return;
                };
                // A terminal passes at most 4 KiB per read.
                let mut buf = vec![0u8; 16 * 1024];
                loop {
                    match rustix::io::read(terminal.get_ref(), &mut buf[..]) {
                        Ok(0) => return,
                        Ok(n) => {
                            let (written, replies) =
                                capture.push_answered(OutputStream::Stdout, &buf[..n]);
                            // The terminal's answers (a cursor report) go
                            // back in as the job's input, as on any terminal;
                            // a few bytes, so a full input is not waited for.
                            if !replies.is_empty() {
                                let _ = rustix::io::write(terminal.get_ref(), &replies);
                            }
                            if let Some(limit) = ceiling
                                && written > limit
                            {
                                control.stop_for_limit(format!(
                                    "output limit reached ({limit} bytes)"
                                ));
                            }
                            tokio::task::coop::consume_budget().await;
                        }
                        Err(rustix::io::Errno::AGAIN) => {
                            ready.clear_ready();
                            break;
                        }
                        Err(rustix::io::Errno::INTR) => {}
                        // EIO: no process holds the terminal any more.
                        Err(_) => return,
                    }
                }
            }
        })
    }
}

/// The most one read of a job's pipe takes (a pipe holds 64 KiB by default).
pub(super) const READ_CHUNK_BYTES: usize = 64 * 1024;

/// A busy job's pipe size and read size: the unprivileged maximum
/// (`/proc/sys/fs/pipe-max-size`), so its writer blocks and wakes us 16
/// times less often.
const BUSY_READ_CHUNK_BYTES: usize = 1024 * 1024;

/// How many jobs' pipes are widened at once, at most. Pipe pages count
/// against the user's `pipe-user-pages-soft` (16,384 pages by default); past
/// it, every new pipe of that user (in jobs, and elsewhere) gets 2 pages.
/// Eight widened pipes take 2,048.
const MAX_WIDENED: usize = 8;

static WIDENED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// One of the [`MAX_WIDENED`] widened pipes, counted until dropped.
struct Widened;

impl Drop for Widened {
    fn drop(&mut self) {
        WIDENED.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Why a pipe stays as it was.
enum Unwidened {
    /// [`MAX_WIDENED`] pipes are widened already: worth asking again later.
    AllTaken,
    /// A lower maximum, or the user's pipe pages spent.
    KernelRefused,
}

/// Makes the pipe of a job that fills it larger, while fewer than
/// [`MAX_WIDENED`] are.
fn widen(pipe: &tokio::net::unix::pipe::Receiver) -> Result<Widened, Unwidened> {
    use std::os::fd::AsFd;
    use std::sync::atomic::Ordering;
    WIDENED
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
            (n < MAX_WIDENED).then_some(n + 1)
        })
        .map_err(|_| Unwidened::AllTaken)?;
    let widened = Widened;
    rustix::pipe::fcntl_setpipe_size(pipe.as_fd(), BUSY_READ_CHUNK_BYTES)
        .map_err(|_| Unwidened::KernelRefused)?;
    Ok(widened)
}

/// Waits for every reader to finish, at most `limit`. True when all finished.
pub(super) async fn drain(readers: &mut [JoinHandle<()>], limit: Duration) -> bool {
    let all = async {
        for reader in readers.iter_mut() {
            let _ = reader.await;
        }
    };
    tokio::time::timeout(limit, all).await.is_ok()
}
