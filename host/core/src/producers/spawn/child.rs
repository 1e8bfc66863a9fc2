//! The child's side of a spawn, from the clone to `execve`: everything it
//! does, read from the plain data the parent prepared, each step argued once.
//! The child shares the host's memory, so it makes only async-signal-safe
//! calls (no allocation, no lock, no panic) and aborts rather than unwinds.
//!
//! (Over 500 lines: the child's every step from the clone to `execve`, each
//! argued as async-signal-safe where it stands; split, the order of the steps
//! would no longer be read in one place.)

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};

use nix::sys::signal::{SigSet, SigmaskHow, pthread_sigmask};
use rustix::mm::{MapFlags, MprotectFlags, ProtFlags, mmap_anonymous, mprotect, munmap};
use rustix::process::{Pid, PidfdFlags, Signal, WaitOptions, kill_process, pidfd_open, waitpid};

use super::prelude::{self, Inherited};
use super::{ChildSandbox, ChildSetup, EXTRA_FD_FLOOR, MountStep, Namespace, Spec, Watch};

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
    /// The fence steps the spawning thread has taken for its children.
    inherited: Inherited,
    /// The child was cloned into the cgroup it would join (see [`clone3`]).
    in_cgroup: bool,
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

/// Clones the child with `stdio` as its 0-2 and runs `spec` in it; its pid
/// once it has exec'd, and its pidfd when `watch` asks for one.
pub(super) fn clone_child(
    spec: &Spec,
    stdio: [libc::c_int; 3],
    watch: Watch,
) -> std::io::Result<(i32, Option<OwnedFd>)> {
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
    let inherited = prelude::enter_mount(spec.setup.sandbox.as_ref(), spec.cwd.is_some())?;
    prelude::check(inherited, spec.setup.sandbox.as_ref())?;
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
        inherited,
        in_cgroup: false,
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
    // Straight into its cgroup where the kernel can (see `clone3`); else
    // the child writes itself into it.
    let into_cgroup = spec
        .setup
        .join_cgroup
        .as_deref()
        .and_then(clone3::cgroup_of)
        .and_then(|cgroup| {
            args.in_cgroup = true;
            // SAFETY: as for `clone` below.
            unsafe { clone3::clone_into(&cgroup, &stack, (&raw mut args).cast()) }
        });
    let cloned = into_cgroup.unwrap_or_else(|| {
        args.in_cgroup = false;
        // SAFETY: the child runs `child_main` on `stack` with `args`, both
        // alive until it has exec'd or exited (CLONE_VFORK suspends us until
        // then).
        let pid = unsafe {
            libc::clone(
                child_main,
                stack.top(),
                libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                (&raw mut args).cast(),
            )
        };
        if pid > 0 {
            Ok(pid)
        } else {
            Err(std::io::Error::last_os_error())
        }
    });
    // Restoring our own mask cannot fail, and the child must be seen to below.
    let _ = pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&old), None);
    STACK.with(|cell| cell.set(Some(stack)));
    let pid = cloned?;
    let Some(child) = Pid::from_raw(pid) else {
        return Err(std::io::Error::other("clone gave no pid"));
    };
    let failed = args.error.load(Ordering::SeqCst);
    if failed != 0 {
        // The child exited without exec; reap it.
        let _ = waitpid(Some(child), WaitOptions::empty());
        return Err(std::io::Error::from_raw_os_error(failed));
    }
    if watch == Watch::Reaper {
        return Ok((pid, None));
    }
    match pidfd_open(child, PidfdFlags::empty()) {
        Ok(pidfd) => Ok((pid, Some(pidfd))),
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
    job_setup(args.setup, args.inherited, args.in_cgroup)?;
    // After the setup marked every inherited descriptor close-on-exec: a
    // dup2 target is not.
    for (n, from) in args.extra.iter().enumerate() {
        // SAFETY: dup2 of descriptors the parent keeps open for us, onto
        // numbers below all of them.
        if unsafe { libc::dup2(*from, 3 + n as libc::c_int) } < 0 {
            return Err(errno());
        }
    }
    // Joining a mount namespace moved the child to its root; mounts it
    // laid itself may cover the directory it entered before them (a name
    // that led elsewhere when the host checked it): the workdir is entered
    // again, by its name in the fenced view.
    if args
        .setup
        .sandbox
        .as_ref()
        .is_some_and(|s| s.join_mount.is_some() || s.namespace.is_some())
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
        // Forked from a process that takes no fence steps for its children.
        inherited: Inherited::default(),
        in_cgroup: false,
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

/// The steps of `setup`, in order, but joining the cgroup the child was
/// cloned `in_cgroup`; the errno of the first that fails.
fn job_setup(setup: &ChildSetup, inherited: Inherited, in_cgroup: bool) -> Result<(), i32> {
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
    if let Some(procs) = setup.join_cgroup.as_deref().filter(|_| !in_cgroup) {
        join_cgroup(procs)?;
    }
    if setup.close_inherited_fds {
        close_inherited_fds();
    }
    if let Some(sandbox) = &setup.sandbox {
        enter_sandbox(sandbox, inherited)?;
    }
    Ok(())
}

/// The sandbox's steps (see [`ChildSandbox`]) but those `inherited` from
/// the spawning thread (which `prelude::check` matched to the sandbox before
/// the clone); the errno of the first that fails.
fn enter_sandbox(sandbox: &ChildSandbox, inherited: Inherited) -> Result<(), i32> {
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
            if !inherited.in_job_mount && unsafe { libc::setns(mount, libc::CLONE_NEWNS) } < 0 {
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
                MountStep::Hide { path } => unless_gone(
                    mount(
                        Some(c"tmpfs"),
                        path,
                        Some(c"tmpfs"),
                        libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                        Some(c"size=4k,mode=0"),
                    ),
                    path,
                )?,
                MountStep::Cover { path } => unless_gone(
                    mount(Some(c"/dev/null"), path, None, libc::MS_BIND, None),
                    path,
                )?,
                MountStep::Pin { path } => {
                    mount(Some(path), path, None, libc::MS_BIND, None)?;
                }
            }
        }
    }
    if sandbox.drop_capabilities {
        if !inherited.bounding_set_dropped {
            drop_bounding_set()?;
        }
        drop_capabilities()?;
    }
    if (sandbox.landlock.is_some() || !sandbox.seccomp.is_empty()) && !inherited.no_new_privs {
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
    if !sandbox.seccomp.is_empty() && inherited.seccomp.is_none() {
        load_filter(&sandbox.seccomp)?;
    }
    Ok(())
}

/// A service's socket or socket directory `target` that went away since the
/// start resolved it (a tmux server that exited meanwhile) needs no cover:
/// there is nothing left to reach through it, and the job starts without
/// it. Any other failure (`/dev/null` missing, say) stands.
fn unless_gone(result: Result<(), i32>, target: &std::ffi::CStr) -> Result<(), i32> {
    if result == Err(libc::ENOENT) {
        // SAFETY: a plain C struct, for which zeroes are valid.
        let mut stat: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fstatat of a NUL-terminated path into a valid struct.
        let gone = unsafe {
            libc::fstatat(
                libc::AT_FDCWD,
                target.as_ptr(),
                &mut stat,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        } != 0
            && errno() == libc::ENOENT;
        if gone {
            return Ok(());
        }
    }
    result
}

/// Loads `filter` on the calling thread (which has `no_new_privs` or may
/// load filters without it); the errno when the kernel refuses.
pub(super) fn load_filter(filter: &[libc::sock_filter]) -> Result<(), i32> {
    let program = libc::sock_fprog {
        len: filter.len() as libc::c_ushort,
        filter: filter.as_ptr().cast_mut(),
    };
    // SAFETY: the kernel copies the program during the call; `filter`
    // outlives it.
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
    Ok(())
}

/// Empties the capability bounding set of the calling thread, so that no
/// `execve` from it (or from a process it clones) grants a capability.
pub(super) fn drop_bounding_set() -> Result<(), i32> {
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
    Ok(())
}

/// Empties the ambient set and the process's own sets, so that a job of a
/// privileged host (whose bounding set is already empty) holds no
/// capability, before or after its `execve`.
fn drop_capabilities() -> Result<(), i32> {
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

mod clone3;

/// Whether spawns into a cgroup still take `clone3` (none refused it).
#[cfg(test)]
pub(super) fn clone3_in_use() -> bool {
    clone3::in_use()
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
    fn only_a_cover_whose_target_is_gone_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let here = std::ffi::CString::new(dir.path().as_os_str().as_encoded_bytes()).unwrap();
        let gone =
            std::ffi::CString::new(dir.path().join("gone").as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(unless_gone(Err(libc::ENOENT), &gone), Ok(()));
        // The target is there: the ENOENT was about something else.
        assert_eq!(unless_gone(Err(libc::ENOENT), &here), Err(libc::ENOENT));
        assert_eq!(unless_gone(Err(libc::EPERM), &gone), Err(libc::EPERM));
        assert_eq!(unless_gone(Ok(()), &gone), Ok(()));
    }

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
}
