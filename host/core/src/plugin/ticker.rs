//! The epoch ticker: the thread that advances the engine's epoch, each
//! step charging a guest call that is running one tick of its CPU budget.
//! It ticks only while some call holds a store and parks otherwise, so an
//! idle host wakes no thread of its own.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use wasmtime::Engine;

/// The ticker of one engine; stops it when dropped.
pub(super) struct Ticker {
    shared: Arc<Shared>,
    thread: std::thread::Thread,
}

/// What the ticker's thread and the calls share.
#[derive(Default)]
struct Shared {
    stop: AtomicBool,
    /// Stores held for calls ([`Running`]s alive).
    running: AtomicUsize,
    /// Set while the thread parks or is about to: only then does a call
    /// that starts unpark it (a system call), so calls in quick succession
    /// pay nothing while it is between steps.
    parked: AtomicBool,
    /// Steps taken, for the tests.
    #[cfg(test)]
    steps: std::sync::atomic::AtomicU64,
}

impl Ticker {
    /// Starts the ticker of `engine`, a step each `tick` while a call runs.
    /// The thread ends once this is dropped or the engine is gone.
    pub(super) fn start(engine: &Engine, tick: Duration) -> std::io::Result<Ticker> {
        let shared = Arc::new(Shared::default());
        let on_thread = shared.clone();
        let weak = engine.weak();
        let handle = std::thread::Builder::new()
            .name("jobs-epoch".into())
            .spawn(move || {
                let shared = on_thread;
                while !shared.stop.load(Ordering::SeqCst) {
                    if shared.running.load(Ordering::SeqCst) == 0 {
                        // Said before it looks again: a call that starts
                        // after the look sees the flag and unparks it (an
                        // unpark before the park makes the park return),
                        // and one that started before it is seen here.
                        shared.parked.store(true, Ordering::SeqCst);
                        if shared.running.load(Ordering::SeqCst) == 0
                            && !shared.stop.load(Ordering::SeqCst)
                        {
                            std::thread::park();
                        }
                        shared.parked.store(false, Ordering::SeqCst);
                        continue;
                    }
                    std::thread::sleep(tick);
                    match weak.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => break,
                    }
                    #[cfg(test)]
                    shared.steps.fetch_add(1, Ordering::Relaxed);
                }
            })?;
        Ok(Ticker {
            shared,
            thread: handle.thread().clone(),
        })
    }

    /// Held by a store for a call while it lives: the ticker runs while any
    /// is held.
    pub(super) fn running(&self) -> Running {
        self.shared.running.fetch_add(1, Ordering::SeqCst);
        if self.shared.parked.load(Ordering::SeqCst) {
            self.thread.unpark();
        }
        Running(self.shared.clone())
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.thread.unpark();
    }
}

/// One store's hold on the ticker (see [`Ticker::running`]).
pub(super) struct Running(Arc<Shared>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits (up to a minute, polling) until `check` holds.
    fn until(check: impl Fn() -> bool) -> bool {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while std::time::Instant::now() < deadline {
            if check() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        false
    }

    #[test]
    fn it_ticks_only_while_a_store_is_held() {
        let engine = Engine::default();
        let ticker = Ticker::start(&engine, Duration::from_millis(1)).unwrap();
        let shared = ticker.shared.clone();
        let steps = || shared.steps.load(Ordering::Relaxed);
        let parked = || shared.parked.load(Ordering::SeqCst);
        // Idle from the start: parked, and no step taken.
        assert!(until(parked));
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(steps(), 0);
        assert!(parked());
        // Two holds: it ticks until both are gone.
        let first = ticker.running();
        let second = ticker.running();
        assert!(until(|| steps() >= 3));
        drop(first);
        let before = steps();
        assert!(until(|| steps() >= before + 3));
        drop(second);
        assert!(until(parked));
        let after = steps();
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(steps(), after);
        // And again after a park.
        let again = ticker.running();
        assert!(until(|| steps() >= after + 3));
        drop(again);
        assert!(until(parked));
        drop(ticker);
        assert!(until(|| Arc::strong_count(&shared) == 1));
    }
}
