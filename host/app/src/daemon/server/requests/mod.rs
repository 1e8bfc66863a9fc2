//! The control requests, one per file as pueue's message handlers are:
//! `ps`, `logs`, `kill` and `wait` are functions over what they need
//! of the daemon (its [`Sessions`]), so each is tested over a stub with no
//! socket. `stop` is the daemon's own.

mod kill;
mod logs;
mod ps;
mod wait;

use anyhow::{Result, bail};
use serde_json::json;
use std::sync::Arc;

use tokio::io::BufReader;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

use host::JobRegistry;
use host::capture::OutputStream;
use host::owner::Owner;
use tokio_util::sync::CancellationToken;

use super::Daemon;
use super::handshake::answer;
use crate::daemon::{Hello, Request};

/// One session as a request sees it: its key, its registry and its owner.
#[derive(Clone)]
pub(super) struct SessionView {
    pub(super) key: String,
    pub(super) registry: JobRegistry,
    pub(super) owner: Owner,
}

/// What the requests need of the daemon: its sessions.
pub(super) trait Sessions {
    /// Every session, in any order.
    async fn all(&self) -> Vec<SessionView>;

    /// What lists the jobs, for an error's next step: the daemon's `ps`,
    /// where a `jobs-host mcp`'s view (which `ps` does not ask) says `top`.
    fn lister(&self, key: Option<&str>) -> String {
        match key {
            Some(key) => format!("`jobs-host ps --session {key}` lists its jobs"),
            None => "`jobs-host ps --all` lists them".to_owned(),
        }
    }
}

impl Sessions for Daemon {
    async fn all(&self) -> Vec<SessionView> {
        self.sessions
            .lock()
            .await
            .values()
            .map(|durable| SessionView {
                key: durable.key.clone(),
                registry: durable.session.registry().clone(),
                owner: durable.session.owner().clone(),
            })
            .collect()
    }
}

/// The sessions a request names: the one of `key`, or all of them, by key.
///
/// # Errors
///
/// A key the daemon does not keep.
async fn chosen(sessions: &impl Sessions, key: Option<&str>) -> Result<Vec<SessionView>> {
    let mut all = sessions.all().await;
    all.sort_by(|a, b| a.key.cmp(&b.key));
    match key {
        Some(key) => match all.into_iter().find(|v| v.key == key) {
            Some(view) => Ok(vec![view]),
            None => bail!("no session {key:?} here ({})", sessions.lister(None)),
        },
        None => Ok(all),
    }
}

/// The session holding job `id`: the one named, or the only one that has it.
///
/// # Errors
///
/// No such job, or one in several sessions with none named.
async fn find(sessions: &impl Sessions, id: &str, session: Option<&str>) -> Result<SessionView> {
    let holding: Vec<_> = chosen(sessions, session)
        .await?
        .into_iter()
        .filter(|v| v.registry.inspect(id).is_some())
        .collect();
    match holding.as_slice() {
        [one] => Ok(one.clone()),
        [] => match session {
            Some(key) => bail!(
                "no job {id} in session {key:?} ({})",
                sessions.lister(Some(key))
            ),
            None => bail!("no job {id} in any session ({})", sessions.lister(None)),
        },
        many => bail!(
            "job {id} is in {} sessions ({}): name one with --session KEY",
            many.len(),
            many.iter()
                .map(|v| format!("{:?}", v.key))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

impl Daemon {
    pub(super) async fn control(
        self: Arc<Self>,
        hello: Hello,
        read: BufReader<OwnedReadHalf>,
        write: OwnedWriteHalf,
    ) -> Result<()> {
        control(&*self, Some(&self.stop), hello, read, write).await
    }
}

/// Answers a control connection's one request over `sessions`. `stop` ends
/// the server for [`Request::Stop`]: the daemon's; a server without one
/// (a `jobs-host mcp`'s view) refuses it.
pub(super) async fn control(
    sessions: &impl Sessions,
    stop: Option<&CancellationToken>,
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
        result = serve(sessions, stop, request, &mut write) => result,
        () = gone => return Ok(()),
    };
    if let Err(e) = result {
        answer(&mut write, &json!({"error": format!("{e:#}")})).await?;
    }
    Ok(())
}

/// Answers one control request.
async fn serve(
    sessions: &impl Sessions,
    stop: Option<&CancellationToken>,
    request: Request,
    write: &mut OwnedWriteHalf,
) -> Result<()> {
    match request {
        Request::Ps { session } => {
            answer(write, &ps::ps(sessions, session.as_deref()).await?).await
        }
        Request::Logs {
            id,
            session,
            stderr,
            lines,
            follow,
        } => {
            let view = find(sessions, &id, session.as_deref()).await?;
            let stream = if stderr {
                OutputStream::Stderr
            } else {
                OutputStream::Stdout
            };
            answer(write, &json!({"ok": true})).await?;
            logs::follow_logs(&view, &id, stream, lines, follow, write).await
        }
        Request::Kill { id, session } => {
            answer(write, &kill::kill(sessions, &id, session.as_deref()).await?).await
        }
        Request::Wait { id, session } => {
            answer(write, &wait::wait(sessions, &id, session.as_deref()).await?).await
        }
        Request::Stop => match stop {
            Some(stop) => {
                answer(write, &json!({"ok": true})).await?;
                stop.cancel();
                Ok(())
            }
            None => {
                bail!("not the daemon: a jobs-host mcp of its own session has no sessions to stop")
            }
        },
    }
}

/// Sessions of in-process jobs, for the requests' tests: a registry, an
/// owner and a controller per key, with no component and no socket.
#[cfg(test)]
mod fixtures {
    use std::sync::Arc;

    use host::inproc::{InProcessJob, JobContext, start_final, start_stream};
    use host::registry::ControllerAttachment;
    use serde_json::Value;

    use super::{SessionView, Sessions};

    /// The daemon's sessions, stubbed.
    #[derive(Clone)]
    pub(super) struct Stub {
        pub(super) sessions: Vec<SessionView>,
        _controllers: Arc<Vec<ControllerAttachment>>,
    }

    impl Stub {
        /// A session per key, in this order.
        pub(super) fn new(keys: &[&str]) -> Stub {
            let mut controllers = Vec::new();
            let sessions = keys
                .iter()
                .map(|key| {
                    let registry = host::JobRegistry::new(Default::default(), Default::default());
                    controllers.push(registry.attach_controller());
                    let owner = host::owner::Owner::new(*key);
                    registry.agents().register(&owner);
                    SessionView {
                        key: (*key).to_owned(),
                        registry,
                        owner,
                    }
                })
                .collect();
            Stub {
                sessions,
                _controllers: Arc::new(controllers),
            }
        }
    }

    impl Sessions for Stub {
        async fn all(&self) -> Vec<SessionView> {
            self.sessions.clone()
        }
    }

    /// A running `bash` job of `view` that writes what is sent, and ends
    /// when the sender goes.
    pub(super) fn stream_job(
        view: &SessionView,
    ) -> (String, tokio::sync::mpsc::UnboundedSender<String>) {
        let (feed, mut fed) = tokio::sync::mpsc::unbounded_channel::<String>();
        let job = InProcessJob::new("bash", "a stream").owner(view.owner.clone());
        let id = start_stream(&view.registry, job, |ctx: JobContext| async move {
            loop {
                tokio::select! {
                    text = fed.recv() => match text {
                        Some(text) => ctx.write(&text),
                        None => return Ok(()),
                    },
                    () = ctx.cancelled() => return Err("killed".to_owned()),
                }
            }
        })
        .unwrap();
        (id, feed)
    }

    /// A `bash` job of `view` that failed with `detail`, once it has.
    pub(super) async fn failing_job(view: &SessionView, detail: &str) -> String {
        let detail = detail.to_owned();
        let job = InProcessJob::new("bash", "a failure").owner(view.owner.clone());
        let id = start_final(&view.registry, job, |_| async move { Err(detail) }).unwrap();
        view.registry.settled(&id).await;
        id
    }

    /// The JSON lines a request wrote.
    pub(super) fn lines_of(out: &[u8]) -> Vec<Value> {
        String::from_utf8_lossy(out)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}
