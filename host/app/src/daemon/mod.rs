//! Durable sessions: one daemon per user owns the jobs, and `mcp --session`
//! and `shell --session` connect to it over a Unix socket, so a client that
//! restarts finds its session's jobs still running (see the book's
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
mod paths;
mod protocol;
pub mod server;

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};

pub use paths::{lock_path, locked, ours, private_dir, runtime_dir, socket_path};
pub use protocol::{Hello, Kind, MAX_HELLO_BYTES, McpWire, PROTOCOL, Request};

/// The most bytes of a session key.
pub const MAX_KEY_BYTES: usize = 1024;

/// A `daemon.log` past this size is started afresh by the next daemon.
pub const MAX_LOG_BYTES: u64 = 1 << 20;

/// Default time a session with no connection is kept, with its jobs.
pub const DEFAULT_LINGER: Duration = Duration::from_secs(30 * 60);

/// The longest linger a session may ask for: a week.
pub const MAX_LINGER: Duration = Duration::from_secs(7 * 24 * 3600);

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
}
