//! The journal read back, read-only, for `jobs-host ps --journal` and
//! `logs` with no daemon: it never blocks the daemon that keeps it.

use std::path::Path;

use anyhow::{Context, Result};
use rusqlite::{Connection, OpenFlags, OptionalExtension};

use super::schema::check;
use super::{LOST, Recorded, job_row, journal_path, owned};

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
    let kept = crate::daemon::locked(&dir.join("journal.lock"));
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    let durable_columns = match version {
        3.. => {
            "j.files, j.pid, j.pid_start, j.cursor_out, j.cursor_err, j.end_seen, j.runner, j.engine_id"
        }
        2 => "j.files, j.pid, j.pid_start, j.cursor_out, j.cursor_err, j.end_seen, NULL, NULL",
        _ => "NULL, NULL, NULL, 0, 0, 0, NULL, NULL",
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
            let pid: i64 = r.get(15)?;
            let unended: bool = r.get(16)?;
            let running = matches!(job.status.as_str(), "running" | "stopping");
            if let Some((runner, engine_id)) = job.remote.as_ref().filter(|_| running && (!kept || !unended)) {
                // On its engine, whatever became of its daemon: the next
                // session of its key follows it again.
                job.detail = Some(format!(
                    "left on runner {runner} as {engine_id} after its daemon (pid {pid}) stopped"
                ));
            } else if running && job.files.is_some() && (!kept || !unended) {
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
