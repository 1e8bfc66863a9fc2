//! Giving the allocator's free memory back after a burst of starts.
//!
//! A burst of thousands of starts leaves glibc holding, free but mapped,
//! what the burst's requests, answers and spawn specs took (about 3.5 KB a
//! job in the live-jobs figure), spread over the arenas of the threads that
//! allocated it. A quiet moment after the burst is when giving it back costs
//! nothing a start waits for.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// How long after the last start the burst counts as over.
const QUIET: Duration = Duration::from_millis(250);

/// Counts starts and trims the heap once they stop coming.
#[derive(Default)]
pub(super) struct Trim {
    starts: AtomicU64,
    /// A task waits for the quiet moment already.
    pending: AtomicBool,
}

impl Trim {
    /// One more start; the first of a burst sets a task waiting for its end.
    pub(super) fn after_start(self: &Arc<Self>, handle: &tokio::runtime::Handle) {
        self.starts.fetch_add(1, Ordering::Relaxed);
        if self.pending.swap(true, Ordering::AcqRel) {
            return;
        }
        let trim = self.clone();
        handle.spawn(async move {
            loop {
                let seen = trim.starts.load(Ordering::Relaxed);
                tokio::time::sleep(QUIET).await;
                if trim.starts.load(Ordering::Relaxed) == seen {
                    break;
                }
            }
            trim.pending.store(false, Ordering::Release);
            // It walks every arena under its lock: not on an async worker.
            let _ = tokio::task::spawn_blocking(give_back).await;
        });
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn give_back() {
    // SAFETY: malloc_trim only returns free pages to the kernel.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Other allocators return memory on their own terms.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn give_back() {}
