//! Start, settlement and teardown.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::watch;

use super::{
    JobHooks, JobOutcome, JobRecord, JobRegistry, JobStart, JobStatus, MAX_SAFE_INTEGER,
    OutcomeStatus, StartError, announce_to, bounded_label, lock, notify_changed, panic_message,
};
use crate::owner::Owner;
use crate::sync::LazyWatch;

impl JobRegistry {
    /// Registers a job. Preflight runs in the contract's order (controller fence,
    /// kind, label, cap, owner, admission); only then is `run` called, once. The
    /// id's number is taken only after `run` succeeds, so a refused or failed start
    /// uses up no number.
    ///
    /// # Errors
    ///
    /// A [`StartError`]; nothing is registered. A producer's own error is
    /// [`StartError::Producer`] with its text, as the model reads it.
    pub fn start(
        &self,
        spec: JobStart,
        run: impl FnOnce() -> Result<JobHooks, String>,
    ) -> Result<String, StartError> {
        let mut state = lock(&self.shared.state);
        let chain = state.chain(spec.owner.as_ref());
        if !state.controllers.serves(&chain) {
            return Err(StartError::NoController);
        }
        if spec.kind.is_empty() {
            return Err(StartError::InvalidKind);
        }
        if spec.label.is_empty() {
            return Err(StartError::InvalidLabel);
        }
        if let Some(limit) = spec.output_limit_bytes
            && (limit == 0 || limit > MAX_SAFE_INTEGER)
        {
            return Err(StartError::InvalidOutputLimit(limit));
        }
        if let Some(owner) = &spec.owner
            && !self.shared.agents.is_live(owner)
        {
            return Err(StartError::StaleOwner(owner.session_id().to_owned()));
        }
        let limit = self.shared.config.max_concurrent_jobs_per_owner();
        let live = state
            .live
            .get(&spec.owner.as_ref().map(Owner::instance))
            .copied()
            .unwrap_or(0);
        if live >= limit {
            return Err(StartError::LimitReached(limit));
        }
        // The producer starts its work without the lock (a spawn must not stall
        // every other registry call); the admission slot is held meanwhile.
        let owner = spec.owner.as_ref();
        let teardowns = |state: &super::State| {
            let count = |key| state.teardowns.get(&key).copied().unwrap_or(0);
            (count(None), owner.map(|o| count(Some(o.instance()))))
        };
        let before = teardowns(&state);
        state.add_live(owner);
        drop(state);
        let hooks = match run() {
            Ok(hooks) => hooks,
            Err(error) => {
                lock(&self.shared.state).remove_live(owner);
                return Err(StartError::Producer(error));
            }
        };
        let mut state = lock(&self.shared.state);
        // Torn down while the producer started: the work must not outlive it.
        let torn_down = teardowns(&state) != before;
        if torn_down {
            state.remove_live(owner);
            drop(state);
            let mut hooks = hooks;
            let _ = (hooks.cancel)(Some(super::OWNER_DISPOSED));
            // Let the producer release what it holds.
            tokio::spawn(hooks.done);
            return Err(match owner {
                Some(o) => StartError::StaleOwner(o.session_id().to_owned()),
                None => StartError::NoController,
            });
        }
        let counter = state.counters.entry(spec.kind.clone()).or_insert(0);
        *counter += 1;
        let id = format!("{}-{}", spec.kind, counter);
        let started_at = self.now_ms();
        Ok(self.register(state, id, spec, started_at, false, hooks))
    }

    /// Registers a job that began before this registry existed (its host
    /// restarted, and its process lived on), under its old id and start
    /// time: the same checks as [`JobRegistry::start`] but admission (it
    /// runs already), and the kind's numbering goes on past its id. Its
    /// `done` settles it as any job's does, with its notice owed unless
    /// `reported` (the model saw its end, or was told of it, before).
    ///
    /// # Errors
    ///
    /// A [`StartError`]; an id that is not `<kind>-<n>`, or that a job here
    /// already has, is a producer error. Nothing is registered then (and
    /// `hooks` is dropped: its job is not cancelled).
    pub fn adopt(
        &self,
        spec: JobStart,
        id: &str,
        started_at: u64,
        reported: bool,
        hooks: JobHooks,
    ) -> Result<String, StartError> {
        let n = id
            .strip_prefix(&spec.kind)
            .and_then(|rest| rest.strip_prefix('-'))
            .and_then(|n| n.parse::<u64>().ok())
            .ok_or_else(|| StartError::Producer(format!("{id:?} is not a {} id", spec.kind)))?;
        let mut state = lock(&self.shared.state);
        let chain = state.chain(spec.owner.as_ref());
        if !state.controllers.serves(&chain) {
            return Err(StartError::NoController);
        }
        if spec.kind.is_empty() {
            return Err(StartError::InvalidKind);
        }
        if spec.label.is_empty() {
            return Err(StartError::InvalidLabel);
        }
        if let Some(owner) = &spec.owner
            && !self.shared.agents.is_live(owner)
        {
            return Err(StartError::StaleOwner(owner.session_id().to_owned()));
        }
        if state.records.get(id).is_some() {
            return Err(StartError::Producer(format!("a job here is already {id}")));
        }
        state.add_live(spec.owner.as_ref());
        let counter = state.counters.entry(spec.kind.clone()).or_insert(0);
        *counter = (*counter).max(n);
        Ok(self.register(state, id.to_owned(), spec, started_at, reported, hooks))
    }

    /// Inserts the record of a job that `start` or `adopt` admitted (the
    /// lock still held), then, without the lock, waits for its producer's
    /// `done` to settle it and tells the observers; answers its id.
    fn register(
        &self,
        mut state: std::sync::MutexGuard<'_, super::State>,
        id: String,
        spec: JobStart,
        started_at: u64,
        reported: bool,
        hooks: JobHooks,
    ) -> String {
        state.records.insert(
            id.clone(),
            JobRecord {
                id: id.clone(),
                kind: spec.kind,
                label: bounded_label(spec.label),
                output_limit_bytes: spec.output_limit_bytes,
                owner: spec.owner.clone(),
                status: JobStatus::Running,
                detail: None,
                output: None,
                started_at,
                finished_at: None,
                reported,
                sandbox: spec.sandbox.clone(),
                placement: hooks.placement,
                noticed: false,
                wait_holds: 0,
                waiters: Vec::new(),
                cancel: hooks.cancel,
                capture: hooks.capture,
                read_output: hooks.read_output,
                output_excerpt: hooks.output_excerpt,
                control: hooks.control,
                settled: LazyWatch::new(false),
                announced: Arc::new(LazyWatch::new(false)),
                recorded: None,
            },
        );
        let changed = state.changed_for(spec.owner.as_ref());
        drop(state);
        let registry = Arc::downgrade(&self.shared);
        let done = hooks.done;
        let job_id = id.clone();
        tokio::spawn(async move {
            let outcome = done.await;
            if let Some(shared) = registry.upgrade() {
                JobRegistry { shared }.settle(&job_id, outcome);
            }
        });
        notify_changed(&changed, spec.owner.as_ref());
        id
    }

    /// Records a job's outcome: first-wins, then waiters released, then the
    /// changed observers, then the completion listeners, in that order.
    fn settle(&self, id: &str, outcome: Result<JobOutcome, String>) {
        let outcome = outcome.unwrap_or_else(|err| {
            tracing::warn!("{}", crate::words::done_rejected(id, &err));
            JobOutcome {
                status: OutcomeStatus::Failed,
                detail: Some(err),
                output: None,
            }
        });
        let mut state = lock(&self.shared.state);
        let now = self.now_ms();
        let Some(record) = state.records.get_mut(id) else {
            return;
        };
        if record.status.is_terminal() {
            return;
        }
        record.status = match outcome.status {
            OutcomeStatus::Completed => JobStatus::Completed,
            OutcomeStatus::Killed => JobStatus::Killed,
            OutcomeStatus::Failed => JobStatus::Failed,
        };
        record.detail = outcome.detail;
        record.output = outcome.output;
        record.finished_at = Some(now.max(record.started_at));
        // A wait whose caller already aborted no longer counts, exactly as if it
        // had been removed at the moment of the abort.
        // Each counted wait holds the notice back until its caller shows the
        // outcome or gives up (see `holds`).
        for waiter in record.waiters.iter().filter(|w| !w.abort.is_cancelled()) {
            waiter.counted.store(true, Ordering::SeqCst);
            record.wait_holds += 1;
        }
        let snapshot = record.snapshot();
        let owner = record.owner.clone();
        let announced = record.announced.clone();
        record.settled.send_replace(true);
        state.remove_live(owner.as_ref());
        let limit = self.shared.config.max_retained_per_owner();
        state.retire(id, owner.as_ref(), limit);
        let changed = state.changed_for(owner.as_ref());
        let done = if state.listeners_closed {
            Vec::new()
        } else {
            state.done_listeners.routed(&state.chain(owner.as_ref()))
        };
        drop(state);

        notify_changed(&changed, owner.as_ref());
        for listener in done {
            if let Err(panic) =
                catch_unwind(AssertUnwindSafe(|| listener(&snapshot, owner.as_ref())))
            {
                tracing::warn!(
                    "{}",
                    crate::words::done_listener_failed(id, &panic_message(&*panic))
                );
            }
        }
        announced.send_replace(true);
    }

    /// Disposes of an owner: its live jobs are marked reported (so no notice is
    /// due) and cancelled with `owner disposed`, the registry waits for them to
    /// settle, then drops every record of this exact owner object; later access
    /// to those ids fails with `unknown job`. A cancel that fails force-fails its
    /// job instead of being waited for.
    pub async fn dispose_owner(&self, owner: &Owner) {
        // A start already under way for this owner is undone when it finishes.
        *lock(&self.shared.state)
            .teardowns
            .entry(Some(owner.instance()))
            .or_insert(0) += 1;
        self.tear_down_until_quiet(
            |r| r.owner.as_ref().is_some_and(|o| o.same_instance(owner)),
            super::OWNER_DISPOSED,
        )
        .await;
        let mut state = lock(&self.shared.state);
        let before = state.records.len();
        state
            .records
            .retain(|r| !r.owner.as_ref().is_some_and(|o| o.same_instance(owner)));
        let had_records = state.records.len() != before;
        state.wakes.remove(&owner.instance());
        state.finished.remove(&Some(owner.instance()));
        let changed = state.changed_for(Some(owner));
        drop(state);
        if had_records {
            notify_changed(&changed, Some(owner));
        }
    }

    /// Disposes of the whole service: completion listeners are closed for good,
    /// every live job is cancelled with `jobs service disposed` (marked reported
    /// first), the registry waits for them, clears every record, and announces the
    /// emptied set to each owner and to unowned observers.
    pub async fn dispose(&self) {
        {
            let mut state = lock(&self.shared.state);
            state.listeners_closed = true;
        }
        self.tear_down_until_quiet(|_| true, super::SERVICE_DISPOSED)
            .await;
        let mut state = lock(&self.shared.state);
        let mut owners: Vec<Option<Owner>> = Vec::new();
        for record in state.records.drain() {
            let seen = owners.iter().any(|o| match (o, &record.owner) {
                (Some(a), Some(b)) => a.same_instance(b),
                (None, None) => true,
                _ => false,
            });
            if !seen {
                owners.push(record.owner);
            }
        }
        state.wakes.clear();
        state.live.clear();
        state.finished.clear();
        *state.teardowns.entry(None).or_insert(0) += 1;
        announce_to(state, owners);
    }

    /// Tears down every live record matching `which` and waits for them to
    /// settle, again and again while a start that was under way registers
    /// another, so that nothing live matching `which` is left.
    async fn tear_down_until_quiet(&self, which: impl Fn(&JobRecord) -> bool, reason: &str) {
        for _ in 0..1000 {
            let pending = self.tear_down(&which, reason);
            if pending.is_empty() {
                return;
            }
            for mut rx in pending {
                let _ = rx.wait_for(|done| *done).await;
            }
        }
    }

    /// Marks every live record matching `which` reported, then cancels it with
    /// `reason`. Returns the settlement signals to wait for; a record whose cancel
    /// failed is force-failed at once and not waited for.
    fn tear_down(
        &self,
        which: impl Fn(&JobRecord) -> bool,
        reason: &str,
    ) -> Vec<watch::Receiver<bool>> {
        let mut state = lock(&self.shared.state);
        let mut pending = Vec::new();
        let mut stopped = Vec::new();
        let mut failed = Vec::new();
        for record in state
            .records
            .values_mut()
            .filter(|r| !r.status.is_terminal() && which(r))
        {
            // Reported before cancel, so even a failed cancel announces nothing.
            record.reported = true;
            match (record.cancel)(Some(reason)) {
                Ok(()) => {
                    record.status = JobStatus::Stopping;
                    pending.push(record.settled.subscribe());
                    stopped.push(record.owner.clone());
                }
                Err(err) => {
                    tracing::warn!(
                        "{}",
                        crate::words::teardown_cancel_failed(&record.id, &err.to_string())
                    );
                    failed.push((record.id.clone(), err));
                }
            }
        }
        announce_to(state, stopped);
        for (id, err) in failed {
            self.settle(
                &id,
                Ok(JobOutcome {
                    status: OutcomeStatus::Failed,
                    detail: Some(format!(
                        "cancel threw during teardown; work may be orphaned: {err}"
                    )),
                    output: None,
                }),
            );
        }
        pending
    }
}
