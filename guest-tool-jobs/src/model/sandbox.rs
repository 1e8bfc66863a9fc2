//! The host's fence around a job as the guest words and compares it
//! (extension `sandbox`): what a job may write and reach.

/// What a sandboxed job may write (see the WIT `sandbox-files`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SandboxFiles {
    /// Nothing but its own temporary directory and the operator's paths.
    ReadOnly,
    /// Also its workdir.
    WorkspaceWrite,
    /// Whatever its user may.
    Full,
}

impl SandboxFiles {
    /// The word: `read-only`, `workspace-write`, `full`.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxFiles::ReadOnly => "read-only",
            SandboxFiles::WorkspaceWrite => "workspace-write",
            SandboxFiles::Full => "full",
        }
    }

    /// The one `word` names.
    pub fn parse(word: &str) -> Option<SandboxFiles> {
        match word {
            "read-only" => Some(SandboxFiles::ReadOnly),
            "workspace-write" => Some(SandboxFiles::WorkspaceWrite),
            "full" => Some(SandboxFiles::Full),
            _ => None,
        }
    }
}

/// What a sandboxed job may reach on the network (see the WIT
/// `sandbox-network`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SandboxNetwork {
    /// Anything.
    On,
    /// Nothing but Unix sockets.
    Off,
    /// TCP to these ports only, sorted, each once.
    Ports(Vec<u16>),
}

impl SandboxNetwork {
    /// Whether a job under `self` reaches at most what one under `wider` does.
    pub fn within(&self, wider: &SandboxNetwork) -> bool {
        match (self, wider) {
            (_, SandboxNetwork::On) | (SandboxNetwork::Off, _) => true,
            (SandboxNetwork::Ports(a), SandboxNetwork::Ports(b)) => a.iter().all(|p| b.contains(p)),
            _ => false,
        }
    }

    /// `network on`, `network off`, `network ports 80,443`.
    pub fn words(&self) -> String {
        match self {
            SandboxNetwork::On => "network on".to_owned(),
            SandboxNetwork::Off => "network off".to_owned(),
            SandboxNetwork::Ports(ports) => format!(
                "network ports {}",
                ports
                    .iter()
                    .map(u16::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        }
    }

    /// The network part of a config or an argument: `"on"`, `"off"`, or a
    /// list of ports from 1 to 65535; `None` for anything else.
    pub fn from_json(value: &serde_json::Value) -> Option<SandboxNetwork> {
        match value {
            serde_json::Value::String(s) if s == "on" => Some(SandboxNetwork::On),
            serde_json::Value::String(s) if s == "off" => Some(SandboxNetwork::Off),
            serde_json::Value::Array(items) => {
                let mut ports = items
                    .iter()
                    .map(|v| {
                        v.as_u64()
                            .filter(|p| (1..=65535).contains(p))
                            .map(|p| p as u16)
                    })
                    .collect::<Option<Vec<u16>>>()?;
                ports.sort_unstable();
                ports.dedup();
                Some(SandboxNetwork::Ports(ports))
            }
            _ => None,
        }
    }
}

/// The host's fence around a job (see the WIT `sandbox`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    /// What it may write.
    pub files: SandboxFiles,
    /// What it may reach.
    pub network: SandboxNetwork,
}

impl Sandbox {
    /// Full authority: what no sandbox means.
    pub const FULL: Sandbox = Sandbox {
        files: SandboxFiles::Full,
        network: SandboxNetwork::On,
    };

    /// `workspace-write, network off`.
    pub fn words(&self) -> String {
        format!("{}, {}", self.files.as_str(), self.network.words())
    }

    /// Whether a job under `self` may do at most what one under `wider` may.
    pub fn within(&self, wider: &Sandbox) -> bool {
        self.files <= wider.files && self.network.within(&wider.network)
    }

    /// The status words of a job that runs in `sandbox` (extension `sandbox`):
    /// `[sandbox: workspace-write, network off]`.
    pub fn note(sandbox: &Sandbox) -> String {
        format!("[sandbox: {}]", sandbox.words())
    }
}
