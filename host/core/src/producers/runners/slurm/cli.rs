//! Slurm's commands as this host runs them (`sbatch`, `squeue`, `scontrol`,
//! `sacct`, `scancel`), each with a time limit, and their machine formats
//! read: `sbatch --parsable`, `squeue -h -o`, `scontrol show job -o`,
//! `sacct -P`.

use std::collections::HashMap;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncWriteExt;

/// How long one command may take: slurmctld's own message timeout is 10 s
/// by default, and a command that waits longer is stuck.
const COMMAND_TIME: Duration = Duration::from_secs(30);

/// Why a Slurm command gave no answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SlurmError {
    /// The command is not on this machine.
    #[error("{command} is not installed here (is this a Slurm login node?): {error}")]
    Missing {
        /// The command.
        command: &'static str,
        /// The system's words.
        error: String,
    },
    /// The command failed.
    #[error("{command} failed: {words}")]
    Failed {
        /// The command.
        command: &'static str,
        /// Its first line of stderr, or its status.
        words: String,
    },
    /// The command took longer than its time limit (30 s).
    #[error("{command} gave no answer within {} s", COMMAND_TIME.as_secs())]
    Timeout {
        /// The command.
        command: &'static str,
    },
}

/// What a command printed, and whether it succeeded.
struct Answer {
    ok: bool,
    stdout: String,
    stderr: String,
}

async fn run(
    command: &'static str,
    args: &[String],
    stdin: Option<&str>,
) -> Result<Answer, SlurmError> {
    let mut child = tokio::process::Command::new(command);
    child
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = child.spawn().map_err(|e| SlurmError::Missing {
        command,
        error: e.to_string(),
    })?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        let text = text.to_owned();
        // Written beside the wait: a command that exits without reading
        // all of it must not leave the write stuck.
        tokio::spawn(async move {
            let _ = pipe.write_all(text.as_bytes()).await;
        });
    }
    let output = tokio::time::timeout(COMMAND_TIME, child.wait_with_output())
        .await
        .map_err(|_| SlurmError::Timeout { command })?
        .map_err(|e| SlurmError::Failed {
            command,
            words: e.to_string(),
        })?;
    Ok(Answer {
        ok: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    })
}

fn failed(command: &'static str, answer: &Answer) -> SlurmError {
    let words = answer
        .stderr
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .map_or_else(|| "no words on stderr".to_owned(), str::to_owned);
    SlurmError::Failed { command, words }
}

/// Submits a batch script (`sbatch --parsable ARGS`, the script on stdin);
/// answers the job's id.
///
/// # Errors
///
/// `sbatch` missing, failing (its last line of stderr says why) or stuck.
pub async fn sbatch(args: &[String], script: &str) -> Result<String, SlurmError> {
    let mut all = vec!["--parsable".to_owned()];
    all.extend_from_slice(args);
    let answer = run("sbatch", &all, Some(script)).await?;
    if !answer.ok {
        return Err(failed("sbatch", &answer));
    }
    parsable_id(&answer.stdout).ok_or_else(|| SlurmError::Failed {
        command: "sbatch",
        words: format!("no job id in its answer {:?}", answer.stdout.trim()),
    })
}

/// Slurm's version as its commands say it (`slurm 22.05.8`).
///
/// # Errors
///
/// `sinfo` missing, failing or stuck.
pub async fn version() -> Result<String, SlurmError> {
    let answer = run("sinfo", &["-V".to_owned()], None).await?;
    if !answer.ok {
        return Err(failed("sinfo", &answer));
    }
    Ok(answer.stdout.trim().to_owned())
}

/// Asks `sbatch --test-only` whether the cluster would take the job (its
/// partition, account and resources), without submitting it.
///
/// # Errors
///
/// `sbatch` missing, refusing the job (its last line of stderr says why)
/// or stuck.
pub async fn sbatch_test(args: &[String], script: &str) -> Result<(), SlurmError> {
    let mut all = vec!["--test-only".to_owned()];
    all.extend_from_slice(args);
    let answer = run("sbatch", &all, Some(script)).await?;
    if !answer.ok {
        return Err(failed("sbatch", &answer));
    }
    Ok(())
}

/// The job id of `sbatch --parsable`'s answer: `ID` or `ID;CLUSTER`.
fn parsable_id(stdout: &str) -> Option<String> {
    let line = stdout.lines().map(str::trim).rfind(|l| !l.is_empty())?;
    let id = line.split(';').next()?.trim();
    (!id.is_empty() && id.bytes().all(|b| b.is_ascii_digit())).then(|| id.to_owned())
}

/// A job as the scheduler lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// Its state's first word (`RUNNING`, `CANCELLED`, …).
    pub state: String,
    /// Why it is in that state (`Resources`, `PartitionDown`, `None`).
    pub reason: String,
}

/// The jobs of `ids` the scheduler still lists, in one `squeue` call; a job
/// it no longer knows is absent from the answer.
///
/// # Errors
///
/// `squeue` missing, failing or stuck.
pub async fn squeue(ids: &[String]) -> Result<HashMap<String, Listed>, SlurmError> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let args = [
        "-h".to_owned(),
        // Hidden partitions' jobs too: a job left out is taken as ended.
        "-a".to_owned(),
        "-t".to_owned(),
        "all".to_owned(),
        "-j".to_owned(),
        ids.join(","),
        "-o".to_owned(),
        "%i|%T|%r".to_owned(),
    ];
    let answer = run("squeue", &args, None).await?;
    // Every id unknown: squeue says so and fails.
    if !answer.ok && answer.stderr.contains("Invalid job id") {
        return Ok(HashMap::new());
    }
    if !answer.ok {
        return Err(failed("squeue", &answer));
    }
    Ok(squeue_rows(&answer.stdout))
}

fn squeue_rows(stdout: &str) -> HashMap<String, Listed> {
    stdout
        .lines()
        .filter_map(|line| {
            let mut fields = line.trim().splitn(3, '|');
            let id = fields.next()?.trim();
            let state = first_word(fields.next()?);
            let reason = fields.next().unwrap_or_default().trim().to_owned();
            (!id.is_empty()).then(|| (id.to_owned(), Listed { state, reason }))
        })
        .collect()
}

/// A state's first word, without the `+` Slurm marks some with.
fn first_word(state: &str) -> String {
    state
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .trim_end_matches('+')
        .to_owned()
}

/// A job's record as `scontrol` or `sacct` keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Its state's first word.
    pub state: String,
    /// Why (`NonZeroExitCode`, `None`); empty where the source has none.
    pub reason: String,
    /// `ExitCode N:M`: the batch script's status and the signal that ended
    /// it, where the record has one.
    pub exit: Option<(i32, i32)>,
    /// How many times the job was begun again (`Restarts=N`: a requeue),
    /// where the record says.
    pub restarts: Option<u32>,
}

/// The job's record while slurmctld keeps it (`MinJobAge` after its end);
/// `None` when it keeps none.
///
/// # Errors
///
/// `scontrol` missing, failing otherwise or stuck.
pub async fn scontrol_job(id: &str) -> Result<Option<Record>, SlurmError> {
    let args = [
        "show".to_owned(),
        "job".to_owned(),
        "-o".to_owned(),
        id.to_owned(),
    ];
    let answer = run("scontrol", &args, None).await?;
    if !answer.ok && answer.stderr.contains("Invalid job id") {
        return Ok(None);
    }
    if !answer.ok {
        return Err(failed("scontrol", &answer));
    }
    Ok(scontrol_record(&answer.stdout))
}

/// Reads `scontrol show job -o`'s `KEY=VALUE` words by their exact keys
/// (`ExitCode` is not `DerivedExitCode`).
fn scontrol_record(stdout: &str) -> Option<Record> {
    let line = stdout.lines().find(|l| l.contains("JobState="))?;
    let mut state = None;
    let mut reason = String::new();
    let mut exit = None;
    let mut restarts = None;
    for word in line.split_whitespace() {
        let Some((key, value)) = word.split_once('=') else {
            continue;
        };
        match key {
            "JobState" => state = Some(first_word(value)),
            "Reason" => value.clone_into(&mut reason),
            "ExitCode" => exit = exit_code(value),
            "Restarts" => restarts = value.parse().ok(),
            _ => {}
        }
    }
    Some(Record {
        state: state?,
        reason,
        exit,
        restarts,
    })
}

fn exit_code(text: &str) -> Option<(i32, i32)> {
    let (code, signal) = text.split_once(':')?;
    Some((code.trim().parse().ok()?, signal.trim().parse().ok()?))
}

/// The job's row in Slurm's accounting, where a cluster keeps one; `None`
/// when it keeps no accounting or no row of the job.
///
/// # Errors
///
/// `sacct` failing otherwise, or stuck.
pub async fn sacct_job(id: &str) -> Result<Option<Record>, SlurmError> {
    let args = [
        "-j".to_owned(),
        id.to_owned(),
        "-X".to_owned(),
        "-n".to_owned(),
        "-P".to_owned(),
        "--format=JobID,State,ExitCode".to_owned(),
    ];
    let answer = match run("sacct", &args, None).await {
        Err(SlurmError::Missing { .. }) => return Ok(None),
        answer => answer?,
    };
    if !answer.ok && answer.stderr.contains("accounting storage is disabled") {
        return Ok(None);
    }
    if !answer.ok {
        return Err(failed("sacct", &answer));
    }
    Ok(sacct_record(&answer.stdout, id))
}

fn sacct_record(stdout: &str, id: &str) -> Option<Record> {
    stdout.lines().find_map(|line| {
        let fields: Vec<&str> = line.trim().split('|').collect();
        let [job, state, exit] = fields[..] else {
            return None;
        };
        (job == id).then(|| Record {
            state: first_word(state),
            reason: String::new(),
            exit: exit_code(exit),
            restarts: None,
        })
    })
}

/// How `scancel` reaches a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cancel {
    /// The whole job: SIGCONT and SIGTERM to all its processes, SIGKILL
    /// after the cluster's `KillWait`.
    Job,
    /// A signal to the batch shell only (the relay passes it on to the
    /// command's group once).
    Batch(&'static str),
    /// A signal to the batch shell, its children and its steps (for the
    /// signals no process can catch and pass on).
    Full(&'static str),
}

/// Cancels or signals a job.
///
/// # Errors
///
/// `scancel` missing, failing (a job it does not know: "Invalid job id")
/// or stuck.
pub async fn scancel(id: &str, how: Cancel) -> Result<(), SlurmError> {
    let answer = run("scancel", &scancel_args(id, how), None).await?;
    // scancel says what it could not do on stderr, and may still exit 0.
    if !answer.ok || answer.stderr.contains("error") {
        return Err(failed("scancel", &answer));
    }
    Ok(())
}

/// `scancel`'s arguments for `how` and job `id`.
fn scancel_args(id: &str, how: Cancel) -> Vec<String> {
    let mut args = match how {
        Cancel::Job => Vec::new(),
        Cancel::Batch(signal) => vec!["--batch".to_owned(), format!("--signal={signal}")],
        Cancel::Full(signal) => vec!["--full".to_owned(), format!("--signal={signal}")],
    };
    args.push(id.to_owned());
    args
}

/// Cancels every job of this user named `name` (`scancel --name`).
///
/// # Errors
///
/// As [`scancel`].
pub async fn scancel_name(name: &str) -> Result<(), SlurmError> {
    let args = [format!("--name={name}")];
    let answer = run("scancel", &args, None).await?;
    if !answer.ok || answer.stderr.contains("error") {
        return Err(failed("scancel", &answer));
    }
    Ok(())
}

/// [`scancel`] for a caller outside the runtime's tasks (a job's control,
/// called synchronously): the same command, waited for by this thread.
///
/// # Errors
///
/// As [`scancel`].
pub fn scancel_now(id: &str, how: Cancel) -> Result<(), SlurmError> {
    let mut command = std::process::Command::new("scancel");
    let mut child = command
        .args(scancel_args(id, how))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| SlurmError::Missing {
            command: "scancel",
            error: e.to_string(),
        })?;
    let since = std::time::Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if since.elapsed() < COMMAND_TIME => {
                std::thread::sleep(Duration::from_millis(2));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(SlurmError::Timeout { command: "scancel" });
            }
        }
    };
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        use std::io::Read;
        let _ = pipe.read_to_string(&mut stderr);
    }
    let answer = Answer {
        ok: status.success(),
        stdout: String::new(),
        stderr,
    };
    if !answer.ok || answer.stderr.contains("error") {
        return Err(failed("scancel", &answer));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sbatch_parsable_gives_the_id_with_or_without_a_cluster() {
        assert_eq!(parsable_id("42\n").as_deref(), Some("42"));
        assert_eq!(parsable_id("42;jh\n").as_deref(), Some("42"));
        assert_eq!(parsable_id("warning\n"), None);
        assert_eq!(parsable_id(""), None);
    }

    #[test]
    fn squeue_rows_are_id_state_reason() {
        let rows =
            squeue_rows("1|FAILED|NonZeroExitCode\n2|PENDING|PartitionDown\n3|COMPLETING+|None\n");
        assert_eq!(
            rows["2"],
            Listed {
                state: "PENDING".into(),
                reason: "PartitionDown".into()
            }
        );
        assert_eq!(rows["3"].state, "COMPLETING");
        assert_eq!(rows.len(), 3);
    }

    #[test]
    fn scontrol_exit_code_is_not_the_derived_one() {
        let line = "JobId=1 JobName=wrap JobState=FAILED Reason=NonZeroExitCode Dependency=(null) Restarts=1 DerivedExitCode=0:0 ExitCode=3:0 RunTime=00:00:01\n";
        assert_eq!(
            scontrol_record(line),
            Some(Record {
                state: "FAILED".into(),
                reason: "NonZeroExitCode".into(),
                exit: Some((3, 0)),
                restarts: Some(1)
            })
        );
        let cancelled =
            "JobId=2 JobState=CANCELLED Reason=None ExitCode=0:15 DerivedExitCode=0:0\n";
        assert_eq!(scontrol_record(cancelled).unwrap().exit, Some((0, 15)));
        assert_eq!(scontrol_record("slurm_load_jobs error\n"), None);
    }

    #[test]
    fn sacct_takes_the_jobs_own_row() {
        let rows = "7|COMPLETED|0:0\n7.batch|CANCELLED|0:15\n";
        assert_eq!(
            sacct_record(rows, "7"),
            Some(Record {
                state: "COMPLETED".into(),
                reason: String::new(),
                exit: Some((0, 0)),
                restarts: None
            })
        );
        assert_eq!(sacct_record(rows, "8"), None);
    }
}
