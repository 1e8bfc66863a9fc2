//! The engine, its configuration and the limits every guest call runs under.
//!
//! (Over 500 lines: the engine, its limits and the instance pool, each
//! setting with its reason beside it; one component's life, from compile to
//! call.)

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, StoreLimitsBuilder,
    UpdateDeadline,
};

use super::bindings::{ToolJobs, ToolJobsPre};
use super::cache::load_component;
use super::host_impl::CallState;
use super::ticker::{Running, Ticker};
use super::{PluginError, TOOL_JOBS_WASM, setup, trap};
use crate::registry::JobRegistry;

/// Limits on every guest call.
#[derive(Debug, Clone)]
pub struct SandboxLimits {
    /// Linear memory a call may grow to. The built-in guest starts with about
    /// 2.3 MiB (its stack, data and allocation arena), so this must be above that.
    pub memory_bytes: usize,
    /// CPU time a call may spend running wasm, in epoch ticks. Calls are
    /// synchronous, so this also bounds how long a runaway guest holds the
    /// calling thread.
    pub cpu_ticks: u64,
    /// Length of one epoch tick.
    pub tick: Duration,
    /// Concurrent calls the instance pool holds; more wait for a free slot
    /// (a call holds one only while the guest runs, never across a wait; a
    /// warm instance keeps its slot's memory, and the next call takes it).
    /// `None` allocates on demand. Every slot's reservation is part of the host's
    /// address space, which each job spawn (a fork) copies: keep it to what runs
    /// at once (by default twice the cores, 8 to 128: 1,000 slots made 1,000
    /// spawns 1.6 times slower).
    pub pool_slots: Option<u32>,
    /// Calls one owner (a session) may have running in the guest at once; more
    /// wait their turn. With `memory_bytes` this bounds what one session can make
    /// the host allocate for guests: `max_calls_per_owner × memory_bytes`.
    pub max_calls_per_owner: usize,
    /// Bytes of each pooled memory and table kept mapped between calls and
    /// zeroed in place, instead of handed back to the kernel and faulted in
    /// again (see BENCHMARKS.md for what sizes cost).
    pub keep_resident_bytes: usize,
}

impl Default for SandboxLimits {
    fn default() -> Self {
        SandboxLimits {
            memory_bytes: 32 << 20,
            cpu_ticks: 200,
            tick: Duration::from_millis(10),
            pool_slots: Some(default_pool_slots()),
            max_calls_per_owner: 4,
            keep_resident_bytes: KEEP_RESIDENT_BYTES,
        }
    }
}

/// The engine and the pre-instantiated component, shared by every mount.
pub struct PluginRuntime {
    engine: Engine,
    component: Component,
    pre: ToolJobsPre<CallState>,
    pub(super) limits: SandboxLimits,
    /// Whether the component imports WASI: its calls then run on a thread of
    /// their own, where WASI's blocking streams may wait (never on a tokio worker).
    pub(super) imports_wasi: bool,
    /// Advances the engine's epoch while a call runs (see [`Ticker`]).
    ticker: Ticker,
    /// One permit per pool slot: a call waits for a free slot instead of
    /// failing when the pool is full.
    slots: Option<Arc<tokio::sync::Semaphore>>,
    /// Instances of the built-in guest whose last call ended cleanly, each
    /// with its store, for the next call (see [`PooledStore::keep`]); `None`
    /// for a component loaded from elsewhere, which gets a fresh instance
    /// for every call.
    warm: Option<Arc<Warm>>,
}

/// Warm instances. Each keeps its pool slot's memory but not its permit: a
/// call takes a permit first, in the semaphore's order, then a warm
/// instance if there is one, else a fresh one. That keeps instances within
/// the pool (a permit freed by a returned instance finds it waiting) and
/// callers first come, first served.
struct Warm {
    stores: Mutex<Vec<WarmStore>>,
    /// How many wait at most: one per core, since calls run on the caller's
    /// thread; each keeps the pages its calls touched resident.
    most: usize,
}

/// A store whose instance may serve another call.
struct WarmStore {
    store: Store<CallState>,
    instance: Arc<ToolJobs>,
    calls: u32,
}

/// Calls one instance of the built-in guest serves before it is replaced:
/// the guest frees what each call allocated, and this bounds what a slow
/// leak could hold.
const CALLS_PER_INSTANCE: u32 = 1000;

/// A warm instance whose memory grew past this (the built-in guest starts
/// with about 2.3 MiB) is replaced: a fresh one gives the pages back.
const WARM_MEMORY_BYTES: usize = 4 << 20;

impl PluginRuntime {
    /// Loads the built-in tool-jobs component. With `cache_dir`, the compiled
    /// artifact is cached there, so later starts skip compilation.
    ///
    /// # Errors
    ///
    /// When the engine cannot be configured or the component does not fit the world.
    pub fn new(limits: SandboxLimits, cache_dir: Option<&Path>) -> Result<Self, PluginError> {
        // Ours keeps nothing between calls (no statics but its allocator's,
        // and every owner scope is a borrow that ends with its call), so an
        // instance whose call ended cleanly serves the next one, as the Node
        // host keeps its instance: instantiating and resetting a slot was
        // half of every call.
        Ok(Self::from_component_bytes(TOOL_JOBS_WASM, limits, cache_dir)?.with_warm_instances())
    }

    /// Lets an instance whose call ended cleanly serve later calls, for a
    /// component known to keep nothing between calls (as the contract asks
    /// of every guest, and the built-in one does: [`PluginRuntime::new`]
    /// turns this on). An instance is replaced after any trap or error,
    /// after 1,000 calls, and once its memory grew past 4 MiB; one that
    /// imports WASI never serves twice. Owner scopes are borrows that end
    /// with their call, so no call reaches another's scope; but whatever
    /// else a guest keeps in its memory, a later call of any owner finds.
    #[must_use]
    pub fn with_warm_instances(mut self) -> Self {
        if !self.imports_wasi {
            let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
            self.warm = Some(Arc::new(Warm {
                stores: Mutex::new(Vec::new()),
                most: cores.max(2),
            }));
        }
        self
    }

    /// How many instances wait warm for a call now. For tests.
    #[cfg(feature = "test-support")]
    pub fn warm_instances(&self) -> usize {
        self.warm
            .as_ref()
            .map_or(0, |warm| crate::sync::lock(&warm.stores).len())
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
        // Guests from the usual toolchains import WASI whether they use it or
        // not; each interface answers from a deny-by-default context (`wasi`).
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(setup)?;
        let imports_wasi = component
            .component_type()
            .imports(&engine)
            .any(|(name, _)| name.starts_with("wasi:"));
        let pre =
            ToolJobsPre::new(linker.instantiate_pre(&component).map_err(setup)?).map_err(setup)?;

        let ticker = Ticker::start(&engine, limits.tick).map_err(setup)?;
        Ok(PluginRuntime {
            slots: limits
                .pool_slots
                .map(|n| Arc::new(tokio::sync::Semaphore::new(n as usize))),
            engine,
            component,
            pre,
            limits,
            imports_wasi,
            ticker,
            warm: None,
        })
    }

    /// Runs one guest call: inline, or, for a component that imports WASI, on a
    /// short-lived thread of its own, since WASI's blocking streams wait with
    /// `block_on`, which a tokio worker must not do.
    fn run<T: Send>(
        &self,
        call: impl FnOnce() -> Result<T, PluginError> + Send,
    ) -> Result<T, PluginError> {
        if !self.imports_wasi {
            return call();
        }
        // The call logs where its caller logs.
        let dispatch = tracing::dispatcher::get_default(Clone::clone);
        std::thread::scope(|s| {
            s.spawn(move || tracing::dispatcher::with_default(&dispatch, call))
                .join()
        })
        .unwrap_or_else(|panic| {
            let message = format!(
                "the guest call's thread panicked: {}",
                crate::registry::panic_message(&*panic)
            );
            Err(PluginError::Trap {
                source: message.clone().into(),
                message,
            })
        })
    }

    /// Whether the loaded component imports WASI (see [`super::wasi`]).
    pub fn imports_wasi(&self) -> bool {
        self.imports_wasi
    }

    /// The engine, for embedders that compile other components alongside.
    /// Its epoch advances only while a call of this runtime runs (an idle
    /// host wakes no thread), so a store of the embedder's own on it cannot
    /// rely on epoch interruption.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    #[cfg(feature = "test-support")]
    /// Makes one fresh, limited instance and drops it: the fixed cost every call
    /// pays. For health checks and benchmarks.
    ///
    /// # Errors
    ///
    /// [`PluginError::Trap`] when instantiation fails (for example, a full pool).
    pub async fn fresh_instance(&self, registry: &JobRegistry) -> Result<(), PluginError> {
        let mut store = self.fresh_store(registry).await;
        instantiate(self, &mut store).map(drop)
    }

    /// Names of everything the loaded component imports, for example
    /// `harness:jobs/registry@0.9.0` (see [`super::WIT_PACKAGE`]).
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

    /// Runs `f` in one guest call, once a pool slot is free: on a warm
    /// instance (see [`PooledStore::keep`]) or a fresh one, which afterwards
    /// waits warm for the next call if the call ended cleanly.
    pub(super) async fn call<T: Send>(
        &self,
        registry: &JobRegistry,
        f: impl FnOnce(&ToolJobs, &mut Store<CallState>) -> Result<T, PluginError> + Send,
    ) -> Result<T, PluginError> {
        let mut store = self.store(registry).await;
        let result = self.run(|| {
            let jobs = instantiate(self, &mut store)?;
            f(&jobs, &mut store)
        });
        store.keep(result.is_ok());
        result
    }

    /// A store for one call, once a pool slot is free (the slot is held for
    /// as long as the store lives): a warm one whose instance served a clean
    /// call before (see [`PooledStore::keep`]), reset for this call, or a
    /// fresh, limited one.
    async fn store(&self, registry: &JobRegistry) -> PooledStore {
        let slot = self.slot().await;
        let warm = self
            .warm
            .as_ref()
            .and_then(|warm| crate::sync::lock(&warm.stores).pop());
        let Some(WarmStore {
            mut store,
            instance,
            calls,
        }) = warm
        else {
            return self.store_in(slot, registry);
        };
        let state = store.data_mut();
        state.registry = Some(registry.clone());
        state.ticks_used = 0;
        store.set_epoch_deadline(1);
        PooledStore {
            store,
            instance: Some(instance),
            calls,
            home: self.warm.as_ref().map(Arc::downgrade),
            _ticking: self.ticker.running(),
            _slot: slot,
        }
    }

    /// A fresh, limited store, once a pool slot is free.
    #[cfg(feature = "test-support")]
    async fn fresh_store(&self, registry: &JobRegistry) -> PooledStore {
        let slot = self.slot().await;
        self.store_in(slot, registry)
    }

    /// A pool slot's permit, once one is free.
    async fn slot(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        match &self.slots {
            Some(slots) => Some(
                slots
                    .clone()
                    .acquire_owned()
                    .await
                    .expect("the slot semaphore is never closed"),
            ),
            None => None,
        }
    }

    /// A fresh, limited store in the pool slot `slot` holds.
    fn store_in(
        &self,
        slot: Option<tokio::sync::OwnedSemaphorePermit>,
        registry: &JobRegistry,
    ) -> PooledStore {
        let limits = StoreLimitsBuilder::new()
            .memory_size(self.limits.memory_bytes)
            .instances(4)
            .trap_on_grow_failure(true)
            .build();
        let mut store = Store::new(
            &self.engine,
            CallState {
                table: ResourceTable::new(),
                limits: super::host_impl::CallLimits {
                    limits,
                    memory_bytes: 0,
                },
                registry: Some(registry.clone()),
                ticks_used: 0,
                wasi: None,
            },
        );
        store.limiter(|s| &mut s.limits);
        let budget = self.limits.cpu_ticks;
        store.set_epoch_deadline(1);
        // Charge a tick only when it lands while wasm runs.
        store.epoch_deadline_callback(move |mut cx| {
            let state = cx.data_mut();
            state.ticks_used += 1;
            if state.ticks_used > budget {
                wasmtime::bail!("guest exceeded its CPU budget of {budget} ticks");
            }
            Ok(UpdateDeadline::Continue(1))
        });
        PooledStore {
            store,
            instance: None,
            calls: 0,
            home: self.warm.as_ref().map(Arc::downgrade),
            _ticking: self.ticker.running(),
            _slot: slot,
        }
    }
}

/// A store and the pool slot it was made for, with the guest instantiated
/// in it once a call asked. The fields drop in order: the store (returning
/// its instance to the pool) strictly before the permit, so whoever gets the
/// permit next finds the slot free.
struct PooledStore {
    store: Store<CallState>,
    instance: Option<Arc<ToolJobs>>,
    /// Calls its instance served.
    calls: u32,
    /// Where it goes back for the next call, when its instance may serve
    /// one (not owned: a kept store must not keep its runtime's pool alive).
    home: Option<std::sync::Weak<Warm>>,
    /// Keeps the epoch ticking while the store may run wasm.
    _ticking: Running,
    _slot: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl PooledStore {
    /// After a call: an instance whose call ended cleanly (`clean`: no trap,
    /// no error) goes back for the next call; any other is dropped with its
    /// store, as is one that served [`CALLS_PER_INSTANCE`] calls.
    fn keep(self, clean: bool) {
        let PooledStore {
            mut store,
            instance,
            calls,
            home,
            _ticking,
            _slot: slot,
        } = self;
        let small = store.data().limits.memory_bytes <= WARM_MEMORY_BYTES;
        let home = home.and_then(|h| h.upgrade());
        if let (true, Some(home), Some(instance)) =
            (clean && small && calls < CALLS_PER_INSTANCE, home, instance)
        {
            // Nothing of the call stays: its scope, its mount's registry.
            let state = store.data_mut();
            state.table = ResourceTable::new();
            state.registry = None;
            let mut stores = crate::sync::lock(&home.stores);
            if stores.len() < home.most {
                // Before the permit goes: whoever takes it finds this one.
                stores.push(WarmStore {
                    store,
                    instance,
                    calls,
                });
                drop(stores);
                drop(slot);
                return;
            }
        }
        // The store (and its instance) strictly before the permit, as when a
        // `PooledStore` is dropped.
        drop(store);
        drop(slot);
    }
}

impl std::ops::Deref for PooledStore {
    type Target = Store<CallState>;
    fn deref(&self) -> &Store<CallState> {
        &self.store
    }
}

impl std::ops::DerefMut for PooledStore {
    fn deref_mut(&mut self) -> &mut Store<CallState> {
        &mut self.store
    }
}

/// Core instances (and tables) one component instance may use from the pool.
const CORE_INSTANCES_PER_COMPONENT: u32 = 4;

/// Guest calls are synchronous and hold a slot only while wasm runs, so the
/// pool needs about as many slots as threads that can call at once: twice the
/// cores, at least 8 and at most 128. (Every slot is mapped into the host, and
/// each job spawn forks those mappings.)
fn default_pool_slots() -> u32 {
    let cores = std::thread::available_parallelism().map_or(4, |n| n.get());
    u32::try_from(cores * 2).unwrap_or(128).clamp(8, 128)
}

/// The default for [`SandboxLimits::keep_resident_bytes`].
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
    // The guest's data is mapped copy-on-write into each slot once; with the
    // slot kept resident and only dirtied pages reset, a call copies nothing
    // (copying the 30 KB of data segments per call cost about 1.5 µs more).
    cfg.memory_init_cow(true);
    if let Some(slots) = limits.pool_slots {
        let mut pool = PoolingAllocationConfig::default();
        // A componentized guest holds a few core instances (its module plus the
        // adapter's shim and fixup modules) and tables; size the pool so that
        // `slots` whole components fit, since calls wait for a slot by count.
        pool.total_component_instances(slots)
            .total_core_instances(slots * CORE_INSTANCES_PER_COMPONENT)
            .total_memories(slots * 2)
            .total_tables(slots * CORE_INSTANCES_PER_COMPONENT)
            // Calls are synchronous, so no fiber stacks. (wasmtime-wasi turns on
            // wasmtime's async support, whose default reserves 1,000 of them; every
            // job spawn forks their mappings too: 1,000 spawns took twice as long.)
            .total_stacks(0)
            .max_memory_size(limits.memory_bytes)
            // Zero a small guest's pages in place instead of returning them to
            // the kernel and faulting them back in on the next call.
            .linear_memory_keep_resident(limits.keep_resident_bytes)
            .table_keep_resident(limits.keep_resident_bytes)
            // Where the kernel can say which pages a call dirtied (Linux 6.7+),
            // reset only those instead of all `keep_resident_bytes`.
            .pagemap_scan(wasmtime::Enabled::Auto);
        cfg.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    cfg
}

fn instantiate(
    runtime: &PluginRuntime,
    store: &mut PooledStore,
) -> Result<Arc<ToolJobs>, PluginError> {
    store.calls += 1;
    if let Some(jobs) = &store.instance {
        return Ok(jobs.clone());
    }
    let jobs = Arc::new(runtime.pre.instantiate(&mut store.store).map_err(trap)?);
    store.instance = Some(jobs.clone());
    Ok(jobs)
}
