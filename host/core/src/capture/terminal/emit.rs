//! When a row is told to the model, and how: once final (scrolled off), or
//! as it stands before anything reads; a row told and unchanged is not
//! told again, one that only grew continues its line, one redrawn is told
//! anew.

use super::grid::row_text_in;
use super::{ScreenState, trim_end};

/// What was emitted for a row still on the screen.
#[derive(Clone)]
pub(super) struct Emitted {
    pub(super) text: String,
    /// Its line was ended (or, for a wrapped row, handed on to the next row).
    pub(super) complete: bool,
}

impl ScreenState {
    pub(super) fn cols(&self) -> usize {
        usize::from(self.size.cols)
    }

    pub(super) fn rows(&self) -> usize {
        usize::from(self.size.rows)
    }

    pub(super) fn emitting(&self) -> bool {
        self.main.is_none()
    }

    /// Row `r`'s text as it would be told, `complete` or not. The cursor's
    /// own row, told before it is done, keeps the blanks before the cursor:
    /// what is typed there continues the line as the screen shows it
    /// (`Continue? [Y/n] y`).
    pub(super) fn row_text(&self, r: usize, complete: bool) -> String {
        row_text_in(&self.grid, r, complete)
    }

    /// The last row a flush tells, and whether it is told empty (the
    /// cursor waits at the start of an empty row); `None`: nothing to tell.
    pub(super) fn bottom(&self) -> Option<(usize, bool)> {
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
    pub(super) fn needs_telling(&self, r: usize, complete: bool) -> bool {
        self.grid.rows[r].dirty
            || match &self.emitted[r] {
                None => true,
                Some(e) => complete && !e.complete,
            }
    }

    pub(super) fn pending_lines(&self) -> Vec<String> {
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
    pub(super) fn emit_row(&mut self, r: usize, complete: bool) {
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
    pub(super) fn forget_rows(&mut self) {
        self.emitted.iter_mut().for_each(|e| *e = None);
        self.open = None;
        self.continues_into = None;
    }

    pub(super) fn flush(&mut self) {
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
}
