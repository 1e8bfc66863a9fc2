//! Sessions and their linger: a durable session's state, a client
//! attaching to it (opening it when it is new, taking on the jobs a dead
//! daemon left), its leaving, the lease its monitors keep to, and its end.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use host::session::Session;
use host::sync::lock;

use super::files::{LEASE_RENEWAL, SessionFiles, StateFiles, write_deadline};
use super::idle::Activity;
use super::recorder::Recorder;
use super::{Daemon, MAX_SESSIONS};
use crate::daemon::{DEFAULT_LINGER, Hello};
use crate::wiring::Host;

/// Detaches a session's front end and starts its linger when dropped.
pub(super) struct Leaving {
    pub(super) daemon: Arc<Daemon>,
    pub(super) durable: Arc<Durable>,
    pub(super) front_end: u64,
}

impl Drop for Leaving {
    fn drop(&mut self) {
        self.durable.session.detach(self.front_end);
        self.daemon.left(&self.durable, self.front_end);
    }
}

/// Why a session connection was refused.
pub(super) struct Refusal {
    pub(super) message: String,
    /// The session has a client already: the caller may try again soon.
    pub(super) busy: bool,
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
pub(super) type Announced = tokio::sync::mpsc::UnboundedReceiver<(host::Lane, host::NoticeMessage)>;

/// One durable session: its own registry, mount and shell producer, kept
/// while no client is connected, for at most its linger.
pub(super) struct Durable {
    pub(super) key: String,
    /// Where its jobs' monitors keep their files, and its lease.
    pub(super) files: Option<SessionFiles>,
    /// The leases its jobs' monitors keep to: its own, and those of the
    /// sessions of dead daemons whose jobs it took on.
    pub(super) leases: Vec<PathBuf>,
    /// The directories of those sessions.
    pub(super) adopted_from: Vec<PathBuf>,
    /// The settings it was opened with, as the client sent them.
    pub(super) settings: Value,
    pub(super) host: Host,
    pub(super) session: Arc<Session>,
    pub(super) front: Mutex<Front>,
    /// Writes its jobs to the journal as they change.
    pub(super) recorder: Option<Recorder>,
    /// Set by the first end of the session; a second does nothing.
    pub(super) ended: std::sync::atomic::AtomicBool,
    /// Keeps the daemon from idling while the session lives.
    pub(super) _activity: Activity,
}

impl Durable {
    /// Sets every lease this session's monitors keep to.
    pub(super) fn set_deadline(&self, deadline: u64) {
        for lease in &self.leases {
            if let Err(e) = write_deadline(lease, deadline) {
                tracing::warn!("jobs-host daemon: {e:#}");
            }
        }
    }
}

/// A lease's length past now for a session with `linger`.
pub(super) fn lease_ms(linger: Duration) -> u64 {
    (linger + 2 * LEASE_RENEWAL).as_millis() as u64
}

/// The session's connection, if it has one.
#[derive(Default)]
pub(super) struct Front {
    /// The current front end's number (`Session::reattach`).
    pub(super) front_end: u64,
    /// The connected client's pid, while one is connected.
    pub(super) connected: Option<i32>,
    /// How long the session is kept with no client: the latest client's.
    pub(super) linger: Duration,
    /// Counts down the linger while nobody is connected.
    pub(super) lease: Option<tokio::task::JoinHandle<()>>,
}

impl Daemon {
    /// Ends every session: their jobs are killed, their files removed.
    pub(super) async fn end_all(&self) {
        let sessions: Vec<_> = self.sessions.lock().await.drain().map(|(_, d)| d).collect();
        for durable in &sessions {
            if let Some(lease) = lock(&durable.front).lease.take() {
                lease.abort();
            }
        }
        for durable in sessions {
            end_session(&durable, &self.files).await;
        }
        if let Some(journal) = &self.journal
            && let Err(e) = journal.end_daemon(host::registry::now_ms())
        {
            tracing::warn!("jobs-host daemon: the journal did not take the daemon's end: {e:#}");
        }
    }

    /// The session for `hello`, opened if it is new. A session whose client
    /// is still connected is refused (`busy`): one front end at a time, so
    /// nobody else takes the model's notices or output.
    pub(super) async fn attach(
        self: &Arc<Self>,
        hello: &Hello,
        peer: i32,
    ) -> std::result::Result<(Arc<Durable>, u64, Announced), Refusal> {
        let key = hello
            .session
            .clone()
            .ok_or_else(|| Refusal::from("a session connection needs a session key"))?;
        crate::daemon::check_key(&key).map_err(|e| Refusal::from(format!("{e:#}")))?;
        let settings = hello
            .settings
            .clone()
            .ok_or_else(|| Refusal::from("a session connection needs its settings"))?;
        let wanted = serde_json::to_value(&settings).map_err(|e| Refusal::from(e.to_string()))?;
        let linger = hello
            .linger_ms
            .map(|ms| Duration::from_millis(ms).min(crate::daemon::MAX_LINGER));
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
                            .durable_jobs(&self.files)
                            .map_err(|e| Refusal::from(format!("{e:#}")))?,
                    ),
                    None => None,
                };
                let env = hello
                    .env
                    .iter()
                    .map(|(k, v)| (k.into(), v.into()))
                    .collect();
                let host = crate::wiring::host_on(
                    self.runtime.clone(),
                    self.cache_dir.as_deref(),
                    settings,
                    Some(env),
                    durable_jobs,
                )
                .await
                .map_err(|e| Refusal::from(format!("{e:#}")))?;
                let (session, _) = Session::open(&key, host.mount.clone(), host.producer());
                let recorder = match &self.journal {
                    Some(journal) => Some(
                        Recorder::start(journal.clone(), &key, &session, self.files.clone())
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
                    _activity: self.inactivity.activity(),
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
            rustix::process::Pid::from_raw(pid)
                .is_none_or(|pid| rustix::process::test_kill_process(pid).is_ok())
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
        self.inactivity.touch();
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
    pub(super) fn left(self: &Arc<Self>, durable: &Arc<Durable>, front_end: u64) {
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
            end_session(&expiring, &daemon.files).await;
            daemon.inactivity.touch();
        }));
    }

    /// Pushes each connected session's lease on, so its monitors keep its
    /// jobs for the linger if the daemon dies now (one with no client
    /// keeps the deadline its client's leaving set).
    pub(super) async fn renew_leases(self: Arc<Self>) {
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
pub(super) async fn end_session(durable: &Durable, files: &StateFiles) {
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
    // The shell's jobs and the runners' (which stop theirs unless they
    // outlive the host).
    host::producer::CommandProducer::shutdown(&durable.host.producer(), grace).await;
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
        if let Err(e) = files.retire_dir(dir)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!("jobs-host daemon: cannot remove {}: {e}", dir.display());
        }
    }
}
