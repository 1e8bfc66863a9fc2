//! The scheduler's view of a runner's jobs, asked with one `squeue` for all
//! of them per interval, never one call per job: a hundred jobs cost the
//! scheduler what one does.
//!
//! The interval is [`FIRST`] after a change (a job watched, a state that
//! changed, a job that asks soon) and doubles while nothing changes, up to
//! [`MOST`]. A change shortens the wait to at most [`FIRST`] after the last
//! `squeue`, never to none: a burst of a hundred starts or stops costs one
//! call, not a hundred. Most ends are found sooner than that by the
//! job's exit record (see `job`); the poll finds the rest: a job cancelled
//! before it ran, a node that died, a job the scheduler forgot.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::watch;

use super::cli::{self, Listed};
use crate::sync::lock;

/// The interval after a change.
pub(super) const FIRST: Duration = Duration::from_secs(1);
/// The longest interval, while nothing changes.
pub(super) const MOST: Duration = Duration::from_secs(8);

/// What the latest `squeue` said of one job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Seen {
    /// No `squeue` has run since the job was watched.
    NotYet,
    /// Listed, in this state.
    Listed(Listed),
    /// Absent from an answer asked after the job was watched: the
    /// scheduler no longer knows it (past `MinJobAge`, or never).
    Absent,
    /// `squeue` failed (slurmctld away); the job may run on.
    Unreachable(String),
}

/// The runner's poller. Cheap to clone; its task ends when the last clone
/// goes.
#[derive(Clone)]
pub(super) struct Poller {
    shared: Arc<Shared>,
}

struct Shared {
    jobs: Mutex<HashMap<String, watch::Sender<Seen>>>,
    /// Set for an answer within [`FIRST`] of the last one.
    soon: AtomicBool,
    started: std::sync::OnceLock<()>,
}

/// A job's place in the poll, let go of when dropped.
pub(super) struct Watched {
    id: String,
    shared: Weak<Shared>,
    /// What the scheduler says of the job, as each poll answers.
    pub(super) seen: watch::Receiver<Seen>,
}

impl Drop for Watched {
    fn drop(&mut self) {
        if let Some(shared) = self.shared.upgrade() {
            lock(&shared.jobs).remove(&self.id);
        }
    }
}

impl Watched {
    /// Asks the poller for an answer within [`FIRST`] (a stop under way).
    pub(super) fn soon(&self) {
        if let Some(shared) = self.shared.upgrade() {
            shared.soon.store(true, Ordering::Relaxed);
        }
    }
}

impl Poller {
    pub(super) fn new() -> Poller {
        Poller {
            shared: Arc::new(Shared {
                jobs: Mutex::new(HashMap::new()),
                soon: AtomicBool::new(false),
                started: std::sync::OnceLock::new(),
            }),
        }
    }

    /// Puts the job `id` in the poll, answered from the next `squeue` on.
    /// Starts the poll's task on first use (within a runtime).
    pub(super) fn watch(&self, id: &str) -> Watched {
        let (tx, seen) = watch::channel(Seen::NotYet);
        lock(&self.shared.jobs).insert(id.to_owned(), tx);
        self.shared.started.get_or_init(|| {
            tokio::spawn(poll(Arc::downgrade(&self.shared)));
        });
        self.shared.soon.store(true, Ordering::Relaxed);
        Watched {
            id: id.to_owned(),
            shared: Arc::downgrade(&self.shared),
            seen,
        }
    }
}

async fn poll(shared: Weak<Shared>) {
    let mut interval = FIRST;
    loop {
        let Some(strong) = shared.upgrade() else {
            return;
        };
        // Only the jobs watched before this `squeue` began can be absent
        // from its answer.
        let ids: Vec<String> = lock(&strong.jobs).keys().cloned().collect();
        let answer = cli::squeue(&ids).await;
        let mut changed = false;
        {
            let jobs = lock(&strong.jobs);
            for id in &ids {
                let Some(tx) = jobs.get(id) else {
                    continue;
                };
                let seen = match &answer {
                    Ok(rows) => rows.get(id).cloned().map_or(Seen::Absent, Seen::Listed),
                    Err(e) => Seen::Unreachable(e.to_string()),
                };
                changed |= tx.send_if_modified(|old| {
                    let new = *old != seen;
                    *old = seen;
                    new
                });
            }
        }
        interval = if changed {
            FIRST
        } else {
            (interval * 2).min(MOST)
        };
        drop(strong);
        let since = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(FIRST).await;
            let Some(strong) = shared.upgrade() else {
                return;
            };
            if strong.soon.swap(false, Ordering::Relaxed) {
                interval = FIRST;
                break;
            }
            if since.elapsed() >= interval {
                break;
            }
        }
    }
}
