//! The daemon's journal: an SQLite database (WAL) under
//! `$XDG_STATE_HOME/jobs-host/` that records every durable session and its
//! jobs as they start and end, so a person can see what ran after the daemon
//! is gone, and a daemon that was killed leaves its running jobs recorded as
//! `lost`, never as finished.
//!
//! Each write is one transaction: a crash at any instant leaves the journal
//! as it was before or after the write. Readers (`jobs-host ps --journal`)
//! open it read-only and never block the daemon.

use host::sync::lock;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context, Result, bail};
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};

/// The schema this build writes and reads (`PRAGMA user_version`).
pub const SCHEMA: i64 = 2;

/// Marks a database as a jobs-host journal (`PRAGMA application_id`): "JOBS".
const APPLICATION_ID: i64 = 0x4a4f_4253;

/// Ended session instances kept, newest first; older ones go with their jobs.
const KEPT_SESSIONS: i64 = 50;

/// The status a job has in the journal when its daemon stopped without
/// recording its end.
pub const LOST: &str = "lost";

/// Where the journal lives: `$XDG_STATE_HOME/jobs-host`, else
/// `~/.local/state/jobs-host`.
pub fn state_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_STATE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
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

/// Checks that `path`, if it exists, is this user's and a journal of this
/// schema, with nothing broken in it.
fn check(conn: &Connection, path: &Path) -> Result<()> {
    let refuse = |why: String| {
        anyhow::anyhow!(
            "{} {why}; it is left as it is (move it away to start a new journal)",
            path.display()
        )
    };
    let read = |pragma: &str| -> Result<i64> {
        conn.query_row(&format!("PRAGMA {pragma}"), [], |r| r.get(0))
            .map_err(|e| refuse(format!("is not a jobs-host journal ({e})")))
    };
    let application = read("application_id")?;
    let version = read("user_version")?;
    if application == 0 && version == 0 {
        // Empty: made just now, or by a daemon that stopped before writing.
        let tables: i64 = conn
            .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
            .map_err(|e| refuse(format!("is not a jobs-host journal ({e})")))?;
        if tables == 0 {
            return Ok(());
        }
        return Err(refuse("is another program's database".to_owned()));
    }
    if application != APPLICATION_ID {
        return Err(refuse("is another program's database".to_owned()));
    }
    // Version 0 with our id: a journal made by a daemon killed before its
    // first migration finished (made again, nothing in it lost).
    if version != SCHEMA && version != 1 && version != 0 {
        return Err(refuse(format!(
            "has schema version {version}; this jobs-host reads version {SCHEMA}"
        )));
    }
    let verdict: String = conn
        .query_row("PRAGMA quick_check", [], |r| r.get(0))
        .map_err(|e| refuse(format!("cannot be checked ({e})")))?;
    if verdict != "ok" {
        return Err(refuse(format!("is damaged ({verdict})")));
    }
    Ok(())
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
    use std::os::fd::AsRawFd;
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
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
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
        conn.execute_batch(&format!(
            "BEGIN;
             CREATE TABLE IF NOT EXISTS daemons(
                 id INTEGER PRIMARY KEY, pid INTEGER NOT NULL,
                 started_at INTEGER NOT NULL, ended_at INTEGER);
             CREATE TABLE IF NOT EXISTS sessions(
                 id INTEGER PRIMARY KEY, key TEXT NOT NULL, daemon INTEGER NOT NULL,
                 opened_at INTEGER NOT NULL, ended_at INTEGER, dropped INTEGER NOT NULL DEFAULT 0,
                 crashed INTEGER NOT NULL DEFAULT 0);
             CREATE TABLE IF NOT EXISTS jobs(
                 session INTEGER NOT NULL, id TEXT NOT NULL, label TEXT NOT NULL,
                 status TEXT NOT NULL, detail TEXT, started_at INTEGER NOT NULL,
                 finished_at INTEGER, PRIMARY KEY(session, id));
             PRAGMA application_id = {APPLICATION_ID};
             COMMIT;"
        ))?;
        // Version 1 (no durable jobs) gains their columns; nothing is lost.
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if version < SCHEMA {
            let columns: Vec<String> = {
                let mut stmt = conn.prepare("SELECT name FROM pragma_table_info('jobs')")?;
                stmt.query_map([], |r| r.get(0))?
                    .collect::<rusqlite::Result<_>>()?
            };
            let tx = conn.unchecked_transaction()?;
            let session_columns: Vec<String> = {
                let mut stmt = tx.prepare("SELECT name FROM pragma_table_info('sessions')")?;
                stmt.query_map([], |r| r.get(0))?
                    .collect::<rusqlite::Result<_>>()?
            };
            if !session_columns.iter().any(|c| c == "crashed") {
                tx.execute_batch(
                    "ALTER TABLE sessions ADD COLUMN crashed INTEGER NOT NULL DEFAULT 0;",
                )?;
            }
            for (name, kind) in [
                ("files", "TEXT"),
                ("pid", "INTEGER"),
                ("pid_start", "INTEGER"),
                ("cursor_out", "INTEGER NOT NULL DEFAULT 0"),
                ("cursor_err", "INTEGER NOT NULL DEFAULT 0"),
                ("end_seen", "INTEGER NOT NULL DEFAULT 0"),
            ] {
                if !columns.iter().any(|c| c == name) {
                    tx.execute_batch(&format!("ALTER TABLE jobs ADD COLUMN {name} {kind};"))?;
                }
            }
            tx.execute_batch(&format!("PRAGMA user_version = {SCHEMA};"))?;
            tx.commit()?;
        }
        // Jobs are found by their files when taken on; a journal of an
        // earlier build gains the index too (readers do not need it).
        conn.execute_batch(
            "CREATE INDEX IF NOT EXISTS jobs_by_files ON jobs(files) WHERE files IS NOT NULL;",
        )?;
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
                                  files, pid, pid_start, cursor_out, cursor_err, end_seen)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
                 ON CONFLICT(session, id) DO UPDATE SET status = excluded.status,
                     detail = excluded.detail, finished_at = excluded.finished_at,
                     files = excluded.files, pid = excluded.pid,
                     pid_start = excluded.pid_start, cursor_out = excluded.cursor_out,
                     cursor_err = excluded.cursor_err, end_seen = excluded.end_seen",
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
                    j.files, j.pid, j.pid_start, j.cursor_out, j.cursor_err, j.end_seen
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
    })
}

/// What the journal in `dir` recorded, read-only: every job of every kept
/// session instance (oldest first), the jobs dropped by retention, and
/// whether a daemon keeps the journal now. With none keeping it, the jobs a
/// daemon left running are shown [`LOST`], as the next daemon will record
/// them. `None` when there is no journal.
///
/// # Errors
///
/// A journal that is another user's, another program's, of another schema
/// or damaged.
pub fn read(dir: &Path) -> Result<Option<(Vec<Recorded>, i64, bool)>> {
    let path = journal_path(dir);
    if !path.exists() {
        return Ok(None);
    }
    owned(&path)?;
    let conn = Connection::open_with_flags(&path, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .with_context(|| format!("cannot open {}", path.display()))?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    check(&conn, &path)?;
    let has_tables: Option<String> = conn
        .query_row(
            "SELECT name FROM sqlite_master WHERE name = 'jobs'",
            [],
            |r| r.get(0),
        )
        .optional()?;
    if has_tables.is_none() {
        return Ok(Some((Vec::new(), 0, false)));
    }
    // With no daemon keeping the journal, one that never recorded its end
    // was killed: its running jobs are lost, as its successor will record.
    let kept = super::locked(&dir.join("journal.lock"));
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    let durable_columns = if version >= 2 {
        "j.files, j.pid, j.pid_start, j.cursor_out, j.cursor_err, j.end_seen"
    } else {
        "NULL, NULL, NULL, 0, 0, 0"
    };
    let mut stmt = conn.prepare(&format!(
        "SELECT s.key, j.id, j.label, j.status, j.detail, j.started_at, j.finished_at,
                {durable_columns}, d.pid, d.ended_at IS NULL
         FROM jobs j JOIN sessions s ON s.id = j.session JOIN daemons d ON d.id = s.daemon
         ORDER BY s.opened_at, s.id, j.started_at, j.rowid"
    ))?;
    let jobs = stmt
        .query_map([], |r| {
            let mut job = job_row(r, 1)?;
            let pid: i64 = r.get(13)?;
            let unended: bool = r.get(14)?;
            let running = matches!(job.status.as_str(), "running" | "stopping");
            if running && job.files.is_some() && (!kept || !unended) {
                // Under its monitor, whatever became of its daemon: shown
                // as its monitor and its files say.
                let monitor = job.monitor.map(|(pid, start)| (pid, start as u64)).or_else(|| {
                    job.files
                        .as_deref()
                        .and_then(|f| host::bash::recorded_monitor(Path::new(f)))
                        .map(|(pid, start)| (i64::from(pid), start))
                });
                job.detail = Some(match monitor {
                    Some((monitor, start))
                        if host::bash::process_start_time(monitor as i32) == Some(start) =>
                    {
                        format!("kept by its monitor (pid {monitor}) after its daemon (pid {pid}) stopped")
                    }
                    _ => match job.files.as_deref().and_then(|f| host::bash::JobEnd::read(Path::new(f))) {
                        Some(end) => {
                            job.status = "ended".to_owned();
                            match (end.code, end.signal) {
                                (Some(code), _) => format!("exit code: {code}, while its daemon was down"),
                                (None, Some(signal)) => format!("signal {signal}, while its daemon was down"),
                                (None, None) => "ended while its daemon was down".to_owned(),
                            }
                        }
                        None => {
                            job.status = LOST.to_owned();
                            "its monitor is gone and recorded no end".to_owned()
                        }
                    },
                });
            } else if !kept && unended && running {
                job.status = LOST.to_owned();
                job.detail = Some(format!(
                    "its daemon (pid {pid}) stopped without recording its end"
                ));
            }
            Ok(Recorded {
                session: r.get(0)?,
                job,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let dropped: i64 =
        conn.query_row("SELECT coalesce(sum(dropped), 0) FROM sessions", [], |r| {
            r.get(0)
        })?;
    Ok(Some((jobs, dropped, kept)))
}

#[cfg(test)]
mod tests {
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
        newer.execute_batch("PRAGMA user_version = 3;").unwrap();
        drop(newer);
        let refused = Journal::open(dir.path(), 1, 1).err().unwrap().to_string();
        assert!(
            refused.contains("has schema version 3; this jobs-host reads version 2"),
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
}
