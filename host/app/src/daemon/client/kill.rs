//! `jobs-host kill`.

use anyhow::Result;

use super::required_reply;
use crate::daemon::Request;

/// `jobs-host kill`.
///
/// # Errors
///
/// No daemon, or an unknown job.
pub async fn kill(id: String, session: Option<String>, json: bool) -> Result<u8> {
    let answer = required_reply(Request::Kill {
        id: id.clone(),
        session,
    })
    .await?;
    let finished = answer["already_finished"].as_bool() == Some(true);
    if json {
        println!(
            "{}",
            serde_json::json!({"id": id, "already_finished": finished})
        );
    } else if finished {
        println!("{id} had already finished");
    } else {
        println!("killing {id}; its session will be told");
    }
    Ok(0)
}
