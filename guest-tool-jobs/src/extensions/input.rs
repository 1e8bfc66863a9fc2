//! The input extension's calls: writing to a job's stdin (and closing it),
//! and signals to its whole tree.

use serde_json::{Map, Value};

use super::args::{optional_bool, optional_string};
use super::{Dialect, Found, MAX_INPUT_BYTES, done, error_message};
use crate::model::{JobSignal, JobsView, ToolResult};

pub(super) fn input(
    view: &dyn JobsView,
    config: &crate::config::Config,
    d: &dyn Dialect,
    id: &str,
    args: &Map<String, Value>,
    found: &Found,
    cap: Option<u64>,
) -> Result<ToolResult, String> {
    let text = optional_string(args, "text")?;
    let newline = optional_bool(args, "newline")?.unwrap_or(true);
    let close = optional_bool(args, "close")?.unwrap_or(false);
    let keys = if config.extensions.terminal {
        super::terminal::keys(args)?
    } else {
        None
    };
    if text.is_none() && keys.is_none() && !close {
        let what = if config.extensions.terminal {
            "give \"text\", \"keys\", \"close\": true, or several"
        } else {
            "give \"text\", \"close\": true, or both"
        };
        return Err(format!("invalid arguments: {what}"));
    }
    let mut data = text.unwrap_or_default().to_owned();
    if text.is_some() && newline {
        data.push('\n');
    }
    // Key bytes are ASCII control sequences: the text stays UTF-8.
    if let Some(keys) = &keys {
        data.extend(keys.iter().map(|b| char::from(*b)));
    }
    if data.len() > MAX_INPUT_BYTES {
        return Err(format!(
            "invalid text: {} bytes is more than the limit of {MAX_INPUT_BYTES} bytes",
            data.len()
        ));
    }
    found.clone()?;
    // A finished job's input is closed: the registry answers `input-closed`.
    let written = view
        .write_input(id, &data, close)
        .map_err(|e| error_message(&e, d, id))?;
    let job = view.get(id).map_err(|e| error_message(&e, d, id))?;
    let noun = d.words().noun;
    let plural = if written == 1 { "" } else { "s" };
    // On a terminal a close is the end-of-file character typed, and the
    // terminal stays open: the answer says what happened.
    let on_terminal = close && config.extensions.terminal && view.screen(id).is_ok();
    let said = match (text.is_some() || keys.is_some(), close, on_terminal) {
        (true, true, true) => {
            format!("wrote {written} byte{plural} to {noun} {id} and typed ctrl-d on its terminal")
        }
        (true, true, false) => {
            format!("wrote {written} byte{plural} to {noun} {id} and closed its input")
        }
        (true, false, _) => format!("wrote {written} byte{plural} to {noun} {id}"),
        (false, _, true) => format!("typed ctrl-d on the terminal of {noun} {id}"),
        (false, _, false) => format!("closed the input of {noun} {id}"),
    };
    Ok(done(d, said, &job, cap))
}

pub(super) fn signal(
    view: &dyn JobsView,
    d: &dyn Dialect,
    id: &str,
    args: &Map<String, Value>,
    found: &Found,
    cap: Option<u64>,
) -> Result<ToolResult, String> {
    let names = JobSignal::ALL.iter().map(|s| s.name()).collect::<Vec<_>>();
    let asked = match args.get("signal") {
        None => return Err("invalid arguments: missing required property \"signal\"".to_owned()),
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err("invalid arguments: \"signal\" must be a string".to_owned()),
    };
    let upper = asked.trim().to_ascii_uppercase();
    let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
    let Some(sig) = JobSignal::ALL.into_iter().find(|s| s.name() == bare) else {
        return Err(format!(
            "invalid signal: expected one of {}, got \"{asked}\"",
            names.join(", ")
        ));
    };
    super::live(d, id, found)?;
    view.signal(id, sig).map_err(|e| error_message(&e, d, id))?;
    let job = view.get(id).map_err(|e| error_message(&e, d, id))?;
    Ok(done(
        d,
        format!("sent SIG{} to {} {id}", sig.name(), d.words().noun),
        &job,
        cap,
    ))
}
