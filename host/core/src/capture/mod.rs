//! Bounded capture of a job's stdout and stderr: the ground floor both the
//! registry (which reads, excerpts, pages and watches it) and the producers
//! (which write into it) stand on. It depends on neither.
//!
//! Each stream keeps an in-memory tail of at most `max_output_bytes`. Once a stream
//! outgrows its tail, the whole stream (from its first byte) is also written to a
//! private spill file, up to `max_spill_bytes`; a stream larger than that discards
//! its spill. Reads are consuming deltas by byte offset; when unread bytes fell out
//! of the tail, the read says so and names the spill files.
//!
//! The rooms: `budget` (limits and the shared disk budget), `buffer` (one
//! stream's tail, spill file and cursor), `excerpt` (bounded views of the whole
//! output), `query` (what a line query asks and answers), `lines` (numbered
//! lines: pages, searches, the ready wait's look at unread lines), `shared`
//! (the handle a producer writes and the registry reads, and `heavy`, which
//! keeps slow reads off the async workers), and here the capture of both
//! streams.
//!
//! (Over 500 lines: the capture's public face, `OutputStream` and its limits
//! and budget wiring, over the rooms listed above; most of it is
//! documentation of what each limit does.)

mod budget;
mod buffer;
mod excerpt;
mod lines;
mod query;
mod shared;
mod terminal;

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

pub use budget::{OutputLimits, SpillBudget};
pub(crate) use buffer::StreamBuffer;
pub use excerpt::{Excerpt, ExcerptWindow, MAX_EXCERPT_PART, Segment, excerpt, text_excerpt};
pub use query::{
    LineMatch, LinePage, LineQuery, MAX_LINE_BYTES, OutputLine, SEARCH_TIME_BUDGET, ScanState,
    StreamExtent,
};
pub use shared::SharedCapture;
pub use terminal::{Screen, TERMINAL_DIMENSIONS, Terminal, TerminalSize, is_prompt};

/// One output stream of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OutputStream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
    /// A terminal or rendered job's stdout as the program wrote it (its
    /// stdout is the rendered text); any other job's stdout.
    Raw,
    /// A rendered job's stderr as the program wrote it; any other job's stderr.
    RawStderr,
}

/// The screen each stream of a job without a terminal is rendered on, when
/// its output is rendered: wide enough that a progress line redrawn with
/// `\r` stays on one row (a longer line wraps, and is joined back).
pub const RENDER_SIZE: TerminalSize = TerminalSize {
    rows: 30,
    cols: 250,
};

/// A terminal job's screen model and the bytes it was fed.
struct TerminalCapture {
    drawn: Drawn,
    raw: StreamBuffer,
}

/// A terminal while its job writes, then only what it showed last: a
/// finished job keeps no screen model (up to a 1000 by 1000 grid).
enum Drawn {
    Live(Box<Terminal>),
    Ended(Screen),
}

/// Both streams of one job.
pub(crate) struct Capture {
    stdout: StreamBuffer,
    stderr: StreamBuffer,
    /// For a job on a terminal, or one whose output is rendered: what
    /// stdout is rendered from.
    terminal: Option<Box<TerminalCapture>>,
    /// For a job whose output is rendered: what stderr is rendered from.
    stderr_terminal: Option<Box<TerminalCapture>>,
    /// The job writes to a terminal (it has a screen, a cursor, a size).
    tty: bool,
    /// Whether the job is done writing (no more bytes will arrive).
    closed: bool,
    /// When the job last wrote anything.
    last_output: Option<Instant>,
}

impl Capture {
    /// Empty buffers spilling to `<spill_stem>.stdout` and `<spill_stem>.stderr`.
    #[cfg(test)]
    pub(crate) fn new(spill_stem: &Path, limits: OutputLimits) -> Capture {
        Capture::with_budget(spill_stem, limits, None)
    }

    /// [`Capture::new`], charging the spill files to a shared `budget`.
    pub(crate) fn with_budget(
        spill_stem: &Path,
        limits: OutputLimits,
        budget: Option<Arc<SpillBudget>>,
    ) -> Capture {
        let stem: Arc<Path> = spill_stem.into();
        Capture {
            stdout: StreamBuffer::new(stem.clone(), ".stdout", limits).with_budget(budget.clone()),
            stderr: StreamBuffer::new(stem, ".stderr", limits).with_budget(budget),
            terminal: None,
            stderr_terminal: None,
            tty: false,
            closed: false,
            last_output: None,
        }
    }

    /// Makes this the capture of a job on a terminal of `size`: what it
    /// writes to stdout is kept as written (spilling to `<spill_stem>.raw`)
    /// and rendered into stdout.
    pub(crate) fn with_terminal(mut self, size: TerminalSize) -> Capture {
        self.terminal = Some(self.rendered(".raw", Terminal::new(size)));
        self.tty = true;
        self
    }

    /// Makes this the capture of a job without a terminal whose output is
    /// rendered: each stream through a screen model of its own
    /// ([`RENDER_SIZE`]), kept as written in `<spill_stem>.raw` and
    /// `<spill_stem>.raw-stderr`.
    pub(crate) fn with_rendering(mut self) -> Capture {
        self.terminal = Some(self.rendered(".raw", Terminal::for_pipe(RENDER_SIZE)));
        self.stderr_terminal = Some(self.rendered(".raw-stderr", Terminal::for_pipe(RENDER_SIZE)));
        self
    }

    /// A raw stream spilling to `<spill_stem><ext>`, the stem its other
    /// streams have, with `terminal` drawing it.
    fn rendered(&self, ext: &'static str, terminal: Terminal) -> Box<TerminalCapture> {
        let raw = StreamBuffer::new(self.stdout.spill_stem(), ext, self.stdout.limits())
            .with_budget(self.stdout.budget());
        Box::new(TerminalCapture {
            drawn: Drawn::Live(Box::new(terminal)),
            raw,
        })
    }

    /// One stream. The raw streams of a job whose output is not rendered
    /// are its streams themselves (its output is as it was written).
    pub(crate) fn stream(&self, stream: OutputStream) -> Option<&StreamBuffer> {
        Some(match stream {
            OutputStream::Stdout => &self.stdout,
            OutputStream::Stderr => &self.stderr,
            OutputStream::Raw => self.terminal.as_ref().map_or(&self.stdout, |t| &t.raw),
            OutputStream::RawStderr => self
                .stderr_terminal
                .as_ref()
                .map_or(&self.stderr, |t| &t.raw),
        })
    }

    /// Appends to one stream. A terminal job's stdout goes through its
    /// terminal; the rows that left the screen reach the rendered stream now.
    pub(crate) fn push(&mut self, stream: OutputStream, bytes: &[u8]) {
        self.last_output = Some(Instant::now());
        let (rendered, plain) = match stream {
            OutputStream::Stdout | OutputStream::Raw => {
                (self.terminal.as_deref_mut(), &mut self.stdout)
            }
            OutputStream::Stderr | OutputStream::RawStderr => {
                (self.stderr_terminal.as_deref_mut(), &mut self.stderr)
            }
        };
        match rendered {
            Some(t) => {
                t.raw.push(bytes);
                if let Drawn::Live(terminal) = &mut t.drawn {
                    terminal.feed(bytes);
                    let done = terminal.take_final();
                    if !done.is_empty() {
                        plain.push(done.as_bytes());
                    }
                }
            }
            None => plain.push(bytes),
        }
    }

    /// Brings a terminal job's rendered stream up to what its screen shows
    /// (see [`terminal`]); before anything reads it.
    /// Answers whether it told anything.
    pub(crate) fn settle(&mut self) -> bool {
        let mut told = false;
        for (rendered, plain) in [
            (self.terminal.as_deref_mut(), &mut self.stdout),
            (self.stderr_terminal.as_deref_mut(), &mut self.stderr),
        ] {
            if let Some(TerminalCapture {
                drawn: Drawn::Live(terminal),
                ..
            }) = rendered
            {
                let text = terminal.flush();
                if !text.is_empty() {
                    plain.push(text.as_bytes());
                    told = true;
                }
            }
        }
        told
    }

    /// The job's terminal while it writes (only a job on a terminal has one).
    fn live_terminal(&self) -> Option<&Terminal> {
        match self.terminal.as_deref() {
            Some(TerminalCapture {
                drawn: Drawn::Live(terminal),
                ..
            }) if self.tty => Some(terminal),
            _ => None,
        }
    }

    /// Whether the job writes (or wrote) to a terminal.
    pub(crate) fn has_terminal(&self) -> bool {
        self.tty
    }

    /// What the job's terminal shows (or showed last, once the job is done).
    pub(crate) fn screen(&self) -> Option<Screen> {
        if !self.tty {
            return None;
        }
        self.terminal.as_deref().map(|t| match &t.drawn {
            Drawn::Live(terminal) => terminal.screen(),
            Drawn::Ended(screen) => screen.clone(),
        })
    }

    /// The prompt the job's cursor sits after, while it writes.
    pub(crate) fn prompt(&self) -> Option<String> {
        self.live_terminal().and_then(Terminal::prompt)
    }

    /// What the job's terminal answers it (see [`Terminal::take_replies`]).
    pub(crate) fn take_replies(&mut self) -> Vec<u8> {
        match self.terminal.as_deref_mut() {
            Some(TerminalCapture {
                drawn: Drawn::Live(terminal),
                ..
            }) if self.tty => terminal.take_replies(),
            _ => Vec::new(),
        }
    }

    /// The rows a settle would tell now, of both streams (see
    /// [`Terminal::pending_lines`]).
    pub(crate) fn pending_lines(&self) -> Vec<String> {
        [self.terminal.as_deref(), self.stderr_terminal.as_deref()]
            .into_iter()
            .flatten()
            .filter_map(|t| match &t.drawn {
                Drawn::Live(terminal) => Some(terminal.pending_lines()),
                Drawn::Ended(_) => None,
            })
            .flatten()
            .collect()
    }

    /// A new size for the job's terminal; false when it has none (or the
    /// job is done).
    pub(crate) fn resize(&mut self, size: TerminalSize) -> bool {
        if !self.tty {
            return false;
        }
        let Some(TerminalCapture {
            drawn: Drawn::Live(terminal),
            ..
        }) = self.terminal.as_deref_mut()
        else {
            return false;
        };
        terminal.resize(size);
        let done = terminal.take_final();
        if !done.is_empty() {
            self.stdout.push(done.as_bytes());
        }
        true
    }

    /// The read cursors of stdout and stderr as written (not rendered).
    pub(crate) fn cursors(&self) -> [u64; 2] {
        [self.stdout.cursor(), self.stderr.cursor()]
    }

    /// Moves the read cursors of stdout and stderr (see [`Capture::cursors`]).
    pub(crate) fn set_cursors(&mut self, cursors: [u64; 2]) {
        self.stdout.set_cursor(cursors[0]);
        self.stderr.set_cursor(cursors[1]);
    }

    /// Bytes the job ever wrote to both streams (a terminal job's as written).
    pub(crate) fn total(&self) -> u64 {
        let out = self.terminal.as_ref().map_or(&self.stdout, |t| &t.raw);
        let err = self
            .stderr_terminal
            .as_ref()
            .map_or(&self.stderr, |t| &t.raw);
        out.total() + err.total()
    }

    /// No more bytes will arrive: reads no longer hold back an incomplete
    /// character at the end.
    pub(crate) fn close(&mut self) {
        self.settle();
        for t in [
            self.terminal.as_deref_mut(),
            self.stderr_terminal.as_deref_mut(),
        ]
        .into_iter()
        .flatten()
        {
            if let Drawn::Live(terminal) = &t.drawn {
                t.drawn = Drawn::Ended(terminal.screen());
            }
        }
        self.closed = true;
    }

    /// When the job last wrote anything.
    pub(crate) fn last_output(&self) -> Option<Instant> {
        self.last_output
    }

    /// Deletes both spill files; from now on only the tails remain.
    pub(crate) fn discard_spills(&mut self) {
        self.stdout.discard_spill();
        self.stderr.discard_spill();
        for t in [self.terminal.as_mut(), self.stderr_terminal.as_mut()]
            .into_iter()
            .flatten()
        {
            t.raw.discard_spill();
        }
    }

    /// The whole output so far (stdout, then `[stderr]` and stderr, as reads
    /// show them), or its two ends, without consuming anything.
    pub(crate) fn excerpt(&self, window: ExcerptWindow) -> Excerpt {
        let mut separator = Vec::new();
        if self.stderr.total() > 0 {
            if !self.stdout.ends_line() {
                separator.push(b'\n');
            }
            separator.extend_from_slice(crate::words::STDERR_HEADER.as_bytes());
        }
        let separator: &[u8] = &separator;
        excerpt(&[&self.stdout, &separator, &self.stderr], window)
    }

    /// The consuming read the model sees: new stdout, then `[stderr]` and new
    /// stderr, then a note when unread bytes were lost from memory.
    pub(crate) fn render_delta(&mut self) -> String {
        let open = !self.closed;
        let out = self.stdout.read(open);
        let err = self.stderr.read(open);
        let mut text = out.text;
        if !err.text.is_empty() {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(crate::words::STDERR_HEADER);
            text.push_str(&err.text);
        }
        if out.lossy || err.lossy {
            let paths: Vec<String> = [(&self.stdout, out.lossy), (&self.stderr, err.lossy)]
                .into_iter()
                .filter(|(_, lossy)| *lossy)
                .filter_map(|(s, _)| s.spill_path().map(|p| p.display().to_string()))
                .collect();
            let where_ = if paths.is_empty() {
                crate::words::UNAVAILABLE.to_owned()
            } else {
                paths.join(", ")
            };
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&crate::words::output_dropped(&where_));
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    fn limits(tail: usize, spill: u64) -> OutputLimits {
        OutputLimits {
            max_output_bytes: tail,
            max_spill_bytes: spill,
        }
    }

    #[test]
    fn overflow_is_announced_and_spilled_whole() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Capture::new(&dir.path().join("job"), limits(4, 1000));
        c.push(OutputStream::Stdout, b"0123456789");
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
        c.push(OutputStream::Stdout, b"012345");
        c.push(OutputStream::Stdout, b"6789");
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
        c.push(OutputStream::Stdout, b"0123456789");
        c.push(OutputStream::Stderr, b"oops");
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
        old.lock()
            .unwrap()
            .push(OutputStream::Stdout, b"0123456789");
        assert_eq!(budget.used(), 10);
        budget.finished(&old);
        let mut new = Capture::with_budget(
            &dir.path().join("new"),
            limits(4, 1000),
            Some(budget.clone()),
        );
        new.push(OutputStream::Stdout, b"abcdefghijklmnopqrst");
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
        new.push(OutputStream::Stdout, b"uvwxyz");
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
        assert_eq!(budget.finished_len(), 1);
    }

    #[test]
    fn stderr_follows_stdout_on_its_own_line() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Capture::new(&dir.path().join("job"), OutputLimits::default());
        c.push(OutputStream::Stdout, b"out");
        c.push(OutputStream::Stderr, b"err\n");
        assert_eq!(c.render_delta(), "out\n[stderr]\nerr\n");
        c.push(OutputStream::Stderr, b"again");
        assert_eq!(c.render_delta(), "[stderr]\nagain");
    }
}
