//! One spawn path every producer stands on: starting a process without
//! copying the host, with the job's own setup between the clone and the
//! `execve`. The shell producer's leaders, the fence's short-lived namespace
//! holders, a durable job's monitor and the monitors' parent all start here.
//!
//! As std keeps a command's plain data (`common.rs`) apart from the child
//! that interprets it (`unix.rs`), this module holds the plain data the
//! parent prepares ([`Spec`], [`ChildSetup`], [`ChildSandbox`]) and the
//! parent's side of a spawn; `child` everything the child does; `pty`
//! the pseudo-terminals jobs run on.
//!
//! How: `clone(CLONE_VM |
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
//! Everything the child does is in `child` (`child_main`), read from plain
//! data ([`Spec`], [`ChildSetup`]) the parent prepared: the child shares the
//! host's memory, so it may make only async-signal-safe calls (no allocation,
//! no lock, no panic), and it aborts rather than unwinds if one happens anyway.
//! Its stack is its own mapping with a guard page below it, so an overflow
//! faults instead of writing into the host's heap.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use rustix::fs::{OFlags, fcntl_getfl, fcntl_setfl};

mod child;
pub(crate) mod prelude;
mod pty;

use child::clone_child;
pub(crate) use child::enter_forked;
pub(crate) use pty::{Pty, set_size};

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
    /// Descriptors the setup refers to (the sandbox's ruleset, a mount
    /// namespace to join), held open until the spawn is done.
    pub hold: Vec<std::sync::Arc<OwnedFd>>,
    /// Descriptors the program gets as 3, 4, ... in this order (a job's
    /// monitor gets its files so).
    pub extra_fds: Vec<OwnedFd>,
}

/// The lowest number an extra descriptor is moved to before the clone, so
/// that none is overwritten when the child places them at 3, 4, ...
pub(crate) const EXTRA_FD_FLOOR: i32 = 32;

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
    /// A mount namespace of its own, for the mount steps; the working
    /// directory is entered again after them.
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

/// [`nonblocking`] for the read end of a pipe just made, whose only status
/// flag is its access mode (which `F_SETFL` ignores): one system call, not
/// two.
fn fresh_nonblocking(fd: &OwnedFd) -> std::io::Result<()> {
    fcntl_setfl(fd, OFlags::NONBLOCK)?;
    Ok(())
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
    spawn_watched(spec, Watch::Pidfd)
}

/// How the spawner's caller learns of the leader's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Watch {
    /// Through a pidfd, opened once the child has exec'd.
    Pidfd,
    /// Through a reaper that records the leader's pid: no pidfd is opened
    /// (two system calls and a descriptor less for every start).
    Reaper,
}

/// [`spawn`], the leader's end learnt as `watch` says: [`Started::pidfd`]
/// is `None` with [`Watch::Reaper`].
///
/// # Errors
///
/// As [`spawn`].
pub(crate) fn spawn_watched(spec: &Spec, watch: Watch) -> std::io::Result<Started> {
    if let Some(pty) = &spec.tty {
        return spawn_on_terminal(spec, pty, watch);
    }
    let (stdin_read, stdin_write) = stdin_of(spec)?;
    let mut started = pipes_and_clone(spec, stdin_read.as_fd(), watch)?;
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
    pipes_and_clone(spec, stdin, Watch::Pidfd)
}

fn pipes_and_clone(spec: &Spec, stdin: BorrowedFd<'_>, watch: Watch) -> std::io::Result<Started> {
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
        watch,
    )?;
    drop((out_write, err_write));
    fresh_nonblocking(&out_read)?;
    fresh_nonblocking(&err_read)?;
    Ok(Started {
        pid,
        pidfd,
        stdout: out_read,
        stderr: Some(err_read),
        stdin: None,
    })
}

/// [`spawn`] on the pseudo-terminal `pty`: the job's 0-2 are its side; the
/// host reads and writes the controlling side.
fn spawn_on_terminal(spec: &Spec, pty: &Pty, watch: Watch) -> std::io::Result<Started> {
    let reader = pty.master.try_clone()?;
    let writer = pty.master.try_clone()?;
    let slave = pty.slave.as_raw_fd();
    let (pid, pidfd) = clone_child(spec, [slave, slave, slave], watch)?;
    nonblocking(&reader)?;
    Ok(Started {
        pid,
        pidfd,
        stdout: reader,
        stderr: None,
        stdin: Some(writer),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
            hold: Vec::new(),
            extra_fds: Vec::new(),
        };
        let err = spawn(&spec).err().expect("no such program");
        assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
    }

    /// `cat /proc/self/cgroup` spawned with `join_cgroup` set to `procs`:
    /// its output, or its spawn's error.
    fn cgroup_seen_from(procs: &std::path::Path) -> std::io::Result<String> {
        let spec = Spec {
            program: c"/bin/cat".to_owned(),
            argv: vec![c"cat".to_owned(), c"/proc/self/cgroup".to_owned()],
            envp: Vec::new(),
            cwd: None,
            open_stdin: false,
            tty: None,
            rlimits: Vec::new(),
            setup: ChildSetup {
                join_cgroup: Some(CString::new(procs.as_os_str().as_encoded_bytes()).unwrap()),
                ..ChildSetup::default()
            },
            hold: Vec::new(),
            extra_fds: Vec::new(),
        };
        let started = spawn_watched(&spec, Watch::Reaper)?;
        let pid = rustix::process::Pid::from_raw(started.pid).unwrap();
        rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty()).unwrap();
        let mut out = String::new();
        std::io::Read::read_to_string(&mut std::fs::File::from(started.stdout), &mut out)?;
        Ok(out)
    }

    #[test]
    fn a_child_starts_in_its_cgroup_or_says_why_not() {
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
        let own = own
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .unwrap_or("/");
        let Some(parent) = crate::containment::cgroup2_mount()
            .map(|mount| mount.join(own.trim_start_matches('/')))
        else {
            println!("skipped: no cgroup2 mount");
            return;
        };
        let dir = parent.join(format!("spawn-test-{}", std::process::id()));
        if std::fs::create_dir(&dir).is_err() {
            println!("skipped: no cgroup of our own here");
            return;
        }
        let seen = cgroup_seen_from(&dir.join("cgroup.procs"));
        let _ = std::fs::remove_dir(&dir);
        let name = dir.file_name().unwrap().to_str().unwrap();
        assert!(seen.as_ref().unwrap().contains(name), "{seen:?}");
        // Made in it by `clone3` where the code has the entry for it and
        // nothing refuses the call (a container's seccomp profile may).
        if cfg!(target_arch = "x86_64") && !child::clone3_in_use() {
            println!("clone3 refused here: the child moved itself");
        }
        // A cgroup that is not there: the spawn fails and says so.
        let err = cgroup_seen_from(&dir.join("cgroup.procs")).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
    }
}
