//! Durable sessions through the real binary: a client that restarts finds its
//! jobs, a person's `ps`, `logs`, `kill` and `wait`, the linger, the socket's
//! owner check and a daemon killed with SIGKILL.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::cli::{BIN, Client, Gate, Logs, cache_dir, call, gone_soon, texts};

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
    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `XDG_STATE_HOME` for the test's processes: where the journal is.
    fn state(&self) -> PathBuf {
        self.path().join("state")
    }

    /// Where the daemon listens.
    fn daemon_dir(&self) -> PathBuf {
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
    fn run(&self, args: &[&str], input: &str) -> Output {
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
    async fn mcp(&self, key: &str, flags: &[&str]) -> (RunningService<RoleClient, Client>, Logs) {
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
    async fn mcp_with_pid(
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
    fn daemon_pid(&self) -> Option<i32> {
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
    fn monitors(&self) -> Vec<i32> {
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
    fn monitors_parent(&self) -> Option<i32> {
        let daemon = self.daemon_pid()?;
        processes_named("jobs-monitors")
            .into_iter()
            .find(|pid| parent_of(*pid) == Some(daemon) && !is_zombie(*pid))
    }
}

/// The live processes whose name (`comm`) is `name`.
fn processes_named(name: &str) -> Vec<i32> {
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
fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(") ")
            .is_some_and(|(_, s)| s.starts_with('Z'))
    })
}

/// `pid`'s parent, from `/proc/PID/stat` (its fourth field, after the
/// parenthesised name, which may hold anything).
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, after) = stat.rsplit_once(") ")?;
    after.split(' ').nth(1)?.parse().ok()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Polls `check` every 20 ms for at most 60 s (the bound only keeps a broken
/// build from hanging; what is waited for happens within moments).
async fn eventually<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    for _ in 0..3000 {
        if let Some(found) = check() {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{what} never happened");
}

/// A dev server: it prints the port it listens on, then a line per visitor.
const DEV_SERVER: &str = r#"exec python3 -u -c '
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_client_finds_its_dev_server_and_one_notice() {
    let runtime = Runtime::new();
    let key = "project-one";
    let (client, _logs) = runtime.mcp(key, &[]).await;
    let started = client
        .call_tool(call(
            "bash",
            json!({"command": DEV_SERVER, "run_in_background": true}),
        ))
        .await
        .unwrap();
    assert_eq!(texts(&started), ["started background job bash-1"]);
    // bash-2 ends only when the test opens its gate, once the client is gone.
    let gate = Gate::new();
    let quick_command = format!(
        "{} >/dev/null; echo done while away; exit 4",
        gate.command()
    );
    let quick = client
        .call_tool(call(
            "bash",
            json!({"command": quick_command, "run_in_background": true}),
        ))
        .await
        .unwrap();
    assert_eq!(texts(&quick), ["started background job bash-2"]);
    // The model reads the server's first line, so its cursor is past it.
    let mut seen = String::new();
    let port: u16 = loop {
        let read = client
            .call_tool(call(
                "job_output",
                json!({"job_id": "bash-1", "wait": true, "timeout_ms": 200}),
            ))
            .await
            .unwrap();
        let items = texts(&read);
        // Nothing has ended yet, so no notice comes with these reads.
        assert_eq!(items.len(), 1, "{items:?}");
        // Each result ends with its status line, without a newline.
        seen.push_str(&items[0]);
        seen.push('\n');
        if let Some(port) = seen
            .lines()
            .find_map(|l| l.strip_prefix("listening on "))
            .and_then(|p| p.trim().parse().ok())
        {
            break port;
        }
    };

    // The client goes (a harness restart).
    client.cancel().await.unwrap();
    gate.open("go").await;

    // bash-2 ends while no client is connected; a person waits for it.
    let waited = runtime.run(&["wait", "--session", key, "bash-2"], "");
    assert_eq!(waited.status.code(), Some(4), "{}", stderr(&waited));
    assert_eq!(stderr(&waited), "bash-2 completed (exit code: 4)\n");
    // Someone visits the server meanwhile: output the model has not read.
    std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    eventually("the visit in the logs", || {
        let out = runtime.run(&["logs", "--session", key, "bash-1"], "");
        stdout(&out).contains("got a visitor").then_some(())
    })
    .await;
    let logs = runtime.run(&["logs", "--session", key, "bash-1"], "");
    assert_eq!(
        stdout(&logs),
        format!("listening on {port}\ngot a visitor\n")
    );

    // A person sees both jobs, the server's pid and its port.
    let ps = runtime.json(&["ps", "--session", key, "--json"]);
    let jobs = ps["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2, "{ps}");
    assert_eq!(jobs[0]["id"], "bash-1");
    assert_eq!(jobs[0]["status"], "running");
    assert_eq!(jobs[0]["session"], key);
    assert_eq!(jobs[0]["ports"], json!([port]));
    let pid = jobs[0]["pid"].as_i64().unwrap() as i32;
    assert_eq!(jobs[1]["status"], "completed");
    assert_eq!(jobs[1]["detail"], "exit code: 4");
    let table = stdout(&runtime.run(&["ps", "--session", key], ""));
    assert!(table.starts_with("ID "), "{table}");
    assert!(table.contains(&format!(" {pid} ")), "{table}");

    // A new client process with the same key: the server still runs, the
    // unread output is intact at the model's cursor, and the notice of the
    // job that ended in between comes once, before the first result.
    let (client, _logs) = runtime.mcp(key, &[]).await;
    let read = client
        .call_tool(call("job_output", json!({"job_id": "bash-1"})))
        .await
        .unwrap();
    assert_eq!(
        texts(&read),
        [
            format!(
                "background job bash-2 (bash: {quick_command}) finished [status: completed, exit code: 4]. Read its output with job_output."
            ),
            "got a visitor\n[status: running]".to_owned(),
        ]
    );
    let list = client.call_tool(call("job_list", json!({}))).await.unwrap();
    assert_eq!(texts(&list).len(), 1, "{:?}", texts(&list));
    // One client at a time: a console on the same key is refused (after
    // trying for a few seconds, in case the other was on its way out).
    let busy = runtime.run(&["shell", "--session", key], "job_list\n");
    assert!(!busy.status.success());
    assert!(
        stderr(&busy).contains(&format!(
            "session \"{key}\" is in use by another client (pid "
        )),
        "{}",
        stderr(&busy)
    );
    let done = client
        .call_tool(call("job_output", json!({"job_id": "bash-2"})))
        .await
        .unwrap();
    assert_eq!(
        texts(&done),
        ["done while away\n[status: completed, exit code: 4]"]
    );

    // A person kills the server; the model is told.
    let killed = runtime.run(&["kill", "bash-1"], "");
    assert!(killed.status.success(), "{}", stderr(&killed));
    let waited = runtime.run(&["wait", "bash-1"], "");
    assert_eq!(
        waited.status.code(),
        Some(128 + libc::SIGTERM),
        "{}",
        stderr(&waited)
    );
    assert!(gone_soon(pid).await, "the server outlived its kill");
    let after = client.call_tool(call("job_list", json!({}))).await.unwrap();
    let after = texts(&after);
    assert_eq!(after.len(), 2, "{after:?}");
    assert!(
        after[0].starts_with("background job bash-1 (bash: exec python3")
            && after[0].contains("[status: killed, signal: SIGTERM]"),
        "{after:?}"
    );
    client.cancel().await.unwrap();

    // Stopping the daemon ends the session; `ps` then shows what the
    // journal recorded.
    let daemon = runtime.daemon_pid().unwrap();
    let stopped = runtime.run(&["daemon", "--stop"], "");
    assert!(stopped.status.success(), "{}", stderr(&stopped));
    assert!(gone_soon(daemon).await);
    let recorded = runtime.json(&["ps", "--all", "--json"]);
    assert_eq!(recorded["daemon"], false, "{recorded}");
    assert_eq!(recorded["journal"], true, "{recorded}");
    let jobs = recorded["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2, "{recorded}");
    assert_eq!(
        (&jobs[0]["id"], &jobs[0]["status"], &jobs[0]["detail"]),
        (
            &json!("bash-1"),
            &json!("killed"),
            &json!("signal: SIGTERM")
        )
    );
    assert_eq!(
        (&jobs[1]["id"], &jobs[1]["status"], &jobs[1]["detail"]),
        (
            &json!("bash-2"),
            &json!("completed"),
            &json!("exit code: 4")
        )
    );
    assert_eq!(jobs[1]["session"], key);
    let table = stdout(&runtime.run(&["ps", "--session", key], ""));
    assert!(
        table.starts_with(
            "jobs-host: no daemon is running for this user; as the journal recorded them:\nID "
        ),
        "{table}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_without_a_client_lingers_then_ends_with_its_jobs() {
    let runtime = Runtime::new();
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let script = format!(
        "bash {{\"command\": \"echo $$ > {}; exec sleep 300\", \"run_in_background\": true}}\n",
        pid_file.display()
    );
    let out = runtime.run(&["shell", "--session", "short", "--linger", "1s"], &script);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        format!("> {}started background job bash-1\n", script)
    );
    let pid: i32 = eventually("the job's pid", || {
        std::fs::read_to_string(&pid_file).ok()?.trim().parse().ok()
    })
    .await;
    // Bad input is refused and changes nothing.
    for (args, message) in [
        (
            &["shell", "--session", "x", "--linger", "5"][..],
            "expected a duration",
        ),
        (&["mcp", "--linger", "5s"][..], "--linger needs --session"),
        (
            &["logs", "--session", "nope", "bash-1"][..],
            "no session \"nope\"",
        ),
    ] {
        let out = runtime.run(args, "");
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr(&out).contains(message), "{args:?}: {}", stderr(&out));
    }
    // Still there after its client left...
    let ps = runtime.json(&["ps", "--session", "short", "--json"]);
    assert_eq!(ps["jobs"][0]["status"], "running", "{ps}");
    // ...and gone with its session once the linger is over.
    assert!(
        gone_soon(pid).await,
        "the job outlived its session's linger"
    );
    eventually("the session's end", || {
        let ps = runtime.json(&["ps", "--all", "--json"]);
        ps["jobs"]
            .as_array()
            .is_none_or(Vec::is_empty)
            .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_daemon_per_user_and_no_other_user() {
    let runtime = Runtime::new();
    // A runtime directory others may reach is refused, and left as it is.
    let daemon_dir = runtime.daemon_dir();
    std::fs::create_dir(&daemon_dir).unwrap();
    std::fs::set_permissions(&daemon_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let refused = runtime.run(&["shell", "--session", "k"], "job_list\n");
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("has mode 0755: others may reach it; refusing to use it"),
        "{}",
        stderr(&refused)
    );
    std::fs::set_permissions(&daemon_dir, std::fs::Permissions::from_mode(0o700)).unwrap();

    let out = runtime.run(&["shell", "--session", "k"], "job_list\n");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "> job_list\n(no background jobs)\n");
    let first = runtime.daemon_pid().expect("a daemon runs");
    // A second daemon exits at once, saying so.
    let second = runtime.run(&["daemon"], "");
    assert!(second.status.success());
    assert!(
        stdout(&second).contains(&format!(
            "a daemon already runs for this user (pid {first})"
        )),
        "{}",
        stdout(&second)
    );

    // A background job may not drive the daemon (a fenced one could open
    // an unfenced session through it).
    let probe = format!(
        "bash {{\"command\": \"XDG_RUNTIME_DIR={} {BIN} ps --all 2>&1; echo rc=$?\", \"run_in_background\": true}}\nsettle\njob_output bash-1\n",
        runtime.path().display()
    );
    let out = runtime.run(&["shell", "--session", "k"], &probe);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains(
            "jobs-host: refused: a background job may not drive the daemon of durable sessions\nrc=1\n"
        ),
        "{}",
        stdout(&out)
    );

    // Another user reaching the socket (its directory opened up for the
    // test) is refused by the daemon itself.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        std::fs::set_permissions(runtime.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&daemon_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let socket = daemon_dir.join("daemon.sock");
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o777)).unwrap();
        let probe = std::process::Command::new("python3")
            .arg("-c")
            .arg(
                "import socket, sys\n\
                 s = socket.socket(socket.AF_UNIX)\n\
                 s.connect(sys.argv[1])\n\
                 # The daemon answers a refused client at once and closes.\n\
                 try:\n    s.sendall(b'{\"protocol\":1,\"kind\":\"ctl\",\"request\":{\"op\":\"ps\",\"session\":null}}\\n')\n\
                 except BrokenPipeError:\n    pass\n\
                 print(s.makefile().readline(), end='')\n",
            )
            .arg(&socket)
            .uid(65534)
            .gid(65534)
            .output()
            .unwrap();
        assert!(probe.status.success(), "{}", stderr(&probe));
        assert_eq!(
            stdout(&probe),
            "{\"error\":\"refused: this daemon serves uid 0 only, not uid 65534\"}\n"
        );
        std::fs::set_permissions(&daemon_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    } else {
        eprintln!("the other-user probe needs root; it ran only the rest");
    }

    // A daemon killed with SIGKILL leaves its socket behind, and its running
    // job to its monitor. With the monitor killed too, the job is lost (it
    // dies with its monitor, leaving no end), and shown so, never as
    // finished: while no daemon runs, and in the next session of its key.
    let started = runtime.run(
        &["shell", "--session", "k"],
        "bash {\"command\": \"exec sleep 300\", \"run_in_background\": true}\n",
    );
    assert!(started.status.success(), "{}", stderr(&started));
    // SAFETY: kill on a pid we read from the daemon's own lock file.
    unsafe { libc::kill(first, libc::SIGKILL) };
    assert!(gone_soon(first).await);
    assert!(daemon_dir.join("daemon.sock").exists());
    let job_of = |ps: &Value| -> Value {
        ps["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["id"] == "bash-2")
            .cloned()
            .unwrap()
    };
    let down = runtime.json(&["ps", "--session", "k", "--json"]);
    assert_eq!(down["daemon"], false, "{down}");
    let job = job_of(&down);
    assert_eq!(job["status"], "running", "{down}");
    let detail = job["detail"].as_str().unwrap().to_owned();
    let monitor: i32 = detail
        .strip_prefix("kept by its monitor (pid ")
        .and_then(|rest| rest.split(')').next())
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("{detail}"));
    assert!(
        detail.ends_with(&format!("after its daemon (pid {first}) stopped")),
        "{detail}"
    );
    // SAFETY: kill of the job's monitor, which ps named.
    unsafe { libc::kill(monitor, libc::SIGKILL) };
    eventually("the monitor gone", || {
        let ps = runtime.json(&["ps", "--session", "k", "--json"]);
        (job_of(&ps)["status"] == "lost").then_some(())
    })
    .await;
    // The next client starts a new daemon over the stale socket; its
    // session has the killed daemon's jobs (the finished one as it was, its
    // end seen, so no notice), and tells the model, once, that the other
    // was lost.
    let again = runtime.run(&["shell", "--session", "k"], "job_list\njob_list\n");
    assert!(again.status.success(), "{}", stderr(&again));
    let list = format!(
        "bash-1 [bash] completed — XDG_RUNTIME_DIR={} {BIN} ps --all 2>&1; echo rc=$?\nbash-2 [bash] failed — exec sleep 300\n",
        runtime.path().display()
    );
    assert_eq!(
        stdout(&again),
        format!(
            "> job_list\n[notice via inject] background job bash-2 (bash: exec sleep 300) finished [status: failed, lost: its monitor (pid {monitor}) is gone and recorded no end; its output is kept up to then]. Read its output with job_output.\n{list}> job_list\n{list}"
        )
    );
    assert_ne!(runtime.daemon_pid(), Some(first));
    runtime.run(&["daemon", "--stop"], "");

    // A journal that is not one is refused, and left as it is.
    let journal = runtime.state().join("jobs-host").join("journal.db");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", journal.display()));
    }
    std::fs::write(&journal, "not a journal").unwrap();
    let refused = runtime.run(&["shell", "--session", "k"], "job_list\n");
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("journal.db is not a jobs-host journal"),
        "{}",
        stderr(&refused)
    );
    assert_eq!(std::fs::read_to_string(&journal).unwrap(), "not a journal");
}

/// What a model made of one job over many clients.
#[derive(Default)]
struct Seen {
    /// Its output, as the reads gave it.
    output: String,
    /// Notices of its end.
    notices: usize,
    /// Whether a read showed its end before any notice did.
    read_end_first: bool,
    /// Whether its end was seen at all.
    ended: bool,
}

/// Takes one tool result apart: notices (by job id) and the result text.
fn record(seen: &mut std::collections::BTreeMap<String, Seen>, items: &[String]) -> String {
    let (result, notices) = items.split_last().expect("a result");
    for notice in notices {
        let id = notice
            .strip_prefix("background job ")
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("not a notice: {notice}"));
        let job = seen.entry(id.to_owned()).or_default();
        job.notices += 1;
        job.ended = true;
    }
    result.clone()
}

/// A job's read, into `seen`: its output up to the status line.
fn record_read(seen: &mut Seen, text: &str) {
    let (output, status) = text
        .rsplit_once("[status: ")
        .unwrap_or_else(|| panic!("no status in {text:?}"));
    if output != "(no new output)\n" {
        seen.output.push_str(output);
    }
    if !status.starts_with("running") {
        if !seen.ended {
            seen.read_end_first = true;
        }
        seen.ended = true;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_killed_at_random_points_lose_no_output_and_no_notice() {
    let runtime = Runtime::new();
    let key = "chaos";
    let rounds = 50;
    // A fixed seed: the same kill points on every run.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut random = move |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    let expected = |round: usize| -> String {
        (1..=40)
            .map(|i| format!("job {round} line {i}\n"))
            .collect()
    };
    let gates: Vec<Gate> = (0..rounds).map(|_| Gate::new()).collect();
    let mut seen = std::collections::BTreeMap::<String, Seen>::new();
    for (round, gate) in gates.iter().enumerate() {
        let (client, pid) = runtime.mcp_with_pid(key, &[]).await;
        let id = format!("bash-{}", round + 1);
        let command = format!(
            "{} >/dev/null; for i in $(seq 40); do echo \"job {round} line $i\"; done; exit {}",
            gate.command(),
            round % 5
        );
        let started = client
            .call_tool(call(
                "bash",
                json!({"command": command, "run_in_background": true}),
            ))
            .await
            .unwrap();
        // The previous round's job ended while no client was connected: its
        // notice comes with this client's first result, and only there.
        let items = texts(&started);
        let notices: Vec<&str> = items[..items.len() - 1]
            .iter()
            .map(String::as_str)
            .collect();
        match round {
            0 => assert!(notices.is_empty(), "{notices:?}"),
            _ => {
                assert_eq!(notices.len(), 1, "{notices:?}");
                assert!(
                    notices[0].starts_with(&format!("background job bash-{round} ")),
                    "{notices:?}"
                );
            }
        }
        let text = record(&mut seen, &items);
        assert_eq!(text, format!("started background job {id}"));
        seen.entry(id.clone()).or_default();
        // Some reads and lists, then (most rounds) a wait on this round's
        // job, which cannot end before its gate opens, and the client is
        // killed with SIGKILL wherever it is.
        for _ in 0..random(4) {
            let pick = format!("bash-{}", random(round as u64 + 1) + 1);
            let read = client
                .call_tool(call("job_output", json!({"job_id": pick})))
                .await
                .unwrap();
            let text = record(&mut seen, &texts(&read));
            record_read(seen.get_mut(&pick).unwrap(), &text);
        }
        let waiting = (random(3) != 0).then(|| {
            let peer = client.peer().clone();
            let id = id.clone();
            tokio::spawn(async move {
                peer.call_tool(call(
                    "job_output",
                    json!({"job_id": id, "wait": true, "timeout_ms": 60000}),
                ))
                .await
            })
        });
        // Often long enough for the wait to be pending in the daemon; what
        // is checked holds wherever the kill lands.
        tokio::time::sleep(Duration::from_millis(random(30))).await;
        // SAFETY: the pid of this test's own client process.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        if let Some(waiting) = waiting {
            // Killed: the wait has no answer.
            assert!(waiting.await.unwrap().is_err());
        }
        drop(client);
        // The job ends with no client connected.
        gate.open("go").await;
        let gone = runtime.run(&["wait", "--session", key, &id], "");
        assert_eq!(
            gone.status.code(),
            Some((round % 5) as i32),
            "{}",
            stderr(&gone)
        );
    }
    // A last client reads every job to its end; the last job's notice comes
    // first.
    let (client, _) = runtime.mcp_with_pid(key, &[]).await;
    let first = client.call_tool(call("job_list", json!({}))).await.unwrap();
    let items = texts(&first);
    assert_eq!(items.len(), 2, "{items:?}");
    assert!(
        items[0].starts_with(&format!("background job bash-{rounds} ")),
        "{items:?}"
    );
    record(&mut seen, &items);
    for round in 0..rounds {
        let id = format!("bash-{}", round + 1);
        loop {
            let read = client
                .call_tool(call("job_output", json!({"job_id": id})))
                .await
                .unwrap();
            let text = record(&mut seen, &texts(&read));
            record_read(seen.get_mut(&id).unwrap(), &text);
            if !text.ends_with("[status: running]") {
                break;
            }
        }
    }
    let list = client.call_tool(call("job_list", json!({}))).await.unwrap();
    record(&mut seen, &texts(&list));
    for round in 0..rounds {
        let id = format!("bash-{}", round + 1);
        let job = &seen[&id];
        assert_eq!(
            job.output,
            expected(round),
            "{id}'s output, as the model read it"
        );
        // Every job ended with no client connected, before the next one
        // came: its notice came once, before any read could show its end.
        assert_eq!(job.notices, 1, "{id}'s notices");
        assert!(!job.read_end_first, "{id}'s end was read before its notice");
    }
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemons_killed_at_random_points_lose_no_job_output_exit_or_notice() {
    let runtime = Runtime::new();
    let key = "crash";
    // 50 in CI; the benchmark runs 1,000 (JOBS_HOST_CHAOS_ROUNDS).
    let rounds: usize = std::env::var("JOBS_HOST_CHAOS_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(50);
    // A fixed seed: the same kill points on every run.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut random = move |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    let expected = |round: usize| -> String {
        (1..=20)
            .map(|i| format!("job {round} line {i}\n"))
            .collect()
    };
    let lines = 300;
    let streamed: String = (1..=lines).map(|i| format!("stream {i}\n")).collect();
    let gates: Vec<Gate> = (0..rounds).map(|_| Gate::new()).collect();
    let mut seen = std::collections::BTreeMap::<String, Seen>::new();
    // Every job stays to be read at the end, however many rounds (and every
    // daemon in turn takes the session on with this setting).
    let retained = (rounds + 1).to_string();
    let flags = ["--max-retained-jobs", retained.as_str()];
    for (round, gate) in gates.iter().enumerate() {
        let (client, pid) = runtime.mcp_with_pid(key, &flags).await;
        if round == 0 {
            // One job writes all along, under every daemon in turn.
            let started = client
                .call_tool(call(
                    "bash",
                    json!({
                        "command": format!("for i in $(seq {lines}); do echo \"stream $i\"; sleep 0.025; done"),
                        "run_in_background": true
                    }),
                ))
                .await
                .unwrap();
            assert_eq!(
                record(&mut seen, &texts(&started)),
                "started background job bash-1"
            );
            seen.entry("bash-1".to_owned()).or_default();
        }
        let id = format!("bash-{}", round + 2);
        let command = format!(
            "{} >/dev/null; for i in $(seq 20); do echo \"job {round} line $i\"; done; exit {}",
            gate.command(),
            round % 5
        );
        let started = client
            .call_tool(call(
                "bash",
                json!({"command": command, "run_in_background": true}),
            ))
            .await
            .unwrap();
        // The previous round's job ended while no daemon ran: the next
        // daemon collected its end, and its notice comes with this client's
        // first result, once.
        let items = texts(&started);
        let before = round
            .checked_sub(1)
            .map(|r| seen[&format!("bash-{}", r + 2)].notices);
        let text = record(&mut seen, &items);
        assert_eq!(text, format!("started background job {id}"), "{items:?}");
        if let Some(before) = before {
            let previous = format!("bash-{}", round + 1);
            assert_eq!(seen[&previous].notices, before + 1, "{items:?}");
        }
        seen.entry(id.clone()).or_default();
        // Some reads, then (some rounds) a wait on this round's job, which
        // cannot end before its gate opens, and the daemon is killed with
        // SIGKILL wherever it is.
        for _ in 0..random(4) {
            let pick = format!("bash-{}", random(round as u64 + 2) + 1);
            let read = client
                .call_tool(call("job_output", json!({"job_id": pick})))
                .await
                .unwrap();
            let text = record(&mut seen, &texts(&read));
            record_read(seen.get_mut(&pick).unwrap(), &text);
        }
        let waiting = (random(3) == 0).then(|| {
            let peer = client.peer().clone();
            let id = id.clone();
            tokio::spawn(async move {
                peer.call_tool(call(
                    "job_output",
                    json!({"job_id": id, "wait": true, "timeout_ms": 60000}),
                ))
                .await
            })
        });
        tokio::time::sleep(Duration::from_millis(random(30))).await;
        let daemon = runtime.daemon_pid().expect("a daemon runs");
        // SAFETY: the pid of this test's own daemon, from its lock file.
        unsafe { libc::kill(daemon, libc::SIGKILL) };
        assert!(gone_soon(daemon).await);
        if let Some(waiting) = waiting {
            // Its daemon is gone: the wait has no answer.
            assert!(waiting.await.unwrap().is_err());
        }
        // SAFETY: the pid of this test's own client process.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        drop(client);
        // The job ends while no daemon runs: its monitor records its end.
        gate.open("go").await;
        eventually("the job's end recorded by its monitor", || {
            let ps = runtime.json(&["ps", "--session", key, "--json"]);
            ps["jobs"]
                .as_array()?
                .iter()
                .any(|j| j["id"] == id.as_str() && j["status"] == "ended")
                .then_some(())
        })
        .await;
    }
    // A last client reads every job to its end.
    let (client, _) = runtime.mcp_with_pid(key, &flags).await;
    let first = client.call_tool(call("job_list", json!({}))).await.unwrap();
    record(&mut seen, &texts(&first));
    let last = format!("bash-{}", rounds + 1);
    assert_eq!(seen[&last].notices, 1, "{:?}", texts(&first));
    for n in 1..=rounds + 1 {
        let id = format!("bash-{n}");
        loop {
            let read = client
                .call_tool(call(
                    "job_output",
                    json!({"job_id": id, "wait": true, "timeout_ms": 60000}),
                ))
                .await
                .unwrap();
            let text = record(&mut seen, &texts(&read));
            record_read(seen.get_mut(&id).unwrap(), &text);
            if !text.ends_with("[status: running]") {
                assert!(
                    text.ends_with(&format!(
                        "[status: completed, exit code: {}]",
                        if n == 1 { 0 } else { (n - 2) % 5 }
                    )),
                    "{id}: {text}"
                );
                break;
            }
        }
    }
    assert_eq!(
        seen["bash-1"].output, streamed,
        "the writer's output, as the model read it"
    );
    for round in 0..rounds {
        let id = format!("bash-{}", round + 2);
        let job = &seen[&id];
        assert_eq!(
            job.output,
            expected(round),
            "{id}'s output, as the model read it"
        );
        // Every job ended while no daemon ran: its notice came once, from
        // the daemon that collected its end, before any read showed it.
        assert_eq!(job.notices, 1, "{id}'s notices");
        assert!(!job.read_end_first, "{id}'s end was read before its notice");
    }
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_monitors_parent_killed_alone_takes_no_job_with_it() {
    let runtime = Runtime::new();
    let (client, _logs) = runtime.mcp("forks", &[]).await;
    let gate = Gate::new();
    let command = format!("{} >/dev/null; echo outlived; exit 3", gate.command());
    let started = client
        .call_tool(call(
            "bash",
            json!({"command": command, "run_in_background": true}),
        ))
        .await
        .unwrap();
    assert_eq!(texts(&started), ["started background job bash-1"]);
    // The job's monitor was forked by the daemon's monitors' parent.
    let first_parent = runtime.monitors_parent().expect("a monitors' parent");
    let monitor = eventually("bash-1's monitor", || runtime.monitors().first().copied()).await;
    assert_eq!(parent_of(monitor), Some(first_parent));

    // Every item the model is shown, to count its notices.
    let mut told: Vec<String> = Vec::new();
    // SAFETY: the pid of this test's own daemon's child.
    unsafe { libc::kill(first_parent, libc::SIGKILL) };
    assert!(gone_soon(first_parent).await);
    // The next job's start finds the parent gone and is exec'd by the
    // daemon; the one after goes through a new monitors' parent.
    for (n, command) in [(2, "echo two"), (3, "echo three; exec sleep 300")] {
        let started = client
            .call_tool(call(
                "bash",
                json!({"command": command, "run_in_background": true}),
            ))
            .await
            .unwrap();
        // bash-2's notice may come with bash-3's start.
        let items = texts(&started);
        assert_eq!(
            items.last(),
            Some(&format!("started background job bash-{n}")),
            "{items:?}"
        );
        told.extend(items);
    }
    let second = runtime.monitors_parent().expect("another monitors' parent");
    assert_ne!(second, first_parent);
    // A forked monitor takes its name once it runs (the start's result
    // comes once its setup is done).
    eventually("bash-3's monitor, forked by the new parent", || {
        let forked = runtime
            .monitors()
            .into_iter()
            .filter(|m| parent_of(*m) == Some(second))
            .count();
        (forked == 1).then_some(())
    })
    .await;
    // Its first monitor and job go on, with the daemon's lease.
    assert!(
        runtime.monitors().contains(&monitor),
        "bash-1's monitor died"
    );
    let list = client.call_tool(call("job_list", json!({}))).await.unwrap();
    let list = texts(&list);
    assert!(
        list.last()
            .is_some_and(|l| l.starts_with("bash-1 [bash] running — ")),
        "{list:?}"
    );
    told.extend(list);
    // bash-1 ends: its real exit code, its output and at most one notice
    // (none when the read shows the end first).
    gate.open("go").await;
    for (id, expected) in [
        ("bash-1", "outlived\n[status: completed, exit code: 3]"),
        ("bash-2", "two\n[status: completed, exit code: 0]"),
        ("bash-3", "three\n[status: running]"),
    ] {
        let read = client
            .call_tool(call(
                "job_output",
                json!({"job_id": id, "wait": id == "bash-1", "timeout_ms": 60000}),
            ))
            .await
            .unwrap();
        let read = texts(&read);
        assert_eq!(read.last().map(String::as_str), Some(expected), "{read:?}");
        told.extend(read);
    }
    for (id, command) in [("bash-1", command.as_str()), ("bash-2", "echo two")] {
        let notice = format!(
            "background job {id} (bash: {command}) finished [status: completed, exit code: {}]. Read its output with job_output.",
            if id == "bash-1" { 3 } else { 0 }
        );
        let times = told.iter().filter(|t| **t == notice).count();
        assert!(times <= 1, "{id}'s notice came {times} times: {told:?}");
    }
    client.cancel().await.unwrap();
}
