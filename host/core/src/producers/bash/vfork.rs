//! Starting a job leader without copying the host: `clone(CLONE_VM |
//! CLONE_VFORK)`, as `posix_spawn` does, but with the job's own setup (session,
//! death signal, cgroup, descriptors) between the clone and the `execve`.
//!
//! A `fork` copies the host's page tables, write-protects all its memory (every
//! host thread then faults on its next write to each page) and shoots down the
//! other threads' TLBs; with many jobs that cost more than the jobs themselves.
//! Here the child runs on a small stack of its own in the host's memory, the
//! host thread that cloned waits until the child has called `execve` (or died),
//! and nothing is copied.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};

/// What to run.
pub(crate) struct Spec {
    /// The program's path.
    pub program: CString,
    /// The arguments, the program's name first.
    pub argv: Vec<CString>,
    /// `NAME=VALUE` entries: the whole environment.
    pub envp: Vec<CString>,
    /// The working directory, if not the host's.
    pub cwd: Option<CString>,
    /// A pipe for stdin whose write end the host keeps; else `/dev/null`.
    pub open_stdin: bool,
    /// Resource limits set in the child before `execve`: `RLIMIT_*`, soft and
    /// hard limit.
    pub rlimits: Vec<(libc::__rlimit_resource_t, libc::rlim_t, libc::rlim_t)>,
}

/// A started leader: its pid, a pidfd to wait on, and the read ends of its
/// stdout and stderr (non-blocking, close-on-exec).
pub(crate) struct Started {
    pub pid: i32,
    pub pidfd: OwnedFd,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
    /// The write end of stdin, when [`Spec::open_stdin`] (non-blocking).
    pub stdin: Option<OwnedFd>,
}

struct ChildArgs<'a> {
    program: *const libc::c_char,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    cwd: Option<*const libc::c_char>,
    stdin: libc::c_int,
    stdout: libc::c_int,
    stderr: libc::c_int,
    rlimits: &'a [(libc::__rlimit_resource_t, libc::rlim_t, libc::rlim_t)],
    setup: &'a mut (dyn FnMut() -> std::io::Result<()> + Send),
    /// The errno of the step that failed, for the parent.
    error: AtomicI32,
}

const STACK_BYTES: usize = 256 << 10;

fn cvt(r: libc::c_int) -> std::io::Result<libc::c_int> {
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills both fds.
    cvt(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: freshly created and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Starts `spec`; `setup` runs in the child just before `execve` and may make
/// only async-signal-safe calls (it shares the host's memory).
///
/// # Errors
///
/// Creating the pipes or the pidfd, or any step in the child (setup, `chdir`,
/// `execve`), with that step's errno.
pub(crate) fn spawn(
    spec: &Spec,
    setup: &mut (dyn FnMut() -> std::io::Result<()> + Send),
) -> std::io::Result<Started> {
    let (out_read, out_write) = pipe()?;
    let (err_read, err_write) = pipe()?;
    let (stdin_read, stdin_write) = if spec.open_stdin {
        let (read, write) = pipe()?;
        (read, Some(write))
    } else {
        // SAFETY: a plain open of a constant path.
        let devnull =
            cvt(unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) })?;
        // SAFETY: just opened, owned here.
        (unsafe { OwnedFd::from_raw_fd(devnull) }, None)
    };

    let mut argv: Vec<*const libc::c_char> = spec.argv.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = spec.envp.iter().map(|e| e.as_ptr()).collect();
    envp.push(std::ptr::null());
    let mut args = ChildArgs {
        program: spec.program.as_ptr(),
        argv: argv.as_ptr(),
        envp: envp.as_ptr(),
        cwd: spec.cwd.as_ref().map(|c| c.as_ptr()),
        stdin: stdin_read.as_raw_fd(),
        stdout: out_write.as_raw_fd(),
        stderr: err_write.as_raw_fd(),
        rlimits: &spec.rlimits,
        setup,
        error: AtomicI32::new(0),
    };
    let mut stack = vec![0u8; STACK_BYTES];
    // SAFETY: the top of our own buffer, 16-byte aligned as the ABI wants.
    let top = unsafe { stack.as_mut_ptr().add(STACK_BYTES) };
    let top = (top as usize & !15) as *mut libc::c_void;

    // No signal handler of the host may run in the child (it shares the host's
    // memory): block everything around the clone; the child resets them.
    // SAFETY: sigset operations on owned values.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
    }
    // SAFETY: the child runs `child_main` on `stack` with `args`, both alive
    // until it has exec'd or exited (CLONE_VFORK suspends us until then).
    let pid = unsafe {
        libc::clone(
            child_main,
            top,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (&raw mut args).cast(),
        )
    };
    let clone_error = std::io::Error::last_os_error();
    // SAFETY: restores this thread's own mask.
    unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
    }
    drop(stack);
    if pid < 0 {
        return Err(clone_error);
    }
    let failed = args.error.load(Ordering::SeqCst);
    if failed != 0 {
        // The child exited without exec; reap it.
        // SAFETY: our own child.
        unsafe {
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
        return Err(std::io::Error::from_raw_os_error(failed));
    }
    drop((out_write, err_write, stdin_read));
    // SAFETY: pidfd_open on our own, not yet reaped child.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if pidfd < 0 {
        let e = std::io::Error::last_os_error();
        // SAFETY: our own child; without a pidfd it cannot be supervised.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
        return Err(e);
    }
    // SAFETY: a fresh descriptor owned by nobody else.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as libc::c_int) };
    for fd in [Some(&out_read), Some(&err_read), stdin_write.as_ref()]
        .into_iter()
        .flatten()
    {
        // SAFETY: fcntl on our own descriptors.
        unsafe {
            let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
            libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
    }
    Ok(Started {
        pid,
        pidfd,
        stdout: out_read,
        stderr: err_read,
        stdin: stdin_write,
    })
}

extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the parent's `ChildArgs`, alive while we run.
    let args = unsafe { &mut *arg.cast::<ChildArgs<'_>>() };
    let fail = |args: &ChildArgs<'_>, errno: i32| -> ! {
        args.error.store(errno.max(1), Ordering::SeqCst);
        // SAFETY: leaves the child without running any of the host's exit code.
        unsafe { libc::_exit(127) }
    };
    // SAFETY: only syscalls until execve.
    unsafe {
        // Default dispositions for every signal, then an empty mask: what a job
        // would get from a fresh exec of a fresh process.
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        for sig in 1..libc::SIGRTMAX() {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                libc::sigaction(sig, &dfl, std::ptr::null_mut());
            }
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::pthread_sigmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());

        for (from, to) in [(args.stdin, 0), (args.stdout, 1), (args.stderr, 2)] {
            if libc::dup2(from, to) < 0 {
                fail(args, *libc::__errno_location());
            }
        }
        if let Some(cwd) = args.cwd
            && libc::chdir(cwd) < 0
        {
            fail(args, *libc::__errno_location());
        }
    }
    if let Err(e) = (args.setup)() {
        fail(args, e.raw_os_error().unwrap_or(libc::EINVAL));
    }
    // Last, because the setup still opens files with the host's descriptors
    // (closed at exec) in the table: an open-file limit lowered for the job
    // would fail them.
    // SAFETY: plain syscalls.
    unsafe {
        for (resource, soft, hard) in args.rlimits {
            let limit = libc::rlimit {
                rlim_cur: *soft,
                rlim_max: *hard,
            };
            if libc::setrlimit(*resource, &limit) < 0 {
                fail(args, *libc::__errno_location());
            }
        }
    }
    // SAFETY: valid, null-terminated arrays built by the parent.
    unsafe {
        libc::execve(args.program, args.argv, args.envp);
        fail(args, *libc::__errno_location())
    }
}
