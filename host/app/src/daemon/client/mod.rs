//! The daemon's clients: `mcp --session` and `shell --session` (`session`:
//! thin front ends that start the daemon when none runs), and the human
//! view, one request per file as the daemon's own (`ps`, `logs`,
//! `kill`, `wait`), and `daemon --stop`. Here the connection they share.

mod kill;
mod logs;
mod ps;
mod session;
mod top;
mod wait;

use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

use super::{Hello, Kind, PROTOCOL, Request};

pub use kill::kill;
pub use logs::logs;
pub use ps::ps;
pub use session::{mcp, shell};
pub use top::top;
pub use wait::wait;

/// How long a client waits for a daemon it started to listen.
pub(super) const START_TIMEOUT: Duration = Duration::from_secs(20);

/// The daemon's socket, connected; `None` when no daemon listens there.
pub(super) async fn connect(dir: &Path) -> Result<Option<UnixStream>> {
    connect_to(&super::socket_path(dir)).await
}

/// The socket at `path`, connected; `None` when nothing listens there.
async fn connect_to(path: &Path) -> Result<Option<UnixStream>> {
    match UnixStream::connect(path).await {
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
pub(super) const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The daemon's socket, connected, after starting the daemon if none runs.
pub(super) async fn connect_or_start(
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
pub(super) fn last_line(log: &Path) -> Option<String> {
    let text = std::fs::read_to_string(log).ok()?;
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(str::to_owned)
}

/// Starts `jobs-host daemon`, detached from this client: its own session, at
/// `/`, holding none of this client's descriptors, writing to `log`.
pub(super) fn spawn_daemon(cache_dir: Option<&Path>, log: &Path) -> Result<std::process::Child> {
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
pub(super) enum Refused {
    /// The session's previous client is still connected.
    Busy(String),
    /// It closed the connection without a word (a daemon that was exiting).
    Closed,
    /// Anything else, with the daemon's reason.
    Other(anyhow::Error),
}

/// Sends `hello` and reads the daemon's answer.
pub(super) async fn greet(
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
pub(super) async fn session_connection(
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
pub(super) async fn next(read: &mut BufReader<OwnedReadHalf>) -> Result<Option<Value>> {
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

/// One control request to a running daemon, with the daemon's first
/// answer; `None` when no daemon runs.
pub(super) async fn request(
    request: Request,
) -> Result<Option<(BufReader<OwnedReadHalf>, OwnedWriteHalf, Value)>> {
    let dir = super::runtime_dir();
    if !dir.exists() {
        return Ok(None);
    }
    super::private_dir(&dir)?;
    request_at(&super::socket_path(&dir), request).await
}

/// One control request to the server listening at `path` (the daemon, or a
/// `jobs-host mcp`'s view), with its first answer; `None` when none listens.
pub(super) async fn request_at(
    path: &Path,
    request: Request,
) -> Result<Option<(BufReader<OwnedReadHalf>, OwnedWriteHalf, Value)>> {
    let Some(stream) = connect_to(path).await? else {
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

pub(super) const NO_DAEMON: &str = "jobs-host: no daemon is running for this user";

/// How a person gets a daemon, said where a command needs one and none runs.
pub(super) const HOW_TO_START: &str = "a durable session starts the daemon \
     (`jobs-host mcp --session KEY` for a harness, `jobs-host shell --session KEY` to type \
     tool calls)";

/// The one-line answer to `req`; `None` when no daemon runs.
pub(super) async fn reply_of(req: Request) -> Result<Option<Value>> {
    Ok(request(req).await?.map(|(_, _, answer)| answer))
}

/// The one-line answer to `req` from a daemon that must be running.
pub(super) async fn required_reply(req: Request) -> Result<Value> {
    reply_of(req).await?.with_context(|| {
        format!(
            "no daemon is running for this user: {HOW_TO_START}; `jobs-host ps --journal` \
                 lists what earlier daemons ran"
        )
    })
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
        // Closed right after: a lock taken here goes with it.
        let free =
            rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockShared).is_ok();
        if free {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    println!("jobs-host: the daemon stopped; its sessions' jobs were killed");
    Ok(0)
}
