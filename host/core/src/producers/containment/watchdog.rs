//! The watchdog: a process outside every job that cleans up if the host dies
//! without doing so itself.

use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::Stdio;

use super::procfs::{protect, remove_leader};
use super::{ActiveMode, JOB_MARKER_VAR};

/// A process outside every job that cleans up after the host if it dies without
/// doing so itself: it blocks reading a pipe only the host holds, and when that
/// read ends (the host exited, crashed or was SIGKILLed) it kills what is left of
/// the jobs and removes the spill directory.
pub(super) struct Watchdog {
    pipe: Option<OwnedFd>,
    child: Option<std::process::Child>,
}

impl Watchdog {
    pub(super) fn start(
        shell: &Path,
        mode: &ActiveMode,
        token: &str,
        spill_dir: &Path,
    ) -> std::io::Result<Watchdog> {
        let kill = match mode {
            ActiveMode::Cgroup(root) => format!(
                "echo 1 > {root}/cgroup.kill 2>/dev/null; \
                 for i in $(seq 1 200); do \
                   [ -d {root} ] || break; \
                   for d in {root}/*/; do [ -d \"$d\" ] && rmdir \"$d\" 2>/dev/null; done; \
                   rmdir {root} 2>/dev/null && break; sleep 0.01; \
                 done",
                root = shell_quote(&root.display().to_string()),
            ),
            ActiveMode::Fallback => format!(
                "for round in 1 2 3 4 5 6 7 8; do found=; \
                   for p in /proc/[0-9]*; do \
                     if grep -qz '^{JOB_MARKER_VAR}={token}\\.' \"$p/environ\" 2>/dev/null; then \
                       kill -STOP \"${{p#/proc/}}\" 2>/dev/null; kill -KILL \"${{p#/proc/}}\" 2>/dev/null; found=1; \
                     fi; \
                   done; [ -z \"$found\" ] && break; \
                 done"
            ),
        };
        let script = format!(
            "read -r _; {kill}; rm -rf {spill}",
            spill = shell_quote(&spill_dir.display().to_string())
        );
        // Both ends close-on-exec, so no job inherits the write end (the read
        // end becomes the watchdog's stdin through dup2).
        let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
        let mut cmd = std::process::Command::new(shell);
        cmd.arg("--noprofile")
            .arg("--norc")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::from(read))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .env_clear()
            .env(
                "PATH",
                std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()),
            );
        // Its own session: no terminal signal aimed at the host's group reaches it.
        // SAFETY: setsid is async-signal-safe.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
                nix::unistd::setsid().map_err(std::io::Error::from)?;
                Ok(())
            });
        }
        let child = cmd.spawn()?;
        protect(child.id());
        Ok(Watchdog {
            pipe: Some(write),
            child: Some(child),
        })
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        if let Some(pipe) = self.pipe.take() {
            // One line lets the watchdog go without waiting for EOF.
            let mut file = std::fs::File::from(pipe);
            let _ = file.write_all(b"\n");
        }
        if let Some(mut child) = self.child.take() {
            // Reap it off-thread; it finishes within moments.
            std::thread::spawn(move || {
                let _ = child.wait();
                remove_leader(child.id());
            });
        }
    }
}

pub(super) fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_survives_quotes() {
        assert_eq!(shell_quote("a'b"), "'a'\\''b'");
    }
}
