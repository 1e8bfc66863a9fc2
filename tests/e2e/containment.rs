//! Containment of shell jobs, with real processes, in both modes: every process a
//! job starts dies with it (`setsid`, `set -m`, double forks, SIGTERM ignored),
//! jobs inherit nothing they should not, bad starts register nothing, and a
//! model's call can never make a later call fail.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use crate::fixture::{Fixture, Shell, gone_soon, running};
use host::bash::{BashConfig, BashProducer, BashRequest};
use host::capture::OutputLimits;
use host::containment::{ActiveMode, ContainmentMode};
use host::{JobStatus, StartError};
use serde_json::json;

const MODES: [ContainmentMode; 2] = [ContainmentMode::Cgroup, ContainmentMode::Fallback];

/// Three escapees, each printing its pid: a new session, a new process group
/// under job control, and a double fork that reparents away from the job.
const ESCAPEES: &str = "setsid sleep 300 >/dev/null 2>&1 & echo $!; \
     set -m; sleep 300 >/dev/null 2>&1 & echo $!; set +m; \
     ( ( exec sleep 300 ) >/dev/null 2>&1 & echo $! ) ; ";

/// Asserts that every one of `pids` stops running (`what` says after what).
async fn all_gone(mode: ContainmentMode, pids: Vec<i32>, what: &str) {
    for pid in pids {
        assert!(gone_soon(pid).await, "{mode:?}: {pid} {what}");
    }
}

fn pids(lines: &[String]) -> Vec<i32> {
    lines.iter().map(|l| l.trim().parse().unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escapees_die_with_job_kill() {
    for mode in MODES {
        let Some(s) = Shell::in_mode(mode, BashConfig::default()).await else {
            continue;
        };
        let id = s.run(None, &format!("{ESCAPEES} sleep 300"));
        let pids = pids(&s.lines(None, &id, 3).await);
        for pid in &pids {
            assert!(running(*pid), "{mode:?}: {pid} should be running");
        }
        let kill = s.f.call(None, "job_kill", json!({"job_id": id})).await;
        assert_eq!(kill.text, format!("requested cancellation of job {id}"));
        let text = s.settle(&id).await;
        assert!(
            text.ends_with("[status: killed, signal: SIGTERM]"),
            "{text}"
        );
        all_gone(mode, pids, "survived job_kill").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escapees_die_when_the_job_ends_by_itself() {
    for mode in MODES {
        let config = BashConfig {
            grace: Duration::from_millis(200),
            ..BashConfig::default()
        };
        let Some(s) = Shell::in_mode(mode, config).await else {
            continue;
        };
        // The last escapee keeps the job's stdout open, too.
        let id = s.run(None, &format!("{ESCAPEES} setsid sleep 300 & echo $!"));
        let pids = pids(&s.lines(None, &id, 4).await);
        let text = s.settle(&id).await;
        assert!(
            text.ends_with("[status: completed, exit code: 0]"),
            "{mode:?}: {text}"
        );
        all_gone(mode, pids, "outlived its job").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_term_ignoring_escapee_gets_sigkill() {
    for mode in MODES {
        let config = BashConfig {
            grace: Duration::from_millis(200),
            ..BashConfig::default()
        };
        let Some(s) = Shell::in_mode(mode, config).await else {
            continue;
        };
        let id = s.run(
            None,
            "setsid bash -c 'trap \"\" TERM; echo $$; exec sleep 300' & wait",
        );
        let pids = pids(&s.lines(None, &id, 1).await);
        s.f.call(None, "job_kill", json!({"job_id": id})).await;
        let text = s.settle(&id).await;
        assert!(text.contains("[status: killed, signal: SIG"), "{text}");
        assert!(
            gone_soon(pids[0]).await,
            "{mode:?}: TERM-ignoring escapee survived"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_kills_every_tree() {
    for mode in MODES {
        let Some(s) = Shell::in_mode(mode, BashConfig::default()).await else {
            continue;
        };
        let alice = s.f.alice.clone();
        let id = s.run(Some(&alice), &format!("{ESCAPEES} sleep 300"));
        let pids = pids(&s.lines(Some(&alice), &id, 3).await);
        s.f.registry.dispose_owner(&alice).await;
        all_gone(mode, pids, "survived teardown").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_machine_gives_the_cgroup_mode_when_it_can() {
    let f = Fixture::new().await;
    let bash = BashProducer::new(f.registry.clone(), BashConfig::default()).unwrap();
    let expected = host::containment::cgroup2_mount().is_some()
        && BashProducer::new(
            f.registry.clone(),
            BashConfig {
                containment: ContainmentMode::Cgroup,
                ..BashConfig::default()
            },
        )
        .is_ok();
    println!("containment mode here: {}", bash.containment_mode().name());
    assert_eq!(
        matches!(bash.containment_mode(), ActiveMode::Cgroup(_)),
        expected
    );
    if let ActiveMode::Cgroup(root) = bash.containment_mode() {
        let root = root.clone();
        let id = bash
            .start(
                None,
                BashRequest {
                    command: "cat /proc/self/cgroup; sleep 300".into(),
                    ..Default::default()
                },
            )
            .unwrap();
        let seen = crate::fixture::read_a_line(&f.registry, &id).await;
        let leaf = root.file_name().unwrap().to_str().unwrap().to_owned();
        assert!(seen.contains(&format!("{leaf}/job-1")), "{seen}");
        drop(bash);
        // The producer's cgroups go with it.
        for _ in 0..1000 {
            if !root.exists() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(!root.exists(), "{} was left behind", root.display());
    }
}

/// An ended job's emptied cgroup is taken by the next job, which saves the
/// removal of one and the making of another; one that a job left frozen is
/// removed, and no later job is put in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ended_jobs_empty_cgroup_is_the_next_jobs_unless_it_was_frozen() {
    let config = BashConfig {
        grace: Duration::from_millis(100),
        ..BashConfig::default()
    };
    let Some(s) = Shell::in_mode(ContainmentMode::Cgroup, config).await else {
        return;
    };
    let ActiveMode::Cgroup(root) = s.bash.containment_mode().clone() else {
        unreachable!("a cgroup shell");
    };
    let cgroup_of = |text: &str| {
        let line = text.lines().find_map(|l| l.strip_prefix("0::"));
        line.and_then(|path| path.rsplit('/').next())
            .unwrap_or_else(|| panic!("no cgroup in {text:?}"))
            .to_owned()
    };
    for _ in 0..3 {
        let id = s.run(None, "cat /proc/self/cgroup");
        assert_eq!(cgroup_of(&s.settle(&id).await), "job-1");
    }
    // The job freezes its own cgroup: the kill's SIGTERM waits on the thaw,
    // its SIGKILL does not.
    let frozen = root.join("job-1");
    let id = s.run(
        None,
        &format!("echo 1 > {}/cgroup.freeze; echo thawed", frozen.display()),
    );
    for _ in 0..1000 {
        if std::fs::read_to_string(frozen.join("cgroup.events"))
            .is_ok_and(|e| e.contains("frozen 1"))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let kill = s.f.call(None, "job_kill", json!({"job_id": id})).await;
    assert_eq!(kill.text, format!("requested cancellation of job {id}"));
    let text = s.settle(&id).await;
    assert!(!text.contains("thawed"), "{text}");
    assert!(!frozen.exists(), "a frozen cgroup was kept");
    let id = s.run(None, "cat /proc/self/cgroup; echo ran");
    let text = s.settle(&id).await;
    assert_eq!(cgroup_of(&text), "job-5", "{text}");
    assert!(text.contains("ran"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_outlives_the_thread_that_started_it() {
    for mode in MODES {
        let Some(s) = Shell::in_mode(mode, BashConfig::default()).await else {
            continue;
        };
        let gate = tempfile::tempdir().unwrap();
        let fifo = gate.path().join("gate");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let bash = s.bash.clone();
        // The job holds the FIFO open before it says so: the gate can then be
        // written without blocking, whether or not the job is still alive.
        let command = format!(
            "exec 3<>{}; echo ready; read line <&3; echo \"$line\"",
            fifo.display()
        );
        // Started from a thread that then exits, as an idle pool thread retires.
        let runtime = tokio::runtime::Handle::current();
        let (id, tid) = std::thread::spawn(move || {
            let _runtime = runtime.enter();
            let tid = nix::unistd::gettid().as_raw();
            let id = bash
                .start(
                    None,
                    BashRequest {
                        command,
                        ..Default::default()
                    },
                )
                .unwrap();
            (id, tid)
        })
        .join()
        .unwrap();
        // Wait until the kernel has finished with the thread: a death signal tied
        // to it would have been sent by now.
        while std::path::Path::new(&format!("/proc/self/task/{tid}")).exists() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let mut seen = String::new();
        while !seen.contains("ready") {
            let (text, job) = s.f.registry.read(&id, None).unwrap();
            seen.push_str(&text);
            assert!(
                !job.status.is_terminal(),
                "{mode:?}: the job died with the thread: {job:?}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // Non-blocking: with no reader left this fails at once instead of hanging.
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
            .and_then(|mut f| f.write_all(b"alive\n"))
            .unwrap_or_else(|e| panic!("{mode:?}: the job no longer reads its gate: {e}"));
        let text = s.settle(&id).await;
        assert_eq!(text, "alive\n[status: completed, exit code: 0]", "{mode:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_inherit_no_descriptor_beyond_stdio() {
    for mode in MODES {
        let Some(s) = Shell::in_mode(mode, BashConfig::default()).await else {
            continue;
        };
        // A descriptor the embedding process leaked without close-on-exec.
        let file = std::fs::File::open("/dev/null").unwrap();
        // SAFETY: dup of a valid fd; closed below.
        let leaked = unsafe { libc::dup(std::os::fd::AsRawFd::as_raw_fd(&file)) };
        assert!(leaked > 2);
        // No pipeline (bash would hold its pipe ends while `ls` looks) and no
        // exec of the last command (`ls` would list its own directory handle).
        let id = s.run(None, "ls /proc/$$/fd; true");
        let text = s.settle(&id).await;
        // SAFETY: our own dup.
        unsafe { libc::close(leaked) };
        assert_eq!(
            text, "0\n1\n2\n[status: completed, exit code: 0]",
            "{mode:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_is_not_dumpable() {
    let s = Shell::in_mode(ContainmentMode::Fallback, BashConfig::default())
        .await
        .unwrap();
    // SAFETY: a plain prctl.
    assert_eq!(unsafe { libc::prctl(libc::PR_GET_DUMPABLE) }, 0);
    drop(s);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_environment_is_an_allowlist() {
    let s = Shell::in_mode(
        ContainmentMode::Fallback,
        BashConfig {
            pass_env: vec!["PATH".into()],
            set_env: vec![("DEPLOY_ENV".into(), "staging".into())],
            ..BashConfig::default()
        },
    )
    .await
    .unwrap();
    let id = s.run(None, "env | cut -d= -f1 | sort | tr '\\n' ' '");
    let text = s.settle(&id).await;
    let names: Vec<&str> = text.lines().next().unwrap().split_whitespace().collect();
    let allowed = [
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "TERM",
        "TZ",
        "TMPDIR",
        "NO_COLOR",
        "PAGER",
        "GIT_PAGER",
        "DEPLOY_ENV",
        "JOBS_HOST_JOB",
        "PWD",
        "SHLVL",
        "_",
        "OLDPWD",
    ];
    for name in &names {
        assert!(
            allowed.contains(name) || name.starts_with("LC_"),
            "{name} leaked into the job: {text}"
        );
    }
    assert!(names.contains(&"DEPLOY_ENV"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_starts_answer_the_call_and_register_nothing() {
    let s = Shell::in_mode(ContainmentMode::Auto, BashConfig::default())
        .await
        .unwrap();
    let start = |command: String, workdir: Option<&str>| {
        s.bash.start(
            None,
            BashRequest {
                command,
                workdir: workdir.map(Into::into),
                ..Default::default()
            },
        )
    };
    let huge = format!("echo {}", "x".repeat(10 << 20));
    assert_eq!(
        start(huge, None).unwrap_err(),
        StartError::Producer(format!(
            "invalid command: {} bytes is more than the limit of 65536 bytes",
            (10 << 20) + 5
        ))
    );
    let missing = start("true".into(), Some("/nonexistent/dir")).unwrap_err();
    assert!(
        missing
            .to_string()
            .starts_with("invalid workdir: /nonexistent/dir: "),
        "{missing}"
    );
    assert_eq!(
        start("true".into(), Some("/etc/hostname")).unwrap_err(),
        StartError::Producer("invalid workdir: /etc/hostname is not a directory".into())
    );
    assert!(s.f.registry.list(None).is_empty());
    // Exactly at the limit is fine, and the first id is still unused.
    let fits = format!("true {}", "x".repeat(65536 - 5));
    assert_eq!(start(fits, None).unwrap(), "bash-1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spill_files_are_private_and_share_one_disk_budget() {
    let s = Shell::in_mode(
        ContainmentMode::Auto,
        BashConfig {
            limits: OutputLimits {
                max_output_bytes: 1000,
                max_spill_bytes: 1 << 20,
            },
            spill_total_bytes: 300_000,
            ..BashConfig::default()
        },
    )
    .await
    .unwrap();
    let dir_mode = std::fs::metadata(s.bash.spill_dir())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(dir_mode & 0o777, 0o700);

    let write = "head -c 200000 /dev/zero | tr '\\0' a";
    let first = s.run(None, write);
    crate::fixture::settled(&s.f.registry, &first, None).await;
    let spill = s.bash.spill_dir().join("spawn-1.stdout");
    let file_mode = std::fs::metadata(&spill).unwrap().permissions().mode();
    assert_eq!(file_mode & 0o777, 0o600);
    assert_eq!(s.bash.spill_bytes(), 200_000);

    // The second job needs room: the finished first job's file goes.
    let second = s.run(None, write);
    crate::fixture::settled(&s.f.registry, &second, None).await;
    assert!(!spill.exists());
    assert_eq!(s.bash.spill_bytes(), 200_000);
    let out = s.f.call(None, "job_output", json!({"job_id": first})).await;
    assert_eq!(
        out.text,
        format!(
            "{}\n[some output was dropped from memory; full output: (unavailable)]\n[status: completed, exit code: 0]",
            "a".repeat(1000)
        )
    );
    let spill_dir = s.bash.spill_dir().to_owned();
    drop(s);
    assert!(!spill_dir.exists(), "spill directory left behind");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statuses_stay_honest_after_a_kill() {
    // `killed` is never reported as completed, even when escapees are swept.
    for mode in MODES {
        let Some(s) = Shell::in_mode(mode, BashConfig::default()).await else {
            continue;
        };
        // Killed only once the escapee exists.
        let id = s.run(None, "setsid sleep 300 & echo $!; sleep 300");
        s.lines(None, &id, 1).await;
        s.f.call(None, "job_kill", json!({"job_id": id})).await;
        s.settle(&id).await;
        assert_eq!(s.f.registry.inspect(&id).unwrap().status, JobStatus::Killed);
    }
}

/// 10,000 finished jobs whose producer asked for 64 KiB labels. Unowned, so
/// every caller lists them and no notice is due (which keeps the test quick).
async fn ten_thousand_jobs(plugin_config: &str) -> Fixture {
    // Retention is tested on its own; here every job stays.
    let config = host::RegistryConfig::default()
        .with_max_retained_per_owner(20_000)
        .unwrap();
    let f = Fixture::with_config(plugin_config, config).await;
    let label = "z".repeat(64 << 10);
    for _ in 0..10_000 {
        let (_, control) = f
            .start(crate::fixture::ScriptedJob::final_output(None).label(&label))
            .unwrap();
        control
            .settle(host::OutcomeStatus::Completed, None, Some("ok"))
            .await;
    }
    f
}

// One thread: the scripted producers settle by yielding to it.
#[tokio::test]
async fn a_list_of_ten_thousand_long_labels_is_bounded_and_breaks_nothing() {
    let f = ten_thousand_jobs("{}").await;
    let alice = f.alice.clone();
    // The registry keeps a bounded label, cut with a marker.
    let stored = f.registry.inspect("subagent-1").unwrap().label;
    assert_eq!(stored, format!("{}\u{2026}", "z".repeat(509)));

    let list = f.call(Some(&alice), "job_list", json!({})).await;
    assert!(!list.is_error, "{}", list.text);
    let rows: Vec<&str> = list.text.lines().collect();
    assert_eq!(rows.len(), 201);
    // The newest 200, oldest first as the profile lists them, then the count.
    assert_eq!(
        rows[0],
        format!(
            "subagent-9801 [subagent] completed \u{2014} {}\u{2026}",
            "z".repeat(509)
        )
    );
    assert!(rows[199].starts_with("subagent-10000 [subagent] completed"));
    assert_eq!(rows[200], "(9800 older jobs not shown)");
    assert_eq!(list.value.as_ref().unwrap().as_array().unwrap().len(), 200);

    // Every later call still works, the notice path included.
    let read = f
        .call(Some(&alice), "job_output", json!({"job_id": "subagent-1"}))
        .await;
    assert_eq!(read.text, "ok\n[status: completed]");
    let again = f.call(Some(&alice), "job_list", json!({})).await;
    assert_eq!(again.text, list.text);
}

// One thread: the scripted producers settle by yielding to it.
#[tokio::test]
async fn profile_c_bounds_its_list_too() {
    let f = ten_thousand_jobs(r#"{"profile": "c"}"#).await;
    let list = f.call(Some(&f.alice), "job_list", json!({})).await;
    assert!(!list.is_error, "{}", list.text);
    let rows: Vec<&str> = list.text.lines().collect();
    assert_eq!(rows.len(), 201);
    assert!(
        rows[0].starts_with("subagent-10000\tsucceeded\tsubagent\t"),
        "{}",
        rows[0]
    );
    assert!(rows[199].starts_with("subagent-9801\t"), "{}", rows[199]);
    assert_eq!(rows[200], "9800 older jobs not shown.");
}

// One thread: the scripted producers settle by yielding to it.
#[tokio::test]
async fn waits_hold_none_of_the_owners_guest_turns() {
    // Six waits of one owner (more than its four turns in the guest) are all
    // pending at once, and the same owner's other calls still answer: a wait runs
    // in the host, between two guest calls.
    let f = std::sync::Arc::new(Fixture::new().await);
    let alice = f.alice.clone();
    let mut controls = Vec::new();
    let mut ids = Vec::new();
    for _ in 0..6 {
        let (id, control) = f
            .start(crate::fixture::ScriptedJob::final_output(Some(&alice)))
            .unwrap();
        ids.push(id);
        controls.push(control);
    }
    let mut calls = Vec::new();
    for id in &ids {
        let (f, alice, id) = (f.clone(), alice.clone(), id.clone());
        calls.push(tokio::spawn(async move {
            f.call(
                Some(&alice),
                "job_output",
                json!({"job_id": id, "wait": true, "timeout_ms": 600000}),
            )
            .await
        }));
    }
    let waiting = |f: &Fixture| {
        ids.iter()
            .map(|id| f.registry.waiter_count(id))
            .sum::<usize>()
    };
    while waiting(&f) < 6 {
        tokio::task::yield_now().await;
    }
    let list = f.call(Some(&alice), "job_list", json!({})).await;
    assert!(!list.is_error, "{}", list.text);
    assert_eq!(list.text.lines().count(), 6, "{}", list.text);
    for control in &controls {
        control
            .settle(host::OutcomeStatus::Completed, None, Some("done"))
            .await;
    }
    for call in calls {
        let out = call.await.unwrap();
        assert_eq!(out.text, "done\n[status: completed]");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_leads_a_session_of_its_own() {
    for mode in MODES {
        let Some(s) = Shell::in_mode(mode, BashConfig::default()).await else {
            continue;
        };
        // Session and group both equal the leader's pid: no controlling terminal
        // of the host's, and one group signal reaches the whole job.
        let id = s.run(
            None,
            "echo \"$$ $(ps -o sid= -p $$) $(ps -o pgid= -p $$) $(ps -o tty= -p $$)\"",
        );
        let text = s.settle(&id).await;
        let line = text.lines().next().unwrap().to_owned();
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(fields.len(), 4, "{mode:?}: {text}");
        assert_eq!(fields[0], fields[1], "{mode:?}: {text}");
        assert_eq!(fields[0], fields[2], "{mode:?}: {text}");
        assert_eq!(fields[3], "?", "{mode:?}: {text}");
    }
}

// One thread: the scripted producers settle by yielding to it.
#[tokio::test]
async fn finished_jobs_beyond_the_retention_limit_are_dropped_once_seen() {
    let config = host::RegistryConfig::default()
        .with_max_retained_per_owner(3)
        .unwrap();
    let f = Fixture::with_config("{}", config).await;
    let alice = f.alice.clone();
    let mut ids = Vec::new();
    for _ in 0..5 {
        let (id, control) = f
            .start(crate::fixture::ScriptedJob::final_output(Some(&alice)))
            .unwrap();
        // Seen before the next settles: a read of the finished job.
        control
            .settle(host::OutcomeStatus::Completed, None, Some("ok"))
            .await;
        f.mount.flush_notices().await;
        ids.push(id);
    }
    // The notice delivery marked each job reported; the oldest two went.
    let list = f.call(Some(&alice), "job_list", json!({})).await;
    assert_eq!(
        list.text,
        "subagent-3 [subagent] completed \u{2014} research\n\
         subagent-4 [subagent] completed \u{2014} research\n\
         subagent-5 [subagent] completed \u{2014} research"
    );
    let gone = f
        .call(Some(&alice), "job_output", json!({"job_id": ids[0]}))
        .await;
    assert!(gone.is_error);
    assert_eq!(gone.text, "Error: unknown job subagent-1");
    // Ids are never reused.
    let (next, _control) = f
        .start(crate::fixture::ScriptedJob::final_output(Some(&alice)))
        .unwrap();
    assert_eq!(next, "subagent-6");
}

// One thread: the scripted producers settle by yielding to it.
#[tokio::test]
async fn a_job_whose_notice_is_due_is_kept() {
    let config = host::RegistryConfig::default()
        .with_max_retained_per_owner(1)
        .unwrap();
    // No mount serves this owner's notices: nothing marks its jobs seen.
    let registry = host::JobRegistry::new(config, host::AgentDirectory::default());
    let _controller = registry.attach_controller();
    let owner = host::Owner::new("carol");
    registry.agents().register(&owner);
    let (first, a) = crate::fixture::ScriptedJob::final_output(Some(&owner))
        .start(&registry)
        .unwrap();
    a.settle(host::OutcomeStatus::Completed, None, Some("one"))
        .await;
    let (second, b) = crate::fixture::ScriptedJob::final_output(Some(&owner))
        .start(&registry)
        .unwrap();
    b.settle(host::OutcomeStatus::Completed, None, Some("two"))
        .await;
    // Both stay: the first is unseen.
    assert!(registry.inspect(&first).is_some());
    // Once read, it goes with the next settlement.
    let (text, _) = registry.read(&first, Some(&owner)).unwrap();
    assert_eq!(text, "one");
    let (_, c) = crate::fixture::ScriptedJob::final_output(Some(&owner))
        .start(&registry)
        .unwrap();
    c.settle(host::OutcomeStatus::Completed, None, None).await;
    assert!(registry.inspect(&first).is_none());
    assert!(registry.inspect(&second).is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_job_takes_its_spill_files() {
    let f = Fixture::with_config(
        "{}",
        host::RegistryConfig::default()
            .with_max_retained_per_owner(1)
            .unwrap(),
    )
    .await;
    let bash = BashProducer::new(
        f.registry.clone(),
        BashConfig {
            limits: OutputLimits {
                max_output_bytes: 100,
                max_spill_bytes: 1 << 20,
            },
            ..BashConfig::default()
        },
    )
    .unwrap();
    let start = |command: &str| {
        bash.start(
            None,
            BashRequest {
                command: command.into(),
                ..Default::default()
            },
        )
        .unwrap()
    };
    let first = start("head -c 5000 /dev/zero");
    crate::fixture::settled(&f.registry, &first, None).await;
    let spill = bash.spill_dir().join("spawn-1.stdout");
    assert!(spill.exists());
    let second = start("true");
    crate::fixture::settled(&f.registry, &second, None).await;
    // Unowned jobs owe no notice: the first went as the second finished.
    assert!(f.registry.inspect(&first).is_none());
    assert!(!spill.exists(), "the dropped job's spill file stayed");
    assert_eq!(bash.spill_bytes(), 0);
}

fn one_slot_mount() -> (std::sync::Arc<host::PluginRuntime>, host::JobRegistry) {
    let runtime = std::sync::Arc::new(
        host::PluginRuntime::new(
            host::SandboxLimits {
                pool_slots: Some(1),
                ..host::SandboxLimits::default()
            },
            Some(&crate::fixture::cache_dir()),
        )
        .unwrap(),
    );
    (runtime, host::JobRegistry::default())
}

// One thread: the scripted producers settle by yielding to it.
#[tokio::test]
async fn a_wait_holds_no_pool_slot() {
    let (runtime, registry) = one_slot_mount();
    let mount = std::sync::Arc::new(
        host::Mount::new(runtime, registry.clone(), "{}")
            .await
            .unwrap(),
    );
    let (alice, bob) = (host::Owner::new("alice"), host::Owner::new("bob"));
    registry.agents().register(&alice);
    registry.agents().register(&bob);
    let (id, control) = crate::fixture::ScriptedJob::final_output(Some(&alice))
        .start(&registry)
        .unwrap();
    let waiting = {
        let (mount, alice, id) = (mount.clone(), alice.clone(), id.clone());
        tokio::spawn(async move {
            let args = format!(r#"{{"job_id":"{id}","wait":true,"timeout_ms":600000}}"#);
            mount.invoke(Some(&alice), "job_output", &args).await
        })
    };
    crate::fixture::until_waiting(&registry, &id).await;
    // Alice's wait is pending, and the one-slot pool still serves Bob.
    let list = mount.invoke(Some(&bob), "job_list", "{}").await;
    assert!(!list.is_error, "{}", list.text);
    assert_eq!(list.text, "(no background jobs)");
    assert_eq!(registry.waiter_count(&id), 1);
    control
        .settle(host::OutcomeStatus::Completed, None, Some("done"))
        .await;
    assert_eq!(waiting.await.unwrap().text, "done\n[status: completed]");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_pool_makes_calls_queue_instead_of_failing() {
    // Two threads calling into a one-slot pool at once: every call gets its
    // turn, none fails for want of an instance.
    let (runtime, registry) = one_slot_mount();
    let mount = std::sync::Arc::new(
        host::Mount::new(runtime, registry.clone(), "{}")
            .await
            .unwrap(),
    );
    let calls: Vec<_> = (0..64)
        .map(|n| {
            let mount = mount.clone();
            tokio::spawn(async move {
                let owner = host::Owner::new(format!("owner-{n}"));
                mount.invoke(Some(&owner), "job_list", "{}").await
            })
        })
        .collect();
    for call in calls {
        let out = call.await.unwrap();
        assert!(!out.is_error, "{}", out.text);
        assert_eq!(out.text, "(no background jobs)");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_cgroups_of_dead_hosts_are_removed_at_the_next_start() {
    let Some(first) = Shell::in_mode(ContainmentMode::Cgroup, BashConfig::default()).await else {
        return;
    };
    let ActiveMode::Cgroup(root) = first.bash.containment_mode() else {
        unreachable!("a cgroup shell");
    };
    let parent = root.parent().unwrap().to_owned();
    // A pid no process has (pid_max is at most 2^22), and one that is alive.
    let dead = (4_000_000..4_194_304)
        .find(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists())
        .unwrap();
    let ns = std::fs::read_link("/proc/self/ns/pid").unwrap();
    let ns = ns
        .to_str()
        .unwrap()
        .trim_start_matches("pid:[")
        .trim_end_matches(']');
    let stale = parent.join(format!("jobs-host-{dead}-0-{ns}"));
    let live = parent.join(format!("jobs-host-{}-77-{ns}", std::process::id()));
    // Of another pid namespace, or unnamed: never judged from here.
    let foreign = parent.join(format!("jobs-host-{dead}-0-1"));
    let unnamed = parent.join(format!("jobs-host-{dead}-0"));
    for dir in [&stale, &live, &foreign, &unnamed] {
        std::fs::create_dir(dir).unwrap();
    }
    std::fs::create_dir(stale.join("job-3")).unwrap();
    let second = Shell::in_mode(ContainmentMode::Cgroup, BashConfig::default())
        .await
        .unwrap();
    let gone = !stale.exists();
    let kept = [&live, &foreign, &unnamed].map(|d| d.exists());
    for dir in [&live, &foreign, &unnamed] {
        let _ = std::fs::remove_dir(dir);
    }
    assert!(gone, "{} was left", stale.display());
    assert_eq!(
        kept, [true; 3],
        "a cgroup that cannot be judged was removed"
    );
    drop(second);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copied_marker_does_not_make_another_jobs_process_the_victims() {
    let Some(s) = Shell::in_mode(ContainmentMode::Fallback, BashConfig::default()).await else {
        return;
    };
    let victim = s.run(None, "echo $$; exec sleep 300");
    let leader: i32 = s.lines(None, &victim, 1).await[0].trim().parse().unwrap();
    // The other job reads the victim's marker from its environment and runs a
    // process of its own under it.
    let forger = s.run(
        None,
        &format!(
            "m=$(tr '\\0' '\\n' < /proc/{leader}/environ | grep '^JOBS_HOST_JOB='); \
             env \"$m\" sleep 300 & echo $!; wait"
        ),
    );
    let forged: i32 = s.lines(None, &forger, 1).await[0].trim().parse().unwrap();
    let kill = s.f.call(None, "job_kill", json!({"job_id": victim})).await;
    assert!(!kill.is_error, "{}", kill.text);
    s.settle(&victim).await;
    assert!(gone_soon(leader).await, "the victim's leader survived");
    assert!(
        running(forged),
        "the forger's process was taken for the victim's"
    );
    let kill = s.f.call(None, "job_kill", json!({"job_id": forger})).await;
    assert!(!kill.is_error, "{}", kill.text);
    s.settle(&forger).await;
    assert!(
        gone_soon(forged).await,
        "the forger's process outlived its own job"
    );
}
