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
//! [`ray`] runs jobs on a Ray cluster through its dashboard's job API;
//! [`slurm`] runs them as batch jobs of a Slurm cluster through its
//! commands.

pub mod ray;
mod shared;
pub mod slurm;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::owner::Owner;
use crate::producer::CommandProducer;
use crate::registry::StartError;

/// A job on an engine as a previous host recorded it, for the next to take
/// on (a durable session's daemon killed while it ran).
#[derive(Debug, Clone)]
pub struct RemoteAdopt {
    /// Its id (`bash-3`), kept.
    pub id: String,
    /// Its label.
    pub label: String,
    /// Its start, epoch ms.
    pub started_at: u64,
    /// The engine's id for it (Ray's submission id, Slurm's job id).
    pub submission_id: String,
    /// The file the old host kept for it in the session's directory: the
    /// copy of its log (Ray), or where its output files are (Slurm).
    pub copy: PathBuf,
    /// How far the model had read stdout and stderr, in bytes.
    pub cursors: [u64; 2],
    /// Whether the model had seen its end or been told of it: no notice
    /// then.
    pub end_seen: bool,
    /// Its status and detail as the old host recorded them, when not
    /// `running`: an end it recorded is the job's, and `stopping` means it
    /// was being killed.
    pub recorded: Option<(String, Option<String>)>,
}

impl RemoteAdopt {
    /// The end its old host recorded, if it recorded one.
    pub fn recorded_end(&self) -> Option<crate::registry::JobOutcome> {
        self.recorded.as_ref().and_then(|(status, detail)| {
            crate::registry::JobOutcome::recorded(status, detail.as_deref())
        })
    }
}

/// What taking a job on found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resumed {
    /// The old host had not seen its end: it is followed on the engine.
    Following,
    /// The old host recorded its end: its output is read, nothing asked of
    /// the engine.
    Ended,
}

/// A runner of either engine, as a host holds them.
#[derive(Clone)]
pub enum Runner {
    /// Jobs on a Ray head.
    Ray(ray::RayRunner),
    /// Jobs on a Slurm cluster.
    Slurm(slurm::SlurmRunner),
}

impl Runner {
    /// The name a start gives.
    pub fn name(&self) -> &str {
        match self {
            Runner::Ray(runner) => runner.name(),
            Runner::Slurm(runner) => runner.name(),
        }
    }

    /// Takes on `job`, which a previous host started on this runner's
    /// engine, for `owner`, under its old id.
    ///
    /// # Errors
    ///
    /// Its kept file cannot be read, or the registry refuses it; the job on
    /// the engine is left as it is.
    pub fn resume(&self, owner: Option<Owner>, job: RemoteAdopt) -> Result<Resumed, StartError> {
        // Each engine keeps its own kind of file: a name given to a runner
        // of the other engine since is not the job's runner.
        let kept = job.copy.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let ours = match self {
            Runner::Ray(_) => kept.starts_with("remote-"),
            Runner::Slurm(_) => kept.starts_with("slurm-"),
        };
        if !ours {
            return Err(StartError::Producer(format!(
                "runner {}: job {} ran on an engine of another kind under that name",
                self.name(),
                job.submission_id
            )));
        }
        match self {
            Runner::Ray(runner) => runner.resume(owner, job),
            Runner::Slurm(runner) => runner.resume(owner, job),
        }
    }

    /// The runner as the start tool's producer.
    pub fn producer(&self) -> Arc<dyn CommandProducer> {
        match self {
            Runner::Ray(runner) => Arc::new(runner.clone()),
            Runner::Slurm(runner) => Arc::new(runner.clone()),
        }
    }
}

/// A runner as the operator names it: `NAME=ADDRESS` for a Ray head (for
/// example `ray=http://127.0.0.1:8265`, its dashboard), or `slurm`,
/// `slurm:PARTITION`, `NAME=slurm` or `NAME=slurm:PARTITION` for the Slurm
/// cluster this machine submits to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerSpec {
    /// The name a start gives (`runner: "ray"`).
    pub name: String,
    /// The engine and where it is.
    pub engine: Engine,
}

/// The engine a runner runs its jobs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Engine {
    /// A Ray head's dashboard, `http://HOST:PORT` without a trailing `/`.
    Ray {
        /// The dashboard's address.
        address: String,
    },
    /// The Slurm cluster this machine's `sbatch` submits to.
    Slurm {
        /// The partition jobs go to (`None`: the cluster's default).
        partition: Option<String>,
    },
}

impl std::str::FromStr for RunnerSpec {
    type Err = String;

    /// Parses a runner: a name of letters, digits, `-` and `_` (at most 64
    /// bytes) and its engine, `slurm[:PARTITION]` or a plain `http://`
    /// address of a Ray head (a head is reached on its own network or
    /// through a tunnel); `slurm[:PARTITION]` alone is named `slurm`.
    fn from_str(text: &str) -> Result<RunnerSpec, String> {
        let (name, address) = match text.split_once('=') {
            Some(pair) => pair,
            None if text == "slurm" || text.starts_with("slurm:") => ("slurm", text),
            None => {
                return Err(format!(
                    "a runner is NAME=http://HOST:PORT (a Ray head, for example ray=http://127.0.0.1:8265) or slurm[:PARTITION], got {text:?}"
                ));
            }
        };
        let fits = |word: &str| {
            !word.is_empty()
                && word.len() <= 64
                && word
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        };
        if !fits(name) {
            return Err(format!(
                "a runner's name is 1 to 64 letters, digits, - or _, got {name:?}"
            ));
        }
        if address == "slurm" || address.starts_with("slurm:") {
            let partition = address.strip_prefix("slurm:").map(str::to_owned);
            if let Some(partition) = &partition
                && !fits(partition)
            {
                return Err(format!(
                    "runner {name}: a Slurm partition is 1 to 64 letters, digits, - or _, got {partition:?}"
                ));
            }
            return Ok(RunnerSpec {
                name: name.to_owned(),
                engine: Engine::Slurm { partition },
            });
        }
        let address = address.trim_end_matches('/');
        let host = address.strip_prefix("http://").ok_or_else(|| {
            if address.starts_with("https://") {
                format!(
                    "runner {name}: https engine addresses are not supported; reach the head over plain http on its network or through a tunnel (ssh -L 8265:localhost:8265 ...), got {address}"
                )
            } else {
                format!(
                    "runner {name}: the engine must be slurm[:PARTITION] or an address that starts with http://, got {address:?}"
                )
            }
        })?;
        if host.is_empty() || host.contains(['/', '?', '#', ' ']) {
            return Err(format!(
                "runner {name}: the address must be http://HOST:PORT, got {address:?}"
            ));
        }
        Ok(RunnerSpec {
            name: name.to_owned(),
            engine: Engine::Ray {
                address: address.to_owned(),
            },
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

/// Six hex digits from the kernel's random source (the time and pid when it
/// cannot be read).
pub(crate) fn random_hex() -> String {
    use std::io::Read;
    let mut bytes = [0u8; 3];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if read.is_err() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        bytes = (now ^ std::process::id()).to_le_bytes()[..3]
            .try_into()
            .unwrap_or_default();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runner_is_a_name_and_a_plain_http_address() {
        let spec: RunnerSpec = "ray=http://127.0.0.1:8265/".parse().unwrap();
        assert_eq!(spec.name, "ray");
        assert_eq!(
            spec.engine,
            Engine::Ray {
                address: "http://127.0.0.1:8265".into()
            }
        );
        for bad in [
            "ray",
            "=http://x:1",
            "r y=http://x:1",
            "ray=127.0.0.1:8265",
            "ray=http://",
            "ray=http://x:1/api",
            "slurm:",
            "slurm:a b",
            "hpc=slurm:",
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
    fn a_slurm_runner_is_named_slurm_unless_named() {
        let cases = [
            ("slurm", "slurm", None),
            ("slurm:gpu", "slurm", Some("gpu")),
            ("hpc=slurm", "hpc", None),
            ("hpc=slurm:debug", "hpc", Some("debug")),
        ];
        for (text, name, partition) in cases {
            let spec: RunnerSpec = text.parse().unwrap();
            assert_eq!(spec.name, name, "{text}");
            assert_eq!(
                spec.engine,
                Engine::Slurm {
                    partition: partition.map(str::to_owned)
                },
                "{text}"
            );
        }
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
