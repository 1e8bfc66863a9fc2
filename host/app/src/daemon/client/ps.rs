//! `jobs-host ps`: a table (or JSON) of the jobs of durable sessions, from
//! the daemon, or from the journal when none runs.

use anyhow::Result;
use serde_json::{Value, json};

use std::io::IsTerminal;

use super::{HOW_TO_START, NO_DAEMON, reply_of};
use crate::console;
use crate::daemon::Request;

/// `jobs-host ps`: from the daemon, or with `journal` (or with no daemon
/// running) from the journal, which also holds ended sessions and the jobs
/// a killed daemon lost.
///
/// # Errors
///
/// A daemon that cannot be reached or answers an error; a journal that is
/// not this user's or is broken.
pub async fn ps(session: Option<String>, journal: bool, json_out: bool) -> Result<u8> {
    let asked = session.clone();
    let live = if journal {
        None
    } else {
        reply_of(Request::Ps {
            session: session.clone(),
        })
        .await?
    };
    let answer = match live {
        Some(answer) => {
            if json_out {
                let out =
                    json!({"daemon": true, "jobs": answer["jobs"], "sessions": answer["sessions"]});
                println!("{}", serde_json::to_string_pretty(&out)?);
                return Ok(0);
            }
            answer
        }
        None => {
            let recorded = match crate::daemon::journal::state_dir() {
                Some(dir) => crate::daemon::journal::read(&dir)?,
                None => None,
            };
            let Some((jobs, dropped, running)) = recorded else {
                if json_out {
                    println!("{}", json!({"daemon": false, "journal": false, "jobs": []}));
                } else {
                    println!("{NO_DAEMON}, and there is no journal: {HOW_TO_START}");
                }
                return Ok(0);
            };
            let jobs: Vec<Value> = jobs
                .into_iter()
                .filter(|r| session.as_deref().is_none_or(|key| r.session == key))
                .map(|r| {
                    json!({
                        "id": r.job.id,
                        "session": r.session,
                        "status": r.job.status,
                        "detail": r.job.detail,
                        "started_at": r.job.started_at,
                        "finished_at": r.job.finished_at,
                        "pid": null,
                        "ports": [],
                        "label": r.job.label,
                    })
                })
                .collect();
            if json_out {
                let out =
                    json!({"daemon": running, "journal": true, "jobs": jobs, "dropped": dropped});
                println!("{}", serde_json::to_string_pretty(&out)?);
                return Ok(0);
            }
            if !journal {
                println!("{NO_DAEMON}; as the journal recorded them:");
            }
            if dropped > 0 {
                println!("({dropped} finished job(s) were dropped by retention)");
            }
            json!({"now": host::registry::now_ms(), "jobs": jobs, "sessions": []})
        }
    };
    let now = answer["now"].as_u64().unwrap_or_default();
    let jobs = answer["jobs"].as_array().cloned().unwrap_or_default();
    let terminal = std::io::stdout().is_terminal();
    let show = |text: &str| -> String {
        if terminal {
            console::for_terminal(text).into_owned()
        } else {
            text.to_owned()
        }
    };
    let mut rows = vec![[
        "ID".to_owned(),
        "SESSION".to_owned(),
        "STATUS".to_owned(),
        "AGE".to_owned(),
        "PID".to_owned(),
        "PORTS".to_owned(),
        "LABEL".to_owned(),
    ]];
    for job in &jobs {
        let started = job["started_at"].as_u64().unwrap_or(now);
        let status = match job["detail"].as_str() {
            Some(detail) => format!("{} ({detail})", job["status"].as_str().unwrap_or("?")),
            None => job["status"].as_str().unwrap_or("?").to_owned(),
        };
        let ports: Vec<String> = job["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_u64)
            .map(|p| p.to_string())
            .collect();
        rows.push([
            job["id"].as_str().unwrap_or("?").to_owned(),
            show(job["session"].as_str().unwrap_or("?")),
            status,
            age(now.saturating_sub(started)),
            job["pid"]
                .as_i64()
                .map_or_else(|| "-".to_owned(), |p| p.to_string()),
            if ports.is_empty() {
                "-".to_owned()
            } else {
                ports.join(",")
            },
            show(&one_line(job["label"].as_str().unwrap_or_default())),
        ]);
    }
    let widths: Vec<usize> = (0..6)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    for row in &rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i < 6 {
                line.push_str(&format!("{cell:<width$}  ", width = widths[i]));
            } else {
                line.push_str(cell);
            }
        }
        println!("{}", line.trim_end());
    }
    if jobs.is_empty() {
        let sessions = answer["sessions"].as_array().map_or(0, Vec::len);
        match asked {
            Some(key) if sessions > 0 => println!(
                "(no jobs in session {key:?}; {sessions} session(s) in the daemon: jobs-host ps --all)"
            ),
            _ => println!("(no jobs)"),
        }
    }
    Ok(0)
}

/// A label's first line, marked when there is more: a table's row stays one
/// line.
pub(super) fn one_line(label: &str) -> String {
    match label.split_once('\n') {
        Some((first, _)) => format!("{first}\u{2026}"),
        None => label.to_owned(),
    }
}

/// `3s`, `4m05s`, `2h07m`.
pub(super) fn age(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}
