//! The journal's writer: a session's jobs written shortly after each change
//! (a burst of starts is one transaction), and before each reply what that
//! reply shows (how far the model read, which ends it saw), so a daemon
//! killed right after a reply leaves nothing to show twice.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use host::JobRegistry;
use host::session::Session;
use host::sync::lock;

use super::files::StateFiles;
use crate::daemon::journal::{JobRow, Journal};

/// A session's jobs, written to the journal shortly after each change (a
/// burst of starts is one transaction).
pub(super) struct Recorder {
    pub(super) journal: Arc<Journal>,
    /// The session instance's number in the journal.
    pub(super) instance: i64,
    /// The rows as last written.
    pub(super) written: Arc<Mutex<HashMap<String, JobRow>>>,
    /// Where a dropped job's file goes.
    pub(super) files: Arc<StateFiles>,
    pub(super) task: tokio::task::JoinHandle<()>,
    pub(super) _listener: host::registry::ListenerRegistration,
}

/// How long the recorder lets changes gather before it writes them.
const RECORD_DELAY: Duration = Duration::from_millis(10);

impl Recorder {
    /// Records `session` as a new instance of `key`, and starts writing
    /// its jobs' changes.
    pub(super) fn start(
        journal: Arc<Journal>,
        key: &str,
        session: &Session,
        files: Arc<StateFiles>,
    ) -> Result<Recorder> {
        let instance = journal.open_session(key, host::registry::now_ms())?;
        let dirty = Arc::new(tokio::sync::Notify::new());
        let poke = dirty.clone();
        let listener = session
            .registry()
            .on_jobs_changed(move |_| poke.notify_one());
        let written = Arc::new(Mutex::new(HashMap::new()));
        let registry = session.registry().clone();
        let owner = session.owner().clone();
        let (task_journal, task_written, task_files) =
            (journal.clone(), written.clone(), files.clone());
        let task = tokio::spawn(async move {
            // The registry's removals when every job was last written (none
            // yet): until it moves, no row is to be dropped, and only the
            // jobs changed since are looked at.
            let mut removals_written = None;
            loop {
                dirty.notified().await;
                tokio::time::sleep(RECORD_DELAY).await;
                // A job is recorded at its start, before its monitor exists
                // (the spawn goes on meanwhile): it is written again once
                // its monitor's pid is known, for whoever takes it on.
                for attempt in 0..3 {
                    let removals = registry.removals();
                    let unspawned = if removals_written == Some(removals) {
                        write_durable_changes(
                            &task_journal,
                            instance,
                            &registry,
                            &owner,
                            &task_written,
                        )
                        .await
                    } else {
                        let written = write_rows(
                            &task_journal,
                            instance,
                            &registry,
                            &owner,
                            &task_written,
                            &task_files,
                        )
                        .await;
                        if written.is_some() {
                            removals_written = Some(removals);
                        }
                        written.unwrap_or_default()
                    };
                    if unspawned.is_empty() || attempt == 2 {
                        break;
                    }
                    until_spawned(&registry, &unspawned).await;
                }
            }
        });
        Ok(Recorder {
            journal,
            instance,
            written,
            files,
            task,
            _listener: listener,
        })
    }

    /// Makes each reply of `session` wait until what it shows is recorded
    /// (how far the model read, which ends it saw), so that a daemon killed
    /// right after a reply went out leaves nothing to show twice.
    pub(super) fn flush_before_replies(&self, session: &Session) {
        let (journal, instance, written) =
            (self.journal.clone(), self.instance, self.written.clone());
        let (registry, owner) = (session.registry().clone(), session.owner().clone());
        let hook: host::session::BeforeReply = Arc::new(move || {
            let (journal, written) = (journal.clone(), written.clone());
            let (registry, owner) = (registry.clone(), owner.clone());
            Box::pin(async move {
                // A start's answer waits for its monitor to exist (the spawn
                // goes on after the start): a job it names survives a daemon
                // killed right after it, and is found by the next one. Its
                // row names the job's file, which is held from its making to
                // its monitor's end, and where the monitor writes its pid
                // first (see `host::bash::file_in_use`); the recorder writes
                // the pid too, later, for a person's `ps`.
                let unspawned =
                    write_durable_changes(&journal, instance, &registry, &owner, &written).await;
                if !unspawned.is_empty() {
                    until_spawned(&registry, &unspawned).await;
                }
            })
        });
        let _ = session.set_before_reply(hook);
    }

    /// Writes `session`'s jobs that changed since they were last written
    /// (see [`write_rows`]).
    pub(super) async fn write_rows(&self, session: &Session) -> Option<Vec<String>> {
        write_rows(
            &self.journal,
            self.instance,
            session.registry(),
            session.owner(),
            &self.written,
            &self.files,
        )
        .await
    }

    /// Writes what is left and records the session's end.
    pub(super) async fn end(&self, session: &Session) {
        self.task.abort();
        self.write_rows(session).await;
        if let Err(e) = self
            .journal
            .end_session(self.instance, host::registry::now_ms())
        {
            tracing::warn!("jobs-host daemon: the journal did not take a session's end: {e:#}");
        }
    }
}

/// Writes what changed of `owner`'s jobs (a start, a read's cursor, a seen
/// end; see `host::registry::DurableState`) since they were last written,
/// before every reply: a look at each job, a copy of only those that
/// changed. Answers the running ones under a monitor not spawned yet.
async fn write_durable_changes(
    journal: &Arc<Journal>,
    instance: i64,
    registry: &JobRegistry,
    owner: &host::Owner,
    written: &Arc<Mutex<HashMap<String, JobRow>>>,
) -> Vec<String> {
    let (journal, written) = (journal.clone(), written.clone());
    let (registry, owner) = (registry.clone(), owner.clone());
    let recorded = tokio::task::spawn_blocking(move || {
        let mut written = lock(&written);
        let states = registry.changed_states(Some(&owner));
        let unspawned = unspawned(&states);
        let changed = changed_rows(&registry, &states, &written);
        if !changed.is_empty() {
            journal.record_some(instance, changed, &mut written)?;
        }
        registry.mark_recorded(&states);
        Ok(unspawned)
    })
    .await;
    taken(recorded).unwrap_or_default()
}

/// The running jobs under a monitor in `states` whose monitor is not
/// spawned yet.
fn unspawned(states: &[(String, host::registry::DurableState)]) -> Vec<String> {
    states
        .iter()
        .filter(|(_, s)| s.unspawned())
        .map(|(id, _)| id.clone())
        .collect()
}

/// The rows of the jobs in `states` that changed since `written`: only
/// they are read whole.
fn changed_rows(
    registry: &JobRegistry,
    states: &[(String, host::registry::DurableState)],
    written: &HashMap<String, JobRow>,
) -> Vec<JobRow> {
    states
        .iter()
        .filter(|(id, state)| {
            written.get(id).is_none_or(|row| {
                row.status != state.status.as_str()
                    || row.finished_at != state.finished_at
                    || row.cursors != state.cursors
                    || row.end_seen != state.end_seen
                    || row.remote.is_some() != (state.remote == Some(true))
                    || row.monitor
                        != state
                            .monitor
                            .map(|(pid, start)| (i64::from(pid), start as i64))
            })
        })
        .filter_map(|(id, _)| Some(job_row(registry, registry.inspect(id)?)))
        .collect()
}

/// The journal's row of `job`.
fn job_row(registry: &JobRegistry, job: host::registry::JobSnapshot) -> JobRow {
    let durable = registry.durable_view(&job.id);
    let monitor = durable
        .as_ref()
        .and_then(|d| d.monitor)
        .map(|(pid, start)| (i64::from(pid), start as i64));
    JobRow {
        id: job.id,
        label: job.label,
        status: job.status.as_str().to_owned(),
        detail: job.detail,
        started_at: job.started_at,
        finished_at: job.finished_at,
        files: durable.as_ref().map(|d| d.files.display().to_string()),
        monitor,
        cursors: durable.as_ref().map_or([0, 0], |d| d.cursors),
        end_seen: durable.as_ref().is_some_and(|d| d.end_seen),
        remote: durable.and_then(|d| d.remote),
    }
}

/// Waits until the jobs `ids` are spawned, at most a second (a spawner
/// thread stalled by the machine is not waited for without end).
async fn until_spawned(registry: &JobRegistry, ids: &[String]) {
    let all = async {
        for id in ids {
            registry.until_spawned(id).await;
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), all).await;
}

/// Writes `owner`'s jobs that changed since `written`, off the async
/// workers. The running jobs under a monitor that were written without
/// their monitor's pid (not spawned yet); `None` when the journal did not
/// take the write.
async fn write_rows(
    journal: &Arc<Journal>,
    instance: i64,
    registry: &JobRegistry,
    owner: &host::Owner,
    written: &Arc<Mutex<HashMap<String, JobRow>>>,
    files: &Arc<StateFiles>,
) -> Option<Vec<String>> {
    let (journal, written, files) = (journal.clone(), written.clone(), files.clone());
    let (registry, owner) = (registry.clone(), owner.clone());
    let recorded = tokio::task::spawn_blocking(move || {
        // Looked at under the lock: of two writes, the later one's look is
        // the newer, so an older one can never overwrite it.
        let mut written = lock(&written);
        let states = registry.job_states(Some(&owner));
        let unspawned = unspawned(&states);
        let changed = changed_rows(&registry, &states, &written);
        let present = states.iter().map(|(id, _)| id.clone()).collect();
        journal
            .record_changes(instance, changed, &present, &mut written)
            .map(|gone| {
                registry.mark_recorded(&states);
                // Retention dropped these jobs: their files go with them.
                for file in gone {
                    files.retire_file(std::path::Path::new(&file));
                }
                unspawned
            })
    })
    .await;
    taken(recorded)
}

/// What a journal write off the async workers answered; `None`, said in
/// the log, when the journal did not take it or its thread failed.
pub(super) fn taken<T>(
    recorded: std::result::Result<Result<T>, tokio::task::JoinError>,
) -> Option<T> {
    match recorded {
        Ok(Ok(answer)) => Some(answer),
        Ok(Err(e)) => {
            tracing::warn!("jobs-host daemon: the journal did not take a change: {e:#}");
            None
        }
        Err(e) => {
            tracing::warn!("jobs-host daemon: the journal's writer failed: {e}");
            None
        }
    }
}
