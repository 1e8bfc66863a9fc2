//! Containment of background jobs: every process a job starts is caught, killed
//! with the job, and dies with the host.
//!
//! Two modes, chosen once per [`crate::BashProducer`]:
//!
//! - **cgroup** (preferred): each job runs in a cgroup v2 leaf of its own,
//!   `<host cgroup>/jobs-host-<pid>-<n>/job-<n>`. A process cannot leave its cgroup
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
//! In both modes each job leader gets `PR_SET_PDEATHSIG(SIGKILL)` (from one spawner
//! thread that lives as long as any of its jobs, because the signal follows the
//! thread that forked), and a watchdog process outside every job holds a pipe from
//! the host: when the host dies in any way, even by SIGKILL, the pipe closes and the
//! watchdog kills what is left (the cgroups, or every marked process) and removes
//! the spill directory.

use std::collections::{HashMap, HashSet};
use std::ffi::CString;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

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

static NEXT_ROOT: AtomicU64 = AtomicU64::new(1);

/// The cgroup2 mount point, from `/proc/self/mountinfo` (hybrid hosts mount it at
/// `/sys/fs/cgroup/unified`, pure v2 hosts at `/sys/fs/cgroup`).
pub fn cgroup2_mount() -> Option<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|line| {
        // `<id> <parent> <dev> <root> <mount point> <opts> [optional...] - <fstype> ...`
        let (left, right) = line.split_once(" - ")?;
        let fstype = right.split_whitespace().next()?;
        (fstype == "cgroup2").then(|| left.split_whitespace().nth(4).map(unescape_mount))?
    })
}

/// Mount points escape space, tab, newline and backslash as octal.
fn unescape_mount(field: &str) -> PathBuf {
    let mut out = String::new();
    let mut rest = field;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        let code = rest
            .get(i + 1..i + 4)
            .and_then(|o| u8::from_str_radix(o, 8).ok());
        match code {
            Some(c) => {
                out.push(c as char);
                rest = &rest[i + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    PathBuf::from(out)
}

/// This process's cgroup v2 path (the `0::` line of `/proc/self/cgroup`).
fn own_cgroup() -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(str::to_owned)
}

/// Creates this producer's cgroup directory, or says why it cannot.
fn create_cgroup_root() -> Result<PathBuf, String> {
    let mount = cgroup2_mount().ok_or("no cgroup2 mount in /proc/self/mountinfo")?;
    let own = own_cgroup().ok_or("no cgroup v2 entry in /proc/self/cgroup")?;
    let parent = mount.join(own.trim_start_matches('/'));
    if !parent.join("cgroup.kill").exists() && parent != mount {
        return Err(format!(
            "{} has no cgroup.kill (kernel older than 5.14?)",
            parent.display()
        ));
    }
    let n = NEXT_ROOT.fetch_add(1, Ordering::Relaxed);
    let root = parent.join(format!("jobs-host-{}-{n}", std::process::id()));
    std::fs::create_dir(&root).map_err(|e| format!("cannot create {}: {e}", root.display()))?;
    if !root.join("cgroup.kill").exists() {
        let _ = std::fs::remove_dir(&root);
        return Err(format!("{} has no cgroup.kill", root.display()));
    }
    Ok(root)
}

/// The producer-wide part of containment: the mode, the marker token and the
/// watchdog.
pub(crate) struct Containment {
    mode: ActiveMode,
    token: String,
    next_job: AtomicU64,
    /// Pipe to the watchdog; dropping it (or the host dying) sets it off.
    _watchdog: Option<Watchdog>,
}

impl Containment {
    /// Sets up containment in `requested` mode; `spill_dir` is removed by the
    /// watchdog if the host dies without cleaning up.
    pub(crate) fn new(
        requested: ContainmentMode,
        shell: &Path,
        spill_dir: &Path,
    ) -> std::io::Result<Containment> {
        // A job of the same user must not read the host's memory, fds or
        // environment through /proc, nor ptrace it.
        make_non_dumpable();
        let mode = match requested {
            ContainmentMode::Fallback => ActiveMode::Fallback,
            ContainmentMode::Cgroup => ActiveMode::Cgroup(
                create_cgroup_root()
                    .map_err(|e| std::io::Error::other(format!("cgroup mode: {e}")))?,
            ),
            ContainmentMode::Auto => match create_cgroup_root() {
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
        let token = format!("{}-{:x}", std::process::id(), random_u64());
        let watchdog = Watchdog::start(shell, &mode, &token, spill_dir)
            .inspect_err(|e| tracing::warn!("jobs: no watchdog for host death: {e}"))
            .ok();
        Ok(Containment {
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

    /// A container for the next job: its cgroup (created now) or its marker.
    pub(crate) fn new_job(&self) -> std::io::Result<JobContainer> {
        let n = self.next_job.fetch_add(1, Ordering::Relaxed);
        let marker = format!("{}.{n}", self.token);
        let cgroup = match &self.mode {
            ActiveMode::Cgroup(root) => {
                let dir = root.join(format!("job-{n}"));
                std::fs::create_dir(&dir)?;
                Some(dir)
            }
            ActiveMode::Fallback => None,
        };
        let procs = cgroup
            .as_ref()
            .map(|dir| CString::new(dir.join("cgroup.procs").as_os_str().as_encoded_bytes()))
            .transpose()
            .map_err(std::io::Error::other)?;
        Ok(JobContainer {
            cgroup,
            procs,
            marker,
            pgid: None,
        })
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
                    |p| p.env_has_prefix(&prefix) || p.is_adopted_orphan(),
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

/// Removes a cgroup directory and its children, retrying briefly while killed
/// processes finish exiting.
fn remove_cgroup_tree(root: &Path) {
    if let Ok(entries) = std::fs::read_dir(root) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                remove_cgroup(&entry.path());
            }
        }
    }
    remove_cgroup(root);
}

fn remove_cgroup(dir: &Path) {
    for _ in 0..200 {
        match std::fs::remove_dir(dir) {
            Ok(()) => return,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(5)),
        }
    }
    tracing::warn!("jobs: could not remove cgroup {}", dir.display());
}

/// One job's container.
pub(crate) struct JobContainer {
    cgroup: Option<PathBuf>,
    /// `<cgroup>/cgroup.procs`, ready for the child to write itself into.
    procs: Option<CString>,
    marker: String,
    pgid: Option<Pid>,
}

impl JobContainer {
    /// The `NAME=VALUE` marker every process of this job inherits.
    pub(crate) fn marker_env(&self) -> (&'static str, &str) {
        (JOB_MARKER_VAR, &self.marker)
    }

    /// Records the leader's pid, which is also its process group.
    pub(crate) fn set_leader(&mut self, pid: u32) {
        self.pgid = Some(Pid::from_raw(pid as i32));
    }

    /// Code for the child between fork and exec: start a new session, join the
    /// job's cgroup, die with the spawner thread, and mark every inherited fd
    /// above 2 close-on-exec.
    /// Only async-signal-safe calls.
    pub(crate) fn pre_exec(&self) -> impl FnMut() -> std::io::Result<()> + Send + Sync + 'static {
        let procs = self.procs.clone();
        let parent = std::process::id() as libc::pid_t;
        move || {
            // SAFETY: plain syscalls on valid arguments, in the forked child.
            unsafe {
                // A session of its own: a process group the job leads (one
                // signal reaches it all) and no controlling terminal, so a job
                // can neither read nor write the host's terminal.
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The host may have died between fork and prctl.
                if libc::getppid() != parent {
                    libc::_exit(137);
                }
                if let Some(path) = &procs {
                    let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                    if fd < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    // "0" moves the writing process itself.
                    let written = libc::write(fd, b"0".as_ptr().cast(), 1);
                    let err = std::io::Error::last_os_error();
                    libc::close(fd);
                    if written != 1 {
                        return Err(err);
                    }
                }
                close_inherited_fds();
            }
            Ok(())
        }
    }

    /// Sends `signal` to every process of the job.
    pub(crate) fn signal(&self, signal: Signal) {
        if let Some(pgid) = self.pgid {
            // ESRCH: the group is already gone, which is what we wanted.
            let _ = killpg(pgid, signal);
        }
        match &self.cgroup {
            Some(dir) if signal == Signal::SIGKILL => {
                let _ = std::fs::write(dir.join("cgroup.kill"), "1");
            }
            Some(dir) => {
                for pid in cgroup_pids(dir) {
                    let _ = kill(pid, signal);
                }
            }
            None => {
                let entry = format!("{JOB_MARKER_VAR}={}", self.marker);
                let pgid = self.pgid.map(Pid::as_raw);
                let matches = |p: &ProcInfo| Some(p.pgrp) == pgid || p.env_is(&entry);
                if signal == Signal::SIGKILL {
                    sweep(matches, signal);
                } else {
                    for pid in find_with_descendants(matches) {
                        let _ = kill(Pid::from_raw(pid), signal);
                    }
                }
            }
        }
    }

    /// Kills what is left of the job and removes its cgroup: the job is over.
    pub(crate) fn release(&mut self) {
        self.signal(Signal::SIGKILL);
        if let Some(dir) = self.cgroup.take() {
            remove_cgroup(&dir);
        }
    }
}

impl Drop for JobContainer {
    fn drop(&mut self) {
        if self.cgroup.is_some() {
            self.release();
        }
    }
}

fn cgroup_pids(dir: &Path) -> Vec<Pid> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .map(Pid::from_raw)
        .collect()
}

/// Marks every fd above 2 close-on-exec, so a job inherits only stdin, stdout
/// and stderr whatever the embedding process leaked.
///
/// # Safety
///
/// Async-signal-safe; for the child between fork and exec.
unsafe fn close_inherited_fds() {
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
    // SAFETY: plain syscalls.
    unsafe {
        if libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, CLOSE_RANGE_CLOEXEC) == 0 {
            return;
        }
        // Kernels before 5.11: walk the descriptor table.
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur.min(1 << 16) as libc::c_int
        } else {
            1024
        };
        for fd in 3..max {
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        }
    }
}

fn make_non_dumpable() {
    // SAFETY: a plain prctl.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0 as libc::c_ulong) } != 0 {
        tracing::warn!(
            "jobs: PR_SET_DUMPABLE failed: {}",
            std::io::Error::last_os_error()
        );
    }
}

fn become_subreaper() {
    // SAFETY: a plain prctl.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong) } != 0 {
        tracing::warn!(
            "jobs: PR_SET_CHILD_SUBREAPER failed: {}",
            std::io::Error::last_os_error()
        );
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

/// What `/proc/<pid>` says about one process.
pub(crate) struct ProcInfo {
    pid: i32,
    ppid: i32,
    pgrp: i32,
    zombie: bool,
    /// NUL-separated `NAME=VALUE` entries, read on first use; empty when
    /// unreadable.
    environ: std::cell::OnceCell<Vec<u8>>,
}

impl ProcInfo {
    fn env_entries(&self) -> impl Iterator<Item = &[u8]> {
        self.environ
            .get_or_init(|| {
                std::fs::read(format!("/proc/{}/environ", self.pid)).unwrap_or_default()
            })
            .split(|b| *b == 0)
    }

    fn env_is(&self, entry: &str) -> bool {
        self.env_entries().any(|e| e == entry.as_bytes())
    }

    fn env_has_prefix(&self, prefix: &str) -> bool {
        self.env_entries().any(|e| e.starts_with(prefix.as_bytes()))
    }

    /// A process that reparented to this (subreaper) host from outside its own
    /// process group and carries no job's marker (it cleared its environment):
    /// only job processes end up so, and no producer can tell whose it was.
    fn is_adopted_orphan(&self) -> bool {
        self.ppid == std::process::id() as i32
            && self.pgrp != host_pgrp()
            && !is_job_leader(self.pid)
            && !self.env_has_prefix(&format!("{JOB_MARKER_VAR}="))
    }
}

fn host_pgrp() -> i32 {
    nix::unistd::getpgrp().as_raw()
}

fn stat_fields(pid: i32) -> Option<(i32, i32, bool)> {
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
fn processes() -> Vec<ProcInfo> {
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

/// Live processes matching `matches`, plus every live descendant of them.
fn find_with_descendants(matches: impl Fn(&ProcInfo) -> bool) -> Vec<i32> {
    let all = processes();
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for p in &all {
        children.entry(p.ppid).or_default().push(p.pid);
    }
    let zombies: HashSet<i32> = all.iter().filter(|p| p.zombie).map(|p| p.pid).collect();
    let mut found: HashSet<i32> = HashSet::new();
    let mut stack: Vec<i32> = all.iter().filter(|p| matches(p)).map(|p| p.pid).collect();
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
fn sweep(matches: impl Fn(&ProcInfo) -> bool, signal: Signal) {
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
/// leaders, which tokio reaps, and anything an embedder spawns) share its group or
/// are left alone.
pub(crate) fn reap_adopted() {
    let me = std::process::id() as i32;
    let group = host_pgrp();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return;
    };
    // Held for the whole scan: a leader spawned meanwhile is recorded before it
    // can be mistaken for an orphan (see `spawn_leader`).
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

static LEADERS: std::sync::Mutex<Option<HashSet<i32>>> = std::sync::Mutex::new(None);

struct Leaders(std::sync::MutexGuard<'static, Option<HashSet<i32>>>);

impl Leaders {
    fn contains(&self, pid: &i32) -> bool {
        self.0.as_ref().is_some_and(|s| s.contains(pid))
    }
}

fn lock_leaders() -> Leaders {
    Leaders(LEADERS.lock().unwrap_or_else(|p| p.into_inner()))
}

/// Spawns a job leader and records its pid in one step, so the fallback's
/// reaper never takes the leader's exit status from its supervisor.
pub(crate) fn spawn_leader(
    cmd: &mut tokio::process::Command,
) -> std::io::Result<tokio::process::Child> {
    let mut leaders = lock_leaders();
    let child = cmd.spawn()?;
    if let Some(pid) = child.id() {
        leaders
            .0
            .get_or_insert_with(HashSet::new)
            .insert(pid as i32);
    }
    Ok(child)
}

/// Records a child the host reaps itself (the watchdog), so no sweep takes it
/// for a job's orphan.
fn protect(pid: u32) {
    lock_leaders()
        .0
        .get_or_insert_with(HashSet::new)
        .insert(pid as i32);
}

/// Forgets a job leader once it has been reaped.
pub(crate) fn remove_leader(pid: u32) {
    if let Some(set) = lock_leaders().0.as_mut() {
        set.remove(&(pid as i32));
    }
}

fn is_job_leader(pid: i32) -> bool {
    lock_leaders().contains(&pid)
}

/// A process outside every job that cleans up after the host if it dies without
/// doing so itself: it blocks reading a pipe only the host holds, and when that
/// read ends (the host exited, crashed or was SIGKILLed) it kills what is left of
/// the jobs and removes the spill directory.
struct Watchdog {
    pipe: Option<OwnedFd>,
    child: Option<std::process::Child>,
}

impl Watchdog {
    fn start(
        shell: &Path,
        mode: &ActiveMode,
        token: &str,
        spill_dir: &Path,
    ) -> std::io::Result<Watchdog> {
        let kill = match mode {
            ActiveMode::Cgroup(root) => format!(
                "echo 1 > {root}/cgroup.kill 2>/dev/null; \
                 for i in $(seq 1 200); do \
                   for d in {root}/*/; do [ -d \"$d\" ] && rmdir \"$d\" 2>/dev/null; done; \
                   rmdir {root} 2>/dev/null && break; sleep 0.01; \
                 done",
                root = shell_quote(&root.display().to_string()),
            ),
            ActiveMode::Fallback => format!(
                "for round in 1 2 3 4 5 6 7 8; do found=; \
                   for p in /proc/[0-9]*; do \
                     if grep -qz '^{JOB_MARKER_VAR}={token}\\.' \"$p/environ\" 2>/dev/null; then \
                       kill -STOP \"${{p#/proc/}}\" 2>/dev/null; kill -KILL \"${{p#/proc/}}\" 2>/dev/null; found=1; \
                     fi; \
                   done; [ -z \"$found\" ] && break; \
                 done"
            ),
        };
        let script = format!(
            "read -r _; {kill}; rm -rf {spill}",
            spill = shell_quote(&spill_dir.display().to_string())
        );
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe2 fills the two fds; both close-on-exec, so no job inherits
        // the write end (the read end becomes the watchdog's stdin through dup2).
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: freshly created, owned by nobody else.
        let (read, write) = unsafe {
            (
                <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fds[0]),
                <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fds[1]),
            )
        };
        let mut cmd = std::process::Command::new(shell);
        cmd.arg("--noprofile")
            .arg("--norc")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::from(read))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .env_clear()
            .env(
                "PATH",
                std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()),
            );
        // Its own session: no terminal signal aimed at the host's group reaches it.
        // SAFETY: setsid is async-signal-safe.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
                nix::unistd::setsid().map_err(std::io::Error::from)?;
                Ok(())
            });
        }
        let child = cmd.spawn()?;
        protect(child.id());
        Ok(Watchdog {
            pipe: Some(write),
            child: Some(child),
        })
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        if let Some(pipe) = self.pipe.take() {
            // One line lets the watchdog go without waiting for EOF.
            let mut file = std::fs::File::from(pipe);
            let _ = file.write_all(b"\n");
        }
        if let Some(mut child) = self.child.take() {
            // Reap it off-thread; it finishes within moments.
            std::thread::spawn(move || {
                let _ = child.wait();
                remove_leader(child.id());
            });
        }
    }
}

fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_are_unescaped() {
        assert_eq!(
            unescape_mount("/sys/fs/cgroup\\040x"),
            PathBuf::from("/sys/fs/cgroup x")
        );
        assert_eq!(unescape_mount("/plain"), PathBuf::from("/plain"));
    }

    #[test]
    fn quoting_survives_quotes() {
        assert_eq!(shell_quote("a'b"), "'a'\\''b'");
    }
}
