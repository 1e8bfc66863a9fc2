//! The plugin's public types, owned by the host: an embedder's code does not
//! change when the WIT gains a field, and no generated binding type appears in
//! the crate's API. `convert` maps each from and to its WIT twin.

use crate::limits::JobLimits;

/// Which tool surface a mount presents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Profile {
    /// `job_output`, `job_list`, `job_kill`; notices may wake an idle owner.
    A,
    /// `task_output`, `task_list`, `task_kill`; notices are only injected.
    B,
    /// `job_list`, `job_status`, `job_wait`, `job_cancel`; notices are pulled.
    C,
}

impl Profile {
    /// The config's spelling: `a`, `b` or `c`.
    pub fn as_str(self) -> &'static str {
        match self {
            Profile::A => "a",
            Profile::B => "b",
            Profile::C => "c",
        }
    }

    /// The call that reads job `id` as the model would without waiting: the
    /// profile's read tool (`job_output`, `task_output`, or `job_status`
    /// under profile C) and its arguments. A front end that shows a job's
    /// result some other way (an MCP task) reads it with this, so the read
    /// counts as the model's.
    pub fn read_call(self, id: &str) -> (&'static str, serde_json::Value) {
        match self {
            Profile::A => ("job_output", serde_json::json!({ "job_id": id })),
            Profile::B => ("task_output", serde_json::json!({ "task_id": id })),
            Profile::C => ("job_status", serde_json::json!({ "id": id })),
        }
    }
}

/// When a completion notice may open a turn on an idle owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompletionDelivery {
    /// Wake an idle owner, within the wake budget.
    Wakeup,
    /// Only ever inject into the owner's next step.
    Quiet,
}

/// An opt-in set of tools and arguments beyond the seed surfaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Extension {
    /// Waits that also end on a matching line or on quiet output.
    Ready,
    /// Writing to a job's stdin, and signals to its tree.
    Input,
    /// Paging and searching retained output.
    Log,
    /// Per-job limits on the start tool.
    Limits,
    /// Listening ports, and named jobs on start.
    Ports,
    /// Starts that wait a little and answer with the output.
    Yield,
    /// Narrower sandboxes on start, and each job's in its status.
    Sandbox,
    /// Jobs on a terminal, rendered output, keys, resizes, the screen and
    /// waits that end at a prompt.
    Terminal,
    /// Jobs on a cluster engine: `runner` and `resources` on a start.
    Runners,
}

/// How a mount's completion notices reach their owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoticeTransport {
    /// Decided and handed over as each job settles (profiles A and B).
    Push,
    /// Collected before each of the owner's steps (profile C).
    Pull,
}

/// A mount's validated configuration, as the guest normalized it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountConfig {
    /// The tool surface.
    pub profile: Profile,
    /// Wait used when `wait: true` comes without a timeout, in milliseconds.
    pub wait_timeout_ms: u64,
    /// Cap on any wait, in milliseconds.
    pub max_wait_timeout_ms: u64,
    /// Whether notices may wake an idle owner.
    pub completion_delivery: CompletionDelivery,
    /// Turns one owner may be woken for before notices are only injected.
    pub max_consecutive_wakes: u64,
    /// Profile C: the most bytes of a result the model sees.
    pub max_result_bytes: u64,
    /// Profile C: no batched notices.
    pub suppress_completion_notice: bool,
    /// The extensions enabled, each once.
    pub extensions: Vec<Extension>,
    /// The per-job limits' maxima (extension `limits`).
    pub limits: JobLimits,
    /// How notices travel.
    pub notice_transport: NoticeTransport,
    /// Whether a notice for an owner torn down meanwhile counts as a failure.
    pub reports_disposed_owner: bool,
    /// The runners a job may name besides this host (extension `runners`).
    pub runners: Vec<String>,
}

impl MountConfig {
    /// Whether the config enables `extension`.
    pub fn has(&self, extension: Extension) -> bool {
        self.extensions.contains(&extension)
    }
}

/// A tool's title and behaviour hints (MCP tool annotations).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolAnnotations {
    /// A human-readable name.
    pub title: String,
    /// Changes nothing a person would care about.
    pub read_only_hint: bool,
    /// May destroy something.
    pub destructive_hint: bool,
    /// A second identical call has no further effect.
    pub idempotent_hint: bool,
    /// Reaches beyond the jobs it names.
    pub open_world_hint: bool,
}

/// One tool as the model receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolDefinition {
    /// Its name.
    pub name: String,
    /// The exact description.
    pub description: String,
    /// JSON Schema of the arguments, as JSON text.
    pub input_schema: String,
    /// JSON Schema of the canonical value, as JSON text, when it has one.
    pub output_schema: Option<String>,
    /// Title and hints.
    pub annotations: ToolAnnotations,
}

/// How a user interface presents one call. Not seen by the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UiCard {
    /// For example `Read output from background job bash-1`.
    pub title: String,
    /// `read` or `execute`.
    pub kind: String,
    /// The raw input to show, for example the job id.
    pub raw_input: Option<String>,
}

/// A section the harness adds to the system prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptSection {
    /// Section name, for example `tool:jobs`.
    pub name: String,
    /// Position among sections; lower comes first.
    pub order: u32,
    /// The exact text.
    pub text: String,
}

/// One content block of a result the harness rewrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContentBlock {
    /// Plain text.
    Text(String),
    /// Any other block, as its JSON form; never cut.
    Other(String),
}
