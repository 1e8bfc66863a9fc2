//! `jobs-host daemon`: the per-user process that owns durable sessions and
//! their jobs, and serves their clients on a Unix socket.

use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio_util::sync::CancellationToken;

use host::capture::OutputStream;
use host::registry::control::LineQuery;
use host::session::Session;
use host::{JobRegistry, PluginRuntime};

use super::{DEFAULT_LINGER, Hello, Kind, MAX_HELLO_BYTES, PROTOCOL, Request};
use crate::mcp::{Io, Leave};
use crate::{Host, McpOptions, Signals, console};

/// How long a daemon with no session and no connection stays before it
/// exits: long enough for a client that started it to connect, or for a
/// person's `ps` right after the last session ended.
const IDLE_EXIT: Duration = Duration::from_secs(5);

/// How long a client has to send its first line.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// How often `logs --follow` looks for new lines when nothing else wakes it.
const FOLLOW_POLL: Duration = Duration::from_millis(100);

/// Lines one page of `logs` asks for.
const LOG_PAGE: u32 = 1000;

/// Notices announced to a session's front end.
type Announced = tokio::sync::mpsc::UnboundedReceiver<(host::Lane, host::NoticeMessage)>;

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One durable session: its own registry, mount and shell producer, kept
/// while no client is connected, for at most its linger.
struct Durable {
    key: String,
    /// The settings it was opened with, as the client sent them.
    settings: Value,
    host: Host,
    session: Arc<Session>,
    linger: Duration,
    front: Mutex<Front>,
}

/// The session's current connection.
#[derive(Default)]
struct Front {
    /// The current front end's number (`Session::reattach`).
    front_end: u64,
    /// A copy of its socket, to shut when another connection takes over.
    socket: Option<OwnedFd>,
    /// Counts down the linger while nobody is connected.
    lease: Option<tokio::task::JoinHandle<()>>,
}

/// The daemon.
struct Daemon {
    runtime: Arc<PluginRuntime>,
    cache_dir: Option<PathBuf>,
    /// Held while a session is opened, so two clients of one key make one.
    sessions: tokio::sync::Mutex<HashMap<String, Arc<Durable>>>,
    /// Open connections, of any kind.
    connections: AtomicUsize,
    /// Bumped by every connection and session change, so an idle exit that
    /// something happened during is called off.
    activity: AtomicU64,
    /// Cancelled to end the daemon.
    stop: CancellationToken,
}

/// Serves until stopped: a signal, `jobs-host daemon --stop`, or no session
/// and no connection for [`IDLE_EXIT`]. A second daemon of the same user
/// exits at once with success, saying so.
///
/// # Errors
///
/// A runtime directory that is not private, a socket that cannot be made, or
/// a component that does not load.
pub async fn run(cache_dir: Option<PathBuf>) -> Result<u8> {
    let dir = super::runtime_dir();
    super::private_dir(&dir)?;
    let lock_path = super::lock_path(&dir);
    let mut lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&lock_path)
        .with_context(|| format!("cannot open {}", lock_path.display()))?;
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let pid = std::fs::read_to_string(&lock_path).unwrap_or_default();
        println!(
            "jobs-host: a daemon already runs for this user (pid {}) on {}",
            pid.trim(),
            super::socket_path(&dir).display()
        );
        return Ok(0);
    }
    {
        use std::io::Write;
        lock.set_len(0)?;
        writeln!(lock, "{}", std::process::id())?;
    }
    // The lock says no daemon listens: a socket left here is stale.
    let socket = super::socket_path(&dir);
    match std::fs::remove_file(&socket) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("cannot remove {}", socket.display())),
    }
    let listener = tokio::net::UnixListener::bind(&socket)
        .with_context(|| format!("cannot listen on {}", socket.display()))?;
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))?;
    let runtime = crate::load_runtime(cache_dir.as_deref())?;
    let daemon = Arc::new(Daemon {
        runtime,
        cache_dir,
        sessions: tokio::sync::Mutex::new(HashMap::new()),
        connections: AtomicUsize::new(0),
        activity: AtomicU64::new(0),
        stop: CancellationToken::new(),
    });
    let mut signals = Signals::new().context("cannot handle signals")?;
    eprintln!(
        "jobs-host daemon: pid {} on {}",
        std::process::id(),
        socket.display()
    );
    daemon.clone().idle_check();
    let code: i32 = loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let daemon = daemon.clone();
                    daemon.connections.fetch_add(1, Ordering::AcqRel);
                    daemon.activity.fetch_add(1, Ordering::AcqRel);
                    tokio::spawn(async move {
                        daemon.clone().connection(stream).await;
                        daemon.connections.fetch_sub(1, Ordering::AcqRel);
                        daemon.activity.fetch_add(1, Ordering::AcqRel);
                        daemon.idle_check();
                    });
                }
                Err(e) => tracing::warn!("jobs-host daemon: accept failed: {e}"),
            },
            signal = signals.next() => break 128 + signal,
            () = daemon.stop.cancelled() => break 0,
        }
    };
    // No new client from here on; then every session's jobs go.
    drop(listener);
    let _ = std::fs::remove_file(&socket);
    daemon.end_all().await;
    let _ = std::fs::remove_file(&lock_path);
    drop(lock);
    // Not a return: the runtime would wait for blocked readers.
    std::process::exit(code);
}

impl Daemon {
    /// Exits after [`IDLE_EXIT`] if there is no session and no connection
    /// then and nothing happened meanwhile.
    fn idle_check(self: Arc<Self>) {
        let seen = self.activity.load(Ordering::Acquire);
        tokio::spawn(async move {
            tokio::time::sleep(IDLE_EXIT).await;
            let idle = self.sessions.lock().await.is_empty()
                && self.connections.load(Ordering::Acquire) == 0
                && self.activity.load(Ordering::Acquire) == seen;
            if idle {
                eprintln!("jobs-host daemon: no session left; exiting");
                self.stop.cancel();
            }
        });
    }

    /// Ends every session: their jobs are killed, their files removed.
    async fn end_all(&self) {
        let sessions: Vec<_> = self.sessions.lock().await.drain().map(|(_, d)| d).collect();
        for durable in sessions {
            end_session(&durable).await;
        }
    }

    async fn connection(self: Arc<Self>, stream: UnixStream) {
        // SAFETY: geteuid has no preconditions.
        let uid = unsafe { libc::geteuid() };
        let (read, mut write) = match stream.peer_cred() {
            Ok(cred) if cred.uid() == uid => {
                let socket = stream.as_fd().try_clone_to_owned().ok();
                let (read, write) = stream.into_split();
                ((BufReader::new(read), socket), write)
            }
            Ok(cred) => {
                tracing::warn!("jobs-host daemon: refused a client of uid {}", cred.uid());
                let mut stream = stream;
                let _ = answer(
                    &mut stream,
                    &json!({"error": format!("refused: this daemon serves uid {uid} only, not uid {}", cred.uid())}),
                )
                .await;
                return;
            }
            Err(e) => {
                tracing::warn!("jobs-host daemon: no peer credentials: {e}");
                return;
            }
        };
        let (mut read, socket) = read;
        let hello = match tokio::time::timeout(HELLO_TIMEOUT, read_json_line(&mut read)).await {
            Ok(Ok(Some(line))) => serde_json::from_value::<Hello>(line).map_err(|e| e.to_string()),
            Ok(Ok(None)) => return,
            Ok(Err(e)) => Err(e),
            Err(_) => Err("no hello within 10 s".to_owned()),
        };
        let hello = match hello {
            Ok(hello) if hello.protocol == PROTOCOL => hello,
            Ok(hello) => {
                let why = format!(
                    "this daemon speaks protocol {PROTOCOL}, the client {}: restart the daemon (jobs-host daemon --stop)",
                    hello.protocol
                );
                let _ = answer(&mut write, &json!({"error": why})).await;
                return;
            }
            Err(e) => {
                let _ = answer(&mut write, &json!({"error": format!("bad hello: {e}")})).await;
                return;
            }
        };
        let result = match hello.kind {
            Kind::Mcp | Kind::Shell => self.front_end(hello, read, write, socket).await,
            Kind::Ctl => self.control(hello, read, write).await,
        };
        if let Err(e) = result {
            tracing::debug!("jobs-host daemon: connection ended: {e:#}");
        }
    }

    /// The session for `hello`, opened if it is new, taken over from its
    /// previous connection if it has one.
    async fn attach(
        self: &Arc<Self>,
        hello: &Hello,
        socket: Option<OwnedFd>,
    ) -> Result<(Arc<Durable>, u64, Announced)> {
        let key = hello
            .session
            .clone()
            .context("a session connection needs a session key")?;
        super::check_key(&key)?;
        let settings = hello
            .settings
            .clone()
            .context("a session connection needs its settings")?;
        let wanted = serde_json::to_value(&settings)?;
        let mut sessions = self.sessions.lock().await;
        let durable = match sessions.get(&key) {
            Some(durable) => {
                if durable.settings != wanted {
                    bail!(
                        "session {key:?} runs with other settings ({}); use another --session, or let it end first",
                        differences(&durable.settings, &wanted)
                    );
                }
                durable.clone()
            }
            None => {
                let mut settings = settings;
                if hello.kind == Kind::Mcp {
                    settings = settings.with_mcp_wait_cap();
                }
                let env = hello
                    .env
                    .iter()
                    .map(|(k, v)| (k.into(), v.into()))
                    .collect();
                let host = crate::host_on(
                    self.runtime.clone(),
                    self.cache_dir.as_deref(),
                    settings,
                    Some(env),
                )
                .await?;
                let (session, _) = Session::open(&key, host.mount.clone(), host.bash.clone());
                let linger = hello
                    .linger_ms
                    .map_or(DEFAULT_LINGER, Duration::from_millis)
                    .min(super::MAX_LINGER);
                let durable = Arc::new(Durable {
                    key: key.clone(),
                    settings: wanted,
                    host,
                    session: Arc::new(session),
                    linger,
                    front: Mutex::new(Front::default()),
                });
                sessions.insert(key.clone(), durable.clone());
                tracing::info!("jobs-host daemon: session {key:?} opened");
                durable
            }
        };
        self.activity.fetch_add(1, Ordering::AcqRel);
        let (front_end, announced) = durable.session.reattach();
        let mut front = lock(&durable.front);
        if let Some(lease) = front.lease.take() {
            lease.abort();
        }
        // The newest connection has the session: the previous one is shut,
        // so its calls in flight end without consuming anything.
        if let Some(old) = front.socket.take() {
            // SAFETY: shutdown on a descriptor we own.
            unsafe { libc::shutdown(old.as_raw_fd(), libc::SHUT_RDWR) };
        }
        front.front_end = front_end;
        front.socket = socket;
        drop(front);
        Ok((durable, front_end, announced))
    }

    /// Front end `front_end` of `durable` left: if no other took over, the
    /// session lingers, then ends.
    fn left(self: &Arc<Self>, durable: &Arc<Durable>, front_end: u64) {
        let mut front = lock(&durable.front);
        if front.front_end != front_end {
            return;
        }
        front.socket = None;
        let daemon = self.clone();
        let expiring = durable.clone();
        front.lease = Some(tokio::spawn(async move {
            tokio::time::sleep(expiring.linger).await;
            let mut sessions = daemon.sessions.lock().await;
            // A connection that came meanwhile took the lease away (it
            // aborts this task under the same lock).
            if lock(&expiring.front).front_end != front_end {
                return;
            }
            sessions.remove(&expiring.key);
            drop(sessions);
            tracing::info!(
                "jobs-host daemon: session {:?} had no client for {:?}; ending it",
                expiring.key,
                expiring.linger
            );
            end_session(&expiring).await;
            daemon.activity.fetch_add(1, Ordering::AcqRel);
            daemon.idle_check();
        }));
    }

    async fn front_end(
        self: Arc<Self>,
        hello: Hello,
        read: BufReader<OwnedReadHalf>,
        mut write: OwnedWriteHalf,
        socket: Option<OwnedFd>,
    ) -> Result<()> {
        let (durable, front_end, announced) = match self.attach(&hello, socket).await {
            Ok(attached) => attached,
            Err(e) => {
                answer(&mut write, &json!({"error": format!("{e:#}")})).await?;
                return Ok(());
            }
        };
        let served = async {
            answer(&mut write, &json!({"ok": true, "session": durable.key})).await?;
            match hello.kind {
                Kind::Mcp => {
                    let wire = hello.mcp.unwrap_or(super::McpWire {
                        structured_output: false,
                        progress_interval_ms: 5000,
                        tasks: true,
                        claude_channel_idle_ms: None,
                    });
                    let options = McpOptions {
                        structured_output: wire.structured_output,
                        progress_interval: Duration::from_millis(
                            wire.progress_interval_ms.clamp(10, 3_600_000),
                        ),
                        tasks: wire.tasks,
                        claude_channel: wire.claude_channel_idle_ms.map(Duration::from_millis),
                    };
                    let server =
                        crate::mcp_server(&durable.host.mount, durable.session.clone(), options)
                            .await?;
                    let io = Io::Stream {
                        input: Box::new(read),
                        output: Box::new(write),
                    };
                    server
                        .serve_io(io, announced, Leave::Detach(front_end))
                        .await
                }
                Kind::Shell => {
                    remote_console(&durable.session, read, write, announced, hello.interactive)
                        .await
                }
                Kind::Ctl => unreachable!("a control connection has no session"),
            }
        }
        .await;
        durable.session.detach(front_end);
        self.left(&durable, front_end);
        served
    }

    /// The sessions a request names: one by key, or all.
    async fn chosen(&self, session: Option<&str>) -> Result<Vec<Arc<Durable>>> {
        let sessions = self.sessions.lock().await;
        match session {
            Some(key) => match sessions.get(key) {
                Some(durable) => Ok(vec![durable.clone()]),
                None => bail!("no session {key:?} in this daemon"),
            },
            None => {
                let mut all: Vec<_> = sessions.values().cloned().collect();
                all.sort_by(|a, b| a.key.cmp(&b.key));
                Ok(all)
            }
        }
    }

    /// The session holding job `id`: the one named, or the only one that
    /// has it.
    async fn find(&self, id: &str, session: Option<&str>) -> Result<Arc<Durable>> {
        let holding: Vec<_> = self
            .chosen(session)
            .await?
            .into_iter()
            .filter(|d| d.host.mount.registry().inspect(id).is_some())
            .collect();
        match holding.as_slice() {
            [one] => Ok(one.clone()),
            [] => match session {
                Some(key) => bail!("no job {id} in session {key:?}"),
                None => bail!("no job {id} in any session"),
            },
            many => bail!(
                "job {id} is in {} sessions ({}): name one with --session",
                many.len(),
                many.iter()
                    .map(|d| format!("{:?}", d.key))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    async fn control(
        self: Arc<Self>,
        hello: Hello,
        _read: BufReader<OwnedReadHalf>,
        mut write: OwnedWriteHalf,
    ) -> Result<()> {
        let Some(request) = hello.request else {
            return answer(
                &mut write,
                &json!({"error": "a control connection needs a request"}),
            )
            .await;
        };
        let result = self.request(request, &mut write).await;
        if let Err(e) = result {
            answer(&mut write, &json!({"error": format!("{e:#}")})).await?;
        }
        Ok(())
    }

    async fn request(&self, request: Request, write: &mut OwnedWriteHalf) -> Result<()> {
        match request {
            Request::Ps { session } => {
                let mut jobs = Vec::new();
                for durable in self.chosen(session.as_deref()).await? {
                    let registry = durable.host.mount.registry();
                    for job in registry.list(Some(durable.session.owner())) {
                        let (pid, ports) = registry.process_view(&job.id).unwrap_or_default();
                        jobs.push(json!({
                            "id": job.id,
                            "session": durable.key,
                            "status": job.status.as_str(),
                            "detail": job.detail,
                            "started_at": job.started_at,
                            "finished_at": job.finished_at,
                            "pid": pid,
                            "ports": ports.iter().map(|p| p.port).collect::<Vec<_>>(),
                            "label": job.label,
                        }));
                    }
                }
                let sessions: Vec<_> = self.sessions.lock().await.keys().cloned().collect();
                answer(
                    write,
                    &json!({"ok": true, "now": registry_now(), "jobs": jobs, "sessions": sessions}),
                )
                .await
            }
            Request::Logs {
                id,
                session,
                stderr,
                lines,
                follow,
            } => {
                let durable = self.find(&id, session.as_deref()).await?;
                let stream = if stderr {
                    OutputStream::Stderr
                } else {
                    OutputStream::Stdout
                };
                answer(write, &json!({"ok": true})).await?;
                follow_logs(&durable, &id, stream, lines, follow, write).await
            }
            Request::Kill { id, session } => {
                let durable = self.find(&id, session.as_deref()).await?;
                let outcome = durable
                    .host
                    .mount
                    .registry()
                    .cancel(&id, None)
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
                let done = outcome == host::registry::KillOutcome::AlreadyFinished;
                answer(
                    write,
                    &json!({"ok": true, "already_finished": done, "session": durable.key}),
                )
                .await
            }
            Request::Wait { id, session } => {
                let durable = self.find(&id, session.as_deref()).await?;
                let registry = durable.host.mount.registry();
                registry.settled(&id).await;
                let job = registry.inspect(&id).context("the job's record is gone")?;
                answer(
                    write,
                    &json!({"ok": true, "status": job.status.as_str(), "detail": job.detail}),
                )
                .await
            }
            Request::Stop => {
                answer(write, &json!({"ok": true})).await?;
                self.stop.cancel();
                Ok(())
            }
        }
    }
}

fn registry_now() -> u64 {
    host::registry::now_ms()
}

/// The top-level settings that differ, by name.
fn differences(old: &Value, new: &Value) -> String {
    let (Some(old), Some(new)) = (old.as_object(), new.as_object()) else {
        return "all".to_owned();
    };
    let mut names: Vec<&str> = old
        .keys()
        .chain(new.keys())
        .filter(|k| old.get(*k) != new.get(*k))
        .map(String::as_str)
        .collect();
    names.sort_unstable();
    names.dedup();
    names.join(", ")
}

/// Ends a session for good: its jobs are killed and forgotten, its files go.
async fn end_session(durable: &Durable) {
    durable.session.close().await;
    durable
        .host
        .bash
        .shutdown(durable.host.shutdown_grace)
        .await;
    durable.host.mount.registry().dispose().await;
}

/// Writes one JSON line.
async fn answer(write: &mut (impl AsyncWriteExt + Unpin), value: &Value) -> Result<()> {
    let mut line = serde_json::to_vec(value)?;
    line.push(b'\n');
    write.write_all(&line).await?;
    write.flush().await?;
    Ok(())
}

/// Reads one JSON line of at most [`MAX_HELLO_BYTES`]; `None` at the end.
async fn read_json_line(
    read: &mut (impl tokio::io::AsyncBufRead + Unpin),
) -> std::result::Result<Option<Value>, String> {
    let mut line = Vec::new();
    loop {
        let buf = read.fill_buf().await.map_err(|e| e.to_string())?;
        if buf.is_empty() {
            return if line.is_empty() {
                Ok(None)
            } else {
                Err("the line has no end".to_owned())
            };
        }
        let (used, done) = match memchr(buf) {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        if line.len() + used > MAX_HELLO_BYTES {
            return Err(format!("a line longer than {MAX_HELLO_BYTES} bytes"));
        }
        line.extend_from_slice(&buf[..used]);
        read.consume(used);
        if done {
            return serde_json::from_slice(&line)
                .map(Some)
                .map_err(|e| format!("not JSON: {e}"));
        }
    }
}

fn memchr(buf: &[u8]) -> Option<usize> {
    buf.iter().position(|b| *b == b'\n')
}

/// Sends a job's lines of `stream` as `{"line": ...}`, then, with `follow`,
/// the lines it writes until it ends, then `{"end": ...}`. Nothing is
/// consumed: the model's read cursor stays where it is. While the job runs
/// its last line may still grow, so it is sent once the next one starts or
/// the job ends.
async fn follow_logs(
    durable: &Durable,
    id: &str,
    stream: OutputStream,
    last: Option<u32>,
    follow: bool,
    write: &mut OwnedWriteHalf,
) -> Result<()> {
    let registry: &JobRegistry = durable.host.mount.registry();
    let owner = durable.session.owner();
    let page = |query: &LineQuery| {
        registry
            .lines(id, Some(owner), query)
            .map_err(|e| anyhow::anyhow!("{e}"))
    };
    let mut next = match last {
        Some(count) => {
            let (page, _) = page(&LineQuery::Last { stream, count })?;
            match page.lines.first() {
                Some(line) => line.number,
                None => page.extents.first().map_or(1, |e| e.last_line + 1),
            }
        }
        None => 1,
    };
    loop {
        let (lines, job) = page(&LineQuery::Range {
            stream,
            start: next,
            count: LOG_PAGE,
        })?;
        // The snapshot is taken after the page: a job that ended before it
        // has every line in it, or in the next page.
        let ended = job.status.is_terminal();
        let extent = lines.extents.first().copied();
        let (first, last, whole) =
            extent.map_or((1, 0, 0), |e| (e.first_line, e.last_line, e.whole_lines));
        if first > next && last > 0 {
            answer(write, &json!({"dropped": [next, first - 1]})).await?;
            next = first;
        }
        // A running job's last line may still grow: it is sent once whole.
        let upto = if ended { last } else { whole };
        let from = next;
        for line in lines
            .lines
            .iter()
            .filter(|l| l.number >= from && l.number <= upto)
        {
            answer(write, &json!({"line": line.text})).await?;
            next = line.number + 1;
        }
        if next <= upto && !lines.lines.is_empty() {
            continue;
        }
        if ended || !follow {
            return answer(
                write,
                &json!({"end": {"status": job.status.as_str(), "detail": job.detail}}),
            )
            .await;
        }
        tokio::select! {
            () = registry.settled(id) => {}
            () = tokio::time::sleep(FOLLOW_POLL) => {}
        }
    }
}

/// The console over a socket: `{"line": ...}` in, `{"out": ...}`,
/// `{"error": ...}` or `{"quit": true}` out for each, and `{"notice": ...}`
/// as notices arrive when the client shows them so.
async fn remote_console(
    session: &Session,
    mut read: BufReader<OwnedReadHalf>,
    write: OwnedWriteHalf,
    mut announced: Announced,
    interactive: bool,
) -> Result<()> {
    let (lines, mut outgoing) = tokio::sync::mpsc::unbounded_channel::<Value>();
    let writer = tokio::spawn(async move {
        let mut write = write;
        while let Some(value) = outgoing.recv().await {
            if answer(&mut write, &value).await.is_err() {
                break;
            }
        }
    });
    let notices = interactive.then(|| {
        let lines = lines.clone();
        tokio::spawn(async move {
            while let Some((lane, notice)) = announced.recv().await {
                let text = console::render_notice(lane, &notice).replacen(
                    "[notice via",
                    "[notice arrived via",
                    1,
                );
                if lines.send(json!({"notice": text})).is_err() {
                    break;
                }
            }
        })
    });
    let result = async {
        while let Some(value) = read_json_line(&mut read)
            .await
            .map_err(|e| anyhow::anyhow!(e))?
        {
            let Some(line) = value.get("line").and_then(Value::as_str) else {
                lines.send(json!({"error": "expected {\"line\": ...}"}))?;
                continue;
            };
            let reply = match console::parse(line) {
                Ok(command) => match console::run(session, command).await {
                    Some(out) => json!({"out": out}),
                    None => json!({"quit": true}),
                },
                Err(e) => json!({"error": e}),
            };
            lines.send(reply)?;
        }
        Ok::<(), anyhow::Error>(())
    }
    .await;
    if let Some(notices) = notices {
        notices.abort();
    }
    drop(lines);
    let _ = writer.await;
    result
}
