//! Clients, daemons and the monitors' parent killed at random points: no
//! job output, exit or notice is lost, and none is shown twice.

use std::time::Duration;

use serde_json::json;

use super::*;
use crate::cli::{Gate, call, gone_soon, texts};

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
        // bash-3 runs on: its line is read once its monitor has relayed it
        // (a read before that finds nothing new, and takes nothing).
        let mut tries = 0;
        let read = loop {
            tries += 1;
            assert!(tries < 3000, "{id} never showed its line");
            let read = client
                .call_tool(call(
                    "job_output",
                    json!({"job_id": id, "wait": id != "bash-3", "timeout_ms": 60000}),
                ))
                .await
                .unwrap();
            let read = texts(&read);
            if read.last().map(String::as_str) != Some("(no new output)\n[status: running]") {
                break read;
            }
            told.extend(read);
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
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
