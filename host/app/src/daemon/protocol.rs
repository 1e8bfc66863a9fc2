//! The socket's protocol: each connection starts with one JSON line from
//! the client (a [`Hello`]) and one from the daemon (`{"ok":true}` or
//! `{"error":"..."}`); a control connection then carries the answers to its
//! one [`Request`].

use serde::{Deserialize, Serialize};

use crate::settings::Settings;

/// The version of the socket's protocol; a daemon refuses any other.
pub const PROTOCOL: u32 = 1;

/// The most bytes of a client's first line (its hello) or of one shell line.
pub const MAX_HELLO_BYTES: usize = 1 << 20;

/// What a connection is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// An MCP session.
    Mcp,
    /// The console.
    Shell,
    /// One control request.
    Ctl,
}

/// The client's first line.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hello {
    /// [`PROTOCOL`].
    pub protocol: u32,
    /// What the connection is for.
    pub kind: Kind,
    /// The session key (for `mcp` and `shell`; optional for control requests).
    #[serde(default)]
    pub session: Option<String>,
    /// The session's settings, as the client resolved them (`mcp`, `shell`).
    #[serde(default)]
    pub settings: Option<Settings>,
    /// The client's environment, which its session's jobs take their passed
    /// variables from.
    #[serde(default)]
    pub env: Vec<(String, String)>,
    /// How long the session is kept with no connection, in ms.
    #[serde(default)]
    pub linger_ms: Option<u64>,
    /// The MCP front end's options (`mcp`).
    #[serde(default)]
    pub mcp: Option<McpWire>,
    /// Whether the console's notices are shown as they arrive (`shell`).
    #[serde(default)]
    pub interactive: bool,
    /// The control request (`ctl`).
    #[serde(default)]
    pub request: Option<Request>,
}

/// The MCP options a client passes on to the daemon.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpWire {
    /// `--structured-output`.
    pub structured_output: bool,
    /// `--progress-interval-ms`.
    pub progress_interval_ms: u64,
    /// Not `--no-tasks`.
    pub tasks: bool,
    /// `--claude-channel` with its idle time, in ms.
    pub claude_channel_idle_ms: Option<u64>,
}

/// A control request.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase", deny_unknown_fields)]
pub enum Request {
    /// The jobs of one session, or of all (`session: None`).
    Ps {
        /// Only this session's.
        session: Option<String>,
    },
    /// A job's output, without consuming anything the model reads.
    Logs {
        /// The job.
        id: String,
        /// Its session, when the id is in more than one.
        session: Option<String>,
        /// Standard error instead of standard output.
        stderr: bool,
        /// Only the last this many lines.
        lines: Option<u32>,
        /// Keep following until the job ends.
        follow: bool,
    },
    /// Kills a job; its session still gets the notice.
    Kill {
        /// The job.
        id: String,
        /// Its session, when the id is in more than one.
        session: Option<String>,
    },
    /// Waits for a job's end.
    Wait {
        /// The job.
        id: String,
        /// Its session, when the id is in more than one.
        session: Option<String>,
    },
    /// Ends every session (their jobs are killed) and the daemon.
    Stop,
}
