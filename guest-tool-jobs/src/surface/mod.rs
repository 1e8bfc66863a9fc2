//! The closed set of tool surfaces, and the one place each entry point picks
//! one. Profiles A and B are *worded* surfaces (the same tools in the words of a
//! [`Wording`]); profile C is the *Go-style* surface. Every function here matches
//! [`Surface`] exhaustively, so a new surface fails to compile until each entry
//! point handles it.
//!
//! Layers, each depending only on those before it: plain types and words
//! (`model`, `wording` with profile C's fixed words in `wording::go`,
//! `config`), capping and rendering (`caps`, `render`, `notice`), the
//! extensions (which word a call through the [`crate::extensions::Dialect`]
//! each surface implements, never asking which one runs), the surfaces
//! (`worded` for [`Surface::Worded`], `go_style` for [`Surface::GoStyle`]),
//! this dispatch, the start tool (`start`, which asks this dispatch for its
//! words and its reads), and the component glue. `tests/e2e/layout.rs` reads
//! every file's `crate::` paths and fails on one that points up this order.

use crate::config::{Config, Profile};
use crate::model::{
    ContentBlock, JobSnapshot, JobsView, RegistryError, Step, ToolDefinition, ToolResult, UiCard,
    WaitOutcome, Waited,
};
use crate::notice::{self, AgentStatus, Lane};
use crate::wording::{self, StartWords, Wording};
mod go_style;
mod worded;

pub use go_style::GoStyle;

/// One tool surface.
#[derive(Debug, Clone, Copy)]
pub enum Surface {
    /// `<noun>_output`, `<noun>_list`, `<noun>_kill`, in one vocabulary.
    Worded(&'static Wording),
    /// `job_list`, `job_status`, `job_wait`, `job_cancel` (profile C).
    GoStyle,
}

impl Surface {
    /// The surface a profile presents.
    pub fn of(profile: Profile) -> Surface {
        match profile {
            Profile::A => Surface::Worded(&wording::A),
            Profile::B => Surface::Worded(&wording::B),
            Profile::C => Surface::GoStyle,
        }
    }

    /// The start tool's words on this surface.
    pub fn start_words(self) -> &'static StartWords {
        match self {
            Surface::Worded(w) => &w.start,
            Surface::GoStyle => &wording::go::START,
        }
    }
}

/// The system-prompt section: its name, order and text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptSection {
    /// Section name, for example `tool:jobs`.
    pub name: &'static str,
    /// Position among the harness's sections.
    pub order: u32,
    /// The exact text.
    pub text: &'static str,
}

/// A completion notice's parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoticeParts {
    /// The one text block.
    pub text: String,
    /// The UI's collapsed-row summary, where the surface has one.
    pub summary: Option<String>,
    /// The sending plugin.
    pub plugin: &'static str,
    /// The message form, where the surface has one.
    pub form: Option<&'static str>,
}

/// The profile's tools with their exact descriptions and schemas.
pub fn tool_definitions(config: &Config) -> Vec<ToolDefinition> {
    match Surface::of(config.profile) {
        Surface::Worded(w) => worded::tool_definitions(config, w),
        Surface::GoStyle => go_style::tool_definitions(config),
    }
}

/// The card for a call, or `None` for a tool the profile does not have.
pub fn ui_card(config: &Config, tool: &str, args_json: &str) -> Option<UiCard> {
    match Surface::of(config.profile) {
        Surface::Worded(w) => worded::ui_card(config, w, tool, args_json),
        Surface::GoStyle => go_style::ui_card(config, tool, args_json),
    }
}

/// The system-prompt section; the Go-style surface has none.
pub fn system_prompt(profile: Profile) -> Option<PromptSection> {
    match Surface::of(profile) {
        Surface::Worded(w) => Some(PromptSection {
            name: w.prompt_name,
            order: worded::PROMPT_SECTION_ORDER,
            text: w.prompt_text,
        }),
        Surface::GoStyle => None,
    }
}

/// Runs one step of a tool call for the caller `view` stands for: the first
/// with `waited` absent, and after a [`Step::Wait`], the next with the wait's
/// outcome. Every step checks the arguments again: nothing is kept between them.
pub fn invoke(
    view: &dyn JobsView,
    config: &Config,
    tool: &str,
    args_json: &str,
    waited: Option<&Waited>,
) -> Step<ToolResult> {
    match Surface::of(config.profile) {
        Surface::Worded(w) => worded::invoke(view, config, w, tool, args_json, waited),
        Surface::GoStyle => go_style::invoke(view, config, tool, args_json, waited),
    }
}

/// Caps a harness-produced result for a call of this profile's tools. The
/// Go-style surface bounds only job results, so its calls come back unchanged.
pub fn finalize(
    view: &dyn JobsView,
    profile: Profile,
    tool: &str,
    args_json: &str,
    blocks: Vec<ContentBlock>,
) -> Vec<ContentBlock> {
    match Surface::of(profile) {
        Surface::Worded(w) => worded::finalize(view, w, tool, args_json, blocks),
        Surface::GoStyle => blocks,
    }
}

/// The completion notice for one settled job.
pub fn notice(job: &JobSnapshot, config: &Config) -> NoticeParts {
    match Surface::of(config.profile) {
        Surface::Worded(w) => NoticeParts {
            text: notice::notice_text(job, w),
            summary: w.rich_notices.then(|| notice::notice_summary(job)),
            plugin: w.plugin,
            form: w.rich_notices.then_some("notice"),
        },
        Surface::GoStyle => NoticeParts {
            text: go_style::single_notice(job, config),
            summary: None,
            plugin: crate::wording::go::PLUGIN,
            form: None,
        },
    }
}

/// The lane for a pushed notice, or `None` when none is due. The Go-style
/// surface never pushes: its notices are pulled as one batch per step.
pub fn delivery_lane(
    config: &Config,
    job: &JobSnapshot,
    owner: Option<(AgentStatus, u64)>,
) -> Option<Lane> {
    match Surface::of(config.profile) {
        Surface::Worded(w) => notice::delivery_lane(config, w, job, owner),
        Surface::GoStyle => None,
    }
}

/// The one batched update for a step (`Background job update:` ...). Worded
/// surfaces push their notices one by one, so they have no batch to give.
pub fn batch_notice(
    view: &dyn JobsView,
    config: &Config,
    jobs: &[JobSnapshot],
) -> Option<NoticeParts> {
    match Surface::of(config.profile) {
        Surface::Worded(_) => return None,
        Surface::GoStyle => {}
    }
    let text = go_style::batch_notice(view, config, jobs)?;
    Some(NoticeParts {
        text,
        summary: None,
        plugin: config.profile.plugin(),
        form: None,
    })
}

/// The text of a start that yielded, once the host's wait on the new job
/// ended (see `start::resumed`): a job that has ended is read as the
/// surface reads it (A's and B's consuming read, C's status with the
/// result); a job that runs on answers with the start line and, for A and
/// B, what it printed so far (after the prompt it stopped at, if any).
pub fn resumed_text(view: &dyn JobsView, config: &Config, outcome: &WaitOutcome) -> String {
    let id = &outcome.job.id;
    let ended = outcome.job.status.is_terminal();
    let read = |tool: &str, args: serde_json::Value| match invoke(
        view,
        config,
        tool,
        &args.to_string(),
        None,
    ) {
        Step::Done(result) => result.text,
        // A read without `wait` never asks for one.
        Step::Wait(_) => String::new(),
    };
    let started = format!("started background job {id}");
    match Surface::of(config.profile) {
        Surface::Worded(w) => {
            let shown = read(w.output_tool, serde_json::json!({w.id_param: id}));
            // A start that stopped at a prompt says so before the question.
            match (ended, crate::extensions::prompt_note(w, outcome)) {
                (true, _) => shown,
                (false, Some(note)) => format!("{started}\n{note}\n{shown}"),
                (false, None) => format!("{started}\n{shown}"),
            }
        }
        Surface::GoStyle if ended => read(wording::go::STATUS, serde_json::json!({"id": id})),
        Surface::GoStyle => match &outcome.prompt {
            Some(prompt) if outcome.end == crate::model::WaitEnd::Prompt => {
                format!("{started}; it is waiting for input: {prompt}")
            }
            _ => started,
        },
    }
}

/// The error text of a start whose wait found no job.
pub fn resumed_error(config: &Config, error: &RegistryError) -> String {
    match Surface::of(config.profile) {
        Surface::Worded(w) => format!("Error: {}", crate::render::registry_error_message(error, w)),
        Surface::GoStyle => format!("error: {}", wording::go::message(error)),
    }
}
