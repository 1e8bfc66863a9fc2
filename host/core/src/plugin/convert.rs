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
            sandbox: job.sandbox.as_ref().map(wit::Sandbox::from),
            placement: job.placement.clone(),
        }
    }
}

impl From<&crate::sandbox::Sandbox> for wit::Sandbox {
    fn from(s: &crate::sandbox::Sandbox) -> Self {
        use crate::sandbox::{FsAccess, NetAccess};
        wit::Sandbox {
            files: match s.fs {
                FsAccess::Full => wit::SandboxFiles::Full,
                FsAccess::WorkspaceWrite => wit::SandboxFiles::WorkspaceWrite,
                FsAccess::ReadOnly => wit::SandboxFiles::ReadOnly,
            },
            network: match &s.network {
                NetAccess::On => wit::SandboxNetwork::On,
                NetAccess::Off => wit::SandboxNetwork::Off,
                NetAccess::Ports(ports) => wit::SandboxNetwork::Ports(ports.clone()),
            },
        }
    }
}

impl From<&wit::Sandbox> for crate::sandbox::Sandbox {
    fn from(s: &wit::Sandbox) -> Self {
        use crate::sandbox::{FsAccess, NetAccess};
        crate::sandbox::Sandbox {
            fs: match s.files {
                wit::SandboxFiles::Full => FsAccess::Full,
                wit::SandboxFiles::WorkspaceWrite => FsAccess::WorkspaceWrite,
                wit::SandboxFiles::ReadOnly => FsAccess::ReadOnly,
            },
            network: match &s.network {
                wit::SandboxNetwork::On => NetAccess::On,
                wit::SandboxNetwork::Off => NetAccess::Off,
                wit::SandboxNetwork::Ports(ports) => NetAccess::Ports(ports.clone()),
            },
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
            registry::RegistryError::NoTerminal => wit::RegistryError::NoTerminal,
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
            control::OutputStream::Raw => wit::OutputStream::Raw,
            control::OutputStream::RawStderr => wit::OutputStream::RawStderr,
        }
    }
}

impl From<wit::OutputStream> for control::OutputStream {
    fn from(stream: wit::OutputStream) -> Self {
        match stream {
            wit::OutputStream::Stdout => control::OutputStream::Stdout,
            wit::OutputStream::Stderr => control::OutputStream::Stderr,
            wit::OutputStream::Raw => control::OutputStream::Raw,
            wit::OutputStream::RawStderr => control::OutputStream::RawStderr,
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
            control::WaitEnd::Prompt => wit::WaitEnd::Prompt,
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

// The plugin's public types from and to their WIT twins (see `types`).

use super::bindings::exports::harness::jobs::tools as tools_wit;
use super::types::{
    CompletionDelivery, ContentBlock, Extension, MountConfig, NoticeTransport, Profile,
    PromptSection, ToolAnnotations, ToolDefinition, UiCard,
};

impl From<&tools_wit::Config> for MountConfig {
    fn from(c: &tools_wit::Config) -> Self {
        MountConfig {
            profile: match c.profile {
                tools_wit::Profile::A => Profile::A,
                tools_wit::Profile::B => Profile::B,
                tools_wit::Profile::C => Profile::C,
            },
            wait_timeout_ms: c.wait_timeout_ms,
            max_wait_timeout_ms: c.max_wait_timeout_ms,
            completion_delivery: match c.completion_delivery {
                tools_wit::CompletionDelivery::Wakeup => CompletionDelivery::Wakeup,
                tools_wit::CompletionDelivery::Quiet => CompletionDelivery::Quiet,
            },
            max_consecutive_wakes: c.max_consecutive_wakes,
            max_result_bytes: c.max_result_bytes,
            suppress_completion_notice: c.suppress_completion_notice,
            extensions: c
                .extensions
                .iter()
                .map(|e| match e {
                    tools_wit::Extension::Ready => Extension::Ready,
                    tools_wit::Extension::Input => Extension::Input,
                    tools_wit::Extension::Log => Extension::Log,
                    tools_wit::Extension::Limits => Extension::Limits,
                    tools_wit::Extension::Ports => Extension::Ports,
                    tools_wit::Extension::Yield => Extension::Yield,
                    tools_wit::Extension::Sandbox => Extension::Sandbox,
                    tools_wit::Extension::Terminal => Extension::Terminal,
                    tools_wit::Extension::Runners => Extension::Runners,
                })
                .collect(),
            limits: crate::limits::JobLimits {
                timeout_ms: c.limits.timeout_ms,
                cpu_seconds: c.limits.cpu_seconds,
                memory_bytes: c.limits.memory_bytes,
                output_bytes: c.limits.output_bytes,
            },
            notice_transport: match c.notice_transport {
                tools_wit::NoticeTransport::Push => NoticeTransport::Push,
                tools_wit::NoticeTransport::Pull => NoticeTransport::Pull,
            },
            reports_disposed_owner: c.disposed_owner == tools_wit::DisposedOwner::Report,
            runners: c.runners.clone(),
        }
    }
}

impl From<tools_wit::ToolDefinition> for ToolDefinition {
    fn from(d: tools_wit::ToolDefinition) -> Self {
        let a = d.annotations;
        ToolDefinition {
            name: d.name,
            description: d.description,
            input_schema: d.input_schema,
            output_schema: d.output_schema,
            annotations: ToolAnnotations {
                title: a.title,
                read_only_hint: a.read_only_hint,
                destructive_hint: a.destructive_hint,
                idempotent_hint: a.idempotent_hint,
                open_world_hint: a.open_world_hint,
            },
        }
    }
}

impl From<tools_wit::UiCard> for UiCard {
    fn from(c: tools_wit::UiCard) -> Self {
        UiCard {
            title: c.title,
            kind: c.kind,
            raw_input: c.raw_input,
        }
    }
}

impl From<tools_wit::PromptSection> for PromptSection {
    fn from(p: tools_wit::PromptSection) -> Self {
        PromptSection {
            name: p.name,
            order: p.order,
            text: p.text,
        }
    }
}

impl From<ContentBlock> for tools_wit::ContentBlock {
    fn from(b: ContentBlock) -> Self {
        match b {
            ContentBlock::Text(t) => tools_wit::ContentBlock::Text(t),
            ContentBlock::Other(o) => tools_wit::ContentBlock::Other(o),
        }
    }
}

impl From<tools_wit::ContentBlock> for ContentBlock {
    fn from(b: tools_wit::ContentBlock) -> Self {
        match b {
            tools_wit::ContentBlock::Text(t) => ContentBlock::Text(t),
            tools_wit::ContentBlock::Other(o) => ContentBlock::Other(o),
        }
    }
}
