//! The job registry: records, ids, the owner fence, admission, reads, kills, waits
//! and first-wins settlement.
//!
//! One registry serves the whole host. Producers (the background shell, in-process
//! work) register jobs with [`JobRegistry::start`]; the guest reaches the registry
//! only through an owner-scoped capability that calls [`JobRegistry::list`],
//! [`JobRegistry::get`], [`JobRegistry::read`], [`JobRegistry::output`],
//! [`JobRegistry::kill`] and [`JobRegistry::wait`] for exactly one caller.
//!
//! One lock guards every record; the rooms below each add one concern to
//! [`JobRegistry`]: `types` (what a job is), `hooks` (what a producer hands over),
//! `errors`, `config`, `routing` (scopes, controllers and listeners), `lifecycle`
//! (start, settlement, teardown), `access` (the owner-fenced reads, kills and
//! waits), `holds` (a wait's hold on a notice until its caller shows the
//! outcome) and `notices` (claiming announcements and wake budgets).

mod access;
mod config;
pub mod control;
mod errors;
mod holds;
mod hooks;
mod lifecycle;
mod notices;
mod records;
mod routing;
mod types;

pub use config::RegistryConfig;
pub use errors::{RegistryConfigError, RegistryError, StartError};
pub use holds::WaitHold;
pub use hooks::{CancelHook, DoneFuture, ExcerptHook, JobHooks, ReadHook};
pub use routing::{ControllerAttachment, ListenerRegistration};
pub use types::*;

/// The reason a job's cancel hook is given when its owner goes (a session's
/// end), so a producer can tell a teardown from a kill.
pub const OWNER_DISPOSED: &str = "owner disposed";
/// The reason a job's cancel hook is given when the whole registry is
/// disposed of (the host's end).
pub const SERVICE_DISPOSED: &str = "jobs service disposed";

use std::collections::{HashMap, VecDeque};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio_util::sync::CancellationToken;

use crate::capture::SharedCapture;
use crate::clock::{Clock, SystemClock};
use crate::owner::{AgentDirectory, Owner};
use crate::scope::{Layered, ScopeKey, ScopeTree};
// Producer hooks run under the registry's lock; a panicking hook must not wedge
// every later call, and each mutation leaves the records consistent before any
// hook.
use crate::sync::{LazyWatch, lock};

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
    sandbox: Option<crate::sandbox::Sandbox>,
    /// Where the job runs when that is not this host.
    placement: Option<Placement>,
    /// Set once a completion notice (pushed or pulled) has announced the job.
    noticed: bool,
    /// Waits that saw the job's end and whose callers have not yet shown it
    /// (see `holds`): while any is held the job counts as reported, so no
    /// notice goes out, but `reported` itself is set only once one is shown.
    wait_holds: u32,
    waiters: Vec<WaiterSlot>,
    cancel: CancelHook,
    /// The job's output, when its producer writes it to a capture.
    capture: Option<SharedCapture>,
    read_output: Option<ReadHook>,
    output_excerpt: Option<ExcerptHook>,
    /// The producer's extension controls, shared so calls run outside the lock.
    control: Option<Arc<dyn control::JobControl>>,
    settled: LazyWatch<bool>,
    /// Set once the completion listeners of the settlement have returned.
    announced: Arc<LazyWatch<bool>>,
    /// Its changing parts as the embedder last recorded them (see
    /// [`JobRegistry::changed_states`]).
    recorded: Option<DurableState>,
}

impl JobRecord {
    /// Its changing parts now (see [`DurableState`]).
    fn state_now(&self) -> DurableState {
        let durable = self.control.as_ref().filter(|c| c.durable());
        DurableState {
            status: self.status,
            finished_at: self.finished_at,
            cursors: match (durable, &self.capture) {
                (Some(_), Some(capture)) => capture.cursors(),
                _ => [0, 0],
            },
            end_seen: durable.is_some() && (self.reported || self.noticed),
            monitor: durable.and_then(|c| c.monitor()),
            durable: durable.is_some(),
            remote: durable.and_then(|c| c.remote()).map(|(_, id)| id.is_some()),
        }
    }

    /// Whether `now` (this record's [`JobRecord::state_now`]) is what was
    /// last recorded of it, with nothing more to come: a job under a
    /// monitor not spawned yet counts as changed until it is, so each
    /// reply sees it (and can wait for it).
    fn recorded_as(&self, now: &DurableState) -> bool {
        !now.unspawned() && self.recorded == Some(*now)
    }

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
            reported: self.reported || self.wait_holds > 0,
            sandbox: self.sandbox.clone(),
            placement: self.placement.as_ref().and_then(Placement::get),
        }
    }

    fn visible_to(&self, caller: Option<&Owner>) -> bool {
        match (&self.owner, caller) {
            (None, _) => true,
            (Some(owner), Some(caller)) => owner.same_session(caller),
            (Some(_), None) => false,
        }
    }
}

/// One pending wait on a job.
struct WaiterSlot {
    key: u64,
    abort: CancellationToken,
    /// Set by settlement when it counted this wait (the wait then sees the end,
    /// even if its caller aborts afterwards, and holds the job's notice back).
    counted: Arc<std::sync::atomic::AtomicBool>,
}

type DoneListener = Arc<dyn Fn(&JobSnapshot, Option<&Owner>) + Send + Sync>;
type ChangedListener = Arc<dyn Fn(Option<&Owner>) + Send + Sync>;

#[derive(Default)]
struct State {
    /// Every record, in registration order and by id.
    records: records::Records,
    /// Live (non-terminal) jobs per admission bucket (an owner instance, or
    /// `None` for unowned jobs), kept in step with settlement.
    live: HashMap<Option<u64>, u64>,
    /// Finished jobs per admission bucket, in settlement order: the oldest go
    /// first once there are more than the retention limit.
    finished: HashMap<Option<u64>, VecDeque<String>>,
    /// Teardowns so far, per owner instance and (under `None`) of the whole
    /// service: a start under way when one happens is undone, not registered.
    teardowns: HashMap<Option<u64>, u64>,
    counters: HashMap<String, u64>,
    scopes: ScopeTree,
    controllers: Layered<()>,
    done_listeners: Layered<DoneListener>,
    /// Told when a settled job is owed its notice again (a wait that had
    /// counted it was abandoned before its caller saw the outcome).
    owed_listeners: Layered<DoneListener>,
    changed_listeners: Layered<ChangedListener>,
    /// Set by service disposal: no completion listener runs any more.
    listeners_closed: bool,
    /// Wake-ups spent per exact owner object, since its last user message.
    wakes: HashMap<u64, u64>,
}

impl State {
    /// One more live job in `owner`'s bucket.
    fn add_live(&mut self, owner: Option<&Owner>) {
        *self.live.entry(owner.map(Owner::instance)).or_insert(0) += 1;
    }

    /// Records that job `id` of `owner` finished, then drops the oldest finished
    /// jobs of that bucket beyond `limit`, as long as their outcome was seen (a
    /// notice may still be due otherwise; unowned jobs have none). Dropping a
    /// record drops its hooks, and so the producer's output and spill files.
    fn retire(&mut self, id: &str, owner: Option<&Owner>, limit: u64) {
        let key = owner.map(Owner::instance);
        let queue = self.finished.entry(key).or_default();
        queue.push_back(id.to_owned());
        while queue.len() as u64 > limit {
            let Some(oldest) = queue.front() else { break };
            match self.records.get(oldest) {
                None => {}
                Some(r) if r.reported || r.owner.is_none() => {
                    self.records.remove(oldest);
                }
                // Its notice is still due; it goes on a later settlement.
                Some(_) => break,
            }
            queue.pop_front();
        }
    }

    /// One live job fewer in `owner`'s bucket.
    fn remove_live(&mut self, owner: Option<&Owner>) {
        let key = owner.map(Owner::instance);
        if let Some(n) = self.live.get_mut(&key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.live.remove(&key);
            }
        }
    }

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
    clock: Arc<dyn Clock>,
}

/// The job registry. Cheap to clone; all clones share one set of records.
///
/// Must be used from within a tokio runtime: each start spawns the task that
/// settles the job when its producer is done.
#[derive(Clone)]
pub struct JobRegistry {
    shared: Arc<Shared>,
}

/// Milliseconds since the Unix epoch, by the system clock.
pub fn now_ms() -> u64 {
    SystemClock.now_ms()
}

impl Default for JobRegistry {
    fn default() -> Self {
        JobRegistry::new(RegistryConfig::default(), AgentDirectory::default())
    }
}

impl JobRegistry {
    /// A registry with `config` that checks owners against `agents`.
    pub fn new(config: RegistryConfig, agents: AgentDirectory) -> JobRegistry {
        JobRegistry::with_clock(config, agents, Arc::new(SystemClock))
    }

    /// [`JobRegistry::new`] with another clock (a [`crate::clock::ManualClock`]
    /// in tests): job times and the guest's `now-ms` come from it.
    pub fn with_clock(
        config: RegistryConfig,
        agents: AgentDirectory,
        clock: Arc<dyn Clock>,
    ) -> JobRegistry {
        JobRegistry {
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
                config,
                agents,
                next_listener: AtomicU64::new(1),
                clock,
            }),
        }
    }

    /// Now, by this registry's clock (epoch milliseconds).
    pub fn now_ms(&self) -> u64 {
        self.shared.clock.now_ms()
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
}

fn notify_changed(listeners: &[ChangedListener], owner: Option<&Owner>) {
    for listener in listeners {
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| listener(owner))) {
            tracing::warn!(
                "{}",
                crate::words::changed_listener_failed(&panic_message(&*panic))
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
