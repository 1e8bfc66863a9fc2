//! The terminal a pty job draws on, and the text a model reads from it.
//!
//! A program on a terminal moves its cursor, recolours, and redraws a line
//! many times (progress bars, spinners, counters). Shown raw, the model pays
//! for every escape sequence and every intermediate frame. Here the bytes go
//! through a screen model (`vte` parses them; the grid is ours, because the
//! text we emit depends on when rows leave the screen, which a finished
//! emulator does not tell), and the job's rendered stream receives each row
//! as it finally stands:
//!
//! - a row that scrolls off the top is final, and is emitted then;
//! - before anything reads the stream (a read, a wait, a page, a notice), the
//!   rows down to the cursor are emitted as they stand, the cursor's own row
//!   as an incomplete line;
//! - a row emitted before and unchanged since is not emitted again; one that
//!   only grew (a prompt the person answered, the echo of what was typed)
//!   continues its line; one that was redrawn is emitted again, as a new line,
//!   in its state then.
//!
//! So a progress bar redrawn a thousand times between two reads costs one
//! line. The alternate screen (full-screen programs) emits nothing; its
//! content is seen through [`Terminal::screen`]. Soft-wrapped rows are joined
//! back into one line. Every character counts as one column.
//!
//! One screen model in four mechanisms: `grid` (rows, cells and the edits a
//! program makes), `emit` (when a row is told to the model, and how),
//! `vt` (the escape sequences, through `vte`) and `prompt` (whether the
//! cursor sits after a question). This file is the terminal's public face.

mod emit;
mod grid;
mod prompt;
#[cfg(test)]
mod tests;
mod vt;

use emit::Emitted;
use grid::Grid;
pub use prompt::is_prompt;

/// The size of a job's terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TerminalSize {
    /// Rows.
    pub rows: u16,
    /// Columns.
    pub cols: u16,
}

impl Default for TerminalSize {
    fn default() -> TerminalSize {
        TerminalSize {
            rows: 30,
            cols: 120,
        }
    }
}

/// The most bytes of answers the terminal holds for its program: a job that
/// asks without reading gets no more.
pub const MAX_REPLY_BYTES: usize = 4096;

/// The smallest and largest rows or columns a job's terminal may have.
pub const TERMINAL_DIMENSIONS: std::ops::RangeInclusive<u16> = 2..=1000;

/// What a job's terminal shows now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Screen {
    /// The terminal's size.
    pub size: TerminalSize,
    /// Every row, trailing blanks removed.
    pub lines: Vec<String>,
    /// The cursor's row, from 0.
    pub cursor_row: u16,
    /// The cursor's column, from 0.
    pub cursor_col: u16,
    /// Whether a full-screen program has the alternate screen up.
    pub alternate: bool,
}

/// A job's terminal: the screen model and the rendered text not yet taken.
pub struct Terminal {
    parser: vte::Parser,
    screen: ScreenState,
}

struct ScreenState {
    size: TerminalSize,
    grid: Grid,
    /// The main screen, while the alternate one is up.
    main: Option<Grid>,
    /// Per row of the main screen: what was emitted for it.
    emitted: Vec<Option<Emitted>>,
    /// The row whose text ends the stream as an incomplete line.
    open: Option<usize>,
    /// The stream ends with a wrapped row's text: the next row continues it.
    continues_into: Option<usize>,
    /// The stream does not end with a line ending.
    mid_line: bool,
    /// A line feed also returns the cursor to the first column: what a
    /// terminal's driver adds on the way to a terminal (`ONLCR`), which
    /// output sent down a pipe never had.
    newline_mode: bool,
    /// What the terminal answers the program (status and cursor reports),
    /// not sent yet; at most [`MAX_REPLY_BYTES`].
    replies: Vec<u8>,
    /// Rendered text not yet taken.
    out: String,
}

impl Terminal {
    /// A blank terminal of `size` (each dimension held to
    /// [`TERMINAL_DIMENSIONS`]).
    pub fn new(size: TerminalSize) -> Terminal {
        let size = clamped(size);
        Terminal {
            parser: vte::Parser::new(),
            screen: ScreenState {
                size,
                grid: Grid::new(size),
                main: None,
                emitted: vec![None; usize::from(size.rows)],
                open: None,
                continues_into: None,
                mid_line: false,
                newline_mode: false,
                replies: Vec::new(),
                out: String::new(),
            },
        }
    }

    /// A screen for output that was written to a pipe, not a terminal: a
    /// line feed starts its line at the first column.
    pub fn for_pipe(size: TerminalSize) -> Terminal {
        let mut terminal = Terminal::new(size);
        terminal.screen.newline_mode = true;
        terminal
    }

    /// Feeds what the program wrote.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.parser.advance(&mut self.screen, bytes);
    }

    /// Emits the rows down to the cursor as they stand (see the module's
    /// rules), then hands over everything rendered since the last call.
    pub fn flush(&mut self) -> String {
        self.screen.flush();
        std::mem::take(&mut self.screen.out)
    }

    /// What the terminal answers the program since the last call: a
    /// program that asks where its cursor is (`ESC [ 6 n`) may wait for
    /// the answer, as on any terminal.
    pub fn take_replies(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.screen.replies)
    }

    /// Rendered text of rows that left the screen, without emitting the rest.
    pub fn take_final(&mut self) -> String {
        std::mem::take(&mut self.screen.out)
    }

    /// The terminal's size.
    pub fn size(&self) -> TerminalSize {
        self.screen.size
    }

    /// A new size: rows beyond it leave the screen (the top ones, as a
    /// terminal does when it shrinks under its cursor), columns beyond it are cut.
    pub fn resize(&mut self, size: TerminalSize) {
        self.screen.resize(clamped(size));
    }

    /// The text of the rows a flush would tell now, without telling them:
    /// what a ready wait tries its pattern on before anything is read.
    pub fn pending_lines(&self) -> Vec<String> {
        self.screen.pending_lines()
    }

    /// What the screen shows now.
    pub fn screen(&self) -> Screen {
        let grid = &self.screen.grid;
        Screen {
            size: self.screen.size,
            lines: grid.rows.iter().map(|r| trim_end(&r.text())).collect(),
            cursor_row: grid.cursor.0 as u16,
            cursor_col: grid.cursor.1 as u16,
            alternate: self.screen.main.is_some(),
        }
    }

    /// The text before the cursor on its row, when it reads as a prompt: a
    /// question (`[Y/n]`, `(yes/no)`, a line ending in `?`), a password
    /// request, or a shell's or an interpreter's prompt (`$ `, `# `, `>>> `,
    /// `... `, `> `, a line ending in `:`). `None` with the cursor at the start
    /// of a row (where a program leaves it between lines of output).
    pub fn prompt(&self) -> Option<String> {
        let grid = &self.screen.grid;
        let (row, col) = grid.cursor;
        let col = if grid.pending_wrap { col + 1 } else { col };
        if col == 0 {
            return None;
        }
        let before: String = grid.rows[row].cells[..col.min(grid.rows[row].cells.len())]
            .iter()
            .collect();
        let line = before.trim_end();
        is_prompt(line).then(|| line.to_owned())
    }
}

/// `size` with each dimension held to [`TERMINAL_DIMENSIONS`].
fn clamped(size: TerminalSize) -> TerminalSize {
    let (lo, hi) = (*TERMINAL_DIMENSIONS.start(), *TERMINAL_DIMENSIONS.end());
    TerminalSize {
        rows: size.rows.clamp(lo, hi),
        cols: size.cols.clamp(lo, hi),
    }
}

fn trim_end(text: &str) -> String {
    text.trim_end_matches(' ').to_owned()
}
