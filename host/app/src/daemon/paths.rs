//! Where the daemon lives: the user's private runtime directory, its socket
//! and its lock file, and the checks that each is this user's alone.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// Where this user's daemon listens: `$XDG_RUNTIME_DIR/jobs-host`, or
/// `/tmp/jobs-host-<uid>` without one.
pub fn runtime_dir() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("jobs-host"),
        None => PathBuf::from(format!(
            "/tmp/jobs-host-{}",
            rustix::process::geteuid().as_raw()
        )),
    }
}

/// The daemon's socket in `dir`.
pub fn socket_path(dir: &Path) -> PathBuf {
    dir.join("daemon.sock")
}

/// The file the daemon holds locked while it runs, with its pid.
pub fn lock_path(dir: &Path) -> PathBuf {
    dir.join("daemon.lock")
}

/// Makes `dir` if it is missing (mode 0700), and checks that it is this
/// user's and nobody else's: a directory (not a link), owned by this uid,
/// with no access for group or others. Another user's directory, or one
/// others may write, is refused, never changed.
///
/// # Errors
///
/// A directory that cannot be made, or one that is not private.
pub fn private_dir(dir: &Path) -> Result<()> {
    match std::fs::DirBuilder::new()
        .mode(0o700)
        .recursive(true)
        .create(dir)
    {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e).with_context(|| format!("cannot make {}", dir.display())),
    }
    let meta =
        std::fs::symlink_metadata(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    if !meta.is_dir() {
        bail!("{} is not a directory; refusing to use it", dir.display());
    }
    ours(dir, &meta)?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        bail!(
            "{} has mode {mode:04o}: others may reach it; refusing to use it (chmod 700 it)",
            dir.display()
        );
    }
    Ok(())
}

/// Refuses `path` (described by `meta`) unless this user owns it.
///
/// # Errors
///
/// Another user's file or directory.
pub fn ours(path: &Path, meta: &std::fs::Metadata) -> Result<()> {
    let uid = rustix::process::geteuid().as_raw();
    if meta.uid() != uid {
        bail!(
            "{} belongs to uid {}, not to this user (uid {uid}); refusing to use it",
            path.display(),
            meta.uid()
        );
    }
    Ok(())
}

/// Whether some process holds the lock file `path` now (a daemon's).
pub fn locked(path: &Path) -> bool {
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    // Closing the file lets go of a lock taken here.
    rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockShared).is_err()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_others_can_reach_is_refused() {
        let base = std::env::temp_dir().join(format!("jobs-host-dir-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        private_dir(&base).unwrap();
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).unwrap();
        let refused = private_dir(&base).unwrap_err().to_string();
        assert!(refused.contains("mode 0755"), "{refused}");
        // Refused, not repaired.
        let mode = std::fs::metadata(&base).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o755);
        std::fs::remove_dir_all(&base).unwrap();
    }
}
