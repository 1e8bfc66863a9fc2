//! Numbered lines of a captured stream: pages and searches over what is still
//! retained (the whole stream in its spill file, or the in-memory tail), and the
//! ready wait's look at unread lines. Nothing here consumes output.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;

use regex::Regex;

use crate::output::StreamBuffer;
use crate::registry::control::{
    LineMatch, LinePage, LineQuery, MAX_LINE_BYTES, OutputLine, OutputStream, StreamExtent,
};

/// The most lines, matches or context lines one query returns, whatever it
/// asks for.
const MAX_QUERY_LINES: u32 = 1000;
/// Lines shown before a ready line.
const READY_CONTEXT: usize = 2;

/// A line's text: lossy UTF-8 without the line ending (and a `\r` before it),
/// cut to [`MAX_LINE_BYTES`] with `…`.
fn line_text(bytes: &[u8]) -> String {
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
        let total = buffer.total;
        let ends_line = buffer.tail.back().is_none_or(|b| *b == b'\n');
        let last_line = buffer.newlines + u64::from(!ends_line);
        let (source, dropped, first_line) = match buffer.spill_path() {
            Some(path) if buffer.spilled_whole() => (Source::File(path.to_owned(), total), 0, 1),
            _ => {
                let tail_start = total - buffer.tail.len() as u64;
                let mut bytes: Vec<u8> = buffer.tail.iter().copied().collect();
                // A line cut by the tail's start says nothing whole: skip it.
                let skip = if buffer.tail_starts_line {
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
                let before = buffer.newlines - after;
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
                let mut line = Vec::new();
                loop {
                    line.clear();
                    match reader.read_until(b'\n', &mut line) {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {}
                    }
                    if !f(number, &line) {
                        return;
                    }
                    number += 1;
                }
            }
        }
    }

    fn line(&self, number: u64, bytes: &[u8]) -> OutputLine {
        OutputLine {
            stream: self.stream,
            number,
            text: line_text(bytes),
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
                last.push_back((n, bytes.to_vec()));
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
            for r in streams
                .iter()
                .filter(|r| stream.is_none_or(|s| s == r.stream))
            {
                search(r, pattern, context, max, &mut page);
                page.extents.push(r.extent);
            }
        }
    }
    page
}

/// Adds `r`'s matches (while fewer than `max` were shown) with `context` lines
/// around them to `page`, and counts every match.
fn search(r: &Retained, pattern: &Regex, context: usize, max: usize, page: &mut LinePage) {
    let mut before: VecDeque<OutputLine> = VecDeque::with_capacity(context + 1);
    let mut after = 0usize;
    r.for_each_line(|n, bytes| {
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

/// The first line at or after `from` (the read cursor when `None`) that
/// `pattern` matches, with up to two lines before it; `from` moves past each
/// complete line tried. An incomplete last line is tried but not passed.
///
/// A line the cursor splits (a read took its start before the rest was
/// written) is tried whole, so `^` means the start of the line and the match
/// shows the line as it is, not the remainder after the cursor.
pub(crate) fn find_unread(
    buffer: &StreamBuffer,
    stream: OutputStream,
    pattern: &Regex,
    from: &mut Option<u64>,
) -> Option<LineMatch> {
    let tail_start = buffer.total - buffer.tail.len() as u64;
    let start = from.unwrap_or(buffer.cursor).max(tail_start);
    let offset_in_tail = line_start(&buffer.tail, (start - tail_start) as usize);
    // Called on every chunk while a ready wait runs: copy only what is unread,
    // and the lines before a match only once there is one.
    let unread: Vec<u8> = buffer.tail.range(offset_in_tail..).copied().collect();
    let newlines_after = unread.iter().filter(|b| **b == b'\n').count() as u64;
    let first = buffer.newlines - newlines_after + 1;
    let mut at = offset_in_tail;
    for (number, segment) in (first..).zip(unread.split_inclusive(|b| *b == b'\n')) {
        let text = line_text(segment);
        if pattern.is_match(&text) {
            let earlier: Vec<u8> = buffer.tail.range(..at).copied().collect();
            let earlier = lines_before(&earlier, number, buffer.tail_starts_line, stream);
            return Some(LineMatch {
                line: OutputLine {
                    stream,
                    number,
                    text,
                },
                before: earlier,
            });
        }
        if !segment.ends_with(b"\n") {
            break;
        }
        at += segment.len();
        *from = Some(tail_start + at as u64);
    }
    None
}

/// Where the line holding `offset` begins, as far back as the tail reaches.
fn line_start(tail: &VecDeque<u8>, offset: usize) -> usize {
    tail.range(..offset)
        .rposition(|b| *b == b'\n')
        .map_or(0, |newline| newline + 1)
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
    use crate::output::OutputLimits;

    fn buffer(dir: &std::path::Path, tail: usize, spill: u64, text: &[u8]) -> StreamBuffer {
        let mut b = StreamBuffer::new(
            dir.join("s"),
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
        b.cursor = 9;
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
    fn long_lines_are_cut_on_a_character_boundary() {
        let long = "界".repeat(3000);
        let text = line_text(long.as_bytes());
        assert!(text.len() <= MAX_LINE_BYTES);
        assert!(text.ends_with('\u{2026}'));
    }
}
