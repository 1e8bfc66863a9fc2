//! Revision 2026-07-28's quirks: no handshake. A session begins with the
//! first request that names a known revision in its `_meta` (with the
//! client's capabilities, from this revision on); the methods it removed
//! (`initialize`, `ping`, `logging/setLevel`) are not found when a request
//! names it; and a request asks for the logging notifications sent while it
//! runs with a level in its `_meta`.

use std::sync::atomic::Ordering;

use rmcp::service::{RequestContext, RoleServer};
use serde_json::Value;

use super::Revision;
use crate::mcp::JobsServer;

/// The `_meta` key with which a request of revision 2026-07-28 asks for the
/// logging notifications sent while it is handled.
pub(in crate::mcp) const LOG_LEVEL_META: &str = "io.modelcontextprotocol/logLevel";

/// Whether a request's params carry what starts a session without
/// `initialize` (revision 2026-07-28): a known protocol revision in `_meta`,
/// with the client's capabilities from that revision on.
pub(in crate::mcp) fn names_a_revision(params: Option<&Value>) -> bool {
    let Some(meta) = params.and_then(|p| p.get("_meta")) else {
        return false;
    };
    let Some(revision) = Revision::of_params(params) else {
        return false;
    };
    revision.has_handshake()
        || meta
            .get("io.modelcontextprotocol/clientCapabilities")
            .is_some_and(Value::is_object)
}

/// Whether `method` is one that the revision a request's params name no
/// longer has: answered `-32601` (method not found), as a method that never
/// existed is.
pub(in crate::mcp) fn removed_method(method: &str, params: Option<&Value>) -> bool {
    let Some(revision) = Revision::of_params(params) else {
        return false;
    };
    match method {
        "initialize" => !revision.has_handshake(),
        "ping" => !revision.has_ping(),
        "logging/setLevel" => !revision.has_set_level(),
        _ => false,
    }
}

impl JobsServer {
    /// Remembers a request that names revision 2026-07-28 or later itself:
    /// the session then has no handshake, and no pushed logging.
    pub(in crate::mcp) fn note_revision(&self, context: &RequestContext<RoleServer>) {
        if context
            .meta
            .protocol_version()
            .and_then(|v| Revision::of(v.as_str()))
            .is_some_and(|r| !r.has_handshake())
        {
            self.handshake_free.store(true, Ordering::Relaxed);
        }
    }
}
