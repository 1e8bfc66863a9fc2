//! Bounded capture of a process's stdout and stderr.
//!
//! Each stream keeps an in-memory tail of at most `max_output_bytes`. Once a stream
//! outgrows its tail, the whole stream (from its first byte) is also written to a
//! private spill file, up to `max_spill_bytes`; a stream larger than that discards
//! its spill. Reads are consuming deltas by byte offset; when unread bytes fell out
//! of the tail, the read says so and names the spill files.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::excerpt::{Excerpt, ExcerptWindow, Segment, excerpt};

/// Size limits for one captured process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimits {
    /// In-memory tail kept per stream.
    pub max_output_bytes: usize,
    /// Largest spill file per stream; a longer stream keeps only its tail.
    pub max_spill_bytes: u64,
}

impl Default for OutputLimits {
    fn default() -> Self {
        OutputLimits {
            max_output_bytes: 64_000,
            max_spill_bytes: 64 << 20,
        }
    }
}

/// A disk budget shared by every spill file of one producer (a session). When a
/// stream needs more than is left, the spill files of the oldest finished jobs
/// are deleted first; their later reads say the output is unavailable, as for any
/// stream past its own spill limit. If that is not enough, the writing stream
/// gives up its own spill file.
pub struct SpillBudget {
    limit: u64,
    used: AtomicU64,
    finished: Mutex<std::collections::VecDeque<Weak<Mutex<Capture>>>>,
}

impl SpillBudget {
    /// A budget of `limit` bytes in all.
    pub fn new(limit: u64) -> Arc<SpillBudget> {
        Arc::new(SpillBudget {
            limit,
            used: AtomicU64::new(0),
            finished: Mutex::new(std::collections::VecDeque::new()),
        })
    }

    /// Bytes of spill files on disk now.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::SeqCst)
    }

    /// Marks a job's capture finished: its spill files may now be dropped to make
    /// room for running jobs, oldest first.
    pub fn finished(&self, capture: &Arc<Mutex<Capture>>) {
        let mut finished = lock_or_recover(&self.finished);
        finished.push_back(Arc::downgrade(capture));
        // The registry drops the oldest finished jobs first, so their captures
        // die at the front; a dead entry would still pin its allocation.
        while finished.front().is_some_and(|w| w.strong_count() == 0) {
            finished.pop_front();
        }
    }

    fn release(&self, bytes: u64) {
        let _ = self
            .used
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |u| {
                Some(u.saturating_sub(bytes))
            });
    }

    /// Takes `bytes` from the budget, evicting finished jobs' spill files as
    /// needed. False when even that leaves too little.
    fn reserve(&self, bytes: u64) -> bool {
        loop {
            let used = self.used.load(Ordering::SeqCst);
            if used.saturating_add(bytes) <= self.limit {
                if self
                    .used
                    .compare_exchange(used, used + bytes, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
                {
                    return true;
                }
                continue;
            }
            let oldest = lock_or_recover(&self.finished).pop_front();
            let Some(oldest) = oldest else {
                return false;
            };
            if let Some(capture) = oldest.upgrade() {
                let mut capture = lock_or_recover(&capture);
                capture.stdout.discard_spill();
                capture.stderr.discard_spill();
            }
        }
    }
}

fn lock_or_recover<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Which stream a buffer captures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamName {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

enum Spill {
    /// Not needed yet: everything written so far is still in the tail.
    NotStarted,
    /// Writing the whole stream here.
    Writing(File, PathBuf),
    /// Too large, or the file could not be written: only the tail remains.
    Unavailable,
}

/// One stream's bounded buffer and read cursor.
pub struct StreamBuffer {
    pub(crate) tail: VecDeque<u8>,
    /// Bytes ever written to the stream.
    pub(crate) total: u64,
    /// Absolute offset of the next unread byte.
    pub(crate) cursor: u64,
    /// Line endings ever written, for line numbers past what is retained.
    pub(crate) newlines: u64,
    /// Whether the tail's first byte starts a line (the byte before it, now
    /// dropped, was a line ending).
    pub(crate) tail_starts_line: bool,
    spill: Spill,
    spill_path: PathBuf,
    limits: OutputLimits,
    budget: Option<Arc<SpillBudget>>,
    /// Bytes this stream has on disk (and holds of the budget).
    spilled: u64,
}

/// One consuming read of a stream.
pub struct Delta {
    /// The new text (lossy UTF-8: invalid bytes become U+FFFD).
    pub text: String,
    /// Whether unread bytes were lost from memory before this read.
    pub lossy: bool,
}

impl StreamBuffer {
    /// An empty buffer whose spill file, if it is ever needed, is `spill_path`.
    pub fn new(spill_path: PathBuf, limits: OutputLimits) -> StreamBuffer {
        StreamBuffer {
            tail: VecDeque::new(),
            total: 0,
            cursor: 0,
            newlines: 0,
            tail_starts_line: true,
            spill: Spill::NotStarted,
            spill_path,
            limits,
            budget: None,
            spilled: 0,
        }
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
                    self.spill_path.display()
                );
                self.discard_spill();
                return;
            }
            self.spilled += needed;
        }
        if let Spill::NotStarted = self.spill {
            // Nothing has left the tail yet, so it still holds the whole stream.
            let opened = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&self.spill_path)
                .and_then(|mut file| {
                    let (a, b) = self.tail.as_slices();
                    file.write_all(a)?;
                    file.write_all(b)?;
                    Ok(file)
                });
            self.spill = match opened {
                Ok(file) => Spill::Writing(file, self.spill_path.clone()),
                Err(e) => {
                    tracing::warn!("spill file {}: {e}", self.spill_path.display());
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

    /// Whether the spill file holds the whole stream.
    pub(crate) fn spilled_whole(&self) -> bool {
        matches!(self.spill, Spill::Writing(..))
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
fn read_file_range(path: &Path, from: u64, to: u64) -> std::io::Result<Vec<u8>> {
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

/// Both streams of one process, plus a one-time spawn-failure note.
pub struct Capture {
    /// Standard output.
    pub stdout: StreamBuffer,
    /// Standard error.
    pub stderr: StreamBuffer,
    /// Whether the process is done writing (no more bytes will arrive).
    pub closed: bool,
    /// When the process last wrote anything.
    pub last_output: Option<std::time::Instant>,
}

impl Capture {
    /// Empty buffers spilling to `<spill_stem>.stdout` and `<spill_stem>.stderr`.
    pub fn new(spill_stem: &Path, limits: OutputLimits) -> Capture {
        Capture::with_budget(spill_stem, limits, None)
    }

    /// [`Capture::new`], charging the spill files to a shared `budget`.
    pub fn with_budget(
        spill_stem: &Path,
        limits: OutputLimits,
        budget: Option<Arc<SpillBudget>>,
    ) -> Capture {
        let with_ext = |ext: &str| {
            let mut p = spill_stem.as_os_str().to_owned();
            p.push(ext);
            PathBuf::from(p)
        };
        Capture {
            stdout: StreamBuffer::new(with_ext(".stdout"), limits).with_budget(budget.clone()),
            stderr: StreamBuffer::new(with_ext(".stderr"), limits).with_budget(budget),
            closed: false,
            last_output: None,
        }
    }

    /// One stream.
    pub fn stream(&self, stream: StreamName) -> &StreamBuffer {
        match stream {
            StreamName::Stdout => &self.stdout,
            StreamName::Stderr => &self.stderr,
        }
    }

    /// Appends to one stream.
    pub fn push(&mut self, stream: StreamName, bytes: &[u8]) {
        self.last_output = Some(std::time::Instant::now());
        match stream {
            StreamName::Stdout => self.stdout.push(bytes),
            StreamName::Stderr => self.stderr.push(bytes),
        }
    }

    /// The whole output so far (stdout, then `[stderr]` and stderr, as reads
    /// show them), or its two ends, without consuming anything.
    pub fn excerpt(&self, window: ExcerptWindow) -> Excerpt {
        let mut separator = Vec::new();
        if self.stderr.total() > 0 {
            let ends_line =
                self.stdout.total() == 0 || self.stdout.tail.back().is_none_or(|b| *b == b'\n');
            if !ends_line {
                separator.push(b'\n');
            }
            separator.extend_from_slice(b"[stderr]\n");
        }
        let separator: &[u8] = &separator;
        excerpt(&[&self.stdout, &separator, &self.stderr], window)
    }

    /// The consuming read the model sees: new stdout, then `[stderr]` and new
    /// stderr, then a note when unread bytes were lost from memory.
    pub fn render_delta(&mut self) -> String {
        let open = !self.closed;
        let out = self.stdout.read(open);
        let err = self.stderr.read(open);
        let mut text = out.text;
        if !err.text.is_empty() {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str("[stderr]\n");
            text.push_str(&err.text);
        }
        if out.lossy || err.lossy {
            let paths: Vec<String> = [(&self.stdout, out.lossy), (&self.stderr, err.lossy)]
                .into_iter()
                .filter(|(_, lossy)| *lossy)
                .filter_map(|(s, _)| s.spill_path().map(|p| p.display().to_string()))
                .collect();
            let where_ = if paths.is_empty() {
                "(unavailable)".to_owned()
            } else {
                paths.join(", ")
            };
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&format!(
                "[some output was dropped from memory; full output: {where_}]"
            ));
        }
        text
    }
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
        let mut b = StreamBuffer::new(dir.path().join("s"), limits(4, 0));
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
        let mut s = StreamBuffer::new(dir.path().join("s"), limits(100, 1000));
        s.push("ab".as_bytes());
        s.push(&"界".as_bytes()[..2]);
        assert_eq!(s.read(true).text, "ab");
        s.push(&"界".as_bytes()[2..]);
        assert_eq!(s.read(true).text, "界");
        assert_eq!(s.read(true).text, "");
    }

    #[test]
    fn overflow_is_announced_and_spilled_whole() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Capture::new(&dir.path().join("job"), limits(4, 1000));
        c.push(StreamName::Stdout, b"0123456789");
        let text = c.render_delta();
        let path = dir.path().join("job.stdout");
        assert_eq!(
            text,
            format!(
                "6789\n[some output was dropped from memory; full output: {}]",
                path.display()
            )
        );
        assert_eq!(std::fs::read(&path).unwrap(), b"0123456789");
    }

    #[test]
    fn spill_is_dropped_past_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Capture::new(&dir.path().join("job"), limits(4, 8));
        c.push(StreamName::Stdout, b"012345");
        c.push(StreamName::Stdout, b"6789");
        assert!(!dir.path().join("job.stdout").exists());
        assert_eq!(
            c.render_delta(),
            "6789\n[some output was dropped from memory; full output: (unavailable)]"
        );
    }

    #[test]
    fn excerpts_read_the_spill_without_consuming() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Capture::new(&dir.path().join("job"), limits(4, 1000));
        c.push(StreamName::Stdout, b"0123456789");
        c.push(StreamName::Stderr, b"oops");
        let window = ExcerptWindow {
            whole_up_to: 100,
            head_bytes: 0,
            tail_bytes: 0,
        };
        assert_eq!(c.excerpt(window).head, "0123456789\n[stderr]\noops");
        let ends = ExcerptWindow {
            whole_up_to: 5,
            head_bytes: 3,
            tail_bytes: 2,
        };
        let e = c.excerpt(ends);
        assert_eq!(
            (e.head.as_str(), e.tail.as_str(), e.omitted_bytes),
            ("012", "ps", 19)
        );
        // The consuming read still has everything to give.
        assert!(c.render_delta().starts_with("6789"));
    }

    #[test]
    fn a_full_budget_drops_the_oldest_finished_spill_first() {
        let dir = tempfile::tempdir().unwrap();
        let budget = SpillBudget::new(25);
        let old = Arc::new(Mutex::new(Capture::with_budget(
            &dir.path().join("old"),
            limits(4, 1000),
            Some(budget.clone()),
        )));
        old.lock().unwrap().push(StreamName::Stdout, b"0123456789");
        assert_eq!(budget.used(), 10);
        budget.finished(&old);
        let mut new = Capture::with_budget(
            &dir.path().join("new"),
            limits(4, 1000),
            Some(budget.clone()),
        );
        new.push(StreamName::Stdout, b"abcdefghijklmnopqrst");
        // 10 + 20 > 25: the finished job's file went, the running job's stayed.
        assert!(!dir.path().join("old.stdout").exists());
        assert_eq!(
            std::fs::read(dir.path().join("new.stdout")).unwrap(),
            b"abcdefghijklmnopqrst"
        );
        assert_eq!(budget.used(), 20);
        assert_eq!(
            old.lock().unwrap().render_delta(),
            "6789\n[some output was dropped from memory; full output: (unavailable)]"
        );
        // Nothing finished is left to evict: the writer loses its own spill.
        new.push(StreamName::Stdout, b"uvwxyz");
        assert!(!dir.path().join("new.stdout").exists());
        assert_eq!(budget.used(), 0);
    }

    #[test]
    fn dropped_captures_leave_the_budget() {
        let dir = tempfile::tempdir().unwrap();
        let budget = SpillBudget::new(1 << 20);
        let capture = |name: &str| {
            Arc::new(Mutex::new(Capture::with_budget(
                &dir.path().join(name),
                limits(4, 1000),
                Some(budget.clone()),
            )))
        };
        for i in 0..100 {
            // The registry dropped each earlier job before this one finished.
            budget.finished(&capture(&format!("job-{i}")));
        }
        assert_eq!(lock_or_recover(&budget.finished).len(), 1);
    }

    #[test]
    fn stderr_follows_stdout_on_its_own_line() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Capture::new(&dir.path().join("job"), OutputLimits::default());
        c.push(StreamName::Stdout, b"out");
        c.push(StreamName::Stderr, b"err\n");
        assert_eq!(c.render_delta(), "out\n[stderr]\nerr\n");
        c.push(StreamName::Stderr, b"again");
        assert_eq!(c.render_delta(), "[stderr]\nagain");
    }
}
