//! The wiring of a host from settings: the component loaded once, a
//! session's registry, mount and shell producer, and the MCP server over a
//! session. Every front end (`mcp`, `shell`, `tools`, the daemon) builds on
//! it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use host::bash::BashProducer;
use host::producer::Routed;
use host::runners::ray::{RayConfig, RayRunner};
use host::runners::slurm::{SlurmConfig, SlurmRunner};
use host::runners::{Engine, Runner};
use host::session::Session;
use host::{JobRegistry, Lane, Mount, PluginRuntime, SandboxLimits};

use crate::mcp::JobsServer;
use crate::settings::{RunnerJobs, Settings};

pub(crate) fn default_cache_dir() -> Option<PathBuf> {
    env_dir("XDG_CACHE_HOME")
        .or_else(|| env_dir("HOME").map(|h| h.join(".cache")))
        .map(|d| d.join("jobs-host"))
}

/// The directory the environment variable `var` names, when absolute: an
/// empty or relative value is ignored, as the XDG base directory spec asks
/// (it would put files in whatever directory the host was started in).
pub(crate) fn env_dir(var: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}

/// Where a fenced session's spill directory, and with it its jobs' own
/// temporary directories, is made: where a fenced job's read rules stay few
/// (see [`host::bash::BashConfig::fenced_spill_parent`]). That is the
/// default cache directory, made if missing; in a cache given elsewhere (a
/// directory under `/tmp`, whose every entry would cost a rule) the jobs'
/// namespace can then cover the cache whole. The given cache where the
/// default one (`default`) cannot be made, or where it would be in or
/// around one of the jobs' usual writable `roots` (a host started in
/// `$HOME`), which a private directory there would refuse.
fn fenced_spill_parent(
    default: Option<PathBuf>,
    cache_dir: Option<&Path>,
    roots: &[PathBuf],
) -> Option<PathBuf> {
    let overlaps = |dir: &Path| {
        let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
        roots.iter().any(|root| {
            let root = root.canonicalize().unwrap_or_else(|_| root.clone());
            dir.starts_with(&root) || root.starts_with(&dir)
        })
    };
    match default {
        Some(dir) if Some(dir.as_path()) != cache_dir && !overlaps(&dir) && made_private(&dir) => {
            Some(dir)
        }
        _ => cache_dir.map(Path::to_owned),
    }
}

/// Makes `dir` (and its parents) if missing, only this user's to write;
/// whether it is a directory of this user's that nobody else can write.
fn made_private(dir: &Path) -> bool {
    use std::os::unix::fs::DirBuilderExt;
    let _ = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir);
    dir.is_dir() && host::fs_trust::private_to_us(dir)
}

/// Everything a session needs, built from settings.
pub(crate) struct Host {
    pub(crate) mount: Arc<Mount>,
    pub(crate) bash: BashProducer,
    /// The cluster engines jobs may run on besides this host.
    pub(crate) runners: Vec<Runner>,
    pub(crate) shutdown_grace: std::time::Duration,
    pub(crate) mcp: McpOptions,
}

/// The component, loaded (and compiled, or read from the cache) once.
pub(crate) fn load_runtime(cache_dir: Option<&Path>) -> Result<Arc<PluginRuntime>> {
    Ok(Arc::new(
        PluginRuntime::new(SandboxLimits::default(), cache_dir)
            .context("loading the tool-jobs component")?,
    ))
}

pub(crate) async fn host(cache_dir: Option<&Path>, settings: Settings) -> Result<Host> {
    host_on(load_runtime(cache_dir)?, cache_dir, settings, None, None).await
}

/// A session's host on `runtime`: its registry, mount and shell producer.
/// `host_env` is the environment its jobs take their passed variables from
/// (`None`: this process's).
pub(crate) async fn host_on(
    runtime: Arc<PluginRuntime>,
    cache_dir: Option<&Path>,
    settings: Settings,
    host_env: Option<Vec<(std::ffi::OsString, std::ffi::OsString)>>,
    durable: Option<host::bash::DurableJobs>,
) -> Result<Host> {
    let registry = JobRegistry::new(settings.registry_config()?, Default::default());
    let mount = Mount::new(runtime, registry.clone(), &settings.plugin_config_json())
        .await
        .context("invalid settings")?;
    let mut bash_config = settings.bash_config()?;
    bash_config.host_env = host_env;
    // A stream's file keeps what its spill file would, at least a mebibyte.
    bash_config.durable = durable.map(|durable| host::bash::DurableJobs {
        max_file_bytes: bash_config.limits.max_spill_bytes.max(1 << 20),
        ..durable
    });
    // A fenced job may neither read nor replace the compiled components the
    // next start runs as native code; they are all the cache holds, so the
    // jobs' namespace may cover it (see the field).
    bash_config
        .covered_dirs
        .extend(cache_dir.map(Path::to_owned));
    if !bash_config.sandbox.is_open() {
        // The jobs' usual writable roots: the workdir they get when they
        // name none, and the operator's write paths.
        let mut roots = bash_config.sandbox.write.clone();
        roots.extend(
            bash_config
                .default_workdir
                .clone()
                .or_else(|| std::env::current_dir().ok()),
        );
        bash_config.fenced_spill_parent =
            fenced_spill_parent(default_cache_dir(), cache_dir, &roots);
        // Other sessions' spill directories stand beside this one's: none
        // of them is for this session's jobs to read.
        if let Some(parent) = &bash_config.fenced_spill_parent
            && Some(parent.as_path()) != cache_dir
        {
            bash_config.private_dirs.push(parent.clone());
        }
    }
    let mut runner_config = RayConfig {
        grace: bash_config.grace,
        limits: bash_config.limits,
        spill_total_bytes: bash_config.spill_total_bytes,
        outlive: settings.runner_jobs == Some(RunnerJobs::Outlive),
        spill_parent: None,
        // A durable session's remote jobs keep their logs beside its local
        // jobs' files, for the next daemon to take them on.
        keep_logs: bash_config.durable.as_ref().map(|d| d.dir.clone()),
    };
    let bash = BashProducer::new(registry.clone(), bash_config)
        .context("setting up the background shell")?;
    // Inside the shell's spill directory, which its watchdog removes on every
    // way out, SIGKILL included.
    runner_config.spill_parent = Some(bash.spill_dir().to_owned());
    let runners = settings
        .runner_specs()?
        .iter()
        .map(|spec| {
            match &spec.engine {
                Engine::Ray { address } => RayRunner::new(
                    &spec.name,
                    address,
                    registry.clone(),
                    runner_config.clone(),
                    bash.names(),
                )
                .map(Runner::Ray),
                Engine::Slurm { partition } => SlurmRunner::new(
                    &spec.name,
                    registry.clone(),
                    SlurmConfig {
                        partition: partition.clone(),
                        args: settings.slurm_arg.clone().unwrap_or_default(),
                        dir: settings.slurm_dir().map_err(anyhow::Error::msg)?,
                        limits: runner_config.limits,
                        spill_total_bytes: runner_config.spill_total_bytes,
                        outlive: runner_config.outlive,
                        spill_parent: runner_config.spill_parent.clone(),
                        keep_logs: runner_config.keep_logs.clone(),
                        default_workdir: settings.workdir.clone(),
                    },
                    bash.names(),
                )
                .map(Runner::Slurm),
            }
            .map_err(anyhow::Error::msg)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Host {
        mount: Arc::new(mount),
        bash,
        runners,
        shutdown_grace: settings.shutdown_grace(),
        mcp: McpOptions::default(),
    })
}

pub(crate) fn settings_with_file(file: Option<&Path>, flags: Settings) -> Result<Settings> {
    let base = match file {
        Some(path) => Settings::from_file(path)?,
        None => Settings::default(),
    };
    Ok(base.overridden_by(flags))
}

pub(crate) fn open_session(
    host: &Host,
    id: &str,
) -> (
    Session,
    tokio::sync::mpsc::UnboundedReceiver<(Lane, host::NoticeMessage)>,
) {
    Session::open(id, host.mount.clone(), host.producer())
}

impl Host {
    /// The start tool's producer: this host's shell, and each runner by its
    /// name.
    pub(crate) fn producer(&self) -> Routed {
        self.runners
            .iter()
            .fold(Routed::new(self.bash.clone()), |routed, runner| {
                routed.with_runner(runner.name(), runner.producer())
            })
    }
}

/// What `mcp` takes beyond the settings.
#[derive(Clone, Copy, Default)]
pub(crate) struct McpOptions {
    pub(crate) structured_output: bool,
    pub(crate) progress_interval: std::time::Duration,
    pub(crate) tasks: bool,
    pub(crate) claude_channel: Option<std::time::Duration>,
}

/// The MCP server of `session` on `mount`, with a front end's `options`.
pub(crate) async fn mcp_server(
    mount: &Mount,
    session: Arc<Session>,
    options: McpOptions,
) -> Result<JobsServer> {
    let prompt = mount.prompt_section().await?;
    Ok(
        JobsServer::new(session, prompt.map(|p| p.text), options.structured_output)
            .await?
            .with_progress_interval(options.progress_interval)
            .with_tasks(options.tasks)
            .with_claude_channel(options.claude_channel),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spill_parent_is_the_default_cache_unless_it_would_refuse_a_usual_root() {
        let home = tempfile::tempdir().unwrap();
        let default = home.path().join(".cache").join("jobs-host");
        let given = tempfile::tempdir().unwrap();
        let project = home.path().join("project");
        std::fs::create_dir(&project).unwrap();
        let pick = |roots: &[PathBuf]| {
            fenced_spill_parent(Some(default.clone()), Some(given.path()), roots)
        };
        // Made when missing, only this user's to write.
        assert_eq!(pick(std::slice::from_ref(&project)), Some(default.clone()));
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&default).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o700);
        // In or around a usual writable root: the given cache.
        for root in [home.path().to_owned(), default.join("inner")] {
            assert_eq!(pick(&[root]), Some(given.path().to_owned()));
        }
        // The given cache is the default one: it holds the spill directory.
        assert_eq!(
            fenced_spill_parent(Some(default.clone()), Some(&default), &[]),
            Some(default.clone())
        );
        // One that others may write is passed over.
        std::fs::set_permissions(
            &default,
            std::os::unix::fs::PermissionsExt::from_mode(0o777),
        )
        .unwrap();
        assert_eq!(pick(&[]), Some(given.path().to_owned()));
        // No default (no absolute HOME or XDG_CACHE_HOME).
        assert_eq!(
            fenced_spill_parent(None, Some(given.path()), &[]),
            Some(given.path().to_owned())
        );
    }
}
