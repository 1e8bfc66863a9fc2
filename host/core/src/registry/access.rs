//! The owner-fenced operations: list, get, read, output, kill and wait.
//!
//! (About 500 lines: the wait alone, with its abort, hold and ready ends, is a
//! third of it, and it reads best beside the reads it fences the same way.)
//!
//! (Over 500 lines: every call an owner makes through its fence, read, wait,
//! kill, list, pages, in one place, so that the fence is checked the same way
//! by each; each call is short.)

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::control::{
    JobControl, JobSignal, LineMatch, LinePage, LineQuery, ListeningPort, ScanState, WaitEnd,
    WaitUntil, compile_pattern,
};
use super::{
    JobRecord, JobRegistry, JobSnapshot, JobStatus, KillOutcome, MAX_TIMER_DELAY_MS, RegistryError,
    WaitHold, WaiterSlot, lock, notify_changed,
};
use crate::capture::{Excerpt, ExcerptWindow, SharedCapture, text_excerpt};
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
            let text = match (&r.capture, r.read_output.as_mut()) {
                (Some(capture), _) => capture.read_delta(),
                (None, Some(read)) => read().map_err(RegistryError::ProducerFailed)?,
                (None, None) if r.status.is_terminal() => r.output.clone().unwrap_or_default(),
                (None, None) => String::new(),
            };
            if r.status.is_terminal() {
                r.reported = true;
            }
            Ok((text, r.snapshot()))
        })
    }

    /// The job's whole output so far, or its two ends (see
    /// [`crate::capture::excerpt`]), with a snapshot. Nothing is consumed and the
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
            let excerpt = match (&r.capture, r.output_excerpt.as_mut(), &r.read_output) {
                (Some(capture), _, _) => capture.excerpt(window),
                (None, Some(hook), _) => hook(window).map_err(RegistryError::ProducerFailed)?,
                (None, None, Some(_)) => {
                    return Err(RegistryError::ProducerFailed(format!(
                        "job {} cannot show its whole output",
                        r.id
                    )));
                }
                (None, None, None) if r.status.is_terminal() => {
                    text_excerpt(r.output.as_deref().unwrap_or_default(), window)
                }
                (None, None, None) => Excerpt::default(),
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

    /// Cancels a live job for the embedder (a person's `kill`), not for its
    /// owner: unlike [`JobRegistry::kill`] the job is not marked reported, so
    /// its owner still gets the notice that it was killed. No owner fence.
    ///
    /// # Errors
    ///
    /// Unknown job, or the producer's cancel failing (nothing changes).
    pub fn cancel(&self, id: &str, reason: Option<&str>) -> Result<KillOutcome, RegistryError> {
        let owner = {
            let mut state = lock(&self.shared.state);
            let record = state
                .records
                .get_mut(id)
                .ok_or_else(|| RegistryError::UnknownJob(id.to_owned()))?;
            if record.status.is_terminal() {
                return Ok(KillOutcome::AlreadyFinished);
            }
            if record.status == JobStatus::Running {
                (record.cancel)(reason).map_err(RegistryError::ProducerFailed)?;
                record.status = JobStatus::Stopping;
            }
            record.owner.clone()
        };
        let changed = lock(&self.shared.state).changed_for(owner.as_ref());
        notify_changed(&changed, owner.as_ref());
        Ok(KillOutcome::Requested)
    }

    /// The pid of a job's first process and the TCP ports its live processes
    /// listen on, for the embedder (no owner fence); `None` for an unknown
    /// job or one that is not a process.
    pub fn process_view(&self, id: &str) -> Option<(Option<i32>, Vec<ListeningPort>)> {
        let (control, live) = {
            let state = lock(&self.shared.state);
            let record = state.records.get(id)?;
            (record.control.clone()?, !record.status.is_terminal())
        };
        let ports = if live { control.ports() } else { Vec::new() };
        Some((control.leader_pid().filter(|_| live), ports))
    }

    /// What a host that outlives a crash records of job `id` (for the
    /// embedder: no owner fence): where it keeps its output and end, how far
    /// the model has read it, and whether its end was seen or announced;
    /// `None` for an unknown job or one that does not outlive its host.
    pub fn durable_view(&self, id: &str) -> Option<super::DurableView> {
        let (control, capture, seen) = {
            let state = lock(&self.shared.state);
            let record = state.records.get(id)?;
            (
                record.control.clone()?,
                record.capture.clone(),
                // Not a wait's hold that is not yet shown: its notice is
                // owed again if the wait's caller goes.
                record.reported || record.noticed,
            )
        };
        Some(super::DurableView {
            files: control.files()?,
            monitor: control.monitor(),
            cursors: capture.map_or([0, 0], |c| c.cursors()),
            end_seen: seen,
            remote: control
                .remote()
                .and_then(|(runner, id)| Some((runner, id?))),
        })
    }

    /// [`JobRegistry::job_states`] of only the jobs whose state is not the
    /// one last marked recorded ([`JobRegistry::mark_recorded`]), and of
    /// those running under a monitor not spawned yet, in registration
    /// order: a look at each job changed since it was last seen as
    /// recorded (its capture's cursors read under the registry's lock, as
    /// reads do) that copies only what changed, so that a host that records
    /// every change before each reply copies and writes what changed, not
    /// every job, and looks only at the jobs taken mutably since.
    pub fn changed_states(&self, caller: Option<&Owner>) -> Vec<(String, super::DurableState)> {
        let mut state = lock(&self.shared.state);
        let mut changed = Vec::new();
        let mut unchanged = Vec::new();
        for (seq, r) in state.records.touched() {
            if !r.visible_to(caller) {
                continue;
            }
            // A capture's lock is never held while the registry's is
            // taken, so taking it under the registry's is safe.
            let now = r.state_now();
            if r.recorded_as(&now) {
                unchanged.push(seq);
            } else {
                changed.push((r.id.clone(), now));
            }
        }
        for seq in unchanged {
            state.records.untouch(seq);
        }
        changed
    }

    /// Marks `states` (from [`JobRegistry::changed_states`] or
    /// [`JobRegistry::job_states`]) recorded, once the embedder has written
    /// them: a job that changed since is still changed.
    pub fn mark_recorded(&self, states: &[(String, super::DurableState)]) {
        let mut state = lock(&self.shared.state);
        for (id, recorded) in states {
            if let Some((seq, record)) = state.records.get_mut_untouched(id) {
                record.recorded = Some(*recorded);
                // Changed since it was looked at (a read moved a cursor, a
                // monitor was spawned): still to be written.
                if record.recorded_as(&record.state_now()) {
                    state.records.untouch(seq);
                }
            }
        }
    }

    /// How many jobs the registry ever dropped (retention, disposal): a
    /// copy of the jobs kept elsewhere has none to drop while this stays
    /// the same.
    pub fn removals(&self) -> u64 {
        lock(&self.shared.state).records.removals()
    }

    /// The changing parts of each of `caller`'s jobs (see
    /// [`super::DurableState`]), with their ids, in registration order; a
    /// job that does not outlive its host has no cursors, seen end or
    /// monitor here.
    pub fn job_states(&self, caller: Option<&Owner>) -> Vec<(String, super::DurableState)> {
        let state = lock(&self.shared.state);
        state
            .records
            .values()
            .filter(|r| r.visible_to(caller))
            .map(|r| (r.id.clone(), r.state_now()))
            .collect()
    }

    /// Waits until job `id`'s first process exists, or its spawn failed (a
    /// producer's start answers before): at once for an unknown job, or one
    /// with no spawn.
    pub async fn until_spawned(&self, id: &str) {
        let control = {
            let state = lock(&self.shared.state);
            state.records.get(id).and_then(|r| r.control.clone())
        };
        if let Some(mut spawned) = control.and_then(|c| c.spawned()) {
            let _ = spawned.wait_for(|done| *done).await;
        }
    }

    /// Waits until the job is terminal or `timeout_ms` passes, then returns the
    /// current snapshot (marked reported when terminal). Cancelling `abort` while
    /// the job is live fails the wait with [`RegistryError::WaitAborted`]. Waiting
    /// never cancels the job, and no waiter is left behind on any exit.
    ///
    /// # Errors
    ///
    /// Unknown or foreign job (checked first), then an invalid timeout (0, or
    /// above 2147483647 ms), then an abort.
    pub async fn wait(
        &self,
        id: &str,
        timeout_ms: u64,
        caller: Option<&Owner>,
        abort: &CancellationToken,
    ) -> Result<JobSnapshot, RegistryError> {
        self.wait_until(id, timeout_ms, caller, abort, &WaitUntil::default())
            .await
            .map(|(job, _, _)| job)
    }

    /// [`JobRegistry::wait`], which may also end when an unread line matches
    /// `until.pattern` or when the job has written nothing for `until.quiet_ms`
    /// (extension `ready`). Answers the snapshot, which end came first, and the
    /// matching line.
    ///
    /// # Errors
    ///
    /// As [`JobRegistry::wait`]; then an `until` pattern that does not compile
    /// ([`RegistryError::InvalidPattern`]), or `until` for a job without a
    /// capture to watch, a final-output job ([`RegistryError::Unsupported`]).
    pub async fn wait_until(
        &self,
        id: &str,
        timeout_ms: u64,
        caller: Option<&Owner>,
        abort: &CancellationToken,
        until: &WaitUntil,
    ) -> Result<(JobSnapshot, WaitEnd, Option<LineMatch>), RegistryError> {
        let (job, end, matched, hold) =
            self.wait_held(id, timeout_ms, caller, abort, until).await?;
        hold.confirm();
        Ok((job, end, matched))
    }

    /// [`JobRegistry::wait_until`] for a caller that shows the outcome in a
    /// later step (a tool call that reads after its wait): a wait that saw the
    /// end answers a [`WaitHold`] too, which keeps the job's notice back until
    /// it is confirmed, and owes the notice again if it is dropped instead. A
    /// job whose end this wait did not see answers a hold that holds nothing.
    ///
    /// # Errors
    ///
    /// As [`JobRegistry::wait_until`].
    pub async fn wait_held(
        &self,
        id: &str,
        timeout_ms: u64,
        caller: Option<&Owner>,
        abort: &CancellationToken,
        until: &WaitUntil,
    ) -> Result<(JobSnapshot, WaitEnd, Option<LineMatch>, WaitHold), RegistryError> {
        let key = self.shared.next_listener.fetch_add(1, Ordering::Relaxed);
        let counted = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let ready = until.pattern.is_some() || until.quiet_ms.is_some();
        let prompt = until.prompt_quiet_ms;
        let pattern = until
            .pattern
            .as_deref()
            .map(compile_pattern)
            .transpose()
            .map_err(RegistryError::InvalidPattern);
        let mut watched = self.with_visible(id, caller, |r| {
            if timeout_ms == 0 || timeout_ms > MAX_TIMER_DELAY_MS {
                return Err(RegistryError::InvalidTimeout(timeout_ms));
            }
            let pattern = pattern?;
            let capture = match (&r.capture, ready) {
                (Some(capture), true) => Some(capture.clone()),
                // Only a job on a terminal can sit at a prompt.
                (Some(capture), false) if prompt.is_some() && capture.has_terminal() => {
                    Some(capture.clone())
                }
                (_, false) => None,
                (None, true) => return Err(RegistryError::Unsupported("ready".to_owned())),
            };
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
            Ok(Some((r.settled.subscribe(), capture, pattern)))
        })?;
        let mut end = WaitEnd::Settled;
        let mut matched = None;
        if let Some((rx, capture, pattern)) = watched.as_mut() {
            let mut guard = WaiterGuard {
                registry: self,
                id,
                key,
                counted: counted.clone(),
                handed_over: false,
            };
            let start = tokio::time::Instant::now();
            let deadline = start + Duration::from_millis(timeout_ms);
            let mut changes = capture.as_ref().map(SharedCapture::changes);
            let mut scan = ScanState::default();
            // A terminal job's quiet moment when its cursor was not at a
            // prompt: not looked at again until it writes.
            let mut no_prompt_at: Option<Option<std::time::Instant>> = None;
            let terminal = capture.as_ref().is_some_and(SharedCapture::has_terminal);
            loop {
                if let (Some(capture), Some(pattern)) = (capture.as_ref(), pattern.as_ref())
                    && let Some(found) = capture.find_unread(pattern, &mut scan)
                {
                    end = WaitEnd::Matched;
                    matched = Some(found);
                    break;
                }
                let quiet_at = until.quiet_ms.and_then(|ms| {
                    let last = capture
                        .as_ref()?
                        .last_output()
                        .map(tokio::time::Instant::from_std);
                    Some(
                        last.map_or(start, |l| l.max(start)) + Duration::from_millis(u64::from(ms)),
                    )
                });
                let last = capture.as_ref().and_then(SharedCapture::last_output);
                let prompt_at = prompt
                    .filter(|_| terminal && no_prompt_at != Some(last))
                    .map(|ms| {
                        let last = last.map(tokio::time::Instant::from_std);
                        last.map_or(start, |l| l.max(start)) + Duration::from_millis(u64::from(ms))
                    });
                let prompt_quiet = async {
                    match prompt_at {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                };
                let output = async {
                    if let Some(rx) = changes.as_mut()
                        && rx.changed().await.is_ok()
                    {
                        return;
                    }
                    // No watch, or its writer is gone: only the other ends remain.
                    std::future::pending::<()>().await
                };
                let quiet = async {
                    match quiet_at {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    biased;
                    _ = rx.wait_for(|done| *done) => break,
                    () = tokio::time::sleep_until(deadline) => {
                        end = WaitEnd::TimedOut;
                        break;
                    }
                    () = abort.cancelled() => break,
                    () = output => {}
                    // Output that came meanwhile won the race above (`biased`),
                    // so the quiet mark this timer was set from still holds.
                    () = quiet => {
                        end = WaitEnd::Quiet;
                        break;
                    }
                    () = prompt_quiet => {
                        if let Some(found) = capture.as_ref().and_then(SharedCapture::prompt_line) {
                            end = WaitEnd::Prompt;
                            matched = Some(found);
                            break;
                        }
                        no_prompt_at = Some(last);
                    }
                }
            }
            // From here on the hold settlement may have counted is this
            // function's to hand over (no await comes before it).
            guard.handed_over = true;
            drop(guard);
            // An abort that came before settlement wins; one that came after it does
            // not take back the end this wait already saw.
            if abort.is_cancelled() && !counted.load(Ordering::SeqCst) {
                return Err(RegistryError::WaitAborted);
            }
        }
        let counted = counted.load(Ordering::SeqCst);
        let job = self.with_visible(id, caller, |r| {
            if r.status.is_terminal() && !counted {
                // A job that was terminal already, or settled just as the wait
                // ended: this wait saw the end all the same.
                r.wait_holds += 1;
            }
            Ok(r.snapshot())
        });
        let job = match job {
            Ok(job) => job,
            Err(e) => {
                if counted {
                    self.release_hold(id, false);
                }
                return Err(e);
            }
        };
        let hold = if job.status.is_terminal() {
            WaitHold::taken(self, id)
        } else {
            WaitHold::none()
        };
        if job.status.is_terminal() && end != WaitEnd::Matched {
            // A job that ended meanwhile waits for nobody's input.
            if end == WaitEnd::Prompt {
                matched = None;
            }
            end = WaitEnd::Settled;
        }
        Ok((job, end, matched, hold))
    }

    /// The producer's control of a visible job, with its snapshot.
    fn control(
        &self,
        id: &str,
        caller: Option<&Owner>,
        extension: &str,
    ) -> Result<(Arc<dyn JobControl>, JobSnapshot), RegistryError> {
        self.with_visible(id, caller, |r| match &r.control {
            Some(control) => Ok((control.clone(), r.snapshot())),
            None => Err(RegistryError::Unsupported(extension.to_owned())),
        })
    }

    /// Writes `data` to a live job's stdin, then closes it when `close`
    /// (extension `input`). Called outside the registry lock.
    ///
    /// # Errors
    ///
    /// Unknown or foreign job; `input-closed` for a terminal job; the
    /// producer's [`ControlError`](super::control::ControlError).
    pub fn write_input(
        &self,
        id: &str,
        caller: Option<&Owner>,
        data: &[u8],
        close: bool,
    ) -> Result<u64, RegistryError> {
        let (control, job) = self.control(id, caller, "input")?;
        if job.status.is_terminal() {
            return Err(RegistryError::InputClosed);
        }
        control
            .write_input(data, close)
            .map_err(RegistryError::from)
    }

    /// Sends `signal` to every process of a live job (extension `input`).
    ///
    /// # Errors
    ///
    /// Unknown or foreign job; a terminal job; the producer's failure.
    pub fn signal(
        &self,
        id: &str,
        caller: Option<&Owner>,
        signal: JobSignal,
    ) -> Result<(), RegistryError> {
        let (control, job) = self.control(id, caller, "input")?;
        if job.status.is_terminal() {
            return Err(RegistryError::ProducerFailed(format!(
                "job {id} has already finished"
            )));
        }
        control.signal(signal).map_err(RegistryError::from)
    }

    /// Retained lines of a job, without consuming anything (extension `log`).
    /// Read outside the registry lock.
    ///
    /// # Errors
    ///
    /// A search pattern that does not compile; unknown or foreign job; a job
    /// without a capture (a final-output job).
    pub fn lines(
        &self,
        id: &str,
        caller: Option<&Owner>,
        query: &LineQuery,
    ) -> Result<(LinePage, JobSnapshot), RegistryError> {
        let pattern = match query {
            LineQuery::Search { pattern, .. } => {
                Some(compile_pattern(pattern).map_err(RegistryError::InvalidPattern)?)
            }
            _ => None,
        };
        let capture = self.with_visible(id, caller, |r| match &r.capture {
            Some(capture) => Ok(capture.clone()),
            None => Err(RegistryError::Unsupported("log".to_owned())),
        })?;
        let page = capture.lines(query, pattern.as_ref());
        // The snapshot after the page, so a job that ended meanwhile says so.
        let job = self.with_visible(id, caller, |r| Ok(r.snapshot()))?;
        Ok((page, job))
    }

    /// Listening TCP ports of a job's live processes (extension `ports`);
    /// empty for a terminal job.
    ///
    /// # Errors
    ///
    /// Unknown or foreign job.
    pub fn ports(
        &self,
        id: &str,
        caller: Option<&Owner>,
    ) -> Result<Vec<ListeningPort>, RegistryError> {
        let (control, job) = self.control(id, caller, "ports")?;
        if job.status.is_terminal() {
            return Ok(Vec::new());
        }
        Ok(control.ports())
    }

    /// Gives a live job's terminal a new size (extension `terminal`); the
    /// job gets `SIGWINCH`.
    ///
    /// # Errors
    ///
    /// Unknown or foreign job; a job without a terminal; a job that has
    /// finished.
    pub fn resize(
        &self,
        id: &str,
        caller: Option<&Owner>,
        size: crate::capture::TerminalSize,
    ) -> Result<(), RegistryError> {
        let (control, job) = self.control(id, caller, "terminal")?;
        if job.status.is_terminal() {
            return Err(RegistryError::ProducerFailed(format!(
                "job {id} has already finished"
            )));
        }
        control.resize(size).map_err(RegistryError::from)
    }

    /// What a job's terminal shows now, without consuming anything
    /// (extension `terminal`).
    ///
    /// # Errors
    ///
    /// Unknown or foreign job; a job without a terminal.
    pub fn screen(
        &self,
        id: &str,
        caller: Option<&Owner>,
    ) -> Result<(crate::capture::Screen, JobSnapshot), RegistryError> {
        let capture = self.with_visible(id, caller, |r| Ok(r.capture.clone()))?;
        let screen = capture
            .and_then(|c| c.screen())
            .ok_or(RegistryError::NoTerminal)?;
        let job = self.with_visible(id, caller, |r| Ok(r.snapshot()))?;
        Ok((screen, job))
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

/// Un-counts one waiter however the wait ends, dropped futures included; a
/// wait dropped after settlement counted it gives its hold back.
struct WaiterGuard<'a> {
    registry: &'a JobRegistry,
    id: &'a str,
    key: u64,
    counted: Arc<std::sync::atomic::AtomicBool>,
    /// Set once the wait goes on to hand its hold to its caller.
    handed_over: bool,
}

impl Drop for WaiterGuard<'_> {
    fn drop(&mut self) {
        {
            let mut state = lock(&self.registry.shared.state);
            if let Some(r) = state.records.get_mut(self.id) {
                r.waiters.retain(|w| w.key != self.key);
            }
        }
        // Settlement and this removal both run under the lock, so `counted`
        // is final here.
        if !self.handed_over && self.counted.load(Ordering::SeqCst) {
            self.registry.release_hold(self.id, false);
        }
    }
}
