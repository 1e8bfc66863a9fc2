//! The job sandbox ("fence"): what a job may read, write, reach on the network
//! and signal, enforced in the job's own setup between the clone and the exec
//! (see [`crate::bash`]'s child setup), with no privilege. The only other
//! processes are short-lived children the host makes once to create the
//! namespaces jobs join.
//!
//! - **Files: Landlock.** Landlock rules are allow-lists over hierarchies, so
//!   "read everything except the host's private directories, other jobs'
//!   temporary directories and `/dev`" is built by walking down to each
//!   excepted path and granting, in every directory on the way, each entry
//!   but the one on the path; the usual devices are granted by name. Listing
//!   any directory stays allowed (names, not contents). Writes are granted on
//!   the job's workdir, its own fresh temporary directory (its `TMPDIR`) and
//!   the operator's paths. A writable root that holds or lies inside one of
//!   the host's private directories is refused.
//! - **Paths no allow-list can carve out of a writable tree** (the `.git`
//!   directory of every repository under a writable root, and the shell rc
//!   files of `$HOME`) and **the user's services** (`$XDG_RUNTIME_DIR` with
//!   D-Bus, X11's and tmux's sockets, Docker's): a mount namespace, inside a
//!   user namespace when the host is unprivileged, binds the former read-only
//!   (a bind is a mount point, which cannot be renamed away) and covers the
//!   latter. Hooks created after the start (a repository the job makes
//!   itself) cannot be fenced; the job's end names each hook file it created
//!   or changed.
//! - **Network: Landlock (TCP by port, ABI 4) and seccomp.** With the
//!   network off, every `socket` (Unix ones too), `io_uring_setup` and every
//!   x32 system call are refused by a seccomp filter; TCP connect and bind
//!   are also refused by Landlock. With ports, TCP connect and bind go only
//!   to those ports; UDP is not fenced.
//! - **Signals and abstract Unix sockets: Landlock scoping (ABI 6).** A job
//!   can signal, ptrace or reach over an abstract socket only its own
//!   processes: not the host, not other jobs, not the user's other processes.
//! - `PR_SET_NO_NEW_PRIVS`, and no capability for a root host's job.
//!
//! Each part is best effort against the kernel: what it cannot enforce is
//! said once at start ([`FenceSupport::missing`]), and with
//! [`FencePolicy::required`] a start is refused instead of running weaker.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, PathBeneath, Ruleset,
    RulesetAttr, RulesetCreatedAttr, Scope,
};

use super::bash::vfork::{ChildSandbox, MountStep, Namespace};
use crate::sync::lock;

mod hooks;

pub(crate) use hooks::HookScan;
use hooks::Watch;

/// What a job may do to files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FsAccess {
    /// Whatever its user may (no file fence).
    #[default]
    Full,
    /// Read everything readable but the host's and other jobs' private
    /// directories; write the workdir, the job's `TMPDIR` and the operator's
    /// paths, except the protected paths in them.
    WorkspaceWrite,
    /// As `WorkspaceWrite`, without the workdir.
    ReadOnly,
}

impl FsAccess {
    /// The spelling of flags and config keys: `full`, `workspace-write`,
    /// `read-only`.
    pub fn as_str(self) -> &'static str {
        match self {
            FsAccess::Full => "full",
            FsAccess::WorkspaceWrite => "workspace-write",
            FsAccess::ReadOnly => "read-only",
        }
    }

    /// Parses [`FsAccess::as_str`]'s spelling.
    ///
    /// # Errors
    ///
    /// Any other word, with the three that are known.
    pub fn parse(word: &str) -> Result<FsAccess, String> {
        match word {
            "full" => Ok(FsAccess::Full),
            "workspace-write" => Ok(FsAccess::WorkspaceWrite),
            "read-only" => Ok(FsAccess::ReadOnly),
            other => Err(format!(
                "unknown sandbox \"{other}\" (known: full, workspace-write, read-only)"
            )),
        }
    }
}

/// What a job may reach on the network.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum NetAccess {
    /// Anything (no network fence).
    #[default]
    On,
    /// Nothing but Unix sockets.
    Off,
    /// TCP connect and bind to these ports only (UDP is not fenced).
    Ports(Vec<u16>),
}

impl NetAccess {
    /// Parses `on`, `off` or `ports:80,443`.
    ///
    /// # Errors
    ///
    /// Any other word, or a port that is not a number from 1 to 65535.
    pub fn parse(word: &str) -> Result<NetAccess, String> {
        match word {
            "on" => Ok(NetAccess::On),
            "off" => Ok(NetAccess::Off),
            _ => {
                let Some(list) = word.strip_prefix("ports:") else {
                    return Err(format!(
                        "unknown sandbox network \"{word}\" (known: on, off, ports:PORT,...)"
                    ));
                };
                let ports = list
                    .split(',')
                    .map(|p| match p.trim().parse::<u16>() {
                        Ok(port) if port > 0 => Ok(port),
                        _ => Err(format!(
                            "invalid sandbox port \"{p}\": expected a number from 1 to 65535"
                        )),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(NetAccess::Ports(ports))
            }
        }
    }

    /// The network part in a few words: `network off`.
    pub fn describe(&self) -> String {
        match self {
            NetAccess::On => "network on".to_owned(),
            NetAccess::Off => "network off".to_owned(),
            NetAccess::Ports(ports) => format!(
                "network ports {}",
                ports
                    .iter()
                    .map(u16::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        }
    }
}

/// The sandbox one job runs in: what it may write and reach.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Sandbox {
    /// Files.
    pub fs: FsAccess,
    /// Network.
    pub network: NetAccess,
}

impl Sandbox {
    /// Whether this is no fence at all.
    pub fn is_open(&self) -> bool {
        self.fs == FsAccess::Full && self.network == NetAccess::On
    }

    /// Whether a job in `self` may do at most what one in `wider` may.
    pub fn within(&self, wider: &Sandbox) -> bool {
        let rank = |fs: FsAccess| match fs {
            FsAccess::ReadOnly => 0,
            FsAccess::WorkspaceWrite => 1,
            FsAccess::Full => 2,
        };
        let network = match (&self.network, &wider.network) {
            (_, NetAccess::On) | (NetAccess::Off, _) => true,
            (NetAccess::Ports(a), NetAccess::Ports(b)) => a.iter().all(|p| b.contains(p)),
            _ => false,
        };
        rank(self.fs) <= rank(wider.fs) && network
    }

    /// The sandbox in a few words: `workspace-write, network off`.
    pub fn describe(&self) -> String {
        format!("{}, {}", self.fs.as_str(), self.network.describe())
    }
}

/// The fence every job of a producer runs in.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FencePolicy {
    /// Files.
    pub fs: FsAccess,
    /// More paths a job may write (both fenced presets).
    pub write: Vec<PathBuf>,
    /// Network.
    pub network: NetAccess,
    /// Refuse a start the kernel cannot fence fully, instead of running it
    /// with what it can.
    pub required: bool,
    /// Use no Landlock ABI above this one, as on an older kernel: what a
    /// job gets there, and what it is told, can be tried here. `None`: the
    /// kernel's own.
    pub max_landlock_abi: Option<i32>,
}

impl FencePolicy {
    /// Whether this is no fence at all (today's jobs: full authority).
    pub fn is_open(&self) -> bool {
        self.sandbox().is_open()
    }

    /// The policy in a few words: `workspace-write, network off`.
    pub fn describe(&self) -> String {
        self.sandbox().describe()
    }

    /// The sandbox a job runs in under this policy, unless it asks for a
    /// narrower one.
    pub fn sandbox(&self) -> Sandbox {
        Sandbox {
            fs: self.fs,
            network: self.network.clone(),
        }
    }
}

/// What the kernel lets the host enforce, probed once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FenceSupport {
    /// The kernel's Landlock ABI (0: none).
    pub landlock_abi: i32,
    /// Whether a job can get a mount namespace of its own.
    pub mount_namespace: bool,
    /// Whether the seccomp filter for a job without network could be built.
    pub seccomp: bool,
}

impl FenceSupport {
    /// The kernel's Landlock ABI and seccomp filter (the mount namespace is
    /// probed once a job needs one: see `Fence::support_for`).
    fn probe(max_landlock_abi: Option<i32>) -> FenceSupport {
        // SAFETY: landlock_create_ruleset(NULL, 0, VERSION) only answers the ABI.
        let abi = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::null::<libc::c_void>(),
                0usize,
                1u32,
            )
        };
        FenceSupport {
            landlock_abi: i32::try_from(abi)
                .unwrap_or(0)
                .max(0)
                .min(max_landlock_abi.unwrap_or(i32::MAX)),
            mount_namespace: false,
            seccomp: !network_off_filter().is_empty(),
        }
    }

    /// The part of `job` this kernel enforces, as a sandbox: what a job's
    /// status shows. Files are fenced with Landlock; the network is off only
    /// with the seccomp filter (Landlock alone leaves UDP open), and fenced
    /// by port from Landlock ABI 4. What a sandbox cannot say (protected
    /// paths, scoping) is in [`FenceSupport::missing`].
    pub fn enforced(&self, job: &Sandbox) -> Sandbox {
        Sandbox {
            fs: if self.landlock_abi < 1 {
                FsAccess::Full
            } else {
                job.fs
            },
            network: match &job.network {
                NetAccess::Off if !self.seccomp => NetAccess::On,
                NetAccess::Ports(_) if self.landlock_abi < 4 => NetAccess::On,
                network => network.clone(),
            },
        }
    }

    /// What of `policy` this kernel cannot enforce, each in a few words.
    pub fn missing(&self, policy: &Sandbox) -> Vec<&'static str> {
        let mut missing = Vec::new();
        if policy.is_open() {
            return missing;
        }
        if policy.fs != FsAccess::Full && self.landlock_abi < 1 {
            missing.push("the file fence (Landlock)");
        }
        if policy.fs != FsAccess::Full && (1..3).contains(&self.landlock_abi) {
            missing.push("truncation (Landlock ABI 3)");
        }
        if policy.fs != FsAccess::Full && (1..5).contains(&self.landlock_abi) {
            missing.push("device ioctls (Landlock ABI 5)");
        }
        if policy.fs != FsAccess::Full && !self.mount_namespace {
            missing.push("protected paths inside writable ones (mount namespace)");
        }
        if policy.network == NetAccess::Off && !self.seccomp {
            missing.push("the network fence (seccomp)");
        }
        if matches!(policy.network, NetAccess::Ports(_)) && self.landlock_abi < 4 {
            missing.push("TCP ports (Landlock ABI 4)");
        }
        if self.landlock_abi < 6 {
            missing.push("signal and abstract-socket scoping (Landlock ABI 6)");
        }
        missing
    }
}

/// How jobs get a mount namespace of their own, if they can: the host's
/// own right to mount, or a user namespace the host made once (mapping its
/// uid and gid to themselves) that each job joins. Probed with one real
/// spawn of `shell`.
fn job_namespace(shell: &Path) -> Option<JobNamespace> {
    // SAFETY: geteuid takes no arguments.
    let namespace = if unsafe { libc::geteuid() } == 0 {
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
enum JobNamespace {
    Mount,
    User(OwnedFd),
}

impl JobNamespace {
    fn for_child(&self) -> Namespace {
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
fn user_namespace(shell: &Path) -> std::io::Result<OwnedFd> {
    let make = ChildSandbox {
        namespace: Some(Namespace::NewUser),
        ..ChildSandbox::default()
    };
    // The shell says it runs, then waits on its stdin (a pipe held below)
    // with a builtin.
    let started = spawn_briefly(shell, "echo; read -r _", make)?;
    let pid = started.pid;
    let result = (|| {
        // SAFETY: geteuid and getegid take no arguments.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
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
fn wait_for_line(fd: &OwnedFd) -> std::io::Result<()> {
    if super::bash::vfork::readable_within(fd.as_fd(), 10_000)? {
        Ok(())
    } else {
        Err(std::io::Error::other("the namespace child did not start"))
    }
}

/// Spawns `shell -c script` entering `sandbox` (and nothing else of a job's
/// setup but its death with the host).
fn spawn_briefly(
    shell: &Path,
    script: &str,
    sandbox: ChildSandbox,
) -> std::io::Result<super::bash::vfork::Started> {
    let program = CString::new(shell.as_os_str().as_bytes())?;
    let spec = super::bash::vfork::Spec {
        argv: vec![program.clone(), c"-c".to_owned(), CString::new(script)?],
        program,
        envp: Vec::new(),
        cwd: None,
        // A pipe the caller holds: `read` waits on it until it is closed.
        open_stdin: true,
        tty: None,
        rlimits: Vec::new(),
        setup: super::bash::vfork::ChildSetup {
            // Its own process group, away from the host's.
            new_session: true,
            close_inherited_fds: true,
            die_with_parent: Some(std::process::id() as libc::pid_t),
            sandbox: Some(sandbox),
            ..Default::default()
        },
        hold: None,
        hold_shared: None,
        extra_fds: Vec::new(),
    };
    // Recorded as a leader, so no fallback-mode sweep of orphans (another
    // producer's, in the same process) reaps it before its pidfd is open or
    // while it is asked for its namespace.
    crate::containment::start_leader(|| super::bash::vfork::spawn(&spec), |s| s.pid)
}

/// A mount namespace with `mounts` taken, for jobs to join (one per set of
/// protected paths, instead of one per job): made by a short-lived child
/// entering `namespace`, kept by a descriptor after it is gone.
fn shared_mounts(
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
fn run_briefly(shell: &Path, script: &str, sandbox: ChildSandbox) -> std::io::Result<()> {
    let started = spawn_briefly(shell, script, sandbox)?;
    end_briefly(started.pid);
    Ok(())
}

/// Kills and reaps a short-lived child of [`spawn_briefly`].
fn end_briefly(pid: libc::pid_t) {
    // SAFETY: kill and reap our own child.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, std::ptr::null_mut(), 0);
    }
    crate::containment::remove_leader(pid as u32);
}

/// The sockets and socket directories of the user's services that a fenced
/// job must not reach: `$XDG_RUNTIME_DIR` (`/run/user/<uid>`: D-Bus, and with
/// it `systemd-run`, and jobs-host's daemon), X11's and tmux's socket
/// directories, jobs-host's daemon's fallback directory, and Docker's
/// socket. Those that exist.
fn service_sockets() -> Vec<PathBuf> {
    // SAFETY: geteuid takes no arguments.
    let uid = unsafe { libc::geteuid() };
    let mut paths = vec![
        PathBuf::from(format!("/run/user/{uid}")),
        PathBuf::from("/tmp/.X11-unix"),
        PathBuf::from(format!("/tmp/tmux-{uid}")),
        // jobs-host's own daemon when there is no XDG_RUNTIME_DIR: a fenced
        // job must not open an unfenced session through it.
        PathBuf::from(format!("/tmp/jobs-host-{uid}")),
        PathBuf::from("/run/docker.sock"),
        PathBuf::from("/var/run/docker.sock"),
        PathBuf::from("/run/containerd/containerd.sock"),
        PathBuf::from("/run/podman/podman.sock"),
        // The system's: a root host's job is uid 0 still (without
        // capabilities), which the system bus and systemd trust.
        PathBuf::from("/run/dbus/system_bus_socket"),
        PathBuf::from("/run/systemd/private"),
        PathBuf::from("/run/systemd/notify"),
        PathBuf::from("/run/systemd/io.systemd.Manager"),
    ];
    if let Some(runtime) = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
        paths.push(runtime);
    }
    let mut seen = Vec::new();
    for path in paths {
        // The real path: /var/run is usually a link to /run.
        let Ok(real) = path.canonicalize() else {
            continue;
        };
        if !seen.contains(&real) {
            seen.push(real);
        }
    }
    seen
}

/// Shell rc files and the like, in `$HOME`: protected when a writable root
/// holds them.
const RC_FILES: &[&str] = &[
    ".config/git/config",
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".gitconfig",
];

/// The fence of one producer.
pub(crate) struct Fence {
    policy: FencePolicy,
    support: FenceSupport,
    /// The host's private directories (canonical): never readable.
    hidden: Vec<PathBuf>,
    /// Where jobs' temporary directories are made: a private directory of
    /// the host's (the spill directory), so none is readable by another job
    /// and `/tmp` does not grow with them.
    tmp_parent: PathBuf,
    /// The seccomp filter for jobs without network, made once needed.
    seccomp: std::sync::OnceLock<Vec<libc::sock_filter>>,
    /// How a job gets a mount namespace, when it can: probed once a job
    /// needs one.
    namespace: std::sync::OnceLock<Option<JobNamespace>>,
    /// The read rules, kept between starts while the directories they list
    /// are unchanged.
    readable: Mutex<Option<ReadRules>>,
    /// The last scan of a set of writable roots at a start.
    scans: Mutex<Option<LastScan>>,
    /// The mount namespace jobs join, with the mount steps it was made with.
    mount_ns: Mutex<Option<SharedMounts>>,
    /// The shell, for the short-lived children that make namespaces.
    shell: PathBuf,
    /// Emptied temporary directories of finished jobs that left no process.
    spare_tmp: Mutex<Vec<PathBuf>>,
    /// Said once when a start runs weaker than asked.
    warned: std::sync::Once,
    /// The narrower sandboxes jobs asked for that run weaker, each said once.
    said_weaker: Mutex<Vec<Sandbox>>,
}

/// The read rules of [`readable`], as open descriptors with their access,
/// and the directories whose listing they come from, with each one's
/// change time then; with `/` (listed by every job) and the devices a
/// program expects, opened once too.
struct ReadRules {
    listed: Vec<(PathBuf, Option<std::time::SystemTime>)>,
    rules: Vec<(OwnedFd, bool)>,
    root: OwnedFd,
    /// Each device, and whether it may be written (and `ioctl`ed).
    devices: Vec<(OwnedFd, bool)>,
}

/// The devices a program expects, by name, and whether a job may write
/// them; the links in `/dev` (`fd`, `stdin`, ...) lead into `/proc/self`,
/// which is read.
const DEVICES: [(&str, bool); 6] = [
    ("/dev/null", true),
    ("/dev/zero", true),
    ("/dev/full", true),
    ("/dev/tty", true),
    ("/dev/random", false),
    ("/dev/urandom", false),
];

impl ReadRules {
    fn build(excluded: &[PathBuf]) -> Result<ReadRules, String> {
        // Each directory the walk lists (those on the way to an excluded
        // path), stamped before it is listed: a change during the walk makes
        // the next start walk again.
        let mut listed = vec![(PathBuf::from("/"), changed_at(Path::new("/")))];
        for excluded in excluded {
            let mut dir = excluded.parent();
            while let Some(d) = dir {
                if d != Path::new("/") && !listed.iter().any(|(l, _)| l == d) {
                    listed.push((d.to_owned(), changed_at(d)));
                }
                dir = d.parent();
            }
        }
        let mut rules = Vec::new();
        for (path, is_dir) in readable(Path::new("/"), excluded) {
            if let Ok(fd) = path_fd(&path) {
                rules.push((fd, is_dir));
            }
        }
        let devices = DEVICES
            .iter()
            .filter_map(|(device, write)| Some((path_fd(Path::new(device)).ok()?, *write)))
            .collect();
        Ok(ReadRules {
            listed,
            rules,
            root: path_fd(Path::new("/"))?,
            devices,
        })
    }

    fn is_current(&self) -> bool {
        self.listed.iter().all(|(dir, at)| changed_at(dir) == *at)
    }
}

/// A file's change time, which a job cannot set (it can set a modification
/// time): a new entry in a directory changes it.
fn changed_at(path: &Path) -> Option<std::time::SystemTime> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    let secs = u64::try_from(meta.ctime()).ok()?;
    let nanos = u32::try_from(meta.ctime_nsec()).ok()?;
    Some(std::time::UNIX_EPOCH + std::time::Duration::new(secs, nanos))
}

/// The last scan of a set of writable roots, with the change notices for
/// what it listed (`None` when the kernel gives none) and the notices'
/// generation it was taken at.
struct LastScan {
    roots: Vec<PathBuf>,
    scan: std::sync::Arc<HookScan>,
    watch: Option<Watch>,
    generation: u64,
}

/// A mount namespace jobs join: the steps it was made with, and the file
/// each step's path named then (device and inode). A file replaced since (git
/// writes `config` anew and renames it into place) is no longer covered by
/// the bind, so the namespace is made again.
struct SharedMounts {
    steps: Vec<MountStep>,
    files: Vec<Option<(u64, u64)>>,
    fd: std::sync::Arc<OwnedFd>,
}

fn file_id(step: &MountStep) -> Option<(u64, u64)> {
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

/// A job's own temporary directory, removed when this is dropped unless
/// kept for a later job.
pub(crate) struct JobTmp {
    path: PathBuf,
    keep: bool,
}

impl JobTmp {
    /// Its path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for JobTmp {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// One job's fence, prepared by the host before its spawn.
pub(crate) struct JobFence {
    /// The job's own temporary directory (its `TMPDIR`), removed with this
    /// unless [`Fence::release`] keeps it for a later job.
    pub tmp: JobTmp,
    /// The Landlock ruleset, held open until the child has exec'd.
    pub ruleset: Option<OwnedFd>,
    /// The shared mount namespace the child joins, held until it has.
    pub mount_ns: Option<std::sync::Arc<OwnedFd>>,
    /// What the child does.
    pub child: ChildSandbox,
    /// The hook files under the writable roots at the start.
    pub hooks: std::sync::Arc<HookScan>,
    /// The change notices' id and generation at that scan.
    watched: Option<(u64, u64)>,
    /// The writable roots, to scan again at the end.
    roots: Vec<PathBuf>,
    /// What of the job's sandbox this kernel cannot enforce.
    missing: Vec<&'static str>,
}

impl Fence {
    /// The fence for `policy`. `hidden` are the host's private directories
    /// (the component cache, the spill directory); jobs' temporary
    /// directories are made in `tmp_parent`, one of them. Probes the kernel
    /// once.
    pub(crate) fn new(
        policy: FencePolicy,
        hidden: &[PathBuf],
        tmp_parent: &Path,
        shell: &Path,
    ) -> Fence {
        let fence = Fence {
            hidden: hidden
                .iter()
                .filter_map(|p| p.canonicalize().ok())
                .collect(),
            tmp_parent: tmp_parent
                .canonicalize()
                .unwrap_or_else(|_| tmp_parent.to_owned()),
            seccomp: std::sync::OnceLock::new(),
            namespace: std::sync::OnceLock::new(),
            readable: Mutex::new(None),
            scans: Mutex::new(None),
            spare_tmp: Mutex::new(Vec::new()),
            mount_ns: Mutex::new(None),
            shell: shell.to_owned(),
            warned: std::sync::Once::new(),
            said_weaker: Mutex::new(Vec::new()),
            support: FenceSupport::probe(policy.max_landlock_abi),
            policy,
        };
        if fence.policy.is_open() {
            return fence;
        }
        // Probed now, so what the session's sandbox lacks is said at start.
        let support = fence.support_for(&fence.policy.sandbox());
        let missing = support.missing(&fence.policy.sandbox());
        if missing.is_empty() {
            tracing::info!(
                "jobs: sandbox {} (Landlock ABI {})",
                fence.policy.describe(),
                support.landlock_abi
            );
        } else {
            tracing::warn!(
                "jobs: sandbox {} (Landlock ABI {}) cannot enforce {}{}",
                fence.policy.describe(),
                support.landlock_abi,
                missing.join(", "),
                if fence.policy.required {
                    "; --sandbox-required refuses every start"
                } else {
                    "; jobs run with the rest"
                }
            );
        }
        fence
    }

    /// What this kernel enforces of `sandbox` (probing for a mount namespace
    /// the first time a sandbox fences files).
    pub(crate) fn support_for(&self, sandbox: &Sandbox) -> FenceSupport {
        let namespace = sandbox.fs != FsAccess::Full && self.job_namespace().is_some();
        FenceSupport {
            mount_namespace: namespace,
            ..self.support.clone()
        }
    }

    fn job_namespace(&self) -> Option<&JobNamespace> {
        self.namespace
            .get_or_init(|| job_namespace(&self.shell))
            .as_ref()
    }

    /// The policy.
    pub(crate) fn policy(&self) -> &FencePolicy {
        &self.policy
    }

    /// What the kernel can enforce of the session's sandbox.
    pub(crate) fn support(&self) -> FenceSupport {
        self.support_for(&self.policy.sandbox())
    }

    /// Prepares the fence of a job whose workdir is `workdir` (the host's
    /// own when `None`).
    ///
    /// # Errors
    ///
    /// A start refused: the kernel cannot enforce the policy and it is
    /// required; the workdir holds the host's temporary directory (which the
    /// job's own lives in); or the job's temporary directory or ruleset
    /// cannot be made.
    pub(crate) fn prepare(
        &self,
        workdir: Option<&Path>,
        job: &Sandbox,
    ) -> Result<JobFence, String> {
        let missing = self.support_for(job).missing(job);
        if self.policy.required && !missing.is_empty() {
            return Err(format!(
                "sandbox required, but this kernel cannot enforce {}",
                missing.join(", ")
            ));
        }
        if !missing.is_empty() && *job != self.policy.sandbox() && self.first_said(job) {
            // A job that narrowed the session's sandbox: said like the
            // session's own at start, once for each such sandbox (its end
            // says it every time).
            tracing::warn!(
                "jobs: a job's sandbox {} runs without {}",
                job.describe(),
                missing.join(", ")
            );
        }
        let workdir = match workdir {
            Some(dir) => dir.to_owned(),
            None => std::env::current_dir().map_err(|e| e.to_string())?,
        };
        let workdir = workdir.canonicalize().unwrap_or(workdir);
        let mut roots: Vec<PathBuf> = if job.fs == FsAccess::Full {
            Vec::new()
        } else {
            self.policy
                .write
                .iter()
                .filter_map(|p| p.canonicalize().ok())
                .collect()
        };
        if job.fs == FsAccess::WorkspaceWrite {
            roots.insert(0, workdir);
        }
        // A private directory inside a writable root could be renamed away
        // and planted anew; a root inside one would open it. A root on the
        // kernel's own file systems would let a job move itself out of its
        // cgroup, or worse.
        for root in &roots {
            let kernel = if root.starts_with("/proc") || root.starts_with("/sys") {
                Some("the kernel's own files")
            } else {
                kernel_fs(root)
            };
            if let Some(kind) = kernel {
                return Err(format!(
                    "invalid workdir: under the sandbox a job may not write {} ({kind})",
                    root.display()
                ));
            }
            if let Some(private) = self
                .hidden
                .iter()
                .find(|p| p.starts_with(root) || root.starts_with(p))
            {
                return Err(format!(
                    "invalid workdir: under the sandbox a job may not write {}, which holds or is inside the host's private directory {}",
                    root.display(),
                    private.display()
                ));
            }
        }
        let tmp = self.temporary_directory()?;
        let ruleset = self.ruleset(job, &roots, tmp.path())?;
        // What a writable root holds that must not be written (or read).
        let mut mounts = Vec::new();
        let (hooks, watched) = self.scan(&roots);
        if job.fs != FsAccess::Full {
            let protected = protected_paths(&roots, &hooks);
            let mut pinned: Vec<PathBuf> = Vec::new();
            for path in &protected {
                for dir in between(&roots, path) {
                    if !pinned.contains(&dir) {
                        pinned.push(dir);
                    }
                }
            }
            // Outer directories first, so that each bind holds the ones
            // made inside it after.
            pinned.sort_by_key(|d| d.components().count());
            for dir in pinned {
                mounts.push(MountStep::Pin {
                    path: cstring(&dir)?,
                });
            }
            for path in protected {
                mounts.push(MountStep::ReadOnly {
                    flags: mount_flags(&path),
                    path: cstring(&path)?,
                });
            }
            // The user's services listen on these: through them (D-Bus's
            // `systemd-run`, a tmux server, a Docker daemon) a command runs
            // outside the fence.
            for path in service_sockets() {
                mounts.push(if path.is_dir() {
                    MountStep::Hide {
                        path: cstring(&path)?,
                    }
                } else {
                    MountStep::Cover {
                        path: cstring(&path)?,
                    }
                });
            }
        }
        let mut join_mount = None;
        let namespace = if mounts.is_empty() {
            None
        } else if let Some(namespace) = self.job_namespace() {
            join_mount = self.mount_namespace(namespace, &mounts);
            if join_mount.is_some() {
                mounts.clear();
            }
            Some(namespace.for_child())
        } else {
            self.warned.call_once(|| {
                tracing::warn!(
                    "jobs: no mount namespace: protected paths in a job's writable roots stay writable"
                );
            });
            mounts.clear();
            None
        };
        let child = ChildSandbox {
            namespace,
            join_mount: join_mount.as_ref().map(|fd| fd.as_raw_fd()),
            mounts,
            landlock: ruleset.as_ref().map(AsRawFd::as_raw_fd),
            seccomp: match job.network {
                NetAccess::Off => self.seccomp.get_or_init(network_off_filter).clone(),
                _ => Vec::new(),
            },
            // SAFETY: geteuid takes no arguments.
            drop_capabilities: unsafe { libc::geteuid() } == 0,
        };
        Ok(JobFence {
            tmp,
            ruleset,
            mount_ns: join_mount,
            child,
            hooks,
            watched,
            roots,
            missing,
        })
    }

    /// Whether a narrowed `job` sandbox's weaker run is said for the first
    /// time (and notes that it now is).
    fn first_said(&self, job: &Sandbox) -> bool {
        let mut said = lock(&self.said_weaker);
        let first = !said.contains(job);
        if first {
            said.push(job.clone());
        }
        first
    }

    /// The shared mount namespace for `mounts` (made when the set changes);
    /// `None` when it cannot be made, and the job then makes its own.
    fn mount_namespace(
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

    /// A job's own temporary directory: one a finished job left, emptied,
    /// when that job was proven to have no process left (see
    /// [`Fence::release`]), else a new one (a `mkdir` on ext4 costs more than
    /// the rest of a start).
    fn temporary_directory(&self) -> Result<JobTmp, String> {
        if let Some(path) = lock(&self.spare_tmp).pop() {
            return Ok(JobTmp { path, keep: false });
        }
        tempfile::Builder::new()
            .prefix("tmp-")
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir_in(&self.tmp_parent)
            .map(|dir| JobTmp {
                path: dir.keep(),
                keep: false,
            })
            .map_err(|e| format!("cannot make the job's temporary directory: {e}"))
    }

    /// Takes back a job's fence at its end. Its temporary directory is kept
    /// for a later job only when `none_left`: the job's cgroup was removed,
    /// which proves that no process of it is left (Landlock rules follow the
    /// directory, not its name, so a process that outlived its job would
    /// still reach it); it is then emptied first. Otherwise it is removed.
    pub(crate) fn release(&self, mut job: JobFence, none_left: bool) {
        const SPARE: usize = 64;
        if !none_left || lock(&self.spare_tmp).len() >= SPARE {
            return;
        }
        // Whatever mode the job left it with.
        if std::fs::set_permissions(
            job.tmp.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        )
        .is_err()
        {
            return;
        }
        let emptied = std::fs::read_dir(job.tmp.path()).is_ok_and(|entries| {
            entries.flatten().all(|entry| {
                let path = entry.path();
                match entry.file_type() {
                    Ok(t) if t.is_dir() => std::fs::remove_dir_all(&path).is_ok(),
                    _ => std::fs::remove_file(&path).is_ok(),
                }
            })
        });
        if emptied {
            job.tmp.keep = true;
            lock(&self.spare_tmp).push(job.tmp.path.clone());
        }
    }

    /// The scan of `roots` at a start, with the change notices' id and
    /// generation it was taken at: the last one of the same roots as it was
    /// while no notice arrived for what it listed, else listed again where
    /// it changed (a repository made since is found), so starts in a row
    /// list little and most list nothing.
    fn scan(&self, roots: &[PathBuf]) -> (std::sync::Arc<HookScan>, Option<(u64, u64)>) {
        if roots.is_empty() {
            return (Default::default(), None);
        }
        let mut last = lock(&self.scans);
        match last.as_mut() {
            Some(last) if last.roots == roots => {
                let quiet = last
                    .watch
                    .as_mut()
                    .is_some_and(|w| w.quiet_since(last.generation));
                if !quiet {
                    // Taken before listing: a notice raised during the
                    // listing makes the next start look again.
                    last.generation = last.watch.as_mut().map_or(0, Watch::generation);
                    last.scan = std::sync::Arc::new(last.scan.again(last.watch.as_ref()));
                }
                let watched = last.watch.as_ref().map(|w| (w.id(), last.generation));
                (last.scan.clone(), watched)
            }
            _ => {
                let mut watch = Watch::new();
                let generation = watch.as_mut().map_or(0, Watch::generation);
                let scan = std::sync::Arc::new(HookScan::of(roots, watch.as_ref()));
                let watched = watch.as_ref().map(|w| (w.id(), generation));
                *last = Some(LastScan {
                    roots: roots.to_vec(),
                    scan: scan.clone(),
                    watch,
                    generation,
                });
                (scan, watched)
            }
        }
    }

    /// What `job`'s status says at its end besides its exit: the parts of
    /// its sandbox this kernel did not enforce (`sandbox without: ...`),
    /// and the hook files it created or changed under its writable roots
    /// (`hooks changed: ...`, see [`JobFence::hook_note`]); `None` for
    /// neither.
    pub(crate) fn end_note(&self, job: &JobFence) -> Option<String> {
        let mut notes = Vec::new();
        if !job.missing.is_empty() {
            notes.push(crate::words::sandbox_without(&job.missing));
        }
        if !job.roots.is_empty() {
            notes.extend(self.hook_note(job));
        }
        (!notes.is_empty()).then(|| notes.join("; "))
    }

    /// The hook files `job` created or changed: none to look for while no
    /// change notice arrived since its start scan.
    fn hook_note(&self, job: &JobFence) -> Option<String> {
        let quiet = job.watched.is_some_and(|(id, generation)| {
            lock(&self.scans).as_mut().is_some_and(|last| {
                last.roots == job.roots
                    && last
                        .watch
                        .as_mut()
                        .is_some_and(|w| w.id() == id && w.quiet_since(generation))
            })
        });
        job.hook_note(quiet)
    }

    /// The Landlock ruleset of one job; `None` when nothing is fenced by it.
    fn ruleset(
        &self,
        job: &Sandbox,
        roots: &[PathBuf],
        tmp: &Path,
    ) -> Result<Option<OwnedFd>, String> {
        if job.is_open() {
            return Ok(None);
        }
        // The reached ABI's rights only (the kernel's, or a lower one the
        // policy caps it at), each part where its ABI has it.
        let reached = self.support.landlock_abi;
        let fences_net = job.network != NetAccess::On && reached >= 4;
        if reached < 1 || (job.fs == FsAccess::Full && !fences_net && reached < 6) {
            // Nothing for Landlock to handle (a ruleset must handle something).
            return Ok(None);
        }
        let abi = landlock::ABI::from(reached);
        let fail = |e: &dyn std::fmt::Display| format!("cannot build the job's sandbox: {e}");
        let mut ruleset = Ruleset::default().set_compatibility(CompatLevel::BestEffort);
        if job.fs != FsAccess::Full {
            ruleset = ruleset
                .handle_access(AccessFs::from_all(abi))
                .map_err(|e| fail(&e))?;
        }
        if fences_net {
            ruleset = ruleset
                .handle_access(AccessNet::from_all(abi))
                .map_err(|e| fail(&e))?;
        }
        if reached >= 6 {
            ruleset = ruleset.scope(Scope::from_all(abi)).map_err(|e| fail(&e))?;
        }
        let mut created = ruleset.create().map_err(|e| fail(&e))?;
        if job.fs != FsAccess::Full {
            let read = AccessFs::from_read(abi);
            let all = AccessFs::from_all(abi);
            let mut cached = lock(&self.readable);
            if !cached.as_ref().is_some_and(ReadRules::is_current) {
                // `/dev` is not read whole: raw disks would show every file.
                let mut excluded = self.hidden.clone();
                excluded.push(PathBuf::from("/dev"));
                *cached = Some(ReadRules::build(&excluded)?);
            }
            let rules = cached.as_ref().expect("built above");
            // Listing any directory: names, not contents.
            created = created
                .add_rule(PathBeneath::new(rules.root.as_fd(), AccessFs::ReadDir))
                .map_err(|e| fail(&e))?;
            for (fd, is_dir) in &rules.rules {
                let access = if *is_dir {
                    read
                } else {
                    read & AccessFs::from_file(abi)
                };
                created = created
                    .add_rule(PathBeneath::new(fd.as_fd(), access))
                    .map_err(|e| fail(&e))?;
            }
            for (fd, write) in &rules.devices {
                let access = if *write {
                    (AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::IoctlDev) & all
                } else {
                    AccessFs::ReadFile.into()
                };
                created = created
                    .add_rule(PathBeneath::new(fd.as_fd(), access))
                    .map_err(|e| fail(&e))?;
            }
            drop(cached);
            for root in roots.iter().map(PathBuf::as_path).chain([tmp]) {
                let access = if root.is_dir() {
                    all
                } else {
                    all & AccessFs::from_file(abi)
                };
                created = created
                    .add_rule(PathBeneath::new(path_fd(root)?, access))
                    .map_err(|e| fail(&e))?;
            }
        }
        if let NetAccess::Ports(ports) = &job.network
            && reached >= 4
        {
            for port in ports {
                created = created
                    .add_rule(NetPort::new(*port, AccessNet::from_all(abi)))
                    .map_err(|e| fail(&e))?;
            }
        }
        Ok(created.into())
    }
}

/// The kernel file system `path` lies on, if it is one a job must never
/// write: cgroupfs, sysfs or procfs.
fn kernel_fs(path: &Path) -> Option<&'static str> {
    let c = cstring(path).ok()?;
    // SAFETY: statfs into a zeroed struct.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a valid out pointer.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    match st.f_type {
        libc::CGROUP2_SUPER_MAGIC | libc::CGROUP_SUPER_MAGIC => Some("a cgroup file system"),
        libc::SYSFS_MAGIC => Some("sysfs"),
        libc::PROC_SUPER_MAGIC => Some("procfs"),
        _ => None,
    }
}

fn cstring(path: &Path) -> Result<CString, String> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| format!("a NUL byte in the path {}", path.display()))
}

/// An `O_PATH` descriptor of `path` itself (a symbolic link is not followed,
/// so a link planted in a listed directory grants nothing beyond itself).
fn path_fd(path: &Path) -> Result<OwnedFd, String> {
    let c = cstring(path)?;
    // SAFETY: open of a NUL-terminated path with flags that need no mode.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(format!(
            "cannot open {}: {}",
            path.display(),
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: a descriptor just opened and owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Every path to grant read on so that all of `dir` is readable except the
/// `excluded` paths (and what lies beneath them): each entry of a directory
/// on the way to an excluded path but that one, recursively; every other
/// entry whole. With whether each is a directory.
fn readable(dir: &Path, excluded: &[PathBuf]) -> Vec<(PathBuf, bool)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if excluded.contains(&path) {
            continue;
        }
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_dir && excluded.iter().any(|e| e.starts_with(&path)) {
            out.extend(readable(&path, excluded));
        } else {
            out.push((path, is_dir));
        }
    }
    out
}

/// The `MS_*` flags of the mount holding `path` that a read-only bind must
/// keep.
fn mount_flags(path: &Path) -> libc::c_ulong {
    let Ok(c) = cstring(path) else { return 0 };
    // SAFETY: statvfs into a zeroed struct.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a valid out pointer.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return 0;
    }
    let mut flags = 0;
    for (st_flag, ms_flag) in [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ] {
        if st.f_flag & st_flag != 0 {
            flags |= ms_flag;
        }
    }
    flags
}

/// What must stay read-only in the writable roots: each repository's
/// `.git/hooks` and `.git/config`, and the shell rc files of `$HOME` when a
/// root holds them.
fn protected_paths(roots: &[PathBuf], hooks: &HookScan) -> Vec<PathBuf> {
    let mut out = Vec::new();
    // The whole git directory, not only its hooks and config: a bind is a
    // mount point, which cannot be renamed, while its parent could be (and
    // a copy planted in its place); submodules' hooks and configs live in it
    // too.
    out.extend(hooks.repositories().iter().cloned());
    if let Some(home) = std::env::var_os("HOME").map(PathBuf::from) {
        let home = home.canonicalize().unwrap_or(home);
        for name in RC_FILES {
            let path = home.join(name);
            if roots.iter().any(|r| path.starts_with(r)) && path.is_file() {
                out.push(path);
            }
        }
    }
    out
}

/// The directories strictly between a writable root and `path` (outermost
/// first): each is pinned (bound onto itself), since a directory that holds
/// a mount point can be renamed away with it, and a copy planted in its
/// place.
fn between(roots: &[PathBuf], path: &Path) -> Vec<PathBuf> {
    let Some(root) = roots
        .iter()
        .filter(|r| path.starts_with(r))
        .max_by_key(|r| r.components().count())
    else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = path
        .ancestors()
        .skip(1)
        .take_while(|a| *a != root.as_path() && a.starts_with(root))
        .map(Path::to_path_buf)
        .collect();
    dirs.reverse();
    dirs
}

/// The seccomp filter for a job without network: `socket` of any family
/// (Unix sockets too: a pathname socket of the user's services would reach
/// past the fence; `socketpair` stays) and `io_uring_setup` (whose rings can
/// open sockets) fail with `EACCES`, as does every x32 system call (which a
/// filter by number would not see). Empty on architectures it is not built
/// for.
pub(crate) fn network_off_filter() -> Vec<libc::sock_filter> {
    use seccompiler::{SeccompAction, SeccompFilter, TargetArch};
    let arch = if cfg!(target_arch = "aarch64") {
        TargetArch::aarch64
    } else if cfg!(target_arch = "x86_64") {
        TargetArch::x86_64
    } else {
        return Vec::new();
    };
    let build = || -> Result<Vec<libc::sock_filter>, seccompiler::Error> {
        let rules = [
            (libc::SYS_socket, vec![]),
            (libc::SYS_io_uring_setup, vec![]),
        ]
        .into_iter()
        .collect();
        let filter = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(libc::EACCES as u32),
            arch,
        )?;
        let program: seccompiler::BpfProgram = filter.try_into()?;
        let mut out = Vec::new();
        if cfg!(target_arch = "x86_64") {
            // x32 system calls are x86_64's numbers with bit 30 set.
            const X32_BIT: u32 = 0x4000_0000;
            out.extend([
                // Load the system call number.
                libc::sock_filter {
                    code: (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16,
                    jt: 0,
                    jf: 0,
                    k: 0,
                },
                // At or above the x32 bit: refuse; else on to the filter.
                libc::sock_filter {
                    code: (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16,
                    jt: 0,
                    jf: 1,
                    k: X32_BIT,
                },
                libc::sock_filter {
                    code: (libc::BPF_RET | libc::BPF_K) as u16,
                    jt: 0,
                    jf: 0,
                    k: libc::SECCOMP_RET_ERRNO | libc::EACCES as u32,
                },
            ]);
        }
        out.extend(program.into_iter().map(|i| libc::sock_filter {
            code: i.code,
            jt: i.jt,
            jf: i.jf,
            k: i.k,
        }));
        Ok(out)
    };
    match build() {
        Ok(program) => program,
        Err(e) => {
            tracing::warn!("jobs: no seccomp filter for the network fence: {e}");
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_and_describe_themselves() {
        assert_eq!(
            FsAccess::parse("workspace-write"),
            Ok(FsAccess::WorkspaceWrite)
        );
        assert!(FsAccess::parse("yolo").unwrap_err().contains("known: full"));
        assert_eq!(
            NetAccess::parse("ports:80,443"),
            Ok(NetAccess::Ports(vec![80, 443]))
        );
        assert!(NetAccess::parse("ports:0").is_err());
        assert!(NetAccess::parse("ports:99999").is_err());
        let policy = FencePolicy {
            fs: FsAccess::WorkspaceWrite,
            network: NetAccess::Off,
            ..FencePolicy::default()
        };
        assert_eq!(policy.describe(), "workspace-write, network off");
        assert!(FencePolicy::default().is_open());
    }

    #[test]
    fn the_readable_set_leaves_out_the_excluded_paths_and_only_them() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        for dir in ["a/b/hidden", "a/b/seen", "a/c", "d"] {
            std::fs::create_dir_all(r.join(dir)).unwrap();
        }
        std::fs::write(r.join("a/b/file"), "x").unwrap();
        let got: std::collections::BTreeSet<PathBuf> = readable(r, &[r.join("a/b/hidden")])
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        let want: std::collections::BTreeSet<PathBuf> = ["a/b/seen", "a/b/file", "a/c", "d"]
            .iter()
            .map(|p| r.join(p))
            .collect();
        assert_eq!(got, want);
    }
}
