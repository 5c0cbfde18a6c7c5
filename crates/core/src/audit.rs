//! Audit entries: every decision the capability resolver makes for a real call.

use crate::time::Timestamp;
use serde::{Deserialize, Serialize};

/// One recorded decision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// Store-assigned sequence number; `None` before it is appended.
    pub id: Option<i64>,
    /// When the decision was made.
    pub at: Timestamp,
    /// Profile of the deciding server.
    pub profile: String,
    /// The worker the call was made for, when attached.
    pub worker_identity: Option<String>,
    /// The tool called.
    pub tool: String,
    /// Allowed or refused.
    pub allowed: bool,
    /// The blocker literal, when refused.
    pub blocker_kind: Option<String>,
    /// Every reason given.
    pub reasons: Vec<String>,
    /// The HTTP principal the call came from (a tokens-file client name), when one.
    #[serde(default)]
    pub principal: Option<String>,
}
