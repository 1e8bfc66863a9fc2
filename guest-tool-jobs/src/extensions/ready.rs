//! The ready extension: waits that also end on a matching line or on quiet
//! output, and the notes that say which end came.

use serde_json::{Map, Value, json};

use super::args::{optional_count, optional_string, pattern_arg};
use super::{Dialect, Quiet};
use crate::config::Config;
use crate::model::{LineMatch, WaitEnd, WaitOutcome, WaitUntil, timer_ms};

const UNTIL_DESCRIPTION: &str = "Also stop waiting when an unread output line matches this regular expression (for example a server's ready line). Implies a wait.";
const QUIET_MS_DESCRIPTION: &str = "Also stop waiting once the job has written nothing for this many milliseconds. Implies a wait.";
const QUIET_SECONDS_DESCRIPTION: &str =
    "Also stop waiting once the job has written nothing for this many seconds.";

/// The ready-wait properties an output or wait tool gains (extension `ready`).
pub fn ready_properties(config: &Config, d: &dyn Dialect) -> Vec<(&'static str, Value)> {
    if !config.extensions.ready {
        return Vec::new();
    }
    let quiet = match d.quiet() {
        Quiet::Seconds => (
            "quiet_seconds",
            json!({"type": "integer", "description": QUIET_SECONDS_DESCRIPTION}),
        ),
        Quiet::Milliseconds => (
            "quiet_ms",
            json!({"type": "number", "description": QUIET_MS_DESCRIPTION}),
        ),
    };
    vec![
        (
            "until",
            json!({"type": "string", "description": UNTIL_DESCRIPTION}),
        ),
        quiet,
    ]
}

/// The ready-wait arguments as the wait request carries them, when the
/// extension is on and the call gives any: `until`, and `quiet_ms` for
/// profiles A and B or `quiet_seconds` for C.
pub fn ready_args(
    config: &Config,
    d: &dyn Dialect,
    args: &Map<String, Value>,
) -> Result<Option<WaitUntil>, String> {
    if !config.extensions.ready {
        return Ok(None);
    }
    let pattern = match optional_string(args, "until")? {
        Some(p) => Some(pattern_arg("until", p)?.to_owned()),
        None => None,
    };
    let quiet_ms = match d.quiet() {
        Quiet::Seconds => {
            optional_count(args, "quiet_seconds", 1, 2_147_483)?.map(|s| (s * 1000) as u32)
        }
        Quiet::Milliseconds => match args.get("quiet_ms") {
            None | Some(Value::Null) => None,
            Some(value) => {
                let ms = value.as_f64().and_then(timer_ms);
                Some(ms.ok_or_else(|| {
                    format!(
                        "invalid quiet_ms: expected a positive number of milliseconds no greater than 2147483647, got {value}"
                    )
                })?)
            }
        },
    };
    Ok(
        (pattern.is_some() || quiet_ms.is_some()).then_some(WaitUntil {
            pattern,
            quiet_ms,
            prompt_quiet_ms: None,
        }),
    )
}

/// The note that says why a ready wait ended, for profiles A and B: it comes
/// before the output the call then reads.
pub fn wait_note(
    d: &dyn Dialect,
    outcome: &WaitOutcome,
    timeout_ms: u32,
    ready: &WaitUntil,
) -> String {
    match (outcome.end, &outcome.matched) {
        (WaitEnd::Matched, Some(m)) => matched_note(m),
        (WaitEnd::Quiet, _) => format!(
            "[wait ended: no output for {} ms]",
            ready.quiet_ms.unwrap_or_default()
        ),
        (WaitEnd::Settled, _) => format!("[wait ended: the {} finished]", d.words().noun),
        (WaitEnd::Prompt, _) => super::prompt_note(d, outcome).unwrap_or_default(),
        (WaitEnd::TimedOut | WaitEnd::Matched, _) => {
            format!("[wait ended: timed out after {timeout_ms} ms]")
        }
    }
}

/// `[wait ended: <stream> line <n> matched]`, then the lines before it (`<n>-`)
/// and the line itself (`<n>:`).
pub fn matched_note(m: &LineMatch) -> String {
    format!(
        "[wait ended: {} line {} matched]\n{}",
        m.line.stream.as_str(),
        m.line.number,
        matched_lines(m)
    )
}

/// The lines before a match (`<n>-<text>`) and the match (`<n>:<text>`).
pub fn matched_lines(m: &LineMatch) -> String {
    m.before
        .iter()
        .map(|line| format!("{}-{}", line.number, line.text))
        .chain([format!("{}:{}", m.line.number, m.line.text)])
        .collect::<Vec<_>>()
        .join("\n")
}
