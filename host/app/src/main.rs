//! `jobs-host`: background jobs for LLM agents, through the tool-jobs component.
//!
//! - `mcp`: an MCP server over stdio (one connection, one owner), or with
//!   `--session` a durable session of the user's daemon;
//! - `shell`: type tool calls and see exactly what the model would see;
//! - `daemon`, `ps`, `logs`, `kill`, `wait`: the daemon of durable sessions
//!   and a person's view of their jobs;
//! - `tools`: the tool definitions, UI cards and prompt section as JSON;
//! - `check`: whether this host can run a given plugin component.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

mod console;
mod daemon;
mod mcp;
mod settings;
mod signals;
mod terminal;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use host::bash::BashProducer;
use host::session::Session;
use host::{JobRegistry, Lane, Mount, PluginRuntime, SandboxLimits};
use mcp::JobsServer;
use serde_json::json;
use settings::Settings;
use signals::Signals;

#[derive(Parser)]
#[command(
    version,
    about = "Background jobs for LLM agents: a wasmtime host for the tool-jobs component"
)]
struct Cli {
    /// Where the compiled component is cached [default: $XDG_CACHE_HOME/jobs-host].
    #[arg(long, global = true, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// A TOML settings file (keys as the flags, e.g. `wait-timeout-ms = 5000`).
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
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
        /// The job's id.
        id: String,
    },
    /// Wait for a job of a durable session to end; exits with its exit code.
    Wait {
        /// The job's session, when its id is in more than one.
        #[arg(long, value_name = "KEY")]
        session: Option<String>,
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
    },
    /// Write the built-in tool-jobs component (`.wasm`), for hosts in other
    /// languages (see `hosts/`).
    Wasm {
        /// Where to write it.
        #[arg(long)]
        out: PathBuf,
    },
}

/// `--session` and `--linger`, for `mcp` and `shell`.
#[derive(clap::Args, Clone, Debug, Default)]
struct Durable {
    /// A durable session of this user's daemon, which keeps its jobs when
    /// the client goes (see the README's "Durable sessions"). Without KEY,
    /// or with `JOBS_HOST_SESSION` set, the key is that variable or else the
    /// canonical working directory.
    #[arg(long, value_name = "KEY", num_args = 0..=1, default_missing_value = "")]
    session: Option<String>,
    /// With a session: how long it is kept, with its jobs, when no client is
    /// connected (`90s`, `30m`, `2h`) [default: 30m].
    #[arg(long, value_name = "DURATION", value_parser = daemon::parse_duration)]
    linger: Option<std::time::Duration>,
}

impl Durable {
    /// The session key, if this is a durable session.
    fn key(&self, workdir: Option<&Path>) -> Result<Option<String>> {
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

/// The first line a session client sends its daemon: the session's key and
/// settings, resolved here (relative paths against this directory).
fn session_hello(
    kind: daemon::Kind,
    key: String,
    mut settings: Settings,
    linger: Option<std::time::Duration>,
) -> Result<daemon::Hello> {
    let cwd = std::env::current_dir().context("no current directory")?;
    let workdir = settings.workdir.take().unwrap_or_else(|| cwd.clone());
    settings.workdir = Some(cwd.join(workdir));
    if let Some(paths) = settings.sandbox_write.as_mut() {
        for path in paths {
            *path = cwd.join(&*path);
        }
    }
    Ok(daemon::Hello {
        protocol: daemon::PROTOCOL,
        kind,
        session: Some(key),
        settings: Some(settings),
        env: daemon::client::client_env(),
        linger_ms: linger.map(|l| u64::try_from(l.as_millis()).unwrap_or(u64::MAX)),
        mcp: None,
        interactive: false,
        request: None,
    })
}

/// The commands that talk to the daemon instead of running a host here.
async fn daemon_command(cli: Cli, cache_dir: Option<PathBuf>) -> Result<u8> {
    match cli.command {
        Command::Daemon { stop: true } => daemon::client::stop().await,
        Command::Daemon { stop: false } => daemon::server::run(cache_dir).await,
        Command::Ps {
            session,
            all,
            journal,
            json,
        } => {
            let session = match (session, all) {
                (_, true) => None,
                (Some(key), false) => Some(key),
                (None, false) => match std::env::var("JOBS_HOST_SESSION") {
                    Ok(key) if !key.is_empty() => Some(key),
                    _ => Some(daemon::default_key(None)?),
                },
            };
            daemon::client::ps(session, journal, json).await
        }
        Command::Logs {
            follow,
            stderr,
            lines,
            session,
            id,
        } => daemon::client::logs(id, session, stderr, lines, follow).await,
        Command::Kill { session, id } => daemon::client::kill(id, session).await,
        Command::Wait { session, id } => daemon::client::wait(id, session).await,
        Command::Mcp {
            settings,
            structured_output,
            progress_interval_ms,
            no_tasks,
            claude_channel,
            claude_channel_idle_ms,
            durable,
        } => {
            let settings = settings_with_file(cli.config.as_deref(), settings)?;
            let key = durable
                .key(settings.workdir.as_deref())?
                .context("not a durable session")?;
            let mut hello = session_hello(daemon::Kind::Mcp, key, settings, durable.linger)?;
            hello.mcp = Some(daemon::McpWire {
                structured_output,
                progress_interval_ms,
                tasks: !no_tasks,
                claude_channel_idle_ms: claude_channel.then_some(claude_channel_idle_ms),
            });
            daemon::client::mcp(hello, cache_dir.as_deref()).await
        }
        Command::Shell { settings, durable } => {
            let settings = settings_with_file(cli.config.as_deref(), settings)?;
            let key = durable
                .key(settings.workdir.as_deref())?
                .context("not a durable session")?;
            let hello = session_hello(daemon::Kind::Shell, key, settings, durable.linger)?;
            daemon::client::shell(hello, cache_dir.as_deref()).await
        }
        Command::Check { .. } | Command::Wasm { .. } | Command::Tools { .. } => {
            unreachable!("not a daemon command")
        }
    }
}

/// Whether `command` goes to the daemon: a durable session, or the
/// daemon's own commands.
fn is_daemon_command(command: &Command) -> Result<bool> {
    Ok(match command {
        Command::Daemon { .. }
        | Command::Ps { .. }
        | Command::Logs { .. }
        | Command::Kill { .. }
        | Command::Wait { .. } => true,
        Command::Mcp {
            durable, settings, ..
        }
        | Command::Shell { durable, settings } => {
            durable.key(settings.workdir.as_deref())?.is_some()
        }
        _ => false,
    })
}

fn write_wasm(out: &Path) -> ExitCode {
    match std::fs::write(out, host::plugin::TOOL_JOBS_WASM) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("jobs-host: cannot write {}: {e}", out.display());
            ExitCode::FAILURE
        }
    }
}

fn default_cache_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .map(|d| d.join("jobs-host"))
}

/// Everything a session needs, built from settings.
struct Host {
    mount: Arc<Mount>,
    bash: BashProducer,
    shutdown_grace: std::time::Duration,
    mcp: McpOptions,
}

/// The component, loaded (and compiled, or read from the cache) once.
fn load_runtime(cache_dir: Option<&Path>) -> Result<Arc<PluginRuntime>> {
    Ok(Arc::new(
        PluginRuntime::new(SandboxLimits::default(), cache_dir)
            .context("loading the tool-jobs component")?,
    ))
}

async fn host(cache_dir: Option<&Path>, settings: Settings) -> Result<Host> {
    host_on(load_runtime(cache_dir)?, cache_dir, settings, None, None).await
}

/// A session's host on `runtime`: its registry, mount and shell producer.
/// `host_env` is the environment its jobs take their passed variables from
/// (`None`: this process's).
async fn host_on(
    runtime: Arc<PluginRuntime>,
    cache_dir: Option<&Path>,
    settings: Settings,
    host_env: Option<Vec<(std::ffi::OsString, std::ffi::OsString)>>,
    durable: Option<host::bash::DurableJobs>,
) -> Result<Host> {
    let registry = JobRegistry::new(settings.registry_config()?, Default::default());
    let mount = Mount::new(runtime, registry.clone(), &settings.plugin_config_json())
        .await
        .context("invalid settings")?;
    let mut bash_config = settings.bash_config()?;
    bash_config.host_env = host_env;
    // A stream's file keeps what its spill file would, at least a mebibyte.
    bash_config.durable = durable.map(|durable| host::bash::DurableJobs {
        max_file_bytes: bash_config.limits.max_spill_bytes.max(1 << 20),
        ..durable
    });
    // A fenced job may neither read nor replace the compiled components the
    // next start runs as native code.
    bash_config
        .private_dirs
        .extend(cache_dir.map(Path::to_owned));
    // In the cache's directory, a fenced job's read rules stay few (see the
    // field).
    bash_config.fenced_spill_parent = cache_dir.map(Path::to_owned);
    let bash =
        BashProducer::new(registry, bash_config).context("setting up the background shell")?;
    Ok(Host {
        mount: Arc::new(mount),
        bash,
        shutdown_grace: settings.shutdown_grace(),
        mcp: McpOptions::default(),
    })
}

/// What a subcommand does once its host is set up.
type RunFuture = std::pin::Pin<Box<dyn std::future::Future<Output = Result<Ended>>>>;

/// How a subcommand's run ended.
enum Ended {
    /// Its work is done (or a person said `exit`).
    Done,
    /// As the signal of this number would have ended it: ctrl-c twice at the
    /// console's prompt (`SIGINT`), its terminal hung up (`SIGHUP`).
    BySignal(i32),
}

fn settings_with_file(file: Option<&Path>, flags: Settings) -> Result<Settings> {
    let base = match file {
        Some(path) => Settings::from_file(path)?,
        None => Settings::default(),
    };
    Ok(base.overridden_by(flags))
}

fn main() -> ExitCode {
    // A durable job's monitor is this binary too: it runs before anything
    // else (no runtime, no threads), as small as it can be.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args
        .get(1)
        .is_some_and(|a| a == host::bash::MONITOR_COMMAND)
    {
        std::process::exit(host::bash::run_monitor(&args[2..]));
    }
    if args.get(1).is_some_and(|a| a == host::bash::ZYGOTE_COMMAND) {
        std::process::exit(host::bash::run_zygote());
    }
    host_main()
}

#[tokio::main]
async fn host_main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let cache_dir = cli.cache_dir.clone().or_else(default_cache_dir);
    match is_daemon_command(&cli.command) {
        Ok(true) => {
            return match daemon_command(cli, cache_dir).await {
                Ok(code) => {
                    // Not a return: the runtime would wait for its blocking
                    // stdin reader.
                    use std::io::Write;
                    let _ = std::io::stdout().flush();
                    std::process::exit(i32::from(code));
                }
                Err(e) => {
                    eprintln!("jobs-host: {e:#}");
                    ExitCode::FAILURE
                }
            };
        }
        Ok(false) => {}
        Err(e) => {
            eprintln!("jobs-host: {e:#}");
            return ExitCode::FAILURE;
        }
    }
    let mut under_mcp = false;
    let mut mcp_options = McpOptions::default();
    let (settings, run): (Settings, fn(Host) -> RunFuture) = match cli.command {
        Command::Check { plugin } => return check(&plugin, cache_dir.as_deref()),
        Command::Wasm { out } => return write_wasm(&out),
        Command::Mcp {
            settings,
            structured_output,
            progress_interval_ms,
            no_tasks,
            claude_channel,
            claude_channel_idle_ms,
            durable: _,
        } => {
            under_mcp = true;
            mcp_options = McpOptions {
                structured_output,
                progress_interval: std::time::Duration::from_millis(progress_interval_ms),
                tasks: !no_tasks,
                claude_channel: claude_channel
                    .then(|| std::time::Duration::from_millis(claude_channel_idle_ms)),
            };
            let run: fn(Host) -> RunFuture = |h| Box::pin(mcp(h));
            (settings, run)
        }
        Command::Shell { settings, .. } => (settings, |h| Box::pin(shell(h))),
        Command::Tools { settings } => (settings, |h| Box::pin(tools(h))),
        Command::Daemon { .. }
        | Command::Ps { .. }
        | Command::Logs { .. }
        | Command::Kill { .. }
        | Command::Wait { .. } => unreachable!("handled above"),
    };
    let mut signals = match Signals::new() {
        Ok(signals) => signals,
        Err(e) => {
            eprintln!("jobs-host: cannot handle signals: {e}");
            return ExitCode::FAILURE;
        }
    };
    let host = async {
        let mut settings = settings_with_file(cli.config.as_deref(), settings)?;
        if under_mcp {
            settings = settings.with_mcp_wait_cap();
        }
        let mut host = host(cache_dir.as_deref(), settings).await?;
        host.mcp = mcp_options;
        Ok::<Host, anyhow::Error>(host)
    };
    let host = tokio::select! {
        host = host => host,
        signal = signals.next() => return ExitCode::from(128 + signal as u8),
    };
    let host = match host {
        Ok(host) => host,
        Err(e) => {
            eprintln!("jobs-host: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    let bash = host.bash.clone();
    let registry = host.mount.registry().clone();
    let grace = host.shutdown_grace;
    let result = tokio::select! {
        result = run(host) => result,
        signal = signals.next() => Ok(Ended::BySignal(signal)),
    };
    match result {
        Ok(Ended::Done) => {
            drop(bash);
            ExitCode::SUCCESS
        }
        Ok(Ended::BySignal(signal)) => {
            // The session (and every call in flight) is dropped by now: no new
            // call is accepted. Then every job's tree goes, and its spill files.
            tracing::info!("jobs-host: signal {signal}, shutting down");
            terminal::restore();
            bash.shutdown(grace).await;
            registry.dispose().await;
            // The last producer handle: its containment and spill files go now.
            drop(bash);
            // Not a return: the runtime would wait for its blocking stdin reader.
            std::process::exit(128 + signal);
        }
        Err(e) => {
            drop(bash);
            eprintln!("jobs-host: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn open_session(
    host: &Host,
    id: &str,
) -> (
    Session,
    tokio::sync::mpsc::UnboundedReceiver<(Lane, host::NoticeMessage)>,
) {
    Session::open(id, host.mount.clone(), host.bash.clone())
}

/// What `mcp` takes beyond the settings.
#[derive(Clone, Copy, Default)]
struct McpOptions {
    structured_output: bool,
    progress_interval: std::time::Duration,
    tasks: bool,
    claude_channel: Option<std::time::Duration>,
}

/// The MCP server of `session` on `mount`, with a front end's `options`.
async fn mcp_server(
    mount: &Mount,
    session: Arc<Session>,
    options: McpOptions,
) -> Result<JobsServer> {
    let prompt = mount.prompt_section().await?;
    Ok(
        JobsServer::new(session, prompt.map(|p| p.text), options.structured_output)
            .await?
            .with_progress_interval(options.progress_interval)
            .with_tasks(options.tasks)
            .with_claude_channel(options.claude_channel),
    )
}

async fn mcp(host: Host) -> Result<Ended> {
    let options = host.mcp;
    let (session, announced) = open_session(&host, "mcp-session");
    let server = mcp_server(&host.mount, Arc::new(session), options).await?;
    server
        .serve_io(mcp::Io::Stdio, announced, mcp::Leave::Close)
        .await?;
    Ok(Ended::Done)
}

async fn shell(host: Host) -> Result<Ended> {
    let (session, mut announced) = open_session(&host, "shell-session");
    let interactive = std::io::stdin().is_terminal();
    // What jobs wrote reaches the screen with its control characters shown, not
    // acted on; a transcript written to a file or a pipe stays byte for byte.
    let terminal = std::io::stdout().is_terminal();
    let show = move |text: &str| -> String {
        if terminal {
            console::for_terminal(text).into_owned()
        } else {
            text.to_owned()
        }
    };
    if interactive {
        terminal::say(
            "jobs-host shell: tool calls in, exactly what the model sees out. `help` lists the commands.",
        );
        // Notices that arrive while the prompt waits are shown as they come.
        let printer = reedline::ExternalPrinter::default();
        let sender = printer.sender();
        tokio::spawn(async move {
            while let Some((lane, notice)) = announced.recv().await {
                // Shown as it arrives; the model sees it before its next result.
                let line = show(&console::render_notice(lane, &notice).replacen(
                    "[notice via",
                    "[notice arrived via",
                    1,
                ));
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        let mut reader = terminal::LineReader::start(printer)?;
        let mut interrupted = false;
        let ended = loop {
            let line = match reader.read().await {
                terminal::Read::Line(line) => line,
                terminal::Read::Interrupt if interrupted => break Ended::BySignal(libc::SIGINT),
                terminal::Read::Interrupt => {
                    interrupted = true;
                    terminal::say("(ctrl-c again, ctrl-d or `exit` leaves the console)");
                    continue;
                }
                terminal::Read::End => break Ended::Done,
                terminal::Read::HungUp => break Ended::BySignal(libc::SIGHUP),
            };
            interrupted = false;
            let command = match console::parse(&line) {
                Ok(command) => command,
                Err(e) => {
                    terminal::say(&format!("? {e}"));
                    continue;
                }
            };
            // A call that waits (`wait`, a read with a timeout) ends with the
            // terminal too.
            let out = tokio::select! {
                out = console::run(&session, command) => out,
                () = reader.hung_up() => break Ended::BySignal(libc::SIGHUP),
            };
            match out {
                Some(out) if !out.is_empty() => terminal::say(&show(&out)),
                Some(_) => {}
                None => break Ended::Done,
            }
        };
        // Ended as by a signal, the jobs go as on a signal: all at once,
        // within the shutdown grace (see `host_main`).
        if let Ended::Done = ended {
            session.close().await;
        }
        return Ok(ended);
    } else {
        // A script: every line is echoed with its answer, so the transcript reads
        // like the model's side of the conversation. Notices are shown with the
        // results they precede; nobody reads them as they arrive, so the channel
        // goes (it would otherwise hold every notice of the session).
        drop(announced);
        let stdin = tokio::io::stdin();
        let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdin));
        while let Some(line) = lines.next_line().await? {
            match console::parse(&line) {
                Ok(console::Command::Nothing) => {}
                Ok(command) => {
                    println!("> {}", line.trim());
                    match console::run(&session, command).await {
                        Some(out) if !out.is_empty() => println!("{}", show(&out)),
                        Some(_) => {}
                        None => break,
                    }
                }
                Err(e) => {
                    session.close().await;
                    anyhow::bail!("{}: {e}", line.trim());
                }
            }
        }
    }
    session.close().await;
    Ok(Ended::Done)
}

async fn tools(host: Host) -> Result<Ended> {
    let (session, _announced) = open_session(&host, "tools");
    let mut tools = Vec::new();
    for def in session.tool_definitions().await? {
        let card = host
            .mount
            .ui_card(&def.name, CARD_ARGS)
            .await?
            .map(|c| json!({"title": c.title, "kind": c.kind, "rawInput": c.raw_input}));
        tools.push(json!({
            "name": def.name,
            "description": def.description,
            "inputSchema": serde_json::from_str::<serde_json::Value>(&def.input_schema)?,
            "outputSchema": def
                .output_schema
                .as_deref()
                .map(serde_json::from_str::<serde_json::Value>)
                .transpose()?,
            "card": card,
        }));
    }
    let prompt = host.mount.prompt_section().await?;
    let profile = host.mount.config().profile.as_str();
    let out = json!({
        "profile": profile,
        "tools": tools,
        "promptSection": prompt.map(|p| json!({"name": p.name, "order": p.order, "text": p.text})),
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    session.close().await;
    Ok(Ended::Done)
}

/// Sample arguments for the cards `tools` prints: each profile reads only its
/// own id key (`job_id`, `task_id` or `id`).
const CARD_ARGS: &str = r#"{"job_id":"<job_id>","task_id":"<task_id>","id":"<id>"}"#;

/// Exit codes: 0 runnable, 1 not runnable here, 2 unreadable.
fn check(path: &Path, cache_dir: Option<&Path>) -> ExitCode {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) => {
            eprintln!("jobs-host: cannot read {}: {e}", path.display());
            return ExitCode::from(2);
        }
    };
    let report = host::plugin::inspect_component(&bytes);
    let (imports, exports) = match report {
        Ok(found) => found,
        Err(e) => {
            println!(
                "{}: not a component this host can load: {e}",
                path.display()
            );
            return ExitCode::from(1);
        }
    };
    println!("{}", path.display());
    println!("imports:");
    for name in &imports {
        println!("  {name}");
    }
    println!("exports:");
    for name in &exports {
        println!("  {name}");
    }
    match PluginRuntime::from_component_bytes(&bytes, SandboxLimits::default(), cache_dir) {
        Ok(runtime) if runtime.imports_wasi() => {
            println!(
                "runnable: yes (world {}; its WASI imports get a deny-by-default context)",
                host::plugin::wit_interface("tool-jobs")
            );
            ExitCode::SUCCESS
        }
        Ok(_) => {
            println!(
                "runnable: yes (world {})",
                host::plugin::wit_interface("tool-jobs")
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("runnable: no: {e}");
            ExitCode::from(1)
        }
    }
}
