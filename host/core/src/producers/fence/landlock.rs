//! The Landlock part of a job's fence: its ruleset (files by hierarchy, TCP
//! by port, signal and abstract-socket scoping), and the read rules that
//! grant everything readable but the excluded paths, kept between starts
//! while the directories they list are unchanged. A job's ruleset is kept
//! with its temporary directory, for a later job given that directory
//! whose own would be made from the same.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use ::landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, PathBeneath, Ruleset,
    RulesetAttr, RulesetCreatedAttr, Scope,
};

use crate::sync::lock;

use super::{Fence, FenceError, FsAccess, JobTmp, NetAccess, Sandbox, path_fd};

/// A job's Landlock ruleset with what it was made from, kept with the
/// job's temporary directory (which it names). It is only read (by each
/// child's `landlock_restrict_self`), so a later job given the directory
/// (see [`Fence::release`]) whose own ruleset would be made from the same
/// (in the same workdir, with the same sandbox) takes it as it is. Its
/// start then skips making one, a rule at a time, with a descriptor opened
/// and a `stat` for each (about fifty system calls).
pub(crate) struct KeptRuleset {
    key: RulesetKey,
    fd: Arc<OwnedFd>,
    _counted: Counted,
}

/// How many rulesets are kept at once, by live jobs' and spare temporary
/// directories together: each holds a descriptor of the host's, and the
/// spare directories are at most 64 (a job started beyond this makes its
/// ruleset, and drops it once spawned, as a job keeping none does).
const KEPT_RULESETS: usize = 128;

/// One of the [`KEPT_RULESETS`], counted until dropped.
struct Counted(Arc<AtomicUsize>);

impl Counted {
    /// One more of `count`, if it is under the bound.
    fn take(count: &Arc<AtomicUsize>) -> Option<Counted> {
        count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < KEPT_RULESETS).then_some(n + 1)
            })
            .ok()
            .map(|_| Counted(count.clone()))
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What a ruleset is made from. The files are named by device and inode as
/// they were when their rules were made: a writable root removed and made
/// anew under the same name is another directory, and another rule.
struct RulesetKey {
    sandbox: Sandbox,
    /// Each writable root, and the job's temporary directory last.
    files: Vec<(PathBuf, FileId)>,
    /// The read rules' build (0 for a ruleset without them).
    read_rules: u64,
}

/// A file's device and inode, and whether it is a directory.
#[derive(Clone, Copy, PartialEq)]
struct FileId {
    dev: u64,
    ino: u64,
    dir: bool,
}

impl FileId {
    /// The file at `path` itself (a link is not followed, as [`path_fd`]
    /// does not).
    fn of_path(path: &Path) -> Option<FileId> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::symlink_metadata(path).ok()?;
        Some(FileId {
            dev: meta.dev(),
            ino: meta.ino(),
            dir: meta.is_dir(),
        })
    }

    /// The file `fd` (opened at `path`) holds open.
    fn of_fd(fd: &OwnedFd, path: &Path) -> Result<FileId, FenceError> {
        let stat = rustix::fs::fstat(fd).map_err(|e| FenceError::Open {
            path: path.to_owned(),
            source: e.into(),
        })?;
        Ok(FileId {
            dev: stat.st_dev,
            ino: stat.st_ino,
            dir: rustix::fs::FileType::from_raw_mode(stat.st_mode)
                == rustix::fs::FileType::Directory,
        })
    }
}

/// The read rules of [`readable`], as open descriptors with their access,
/// and the directories whose listing they come from, with each one's
/// change time then; with `/` (listed by every job) and the devices a
/// program expects, opened once too.
pub(super) struct ReadRules {
    /// Which build this is, unique in the process: a ruleset made with
    /// these rules says so in its [`RulesetKey`].
    build: u64,
    pub(super) listed: Vec<(PathBuf, Option<std::time::SystemTime>)>,
    pub(super) rules: Vec<(OwnedFd, bool)>,
    pub(super) root: OwnedFd,
    /// Each device, and whether it may be written (and `ioctl`ed).
    pub(super) devices: Vec<(OwnedFd, bool)>,
}

/// The devices a program expects, by name, and whether a job may write
/// them; the links in `/dev` (`fd`, `stdin`, ...) lead into `/proc/self`,
/// which is read.
pub(super) const DEVICES: [(&str, bool); 6] = [
    ("/dev/null", true),
    ("/dev/zero", true),
    ("/dev/full", true),
    ("/dev/tty", true),
    ("/dev/random", false),
    ("/dev/urandom", false),
];

impl ReadRules {
    pub(super) fn build(excluded: &[PathBuf]) -> Result<ReadRules, FenceError> {
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
        static BUILDS: AtomicU64 = AtomicU64::new(1);
        Ok(ReadRules {
            build: BUILDS.fetch_add(1, Ordering::Relaxed),
            listed,
            rules,
            root: path_fd(Path::new("/"))?,
            devices,
        })
    }

    pub(super) fn is_current(&self) -> bool {
        self.listed.iter().all(|(dir, at)| changed_at(dir) == *at)
    }
}

/// A file's change time, which a job cannot set (it can set a modification
/// time): a new entry in a directory changes it.
pub(super) fn changed_at(path: &Path) -> Option<std::time::SystemTime> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    let secs = u64::try_from(meta.ctime()).ok()?;
    let nanos = u32::try_from(meta.ctime_nsec()).ok()?;
    Some(std::time::UNIX_EPOCH + std::time::Duration::new(secs, nanos))
}

impl Fence {
    /// The Landlock ruleset of one job whose temporary directory is `tmp`;
    /// `None` when nothing is fenced by it. The one `tmp` keeps when it was
    /// made from the same (see [`KeptRuleset`]); else one made now, which
    /// `tmp` then keeps.
    pub(super) fn ruleset(
        &self,
        job: &Sandbox,
        roots: &[PathBuf],
        tmp: &mut JobTmp,
    ) -> Result<Option<Arc<OwnedFd>>, FenceError> {
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
        let fences_fs = job.fs != FsAccess::Full;
        let mut readable = fences_fs.then(|| lock(&self.readable));
        if let Some(cached) = readable.as_mut()
            && !cached.as_ref().is_some_and(ReadRules::is_current)
        {
            // `/dev` is not read whole: raw disks would show every file.
            let mut excluded = self.unreadable();
            excluded.push(PathBuf::from("/dev"));
            **cached = Some(ReadRules::build(&excluded)?);
        }
        let read_rules = readable
            .as_ref()
            .and_then(|cached| cached.as_ref())
            .map_or(0, |rules| rules.build);
        let files: Vec<&Path> = if fences_fs {
            roots
                .iter()
                .map(PathBuf::as_path)
                .chain([tmp.path()])
                .collect()
        } else {
            Vec::new()
        };
        if let Some(kept) = &tmp.ruleset
            && kept.fits(job, &files, read_rules)
        {
            return Ok(Some(kept.fd.clone()));
        }
        let abi = ::landlock::ABI::from(reached);
        let mut ruleset = Ruleset::default().set_compatibility(CompatLevel::BestEffort);
        if fences_fs {
            ruleset = ruleset
                .handle_access(AccessFs::from_all(abi))
                .map_err(FenceError::Ruleset)?;
        }
        if fences_net {
            ruleset = ruleset
                .handle_access(AccessNet::from_all(abi))
                .map_err(FenceError::Ruleset)?;
        }
        if reached >= 6 {
            ruleset = ruleset
                .scope(Scope::from_all(abi))
                .map_err(FenceError::Ruleset)?;
        }
        let mut created = ruleset.create().map_err(FenceError::Ruleset)?;
        let mut ids = Vec::with_capacity(files.len());
        if let Some(cached) = readable {
            let read = AccessFs::from_read(abi);
            let all = AccessFs::from_all(abi);
            let rules = cached.as_ref().expect("built above");
            // Listing any directory: names, not contents.
            created = created
                .add_rule(PathBeneath::new(rules.root.as_fd(), AccessFs::ReadDir))
                .map_err(FenceError::Ruleset)?;
            for (fd, is_dir) in &rules.rules {
                let access = if *is_dir {
                    read
                } else {
                    read & AccessFs::from_file(abi)
                };
                created = created
                    .add_rule(PathBeneath::new(fd.as_fd(), access))
                    .map_err(FenceError::Ruleset)?;
            }
            for (fd, write) in &rules.devices {
                let access = if *write {
                    (AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::IoctlDev) & all
                } else {
                    AccessFs::ReadFile.into()
                };
                created = created
                    .add_rule(PathBeneath::new(fd.as_fd(), access))
                    .map_err(FenceError::Ruleset)?;
            }
            drop(cached);
            for file in &files {
                // The rule is for the file opened here; the key names that
                // file, whatever the name leads to later.
                let fd = path_fd(file)?;
                let id = FileId::of_fd(&fd, file)?;
                let access = if id.dir {
                    all
                } else {
                    all & AccessFs::from_file(abi)
                };
                created = created
                    .add_rule(PathBeneath::new(fd, access))
                    .map_err(FenceError::Ruleset)?;
                ids.push((file.to_path_buf(), id));
            }
        }
        if let NetAccess::Ports(ports) = &job.network
            && reached >= 4
        {
            for port in ports {
                created = created
                    .add_rule(NetPort::new(*port, AccessNet::from_all(abi)))
                    .map_err(FenceError::Ruleset)?;
            }
        }
        let fd = Option::<OwnedFd>::from(created).map(Arc::new);
        // The directory's last one, if the bound allows.
        tmp.ruleset = None;
        if let Some(fd) = &fd
            && let Some(counted) = Counted::take(&self.rulesets_kept)
        {
            tmp.ruleset = Some(KeptRuleset {
                key: RulesetKey {
                    sandbox: job.clone(),
                    files: ids,
                    read_rules,
                },
                fd: fd.clone(),
                _counted: counted,
            });
        }
        Ok(fd)
    }
}

impl KeptRuleset {
    /// Whether this is the ruleset `job` would be given now: the same
    /// sandbox and read rules, and the same files under the same names.
    fn fits(&self, job: &Sandbox, files: &[&Path], read_rules: u64) -> bool {
        self.key.sandbox == *job
            && self.key.read_rules == read_rules
            && self.key.files.len() == files.len()
            // Every name first, then each file's identity.
            && self.key.files.iter().zip(files).all(|((path, _), file)| path == file)
            && self
                .key
                .files
                .iter()
                .zip(files)
                .all(|((_, id), file)| FileId::of_path(file) == Some(*id))
    }
}

/// Every path to grant read on so that all of `dir` is readable except the
/// `excluded` paths (and what lies beneath them): each entry of a directory
/// on the way to an excluded path but that one, recursively; every other
/// entry whole. With whether each is a directory.
pub(super) fn readable(dir: &Path, excluded: &[PathBuf]) -> Vec<(PathBuf, bool)> {
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

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;

    /// A `workspace-write`, network-off fence whose private directory is
    /// `spill`; `None` (said) when this kernel has no Landlock.
    fn workspace_fence(spill: &Path) -> Option<Fence> {
        let fence = Fence::new(
            crate::sandbox::FencePolicy {
                fs: FsAccess::WorkspaceWrite,
                network: NetAccess::Off,
                ..Default::default()
            },
            &[spill.to_owned()],
            &[],
            spill,
            Path::new("/bin/sh"),
        );
        if fence.support.landlock_abi < 1 {
            eprintln!("this kernel has no Landlock: nothing to keep");
            return None;
        }
        Some(fence)
    }

    #[test]
    fn a_ruleset_is_made_again_only_when_what_it_names_changed() {
        let spill = tempfile::tempdir().unwrap();
        let Some(fence) = workspace_fence(spill.path()) else {
            return;
        };
        let job = fence.policy.sandbox();
        let work = tempfile::tempdir().unwrap();
        let root = work.path().join("w");
        std::fs::create_dir(&root).unwrap();
        let tmp = RefCell::new(fence.temporary_directory().unwrap());
        let make = |sandbox: &Sandbox, tmp: &RefCell<JobTmp>| {
            fence
                .ruleset(sandbox, std::slice::from_ref(&root), &mut tmp.borrow_mut())
                .unwrap()
                .expect("a ruleset")
        };
        // The same workdir and temporary directory: the same ruleset.
        assert!(steady(&fence, || Arc::ptr_eq(
            &make(&job, &tmp),
            &make(&job, &tmp)
        )));
        let other_tmp = RefCell::new(fence.temporary_directory().unwrap());
        let open_net = Sandbox {
            network: NetAccess::On,
            ..job.clone()
        };
        assert!(steady(&fence, || {
            let first = make(&job, &tmp);
            // Another temporary directory: made anew, and kept by it.
            let other = make(&job, &other_tmp);
            !Arc::ptr_eq(&first, &other)
                && Arc::ptr_eq(&first, &make(&job, &tmp))
                && Arc::ptr_eq(&other, &make(&job, &other_tmp))
        }));
        assert!(steady(&fence, || {
            let first = make(&job, &tmp);
            // Another sandbox in the same directory: made anew, and kept in
            // the first one's place.
            let open = make(&open_net, &tmp);
            !Arc::ptr_eq(&first, &open)
                && Arc::ptr_eq(&open, &make(&open_net, &tmp))
                && !Arc::ptr_eq(&first, &make(&job, &tmp))
        }));
        // The workdir removed and made again under its name is another
        // directory, which the kept rules do not name.
        assert!(steady(&fence, || {
            let first = make(&job, &tmp);
            std::fs::remove_dir(&root).unwrap();
            std::fs::create_dir(&root).unwrap();
            let again = make(&job, &tmp);
            !Arc::ptr_eq(&first, &again) && Arc::ptr_eq(&again, &make(&job, &tmp))
        }));
        // No more than a bound are kept, each a descriptor of the host's;
        // one dropped with its directory makes room for another.
        let kept = || fence.rulesets_kept.load(Ordering::Acquire);
        assert_eq!(kept(), 2);
        let mut many: Vec<RefCell<JobTmp>> = (0..KEPT_RULESETS)
            .map(|_| RefCell::new(fence.temporary_directory().unwrap()))
            .collect();
        for tmp in &many {
            make(&job, tmp);
        }
        assert_eq!(kept(), KEPT_RULESETS);
        assert!(
            many.iter()
                .rev()
                .take(2)
                .all(|t| t.borrow().ruleset.is_none())
        );
        let last = many.pop().unwrap();
        drop(tmp);
        make(&job, &last);
        assert!(last.borrow().ruleset.is_some());
        drop((many, other_tmp, last));
        assert_eq!(kept(), 0);
    }

    #[test]
    fn a_finished_job_s_directory_brings_its_ruleset_to_the_next_job() {
        let spill = tempfile::tempdir().unwrap();
        let Some(fence) = workspace_fence(spill.path()) else {
            return;
        };
        let job = fence.policy.sandbox();
        let work = tempfile::tempdir().unwrap();
        assert!(steady(&fence, || {
            let first = fence.prepare(Some(work.path()), &job).unwrap();
            let (dir, ruleset) = (first.tmp.path().to_owned(), first.ruleset.clone());
            std::fs::write(dir.join("left"), "x").unwrap();
            fence.release(first, true);
            let next = fence.prepare(Some(work.path()), &job).unwrap();
            let same = next.tmp.path() == dir
                && std::fs::read_dir(&dir).unwrap().next().is_none()
                && ruleset
                    .zip(next.ruleset.clone())
                    .is_some_and(|(a, b)| Arc::ptr_eq(&a, &b));
            // A job that may have left a process behind gives back nothing.
            fence.release(next, false);
            same && !dir.exists()
        }));
    }

    /// What `check` answers, from a try during which the read rules were
    /// not made again: other tests make directories in `/tmp`, which the
    /// read rules list, and a new build fits no kept ruleset.
    fn steady(fence: &Fence, check: impl Fn() -> bool) -> bool {
        let build = || lock(&fence.readable).as_ref().map(|rules| rules.build);
        for _ in 0..100 {
            let before = build();
            let answer = check();
            if before.is_some() && build() == before {
                return answer;
            }
        }
        panic!("the read rules were made again at every try");
    }

    #[test]
    pub(super) fn the_readable_set_leaves_out_the_excluded_paths_and_only_them() {
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
