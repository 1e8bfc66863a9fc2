//! `jobs-host daemon`: the per-user process that owns durable sessions and
//! their jobs, and serves their clients on a Unix socket.
//!
//! The rooms, after pueue's daemon: here the daemon's state and its accept
//! loop; `idle` (idle exit as one guard type), `handshake` (a
//! connection's first exchange, and its JSON lines), `sessions` (a
//! session's state, attaching, leaving, the linger and the lease),
//! `recorder` (the journal's writer), `files` (the state directory's
//! files), `adopt` (jobs a dead daemon left), `front_end` (MCP or the
//! console on a session) and `requests` (`ps`, `logs`, `kill`, `wait`),
//! which `view` (a plain `jobs-host mcp`'s socket for `top`) also serves.

mod adopt;
mod files;
mod front_end;
pub(super) mod handshake;
mod idle;
mod recorder;
mod requests;
mod sessions;
pub mod view;

use std::collections::HashMap;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio_util::sync::CancellationToken;

use host::PluginRuntime;

use super::journal::Journal;
use crate::signals::Signals;
use files::{StateFiles, remove_stale_sessions};
pub(super) use handshake::is_a_job;
use idle::Inactivity;
use sessions::Durable;

/// How long a daemon with no session and no connection stays before it
/// exits: long enough for a client that started it to connect, or for a
/// person's `ps` right after the last session ended.
const IDLE_EXIT: Duration = Duration::from_secs(5);

/// The most sessions one daemon keeps at once.
const MAX_SESSIONS: usize = 64;

/// The daemon.
struct Daemon {
    runtime: Arc<PluginRuntime>,
    cache_dir: Option<PathBuf>,
    /// Held while a session is opened, so two clients of one key make one.
    sessions: tokio::sync::Mutex<HashMap<String, Arc<Durable>>>,
    /// What keeps it from exiting idle: its connections and sessions.
    inactivity: Arc<Inactivity>,
    /// Cancelled to end the daemon.
    stop: CancellationToken,
    /// Where sessions and jobs are recorded; `None` without a state directory.
    journal: Option<Arc<Journal>>,
    /// The state directory (the journal's, and the jobs' files); `None`
    /// without one, and then jobs die with the daemon.
    state: Option<PathBuf>,
    /// Numbers the sessions' directories.
    next_session: AtomicU64,
    /// Its spare job files and its monitors' program.
    files: Arc<StateFiles>,
}

/// Serves until stopped: a signal, `jobs-host daemon --stop`, or no session
/// and no connection for [`IDLE_EXIT`]. A second daemon of the same user
/// exits at once with success, saying so.
///
/// # Errors
///
/// A runtime directory that is not private, a socket that cannot be made, or
/// a component that does not load.
pub async fn run(cache_dir: Option<PathBuf>) -> Result<u8> {
    if is_a_job(std::process::id() as i32) {
        bail!(
            "a background job may not run the daemon of durable sessions (it would end with the job)"
        );
    }
    let dir = super::runtime_dir();
    super::private_dir(&dir)?;
    let lock_path = super::lock_path(&dir);
    let mut lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&lock_path)
        .with_context(|| format!("cannot open {}", lock_path.display()))?;
    if rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_err() {
        let pid = std::fs::read_to_string(&lock_path).unwrap_or_default();
        println!(
            "jobs-host: a daemon already runs for this user (pid {}) on {}",
            pid.trim(),
            super::socket_path(&dir).display()
        );
        return Ok(0);
    }
    {
        use std::io::Write;
        lock.set_len(0)?;
        writeln!(lock, "{}", std::process::id())?;
    }
    // The log is this daemon's now: one grown past 1 MiB starts afresh (its
    // writers append, so they go on at the new end).
    let log = dir.join("daemon.log");
    if std::fs::metadata(&log).is_ok_and(|m| m.len() > super::MAX_LOG_BYTES)
        && let Ok(file) = std::fs::OpenOptions::new().write(true).open(&log)
    {
        let _ = file.set_len(0);
    }
    // Loaded before the socket is there, so a client that connects can be
    // served at once, and one whose daemon cannot load it finds no socket
    // and reads the log.
    let runtime = crate::wiring::load_runtime(cache_dir.as_deref())?;
    // A journal that is not ours, or broken, stops the daemon here: it is
    // never overwritten.
    let state = super::journal::state_dir();
    let journal = match &state {
        Some(state) => Some(Arc::new(Journal::open(
            state,
            std::process::id(),
            host::registry::now_ms(),
        )?)),
        None => {
            eprintln!(
                "jobs-host daemon: no XDG_STATE_HOME or HOME: nothing is journaled, and jobs end with the daemon"
            );
            None
        }
    };
    // The monitors' program, held from now on, and the spare job files
    // (only where jobs are journaled).
    let files = Arc::new(StateFiles::open(journal.as_ref().and(state.as_deref())));
    if let (Some(state), Some(journal)) = (&state, &journal) {
        remove_stale_sessions(state, journal, &files);
    }
    // The lock says no daemon listens: a socket left here is stale.
    let socket = super::socket_path(&dir);
    match std::fs::remove_file(&socket) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("cannot remove {}", socket.display())),
    }
    let listener = tokio::net::UnixListener::bind(&socket)
        .with_context(|| format!("cannot listen on {}", socket.display()))?;
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))?;
    let daemon = Arc::new(Daemon {
        runtime,
        cache_dir,
        sessions: tokio::sync::Mutex::new(HashMap::new()),
        inactivity: Inactivity::new(IDLE_EXIT),
        stop: CancellationToken::new(),
        journal,
        state,
        next_session: AtomicU64::new(1),
        files,
    });
    tokio::spawn(daemon.clone().renew_leases());
    let mut signals = Signals::new().context("cannot handle signals")?;
    eprintln!(
        "jobs-host daemon: pid {} on {}",
        std::process::id(),
        socket.display()
    );
    let idle = daemon.inactivity.clone();
    let idle = idle.idle();
    tokio::pin!(idle);
    let code: i32 = loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let daemon = daemon.clone();
                    let activity = daemon.inactivity.activity();
                    tokio::spawn(async move {
                        let _activity = activity;
                        daemon.connection(stream).await;
                    });
                }
                Err(e) => tracing::warn!("jobs-host daemon: accept failed: {e}"),
            },
            signal = signals.next() => break 128 + signal,
            () = daemon.stop.cancelled() => break 0,
            () = &mut idle => {
                eprintln!("jobs-host daemon: no session left; exiting");
                break 0;
            }
        }
    };
    // No new client from here on; then every session's jobs go.
    drop(listener);
    let _ = std::fs::remove_file(&socket);
    daemon.end_all().await;
    // The lock file stays: unlinked, a daemon starting now could lock the
    // old file while another locks a new one.
    drop(lock);
    // Not a return: the runtime would wait for blocked readers.
    std::process::exit(code);
}
