//! Containment of `jobs-host mcp` as a whole process: what a job can do to the
//! host and its client, what happens to jobs when the host is signalled or
//! killed, and what a malformed line on stdin gets. Each test spawns the real
//! binary and speaks JSON-RPC to it line by line.
//!
//! (Over 500 lines: a test module of its own, the host fixture and one test
//! per hostile job.)

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

const BIN: &str = env!("CARGO_BIN_EXE_jobs-host");
/// Bounds every read from the host, so a broken build fails instead of hanging.
const PATIENCE: Duration = Duration::from_secs(120);

fn cache_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("component-cache")
}

/// `jobs-host mcp` under a line-by-line JSON-RPC client.
pub(crate) struct Host {
    child: Child,
    pub(crate) stdin: Option<ChildStdin>,
    lines: Lines<BufReader<ChildStdout>>,
    next_id: u64,
    /// The host's TMPDIR: its spill directory lives here.
    tmp: tempfile::TempDir,
    /// Every `notifications/message` read so far, whoever asked for what.
    pub(crate) logged: Vec<Value>,
}

#[derive(Clone, Copy)]
pub(crate) struct Options<'a> {
    pub(crate) flags: &'a [&'a str],
    pub(crate) env: &'a [(&'a str, &'a str)],
    /// Run the host as this uid and gid (needs root).
    pub(crate) user: Option<u32>,
}

pub(crate) const PLAIN: Options<'static> = Options {
    flags: &[],
    env: &[],
    user: None,
};

impl Host {
    pub(crate) async fn start(options: Options<'_>) -> Host {
        let init = json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "containment-test", "version": "0"}
        });
        Host::start_with(options, init).await
    }

    /// [`Host::start`] with these `initialize` params.
    pub(crate) async fn start_with(options: Options<'_>, init: Value) -> Host {
        let tmp = tempfile::tempdir().unwrap();
        let cache = match options.user {
            // A sandboxed host makes its spill directory in the default
            // cache directory (its `XDG_CACHE_HOME`, below): its own, as is
            // its cache, seeded with the compiled component, so a test sees
            // that host's spill directory alone.
            None if options.flags.contains(&"--sandbox") => {
                let own = tmp.path().join("cache");
                std::fs::create_dir(&own).unwrap();
                std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o700)).unwrap();
                for entry in std::fs::read_dir(cache_dir())
                    .into_iter()
                    .flatten()
                    .flatten()
                {
                    if entry.file_name().to_string_lossy().ends_with(".cwasm") {
                        std::fs::copy(entry.path(), own.join(entry.file_name())).unwrap();
                    }
                }
                own
            }
            None => cache_dir(),
            // A cache the other user can write.
            Some(_) => {
                let cache = std::env::temp_dir().join("jobs-host-test-cache-unprivileged");
                std::fs::create_dir_all(&cache).unwrap();
                std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).unwrap();
                cache
            }
        };
        let mut cmd = Command::new(BIN);
        cmd.arg("mcp")
            .args(options.flags)
            .arg("--cache-dir")
            .arg(cache)
            .env("TMPDIR", tmp.path())
            .env("XDG_CACHE_HOME", tmp.path())
            .envs(options.env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        if let Some(id) = options.user {
            std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
            cmd.uid(id).gid(id).env("HOME", tmp.path());
        }
        let mut child = cmd.spawn().unwrap();
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut host = Host {
            child,
            stdin: Some(stdin),
            lines,
            next_id: 1,
            tmp,
            logged: Vec::new(),
        };
        let init = host.request("initialize", init).await;
        assert!(init.get("result").is_some(), "{init}");
        host.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await;
        host
    }

    pub(crate) fn pid(&self) -> i32 {
        self.child.id().unwrap() as i32
    }

    pub(crate) async fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        stdin.flush().await.unwrap();
    }

    /// The next message that is not a notification.
    pub(crate) async fn recv(&mut self) -> Value {
        self.recv_where(|m| m.get("id").is_some()).await
    }

    /// The next message `wanted` picks; the others are dropped.
    pub(crate) async fn recv_where(&mut self, wanted: impl Fn(&Value) -> bool) -> Value {
        loop {
            let line = tokio::time::timeout(PATIENCE, self.lines.next_line())
                .await
                .expect("the host answers")
                .unwrap()
                .expect("the host's stdout is open");
            let value: Value = serde_json::from_str(&line).unwrap();
            if value["method"] == "notifications/message" {
                self.logged.push(value.clone());
            }
            if wanted(&value) {
                return value;
            }
        }
    }

    pub(crate) async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send(&request.to_string()).await;
        let reply = self.recv().await;
        assert_eq!(reply["id"], id, "{reply}");
        reply
    }

    /// A tool call: its text blocks (notices first) and whether it failed.
    pub(crate) async fn call(&mut self, tool: &str, args: Value) -> (Vec<String>, bool) {
        let reply = self
            .request("tools/call", json!({"name": tool, "arguments": args}))
            .await;
        let result = &reply["result"];
        let texts = result["content"]
            .as_array()
            .unwrap_or_else(|| panic!("{reply}"))
            .iter()
            .map(|c| c["text"].as_str().unwrap().to_owned())
            .collect();
        (texts, result["isError"].as_bool().unwrap_or(false))
    }

    /// The last text of a call (its result, after any notices).
    pub(crate) async fn text(&mut self, tool: &str, args: Value) -> String {
        self.call(tool, args).await.0.pop().unwrap()
    }

    /// Starts a job and reads it until its output holds `lines` lines.
    pub(crate) async fn job_lines(&mut self, command: &str, lines: usize) -> (String, Vec<String>) {
        let started = self.text("bash", json!({"command": command})).await;
        let id = started
            .strip_prefix("started background job ")
            .unwrap_or_else(|| panic!("{started}"))
            .to_owned();
        // The job's own lines: not a status line, nor a read's placeholder
        // (a wait that ended with nothing new, which a slow machine gets).
        let real = |text: &str| -> Vec<String> {
            text.lines()
                .filter(|l| !l.starts_with('[') && *l != "(no new output)" && !l.is_empty())
                .map(str::to_owned)
                .collect()
        };
        let mut seen = String::new();
        loop {
            let text = self
                .text(
                    "job_output",
                    json!({"job_id": id, "wait": true, "timeout_ms": 100}),
                )
                .await;
            // A job that ended with fewer lines ends the reading too: a clear
            // mismatch, not a wait without end.
            let ended = !text.ends_with("[status: running]");
            seen.push_str(&text);
            seen.push('\n');
            if ended || real(&seen).len() >= lines {
                break;
            }
        }
        (id, real(&seen))
    }

    pub(crate) async fn exit(&mut self) -> ExitStatus {
        tokio::time::timeout(PATIENCE, self.child.wait())
            .await
            .expect("the host exits")
            .unwrap()
    }

    /// Spill directories of this host still in its TMPDIR (or its default
    /// cache directory, where a sandboxed host makes it).
    pub(crate) fn spill_dirs(&self) -> Vec<PathBuf> {
        spill_dirs(self.tmp.path())
    }
}

fn spill_dirs(tmp: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(tmp)
        .unwrap()
        .chain(
            std::fs::read_dir(tmp.join("jobs-host"))
                .into_iter()
                .flatten(),
        )
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("jobs-host-"))
        })
        .collect()
}

/// Whether `pid` is a live process (a zombie awaiting its reaper counts as gone).
pub(crate) fn running(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            let state = stat
                .rsplit(')')
                .next()
                .and_then(|r| r.split_whitespace().next());
            !matches!(state, Some("Z") | Some("X"))
        }
    }
}

/// Whether `check` holds within 30 s (what the test waits for was already set
/// in motion; the bound only keeps a broken build from hanging).
pub(crate) async fn soon(mut check: impl FnMut() -> bool) -> bool {
    for _ in 0..3000 {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

/// A tree of escapees, one of them ignoring SIGTERM, each printing its pid.
const TREE: &str = "setsid bash -c 'trap \"\" TERM; echo $$; exec sleep 300' & \
     setsid sleep 300 >/dev/null 2>&1 & echo $!; \
     ( ( exec sleep 300 ) >/dev/null 2>&1 & echo $! ); \
     trap '' TERM; sleep 300";

async fn no_job_survives(signal: i32, flags: &[&str]) {
    let mut all = vec!["--shutdown-grace-ms", "200", "--kill-grace-ms", "600000"];
    all.extend_from_slice(flags);
    let mut host = Host::start(Options {
        flags: &all,
        ..PLAIN
    })
    .await;
    let (_, lines) = host.job_lines(TREE, 3).await;
    let pids: Vec<i32> = lines.iter().map(|l| l.parse().unwrap()).collect();
    assert_eq!(pids.len(), 3, "{lines:?}");
    let spill = host.spill_dirs();
    assert_eq!(spill.len(), 1);
    if flags.contains(&"--sandbox") {
        assert_eq!(
            spill[0].parent(),
            Some(host.tmp.path().join("jobs-host").as_path())
        );
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(host.pid()),
        nix::sys::signal::Signal::try_from(signal).unwrap(),
    )
    .unwrap();
    let status = host.exit().await;
    use std::os::unix::process::ExitStatusExt;
    if signal == libc::SIGKILL {
        assert_eq!(status.signal(), Some(libc::SIGKILL));
    } else {
        assert_eq!(status.code(), Some(128 + signal), "{flags:?}");
    }
    for pid in pids {
        assert!(
            soon(|| !running(pid)).await,
            "signal {signal} {flags:?}: job process {pid} outlived the host"
        );
    }
    let tmp = host.tmp.path().to_owned();
    assert!(
        soon(|| spill_dirs(&tmp).is_empty()).await,
        "signal {signal} {flags:?}: spill directory left behind"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_sigint_and_sighup_shut_down_in_order() {
    for signal in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        no_job_survives(signal, &[]).await;
    }
    no_job_survives(libc::SIGTERM, &["--containment", "fallback"]).await;
    no_job_survives(libc::SIGTERM, &["--sandbox", "workspace-write"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_of_the_host_leaves_no_job_behind() {
    no_job_survives(libc::SIGKILL, &[]).await;
    no_job_survives(libc::SIGKILL, &["--containment", "fallback"]).await;
    // The spill directory in the default cache directory goes the same way.
    no_job_survives(libc::SIGKILL, &["--sandbox", "workspace-write"]).await;
}

/// Sandboxed sessions whose caches are elsewhere make their spill
/// directories side by side in the default cache directory: a job of one
/// reads nothing of the other's (its jobs' output, their own temporary
/// directories).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_job_reads_no_other_session_s_spill_directory() {
    let shared = tempfile::tempdir().unwrap();
    let env = [("XDG_CACHE_HOME", shared.path().to_str().unwrap())];
    let options = Options {
        flags: &["--sandbox", "workspace-write"],
        env: &env,
        ..PLAIN
    };
    let mut a = Host::start(options).await;
    let mut b = Host::start(options).await;
    let (_, lines) = b
        .job_lines(
            "echo secret-of-b > $TMPDIR/s && echo $TMPDIR && sleep 600",
            1,
        )
        .await;
    let tmp = PathBuf::from(&lines[0]);
    assert!(tmp.starts_with(shared.path().join("jobs-host")), "{tmp:?}");
    assert_eq!(
        std::fs::read_to_string(tmp.join("s")).unwrap(),
        "secret-of-b\n"
    );
    let (_, lines) = a
        .job_lines(&format!("cat {}/s 2>&1; echo done", tmp.display()), 2)
        .await;
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].ends_with("Permission denied"), "{lines:?}");
    assert_eq!(lines[1], "done");
    drop(a);
    drop(b);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_lines_get_json_rpc_errors_and_change_nothing() {
    let mut host = Host::start(PLAIN).await;
    host.send("this is not json").await;
    assert_eq!(
        host.recv().await,
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error"}})
    );
    host.send(r#"{"jsonrpc":"2.0","id":41}"#).await;
    assert_eq!(
        host.recv().await,
        json!({"jsonrpc": "2.0", "id": 41, "error": {"code": -32600, "message": "Invalid Request"}})
    );
    host.send("[1,2]").await;
    assert_eq!(host.recv().await["error"]["code"], -32600);
    // The session goes on as if nothing had happened.
    assert_eq!(
        host.text("job_list", json!({})).await,
        "(no background jobs)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_commands_and_bad_workdirs_answer_the_bash_call() {
    let mut host = Host::start(PLAIN).await;
    let huge = format!("echo {}", "x".repeat(10 << 20));
    let (texts, is_error) = host.call("bash", json!({"command": huge})).await;
    assert!(is_error);
    assert_eq!(
        texts,
        [format!(
            "Error: invalid command: {} bytes is more than the limit of 65536 bytes",
            (10 << 20) + 5
        )]
    );
    let (texts, is_error) = host
        .call(
            "bash",
            json!({"command": "true", "workdir": "/nonexistent"}),
        )
        .await;
    assert!(is_error);
    assert!(
        texts[0].starts_with("Error: invalid workdir: /nonexistent: "),
        "{texts:?}"
    );
    let (texts, is_error) = host.call("bash", json!({"command": ""})).await;
    assert!(is_error, "{texts:?}");
    assert_eq!(
        host.text("job_list", json!({})).await,
        "(no background jobs)"
    );
    // Many large (but allowed) commands never break a later list.
    for _ in 0..10 {
        let command = format!("true {}", "y".repeat(60_000));
        host.text("bash", json!({"command": command})).await;
    }
    let list = host.text("job_list", json!({})).await;
    assert_eq!(list.lines().count(), 10);
    assert!(list.lines().all(|row| row.len() < 600), "{list}");
    assert!(list.lines().all(|row| row.ends_with('\u{2026}')), "{list}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_get_an_allowlisted_environment() {
    let mut host = Host::start(Options {
        flags: &["--pass-env", "DATABASE_URL", "--set-env", "STAGE=ci"],
        env: &[
            ("DATABASE_URL", "postgres://u:p@db/app"),
            ("MYSQL_PWD", "hunter2"),
            ("GH_PAT", "ghp_secret"),
            ("AWS_SECRET_ACCESS_KEY", "k"),
        ],
        user: None,
    })
    .await;
    let (_, lines) = host
        .job_lines(
            "echo \"db=${DATABASE_URL:-none} pwd=${MYSQL_PWD:-none} pat=${GH_PAT:-none} aws=${AWS_SECRET_ACCESS_KEY:-none} stage=$STAGE\"",
            1,
        )
        .await;
    assert_eq!(
        lines,
        ["db=postgres://u:p@db/app pwd=none pat=none aws=none stage=ci"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unprivileged_job_cannot_reach_the_host() {
    // SAFETY: a plain getter.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: dropping privileges to another user needs root");
        return;
    }
    let nobody = 65534;
    let mut host = Host::start(Options {
        flags: &[],
        env: &[("GH_PAT", "ghp_secret")],
        user: Some(nobody),
    })
    .await;
    let probe = "id -u; \
         cat /proc/$PPID/environ >/dev/null 2>&1 && echo environ-read || echo environ-denied; \
         ls /proc/$PPID/fd >/dev/null 2>&1 && echo fds-listed || echo fds-denied; \
         { printf '{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{}}\\n' > /proc/$PPID/fd/1; } 2>/dev/null \
           && echo forged || echo forge-denied";
    let (id, lines) = host.job_lines(probe, 4).await;
    assert_eq!(
        lines,
        ["65534", "environ-denied", "fds-denied", "forge-denied"],
        "the job ran as nobody and must not reach the host"
    );
    // The next answer is the host's own.
    let reply = host
        .request("tools/call", json!({"name": "job_list", "arguments": {}}))
        .await;
    // Last: the job's notice may come first, if it ended after the reads.
    let text = reply["result"]["content"]
        .as_array()
        .and_then(|c| c.last())
        .and_then(|c| c["text"].as_str())
        .unwrap();
    assert!(text.starts_with(&format!("{id} [bash]")), "{reply}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unprivileged_host_fences_its_jobs_in_a_user_namespace() {
    // SAFETY: a plain getter.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: dropping privileges to another user needs root");
        return;
    }
    let nobody = 65534;
    let work = tempfile::tempdir().unwrap();
    let git = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(work.path())
        .status()
        .unwrap();
    assert!(git.success());
    let chown = std::process::Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(work.path())
        .status()
        .unwrap();
    assert!(chown.success());
    let workdir = work.path().display().to_string();
    let mut host = Host::start(Options {
        flags: &["--sandbox", "workspace-write", "--workdir", &workdir],
        env: &[],
        user: Some(nobody),
    })
    .await;
    // Without the fence nobody could write each of these.
    let outside = format!("/tmp/jobs-host-fence-{}", std::process::id());
    let probe = format!(
        "id -u; \
         {{ echo evil > .git/hooks/pre-commit; }} 2>/dev/null && echo hook-written || echo hook-denied; \
         {{ echo x > {outside}; }} 2>/dev/null && echo outside-written || echo outside-denied; \
         echo ok > mine && cat mine"
    );
    let (_, lines) = host.job_lines(&probe, 4).await;
    assert_eq!(lines, ["65534", "hook-denied", "outside-denied", "ok"]);
    assert!(!work.path().join(".git/hooks/pre-commit").exists());
    assert!(!std::path::Path::new(&outside).exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_stdin_still_ends_the_session_and_its_jobs() {
    let mut host = Host::start(PLAIN).await;
    let (_, lines) = host
        .job_lines("setsid sleep 300 & echo $!; sleep 300", 1)
        .await;
    let pid: i32 = lines[0].parse().unwrap();
    // The client goes away: end of input.
    drop(host.stdin.take());
    let status = host.exit().await;
    assert!(status.success(), "{status:?}");
    assert!(soon(|| !running(pid)).await, "{pid} outlived the session");
    assert!(host.spill_dirs().is_empty());
}
