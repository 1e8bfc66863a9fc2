//! The escape sequences a program sends, as `vte` parses them, turned into
//! edits of the screen and answers to its queries.

use super::grid::Grid;
use super::{MAX_REPLY_BYTES, ScreenState};

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
