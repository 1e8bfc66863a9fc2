//! Scopes, job controllers and listeners: who serves and who hears an owner.

use std::sync::{Arc, Weak};

use super::{JobRegistry, JobSnapshot, Shared, lock};
use crate::owner::Owner;
use crate::scope::ScopeKey;

/// Keeps a controller attached; dropping it detaches. A start is refused with
/// [`super::StartError::NoController`] unless a controller serves the owner.
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
            state.owed_listeners.remove(self.id);
            state.changed_listeners.remove(self.id);
        }
    }
}

impl JobRegistry {
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
        self.push_job_listener(|state| &mut state.done_listeners, scope, Arc::new(listener))
    }

    /// Registers `listener` in the list `which` picks, in `scope`'s layer.
    fn push_job_listener(
        &self,
        which: fn(&mut super::State) -> &mut crate::scope::Layered<super::DoneListener>,
        scope: Option<ScopeKey>,
        listener: super::DoneListener,
    ) -> ListenerRegistration {
        let id = self.next_id();
        which(&mut lock(&self.shared.state)).push(id, scope, listener);
        ListenerRegistration {
            registry: Arc::downgrade(&self.shared),
            id,
        }
    }

    /// Calls `listener`, routed like [`JobRegistry::on_job_done_in`], when a
    /// settled job is owed its completion notice again: a wait had seen its end
    /// (which holds the notice back), and then its caller went away before the
    /// outcome was shown (a cancelled tool call, a dropped future). A mount
    /// delivers the notice then, exactly as after the settlement.
    pub fn on_notice_owed_in(
        &self,
        scope: Option<ScopeKey>,
        listener: impl Fn(&JobSnapshot, Option<&Owner>) + Send + Sync + 'static,
    ) -> ListenerRegistration {
        self.push_job_listener(|state| &mut state.owed_listeners, scope, Arc::new(listener))
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

    /// Whether `owner` belongs to `scope`'s layer: every owner belongs to the
    /// global layer (`None`); otherwise `scope` must be on the owner's chain.
    pub fn in_layer(&self, scope: Option<ScopeKey>, owner: &Owner) -> bool {
        scope.is_none_or(|scope| lock(&self.shared.state).chain(Some(owner)).contains(&scope))
    }
}
