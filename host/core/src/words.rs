//! The contract's word-for-word strings the host itself writes, each with the
//! section of the behaviour contract it comes from. What a model reads of a
//! job's outcome and output starts here; everything else it reads comes from
//! the guest. The refusals of the registry's own API (`StartError`,
//! `RegistryError`, section 4.2) are worded on those types in
//! `registry::errors`.

/// A shell job's detail when it exited by itself, whatever the code (4.3).
pub(crate) fn exit_code(code: i32) -> String {
    format!("exit code: {code}")
}

/// A shell job's detail when a signal ended it, `SIGTERM` for example (4.3).
pub(crate) fn signal(name: &str) -> String {
    format!("signal: {name}")
}

/// A shell job's detail when it was killed with no signal recorded: the spawn
/// failed, or the kill raced the exit (4.3, 8.5).
pub(crate) const KILLED_BEFORE_EXIT: &str = "killed before exit";

/// What the one read after a failed spawn carries in its stderr slot (4.3).
pub(crate) fn spawn_failed(why: &str) -> String {
    format!("spawn failed: {why}")
}

/// An in-process job whose work panicked settles `failed` with this detail (4.5, 8.7).
pub(crate) fn job_panicked(message: &str) -> String {
    format!("job panicked: {message}")
}

/// The line that opens standard error in a read or a whole output (4.3).
pub(crate) const STDERR_HEADER: &str = "[stderr]\n";

/// The note when unread bytes were lost from memory, naming where the whole
/// output is (`where_`: the spill files, or [`UNAVAILABLE`]) (4.3).
pub(crate) fn output_dropped(where_: &str) -> String {
    format!("[some output was dropped from memory; full output: {where_}]")
}

/// Stands for the spill files when there are none to name (4.3).
pub(crate) const UNAVAILABLE: &str = "(unavailable)";

/// The host log's warnings (4.2; tests match them as substrings). A listener
/// for one job's end failed.
pub(crate) fn done_listener_failed(id: &str, error: &str) -> String {
    format!("jobs: onJobDone listener threw for {id}: {error}")
}

/// A listener for the job list's changes failed (4.2).
pub(crate) fn changed_listener_failed(error: &str) -> String {
    format!("jobs: onJobsChanged listener threw: {error}")
}

/// A producer's `done` failed, which the contract calls a violation (4.2).
pub(crate) fn done_rejected(id: &str, error: &str) -> String {
    format!("jobs: job {id} producer done promise rejected (producer contract violation): {error}")
}

/// A producer's cancel failed while its owner was torn down (4.2, 6.5).
pub(crate) fn teardown_cancel_failed(id: &str, error: &str) -> String {
    format!(
        "jobs: cancel of {id} threw during teardown; job record forced failed and work may be orphaned: {error}"
    )
}

/// The note a fenced job's end adds to its detail for the parts of its
/// sandbox this kernel did not enforce (not in the contract: the `sandbox`
/// extension's, as the issue that added it asks).
pub(crate) fn sandbox_without(parts: &[&str]) -> String {
    format!("sandbox without: {}", parts.join(", "))
}

/// The note a fenced job's end adds for hook files it created or changed
/// under its writable roots (the `sandbox` extension's, as above).
pub(crate) fn hooks_changed(files: &[String]) -> String {
    format!("hooks changed: {}", files.join(", "))
}

/// The detail of a job of a durable session that a new host found neither
/// running nor ended: its monitor is gone and recorded no end (a reboot, a
/// monitor killed). Its status is `failed`, never `completed` or `killed`
/// (not in the contract: durable sessions').
pub(crate) fn lost(monitor: Option<i32>) -> String {
    match monitor {
        Some(pid) => format!(
            "lost: its monitor (pid {pid}) is gone and recorded no end; its output is kept up to then"
        ),
        None => "lost: it had no monitor recorded; its output is kept up to then".to_owned(),
    }
}

/// The note a durable job's end adds when its monitor stopped it because
/// its session's lease passed while no host kept it.
pub(crate) const LEASE_PASSED: &str =
    "stopped by its monitor: its session had no client for its linger while its daemon was down";

/// The note a durable job's end adds for output its files could not keep.
pub(crate) fn not_kept(bytes: u64, stream: &str) -> String {
    format!("{bytes} bytes of {stream} not kept (its file's bound)")
}

/// A signal to a job adopted from a host that died, whose processes
/// cannot be found (no cgroup).
pub(crate) const ADOPTED_NO_SIGNALS: &str = "this job was taken on after its daemon restarted, and its processes cannot be reached without a cgroup; job_kill still stops it";
