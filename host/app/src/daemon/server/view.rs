//! A `jobs-host mcp` of no durable session, seen from outside: a socket of
//! its own in the runtime directory, `mcp-<pid>.sock` beside the daemon's,
//! that answers the control requests (`ps`, `logs`, `kill`, `wait`) about
//! its one session, so `jobs-host top` shows its jobs as it shows the
//! daemon's. It admits whom the daemon admits (this user, no background
//! job) and speaks the daemon's protocol; nothing it answers consumes what
//! the model reads.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use host::JobRegistry;
use host::owner::Owner;
use tokio::net::UnixListener;

use super::handshake::{admit, answer, hello};
use super::requests::{SessionView, Sessions, control};
use crate::daemon::Kind;

/// The prefix of a view's socket name; `mcp-<pid>.sock`.
pub const VIEW_PREFIX: &str = "mcp-";

/// A view's socket, listening; the socket goes when this is dropped (the
/// process's end).
pub struct View {
    path: PathBuf,
    /// The socket's (device, inode): only this one is removed, never one
    /// another process bound at the path since.
    made: (u64, u64),
    task: tokio::task::JoinHandle<()>,
}

impl Drop for View {
    fn drop(&mut self) {
        self.task.abort();
        if identity(&self.path) == Some(self.made) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// Whether nothing listens on the socket at `path` any more (its process
/// ended without removing it): only a refused connection says so.
pub fn stale(path: &Path) -> bool {
    matches!(
        std::os::unix::net::UnixStream::connect(path),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused
    )
}

/// The one session a view shows.
struct One(SessionView);

impl Sessions for One {
    async fn all(&self) -> Vec<SessionView> {
        vec![self.0.clone()]
    }

    fn lister(&self, _key: Option<&str>) -> String {
        "`jobs-host top` shows its jobs".to_owned()
    }
}

/// Opens this process's view of `registry`'s jobs of `owner`, as session
/// `mcp-<pid>`. `None` when the runtime directory cannot be made private or
/// the socket cannot be bound: the MCP session runs on without it.
pub fn open(registry: JobRegistry, owner: Owner) -> Option<View> {
    let dir = crate::daemon::runtime_dir();
    if let Err(e) = crate::daemon::private_dir(&dir) {
        tracing::debug!("jobs-host mcp: no view for top: {e:#}");
        return None;
    }
    let pid = std::process::id();
    let key = format!("{VIEW_PREFIX}{pid}");
    let path = dir.join(format!("{key}.sock"));
    // A socket of this name that nothing listens on was left by a process
    // that had this pid; a live one (another pid namespace sharing the
    // directory) is left alone, and this process goes without a view.
    if stale(&path) {
        let _ = std::fs::remove_file(&path);
    }
    let listener = match UnixListener::bind(&path) {
        Ok(listener) => listener,
        Err(e) => {
            tracing::debug!("jobs-host mcp: no view for top at {}: {e}", path.display());
            return None;
        }
    };
    // The daemon's socket's rule: this user only, the directory aside.
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600));
    let made = identity(&path)?;
    let one = Arc::new(One(SessionView {
        key,
        registry,
        owner,
    }));
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let one = one.clone();
            tokio::spawn(async move {
                let names = ("this jobs-host mcp", "a jobs-host mcp's view");
                let Some((mut read, mut write, _)) = admit(stream, names).await else {
                    return;
                };
                let Some(hello) = hello(&mut read, &mut write, "this jobs-host mcp").await else {
                    return;
                };
                if hello.kind != Kind::Ctl {
                    let refusal = serde_json::json!({"error": "a jobs-host mcp's view answers control requests only (ps, logs, kill, wait)"});
                    let _ = answer(&mut write, &refusal).await;
                    return;
                }
                if let Err(e) = control(&*one, None, hello, read, write).await {
                    tracing::debug!("jobs-host mcp: view connection ended: {e:#}");
                }
            });
        }
    });
    Some(View { path, made, task })
}

/// The views' sockets in `dir`, each with the pid of its process (a
/// socket nothing listens on any more is for the caller to find, and
/// remove if [`stale`]).
pub fn views(dir: &Path) -> Vec<(u32, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(u32, PathBuf)> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let pid: u32 = name
                .strip_prefix(VIEW_PREFIX)?
                .strip_suffix(".sock")?
                .parse()
                .ok()?;
            Some((pid, entry.path()))
        })
        .collect();
    found.sort();
    found
}
