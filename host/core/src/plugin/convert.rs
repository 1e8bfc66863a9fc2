//! Conversions between the registry's types and the WIT types, in one place.

use super::bindings::harness::jobs::types as wit;
use crate::excerpt::ExcerptWindow;
use crate::registry;

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
