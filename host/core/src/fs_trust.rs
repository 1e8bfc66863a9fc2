//! Which files and directories the host trusts: its own, and writable by
//! nobody else. The component cache and the shell producer's private
//! directories are only used when they are.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Whether `path` belongs to this user and nobody else can write it.
pub fn private_to_us(path: &Path) -> bool {
    let me = rustix::process::geteuid().as_raw();
    std::fs::symlink_metadata(path).is_ok_and(|m| m.uid() == me && m.mode() & 0o022 == 0)
}
