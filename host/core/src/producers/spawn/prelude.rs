//! The fence steps a spawner thread takes on itself once, so that the jobs it
//! clones inherit them instead of each taking them again.
//!
//! A network-off fenced job's process used to load the seccomp filter (which
//! the kernel converts and compiles afresh for every process) and, on a
//! privileged host, drop the capability bounding set one capability at a
//! time, between its clone and its `execve`: together about 65 µs of a
//! start. All three steps are per thread and inherited by a clone, and none
//! of them stops a thread that never calls `execve` nor opens a socket from
//! spawning jobs. So a spawner thread kept for such jobs takes them once, and
//! [`check`] makes sure that every job cloned from it was meant to have them.
//!
//! On a privileged host such a thread also joins the shared mount namespace
//! its jobs join (see [`enter_mount`]), once for as long as it stays the
//! same, where each job's `setns` cost about 15 µs of its start.

use std::cell::{Cell, RefCell};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

/// The steps a thread has taken on itself for good.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Inherited {
    /// The capability bounding set is empty.
    pub bounding_set_dropped: bool,
    /// `no_new_privs` is set.
    pub no_new_privs: bool,
    /// This seccomp filter is loaded.
    pub seccomp: Option<&'static [libc::sock_filter]>,
    /// The thread is in the mount namespace the job joins (set for one
    /// spawn by [`enter_mount`]).
    pub in_job_mount: bool,
}

thread_local! {
    static THREAD: Cell<Inherited> = const { Cell::new(Inherited {
        bounding_set_dropped: false,
        no_new_privs: false,
        seccomp: None,
        in_job_mount: false,
    }) };
    /// The mount namespaces of a thread that may move between them.
    static MOUNT: RefCell<Option<ThreadMount>> = const { RefCell::new(None) };
    /// The thread's root is no longer the host's (see `own_mount_state`).
    static WRONG_ROOT: Cell<bool> = const { Cell::new(false) };
}

/// A thread with file-system state of its own (`unshare(CLONE_FS)`), which
/// may therefore join a mount namespace by itself.
struct ThreadMount {
    /// The host's mount namespace, to go back to.
    host: OwnedFd,
    /// The job mount namespace the thread is in (by its file's device and
    /// inode), or `None` in the host's.
    current: Option<(u64, u64)>,
}

/// What the calling thread has taken on itself (nothing, on a thread that
/// never called [`take_on_thread`]).
pub(crate) fn current() -> Inherited {
    THREAD.with(Cell::get)
}

/// Takes on the calling thread, in this order and for good: an empty
/// bounding set (when `drop_bounding_set`), `no_new_privs`, and `filter`
/// (when not empty). Stops at the first step that fails, with a warning:
/// the jobs then take the steps not taken here themselves, as they would on
/// any thread. Returns what was taken.
pub(crate) fn take_on_thread(
    filter: &'static [libc::sock_filter],
    drop_bounding_set: bool,
) -> Inherited {
    let mut taken = Inherited::default();
    let result = (|| {
        if drop_bounding_set {
            super::child::drop_bounding_set().map_err(std::io::Error::from_raw_os_error)?;
            taken.bounding_set_dropped = true;
            THREAD.with(|t| t.set(taken));
        }
        // SAFETY: a plain prctl with integer arguments.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        taken.no_new_privs = true;
        THREAD.with(|t| t.set(taken));
        if drop_bounding_set {
            // Privileged: the thread may join its jobs' mount namespace. A
            // failure here leaves that to each job.
            match own_mount_state() {
                Ok(state) => MOUNT.with(|m| *m.borrow_mut() = Some(state)),
                Err(e) => tracing::info!(
                    "jobs: a fenced spawner thread does not join mount namespaces ({e}); its jobs join theirs themselves"
                ),
            }
        }
        if !filter.is_empty() {
            super::child::load_filter(filter).map_err(std::io::Error::from_raw_os_error)?;
            taken.seccomp = Some(filter);
            THREAD.with(|t| t.set(taken));
        }
        Ok(())
    })();
    if let Err(e) = result {
        tracing::warn!(
            "jobs: a fenced spawner thread could not take every fence step on itself ({e}); its jobs take the rest themselves"
        );
    }
    taken
}

/// Gives the calling thread file-system state of its own, so that it may
/// join a mount namespace, with its way back to the host's. Not in a
/// `chroot`: a thread that joins a namespace is moved to the namespace's
/// root, which would be outside it (the thread then stays as it was).
fn own_mount_state() -> std::io::Result<ThreadMount> {
    let host = rustix::fs::open(
        "/proc/thread-self/ns/mnt",
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    // SAFETY: unshare with flags only. Root, working directory and umask
    // are this thread's own from here on, as they were the process's: a
    // job it spawns enters its directory by an absolute path (one that
    // names none is refused, see `enter_mount`), and the host changes
    // neither its root nor its umask.
    if unsafe { libc::unshare(libc::CLONE_FS) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // Joining its own namespace moves the thread to the namespace's root:
    // the same as its root unless the host runs in a chroot, whose root is
    // then given back and the thread stays where it is.
    let root = rustix::fs::open(
        "/",
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    let before = rustix::fs::fstat(&root)?;
    set_mount_namespace(host.as_fd())?;
    let after = rustix::fs::stat("/")?;
    if (before.st_dev, before.st_ino) != (after.st_dev, after.st_ino) {
        // SAFETY: fchdir to a descriptor held open, then chroot to it.
        let restored =
            unsafe { libc::fchdir(root.as_raw_fd()) == 0 && libc::chroot(c".".as_ptr()) == 0 };
        if !restored {
            // This thread's jobs would start outside the chroot.
            WRONG_ROOT.with(|w| w.set(true));
        }
        return Err(std::io::Error::other("the host runs in a chroot"));
    }
    Ok(ThreadMount {
        host,
        current: None,
    })
}

/// What the calling thread has taken on itself for a job with `sandbox`,
/// after moving it to the mount namespace the job's clone must start in,
/// when it may move (see [`own_mount_state`]): the shared namespace the
/// job joins (its `setns` then made here once for every job that joins the
/// same), or the host's for every other job (one that makes its own
/// namespace, or has none). A thread that may not move is in the host's.
///
/// # Errors
///
/// On a thread that may move, a job that names no directory (it would
/// start at a namespace's root, where `setns` leaves the thread); and the
/// thread cannot go back to the host's namespace. Either way the job must
/// not be spawned.
pub(crate) fn enter_mount(
    sandbox: Option<&super::ChildSandbox>,
    has_cwd: bool,
) -> std::io::Result<Inherited> {
    if WRONG_ROOT.with(Cell::get) {
        return Err(std::io::Error::other(
            "this spawner thread lost the host's root directory",
        ));
    }
    let mut inherited = current();
    MOUNT.with(|state| {
        let mut state = state.borrow_mut();
        let Some(state) = state.as_mut() else {
            return Ok(());
        };
        if !has_cwd {
            return Err(std::io::Error::other(
                "a job without a directory cannot start from a thread that moves between mount namespaces",
            ));
        }
        let join = sandbox.and_then(|s| match (s.namespace, s.join_mount) {
            (Some(super::Namespace::Mount), Some(fd)) => Some(fd),
            _ => None,
        });
        // SAFETY: a descriptor the caller's `Spec` holds open for the spawn.
        let join = join.map(|fd| unsafe { BorrowedFd::borrow_raw(fd) });
        let wanted = join.as_ref().and_then(|fd| {
            rustix::fs::fstat(fd)
                .ok()
                .map(|st| (st.st_dev, st.st_ino))
        });
        if state.current == wanted {
            inherited.in_job_mount = wanted.is_some();
            return Ok(());
        }
        if let (Some(fd), Some(_)) = (join, wanted)
            && set_mount_namespace(fd).is_ok()
        {
            state.current = wanted;
            inherited.in_job_mount = true;
            return Ok(());
        }
        // The host's: for this job, or for the job to join its own from.
        state.leave()
    })?;
    Ok(inherited)
}

/// Whether the calling thread may move between mount namespaces (see
/// [`own_mount_state`]), and so should [`rest`] when idle.
pub(crate) fn may_move() -> bool {
    MOUNT.with(|state| state.borrow().is_some())
}

/// Moves the calling thread back to the host's mount namespace if it is in
/// a job's: a spawner thread with no job to spawn for a while, so that it
/// does not keep a namespace the fence has made anew (with the files and
/// file systems its mounts hold) alive.
pub(crate) fn rest() {
    MOUNT.with(|state| {
        if let Some(state) = state.borrow_mut().as_mut()
            && let Err(e) = state.leave()
        {
            tracing::warn!(
                "jobs: a fenced spawner thread cannot go back to the host's mount namespace: {e}"
            );
        }
    });
}

impl ThreadMount {
    /// Back to the host's namespace, if not there.
    fn leave(&mut self) -> std::io::Result<()> {
        if self.current.is_some() {
            set_mount_namespace(self.host.as_fd())?;
            self.current = None;
        }
        Ok(())
    }
}

/// Moves the calling thread (whose file-system state is its own) into the
/// mount namespace `fd` names.
fn set_mount_namespace(fd: BorrowedFd<'_>) -> std::io::Result<()> {
    // SAFETY: setns with a namespace descriptor the caller holds open.
    if unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNS) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Whether a job with `sandbox` may be cloned from a thread that has taken
/// `inherited` on itself: only if the job would take every one of those steps
/// itself. A job that may not would lose what its policy gives it (a socket,
/// a setuid program, a capability), so its spawn fails instead.
///
/// # Errors
///
/// Names the step the job does not take.
pub(crate) fn check(
    inherited: Inherited,
    sandbox: Option<&super::ChildSandbox>,
) -> std::io::Result<()> {
    let refuse = |step: &str| {
        Err(std::io::Error::other(format!(
            "a job without {step} cannot start from a thread that has it"
        )))
    };
    let takes = |step: &dyn Fn(&super::ChildSandbox) -> bool| sandbox.is_some_and(step);
    if inherited.bounding_set_dropped && !takes(&|s| s.drop_capabilities) {
        return refuse("a dropped bounding set");
    }
    if inherited.no_new_privs && !takes(&|s| s.landlock.is_some() || !s.seccomp.is_empty()) {
        return refuse("no_new_privs");
    }
    if let Some(filter) = inherited.seccomp
        && !takes(&|s| same_filter(&s.seccomp, filter))
    {
        return refuse("the thread's seccomp filter");
    }
    Ok(())
}

/// Whether two filters are the same program.
pub(crate) fn same_filter(a: &[libc::sock_filter], b: &[libc::sock_filter]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| (x.code, x.jt, x.jf, x.k) == (y.code, y.jt, y.jf, y.k))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::producers::spawn::ChildSandbox;

    fn network_off() -> ChildSandbox {
        ChildSandbox {
            seccomp: crate::fence::network_off_filter().to_vec(),
            drop_capabilities: rustix::process::geteuid().is_root(),
            ..ChildSandbox::default()
        }
    }

    /// A mount namespace of a child's own, held by a descriptor while the
    /// child waits on its stdin.
    fn namespace() -> (std::process::Child, OwnedFd) {
        let mut cmd = std::process::Command::new("/bin/sh");
        cmd.args(["-c", "read -r _"])
            .stdin(std::process::Stdio::piped());
        // SAFETY: unshare with flags only, in the child before its exec.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
                if libc::unshare(libc::CLONE_NEWNS) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().unwrap();
        let fd = rustix::fs::open(
            format!("/proc/{}/ns/mnt", child.id()),
            rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .unwrap();
        (child, fd)
    }

    #[test]
    fn a_privileged_thread_moves_to_the_namespace_each_job_starts_in() {
        if !rustix::process::geteuid().is_root() {
            return;
        }
        let here = |who: &str| std::fs::read_link(format!("/proc/{who}/ns/mnt")).unwrap();
        let host = here("self");
        let (mut a_child, a) = namespace();
        let (mut b_child, b) = namespace();
        let a_name = here(&a_child.id().to_string());
        let b_name = here(&b_child.id().to_string());
        let thread_host = host.clone();
        std::thread::spawn(move || {
            let host = thread_host;
            take_on_thread(crate::fence::network_off_filter(), true);
            let joins = |fd: &OwnedFd| super::super::ChildSandbox {
                namespace: Some(super::super::Namespace::Mount),
                join_mount: Some(fd.as_raw_fd()),
                ..super::super::ChildSandbox::default()
            };
            let own = super::super::ChildSandbox {
                namespace: Some(super::super::Namespace::Mount),
                ..super::super::ChildSandbox::default()
            };
            let steps: [(Option<&super::super::ChildSandbox>, &std::path::Path, bool); 6] = [
                (Some(&joins(&a)), &a_name, true),
                (Some(&joins(&a)), &a_name, true),
                (Some(&own), &host, false),
                (Some(&joins(&b)), &b_name, true),
                // A namespace the fence made anew: the thread follows.
                (Some(&joins(&a)), &a_name, true),
                (None, &host, false),
            ];
            for (n, (sandbox, name, joined)) in steps.into_iter().enumerate() {
                let taken = enter_mount(sandbox, true).unwrap();
                assert_eq!(taken.in_job_mount, joined, "{n}");
                assert_eq!(here("thread-self"), *name, "{n}");
            }
            // A job that names no directory would start at a root.
            assert!(enter_mount(Some(&joins(&a)), false).is_err());
            assert!(enter_mount(None, false).is_err());
            // Idle, it leaves a job's namespace.
            enter_mount(Some(&joins(&b)), true).unwrap();
            rest();
            assert_eq!(here("thread-self"), host);
        })
        .join()
        .unwrap();
        // The process's other threads never moved.
        assert_eq!(here("thread-self"), host);
        for child in [&mut a_child, &mut b_child] {
            drop(child.stdin.take());
            child.wait().unwrap();
        }
    }

    #[test]
    fn a_thread_in_a_chroot_does_not_move_and_keeps_its_root() {
        if !rustix::process::geteuid().is_root() {
            return;
        }
        let jail = tempfile::tempdir().unwrap();
        let jail_id = rustix::fs::stat(jail.path())
            .map(|st| (st.st_dev, st.st_ino))
            .unwrap();
        std::fs::create_dir(jail.path().join("proc")).unwrap();
        let c =
            |p: &std::path::Path| std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        let (path, proc) = (c(jail.path()), c(&jail.path().join("proc")));
        std::thread::spawn(move || {
            // SAFETY: this thread alone, in a mount namespace of its own,
            // gets `/proc` in the jail and the jail as its root; every
            // pointer is a NUL-terminated string.
            unsafe {
                assert_eq!(libc::unshare(libc::CLONE_FS | libc::CLONE_NEWNS), 0);
                let none = std::ptr::null();
                let private = libc::MS_REC | libc::MS_PRIVATE;
                assert_eq!(
                    libc::mount(none, c"/".as_ptr(), none, private, std::ptr::null()),
                    0
                );
                let bind = libc::MS_BIND | libc::MS_REC;
                assert_eq!(
                    libc::mount(
                        c"/proc".as_ptr(),
                        proc.as_ptr(),
                        none,
                        bind,
                        std::ptr::null()
                    ),
                    0
                );
                assert_eq!(libc::chroot(path.as_ptr()), 0);
            }
            let refused = own_mount_state().err().map(|e| e.to_string());
            assert_eq!(refused.as_deref(), Some("the host runs in a chroot"));
            let root = rustix::fs::stat("/")
                .map(|st| (st.st_dev, st.st_ino))
                .unwrap();
            assert_eq!(root, jail_id);
            assert!(!WRONG_ROOT.with(Cell::get));
            assert!(enter_mount(None, true).is_ok());
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_thread_that_took_the_steps_spawns_only_jobs_that_take_them() {
        let filter = crate::fence::network_off_filter();
        if filter.is_empty() {
            return;
        }
        let root = rustix::process::geteuid().is_root();
        std::thread::spawn(move || {
            assert_eq!(current(), Inherited::default());
            let taken = take_on_thread(filter, root);
            assert_eq!(taken, current());
            assert!(taken.no_new_privs);
            assert_eq!(taken.bounding_set_dropped, root);
            assert!(taken.seccomp.is_some_and(|f| same_filter(f, filter)));
            // The thread itself is fenced: no socket, of any family.
            // SAFETY: a plain socket call; a descriptor it returned is closed.
            let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0) };
            let error = std::io::Error::last_os_error().raw_os_error();
            if fd >= 0 {
                // SAFETY: closing the descriptor just made.
                unsafe { libc::close(fd) };
            }
            assert_eq!((fd, error), (-1, Some(libc::EACCES)));

            assert!(check(taken, Some(&network_off())).is_ok());
            assert!(check(taken, None).is_err());
            let network_on = ChildSandbox {
                seccomp: Vec::new(),
                landlock: Some(3),
                ..network_off()
            };
            assert!(check(taken, Some(&network_on)).is_err());
            let mut other_filter = network_off();
            other_filter.seccomp.pop();
            assert!(check(taken, Some(&other_filter)).is_err());
            if root {
                let keeps_capabilities = ChildSandbox {
                    drop_capabilities: false,
                    ..network_off()
                };
                assert!(check(taken, Some(&keeps_capabilities)).is_err());
            }
        })
        .join()
        .unwrap();
        // Other threads keep their own state.
        assert_eq!(current(), Inherited::default());
        assert!(check(current(), None).is_ok());
    }
}
