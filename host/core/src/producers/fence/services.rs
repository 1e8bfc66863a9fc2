//! The user's services' sockets that a fenced job's mounts cover, resolved
//! once and kept while no name their resolution looked up changes.
//!
//! Resolving them is most of a fenced start's own system calls (a
//! `readlink` for each component of 14 paths, about 35 a start), and they
//! change rarely: a daemon starts, a user logs in. So the resolution records
//! every (directory, name) it looked up, an inotify watch on those
//! directories says when one of those names is made, removed or renamed
//! (or a directory itself goes), and a poll of `/proc/self/mountinfo` says
//! when a mount may have put other directories on the way. While neither
//! says anything, a start reads the kept list for two system calls.

use std::collections::HashMap;
use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use rustix::fs::inotify;

use crate::sync::lock;

/// A socket or socket directory of a user's service, by its real path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ServiceSocket {
    pub(super) path: PathBuf,
    pub(super) is_dir: bool,
}

/// What the candidates are made of: the effective uid and
/// `$XDG_RUNTIME_DIR`. Compared at each start instead of the paths, which
/// are made only when it changed.
#[derive(PartialEq, Eq)]
struct Who {
    uid: u32,
    runtime: Option<OsString>,
}

impl Who {
    fn now() -> Who {
        Who {
            uid: rustix::process::geteuid().as_raw(),
            runtime: std::env::var_os("XDG_RUNTIME_DIR"),
        }
    }
}

/// The paths where the user's services listen, those that exist or not:
/// `$XDG_RUNTIME_DIR` (`/run/user/<uid>`: D-Bus, and with it `systemd-run`,
/// and jobs-host's daemon), X11's and tmux's socket directories, jobs-host's
/// daemon's fallback directory, Docker's, containerd's and Podman's sockets,
/// and the system's bus and systemd's own.
fn candidates(who: &Who) -> Vec<PathBuf> {
    let uid = who.uid;
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
    if let Some(runtime) = &who.runtime {
        paths.push(PathBuf::from(runtime));
    }
    paths
}

/// The sockets and socket directories of the user's services that a fenced
/// job must not reach (see [`candidates`]): those that exist, by their real
/// paths, each once.
pub(super) fn service_sockets() -> Arc<[ServiceSocket]> {
    static KEPT: Mutex<Option<Kept>> = Mutex::new(None);
    let who = Who::now();
    let mut kept = lock(&KEPT);
    if let Some(k) = kept.as_mut()
        && k.who == who
        && k.watched.quiet()
    {
        return k.sockets.clone();
    }
    let candidates = candidates(&who);
    let (fresh, sockets) = Kept::make(who, &candidates);
    *kept = fresh;
    sockets
}

/// A resolution of the candidates, and what tells when it may be stale.
struct Kept {
    who: Who,
    sockets: Arc<[ServiceSocket]>,
    watched: Watched,
}

/// What tells of a change on the way of a resolution.
struct Watched {
    /// The inotify watch on every directory the resolution looked in.
    watch: OwnedFd,
    /// The names looked up in each watched directory, by its watch.
    names: HashMap<i32, Vec<OsString>>,
    /// `/proc/self/mountinfo`, polled for a change of the mount table.
    mounts: std::fs::File,
}

impl Kept {
    /// Resolves `candidates` (those of `who`), and keeps the result when it
    /// can be watched: the watches are added after a first resolution and
    /// before a second, which is the one kept, so that a change after the
    /// second raises a notice. Nothing is kept when the kernel gives no watch, or when the
    /// second resolution looked up a name the first did not (something
    /// changed meanwhile): the next start resolves again.
    fn make(who: Who, candidates: &[PathBuf]) -> (Option<Kept>, Arc<[ServiceSocket]>) {
        let (first, looked) = resolve_all(candidates);
        let Some(watched) = Watched::new(&looked) else {
            return (None, first);
        };
        let (sockets, looked_again) = resolve_all(candidates);
        if !looked_again.iter().all(|lookup| looked.contains(lookup)) {
            return (None, sockets);
        }
        let kept = Kept {
            who,
            sockets: sockets.clone(),
            watched,
        };
        (Some(kept), sockets)
    }
}

impl Watched {
    /// Inotify's events for a directory a resolution looked in: the hook
    /// scan's (a name in it made, removed or renamed, or the directory
    /// itself removed or renamed; not followed, as every directory watched
    /// is a real path) but a name's attributes, which change no lookup.
    const DIR: inotify::WatchFlags = super::Watch::DIR.difference(inotify::WatchFlags::ATTRIB);

    /// A watch on every directory in `looked`, with the names looked up in
    /// each, and `/proc/self/mountinfo` open for its poll; `None` when the
    /// kernel gives no watch or no mount table, or a directory cannot be
    /// watched (the user's limit of watches).
    fn new(looked: &[(PathBuf, OsString)]) -> Option<Watched> {
        // Opened first: a mount made from here on shows in its poll.
        let mounts = std::fs::File::open("/proc/self/mountinfo").ok()?;
        let watch =
            inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK).ok()?;
        let mut names: HashMap<i32, Vec<OsString>> = HashMap::new();
        for (dir, name) in looked {
            let wd = inotify::add_watch(&watch, dir, Watched::DIR).ok()?;
            names.entry(wd).or_default().push(name.clone());
        }
        Some(Watched {
            watch,
            names,
            mounts,
        })
    }

    /// Whether nothing was said since the watch began: no mount changed,
    /// and no watched directory had a name looked up in it changed (or
    /// went itself). Reads every pending notice.
    fn quiet(&mut self) -> bool {
        let mut poll = [rustix::event::PollFd::new(
            &self.mounts,
            rustix::event::PollFlags::PRI,
        )];
        match rustix::event::poll(&mut poll, Some(&ZERO)) {
            Ok(0) => {}
            // The mount table changed, or the poll failed.
            _ => return false,
        }
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 4096];
        let mut reader = inotify::Reader::new(&self.watch, &mut buf);
        let mut holds = true;
        loop {
            match reader.next() {
                Ok(event) => {
                    let flags = event.events();
                    let named = event.file_name().is_some_and(|name| {
                        self.names.get(&event.wd()).is_some_and(|names| {
                            names.iter().any(|n| n.as_bytes() == name.to_bytes())
                        })
                    });
                    // A directory gone, a watch dropped, events lost, or a
                    // name on the way: stale.
                    if named
                        || flags.intersects(
                            inotify::ReadFlags::DELETE_SELF
                                | inotify::ReadFlags::MOVE_SELF
                                | inotify::ReadFlags::IGNORED
                                | inotify::ReadFlags::QUEUE_OVERFLOW
                                | inotify::ReadFlags::UNMOUNT,
                        )
                    {
                        holds = false;
                    }
                }
                Err(rustix::io::Errno::AGAIN) => break,
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => return false,
            }
        }
        holds
    }
}

/// A poll's timeout that does not wait.
const ZERO: rustix::time::Timespec = rustix::time::Timespec {
    tv_sec: 0,
    tv_nsec: 0,
};

/// Resolves each candidate; those that exist, by their real paths, each
/// once, and every (directory, name) looked up on the way.
fn resolve_all(candidates: &[PathBuf]) -> (Arc<[ServiceSocket]>, Vec<(PathBuf, OsString)>) {
    let mut looked = Vec::new();
    let mut sockets: Vec<ServiceSocket> = Vec::new();
    for path in candidates {
        let Some(real) = resolve(path, &mut looked) else {
            continue;
        };
        if !sockets.iter().any(|s| s.path == real) {
            let is_dir = real.is_dir();
            sockets.push(ServiceSocket { path: real, is_dir });
        }
    }
    (sockets.into(), looked)
}

/// The real path of `path` (absolute), as `realpath` finds it, one
/// component at a time so that each lookup is recorded in `looked` as the
/// real directory it was made in and the name; `None` when a component does
/// not exist (or is not a directory where one is needed, or the links loop).
fn resolve(path: &Path, looked: &mut Vec<(PathBuf, OsString)>) -> Option<PathBuf> {
    const MAX_LINKS: usize = 40;
    let mut real = PathBuf::from("/");
    let mut rest: Vec<OsString> = Vec::new();
    push_components(&mut rest, path)?;
    let mut links = 0;
    while let Some(name) = rest.pop() {
        if name == ".." {
            real.pop();
            continue;
        }
        let next = real.join(&name);
        if !looked.iter().any(|(d, n)| *d == real && *n == name) {
            looked.push((real.clone(), name));
        }
        match std::fs::read_link(&next) {
            Ok(target) => {
                links += 1;
                if links > MAX_LINKS {
                    return None;
                }
                if target.is_absolute() {
                    real = PathBuf::from("/");
                }
                push_components(&mut rest, &target)?;
            }
            // Not a link: a name that exists.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => real = next,
            Err(_) => return None,
        }
    }
    Some(real)
}

/// Pushes `path`'s components onto `stack` so that the first is popped
/// first; `None` for a prefix (which no absolute Linux path has).
fn push_components(stack: &mut Vec<OsString>, path: &Path) -> Option<()> {
    let at = stack.len();
    for component in path.components() {
        match component {
            Component::RootDir | Component::CurDir => {}
            Component::ParentDir => stack.insert(at, "..".into()),
            Component::Normal(name) => stack.insert(at, name.to_owned()),
            Component::Prefix(_) => return None,
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resolution_follows_links_and_records_every_lookup() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path().canonicalize().unwrap();
        std::fs::create_dir_all(r.join("real/run")).unwrap();
        std::fs::write(r.join("real/run/app.sock"), "").unwrap();
        std::os::unix::fs::symlink("real/run", r.join("run")).unwrap();
        std::os::unix::fs::symlink(r.join("real"), r.join("var")).unwrap();
        let mut looked = Vec::new();
        assert_eq!(
            resolve(&r.join("run/app.sock"), &mut looked),
            Some(r.join("real/run/app.sock"))
        );
        assert_eq!(
            resolve(&r.join("var/run/../run/app.sock"), &mut looked),
            Some(r.join("real/run/app.sock"))
        );
        assert_eq!(resolve(&r.join("var/run/missing"), &mut looked), None);
        assert_eq!(resolve(&r.join("run/app.sock/x"), &mut looked), None);
        for (dir, name) in [
            (r.clone(), "run"),
            (r.clone(), "real"),
            (r.join("real"), "run"),
            (r.join("real/run"), "app.sock"),
            (r.clone(), "var"),
            (r.join("real/run"), "missing"),
        ] {
            assert!(
                looked.iter().any(|(d, n)| *d == dir && n == name),
                "{} {name} not in {looked:?}",
                dir.display()
            );
        }
        // The same answers as the C library's.
        for path in ["run/app.sock", "var/run/app.sock", "var/run/../run"] {
            assert_eq!(
                resolve(&r.join(path), &mut Vec::new()),
                r.join(path).canonicalize().ok()
            );
        }
    }

    #[test]
    fn a_kept_resolution_holds_until_a_name_on_the_way_changes() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path().canonicalize().unwrap();
        std::fs::create_dir_all(r.join("run")).unwrap();
        let candidates = vec![r.join("run/docker.sock"), r.join("link/bus")];
        let (kept, sockets) = Kept::make(Who::now(), &candidates);
        let mut kept = kept.expect("this kernel gives inotify");
        assert!(sockets.is_empty());
        // Names nobody looked up change nothing.
        std::fs::write(r.join("run/other.sock"), "").unwrap();
        std::fs::write(r.join("unrelated"), "").unwrap();
        assert!(kept.watched.quiet());
        // A socket appearing does.
        std::fs::write(r.join("run/docker.sock"), "").unwrap();
        assert!(!kept.watched.quiet());
        let (kept, sockets) = Kept::make(Who::now(), &candidates);
        let mut kept = kept.unwrap();
        assert_eq!(
            &*sockets,
            &[ServiceSocket {
                path: r.join("run/docker.sock"),
                is_dir: false
            }]
        );
        assert!(kept.watched.quiet());
        // So does a link appearing where a missing name was looked up.
        std::fs::create_dir_all(r.join("bus-home/bus")).unwrap();
        assert!(kept.watched.quiet());
        std::os::unix::fs::symlink(r.join("bus-home"), r.join("link")).unwrap();
        assert!(!kept.watched.quiet());
        let (kept, sockets) = Kept::make(Who::now(), &candidates);
        let mut kept = kept.unwrap();
        assert_eq!(sockets.len(), 2);
        assert_eq!(
            sockets[1],
            ServiceSocket {
                path: r.join("bus-home/bus"),
                is_dir: true
            }
        );
        // And a directory on the way renamed.
        std::fs::rename(r.join("bus-home"), r.join("elsewhere")).unwrap();
        assert!(!kept.watched.quiet());
    }
}
