//! The line language of `jobs-host shell`: one tool call per line, answered with
//! exactly the text the model would see, and notices shown with their lane.

use serde_json::{Value, json};

use host::owner::{Lane, NoticeMessage};
use host::session::{Session, SessionReply};

/// One parsed console line.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// A tool call.
    Call {
        /// Tool name.
        tool: String,
        /// Arguments.
        args: Value,
    },
    /// Wait until every job of the session has settled, then show new notices.
    Settle,
    /// Show the commands.
    Help,
    /// Leave.
    Exit,
    /// A blank line or a comment.
    Nothing,
}

/// Usage text.
pub const HELP: &str = "\
commands (one per line):
  bash <command>                        start a background shell job
  job_output <id> [--wait] [--timeout-ms N]   (task_output in profile b)
  job_list                                    (task_list)
  job_kill <id> [--reason <text>]             (task_kill)
  job_status <id>                             (profile c)
  job_wait <id> [--timeout-seconds N]         (profile c)
  job_cancel <id>                             (profile c)
  <tool> <json-arguments>               any tool, with raw JSON arguments; with
                                        --extensions also job_input, job_signal,
                                        job_log (task_* in profile b), `until`
                                        and `quiet_ms` on waits, and `stdin`,
                                        `name` and limits on bash
  settle                                wait until every job has settled
  help | exit";

/// Parses one line.
///
/// # Errors
///
/// A message saying what is wrong with the line.
pub fn parse(line: &str) -> Result<Command, String> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return Ok(Command::Nothing);
    }
    let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    let rest = rest.trim();
    if rest.starts_with('{') {
        let args =
            serde_json::from_str(rest).map_err(|e| format!("arguments are not JSON: {e}"))?;
        return Ok(Command::Call {
            tool: word.to_owned(),
            args,
        });
    }
    let call = |tool: &str, args: Value| {
        Ok(Command::Call {
            tool: tool.to_owned(),
            args,
        })
    };
    // `job_*` (profile A) and `task_*` (profile B) take the same shorthand.
    let (noun, verb) = word.split_once('_').unwrap_or(("", word));
    let id_param = format!("{noun}_id");
    let shorthand = matches!(noun, "job" | "task");
    match word {
        "help" => Ok(Command::Help),
        "exit" | "quit" => Ok(Command::Exit),
        "settle" => Ok(Command::Settle),
        "bash" if rest.is_empty() => Err("usage: bash <command>".to_owned()),
        "bash" => call("bash", json!({ "command": rest })),
        _ if shorthand && verb == "list" => call(word, json!({})),
        _ if shorthand && verb == "output" => {
            let mut words = rest.split_whitespace();
            let id = words
                .next()
                .ok_or(format!("usage: {word} <id> [--wait] [--timeout-ms N]"))?;
            let mut args = json!({ id_param: id });
            while let Some(flag) = words.next() {
                match flag {
                    "--wait" => args["wait"] = json!(true),
                    "--timeout-ms" => {
                        let ms: f64 = words
                            .next()
                            .and_then(|v| v.parse().ok())
                            .ok_or("--timeout-ms needs a number")?;
                        args["timeout_ms"] = json!(ms);
                    }
                    other => return Err(format!("unknown flag {other}")),
                }
            }
            call(word, args)
        }
        // Profile C's tools name their id parameter plainly `id`.
        "job_status" | "job_cancel" => match rest.split_whitespace().collect::<Vec<_>>()[..] {
            [id] => call(word, json!({ "id": id })),
            _ => Err(format!("usage: {word} <id>")),
        },
        "job_wait" => {
            let mut words = rest.split_whitespace();
            let id = words
                .next()
                .ok_or("usage: job_wait <id> [--timeout-seconds N]")?;
            let mut args = json!({ "id": id });
            match (words.next(), words.next(), words.next()) {
                (None, _, _) => {}
                (Some("--timeout-seconds"), Some(n), None) => {
                    let seconds: i64 = n
                        .parse()
                        .map_err(|_| "--timeout-seconds needs a whole number")?;
                    args["timeout_seconds"] = json!(seconds);
                }
                _ => return Err("usage: job_wait <id> [--timeout-seconds N]".to_owned()),
            }
            call(word, args)
        }
        _ if shorthand && verb == "kill" => {
            let (id, tail) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            if id.is_empty() {
                return Err(format!("usage: {word} <id> [--reason <text>]"));
            }
            let mut args = json!({ id_param: id });
            let tail = tail.trim();
            if let Some(reason) = tail.strip_prefix("--reason") {
                args["reason"] = json!(reason.trim());
            } else if !tail.is_empty() {
                return Err(format!("unexpected {tail:?}"));
            }
            call(word, args)
        }
        other if rest.is_empty() => call(other, json!({})),
        other => Err(format!(
            "{other}: arguments must be JSON or one of the forms in `help`"
        )),
    }
}

/// A notice as the console shows it.
pub fn render_notice(lane: Lane, notice: &NoticeMessage) -> String {
    let lane = match lane {
        Lane::Inject => "inject",
        Lane::Followup => "followup",
    };
    format!("[notice via {lane}] {}", notice.text)
}

/// A reply as the console shows it: its notices, then the result text.
pub fn render_reply(reply: &SessionReply) -> String {
    let mut out: Vec<String> = reply
        .notices
        .iter()
        .map(|n| render_notice(Lane::Inject, n))
        .collect();
    out.push(reply.outcome.text.clone());
    out.join("\n")
}

/// `text` made safe for a terminal: a job's output is the job's to choose, and
/// on a terminal its control characters would act instead of showing (move the
/// cursor, overwrite a line with `\r`, retitle the window, set the clipboard,
/// make the terminal answer into its own input), as would the bidirectional
/// overrides that reorder what is shown. Each such character is shown as its
/// escape (`\u{1b}`, `\r`) and the rest is left as the model sees it; newlines
/// and tabs stay.
pub fn for_terminal(text: &str) -> std::borrow::Cow<'_, str> {
    fn acts(c: char) -> bool {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    }
    if !text.contains(acts) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if acts(c) {
            shown.extend(c.escape_default());
        } else {
            shown.push(c);
        }
    }
    std::borrow::Cow::Owned(shown)
}

/// Runs one parsed command; returns what to print, or `None` to leave.
pub async fn run(session: &Session, command: Command) -> Option<String> {
    run_with_abort(session, command, &host::CancellationToken::new()).await
}

/// [`run`] for a console whose client may leave mid-command (`abort`): a
/// call then ends as a cancelled call does, consuming nothing, and a
/// `settle` stops waiting.
pub async fn run_with_abort(
    session: &Session,
    command: Command,
    abort: &host::CancellationToken,
) -> Option<String> {
    match command {
        Command::Exit => None,
        Command::Nothing => Some(String::new()),
        Command::Help => Some(HELP.to_owned()),
        Command::Settle => {
            let registry = session.registry();
            let settled = async {
                for job in registry.list(Some(session.owner())) {
                    registry.settled(&job.id).await;
                }
            };
            tokio::select! {
                () = settled => {}
                () = abort.cancelled() => return Some(String::new()),
            }
            let reply = session.collect_notices().await;
            Some(
                reply
                    .iter()
                    .map(|n| render_notice(Lane::Inject, n))
                    .collect::<Vec<_>>()
                    .join("\n"),
            )
        }
        Command::Call { tool, args } => Some(render_reply(
            &session.call_with_abort(&tool, &args, abort).await,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_terminal_is_shown_controls_as_escapes() {
        assert!(matches!(
            for_terminal("plain\ttext\nand lines, 界"),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(
            for_terminal("\u{1b}]52;c;cHduZWQ=\u{7}\u{1b}[2Jok\rfake\u{9b}6n"),
            "\\u{1b}]52;c;cHduZWQ=\\u{7}\\u{1b}[2Jok\\rfake\\u{9b}6n"
        );
        assert_eq!(
            for_terminal("file\u{202e}txt.exe\u{7f}"),
            "file\\u{202e}txt.exe\\u{7f}"
        );
    }

    #[test]
    fn lines_become_tool_calls() {
        assert_eq!(
            parse("bash sleep 2 && echo hi").unwrap(),
            Command::Call {
                tool: "bash".into(),
                args: json!({"command": "sleep 2 && echo hi"})
            }
        );
        assert_eq!(
            parse("job_output bash-1 --wait --timeout-ms 500").unwrap(),
            Command::Call {
                tool: "job_output".into(),
                args: json!({"job_id": "bash-1", "wait": true, "timeout_ms": 500.0})
            }
        );
        assert_eq!(
            parse("job_kill bash-1 --reason no longer needed").unwrap(),
            Command::Call {
                tool: "job_kill".into(),
                args: json!({"job_id": "bash-1", "reason": "no longer needed"})
            }
        );
        assert_eq!(
            parse(r#"job_output {"job_id":""}"#).unwrap(),
            Command::Call {
                tool: "job_output".into(),
                args: json!({"job_id": ""})
            }
        );
        assert_eq!(
            parse("task_kill bash-1").unwrap(),
            Command::Call {
                tool: "task_kill".into(),
                args: json!({"task_id": "bash-1"})
            }
        );
        assert_eq!(
            parse("job_wait bash-1 --timeout-seconds 5").unwrap(),
            Command::Call {
                tool: "job_wait".into(),
                args: json!({"id": "bash-1", "timeout_seconds": 5})
            }
        );
        assert_eq!(
            parse("job_cancel bash-1").unwrap(),
            Command::Call {
                tool: "job_cancel".into(),
                args: json!({"id": "bash-1"})
            }
        );
        assert!(parse("job_status").is_err());
        assert!(parse("job_wait bash-1 --timeout-seconds 1.5").is_err());
        assert_eq!(parse("  # note").unwrap(), Command::Nothing);
        assert!(parse("job_output").is_err());
        assert!(parse("job_output bash-1 --loud").is_err());
    }
}
