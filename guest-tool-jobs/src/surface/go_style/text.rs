//! How the Go plugin writes things: its state words, `time.Duration`'s
//! format, and a result that loses its middle past `maxResultBytes` (its
//! `truncateMiddle` and `truncateBytes`).

use crate::caps::{head, tail};
use crate::model::{ExcerptWindow, JobSnapshot, JobStatus};

/// Bytes kept back from the result budget for the truncation marker.
const MARKER_RESERVE: u64 = 64;
/// Appended to a head when the budget is too small for a head and a tail.
const SHORT_MARKER: &str = "\n\u{2026}[truncated]";

/// The Go state word for a registry status: a job that is stopping is still
/// running, a completed one succeeded, a killed one was cancelled.
pub fn state(status: JobStatus) -> &'static str {
    match status {
        JobStatus::Running | JobStatus::Stopping => "running",
        JobStatus::Completed => "succeeded",
        JobStatus::Killed => "cancelled",
        JobStatus::Failed => "failed",
    }
}

/// A whole number of milliseconds as Go's `time.Duration.String` writes it:
/// `0s`, `980ms`, `4.21s`, `1m1.4s`, `2m0s`, `1h0m0s`.
pub fn go_duration(ms: u64) -> String {
    if ms == 0 {
        return "0s".to_owned();
    }
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let hours = ms / 3_600_000;
    let minutes = ms / 60_000 % 60;
    let seconds = ms / 1000 % 60;
    let millis = ms % 1000;
    let seconds = if millis == 0 {
        seconds.to_string()
    } else {
        let fraction = format!("{millis:03}");
        format!("{seconds}.{}", fraction.trim_end_matches('0'))
    };
    if hours > 0 {
        format!("{hours}h{minutes}m{seconds}s")
    } else if minutes > 0 {
        format!("{minutes}m{seconds}s")
    } else {
        format!("{seconds}s")
    }
}

/// How long the job ran: to its settlement, or until `now` while it runs.
pub(super) fn duration(job: &JobSnapshot, now: u64) -> String {
    let end = job.finished_at.unwrap_or(now);
    go_duration(end.saturating_sub(job.started_at))
}

/// The excerpt a result of at most `max` bytes needs: the whole when it fits;
/// otherwise about two thirds of the budget left after the marker's reserve from
/// the head and the rest from the tail (plus the few bytes a head cut back to a
/// character boundary gives up, which the tail may use), or only a head when
/// that budget is below 2 bytes: Go's `truncateBytes`, which keeps what the
/// short marker leaves of `max` (so the whole is at most `max` bytes), or all
/// of `max` when the marker alone is not shorter than it.
pub fn result_window(max: u64) -> ExcerptWindow {
    let budget = max.saturating_sub(MARKER_RESERVE);
    if budget < 2 {
        let marker = SHORT_MARKER.len() as u64;
        return ExcerptWindow {
            whole_up_to: max,
            head_bytes: if max > marker { max - marker } else { max },
            tail_bytes: 0,
        };
    }
    let head_bytes = budget * 2 / 3;
    ExcerptWindow {
        whole_up_to: max,
        head_bytes,
        tail_bytes: budget - head_bytes + MAX_BOUNDARY_SLACK,
    }
}

/// The most bytes a cut back to a UTF-8 character boundary gives up.
const MAX_BOUNDARY_SLACK: u64 = 3;

/// The head, the marker and the tail of a result of more than `max` bytes
/// whose middle was left out. As in the Go plugin, the tail gets whatever the
/// head left of the budget, so `tail_text` may be cut further here; `omitted`
/// counts the bytes between `head` and `tail_text`. `head_cut`: `head` is the
/// text's start cut back to a character boundary (possibly to nothing), not
/// output the producer no longer holds.
pub(super) fn joined(
    head: &str,
    head_cut: bool,
    omitted: u64,
    tail_text: &str,
    max: u64,
) -> String {
    let budget = max.saturating_sub(MARKER_RESERVE);
    if budget < 2 {
        return format!("{head}{SHORT_MARKER}");
    }
    // An empty head that is not a cut is output the producer no longer holds:
    // where its cut would have fallen is unknown, so the tail keeps its own share.
    let head_len = if head.is_empty() && !head_cut {
        to_usize(result_window(max).head_bytes)
    } else {
        head.len()
    };
    let room = to_usize(budget).saturating_sub(head_len);
    let kept = tail(tail_text, room);
    let omitted = omitted + (tail_text.len() - kept.len()) as u64;
    format!("{head}\n\u{2026}[{omitted} bytes truncated]\u{2026}\n{kept}")
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// `text` bounded to `max` bytes by leaving out its middle. Cuts fall on
/// character boundaries; the tail uses what the head's cut gave up.
pub fn truncate_middle(text: &str, max: u64) -> String {
    if text.len() as u64 <= max {
        return text.to_owned();
    }
    let window = result_window(max);
    let kept_head = head(text, to_usize(window.head_bytes));
    let rest = &text[kept_head.len()..];
    joined(kept_head, true, 0, rest, max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_go() {
        assert_eq!(go_duration(0), "0s");
        assert_eq!(go_duration(980), "980ms");
        assert_eq!(go_duration(1000), "1s");
        assert_eq!(go_duration(4210), "4.21s");
        assert_eq!(go_duration(61_400), "1m1.4s");
        assert_eq!(go_duration(120_000), "2m0s");
        assert_eq!(go_duration(3_600_000), "1h0m0s");
        assert_eq!(go_duration(3_723_005), "1h2m3.005s");
    }

    #[test]
    fn middle_truncation_keeps_two_thirds_of_the_head() {
        let text = "x".repeat(100_000);
        let cut = truncate_middle(&text, 200);
        assert!(cut.len() <= 200, "{}", cut.len());
        assert_eq!(
            cut,
            format!(
                "{}\n\u{2026}[99864 bytes truncated]\u{2026}\n{}",
                "x".repeat(90),
                "x".repeat(46)
            )
        );
        assert_eq!(truncate_middle("short", 200), "short");
    }

    #[test]
    fn middle_truncation_never_splits_a_character() {
        let text = "é".repeat(1000);
        let cut = truncate_middle(&text, 201);
        assert!(cut.len() <= 201);
        // 137 bytes of budget: a head of 91 and a tail of 46, both cut back to
        // whole two-byte characters.
        assert!(cut.starts_with(&"é".repeat(45)));
        assert!(cut.contains("[1864 bytes truncated]"), "{cut}");
    }

    #[test]
    fn the_tail_uses_the_bytes_the_head_gave_up() {
        // 138 bytes of budget: the head's 92 come back to 90 (30 three-byte
        // characters), so the tail may take 48 (16 characters), not 46 (15).
        let text = "界".repeat(1000);
        let cut = truncate_middle(&text, 202);
        assert_eq!(
            cut,
            format!(
                "{}\n\u{2026}[2862 bytes truncated]\u{2026}\n{}",
                "界".repeat(30),
                "界".repeat(16)
            )
        );
        // The same through an excerpt the host cut with `result_window`.
        let window = result_window(202);
        let host_head = head(&text, window.head_bytes as usize);
        let host_tail = tail(&text, window.tail_bytes as usize);
        let omitted = (text.len() - host_head.len() - host_tail.len()) as u64;
        assert_eq!(joined(host_head, true, omitted, host_tail, 202), cut);
    }

    #[test]
    fn a_tiny_budget_keeps_what_the_short_marker_leaves() {
        // Go's truncateBytes: the whole stays within the bound...
        let cut = truncate_middle(&"y".repeat(100), 40);
        assert_eq!(cut, format!("{}\n\u{2026}[truncated]", "y".repeat(25)));
        assert_eq!(cut.len(), 40);
        // ...cut back to a character boundary (20 - 15 = 5 bytes: one 界)...
        assert_eq!(
            truncate_middle(&"界".repeat(10), 20),
            "界\n\u{2026}[truncated]"
        );
        // ...unless the marker alone is not shorter than the bound.
        assert_eq!(truncate_middle("yy", 1), "y\n\u{2026}[truncated]");
        assert_eq!(
            truncate_middle(&"y".repeat(20), 15),
            format!("{}\n\u{2026}[truncated]", "y".repeat(15))
        );
        assert_eq!(
            truncate_middle(&"y".repeat(20), 16),
            "y\n\u{2026}[truncated]"
        );
        // A head is never cut inside a character, even when that leaves none.
        assert_eq!(truncate_middle("界界", 1), "\n\u{2026}[truncated]");
    }

    /// Go's `truncateMiddle` and `truncateBytes`, written out from the Go
    /// source for this comparison (`s[:budget]` backed off to a rune start).
    fn go_truncate_middle(s: &str, max: usize) -> String {
        fn go_truncate_bytes(s: &str, max: usize) -> String {
            if s.len() <= max {
                return s.to_owned();
            }
            let marker = "\n\u{2026}[truncated]";
            let mut budget = max as isize - marker.len() as isize;
            if budget <= 0 {
                budget = max as isize;
            }
            let mut budget = budget as usize;
            while budget > 0 && !s.is_char_boundary(budget) {
                budget -= 1;
            }
            format!("{}{marker}", &s[..budget])
        }
        if s.len() <= max {
            return s.to_owned();
        }
        let budget = max as isize - 64;
        if budget < 2 {
            return go_truncate_bytes(s, max);
        }
        let budget = budget as usize;
        let mut head = budget * 2 / 3;
        while head > 0 && !s.is_char_boundary(head) {
            head -= 1;
        }
        let mut start = s.len() - (budget - head);
        while start < s.len() && !s.is_char_boundary(start) {
            start += 1;
        }
        format!(
            "{}\n\u{2026}[{} bytes truncated]\u{2026}\n{}",
            &s[..head],
            start - head,
            &s[start..]
        )
    }

    #[test]
    fn every_bound_from_1_to_200_matches_go() {
        for text in [
            "y".repeat(300),
            "é".repeat(150),
            "界".repeat(100),
            "a😀".repeat(60),
        ] {
            for max in 1..=200 {
                assert_eq!(
                    truncate_middle(&text, max as u64),
                    go_truncate_middle(&text, max),
                    "{max} bytes of {:?}",
                    &text[..8]
                );
            }
        }
    }
}
