//! One line of input judged as JSON-RPC before the MCP service sees it: what
//! is refused (with the id it carried, whenever one can be read) and why.

use serde_json::{Map, Value, json};

/// One line a client sent, as the framing layer judges it before the MCP
/// service sees it.
#[derive(Debug, PartialEq)]
pub enum Frame {
    /// A well-formed JSON-RPC 2.0 message: passed on as it is.
    Message,
    /// Blank: ignored.
    Blank,
    /// A well-formed message passed on as this line instead (a request of the
    /// 2025-11-25 tasks, renamed to the method that serves it).
    Rewritten(String),
    /// Refused with this JSON-RPC error response (one line, no newline).
    Refused(String),
}

/// The id of a request whose text the JSON parser refused, read by scanning
/// its top level only (nested values are skipped by their brackets, so depth
/// costs nothing); `None` unless the line is one object with a string or
/// integer `id` and a string `method` (a request: a notification is owed no
/// answer).
pub(super) fn salvage_request_id(line: &str) -> Option<Value> {
    let bytes = line.as_bytes();
    let mut i = 0;
    let skip_ws = |i: &mut usize| {
        while *i < bytes.len() && bytes[*i].is_ascii_whitespace() {
            *i += 1;
        }
    };
    // The end of the string starting at `i` (a quote), just past its closing quote.
    let string_end = |mut i: usize| -> Option<usize> {
        i += 1;
        while i < bytes.len() {
            match bytes[i] {
                b'\\' => i += 2,
                b'"' => return Some(i + 1),
                _ => i += 1,
            }
        }
        None
    };
    skip_ws(&mut i);
    if bytes.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    let (mut id, mut method) = (None, false);
    loop {
        skip_ws(&mut i);
        match bytes.get(i)? {
            b'}' => break,
            b',' => {
                i += 1;
                continue;
            }
            b'"' => {}
            _ => return None,
        }
        let key_end = string_end(i)?;
        let key: String = serde_json::from_str(&line[i..key_end]).ok()?;
        i = key_end;
        skip_ws(&mut i);
        if bytes.get(i) != Some(&b':') {
            return None;
        }
        i += 1;
        skip_ws(&mut i);
        let start = i;
        // Skip one value: a string, or anything up to the next top-level
        // comma or brace, across brackets and strings.
        let mut depth = 0usize;
        while i < bytes.len() {
            match bytes[i] {
                b'"' => i = string_end(i)?,
                b'{' | b'[' => {
                    depth += 1;
                    i += 1;
                }
                b'}' | b']' if depth > 0 => {
                    depth -= 1;
                    i += 1;
                }
                b',' | b'}' if depth == 0 => break,
                _ => i += 1,
            }
        }
        let raw = line[start..i].trim();
        match key.as_str() {
            "id" => {
                id = serde_json::from_str::<Value>(raw)
                    .ok()
                    .filter(|v| v.is_string() || v.is_i64() || v.is_u64());
            }
            "method" => method = serde_json::from_str::<String>(raw).is_ok(),
            _ => {}
        }
    }
    id.filter(|_| method)
}

/// The answer to a line that is not JSON (or not UTF-8).
pub(super) fn parse_error() -> String {
    json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error"}})
        .to_string()
}

/// Checks one line of the stdio transport against JSON-RPC 2.0: text that is
/// not JSON is a parse error (`-32700`, `id: null`); JSON that is not a single
/// request, notification or response object is an invalid request (`-32600`,
/// with the request's id when it had a valid one).
#[cfg(test)]
pub(super) fn judge_line(line: &str) -> Frame {
    match check_line(line) {
        Ok(_) => Frame::Message,
        Err(frame) => frame,
    }
}

/// `judge_line`, keeping the parsed message of a line that passes, so the
/// session's rules need not parse it again.
pub(super) fn check_line(line: &str) -> Result<Map<String, Value>, Frame> {
    if line.trim().is_empty() {
        return Err(Frame::Blank);
    }
    let error = |code: i32, message: &str, id: Value| {
        Err(Frame::Refused(
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
                .to_string(),
        ))
    };
    let map = match serde_json::from_str(line) {
        Ok(Value::Object(map)) => map,
        Ok(_) => return error(-32600, "Invalid Request", Value::Null),
        // Valid by the JSON grammar but not to the parser (a lone surrogate
        // escape, a number beyond a double, nesting past 128): a request's id
        // can still be read, and it is owed an answer.
        Err(e) => {
            return match salvage_request_id(line) {
                Some(id) => error(-32602, &format!("Invalid params: {e}"), id),
                None => Err(Frame::Refused(parse_error())),
            };
        }
    };
    let id = map.get("id");
    let id_ok = id.is_none_or(|id| id.is_string() || id.is_i64() || id.is_u64() || id.is_null());
    let reply_id = match id {
        Some(id) if id_ok => id.clone(),
        _ => Value::Null,
    };
    if map.get("jsonrpc").and_then(Value::as_str) != Some("2.0") || !id_ok {
        return error(-32600, "Invalid Request", reply_id);
    }
    let valid = match map.get("method") {
        Some(Value::String(_)) => map
            .get("params")
            .is_none_or(|p| p.is_object() || p.is_array()),
        Some(_) => false,
        // A response to one of the server's own requests.
        None => id.is_some() && (map.contains_key("result") != map.contains_key("error")),
    };
    if valid {
        Ok(map)
    } else {
        error(-32600, "Invalid Request", reply_id)
    }
}

/// The methods this server answers.
pub(super) const KNOWN_METHODS: [&str; 5] = [
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "logging/setLevel",
];

/// The methods this server answers, with the shape their params must have.
/// A request for one of them whose params do not fit is refused here with
/// `-32602` and its id (the MCP service would answer it without the id).
pub(super) fn params_problem(method: &str, params: Option<&Value>) -> Option<&'static str> {
    let params = match params {
        None | Some(Value::Null) => None,
        Some(Value::Object(map)) => Some(map),
        Some(_) => return Some("params must be an object"),
    };
    let field = |key: &str| params.and_then(|p| p.get(key));
    if field("_meta").is_some_and(|m| !m.is_object() && !m.is_null()) {
        return Some("_meta must be an object");
    }
    let is_string = |v: Option<&Value>| v.is_some_and(Value::is_string);
    match method {
        "tools/call" => {
            if !is_string(field("name")) {
                return Some("tools/call needs a tool name (a string)");
            }
            if field("arguments").is_some_and(|a| !a.is_object() && !a.is_null()) {
                return Some("arguments must be an object");
            }
        }
        "tools/list" if field("cursor").is_some_and(|c| !c.is_string() && !c.is_null()) => {
            return Some("cursor must be a string");
        }
        "initialize" => {
            let info = field("clientInfo");
            if !is_string(field("protocolVersion"))
                || !field("capabilities").is_some_and(Value::is_object)
                || !info.is_some_and(|i| is_string(i.get("name")) && is_string(i.get("version")))
            {
                return Some(
                    "initialize needs protocolVersion, capabilities and clientInfo (name, version)",
                );
            }
        }
        "logging/setLevel" => {
            const LEVELS: [&str; 8] = [
                "debug",
                "info",
                "notice",
                "warning",
                "error",
                "critical",
                "alert",
                "emergency",
            ];
            if !field("level")
                .and_then(Value::as_str)
                .is_some_and(|l| LEVELS.contains(&l))
            {
                return Some("level must be a logging level");
            }
        }
        _ => {}
    }
    None
}
