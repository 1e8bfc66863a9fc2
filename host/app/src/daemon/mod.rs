//! Durable sessions: one daemon per user owns the jobs, and `mcp --session`
//! and `shell --session` connect to it over a Unix socket, so a client that
//! restarts finds its session's jobs still running (see the README's
//! "Durable sessions").
//!
//! On the socket, each connection starts with one JSON line from the client
//! (a [`Hello`]) and one from the daemon (`{"ok":true}` or
//! `{"error":"..."}`). After that an `mcp` connection carries MCP's own
//! newline-delimited JSON-RPC, a `shell` connection console lines and their
//! answers, and a control connection (`ps`, `logs`, `kill`, `wait`, `stop`)
//! the answers to its one request.

pub mod client;
pub mod journal;
pub mod server;

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::settings::Settings;

/// The version of the socket's protocol; a daemon refuses any other.
pub const PROTOCOL: u32 = 1;

/// The most bytes of a client's first line (its hello) or of one shell line.
pub const MAX_HELLO_BYTES: usize = 1 << 20;

/// The most bytes of a session key.
pub const MAX_KEY_BYTES: usize = 1024;

/// A `daemon.log` past this size is started afresh by the next daemon.
pub const MAX_LOG_BYTES: u64 = 1 << 20;

/// Default time a session with no connection is kept, with its jobs.
pub const DEFAULT_LINGER: Duration = Duration::from_secs(30 * 60);

/// The longest linger a session may ask for: a week.
pub const MAX_LINGER: Duration = Duration::from_secs(7 * 24 * 3600);

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

/// Where this user's daemon listens: `$XDG_RUNTIME_DIR/jobs-host`, or
/// `/tmp/jobs-host-<uid>` without one.
pub fn runtime_dir() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("jobs-host"),
        // SAFETY: geteuid has no preconditions.
        None => PathBuf::from(format!("/tmp/jobs-host-{}", unsafe { libc::geteuid() })),
    }
}

/// The daemon's socket in `dir`.
pub fn socket_path(dir: &Path) -> PathBuf {
    dir.join("daemon.sock")
}

/// The file the daemon holds locked while it runs, with its pid.
pub fn lock_path(dir: &Path) -> PathBuf {
    dir.join("daemon.lock")
}

/// Makes `dir` if it is missing (mode 0700), and checks that it is this
/// user's and nobody else's: a directory (not a link), owned by this uid,
/// with no access for group or others. Another user's directory, or one
/// others may write, is refused, never changed.
///
/// # Errors
///
/// A directory that cannot be made, or one that is not private.
pub fn private_dir(dir: &Path) -> Result<()> {
    match std::fs::DirBuilder::new()
        .mode(0o700)
        .recursive(true)
        .create(dir)
    {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e).with_context(|| format!("cannot make {}", dir.display())),
    }
    let meta =
        std::fs::symlink_metadata(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    if !meta.is_dir() {
        bail!("{} is not a directory; refusing to use it", dir.display());
    }
    ours(dir, &meta)?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        bail!(
            "{} has mode {mode:04o}: others may reach it; refusing to use it (chmod 700 it)",
            dir.display()
        );
    }
    Ok(())
}

/// Refuses `path` (described by `meta`) unless this user owns it.
///
/// # Errors
///
/// Another user's file or directory.
pub fn ours(path: &Path, meta: &std::fs::Metadata) -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    if meta.uid() != uid {
        bail!(
            "{} belongs to uid {}, not to this user (uid {uid}); refusing to use it",
            path.display(),
            meta.uid()
        );
    }
    Ok(())
}

/// Whether some process holds the lock file `path` now (a daemon's).
pub fn locked(path: &Path) -> bool {
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    // SAFETY: flock on a descriptor we own; closing it lets go.
    unsafe {
        libc::flock(
            std::os::fd::AsRawFd::as_raw_fd(&file),
            libc::LOCK_SH | libc::LOCK_NB,
        ) != 0
    }
}

/// Checks a session key: 1 to [`MAX_KEY_BYTES`] bytes, no control characters.
///
/// # Errors
///
/// What is wrong with it.
pub fn check_key(key: &str) -> Result<()> {
    if key.is_empty() {
        bail!("the session key is empty");
    }
    if key.len() > MAX_KEY_BYTES {
        bail!(
            "the session key is {} bytes; at most {MAX_KEY_BYTES}",
            key.len()
        );
    }
    if key.chars().any(char::is_control) {
        bail!("the session key has a control character");
    }
    Ok(())
}

/// The session key when none is given: the working directory, canonical
/// (`--workdir`, else the current one), so every client started in one
/// project shares one session.
///
/// # Errors
///
/// A working directory that does not exist.
pub fn default_key(workdir: Option<&Path>) -> Result<String> {
    let dir = match workdir {
        Some(dir) => dir.to_owned(),
        None => std::env::current_dir().context("no current directory")?,
    };
    let dir = dir
        .canonicalize()
        .with_context(|| format!("the working directory {}", dir.display()))?;
    match dir.to_str() {
        Some(key) => Ok(key.to_owned()),
        None => bail!(
            "the working directory {} is not UTF-8: give --session KEY",
            dir.display()
        ),
    }
}

/// Parses a duration as `500ms`, `90s`, `30m` or `2h`.
///
/// # Errors
///
/// Anything else, or more than [`MAX_LINGER`].
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("expected a duration such as 90s or 30m, got {text:?}"))?;
    let unit_ms: u64 = match unit {
        "ms" => 1,
        "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => {
            return Err(format!(
                "expected a duration such as 90s or 30m (units ms, s, m, h), got {text:?}"
            ));
        }
    };
    let ms = number
        .checked_mul(unit_ms)
        .filter(|ms| *ms <= MAX_LINGER.as_millis() as u64)
        .ok_or_else(|| format!("{text:?} is longer than a week"))?;
    Ok(Duration::from_millis(ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_have_units_and_a_bound() {
        assert_eq!(parse_duration("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_duration("30").is_err());
        assert!(parse_duration("m").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("8d").is_err());
        assert!(parse_duration("169h").is_err());
        assert!(parse_duration("99999999999999999999h").is_err());
    }

    #[test]
    fn keys_are_bounded_and_printable() {
        assert!(check_key("/home/me/project").is_ok());
        assert!(check_key("").is_err());
        assert!(check_key("a\nb").is_err());
        assert!(check_key(&"k".repeat(MAX_KEY_BYTES + 1)).is_err());
    }

    #[test]
    fn a_directory_others_can_reach_is_refused() {
        let base = std::env::temp_dir().join(format!("jobs-host-dir-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        private_dir(&base).unwrap();
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).unwrap();
        let refused = private_dir(&base).unwrap_err().to_string();
        assert!(refused.contains("mode 0755"), "{refused}");
        // Refused, not repaired.
        let mode = std::fs::metadata(&base).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o755);
        std::fs::remove_dir_all(&base).unwrap();
    }
}
