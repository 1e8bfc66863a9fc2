//! The owner-fenced operations: list, get, read, output, kill and wait.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{
    JobRecord, JobRegistry, JobSnapshot, JobStatus, KillOutcome, MAX_TIMER_DELAY_MS, RegistryError,
    WaiterSlot, lock, notify_changed,
};
use crate::excerpt::{Excerpt, ExcerptWindow, text_excerpt};
use crate::owner::Owner;

impl JobRegistry {
    fn with_visible<T>(
        &self,
        id: &str,
        caller: Option<&Owner>,
        f: impl FnOnce(&mut JobRecord) -> Result<T, RegistryError>,
    ) -> Result<T, RegistryError> {
        let mut state = lock(&self.shared.state);
        let record = state
            .records
            .get_mut(id)
            .ok_or_else(|| RegistryError::UnknownJob(id.to_owned()))?;
        if !record.visible_to(caller) {
            return Err(RegistryError::ForeignJob(id.to_owned()));
        }
        f(record)
    }

    /// The caller's jobs plus all unowned jobs, in registration order. A caller
    /// with no agent sees unowned jobs only.
    pub fn list(&self, caller: Option<&Owner>) -> Vec<JobSnapshot> {
        lock(&self.shared.state)
            .records
            .values()
            .filter(|r| r.visible_to(caller))
            .map(JobRecord::snapshot)
            .collect()
    }

    /// A snapshot for the embedder itself (a UI, a log), with no owner fence and
    /// no side effects; `None` for an unknown id.
    pub fn inspect(&self, id: &str) -> Option<JobSnapshot> {
        lock(&self.shared.state)
            .records
            .get(id)
            .map(JobRecord::snapshot)
    }

    /// A non-consuming snapshot.
    ///
    /// # Errors
    ///
    /// Unknown or foreign job.
    pub fn get(&self, id: &str, caller: Option<&Owner>) -> Result<JobSnapshot, RegistryError> {
        self.with_visible(id, caller, |r| Ok(r.snapshot()))
    }

    /// Reads a job: a stream job's delta since the previous read (consuming), or a
    /// final-output job's result once terminal (idempotent). A read of a terminal
    /// job marks it reported.
    ///
    /// # Errors
    ///
    /// Unknown or foreign job, or the producer's read failing.
    pub fn read(
        &self,
        id: &str,
        caller: Option<&Owner>,
    ) -> Result<(String, JobSnapshot), RegistryError> {
        self.with_visible(id, caller, |r| {
            let text = match r.read_output.as_mut() {
                Some(read) => read().map_err(RegistryError::ProducerFailed)?,
                None if r.status.is_terminal() => r.output.clone().unwrap_or_default(),
                None => String::new(),
            };
            if r.status.is_terminal() {
                r.reported = true;
            }
            Ok((text, r.snapshot()))
        })
    }

    /// The job's whole output so far, or its two ends (see
    /// [`crate::excerpt::excerpt`]), with a snapshot. Nothing is consumed and the
    /// job is not marked reported. A final-output job shows `""` until it
    /// settles.
    ///
    /// # Errors
    ///
    /// Unknown or foreign job; the producer's excerpt failing, or missing on a
    /// stream job.
    pub fn output(
        &self,
        id: &str,
        caller: Option<&Owner>,
        window: ExcerptWindow,
    ) -> Result<(Excerpt, JobSnapshot), RegistryError> {
        let window = window.clamped();
        self.with_visible(id, caller, |r| {
            let excerpt = match (r.output_excerpt.as_mut(), &r.read_output) {
                (Some(hook), _) => hook(window).map_err(RegistryError::ProducerFailed)?,
                (None, Some(_)) => {
                    return Err(RegistryError::ProducerFailed(format!(
                        "job {} cannot show its whole output",
                        r.id
                    )));
                }
                (None, None) if r.status.is_terminal() => {
                    text_excerpt(r.output.as_deref().unwrap_or_default(), window)
                }
                (None, None) => Excerpt::default(),
            };
            Ok((excerpt, r.snapshot()))
        })
    }

    /// Requests cancellation. A live job's producer cancel runs first; only if it
    /// succeeds does the job move to `stopping` and get marked reported. A terminal
    /// job is marked reported and answers [`KillOutcome::AlreadyFinished`].
    ///
    /// # Errors
    ///
    /// Unknown or foreign job, or the producer's cancel failing (nothing changes).
    pub fn kill(
        &self,
        id: &str,
        caller: Option<&Owner>,
        reason: Option<&str>,
    ) -> Result<KillOutcome, RegistryError> {
        let (outcome, owner) = self.with_visible(id, caller, |r| {
            if r.status.is_terminal() {
                r.reported = true;
                return Ok((KillOutcome::AlreadyFinished, None));
            }
            (r.cancel)(reason).map_err(RegistryError::ProducerFailed)?;
            r.status = JobStatus::Stopping;
            r.reported = true;
            Ok((KillOutcome::Requested, Some(r.owner.clone())))
        })?;
        if let Some(owner) = owner {
            let changed = lock(&self.shared.state).changed_for(owner.as_ref());
            notify_changed(&changed, owner.as_ref());
        }
        Ok(outcome)
    }

    /// Waits until the job is terminal or `timeout_ms` passes, then returns the
    /// current snapshot (marked reported when terminal). Cancelling `abort` while
    /// the job is live fails the wait with [`RegistryError::WaitAborted`]. Waiting
    /// never cancels the job, and no waiter is left behind on any exit.
    ///
    /// # Errors
    ///
    /// Unknown or foreign job (checked first), then an invalid timeout (not
    /// finite, not positive, or above 2147483647 ms), then an abort.
    pub async fn wait(
        &self,
        id: &str,
        timeout_ms: f64,
        caller: Option<&Owner>,
        abort: &CancellationToken,
    ) -> Result<JobSnapshot, RegistryError> {
        let key = self.shared.next_listener.fetch_add(1, Ordering::Relaxed);
        let counted = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut settled = self.with_visible(id, caller, |r| {
            if !timeout_ms.is_finite() || timeout_ms <= 0.0 || timeout_ms > MAX_TIMER_DELAY_MS {
                return Err(RegistryError::InvalidTimeout(timeout_ms));
            }
            if r.status.is_terminal() {
                return Ok(None);
            }
            if abort.is_cancelled() {
                return Err(RegistryError::WaitAborted);
            }
            r.waiters.push(WaiterSlot {
                key,
                abort: abort.clone(),
                counted: counted.clone(),
            });
            Ok(Some(r.settled.subscribe()))
        })?;
        if let Some(rx) = settled.as_mut() {
            let guard = WaiterGuard {
                registry: self,
                id,
                key,
            };
            let deadline = Duration::from_secs_f64(timeout_ms / 1000.0);
            tokio::select! {
                biased;
                _ = rx.wait_for(|done| *done) => {}
                () = tokio::time::sleep(deadline) => {}
                () = abort.cancelled() => {}
            }
            drop(guard);
            // An abort that came before settlement wins; one that came after it does
            // not take back the end this wait already saw.
            if abort.is_cancelled() && !counted.load(Ordering::SeqCst) {
                return Err(RegistryError::WaitAborted);
            }
        }
        self.with_visible(id, caller, |r| {
            if r.status.is_terminal() {
                r.reported = true;
            }
            Ok(r.snapshot())
        })
    }

    /// Returns once job `id` has settled and every completion listener has heard
    /// of it (or the id is unknown). Unlike [`JobRegistry::wait`] it observes
    /// nothing: the job is not marked reported, so its notice is still due. For the
    /// embedder's own bookkeeping (a console, a UI).
    pub async fn settled(&self, id: &str) {
        let rx = {
            let state = lock(&self.shared.state);
            state.records.get(id).map(|r| r.announced.subscribe())
        };
        if let Some(mut rx) = rx {
            let _ = rx.wait_for(|done| *done).await;
        }
    }

    #[cfg(feature = "test-support")]
    /// How many waits are pending on a job (0 for an unknown id).
    pub fn waiter_count(&self, id: &str) -> usize {
        lock(&self.shared.state)
            .records
            .get(id)
            .map_or(0, |r| r.waiters.len())
    }
}

/// Un-counts one waiter however the wait ends, dropped futures included.
struct WaiterGuard<'a> {
    registry: &'a JobRegistry,
    id: &'a str,
    key: u64,
}

impl Drop for WaiterGuard<'_> {
    fn drop(&mut self) {
        let mut state = lock(&self.registry.shared.state);
        if let Some(r) = state.records.get_mut(self.id) {
            r.waiters.retain(|w| w.key != self.key);
        }
    }
}
