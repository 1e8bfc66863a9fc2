//! The limits a start asks for (extension `limits`, and the session's
//! maxima): plain data on the ground floor, carried by the plugin and
//! enforced by a producer.

/// Limits on one job; `None` is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JobLimits {
    /// Wall-clock milliseconds, then the job is killed.
    pub timeout_ms: Option<u64>,
    /// CPU seconds per process (`RLIMIT_CPU`).
    pub cpu_seconds: Option<u64>,
    /// Address space per process in bytes (`RLIMIT_AS`).
    pub memory_bytes: Option<u64>,
    /// Output bytes (both streams), then the job is killed.
    pub output_bytes: Option<u64>,
}
