//! `jobs-host kill`: a job's whole tree killed as `job_kill` does, its
//! notice left owed so the session's model learns of it.

use anyhow::Result;
use serde_json::{Value, json};

use super::{Sessions, find};

/// Kills job `id` (of `session`, when named); the answer says whether it
/// had already finished.
///
/// # Errors
///
/// No such job, or one in several sessions with none named.
pub(super) async fn kill(
    sessions: &impl Sessions,
    id: &str,
    session: Option<&str>,
) -> Result<Value> {
    let view = find(sessions, id, session).await?;
    let outcome = view
        .registry
        .cancel(id, None)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let done = outcome == host::registry::KillOutcome::AlreadyFinished;
    Ok(json!({"ok": true, "already_finished": done, "session": view.key}))
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{Stub, stream_job};
    use super::*;

    #[tokio::test]
    async fn a_running_job_is_killed_and_a_finished_one_said_so() {
        let stub = Stub::new(&["one"]);
        let (id, _feed) = stream_job(&stub.sessions[0]);
        let answer = kill(&stub, &id, None).await.unwrap();
        assert_eq!(
            answer,
            json!({"ok": true, "already_finished": false, "session": "one"})
        );
        let registry = &stub.sessions[0].registry;
        registry.settled(&id).await;
        assert_eq!(registry.inspect(&id).unwrap().status.as_str(), "killed");
        // Its notice is still owed: nobody has read its end.
        assert!(!registry.inspect(&id).unwrap().reported);
        let again = kill(&stub, &id, Some("one")).await.unwrap();
        assert_eq!(again["already_finished"], true);
    }

    #[tokio::test]
    async fn an_unknown_or_ambiguous_id_is_refused() {
        let stub = Stub::new(&["one", "two"]);
        assert_eq!(
            kill(&stub, "bash-9", None).await.unwrap_err().to_string(),
            "no job bash-9 in any session (`jobs-host ps --all` lists them)"
        );
        assert_eq!(
            kill(&stub, "bash-9", Some("one"))
                .await
                .unwrap_err()
                .to_string(),
            "no job bash-9 in session \"one\" (`jobs-host ps --session one` lists its jobs)"
        );
        let (id, _one) = stream_job(&stub.sessions[0]);
        let (_, _two) = stream_job(&stub.sessions[1]);
        assert_eq!(
            kill(&stub, &id, None).await.unwrap_err().to_string(),
            "job bash-1 is in 2 sessions (\"one\", \"two\"): name one with --session KEY"
        );
        assert!(kill(&stub, &id, Some("three")).await.is_err());
    }
}
