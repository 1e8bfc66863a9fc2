//! Settings of `jobs-host`: from a TOML file, then command-line flags on top.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::json;

use host::bash::BashConfig;
use host::capture::OutputLimits;
use host::containment::ContainmentMode;
use host::registry::{RegistryConfig, RegistryConfigError};

/// Which tool surface the plugin presents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// `job_output`, `job_list`, `job_kill`.
    A,
    /// `task_output`, `task_list`, `task_kill` (notices only injected).
    B,
    /// `job_list`, `job_status`, `job_wait`, `job_cancel` (notices batched per step).
    C,
}

/// Every setting; `None` means the built-in default.
#[derive(Debug, Clone, Default, Deserialize, Serialize, clap::Args)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Settings {
    /// Tool surface.
    #[arg(long, value_enum)]
    pub profile: Option<Profile>,
    /// Wait used when `wait: true` comes without `timeout_ms` [default: 30000].
    #[arg(long, value_name = "MS")]
    pub wait_timeout_ms: Option<f64>,
    /// Cap on any wait the model asks for [default: 600000; 110000 under mcp].
    #[arg(long, value_name = "MS")]
    pub max_wait_timeout_ms: Option<f64>,
    /// Profile c: most bytes of a job's result the model sees [default: 24576].
    #[arg(long, value_name = "BYTES")]
    pub max_result_bytes: Option<u64>,
    /// Profile c: cap on `job_wait` [default: 120; 110 under mcp].
    #[arg(long, value_name = "SECONDS")]
    pub max_wait_seconds: Option<u64>,
    /// Profile c: no `Background job update:` notices.
    #[arg(long)]
    pub suppress_completion_notice: Option<bool>,
    /// Opt-in extensions: `all`, or a comma-separated list of `ready`,
    /// `input`, `log`, `limits`, `ports`, `yield`, `sandbox`, `terminal`
    /// [default: none].
    #[arg(long, value_name = "LIST")]
    pub extensions: Option<String>,
    /// With the `terminal` extension: render what jobs without a terminal
    /// write too (progress drawn with `\r`, colours), keeping the raw bytes.
    #[arg(long)]
    pub render_output: Option<bool>,
    /// With the `limits` extension: wall-clock maximum per job, in ms.
    #[arg(long, value_name = "MS")]
    pub job_timeout_ms: Option<u64>,
    /// With the `limits` extension: CPU seconds per process of a job.
    #[arg(long, value_name = "SECONDS")]
    pub job_cpu_seconds: Option<u64>,
    /// With the `limits` extension: address space per process of a job.
    #[arg(long, value_name = "BYTES")]
    pub job_memory_bytes: Option<u64>,
    /// With the `limits` extension: output bytes per job, then it is killed.
    #[arg(long, value_name = "BYTES")]
    pub job_output_bytes: Option<u64>,
    /// Live background jobs one owner may have [default: 10].
    #[arg(long, value_name = "N")]
    pub max_jobs_per_owner: Option<u64>,
    /// Finished jobs kept per owner once seen; older ones (and their output)
    /// are dropped and their ids become unknown [default: 1000].
    #[arg(long, value_name = "N")]
    pub max_retained_jobs: Option<u64>,
    /// Output kept in memory per stream of a job [default: 64000].
    #[arg(long, value_name = "BYTES")]
    pub output_tail_bytes: Option<usize>,
    /// Largest spill file per stream of a job [default: 67108864].
    #[arg(long, value_name = "BYTES")]
    pub spill_limit_bytes: Option<u64>,
    /// Time between SIGTERM and SIGKILL when a job is killed [default: 3000].
    #[arg(long, value_name = "MS")]
    pub kill_grace_ms: Option<u64>,
    /// Working directory for background commands [default: the current one].
    #[arg(long, value_name = "DIR")]
    pub workdir: Option<PathBuf>,
    /// Pass this host variable on to jobs (repeatable); jobs otherwise get only
    /// PATH, HOME, USER, LOGNAME, SHELL, LANG, LC_*, TERM, TZ and TMPDIR.
    #[arg(long, value_name = "NAME")]
    pub pass_env: Option<Vec<String>>,
    /// Set this variable for every job (repeatable).
    #[arg(long, value_name = "NAME=VALUE", value_parser = parse_assignment)]
    pub set_env: Option<Vec<String>>,
    /// Largest command a job may be started with [default: 65536].
    #[arg(long, value_name = "BYTES")]
    pub max_command_bytes: Option<usize>,
    /// Disk budget for all spill files of the session [default: 536870912].
    #[arg(long, value_name = "BYTES")]
    pub spill_total_bytes: Option<u64>,
    /// On SIGTERM, SIGINT or SIGHUP: time between SIGTERM and SIGKILL to every
    /// job before the host exits [default: 1000].
    #[arg(long, value_name = "MS")]
    pub shutdown_grace_ms: Option<u64>,
    /// How jobs are contained: a cgroup per job, the subreaper fallback, or
    /// auto (cgroup when possible) [default: auto].
    #[arg(long, value_enum)]
    pub containment: Option<Containment>,
    /// Fence every job: `full` (no fence), `workspace-write` (write only the
    /// workdir, its TMPDIR and --sandbox-write paths) or `read-only`
    /// [default: full].
    #[arg(long, value_name = "POLICY")]
    pub sandbox: Option<String>,
    /// With a sandbox: a path jobs may also write (repeatable).
    #[arg(long, value_name = "PATH")]
    pub sandbox_write: Option<Vec<PathBuf>>,
    /// With a sandbox or alone: `on`, `off` or `ports:PORT,...` (TCP connect
    /// and bind only to those ports) [default: on].
    #[arg(long, value_name = "NET")]
    pub sandbox_network: Option<String>,
    /// Refuse to start a job the kernel cannot fence as asked, instead of
    /// running it with what the kernel can enforce.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub sandbox_required: Option<bool>,
    /// A cluster engine jobs may run on besides this host (repeatable):
    /// `ray=http://127.0.0.1:8265` is a Ray head's dashboard, `slurm` or
    /// `slurm:PARTITION` (or `NAME=slurm[:PARTITION]`) the Slurm cluster
    /// this machine's sbatch submits to. Turns on the `runners` extension.
    /// The Ray token is taken from RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or
    /// ~/.ray/auth_token.
    #[arg(long, value_name = "NAME=ADDRESS")]
    pub runner: Option<Vec<String>>,
    /// One more sbatch argument for every Slurm job, as one word
    /// (repeatable): `--slurm-arg=--account=proj`, `--slurm-arg=--time=2:00:00`.
    #[arg(long, value_name = "ARG", allow_hyphen_values = true)]
    pub slurm_arg: Option<Vec<String>>,
    /// Where Slurm jobs write their output files and exit records: a
    /// directory this machine and the compute nodes share
    /// [default: ~/.jobs-host/slurm].
    #[arg(long, value_name = "DIR")]
    pub slurm_dir: Option<PathBuf>,
    /// What becomes of jobs still on a runner's engine when the host ends:
    /// `stop` them, or let them `outlive` it [default: stop].
    #[arg(long, value_enum)]
    pub runner_jobs: Option<RunnerJobs>,
}

/// `--runner-jobs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum RunnerJobs {
    /// Stopped with the host's other jobs, so nothing runs unattended.
    Stop,
    /// Left running on the engine (their engine ids are logged).
    Outlive,
}

/// `--containment`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Containment {
    /// cgroup when the host can create one, else the fallback.
    Auto,
    /// cgroup v2 only; refuse to start without it.
    Cgroup,
    /// Subreaper and environment marker.
    Fallback,
}

/// The cap on one wait under MCP when the settings set none, in ms.
pub const MCP_MAX_WAIT_MS: u64 = 110_000;

/// Default `--shutdown-grace-ms`: short enough for a client that sends SIGTERM
/// two seconds after closing stdin.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_millis(1000);

fn parse_assignment(text: &str) -> Result<String, String> {
    match text.split_once('=') {
        Some((name, _)) if valid_env_name(name) => Ok(text.to_owned()),
        _ => Err(format!("expected NAME=VALUE, got {text:?}")),
    }
}

fn valid_env_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A settings file that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// Unreadable file.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Not valid TOML for these settings.
    #[error("invalid settings in {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A value out of range.
    #[error(transparent)]
    Registry(#[from] RegistryConfigError),
    /// A setting with a bad value.
    #[error("invalid setting {name}: {message}")]
    Invalid {
        /// The setting.
        name: &'static str,
        /// What is wrong.
        message: String,
    },
}

impl Settings {
    /// Reads a TOML settings file (kebab-case keys, unknown keys refused).
    ///
    /// # Errors
    ///
    /// An unreadable file or invalid content.
    pub fn from_file(path: &Path) -> Result<Settings, SettingsError> {
        let text = std::fs::read_to_string(path).map_err(|source| SettingsError::Read {
            path: path.to_owned(),
            source,
        })?;
        toml::from_str(&text).map_err(|e| SettingsError::Parse {
            path: path.to_owned(),
            message: e.message().to_owned(),
        })
    }

    /// `self` with every value `over` sets replacing the one here.
    pub fn overridden_by(self, over: Settings) -> Settings {
        Settings {
            profile: over.profile.or(self.profile),
            wait_timeout_ms: over.wait_timeout_ms.or(self.wait_timeout_ms),
            max_wait_timeout_ms: over.max_wait_timeout_ms.or(self.max_wait_timeout_ms),
            max_result_bytes: over.max_result_bytes.or(self.max_result_bytes),
            max_wait_seconds: over.max_wait_seconds.or(self.max_wait_seconds),
            suppress_completion_notice: over
                .suppress_completion_notice
                .or(self.suppress_completion_notice),
            extensions: over.extensions.or(self.extensions),
            render_output: over.render_output.or(self.render_output),
            job_timeout_ms: over.job_timeout_ms.or(self.job_timeout_ms),
            job_cpu_seconds: over.job_cpu_seconds.or(self.job_cpu_seconds),
            job_memory_bytes: over.job_memory_bytes.or(self.job_memory_bytes),
            job_output_bytes: over.job_output_bytes.or(self.job_output_bytes),
            max_jobs_per_owner: over.max_jobs_per_owner.or(self.max_jobs_per_owner),
            max_retained_jobs: over.max_retained_jobs.or(self.max_retained_jobs),
            output_tail_bytes: over.output_tail_bytes.or(self.output_tail_bytes),
            spill_limit_bytes: over.spill_limit_bytes.or(self.spill_limit_bytes),
            kill_grace_ms: over.kill_grace_ms.or(self.kill_grace_ms),
            workdir: over.workdir.or(self.workdir),
            pass_env: over.pass_env.or(self.pass_env),
            set_env: over.set_env.or(self.set_env),
            max_command_bytes: over.max_command_bytes.or(self.max_command_bytes),
            spill_total_bytes: over.spill_total_bytes.or(self.spill_total_bytes),
            shutdown_grace_ms: over.shutdown_grace_ms.or(self.shutdown_grace_ms),
            containment: over.containment.or(self.containment),
            sandbox: over.sandbox.or(self.sandbox),
            sandbox_write: over.sandbox_write.or(self.sandbox_write),
            sandbox_network: over.sandbox_network.or(self.sandbox_network),
            runner: over.runner.or(self.runner),
            runner_jobs: over.runner_jobs.or(self.runner_jobs),
            slurm_arg: over.slurm_arg.or(self.slurm_arg),
            slurm_dir: over.slurm_dir.or(self.slurm_dir),
            sandbox_required: over.sandbox_required.or(self.sandbox_required),
        }
    }

    /// The settings under MCP: a wait nobody capped is held to
    /// [`MCP_MAX_WAIT_MS`], below the two minutes after which clients move a
    /// call to a background task of their own (Claude Code) or time it out.
    /// A longer default wait (`wait-timeout-ms`) raises that cap to itself, as
    /// the operator asked for it; an explicit cap is kept as it is.
    pub fn with_mcp_wait_cap(mut self) -> Settings {
        match self.profile {
            Some(Profile::C) => {
                self.max_wait_seconds = self.max_wait_seconds.or(Some(MCP_MAX_WAIT_MS / 1000));
            }
            _ => {
                let wait = self.wait_timeout_ms.unwrap_or(0.0);
                self.max_wait_timeout_ms = self
                    .max_wait_timeout_ms
                    .or(Some(wait.max(MCP_MAX_WAIT_MS as f64)));
            }
        }
        self
    }

    /// The runners, parsed and with distinct names.
    ///
    /// # Errors
    ///
    /// A runner that is not `NAME=http://HOST:PORT` or `slurm[:PARTITION]`, or a
    /// name given twice.
    pub fn runner_specs(&self) -> Result<Vec<host::runners::RunnerSpec>, SettingsError> {
        let mut specs: Vec<host::runners::RunnerSpec> = Vec::new();
        for text in self.runner.iter().flatten() {
            let spec: host::runners::RunnerSpec =
                text.parse().map_err(|message| SettingsError::Invalid {
                    name: "runner",
                    message,
                })?;
            if specs.iter().any(|s| s.name == spec.name) {
                return Err(SettingsError::Invalid {
                    name: "runner",
                    message: format!("the name {:?} is given twice", spec.name),
                });
            }
            specs.push(spec);
        }
        Ok(specs)
    }

    /// Where Slurm jobs write their output files and exit records.
    ///
    /// # Errors
    ///
    /// No `--slurm-dir` and no HOME to put the default in.
    pub fn slurm_dir(&self) -> Result<PathBuf, String> {
        match (&self.slurm_dir, std::env::var_os("HOME")) {
            (Some(dir), _) => Ok(dir.clone()),
            (None, Some(home)) => Ok(PathBuf::from(home).join(".jobs-host/slurm")),
            (None, None) => Err(
                "a Slurm runner needs --slurm-dir (a directory the compute nodes share) where HOME is not set"
                    .to_owned(),
            ),
        }
    }

    /// How long shutdown waits between SIGTERM and SIGKILL.
    pub fn shutdown_grace(&self) -> Duration {
        self.shutdown_grace_ms
            .map_or(DEFAULT_SHUTDOWN_GRACE, Duration::from_millis)
    }

    /// The plugin's configuration JSON. The plugin validates it at load, and
    /// refuses settings its profile does not have (for example
    /// `wait-timeout-ms` under profile c).
    pub fn plugin_config_json(&self) -> String {
        let mut config = serde_json::Map::new();
        let mut set = |key: &str, value: Option<serde_json::Value>| {
            if let Some(value) = value {
                config.insert(key.into(), value);
            }
        };
        set(
            "profile",
            self.profile.map(|p| match p {
                Profile::A => json!("a"),
                Profile::B => json!("b"),
                Profile::C => json!("c"),
            }),
        );
        set("waitTimeoutMs", self.wait_timeout_ms.map(|v| json!(v)));
        set(
            "maxWaitTimeoutMs",
            self.max_wait_timeout_ms.map(|v| json!(v)),
        );
        set("maxResultBytes", self.max_result_bytes.map(|v| json!(v)));
        set("maxWaitSeconds", self.max_wait_seconds.map(|v| json!(v)));
        set(
            "suppressCompletionNotice",
            self.suppress_completion_notice.map(|v| json!(v)),
        );
        // Runners turn their extension on: a runner the model cannot name
        // would be no runner at all.
        let runners = self.runner_specs().unwrap_or_default();
        let extensions = match (
            self.extensions.as_deref().map(str::trim),
            runners.is_empty(),
        ) {
            (Some("all"), _) => Some(json!(true)),
            (None | Some("none" | ""), true) => self.extensions.as_ref().map(|_| json!(false)),
            (None | Some("none" | ""), false) => Some(json!(["runners"])),
            (Some(names), empty) => {
                let mut names: Vec<&str> = names.split(',').map(str::trim).collect();
                if !empty && !names.contains(&"runners") {
                    names.push("runners");
                }
                Some(json!(names))
            }
        };
        set("extensions", extensions);
        if !runners.is_empty() {
            set(
                "runners",
                Some(json!(runners.iter().map(|r| &r.name).collect::<Vec<_>>())),
            );
        }
        set("renderOutput", self.render_output.map(|v| json!(v)));
        let limits: serde_json::Map<String, serde_json::Value> = [
            ("timeoutMs", self.job_timeout_ms),
            ("cpuSeconds", self.job_cpu_seconds),
            ("memoryBytes", self.job_memory_bytes),
            ("outputBytes", self.job_output_bytes),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k.to_owned(), json!(v))))
        .collect();
        set(
            "limits",
            (!limits.is_empty()).then(|| serde_json::Value::Object(limits)),
        );
        // The session's sandbox, for the `sandbox` extension's words and
        // checks (a bad one is refused by `bash_config`).
        let wants_sandbox = self.extensions.as_deref().is_some_and(|list| {
            list.trim() == "all" || list.split(',').any(|n| n.trim() == "sandbox")
        });
        if wants_sandbox
            && let Ok(policy) = self.fence_policy()
            && !policy.is_open()
        {
            set(
                "sandbox",
                Some(json!({
                    "files": policy.fs.as_str(),
                    "network": match &policy.network {
                        host::fence::NetAccess::On => json!("on"),
                        host::fence::NetAccess::Off => json!("off"),
                        host::fence::NetAccess::Ports(ports) => json!(ports),
                    },
                })),
            );
        }
        serde_json::Value::Object(config).to_string()
    }

    /// The session's sandbox from `--sandbox`, `--sandbox-write`,
    /// `--sandbox-network` and `--sandbox-required`.
    ///
    /// # Errors
    ///
    /// An unknown policy or network, or a write path that is not an existing
    /// absolute one.
    pub fn fence_policy(&self) -> Result<host::fence::FencePolicy, SettingsError> {
        let invalid =
            |name: &'static str, message: String| SettingsError::Invalid { name, message };
        let sandbox = host::fence::FencePolicy {
            fs: match &self.sandbox {
                Some(word) => {
                    host::fence::FsAccess::parse(word).map_err(|m| invalid("sandbox", m))?
                }
                None => host::fence::FsAccess::Full,
            },
            write: self.sandbox_write.clone().unwrap_or_default(),
            network: match &self.sandbox_network {
                Some(word) => host::fence::NetAccess::parse(word)
                    .map_err(|m| invalid("sandbox-network", m))?,
                None => host::fence::NetAccess::On,
            },
            required: self.sandbox_required.unwrap_or(false),
            max_landlock_abi: None,
        };
        if let Some(bad) = sandbox
            .write
            .iter()
            .find(|p| !p.is_absolute() || !p.exists())
        {
            return Err(invalid(
                "sandbox-write",
                format!("{} is not an existing absolute path", bad.display()),
            ));
        }
        Ok(sandbox)
    }

    /// The registry's configuration.
    ///
    /// # Errors
    ///
    /// An admission limit of zero or above 2^53 - 1.
    pub fn registry_config(&self) -> Result<RegistryConfig, SettingsError> {
        let config = match self.max_jobs_per_owner {
            Some(limit) => RegistryConfig::with_max_concurrent_jobs_per_owner(limit)?,
            None => RegistryConfig::default(),
        };
        Ok(match self.max_retained_jobs {
            Some(limit) => config.with_max_retained_per_owner(limit)?,
            None => config,
        })
    }

    /// The shell producer's configuration.
    ///
    /// # Errors
    ///
    /// A bad variable name or assignment, or a zero limit.
    pub fn bash_config(&self) -> Result<BashConfig, SettingsError> {
        let defaults = BashConfig::default();
        let limits = OutputLimits::default();
        let invalid =
            |name: &'static str, message: String| SettingsError::Invalid { name, message };
        let pass_env = self.pass_env.clone().unwrap_or_default();
        if let Some(bad) = pass_env.iter().find(|n| !valid_env_name(n)) {
            return Err(invalid(
                "pass-env",
                format!("{bad:?} is not a variable name"),
            ));
        }
        let mut set_env = Vec::new();
        for item in self.set_env.iter().flatten() {
            let (name, value) = parse_assignment(item)
                .map_err(|m| invalid("set-env", m))?
                .split_once('=')
                .map(|(n, v)| (n.to_owned(), v.to_owned()))
                .unwrap_or_default();
            set_env.push((name, value));
        }
        if self.max_command_bytes == Some(0) {
            return Err(invalid("max-command-bytes", "must be at least 1".into()));
        }
        let sandbox = self.fence_policy()?;
        Ok(BashConfig {
            grace: self
                .kill_grace_ms
                .map_or(defaults.grace, Duration::from_millis),
            limits: OutputLimits {
                max_output_bytes: self.output_tail_bytes.unwrap_or(limits.max_output_bytes),
                max_spill_bytes: self.spill_limit_bytes.unwrap_or(limits.max_spill_bytes),
            },
            default_workdir: self.workdir.clone(),
            pass_env,
            set_env,
            max_command_bytes: self.max_command_bytes.unwrap_or(defaults.max_command_bytes),
            spill_total_bytes: self.spill_total_bytes.unwrap_or(defaults.spill_total_bytes),
            containment: match self.containment {
                None | Some(Containment::Auto) => ContainmentMode::Auto,
                Some(Containment::Cgroup) => ContainmentMode::Cgroup,
                Some(Containment::Fallback) => ContainmentMode::Fallback,
            },
            sandbox,
            ..defaults
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(settings: Settings) -> serde_json::Value {
        serde_json::from_str(&settings.with_mcp_wait_cap().plugin_config_json()).unwrap()
    }

    #[test]
    fn under_mcp_an_uncapped_wait_stays_below_two_minutes() {
        assert_eq!(config(Settings::default())["maxWaitTimeoutMs"], 110000.0);
        let c = Settings {
            profile: Some(Profile::C),
            ..Settings::default()
        };
        assert_eq!(config(c)["maxWaitSeconds"], 110);
        // What the operator set is kept; a longer default wait raises the cap.
        let capped = Settings {
            max_wait_timeout_ms: Some(600000.0),
            ..Settings::default()
        };
        assert_eq!(config(capped)["maxWaitTimeoutMs"], 600000.0);
        let long = Settings {
            wait_timeout_ms: Some(200000.0),
            ..Settings::default()
        };
        assert_eq!(config(long)["maxWaitTimeoutMs"], 200000.0);
    }
}
