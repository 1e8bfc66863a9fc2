//! The wasm export shim: converts between the WIT bindings and the plain logic.
//!
//! (Over 500 lines: one conversion for each WIT type in each direction, and
//! nothing else; split, the conversions of one record would live apart.)

use crate::config::{
    CompletionDelivery as PlainDelivery, Config as PlainConfig, Extensions as PlainExtensions,
    JobLimits as PlainLimits, Profile as PlainProfile, parse_config,
};
use crate::model::{self, JobsView};
use crate::{model as logic, notice, start, surface};

wit_bindgen::generate!({
    world: "tool-jobs",
    path: "../wit",
});

use exports::harness::jobs::notices::{self, AgentStatus, Delivery, Lane, Notice, OwnerState};
use exports::harness::jobs::tools::{
    self, CallOutcome, CompletionDelivery, Config, ContentBlock, DisposedOwner, Extension,
    JobLimits, NoticeTransport, OwnerScope, Profile, PromptSection, Resources, StartError,
    StartMade, StartRequest, ToolAnnotations, ToolDefinition, ToolResult, UiCard, WaitRequest,
};
use harness::jobs::clock::now_ms;
use harness::jobs::diag::{Level, log};
use harness::jobs::types::{
    ExcerptWindow, JobSignal, JobSnapshot, JobStatus, KillOutcome, LineCount, LineQuery, LineRange,
    LineSearch, OutputLine, OutputStream, RegistryError, Sandbox, SandboxFiles, SandboxNetwork,
    TerminalSize, WaitEnd, WaitUntil, Waited,
};

struct Component;

export!(Component);

/// Routes panic messages to the host's log; wasm32-unknown-unknown has no stderr.
fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            log(Level::Error, &format!("guest panic: {info}"));
        }));
    });
}

fn status_from(status: JobStatus) -> model::JobStatus {
    match status {
        JobStatus::Running => model::JobStatus::Running,
        JobStatus::Stopping => model::JobStatus::Stopping,
        JobStatus::Completed => model::JobStatus::Completed,
        JobStatus::Killed => model::JobStatus::Killed,
        JobStatus::Failed => model::JobStatus::Failed,
    }
}

fn snapshot_from(job: JobSnapshot) -> model::JobSnapshot {
    model::JobSnapshot {
        id: job.id,
        kind: job.kind,
        label: model::bounded_label(job.label),
        status: status_from(job.status),
        detail: job.detail,
        started_at: job.started_at,
        finished_at: job.finished_at,
        output_limit_bytes: job.output_limit_bytes,
        reported: job.reported,
        sandbox: job.sandbox.map(sandbox_from),
        placement: job.placement,
    }
}

fn sandbox_from(s: Sandbox) -> model::Sandbox {
    model::Sandbox {
        files: match s.files {
            SandboxFiles::Full => model::SandboxFiles::Full,
            SandboxFiles::WorkspaceWrite => model::SandboxFiles::WorkspaceWrite,
            SandboxFiles::ReadOnly => model::SandboxFiles::ReadOnly,
        },
        network: match s.network {
            SandboxNetwork::On => model::SandboxNetwork::On,
            SandboxNetwork::Off => model::SandboxNetwork::Off,
            SandboxNetwork::Ports(ports) => model::SandboxNetwork::Ports(ports),
        },
    }
}

fn sandbox_to(s: model::Sandbox) -> Sandbox {
    Sandbox {
        files: match s.files {
            model::SandboxFiles::Full => SandboxFiles::Full,
            model::SandboxFiles::WorkspaceWrite => SandboxFiles::WorkspaceWrite,
            model::SandboxFiles::ReadOnly => SandboxFiles::ReadOnly,
        },
        network: match s.network {
            model::SandboxNetwork::On => SandboxNetwork::On,
            model::SandboxNetwork::Off => SandboxNetwork::Off,
            model::SandboxNetwork::Ports(ports) => SandboxNetwork::Ports(ports),
        },
    }
}

fn error_from(error: RegistryError) -> model::RegistryError {
    match error {
        RegistryError::UnknownJob(id) => model::RegistryError::UnknownJob(id),
        RegistryError::ForeignJob(id) => model::RegistryError::ForeignJob(id),
        RegistryError::WaitAborted => model::RegistryError::WaitAborted,
        RegistryError::ProducerFailed(m) => model::RegistryError::ProducerFailed(m),
        RegistryError::InvalidPattern(m) => model::RegistryError::InvalidPattern(m),
        RegistryError::NoInput => model::RegistryError::NoInput,
        RegistryError::InputClosed => model::RegistryError::InputClosed,
        RegistryError::Unsupported(m) => model::RegistryError::Unsupported(m),
        RegistryError::NoTerminal => model::RegistryError::NoTerminal,
    }
}

fn stream_from(stream: OutputStream) -> model::OutputStream {
    match stream {
        OutputStream::Stdout => model::OutputStream::Stdout,
        OutputStream::Stderr => model::OutputStream::Stderr,
        OutputStream::Raw => model::OutputStream::Raw,
        OutputStream::RawStderr => model::OutputStream::RawStderr,
    }
}

fn stream_to(stream: model::OutputStream) -> OutputStream {
    match stream {
        model::OutputStream::Stdout => OutputStream::Stdout,
        model::OutputStream::Stderr => OutputStream::Stderr,
        model::OutputStream::Raw => OutputStream::Raw,
        model::OutputStream::RawStderr => OutputStream::RawStderr,
    }
}

fn line_from(line: OutputLine) -> model::OutputLine {
    model::OutputLine {
        stream: stream_from(line.stream),
        number: line.number,
        text: line.text,
    }
}

fn waited_from(waited: Waited) -> model::WaitOutcome {
    model::WaitOutcome {
        job: snapshot_from(waited.job),
        end: match waited.end {
            WaitEnd::Settled => model::WaitEnd::Settled,
            WaitEnd::TimedOut => model::WaitEnd::TimedOut,
            WaitEnd::Matched => model::WaitEnd::Matched,
            WaitEnd::Quiet => model::WaitEnd::Quiet,
            WaitEnd::Prompt => model::WaitEnd::Prompt,
        },
        matched: waited.matched.map(|m| model::LineMatch {
            line: line_from(m.line),
            before: m.before.into_iter().map(line_from).collect(),
        }),
        prompt: waited.prompt,
    }
}

/// The host's capability, seen through the plain trait.
struct Scope<'a>(&'a OwnerScope);

impl JobsView for Scope<'_> {
    fn list_jobs(&self) -> Vec<model::JobSnapshot> {
        self.0.list_jobs().into_iter().map(snapshot_from).collect()
    }

    fn get(&self, id: &str) -> Result<model::JobSnapshot, model::RegistryError> {
        self.0.get(id).map(snapshot_from).map_err(error_from)
    }

    fn read(&self, id: &str) -> Result<(String, model::JobSnapshot), model::RegistryError> {
        self.0
            .read(id)
            .map(|r| (r.text, snapshot_from(r.job)))
            .map_err(error_from)
    }

    fn kill(
        &self,
        id: &str,
        reason: Option<&str>,
    ) -> Result<model::KillOutcome, model::RegistryError> {
        self.0
            .kill(id, reason)
            .map(|o| match o {
                KillOutcome::Requested => model::KillOutcome::Requested,
                KillOutcome::AlreadyFinished => model::KillOutcome::AlreadyFinished,
            })
            .map_err(error_from)
    }

    fn output(
        &self,
        id: &str,
        window: model::ExcerptWindow,
    ) -> Result<model::Excerpt, model::RegistryError> {
        let window = ExcerptWindow {
            whole_up_to: window.whole_up_to,
            head_bytes: window.head_bytes,
            tail_bytes: window.tail_bytes,
        };
        self.0
            .output(id, window)
            .map(|e| model::Excerpt {
                head: e.head,
                tail: e.tail,
                omitted_bytes: e.omitted_bytes,
                job: snapshot_from(e.job),
            })
            .map_err(error_from)
    }

    fn write_input(&self, id: &str, data: &str, close: bool) -> Result<u64, model::RegistryError> {
        self.0.write_input(id, data, close).map_err(error_from)
    }

    fn signal(&self, id: &str, signal: model::JobSignal) -> Result<(), model::RegistryError> {
        let signal = match signal {
            model::JobSignal::Int => JobSignal::Int,
            model::JobSignal::Term => JobSignal::Term,
            model::JobSignal::Hup => JobSignal::Hup,
            model::JobSignal::Kill => JobSignal::Kill,
            model::JobSignal::Stop => JobSignal::Stop,
            model::JobSignal::Cont => JobSignal::Cont,
        };
        self.0.signal(id, signal).map_err(error_from)
    }

    fn lines(
        &self,
        id: &str,
        query: &model::LineQuery,
    ) -> Result<model::LinePage, model::RegistryError> {
        let query = match query {
            model::LineQuery::Range {
                stream,
                start,
                count,
            } => LineQuery::Range(LineRange {
                stream: stream_to(*stream),
                start: *start,
                count: *count,
            }),
            model::LineQuery::Last { stream, count } => LineQuery::Last(LineCount {
                stream: stream_to(*stream),
                count: *count,
            }),
            model::LineQuery::Search {
                stream,
                pattern,
                context,
                max_matches,
            } => LineQuery::Search(LineSearch {
                stream: stream.map(stream_to),
                pattern: pattern.clone(),
                context: *context,
                max_matches: *max_matches,
            }),
        };
        self.0
            .lines(id, &query)
            .map(|page| model::LinePage {
                lines: page.lines.into_iter().map(line_from).collect(),
                hits: page.hits,
                total_matches: page.total_matches,
                extents: page
                    .extents
                    .into_iter()
                    .map(|e| model::StreamExtent {
                        stream: stream_from(e.stream),
                        total_bytes: e.total_bytes,
                        dropped_bytes: e.dropped_bytes,
                        first_line: e.first_line,
                        last_line: e.last_line,
                    })
                    .collect(),
                stopped: page.stopped.map(|s| (stream_from(s.stream), s.line)),
                job: snapshot_from(page.job),
            })
            .map_err(error_from)
    }

    fn ports(&self, id: &str) -> Result<Vec<model::ListeningPort>, model::RegistryError> {
        self.0
            .ports(id)
            .map(|ports| {
                ports
                    .into_iter()
                    .map(|p| model::ListeningPort {
                        address: p.address,
                        port: p.port,
                    })
                    .collect()
            })
            .map_err(error_from)
    }

    fn resize(&self, id: &str, size: model::TerminalSize) -> Result<(), model::RegistryError> {
        self.0.resize(id, size_to(size)).map_err(error_from)
    }

    fn screen(&self, id: &str) -> Result<model::TerminalScreen, model::RegistryError> {
        self.0
            .screen(id)
            .map(|s| model::TerminalScreen {
                size: size_from(s.size),
                lines: s.lines,
                cursor_row: s.cursor_row,
                cursor_col: s.cursor_col,
                alternate: s.alternate,
                job: snapshot_from(s.job),
            })
            .map_err(error_from)
    }

    fn now_ms(&self) -> u64 {
        now_ms()
    }

    fn log_info(&self, message: &str) {
        log(Level::Info, message);
    }
}

fn size_from(size: TerminalSize) -> model::TerminalSize {
    model::TerminalSize {
        rows: size.rows,
        cols: size.cols,
    }
}

fn size_to(size: model::TerminalSize) -> TerminalSize {
    TerminalSize {
        rows: size.rows,
        cols: size.cols,
    }
}

fn config_from(config: Config) -> PlainConfig {
    PlainConfig {
        profile: match config.profile {
            Profile::A => PlainProfile::A,
            Profile::B => PlainProfile::B,
            Profile::C => PlainProfile::C,
        },
        wait_timeout_ms: config.wait_timeout_ms,
        max_wait_timeout_ms: config.max_wait_timeout_ms,
        completion_delivery: match config.completion_delivery {
            CompletionDelivery::Wakeup => PlainDelivery::Wakeup,
            CompletionDelivery::Quiet => PlainDelivery::Quiet,
        },
        max_consecutive_wakes: config.max_consecutive_wakes,
        max_result_bytes: config.max_result_bytes,
        suppress_completion_notice: config.suppress_completion_notice,
        extensions: {
            let mut set = PlainExtensions::default();
            for e in config.extensions {
                match e {
                    Extension::Ready => set.ready = true,
                    Extension::Input => set.input = true,
                    Extension::Log => set.log = true,
                    Extension::Limits => set.limits = true,
                    Extension::Ports => set.ports = true,
                    Extension::Yield => set.yields = true,
                    Extension::Sandbox => set.sandbox = true,
                    Extension::Terminal => set.terminal = true,
                    Extension::Runners => set.runners = true,
                }
            }
            set
        },
        limits: limits_from(config.limits),
        sandbox: config.sandbox.map(sandbox_from),
        render_output: config.render_output,
        runners: config.runners,
    }
}

fn resources_from(r: Resources) -> model::Resources {
    model::Resources {
        cpus: r.cpus,
        gpus: r.gpus,
        memory_bytes: r.memory_bytes,
        custom: r.custom,
    }
}

fn resources_to(r: model::Resources) -> Resources {
    Resources {
        cpus: r.cpus,
        gpus: r.gpus,
        memory_bytes: r.memory_bytes,
        custom: r.custom,
    }
}

fn limits_from(limits: JobLimits) -> PlainLimits {
    PlainLimits {
        timeout_ms: limits.timeout_ms,
        cpu_seconds: limits.cpu_seconds,
        memory_bytes: limits.memory_bytes,
        output_bytes: limits.output_bytes,
    }
}

fn limits_to(limits: PlainLimits) -> JobLimits {
    JobLimits {
        timeout_ms: limits.timeout_ms,
        cpu_seconds: limits.cpu_seconds,
        memory_bytes: limits.memory_bytes,
        output_bytes: limits.output_bytes,
    }
}

fn annotations_to(a: model::ToolAnnotations) -> ToolAnnotations {
    ToolAnnotations {
        title: a.title,
        read_only_hint: a.read_only,
        destructive_hint: a.destructive,
        idempotent_hint: a.idempotent,
        open_world_hint: a.open_world,
    }
}

impl tools::Guest for Component {
    fn configure(config_json: String) -> Result<Config, String> {
        install_panic_hook();
        let c = parse_config(&config_json)?;
        Ok(Config {
            profile: match c.profile {
                PlainProfile::A => Profile::A,
                PlainProfile::B => Profile::B,
                PlainProfile::C => Profile::C,
            },
            wait_timeout_ms: c.wait_timeout_ms,
            max_wait_timeout_ms: c.max_wait_timeout_ms,
            completion_delivery: match c.completion_delivery {
                PlainDelivery::Wakeup => CompletionDelivery::Wakeup,
                PlainDelivery::Quiet => CompletionDelivery::Quiet,
            },
            max_consecutive_wakes: c.max_consecutive_wakes,
            max_result_bytes: c.max_result_bytes,
            suppress_completion_notice: c.suppress_completion_notice,
            extensions: [
                (c.extensions.ready, Extension::Ready),
                (c.extensions.input, Extension::Input),
                (c.extensions.log, Extension::Log),
                (c.extensions.limits, Extension::Limits),
                (c.extensions.ports, Extension::Ports),
                (c.extensions.yields, Extension::Yield),
                (c.extensions.sandbox, Extension::Sandbox),
                (c.extensions.terminal, Extension::Terminal),
                (c.extensions.runners, Extension::Runners),
            ]
            .into_iter()
            .filter_map(|(on, e)| on.then_some(e))
            .collect(),
            limits: limits_to(c.limits),
            // Profile C's notices are pulled at each step (the Go plugin's
            // drain); A and B push theirs as jobs settle.
            notice_transport: match c.profile {
                PlainProfile::C => NoticeTransport::Pull,
                PlainProfile::A | PlainProfile::B => NoticeTransport::Push,
            },
            // Profile B's delivery drops a notice for an owner torn down
            // meanwhile without a word; A reports it.
            disposed_owner: match c.profile {
                PlainProfile::B => DisposedOwner::Ignore,
                PlainProfile::A | PlainProfile::C => DisposedOwner::Report,
            },
            sandbox: c.sandbox.map(sandbox_to),
            render_output: c.render_output,
            runners: c.runners,
        })
    }

    fn start_tool(config: Config) -> ToolDefinition {
        install_panic_hook();
        let tool = start::definition(&config_from(config));
        ToolDefinition {
            name: start::START_TOOL.to_owned(),
            description: tool.description,
            input_schema: to_json(&tool.input_schema),
            output_schema: Some(to_json(&tool.output_schema)),
            annotations: annotations_to(tool.annotations),
        }
    }

    fn check_start(
        config: Config,
        args_json: String,
        max_command_bytes: u64,
    ) -> Result<StartRequest, ToolResult> {
        install_panic_hook();
        start::check(&config_from(config), &args_json, max_command_bytes)
            .map(|r| StartRequest {
                command: r.command,
                workdir: r.workdir,
                description: r.description,
                stdin: r.stdin,
                name: r.name,
                limits: limits_to(r.limits),
                yield_ms: r.yield_ms,
                sandbox: r.sandbox.map(sandbox_to),
                tty: r.tty.map(size_to),
                render: r.render,
                runner: r.runner,
                resources: r.resources.map(resources_to),
            })
            .map_err(result_to)
    }

    fn started(
        config: Config,
        request: StartRequest,
        made: Result<StartMade, StartError>,
    ) -> CallOutcome {
        install_panic_hook();
        let request = start::StartRequest {
            command: request.command,
            workdir: request.workdir,
            description: request.description,
            stdin: request.stdin,
            name: request.name,
            limits: limits_from(request.limits),
            yield_ms: request.yield_ms,
            sandbox: request.sandbox.map(sandbox_from),
            tty: request.tty.map(size_from),
            render: request.render,
            runner: request.runner,
            resources: request.resources.map(resources_from),
        };
        let made = match made {
            Ok(StartMade::New(id)) => Ok(start::StartMade::New(id)),
            Ok(StartMade::Existing(id)) => Ok(start::StartMade::Existing(id)),
            Err(StartError::NoController) => Err(start::StartError::NoController),
            Err(StartError::StaleOwner(s)) => Err(start::StartError::StaleOwner(s)),
            Err(StartError::LimitReached(n)) => Err(start::StartError::LimitReached(n)),
            Err(StartError::Refused(m)) => Err(start::StartError::Refused(m)),
        };
        outcome_from(start::started(&config_from(config), &request, made))
    }

    fn tool_definitions(config: Config) -> Vec<ToolDefinition> {
        install_panic_hook();
        surface::tool_definitions(&config_from(config))
            .into_iter()
            .map(|d| ToolDefinition {
                name: d.name.to_owned(),
                description: d.description.to_owned(),
                input_schema: to_json(&d.input_schema),
                output_schema: d.output_schema.as_ref().map(to_json),
                annotations: annotations_to(d.annotations),
            })
            .collect()
    }

    fn describe_call(config: Config, tool_name: String, args_json: String) -> Option<UiCard> {
        install_panic_hook();
        surface::ui_card(&config_from(config), &tool_name, &args_json).map(|c| UiCard {
            title: c.title,
            kind: c.kind.to_owned(),
            raw_input: c.raw_input,
        })
    }

    fn system_prompt(config: Config) -> Option<PromptSection> {
        surface::system_prompt(config_from(config).profile).map(|p| PromptSection {
            name: p.name.to_owned(),
            order: p.order,
            text: p.text.to_owned(),
        })
    }

    fn invoke(
        scope: &OwnerScope,
        config: Config,
        tool_name: String,
        args_json: String,
    ) -> CallOutcome {
        install_panic_hook();
        outcome_from(surface::invoke(
            &Scope(scope),
            &config_from(config),
            &tool_name,
            &args_json,
            None,
        ))
    }

    fn resume(
        scope: &OwnerScope,
        config: Config,
        tool_name: String,
        args_json: String,
        waited: Result<Waited, RegistryError>,
    ) -> CallOutcome {
        install_panic_hook();
        let waited = waited.map(waited_from).map_err(error_from);
        let config = config_from(config);
        if tool_name == start::START_TOOL {
            return outcome_from(model::Step::Done(start::resumed(
                &Scope(scope),
                &config,
                &waited,
            )));
        }
        outcome_from(surface::invoke(
            &Scope(scope),
            &config,
            &tool_name,
            &args_json,
            Some(&waited),
        ))
    }

    fn finalize(
        scope: &OwnerScope,
        config: Config,
        tool_name: String,
        args_json: String,
        blocks: Vec<ContentBlock>,
    ) -> Vec<ContentBlock> {
        install_panic_hook();
        let plain = blocks
            .into_iter()
            .map(|b| match b {
                ContentBlock::Text(t) => logic::ContentBlock::Text(t),
                ContentBlock::Other(o) => logic::ContentBlock::Other(o),
            })
            .collect();
        surface::finalize(
            &Scope(scope),
            config_from(config).profile,
            &tool_name,
            &args_json,
            plain,
        )
        .into_iter()
        .map(|b| match b {
            logic::ContentBlock::Text(t) => ContentBlock::Text(t),
            logic::ContentBlock::Other(o) => ContentBlock::Other(o),
        })
        .collect()
    }
}

fn result_to(result: model::ToolResult) -> ToolResult {
    ToolResult {
        text: result.text,
        is_error: result.is_error,
        value: result.value.map(model::Json::into_string),
    }
}

/// A schema as compact JSON text.
fn to_json(value: &serde_json::Value) -> String {
    model::Json::of(value).into_string()
}

fn outcome_from(step: model::Step<model::ToolResult>) -> CallOutcome {
    match step {
        model::Step::Done(result) => CallOutcome::Done(result_to(result)),
        model::Step::Wait(request) => CallOutcome::Wait(WaitRequest {
            job_id: request.job_id,
            timeout_ms: request.timeout_ms,
            until: request.until.map(|u| WaitUntil {
                pattern: u.pattern,
                quiet_ms: u.quiet_ms,
                prompt_quiet_ms: u.prompt_quiet_ms,
            }),
        }),
    }
}

fn notice_from(parts: surface::NoticeParts) -> Notice {
    Notice {
        text: parts.text,
        summary: parts.summary,
        plugin: parts.plugin.to_owned(),
        form: parts.form.map(str::to_owned),
    }
}

fn notice_for(job: &model::JobSnapshot, config: &PlainConfig) -> Notice {
    notice_from(surface::notice(job, config))
}

impl notices::Guest for Component {
    fn completion_notice(config: Config, job: JobSnapshot) -> Notice {
        install_panic_hook();
        notice_for(&snapshot_from(job), &config_from(config))
    }

    fn deliver(config: Config, job: JobSnapshot, owner: Option<OwnerState>) -> Option<Delivery> {
        install_panic_hook();
        let job = snapshot_from(job);
        let owner = owner.map(|o| {
            let status = match o.status {
                AgentStatus::Idle => notice::AgentStatus::Idle,
                AgentStatus::Running => notice::AgentStatus::Running,
            };
            (status, o.wakes_spent)
        });
        let config = config_from(config);
        let lane = surface::delivery_lane(&config, &job, owner)?;
        Some(Delivery {
            lane: match lane {
                notice::Lane::Inject => Lane::Inject,
                notice::Lane::Followup => Lane::Followup,
            },
            notice: notice_for(&job, &config),
        })
    }

    fn batch_notice(scope: &OwnerScope, config: Config, jobs: Vec<JobSnapshot>) -> Option<Notice> {
        install_panic_hook();
        let config = config_from(config);
        let jobs: Vec<_> = jobs.into_iter().map(snapshot_from).collect();
        surface::batch_notice(&Scope(scope), &config, &jobs).map(notice_from)
    }
}
