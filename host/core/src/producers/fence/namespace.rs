//! Mount namespaces for the protected paths, inside a user namespace when
//! the host is unprivileged: how jobs get one (probed once with a real
//! spawn), the short-lived children that make and hold them, and the shared
//! namespace jobs join while its mount steps and their files are unchanged.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::producers::spawn::{ChildSandbox, MountStep, Namespace};
use crate::sync::lock;

use super::Fence;

/// How jobs get a mount namespace of their own, if they can: the host's
/// own right to mount, or a user namespace the host made once (mapping its
/// uid and gid to themselves) that each job joins. Probed with one real
/// spawn of `shell`.
pub(super) fn job_namespace(shell: &Path) -> Option<JobNamespace> {
    let namespace = if rustix::process::geteuid().is_root() {
        JobNamespace::Mount
    } else {
        match user_namespace(shell) {
            Ok(fd) => JobNamespace::User(fd),
            Err(e) => {
                tracing::info!("jobs: no user namespace for jobs: {e}");
                return None;
            }
        }
    };
    let probe = ChildSandbox {
        namespace: Some(namespace.for_child()),
        ..ChildSandbox::default()
    };
    match run_briefly(shell, "exit 0", probe) {
        Ok(()) => Some(namespace),
        Err(e) => {
            tracing::info!("jobs: no mount namespace for jobs: {e}");
            None
        }
    }
}

/// A job's way into a mount namespace of its own (see [`job_namespace`]).
pub(super) enum JobNamespace {
    Mount,
    User(OwnedFd),
}

impl JobNamespace {
    pub(super) fn for_child(&self) -> Namespace {
        match self {
            JobNamespace::Mount => Namespace::Mount,
            JobNamespace::User(fd) => Namespace::JoinUser(fd.as_raw_fd()),
        }
    }
}

/// A user namespace owned by the host's uid, mapping it and its gid to
/// themselves: made by a short-lived child, which the host can map only once
/// it has exec'd (before, it shares the host's undumpable memory, so its
/// `/proc` files are root's), and kept by a descriptor after it is gone.
pub(super) fn user_namespace(shell: &Path) -> std::io::Result<OwnedFd> {
    let make = ChildSandbox {
        namespace: Some(Namespace::NewUser),
        ..ChildSandbox::default()
    };
    // The shell says it runs, then waits on its stdin (a pipe held below)
    // with a builtin.
    let started = spawn_briefly(shell, "echo; read -r _", make)?;
    let pid = started.pid;
    let result = (|| {
        let (uid, gid) = (
            rustix::process::geteuid().as_raw(),
            rustix::process::getegid().as_raw(),
        );
        let proc = PathBuf::from(format!("/proc/{pid}"));
        // The spawn returns while the kernel may still be finishing the
        // exec (until it has, the child's `/proc` files are not ours to
        // write); its first line says the shell runs.
        wait_for_line(&started.stdout)?;
        std::fs::write(proc.join("setgroups"), "deny")?;
        std::fs::write(proc.join("uid_map"), format!("{uid} {uid} 1\n"))?;
        std::fs::write(proc.join("gid_map"), format!("{gid} {gid} 1\n"))?;
        let ns = std::fs::File::open(proc.join("ns/user"))?;
        Ok(OwnedFd::from(ns))
    })();
    end_briefly(pid);
    result
}

/// Blocks until `fd` (a non-blocking pipe's read end) has a byte to read,
/// for at most 10 s.
pub(super) fn wait_for_line(fd: &OwnedFd) -> std::io::Result<()> {
    if crate::producers::spawn::readable_within(fd.as_fd(), 10_000)? {
        Ok(())
    } else {
        Err(std::io::Error::other("the namespace child did not start"))
    }
}

/// Spawns `shell -c script` entering `sandbox` (and nothing else of a job's
/// setup but its death with the host).
pub(super) fn spawn_briefly(
    shell: &Path,
    script: &str,
    sandbox: ChildSandbox,
) -> std::io::Result<crate::producers::spawn::Started> {
    let program = CString::new(shell.as_os_str().as_bytes())?;
    let spec = crate::producers::spawn::Spec {
        argv: vec![program.clone(), c"-c".to_owned(), CString::new(script)?],
        program,
        envp: Vec::new(),
        cwd: None,
        // A pipe the caller holds: `read` waits on it until it is closed.
        open_stdin: true,
        tty: None,
        rlimits: Vec::new(),
        setup: crate::producers::spawn::ChildSetup {
            // Its own process group, away from the host's.
            new_session: true,
            close_inherited_fds: true,
            die_with_parent: Some(std::process::id() as libc::pid_t),
            sandbox: Some(sandbox),
            ..Default::default()
        },
        hold: Vec::new(),
        extra_fds: Vec::new(),
    };
    // Recorded as a leader, so no fallback-mode sweep of orphans (another
    // producer's, in the same process) reaps it before its pidfd is open or
    // while it is asked for its namespace.
    crate::containment::start_leader(|| crate::producers::spawn::spawn(&spec), |s| s.pid)
}

/// A mount namespace with `mounts` taken, for jobs to join (one per set of
/// protected paths, instead of one per job): made by a short-lived child
/// entering `namespace`, kept by a descriptor after it is gone.
pub(super) fn shared_mounts(
    shell: &Path,
    namespace: Namespace,
    mounts: &[MountStep],
) -> std::io::Result<OwnedFd> {
    let make = ChildSandbox {
        namespace: Some(namespace),
        mounts: mounts.to_vec(),
        ..ChildSandbox::default()
    };
    let started = spawn_briefly(shell, "read -r _", make)?;
    let pid = started.pid;
    let ns = std::fs::File::open(format!("/proc/{pid}/ns/mnt")).map(OwnedFd::from);
    end_briefly(pid);
    ns
}

/// Whether a child can enter `sandbox` and exec `shell -c script`: the spawn
/// reports any step of the child's setup that failed before the exec, so its
/// success is the answer. The child is then killed and reaped.
pub(super) fn run_briefly(
    shell: &Path,
    script: &str,
    sandbox: ChildSandbox,
) -> std::io::Result<()> {
    let started = spawn_briefly(shell, script, sandbox)?;
    end_briefly(started.pid);
    Ok(())
}

/// Kills and reaps a short-lived child of [`spawn_briefly`].
pub(super) fn end_briefly(pid: libc::pid_t) {
    // SAFETY: kill and reap our own child.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, std::ptr::null_mut(), 0);
    }
    crate::containment::remove_leader(pid as u32);
}

/// A mount namespace jobs join: the steps it was made with, and the file
/// each step's path named then (device and inode). A file replaced since (git
/// writes `config` anew and renames it into place) is no longer covered by
/// the bind, so the namespace is made again.
pub(super) struct SharedMounts {
    pub(super) steps: Vec<MountStep>,
    pub(super) files: Vec<Option<(u64, u64)>>,
    pub(super) fd: std::sync::Arc<OwnedFd>,
}

pub(super) fn file_id(step: &MountStep) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let path = match step {
        MountStep::ReadOnly { path, .. }
        | MountStep::Hide { path }
        | MountStep::Cover { path }
        | MountStep::Pin { path } => path,
    };
    let meta = std::fs::symlink_metadata(std::ffi::OsStr::from_bytes(path.as_bytes())).ok()?;
    Some((meta.dev(), meta.ino()))
}

impl Fence {
    /// The shared mount namespace for `mounts` (made when the set changes);
    /// `None` when it cannot be made, and the job then makes its own.
    pub(super) fn mount_namespace(
        &self,
        namespace: &JobNamespace,
        mounts: &[MountStep],
    ) -> Option<std::sync::Arc<OwnedFd>> {
        let mut shared = lock(&self.mount_ns);
        let files: Vec<Option<(u64, u64)>> = mounts.iter().map(file_id).collect();
        if let Some(current) = shared.as_ref()
            && current.steps == mounts
            && current.files == files
        {
            return Some(current.fd.clone());
        }
        match shared_mounts(&self.shell, namespace.for_child(), mounts) {
            Ok(fd) => {
                let fd = std::sync::Arc::new(fd);
                *shared = Some(SharedMounts {
                    steps: mounts.to_vec(),
                    files,
                    fd: fd.clone(),
                });
                Some(fd)
            }
            Err(e) => {
                tracing::info!("jobs: no shared mount namespace, each job makes its own: {e}");
                None
            }
        }
    }
}
