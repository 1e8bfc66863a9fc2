//! Starting a job leader without copying the host: `clone(CLONE_VM |
//! CLONE_VFORK)`, as `posix_spawn` does, but with the job's own setup (session,
//! death signal, cgroup, descriptors, limits) between the clone and the `execve`.
//!
//! A `fork` copies the host's page tables, write-protects all its memory (every
//! host thread then faults on its next write to each page) and shoots down the
//! other threads' TLBs; with many jobs that cost more than the jobs themselves.
//! Here the child runs on a small stack of its own in the host's memory, the
//! host thread that cloned waits until the child has called `execve` (or died),
//! and nothing is copied.
//!
//! Everything the child does is in this file ([`child_main`]), read from plain
//! data ([`Spec`], [`ChildSetup`]) the parent prepared: the child shares the
//! host's memory, so it may make only async-signal-safe calls (no allocation,
//! no lock, no panic), and it aborts rather than unwinds if one happens anyway.
//! Its stack is its own mapping with a guard page below it, so an overflow
//! faults instead of writing into the host's heap.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};

use nix::sys::signal::{SigSet, SigmaskHow, pthread_sigmask};
use rustix::fs::{OFlags, fcntl_getfl, fcntl_setfl};
use rustix::mm::{MapFlags, MprotectFlags, ProtFlags, mmap_anonymous, mprotect, munmap};
use rustix::process::{Pid, PidfdFlags, Signal, WaitOptions, kill_process, pidfd_open, waitpid};

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
    /// A pseudo-terminal for stdin, stdout and stderr instead of pipes.
    pub tty: Option<Pty>,
    /// Resource limits set in the child before `execve`: `RLIMIT_*`, soft and
    /// hard limit.
    pub rlimits: Vec<(libc::__rlimit_resource_t, libc::rlim_t, libc::rlim_t)>,
    /// The job's own setup, in the child after its descriptors and directory.
    pub setup: ChildSetup,
    /// A descriptor the setup refers to (the sandbox's ruleset), held open
    /// until the spawn is done.
    pub hold: Option<OwnedFd>,
    /// A shared descriptor the setup refers to (a mount namespace to join).
    pub hold_shared: Option<std::sync::Arc<OwnedFd>>,
    /// Descriptors the program gets as 3, 4, ... in this order (a job's
    /// monitor gets its files so).
    pub extra_fds: Vec<OwnedFd>,
}

/// The lowest number an extra descriptor is moved to before the clone, so
/// that none is overwritten when the child places them at 3, 4, ...
const EXTRA_FD_FLOOR: i32 = 32;

/// A pseudo-terminal made for a job: the host keeps the controller, the job
/// gets the other side as its stdin, stdout, stderr and controlling terminal.
pub(crate) struct Pty {
    /// The controlling side (close-on-exec), where the host reads and writes.
    pub master: OwnedFd,
    /// The job's side (close-on-exec; the child's 0-2 are its duplicates).
    pub slave: OwnedFd,
}

impl Pty {
    /// A new pseudo-terminal of `rows` by `cols`.
    pub(crate) fn open(rows: u16, cols: u16) -> std::io::Result<Pty> {
        use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
        let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
        grantpt(&master)?;
        unlockpt(&master)?;
        let name = ptsname(&master, Vec::new())?;
        let slave = rustix::fs::open(
            name.as_c_str(),
            OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )?;
        let pty = Pty { master, slave };
        pty.resize(rows, cols)?;
        Ok(pty)
    }

    /// Sets the terminal's size (the job's foreground group gets `SIGWINCH`).
    pub(crate) fn resize(&self, rows: u16, cols: u16) -> std::io::Result<()> {
        set_size(&self.master, rows, cols)
    }
}

/// Sets the size of the terminal whose controlling side is `master`.
pub(crate) fn set_size(
    master: &impl std::os::fd::AsFd,
    rows: u16,
    cols: u16,
) -> std::io::Result<()> {
    let size = rustix::termios::Winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    rustix::termios::tcsetwinsize(master, size)?;
    Ok(())
}

/// The steps of a job's setup the child takes between the clone and the
/// `execve`, in this order, as plain data.
#[derive(Debug, Clone, Default)]
pub(crate) struct ChildSetup {
    /// A session of its own (`setsid`): a process group the job leads, so one
    /// signal reaches it all, and no controlling terminal, so a job can
    /// neither read nor write the host's terminal.
    pub new_session: bool,
    /// Makes stdin (a terminal) the new session's controlling terminal
    /// (`TIOCSCTTY`), right after `setsid`.
    pub controlling_terminal: bool,
    /// A process group of its own in the caller's session (`setpgid`): what
    /// a monitor gives its job's leader, so one signal reaches the job and
    /// not the monitor.
    pub new_group: bool,
    /// `PR_SET_PDEATHSIG(SIGKILL)`: the child dies with the thread that cloned
    /// it. With the host's pid, which the child checks is still its parent
    /// afterwards (the host may have died between the clone and the `prctl`).
    pub die_with_parent: Option<libc::pid_t>,
    /// A `cgroup.procs` file the child writes itself into.
    pub join_cgroup: Option<CString>,
    /// Marks every descriptor above 2 close-on-exec, so a job inherits only
    /// stdin, stdout and stderr whatever the embedding process leaked.
    pub close_inherited_fds: bool,
    /// The job's sandbox, entered last (see [`crate::sandbox`]).
    pub sandbox: Option<ChildSandbox>,
}

/// A job's sandbox as the child enters it, in this order: a mount namespace
/// of its own (inside a user namespace of its own when the host is not
/// privileged) with its mount steps, then `PR_SET_NO_NEW_PRIVS`, the Landlock
/// ruleset and the seccomp filter. Once Landlock restricts it the child can
/// no longer mount, so the mounts come first.
#[derive(Clone, Default)]
pub(crate) struct ChildSandbox {
    /// A mount namespace of its own, for the mount steps.
    pub namespace: Option<Namespace>,
    /// Join this mount namespace (a descriptor the parent holds, made with
    /// the mount steps already taken) instead of making one: after the user
    /// namespace of `namespace`, if any; the working directory is entered
    /// again.
    pub join_mount: Option<libc::c_int>,
    /// Paths made read-only or hidden, in order.
    pub mounts: Vec<MountStep>,
    /// A Landlock ruleset to restrict to: a descriptor the parent keeps open
    /// until the child has exec'd (close-on-exec, so the job never holds it).
    pub landlock: Option<libc::c_int>,
    /// A seccomp filter; empty for none.
    pub seccomp: Vec<libc::sock_filter>,
    /// Drop every capability (a privileged host's job), after the mounts.
    pub drop_capabilities: bool,
}

impl std::fmt::Debug for ChildSandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChildSandbox")
            .field("namespace", &self.namespace)
            .field("join_mount", &self.join_mount)
            .field("mounts", &self.mounts)
            .field("landlock", &self.landlock)
            .field("seccomp_instructions", &self.seccomp.len())
            .field("drop_capabilities", &self.drop_capabilities)
            .finish()
    }
}

/// How the child gets a mount namespace of its own.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Namespace {
    /// The host may mount: a mount namespace, nothing more.
    Mount,
    /// Join this user namespace first (a descriptor the host holds; it maps
    /// the host's uid and gid to themselves), where an unprivileged host's
    /// child may mount.
    JoinUser(libc::c_int),
    /// Only a user namespace of its own, unmapped: for the process whose
    /// namespace the host then maps and keeps.
    NewUser,
}

/// One mount step in the job's own mount namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MountStep {
    /// Bind `path` onto itself read-only, keeping `flags` (the mount's own
    /// `MS_NOSUID`, `MS_NODEV`, ... which a user namespace may not clear).
    ReadOnly { path: CString, flags: libc::c_ulong },
    /// Cover the directory `path` with an empty, read-only tmpfs.
    Hide { path: CString },
    /// Cover the file or socket `path` with `/dev/null`.
    Cover { path: CString },
    /// Bind the directory `path` onto itself, writable as before: a mount
    /// point, which cannot be renamed or removed.
    Pin { path: CString },
}

/// A started leader: its pid, a pidfd to wait on (until the producer's
/// reaper takes the wait over), and the read ends of its
/// stdout and stderr (non-blocking, close-on-exec). On a terminal, `stdout`
/// is the terminal's controlling side, `stderr` is absent and `stdin` is
/// another descriptor of the controlling side.
pub(crate) struct Started {
    pub pid: i32,
    /// `None` once the producer's reaper watches the leader instead.
    pub pidfd: Option<OwnedFd>,
    pub stdout: OwnedFd,
    pub stderr: Option<OwnedFd>,
    /// The write end of stdin, when [`Spec::open_stdin`] (non-blocking).
    pub stdin: Option<OwnedFd>,
}

/// What the child reads: raw pointers into the parent's [`Spec`], all alive
/// until the child has exec'd or exited.
struct ChildArgs<'a> {
    program: *const libc::c_char,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    cwd: Option<*const libc::c_char>,
    stdin: libc::c_int,
    stdout: libc::c_int,
    stderr: libc::c_int,
    rlimits: &'a [(libc::__rlimit_resource_t, libc::rlim_t, libc::rlim_t)],
    setup: &'a ChildSetup,
    /// Placed at 3, 4, ... after the setup (all at or above
    /// [`EXTRA_FD_FLOOR`], so none is in the way of another).
    extra: &'a [libc::c_int],
    /// The errno of the step that failed, for the parent.
    error: AtomicI32,
}

thread_local! {
    /// The spawning thread's child stack, between spawns.
    static STACK: std::cell::Cell<Option<ChildStack>> = const { std::cell::Cell::new(None) };
}

/// The child's stack, not counting its guard page.
const STACK_BYTES: usize = 256 << 10;

/// The child's stack: an anonymous mapping whose lowest page is `PROT_NONE`,
/// so running off the end faults in the child instead of writing into
/// whatever the host keeps below it.
struct ChildStack {
    base: *mut libc::c_void,
    len: usize,
}

impl ChildStack {
    fn new() -> std::io::Result<ChildStack> {
        let guard = rustix::param::page_size();
        let len = STACK_BYTES + guard;
        // SAFETY: a fresh private anonymous mapping at an address the kernel
        // picks: it aliases nothing.
        let base = unsafe {
            mmap_anonymous(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::PRIVATE | MapFlags::STACK,
            )
        }?;
        let stack = ChildStack { base, len };
        // SAFETY: the lowest page of the mapping just made, which nothing uses.
        unsafe { mprotect(base, guard, MprotectFlags::empty()) }?;
        Ok(stack)
    }

    /// The stack's top (it grows down), 16-byte aligned as the ABI wants.
    fn top(&self) -> *mut libc::c_void {
        let top = self.base as usize + self.len;
        (top & !15) as *mut libc::c_void
    }
}

impl Drop for ChildStack {
    fn drop(&mut self) {
        // SAFETY: our own mapping, whose child has exec'd or exited
        // (CLONE_VFORK held the parent until then), so nothing runs on it.
        if let Err(e) = unsafe { munmap(self.base, self.len) } {
            tracing::warn!("jobs: cannot unmap a spawn stack: {e}");
        }
    }
}

/// Waits until `fd` has something to read, for at most `timeout_ms`:
/// whether it has (a hang-up with nothing to read is not). A signal (a
/// job's `SIGCHLD`, which the producer's reaper listens for) does not cut
/// the wait short.
pub(crate) fn readable_within(fd: BorrowedFd<'_>, timeout_ms: u64) -> std::io::Result<bool> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(timeout_ms);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let mut poll = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // Rounded up, so a wait of under a millisecond still waits.
        let ms = i32::try_from(left.as_micros().div_ceil(1000)).unwrap_or(i32::MAX);
        // SAFETY: poll of one valid pollfd.
        match unsafe { libc::poll(&raw mut poll, 1, ms) } {
            1 => return Ok(poll.revents & libc::POLLIN != 0),
            0 => return Ok(false),
            _ => {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
}

fn nonblocking(fd: &OwnedFd) -> std::io::Result<()> {
    let flags = fcntl_getfl(fd)?;
    fcntl_setfl(fd, flags | OFlags::NONBLOCK)?;
    Ok(())
}

/// Starts `spec`.
///
/// # Errors
///
/// Creating the pipes, the stack or the pidfd, or any step in the child
/// (setup, `chdir`, limits, `execve`), with that step's errno.
pub(crate) fn spawn(spec: &Spec) -> std::io::Result<Started> {
    if let Some(pty) = &spec.tty {
        return spawn_on_terminal(spec, pty);
    }
    let (stdin_read, stdin_write) = stdin_of(spec)?;
    let mut started = spawn_on_pipes(spec, stdin_read.as_fd())?;
    started.stdin = stdin_write;
    Ok(started)
}

/// The child's stdin for `spec`, and the parent's end of it: a pipe
/// (non-blocking on the parent's side) when it takes input, else
/// `/dev/null`.
pub(crate) fn stdin_of(spec: &Spec) -> std::io::Result<(OwnedFd, Option<OwnedFd>)> {
    if spec.open_stdin {
        let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
        nonblocking(&write)?;
        Ok((read, Some(write)))
    } else {
        // std opens with O_CLOEXEC.
        Ok((OwnedFd::from(std::fs::File::open("/dev/null")?), None))
    }
}

/// [`spawn`] with pipes for stdout and stderr, `stdin` (the caller's own,
/// say) as the child's stdin, and no terminal whatever `spec` says: what a
/// monitor starts its job's leader with.
///
/// # Errors
///
/// As [`spawn`].
pub(crate) fn spawn_on_pipes(spec: &Spec, stdin: BorrowedFd<'_>) -> std::io::Result<Started> {
    let pipe = || rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC);
    let (out_read, out_write) = pipe()?;
    let (err_read, err_write) = pipe()?;
    let (pid, pidfd) = clone_child(
        spec,
        [
            stdin.as_raw_fd(),
            out_write.as_raw_fd(),
            err_write.as_raw_fd(),
        ],
    )?;
    drop((out_write, err_write));
    nonblocking(&out_read)?;
    nonblocking(&err_read)?;
    Ok(Started {
        pid,
        pidfd: Some(pidfd),
        stdout: out_read,
        stderr: Some(err_read),
        stdin: None,
    })
}

/// [`spawn`] on the pseudo-terminal `pty`: the job's 0-2 are its side; the
/// host reads and writes the controlling side.
fn spawn_on_terminal(spec: &Spec, pty: &Pty) -> std::io::Result<Started> {
    let reader = pty.master.try_clone()?;
    let writer = pty.master.try_clone()?;
    let slave = pty.slave.as_raw_fd();
    let (pid, pidfd) = clone_child(spec, [slave, slave, slave])?;
    nonblocking(&reader)?;
    Ok(Started {
        pid,
        pidfd: Some(pidfd),
        stdout: reader,
        stderr: None,
        stdin: Some(writer),
    })
}

/// Clones the child with `stdio` as its 0-2 and runs `spec` in it; its pid
/// and pidfd once it has exec'd.
fn clone_child(spec: &Spec, stdio: [libc::c_int; 3]) -> std::io::Result<(i32, OwnedFd)> {
    let mut argv: Vec<*const libc::c_char> = spec.argv.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = spec.envp.iter().map(|e| e.as_ptr()).collect();
    envp.push(std::ptr::null());
    let extra = spec
        .extra_fds
        .iter()
        .map(|fd| rustix::io::fcntl_dupfd_cloexec(fd, EXTRA_FD_FLOOR).map_err(std::io::Error::from))
        .collect::<std::io::Result<Vec<OwnedFd>>>()?;
    if extra.len() as i32 > EXTRA_FD_FLOOR - 3 {
        return Err(std::io::Error::other("too many descriptors for the job"));
    }
    let extra_raw: Vec<libc::c_int> = extra.iter().map(AsRawFd::as_raw_fd).collect();
    let mut args = ChildArgs {
        program: spec.program.as_ptr(),
        argv: argv.as_ptr(),
        envp: envp.as_ptr(),
        cwd: spec.cwd.as_ref().map(|c| c.as_ptr()),
        stdin: stdio[0],
        stdout: stdio[1],
        stderr: stdio[2],
        rlimits: &spec.rlimits,
        setup: &spec.setup,
        extra: &extra_raw,
        error: AtomicI32::new(0),
    };
    // One stack per spawning thread, kept: CLONE_VFORK holds this thread
    // until the child has exec'd or exited, so no two children share it, and
    // a spawn storm maps nothing.
    let stack = STACK.with(|cell| match cell.take() {
        Some(stack) => Ok(stack),
        None => ChildStack::new(),
    })?;

    // No signal handler of the host may run in the child (it shares the host's
    // memory): block everything around the clone; the child resets them.
    let mut old = SigSet::empty();
    pthread_sigmask(
        SigmaskHow::SIG_SETMASK,
        Some(&SigSet::all()),
        Some(&mut old),
    )?;
    // SAFETY: the child runs `child_main` on `stack` with `args`, both alive
    // until it has exec'd or exited (CLONE_VFORK suspends us until then).
    let pid = unsafe {
        libc::clone(
            child_main,
            stack.top(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (&raw mut args).cast(),
        )
    };
    let clone_error = std::io::Error::last_os_error();
    // Restoring our own mask cannot fail, and the child must be seen to below.
    let _ = pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&old), None);
    STACK.with(|cell| cell.set(Some(stack)));
    let Some(child) = Pid::from_raw(pid) else {
        return Err(clone_error);
    };
    let failed = args.error.load(Ordering::SeqCst);
    if failed != 0 {
        // The child exited without exec; reap it.
        let _ = waitpid(Some(child), WaitOptions::empty());
        return Err(std::io::Error::from_raw_os_error(failed));
    }
    match pidfd_open(child, PidfdFlags::empty()) {
        Ok(pidfd) => Ok((pid, pidfd)),
        Err(e) => {
            // Without a pidfd our child cannot be supervised.
            let _ = kill_process(child, Signal::KILL);
            let _ = waitpid(Some(child), WaitOptions::empty());
            Err(e.into())
        }
    }
}

/// Aborts the child if anything unwinds through [`child_main`]: an unwind
/// there would run the host's code on a stack that is not the host's. The
/// child never returns normally (it execs or `_exit`s), so this is only ever
/// dropped by an unwind.
struct AbortOnUnwind;

impl Drop for AbortOnUnwind {
    fn drop(&mut self) {
        // SAFETY: abort(3) is async-signal-safe and ends only the child (its
        // signal dispositions are the defaults by the time anything can panic).
        unsafe { libc::abort() }
    }
}

/// The child, from the clone to `execve`: only async-signal-safe calls on
/// memory the parent prepared, no allocation and nothing that can panic.
extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    let _abort = AbortOnUnwind;
    // SAFETY: `arg` is the parent's `ChildArgs`, alive while we run (the parent
    // is suspended until we exec or exit) and read only here.
    let args = unsafe { &*arg.cast::<ChildArgs<'_>>() };
    if let Err(errno) = child_steps(args) {
        fail(args, errno);
    }
    // SAFETY: valid, null-terminated arrays built by the parent.
    unsafe { libc::execve(args.program, args.argv, args.envp) };
    fail(args, errno())
}

/// Everything the child does before its `execve`, in order; the errno of
/// the first step that fails. Only async-signal-safe calls.
fn child_steps(args: &ChildArgs<'_>) -> Result<(), i32> {
    // SAFETY: signal setup on owned values, before anything else runs.
    unsafe { reset_signals() };
    for (from, to) in [(args.stdin, 0), (args.stdout, 1), (args.stderr, 2)] {
        // SAFETY: dup2 of descriptors the parent keeps open for us.
        if unsafe { libc::dup2(from, to) } < 0 {
            return Err(errno());
        }
    }
    if let Some(cwd) = args.cwd {
        // SAFETY: a NUL-terminated path owned by the parent's `Spec`.
        if unsafe { libc::chdir(cwd) } < 0 {
            return Err(errno());
        }
    }
    job_setup(args.setup)?;
    // After the setup marked every inherited descriptor close-on-exec: a
    // dup2 target is not.
    for (n, from) in args.extra.iter().enumerate() {
        // SAFETY: dup2 of descriptors the parent keeps open for us, onto
        // numbers below all of them.
        if unsafe { libc::dup2(*from, 3 + n as libc::c_int) } < 0 {
            return Err(errno());
        }
    }
    // Joining a mount namespace moved the child to its root.
    if args
        .setup
        .sandbox
        .as_ref()
        .is_some_and(|s| s.join_mount.is_some())
        && let Some(cwd) = args.cwd
    {
        // SAFETY: a NUL-terminated path owned by the parent's `Spec`.
        if unsafe { libc::chdir(cwd) } < 0 {
            return Err(errno());
        }
    }
    // Last, because the setup still opens files with the host's descriptors
    // (closed at exec) in the table: an open-file limit lowered for the job
    // would fail them.
    for (resource, soft, hard) in args.rlimits {
        let limit = libc::rlimit {
            rlim_cur: *soft,
            rlim_max: *hard,
        };
        // SAFETY: setrlimit with a valid struct.
        if unsafe { libc::setrlimit(*resource, &limit) } < 0 {
            return Err(errno());
        }
    }
    Ok(())
}

/// In a process of its own (forked, so not sharing anyone's memory), takes
/// every step of `spec`'s setup that a spawn takes before its `execve`,
/// with `stdio` as its 0-2: what a job's monitor forked from the monitors'
/// parent does before it runs, where it would otherwise have been exec'd.
/// Its descriptors from 3 on are then `spec`'s extra ones, and every other
/// one but `keep` (above them) is closed.
///
/// # Errors
///
/// The errno of the first step that fails.
pub(crate) fn enter_forked(
    spec: &Spec,
    stdio: [libc::c_int; 3],
    keep: libc::c_int,
) -> Result<(), i32> {
    let extra = spec
        .extra_fds
        .iter()
        .map(|fd| rustix::io::fcntl_dupfd_cloexec(fd, EXTRA_FD_FLOOR).map_err(|e| e.raw_os_error()))
        .collect::<Result<Vec<OwnedFd>, i32>>()?;
    if extra.len() as i32 > EXTRA_FD_FLOOR - 3 {
        return Err(libc::EMFILE);
    }
    // Closed below with the rest, not when dropped.
    let extra_raw: Vec<libc::c_int> = extra
        .into_iter()
        .map(std::os::fd::IntoRawFd::into_raw_fd)
        .collect();
    let args = ChildArgs {
        program: spec.program.as_ptr(),
        argv: std::ptr::null(),
        envp: std::ptr::null(),
        cwd: spec.cwd.as_ref().map(|c| c.as_ptr()),
        stdin: stdio[0],
        stdout: stdio[1],
        stderr: stdio[2],
        rlimits: &spec.rlimits,
        setup: &spec.setup,
        extra: &extra_raw,
        error: AtomicI32::new(0),
    };
    child_steps(&args)?;
    let first_free = 3 + extra_raw.len() as libc::c_uint;
    let keep = libc::c_uint::try_from(keep).map_err(|_| libc::EBADF)?;
    if keep < first_free {
        return Err(libc::EBADF);
    }
    for (from, to) in [(first_free, keep - 1), (keep + 1, libc::c_uint::MAX)] {
        // SAFETY: close_range with plain numbers: closes what is not ours
        // to keep (the copies the setup came with).
        if from <= to && unsafe { libc::syscall(libc::SYS_close_range, from, to, 0) } < 0 {
            return Err(errno());
        }
    }
    Ok(())
}

/// Tells the parent which errno failed the child, then exits without running
/// any of the host's exit code.
fn fail(args: &ChildArgs<'_>, errno: i32) -> ! {
    args.error.store(errno.max(1), Ordering::SeqCst);
    // SAFETY: _exit is async-signal-safe and skips every exit handler.
    unsafe { libc::_exit(127) }
}

fn errno() -> i32 {
    // SAFETY: the calling thread's errno location, always valid.
    unsafe { *libc::__errno_location() }
}

/// Default dispositions for every signal, then an empty mask: what a job would
/// get from a fresh exec of a fresh process.
///
/// # Safety
///
/// For the child between clone and exec, whose host handlers must not run.
unsafe fn reset_signals() {
    // SAFETY: sigaction and sigprocmask on zeroed, owned values.
    unsafe {
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
    }
}

/// The steps of `setup`, in order; the errno of the first that fails.
fn job_setup(setup: &ChildSetup) -> Result<(), i32> {
    // SAFETY: setsid takes no arguments.
    if setup.new_session && unsafe { libc::setsid() } < 0 {
        return Err(errno());
    }
    // SAFETY: an ioctl on our own stdin with an integer argument.
    if setup.controlling_terminal && unsafe { libc::ioctl(0, libc::TIOCSCTTY, 0) } < 0 {
        return Err(errno());
    }
    // SAFETY: setpgid of ourselves, with integer arguments.
    if setup.new_group && unsafe { libc::setpgid(0, 0) } < 0 {
        return Err(errno());
    }
    if let Some(parent) = setup.die_with_parent {
        // SAFETY: a plain prctl with integer arguments.
        if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) } != 0 {
            return Err(errno());
        }
        // SAFETY: getppid takes no arguments.
        if unsafe { libc::getppid() } != parent {
            // SAFETY: as in `fail`; the host is gone, so nobody reads an errno.
            unsafe { libc::_exit(137) };
        }
    }
    if let Some(procs) = &setup.join_cgroup {
        join_cgroup(procs)?;
    }
    if setup.close_inherited_fds {
        close_inherited_fds();
    }
    if let Some(sandbox) = &setup.sandbox {
        enter_sandbox(sandbox)?;
    }
    Ok(())
}

/// The sandbox's steps (see [`ChildSandbox`]); the errno of the first that fails.
fn enter_sandbox(sandbox: &ChildSandbox) -> Result<(), i32> {
    if let Some(namespace) = sandbox.namespace {
        let flags = match namespace {
            Namespace::Mount => libc::CLONE_NEWNS,
            Namespace::JoinUser(fd) => {
                // SAFETY: setns with a namespace descriptor the parent holds.
                if unsafe { libc::setns(fd, libc::CLONE_NEWUSER) } < 0 {
                    return Err(errno());
                }
                libc::CLONE_NEWNS
            }
            Namespace::NewUser => libc::CLONE_NEWUSER,
        };
        if let Some(mount) = sandbox.join_mount {
            // SAFETY: setns with a namespace descriptor the parent holds.
            if unsafe { libc::setns(mount, libc::CLONE_NEWNS) } < 0 {
                return Err(errno());
            }
        // SAFETY: unshare with flags only; the child is alone in its thread
        // group and shares no file-system state with the host.
        } else if unsafe { libc::unshare(flags) } < 0 {
            return Err(errno());
        }
    }
    if sandbox.join_mount.is_none()
        && matches!(
            sandbox.namespace,
            Some(Namespace::Mount | Namespace::JoinUser(_))
        )
    {
        // The job's mounts stay in its namespace: nothing propagates back.
        mount(None, c"/", None, libc::MS_REC | libc::MS_PRIVATE, None)?;
        for step in &sandbox.mounts {
            match step {
                MountStep::ReadOnly { path, flags } => {
                    mount(Some(path), path, None, libc::MS_BIND, None)?;
                    mount(
                        None,
                        path,
                        None,
                        libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | flags,
                        None,
                    )?;
                }
                MountStep::Hide { path } => mount(
                    Some(c"tmpfs"),
                    path,
                    Some(c"tmpfs"),
                    libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    Some(c"size=4k,mode=0"),
                )?,
                MountStep::Cover { path } => {
                    mount(Some(c"/dev/null"), path, None, libc::MS_BIND, None)?;
                }
                MountStep::Pin { path } => {
                    mount(Some(path), path, None, libc::MS_BIND, None)?;
                }
            }
        }
    }
    if sandbox.drop_capabilities {
        drop_capabilities()?;
    }
    if sandbox.landlock.is_some() || !sandbox.seccomp.is_empty() {
        // No setuid or file-capability gain from here on: what Landlock and
        // seccomp require of an unprivileged process, and what keeps a job
        // from leaving its fence through a setuid program.
        // SAFETY: a plain prctl with integer arguments.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
            return Err(errno());
        }
    }
    if let Some(ruleset) = sandbox.landlock {
        // SAFETY: landlock_restrict_self with a ruleset descriptor the parent
        // keeps open and no flags.
        if unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) } != 0 {
            return Err(errno());
        }
    }
    if !sandbox.seccomp.is_empty() {
        let program = libc::sock_fprog {
            len: sandbox.seccomp.len() as libc::c_ushort,
            filter: sandbox.seccomp.as_ptr().cast_mut(),
        };
        // SAFETY: the filter lives in the parent's `Spec` until we exec.
        if unsafe {
            libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                &program as *const libc::sock_fprog,
            )
        } != 0
        {
            return Err(errno());
        }
    }
    Ok(())
}

/// Empties the capability bounding set, the ambient set and the process's
/// own sets, so that a job of a privileged host holds no capability, before
/// or after its `execve`.
fn drop_capabilities() -> Result<(), i32> {
    for cap in 0..64 {
        // SAFETY: a plain prctl with integer arguments.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } != 0 {
            // EINVAL: past the last capability this kernel knows.
            if errno() == libc::EINVAL {
                break;
            }
            return Err(errno());
        }
    }
    // SAFETY: a plain prctl with integer arguments.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    };
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    let header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let data = [
        Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        },
        Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        },
    ];
    // SAFETY: capset with a version 3 header and its two data words.
    if unsafe { libc::syscall(libc::SYS_capset, &header, data.as_ptr()) } != 0 {
        return Err(errno());
    }
    Ok(())
}

/// `mount(2)` with optional source, type and data.
fn mount(
    source: Option<&std::ffi::CStr>,
    target: &std::ffi::CStr,
    fstype: Option<&std::ffi::CStr>,
    flags: libc::c_ulong,
    data: Option<&std::ffi::CStr>,
) -> Result<(), i32> {
    let ptr = |s: Option<&std::ffi::CStr>| s.map_or(std::ptr::null(), std::ffi::CStr::as_ptr);
    // SAFETY: NUL-terminated strings the parent owns, or null where allowed.
    let done = unsafe {
        libc::mount(
            ptr(source),
            target.as_ptr(),
            ptr(fstype),
            flags,
            ptr(data).cast(),
        )
    };
    if done == 0 { Ok(()) } else { Err(errno()) }
}

/// Writes the calling process into the cgroup whose `cgroup.procs` is `procs`.
fn join_cgroup(procs: &std::ffi::CStr) -> Result<(), i32> {
    // SAFETY: open of a NUL-terminated path the parent owns.
    let fd = unsafe { libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(errno());
    }
    // "0" is the writer itself.
    // SAFETY: one byte from a static buffer to the descriptor just opened.
    let written = unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) };
    let failed = errno();
    // SAFETY: the descriptor just opened, closed once.
    unsafe { libc::close(fd) };
    if written == 1 { Ok(()) } else { Err(failed) }
}

/// Marks every fd above 2 close-on-exec.
fn close_inherited_fds() {
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
    // SAFETY: close_range with integer arguments only changes descriptor flags.
    if unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, CLOSE_RANGE_CLOEXEC) } == 0 {
        return;
    }
    // Kernels before 5.11: walk the descriptor table.
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit into a valid struct.
    let max = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
        limit.rlim_cur.min(1 << 16) as libc::c_int
    } else {
        1024
    };
    for fd in 3..max {
        // SAFETY: F_SETFD on any descriptor number; a closed one answers EBADF.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stack_has_a_guard_page_below_it() {
        let stack = ChildStack::new().unwrap();
        let page = rustix::param::page_size();
        assert_eq!(stack.len, STACK_BYTES + page);
        assert_eq!(stack.top() as usize % 16, 0);
        // The guard page is mapped without access: mprotect on it succeeds
        // (it is ours), and /proc/self/maps shows it as ---p.
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let start = format!("{:x}-", stack.base as usize);
        let guard = maps
            .lines()
            .find(|l| l.starts_with(&start))
            .unwrap_or_else(|| panic!("no mapping at {start} in\n{maps}"));
        assert!(guard.split_whitespace().nth(1) == Some("---p"), "{guard}");
    }

    #[test]
    fn a_failing_step_reports_its_errno() {
        let spec = Spec {
            program: c"/nonexistent/program".to_owned(),
            argv: vec![c"program".to_owned()],
            envp: Vec::new(),
            cwd: None,
            open_stdin: false,
            tty: None,
            rlimits: Vec::new(),
            setup: ChildSetup::default(),
            hold: None,
            hold_shared: None,
            extra_fds: Vec::new(),
        };
        let err = spawn(&spec).err().expect("no such program");
        assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
    }
}
