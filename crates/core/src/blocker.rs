//! Blocker literals. Consumers switch on these strings, so they never change
//! and no refusal invents a new one.

use serde::{Serialize, Serializer};
use std::fmt;

/// Why a heartbeat, an ownership check or a mutation was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum BlockerKind {
    /// The role may never call this tool: hand the work to the right role.
    RoleNotPermitted,
    /// A hard runtime diagnostic (`unsupported-env:`, `stale-runtime:`) holds.
    RuntimeReconnectRequired,
    /// No live worker owns the session (missing, expired, unbound).
    SessionAttachmentMissing,
    /// The worker's fencing epoch or expectations no longer match.
    WorkerFenced,
    /// The fleet inventory gate is not satisfied.
    FleetInventoryBlocked,
}

impl BlockerKind {
    /// The stable wire literal.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::RoleNotPermitted => "role_not_permitted",
            Self::RuntimeReconnectRequired => "runtime_reconnect_required",
            Self::SessionAttachmentMissing => "session_attachment_missing",
            Self::WorkerFenced => "worker_fenced",
            Self::FleetInventoryBlocked => "fleet_inventory_blocked",
        }
    }
}

/// `worker_fenced`, the seed's `BLOCKER_FENCED`.
pub const BLOCKER_FENCED: BlockerKind = BlockerKind::WorkerFenced;
/// `session_attachment_missing`, the seed's `BLOCKER_NO_ATTACHMENT`.
pub const BLOCKER_NO_ATTACHMENT: BlockerKind = BlockerKind::SessionAttachmentMissing;

impl fmt::Display for BlockerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for BlockerKind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_are_the_contract() {
        assert_eq!(BLOCKER_FENCED.as_str(), "worker_fenced");
        assert_eq!(BLOCKER_NO_ATTACHMENT.as_str(), "session_attachment_missing");
        assert_eq!(BlockerKind::RoleNotPermitted.to_string(), "role_not_permitted");
        assert_eq!(BlockerKind::RuntimeReconnectRequired.as_str(), "runtime_reconnect_required");
        assert_eq!(BlockerKind::FleetInventoryBlocked.as_str(), "fleet_inventory_blocked");
    }
}
