//! The start tool through the guest: the guest defines it, checks the model's
//! arguments and words the answer; the host only makes the start.

use super::bindings::exports::harness::jobs::tools as wit;
use tokio_util::sync::CancellationToken;

use super::mount::{Mount, ToolOutcome, failed, outcome_of};
use super::{PluginError, ToolDefinition};
use crate::limits::JobLimits;
use crate::owner::Owner;
use crate::registry::StartError;

/// A start the guest checked (see the WIT `start-request`), for the host to make.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StartRequest {
    /// The command line, not blank.
    pub command: String,
    /// The working directory as the model wrote it.
    pub workdir: Option<String>,
    /// The model's short description, not blank.
    pub description: Option<String>,
    /// Keep stdin open for writes (extension `input`).
    pub stdin: bool,
    /// The job's name (extension `ports`).
    pub name: Option<String>,
    /// The job's limits (extension `limits`), within the mount's maxima.
    pub limits: JobLimits,
    /// The sandbox the guest asked for (extension `sandbox`); the host runs
    /// the job in it only if it is no wider than the session's.
    pub sandbox: Option<crate::sandbox::Sandbox>,
    /// Run the job on a terminal of this size (extension `terminal`); its
    /// stdin is then open.
    pub tty: Option<crate::capture::TerminalSize>,
    /// Render the output of a job without a terminal (the mount's
    /// `renderOutput`).
    pub render: bool,
    /// The runner to run the job on (extension `runners`); `None`: this host.
    pub runner: Option<String>,
    /// What the job needs of its runner's engine (extension `runners`).
    pub resources: Option<crate::limits::Resources>,
}

/// What a start did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartMade {
    /// A new job with this id.
    New(String),
    /// The live job that already holds the requested name; nothing started.
    Existing(String),
}

impl Mount {
    /// The start tool (`bash`) in this mount's words: description, schema and
    /// hints follow the profile and the extensions.
    ///
    /// # Errors
    ///
    /// [`PluginError::Trap`] when the guest fails.
    pub async fn start_tool(&self) -> Result<ToolDefinition, PluginError> {
        let tool = self
            .with_instance(|jobs, store| {
                jobs.harness_jobs_tools()
                    .call_start_tool(store, self.wit_config())
            })
            .await?;
        Ok(tool.into())
    }

    /// Runs the start tool: the guest checks `args_json` (a command longer
    /// than `max_command_bytes` is refused there, in the contract's words),
    /// `start` makes the start it asked for, and the guest words what
    /// happened. Refused arguments never reach `start`.
    ///
    /// The check and the answer are two calls on one fresh instance, with the
    /// start between them: `start` only registers the job (its spawn comes
    /// after), so the instance is held for microseconds, and the guest learns
    /// nothing from the second call it was not handed in it anyway.
    ///
    /// A start that yields (extension `yield`) then waits on its new job for
    /// `caller` as a read's wait does (`abort` ends it; the job is not
    /// killed), and the guest answers with what the job printed.
    pub async fn start_with(
        &self,
        caller: Option<&Owner>,
        args_json: &str,
        max_command_bytes: usize,
        abort: &CancellationToken,
        start: impl FnOnce(&StartRequest) -> Result<StartMade, StartError> + Send,
    ) -> ToolOutcome {
        self.start_after_preflight(caller, args_json, max_command_bytes, abort, |_| None, start)
            .await
    }

    /// [`Mount::start_with`], with a check that must pass before `start`:
    /// `preflight` answers a future for a checked request that needs one (a
    /// runner asks its engine whether it answers), and its refusal is worded
    /// by the guest as `start`'s would be. The guest's instance is not held
    /// while the future runs: the check and the answer are then two
    /// instances.
    pub async fn start_after_preflight<'p>(
        &self,
        caller: Option<&Owner>,
        args_json: &str,
        max_command_bytes: usize,
        abort: &CancellationToken,
        preflight: impl FnOnce(&StartRequest) -> Option<Preflight<'p>> + Send,
        start: impl FnOnce(&StartRequest) -> Result<StartMade, StartError> + Send,
    ) -> ToolOutcome {
        let max_command_bytes = u64::try_from(max_command_bytes).unwrap_or(u64::MAX);
        let checked = self
            .with_instance(|jobs, store| {
                let tools = jobs.harness_jobs_tools();
                let checked = tools.call_check_start(
                    &mut *store,
                    self.wit_config(),
                    args_json,
                    max_command_bytes,
                )?;
                let asked = match checked {
                    Ok(asked) => asked,
                    Err(refused) => return Ok(Checked::Answered(wit::CallOutcome::Done(refused))),
                };
                let request = request_from(&asked);
                if let Some(check) = preflight(&request) {
                    return Ok(Checked::Preflight(Box::new((asked, request, check, start))));
                }
                let made = made(start(&request));
                tools
                    .call_started(&mut *store, self.wit_config(), &asked, made.as_ref())
                    .map(Checked::Answered)
            })
            .await;
        let answer = match checked {
            Ok(Checked::Answered(answer)) => Ok(answer),
            Err(e) => Err(e),
            Ok(Checked::Preflight(waiting)) => {
                let (asked, request, check, start) = *waiting;
                let made = match check.await {
                    Ok(()) => made(start(&request)),
                    Err(e) => Err(refusal(e)),
                };
                self.with_instance(|jobs, store| {
                    jobs.harness_jobs_tools().call_started(
                        &mut *store,
                        self.wit_config(),
                        &asked,
                        made.as_ref(),
                    )
                })
                .await
            }
        };
        match answer {
            Ok(wit::CallOutcome::Done(result)) => outcome_of(result),
            Err(e) => failed(&e),
            // A yielding start resumes under the start tool's own name.
            waiting @ Ok(wit::CallOutcome::Wait(_)) => match self.start_tool().await {
                Ok(tool) => {
                    self.finish_call(caller, &tool.name, args_json, waiting, abort)
                        .await
                }
                Err(e) => failed(&e),
            },
        }
    }
}

/// A start's check that must pass before the start is made (see
/// [`Mount::start_after_preflight`]).
pub type Preflight<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), StartError>> + Send + 'a>>;

/// The first call of a start: answered, or waiting for its preflight.
enum Checked<'p, S> {
    Answered(wit::CallOutcome),
    /// With the start to make once the preflight passes.
    Preflight(Box<(wit::StartRequest, StartRequest, Preflight<'p>, S)>),
}

fn made(start: Result<StartMade, StartError>) -> Result<wit::StartMade, wit::StartError> {
    match start {
        Ok(StartMade::New(id)) => Ok(wit::StartMade::New(id)),
        Ok(StartMade::Existing(id)) => Ok(wit::StartMade::Existing(id)),
        Err(e) => Err(refusal(e)),
    }
}

fn request_from(r: &wit::StartRequest) -> StartRequest {
    StartRequest {
        command: r.command.clone(),
        workdir: r.workdir.clone(),
        description: r.description.clone(),
        stdin: r.stdin,
        name: r.name.clone(),
        limits: JobLimits {
            timeout_ms: r.limits.timeout_ms,
            cpu_seconds: r.limits.cpu_seconds,
            memory_bytes: r.limits.memory_bytes,
            output_bytes: r.limits.output_bytes,
        },
        sandbox: r.sandbox.as_ref().map(crate::sandbox::Sandbox::from),
        // The guest holds the sizes to 2..=1000; the host again, whoever asks.
        tty: r.tty.map(|t| crate::capture::TerminalSize {
            rows: t.rows.clamp(
                *crate::capture::TERMINAL_DIMENSIONS.start(),
                *crate::capture::TERMINAL_DIMENSIONS.end(),
            ),
            cols: t.cols.clamp(
                *crate::capture::TERMINAL_DIMENSIONS.start(),
                *crate::capture::TERMINAL_DIMENSIONS.end(),
            ),
        }),
        render: r.render,
        runner: r.runner.clone(),
        resources: r.resources.as_ref().map(|r| crate::limits::Resources {
            cpus: r.cpus,
            gpus: r.gpus,
            memory_bytes: r.memory_bytes,
            custom: r.custom.clone(),
        }),
    }
}

/// The registry's refusal as the guest words it; the host's own checks pass
/// their message through.
fn refusal(error: StartError) -> wit::StartError {
    match error {
        StartError::NoController => wit::StartError::NoController,
        StartError::StaleOwner(session) => wit::StartError::StaleOwner(session),
        StartError::LimitReached(limit) => wit::StartError::LimitReached(limit),
        other @ (StartError::InvalidKind
        | StartError::InvalidLabel
        | StartError::InvalidOutputLimit(_)
        | StartError::Producer(_)) => wit::StartError::Refused(other.to_string()),
    }
}
