//! The fallback's view of processes through `/proc`: who belongs to a job,
//! stop-then-kill sweeps, and reaping what reparented to this subreaper host.

use std::collections::{HashMap, HashSet};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::JOB_MARKER_VAR;

/// What `/proc/<pid>` says about one process.
pub(crate) struct ProcInfo {
    pub(super) pid: i32,
    pub(super) ppid: i32,
    pub(super) pgrp: i32,
    pub(super) zombie: bool,
    /// NUL-separated `NAME=VALUE` entries, read on first use; empty when
    /// unreadable.
    pub(super) environ: std::cell::OnceCell<Vec<u8>>,
}

impl ProcInfo {
    pub(super) fn env_entries(&self) -> impl Iterator<Item = &[u8]> {
        self.environ
            .get_or_init(|| {
                std::fs::read(format!("/proc/{}/environ", self.pid)).unwrap_or_default()
            })
            .split(|b| *b == 0)
    }

    pub(super) fn env_is(&self, entry: &str) -> bool {
        self.env_entries().any(|e| e == entry.as_bytes())
    }

    pub(super) fn env_has_prefix(&self, prefix: &str) -> bool {
        self.env_entries().any(|e| e.starts_with(prefix.as_bytes()))
    }

    /// A process that reparented to this (subreaper) host from outside its own
    /// process group and carries no job's marker (it cleared its environment):
    /// only job processes end up so, and no producer can tell whose it was.
    pub(super) fn is_adopted_orphan(&self) -> bool {
        self.ppid == std::process::id() as i32
            && self.pgrp != host_pgrp()
            && !is_job_leader(self.pid)
            && !self.env_has_prefix(&format!("{JOB_MARKER_VAR}="))
    }
}

pub(super) fn host_pgrp() -> i32 {
    nix::unistd::getpgrp().as_raw()
}

pub(super) fn stat_fields(pid: i32) -> Option<(i32, i32, bool)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces and parentheses: split after the last ')'.
    let rest = stat.rsplit_once(')')?.1;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((ppid, pgrp, matches!(state, "Z" | "X")))
}

/// Every process on the machine this host can see, except itself.
pub(super) fn processes() -> Vec<ProcInfo> {
    let me = std::process::id() as i32;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid != me)
        .filter_map(|pid| {
            let (ppid, pgrp, zombie) = stat_fields(pid)?;
            Some(ProcInfo {
                pid,
                ppid,
                pgrp,
                zombie,
                environ: std::cell::OnceCell::new(),
            })
        })
        .collect()
}

/// Each process's parent, and the host's job leaders, for asking where a
/// process descends from.
pub(super) struct Parents {
    parents: HashMap<i32, i32>,
    leaders: HashSet<i32>,
}

impl Parents {
    /// Whether `pid` descends from `leader`, or from this host without
    /// passing another job's leader on the way (it, or an ancestor, was
    /// reparented to the host: the job's leader has gone, or it double-forked).
    pub(super) fn under(&self, mut pid: i32, leader: Option<i32>) -> bool {
        let host = std::process::id() as i32;
        // A parent chain is a tree's path; the bound only guards a table read
        // while processes came and went.
        for _ in 0..4096 {
            if Some(pid) == leader || pid == host {
                return true;
            }
            if self.leaders.contains(&pid) {
                return false;
            }
            match self.parents.get(&pid) {
                Some(&parent) if parent > 0 && parent != pid => pid = parent,
                _ => return false,
            }
        }
        false
    }
}

/// Whether `p` belongs to the job whose leader (and process group) is
/// `leader` and whose marker entry is `entry`: it is in the job's group, or
/// it carries the marker and sits under the job's leader, or under the host
/// with no other job's leader between. A marker alone is not enough: a
/// process of another job can copy it from the victim's environment, but not
/// its place in the victim's tree.
pub(super) fn of_job(p: &ProcInfo, parents: &Parents, leader: Option<i32>, entry: &str) -> bool {
    if Some(p.pgrp) == leader {
        return true;
    }
    p.env_is(entry) && parents.under(p.pid, leader)
}

/// Live processes matching `matches`, plus every live descendant of them.
pub(super) fn find_with_descendants(matches: impl Fn(&ProcInfo, &Parents) -> bool) -> Vec<i32> {
    let all = processes();
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for p in &all {
        children.entry(p.ppid).or_default().push(p.pid);
    }
    let parents = Parents {
        parents: all.iter().map(|p| (p.pid, p.ppid)).collect(),
        leaders: lock_leaders()
            .0
            .as_ref()
            .map(|l| l.keys().copied().collect())
            .unwrap_or_default(),
    };
    let zombies: HashSet<i32> = all.iter().filter(|p| p.zombie).map(|p| p.pid).collect();
    let mut found: HashSet<i32> = HashSet::new();
    let mut stack: Vec<i32> = all
        .iter()
        .filter(|p| matches(p, &parents))
        .map(|p| p.pid)
        .collect();
    while let Some(pid) = stack.pop() {
        if found.insert(pid)
            && let Some(kids) = children.get(&pid)
        {
            stack.extend(kids);
        }
    }
    found.retain(|pid| !zombies.contains(pid));
    found.into_iter().collect()
}

/// Freezes, then kills, everything matching `matches` (with descendants), round
/// after round until a round finds nobody: a process that forks while being
/// swept is caught by the next round, and a stopped process cannot fork at all.
pub(super) fn sweep(matches: impl Fn(&ProcInfo, &Parents) -> bool, signal: Signal) {
    for _ in 0..64 {
        let pids = find_with_descendants(&matches);
        if pids.is_empty() {
            break;
        }
        for pid in &pids {
            let _ = kill(Pid::from_raw(*pid), Signal::SIGSTOP);
        }
        for pid in &pids {
            let _ = kill(Pid::from_raw(*pid), signal);
        }
        reap_adopted();
        std::thread::yield_now();
    }
    reap_adopted();
}

/// Reaps zombies that reparented to this (subreaper) host from a job: children
/// outside the host's own process group. The host's other children (its job
/// leaders, which the shell producer's reaper or a pidfd wait reaps, and
/// anything an embedder spawns) are recorded, share its group or are left alone.
pub(super) fn reap_adopted() {
    let me = std::process::id() as i32;
    let group = host_pgrp();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return;
    };
    // Held for the whole scan: a leader spawned meanwhile is recorded before it
    // can be mistaken for an orphan (see `start_leader`).
    let _quiet = no_spawn_under_way();
    let leaders = lock_leaders();
    for pid in dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
    {
        if let Some((ppid, pgrp, true)) = stat_fields(pid)
            && ppid == me
            && pgrp != group
            && !leaders.contains(&pid)
        {
            let _ = nix::sys::wait::waitpid(
                Pid::from_raw(pid),
                Some(nix::sys::wait::WaitPidFlag::WNOHANG),
            );
        }
    }
}

/// The host's job leaders (and the children it reaps itself), each with how
/// many times it was recorded and not yet forgotten: a pid reaped and
/// reused by the next leader before the first is forgotten is recorded
/// twice, so forgetting the first leaves the second protected.
static LEADERS: std::sync::Mutex<Option<HashMap<i32, u32>>> = std::sync::Mutex::new(None);

pub(super) struct Leaders(std::sync::MutexGuard<'static, Option<HashMap<i32, u32>>>);

impl Leaders {
    fn contains(&self, pid: &i32) -> bool {
        self.0.as_ref().is_some_and(|s| s.contains_key(pid))
    }

    fn record(&mut self, pid: i32) {
        *self
            .0
            .get_or_insert_with(HashMap::new)
            .entry(pid)
            .or_default() += 1;
    }
}

pub(super) fn lock_leaders() -> Leaders {
    Leaders(crate::sync::lock(&LEADERS))
}

/// Held shared by every spawn from its clone until its leader is recorded, and
/// exclusively by whatever asks whether a child is a leader: a child between
/// clone and record looks like an orphan (no marker yet, outside the host's
/// group), so no sweep may look while one is under way. Spawns do not exclude
/// each other.
static SPAWNING: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn no_spawn_under_way() -> std::sync::RwLockWriteGuard<'static, ()> {
    SPAWNING.write().unwrap_or_else(|p| p.into_inner())
}

/// Starts a job leader with `start` and records its pid (`pid` of what
/// `start` answers) as a leader before any sweep can look (see [`SPAWNING`]).
pub(crate) fn start_leader<T>(
    start: impl FnOnce() -> std::io::Result<T>,
    pid: impl FnOnce(&T) -> i32,
) -> std::io::Result<T> {
    let _spawning = SPAWNING.read().unwrap_or_else(|p| p.into_inner());
    let started = start()?;
    lock_leaders().record(pid(&started));
    Ok(started)
}

/// Records a child the host reaps itself (the watchdog), so no sweep takes it
/// for a job's orphan.
pub(super) fn protect(pid: u32) {
    lock_leaders().record(pid as i32);
}

/// Forgets a job leader once it has been reaped.
pub(crate) fn remove_leader(pid: u32) {
    if let Some(leaders) = lock_leaders().0.as_mut()
        && let std::collections::hash_map::Entry::Occupied(mut times) = leaders.entry(pid as i32)
    {
        *times.get_mut() -= 1;
        if *times.get() == 0 {
            times.remove();
        }
    }
}

pub(super) fn is_job_leader(pid: i32) -> bool {
    let _quiet = no_spawn_under_way();
    lock_leaders().contains(&pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pid reaped and taken by the next leader before the first is
    /// forgotten stays a leader until the second is forgotten too.
    #[test]
    fn a_reused_leader_pid_stays_recorded_until_each_record_is_forgotten() {
        // Above any pid the kernel hands out (pid_max is at most 2^22).
        let pid = i32::MAX - 7;
        start_leader(|| Ok(()), |()| pid).unwrap();
        start_leader(|| Ok(()), |()| pid).unwrap();
        remove_leader(pid as u32);
        assert!(is_job_leader(pid));
        remove_leader(pid as u32);
        assert!(!is_job_leader(pid));
        // Forgetting more often than recorded changes nothing.
        remove_leader(pid as u32);
        assert!(!is_job_leader(pid));
    }
}
