//! A connection's first exchange: the peer's credentials (this user's, and
//! not a background job), its hello within a bound, the protocol's version,
//! then the connection handed to its front end or its request. And the
//! JSON lines every later exchange is made of.

use std::time::Duration;

use anyhow::Result;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

use super::Daemon;
use crate::daemon::{Hello, Kind, MAX_HELLO_BYTES, PROTOCOL};

/// How long a client has to send its first line.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

impl Daemon {
    pub(super) async fn connection(self: std::sync::Arc<Self>, stream: UnixStream) {
        let names = ("this daemon", "the daemon of durable sessions");
        let Some((read, mut write, peer)) = admit(stream, names).await else {
            return;
        };
        let mut read = read;
        let Some(hello) = hello(&mut read, &mut write, "this daemon").await else {
            return;
        };
        let result = match hello.kind {
            Kind::Mcp | Kind::Shell => self.front_end(hello, read, write, peer).await,
            Kind::Ctl => self.control(hello, read, write).await,
        };
        if let Err(e) = result {
            tracing::debug!("jobs-host daemon: connection ended: {e:#}");
        }
    }
}

/// A connection's peer, checked: this user's, and not a background job.
/// Its two halves and its pid; `None` (with the refusal said to it) for any
/// other. `names` name the server in the refusals: as itself ("this
/// daemon") and as what a job may not drive ("the daemon of durable
/// sessions").
pub(crate) async fn admit(
    stream: UnixStream,
    names: (&str, &str),
) -> Option<(BufReader<OwnedReadHalf>, OwnedWriteHalf, i32)> {
    let (who, driven) = names;
    let uid = rustix::process::geteuid().as_raw();
    match stream.peer_cred() {
        Ok(cred) if cred.uid() == uid => {
            let peer = cred.pid().unwrap_or(0);
            if peer > 0 && is_a_job(peer) {
                tracing::warn!("jobs-host: {who} refused pid {peer}, a background job");
                let mut stream = stream;
                let _ = answer(
                    &mut stream,
                    &json!({"error": format!("refused: a background job may not drive {driven}")}),
                )
                .await;
                return None;
            }
            let (read, write) = stream.into_split();
            Some((BufReader::new(read), write, peer))
        }
        Ok(cred) => {
            tracing::warn!("jobs-host: {who} refused a client of uid {}", cred.uid());
            let mut stream = stream;
            let _ = answer(
                &mut stream,
                &json!({"error": format!("refused: {who} serves uid {uid} only, not uid {}", cred.uid())}),
            )
            .await;
            None
        }
        Err(e) => {
            tracing::warn!("jobs-host: {who}: no peer credentials: {e}");
            None
        }
    }
}

/// The client's first line, within [`HELLO_TIMEOUT`] and of this
/// [`PROTOCOL`]; `None` (with the reason said to it) otherwise.
pub(crate) async fn hello(
    read: &mut BufReader<OwnedReadHalf>,
    write: &mut OwnedWriteHalf,
    who: &str,
) -> Option<Hello> {
    let restart = |version: u64| {
        let next = if who == "this daemon" {
            "restart the daemon (jobs-host daemon --stop)"
        } else {
            "use a jobs-host of the same build"
        };
        format!("{who} speaks protocol {PROTOCOL}, the client {version}: {next}")
    };
    let hello = match tokio::time::timeout(HELLO_TIMEOUT, read_json_line(read)).await {
        // The version first: a client of another build may send fields
        // this one does not know.
        Ok(Ok(Some(line))) => match line.get("protocol").and_then(Value::as_u64) {
            Some(version) if version != u64::from(PROTOCOL) => {
                let _ = answer(write, &json!({"error": restart(version)})).await;
                return None;
            }
            _ => serde_json::from_value::<Hello>(line).map_err(|e| e.to_string()),
        },
        Ok(Ok(None)) => return None,
        Ok(Err(e)) => Err(e),
        Err(_) => Err("no hello within 10 s".to_owned()),
    };
    match hello {
        Ok(hello) if hello.protocol == PROTOCOL => Some(hello),
        Ok(hello) => {
            let _ = answer(write, &json!({"error": restart(u64::from(hello.protocol))})).await;
            None
        }
        Err(e) => {
            let _ = answer(write, &json!({"error": format!("bad hello: {e}")})).await;
            None
        }
    }
}

/// Writes one JSON line.
pub(super) async fn answer(write: &mut (impl AsyncWriteExt + Unpin), value: &Value) -> Result<()> {
    let mut line = serde_json::to_vec(value)?;
    line.push(b'\n');
    write.write_all(&line).await?;
    write.flush().await?;
    Ok(())
}

/// Reads one JSON line of at most [`MAX_HELLO_BYTES`]; `None` at the end.
pub(super) async fn read_json_line(
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

/// Whether `pid` is a background job (of any jobs-host: its cgroup is a
/// job's, or it carries the job marker), which may not drive the daemon: a
/// fenced job could otherwise open an unfenced session.
pub(crate) fn is_a_job(pid: i32) -> bool {
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
