//! The monitors' parent process: it waits for requests on its socket,
//! forks each monitor, lets the child take the spawn's setup, and answers
//! once the setup is done; it reaps its monitors and exits when the host's
//! end of the socket closes.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStringExt;

use crate::producers::spawn::Spec;

use super::wire::{Reply, decode, receive, send};
use super::{MAX_REQUEST, READY, SOCKET};

/// Runs the monitors' parent (descriptor 3 is its socket to the host):
/// answers each request until the host's end closes, then exits 0.
pub fn run_zygote() -> i32 {
    // SAFETY: plain prctls and fcntls with integer arguments.
    unsafe {
        libc::prctl(libc::PR_SET_NAME, c"jobs-monitors".as_ptr());
        // Nothing of a job may read its memory or trace it.
        libc::prctl(libc::PR_SET_DUMPABLE, 0);
        libc::fcntl(SOCKET, libc::F_SETFD, libc::FD_CLOEXEC);
    }
    if send(SOCKET, READY, &[]).is_err() {
        return 1;
    }
    let mut buf = vec![0u8; MAX_REQUEST + 1];
    loop {
        reap_monitors();
        let mut poll = [libc::pollfd {
            fd: SOCKET,
            events: libc::POLLIN,
            revents: 0,
        }];
        // SAFETY: poll on our socket; a second at most, to reap meanwhile.
        match unsafe { libc::poll(poll.as_mut_ptr(), 1, 1_000) } {
            0 => continue,
            n if n < 0 => {
                if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return 1;
            }
            _ => {}
        }
        let (n, fds) = match receive(SOCKET, &mut buf) {
            Ok((0, _)) => return 0,
            Ok(got) => got,
            Err(_) => {
                // A request it cannot read is answered as one it cannot
                // run; the host's end gone ends it.
                if send(SOCKET, &failed(libc::EINVAL), &[]).is_err() {
                    return 0;
                }
                continue;
            }
        };
        let (reply, pidfd) = match decode(&buf[..n], fds) {
            Some((spec, stdio, _kept)) => fork_monitor(&spec, stdio),
            None => (failed(libc::EINVAL), None),
        };
        let sent: Vec<RawFd> = pidfd.iter().map(AsRawFd::as_raw_fd).collect();
        if send(SOCKET, &reply, &sent).is_err() {
            return 0;
        }
    }
}

fn failed(errno: i32) -> Vec<u8> {
    Reply {
        errno,
        pid: 0,
        start: 0,
    }
    .to_bytes()
}

/// Reaps every monitor that ended.
fn reap_monitors() {
    // SAFETY: waitpid with no status pointer, not blocking.
    while unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) } > 0 {}
}

/// Forks the monitor of `spec` and waits until its setup is done: the
/// answer, with its pidfd when it started.
fn fork_monitor(spec: &Spec, stdio: [RawFd; 3]) -> (Vec<u8>, Option<OwnedFd>) {
    let Ok((status_read, status_write)) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
    else {
        return (failed(libc::EMFILE), None);
    };
    // The monitor's own arguments, after the binary's name and subcommand.
    let args: Vec<OsString> = spec
        .argv
        .iter()
        .skip(2)
        .map(|a| OsString::from_vec(a.as_bytes().to_vec()))
        .collect();
    // SAFETY: fork of this single-threaded process; the child runs on.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return (
            failed(
                std::io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EAGAIN),
            ),
            None,
        );
    }
    if pid == 0 {
        drop(status_read);
        become_monitor(spec, stdio, status_write, args);
    }
    drop(status_write);
    let mut errno = [0u8; 4];
    let got = loop {
        // SAFETY: a read into a buffer of its length.
        let n = unsafe { libc::read(status_read.as_raw_fd(), errno.as_mut_ptr().cast(), 4) };
        if n >= 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            break n;
        }
    };
    if got == 4 {
        // SAFETY: waitpid of our own child, which has exited or is exiting.
        unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
        return (failed(i32::from_le_bytes(errno).max(1)), None);
    }
    // Not reaped before this (only the loop reaps): the pid is the child's.
    let pidfd = match rustix::process::pidfd_open(
        rustix::process::Pid::from_raw(pid).expect("a child's pid"),
        rustix::process::PidfdFlags::empty(),
    ) {
        Ok(pidfd) => pidfd,
        Err(e) => {
            // SAFETY: kill and waitpid of our own child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, std::ptr::null_mut(), 0);
            }
            return (failed(e.raw_os_error()), None);
        }
    };
    let start = crate::producers::bash::process_start_time(pid).unwrap_or(0);
    (
        Reply {
            errno: 0,
            pid,
            start,
        }
        .to_bytes(),
        Some(pidfd),
    )
}

/// The forked child: the spawn's setup, then the monitor, never returning.
fn become_monitor(spec: &Spec, stdio: [RawFd; 3], status: OwnedFd, args: Vec<OsString>) -> ! {
    // The parent's socket is not the monitor's.
    // SAFETY: close of a number; ours.
    unsafe { libc::close(SOCKET) };
    let status_fd = status.as_raw_fd();
    // Kept out of the way of the descriptors the setup places (0 to 5).
    // SAFETY: fcntl on a descriptor we own.
    let status_fd = unsafe { libc::fcntl(status_fd, libc::F_DUPFD_CLOEXEC, 64) };
    drop(status);
    let fail = |errno: i32| -> ! {
        let bytes = errno.to_le_bytes();
        // SAFETY: a write of four bytes to the status pipe, then _exit.
        unsafe {
            libc::write(status_fd, bytes.as_ptr().cast(), 4);
            libc::_exit(127)
        }
    };
    if status_fd < 0 {
        fail(libc::EMFILE);
    }
    let spec_status = status_fd;
    if let Err(errno) = crate::producers::spawn::enter_forked(spec, stdio, spec_status) {
        fail(errno);
    }
    // The job's environment, the monitor's: its leader gets it.
    // SAFETY: this process is single-threaded; the strings are leaked, so
    // they live as long as the environment names them.
    unsafe {
        libc::clearenv();
        for entry in &spec.envp {
            libc::putenv(entry.clone().into_raw());
        }
    }
    // The setup is done: the parent answers the host.
    // SAFETY: close of the status pipe, ours.
    unsafe { libc::close(spec_status) };
    let mut args = args;
    if let Some(parent) = args.first_mut() {
        // The monitor's parent is this process's: it goes with the host.
        // SAFETY: getppid takes no arguments.
        *parent = unsafe { libc::getppid() }.to_string().into();
    }
    std::process::exit(crate::producers::bash::run_monitor(&args))
}
