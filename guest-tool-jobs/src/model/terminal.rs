//! A job's terminal (extension `terminal`): its size, the rules every size
//! the model asks for keeps (the start tool's and the resize tool's), and
//! what it shows.

use serde_json::Value;

use super::JobSnapshot;

/// The size of a job's terminal (extension `terminal`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TerminalSize {
    /// Rows.
    pub rows: u16,
    /// Columns.
    pub cols: u16,
}

/// What a job's terminal shows (see the WIT `terminal-screen`).
#[derive(Debug, Clone, PartialEq)]
pub struct TerminalScreen {
    /// The terminal's size.
    pub size: TerminalSize,
    /// Every row, without trailing blanks.
    pub lines: Vec<String>,
    /// The cursor's row, from 0.
    pub cursor_row: u16,
    /// The cursor's column, from 0.
    pub cursor_col: u16,
    /// A full-screen program has the alternate screen up.
    pub alternate: bool,
    /// The job at the moment of the answer.
    pub job: JobSnapshot,
}

/// A terminal's rows or columns, at least and at most.
pub const TERMINAL_DIMENSIONS: std::ops::RangeInclusive<u16> = 2..=1000;

/// A new terminal's size when the start names none.
pub const DEFAULT_TERMINAL: TerminalSize = TerminalSize {
    rows: 30,
    cols: 120,
};

/// A terminal's rows or columns as asked for (`key`: `rows` or `cols`): a
/// whole number in [`TERMINAL_DIMENSIONS`], or `default` when left out.
pub fn dimension(key: &str, asked: Option<&Value>, default: u16) -> Result<u16, String> {
    match asked {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v
            .as_u64()
            .and_then(|n| u16::try_from(n).ok())
            .filter(|n| TERMINAL_DIMENSIONS.contains(n))
            .ok_or_else(|| {
                format!(
                    "invalid {key}: expected a whole number from {} to {}, got {v}",
                    TERMINAL_DIMENSIONS.start(),
                    TERMINAL_DIMENSIONS.end()
                )
            }),
    }
}
