//! One agent's session over the host: the plugin's start tool (`bash`) wired
//! to a producer of commands (see [`crate::producer`]), the plugin's job
//! tools, and completion notices placed before the next tool result. Every
//! word the model reads comes from the plugin; this module is wiring.
//!
//! The MCP server and the interactive shell of `jobs-host` are thin front ends over
//! [`Session`]; a harness can use it the same way.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::{OnceCell, mpsc};
use tokio_util::sync::CancellationToken;

use crate::owner::{Agent, AgentStatus, DeliveryError, Lane, NoticeMessage, Owner};
use crate::plugin::{Mount, StartMade, StartRequest, ToolDefinition, ToolOutcome};
use crate::producer::{CommandProducer, CommandRequest, Started};
use crate::registry::JobRegistry;

/// The agent side of a session: it is always mid-conversation (a client model
/// cannot be woken from here), so notices arrive through the inject lane and
/// wait for the next tool result. Each is also announced on a channel as it
/// arrives, for logging notifications or a console.
pub struct SessionAgent {
    pending: Mutex<Vec<NoticeMessage>>,
    /// Replaced when a new front end takes the session over (see
    /// [`Session::reattach`]).
    announce: Mutex<mpsc::UnboundedSender<(Lane, NoticeMessage)>>,
    /// Since when the front end has seen no activity, if it reports it (see
    /// [`Session::set_active`]); `None` while a call runs or when it never says.
    quiet_since: Mutex<Option<std::time::Instant>>,
    /// How long a quiet front end waits before its agent counts as idle, in
    /// milliseconds.
    idle_after_ms: AtomicU64,
    /// Whether the front end takes follow-up notices itself (see
    /// [`Session::take_followups`]).
    followups_taken: AtomicBool,
}

impl SessionAgent {
    fn queue(&self, lane: Lane, message: NoticeMessage) -> Result<(), DeliveryError> {
        // Under the announce lock, so a front end that attaches or leaves
        // meanwhile sees the notice on its side of the change only.
        let announce = crate::sync::lock(&self.announce);
        let taken = lane == Lane::Followup && self.followups_taken.load(Ordering::Acquire);
        if taken {
            // The front end delivers it (a push the client turns into the
            // model's next turn); queueing it too would show it twice.
            match announce.send((lane, message)) {
                Ok(()) => return Ok(()),
                // Nobody takes it after all: it waits for the next result.
                Err(mpsc::error::SendError((_, message))) => {
                    crate::sync::lock(&self.pending).push(message);
                    return Ok(());
                }
            }
        }
        crate::sync::lock(&self.pending).push(message.clone());
        // Nobody listening is fine: the notice still waits for the next result.
        let _ = announce.send((lane, message));
        Ok(())
    }

    fn take(&self) -> Vec<NoticeMessage> {
        std::mem::take(&mut *crate::sync::lock(&self.pending))
    }
}

impl Agent for SessionAgent {
    fn status(&self) -> AgentStatus {
        // Without a front end that reports activity the agent is always in a
        // turn: notices wait for the next result.
        match *crate::sync::lock(&self.quiet_since) {
            Some(since)
                if since.elapsed()
                    >= std::time::Duration::from_millis(
                        self.idle_after_ms.load(Ordering::Relaxed),
                    ) =>
            {
                AgentStatus::Idle
            }
            _ => AgentStatus::Running,
        }
    }

    fn inject(&self, message: NoticeMessage) -> Result<(), DeliveryError> {
        self.queue(Lane::Inject, message)
    }

    fn followup(&self, message: NoticeMessage) -> Result<(), DeliveryError> {
        self.queue(Lane::Followup, message)
    }
}

/// A tool result with the notices that arrived since the previous one.
#[derive(Debug, Clone)]
pub struct SessionReply {
    /// Completion notices to place before the result, oldest first.
    pub notices: Vec<NoticeMessage>,
    /// The tool's own result.
    pub outcome: ToolOutcome,
}

/// What runs before each reply of a session goes out (see
/// [`Session::set_before_reply`]).
pub type BeforeReply =
    Arc<dyn Fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> + Send + Sync>;

/// One owner's session: its `bash` tool, the plugin's tools and its notices.
pub struct Session {
    owner: Owner,
    agent: Arc<SessionAgent>,
    registry: JobRegistry,
    mount: Arc<Mount>,
    /// What runs the start tool's commands.
    producer: Arc<dyn CommandProducer>,
    /// The start tool's name, as the plugin defines it (asked once).
    start_name: OnceCell<String>,
    /// How many front ends have attached (see [`Session::reattach`]).
    front_end: AtomicU64,
    before_reply: std::sync::OnceLock<BeforeReply>,
}

impl Session {
    /// Opens a session for `session_id` on `mount`'s registry. Returns the session
    /// and the channel on which each notice is announced as it arrives. The
    /// start tool's commands run on `producer` (the shell producer, whose
    /// default directory relative working directories resolve against).
    pub fn open(
        session_id: &str,
        mount: Arc<Mount>,
        producer: impl CommandProducer + 'static,
    ) -> (Session, mpsc::UnboundedReceiver<(Lane, NoticeMessage)>) {
        let (announce, announced) = mpsc::unbounded_channel();
        let agent = Arc::new(SessionAgent {
            pending: Mutex::new(Vec::new()),
            announce: Mutex::new(announce),
            quiet_since: Mutex::new(None),
            idle_after_ms: AtomicU64::new(0),
            followups_taken: AtomicBool::new(false),
        });
        let owner = Owner::builder(session_id).agent(agent.clone()).build();
        let registry = mount.registry().clone();
        registry.agents().register(&owner);
        let session = Session {
            owner,
            agent,
            registry,
            mount,
            producer: Arc::new(producer),
            start_name: OnceCell::new(),
            front_end: AtomicU64::new(0),
            before_reply: std::sync::OnceLock::new(),
        };
        (session, announced)
    }

    /// Hands the session to a new front end (a client that connects again
    /// with the same session key): notices are announced on the channel
    /// returned from now on, the previous one gets nothing more, and the new
    /// front end starts as one that has said nothing of its agent nor taken
    /// follow-ups. Notices queued meanwhile still wait for the next result.
    /// Also answers the front end's number, for [`Session::detach`].
    pub fn reattach(&self) -> (u64, mpsc::UnboundedReceiver<(Lane, NoticeMessage)>) {
        let (announce, announced) = mpsc::unbounded_channel();
        let mut current = crate::sync::lock(&self.agent.announce);
        *current = announce;
        let front_end = self.front_end.fetch_add(1, Ordering::AcqRel) + 1;
        self.agent.followups_taken.store(false, Ordering::Release);
        *crate::sync::lock(&self.agent.quiet_since) = None;
        (front_end, announced)
    }

    /// Front end `front_end` (from [`Session::reattach`]) is gone (its client
    /// disconnected) but the session stays for the next one: nothing is
    /// announced until the next reattach, and every notice waits for the
    /// next result. A front end that was already replaced changes nothing.
    pub fn detach(&self, front_end: u64) {
        let mut current = crate::sync::lock(&self.agent.announce);
        if self.front_end.load(Ordering::Acquire) != front_end {
            return;
        }
        *current = mpsc::unbounded_channel().0;
        self.agent.followups_taken.store(false, Ordering::Release);
        *crate::sync::lock(&self.agent.quiet_since) = None;
    }

    /// Puts back a notice that was handed to the front end (a follow-up it
    /// took) but never reached its client: it waits for the next result.
    pub fn requeue(&self, notice: NoticeMessage) {
        crate::sync::lock(&self.agent.pending).push(notice);
    }

    /// The owner this session acts for.
    pub fn owner(&self) -> &Owner {
        &self.owner
    }

    /// The mount the session's tools run on.
    pub fn mount(&self) -> &Mount {
        &self.mount
    }

    /// Reports what the front end sees of its agent: `true` while a call is in
    /// flight, `false` once none is. An agent quiet for the idle time given to
    /// [`Session::take_followups`] counts as between turns, so the plugin may
    /// choose to wake it (the follow-up lane). A front end that never calls
    /// this keeps its agent in a turn.
    pub fn set_active(&self, active: bool) {
        *crate::sync::lock(&self.agent.quiet_since) = (!active).then(std::time::Instant::now);
    }

    /// Hands follow-up notices (the ones that wake an idle agent) to the front
    /// end: from now on each is only announced, not queued for the next
    /// result, so the front end must deliver it (Claude Code's channel).
    /// `idle_after` is how long the agent must be quiet to count as idle.
    pub fn take_followups(&self, idle_after: std::time::Duration) {
        self.agent.idle_after_ms.store(
            u64::try_from(idle_after.as_millis()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        let _announce = crate::sync::lock(&self.agent.announce);
        self.agent.followups_taken.store(true, Ordering::Release);
    }

    /// The registry the session's jobs live in.
    pub fn registry(&self) -> &JobRegistry {
        &self.registry
    }

    /// Delivers what has settled so far and takes the notices waiting for the
    /// next result: this is the session's step boundary, so a mount that pulls
    /// its notices (profile C) is drained here too.
    pub async fn collect_notices(&self) -> Vec<NoticeMessage> {
        self.mount.flush_notices().await;
        match self.mount.pull_notice(&self.owner).await {
            Ok(Some(notice)) => {
                // Queued like a pushed notice, so it is announced the same way.
                let _ = self.agent.inject(notice);
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(
                "jobs: batched notice for {} failed: {e}",
                self.owner.session_id()
            ),
        }
        self.agent.take()
    }

    /// The plugin's start tool followed by its job tools.
    ///
    /// # Errors
    ///
    /// When the plugin fails to list its tools.
    pub async fn tool_definitions(&self) -> Result<Vec<ToolDefinition>, crate::PluginError> {
        let start = self.mount.start_tool().await?;
        // Known now, so a call never has to ask again.
        let _ = self.start_name.set(start.name.clone());
        let mut tools = vec![start];
        tools.extend(self.mount.tool_definitions().await?);
        Ok(tools)
    }

    /// Whether `tool` is the plugin's start tool.
    pub async fn is_start_tool(&self, tool: &str) -> bool {
        let name = self
            .start_name
            .get_or_try_init(|| async { self.mount.start_tool().await.map(|t| t.name) })
            .await;
        match name {
            Ok(name) => name == tool,
            // The call then goes to the plugin's invoke, which answers for it.
            Err(e) => {
                tracing::warn!("jobs: the plugin's start tool is unavailable: {e}");
                false
            }
        }
    }

    /// Runs one tool call, then collects the notices delivered so far.
    pub async fn call(&self, tool: &str, args: &Value) -> SessionReply {
        self.call_with_abort(tool, args, &CancellationToken::new())
            .await
    }

    /// [`Session::call`] for a call its client may cancel (`abort`): a
    /// cancelled call consumes nothing it would not show. A pending wait ends
    /// before its read (the output stays for the next read, the job's notice
    /// stays owed), a start not yet made is not made, and the notices stay
    /// queued for the next result; the reply then says `Error: wait aborted`
    /// (or the start's refusal), for a client that no longer reads it.
    pub async fn call_with_abort(
        &self,
        tool: &str,
        args: &Value,
        abort: &CancellationToken,
    ) -> SessionReply {
        let outcome = if self.is_start_tool(tool).await {
            self.start_job(args, abort).await.0
        } else {
            self.invoke(tool, args, abort).await
        };
        self.reply(outcome, abort).await
    }

    /// One of the plugin's job tools (not the start tool), without collecting
    /// notices: they stay queued for the next result.
    pub async fn invoke(&self, tool: &str, args: &Value, abort: &CancellationToken) -> ToolOutcome {
        self.mount
            .invoke_with_abort(Some(&self.owner), tool, &args.to_string(), abort)
            .await
    }

    /// The start tool, without collecting notices: the plugin's answer and
    /// what the start made (`None` when the arguments were refused or the
    /// start failed).
    pub async fn start_job(
        &self,
        args: &Value,
        abort: &CancellationToken,
    ) -> (ToolOutcome, Option<StartMade>) {
        if abort.is_cancelled() {
            let outcome = ToolOutcome {
                text: crate::plugin::mount::CANCELLED_BEFORE_IT_RAN.to_owned(),
                is_error: true,
                value: None,
            };
            return (outcome, None);
        }
        let mut made = None;
        let outcome = self.start(args, abort, &mut made).await;
        (outcome, made)
    }

    /// `outcome` as a reply: with the notices delivered so far, unless the
    /// call was aborted (nobody reads it, so they wait for the next one).
    pub async fn reply(&self, outcome: ToolOutcome, abort: &CancellationToken) -> SessionReply {
        if abort.is_cancelled() {
            // Nobody reads this reply: the notices wait for the next one.
            return SessionReply {
                notices: Vec::new(),
                outcome,
            };
        }
        // Anything that settled before this result is announced with it.
        let notices = self.collect_notices().await;
        if let Some(hook) = self.before_reply.get() {
            hook().await;
        }
        SessionReply { notices, outcome }
    }

    /// The start tool: the plugin checks the arguments and words the answer;
    /// the shell producer makes the start.
    async fn start(
        &self,
        args: &Value,
        abort: &CancellationToken,
        made: &mut Option<StartMade>,
    ) -> ToolOutcome {
        self.mount
            .start_after_preflight(
                Some(&self.owner),
                &args.to_string(),
                self.producer.max_command_bytes(),
                abort,
                |request: &StartRequest| self.producer.preflight(&command_request(request)),
                |request: &StartRequest| {
                    let started = self
                        .producer
                        .start(Some(self.owner.clone()), command_request(request))
                        .map(|started| match started {
                            Started::New(id) => StartMade::New(id),
                            Started::Existing(id) => StartMade::Existing(id),
                        });
                    *made = started.as_ref().ok().cloned();
                    started
                },
            )
            .await
    }

    /// Runs `hook` before each reply goes out, after what it shows was read
    /// and its notices were taken: a host that outlives a crash records
    /// there how far the model has read. Set once; a second hook is
    /// refused (returned).
    ///
    /// # Errors
    ///
    /// A hook was set already; `hook` is given back.
    pub fn set_before_reply(&self, hook: BeforeReply) -> Result<(), BeforeReply> {
        self.before_reply.set(hook)
    }

    /// Ends the session (for profile C, the run): its jobs are cancelled and
    /// forgotten, and no notice is sent, now or to a later session of the same id.
    pub async fn close(&self) {
        self.registry.dispose_owner(&self.owner).await;
        self.registry.agents().unregister(&self.owner);
    }
}

/// The checked start as the producers take it.
fn command_request(request: &StartRequest) -> CommandRequest {
    CommandRequest {
        command: request.command.clone(),
        workdir: request.workdir.as_ref().map(PathBuf::from),
        stdin: request.stdin,
        name: request.name.clone(),
        limits: request.limits,
        sandbox: request.sandbox.clone(),
        tty: request.tty,
        render: request.render,
        runner: request.runner.clone(),
        resources: request.resources.clone(),
        ..CommandRequest::default()
    }
}
