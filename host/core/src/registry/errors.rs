//! Why a start or a registry operation was refused.

/// Why a start was refused. The text is what the producer's tool call reports.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartError {
    /// No tool-jobs controller is attached.
    #[error(
        "background jobs unavailable: no job controller serves this agent (load @buckeyestudio/toh-tool-jobs in its composition)"
    )]
    NoController,
    /// Empty kind.
    #[error("invalid job kind: expected a non-empty string")]
    InvalidKind,
    /// Empty label.
    #[error("invalid job label: expected a non-empty string")]
    InvalidLabel,
    /// A cap that is zero or above 2^53 - 1.
    #[error("invalid outputLimitBytes: expected a positive safe integer, got {0}")]
    InvalidOutputLimit(u64),
    /// The owner is not the live instance registered for its session.
    #[error(
        "agent \"{0}\" is not the registered agent instance (background job owner must be live)"
    )]
    StaleOwner(String),
    /// Admission refused.
    #[error(
        "background job limit reached for this owner (limit: {0}); use job_kill to stop an unneeded job, wait for it to finish, then retry"
    )]
    LimitReached(u64),
    /// The producer's own start failed; nothing was registered.
    #[error("{0}")]
    Producer(String),
}

/// Expected failures of registry operations.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RegistryError {
    /// Never issued, or removed.
    #[error("unknown job {0}")]
    UnknownJob(String),
    /// Owned by another session.
    #[error("job {0} belongs to another session")]
    ForeignJob(String),
    /// A wait timeout of 0, or above the timer bound.
    #[error(
        "invalid wait timeout: expected a positive number of milliseconds no greater than 2147483647, got {0}"
    )]
    InvalidTimeout(u64),
    /// The caller cancelled its wait.
    #[error("wait aborted")]
    WaitAborted,
    /// The producer's hook failed.
    #[error("{0}")]
    ProducerFailed(String),
    /// A pattern did not compile.
    #[error("invalid pattern: {0}")]
    InvalidPattern(String),
    /// The job was started without open input.
    #[error("the job was started without open input")]
    NoInput,
    /// The job's input is closed.
    #[error("the input of the job is closed")]
    InputClosed,
    /// The producer does not offer this extension.
    #[error("this host does not support the \"{0}\" extension")]
    Unsupported(String),
    /// The job was started without a terminal.
    #[error("the job was started without a terminal")]
    NoTerminal,
}

impl From<super::control::ControlError> for RegistryError {
    fn from(e: super::control::ControlError) -> Self {
        use super::control::ControlError;
        match e {
            ControlError::NoInput => RegistryError::NoInput,
            ControlError::InputClosed => RegistryError::InputClosed,
            ControlError::NoTerminal => RegistryError::NoTerminal,
            ControlError::Failed(m) => RegistryError::ProducerFailed(m),
        }
    }
}

/// Invalid registry configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("jobs: {0}")]
pub struct RegistryConfigError(pub(super) String);
