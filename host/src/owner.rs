//! Owners: the live agent objects jobs belong to, and the directory of live agents.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A live agent that can own background jobs.
///
/// Two handles are the *same owner* only when they come from the same
/// [`Owner::new`] call (object identity): lifecycle decisions (admission buckets,
/// notices, cleanup) use that identity. Access checks (who may read, wait on or kill
/// a job) compare session ids, so a replacement agent with the same session id can
/// see and control the old agent's jobs.
#[derive(Clone)]
pub struct Owner(Arc<OwnerInner>);

struct OwnerInner {
    session_id: String,
    instance: u64,
}

impl Owner {
    /// A new owner object for `session_id`. It must be registered with
    /// [`AgentDirectory::register`] before it can start jobs.
    pub fn new(session_id: impl Into<String>) -> Owner {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Owner(Arc::new(OwnerInner {
            session_id: session_id.into(),
            instance: NEXT.fetch_add(1, Ordering::Relaxed),
        }))
    }

    /// The session id access checks compare.
    pub fn session_id(&self) -> &str {
        &self.0.session_id
    }

    /// Whether both handles are the same owner object.
    pub fn same_instance(&self, other: &Owner) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// Whether both owners speak for the same session.
    pub fn same_session(&self, other: &Owner) -> bool {
        self.0.session_id == other.0.session_id
    }
}

impl fmt::Debug for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Owner")
            .field("session_id", &self.0.session_id)
            .field("instance", &self.0.instance)
            .finish()
    }
}

/// The live agents, one registered instance per session id.
#[derive(Clone, Default)]
pub struct AgentDirectory {
    live: Arc<Mutex<HashMap<String, Owner>>>,
}

impl AgentDirectory {
    /// Makes `owner` the live instance for its session id, replacing any earlier one.
    pub fn register(&self, owner: &Owner) {
        self.lock()
            .insert(owner.session_id().to_owned(), owner.clone());
    }

    /// Removes `owner` if it is still the live instance for its session id.
    pub fn unregister(&self, owner: &Owner) {
        let mut live = self.lock();
        if live
            .get(owner.session_id())
            .is_some_and(|current| current.same_instance(owner))
        {
            live.remove(owner.session_id());
        }
    }

    /// Whether `owner` is the live instance registered for its session id.
    pub fn is_live(&self, owner: &Owner) -> bool {
        self.lock()
            .get(owner.session_id())
            .is_some_and(|current| current.same_instance(owner))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Owner>> {
        // The map holds no invariant a panic could break halfway.
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }
}
