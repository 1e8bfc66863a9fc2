//! One stream of the job as the monitor relays it: from the leader's pipe
//! into the job's file as frames (up to a bound, counting what it could not
//! keep), and on to the host while the host reads.

use std::os::fd::{BorrowedFd, OwnedFd, RawFd};

use super::FRAMES;

/// One stream: the leader's pipe, its frames' stream byte and the host's
/// pipe.
pub(super) struct Relay {
    pub(super) pipe: Option<OwnedFd>,
    pub(super) tag: u8,
    pub(super) host: Option<RawFd>,
    pub(super) kept: u64,
    pub(super) not_kept: u64,
    /// The frame being written: its header, then the bytes.
    pub(super) frame: Vec<u8>,
}

impl Relay {
    pub(super) fn new(pipe: OwnedFd, tag: u8, host: RawFd) -> Relay {
        let _ = rustix::io::ioctl_fionbio(&pipe, true);
        Relay {
            pipe: Some(pipe),
            tag,
            host: Some(host),
            kept: 0,
            not_kept: 0,
            frame: Vec::new(),
        }
    }

    /// Reads what the pipe has; false at its end.
    pub(super) fn pump(&mut self, buf: &mut [u8], max_file_bytes: u64) -> bool {
        let Some(pipe) = &self.pipe else {
            return false;
        };
        loop {
            match rustix::io::read(pipe, &mut *buf) {
                Ok(0) => {
                    self.pipe = None;
                    return false;
                }
                Ok(n) => {
                    let bytes = &buf[..n];
                    let room = max_file_bytes.saturating_sub(self.kept) as usize;
                    let keep = &bytes[..room.min(n)];
                    // SAFETY: the file the host opened for us.
                    let file = unsafe { BorrowedFd::borrow_raw(FRAMES) };
                    self.frame.clear();
                    self.frame.push(self.tag);
                    self.frame
                        .extend_from_slice(&(keep.len() as u32).to_le_bytes());
                    self.frame.extend_from_slice(keep);
                    if keep.is_empty() || write_all(file, &self.frame).is_ok() {
                        self.kept += keep.len() as u64;
                        self.not_kept += (n - keep.len()) as u64;
                    } else {
                        // A full disk: nothing more is kept, and it is said.
                        self.kept = max_file_bytes;
                        self.not_kept += n as u64;
                    }
                    if let Some(host) = self.host {
                        // SAFETY: the pipe the host reads, ours since the spawn.
                        let host_fd = unsafe { BorrowedFd::borrow_raw(host) };
                        if write_all(host_fd, bytes).is_err() {
                            // The host is gone; the file has it all.
                            self.host = None;
                        }
                    }
                    return true;
                }
                Err(rustix::io::Errno::AGAIN) => return true,
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => {
                    self.pipe = None;
                    return false;
                }
            }
        }
    }
}

pub(super) fn write_all(fd: BorrowedFd<'_>, mut bytes: &[u8]) -> rustix::io::Result<()> {
    while !bytes.is_empty() {
        match rustix::io::write(fd, bytes) {
            Ok(0) => return Err(rustix::io::Errno::IO),
            Ok(n) => bytes = &bytes[n..],
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
