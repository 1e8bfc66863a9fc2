//! The subcommands that talk to the user's daemon instead of running a host
//! here: `daemon`, `ps`, `logs`, `kill`, `wait`, and `mcp`/`shell` with
//! `--session`.

use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::cli::{Cli, Command};
use crate::daemon;
use crate::settings::Settings;
use crate::wiring::settings_with_file;

/// The first line a session client sends its daemon: the session's key and
/// settings, resolved here (relative paths against this directory).
pub(crate) fn session_hello(
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
pub(crate) async fn daemon_command(cli: Cli, cache_dir: Option<PathBuf>) -> Result<u8> {
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
        Command::Kill { session, json, id } => daemon::client::kill(id, session, json).await,
        Command::Top => daemon::client::top().await,
        Command::Wait { session, json, id } => daemon::client::wait(id, session, json).await,
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
        Command::Check { .. }
        | Command::CheckRunner { .. }
        | Command::Wasm { .. }
        | Command::Completions { .. }
        | Command::Man
        | Command::Tools { .. } => {
            unreachable!("not a daemon command")
        }
    }
}

/// Whether `command` goes to the daemon: a durable session, or the
/// daemon's own commands.
pub(crate) fn is_daemon_command(command: &Command) -> Result<bool> {
    Ok(match command {
        Command::Daemon { .. }
        | Command::Ps { .. }
        | Command::Logs { .. }
        | Command::Kill { .. }
        | Command::Top
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
