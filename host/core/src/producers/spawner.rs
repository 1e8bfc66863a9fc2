//! The thread every job is spawned from.

use std::sync::{Arc, Mutex};

/// One thread that lives as long as any job it spawned: `PR_SET_PDEATHSIG`
/// follows the thread that forked, so spawning from a pool thread that may
/// retire would kill jobs at random.
pub(crate) struct Spawner {
    tx: Mutex<std::sync::mpsc::Sender<Box<dyn FnOnce() + Send>>>,
}

impl Spawner {
    pub(crate) fn start(handle: tokio::runtime::Handle) -> std::io::Result<Arc<Spawner>> {
        let (tx, rx) = std::sync::mpsc::channel::<Box<dyn FnOnce() + Send>>();
        std::thread::Builder::new()
            .name("jobs-spawner".into())
            .spawn(move || {
                // tokio's child handles register with the runtime's reaper.
                let _runtime = handle.enter();
                while let Ok(work) = rx.recv() {
                    work();
                }
            })?;
        Ok(Arc::new(Spawner { tx: Mutex::new(tx) }))
    }

    /// Runs `work` on the spawner thread and returns its result.
    pub(crate) fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> std::io::Result<T> + Send + 'static,
    ) -> std::io::Result<T> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.tx
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(Box::new(move || {
                let _ = tx.send(work());
            }))
            .map_err(|_| std::io::Error::other("the spawner thread is gone"))?;
        rx.recv()
            .map_err(|_| std::io::Error::other("the spawner thread is gone"))?
    }
}
