//! Idle exit as one guard type, after conmon-rs's `inactivity.rs`: every
//! connection and every session holds an [`Activity`] while it lives, and
//! the daemon exits once none has been held, and nothing has changed, for
//! its idle time.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::watch;

/// What keeps the daemon from exiting: the live [`Activity`] guards, and
/// when anything last changed.
pub(super) struct Inactivity {
    active: AtomicUsize,
    /// Bumped at every change, so an idle time that something happened
    /// during starts again.
    changes: watch::Sender<u64>,
    after: Duration,
}

/// Held while a connection or a session lives; its drop is a change.
pub(super) struct Activity(Arc<Inactivity>);

impl Inactivity {
    /// Idle once nothing is held, and nothing changed, for `after`.
    pub(super) fn new(after: Duration) -> Arc<Inactivity> {
        Arc::new(Inactivity {
            active: AtomicUsize::new(0),
            changes: watch::channel(0).0,
            after,
        })
    }

    /// A guard that keeps the daemon from idling while it lives.
    pub(super) fn activity(self: &Arc<Self>) -> Activity {
        self.active.fetch_add(1, Ordering::AcqRel);
        self.touch();
        Activity(self.clone())
    }

    /// Something happened: the idle time starts again.
    pub(super) fn touch(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Resolves once no guard has been held, and nothing has changed, for
    /// the idle time.
    pub(super) async fn idle(&self) {
        let mut changes = self.changes.subscribe();
        loop {
            changes.borrow_and_update();
            if self.active.load(Ordering::Acquire) > 0 {
                let _ = changes.changed().await;
                continue;
            }
            tokio::select! {
                () = tokio::time::sleep(self.after) => {
                    if self.active.load(Ordering::Acquire) == 0 && !changes.has_changed().unwrap_or(true) {
                        return;
                    }
                }
                _ = changes.changed() => {}
            }
        }
    }
}

impl Drop for Activity {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::AcqRel);
        self.0.touch();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn idle_only_after_nothing_is_held_for_the_whole_time() {
        let inactivity = Inactivity::new(Duration::from_secs(5));
        let held = inactivity.activity();
        let idle = tokio::spawn({
            let inactivity = inactivity.clone();
            async move { inactivity.idle().await }
        });
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(!idle.is_finished(), "idle while a guard is held");
        drop(held);
        tokio::time::sleep(Duration::from_secs(3)).await;
        // A change within the idle time starts it again.
        inactivity.touch();
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(!idle.is_finished(), "idle though something changed");
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(idle.is_finished());
    }
}
