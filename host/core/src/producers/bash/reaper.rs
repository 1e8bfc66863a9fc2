//! One watcher for the exits of every job leader the host spawned itself,
//! instead of a pidfd per job: a live job then holds two of the host's
//! descriptors (its output pipes), not three.
//!
//! A producer's [`Reaper`] listens for `SIGCHLD` (tokio's signal driver,
//! which `tokio::process` shares). Each signal starts a pass that peeks at
//! the next ended child with `waitid(P_ALL, WNOWAIT)`, which reaps nothing,
//! and reaps it only when it is a recorded leader. Any other child (an
//! embedder's own, a short-lived helper of the fence, an orphan adopted by a
//! subreaper host) is left to whoever waits for it; while one such zombie
//! is first in line, the pass asks each recorded leader by pid instead.
//!
//! A leader is recorded on its spawner thread right after its spawn (and
//! after what must be read while its pid is still its own). A
//! leader that ended before that (its `SIGCHLD` came before there was a
//! record to match) is reaped by the record itself. Reaping and removing a
//! record happen under one lock, and [`kill`] signals only a pid that is
//! recorded under that lock: an unreaped pid cannot be reused, so no signal
//! reaches a stranger.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::Notify;

use crate::sync::lock;

/// How a recorded leader ended: its raw wait status, as `waitpid` writes it.
#[derive(Default)]
pub(super) struct Exit {
    status: OnceLock<i32>,
    ended: Notify,
}

impl Exit {
    /// The raw wait status, once the leader has been reaped. Cancel-safe.
    pub(super) async fn wait(&self) -> i32 {
        loop {
            let ended = self.ended.notified();
            tokio::pin!(ended);
            // Enabled before the check, so an end set in between wakes it.
            ended.as_mut().enable();
            if let Some(status) = self.status.get() {
                return *status;
            }
            ended.await;
        }
    }

    fn set(&self, status: i32) {
        let _ = self.status.set(status);
        self.ended.notify_waiters();
    }
}

/// A recorded leader: its end, and the reaper that recorded it.
struct Recorded {
    exit: Arc<Exit>,
    by: Arc<Shared>,
}

impl Drop for Recorded {
    /// Reaped (a record is dropped only then): one fewer for its reaper's
    /// task to wait for, told to the task once its producer is gone.
    fn drop(&mut self) {
        self.by.recorded.fetch_sub(1, Ordering::SeqCst);
        if self.by.gone.load(Ordering::SeqCst) {
            self.by.stop.notify_one();
        }
    }
}

/// The recorded leaders of every producer, by pid.
static LEADERS: Mutex<Option<HashMap<i32, Recorded>>> = Mutex::new(None);

/// What a reaper shares with its task and its records.
#[derive(Default)]
struct Shared {
    /// Its leaders recorded and not yet reaped.
    recorded: AtomicUsize,
    /// Set when the producer is gone.
    gone: AtomicBool,
    /// Wakes the task to look at the two above.
    stop: Notify,
}

/// A producer's listener for its leaders' ends. Its task listens until the
/// producer is gone and every leader it recorded has been reaped: a job
/// may outlive its producer (its container kills it as the producer goes),
/// and its end must still be seen.
pub(super) struct Reaper {
    shared: Arc<Shared>,
}

impl Drop for Reaper {
    fn drop(&mut self) {
        self.shared.gone.store(true, Ordering::SeqCst);
        self.shared.stop.notify_one();
    }
}

impl Reaper {
    /// Listens for `SIGCHLD` on `handle`'s runtime from now on.
    ///
    /// # Errors
    ///
    /// When the runtime has no signal driver (`enable_io`), or the handler
    /// cannot be installed.
    pub(super) fn start(handle: &tokio::runtime::Handle) -> std::io::Result<Reaper> {
        // Registered before the first spawn, so no leader's end goes unseen.
        let _entered = handle.enter();
        let mut ended = signal(SignalKind::child())?;
        let shared = Arc::new(Shared::default());
        let task = shared.clone();
        handle.spawn(async move {
            loop {
                tokio::select! {
                    got = ended.recv() => {
                        if got.is_none() {
                            return;
                        }
                        pass();
                    }
                    () = task.stop.notified() => {}
                }
                // A record is made through the producer, so none appears
                // once it is gone; the last one's reaping wakes this task
                // (whichever producer's pass reaped it).
                if task.gone.load(Ordering::SeqCst) && task.recorded.load(Ordering::SeqCst) == 0 {
                    return;
                }
            }
        });
        Ok(Reaper { shared })
    }

    /// Records `pid` (a child of this process, just spawned) as a leader to
    /// reap; its end is in the answer. Call it on the spawning thread, before
    /// anything else waits for the child.
    pub(super) fn record(&self, pid: i32) -> Arc<Exit> {
        let exit = Arc::new(Exit::default());
        let mut leaders = lock(&LEADERS);
        // It may have ended already, its signal seen before this record.
        if let Some(status) = reap(pid).end() {
            ended(pid, &exit, status);
            return exit;
        }
        self.shared.recorded.fetch_add(1, Ordering::SeqCst);
        leaders.get_or_insert_with(HashMap::new).insert(
            pid,
            Recorded {
                exit: exit.clone(),
                by: self.shared.clone(),
            },
        );
        exit
    }
}

/// `SIGKILL` to the recorded leader `pid`; nothing once it has been reaped.
pub(super) fn kill(pid: i32) {
    let leaders = lock(&LEADERS);
    if leaders.as_ref().is_some_and(|l| l.contains_key(&pid)) {
        // `pid` is our unreaped child, so its pid is still its own.
        if let Some(pid) = rustix::process::Pid::from_raw(pid) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
}

/// Reaps every recorded leader that has ended.
fn pass() {
    loop {
        match peek() {
            Peeked::Nothing => return,
            Peeked::Ended(pid) => {
                let mut leaders = lock(&LEADERS);
                let Some(map) = leaders.as_mut().filter(|map| map.contains_key(&pid)) else {
                    // Not ours to reap, and first in line for every peek:
                    // ask each leader by pid instead.
                    drop(leaders);
                    scan();
                    return;
                };
                // Still running only when another pass reaped the one peeked
                // at and its pid is already a new leader's: peek again.
                if let Some(status) = reap(pid).end()
                    && let Some(recorded) = map.remove(&pid)
                {
                    ended(pid, &recorded.exit, status);
                }
            }
        }
    }
}

/// Asks each recorded leader whether it has ended, and reaps those that have.
fn scan() {
    let mut leaders = lock(&LEADERS);
    let Some(map) = leaders.as_mut() else {
        return;
    };
    map.retain(|pid, recorded| match reap(*pid).end() {
        Some(status) => {
            ended(*pid, &recorded.exit, status);
            false
        }
        None => true,
    });
}

/// `pid` was reaped with `status` (called under the lock of [`LEADERS`]):
/// it is no longer a leader for containment's sweeps either (which count
/// each recording, so a next leader that already took the pid stays
/// recorded).
fn ended(pid: i32, exit: &Exit, status: i32) {
    crate::containment::remove_leader(pid as u32);
    exit.set(status);
}

enum Peeked {
    Nothing,
    Ended(i32),
}

/// The next ended child, left unreaped.
fn peek() -> Peeked {
    // SAFETY: an all-zero siginfo_t is valid (si_pid 0 means none ended).
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: waitid writes only `info`, which outlives the call.
        let rc = unsafe {
            libc::waitid(
                libc::P_ALL,
                0,
                &raw mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        if rc == 0 {
            // SAFETY: waitid filled a SIGCHLD siginfo, or left it zero.
            let pid = unsafe { info.si_pid() };
            return if pid == 0 {
                Peeked::Nothing
            } else {
                Peeked::Ended(pid)
            };
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            // ECHILD: no children at all.
            return Peeked::Nothing;
        }
    }
}

enum Reaped {
    Running,
    Ended(i32),
    /// Not a child of ours any more: reaped by something else, which
    /// nothing of the host does (an embedder's `waitpid(-1)` would).
    Gone,
}

impl Reaped {
    /// The raw wait status of an end. One that something else reaped is
    /// unknowable, and ends the job as a `SIGKILL` would (as a monitor that
    /// left no end does).
    fn end(self) -> Option<i32> {
        match self {
            Reaped::Running => None,
            Reaped::Ended(status) => Some(status),
            Reaped::Gone => Some(libc::SIGKILL),
        }
    }
}

/// Reaps `pid` if it has ended.
fn reap(pid: i32) -> Reaped {
    use rustix::process::{Pid, WaitOptions, waitpid};
    let Some(child) = Pid::from_raw(pid) else {
        return Reaped::Gone;
    };
    loop {
        match waitpid(Some(child), WaitOptions::NOHANG) {
            Ok(None) => return Reaped::Running,
            Ok(Some((_, status))) => return Reaped::Ended(status.as_raw()),
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return Reaped::Gone,
        }
    }
}
