//! Each fenced job's own temporary directory (its `TMPDIR`), inside the
//! host's private directory: a new one, or one a finished job left, emptied,
//! once that job was proven to have no process left. A directory keeps the
//! Landlock ruleset made for it, which names it.

use std::ffi::CString;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};

use crate::sync::lock;

use super::landlock::KeptRuleset;
use super::{Fence, FenceError};

/// A job's own temporary directory, removed when this is dropped unless
/// kept for a later job.
pub(crate) struct JobTmp {
    pub(super) path: PathBuf,
    pub(super) keep: bool,
    /// The ruleset last made for this directory (each names its job's
    /// temporary directory, so it serves no other): a later job given the
    /// directory takes it when its own would be made from the same.
    pub(super) ruleset: Option<KeptRuleset>,
}

/// A finished job's emptied temporary directory, with its ruleset.
pub(super) struct SpareTmp {
    path: PathBuf,
    ruleset: Option<KeptRuleset>,
}

impl JobTmp {
    /// Its path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// This directory, emptied, for the spare list.
    pub(super) fn into_spare(mut self) -> SpareTmp {
        self.keep = true;
        SpareTmp {
            path: std::mem::take(&mut self.path),
            ruleset: self.ruleset.take(),
        }
    }
}

impl Drop for JobTmp {
    fn drop(&mut self) {
        if !self.keep {
            remove_tree(&self.path);
        }
    }
}

/// Removes the directory at `path` and all it holds, as [`empty_tree`]
/// does; a link put in its place is removed, not followed.
pub(super) fn remove_tree(path: &Path) {
    match open_dir(rustix::fs::CWD, path) {
        Ok(dir) => {
            if empty_tree(&dir) {
                let _ = std::fs::remove_dir(path);
            }
        }
        Err(_) => {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The directory `name` in `at` itself, for listing (a link is not
/// followed).
pub(super) fn open_dir(
    at: impl rustix::fd::AsFd,
    name: impl rustix::path::Arg,
) -> rustix::io::Result<OwnedFd> {
    rustix::fs::openat(
        at,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// A directory's device and inode.
fn id(dir: &OwnedFd) -> rustix::io::Result<(u64, u64)> {
    rustix::fs::fstat(dir).map(|st| (st.st_dev, st.st_ino))
}

/// How many entries [`empty_tree`] removes at most: a tree still growing
/// (a process of another job writing it) does not hold the host forever.
const MOST_ENTRIES: usize = 1 << 22;

/// Removes everything beneath the directory `dir`, through descriptors
/// only (no link is followed, and no path grows with the depth), one
/// directory open at a time: a job's temporary directory may hold a tree
/// tens of thousands of directories deep, which a recursive removal (the
/// standard library's) follows on the stack until it overflows. Whether
/// it is empty now; `false` also when a directory cannot be entered, or
/// one's parent is no longer the directory it was entered from.
pub(super) fn empty_tree(dir: &OwnedFd) -> bool {
    let Ok(mut current) = rustix::io::fcntl_dupfd_cloexec(dir, 0) else {
        return false;
    };
    // The names walked down, each with the directory it is in.
    let mut down: Vec<(CString, (u64, u64))> = Vec::new();
    let mut budget = MOST_ENTRIES;
    loop {
        let Some(listed) = remove_files(&current, &mut budget) else {
            return false;
        };
        match listed {
            // Entries removed while listing may hide others from the same
            // listing: listed again until one removes nothing.
            Listed::Removed => {}
            Listed::Directory(sub) => {
                let Ok(parent) = id(&current) else {
                    return false;
                };
                let Ok(child) = enter(&current, &sub) else {
                    return false;
                };
                down.push((sub, parent));
                current = child;
            }
            Listed::Empty => {
                let Some((name, parent_id)) = down.pop() else {
                    return true;
                };
                let Ok(parent) = open_dir(&current, c"..") else {
                    return false;
                };
                if id(&parent).ok() != Some(parent_id)
                    || rustix::fs::unlinkat(
                        &parent,
                        name.as_c_str(),
                        rustix::fs::AtFlags::REMOVEDIR,
                    )
                    .is_err()
                {
                    return false;
                }
                current = parent;
            }
        }
    }
}

/// The directory `name` in `dir`, opened to be emptied; one the job made
/// unreadable is made readable first (it is the host's to remove).
fn enter(dir: &OwnedFd, name: &CString) -> rustix::io::Result<OwnedFd> {
    match open_dir(dir, name.as_c_str()) {
        Err(rustix::io::Errno::ACCESS) => {
            rustix::fs::chmodat(
                dir,
                name.as_c_str(),
                Mode::RWXU,
                rustix::fs::AtFlags::empty(),
            )?;
            open_dir(dir, name.as_c_str())
        }
        opened => opened,
    }
}

/// What one listing of a directory in [`empty_tree`] found.
enum Listed {
    /// A directory, to empty first (files listed before it are removed).
    Directory(CString),
    /// No directory, and files, now removed.
    Removed,
    /// Nothing.
    Empty,
}

/// Removes the entries of `dir` up to its first directory; `None` when
/// listing or a removal failed, or the budget ran out.
fn remove_files(dir: &OwnedFd, budget: &mut usize) -> Option<Listed> {
    let entries = rustix::fs::Dir::read_from(dir).ok()?;
    let mut removed = false;
    for entry in entries {
        let entry = entry.ok()?;
        let name = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        *budget = budget.checked_sub(1)?;
        let unlinked = match entry.file_type() {
            rustix::fs::FileType::Directory => Err(rustix::io::Errno::ISDIR),
            _ => rustix::fs::unlinkat(dir, name, rustix::fs::AtFlags::empty()),
        };
        match unlinked {
            Ok(()) => removed = true,
            Err(rustix::io::Errno::ISDIR) => return Some(Listed::Directory(name.to_owned())),
            Err(_) => return None,
        }
    }
    Some(if removed {
        Listed::Removed
    } else {
        Listed::Empty
    })
}

impl Fence {
    /// A job's own temporary directory: one a finished job left, emptied,
    /// when that job was proven to have no process left (see
    /// [`Fence::release`]), else a new one (a `mkdir` on ext4 costs more than
    /// the rest of a start).
    pub(super) fn temporary_directory(&self) -> Result<JobTmp, FenceError> {
        if let Some(spare) = lock(&self.spare_tmp).pop() {
            return Ok(JobTmp {
                path: spare.path,
                keep: false,
                ruleset: spare.ruleset,
            });
        }
        tempfile::Builder::new()
            .prefix("tmp-")
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir_in(&self.tmp_parent)
            .map(|dir| JobTmp {
                path: dir.keep(),
                keep: false,
                ruleset: None,
            })
            .map_err(FenceError::TemporaryDirectory)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_of_any_depth_is_removed_without_following_a_link() {
        let root = tempfile::tempdir().unwrap();
        let tmp = root.path().join("tmp-a");
        let outside = root.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("keep"), "x").unwrap();
        std::fs::create_dir(&tmp).unwrap();
        // Deeper than any path, made by descriptors as a job's shell would
        // by `cd`.
        let mut dir = open_dir(rustix::fs::CWD, &tmp).unwrap();
        for i in 0..20_000 {
            if i % 1000 == 0 {
                let file = rustix::fs::openat(
                    &dir,
                    "f",
                    OFlags::CREATE | OFlags::WRONLY | OFlags::CLOEXEC,
                    Mode::RUSR,
                )
                .unwrap();
                drop(file);
                rustix::fs::symlinkat(&outside, &dir, "link").unwrap();
            }
            rustix::fs::mkdirat(&dir, "d", Mode::RWXU).unwrap();
            dir = open_dir(&dir, "d").unwrap();
        }
        // One the job made unreadable on the way.
        std::fs::set_permissions(
            tmp.join("d/d"),
            std::os::unix::fs::PermissionsExt::from_mode(0o000),
        )
        .unwrap();
        drop(dir);
        // On a small stack: nothing grows with the depth.
        let path = tmp.clone();
        std::thread::Builder::new()
            .stack_size(128 * 1024)
            .spawn(move || {
                let dir = open_dir(rustix::fs::CWD, &path).unwrap();
                assert!(empty_tree(&dir));
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0);
        assert!(outside.join("keep").exists());
        // A link in the directory's place is removed, not followed.
        std::fs::remove_dir(&tmp).unwrap();
        std::os::unix::fs::symlink(&outside, &tmp).unwrap();
        remove_tree(&tmp);
        assert!(!tmp.exists() && outside.join("keep").exists());
        std::fs::create_dir(&tmp).unwrap();
        std::fs::write(tmp.join("f"), "x").unwrap();
        remove_tree(&tmp);
        assert!(!tmp.exists());
    }
}
