//! Logging notifications: how a notice is pushed besides the next result,
//! under the session's level (`logging/setLevel`) or, from revision
//! 2026-07-28, while a request that asked for a level in its `_meta` runs.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rmcp::model::LoggingLevel;
use rmcp::service::RoleServer;
use serde_json::{Value, json};

use host::owner::{Lane, NoticeMessage};

use super::revision::{Logging, Revision};

/// The level at or above which logging notifications go out: until the
/// client sets one, every notice does (the revisions let the server choose).
/// Held as a rank, 0 for `debug` up to 7 for `emergency`.
#[derive(Debug, Default)]
pub(super) struct LogThreshold(std::sync::atomic::AtomicU8);

impl LogThreshold {
    pub(super) fn rank(level: LoggingLevel) -> u8 {
        match level {
            LoggingLevel::Debug => 0,
            LoggingLevel::Info => 1,
            LoggingLevel::Notice => 2,
            LoggingLevel::Warning => 3,
            LoggingLevel::Error => 4,
            LoggingLevel::Critical => 5,
            LoggingLevel::Alert => 6,
            LoggingLevel::Emergency => 7,
        }
    }

    pub(super) fn set(&self, level: LoggingLevel) {
        self.0
            .store(Self::rank(level), std::sync::atomic::Ordering::Relaxed);
    }

    pub(super) fn allows(&self, level: LoggingLevel) -> bool {
        Self::rank(level) >= self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Whether this session's logging goes out per request: a request named a
/// revision without a handshake, or `initialize` negotiated a revision
/// whose logging is per request.
pub(super) fn per_request(peer: &rmcp::Peer<RoleServer>, handshake_free: &AtomicBool) -> bool {
    handshake_free.load(Ordering::Relaxed)
        || peer
            .peer_info()
            .and_then(|info| Revision::of(info.protocol_version.as_str()))
            .is_some_and(|r| r.logging() == Logging::PerRequest)
}

/// The requests in flight that asked for logging (revision 2026-07-28), each
/// with its level's rank: a notice that arrives while one that takes `notice`
/// runs is pushed, as that revision allows.
#[derive(Debug, Default)]
pub(super) struct OptIns {
    open: std::sync::Mutex<Vec<(u64, u8)>>,
    next: std::sync::atomic::AtomicU64,
}

impl OptIns {
    /// Registers a request that asked for `level` until the guard drops.
    pub(super) fn enter(self: &Arc<Self>, level: LoggingLevel) -> OptIn {
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock().push((key, LogThreshold::rank(level)));
        OptIn {
            owner: self.clone(),
            key,
        }
    }

    pub(super) fn allows(&self, level: LoggingLevel) -> bool {
        let rank = LogThreshold::rank(level);
        self.lock().iter().any(|(_, asked)| *asked <= rank)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(u64, u8)>> {
        host::sync::lock(&self.open)
    }
}

/// One request's opt-in, for as long as it is handled.
pub(super) struct OptIn {
    owner: Arc<OptIns>,
    key: u64,
}

impl Drop for OptIn {
    fn drop(&mut self) {
        self.owner.lock().retain(|(key, _)| *key != self.key);
    }
}

/// A notice as the logging notification's data.
pub fn notice_data(lane: Lane, notice: &NoticeMessage) -> Value {
    json!({
        "lane": match lane { Lane::Inject => "inject", Lane::Followup => "followup" },
        "text": notice.text,
        "summary": notice.summary,
        "source": {"kind": "plugin", "plugin": notice.plugin, "form": notice.form},
    })
}
