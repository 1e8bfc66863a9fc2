//! The records themselves: by registration order for listing, by id for
//! everything else, both without walking the rest.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::JobRecord;

/// Every job record, in registration order, found by id in O(log n).
#[derive(Default)]
pub(super) struct Records {
    /// Registration sequence number to record: iteration is registration order.
    by_seq: BTreeMap<u64, JobRecord>,
    /// Id to registration sequence number.
    seq_of: HashMap<String, u64>,
    next_seq: u64,
    /// The records taken mutably (or added) since they were last seen
    /// unchanged ([`Records::untouch`]): every change to a record is made
    /// through a mutable borrow under the registry's lock, so the records a
    /// host that outlives a crash must write again are among these, and it
    /// need not look at the others.
    touched: BTreeSet<u64>,
    /// Records removed so far (see [`Records::removals`]).
    removals: u64,
}

impl Records {
    pub(super) fn get(&self, id: &str) -> Option<&JobRecord> {
        self.by_seq.get(self.seq_of.get(id)?)
    }

    pub(super) fn get_mut(&mut self, id: &str) -> Option<&mut JobRecord> {
        let seq = *self.seq_of.get(id)?;
        self.get_by_seq_mut(seq)
    }

    /// The record registered `seq`-th.
    pub(super) fn get_by_seq_mut(&mut self, seq: u64) -> Option<&mut JobRecord> {
        let record = self.by_seq.get_mut(&seq)?;
        self.touched.insert(seq);
        Some(record)
    }

    /// [`Records::get_mut`] without counting the record as touched, with
    /// its sequence number: for marking what was written of it.
    pub(super) fn get_mut_untouched(&mut self, id: &str) -> Option<(u64, &mut JobRecord)> {
        let seq = *self.seq_of.get(id)?;
        Some((seq, self.by_seq.get_mut(&seq)?))
    }

    /// The records touched (see [`Records::touched`]) in registration
    /// order, with their sequence numbers.
    pub(super) fn touched(&self) -> impl Iterator<Item = (u64, &JobRecord)> {
        self.touched
            .iter()
            .filter_map(|seq| Some((*seq, self.by_seq.get(seq)?)))
    }

    /// Counts the record registered `seq`-th as untouched again: seen with
    /// nothing left to write.
    pub(super) fn untouch(&mut self, seq: u64) {
        self.touched.remove(&seq);
    }

    /// Adds a record after every other one.
    pub(super) fn insert(&mut self, id: String, record: JobRecord) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.seq_of.insert(id, seq);
        self.by_seq.insert(seq, record);
        self.touched.insert(seq);
    }

    pub(super) fn remove(&mut self, id: &str) -> Option<JobRecord> {
        let seq = self.seq_of.remove(id)?;
        self.touched.remove(&seq);
        self.removals += 1;
        self.by_seq.remove(&seq)
    }

    /// How many records were ever removed: a host that keeps a copy of
    /// the records needs to look for the ones gone only when this moved.
    pub(super) fn removals(&self) -> u64 {
        self.removals
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
        self.touched.extend(self.by_seq.keys().copied());
        self.by_seq.values_mut()
    }

    /// Keeps the records `keep` accepts.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(&JobRecord) -> bool) {
        let (seq_of, touched, removals) = (&mut self.seq_of, &mut self.touched, &mut self.removals);
        self.by_seq.retain(|seq, record| {
            let kept = keep(record);
            if !kept {
                seq_of.remove(&record.id);
                touched.remove(seq);
                *removals += 1;
            }
            kept
        });
    }

    /// Takes every record, in registration order.
    pub(super) fn drain(&mut self) -> Vec<JobRecord> {
        self.seq_of.clear();
        self.touched.clear();
        self.removals += self.by_seq.len() as u64;
        std::mem::take(&mut self.by_seq).into_values().collect()
    }
}
