//! The Landlock part of a job's fence: its ruleset (files by hierarchy, TCP
//! by port, signal and abstract-socket scoping), and the read rules that
//! grant everything readable but the excluded paths, kept between starts
//! while the directories they list are unchanged.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use ::landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, PathBeneath, Ruleset,
    RulesetAttr, RulesetCreatedAttr, Scope,
};

use crate::sync::lock;

use super::{Fence, FenceError, FsAccess, NetAccess, Sandbox, path_fd};

/// The read rules of [`readable`], as open descriptors with their access,
/// and the directories whose listing they come from, with each one's
/// change time then; with `/` (listed by every job) and the devices a
/// program expects, opened once too.
pub(super) struct ReadRules {
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
        Ok(ReadRules {
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
    /// The Landlock ruleset of one job; `None` when nothing is fenced by it.
    pub(super) fn ruleset(
        &self,
        job: &Sandbox,
        roots: &[PathBuf],
        tmp: &Path,
    ) -> Result<Option<OwnedFd>, FenceError> {
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
        let abi = ::landlock::ABI::from(reached);
        let mut ruleset = Ruleset::default().set_compatibility(CompatLevel::BestEffort);
        if job.fs != FsAccess::Full {
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
            for root in roots.iter().map(PathBuf::as_path).chain([tmp]) {
                let access = if root.is_dir() {
                    all
                } else {
                    all & AccessFs::from_file(abi)
                };
                created = created
                    .add_rule(PathBeneath::new(path_fd(root)?, access))
                    .map_err(FenceError::Ruleset)?;
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
        Ok(created.into())
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
