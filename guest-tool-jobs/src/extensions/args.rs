//! The extension calls' arguments: each read from the call's JSON object with
//! its own message when it is the wrong kind.

use serde_json::{Map, Value};

use super::{Dialect, MAX_PATTERN_BYTES};
use crate::model::{OutputStream, json_type};

/// A pattern argument: non-empty and at most [`MAX_PATTERN_BYTES`].
pub(super) fn pattern_arg<'a>(key: &str, pattern: &'a str) -> Result<&'a str, String> {
    if pattern.is_empty() {
        return Err(format!("invalid {key}: expected a non-empty pattern"));
    }
    if pattern.len() > MAX_PATTERN_BYTES {
        return Err(format!(
            "invalid {key}: the pattern is {} bytes, more than the limit of {MAX_PATTERN_BYTES}",
            pattern.len()
        ));
    }
    Ok(pattern)
}
pub(super) fn parse_object(args_json: &str) -> Result<Map<String, Value>, String> {
    match serde_json::from_str::<Value>(args_json) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(format!(
            "invalid arguments: expected an object, got {}",
            json_type(&other)
        )),
        Err(e) => Err(format!("invalid arguments: not valid JSON ({e})")),
    }
}

pub(super) fn required_id(args: &Map<String, Value>, d: &dyn Dialect) -> Result<String, String> {
    let key = d.words().id_param;
    match args.get(key) {
        None => Err(format!(
            "invalid arguments: missing required property \"{key}\""
        )),
        Some(Value::String(id)) => d.job_id(id),
        Some(_) => Err(format!("invalid arguments: \"{key}\" must be a string")),
    }
}

pub(super) fn optional_string<'a>(
    args: &'a Map<String, Value>,
    key: &str,
) -> Result<Option<&'a str>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format!("invalid arguments: \"{key}\" must be a string")),
    }
}

pub(super) fn optional_bool(args: &Map<String, Value>, key: &str) -> Result<Option<bool>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(format!("invalid arguments: \"{key}\" must be a boolean")),
    }
}

/// A whole number argument within `min..=max`.
pub(super) fn optional_count(
    args: &Map<String, Value>,
    key: &str,
    min: u64,
    max: u64,
) -> Result<Option<u64>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_f64() {
            Some(n) if n.fract() == 0.0 && n >= min as f64 && n <= max as f64 => Ok(Some(n as u64)),
            _ => Err(format!(
                "invalid {key}: expected a whole number from {min} to {max}, got {v}"
            )),
        },
    }
}

pub(super) fn stream_arg(args: &Map<String, Value>) -> Result<Option<OutputStream>, String> {
    match optional_string(args, "stream")? {
        None => Ok(None),
        Some("stdout") => Ok(Some(OutputStream::Stdout)),
        Some("stderr") => Ok(Some(OutputStream::Stderr)),
        Some(other) => Err(format!(
            "invalid stream: expected \"stdout\" or \"stderr\", got \"{other}\""
        )),
    }
}
