//! MCP's protocol revisions as one closed type, after Zed's versioned
//! extension API: each request is handled under one [`Revision`], decided
//! once (from the request's own `_meta`, else from what `initialize`
//! negotiated), and every behaviour that differs between revisions is a
//! method that matches on all of them. A new revision fails to compile
//! until each is decided for it. No revision is compared as a date string.
//!
//! Each revision's quirks live in a file of its own: `v2025_11_25` (its
//! core tasks, renamed on their way to the service) and `v2026_07_28` (no
//! handshake: the revision, the client's capabilities and the logging
//! level travel in each request's `_meta`).

#[cfg(test)]
use rmcp::model::ProtocolVersion;
use rmcp::service::{RequestContext, RoleServer};
use serde_json::Value;

use super::tasks::Generation;

pub(super) mod v2025_11_25;
pub(super) mod v2026_07_28;

/// The `_meta` key that names a request's revision (revision 2026-07-28 on).
pub(super) const PROTOCOL_VERSION_META: &str = "io.modelcontextprotocol/protocolVersion";

/// A protocol revision this server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Revision {
    /// 2024-11-05.
    V2024_11_05,
    /// 2025-03-26.
    V2025_03_26,
    /// 2025-06-18.
    V2025_06_18,
    /// 2025-11-25: core tasks (`tasks/*`, `params.task`).
    V2025_11_25,
    /// 2026-07-28: no handshake; per-request `_meta`; logging per request.
    V2026_07_28,
}

/// How a revision's logging notifications reach the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Logging {
    /// Pushed at any time, at the level `logging/setLevel` chose.
    Session,
    /// Only while a request that asked for a level in its `_meta` is handled.
    PerRequest,
}

impl Revision {
    /// The revision `version` names, if this server speaks it.
    pub(super) fn of(version: &str) -> Option<Revision> {
        Some(match version {
            "2024-11-05" => Revision::V2024_11_05,
            "2025-03-26" => Revision::V2025_03_26,
            "2025-06-18" => Revision::V2025_06_18,
            "2025-11-25" => Revision::V2025_11_25,
            "2026-07-28" => Revision::V2026_07_28,
            _ => return None,
        })
    }

    /// The revision a request's params name in their `_meta`, if any.
    pub(super) fn of_params(params: Option<&Value>) -> Option<Revision> {
        params
            .and_then(|p| p.get("_meta"))
            .and_then(|meta| meta.get(PROTOCOL_VERSION_META))
            .and_then(Value::as_str)
            .and_then(Revision::of)
    }

    /// The revision a request is handled under: the one its `_meta` names,
    /// else the one `initialize` negotiated.
    pub(super) fn of_request(context: &RequestContext<RoleServer>) -> Option<Revision> {
        context
            .meta
            .protocol_version()
            .and_then(|v| Revision::of(v.as_str()))
            .or_else(|| Revision::negotiated(context))
    }

    /// The revision `initialize` negotiated on this connection, if any.
    pub(super) fn negotiated(context: &RequestContext<RoleServer>) -> Option<Revision> {
        context
            .peer
            .peer_info()
            .and_then(|info| Revision::of(info.protocol_version.as_str()))
    }

    /// rmcp's name for it.
    #[cfg(test)]
    pub(super) fn version(self) -> ProtocolVersion {
        match self {
            Revision::V2024_11_05 => ProtocolVersion::V_2024_11_05,
            Revision::V2025_03_26 => ProtocolVersion::V_2025_03_26,
            Revision::V2025_06_18 => ProtocolVersion::V_2025_06_18,
            Revision::V2025_11_25 => ProtocolVersion::V_2025_11_25,
            Revision::V2026_07_28 => ProtocolVersion::V_2026_07_28,
        }
    }

    /// Whether a session of this revision begins with `initialize` (and has
    /// the method at all).
    pub(super) fn has_handshake(self) -> bool {
        match self {
            Revision::V2024_11_05
            | Revision::V2025_03_26
            | Revision::V2025_06_18
            | Revision::V2025_11_25 => true,
            Revision::V2026_07_28 => false,
        }
    }

    /// Whether `ping` is a method of this revision.
    pub(super) fn has_ping(self) -> bool {
        match self {
            Revision::V2024_11_05
            | Revision::V2025_03_26
            | Revision::V2025_06_18
            | Revision::V2025_11_25 => true,
            Revision::V2026_07_28 => false,
        }
    }

    /// Whether `logging/setLevel` is a method of this revision.
    pub(super) fn has_set_level(self) -> bool {
        match self {
            Revision::V2024_11_05
            | Revision::V2025_03_26
            | Revision::V2025_06_18
            | Revision::V2025_11_25 => true,
            Revision::V2026_07_28 => false,
        }
    }

    /// How this revision's logging notifications go out.
    pub(super) fn logging(self) -> Logging {
        match self {
            Revision::V2024_11_05
            | Revision::V2025_03_26
            | Revision::V2025_06_18
            | Revision::V2025_11_25 => Logging::Session,
            Revision::V2026_07_28 => Logging::PerRequest,
        }
    }

    /// The tasks a client of this revision takes without declaring the
    /// tasks extension (which any revision's client may declare).
    pub(super) fn tasks(self) -> Option<Generation> {
        match self {
            Revision::V2024_11_05 | Revision::V2025_03_26 | Revision::V2025_06_18 => None,
            Revision::V2025_11_25 => Some(Generation::Legacy),
            Revision::V2026_07_28 => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_revision_rmcp_knows_is_one_of_ours_and_back() {
        for version in ProtocolVersion::KNOWN_VERSIONS {
            let revision = Revision::of(version.as_str())
                .unwrap_or_else(|| panic!("no revision for {version}"));
            assert_eq!(revision.version(), *version);
            // rmcp's own view of the handshake agrees.
            assert_eq!(
                revision.has_handshake(),
                version.has_initialize(),
                "{version}"
            );
        }
        assert_eq!(Revision::of("2026-07-29"), None);
        assert_eq!(Revision::of(""), None);
    }

    #[test]
    fn the_revisions_differ_where_the_protocol_does() {
        let old = Revision::V2025_06_18;
        let new = Revision::V2026_07_28;
        assert!(old.has_ping() && !new.has_ping());
        assert!(old.has_set_level() && !new.has_set_level());
        assert_eq!(old.logging(), Logging::Session);
        assert_eq!(new.logging(), Logging::PerRequest);
        assert_eq!(Revision::V2025_11_25.tasks(), Some(Generation::Legacy));
        assert_eq!(new.tasks(), None);
    }
}
