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
//! taken (see [`super::vfork::enter_forked`]) and runs the monitor in
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

use std::ffi::{CString, OsString};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::vfork::{ChildSandbox, ChildSetup, MountStep, Namespace, Spec, Started};
use crate::sync::lock;

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
    let (stdin_read, stdin_write) = super::vfork::stdin_of(spec).ok()?;
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
        hold: None,
        hold_shared: None,
        extra_fds: vec![theirs],
    };
    let started = super::vfork::spawn(&spec)?;
    let mut hello = [0u8; 16];
    let ready = super::vfork::readable_within(ours.as_fd(), 5_000).unwrap_or(false)
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

/// One message of `bytes` with `fds` attached.
fn send(socket: RawFd, bytes: &[u8], fds: &[RawFd]) -> std::io::Result<()> {
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr().cast_mut().cast(),
        iov_len: bytes.len(),
    };
    let fd_bytes = std::mem::size_of_val(fds) as u32;
    // SAFETY: CMSG_SPACE is arithmetic.
    let mut control = vec![0u8; unsafe { libc::CMSG_SPACE(fd_bytes) } as usize];
    // SAFETY: a zeroed msghdr is a valid empty one.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = control.len();
        // SAFETY: the header's buffer holds one message of `fds`' length.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(fd_bytes) as usize;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr(),
                libc::CMSG_DATA(cmsg).cast::<RawFd>(),
                fds.len(),
            );
        }
    }
    loop {
        // SAFETY: sendmsg with the header built above, whose buffers live.
        let n = unsafe { libc::sendmsg(socket, &msg, libc::MSG_NOSIGNAL) };
        if n >= 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// One message into `buf`: its length (0 at the end of the stream) and the
/// descriptors it carried (close-on-exec). A message cut short (longer
/// than `buf`) is an error.
fn receive(socket: RawFd, buf: &mut [u8]) -> std::io::Result<(usize, Vec<OwnedFd>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: CMSG_SPACE is arithmetic.
    let space = unsafe { libc::CMSG_SPACE((MAX_FDS * std::mem::size_of::<RawFd>()) as u32) };
    let mut control = vec![0u8; space as usize];
    // SAFETY: a zeroed msghdr is a valid empty one.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = control.len();
    let n = loop {
        // SAFETY: recvmsg into the buffers the header names, which live.
        let n = unsafe { libc::recvmsg(socket, &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n >= 0 {
            break n as usize;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    let mut fds = Vec::new();
    // SAFETY: walking the control messages the kernel wrote into `control`.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
                let count =
                    ((*cmsg).cmsg_len - libc::CMSG_LEN(0) as usize) / std::mem::size_of::<RawFd>();
                for i in 0..count {
                    fds.push(OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i))));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    if msg.msg_flags & (libc::MSG_TRUNC | libc::MSG_CTRUNC) != 0 {
        return Err(std::io::Error::other("a message cut short"));
    }
    Ok((n, fds))
}

/// The parent's answer: an errno (0: started), the monitor's pid and start
/// time.
struct Reply {
    errno: i32,
    pid: i32,
    start: u64,
}

impl Reply {
    fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(16);
        bytes.extend_from_slice(&self.errno.to_le_bytes());
        bytes.extend_from_slice(&self.pid.to_le_bytes());
        bytes.extend_from_slice(&self.start.to_le_bytes());
        bytes
    }

    fn parse(bytes: &[u8]) -> Option<Reply> {
        Some(Reply {
            errno: i32::from_le_bytes(bytes.get(0..4)?.try_into().ok()?),
            pid: i32::from_le_bytes(bytes.get(4..8)?.try_into().ok()?),
            start: u64::from_le_bytes(bytes.get(8..16)?.try_into().ok()?),
        })
    }
}

/// Length-prefixed fields, written in order and read back in the same.
#[derive(Default)]
struct Writer(Vec<u8>);

impl Writer {
    fn number(&mut self, n: u64) {
        self.0.extend_from_slice(&n.to_le_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.number(b.len() as u64);
        self.0.extend_from_slice(b);
    }
    fn list<T>(&mut self, items: &[T], mut each: impl FnMut(&mut Writer, &T)) {
        self.number(items.len() as u64);
        for item in items {
            each(self, item);
        }
    }
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn number(&mut self) -> Option<u64> {
        let (head, rest) = self.0.split_at_checked(8)?;
        self.0 = rest;
        Some(u64::from_le_bytes(head.try_into().ok()?))
    }
    fn bytes(&mut self) -> Option<Vec<u8>> {
        let len = usize::try_from(self.number()?).ok()?;
        let (head, rest) = self.0.split_at_checked(len)?;
        self.0 = rest;
        Some(head.to_vec())
    }
    fn string(&mut self) -> Option<CString> {
        CString::new(self.bytes()?).ok()
    }
    fn list<T>(&mut self, mut each: impl FnMut(&mut Self) -> Option<T>) -> Option<Vec<T>> {
        let len = self.number()?;
        // Each item takes at least a byte: a length past what is left is
        // a damaged request, not an allocation.
        if len > self.0.len() as u64 {
            return None;
        }
        (0..len).map(|_| each(self)).collect()
    }
}

/// The number written for "none" where a descriptor's index would be.
const NONE: u64 = u64::MAX;

/// `spec` as one request, with the descriptors its setup names (after the
/// three of stdio, which the caller puts first): `None` when it cannot go
/// through the parent (a terminal, too long).
fn encode(spec: &Spec) -> Option<(Vec<u8>, Vec<RawFd>)> {
    if spec.tty.is_some() {
        return None;
    }
    let mut fds: Vec<RawFd> = Vec::new();
    // Indices count from 3: stdio comes first.
    let mut index = |fd: RawFd| -> u64 {
        fds.push(fd);
        (fds.len() + 2) as u64
    };
    let mut w = Writer::default();
    w.bytes(spec.program.as_bytes());
    w.list(&spec.argv, |w, a| w.bytes(a.as_bytes()));
    w.list(&spec.envp, |w, e| w.bytes(e.as_bytes()));
    match &spec.cwd {
        Some(cwd) => {
            w.number(1);
            w.bytes(cwd.as_bytes());
        }
        None => w.number(0),
    }
    w.list(&spec.rlimits, |w, (resource, soft, hard)| {
        w.number(u64::from(*resource));
        w.number(*soft);
        w.number(*hard);
    });
    let setup = &spec.setup;
    if setup.controlling_terminal {
        return None;
    }
    w.number(u64::from(setup.new_session));
    w.number(u64::from(setup.new_group));
    w.number(setup.die_with_parent.map_or(NONE, |p| p as u64));
    match &setup.join_cgroup {
        Some(procs) => {
            w.number(1);
            w.bytes(procs.as_bytes());
        }
        None => w.number(0),
    }
    w.number(u64::from(setup.close_inherited_fds));
    let extra: Vec<u64> = spec
        .extra_fds
        .iter()
        .map(|fd| index(fd.as_raw_fd()))
        .collect();
    w.list(&extra, |w, i| w.number(*i));
    match &setup.sandbox {
        None => w.number(0),
        Some(sandbox) => {
            w.number(1);
            let (kind, fd) = match sandbox.namespace {
                None => (0, NONE),
                Some(Namespace::Mount) => (1, NONE),
                Some(Namespace::JoinUser(fd)) => (2, index(fd)),
                Some(Namespace::NewUser) => (3, NONE),
            };
            w.number(kind);
            w.number(fd);
            let join_mount = sandbox.join_mount.map_or(NONE, &mut index);
            w.number(join_mount);
            w.list(&sandbox.mounts, |w, step| {
                let (kind, path, flags) = match step {
                    MountStep::ReadOnly { path, flags } => (0, path, *flags),
                    MountStep::Hide { path } => (1, path, 0),
                    MountStep::Cover { path } => (2, path, 0),
                    MountStep::Pin { path } => (3, path, 0),
                };
                w.number(kind);
                w.bytes(path.as_bytes());
                w.number(flags);
            });
            let landlock = sandbox.landlock.map_or(NONE, &mut index);
            w.number(landlock);
            w.list(&sandbox.seccomp, |w, f| {
                w.number(u64::from(f.code));
                w.number(u64::from(f.jt));
                w.number(u64::from(f.jf));
                w.number(u64::from(f.k));
            });
            w.number(u64::from(sandbox.drop_capabilities));
        }
    }
    if w.0.len() > MAX_REQUEST || fds.len() + 3 > MAX_FDS {
        return None;
    }
    Some((w.0, fds))
}

/// A request read back: the spec (its descriptors' numbers those of
/// `fds`, which it keeps) and its stdio.
fn decode(bytes: &[u8], fds: Vec<OwnedFd>) -> Option<(Spec, [RawFd; 3], Vec<OwnedFd>)> {
    let mut r = Reader(bytes);
    let raw: Vec<RawFd> = fds.iter().map(AsRawFd::as_raw_fd).collect();
    if raw.len() < 3 {
        return None;
    }
    let fd_at = |i: u64| -> Option<RawFd> { raw.get(usize::try_from(i).ok()?).copied() };
    let flag = |n: u64| n != 0;
    let program = r.string()?;
    let argv = r.list(Reader::string)?;
    let envp = r.list(Reader::string)?;
    let cwd = match r.number()? {
        0 => None,
        _ => Some(r.string()?),
    };
    let rlimits = r.list(|r| {
        Some((
            libc::__rlimit_resource_t::try_from(r.number()?).ok()?,
            r.number()?,
            r.number()?,
        ))
    })?;
    let new_session = flag(r.number()?);
    let new_group = flag(r.number()?);
    let die_with_parent = match r.number()? {
        NONE => None,
        pid => Some(libc::pid_t::try_from(pid).ok()?),
    };
    let join_cgroup = match r.number()? {
        0 => None,
        _ => Some(r.string()?),
    };
    let close_inherited_fds = flag(r.number()?);
    let extra_at = r.list(Reader::number)?;
    let sandbox = match r.number()? {
        0 => None,
        _ => {
            let kind = r.number()?;
            let fd = r.number()?;
            let namespace = match kind {
                0 => None,
                1 => Some(Namespace::Mount),
                2 => Some(Namespace::JoinUser(fd_at(fd)?)),
                3 => Some(Namespace::NewUser),
                _ => return None,
            };
            let join_mount = match r.number()? {
                NONE => None,
                i => Some(fd_at(i)?),
            };
            let mounts = r.list(|r| {
                let kind = r.number()?;
                let path = r.string()?;
                let flags = r.number()?;
                Some(match kind {
                    0 => MountStep::ReadOnly { path, flags },
                    1 => MountStep::Hide { path },
                    2 => MountStep::Cover { path },
                    3 => MountStep::Pin { path },
                    _ => return None,
                })
            })?;
            let landlock = match r.number()? {
                NONE => None,
                i => Some(fd_at(i)?),
            };
            let seccomp = r.list(|r| {
                Some(libc::sock_filter {
                    code: u16::try_from(r.number()?).ok()?,
                    jt: u8::try_from(r.number()?).ok()?,
                    jf: u8::try_from(r.number()?).ok()?,
                    k: u32::try_from(r.number()?).ok()?,
                })
            })?;
            let drop_capabilities = flag(r.number()?);
            Some(ChildSandbox {
                namespace,
                join_mount,
                mounts,
                landlock,
                seccomp,
                drop_capabilities,
            })
        }
    };
    if !r.0.is_empty() {
        return None;
    }
    let mut fds: Vec<Option<OwnedFd>> = fds.into_iter().map(Some).collect();
    let extra_fds = extra_at
        .iter()
        .map(|i| fds.get_mut(usize::try_from(*i).ok()?)?.take())
        .collect::<Option<Vec<OwnedFd>>>()?;
    let stdio = [raw[0], raw[1], raw[2]];
    let spec = Spec {
        program,
        argv,
        envp,
        cwd,
        open_stdin: false,
        tty: None,
        rlimits,
        setup: ChildSetup {
            new_session,
            controlling_terminal: false,
            new_group,
            die_with_parent,
            join_cgroup,
            close_inherited_fds,
            sandbox,
        },
        hold: None,
        hold_shared: None,
        extra_fds,
    };
    Some((spec, stdio, fds.into_iter().flatten().collect()))
}

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
    let start = super::process_start_time(pid).unwrap_or(0);
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
    if let Err(errno) = super::vfork::enter_forked(spec, stdio, spec_status) {
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
    std::process::exit(super::run_monitor(&args))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn null() -> OwnedFd {
        OwnedFd::from(std::fs::File::open("/dev/null").unwrap())
    }

    /// The descriptors a request carries as the parent receives them (other
    /// numbers than the host's): stdio, then those `encode` listed.
    fn received(listed: &[RawFd]) -> Vec<OwnedFd> {
        (0..3 + listed.len()).map(|_| null()).collect()
    }

    fn raw(fds: &[OwnedFd]) -> Vec<RawFd> {
        fds.iter().map(AsRawFd::as_raw_fd).collect()
    }

    /// A monitor's spawn with every part the request carries.
    fn sample(extra: Vec<OwnedFd>, user: RawFd, landlock: RawFd) -> Spec {
        Spec {
            program: c"/usr/libexec/jobs-host-monitor".to_owned(),
            argv: vec![c"jobs-host-monitor".to_owned(), c"monitor-2".to_owned()],
            envp: vec![c"PATH=/bin".to_owned(), c"EMPTY=".to_owned()],
            cwd: Some(c"/work".to_owned()),
            open_stdin: false,
            tty: None,
            rlimits: vec![(libc::RLIMIT_NOFILE, 1024, 4096)],
            setup: ChildSetup {
                new_session: true,
                new_group: false,
                die_with_parent: Some(77),
                join_cgroup: Some(c"/sys/fs/cgroup/jobs/job-1/cgroup.procs".to_owned()),
                close_inherited_fds: true,
                sandbox: Some(ChildSandbox {
                    namespace: Some(Namespace::JoinUser(user)),
                    join_mount: None,
                    mounts: vec![
                        MountStep::ReadOnly {
                            path: c"/".to_owned(),
                            flags: 7,
                        },
                        MountStep::Hide {
                            path: c"/root/.local/state".to_owned(),
                        },
                    ],
                    landlock: Some(landlock),
                    seccomp: vec![libc::sock_filter {
                        code: 6,
                        jt: 1,
                        jf: 2,
                        k: 0x7fff_0000,
                    }],
                    drop_capabilities: true,
                }),
                ..Default::default()
            },
            hold: None,
            hold_shared: None,
            extra_fds: extra,
        }
    }

    #[test]
    fn a_request_reads_back_as_the_spawn_it_was() {
        let (user, landlock) = (null(), null());
        let extra = vec![null(), null(), null()];
        let sent_extra = raw(&extra);
        let spec = sample(extra, user.as_raw_fd(), landlock.as_raw_fd());
        let (bytes, listed) = encode(&spec).unwrap();
        // The extra descriptors in order, then those the sandbox names.
        let mut expected = sent_extra.clone();
        expected.extend([user.as_raw_fd(), landlock.as_raw_fd()]);
        assert_eq!(listed, expected);

        let got = received(&listed);
        let at = raw(&got);
        let (back, stdio, kept) = decode(&bytes, got).unwrap();
        assert_eq!(stdio, [at[0], at[1], at[2]]);
        assert_eq!(back.program, spec.program);
        assert_eq!(back.argv, spec.argv);
        assert_eq!(back.envp, spec.envp);
        assert_eq!(back.cwd, spec.cwd);
        assert_eq!(back.rlimits, spec.rlimits);
        assert!(back.setup.new_session && !back.setup.new_group);
        assert!(!back.setup.controlling_terminal && back.setup.close_inherited_fds);
        assert_eq!(back.setup.die_with_parent, Some(77));
        assert_eq!(back.setup.join_cgroup, spec.setup.join_cgroup);
        // Each descriptor is the parent's own copy, by its place.
        assert_eq!(raw(&back.extra_fds), at[3..6]);
        let sandbox = back.setup.sandbox.unwrap();
        assert!(matches!(sandbox.namespace, Some(Namespace::JoinUser(fd)) if fd == at[6]));
        assert_eq!(sandbox.join_mount, None);
        assert_eq!(sandbox.landlock, Some(at[7]));
        assert_eq!(sandbox.mounts, spec.setup.sandbox.as_ref().unwrap().mounts);
        let filter = sandbox.seccomp[..]
            .iter()
            .map(|f| (f.code, f.jt, f.jf, f.k))
            .collect::<Vec<_>>();
        assert_eq!(filter, [(6, 1, 2, 0x7fff_0000)]);
        assert!(sandbox.drop_capabilities);
        // What the spec does not own stays open with the request.
        assert_eq!(raw(&kept), [at[0], at[1], at[2], at[6], at[7]]);
    }

    #[test]
    fn a_damaged_request_is_refused() {
        let (user, landlock) = (null(), null());
        let spec = sample(vec![null()], user.as_raw_fd(), landlock.as_raw_fd());
        let (bytes, listed) = encode(&spec).unwrap();
        assert!(decode(&bytes, received(&listed)).is_some());
        // Cut anywhere, or with a byte more.
        for cut in 0..bytes.len() {
            assert!(
                decode(&bytes[..cut], received(&listed)).is_none(),
                "cut at {cut}"
            );
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(&longer, received(&listed)).is_none());
        // Fewer descriptors than it names.
        for short in 0..3 + listed.len() {
            let fds = (0..short).map(|_| null()).collect();
            assert!(decode(&bytes, fds).is_none(), "{short} descriptors");
        }
        // A list that claims more items than there are bytes: refused
        // before anything is allocated for it.
        let mut huge = Writer::default();
        huge.bytes(b"/bin/monitor");
        huge.number(u64::MAX / 2);
        assert!(decode(&huge.0, received(&[])).is_none());
        // A number past its field's range: the filter's last `k`, just
        // before the closing flag.
        let mut wide = bytes.clone();
        let end = wide.len();
        wide[end - 16..end - 8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(decode(&wide, received(&listed)).is_none());
    }

    #[test]
    fn a_terminal_or_an_oversized_spawn_is_left_to_the_host() {
        let mut spec = sample(Vec::new(), 10, 11);
        spec.setup.controlling_terminal = true;
        assert!(encode(&spec).is_none());
        let mut spec = sample(Vec::new(), 10, 11);
        spec.envp
            .push(CString::new(format!("BIG={}", "x".repeat(MAX_REQUEST))).unwrap());
        assert!(encode(&spec).is_none());
        let spec = sample((0..MAX_FDS).map(|_| null()).collect(), 10, 11);
        assert!(encode(&spec).is_none());
    }
}
