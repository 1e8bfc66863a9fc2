//! The daemon's clients: `mcp --session` and `shell --session` (thin front
//! ends that start the daemon when none runs), and the human view, `ps`,
//! `logs`, `kill`, `wait` and `daemon --stop`.

use std::io::IsTerminal;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

use super::{Hello, Kind, PROTOCOL, Request};
use crate::signals::Signals;
use crate::{console, terminal};

/// How long a client waits for a daemon it started to listen.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// The daemon's socket, connected; `None` when no daemon listens there.
async fn connect(dir: &Path) -> Result<Option<UnixStream>> {
    let path = super::socket_path(dir);
    match UnixStream::connect(&path).await {
        Ok(stream) => Ok(Some(stream)),
        // Reset: a daemon killed as this connected (its socket took the
        // connection, then went with it).
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound
                    | std::io::ErrorKind::ConnectionRefused
                    | std::io::ErrorKind::ConnectionReset
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(e).with_context(|| format!("cannot connect to {}", path.display())),
    }
}

/// How long a client waits for a session whose previous client is still
/// connected (a harness restarting its server before the old one is gone).
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The daemon's socket, connected, after starting the daemon if none runs.
async fn connect_or_start(
    cache_dir: Option<&Path>,
    deadline: tokio::time::Instant,
) -> Result<UnixStream> {
    // A daemon started from a job would live in the job's containment and
    // die with it, taking every session's jobs along.
    if super::server::is_a_job(std::process::id() as i32) {
        bail!("a background job may not drive the daemon of durable sessions");
    }
    let dir = super::runtime_dir();
    super::private_dir(&dir)?;
    let log = dir.join("daemon.log");
    let mut child: Option<std::process::Child> = None;
    loop {
        if let Some(stream) = connect(&dir).await? {
            // The daemon is reaped by whoever adopts it once this client
            // exits.
            drop(child);
            return Ok(stream);
        }
        let start = match child.as_mut().map(std::process::Child::try_wait) {
            None => true,
            Some(Ok(None)) => false,
            // It found another daemon's lock: one that is still ending its
            // sessions, or one that started meanwhile. Its socket comes, or
            // this one tries again once the other is gone.
            Some(Ok(Some(status))) if status.success() => !super::locked(&super::lock_path(&dir)),
            Some(Ok(Some(status))) => bail!(
                "the daemon did not start ({status}): {}(its log is {})",
                last_line(&log).map(|l| format!("{l} ")).unwrap_or_default(),
                log.display()
            ),
            Some(Err(e)) => return Err(e).context("cannot watch the daemon it started"),
        };
        if start {
            child = Some(spawn_daemon(cache_dir, &log)?);
        }
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "the daemon did not listen within {} s; its log is {}",
                START_TIMEOUT.as_secs(),
                log.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The last line of `log`, where a daemon that could not start said why.
fn last_line(log: &Path) -> Option<String> {
    let text = std::fs::read_to_string(log).ok()?;
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(str::to_owned)
}

/// Starts `jobs-host daemon`, detached from this client: its own session, at
/// `/`, holding none of this client's descriptors, writing to `log`.
fn spawn_daemon(cache_dir: Option<&Path>, log: &Path) -> Result<std::process::Child> {
    // Appended to always: the daemon that takes the lock starts a long log
    // afresh itself.
    let output = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(log)
        .with_context(|| format!("cannot open {}", log.display()))?;
    let mut command = std::process::Command::new(
        std::env::current_exe().context("cannot find this program to start the daemon")?,
    );
    if let Some(dir) = cache_dir {
        command.arg("--cache-dir").arg(dir);
    }
    command
        .arg("daemon")
        .current_dir("/")
        .stdin(std::process::Stdio::null())
        .stdout(output.try_clone()?)
        .stderr(output);
    // SAFETY: setsid and close_range are async-signal-safe. The daemon
    // leaves this client's session and process group (its terminal's and
    // group's signals do not reach it), and no descriptor this client
    // inherited without close-on-exec stays open in it.
    unsafe {
        command.pre_exec(|| {
            libc::setsid();
            let closed = libc::syscall(
                libc::SYS_close_range,
                3u32,
                u32::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            );
            if closed != 0 {
                // A kernel before 5.11, or a filter that refuses the call.
                for fd in 3..1024 {
                    libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
                }
            }
            Ok(())
        });
    }
    command.spawn().context("cannot start the daemon")
}

/// Why the daemon did not take a connection.
enum Refused {
    /// The session's previous client is still connected.
    Busy(String),
    /// It closed the connection without a word (a daemon that was exiting).
    Closed,
    /// Anything else, with the daemon's reason.
    Other(anyhow::Error),
}

/// Sends `hello` and reads the daemon's answer.
async fn greet(
    stream: UnixStream,
    hello: &Hello,
) -> std::result::Result<(BufReader<OwnedReadHalf>, OwnedWriteHalf, Value), Refused> {
    let (read, mut write) = stream.into_split();
    let mut line = serde_json::to_vec(hello).map_err(|e| Refused::Other(e.into()))?;
    line.push(b'\n');
    // A daemon that refuses this client answers before it reads the hello
    // and closes: the answer is read even when the hello could not be sent.
    let _ = write.write_all(&line).await;
    let mut read = BufReader::new(read);
    let answer = match next(&mut read).await {
        Ok(Some(answer)) => answer,
        Ok(None) => return Err(Refused::Closed),
        // A daemon killed as this connected: its socket took the connection,
        // then went with it.
        Err(e)
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset) =>
        {
            return Err(Refused::Closed);
        }
        Err(e) => return Err(Refused::Other(e)),
    };
    if let Some(error) = answer.get("error").and_then(Value::as_str) {
        return Err(if answer["busy"].as_bool() == Some(true) {
            Refused::Busy(error.to_owned())
        } else {
            Refused::Other(anyhow::anyhow!("{error}"))
        });
    }
    Ok((read, write, answer))
}

/// A session's connection, the daemon started if need be; a session still
/// held by its previous client is tried again for [`BUSY_TIMEOUT`].
async fn session_connection(
    hello: &Hello,
    cache_dir: Option<&Path>,
) -> Result<(BufReader<OwnedReadHalf>, OwnedWriteHalf)> {
    let deadline = tokio::time::Instant::now() + START_TIMEOUT;
    let mut busy_since = None;
    loop {
        let stream = connect_or_start(cache_dir, deadline).await?;
        match greet(stream, hello).await {
            Ok((read, write, _)) => return Ok((read, write)),
            Err(Refused::Busy(why)) => {
                let since = *busy_since.get_or_insert_with(tokio::time::Instant::now);
                if since.elapsed() >= BUSY_TIMEOUT {
                    bail!("{why}");
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(Refused::Closed) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(Refused::Closed) => bail!("the daemon closed the connection without answering"),
            Err(Refused::Other(e)) => return Err(e),
        }
    }
}

/// The next JSON line from the daemon; `None` at the end.
async fn next(read: &mut BufReader<OwnedReadHalf>) -> Result<Option<Value>> {
    let mut line = String::new();
    if read.read_line(&mut line).await? == 0 {
        return Ok(None);
    }
    Ok(Some(
        serde_json::from_str(&line).context("the daemon sent something that is not JSON")?,
    ))
}

/// The client's environment, which a new session's jobs take their passed
/// variables from. Variables that are not UTF-8 are left out.
pub fn client_env() -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

/// `jobs-host mcp --session`: stdin and stdout carried to the daemon's
/// session and back, byte for byte. Ends when the client closes stdin and
/// the daemon has answered, or when the daemon goes away.
///
/// # Errors
///
/// No daemon could be reached or started, or it refused the session.
pub async fn mcp(hello: Hello, cache_dir: Option<&Path>) -> Result<u8> {
    let (mut read, mut write) = session_connection(&hello, cache_dir).await?;
    let up = tokio::spawn(async move {
        let mut stdin = tokio::io::stdin();
        let mut buf = vec![0u8; 64 << 10];
        loop {
            match stdin.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if write.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            }
        }
        // The client is done: the daemon answers what it has, then closes.
        let _ = write.shutdown().await;
    });
    let mut stdout = tokio::io::stdout();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = read.read(&mut buf).await.unwrap_or(0);
        if n == 0 {
            break;
        }
        if stdout.write_all(&buf[..n]).await.is_err() || stdout.flush().await.is_err() {
            break;
        }
    }
    if !up.is_finished() {
        eprintln!("jobs-host: the daemon closed the session's connection");
        return Ok(1);
    }
    Ok(0)
}

/// `jobs-host shell --session`: the console, run by the daemon on the
/// session. A script is echoed with its answers as without a daemon; at its
/// end the session stays, with its jobs.
///
/// # Errors
///
/// No daemon, a refused session, or a script line that does not parse.
pub async fn shell(mut hello: Hello, cache_dir: Option<&Path>) -> Result<u8> {
    let interactive = std::io::stdin().is_terminal();
    hello.interactive = interactive;
    let terminal = std::io::stdout().is_terminal();
    let show = move |text: &str| -> String {
        if terminal {
            console::for_terminal(text).into_owned()
        } else {
            text.to_owned()
        }
    };
    let (mut read, mut write) = session_connection(&hello, cache_dir).await?;
    let (answers, mut answered) = tokio::sync::mpsc::unbounded_channel::<Value>();
    let printer = reedline::ExternalPrinter::<String>::default();
    let notices = printer.sender();
    tokio::spawn(async move {
        while let Ok(Some(value)) = next(&mut read).await {
            match value.get("notice").and_then(Value::as_str) {
                Some(notice) => {
                    let _ = notices.send(show(notice));
                }
                None => {
                    if answers.send(value).is_err() {
                        break;
                    }
                }
            }
        }
    });
    // `Err` only when the connection is gone; a line the console refuses
    // is an `Ok(Err(..))`.
    let mut ask = async |line: &str| -> Result<std::result::Result<Option<String>, String>> {
        let mut message = serde_json::to_vec(&json!({"line": line}))?;
        message.push(b'\n');
        let lost = || anyhow::anyhow!("the daemon closed the console's connection");
        write.write_all(&message).await.map_err(|_| lost())?;
        let answer = answered.recv().await.ok_or_else(lost)?;
        if answer.get("quit").is_some() {
            return Ok(Ok(None));
        }
        if let Some(error) = answer.get("error").and_then(Value::as_str) {
            return Ok(Err(error.to_owned()));
        }
        Ok(Ok(Some(
            answer
                .get("out")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        )))
    };
    if interactive {
        terminal::say(&format!(
            "jobs-host shell: session {:?} (its jobs stay when you leave). `help` lists the commands.",
            hello.session.as_deref().unwrap_or_default()
        ));
        // Signals end this client only: the session stays in the daemon, and
        // lingers there as after `exit`.
        let mut signals = Signals::new()?;
        let mut reader = terminal::LineReader::start(printer)?;
        let mut interrupted = false;
        let ended = async {
            loop {
                let line = match reader.read().await {
                    terminal::Read::Line(line) => line,
                    terminal::Read::Interrupt if interrupted => return Ok(libc::SIGINT),
                    terminal::Read::Interrupt => {
                        interrupted = true;
                        terminal::say("(ctrl-c again, ctrl-d or `exit` leaves the console)");
                        continue;
                    }
                    terminal::Read::End => return Ok(0),
                    terminal::Read::HungUp => return Ok(libc::SIGHUP),
                };
                interrupted = false;
                let answer = tokio::select! {
                    answer = ask(&line) => answer?,
                    () = reader.hung_up() => return Ok(libc::SIGHUP),
                };
                match answer {
                    Ok(Some(out)) if !out.is_empty() => terminal::say(&show(&out)),
                    Ok(Some(_)) => {}
                    Ok(None) => return Ok(0),
                    Err(e) => terminal::say(&format!("? {e}")),
                }
            }
        };
        let ended: Result<i32> = tokio::select! {
            ended = ended => ended,
            signal = signals.next() => Ok(signal),
        };
        terminal::restore();
        return ended.map(|signal| if signal == 0 { 0 } else { 128 + signal as u8 });
    } else {
        let stdin = tokio::io::stdin();
        let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdin));
        while let Some(line) = lines.next_line().await? {
            match console::parse(&line) {
                Ok(console::Command::Nothing) => {}
                Ok(_) => {
                    println!("> {}", line.trim());
                    match ask(&line).await? {
                        Ok(Some(out)) if !out.is_empty() => println!("{}", show(&out)),
                        Ok(Some(_)) => {}
                        Ok(None) => break,
                        Err(e) => bail!("{}: {e}", line.trim()),
                    }
                }
                Err(e) => bail!("{}: {e}", line.trim()),
            }
        }
    }
    Ok(0)
}

/// One control request to a running daemon, with the daemon's first
/// answer; `None` when no daemon runs.
async fn request(
    request: Request,
) -> Result<Option<(BufReader<OwnedReadHalf>, OwnedWriteHalf, Value)>> {
    let dir = super::runtime_dir();
    if !dir.exists() {
        return Ok(None);
    }
    super::private_dir(&dir)?;
    let Some(stream) = connect(&dir).await? else {
        return Ok(None);
    };
    let hello = Hello {
        protocol: PROTOCOL,
        kind: Kind::Ctl,
        session: None,
        settings: None,
        env: Vec::new(),
        linger_ms: None,
        mcp: None,
        interactive: false,
        request: Some(request),
    };
    match greet(stream, &hello).await {
        Ok(connected) => Ok(Some(connected)),
        Err(Refused::Busy(why)) => bail!("{why}"),
        // A daemon exiting as this connected: none runs.
        Err(Refused::Closed) => Ok(None),
        Err(Refused::Other(e)) => Err(e),
    }
}

const NO_DAEMON: &str = "jobs-host: no daemon is running for this user";

/// `jobs-host ps`: from the daemon, or with `journal` (or with no daemon
/// running) from the journal, which also holds ended sessions and the jobs
/// a killed daemon lost.
///
/// # Errors
///
/// A daemon that cannot be reached or answers an error; a journal that is
/// not this user's or is broken.
pub async fn ps(session: Option<String>, journal: bool, json_out: bool) -> Result<u8> {
    let asked = session.clone();
    let live = if journal {
        None
    } else {
        reply_of(Request::Ps {
            session: session.clone(),
        })
        .await?
    };
    let answer = match live {
        Some(answer) => {
            if json_out {
                let out =
                    json!({"daemon": true, "jobs": answer["jobs"], "sessions": answer["sessions"]});
                println!("{}", serde_json::to_string_pretty(&out)?);
                return Ok(0);
            }
            answer
        }
        None => {
            let recorded = match super::journal::state_dir() {
                Some(dir) => super::journal::read(&dir)?,
                None => None,
            };
            let Some((jobs, dropped, running)) = recorded else {
                if json_out {
                    println!("{}", json!({"daemon": false, "journal": false, "jobs": []}));
                } else {
                    println!("{NO_DAEMON}, and there is no journal");
                }
                return Ok(0);
            };
            let jobs: Vec<Value> = jobs
                .into_iter()
                .filter(|r| session.as_deref().is_none_or(|key| r.session == key))
                .map(|r| {
                    json!({
                        "id": r.job.id,
                        "session": r.session,
                        "status": r.job.status,
                        "detail": r.job.detail,
                        "started_at": r.job.started_at,
                        "finished_at": r.job.finished_at,
                        "pid": null,
                        "ports": [],
                        "label": r.job.label,
                    })
                })
                .collect();
            if json_out {
                let out =
                    json!({"daemon": running, "journal": true, "jobs": jobs, "dropped": dropped});
                println!("{}", serde_json::to_string_pretty(&out)?);
                return Ok(0);
            }
            if !journal {
                println!("{NO_DAEMON}; as the journal recorded them:");
            }
            if dropped > 0 {
                println!("({dropped} finished job(s) were dropped by retention)");
            }
            json!({"now": host::registry::now_ms(), "jobs": jobs, "sessions": []})
        }
    };
    let now = answer["now"].as_u64().unwrap_or_default();
    let jobs = answer["jobs"].as_array().cloned().unwrap_or_default();
    let terminal = std::io::stdout().is_terminal();
    let show = |text: &str| -> String {
        if terminal {
            console::for_terminal(text).into_owned()
        } else {
            text.to_owned()
        }
    };
    let mut rows = vec![[
        "ID".to_owned(),
        "SESSION".to_owned(),
        "STATUS".to_owned(),
        "AGE".to_owned(),
        "PID".to_owned(),
        "PORTS".to_owned(),
        "LABEL".to_owned(),
    ]];
    for job in &jobs {
        let started = job["started_at"].as_u64().unwrap_or(now);
        let status = match job["detail"].as_str() {
            Some(detail) => format!("{} ({detail})", job["status"].as_str().unwrap_or("?")),
            None => job["status"].as_str().unwrap_or("?").to_owned(),
        };
        let ports: Vec<String> = job["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_u64)
            .map(|p| p.to_string())
            .collect();
        rows.push([
            job["id"].as_str().unwrap_or("?").to_owned(),
            show(job["session"].as_str().unwrap_or("?")),
            status,
            age(now.saturating_sub(started)),
            job["pid"]
                .as_i64()
                .map_or_else(|| "-".to_owned(), |p| p.to_string()),
            if ports.is_empty() {
                "-".to_owned()
            } else {
                ports.join(",")
            },
            show(&one_line(job["label"].as_str().unwrap_or_default())),
        ]);
    }
    let widths: Vec<usize> = (0..6)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    for row in &rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i < 6 {
                line.push_str(&format!("{cell:<width$}  ", width = widths[i]));
            } else {
                line.push_str(cell);
            }
        }
        println!("{}", line.trim_end());
    }
    if jobs.is_empty() {
        let sessions = answer["sessions"].as_array().map_or(0, Vec::len);
        match asked {
            Some(key) if sessions > 0 => println!(
                "(no jobs in session {key:?}; {sessions} session(s) in the daemon: jobs-host ps --all)"
            ),
            _ => println!("(no jobs)"),
        }
    }
    Ok(0)
}

/// A label's first line, marked when there is more: a table's row stays one
/// line.
fn one_line(label: &str) -> String {
    match label.split_once('\n') {
        Some((first, _)) => format!("{first}\u{2026}"),
        None => label.to_owned(),
    }
}

/// `3s`, `4m05s`, `2h07m`.
fn age(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// The one-line answer to `req`; `None` when no daemon runs.
async fn reply_of(req: Request) -> Result<Option<Value>> {
    Ok(request(req).await?.map(|(_, _, answer)| answer))
}

/// The one-line answer to `req` from a daemon that must be running.
async fn required_reply(req: Request) -> Result<Value> {
    reply_of(req)
        .await?
        .context("no daemon is running for this user")
}

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
    let Some(state) = super::journal::state_dir() else {
        bail!("no daemon is running for this user, and no state directory to read");
    };
    let Some((jobs, _, _)) = super::journal::read(&state)? else {
        bail!("no daemon is running for this user, and nothing was journaled");
    };
    let mut found: Vec<_> = jobs
        .into_iter()
        .filter(|r| r.job.id == id && session.is_none_or(|s| s == r.session))
        .filter(|r| r.job.status != "adopted")
        .collect();
    let Some(job) = found.pop() else {
        bail!("no daemon is running for this user, and the journal has no job {id}");
    };
    if session.is_none() && found.iter().any(|other| other.session != job.session) {
        bail!("job {id} is in more than one session; name one with --session");
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
    let mut offset = host::bash::read_frames(&file, 0, |tag, bytes| {
        if tag == wanted {
            text.extend_from_slice(bytes);
        }
    });
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

/// `jobs-host kill`.
///
/// # Errors
///
/// No daemon, or an unknown job.
pub async fn kill(id: String, session: Option<String>) -> Result<u8> {
    let answer = required_reply(Request::Kill {
        id: id.clone(),
        session,
    })
    .await?;
    if answer["already_finished"].as_bool() == Some(true) {
        println!("{id} had already finished");
    } else {
        println!("killing {id}; its session will be told");
    }
    Ok(0)
}

/// `jobs-host wait`: waits for the job's end and exits with its exit code
/// (128 + the signal's number when a signal ended it).
///
/// # Errors
///
/// No daemon, or an unknown job.
pub async fn wait(id: String, session: Option<String>) -> Result<u8> {
    let answer = required_reply(Request::Wait {
        id: id.clone(),
        session,
    })
    .await?;
    let status = answer["status"].as_str().unwrap_or("failed");
    let detail = answer["detail"].as_str();
    match detail {
        Some(detail) => eprintln!("{id} {status} ({detail})"),
        None => eprintln!("{id} {status}"),
    }
    Ok(exit_code(status, detail))
}

/// A job's end as a process exit code. Its detail starts with `exit code: N`
/// or `signal: NAME` (the sandbox's notes may follow after a `;`).
fn exit_code(status: &str, detail: Option<&str>) -> u8 {
    let first = detail.and_then(|d| d.split(';').next());
    if let Some(code) = first
        .and_then(|d| d.strip_prefix("exit code: "))
        .and_then(|c| c.parse::<i32>().ok())
    {
        return u8::try_from(code.clamp(0, 255)).unwrap_or(1);
    }
    if let Some(name) = first.and_then(|d| d.strip_prefix("signal: ")) {
        let number = name
            .parse::<nix::sys::signal::Signal>()
            .map_or(libc::SIGKILL, |s| s as i32);
        return u8::try_from(128 + number).unwrap_or(137);
    }
    match status {
        "completed" => 0,
        "killed" => 137,
        _ => 1,
    }
}

/// `jobs-host daemon --stop`: every session ends (their jobs are killed) and
/// the daemon exits.
///
/// # Errors
///
/// A daemon that cannot be reached.
pub async fn stop() -> Result<u8> {
    if reply_of(Request::Stop).await?.is_none() {
        println!("jobs-host: no daemon is running for this user");
        return Ok(0);
    }
    // Its lock is let go of once every session's jobs are gone.
    let lock = super::lock_path(&super::runtime_dir());
    for _ in 0..3000 {
        let Ok(file) = std::fs::File::open(&lock) else {
            break;
        };
        // SAFETY: flock on a descriptor we own, closed right after.
        let free = unsafe {
            libc::flock(
                std::os::fd::AsRawFd::as_raw_fd(&file),
                libc::LOCK_SH | libc::LOCK_NB,
            )
        } == 0;
        if free {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    println!("jobs-host: the daemon stopped; its sessions' jobs were killed");
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::exit_code;

    #[test]
    fn a_jobs_end_is_its_exit_code() {
        assert_eq!(exit_code("completed", Some("exit code: 4")), 4);
        assert_eq!(
            exit_code("completed", Some("exit code: 3; hooks changed: x")),
            3
        );
        assert_eq!(exit_code("killed", Some("signal: SIGTERM")), 143);
        assert_eq!(exit_code("killed", Some("signal: SIGWINCH")), 128 + 28);
        assert_eq!(exit_code("killed", Some("killed before exit")), 137);
        assert_eq!(exit_code("failed", Some("its daemon stopped")), 1);
        assert_eq!(exit_code("completed", None), 0);
    }
}
