//! Containment of background jobs: every process a job starts is caught, killed
//! with the job, and dies with the host.
//!
//! Two modes, chosen once per [`crate::BashProducer`]:
//!
//! - **cgroup** (preferred): each job runs in a cgroup v2 leaf of its own,
//!   `<host cgroup>/jobs-host-<pid>-<n>-<pid namespace>/job-<n>`. A process cannot leave its cgroup
//!   without write access to another one, so `setsid`, double forks and changes of
//!   process group all stay caught, and `cgroup.kill` ends the whole job at once.
//!   Chosen when the cgroup2 mount (found in `/proc/self/mountinfo`) lets the host
//!   create children under its own cgroup.
//! - **fallback**: the host makes itself a child subreaper (`PR_SET_CHILD_SUBREAPER`),
//!   so orphans of a job reparent to it instead of init, and every job process
//!   carries an environment marker (`JOBS_HOST_JOB=<token>.<n>`) that its
//!   descendants inherit. A job's processes are those in its process group, those
//!   with its marker, and every descendant of either (walked through `/proc`).
//!   Freeze-then-kill sweeps repeat until a sweep finds nobody.
//!
//! In both modes each job leader gets `PR_SET_PDEATHSIG(SIGKILL)` (cloned from one
//! of the producer's four spawner threads, which live as long as any of their
//! jobs, because the signal follows the thread that cloned), and a watchdog process outside every job holds a pipe from
//! the host: when the host dies in any way, even by SIGKILL, the pipe closes and the
//! watchdog kills what is left (the cgroups, or every marked process) and removes
//! the spill directory.

mod cgroup;
mod procfs;
mod watchdog;

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::{Pid, getpgid};

pub use cgroup::cgroup2_mount;
use cgroup::{
    Modes, cgroup_pids, create_cgroup_root, procs_file, remove_cgroup, remove_cgroup_tree, reusable,
};
use procfs::{ProcInfo, find_with_descendants, of_job, sweep};
pub(crate) use procfs::{remove_leader, start_leader};
use watchdog::Watchdog;

/// The environment variable that marks every process of a job (fallback mode).
pub const JOB_MARKER_VAR: &str = "JOBS_HOST_JOB";

/// Which containment to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ContainmentMode {
    /// A cgroup per job when the host can create one, else the fallback.
    #[default]
    Auto,
    /// A cgroup per job; starting the producer fails when that is not possible.
    Cgroup,
    /// Subreaper, process group and environment marker (never cgroups).
    Fallback,
}

/// The mode a producer ended up with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ActiveMode {
    /// cgroup v2; the directory holding this producer's job cgroups.
    Cgroup(PathBuf),
    /// Subreaper and marker.
    Fallback,
}

impl ActiveMode {
    /// `cgroup` or `fallback`.
    pub fn name(&self) -> &'static str {
        match self {
            ActiveMode::Cgroup(_) => "cgroup",
            ActiveMode::Fallback => "fallback",
        }
    }
}

/// The producer-wide part of containment: the mode, the marker token and the
/// watchdog.
pub(crate) struct Containment {
    mode: ActiveMode,
    /// The mode's job cgroups, shared with each job's container.
    cgroups: Option<Arc<JobCgroups>>,
    /// The marker's token, shared with each job's container.
    token: Arc<str>,
    next_job: AtomicU64,
    /// Pipe to the watchdog; dropping it (or the host dying) sets it off.
    _watchdog: Option<Watchdog>,
}

impl Containment {
    /// Sets up containment in `requested` mode; with `watchdog`, what is
    /// left of the jobs is killed and `spill_dir` removed by the watchdog if
    /// the host dies without cleaning up (without, jobs that outlive the host
    /// are their monitors').
    pub(crate) fn new(
        requested: ContainmentMode,
        shell: &Path,
        spill_dir: &Path,
        watchdog: bool,
    ) -> std::io::Result<Containment> {
        // A job of the same user must not read the host's memory, fds or
        // environment through /proc, nor ptrace it.
        make_non_dumpable();
        let mode = match requested {
            ContainmentMode::Fallback => ActiveMode::Fallback,
            ContainmentMode::Cgroup => ActiveMode::Cgroup(
                create_cgroup_root(shell)
                    .map_err(|e| std::io::Error::other(format!("cgroup mode: {e}")))?,
            ),
            ContainmentMode::Auto => match create_cgroup_root(shell) {
                Ok(root) => ActiveMode::Cgroup(root),
                Err(why) => {
                    tracing::info!(
                        "jobs: cgroup containment unavailable ({why}); using the fallback"
                    );
                    ActiveMode::Fallback
                }
            },
        };
        if mode == ActiveMode::Fallback {
            become_subreaper();
        }
        tracing::info!(
            "jobs: containment mode {}{}",
            mode.name(),
            match &mode {
                ActiveMode::Cgroup(root) => format!(" ({})", root.display()),
                ActiveMode::Fallback => String::new(),
            }
        );
        let token: Arc<str> = format!("{}-{:x}", std::process::id(), random_u64()).into();
        let watchdog = watchdog
            .then(|| {
                Watchdog::start(shell, &mode, &token, spill_dir)
                    .inspect_err(|e| tracing::warn!("jobs: no watchdog for host death: {e}"))
                    .ok()
            })
            .flatten();
        Ok(Containment {
            cgroups: match &mode {
                ActiveMode::Cgroup(root) => Some(Arc::new(JobCgroups {
                    root: root.clone(),
                    fresh: Modes::fresh(root),
                    spare: Mutex::new(Vec::new()),
                })),
                ActiveMode::Fallback => None,
            },
            mode,
            token,
            next_job: AtomicU64::new(1),
            _watchdog: watchdog,
        })
    }

    /// The mode in use.
    pub(crate) fn mode(&self) -> &ActiveMode {
        &self.mode
    }

    /// A container for the next job: its cgroup (created by
    /// [`JobContainer::creator`], off the caller's path) or its marker.
    pub(crate) fn new_job(&self) -> JobContainer {
        let n = self.next_job.fetch_add(1, Ordering::Relaxed);
        let spare = self
            .cgroups
            .as_ref()
            .and_then(|cgroups| crate::sync::lock(&cgroups.spare).pop());
        JobContainer {
            n,
            cgroup: spare.unwrap_or(n),
            cgroups: self.cgroups.clone(),
            token: self.token.clone(),
            pgid: None,
            released: false,
        }
    }

    /// Kills every process of every job this producer started (for teardown and
    /// shutdown), in either mode.
    pub(crate) fn kill_everything(&self) {
        match &self.mode {
            ActiveMode::Cgroup(root) => {
                let _ = std::fs::write(root.join("cgroup.kill"), "1");
            }
            ActiveMode::Fallback => {
                let prefix = format!("{JOB_MARKER_VAR}={}.", self.token);
                sweep(
                    |p, _| p.env_has_prefix(&prefix) || p.is_adopted_orphan(),
                    Signal::SIGKILL,
                );
            }
        }
    }
}

impl Drop for Containment {
    fn drop(&mut self) {
        self.kill_everything();
        if let ActiveMode::Cgroup(root) = &self.mode {
            remove_cgroup_tree(root);
        }
    }
}

/// Whether a line of `/proc/<pid>/cgroup` names a job's cgroup (one this
/// module makes: `.../jobs-host-<pid>-<n>-<namespace>/job-<n>`), so a
/// process can be told to be some jobs-host's job.
pub fn is_job_cgroup(line: &str) -> bool {
    let path = line.rsplit(':').next().unwrap_or_default();
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let parts: Vec<&str> = path.split('/').collect();
    parts.windows(2).any(|pair| {
        let root = pair[0]
            .strip_prefix("jobs-host-")
            .is_some_and(|r| r.split('-').count() == 3 && r.split('-').all(digits));
        root && pair[1].strip_prefix("job-").is_some_and(digits)
    })
}

/// The cgroups of one producer's jobs.
struct JobCgroups {
    /// The directory they are made in.
    root: PathBuf,
    /// The owner and modes of a fresh one; `None` (where they could not be
    /// read) keeps none.
    fresh: Option<Modes>,
    /// The numbers of those that ended jobs left empty, for the next jobs
    /// (at most [`SPARE_CGROUPS`]): a job that takes one needs no `mkdir`,
    /// and its end no `rmdir`, which between them cost a start about 80 µs
    /// of the kernel's time, on the way to its notice too.
    spare: Mutex<Vec<u64>>,
}

/// How many empty job cgroups a producer keeps for later jobs; a job that
/// ends with as many kept removes its own. Each is a few kilobytes of the
/// kernel's memory and no descriptor.
const SPARE_CGROUPS: usize = 128;

/// One job's container. Its paths and marker are made from the producer's
/// shared parts when needed, not kept: a live job holds none of them.
pub(crate) struct JobContainer {
    /// The job's number in its producer.
    n: u64,
    /// Its cgroup's number, `job-<cgroup>`: its own, or that of an ended
    /// job whose emptied cgroup it took (always an earlier job's, so a
    /// number other than `n`).
    cgroup: u64,
    /// Its producer's cgroups; `None` in fallback mode and once the job's
    /// cgroup was removed or given back.
    cgroups: Option<Arc<JobCgroups>>,
    /// Its marker is `<token>.<n>`.
    token: Arc<str>,
    pgid: Option<Pid>,
    /// Set once the job's cgroup was removed, or found empty and kept for
    /// a later job, which proves none of its processes is left: signals
    /// then reach nobody (its process group's number may be another's by
    /// now), and it has no processes to list.
    released: bool,
}

impl JobContainer {
    /// The `NAME=VALUE` marker every process of this job inherits.
    pub(crate) fn marker_env(&self) -> (&'static str, String) {
        (JOB_MARKER_VAR, format!("{}.{}", self.token, self.n))
    }

    /// The marker's `NAME=VALUE` entry, as `/proc/<pid>/environ` holds it.
    fn marker_entry(&self) -> String {
        let (name, value) = self.marker_env();
        format!("{name}={value}")
    }

    /// The job's cgroup directory, while it has one.
    fn cgroup(&self) -> Option<PathBuf> {
        let cgroups = self.cgroups.as_deref()?;
        Some(cgroups.root.join(format!("job-{}", self.cgroup)))
    }

    /// What creates the job's cgroup, to run before its leader is spawned. Until
    /// then the container is empty: signals reach nobody and `pids` is empty.
    pub(crate) fn creator(&self) -> impl FnOnce() -> std::io::Result<()> + Send + 'static {
        let dir = self.cgroup();
        let reused = self.cgroup != self.n;
        move || match dir.map(std::fs::create_dir) {
            // A kept cgroup is there still, unless something outside removed
            // it (then it is made again).
            Some(Err(e)) if reused && e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            Some(made) => made,
            None => Ok(()),
        }
    }

    /// Records the leader's pid, which is also its process group.
    pub(crate) fn set_leader(&mut self, pid: u32) {
        self.pgid = Some(Pid::from_raw(pid as i32));
    }

    /// The leader's pid, once it is spawned.
    pub(crate) fn leader(&self) -> Option<i32> {
        self.pgid.map(Pid::as_raw)
    }

    /// `<cgroup>/cgroup.procs`, for the leader to write itself into between
    /// its clone and its exec; `None` in fallback mode.
    pub(crate) fn cgroup_procs(&self) -> std::io::Result<Option<CString>> {
        self.cgroup().as_deref().map(procs_file).transpose()
    }

    /// Every live process of the job now: its cgroup's members, or (fallback)
    /// its process group, its marked processes and their descendants.
    pub(crate) fn pids(&self) -> Vec<i32> {
        if self.released {
            return Vec::new();
        }
        match self.cgroup() {
            Some(dir) => cgroup_pids(&dir).into_iter().map(Pid::as_raw).collect(),
            None => {
                let entry = self.marker_entry();
                let pgid = self.pgid.map(Pid::as_raw);
                find_with_descendants(|p: &ProcInfo, parents| of_job(p, parents, pgid, &entry))
            }
        }
    }

    /// Sends `signal` to every process of the job, once each: a process that
    /// handles a signal may count it (a second INT or TERM often means "quit
    /// now"), so the group's members, reached by `killpg`, are not sent it
    /// again.
    pub(crate) fn signal(&self, signal: Signal) {
        if self.released {
            return;
        }
        if let Some(pgid) = self.pgid {
            // ESRCH: the group is already gone, which is what we wanted.
            let _ = killpg(pgid, signal);
        }
        // Those that left the group (setsid, set -m) are sent it one by one.
        let outside_group = |pid: Pid| self.pgid.is_none() || getpgid(Some(pid)).ok() != self.pgid;
        match self.cgroup() {
            Some(dir) if signal == Signal::SIGKILL => {
                let _ = std::fs::write(dir.join("cgroup.kill"), "1");
            }
            Some(dir) => {
                for pid in cgroup_pids(&dir).into_iter().filter(|p| outside_group(*p)) {
                    let _ = kill(pid, signal);
                }
            }
            None => {
                let entry = self.marker_entry();
                let pgid = self.pgid.map(Pid::as_raw);
                let matches =
                    |p: &ProcInfo, parents: &procfs::Parents| of_job(p, parents, pgid, &entry);
                if signal == Signal::SIGKILL {
                    sweep(matches, signal);
                } else {
                    for pid in find_with_descendants(matches)
                        .into_iter()
                        .map(Pid::from_raw)
                        .filter(|p| outside_group(*p))
                    {
                        let _ = kill(pid, signal);
                    }
                }
            }
        }
    }

    /// [`JobContainer::release`] when it takes no waiting: a cgroup that is
    /// removed at the first try, once what is left of the job was killed
    /// (a few system calls, fit for an async worker): whether it was. False
    /// when it needs more (the fallback's walk of `/proc`, a cgroup still
    /// emptying); the latter was sent SIGKILL already, which
    /// [`JobContainer::release`] sends again.
    pub(crate) fn try_release_now(&mut self) -> bool {
        let Some(dir) = self.cgroup() else {
            return false;
        };
        // The group first, whose members may have left the cgroup. Then an
        // empty cgroup (most jobs leave nothing) goes at the first try,
        // which proves it empty: `cgroup.kill` is written only to one that
        // is not.
        if let Some(pgid) = self.pgid {
            let _ = killpg(pgid, Signal::SIGKILL);
        }
        if self.give_back(&dir) {
            return true;
        }
        let mut gone = std::fs::remove_dir(&dir).is_ok();
        if !gone {
            self.signal(Signal::SIGKILL);
            gone = std::fs::remove_dir(&dir).is_ok();
        }
        if gone {
            self.cgroups = None;
            self.released = true;
        }
        gone
    }

    /// Keeps the job's cgroup `dir` for a later job when there is room and
    /// it is [`reusable`] (which proves, as its removal would, that no
    /// process of the job is left in it): whether it was kept. Only the
    /// cgroup of a job whose leader was spawned: one whose start failed may
    /// have failed for the cgroup's sake, and a durable job's monitor whose
    /// parent died before it answered may still be on its way in.
    fn give_back(&mut self, dir: &Path) -> bool {
        let Some(cgroups) = self.cgroups.as_deref() else {
            return false;
        };
        let (Some(fresh), Some(_)) = (cgroups.fresh, self.pgid) else {
            return false;
        };
        let room = || crate::sync::lock(&cgroups.spare).len() < SPARE_CGROUPS;
        if !room() || !reusable(dir, fresh) {
            return false;
        }
        {
            let mut spare = crate::sync::lock(&cgroups.spare);
            if spare.len() >= SPARE_CGROUPS {
                return false;
            }
            spare.push(self.cgroup);
        }
        self.cgroups = None;
        self.released = true;
        true
    }

    /// Something of the job is still about though its cgroup went (it
    /// escaped containment): signals go out again, found by its mark.
    pub(crate) fn escaped(&mut self) {
        self.released = false;
    }

    /// Kills what is left of the job and removes its cgroup: the job is over.
    /// Whether that proves no process of the job is left anywhere (its cgroup
    /// was removed, which a cgroup with a process in it cannot be); never in
    /// the fallback, which finds processes only by their marks.
    pub(crate) fn release(&mut self) -> bool {
        self.signal(Signal::SIGKILL);
        let dir = self.cgroup();
        self.cgroups = None;
        match dir {
            Some(dir) => {
                let gone = remove_cgroup(&dir);
                self.released = gone;
                gone
            }
            None => self.released,
        }
    }
}

impl Drop for JobContainer {
    fn drop(&mut self) {
        if self.cgroups.is_some() {
            let _ = self.release();
        }
    }
}

fn make_non_dumpable() {
    if let Err(e) = nix::sys::prctl::set_dumpable(false) {
        tracing::warn!("jobs: PR_SET_DUMPABLE failed: {e}");
    }
}

fn become_subreaper() {
    if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
        tracing::warn!("jobs: PR_SET_CHILD_SUBREAPER failed: {e}");
    }
}

fn random_u64() -> u64 {
    let mut bytes = [0u8; 8];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes))
        .is_err()
    {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        return t.as_nanos() as u64 ^ u64::from(std::process::id());
    }
    u64::from_ne_bytes(bytes)
}

#[cfg(test)]
mod naming_tests {
    use super::is_job_cgroup;

    #[test]
    fn only_a_jobs_own_cgroup_is_a_jobs() {
        assert!(is_job_cgroup("0::/jobs-host-5184-1-4026531836/job-1"));
        assert!(is_job_cgroup("0::/user.slice/jobs-host-7-2-9/job-12"));
        assert!(!is_job_cgroup("0::/jobs-host-5184-1-4026531836"));
        assert!(!is_job_cgroup("0::/user.slice/jobs-host-web.service"));
        assert!(!is_job_cgroup("0::/jobs-host-a-1-2/job-1"));
        assert!(!is_job_cgroup("0::/"));
    }
}
