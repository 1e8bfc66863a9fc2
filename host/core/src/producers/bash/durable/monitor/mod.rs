//! The monitor process: what runs between the host and a durable job's
//! leader, so the job outlives the host with its output and end kept.
//!
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
//!
//! This module is the monitor's main loop and its signals; `relay` copies
//! each stream into the job's file and on to the host; `lease` stops the
//! job once its session's lease passes with no host.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, Instant};

use super::job_file::{END_AT, FRAMES, HEADER, JobEnd, LEASE_FILE};
use super::launch::MonitorArgs;

mod lease;
mod relay;

use lease::Lease;
use relay::{Relay, write_all};

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

/// Runs the monitor with `args` (the words after `MONITOR_COMMAND`) and
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
    let me = rustix::process::getpid().as_raw_nonzero().get();
    if let Some(start) = crate::producers::bash::process_start_time(me) {
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
    let crate::producers::spawn::Started {
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
fn spawn_leader(args: &MonitorArgs) -> std::io::Result<crate::producers::spawn::Started> {
    let c = |bytes: &[u8]| {
        std::ffi::CString::new(bytes)
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "a NUL byte"))
    };
    let spec = crate::producers::spawn::Spec {
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
        setup: crate::producers::spawn::ChildSetup {
            new_group: true,
            die_with_parent: Some(rustix::process::getpid().as_raw_nonzero().get()),
            ..Default::default()
        },
        hold: Vec::new(),
        extra_fds: Vec::new(),
    };
    // SAFETY: the monitor's stdin, open for its whole life.
    crate::producers::spawn::spawn_on_pipes(&spec, unsafe { BorrowedFd::borrow_raw(0) })
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

    /// `sig` to the leader's group and every other process of the job this
    /// monitor can find (its cgroup's, or those carrying its mark).
    fn signal_job(&self, sig: libc::c_int) {
        use rustix::process::{Pid, Signal, kill_process, kill_process_group};
        // Any signal a job's stop uses (TERM, KILL, and what a model sends).
        let Some(signal) = Signal::from_named_raw(sig) else {
            return;
        };
        if let Some(group) = Pid::from_raw(self.leader) {
            let _ = kill_process_group(group, signal);
        }
        let me = rustix::process::getpid().as_raw_nonzero().get();
        for pid in job_peers() {
            if pid != me
                && let Some(pid) = Pid::from_raw(pid)
            {
                let _ = kill_process(pid, signal);
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
