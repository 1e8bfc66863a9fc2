//! The session's lease as the monitor keeps it: once its host is gone, the
//! job stops when the deadline in the lease file passes (or stays
//! unreadable), SIGTERM first and SIGKILL after the grace period.

use std::time::Instant;

use super::{LEASE_FILE, Run, STOP_ASKED};

/// The session's lease as the monitor keeps track of it.
#[derive(Default)]
pub(super) struct Lease {
    /// When the monitor sent the job SIGTERM for a passed lease.
    pub(super) stopped_at: Option<Instant>,
    /// The stop was asked for (by a host that adopted the job), not a
    /// passed lease.
    pub(super) asked: bool,
    pub(super) killed: bool,
    /// Reads that found no deadline in a row (a write seen half done).
    pub(super) unreadable: u32,
}

/// The session's deadline from the lease file (decimal epoch ms).
fn read_deadline() -> Option<u64> {
    let mut buf = [0u8; 32];
    // SAFETY: the lease file the host opened for us, read from its start.
    let n = unsafe { libc::pread(LEASE_FILE, buf.as_mut_ptr().cast(), buf.len(), 0) };
    let text = std::str::from_utf8(buf.get(..usize::try_from(n).ok()?)?).ok()?;
    text.trim().parse().ok()
}

impl Run {
    /// With the host gone, stops the job once the session's lease passes:
    /// SIGTERM to all of it, SIGKILL after the grace period.
    pub(super) fn keep_lease(&mut self) {
        if self.lease.killed {
            return;
        }
        if let Some(at) = self.lease.stopped_at {
            if at.elapsed() >= self.grace {
                self.lease.killed = true;
                self.signal_job(libc::SIGKILL);
            }
            return;
        }
        if STOP_ASKED.load(std::sync::atomic::Ordering::SeqCst) {
            self.lease.stopped_at = Some(Instant::now());
            self.lease.asked = true;
            self.signal_job(libc::SIGTERM);
            return;
        }
        // SAFETY: getppid takes no arguments.
        if unsafe { libc::getppid() } == self.parent {
            return;
        }
        match read_deadline() {
            Some(deadline) if crate::registry::now_ms() <= deadline => self.lease.unreadable = 0,
            Some(_) => {
                self.lease.stopped_at = Some(Instant::now());
                self.signal_job(libc::SIGTERM);
            }
            None => {
                // A lease that stays unreadable (gone, cut) is a lease that
                // passed.
                self.lease.unreadable += 1;
                if self.lease.unreadable >= 5 {
                    self.lease.stopped_at = Some(Instant::now());
                    self.signal_job(libc::SIGTERM);
                }
            }
        }
    }
}
