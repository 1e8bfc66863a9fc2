//! The sandbox's policy values: what a job may write and reach, and the
//! policy every job of a producer runs under. Plain data on the ground floor:
//! the registry records a job's sandbox and the plugin carries it across the
//! WIT boundary without either knowing the fence that enforces it
//! (`producers/fence`).

use std::path::PathBuf;

/// What a job may do to files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FsAccess {
    /// Whatever its user may (no file fence).
    #[default]
    Full,
    /// Read everything readable but the host's and other jobs' private
    /// directories; write the workdir, the job's `TMPDIR` and the operator's
    /// paths, except the protected paths in them.
    WorkspaceWrite,
    /// As `WorkspaceWrite`, without the workdir.
    ReadOnly,
}

impl FsAccess {
    /// The spelling of flags and config keys: `full`, `workspace-write`,
    /// `read-only`.
    pub fn as_str(self) -> &'static str {
        match self {
            FsAccess::Full => "full",
            FsAccess::WorkspaceWrite => "workspace-write",
            FsAccess::ReadOnly => "read-only",
        }
    }

    /// Parses [`FsAccess::as_str`]'s spelling.
    ///
    /// # Errors
    ///
    /// Any other word, with the three that are known.
    pub fn parse(word: &str) -> Result<FsAccess, String> {
        match word {
            "full" => Ok(FsAccess::Full),
            "workspace-write" => Ok(FsAccess::WorkspaceWrite),
            "read-only" => Ok(FsAccess::ReadOnly),
            other => Err(format!(
                "unknown sandbox \"{other}\" (known: full, workspace-write, read-only)"
            )),
        }
    }
}

/// What a job may reach on the network.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum NetAccess {
    /// Anything (no network fence).
    #[default]
    On,
    /// Nothing but Unix sockets.
    Off,
    /// TCP connect and bind to these ports only (UDP is not fenced).
    Ports(Vec<u16>),
}

impl NetAccess {
    /// Parses `on`, `off` or `ports:80,443`.
    ///
    /// # Errors
    ///
    /// Any other word, or a port that is not a number from 1 to 65535.
    pub fn parse(word: &str) -> Result<NetAccess, String> {
        match word {
            "on" => Ok(NetAccess::On),
            "off" => Ok(NetAccess::Off),
            _ => {
                let Some(list) = word.strip_prefix("ports:") else {
                    return Err(format!(
                        "unknown sandbox network \"{word}\" (known: on, off, ports:PORT,...)"
                    ));
                };
                let ports = list
                    .split(',')
                    .map(|p| match p.trim().parse::<u16>() {
                        Ok(port) if port > 0 => Ok(port),
                        _ => Err(format!(
                            "invalid sandbox port \"{p}\": expected a number from 1 to 65535"
                        )),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(NetAccess::Ports(ports))
            }
        }
    }

    /// The network part in a few words: `network off`.
    pub fn describe(&self) -> String {
        match self {
            NetAccess::On => "network on".to_owned(),
            NetAccess::Off => "network off".to_owned(),
            NetAccess::Ports(ports) => format!(
                "network ports {}",
                ports
                    .iter()
                    .map(u16::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        }
    }
}

/// The sandbox one job runs in: what it may write and reach.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Sandbox {
    /// Files.
    pub fs: FsAccess,
    /// Network.
    pub network: NetAccess,
}

impl Sandbox {
    /// Whether this is no fence at all.
    pub fn is_open(&self) -> bool {
        self.fs == FsAccess::Full && self.network == NetAccess::On
    }

    /// Whether a job in `self` may do at most what one in `wider` may.
    pub fn within(&self, wider: &Sandbox) -> bool {
        let rank = |fs: FsAccess| match fs {
            FsAccess::ReadOnly => 0,
            FsAccess::WorkspaceWrite => 1,
            FsAccess::Full => 2,
        };
        let network = match (&self.network, &wider.network) {
            (_, NetAccess::On) | (NetAccess::Off, _) => true,
            (NetAccess::Ports(a), NetAccess::Ports(b)) => a.iter().all(|p| b.contains(p)),
            _ => false,
        };
        rank(self.fs) <= rank(wider.fs) && network
    }

    /// The sandbox in a few words: `workspace-write, network off`.
    pub fn describe(&self) -> String {
        format!("{}, {}", self.fs.as_str(), self.network.describe())
    }
}

/// The fence every job of a producer runs in.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FencePolicy {
    /// Files.
    pub fs: FsAccess,
    /// More paths a job may write (both fenced presets).
    pub write: Vec<PathBuf>,
    /// Network.
    pub network: NetAccess,
    /// Refuse a start the kernel cannot fence fully, instead of running it
    /// with what it can.
    pub required: bool,
    /// Use no Landlock ABI above this one, as on an older kernel: what a
    /// job gets there, and what it is told, can be tried here. `None`: the
    /// kernel's own.
    pub max_landlock_abi: Option<i32>,
}

impl FencePolicy {
    /// Whether this is no fence at all (today's jobs: full authority).
    pub fn is_open(&self) -> bool {
        self.sandbox().is_open()
    }

    /// The policy in a few words: `workspace-write, network off`.
    pub fn describe(&self) -> String {
        self.sandbox().describe()
    }

    /// The sandbox a job runs in under this policy, unless it asks for a
    /// narrower one.
    pub fn sandbox(&self) -> Sandbox {
        Sandbox {
            fs: self.fs,
            network: self.network.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_and_describe_themselves() {
        assert_eq!(
            FsAccess::parse("workspace-write"),
            Ok(FsAccess::WorkspaceWrite)
        );
        assert!(FsAccess::parse("yolo").unwrap_err().contains("known: full"));
        assert_eq!(
            NetAccess::parse("ports:80,443"),
            Ok(NetAccess::Ports(vec![80, 443]))
        );
        assert!(NetAccess::parse("ports:0").is_err());
        assert!(NetAccess::parse("ports:99999").is_err());
        let policy = FencePolicy {
            fs: FsAccess::WorkspaceWrite,
            network: NetAccess::Off,
            ..FencePolicy::default()
        };
        assert_eq!(policy.describe(), "workspace-write, network off");
        assert!(FencePolicy::default().is_open());
    }
}
