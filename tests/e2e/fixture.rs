//! Shared fixtures for the end-to-end tests and benchmarks in `tests/` and `benches/`.
//!
//! Every test drives the real tool-jobs component through the real host: one
//! [`PluginRuntime`] per test binary (compiling the component is the slow part), a
//! fresh registry and mount per test, and scripted producers whose chunks, cancels
//! and outcomes the test controls, so nothing depends on timing.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use host::bash::{BashConfig, BashProducer, BashRequest};
use host::clock::{Clock, SystemClock};
use host::containment::ContainmentMode;
use host::registry::{JobHooks, JobOutcome, JobRegistry, JobStart, OutcomeStatus, StartError};
use host::{AgentDirectory, Mount, Owner, PluginRuntime, RegistryConfig, SandboxLimits};
use serde_json::Value;
use tokio::sync::oneshot;

/// Where compiled components are cached between test runs.
pub fn cache_dir() -> PathBuf {
    std::env::temp_dir().join("jobs-e2e-component-cache")
}

/// The runtime shared by every test in one binary.
pub fn runtime() -> Arc<PluginRuntime> {
    static RUNTIME: OnceLock<Arc<PluginRuntime>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            Arc::new(
                PluginRuntime::new(SandboxLimits::default(), Some(&cache_dir()))
                    .expect("the built-in component loads"),
            )
        })
        .clone()
}

/// A registry, one mount of the plugin over it, and two registered owners.
pub struct Fixture {
    /// The registry.
    pub registry: JobRegistry,
    /// The mounted plugin.
    pub mount: Mount,
    /// Owner `alice`, registered.
    pub alice: Owner,
    /// Owner `bob`, registered.
    pub bob: Owner,
}

impl Fixture {
    /// Default config everywhere.
    pub async fn new() -> Fixture {
        Fixture::with_config("{}", RegistryConfig::default()).await
    }

    /// A plugin config and a registry config.
    pub async fn with_config(plugin_config: &str, registry_config: RegistryConfig) -> Fixture {
        Fixture::with_clock(plugin_config, registry_config, Arc::new(SystemClock)).await
    }

    /// [`Fixture::with_config`] on another clock (a `ManualClock` fixes time).
    pub async fn with_clock(
        plugin_config: &str,
        registry_config: RegistryConfig,
        clock: Arc<dyn Clock>,
    ) -> Fixture {
        let registry = JobRegistry::with_clock(registry_config, AgentDirectory::default(), clock);
        let mount = Mount::new(runtime(), registry.clone(), plugin_config)
            .await
            .expect("config is valid");
        let alice = Owner::new("alice");
        let bob = Owner::new("bob");
        registry.agents().register(&alice);
        registry.agents().register(&bob);
        Fixture {
            registry,
            mount,
            alice,
            bob,
        }
    }

    /// Calls a tool for `caller` with JSON arguments.
    pub async fn call(&self, caller: Option<&Owner>, tool: &str, args: Value) -> host::ToolOutcome {
        self.mount.invoke(caller, tool, &args.to_string()).await
    }

    /// `job_output` of `id` for `caller`; panics on an error result.
    pub async fn output(&self, caller: Option<&Owner>, id: &str) -> String {
        let out = self
            .call(caller, "job_output", serde_json::json!({ "job_id": id }))
            .await;
        assert!(!out.is_error, "job_output failed: {}", out.text);
        out.text
    }

    /// `job_output` of `id` for `caller` with `wait: true`: returns once the
    /// job settles (event driven); panics on an error result.
    pub async fn waited_output(&self, caller: Option<&Owner>, id: &str) -> String {
        let out = self
            .call(
                caller,
                "job_output",
                serde_json::json!({"job_id": id, "wait": true, "timeout_ms": 600000}),
            )
            .await;
        assert!(!out.is_error, "{}", out.text);
        out.text
    }

    /// Starts a scripted job.
    pub fn start(&self, job: ScriptedJob) -> Result<(String, JobControl), StartError> {
        job.start(&self.registry)
    }
}

/// A producer the test scripts: kind, label, cap, owner, and whether it streams.
#[derive(Clone)]
pub struct ScriptedJob {
    /// The start request.
    pub spec: JobStart,
    /// Stream job (with a read hook) or final-output job.
    pub stream: bool,
}

impl ScriptedJob {
    /// A stream job of kind `bash`, label `sleep 60`, owned by `owner`.
    pub fn stream(owner: Option<&Owner>) -> ScriptedJob {
        ScriptedJob {
            spec: JobStart {
                kind: "bash".into(),
                label: "sleep 60".into(),
                output_limit_bytes: None,
                owner: owner.cloned(),
                sandbox: None,
            },
            stream: true,
        }
    }

    /// A final-output job of kind `subagent`, owned by `owner`.
    pub fn final_output(owner: Option<&Owner>) -> ScriptedJob {
        ScriptedJob {
            spec: JobStart {
                kind: "subagent".into(),
                label: "research".into(),
                output_limit_bytes: None,
                owner: owner.cloned(),
                sandbox: None,
            },
            stream: false,
        }
    }

    /// Sets the kind.
    pub fn kind(mut self, kind: &str) -> Self {
        self.spec.kind = kind.into();
        self
    }

    /// Sets the label.
    pub fn label(mut self, label: &str) -> Self {
        self.spec.label = label.into();
        self
    }

    /// Sets the byte cap.
    pub fn cap(mut self, cap: u64) -> Self {
        self.spec.output_limit_bytes = Some(cap);
        self
    }

    /// Registers the job; the returned control drives it.
    pub fn start(self, registry: &JobRegistry) -> Result<(String, JobControl), StartError> {
        let control = JobControl::default();
        let (tx, rx) = oneshot::channel();
        *control.settle_tx.lock().unwrap() = Some(tx);
        let chunks = control.chunks.clone();
        let written = control.written.clone();
        let read_error = control.read_error.clone();
        let cancels = control.cancels.clone();
        let cancel_error = control.cancel_error.clone();
        let stream = self.stream;
        let id = registry.start(self.spec, move || {
            Ok(JobHooks {
                capture: None,
                control: None,
                placement: None,
                cancel: Box::new(move |reason| {
                    if let Some(e) = cancel_error.lock().unwrap().clone() {
                        return Err(e);
                    }
                    cancels.lock().unwrap().push(reason.map(str::to_owned));
                    Ok(())
                }),
                read_output: stream.then(|| {
                    Box::new(move || {
                        if let Some(e) = read_error.lock().unwrap().clone() {
                            return Err(e);
                        }
                        Ok(chunks.lock().unwrap().pop_front().unwrap_or_default())
                    }) as host::registry::ReadHook
                }),
                output_excerpt: stream.then(|| {
                    Box::new(move |window| {
                        Ok(host::capture::text_excerpt(
                            &written.lock().unwrap(),
                            window,
                        ))
                    }) as host::registry::ExcerptHook
                }),
                // A test that drops its control leaves the job running for good.
                done: Box::pin(async move {
                    match rx.await {
                        Ok(outcome) => outcome,
                        Err(_) => std::future::pending().await,
                    }
                }),
            })
        })?;
        *control.target.lock().unwrap() = Some((registry.clone(), id.clone()));
        Ok((id, control))
    }
}

/// Resolves a scripted job's `done`.
type SettleSender = oneshot::Sender<Result<JobOutcome, String>>;

/// The test's handle on a scripted job.
#[derive(Clone, Default)]
pub struct JobControl {
    settle_tx: Arc<Mutex<Option<SettleSender>>>,
    target: Arc<Mutex<Option<(JobRegistry, String)>>>,
    /// Chunks the next reads return, one per read.
    pub chunks: Arc<Mutex<VecDeque<String>>>,
    /// Everything pushed so far, read or not: the job's whole output.
    pub written: Arc<Mutex<String>>,
    /// Reasons the producer's cancel received.
    pub cancels: Arc<Mutex<Vec<Option<String>>>>,
    /// When set, cancel fails with this message.
    pub cancel_error: Arc<Mutex<Option<String>>>,
    /// When set, reads fail with this message.
    pub read_error: Arc<Mutex<Option<String>>>,
}

impl std::fmt::Debug for JobControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobControl")
            .field("cancels", &self.cancels())
            .finish_non_exhaustive()
    }
}

impl JobControl {
    /// Queues chunks for the next reads (they also join the whole output).
    pub fn push(&self, chunks: &[&str]) {
        self.written.lock().unwrap().push_str(&chunks.concat());
        self.chunks
            .lock()
            .unwrap()
            .extend(chunks.iter().map(|c| (*c).to_owned()));
    }

    /// Resolves the producer's `done`, then lets the registry record it.
    pub async fn settle(&self, status: OutcomeStatus, detail: Option<&str>, output: Option<&str>) {
        self.resolve(Ok(JobOutcome {
            status,
            detail: detail.map(Into::into),
            output: output.map(Into::into),
        }))
        .await;
    }

    /// Resolves `done` with a contract violation.
    pub async fn reject(&self, error: &str) {
        self.resolve(Err(error.to_owned())).await;
    }

    async fn resolve(&self, outcome: Result<JobOutcome, String>) {
        if let Some(tx) = self.settle_tx.lock().unwrap().take() {
            let _ = tx.send(outcome);
        }
        // The registry records the outcome on its own task: give it turns until the
        // record shows it (or is gone), never a sleep.
        let target = self.target.lock().unwrap().clone();
        if let Some((registry, id)) = target {
            for _ in 0..10_000 {
                match registry.inspect(&id) {
                    Some(job) if !job.status.is_terminal() => tokio::task::yield_now().await,
                    _ => return,
                }
            }
            panic!("job {id} did not settle");
        }
    }

    /// Acts as a producer under teardown: once a cancel arrives (yielding to the
    /// runtime until then, never sleeping), settles the job with `status`.
    pub async fn settle_when_cancelled(&self, status: OutcomeStatus, detail: Option<&str>) {
        while self.cancels().is_empty() {
            tokio::task::yield_now().await;
        }
        self.settle(status, detail, None).await;
    }

    /// The recorded cancel reasons.
    pub fn cancels(&self) -> Vec<Option<String>> {
        self.cancels.lock().unwrap().clone()
    }
}

/// Returns once a wait is pending on job `id`: the moment to settle or abort in a
/// race test, found by yielding to the runtime rather than sleeping.
pub async fn until_waiting(registry: &JobRegistry, id: &str) {
    while registry.waiter_count(id) == 0 {
        tokio::task::yield_now().await;
    }
}

/// Waits until `registry` shows job `id` as terminal, with no timing assumption:
/// it waits on settlement itself (which marks the job reported).
pub async fn settled(registry: &JobRegistry, id: &str, caller: Option<&Owner>) {
    registry
        .wait(
            id,
            host::registry::MAX_TIMER_DELAY_MS,
            caller,
            &host::CancellationToken::new(),
        )
        .await
        .expect("wait succeeds");
}

/// Log lines captured on this thread (tests run on a current-thread runtime, so
/// the registry's tasks log here too).
pub struct CapturedLogs {
    buffer: Arc<Mutex<Vec<u8>>>,
    _guard: tracing::subscriber::DefaultGuard,
}

impl CapturedLogs {
    /// Everything logged so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.buffer.lock().unwrap()).into_owned()
    }
}

#[derive(Clone)]
struct BufferWriter(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for BufferWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Captures log lines on this thread until the returned value is dropped.
pub fn capture_logs() -> CapturedLogs {
    let buffer = Arc::new(Mutex::new(Vec::new()));
    let writer = BufferWriter(buffer.clone());
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::DEBUG)
        .finish();
    CapturedLogs {
        buffer,
        _guard: tracing::subscriber::set_default(subscriber),
    }
}

/// Reads (consuming) job `id`'s output until it holds a whole line;
/// everything read.
pub async fn read_a_line(registry: &JobRegistry, id: &str) -> String {
    let mut seen = String::new();
    while !seen.contains('\n') {
        seen.push_str(&registry.read(id, None).unwrap().0);
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    seen
}

/// Whether `pid` stops running within 30 s. A kill already sent lands within
/// moments; the bound only keeps a broken build from hanging.
pub async fn gone_soon(pid: i32) -> bool {
    for _ in 0..3000 {
        if !running(pid) {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    false
}

/// Whether `pid` is a live process (a zombie awaiting its reaper counts as gone).
pub fn running(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            let state = stat
                .rsplit(')')
                .next()
                .and_then(|r| r.split_whitespace().next());
            !matches!(state, Some("Z") | Some("X"))
        }
    }
}

/// A shell producer over a [`Fixture`], for the tests of the shell
/// producer and its containment.
pub struct Shell {
    pub f: Fixture,
    pub bash: BashProducer,
}

impl Shell {
    pub async fn new() -> Shell {
        Shell::with(BashConfig::default()).await
    }

    pub async fn with(config: BashConfig) -> Shell {
        let f = Fixture::new().await;
        let bash = BashProducer::new(f.registry.clone(), config).unwrap();
        Shell { f, bash }
    }

    /// A shell in containment `mode`, or `None` (with the reason printed)
    /// when this machine cannot give that mode.
    pub async fn in_mode(mode: ContainmentMode, config: BashConfig) -> Option<Shell> {
        let f = Fixture::new().await;
        match BashProducer::new(
            f.registry.clone(),
            BashConfig {
                containment: mode,
                ..config
            },
        ) {
            Ok(bash) => Some(Shell { f, bash }),
            Err(e) if mode == ContainmentMode::Cgroup => {
                println!("skipped in cgroup mode: {e}");
                None
            }
            Err(e) => panic!("{e}"),
        }
    }

    pub fn run(&self, owner: Option<&Owner>, command: &str) -> String {
        self.bash
            .start(
                owner.cloned(),
                BashRequest {
                    command: command.into(),
                    ..Default::default()
                },
            )
            .unwrap()
    }

    /// `job_output` with `wait: true`: returns once the job settles (event driven).
    pub async fn collect(&self, owner: Option<&Owner>, id: &str) -> String {
        self.f.waited_output(owner, id).await
    }

    /// Reads until the job is terminal, concatenating every delta.
    pub async fn collect_all(&self, owner: Option<&Owner>, id: &str) -> String {
        let mut all = String::new();
        loop {
            let text = self.collect(owner, id).await;
            let terminal = self.f.registry.inspect(id).unwrap().status.is_terminal();
            all.push_str(&text);
            if terminal {
                return all;
            }
        }
    }

    /// Reads (consuming, as `owner`) until the output holds `lines` lines.
    pub async fn lines(&self, owner: Option<&Owner>, id: &str, lines: usize) -> Vec<String> {
        let mut seen = String::new();
        while seen.lines().count() < lines {
            seen.push_str(&self.f.registry.read(id, owner).unwrap().0);
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        seen.lines().map(str::to_owned).collect()
    }

    /// The job's last output once it has settled.
    pub async fn settle(&self, id: &str) -> String {
        let text = self.f.waited_output(None, id).await;
        assert!(
            self.f.registry.inspect(id).unwrap().status.is_terminal(),
            "{text}"
        );
        text
    }
}
