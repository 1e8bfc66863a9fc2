//! Claude Code's channel: a notice that would wake an idle agent goes out
//! as `notifications/claude/channel` to a client that takes it, and the
//! calls in flight tell the session when its agent is quiet.

use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use host::owner::NoticeMessage;

use super::JobsServer;

/// The experimental capability and the notification of Claude Code's channel.
pub(super) const CLAUDE_CHANNEL: &str = "claude/channel";
pub(super) const CLAUDE_CHANNEL_NOTIFICATION: &str = "notifications/claude/channel";

/// Whether the client takes Claude Code's channel: Claude Code itself (its
/// `clientInfo.name`), or a client that declares the capability.
pub(super) fn takes_channel(info: &rmcp::model::InitializeRequestParams) -> bool {
    info.client_info.name.starts_with("claude-code")
        || info
            .capabilities
            .experimental
            .as_ref()
            .is_some_and(|e| e.contains_key(CLAUDE_CHANNEL))
}

/// A notice as Claude Code's channel carries it: the text, and string meta
/// values (they become attributes of the `<channel>` block the model reads).
pub(super) fn channel_params(notice: &NoticeMessage) -> Value {
    let mut meta = json!({"plugin": notice.plugin});
    if let Some(summary) = &notice.summary {
        meta["summary"] = Value::String(summary.clone());
    }
    json!({"content": notice.text, "meta": meta})
}

/// Counts a tool call in flight; the last one to end tells the session its
/// agent is quiet (only when the channel is taken: otherwise the agent stays
/// in a turn, as without a channel).
pub(super) struct Busy<'a> {
    server: &'a JobsServer,
}

impl<'a> Busy<'a> {
    pub(super) fn enter(server: &'a JobsServer) -> Busy<'a> {
        server.in_flight.fetch_add(1, Ordering::AcqRel);
        if server.channel_taken.load(Ordering::Acquire) {
            server.session.set_active(true);
        }
        Busy { server }
    }
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        let left = self.server.in_flight.fetch_sub(1, Ordering::AcqRel) - 1;
        if left == 0 && self.server.channel_taken.load(Ordering::Acquire) {
            self.server.session.set_active(false);
        }
    }
}
