//! Runners: producers that run the start tool's commands on an existing
//! cluster engine instead of this host, behind the same job handle, read
//! cursor, kill and notice (feature `runners`). We schedule nothing
//! ourselves: the engine does, and a runner keeps what the engine lacks
//! (our ids, the cursor, exactly-once notices, who asked for a stop).
//!
//! A runner stands on the producer seam ([`crate::producer`]) as the shell
//! producer does: a start registers a job whose output is pumped from the
//! engine into a capture, whose kill asks the engine to stop it, and whose
//! end is decided by the engine's status, never by a stream closing.
//!
//! [`ray`] runs jobs on a Ray cluster through its dashboard's job API.

pub mod ray;

use std::path::{Path, PathBuf};

/// A runner as the operator names it: `NAME=ADDRESS`, for example
/// `ray=http://127.0.0.1:8265` (a Ray head's dashboard).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerSpec {
    /// The name a start gives (`runner: "ray"`).
    pub name: String,
    /// The engine's address, without a trailing `/`.
    pub address: String,
}

impl std::str::FromStr for RunnerSpec {
    type Err = String;

    /// Parses `NAME=ADDRESS`: a name of letters, digits, `-` and `_` (at most
    /// 64 bytes), and a plain `http://` address (a head is reached on its own
    /// network or through a tunnel).
    fn from_str(text: &str) -> Result<RunnerSpec, String> {
        let Some((name, address)) = text.split_once('=') else {
            return Err(format!(
                "a runner is NAME=ADDRESS (for example ray=http://127.0.0.1:8265), got {text:?}"
            ));
        };
        let fits = !name.is_empty()
            && name.len() <= 64
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !fits {
            return Err(format!(
                "a runner's name is 1 to 64 letters, digits, - or _, got {name:?}"
            ));
        }
        let address = address.trim_end_matches('/');
        let host = address.strip_prefix("http://").ok_or_else(|| {
            if address.starts_with("https://") {
                format!(
                    "runner {name}: https engine addresses are not supported; reach the head over plain http on its network or through a tunnel (ssh -L 8265:localhost:8265 ...), got {address}"
                )
            } else {
                format!("runner {name}: the address must start with http://, got {address:?}")
            }
        })?;
        if host.is_empty() || host.contains(['/', '?', '#', ' ']) {
            return Err(format!(
                "runner {name}: the address must be http://HOST:PORT, got {address:?}"
            ));
        }
        Ok(RunnerSpec {
            name: name.to_owned(),
            address: address.to_owned(),
        })
    }
}

/// A token for an engine, and where it was found (said in errors; the token
/// itself never is).
#[derive(Clone)]
pub struct Token {
    /// The token.
    pub value: String,
    /// Where it came from: `RAY_AUTH_TOKEN`, a file's path.
    pub source: String,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

/// Where a Ray token is looked for, in Ray's own clients' order, for
/// errors that say so.
pub const RAY_TOKEN_PLACES: &str = "RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH, ~/.ray/auth_token";

/// The Ray token, as Ray's own clients find it: `RAY_AUTH_TOKEN`, else the
/// file `RAY_AUTH_TOKEN_PATH` names, else `~/.ray/auth_token`; `None` when
/// there is none (an open cluster).
///
/// # Errors
///
/// A token file that is named but cannot be read.
pub fn ray_token() -> Result<Option<Token>, String> {
    if let Some(value) = std::env::var("RAY_AUTH_TOKEN")
        .ok()
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
    {
        return Ok(Some(Token {
            value,
            source: "RAY_AUTH_TOKEN".to_owned(),
        }));
    }
    if let Some(path) = std::env::var_os("RAY_AUTH_TOKEN_PATH").filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        return read_token(&path).map(Some).map_err(|e| {
            format!(
                "cannot read the Ray token at {} (RAY_AUTH_TOKEN_PATH): {e}",
                path.display()
            )
        });
    }
    let Some(home) = std::env::var_os("HOME") else {
        return Ok(None);
    };
    let path = Path::new(&home).join(".ray/auth_token");
    match read_token(&path) {
        Ok(token) => Ok(Some(token)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!(
            "cannot read the Ray token at {}: {e}",
            path.display()
        )),
    }
}

fn read_token(path: &Path) -> std::io::Result<Token> {
    let value = std::fs::read_to_string(path)?.trim().to_owned();
    if value.is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "the file is empty",
        ));
    }
    Ok(Token {
        value,
        source: path.display().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runner_is_a_name_and_a_plain_http_address() {
        let spec: RunnerSpec = "ray=http://127.0.0.1:8265/".parse().unwrap();
        assert_eq!(spec.name, "ray");
        assert_eq!(spec.address, "http://127.0.0.1:8265");
        for bad in [
            "ray",
            "=http://x:1",
            "r y=http://x:1",
            "ray=127.0.0.1:8265",
            "ray=http://",
            "ray=http://x:1/api",
        ] {
            assert!(bad.parse::<RunnerSpec>().is_err(), "{bad}");
        }
        let https = "ray=https://head:8265".parse::<RunnerSpec>().unwrap_err();
        assert!(
            https.contains("https engine addresses are not supported"),
            "{https}"
        );
    }

    #[test]
    fn a_token_says_where_it_came_from_never_what_it_is() {
        let token = Token {
            value: "s3cret".into(),
            source: "RAY_AUTH_TOKEN".into(),
        };
        assert!(!format!("{token:?}").contains("s3cret"));
    }
}
