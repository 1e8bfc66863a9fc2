//! The opt-in extensions through the real component, a real session and real
//! processes: ready waits, input and signals, paging and search, limits, named
//! jobs and listening ports, in each profile's words, with bad input for each
//! new argument. A mount without them stays as the contract words it.

use std::sync::Arc;

use host::bash::{BashConfig, BashProducer};
use host::capture::OutputLimits;
use host::session::Session;
use host::{JobRegistry, Mount};
use serde_json::{Value, json};

use crate::fixture::runtime;

/// A session over its own registry, mounted with `config`.
async fn session_with(config: &str, bash: BashConfig) -> Session {
    let registry = JobRegistry::default();
    let producer = BashProducer::new(registry.clone(), bash).unwrap();
    let mount = Mount::new(runtime(), registry, config).await.unwrap();
    Session::open("ext", Arc::new(mount), producer).0
}

async fn session(config: &str) -> Session {
    session_with(config, BashConfig::default()).await
}

pub(crate) async fn call(session: &Session, tool: &str, args: Value) -> (String, bool) {
    let reply = session.call(tool, &args).await;
    (reply.outcome.text, reply.outcome.is_error)
}

pub(crate) async fn text(session: &Session, tool: &str, args: Value) -> String {
    let (text, is_error) = call(session, tool, args).await;
    assert!(!is_error, "{tool} failed: {text}");
    text
}

pub(crate) async fn start(session: &Session, args: Value) -> String {
    let started = text(session, "bash", args).await;
    started
        .strip_prefix("started background job ")
        .unwrap_or_else(|| panic!("not started: {started}"))
        .to_owned()
}

/// Waits (within the mount's cap) until the job has settled; its read text.
async fn finished(session: &Session, id: &str) -> String {
    loop {
        let out = text(
            session,
            "job_output",
            json!({"job_id": id, "wait": true, "timeout_ms": 60000}),
        )
        .await;
        if !out.ends_with("[status: running]") {
            return out;
        }
    }
}

/// Polls a search (which consumes nothing) until it finds `pattern` in
/// `stream`; its answer. Bounded generously so a slow machine still passes.
async fn logged(session: &Session, id: &str, pattern: &str, stream: &str) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let found = text(
            session,
            "job_log",
            json!({"job_id": id, "search": pattern, "stream": stream}),
        )
        .await;
        if !found.contains(": 0 matches]") || std::time::Instant::now() > deadline {
            return found;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

const ALL: &str = r#"{"extensions": true}"#;

/// The worked session of the book's extensions chapter: a dev server started by name, waited on
/// until its ready line, found on its port, fetched from a second job, then
/// stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dev_server_is_waited_on_until_ready_found_by_port_and_stopped() {
    let s = session(ALL).await;
    let server = "exec python3 -u -m http.server 0 --bind 127.0.0.1";
    let id = start(&s, json!({"command": server, "name": "web"})).await;
    let ready = text(
        &s,
        "job_output",
        json!({"job_id": id, "until": "^Serving HTTP", "timeout_ms": 60000}),
    )
    .await;
    assert!(
        ready.starts_with("[wait ended: stdout line 1 matched]\n1:Serving HTTP on 127.0.0.1 port "),
        "{ready}"
    );
    let status = ready.lines().last().unwrap();
    let port: u16 = status
        .strip_prefix("[status: running, listening on 127.0.0.1:")
        .and_then(|rest| rest.strip_suffix(']'))
        .unwrap_or_else(|| panic!("no port in {status}"))
        .parse()
        .unwrap();
    assert!(ready.contains(&format!("port {port} ")), "{ready}");

    // The list says the same, and a second start of the name finds the first.
    let list = text(&s, "job_list", json!({})).await;
    assert!(
        list.contains(&format!("{server} (listening on 127.0.0.1:{port})")),
        "{list}"
    );
    let again = text(&s, "bash", json!({"command": server, "name": "web"})).await;
    assert_eq!(
        again,
        format!("background job {id} named \"web\" is already running; not started again")
    );

    let client = start(
        &s,
        json!({"command": format!("curl -sS http://127.0.0.1:{port}/")}),
    )
    .await;
    let fetched = finished(&s, &client).await;
    assert!(fetched.contains("Directory listing"), "{fetched}");
    assert!(
        fetched.ends_with("[status: completed, exit code: 0]"),
        "{fetched}"
    );

    // The server logs the request to stderr (just after answering it); a
    // search finds it without consuming anything.
    let found = logged(&s, &id, "\"GET / HTTP", "stderr").await;
    assert!(
        found.starts_with("[search /\"GET / HTTP/ in stderr: 1 match]\n1:"),
        "{found}"
    );

    assert_eq!(
        text(&s, "job_kill", json!({"job_id": id})).await,
        format!("requested cancellation of job {id}")
    );
    let stopped = finished(&s, &id).await;
    assert!(
        stopped.ends_with("[status: killed, signal: SIGTERM]"),
        "{stopped}"
    );
    // The request log was still unread: the search did not consume it.
    assert!(stopped.contains("\"GET / HTTP/1.1\" 200"), "{stopped}");
    // Once the job is gone, its name is free again.
    let next = start(&s, json!({"command": "true", "name": "web"})).await;
    assert_ne!(next, id);
    s.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_waits_end_on_quiet_output_settlement_or_the_timeout_and_say_which() {
    let s = session(ALL).await;
    let quiet = start(&s, json!({"command": "echo first; exec sleep 30"})).await;
    // The output is there before the wait begins, so the quiet time is
    // counted from the wait's start and the read shows it.
    logged(&s, &quiet, "^first$", "stdout").await;
    let out = text(&s, "job_output", json!({"job_id": quiet, "quiet_ms": 300})).await;
    assert_eq!(
        out,
        "[wait ended: no output for 300 ms]\nfirst\n[status: running]"
    );
    let timed = text(
        &s,
        "job_output",
        json!({"job_id": quiet, "until": "never", "timeout_ms": 200}),
    )
    .await;
    assert_eq!(
        timed,
        "[wait ended: timed out after 200 ms]\n(no new output)\n[status: running]"
    );
    let done = start(&s, json!({"command": "echo bye"})).await;
    let settled = text(
        &s,
        "job_output",
        json!({"job_id": done, "until": "never", "timeout_ms": 60000}),
    )
    .await;
    assert_eq!(
        settled,
        "[wait ended: the job finished]\nbye\n[status: completed, exit code: 0]"
    );
    // A ready line already written and unread ends the wait at once.
    let early = start(&s, json!({"command": "echo ready now; exec sleep 30"})).await;
    let seen = text(
        &s,
        "job_output",
        json!({"job_id": early, "until": "ready", "timeout_ms": 60000}),
    )
    .await;
    assert!(
        seen.starts_with("[wait ended: stdout line 1 matched]\n1:ready now\n"),
        "{seen}"
    );

    // Bad input: a pattern that does not compile, a bad quiet time.
    let (bad, is_error) = call(&s, "job_output", json!({"job_id": quiet, "until": "("})).await;
    assert!(is_error);
    assert!(
        bad.starts_with("Error: invalid pattern: regex parse error"),
        "{bad}"
    );
    let (bad, is_error) = call(&s, "job_output", json!({"job_id": quiet, "quiet_ms": -1})).await;
    assert!(is_error);
    assert_eq!(
        bad,
        "Error: invalid quiet_ms: expected a positive number of milliseconds no greater than 2147483647, got -1"
    );
    let (bad, _) = call(&s, "job_output", json!({"job_id": quiet, "until": 5})).await;
    assert_eq!(bad, "Error: invalid arguments: \"until\" must be a string");
    s.close().await;
}

/// A line that left memory before the wait looked (more than the 64 KB a
/// stream keeps came after it) is found in the spill file, with its true
/// number, while the job still runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_finds_its_line_after_it_left_memory() {
    let s = session(ALL).await;
    // 285,715 lines of `filler`, the marker, 428,572 more, then quiet.
    let id = start(
        &s,
        json!({"command": "yes filler | head -c 2000005; echo marker; \
                           yes filler | head -c 3000004; echo burst over; exec sleep 60"}),
    )
    .await;
    // All of it written before the wait begins (a search consumes nothing).
    logged(&s, &id, "^burst over$", "stdout").await;
    let seen = text(
        &s,
        "job_output",
        json!({"job_id": id, "until": "^marker$", "timeout_ms": 60000}),
    )
    .await;
    let head = &seen[..seen.len().min(200)];
    assert!(
        seen.starts_with("[wait ended: stdout line 285716 matched]\n"),
        "{head}"
    );
    let tail = &seen[seen.len().saturating_sub(200)..];
    assert!(seen.ends_with("[status: running]"), "{tail}");
    text(&s, "job_kill", json!({"job_id": id})).await;
}

/// A line whose start the model read before the rest was written, and that
/// left memory before the wait looked, is tried whole from the spill file:
/// `^` is the start of the line, not the read cursor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_tries_a_split_line_whole_after_it_left_memory() {
    let s = session(ALL).await;
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    let id = start(
        &s,
        json!({"command": format!(
            "printf armed; while [ ! -e {} ]; do sleep 0.02; done; echo caught; \
             yes filler | head -c 3000004; echo burst over; exec sleep 60",
            go.display()
        )}),
    )
    .await;
    // The model reads the line's start: the read cursor now splits it.
    loop {
        let read = text(&s, "job_output", json!({"job_id": id})).await;
        if read.starts_with("armed") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    std::fs::write(&go, "").unwrap();
    logged(&s, &id, "^burst over$", "stdout").await;
    let seen = text(
        &s,
        "job_output",
        json!({"job_id": id, "until": "^armedcaught$", "timeout_ms": 60000}),
    )
    .await;
    let head = &seen[..seen.len().min(200)];
    assert!(
        seen.starts_with("[wait ended: stdout line 1 matched]\n1:armedcaught\n"),
        "{head}"
    );
    text(&s, "job_kill", json!({"job_id": id})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profiles_b_and_c_word_the_extensions_their_own_way() {
    let b = session(r#"{"profile": "b", "extensions": ["ready", "log"]}"#).await;
    let id = start(&b, json!({"command": "echo up; exec sleep 30"})).await;
    let out = text(&b, "task_output", json!({"task_id": id, "until": "up"})).await;
    assert_eq!(
        out,
        "[wait ended: stdout line 1 matched]\n1:up\nup\n[status: running]"
    );
    let (unknown, _) = call(&b, "task_input", json!({"task_id": id, "text": "x"})).await;
    assert_eq!(unknown, "Error: unknown tool \"task_input\"");
    let (missing, _) = call(&b, "task_log", json!({"task_id": "bash-99"})).await;
    assert_eq!(missing, "Error: unknown task bash-99");
    b.close().await;

    let c = session(r#"{"profile": "c", "extensions": true}"#).await;
    let id = start(
        &c,
        json!({"command": "echo warming; echo listening; exec sleep 30"}),
    )
    .await;
    let out = text(&c, "job_wait", json!({"id": id, "until": "^listening"})).await;
    let (head, rest) = out.split_once(": stdout line 2 matched.\n").unwrap();
    assert!(
        head.starts_with(&format!("Job {id} is ready after ")),
        "{out}"
    );
    assert_eq!(
        rest,
        "1-warming\n2:listening\nIt keeps running \u{2014} check job_status, or job_cancel it when done."
    );
    let (missing, is_error) = call(&c, "job_log", json!({"id": "nope"})).await;
    assert!(is_error);
    assert_eq!(missing, "error: agentcore: job not found");
    let (blank, _) = call(&c, "job_signal", json!({"id": "  ", "signal": "INT"})).await;
    assert_eq!(blank, "error: id is required");
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_reaches_the_job_and_closing_it_is_its_end_of_file() {
    let s = session(ALL).await;
    let id = start(
        &s,
        // The job outlives its end of input, so every status below is known.
        json!({"command": "while read -r line || [ -n \"$line\" ]; do echo \"got:$line\"; done; echo eof; exec sleep 30", "stdin": true}),
    )
    .await;
    let wrote = text(&s, "job_input", json!({"job_id": id, "text": "hello"})).await;
    assert_eq!(
        wrote,
        format!("wrote 6 bytes to job {id}\n[status: running]")
    );
    let got = text(
        &s,
        "job_output",
        json!({"job_id": id, "until": "^got:hello$"}),
    )
    .await;
    assert!(got.contains("\ngot:hello\n"), "{got}");
    let partial = text(
        &s,
        "job_input",
        json!({"job_id": id, "text": "no newline", "newline": false, "close": true}),
    )
    .await;
    assert_eq!(
        partial,
        format!("wrote 10 bytes to job {id} and closed its input\n[status: running]")
    );
    let end = text(&s, "job_output", json!({"job_id": id, "until": "^eof$"})).await;
    assert_eq!(
        end,
        "[wait ended: stdout line 3 matched]\n1-got:hello\n2-got:no newline\n3:eof\ngot:no newline\neof\n[status: running]"
    );
    let (closed, is_error) = call(&s, "job_input", json!({"job_id": id, "text": "late"})).await;
    assert!(is_error);
    assert_eq!(closed, format!("Error: the input of job {id} is closed"));
    // Once the job has finished, its input is closed too.
    text(&s, "job_kill", json!({"job_id": id})).await;
    assert_eq!(
        finished(&s, &id).await,
        "(no new output)\n[status: killed, signal: SIGTERM]"
    );
    let (closed, _) = call(&s, "job_input", json!({"job_id": id, "text": "later"})).await;
    assert_eq!(closed, format!("Error: the input of job {id} is closed"));

    // A job started without stdin: true reads /dev/null and takes no input.
    let plain = start(&s, json!({"command": "exec sleep 30"})).await;
    let (none, _) = call(&s, "job_input", json!({"job_id": plain, "text": "x"})).await;
    assert_eq!(
        none,
        format!(
            "Error: job {plain} was started without open input (start it with \"stdin\": true)"
        )
    );
    // Bad input: nothing to do, too much, wrong types.
    let (nothing, _) = call(&s, "job_input", json!({"job_id": plain})).await;
    assert_eq!(
        nothing,
        "Error: invalid arguments: give \"text\", \"keys\", \"close\": true, or several"
    );
    let huge = "x".repeat(70_000);
    let (big, _) = call(&s, "job_input", json!({"job_id": plain, "text": huge})).await;
    assert_eq!(
        big,
        "Error: invalid text: 70001 bytes is more than the limit of 65536 bytes"
    );
    let (typed, _) = call(&s, "job_input", json!({"job_id": plain, "close": "yes"})).await;
    assert_eq!(
        typed,
        "Error: invalid arguments: \"close\" must be a boolean"
    );
    let (typed, _) = call(&s, "bash", json!({"command": "true", "stdin": 1})).await;
    assert_eq!(
        typed,
        "Error: invalid arguments: \"stdin\" must be a boolean"
    );
    s.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_never_reads_cannot_make_the_host_hold_unbounded_input() {
    let s = session(ALL).await;
    let id = start(&s, json!({"command": "exec sleep 30", "stdin": true})).await;
    let chunk = "y".repeat(60_000);
    let mut accepted = 0u64;
    let refused = loop {
        let (out, is_error) = call(&s, "job_input", json!({"job_id": id, "text": chunk})).await;
        if is_error {
            break out;
        }
        accepted += 60_001;
        assert!(accepted < 4 << 20, "the host kept taking input");
    };
    assert!(
        refused.starts_with("Error: the job is not reading its input: "),
        "{refused}"
    );
    assert!(refused.ends_with("nothing was written"), "{refused}");
    s.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signals_reach_the_whole_tree_from_an_allowlist() {
    // Counts every INT and TERM it gets, so a signal sent twice shows; INT
    // keeps it running, so the status after it is known, and TERM ends it
    // after a pause in which a second TERM would still be counted. Each line
    // is one write, so a signal cannot land inside one.
    const COUNTER: &str = r#"
import os, signal, sys, time
counts = {}
def caught(number, _):
    name = signal.Signals(number).name
    counts[name] = counts.get(name, 0) + 1
    os.write(1, b"caught %s %d\n" % (name.encode(), counts[name]))
    if name == "SIGTERM":
        time.sleep(0.3)
        os._exit(0)
signal.signal(signal.SIGINT, caught)
signal.signal(signal.SIGTERM, caught)
os.write(1, b"armed\n")
while True:
    time.sleep(1)
"#;
    let s = session(ALL).await;
    let id = start(
        &s,
        json!({"command": format!("exec python3 -c '{COUNTER}'")}),
    )
    .await;
    text(&s, "job_output", json!({"job_id": id, "until": "armed"})).await;
    let sent = text(&s, "job_signal", json!({"job_id": id, "signal": "sigint"})).await;
    assert_eq!(sent, format!("sent SIGINT to job {id}\n[status: running]"));
    let caught = text(&s, "job_output", json!({"job_id": id, "until": "^caught"})).await;
    assert_eq!(
        caught,
        "[wait ended: stdout line 2 matched]\n1-armed\n2:caught SIGINT 1\ncaught SIGINT 1\n[status: running]"
    );
    text(&s, "job_signal", json!({"job_id": id, "signal": "TERM"})).await;
    let end = finished(&s, &id).await;
    assert_eq!(end, "caught SIGTERM 1\n[status: completed, exit code: 0]");
    let (late, is_error) = call(&s, "job_signal", json!({"job_id": id, "signal": "TERM"})).await;
    assert!(is_error);
    assert_eq!(
        late,
        format!("Error: job {id} has already finished [status: completed, exit code: 0]")
    );
    let other = start(&s, json!({"command": "exec sleep 30"})).await;
    let (bad, _) = call(&s, "job_signal", json!({"job_id": other, "signal": "USR1"})).await;
    assert_eq!(
        bad,
        "Error: invalid signal: expected one of INT, TERM, HUP, KILL, STOP, CONT, got \"USR1\""
    );
    let (missing, _) = call(&s, "job_signal", json!({"job_id": other})).await;
    assert_eq!(
        missing,
        "Error: invalid arguments: missing required property \"signal\""
    );
    // STOP and CONT: the tree pauses and goes on.
    text(&s, "job_signal", json!({"job_id": other, "signal": "STOP"})).await;
    text(&s, "job_signal", json!({"job_id": other, "signal": "CONT"})).await;
    text(&s, "job_signal", json!({"job_id": other, "signal": "KILL"})).await;
    let killed = finished(&s, &other).await;
    assert_eq!(killed, "(no new output)\n[status: killed, signal: SIGKILL]");
    s.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_and_searches_read_retained_output_without_consuming_it() {
    let s = session(ALL).await;
    let id = start(&s, json!({"command": "seq 1 1000; echo warn >&2"})).await;
    loop {
        let list = text(&s, "job_list", json!({})).await;
        if list.contains("completed") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let last = text(&s, "job_log", json!({"job_id": id, "lines": 3})).await;
    assert_eq!(
        last,
        "[stdout lines 998-1000 of 1000]\n998:998\n999:999\n1000:1000\n[status: completed, exit code: 0]"
    );
    let page = text(
        &s,
        "job_log",
        json!({"job_id": id, "start_line": 10, "lines": 2}),
    )
    .await;
    assert_eq!(
        page,
        "[stdout lines 10-11 of 1000]\n10:10\n11:11\n[status: completed, exit code: 0]"
    );
    let beyond = text(&s, "job_log", json!({"job_id": id, "start_line": 5000})).await;
    assert_eq!(
        beyond,
        "[no stdout lines there; it has lines up to 1000]\n[status: completed, exit code: 0]"
    );
    let search = text(
        &s,
        "job_log",
        json!({"job_id": id, "search": "^(500|502|warn)$", "context": 1}),
    )
    .await;
    assert_eq!(
        search,
        "[search /^(500|502|warn)$/ in stdout and stderr: 3 matches]\nstdout-499-499\nstdout:500:500\nstdout-501-501\nstdout:502:502\nstdout-503-503\n--\nstderr:1:warn\n[status: completed, exit code: 0]"
    );
    let capped = text(
        &s,
        "job_log",
        json!({"job_id": id, "search": "^1", "max_matches": 2, "context": 0, "stream": "stdout"}),
    )
    .await;
    assert_eq!(
        capped,
        "[search /^1/ in stdout: 112 matches, first 2 shown]\n1:1\n--\n10:10\n[status: completed, exit code: 0]"
    );
    // Nothing was consumed: the read still has everything.
    let read = text(&s, "job_output", json!({"job_id": id})).await;
    assert!(read.starts_with("1\n2\n3\n"), "{read}");
    assert!(read.ends_with("1000\n[stderr]\nwarn\n[status: completed, exit code: 0]"));

    // Bad input for each argument.
    for (args, error) in [
        (
            json!({"job_id": id, "search": "("}),
            "Error: invalid pattern: regex parse error",
        ),
        (
            json!({"job_id": id, "lines": 0}),
            "Error: invalid lines: expected a whole number from 1 to 500, got 0",
        ),
        (
            json!({"job_id": id, "lines": 2.5}),
            "Error: invalid lines: expected a whole number from 1 to 500, got 2.5",
        ),
        (
            json!({"job_id": id, "start_line": 0}),
            "Error: invalid start_line: expected a whole number from 1 to 9007199254740991, got 0",
        ),
        (
            json!({"job_id": id, "stream": "both"}),
            "Error: invalid stream: expected \"stdout\" or \"stderr\", got \"both\"",
        ),
        (
            json!({"job_id": id, "context": 3}),
            "Error: invalid arguments: \"context\" and \"max_matches\" need \"search\"",
        ),
        (
            json!({"job_id": id, "search": "x", "lines": 3}),
            "Error: invalid arguments: \"search\" cannot be combined with \"start_line\" or \"lines\"",
        ),
        (
            json!({"job_id": id, "search": ""}),
            "Error: invalid search: expected a non-empty pattern",
        ),
        (
            json!({"job_id": ""}),
            "Error: invalid job_id: expected a non-empty string, got \"\"",
        ),
        (
            json!({}),
            "Error: invalid arguments: missing required property \"job_id\"",
        ),
    ] {
        let (out, is_error) = call(&s, "job_log", args.clone()).await;
        assert!(is_error, "{args}: {out}");
        assert!(out.starts_with(error), "{args}: {out}");
    }
    s.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_say_where_the_retained_output_begins() {
    // 100 bytes in memory and no spill file: the start of the output is gone.
    let bash = BashConfig {
        limits: OutputLimits {
            max_output_bytes: 100,
            max_spill_bytes: 50,
        },
        ..BashConfig::default()
    };
    let s = session_with(ALL, bash).await;
    let id = start(&s, json!({"command": "seq 1 100"})).await;
    finished(&s, &id).await;
    let page = text(
        &s,
        "job_log",
        json!({"job_id": id, "start_line": 1, "lines": 2}),
    )
    .await;
    // 292 bytes were written; the last 100 are lines 68 to 100, whole.
    assert_eq!(
        page,
        "[stdout lines 68-69 of 100; stdout before line 68 (192 bytes) is no longer kept]\n68:68\n69:69\n[status: completed, exit code: 0]"
    );
    s.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_stop_a_job_and_say_which_limit_it_was() {
    let s = session(
        r#"{"extensions": ["limits"], "limits": {"timeoutMs": 60000, "outputBytes": 10000000}}"#,
    )
    .await;
    let slow = start(&s, json!({"command": "exec sleep 30", "timeout_ms": 300})).await;
    let end = finished(&s, &slow).await;
    assert_eq!(
        end,
        "(no new output)\n[status: killed, time limit reached (300 ms), signal: SIGTERM]"
    );
    let chatty = start(
        &s,
        json!({"command": "exec yes", "max_output_bytes": 100000}),
    )
    .await;
    let end = finished(&s, &chatty).await;
    assert!(
        end.ends_with("[status: killed, output limit reached (100000 bytes), signal: SIGTERM]"),
        "{}",
        &end[end.len().saturating_sub(200)..]
    );
    let busy = start(
        &s,
        json!({"command": "while :; do :; done", "cpu_seconds": 1}),
    )
    .await;
    let end = finished(&s, &busy).await;
    assert_eq!(
        end,
        "(no new output)\n[status: killed, CPU limit reached (1 s), signal: SIGXCPU]"
    );
    let hungry = start(
        &s,
        json!({"command": "python3 -c 'bytearray(512 << 20)'", "memory_bytes": 256u64 << 20}),
    )
    .await;
    let end = finished(&s, &hungry).await;
    assert!(end.contains("MemoryError"), "{end}");
    assert!(end.ends_with("[status: completed, exit code: 1]"), "{end}");

    // The session's maximum cannot be raised, and bad values are refused.
    for (args, error) in [
        (
            json!({"command": "true", "timeout_ms": 120000}),
            "Error: invalid timeout_ms: 120000 is more than this session's limit of 60000",
        ),
        (
            json!({"command": "true", "timeout_ms": 0}),
            "Error: invalid timeout_ms: expected a whole number of at least 1, got 0",
        ),
        (
            json!({"command": "true", "cpu_seconds": "1"}),
            "Error: invalid cpu_seconds: expected a whole number of at least 1, got \"1\"",
        ),
        (
            json!({"command": "true", "max_output_bytes": 20000000}),
            "Error: invalid max_output_bytes: 20000000 is more than this session's limit of 10000000",
        ),
    ] {
        let (out, is_error) = call(&s, "bash", args.clone()).await;
        assert!(is_error, "{args}");
        assert_eq!(out, error);
    }
    let defs = s.tool_definitions().await.unwrap();
    let bash = defs.iter().find(|d| d.name == "bash").unwrap();
    assert!(
        bash.description.contains("the session's maxima apply"),
        "{}",
        bash.description
    );
    s.close().await;

    // Without a request, a job gets the session's maxima.
    let s = session(r#"{"extensions": ["limits"], "limits": {"timeoutMs": 300}}"#).await;
    let plain = start(&s, json!({"command": "exec sleep 30"})).await;
    assert_eq!(
        finished(&s, &plain).await,
        "(no new output)\n[status: killed, time limit reached (300 ms), signal: SIGTERM]"
    );
    s.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mount_without_extensions_is_the_contract_surface() {
    let s = session("{}").await;
    let defs = s.tool_definitions().await.unwrap();
    let names: Vec<&str> = defs.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["bash", "job_output", "job_list", "job_kill"]);
    assert!(defs[0].description.ends_with("No timeout applies."));
    assert!(!defs[0].input_schema.contains("stdin"));
    assert!(!defs[1].input_schema.contains("\"until\":"));
    let (unknown, _) = call(&s, "job_input", json!({"job_id": "bash-1", "text": "x"})).await;
    assert_eq!(unknown, "Error: unknown tool \"job_input\"");
    // Extension arguments are ignored like any other undeclared key.
    let id = start(
        &s,
        json!({"command": "echo hi", "stdin": true, "name": "x", "timeout_ms": 1}),
    )
    .await;
    let out = text(
        &s,
        "job_output",
        json!({"job_id": id, "wait": true, "until": "hi"}),
    )
    .await;
    assert_eq!(out, "hi\n[status: completed, exit code: 0]");
    s.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extension_configs_are_checked_at_load() {
    let registry = JobRegistry::default();
    for (config, error) in [
        (
            r#"{"extensions": ["ready", "teleport"]}"#,
            "tool-jobs: unknown extension \"teleport\" (known: ready, input, log, limits, ports, yield, sandbox, terminal, runners)",
        ),
        (
            r#"{"extensions": ["log", "log"]}"#,
            "tool-jobs: extensions names \"log\" twice",
        ),
        (
            r#"{"extensions": "all"}"#,
            "tool-jobs: extensions must be true, false or a list of names (ready, input, log, limits, ports, yield, sandbox, terminal, runners), got \"all\"",
        ),
        (
            r#"{"limits": {"timeoutMs": 5}}"#,
            "tool-jobs: limits needs the \"limits\" extension (\"extensions\": [\"limits\"])",
        ),
        (
            r#"{"extensions": true, "limits": {"timeoutMs": 0}}"#,
            "tool-jobs: limits.timeoutMs must be a whole number of at least 1, got 0",
        ),
        (
            r#"{"extensions": true, "limits": {"wallMs": 5}}"#,
            "tool-jobs: unknown limit \"wallMs\" (known: timeoutMs, cpuSeconds, memoryBytes, outputBytes)",
        ),
        (
            r#"{"profile": "c", "extensions": true, "limits": {"timeoutMs": 2147483648}}"#,
            "jobs: limits.timeoutMs must be at most 2147483647 (the longest a timer holds)",
        ),
    ] {
        let refused = Mount::new(runtime(), registry.clone(), config).await;
        match refused {
            Err(e) => assert_eq!(e.to_string(), error, "{config}"),
            Ok(_) => panic!("{config} was accepted"),
        }
    }
}
