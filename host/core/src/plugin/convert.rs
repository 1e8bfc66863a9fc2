//! Conversions between the registry's types and the WIT types, in one place.

use super::bindings::harness::jobs::types as wit;
use crate::capture::ExcerptWindow;
use crate::registry::{self, control};

impl From<registry::JobStatus> for wit::JobStatus {
    fn from(status: registry::JobStatus) -> Self {
        match status {
            registry::JobStatus::Running => wit::JobStatus::Running,
            registry::JobStatus::Stopping => wit::JobStatus::Stopping,
            registry::JobStatus::Completed => wit::JobStatus::Completed,
            registry::JobStatus::Killed => wit::JobStatus::Killed,
            registry::JobStatus::Failed => wit::JobStatus::Failed,
        }
    }
}

impl From<&registry::JobSnapshot> for wit::JobSnapshot {
    fn from(job: &registry::JobSnapshot) -> Self {
        wit::JobSnapshot {
            id: job.id.clone(),
            kind: job.kind.clone(),
            label: job.label.clone(),
            status: job.status.into(),
            detail: job.detail.clone(),
            started_at: job.started_at,
            finished_at: job.finished_at,
            output_limit_bytes: job.output_limit_bytes,
            reported: job.reported,
        }
    }
}

impl From<registry::RegistryError> for wit::RegistryError {
    fn from(error: registry::RegistryError) -> Self {
        match error {
            registry::RegistryError::UnknownJob(id) => wit::RegistryError::UnknownJob(id),
            registry::RegistryError::ForeignJob(id) => wit::RegistryError::ForeignJob(id),
            // The host bounds every wait it runs for a guest, so this is never
            // produced on that path; other callers get the registry's own text.
            e @ registry::RegistryError::InvalidTimeout(_) => {
                wit::RegistryError::ProducerFailed(e.to_string())
            }
            registry::RegistryError::WaitAborted => wit::RegistryError::WaitAborted,
            registry::RegistryError::ProducerFailed(m) => wit::RegistryError::ProducerFailed(m),
            registry::RegistryError::InvalidPattern(m) => wit::RegistryError::InvalidPattern(m),
            registry::RegistryError::NoInput => wit::RegistryError::NoInput,
            registry::RegistryError::InputClosed => wit::RegistryError::InputClosed,
            registry::RegistryError::Unsupported(m) => wit::RegistryError::Unsupported(m),
        }
    }
}

impl From<registry::KillOutcome> for wit::KillOutcome {
    fn from(outcome: registry::KillOutcome) -> Self {
        match outcome {
            registry::KillOutcome::Requested => wit::KillOutcome::Requested,
            registry::KillOutcome::AlreadyFinished => wit::KillOutcome::AlreadyFinished,
        }
    }
}

impl From<wit::ExcerptWindow> for ExcerptWindow {
    fn from(window: wit::ExcerptWindow) -> Self {
        ExcerptWindow {
            whole_up_to: window.whole_up_to,
            head_bytes: window.head_bytes,
            tail_bytes: window.tail_bytes,
        }
    }
}

impl From<control::OutputStream> for wit::OutputStream {
    fn from(stream: control::OutputStream) -> Self {
        match stream {
            control::OutputStream::Stdout => wit::OutputStream::Stdout,
            control::OutputStream::Stderr => wit::OutputStream::Stderr,
        }
    }
}

impl From<wit::OutputStream> for control::OutputStream {
    fn from(stream: wit::OutputStream) -> Self {
        match stream {
            wit::OutputStream::Stdout => control::OutputStream::Stdout,
            wit::OutputStream::Stderr => control::OutputStream::Stderr,
        }
    }
}

impl From<control::OutputLine> for wit::OutputLine {
    fn from(line: control::OutputLine) -> Self {
        wit::OutputLine {
            stream: line.stream.into(),
            number: line.number,
            text: line.text,
        }
    }
}

impl From<control::LineMatch> for wit::LineMatch {
    fn from(m: control::LineMatch) -> Self {
        wit::LineMatch {
            line: m.line.into(),
            before: m.before.into_iter().map(Into::into).collect(),
        }
    }
}

impl From<control::WaitEnd> for wit::WaitEnd {
    fn from(end: control::WaitEnd) -> Self {
        match end {
            control::WaitEnd::Settled => wit::WaitEnd::Settled,
            control::WaitEnd::TimedOut => wit::WaitEnd::TimedOut,
            control::WaitEnd::Matched => wit::WaitEnd::Matched,
            control::WaitEnd::Quiet => wit::WaitEnd::Quiet,
        }
    }
}

impl From<wit::JobSignal> for control::JobSignal {
    fn from(signal: wit::JobSignal) -> Self {
        match signal {
            wit::JobSignal::Int => control::JobSignal::Int,
            wit::JobSignal::Term => control::JobSignal::Term,
            wit::JobSignal::Hup => control::JobSignal::Hup,
            wit::JobSignal::Kill => control::JobSignal::Kill,
            wit::JobSignal::Stop => control::JobSignal::Stop,
            wit::JobSignal::Cont => control::JobSignal::Cont,
        }
    }
}

impl From<wit::LineQuery> for control::LineQuery {
    fn from(query: wit::LineQuery) -> Self {
        match query {
            wit::LineQuery::Range(r) => control::LineQuery::Range {
                stream: r.stream.into(),
                start: r.start,
                count: r.count,
            },
            wit::LineQuery::Last(l) => control::LineQuery::Last {
                stream: l.stream.into(),
                count: l.count,
            },
            wit::LineQuery::Search(s) => control::LineQuery::Search {
                stream: s.stream.map(Into::into),
                pattern: s.pattern,
                context: s.context,
                max_matches: s.max_matches,
            },
        }
    }
}

impl From<control::StreamExtent> for wit::StreamExtent {
    fn from(e: control::StreamExtent) -> Self {
        wit::StreamExtent {
            stream: e.stream.into(),
            total_bytes: e.total_bytes,
            dropped_bytes: e.dropped_bytes,
            first_line: e.first_line,
            last_line: e.last_line,
        }
    }
}

impl From<control::ListeningPort> for wit::ListeningPort {
    fn from(p: control::ListeningPort) -> Self {
        wit::ListeningPort {
            address: p.address,
            port: p.port,
        }
    }
}
