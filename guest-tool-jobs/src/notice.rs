//! Completion-notice text and its UI summary.

use crate::caps::{NOTICE_TRUNCATED, head, tail};
use crate::config::{CompletionDelivery, Config};
use crate::model::JobSnapshot;
use crate::render::status_line;
use crate::wording::Wording;

/// Whether the owner is between turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentStatus {
    /// Between turns.
    Idle,
    /// In a turn.
    Running,
}

/// How a notice reaches its owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// Queued for the next step; never wakes.
    Inject,
    /// Queued for the next turn; wakes an idle owner and spends one wake.
    Followup,
}

/// The lane for a notice to an owned job's owner, or `None` when no notice is
/// due (the outcome was already observed, or the job has no owner).
///
/// `owner` is the owner's status and the wakes it has spent since a person last
/// wrote to it. Only a `wakeup` config wakes, only an idle owner, and only while
/// the budget lasts; everything else is injected.
pub fn delivery_lane(
    config: &Config,
    words: &Wording,
    job: &JobSnapshot,
    owner: Option<(AgentStatus, u64)>,
) -> Option<Lane> {
    let (status, spent) = owner?;
    if job.reported {
        return None;
    }
    // Profile B never wakes: "injection is durable context, not a wake-up".
    let wakes = words.rich_notices
        && config.completion_delivery == CompletionDelivery::Wakeup
        && status == AgentStatus::Idle
        && spent < config.max_consecutive_wakes;
    Some(if wakes { Lane::Followup } else { Lane::Inject })
}

/// Longest summary, in UTF-16 code units (a JavaScript string length).
pub const SUMMARY_LIMIT_UTF16: usize = 120;

/// The notice text for a settled job, bounded by its `output_limit_bytes`.
///
/// Priority when the cap bites: the id and the collection action first, then the
/// truncation marker, then the head of the kind, label and status.
pub fn notice_text(job: &JobSnapshot, words: &Wording) -> String {
    let prefix = format!("background {} {}", words.noun, job.id);
    let detail = format!(
        " ({}: {}) finished {}",
        job.kind,
        job.label,
        status_line(job)
    );
    let complete = format!(
        "{prefix}{detail}. Read its output with {}.",
        words.output_tool
    );
    let action = format!("\nDone; {}.", words.output_tool);
    let Some(cap) = job.output_limit_bytes else {
        return complete;
    };
    let cap = usize::try_from(cap).unwrap_or(usize::MAX);
    if complete.len() <= cap {
        return complete;
    }
    let fixed_len = prefix.len() + NOTICE_TRUNCATED.len() + action.len();
    if fixed_len <= cap {
        return format!(
            "{prefix}{}{NOTICE_TRUNCATED}{action}",
            head(&detail, cap - fixed_len)
        );
    }
    if prefix.len() + action.len() <= cap {
        return format!("{prefix}{action}");
    }
    if action.len() < cap {
        return format!("{}{action}", head(&prefix, cap - action.len()));
    }
    tail(&action, cap).to_owned()
}

/// `<kind> <label> <status line>`, at most 120 UTF-16 code units: a longer one keeps
/// its first 119 and ends with `…`.
pub fn notice_summary(job: &JobSnapshot) -> String {
    let full = format!("{} {} {}", job.kind, job.label, status_line(job));
    if full.encode_utf16().count() <= SUMMARY_LIMIT_UTF16 {
        return full;
    }
    let mut out = String::new();
    let mut units = 0;
    for ch in full.chars() {
        if units + ch.len_utf16() > SUMMARY_LIMIT_UTF16 - 1 {
            break;
        }
        units += ch.len_utf16();
        out.push(ch);
    }
    out.push('\u{2026}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::JobStatus;

    fn job(id: &str, kind: &str, label: &str, cap: Option<u64>) -> JobSnapshot {
        JobSnapshot {
            id: id.into(),
            kind: kind.into(),
            label: label.into(),
            status: JobStatus::Completed,
            detail: Some("d".repeat(1000)),
            started_at: 1,
            finished_at: Some(2),
            output_limit_bytes: cap,
            reported: false,
            sandbox: None,
            placement: None,
        }
    }

    #[test]
    fn lanes_follow_config_status_and_budget() {
        let mut j = job("bash-1", "bash", "x", None);
        let wakeup = Config::default();
        let quiet = Config {
            completion_delivery: CompletionDelivery::Quiet,
            ..Config::default()
        };
        let idle = Some((AgentStatus::Idle, 0));
        assert_eq!(
            crate::surface::delivery_lane(&wakeup, &j, idle),
            Some(Lane::Followup)
        );
        assert_eq!(
            crate::surface::delivery_lane(&quiet, &j, idle),
            Some(Lane::Inject)
        );
        assert_eq!(
            crate::surface::delivery_lane(&wakeup, &j, Some((AgentStatus::Running, 0))),
            Some(Lane::Inject)
        );
        assert_eq!(
            crate::surface::delivery_lane(&wakeup, &j, Some((AgentStatus::Idle, 3))),
            Some(Lane::Inject)
        );
        assert_eq!(crate::surface::delivery_lane(&wakeup, &j, None), None);
        j.reported = true;
        assert_eq!(crate::surface::delivery_lane(&wakeup, &j, idle), None);
    }

    #[test]
    fn tier_one_exact_fit_at_the_pty_minimum() {
        let j = job("pty-send-100", "pty-send", "s: x", Some(64));
        assert_eq!(
            notice_text(&j, &crate::wording::A),
            "background job pty-send-100\n[notice truncated]\nDone; job_output."
        );
    }

    #[test]
    fn summary_keeps_119_units_and_an_ellipsis() {
        let j = job("subagent-1", "subagent", &"x".repeat(1000), Some(61));
        assert_eq!(
            notice_summary(&j),
            format!("subagent {}\u{2026}", "x".repeat(110))
        );
    }

    #[test]
    fn summary_never_splits_a_surrogate_pair() {
        let j = job("a-1", "k", &"😀".repeat(100), None);
        let s = notice_summary(&j);
        assert!(s.encode_utf16().count() <= 120);
        assert!(s.ends_with('\u{2026}'));
    }
}
