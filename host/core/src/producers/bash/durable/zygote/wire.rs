//! The monitors' parent's wire: one request per message on a Unix socket,
//! with the spawn's descriptors attached (`SCM_RIGHTS`), and one reply.
//!
//! ```text
//! one message: the request's bytes, with descriptors attached; the first
//! three are the monitor's stdin, stdout and stderr, and a field that names
//! a descriptor holds its index among them (3 the first after stdio)
//!
//!   number   u64, little-endian; NONE (u64::MAX) where no descriptor is
//!   bytes    number (the length), then the bytes
//!   list     number (the count), then each item
//!   option   number 0, or number 1 then the value
//!
//!   program           bytes
//!   argv, envp        list of bytes
//!   cwd               option of bytes
//!   rlimits           list of (resource, soft, hard) numbers
//!   new_session, new_group            number 0 or 1 each
//!   die_with_parent   number (a pid) or NONE
//!   join_cgroup       option of bytes
//!   close_inherited   number 0 or 1
//!   extra fds         list of indices
//!   sandbox           option of:
//!     namespace kind (0 none, 1 mount, 2 join user, 3 new user), its index or NONE
//!     join_mount index or NONE
//!     mounts          list of (kind 0 read-only|1 hide|2 cover|3 pin, path bytes, flags)
//!     landlock index or NONE
//!     seccomp         list of (code, jt, jf, k) numbers
//!     drop_capabilities number 0 or 1
//!
//! the reply: errno i32 (0: started), pid i32, start time u64, all
//! little-endian, with the monitor's pidfd attached when it started
//! ```
//!
//! A request that does not read back whole, or names a descriptor it did not
//! attach, is refused; a spawn that does not fit (a terminal, too many
//! descriptors, too long) is left to the host.
//!
//! (Over 500 lines: one codec, whose writer and reader mirror each other
//! field by field, so they are read side by side; a third of it is their
//! tests.)

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::producers::spawn::{ChildSandbox, ChildSetup, MountStep, Namespace, Spec};

use super::{MAX_FDS, MAX_REQUEST};

/// One message of `bytes` with `fds` attached.
pub(super) fn send(socket: RawFd, bytes: &[u8], fds: &[RawFd]) -> std::io::Result<()> {
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
pub(super) fn receive(socket: RawFd, buf: &mut [u8]) -> std::io::Result<(usize, Vec<OwnedFd>)> {
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
pub(super) struct Reply {
    pub(super) errno: i32,
    pub(super) pid: i32,
    pub(super) start: u64,
}

impl Reply {
    pub(super) fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(16);
        bytes.extend_from_slice(&self.errno.to_le_bytes());
        bytes.extend_from_slice(&self.pid.to_le_bytes());
        bytes.extend_from_slice(&self.start.to_le_bytes());
        bytes
    }

    pub(super) fn parse(bytes: &[u8]) -> Option<Reply> {
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
pub(super) fn encode(spec: &Spec) -> Option<(Vec<u8>, Vec<RawFd>)> {
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
pub(super) fn decode(bytes: &[u8], fds: Vec<OwnedFd>) -> Option<(Spec, [RawFd; 3], Vec<OwnedFd>)> {
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
        hold: Vec::new(),
        extra_fds,
    };
    Some((spec, stdio, fds.into_iter().flatten().collect()))
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
            hold: Vec::new(),
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
