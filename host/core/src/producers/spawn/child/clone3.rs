//! `clone3` with `CLONE_INTO_CGROUP` (Linux 5.7): the child is made in its
//! job's cgroup, where with `clone` it moves itself there. A move opens and
//! writes `cgroup.procs`, and takes the kernel's cgroup mutex and its lock
//! on every process's cgroup membership for writing, which every `fork` on
//! the machine takes for reading; the child cloned into its cgroup needs
//! the mutex alone (for its fork), and none of the rest. Only on
//! x86-64, the one architecture whose entry is written out here: the C
//! library has no `clone3` that runs a function on a stack of the caller's
//! choosing, so the child's first instructions are ours.

use std::ffi::CStr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicBool, Ordering};

use super::ChildStack;

/// Cleared once the kernel (or a seccomp filter) refuses `clone3` as
/// asked: every later spawn takes `clone`.
static AVAILABLE: AtomicBool = AtomicBool::new(cfg!(target_arch = "x86_64"));

/// Whether spawns still try `clone3`.
#[cfg(test)]
pub(super) fn in_use() -> bool {
    AVAILABLE.load(Ordering::Relaxed)
}

/// The directory of the cgroup whose `cgroup.procs` is `procs`, opened
/// for `clone3`; `None` when `clone3` is not to be tried.
pub(super) fn cgroup_of(procs: &CStr) -> Option<OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    if !AVAILABLE.load(Ordering::Relaxed) {
        return None;
    }
    let dir = procs.to_bytes().strip_suffix(b"/cgroup.procs")?;
    let dir = std::path::Path::new(std::ffi::OsStr::from_bytes(dir));
    // A failure here is the child's to meet and report, writing
    // `cgroup.procs`.
    rustix::fs::open(
        dir,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()
}

/// Clones a child that runs [`super::child_main`] with `arg` on
/// `stack`, sharing our memory until it has exec'd or exited, in the
/// cgroup `cgroup`: its pid, or why there is none (no process could be
/// made), or `None` when the spawn should take `clone`.
///
/// # Safety
///
/// As for `clone(CLONE_VM | CLONE_VFORK)`: `stack` and `arg` stay valid
/// until the child has exec'd or exited, which CLONE_VFORK waits for.
pub(super) unsafe fn clone_into(
    cgroup: &OwnedFd,
    stack: &ChildStack,
    arg: *mut libc::c_void,
) -> Option<std::io::Result<i32>> {
    #[cfg(target_arch = "x86_64")]
    {
        const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;
        // SAFETY: a plain struct of integers, all zero to start.
        let mut args: libc::clone_args = unsafe { std::mem::zeroed() };
        args.flags = (libc::CLONE_VM | libc::CLONE_VFORK) as u64 | CLONE_INTO_CGROUP;
        args.exit_signal = libc::SIGCHLD as u64;
        args.stack = stack.base as u64;
        args.stack_size = stack.len as u64;
        args.cgroup = cgroup.as_raw_fd() as u64;
        let ret: i64;
        // SAFETY: the `clone3` system call. In the parent it returns the
        // pid or -errno in rax and changes nothing else but rcx and r11.
        // The child starts on the top of `stack` (page-aligned, so the
        // `call` leaves it aligned as the ABI wants), with our registers
        // but rax: it calls `child_main(arg)`, which execs or exits and
        // never returns (if it did, the child would exit with its
        // value), so it never comes back into this function.
        unsafe {
            std::arch::asm!(
                "syscall",
                "test rax, rax",
                "jnz 2f",
                "xor ebp, ebp",
                "mov rdi, r12",
                "call r13",
                "mov edi, eax",
                "mov eax, 60",
                "syscall",
                "ud2",
                "2:",
                inlateout("rax") libc::SYS_clone3 => ret,
                in("rdi") &raw mut args,
                in("rsi") std::mem::size_of::<libc::clone_args>(),
                in("r12") arg,
                in("r13") super::child_main as extern "C" fn(*mut libc::c_void) -> libc::c_int,
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack),
            );
        }
        if ret > 0 {
            return Some(Ok(ret as i32));
        }
        let errno = -ret as i32;
        // Resources the spawn would miss either way.
        if matches!(errno, libc::EAGAIN | libc::ENOMEM) {
            return Some(Err(std::io::Error::from_raw_os_error(errno)));
        }
        // An older kernel (ENOSYS, E2BIG, EINVAL), a filter that denies
        // `clone3` (ENOSYS, EPERM): never again. Anything else, a cgroup
        // that cannot take the child, is met by the child writing
        // `cgroup.procs` itself, which says what it is.
        if matches!(
            errno,
            libc::ENOSYS | libc::E2BIG | libc::EINVAL | libc::EPERM
        ) {
            AVAILABLE.store(false, Ordering::Relaxed);
            tracing::debug!("jobs: clone3 into a cgroup refused (errno {errno}); using clone");
        }
        None
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (cgroup, stack, arg);
        None
    }
}
