//! In-process jobs: a Rust future run as a background job.
//!
//! A harness tool that does long work itself (a crawl, a sub-agent, a query) can
//! hand that work to the registry instead of blocking its tool call. The work gets
//! a [`JobContext`]: cancellation reaches it through the context (with the kill
//! reason), and a stream job writes its incremental output there: the registry
//! reads it, pages it (`job_log`) and watches it (ready waits) as it does a
//! shell job's. A panic in the work settles the job as `failed` with
//! `job panicked: <message>`. It stands on the registry's side of the
//! producer seam ([`crate::producer`]): a start with its hooks, its output in
//! a capture, its end.
//!
//! ```no_run
//! # async fn demo(registry: host::JobRegistry, owner: host::Owner) -> Result<(), host::StartError> {
//! use host::inproc::{InProcessJob, JobContext};
//!
//! let job = InProcessJob::new("crawl", "crawl docs.example.org").owner(owner);
//! let id = host::inproc::start_final(&registry, job, |ctx: JobContext| async move {
//!     tokio::select! {
//!         () = ctx.cancelled() => Err("crawl stopped".to_owned()),
//!         pages = async { Ok::<_, String>(42) } => Ok(format!("{} pages", pages?)),
//!     }
//! })?;
//! # Ok(()) }
//! ```

use std::future::Future;
use std::path::Path;
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use crate::capture::{OutputLimits, OutputStream, SharedCapture};
use crate::owner::Owner;
use crate::registry::{JobHooks, JobOutcome, JobRegistry, JobStart, OutcomeStatus, StartError};
use crate::sync::lock;

/// What to register for a piece of in-process work.
#[derive(Debug, Clone)]
pub struct InProcessJob {
    start: JobStart,
    limits: OutputLimits,
}

impl InProcessJob {
    /// Work of `kind` (the id prefix) labelled `label`, unowned until
    /// [`InProcessJob::owner`] is set.
    pub fn new(kind: impl Into<String>, label: impl Into<String>) -> InProcessJob {
        InProcessJob {
            start: JobStart {
                kind: kind.into(),
                label: label.into(),
                output_limit_bytes: None,
                owner: None,
                sandbox: None,
            },
            limits: OutputLimits::default(),
        }
    }

    /// The live agent that owns the job.
    pub fn owner(mut self, owner: Owner) -> Self {
        self.start.owner = Some(owner);
        self
    }

    /// The byte cap on everything the model sees about this job.
    pub fn output_limit_bytes(mut self, limit: u64) -> Self {
        self.start.output_limit_bytes = Some(limit);
        self
    }

    /// How much unread stream output is kept in memory (older output is dropped,
    /// and the next read says so).
    pub fn unread_output_bytes(mut self, bytes: usize) -> Self {
        self.limits.max_output_bytes = bytes;
        self
    }
}

/// The work's view of its job.
#[derive(Clone)]
pub struct JobContext {
    cancel: CancellationToken,
    reason: Arc<Mutex<Option<String>>>,
    output: Option<SharedCapture>,
}

impl JobContext {
    /// Resolves once the job is cancelled (by `job_kill` or teardown).
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await;
    }

    /// Whether the job was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// The reason given with the cancellation, if any.
    pub fn reason(&self) -> Option<String> {
        lock(&self.reason).clone()
    }

    /// Appends output for the next read. Does nothing for a final-output job.
    pub fn write(&self, text: &str) {
        if let Some(output) = &self.output {
            output.push(OutputStream::Stdout, text.as_bytes());
        }
    }
}

/// Starts `run` as a final-output job: reads are empty while it runs and show its
/// `Ok` text once it is done. An `Err` settles `failed` with the error as detail
/// (`killed` if the job was cancelled first); a panic settles `failed` with
/// `job panicked: <message>`.
///
/// # Errors
///
/// A [`StartError`] from the registry's preflight; `run` is then never called.
pub fn start_final<F, Fut>(
    registry: &JobRegistry,
    job: InProcessJob,
    run: F,
) -> Result<String, StartError>
where
    F: FnOnce(JobContext) -> Fut,
    Fut: Future<Output = Result<String, String>> + Send + 'static,
{
    start(registry, job, false, run)
}

/// Starts `run` as a stream job: whatever it writes to its [`JobContext`] is read
/// as a consuming delta. Ends like [`start_final`], without a final output.
///
/// # Errors
///
/// A [`StartError`] from the registry's preflight; `run` is then never called.
pub fn start_stream<F, Fut>(
    registry: &JobRegistry,
    job: InProcessJob,
    run: F,
) -> Result<String, StartError>
where
    F: FnOnce(JobContext) -> Fut,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    start(registry, job, true, move |ctx| {
        let work = run(ctx);
        async move { work.await.map(|()| String::new()) }
    })
}

fn start<F, Fut>(
    registry: &JobRegistry,
    job: InProcessJob,
    stream: bool,
    run: F,
) -> Result<String, StartError>
where
    F: FnOnce(JobContext) -> Fut,
    Fut: Future<Output = Result<String, String>> + Send + 'static,
{
    let limits = OutputLimits {
        // No spill file for in-process work: its output never reaches the disk.
        max_spill_bytes: 0,
        ..job.limits
    };
    let output = stream.then(|| SharedCapture::new(Path::new(""), limits, None));
    let ctx = JobContext {
        cancel: CancellationToken::new(),
        reason: Arc::default(),
        output: output.clone(),
    };
    registry.start(job.start, move || {
        let cancel_ctx = ctx.clone();
        let done_ctx = ctx.clone();
        let task = tokio::spawn(run(ctx));
        let done = async move {
            let result = task.await;
            if let Some(output) = &done_ctx.output {
                output.close();
            }
            let cancelled = done_ctx.is_cancelled();
            Ok(match result {
                Ok(Ok(text)) => JobOutcome {
                    status: OutcomeStatus::Completed,
                    detail: None,
                    output: (!stream).then_some(text),
                },
                Ok(Err(error)) => JobOutcome {
                    status: if cancelled {
                        OutcomeStatus::Killed
                    } else {
                        OutcomeStatus::Failed
                    },
                    detail: Some(error),
                    output: None,
                },
                Err(join) => JobOutcome {
                    status: OutcomeStatus::Failed,
                    detail: Some(crate::words::job_panicked(&panic_text(join))),
                    output: None,
                },
            })
        };
        Ok(JobHooks {
            control: None,
            placement: None,
            cancel: Box::new(move |reason| {
                *lock(&cancel_ctx.reason) = reason.map(str::to_owned);
                cancel_ctx.cancel.cancel();
                Ok(())
            }),
            capture: output,
            read_output: None,
            output_excerpt: None,
            done: Box::pin(done),
        })
    })
}

fn panic_text(join: tokio::task::JoinError) -> String {
    if !join.is_panic() {
        return join.to_string();
    }
    crate::registry::panic_message(&*join.into_panic())
}
