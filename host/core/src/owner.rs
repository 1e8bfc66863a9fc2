//! Owners: the live agents jobs belong to, how notices reach them, and the
//! directory of live agents.
//!
//! A harness implements [`Agent`] for its own agent loop (or uses the ready-made
//! [`Inbox`]) and wraps each live agent in an [`Owner`]. The host then delivers
//! completion notices into it: `inject` queues a message for the agent's next step
//! without waking it; `followup` queues one and wakes an idle agent. When the agent
//! takes a queued message into a step, the harness reports the claim with
//! [`crate::JobRegistry::inbox_claimed`], so a human's message can refill the
//! wake budget.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::sync::lock;

use crate::scope::ScopeKey;

/// Whether an agent is between turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentStatus {
    /// Between turns: only a wake-up starts another.
    Idle,
    /// In a turn: queued messages are picked up at its next step.
    Running,
}

/// How a notice was handed to its owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// Queued for the next step; does not wake an idle agent.
    Inject,
    /// Queued for the next turn, waking an idle agent.
    Followup,
}

/// A completion notice as the owner receives it: a user-role message with one text
/// block, from the plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoticeMessage {
    /// The one text block of the message.
    pub text: String,
    /// The collapsed-row summary for a user interface (profile A only).
    pub summary: Option<String>,
    /// The plugin that sent it (`tool-jobs` or `tool-tasks`).
    pub plugin: String,
    /// The message form (`notice`; profile A only).
    pub form: Option<String>,
}

/// Who wrote a message an agent claimed into a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageSource {
    /// A person. Only this refills the wake budget.
    User,
    /// A plugin, such as this one's own notices.
    Plugin,
    /// Anything else the harness queues.
    Other,
}

/// Why an agent did not take a notice.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeliveryError {
    /// The agent was disposed while the notice was on its way: a harmless race
    /// (profile B says nothing of it; other profiles log it).
    #[error("agent \"{0}\" is disposed")]
    Disposed(String),
    /// Any other failure; the host logs it and moves on.
    #[error("{0}")]
    Failed(String),
}

impl From<String> for DeliveryError {
    fn from(message: String) -> Self {
        DeliveryError::Failed(message)
    }
}

/// A live agent as the host sees it. Implemented by the harness.
pub trait Agent: Send + Sync + 'static {
    /// Whether the agent is idle or in a turn.
    fn status(&self) -> AgentStatus;
    /// Queues `message` for the agent's next step, without waking it.
    ///
    /// # Errors
    ///
    /// [`DeliveryError::Disposed`] when the agent is gone, else any failure; the
    /// host logs it and moves on.
    fn inject(&self, message: NoticeMessage) -> Result<(), DeliveryError>;
    /// Queues `message` for the agent's next turn and wakes it if idle.
    ///
    /// # Errors
    ///
    /// As for [`Agent::inject`].
    fn followup(&self, message: NoticeMessage) -> Result<(), DeliveryError>;
}

/// A ready-made [`Agent`]: it records what it was given, with the lane, and
/// reports whatever status it was last set to (running at first).
pub struct Inbox {
    status: Mutex<AgentStatus>,
    messages: Mutex<Vec<(Lane, NoticeMessage)>>,
}

impl Default for Inbox {
    fn default() -> Self {
        Inbox {
            status: Mutex::new(AgentStatus::Running),
            messages: Mutex::new(Vec::new()),
        }
    }
}

impl Inbox {
    /// Sets the status the inbox reports.
    pub fn set_status(&self, status: AgentStatus) {
        *lock(&self.status) = status;
    }

    /// Everything delivered so far, in order.
    pub fn messages(&self) -> Vec<(Lane, NoticeMessage)> {
        lock(&self.messages).clone()
    }

    /// How many messages arrived through `lane`.
    pub fn count(&self, lane: Lane) -> usize {
        lock(&self.messages)
            .iter()
            .filter(|(l, _)| *l == lane)
            .count()
    }
}

impl Agent for Inbox {
    fn status(&self) -> AgentStatus {
        *lock(&self.status)
    }

    fn inject(&self, message: NoticeMessage) -> Result<(), DeliveryError> {
        lock(&self.messages).push((Lane::Inject, message));
        Ok(())
    }

    fn followup(&self, message: NoticeMessage) -> Result<(), DeliveryError> {
        lock(&self.messages).push((Lane::Followup, message));
        Ok(())
    }
}

/// A live agent that can own background jobs.
///
/// Two handles are the *same owner* only when they come from the same
/// constructor call (object identity): lifecycle decisions (admission buckets,
/// notices, wake budgets, cleanup) use that identity. Access checks (who may read,
/// wait on or kill a job) compare session ids, so a replacement agent with the same
/// session id can see and control the old agent's jobs, but never receives their
/// notices.
#[derive(Clone)]
pub struct Owner(Arc<OwnerInner>);

struct OwnerInner {
    session_id: String,
    instance: u64,
    agent: Arc<dyn Agent>,
    inbox: Option<Arc<Inbox>>,
    scope: Option<ScopeKey>,
}

/// Builds an [`Owner`].
pub struct OwnerBuilder {
    session_id: String,
    agent: Option<Arc<dyn Agent>>,
    scope: Option<ScopeKey>,
}

impl OwnerBuilder {
    /// The agent notices are delivered to (default: a fresh [`Inbox`]).
    pub fn agent(mut self, agent: Arc<dyn Agent>) -> Self {
        self.agent = Some(agent);
        self
    }

    /// The agent's own scope, parented to the preset scope it joins (see
    /// [`crate::JobRegistry::create_scope`]). Without one, only global mounts serve it.
    pub fn scope(mut self, scope: ScopeKey) -> Self {
        self.scope = Some(scope);
        self
    }

    /// The owner. It must be registered with [`AgentDirectory::register`] before it
    /// can start jobs.
    pub fn build(self) -> Owner {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let (agent, inbox): (Arc<dyn Agent>, Option<Arc<Inbox>>) = match self.agent {
            Some(agent) => (agent, None),
            None => {
                let inbox = Arc::new(Inbox::default());
                (inbox.clone(), Some(inbox))
            }
        };
        Owner(Arc::new(OwnerInner {
            session_id: self.session_id,
            instance: NEXT.fetch_add(1, Ordering::Relaxed),
            agent,
            inbox,
            scope: self.scope,
        }))
    }
}

impl Owner {
    /// A new owner for `session_id` with its own [`Inbox`] and no scope.
    pub fn new(session_id: impl Into<String>) -> Owner {
        Owner::builder(session_id).build()
    }

    /// Starts building an owner for `session_id`.
    pub fn builder(session_id: impl Into<String>) -> OwnerBuilder {
        OwnerBuilder {
            session_id: session_id.into(),
            agent: None,
            scope: None,
        }
    }

    /// The session id access checks compare.
    pub fn session_id(&self) -> &str {
        &self.0.session_id
    }

    /// A number unique to this owner object.
    pub fn instance(&self) -> u64 {
        self.0.instance
    }

    /// The agent notices go to.
    pub fn agent(&self) -> &Arc<dyn Agent> {
        &self.0.agent
    }

    /// The built-in inbox, when the owner was made without an agent of its own.
    pub fn inbox(&self) -> Option<&Arc<Inbox>> {
        self.0.inbox.as_ref()
    }

    /// The agent's scope, if it has one.
    pub fn scope(&self) -> Option<ScopeKey> {
        self.0.scope
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
            .field("scope", &self.0.scope)
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
        lock(&self.live).insert(owner.session_id().to_owned(), owner.clone());
    }

    /// Removes `owner` if it is still the live instance for its session id.
    pub fn unregister(&self, owner: &Owner) {
        let mut live = lock(&self.live);
        if live
            .get(owner.session_id())
            .is_some_and(|current| current.same_instance(owner))
        {
            live.remove(owner.session_id());
        }
    }

    /// Whether `owner` is the live instance registered for its session id.
    pub fn is_live(&self, owner: &Owner) -> bool {
        lock(&self.live)
            .get(owner.session_id())
            .is_some_and(|current| current.same_instance(owner))
    }
}
