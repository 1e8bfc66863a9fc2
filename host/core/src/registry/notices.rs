//! Announcements: who may announce a settled job, batched pulls, and wake
//! budgets.

use super::{JobRegistry, JobSnapshot, lock};
use crate::owner::{MessageSource, Owner};

impl JobRegistry {
    /// Wake-ups spent for this exact owner object since its last user message.
    pub fn wakes_spent(&self, owner: &Owner) -> u64 {
        lock(&self.shared.state)
            .wakes
            .get(&owner.instance())
            .copied()
            .unwrap_or(0)
    }

    /// Records one wake-up spent for this exact owner object.
    pub fn record_wake(&self, owner: &Owner) {
        *lock(&self.shared.state)
            .wakes
            .entry(owner.instance())
            .or_insert(0) += 1;
    }

    /// Claims the right to announce a settled job's outcome: true exactly once, and
    /// only while nothing else has observed it (a read, a wait, a kill, teardown,
    /// or an earlier notice). The job is then marked reported.
    pub fn claim_notice(&self, id: &str) -> bool {
        let mut state = lock(&self.shared.state);
        match state.records.get_mut(id) {
            Some(r) if r.status.is_terminal() && !r.reported && r.wait_holds == 0 && !r.noticed => {
                r.reported = true;
                r.noticed = true;
                true
            }
            _ => false,
        }
    }

    /// Takes the settled jobs of this exact owner object that no notice has
    /// announced yet, oldest settlement first, and marks them announced (and
    /// reported). For surfaces that pull one batched notice before each step
    /// (profile C): unlike [`JobRegistry::claim_notice`], a job whose outcome was
    /// already seen through a read or a wait is still taken.
    pub fn drain_settled(&self, owner: &Owner) -> Vec<JobSnapshot> {
        let mut state = lock(&self.shared.state);
        // A per-owner listing: it walks the records, as a list does.
        let mut drained: Vec<(Option<u64>, u64)> = state
            .records
            .iter()
            .filter(|(_, r)| {
                r.status.is_terminal()
                    && !r.noticed
                    && r.owner.as_ref().is_some_and(|o| o.same_instance(owner))
            })
            .map(|(seq, r)| (r.finished_at, seq))
            .collect();
        // Oldest settlement first; jobs settled in the same millisecond keep
        // registration order.
        drained.sort_unstable();
        drained
            .into_iter()
            .filter_map(|(_, seq)| {
                let r = state.records.get_by_seq_mut(seq)?;
                r.noticed = true;
                r.reported = true;
                Some(r.snapshot())
            })
            .collect()
    }

    /// The harness reports that `owner` claimed a queued message into a step. A
    /// message a person wrote refills the owner's wake budget; the plugin's own
    /// notices and anything else never do.
    pub fn inbox_claimed(&self, owner: &Owner, source: MessageSource) {
        if source == MessageSource::User {
            lock(&self.shared.state).wakes.remove(&owner.instance());
        }
    }
}
