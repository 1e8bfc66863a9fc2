//! The terminal corpus (`benches/terminal-corpus/`: real programs recorded on
//! a terminal, raw bytes with their chunk timing) replayed through the
//! renderer a terminal job's output goes through, with the figures the
//! terminal extension is held to:
//!
//! - what the model reads of a session that is mostly redraws is at most 10%
//!   of its raw bytes;
//! - every line that names an error or a warning is kept;
//! - the prompt detector finds every prompt a program waited at, and raises
//!   no alarm anywhere else (precision and recall).
//!
//! Replaying follows the recorded timing without waiting for it: the figures
//! are the same on every run and every machine. Run with `--nocapture` for
//! the table (BENCHMARKS.md has it).

use std::path::{Path, PathBuf};

use host::capture::{Terminal, TerminalSize};

/// How long a job must have been quiet before a wait asks for a prompt:
/// the guest's `PROMPT_QUIET_MS`.
const PROMPT_QUIET_SECONDS: f64 = 0.5;

/// The recordings' answers came after more than this much quiet: each such
/// gap of an interactive session is one of its manifest's prompts.
const ANSWER_GAP_SECONDS: f64 = 1.0;

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../benches/terminal-corpus")
}

struct Session {
    name: String,
    interactive: bool,
    redraws: bool,
    prompts: Vec<String>,
    size: TerminalSize,
    raw: Vec<u8>,
    /// Each chunk as written, after the quiet before it (seconds).
    chunks: Vec<(f64, std::ops::Range<usize>)>,
}

fn sessions() -> Vec<Session> {
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(corpus().join("manifest.json")).expect("the corpus manifest"),
    )
    .unwrap();
    manifest
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let name = e["name"].as_str().unwrap().to_owned();
            let raw = std::fs::read(corpus().join(format!("{name}.raw"))).unwrap();
            let timing = std::fs::read_to_string(corpus().join(format!("{name}.timing"))).unwrap();
            let mut at = 0;
            let chunks = timing
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| {
                    let (delay, len) = l.split_once(' ').unwrap();
                    let len: usize = len.trim().parse().unwrap();
                    let range = at..at + len;
                    at += len;
                    (delay.parse::<f64>().unwrap(), range)
                })
                .collect();
            assert_eq!(at, raw.len(), "{name}: the timing covers the raw bytes");
            Session {
                interactive: e["interactive"].as_bool().unwrap(),
                redraws: e["redraws"].as_bool().unwrap(),
                prompts: e["prompts"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| p.as_str().unwrap().to_owned())
                    .collect(),
                size: TerminalSize {
                    rows: e["rows"].as_u64().unwrap() as u16,
                    cols: e["cols"].as_u64().unwrap() as u16,
                },
                name,
                raw,
                chunks,
            }
        })
        .collect()
}

/// What one replay of a session gave.
struct Replay {
    /// The text read once, at the end.
    read_at_end: String,
    /// The text read by a reader that reads at every quiet moment, and at the end.
    read_when_quiet: String,
    /// At each quiet moment: how long it lasted and the prompt found, if any.
    quiet: Vec<(f64, Option<String>)>,
    /// The prompts found after each write, had the program gone quiet there.
    after_writes: Vec<String>,
}

fn replay(s: &Session) -> Replay {
    let mut once = Terminal::new(s.size);
    let mut eager = Terminal::new(s.size);
    let mut read_at_end = String::new();
    let mut read_when_quiet = String::new();
    let mut quiet = Vec::new();
    let mut after_writes = Vec::new();
    for (i, (delay, range)) in s.chunks.iter().enumerate() {
        if i > 0
            && let Some(prompt) = once.prompt()
        {
            after_writes.push(prompt);
        }
        if i > 0 && *delay >= PROMPT_QUIET_SECONDS {
            quiet.push((*delay, once.prompt()));
            read_when_quiet.push_str(&eager.flush());
        }
        once.feed(&s.raw[range.clone()]);
        eager.feed(&s.raw[range.clone()]);
        read_at_end.push_str(&once.take_final());
    }
    read_at_end.push_str(&once.flush());
    read_when_quiet.push_str(&eager.flush());
    Replay {
        read_at_end,
        read_when_quiet,
        quiet,
        after_writes,
    }
}

/// The lines of the raw output that name an error or a warning, as a person
/// sees each on a terminal: escape sequences dropped, and of a line redrawn
/// with `\r` only its last drawing. (A plain reading of the bytes, separate
/// from the renderer's.)
fn flagged_lines(raw: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(raw);
    let mut plain = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            match chars.next() {
                Some('[') => {
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
                Some(']') => {
                    while let Some(c) = chars.next() {
                        if c == '\u{7}' || (c == '\u{1b}' && chars.next_if_eq(&'\\').is_some()) {
                            break;
                        }
                    }
                }
                _ => {}
            }
        } else {
            plain.push(c);
        }
    }
    plain
        .split('\n')
        .map(|line| {
            line.trim_end_matches('\r')
                .rsplit('\r')
                .next()
                .unwrap_or_default()
                .trim()
                .to_owned()
        })
        .filter(|line| {
            let lower = line.to_lowercase();
            lower.contains("error") || lower.contains("warning")
        })
        .collect()
}

#[test]
fn the_corpus_meets_the_terminal_goals() {
    let sessions = sessions();
    assert!(sessions.len() >= 20, "a corpus of at least 20 sessions");
    let (mut found, mut expected, mut alarms, mut detections) = (0, 0, 0, 0);
    let (mut flagged_kept, mut flagged_all) = (0, 0);
    // Quiet moments of programs that were not waiting for anyone: where an
    // alarm could have gone off.
    let mut idle_moments = 0;
    // Every write boundary of a program that never waits for input: where
    // an alarm could go off on a slower machine.
    let (mut boundaries, mut boundary_alarms) = (0, 0);
    let mut failures = Vec::new();
    println!(
        "{:<28} {:>8} {:>8} {:>7} {:>8} {:>7} {:>8} {:>9}",
        "session", "raw B", "read B", "ratio", "eager B", "ratio", "flagged", "prompts"
    );
    for s in &sessions {
        let r = replay(s);
        let ratio = r.read_at_end.len() as f64 / s.raw.len().max(1) as f64;
        let eager = r.read_when_quiet.len() as f64 / s.raw.len().max(1) as f64;
        if s.redraws && eager > 0.10 {
            failures.push(format!(
                "{}: reads {:.1}% of its raw bytes (at most 10%)",
                s.name,
                eager * 100.0
            ));
        }
        // A reader that reads at every pause reads what one reading at the
        // end does, line for line, where nothing was redrawn: nothing told
        // twice (the blanks before a prompt's cursor aside).
        if s.interactive && !s.redraws && s.name != "git_rebase_i_vim" {
            let trimmed = |t: &str| t.lines().map(str::trim_end).collect::<Vec<_>>().join("\n");
            if trimmed(&r.read_when_quiet) != trimmed(&r.read_at_end) {
                failures.push(format!(
                    "{}: read at every pause {:?}, read once {:?}",
                    s.name, r.read_when_quiet, r.read_at_end
                ));
            }
        }
        let flagged = flagged_lines(&s.raw);
        let kept = flagged
            .iter()
            .filter(|l| {
                r.read_at_end.contains(l.as_str()) && r.read_when_quiet.contains(l.as_str())
            })
            .count();
        for lost in flagged
            .iter()
            .filter(|l| !r.read_at_end.contains(l.as_str()))
        {
            failures.push(format!("{}: lost the line {lost:?}", s.name));
        }
        flagged_all += flagged.len();
        flagged_kept += kept;
        // Each answered prompt is a long quiet moment of an interactive
        // session, in the manifest's order; every other detection is an alarm.
        let mut wanted = s.prompts.iter();
        let mut hits = 0;
        let mut asked = 0;
        for (quiet, prompt) in &r.quiet {
            let expect = (s.interactive && *quiet > ANSWER_GAP_SECONDS)
                .then(|| wanted.next())
                .flatten()
                .filter(|p| !p.is_empty());
            if prompt.is_some() {
                detections += 1;
            }
            if expect.is_none() {
                idle_moments += 1;
            }
            match (expect, prompt) {
                (Some(want), Some(got)) if got == want => hits += 1,
                (Some(want), got) => failures.push(format!(
                    "{}: missed the prompt {want:?} (found {got:?})",
                    s.name
                )),
                (None, Some(got)) => {
                    alarms += 1;
                    failures.push(format!("{}: false alarm at {got:?}", s.name));
                }
                (None, None) => {}
            }
            if expect.is_some() {
                asked += 1;
            }
        }
        found += hits;
        expected += asked;
        if !s.interactive {
            boundaries += s.chunks.len().saturating_sub(1);
            boundary_alarms += r.after_writes.len();
            for got in &r.after_writes {
                failures.push(format!("{}: would alarm at {got:?}", s.name));
            }
        }
        println!(
            "{:<28} {:>8} {:>8} {:>6.1}% {:>8} {:>6.1}% {:>4}/{:<3} {:>4}/{:<4}",
            s.name,
            s.raw.len(),
            r.read_at_end.len(),
            ratio * 100.0,
            r.read_when_quiet.len(),
            eager * 100.0,
            kept,
            flagged.len(),
            hits,
            asked
        );
    }
    let precision = if detections == 0 {
        1.0
    } else {
        found as f64 / detections as f64
    };
    let recall = if expected == 0 {
        1.0
    } else {
        found as f64 / expected as f64
    };
    println!(
        "prompts: {found} of {expected} found, {alarms} false alarms in {idle_moments} other quiet moments: precision {precision:.3}, recall {recall:.3}; {boundary_alarms} alarms at {boundaries} write boundaries of the non-interactive sessions; error and warning lines kept: {flagged_kept} of {flagged_all}"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
