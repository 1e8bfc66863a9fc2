//! How much a capture may hold: the in-memory tail and spill file of each
//! stream, and the disk budget every spill file of one producer shares.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::Capture;
use crate::sync::lock;

/// Size limits for one captured process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimits {
    /// In-memory tail kept per stream.
    pub max_output_bytes: usize,
    /// Largest spill file per stream; a longer stream keeps only its tail.
    pub max_spill_bytes: u64,
}

impl Default for OutputLimits {
    fn default() -> Self {
        OutputLimits {
            max_output_bytes: 64_000,
            max_spill_bytes: 64 << 20,
        }
    }
}

/// A disk budget shared by every spill file of one producer (a session). When a
/// stream needs more than is left, the spill files of the oldest finished jobs
/// are deleted first; their later reads say the output is unavailable, as for any
/// stream past its own spill limit. If that is not enough, the writing stream
/// gives up its own spill file.
pub struct SpillBudget {
    limit: u64,
    used: AtomicU64,
    finished: Mutex<VecDeque<Weak<Mutex<Capture>>>>,
}

impl SpillBudget {
    /// A budget of `limit` bytes in all.
    pub fn new(limit: u64) -> Arc<SpillBudget> {
        Arc::new(SpillBudget {
            limit,
            used: AtomicU64::new(0),
            finished: Mutex::new(VecDeque::new()),
        })
    }

    /// Bytes of spill files on disk now.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::SeqCst)
    }

    /// Marks a job's capture finished: its spill files may now be dropped to make
    /// room for running jobs, oldest first.
    pub(crate) fn finished(&self, capture: &Arc<Mutex<Capture>>) {
        let mut finished = lock(&self.finished);
        finished.push_back(Arc::downgrade(capture));
        // The registry drops the oldest finished jobs first, so their captures
        // die at the front; a dead entry would still pin its allocation.
        while finished.front().is_some_and(|w| w.strong_count() == 0) {
            finished.pop_front();
        }
    }

    pub(super) fn release(&self, bytes: u64) {
        let _ = self
            .used
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |u| {
                Some(u.saturating_sub(bytes))
            });
    }

    /// Takes `bytes` from the budget, evicting finished jobs' spill files as
    /// needed. False when even that leaves too little.
    pub(super) fn reserve(&self, bytes: u64) -> bool {
        loop {
            let used = self.used.load(Ordering::SeqCst);
            if used.saturating_add(bytes) <= self.limit {
                if self
                    .used
                    .compare_exchange(used, used + bytes, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
                {
                    return true;
                }
                continue;
            }
            let oldest = lock(&self.finished).pop_front();
            let Some(oldest) = oldest else {
                return false;
            };
            if let Some(capture) = oldest.upgrade() {
                lock(&capture).discard_spills();
            }
        }
    }
}

#[cfg(test)]
impl SpillBudget {
    /// Finished captures still remembered (dead ones included).
    pub(super) fn finished_len(&self) -> usize {
        lock(&self.finished).len()
    }
}
