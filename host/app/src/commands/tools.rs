//! `jobs-host tools`: the tool definitions, UI cards and prompt section as
//! JSON.

use anyhow::Result;
use serde_json::json;

use super::Ended;
use crate::wiring::{Host, open_session};

pub(crate) async fn tools(host: Host) -> Result<Ended> {
    let (session, _announced) = open_session(&host, "tools");
    let mut tools = Vec::new();
    for def in session.tool_definitions().await? {
        let card = host
            .mount
            .ui_card(&def.name, CARD_ARGS)
            .await?
            .map(|c| json!({"title": c.title, "kind": c.kind, "rawInput": c.raw_input}));
        tools.push(json!({
            "name": def.name,
            "description": def.description,
            "inputSchema": serde_json::from_str::<serde_json::Value>(&def.input_schema)?,
            "outputSchema": def
                .output_schema
                .as_deref()
                .map(serde_json::from_str::<serde_json::Value>)
                .transpose()?,
            "card": card,
        }));
    }
    let prompt = host.mount.prompt_section().await?;
    let profile = host.mount.config().profile.as_str();
    let out = json!({
        "profile": profile,
        "tools": tools,
        "promptSection": prompt.map(|p| json!({"name": p.name, "order": p.order, "text": p.text})),
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    session.close().await;
    Ok(Ended::Done)
}

/// Sample arguments for the cards `tools` prints: each profile reads only its
/// own id key (`job_id`, `task_id` or `id`).
const CARD_ARGS: &str = r#"{"job_id":"<job_id>","task_id":"<task_id>","id":"<id>"}"#;
