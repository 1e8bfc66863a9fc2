//! A durable session's Slurm jobs: each keeps a small file in the session's
//! directory (`slurm-<n>`, the marker) that names where its output files
//! are on the shared directory. When the job ends its files are copied
//! beside the marker (`slurm-<n>.out`, `.err`, `.exit`) and removed from
//! the shared directory, so they go with the session. A host that takes
//! the session on after its daemon died reads the output back from
//! wherever it is, puts the model's read cursor back and follows the job
//! on from the files' ends ([`SlurmRunner::resume`]).

use std::io::Write;
use std::path::{Path, PathBuf};

use super::job::{self, Files, Followed, Tail};
use super::{Remote, SlurmRunner};
use crate::owner::Owner;
use crate::producers::runners::{RemoteAdopt, Resumed};
use crate::registry::{Placement, StartError};

/// A new, empty marker `slurm-<n>` in `dir` (private, and never one that
/// exists: another host's job may own it).
pub(super) fn make_marker(dir: &Path) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::OpenOptionsExt;
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    loop {
        let path = dir.join(format!("slurm-{}", NEXT.fetch_add(1, Ordering::Relaxed)));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
        {
            Ok(_) => return Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
}

/// Writes where the job's files are into its marker, before it is
/// submitted.
pub(super) fn mark(marker: &Path, files: &Files) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(marker)?;
    file.write_all(files.stem.as_os_str().as_encoded_bytes())?;
    file.sync_data()
}

/// Where a marked job's files are now: beside the marker once its end
/// copied them there, else where the marker says.
fn files_of(marker: &Path) -> std::io::Result<Files> {
    let here = Files {
        stem: marker.to_owned(),
    };
    if here.out().exists() {
        return Ok(here);
    }
    let named = std::fs::read(marker)?;
    if named.is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "it names no files: its host died before the job was submitted",
        ));
    }
    use std::os::unix::ffi::OsStringExt;
    Ok(Files {
        stem: PathBuf::from(std::ffi::OsString::from_vec(named)),
    })
}

/// Copies an ended job's files beside its marker, `.out` last (its being
/// there says the others are), then removes them from the shared
/// directory.
pub(super) fn keep(files: &Files, marker: &Path) -> std::io::Result<()> {
    let here = Files {
        stem: marker.to_owned(),
    };
    if files.stem == here.stem {
        return Ok(());
    }
    for (from, to) in [(files.err(), here.err()), (files.exit(), here.exit())] {
        match std::fs::copy(&from, &to) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    let mut partial = here.out().into_os_string();
    partial.push(".part");
    match std::fs::copy(files.out(), &partial) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::write(&partial, b"")?;
        }
        Err(e) => return Err(e),
    }
    std::fs::rename(&partial, here.out())?;
    files.remove();
    Ok(())
}

/// The output a dead daemon's Slurm job wrote, stdout or stderr (without
/// slurmstepd's own lines), read from wherever its files are: what `logs`
/// shows while no host follows the job.
///
/// # Errors
///
/// The marker or the files cannot be read.
pub fn kept_output(marker: &Path, stderr: bool) -> std::io::Result<Vec<u8>> {
    let files = files_of(marker)?;
    let path = if stderr { files.err() } else { files.out() };
    let bytes = match std::fs::read(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        read => read?,
    };
    Ok(if stderr {
        Tail::stderr_of(&bytes)
    } else {
        bytes
    })
}

impl SlurmRunner {
    /// Takes on `job`, which a previous host started on this runner's
    /// cluster, for `owner`, under its old id (see the module's notes).
    ///
    /// # Errors
    ///
    /// A marker that cannot be read, or the registry's refusal (an id
    /// taken, a stale owner); the job on the cluster is left as it is.
    pub fn resume(&self, owner: Option<Owner>, job: RemoteAdopt) -> Result<Resumed, StartError> {
        let inner = &self.inner;
        let files = files_of(&job.copy).map_err(|e| {
            StartError::Producer(format!(
                "runner {}: cannot find job {}'s files from {}: {e}",
                inner.name,
                job.submission_id,
                job.copy.display()
            ))
        })?;
        let capture = self.new_capture();
        let mut tail = Tail::new(None);
        tail.look(&files, &capture);
        capture.set_cursors(job.cursors);
        let remote = Remote::new(Some(job.copy.clone()));
        let _ = remote.engine_id.set(job.submission_id.clone());
        remote.submitted.send_replace(true);
        let placement = Placement::new(format!("{}: job {}", inner.name, job.submission_id));
        let recorded_end = job.recorded_end();
        // The job's task goes on only once the registry has taken the job:
        // one it refuses is neither followed nor written to.
        let (adopted_tx, adopted_rx) = tokio::sync::oneshot::channel::<()>();
        let (found, hooks) = match recorded_end {
            Some(outcome) => {
                tail.finish(&capture);
                let life = std::future::ready(outcome);
                (Resumed::Ended, self.watch(remote, capture, placement, life))
            }
            None => {
                let follow = job::follow(Followed {
                    runner: inner.clone(),
                    remote: remote.clone(),
                    capture: capture.clone(),
                    placement: placement.clone(),
                    slurm_id: job.submission_id.clone(),
                    files,
                    tail,
                    // The start's limits went with the old host.
                    timeout_ms: None,
                });
                let life = async move {
                    match adopted_rx.await {
                        Ok(()) => follow.await,
                        Err(_) => crate::producers::runners::shared::killed(None),
                    }
                };
                (
                    Resumed::Following,
                    self.watch(remote, capture, placement, life),
                )
            }
        };
        // Not this host's when refused: the job runs on, unwatched here
        // (its task ends without a look at the engine as the sender goes).
        crate::producers::runners::shared::adopt(&inner.registry, owner, job, hooks, adopted_tx)?;
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ended_jobs_files_move_beside_its_marker() {
        let shared = tempfile::tempdir().unwrap();
        let session = tempfile::tempdir().unwrap();
        let marker = make_marker(session.path()).unwrap();
        let files = Files {
            stem: shared.path().join("jobshost-abc-bash-1"),
        };
        mark(&marker, &files).unwrap();
        std::fs::write(files.out(), "out\n").unwrap();
        std::fs::write(files.err(), "err\n").unwrap();
        assert_eq!(files_of(&marker).unwrap().stem, files.stem);
        assert_eq!(kept_output(&marker, false).unwrap(), b"out\n");
        keep(&files, &marker).unwrap();
        assert!(!files.out().exists() && !files.err().exists());
        assert_eq!(files_of(&marker).unwrap().stem, marker);
        assert_eq!(kept_output(&marker, true).unwrap(), b"err\n");
        // A marker whose job was never submitted names nothing.
        let empty = make_marker(session.path()).unwrap();
        assert!(files_of(&empty).is_err());
    }
}
