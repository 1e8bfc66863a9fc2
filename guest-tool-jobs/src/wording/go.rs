//! Profile C's fixed words: the Go `jobs` plugin's own texts (section 4.5 of
//! the behaviour contract), below both surfaces so the extensions can word a
//! profile C call without knowing the surface.

use crate::model::RegistryError;

use super::{
    ExtensionWords, JOB_INPUT_DESCRIPTION, JOB_LOG_DESCRIPTION, JOB_NO_CONTROLLER,
    JOB_RESIZE_DESCRIPTION, JOB_SIGNAL_DESCRIPTION, StartWords,
};

/// The plugin name on notices and at the start of config errors.
pub const PLUGIN: &str = "jobs";
/// The error for an unknown id and for another owner's id alike.
pub const NOT_FOUND: &str = "agentcore: job not found";
/// The error for a missing or empty id.
pub const ID_REQUIRED: &str = "id is required";
/// First line of a batched completion notice.
pub const UPDATE_HEADER: &str = "Background job update:";
/// Shown by `job_status` for a succeeded job with an empty result.
pub const NO_OUTPUT: &str = "(no output)";

/// The start tool's words.
pub const START: StartWords = StartWords {
    description: "Run a shell command in the background and return a job id immediately (check with job_status, block with job_wait, stop with job_cancel). No timeout applies.",
    noun: "job",
    kill_tool: "job_cancel",
    no_controller: JOB_NO_CONTROLLER,
};

/// The list tool.
pub const LIST: &str = "job_list";
/// The status tool.
pub const STATUS: &str = "job_status";
/// The wait tool.
pub const WAIT: &str = "job_wait";
/// The cancel tool.
pub const CANCEL: &str = "job_cancel";

/// The list tool's description, exactly as the Go plugin states it.
pub const LIST_DESCRIPTION: &str = "List the background jobs this session started, newest first, with their state and duration. Jobs still running when you finish your answer are cancelled \u{2014} wait for the ones whose results you need.";
/// The status tool's description.
pub const STATUS_DESCRIPTION: &str =
    "Read one background job: its state, and its full output once it has finished.";
/// The wait tool's description.
pub const WAIT_DESCRIPTION: &str = "Block until a background job finishes, then return its result. Bounded by a timeout \u{2014} if it returns while the job is still running, the job keeps going and you can wait again or continue with other work.";
/// The cancel tool's description.
pub const CANCEL_DESCRIPTION: &str = "Cancel a running background job.";
/// The wait tool's `timeout_seconds` description.
pub const TIMEOUT_DESCRIPTION: &str =
    "How long to wait before returning with the job still running.";

/// The extension tools' words: profile A's tools, with C's `id` argument.
pub const EXTENSIONS: ExtensionWords = ExtensionWords {
    noun: "job",
    id_param: "id",
    input_tool: "job_input",
    signal_tool: "job_signal",
    log_tool: "job_log",
    input_description: JOB_INPUT_DESCRIPTION,
    signal_description: JOB_SIGNAL_DESCRIPTION,
    log_description: JOB_LOG_DESCRIPTION,
    resize_tool: "job_resize",
    resize_description: JOB_RESIZE_DESCRIPTION,
};

/// The registry error as the Go plugin words it.
pub fn message(error: &RegistryError) -> String {
    match error {
        RegistryError::UnknownJob(_) | RegistryError::ForeignJob(_) => NOT_FOUND.to_owned(),
        // The wait's context ended with the tool call's.
        RegistryError::WaitAborted => "context canceled".to_owned(),
        RegistryError::InvalidTimeout(ms) => format!("invalid wait timeout: {ms} ms"),
        RegistryError::ProducerFailed(m) => m.clone(),
        RegistryError::InvalidPattern(m) => format!("invalid pattern: {m}"),
        RegistryError::NoInput => "the job was started without open input".to_owned(),
        RegistryError::InputClosed => "the input of the job is closed".to_owned(),
        RegistryError::Unsupported(what) => {
            format!("this host does not support the \"{what}\" extension")
        }
        RegistryError::NoTerminal => "the job was started without a terminal".to_owned(),
    }
}
