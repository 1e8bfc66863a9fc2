//! The log extension: pages and searches of retained output, without
//! consuming anything, rendered in the `grep -n` form.

use serde_json::{Map, Value};

use super::args::{optional_count, optional_string, pattern_arg, stream_arg};
use super::{Dialect, Found, done, error_message};
use crate::model::{
    JobsView, LinePage, LineQuery, OutputLine, OutputStream, StreamExtent, ToolResult,
};

/// The most lines one page returns.
pub const MAX_PAGE_LINES: u64 = 500;
/// Lines a page returns when the call names no count.
pub const DEFAULT_PAGE_LINES: u64 = 50;
/// The most context lines around a search match.
pub const MAX_CONTEXT_LINES: u64 = 10;
/// Context lines when the call names none.
pub const DEFAULT_CONTEXT_LINES: u64 = 2;
/// The most matches one search returns.
pub const MAX_MATCHES: u64 = 200;
/// Matches returned when the call names no bound.
pub const DEFAULT_MATCHES: u64 = 20;
/// The most bytes of lines one log answer shows; the rest is said, not shown.
pub const MAX_LOG_TEXT_BYTES: usize = 32 * 1024;

pub(super) fn log(
    view: &dyn JobsView,
    config: &crate::config::Config,
    d: &dyn Dialect,
    id: &str,
    args: &Map<String, Value>,
    found: &Found,
    cap: Option<u64>,
) -> Result<ToolResult, String> {
    let mut stream = stream_arg(args)?;
    if config.extensions.terminal && super::args::optional_bool(args, "raw")? == Some(true) {
        // One stream at a time: stdout unless stderr is named.
        stream = Some(match stream {
            Some(OutputStream::Stderr) => OutputStream::RawStderr,
            _ => OutputStream::Raw,
        });
    }
    let start = optional_count(args, "start_line", 1, crate::model::MAX_SAFE_LINE)?;
    let count = optional_count(args, "lines", 1, MAX_PAGE_LINES)?;
    let search = optional_string(args, "search")?;
    let context = optional_count(args, "context", 0, MAX_CONTEXT_LINES)?;
    let max_matches = optional_count(args, "max_matches", 1, MAX_MATCHES)?;
    let query = match search {
        Some(pattern) => {
            let pattern = pattern_arg("search", pattern)?;
            if start.is_some() || count.is_some() {
                return Err(
                    "invalid arguments: \"search\" cannot be combined with \"start_line\" or \"lines\""
                        .to_owned(),
                );
            }
            LineQuery::Search {
                stream,
                pattern: pattern.to_owned(),
                context: context.unwrap_or(DEFAULT_CONTEXT_LINES) as u32,
                max_matches: max_matches.unwrap_or(DEFAULT_MATCHES) as u32,
            }
        }
        None => {
            if context.is_some() || max_matches.is_some() {
                return Err(
                    "invalid arguments: \"context\" and \"max_matches\" need \"search\"".to_owned(),
                );
            }
            let stream = stream.unwrap_or(OutputStream::Stdout);
            let count = count.unwrap_or(DEFAULT_PAGE_LINES) as u32;
            match start {
                Some(start) => LineQuery::Range {
                    stream,
                    start,
                    count,
                },
                None => LineQuery::Last { stream, count },
            }
        }
    };
    found.clone()?;
    let page = view
        .lines(id, &query)
        .map_err(|e| error_message(&e, d, id))?;
    let text = match &query {
        LineQuery::Search { pattern, .. } => search_text(&page, pattern, stream.is_none()),
        LineQuery::Range { stream, .. } | LineQuery::Last { stream, .. } => {
            page_text(&page, *stream)
        }
    };
    Ok(done(d, text, &page.job, cap))
}

fn extent_note(extent: &StreamExtent) -> Option<String> {
    (extent.dropped_bytes > 0).then(|| {
        format!(
            "{} before line {} ({} bytes) is no longer kept",
            extent.stream.as_str(),
            extent.first_line,
            extent.dropped_bytes
        )
    })
}

/// Adds lines to `out` until the byte bound; returns how many were left out.
fn push_lines<'a>(
    out: &mut String,
    lines: impl Iterator<Item = (String, &'a OutputLine)>,
) -> (usize, Option<u64>) {
    let mut left_out = 0;
    let mut next = None;
    for (row, line) in lines {
        if left_out > 0 || out.len() + row.len() + 1 > MAX_LOG_TEXT_BYTES {
            if left_out == 0 {
                next = Some(line.number);
            }
            left_out += 1;
            continue;
        }
        out.push('\n');
        out.push_str(&row);
    }
    (left_out, next)
}

/// A page: a header naming the lines and where the retained output begins,
/// then `<n>:<text>` rows (the `grep -n` form).
pub(crate) fn page_text(page: &LinePage, stream: OutputStream) -> String {
    let name = stream.as_str();
    let extent = page.extents.iter().find(|e| e.stream == stream);
    let last = extent.map_or(0, |e| e.last_line);
    let mut header = match (page.lines.first(), page.lines.last()) {
        (Some(first), Some(end)) => {
            format!("[{name} lines {}-{} of {last}", first.number, end.number)
        }
        _ if last == 0 => format!("[{name} is empty"),
        _ => format!("[no {name} lines there; it has lines up to {last}"),
    };
    if let Some(note) = extent.and_then(extent_note) {
        header.push_str("; ");
        header.push_str(&note);
    }
    header.push(']');
    let mut out = header;
    let rows = page
        .lines
        .iter()
        .map(|l| (format!("{}:{}", l.number, l.text), l));
    let (left_out, next) = push_lines(&mut out, rows);
    if let Some(next) = next {
        out.push_str(&format!(
            "\n[{left_out} more lines not shown; continue with start_line {next}]"
        ));
    }
    out
}

/// A search: a header with the match count, then the lines in `grep` form
/// (`<n>:` for a match, `<n>-` for context, `--` between groups), each with its
/// stream when both were searched.
pub(crate) fn search_text(page: &LinePage, pattern: &str, both: bool) -> String {
    let streams = page
        .extents
        .iter()
        .map(|e| e.stream.as_str())
        .collect::<Vec<_>>()
        .join(" and ");
    let shown = page.hits.len();
    let total = page.total_matches;
    let plural = if total == 1 { "" } else { "es" };
    let mut out = format!("[search /{pattern}/ in {streams}: {total} match{plural}");
    if (shown as u64) < total {
        out.push_str(&format!(", first {shown} shown"));
    }
    let notes = page
        .extents
        .iter()
        .filter_map(extent_note)
        .collect::<Vec<_>>();
    if !notes.is_empty() {
        out.push_str("; ");
        out.push_str(&notes.join("; "));
    }
    if let Some((stream, line)) = page.stopped {
        out.push_str(&format!(
            "; stopped early at {} line {line}: the search ran out of time, so later lines were not searched",
            stream.as_str()
        ));
    }
    out.push(']');
    let mut previous: Option<&OutputLine> = None;
    let mut rows = Vec::new();
    // Hits come in line order, so one pass over both marks them.
    let mut hits = page.hits.iter().peekable();
    for (index, line) in page.lines.iter().enumerate() {
        if let Some(prev) = previous
            && (prev.stream != line.stream || prev.number + 1 != line.number)
        {
            rows.push(("--".to_owned(), line));
        }
        let mark = if hits.next_if(|h| **h as usize == index).is_some() {
            ':'
        } else {
            '-'
        };
        let prefix = if both {
            format!("{}{mark}", line.stream.as_str())
        } else {
            String::new()
        };
        rows.push((format!("{prefix}{}{mark}{}", line.number, line.text), line));
        previous = Some(line);
    }
    let (left_out, _) = push_lines(&mut out, rows.into_iter());
    if left_out > 0 {
        out.push_str(&format!(
            "\n[{left_out} more lines not shown; narrow the search or lower max_matches]"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{JobSnapshot, JobStatus};

    fn line(stream: OutputStream, number: u64, text: &str) -> OutputLine {
        OutputLine {
            stream,
            number,
            text: text.to_owned(),
        }
    }

    fn extent(stream: OutputStream, dropped_bytes: u64, first: u64, last: u64) -> StreamExtent {
        StreamExtent {
            stream,
            total_bytes: 1000,
            dropped_bytes,
            first_line: first,
            last_line: last,
        }
    }

    fn page(
        lines: Vec<OutputLine>,
        hits: Vec<u32>,
        total: u64,
        extents: Vec<StreamExtent>,
    ) -> LinePage {
        LinePage {
            lines,
            hits,
            total_matches: total,
            extents,
            stopped: None,
            job: JobSnapshot {
                id: "bash-1".into(),
                kind: "bash".into(),
                label: "make".into(),
                status: JobStatus::Running,
                detail: None,
                started_at: 1,
                finished_at: None,
                output_limit_bytes: None,
                reported: false,
                sandbox: None,
                placement: None,
            },
        }
    }

    use OutputStream::{Stderr, Stdout};

    #[test]
    fn a_page_names_its_lines_and_what_is_no_longer_kept() {
        let p = page(
            vec![line(Stdout, 7, "seven"), line(Stdout, 8, "eight")],
            vec![],
            0,
            vec![extent(Stdout, 120, 5, 9)],
        );
        assert_eq!(
            page_text(&p, Stdout),
            "[stdout lines 7-8 of 9; stdout before line 5 (120 bytes) is no longer kept]\n7:seven\n8:eight"
        );
        let empty = page(vec![], vec![], 0, vec![extent(Stderr, 0, 1, 0)]);
        assert_eq!(page_text(&empty, Stderr), "[stderr is empty]");
        let past = page(vec![], vec![], 0, vec![extent(Stdout, 0, 1, 3)]);
        assert_eq!(
            page_text(&past, Stdout),
            "[no stdout lines there; it has lines up to 3]"
        );
    }

    #[test]
    fn a_page_past_the_byte_bound_says_where_to_go_on() {
        let long = "x".repeat(MAX_LOG_TEXT_BYTES / 2);
        let lines = (1..=4).map(|n| line(Stdout, n, &long)).collect();
        let p = page(lines, vec![], 0, vec![extent(Stdout, 0, 1, 4)]);
        let text = page_text(&p, Stdout);
        assert!(text.starts_with("[stdout lines 1-4 of 4]\n1:"), "{text}");
        assert!(text.ends_with("\n[3 more lines not shown; continue with start_line 2]"));
        assert!(text.len() <= MAX_LOG_TEXT_BYTES + 100);
    }

    #[test]
    fn a_search_marks_matches_context_and_gaps_in_grep_form() {
        let p = page(
            vec![
                line(Stdout, 1, "build"),
                line(Stdout, 2, "error: one"),
                line(Stdout, 9, "error: two"),
                line(Stderr, 3, "error: three"),
            ],
            vec![1, 2, 3],
            4,
            vec![extent(Stdout, 0, 1, 9), extent(Stderr, 0, 1, 3)],
        );
        assert_eq!(
            search_text(&p, "error", true),
            "[search /error/ in stdout and stderr: 4 matches, first 3 shown]\n\
             stdout-1-build\nstdout:2:error: one\n--\nstdout:9:error: two\n--\nstderr:3:error: three"
        );
        let one = page(
            vec![line(Stdout, 2, "ok")],
            vec![0],
            1,
            vec![extent(Stdout, 0, 1, 2)],
        );
        assert_eq!(
            search_text(&one, "ok", false),
            "[search /ok/ in stdout: 1 match]\n2:ok"
        );
    }

    #[test]
    fn a_search_that_ran_out_of_time_says_where_it_stopped() {
        let mut p = page(vec![], vec![], 0, vec![extent(Stdout, 0, 1, 50_000)]);
        p.stopped = Some((Stdout, 20_001));
        assert_eq!(
            search_text(&p, "x{3000}", false),
            "[search /x{3000}/ in stdout: 0 matches; stopped early at stdout line 20001: the search ran out of time, so later lines were not searched]"
        );
    }
}
