//! `jobs-host`: background jobs for LLM agents, through the tool-jobs component.
//!
//! - `mcp`: an MCP server over stdio (one connection, one owner), or with
//!   `--session` a durable session of the user's daemon;
//! - `shell`: type tool calls and see exactly what the model would see;
//! - `daemon`, `ps`, `logs`, `kill`, `wait`: the daemon of durable sessions
//!   and a person's view of their jobs;
//! - `tools`: the tool definitions, UI cards and prompt section as JSON;
//! - `check`: whether this host can run a given plugin component.
//!
//! This file is dispatch: the flags are in `cli`, the wiring of a host in
//! `wiring`, each subcommand in `commands/`, and the end of a run (a
//! signal, or a console ended as by one) here.

use std::process::ExitCode;

mod cli;
mod commands;
mod console;
mod daemon;
mod mcp;
mod settings;
mod signals;
mod terminal;
mod wiring;

use clap::Parser;
use host::producer::CommandProducer;

use cli::{Cli, Command};
use commands::{Ended, RunFuture};
use settings::Settings;
use signals::Signals;
use wiring::{Host, McpOptions, default_cache_dir, host, settings_with_file};

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
    match commands::is_daemon_command(&cli.command) {
        Ok(true) => {
            return match commands::daemon_command(cli, cache_dir).await {
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
        Command::Check { plugin, json } => {
            return commands::check(&plugin, cache_dir.as_deref(), json);
        }
        Command::Wasm { out } => return commands::write_wasm(&out),
        Command::Completions { shell } => return completions(shell),
        Command::Man => {
            use clap::CommandFactory;
            return match clap_mangen::Man::new(Cli::command()).render(&mut std::io::stdout()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("jobs-host: cannot write the man page: {e}");
                    ExitCode::FAILURE
                }
            };
        }
        Command::CheckRunner {
            name,
            json,
            settings,
        } => {
            return match settings_with_file(cli.config.as_deref(), settings) {
                Ok(settings) => commands::check_runner(&name, &settings, json).await,
                Err(e) => {
                    eprintln!("jobs-host: {e:#}");
                    ExitCode::from(2)
                }
            };
        }
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
            let run: fn(Host) -> RunFuture = |h| Box::pin(commands::mcp(h));
            (settings, run)
        }
        Command::Shell { settings, .. } => (settings, |h| Box::pin(commands::shell(h))),
        Command::Tools { settings } => (settings, |h| Box::pin(commands::tools(h))),
        Command::Daemon { .. }
        | Command::Ps { .. }
        | Command::Logs { .. }
        | Command::Kill { .. }
        | Command::Top
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
    // Every producer of the host, for its shutdown: the shell and the runners.
    let bash = host.producer();
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

/// Prints the completion script for `shell`.
fn completions(shell: clap_complete::Shell) -> ExitCode {
    use clap::CommandFactory;
    use std::io::Write;
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "jobs-host", &mut script);
    if shell == clap_complete::Shell::Bash {
        // clap_complete's bash script spells a hyphenated binary's states
        // two ways (the loop `jobs__host__subcmd__ps`, the case arms
        // `jobs__subcmd__host__subcmd__ps`; clap-rs/clap#6421), so no
        // subcommand's options would complete: the arms are spelt as the
        // loop spells them.
        let text = String::from_utf8_lossy(&script).replace("jobs__subcmd__host", "jobs__host");
        script = text.into_bytes();
    }
    match std::io::stdout().write_all(&script) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("jobs-host: cannot write the completion script: {e}");
            ExitCode::FAILURE
        }
    }
}
