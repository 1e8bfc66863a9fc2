//! Taking on the jobs that sessions of dead daemons left running under
//! their monitors or on a runner's engine, for the next session of their
//! key (see `host::bash::BashProducer::adopt` and
//! `host::runners::ray::RayRunner::resume`).

use std::path::PathBuf;

use host::session::Session;

use super::Daemon;
use super::files::{SessionFiles, is_job_file};
use super::recorder::Recorder;

impl Daemon {
    /// Takes on the jobs that sessions of `key` of dead daemons left running
    /// under their monitors (see `host::bash::BashProducer::adopt`); the
    /// leases the session keeps then, and the directories it took jobs from.
    pub(super) async fn adopt_orphans(
        &self,
        key: &str,
        host: &crate::wiring::Host,
        session: &Session,
        recorder: Option<&Recorder>,
        files: Option<&SessionFiles>,
    ) -> (Vec<PathBuf>, Vec<PathBuf>) {
        let mut leases: Vec<PathBuf> = files.map(|f| f.lease.clone()).into_iter().collect();
        let mut from = Vec::new();
        let (Some(journal), Some(recorder)) = (&self.journal, recorder) else {
            return (leases, from);
        };
        let orphans = match journal.orphans(key) {
            Ok(orphans) => orphans,
            Err(e) => {
                tracing::warn!("jobs-host daemon: cannot read the journal's orphans: {e:#}");
                return (leases, from);
            }
        };
        let mut taken = Vec::new();
        // Orphans that cannot be taken on are recorded lost, not kept
        // waiting forever.
        let mut skipped = Vec::new();
        let Some(jobs_dir) = self.state.as_ref().map(|s| s.join("jobs")) else {
            return (leases, from);
        };
        for orphan in orphans {
            let Some(dir) = orphan.job.files.as_deref().map(PathBuf::from) else {
                continue;
            };
            // Only a job file of a session directory of ours, whatever the
            // journal says.
            if !is_job_file(&jobs_dir, &dir) {
                tracing::warn!(
                    "jobs-host daemon: the journal names {} for {}, which is not a job's file; not taken on",
                    dir.display(),
                    orphan.job.id
                );
                skipped.push(orphan);
                continue;
            }
            let recorded = (orphan.job.status != "running")
                .then(|| (orphan.job.status.clone(), orphan.job.detail.clone()));
            let adopted = match &orphan.job.remote {
                Some((runner, submission_id)) => {
                    let Some(found) = host.runners.iter().find(|r| r.name() == runner) else {
                        // Kept for a later session of the key that names the
                        // runner: the job runs on, on its engine.
                        tracing::warn!(
                            "jobs-host daemon: session {key:?} has no runner {runner:?}; {} ({submission_id}) is left for a session that has one",
                            orphan.job.id
                        );
                        continue;
                    };
                    let request = host::runners::RemoteAdopt {
                        id: orphan.job.id.clone(),
                        label: orphan.job.label.clone(),
                        started_at: orphan.job.started_at,
                        submission_id: submission_id.clone(),
                        copy: dir.clone(),
                        cursors: orphan.job.cursors,
                        end_seen: orphan.job.end_seen,
                        recorded,
                    };
                    // Off the async workers' duty while it reads the kept log.
                    tokio::task::block_in_place(|| {
                        found.resume(Some(session.owner().clone()), request)
                    })
                    .map(|resumed| format!("{resumed:?}"))
                }
                // A kept log whose row never got the engine's id (a daemon
                // killed in between): the job cannot be found on its engine.
                None if dir
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("remote-") || n.starts_with("slurm-")) =>
                {
                    tracing::warn!(
                        "jobs-host daemon: {} ran on a runner whose engine id was never recorded; not taken on",
                        orphan.job.id
                    );
                    skipped.push(orphan);
                    continue;
                }
                None => {
                    let request = host::bash::AdoptRequest {
                        id: orphan.job.id.clone(),
                        label: orphan.job.label.clone(),
                        started_at: orphan.job.started_at,
                        files: dir.clone(),
                        monitor: orphan
                            .job
                            .monitor
                            .map(|(pid, start)| (pid as i32, start as u64)),
                        cursors: orphan.job.cursors,
                        end_seen: orphan.job.end_seen,
                        recorded,
                    };
                    // Off the async workers' duty while it reads the job's
                    // files (and waits, briefly, for a monitor that is
                    // starting).
                    tokio::task::block_in_place(|| {
                        host.bash.adopt(Some(session.owner().clone()), request)
                    })
                    .map(|found| format!("{found:?}"))
                }
            };
            match adopted {
                Ok(found) => {
                    tracing::info!(
                        "jobs-host daemon: session {key:?} took on {} ({found})",
                        orphan.job.id
                    );
                    if let Some(old) = dir.parent() {
                        let lease = old.join("lease");
                        if !leases.contains(&lease) {
                            leases.push(lease);
                            from.push(old.to_owned());
                        }
                    }
                    taken.push(orphan);
                }
                Err(e) => {
                    tracing::warn!(
                        "jobs-host daemon: session {key:?} cannot take on {}: {e}",
                        orphan.job.id
                    );
                    skipped.push(orphan);
                }
            }
        }
        // The jobs are this session's in the journal before the old rows
        // let go of them: a daemon killed in between leaves two rows of a
        // job, and the next one takes the newer.
        let recorded = recorder.write_rows(session).await;
        // Not recorded anew: the old rows keep the jobs for the next daemon.
        if recorded.is_some()
            && let Err(e) = journal.adopted(&taken, recorder.instance)
        {
            tracing::warn!("jobs-host daemon: the journal did not take an adoption: {e:#}");
        }
        if let Err(e) = journal.lost(&skipped, host::registry::now_ms()) {
            tracing::warn!("jobs-host daemon: the journal did not take a lost job: {e:#}");
        }
        (leases, from)
    }
}
