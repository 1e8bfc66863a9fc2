//! The wasmtime embedding: one engine, the component compiled once (and cached on
//! disk), and a fresh, limited store per call.
//!
//! [`PluginRuntime`] owns the engine, the epoch ticker and the pre-instantiated
//! component. [`Mount`] is one loaded copy of the plugin over a registry, with its
//! validated configuration and its controller attachment; every call runs in a new
//! store with a memory cap and a CPU budget, and the guest acts only through the
//! owner scope the host made for the caller of that call. A trap, a budget overrun
//! or a memory bomb fails that one call; the next call gets a new instance.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use wasmtime::component::{Component, HasSelf, Linker, Resource, ResourceTable};
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, StoreLimits,
    StoreLimitsBuilder, UpdateDeadline,
};

use crate::excerpt::ExcerptWindow;
use crate::owner::{self, Lane, NoticeMessage, Owner};
use crate::registry::{self, ControllerAttachment, JobRegistry, ListenerRegistration};
use crate::scope::ScopeKey;

mod bindings {
    wasmtime::component::bindgen!({
        world: "tool-jobs",
        path: "../wit",
        imports: {
            "harness:jobs/registry.[method]owner-scope.wait": async | trappable,
            default: trappable,
        },
        exports: { default: async },
        additional_derives: [PartialEq],
        with: { "harness:jobs/registry.owner-scope": super::ScopeHandle },
    });
}

use bindings::exports::harness::jobs::notices as wit_notices;
pub use bindings::exports::harness::jobs::notices::Notice;
pub use bindings::exports::harness::jobs::tools::{
    CompletionDelivery, Config as PluginConfig, ContentBlock, Profile, PromptSection,
    ToolDefinition, UiCard,
};
use bindings::harness::jobs::types as wit;
use bindings::{ToolJobs, ToolJobsPre};

/// The tool-jobs component this crate was built with.
pub const TOOL_JOBS_WASM: &[u8] = include_bytes!(env!("TOOL_JOBS_WASM"));

/// The caller a scope speaks for: the one capability the guest receives per call.
pub struct ScopeHandle {
    caller: Option<Owner>,
}

/// Limits on every guest call.
#[derive(Debug, Clone)]
pub struct SandboxLimits {
    /// Linear memory a call may grow to.
    pub memory_bytes: usize,
    /// CPU time a call may spend running wasm, in epoch ticks (time blocked in
    /// host calls, such as a wait, is not counted).
    pub cpu_ticks: u64,
    /// Length of one epoch tick.
    pub tick: Duration,
    /// Concurrent calls the instance pool holds; `None` allocates on demand.
    pub pool_slots: Option<u32>,
    /// Calls one owner (a session) may have running in the guest at once; more
    /// wait their turn. With `memory_bytes` this bounds what one session can make
    /// the host allocate for guests: `max_calls_per_owner × memory_bytes`.
    pub max_calls_per_owner: usize,
}

impl Default for SandboxLimits {
    fn default() -> Self {
        SandboxLimits {
            memory_bytes: 32 << 20,
            cpu_ticks: 200,
            tick: Duration::from_millis(10),
            pool_slots: Some(1000),
            max_calls_per_owner: 4,
        }
    }
}

/// Why the plugin could not be loaded or run.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// The engine or the component could not be set up.
    #[error("plugin setup failed: {0}")]
    Setup(String),
    /// The plugin rejected its configuration (operator-facing text).
    #[error("{0}")]
    Config(String),
    /// The guest trapped, ran out of budget or memory.
    #[error("plugin failed: {0}")]
    Trap(String),
}

fn setup(e: impl std::fmt::Display) -> PluginError {
    PluginError::Setup(e.to_string())
}

/// Per-call store data.
struct CallState {
    table: ResourceTable,
    limits: StoreLimits,
    registry: JobRegistry,
    abort: CancellationToken,
    max_wait_ms: f64,
    ticks_used: u64,
}

/// The engine and the pre-instantiated component, shared by every mount.
pub struct PluginRuntime {
    engine: Engine,
    component: Component,
    pre: ToolJobsPre<CallState>,
    limits: SandboxLimits,
    ticker_stop: Arc<AtomicBool>,
}

impl Drop for PluginRuntime {
    fn drop(&mut self) {
        self.ticker_stop.store(true, Ordering::Relaxed);
    }
}

impl PluginRuntime {
    /// Loads the built-in tool-jobs component. With `cache_dir`, the compiled
    /// artifact is cached there, so later starts skip compilation.
    ///
    /// # Errors
    ///
    /// When the engine cannot be configured or the component does not fit the world.
    pub fn new(limits: SandboxLimits, cache_dir: Option<&Path>) -> Result<Self, PluginError> {
        Self::from_component_bytes(TOOL_JOBS_WASM, limits, cache_dir)
    }

    /// Loads another component of the `tool-jobs` world.
    ///
    /// # Errors
    ///
    /// As for [`PluginRuntime::new`].
    pub fn from_component_bytes(
        wasm: &[u8],
        limits: SandboxLimits,
        cache_dir: Option<&Path>,
    ) -> Result<Self, PluginError> {
        let engine = Engine::new(&engine_config(&limits)).map_err(setup)?;
        let component = load_component(&engine, wasm, cache_dir)?;
        let mut linker = Linker::<CallState>::new(&engine);
        ToolJobs::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s).map_err(setup)?;
        let pre =
            ToolJobsPre::new(linker.instantiate_pre(&component).map_err(setup)?).map_err(setup)?;

        let ticker_stop = Arc::new(AtomicBool::new(false));
        let stop = ticker_stop.clone();
        let weak = engine.weak();
        let tick = limits.tick;
        std::thread::Builder::new()
            .name("jobs-epoch".into())
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(tick);
                    match weak.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => break,
                    }
                }
            })
            .map_err(setup)?;
        Ok(PluginRuntime {
            engine,
            component,
            pre,
            limits,
            ticker_stop,
        })
    }

    /// The engine, for embedders that compile other components alongside.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Makes one fresh, limited instance and drops it: the fixed cost every call
    /// pays. For health checks and benchmarks.
    ///
    /// # Errors
    ///
    /// [`PluginError::Trap`] when instantiation fails (for example, a full pool).
    pub async fn fresh_instance(&self, registry: &JobRegistry) -> Result<(), PluginError> {
        let mut store = self.store(registry, 0.0);
        instantiate(self, &mut store).await.map(drop)
    }

    /// Names of everything the loaded component imports, for example
    /// `harness:jobs/registry@0.2.0`.
    pub fn imports(&self) -> Vec<String> {
        self.component
            .component_type()
            .imports(&self.engine)
            .map(|(name, _)| name.to_owned())
            .collect()
    }

    /// Names of everything the loaded component exports.
    pub fn exports(&self) -> Vec<String> {
        self.component
            .component_type()
            .exports(&self.engine)
            .map(|(name, _)| name.to_owned())
            .collect()
    }

    fn store(&self, registry: &JobRegistry, max_wait_ms: f64) -> Store<CallState> {
        let limits = StoreLimitsBuilder::new()
            .memory_size(self.limits.memory_bytes)
            .instances(4)
            .trap_on_grow_failure(true)
            .build();
        let mut store = Store::new(
            &self.engine,
            CallState {
                table: ResourceTable::new(),
                limits,
                registry: registry.clone(),
                abort: CancellationToken::new(),
                max_wait_ms,
                ticks_used: 0,
            },
        );
        store.limiter(|s| &mut s.limits);
        let budget = self.limits.cpu_ticks;
        store.set_epoch_deadline(1);
        // Charge a tick only when it lands while wasm runs; yield to tokio each time
        // so a busy guest never starves other tasks.
        store.epoch_deadline_callback(move |mut cx| {
            let state = cx.data_mut();
            state.ticks_used += 1;
            if state.ticks_used > budget {
                wasmtime::bail!("guest exceeded its CPU budget of {budget} ticks");
            }
            Ok(UpdateDeadline::Yield(1))
        });
        store
    }
}

/// Bytes of each pooled memory, table and stack kept resident between calls.
const KEEP_RESIDENT_BYTES: usize = 512 << 10;

/// Compiles any component and names what it imports and exports, without
/// linking it: for telling a user why a plugin cannot run here.
///
/// # Errors
///
/// When the bytes are not a valid component.
pub fn inspect_component(wasm: &[u8]) -> Result<(Vec<String>, Vec<String>), PluginError> {
    let engine = Engine::new(&Config::new()).map_err(setup)?;
    let component = Component::new(&engine, wasm).map_err(setup)?;
    let ty = component.component_type();
    let imports = ty.imports(&engine).map(|(n, _)| n.to_owned()).collect();
    let exports = ty.exports(&engine).map(|(n, _)| n.to_owned()).collect();
    Ok((imports, exports))
}

fn engine_config(limits: &SandboxLimits) -> Config {
    let mut cfg = Config::new();
    cfg.epoch_interruption(true);
    cfg.max_wasm_stack(512 << 10);
    cfg.memory_reservation(limits.memory_bytes as u64);
    cfg.memory_guard_size(64 << 10);
    // The guest's data segments are small: copying them into a resident slot is
    // cheaper than mapping them copy-on-write and faulting on every call.
    cfg.memory_init_cow(false);
    if let Some(slots) = limits.pool_slots {
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(slots)
            .total_core_instances(slots * 2)
            .total_memories(slots * 2)
            .total_tables(slots * 2)
            .total_stacks(slots)
            .max_memory_size(limits.memory_bytes)
            // Zero a small guest's pages in place instead of returning them to
            // the kernel and faulting them back in on the next call.
            .linear_memory_keep_resident(KEEP_RESIDENT_BYTES)
            .table_keep_resident(KEEP_RESIDENT_BYTES)
            .async_stack_keep_resident(KEEP_RESIDENT_BYTES);
        cfg.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    cfg
}

/// Compiles `wasm`, or loads its compiled form from `cache_dir` when present and
/// made by a compatible engine; a fresh compile is written back atomically.
fn load_component(
    engine: &Engine,
    wasm: &[u8],
    cache_dir: Option<&Path>,
) -> Result<Component, PluginError> {
    let Some(dir) = cache_dir else {
        return Component::new(engine, wasm).map_err(setup);
    };
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    wasm.hash(&mut hasher);
    let path: PathBuf = dir.join(format!("tool-jobs-{:016x}.cwasm", hasher.finish()));
    if path.is_file() {
        // SAFETY: the file is our own artifact in the embedder's cache directory,
        // keyed by the engine's compatibility hash and the wasm bytes; wasmtime
        // still checks its header and refuses an incompatible one (then we recompile).
        match unsafe { Component::deserialize_file(engine, &path) } {
            Ok(component) => return Ok(component),
            Err(e) => tracing::warn!("ignoring cached {}: {e}", path.display()),
        }
    }
    let compiled = engine.precompile_component(wasm).map_err(setup)?;
    if std::fs::create_dir_all(dir).is_ok() {
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        if std::fs::write(&tmp, &compiled).is_ok() {
            let _ = std::fs::rename(&tmp, &path);
        }
    }
    // SAFETY: these bytes were produced by `precompile_component` on this engine.
    unsafe { Component::deserialize(engine, &compiled) }.map_err(setup)
}

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
    scope: Option<ScopeKey>,
    notices: tokio::sync::mpsc::UnboundedSender<NoticeWork>,
    /// Absent for a mount that pulls its notices: it has nothing to push.
    listener: Option<ListenerRegistration>,
    /// One semaphore per owner instance with calls in flight.
    calls: std::sync::Mutex<std::collections::HashMap<u64, Arc<tokio::sync::Semaphore>>>,
    _controller: ControllerAttachment,
}

/// Work for a mount's notice task, done in order.
enum NoticeWork {
    Settled(registry::JobSnapshot, Option<Owner>),
    Flush(tokio::sync::oneshot::Sender<()>),
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
    /// Dropping the mount removes its controller and its listener.
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
        let config = {
            let mut store = runtime.store(&registry, 0.0);
            let jobs = instantiate(&runtime, &mut store).await?;
            jobs.harness_jobs_tools()
                .call_configure(&mut store, config_json)
                .await
                .map_err(trap)?
                .map_err(PluginError::Config)?
        };
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let sender = tx.clone();
        // A pulling mount (profile C) takes settled jobs from the registry at the
        // owner's next step instead; asking its guest about each settlement
        // would only cost an instance per job.
        let listener = (config.profile != Profile::C).then(|| {
            registry.on_job_done_in(scope, move |job, owner| {
                // The task may be gone only while the mount itself is being dropped.
                let _ = sender.send(NoticeWork::Settled(job.clone(), owner.cloned()));
            })
        });
        tokio::spawn(deliver_notices(
            runtime.clone(),
            registry.clone(),
            config,
            rx,
        ));
        let controller = registry.attach_controller_in(scope);
        Ok(Mount {
            runtime,
            registry,
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
    pub fn config(&self) -> &PluginConfig {
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
    pub async fn invoke_with_abort(
        &self,
        caller: Option<&Owner>,
        tool: &str,
        args_json: &str,
        abort: &CancellationToken,
    ) -> ToolOutcome {
        let result = self
            .with_scope(caller, abort, async |jobs, store, scope| {
                jobs.harness_jobs_tools()
                    .call_invoke(store, scope, self.config, tool, args_json)
                    .await
            })
            .await;
        match result {
            Ok(r) => ToolOutcome {
                value: r.value.and_then(|v| serde_json::from_str(&v).ok()),
                text: r.text,
                is_error: r.is_error,
            },
            Err(e) => ToolOutcome {
                text: format!("Error: {e}"),
                is_error: true,
                value: None,
            },
        }
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
        self.with_scope(
            caller,
            &CancellationToken::new(),
            async |jobs, store, scope| {
                jobs.harness_jobs_tools()
                    .call_finalize(store, scope, self.config, tool, args_json, &blocks)
                    .await
            },
        )
        .await
    }

    /// The tools with their exact descriptions and schemas.
    ///
    /// # Errors
    ///
    /// [`PluginError::Trap`] when the guest fails.
    pub async fn tool_definitions(&self) -> Result<Vec<ToolDefinition>, PluginError> {
        self.with_instance(async |jobs, store| {
            jobs.harness_jobs_tools()
                .call_tool_definitions(store, self.config)
                .await
        })
        .await
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
        self.with_instance(async |jobs, store| {
            jobs.harness_jobs_tools()
                .call_describe_call(store, self.config, tool, args_json)
                .await
        })
        .await
    }

    /// The system-prompt section, if the profile has one.
    ///
    /// # Errors
    ///
    /// [`PluginError::Trap`] when the guest fails.
    pub async fn prompt_section(&self) -> Result<Option<PromptSection>, PluginError> {
        self.with_instance(async |jobs, store| {
            jobs.harness_jobs_tools()
                .call_system_prompt(store, self.config)
                .await
        })
        .await
    }

    /// The completion notice (text and summary) for a settled job.
    ///
    /// # Errors
    ///
    /// [`PluginError::Trap`] when the guest fails.
    pub async fn completion_notice(
        &self,
        job: &registry::JobSnapshot,
    ) -> Result<Notice, PluginError> {
        let job = to_wit_snapshot(job);
        self.with_instance(async |jobs, store| {
            jobs.harness_jobs_notices()
                .call_completion_notice(store, self.config, &job)
                .await
        })
        .await
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
            .map(to_wit_snapshot)
            .collect();
        if jobs.is_empty() {
            return Ok(None);
        }
        let notice = self
            .with_scope(
                Some(owner),
                &CancellationToken::new(),
                async |guest, store, scope| {
                    guest
                        .harness_jobs_notices()
                        .call_batch_notice(store, scope, self.config, &jobs)
                        .await
                },
            )
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
            let mut calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
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
    async fn with_instance<T>(
        &self,
        f: impl AsyncFnOnce(&ToolJobs, &mut Store<CallState>) -> wasmtime::Result<T>,
    ) -> Result<T, PluginError> {
        let mut store = self.runtime.store(&self.registry, 0.0);
        let jobs = instantiate(&self.runtime, &mut store).await?;
        f(&jobs, &mut store).await.map_err(trap)
    }

    /// Runs `f` in a fresh store with a scope for `caller` in its table; the scope
    /// is removed again whatever happens.
    async fn with_scope<T>(
        &self,
        caller: Option<&Owner>,
        abort: &CancellationToken,
        f: impl AsyncFnOnce(
            &ToolJobs,
            &mut Store<CallState>,
            Resource<ScopeHandle>,
        ) -> wasmtime::Result<T>,
    ) -> Result<T, PluginError> {
        let _turn = self.call_turn(caller).await;
        let mut store = self
            .runtime
            .store(&self.registry, self.config.max_wait_timeout_ms);
        store.data_mut().abort = abort.clone();
        let jobs = instantiate(&self.runtime, &mut store).await?;
        let scope = store
            .data_mut()
            .table
            .push(ScopeHandle {
                caller: caller.cloned(),
            })
            .map_err(setup)?;
        let borrowed = Resource::new_borrow(scope.rep());
        f(&jobs, &mut store, borrowed).await.map_err(trap)
    }
}

/// A mount's notice task: asks the guest what to deliver for each settlement, in
/// order, and acts on the answer. Ends when the mount is dropped.
async fn deliver_notices(
    runtime: Arc<PluginRuntime>,
    registry: JobRegistry,
    config: PluginConfig,
    mut work: tokio::sync::mpsc::UnboundedReceiver<NoticeWork>,
) {
    while let Some(item) = work.recv().await {
        match item {
            NoticeWork::Flush(done) => {
                let _ = done.send(());
            }
            NoticeWork::Settled(job, owner) => {
                if let Err(e) = deliver_one(&runtime, &registry, config, &job, owner).await {
                    tracing::warn!("jobs: onJobDone listener threw for {}: {e}", job.id);
                }
            }
        }
    }
}

async fn deliver_one(
    runtime: &PluginRuntime,
    registry: &JobRegistry,
    config: PluginConfig,
    job: &registry::JobSnapshot,
    owner: Option<Owner>,
) -> Result<(), String> {
    // An unowned job has nobody to deliver to; the guest would say the same.
    let Some(owner) = owner else {
        return Ok(());
    };
    // Decide on the record as it is now: a read since settlement may already have
    // shown the outcome. A record torn down since has nobody left to tell.
    let Some(current) = registry.inspect(&job.id) else {
        return Ok(());
    };
    let agent = owner.agent().clone();
    let status = contain(|| agent.status())?;
    let state = wit_notices::OwnerState {
        status: match status {
            owner::AgentStatus::Idle => wit_notices::AgentStatus::Idle,
            owner::AgentStatus::Running => wit_notices::AgentStatus::Running,
        },
        wakes_spent: registry.wakes_spent(&owner),
    };
    let snapshot = to_wit_snapshot(&current);
    let mut store = runtime.store(registry, 0.0);
    let jobs = instantiate(runtime, &mut store)
        .await
        .map_err(|e| e.to_string())?;
    let decision = jobs
        .harness_jobs_notices()
        .call_deliver(&mut store, config, &snapshot, Some(state))
        .await
        .map_err(|e| trap(e).to_string())?;
    let Some(delivery) = decision else {
        return Ok(());
    };
    // Claiming marks the job reported under the registry's lock: a read racing
    // this delivery either came first (no notice) or comes after the notice, and
    // no second mount can announce the same job again.
    if !registry.claim_notice(&job.id) {
        return Ok(());
    }
    let message = NoticeMessage {
        text: delivery.notice.text,
        summary: delivery.notice.summary,
        plugin: delivery.notice.plugin,
        form: delivery.notice.form,
    };
    let lane = match delivery.lane {
        wit_notices::Lane::Inject => Lane::Inject,
        wit_notices::Lane::Followup => Lane::Followup,
    };
    if lane == Lane::Followup {
        registry.record_wake(&owner);
    }
    match contain(|| match lane {
        Lane::Inject => agent.inject(message),
        Lane::Followup => agent.followup(message),
    })? {
        // Profile B: an owner torn down while its notice was on the way is a
        // harmless race, not a failure.
        Err(e) if config.profile == Profile::B && e.contains("is disposed") => Ok(()),
        other => other,
    }
}

/// Runs harness code, turning a panic into an error.
fn contain<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .map_err(|panic| registry::panic_message(&*panic))
}

async fn instantiate(
    runtime: &PluginRuntime,
    store: &mut Store<CallState>,
) -> Result<ToolJobs, PluginError> {
    runtime.pre.instantiate_async(store).await.map_err(trap)
}

fn trap(e: wasmtime::Error) -> PluginError {
    // `{:#}` keeps the root cause (the trap code, or our budget message).
    let text = format!("{e:#}");
    tracing::warn!("guest call failed: {text}");
    let root = e.root_cause().to_string();
    PluginError::Trap(if root.is_empty() { text } else { root })
}

fn to_wit_status(status: registry::JobStatus) -> wit::JobStatus {
    match status {
        registry::JobStatus::Running => wit::JobStatus::Running,
        registry::JobStatus::Stopping => wit::JobStatus::Stopping,
        registry::JobStatus::Completed => wit::JobStatus::Completed,
        registry::JobStatus::Killed => wit::JobStatus::Killed,
        registry::JobStatus::Failed => wit::JobStatus::Failed,
    }
}

fn to_wit_snapshot(job: &registry::JobSnapshot) -> wit::JobSnapshot {
    wit::JobSnapshot {
        id: job.id.clone(),
        kind: job.kind.clone(),
        label: job.label.clone(),
        status: to_wit_status(job.status),
        detail: job.detail.clone(),
        started_at: job.started_at,
        finished_at: job.finished_at,
        output_limit_bytes: job.output_limit_bytes,
        reported: job.reported,
    }
}

fn to_wit_error(error: registry::RegistryError) -> wit::RegistryError {
    match error {
        registry::RegistryError::UnknownJob(id) => wit::RegistryError::UnknownJob(id),
        registry::RegistryError::ForeignJob(id) => wit::RegistryError::ForeignJob(id),
        registry::RegistryError::InvalidTimeout(v) => wit::RegistryError::InvalidTimeout(v),
        registry::RegistryError::WaitAborted => wit::RegistryError::WaitAborted,
        registry::RegistryError::ProducerFailed(m) => wit::RegistryError::ProducerFailed(m),
    }
}

impl CallState {
    fn caller(&self, scope: &Resource<ScopeHandle>) -> wasmtime::Result<Option<Owner>> {
        Ok(self.table.get(scope)?.caller.clone())
    }
}

impl bindings::harness::jobs::types::Host for CallState {}

impl bindings::harness::jobs::registry::Host for CallState {}

impl bindings::harness::jobs::registry::HostOwnerScope for CallState {
    fn list_jobs(
        &mut self,
        scope: Resource<ScopeHandle>,
    ) -> wasmtime::Result<Vec<wit::JobSnapshot>> {
        let caller = self.caller(&scope)?;
        Ok(self
            .registry
            .list(caller.as_ref())
            .iter()
            .map(to_wit_snapshot)
            .collect())
    }

    fn get(
        &mut self,
        scope: Resource<ScopeHandle>,
        job_id: String,
    ) -> wasmtime::Result<Result<wit::JobSnapshot, wit::RegistryError>> {
        let caller = self.caller(&scope)?;
        Ok(self
            .registry
            .get(&job_id, caller.as_ref())
            .map(|j| to_wit_snapshot(&j))
            .map_err(to_wit_error))
    }

    fn read(
        &mut self,
        scope: Resource<ScopeHandle>,
        job_id: String,
    ) -> wasmtime::Result<Result<wit::ReadResult, wit::RegistryError>> {
        let caller = self.caller(&scope)?;
        Ok(self
            .registry
            .read(&job_id, caller.as_ref())
            .map(|(text, job)| wit::ReadResult {
                text,
                job: to_wit_snapshot(&job),
            })
            .map_err(to_wit_error))
    }

    fn output(
        &mut self,
        scope: Resource<ScopeHandle>,
        job_id: String,
        window: wit::ExcerptWindow,
    ) -> wasmtime::Result<Result<wit::OutputExcerpt, wit::RegistryError>> {
        let caller = self.caller(&scope)?;
        let window = ExcerptWindow {
            whole_up_to: window.whole_up_to,
            head_bytes: window.head_bytes,
            tail_bytes: window.tail_bytes,
        };
        Ok(self
            .registry
            .output(&job_id, caller.as_ref(), window)
            .map(|(excerpt, job)| wit::OutputExcerpt {
                head: excerpt.head,
                tail: excerpt.tail,
                omitted_bytes: excerpt.omitted_bytes,
                job: to_wit_snapshot(&job),
            })
            .map_err(to_wit_error))
    }

    fn kill(
        &mut self,
        scope: Resource<ScopeHandle>,
        job_id: String,
        reason: Option<String>,
    ) -> wasmtime::Result<Result<wit::KillOutcome, wit::RegistryError>> {
        let caller = self.caller(&scope)?;
        Ok(self
            .registry
            .kill(&job_id, caller.as_ref(), reason.as_deref())
            .map(|o| match o {
                registry::KillOutcome::Requested => wit::KillOutcome::Requested,
                registry::KillOutcome::AlreadyFinished => wit::KillOutcome::AlreadyFinished,
            })
            .map_err(to_wit_error))
    }

    async fn wait(
        &mut self,
        scope: Resource<ScopeHandle>,
        job_id: String,
        timeout_ms: f64,
    ) -> wasmtime::Result<Result<wit::JobSnapshot, wit::RegistryError>> {
        let caller = self.caller(&scope)?;
        // Validate what the guest asked for, then hold it to this mount's cap, so a
        // misbehaving guest cannot wait longer than the operator allowed.
        let bounded = if timeout_ms.is_finite() && timeout_ms > 0.0 {
            timeout_ms.min(self.max_wait_ms.max(1.0))
        } else {
            timeout_ms
        };
        Ok(self
            .registry
            .wait(&job_id, bounded, caller.as_ref(), &self.abort)
            .await
            .map(|j| to_wit_snapshot(&j))
            .map_err(|e| match e {
                // Report the value the guest sent, not the bounded one.
                registry::RegistryError::InvalidTimeout(_) => {
                    wit::RegistryError::InvalidTimeout(timeout_ms)
                }
                other => to_wit_error(other),
            }))
    }

    fn drop(&mut self, scope: Resource<ScopeHandle>) -> wasmtime::Result<()> {
        self.table.delete(scope)?;
        Ok(())
    }
}

impl bindings::harness::jobs::clock::Host for CallState {
    fn now_ms(&mut self) -> wasmtime::Result<u64> {
        Ok(registry::now_ms())
    }
}

impl bindings::harness::jobs::diag::Host for CallState {
    fn log(
        &mut self,
        level: bindings::harness::jobs::diag::Level,
        message: String,
    ) -> wasmtime::Result<()> {
        use bindings::harness::jobs::diag::Level;
        match level {
            Level::Debug => tracing::debug!(target: "tool_jobs_guest", "{message}"),
            Level::Info => tracing::info!(target: "tool_jobs_guest", "{message}"),
            Level::Warn => tracing::warn!(target: "tool_jobs_guest", "{message}"),
            Level::Error => tracing::error!(target: "tool_jobs_guest", "{message}"),
        }
        Ok(())
    }
}
