//! `jobs-host ps`: the jobs of one session or of all, with what a person
//! looks for (status, pid, ports, label).

use anyhow::Result;
use serde_json::{Value, json};

use super::{Sessions, chosen};

/// The jobs of `session` (every session's when `None`), and every session's
/// key, in order.
///
/// # Errors
///
/// A session named that the daemon does not keep.
pub(super) async fn ps(sessions: &impl Sessions, session: Option<&str>) -> Result<Value> {
    let mut jobs = Vec::new();
    for view in chosen(sessions, session).await? {
        let registry = &view.registry;
        for job in registry.list(Some(&view.owner)) {
            let (pid, ports) = registry.process_view(&job.id).unwrap_or_default();
            jobs.push(json!({
                "id": job.id,
                "session": view.key,
                "status": job.status.as_str(),
                "detail": job.detail,
                "started_at": job.started_at,
                "finished_at": job.finished_at,
                "pid": pid,
                "ports": ports.iter().map(|p| p.port).collect::<Vec<_>>(),
                "label": job.label,
            }));
        }
    }
    let keys: Vec<String> = chosen(sessions, None)
        .await?
        .into_iter()
        .map(|v| v.key)
        .collect();
    Ok(json!({"ok": true, "now": host::registry::now_ms(), "jobs": jobs, "sessions": keys}))
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{Stub, failing_job, stream_job};
    use super::*;

    #[tokio::test]
    async fn each_session_s_jobs_are_listed_with_their_state() {
        let stub = Stub::new(&["two", "one"]);
        let (running, _feed) = stream_job(&stub.sessions[1]);
        let failed = failing_job(&stub.sessions[0], "exit code: 3").await;
        let all = ps(&stub, None).await.unwrap();
        assert_eq!(all["sessions"], json!(["one", "two"]));
        let jobs = all["jobs"].as_array().unwrap();
        assert_eq!(jobs.len(), 2);
        assert_eq!(jobs[0]["session"], "one");
        assert_eq!(jobs[0]["id"], running);
        assert_eq!(jobs[0]["status"], "running");
        assert_eq!(jobs[0]["label"], "a stream");
        assert_eq!(jobs[0]["pid"], Value::Null);
        assert_eq!(jobs[1]["session"], "two");
        assert_eq!(jobs[1]["id"], failed);
        assert_eq!(jobs[1]["status"], "failed");
        assert_eq!(jobs[1]["detail"], "exit code: 3");
        let one = ps(&stub, Some("one")).await.unwrap();
        assert_eq!(one["jobs"].as_array().unwrap().len(), 1);
        assert_eq!(one["sessions"], json!(["one", "two"]));
        assert_eq!(
            ps(&stub, Some("three")).await.unwrap_err().to_string(),
            "no session \"three\" here (`jobs-host ps --all` lists them)"
        );
    }
}
