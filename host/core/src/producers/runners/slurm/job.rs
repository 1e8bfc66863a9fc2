//! One job's life on Slurm: its batch script and submit, the tail of its
//! two output files into its capture, its exit record, its state from the
//! runner's poll, its signals and stop, and its end.
//!
//! The end is the job's own exit record, written by the relay beside its
//! output files, once the scheduler no longer runs the job; the
//! scheduler's state only says what the record cannot (a cancel from
//! outside, a time limit, a node lost) and stands in for a record that is
//! missing. A job with neither is `failed`, `lost`, never `completed`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::super::shared::{completed, failed, killed};
use super::cli::{self, Cancel, Record};
use super::poll::Seen;
use super::{Inner, Remote};
use crate::capture::{OutputStream, SharedCapture};
use crate::producer::CommandRequest;
use crate::registry::{JobOutcome, Placement};

/// The relay the batch script runs the command under (see its header).
const RELAY: &str = include_str!("relay.py");

/// How often the output files and the exit record are looked at while they
/// grow, and at most while they do not.
const TAIL_FIRST: Duration = Duration::from_millis(200);
const TAIL_MOST: Duration = Duration::from_millis(800);

/// How much of a file one read takes.
const READ_BLOCK: usize = 64 << 10;

/// How often the scheduler is asked, job by job, once the exit record is
/// there, and for how long it may go on running the job after it: the
/// record is the result, the scheduler only says whether someone else
/// ended the job.
const CONFIRM_EVERY: Duration = Duration::from_millis(250);
const CONFIRM_MOST: Duration = Duration::from_secs(5);
/// How long Slurm may take to finish ending a job once it says
/// `COMPLETING` (its `KillWait`, its epilog).
const COMPLETING_MOST: Duration = Duration::from_secs(120);

/// How often a stop the scheduler has not carried out is sent again, and
/// when it is given up on.
const STOP_AGAIN: Duration = Duration::from_secs(15);
const STOP_GIVE_UP: Duration = Duration::from_secs(180);

/// The states a job does not leave.
const ENDED: &[&str] = &[
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "BOOT_FAIL",
    "DEADLINE",
    "PREEMPTED",
    "SPECIAL_EXIT",
];

/// The states of a job that waits to run (again).
const WAITING: &[&str] = &[
    "PENDING",
    "CONFIGURING",
    "REQUEUED",
    "REQUEUE_HOLD",
    "REQUEUE_FED",
    "RESV_DEL_HOLD",
];

/// Where one job's files are: `STEM.out`, `STEM.err` and `STEM.exit`.
#[derive(Debug, Clone)]
pub(super) struct Files {
    pub stem: PathBuf,
}

impl Files {
    pub(super) fn out(&self) -> PathBuf {
        self.with(".out")
    }
    pub(super) fn err(&self) -> PathBuf {
        self.with(".err")
    }
    pub(super) fn exit(&self) -> PathBuf {
        self.with(".exit")
    }
    fn with(&self, end: &str) -> PathBuf {
        let mut path = self.stem.clone().into_os_string();
        path.push(end);
        PathBuf::from(path)
    }
    /// Removes the job's files (its output is in its capture by then).
    pub(super) fn remove(&self) {
        for path in [self.out(), self.err(), self.exit()] {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// What a new job's task needs.
pub(super) struct Job {
    pub runner: Arc<Inner>,
    pub remote: Arc<Remote>,
    pub capture: SharedCapture,
    pub placement: Placement,
    pub request: CommandRequest,
    /// The registry's id for the job, once the start has it.
    pub id: tokio::sync::oneshot::Receiver<String>,
}

/// The sbatch arguments and the batch script of a job.
pub(super) fn batch(
    runner: &Inner,
    job_id: &str,
    files: &Files,
    request: &CommandRequest,
) -> (Vec<String>, String) {
    let mut args = vec![
        format!("--job-name={}-{job_id}", runner.prefix),
        format!("--comment=jobs-host:{}-{job_id}", runner.prefix),
        format!("--output={}", files.out().display()),
        format!("--error={}", files.err().display()),
        "--kill-on-invalid-dep=yes".to_owned(),
    ];
    if let Some(partition) = &runner.partition {
        args.push(format!("--partition={partition}"));
    }
    let workdir = match (&runner.config.default_workdir, &request.workdir) {
        (Some(default), Some(asked)) => Some(default.join(asked)),
        (None, asked) => asked.clone(),
        (default, None) => default.clone(),
    };
    if let Some(workdir) = workdir {
        args.push(format!("--chdir={}", workdir.display()));
    }
    if let Some(resources) = &request.resources {
        if let Some(cpus) = resources.cpus {
            args.push(format!("--cpus-per-task={}", cpus.ceil().max(1.0)));
        }
        if let Some(gpus) = resources.gpus {
            args.push(format!("--gpus={}", gpus.ceil().max(1.0)));
        }
        if let Some(bytes) = resources.memory_bytes {
            // Slurm's unit is the mebibyte: never less than asked.
            args.push(format!("--mem={}M", bytes.div_ceil(1 << 20).max(1)));
        }
    }
    args.extend(runner.config.args.iter().cloned());
    let mut script = String::from("#!/bin/bash\n");
    for (key, value) in &request.env {
        script.push_str(&format!("export {key}={}\n", quoted(value)));
    }
    script.push_str(&format!(
        "export JOBS_HOST_COMMAND={}\nexport JOBS_HOST_EXIT_RECORD={}\n",
        quoted(&request.command),
        quoted(&files.exit().to_string_lossy())
    ));
    // Without a Python on the node the command runs under bash alone: no
    // exit record, and the scheduler's state is the result.
    script.push_str(&format!(
        "command -v python3 >/dev/null 2>&1 && exec python3 -I -c {}\n\
         c=$JOBS_HOST_COMMAND; unset JOBS_HOST_COMMAND JOBS_HOST_EXIT_RECORD; exec bash -c \"$c\"\n",
        quoted(RELAY)
    ));
    (args, script)
}

/// `text` as one word of bash, whatever bytes it holds.
fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
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
    } = job;
    let Ok(id) = id.await else {
        return killed(None);
    };
    let files = Files {
        stem: runner.config.dir.join(format!("{}-{id}", runner.prefix)),
    };
    if let Some(marker) = &remote.marker
        && let Err(e) = super::durable::mark(marker, &files)
    {
        // The next host could not find the job's files: it reads lost.
        tracing::warn!(file = %marker.display(), error = %e, "a Slurm job's place is not kept");
    }
    if remote.stop.is_cancelled() || remote.let_go.is_cancelled() {
        return killed(Some(crate::words::KILLED_BEFORE_EXIT.to_owned()));
    }
    let (args, script) = batch(&runner, &id, &files, &request);
    let submitted = cli::sbatch(&args, &script).await;
    if let Ok(slurm_id) = &submitted {
        let _ = remote.engine_id.set(slurm_id.clone());
    }
    remote.submitted.send_replace(true);
    let slurm_id = match submitted {
        Ok(slurm_id) => slurm_id,
        Err(e) => {
            // An sbatch that gave no answer may still have queued the job:
            // its name is ours alone.
            if matches!(e, cli::SlurmError::Timeout { .. }) {
                // A slow slurmctld may queue it later still: asked a few
                // times, off this job's end.
                let name = format!("{}-{id}", runner.prefix);
                tokio::spawn(async move {
                    for _ in 0..6 {
                        if let Err(e) = cli::scancel_name(&name).await {
                            tracing::warn!(job_name = %name, error = %e, "a submit that timed out may have left a job");
                        }
                        tokio::time::sleep(Duration::from_secs(10)).await;
                    }
                });
            }
            let words = crate::words::spawn_failed(&format!("runner {}: {e}", runner.name));
            capture.push(OutputStream::Stderr, words.as_bytes());
            return killed(Some(crate::words::KILLED_BEFORE_EXIT.to_owned()));
        }
    };
    placement.set(format!("{}: job {slurm_id} submitted", runner.name));
    follow(Followed {
        runner,
        remote,
        capture,
        placement,
        slurm_id,
        files,
        tail: Tail::new(request.limits.output_bytes),
        timeout_ms: request.limits.timeout_ms,
    })
    .await
}

/// What the task of a submitted job needs.
pub(super) struct Followed {
    pub runner: Arc<Inner>,
    pub remote: Arc<Remote>,
    pub capture: SharedCapture,
    pub placement: Placement,
    pub slurm_id: String,
    pub files: Files,
    pub tail: Tail,
    pub timeout_ms: Option<u64>,
}

/// Why we asked the scheduler to end a job.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Stop {
    /// A kill (the model's, a session's end, the host's shutdown).
    Asked,
    /// A limit of the start: its words are the job's detail.
    Limit(String),
}

/// How the relay says the command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Exit {
    Code(i32),
    Signal(i32),
}

/// An exit record as the relay writes it: how the command ended, and in
/// which run of the job (Slurm's restart count: a requeue runs it again).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stamped {
    pub exit: Exit,
    pub run: u32,
}

/// Reads an exit record: `exit N run R` or `signal N run R`.
pub(super) fn read_exit(path: &Path) -> Option<Stamped> {
    let text = std::fs::read_to_string(path).ok()?;
    let words: Vec<&str> = text.split_whitespace().collect();
    let [kind, number, "run", run] = words[..] else {
        return None;
    };
    let number: i32 = number.parse().ok()?;
    let exit = match kind {
        "exit" => Exit::Code(number),
        "signal" => Exit::Signal(number),
        _ => return None,
    };
    Some(Stamped {
        exit,
        run: run.parse().ok()?,
    })
}

/// The record's exit when it is the run the scheduler's record speaks of
/// (a record left by a run before a requeue is not this run's end).
fn this_runs(record: Option<Stamped>, slurm: Option<&Record>) -> Option<Exit> {
    let record = record?;
    match slurm.and_then(|r| r.restarts) {
        Some(restarts) if restarts != record.run => None,
        _ => Some(record.exit),
    }
}

/// The two output files read by byte offset into the capture, up to the
/// start's output limit.
pub(super) struct Tail {
    /// Bytes taken of `.out` and `.err`.
    pub offsets: [u64; 2],
    pushed: u64,
    limit: Option<u64>,
    /// Set once the limit is reached: the job is stopped for it.
    reached: Option<String>,
    /// The stderr line being read while it may be slurmstepd's own.
    held: Option<Vec<u8>>,
    /// Whether stderr's next byte begins a line.
    line_start: bool,
}

/// How slurmstepd's own lines in a job's stderr begin: `slurmstepd:` or
/// `slurmstepd-NODE:`.
const STEPD: &[u8] = b"slurmstepd";

/// Whether a whole stderr line is slurmstepd's word on the job (`***
/// JOB 12 ON node CANCELLED AT … ***`): the job's state says it already,
/// and it is not the job's output.
fn stepd_line(line: &[u8]) -> bool {
    let text = String::from_utf8_lossy(line);
    let text = text.trim_end();
    text.starts_with("slurmstepd")
        && text.ends_with(" ***")
        && (text.contains(": *** JOB ") || text.contains(": *** STEP "))
}

/// Whether a stderr line begun with `part` may still be slurmstepd's.
fn may_be_stepd(part: &[u8]) -> bool {
    part.len() < 512 && (STEPD.starts_with(part) || part.starts_with(STEPD))
}

impl Tail {
    pub(super) fn new(limit: Option<u64>) -> Tail {
        Tail {
            offsets: [0, 0],
            pushed: 0,
            limit,
            reached: None,
            held: None,
            line_start: true,
        }
    }

    /// Stderr's bytes without slurmstepd's own lines.
    fn job_stderr(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut kept = Vec::with_capacity(bytes.len());
        for part in bytes.split_inclusive(|&b| b == b'\n') {
            let ends = part.ends_with(b"\n");
            let line = match self.held.take() {
                Some(mut held) => {
                    held.extend_from_slice(part);
                    held
                }
                None if self.line_start && may_be_stepd(part) => part.to_vec(),
                None => {
                    kept.extend_from_slice(part);
                    self.line_start = ends;
                    continue;
                }
            };
            self.line_start = ends;
            if ends {
                if !stepd_line(&line) {
                    kept.extend_from_slice(&line);
                }
            } else if may_be_stepd(&line) {
                self.held = Some(line);
            } else {
                kept.extend_from_slice(&line);
            }
        }
        kept
    }

    /// A whole stderr file without slurmstepd's own lines.
    pub(super) fn stderr_of(bytes: &[u8]) -> Vec<u8> {
        let mut tail = Tail::new(None);
        let mut kept = tail.job_stderr(bytes);
        kept.extend(tail.held.take().unwrap_or_default());
        kept
    }

    /// Gives back a stderr line held at the end of the job.
    pub(super) fn finish(&mut self, capture: &SharedCapture) {
        if let Some(held) = self.held.take() {
            self.push(OutputStream::Stderr, &held, capture);
        }
    }

    /// Reads what the files gained since the last look; answers whether
    /// anything came. A file shorter than what was taken of it means the
    /// job began again (a requeue truncates both files as the new run
    /// starts): that is said once, in the job's stderr, and both files are
    /// read from their start.
    pub(super) fn look(&mut self, files: &Files, capture: &SharedCapture) -> bool {
        self.look_to(files, capture, false)
    }

    /// [`Tail::look`], to the files' ends however far they grew while they
    /// were read (the job has ended) or, while it runs, to the lengths
    /// they had when the look began: a job that writes faster than it is
    /// read never holds its task in one look.
    pub(super) fn look_to(&mut self, files: &Files, capture: &SharedCapture, to_end: bool) -> bool {
        let paths = [files.out(), files.err()];
        // Opened, not only looked at: opening a file on NFS fetches its
        // length afresh, where a bare `stat` may answer from a cache. A
        // file that cannot be opened now (not made yet, out of
        // descriptors) is looked at next time, never taken as emptied.
        let mut opened = paths.each_ref().map(|path| {
            std::fs::File::open(path)
                .and_then(|f| f.metadata().map(|m| (f, m.len())))
                .ok()
        });
        let lengths = opened.each_ref().map(|o| o.as_ref().map(|(_, len)| *len));
        if let Some(index) = (0..2).find(|&i| lengths[i].is_some_and(|len| len < self.offsets[i])) {
            let note = format!(
                "[jobs-host: {} went from {} to {} bytes: Slurm began the job again (a requeue); its output from here on is the new run's]\n",
                paths[index].display(),
                self.offsets[index],
                lengths[index].unwrap_or_default(),
            );
            capture.push(OutputStream::Stderr, note.as_bytes());
            self.offsets = [0, 0];
            // The old run's last stderr line, whole or not, is its own.
            if let Some(held) = self.held.take() {
                self.push(OutputStream::Stderr, &held, capture);
            }
            self.line_start = true;
        }
        let mut any = false;
        let mut block = Vec::new();
        for (index, stream) in [OutputStream::Stdout, OutputStream::Stderr]
            .into_iter()
            .enumerate()
        {
            // The length of a file just opened is fresh (NFS's close-to-open).
            let Some((file, length)) = opened[index]
                .as_mut()
                .filter(|(_, length)| *length > self.offsets[index])
            else {
                continue;
            };
            let until = if to_end { u64::MAX } else { *length };
            // Read to the end, past the length taken: it may have grown.
            let at = {
                use std::io::{Seek, SeekFrom};
                file.seek(SeekFrom::Start(self.offsets[index]))
            };
            if at.is_err() {
                continue;
            }
            while self.reached.is_none() && self.offsets[index] < until {
                use std::io::Read;
                let want = usize::try_from(until - self.offsets[index])
                    .map_or(READ_BLOCK, |w| w.min(READ_BLOCK));
                block.resize(want, 0);
                let read = match file.read(&mut block) {
                    Ok(0) | Err(_) => break,
                    Ok(read) => read,
                };
                self.offsets[index] += read as u64;
                match stream {
                    OutputStream::Stderr => {
                        let kept = self.job_stderr(&block[..read]);
                        self.push(stream, &kept, capture);
                    }
                    _ => self.push(stream, &block[..read], capture),
                }
                any = true;
            }
        }
        any
    }

    fn push(&mut self, stream: OutputStream, bytes: &[u8], capture: &SharedCapture) {
        if self.reached.is_some() {
            return;
        }
        let max = self.limit.unwrap_or(u64::MAX);
        let room = usize::try_from(max.saturating_sub(self.pushed)).unwrap_or(usize::MAX);
        let part = &bytes[..bytes.len().min(room)];
        if !part.is_empty() {
            capture.push(stream, part);
            self.pushed += part.len() as u64;
        }
        if bytes.len() > room {
            self.reached = Some(format!("output limit reached ({max} bytes)"));
        }
    }
}

/// A submitted job to its end.
pub(super) async fn follow(job: Followed) -> JobOutcome {
    let Followed {
        runner,
        remote,
        capture,
        placement,
        slurm_id,
        files,
        mut tail,
        timeout_ms,
    } = job;
    let name = runner.name.clone();
    let watched = runner.poller.watch(&slurm_id);
    let deadline = timeout_ms.map(|ms| tokio::time::Instant::now() + Duration::from_millis(ms));
    let mut stop: Option<Stop> = None;
    let mut stop_sent: Option<Instant> = None;
    let mut unreachable_since: Option<Instant> = None;
    let mut pause = TAIL_FIRST;
    let mut seen_rx = watched.seen.clone();
    let end = loop {
        // The files first: what the job wrote before it ended is taken
        // before its end is.
        let any = {
            let files = files.clone();
            let capture = capture.clone();
            let (back, took) = tokio::task::spawn_blocking(move || {
                let any = tail.look(&files, &capture);
                (tail, any)
            })
            .await
            .unwrap_or_else(|e| panic!("reading a job's files: {e}"));
            tail = back;
            took
        };
        pause = if any {
            TAIL_FIRST
        } else {
            (pause * 2).min(TAIL_MOST)
        };
        if stop.is_none()
            && let Some(why) = tail.reached.clone()
        {
            stop = Some(Stop::Limit(why));
        }
        if stop.is_none() && remote.stop.is_cancelled() {
            stop = Some(Stop::Asked);
        }
        let resend = stop_sent.is_some_and(|at| at.elapsed() >= STOP_AGAIN);
        if stop.is_some() && (stop_sent.is_none() || resend) {
            if stop_sent.is_some_and(|at| at.elapsed() >= STOP_GIVE_UP) {
                break End {
                    failed: Some(format!(
                        "stop not confirmed: runner {name} still reports job {slurm_id} running {} s after the stop; it may still run there",
                        STOP_GIVE_UP.as_secs()
                    )),
                    ..End::default()
                };
            }
            if let Err(e) = cli::scancel(&slurm_id, Cancel::Job).await {
                tracing::debug!(%slurm_id, error = %e, "scancel");
            }
            stop_sent = Some(stop_sent.unwrap_or_else(Instant::now));
            if resend {
                stop_sent = Some(Instant::now());
            }
            watched.soon();
        }
        let record = read_exit(&files.exit());
        let seen = watched.seen.borrow().clone();
        match seen {
            Seen::Listed(listed) if ENDED.contains(&listed.state.as_str()) => {
                let slurm = match cli::scontrol_job(&slurm_id).await {
                    // Begun again since the poll (a requeue): followed on.
                    Ok(Some(found)) if !ENDED.contains(&found.state.as_str()) => None,
                    Ok(Some(found)) => Some(found),
                    _ => Some(Record {
                        state: listed.state,
                        reason: listed.reason,
                        exit: None,
                        restarts: None,
                    }),
                };
                if let Some(slurm) = slurm {
                    placement.set(format!("{name}: job {slurm_id}"));
                    let record = record_at_end(&files).await;
                    break End {
                        record: this_runs(record, Some(&slurm)),
                        slurm: Some(slurm),
                        ..End::default()
                    };
                }
            }
            Seen::Listed(listed) if WAITING.contains(&listed.state.as_str()) => {
                unreachable_since = None;
                let words = format!("{name}: job {slurm_id} pending: {}", listed.reason);
                placement.set(match stop_sent {
                    Some(_) => format!("{words} stopping"),
                    None => words,
                });
            }
            Seen::Listed(_) if record.is_some() => {
                // The command ended; the scheduler is ending the job, or
                // queueing it again (a requeue: the record is the old run's).
                if let Some(end) = confirm(&slurm_id, &files).await {
                    break end;
                }
            }
            Seen::Listed(_) => {
                unreachable_since = None;
                placement.set(match stop_sent {
                    Some(_) => format!("{name}: job {slurm_id} stopping"),
                    None => format!("{name}: job {slurm_id}"),
                });
            }
            Seen::Absent => {
                if let Some(end) = forgotten(&slurm_id, &files).await {
                    placement.set(format!("{name}: job {slurm_id}"));
                    break end;
                }
            }
            Seen::Unreachable(e) => {
                let since = *unreachable_since.get_or_insert_with(Instant::now);
                if record.is_some() && since.elapsed() >= CONFIRM_MOST {
                    break End {
                        record: record.map(|r| r.exit),
                        ..End::default()
                    };
                }
                placement.set(format!(
                    "{name}: job {slurm_id} unreachable for {} s: {e}",
                    since.elapsed().as_secs()
                ));
            }
            Seen::NotYet => {}
        }
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            _ = seen_rx.changed() => {}
            () = remote.stop.cancelled(), if stop.is_none() => {}
            () = remote.let_go.cancelled() => {
                tracing::info!(runner = %name, %slurm_id, "left running on the scheduler");
                return killed(Some(format!("left running on runner {name} as job {slurm_id}")));
            }
            () = sleep_until(deadline), if stop.is_none() && deadline.is_some() => {
                let ms = timeout_ms.unwrap_or_default();
                stop = Some(Stop::Limit(format!("time limit reached ({ms} ms)")));
            }
        }
    };
    // What the job wrote last, after the look that found its end.
    let capture = {
        let files = files.clone();
        tokio::task::spawn_blocking(move || {
            tail.look_to(&files, &capture, true);
            tail.finish(&capture);
            capture
        })
        .await
        .unwrap_or_else(|e| panic!("reading a job's files: {e}"))
    };
    capture.close();
    match &remote.marker {
        // Beside the marker, for a host that takes the job on after this
        // one dies before its end is recorded.
        Some(marker) => {
            if let Err(e) = super::durable::keep(&files, marker) {
                tracing::warn!(file = %marker.display(), error = %e, "a Slurm job's files stay in the shared directory");
            }
        }
        None => files.remove(),
    }
    End { stop, ..end }.outcome(&name, &slurm_id)
}

/// The exit record is there while the scheduler still runs the job: asks
/// it, job by job, until it says how the job ended. It may take
/// [`CONFIRM_MOST`] to leave `RUNNING` (the batch script's last steps) and
/// [`COMPLETING_MOST`] to finish `COMPLETING` (its processes killed, its
/// epilog); past that, or when it no longer knows the job, the record
/// alone is the end. `None`: the job waits to run again (a requeue), and
/// the record was the old run's.
async fn confirm(slurm_id: &str, files: &Files) -> Option<End> {
    let since = Instant::now();
    loop {
        let found = cli::scontrol_job(slurm_id).await;
        // Read after the scheduler's answer: never older than it.
        let record = read_exit(&files.exit());
        let most = match &found {
            Ok(Some(found)) if ENDED.contains(&found.state.as_str()) => {
                return Some(End {
                    record: this_runs(record, Some(found)),
                    slurm: Some(found.clone()),
                    ..End::default()
                });
            }
            Ok(Some(found)) if WAITING.contains(&found.state.as_str()) => return None,
            // A run begun again since the record was written.
            Ok(Some(found)) if this_runs(record, Some(found)).is_none() => return None,
            Ok(Some(found)) if found.state == "COMPLETING" => COMPLETING_MOST,
            Ok(None) => Duration::ZERO,
            _ => CONFIRM_MOST,
        };
        if since.elapsed() >= most {
            return Some(End {
                record: record.map(|r| r.exit),
                ..End::default()
            });
        }
        tokio::time::sleep(CONFIRM_EVERY).await;
    }
}

/// The poll no longer lists the job: its record, where slurmctld or the
/// accounting keep one, and the exit record decide. `None`: slurmctld
/// says the job has not ended after all (the poll missed it).
async fn forgotten(slurm_id: &str, files: &Files) -> Option<End> {
    let slurm = match cli::scontrol_job(slurm_id).await {
        Ok(Some(found)) if !ENDED.contains(&found.state.as_str()) => return None,
        Ok(Some(found)) => Some(found),
        _ => cli::sacct_job(slurm_id).await.ok().flatten(),
    };
    let record = record_at_end(files).await;
    Some(End {
        record: this_runs(record, slurm.as_ref()),
        slurm,
        ..End::default()
    })
}

/// How long an ended job's exit record is looked for when it is not there
/// at once: on NFS a name looked up and not found may stay "not found" in
/// the client's cache for a while.
const RECORD_LATE: Duration = Duration::from_secs(3);

/// The exit record of a job the scheduler says has ended, looked for again
/// for [`RECORD_LATE`] (its directory read first, which refreshes a
/// cached absence) before it is taken to be missing.
async fn record_at_end(files: &Files) -> Option<Stamped> {
    let since = Instant::now();
    loop {
        let exit = files.exit();
        let found = tokio::task::spawn_blocking(move || {
            if let Some(dir) = exit.parent() {
                let _ = std::fs::read_dir(dir).map(|entries| entries.count());
            }
            read_exit(&exit)
        })
        .await
        .ok()
        .flatten();
        if found.is_some() || since.elapsed() >= RECORD_LATE {
            return found;
        }
        tokio::time::sleep(CONFIRM_EVERY).await;
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// What is known of a job's end.
#[derive(Debug, Default)]
struct End {
    /// The relay's exit record.
    record: Option<Exit>,
    /// The scheduler's record of the job.
    slurm: Option<Record>,
    stop: Option<Stop>,
    /// Set when the job is `failed` with these words whatever else is known.
    failed: Option<String>,
}

/// What Slurm's failure states mean, in words.
fn state_words(state: &str) -> Option<&'static str> {
    Some(match state {
        "TIMEOUT" => "it reached its Slurm time limit",
        "NODE_FAIL" => "its node failed",
        "OUT_OF_MEMORY" => "it ran out of memory",
        "BOOT_FAIL" => "its node failed to boot",
        "DEADLINE" => "it passed its deadline",
        "PREEMPTED" => "it was preempted",
        _ => return None,
    })
}

impl End {
    fn outcome(self, runner: &str, slurm_id: &str) -> JobOutcome {
        if let Some(why) = self.failed {
            return failed(why);
        }
        if let Some(Stop::Limit(why)) = self.stop {
            return killed(Some(why));
        }
        let asked = self.stop == Some(Stop::Asked);
        let state = self.slurm.as_ref().map(|r| r.state.as_str());
        if state == Some("CANCELLED") {
            return if asked {
                killed(None)
            } else {
                failed(format!(
                    "stopped outside jobs-host: runner {runner} reports job {slurm_id} CANCELLED"
                ))
            };
        }
        if let Some(words) = state.and_then(state_words) {
            return if asked {
                killed(None)
            } else {
                failed(format!(
                    "runner {runner} reports job {slurm_id} {}: {words}",
                    state.unwrap_or_default()
                ))
            };
        }
        match (self.record, self.slurm.and_then(|r| r.exit)) {
            (Some(Exit::Code(code)), _) => completed(code),
            (Some(Exit::Signal(_)), _) if asked => killed(None),
            (Some(Exit::Signal(signal)), _) | (None, Some((_, signal))) if signal != 0 => killed(
                Some(crate::words::signal(&crate::bash::signal_name(signal))),
            ),
            (None, Some((code, _))) => completed(code),
            _ if asked => killed(None),
            _ => failed(format!(
                "lost: runner {runner} has no record of job {slurm_id} and the job left no exit record"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::OutcomeStatus;

    #[test]
    fn slurmstepds_own_lines_are_not_the_jobs_wherever_cut() {
        let err = b"job says slurmstepd: x\nslurmstepd-node1: error: *** JOB 25 ON node1 CANCELLED AT 2026-12-04T17:25:35 ***\nslurmstep\nlast";
        for cut in [1, 7, 30, 60, err.len()] {
            let mut tail = Tail::new(None);
            let mut kept = Vec::new();
            for part in err.chunks(cut) {
                kept.extend(tail.job_stderr(part));
            }
            kept.extend(tail.held.take().unwrap_or_default());
            assert_eq!(
                String::from_utf8(kept).unwrap(),
                "job says slurmstepd: x\nslurmstep\nlast",
                "cut {cut}"
            );
        }
    }

    fn slurm(state: &str, exit: Option<(i32, i32)>) -> Option<Record> {
        Some(Record {
            state: state.to_owned(),
            reason: String::new(),
            exit,
            restarts: None,
        })
    }

    fn outcome(
        record: Option<Exit>,
        slurm: Option<Record>,
        stop: Option<Stop>,
    ) -> (OutcomeStatus, Option<String>) {
        let o = End {
            record,
            slurm,
            stop,
            failed: None,
        }
        .outcome("slurm", "12");
        (o.status, o.detail)
    }

    #[test]
    fn the_exit_record_beats_the_schedulers_code() {
        // `COMPLETED 0:0` after `exit 1` (a wrong row): the record wins.
        assert_eq!(
            outcome(Some(Exit::Code(1)), slurm("COMPLETED", Some((0, 0))), None),
            (OutcomeStatus::Completed, Some("exit code: 1".into()))
        );
        // No record (no Python on the node): the scheduler's code.
        assert_eq!(
            outcome(None, slurm("FAILED", Some((3, 0))), None),
            (OutcomeStatus::Completed, Some("exit code: 3".into()))
        );
        assert_eq!(
            outcome(Some(Exit::Signal(9)), slurm("FAILED", Some((0, 9))), None),
            (OutcomeStatus::Killed, Some("signal: SIGKILL".into()))
        );
    }

    #[test]
    fn cancelled_is_killed_only_when_we_asked() {
        assert_eq!(
            outcome(
                Some(Exit::Signal(15)),
                slurm("CANCELLED", Some((0, 15))),
                Some(Stop::Asked)
            ),
            (OutcomeStatus::Killed, None)
        );
        let (status, detail) = outcome(
            Some(Exit::Signal(15)),
            slurm("CANCELLED", Some((0, 15))),
            None,
        );
        assert_eq!(status, OutcomeStatus::Failed);
        assert_eq!(
            detail.unwrap(),
            "stopped outside jobs-host: runner slurm reports job 12 CANCELLED"
        );
        assert_eq!(
            outcome(
                None,
                slurm("CANCELLED", None),
                Some(Stop::Limit("time limit reached (5 ms)".into()))
            ),
            (
                OutcomeStatus::Killed,
                Some("time limit reached (5 ms)".into())
            )
        );
    }

    #[test]
    fn a_job_with_no_record_anywhere_is_lost_never_completed() {
        let (status, detail) = outcome(None, None, None);
        assert_eq!(status, OutcomeStatus::Failed);
        assert!(detail.unwrap().starts_with("lost: "));
        let (status, detail) = outcome(
            Some(Exit::Signal(15)),
            slurm("TIMEOUT", Some((0, 15))),
            None,
        );
        assert_eq!(status, OutcomeStatus::Failed);
        assert_eq!(
            detail.unwrap(),
            "runner slurm reports job 12 TIMEOUT: it reached its Slurm time limit"
        );
    }

    #[test]
    fn an_exit_record_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.exit");
        std::fs::write(&path, "exit 3 run 0\n").unwrap();
        let record = read_exit(&path);
        assert_eq!(
            record,
            Some(Stamped {
                exit: Exit::Code(3),
                run: 0
            })
        );
        std::fs::write(&path, "signal 15 run 2\n").unwrap();
        assert_eq!(
            read_exit(&path).map(|r| (r.exit, r.run)),
            Some((Exit::Signal(15), 2))
        );
        for garbage in ["garbage", "exit 3", "exit x run 0", "exit 3 run"] {
            std::fs::write(&path, garbage).unwrap();
            assert_eq!(read_exit(&path), None, "{garbage}");
        }
        // The record of the run before a requeue is not the end of the next.
        let ended = slurm("COMPLETED", Some((0, 0))).map(|r| Record {
            restarts: Some(1),
            ..r
        });
        assert_eq!(this_runs(record, ended.as_ref()), None);
        assert_eq!(
            this_runs(
                Some(Stamped {
                    exit: Exit::Code(3),
                    run: 1
                }),
                ended.as_ref()
            ),
            Some(Exit::Code(3))
        );
    }

    #[test]
    fn a_truncated_file_is_said_once_and_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let files = Files {
            stem: dir.path().join("j"),
        };
        let capture = SharedCapture::new(&dir.path().join("spill"), Default::default(), None);
        let mut tail = Tail::new(None);
        std::fs::write(files.out(), "first run\n").unwrap();
        assert!(tail.look(&files, &capture));
        assert!(!tail.look(&files, &capture));
        std::fs::write(files.err(), "old run's end\n").unwrap();
        assert!(tail.look(&files, &capture));
        // The new run truncates both files.
        std::fs::write(files.out(), "again\n").unwrap();
        std::fs::write(files.err(), "").unwrap();
        assert!(tail.look(&files, &capture));
        assert_eq!(tail.offsets, [6, 0]);
        let read = capture.read_delta();
        assert_eq!(
            read.matches("Slurm began the job again").count(),
            1,
            "{read}"
        );
        assert!(
            read.contains("first run\n") && read.contains("again\n"),
            "{read}"
        );
    }
}
