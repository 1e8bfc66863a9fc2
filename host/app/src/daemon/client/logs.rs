//! `jobs-host logs`: a job's lines, followed with `-f`, from the daemon or,
//! when none runs, from the job's own file; stopped by a terminal that
//! hangs up.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::Value;
use tokio::io::AsyncWriteExt;

use super::{HOW_TO_START, next, request};
use crate::daemon::Request;
use crate::{console, terminal};

/// `jobs-host logs`: a job's lines, then with `follow` the ones it writes
/// until it ends. Nothing the model reads is consumed.
///
/// # Errors
///
/// No daemon, or an unknown job.
pub async fn logs(
    id: String,
    session: Option<String>,
    stderr: bool,
    lines: Option<u32>,
    follow: bool,
) -> Result<u8> {
    let (id_asked, session_asked) = (id.clone(), session.clone());
    let Some((mut read, _write, _)) = request(Request::Logs {
        id,
        session,
        stderr,
        lines,
        follow,
    })
    .await?
    else {
        return logs_from_files(&id_asked, session_asked.as_deref(), stderr, lines, follow).await;
    };
    let terminal = std::io::stdout().is_terminal();
    let mut stdout = tokio::io::stdout();
    // A terminal that hangs up ends a follow that would otherwise wait for
    // a quiet job's next line (exit 129, as its SIGHUP would).
    let hung_up = terminal::output_hung_up();
    tokio::pin!(hung_up);
    loop {
        let value = tokio::select! {
            value = next(&mut read) => value?,
            () = &mut hung_up => return Ok(HUNG_UP),
        };
        let Some(value) = value else { break };
        if let Some(line) = value.get("line").and_then(Value::as_str) {
            let line = if terminal {
                console::for_terminal(line).into_owned()
            } else {
                line.to_owned()
            };
            let written = async {
                stdout.write_all(line.as_bytes()).await?;
                stdout.write_all(b"\n").await?;
                stdout.flush().await
            };
            match written.await {
                Ok(()) => {}
                Err(e) if hung_up_error(&e) => return Ok(HUNG_UP),
                Err(e) => return Err(e.into()),
            }
        } else if let Some([from, to]) = value
            .get("dropped")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
        {
            eprintln!(
                "[lines {}\u{2013}{} are no longer kept]",
                from.as_u64().unwrap_or_default(),
                to.as_u64().unwrap_or_default()
            );
        } else if let Some(error) = value.get("error").and_then(Value::as_str) {
            bail!("{error}");
        } else if value.get("end").is_some() {
            return Ok(0);
        }
    }
    bail!("the daemon went away")
}

/// The exit code of a front end whose terminal hung up: 128 + `SIGHUP`, as
/// that signal would have given.
const HUNG_UP: u8 = 128 + libc::SIGHUP as u8;

/// Whether writing failed because the output is a terminal that hung up.
fn hung_up_error(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(libc::EIO)
}

/// `jobs-host logs` with no daemon running: a durable job's output from
/// its monitor's files, as the journal names them (followed while its
/// monitor runs).
async fn logs_from_files(
    id: &str,
    session: Option<&str>,
    stderr: bool,
    lines: Option<u32>,
    follow: bool,
) -> Result<u8> {
    let Some(state) = crate::daemon::journal::state_dir() else {
        bail!("no daemon is running for this user, and no state directory to read");
    };
    let Some((jobs, _, _)) = crate::daemon::journal::read(&state)? else {
        bail!("no daemon is running for this user, and nothing was journaled: {HOW_TO_START}");
    };
    let mut found: Vec<_> = jobs
        .into_iter()
        .filter(|r| r.job.id == id && session.is_none_or(|s| s == r.session))
        .filter(|r| r.job.status != "adopted")
        .collect();
    let Some(job) = found.pop() else {
        bail!(
            "no daemon is running for this user, and the journal has no job {id}{} \
             (`jobs-host ps --journal` lists every job it recorded)",
            session
                .map(|s| format!(" in session {s:?}"))
                .unwrap_or_default()
        );
    };
    if session.is_none() && found.iter().any(|other| other.session != job.session) {
        let mut sessions: Vec<String> = found
            .iter()
            .map(|r| format!("{:?}", r.session))
            .chain([format!("{:?}", job.session)])
            .collect();
        sessions.sort();
        sessions.dedup();
        bail!(
            "job {id} is in {} sessions ({}): name one with --session KEY",
            sessions.len(),
            sessions.join(", ")
        );
    }
    let Some(files) = job.job.files.map(PathBuf::from) else {
        bail!(
            "no daemon is running for this user, and job {id} of session {:?} kept no files (it ran without a monitor)",
            job.session
        );
    };
    let wanted = if stderr { 2 } else { 1 };
    let file = match std::fs::File::open(&files) {
        Ok(file) => file,
        Err(e) => bail!("job {id}'s output is gone ({}: {e})", files.display()),
    };
    let mut text = Vec::new();
    // A job on a runner's engine: its log as the daemon last took it; no
    // daemon follows it now, so neither does this.
    let remote = job.job.remote.clone();
    let slurm = files
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("slurm-"));
    let mut offset = match &remote {
        // Slurm keeps stdout and stderr apart, in files of their own.
        Some(_) if slurm => {
            text = host::runners::slurm::kept_output(&files, stderr)
                .with_context(|| format!("job {id}'s output is gone ({})", files.display()))?;
            0
        }
        Some((runner, _)) if stderr => {
            bail!(
                "job {id} runs on runner {runner}, which merges its standard error into its output"
            )
        }
        Some((_, engine_id)) => {
            text = host::runners::ray::kept_output(&files, engine_id)
                .with_context(|| format!("job {id}'s output is gone ({})", files.display()))?;
            0
        }
        None => host::bash::read_frames(&file, 0, |tag, bytes| {
            if tag == wanted {
                text.extend_from_slice(bytes);
            }
        }),
    };
    let terminal = std::io::stdout().is_terminal();
    // Set once the output is gone for good: the follow stops there.
    let gone = std::cell::Cell::new(false);
    let print = |bytes: &[u8]| {
        let text = String::from_utf8_lossy(bytes);
        let text = if terminal {
            console::for_terminal(&text).into_owned()
        } else {
            text.into_owned()
        };
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
            gone.set(gone.get() || hung_up_error(&e));
        }
    };
    let mut start = 0;
    if let Some(n) = lines {
        // The last `n` lines: from after the (n+1)th line ending from the end.
        let body = text.strip_suffix(b"\n").unwrap_or(&text);
        let mut seen = 0;
        for (at, byte) in body.iter().enumerate().rev() {
            if *byte == b'\n' {
                seen += 1;
                if seen == n {
                    start = at + 1;
                    break;
                }
            }
        }
        if n == 0 {
            start = text.len();
        }
    }
    print(&text[start..]);
    if let Some((runner, engine_id)) = remote {
        if follow {
            eprintln!(
                "jobs-host: no daemon follows job {id} on runner {runner} ({engine_id}) now; this is its output as last taken"
            );
        }
        return Ok(if gone.get() { HUNG_UP } else { 0 });
    }
    let live = |files: &std::path::Path| {
        host::bash::recorded_monitor(files)
            .is_some_and(|(pid, start)| host::bash::process_start_time(pid) == Some(start))
    };
    let more = |offset: u64| {
        host::bash::read_frames(&file, offset, |tag, bytes| {
            if tag == wanted {
                print(bytes);
            }
        })
    };
    let hung_up = terminal::output_hung_up();
    tokio::pin!(hung_up);
    while follow && live(&files) && !gone.get() {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(100)) => {}
            () = &mut hung_up => return Ok(HUNG_UP),
        }
        offset = more(offset);
    }
    if follow && !gone.get() {
        more(offset);
    }
    Ok(if gone.get() { HUNG_UP } else { 0 })
}
