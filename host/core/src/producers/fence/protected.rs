//! What a fenced job must not write (or reach) though it lies inside a
//! writable root: each repository's git directory and the shell rc files of
//! `$HOME` (found by the scan, and kept while no change notice says
//! otherwise), the directories on the way that pin them, and the mounts' own
//! flags a read-only bind keeps. The user's services' sockets are in
//! `services`.

use std::path::{Path, PathBuf};

use crate::sync::lock;

use super::{Fence, HookScan, Watch, cstring};

/// Shell rc files and the like, in `$HOME`: protected when a writable root
/// holds them.
pub(super) const RC_FILES: &[&str] = &[
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

/// The last scan of a set of writable roots, with the change notices for
/// what it listed (`None` when the kernel gives none) and the notices'
/// generation it was taken at.
pub(super) struct LastScan {
    pub(super) roots: Vec<PathBuf>,
    pub(super) scan: std::sync::Arc<HookScan>,
    pub(super) watch: Option<Watch>,
    pub(super) generation: u64,
}

impl Fence {
    /// The scan of `roots` at a start, with the change notices' id and
    /// generation it was taken at: the last one of the same roots as it was
    /// while no notice arrived for what it listed, else listed again where
    /// it changed (a repository made since is found), so starts in a row
    /// list little and most list nothing.
    pub(super) fn scan(&self, roots: &[PathBuf]) -> (std::sync::Arc<HookScan>, Option<(u64, u64)>) {
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
}

/// The `MS_*` flags of the mount holding `path` that a read-only bind must
/// keep.
pub(super) fn mount_flags(path: &Path) -> libc::c_ulong {
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
pub(super) fn protected_paths(roots: &[PathBuf], hooks: &HookScan) -> Vec<PathBuf> {
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
pub(super) fn between(roots: &[PathBuf], path: &Path) -> Vec<PathBuf> {
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
