//! One loaded copy of the plugin over a registry: its validated configuration,
//! its controller attachment, and every call made through it.
//!
//! (Over 500 lines: one method per guest export, each with the rules of its
//! call documented where an embedder reads them; the start tool is in `start`.)

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use wasmtime::Store;
use wasmtime::component::Resource;

use super::bindings::ToolJobs;
use super::bindings::exports::harness::jobs::tools::{
    CallOutcome, Config as PluginConfig, ContentBlock as WitBlock, NoticeTransport, ToolResult,
    WaitRequest,
};
use super::bindings::harness::jobs::types as wit;
use super::delivery::{NoticeWork, deliver_notices};
use super::host_impl::{CallState, ScopeHandle};
use super::runtime::PluginRuntime;
use super::{
    ContentBlock, MountConfig, PluginError, PromptSection, ToolDefinition, UiCard, setup, trap,
};
use crate::owner::{NoticeMessage, Owner};
use crate::registry::{self, ControllerAttachment, JobRegistry, ListenerRegistration};
use crate::scope::ScopeKey;

/// What a tool call returned, as the harness hands it to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutcome {
    /// The one text block the model sees.
    pub text: String,
    /// Whether the call failed.
    pub is_error: bool,
    /// The canonical structured value, on success.
    pub value: Option<serde_json::Value>,
}

/// One loaded copy of the plugin over a registry, in the global layer or in one
/// scope's layer. For as long as it lives it is attached as a job controller, and
/// it delivers the completion notices of the jobs its layer hears.
pub struct Mount {
    runtime: Arc<PluginRuntime>,
    registry: JobRegistry,
    config: PluginConfig,
    /// The same config in the host's own types, for embedders.
    public: MountConfig,
    scope: Option<ScopeKey>,
    notices: tokio::sync::mpsc::UnboundedSender<NoticeWork>,
    /// Absent for a mount that pulls its notices: it has nothing to push.
    listener: Option<(ListenerRegistration, ListenerRegistration)>,
    /// One semaphore per owner instance with calls in flight.
    calls: std::sync::Mutex<std::collections::HashMap<u64, Arc<tokio::sync::Semaphore>>>,
    _controller: ControllerAttachment,
}

impl Mount {
    /// Validates `config_json` through the plugin and attaches it to `registry`
    /// in the global layer, where it serves every owner.
    ///
    /// # Errors
    ///
    /// [`PluginError::Config`] with the plugin's own message for a bad config.
    pub async fn new(
        runtime: Arc<PluginRuntime>,
        registry: JobRegistry,
        config_json: &str,
    ) -> Result<Mount, PluginError> {
        Mount::scoped(runtime, registry, None, config_json).await
    }

    /// Like [`Mount::new`], in `scope`'s layer (global for `None`): the mount then
    /// serves, and notifies, only owners whose scope chain passes through `scope`.
    /// Dropping the mount removes its controller and its listeners.
    ///
    /// # Errors
    ///
    /// [`PluginError::Config`] with the plugin's own message for a bad config.
    pub async fn scoped(
        runtime: Arc<PluginRuntime>,
        registry: JobRegistry,
        scope: Option<ScopeKey>,
        config_json: &str,
    ) -> Result<Mount, PluginError> {
        let config = runtime
            .call(&registry, |jobs, store| {
                jobs.harness_jobs_tools()
                    .call_configure(store, config_json)
                    .map_err(trap)?
                    .map_err(PluginError::Config)
            })
            .await?;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let sender = tx.clone();
        // A pulling mount (profile C) takes settled jobs from the registry at the
        // owner's next step instead; asking its guest about each settlement
        // would only cost an instance per job.
        let listener = (config.notice_transport == NoticeTransport::Push).then(|| {
            let owed = sender.clone();
            (
                registry.on_job_done_in(scope, move |job, owner| {
                    // The task may be gone only while the mount itself is being dropped.
                    let _ = sender.send(NoticeWork::Settled(Box::new(job.clone()), owner.cloned()));
                }),
                // A job whose wait was abandoned is decided again, like a settlement.
                registry.on_notice_owed_in(scope, move |job, owner| {
                    let _ = owed.send(NoticeWork::Settled(Box::new(job.clone()), owner.cloned()));
                }),
            )
        });
        tokio::spawn(deliver_notices(
            runtime.clone(),
            registry.clone(),
            config.clone(),
            rx,
        ));
        let controller = registry.attach_controller_in(scope);
        Ok(Mount {
            runtime,
            registry,
            public: MountConfig::from(&config),
            config,
            scope,
            notices: tx,
            listener,
            calls: Default::default(),
            _controller: controller,
        })
    }

    /// The scope this mount serves (`None`: global).
    pub fn scope(&self) -> Option<ScopeKey> {
        self.scope
    }

    /// Returns once every notice this mount heard so far has been delivered.
    pub async fn flush_notices(&self) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        if self.notices.send(NoticeWork::Flush(tx)).is_ok() {
            let _ = rx.await;
        }
    }

    /// The registry this mount serves.
    pub fn registry(&self) -> &JobRegistry {
        &self.registry
    }

    /// The validated configuration.
    pub fn config(&self) -> &MountConfig {
        &self.public
    }

    /// The validated configuration as the guest takes it back.
    pub(super) fn wit_config(&self) -> &PluginConfig {
        &self.config
    }

    /// Runs one tool call for `caller`. A guest failure becomes an error result
    /// (`Error: plugin failed: ...`); the next call gets a fresh instance.
    pub async fn invoke(&self, caller: Option<&Owner>, tool: &str, args_json: &str) -> ToolOutcome {
        self.invoke_with_abort(caller, tool, args_json, &CancellationToken::new())
            .await
    }

    /// [`Mount::invoke`], with `abort` standing for the caller's tool-call signal:
    /// cancelling it ends a pending wait with `Error: wait aborted`.
    ///
    /// A call that has to wait runs in steps: the guest answers with a wait
    /// request, the host waits on the registry (holding no instance, no pool
    /// slot and none of the owner's call turns meanwhile), then a fresh instance
    /// resumes the call with the outcome.
    ///
    /// A call cancelled or dropped before its result loses nothing: an abort
    /// that comes after the wait saw the job's end, but before the read that
    /// would show it, still ends the call with `Error: wait aborted` and
    /// consumes nothing, and the job is not counted as seen, so its output
    /// waits for the next read and its notice is owed again (see
    /// [`crate::registry::WaitHold`]).
    pub async fn invoke_with_abort(
        &self,
        caller: Option<&Owner>,
        tool: &str,
        args_json: &str,
        abort: &CancellationToken,
    ) -> ToolOutcome {
        // Checked again once the call holds its turn and pool slot (which it
        // may have waited for): a call cancelled by then does not run at all.
        let step = self
            .with_scope(caller, |jobs, store, scope| {
                if abort.is_cancelled() {
                    return Ok(CallOutcome::Done(ToolResult {
                        text: CANCELLED_BEFORE_IT_RAN.to_owned(),
                        is_error: true,
                        value: None,
                    }));
                }
                jobs.harness_jobs_tools()
                    .call_invoke(store, scope, &self.config, tool, args_json)
            })
            .await;
        self.finish_call(caller, tool, args_json, step, abort).await
    }

    /// Takes a call from its first step to its answer: each wait the guest
    /// asks for runs on the registry, then a fresh instance resumes the call.
    pub(super) async fn finish_call(
        &self,
        caller: Option<&Owner>,
        tool: &str,
        args_json: &str,
        mut step: Result<CallOutcome, PluginError>,
        abort: &CancellationToken,
    ) -> ToolOutcome {
        let mut waits = 0;
        // Holds of waits that saw a job's end, confirmed once the call answers
        // (the guest's answer after a wait shows the outcome) and released
        // otherwise, dropped futures included.
        let mut holds = Vec::new();
        loop {
            let request = match step {
                Ok(CallOutcome::Done(result)) => {
                    // A caller that left while the answer was made will not
                    // see it: its holds go, so the jobs' notices are owed again.
                    if !abort.is_cancelled() {
                        holds.into_iter().for_each(registry::WaitHold::confirm);
                    }
                    return outcome_of(result);
                }
                Err(e) => return failed(&e),
                Ok(CallOutcome::Wait(request)) => request,
            };
            if waits == MAX_WAITS_PER_CALL {
                return failed(&format!(
                    "plugin failed: the guest asked to wait more than {MAX_WAITS_PER_CALL} times in one call"
                ));
            }
            waits += 1;
            let waited = match self.run_wait(caller, &request, abort).await {
                // The caller left after the end was seen but before anything
                // was shown: answer as for an abort during the wait.
                Ok((_, hold)) if abort.is_cancelled() => {
                    drop(hold);
                    Err(wit::RegistryError::WaitAborted)
                }
                Ok((waited, hold)) => {
                    holds.push(hold);
                    Ok(waited)
                }
                Err(e) => Err(e),
            };
            step = self
                .with_scope(caller, |jobs, store, scope| {
                    // The caller may have left while this step waited for its
                    // turn and slot: then nothing is read.
                    let aborted = Err(wit::RegistryError::WaitAborted);
                    let waited = if abort.is_cancelled() {
                        aborted.as_ref()
                    } else {
                        waited.as_ref()
                    };
                    jobs.harness_jobs_tools().call_resume(
                        store,
                        scope,
                        &self.config,
                        tool,
                        args_json,
                        waited,
                    )
                })
                .await;
        }
    }

    /// Runs a wait the guest asked for, held to this mount's cap and to what a
    /// timer holds (so a guest cannot wait longer than the operator allowed).
    async fn run_wait(
        &self,
        caller: Option<&Owner>,
        request: &WaitRequest,
        abort: &CancellationToken,
    ) -> Result<(wit::Waited, registry::WaitHold), wit::RegistryError> {
        let cap = self
            .config
            .max_wait_timeout_ms
            .clamp(1, registry::MAX_TIMER_DELAY_MS);
        let timeout_ms = u64::from(request.timeout_ms).clamp(1, cap);
        let until = request
            .until
            .as_ref()
            .map(|u| registry::control::WaitUntil {
                pattern: u.pattern.clone(),
                // Held like the timeout: at least 1 ms.
                quiet_ms: u.quiet_ms.map(|ms| ms.max(1)),
                prompt_quiet_ms: u.prompt_quiet_ms.map(|ms| ms.max(1)),
            })
            .unwrap_or_default();
        self.registry
            .wait_held(&request.job_id, timeout_ms, caller, abort, &until)
            .await
            .map(|(job, end, matched, hold)| {
                // A prompt travels as its own text, not as a match.
                let (matched, prompt) = match end {
                    registry::control::WaitEnd::Prompt => (None, matched.map(|m| m.line.text)),
                    _ => (matched.map(Into::into), None),
                };
                let waited = wit::Waited {
                    job: wit::JobSnapshot::from(&job),
                    end: end.into(),
                    matched,
                    prompt,
                };
                (waited, hold)
            })
            .map_err(wit::RegistryError::from)
    }

    /// Caps a result the harness produced or rewrote for a call of this plugin's
    /// tools (see the WIT `finalize`).
    ///
    /// # Errors
    ///
    /// [`PluginError::Trap`] when the guest fails.
    pub async fn finalize(
        &self,
        caller: Option<&Owner>,
        tool: &str,
        args_json: &str,
        blocks: Vec<ContentBlock>,
    ) -> Result<Vec<ContentBlock>, PluginError> {
        let blocks: Vec<WitBlock> = blocks.into_iter().map(Into::into).collect();
        let out = self
            .with_scope(caller, |jobs, store, scope| {
                jobs.harness_jobs_tools().call_finalize(
                    store,
                    scope,
                    &self.config,
                    tool,
                    args_json,
                    &blocks,
                )
            })
            .await?;
        Ok(out.into_iter().map(Into::into).collect())
    }

    /// The tools with their exact descriptions and schemas.
    ///
    /// # Errors
    ///
    /// [`PluginError::Trap`] when the guest fails.
    pub async fn tool_definitions(&self) -> Result<Vec<ToolDefinition>, PluginError> {
        let defs = self
            .with_instance(|jobs, store| {
                jobs.harness_jobs_tools()
                    .call_tool_definitions(store, &self.config)
            })
            .await?;
        Ok(defs.into_iter().map(Into::into).collect())
    }

    /// The UI card for one call, if the tool is known.
    ///
    /// # Errors
    ///
    /// [`PluginError::Trap`] when the guest fails.
    pub async fn ui_card(
        &self,
        tool: &str,
        args_json: &str,
    ) -> Result<Option<UiCard>, PluginError> {
        let card = self
            .with_instance(|jobs, store| {
                jobs.harness_jobs_tools()
                    .call_describe_call(store, &self.config, tool, args_json)
            })
            .await?;
        Ok(card.map(Into::into))
    }

    /// The system-prompt section, if the profile has one.
    ///
    /// # Errors
    ///
    /// [`PluginError::Trap`] when the guest fails.
    pub async fn prompt_section(&self) -> Result<Option<PromptSection>, PluginError> {
        let section = self
            .with_instance(|jobs, store| {
                jobs.harness_jobs_tools()
                    .call_system_prompt(store, &self.config)
            })
            .await?;
        Ok(section.map(Into::into))
    }

    /// The completion notice (text and summary) for a settled job.
    ///
    /// # Errors
    ///
    /// [`PluginError::Trap`] when the guest fails.
    pub async fn completion_notice(
        &self,
        job: &registry::JobSnapshot,
    ) -> Result<NoticeMessage, PluginError> {
        let job = wit::JobSnapshot::from(job);
        let n = self
            .with_instance(|jobs, store| {
                jobs.harness_jobs_notices()
                    .call_completion_notice(store, &self.config, &job)
            })
            .await?;
        Ok(NoticeMessage {
            text: n.text,
            summary: n.summary,
            plugin: n.plugin,
            form: n.form,
        })
    }

    /// Whether this mount's notices are pulled with [`Mount::pull_notice`] before
    /// each step (profile C) rather than pushed into the owner's agent.
    pub fn pulls_notices(&self) -> bool {
        self.listener.is_none()
    }

    /// The one notice for `owner`'s next step, announcing every job of this exact
    /// owner that settled since the last pull (profile C's `Background job
    /// update:`). A harness calls it before each of the owner's steps and adds
    /// the message as a user message. Mounts that push their notices (profiles A
    /// and B), and mounts in a scope the owner is not in, answer `None` and take
    /// nothing.
    ///
    /// # Errors
    ///
    /// [`PluginError::Trap`] when the guest fails; the jobs it was to announce
    /// are not announced again.
    pub async fn pull_notice(&self, owner: &Owner) -> Result<Option<NoticeMessage>, PluginError> {
        if !self.pulls_notices() || !self.registry.in_layer(self.scope, owner) {
            return Ok(None);
        }
        let jobs: Vec<_> = self
            .registry
            .drain_settled(owner)
            .iter()
            .map(wit::JobSnapshot::from)
            .collect();
        if jobs.is_empty() {
            return Ok(None);
        }
        let notice = self
            .with_scope(Some(owner), |guest, store, scope| {
                guest
                    .harness_jobs_notices()
                    .call_batch_notice(store, scope, &self.config, &jobs)
            })
            .await?;
        Ok(notice.map(|n| NoticeMessage {
            text: n.text,
            summary: n.summary,
            plugin: n.plugin,
            form: n.form,
        }))
    }

    /// Waits until `caller` has fewer than `max_calls_per_owner` calls in the
    /// guest; the permit ends the turn when dropped.
    async fn call_turn(&self, caller: Option<&Owner>) -> tokio::sync::OwnedSemaphorePermit {
        let key = caller.map_or(0, Owner::instance);
        let semaphore = {
            let mut calls = crate::sync::lock(&self.calls);
            // Forget owners with nothing in flight, so the map stays small.
            calls.retain(|_, s| Arc::strong_count(s) > 1);
            calls
                .entry(key)
                .or_insert_with(|| {
                    Arc::new(tokio::sync::Semaphore::new(
                        self.runtime.limits.max_calls_per_owner.max(1),
                    ))
                })
                .clone()
        };
        semaphore
            .acquire_owned()
            .await
            .expect("the semaphore is never closed")
    }

    /// Runs `f` against a fresh instance that has no caller scope.
    pub(super) async fn with_instance<T: Send>(
        &self,
        f: impl FnOnce(&ToolJobs, &mut Store<CallState>) -> wasmtime::Result<T> + Send,
    ) -> Result<T, PluginError> {
        self.runtime
            .call(&self.registry, |jobs, store| f(jobs, store).map_err(trap))
            .await
    }

    /// Runs `f` in a store with a scope for `caller` in its table; the scope
    /// is gone when this returns, whatever happens (and the store too, unless
    /// its instance ended the call cleanly: see `PooledStore::keep`).
    async fn with_scope<T: Send>(
        &self,
        caller: Option<&Owner>,
        f: impl FnOnce(&ToolJobs, &mut Store<CallState>, Resource<ScopeHandle>) -> wasmtime::Result<T>
        + Send,
    ) -> Result<T, PluginError> {
        let _turn = self.call_turn(caller).await;
        self.runtime
            .call(&self.registry, |jobs, store| {
                self.in_scope(caller, jobs, store, f)
            })
            .await
    }

    fn in_scope<T>(
        &self,
        caller: Option<&Owner>,
        jobs: &ToolJobs,
        store: &mut Store<CallState>,
        f: impl FnOnce(&ToolJobs, &mut Store<CallState>, Resource<ScopeHandle>) -> wasmtime::Result<T>,
    ) -> Result<T, PluginError> {
        let scope = store
            .data_mut()
            .table
            .push(ScopeHandle {
                caller: caller.cloned(),
            })
            .map_err(setup)?;
        let borrowed = Resource::new_borrow(scope.rep());
        f(jobs, store, borrowed).map_err(trap)
    }
}

/// The answer of a call whose caller cancelled it before it ran (it then did
/// nothing at all).
pub const CANCELLED_BEFORE_IT_RAN: &str = "Error: cancelled before it ran";

/// Waits one call may ask for. The built-in guest asks for one at most; the bound
/// only stops a guest that keeps asking.
const MAX_WAITS_PER_CALL: usize = 8;

pub(super) fn outcome_of(result: ToolResult) -> ToolOutcome {
    ToolOutcome {
        value: result.value.and_then(|v| serde_json::from_str(&v).ok()),
        text: result.text,
        is_error: result.is_error,
    }
}

pub(super) fn failed(error: &dyn std::fmt::Display) -> ToolOutcome {
    ToolOutcome {
        text: format!("Error: {error}"),
        is_error: true,
        value: None,
    }
}
