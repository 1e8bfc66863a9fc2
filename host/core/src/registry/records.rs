//! The records themselves: by registration order for listing, by id for
//! everything else, both without walking the rest.

use std::collections::{BTreeMap, HashMap};

use super::JobRecord;

/// Every job record, in registration order, found by id in O(log n).
#[derive(Default)]
pub(super) struct Records {
    /// Registration sequence number to record: iteration is registration order.
    by_seq: BTreeMap<u64, JobRecord>,
    /// Id to registration sequence number.
    seq_of: HashMap<String, u64>,
    next_seq: u64,
}

impl Records {
    pub(super) fn get(&self, id: &str) -> Option<&JobRecord> {
        self.by_seq.get(self.seq_of.get(id)?)
    }

    pub(super) fn get_mut(&mut self, id: &str) -> Option<&mut JobRecord> {
        self.by_seq.get_mut(self.seq_of.get(id)?)
    }

    /// The record registered `seq`-th.
    pub(super) fn get_by_seq_mut(&mut self, seq: u64) -> Option<&mut JobRecord> {
        self.by_seq.get_mut(&seq)
    }

    /// Adds a record after every other one.
    pub(super) fn insert(&mut self, id: String, record: JobRecord) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.seq_of.insert(id, seq);
        self.by_seq.insert(seq, record);
    }

    pub(super) fn remove(&mut self, id: &str) -> Option<JobRecord> {
        let seq = self.seq_of.remove(id)?;
        self.by_seq.remove(&seq)
    }

    pub(super) fn len(&self) -> usize {
        self.by_seq.len()
    }

    /// Records in registration order.
    pub(super) fn values(&self) -> impl Iterator<Item = &JobRecord> {
        self.by_seq.values()
    }

    /// Records with their sequence numbers, in registration order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (u64, &JobRecord)> {
        self.by_seq.iter().map(|(seq, r)| (*seq, r))
    }

    /// Records in registration order, mutably.
    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut JobRecord> {
        self.by_seq.values_mut()
    }

    /// Keeps the records `keep` accepts.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(&JobRecord) -> bool) {
        let seq_of = &mut self.seq_of;
        self.by_seq.retain(|_, record| {
            let kept = keep(record);
            if !kept {
                seq_of.remove(&record.id);
            }
            kept
        });
    }

    /// Takes every record, in registration order.
    pub(super) fn drain(&mut self) -> Vec<JobRecord> {
        self.seq_of.clear();
        std::mem::take(&mut self.by_seq).into_values().collect()
    }
}
