//! The handle through which a producer writes a job's capture and the
//! registry reads it.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::watch;

use super::lines::{self, Retained};
use super::{
    Capture, Excerpt, ExcerptWindow, LineMatch, LinePage, LineQuery, OutputLimits, OutputStream,
    ScanState, Screen, SpillBudget, TerminalSize,
};
use crate::sync::{LazyWatch, lock};

/// One job's capture, shared by the producer that writes it and the registry
/// that reads, excerpts, pages and watches it. Cheap to clone.
#[derive(Clone)]
pub struct SharedCapture {
    capture: Arc<Mutex<Capture>>,
    /// Bumped whenever output arrives (its value: bytes written so far), and
    /// once more when the job is done writing.
    changes: Arc<LazyWatch<u64>>,
    budget: Option<Arc<SpillBudget>>,
}

impl SharedCapture {
    /// Empty streams spilling to `<spill_stem>.stdout` and `<spill_stem>.stderr`,
    /// charged to `budget` when there is one. With `max_spill_bytes` 0 nothing
    /// ever reaches the disk.
    pub fn new(
        spill_stem: &Path,
        limits: OutputLimits,
        budget: Option<Arc<SpillBudget>>,
    ) -> SharedCapture {
        let capture = Capture::with_budget(spill_stem, limits, budget.clone());
        SharedCapture::of(capture, budget)
    }

    fn of(capture: Capture, budget: Option<Arc<SpillBudget>>) -> SharedCapture {
        SharedCapture {
            capture: Arc::new(Mutex::new(capture)),
            changes: Arc::new(LazyWatch::new(0)),
            budget,
        }
    }

    /// Appends to one stream and wakes the ready waits; answers the bytes
    /// written to both streams so far.
    pub fn push(&self, stream: OutputStream, bytes: &[u8]) -> u64 {
        let written = {
            let mut capture = lock(&self.capture);
            capture.push(stream, bytes);
            capture.total()
        };
        self.changes.send_replace(written);
        written
    }

    /// [`SharedCapture::push`], with what the job's terminal answers the
    /// bytes (a cursor report), to be written back to the terminal (see
    /// [`crate::capture::Terminal::take_replies`]); empty without one.
    pub fn push_answered(&self, stream: OutputStream, bytes: &[u8]) -> (u64, Vec<u8>) {
        let (written, replies) = {
            let mut capture = lock(&self.capture);
            capture.push(stream, bytes);
            (capture.total(), capture.take_replies())
        };
        self.changes.send_replace(written);
        (written, replies)
    }

    /// The job is done writing: the last incomplete line is complete now (the
    /// ready waits are woken for it), and the budget may drop the spill files
    /// for running jobs.
    pub fn close(&self) {
        lock(&self.capture).close();
        // The count stays: only the watchers wake.
        self.changes.touch();
        if let Some(budget) = &self.budget {
            budget.finished(&self.capture);
        }
    }

    /// The consuming read the model sees: new stdout, then `[stderr]` and new
    /// stderr, then a note when unread bytes were lost from memory.
    pub fn read_delta(&self) -> String {
        self.settled(Capture::render_delta)
    }

    /// Runs `f` on the capture once a terminal's untold rows are told; the
    /// waits hear of rows told, as of any output (a wait that looked at
    /// them untold a moment ago looks again).
    fn settled<T>(&self, f: impl FnOnce(&mut Capture) -> T) -> T {
        let (done, told) = {
            let mut capture = lock(&self.capture);
            let told = capture.settle();
            (f(&mut capture), told)
        };
        if told {
            self.changes.touch();
        }
        done
    }

    /// The whole output so far (stdout, then `[stderr]` and stderr, as reads
    /// show them), or its two ends, without consuming anything.
    pub fn excerpt(&self, window: ExcerptWindow) -> Excerpt {
        self.settled(|capture| capture.excerpt(window))
    }

    /// A capture for a job on a terminal of `size` (see
    /// [`crate::capture::Terminal`]): what the job writes to stdout is kept
    /// as written in the raw stream and rendered into stdout.
    pub fn with_terminal(
        spill_stem: &Path,
        limits: OutputLimits,
        budget: Option<Arc<SpillBudget>>,
        size: TerminalSize,
    ) -> SharedCapture {
        let capture = Capture::with_budget(spill_stem, limits, budget.clone());
        SharedCapture::of(capture.with_terminal(size), budget)
    }

    /// A capture for a job without a terminal whose output is rendered:
    /// each stream through a screen model of its own, the bytes as written
    /// kept in the raw streams.
    pub fn rendered(
        spill_stem: &Path,
        limits: OutputLimits,
        budget: Option<Arc<SpillBudget>>,
    ) -> SharedCapture {
        let capture = Capture::with_budget(spill_stem, limits, budget.clone());
        SharedCapture::of(capture.with_rendering(), budget)
    }

    /// Whether the job writes (or wrote) to a terminal.
    pub fn has_terminal(&self) -> bool {
        lock(&self.capture).has_terminal()
    }

    /// What the job's terminal shows now (or showed last, once the job is
    /// done); `None` for a job without one.
    pub fn screen(&self) -> Option<Screen> {
        lock(&self.capture).screen()
    }

    /// The prompt the job's cursor sits after, as a line of its rendered
    /// stdout (numbered as the line it is part of); `None` for a job without
    /// a terminal or not at a prompt.
    pub fn prompt_line(&self) -> Option<LineMatch> {
        let text = lock(&self.capture).prompt()?;
        let number = self.settled(|capture| capture.stdout.newlines() + 1);
        Some(LineMatch {
            line: super::OutputLine {
                stream: OutputStream::Stdout,
                number,
                text,
            },
            before: Vec::new(),
        })
    }

    /// A new size for the job's terminal (false when it has none), once
    /// `apply` (the kernel's resize, which tells the program) succeeded, both
    /// under the capture's lock: what the program draws for the new size
    /// cannot reach the old screen.
    ///
    /// # Errors
    ///
    /// `apply`'s error; nothing changed then.
    pub fn resize_with(
        &self,
        size: TerminalSize,
        apply: impl FnOnce() -> std::io::Result<()>,
    ) -> std::io::Result<bool> {
        let resized = {
            let mut capture = lock(&self.capture);
            if !capture.has_terminal() {
                return Ok(false);
            }
            apply()?;
            capture.resize(size)
        };
        if resized {
            self.changes.touch();
        }
        Ok(resized)
    }

    /// Retained lines, without consuming anything. `pattern` is the compiled
    /// search pattern of a [`LineQuery::Search`]. A query of a raw stream
    /// looks at that stream alone.
    pub fn lines(&self, query: &LineQuery, pattern: Option<&regex::Regex>) -> LinePage {
        let raw = query.raw_stream();
        let retained: Vec<Retained> = self.settled(|capture| {
            let streams: &[OutputStream] = match &raw {
                Some(stream) => std::slice::from_ref(stream),
                None => &[OutputStream::Stdout, OutputStream::Stderr],
            };
            streams
                .iter()
                .filter_map(|s| capture.stream(*s).map(|b| Retained::of(b, *s)))
                .collect()
        });
        // Spill files are read after the lock, so the job's output keeps
        // flowing, and off the async workers, so a slow pattern holds no
        // other call.
        heavy(|| lines::query(&retained, query, pattern))
    }

    /// How far the model has read stdout and stderr, in bytes as written:
    /// what a host that outlives a crash records, to restore with
    /// [`SharedCapture::set_cursors`].
    pub fn cursors(&self) -> [u64; 2] {
        lock(&self.capture).cursors()
    }

    /// Moves the read cursors: a job's output pushed again (from its files,
    /// after a host's restart) is unread only past where the model had read.
    pub fn set_cursors(&self, cursors: [u64; 2]) {
        lock(&self.capture).set_cursors(cursors);
    }

    /// Bumped whenever output arrives (its value: bytes written so far).
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// When output last arrived.
    pub fn last_output(&self) -> Option<Instant> {
        lock(&self.capture).last_output()
    }

    /// The first unread line, from where `scan` left off, that `pattern`
    /// matches; advances `scan` past the complete lines it tried.
    pub fn find_unread(&self, pattern: &regex::Regex, scan: &mut ScanState) -> Option<LineMatch> {
        if let Some(found) = self.find_told(pattern, scan) {
            return Some(found);
        }
        // A terminal job's rows not told yet are tried without telling them:
        // telling them at every wake of a wait would make each frame of a
        // progress bar a line. Only a row that matches is told, then found.
        let pending = lock(&self.capture).pending_lines();
        if pending.is_empty() || !heavy(|| pending.iter().any(|line| pattern.is_match(line))) {
            return None;
        }
        self.settled(|_| ());
        self.find_told(pattern, scan)
    }

    /// [`SharedCapture::find_unread`] over what the streams hold now.
    fn find_told(&self, pattern: &regex::Regex, scan: &mut ScanState) -> Option<LineMatch> {
        // Copied under the lock, matched without it (and off the async
        // workers): a slow pattern neither stalls the job's output nor the
        // server's other calls.
        let (mut stdout, mut stderr) = {
            let capture = lock(&self.capture);
            (
                lines::unread(&capture.stdout, OutputStream::Stdout, scan.stdout),
                lines::unread(&capture.stderr, OutputStream::Stderr, scan.stderr),
            )
        };
        let (line, at) = heavy(|| {
            stdout.fetch_behind();
            stderr.fetch_behind();
            lines::scan_unread(&stdout, pattern, &mut scan.stdout)
                .or_else(|| lines::scan_unread(&stderr, pattern, &mut scan.stderr))
        })?;
        let capture = lock(&self.capture);
        let stream = capture.stream(line.stream)?;
        Some(LineMatch {
            before: lines::context_before(stream, line.stream, line.number, at),
            line,
        })
    }
}

/// Runs CPU-heavy work a caller cannot bound in advance (matching a model's
/// pattern, reading a spill file) so that it holds no async worker: on a
/// multi-threaded runtime the worker hands its other tasks over first
/// (`block_in_place`); elsewhere (a current-thread runtime, no runtime) it
/// just runs.
pub(crate) fn heavy<T>(work: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => {
            // `block_in_place` refuses (by panicking, before it runs the work)
            // where the thread may not block, for example inside a `LocalSet`:
            // the work then runs in place.
            let mut work = Some(work);
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                tokio::task::block_in_place(|| (work.take().expect("taken once"))())
            })) {
                Ok(done) => done,
                Err(panic) => match work.take() {
                    Some(work) => work(),
                    None => std::panic::resume_unwind(panic),
                },
            }
        }
        _ => work(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heavy_work_runs_wherever_it_is_called() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        // On a worker: handed off with block_in_place.
        let on_worker = rt.block_on(async { tokio::spawn(async { heavy(|| 8) }).await.unwrap() });
        assert_eq!(on_worker, 8);
        // Inside a LocalSet the thread may not block: it runs in place.
        let local = tokio::task::LocalSet::new();
        assert_eq!(rt.block_on(local.run_until(async { heavy(|| 7) })), 7);
        // No runtime at all.
        assert_eq!(heavy(|| 6), 6);
    }
}
