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
                Err(e) => tracing::warn!(
                    "jobs: a fenced spawner thread cannot join mount namespaces ({e}); its jobs join theirs themselves"
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
/// join a mount namespace, with its way back to the host's.
fn own_mount_state() -> std::io::Result<ThreadMount> {
    let host = rustix::fs::open(
        "/proc/thread-self/ns/mnt",
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    // SAFETY: unshare with flags only. File-system state (root, working
    // directory, umask) is this thread's own from here on: it spawns only
    // jobs, each of which names its directory.
    if unsafe { libc::unshare(libc::CLONE_FS) } != 0 {
        return Err(std::io::Error::last_os_error());
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
/// The thread cannot go back to the host's namespace, or the job names no
/// directory (the namespace's root would be its directory): it must not
/// spawn the job.
pub(crate) fn enter_mount(
    sandbox: Option<&super::ChildSandbox>,
    has_cwd: bool,
) -> std::io::Result<Inherited> {
    let mut inherited = current();
    MOUNT.with(|state| {
        let mut state = state.borrow_mut();
        let Some(state) = state.as_mut() else {
            return Ok(());
        };
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
        if state.current.is_some() && !has_cwd {
            return Err(std::io::Error::other(
                "a job without a directory cannot start from a thread that moved between mount namespaces",
            ));
        }
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
        if state.current.is_some() {
            set_mount_namespace(state.host.as_fd())?;
            state.current = None;
        }
        if !has_cwd {
            return Err(std::io::Error::other(
                "a job without a directory cannot start from a thread that moved between mount namespaces",
            ));
        }
        Ok(())
    })?;
    Ok(inherited)
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
