//! The command line: `jobs-host`'s subcommands and their flags (clap).

use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::{Parser, Subcommand};

use crate::daemon;
use crate::settings::Settings;

#[derive(Parser)]
#[command(
    version,
    about = "Background jobs for LLM agents: a wasmtime host for the tool-jobs component"
)]
pub(crate) struct Cli {
    /// Where the compiled component is cached [default: $XDG_CACHE_HOME/jobs-host].
    #[arg(long, global = true, value_name = "DIR")]
    pub(crate) cache_dir: Option<PathBuf>,
    /// A TOML settings file (keys as the flags, e.g. `wait-timeout-ms = 5000`).
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Serve `bash` and the job tools as an MCP server over stdio.
    ///
    /// Under MCP a wait is capped at 110 s unless `--max-wait-timeout-ms`
    /// (profiles a, b) or `--max-wait-seconds` (profile c) says otherwise:
    /// clients move a call that runs two minutes to a background task of
    /// their own, or time it out.
    Mcp {
        #[command(flatten)]
        settings: Settings,
        /// Declare output schemas and add `structuredContent` to results (the
        /// text, the notices before it, and the canonical value). Off by
        /// default: clients that find it show the model that JSON instead of
        /// the text.
        #[arg(long)]
        structured_output: bool,
        /// How often a call whose request carried a `progressToken` sends
        /// `notifications/progress` while it waits.
        #[arg(long, value_name = "MS", default_value_t = 5000, value_parser = clap::value_parser!(u64).range(10..=3_600_000))]
        progress_interval_ms: u64,
        /// Never answer `bash` with an MCP task. By default a start answers
        /// with one when the client takes tasks: under revision 2026-07-28 a
        /// request that declares the tasks extension (and has no `yield_ms`),
        /// under 2025-11-25 a request with `params.task`.
        #[arg(long)]
        no_tasks: bool,
        /// Declare Claude Code's channel and, when the client is Claude Code
        /// (run with `--dangerously-load-development-channels server:NAME`),
        /// send the notices that would wake an idle agent as
        /// `notifications/claude/channel` instead of holding them for the
        /// next tool result.
        #[arg(long)]
        claude_channel: bool,
        /// With `--claude-channel`: how long no tool call must be in flight
        /// before the agent counts as idle.
        #[arg(long, value_name = "MS", default_value_t = 5000, value_parser = clap::value_parser!(u64).range(0..=3_600_000))]
        claude_channel_idle_ms: u64,
        #[command(flatten)]
        durable: Durable,
    },
    /// An interactive console: type tool calls, see what the model sees. Reads a
    /// script from stdin when it is not a terminal.
    Shell {
        #[command(flatten)]
        settings: Settings,
        #[command(flatten)]
        durable: Durable,
    },
    /// The daemon of durable sessions (one per user). `mcp --session` and
    /// `shell --session` start it when it is not running.
    Daemon {
        /// Stop the running daemon: every session ends and its jobs are killed.
        #[arg(long)]
        stop: bool,
    },
    /// List the jobs of durable sessions.
    Ps {
        /// This session's jobs [default: `JOBS_HOST_SESSION`, else the
        /// session of the current directory].
        #[arg(long, value_name = "KEY")]
        session: Option<String>,
        /// Every session's jobs.
        #[arg(long, conflicts_with = "session")]
        all: bool,
        /// From the journal, even while the daemon runs: ended sessions too,
        /// and the jobs a daemon that was killed lost (always, when no daemon
        /// runs).
        #[arg(long)]
        journal: bool,
        /// As JSON.
        #[arg(long)]
        json: bool,
    },
    /// A live view of every durable session's jobs: their table, the selected
    /// job's output, keys to kill, filter and follow (`q` quits). Nothing the
    /// model reads is consumed.
    Top,
    /// Print a job's output (nothing the model reads is consumed).
    Logs {
        /// Keep printing what the job writes until it ends.
        #[arg(short, long)]
        follow: bool,
        /// Its standard error instead of its standard output.
        #[arg(long)]
        stderr: bool,
        /// Only the last N lines.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        lines: Option<u32>,
        /// The job's session, when its id is in more than one.
        #[arg(long, value_name = "KEY")]
        session: Option<String>,
        /// The job's id (`bash-1`).
        id: String,
    },
    /// Kill a job of a durable session; the session's model is told.
    Kill {
        /// The job's session, when its id is in more than one.
        #[arg(long, value_name = "KEY")]
        session: Option<String>,
        /// As one JSON object.
        #[arg(long)]
        json: bool,
        /// The job's id.
        id: String,
    },
    /// Wait for a job of a durable session to end; exits with its exit code.
    Wait {
        /// The job's session, when its id is in more than one.
        #[arg(long, value_name = "KEY")]
        session: Option<String>,
        /// As one JSON object (the exit code is the same).
        #[arg(long)]
        json: bool,
        /// The job's id.
        id: String,
    },
    /// Print the tool definitions, UI cards and prompt section as JSON.
    Tools {
        #[command(flatten)]
        settings: Settings,
    },
    /// Load a plugin component, list its imports and exports, and say whether this
    /// host can run it.
    Check {
        /// The component (`.wasm`).
        plugin: PathBuf,
        /// As one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Say whether a runner's engine answers, which version it runs and
    /// whether it takes the token; exits 0 usable, 1 not, 2 no such runner.
    CheckRunner {
        /// The runner's name (from --runner or the config file's `runner`).
        name: String,
        /// As one JSON object.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        settings: Settings,
    },
    /// Write the built-in tool-jobs component (`.wasm`), for hosts in other
    /// languages (see `hosts/`).
    Wasm {
        /// Where to write it: a file, or a directory to hold it as
        /// `tool-jobs-<version>.wasm` (the version of its WIT package).
        #[arg(long)]
        out: PathBuf,
    },
    /// Print a completion script for SHELL (bash: `source <(jobs-host
    /// completions bash)`; zsh: a `_jobs-host` file on `$fpath`; fish:
    /// `jobs-host completions fish > ~/.config/fish/completions/jobs-host.fish`).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page, in roff (`jobs-host man | man -l -`).
    Man,
}

/// `--session` and `--linger`, for `mcp` and `shell`.
#[derive(clap::Args, Clone, Debug, Default)]
pub(crate) struct Durable {
    /// A durable session of this user's daemon, which keeps its jobs when
    /// the client goes (see the book's "Durable sessions"). Without KEY,
    /// or with `JOBS_HOST_SESSION` set, the key is that variable or else the
    /// canonical working directory.
    #[arg(long, value_name = "KEY", num_args = 0..=1, default_missing_value = "")]
    pub(crate) session: Option<String>,
    /// With a session: how long it is kept, with its jobs, when no client is
    /// connected (`90s`, `30m`, `2h`) [default: 30m].
    #[arg(long, value_name = "DURATION", value_parser = daemon::parse_duration)]
    pub(crate) linger: Option<std::time::Duration>,
}

impl Durable {
    /// The session key, if this is a durable session.
    pub(crate) fn key(&self, workdir: Option<&Path>) -> Result<Option<String>> {
        let from_env = std::env::var("JOBS_HOST_SESSION")
            .ok()
            .filter(|k| !k.is_empty());
        let key = match (self.session.as_deref(), from_env) {
            (Some(""), Some(key)) | (None, Some(key)) => key,
            (Some(""), None) => daemon::default_key(workdir)?,
            (Some(key), _) => key.to_owned(),
            (None, None) => {
                if self.linger.is_some() {
                    anyhow::bail!("--linger needs --session");
                }
                return Ok(None);
            }
        };
        daemon::check_key(&key)?;
        Ok(Some(key))
    }
}
