//! The signals that end `jobs-host` in order (its front ends and its
//! daemon): each is awaited, never left to its default action, so jobs and
//! files go first.

/// SIGTERM, SIGINT and SIGHUP, which each start an orderly shutdown.
pub struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    /// Starts listening.
    ///
    /// # Errors
    ///
    /// A runtime without a signal driver.
    pub fn new() -> std::io::Result<Signals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
        })
    }

    /// The number of the next signal.
    pub async fn next(&mut self) -> i32 {
        tokio::select! {
            _ = self.term.recv() => libc::SIGTERM,
            _ = self.int.recv() => libc::SIGINT,
            _ = self.hup.recv() => libc::SIGHUP,
        }
    }
}
