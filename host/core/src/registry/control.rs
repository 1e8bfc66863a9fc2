//! What a producer may offer beyond cancel and read (the opt-in extensions):
//! input and signals, retained lines, listening ports, and the output watch a
//! ready wait needs. A producer without it answers those calls `unsupported`.

use std::time::Instant;

use tokio::sync::watch;

/// One output stream of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OutputStream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// A signal from the allowlist a model may send to a job's tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobSignal {
    /// SIGINT.
    Int,
    /// SIGTERM.
    Term,
    /// SIGHUP.
    Hup,
    /// SIGKILL.
    Kill,
    /// SIGSTOP.
    Stop,
    /// SIGCONT.
    Cont,
}

/// One numbered line of output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputLine {
    /// Its stream.
    pub stream: OutputStream,
    /// Its number in the stream, from 1.
    pub number: u64,
    /// Its text, without the line ending, bounded to [`MAX_LINE_BYTES`].
    pub text: String,
}

/// The most bytes of one line the host returns; a longer line is cut back to a
/// character boundary and ends with `…`.
pub const MAX_LINE_BYTES: usize = 4096;

/// The line that ended a ready wait and up to two lines before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineMatch {
    /// The matching line.
    pub line: OutputLine,
    /// The lines before it, oldest first.
    pub before: Vec<OutputLine>,
}

/// What besides settlement and the timeout ends a wait.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WaitUntil {
    /// A regular expression tried against each unread line.
    pub pattern: Option<String>,
    /// Quiet output for this many milliseconds.
    pub quiet_ms: Option<u32>,
}

/// Why a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitEnd {
    /// The job is terminal.
    Settled,
    /// The timeout came first.
    TimedOut,
    /// A line matched.
    Matched,
    /// The job was quiet long enough.
    Quiet,
}

/// Lines of retained output to return.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineQuery {
    /// `count` lines from `start`.
    Range {
        /// The stream.
        stream: OutputStream,
        /// First line wanted, from 1.
        start: u64,
        /// At most this many.
        count: u32,
    },
    /// The last `count` lines.
    Last {
        /// The stream.
        stream: OutputStream,
        /// At most this many.
        count: u32,
    },
    /// Matching lines with context.
    Search {
        /// One stream, or both.
        stream: Option<OutputStream>,
        /// The regular expression.
        pattern: String,
        /// Context lines before and after each match.
        context: u32,
        /// Matches returned at most.
        max_matches: u32,
    },
}

/// How much of one stream is retained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamExtent {
    /// The stream.
    pub stream: OutputStream,
    /// Bytes ever written.
    pub total_bytes: u64,
    /// Bytes from the start no longer retained.
    pub dropped_bytes: u64,
    /// Number of the first retained line.
    pub first_line: u64,
    /// Number of the last line; 0 when empty.
    pub last_line: u64,
}

/// An answer to a [`LineQuery`], before the registry adds the job.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LinePage {
    /// The lines, in stream order.
    pub lines: Vec<OutputLine>,
    /// Indexes into `lines` of the matching lines.
    pub hits: Vec<u32>,
    /// Every match in the retained output.
    pub total_matches: u64,
    /// The extent of each stream looked at.
    pub extents: Vec<StreamExtent>,
    /// For a search that ran out of its time: the stream and the first line
    /// it did not try.
    pub stopped: Option<(OutputStream, u64)>,
}

/// The most time one search may spend matching: well inside the guest call's
/// own CPU budget (2 s), which the host's work in the call counts against.
pub const SEARCH_TIME_BUDGET: std::time::Duration = std::time::Duration::from_millis(500);

/// A listening TCP socket.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ListeningPort {
    /// The port.
    pub port: u16,
    /// The bound address as text.
    pub address: String,
}

/// Why a control call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlError {
    /// A pattern did not compile.
    InvalidPattern(String),
    /// The job was started without open input.
    NoInput,
    /// The input is closed.
    InputClosed,
    /// Anything else, as the model should read it.
    Failed(String),
}

/// Where a ready wait has looked so far, per stream: lines before these byte
/// offsets were tried already.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ScanState {
    /// Next stdout byte to try (`None`: from the read cursor).
    pub stdout: Option<u64>,
    /// Next stderr byte to try.
    pub stderr: Option<u64>,
}

/// A producer's control over one running job, beyond cancel and read.
pub trait JobControl: Send + Sync {
    /// Writes to stdin, then closes it when `close`. Answers the bytes accepted.
    fn write_input(&self, data: &[u8], close: bool) -> Result<u64, ControlError>;
    /// Sends `signal` to every process of the job.
    fn signal(&self, signal: JobSignal) -> Result<(), ControlError>;
    /// Retained lines, without consuming anything.
    fn lines(&self, query: &LineQuery, pattern: Option<&regex::Regex>) -> LinePage;
    /// Listening TCP ports of the job's live processes.
    fn ports(&self) -> Vec<ListeningPort>;
    /// Bumped whenever output arrives (its value: bytes written so far).
    fn output_changes(&self) -> watch::Receiver<u64>;
    /// When output last arrived.
    fn last_output(&self) -> Option<Instant>;
    /// The first unread line, from where `scan` left off, that `pattern`
    /// matches; advances `scan` past the complete lines it tried.
    fn find_unread(&self, pattern: &regex::Regex, scan: &mut ScanState) -> Option<LineMatch>;
}

/// Compiles a model's pattern with bounds on its size, so a hostile pattern
/// cannot take the host's memory.
///
/// # Errors
///
/// The compiler's message.
pub fn compile_pattern(pattern: &str) -> Result<regex::Regex, String> {
    // The regex crate's size limits apply only once a pattern is parsed, and
    // parsing a long one costs memory in proportion (a megabyte of `\w` took
    // gigabytes): the length is bounded first.
    if pattern.len() > MAX_PATTERN_BYTES {
        return Err(format!(
            "the pattern is {} bytes, more than the limit of {MAX_PATTERN_BYTES}",
            pattern.len()
        ));
    }
    regex::RegexBuilder::new(pattern)
        .size_limit(1 << 20)
        .dfa_size_limit(1 << 20)
        .nest_limit(64)
        .build()
        .map_err(|e| e.to_string())
}

/// Runs CPU-heavy work a caller cannot bound in advance (matching a model's
/// pattern, reading a spill file) so that it holds no async worker: on a
/// multi-threaded runtime the worker hands its other tasks over first
/// (`block_in_place`); elsewhere (a current-thread runtime, no runtime) it
/// just runs.
pub fn heavy<T>(work: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => {
            // `block_in_place` refuses (by panicking, before it runs the work)
            // where the thread may not block, for example inside a `LocalSet`:
            // the work then runs in place.
            let mut work = Some(work);
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                tokio::task::block_in_place(|| (work.take().expect("taken once"))())
            })) {
                Ok(done) => done,
                Err(panic) => match work.take() {
                    Some(work) => work(),
                    None => std::panic::resume_unwind(panic),
                },
            }
        }
        _ => work(),
    }
}

/// The longest pattern the host compiles (`until`, `search`).
pub const MAX_PATTERN_BYTES: usize = 4096;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heavy_work_runs_wherever_it_is_called() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        // On a worker: handed off with block_in_place.
        let on_worker = rt.block_on(async { tokio::spawn(async { heavy(|| 8) }).await.unwrap() });
        assert_eq!(on_worker, 8);
        // Inside a LocalSet the thread may not block: it runs in place.
        let local = tokio::task::LocalSet::new();
        assert_eq!(rt.block_on(local.run_until(async { heavy(|| 7) })), 7);
        // No runtime at all.
        assert_eq!(heavy(|| 6), 6);
        assert!(compile_pattern(&"a".repeat(MAX_PATTERN_BYTES)).is_ok());
        assert!(compile_pattern(&"a".repeat(MAX_PATTERN_BYTES + 1)).is_err());
    }
}
