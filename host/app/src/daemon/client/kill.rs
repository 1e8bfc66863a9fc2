//! `jobs-host kill`.

use anyhow::Result;

use super::required_reply;
use crate::daemon::Request;

/// `jobs-host kill`.
///
/// # Errors
///
/// No daemon, or an unknown job.
pub async fn kill(id: String, session: Option<String>) -> Result<u8> {
    let answer = required_reply(Request::Kill {
        id: id.clone(),
        session,
    })
    .await?;
    if answer["already_finished"].as_bool() == Some(true) {
        println!("{id} had already finished");
    } else {
        println!("killing {id}; its session will be told");
    }
    Ok(0)
}
