//! Why a shell job could not be started: each in the words the model reads
//! (`Error: spawn failed: ...`, or the fence's own), with the underlying
//! error kept as its source.

use crate::fence::FenceError;

/// A start of a shell job that failed before its leader was handed to a
/// spawner thread.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SpawnError {
    /// The job's fence, in the fence's words.
    #[error(transparent)]
    Fence(#[from] FenceError),
    /// The job's container (its cgroup, or its marker).
    #[error("spawn failed: cannot create the job's container: {0}")]
    Container(#[source] std::io::Error),
    /// The job's pseudo-terminal.
    #[error("spawn failed: cannot make the job's terminal: {0}")]
    Terminal(#[source] std::io::Error),
    /// A durable job's files.
    #[error("spawn failed: cannot make the job's files: {0}")]
    Files(#[source] std::io::Error),
    /// What no `execve` can take.
    #[error("spawn failed: a NUL byte in the {0}")]
    Nul(&'static str),
    /// The spawner threads.
    #[error("spawn failed: {0}")]
    Spawner(#[source] std::io::Error),
}
