//! The Landlock part of a job's fence: its ruleset (files by hierarchy, TCP
//! by port, signal and abstract-socket scoping), and the read rules that
//! grant everything readable but the excluded paths, kept between starts
//! while the directories they list are unchanged. The last few rulesets are
//! kept too, for a later job whose own would be made from the same.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use ::landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, PathBeneath, Ruleset,
    RulesetAttr, RulesetCreatedAttr, Scope,
};

use crate::sync::lock;

use super::{Fence, FenceError, FsAccess, NetAccess, Sandbox, path_fd};

/// A job's Landlock ruleset with what it was made from. It is only read
/// (by each child's `landlock_restrict_self`), so a later job whose own
/// would be made from the same takes it as it is: one that got a finished
/// job's temporary directory (see [`Fence::release`]) in the same workdir.
/// Its start then skips making one, a rule at a time, with a descriptor
/// opened and a `stat` for each (about a hundred system calls).
pub(crate) struct KeptRuleset {
    key: RulesetKey,
    fd: Arc<OwnedFd>,
}

/// How many rulesets are kept: each holds a descriptor of the host's, and
/// the temporary directories given out again are the ones returned last.
const KEPT_RULESETS: usize = 16;

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
    /// The Landlock ruleset of one job; `None` when nothing is fenced by
    /// it. A kept one when it was made from the same (see
    /// [`KeptRuleset`]).
    pub(super) fn ruleset(
        &self,
        job: &Sandbox,
        roots: &[PathBuf],
        tmp: &Path,
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
            let mut excluded = self.hidden.clone();
            excluded.push(PathBuf::from("/dev"));
            **cached = Some(ReadRules::build(&excluded)?);
        }
        let read_rules = readable
            .as_ref()
            .and_then(|cached| cached.as_ref())
            .map_or(0, |rules| rules.build);
        let files: Vec<&Path> = if fences_fs {
            roots.iter().map(PathBuf::as_path).chain([tmp]).collect()
        } else {
            Vec::new()
        };
        {
            let mut kept = lock(&self.rulesets);
            if let Some(i) = kept.iter().position(|k| k.fits(job, &files, read_rules)) {
                let hit = kept.remove(i).expect("found above");
                let fd = hit.fd.clone();
                kept.push_front(hit);
                return Ok(Some(fd));
            }
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
        let Some(fd) = Option::<OwnedFd>::from(created).map(Arc::new) else {
            return Ok(None);
        };
        let mut kept = lock(&self.rulesets);
        // Rules made with an older build of the read rules never fit again.
        if read_rules != 0 {
            kept.retain(|k| k.key.read_rules == 0 || k.key.read_rules == read_rules);
        }
        kept.truncate(KEPT_RULESETS - 1);
        kept.push_front(KeptRuleset {
            key: RulesetKey {
                sandbox: job.clone(),
                files: ids,
                read_rules,
            },
            fd: fd.clone(),
        });
        Ok(Some(fd))
    }
}

impl KeptRuleset {
    /// Whether this is the ruleset `job` would be given now: the same
    /// sandbox and read rules, and the same files under the same names.
    fn fits(&self, job: &Sandbox, files: &[&Path], read_rules: u64) -> bool {
        self.key.sandbox == *job
            && self.key.read_rules == read_rules
            && self.key.files.len() == files.len()
            // Every name first: a storm in one workdir keeps many rulesets
            // for it, and only the one with the same temporary directory is
            // worth a look at the files.
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
    use super::*;

    #[test]
    fn a_ruleset_is_made_again_only_when_what_it_names_changed() {
        let spill = tempfile::tempdir().unwrap();
        let fence = Fence::new(
            crate::sandbox::FencePolicy {
                fs: FsAccess::WorkspaceWrite,
                network: NetAccess::Off,
                ..Default::default()
            },
            &[spill.path().to_owned()],
            spill.path(),
            Path::new("/bin/sh"),
        );
        if fence.support.landlock_abi < 1 {
            eprintln!("this kernel has no Landlock: nothing to keep");
            return;
        }
        let job = fence.policy.sandbox();
        let work = tempfile::tempdir().unwrap();
        let root = work.path().join("w");
        std::fs::create_dir(&root).unwrap();
        let tmp = spill.path().join("tmp-a");
        std::fs::create_dir(&tmp).unwrap();
        let make = |root: &Path, tmp: &Path| {
            fence
                .ruleset(&job, &[root.to_owned()], tmp)
                .unwrap()
                .expect("a ruleset")
        };
        // The same workdir and temporary directory: the same ruleset.
        assert!(steady(&fence, || Arc::ptr_eq(
            &make(&root, &tmp),
            &make(&root, &tmp)
        )));
        let other_tmp = spill.path().join("tmp-b");
        std::fs::create_dir(&other_tmp).unwrap();
        let open_net = Sandbox {
            network: NetAccess::On,
            ..job.clone()
        };
        assert!(steady(&fence, || {
            let first = make(&root, &tmp);
            // Another temporary directory, another sandbox: made anew.
            let other = fence
                .ruleset(&open_net, std::slice::from_ref(&root), &tmp)
                .unwrap();
            !Arc::ptr_eq(&first, &make(&root, &other_tmp))
                && other.is_some_and(|fd| !Arc::ptr_eq(&first, &fd))
                // Both are kept as well: the first is found again.
                && Arc::ptr_eq(&first, &make(&root, &tmp))
        }));
        // The workdir removed and made again under its name is another
        // directory, which the kept rules do not name.
        assert!(steady(&fence, || {
            let first = make(&root, &tmp);
            std::fs::remove_dir(&root).unwrap();
            std::fs::create_dir(&root).unwrap();
            let again = make(&root, &tmp);
            !Arc::ptr_eq(&first, &again) && Arc::ptr_eq(&again, &make(&root, &tmp))
        }));
        // No more than a few are kept, each a descriptor of the host's.
        assert!(steady(&fence, || {
            for i in 0..KEPT_RULESETS + 4 {
                let dir = spill.path().join(format!("tmp-{i}"));
                std::fs::create_dir_all(&dir).unwrap();
                make(&root, &dir);
            }
            lock(&fence.rulesets).len() == KEPT_RULESETS
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
