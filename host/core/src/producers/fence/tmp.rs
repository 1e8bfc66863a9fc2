//! Each fenced job's own temporary directory (its `TMPDIR`), inside the
//! host's private directory: a new one, or one a finished job left, emptied,
//! once that job was proven to have no process left.

use std::path::{Path, PathBuf};

use crate::sync::lock;

use super::{Fence, FenceError};

/// A job's own temporary directory, removed when this is dropped unless
/// kept for a later job.
pub(crate) struct JobTmp {
    pub(super) path: PathBuf,
    pub(super) keep: bool,
}

impl JobTmp {
    /// Its path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for JobTmp {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

impl Fence {
    /// A job's own temporary directory: one a finished job left, emptied,
    /// when that job was proven to have no process left (see
    /// [`Fence::release`]), else a new one (a `mkdir` on ext4 costs more than
    /// the rest of a start).
    pub(super) fn temporary_directory(&self) -> Result<JobTmp, FenceError> {
        if let Some(path) = lock(&self.spare_tmp).pop() {
            return Ok(JobTmp { path, keep: false });
        }
        tempfile::Builder::new()
            .prefix("tmp-")
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir_in(&self.tmp_parent)
            .map(|dir| JobTmp {
                path: dir.keep(),
                keep: false,
            })
            .map_err(FenceError::TemporaryDirectory)
    }
}
