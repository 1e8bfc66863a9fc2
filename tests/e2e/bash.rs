//! The background shell producer (contract 8.5 and 9.4), with real processes, read
//! and controlled through the real component.

use std::time::Duration;

use crate::fixture::{Shell, gone_soon};
use host::bash::{BashConfig, BashRequest, Started};
use host::capture::OutputLimits;
use host::plugin::StartMade;
use host::{JobStatus, StartError};
use serde_json::{Value, json};

#[tokio::test]
async fn a_background_echo_reports_its_output_and_exit() {
    let s = Shell::new().await;
    let alice = s.f.alice.clone();
    // Started as the model starts it: through the guest's start tool.
    let started =
        s.f.mount
            .start_with(
                Some(&alice),
                r#"{"command": "echo bg-ok"}"#,
                65_536,
                &host::CancellationToken::new(),
                |request| {
                    let request = BashRequest {
                        command: request.command.clone(),
                        ..Default::default()
                    };
                    match s.bash.start_named(Some(alice.clone()), request)? {
                        Started::New(id) | Started::Existing(id) => Ok(StartMade::New(id)),
                    }
                },
            )
            .await;
    assert_eq!(started.text, "started background job bash-1");
    assert_eq!(
        started.value,
        Some(json!({"kind": "background", "jobId": "bash-1"}))
    );
    let id = "bash-1";
    let text = s.collect_all(Some(&alice), id).await;
    assert!(text.contains("bg-ok\n"), "{text}");
    assert!(
        text.ends_with("[status: completed, exit code: 0]"),
        "{text}"
    );
}

#[tokio::test]
async fn job_kill_stops_a_sleep_with_sigterm() {
    let s = Shell::new().await;
    let alice = s.f.alice.clone();
    let id = s.run(Some(&alice), "sleep 60");
    let kill =
        s.f.call(Some(&alice), "job_kill", json!({"job_id": id}))
            .await;
    assert_eq!(kill.text, "requested cancellation of job bash-1");
    let text = s.collect(Some(&alice), &id).await;
    assert!(text.contains("[status: killed, signal: SIGTERM]"), "{text}");
}

#[tokio::test]
async fn a_command_that_signals_itself_is_killed() {
    let s = Shell::new().await;
    let id = s.run(None, "kill -TERM $$");
    let text = s.collect(None, &id).await;
    assert_eq!(text, "(no new output)\n[status: killed, signal: SIGTERM]");
}

#[tokio::test]
async fn the_owner_is_forwarded() {
    let s = Shell::new().await;
    let alice = s.f.alice.clone();
    let id = s.run(Some(&alice), "sleep 60");
    let anonymous = s.f.call(None, "job_output", json!({"job_id": id})).await;
    assert!(anonymous.is_error);
    assert_eq!(
        anonymous.text,
        "Error: job bash-1 belongs to another session"
    );
    let kill =
        s.f.call(Some(&alice), "job_kill", json!({"job_id": id}))
            .await;
    assert!(!kill.is_error);
    assert!(
        s.collect(Some(&alice), &id)
            .await
            .contains("[status: killed")
    );
}

#[tokio::test]
async fn no_controller_means_no_background_shell() {
    let s = Shell::new().await;
    drop(s.f.mount);
    let err = s
        .bash
        .start(
            None,
            BashRequest {
                command: "true".into(),
                ..Default::default()
            },
        )
        .unwrap_err();
    assert_eq!(err, StartError::NoController);
}

#[tokio::test]
async fn stdout_then_stderr_and_nonzero_exits_are_completed() {
    let s = Shell::new().await;
    let id = s.run(None, "printf out; echo err >&2; exit 3");
    let text = s.collect_all(None, &id).await;
    assert_eq!(
        text,
        "out\n[stderr]\nerr\n[status: completed, exit code: 3]"
    );
}

/// The contract's spawn failure: the start answers with an id, the job settles
/// `killed before exit`, and the one next read carries `spawn failed: <err>` in
/// its stderr slot.
#[tokio::test]
async fn a_spawn_failure_is_a_job_killed_before_exit_that_says_why_once() {
    let s = Shell::with(BashConfig {
        shell: "/nonexistent/bash".into(),
        ..BashConfig::default()
    })
    .await;
    let id = s.run(None, "true");
    assert_eq!(id, "bash-1");
    assert_eq!(
        s.collect(None, &id).await,
        "[stderr]\nspawn failed: No such file or directory (os error 2)\n[status: killed, killed before exit]"
    );
    let again = s.f.call(None, "job_output", json!({"job_id": id})).await;
    assert_eq!(
        again.text,
        "(no new output)\n[status: killed, killed before exit]"
    );
}

/// What can be checked before a spawn is refused at the start: nothing is
/// registered and no id is used.
#[tokio::test]
async fn a_start_refused_before_the_spawn_registers_nothing() {
    let s = Shell::new().await;
    let err = s
        .bash
        .start(
            None,
            BashRequest {
                command: "echo \0".into(),
                ..Default::default()
            },
        )
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "spawn failed: a NUL byte in the command, its environment or its directory"
    );
    assert!(s.f.registry.list(None).is_empty());
    assert_eq!(s.run(None, "true"), "bash-1");
}

#[tokio::test]
async fn the_environment_is_plain_and_stdin_is_empty() {
    let s = Shell::new().await;
    let id = s.run(None, "cat; echo \"$NO_COLOR $TERM $PAGER $GIT_PAGER\"");
    let text = s.collect_all(None, &id).await;
    assert_eq!(text, "1 dumb cat cat\n[status: completed, exit code: 0]");
}

/// A start answers before its leader exists; a kill (or a signal) that comes
/// in between reaches the leader once it does, and is sent only once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_right_after_the_start_reaches_the_job() {
    let s = Shell::new().await;
    // Rounds within the admission limit (a stopping job keeps its slot).
    for _ in 0..5 {
        let ids: Vec<String> = (0..8)
            .map(|_| {
                let id = s.run(None, "exec sleep 30");
                s.f.registry.kill(&id, None, None).unwrap();
                id
            })
            .collect();
        for id in ids {
            let text = s.collect(None, &id).await;
            assert_eq!(
                text, "(no new output)\n[status: killed, signal: SIGTERM]",
                "{id}"
            );
        }
    }
}

#[tokio::test]
async fn a_kill_takes_the_whole_process_group() {
    let s = Shell::new().await;
    let id = s.run(None, "sleep 60 & echo $!; sleep 60 & echo $!; wait");
    // Read until both child pids are out.
    let mut seen = String::new();
    while seen.lines().count() < 2 {
        seen.push_str(&s.f.registry.read(&id, None).unwrap().0);
        tokio::task::yield_now().await;
    }
    let pids: Vec<i32> = seen.lines().map(|l| l.parse().unwrap()).collect();
    s.f.call(None, "job_kill", json!({"job_id": id})).await;
    let text = s.collect(None, &id).await;
    assert!(text.contains("[status: killed, signal: SIGTERM]"), "{text}");
    for pid in pids {
        assert!(gone_soon(pid).await, "child {pid} outlived the job");
    }
}

#[tokio::test]
async fn a_process_that_ignores_sigterm_gets_sigkill_after_the_grace() {
    let s = Shell::with(BashConfig {
        grace: Duration::from_millis(200),
        ..BashConfig::default()
    })
    .await;
    let id = s.run(None, "trap '' TERM; echo ready; while :; do sleep 1; done");
    while !s.f.registry.read(&id, None).unwrap().0.contains("ready") {
        tokio::task::yield_now().await;
    }
    s.f.call(None, "job_kill", json!({"job_id": id})).await;
    let text = s.collect(None, &id).await;
    assert!(
        text.ends_with("[status: killed, signal: SIGKILL]"),
        "{text}"
    );
}

#[tokio::test]
async fn leftovers_holding_the_pipes_are_reaped_when_the_leader_exits() {
    let s = Shell::with(BashConfig {
        grace: Duration::from_millis(200),
        ..BashConfig::default()
    })
    .await;
    let id = s.run(None, "sleep 60 & echo $!");
    let text = s.collect_all(None, &id).await;
    let pid: i32 = text.lines().next().unwrap().parse().unwrap();
    assert!(
        text.ends_with("[status: completed, exit code: 0]"),
        "{text}"
    );
    assert!(gone_soon(pid).await, "background child {pid} was orphaned");
}

#[tokio::test]
async fn large_output_is_bounded_and_says_where_the_rest_is() {
    let s = Shell::with(BashConfig {
        limits: OutputLimits {
            max_output_bytes: 1000,
            max_spill_bytes: 1 << 20,
        },
        ..BashConfig::default()
    })
    .await;
    let id = s.run(None, "head -c 200000 /dev/zero | tr '\\0' a");
    crate_settled(&s, &id).await;
    let out = s.f.call(None, "job_output", json!({"job_id": id})).await;
    let spill = s.bash.spill_dir().join("spawn-1.stdout");
    let expected_tail = format!(
        "{}\n[some output was dropped from memory; full output: {}]\n[status: completed, exit code: 0]",
        "a".repeat(1000),
        spill.display()
    );
    assert_eq!(out.text, expected_tail);
    assert_eq!(std::fs::metadata(&spill).unwrap().len(), 200_000);
    let value: &Value = out.value.as_ref().unwrap();
    assert_eq!(value["job"]["status"], "completed");
}

#[tokio::test]
async fn non_utf8_output_is_shown_with_replacement_characters() {
    let s = Shell::new().await;
    let id = s.run(None, "printf '\\377\\376ok'");
    let text = s.collect_all(None, &id).await;
    assert_eq!(
        text,
        "\u{FFFD}\u{FFFD}ok\n[status: completed, exit code: 0]"
    );
}

#[tokio::test]
async fn a_blank_command_is_refused() {
    let s = Shell::new().await;
    let err = s
        .bash
        .start(
            None,
            BashRequest {
                command: "  ".into(),
                ..Default::default()
            },
        )
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid command: expected a non-blank string"
    );
    assert!(s.f.registry.list(None).is_empty());
}

#[tokio::test]
async fn the_working_directory_is_honoured() {
    let dir = tempfile_dir();
    let s = Shell::with(BashConfig {
        default_workdir: Some(dir.clone()),
        ..BashConfig::default()
    })
    .await;
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    let id = s
        .bash
        .start(
            None,
            BashRequest {
                command: "pwd".into(),
                workdir: Some("sub".into()),
                ..Default::default()
            },
        )
        .unwrap();
    let text = s.collect_all(None, &id).await;
    let real = std::fs::canonicalize(dir.join("sub")).unwrap();
    assert_eq!(
        text,
        format!("{}\n[status: completed, exit code: 0]", real.display())
    );
    assert_eq!(
        s.f.registry.inspect(&id).unwrap().status,
        JobStatus::Completed
    );
}

async fn crate_settled(s: &Shell, id: &str) {
    crate::fixture::settled(&s.f.registry, id, None).await;
}

fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("jobs-e2e-wd-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The host reaps only the leaders it spawned: a child of the embedder's
/// that has ended is first in line for every look at ended children, yet
/// the embedder still collects its status, and a job that ends meanwhile
/// is still seen to end.
#[tokio::test]
async fn an_ended_child_of_the_embedder_is_left_to_it_and_hides_no_job_s_end() {
    let s = Shell::new().await;
    let mut own = std::process::Command::new("sh")
        .args(["-c", "exit 7"])
        .spawn()
        .unwrap();
    // Ended, and a zombie until its parent waits (nothing else may reap it).
    assert!(
        gone_soon(own.id() as i32).await,
        "sh -c 'exit 7' did not end"
    );
    assert!(std::path::Path::new(&format!("/proc/{}", own.id())).exists());
    for n in 0..3 {
        let id = s.run(None, &format!("echo after-{n}"));
        let text = tokio::time::timeout(Duration::from_secs(120), s.collect_all(None, &id))
            .await
            .expect("the job's end was seen");
        assert!(text.contains(&format!("after-{n}\n")), "{text}");
        assert!(
            text.ends_with("[status: completed, exit code: 0]"),
            "{text}"
        );
    }
    // Left to its parent: not reaped by the host.
    assert_eq!(own.wait().unwrap().code(), Some(7));
}

/// A job may outlive its producer (the producer's end kills it): its end is
/// still seen and its leader reaped, so it settles instead of staying
/// `running` with a zombie behind it.
#[tokio::test]
async fn a_job_whose_producer_is_dropped_still_settles() {
    let Shell { f, bash } = Shell::new().await;
    let id = bash
        .start(
            None,
            BashRequest {
                command: "echo $$; exec sleep 300".into(),
                ..Default::default()
            },
        )
        .unwrap();
    let seen = crate::fixture::read_a_line(&f.registry, &id).await;
    let pid: u32 = seen.trim().parse().unwrap();
    drop(bash);
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while !f.registry.inspect(&id).unwrap().status.is_terminal() {
        assert!(
            std::time::Instant::now() < deadline,
            "the job never settled"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(f.registry.inspect(&id).unwrap().status, JobStatus::Killed);
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "its leader was left unreaped"
    );
}
