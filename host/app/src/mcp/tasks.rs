//! Jobs as MCP tasks, in both generations: the tasks extension of revision
//! 2026-07-28 (`io.modelcontextprotocol/tasks`: `tasks/get`, `tasks/cancel`)
//! and the core tasks of revision 2025-11-25 (`params.task` on `tools/call`;
//! `tasks/get`, the blocking `tasks/result`, `tasks/list`, `tasks/cancel` and
//! `notifications/tasks/status`).
//!
//! A task is one of the connection's jobs under a second name: a random
//! 128-bit handle, never the guessable job id. Its state is read from the
//! registry at every request, so `tasks/get` and the job tools never disagree;
//! its result is the profile's own read of the job, taken once when the job
//! has ended (the read counts as the model's, so the job's output is consumed
//! as by a read). A task lives as long as its job's record: once the registry
//! has let the job go, the task is gone too.

use host::sync::lock;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::ErrorData;
use serde_json::{Value, json};

use host::plugin::StartMade;
use host::registry::{JobSnapshot, JobStatus};
use host::session::Session;

use super::results::Answer;

/// How often a client should poll a task, in milliseconds.
pub(super) const POLL_INTERVAL_MS: u64 = 2000;

/// The `_meta` key of revision 2025-11-25 that carries text a client may
/// hand the model at once, on the answer that created a task.
pub(super) const IMMEDIATE_RESPONSE_META: &str = "io.modelcontextprotocol/model-immediate-response";

/// The `_meta` key of revision 2025-11-25 that ties a result to its task.
pub(super) const RELATED_TASK_META: &str = "io.modelcontextprotocol/related-task";

/// Which tasks a task belongs to: each generation sees only its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Generation {
    /// The tasks extension (revision 2026-07-28).
    Extension,
    /// The core tasks of revision 2025-11-25.
    Legacy,
}

/// One task: the job it names and what its start answered.
pub(super) struct TaskRecord {
    job_id: String,
    generation: Generation,
    /// The first line of the start's answer (`started background job …`).
    message: String,
    /// The read taken once the job ended: a `CallToolResult` as JSON.
    result: tokio::sync::OnceCell<Value>,
}

/// The connection's tasks.
#[derive(Default)]
pub(super) struct Tasks {
    records: Mutex<HashMap<String, Arc<TaskRecord>>>,
}

/// A task found, with its job as the registry sees it now.
pub(super) struct Seen {
    pub(super) id: String,
    pub(super) record: Arc<TaskRecord>,
    pub(super) job: JobSnapshot,
}

/// Where a job stands, in task terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Phase {
    /// Running.
    Working,
    /// A kill was asked for; the job has not settled yet.
    Cancelling,
    /// Exited; `is_error` unless with code 0.
    Done { is_error: bool },
    /// Killed (by a kill, a signal or a limit).
    Cancelled,
    /// The job failed to run (for example its spawn failed), with why.
    Failed(String),
}

impl Phase {
    fn of(job: &JobSnapshot) -> Phase {
        match job.status {
            JobStatus::Running => Phase::Working,
            JobStatus::Stopping => Phase::Cancelling,
            JobStatus::Completed => Phase::Done {
                is_error: !job.succeeded(),
            },
            JobStatus::Killed => Phase::Cancelled,
            JobStatus::Failed => {
                Phase::Failed(job.detail.clone().unwrap_or_else(|| "failed".to_owned()))
            }
        }
    }
}

/// The error for an id that names no task of the caller's: unknown, of the
/// other generation, or gone with its job.
pub(super) fn not_found() -> ErrorData {
    ErrorData::invalid_params("Failed to retrieve task: Task not found", None)
}

/// A fresh task id: 128 random bits as 32 hex digits.
fn random_id() -> String {
    let mut bytes = [0u8; 16];
    if let Err(e) = getrandom::fill(&mut bytes) {
        // Without the system's randomness no handle is safe to give out;
        // the process cannot go on honestly.
        panic!("no system randomness for a task id: {e}");
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// An epoch-milliseconds time as ISO 8601 (RFC 3339, UTC).
pub(super) fn timestamp(ms: u64) -> String {
    let ms = i64::try_from(ms).unwrap_or(i64::MAX);
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

impl Tasks {
    /// Names job `job_id` as a new task of `generation`; `answer` is what its
    /// start answered. Returns the task's id.
    pub(super) fn create(&self, job_id: &str, generation: Generation, answer: &str) -> String {
        let id = random_id();
        let record = TaskRecord {
            job_id: job_id.to_owned(),
            generation,
            message: answer.lines().next().unwrap_or_default().to_owned(),
            result: tokio::sync::OnceCell::new(),
        };
        lock(&self.records).insert(id.clone(), Arc::new(record));
        id
    }

    /// The task `id` of `generation`, with its job now.
    ///
    /// # Errors
    ///
    /// [`not_found`] when there is no such task, or its job is gone.
    pub(super) fn find(
        &self,
        session: &Session,
        id: &str,
        generation: Generation,
    ) -> Result<Seen, ErrorData> {
        let record = lock(&self.records)
            .get(id)
            .filter(|r| r.generation == generation)
            .cloned()
            .ok_or_else(not_found)?;
        match session
            .registry()
            .get(&record.job_id, Some(session.owner()))
        {
            Ok(job) => Ok(Seen {
                id: id.to_owned(),
                record,
                job,
            }),
            Err(_) => {
                lock(&self.records).remove(id);
                Err(not_found())
            }
        }
    }

    /// The tasks of `generation`, oldest first; tasks whose job is gone are
    /// forgotten.
    pub(super) fn list(&self, session: &Session, generation: Generation) -> Vec<Seen> {
        let ids: Vec<String> = lock(&self.records)
            .iter()
            .filter(|(_, r)| r.generation == generation)
            .map(|(id, _)| id.clone())
            .collect();
        let mut seen: Vec<Seen> = ids
            .iter()
            .filter_map(|id| self.find(session, id, generation).ok())
            .collect();
        seen.sort_by_key(|s| (s.job.started_at, s.job.id.clone()));
        seen
    }
}

impl Seen {
    pub(super) fn job_id(&self) -> &str {
        &self.record.job_id
    }

    pub(super) fn phase(&self) -> Phase {
        Phase::of(&self.job)
    }

    fn status_message(&self) -> String {
        match self.phase() {
            Phase::Working => self.record.message.clone(),
            Phase::Cancelling => "cancelling".to_owned(),
            _ => self
                .job
                .detail
                .clone()
                .unwrap_or_else(|| self.job.status.as_str().to_owned()),
        }
    }

    fn updated_ms(&self) -> u64 {
        self.job.finished_at.unwrap_or(self.job.started_at)
    }

    /// The job's result, once it has ended: the profile's read of it, taken
    /// the first time it is asked for and the same every time after.
    pub(super) async fn result(&self, session: &Session) -> Value {
        let phase = self.phase();
        self.record
            .result
            .get_or_init(|| async {
                let (tool, args) = session.mount().config().profile.read_call(self.job_id());
                let outcome = session
                    .invoke(tool, &args, &host::CancellationToken::new())
                    .await;
                let is_error = outcome.is_error || phase != Phase::Done { is_error: false };
                json!({
                    "content": [{"type": "text", "text": outcome.text}],
                    "isError": is_error,
                })
            })
            .await
            .clone()
    }

    /// The task as the tasks extension shows it (revision 2026-07-28).
    pub(super) async fn extension_view(&self, session: &Session) -> rmcp::model::DetailedTask {
        use rmcp::model::{DetailedTask, Task, TaskPayload, TaskStatus};
        let payload = match self.phase() {
            Phase::Working | Phase::Cancelling => TaskPayload::Working,
            Phase::Done { .. } => match self.result(session).await {
                Value::Object(result) => TaskPayload::Completed { result },
                _ => unreachable!("a result is an object"),
            },
            Phase::Cancelled => TaskPayload::Cancelled,
            Phase::Failed(why) => TaskPayload::Failed {
                error: match json!({"code": -32603, "message": why}) {
                    Value::Object(error) => error,
                    _ => unreachable!("an object literal"),
                },
            },
        };
        let task = Task::new(
            self.id.clone(),
            TaskStatus::Working,
            timestamp(self.job.started_at),
            timestamp(self.updated_ms()),
        )
        .with_status_message(self.status_message())
        .with_poll_interval_ms(POLL_INTERVAL_MS);
        DetailedTask::new(task, payload)
    }

    /// The task as revision 2025-11-25 shows it. A cancel asked for counts as
    /// `cancelled` at once, as that revision requires; an exit with a code
    /// other than 0 is `failed`.
    pub(super) fn legacy_view(&self) -> Value {
        let status = match self.phase() {
            Phase::Working => "working",
            Phase::Done { is_error: false } => "completed",
            Phase::Done { is_error: true } | Phase::Failed(_) => "failed",
            Phase::Cancelling | Phase::Cancelled => "cancelled",
        };
        json!({
            "taskId": self.id,
            "status": status,
            "statusMessage": self.status_message(),
            "createdAt": timestamp(self.job.started_at),
            "lastUpdatedAt": timestamp(self.updated_ms()),
            "ttl": Value::Null,
            "pollInterval": POLL_INTERVAL_MS,
        })
    }
}

impl super::JobsServer {
    /// The start tool for a call that may become a task: a new job that the
    /// start made is named as a task of `generation`; anything else (a
    /// refusal, a name that already runs, an abort) is the ordinary reply.
    pub(super) async fn start_as_task(
        &self,
        args: &Value,
        abort: &tokio_util::sync::CancellationToken,
        generation: Generation,
    ) -> (Answer, String) {
        let (outcome, made) = self.session.start_job(args, abort).await;
        match made {
            Some(StartMade::New(job)) if !outcome.is_error && !abort.is_cancelled() => {
                let id = self.tasks.create(&job, generation, &outcome.text);
                (Answer::Task(id), outcome.text)
            }
            _ => {
                let text = outcome.text.clone();
                (
                    Answer::Reply(self.session.reply(outcome, abort).await),
                    text,
                )
            }
        }
    }

    /// Kills the job of task `id` (its whole tree), for `tasks/cancel`, and
    /// gives it a moment to settle. A task that has ended already is refused.
    pub(super) async fn cancel(&self, id: &str, generation: Generation) -> Result<Seen, ErrorData> {
        let seen = self.tasks.find(&self.session, id, generation)?;
        if seen.job.status.is_terminal() || seen.phase() == Phase::Cancelling {
            return Err(ErrorData::invalid_params(
                format!(
                    "Cannot cancel task: it is already {}",
                    seen.job.status.as_str()
                ),
                None,
            ));
        }
        self.session
            .registry()
            .kill(
                seen.job_id(),
                Some(self.session.owner()),
                Some("tasks/cancel"),
            )
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        // A kill settles in milliseconds; a job that takes longer still
        // counts as cancelled (revision 2025-11-25) or working (the extension).
        let _ = tokio::time::timeout(
            std::time::Duration::from_secs(2),
            self.session.registry().settled(seen.job_id()),
        )
        .await;
        self.tasks.find(&self.session, id, generation)
    }
}
