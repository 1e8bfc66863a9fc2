//! Jobs on a terminal (the `terminal` extension) through the real component,
//! a real session and real processes: a `[Y/n]` prompt answered, a Python
//! REPL driven, a resize the job sees, the screen view, the raw bytes kept for
//! people, a pty job's whole tree killed in both containment modes, and bad
//! input refused without changing anything. Without the extension, a start
//! with `tty` is the contract's surface (the argument is not there).

use std::sync::Arc;
use std::time::Duration;

use host::bash::{BashConfig, BashProducer};
use host::containment::ContainmentMode;
use host::session::Session;
use host::{JobRegistry, Mount};
use serde_json::json;

use crate::extensions::{call, start, text};
use crate::fixture::{gone_soon, runtime};

const ALL: &str = r#"{"extensions": true}"#;

async fn session_in(mode: ContainmentMode) -> Option<Session> {
    let registry = JobRegistry::default();
    let producer = match BashProducer::new(
        registry.clone(),
        BashConfig {
            containment: mode,
            ..BashConfig::default()
        },
    ) {
        Ok(producer) => producer,
        Err(e) if mode == ContainmentMode::Cgroup => {
            println!("skipped in cgroup mode: {e}");
            return None;
        }
        Err(e) => panic!("{e}"),
    };
    let mount = Mount::new(runtime(), registry, ALL).await.unwrap();
    Some(Session::open("tty", Arc::new(mount), producer).0)
}

async fn session() -> Session {
    session_in(ContainmentMode::Auto).await.unwrap()
}

/// A wait of a minute: it ends at the job's prompt (or its end) long before.
async fn waited(session: &Session, id: &str) -> String {
    text(
        session,
        "job_output",
        json!({"job_id": id, "wait": true, "timeout_ms": 60000}),
    )
    .await
}

/// Reads (consuming) until what was read holds `needle`, within a minute;
/// everything read.
async fn read_until(session: &Session, id: &str, needle: &str) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut seen = String::new();
    while !seen.contains(needle) {
        assert!(
            std::time::Instant::now() < deadline,
            "no {needle:?} in {seen:?}"
        );
        seen.push_str(&waited(session, id).await);
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_yes_no_prompt_ends_the_wait_and_is_answered() {
    let s = session().await;
    let id = start(
        &s,
        json!({"command": "printf '\\033[1mInstall 3 packages?\\033[0m [Y/n] '; read a; echo \"answer: $a\"", "tty": true}),
    )
    .await;
    let asked = waited(&s, &id).await;
    assert_eq!(
        asked,
        "[wait ended: the job is waiting for input: Install 3 packages? [Y/n]]\nInstall 3 packages? [Y/n] \n[status: running]"
    );
    // The job may have ended by the time the answer's status is taken.
    let wrote = text(&s, "job_input", json!({"job_id": id, "text": "y"})).await;
    assert!(
        wrote.starts_with("wrote 2 bytes to job bash-1\n[status: "),
        "{wrote}"
    );
    let answered = read_until(&s, &id, "[status: completed").await;
    // The answer continues the prompt's line (the terminal echoes it), and
    // no escape sequence reaches the model.
    assert_eq!(answered, "y\nanswer: y\n[status: completed, exit code: 0]");
    // People still have the bytes as written.
    let raw = text(&s, "job_log", json!({"job_id": id, "raw": true})).await;
    assert!(
        raw.contains("\u{1b}[1mInstall 3 packages?\u{1b}[0m [Y/n] y"),
        "{raw}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_repl_is_driven_through_its_terminal() {
    let s = session().await;
    let id = start(&s, json!({"command": "exec python3 -q", "tty": true})).await;
    let first = waited(&s, &id).await;
    assert!(
        first.starts_with("[wait ended: the job is waiting for input: >>>]\n>>> "),
        "{first}"
    );
    text(&s, "job_input", json!({"job_id": id, "text": "1+1"})).await;
    let answer = read_until(&s, &id, "\n2\n").await;
    assert!(answer.contains("1+1\n2\n>>> "), "{answer}");
    // A block: the continuation prompt ends the wait too.
    text(
        &s,
        "job_input",
        json!({"job_id": id, "text": "for i in range(2):"}),
    )
    .await;
    let more = read_until(&s, &id, "...").await;
    assert!(
        more.starts_with("[wait ended: the job is waiting for input: ...]"),
        "{more}"
    );
    text(
        &s,
        "job_input",
        json!({"job_id": id, "text": "    print('row', i)"}),
    )
    .await;
    text(&s, "job_input", json!({"job_id": id, "text": ""})).await;
    let rows = read_until(&s, &id, "row 1").await;
    assert!(rows.contains("row 0\nrow 1\n"), "{rows}");
    // ctrl-d is the REPL's end of input.
    text(&s, "job_input", json!({"job_id": id, "keys": ["ctrl-d"]})).await;
    // The last prompt's line ends; it is not told again.
    let end = read_until(&s, &id, "[status: completed, exit code: 0]").await;
    assert_eq!(end, "\n[status: completed, exit code: 0]");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resize_reaches_the_job_and_the_screen() {
    let s = session().await;
    let id = start(
        &s,
        json!({"command": "stty size; trap 'stty size; printf \"ready> \"' WINCH; printf 'ready> '; while :; do sleep 0.05; done", "tty": true, "rows": 24, "cols": 80}),
    )
    .await;
    let first = read_until(&s, &id, "ready>").await;
    assert!(first.contains("24 80\n"), "{first}");
    assert_eq!(
        text(
            &s,
            "job_resize",
            json!({"job_id": id, "rows": 40, "cols": 100})
        )
        .await,
        "resized the terminal of job bash-1 to 40 rows × 100 columns\n[status: running]"
    );
    let after = read_until(&s, &id, "40 100").await;
    assert!(after.contains("40 100"), "{after}");
    let screen = text(&s, "job_output", json!({"job_id": id, "view": "screen"})).await;
    assert!(
        screen.starts_with("[screen: 40 rows × 100 columns, cursor at row "),
        "{screen}"
    );
    assert!(screen.contains("\nready> 40 100\nready>"), "{screen}");
    assert!(screen.ends_with("\n[status: running]"), "{screen}");
    text(&s, "job_kill", json!({"job_id": id})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_progress_bar_is_read_once_in_its_final_state() {
    let s = session().await;
    let id = start(
        &s,
        json!({"command": "for i in $(seq 1 200); do printf '\\rdownloading %3d%%' $((i/2)); done; printf '\\n\\033[31merror\\033[0m: disk full\\nwarning: retrying\\n'", "tty": true}),
    )
    .await;
    let out = read_until(&s, &id, "[status: completed").await;
    assert_eq!(
        out,
        "downloading 100%\nerror: disk full\nwarning: retrying\n[status: completed, exit code: 0]"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ready_wait_over_a_progress_bar_tells_its_frames_once() {
    let s = session().await;
    let id = start(
        &s,
        json!({"command": "for i in $(seq 1 100); do printf '\\rbuilding %3d%%' $i; sleep 0.005; done; printf '\\ndone\\n'; sleep 30", "tty": true}),
    )
    .await;
    let out = text(
        &s,
        "job_output",
        json!({"job_id": id, "until": "^done", "timeout_ms": 60000}),
    )
    .await;
    // The wait looked at each frame without telling it: the read has the
    // bar once, in its last state.
    assert_eq!(
        out,
        "[wait ended: stdout line 2 matched]\n1-building 100%\n2:done\nbuilding 100%\ndone\n[status: running]"
    );
    text(&s, "job_kill", json!({"job_id": id})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_that_asks_where_its_cursor_is_is_answered() {
    let s = session().await;
    let id = start(
        &s,
        // Echo off first: the answer may come before `read` runs.
        json!({"command": "stty -echo; printf ab; printf '\\033[6n'; IFS= read -r -d R pos; stty echo; echo; echo \"at ${pos#*[}\"", "tty": true}),
    )
    .await;
    let out = read_until(&s, &id, "[status: completed").await;
    assert_eq!(out, "ab\nat 1;3\n[status: completed, exit code: 0]");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_that_yields_stops_at_the_prompt() {
    let s = session().await;
    let out = text(
        &s,
        "bash",
        json!({"command": "read -p 'Name? ' n; echo \"hi $n\"", "tty": true, "yield_ms": 30000}),
    )
    .await;
    assert_eq!(
        out,
        "started background job bash-1\n[wait ended: the job is waiting for input: Name?]\nName? \n[status: running]"
    );
    // Ending the input types ctrl-d; the terminal stays open for more.
    let typed = text(&s, "job_input", json!({"job_id": "bash-1", "close": true})).await;
    assert!(
        typed.starts_with("typed ctrl-d on the terminal of job bash-1\n[status: "),
        "{typed}"
    );
    // `read` saw the end of its input, so the greeting follows the prompt.
    let end = read_until(&s, "bash-1", "[status: completed").await;
    assert_eq!(end, "hi\n[status: completed, exit code: 0]");
    // A finished job keeps its last screen, and its terminal is gone.
    let screen = text(
        &s,
        "job_output",
        json!({"job_id": "bash-1", "view": "screen"}),
    )
    .await;
    assert!(screen.contains("\nName? hi\n"), "{screen}");
    let (resized, is_error) = call(
        &s,
        "job_resize",
        json!({"job_id": "bash-1", "rows": 10, "cols": 10}),
    )
    .await;
    assert!(
        is_error && resized.starts_with("Error: job bash-1 has already finished"),
        "{resized}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pty_jobs_whole_tree_is_killed_in_both_modes() {
    for mode in [ContainmentMode::Cgroup, ContainmentMode::Fallback] {
        let Some(s) = session_in(mode).await else {
            continue;
        };
        // A child that leaves the job's session and one in the background.
        let id = start(
            &s,
            json!({"command": "setsid sleep 300 & sleep 300 & echo pids $! $$; read -p 'stop? ' x", "tty": true}),
        )
        .await;
        let out = read_until(&s, &id, "pids").await;
        let pids: Vec<i32> = out
            .lines()
            .find_map(|l| l.strip_prefix("pids "))
            .unwrap()
            .split_whitespace()
            .map(|p| p.parse().unwrap())
            .collect();
        text(&s, "job_kill", json!({"job_id": id})).await;
        let end = read_until(&s, &id, "[status: killed").await;
        assert!(end.contains("[status: killed"), "{mode:?}: {end}");
        for pid in pids {
            assert!(gone_soon(pid).await, "{mode:?}: {pid} outlived its job");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_terminal_input_is_refused_and_changes_nothing() {
    let s = session().await;
    for (args, error) in [
        (
            json!({"command": "true", "tty": true, "stdin": false}),
            "Error: invalid arguments: a job on a terminal reads its input from it; leave out \"stdin\" or set it to true",
        ),
        (
            json!({"command": "true", "tty": true, "rows": 1}),
            "Error: invalid rows: expected a whole number from 2 to 1000, got 1",
        ),
        (
            json!({"command": "true", "tty": true, "cols": 1001}),
            "Error: invalid cols: expected a whole number from 2 to 1000, got 1001",
        ),
        (
            json!({"command": "true", "rows": 30}),
            "Error: invalid rows: only a job started with \"tty\": true has a terminal",
        ),
        (
            json!({"command": "true", "tty": "yes"}),
            "Error: invalid arguments: \"tty\" must be a boolean",
        ),
    ] {
        assert_eq!(call(&s, "bash", args).await, (error.to_owned(), true));
    }
    assert_eq!(
        text(&s, "job_list", json!({})).await,
        "(no background jobs)"
    );

    let pipe = start(&s, json!({"command": "sleep 30", "stdin": true})).await;
    assert_eq!(
        call(
            &s,
            "job_resize",
            json!({"job_id": pipe, "rows": 10, "cols": 10})
        )
        .await,
        (
            "Error: job bash-1 was not started on a terminal (start it with \"tty\": true)"
                .to_owned(),
            true
        )
    );
    // A pipe job's output is as it was written: its raw output is its output.
    let raw = text(&s, "job_log", json!({"job_id": pipe, "raw": true})).await;
    assert!(raw.starts_with("[raw output"), "{raw}");
    assert_eq!(
        call(&s, "job_output", json!({"job_id": pipe, "view": "screen"})).await,
        (
            "Error: job bash-1 was not started on a terminal (start it with \"tty\": true)"
                .to_owned(),
            true
        )
    );
    let tty = start(&s, json!({"command": "read x", "tty": true})).await;
    for (tool, args, error) in [
        (
            "job_input",
            json!({"job_id": tty, "keys": ["ctrl-c", "hyper-x"]}),
            "Error: invalid key \"hyper-x\": expected one of enter, tab, esc, backspace, space, up, down, right, left, home, end, delete, pageup, pagedown, ctrl-a … ctrl-z",
        ),
        (
            "job_resize",
            json!({"job_id": tty, "rows": 0, "cols": 80}),
            "Error: invalid rows: expected a whole number from 2 to 1000, got 0",
        ),
        (
            "job_resize",
            json!({"job_id": tty, "rows": 20}),
            "Error: invalid arguments: missing required property \"cols\"",
        ),
        (
            "job_output",
            json!({"job_id": tty, "view": "pixels"}),
            "Error: invalid view: expected \"text\" or \"screen\", got \"pixels\"",
        ),
    ] {
        assert_eq!(
            call(&s, tool, args).await,
            (error.to_owned(), true),
            "{tool}"
        );
    }
    // The refused key wrote nothing: the job still waits for its line.
    let screen = text(&s, "job_output", json!({"job_id": tty, "view": "screen"})).await;
    assert!(screen.ends_with("[status: running]"), "{screen}");
    text(&s, "job_kill", json!({"job_id": pipe})).await;
    text(&s, "job_kill", json!({"job_id": tty})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mount_that_asks_gets_pipe_output_rendered_too() {
    let registry = JobRegistry::default();
    let producer = BashProducer::new(registry.clone(), BashConfig::default()).unwrap();
    let config = r#"{"extensions": true, "renderOutput": true}"#;
    let mount = Mount::new(runtime(), registry, config).await.unwrap();
    let s = Session::open("rendered", Arc::new(mount), producer).0;
    // A tool that draws progress on stderr though it is no terminal, and
    // colours its result.
    let id = start(
        &s,
        json!({"command": "test -t 2 || for i in $(seq 1 100); do printf '\\rfetching %3d%%' $i >&2; done; printf '\\nwarning: slow mirror\\n' >&2; printf '\\033[32mok\\033[0m\\nsecond\\nthird\\n'"}),
    )
    .await;
    let out = read_until(&s, &id, "[status: completed").await;
    assert_eq!(
        out,
        "ok\nsecond\nthird\n[stderr]\nfetching 100%\nwarning: slow mirror\n[status: completed, exit code: 0]"
    );
    // The bytes as written stay for people, stream by stream.
    let raw = text(
        &s,
        "job_log",
        json!({"job_id": id, "raw": true, "stream": "stderr"}),
    )
    .await;
    assert!(
        raw.starts_with("[raw stderr lines 1-2 of 2]\n1:\rfetching   1%\rfetching   2%"),
        "{raw}"
    );
    let raw = text(&s, "job_log", json!({"job_id": id, "raw": true})).await;
    assert!(raw.contains("1:\u{1b}[32mok\u{1b}[0m"), "{raw}");
    // It is still no terminal: no screen, no size.
    let (screen, is_error) = call(&s, "job_output", json!({"job_id": id, "view": "screen"})).await;
    assert!(
        is_error && screen.contains("was not started on a terminal"),
        "{screen}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_extension_there_is_no_terminal() {
    let registry = JobRegistry::default();
    let producer = BashProducer::new(registry.clone(), BashConfig::default()).unwrap();
    let mount = Mount::new(runtime(), registry, r#"{"extensions": ["input", "log"]}"#)
        .await
        .unwrap();
    let tools = mount.tool_definitions().await.unwrap();
    assert!(tools.iter().all(|t| t.name != "job_resize"));
    let s = Session::open("plain", Arc::new(mount), producer).0;
    // `tty` is not an argument here: the job runs on pipes.
    let id = start(
        &s,
        json!({"command": "test -t 1 || echo no terminal", "tty": true}),
    )
    .await;
    let out = read_until(&s, &id, "[status: completed").await;
    assert_eq!(out, "no terminal\n[status: completed, exit code: 0]");
}
