//! `jobs-host daemon`: the per-user process that owns durable sessions and
//! their jobs, and serves their clients on a Unix socket.

use host::sync::lock;
use std::collections::HashMap;
use std::os::fd::AsRawFd;
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

use super::journal::{JobRow, Journal};
use super::{DEFAULT_LINGER, Hello, Kind, MAX_HELLO_BYTES, PROTOCOL, Request};
use crate::mcp::{Io, Leave};
use crate::signals::Signals;
use crate::{Host, McpOptions, console};

/// How long a daemon with no session and no connection stays before it
/// exits: long enough for a client that started it to connect, or for a
/// person's `ps` right after the last session ended.
const IDLE_EXIT: Duration = Duration::from_secs(5);

/// The most sessions one daemon keeps at once.
const MAX_SESSIONS: usize = 64;

/// How long a client has to send its first line.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// How often `logs --follow` looks for new lines when nothing else wakes it.
const FOLLOW_POLL: Duration = Duration::from_millis(250);

/// Lines one page of `logs` asks for.
const LOG_PAGE: u32 = 1000;

/// Detaches a session's front end and starts its linger when dropped.
struct Leaving {
    daemon: Arc<Daemon>,
    durable: Arc<Durable>,
    front_end: u64,
}

impl Drop for Leaving {
    fn drop(&mut self) {
        self.durable.session.detach(self.front_end);
        self.daemon.left(&self.durable, self.front_end);
    }
}

/// Counts an open connection while it lives, and looks for an idle daemon
/// when it goes, however it goes.
struct Counted(Arc<Daemon>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::AcqRel);
        self.0.activity.fetch_add(1, Ordering::AcqRel);
        self.0.clone().idle_check();
    }
}

/// Why a session connection was refused.
struct Refusal {
    message: String,
    /// The session has a client already: the caller may try again soon.
    busy: bool,
}

impl From<&str> for Refusal {
    fn from(message: &str) -> Refusal {
        Refusal::from(message.to_owned())
    }
}

impl From<String> for Refusal {
    fn from(message: String) -> Refusal {
        Refusal {
            message,
            busy: false,
        }
    }
}

/// Notices announced to a session's front end.
type Announced = tokio::sync::mpsc::UnboundedReceiver<(host::Lane, host::NoticeMessage)>;

/// One durable session: its own registry, mount and shell producer, kept
/// while no client is connected, for at most its linger.
struct Durable {
    key: String,
    /// Where its jobs' monitors keep their files, and its lease.
    files: Option<SessionFiles>,
    /// The leases its jobs' monitors keep to: its own, and those of the
    /// sessions of dead daemons whose jobs it took on.
    leases: Vec<PathBuf>,
    /// The directories of those sessions.
    adopted_from: Vec<PathBuf>,
    /// The settings it was opened with, as the client sent them.
    settings: Value,
    host: Host,
    session: Arc<Session>,
    front: Mutex<Front>,
    /// Writes its jobs to the journal as they change.
    recorder: Option<Recorder>,
    /// Set by the first end of the session; a second does nothing.
    ended: std::sync::atomic::AtomicBool,
}

/// A session's jobs, written to the journal shortly after each change (a
/// burst of starts is one transaction).
struct Recorder {
    journal: Arc<Journal>,
    /// The session instance's number in the journal.
    instance: i64,
    /// The rows as last written.
    written: Arc<Mutex<HashMap<String, JobRow>>>,
    task: tokio::task::JoinHandle<()>,
    _listener: host::registry::ListenerRegistration,
}

/// How long the recorder lets changes gather before it writes them.
const RECORD_DELAY: Duration = Duration::from_millis(10);

impl Recorder {
    fn start(journal: Arc<Journal>, key: &str, session: &Session) -> Result<Recorder> {
        let instance = journal.open_session(key, host::registry::now_ms())?;
        let dirty = Arc::new(tokio::sync::Notify::new());
        let poke = dirty.clone();
        let listener = session
            .registry()
            .on_jobs_changed(move |_| poke.notify_one());
        let written = Arc::new(Mutex::new(HashMap::new()));
        let registry = session.registry().clone();
        let owner = session.owner().clone();
        let (task_journal, task_written) = (journal.clone(), written.clone());
        let task = tokio::spawn(async move {
            // The registry's removals when every job was last written (none
            // yet): until it moves, no row is to be dropped, and only the
            // jobs changed since are looked at.
            let mut removals_written = None;
            loop {
                dirty.notified().await;
                tokio::time::sleep(RECORD_DELAY).await;
                // A job is recorded at its start, before its monitor exists
                // (the spawn goes on meanwhile): it is written again once
                // its monitor's pid is known, for whoever takes it on.
                for attempt in 0..3 {
                    let removals = registry.removals();
                    let unspawned = if removals_written == Some(removals) {
                        write_durable_changes(
                            &task_journal,
                            instance,
                            &registry,
                            &owner,
                            &task_written,
                        )
                        .await
                    } else {
                        let written =
                            write_rows(&task_journal, instance, &registry, &owner, &task_written)
                                .await;
                        if written.is_some() {
                            removals_written = Some(removals);
                        }
                        written.unwrap_or_default()
                    };
                    if unspawned.is_empty() || attempt == 2 {
                        break;
                    }
                    until_spawned(&registry, &unspawned).await;
                }
            }
        });
        Ok(Recorder {
            journal,
            instance,
            written,
            task,
            _listener: listener,
        })
    }

    /// Makes each reply of `session` wait until what it shows is recorded
    /// (how far the model read, which ends it saw), so that a daemon killed
    /// right after a reply went out leaves nothing to show twice.
    fn flush_before_replies(&self, session: &Session) {
        let (journal, instance, written) =
            (self.journal.clone(), self.instance, self.written.clone());
        let (registry, owner) = (session.registry().clone(), session.owner().clone());
        let hook: host::session::BeforeReply = Arc::new(move || {
            let (journal, written) = (journal.clone(), written.clone());
            let (registry, owner) = (registry.clone(), owner.clone());
            Box::pin(async move {
                // A start's answer waits for its monitor to exist (the spawn
                // goes on after the start): a job it names survives a daemon
                // killed right after it, and is found by the next one. Its
                // row names the job's file, which is held from its making to
                // its monitor's end, and where the monitor writes its pid
                // first (see `host::bash::file_in_use`); the recorder writes
                // the pid too, later, for a person's `ps`.
                let unspawned =
                    write_durable_changes(&journal, instance, &registry, &owner, &written).await;
                if !unspawned.is_empty() {
                    until_spawned(&registry, &unspawned).await;
                }
            })
        });
        let _ = session.set_before_reply(hook);
    }

    /// Writes what is left and records the session's end.
    async fn end(&self, session: &Session) {
        self.task.abort();
        write_rows(
            &self.journal,
            self.instance,
            session.registry(),
            session.owner(),
            &self.written,
        )
        .await;
        if let Err(e) = self
            .journal
            .end_session(self.instance, host::registry::now_ms())
        {
            tracing::warn!("jobs-host daemon: the journal did not take a session's end: {e:#}");
        }
    }
}

/// Writes what changed of `owner`'s jobs (a start, a read's cursor, a seen
/// end; see `host::registry::DurableState`) since they were last written,
/// before every reply: a look at each job, a copy of only those that
/// changed. Answers the running ones under a monitor not spawned yet.
async fn write_durable_changes(
    journal: &Arc<Journal>,
    instance: i64,
    registry: &JobRegistry,
    owner: &host::Owner,
    written: &Arc<Mutex<HashMap<String, JobRow>>>,
) -> Vec<String> {
    let (journal, written) = (journal.clone(), written.clone());
    let (registry, owner) = (registry.clone(), owner.clone());
    let recorded = tokio::task::spawn_blocking(move || {
        let mut written = lock(&written);
        let states = registry.changed_states(Some(&owner));
        let unspawned = unspawned(&states);
        let changed = changed_rows(&registry, &states, &written);
        if !changed.is_empty() {
            journal.record_some(instance, changed, &mut written)?;
        }
        registry.mark_recorded(&states);
        Ok(unspawned)
    })
    .await;
    taken(recorded).unwrap_or_default()
}

/// The running jobs under a monitor in `states` whose monitor is not
/// spawned yet.
fn unspawned(states: &[(String, host::registry::DurableState)]) -> Vec<String> {
    states
        .iter()
        .filter(|(_, s)| {
            s.durable && s.status == host::registry::JobStatus::Running && s.monitor.is_none()
        })
        .map(|(id, _)| id.clone())
        .collect()
}

/// The rows of the jobs in `states` that changed since `written`: only
/// they are read whole.
fn changed_rows(
    registry: &JobRegistry,
    states: &[(String, host::registry::DurableState)],
    written: &HashMap<String, JobRow>,
) -> Vec<JobRow> {
    states
        .iter()
        .filter(|(id, state)| {
            written.get(id).is_none_or(|row| {
                row.status != state.status.as_str()
                    || row.finished_at != state.finished_at
                    || row.cursors != state.cursors
                    || row.end_seen != state.end_seen
                    || row.monitor
                        != state
                            .monitor
                            .map(|(pid, start)| (i64::from(pid), start as i64))
            })
        })
        .filter_map(|(id, _)| Some(job_row(registry, registry.inspect(id)?)))
        .collect()
}

/// The journal's row of `job`.
fn job_row(registry: &JobRegistry, job: host::registry::JobSnapshot) -> JobRow {
    let durable = registry.durable_view(&job.id);
    let monitor = durable
        .as_ref()
        .and_then(|d| d.monitor)
        .map(|(pid, start)| (i64::from(pid), start as i64));
    JobRow {
        id: job.id,
        label: job.label,
        status: job.status.as_str().to_owned(),
        detail: job.detail,
        started_at: job.started_at,
        finished_at: job.finished_at,
        files: durable.as_ref().map(|d| d.files.display().to_string()),
        monitor,
        cursors: durable.as_ref().map_or([0, 0], |d| d.cursors),
        end_seen: durable.is_some_and(|d| d.end_seen),
    }
}

/// Waits until the jobs `ids` are spawned, at most a second (a spawner
/// thread stalled by the machine is not waited for without end).
async fn until_spawned(registry: &JobRegistry, ids: &[String]) {
    let all = async {
        for id in ids {
            registry.until_spawned(id).await;
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), all).await;
}

/// Writes `owner`'s jobs that changed since `written`, off the async
/// workers. The running jobs under a monitor that were written without
/// their monitor's pid (not spawned yet); `None` when the journal did not
/// take the write.
async fn write_rows(
    journal: &Arc<Journal>,
    instance: i64,
    registry: &JobRegistry,
    owner: &host::Owner,
    written: &Arc<Mutex<HashMap<String, JobRow>>>,
) -> Option<Vec<String>> {
    let (journal, written) = (journal.clone(), written.clone());
    let (registry, owner) = (registry.clone(), owner.clone());
    let recorded = tokio::task::spawn_blocking(move || {
        // Looked at under the lock: of two writes, the later one's look is
        // the newer, so an older one can never overwrite it.
        let mut written = lock(&written);
        let states = registry.job_states(Some(&owner));
        let unspawned = unspawned(&states);
        let changed = changed_rows(&registry, &states, &written);
        let present = states.iter().map(|(id, _)| id.clone()).collect();
        journal
            .record_changes(instance, changed, &present, &mut written)
            .map(|gone| {
                registry.mark_recorded(&states);
                // Retention dropped these jobs: their files go with them.
                for file in gone {
                    retire_file(std::path::Path::new(&file));
                }
                unspawned
            })
    })
    .await;
    taken(recorded)
}

/// What a journal write off the async workers answered; `None`, said in
/// the log, when the journal did not take it or its thread failed.
fn taken<T>(recorded: std::result::Result<Result<T>, tokio::task::JoinError>) -> Option<T> {
    match recorded {
        Ok(Ok(answer)) => Some(answer),
        Ok(Err(e)) => {
            tracing::warn!("jobs-host daemon: the journal did not take a change: {e:#}");
            None
        }
        Err(e) => {
            tracing::warn!("jobs-host daemon: the journal's writer failed: {e}");
            None
        }
    }
}

/// The daemon's emptied job files, reused for new jobs (see
/// `host::bash::SpareFiles`); set once at its start.
static SPARE_FILES: std::sync::OnceLock<Arc<host::bash::SpareFiles>> = std::sync::OnceLock::new();

/// Lets go of a dropped job's file: kept empty for a later job, or removed.
fn retire_file(file: &std::path::Path) {
    match SPARE_FILES.get() {
        Some(spare) => spare.retire(file),
        None => {
            let _ = std::fs::remove_file(file);
        }
    }
}

/// Lets go of a session's directory and its job files (see [`retire_file`]).
fn retire_dir(dir: &std::path::Path) -> std::io::Result<()> {
    match SPARE_FILES.get() {
        Some(spare) => spare.retire_dir(dir),
        None => std::fs::remove_dir_all(dir),
    }
}

/// A session's directory in the state directory: a directory per job
/// (its monitor's files) and the lease its monitors keep to if the daemon
/// is gone.
struct SessionFiles {
    dir: PathBuf,
    lease: PathBuf,
}

/// How often a connected session's lease is pushed on, and the margin it
/// gets past its linger: monitors of a daemon that died with a client
/// connected give the jobs the whole linger from about then.
const LEASE_RENEWAL: Duration = Duration::from_secs(10);

impl SessionFiles {
    /// Makes the directory of the daemon's `n`th session in `state`, with
    /// a lease `linger` from now.
    fn make(state: &std::path::Path, n: u64, linger: Duration) -> Result<SessionFiles> {
        let jobs = state.join("jobs");
        super::private_dir(&jobs)?;
        // With a random part: a later daemon may get the same pid (after a
        // reboot, in a container), and must not take a dead one's directory.
        let dir = jobs.join(format!("{}-{n}-{:016x}", std::process::id(), random_u64()));
        if dir.exists() {
            bail!("{} exists already", dir.display());
        }
        super::private_dir(&dir)?;
        let files = SessionFiles {
            lease: dir.join("lease"),
            dir,
        };
        files.set_deadline(host::registry::now_ms() + lease_ms(linger))?;
        Ok(files)
    }

    fn set_deadline(&self, deadline: u64) -> Result<()> {
        write_deadline(&self.lease, deadline)
    }

    /// The jobs' settings for a session kept here.
    /// (Each stream's file bound is the session's spill limit, set with
    /// the rest of its settings.)
    fn durable_jobs(&self) -> Result<host::bash::DurableJobs> {
        Ok(host::bash::DurableJobs {
            monitor: monitor_program(),
            dir: self.dir.clone(),
            lease: self.lease.clone(),
            max_file_bytes: 0,
            state_dir: self
                .dir
                .parent()
                .and_then(std::path::Path::parent)
                .map(ToOwned::to_owned),
            spare: SPARE_FILES.get().cloned(),
        })
    }
}

/// Writes a lease's deadline (epoch ms) in place: monitors hold the file
/// open, and read it whole (one short write at its start).
fn write_deadline(lease: &std::path::Path, deadline: u64) -> Result<()> {
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(lease)
        .with_context(|| format!("cannot open {}", lease.display()))?;
    file.write_all_at(format!("{deadline:020}\n").as_bytes(), 0)
        .with_context(|| format!("cannot write {}", lease.display()))?;
    Ok(())
}

impl Durable {
    /// Sets every lease this session's monitors keep to.
    fn set_deadline(&self, deadline: u64) {
        for lease in &self.leases {
            if let Err(e) = write_deadline(lease, deadline) {
                tracing::warn!("jobs-host daemon: {e:#}");
            }
        }
    }
}

/// Whether `path` is a job's file in a session directory of `jobs_dir`
/// (`jobs_dir/<session>/job-<n>`, a regular file, no link on the way).
fn is_job_file(jobs_dir: &std::path::Path, path: &std::path::Path) -> bool {
    use std::path::Component;
    let Ok(rest) = path.strip_prefix(jobs_dir) else {
        return false;
    };
    let parts: Vec<Component<'_>> = rest.components().collect();
    let [Component::Normal(_), Component::Normal(name)] = parts[..] else {
        return false;
    };
    let numbered = name
        .to_str()
        .and_then(|n| n.strip_prefix("job-"))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    let plain = |p: &std::path::Path| {
        std::fs::symlink_metadata(p).is_ok_and(|m| !m.file_type().is_symlink())
    };
    numbered
        && plain(jobs_dir)
        && path.parent().is_some_and(plain)
        && std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file())
}

/// Removes the directories that sessions of dead daemons left in
/// `state/jobs`, but those of jobs still under their monitors (kept for the
/// next session of their key).
fn remove_stale_sessions(state: &std::path::Path, journal: &Journal) {
    let needed = match journal.needed_files() {
        Ok(needed) => needed,
        Err(e) => {
            tracing::warn!("jobs-host daemon: cannot read the journal: {e:#}");
            return;
        }
    };
    let Ok(entries) = std::fs::read_dir(state.join("jobs")) else {
        return;
    };
    // Before this daemon has any session: every directory is a dead one's.
    for entry in entries.flatten() {
        let dir = entry.path();
        if needed
            .iter()
            .any(|f| std::path::Path::new(f).starts_with(&dir))
        {
            continue;
        }
        if let Err(e) = retire_dir(&dir) {
            tracing::warn!("jobs-host daemon: cannot remove {}: {e}", dir.display());
        }
    }
}

/// The program durable jobs' monitors run: `jobs-host-monitor` beside
/// this binary (small: nothing of the host but the monitor), held open from the daemon's start
/// so that an upgrade that replaces the files still runs the monitor of
/// this build; else this binary itself (`jobs-host monitor`).
fn monitor_program() -> PathBuf {
    static PROGRAM: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PROGRAM
        .get_or_init(|| {
            let beside = std::env::current_exe()
                .ok()
                .and_then(|exe| exe.parent().map(|d| d.join("jobs-host-monitor")));
            // Only a monitor of this build's protocol (a half-done upgrade
            // may leave another beside this binary).
            let ours = |path: &std::path::Path| {
                std::process::Command::new(path)
                    .arg("--protocol")
                    .stdin(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .output()
                    .is_ok_and(|out| {
                        String::from_utf8_lossy(&out.stdout).trim() == host::bash::MONITOR_COMMAND
                    })
            };
            let opened =
                beside.and_then(|path| std::fs::File::open(&path).ok().filter(|_| ours(&path)));
            // Kept open for the daemon's life, far above the descriptors a
            // job's spawn places (0 to 5): a spawn runs it by its
            // descriptor's name (closed in the job at its exec).
            let moved = opened.and_then(|file| {
                // SAFETY: F_DUPFD_CLOEXEC of a descriptor we own; the
                // duplicate is ours to keep.
                let fd = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 100) };
                (fd >= 0).then_some(fd)
            });
            match moved {
                Some(fd) => PathBuf::from(format!("/proc/self/fd/{fd}")),
                None => PathBuf::from("/proc/self/exe"),
            }
        })
        .clone()
}

/// A random number from the kernel (the time's, without one).
fn random_u64() -> u64 {
    let mut bytes = [0u8; 8];
    // SAFETY: getrandom into a buffer of its length.
    let got = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if got == 8 {
        u64::from_ne_bytes(bytes)
    } else {
        host::registry::now_ms()
    }
}

/// A lease's length past now for a session with `linger`.
fn lease_ms(linger: Duration) -> u64 {
    (linger + 2 * LEASE_RENEWAL).as_millis() as u64
}

/// The session's connection, if it has one.
#[derive(Default)]
struct Front {
    /// The current front end's number (`Session::reattach`).
    front_end: u64,
    /// The connected client's pid, while one is connected.
    connected: Option<i32>,
    /// How long the session is kept with no client: the latest client's.
    linger: Duration,
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
    /// Where sessions and jobs are recorded; `None` without a state directory.
    journal: Option<Arc<Journal>>,
    /// The state directory (the journal's, and the jobs' files); `None`
    /// without one, and then jobs die with the daemon.
    state: Option<PathBuf>,
    /// Numbers the sessions' directories.
    next_session: AtomicU64,
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
    if is_a_job(std::process::id() as i32) {
        bail!(
            "a background job may not run the daemon of durable sessions (it would end with the job)"
        );
    }
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
    // The log is this daemon's now: one grown past 1 MiB starts afresh (its
    // writers append, so they go on at the new end).
    let log = dir.join("daemon.log");
    if std::fs::metadata(&log).is_ok_and(|m| m.len() > super::MAX_LOG_BYTES)
        && let Ok(file) = std::fs::OpenOptions::new().write(true).open(&log)
    {
        let _ = file.set_len(0);
    }
    // Loaded before the socket is there, so a client that connects can be
    // served at once, and one whose daemon cannot load it finds no socket
    // and reads the log.
    let runtime = crate::load_runtime(cache_dir.as_deref())?;
    // The monitors' program, held from now on (see `monitor_program`).
    monitor_program();
    // A journal that is not ours, or broken, stops the daemon here: it is
    // never overwritten.
    let state = super::journal::state_dir();
    let journal = match &state {
        Some(state) => Some(Arc::new(Journal::open(
            state,
            std::process::id(),
            host::registry::now_ms(),
        )?)),
        None => {
            eprintln!(
                "jobs-host daemon: no XDG_STATE_HOME or HOME: nothing is journaled, and jobs end with the daemon"
            );
            None
        }
    };
    if let (Some(state), Some(_)) = (&state, &journal) {
        match host::bash::SpareFiles::open(state.join("spare")) {
            Ok(spare) => {
                let _ = SPARE_FILES.set(Arc::new(spare));
            }
            Err(e) => tracing::warn!("jobs-host daemon: no spare job files: {e}"),
        }
    }
    if let (Some(state), Some(journal)) = (&state, &journal) {
        remove_stale_sessions(state, journal);
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
    let daemon = Arc::new(Daemon {
        runtime,
        cache_dir,
        sessions: tokio::sync::Mutex::new(HashMap::new()),
        connections: AtomicUsize::new(0),
        activity: AtomicU64::new(0),
        stop: CancellationToken::new(),
        journal,
        state,
        next_session: AtomicU64::new(1),
    });
    tokio::spawn(daemon.clone().renew_leases());
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
                    let counted = Counted(daemon.clone());
                    tokio::spawn(async move {
                        let _counted = counted;
                        daemon.connection(stream).await;
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
    // The lock file stays: unlinked, a daemon starting now could lock the
    // old file while another locks a new one.
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
        for durable in &sessions {
            if let Some(lease) = lock(&durable.front).lease.take() {
                lease.abort();
            }
        }
        for durable in sessions {
            end_session(&durable).await;
        }
        if let Some(journal) = &self.journal
            && let Err(e) = journal.end_daemon(host::registry::now_ms())
        {
            tracing::warn!("jobs-host daemon: the journal did not take the daemon's end: {e:#}");
        }
    }

    async fn connection(self: Arc<Self>, stream: UnixStream) {
        // SAFETY: geteuid has no preconditions.
        let uid = unsafe { libc::geteuid() };
        let (read, mut write, peer) = match stream.peer_cred() {
            Ok(cred) if cred.uid() == uid => {
                let peer = cred.pid().unwrap_or(0);
                if peer > 0 && is_a_job(peer) {
                    tracing::warn!("jobs-host daemon: refused pid {peer}, a background job");
                    let mut stream = stream;
                    let _ = answer(
                        &mut stream,
                        &json!({"error": "refused: a background job may not drive the daemon of durable sessions"}),
                    )
                    .await;
                    return;
                }
                let (read, write) = stream.into_split();
                (BufReader::new(read), write, peer)
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
        let mut read = read;
        let hello = match tokio::time::timeout(HELLO_TIMEOUT, read_json_line(&mut read)).await {
            // The version first: a client of another build may send fields
            // this one does not know.
            Ok(Ok(Some(line))) => match line.get("protocol").and_then(Value::as_u64) {
                Some(version) if version != u64::from(PROTOCOL) => {
                    let why = format!(
                        "this daemon speaks protocol {PROTOCOL}, the client {version}: restart the daemon (jobs-host daemon --stop)"
                    );
                    let _ = answer(&mut write, &json!({"error": why})).await;
                    return;
                }
                _ => serde_json::from_value::<Hello>(line).map_err(|e| e.to_string()),
            },
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
            Kind::Mcp | Kind::Shell => self.front_end(hello, read, write, peer).await,
            Kind::Ctl => self.control(hello, read, write).await,
        };
        if let Err(e) = result {
            tracing::debug!("jobs-host daemon: connection ended: {e:#}");
        }
    }

    /// The session for `hello`, opened if it is new. A session whose client
    /// is still connected is refused (`busy`): one front end at a time, so
    /// nobody else takes the model's notices or output.
    async fn attach(
        self: &Arc<Self>,
        hello: &Hello,
        peer: i32,
    ) -> std::result::Result<(Arc<Durable>, u64, Announced), Refusal> {
        let key = hello
            .session
            .clone()
            .ok_or_else(|| Refusal::from("a session connection needs a session key"))?;
        super::check_key(&key).map_err(|e| Refusal::from(format!("{e:#}")))?;
        let settings = hello
            .settings
            .clone()
            .ok_or_else(|| Refusal::from("a session connection needs its settings"))?;
        let wanted = serde_json::to_value(&settings).map_err(|e| Refusal::from(e.to_string()))?;
        let linger = hello
            .linger_ms
            .map(|ms| Duration::from_millis(ms).min(super::MAX_LINGER));
        let mut sessions = self.sessions.lock().await;
        let durable = match sessions.get(&key) {
            Some(durable) => {
                if durable.settings != wanted {
                    return Err(Refusal::from(format!(
                        "session {key:?} runs with other settings ({}); use another --session, or let it end first",
                        differences(&durable.settings, &wanted)
                    )));
                }
                durable.clone()
            }
            None => {
                if sessions.len() >= MAX_SESSIONS {
                    return Err(Refusal::from(format!(
                        "this daemon already keeps {MAX_SESSIONS} sessions; let one end first (jobs-host ps --all)"
                    )));
                }
                // Every front end of a durable session gets MCP's cap on a
                // wait, so an MCP client that attaches to a session a console
                // opened is not left waiting past its own timeouts.
                let settings = settings.with_mcp_wait_cap();
                let files = match &self.state {
                    Some(state) => Some(
                        SessionFiles::make(
                            state,
                            self.next_session.fetch_add(1, Ordering::Relaxed),
                            linger.unwrap_or(DEFAULT_LINGER),
                        )
                        .map_err(|e| Refusal::from(format!("{e:#}")))?,
                    ),
                    None => None,
                };
                let durable_jobs = match &files {
                    Some(files) => Some(
                        files
                            .durable_jobs()
                            .map_err(|e| Refusal::from(format!("{e:#}")))?,
                    ),
                    None => None,
                };
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
                    durable_jobs,
                )
                .await
                .map_err(|e| Refusal::from(format!("{e:#}")))?;
                let (session, _) = Session::open(&key, host.mount.clone(), host.bash.clone());
                let recorder = match &self.journal {
                    Some(journal) => Some(
                        Recorder::start(journal.clone(), &key, &session)
                            .map_err(|e| Refusal::from(format!("the journal: {e:#}")))?,
                    ),
                    None => None,
                };
                // Jobs a dead daemon left to their monitors come back to
                // the next session of their key.
                let (leases, adopted_from) = self
                    .adopt_orphans(&key, &host, &session, recorder.as_ref(), files.as_ref())
                    .await;
                if let Some(recorder) = &recorder {
                    recorder.flush_before_replies(&session);
                }
                let durable = Arc::new(Durable {
                    key: key.clone(),
                    files,
                    leases,
                    adopted_from,
                    settings: wanted,
                    host,
                    session: Arc::new(session),
                    front: Mutex::new(Front {
                        linger: DEFAULT_LINGER,
                        ..Front::default()
                    }),
                    recorder,
                    ended: std::sync::atomic::AtomicBool::new(false),
                });
                sessions.insert(key.clone(), durable.clone());
                tracing::info!("jobs-host daemon: session {key:?} opened");
                durable
            }
        };
        let mut front = lock(&durable.front);
        // A client that is gone while its connection is still being wound
        // down (its calls aborted, its last lines flushed) holds nothing.
        let exists = |pid: i32| {
            // SAFETY: kill with signal 0 only checks that the pid exists.
            pid <= 0 || unsafe { libc::kill(pid, 0) } == 0
        };
        if front.connected.is_some_and(|pid| !exists(pid)) {
            front.connected = None;
        }
        if let Some(pid) = front.connected {
            return Err(Refusal {
                message: format!(
                    "session {key:?} is in use by another client (pid {pid}); give this one another --session, or end that one"
                ),
                busy: true,
            });
        }
        self.activity.fetch_add(1, Ordering::AcqRel);
        if let Some(lease) = front.lease.take() {
            lease.abort();
        }
        if let Some(linger) = linger {
            front.linger = linger;
        }
        let (front_end, announced) = durable.session.reattach();
        front.front_end = front_end;
        front.connected = Some(peer);
        let lease = lease_ms(front.linger);
        drop(front);
        // A client is here: the monitors keep the jobs a linger from now
        // (a lease a dead daemon left may be about to pass).
        durable.set_deadline(host::registry::now_ms() + lease);
        Ok((durable.clone(), front_end, announced))
    }

    /// Front end `front_end` of `durable` left: the session lingers, then
    /// ends.
    fn left(self: &Arc<Self>, durable: &Arc<Durable>, front_end: u64) {
        let mut front = lock(&durable.front);
        if front.front_end != front_end {
            return;
        }
        front.connected = None;
        let linger = front.linger;
        durable.set_deadline(host::registry::now_ms() + linger.as_millis() as u64);
        let daemon = self.clone();
        let expiring = durable.clone();
        front.lease = Some(tokio::spawn(async move {
            tokio::time::sleep(linger).await;
            let mut sessions = daemon.sessions.lock().await;
            // A client that came meanwhile took the lease away (it aborts
            // this task under the same lock).
            if lock(&expiring.front).front_end != front_end {
                return;
            }
            // Only this very session: one that ended meanwhile (the daemon
            // stopping) and a new one of the same key are not this lease's.
            match sessions.get(&expiring.key) {
                Some(current) if Arc::ptr_eq(current, &expiring) => {
                    sessions.remove(&expiring.key);
                }
                _ => return,
            }
            drop(sessions);
            tracing::info!(
                "jobs-host daemon: session {:?} had no client for {linger:?}; ending it",
                expiring.key
            );
            end_session(&expiring).await;
            daemon.activity.fetch_add(1, Ordering::AcqRel);
            daemon.idle_check();
        }));
    }

    /// Takes on the jobs that sessions of `key` of dead daemons left running
    /// under their monitors (see `host::bash::BashProducer::adopt`); the
    /// leases the session keeps then, and the directories it took jobs from.
    async fn adopt_orphans(
        &self,
        key: &str,
        host: &crate::Host,
        session: &Session,
        recorder: Option<&Recorder>,
        files: Option<&SessionFiles>,
    ) -> (Vec<PathBuf>, Vec<PathBuf>) {
        let mut leases: Vec<PathBuf> = files.map(|f| f.lease.clone()).into_iter().collect();
        let mut from = Vec::new();
        let (Some(journal), Some(recorder)) = (&self.journal, recorder) else {
            return (leases, from);
        };
        let orphans = match journal.orphans(key) {
            Ok(orphans) => orphans,
            Err(e) => {
                tracing::warn!("jobs-host daemon: cannot read the journal's orphans: {e:#}");
                return (leases, from);
            }
        };
        let mut taken = Vec::new();
        // Orphans that cannot be taken on are recorded lost, not kept
        // waiting forever.
        let mut skipped = Vec::new();
        let Some(jobs_dir) = self.state.as_ref().map(|s| s.join("jobs")) else {
            return (leases, from);
        };
        for orphan in orphans {
            let Some(dir) = orphan.job.files.as_deref().map(PathBuf::from) else {
                continue;
            };
            // Only a job file of a session directory of ours, whatever the
            // journal says.
            if !is_job_file(&jobs_dir, &dir) {
                tracing::warn!(
                    "jobs-host daemon: the journal names {} for {}, which is not a job's file; not taken on",
                    dir.display(),
                    orphan.job.id
                );
                skipped.push(orphan);
                continue;
            }
            let request = host::bash::AdoptRequest {
                id: orphan.job.id.clone(),
                label: orphan.job.label.clone(),
                started_at: orphan.job.started_at,
                files: dir.clone(),
                monitor: orphan
                    .job
                    .monitor
                    .map(|(pid, start)| (pid as i32, start as u64)),
                cursors: orphan.job.cursors,
                end_seen: orphan.job.end_seen,
                recorded: (orphan.job.status != "running")
                    .then(|| (orphan.job.status.clone(), orphan.job.detail.clone())),
            };
            // Off the async workers' duty while it reads the job's files (and
            // waits, briefly, for a monitor that is starting).
            let adopted = tokio::task::block_in_place(|| {
                host.bash.adopt(Some(session.owner().clone()), request)
            });
            match adopted {
                Ok(found) => {
                    tracing::info!(
                        "jobs-host daemon: session {key:?} took on {} ({found:?})",
                        orphan.job.id
                    );
                    if let Some(old) = dir.parent() {
                        let lease = old.join("lease");
                        if !leases.contains(&lease) {
                            leases.push(lease);
                            from.push(old.to_owned());
                        }
                    }
                    taken.push(orphan);
                }
                Err(e) => {
                    tracing::warn!(
                        "jobs-host daemon: session {key:?} cannot take on {}: {e}",
                        orphan.job.id
                    );
                    skipped.push(orphan);
                }
            }
        }
        // The jobs are this session's in the journal before the old rows
        // let go of them: a daemon killed in between leaves two rows of a
        // job, and the next one takes the newer.
        let recorded = write_rows(
            &recorder.journal,
            recorder.instance,
            session.registry(),
            session.owner(),
            &recorder.written,
        )
        .await;
        // Not recorded anew: the old rows keep the jobs for the next daemon.
        if recorded.is_some()
            && let Err(e) = journal.adopted(&taken, recorder.instance)
        {
            tracing::warn!("jobs-host daemon: the journal did not take an adoption: {e:#}");
        }
        if let Err(e) = journal.lost(&skipped, host::registry::now_ms()) {
            tracing::warn!("jobs-host daemon: the journal did not take a lost job: {e:#}");
        }
        (leases, from)
    }

    /// Pushes each connected session's lease on, so its monitors keep its
    /// jobs for the linger if the daemon dies now (one with no client
    /// keeps the deadline its client's leaving set).
    async fn renew_leases(self: Arc<Self>) {
        loop {
            tokio::select! {
                () = self.stop.cancelled() => return,
                () = tokio::time::sleep(LEASE_RENEWAL) => {}
            }
            let sessions: Vec<Arc<Durable>> =
                self.sessions.lock().await.values().cloned().collect();
            let now = host::registry::now_ms();
            for durable in sessions {
                let linger = {
                    let front = lock(&durable.front);
                    front.connected.map(|_| front.linger)
                };
                if let Some(linger) = linger {
                    durable.set_deadline(now + lease_ms(linger));
                }
            }
        }
    }

    async fn front_end(
        self: Arc<Self>,
        hello: Hello,
        read: BufReader<OwnedReadHalf>,
        mut write: OwnedWriteHalf,
        peer: i32,
    ) -> Result<()> {
        let (durable, front_end, announced) = match self.attach(&hello, peer).await {
            Ok(attached) => attached,
            Err(refusal) => {
                answer(
                    &mut write,
                    &json!({"error": refusal.message, "busy": refusal.busy}),
                )
                .await?;
                return Ok(());
            }
        };
        // However this connection ends (an error, a panic in a call), the
        // session is left for the next client and starts to linger.
        let _leaving = Leaving {
            daemon: self.clone(),
            durable: durable.clone(),
            front_end,
        };
        async {
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
                        claude_channel: wire
                            .claude_channel_idle_ms
                            .map(|ms| Duration::from_millis(ms.min(3_600_000))),
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
                Kind::Ctl => Ok(()),
            }
        }
        .await
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
        mut read: BufReader<OwnedReadHalf>,
        mut write: OwnedWriteHalf,
    ) -> Result<()> {
        let Some(request) = hello.request else {
            return answer(
                &mut write,
                &json!({"error": "a control connection needs a request"}),
            )
            .await;
        };
        // A client that leaves (a `wait` or `logs -f` given up) ends its
        // request: nothing else would.
        let gone = async {
            let mut sink = [0u8; 512];
            loop {
                match tokio::io::AsyncReadExt::read(&mut read, &mut sink).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
        };
        let result = tokio::select! {
            result = self.request(request, &mut write) => result,
            () = gone => return Ok(()),
        };
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
                    &json!({"ok": true, "now": host::registry::now_ms(), "jobs": jobs, "sessions": sessions}),
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
    if durable.ended.swap(true, Ordering::AcqRel) {
        return;
    }
    // Its client (a daemon stopping with one connected) hears nothing more:
    // the jobs killed now send no notice, as when any session closes.
    let front_end = lock(&durable.front).front_end;
    durable.session.detach(front_end);
    // The jobs go first, so the journal records how each ended; then the
    // session forgets them. A job that will not settle (stuck in the
    // kernel, or started meanwhile) is not waited for past the grace.
    let grace = durable.host.shutdown_grace;
    // Jobs taken on from a dead daemon are not the producer's own spawns:
    // their monitors are asked to stop them as the producer stops its own.
    let registry = durable.session.registry();
    for job in registry.list(Some(durable.session.owner())) {
        if !job.status.is_terminal()
            && registry
                .durable_view(&job.id)
                .is_some_and(|d| d.monitor.is_some())
        {
            let _ = registry.cancel(&job.id, Some("its session ended"));
        }
    }
    durable.host.bash.shutdown(grace).await;
    let settled = async {
        for job in durable
            .session
            .registry()
            .list(Some(durable.session.owner()))
        {
            durable.session.registry().settled(&job.id).await;
        }
    };
    let _ = tokio::time::timeout(grace * 3 + Duration::from_secs(5), settled).await;
    if let Some(recorder) = &durable.recorder {
        recorder.end(&durable.session).await;
    }
    durable.session.close().await;
    durable.host.mount.registry().dispose().await;
    // Its jobs have ended with it: their files go too (the journal keeps
    // their records), with those of the sessions it took jobs from.
    for dir in durable
        .files
        .iter()
        .map(|f| &f.dir)
        .chain(&durable.adopted_from)
    {
        if let Err(e) = retire_dir(dir)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!("jobs-host daemon: cannot remove {}: {e}", dir.display());
        }
    }
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

/// Sends a job's lines of `stream` as `{"line": ...}` (the last `last` only,
/// when given), then, with `follow`, the lines it writes until it ends, then
/// `{"end": ...}`. Nothing is consumed: the model's read cursor stays where
/// it is. While a followed job runs, its last line may still grow, so it is
/// sent once whole or once the job ends.
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
    let page = |start: u64, count: u32| {
        registry
            .lines(
                id,
                Some(owner),
                &LineQuery::Range {
                    stream,
                    start,
                    count,
                },
            )
            .map_err(|e| anyhow::anyhow!("{e}"))
    };
    let mut next = 1;
    if let Some(count) = last {
        let (probe, _) = page(1, 1)?;
        if let Some(extent) = probe.extents.first() {
            next = (extent.last_line + 1)
                .saturating_sub(u64::from(count))
                .max(extent.first_line)
                .max(1);
        }
    }
    loop {
        // Looked at before the page: a job that had ended by then has every
        // line in this page or the next ones.
        let ended = registry
            .inspect(id)
            .is_none_or(|job| job.status.is_terminal());
        let (lines, job) = page(next, LOG_PAGE)?;
        let (first, last_line, whole) = lines
            .extents
            .first()
            .map_or((1, 0, 0), |e| (e.first_line, e.last_line, e.whole_lines));
        if first > next && last_line > 0 {
            answer(write, &json!({"dropped": [next, first - 1]})).await?;
            next = first;
        }
        let upto = if ended || !follow { last_line } else { whole };
        let from = next;
        for line in lines
            .lines
            .iter()
            .filter(|l| l.number >= from && l.number <= upto)
        {
            answer(write, &json!({"line": line.text})).await?;
            next = line.number + 1;
        }
        let more = next <= upto && next > from;
        if more {
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
/// as notices arrive when the client shows them so. A client that leaves
/// mid-command aborts it, as a cancelled call.
async fn remote_console(
    session: &Session,
    mut read: BufReader<OwnedReadHalf>,
    write: OwnedWriteHalf,
    mut announced: Announced,
    interactive: bool,
) -> Result<()> {
    // Bounded both ways: a client that sends without reading is held back.
    let (lines, mut outgoing) = tokio::sync::mpsc::channel::<Value>(64);
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
                if lines.send(json!({"notice": text})).await.is_err() {
                    break;
                }
            }
        })
    });
    let gone = CancellationToken::new();
    let (incoming, mut commands) = tokio::sync::mpsc::channel::<Value>(4);
    let reader = {
        let gone = gone.clone();
        tokio::spawn(async move {
            // A client sends a line and reads its answer: one that sends more
            // without reading is cut off, so its leaving is always seen.
            while let Ok(Some(value)) = read_json_line(&mut read).await {
                if incoming.try_send(value).is_err() {
                    break;
                }
            }
            gone.cancel();
        })
    };
    let result = async {
        while let Some(value) = commands.recv().await {
            let Some(line) = value.get("line").and_then(Value::as_str) else {
                lines
                    .send(json!({"error": "expected {\"line\": ...}"}))
                    .await?;
                continue;
            };
            let reply = match console::parse(line) {
                Ok(command) => match console::run_with_abort(session, command, &gone).await {
                    Some(out) => json!({"out": out}),
                    None => json!({"quit": true}),
                },
                Err(e) => json!({"error": e}),
            };
            if gone.is_cancelled() {
                break;
            }
            lines.send(reply).await?;
        }
        Ok::<(), anyhow::Error>(())
    }
    .await;
    reader.abort();
    if let Some(notices) = notices {
        notices.abort();
    }
    drop(lines);
    let _ = writer.await;
    result
}

/// Whether `pid` is a background job (of any jobs-host: its cgroup is a
/// job's, or it carries the job marker), which may not drive the daemon: a
/// fenced job could otherwise open an unfenced session.
pub(super) fn is_a_job(pid: i32) -> bool {
    let in_job_cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .is_ok_and(|cgroups| cgroups.lines().any(host::containment::is_job_cgroup));
    let marked = std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| {
        let marker = format!("{}=", host::containment::JOB_MARKER_VAR);
        environ
            .split(|b| *b == 0)
            .any(|var| var.starts_with(marker.as_bytes()))
    });
    in_job_cgroup || marked
}
