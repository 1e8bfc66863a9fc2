//! `jobs-host wait`: a job's end, as its exit code.

use anyhow::Result;

use super::required_reply;
use crate::daemon::Request;

/// `jobs-host wait`: waits for the job's end and exits with its exit code
/// (128 + the signal's number when a signal ended it).
///
/// # Errors
///
/// No daemon, or an unknown job.
pub async fn wait(id: String, session: Option<String>, json: bool) -> Result<u8> {
    let answer = required_reply(Request::Wait {
        id: id.clone(),
        session,
    })
    .await?;
    let status = answer["status"].as_str().unwrap_or("failed");
    let detail = answer["detail"].as_str();
    let code = exit_code(status, detail);
    match detail {
        _ if json => println!(
            "{}",
            serde_json::json!({"id": id, "status": status, "detail": detail, "exit_code": code})
        ),
        Some(detail) => eprintln!("{id} {status} ({detail})"),
        None => eprintln!("{id} {status}"),
    }
    Ok(code)
}

/// A job's end as a process exit code. Its detail starts with `exit code: N`
/// or `signal: NAME` (the sandbox's notes may follow after a `;`).
fn exit_code(status: &str, detail: Option<&str>) -> u8 {
    let first = detail.and_then(|d| d.split(';').next());
    if let Some(code) = first
        .and_then(|d| d.strip_prefix("exit code: "))
        .and_then(|c| c.parse::<i32>().ok())
    {
        return u8::try_from(code.clamp(0, 255)).unwrap_or(1);
    }
    if let Some(name) = first.and_then(|d| d.strip_prefix("signal: ")) {
        let number = name
            .parse::<nix::sys::signal::Signal>()
            .map_or(libc::SIGKILL, |s| s as i32);
        return u8::try_from(128 + number).unwrap_or(137);
    }
    match status {
        "completed" => 0,
        "killed" => 137,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::exit_code;

    #[test]
    fn a_jobs_end_is_its_exit_code() {
        assert_eq!(exit_code("completed", Some("exit code: 4")), 4);
        assert_eq!(
            exit_code("completed", Some("exit code: 3; hooks changed: x")),
            3
        );
        assert_eq!(exit_code("killed", Some("signal: SIGTERM")), 143);
        assert_eq!(exit_code("killed", Some("signal: SIGWINCH")), 128 + 28);
        assert_eq!(exit_code("killed", Some("killed before exit")), 137);
        assert_eq!(exit_code("failed", Some("its daemon stopped")), 1);
        assert_eq!(exit_code("completed", None), 0);
    }
}
