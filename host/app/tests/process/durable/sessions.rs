//! Durable sessions as a person and a harness meet them: a client that
//! restarts finds its jobs and one notice, a session without a client
//! lingers and then ends, and one daemon serves one user only.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;

use serde_json::{Value, json};

use super::*;
use crate::cli::{Gate, call, gone_soon, texts};

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
    // The same end for a script: one JSON object, the same exit code.
    let waited = runtime.run(&["wait", "--session", key, "--json", "bash-2"], "");
    assert_eq!(waited.status.code(), Some(4), "{}", stderr(&waited));
    let end: Value = serde_json::from_str(&stdout(&waited)).unwrap();
    assert_eq!(
        end,
        json!({"id": "bash-2", "status": "completed", "detail": "exit code: 4", "exit_code": 4})
    );
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
    let killed = runtime.run(&["kill", "--json", "bash-1"], "");
    assert!(killed.status.success(), "{}", stderr(&killed));
    assert_eq!(
        serde_json::from_str::<Value>(&stdout(&killed)).unwrap(),
        json!({"id": "bash-1", "already_finished": false})
    );
    // Ids a person got wrong are answered with what lists the right ones.
    let unknown = runtime.run(&["kill", "bash-9"], "");
    assert_eq!(unknown.status.code(), Some(1));
    assert_eq!(
        stderr(&unknown),
        "jobs-host: no job bash-9 in any session (`jobs-host ps --all` lists them)\n"
    );
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
