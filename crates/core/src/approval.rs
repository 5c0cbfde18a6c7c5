//! Operator approval of one exact call (`[[rules]] decision = "ask"`): the request the gate
//! makes for a call a rule says to ask about, the operator's answer, and the single use an
//! approval allows — the identical canonical call (same worker, tool and arguments) within
//! `[approvals] ttl_seconds` of the answer, once. Pure: ids, digests and `now` come in.

use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};
use std::fmt;

/// Where an approval request stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalState {
    /// Waiting for an operator.
    Pending,
    /// Approved: the identical call may pass once, within the TTL of the answer.
    Approved,
    /// Denied.
    Denied,
    /// Approved, and the call it covers has passed: it covers nothing more.
    Used,
    /// The caller went away while it waited.
    Withdrawn,
}

impl ApprovalState {
    /// The literal (`pending`, `approved`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Denied => "denied",
            Self::Used => "used",
            Self::Withdrawn => "withdrawn",
        }
    }

    /// The state a literal names.
    pub fn parse(text: &str) -> Option<Self> {
        [Self::Pending, Self::Approved, Self::Denied, Self::Used, Self::Withdrawn]
            .into_iter()
            .find(|s| s.as_str() == text)
    }
}

impl fmt::Display for ApprovalState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One call waiting for (or answered by) an operator.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// `apr-<hex>`.
    pub id: String,
    /// When the gate asked.
    pub requested_at: Timestamp,
    /// The deciding server's profile.
    pub profile: String,
    /// The caller's role.
    pub role: String,
    /// The worker the call was made for.
    pub worker: Option<String>,
    /// The HTTP principal, when one.
    pub principal: Option<String>,
    /// The tool.
    pub tool: String,
    /// The canonical arguments, exactly as they would be forwarded.
    pub arguments: Option<Map<String, Value>>,
    /// [`call_digest`] of the worker, the tool and the arguments: what an approval covers.
    pub digest: String,
    /// Why the gate asks (the rule that says so).
    pub why: String,
    /// Where it stands.
    pub state: ApprovalState,
    /// Who answered (an OS user, or a dashboard principal).
    pub answered_by: Option<String>,
    /// When.
    pub answered_at: Option<Timestamp>,
    /// The answer's reason, when given.
    pub answer_reason: Option<String>,
    /// When the call it covers passed.
    pub used_at: Option<Timestamp>,
}

/// The digest an approval covers: the worker, the tool and the canonical arguments (as
/// JSON). A call with any other arguments — a key added, a value changed — is another call.
pub fn call_digest(worker: Option<&str>, tool: &str, arguments: Option<&Map<String, Value>>) -> String {
    let call = serde_json::json!({ "worker": worker, "tool": tool, "arguments": arguments });
    let hex: String = Sha256::digest(call.to_string().as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// The digest an approval to override the refusal `kind` of the call `call` (its
/// [`call_digest`]) covers: an override is asked and answered for one blocker of one exact
/// call, and replaces that blocker only.
pub fn override_digest(call: &str, kind: crate::blocker::BlockerKind) -> String {
    format!("{call}+override:{kind}")
}

/// The operator's answers on record for the call `digest` and its overrides, from the
/// requests the store holds that still stand (pending, or answered within the TTL and not
/// used): a denial stands over an approval (any denial denies), an approval over a request
/// still waiting.
pub fn on_record(
    requests: &[ApprovalRequest],
    digest: &str,
    overridable: &[crate::blocker::BlockerKind],
    pending_of_worker: usize,
) -> crate::capability::Approvals {
    use crate::capability::Standing;
    let standing = |d: &str| {
        let of: Vec<&ApprovalRequest> = requests.iter().filter(|r| r.digest == d).collect();
        let by = |r: &ApprovalRequest| {
            let who = r.answered_by.clone().unwrap_or_else(|| "an operator".into());
            match &r.answer_reason {
                Some(reason) => format!("{who} ({reason})"),
                None => who,
            }
        };
        let latest = |state: ApprovalState| of.iter().rev().find(|r| r.state == state);
        if let Some(r) = latest(ApprovalState::Denied) {
            return Some(Standing::Denied { id: r.id.clone(), by: by(r) });
        }
        if let Some(r) = of.iter().find(|r| r.state == ApprovalState::Approved) {
            return Some(Standing::Approved { id: r.id.clone(), by: by(r) });
        }
        latest(ApprovalState::Pending).map(|r| Standing::Pending { id: r.id.clone() })
    };
    crate::capability::Approvals {
        call: standing(digest),
        overrides: overridable.iter().filter_map(|k| Some((*k, standing(&override_digest(digest, *k))?))).collect(),
        pending_of_worker,
        unavailable: None,
    }
}

/// A request id from `nonce` (the shell's entropy).
pub fn request_id(nonce: u128) -> String {
    format!("apr-{:016x}", nonce as u64)
}

/// Refusals no operator approval overrides, whatever `[approvals] may_override` says: a
/// fenced worker, arguments the server would read otherwise, an invariant (a protected
/// branch or path, and every other), a forge that cannot be read (what the call would do,
/// or the head a merge is pinned to, is unknown), an unaudited mutation, a replaced store —
/// and the approval blockers themselves.
pub const NEVER_OVERRIDDEN: [crate::blocker::BlockerKind; 9] = [
    crate::blocker::BlockerKind::WorkerFenced,
    crate::blocker::BlockerKind::AmbiguousArguments,
    crate::blocker::BlockerKind::ProtectedBranch,
    crate::blocker::BlockerKind::InvariantViolated,
    crate::blocker::BlockerKind::ForgeUnavailable,
    crate::blocker::BlockerKind::AuditUnavailable,
    crate::blocker::BlockerKind::StoreReplaced,
    crate::blocker::BlockerKind::ApprovalPending,
    crate::blocker::BlockerKind::ApprovalDenied,
];

/// What an operator does about a call that waits: the commands, naming the request.
pub fn approval_action(id: &str) -> String {
    format!(
        "an operator approves this exact call with `fleetgate approvals approve {id}` (or refuses it with \
         `fleetgate approvals deny {id}`); once approved, the identical call passes once"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_approval_covers_its_worker_tool_and_exact_arguments_only() {
        let args = json!({ "method": "merge", "index": 3 }).as_object().cloned();
        let digest = call_digest(Some("w1"), "pull_request_write", args.as_ref());
        assert_eq!(digest, call_digest(Some("w1"), "pull_request_write", args.as_ref()), "deterministic");
        let other = json!({ "method": "merge", "index": 4 }).as_object().cloned();
        assert_ne!(digest, call_digest(Some("w1"), "pull_request_write", other.as_ref()), "another value");
        assert_ne!(digest, call_digest(Some("w2"), "pull_request_write", args.as_ref()), "another worker");
        assert_ne!(digest, call_digest(Some("w1"), "pull_request_read", args.as_ref()), "another tool");
        let added = json!({ "method": "merge", "index": 3, "delete_branch_after_merge": true }).as_object().cloned();
        assert_ne!(
            digest,
            call_digest(Some("w1"), "pull_request_write", added.as_ref()),
            "a key added is another call"
        );
    }

    #[test]
    fn states_read_back_from_their_literals() {
        for s in [
            ApprovalState::Pending,
            ApprovalState::Approved,
            ApprovalState::Denied,
            ApprovalState::Used,
            ApprovalState::Withdrawn,
        ] {
            assert_eq!(ApprovalState::parse(s.as_str()), Some(s));
        }
        assert_eq!(ApprovalState::parse("maybe"), None);
    }
}
