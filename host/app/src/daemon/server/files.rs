//! The daemon's files in the state directory: each session's directory
//! (its jobs' files and the lease its monitors keep to), the spare job
//! files reused for new jobs, the monitors' program, and the removal of
//! what dead daemons left.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use super::sessions::lease_ms;
use crate::daemon::journal::Journal;

/// The daemon's own files beside the journal: the emptied job files it
/// reuses for new jobs, and the program its jobs' monitors run (resolved
/// and held open once, at its start).
pub(super) struct StateFiles {
    spare: Option<Arc<host::bash::SpareFiles>>,
    monitor: PathBuf,
}

impl StateFiles {
    /// The files of a daemon whose state directory is `state` (spare job
    /// files only with one, and with a journal).
    pub(super) fn open(state: Option<&Path>) -> StateFiles {
        let spare =
            state.and_then(
                |state| match host::bash::SpareFiles::open(state.join("spare")) {
                    Ok(spare) => Some(Arc::new(spare)),
                    Err(e) => {
                        tracing::warn!("jobs-host daemon: no spare job files: {e}");
                        None
                    }
                },
            );
        StateFiles {
            spare,
            monitor: monitor_program(),
        }
    }

    /// Lets go of a dropped job's file: kept empty for a later job, or
    /// removed.
    pub(super) fn retire_file(&self, file: &Path) {
        match &self.spare {
            Some(spare) => spare.retire(file),
            None => {
                let _ = std::fs::remove_file(file);
            }
        }
    }

    /// Lets go of a session's directory and its job files (see
    /// [`StateFiles::retire_file`]).
    pub(super) fn retire_dir(&self, dir: &Path) -> std::io::Result<()> {
        match &self.spare {
            Some(spare) => spare.retire_dir(dir),
            None => std::fs::remove_dir_all(dir),
        }
    }
}

/// A session's directory in the state directory: a directory per job
/// (its monitor's files) and the lease its monitors keep to if the daemon
/// is gone.
pub(super) struct SessionFiles {
    pub(super) dir: PathBuf,
    pub(super) lease: PathBuf,
}

/// How often a connected session's lease is pushed on, and the margin it
/// gets past its linger: monitors of a daemon that died with a client
/// connected give the jobs the whole linger from about then.
pub(super) const LEASE_RENEWAL: Duration = Duration::from_secs(10);

impl SessionFiles {
    /// Makes the directory of the daemon's `n`th session in `state`, with
    /// a lease `linger` from now.
    pub(super) fn make(state: &std::path::Path, n: u64, linger: Duration) -> Result<SessionFiles> {
        let jobs = state.join("jobs");
        crate::daemon::private_dir(&jobs)?;
        // With a random part: a later daemon may get the same pid (after a
        // reboot, in a container), and must not take a dead one's directory.
        let dir = jobs.join(format!("{}-{n}-{:016x}", std::process::id(), random_u64()));
        if dir.exists() {
            bail!("{} exists already", dir.display());
        }
        crate::daemon::private_dir(&dir)?;
        let files = SessionFiles {
            lease: dir.join("lease"),
            dir,
        };
        files.set_deadline(host::registry::now_ms() + lease_ms(linger))?;
        Ok(files)
    }

    pub(super) fn set_deadline(&self, deadline: u64) -> Result<()> {
        write_deadline(&self.lease, deadline)
    }

    /// The jobs' settings for a session kept here.
    /// (Each stream's file bound is the session's spill limit, set with
    /// the rest of its settings.)
    pub(super) fn durable_jobs(&self, state_files: &StateFiles) -> Result<host::bash::DurableJobs> {
        Ok(host::bash::DurableJobs {
            monitor: state_files.monitor.clone(),
            dir: self.dir.clone(),
            lease: self.lease.clone(),
            max_file_bytes: 0,
            state_dir: self
                .dir
                .parent()
                .and_then(std::path::Path::parent)
                .map(ToOwned::to_owned),
            spare: state_files.spare.clone(),
        })
    }
}

/// Writes a lease's deadline (epoch ms) in place: monitors hold the file
/// open, and read it whole (one short write at its start).
pub(super) fn write_deadline(lease: &std::path::Path, deadline: u64) -> Result<()> {
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(lease)
        .with_context(|| format!("cannot open {}", lease.display()))?;
    file.write_all_at(format!("{deadline:020}\n").as_bytes(), 0)
        .with_context(|| format!("cannot write {}", lease.display()))?;
    Ok(())
}

/// Whether `path` is a job's file in a session directory of `jobs_dir`
/// (`jobs_dir/<session>/job-<n>` or `remote-<n>`, a regular file, no link
/// on the way).
pub(super) fn is_job_file(jobs_dir: &std::path::Path, path: &std::path::Path) -> bool {
    use std::path::Component;
    let Ok(rest) = path.strip_prefix(jobs_dir) else {
        return false;
    };
    let parts: Vec<Component<'_>> = rest.components().collect();
    let [Component::Normal(_), Component::Normal(name)] = parts[..] else {
        return false;
    };
    // A job's monitor's file, the copy of a Ray job's log, or a Slurm
    // job's marker.
    let numbered = name
        .to_str()
        .and_then(|n| {
            n.strip_prefix("job-")
                .or_else(|| n.strip_prefix("remote-"))
                .or_else(|| n.strip_prefix("slurm-"))
        })
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    let plain = |p: &std::path::Path| {
        std::fs::symlink_metadata(p).is_ok_and(|m| !m.file_type().is_symlink())
    };
    numbered
        && plain(jobs_dir)
        && path.parent().is_some_and(plain)
        && std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file())
}

/// Removes the directories that sessions of dead daemons left in
/// `state/jobs`, but those of jobs still under their monitors (kept for the
/// next session of their key).
pub(super) fn remove_stale_sessions(
    state: &std::path::Path,
    journal: &Journal,
    files: &StateFiles,
) {
    let needed = match journal.needed_files() {
        Ok(needed) => needed,
        Err(e) => {
            tracing::warn!("jobs-host daemon: cannot read the journal: {e:#}");
            return;
        }
    };
    let Ok(entries) = std::fs::read_dir(state.join("jobs")) else {
        return;
    };
    // Before this daemon has any session: every directory is a dead one's.
    for entry in entries.flatten() {
        let dir = entry.path();
        if needed
            .iter()
            .any(|f| std::path::Path::new(f).starts_with(&dir))
        {
            continue;
        }
        if let Err(e) = files.retire_dir(&dir) {
            tracing::warn!("jobs-host daemon: cannot remove {}: {e}", dir.display());
        }
    }
}

/// The program durable jobs' monitors run: `jobs-host-monitor` beside
/// this binary (small: nothing of the host but the monitor), held open from the daemon's start
/// so that an upgrade that replaces the files still runs the monitor of
/// this build; else this binary itself (`jobs-host monitor`).
fn monitor_program() -> PathBuf {
    {
        {
            let beside = std::env::current_exe()
                .ok()
                .and_then(|exe| exe.parent().map(|d| d.join("jobs-host-monitor")));
            // Only a monitor of this build's protocol (a half-done upgrade
            // may leave another beside this binary).
            let ours = |path: &std::path::Path| {
                std::process::Command::new(path)
                    .arg("--protocol")
                    .stdin(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .output()
                    .is_ok_and(|out| {
                        String::from_utf8_lossy(&out.stdout).trim() == host::bash::MONITOR_COMMAND
                    })
            };
            let opened =
                beside.and_then(|path| std::fs::File::open(&path).ok().filter(|_| ours(&path)));
            // Kept open for the daemon's life, far above the descriptors a
            // job's spawn places (0 to 5): a spawn runs it by its
            // descriptor's name (closed in the job at its exec).
            let moved = opened.and_then(|file| {
                let fd = rustix::io::fcntl_dupfd_cloexec(&file, 100).ok()?;
                // Never closed: the daemon runs it by this name all its life.
                Some(std::os::fd::IntoRawFd::into_raw_fd(fd))
            });
            match moved {
                Some(fd) => PathBuf::from(format!("/proc/self/fd/{fd}")),
                None => PathBuf::from("/proc/self/exe"),
            }
        }
    }
}

/// A random number from the kernel (the time's, without one).
fn random_u64() -> u64 {
    getrandom::u64().unwrap_or_else(|_| host::registry::now_ms())
}
