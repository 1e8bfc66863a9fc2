//! The monitors' parent: one process per host, exec'd once, that forks a
//! durable job's monitor where the host would otherwise exec one per job.
//!
//! A monitor exec'd per job costs as much as the job itself (the kernel's
//! exec, the dynamic loader, the C library's start). Forked from a small
//! single-threaded process that has done all that once, it costs a fork.
//! The host sends the monitor's spawn (the same [`Spec`] it would have
//! spawned: program, arguments, environment, directory, limits, the job's
//! setup with its sandbox) over a socket with its descriptors; the parent
//! forks, the child takes every step of the setup the spawn would have
//! taken (see [`crate::producers::spawn::enter_forked`]) and runs the monitor in
//! place; the parent answers once the setup is done, with the monitor's
//! pid, start time and a pidfd, or the errno of the step that failed.
//!
//! The parent is the host's child and exits when the host's end of the
//! socket closes (the host gone, by any exit), so its monitors see their
//! parent go, as they see the host go without it. It reaps its monitors;
//! the host, not their parent, learns of their end through their pidfd and
//! their job's file.
//!
//! Anything the parent cannot do (it is not running, a request too large
//! for one message) leaves the spawn to the host, as before.
//!
//! Here the host's side (starting the parent, one exchange per spawn);
//! `wire` the request's codec and the descriptor passing; `parent` the
//! parent process itself.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::producers::spawn::{ChildSetup, Spec, Started};
use crate::sync::lock;

mod parent;
mod wire;

pub use parent::run_zygote;
use wire::{Reply, encode, receive, send};

/// The subcommand a monitor binary runs the monitors' parent under.
pub const ZYGOTE_COMMAND: &str = "zygote-1";

/// The parent's end of its socket.
const SOCKET: RawFd = 3;

/// No request is longer: one message on the socket. A longer one (a very
/// long command or environment) is spawned by the host itself.
const MAX_REQUEST: usize = 96 << 10;

/// The most descriptors one request carries.
const MAX_FDS: usize = 16;

/// What the parent says once it is ready.
const READY: &[u8] = b"ready";

/// The host's connection to its monitors' parent.
struct Parent {
    monitor: PathBuf,
    socket: OwnedFd,
    /// To reap it once it is gone.
    pidfd: OwnedFd,
}

/// The monitors' parent, per monitor program: `None` once it could not be
/// started (it is not tried again).
static PARENT: Mutex<Option<Result<Parent, PathBuf>>> = Mutex::new(None);

/// A monitor's spawn through the monitors' parent: `None` when it cannot
/// take it (the host then spawns the monitor itself), else the monitor
/// started, with its start time, or the errno of the setup step that
/// failed.
pub(crate) fn spawn(monitor: &Path, spec: &Spec) -> Option<std::io::Result<(Started, u64)>> {
    let (request, fds) = encode(spec)?;
    let pipe = || rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).ok();
    let (out_read, out_write) = pipe()?;
    let (err_read, err_write) = pipe()?;
    let (stdin_read, stdin_write) = crate::producers::spawn::stdin_of(spec).ok()?;
    let mut sent: Vec<RawFd> = vec![
        stdin_read.as_raw_fd(),
        out_write.as_raw_fd(),
        err_write.as_raw_fd(),
    ];
    sent.extend(fds);
    let mut slot = lock(&PARENT);
    let answer = {
        let parent = connected(&mut slot, monitor)?;
        exchange(&parent.socket, &request, &sent)
    };
    drop((out_write, err_write, stdin_read));
    let (reply, pidfd) = match answer {
        Ok(answer) => answer,
        Err(failure) => {
            // The parent is gone: the next spawn starts another.
            tracing::warn!("jobs: the monitors' parent is gone ({failure}); starting another");
            if let Some(Ok(parent)) = slot.take() {
                // Reaped for sure: its socket can say it is gone before it
                // is a zombie, and one left unreaped would be first in line
                // for every pass of the producer's reaper.
                let _ = rustix::process::pidfd_send_signal(
                    &parent.pidfd,
                    rustix::process::Signal::KILL,
                );
                let _ = rustix::process::waitid(
                    rustix::process::WaitId::PidFd(std::os::fd::AsFd::as_fd(&parent.pidfd)),
                    rustix::process::WaitIdOptions::EXITED,
                );
            }
            return match failure {
                // It never had the request: the host spawns the monitor.
                Failure::Unsent(_) => None,
                // It may have started the monitor before it went: starting
                // another would run the job twice.
                Failure::Unanswered(e) => Some(Err(e)),
            };
        }
    };
    drop(slot);
    let unexpected = || std::io::Error::from_raw_os_error(libc::EPROTO);
    let Some(reply) = Reply::parse(&reply) else {
        return Some(Err(unexpected()));
    };
    if reply.errno != 0 {
        return Some(Err(std::io::Error::from_raw_os_error(reply.errno)));
    }
    let Some(pidfd) = pidfd else {
        return Some(Err(unexpected()));
    };
    for fd in [&out_read, &err_read] {
        let _ = rustix::io::ioctl_fionbio(fd, true);
    }
    Some(Ok((
        Started {
            pid: reply.pid,
            pidfd: Some(pidfd),
            stdout: out_read,
            stderr: Some(err_read),
            stdin: stdin_write,
        },
        reply.start,
    )))
}

/// The parent for `monitor`, started if it is not running yet; `None` if
/// it cannot be.
fn connected<'a>(
    slot: &'a mut Option<Result<Parent, PathBuf>>,
    monitor: &Path,
) -> Option<&'a Parent> {
    let stale = match slot {
        Some(Ok(parent)) => parent.monitor != monitor,
        Some(Err(failed)) => failed != monitor,
        None => true,
    };
    if stale {
        *slot = Some(start(monitor).map_err(|e| {
            tracing::warn!("jobs: no monitors' parent ({e}): each monitor is exec'd");
            monitor.to_owned()
        }));
    }
    slot.as_ref()?.as_ref().ok()
}

/// Starts the monitors' parent and waits for it to say it is ready.
fn start(monitor: &Path) -> std::io::Result<Parent> {
    use std::os::unix::ffi::OsStrExt;
    let mut fds = [0; 2];
    // SAFETY: socketpair into an array of two.
    if unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    } < 0
    {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the two descriptors just made, ours alone.
    let (ours, theirs) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let spec = Spec {
        program: CString::new(monitor.as_os_str().as_bytes())?,
        argv: vec![
            c"jobs-host-monitor".to_owned(),
            CString::new(ZYGOTE_COMMAND)?,
        ],
        envp: Vec::new(),
        cwd: Some(c"/".to_owned()),
        open_stdin: false,
        tty: None,
        rlimits: Vec::new(),
        setup: ChildSetup {
            // Away from the host's group and terminal: no signal of the
            // host's session reaches it.
            new_session: true,
            close_inherited_fds: true,
            ..Default::default()
        },
        hold: Vec::new(),
        extra_fds: vec![theirs],
    };
    let started = crate::producers::spawn::spawn(&spec)?;
    let mut hello = [0u8; 16];
    let ready = crate::producers::spawn::readable_within(ours.as_fd(), 5_000).unwrap_or(false)
        // SAFETY: a read into a buffer of its length.
        && unsafe { libc::read(ours.as_raw_fd(), hello.as_mut_ptr().cast(), hello.len()) }
            == READY.len() as isize
        && &hello[..READY.len()] == READY;
    let Some(pidfd) = started.pidfd else {
        return Err(std::io::Error::other("it has no pidfd"));
    };
    if !ready {
        let _ = rustix::process::pidfd_send_signal(&pidfd, rustix::process::Signal::KILL);
        let _ = rustix::process::waitid(
            rustix::process::WaitId::PidFd(std::os::fd::AsFd::as_fd(&pidfd)),
            rustix::process::WaitIdOptions::EXITED,
        );
        return Err(std::io::Error::other("it did not say it was ready"));
    }
    Ok(Parent {
        monitor: monitor.to_owned(),
        socket: ours,
        pidfd,
    })
}

/// Why an exchange with the parent failed.
#[derive(Debug, thiserror::Error)]
enum Failure {
    /// The request was not sent.
    #[error("{0}")]
    Unsent(std::io::Error),
    /// The request was sent, but no answer came.
    #[error("{0}")]
    Unanswered(std::io::Error),
}

/// Sends `request` with `fds`, and reads the answer, with the pidfd it
/// carries if any.
fn exchange(
    socket: &OwnedFd,
    request: &[u8],
    fds: &[RawFd],
) -> Result<(Vec<u8>, Option<OwnedFd>), Failure> {
    send(socket.as_raw_fd(), request, fds).map_err(Failure::Unsent)?;
    let mut reply = vec![0u8; 64];
    let (n, mut got) = receive(socket.as_raw_fd(), &mut reply).map_err(Failure::Unanswered)?;
    if n == 0 {
        return Err(Failure::Unanswered(std::io::Error::from_raw_os_error(
            libc::EPIPE,
        )));
    }
    reply.truncate(n);
    Ok((reply, got.pop()))
}
