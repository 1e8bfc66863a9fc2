//! The limits a start asks for (extension `limits`, and the session's
//! maxima) and the resources a job on a cluster engine needs (extension
//! `runners`): plain data on the ground floor, carried by the plugin and
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

/// What a job on a cluster engine needs of it (extension `runners`); absent:
/// the engine's default.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Resources {
    /// CPUs, whole or fractional.
    pub cpus: Option<f64>,
    /// GPUs, whole or fractional.
    pub gpus: Option<f64>,
    /// Memory in bytes.
    pub memory_bytes: Option<u64>,
    /// The engine's other resources by name, with their amounts.
    pub custom: Vec<(String, f64)>,
}
