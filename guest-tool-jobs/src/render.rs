//! Model-visible text for reads, lists, kills and errors.

use crate::caps::{OUTPUT_TRUNCATED, fit_with_suffix};
use crate::model::{JobSnapshot, RegistryError, js_number};
use crate::wording::Wording;

/// Shown in place of an empty read.
pub const NO_NEW_OUTPUT: &str = "(no new output)";

/// `[status: <status>]` or `[status: <status>, <detail>]`.
pub fn status_line(job: &JobSnapshot) -> String {
    match &job.detail {
        Some(detail) => format!("[status: {}, {detail}]", job.status.as_str()),
        None => format!("[status: {}]", job.status.as_str()),
    }
}

/// The `job_output` text: the read (or `(no new output)`), then the status line on
/// its own line, kept within `max_bytes` by cutting the head of the output.
pub fn read_text(text: &str, job: &JobSnapshot, max_bytes: Option<u64>) -> String {
    read_text_noted(text, job, max_bytes, None)
}

/// [`read_text`] with `note` on its own line just above the status line
/// (within the same bound).
pub fn read_text_noted(
    text: &str,
    job: &JobSnapshot,
    max_bytes: Option<u64>,
    note: Option<&str>,
) -> String {
    let body = if text.is_empty() { NO_NEW_OUTPUT } else { text };
    // One trailing newline belongs to the output; the status line supplies its own.
    let content = body.strip_suffix('\n').unwrap_or(body);
    let suffix = match note {
        Some(note) => format!("\n{note}\n{}", status_line(job)),
        None => format!("\n{}", status_line(job)),
    };
    fit_with_suffix(content, &suffix, max_bytes, OUTPUT_TRUNCATED)
}

/// One `job_list` row: `<id> [<kind>] <status> — <label>`.
pub fn list_row(job: &JobSnapshot) -> String {
    format!(
        "{} [{}] {} \u{2014} {}",
        job.id,
        job.kind,
        job.status.as_str(),
        job.label
    )
}

/// The whole list text: `(no background jobs)` (or `tasks`) when empty. A list
/// that was bounded (see [`crate::model::bounded_list`]) ends with
/// `(<N> older jobs not shown)`.
pub fn list_text(jobs: &[JobSnapshot], left_out: usize, words: &Wording) -> String {
    if jobs.is_empty() {
        return format!("(no background {}s)", words.noun);
    }
    let mut text = jobs.iter().map(list_row).collect::<Vec<_>>().join("\n");
    if left_out > 0 {
        let noun = words.noun;
        let plural = if left_out == 1 { "" } else { "s" };
        text.push_str(&format!("\n({left_out} older {noun}{plural} not shown)"));
    }
    text
}

/// The message (without `Error: `) for a registry failure.
pub fn registry_error_message(error: &RegistryError, words: &Wording) -> String {
    let noun = words.noun;
    match error {
        RegistryError::UnknownJob(id) => format!("unknown {noun} {id}"),
        RegistryError::ForeignJob(id) => format!("{noun} {id} belongs to another session"),
        RegistryError::InvalidTimeout(value) if words.timeout_error_names_bound => format!(
            "invalid wait timeout: expected a positive number of milliseconds no greater than 2147483647, got {}",
            js_number(*value)
        ),
        RegistryError::InvalidTimeout(value) => format!(
            "invalid wait timeout: expected a positive number of milliseconds, got {}",
            js_number(*value)
        ),
        RegistryError::WaitAborted => "wait aborted".to_owned(),
        RegistryError::ProducerFailed(message) => message.clone(),
        RegistryError::InvalidPattern(message) => format!("invalid pattern: {message}"),
        RegistryError::NoInput => format!("the {noun} was started without open input"),
        RegistryError::InputClosed => format!("the input of the {noun} is closed"),
        RegistryError::Unsupported(what) => {
            format!("this host does not support the \"{what}\" extension")
        }
        RegistryError::NoTerminal => format!("the {noun} was started without a terminal"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::JobStatus;

    fn job(status: JobStatus, detail: Option<&str>) -> JobSnapshot {
        JobSnapshot {
            id: "bash-1".into(),
            kind: "bash".into(),
            label: "sleep 60".into(),
            status,
            detail: detail.map(Into::into),
            started_at: 1,
            finished_at: status.is_terminal().then_some(2),
            output_limit_bytes: None,
            reported: false,
            sandbox: None,
            placement: None,
        }
    }

    #[test]
    fn status_lines_with_and_without_detail() {
        assert_eq!(
            status_line(&job(JobStatus::Running, None)),
            "[status: running]"
        );
        assert_eq!(
            status_line(&job(JobStatus::Completed, Some("exit code: 0"))),
            "[status: completed, exit code: 0]"
        );
    }

    #[test]
    fn read_never_doubles_the_newline() {
        let j = job(JobStatus::Running, None);
        assert_eq!(
            read_text("line one\n", &j, None),
            "line one\n[status: running]"
        );
        assert_eq!(
            read_text("", &j, None),
            "(no new output)\n[status: running]"
        );
        assert_eq!(read_text("a\n\n", &j, None), "a\n\n[status: running]");
    }

    #[test]
    fn js_numbers() {
        assert_eq!(js_number(0.0), "0");
        assert_eq!(js_number(-0.0), "0");
        assert_eq!(js_number(-5.0), "-5");
        assert_eq!(js_number(1.5), "1.5");
        assert_eq!(js_number(2147483648.0), "2147483648");
        assert_eq!(js_number(f64::NAN), "null");
        assert_eq!(js_number(1e21), "1e+21");
    }
}
