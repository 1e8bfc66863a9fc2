//! A durable job's file: its layout, and reading it back (the monitor's
//! line, the output's frames, the job's end), with the lock a monitor holds
//! on it from its making to its monitor's end.
//!
//! ```text
//! 0        the monitor's `pid start-time` line (written when it starts)
//! 64       END_AT: the job's end, one JSON line (written last)
//! 4096     FRAMES_AT: the output's frames, in the order the monitor read them
//!          +-----------+------------------------+----------------+
//!          | stream u8 | length u32 little-end. | bytes (length) |
//!          +-----------+------------------------+----------------+
//!          stream: 1 stdout, 2 stderr; no frame is over MAX_FRAME
//! ```

use std::os::fd::RawFd;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The descriptors the monitor gets, from 3: its job's file opened to
/// append (the output's frames), the same file opened to write in place
/// (its header), and the session's lease.
pub(super) const FRAMES: RawFd = 3;
pub(super) const HEADER: RawFd = 4;
pub(super) const LEASE_FILE: RawFd = 5;

/// A durable job's file, one per job (one file made per start: a spawn
/// storm creates as few inodes as it can). Its header holds, from 0, the
/// monitor's `pid start-time` line, which it writes when it starts (so a
/// host killed before it recorded them leaves the job findable), and from
/// [`END_AT`] the job's end as one JSON line. From [`FRAMES_AT`] come the
/// output's frames, in the order the monitor read them: a stream byte (1
/// stdout, 2 stderr), the length (u32, little-endian), the bytes.
pub const END_AT: u64 = 64;
/// See [`END_AT`].
pub const FRAMES_AT: u64 = 4096;
pub(super) const FRAME_HEADER: usize = 5;
/// No frame is longer (the monitor reads at most 64 KiB at a time): a
/// length past it is a damaged file, read no further.
const MAX_FRAME: usize = 1 << 20;

/// Reads `len` bytes of `file` at `at`, or fewer at its end.
fn read_at(file: &std::fs::File, at: u64, len: usize) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; len];
    let mut got = 0;
    while got < len {
        match file.read_at(&mut buf[got..], at + got as u64) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    buf.truncate(got);
    buf
}

/// The line at the start of `bytes`, if it is whole.
fn header_line(bytes: &[u8]) -> Option<&[u8]> {
    let end = bytes.iter().position(|b| *b == b'\n')?;
    (end > 0).then(|| &bytes[..end])
}

/// The monitor of the job whose file is `file`, as it recorded itself: its
/// pid and start time (see [`crate::bash::process_start_time`]).
pub fn recorded_monitor(file: &Path) -> Option<(i32, u64)> {
    let bytes = read_at(&std::fs::File::open(file).ok()?, 0, END_AT as usize);
    let line = std::str::from_utf8(header_line(&bytes)?).ok()?;
    let (pid, start) = line.split_once(' ')?;
    Some((pid.parse().ok()?, start.parse().ok()?))
}

/// Calls `each` with the stream (1 stdout, 2 stderr) and bytes of every
/// whole frame of `file` from `offset` (a frame's start, at least
/// [`FRAMES_AT`]); the offset after the last whole one. A frame still being
/// written, or a damaged one, ends the reading there.
pub fn read_frames(file: &std::fs::File, mut offset: u64, mut each: impl FnMut(u8, &[u8])) -> u64 {
    offset = offset.max(FRAMES_AT);
    loop {
        let head = read_at(file, offset, FRAME_HEADER);
        if head.len() < FRAME_HEADER || !matches!(head[0], 1 | 2) {
            return offset;
        }
        let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize;
        if len > MAX_FRAME {
            return offset;
        }
        let body = read_at(file, offset + FRAME_HEADER as u64, len);
        if body.len() < len {
            return offset;
        }
        each(head[0], &body);
        offset += (FRAME_HEADER + len) as u64;
    }
}

/// How a durable job ended, as its monitor wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobEnd {
    /// The leader's exit code, when it exited.
    pub code: Option<i32>,
    /// The signal that ended the leader, when one did.
    pub signal: Option<i32>,
    /// When the monitor saw the end, epoch ms.
    pub ended_at: u64,
    /// CPU time of the job's processes, user and system, in ms.
    pub user_ms: u64,
    /// See [`JobEnd::user_ms`].
    pub sys_ms: u64,
    /// The largest resident set of one of them, in KiB.
    pub max_rss_kb: u64,
    /// Bytes of stdout and stderr past the files' bound, not kept.
    pub not_kept: [u64; 2],
    /// Whether the monitor stopped the job because its session's lease
    /// passed while its host was gone.
    pub lease_expired: bool,
}

impl JobEnd {
    /// The end recorded in the job's file `file`, if its monitor wrote one
    /// whole.
    pub fn read(file: &Path) -> Option<JobEnd> {
        let bytes = read_at(
            &std::fs::File::open(file).ok()?,
            END_AT,
            (FRAMES_AT - END_AT) as usize,
        );
        serde_json::from_slice(header_line(&bytes)?).ok()
    }

    /// The leader's status as `waitpid` would have given it.
    pub fn wait_status(&self) -> std::process::ExitStatus {
        use std::os::unix::process::ExitStatusExt;
        match (self.code, self.signal) {
            (Some(code), _) => std::process::ExitStatus::from_raw((code & 0xff) << 8),
            (None, Some(signal)) => std::process::ExitStatus::from_raw(signal & 0x7f),
            (None, None) => std::process::ExitStatus::from_raw(0),
        }
    }
}

/// Takes the job file's lock (see [`SpareFiles`]) on `file`'s open file
/// description, which the monitor inherits: held from here until the
/// monitor exits, however it exits. `WOULDBLOCK` when something else holds
/// it.
pub(super) fn lock(file: &std::fs::File) -> rustix::io::Result<()> {
    rustix::fs::flock(file, rustix::fs::FlockOperation::NonBlockingLockExclusive)
}

/// Whether `file` is a regular file of ours with no other name.
pub(super) fn ours(file: &std::fs::File) -> bool {
    use std::os::unix::fs::MetadataExt;
    let me = rustix::process::geteuid().as_raw();
    file.metadata()
        .is_ok_and(|m| m.is_file() && m.uid() == me && m.nlink() == 1)
}

/// Whether a monitor (or a spawn of one under way) holds the job file at
/// `path`: its lock is taken when the file is made, on the description the
/// monitor gets, so it is free only once no monitor can write to it.
pub fn file_in_use(path: &Path) -> bool {
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    matches!(
        rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockShared),
        Err(rustix::io::Errno::WOULDBLOCK)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_read_whole_and_in_order() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("job-1");
        let file = std::fs::File::create(&path).unwrap();
        file.set_len(FRAMES_AT).unwrap();
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        for (tag, bytes) in [(1u8, &b"out"[..]), (2, b"err"), (1, b"more")] {
            file.write_all(&[tag]).unwrap();
            file.write_all(&(bytes.len() as u32).to_le_bytes()).unwrap();
            file.write_all(bytes).unwrap();
        }
        // A frame cut short (being written, or a crash) is not read.
        file.write_all(&[1, 9, 0, 0, 0, b'x']).unwrap();
        let reader = std::fs::File::open(&path).unwrap();
        let mut seen = Vec::new();
        let end = read_frames(&reader, 0, |tag, bytes| seen.push((tag, bytes.to_vec())));
        assert_eq!(
            seen,
            vec![
                (1, b"out".to_vec()),
                (2, b"err".to_vec()),
                (1, b"more".to_vec())
            ]
        );
        assert_eq!(end, FRAMES_AT + 5 * 3 + 10);
        let mut again = Vec::new();
        assert_eq!(read_frames(&reader, end, |tag, _| again.push(tag)), end);
        assert!(again.is_empty());
    }

    #[test]
    fn an_end_is_read_only_when_whole() {
        use std::os::unix::fs::FileExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("job-1");
        std::fs::File::create(&path)
            .unwrap()
            .set_len(FRAMES_AT)
            .unwrap();
        let end = JobEnd {
            code: None,
            signal: Some(15),
            ended_at: 7,
            user_ms: 1,
            sys_ms: 2,
            max_rss_kb: 3,
            not_kept: [0, 4],
            lease_expired: false,
        };
        let mut line = serde_json::to_vec(&end).unwrap();
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.write_all_at(&line[..line.len() - 3], END_AT).unwrap();
        assert_eq!(JobEnd::read(&path), None);
        line.push(b'\n');
        file.write_all_at(&line, END_AT).unwrap();
        let read = JobEnd::read(&path).unwrap();
        assert_eq!(recorded_monitor(&path), None);
        file.write_all_at(b"12 34\n", 0).unwrap();
        assert_eq!(recorded_monitor(&path), Some((12, 34)));
        assert_eq!(read, end);
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(read.wait_status().signal(), Some(15));
    }
}
