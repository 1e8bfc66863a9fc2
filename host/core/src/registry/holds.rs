//! Wait holds: a wait that saw a job's end holds its notice back only until
//! its caller has shown the outcome.
//!
//! The contract counts a wait that sees the end as an observation, so no
//! completion notice is sent for it. But a wait is only half of a call: the
//! read that shows the outcome comes after it, and the caller may be gone by
//! then (an MCP client cancelled the request, an embedder dropped the future).
//! Marking the job reported at the wait would then lose both the output and
//! the notice. So a counted wait takes a hold instead: while any hold is
//! taken the job counts as reported (no notice goes out), and the hold is
//! either confirmed (the outcome was shown: the job is reported for good) or
//! released (nobody saw it: the notice is owed again, and the mounts that
//! hear the owner are told through [`JobRegistry::on_notice_owed_in`]).

use std::panic::{AssertUnwindSafe, catch_unwind};

use super::{JobRegistry, lock, panic_message};

/// A wait's hold on a job's notice; see the module docs. Dropping it without
/// [`WaitHold::confirm`] releases it.
#[must_use = "dropping a hold releases it: the job's notice is owed again"]
pub struct WaitHold {
    held: Option<(JobRegistry, String)>,
}

impl WaitHold {
    /// No hold: the wait did not see the job's end.
    pub(super) fn none() -> WaitHold {
        WaitHold { held: None }
    }

    /// A hold already counted on the record of `id`.
    pub(super) fn taken(registry: &JobRegistry, id: &str) -> WaitHold {
        WaitHold {
            held: Some((registry.clone(), id.to_owned())),
        }
    }

    /// Whether this wait holds the job's notice back.
    pub fn is_held(&self) -> bool {
        self.held.is_some()
    }

    /// The caller showed the outcome: the job stays reported.
    pub fn confirm(mut self) {
        if let Some((registry, id)) = self.held.take() {
            registry.release_hold(&id, true);
        }
    }
}

impl Drop for WaitHold {
    fn drop(&mut self) {
        if let Some((registry, id)) = self.held.take() {
            registry.release_hold(&id, false);
        }
    }
}

impl JobRegistry {
    /// Gives back one wait hold on `id`. `shown`: its caller saw the outcome,
    /// so the job is reported. Otherwise, once no other hold remains and
    /// nothing else showed the outcome, the job's notice is owed again.
    pub(super) fn release_hold(&self, id: &str, shown: bool) {
        let mut state = lock(&self.shared.state);
        let Some(record) = state.records.get_mut(id) else {
            return;
        };
        record.wait_holds = record.wait_holds.saturating_sub(1);
        if shown {
            record.reported = true;
            return;
        }
        let owed = record.wait_holds == 0
            && !record.reported
            && !record.noticed
            && record.status.is_terminal();
        let Some(owner) = record.owner.clone().filter(|_| owed) else {
            return;
        };
        let snapshot = record.snapshot();
        if state.listeners_closed {
            return;
        }
        let listeners = state.owed_listeners.routed(&state.chain(Some(&owner)));
        drop(state);
        for listener in listeners {
            if let Err(panic) = catch_unwind(AssertUnwindSafe(|| listener(&snapshot, Some(&owner))))
            {
                tracing::warn!(
                    "jobs: notice-owed listener threw for {id}: {}",
                    panic_message(&*panic)
                );
            }
        }
    }
}
