//! cgroup v2: finding the mount, this process's cgroup, and creating, killing
//! and removing job cgroups.

use std::ffi::{CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use nix::unistd::Pid;

static NEXT_ROOT: AtomicU64 = AtomicU64::new(1);

/// The cgroup2 mount point, from `/proc/self/mountinfo` (hybrid hosts mount it at
/// `/sys/fs/cgroup/unified`, pure v2 hosts at `/sys/fs/cgroup`).
pub fn cgroup2_mount() -> Option<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|line| {
        // `<id> <parent> <dev> <root> <mount point> <opts> [optional...] - <fstype> ...`
        let (left, right) = line.split_once(" - ")?;
        let fstype = right.split_whitespace().next()?;
        (fstype == "cgroup2").then(|| left.split_whitespace().nth(4).map(unescape_mount))?
    })
}

/// Mount points escape space, tab, newline and backslash as octal.
pub(super) fn unescape_mount(field: &str) -> PathBuf {
    let mut out = String::new();
    let mut rest = field;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        let code = rest
            .get(i + 1..i + 4)
            .and_then(|o| u8::from_str_radix(o, 8).ok());
        match code {
            Some(c) => {
                out.push(c as char);
                rest = &rest[i + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    PathBuf::from(out)
}

/// This process's cgroup v2 path (the `0::` line of `/proc/self/cgroup`).
pub(super) fn own_cgroup() -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(str::to_owned)
}

/// Creates this producer's cgroup directory, or says why it cannot.
pub(super) fn create_cgroup_root(shell: &Path) -> Result<PathBuf, String> {
    let mount = cgroup2_mount().ok_or("no cgroup2 mount in /proc/self/mountinfo")?;
    let own = own_cgroup().ok_or("no cgroup v2 entry in /proc/self/cgroup")?;
    let parent = mount.join(own.trim_start_matches('/'));
    if !parent.join("cgroup.kill").exists() && parent != mount {
        return Err(format!(
            "{} has no cgroup.kill (kernel older than 5.14?)",
            parent.display()
        ));
    }
    remove_stale_roots(&parent);
    let n = NEXT_ROOT.fetch_add(1, Ordering::Relaxed);
    // The pid namespace is in the name: a pid means something only in its own
    // namespace, and a stale root is judged by it (`remove_stale_roots`).
    let root = parent.join(format!(
        "jobs-host-{}-{n}-{}",
        std::process::id(),
        pid_namespace().unwrap_or(0)
    ));
    std::fs::create_dir(&root).map_err(|e| format!("cannot create {}: {e}", root.display()))?;
    if !root.join("cgroup.kill").exists() {
        let _ = std::fs::remove_dir(&root);
        return Err(format!("{} has no cgroup.kill", root.display()));
    }
    // Creating a cgroup is not enough: a job must be able to move itself in
    // (a delegated subtree, no namespace in the way). Try it once with a
    // process that does nothing.
    if let Err(e) = probe_migration(shell, &root) {
        remove_cgroup_tree(&root);
        return Err(format!(
            "cannot move a process into {}: {e}",
            root.display()
        ));
    }
    Ok(root)
}

/// Runs `shell -c true` moved into a fresh child of `root` between fork and
/// exec, as every job will be.
fn probe_migration(shell: &Path, root: &Path) -> std::io::Result<()> {
    let probe = root.join("probe");
    std::fs::create_dir(&probe)?;
    let procs = procs_file(&probe)?;
    let mut cmd = std::process::Command::new(shell);
    cmd.args(["--noprofile", "--norc", "-c", "true"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: `join` is async-signal-safe.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || join(&procs));
    }
    let result = cmd.status().and_then(|status| {
        if status.success() {
            Ok(())
        } else {
            Err(std::io::Error::other(format!(
                "the probe exited with {status}"
            )))
        }
    });
    let _ = remove_cgroup(&probe);
    result
}

/// `<dir>/cgroup.procs`, ready for a forked child to write itself into.
pub(super) fn procs_file(dir: &Path) -> std::io::Result<CString> {
    CString::new(dir.join("cgroup.procs").as_os_str().as_encoded_bytes())
        .map_err(std::io::Error::other)
}

/// Moves the calling process into the cgroup whose `cgroup.procs` is `procs`
/// (writing "0" moves the writer itself).
///
/// # Safety
///
/// Async-signal-safe: for the probe's child between fork and exec (a job's
/// leader joins its cgroup in `producers/spawn/child.rs`).
pub(super) unsafe fn join(procs: &CStr) -> std::io::Result<()> {
    // SAFETY: plain syscalls on a valid path.
    unsafe {
        let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let written = libc::write(fd, b"0".as_ptr().cast(), 1);
        let err = std::io::Error::last_os_error();
        libc::close(fd);
        if written == 1 { Ok(()) } else { Err(err) }
    }
}

/// This process's pid namespace (the inode of `/proc/self/ns/pid`).
fn pid_namespace() -> Option<u64> {
    let link = std::fs::read_link("/proc/self/ns/pid").ok()?;
    let text = link.to_str()?;
    text.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
}

/// Removes the empty cgroups that hosts which died without cleaning up (a
/// SIGKILL of host and watchdog together) left in `parent`: only those named
/// for this pid namespace and a host pid that no longer exists in it, and
/// only empty ones (a cgroup that still holds a process cannot be removed,
/// and is left as it is). A root of another pid namespace, or of a version
/// that did not name its namespace, is never touched.
pub(super) fn remove_stale_roots(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    let Some(namespace) = pid_namespace() else {
        return;
    };
    let own = std::process::id();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some((pid, ns)) = name.to_str().and_then(|n| {
            let mut parts = n.strip_prefix("jobs-host-")?.split('-');
            let (pid, n, ns) = (parts.next()?, parts.next()?, parts.next()?);
            let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
            (parts.next().is_none() && digits(n))
                .then(|| Some((pid.parse::<u32>().ok()?, ns.parse::<u64>().ok()?)))
                .flatten()
        }) else {
            continue;
        };
        if ns != namespace || pid == own || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let root = entry.path();
        if let Ok(children) = std::fs::read_dir(&root) {
            for child in children.flatten() {
                if child.file_type().is_ok_and(|t| t.is_dir()) {
                    let _ = std::fs::remove_dir(child.path());
                }
            }
        }
        match std::fs::remove_dir(&root) {
            Ok(()) => tracing::info!("jobs: removed the stale cgroup {}", root.display()),
            Err(e) => tracing::warn!(
                "jobs: left the stale cgroup {} of a dead host: {e}",
                root.display()
            ),
        }
    }
}

/// Removes a cgroup directory and its children, retrying briefly while killed
/// processes finish exiting.
pub(super) fn remove_cgroup_tree(root: &Path) {
    if let Ok(entries) = std::fs::read_dir(root) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                let _ = remove_cgroup(&entry.path());
            }
        }
    }
    let _ = remove_cgroup(root);
}

/// Removes the cgroup `dir`, retrying for about a second while its last
/// processes die. Whether it was removed: a cgroup with a process in it
/// cannot be, so true proves the job left none behind.
pub(super) fn remove_cgroup(dir: &Path) -> bool {
    for _ in 0..200 {
        match std::fs::remove_dir(dir) {
            Ok(()) => return true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return false,
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(5)),
        }
    }
    tracing::warn!("jobs: could not remove cgroup {}", dir.display());
    false
}

/// The owner and mode of a cgroup's directory and of the two files the
/// host writes in it, `cgroup.procs` and `cgroup.kill`, as a fresh cgroup
/// has them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Modes([(u32, u32, u32); 3]);

impl Modes {
    /// Those of the cgroup `dir`.
    pub(super) fn of(dir: &Path) -> Option<Modes> {
        use std::os::unix::fs::MetadataExt;
        let of = |path: &Path| {
            let meta = std::fs::symlink_metadata(path).ok()?;
            Some((meta.mode(), meta.uid(), meta.gid()))
        };
        Some(Modes([
            of(dir)?,
            of(&dir.join("cgroup.procs"))?,
            of(&dir.join("cgroup.kill"))?,
        ]))
    }

    /// Those of a cgroup made in `root` now.
    pub(super) fn fresh(root: &Path) -> Option<Modes> {
        let dir = root.join("modes");
        std::fs::create_dir(&dir).ok()?;
        let modes = Modes::of(&dir);
        let _ = std::fs::remove_dir(&dir);
        modes
    }
}

/// Whether the job cgroup `dir` can take another job as it is: no process
/// in it or below it, neither frozen nor asked to freeze, no cgroup below
/// it (kernfs counts a directory's subdirectories in its link count), and
/// the directory and the files the host writes with the owner and mode a
/// fresh cgroup has (`fresh`): a job allowed to `chmod` them would
/// otherwise fail the next job's start, or its kill. That proves an ended
/// job left nothing, as its removal would, at a fraction of the cost:
/// two reads and three `statx`s take about 15 µs, where the `rmdir` of a
/// cgroup a process has lived in, and the `mkdir` of the next job's, take
/// about 80 µs between them. What a job may still leave is for jobs that
/// cooperate: an extended attribute, a limit on the cgroups below it
/// (`cgroup.max.depth`), a pressure file switched off.
pub(super) fn reusable(dir: &Path, fresh: Modes) -> bool {
    let read = |name: &str, buf: &mut [u8]| {
        std::fs::File::open(dir.join(name))
            .and_then(|mut file| std::io::Read::read(&mut file, buf))
            .ok()
    };
    let mut events = [0u8; 64];
    let mut freeze = [0u8; 8];
    // Both lines of `cgroup.events` are read at once; `frozen` may read 0
    // an instant before a requested freeze takes, which `cgroup.freeze`
    // (the request) does not.
    read("cgroup.events", &mut events).is_some_and(|n| &events[..n] == b"populated 0\nfrozen 0\n")
        && read("cgroup.freeze", &mut freeze).is_some_and(|n| &freeze[..n] == b"0\n")
        && std::fs::symlink_metadata(dir)
            .is_ok_and(|meta| std::os::unix::fs::MetadataExt::nlink(&meta) == 2)
        && Modes::of(dir) == Some(fresh)
}

pub(super) fn cgroup_pids(dir: &Path) -> Vec<Pid> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .map(Pid::from_raw)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cgroup of this process's own for the test, or `None` where the
    /// host may not make one (no cgroup2, not delegated).
    fn scratch_cgroup(name: &str) -> Option<PathBuf> {
        let parent = cgroup2_mount()?.join(own_cgroup()?.trim_start_matches('/'));
        let dir = parent.join(format!("{name}-{}", std::process::id()));
        std::fs::create_dir(&dir).ok()?;
        Some(dir)
    }

    #[test]
    fn only_an_empty_unfrozen_leaf_is_reusable() {
        let Some(dir) = scratch_cgroup("reusable-test") else {
            println!("skipped: no cgroup of our own here");
            return;
        };
        let fresh = Modes::fresh(dir.parent().unwrap()).unwrap();
        let reusable = |dir: &Path| reusable(dir, fresh);
        assert!(reusable(&dir));
        // A cgroup below it: the next job would find it there.
        let below = dir.join("below");
        std::fs::create_dir(&below).unwrap();
        assert!(!reusable(&dir));
        std::fs::remove_dir(&below).unwrap();
        assert!(reusable(&dir));
        // Frozen: the next job would be too.
        std::fs::write(dir.join("cgroup.freeze"), "1").unwrap();
        assert!(!reusable(&dir));
        std::fs::write(dir.join("cgroup.freeze"), "0").unwrap();
        assert!(reusable(&dir));
        // A file the host writes, or the directory, made another mode.
        use std::os::unix::fs::PermissionsExt;
        for path in [
            dir.join("cgroup.procs"),
            dir.join("cgroup.kill"),
            dir.clone(),
        ] {
            let before = std::fs::metadata(&path).unwrap().permissions();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
            assert!(!reusable(&dir), "{}", path.display());
            std::fs::set_permissions(&path, before).unwrap();
            assert!(reusable(&dir));
        }
        // A process in it, then none once it has ended.
        let procs = procs_file(&dir).unwrap();
        let mut cmd = std::process::Command::new("sleep");
        cmd.arg("300");
        // SAFETY: `join` is async-signal-safe.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || join(&procs));
        }
        let mut child = cmd.spawn().unwrap();
        assert!(!reusable(&dir));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(reusable(&dir));
        assert!(remove_cgroup(&dir));
    }

    #[test]
    fn mount_points_are_unescaped() {
        assert_eq!(
            unescape_mount("/sys/fs/cgroup\\040x"),
            PathBuf::from("/sys/fs/cgroup x")
        );
        assert_eq!(unescape_mount("/plain"), PathBuf::from("/plain"));
    }
}
