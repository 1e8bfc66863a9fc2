//! `jobs-host wait`: a job's end, for the client to exit with its code.

use anyhow::{Context, Result};
use serde_json::{Value, json};

use super::{Sessions, find};

/// Waits for job `id` (of `session`, when named) to settle; its status and
/// detail.
///
/// # Errors
///
/// No such job, one in several sessions with none named, or a record gone
/// meanwhile.
pub(super) async fn wait(
    sessions: &impl Sessions,
    id: &str,
    session: Option<&str>,
) -> Result<Value> {
    let view = find(sessions, id, session).await?;
    view.registry.settled(id).await;
    let job = view
        .registry
        .inspect(id)
        .context("the job's record is gone")?;
    Ok(json!({"ok": true, "status": job.status.as_str(), "detail": job.detail}))
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{Stub, failing_job, stream_job};
    use super::*;

    #[tokio::test]
    async fn the_end_comes_once_the_job_settles() {
        let stub = Stub::new(&["one"]);
        let (id, feed) = stream_job(&stub.sessions[0]);
        let waiting = tokio::spawn({
            let stub = stub.clone();
            let id = id.clone();
            async move { wait(&stub, &id, None).await.unwrap() }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        drop(feed);
        assert_eq!(
            waiting.await.unwrap(),
            json!({"ok": true, "status": "completed", "detail": null})
        );
        let failed = failing_job(&stub.sessions[0], "exit code: 3").await;
        assert_eq!(
            wait(&stub, &failed, Some("one")).await.unwrap(),
            json!({"ok": true, "status": "failed", "detail": "exit code: 3"})
        );
    }
}
