//! The screen model's tests: what is told, and when.

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
