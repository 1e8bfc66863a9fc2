//! The terminal extension: jobs on a pseudo-terminal. The host renders what
//! such a job draws; here are the model's side of it: named keys as input,
//! resizes, the screen view, and waits that end when the job sits at a
//! prompt.

use serde_json::{Map, Value, json};

use super::args::optional_bool;
use super::{Dialect, Found, done, error_message};
use crate::config::Config;
use crate::model::{
    JobsView, TerminalScreen, TerminalSize, ToolResult, WaitEnd, WaitOutcome, WaitUntil,
};
use crate::model::{dimension, schema};

/// How long a terminal job must have been quiet at a prompt before a wait
/// ends there: long enough that a program still printing is not taken for
/// one waiting, short next to any wait a model asks for.
pub const PROMPT_QUIET_MS: u32 = 500;

/// The most keys one input call sends.
pub const MAX_KEYS: usize = 64;

/// The named keys and the bytes a terminal sends for each.
const KEYS: &[(&str, &[u8])] = &[
    ("enter", b"\r"),
    ("tab", b"\t"),
    ("esc", b"\x1b"),
    ("backspace", b"\x7f"),
    ("space", b" "),
    ("up", b"\x1b[A"),
    ("down", b"\x1b[B"),
    ("right", b"\x1b[C"),
    ("left", b"\x1b[D"),
    ("home", b"\x1b[H"),
    ("end", b"\x1b[F"),
    ("delete", b"\x1b[3~"),
    ("pageup", b"\x1b[5~"),
    ("pagedown", b"\x1b[6~"),
];

/// The key names a call may use, for the schema and the error.
pub fn key_names() -> Vec<String> {
    KEYS.iter()
        .map(|(name, _)| (*name).to_owned())
        .chain(["ctrl-a … ctrl-z".to_owned()])
        .collect()
}

/// The bytes for one key name: a name from [`KEYS`] or `ctrl-<letter>`
/// (`ctrl-c` interrupts, `ctrl-d` ends the input, `ctrl-z` suspends).
fn key_bytes(name: &str) -> Option<Vec<u8>> {
    let lower = name.trim().to_ascii_lowercase();
    if let Some((_, bytes)) = KEYS.iter().find(|(n, _)| *n == lower) {
        return Some(bytes.to_vec());
    }
    let letter = lower
        .strip_prefix("ctrl-")
        .or_else(|| lower.strip_prefix("ctrl+"))?;
    match letter.as_bytes() {
        [c @ b'a'..=b'z'] => Some(vec![c - b'a' + 1]),
        _ => None,
    }
}

/// The bytes of a call's `keys` (a list of key names), in order.
pub(super) fn keys(args: &Map<String, Value>) -> Result<Option<Vec<u8>>, String> {
    let names = match args.get("keys") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(names)) => names,
        Some(_) => {
            return Err("invalid arguments: \"keys\" must be a list of key names".to_owned());
        }
    };
    if names.len() > MAX_KEYS {
        return Err(format!(
            "invalid keys: {} keys is more than the limit of {MAX_KEYS}",
            names.len()
        ));
    }
    let mut bytes = Vec::new();
    for name in names {
        let Some(text) = name.as_str() else {
            return Err("invalid arguments: \"keys\" must be a list of key names".to_owned());
        };
        let Some(key) = key_bytes(text) else {
            let shown: String = text.chars().take(40).collect();
            return Err(format!(
                "invalid key \"{shown}\": expected one of {}",
                key_names().join(", ")
            ));
        };
        bytes.extend(key);
    }
    Ok(Some(bytes))
}

/// The wait a call asks for, with the prompt end added when the extension is
/// on (unless the call says `"prompt": false`): the host applies it only to
/// a job on a terminal.
pub fn with_prompt(
    config: &Config,
    args: &Map<String, Value>,
    ready: Option<WaitUntil>,
) -> Result<Option<WaitUntil>, String> {
    if !config.extensions.terminal || optional_bool(args, "prompt")? == Some(false) {
        return Ok(ready);
    }
    let mut until = ready.unwrap_or(WaitUntil {
        pattern: None,
        quiet_ms: None,
        prompt_quiet_ms: None,
    });
    until.prompt_quiet_ms = Some(PROMPT_QUIET_MS);
    Ok(Some(until))
}

/// `[wait ended: the job is waiting for input: <prompt>]` for a wait that
/// ended at a prompt (profiles A and B).
pub fn prompt_note(d: &dyn Dialect, outcome: &WaitOutcome) -> Option<String> {
    (outcome.end == WaitEnd::Prompt).then(|| {
        format!(
            "[wait ended: the {} is waiting for input: {}]",
            d.words().noun,
            outcome.prompt.as_deref().unwrap_or_default()
        )
    })
}

/// The output tools' extra properties (extension `terminal`).
pub fn output_properties(config: &Config) -> Vec<(&'static str, Value)> {
    if !config.extensions.terminal {
        return Vec::new();
    }
    vec![
        (
            "view",
            schema::one_of(
                &["text", "screen"],
                "For a job on a terminal: \"screen\" shows what its screen shows now (for full-screen programs), without consuming its output; \"text\" (the default) reads its output as text.",
            ),
        ),
        (
            "prompt",
            schema::boolean(
                "For a job on a terminal: a wait also ends when the job waits at a prompt ([Y/n], a password, >>>, $ ...), and shows it (default true).",
            ),
        ),
    ]
}

/// The schema of the input tool's `keys`.
pub fn keys_property() -> Value {
    schema::strings(
        MAX_KEYS,
        format!(
            "Keys to send after text, by name: {}.",
            key_names().join(", ")
        ),
    )
}

/// Whether a call asks for the screen (`"view": "screen"`).
pub fn wants_screen(config: &Config, args: &Map<String, Value>) -> Result<bool, String> {
    if !config.extensions.terminal {
        return Ok(false);
    }
    match args.get("view") {
        None | Some(Value::Null) => Ok(false),
        Some(Value::String(v)) if v == "text" => Ok(false),
        Some(Value::String(v)) if v == "screen" => Ok(true),
        Some(v) => Err(format!(
            "invalid view: expected \"text\" or \"screen\", got {v}"
        )),
    }
}

/// The screen as the model reads it: a header with its size and cursor,
/// then its rows down to the last one with anything on it (or the cursor's),
/// within `MAX_SCREEN_BYTES`.
pub fn screen_text(screen: &TerminalScreen) -> String {
    let used = screen
        .lines
        .iter()
        .rposition(|l| !l.is_empty())
        .map_or(0, |i| i + 1)
        .max(usize::from(screen.cursor_row) + 1)
        .min(screen.lines.len());
    let mut text = format!(
        "[screen: {} rows × {} columns{}, cursor at row {}, column {}]\n",
        screen.size.rows,
        screen.size.cols,
        if screen.alternate {
            ", full-screen program"
        } else {
            ""
        },
        u32::from(screen.cursor_row) + 1,
        u32::from(screen.cursor_col) + 1,
    );
    for (i, line) in screen.lines[..used].iter().enumerate() {
        if text.len() + line.len() >= MAX_SCREEN_BYTES {
            text.push_str(&format!("[{} more rows not shown]\n", used - i));
            break;
        }
        text.push_str(line);
        text.push('\n');
    }
    text
}

/// The most bytes of rows one screen view shows: a screen may be 1000 by
/// 1000, far more than a model should be handed at once.
pub const MAX_SCREEN_BYTES: usize = 64 * 1024;

/// The resize tool's schema.
pub fn resize_schema(d: &dyn Dialect) -> Value {
    let w = d.words();
    let dimension = |what: &str| schema::integer_in(&crate::model::TERMINAL_DIMENSIONS, what);
    json!({
        "type": "object",
        "properties": {
            w.id_param: {"type": "string", "description": format!("The {} id.", w.noun)},
            "rows": dimension("Rows."),
            "cols": dimension("Columns.")
        },
        "required": [w.id_param, "rows", "cols"]
    })
}

/// A resize call: `rows` and `cols`, both required.
pub(super) fn resize(
    view: &dyn JobsView,
    d: &dyn Dialect,
    id: &str,
    args: &Map<String, Value>,
    found: &Found,
    cap: Option<u64>,
) -> Result<ToolResult, String> {
    for key in ["rows", "cols"] {
        if args.get(key).is_none_or(Value::is_null) {
            return Err(format!(
                "invalid arguments: missing required property \"{key}\""
            ));
        }
    }
    let size = TerminalSize {
        rows: dimension("rows", args.get("rows"), 0)?,
        cols: dimension("cols", args.get("cols"), 0)?,
    };
    super::live(d, id, found)?;
    view.resize(id, size)
        .map_err(|e| error_message(&e, d, id))?;
    let job = view.get(id).map_err(|e| error_message(&e, d, id))?;
    Ok(done(
        d,
        format!(
            "resized the terminal of {} {id} to {} rows × {} columns",
            d.words().noun,
            size.rows,
            size.cols
        ),
        &job,
        cap,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_the_bytes_a_terminal_sends() {
        let args = |keys: Value| {
            let mut m = Map::new();
            m.insert("keys".to_owned(), keys);
            m
        };
        assert_eq!(
            keys(&args(json!(["ctrl-c", "Enter", "up", "CTRL-D"]))).unwrap(),
            Some(b"\x03\r\x1b[A\x04".to_vec())
        );
        let err = keys(&args(json!(["ctrl-1"]))).unwrap_err();
        assert!(
            err.starts_with("invalid key \"ctrl-1\": expected one of enter, tab"),
            "{err}"
        );
        assert!(keys(&args(json!("enter"))).is_err());
        assert!(keys(&args(json!(vec!["a"; MAX_KEYS + 1]))).is_err());
    }
}
