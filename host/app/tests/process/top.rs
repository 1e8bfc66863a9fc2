//! `jobs-host top` on a real pseudo-terminal of 24×80, driven with keys as a
//! person would, its screen read back through the host's own terminal model
//! (the one terminal jobs are read through): the first screen, the tail
//! that follows, a kill refused and one confirmed, a filter, a resize,
//! `logs -f` and back, and `q` leaving the terminal as it was, with nothing
//! the model reads consumed.

use std::time::Duration;

use host::capture::{Terminal, TerminalSize};

use crate::console::OnTerminal;
use crate::durable::{Runtime, stdout};

/// What the program shows now, rendered by a terminal of `rows`×`cols`.
fn screen(top: &OnTerminal, rows: u16, cols: u16) -> Vec<String> {
    let mut terminal = Terminal::new(TerminalSize { rows, cols });
    terminal.feed(&top.written());
    terminal.screen().lines
}

/// Waits until the screen has a row for which `wanted` holds.
async fn until(top: &OnTerminal, size: (u16, u16), what: &str, wanted: impl Fn(&str) -> bool) {
    for _ in 0..1500 {
        if screen(top, size.0, size.1).iter().any(|row| wanted(row)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!(
        "never shown: {what}\n{}",
        screen(top, size.0, size.1).join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_shows_the_jobs_follows_a_tail_and_kills_only_when_told() {
    let runtime = Runtime::new();
    // A durable session with one job that writes a line, waits at a gate,
    // writes what the gate lets through, and stays.
    let gate = crate::cli::Gate::new();
    let started = runtime.run(
        &["shell", "--session", "watched", "--linger", "120s"],
        &format!(
            "bash echo top-tail-line; {}; exec sleep 301\n",
            gate.command()
        ),
    );
    assert!(started.status.success(), "{started:?}");
    assert!(stdout(&started).contains("started background job bash-1"));

    let mut top = OnTerminal::spawn(runtime.command(&["top"]));
    let size = (24, 80);
    // The first screen: the job's id, session, status and label, and the
    // tail pane with what it wrote.
    until(&top, size, "bash-1's row", |row| {
        row.starts_with("bash-1") && row.contains("watched") && row.contains("running")
    })
    .await;
    until(&top, size, "the label", |row| {
        row.ends_with("echo top-tail-line;")
    })
    .await;
    until(&top, size, "the tail", |row| row == "top-tail-line").await;
    let first = screen(&top, 24, 80);
    assert!(
        first[0].starts_with("jobs-host top: 1 job(s) in 1 session(s)"),
        "{first:#?}"
    );
    assert!(first[1].starts_with("ID"), "{first:#?}");

    // A kill asks first; any key but y keeps the job.
    top.type_keys("x");
    until(&top, size, "the kill's question", |row| {
        row.starts_with("kill bash-1 of session watched? y kills")
    })
    .await;
    top.type_keys("n");
    until(&top, size, "the job kept", |row| {
        row == "bash-1 left running"
    })
    .await;
    assert_eq!(
        runtime.json(&["ps", "--all", "--json"])["jobs"][0]["status"],
        "running"
    );

    // A filter that matches nothing hides the row; Esc brings it back.
    top.type_keys("/nomatch\r");
    until(&top, size, "the filter", |row| {
        row.contains("filter \"nomatch\"")
    })
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !screen(&top, 24, 80).iter().any(|r| r.starts_with("bash-1")),
        "{:#?}",
        screen(&top, 24, 80)
    );
    top.type_keys("\x1b");
    until(&top, size, "bash-1's row again", |row| {
        row.starts_with("bash-1")
    })
    .await;

    // A wider terminal: the view is laid out again for it.
    top.resize(30, 120);
    until(&top, (30, 120), "the wider label", |row| {
        row.contains("echo top-tail-line; read line < ")
    })
    .await;

    // l runs `logs -f` in the terminal's foreground; ctrl-c there ends it
    // and the view comes back.
    top.type_keys("l");
    until(&top, (30, 120), "logs -f", |row| {
        row == "jobs-host top: following bash-1 of session \"watched\"; ctrl-c comes back"
    })
    .await;
    until(&top, (30, 120), "the followed line", |row| {
        row == "top-tail-line"
    })
    .await;
    // It follows: a line written now shows, and the job has not "ended".
    gate.open("after-the-gate").await;
    until(&top, (30, 120), "a line written while followed", |row| {
        row == "after-the-gate"
    })
    .await;
    assert!(!top.shown().contains("has ended"), "{}", top.shown());
    top.type_keys("\x03");
    until(&top, (30, 120), "the view again", |row| {
        row.starts_with("jobs-host top: 1 job(s)")
    })
    .await;

    // y kills; the row says how the job ended.
    top.type_keys("x");
    until(&top, (30, 120), "the kill's question", |row| {
        row.starts_with("kill bash-1")
    })
    .await;
    top.type_keys("y");
    until(&top, (30, 120), "the killed row", |row| {
        row.starts_with("bash-1") && row.contains("killed SIGTERM")
    })
    .await;

    // q quits and leaves the terminal as it was.
    top.type_keys("q");
    let (code, _, _) = top.wait_for_exit();
    assert_eq!(code, 0, "{}", top.shown());
    assert!(top.cooked(), "top left the terminal in raw mode");
    assert!(
        top.shown().contains("\x1b[?1049l"),
        "the alternate screen was never left"
    );

    // Nothing the model reads was consumed: its first read of the job still
    // has the line that top showed.
    let read = runtime.run(&["shell", "--session", "watched"], "job_output bash-1\n");
    assert!(
        stdout(&read).contains("top-tail-line\nafter-the-gate\n[status: killed, signal: SIGTERM]"),
        "{}",
        stdout(&read)
    );
}

/// Without a terminal, top says what to use instead.
#[test]
fn top_without_a_terminal_points_to_ps() {
    let runtime = Runtime::new();
    let out = runtime.run(&["top"], "");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "jobs-host: top needs a terminal; for a script, `jobs-host ps --all --json` lists the same jobs\n"
    );
}

/// A plain `jobs-host mcp` (no durable session) is seen too, through its
/// own view socket: its row, its tail, a kill the model is told of; its
/// socket goes with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_sees_a_plain_mcp_session_through_its_view() {
    use rmcp::ServiceExt;
    use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
    use serde_json::json;

    use crate::cli::{BIN, Client, cache_dir, call, texts};

    let runtime = Runtime::new();
    let dir = runtime.path().to_owned();
    let transport = TokioChildProcess::new(tokio::process::Command::new(BIN).configure(|cmd| {
        cmd.arg("--cache-dir")
            .arg(cache_dir())
            .arg("mcp")
            .env("XDG_RUNTIME_DIR", &dir)
            .env("XDG_STATE_HOME", dir.join("state"));
    }))
    .unwrap();
    let pid = transport.id().unwrap();
    let (logs, _) = tokio::sync::mpsc::unbounded_channel();
    let client = Client { logs }.serve(transport).await.unwrap();
    let started = client
        .call_tool(call(
            "bash",
            json!({"command": "echo plain-tail-line; exec sleep 302"}),
        ))
        .await
        .unwrap();
    assert_eq!(texts(&started), ["started background job bash-1"]);
    let socket = runtime.daemon_dir().join(format!("mcp-{pid}.sock"));
    assert!(socket.exists(), "no view socket at {}", socket.display());

    let mut top = OnTerminal::spawn(runtime.command(&["top"]));
    let size = (24, 80);
    let key = format!("mcp-{pid}");
    until(&top, size, "the plain session's row", |row| {
        row.starts_with("bash-1") && row.contains(&key) && row.contains("running")
    })
    .await;
    until(&top, size, "its tail", |row| row == "plain-tail-line").await;
    top.type_keys("x");
    until(&top, size, "the kill's question", |row| {
        row.starts_with("kill bash-1 of session mcp-")
    })
    .await;
    top.type_keys("y");
    until(&top, size, "the killed row", |row| {
        row.starts_with("bash-1") && row.contains("killed SIGTERM")
    })
    .await;
    top.type_keys("q");
    assert_eq!(top.wait_for_exit().0, 0, "{}", top.shown());

    // The model reads the kill, and the output top showed is still unread.
    let read = client
        .call_tool(call("job_output", json!({"job_id": "bash-1"})))
        .await
        .unwrap();
    let read = texts(&read).join("\n");
    assert!(
        read.contains("plain-tail-line\n[status: killed, signal: SIGTERM]"),
        "{read}"
    );
    client.cancel().await.unwrap();
    for _ in 0..500 {
        if !socket.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!socket.exists(), "the view socket outlived its process");
}
