//! A durable job's monitor: a small process between the host and the job's
//! leader, so the job outlives the host (a daemon killed, crashed or
//! upgraded) with its output and its end kept.
//!
//! The host starts the monitor where it would start the leader: in the job's
//! container, inside its fence, with the job's pipes as its stdout and
//! stderr. The monitor then
//! - clears the death signal the spawn gave it (its job dies with it, not
//!   with the host) and becomes the subreaper of the job's processes;
//! - starts the leader in a process group of its own, with the job's own
//!   limits, and the death signal tied to the monitor;
//! - appends each stream's bytes to the job's file as frames (descriptor
//!   3, which the host opened, so the fence needs no path of the host's),
//!   at most a bound of bytes each, counting what it could not keep, and
//!   passes the same bytes on to the host while the host reads;
//! - shrugs off the signals aimed at the whole job (they are the job's),
//!   and once the leader has ended and its pipes are done (or the grace
//!   period is over) kills what is left of the job if the host is gone,
//!   writes the job's end in the file's header (descriptor 4) as one line,
//!   then exits as the leader did, so the host sees the same status either
//!   way;
//! - once its parent is gone, reads the session's lease (descriptor 5: a
//!   deadline in epoch ms) every second, and stops the job when it passes:
//!   no job lives on unattended for longer than its session would have;
//! - writes its own pid and start time (in the header) first, so a host
//!   that takes the job on later can find it, and tell it from a process
//!   that reused its pid.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// The subcommand a host binary runs the monitor under: with the version
/// of its command line and file, so a monitor of another build refuses it.
pub const MONITOR_COMMAND: &str = "monitor-2";

/// The descriptors the monitor gets, from 3: its job's file opened to
/// append (the output's frames), the same file opened to write in place
/// (its header), and the session's lease.
const FRAMES: RawFd = 3;
const HEADER: RawFd = 4;
const LEASE_FILE: RawFd = 5;

/// A durable job's file, one per job (one file made per start: a spawn
/// storm creates as few inodes as it can). Its header holds, from 0, the
/// monitor's `pid start-time` line, which it writes when it starts (so a
/// host killed before it recorded them leaves the job findable), and from
/// [`END_AT`] the job's end as one JSON line. From [`FRAMES_AT`] come the
/// output's frames, in the order the monitor read them: a stream byte (1
/// stdout, 2 stderr), the length (u32, little-endian), the bytes.
pub const END_AT: u64 = 64;
/// See [`END_AT`].
pub const FRAMES_AT: u64 = 4096;
const FRAME_HEADER: usize = 5;
/// No frame is longer (the monitor reads at most 64 KiB at a time): a
/// length past it is a damaged file, read no further.
const MAX_FRAME: usize = 1 << 20;

/// Reads `len` bytes of `file` at `at`, or fewer at its end.
fn read_at(file: &std::fs::File, at: u64, len: usize) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; len];
    let mut got = 0;
    while got < len {
        match file.read_at(&mut buf[got..], at + got as u64) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    buf.truncate(got);
    buf
}

/// The line at the start of `bytes`, if it is whole.
fn header_line(bytes: &[u8]) -> Option<&[u8]> {
    let end = bytes.iter().position(|b| *b == b'\n')?;
    (end > 0).then(|| &bytes[..end])
}

/// The monitor of the job whose file is `file`, as it recorded itself: its
/// pid and start time (see [`super::process_start_time`]).
pub fn recorded_monitor(file: &Path) -> Option<(i32, u64)> {
    let bytes = read_at(&std::fs::File::open(file).ok()?, 0, END_AT as usize);
    let line = std::str::from_utf8(header_line(&bytes)?).ok()?;
    let (pid, start) = line.split_once(' ')?;
    Some((pid.parse().ok()?, start.parse().ok()?))
}

/// Calls `each` with the stream (1 stdout, 2 stderr) and bytes of every
/// whole frame of `file` from `offset` (a frame's start, at least
/// [`FRAMES_AT`]); the offset after the last whole one. A frame still being
/// written, or a damaged one, ends the reading there.
pub fn read_frames(file: &std::fs::File, mut offset: u64, mut each: impl FnMut(u8, &[u8])) -> u64 {
    offset = offset.max(FRAMES_AT);
    loop {
        let head = read_at(file, offset, FRAME_HEADER);
        if head.len() < FRAME_HEADER || !matches!(head[0], 1 | 2) {
            return offset;
        }
        let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize;
        if len > MAX_FRAME {
            return offset;
        }
        let body = read_at(file, offset + FRAME_HEADER as u64, len);
        if body.len() < len {
            return offset;
        }
        each(head[0], &body);
        offset += (FRAME_HEADER + len) as u64;
    }
}

/// How a durable job ended, as its monitor wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobEnd {
    /// The leader's exit code, when it exited.
    pub code: Option<i32>,
    /// The signal that ended the leader, when one did.
    pub signal: Option<i32>,
    /// When the monitor saw the end, epoch ms.
    pub ended_at: u64,
    /// CPU time of the job's processes, user and system, in ms.
    pub user_ms: u64,
    /// See [`JobEnd::user_ms`].
    pub sys_ms: u64,
    /// The largest resident set of one of them, in KiB.
    pub max_rss_kb: u64,
    /// Bytes of stdout and stderr past the files' bound, not kept.
    pub not_kept: [u64; 2],
    /// Whether the monitor stopped the job because its session's lease
    /// passed while its host was gone.
    pub lease_expired: bool,
}

impl JobEnd {
    /// The end recorded in the job's file `file`, if its monitor wrote one
    /// whole.
    pub fn read(file: &Path) -> Option<JobEnd> {
        let bytes = read_at(
            &std::fs::File::open(file).ok()?,
            END_AT,
            (FRAMES_AT - END_AT) as usize,
        );
        serde_json::from_slice(header_line(&bytes)?).ok()
    }

    /// The leader's status as `waitpid` would have given it.
    pub fn wait_status(&self) -> std::process::ExitStatus {
        use std::os::unix::process::ExitStatusExt;
        match (self.code, self.signal) {
            (Some(code), _) => std::process::ExitStatus::from_raw((code & 0xff) << 8),
            (None, Some(signal)) => std::process::ExitStatus::from_raw(signal & 0x7f),
            (None, None) => std::process::ExitStatus::from_raw(0),
        }
    }
}

/// What the monitor of a job is told on its command line, after
/// [`MONITOR_COMMAND`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MonitorArgs {
    /// The host's pid: once the monitor's parent is another, the host is
    /// gone (it may be gone before the monitor starts).
    pub parent: i32,
    pub grace_ms: u64,
    /// The most bytes each stream's file keeps.
    pub max_file_bytes: u64,
    /// Limits for the leader only (`RLIMIT_*`, soft, hard): the monitor's
    /// own work (copying output) must not spend the job's CPU or memory.
    pub rlimits: Vec<(libc::__rlimit_resource_t, libc::rlim_t, libc::rlim_t)>,
    pub program: OsString,
    /// The leader's argv, its name first.
    pub argv: Vec<OsString>,
}

impl MonitorArgs {
    /// The words after the host binary's name.
    pub(crate) fn to_args(&self) -> Vec<OsString> {
        let limits = if self.rlimits.is_empty() {
            "-".to_owned()
        } else {
            self.rlimits
                .iter()
                .map(|(r, s, h)| format!("{r}:{s}:{h}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        let mut args: Vec<OsString> = vec![
            MONITOR_COMMAND.into(),
            self.parent.to_string().into(),
            self.grace_ms.to_string().into(),
            self.max_file_bytes.to_string().into(),
            limits.into(),
            self.program.clone(),
        ];
        args.extend(self.argv.iter().cloned());
        args
    }

    /// Parses what [`MonitorArgs::to_args`] made (without the subcommand).
    pub(crate) fn parse(args: &[OsString]) -> Result<MonitorArgs, String> {
        let text = |n: usize| {
            args.get(n)
                .and_then(|a| a.to_str())
                .ok_or_else(|| format!("argument {n} is missing or not UTF-8"))
        };
        let number = |n: usize| {
            text(n)?
                .parse::<u64>()
                .map_err(|e| format!("argument {n}: {e}"))
        };
        let parent = i32::try_from(number(0)?).map_err(|e| format!("argument 0: {e}"))?;
        let grace_ms = number(1)?;
        let max_file_bytes = number(2)?;
        let rlimits = match text(3)? {
            "-" => Vec::new(),
            list => list
                .split(',')
                .map(|entry| {
                    let parts: Vec<&str> = entry.split(':').collect();
                    match parts[..] {
                        [r, s, h] => Ok((
                            r.parse().map_err(|e| format!("{entry}: {e}"))?,
                            s.parse().map_err(|e| format!("{entry}: {e}"))?,
                            h.parse().map_err(|e| format!("{entry}: {e}"))?,
                        )),
                        _ => Err(format!("{entry}: not RESOURCE:SOFT:HARD")),
                    }
                })
                .collect::<Result<_, _>>()?,
        };
        let program = args.get(4).cloned().ok_or("no program")?;
        let argv = args.get(5..).map(<[OsString]>::to_vec).unwrap_or_default();
        if argv.is_empty() {
            return Err("no argv".to_owned());
        }
        Ok(MonitorArgs {
            parent,
            grace_ms,
            max_file_bytes,
            rlimits,
            program,
            argv,
        })
    }
}

/// Makes job `n`'s file in `durable.dir` and opens what its monitor gets
/// as descriptors 3 to 5 (see the module's notes).
pub(crate) fn prepare(
    durable: &super::DurableJobs,
    n: u64,
) -> std::io::Result<(std::path::PathBuf, Vec<OwnedFd>)> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = durable.dir.join(format!("job-{n}"));
    let reused = durable.spare.as_ref().and_then(|spare| spare.take(&path));
    let header = match reused {
        Some(file) => file,
        None => {
            // A spare that could not be taken whole is not used.
            let _ = std::fs::remove_file(&path);
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)?;
            match lock(&file) {
                // A file system without locks: the job runs, its file is
                // never reused, and a host that takes it on does not wait
                // for a monitor that is starting.
                Ok(()) | Err(rustix::io::Errno::NOLCK | rustix::io::Errno::OPNOTSUPP) => {}
                Err(e) => {
                    return Err(std::io::Error::other(format!(
                        "cannot lock the job's file: {e}"
                    )));
                }
            }
            file
        }
    };
    // The header's room (zeros): the frames are appended after it, from
    // the same offset in a new file and a spare. Never cut to zero length:
    // ext4 then flushes the file to disk at its every close (its guard for
    // files rewritten in place), a disk write per job.
    header.set_len(FRAMES_AT)?;
    let frames = std::fs::OpenOptions::new().append(true).open(&path)?;
    let lease = std::fs::File::open(&durable.lease)?;
    let fds = vec![
        OwnedFd::from(frames),
        OwnedFd::from(header),
        OwnedFd::from(lease),
    ];
    Ok((path, fds))
}

/// Takes the job file's lock (see [`SpareFiles`]) on `file`'s open file
/// description, which the monitor inherits: held from here until the
/// monitor exits, however it exits. `WOULDBLOCK` when something else holds
/// it.
fn lock(file: &std::fs::File) -> rustix::io::Result<()> {
    rustix::fs::flock(file, rustix::fs::FlockOperation::NonBlockingLockExclusive)
}

/// Whether `file` is a regular file of ours with no other name.
fn ours(file: &std::fs::File) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid takes no arguments.
    let me = unsafe { libc::geteuid() };
    file.metadata()
        .is_ok_and(|m| m.is_file() && m.uid() == me && m.nlink() == 1)
}

/// Whether a monitor (or a spawn of one under way) holds the job file at
/// `path`: its lock is taken when the file is made, on the description the
/// monitor gets, so it is free only once no monitor can write to it.
pub fn file_in_use(path: &Path) -> bool {
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    matches!(
        rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockShared),
        Err(rustix::io::Errno::WOULDBLOCK)
    )
}

/// The files of dropped jobs, emptied and kept for the next jobs' files
/// instead of being removed: a file system without a journal (ext4 so)
/// skips every inode deleted in the last seconds when it makes one, so a
/// storm of starts after a storm of removals scanned past thousands of
/// them per file. A file is kept only when no monitor holds it (its
/// lock is free), so no job that still runs writes into another's file;
/// one still held is removed as before (its monitor writes on into its
/// unlinked file).
#[derive(Debug)]
pub struct SpareFiles {
    dir: std::path::PathBuf,
    names: std::sync::Mutex<Vec<std::path::PathBuf>>,
    next: std::sync::atomic::AtomicU64,
}

/// The most empty files kept for later jobs.
const SPARE_FILES: usize = 4096;

impl SpareFiles {
    /// Keeps spare files in `dir` (private, made if missing), with those
    /// already there.
    ///
    /// # Errors
    ///
    /// `dir` cannot be made or read.
    pub fn open(dir: std::path::PathBuf) -> std::io::Result<SpareFiles> {
        use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
        let meta = std::fs::symlink_metadata(&dir)?;
        // SAFETY: geteuid takes no arguments.
        let me = unsafe { libc::geteuid() };
        if !meta.is_dir() || meta.uid() != me || meta.permissions().mode() & 0o077 != 0 {
            return Err(std::io::Error::other(format!(
                "{} is not a private directory of ours",
                dir.display()
            )));
        }
        let mut names = Vec::new();
        let mut next = 0;
        for entry in std::fs::read_dir(&dir)?.flatten() {
            let number = entry
                .file_name()
                .to_str()
                .and_then(|name| name.strip_prefix("spare-"))
                .and_then(|n| n.parse::<u64>().ok());
            match number {
                Some(n) if entry.file_type().is_ok_and(|t| t.is_file()) => {
                    next = next.max(n + 1);
                    if names.len() < SPARE_FILES {
                        names.push(entry.path());
                    }
                }
                _ => {}
            }
        }
        Ok(SpareFiles {
            dir,
            next: std::sync::atomic::AtomicU64::new(next),
            names: std::sync::Mutex::new(names),
        })
    }

    /// A spare file moved to `to` and opened to read and write.
    fn take(&self, to: &Path) -> Option<std::fs::File> {
        use std::os::unix::fs::OpenOptionsExt;
        loop {
            let from = crate::sync::lock(&self.names).pop()?;
            if rename_new(&from, to).is_ok() {
                let file = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(to)
                    .ok()
                    .filter(|file| ours(file) && lock(file).is_ok() && zero_header(file));
                if file.is_none() {
                    let _ = std::fs::remove_file(to);
                }
                return file;
            }
        }
    }

    /// Lets go of the job file at `path`: emptied and kept for a later
    /// job when no monitor holds it and there is room, else removed.
    pub fn retire(&self, path: &Path) {
        if !self.keep(path) {
            let _ = std::fs::remove_file(path);
        }
    }

    fn keep(&self, path: &Path) -> bool {
        use std::os::unix::fs::OpenOptionsExt;
        if crate::sync::lock(&self.names).len() >= SPARE_FILES {
            return false;
        }
        let Ok(file) = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path)
        else {
            return false;
        };
        // Free only if no monitor holds it; and no monitor of a build that
        // did not lock its file may still run on it either (its own line
        // names it, checked by pid and start time).
        let running = recorded_monitor(path)
            .is_some_and(|(pid, start)| super::process_start_time(pid) == Some(start));
        // Cut to its header's room, not to zero length (see `prepare`); the
        // header is zeroed when the file is taken.
        if running || !ours(&file) || lock(&file).is_err() || file.set_len(FRAMES_AT).is_err() {
            return false;
        }
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let to = self.dir.join(format!("spare-{n}"));
        if rename_new(path, &to).is_err() {
            return false;
        }
        // Offered only once its lock is let go, with the file.
        drop(file);
        crate::sync::lock(&self.names).push(to);
        true
    }

    /// Lets go of every job file in `dir` (see [`SpareFiles::retire`]),
    /// then of `dir`: only a real directory's own `job-<n>` files are kept
    /// (a link to elsewhere is removed, never followed).
    pub fn retire_dir(&self, dir: &Path) -> std::io::Result<()> {
        let real = std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir());
        if real && let Ok(entries) = std::fs::read_dir(dir) {
            for entry in entries.flatten() {
                let job = entry
                    .file_name()
                    .to_str()
                    .and_then(|name| name.strip_prefix("job-"))
                    .is_some_and(|n| n.parse::<u64>().is_ok());
                if job && entry.file_type().is_ok_and(|t| t.is_file()) {
                    self.keep(&entry.path());
                }
            }
        }
        std::fs::remove_dir_all(dir)
    }
}

/// Zeroes a spare's header as it is taken for a job, not when it was kept:
/// after a machine's crash a kept file may hold its old job's lines again
/// (a write in place may reach the disk after the rename that kept it).
fn zero_header(file: &std::fs::File) -> bool {
    use std::os::unix::fs::FileExt;
    file.write_all_at(&[0; FRAMES_AT as usize], 0).is_ok()
}

/// Renames `from` to `to`, which must not exist.
fn rename_new(from: &Path, to: &Path) -> rustix::io::Result<()> {
    rustix::fs::renameat_with(
        rustix::fs::CWD,
        from,
        rustix::fs::CWD,
        to,
        rustix::fs::RenameFlags::NOREPLACE,
    )
}

/// `spec` run under its monitor, which gets `files` (from [`prepare`]):
/// the limits of the job's own processes move to the monitor's arguments,
/// which sets them for the leader.
pub(crate) fn wrap(
    spec: &mut super::vfork::Spec,
    durable: &super::DurableJobs,
    grace: Duration,
    files: Vec<OwnedFd>,
) -> Result<(), String> {
    let job_only = [libc::RLIMIT_CPU, libc::RLIMIT_CORE, libc::RLIMIT_AS];
    let (leader_limits, own): (Vec<_>, Vec<_>) = spec
        .rlimits
        .iter()
        .partition(|(resource, _, _)| job_only.contains(resource));
    let args = MonitorArgs {
        parent: std::process::id() as i32,
        grace_ms: grace.as_millis() as u64,
        max_file_bytes: durable.max_file_bytes,
        rlimits: leader_limits,
        program: std::ffi::OsStr::from_bytes(spec.program.as_bytes()).to_owned(),
        argv: spec
            .argv
            .iter()
            .map(|a| std::ffi::OsStr::from_bytes(a.as_bytes()).to_owned())
            .collect(),
    };
    let c = |bytes: &[u8]| {
        std::ffi::CString::new(bytes)
            .map_err(|_| crate::words::spawn_failed("a NUL byte in the monitor's path"))
    };
    let monitor = c(durable.monitor.as_os_str().as_bytes())?;
    // Named for a person's `ps`, whatever path runs it.
    let mut argv = vec![c"jobs-host-monitor".to_owned()];
    for arg in args.to_args() {
        argv.push(c(arg.as_bytes())?);
    }
    spec.program = monitor;
    spec.argv = argv;
    // A host killed in the middle of the spawn leaves the job to its
    // monitor, as one killed later does (the leader dies with the monitor).
    spec.setup.die_with_parent = None;
    spec.rlimits = own;
    spec.extra_fds = files;
    Ok(())
}

extern "C" fn shrug(_: libc::c_int) {}

/// Set by [`stop_signal`]: a host that adopted the job asks its monitor to
/// stop it.
static STOP_ASKED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn asked_to_stop(_: libc::c_int) {
    STOP_ASKED.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// The signal that asks a monitor to stop its job (SIGTERM to all of it,
/// SIGKILL after the grace period): a real-time one, which no whole-job
/// signal of the host's carries. A host that is not the monitor's parent
/// (it adopted the job) cannot reach the job's processes otherwise.
pub(crate) fn stop_signal() -> libc::c_int {
    libc::SIGRTMIN() + 4
}

/// The signals a whole-job signal may carry that would end or stop the
/// monitor by default; it catches them (so its children get them at their
/// defaults again at exec).
const SHRUGGED: [libc::c_int; 12] = [
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGPIPE,
    libc::SIGALRM,
    libc::SIGTSTP,
    libc::SIGTTIN,
    libc::SIGTTOU,
    libc::SIGCHLD,
];

/// Runs the monitor with `args` (the words after [`MONITOR_COMMAND`]) and
/// answers the exit code to exit with (a leader ended by a signal ends the
/// monitor by the same signal instead).
pub fn run_monitor(args: &[OsString]) -> i32 {
    let args = match MonitorArgs::parse(args) {
        Ok(args) => args,
        Err(why) => {
            eprintln!("jobs-host monitor: {why}");
            return 125;
        }
    };
    // SAFETY: plain prctls with integer arguments.
    unsafe {
        // The job dies with its monitor, not with the host.
        libc::prctl(libc::PR_SET_PDEATHSIG, 0);
        // Orphans of the job come here, not to whoever adopts them outside.
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1);
    }
    let parent = args.parent;
    // Its name in a person's `ps` (it may run as `/proc/self/fd/N`).
    // SAFETY: PR_SET_NAME with a NUL-terminated name of at most 16 bytes.
    unsafe { libc::prctl(libc::PR_SET_NAME, c"jobs-monitor".as_ptr()) };
    // Nothing of the job (same user, same sandbox) may read the monitor's
    // memory or descriptors, or trace it, to forge its records.
    // SAFETY: a plain prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0) };
    for fd in [FRAMES, HEADER, LEASE_FILE] {
        // SAFETY: fcntl on a number; one that is not open fails harmlessly.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    // SAFETY: getpid takes no arguments.
    let me = unsafe { libc::getpid() };
    if let Some(start) = super::process_start_time(me) {
        let line = format!("{me} {start}\n");
        // SAFETY: the file the host opened for us, written in one call.
        unsafe { libc::pwrite(HEADER, line.as_ptr().cast(), line.len(), 0) };
    }
    for sig in SHRUGGED {
        // SAFETY: a handler that does nothing, for a catchable signal.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = shrug as *const () as usize;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
    // SAFETY: a handler that only stores to an atomic.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = asked_to_stop as *const () as usize;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(stop_signal(), &action, std::ptr::null_mut());
    }
    let leader = match spawn_leader(&args) {
        Ok(child) => child,
        Err(e) => {
            // Said where the host reads it, and kept in the file with an end
            // (exit code 127, as a shell says of a command it cannot run).
            let why = format!("{}\n", crate::words::spawn_failed(&e.to_string()));
            eprint!("{why}");
            let mut frame = vec![2u8];
            frame.extend_from_slice(&(why.len() as u32).to_le_bytes());
            frame.extend_from_slice(why.as_bytes());
            // SAFETY: the file the host opened for us.
            let _ = write_all(unsafe { BorrowedFd::borrow_raw(FRAMES) }, &frame);
            write_end(&JobEnd {
                code: Some(127),
                signal: None,
                ended_at: crate::registry::now_ms(),
                user_ms: 0,
                sys_ms: 0,
                max_rss_kb: 0,
                not_kept: [0, 0],
                lease_expired: false,
            });
            return 127;
        }
    };
    let super::vfork::Started {
        pid: leader_pid,
        pidfd,
        stdout: out,
        stderr: Some(err),
        ..
    } = leader
    else {
        return 127;
    };
    let mut run = Run {
        streams: [Relay::new(out, 1, 1), Relay::new(err, 2, 2)],
        max_file_bytes: args.max_file_bytes,
        leader: leader_pid,
        pidfd,
        status: None,
        exited_at: None,
        parent,
        lease: Lease::default(),
        grace: Duration::from_millis(args.grace_ms),
    };
    run.relay_until_done();
    // SAFETY: getppid takes no arguments.
    if unsafe { libc::getppid() } != parent {
        // With the host gone, nobody else ends what is left of the job
        // (background children): the monitor does, as the host would have.
        run.signal_job(libc::SIGKILL);
    }
    let status = run.status.unwrap_or(libc::SIGKILL);
    write_end(&run.end(status));
    exit_as(status)
}

/// Writes `end` in the job file's header, in one call.
fn write_end(end: &JobEnd) {
    let mut line = serde_json::to_vec(end).unwrap_or_default();
    line.push(b'\n');
    // SAFETY: the file the host opened for us, written in one call.
    unsafe { libc::pwrite(HEADER, line.as_ptr().cast(), line.len(), END_AT as i64) };
}

/// Starts the leader: its own process group, the job's limits, and death
/// with the monitor. Cloned as the host clones its leaders (sharing the
/// monitor's memory until the `execve`): a `fork` would copy the monitor's
/// page tables only for the `execve` to throw them away.
fn spawn_leader(args: &MonitorArgs) -> std::io::Result<super::vfork::Started> {
    let c = |bytes: &[u8]| {
        std::ffi::CString::new(bytes)
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "a NUL byte"))
    };
    let spec = super::vfork::Spec {
        program: c(args.program.as_bytes())?,
        argv: args
            .argv
            .iter()
            .map(|a| c(a.as_bytes()))
            .collect::<std::io::Result<_>>()?,
        // The job's environment, which the host gave the monitor.
        envp: std::env::vars_os()
            .map(|(name, value)| {
                let mut entry = std::os::unix::ffi::OsStringExt::into_vec(name);
                entry.push(b'=');
                entry.extend_from_slice(value.as_bytes());
                c(&entry)
            })
            .collect::<std::io::Result<_>>()?,
        cwd: None,
        open_stdin: false,
        tty: None,
        rlimits: args.rlimits.clone(),
        setup: super::vfork::ChildSetup {
            new_group: true,
            // SAFETY: getpid takes no arguments.
            die_with_parent: Some(unsafe { libc::getpid() }),
            ..Default::default()
        },
        hold: None,
        hold_shared: None,
        extra_fds: Vec::new(),
    };
    // SAFETY: the monitor's stdin, open for its whole life.
    super::vfork::spawn_on_pipes(&spec, unsafe { BorrowedFd::borrow_raw(0) })
}

/// One stream: the leader's pipe, its frames' stream byte and the host's
/// pipe.
struct Relay {
    pipe: Option<OwnedFd>,
    tag: u8,
    host: Option<RawFd>,
    kept: u64,
    not_kept: u64,
    /// The frame being written: its header, then the bytes.
    frame: Vec<u8>,
}

impl Relay {
    fn new(pipe: OwnedFd, tag: u8, host: RawFd) -> Relay {
        let _ = rustix::io::ioctl_fionbio(&pipe, true);
        Relay {
            pipe: Some(pipe),
            tag,
            host: Some(host),
            kept: 0,
            not_kept: 0,
            frame: Vec::new(),
        }
    }

    /// Reads what the pipe has; false at its end.
    fn pump(&mut self, buf: &mut [u8], max_file_bytes: u64) -> bool {
        let Some(pipe) = &self.pipe else {
            return false;
        };
        loop {
            match rustix::io::read(pipe, &mut *buf) {
                Ok(0) => {
                    self.pipe = None;
                    return false;
                }
                Ok(n) => {
                    let bytes = &buf[..n];
                    let room = max_file_bytes.saturating_sub(self.kept) as usize;
                    let keep = &bytes[..room.min(n)];
                    // SAFETY: the file the host opened for us.
                    let file = unsafe { BorrowedFd::borrow_raw(FRAMES) };
                    self.frame.clear();
                    self.frame.push(self.tag);
                    self.frame
                        .extend_from_slice(&(keep.len() as u32).to_le_bytes());
                    self.frame.extend_from_slice(keep);
                    if keep.is_empty() || write_all(file, &self.frame).is_ok() {
                        self.kept += keep.len() as u64;
                        self.not_kept += (n - keep.len()) as u64;
                    } else {
                        // A full disk: nothing more is kept, and it is said.
                        self.kept = max_file_bytes;
                        self.not_kept += n as u64;
                    }
                    if let Some(host) = self.host {
                        // SAFETY: the pipe the host reads, ours since the spawn.
                        let host_fd = unsafe { BorrowedFd::borrow_raw(host) };
                        if write_all(host_fd, bytes).is_err() {
                            // The host is gone; the file has it all.
                            self.host = None;
                        }
                    }
                    return true;
                }
                Err(rustix::io::Errno::AGAIN) => return true,
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => {
                    self.pipe = None;
                    return false;
                }
            }
        }
    }
}

fn write_all(fd: BorrowedFd<'_>, mut bytes: &[u8]) -> rustix::io::Result<()> {
    while !bytes.is_empty() {
        match rustix::io::write(fd, bytes) {
            Ok(0) => return Err(rustix::io::Errno::IO),
            Ok(n) => bytes = &bytes[n..],
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The session's lease as the monitor keeps track of it.
#[derive(Default)]
struct Lease {
    /// When the monitor sent the job SIGTERM for a passed lease.
    stopped_at: Option<Instant>,
    /// The stop was asked for (by a host that adopted the job), not a
    /// passed lease.
    asked: bool,
    killed: bool,
    /// Reads that found no deadline in a row (a write seen half done).
    unreadable: u32,
}

struct Run {
    streams: [Relay; 2],
    max_file_bytes: u64,
    leader: i32,
    pidfd: Option<OwnedFd>,
    /// The leader's raw wait status, once reaped.
    status: Option<i32>,
    exited_at: Option<Instant>,
    parent: i32,
    lease: Lease,
    grace: Duration,
}

impl Run {
    fn relay_until_done(&mut self) {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            self.reap();
            let open = self.streams.iter().any(|s| s.pipe.is_some());
            if let Some(at) = self.exited_at
                && (!open || at.elapsed() >= self.grace)
            {
                return;
            }
            self.keep_lease();
            let mut fds: Vec<libc::pollfd> = Vec::with_capacity(3);
            for relay in &self.streams {
                if let Some(pipe) = &relay.pipe {
                    fds.push(libc::pollfd {
                        fd: pipe.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    });
                }
            }
            if self.status.is_none()
                && let Some(pidfd) = &self.pidfd
            {
                fds.push(libc::pollfd {
                    fd: pidfd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                });
            }
            let mut timeout = Duration::from_secs(1);
            if let Some(at) = self.exited_at {
                timeout = timeout.min(self.grace.saturating_sub(at.elapsed()));
            }
            // SAFETY: poll on our own array; EINTR (a child's end) just
            // loops.
            let ready = unsafe {
                libc::poll(
                    fds.as_mut_ptr(),
                    fds.len() as libc::nfds_t,
                    timeout.as_millis().max(1) as libc::c_int,
                )
            };
            if ready <= 0 {
                continue;
            }
            for relay in &mut self.streams {
                let readable = relay.pipe.as_ref().is_some_and(|pipe| {
                    fds.iter()
                        .any(|p| p.fd == pipe.as_raw_fd() && p.revents != 0)
                });
                if readable {
                    relay.pump(&mut buf, self.max_file_bytes);
                }
            }
        }
    }

    /// Reaps every child that ended: the leader (its status kept) and the
    /// orphans of the job this subreaper adopted.
    fn reap(&mut self) {
        loop {
            let mut status = 0;
            // SAFETY: waitpid on any child, without blocking.
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if pid <= 0 {
                return;
            }
            if pid == self.leader {
                self.status = Some(status);
                self.exited_at = Some(Instant::now());
            }
        }
    }

    /// With the host gone, stops the job once the session's lease passes:
    /// SIGTERM to all of it, SIGKILL after the grace period.
    fn keep_lease(&mut self) {
        if self.lease.killed {
            return;
        }
        if let Some(at) = self.lease.stopped_at {
            if at.elapsed() >= self.grace {
                self.lease.killed = true;
                self.signal_job(libc::SIGKILL);
            }
            return;
        }
        if STOP_ASKED.load(std::sync::atomic::Ordering::SeqCst) {
            self.lease.stopped_at = Some(Instant::now());
            self.lease.asked = true;
            self.signal_job(libc::SIGTERM);
            return;
        }
        // SAFETY: getppid takes no arguments.
        if unsafe { libc::getppid() } == self.parent {
            return;
        }
        match read_deadline() {
            Some(deadline) if crate::registry::now_ms() <= deadline => self.lease.unreadable = 0,
            Some(_) => {
                self.lease.stopped_at = Some(Instant::now());
                self.signal_job(libc::SIGTERM);
            }
            None => {
                // A lease that stays unreadable (gone, cut) is a lease that
                // passed.
                self.lease.unreadable += 1;
                if self.lease.unreadable >= 5 {
                    self.lease.stopped_at = Some(Instant::now());
                    self.signal_job(libc::SIGTERM);
                }
            }
        }
    }

    /// `sig` to the leader's group and every other process of the job this
    /// monitor can find (its cgroup's, or those carrying its mark).
    fn signal_job(&self, sig: libc::c_int) {
        // SAFETY: kill of the leader's process group, and of pids found below.
        unsafe { libc::kill(-self.leader, sig) };
        // SAFETY: getpid takes no arguments.
        let me = unsafe { libc::getpid() };
        for pid in job_peers() {
            if pid != me {
                // SAFETY: as above.
                unsafe { libc::kill(pid, sig) };
            }
        }
    }

    fn end(&self, status: i32) -> JobEnd {
        // SAFETY: getrusage into a zeroed struct.
        let usage = unsafe {
            let mut usage: libc::rusage = std::mem::zeroed();
            libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage);
            usage
        };
        let ms = |t: libc::timeval| t.tv_sec as u64 * 1000 + t.tv_usec as u64 / 1000;
        let (code, signal) = if libc::WIFEXITED(status) {
            (Some(libc::WEXITSTATUS(status)), None)
        } else {
            (None, Some(libc::WTERMSIG(status)))
        };
        JobEnd {
            code,
            signal,
            ended_at: crate::registry::now_ms(),
            user_ms: ms(usage.ru_utime),
            sys_ms: ms(usage.ru_stime),
            max_rss_kb: usage.ru_maxrss as u64,
            not_kept: [self.streams[0].not_kept, self.streams[1].not_kept],
            lease_expired: self.lease.stopped_at.is_some() && !self.lease.asked,
        }
    }
}

/// The session's deadline from the lease file (decimal epoch ms).
fn read_deadline() -> Option<u64> {
    let mut buf = [0u8; 32];
    // SAFETY: the lease file the host opened for us, read from its start.
    let n = unsafe { libc::pread(LEASE_FILE, buf.as_mut_ptr().cast(), buf.len(), 0) };
    let text = std::str::from_utf8(buf.get(..usize::try_from(n).ok()?)?).ok()?;
    text.trim().parse().ok()
}

/// The other processes of this monitor's job: its cgroup's members, and
/// the processes that carry its job mark (the fallback's containment).
fn job_peers() -> Vec<i32> {
    let mut pids = Vec::new();
    if let Ok(own) = std::fs::read_to_string("/proc/self/cgroup")
        && let Some(path) = own.lines().find_map(|l| l.strip_prefix("0::"))
        && crate::containment::is_job_cgroup(path)
        && let Ok(procs) =
            std::fs::read_to_string(format!("/sys/fs/cgroup{}/cgroup.procs", path.trim()))
    {
        pids.extend(procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
    }
    if let Some(mark) = std::env::var_os(crate::containment::JOB_MARKER_VAR) {
        let mut entry = crate::containment::JOB_MARKER_VAR.as_bytes().to_vec();
        entry.push(b'=');
        entry.extend_from_slice(mark.as_bytes());
        if let Ok(dir) = std::fs::read_dir("/proc") {
            for pid in dir
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            {
                if let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ"))
                    && environ.split(|b| *b == 0).any(|var| var == entry)
                {
                    pids.push(pid);
                }
            }
        }
    }
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// Exits as a process with wait status `status` would have: its exit code,
/// or killed by its signal (without a core file of the monitor's).
fn exit_as(status: i32) -> i32 {
    if libc::WIFEXITED(status) {
        return libc::WEXITSTATUS(status);
    }
    let sig = libc::WTERMSIG(status);
    // SAFETY: resetting one signal to its default, then raising it.
    unsafe {
        let none = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        libc::setrlimit(libc::RLIMIT_CORE, &none);
        libc::signal(sig, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(sig);
    }
    128 + sig
}

#[cfg(test)]
mod tests {
    use super::*;

    fn durable(root: &Path) -> super::super::DurableJobs {
        let dir = root.join("session");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("lease"), "0").unwrap();
        super::super::DurableJobs {
            monitor: "/bin/true".into(),
            lease: dir.join("lease"),
            dir,
            max_file_bytes: 1 << 20,
            state_dir: None,
            spare: Some(std::sync::Arc::new(
                SpareFiles::open(root.join("spare")).unwrap(),
            )),
        }
    }

    fn spares(root: &Path) -> usize {
        std::fs::read_dir(root.join("spare")).unwrap().count()
    }

    #[test]
    fn a_job_file_is_held_while_its_descriptors_live_and_reused_once_free() {
        let root = tempfile::tempdir().unwrap();
        let jobs = durable(root.path());
        let (path, fds) = prepare(&jobs, 1).unwrap();
        assert!(file_in_use(&path));
        // SAFETY: the frames descriptor prepare opened, to append.
        let frames = unsafe { BorrowedFd::borrow_raw(fds[0].as_raw_fd()) };
        write_all(frames, b"old job's bytes").unwrap();
        // And its monitor's lines in the header, which go too.
        // SAFETY: the header descriptor prepare opened, to write in place.
        unsafe {
            libc::pwrite(fds[1].as_raw_fd(), b"1 2\n".as_ptr().cast(), 4, 0);
            libc::pwrite(
                fds[1].as_raw_fd(),
                b"{}\n".as_ptr().cast(),
                3,
                END_AT as i64,
            );
        }
        drop(fds);
        assert!(!file_in_use(&path));
        let spare = jobs.spare.as_ref().unwrap();
        spare.retire(&path);
        assert!(!path.exists());
        assert_eq!(spares(root.path()), 1);
        // The next job gets it, empty but for its header's room.
        let (next, fds) = prepare(&jobs, 2).unwrap();
        assert_eq!(spares(root.path()), 0);
        assert_eq!(std::fs::read(&next).unwrap(), vec![0u8; FRAMES_AT as usize]);
        assert!(file_in_use(&next));
        drop(fds);
    }

    #[test]
    fn a_spare_that_came_back_with_its_old_lines_is_zeroed_when_taken() {
        use std::os::unix::fs::{FileExt, PermissionsExt};
        let root = tempfile::tempdir().unwrap();
        // As a machine's crash may leave one: the old job's header written
        // back after its file was kept.
        let spare_dir = root.path().join("spare");
        std::fs::create_dir(&spare_dir).unwrap();
        std::fs::set_permissions(&spare_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let stale = std::fs::File::create(spare_dir.join("spare-0")).unwrap();
        stale.set_len(FRAMES_AT).unwrap();
        stale.write_all_at(b"4242 99\n", 0).unwrap();
        stale.write_all_at(br#"{"code":3}"#, END_AT).unwrap();
        drop(stale);
        let jobs = durable(root.path());
        let (path, fds) = prepare(&jobs, 1).unwrap();
        assert_eq!(spares(root.path()), 0, "the spare was taken");
        assert_eq!(std::fs::read(&path).unwrap(), vec![0u8; FRAMES_AT as usize]);
        assert_eq!(recorded_monitor(&path), None);
        assert!(JobEnd::read(&path).is_none());
        drop(fds);
    }

    #[test]
    fn a_held_job_file_is_removed_not_reused() {
        let root = tempfile::tempdir().unwrap();
        let jobs = durable(root.path());
        let (path, fds) = prepare(&jobs, 1).unwrap();
        jobs.spare.as_ref().unwrap().retire(&path);
        assert!(!path.exists());
        assert_eq!(spares(root.path()), 0);
        // Its monitor writes on, into its own (unlinked) file.
        // SAFETY: the frames descriptor prepare opened, to append.
        let frames = unsafe { BorrowedFd::borrow_raw(fds[0].as_raw_fd()) };
        write_all(frames, b"still mine").unwrap();
    }

    #[test]
    fn retiring_a_directory_never_follows_a_link_out_of_it() {
        let root = tempfile::tempdir().unwrap();
        let jobs = durable(root.path());
        let outside = root.path().join("precious");
        std::fs::write(&outside, "keep me").unwrap();
        std::os::unix::fs::symlink(&outside, jobs.dir.join("job-9")).unwrap();
        let linked = root.path().join("linked");
        std::os::unix::fs::symlink(root.path(), &linked).unwrap();
        let spare = jobs.spare.as_ref().unwrap();
        // A link is let go of itself, what it names untouched.
        let _ = spare.retire_dir(&linked);
        assert!(jobs.dir.join("lease").exists());
        spare.retire_dir(&jobs.dir).unwrap();
        assert!(!jobs.dir.exists());
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep me");
        assert_eq!(spares(root.path()), 0);
    }

    #[test]
    fn arguments_survive_their_round_trip() {
        let args = MonitorArgs {
            parent: 42,
            grace_ms: 3000,
            max_file_bytes: 1 << 20,
            rlimits: vec![(0, 5, 6), (4, 0, 0)],
            program: "/usr/bin/bash".into(),
            argv: vec!["bash".into(), "-c".into(), "echo 'a b'".into()],
        };
        let words = args.to_args();
        assert_eq!(words[0], MONITOR_COMMAND);
        assert_eq!(MonitorArgs::parse(&words[1..]).unwrap(), args);
        let none = MonitorArgs {
            rlimits: Vec::new(),
            ..args
        };
        assert_eq!(MonitorArgs::parse(&none.to_args()[1..]).unwrap(), none);
        assert!(MonitorArgs::parse(&["x".into()]).is_err());
        assert!(MonitorArgs::parse(&["7".into(), "1".into(), "2".into(), "1:2".into()]).is_err());
    }

    #[test]
    fn frames_are_read_whole_and_in_order() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("job-1");
        let file = std::fs::File::create(&path).unwrap();
        file.set_len(FRAMES_AT).unwrap();
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        for (tag, bytes) in [(1u8, &b"out"[..]), (2, b"err"), (1, b"more")] {
            file.write_all(&[tag]).unwrap();
            file.write_all(&(bytes.len() as u32).to_le_bytes()).unwrap();
            file.write_all(bytes).unwrap();
        }
        // A frame cut short (being written, or a crash) is not read.
        file.write_all(&[1, 9, 0, 0, 0, b'x']).unwrap();
        let reader = std::fs::File::open(&path).unwrap();
        let mut seen = Vec::new();
        let end = read_frames(&reader, 0, |tag, bytes| seen.push((tag, bytes.to_vec())));
        assert_eq!(
            seen,
            vec![
                (1, b"out".to_vec()),
                (2, b"err".to_vec()),
                (1, b"more".to_vec())
            ]
        );
        assert_eq!(end, FRAMES_AT + 5 * 3 + 10);
        let mut again = Vec::new();
        assert_eq!(read_frames(&reader, end, |tag, _| again.push(tag)), end);
        assert!(again.is_empty());
    }

    #[test]
    fn an_end_is_read_only_when_whole() {
        use std::os::unix::fs::FileExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("job-1");
        std::fs::File::create(&path)
            .unwrap()
            .set_len(FRAMES_AT)
            .unwrap();
        let end = JobEnd {
            code: None,
            signal: Some(15),
            ended_at: 7,
            user_ms: 1,
            sys_ms: 2,
            max_rss_kb: 3,
            not_kept: [0, 4],
            lease_expired: false,
        };
        let mut line = serde_json::to_vec(&end).unwrap();
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.write_all_at(&line[..line.len() - 3], END_AT).unwrap();
        assert_eq!(JobEnd::read(&path), None);
        line.push(b'\n');
        file.write_all_at(&line, END_AT).unwrap();
        let read = JobEnd::read(&path).unwrap();
        assert_eq!(recorded_monitor(&path), None);
        file.write_all_at(b"12 34\n", 0).unwrap();
        assert_eq!(recorded_monitor(&path), Some((12, 34)));
        assert_eq!(read, end);
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(read.wait_status().signal(), Some(15));
    }
}
