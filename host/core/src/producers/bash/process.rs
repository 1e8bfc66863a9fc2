//! A job's processes: the leader watched by the producer's reaper or its
//! pidfd, the signal state
//! shared by the cancel hook, shutdown and the supervisor, and how a process's
//! end maps to a job outcome.

use std::os::fd::{AsFd, OwnedFd};
use std::process::ExitStatus;
use std::sync::Mutex;

use nix::sys::signal::Signal;
use tokio::io::unix::AsyncFd;
use tokio::sync::Notify;

use crate::containment::JobContainer;
use crate::registry::{JobOutcome, OutcomeStatus};
use crate::sync::{LazyWatch, lock};

/// A job's leader, and how its end is learnt.
pub(super) enum Leader {
    /// Our child, recorded with the producer's reaper, which reaps it.
    Reaped {
        pid: i32,
        exit: std::sync::Arc<super::reaper::Exit>,
    },
    /// Watched through its pidfd: a monitor forked by the monitors' parent
    /// (not our child, so no reaper of ours can wait for it).
    Pidfd(AsyncFd<OwnedFd>),
}

impl Leader {
    /// Waits until the leader exits (and is reaped, when it is our child).
    pub(super) async fn wait(&self) -> std::io::Result<ExitStatus> {
        use rustix::process::{WaitId, WaitIdOptions, waitid};
        use std::os::unix::process::ExitStatusExt;
        let pidfd = match self {
            Leader::Reaped { exit, .. } => return Ok(ExitStatus::from_raw(exit.wait().await)),
            Leader::Pidfd(pidfd) => pidfd,
        };
        loop {
            let mut ready = pidfd.readable().await?;
            let options = WaitIdOptions::EXITED | WaitIdOptions::NOHANG;
            let waited = match waitid(WaitId::PidFd(pidfd.get_ref().as_fd()), options) {
                // Not our child (a monitor forked by the monitors' parent,
                // which reaps it): readable means it ended, and its job's
                // end is in its file. A monitor that wrote none was killed.
                Err(rustix::io::Errno::CHILD) => {
                    return Ok(ExitStatus::from_raw(libc::SIGKILL));
                }
                other => other?,
            };
            let Some(status) = waited else {
                // Readable, but not yet waitable: wait for the next wakeup.
                ready.clear_ready();
                continue;
            };
            // The raw wait status, as waitpid would have written it.
            let raw = match (status.exit_status(), status.terminating_signal()) {
                (Some(code), _) => (code & 0xff) << 8,
                (None, Some(signal)) if status.dumped() => signal | 0x80,
                (None, Some(signal)) => signal,
                (None, None) => 0,
            };
            return Ok(ExitStatus::from_raw(raw));
        }
    }

    /// SIGKILL to the leader alone (the rest of the job is the container's).
    pub(super) fn kill(&self) {
        match self {
            Leader::Reaped { pid, .. } => super::reaper::kill(*pid),
            // ESRCH: already gone, which is what we wanted.
            Leader::Pidfd(pidfd) => {
                let _ = rustix::process::pidfd_send_signal(
                    pidfd.get_ref(),
                    rustix::process::Signal::KILL,
                );
            }
        }
    }
}

#[derive(Default)]
pub(super) struct ControlState {
    pub(super) kill_requested: bool,
    pub(super) exited: bool,
    /// Whether the leader exists; before that, signals wait in `pending`.
    pub(super) started: bool,
    pub(super) pending: Vec<Signal>,
}

/// Shared between the cancel hook, the producer's shutdown and the supervisor.
pub(super) struct ProcessControl {
    pub(super) state: Mutex<ControlState>,
    pub(super) kill: Notify,
    pub(super) container: Mutex<JobContainer>,
    /// True once the leader has exited.
    pub(super) exited: LazyWatch<bool>,
    /// True once the spawn is done (the leader exists, or never will).
    pub(super) spawned: LazyWatch<bool>,
    /// The limit that stopped the job, in the words its status shows.
    pub(super) limit_hit: Mutex<Option<String>>,
    /// Set at the job's end when its container proved that none of its
    /// processes is left (see `JobContainer::release`).
    pub(super) none_left: std::sync::atomic::AtomicBool,
    /// The leader's pid and start time, read right after its spawn (before
    /// it can be reaped, so its pid is still its own).
    pub(super) leader_start: std::sync::OnceLock<(i32, u64)>,
    /// Whether the leader is a monitor (a durable job), whose start time is
    /// worth reading.
    pub(super) durable: bool,
}

impl ProcessControl {
    /// `signal` to the whole job now; the supervisor escalates to SIGKILL after
    /// the grace period. Idempotent, and a no-op once the leader has exited.
    pub(super) fn request_kill(&self, signal: Signal) {
        let mut state = lock(&self.state);
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
    pub(super) fn send(&self, signal: Signal) {
        let mut state = lock(&self.state);
        if !state.started {
            state.pending.push(signal);
            return;
        }
        drop(state);
        self.signal(signal);
    }

    /// The leader exists (called on the spawner thread right after the spawn):
    /// what was sent before now reaches the job.
    /// `start`: its start time, when its spawn knew it (a monitor forked by
    /// the monitors' parent, which reaps it).
    pub(super) fn started(&self, pid: u32, start: Option<u64>) {
        lock(&self.container).set_leader(pid);
        if self.durable
            && let Some(start) = start
                .filter(|s| *s != 0)
                .or_else(|| super::process_start_time(pid as i32))
        {
            let _ = self.leader_start.set((pid as i32, start));
        }
        self.spawned.send_replace(true);
        let pending = {
            let mut state = lock(&self.state);
            state.started = true;
            std::mem::take(&mut state.pending)
        };
        for signal in pending {
            self.signal(signal);
        }
    }

    /// `signal` to every process of the job that exists now.
    pub(super) fn signal(&self, signal: Signal) {
        lock(&self.container).signal(signal);
    }

    /// Stops the job because it reached a limit: the first limit is the one
    /// its status names.
    pub(super) fn stop_for_limit(&self, why: String) {
        {
            let mut hit = lock(&self.limit_hit);
            if hit.is_some() {
                return;
            }
            *hit = Some(why);
        }
        self.request_kill(Signal::SIGTERM);
    }
}

/// Maps how a process ended to a job outcome: a signal is `killed` with its name;
/// a kill with no signal recorded is `killed before exit`; any exit code (missing
/// counts as 0) is `completed`.
pub(crate) fn process_outcome(status: Option<ExitStatus>, kill_requested: bool) -> JobOutcome {
    use std::os::unix::process::ExitStatusExt;
    let signal = status.and_then(|s| s.signal());
    let (status, detail) = match (signal, kill_requested) {
        (Some(sig), _) => (
            OutcomeStatus::Killed,
            crate::words::signal(&signal_name(sig)),
        ),
        (None, true) => (
            OutcomeStatus::Killed,
            crate::words::KILLED_BEFORE_EXIT.to_owned(),
        ),
        (None, false) => {
            let code = status.and_then(|s| s.code()).unwrap_or(0);
            (OutcomeStatus::Completed, crate::words::exit_code(code))
        }
    };
    JobOutcome {
        status,
        detail: Some(detail),
        output: None,
    }
}

/// `SIGTERM` for 15, and so on; the number for signals without a name.
pub(crate) fn signal_name(signal: i32) -> String {
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
}
