//! A job a previous host started on the engine, taken on again by the next
//! after the old one died (a daemon killed): its output is read back from
//! the copy of its log the old host kept (see `output::LogCopy`), the
//! model's read cursor is put back, and the log's tail is followed on from
//! the copy's end, so no byte is lost or shown twice. Its end is the
//! engine's, as for any job; a job the engine no longer knows is `failed`
//! with `lost: the engine has no record of ...`, its output kept.

use super::RayRunner;
use super::job::{self, Followed};
use super::output::{LogCopy, Output};
use super::tail::Cursor;
use crate::owner::Owner;
use crate::producers::runners::{RemoteAdopt, Resumed};
use crate::registry::{JobOutcome, Placement, StartError};

impl RayRunner {
    /// Takes on `job`, which a previous host started on this runner's
    /// engine, for `owner`, under its old id (see the module's notes).
    ///
    /// # Errors
    ///
    /// A copy of its log that cannot be read, or the registry's refusal
    /// (an id taken, a stale owner); the job on the engine is left as it
    /// is.
    pub fn resume(&self, owner: Option<Owner>, job: RemoteAdopt) -> Result<Resumed, StartError> {
        let inner = &self.inner;
        let capture = self.new_capture();
        let mut output = Output::new(capture.clone(), &job.submission_id, None);
        let (copy, taken) = LogCopy::resume(&job.copy, &mut output).map_err(|e| {
            StartError::Producer(format!(
                "runner {}: cannot read the log kept in {}: {e}",
                inner.name,
                job.copy.display()
            ))
        })?;
        // A copy cut short (a write that failed) lacks bytes the model
        // read: they come again from the engine, and are left out then.
        output.skip(job.cursors[0].saturating_sub(output.pushed()));
        capture.set_cursors(job.cursors);
        let remote = super::Remote::new(Some(job.copy.clone()));
        let _ = remote.submission_id.set(job.submission_id.clone());
        let placement = Placement::new(format!("{}: {}", inner.name, job.submission_id));
        let recorded_end = job.recorded_end();
        // The job's task goes on only once the registry has taken the job:
        // one it refuses is neither followed nor written to.
        let (adopted_tx, adopted_rx) = tokio::sync::oneshot::channel::<()>();
        let (found, hooks) = match recorded_end {
            Some(outcome) => {
                // Whatever the gate held back is the job's too.
                output.finish();
                let life = std::future::ready(outcome);
                (
                    Resumed::Ended,
                    self.watch(remote.clone(), capture, placement, life),
                )
            }
            None => {
                output.keep_in(copy);
                let follow = job::follow(Followed {
                    runner: inner.clone(),
                    remote: remote.clone(),
                    capture: capture.clone(),
                    placement: placement.clone(),
                    submission_id: job.submission_id.clone(),
                    cursor: Cursor::at(taken),
                    output,
                    // The start's limits went with the old host.
                    timeout_ms: None,
                });
                let life = async move {
                    match adopted_rx.await {
                        Ok(()) => follow.await,
                        Err(_) => JobOutcome {
                            status: crate::registry::OutcomeStatus::Killed,
                            detail: None,
                            output: None,
                        },
                    }
                };
                (
                    Resumed::Following,
                    self.watch(remote.clone(), capture, placement, life),
                )
            }
        };
        // Not this host's when refused: the job runs on, unwatched here
        // (its task ends without a look at the engine as the sender goes).
        crate::producers::runners::shared::adopt(&inner.registry, owner, job, hooks, adopted_tx)?;
        Ok(found)
    }
}
