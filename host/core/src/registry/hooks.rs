//! What a producer hands the registry: the hooks that cancel, read and settle
//! its work.

use std::future::Future;
use std::pin::Pin;

use super::JobOutcome;
use crate::capture::{Excerpt, ExcerptWindow, SharedCapture};

/// A producer's hook to cancel its work. Synchronous and idempotent; it must
/// eventually make `done` resolve. An error leaves the job untouched.
pub type CancelHook = Box<dyn FnMut(Option<&str>) -> Result<(), String> + Send>;
/// A producer's consuming read of the output since the previous read.
pub type ReadHook = Box<dyn FnMut() -> Result<String, String> + Send>;
/// A producer's non-consuming view of a stream job's whole output so far (see
/// [`SharedCapture::excerpt`]). Called under the registry lock with a window
/// already held to [`crate::capture::MAX_EXCERPT_PART`].
pub type ExcerptHook = Box<dyn FnMut(ExcerptWindow) -> Result<Excerpt, String> + Send>;
/// Resolves once the producer released its resources. An `Err` is a contract
/// violation; the job is then recorded as `failed` with the error as detail.
pub type DoneFuture = Pin<Box<dyn Future<Output = Result<JobOutcome, String>> + Send>>;

/// What a producer hands the registry once its work has started.
pub struct JobHooks {
    /// Requests cancellation.
    pub cancel: CancelHook,
    /// A stream job's output, which the registry reads, excerpts, pages
    /// (extension `log`) and watches (extension `ready`) itself. When present,
    /// `read_output` and `output_excerpt` are not used.
    pub capture: Option<SharedCapture>,
    /// For a stream job whose producer keeps its output some other way than a
    /// [`SharedCapture`]: its consuming read. Absent for final-output jobs.
    pub read_output: Option<ReadHook>,
    /// With `read_output`: the whole output, for surfaces that show a finished
    /// job's full result (profile C's `job_status`). A stream job without it
    /// answers such a request with an error; a final-output job needs none.
    pub output_excerpt: Option<ExcerptHook>,
    /// Input, signals and ports (the extensions only a producer can serve);
    /// absent for a producer that offers none of them.
    pub control: Option<std::sync::Arc<dyn super::control::JobControl>>,
    /// Where the job runs, for a producer that runs it elsewhere (a runner on
    /// a cluster engine); `None`: this host.
    pub placement: Option<super::Placement>,
    /// Settles the job.
    pub done: DoneFuture,
}
