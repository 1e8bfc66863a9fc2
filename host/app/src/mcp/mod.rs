//! `jobs-host mcp`: the session's tools as an MCP server over stdio.
//!
//! One MCP connection is one owner. Its tools are `bash` (start a background job)
//! and the plugin's tools, executed through the component. Completion notices take
//! the inject lane: each is placed as a text block before the next tool result, and
//! also sent at once as an MCP logging notification (level `notice`, logger: the
//! notice's plugin, `tool-jobs` under profile A). Profile C's batched update is
//! taken before each tool result the same way. When the connection closes, the
//! owner's jobs are cancelled and calls still in flight are aborted.
//!
//! A result is the contract's text as content blocks and nothing else: clients
//! that find `structuredContent` (Claude Code, Codex, pydantic-ai) show the model
//! that instead of the text, and drop the notices with it. `--structured-output`
//! adds it back for clients that want the canonical values, carrying the text
//! and the notices too.
//!
//! A client that takes MCP tasks (the tasks extension of revision 2026-07-28,
//! or revision 2025-11-25's core tasks) gets `bash` as a task (see
//! [`tasks`]); with `--claude-channel`, Claude Code hears of a job that ends
//! while it is idle on its channel.
//!
//! The rooms: here the server and its options; [`revision`] (the protocol
//! revisions as one closed type, with each one's quirks in a file),
//! `handler` (the MCP methods), `serve` (a connection's life), `logging`,
//! `channel` (Claude Code's), `results` (a reply dressed for the wire),
//! `progress`, `tasks` (jobs as MCP tasks), `framer` and `wire` (each line
//! judged before the service sees it).

// MCP logging is deprecated upstream (SEP-2577) but is still how clients surface
// server-pushed messages today, and it is the channel notices are promised on.
#![allow(deprecated)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize};

use rmcp::model::Tool;

use host::session::Session;

mod channel;
mod framer;
mod handler;
mod logging;
mod progress;
mod results;
mod revision;
mod serve;
mod tasks;
mod wire;

use logging::{LogThreshold, OptIns};
use results::{annotations, object, output_schema};
use tasks::Tasks;

pub use framer::DEFAULT_PROGRESS_INTERVAL;
pub use framer::Io;

/// What a connection's end does to its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leave {
    /// The session ends: its jobs are killed (one connection, one session).
    Close,
    /// The session stays, with its jobs, for the next connection of its key;
    /// the number is the front end's (`Session::reattach`).
    Detach(u64),
}

/// The MCP server for one session.
pub struct JobsServer {
    session: Arc<Session>,
    /// The client's `logging/setLevel`, shared with the notice forwarder.
    log_level: Arc<LogThreshold>,
    /// Set once a request names revision 2026-07-28 or later in its `_meta`
    /// (a session without a handshake).
    handshake_free: Arc<AtomicBool>,
    /// Requests in flight that asked for logging (revision 2026-07-28).
    opt_ins: Arc<OptIns>,
    tools: Vec<Tool>,
    instructions: Option<String>,
    structured_output: bool,
    progress_interval: std::time::Duration,
    /// Cancelled when the client leaves: every call in flight is aborted.
    closing: tokio_util::sync::CancellationToken,
    /// Whether `bash` may answer with an MCP task (either generation).
    offer_tasks: bool,
    /// The connection's tasks.
    tasks: Arc<Tasks>,
    /// With `--claude-channel`: how long the client must be quiet before a
    /// notice goes out on Claude Code's channel instead of waiting.
    claude_channel: Option<std::time::Duration>,
    /// Set once the client took the channel (see [`JobsServer::with_claude_channel`]).
    channel_taken: Arc<AtomicBool>,
    /// Tool calls in flight, to tell the session when its agent is quiet.
    in_flight: Arc<AtomicUsize>,
    /// Whether a request read before the client left is still run (a piped
    /// script's last line). Not for a session that outlives its connection:
    /// nobody would read the answer, and the call would consume for nobody.
    answer_after_close: bool,
}

impl JobsServer {
    /// A server for `session`, advertising `instructions` (the prompt section,
    /// when the profile has one) followed by what each tool does (see
    /// [`tool_index`]). With `structured_output`, tools declare an output
    /// schema and results carry `structuredContent` (see the module docs).
    ///
    /// # Errors
    ///
    /// When the plugin fails to list its tools.
    pub async fn new(
        session: Arc<Session>,
        instructions: Option<String>,
        structured_output: bool,
    ) -> Result<JobsServer, host::PluginError> {
        let definitions = session.tool_definitions().await?;
        let index = tool_index(&definitions);
        let instructions = Some(match instructions {
            Some(prompt) => format!("{prompt}\n\n{index}"),
            None => index,
        });
        let tools = definitions
            .into_iter()
            .map(|d| {
                let mut tool = Tool::new(d.name, d.description, Arc::new(object(&d.input_schema)));
                tool.title = Some(d.annotations.title.clone());
                tool.annotations = Some(annotations(&d.annotations));
                if structured_output {
                    tool.output_schema = Some(Arc::new(output_schema(d.output_schema.as_deref())));
                }
                tool
            })
            .collect();
        Ok(JobsServer {
            session,
            log_level: Arc::default(),
            handshake_free: Arc::default(),
            opt_ins: Arc::default(),
            tools,
            instructions,
            structured_output,
            progress_interval: DEFAULT_PROGRESS_INTERVAL,
            closing: tokio_util::sync::CancellationToken::new(),
            offer_tasks: true,
            tasks: Arc::default(),
            claude_channel: None,
            channel_taken: Arc::default(),
            in_flight: Arc::default(),
            answer_after_close: true,
        })
    }

    /// Whether `bash` may answer with an MCP task: under revision 2026-07-28
    /// when the request declares the tasks extension, under 2025-11-25 when
    /// it asks with `params.task` (on by default).
    pub fn with_tasks(mut self, offer: bool) -> JobsServer {
        self.offer_tasks = offer;
        self
    }

    /// Declares Claude Code's channel (`capabilities.experimental
    /// ["claude/channel"]`). With a client that takes it, a notice the
    /// plugin would use to wake an idle agent (the follow-up lane, within the
    /// wake budget) goes out as `notifications/claude/channel` instead of
    /// waiting for the next tool result; the agent counts as idle once no
    /// call has been in flight for `idle_after`.
    pub fn with_claude_channel(mut self, idle_after: Option<std::time::Duration>) -> JobsServer {
        self.claude_channel = idle_after;
        self
    }

    /// How often a call that carries a `progressToken` and is still waiting
    /// sends `notifications/progress` ([`DEFAULT_PROGRESS_INTERVAL`] unless set).
    pub fn with_progress_interval(mut self, interval: std::time::Duration) -> JobsServer {
        self.progress_interval = interval.max(std::time::Duration::from_millis(10));
        self
    }
}

#[cfg(test)]
mod tests;

/// What each tool does, in the first sentence of its own description, for
/// the server's instructions: a client that defers tool schemas (Claude
/// Code's ToolSearch shows the model only the tools' names and the server's
/// instructions until it loads a schema) still tells the model which tool
/// starts a job, which reads one and which stops one.
pub fn tool_index(tools: &[host::plugin::ToolDefinition]) -> String {
    let mut index = String::from("What each tool does:");
    for tool in tools {
        let first = match tool.description.find(". ") {
            Some(end) => &tool.description[..=end],
            None => tool.description.trim_end(),
        };
        index.push_str(&format!("\n- {}: {first}", tool.name));
    }
    index
}

#[cfg(test)]
mod index_tests {
    use host::plugin::{ToolAnnotations, ToolDefinition};

    use super::tool_index;

    #[test]
    fn each_tool_is_said_in_its_first_sentence() {
        let tool = |name: &str, description: &str| ToolDefinition {
            name: name.into(),
            description: description.into(),
            input_schema: "{}".into(),
            output_schema: None,
            annotations: ToolAnnotations {
                title: name.into(),
                read_only_hint: false,
                destructive_hint: false,
                idempotent_hint: false,
                open_world_hint: false,
            },
        };
        assert_eq!(
            tool_index(&[
                tool(
                    "bash",
                    "Run a command (collect with job_output). No timeout applies."
                ),
                tool("job_kill", "Cancel a running background job."),
            ]),
            "What each tool does:\n- bash: Run a command (collect with job_output).\n- job_kill: Cancel a running background job."
        );
    }
}
