//! The exec spec of a job's leader: its argv, its environment (an allowlist of
//! the host's), its working directory and its resource limits; and the host's
//! own open-file limit, raised once so that many jobs can run.

use std::ffi::CString;
use std::path::{Path, PathBuf};

use super::error::SpawnError;
use super::{BashProducer, BashRequest, PASSED_ENV};
use crate::containment::JobContainer;
use crate::producers::spawn;

impl BashProducer {
    /// What the job's leader runs: `bash --noprofile --norc -c <command>` with
    /// the job's environment (later entries win) and working directory.
    pub(super) fn spec(
        &self,
        request: &BashRequest,
        dir: Option<PathBuf>,
        container: &JobContainer,
        fence: Option<&crate::fence::JobFence>,
        tty: Option<spawn::Pty>,
    ) -> Result<spawn::Spec, SpawnError> {
        let config = &self.inner.config;
        let c = |bytes: &[u8]| {
            CString::new(bytes)
                .map_err(|_| SpawnError::Nul("command, its environment or its directory"))
        };
        let shell = self.inner.shell.as_os_str().as_encoded_bytes();
        let argv = [
            shell,
            b"--noprofile",
            b"--norc",
            b"-c",
            request.command.as_bytes(),
        ]
        .into_iter()
        .map(c)
        .collect::<Result<Vec<_>, _>>()?;
        let mut env: Vec<(std::ffi::OsString, std::ffi::OsString)> = match &config.host_env {
            Some(vars) => job_env(vars.iter().cloned(), &config.pass_env),
            None => job_env(std::env::vars_os(), &config.pass_env),
        };
        // On a terminal, programs draw as for a person (their output is
        // rendered before the model reads it), but nothing may page or open
        // an editor that waits for keys the model never sends.
        let terminal: &[(&str, &str)] = if tty.is_some() {
            &[("TERM", "xterm-256color"), ("GIT_EDITOR", "true")]
        } else {
            &[]
        };
        let marker = container.marker_env();
        let more = [
            ("NO_COLOR", "1"),
            ("TERM", "dumb"),
            ("PAGER", "cat"),
            ("GIT_PAGER", "cat"),
        ]
        .into_iter()
        .chain(terminal.iter().copied())
        .chain(config.set_env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .chain(request.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .chain([(marker.0, marker.1.as_str())]);
        env.extend(more.map(|(k, v)| (k.into(), v.into())));
        if let Some(fence) = fence {
            // The job's own temporary directory: the only one it may write
            // besides its workdir.
            for name in ["TMPDIR", "TMP", "TEMP"] {
                env.push((name.into(), fence.tmp.path().as_os_str().to_owned()));
            }
        }
        // A later entry for the same name replaces an earlier one.
        let mut merged: Vec<(std::ffi::OsString, std::ffi::OsString)> = Vec::new();
        for (k, v) in env {
            match merged.iter_mut().find(|(name, _)| *name == k) {
                Some(slot) => slot.1 = v,
                None => merged.push((k, v)),
            }
        }
        let envp = merged
            .iter()
            .map(|(k, v)| {
                let mut entry = k.as_encoded_bytes().to_vec();
                entry.push(b'=');
                entry.extend_from_slice(v.as_encoded_bytes());
                c(&entry)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let cwd = dir
            .map(|d| c(d.as_os_str().as_encoded_bytes()))
            .transpose()?;
        let mut rlimits = Vec::new();
        // Jobs get the open-file limit the host was given, not the one it
        // raised for itself (programs using select() need at most 1,024).
        if let Some((soft, hard)) = *GIVEN_OPEN_FILE_LIMIT.get().unwrap_or(&None) {
            rlimits.push((libc::RLIMIT_NOFILE, soft, hard));
        }
        if let Some(seconds) = request.limits.cpu_seconds {
            // At the soft limit the kernel sends SIGXCPU, which names the
            // cause; at the hard one, a second later, SIGKILL.
            let soft = seconds as libc::rlim_t;
            rlimits.push((libc::RLIMIT_CPU, soft, soft.saturating_add(1)));
            // SIGXCPU dumps core by default; a job's limit leaves no core file.
            rlimits.push((libc::RLIMIT_CORE, 0, 0));
        }
        if let Some(bytes) = request.limits.memory_bytes {
            let bytes = bytes as libc::rlim_t;
            rlimits.push((libc::RLIMIT_AS, bytes, bytes));
        }
        Ok(spawn::Spec {
            program: c(shell)?,
            argv,
            envp,
            cwd,
            open_stdin: request.stdin,
            rlimits,
            setup: spawn::ChildSetup {
                new_session: true,
                controlling_terminal: tty.is_some(),
                new_group: false,
                die_with_parent: Some(std::process::id() as libc::pid_t),
                join_cgroup: container.cgroup_procs().map_err(SpawnError::Container)?,
                close_inherited_fds: true,
                sandbox: fence.map(|f| f.child.clone()),
            },
            hold: Vec::new(),
            extra_fds: Vec::new(),
            tty,
        })
    }
}

/// The environment a job gets: the allowlisted host variables ([`PASSED_ENV`],
/// `LC_*`, and `pass` by name) and nothing else.
pub(crate) fn job_env(
    vars: impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
    pass: &[String],
) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    vars.filter(|(name, _)| {
        let Some(name) = name.to_str() else {
            return false;
        };
        PASSED_ENV.contains(&name) || name.starts_with("LC_") || pass.iter().any(|p| p == name)
    })
    .collect()
}

/// The open-file limit (soft, hard) the process had before the first producer
/// raised it; `None` when it was not raised.
pub(super) static GIVEN_OPEN_FILE_LIMIT: std::sync::OnceLock<Option<(libc::rlim_t, libc::rlim_t)>> =
    std::sync::OnceLock::new();

/// Raises this process's soft open-file limit to its hard limit, once. Every
/// live job holds two descriptors of the host (its two pipes), so the usual
/// soft limit of 1,024 would fail spawns past about 500 jobs at once.
pub(super) fn raise_open_file_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    GIVEN_OPEN_FILE_LIMIT.get_or_init(|| {
        let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
        if soft >= hard {
            return None;
        }
        if let Err(e) = setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
            tracing::info!("jobs: the open-file limit stays at {soft}: {e}");
            return None;
        }
        tracing::info!("jobs: open-file limit raised from {soft} to {hard}");
        Some((soft, hard))
    });
}

/// `shell` as an absolute path when it is a bare name found in `PATH`, so every
/// spawn skips the lookup.
pub(super) fn resolve_in_path(shell: &Path) -> PathBuf {
    if shell.components().count() != 1 {
        return shell.to_owned();
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|dir| dir.join(shell))
        .find(|candidate| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .unwrap_or_else(|| shell.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_allowlisted_variables_pass() {
        let vars = [
            ("PATH", "/bin"),
            ("GITHUB_TOKEN", "x"),
            ("DATABASE_URL", "postgres://u:p@h/db"),
            ("MYSQL_PWD", "z"),
            ("LC_ALL", "C"),
            ("HOME", "/root"),
            ("EXTRA", "1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()));
        let kept: Vec<String> = job_env(vars, &["EXTRA".to_owned()])
            .into_iter()
            .map(|(k, _)| k.into_string().unwrap())
            .collect();
        assert_eq!(kept, ["PATH", "LC_ALL", "HOME", "EXTRA"]);
    }
}
