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

use std::cell::Cell;

/// The steps a thread has taken on itself for good.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Inherited {
    /// The capability bounding set is empty.
    pub bounding_set_dropped: bool,
    /// `no_new_privs` is set.
    pub no_new_privs: bool,
    /// This seccomp filter is loaded.
    pub seccomp: Option<&'static [libc::sock_filter]>,
}

thread_local! {
    static THREAD: Cell<Inherited> = const { Cell::new(Inherited {
        bounding_set_dropped: false,
        no_new_privs: false,
        seccomp: None,
    }) };
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
