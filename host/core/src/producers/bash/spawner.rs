//! The threads every job is spawned from.

use std::sync::{Arc, Mutex};

type Work = Box<dyn FnOnce() + Send>;

/// How many spawns may be under way at once. A spawn holds its thread until the
/// child has called `execve`, which on a busy machine is most of a
/// millisecond spent waiting for the child to be scheduled; a few threads let
/// those waits overlap.
const THREADS: usize = 4;

/// How many spawns may wait for a thread. A caller that starts jobs faster
/// than they can be spawned waits here, so what the host holds for jobs not yet
/// spawned stays bounded (a few KB each: command, environment, buffers).
const QUEUED: usize = 16;

/// How long a fenced spawner thread waits for a spawn before it leaves the
/// jobs' mount namespace it may have joined.
const REST_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// A few threads that live as long as any job they spawned:
/// `PR_SET_PDEATHSIG` follows the thread that cloned, so spawning from a pool
/// thread that may retire would kill jobs at random.
pub(crate) struct Spawner {
    tx: std::sync::mpsc::SyncSender<Work>,
}

impl Spawner {
    /// Threads that spawn any job.
    pub(crate) fn start() -> std::io::Result<Arc<Spawner>> {
        Spawner::with_prelude("jobs-spawner", None)
    }

    /// Threads that spawn only network-off fenced jobs: each takes the
    /// fence's per-thread steps on itself first (an empty bounding set on a
    /// privileged host, `no_new_privs`, `filter`), so the jobs it clones
    /// inherit them instead of taking them each (see `spawn::prelude`). A job
    /// without those steps in its fence fails to spawn here.
    pub(crate) fn start_fenced(
        filter: &'static [libc::sock_filter],
    ) -> std::io::Result<Arc<Spawner>> {
        // Thread names are cut at 15 bytes: this one stays whole.
        Spawner::with_prelude("jobs-fenced", Some(filter))
    }

    fn with_prelude(
        name: &str,
        filter: Option<&'static [libc::sock_filter]>,
    ) -> std::io::Result<Arc<Spawner>> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Work>(QUEUED);
        let rx = Arc::new(Mutex::new(rx));
        for n in 0..THREADS {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(format!("{name}-{n}"))
                .spawn(move || {
                    if let Some(filter) = filter {
                        crate::producers::spawn::prelude::take_on_thread(
                            filter,
                            rustix::process::geteuid().is_root(),
                        );
                    }
                    // Only a thread that may join a job's mount namespace
                    // wakes while idle, to leave it.
                    let rests = crate::producers::spawn::prelude::may_move();
                    loop {
                        // The lock is released before the work runs. A
                        // thread with nothing to spawn for a while leaves
                        // the jobs' mount namespace it joined (see
                        // `spawn::prelude::rest`); the threads waiting for
                        // the lock get their turn at the channel meanwhile.
                        let next = if rests {
                            crate::sync::lock(&rx).recv_timeout(REST_AFTER)
                        } else {
                            crate::sync::lock(&rx)
                                .recv()
                                .map_err(|_| std::sync::mpsc::RecvTimeoutError::Disconnected)
                        };
                        match next {
                            Ok(work) => work(),
                            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                                crate::producers::spawn::prelude::rest();
                            }
                            // Every sender is gone: the producer is dropped.
                            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return,
                        }
                    }
                })?;
        }
        Ok(Arc::new(Spawner { tx }))
    }

    /// Runs `work` on a spawner thread without waiting for it to run; waits
    /// only while [`QUEUED`] spawns are already waiting.
    ///
    /// # Errors
    ///
    /// When the spawner threads are gone; `work` is then not run.
    pub(crate) fn submit(&self, work: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
        self.tx
            .send(Box::new(work))
            .map_err(|_| std::io::Error::other("the spawner threads are gone"))
    }
}
