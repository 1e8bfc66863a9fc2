//! Durable sessions through the real binary: a client that restarts finds its
//! jobs, a person's `ps`, `logs`, `kill` and `wait`, the linger, the socket's
//! owner check and a daemon killed with SIGKILL.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::cli::{BIN, Client, Logs, cache_dir};

mod chaos;
mod sessions;

/// A private runtime directory of the test's own, so its daemon is its own;
/// the daemon is stopped when the test ends, however it ends.
pub(crate) struct Runtime {
    dir: tempfile::TempDir,
}

impl Runtime {
    pub(crate) fn new() -> Runtime {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        Runtime { dir }
    }

    /// `XDG_RUNTIME_DIR` for the test's processes.
    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `XDG_STATE_HOME` for the test's processes: where the journal is.
    pub(crate) fn state(&self) -> PathBuf {
        self.path().join("state")
    }

    /// Where the daemon listens.
    pub(crate) fn daemon_dir(&self) -> PathBuf {
        self.path().join("jobs-host")
    }

    /// `jobs-host ARGS`, in this runtime.
    pub(crate) fn command(&self, args: &[&str]) -> std::process::Command {
        let mut cmd = std::process::Command::new(BIN);
        cmd.arg("--cache-dir")
            .arg(cache_dir())
            .args(args)
            .env("XDG_RUNTIME_DIR", self.path())
            .env("XDG_STATE_HOME", self.state())
            .env_remove("JOBS_HOST_SESSION");
        cmd
    }

    /// Runs `jobs-host ARGS` to its end, with `input` on stdin.
    pub(crate) fn run(&self, args: &[&str], input: &str) -> Output {
        use std::io::Write;
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    }

    /// `jobs-host ARGS` as JSON (`ps --json`).
    pub(crate) fn json(&self, args: &[&str]) -> Value {
        let out = self.run(args, "");
        assert!(out.status.success(), "{}", stderr(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// `jobs-host mcp --session KEY FLAGS` under a real MCP client.
    pub(crate) async fn mcp(
        &self,
        key: &str,
        flags: &[&str],
    ) -> (RunningService<RoleClient, Client>, Logs) {
        let (logs_tx, logs) = mpsc::unbounded_channel();
        let runtime = self.path().to_owned();
        let transport =
            TokioChildProcess::new(tokio::process::Command::new(BIN).configure(|cmd| {
                cmd.arg("--cache-dir")
                    .arg(cache_dir())
                    .arg("mcp")
                    .arg("--session")
                    .arg(key)
                    .args(flags)
                    .env("XDG_RUNTIME_DIR", &runtime)
                    .env("XDG_STATE_HOME", runtime.join("state"));
            }))
            .unwrap();
        let client = Client { logs: logs_tx }.serve(transport).await.unwrap();
        (client, logs)
    }

    /// [`Runtime::mcp`] with the client's pid, to kill it.
    pub(crate) async fn mcp_with_pid(
        &self,
        key: &str,
        flags: &[&str],
    ) -> (RunningService<RoleClient, Client>, i32) {
        let (logs_tx, _) = mpsc::unbounded_channel();
        let runtime = self.path().to_owned();
        let transport =
            TokioChildProcess::new(tokio::process::Command::new(BIN).configure(|cmd| {
                cmd.arg("--cache-dir")
                    .arg(cache_dir())
                    .arg("mcp")
                    .arg("--session")
                    .arg(key)
                    .args(flags)
                    .env("XDG_RUNTIME_DIR", &runtime)
                    .env("XDG_STATE_HOME", runtime.join("state"));
            }))
            .unwrap();
        let pid = transport.id().unwrap() as i32;
        let client = Client { logs: logs_tx }.serve(transport).await.unwrap();
        (client, pid)
    }

    /// The daemon's pid, from its lock file.
    pub(crate) fn daemon_pid(&self) -> Option<i32> {
        std::fs::read_to_string(self.daemon_dir().join("daemon.lock"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        // Private again (a test may have opened it up), so the stop is heard.
        let _ = std::fs::set_permissions(self.path(), std::fs::Permissions::from_mode(0o700));
        let _ = std::fs::set_permissions(self.daemon_dir(), std::fs::Permissions::from_mode(0o700));
        let _ = self.command(&["daemon", "--stop"]).output();
        // Monitors a killed daemon left (a test that killed one), with
        // their jobs: nothing of a test outlives it.
        for monitor in self.monitors() {
            // SAFETY: kill of a monitor of this test's own runtime.
            unsafe { libc::kill(monitor, libc::SIGKILL) };
        }
    }
}

impl Runtime {
    /// The live monitors of this runtime's jobs: those whose lease file
    /// (their descriptor 5) is in its state directory. A monitor is known
    /// by its name, whether exec'd or forked by the monitors' parent.
    pub(crate) fn monitors(&self) -> Vec<i32> {
        let state = self.state();
        processes_named("jobs-monitor")
            .into_iter()
            .filter(|pid| {
                std::fs::read_link(format!("/proc/{pid}/fd/5"))
                    .is_ok_and(|lease| lease.starts_with(&state))
            })
            .collect()
    }

    /// The daemon's monitors' parent, if it runs.
    pub(crate) fn monitors_parent(&self) -> Option<i32> {
        let daemon = self.daemon_pid()?;
        processes_named("jobs-monitors")
            .into_iter()
            .find(|pid| parent_of(*pid) == Some(daemon) && !is_zombie(*pid))
    }
}

/// The live processes whose name (`comm`) is `name`.
pub(crate) fn processes_named(name: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim_end() == name)
        })
        .collect()
}

/// Whether `pid` has ended and waits to be reaped.
pub(crate) fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(") ")
            .is_some_and(|(_, s)| s.starts_with('Z'))
    })
}

/// `pid`'s parent, from `/proc/PID/stat` (its fourth field, after the
/// parenthesised name, which may hold anything).
pub(crate) fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, after) = stat.rsplit_once(") ")?;
    after.split(' ').nth(1)?.parse().ok()
}

pub(crate) fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub(crate) fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Polls `check` every 20 ms for at most 60 s (the bound only keeps a broken
/// build from hanging; what is waited for happens within moments).
pub(crate) async fn eventually<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    for _ in 0..3000 {
        if let Some(found) = check() {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{what} never happened");
}

/// A dev server: it prints the port it listens on, then a line per visitor.
pub(crate) const DEV_SERVER: &str = r#"exec python3 -u -c '
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen()
print("listening on", s.getsockname()[1])
while True:
    c, _ = s.accept()
    print("got a visitor")
    c.close()
'"#;
