//! Why a job's fence could not be prepared: a start refused, in the words
//! the model reads (`Error: ...`), with the underlying error kept as its
//! source.

use std::path::PathBuf;

/// A fence that could not be prepared for a job.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FenceError {
    /// The policy is required and this kernel cannot enforce all of it.
    #[error("sandbox required, but this kernel cannot enforce {}", .0.join(", "))]
    Unenforceable(Vec<&'static str>),
    /// The host's own working directory (the job's) cannot be read.
    #[error("{0}")]
    Workdir(#[source] std::io::Error),
    /// A writable root on the kernel's own file systems.
    #[error("invalid workdir: under the sandbox a job may not write {} ({kind})", root.display())]
    KernelFiles {
        /// The root.
        root: PathBuf,
        /// Which of the kernel's file systems.
        kind: &'static str,
    },
    /// A writable root that holds, or lies inside, a private directory of
    /// the host's.
    #[error(
        "invalid workdir: under the sandbox a job may not write {}, which holds or is inside the host's private directory {}",
        root.display(),
        private.display()
    )]
    HoldsPrivate {
        /// The root.
        root: PathBuf,
        /// The host's private directory.
        private: PathBuf,
    },
    /// A workdir inside a private directory of the host's, for a job that
    /// may not read it (the job would start in it before a cover over it
    /// could hide it).
    #[error(
        "invalid workdir: under the sandbox a job may not run in {}, which is inside the host's private directory {}",
        workdir.display(),
        private.display()
    )]
    InsidePrivate {
        /// The workdir.
        workdir: PathBuf,
        /// The host's private directory.
        private: PathBuf,
    },
    /// The job's own temporary directory.
    #[error("cannot make the job's temporary directory: {0}")]
    TemporaryDirectory(#[source] std::io::Error),
    /// The Landlock ruleset.
    #[error("cannot build the job's sandbox: {0}")]
    Ruleset(#[source] ::landlock::RulesetError),
    /// A path no system call can take.
    #[error("a NUL byte in the path {}", .0.display())]
    NulInPath(PathBuf),
    /// A path the rules name that cannot be opened.
    #[error("cannot open {}: {source}", path.display())]
    Open {
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}
