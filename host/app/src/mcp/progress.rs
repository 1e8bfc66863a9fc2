//! `notifications/progress` while a call that carried a `progressToken`
//! waits, so a client can keep it alive.

use rmcp::service::RoleServer;
use serde_json::Value;

use super::JobsServer;

impl JobsServer {
    /// Sends `notifications/progress` for the call `token` names every
    /// interval until it is dropped (when the call answers; it never returns):
    /// `progress`
    /// counts up, and the message says which job the call waits for and how
    /// long it has run, in a few dozen bytes.
    pub(super) async fn report_progress(
        &self,
        peer: rmcp::Peer<RoleServer>,
        token: rmcp::model::ProgressToken,
        args: &Value,
    ) {
        let job = ["job_id", "task_id", "id"]
            .iter()
            .find_map(|key| args.get(*key).and_then(Value::as_str))
            .map(|id| id.chars().take(64).collect::<String>());
        let started = tokio::time::Instant::now();
        let mut ticks =
            tokio::time::interval_at(started + self.progress_interval, self.progress_interval);
        for n in 1u64.. {
            ticks.tick().await;
            let waited = started.elapsed().as_secs();
            let message = match job.as_deref().and_then(|id| {
                self.session
                    .registry()
                    .get(id, Some(self.session.owner()))
                    .ok()
            }) {
                Some(snapshot) => format!(
                    "waiting for {}: {} after {waited} s",
                    snapshot.id,
                    snapshot.status.as_str()
                ),
                None => format!("waiting after {waited} s"),
            };
            let param = rmcp::model::ProgressNotificationParam::new(token.clone(), n as f64)
                .with_message(message);
            if peer.notify_progress(param).await.is_err() {
                // The client is gone: nothing more to report, and the call
                // itself ends with the session.
                break;
            }
        }
        std::future::pending::<()>().await;
    }
}
