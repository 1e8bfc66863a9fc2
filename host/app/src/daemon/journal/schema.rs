//! The journal's one schema, and the only migrations it has: from version
//! 1 (no durable jobs) to version 2 (their files, monitors and read
//! cursors) and to version 3 (jobs on a cluster engine: their runner and
//! the engine's id), adding columns in place, nothing lost. A journal of any other
//! version, another program's database, or a damaged one is refused, never
//! overwritten.
//!
//! ```text
//! daemons(id, pid, started_at, ended_at)
//! sessions(id, key, daemon, opened_at, ended_at, dropped, crashed)
//! jobs(session, id, label, status, detail, started_at, finished_at,
//!      files, pid, pid_start, cursor_out, cursor_err, end_seen,
//!      runner, engine_id)                                       key (session, id)
//! index jobs_by_files on jobs(files) where files is not null
//! ```

use std::path::Path;

use anyhow::Result;
use rusqlite::Connection;

/// The schema this build writes and reads (`PRAGMA user_version`).
pub const SCHEMA: i64 = 3;

/// Marks a database as a jobs-host journal (`PRAGMA application_id`): "JOBS".
const APPLICATION_ID: i64 = 0x4a4f_4253;

/// Makes the tables (a new journal) or brings an older schema up to
/// [`SCHEMA`], each in one transaction.
///
/// # Errors
///
/// The database's.
pub(super) fn create_or_migrate(conn: &Connection) -> Result<()> {
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
    // Versions 1 (no durable jobs) and 2 (no remote ones) gain their
    // columns; nothing is lost.
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
            ("runner", "TEXT"),
            ("engine_id", "TEXT"),
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
    Ok(())
}

/// Checks that `path`, if it exists, is this user's and a journal of this
/// schema, with nothing broken in it.
pub(super) fn check(conn: &Connection, path: &Path) -> Result<()> {
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
    if !(0..=SCHEMA).contains(&version) {
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
