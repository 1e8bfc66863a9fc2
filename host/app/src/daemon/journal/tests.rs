//! The journal's tests: what a killed daemon leaves, re-adoption, retention
//! and refused files.

use super::*;

use std::os::unix::fs::PermissionsExt;

fn dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

fn row(id: &str, status: &str) -> JobRow {
    JobRow {
        id: id.to_owned(),
        label: "sleep 1".to_owned(),
        status: status.to_owned(),
        detail: None,
        started_at: 5,
        finished_at: None,
        files: None,
        monitor: None,
        cursors: [0, 0],
        end_seen: false,
        remote: None,
    }
}

#[test]
fn a_killed_daemons_running_jobs_are_lost_and_its_ended_ones_stay() {
    let dir = dir();
    let journal = Journal::open(dir.path(), 111, 1).unwrap();
    let session = journal.open_session("k", 2).unwrap();
    let mut written = HashMap::new();
    let mut done = row("bash-2", "completed");
    done.detail = Some("exit code: 3".to_owned());
    done.finished_at = Some(9);
    journal
        .record(
            session,
            vec![row("bash-1", "running"), done.clone()],
            &mut written,
        )
        .unwrap();
    // Killed: nothing more is written. The next daemon opens it.
    drop(journal);
    let next = Journal::open(dir.path(), 222, 50).unwrap();
    let (jobs, dropped, open) = read(dir.path()).unwrap().unwrap();
    assert!(open, "the new daemon is running");
    assert_eq!(dropped, 0);
    assert_eq!(jobs.len(), 2);
    assert_eq!(jobs[0].job.status, LOST);
    assert_eq!(
        jobs[0].job.detail.as_deref(),
        Some("its daemon (pid 111) stopped without recording its end")
    );
    assert_eq!(jobs[0].job.finished_at, Some(50));
    assert_eq!(jobs[1].job, done);
    next.end_daemon(60).unwrap();
    drop(next);
    assert!(!read(dir.path()).unwrap().unwrap().2, "nobody keeps it now");
}

#[test]
fn a_job_taken_on_again_and_again_keeps_one_row() {
    let dir = dir();
    let mut durable = row("bash-1", "running");
    durable.files = Some("/state/sessions/k/job-1".to_owned());
    let mut plain = row("bash-2", "completed");
    plain.finished_at = Some(9);
    let journal = Journal::open(dir.path(), 100, 1).unwrap();
    let session = journal.open_session("k", 2).unwrap();
    journal
        .record(
            session,
            vec![durable.clone(), plain.clone()],
            &mut HashMap::new(),
        )
        .unwrap();
    drop(journal);
    for daemon in 101..131 {
        // Killed each time; the next takes the job on as its own.
        let journal = Journal::open(dir.path(), daemon, u64::from(daemon)).unwrap();
        let orphans = journal.orphans("k").unwrap();
        assert_eq!(orphans.len(), 1, "daemon {daemon}");
        assert_eq!(orphans[0].job.id, "bash-1");
        let session = journal.open_session("k", u64::from(daemon)).unwrap();
        journal
            .record(session, vec![orphans[0].job.clone()], &mut HashMap::new())
            .unwrap();
        journal.adopted(&orphans, session).unwrap();
        drop(journal);
    }
    let (jobs, _, _) = read(dir.path()).unwrap().unwrap();
    let ids: Vec<&str> = jobs.iter().map(|r| r.job.id.as_str()).collect();
    assert_eq!(
        ids,
        ["bash-2", "bash-1"],
        "one row per job, the plain job's kept"
    );
    let journal = Journal::open(dir.path(), 200, 200).unwrap();
    let rows: i64 = lock(&journal.conn)
        .query_row("SELECT count(*) FROM jobs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 2);
    assert_eq!(journal.orphans("k").unwrap().len(), 1);
}

#[test]
fn a_lost_job_with_an_older_row_is_not_offered_again() {
    let dir = dir();
    let mut job = row("bash-1", "running");
    job.files = Some("/state/sessions/k/job-1".to_owned());
    // A daemon that records the job in a session of its own, then is
    // killed: the second after it recorded the job anew, before the
    // old row went.
    let killed_after_recording = |pid: u32, now: u64| {
        let journal = Journal::open(dir.path(), pid, now).unwrap();
        let session = journal.open_session("k", now + 1).unwrap();
        journal
            .record(session, vec![job.clone()], &mut HashMap::new())
            .unwrap();
        session
    };
    killed_after_recording(100, 1);
    let second = killed_after_recording(101, 3);
    let journal = Journal::open(dir.path(), 102, 5).unwrap();
    let orphans = journal.orphans("k").unwrap();
    assert_eq!(orphans.len(), 1);
    assert_eq!(orphans[0].session, second, "the newer row");
    journal.lost(&orphans, 6).unwrap();
    drop(journal);
    let journal = Journal::open(dir.path(), 103, 7).unwrap();
    assert!(journal.orphans("k").unwrap().is_empty());
    let (jobs, _, _) = read(dir.path()).unwrap().unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].job.status, LOST);
}

#[test]
fn dropped_jobs_are_counted_and_unchanged_ones_not_written_again() {
    let dir = dir();
    let journal = Journal::open(dir.path(), 1, 1).unwrap();
    let session = journal.open_session("k", 2).unwrap();
    let mut written = HashMap::new();
    journal
        .record(
            session,
            vec![row("bash-1", "running"), row("bash-2", "running")],
            &mut written,
        )
        .unwrap();
    // A row changed behind the journal's back stays as it is when the
    // job has not changed since it was written: nothing is rewritten.
    lock(&journal.conn)
        .execute("UPDATE jobs SET label = 'edited' WHERE id = 'bash-2'", [])
        .unwrap();
    journal
        .record(session, vec![row("bash-2", "running")], &mut written)
        .unwrap();
    let (jobs, dropped, _) = read(dir.path()).unwrap().unwrap();
    assert_eq!(jobs[0].job.label, "edited");
    assert_eq!(dropped, 1);
    assert_eq!(jobs.len(), 1);
    assert_eq!(written.len(), 1);
}

#[test]
fn a_foreign_or_broken_file_is_refused_and_left_alone() {
    let dir = dir();
    let path = journal_path(dir.path());
    std::fs::write(&path, b"not a database at all, just text").unwrap();
    let refused = Journal::open(dir.path(), 1, 1).err().unwrap().to_string();
    assert!(refused.contains("is not a jobs-host journal"), "{refused}");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        b"not a database at all, just text"
    );

    std::fs::remove_file(&path).unwrap();
    let other = Connection::open(&path).unwrap();
    other
        .execute_batch("CREATE TABLE notes(x); PRAGMA user_version = 7;")
        .unwrap();
    drop(other);
    let refused = Journal::open(dir.path(), 1, 1).err().unwrap().to_string();
    assert!(
        refused.contains("is another program's database"),
        "{refused}"
    );

    std::fs::remove_file(&path).unwrap();
    drop(Journal::open(dir.path(), 1, 1).unwrap());
    let newer = Connection::open(&path).unwrap();
    newer.execute_batch("PRAGMA user_version = 4;").unwrap();
    drop(newer);
    let refused = Journal::open(dir.path(), 1, 1).err().unwrap().to_string();
    assert!(
        refused.contains("has schema version 4; this jobs-host reads version 3"),
        "{refused}"
    );

    // Cut short: the first page holds the header, the rest is gone.
    std::fs::remove_file(&path).unwrap();
    let journal = Journal::open(dir.path(), 1, 1).unwrap();
    let session = journal.open_session("k", 2).unwrap();
    let many: Vec<JobRow> = (0..2000)
        .map(|i| row(&format!("bash-{i}"), "running"))
        .collect();
    journal.record(session, many, &mut HashMap::new()).unwrap();
    drop(journal);
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(dir.path().join(format!("journal.db{suffix}")));
    }
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let refused = Journal::open(dir.path(), 1, 1).err().unwrap().to_string();
    assert!(
        refused.contains("is damaged") || refused.contains("is not a jobs-host journal"),
        "{refused}"
    );
    assert_eq!(std::fs::read(&path).unwrap().len(), bytes.len() / 2);
}

#[test]
fn a_remote_job_is_offered_again_with_its_runner_and_engine_id() {
    let dir = dir();
    // A journal of schema 2 (no remote jobs) with a running durable job.
    let path = journal_path(dir.path());
    {
        let old = Connection::open(&path).unwrap();
        old.execute_batch(
            "CREATE TABLE daemons(id INTEGER PRIMARY KEY, pid INTEGER NOT NULL,
                 started_at INTEGER NOT NULL, ended_at INTEGER);
             CREATE TABLE sessions(id INTEGER PRIMARY KEY, key TEXT NOT NULL,
                 daemon INTEGER NOT NULL, opened_at INTEGER NOT NULL, ended_at INTEGER,
                 dropped INTEGER NOT NULL DEFAULT 0, crashed INTEGER NOT NULL DEFAULT 0);
             CREATE TABLE jobs(session INTEGER NOT NULL, id TEXT NOT NULL, label TEXT NOT NULL,
                 status TEXT NOT NULL, detail TEXT, started_at INTEGER NOT NULL,
                 finished_at INTEGER, files TEXT, pid INTEGER, pid_start INTEGER,
                 cursor_out INTEGER NOT NULL DEFAULT 0, cursor_err INTEGER NOT NULL DEFAULT 0,
                 end_seen INTEGER NOT NULL DEFAULT 0, PRIMARY KEY(session, id));
             INSERT INTO daemons VALUES (1, 10, 1, NULL);
             INSERT INTO sessions VALUES (1, 'k', 1, 1, NULL, 0, 0);
             INSERT INTO jobs VALUES (1, 'bash-1', 'sleep 1', 'running', NULL, 5, NULL,
                 '/state/jobs/s/job-1', 77, 88, 3, 0, 0);
             PRAGMA application_id = 1246708307; PRAGMA user_version = 2;",
        )
        .unwrap();
    }
    let journal = Journal::open(dir.path(), 11, 20).unwrap();
    let orphans = journal.orphans("k").unwrap();
    assert_eq!(
        orphans.len(),
        1,
        "the old row is kept through the migration"
    );
    assert_eq!(orphans[0].job.remote, None);
    assert_eq!(orphans[0].job.cursors, [3, 0]);
    let session = journal.open_session("k", 21).unwrap();
    let mut remote = row("bash-2", "running");
    remote.files = Some("/state/jobs/s2/remote-1".to_owned());
    remote.cursors = [12, 0];
    remote.remote = Some(("ray".to_owned(), "jobshost-abcdef-bash-2".to_owned()));
    journal
        .record(session, vec![remote.clone()], &mut HashMap::new())
        .unwrap();
    drop(journal);
    // Killed; the next daemon is offered both, the remote one as it was.
    let journal = Journal::open(dir.path(), 12, 30).unwrap();
    let orphans = journal.orphans("k").unwrap();
    let offered: Vec<&JobRow> = orphans.iter().map(|o| &o.job).collect();
    assert_eq!(offered.len(), 2);
    assert_eq!(offered[1], &remote);
    drop(journal);
    let (jobs, _, kept) = read(dir.path()).unwrap().unwrap();
    assert!(!kept);
    let shown = jobs.iter().find(|r| r.job.id == "bash-2").unwrap();
    assert_eq!(
        shown.job.detail.as_deref(),
        Some("left on runner ray as jobshost-abcdef-bash-2 after its daemon (pid 11) stopped")
    );
}
