//! Numbered lines of a captured stream: pages and searches over what is still
//! retained (the whole stream in its spill file, or the in-memory tail), and the
//! ready wait's look at unread lines. Nothing here consumes output.
//!
//! (Over 500 lines only with its tests, some 160 of them.)

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;

use regex::Regex;

use super::{
    LinePage, LineQuery, MAX_LINE_BYTES, OutputLine, OutputStream, SEARCH_TIME_BUDGET,
    StreamBuffer, StreamExtent,
};

/// The most lines, matches or context lines one query returns, whatever it
/// asks for.
const MAX_QUERY_LINES: u32 = 1000;
/// Lines shown before a ready line.
const READY_CONTEXT: usize = 2;

/// The most bytes of one line that are ever held or looked at: enough for its
/// text cut to [`MAX_LINE_BYTES`] to come out the same as from the whole line
/// (lossy decoding never shortens bytes, and the cut falls a character before
/// the bound). A longer line costs what it shows, not its length.
const KEPT_LINE_BYTES: usize = MAX_LINE_BYTES + 8;

/// A line's text: lossy UTF-8 without the line ending (and a `\r` before it),
/// cut to [`MAX_LINE_BYTES`] with `…`. Only its first [`KEPT_LINE_BYTES`]
/// bytes are read.
fn line_text(bytes: &[u8]) -> String {
    let bytes = &bytes[..bytes.len().min(KEPT_LINE_BYTES)];
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    let mut text = String::from_utf8_lossy(bytes).into_owned();
    if text.len() > MAX_LINE_BYTES {
        let mut end = MAX_LINE_BYTES - '\u{2026}'.len_utf8();
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('\u{2026}');
    }
    text
}

enum Source {
    /// The whole stream, in its spill file, up to this many bytes.
    File(PathBuf, u64),
    /// The retained tail from its first whole line.
    Memory(Vec<u8>),
}

/// What one stream retains, taken under the capture's lock and read after it.
pub(crate) struct Retained {
    stream: OutputStream,
    source: Source,
    extent: StreamExtent,
}

impl Retained {
    /// The retained part of `buffer`.
    pub(crate) fn of(buffer: &StreamBuffer, stream: OutputStream) -> Retained {
        let total = buffer.total();
        let last_line = buffer.newlines() + u64::from(!buffer.ends_line());
        let (source, dropped, first_line) = match buffer.spill_path() {
            // A spill file, while there is one, holds the whole stream.
            Some(path) => (Source::File(path.to_owned(), total), 0, 1),
            None => {
                let tail_start = buffer.tail_start();
                let mut bytes = buffer.tail_bytes(tail_start, total);
                // A line cut by the tail's start says nothing whole: skip it.
                let skip = if buffer.tail_starts_line() {
                    0
                } else {
                    bytes
                        .iter()
                        .position(|b| *b == b'\n')
                        .map_or(bytes.len(), |i| i + 1)
                };
                bytes.drain(..skip);
                let start = tail_start + skip as u64;
                let after = bytes.iter().filter(|b| **b == b'\n').count() as u64;
                let before = buffer.newlines() - after;
                (Source::Memory(bytes), start, before + 1)
            }
        };
        Retained {
            stream,
            source,
            extent: StreamExtent {
                stream,
                total_bytes: total,
                dropped_bytes: dropped,
                first_line: if last_line == 0 { 1 } else { first_line },
                last_line,
                whole_lines: buffer.newlines(),
            },
        }
    }

    /// Calls `f` with each retained line's number and bytes (line ending
    /// included) until it answers false.
    fn for_each_line(&self, mut f: impl FnMut(u64, &[u8]) -> bool) {
        let mut number = self.extent.first_line;
        match &self.source {
            Source::Memory(bytes) => {
                for line in bytes.split_inclusive(|b| *b == b'\n') {
                    if !f(number, line) {
                        return;
                    }
                    number += 1;
                }
            }
            Source::File(path, len) => {
                let Ok(file) = std::fs::File::open(path) else {
                    return;
                };
                let mut reader = BufReader::new(file.take(*len));
                let mut line = Vec::with_capacity(KEPT_LINE_BYTES);
                while read_kept_line(&mut reader, &mut line) {
                    if !f(number, &line) {
                        return;
                    }
                    number += 1;
                }
            }
        }
    }

    fn line(&self, number: u64, bytes: &[u8]) -> OutputLine {
        // (`bytes` may be only the start of a long line: see `line_text`.)
        OutputLine {
            stream: self.stream,
            number,
            text: line_text(bytes),
        }
    }
}

/// Reads the next line into `line`, keeping at most [`KEPT_LINE_BYTES`] of it
/// and skipping the rest up to its end. False at the end of the file (or on a
/// read error, which ends the page as the end of what is retained would).
fn read_kept_line(reader: &mut impl BufRead, line: &mut Vec<u8>) -> bool {
    line.clear();
    let mut any = false;
    loop {
        let buf = match reader.fill_buf() {
            Ok(buf) if !buf.is_empty() => buf,
            _ => return any,
        };
        any = true;
        let (chunk, ends) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (&buf[..=i], true),
            None => (buf, false),
        };
        let room = KEPT_LINE_BYTES.saturating_sub(line.len());
        line.extend_from_slice(&chunk[..chunk.len().min(room)]);
        let used = chunk.len();
        reader.consume(used);
        if ends {
            return true;
        }
    }
}

/// Answers `query` over the retained streams (stdout first). `pattern` is the
/// compiled search pattern.
pub(crate) fn query(streams: &[Retained], query: &LineQuery, pattern: Option<&Regex>) -> LinePage {
    let mut page = LinePage::default();
    match query {
        LineQuery::Range {
            stream,
            start,
            count,
        } => {
            let Some(r) = streams.iter().find(|r| r.stream == *stream) else {
                return page;
            };
            let count = u64::from((*count).clamp(1, MAX_QUERY_LINES));
            // Lines no longer kept are skipped: the page starts at the first kept.
            let start = (*start).max(r.extent.first_line);
            let end = start.saturating_add(count);
            r.for_each_line(|n, bytes| {
                if n >= start {
                    page.lines.push(r.line(n, bytes));
                }
                n + 1 < end
            });
            page.extents.push(r.extent);
        }
        LineQuery::Last { stream, count } => {
            let Some(r) = streams.iter().find(|r| r.stream == *stream) else {
                return page;
            };
            let count = (*count).clamp(1, MAX_QUERY_LINES) as usize;
            let mut last: VecDeque<(u64, Vec<u8>)> = VecDeque::with_capacity(count);
            r.for_each_line(|n, bytes| {
                if last.len() == count {
                    last.pop_front();
                }
                last.push_back((n, bytes[..bytes.len().min(KEPT_LINE_BYTES)].to_vec()));
                true
            });
            page.lines = last.iter().map(|(n, b)| r.line(*n, b)).collect();
            page.extents.push(r.extent);
        }
        LineQuery::Search {
            stream,
            context,
            max_matches,
            ..
        } => {
            let Some(pattern) = pattern else {
                return page;
            };
            let context = (*context).min(MAX_QUERY_LINES) as usize;
            let max = (*max_matches).clamp(1, MAX_QUERY_LINES) as usize;
            let deadline = std::time::Instant::now() + SEARCH_TIME_BUDGET;
            for r in streams
                .iter()
                .filter(|r| stream.is_none_or(|s| s == r.stream))
            {
                if page.stopped.is_none() {
                    search(r, pattern, context, max, deadline, &mut page);
                }
                page.extents.push(r.extent);
            }
        }
    }
    page
}

/// Adds `r`'s matches (while fewer than `max` were shown) with `context` lines
/// around them to `page`, and counts every match, until `deadline`: then the
/// page says where it stopped.
fn search(
    r: &Retained,
    pattern: &Regex,
    context: usize,
    max: usize,
    deadline: std::time::Instant,
    page: &mut LinePage,
) {
    let mut before: VecDeque<OutputLine> = VecDeque::with_capacity(context + 1);
    let mut after = 0usize;
    r.for_each_line(|n, bytes| {
        if std::time::Instant::now() >= deadline {
            page.stopped = Some((r.stream, n));
            return false;
        }
        let line = r.line(n, bytes);
        let hit = pattern.is_match(&line.text);
        if hit {
            page.total_matches += 1;
        }
        if hit && page.hits.len() < max {
            page.lines.extend(before.drain(..));
            page.hits.push(page.lines.len() as u32);
            page.lines.push(line);
            after = context;
        } else if after > 0 {
            page.lines.push(line);
            after -= 1;
        } else if context > 0 && page.hits.len() < max {
            if before.len() == context {
                before.pop_front();
            }
            before.push_back(line);
        }
        true
    });
}

/// The unread lines of one stream, copied out under the capture's lock so the
/// ready wait's matching runs without it.
pub(crate) struct Unread {
    stream: OutputStream,
    bytes: Vec<u8>,
    /// The stream offset of `bytes[0]`.
    start: u64,
    /// The number of the line `bytes` begins with.
    first_line: u64,
    /// Unread bytes that left memory before this copy but that the spill
    /// file still holds: the file, and the offset they begin at. They are
    /// read by [`Unread::fetch_behind`], without the capture's lock.
    behind: Option<Behind>,
}

struct Behind {
    path: std::path::PathBuf,
    begin: u64,
    /// Unread bytes before `begin` are not tried (more than
    /// [`MAX_BEHIND_BYTES`] behind): the line `begin` falls in is partial.
    skipped: bool,
}

/// The most unread bytes a wait reads back from a spill file at a time: a
/// wait that falls further behind a job that writes without pause tries the
/// lines from there on.
const MAX_BEHIND_BYTES: u64 = 16 << 20;

/// How far before a split line's known part a wait looks in the spill file
/// for the line's start. A line that began further back is tried from its
/// known part, as memory alone would have it.
const MAX_LINE_BACK_BYTES: u64 = 1 << 20;

/// The lines at or after `from` (the read cursor when `None`), from the start
/// of the line holding it: a line the cursor splits (a read took its start
/// before the rest was written) is tried whole, so `^` means the start of the
/// line and a match shows the line as it is. Lines that left memory since
/// are tried from the spill file while it holds them (see
/// [`Unread::fetch_behind`]): a line a job wrote is not missed because more
/// came before the wait looked.
pub(crate) fn unread(buffer: &StreamBuffer, stream: OutputStream, from: Option<u64>) -> Unread {
    let wanted = from.unwrap_or(buffer.cursor());
    let start = buffer.line_start(wanted);
    let bytes = buffer.tail_bytes(start, buffer.total());
    let newlines_after = bytes.iter().filter(|b| **b == b'\n').count() as u64;
    let tail_start = buffer.tail_start();
    // Before the tail, `start` is the tail's start: what lies between is only
    // in the spill file. So is the start of a line the tail's start cuts.
    let cut = start == tail_start && !buffer.tail_starts_line();
    let behind = buffer
        .spill_path()
        .filter(|_| wanted < tail_start || cut)
        .map(|path| {
            let begin = wanted
                .min(start)
                .max(tail_start.saturating_sub(MAX_BEHIND_BYTES));
            Behind {
                path: path.to_owned(),
                begin,
                skipped: begin > wanted,
            }
        });
    Unread {
        stream,
        bytes,
        start,
        first_line: buffer.newlines() - newlines_after + 1,
        behind,
    }
}

impl Unread {
    /// Puts the unread bytes that only the spill file holds before the
    /// copied ones. A spill file gone meanwhile (the stream outgrew it)
    /// leaves the copy as it was: what memory held.
    pub(crate) fn fetch_behind(&mut self) {
        let Some(behind) = self.behind.take() else {
            return;
        };
        let Ok(mut older) = super::buffer::read_file_range(&behind.path, behind.begin, self.start)
        else {
            return;
        };
        if older.len() as u64 != self.start - behind.begin {
            return;
        }
        let mut begin = behind.begin;
        if behind.skipped {
            // The line the cut fell in is not whole: tried from the next.
            let Some(end) = older.iter().position(|b| *b == b'\n') else {
                return;
            };
            older.drain(..=end);
            begin += end as u64 + 1;
        } else if let Some((line, mut head)) = line_head(&behind.path, begin) {
            // The read cursor split this line: its start is read back too,
            // so `^` means the start of the line here as in memory.
            head.append(&mut older);
            older = head;
            begin = line;
        }
        // The copy's first line number already counts what follows.
        self.first_line -= older.iter().filter(|b| **b == b'\n').count() as u64;
        older.extend_from_slice(&self.bytes);
        self.bytes = older;
        self.start = begin;
    }
}

/// The start of the line that spill-file offset `at` falls in, with the
/// bytes from there to `at`, when it starts before `at` and at most
/// [`MAX_LINE_BACK_BYTES`] before it. Reads back in growing steps, since a
/// split line is most often short.
fn line_head(path: &std::path::Path, at: u64) -> Option<(u64, Vec<u8>)> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(path).ok()?;
    let floor = at.saturating_sub(MAX_LINE_BACK_BYTES);
    // The bytes from `from` to `at`.
    let mut head = Vec::new();
    let mut from = at;
    let mut step = 4096;
    while from > floor {
        let start = from.saturating_sub(step).max(floor);
        let mut chunk = vec![0; (from - start) as usize];
        file.read_exact_at(&mut chunk, start).ok()?;
        let newline = chunk.iter().rposition(|b| *b == b'\n');
        chunk.extend_from_slice(&head);
        head = chunk;
        if let Some(i) = newline {
            head.drain(..=i);
            let line = start + i as u64 + 1;
            return (line < at).then_some((line, head));
        }
        if start == 0 {
            return (at > 0).then_some((0, head));
        }
        from = start;
        step *= 4;
    }
    None
}

/// The first unread line `pattern` matches, with its stream offset; `from`
/// moves past each complete line tried. An incomplete last line is tried but
/// not passed. Runs without any lock.
pub(crate) fn scan_unread(
    unread: &Unread,
    pattern: &Regex,
    from: &mut Option<u64>,
) -> Option<(OutputLine, u64)> {
    let mut at = unread.start;
    for (number, segment) in
        (unread.first_line..).zip(unread.bytes.split_inclusive(|b| *b == b'\n'))
    {
        let text = line_text(segment);
        if pattern.is_match(&text) {
            let line = OutputLine {
                stream: unread.stream,
                number,
                text,
            };
            return Some((line, at));
        }
        if !segment.ends_with(b"\n") {
            break;
        }
        at += segment.len() as u64;
        *from = Some(at);
    }
    None
}

/// Up to two whole lines before line `number`, which starts at stream offset
/// `at`, as far as `buffer` still holds them.
pub(crate) fn context_before(
    buffer: &StreamBuffer,
    stream: OutputStream,
    number: u64,
    at: u64,
) -> Vec<OutputLine> {
    let earlier = buffer.tail_bytes(buffer.tail_start(), at);
    lines_before(&earlier, number, buffer.tail_starts_line(), stream)
}

/// Up to [`READY_CONTEXT`] whole lines that end right before line `number`.
fn lines_before(
    earlier: &[u8],
    number: u64,
    starts_line: bool,
    stream: OutputStream,
) -> Vec<OutputLine> {
    // `earlier` may end mid-line (a read cursor there); only whole lines count.
    let whole = match earlier.iter().rposition(|b| *b == b'\n') {
        Some(i) => &earlier[..=i],
        None => return Vec::new(),
    };
    let segments: Vec<&[u8]> = whole.split_inclusive(|b| *b == b'\n').collect();
    // `earlier` begins at the tail's start, which may cut a line.
    let partial_first = !starts_line;
    let mut out = Vec::new();
    for (back, segment) in segments.iter().rev().take(READY_CONTEXT).enumerate() {
        let index = segments.len() - 1 - back;
        if index == 0 && partial_first {
            break;
        }
        out.push(OutputLine {
            stream,
            number: number - 1 - back as u64,
            text: line_text(segment),
        });
    }
    out.reverse();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ready wait's three steps in one, as the producer runs them.
    fn find_unread(
        buffer: &StreamBuffer,
        stream: OutputStream,
        pattern: &Regex,
        from: &mut Option<u64>,
    ) -> Option<LineMatch> {
        let mut copy = unread(buffer, stream, *from);
        copy.fetch_behind();
        let (line, at) = scan_unread(&copy, pattern, from)?;
        Some(LineMatch {
            before: context_before(buffer, stream, line.number, at),
            line,
        })
    }
    use crate::capture::{LineMatch, OutputLimits};

    fn buffer(dir: &std::path::Path, tail: usize, spill: u64, text: &[u8]) -> StreamBuffer {
        let mut b = StreamBuffer::new(
            dir.join("s").into(),
            "",
            OutputLimits {
                max_output_bytes: tail,
                max_spill_bytes: spill,
            },
        );
        b.push(text);
        b
    }

    #[test]
    fn pages_number_lines_from_the_stream_start() {
        let dir = tempfile::tempdir().unwrap();
        let b = buffer(dir.path(), 1000, 10_000, b"one\ntwo\nthree\nfour");
        let r = [Retained::of(&b, OutputStream::Stdout)];
        let page = query(
            &r,
            &LineQuery::Range {
                stream: OutputStream::Stdout,
                start: 2,
                count: 2,
            },
            None,
        );
        let texts: Vec<_> = page
            .lines
            .iter()
            .map(|l| (l.number, l.text.as_str()))
            .collect();
        assert_eq!(texts, [(2, "two"), (3, "three")]);
        assert_eq!(page.extents[0].last_line, 4);
        let last = query(
            &r,
            &LineQuery::Last {
                stream: OutputStream::Stdout,
                count: 1,
            },
            None,
        );
        assert_eq!(last.lines[0].text, "four");
    }

    #[test]
    fn a_line_that_left_memory_is_tried_from_the_spill_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut text = b"start\nmarker here\n".to_vec();
        for _ in 0..20 {
            text.extend_from_slice(b"filler\n");
        }
        // A tail of 16 bytes: the marker left memory long ago.
        let b = buffer(dir.path(), 16, 10_000, &text);
        let re = Regex::new("^marker").unwrap();
        let mut from = None;
        let found = find_unread(&b, OutputStream::Stdout, &re, &mut from).unwrap();
        assert_eq!(
            (found.line.number, found.line.text.as_str()),
            (2, "marker here")
        );
        // Tried lines are passed: the next wait goes on from there.
        let filler = Regex::new("^filler").unwrap();
        let next = find_unread(&b, OutputStream::Stdout, &filler, &mut from).unwrap();
        assert_eq!(next.line.number, 3);
        // Without a spill file (past its limit) only memory is tried.
        let gone = buffer(dir.path().join("x").as_path(), 16, 32, &text);
        assert!(find_unread(&gone, OutputStream::Stdout, &re, &mut None).is_none());
    }

    #[test]
    fn a_dropped_start_keeps_true_line_numbers() {
        let dir = tempfile::tempdir().unwrap();
        // No spill file (limit 8 bytes): only the tail of 10 bytes remains.
        let b = buffer(dir.path(), 10, 8, b"aaaa\nbbbb\ncccc\ndddd\n");
        let r = Retained::of(&b, OutputStream::Stdout);
        assert_eq!(r.extent.first_line, 3);
        assert_eq!(r.extent.dropped_bytes, 10);
        let page = query(
            &[r],
            &LineQuery::Range {
                stream: OutputStream::Stdout,
                start: 1,
                count: 10,
            },
            None,
        );
        let numbers: Vec<_> = page.lines.iter().map(|l| l.number).collect();
        assert_eq!(numbers, [3, 4]);
    }

    #[test]
    fn searches_count_every_match_and_show_context() {
        let dir = tempfile::tempdir().unwrap();
        let b = buffer(
            dir.path(),
            1000,
            10_000,
            b"a\nerr 1\nb\nc\nd\nerr 2\ne\nerr 3\n",
        );
        let re = Regex::new("err").unwrap();
        let page = query(
            &[Retained::of(&b, OutputStream::Stdout)],
            &LineQuery::Search {
                stream: None,
                pattern: "err".into(),
                context: 1,
                max_matches: 2,
            },
            Some(&re),
        );
        let numbers: Vec<_> = page.lines.iter().map(|l| l.number).collect();
        assert_eq!(numbers, [1, 2, 3, 5, 6, 7]);
        assert_eq!(page.hits, [1, 4]);
        assert_eq!(page.total_matches, 3);
    }

    #[test]
    fn unread_lines_are_tried_once_and_the_partial_one_again() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = buffer(dir.path(), 1000, 10_000, b"starting\nloading\nready on :80");
        let re = Regex::new("ready").unwrap();
        let mut from = None;
        let found = find_unread(&b, OutputStream::Stdout, &re, &mut from).unwrap();
        assert_eq!(found.line.number, 3);
        assert_eq!(found.line.text, "ready on :80");
        let before: Vec<_> = found.before.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(before, ["starting", "loading"]);
        let other = Regex::new("never").unwrap();
        let mut from = None;
        assert!(find_unread(&b, OutputStream::Stdout, &other, &mut from).is_none());
        assert_eq!(from, Some(17));
        b.push(b"\nnever again\n");
        let found = find_unread(&b, OutputStream::Stdout, &other, &mut from).unwrap();
        assert_eq!((found.line.number, found.before.len()), (4, 2));
    }

    #[test]
    fn a_line_split_by_the_read_cursor_is_tried_whole() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = buffer(dir.path(), 1000, 10_000, b"one\narmed");
        // A read took the line's start before the rest was written.
        b.read(true);
        b.push(b"caught\n");
        let caught = Regex::new("^caught").unwrap();
        let mut from = None;
        assert!(find_unread(&b, OutputStream::Stdout, &caught, &mut from).is_none());
        assert_eq!(from, Some(16));
        let whole = Regex::new("^armedcaught$").unwrap();
        let found = find_unread(&b, OutputStream::Stdout, &whole, &mut None).unwrap();
        assert_eq!(
            (found.line.number, found.line.text.as_str()),
            (2, "armedcaught")
        );
        let before: Vec<_> = found.before.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(before, ["one"]);
    }

    #[test]
    fn a_split_line_that_left_memory_is_read_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        // A tail of 16 bytes; the spill file holds the whole stream.
        let mut b = buffer(dir.path(), 16, 10_000, b"one\narmed");
        b.read(true);
        b.push(b"caught\n");
        for _ in 0..20 {
            b.push(b"filler\n");
        }
        assert!(b.cursor() < b.tail_start());
        let caught = Regex::new("^caught").unwrap();
        assert!(find_unread(&b, OutputStream::Stdout, &caught, &mut None).is_none());
        let whole = Regex::new("^armedcaught$").unwrap();
        let found = find_unread(&b, OutputStream::Stdout, &whole, &mut None).unwrap();
        assert_eq!(
            (found.line.number, found.line.text.as_str()),
            (2, "armedcaught")
        );
        // A wait that already passed whole lines goes on from there.
        let mut from = None;
        let filler = Regex::new("^filler$").unwrap();
        let next = find_unread(&b, OutputStream::Stdout, &filler, &mut from).unwrap();
        assert_eq!(next.line.number, 3);
    }

    #[test]
    fn a_line_the_tail_cuts_is_tried_from_its_start() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = buffer(dir.path(), 16, 10_000, b"one\nmarker");
        b.push(&[b'x'; 30]);
        b.read(true);
        b.push(b"yy\n");
        // The cursor is in memory, but the line it is in began before it.
        assert!(b.cursor() >= b.tail_start() && !b.tail_starts_line());
        let re = Regex::new("^markerx+yy$").unwrap();
        let found = find_unread(&b, OutputStream::Stdout, &re, &mut None).unwrap();
        assert_eq!(found.line.number, 2);
        assert!(found.line.text.starts_with("markerxxx"));
        // Without a spill file, only what memory holds is tried.
        let gone = {
            let mut g = buffer(&dir.path().join("x"), 16, 32, b"one\nmarker");
            g.push(&[b'x'; 30]);
            g.read(true);
            g.push(b"yy\n");
            g
        };
        assert!(find_unread(&gone, OutputStream::Stdout, &re, &mut None).is_none());
    }

    #[test]
    fn long_lines_are_cut_on_a_character_boundary() {
        let long = "界".repeat(3000);
        let text = line_text(long.as_bytes());
        assert!(text.len() <= MAX_LINE_BYTES);
        assert!(text.ends_with('\u{2026}'));
    }
}
