//! The words of the two job-tool surfaces that differ only in wording: profile A
//! (`job_*`) and profile B (`task_*`), from the contract's string catalogue
//! (sections 3.1, 3.2, 4.1 and 4.4 of the behaviour contract), and the
//! extensions' words of each (the book's extension table, `docs/src/extensions.md`). Every
//! model-visible string that names the thing, its tools or its plugin comes
//! from here; profile C's fixed words are in [`go`].

pub mod go;

/// The extension tools' words for one surface (see the WIT `extension`): data
/// on each surface's wording, so the extensions never ask which surface runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtensionWords {
    /// `job` or `task`.
    pub noun: &'static str,
    /// The id argument.
    pub id_param: &'static str,
    /// The input tool.
    pub input_tool: &'static str,
    /// The signal tool.
    pub signal_tool: &'static str,
    /// The log tool.
    pub log_tool: &'static str,
    /// The input tool's description.
    pub input_description: &'static str,
    /// The signal tool's description.
    pub signal_description: &'static str,
    /// The log tool's description.
    pub log_description: &'static str,
    /// The resize tool (extension `terminal`).
    pub resize_tool: &'static str,
    /// The resize tool's description.
    pub resize_description: &'static str,
}

/// The start tool's words for one profile: its description (before the
/// extensions change it), and the words of its refusals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartWords {
    /// The start tool's description.
    pub description: &'static str,
    /// `job` or `task`, in a refusal.
    pub noun: &'static str,
    /// The kill tool a refusal at the limit names.
    pub kill_tool: &'static str,
    /// The refusal when no job controller serves the caller.
    pub no_controller: &'static str,
}

/// The refusal when no job controller serves the caller (profiles A and C).
pub(crate) const JOB_NO_CONTROLLER: &str = "background jobs unavailable: no job controller serves this agent (load @buckeyestudio/toh-tool-jobs in its composition)";

/// The `job_*` extension tools' descriptions (profiles A and C).
pub(crate) const JOB_INPUT_DESCRIPTION: &str = "Write text to the stdin of a background job started with stdin: true, or close it (EOF). Returns the bytes written and the job's status.";
pub(crate) const JOB_SIGNAL_DESCRIPTION: &str = "Send a signal (INT, TERM, HUP, KILL, STOP or CONT) to every process of a running background job.";
pub(crate) const JOB_RESIZE_DESCRIPTION: &str = "Resize the terminal of a background job started with tty: true (rows and columns, 2 to 1000 each); the job is told (SIGWINCH) and redraws for the new size.";
pub(crate) const JOB_LOG_DESCRIPTION: &str = "Page or search a background job's retained output without consuming it: lines by number from the start (start_line) or the last lines, or lines matching a regular expression (search) with context. Other reads of the job are unaffected.";

/// One profile's vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wording {
    /// `job` or `task`.
    pub noun: &'static str,
    /// The read tool.
    pub output_tool: &'static str,
    /// The list tool.
    pub list_tool: &'static str,
    /// The kill tool.
    pub kill_tool: &'static str,
    /// The id parameter.
    pub id_param: &'static str,
    /// The key of the snapshot in canonical values.
    pub value_key: &'static str,
    /// The plugin name on notices and in config errors.
    pub plugin: &'static str,
    /// The prompt section's name.
    pub prompt_name: &'static str,
    /// The prompt section's text.
    pub prompt_text: &'static str,
    /// The read tool's description.
    pub output_description: &'static str,
    /// The list tool's description.
    pub list_description: &'static str,
    /// The kill tool's description.
    pub kill_description: &'static str,
    /// The id parameter's description.
    pub id_description: &'static str,
    /// The `wait` parameter's description.
    pub wait_description: &'static str,
    /// The `reason` parameter's description.
    pub reason_description: &'static str,
    /// Whether the wait-timeout error names the timer bound (newest A does).
    pub timeout_error_names_bound: bool,
    /// Whether notices carry a UI summary and a form, and may wake an idle owner.
    pub rich_notices: bool,
    /// The extension tools' words.
    pub extensions: ExtensionWords,
    /// The start tool's words.
    pub start: StartWords,
}

/// Profile A: `job_output`, `job_list`, `job_kill`.
pub const A: Wording = Wording {
    noun: "job",
    output_tool: "job_output",
    list_tool: "job_list",
    kill_tool: "job_kill",
    id_param: "job_id",
    value_key: "job",
    plugin: "tool-jobs",
    prompt_name: "tool:jobs",
    prompt_text: "Track every background job id you start. You are notified in-session when a job finishes \u{2014} do not busy-poll or sleep on one; keep working on independent steps and do not duplicate a running job's work. Before giving a final answer, collect every still-relevant job with job_output (set wait: true only when you are genuinely blocked on it), and job_kill jobs that stopped mattering.",
    output_description: "Read a background job. Stream jobs return only output since the previous read; final-output jobs return their result after settlement. Every response ends with `[status: ...]`. Reads are non-blocking unless `wait: true`, which waits up to the configured cap.",
    list_description: "List your background jobs (running and finished) with their ids, kinds, and statuses.",
    kill_description: "Request cancellation of a running background job by job id. Returns immediately; the job settles as killed once its work actually stops.",
    id_description: "Job id returned by the tool that started the background work.",
    wait_description: "Block until the job reaches a terminal status or the timeout expires. A timed-out wait returns [status: running] and leaves the job alive.",
    reason_description: "Optional short reason, recorded in the log and forwarded to the job.",
    timeout_error_names_bound: true,
    rich_notices: true,
    extensions: ExtensionWords {
        noun: "job",
        id_param: "job_id",
        input_tool: "job_input",
        signal_tool: "job_signal",
        log_tool: "job_log",
        input_description: JOB_INPUT_DESCRIPTION,
        signal_description: JOB_SIGNAL_DESCRIPTION,
        log_description: JOB_LOG_DESCRIPTION,
        resize_tool: "job_resize",
        resize_description: JOB_RESIZE_DESCRIPTION,
    },
    start: StartWords {
        description: "Run a shell command in the background and return a job id immediately (collect with job_output, stop with job_kill). No timeout applies.",
        noun: "job",
        kill_tool: "job_kill",
        no_controller: JOB_NO_CONTROLLER,
    },
};

/// Profile B: `task_output`, `task_list`, `task_kill`.
pub const B: Wording = Wording {
    noun: "task",
    output_tool: "task_output",
    list_tool: "task_list",
    kill_tool: "task_kill",
    id_param: "task_id",
    value_key: "task",
    plugin: "tool-tasks",
    prompt_name: "tool:tasks",
    prompt_text: "Track every background task id you start. You are notified in-session when a task finishes \u{2014} do not busy-poll or sleep on one; keep working on independent steps and do not duplicate a running task's work. Before giving a final answer, collect every still-relevant task with task_output (set wait: true only when you are genuinely blocked on it), and task_kill tasks that stopped mattering.",
    output_description: "Read a background task. Stream tasks return only output since the previous read; final-output tasks return their result after settlement. Every response ends with `[status: ...]`. Reads are non-blocking unless `wait: true`, which waits up to the configured cap.",
    list_description: "List your background tasks (running and finished) with their ids, kinds, and statuses.",
    kill_description: "Request cancellation of a running background task by task id. Returns immediately; the task settles as killed once its work actually stops.",
    id_description: "Task id returned by the tool that started the background work.",
    wait_description: "Block until the task reaches a terminal status or the timeout expires. A timed-out wait returns [status: running] and leaves the task alive.",
    reason_description: "Optional short reason, recorded in the log and forwarded to the task.",
    timeout_error_names_bound: false,
    rich_notices: false,
    extensions: ExtensionWords {
        noun: "task",
        id_param: "task_id",
        input_tool: "task_input",
        signal_tool: "task_signal",
        log_tool: "task_log",
        input_description: "Write text to the stdin of a background task started with stdin: true, or close it (EOF). Returns the bytes written and the task's status.",
        signal_description: "Send a signal (INT, TERM, HUP, KILL, STOP or CONT) to every process of a running background task.",
        log_description: "Page or search a background task's retained output without consuming it: lines by number from the start (start_line) or the last lines, or lines matching a regular expression (search) with context. Reads by task_output are unaffected.",
        resize_tool: "task_resize",
        resize_description: "Resize the terminal of a background task started with tty: true (rows and columns, 2 to 1000 each); the task is told (SIGWINCH) and redraws for the new size.",
    },
    start: StartWords {
        description: "Run a shell command in the background and return a task id immediately (collect with task_output, stop with task_kill). No timeout applies.",
        noun: "task",
        kill_tool: "task_kill",
        no_controller: "background tasks unavailable: no control surface is attached (load @deepseek-ai/dsh-tool-tasks)",
    },
};
