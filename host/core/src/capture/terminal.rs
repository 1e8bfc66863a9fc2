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

#[derive(Clone)]
struct Row {
    cells: Vec<char>,
    /// The program wrote past the last column: the line goes on in the next row.
    wrapped: bool,
    /// Changed since it was last emitted: only such rows cost a look when
    /// the stream is brought up to date.
    dirty: bool,
    /// Whether it is blank, once looked at since it last changed.
    blank: std::cell::Cell<Option<bool>>,
}

impl Row {
    fn blank(cols: usize) -> Row {
        Row {
            cells: vec![' '; cols],
            wrapped: false,
            dirty: false,
            blank: std::cell::Cell::new(Some(true)),
        }
    }

    /// Blank again, keeping its allocation (a row that scrolled off comes
    /// back as the new bottom row).
    fn clear(&mut self) {
        self.cells.fill(' ');
        self.wrapped = false;
        self.dirty = false;
        self.blank.set(Some(true));
    }

    /// It changed: told again when the stream is brought up to date.
    fn touch(&mut self) {
        self.dirty = true;
        self.blank.set(None);
    }

    /// The row's text: without trailing blanks, unless it goes on in the next row.
    fn text(&self) -> String {
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

    fn is_blank(&self) -> bool {
        if let Some(blank) = self.blank.get() {
            return blank;
        }
        let blank = self.cells.iter().all(|c| *c == ' ');
        self.blank.set(Some(blank));
        blank
    }
}

/// What was emitted for a row still on the screen.
#[derive(Clone)]
struct Emitted {
    text: String,
    /// Its line was ended (or, for a wrapped row, handed on to the next row).
    complete: bool,
}

/// One screen buffer (the main one, or the alternate one) with its cursor.
#[derive(Clone)]
struct Grid {
    rows: Vec<Row>,
    cursor: (usize, usize),
    saved: (usize, usize),
    /// The cursor is past the last column; the next character wraps.
    pending_wrap: bool,
    /// The scrolling region, first and last row.
    top: usize,
    bottom: usize,
}

impl Grid {
    fn new(size: TerminalSize) -> Grid {
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

/// Whether a line the cursor sits after asks for input.
pub fn is_prompt(line: &str) -> bool {
    let line = line.trim_end();
    if line.is_empty() {
        return false;
    }
    let lower = line.to_lowercase();
    let questions = ["[y/n]", "(y/n)", "[yes/no]", "(yes/no)", "[y/n/q]"];
    if questions
        .iter()
        .any(|q| lower.trim_end_matches([':', '?', ' ']).ends_with(q))
    {
        return true;
    }
    if lower.contains("password") || lower.contains("passphrase") {
        return lower.ends_with(':') || lower.ends_with('?');
    }
    // An interpreter's prompts are the whole row.
    if [">>>", "...", ">", "$", "#", "%", "?"].contains(&line) {
        return true;
    }
    // A debugger's: `(Pdb)`, `(gdb)`, `(lldb)`.
    if let Some(name) = line.strip_prefix('(').and_then(|l| l.strip_suffix(')'))
        && !name.is_empty()
        && name.len() <= 12
        && name.chars().all(char::is_alphanumeric)
    {
        return true;
    }
    // A question with its default answer after it: `package name: (app)`,
    // `Is this OK? (yes)`.
    let line = match line.strip_suffix(')').and_then(|l| l.rsplit_once(" (")) {
        Some((question, default)) if !default.contains(['(', ')']) => question.trim_end(),
        _ => line,
    };
    let last = line.chars().last().unwrap_or(' ');
    match last {
        '?' | ':' => true,
        // `user@host:~$`, `root@box:/#`, `mysql>`, `In [3]:` (caught above).
        '$' | '#' | '>' => {
            line.len() > 1
                && !line.ends_with("->")
                && !line.ends_with(">>")
                && !line.ends_with("=>")
        }
        _ => false,
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

impl ScreenState {
    fn cols(&self) -> usize {
        usize::from(self.size.cols)
    }

    fn rows(&self) -> usize {
        usize::from(self.size.rows)
    }

    fn emitting(&self) -> bool {
        self.main.is_none()
    }

    /// Row `r`'s text as it would be told, `complete` or not. The cursor's
    /// own row, told before it is done, keeps the blanks before the cursor:
    /// what is typed there continues the line as the screen shows it
    /// (`Continue? [Y/n] y`).
    fn row_text(&self, r: usize, complete: bool) -> String {
        row_text_in(&self.grid, r, complete)
    }

    /// The last row a flush tells, and whether it is told empty (the
    /// cursor waits at the start of an empty row); `None`: nothing to tell.
    fn bottom(&self) -> Option<(usize, bool)> {
        let grid = &self.grid;
        let last_content = grid.rows.iter().rposition(|r| !r.is_blank());
        let cursor_row = grid.cursor.0;
        let bottom = match last_content {
            Some(last) => last.max(cursor_row),
            None if cursor_row == 0 => return None,
            None => cursor_row,
        };
        Some((bottom, grid.rows[bottom].is_blank()))
    }

    /// Whether a flush has anything to say about row `r` (told `complete`
    /// or not): it changed, was never told, or its line ends now.
    fn needs_telling(&self, r: usize, complete: bool) -> bool {
        self.grid.rows[r].dirty
            || match &self.emitted[r] {
                None => true,
                Some(e) => complete && !e.complete,
            }
    }

    fn pending_lines(&self) -> Vec<String> {
        if !self.emitting() {
            return Vec::new();
        }
        let Some((bottom, bottom_blank)) = self.bottom() else {
            return Vec::new();
        };
        let last = if bottom_blank { bottom } else { bottom + 1 };
        // Rows joined by a wrap are one line, as the stream tells them: a
        // pattern may span the wrap.
        let mut lines = Vec::new();
        let mut line = String::new();
        let mut untold = false;
        for r in 0..last {
            let complete = r < bottom;
            line.push_str(&self.row_text(r, complete));
            untold |= self.needs_telling(r, complete);
            if !(self.grid.rows[r].wrapped && complete) {
                if untold {
                    lines.push(trim_end(&line));
                }
                line.clear();
                untold = false;
            }
        }
        if untold && !line.is_empty() {
            lines.push(trim_end(&line));
        }
        lines
    }

    /// Emits row `r` of the main screen as it stands; `complete` ends its line.
    fn emit_row(&mut self, r: usize, complete: bool) {
        let text = self.row_text(r, complete);
        let wrapped = self.grid.rows[r].wrapped;
        self.grid.rows[r].dirty = false;
        let before = self.emitted[r].take();
        match before {
            Some(e) if e.complete && e.text == text => {
                self.emitted[r] = Some(e);
                return;
            }
            // Only grown, or only lost the blanks it was told with before
            // the cursor (`>>> ` that ends as `>>>`): it continues its line.
            Some(e)
                if !e.complete
                    && self.open == Some(r)
                    && (text.starts_with(&e.text)
                        || (e.text.starts_with(&text)
                            && e.text[text.len()..].trim().is_empty())) =>
            {
                if let Some(grown) = text.get(e.text.len()..) {
                    self.out.push_str(grown);
                }
            }
            Some(e) if text.trim().is_empty() => {
                // A row cleared after it was shown says nothing new.
                self.emitted[r] = Some(e);
                return;
            }
            _ => {
                if self.mid_line && self.continues_into != Some(r) {
                    self.out.push('\n');
                    // The line that was open is ended now: unchanged, it
                    // is not told again.
                    if let Some(open) = self.open
                        && let Some(e) = self.emitted[open].as_mut()
                    {
                        e.complete = true;
                    }
                }
                self.out.push_str(&text);
            }
        }
        self.open = None;
        self.continues_into = None;
        self.mid_line = true;
        if complete {
            if wrapped {
                self.continues_into = Some(r + 1);
            } else {
                self.out.push('\n');
                self.mid_line = false;
            }
        } else {
            self.open = Some(r);
        }
        self.emitted[r] = Some(Emitted { text, complete });
    }

    /// Forgets what was emitted for the rows on the screen (they were all
    /// cleared): what is drawn next is new.
    fn forget_rows(&mut self) {
        self.emitted.iter_mut().for_each(|e| *e = None);
        self.open = None;
        self.continues_into = None;
    }

    fn flush(&mut self) {
        if !self.emitting() {
            return;
        }
        // The bottom row with nothing on it and the cursor at its start is
        // where the next line will go: the rows above it are complete.
        let Some((bottom, bottom_blank)) = self.bottom() else {
            return;
        };
        let last = if bottom_blank { bottom } else { bottom + 1 };
        for r in 0..last {
            let complete = r < bottom;
            if self.needs_telling(r, complete) {
                self.emit_row(r, complete);
            }
        }
    }

    /// Scrolls the region up by `n`: its top `n` rows leave the screen
    /// (told first), and blank rows come in at its bottom.
    fn scroll_up(&mut self, n: usize) {
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
    fn scroll_down(&mut self, n: usize) {
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

    fn line_feed(&mut self) {
        self.grid.pending_wrap = false;
        if self.grid.cursor.0 == self.grid.bottom {
            self.scroll_up(1);
        } else if self.grid.cursor.0 + 1 < self.rows() {
            self.grid.cursor.0 += 1;
        }
    }

    fn reverse_index(&mut self) {
        self.grid.pending_wrap = false;
        if self.grid.cursor.0 == self.grid.top {
            self.scroll_down(1);
        } else {
            self.grid.cursor.0 = self.grid.cursor.0.saturating_sub(1);
        }
    }

    fn put(&mut self, c: char) {
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

    fn move_to(&mut self, row: usize, col: usize) {
        self.grid.pending_wrap = false;
        self.grid.cursor = (row.min(self.rows() - 1), col.min(self.cols() - 1));
    }

    fn erase_in_line(&mut self, mode: u16) {
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

    fn erase_in_display(&mut self, mode: u16) {
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

    fn set_alternate(&mut self, on: bool) {
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

    fn resize(&mut self, size: TerminalSize) {
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
fn row_text_in(grid: &Grid, r: usize, complete: bool) -> String {
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

fn param(params: &vte::Params, index: usize, default: u16) -> u16 {
    params
        .iter()
        .nth(index)
        .and_then(|p| p.first().copied())
        .filter(|v| *v != 0)
        .unwrap_or(default)
}

impl vte::Perform for ScreenState {
    fn print(&mut self, c: char) {
        self.put(c);
    }

    fn execute(&mut self, byte: u8) {
        match byte {
            b'\n' | 0x0b | 0x0c => {
                if self.newline_mode {
                    self.grid.cursor.1 = 0;
                }
                self.line_feed();
            }
            b'\r' => {
                self.grid.pending_wrap = false;
                self.grid.cursor.1 = 0;
            }
            0x08 => {
                self.grid.pending_wrap = false;
                self.grid.cursor.1 = self.grid.cursor.1.saturating_sub(1);
            }
            b'\t' => {
                let next = (self.grid.cursor.1 / 8 + 1) * 8;
                self.grid.cursor.1 = next.min(self.cols() - 1);
            }
            _ => {}
        }
    }

    fn csi_dispatch(
        &mut self,
        params: &vte::Params,
        intermediates: &[u8],
        _ignore: bool,
        action: char,
    ) {
        let (row, col) = self.grid.cursor;
        let n = usize::from(param(params, 0, 1));
        if intermediates == b"?" {
            if matches!(action, 'h' | 'l')
                && params
                    .iter()
                    .any(|p| matches!(p.first(), Some(47 | 1047 | 1049)))
            {
                if action == 'h' && params.iter().any(|p| p.first() == Some(&1049)) {
                    self.grid.saved = self.grid.cursor;
                }
                self.set_alternate(action == 'h');
            }
            return;
        }
        if !intermediates.is_empty() {
            return;
        }
        let cols = self.cols();
        match action {
            'A' => self.move_to(row.saturating_sub(n), col),
            'B' | 'e' => self.move_to(row + n, col),
            'C' | 'a' => self.move_to(row, col + n),
            'D' => self.move_to(row, col.saturating_sub(n)),
            'E' => self.move_to(row + n, 0),
            'F' => self.move_to(row.saturating_sub(n), 0),
            'G' | '`' => self.move_to(row, n - 1),
            'd' => self.move_to(n - 1, col),
            'H' | 'f' => {
                let r = usize::from(param(params, 0, 1)) - 1;
                let c = usize::from(param(params, 1, 1)) - 1;
                self.move_to(r, c);
            }
            'J' => self.erase_in_display(
                params
                    .iter()
                    .next()
                    .and_then(|p| p.first().copied())
                    .unwrap_or(0),
            ),
            'K' => self.erase_in_line(
                params
                    .iter()
                    .next()
                    .and_then(|p| p.first().copied())
                    .unwrap_or(0),
            ),
            'X' => {
                let end = (col + n).min(cols);
                let line = &mut self.grid.rows[row];
                line.cells[col..end].fill(' ');
                line.touch();
            }
            // Deleting or inserting characters: one move of the rest of the
            // row, however many are asked for.
            'P' | '@' => {
                let line = &mut self.grid.rows[row];
                let rest = &mut line.cells[col..];
                let k = n.min(rest.len());
                if action == 'P' {
                    rest.rotate_left(k);
                    let len = rest.len();
                    rest[len - k..].fill(' ');
                } else {
                    rest.rotate_right(k);
                    rest[..k].fill(' ');
                }
                line.touch();
            }
            'L' | 'M' if row >= self.grid.top && row <= self.grid.bottom => {
                let saved_top = self.grid.top;
                self.grid.top = row;
                if action == 'L' {
                    self.scroll_down(n);
                } else {
                    self.scroll_up(n);
                }
                self.grid.top = saved_top;
            }
            'S' => self.scroll_up(n),
            'T' => self.scroll_down(n),
            'r' => {
                let top = usize::from(param(params, 0, 1)) - 1;
                let bottom = usize::from(param(params, 1, self.size.rows)) - 1;
                if top < bottom && bottom < self.rows() {
                    self.grid.top = top;
                    self.grid.bottom = bottom;
                    self.move_to(0, 0);
                }
            }
            // Device status reports: "all is well", and where the cursor is.
            'n' if self.replies.len() < MAX_REPLY_BYTES => match param(params, 0, 0) {
                5 => self.replies.extend_from_slice(b"\x1b[0n"),
                6 => {
                    let (r, c) = self.grid.cursor;
                    let c = if self.grid.pending_wrap { c + 1 } else { c };
                    self.replies
                        .extend_from_slice(format!("\x1b[{};{}R", r + 1, c + 1).as_bytes());
                }
                _ => {}
            },
            's' => self.grid.saved = self.grid.cursor,
            'u' => {
                let (r, c) = self.grid.saved;
                self.move_to(r, c);
            }
            _ => {}
        }
    }

    fn esc_dispatch(&mut self, intermediates: &[u8], _ignore: bool, byte: u8) {
        if !intermediates.is_empty() {
            return;
        }
        match byte {
            b'D' => self.line_feed(),
            b'E' => {
                self.grid.cursor.1 = 0;
                self.line_feed();
            }
            b'M' => self.reverse_index(),
            b'7' => self.grid.saved = self.grid.cursor,
            b'8' => {
                let (r, c) = self.grid.saved;
                self.move_to(r, c);
            }
            b'c' => {
                self.flush();
                self.set_alternate(false);
                let size = self.size;
                self.grid = Grid::new(size);
                self.forget_rows();
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered(bytes: &[u8]) -> String {
        let mut t = Terminal::new(TerminalSize::default());
        t.feed(bytes);
        t.flush()
    }

    #[test]
    fn plain_lines_pass_through() {
        assert_eq!(rendered(b"one\r\ntwo\r\n"), "one\ntwo\n");
        assert_eq!(rendered(b"one\r\ntwo"), "one\ntwo");
    }

    #[test]
    fn colours_are_applied_not_shown() {
        assert_eq!(rendered(b"\x1b[1;31merror\x1b[0m: bad\r\n"), "error: bad\n");
    }

    #[test]
    fn a_progress_bar_counts_once_in_its_final_state() {
        let mut bytes = Vec::new();
        for i in 0..=100 {
            bytes.extend_from_slice(format!("\rDownloading {i:3}%").as_bytes());
        }
        bytes.extend_from_slice(b"\r\ndone\r\n");
        assert_eq!(rendered(&bytes), "Downloading 100%\ndone\n");
    }

    #[test]
    fn cursor_up_redraws_of_several_rows_count_once() {
        let mut bytes = Vec::new();
        for i in 0..50 {
            if i > 0 {
                bytes.extend_from_slice(b"\x1b[2A");
            }
            bytes.extend_from_slice(format!("\r\x1b[Ka {i}\r\n\x1b[Kb {i}\r\n").as_bytes());
        }
        assert_eq!(rendered(&bytes), "a 49\nb 49\n");
    }

    #[test]
    fn a_line_read_early_continues_when_it_only_grew() {
        let mut t = Terminal::new(TerminalSize::default());
        t.feed(b"Continue? [Y/n] ");
        assert_eq!(t.flush(), "Continue? [Y/n] ");
        assert_eq!(t.prompt().as_deref(), Some("Continue? [Y/n]"));
        t.feed(b"y\r\nok\r\n");
        assert_eq!(t.flush(), "y\nok\n");
        assert_eq!(t.prompt(), None);
    }

    #[test]
    fn a_prompt_told_with_its_blank_ends_without_it() {
        let mut t = Terminal::new(TerminalSize::default());
        t.feed(b">>> ");
        assert_eq!(t.flush(), ">>> ");
        t.feed(b"\r\n");
        assert_eq!(t.flush(), "\n");
    }

    #[test]
    fn a_resize_tells_no_row_again() {
        let mut t = Terminal::new(TerminalSize { rows: 5, cols: 20 });
        t.feed(b"hello world\r\nContinue? [Y/n] ");
        assert_eq!(t.flush(), "hello world\nContinue? [Y/n] ");
        t.resize(TerminalSize { rows: 5, cols: 8 });
        assert_eq!(t.flush(), "");
        t.resize(TerminalSize { rows: 5, cols: 40 });
        assert_eq!(t.flush(), "");
        t.feed(b"\r\ndone\r\n");
        assert_eq!(t.flush(), "\ndone\n");
    }

    #[test]
    fn an_open_line_ended_by_another_row_is_not_told_again() {
        let mut t = Terminal::new(TerminalSize { rows: 5, cols: 20 });
        t.feed(b"a\r\nb");
        assert_eq!(t.flush(), "a\nb");
        // The cursor goes back up and redraws the first row only.
        t.feed(b"\x1b[A\rA");
        assert_eq!(t.flush(), "\nA\n");
        t.feed(b"\x1b[B\r\n");
        assert_eq!(t.flush(), "");
    }

    #[test]
    fn the_cursor_position_is_answered_within_a_bound() {
        let mut t = Terminal::new(TerminalSize { rows: 5, cols: 20 });
        t.feed(b"ab\r\ncd\x1b[6n\x1b[5n");
        assert_eq!(t.take_replies(), b"\x1b[2;3R\x1b[0n");
        assert!(t.take_replies().is_empty());
        t.feed(&b"\x1b[6n".repeat(10_000));
        assert!(t.take_replies().len() <= MAX_REPLY_BYTES + 16);
    }

    #[test]
    fn pipe_output_starts_each_line_at_the_first_column() {
        let mut t = Terminal::for_pipe(TerminalSize { rows: 3, cols: 20 });
        t.feed(b"one\ntwo\nthree\nfour\n\rfive 1%\rfive 99%\n");
        assert_eq!(t.flush(), "one\ntwo\nthree\nfour\nfive 99%\n");
    }

    #[test]
    fn a_wrapped_line_is_peeked_whole() {
        let mut t = Terminal::new(TerminalSize { rows: 5, cols: 10 });
        t.feed(b"Tomcat started on port 8080");
        assert_eq!(
            t.pending_lines(),
            vec!["Tomcat started on port 8080".to_owned()]
        );
    }

    #[test]
    fn a_resize_under_a_full_screen_program_keeps_the_main_screen() {
        let mut t = Terminal::new(TerminalSize { rows: 5, cols: 20 });
        t.feed(b"before\r\n$ ");
        assert_eq!(t.flush(), "before\n$ ");
        t.feed(b"\x1b[?1049h\x1b[Hfull\x1b[5;1Hbottom");
        t.resize(TerminalSize { rows: 3, cols: 20 });
        t.feed(b"\x1b[?1049lls\r\n");
        assert_eq!(t.flush(), "ls\n");
    }

    #[test]
    fn clearing_the_scrollback_keeps_the_screen() {
        let mut t = Terminal::new(TerminalSize { rows: 5, cols: 20 });
        t.feed(b"kept\x1b[3J");
        assert_eq!(t.screen().lines[0], "kept");
    }

    #[test]
    fn pending_lines_peek_without_telling() {
        let mut t = Terminal::new(TerminalSize { rows: 5, cols: 20 });
        t.feed(b"one\r\ntw");
        assert_eq!(t.pending_lines(), vec!["one".to_owned(), "tw".to_owned()]);
        assert_eq!(t.pending_lines(), vec!["one".to_owned(), "tw".to_owned()]);
        assert_eq!(t.flush(), "one\ntw");
        assert!(t.pending_lines().is_empty());
        t.feed(b"o\r\n");
        assert_eq!(t.pending_lines(), vec!["two".to_owned()]);
    }

    #[test]
    fn sizes_out_of_bounds_are_held_to_them() {
        let mut t = Terminal::new(TerminalSize { rows: 0, cols: 0 });
        assert_eq!(t.size(), TerminalSize { rows: 2, cols: 2 });
        t.resize(TerminalSize {
            rows: 5000,
            cols: 1,
        });
        assert_eq!(
            t.size(),
            TerminalSize {
                rows: 1000,
                cols: 2
            }
        );
        t.feed(b"xyz");
    }

    #[test]
    fn a_line_read_early_and_redrawn_is_told_again() {
        let mut t = Terminal::new(TerminalSize::default());
        t.feed(b"\r 40%");
        assert_eq!(t.flush(), " 40%");
        t.feed(b"\r100%\r\n");
        assert_eq!(t.flush(), "\n100%\n");
    }

    #[test]
    fn rows_that_scroll_off_are_final() {
        let mut t = Terminal::new(TerminalSize { rows: 3, cols: 10 });
        t.feed(b"1\r\n2\r\n3\r\n4\r\n5");
        assert_eq!(t.take_final(), "1\n2\n");
        assert_eq!(t.flush(), "3\n4\n5");
    }

    #[test]
    fn wrapped_rows_are_one_line() {
        let mut t = Terminal::new(TerminalSize { rows: 5, cols: 4 });
        t.feed(b"abcdefghij\r\nk\r\n");
        assert_eq!(t.flush(), "abcdefghij\nk\n");
    }

    #[test]
    fn the_alternate_screen_emits_nothing_and_shows_on_the_screen() {
        let mut t = Terminal::new(TerminalSize { rows: 4, cols: 20 });
        t.feed(b"before\r\n\x1b[?1049h\x1b[H\x1b[2Jfull screen");
        assert_eq!(t.flush(), "before\n");
        let screen = t.screen();
        assert!(screen.alternate);
        assert_eq!(screen.lines[0], "full screen");
        assert_eq!((screen.cursor_row, screen.cursor_col), (0, 11));
        t.feed(b"\x1b[?1049lafter\r\n");
        assert_eq!(t.flush(), "after\n");
    }

    #[test]
    fn prompts_are_recognised_and_output_is_not() {
        for p in [
            "Continue? [Y/n]",
            "Proceed (Y/n)?",
            "Are you sure you want to continue connecting (yes/no)?",
            "Password:",
            "[sudo] password for me:",
            ">>>",
            "...",
            "$",
            "user@host:~/src$",
            "Enter your name:",
            "rm: remove regular empty file 'x'?",
            "(Pdb)",
            "package name: (app)",
            "Is this OK? (yes)",
            "   ...:",
        ] {
            assert!(is_prompt(p), "{p}");
        }
        for p in [
            "Downloading 45%",
            "Compiling foo v0.1.0",
            "Receiving objects:  45% (450/1000)",
            "a -> b",
            "",
            "done.",
            "Compiling foo v0.1.0 (/src/foo)",
            "(1/3)",
        ] {
            assert!(!is_prompt(p), "{p}");
        }
    }

    #[test]
    fn a_shrunk_terminal_keeps_the_cursor_row() {
        let mut t = Terminal::new(TerminalSize { rows: 4, cols: 20 });
        t.feed(b"1\r\n2\r\n3\r\n4");
        t.resize(TerminalSize { rows: 2, cols: 5 });
        assert_eq!(t.flush(), "1\n2\n3\n4");
        assert_eq!(t.screen().lines, vec!["3".to_owned(), "4".to_owned()]);
        t.feed(b"\r\n5\r\n");
        assert_eq!(t.flush(), "\n5\n");
    }

    #[test]
    fn random_bytes_never_break_the_screen() {
        // A fixed-seed generator: the same bytes on every run.
        let mut seed: u64 = 0x2545_F491_4F6C_DD1D;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let pieces: &[&[u8]] = &[
            b"\x1b[",
            b"\x1b[?1049h",
            b"\x1b[?1049l",
            b"\x1b]0;t\x07",
            b";",
            b"\r",
            b"\n",
            b"\x08",
            b"\t",
            b"\x1b",
            b"\xe2\x94",
            b"\xff",
            b"A",
            b"H",
            b"J",
            b"K",
            b"r",
            b"L",
            b"M",
            b"P",
            b"@",
            b"S",
            b"T",
            b"X",
            b"7",
            b"8",
            b"c",
            b"D",
            b"E",
        ];
        for round in 0..200 {
            let rows = (next() % 6 + 2) as u16;
            let cols = (next() % 9 + 2) as u16;
            let mut t = Terminal::new(TerminalSize { rows, cols });
            for _ in 0..400 {
                let pick = next() as usize;
                if pick.is_multiple_of(7) {
                    t.feed((next() % 10000).to_string().as_bytes());
                } else {
                    t.feed(pieces[pick % pieces.len()]);
                }
                if pick.is_multiple_of(53) {
                    t.resize(TerminalSize {
                        rows: (next() % 6 + 2) as u16,
                        cols: (next() % 9 + 2) as u16,
                    });
                }
                if pick.is_multiple_of(11) {
                    let _ = t.flush();
                    let _ = t.prompt();
                }
            }
            let s = t.screen();
            assert!(
                s.cursor_row < s.size.rows && s.cursor_col < s.size.cols,
                "round {round}"
            );
            assert_eq!(s.lines.len(), usize::from(s.size.rows));
        }
    }

    #[test]
    fn hostile_sequences_stay_in_bounds() {
        let mut t = Terminal::new(TerminalSize { rows: 2, cols: 2 });
        t.feed(b"\x1b[9999;9999H\x1b[9999@\x1b[9999P\x1b[9999L\x1b[9999M\x1b[9999X\x1b[0;0r\x1b[5;1r\x1b[99S\x1b[99T\x1bM\x1bM\x08\x08\t\t\tx");
        let _ = t.flush();
        let s = t.screen();
        assert!(usize::from(s.cursor_row) < 2 && usize::from(s.cursor_col) < 2);
    }
}
