//! One stream's bounded buffer: the in-memory tail, the spill file that holds
//! the whole stream once it outgrows the tail, and the read cursor.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::budget::{OutputLimits, SpillBudget};
use super::excerpt::Segment;

enum Spill {
    /// Not needed yet: everything written so far is still in the tail.
    NotStarted,
    /// Writing the whole stream here.
    Writing(File, PathBuf),
    /// Too large, or the file could not be written: only the tail remains.
    Unavailable,
}

/// One stream's bounded buffer and read cursor.
pub(crate) struct StreamBuffer {
    tail: VecDeque<u8>,
    /// Bytes ever written to the stream.
    total: u64,
    /// Absolute offset of the next unread byte.
    cursor: u64,
    /// Line endings ever written, for line numbers past what is retained.
    newlines: u64,
    /// Whether the tail's first byte starts a line (the byte before it, now
    /// dropped, was a line ending).
    tail_starts_line: bool,
    spill: Spill,
    /// The spill file is `<spill_stem><spill_ext>`: the stem is shared by
    /// a job's streams, and the path made only when the file is.
    spill_stem: Arc<Path>,
    spill_ext: &'static str,
    limits: OutputLimits,
    budget: Option<Arc<SpillBudget>>,
    /// Bytes this stream has on disk (and holds of the budget).
    spilled: u64,
}

/// One consuming read of a stream.
pub(crate) struct Delta {
    /// The new text (lossy UTF-8: invalid bytes become U+FFFD).
    pub text: String,
    /// Whether unread bytes were lost from memory before this read.
    pub lossy: bool,
}

impl StreamBuffer {
    /// An empty buffer whose spill file, if it is ever needed, is
    /// `<spill_stem><spill_ext>`.
    pub fn new(
        spill_stem: Arc<Path>,
        spill_ext: &'static str,
        limits: OutputLimits,
    ) -> StreamBuffer {
        StreamBuffer {
            tail: VecDeque::new(),
            total: 0,
            cursor: 0,
            newlines: 0,
            tail_starts_line: true,
            spill: Spill::NotStarted,
            spill_stem,
            spill_ext,
            limits,
            budget: None,
            spilled: 0,
        }
    }

    /// The bounds this stream keeps to.
    pub fn limits(&self) -> OutputLimits {
        self.limits
    }

    /// The disk budget its spill file is charged to.
    pub fn budget(&self) -> Option<Arc<SpillBudget>> {
        self.budget.clone()
    }

    /// Charges this stream's spill file to `budget`.
    pub fn with_budget(mut self, budget: Option<Arc<SpillBudget>>) -> StreamBuffer {
        self.budget = budget;
        self
    }

    /// Appends bytes the process wrote.
    pub fn push(&mut self, bytes: &[u8]) {
        let new_total = self.total + bytes.len() as u64;
        if new_total > self.limits.max_spill_bytes {
            self.discard_spill();
        } else if new_total > self.limits.max_output_bytes as u64 {
            self.write_spill(bytes);
        }
        self.total = new_total;
        self.newlines += bytecount::count(bytes, b'\n') as u64;
        // Only the chunk's last `max_output_bytes` can stay in the tail.
        let max = self.limits.max_output_bytes;
        let kept = &bytes[bytes.len().saturating_sub(max)..];
        if kept.len() < bytes.len() {
            self.tail.clear();
            self.tail_starts_line = bytes[bytes.len() - kept.len() - 1] == b'\n';
        }
        self.tail.extend(kept);
        let excess = self.tail.len().saturating_sub(max);
        if excess > 0 {
            self.tail_starts_line = self.tail[excess - 1] == b'\n';
        }
        self.tail.drain(..excess);
    }

    fn write_spill(&mut self, bytes: &[u8]) {
        if matches!(self.spill, Spill::Unavailable) {
            return;
        }
        let needed = bytes.len() as u64
            + match self.spill {
                Spill::NotStarted => self.tail.len() as u64,
                _ => 0,
            };
        if let Some(budget) = &self.budget {
            if !budget.reserve(needed) {
                tracing::warn!(
                    "spill file {}: the session's disk budget is spent",
                    self.spill_file().display()
                );
                self.discard_spill();
                return;
            }
            self.spilled += needed;
        }
        if let Spill::NotStarted = self.spill {
            // Nothing has left the tail yet, so it still holds the whole stream.
            let path = self.spill_file();
            let opened = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
                .and_then(|mut file| {
                    let (a, b) = self.tail.as_slices();
                    file.write_all(a)?;
                    file.write_all(b)?;
                    Ok(file)
                });
            self.spill = match opened {
                Ok(file) => Spill::Writing(file, path),
                Err(e) => {
                    tracing::warn!("spill file {}: {e}", path.display());
                    Spill::Unavailable
                }
            };
            if matches!(self.spill, Spill::Unavailable) {
                self.discard_spill();
                return;
            }
        }
        if let Spill::Writing(file, path) = &mut self.spill
            && let Err(e) = file.write_all(bytes)
        {
            tracing::warn!("spill file {}: {e}", path.display());
            self.discard_spill();
        }
    }

    /// The stem of this stream's spill file, shared with the job's other
    /// streams.
    pub fn spill_stem(&self) -> Arc<Path> {
        self.spill_stem.clone()
    }

    /// Where this stream's spill file is, or would be.
    fn spill_file(&self) -> PathBuf {
        let mut path = self.spill_stem.as_os_str().to_owned();
        path.push(self.spill_ext);
        PathBuf::from(path)
    }

    /// Deletes the spill file; from now on only the tail remains.
    pub fn discard_spill(&mut self) {
        if let Spill::Writing(_, path) = &self.spill {
            let _ = std::fs::remove_file(path);
        }
        self.spill = Spill::Unavailable;
        if let Some(budget) = &self.budget {
            budget.release(std::mem::take(&mut self.spilled));
        }
    }

    /// The spill file holding the whole stream, if there is one.
    pub fn spill_path(&self) -> Option<&Path> {
        match &self.spill {
            Spill::Writing(_, path) => Some(path),
            _ => None,
        }
    }

    /// Bytes ever written.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Line endings ever written.
    pub fn newlines(&self) -> u64 {
        self.newlines
    }

    /// The stream offset of the next unread byte.
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// Moves the cursor to `offset` (at most to the end): what a reader
    /// before this one had already read.
    pub fn set_cursor(&mut self, offset: u64) {
        self.cursor = offset.min(self.total);
    }

    /// The stream offset of the tail's first byte: everything before it is
    /// only in the spill file, if anywhere.
    pub fn tail_start(&self) -> u64 {
        self.total - self.tail.len() as u64
    }

    /// Whether the tail's first byte starts a line.
    pub fn tail_starts_line(&self) -> bool {
        self.tail_starts_line
    }

    /// Whether the stream so far ends with a line ending (or is empty).
    pub fn ends_line(&self) -> bool {
        self.tail.back().is_none_or(|b| *b == b'\n')
    }

    /// A copy of the tail's bytes at stream offsets `from..to`, cut to what the
    /// tail holds.
    pub fn tail_bytes(&self, from: u64, to: u64) -> Vec<u8> {
        let start = self.tail_start();
        let clamp = |offset: u64| (offset.clamp(start, self.total) - start) as usize;
        let (from, to) = (clamp(from), clamp(to));
        if from >= to {
            return Vec::new();
        }
        self.tail.range(from..to).copied().collect()
    }

    /// The stream offset where the line holding `offset` begins, as far back
    /// as the tail reaches.
    pub fn line_start(&self, offset: u64) -> u64 {
        let start = self.tail_start();
        let end = (offset.clamp(start, self.total) - start) as usize;
        let in_tail = self
            .tail
            .range(..end)
            .rposition(|b| *b == b'\n')
            .map_or(0, |newline| newline + 1);
        start + in_tail as u64
    }

    /// Consumes everything new. While the stream is `open`, an incomplete UTF-8
    /// sequence at the end is held back for the next read instead of being mangled.
    pub fn read(&mut self, open: bool) -> Delta {
        let tail_start = self.total - self.tail.len() as u64;
        let lossy = self.cursor < tail_start;
        let mut from = (self.cursor.max(tail_start) - tail_start) as usize;
        if lossy {
            // The cut may have landed inside a character; its remains say nothing.
            from += self
                .tail
                .iter()
                .skip(from)
                .take(3)
                .take_while(|b| (**b & 0xC0) == 0x80)
                .count();
        }
        let mut bytes: Vec<u8> = self.tail.iter().skip(from).copied().collect();
        if open {
            let keep = bytes.len() - incomplete_suffix_len(&bytes);
            bytes.truncate(keep);
        }
        self.cursor = tail_start + (from + bytes.len()) as u64;
        Delta {
            text: String::from_utf8_lossy(&bytes).into_owned(),
            lossy,
        }
    }
}

impl Drop for StreamBuffer {
    /// A buffer nobody can read any more takes its spill file with it.
    fn drop(&mut self) {
        self.discard_spill();
    }
}

impl Segment for StreamBuffer {
    fn total_bytes(&self) -> u64 {
        self.total
    }

    fn held_from_start(&self) -> u64 {
        match self.spill {
            Spill::Writing(..) => self.total,
            // Without a spill file the start is held only while nothing left the tail.
            _ if self.total == self.tail.len() as u64 => self.total,
            _ => 0,
        }
    }

    fn held_from_end(&self) -> u64 {
        match self.spill {
            Spill::Writing(..) => self.total,
            _ => self.tail.len() as u64,
        }
    }

    fn bytes(&self, from: u64, to: u64) -> Vec<u8> {
        let tail_start = self.total - self.tail.len() as u64;
        if from >= tail_start {
            let (from, to) = ((from - tail_start) as usize, (to - tail_start) as usize);
            return self.tail.range(from..to).copied().collect();
        }
        let Spill::Writing(_, path) = &self.spill else {
            return Vec::new();
        };
        read_file_range(path, from, to).unwrap_or_else(|e| {
            tracing::warn!("spill file {}: {e}", path.display());
            Vec::new()
        })
    }
}

/// Bytes `from..to` of a file.
pub(super) fn read_file_range(path: &Path, from: u64, to: u64) -> std::io::Result<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = File::open(path)?;
    file.seek(SeekFrom::Start(from))?;
    let mut bytes = Vec::new();
    file.take(to - from).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Length of a trailing, incomplete-but-valid-so-far UTF-8 sequence.
fn incomplete_suffix_len(bytes: &[u8]) -> usize {
    for back in 1..=bytes.len().min(3) {
        let b = bytes[bytes.len() - back];
        if b & 0xC0 == 0x80 {
            continue;
        }
        let needed = match b {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => return 0,
        };
        return if needed > back { back } else { 0 };
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(tail: usize, spill: u64) -> OutputLimits {
        OutputLimits {
            max_output_bytes: tail,
            max_spill_bytes: spill,
        }
    }

    #[test]
    fn a_chunk_longer_than_the_tail_keeps_its_end_and_its_line_count() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = StreamBuffer::new(dir.path().join("s").into(), "", limits(4, 0));
        b.push(b"ab\ncdefg");
        assert_eq!(
            (
                b.tail.iter().copied().collect::<Vec<u8>>(),
                b.tail_starts_line
            ),
            (b"defg".to_vec(), false)
        );
        b.push(b"xyz\n1234");
        assert_eq!(
            (
                b.tail.iter().copied().collect::<Vec<u8>>(),
                b.tail_starts_line
            ),
            (b"1234".to_vec(), true)
        );
        b.push(b"56");
        assert_eq!(
            (
                b.tail.iter().copied().collect::<Vec<u8>>(),
                b.tail_starts_line
            ),
            (b"3456".to_vec(), false)
        );
        assert_eq!((b.newlines, b.total), (2, 18));
    }

    #[test]
    fn deltas_consume_and_hold_back_split_characters() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = StreamBuffer::new(dir.path().join("s").into(), "", limits(100, 1000));
        s.push("ab".as_bytes());
        s.push(&"界".as_bytes()[..2]);
        assert_eq!(s.read(true).text, "ab");
        s.push(&"界".as_bytes()[2..]);
        assert_eq!(s.read(true).text, "界");
        assert_eq!(s.read(true).text, "");
    }
}
