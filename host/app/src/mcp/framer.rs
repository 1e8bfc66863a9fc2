//! The stdio framing in front of the MCP service: bounded line reads, the
//! per-connection state that lets every refused line keep its id, and the
//! stream pair the service runs on.

use std::sync::Arc;

use serde_json::{Value, json};

use super::revision::v2025_11_25::{LegacyTasks, legacy_method};
use super::revision::v2026_07_28::{names_a_revision, removed_method};
use super::wire::{
    Frame, KNOWN_METHODS, check_line, params_problem, parse_error, salvage_request_id,
};

/// How often a waiting call reports progress when its request asked for it.
pub const DEFAULT_PROGRESS_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);

/// The longest line a client may send; a longer one is refused whole, without
/// being held (the largest argument the tools take is 64 KiB).
pub const MAX_LINE_BYTES: usize = 16 << 20;

/// The session state the framing layer keeps to answer what the MCP service
/// would mishandle: a notification or a response before the lifecycle began
/// (the service would end the session on it), a second `initialize`, and a
/// request whose id is still in flight (the service would answer only one of
/// the two).
///
/// The lifecycle begins with `initialize` or, from protocol revision
/// 2026-07-28 on (which has no handshake), with the first request that names
/// a known revision in its `_meta`. Other requests before it go on to the
/// service, which answers them (with their id) as the revisions say.
#[derive(Default)]
pub struct Framer {
    initialize_seen: bool,
    /// The lifecycle began (see the type's docs).
    started: bool,
    in_flight: InFlight,
    legacy: LegacyTasks,
}

/// Ids of requests passed on to the service and not yet answered (or
/// cancelled, which are never answered), as JSON text; shared between the
/// input side, which takes an id, and the output side, which frees it.
#[derive(Clone, Default)]
struct InFlight(Arc<std::sync::Mutex<std::collections::HashSet<String>>>);

impl InFlight {
    /// Takes `id`; false when it is taken already.
    fn take(&self, id: &Value) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.to_string())
    }

    /// Called with each line the service writes: an answer frees its id.
    pub(super) fn answered(&self, line: &str) {
        #[derive(serde::Deserialize)]
        struct Reply {
            id: Option<Value>,
            method: Option<serde::de::IgnoredAny>,
        }
        if let Ok(Reply {
            id: Some(id),
            method: None,
        }) = serde_json::from_str::<Reply>(line)
        {
            self.0
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id.to_string());
        }
    }
}

impl Framer {
    /// Judges one line: `judge_line`, then the session's rules.
    pub fn judge(&mut self, line: &str) -> Frame {
        let map = match check_line(line) {
            Ok(map) => map,
            Err(frame) => return frame,
        };
        let frame = Frame::Message;
        let method = map.get("method").and_then(Value::as_str);
        let id = map.get("id").filter(|id| !id.is_null());
        let error = |code: i32, message: &str| {
            Frame::Refused(
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
                    .to_string(),
            )
        };
        // A request must have a string or integer id (MCP); `"id": null` is
        // answered here, with that null, rather than by the service without one.
        if method.is_some() && map.get("id").is_some_and(Value::is_null) {
            return error(
                -32600,
                "Invalid Request: the id must be a string or an integer",
            );
        }
        // What the service cannot take would be answered without an id (a
        // request) or at all (a notification): an id beyond a signed 64-bit
        // integer, a duplicate key, a notification's params of the wrong shape.
        if let Err(e) = serde_json::from_str::<rmcp::model::ClientJsonRpcMessage>(line) {
            return match (method, id) {
                (Some(method), Some(_)) if KNOWN_METHODS.contains(&method) => {
                    error(-32602, &format!("Invalid params: {e}"))
                }
                (Some(_), Some(_)) => error(-32600, &format!("Invalid Request: {e}")),
                _ => {
                    tracing::debug!("dropped a message the service cannot read: {e}");
                    Frame::Blank
                }
            };
        }
        match (method, id) {
            // A response before initialize answers nothing the server asked,
            // and the service would end the session on it.
            (None, _) if !self.started => {
                tracing::debug!("dropped a response sent before initialize");
                Frame::Blank
            }
            // A response to the server, or a notification: nothing to answer.
            (None, _) => frame,
            (Some(_), None) if !self.started => {
                tracing::debug!("dropped a notification sent before initialize");
                Frame::Blank
            }
            // A cancelled request is never answered, so its id stays taken:
            // MCP forbids reusing it, and the service would hand a reused id
            // the cancelled call's answer.
            (Some(_), None) => frame,
            (Some(method), Some(id)) => {
                // A method the request's own revision removed is not found,
                // whatever its params.
                if removed_method(method, map.get("params")) {
                    return error(-32601, method);
                }
                if let Some(problem) = params_problem(method, map.get("params")) {
                    return error(-32602, &format!("Invalid params: {problem}"));
                }
                match (method, self.initialize_seen) {
                    ("initialize", true) => {
                        return error(-32600, "Invalid Request: already initialized");
                    }
                    ("initialize", false) => {
                        self.initialize_seen = true;
                        self.started = true;
                        *self
                            .legacy
                            .0
                            .initialize_id
                            .lock()
                            .unwrap_or_else(|p| p.into_inner()) = Some(id.to_string());
                        let declares_extension = map
                            .get("params")
                            .and_then(|p| p.pointer("/capabilities/extensions"))
                            .and_then(Value::as_object)
                            .is_some_and(|e| e.contains_key(rmcp::model::TASKS_EXTENSION_ID));
                        self.legacy
                            .0
                            .extension_client
                            .store(declares_extension, std::sync::atomic::Ordering::Relaxed);
                    }
                    ("server/discover" | "ping", _) => {}
                    _ if names_a_revision(map.get("params")) => self.started = true,
                    _ => {}
                }
                if !self.in_flight.take(id) {
                    return error(
                        -32600,
                        "Invalid Request: a request with this id is in flight",
                    );
                }
                if self.legacy.is_active()
                    && let Some(renamed) = legacy_method(method, map.get("params"))
                {
                    let mut map = map.clone();
                    map.insert("method".to_owned(), Value::String(renamed));
                    return Frame::Rewritten(Value::Object(map).to_string());
                }
                frame
            }
        }
    }

    /// Called with each line the service writes: an answer frees its id.
    #[cfg(test)]
    pub(super) fn answered(&self, line: &str) {
        self.in_flight.answered(line);
    }

    /// Whether tasks are offered (`framed` sets it).
    fn set_offer_tasks(&self, offer: bool) {
        self.legacy
            .0
            .offered
            .store(offer, std::sync::atomic::Ordering::Relaxed);
    }

    #[cfg(test)]
    pub(super) fn offer_tasks(&mut self, offer: bool) {
        self.set_offer_tasks(offer);
    }

    #[cfg(test)]
    pub(super) fn legacy(&self) -> &LegacyTasks {
        &self.legacy
    }
}

/// One line of input, read without holding more than [`MAX_LINE_BYTES`].
enum Line {
    End,
    Whole,
    TooLong,
}

async fn read_line(
    input: &mut (impl tokio::io::AsyncBufRead + Unpin),
    line: &mut Vec<u8>,
) -> std::io::Result<Line> {
    use tokio::io::AsyncBufReadExt;
    line.clear();
    let mut too_long = false;
    loop {
        let buf = input.fill_buf().await?;
        if buf.is_empty() {
            return Ok(if line.is_empty() && !too_long {
                Line::End
            } else if too_long {
                Line::TooLong
            } else {
                Line::Whole
            });
        }
        let (chunk, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (&buf[..=i], true),
            None => (buf, false),
        };
        let used = chunk.len();
        if !too_long && line.len() + used <= MAX_LINE_BYTES {
            line.extend_from_slice(chunk);
        } else {
            too_long = true;
            line.clear();
        }
        input.consume(used);
        if done {
            return Ok(if too_long { Line::TooLong } else { Line::Whole });
        }
    }
}

/// Writes what of `line` stdout takes at once, when that cannot block: a
/// line of at most `PIPE_BUF` bytes to a stdout that is a pipe and polls
/// writable (it then has room for the line whole). How many bytes were
/// written: 0 when it was not ready or the line is longer, and the caller
/// writes the rest through tokio's stdout, whose every write is a hop to a
/// blocking thread. Only ever called with no tokio write in flight, so lines
/// keep their order.
fn write_now(line: &[u8]) -> std::io::Result<usize> {
    // Only a pipe promises that: a tty, a socket or a file may still block.
    static PIPE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let pipe = *PIPE.get_or_init(|| {
        // SAFETY: fstat into a zeroed struct.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: a valid descriptor number and out pointer.
        let stated = unsafe { libc::fstat(libc::STDOUT_FILENO, &mut st) };
        stated == 0 && st.st_mode & libc::S_IFMT == libc::S_IFIFO
    });
    if !pipe || line.len() > libc::PIPE_BUF {
        return Ok(0);
    }
    let mut ready = libc::pollfd {
        fd: libc::STDOUT_FILENO,
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one valid pollfd, no wait.
    if unsafe { libc::poll(&mut ready, 1, 0) } != 1 || ready.revents & libc::POLLOUT == 0 {
        return Ok(0);
    }
    // SAFETY: writes from a live buffer of its length.
    let written = unsafe { libc::write(libc::STDOUT_FILENO, line.as_ptr().cast(), line.len()) };
    match written {
        n if n >= 0 => Ok(n as usize),
        _ => match std::io::Error::last_os_error() {
            e if e.kind() == std::io::ErrorKind::WouldBlock
                || e.kind() == std::io::ErrorKind::Interrupted =>
            {
                Ok(0)
            }
            e => Err(e),
        },
    }
}

/// Where a connection's bytes come from and go to.
pub enum Io {
    /// This process's stdin and stdout.
    Stdio,
    /// A stream of its own (a daemon's client on a socket).
    Stream {
        /// What the client sends.
        input: Box<dyn tokio::io::AsyncRead + Send + Unpin>,
        /// What the client reads.
        output: Box<dyn tokio::io::AsyncWrite + Send + Unpin>,
    },
}

/// A connection's input and output behind a framing layer: each line of input
/// is judged by [`Framer::judge`]; well-formed ones reach the MCP service, bad
/// ones are answered here, and everything written goes out as whole lines, so
/// an error reply never splits a message of the service's.
pub(super) fn framed(io: Io, offer_tasks: bool) -> Framed {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let input_closed = tokio_util::sync::CancellationToken::new();
    let mut framer = Framer::default();
    framer.set_offer_tasks(offer_tasks);
    let answers = framer.in_flight.clone();
    let legacy = framer.legacy.clone();
    let (mut to_service, service_reads) = tokio::io::duplex(1 << 20);
    let (service_writes, from_service) = tokio::io::duplex(1 << 20);
    // Bounded: a client that writes bad lines without reading the answers is
    // held back, as its good lines are by the service's pipe.
    let (refusals, mut refused) = tokio::sync::mpsc::channel::<String>(256);
    // Unbounded as the session's announcements are: one line per job's end.
    let (notices, mut noticed) = tokio::sync::mpsc::unbounded_channel::<String>();
    let (input, stream_output): (Box<dyn tokio::io::AsyncRead + Send + Unpin>, _) = match io {
        Io::Stdio => (Box::new(tokio::io::stdin()), None),
        Io::Stream { input, output } => (input, Some(output)),
    };
    let output = tokio::spawn(async move {
        let direct = stream_output.is_none();
        let mut stdout: Box<dyn tokio::io::AsyncWrite + Send + Unpin> = match stream_output {
            Some(output) => output,
            None => Box::new(tokio::io::stdout()),
        };
        let mut lines = BufReader::new(from_service).lines();
        let mut service_done = false;
        loop {
            let line = tokio::select! {
                // A refusal goes out before any answer read after it: it was
                // queued when its line was judged, so before any later line
                // of the client's reached the service (a client that sends a
                // bad line and then a ping reads the two answers in order).
                biased;
                Some(line) = refused.recv() => line,
                line = lines.next_line(), if !service_done => match line {
                    Ok(Some(line)) => {
                        answers.answered(&line);
                        legacy.dress(line)
                    }
                    // The service has ended: what is still refused goes out,
                    // then the output ends with the input.
                    _ => {
                        service_done = true;
                        continue;
                    }
                },
                // After what the service has written already, so a notice
                // never passes the answer to `initialize`.
                Some(line) = noticed.recv() => line,
                else => break,
            };
            let line = format!("{line}\n");
            let written = if direct {
                write_now(line.as_bytes())
            } else {
                Ok(0)
            };
            let rest = match written {
                Ok(written) => &line.as_bytes()[written..],
                Err(_) => break,
            };
            if !rest.is_empty()
                && (stdout.write_all(rest).await.is_err() || stdout.flush().await.is_err())
            {
                break;
            }
        }
    });
    let closed = input_closed.clone();
    tokio::spawn(async move {
        let mut input = BufReader::new(input);
        let mut raw = Vec::new();
        loop {
            let frame = match read_line(&mut input, &mut raw).await {
                Ok(Line::End) | Err(_) => break,
                Ok(Line::TooLong) => Frame::Refused(
                    json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600,
                        "message": format!("Invalid Request: a line longer than {MAX_LINE_BYTES} bytes")}})
                    .to_string(),
                ),
                // A line that is not UTF-8 is not JSON either: it is answered like
                // any other that does not parse, and the session goes on.
                Ok(Line::Whole) => match std::str::from_utf8(&raw) {
                    Ok(line) => framer.judge(line.trim_end_matches(['\n', '\r'])),
                    // Not UTF-8, so not JSON; a request's id may still be read.
                    Err(_) => match salvage_request_id(&String::from_utf8_lossy(&raw)) {
                        Some(id) => Frame::Refused(
                            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32700,
                                "message": "Parse error: the line is not UTF-8"}})
                            .to_string(),
                        ),
                        None => Frame::Refused(parse_error()),
                    },
                },
            };
            let line = String::from_utf8_lossy(&raw);
            match frame {
                Frame::Blank => {}
                Frame::Refused(reply) => {
                    tracing::debug!("refused a malformed JSON-RPC line");
                    if refusals.send(reply).await.is_err() {
                        break;
                    }
                }
                Frame::Message => {
                    if to_service
                        .write_all(format!("{}\n", line.trim_end_matches(['\n', '\r'])).as_bytes())
                        .await
                        .is_err()
                    {
                        break;
                    }
                }
                Frame::Rewritten(line) => {
                    if to_service
                        .write_all(format!("{line}\n").as_bytes())
                        .await
                        .is_err()
                    {
                        break;
                    }
                }
            }
        }
        // Dropping `to_service` is the service's end of input.
        closed.cancel();
    });
    Framed {
        reader: service_reads,
        writer: service_writes,
        output,
        input_closed,
        notices,
    }
}

/// The framing layer of one connection, as [`framed`] starts it.
pub(super) struct Framed {
    /// What the service reads: the client's lines that passed.
    pub(super) reader: tokio::io::DuplexStream,
    /// What the service writes; the output task frames it to the client.
    pub(super) writer: tokio::io::DuplexStream,
    /// The output task; it ends once the service, the refusals and the
    /// notices have all ended.
    pub(super) output: tokio::task::JoinHandle<()>,
    /// Cancelled when the client's input ends.
    pub(super) input_closed: tokio_util::sync::CancellationToken,
    /// Whole JSON-RPC notifications, written by the output task between the
    /// service's lines: a job's notice reaches the client without a pass
    /// through the service's loop and its pipe.
    pub(super) notices: tokio::sync::mpsc::UnboundedSender<String>,
}
