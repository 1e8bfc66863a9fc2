//! The files of dropped jobs, emptied and kept for the next jobs' files: a
//! journal-less ext4 skips every recently deleted inode per new file, so a
//! storm of durable starts reuses files instead of making them.

use std::path::Path;

use super::job_file::{FRAMES_AT, lock, ours, recorded_monitor};

/// The files of dropped jobs, emptied and kept for the next jobs' files
/// instead of being removed: a file system without a journal (ext4 so)
/// skips every inode deleted in the last seconds when it makes one, so a
/// storm of starts after a storm of removals scanned past thousands of
/// them per file. A file is kept only when no monitor holds it (its
/// lock is free), so no job that still runs writes into another's file;
/// one still held is removed as before (its monitor writes on into its
/// unlinked file).
#[derive(Debug)]
pub struct SpareFiles {
    dir: std::path::PathBuf,
    names: std::sync::Mutex<Vec<std::path::PathBuf>>,
    next: std::sync::atomic::AtomicU64,
}

/// The most empty files kept for later jobs.
const SPARE_FILES: usize = 4096;

impl SpareFiles {
    /// Keeps spare files in `dir` (private, made if missing), with those
    /// already there.
    ///
    /// # Errors
    ///
    /// `dir` cannot be made or read.
    pub fn open(dir: std::path::PathBuf) -> std::io::Result<SpareFiles> {
        use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
        let meta = std::fs::symlink_metadata(&dir)?;
        let me = rustix::process::geteuid().as_raw();
        if !meta.is_dir() || meta.uid() != me || meta.permissions().mode() & 0o077 != 0 {
            return Err(std::io::Error::other(format!(
                "{} is not a private directory of ours",
                dir.display()
            )));
        }
        let mut names = Vec::new();
        let mut next = 0;
        for entry in std::fs::read_dir(&dir)?.flatten() {
            let number = entry
                .file_name()
                .to_str()
                .and_then(|name| name.strip_prefix("spare-"))
                .and_then(|n| n.parse::<u64>().ok());
            match number {
                Some(n) if entry.file_type().is_ok_and(|t| t.is_file()) => {
                    next = next.max(n + 1);
                    if names.len() < SPARE_FILES {
                        names.push(entry.path());
                    }
                }
                _ => {}
            }
        }
        Ok(SpareFiles {
            dir,
            next: std::sync::atomic::AtomicU64::new(next),
            names: std::sync::Mutex::new(names),
        })
    }

    /// A spare file moved to `to` and opened to read and write.
    pub(super) fn take(&self, to: &Path) -> Option<std::fs::File> {
        use std::os::unix::fs::OpenOptionsExt;
        loop {
            let from = crate::sync::lock(&self.names).pop()?;
            if rename_new(&from, to).is_ok() {
                let file = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(to)
                    .ok()
                    .filter(|file| ours(file) && lock(file).is_ok() && zero_header(file));
                if file.is_none() {
                    let _ = std::fs::remove_file(to);
                }
                return file;
            }
        }
    }

    /// Lets go of the job file at `path`: emptied and kept for a later
    /// job when no monitor holds it and there is room, else removed.
    pub fn retire(&self, path: &Path) {
        if !self.keep(path) {
            let _ = std::fs::remove_file(path);
        }
    }

    pub(super) fn keep(&self, path: &Path) -> bool {
        use std::os::unix::fs::OpenOptionsExt;
        if crate::sync::lock(&self.names).len() >= SPARE_FILES {
            return false;
        }
        let Ok(file) = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path)
        else {
            return false;
        };
        // Free only if no monitor holds it; and no monitor of a build that
        // did not lock its file may still run on it either (its own line
        // names it, checked by pid and start time).
        let running = recorded_monitor(path).is_some_and(|(pid, start)| {
            crate::producers::bash::process_start_time(pid) == Some(start)
        });
        // Cut to its header's room, not to zero length (see `prepare`); the
        // header is zeroed when the file is taken.
        if running || !ours(&file) || lock(&file).is_err() || file.set_len(FRAMES_AT).is_err() {
            return false;
        }
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let to = self.dir.join(format!("spare-{n}"));
        if rename_new(path, &to).is_err() {
            return false;
        }
        // Offered only once its lock is let go, with the file.
        drop(file);
        crate::sync::lock(&self.names).push(to);
        true
    }

    /// Lets go of every job file in `dir` (see [`SpareFiles::retire`]),
    /// then of `dir`: only a real directory's own `job-<n>` files are kept
    /// (a link to elsewhere is removed, never followed).
    pub fn retire_dir(&self, dir: &Path) -> std::io::Result<()> {
        let real = std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir());
        if real && let Ok(entries) = std::fs::read_dir(dir) {
            for entry in entries.flatten() {
                let job = entry
                    .file_name()
                    .to_str()
                    .and_then(|name| name.strip_prefix("job-"))
                    .is_some_and(|n| n.parse::<u64>().is_ok());
                if job && entry.file_type().is_ok_and(|t| t.is_file()) {
                    self.keep(&entry.path());
                }
            }
        }
        std::fs::remove_dir_all(dir)
    }
}

/// Zeroes a spare's header as it is taken for a job, not when it was kept:
/// after a machine's crash a kept file may hold its old job's lines again
/// (a write in place may reach the disk after the rename that kept it).
fn zero_header(file: &std::fs::File) -> bool {
    use std::os::unix::fs::FileExt;
    file.write_all_at(&[0; FRAMES_AT as usize], 0).is_ok()
}

/// Renames `from` to `to`, which must not exist.
fn rename_new(from: &Path, to: &Path) -> rustix::io::Result<()> {
    rustix::fs::renameat_with(
        rustix::fs::CWD,
        from,
        rustix::fs::CWD,
        to,
        rustix::fs::RenameFlags::NOREPLACE,
    )
}

#[cfg(test)]
mod tests {
    use std::os::fd::{AsRawFd, BorrowedFd};

    use super::*;
    use crate::producers::bash::durable::job_file::{END_AT, JobEnd, file_in_use};

    fn write_all(fd: BorrowedFd<'_>, bytes: &[u8]) -> rustix::io::Result<()> {
        assert_eq!(rustix::io::write(fd, bytes)?, bytes.len());
        Ok(())
    }
    use crate::producers::bash::durable::launch::prepare;

    fn durable(root: &Path) -> crate::producers::bash::DurableJobs {
        let dir = root.join("session");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("lease"), "0").unwrap();
        crate::producers::bash::DurableJobs {
            monitor: "/bin/true".into(),
            lease: dir.join("lease"),
            dir,
            max_file_bytes: 1 << 20,
            state_dir: None,
            spare: Some(std::sync::Arc::new(
                SpareFiles::open(root.join("spare")).unwrap(),
            )),
        }
    }

    fn spares(root: &Path) -> usize {
        std::fs::read_dir(root.join("spare")).unwrap().count()
    }

    #[test]
    fn a_job_file_is_held_while_its_descriptors_live_and_reused_once_free() {
        let root = tempfile::tempdir().unwrap();
        let jobs = durable(root.path());
        let (path, fds) = prepare(&jobs, 1).unwrap();
        assert!(file_in_use(&path));
        // SAFETY: the frames descriptor prepare opened, to append.
        let frames = unsafe { BorrowedFd::borrow_raw(fds[0].as_raw_fd()) };
        write_all(frames, b"old job's bytes").unwrap();
        // And its monitor's lines in the header, which go too.
        // SAFETY: the header descriptor prepare opened, to write in place.
        unsafe {
            libc::pwrite(fds[1].as_raw_fd(), b"1 2\n".as_ptr().cast(), 4, 0);
            libc::pwrite(
                fds[1].as_raw_fd(),
                b"{}\n".as_ptr().cast(),
                3,
                END_AT as i64,
            );
        }
        drop(fds);
        assert!(!file_in_use(&path));
        let spare = jobs.spare.as_ref().unwrap();
        spare.retire(&path);
        assert!(!path.exists());
        assert_eq!(spares(root.path()), 1);
        // The next job gets it, empty but for its header's room.
        let (next, fds) = prepare(&jobs, 2).unwrap();
        assert_eq!(spares(root.path()), 0);
        assert_eq!(std::fs::read(&next).unwrap(), vec![0u8; FRAMES_AT as usize]);
        assert!(file_in_use(&next));
        drop(fds);
    }

    #[test]
    fn a_spare_that_came_back_with_its_old_lines_is_zeroed_when_taken() {
        use std::os::unix::fs::{FileExt, PermissionsExt};
        let root = tempfile::tempdir().unwrap();
        // As a machine's crash may leave one: the old job's header written
        // back after its file was kept.
        let spare_dir = root.path().join("spare");
        std::fs::create_dir(&spare_dir).unwrap();
        std::fs::set_permissions(&spare_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let stale = std::fs::File::create(spare_dir.join("spare-0")).unwrap();
        stale.set_len(FRAMES_AT).unwrap();
        stale.write_all_at(b"4242 99\n", 0).unwrap();
        stale.write_all_at(br#"{"code":3}"#, END_AT).unwrap();
        drop(stale);
        let jobs = durable(root.path());
        let (path, fds) = prepare(&jobs, 1).unwrap();
        assert_eq!(spares(root.path()), 0, "the spare was taken");
        assert_eq!(std::fs::read(&path).unwrap(), vec![0u8; FRAMES_AT as usize]);
        assert_eq!(recorded_monitor(&path), None);
        assert!(JobEnd::read(&path).is_none());
        drop(fds);
    }

    #[test]
    fn a_held_job_file_is_removed_not_reused() {
        let root = tempfile::tempdir().unwrap();
        let jobs = durable(root.path());
        let (path, fds) = prepare(&jobs, 1).unwrap();
        jobs.spare.as_ref().unwrap().retire(&path);
        assert!(!path.exists());
        assert_eq!(spares(root.path()), 0);
        // Its monitor writes on, into its own (unlinked) file.
        // SAFETY: the frames descriptor prepare opened, to append.
        let frames = unsafe { BorrowedFd::borrow_raw(fds[0].as_raw_fd()) };
        write_all(frames, b"still mine").unwrap();
    }

    #[test]
    fn retiring_a_directory_never_follows_a_link_out_of_it() {
        let root = tempfile::tempdir().unwrap();
        let jobs = durable(root.path());
        let outside = root.path().join("precious");
        std::fs::write(&outside, "keep me").unwrap();
        std::os::unix::fs::symlink(&outside, jobs.dir.join("job-9")).unwrap();
        let linked = root.path().join("linked");
        std::os::unix::fs::symlink(root.path(), &linked).unwrap();
        let spare = jobs.spare.as_ref().unwrap();
        // A link is let go of itself, what it names untouched.
        let _ = spare.retire_dir(&linked);
        assert!(jobs.dir.join("lease").exists());
        spare.retire_dir(&jobs.dir).unwrap();
        assert!(!jobs.dir.exists());
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep me");
        assert_eq!(spares(root.path()), 0);
    }
}
