//! One agent's session over the host: a `bash` tool that starts background jobs,
//! the plugin's tools, and completion notices placed before the next tool result.
//!
//! The MCP server and the interactive shell of `jobs-host` are thin front ends over
//! [`Session`]; a harness can use it the same way.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::bash::{BashProducer, BashRequest, JobLimits, Started, started_text};
use crate::owner::{Agent, AgentStatus, DeliveryError, Lane, NoticeMessage, Owner};
use crate::plugin::{Mount, ToolAnnotations, ToolDefinition, ToolOutcome};
use crate::registry::JobRegistry;

/// The name of the session's own tool that starts background shell jobs.
pub const BASH_TOOL: &str = "bash";

/// The `bash` tool's description, naming the profile's read and kill tools.
pub fn bash_description(profile: crate::plugin::Profile) -> &'static str {
    match profile {
        crate::plugin::Profile::A => {
            "Run a shell command in the background and return a job id immediately (collect with job_output, stop with job_kill). No timeout applies."
        }
        crate::plugin::Profile::B => {
            "Run a shell command in the background and return a task id immediately (collect with task_output, stop with task_kill). No timeout applies."
        }
        crate::plugin::Profile::C => {
            "Run a shell command in the background and return a job id immediately (check with job_status, block with job_wait, stop with job_cancel). No timeout applies."
        }
    }
}

/// The `bash` tool's description under a config: with the `limits` extension,
/// the sentence about timeouts says what applies instead.
pub fn bash_description_for(config: &crate::plugin::PluginConfig) -> String {
    let base = bash_description(config.profile);
    if !has_extension(config, Extension::Limits) {
        return base.to_owned();
    }
    base.replace(
        "No timeout applies.",
        "Optional limits (timeout_ms, cpu_seconds, memory_bytes, max_output_bytes) stop it when reached; the session's maxima apply to every job and cannot be raised.",
    )
}

/// Whether a mount's config enables `extension`.
pub fn has_extension(config: &crate::plugin::PluginConfig, extension: Extension) -> bool {
    config.extensions.contains(&extension)
}

pub use crate::plugin::Extension;

/// The `bash` tool's title and behaviour hints: it runs any command, so it is
/// neither read-only nor closed-world, and a second start is a second job.
pub fn bash_annotations() -> ToolAnnotations {
    ToolAnnotations {
        title: "Run a background shell command".to_owned(),
        read_only_hint: false,
        destructive_hint: true,
        idempotent_hint: false,
        open_world_hint: true,
    }
}

/// The `bash` tool's JSON Schema.
pub fn bash_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The command to run with bash -c."},
            "workdir": {"type": "string", "description": "Working directory; relative paths resolve against the session's."},
            "description": {"type": "string", "description": "Short description of what the command does."}
        },
        "required": ["command"]
    })
}

/// The `bash` tool's JSON Schema under a config: the extensions add `stdin`
/// (input), `name` (ports) and the limits (limits).
pub fn bash_schema_for(config: &crate::plugin::PluginConfig) -> Value {
    let mut schema = bash_schema();
    let properties = &mut schema["properties"];
    if has_extension(config, Extension::Input) {
        properties["stdin"] = json!({"type": "boolean", "description": "Keep stdin open so the job can be written to (default: stdin is /dev/null)."});
    }
    if has_extension(config, Extension::Ports) {
        properties["name"] = json!({"type": "string", "description": "A name for the job; starting a name whose job is still running returns that job instead of a second one."});
    }
    if has_extension(config, Extension::Limits) {
        let limit = |what: &str| json!({"type": "integer", "description": what});
        properties["timeout_ms"] = limit("Kill the job after this many milliseconds.");
        properties["cpu_seconds"] = limit("CPU seconds each process of the job may use.");
        properties["memory_bytes"] =
            limit("Address space each process of the job may use, in bytes.");
        properties["max_output_bytes"] =
            limit("Kill the job once it has written this many bytes of output.");
    }
    schema
}

/// The agent side of a session: it is always mid-conversation (a client model
/// cannot be woken from here), so notices arrive through the inject lane and
/// wait for the next tool result. Each is also announced on a channel as it
/// arrives, for logging notifications or a console.
pub struct SessionAgent {
    pending: Mutex<Vec<NoticeMessage>>,
    announce: mpsc::UnboundedSender<(Lane, NoticeMessage)>,
}

impl SessionAgent {
    fn queue(&self, lane: Lane, message: NoticeMessage) -> Result<(), DeliveryError> {
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(message.clone());
        // Nobody listening is fine: the notice still waits for the next result.
        let _ = self.announce.send((lane, message));
        Ok(())
    }

    fn take(&self) -> Vec<NoticeMessage> {
        std::mem::take(&mut *self.pending.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

impl Agent for SessionAgent {
    fn status(&self) -> AgentStatus {
        AgentStatus::Running
    }

    fn inject(&self, message: NoticeMessage) -> Result<(), DeliveryError> {
        self.queue(Lane::Inject, message)
    }

    fn followup(&self, message: NoticeMessage) -> Result<(), DeliveryError> {
        self.queue(Lane::Followup, message)
    }
}

/// A tool result with the notices that arrived since the previous one.
#[derive(Debug, Clone)]
pub struct SessionReply {
    /// Completion notices to place before the result, oldest first.
    pub notices: Vec<NoticeMessage>,
    /// The tool's own result.
    pub outcome: ToolOutcome,
}

/// One owner's session: its `bash` tool, the plugin's tools and its notices.
pub struct Session {
    owner: Owner,
    agent: Arc<SessionAgent>,
    registry: JobRegistry,
    mount: Arc<Mount>,
    bash: BashProducer,
}

impl Session {
    /// Opens a session for `session_id` on `mount`'s registry. Returns the session
    /// and the channel on which each notice is announced as it arrives. Relative
    /// working directories resolve against `bash`'s default one.
    pub fn open(
        session_id: &str,
        mount: Arc<Mount>,
        bash: BashProducer,
    ) -> (Session, mpsc::UnboundedReceiver<(Lane, NoticeMessage)>) {
        let (announce, announced) = mpsc::unbounded_channel();
        let agent = Arc::new(SessionAgent {
            pending: Mutex::new(Vec::new()),
            announce,
        });
        let owner = Owner::builder(session_id).agent(agent.clone()).build();
        let registry = mount.registry().clone();
        registry.agents().register(&owner);
        let session = Session {
            owner,
            agent,
            registry,
            mount,
            bash,
        };
        (session, announced)
    }

    /// The owner this session acts for.
    pub fn owner(&self) -> &Owner {
        &self.owner
    }

    /// The registry the session's jobs live in.
    pub fn registry(&self) -> &JobRegistry {
        &self.registry
    }

    /// Delivers what has settled so far and takes the notices waiting for the
    /// next result: this is the session's step boundary, so a mount that pulls
    /// its notices (profile C) is drained here too.
    pub async fn collect_notices(&self) -> Vec<NoticeMessage> {
        self.mount.flush_notices().await;
        match self.mount.pull_notice(&self.owner).await {
            Ok(Some(notice)) => {
                // Queued like a pushed notice, so it is announced the same way.
                let _ = self.agent.inject(notice);
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(
                "jobs: batched notice for {} failed: {e}",
                self.owner.session_id()
            ),
        }
        self.agent.take()
    }

    /// The `bash` tool followed by the plugin's tools.
    ///
    /// # Errors
    ///
    /// When the plugin fails to list its tools.
    pub async fn tool_definitions(&self) -> Result<Vec<ToolDefinition>, crate::PluginError> {
        let mut tools = vec![ToolDefinition {
            name: BASH_TOOL.to_owned(),
            description: bash_description_for(self.mount.config()),
            input_schema: bash_schema_for(self.mount.config()).to_string(),
            output_schema: Some(
                json!({
                    "type": "object",
                    "properties": {"kind": {"type": "string", "enum": ["background"]}, "jobId": {"type": "string"}},
                    "required": ["kind", "jobId"],
                    "additionalProperties": false
                })
                .to_string(),
            ),
            annotations: bash_annotations(),
        }];
        tools.extend(self.mount.tool_definitions().await?);
        Ok(tools)
    }

    /// Runs one tool call, then collects the notices delivered so far.
    pub async fn call(&self, tool: &str, args: &Value) -> SessionReply {
        self.call_with_abort(tool, args, &CancellationToken::new())
            .await
    }

    /// [`Session::call`] for a call its client may cancel (`abort`): a
    /// cancelled call consumes nothing it would not show. A pending wait ends
    /// before its read (the output stays for the next read, the job's notice
    /// stays owed), a start not yet made is not made, and the notices stay
    /// queued for the next result; the reply then says `Error: wait aborted`
    /// (or the start's refusal), for a client that no longer reads it.
    pub async fn call_with_abort(
        &self,
        tool: &str,
        args: &Value,
        abort: &CancellationToken,
    ) -> SessionReply {
        let outcome = if tool == BASH_TOOL {
            if abort.is_cancelled() {
                return SessionReply {
                    notices: Vec::new(),
                    outcome: ToolOutcome {
                        text: crate::plugin::mount::CANCELLED_BEFORE_IT_RAN.to_owned(),
                        is_error: true,
                        value: None,
                    },
                };
            }
            self.start_bash(args)
        } else {
            self.mount
                .invoke_with_abort(Some(&self.owner), tool, &args.to_string(), abort)
                .await
        };
        if abort.is_cancelled() {
            // Nobody reads this reply: the notices wait for the next one.
            return SessionReply {
                notices: Vec::new(),
                outcome,
            };
        }
        // Anything that settled before this result is announced with it.
        SessionReply {
            notices: self.collect_notices().await,
            outcome,
        }
    }

    fn start_bash(&self, args: &Value) -> ToolOutcome {
        let error = |message: String| ToolOutcome {
            text: format!("Error: {message}"),
            is_error: true,
            value: None,
        };
        let request = match bash_request(args, self.mount.config()) {
            Ok(request) => request,
            Err(message) => return error(message),
        };
        let name = request.name.clone();
        match self.bash.start_named(Some(self.owner.clone()), request) {
            Ok(Started::New(id)) => ToolOutcome {
                text: started_text(&id),
                is_error: false,
                value: Some(json!({"kind": "background", "jobId": id})),
            },
            Ok(Started::Existing(id)) => ToolOutcome {
                text: format!(
                    "background job {id} named \"{}\" is already running; not started again",
                    name.unwrap_or_default()
                ),
                is_error: false,
                value: Some(json!({"kind": "background", "jobId": id})),
            },
            Err(e) => error(e.to_string()),
        }
    }

    /// Ends the session (for profile C, the run): its jobs are cancelled and
    /// forgotten, and no notice is sent, now or to a later session of the same id.
    pub async fn close(&self) {
        self.registry.dispose_owner(&self.owner).await;
        self.registry.agents().unregister(&self.owner);
    }
}

/// Checks the `bash` tool's arguments; the extension arguments only where
/// `config` enables them (elsewhere they are ignored, as any unknown key).
fn bash_request(args: &Value, config: &crate::plugin::PluginConfig) -> Result<BashRequest, String> {
    let Value::Object(map) = args else {
        return Err("invalid arguments: expected an object".to_owned());
    };
    let mut violations = Vec::new();
    let text =
        |map: &Map<String, Value>, key: &str, violations: &mut Vec<String>| -> Option<String> {
            match map.get(key) {
                None => None,
                Some(Value::String(s)) => Some(s.clone()),
                Some(_) => {
                    violations.push(format!("\"{key}\" must be a string"));
                    None
                }
            }
        };
    let command = text(map, "command", &mut violations);
    let workdir = text(map, "workdir", &mut violations);
    let description = text(map, "description", &mut violations);
    if !map.contains_key("command") {
        violations.push("missing required property \"command\"".to_owned());
    }
    if !violations.is_empty() {
        return Err(format!("invalid arguments: {}", violations.join("; ")));
    }
    if description.as_deref().is_some_and(|d| d.trim().is_empty()) {
        return Err("invalid description: expected a non-blank string".to_owned());
    }
    let mut request = BashRequest {
        command: command.unwrap_or_default(),
        workdir: workdir.map(PathBuf::from),
        ..BashRequest::default()
    };
    if has_extension(config, Extension::Input) {
        request.stdin = match map.get("stdin") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err("invalid arguments: \"stdin\" must be a boolean".to_owned()),
        };
    }
    if has_extension(config, Extension::Ports) {
        request.name = match map.get("name") {
            None | Some(Value::Null) => None,
            // The producer checks the name itself (blank, too long).
            Some(Value::String(name)) => Some(name.clone()),
            Some(_) => return Err("invalid arguments: \"name\" must be a string".to_owned()),
        };
    }
    if has_extension(config, Extension::Limits) {
        let max = &config.limits;
        request.limits = JobLimits {
            timeout_ms: limit(map, "timeout_ms", max.timeout_ms)?,
            cpu_seconds: limit(map, "cpu_seconds", max.cpu_seconds)?,
            memory_bytes: limit(map, "memory_bytes", max.memory_bytes)?,
            output_bytes: limit(map, "max_output_bytes", max.output_bytes)?,
        };
    }
    Ok(request)
}

/// One limit: what the call asks for (a whole number of at least 1, at most
/// the session's maximum), or else the maximum.
fn limit(map: &Map<String, Value>, key: &str, max: Option<u64>) -> Result<Option<u64>, String> {
    let asked = match map.get(key) {
        None | Some(Value::Null) => return Ok(max),
        Some(v) => v
            .as_u64()
            .filter(|n| *n >= 1 && *n <= crate::registry::MAX_SAFE_INTEGER)
            .ok_or_else(|| {
                format!("invalid {key}: expected a whole number of at least 1, got {v}")
            })?,
    };
    if key == "timeout_ms" && asked > crate::registry::MAX_TIMER_DELAY_MS as u64 {
        return Err(format!(
            "invalid timeout_ms: expected at most 2147483647, got {asked}"
        ));
    }
    match max {
        Some(max) if asked > max => Err(format!(
            "invalid {key}: {asked} is more than this session's limit of {max}"
        )),
        _ => Ok(Some(asked)),
    }
}
