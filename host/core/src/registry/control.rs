//! What only a producer can do for the opt-in extensions: input, signals and
//! listening ports ([`JobControl`]); the types of the waits the registry runs;
//! and the bounds on a model's patterns. Retained lines and ready waits need
//! no producer: the registry reads the job's capture itself.

/// The line types the extension calls speak; they are the capture's.
pub use crate::capture::{
    LineMatch, LinePage, LineQuery, MAX_LINE_BYTES, OutputLine, OutputStream, SEARCH_TIME_BUDGET,
    ScanState, StreamExtent,
};

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

/// What besides settlement and the timeout ends a wait.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WaitUntil {
    /// A regular expression tried against each unread line.
    pub pattern: Option<String>,
    /// Quiet output for this many milliseconds.
    pub quiet_ms: Option<u32>,
    /// A job on a terminal: quiet output for this many milliseconds with its
    /// cursor after a prompt ([`crate::capture::is_prompt`]). Ignored for a
    /// job without a terminal.
    pub prompt_quiet_ms: Option<u32>,
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
    /// The job waits at a prompt; the wait's line is the prompt, numbered as
    /// the stdout line it is part of.
    Prompt,
}

/// A listening TCP socket.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ListeningPort {
    /// The port.
    pub port: u16,
    /// The bound address as text.
    pub address: String,
}

/// Why a control call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    /// The job was started without open input.
    #[error("the job was started without open input")]
    NoInput,
    /// The input is closed.
    #[error("the input of the job is closed")]
    InputClosed,
    /// The job was started without a terminal.
    #[error("the job was started without a terminal")]
    NoTerminal,
    /// Anything else, as the model should read it.
    #[error("{0}")]
    Failed(String),
}

/// What only a producer can do for one running job: reach its processes. A
/// job whose producer offers none answers the input, signal and ports calls
/// `unsupported`.
pub trait JobControl: Send + Sync {
    /// Writes to stdin, then closes it when `close`. Answers the bytes accepted.
    ///
    /// # Errors
    ///
    /// No open input, closed input, or a write that cannot be queued.
    fn write_input(&self, data: &[u8], close: bool) -> Result<u64, ControlError>;
    /// Sends `signal` to every process of the job.
    ///
    /// # Errors
    ///
    /// A job that has already finished.
    fn signal(&self, signal: JobSignal) -> Result<(), ControlError>;
    /// Listening TCP ports of the job's live processes.
    fn ports(&self) -> Vec<ListeningPort>;
    /// The pid of the job's first process, for a person's view of the job
    /// (`None`: not a process, or not spawned yet).
    fn leader_pid(&self) -> Option<i32> {
        None
    }
    /// Where a job that outlives its host keeps its output and its end
    /// (its monitor's directory); `None` for every other job.
    fn files(&self) -> Option<std::path::PathBuf> {
        None
    }
    /// The pid and start time of a job's monitor (see
    /// [`JobControl::files`]), read when it was spawned or taken on, so a
    /// pid reused later is never taken for it.
    fn monitor(&self) -> Option<(i32, u64)> {
        None
    }
    /// Whether the job outlives its host (see [`JobControl::files`]).
    fn durable(&self) -> bool {
        false
    }
    /// Where a job on a cluster engine runs, for a host that takes it on
    /// again after a restart: its runner's name and the engine's id for it
    /// (`None` until the job is named); `None` for every other job.
    fn remote(&self) -> Option<(String, Option<String>)> {
        None
    }
    /// True once the job's first process exists (or its spawn failed);
    /// `None` for a job that has no spawn to wait for.
    fn spawned(&self) -> Option<tokio::sync::watch::Receiver<bool>> {
        None
    }
    /// Gives the job's terminal a new size.
    ///
    /// # Errors
    ///
    /// A job without a terminal ([`ControlError::NoTerminal`]), or one that
    /// has finished.
    fn resize(&self, _size: crate::capture::TerminalSize) -> Result<(), ControlError> {
        Err(ControlError::NoTerminal)
    }
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

/// The longest pattern the host compiles (`until`, `search`).
pub const MAX_PATTERN_BYTES: usize = 4096;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_are_bounded_before_they_are_parsed() {
        assert!(compile_pattern(&"a".repeat(MAX_PATTERN_BYTES)).is_ok());
        assert!(compile_pattern(&"a".repeat(MAX_PATTERN_BYTES + 1)).is_err());
    }
}
