//! A job's stdin: a writer task that queues what the caller writes, so a job
//! that does not read never blocks the caller.

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::watch;

/// The most bytes of input a job may have waiting (written, not yet read by
/// the job); a write beyond it is refused whole.
pub const MAX_PENDING_INPUT_BYTES: u64 = 1 << 20;

/// Whether a job's stdin can still be written to.
pub(super) enum InputState {
    /// Started with `/dev/null`.
    None,
    /// Open, through this writer.
    Open(InputWriter),
    /// Closed by the caller, or the job stopped reading for good.
    Closed,
}

pub(super) enum InputChunk {
    Data(Vec<u8>),
    Close,
}

/// Writes queued input to a job's stdin from a task of its own, so a job that
/// does not read never blocks the caller; what waits is bounded by
/// [`MAX_PENDING_INPUT_BYTES`]. The task, and with it the pipe, ends when the
/// job's leader exits, not when the job's record is finally dropped.
pub(super) struct InputWriter {
    pub(super) queue: tokio::sync::mpsc::UnboundedSender<InputChunk>,
    pub(super) pending: Arc<AtomicU64>,
    /// Set when the pipe broke (the job closed its stdin or ended).
    pub(super) broken: Arc<std::sync::atomic::AtomicBool>,
}

impl InputWriter {
    /// A writer for the stdin whose write end `pipe` brings once the job is
    /// spawned; what is written before waits for it. On a `terminal`, `pipe`
    /// is its controlling side, and closing the input types the end-of-file
    /// character (`^D`) instead, which is what a person does.
    pub(super) fn start(
        pipe: tokio::sync::oneshot::Receiver<OwnedFd>,
        mut exited: watch::Receiver<bool>,
        handle: &tokio::runtime::Handle,
        terminal: bool,
    ) -> InputWriter {
        let (queue, mut chunks) = tokio::sync::mpsc::unbounded_channel();
        let pending = Arc::new(AtomicU64::new(0));
        let broken = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (left, failed) = (pending.clone(), broken.clone());
        handle.spawn(async move {
            let pipe = pipe
                .await
                .map_err(|_| std::io::Error::other("the job did not start"))
                .and_then(|fd| Sink::new(fd, terminal));
            let mut pipe = match pipe {
                Ok(pipe) => pipe,
                Err(e) => {
                    tracing::debug!("jobs: no stdin for a job: {e}");
                    failed.store(true, Ordering::SeqCst);
                    return;
                }
            };
            loop {
                let chunk = tokio::select! {
                    chunk = chunks.recv() => chunk,
                    _ = exited.wait_for(|exited| *exited) => None,
                };
                let Some(chunk) = chunk else {
                    return;
                };
                match chunk {
                    InputChunk::Data(bytes) => {
                        let written = pipe.write_all(&bytes).await;
                        left.fetch_sub(bytes.len() as u64, Ordering::SeqCst);
                        if written.is_err() {
                            failed.store(true, Ordering::SeqCst);
                            return;
                        }
                    }
                    // A terminal stays: its end of input is the character
                    // a person types (and may type again).
                    InputChunk::Close if terminal => {
                        if pipe.write_all(&[0x04]).await.is_err() {
                            failed.store(true, Ordering::SeqCst);
                            return;
                        }
                    }
                    // Dropping the pipe is the job's EOF.
                    InputChunk::Close => return,
                }
            }
        });
        InputWriter {
            queue,
            pending,
            broken,
        }
    }
}

/// Where a job's input goes: a pipe, or a terminal's controlling side (which
/// is no pipe, so tokio's pipe type refuses it).
enum Sink {
    Pipe(tokio::net::unix::pipe::Sender),
    Terminal(tokio::io::unix::AsyncFd<OwnedFd>),
}

impl Sink {
    fn new(fd: OwnedFd, terminal: bool) -> std::io::Result<Sink> {
        if terminal {
            let flags = rustix::fs::fcntl_getfl(&fd)?;
            rustix::fs::fcntl_setfl(&fd, flags | rustix::fs::OFlags::NONBLOCK)?;
            // SAFETY: an OwnedFd stays open, on the same terminal, for as
            // long as the AsyncFd owns it.
            Ok(Sink::Terminal(unsafe {
                tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::WRITABLE)
            }?))
        } else {
            tokio::net::unix::pipe::Sender::from_owned_fd(fd).map(Sink::Pipe)
        }
    }

    async fn write_all(&mut self, mut bytes: &[u8]) -> std::io::Result<()> {
        use tokio::io::AsyncWriteExt;
        match self {
            Sink::Pipe(pipe) => pipe.write_all(bytes).await,
            Sink::Terminal(fd) => {
                while !bytes.is_empty() {
                    let mut ready = fd.writable().await?;
                    match ready.try_io(|fd| Ok(rustix::io::write(fd.get_ref(), bytes)?)) {
                        Ok(Ok(n)) => bytes = &bytes[n..],
                        Ok(Err(e)) => return Err(e),
                        Err(_would_block) => {}
                    }
                }
                Ok(())
            }
        }
    }
}
