//! The job registry: records, ids, the owner fence, admission, reads, kills, waits
//! and first-wins settlement.
//!
//! One registry serves the whole host. Producers (the background shell, in-process
//! work) register jobs with [`JobRegistry::start`]; the guest reaches the registry
//! only through an owner-scoped capability that calls [`JobRegistry::list`],
//! [`JobRegistry::get`], [`JobRegistry::read`], [`JobRegistry::output`],
//! [`JobRegistry::kill`] and [`JobRegistry::wait`] for exactly one caller.

use std::collections::HashMap;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::excerpt::{Excerpt, ExcerptWindow, text_excerpt};
use crate::owner::{AgentDirectory, MessageSource, Owner};
use crate::scope::{Layered, ScopeKey, ScopeTree};

/// The largest wait timeout a timer accepts, in milliseconds.
pub const MAX_TIMER_DELAY_MS: f64 = 2_147_483_647.0;
/// Largest integer a JSON (JavaScript) number holds exactly.
pub const MAX_SAFE_INTEGER: u64 = 9_007_199_254_740_991;
/// The most bytes of a label the registry keeps: a longer one is cut to a
/// character boundary and ends with `…` (U+2026), the same rule the guest applies
/// to every label it shows, so a job's label costs bounded memory on both sides.
pub const MAX_LABEL_BYTES: usize = 512;

/// `label`, cut to [`MAX_LABEL_BYTES`] as described there.
pub fn bounded_label(mut label: String) -> String {
    if label.len() <= MAX_LABEL_BYTES {
        return label;
    }
    let mut end = MAX_LABEL_BYTES - '\u{2026}'.len_utf8();
    while !label.is_char_boundary(end) {
        end -= 1;
    }
    label.truncate(end);
    label.push('\u{2026}');
    label
}

/// Default admission limit per owner.
pub const DEFAULT_MAX_CONCURRENT_JOBS_PER_OWNER: u64 = 10;

/// Lifecycle of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobStatus {
    /// Registered and working.
    Running,
    /// Cancellation requested; the producer still holds its resources.
    Stopping,
    /// The producer finished (for a shell command, whatever its exit code).
    Completed,
    /// Stopped by cancellation or by a signal.
    Killed,
    /// The producer failed, or its outcome was converted to a failure.
    Failed,
}

impl JobStatus {
    /// Whether the job has settled.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            JobStatus::Completed | JobStatus::Killed | JobStatus::Failed
        )
    }

    /// The status word the model sees.
    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Running => "running",
            JobStatus::Stopping => "stopping",
            JobStatus::Completed => "completed",
            JobStatus::Killed => "killed",
            JobStatus::Failed => "failed",
        }
    }
}

/// A terminal status a producer can report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutcomeStatus {
    /// Finished.
    Completed,
    /// Stopped by cancellation or a signal.
    Killed,
    /// Failed.
    Failed,
}

/// How a job ended, as its producer reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobOutcome {
    /// Terminal status.
    pub status: OutcomeStatus,
    /// Short detail, for example `exit code: 0`.
    pub detail: Option<String>,
    /// The final output, for final-output jobs only.
    pub output: Option<String>,
}

/// A fresh view of one job record.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSnapshot {
    /// `<kind>-<n>`.
    pub id: String,
    /// Producer namespace.
    pub kind: String,
    /// One-line label.
    pub label: String,
    /// Producer's byte cap for everything the model sees about this job.
    pub output_limit_bytes: Option<u64>,
    /// Session id of the owner; `None` for unowned jobs.
    pub owner_session: Option<String>,
    /// Status.
    pub status: JobStatus,
    /// Settlement detail.
    pub detail: Option<String>,
    /// Registration time, epoch ms.
    pub started_at: u64,
    /// Settlement time, epoch ms; present exactly when terminal.
    pub finished_at: Option<u64>,
    /// Whether the outcome was observed, so no notice is due.
    pub reported: bool,
}

/// A producer's hook to cancel its work. Synchronous and idempotent; it must
/// eventually make `done` resolve. An error leaves the job untouched.
pub type CancelHook = Box<dyn FnMut(Option<&str>) -> Result<(), String> + Send>;
/// A producer's consuming read of the output since the previous read.
pub type ReadHook = Box<dyn FnMut() -> Result<String, String> + Send>;
/// A producer's non-consuming view of a stream job's whole output so far (see
/// [`crate::output::Capture::excerpt`]). Called under the registry lock with a
/// window already held to [`crate::excerpt::MAX_EXCERPT_PART`].
pub type ExcerptHook = Box<dyn FnMut(ExcerptWindow) -> Result<Excerpt, String> + Send>;
/// Resolves once the producer released its resources. An `Err` is a contract
/// violation; the job is then recorded as `failed` with the error as detail.
pub type DoneFuture = Pin<Box<dyn Future<Output = Result<JobOutcome, String>> + Send>>;

/// What a producer hands the registry once its work has started.
pub struct JobHooks {
    /// Requests cancellation.
    pub cancel: CancelHook,
    /// Present for stream jobs; absent for final-output jobs.
    pub read_output: Option<ReadHook>,
    /// The whole output of a stream job, for surfaces that show a finished job's
    /// full result (profile C's `job_status`). A stream job without it answers
    /// such a request with an error; a final-output job needs none.
    pub output_excerpt: Option<ExcerptHook>,
    /// Settles the job.
    pub done: DoneFuture,
}

/// What a producer asks to register.
#[derive(Debug, Clone)]
pub struct JobStart {
    /// Producer namespace and id prefix; must not be empty.
    pub kind: String,
    /// One-line label; must not be empty.
    pub label: String,
    /// Byte cap on everything the model sees about the job.
    pub output_limit_bytes: Option<u64>,
    /// The live agent that owns the job; `None` for an unowned job.
    pub owner: Option<Owner>,
}

/// Why a start was refused. The text is what the producer's tool call reports.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartError {
    /// No tool-jobs controller is attached.
    #[error(
        "background jobs unavailable: no job controller serves this agent (load @buckeyestudio/toh-tool-jobs in its composition)"
    )]
    NoController,
    /// Empty kind.
    #[error("invalid job kind: expected a non-empty string")]
    InvalidKind,
    /// Empty label.
    #[error("invalid job label: expected a non-empty string")]
    InvalidLabel,
    /// A cap that is zero or above 2^53 - 1.
    #[error("invalid outputLimitBytes: expected a positive safe integer, got {0}")]
    InvalidOutputLimit(u64),
    /// The owner is not the live instance registered for its session.
    #[error(
        "agent \"{0}\" is not the registered agent instance (background job owner must be live)"
    )]
    StaleOwner(String),
    /// Admission refused.
    #[error(
        "background job limit reached for this owner (limit: {0}); use job_kill to stop an unneeded job, wait for it to finish, then retry"
    )]
    LimitReached(u64),
    /// The producer's own start failed; nothing was registered.
    #[error("{0}")]
    Producer(String),
}

/// Expected failures of registry operations.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RegistryError {
    /// Never issued, or removed.
    #[error("unknown job {0}")]
    UnknownJob(String),
    /// Owned by another session.
    #[error("job {0} belongs to another session")]
    ForeignJob(String),
    /// A wait timeout that is not finite, not positive, or above the timer bound.
    #[error(
        "invalid wait timeout: expected a positive number of milliseconds no greater than 2147483647, got {0}"
    )]
    InvalidTimeout(f64),
    /// The caller cancelled its wait.
    #[error("wait aborted")]
    WaitAborted,
    /// The producer's hook failed.
    #[error("{0}")]
    ProducerFailed(String),
}

/// What a kill request did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillOutcome {
    /// The producer accepted the cancellation.
    Requested,
    /// The job had already settled.
    AlreadyFinished,
}

/// Invalid registry configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("jobs: {0}")]
pub struct RegistryConfigError(String);

/// Registry settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryConfig {
    max_concurrent_jobs_per_owner: u64,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        RegistryConfig {
            max_concurrent_jobs_per_owner: DEFAULT_MAX_CONCURRENT_JOBS_PER_OWNER,
        }
    }
}

impl RegistryConfig {
    /// Settings with an admission limit of `limit` live jobs per owner.
    ///
    /// # Errors
    ///
    /// When `limit` is zero or above 2^53 - 1.
    pub fn with_max_concurrent_jobs_per_owner(limit: u64) -> Result<Self, RegistryConfigError> {
        if limit == 0 || limit > MAX_SAFE_INTEGER {
            return Err(RegistryConfigError(format!(
                "maxConcurrentJobsPerOwner must be a positive safe integer, got {limit}"
            )));
        }
        Ok(RegistryConfig {
            max_concurrent_jobs_per_owner: limit,
        })
    }

    /// Settings from a JSON object such as `{"maxConcurrentJobsPerOwner": 4}`.
    ///
    /// # Errors
    ///
    /// For anything but an object with known keys and valid values.
    pub fn from_json(value: &Value) -> Result<Self, RegistryConfigError> {
        let Some(map) = value.as_object() else {
            return Err(RegistryConfigError(format!(
                "config must be a JSON object, got {value}"
            )));
        };
        let mut config = RegistryConfig::default();
        for (key, v) in map {
            match key.as_str() {
                "maxConcurrentJobsPerOwner" => {
                    let limit = v.as_u64().ok_or_else(|| {
                        RegistryConfigError(format!(
                            "maxConcurrentJobsPerOwner must be a positive safe integer, got {v}"
                        ))
                    })?;
                    config = RegistryConfig::with_max_concurrent_jobs_per_owner(limit)?;
                }
                other => {
                    return Err(RegistryConfigError(format!(
                        "unknown config key \"{other}\" (known: maxConcurrentJobsPerOwner)"
                    )));
                }
            }
        }
        Ok(config)
    }

    /// The admission limit.
    pub fn max_concurrent_jobs_per_owner(&self) -> u64 {
        self.max_concurrent_jobs_per_owner
    }
}

struct JobRecord {
    id: String,
    kind: String,
    label: String,
    output_limit_bytes: Option<u64>,
    owner: Option<Owner>,
    status: JobStatus,
    detail: Option<String>,
    output: Option<String>,
    started_at: u64,
    finished_at: Option<u64>,
    reported: bool,
    /// Set once a completion notice (pushed or pulled) has announced the job.
    noticed: bool,
    waiters: Vec<WaiterSlot>,
    cancel: CancelHook,
    read_output: Option<ReadHook>,
    output_excerpt: Option<ExcerptHook>,
    settled: watch::Sender<bool>,
    /// Set once the completion listeners of the settlement have returned.
    announced: Arc<watch::Sender<bool>>,
}

impl JobRecord {
    fn snapshot(&self) -> JobSnapshot {
        JobSnapshot {
            id: self.id.clone(),
            kind: self.kind.clone(),
            label: self.label.clone(),
            output_limit_bytes: self.output_limit_bytes,
            owner_session: self.owner.as_ref().map(|o| o.session_id().to_owned()),
            status: self.status,
            detail: self.detail.clone(),
            started_at: self.started_at,
            finished_at: self.finished_at,
            reported: self.reported,
        }
    }

    fn visible_to(&self, caller: Option<&Owner>) -> bool {
        match (&self.owner, caller) {
            (None, _) => true,
            (Some(owner), Some(caller)) => owner.same_session(caller),
            (Some(_), None) => false,
        }
    }

    fn same_bucket(&self, owner: Option<&Owner>) -> bool {
        match (&self.owner, owner) {
            (None, None) => true,
            (Some(a), Some(b)) => a.same_instance(b),
            _ => false,
        }
    }
}

/// One pending wait on a job.
struct WaiterSlot {
    key: u64,
    abort: CancellationToken,
    /// Set by settlement when it counted this wait (the wait then sees the end,
    /// even if its caller aborts afterwards).
    counted: Arc<std::sync::atomic::AtomicBool>,
}

type DoneListener = Arc<dyn Fn(&JobSnapshot, Option<&Owner>) + Send + Sync>;
type ChangedListener = Arc<dyn Fn(Option<&Owner>) + Send + Sync>;

#[derive(Default)]
struct State {
    records: Vec<JobRecord>,
    counters: HashMap<String, u64>,
    scopes: ScopeTree,
    controllers: Layered<()>,
    done_listeners: Layered<DoneListener>,
    changed_listeners: Layered<ChangedListener>,
    /// Set by service disposal: no completion listener runs any more.
    listeners_closed: bool,
    /// Wake-ups spent per exact owner object, since its last user message.
    wakes: HashMap<u64, u64>,
}

impl State {
    fn chain(&self, owner: Option<&Owner>) -> Vec<ScopeKey> {
        match owner {
            Some(owner) => self.scopes.chain(owner.scope()),
            // Unowned jobs have no chain: only the global layer hears them.
            None => Vec::new(),
        }
    }

    fn changed_for(&self, owner: Option<&Owner>) -> Vec<ChangedListener> {
        self.changed_listeners.routed(&self.chain(owner))
    }
}

struct Shared {
    state: Mutex<State>,
    config: RegistryConfig,
    agents: AgentDirectory,
    next_listener: AtomicU64,
}

/// The job registry. Cheap to clone; all clones share one set of records.
///
/// Must be used from within a tokio runtime: each start spawns the task that
/// settles the job when its producer is done.
#[derive(Clone)]
pub struct JobRegistry {
    shared: Arc<Shared>,
}

/// Keeps a controller attached; dropping it detaches. A start is refused with
/// [`StartError::NoController`] unless a controller serves the owner.
pub struct ControllerAttachment {
    registry: Weak<Shared>,
    id: u64,
}

impl Drop for ControllerAttachment {
    fn drop(&mut self) {
        if let Some(shared) = self.registry.upgrade() {
            lock(&shared.state).controllers.remove(self.id);
        }
    }
}

/// Keeps a listener registered; dropping it unregisters.
pub struct ListenerRegistration {
    registry: Weak<Shared>,
    id: u64,
}

impl Drop for ListenerRegistration {
    fn drop(&mut self) {
        if let Some(shared) = self.registry.upgrade() {
            let mut state = lock(&shared.state);
            state.done_listeners.remove(self.id);
            state.changed_listeners.remove(self.id);
        }
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // Producer hooks run under this lock; a panicking hook must not wedge every
    // later call, and each mutation leaves the records consistent before any hook.
    state.lock().unwrap_or_else(|p| p.into_inner())
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

impl Default for JobRegistry {
    fn default() -> Self {
        JobRegistry::new(RegistryConfig::default(), AgentDirectory::default())
    }
}

impl JobRegistry {
    /// A registry with `config` that checks owners against `agents`.
    pub fn new(config: RegistryConfig, agents: AgentDirectory) -> JobRegistry {
        JobRegistry {
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
                config,
                agents,
                next_listener: AtomicU64::new(1),
            }),
        }
    }

    /// The directory of live agents this registry checks owners against.
    pub fn agents(&self) -> &AgentDirectory {
        &self.shared.agents
    }

    /// The registry's settings.
    pub fn config(&self) -> &RegistryConfig {
        &self.shared.config
    }

    /// A new scope under `parent`: a preset's standing scope (no parent), or an
    /// agent's own scope parented to the preset it joins.
    pub fn create_scope(&self, parent: Option<ScopeKey>) -> ScopeKey {
        lock(&self.shared.state).scopes.create(parent)
    }

    fn next_id(&self) -> u64 {
        self.shared.next_listener.fetch_add(1, Ordering::Relaxed)
    }

    /// Attaches a job controller (a mounted tool-jobs plugin) in the global layer:
    /// it serves every owner and unowned starts.
    pub fn attach_controller(&self) -> ControllerAttachment {
        self.attach_controller_in(None)
    }

    /// Attaches a job controller in `scope`'s layer (global for `None`): it serves
    /// the owners whose scope chain passes through `scope`. Each attachment is
    /// independent; the fence re-arms when the last one serving an owner goes.
    pub fn attach_controller_in(&self, scope: Option<ScopeKey>) -> ControllerAttachment {
        let id = self.next_id();
        lock(&self.shared.state).controllers.push(id, scope, ());
        ControllerAttachment {
            registry: Arc::downgrade(&self.shared),
            id,
        }
    }

    /// Whether a start for `owner` (`None`: unowned) would pass the controller
    /// fence: a job-aware tool can check this and run its work synchronously
    /// instead when no job controller serves the caller.
    pub fn serves(&self, owner: Option<&Owner>) -> bool {
        let state = lock(&self.shared.state);
        state.controllers.serves(&state.chain(owner))
    }

    /// Calls `listener` after every settlement, last in the settlement order, with
    /// the settled snapshot and the exact owner object. A panic is contained.
    pub fn on_job_done(
        &self,
        listener: impl Fn(&JobSnapshot, Option<&Owner>) + Send + Sync + 'static,
    ) -> ListenerRegistration {
        self.on_job_done_in(None, listener)
    }

    /// [`JobRegistry::on_job_done`] in `scope`'s layer: it hears only jobs whose
    /// owner's scope chain passes through `scope` (global for `None`: every job).
    pub fn on_job_done_in(
        &self,
        scope: Option<ScopeKey>,
        listener: impl Fn(&JobSnapshot, Option<&Owner>) + Send + Sync + 'static,
    ) -> ListenerRegistration {
        let id = self.next_id();
        lock(&self.shared.state)
            .done_listeners
            .push(id, scope, Arc::new(listener));
        ListenerRegistration {
            registry: Arc::downgrade(&self.shared),
            id,
        }
    }

    /// Calls `listener` whenever the set of jobs visible to an owner changes
    /// (registration, stopping, settlement, removal), with that owner (`None` for
    /// unowned jobs). It never touches `reported`. A panic is contained.
    pub fn on_jobs_changed(
        &self,
        listener: impl Fn(Option<&Owner>) + Send + Sync + 'static,
    ) -> ListenerRegistration {
        self.on_jobs_changed_in(None, listener)
    }

    /// [`JobRegistry::on_jobs_changed`] in `scope`'s layer, routed like
    /// [`JobRegistry::on_job_done_in`].
    pub fn on_jobs_changed_in(
        &self,
        scope: Option<ScopeKey>,
        listener: impl Fn(Option<&Owner>) + Send + Sync + 'static,
    ) -> ListenerRegistration {
        let id = self.next_id();
        lock(&self.shared.state)
            .changed_listeners
            .push(id, scope, Arc::new(listener));
        ListenerRegistration {
            registry: Arc::downgrade(&self.shared),
            id,
        }
    }

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
        match state.records.iter_mut().find(|r| r.id == id) {
            Some(r) if r.status.is_terminal() && !r.reported && !r.noticed => {
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
        let mut drained: Vec<&mut JobRecord> = state
            .records
            .iter_mut()
            .filter(|r| {
                r.status.is_terminal()
                    && !r.noticed
                    && r.owner.as_ref().is_some_and(|o| o.same_instance(owner))
            })
            .collect();
        // Stable: jobs settled in the same millisecond keep registration order.
        drained.sort_by_key(|r| r.finished_at);
        drained
            .into_iter()
            .map(|r| {
                r.noticed = true;
                r.reported = true;
                r.snapshot()
            })
            .collect()
    }

    /// Whether `owner` belongs to `scope`'s layer: every owner belongs to the
    /// global layer (`None`); otherwise `scope` must be on the owner's chain.
    pub fn in_layer(&self, scope: Option<ScopeKey>, owner: &Owner) -> bool {
        scope.is_none_or(|scope| lock(&self.shared.state).chain(Some(owner)).contains(&scope))
    }

    /// The harness reports that `owner` claimed a queued message into a step. A
    /// message a person wrote refills the owner's wake budget; the plugin's own
    /// notices and anything else never do.
    pub fn inbox_claimed(&self, owner: &Owner, source: MessageSource) {
        if source == MessageSource::User {
            lock(&self.shared.state).wakes.remove(&owner.instance());
        }
    }

    /// Registers a job. Preflight runs in the contract's order (controller fence,
    /// kind, label, cap, owner, admission); only then is `run` called, once. The
    /// id's number is taken only after `run` succeeds, so a refused or failed start
    /// uses up no number.
    ///
    /// # Errors
    ///
    /// A [`StartError`]; nothing is registered.
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
        let limit = self.shared.config.max_concurrent_jobs_per_owner;
        let live = state
            .records
            .iter()
            .filter(|r| !r.status.is_terminal() && r.same_bucket(spec.owner.as_ref()))
            .count() as u64;
        if live >= limit {
            return Err(StartError::LimitReached(limit));
        }

        let hooks = run().map_err(StartError::Producer)?;
        let counter = state.counters.entry(spec.kind.clone()).or_insert(0);
        *counter += 1;
        let id = format!("{}-{}", spec.kind, counter);
        let (settled, _) = watch::channel(false);
        let (announced, _) = watch::channel(false);
        state.records.push(JobRecord {
            id: id.clone(),
            kind: spec.kind,
            label: bounded_label(spec.label),
            output_limit_bytes: spec.output_limit_bytes,
            owner: spec.owner.clone(),
            status: JobStatus::Running,
            detail: None,
            output: None,
            started_at: now_ms(),
            finished_at: None,
            reported: false,
            noticed: false,
            waiters: Vec::new(),
            cancel: hooks.cancel,
            read_output: hooks.read_output,
            output_excerpt: hooks.output_excerpt,
            settled,
            announced: Arc::new(announced),
        });
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
        Ok(id)
    }

    /// Records a job's outcome: first-wins, then waiters released, then the
    /// changed observers, then the completion listeners, in that order.
    fn settle(&self, id: &str, outcome: Result<JobOutcome, String>) {
        let outcome = outcome.unwrap_or_else(|err| {
            tracing::warn!(
                "jobs: job {id} producer done promise rejected (producer contract violation): {err}"
            );
            JobOutcome {
                status: OutcomeStatus::Failed,
                detail: Some(err),
                output: None,
            }
        });
        let mut state = lock(&self.shared.state);
        let Some(record) = state.records.iter_mut().find(|r| r.id == id) else {
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
        record.finished_at = Some(now_ms().max(record.started_at));
        // A wait whose caller already aborted no longer counts, exactly as if it
        // had been removed at the moment of the abort.
        for waiter in record.waiters.iter().filter(|w| !w.abort.is_cancelled()) {
            waiter.counted.store(true, Ordering::SeqCst);
            record.reported = true;
        }
        let snapshot = record.snapshot();
        let owner = record.owner.clone();
        let announced = record.announced.clone();
        record.settled.send_replace(true);
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
                    "jobs: onJobDone listener threw for {id}: {}",
                    panic_message(&*panic)
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
        let pending = self.tear_down(
            |r| r.owner.as_ref().is_some_and(|o| o.same_instance(owner)),
            "owner disposed",
        );
        for mut rx in pending {
            let _ = rx.wait_for(|done| *done).await;
        }
        let mut state = lock(&self.shared.state);
        let before = state.records.len();
        state
            .records
            .retain(|r| !r.owner.as_ref().is_some_and(|o| o.same_instance(owner)));
        let had_records = state.records.len() != before;
        state.wakes.remove(&owner.instance());
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
        lock(&self.shared.state).listeners_closed = true;
        let pending = self.tear_down(|_| true, "jobs service disposed");
        for mut rx in pending {
            let _ = rx.wait_for(|done| *done).await;
        }
        let mut state = lock(&self.shared.state);
        let mut owners: Vec<Option<Owner>> = Vec::new();
        for record in state.records.drain(..) {
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
        announce_to(state, owners);
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
            .iter_mut()
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
                        "jobs: cancel of {} threw during teardown; job record forced failed and work may be orphaned: {err}",
                        record.id
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

    fn with_visible<T>(
        &self,
        id: &str,
        caller: Option<&Owner>,
        f: impl FnOnce(&mut JobRecord) -> Result<T, RegistryError>,
    ) -> Result<T, RegistryError> {
        let mut state = lock(&self.shared.state);
        let record = state
            .records
            .iter_mut()
            .find(|r| r.id == id)
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
            .iter()
            .filter(|r| r.visible_to(caller))
            .map(JobRecord::snapshot)
            .collect()
    }

    /// A snapshot for the embedder itself (a UI, a log), with no owner fence and
    /// no side effects; `None` for an unknown id.
    pub fn inspect(&self, id: &str) -> Option<JobSnapshot> {
        lock(&self.shared.state)
            .records
            .iter()
            .find(|r| r.id == id)
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
            state
                .records
                .iter()
                .find(|r| r.id == id)
                .map(|r| r.announced.subscribe())
        };
        if let Some(mut rx) = rx {
            let _ = rx.wait_for(|done| *done).await;
        }
    }

    /// How many waits are pending on a job (0 for an unknown id).
    pub fn waiter_count(&self, id: &str) -> usize {
        lock(&self.shared.state)
            .records
            .iter()
            .find(|r| r.id == id)
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
        if let Some(r) = state.records.iter_mut().find(|r| r.id == self.id) {
            r.waiters.retain(|w| w.key != self.key);
        }
    }
}

fn notify_changed(listeners: &[ChangedListener], owner: Option<&Owner>) {
    for listener in listeners {
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| listener(owner))) {
            tracing::warn!(
                "jobs: onJobsChanged listener threw: {}",
                panic_message(&*panic)
            );
        }
    }
}

/// Tells each owner's observers that its visible set changed, after releasing
/// the registry lock (observers may call back into the registry).
fn announce_to(state: MutexGuard<'_, State>, owners: Vec<Option<Owner>>) {
    let announcements: Vec<_> = owners
        .into_iter()
        .map(|o| (state.changed_for(o.as_ref()), o))
        .collect();
    drop(state);
    for (changed, owner) in announcements {
        notify_changed(&changed, owner.as_ref());
    }
}

/// The text a panic carried, when it carried text.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".to_owned())
}
