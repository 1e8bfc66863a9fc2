//! The screen's rows and cells, and the edits a program makes to them:
//! scrolling, erasing, writing a character, the alternate screen, a resize.

use super::emit::Emitted;
use super::{ScreenState, TerminalSize};

#[derive(Clone)]
pub(super) struct Row {
    pub(super) cells: Vec<char>,
    /// The program wrote past the last column: the line goes on in the next row.
    pub(super) wrapped: bool,
    /// Changed since it was last emitted: only such rows cost a look when
    /// the stream is brought up to date.
    pub(super) dirty: bool,
    /// Whether it is blank, once looked at since it last changed.
    pub(super) blank: std::cell::Cell<Option<bool>>,
}

impl Row {
    pub(super) fn blank(cols: usize) -> Row {
        Row {
            cells: vec![' '; cols],
            wrapped: false,
            dirty: false,
            blank: std::cell::Cell::new(Some(true)),
        }
    }

    /// Blank again, keeping its allocation (a row that scrolled off comes
    /// back as the new bottom row).
    pub(super) fn clear(&mut self) {
        self.cells.fill(' ');
        self.wrapped = false;
        self.dirty = false;
        self.blank.set(Some(true));
    }

    /// It changed: told again when the stream is brought up to date.
    pub(super) fn touch(&mut self) {
        self.dirty = true;
        self.blank.set(None);
    }

    /// The row's text: without trailing blanks, unless it goes on in the next row.
    pub(super) fn text(&self) -> String {
        let end = if self.wrapped {
            self.cells.len()
        } else {
            self.cells
                .iter()
                .rposition(|c| *c != ' ')
                .map_or(0, |i| i + 1)
        };
        self.cells[..end].iter().collect()
    }

    pub(super) fn is_blank(&self) -> bool {
        if let Some(blank) = self.blank.get() {
            return blank;
        }
        let blank = self.cells.iter().all(|c| *c == ' ');
        self.blank.set(Some(blank));
        blank
    }
}

/// One screen buffer (the main one, or the alternate one) with its cursor.
#[derive(Clone)]
pub(super) struct Grid {
    pub(super) rows: Vec<Row>,
    pub(super) cursor: (usize, usize),
    pub(super) saved: (usize, usize),
    /// The cursor is past the last column; the next character wraps.
    pub(super) pending_wrap: bool,
    /// The scrolling region, first and last row.
    pub(super) top: usize,
    pub(super) bottom: usize,
}

impl Grid {
    pub(super) fn new(size: TerminalSize) -> Grid {
        let (rows, cols) = (usize::from(size.rows), usize::from(size.cols));
        Grid {
            rows: vec![Row::blank(cols); rows],
            cursor: (0, 0),
            saved: (0, 0),
            pending_wrap: false,
            top: 0,
            bottom: rows - 1,
        }
    }
}

impl ScreenState {
    /// Scrolls the region up by `n`: its top `n` rows leave the screen
    /// (told first), and blank rows come in at its bottom.
    pub(super) fn scroll_up(&mut self, n: usize) {
        let (top, bottom) = (self.grid.top, self.grid.bottom);
        let n = n.min(bottom + 1 - top);
        if self.emitting() {
            // Rows above the region (a header it scrolls under) come first,
            // in the order the screen shows them.
            for r in 0..top + n {
                if self.needs_telling(r, true) {
                    self.emit_row(r, true);
                }
            }
            self.emitted[top..=bottom].rotate_left(n);
            self.emitted[bottom + 1 - n..=bottom].fill(None);
            let shift = |r: usize| match r {
                r if r < top || r > bottom => Some(r),
                r if r < top + n => None,
                r => Some(r - n),
            };
            self.open = self.open.and_then(shift);
            self.continues_into = self.continues_into.and_then(shift);
        }
        let rows = &mut self.grid.rows[top..=bottom];
        rows.rotate_left(n);
        let len = rows.len();
        rows[len - n..].iter_mut().for_each(Row::clear);
    }

    /// Scrolls the region down by `n`: blank rows come in at its top and its
    /// bottom `n` rows are lost (what the screen showed is told first).
    pub(super) fn scroll_down(&mut self, n: usize) {
        let (top, bottom) = (self.grid.top, self.grid.bottom);
        let n = n.min(bottom + 1 - top);
        if self.emitting() {
            self.flush();
            self.emitted[top..=bottom].rotate_right(n);
            self.emitted[top..top + n].fill(None);
            let shift = |r: usize| match r {
                r if r < top || r > bottom => Some(r),
                r if r + n > bottom => None,
                r => Some(r + n),
            };
            self.open = self.open.and_then(shift);
            self.continues_into = self.continues_into.and_then(shift);
        }
        let rows = &mut self.grid.rows[top..=bottom];
        rows.rotate_right(n);
        rows[..n].iter_mut().for_each(Row::clear);
    }

    pub(super) fn line_feed(&mut self) {
        self.grid.pending_wrap = false;
        if self.grid.cursor.0 == self.grid.bottom {
            self.scroll_up(1);
        } else if self.grid.cursor.0 + 1 < self.rows() {
            self.grid.cursor.0 += 1;
        }
    }

    pub(super) fn reverse_index(&mut self) {
        self.grid.pending_wrap = false;
        if self.grid.cursor.0 == self.grid.top {
            self.scroll_down(1);
        } else {
            self.grid.cursor.0 = self.grid.cursor.0.saturating_sub(1);
        }
    }

    pub(super) fn put(&mut self, c: char) {
        let cols = self.cols();
        if self.grid.pending_wrap {
            let row = self.grid.cursor.0;
            self.grid.rows[row].wrapped = true;
            self.grid.cursor.1 = 0;
            self.line_feed();
        }
        let (row, col) = self.grid.cursor;
        let line = &mut self.grid.rows[row];
        line.cells[col] = c;
        line.touch();
        if col + 1 >= cols {
            self.grid.pending_wrap = true;
        } else {
            self.grid.cursor.1 += 1;
        }
    }

    pub(super) fn move_to(&mut self, row: usize, col: usize) {
        self.grid.pending_wrap = false;
        self.grid.cursor = (row.min(self.rows() - 1), col.min(self.cols() - 1));
    }

    pub(super) fn erase_in_line(&mut self, mode: u16) {
        let (row, col) = self.grid.cursor;
        let cols = self.cols();
        let range = match mode {
            0 => col..cols,
            1 => 0..(col + 1).min(cols),
            _ => 0..cols,
        };
        let line = &mut self.grid.rows[row];
        line.cells[range].fill(' ');
        line.touch();
        if mode != 1 {
            line.wrapped = false;
        }
    }

    pub(super) fn erase_in_display(&mut self, mode: u16) {
        let (row, _) = self.grid.cursor;
        match mode {
            0 => {
                self.erase_in_line(0);
                for r in row + 1..self.rows() {
                    self.grid.rows[r].clear();
                }
            }
            1 => {
                self.erase_in_line(1);
                for r in 0..row {
                    self.grid.rows[r].clear();
                }
            }
            // The scrollback only, which this screen does not keep.
            3 => {}
            _ => {
                // What was on the screen was shown already (or is shown
                // now, before it is gone).
                if self.emitting() {
                    self.flush();
                }
                for r in 0..self.rows() {
                    self.grid.rows[r].clear();
                }
                if self.emitting() {
                    self.forget_rows();
                }
            }
        }
    }

    pub(super) fn set_alternate(&mut self, on: bool) {
        match (on, self.main.is_some()) {
            (true, false) => {
                self.flush();
                let fresh = Grid::new(self.size);
                self.main = Some(std::mem::replace(&mut self.grid, fresh));
            }
            (false, true) => {
                if let Some(main) = self.main.take() {
                    self.grid = main;
                }
            }
            _ => {}
        }
    }

    pub(super) fn resize(&mut self, size: TerminalSize) {
        if size == self.size {
            return;
        }
        // The rows above each screen's cursor that do not fit leave it.
        let rows = usize::from(size.rows);
        let cols = usize::from(size.cols);
        self.flush();
        // The main screen is the one told; with a full-screen program up it
        // waits in `main`.
        let main_leave = {
            let main = self.main.as_ref().unwrap_or(&self.grid);
            (main.cursor.0 + 1).saturating_sub(rows)
        };
        for grid in std::iter::once(&mut self.grid).chain(self.main.as_mut()) {
            let leave = (grid.cursor.0 + 1)
                .saturating_sub(rows)
                .min(grid.rows.len());
            grid.rows.drain(..leave);
            grid.rows.resize(rows, Row::blank(cols));
            grid.rows.truncate(rows);
            for row in &mut grid.rows {
                row.cells.resize(cols, ' ');
                row.blank.set(None);
            }
            grid.cursor = (
                grid.cursor.0.saturating_sub(leave).min(rows - 1),
                grid.cursor.1.min(cols - 1),
            );
            grid.saved = (grid.saved.0.min(rows - 1), grid.saved.1.min(cols - 1));
            grid.top = 0;
            grid.bottom = rows - 1;
            grid.pending_wrap = false;
        }
        let emitted_leave = main_leave.min(self.emitted.len());
        self.emitted.drain(..emitted_leave);
        self.emitted.resize(rows, None);
        self.open = self
            .open
            .and_then(|r| r.checked_sub(emitted_leave))
            .filter(|r| *r < rows);
        self.continues_into = None;
        self.size = size;
        // A row cut or widened was told as it stood: it is told again only
        // when it changes. A wrap at the old width is none at the new one.
        for grid in std::iter::once(&mut self.grid).chain(self.main.as_mut()) {
            for row in &mut grid.rows {
                row.wrapped = false;
            }
        }
        let main = self.main.as_ref().unwrap_or(&self.grid);
        for r in 0..rows {
            if let Some(complete) = self.emitted[r].as_ref().map(|e| e.complete) {
                let text = row_text_in(main, r, complete);
                self.emitted[r] = Some(Emitted { text, complete });
            }
        }
    }
}

/// Row `r` of `grid` as it would be told (see [`ScreenState::row_text`]).
pub(super) fn row_text_in(grid: &Grid, r: usize, complete: bool) -> String {
    let row = &grid.rows[r];
    let text = row.text();
    if !complete && r == grid.cursor.0 && !grid.pending_wrap {
        let col = grid.cursor.1.min(row.cells.len());
        if text.chars().count() < col {
            return row.cells[..col].iter().collect();
        }
    }
    text
}
