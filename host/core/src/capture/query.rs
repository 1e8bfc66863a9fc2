//! What a line query asks and answers: numbered lines, pages, searches and
//! the ready wait's match, in the words the extension calls speak.

use super::OutputStream;

/// One numbered line of output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputLine {
    /// Its stream.
    pub stream: OutputStream,
    /// Its number in the stream, from 1.
    pub number: u64,
    /// Its text, without the line ending, bounded to [`MAX_LINE_BYTES`].
    pub text: String,
}

/// The most bytes of one line the host returns; a longer line is cut back to a
/// character boundary and ends with `…`.
pub const MAX_LINE_BYTES: usize = 4096;

/// The line that ended a ready wait and up to two lines before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineMatch {
    /// The matching line.
    pub line: OutputLine,
    /// The lines before it, oldest first.
    pub before: Vec<OutputLine>,
}

/// Lines of retained output to return.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineQuery {
    /// `count` lines from `start`.
    Range {
        /// The stream.
        stream: OutputStream,
        /// First line wanted, from 1.
        start: u64,
        /// At most this many.
        count: u32,
    },
    /// The last `count` lines.
    Last {
        /// The stream.
        stream: OutputStream,
        /// At most this many.
        count: u32,
    },
    /// Matching lines with context.
    Search {
        /// One stream, or both.
        stream: Option<OutputStream>,
        /// The regular expression.
        pattern: String,
        /// Context lines before and after each match.
        context: u32,
        /// Matches returned at most.
        max_matches: u32,
    },
}

impl LineQuery {
    /// The raw stream it asks for, if it asks for one.
    pub fn raw_stream(&self) -> Option<OutputStream> {
        let stream = match self {
            LineQuery::Range { stream, .. } | LineQuery::Last { stream, .. } => Some(*stream),
            LineQuery::Search { stream, .. } => *stream,
        };
        stream.filter(|s| matches!(s, OutputStream::Raw | OutputStream::RawStderr))
    }
}

/// How much of one stream is retained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamExtent {
    /// The stream.
    pub stream: OutputStream,
    /// Bytes ever written.
    pub total_bytes: u64,
    /// Bytes from the start no longer retained.
    pub dropped_bytes: u64,
    /// Number of the first retained line.
    pub first_line: u64,
    /// Number of the last line; 0 when empty.
    pub last_line: u64,
    /// Number of the last whole line, one a newline ended: `last_line`, or
    /// one less while the stream's last line is still being written.
    pub whole_lines: u64,
}

/// An answer to a [`LineQuery`], before the registry adds the job.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LinePage {
    /// The lines, in stream order.
    pub lines: Vec<OutputLine>,
    /// Indexes into `lines` of the matching lines.
    pub hits: Vec<u32>,
    /// Every match in the retained output.
    pub total_matches: u64,
    /// The extent of each stream looked at.
    pub extents: Vec<StreamExtent>,
    /// For a search that ran out of its time: the stream and the first line
    /// it did not try.
    pub stopped: Option<(OutputStream, u64)>,
}

/// The most time one search may spend matching: well inside the guest call's
/// own CPU budget (2 s), which the host's work in the call counts against.
pub const SEARCH_TIME_BUDGET: std::time::Duration = std::time::Duration::from_millis(500);

/// Where a ready wait has looked so far, per stream: lines before these byte
/// offsets were tried already.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ScanState {
    /// Next stdout byte to try (`None`: from the read cursor).
    pub stdout: Option<u64>,
    /// Next stderr byte to try.
    pub stderr: Option<u64>,
}
