//! One job's life on a Ray engine: its submit, the pump from the log tail
//! into its capture, its status, its stop and its end.
//!
//! The end is decided by the engine's status only: a tail that closes while
//! the job runs is opened again (the cursor skips what was taken), and the
//! log's last part is read once the status is terminal, so nothing the job
//! wrote before it ended is lost when the tail was away at the time.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, watch};

use super::super::shared::{completed, failed, killed};
use super::client::{Details, EngineError, Submit, Submitted};
use super::output::{ENTRYPOINT, LogCopy, Output, begin_line};
use super::tail::{self, Closed, Cursor};
use super::{Inner, Remote};
use crate::capture::{OutputStream, SharedCapture};
use crate::producer::CommandRequest;
use crate::registry::{JobOutcome, Placement};
use crate::sync::lock;

/// How much longer than the job's grace the engine may take to confirm a
/// stop (its own stop wait is the grace and two seconds).
pub(super) const ENGINE_STOP_SLACK: Duration = Duration::from_secs(15);

/// How often the status is asked soon after a change (a submit, a new
/// status, the tail closing: the engine closes it when the job ends) and
/// while a stop is under way; then while the job is queued, and while it
/// runs. The tail's close is what finds most ends quickly, so a running
/// job's own polls can be rare: a hundred idle jobs cost ten requests a
/// second.
const POLL_SOON: Duration = Duration::from_secs(1);
const POLL_QUEUED: Duration = Duration::from_secs(5);
const POLL_RUNNING: Duration = Duration::from_secs(10);
/// How long "soon" lasts after a change.
const SOON: Duration = Duration::from_secs(5);

/// The first and the longest pause before the tail is opened again.
const TAIL_RETRY_FIRST: Duration = Duration::from_millis(500);
const TAIL_RETRY_MAX: Duration = Duration::from_secs(8);

/// How long the tail may take to hand over chunks it is sending when the
/// engine says the job has ended; the whole log has the rest.
const TAIL_DRAIN: Duration = Duration::from_secs(1);

/// How long the tail, opened once more, may take to send a log the engine
/// would not hand over whole.
const TAIL_LAST_TRY: Duration = Duration::from_secs(10);

/// How many times a submit the engine did not answer is tried.
const SUBMIT_TRIES: u32 = 4;

/// The relay the engine runs the command under (see the parent's docs).
const RELAY: &str = include_str!("../relay.py");

/// What a new job's task needs.
pub(super) struct Job {
    pub runner: Arc<Inner>,
    pub remote: Arc<Remote>,
    pub capture: SharedCapture,
    pub placement: Placement,
    pub request: CommandRequest,
    /// The registry's id for the job, once the start has it.
    pub id: tokio::sync::oneshot::Receiver<String>,
    /// Where the log is kept as it is taken, for a job that outlives its
    /// host.
    pub copy: Option<LogCopy>,
}

/// What the task of a job on the engine needs from its submit on (a new
/// job's once submitted, or one a restarted host took on).
pub(super) struct Followed {
    pub runner: Arc<Inner>,
    pub remote: Arc<Remote>,
    pub capture: SharedCapture,
    pub placement: Placement,
    pub submission_id: String,
    /// The log's bytes taken so far, and where the next ones go.
    pub cursor: Cursor,
    pub output: Output,
    pub timeout_ms: Option<u64>,
}

/// Why we asked the engine to stop a job.
enum Stop {
    /// A kill (the model's, a session's end, the host's shutdown).
    Asked,
    /// A limit of the start: its words are the job's detail.
    Limit(String),
}

/// Runs a job's `life` to its end and answers its outcome; marks the job
/// finished whatever happens.
pub(super) async fn run(
    remote: Arc<Remote>,
    capture: SharedCapture,
    life: impl std::future::Future<Output = JobOutcome>,
) -> JobOutcome {
    let outcome = life.await;
    capture.close();
    remote.finished.send_replace(true);
    outcome
}

/// A new job's life: its submit, then [`follow`].
pub(super) async fn life(job: Job) -> JobOutcome {
    let Job {
        runner,
        remote,
        capture,
        placement,
        request,
        id,
        copy,
    } = job;
    let Ok(id) = id.await else {
        return killed(None);
    };
    let submission_id = format!("{}-{id}", runner.prefix);
    let _ = remote.submission_id.set(submission_id.clone());
    if remote.stop.is_cancelled() || remote.let_go.is_cancelled() {
        return killed(Some(crate::words::KILLED_BEFORE_EXIT.to_owned()));
    }
    if let Err(e) = submit(&runner, &submission_id, &id, &request).await {
        let words = crate::words::spawn_failed(&format!("runner {}: {e}", runner.name));
        capture.push(OutputStream::Stderr, words.as_bytes());
        return killed(Some(crate::words::KILLED_BEFORE_EXIT.to_owned()));
    }
    placement.set(format!("{}: {submission_id} submitted", runner.name));
    let mut output = Output::new(capture.clone(), &submission_id, request.limits.output_bytes);
    if let Some(copy) = copy {
        output.keep_in(copy);
    }
    follow(Followed {
        runner,
        remote,
        capture,
        placement,
        submission_id,
        cursor: Cursor::default(),
        output,
        timeout_ms: request.limits.timeout_ms,
    })
    .await
}

/// A submitted job from its cursor on: the pump from the tail into its
/// capture, its status, its stop and its end.
pub(super) async fn follow(job: Followed) -> JobOutcome {
    let Followed {
        runner,
        remote,
        capture,
        placement,
        submission_id,
        cursor,
        output,
        timeout_ms,
    } = job;
    // The pump: the tail into the capture, until the job has ended.
    let cursor = Arc::new(Mutex::new(cursor));
    let tail_closed = Arc::new(Notify::new());
    let (ended_tx, ended) = watch::channel(false);
    let output = Arc::new(Mutex::new(output));
    let limit_hit = Arc::new(Notify::new());
    let pump = tokio::spawn(pump(Pump {
        runner: runner.clone(),
        submission_id: submission_id.clone(),
        cursor: cursor.clone(),
        output: output.clone(),
        limit_hit: limit_hit.clone(),
        tail_closed: tail_closed.clone(),
        ended,
    }));

    let ended = watch_status(
        &runner,
        &remote,
        &placement,
        &submission_id,
        timeout_ms,
        &output,
        &limit_hit,
        &tail_closed,
    )
    .await;

    // The tail hands over what it is sending; the whole log has the rest.
    ended_tx.send_replace(true);
    if ended.left {
        pump.abort();
        tracing::info!(runner = %runner.name, %submission_id, "left running on the engine");
        return killed(Some(format!(
            "left running on runner {} as {submission_id}",
            runner.name
        )));
    }
    let mut pump = pump;
    if tokio::time::timeout(TAIL_DRAIN, &mut pump).await.is_err() {
        pump.abort();
    }
    if ended.engine_forgot() {
        // Nothing more to read: what was taken is all there is.
        lock(&output).finish();
    } else if lock(&output).reached.is_none() {
        read_the_rest(&runner, &submission_id, &cursor, &output, &capture).await;
    }
    ended.outcome(&runner.name, &submission_id)
}

/// Submits the job, trying again while the engine does not answer: the
/// submission id makes a try that did reach it harmless.
async fn submit(
    runner: &Inner,
    submission_id: &str,
    id: &str,
    request: &CommandRequest,
) -> Result<Submitted, EngineError> {
    let grace = runner.config.grace.as_secs_f64();
    let mut env_vars = request.env.clone();
    env_vars.extend([
        ("JOBS_HOST_RELAY".to_owned(), RELAY.to_owned()),
        ("JOBS_HOST_COMMAND".to_owned(), request.command.clone()),
        ("JOBS_HOST_BEGIN".to_owned(), begin_line(submission_id)),
        ("JOBS_HOST_GRACE_S".to_owned(), format!("{grace}")),
        (
            "RAY_JOB_STOP_WAIT_TIME_S".to_owned(),
            format!("{}", grace.ceil() + 2.0),
        ),
    ]);
    let resources = request.resources.clone().unwrap_or_default();
    let job = Submit {
        entrypoint: ENTRYPOINT.to_owned(),
        submission_id: submission_id.to_owned(),
        env_vars,
        metadata: vec![
            ("jobs_host_job".to_owned(), id.to_owned()),
            (
                "jobs_host_command".to_owned(),
                shortened(&request.command, 1000),
            ),
        ],
        cpus: resources.cpus,
        gpus: resources.gpus,
        memory_bytes: resources.memory_bytes,
        custom: resources.custom,
    };
    let mut pause = Duration::from_millis(250);
    let mut tries = 0;
    loop {
        tries += 1;
        match runner.client.submit(&job).await {
            Err(e) if e.is_transient() && tries < SUBMIT_TRIES => {
                tokio::time::sleep(pause).await;
                pause *= 2;
            }
            answer => return answer,
        }
    }
}

/// How the engine ended a job, and what we did to it.
struct Ended {
    /// Let go of while it runs (see `Remote::let_go`).
    left: bool,
    details: Option<Details>,
    stop: Option<Stop>,
    /// Set when the engine no longer knows the job, or never confirmed its
    /// stop: the job is `failed` with these words.
    failed: Option<String>,
}

impl Ended {
    /// The engine answered that it has no record of the job.
    fn engine_forgot(&self) -> bool {
        !self.left && self.details.is_none() && self.failed.is_none()
    }

    fn outcome(self, runner: &str, submission_id: &str) -> JobOutcome {
        if let Some(why) = self.failed {
            return failed(why);
        }
        let Some(details) = self.details else {
            return failed(format!("lost: the engine has no record of {submission_id}"));
        };
        let code = details
            .driver_exit_code
            .and_then(|code| i32::try_from(code).ok());
        match (details.status.as_str(), code, self.stop) {
            (_, _, Some(Stop::Limit(why))) => killed(Some(why)),
            ("STOPPED", _, Some(Stop::Asked)) => killed(None),
            // Stopped while we asked, but it ended by itself first.
            ("SUCCEEDED" | "FAILED", Some(code), _) if code >= 0 => completed(code),
            ("SUCCEEDED", None, _) => completed(0),
            // Python's return code of a process a signal ended.
            (_, Some(code), _) if code < 0 => {
                killed(Some(crate::words::signal(&crate::bash::signal_name(-code))))
            }
            (_, _, Some(Stop::Asked)) => killed(None),
            ("STOPPED", _, None) => failed(format!(
                "stopped outside jobs-host: runner {runner} reports {submission_id} STOPPED"
            )),
            _ => failed(engine_reason(&details)),
        }
    }
}

/// The engine's reason for a failure it gave no exit code for (a failed
/// start, a runtime environment that could not be set up), its first line.
fn engine_reason(details: &Details) -> String {
    let message = details
        .message
        .as_deref()
        .and_then(|m| m.lines().map(str::trim).find(|l| !l.is_empty()))
        .map(|m| shortened(m, 200));
    match (details.error_type.as_deref(), message) {
        (Some(kind), Some(message)) => format!("{kind}: {message}"),
        (None, Some(message)) => message,
        (Some(kind), None) => kind.to_owned(),
        (None, None) => format!("the engine reports {}", details.status),
    }
}

/// Why the engine has not started a job, short: its own words but for the
/// one it says of every queued job.
fn pending_reason(message: Option<&str>) -> String {
    let message = message.unwrap_or_default().trim();
    if message.is_empty() || message.starts_with("Job has not started yet") {
        return "waiting for resources or its runtime environment".to_owned();
    }
    shortened(message.lines().next().unwrap_or_default(), 200)
}

/// Follows the job's status until the engine says it has ended; sends the
/// stop when one is asked for or a limit is reached, and keeps the
/// placement saying what the engine says.
#[allow(clippy::too_many_arguments)]
async fn watch_status(
    runner: &Inner,
    remote: &Remote,
    placement: &Placement,
    submission_id: &str,
    timeout_ms: Option<u64>,
    output: &Mutex<Output>,
    limit_hit: &Notify,
    tail_closed: &Notify,
) -> Ended {
    let name = &runner.name;
    let deadline = timeout_ms.map(|ms| tokio::time::Instant::now() + Duration::from_millis(ms));
    let mut changed = Instant::now();
    let mut status = String::new();
    let mut unreachable_since: Option<Instant> = None;
    let mut stop: Option<Stop> = None;
    // When the stop was first sent, and last.
    let mut stop_sent: Option<Instant> = None;
    let mut stop_resent: Option<Instant> = None;
    let mut ran = false;
    let mut first = true;
    loop {
        if !first {
            let pause = if stop.is_some() || changed.elapsed() < SOON {
                POLL_SOON
            } else if status == "RUNNING" {
                POLL_RUNNING
            } else {
                POLL_QUEUED
            };
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = tail_closed.notified() => changed = Instant::now(),
                () = remote.stop.cancelled(), if stop.is_none() => stop = Some(Stop::Asked),
                () = remote.let_go.cancelled(), if stop.is_none() => {
                    return Ended {
                        left: true,
                        details: None,
                        stop,
                        failed: None,
                    };
                }
                () = limit_hit.notified(), if stop.is_none() => {
                    stop = lock(output).reached.clone().map(Stop::Limit);
                }
                () = sleep_until(deadline), if stop.is_none() && deadline.is_some() => {
                    let ms = timeout_ms.unwrap_or_default();
                    stop = Some(Stop::Limit(format!("time limit reached ({ms} ms)")));
                }
            }
        }
        first = false;
        if stop.is_none() && remote.stop.is_cancelled() {
            stop = Some(Stop::Asked);
        }
        // The stop is sent once, and again if the engine has not confirmed
        // it after a while (a stop sent while the head restarted).
        let resend = stop_resent.is_some_and(|at| at.elapsed() >= ENGINE_STOP_SLACK / 2);
        if stop.is_some() && (stop_sent.is_none() || resend) {
            match runner.client.stop(submission_id).await {
                Ok(_) => {
                    stop_sent.get_or_insert_with(Instant::now);
                    stop_resent = Some(Instant::now());
                }
                Err(EngineError::NotFound { .. }) => {
                    placement.set(format!("{name}: {submission_id}"));
                    // Lost: `Ended::outcome` says so.
                    return Ended {
                        left: false,
                        details: None,
                        stop,
                        failed: None,
                    };
                }
                Err(e) => placement.set(format!("{name}: {submission_id} stopping: {e}")),
            }
        }
        if let Some(at) = stop_sent
            && at.elapsed() > runner.config.grace + ENGINE_STOP_SLACK * 2
        {
            return Ended {
                left: false,
                details: None,
                stop,
                failed: Some(format!(
                    "stop not confirmed: runner {name} still reports {submission_id} running {} s after the stop; it may still run there",
                    at.elapsed().as_secs()
                )),
            };
        }
        match runner.client.details(submission_id).await {
            Ok(details) if details.is_terminal() => {
                placement.set(format!("{name}: {submission_id}"));
                return Ended {
                    left: false,
                    details: Some(details),
                    stop,
                    failed: None,
                };
            }
            // The engine keeps a job it never started queued after a stop
            // (it stops it when it would start): for us it has ended.
            Ok(details) if details.status == "PENDING" && stop_sent.is_some() && !ran => {
                placement.set(format!("{name}: {submission_id}"));
                return Ended {
                    left: false,
                    details: Some(Details {
                        status: "STOPPED".to_owned(),
                        ..details
                    }),
                    stop,
                    failed: None,
                };
            }
            Ok(details) => {
                unreachable_since = None;
                ran |= details.status != "PENDING";
                if details.status != status {
                    status.clone_from(&details.status);
                    changed = Instant::now();
                }
                let words = match details.status.as_str() {
                    "PENDING" => format!(
                        "{name}: {submission_id} pending: {}",
                        pending_reason(details.message.as_deref())
                    ),
                    _ => format!("{name}: {submission_id}"),
                };
                let words = match stop_sent {
                    Some(_) => format!("{words} stopping"),
                    None => words,
                };
                placement.set(words);
            }
            Err(EngineError::NotFound { .. }) => {
                // No longer `unreachable`: the engine answered.
                placement.set(format!("{name}: {submission_id}"));
                return Ended {
                    left: false,
                    details: None,
                    stop,
                    failed: None,
                };
            }
            // The head restarting, a proxy away: the job may run on; its
            // status is asked again.
            Err(e) => {
                let since = *unreachable_since.get_or_insert_with(Instant::now);
                placement.set(format!(
                    "{name}: {submission_id} unreachable for {} s: {e}",
                    since.elapsed().as_secs()
                ));
            }
        }
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// What the pump needs.
struct Pump {
    runner: Arc<Inner>,
    submission_id: String,
    cursor: Arc<Mutex<Cursor>>,
    output: Arc<Mutex<Output>>,
    limit_hit: Arc<Notify>,
    tail_closed: Arc<Notify>,
    ended: watch::Receiver<bool>,
}

/// The log tail into the capture, opened again with a growing pause until
/// the job has ended; stops taking output at the start's output limit.
async fn pump(mut pump: Pump) {
    let mut pause = TAIL_RETRY_FIRST;
    loop {
        let (any, closed) = tail::follow(
            &pump.runner.client,
            &pump.submission_id,
            &pump.cursor,
            |bytes| {
                if lock(&pump.output).take(bytes) {
                    pump.limit_hit.notify_one();
                }
            },
        )
        .await;
        if let Closed::Broken(e) = &closed {
            tracing::debug!(submission_id = %pump.submission_id, error = %e, "the log tail broke");
        }
        pump.tail_closed.notify_one();
        if *pump.ended.borrow() {
            return;
        }
        pause = if any {
            TAIL_RETRY_FIRST
        } else {
            (pause * 2).min(TAIL_RETRY_MAX)
        };
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            _ = pump.ended.changed() => return,
        }
    }
}

/// Reads the whole log once the job has ended and takes what lies past the
/// cursor: what the job wrote while the tail was away or after it closed.
/// A log the engine will not hand over whole is taken from the tail once
/// more; what neither gives is said in the job's stderr.
async fn read_the_rest(
    runner: &Inner,
    submission_id: &str,
    cursor: &Mutex<Cursor>,
    output: &Mutex<Output>,
    capture: &SharedCapture,
) {
    let why = match runner.client.logs(submission_id).await {
        // Newer engines cut a long log's head and say so: its bytes no
        // longer line up with the cursor.
        Ok(text) if text.starts_with("[LOG TRUNCATED") => "it kept only the log's end".to_owned(),
        Ok(text) => {
            let mut cursor = lock(cursor);
            let mut seen = 0;
            let rest = cursor.take(&mut seen, text.as_bytes());
            let mut output = lock(output);
            output.take(rest);
            output.finish();
            return;
        }
        Err(e) => e.to_string(),
    };
    let last = tail::follow(&runner.client, submission_id, cursor, |bytes| {
        lock(output).take(bytes);
    });
    let last = tokio::time::timeout(TAIL_LAST_TRY, last).await;
    lock(output).finish();
    match last {
        Ok((_, Closed::ByEngine)) => {}
        Ok((_, Closed::Broken(e))) => note_unread(capture, &runner.name, &format!("{why}; {e}")),
        Err(_) => note_unread(capture, &runner.name, &why),
    }
}

fn note_unread(capture: &SharedCapture, runner: &str, why: &str) {
    let note = format!(
        "[jobs-host: the end of this job's log could not be read from runner {runner}: {why}]\n"
    );
    capture.push(OutputStream::Stderr, note.as_bytes());
}

/// `text` held to `max` bytes at a character boundary, with `…` when cut.
fn shortened(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::OutcomeStatus;

    fn details(status: &str, code: Option<i64>, message: Option<&str>) -> Details {
        Details {
            status: status.to_owned(),
            message: message.map(str::to_owned),
            error_type: None,
            driver_exit_code: code,
        }
    }

    fn outcome(details: Option<Details>, stop: Option<Stop>) -> (OutcomeStatus, Option<String>) {
        let o = Ended {
            left: false,
            details,
            stop,
            failed: None,
        }
        .outcome("ray", "jobshost-abc-bash-1");
        (o.status, o.detail)
    }

    #[test]
    fn an_exit_code_is_the_engines_and_never_invented() {
        assert_eq!(
            outcome(Some(details("FAILED", Some(7), None)), None),
            (OutcomeStatus::Completed, Some("exit code: 7".into()))
        );
        assert_eq!(
            outcome(Some(details("SUCCEEDED", Some(0), None)), None),
            (OutcomeStatus::Completed, Some("exit code: 0".into()))
        );
        // A failure with no code (a runtime environment that failed) says
        // the engine's reason.
        assert_eq!(
            outcome(
                Some(details("FAILED", None, Some("runtime env failed\ntrace"))),
                None
            ),
            (OutcomeStatus::Failed, Some("runtime env failed".into()))
        );
        assert_eq!(
            outcome(Some(details("FAILED", Some(-9), None)), None),
            (OutcomeStatus::Killed, Some("signal: SIGKILL".into()))
        );
    }

    #[test]
    fn killed_only_when_we_asked() {
        assert_eq!(
            outcome(Some(details("STOPPED", None, None)), Some(Stop::Asked)),
            (OutcomeStatus::Killed, None)
        );
        let (status, detail) = outcome(Some(details("STOPPED", None, None)), None);
        assert_eq!(status, OutcomeStatus::Failed);
        assert!(detail.unwrap().starts_with("stopped outside jobs-host"));
        assert_eq!(
            outcome(
                Some(details("STOPPED", None, None)),
                Some(Stop::Limit("time limit reached (5 ms)".into()))
            ),
            (
                OutcomeStatus::Killed,
                Some("time limit reached (5 ms)".into())
            )
        );
        // A job that ended by itself before our stop took keeps its code.
        assert_eq!(
            outcome(Some(details("SUCCEEDED", Some(0), None)), Some(Stop::Asked)),
            (OutcomeStatus::Completed, Some("exit code: 0".into()))
        );
        assert_eq!(
            outcome(None, None),
            (
                OutcomeStatus::Failed,
                Some("lost: the engine has no record of jobshost-abc-bash-1".into())
            )
        );
    }

    #[test]
    fn shortened_cuts_at_a_character() {
        assert_eq!(shortened("héllo", 2), "h…");
        assert_eq!(shortened("hello", 5), "hello");
    }
}
