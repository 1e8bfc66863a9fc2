//! The framing's rules, line by line.

use super::framer::*;
use super::revision::v2025_11_25::LEGACY_PREFIX;
use super::wire::*;
use serde_json::{Value, json};

#[test]
fn lines_are_judged_like_json_rpc() {
    assert_eq!(judge_line("  "), Frame::Blank);
    assert_eq!(
        judge_line("not json"),
        Frame::Refused(
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#.into()
        )
    );
    let invalid = |id: &str| {
        Frame::Refused(format!(
            r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32600,"message":"Invalid Request"}}}}"#
        ))
    };
    assert_eq!(judge_line("[]"), invalid("null"));
    assert_eq!(judge_line("42"), invalid("null"));
    assert_eq!(judge_line(r#"{"id":1,"method":"ping"}"#), invalid("1"));
    assert_eq!(
        judge_line(r#"{"jsonrpc":"2.0","id":2,"method":7}"#),
        invalid("2")
    );
    assert_eq!(
        judge_line(r#"{"jsonrpc":"2.0","id":{},"method":"x"}"#),
        invalid("null")
    );
    assert_eq!(judge_line(r#"{"jsonrpc":"2.0","id":3}"#), invalid("3"));
    assert_eq!(
        judge_line(r#"{"jsonrpc":"2.0","id":3,"method":"x","params":1}"#),
        invalid("3")
    );
    assert_eq!(
        judge_line(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
        Frame::Message
    );
    assert_eq!(
        judge_line(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
        Frame::Message
    );
    assert_eq!(
        judge_line(r#"{"jsonrpc":"2.0","id":"a","result":{}}"#),
        Frame::Message
    );
}

fn refused(frame: Frame) -> Value {
    match frame {
        Frame::Refused(reply) => serde_json::from_str(&reply).unwrap(),
        other => panic!("not refused: {other:?}"),
    }
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;

#[test]
fn the_session_rules_keep_every_id() {
    let mut f = Framer::default();
    // Before the lifecycle began: a notification (or response) is
    // dropped; requests go on, for the service to answer by revision.
    assert_eq!(
        f.judge(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
        Frame::Blank
    );
    assert_eq!(
        f.judge(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
        Frame::Message
    );
    assert_eq!(
        f.judge(r#"{"jsonrpc":"2.0","id":"x","method":"tools/list"}"#),
        Frame::Message
    );
    assert_eq!(f.judge(INIT), Frame::Message);
    f.answered(r#"{"jsonrpc":"2.0","id":0,"result":{}}"#);
    let again = refused(f.judge(INIT));
    assert_eq!(
        (again["id"].clone(), again["error"]["code"].clone()),
        (json!(0), json!(-32600))
    );
    // Params of the wrong shape: -32602 with the id.
    for line in [
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":[]}"#,
        r#"{"jsonrpc":"2.0","id":5,"method":"ping","params":[]}"#,
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":5}}"#,
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"_meta":5}}"#,
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"job_list","arguments":[]}}"#,
    ] {
        let reply = refused(f.judge(line));
        assert_eq!(reply["id"], 5, "{line}");
        assert_eq!(reply["error"]["code"], -32602, "{line}");
    }
    // An id still in flight is refused; once answered, it is free again.
    let call = r#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#;
    assert_eq!(f.judge(call), Frame::Message);
    assert_eq!(refused(f.judge(call))["id"], 7);
    f.answered(r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[]}}"#);
    assert_eq!(f.judge(call), Frame::Message);
    // What the service could not read is answered here with its id, or
    // (a notification) not at all.
    for (line, code) in [
        (
            r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"x","arguments":{"t":"a\ud800b"}}}"#,
            -32602,
        ),
        (
            r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"x","arguments":{"n":1e400}}}"#,
            -32602,
        ),
        (
            r#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"ping"}"#,
            -32602,
        ),
        (
            r#"{"jsonrpc":"2.0","id":"a","id":"b","method":"ping"}"#,
            -32602,
        ),
    ] {
        let reply = refused(f.judge(line));
        assert_eq!(reply["error"]["code"], code, "{line}");
        assert!(!reply["id"].is_null(), "{line}: {reply}");
    }
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{"name":"x","arguments":{{"d":{}1{}}}}}}}"#,
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    assert_eq!(refused(f.judge(&deep))["id"], 9);
    let null_id = refused(f.judge(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#));
    assert_eq!(
        (null_id["id"].clone(), null_id["error"]["code"].clone()),
        (Value::Null, json!(-32600))
    );
    assert_eq!(
        f.judge(r#"{"jsonrpc":"2.0","method":"notifications/initialized","params":[]}"#),
        Frame::Blank
    );
    // A cancelled one stays taken (it is never answered).
    let cancelled = r#"{"jsonrpc":"2.0","id":11,"method":"tools/list"}"#;
    assert_eq!(f.judge(cancelled), Frame::Message);
    f.judge(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":11}}"#);
    assert_eq!(refused(f.judge(cancelled))["id"], 11);
    // A response before initialize is dropped, not passed on.
    let mut fresh = Framer::default();
    assert_eq!(
        fresh.judge(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
        Frame::Blank
    );
    // Revision 2026-07-28 has no handshake: a request that names it (with
    // the client's capabilities) begins the session, and notifications
    // then go on.
    let stateless = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    assert_eq!(fresh.judge(stateless), Frame::Message);
    assert_eq!(
        fresh.judge(
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}"#
        ),
        Frame::Message
    );
}

/// A framer whose client sent `initialize` with `init` and got `answer`.
fn initialized(offered: bool, init: Value, answer: Value) -> Framer {
    let mut f = Framer::default();
    f.offer_tasks(offered);
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init});
    assert_eq!(f.judge(&request.to_string()), Frame::Message);
    let answer = json!({"jsonrpc": "2.0", "id": 1, "result": answer}).to_string();
    f.answered(&answer);
    let dressed: Value = serde_json::from_str(&f.legacy().dress(answer)).unwrap();
    assert_eq!(
        dressed["result"]["capabilities"].get("tasks").is_some(),
        f.legacy().is_active(),
        "{dressed}"
    );
    f
}

fn init_params(version: &str, capabilities: Value) -> Value {
    json!({"protocolVersion": version, "capabilities": capabilities,
           "clientInfo": {"name": "t", "version": "0"}})
}

fn answer(version: &str) -> Value {
    json!({"protocolVersion": version, "capabilities": {"tools": {}},
           "serverInfo": {"name": "jobs-host", "version": "0"}})
}

#[test]
fn revision_2025_11_25_task_requests_are_renamed_to_the_methods_that_serve_them() {
    let mut f = initialized(
        true,
        init_params("2025-11-25", json!({})),
        answer("2025-11-25"),
    );
    assert!(f.legacy().is_active());
    for (id, method, params) in [
        (2, "tasks/get", json!({"taskId": "x"})),
        (3, "tasks/result", json!({"taskId": "x"})),
        (4, "tasks/list", json!({})),
        (5, "tasks/cancel", json!({"taskId": "x"})),
        (6, "tools/list", json!({})),
        (
            7,
            "tools/call",
            json!({"name": "bash", "arguments": {}, "task": {"ttl": 1}}),
        ),
    ] {
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let Frame::Rewritten(renamed) = f.judge(&line.to_string()) else {
            panic!("{method} was not renamed")
        };
        let renamed: Value = serde_json::from_str(&renamed).unwrap();
        assert_eq!(renamed["method"], format!("{LEGACY_PREFIX}{method}"));
        assert_eq!(renamed["id"], id);
        assert_eq!(renamed["params"], params);
    }
    // A call without a task stays a call.
    let plain = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
                       "params": {"name": "bash", "arguments": {}}});
    assert_eq!(f.judge(&plain.to_string()), Frame::Message);
}

#[test]
fn other_revisions_and_extension_clients_keep_their_task_requests() {
    let cases = [
        // Another revision.
        (
            true,
            init_params("2025-06-18", json!({})),
            answer("2025-06-18"),
        ),
        // Asked for 2025-11-25, negotiated down.
        (
            true,
            init_params("2025-11-25", json!({})),
            answer("2025-06-18"),
        ),
        // A client of the tasks extension.
        (
            true,
            init_params(
                "2025-11-25",
                json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}),
            ),
            answer("2025-11-25"),
        ),
        // Tasks not offered (`--no-tasks`).
        (
            false,
            init_params("2025-11-25", json!({})),
            answer("2025-11-25"),
        ),
    ];
    for (offered, init, answer) in cases {
        let mut f = initialized(offered, init.clone(), answer);
        assert!(!f.legacy().is_active(), "{init}");
        let line =
            json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"taskId": "x"}});
        assert_eq!(f.judge(&line.to_string()), Frame::Message, "{init}");
    }
}

#[test]
fn a_method_the_request_s_own_revision_removed_is_not_found() {
    let meta = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;
    let mut framer = Framer::default();
    // `initialize` under 2026-07-28's `_meta`: not found, whatever its params
    // (without them it would otherwise be -32602).
    let bare = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{{meta}}}}}"#);
    assert_eq!(
        refused(framer.judge(&bare)),
        json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "initialize"}})
    );
    let whole = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"initialize","params":{{"protocolVersion":"2026-07-28","capabilities":{{}},"clientInfo":{{"name":"t","version":"0"}},{meta}}}}}"#
    );
    assert_eq!(refused(framer.judge(&whole))["error"]["code"], -32601);
    for (id, method) in [(3, "ping"), (4, "logging/setLevel")] {
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{{"level":"debug",{meta}}}}}"#
        );
        assert_eq!(
            refused(framer.judge(&line)),
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": method}})
        );
    }
    // Under a revision that has them, they go on to the service.
    let older = r#"{"jsonrpc":"2.0","id":5,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-06-18"}}}"#;
    assert_eq!(framer.judge(older), Frame::Message);
    assert_eq!(Framer::default().judge(INIT), Frame::Message);
}
