//! Blocker literals. Consumers switch on these strings, so they never change
//! and no refusal invents a new one.

use serde::{Serialize, Serializer};
use std::fmt;

/// Why a heartbeat, an ownership check or a mutation was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum BlockerKind {
    /// The call's arguments would be read differently by the server than by the gate (an
    /// alias of the key it reads, a non-integer number, an undeclared key, a wrong type).
    AmbiguousArguments,
    /// The role may never call this tool: hand the work to the right role.
    RoleNotPermitted,
    /// The call writes, deletes, creates over or renames a protected branch, or writes a
    /// protected path (`[workflow] protected_branches`, `protected_paths`).
    ProtectedBranch,
    /// What the call does breaks an invariant of the forge profile (a forced or scheduled
    /// merge, a retarget, a PR's state changed by a role that may not, a read that writes a
    /// file, an effect the dialect does not know): no rule or approval lifts it.
    InvariantViolated,
    /// A hard runtime diagnostic (`unsupported-env:`, `stale-runtime:`) holds.
    RuntimeReconnectRequired,
    /// No live worker owns the session (missing, expired, unbound).
    SessionAttachmentMissing,
    /// The worker's fencing epoch or expectations no longer match.
    WorkerFenced,
    /// The fleet inventory gate is not satisfied.
    FleetInventoryBlocked,
    /// A review decision without a live review lease on the PR.
    ReviewLeaseRequired,
    /// A lease or a claim names a head that is no longer the PR's head.
    StaleHead,
    /// A merge without a merge lease and an independent approval at the current head.
    ApprovalRequired,
    /// A rule asks an operator about this exact call, and no answer has come yet (the
    /// request's id is in the reasons).
    ApprovalPending,
    /// An operator refused this exact call.
    ApprovalDenied,
    /// Another worker holds a live lease on the PR.
    ReviewLeaseHeld,
    /// The reviewer session holds a review-decision lock on another PR (or already decided
    /// this one at this head).
    ReviewDecisionLocked,
    /// Another author holds the issue lock of an issue the call references.
    IssueLockHeld,
    /// The forge did not report the PR's current head, so the workflow fails closed.
    ForgeUnavailable,
    /// The downstream changed the tool's definition since it was pinned (`[tools] pin = "enforce"`).
    ToolDefinitionChanged,
    /// The call's audit entry could not be made durable in time: a mutation is never
    /// forwarded unaudited.
    AuditUnavailable,
    /// The store file this process opened was deleted or replaced under it: what it would
    /// record (the audit, its leases) no other process reads.
    StoreReplaced,
}

impl BlockerKind {
    /// The stable wire literal.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::AmbiguousArguments => "ambiguous_arguments",
            Self::RoleNotPermitted => "role_not_permitted",
            Self::ProtectedBranch => "protected_branch",
            Self::InvariantViolated => "invariant_violated",
            Self::RuntimeReconnectRequired => "runtime_reconnect_required",
            Self::SessionAttachmentMissing => "session_attachment_missing",
            Self::WorkerFenced => "worker_fenced",
            Self::FleetInventoryBlocked => "fleet_inventory_blocked",
            Self::ReviewLeaseRequired => "review_lease_required",
            Self::StaleHead => "stale_head",
            Self::ApprovalRequired => "approval_required",
            Self::ApprovalPending => "approval_pending",
            Self::ApprovalDenied => "approval_denied",
            Self::ReviewLeaseHeld => "review_lease_held",
            Self::ReviewDecisionLocked => "review_decision_locked",
            Self::IssueLockHeld => "issue_lock_held",
            Self::ForgeUnavailable => "forge_unavailable",
            Self::ToolDefinitionChanged => "tool_definition_changed",
            Self::AuditUnavailable => "audit_unavailable",
            Self::StoreReplaced => "store_replaced",
        }
    }

    /// What it means, for the operator (the reference page is generated from this).
    pub const fn meaning(self) -> &'static str {
        match self {
            Self::AmbiguousArguments => {
                "The call's arguments would be read differently by the server than by the gate: an alias of the \
                 key it reads, a non-integer number, an undeclared key, a wrong type."
            }
            Self::RoleNotPermitted => {
                "The role may never make this call (its `[roles]` policy or a `[[rules]]` entry)."
            }
            Self::ProtectedBranch => {
                "The call writes, deletes, creates over or renames a protected branch, or writes a protected \
                 path (`[workflow] protected_branches`, `protected_paths`)."
            }
            Self::InvariantViolated => {
                "What the call does breaks an invariant of the forge profile — a forced or scheduled merge, a merge \
                 that cannot be pinned, a retarget, a PR's state changed by a role that may not, a read that writes \
                 a file, an effect the dialect does not know. No rule and no approval lifts it; only `[invariants] \
                 lift` by name."
            }
            Self::RuntimeReconnectRequired => {
                "A hard runtime diagnostic holds: an unsupported environment key, or a stale runtime (the \
                 checkout's revision moved under the running server)."
            }
            Self::SessionAttachmentMissing => "No live worker owns the session (missing, expired, unbound).",
            Self::WorkerFenced => {
                "The worker's fencing epoch or expectations no longer match: a newer generation owns it."
            }
            Self::FleetInventoryBlocked => {
                "The fleet inventory is not satisfied: a member missing, a duplicate, an unexpected server, \
                 mixed cohorts or revisions, or a row the host's processes do not corroborate."
            }
            Self::ReviewLeaseRequired => "A review decision without a live review lease on the PR.",
            Self::StaleHead => "A lease or a claim names a head that is no longer the PR's head.",
            Self::ApprovalRequired => {
                "A merge without a merge lease and an independent approval at the PR's current head."
            }
            Self::ApprovalPending => {
                "A `[[rules]]` entry with `decision = \"ask\"` matched this exact call and no operator has answered yet."
            }
            Self::ApprovalDenied => "An operator refused this exact call.",
            Self::ReviewLeaseHeld => "Another worker holds a live lease on the PR.",
            Self::ReviewDecisionLocked => {
                "The reviewer session holds a review-decision lock on another PR, or already decided this one at \
                 this head."
            }
            Self::IssueLockHeld => "Another author holds the issue lock of an issue the call references.",
            Self::ForgeUnavailable => {
                "The forge could not be read for what the call would do (its repository, its PR's head and base, \
                 the open PRs a branch heads) — where the answer depends on it: the invariants, or a rule that \
                 names what a call does — or for the PR's current head: the gate fails closed."
            }
            Self::ToolDefinitionChanged => {
                "The downstream changed the tool's definition since it was pinned (`[tools] pin = \"enforce\"`)."
            }
            Self::AuditUnavailable => {
                "The call's audit entry could not be made durable in time: a mutation is never forwarded \
                 unaudited."
            }
            Self::StoreReplaced => "The store file this process opened was deleted or replaced under it.",
        }
    }

    /// What the operator (or the agent) does about it, in general: the one text a refusal
    /// of this kind carries unless the case at hand names more (the duplicate's pid, the
    /// approval request's id).
    pub const fn operator_action(self) -> &'static str {
        match self {
            Self::AmbiguousArguments => AMBIGUOUS_ACTION,
            Self::RoleNotPermitted => "hand this work to a role whose policy allows the call",
            Self::ProtectedBranch => PROTECTED_ACTION,
            Self::InvariantViolated => INVARIANT_ACTION,
            Self::RuntimeReconnectRequired => {
                "unset the unsupported key or bring the checkout back to the server's revision, then restart the \
                 server (its client reconnects it)"
            }
            Self::SessionAttachmentMissing => ATTACH_ACTION,
            Self::WorkerFenced => FENCED_ACTION,
            Self::FleetInventoryBlocked => {
                "start the missing member or stop the extra process the reasons name (fleetgate inventory shows the \
                 fleet)"
            }
            Self::ReviewLeaseRequired => {
                "claim a review lease on the PR at its current head (<prefix>claim_pr_lease) before deciding"
            }
            Self::StaleHead => {
                "the PR has a new head: read it, claim a lease at it and review that head; earlier decisions do not \
                 carry over"
            }
            Self::ApprovalRequired => {
                "get an independent approval at the PR's current head and hold a merge lease at that head, then merge"
            }
            Self::ApprovalPending => {
                "an operator answers: fleetgate approvals list, then fleetgate approvals approve ID --reason R (or \
                 deny); the agent then retries the identical call"
            }
            Self::ApprovalDenied => "change the call, or ask the operator again: a new call is a new request",
            Self::ReviewLeaseHeld => {
                "wait for the holder to finish or its lease to expire, or have an operator release it (fleetgate pr \
                 release)"
            }
            Self::ReviewDecisionLocked => LOCKED_ACTION,
            Self::IssueLockHeld => {
                "work another issue, or wait for the holder's issue lock to be released or expire (fleetgate pr \
                 release)"
            }
            Self::ForgeUnavailable => {
                "the forge could not be read for what the call does or the PR's head; check the downstream server, \
                 the repository and the PR number, then retry"
            }
            Self::ToolDefinitionChanged => TOOL_CHANGED_ACTION,
            Self::AuditUnavailable => {
                "make the store reachable and writable again (a full disk, a filesystem gone read-only, a lock held on \
                 it, PostgreSQL down), then retry"
            }
            Self::StoreReplaced => STORE_REPLACED_ACTION,
        }
    }
}

/// The operator action of `ambiguous_arguments`.
pub const AMBIGUOUS_ACTION: &str = "send the call again with each argument once, under the key the tool's schema \
     declares, as the type it declares (whole numbers as integers, strings as strings); the gate forwards only \
     what it judged";

/// The operator action of `protected_branch`.
pub const PROTECTED_ACTION: &str = "change protected branches only by merging an approved pull request: push to a \
     feature branch and open a PR; workflow files are changed by an operator, outside the fleet (or drop the \
     pattern from [workflow] protected_branches / protected_paths)";

/// The operator action of a call that breaks an invariant.
pub const INVARIANT_ACTION: &str = "no role may make this call, whatever the rules or an approval say: change the \
     call (merge an approved PR at its pinned head; leave PR state to the controller and the reconciler; read \
     without writing files); an operator who truly wants the invariant lifted names it in [invariants] lift — see \
     the book's policy chapter for what each lift gives up";

/// The operator action of `worker_fenced`.
pub const FENCED_ACTION: &str =
    "stop this server: a newer generation owns its worker; start a fresh session rather than renewing the old one";

/// The operator action of `session_attachment_missing`.
pub const ATTACH_ACTION: &str =
    "attach a live worker to this session (fleetgate worker register) and keep its heartbeat running";

/// The operator action of `tool_definition_changed`.
pub const TOOL_CHANGED_ACTION: &str = "review the downstream's changed tool definition, then accept it (fleetgate tools accept TOOL) or pin the server's version";

/// The operator action of `store_replaced`.
pub const STORE_REPLACED_ACTION: &str = "the store file this server opened was deleted or replaced at its path: \
     put that file back at the path (mv it back), or restart this server so it opens the store now at the path; \
     mutations stay refused until one is done";

/// The operator action of `review_decision_locked`.
pub const LOCKED_ACTION: &str = "finish the locked PR first: its lock ends when that PR is merged or closed (moot), \
     or carries over when this session re-reviews that same PR at a new head; for another PR use a new reviewer \
     session (an operator may release the lock of a PR closed outside the fleet: fleetgate pr release-lock)";

/// The operator action of `approval_pending` when no request could be read or recorded
/// (the store failed): there is no request id to answer.
pub const APPROVAL_UNAVAILABLE_ACTION: &str = "no approval request could be read or recorded: check the store \
     (fleetgate runtime context, a lock held on it, a full disk), then retry the call";

/// `worker_fenced`, the seed's `BLOCKER_FENCED`.
pub const BLOCKER_FENCED: BlockerKind = BlockerKind::WorkerFenced;
/// `session_attachment_missing`, the seed's `BLOCKER_NO_ATTACHMENT`.
pub const BLOCKER_NO_ATTACHMENT: BlockerKind = BlockerKind::SessionAttachmentMissing;

impl BlockerKind {
    /// Every blocker, in the gate's precedence order.
    /// `forge_unavailable` stands where a call's effect cannot be established (after the
    /// invariants, and after a role the rules refuse whatever the call does: only an answer
    /// that depends on what the call does needs the forge); the PR workflow's own read
    /// failing refuses with it too, after the fleet conditions.
    pub const ALL: [BlockerKind; 20] = [
        Self::AmbiguousArguments,
        Self::ProtectedBranch,
        Self::InvariantViolated,
        Self::RoleNotPermitted,
        Self::ForgeUnavailable,
        Self::ToolDefinitionChanged,
        Self::StoreReplaced,
        Self::RuntimeReconnectRequired,
        Self::SessionAttachmentMissing,
        Self::WorkerFenced,
        Self::FleetInventoryBlocked,
        Self::ReviewLeaseHeld,
        Self::IssueLockHeld,
        Self::ReviewLeaseRequired,
        Self::ReviewDecisionLocked,
        Self::StaleHead,
        Self::ApprovalRequired,
        Self::ApprovalDenied,
        Self::ApprovalPending,
        Self::AuditUnavailable,
    ];

    /// The blocker whose literal is `text`.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == text)
    }
}

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

    /// Issue 56: the blocker table imports nothing from the modules that use it (it was
    /// where core's import circle started): every operator text lives here, with its blocker.
    #[test]
    fn the_blocker_table_is_a_leaf() {
        let source = include_str!("blocker.rs");
        let product = source.split("#[cfg(test)]").next().unwrap_or_default();
        for line in product.lines().filter(|l| !l.trim_start().starts_with("//")) {
            assert!(!line.contains("crate::") && !line.contains("super::"), "blocker.rs reaches out: {line}");
        }
    }

    /// One text per blocker: the named texts are the blockers' own, wherever they are used.
    #[test]
    fn each_named_text_is_its_blocker_s() {
        for (kind, text) in [
            (BlockerKind::AmbiguousArguments, AMBIGUOUS_ACTION),
            (BlockerKind::ProtectedBranch, PROTECTED_ACTION),
            (BlockerKind::InvariantViolated, INVARIANT_ACTION),
            (BlockerKind::SessionAttachmentMissing, ATTACH_ACTION),
            (BlockerKind::WorkerFenced, FENCED_ACTION),
            (BlockerKind::ReviewDecisionLocked, LOCKED_ACTION),
            (BlockerKind::ToolDefinitionChanged, TOOL_CHANGED_ACTION),
            (BlockerKind::StoreReplaced, STORE_REPLACED_ACTION),
        ] {
            assert_eq!(kind.operator_action(), text, "{kind}");
        }
    }

    #[test]
    fn literals_are_the_contract() {
        assert_eq!(BLOCKER_FENCED.as_str(), "worker_fenced");
        assert_eq!(BLOCKER_NO_ATTACHMENT.as_str(), "session_attachment_missing");
        assert_eq!(BlockerKind::RoleNotPermitted.to_string(), "role_not_permitted");
        assert_eq!(BlockerKind::RuntimeReconnectRequired.as_str(), "runtime_reconnect_required");
        assert_eq!(BlockerKind::FleetInventoryBlocked.as_str(), "fleet_inventory_blocked");
        assert_eq!(BlockerKind::ReviewLeaseRequired.as_str(), "review_lease_required");
        assert_eq!(BlockerKind::StaleHead.as_str(), "stale_head");
        assert_eq!(BlockerKind::ApprovalRequired.as_str(), "approval_required");
        assert_eq!(BlockerKind::ReviewLeaseHeld.as_str(), "review_lease_held");
        assert_eq!(BlockerKind::ForgeUnavailable.as_str(), "forge_unavailable");
        assert_eq!(BlockerKind::ToolDefinitionChanged.as_str(), "tool_definition_changed");
        assert_eq!(BlockerKind::AuditUnavailable.as_str(), "audit_unavailable");
        assert_eq!(BlockerKind::StoreReplaced.as_str(), "store_replaced");
        assert_eq!(BlockerKind::AmbiguousArguments.as_str(), "ambiguous_arguments");
        assert_eq!(BlockerKind::ProtectedBranch.as_str(), "protected_branch");
        assert_eq!(BlockerKind::InvariantViolated.as_str(), "invariant_violated");
        assert_eq!(BlockerKind::ReviewDecisionLocked.as_str(), "review_decision_locked");
        assert_eq!(BlockerKind::IssueLockHeld.as_str(), "issue_lock_held");
        for kind in BlockerKind::ALL {
            assert_eq!(BlockerKind::parse(kind.as_str()), Some(kind));
        }
    }
}
