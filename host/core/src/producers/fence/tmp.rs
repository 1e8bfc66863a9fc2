//! Each fenced job's own temporary directory (its `TMPDIR`), inside the
//! host's private directory: a new one, or one a finished job left, emptied,
//! once that job was proven to have no process left. A directory keeps the
//! Landlock ruleset made for it, which names it.

use std::path::{Path, PathBuf};

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
