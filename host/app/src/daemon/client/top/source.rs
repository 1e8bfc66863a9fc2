//! Where `top` gets what it shows, and how it asks: the daemon and each
//! plain `jobs-host mcp`'s view socket, every request bounded; the table's
//! refresh, the tail, and `logs -f` in the foreground.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use serde_json::Value;

use super::super::{next, request_at};
use super::{App, HUNG_UP, Job, REFRESH, Signals, Stats, TAIL_LINES, TERMINATED};
use crate::daemon::Request;

/// How long a request to the daemon or a view may take before `top` goes
/// on without it: a stopped `jobs-host mcp` still accepts, never answers.
const ASK_TIMEOUT: Duration = Duration::from_secs(2);

/// `request` to where a job was listed: the daemon, or a view's socket.
pub(super) async fn ask(
    source: Option<&PathBuf>,
    request: Request,
) -> Result<
    Option<(
        tokio::io::BufReader<tokio::net::unix::OwnedReadHalf>,
        tokio::net::unix::OwnedWriteHalf,
        Value,
    )>,
> {
    let asked = async {
        match source {
            None => super::super::request(request).await,
            Some(path) => request_at(path, request).await,
        }
    };
    match tokio::time::timeout(ASK_TIMEOUT, asked).await {
        Ok(answer) => answer,
        Err(_) => anyhow::bail!("no answer within {} s", ASK_TIMEOUT.as_secs()),
    }
}

/// Reads the jobs (the daemon's, then each `jobs-host mcp`'s), their
/// processes' use, and the selected job's last lines.
pub(super) async fn refresh(app: &mut App) {
    let mut sources = vec![None];
    // Views only where the daemon would listen: a runtime directory that is
    // this user's alone (another user's socket could serve made-up jobs).
    let dir = crate::daemon::runtime_dir();
    if dir.exists() && crate::daemon::private_dir(&dir).is_ok() {
        sources.extend(
            crate::daemon::server::view::views(&dir)
                .into_iter()
                .map(|(_, path)| Some(path)),
        );
    }
    let (mut jobs, mut sessions, mut daemon) = (Vec::new(), 0, false);
    for source in sources {
        let listed = ask(source.as_ref(), Request::Ps { session: None }).await;
        match listed {
            Ok(Some((_, _, answer))) if answer["jobs"].is_array() => {
                daemon |= source.is_none();
                app.now = app.now.max(answer["now"].as_u64().unwrap_or_default());
                sessions += answer["sessions"].as_array().map_or(0, Vec::len);
                jobs.extend(
                    answer["jobs"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|job| Job::from_ps(job, source.clone())),
                );
            }
            // A view nothing listens on any more (its process was killed
            // before it could remove it) goes; a daemon that went away,
            // or a view whose process is ending, is just not listed.
            Ok(None) => {
                if let Some(path) = &source
                    && crate::daemon::server::view::stale(path)
                {
                    let _ = std::fs::remove_file(path);
                }
            }
            Ok(Some(_)) => {}
            Err(e) if source.is_none() => app.message = Some(format!("{e:#}")),
            Err(_) => {}
        }
    }
    (app.jobs, app.sessions, app.daemon) = (jobs, sessions, daemon);
    // A refresh a key asked for right after a tick would make one clock
    // tick of CPU read as hundreds of percent: the stats move on a second.
    if app.stats.older_than(REFRESH.mul_f32(0.9)) {
        app.before = std::mem::replace(&mut app.stats, Stats::read());
    }
    if app.selected.is_none() || app.selected_job().is_none() {
        app.selected = app
            .visible()
            .first()
            .map(|j| (j.session.clone(), j.id.clone()));
    }
    app.tail = match app.selected_job() {
        Some(job) => tail(&job, app.stderr)
            .await
            .unwrap_or_else(|e| vec![format!("({e:#})")]),
        None => Vec::new(),
    };
}

/// The job's last lines, as `logs --lines` reads them: nothing consumed.
async fn tail(job: &Job, stderr: bool) -> Result<Vec<String>> {
    let logs = Request::Logs {
        id: job.id.clone(),
        session: Some(job.session.clone()),
        stderr,
        lines: Some(TAIL_LINES),
        follow: false,
    };
    let Some((mut read, _write, first)) = ask(job.source.as_ref(), logs).await? else {
        return Ok(Vec::new());
    };
    if let Some(error) = first["error"].as_str() {
        anyhow::bail!("{error}");
    }
    let mut lines = Vec::new();
    while let Some(value) = next(&mut read).await? {
        if let Some(line) = value["line"].as_str() {
            lines.push(line.to_owned());
        } else if let Some(error) = value["error"].as_str() {
            anyhow::bail!("{error}");
        } else if value.get("end").is_some() {
            break;
        }
    }
    Ok(lines)
}

/// `logs -f` of the job, on the terminal as the view left it (its ordinary
/// modes), asked where the job was listed: every line so far, then each
/// one as it comes, until a ctrl-c brings the view back (also after the
/// job's end, so its last lines can be read). TERM or HUP end `top`: their
/// exit code.
pub(super) async fn follow(job: &Job, signals: &mut Signals) -> Option<u8> {
    println!(
        "jobs-host top: following {} of session {:?}; ctrl-c comes back",
        job.id, job.session
    );
    let logs = Request::Logs {
        id: job.id.clone(),
        session: Some(job.session.clone()),
        stderr: false,
        lines: None,
        follow: true,
    };
    let lines = async {
        // The write half stays open: the server ends a request whose
        // client shut its side.
        let (mut read, _write) = match ask(job.source.as_ref(), logs).await {
            Ok(Some((_, _, first))) if first["error"].is_string() => {
                return first["error"].as_str().unwrap_or_default().to_owned();
            }
            Ok(Some((read, write, _))) => (read, write),
            Ok(None) => return format!("{}'s session is gone", job.id),
            Err(e) => return format!("{e:#}"),
        };
        while let Ok(Some(value)) = next(&mut read).await {
            if let Some(line) = value["line"].as_str() {
                println!("{}", crate::console::for_terminal(line));
            } else if let Some(error) = value["error"].as_str() {
                return error.to_owned();
            } else if value.get("end").is_some() {
                break;
            }
        }
        format!("{} has ended", job.id)
    };
    tokio::select! {
        ended = lines => println!("[{ended}; ctrl-c comes back]"),
        _ = signals.interrupt.recv() => return None,
        _ = signals.terminate.recv() => return Some(TERMINATED),
        _ = signals.hangup.recv() => return Some(HUNG_UP),
    }
    tokio::select! {
        _ = signals.interrupt.recv() => None,
        _ = signals.terminate.recv() => Some(TERMINATED),
        _ = signals.hangup.recv() => Some(HUNG_UP),
    }
}
