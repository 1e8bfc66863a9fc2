//! The daemon's journal: an SQLite database (WAL) under
//! `$XDG_STATE_HOME/jobs-host/` that records every durable session and its
//! jobs as they start and end, so a person can see what ran after the daemon
//! is gone, and a daemon that was killed leaves its running jobs recorded as
//! `lost`, never as finished.
//!
//! Each write is one transaction: a crash at any instant leaves the journal
//! as it was before or after the write. Readers (`jobs-host ps --journal`)
//! open it read-only and never block the daemon.
//!
//! (Over 500 lines: the journal's writes, each one transaction over the one
//! schema in `schema`, side by side so that what each writes and what the
//! others assume can be compared.)

use host::sync::lock;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context, Result, bail};
use rusqlite::{Connection, OpenFlags, params};

mod read;
mod schema;
#[cfg(test)]
mod tests;

pub use read::read;
use schema::check;

/// Ended session instances kept, newest first; older ones go with their jobs.
const KEPT_SESSIONS: i64 = 50;

/// The status a job has in the journal when its daemon stopped without
/// recording its end.
pub const LOST: &str = "lost";

/// Where the journal lives: `$XDG_STATE_HOME/jobs-host`, else
/// `~/.local/state/jobs-host`; an empty or relative value of either is
/// ignored (see [`crate::wiring::env_dir`]).
pub fn state_dir() -> Option<PathBuf> {
    crate::wiring::env_dir("XDG_STATE_HOME")
        .or_else(|| crate::wiring::env_dir("HOME").map(|h| h.join(".local/state")))
        .map(|d| d.join("jobs-host"))
}

/// The journal's file in `dir`.
pub fn journal_path(dir: &Path) -> PathBuf {
    dir.join("journal.db")
}

/// One job as the journal records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRow {
    /// Its id in its session (`bash-1`).
    pub id: String,
    /// Its label (the command).
    pub label: String,
    /// `running`, `stopping`, `completed`, `killed`, `failed` or `lost`.
    pub status: String,
    /// Its end's detail (`exit code: 0`).
    pub detail: Option<String>,
    /// Start, epoch ms.
    pub started_at: u64,
    /// End, epoch ms.
    pub finished_at: Option<u64>,
    /// A durable job's directory (its monitor's files).
    pub files: Option<String>,
    /// Its monitor's pid and start time (see `host::bash::process_start_time`).
    pub monitor: Option<(i64, i64)>,
    /// How far the model has read stdout and stderr, in bytes.
    pub cursors: [u64; 2],
    /// Whether the model saw its end or was told of it.
    pub end_seen: bool,
    /// A job on a cluster engine: its runner and the engine's id for it
    /// (its `files` is then the copy of its log as it was taken).
    pub remote: Option<(String, String)>,
}

/// A job of a session whose daemon died while it ran under its monitor: for
/// the next session of its key to take on.
#[derive(Debug, Clone)]
pub struct Orphan {
    /// Its session instance in the journal.
    pub session: i64,
    /// The job as recorded.
    pub job: JobRow,
}

/// A job with its session, as `ps --journal` shows it.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The session's key.
    pub session: String,
    /// The job.
    pub job: JobRow,
}

/// The daemon's handle on the journal.
pub struct Journal {
    conn: Mutex<Connection>,
    daemon: i64,
    /// Locked while this daemon keeps the journal: one daemon per journal,
    /// whatever runtime directory each was started with.
    _lock: std::fs::File,
}

/// A file that exists must be this user's.
fn owned(path: &Path) -> Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if !meta.is_file() => {
            bail!("{} is not a file; refusing to use it", path.display())
        }
        Ok(meta) => super::ours(path, &meta),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Locks `dir/journal.lock` for daemon `pid`.
fn take_lock(dir: &Path, pid: u32) -> Result<std::fs::File> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join("journal.lock");
    owned(&path)?;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    // A reader's look at the lock (`ps`) holds it for an instant: tried for
    // a little while before another daemon is named.
    let mut locked = false;
    for _ in 0..20 {
        if rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_ok() {
            locked = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    if !locked {
        let other = std::fs::read_to_string(&path).unwrap_or_default();
        bail!(
            "another jobs-host daemon (pid {}) keeps the journal in {}: one daemon per user (was it started with another XDG_RUNTIME_DIR?)",
            other.trim(),
            dir.display()
        );
    }
    file.set_len(0)?;
    writeln!(file, "{pid}")?;
    Ok(file)
}

impl Journal {
    /// Opens (or makes) the journal in `dir` for a daemon with `pid`. The
    /// sessions of a daemon that stopped without ending them are ended, and
    /// their jobs that were running are recorded as [`LOST`].
    ///
    /// # Errors
    ///
    /// A directory that is not private, a file that is another user's,
    /// another program's, of another schema or damaged: refused, never
    /// overwritten.
    pub fn open(dir: &Path, pid: u32, now: u64) -> Result<Journal> {
        super::private_dir(dir)?;
        let lock = take_lock(dir, pid)?;
        let path = journal_path(dir);
        owned(&path)?;
        let conn = Connection::open_with_flags(
            &path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .with_context(|| format!("cannot open {}", path.display()))?;
        // Before anything reads it: a reader recovering the log after a crash
        // holds it for a moment, which is not a foreign file.
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        check(&conn, &path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        // A crash of the process loses nothing committed; only a crash of
        // the machine may lose the last writes (never the file's order).
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        schema::create_or_migrate(&conn)?;
        let tx = conn.unchecked_transaction()?;
        let dead: Vec<(i64, i64)> = {
            let mut stmt = tx.prepare("SELECT id, pid FROM daemons WHERE ended_at IS NULL")?;
            stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<rusqlite::Result<_>>()?
        };
        for (daemon, old_pid) in dead {
            // The lock says no daemon runs: this one stopped without ending
            // its sessions (a SIGKILL, a crash, a reboot).
            let detail = format!("its daemon (pid {old_pid}) stopped without recording its end");
            // A job under its monitor lives on: it stays running, for the
            // next session of its key to take on (see `orphans`).
            tx.execute(
                "UPDATE jobs SET status = ?1, detail = ?2, finished_at = ?3
                 WHERE status IN ('running', 'stopping') AND files IS NULL
                   AND session IN (SELECT id FROM sessions WHERE daemon = ?4)",
                params![LOST, detail, now as i64, daemon],
            )?;
            tx.execute(
                "UPDATE sessions SET ended_at = ?1, crashed = 1
                 WHERE daemon = ?2 AND ended_at IS NULL",
                params![now as i64, daemon],
            )?;
            tx.execute(
                "UPDATE daemons SET ended_at = ?1 WHERE id = ?2",
                params![now as i64, daemon],
            )?;
        }
        // Bounded: the newest ended session instances stay, with their jobs.
        // A killed daemon's session whose jobs no later session took on yet
        // is kept whatever its age: its jobs are still to be taken on.
        // (For a linger's longest and a day more: by then the monitors have
        // stopped those jobs, their lease long passed.)
        let waiting = format!(
            "(SELECT DISTINCT session FROM jobs WHERE files IS NOT NULL
               AND status NOT IN ('adopted', 'lost')
               AND session IN (SELECT id FROM sessions WHERE crashed = 1 AND ended_at > {}))",
            now.saturating_sub(
                (super::MAX_LINGER + std::time::Duration::from_secs(86_400)).as_millis() as u64
            )
        );
        tx.execute(
            &format!(
                "DELETE FROM jobs WHERE session NOT IN {waiting} AND session IN (
                     SELECT id FROM sessions WHERE ended_at IS NOT NULL
                     ORDER BY ended_at DESC, id DESC LIMIT -1 OFFSET ?1)"
            ),
            params![KEPT_SESSIONS],
        )?;
        tx.execute(
            &format!(
                "DELETE FROM sessions WHERE ended_at IS NOT NULL AND id NOT IN {waiting}
                   AND id NOT IN (
                     SELECT id FROM sessions WHERE ended_at IS NOT NULL
                     ORDER BY ended_at DESC, id DESC LIMIT ?1)"
            ),
            params![KEPT_SESSIONS],
        )?;
        tx.execute(
            "DELETE FROM daemons WHERE ended_at IS NOT NULL
               AND id NOT IN (SELECT daemon FROM sessions)",
            [],
        )?;
        tx.execute(
            "INSERT INTO daemons(pid, started_at) VALUES (?1, ?2)",
            params![pid, now as i64],
        )?;
        let daemon = tx.last_insert_rowid();
        tx.commit()?;
        Ok(Journal {
            conn: Mutex::new(conn),
            daemon,
            _lock: lock,
        })
    }

    /// Records a session opened now; answers its instance's number.
    ///
    /// # Errors
    ///
    /// The database's.
    pub fn open_session(&self, key: &str, now: u64) -> Result<i64> {
        let conn = lock(&self.conn);
        conn.execute(
            "INSERT INTO sessions(key, daemon, opened_at) VALUES (?1, ?2, ?3)",
            params![key, self.daemon, now as i64],
        )?;
        Ok(conn.last_insert_rowid())
    }

    /// Records that session instance `session` ended now.
    ///
    /// # Errors
    ///
    /// The database's.
    pub fn end_session(&self, session: i64, now: u64) -> Result<()> {
        lock(&self.conn).execute(
            "UPDATE sessions SET ended_at = ?1 WHERE id = ?2",
            params![now as i64, session],
        )?;
        Ok(())
    }

    #[cfg(test)]
    /// Records what changed in session `session`'s jobs since `written` (the
    /// rows as last recorded, updated here): new and changed rows, and the
    /// jobs that are gone (dropped by retention: counted, then removed). One
    /// transaction. Answers the files of the jobs that are gone (the caller
    /// removes them: nothing reads them any more).
    ///
    /// # Errors
    ///
    /// The database's; `written` is then left as it was.
    pub fn record(
        &self,
        session: i64,
        jobs: Vec<JobRow>,
        written: &mut HashMap<String, JobRow>,
    ) -> Result<Vec<String>> {
        let present = jobs.iter().map(|job| job.id.clone()).collect();
        self.record_rows(session, jobs, Some(&present), written)
    }

    /// What `Journal::record` writes, of the jobs of the session that changed
    /// (`changed`) when its jobs are now `present`: the rows of the others
    /// are gone.
    ///
    /// # Errors
    ///
    /// The database's; `written` is then left as it was.
    pub fn record_changes(
        &self,
        session: i64,
        changed: Vec<JobRow>,
        present: &std::collections::HashSet<String>,
        written: &mut HashMap<String, JobRow>,
    ) -> Result<Vec<String>> {
        self.record_rows(session, changed, Some(present), written)
    }

    /// What `Journal::record` writes, of some of the session's jobs (`jobs`): no other
    /// row is taken for gone.
    ///
    /// # Errors
    ///
    /// The database's; `written` is then left as it was.
    pub fn record_some(
        &self,
        session: i64,
        jobs: Vec<JobRow>,
        written: &mut HashMap<String, JobRow>,
    ) -> Result<Vec<String>> {
        self.record_rows(session, jobs, None, written)
    }

    fn record_rows(
        &self,
        session: i64,
        jobs: Vec<JobRow>,
        present: Option<&std::collections::HashSet<String>>,
        written: &mut HashMap<String, JobRow>,
    ) -> Result<Vec<String>> {
        let changed: Vec<&JobRow> = jobs
            .iter()
            .filter(|job| written.get(&job.id) != Some(job))
            .collect();
        let gone: Vec<String> = match present {
            Some(present) => written
                .keys()
                .filter(|id| !present.contains(id.as_str()))
                .cloned()
                .collect(),
            None => Vec::new(),
        };
        if changed.is_empty() && gone.is_empty() {
            return Ok(Vec::new());
        }
        let mut conn = lock(&self.conn);
        let tx = conn.transaction()?;
        {
            // Cached: a session records a few rows at a time, often.
            let mut upsert = tx.prepare_cached(
                "INSERT INTO jobs(session, id, label, status, detail, started_at, finished_at,
                                  files, pid, pid_start, cursor_out, cursor_err, end_seen,
                                  runner, engine_id)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)
                 ON CONFLICT(session, id) DO UPDATE SET status = excluded.status,
                     detail = excluded.detail, finished_at = excluded.finished_at,
                     files = excluded.files, pid = excluded.pid,
                     pid_start = excluded.pid_start, cursor_out = excluded.cursor_out,
                     cursor_err = excluded.cursor_err, end_seen = excluded.end_seen,
                     runner = excluded.runner, engine_id = excluded.engine_id",
            )?;
            for job in &changed {
                upsert.execute(params![
                    session,
                    job.id,
                    job.label,
                    job.status,
                    job.detail,
                    job.started_at as i64,
                    job.finished_at.map(|t| t as i64),
                    job.files,
                    job.monitor.map(|m| m.0),
                    job.monitor.map(|m| m.1),
                    job.cursors[0] as i64,
                    job.cursors[1] as i64,
                    job.end_seen,
                    job.remote.as_ref().map(|r| &r.0),
                    job.remote.as_ref().map(|r| &r.1),
                ])?;
            }
            let mut remove =
                tx.prepare_cached("DELETE FROM jobs WHERE session = ?1 AND id = ?2")?;
            for id in &gone {
                remove.execute(params![session, id])?;
            }
            if !gone.is_empty() {
                tx.execute(
                    "UPDATE sessions SET dropped = dropped + ?1 WHERE id = ?2",
                    params![gone.len() as i64, session],
                )?;
            }
        }
        tx.commit()?;
        let mut files = Vec::new();
        for id in gone {
            files.extend(written.remove(&id).and_then(|row| row.files));
        }
        for job in jobs {
            written.insert(job.id.clone(), job);
        }
        Ok(files)
    }

    /// The jobs of key `key`'s sessions whose daemons died while the jobs
    /// ran under their monitors (or had ended under them, their output
    /// perhaps unread), not yet taken on, oldest first.
    ///
    /// # Errors
    ///
    /// The database's.
    pub fn orphans(&self, key: &str) -> Result<Vec<Orphan>> {
        let conn = lock(&self.conn);
        let mut stmt = conn.prepare(
            "SELECT j.session, j.id, j.label, j.status, j.detail, j.started_at, j.finished_at,
                    j.files, j.pid, j.pid_start, j.cursor_out, j.cursor_err, j.end_seen,
                    j.runner, j.engine_id
             FROM jobs j JOIN sessions s ON s.id = j.session JOIN daemons d ON d.id = s.daemon
             WHERE s.key = ?1 AND s.crashed = 1 AND j.files IS NOT NULL
               AND j.status NOT IN ('adopted', 'lost')
             ORDER BY j.started_at, j.rowid",
        )?;
        let rows: Vec<Orphan> = stmt
            .query_map(params![key], |r| {
                Ok(Orphan {
                    session: r.get(0)?,
                    job: job_row(r, 1)?,
                })
            })?
            .collect::<rusqlite::Result<_>>()?;
        // A daemon killed while it took jobs on leaves a job in two sessions
        // (the new rows are written before the old let go): the newer has
        // the newer cursors.
        let mut newest: HashMap<String, Orphan> = HashMap::new();
        let mut order = Vec::new();
        for orphan in rows {
            let files = orphan.job.files.clone().unwrap_or_default();
            match newest.get(&files) {
                Some(known) if known.session >= orphan.session => {}
                Some(_) => {
                    newest.insert(files, orphan);
                }
                None => {
                    order.push(files.clone());
                    newest.insert(files, orphan);
                }
            }
        }
        Ok(order
            .into_iter()
            .filter_map(|f| newest.remove(&f))
            .collect())
    }

    /// Records that `orphans` were taken on by this daemon's session
    /// instance `by`, which has recorded them anew as its own: their older
    /// rows go, so a key whose daemon is killed again and again keeps one
    /// row per job, not one per daemon that took it on.
    ///
    /// # Errors
    ///
    /// The database's.
    pub fn adopted(&self, orphans: &[Orphan], by: i64) -> Result<()> {
        let mut conn = lock(&self.conn);
        let tx = conn.transaction()?;
        for orphan in orphans {
            // Every older row of the job too (see `orphans`).
            drop_older_rows(&tx, orphan, by)?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Records `orphans` as lost: they cannot be taken on (their file is not
    /// one of ours, or a job of the session has their id).
    ///
    /// # Errors
    ///
    /// The database's.
    pub fn lost(&self, orphans: &[Orphan], now: u64) -> Result<()> {
        if orphans.is_empty() {
            return Ok(());
        }
        let mut conn = lock(&self.conn);
        let tx = conn.transaction()?;
        for orphan in orphans {
            tx.execute(
                "UPDATE jobs SET status = ?1, detail = ?2, finished_at = ?3
                 WHERE session = ?4 AND id = ?5",
                params![
                    LOST,
                    "the next daemon could not take it on",
                    now as i64,
                    orphan.session,
                    orphan.job.id
                ],
            )?;
            // An older row of the job (a daemon killed as it took the job
            // on) would offer it to the daemon after this one again.
            drop_older_rows(&tx, orphan, orphan.session)?;
        }
        tx.commit()?;
        Ok(())
    }

    /// The job directories the journal still needs (those of jobs a dead
    /// daemon left, not yet taken on), for the cleanup of the rest.
    ///
    /// # Errors
    ///
    /// The database's.
    pub fn needed_files(&self) -> Result<Vec<String>> {
        let conn = lock(&self.conn);
        let mut stmt = conn.prepare(
            "SELECT j.files FROM jobs j JOIN sessions s ON s.id = j.session
             WHERE j.files IS NOT NULL AND s.crashed = 1 AND j.status NOT IN ('adopted', 'lost')",
        )?;
        let files = stmt
            .query_map([], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        Ok(files)
    }

    /// Records that this daemon ended in order, now.
    ///
    /// # Errors
    ///
    /// The database's.
    pub fn end_daemon(&self, now: u64) -> Result<()> {
        let mut conn = lock(&self.conn);
        let tx = conn.transaction()?;
        // A job whose end was never written (a write that failed) is not
        // left running forever.
        tx.execute(
            "UPDATE jobs SET status = ?1, detail = ?2, finished_at = ?3
             WHERE status IN ('running', 'stopping')
               AND session IN (SELECT id FROM sessions WHERE daemon = ?4)",
            params![
                LOST,
                "its daemon ended without recording its end",
                now as i64,
                self.daemon
            ],
        )?;
        tx.execute(
            "UPDATE sessions SET ended_at = ?1 WHERE daemon = ?2 AND ended_at IS NULL",
            params![now as i64, self.daemon],
        )?;
        tx.execute(
            "UPDATE daemons SET ended_at = ?1 WHERE id = ?2",
            params![now as i64, self.daemon],
        )?;
        tx.commit()?;
        Ok(())
    }
}

/// Deletes the rows of `orphan`'s job that dead daemons' sessions other
/// than `keep` hold (found by its files, through their index), lost ones
/// aside: a job taken on or lost keeps one row.
fn drop_older_rows(tx: &rusqlite::Transaction<'_>, orphan: &Orphan, keep: i64) -> Result<()> {
    tx.prepare_cached(
        "DELETE FROM jobs
         WHERE files = ?1 AND session != ?2 AND status != 'lost'
           AND session IN (SELECT id FROM sessions WHERE crashed = 1)",
    )?
    .execute(params![orphan.job.files, keep])?;
    Ok(())
}

/// The job row whose columns start at `at` (in `orphans`' order).
fn job_row(r: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<JobRow> {
    let pid: Option<i64> = r.get(at + 7)?;
    let start: Option<i64> = r.get(at + 8)?;
    Ok(JobRow {
        id: r.get(at)?,
        label: r.get(at + 1)?,
        status: r.get(at + 2)?,
        detail: r.get(at + 3)?,
        started_at: r.get::<_, i64>(at + 4)? as u64,
        finished_at: r.get::<_, Option<i64>>(at + 5)?.map(|t| t as u64),
        files: r.get(at + 6)?,
        monitor: pid.zip(start),
        cursors: [
            r.get::<_, i64>(at + 9)? as u64,
            r.get::<_, i64>(at + 10)? as u64,
        ],
        end_seen: r.get(at + 11)?,
        remote: r
            .get::<_, Option<String>>(at + 12)?
            .zip(r.get::<_, Option<String>>(at + 13)?),
    })
}
