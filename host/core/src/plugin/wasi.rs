//! WASI preview 2 for guests built with the usual toolchains (`wasm32-wasip2`,
//! componentize-py, `jco componentize`), which import WASI even when they never
//! use it. Every interface `wasmtime-wasi` provides is linked, each behind a
//! context that denies by default (the book's "Guests that import WASI", `docs/src/sandbox.md`, has
//! the table of what each interface can do).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::Poll;

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder};

/// Bytes of guest stdout and stderr one call may write to the host's log.
pub const LOG_BYTES_PER_CALL: usize = 16 << 10;

/// A context with nothing granted but clocks and randomness: what every guest
/// call gets (public so other embedders and test hosts can give the same).
pub fn deny_by_default() -> WasiCtx {
    let budget = Arc::new(Budget {
        left: AtomicUsize::new(LOG_BYTES_PER_CALL),
        warned: AtomicBool::new(false),
    });
    WasiCtxBuilder::new()
        .stdout(GuestLog::new("stdout", budget.clone()))
        .stderr(GuestLog::new("stderr", budget))
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .socket_addr_check(|_, _| Box::pin(async { false }))
        .build()
}

/// What one call may still log, shared by its stdout and stderr.
struct Budget {
    left: AtomicUsize,
    warned: AtomicBool,
}

/// Guest output, sent to the host's log within the call's budget.
#[derive(Clone)]
struct GuestLog {
    stream: &'static str,
    budget: Arc<Budget>,
}

impl GuestLog {
    fn new(stream: &'static str, budget: Arc<Budget>) -> Self {
        GuestLog { stream, budget }
    }

    fn log(&self, bytes: &[u8]) {
        let take = self
            .budget
            .left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                Some(left - bytes.len().min(left))
            })
            .map_or(0, |left| bytes.len().min(left));
        let text = String::from_utf8_lossy(&bytes[..take]);
        for line in text.lines() {
            tracing::info!(target: "tool_jobs_guest", "{}: {line}", self.stream);
        }
        if take < bytes.len() && !self.budget.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                target: "tool_jobs_guest",
                "guest output beyond {LOG_BYTES_PER_CALL} bytes in one call is dropped"
            );
        }
    }
}

impl IsTerminal for GuestLog {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestLog {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for GuestLog {
    async fn ready(&mut self) {}
}

impl OutputStream for GuestLog {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.log(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        // Always ready: what is over the budget is dropped, not refused.
        Ok(64 << 10)
    }
}

impl tokio::io::AsyncWrite for GuestLog {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.log(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
