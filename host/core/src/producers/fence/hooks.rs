//! The scan for git repositories and their hooks under a fenced job's
//! writable roots: what the job's mount namespace binds read-only at its
//! start, and what its status names when the job created or changed a hook.
//!
//! (Over 500 lines: the scan and the inotify watch that lets starts reuse it
//! are one mechanism: what the scan lists is what the watch watches.)

use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rustix::fs::inotify;

use super::JobFence;
use super::landlock::changed_at;

/// How deep under a writable root repositories are looked for (a root's own
/// `.git` is depth 0), and how many directories at most: the scan runs at a
/// job's start (shared by starts close together) and at its end.
const SCAN_DEPTH: usize = 3;
const SCAN_DIRS: usize = 2048;

/// Directories never descended into when looking for repositories (besides
/// hidden ones): large, generated, and not where a repository lives.
const SCAN_SKIP: &[&str] = &["node_modules", "target", "__pycache__", "build", "dist"];

/// A hook file's inode and change time: neither can a job set (it can
/// set a file's modification time).
fn stamp(path: &Path) -> Option<(u64, i128)> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    Some((
        meta.ino(),
        i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
    ))
}

/// The `.git` directories under some roots and the hook files in them
/// (`*.sample` files are not hooks: git never runs them).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct HookScan {
    repositories: Vec<PathBuf>,
    /// Each hook file with its inode and change time (of the file a link
    /// leads to).
    files: std::collections::BTreeMap<PathBuf, (u64, i128)>,
    /// Each directory listed, with its depth below its root and its
    /// change time before it was listed: a later scan lists again only
    /// those that changed (a new entry anywhere changes its directory's
    /// time) and what is new below them.
    dirs: std::collections::BTreeMap<PathBuf, (usize, Option<std::time::SystemTime>)>,
    /// Each repository's hooks directory's change time.
    hooks_dirs: std::collections::BTreeMap<PathBuf, Option<std::time::SystemTime>>,
    /// When the scan began.
    began: Option<std::time::SystemTime>,
}

/// How much older than a scan a directory's change time must be for
/// an unchanged time to mean an unchanged directory: file times come from a
/// coarse clock (a tick of a few milliseconds), so a change right after the
/// scan can leave the time as it was.
const TIME_GRAIN: std::time::Duration = std::time::Duration::from_secs(2);

impl HookScan {
    /// Scans `roots` (bounded: [`SCAN_DEPTH`], [`SCAN_DIRS`]), adding each
    /// directory to `watch` before listing it.
    pub(crate) fn of(roots: &[PathBuf], watch: Option<&Watch>) -> HookScan {
        let mut scan = HookScan {
            began: Some(std::time::SystemTime::now()),
            ..HookScan::default()
        };
        let mut budget = SCAN_DIRS;
        for root in roots {
            scan.walk(root, 0, &mut budget, watch);
        }
        scan
    }

    /// The same roots scanned again, listing only what changed since `self`
    /// (and adding what it lists to `watch`, which holds the rest already).
    pub(crate) fn again(&self, watch: Option<&Watch>) -> HookScan {
        let mut scan = HookScan {
            began: Some(std::time::SystemTime::now()),
            ..HookScan::default()
        };
        let mut budget = SCAN_DIRS;
        // A time this recent says nothing (see [`TIME_GRAIN`]).
        let settled = |at: Option<std::time::SystemTime>| matches!((at, self.began), (Some(at), Some(began)) if at + TIME_GRAIN < began);
        for (dir, &(depth, at)) in &self.dirs {
            let now = changed_at(dir);
            if now.is_none() {
                continue;
            }
            budget = budget.saturating_sub(1);
            if now == at && settled(at) {
                scan.dirs.insert(dir.clone(), (depth, at));
            } else {
                scan.list(dir, depth, &mut budget, watch, |d| {
                    self.dirs.contains_key(d)
                });
            }
        }
        for git in &self.repositories {
            let hooks = git.join("hooks");
            let at = changed_at(&hooks);
            if at.is_none() && !git.is_dir() {
                continue;
            }
            let before = self.hooks_dirs.get(git).copied().flatten();
            if at == before && settled(before) {
                // The same entries: only their contents may have changed.
                for (path, _) in self.files.range(hooks.clone()..) {
                    if !path.starts_with(&hooks) {
                        break;
                    }
                    if let Some(stamp) = stamp(path) {
                        scan.files.insert(path.clone(), stamp);
                    }
                }
                scan.repositories.push(git.clone());
                scan.hooks_dirs.insert(git.clone(), at);
            } else if !scan.repositories.contains(git) {
                scan.repository(git.clone(), watch);
            }
        }
        scan
    }

    fn walk(&mut self, dir: &Path, depth: usize, budget: &mut usize, watch: Option<&Watch>) {
        if *budget == 0 {
            return;
        }
        *budget -= 1;
        self.list(dir, depth, budget, watch, |_| false);
    }

    /// Lists `dir`: notes a `.git` in it, and walks each directory below it
    /// that `known` does not name (those are scanned on their own).
    fn list(
        &mut self,
        dir: &Path,
        depth: usize,
        budget: &mut usize,
        watch: Option<&Watch>,
        known: impl Fn(&Path) -> bool,
    ) {
        if let Some(watch) = watch {
            watch.add(dir, Watch::DIR);
        }
        let at = changed_at(dir);
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        self.dirs.insert(dir.to_owned(), (depth, at));
        let mut below = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            // The listing's own file types: no stat per entry.
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let path = entry.path();
            if name == ".git" {
                if !self.repositories.contains(&path) {
                    self.repository(path, watch);
                }
            } else if depth < SCAN_DEPTH
                && !name.as_bytes().starts_with(b".")
                && !SCAN_SKIP.iter().any(|s| name == *s)
                && !known(&path)
            {
                below.push(path);
            }
        }
        for dir in below {
            self.walk(&dir, depth + 1, budget, watch);
        }
    }

    /// Notes the repository whose git directory is `git`, with its hooks.
    fn repository(&mut self, git: PathBuf, watch: Option<&Watch>) {
        let hooks = git.join("hooks");
        if let Some(watch) = watch {
            // A hooks directory made, removed or renamed shows in the git
            // directory; a hook made or written, in the hooks directory
            // (followed, when it is a link: `hooks -> ../.githooks`).
            watch.add(&git, Watch::DIR);
            watch.add(&hooks, Watch::HOOKS);
        }
        self.hooks_dirs.insert(git.clone(), changed_at(&hooks));
        if let Ok(entries) = std::fs::read_dir(&hooks) {
            for entry in entries.flatten() {
                let path = entry.path();
                if path.extension().is_some_and(|e| e == "sample") {
                    continue;
                }
                if let Some(stamp) = stamp(&path) {
                    if let Some(watch) = watch {
                        // The file itself, followed: a hook that is a link
                        // into the worktree, or has another name (a hard
                        // link), is written where the hooks directory does
                        // not see it.
                        watch.add(&path, Watch::FILE);
                    }
                    self.files.insert(path, stamp);
                }
            }
        }
        self.repositories.push(git);
    }

    /// The git directories found.
    pub(super) fn repositories(&self) -> &[PathBuf] {
        &self.repositories
    }

    /// The hook files in `after` that are new or changed since `self`.
    pub(crate) fn changed(&self, after: &HookScan) -> Vec<PathBuf> {
        after
            .files
            .iter()
            .filter(|(path, stamp)| self.files.get(*path) != Some(*stamp))
            .map(|(path, _)| path.clone())
            .collect()
    }
}

impl JobFence {
    /// The hook files the job created or changed under its writable roots,
    /// as a note for its status: `hooks changed: a, b`; `None` for none.
    /// `quiet` says that no change notice arrived for the scanned
    /// directories since the job's start scan, which then still holds.
    pub(super) fn hook_note(&self, quiet: bool) -> Option<String> {
        if quiet {
            return None;
        }
        // The scan at the start, listed again where it changed.
        let changed = self.hooks.changed(&self.hooks.again(None));
        if changed.is_empty() {
            return None;
        }
        const SHOWN: usize = 8;
        let mut names: Vec<String> = changed
            .iter()
            .take(SHOWN)
            .map(|p| p.display().to_string())
            .collect();
        if changed.len() > SHOWN {
            names.push(format!("and {} more", changed.len() - SHOWN));
        }
        Some(crate::words::hooks_changed(&names))
    }
}

/// Change notices (inotify) for every directory a scan listed, each
/// repository's git and hooks directories included: while none arrives, the
/// scan still holds, and neither a start nor an end need look again. A
/// directory is added before it is listed, so a change during the listing
/// is noticed too; reads of a directory are not subscribed to, so the scans
/// themselves raise none.
///
/// Hooks directories and hook files are watched through links (a hook that
/// leads into the worktree, a hooks directory that is a link), and each hook
/// file by its inode, so a write through another name of it is seen too.
/// What it cannot see, the scan by change times it stands in for could: a
/// hook file written through a shared memory map raises no notice. A job
/// can do that only to a hook it could open for writing, one in a repository
/// it made after its start, which its own status names anyway.
pub(crate) struct Watch {
    fd: OwnedFd,
    /// Tells watches of different scans apart.
    id: u64,
    /// How many reads found notices.
    generation: u64,
    /// Set when a directory could not be added (the user's limit of
    /// watches): the watch then proves nothing.
    broken: AtomicBool,
}

impl Watch {
    /// What changes a listed directory (or a git directory): an entry made,
    /// removed, renamed or changed in its attributes, or the directory
    /// itself removed or renamed.
    pub(super) const DIR: inotify::WatchFlags = inotify::WatchFlags::CREATE
        .union(inotify::WatchFlags::DELETE)
        .union(inotify::WatchFlags::MOVED_FROM)
        .union(inotify::WatchFlags::MOVED_TO)
        .union(inotify::WatchFlags::ATTRIB)
        .union(inotify::WatchFlags::DELETE_SELF)
        .union(inotify::WatchFlags::MOVE_SELF)
        .union(inotify::WatchFlags::ONLYDIR)
        .union(inotify::WatchFlags::DONT_FOLLOW);
    /// A hooks directory, followed when it is a link: its files' contents
    /// too.
    const HOOKS: inotify::WatchFlags = Watch::DIR
        .difference(inotify::WatchFlags::DONT_FOLLOW)
        .union(inotify::WatchFlags::MODIFY)
        .union(inotify::WatchFlags::CLOSE_WRITE);
    /// A hook file, followed: its contents, its attributes, its end.
    const FILE: inotify::WatchFlags = inotify::WatchFlags::MODIFY
        .union(inotify::WatchFlags::CLOSE_WRITE)
        .union(inotify::WatchFlags::ATTRIB)
        .union(inotify::WatchFlags::DELETE_SELF)
        .union(inotify::WatchFlags::MOVE_SELF);

    /// A new watch, with nothing in it; `None` when the kernel gives none.
    pub(crate) fn new() -> Option<Watch> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        static SAID: std::sync::Once = std::sync::Once::new();
        let fd = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK)
            .map_err(|e| {
                SAID.call_once(|| tracing::info!("jobs: no change notices for the hook scan: {e}"));
            })
            .ok()?;
        Some(Watch {
            fd,
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            generation: 0,
            broken: AtomicBool::new(false),
        })
    }

    /// Watches `path`. One that does not exist (or is not a directory
    /// where one is watched for) is not an error: its parent's notices tell
    /// when it appears; nor is one this user may not read, which no scan
    /// lists either.
    fn add(&self, path: &Path, flags: inotify::WatchFlags) {
        match inotify::add_watch(&self.fd, path, flags) {
            Ok(_) => {}
            Err(
                rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR | rustix::io::Errno::ACCESS,
            ) => {}
            Err(e) => {
                if !self.broken.swap(true, Ordering::Relaxed) {
                    tracing::info!(
                        "jobs: the hook scan looks again at every start and end: cannot watch {}: {e}",
                        path.display()
                    );
                }
            }
        }
    }

    /// Which watch this is.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The generation now: notices read so far are counted.
    pub(crate) fn generation(&mut self) -> u64 {
        self.drain();
        self.generation
    }

    /// Whether no notice arrived since `generation`, and the watch holds.
    pub(crate) fn quiet_since(&mut self, generation: u64) -> bool {
        self.drain();
        !self.broken.load(Ordering::Relaxed) && self.generation == generation
    }

    /// Reads every pending notice: any at all (or an overflowed queue, or an
    /// error) counts as a change.
    fn drain(&mut self) {
        let mut buf = [0_u8; 4096];
        let mut any = false;
        loop {
            match rustix::io::read(&self.fd, &mut buf) {
                Ok(0) => break,
                Ok(_) => any = true,
                Err(rustix::io::Errno::AGAIN) => break,
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => {
                    any = true;
                    self.broken.store(true, Ordering::Relaxed);
                    break;
                }
            }
        }
        if any {
            self.generation += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hook_scan_names_new_and_changed_hooks_but_not_samples() {
        let root = tempfile::tempdir().unwrap();
        let hooks = root.path().join("repo/.git/hooks");
        std::fs::create_dir_all(&hooks).unwrap();
        std::fs::write(hooks.join("pre-commit"), "old").unwrap();
        let before = HookScan::of(&[root.path().to_owned()], None);
        std::fs::write(hooks.join("pre-commit"), "changed!").unwrap();
        std::fs::write(hooks.join("pre-push.sample"), "x").unwrap();
        let nested = root.path().join("repo/sub/.git/hooks");
        std::fs::create_dir_all(&nested).unwrap();
        std::fs::write(nested.join("post-checkout"), "x").unwrap();
        let after = HookScan::of(&[root.path().to_owned()], None);
        let want = [hooks.join("pre-commit"), nested.join("post-checkout")];
        assert_eq!(before.changed(&after), want);
        // Listing again only what changed finds the same.
        assert_eq!(before.changed(&before.again(None)), want);
    }

    #[test]
    fn listing_again_finds_a_repository_made_deep_in_an_old_directory() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("a/b")).unwrap();
        // A hook that stays as it was: never named.
        std::fs::create_dir_all(root.path().join(".git/hooks")).unwrap();
        std::fs::write(root.path().join(".git/hooks/pre-commit"), "kept").unwrap();
        // Old directories: an unchanged time then means unchanged.
        let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        for dir in ["", "a", "a/b"] {
            std::fs::File::open(root.path().join(dir))
                .unwrap()
                .set_modified(hour_ago)
                .unwrap();
        }
        let before = HookScan::of(&[root.path().to_owned()], None);
        let again = before.again(None);
        assert!(again.changed(&before.again(None)).is_empty());
        assert_eq!(again.dirs.len(), 3, "{:?}", again.dirs);
        let hooks = root.path().join("a/b/c/.git/hooks");
        std::fs::create_dir_all(&hooks).unwrap();
        std::fs::write(hooks.join("pre-push"), "evil").unwrap();
        assert_eq!(
            before.changed(&before.again(None)),
            [hooks.join("pre-push")]
        );
    }

    #[test]
    fn the_watch_stays_quiet_until_something_under_the_roots_changes() {
        let root = tempfile::tempdir().unwrap();
        let hooks = root.path().join("repo/.git/hooks");
        std::fs::create_dir_all(&hooks).unwrap();
        std::fs::create_dir_all(root.path().join("a/b")).unwrap();
        std::fs::write(hooks.join("pre-commit"), "old").unwrap();
        // A hook that leads into the worktree, one with a second name there,
        // and a repository whose hooks directory is a link.
        std::fs::create_dir_all(root.path().join("repo/tools")).unwrap();
        std::fs::write(root.path().join("repo/tools/post-merge"), "old").unwrap();
        std::os::unix::fs::symlink("../../tools/post-merge", hooks.join("post-merge")).unwrap();
        std::fs::hard_link(
            hooks.join("pre-commit"),
            root.path().join("a/b/second-name"),
        )
        .unwrap();
        std::fs::create_dir_all(root.path().join("linked/.git")).unwrap();
        std::fs::create_dir_all(root.path().join("linked/tools-hooks")).unwrap();
        std::os::unix::fs::symlink("../tools-hooks", root.path().join("linked/.git/hooks"))
            .unwrap();
        let roots = [root.path().to_owned()];
        // Each change below, made to a fresh scan and watch, must be seen.
        type Change<'a> = (&'a str, &'a dyn Fn(&Path));
        let changes: [Change; 8] = [
            ("a hook written through its link", &|r| {
                std::fs::write(r.join("repo/tools/post-merge"), "evil").unwrap()
            }),
            ("a hook written through another name", &|r| {
                std::fs::write(r.join("a/b/second-name"), "evil").unwrap()
            }),
            ("a hook made in a hooks directory that is a link", &|r| {
                std::fs::write(r.join("linked/tools-hooks/pre-commit"), "evil").unwrap()
            }),
            ("a repository made deep down", &|r| {
                std::fs::create_dir_all(r.join("a/b/c/.git/hooks")).unwrap()
            }),
            ("a hook rewritten", &|r| {
                std::fs::write(r.join("repo/.git/hooks/pre-commit"), "evil").unwrap()
            }),
            ("a hook made", &|r| {
                std::fs::write(r.join("repo/.git/hooks/post-checkout"), "evil").unwrap()
            }),
            ("the hooks directory renamed away", &|r| {
                std::fs::rename(r.join("repo/.git/hooks"), r.join("repo/.git/old")).unwrap()
            }),
            ("a directory moved in", &|r| {
                let outside = tempfile::tempdir().unwrap();
                std::fs::create_dir_all(outside.path().join("x/.git")).unwrap();
                std::fs::rename(outside.path().join("x"), r.join("a/x")).unwrap()
            }),
        ];
        for (what, change) in changes {
            let work = tempfile::tempdir().unwrap();
            // One copy, so the second name stays a second name.
            let status = std::process::Command::new("cp")
                .arg("-a")
                .arg(root.path().join("."))
                .arg(work.path())
                .status()
                .unwrap();
            assert!(status.success());
            let roots = [work.path().to_owned()];
            let mut watch = Watch::new().expect("inotify");
            let generation = watch.generation();
            let _scan = HookScan::of(&roots, Some(&watch));
            // Listing raised no notice.
            assert!(watch.quiet_since(generation), "{what}: quiet at first");
            change(work.path());
            assert!(!watch.quiet_since(generation), "{what}: not noticed");
        }
        // Reading the tree raises none either.
        let mut watch = Watch::new().unwrap();
        let generation = watch.generation();
        let scan = HookScan::of(&roots, Some(&watch));
        let _ = scan.again(None);
        let _ = std::fs::read(hooks.join("pre-commit")).unwrap();
        assert!(watch.quiet_since(generation));
    }
}
