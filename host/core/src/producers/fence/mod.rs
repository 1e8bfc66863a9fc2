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
//!   the host's private directories is refused. A private directory that
//!   holds nothing a job needs (the component cache) is covered by the
//!   mount namespace below where jobs have one, rather than walked around:
//!   in `/tmp`, the walk would cost a rule for each of its entries.
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
//!
//! One file per kernel mechanism, as wasmtime-wasi keeps one per interface:
//! `support` (what the kernel offers, probed once), `landlock` (the file
//! and network rules), `namespace` (mount and user namespaces for the
//! protected paths), `protected` (which paths those are, and the user's
//! services), `seccomp` (the network-off filter), `tmp` (each job's own
//! temporary directory) and `hooks` (the scan for repositories and hooks
//! under writable roots). This file holds the fence of one producer and the
//! preparation of one job's, which uses them all.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::producers::spawn::{ChildSandbox, MountStep};
use crate::sync::lock;

mod error;
mod hooks;
mod landlock;
mod namespace;
mod protected;
mod seccomp;
mod services;
mod support;
mod tmp;

use self::landlock::ReadRules;
pub(crate) use error::FenceError;
pub(crate) use hooks::HookScan;
use hooks::Watch;
use namespace::{JobNamespace, SharedMounts, job_namespace};
use protected::{LastScan, between, mount_flags, protected_paths};
pub(crate) use seccomp::network_off_filter;
use services::service_sockets;
pub use support::FenceSupport;
pub(crate) use tmp::JobTmp;
use tmp::SpareTmp;

pub use crate::sandbox::{FencePolicy, FsAccess, NetAccess, Sandbox};

/// The fence of one producer.
pub(crate) struct Fence {
    policy: FencePolicy,
    support: FenceSupport,
    /// The host's private directories (canonical) that the read rules
    /// always leave out: never readable.
    hidden: Vec<PathBuf>,
    /// Its other private directories, which hold nothing a job needs (not
    /// the spill directory, which holds the jobs' own temporary
    /// directories): the job namespace covers them with an empty tmpfs
    /// where there is one, rather than the read rules naming every entry
    /// beside them (see [`Fence::unreadable`]).
    covered: Vec<PathBuf>,
    /// Where jobs' temporary directories are made: a private directory of
    /// the host's (the spill directory), so none is readable by another job
    /// and `/tmp` does not grow with them.
    tmp_parent: PathBuf,
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
    /// Emptied temporary directories of finished jobs that left no process,
    /// each with its ruleset.
    spare_tmp: Mutex<Vec<SpareTmp>>,
    /// How many rulesets temporary directories keep (see
    /// [`landlock::KeptRuleset`]).
    rulesets_kept: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// Said once when a start runs weaker than asked.
    warned: std::sync::Once,
    /// The narrower sandboxes jobs asked for that run weaker, each said once.
    said_weaker: Mutex<Vec<Sandbox>>,
}

/// One job's fence, prepared by the host before its spawn.
pub(crate) struct JobFence {
    /// The job's own temporary directory (its `TMPDIR`), removed with this
    /// unless [`Fence::release`] keeps it for a later job.
    pub tmp: JobTmp,
    /// The Landlock ruleset, held open until the child has exec'd.
    pub ruleset: Option<std::sync::Arc<OwnedFd>>,
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
    /// Its temporary directory was seen empty at its end (see
    /// [`Fence::ends_quickly`]).
    seen_empty: std::cell::Cell<bool>,
}

impl Fence {
    /// The fence for `policy`. `hidden` and `covered` are the host's
    /// private directories (the spill directory; the component cache),
    /// `covered` those that hold nothing a job needs; jobs' temporary
    /// directories are made in `tmp_parent`, one of `hidden`. Probes the
    /// kernel once.
    pub(crate) fn new(
        policy: FencePolicy,
        hidden: &[PathBuf],
        covered: &[PathBuf],
        tmp_parent: &Path,
        shell: &Path,
    ) -> Fence {
        let tmp_parent = tmp_parent
            .canonicalize()
            .unwrap_or_else(|_| tmp_parent.to_owned());
        let canonical = |dirs: &[PathBuf]| -> Vec<PathBuf> {
            dirs.iter().filter_map(|p| p.canonicalize().ok()).collect()
        };
        let mut hidden = canonical(hidden);
        // A cover over the jobs' temporary directories would hide each
        // job's own as well.
        let (covered, held): (Vec<PathBuf>, Vec<PathBuf>) = canonical(covered)
            .into_iter()
            .partition(|dir| !tmp_parent.starts_with(dir));
        hidden.extend(held);
        let fence = Fence {
            hidden,
            covered,
            tmp_parent,
            namespace: std::sync::OnceLock::new(),
            readable: Mutex::new(None),
            scans: Mutex::new(None),
            spare_tmp: Mutex::new(Vec::new()),
            rulesets_kept: std::sync::Arc::default(),
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

    /// Every private directory of the host's.
    fn private(&self) -> impl Iterator<Item = &PathBuf> {
        self.hidden.iter().chain(&self.covered)
    }

    /// The directories a job's read rules leave out: the host's private
    /// ones, but those its mount namespace covers when it has one.
    fn unreadable(&self) -> Vec<PathBuf> {
        if !self.covered.is_empty() && self.job_namespace().is_some() {
            return self.hidden.clone();
        }
        self.private().cloned().collect()
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
    ) -> Result<JobFence, FenceError> {
        let missing = self.support_for(job).missing(job);
        if self.policy.required && !missing.is_empty() {
            return Err(FenceError::Unenforceable(missing));
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
            None => std::env::current_dir().map_err(FenceError::Workdir)?,
        };
        let workdir = workdir.canonicalize().unwrap_or(workdir);
        // A writable one is refused with the writable roots, below.
        if job.fs == FsAccess::ReadOnly
            && let Some(private) = self.private().find(|p| workdir.starts_with(p))
        {
            return Err(FenceError::InsidePrivate {
                workdir,
                private: private.clone(),
            });
        }
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
                return Err(FenceError::KernelFiles {
                    root: root.clone(),
                    kind,
                });
            }
            if let Some(private) = self
                .private()
                .find(|p| p.starts_with(root) || root.starts_with(p))
            {
                return Err(FenceError::HoldsPrivate {
                    root: root.clone(),
                    private: private.clone(),
                });
            }
        }
        let mut tmp = self.temporary_directory()?;
        let ruleset = self.ruleset(job, &roots, &mut tmp)?;
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
            for socket in service_sockets().iter() {
                let path = cstring(&socket.path)?;
                mounts.push(if socket.is_dir {
                    MountStep::Hide { path }
                } else {
                    MountStep::Cover { path }
                });
            }
            // Left out of the read rules only when there is a namespace
            // to cover them (see `unreadable`); the step skips one removed
            // since, which has nothing left to hide.
            if self.job_namespace().is_some() {
                for dir in &self.covered {
                    mounts.push(MountStep::Hide {
                        path: cstring(dir)?,
                    });
                }
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
            landlock: ruleset.as_ref().map(|fd| fd.as_raw_fd()),
            seccomp: match job.network {
                NetAccess::Off => network_off_filter().to_vec(),
                _ => Vec::new(),
            },
            drop_capabilities: rustix::process::geteuid().is_root(),
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
            seen_empty: std::cell::Cell::new(false),
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

    /// Takes back a job's fence at its end. Its temporary directory is kept
    /// for a later job only when `none_left`: the job's cgroup was removed,
    /// which proves that no process of it is left (Landlock rules follow the
    /// directory, not its name, so a process that outlived its job would
    /// still reach it); it is then emptied first. Otherwise it is removed.
    pub(crate) fn release(&self, job: JobFence, none_left: bool) {
        const SPARE: usize = 64;
        if !none_left || lock(&self.spare_tmp).len() >= SPARE {
            return;
        }
        // The directory itself, by a descriptor: a job that may write the
        // host's private directory (one whose sandbox leaves files open)
        // could put a link in its place, which a path would follow.
        let Ok(dir) = tmp::open_dir(rustix::fs::CWD, job.tmp.path()) else {
            return;
        };
        // Whatever mode the job left it with.
        let Ok(stat) = rustix::fs::fstat(&dir) else {
            return;
        };
        if stat.st_mode & 0o7777 != 0o700
            && rustix::fs::fchmod(&dir, rustix::fs::Mode::RWXU).is_err()
        {
            return;
        }
        // Seen empty at the job's end, when it had no process left to fill
        // it: nothing to list again.
        let emptied = job.seen_empty.get() || tmp::empty_tree(&dir);
        if emptied {
            lock(&self.spare_tmp).push(job.tmp.into_spare());
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
        job.hook_note(self.hooks_quiet(job))
    }

    /// Whether no change notice arrived since `job`'s start scan.
    fn hooks_quiet(&self, job: &JobFence) -> bool {
        job.watched.is_some_and(|(id, generation)| {
            lock(&self.scans).as_mut().is_some_and(|last| {
                last.roots == job.roots
                    && last
                        .watch
                        .as_mut()
                        .is_some_and(|w| w.id() == id && w.quiet_since(generation))
            })
        })
    }

    /// Whether taking `job`'s fence back at its end ([`Fence::end_note`],
    /// then [`Fence::release`]) is a few system calls, which a caller may
    /// then make in place rather than on a blocking thread: nothing to scan
    /// again (no writable root, or no change notice since its start scan)
    /// and nothing to remove (its temporary directory is empty).
    ///
    /// Called once it is known whether any of the job's processes is left:
    /// when none is, a directory seen empty here stays empty, and
    /// [`Fence::release`] does not list it again.
    pub(crate) fn ends_quickly(&self, job: &JobFence) -> bool {
        let empty =
            std::fs::read_dir(job.tmp.path()).is_ok_and(|mut entries| entries.next().is_none());
        job.seen_empty.set(empty);
        empty && (job.roots.is_empty() || self.hooks_quiet(job))
    }
}

/// `path` for a system call.
fn cstring(path: &Path) -> Result<CString, FenceError> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| FenceError::NulInPath(path.to_owned()))
}

/// An `O_PATH` descriptor of `path` itself (a symbolic link is not followed,
/// so a link planted in a listed directory grants nothing beyond itself).
fn path_fd(path: &Path) -> Result<OwnedFd, FenceError> {
    let c = cstring(path)?;
    // SAFETY: open of a NUL-terminated path with flags that need no mode.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(FenceError::Open {
            path: path.to_owned(),
            source: std::io::Error::last_os_error(),
        });
    }
    // SAFETY: a descriptor just opened and owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
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
