//! A session's front end on a connection: MCP (the same server as `jobs-host
//! mcp`, detached instead of closed when the client goes) or the console
//! over the socket.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use serde_json::{Value, json};
use tokio::io::BufReader;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio_util::sync::CancellationToken;

use host::session::Session;

use super::Daemon;
use super::handshake::{answer, read_json_line};
use super::sessions::{Announced, Leaving};
use crate::console;
use crate::daemon::{Hello, Kind};
use crate::mcp::{Io, Leave};
use crate::wiring::McpOptions;

impl Daemon {
    pub(super) async fn front_end(
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
                    let wire = hello.mcp.unwrap_or(crate::daemon::McpWire {
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
                    let server = crate::wiring::mcp_server(
                        &durable.host.mount,
                        durable.session.clone(),
                        options,
                    )
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
