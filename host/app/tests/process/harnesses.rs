//! What clients do to a call that the happy path never does: cancel it, leave
//! while it waits, send bytes that are not UTF-8, or ask for structured output.
//! Each test speaks JSON-RPC to the real binary line by line.
//!
//! (Over 500 lines: a test module of its own, one test per way a client
//! leaves the happy path.)

use serde_json::{Value, json};

use super::containment::{Host, Options, PLAIN, running, soon};

/// A FIFO that a job blocks on until the test writes to it.
pub(crate) struct Gate {
    dir: tempfile::TempDir,
}

impl Gate {
    pub(crate) fn new() -> Gate {
        let dir = tempfile::tempdir().unwrap();
        let status = std::process::Command::new("mkfifo")
            .arg(dir.path().join("gate"))
            .status()
            .unwrap();
        assert!(status.success());
        Gate { dir }
    }

    /// A command that waits for the gate, then prints `done`.
    pub(crate) fn command(&self) -> String {
        format!(
            "read line < {}; echo done",
            self.dir.path().join("gate").display()
        )
    }

    pub(crate) fn open(&self) {
        std::fs::write(self.dir.path().join("gate"), "go\n").unwrap();
    }
}

fn notice_of(id: &str, command: &str) -> String {
    format!(
        "background job {id} (bash: {command}) finished [status: completed, exit code: 0]. Read its output with job_output."
    )
}

/// Waits for the logging notification that carries a notice.
async fn next_notice(host: &mut Host) -> Value {
    host.recv_where(|m| m["method"] == "notifications/message")
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_wait_loses_no_output_and_no_notice() {
    let mut host = Host::start(PLAIN).await;
    let gate = Gate::new();
    let command = gate.command();
    assert_eq!(
        host.text("bash", json!({"command": command})).await,
        "started background job bash-1"
    );
    // A long wait, then the client gives up on it (as the TypeScript SDK does
    // when its request timeout fires).
    host.send(
        &json!({"jsonrpc": "2.0", "id": 900, "method": "tools/call",
                "params": {"name": "job_output", "arguments": {"job_id": "bash-1", "wait": true, "timeout_ms": 600000}}})
        .to_string(),
    )
    .await;
    host.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": 900, "reason": "timed out"}})
        .to_string(),
    )
    .await;
    // Messages are taken in order: once the ping after it is answered, the
    // cancel has reached the call, whatever the machine's load.
    host.send(&json!({"jsonrpc": "2.0", "id": 901, "method": "ping"}).to_string())
        .await;
    assert_eq!(host.recv().await["id"], 901);
    // The job ends with nobody reading: its notice is owed, once.
    gate.open();
    let notice = next_notice(&mut host).await;
    assert_eq!(
        notice["params"]["data"]["text"],
        notice_of("bash-1", &command)
    );
    // The next result carries the notice first, and the output is all there.
    let (texts, is_error) = host.call("job_output", json!({"job_id": "bash-1"})).await;
    assert!(!is_error);
    assert_eq!(
        texts,
        [
            notice_of("bash-1", &command),
            "done\n[status: completed, exit code: 0]".to_owned()
        ]
    );
    // The cancelled request never got an answer (the reply above was the
    // next one with an id), and nothing is announced twice.
    let (texts, _) = host.call("job_list", json!({})).await;
    assert_eq!(
        texts,
        [format!("bash-1 [bash] completed \u{2014} {command}")]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_stdin_during_a_wait_ends_the_jobs_and_the_host() {
    let mut host = Host::start(PLAIN).await;
    let (_, lines) = host.job_lines("echo $$; exec sleep 300", 1).await;
    let pid: i32 = lines[0].parse().unwrap();
    host.send(
        &json!({"jsonrpc": "2.0", "id": 901, "method": "tools/call",
                "params": {"name": "job_output", "arguments": {"job_id": "bash-1", "wait": true, "timeout_ms": 600000}}})
        .to_string(),
    )
    .await;
    // A request the host answers after the wait's: by then the wait is
    // registered or already aborted, and either way stdin closes mid-call.
    host.request("ping", json!({})).await;
    drop(host.stdin.take());
    let status = host.exit().await;
    assert!(status.success(), "{status:?}");
    assert!(soon(|| !running(pid)).await, "{pid} outlived the session");
    assert!(host.spill_dirs().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_that_is_not_utf8_gets_a_parse_error_and_the_session_goes_on() {
    let mut host = Host::start(PLAIN).await;
    assert_eq!(
        host.text("bash", json!({"command": "sleep 300"})).await,
        "started background job bash-1"
    );
    let stdin = host.stdin.as_mut().unwrap();
    tokio::io::AsyncWriteExt::write_all(
        stdin,
        b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\",\"x\":\"\xff\"}\n",
    )
    .await
    .unwrap();
    // Not JSON, but its id can be read: the answer carries it.
    assert_eq!(
        host.recv().await,
        json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32700, "message": "Parse error: the line is not UTF-8"}})
    );
    // The job and the session are still there.
    assert_eq!(
        host.text("job_list", json!({})).await,
        "bash-1 [bash] running \u{2014} sleep 300"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn structured_output_carries_the_text_and_the_notices() {
    let mut host = Host::start(Options {
        flags: &["--structured-output"],
        ..PLAIN
    })
    .await;
    let tools = host.request("tools/list", json!({})).await;
    let tools = tools["result"]["tools"].as_array().unwrap();
    for tool in tools {
        let schema = &tool["outputSchema"];
        assert_eq!(schema["required"], json!(["text", "notices"]), "{tool}");
    }
    assert_eq!(
        tools[2]["outputSchema"]["properties"]["value"]["type"], "array",
        "the job list's canonical value"
    );
    // The job ends only once the start has answered, so no notice can come
    // with that answer.
    let gate = Gate::new();
    let command = gate.command();
    let started = host
        .request(
            "tools/call",
            json!({"name": "bash", "arguments": {"command": command}}),
        )
        .await;
    assert_eq!(
        started["result"]["structuredContent"],
        json!({"text": "started background job bash-1", "notices": [],
               "value": {"kind": "background", "jobId": "bash-1"}})
    );
    gate.open();
    let notice = next_notice(&mut host).await;
    let notice = notice["params"]["data"]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(notice, notice_of("bash-1", &command));
    let list = host
        .request("tools/call", json!({"name": "job_list", "arguments": {}}))
        .await;
    let result = &list["result"];
    let text = format!("bash-1 [bash] completed \u{2014} {command}");
    assert_eq!(result["content"][0]["text"], notice.as_str());
    assert_eq!(result["content"][1]["text"], text.as_str());
    assert_eq!(result["structuredContent"]["text"], text.as_str());
    assert_eq!(result["structuredContent"]["notices"], json!([notice]));
    assert_eq!(
        result["structuredContent"]["value"][0]["status"],
        "completed"
    );
    let bad = host
        .request(
            "tools/call",
            json!({"name": "job_output", "arguments": {"job_id": "bash-9"}}),
        )
        .await;
    assert_eq!(
        bad["result"]["structuredContent"],
        json!({"text": "Error: unknown job bash-9", "notices": []})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_arguments_are_bounded_through_the_binary() {
    let mut host = Host::start(Options {
        flags: &["--extensions", "all"],
        ..PLAIN
    })
    .await;
    let (_, lines) = host
        .job_lines(
            "for i in $(seq 300); do head -c 4000 /dev/zero | tr '\\0' a; echo; done; \
             head -c 20000000 /dev/zero | tr '\\0' x; echo; echo last",
            1,
        )
        .await;
    assert!(!lines.is_empty());
    // The job writes all of that, then ends.
    let mut listed = String::new();
    for _ in 0..6000 {
        listed = host.text("job_list", json!({})).await;
        if listed.contains("bash-1 [bash] completed") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(listed.contains("bash-1 [bash] completed"), "{listed}");
    // A pattern past 4 KiB is refused before anything is compiled.
    let (texts, is_error) = host
        .call(
            "job_log",
            json!({"job_id": "bash-1", "search": "\\w".repeat(500_000)}),
        )
        .await;
    assert!(is_error);
    assert_eq!(
        texts.last().unwrap(),
        "Error: invalid search: the pattern is 1000000 bytes, more than the limit of 4096"
    );
    // A slow pattern stops within its budget and says where.
    let text = host
        .text(
            "job_log",
            json!({"job_id": "bash-1", "search": "[a-z]{3000}[A-Z]", "stream": "stdout", "context": 0}),
        )
        .await;
    assert!(text.contains("; stopped early at stdout line "), "{text}");
    // A line of 20 MB pages as its first kilobytes.
    let text = host
        .text(
            "job_log",
            json!({"job_id": "bash-1", "start_line": 301, "lines": 2}),
        )
        .await;
    let rows: Vec<&str> = text.lines().collect();
    assert!(
        rows[1].starts_with("301:x") && rows[1].ends_with('\u{2026}'),
        "{}",
        &text[..200]
    );
    assert!(rows[1].len() < 4200);
    assert_eq!(rows[2], "302:last");
    // A name with a control character is refused and starts nothing.
    let (texts, is_error) = host
        .call(
            "bash",
            json!({"command": "sleep 300", "name": "web\u{1b}[2J"}),
        )
        .await;
    assert!(is_error);
    assert_eq!(
        texts.last().unwrap(),
        "Error: invalid name: it contains the control character U+001B"
    );
    assert!(!host.text("job_list", json!({})).await.contains("bash-2"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_that_asked_for_progress_reports_it_until_it_answers() {
    let mut host = Host::start(Options {
        flags: &["--progress-interval-ms", "50"],
        ..PLAIN
    })
    .await;
    let gate = Gate::new();
    let command = gate.command();
    host.text("bash", json!({"command": command})).await;
    host.send(
        &json!({"jsonrpc": "2.0", "id": 902, "method": "tools/call",
                "params": {"name": "job_output", "arguments": {"job_id": "bash-1", "wait": true, "timeout_ms": 60000},
                           "_meta": {"progressToken": "p1"}}})
        .to_string(),
    )
    .await;
    // Three reports, counting up, then the job ends and the call answers.
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let report = host
            .recv_where(|m| m["method"] == "notifications/progress")
            .await;
        assert_eq!(report["params"]["progressToken"], "p1");
        let message = report["params"]["message"].as_str().unwrap().to_owned();
        assert!(
            message.starts_with("waiting for bash-1: running after "),
            "{message}"
        );
        seen.push(report["params"]["progress"].as_f64().unwrap());
    }
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
    gate.open();
    // Reports may still come until the answer; none comes after it.
    let answer = host.recv_where(|m| m["id"] == 902).await;
    assert_eq!(
        answer["result"]["content"][0]["text"],
        "done\n[status: completed, exit code: 0]"
    );
    host.send(r#"{"jsonrpc":"2.0","id":903,"method":"ping"}"#)
        .await;
    let next = host
        .recv_where(|m| m["id"] == 903 || m["method"] == "notifications/progress")
        .await;
    assert_eq!(next["id"], 903, "a report came after the answer: {next}");
    // A wait without a token hears nothing of the kind.
    host.text("bash", json!({"command": "sleep 300"})).await;
    host.send(
        &json!({"jsonrpc": "2.0", "id": 904, "method": "tools/call",
                "params": {"name": "job_output", "arguments": {"job_id": "bash-2", "wait": true, "timeout_ms": 300}}})
        .to_string(),
    )
    .await;
    let next = host
        .recv_where(|m| m["id"] == 904 || m["method"] == "notifications/progress")
        .await;
    assert_eq!(next["id"], 904, "{next}");
}

/// The `_meta` every request of a revision 2026-07-28 session carries, and a
/// host spoken to line by line (no `initialize`: that revision has none).
fn handshake_free_host(
    flags: &[&str],
) -> (
    Value,
    tokio::process::Child,
    tokio::process::ChildStdin,
    tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
) {
    use tokio::io::AsyncBufReadExt;
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "stateless", "version": "0"}
    });
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_jobs-host"))
        .arg("mcp")
        .args(flags)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    (meta, child, stdin, lines)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_of_revision_2026_07_28_needs_no_handshake() {
    use tokio::io::AsyncWriteExt;
    let (meta, mut child, mut stdin, mut lines) = handshake_free_host(&[]);
    let lines_in = [
        // Before the session: a notification is dropped (the service would
        // end the session on it), a request without the revision's _meta is
        // answered with its id.
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": meta}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
               "params": {"name": "job_list", "arguments": {}, "_meta": meta}}),
    ];
    for line in lines_in {
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    }
    stdin.flush().await.unwrap();
    let mut answers = std::collections::BTreeMap::new();
    while answers.len() < 3 {
        let line = tokio::time::timeout(std::time::Duration::from_secs(60), lines.next_line())
            .await
            .expect("an answer")
            .unwrap()
            .expect("stdout open");
        let value: Value = serde_json::from_str(&line).unwrap();
        if let Some(id) = value["id"].as_u64() {
            answers.insert(id, value);
        }
    }
    assert_eq!(answers[&1]["error"]["code"], -32602, "{}", answers[&1]);
    assert_eq!(
        answers[&2]["result"]["tools"][0]["name"], "bash",
        "{}",
        answers[&2]
    );
    assert_eq!(
        answers[&3]["result"]["content"][0]["text"], "(no background jobs)",
        "{}",
        answers[&3]
    );
    drop(stdin);
    assert!(child.wait().await.unwrap().success());
}

/// The texts of every logging notification `host` has read so far.
fn logged_texts(host: &Host) -> Vec<String> {
    host.logged
        .iter()
        .map(|m| {
            m["params"]["data"]["text"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

/// Polls the job list until `id` has ended and a result has carried a notice
/// (the notice of a job can come a result after the list first shows it
/// ended); the notices each answer carried.
async fn until_ended(host: &mut Host, id: &str, mut notices: Vec<String>) -> Vec<String> {
    // Bounded only so a broken build fails instead of hanging.
    for _ in 0..3000 {
        let (mut texts, _) = host.call("job_list", json!({})).await;
        let list = texts.pop().unwrap();
        notices.extend(texts);
        if list.contains(&format!("{id} [bash] completed")) && !notices.is_empty() {
            return notices;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("{id} never ended with a notice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_level_above_notice_keeps_notices_to_the_next_result() {
    let mut host = Host::start(PLAIN).await;
    let reply = host
        .request("logging/setLevel", json!({"level": "error"}))
        .await;
    assert_eq!(reply["result"], json!({}), "{reply}");
    // A job this short may end before its start's own result, which then
    // carries its notice.
    let (mut started, _) = host.call("bash", json!({"command": "true"})).await;
    started.pop();
    let mut carried = until_ended(&mut host, "bash-1", started).await;
    // The notice came with a result, once, and not as a log message.
    let (mut later, _) = host.call("job_list", json!({})).await;
    later.pop();
    carried.extend(later);
    assert_eq!(carried, [notice_of("bash-1", "true")]);
    // Back at `info`, the next notice is pushed as well. The forwarder takes
    // notices in order, so once this one is logged, the first was weighed
    // (and held back) before it.
    host.request("logging/setLevel", json!({"level": "info"}))
        .await;
    host.text("bash", json!({"command": "true"})).await;
    let pushed = next_notice(&mut host).await;
    assert_eq!(
        pushed["params"]["data"]["text"],
        notice_of("bash-2", "true")
    );
    assert_eq!(logged_texts(&host), [notice_of("bash-2", "true")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revision_2026_07_28_gets_notices_only_in_results() {
    use tokio::io::AsyncWriteExt;
    let (meta, _child, mut stdin, mut lines) = handshake_free_host(&[]);
    let mut logged = 0;
    let mut next_id = 0;
    let mut call = async |name: &str, arguments: Value| -> Value {
        next_id += 1;
        let line = json!({"jsonrpc": "2.0", "id": next_id, "method": "tools/call",
                          "params": {"name": name, "arguments": arguments, "_meta": meta}});
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        stdin.flush().await.unwrap();
        loop {
            let line = tokio::time::timeout(std::time::Duration::from_secs(60), lines.next_line())
                .await
                .expect("an answer")
                .unwrap()
                .expect("stdout open");
            let value: Value = serde_json::from_str(&line).unwrap();
            if value["method"] == "notifications/message" {
                logged += 1;
            }
            if value["id"] == next_id {
                return value["result"]["content"].clone();
            }
        }
    };
    // A job this short may end before its start's own result, which then
    // carries its notice.
    let started = call("bash", json!({"command": "true"})).await;
    let started = started.as_array().unwrap();
    let mut carried: Vec<String> = started[..started.len() - 1]
        .iter()
        .map(|c| c["text"].as_str().unwrap().to_owned())
        .collect();
    for round in 0.. {
        assert!(round < 3000, "bash-1 never ended with a notice");
        let content = call("job_list", json!({})).await;
        let texts: Vec<String> = content
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["text"].as_str().unwrap().to_owned())
            .collect();
        carried.extend(texts[..texts.len() - 1].iter().cloned());
        // The notice can come a result after the list first shows the end.
        if texts.last().unwrap().contains("bash-1 [bash] completed") && !carried.is_empty() {
            break;
        }
    }
    // Two more round trips after the notice was taken: nothing is logged,
    // and nothing is carried again.
    for _ in 0..2 {
        let content = call("job_list", json!({})).await;
        assert_eq!(content.as_array().unwrap().len(), 1, "{content}");
    }
    assert_eq!(carried, [notice_of("bash-1", "true")]);
    assert_eq!(logged, 0, "a 2026-07-28 session got logging notifications");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revision_2026_07_28_logs_a_notice_to_a_request_that_asked() {
    use tokio::io::AsyncWriteExt;
    let (meta, _child, mut stdin, mut lines) =
        handshake_free_host(&["--progress-interval-ms", "20"]);
    let mut send = async |line: Value| {
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        stdin.flush().await.unwrap();
    };
    let mut next = async || -> Value {
        let line = tokio::time::timeout(std::time::Duration::from_secs(60), lines.next_line())
            .await
            .expect("a message")
            .unwrap()
            .expect("stdout open");
        serde_json::from_str(&line).unwrap()
    };
    let (first, second) = (Gate::new(), Gate::new());
    // One at a time: requests are served concurrently, and the ids follow
    // the order the starts are made in.
    for (id, gate) in [(1, &first), (2, &second)] {
        send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": "bash", "arguments": {"command": gate.command()}, "_meta": meta}}))
        .await;
        while next().await["id"] != id {}
    }
    let mut asking = meta.clone();
    asking["io.modelcontextprotocol/logLevel"] = json!("info");
    asking["progressToken"] = json!(77);
    send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                "params": {"name": "job_output", "arguments": {"job_id": "bash-1", "wait": true, "timeout_ms": 60000},
                           "_meta": asking}}))
    .await;
    // Progress for the wait says its request is being handled.
    loop {
        let m = next().await;
        if m["method"] == "notifications/progress" {
            break;
        }
        assert_ne!(m["method"], "notifications/message", "{m}");
    }
    // The second job ends while the request that asked is in flight: logged.
    second.open();
    let logged = loop {
        let m = next().await;
        if m["method"] == "notifications/message" {
            break m;
        }
    };
    assert_eq!(
        logged["params"]["data"]["text"],
        notice_of("bash-2", &second.command())
    );
    first.open();
    loop {
        let m = next().await;
        if m["id"] == 3 {
            let texts: Vec<&str> = m["result"]["content"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["text"].as_str().unwrap())
                .collect();
            // Placed before the result as well, as every notice is.
            assert_eq!(texts[0], notice_of("bash-2", &second.command()), "{m}");
            assert!(texts[1].starts_with("done\n"), "{m}");
            break;
        }
        assert_ne!(m["method"], "notifications/message", "logged twice: {m}");
    }
}

/// A refused line's answer goes out before the answers to the lines after
/// it, and none is dropped when the input ends right after: a client that
/// sends a bad line and then a ping reads the refusal first, every time.
#[test]
fn refusals_keep_their_place_and_survive_the_end_of_input() {
    use std::io::Write;
    const PAIRS: usize = 400;
    let mut input = String::new();
    input.push_str(
        r#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#,
    );
    input.push('\n');
    input.push_str(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    input.push('\n');
    for i in 0..PAIRS {
        // Not a JSON-RPC message (answered with `id: null`), then a ping.
        input.push_str(if i % 2 == 0 { "[]\n" } else { "42\n" });
        input.push_str(&format!(r#"{{"jsonrpc":"2.0","id":{i},"method":"ping"}}"#));
        input.push('\n');
    }
    let mut child = std::process::Command::new(crate::cli::BIN)
        .arg("mcp")
        .arg("--cache-dir")
        .arg(crate::cli::cache_dir())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Written whole, then closed: the end of input comes right after the
    // last ping.
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(out.status.success());
    let answers: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Every refusal and every ping's answer, once; the refusal of the bad
    // line before ping `i` goes out before ping `i`'s answer (the pings go
    // through the service, so later refusals may pass them).
    assert_eq!(answers.len(), 1 + 2 * PAIRS, "{answers:?}");
    let mut refusals = 0;
    for answer in &answers {
        if answer["id"] == "init" {
            continue;
        }
        if answer["id"].is_null() {
            assert_eq!(answer["error"]["code"], -32600, "{answer}");
            refusals += 1;
        } else {
            let i = answer["id"].as_u64().unwrap() as usize;
            assert_eq!(answer, &json!({"jsonrpc": "2.0", "id": i, "result": {}}));
            assert!(
                refusals > i,
                "ping {i} answered before the refusal of the line before it"
            );
        }
    }
    assert_eq!(refusals, PAIRS);
}
