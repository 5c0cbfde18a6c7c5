//! The capability resolver — the mutation gate. One pure function
//! that allows a call or names the exact blocker and the operator action.
//!
//! Precedence, first that holds wins ([`BlockerKind::ALL`]'s order): ambiguous arguments,
//! role policy, protected branches and paths, a changed tool definition, a replaced store,
//! hard runtime diagnostics, session attachment, fencing, fleet inventory, then the PR
//! workflow's refusal. Read-only tools answer to the first two alone. (An audit entry that
//! cannot be made durable refuses an allowed mutation afterwards: the audit is written
//! only once the decision is known.)

use crate::blocker::BlockerKind;
use crate::diagnostics::{Diagnostic, STALE_RUNTIME, UNSUPPORTED_ENV};
use crate::forge_call::{AMBIGUOUS_ACTION, Ambiguity};
use crate::glob::any_match;
use crate::inventory::FleetInventory;
use crate::protect::{PROTECTED_ACTION, Violation};
use crate::provenance::{Ownership, Provenance};
use crate::workflow::Refusal;
use serde::{Deserialize, Serialize};

/// Read-only or mutating. Unknown is mutating. The one vocabulary: the gateway's listings,
/// the gate and the audit all speak it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolClass {
    /// Changes nothing.
    ReadOnly,
    /// May change shared state.
    Mutating,
}

impl ToolClass {
    /// The wire literal: `read_only` or `mutating`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::ReadOnly => "read_only",
            Self::Mutating => "mutating",
        }
    }
}

impl std::fmt::Display for ToolClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which tools a role may call: `deny` wins; no `allow` list means every tool.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RolePolicy {
    /// Globs of tools the role may call (absent: all).
    pub allow: Option<Vec<String>>,
    /// Globs of tools the role may never call.
    #[serde(default)]
    pub deny: Vec<String>,
}

impl RolePolicy {
    /// May the role call `tool`?
    pub fn permits(&self, tool: &str) -> bool {
        !any_match(&self.deny, tool) && self.allow.as_ref().is_none_or(|a| any_match(a, tool))
    }
}

/// The config's classification overrides: `[tools] read_only`, `mutating`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ToolRules {
    /// Globs classified read-only whatever the downstream says.
    #[serde(default)]
    pub read_only: Vec<String>,
    /// Globs classified mutating whatever the downstream says (wins over `read_only`).
    #[serde(default)]
    pub mutating: Vec<String>,
    /// What a changed downstream tool definition does.
    #[serde(default)]
    pub pin: PinMode,
}

/// `[tools] pin`: what the gateway does with the digest of each downstream tool's definition.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PinMode {
    /// Pin the first definition seen; report a change (runtime context, inventory, audit).
    #[default]
    Record,
    /// As `record`, and refuse calls of a changed tool (`tool_definition_changed`) until
    /// an operator accepts the change.
    Enforce,
    /// Neither pin nor report.
    Off,
}

impl PinMode {
    /// The wire literal.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Record => "record",
            Self::Enforce => "enforce",
            Self::Off => "off",
        }
    }
}

/// Classify a tool: config `mutating`, then config `read_only`, then the
/// downstream's `readOnlyHint: true`; anything else is mutating.
pub fn classify_tool(tool: &str, read_only_hint: Option<bool>, rules: &ToolRules) -> ToolClass {
    if any_match(&rules.mutating, tool) {
        ToolClass::Mutating
    } else if any_match(&rules.read_only, tool) || read_only_hint == Some(true) {
        ToolClass::ReadOnly
    } else {
        ToolClass::Mutating
    }
}

/// Everything one decision is made from.
#[derive(Clone, Copy, Debug)]
pub struct CapabilityInput<'a> {
    /// Deciding server's profile.
    pub profile: &'a str,
    /// Its role.
    pub role: &'a str,
    /// The tool called.
    pub tool: &'a str,
    /// Its classification.
    pub class: ToolClass,
    /// The role policy's answer for this call (the rules', or the role's globs').
    pub role_permitted: bool,
    /// When the rules refused it: why and who may instead (absent: the globs did).
    pub role_refusal: Option<&'a RoleRefusal>,
    /// When the server could read the call's arguments differently from the gate: which
    /// key and why (`ambiguous_arguments`, before everything else).
    pub ambiguity: Option<&'a Ambiguity>,
    /// When the call touches a protected branch or path (`protected_branch`).
    pub protection: Option<&'a Violation>,
    /// When the downstream changed the tool's definition under `[tools] pin = "enforce"`
    /// (or its pin cannot be read): why (`tool_definition_changed`).
    pub definition_changed: Option<&'a str>,
    /// When the store file was deleted or replaced under this process: why
    /// (`store_replaced`).
    pub store_replaced: Option<&'a str>,
    /// The PR workflow's refusal of the call, when the gate judged one (applied after the
    /// fleet conditions, which it never outranks).
    pub workflow: Option<&'a Refusal>,
    /// An operator's part in the call, when a rule asks about it (applied last: only a call
    /// everything else allows waits for, or is refused by, an operator).
    pub approval: Option<&'a ApprovalHold>,
    /// What the fleet conditions are judged from. A caller may skip gathering it
    /// for a call that cannot need it (a permitted read-only tool); a mutating
    /// call without it is refused, never waved through.
    pub evidence: Option<Evidence<'a>>,
}

/// Where an operator's answer to a call a rule asks about stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApprovalHold {
    /// Asked, not answered (`approval_pending`).
    Pending {
        /// The request.
        id: String,
        /// Why the gate asks.
        why: String,
    },
    /// Refused by an operator (`approval_denied`).
    Denied {
        /// The request.
        id: String,
        /// Who refused it, and why.
        by: String,
    },
    /// No request could be read or recorded (`approval_pending`: the call waits, and no
    /// operator can be asked until the store answers).
    Unavailable {
        /// Why the gate asks, and what failed.
        why: String,
    },
}

impl ApprovalHold {
    fn refusal(&self) -> (BlockerKind, String, String) {
        match self {
            Self::Pending { id, why } => (
                BlockerKind::ApprovalPending,
                format!("{why}: approval request {id} waits for an operator"),
                crate::approval::approval_action(id),
            ),
            Self::Denied { id, by } => (
                BlockerKind::ApprovalDenied,
                format!("approval request {id} was denied by {by}"),
                "an operator refused this exact call: do not retry it; change the plan, or ask the operator".into(),
            ),
            Self::Unavailable { why } => (
                BlockerKind::ApprovalPending,
                why.clone(),
                "no approval request could be read or recorded: check the store (fleetgate runtime context, a \
                 lock held on it, a full disk), then retry the call"
                    .into(),
            ),
        }
    }
}

/// The live inputs of the fleet and session conditions.
#[derive(Clone, Copy, Debug)]
pub struct Evidence<'a> {
    /// Runtime diagnostics of the fleet (hard ones refuse).
    pub diagnostics: &'a [Diagnostic],
    /// Who owns the session.
    pub provenance: &'a Provenance,
    /// The fleet inventory verdict.
    pub inventory: &'a FleetInventory,
}

/// Why the rules refused a call, and which roles may make it instead (none: no rule
/// matches the call, so no role may).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoleRefusal {
    /// The reason, naming the rule, the argument and its value.
    pub reason: String,
    /// The roles that may make this call.
    pub may: Vec<String>,
}

/// Does deciding this call need the fleet evidence? Only a permitted mutating call does.
pub fn needs_evidence(class: ToolClass, role_permitted: bool) -> bool {
    role_permitted && class == ToolClass::Mutating
}

/// The verdict.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Capability {
    /// The tool.
    pub tool: String,
    /// The deciding profile.
    pub profile: String,
    /// Its role.
    pub role: String,
    /// The tool's classification.
    pub classification: ToolClass,
    /// The call may go ahead.
    pub allowed: bool,
    /// Null when allowed.
    pub blocker_kind: Option<BlockerKind>,
    /// Every reason behind the blocker.
    pub blocked_reasons: Vec<String>,
    /// The server must be restarted to clear it.
    pub restart_required: bool,
    /// The server must stop what it is doing.
    pub stop_required: bool,
    /// One sentence an operator can act on; null when allowed.
    pub operator_action: Option<String>,
    /// When allowed: the arguments to forward in place of the caller's (the gate's
    /// canonical parse, with what the workflow pins). `None`: forward the call as sent.
    #[serde(skip)]
    pub forward: Option<serde_json::Map<String, serde_json::Value>>,
    /// The operator approval request the call waits for, or the one it used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval_request: Option<String>,
}

/// A call every other condition allows, with an operator's part applied: refused while its
/// request waits (`approval_pending`) or after an operator denied it (`approval_denied`),
/// allowed without one. The resolver applies the same, last.
pub fn with_approval(allowed: Capability, hold: Option<&ApprovalHold>) -> Capability {
    let Some(hold) = hold else { return allowed };
    let (kind, reason, action) = hold.refusal();
    let id = match hold {
        ApprovalHold::Pending { id, .. } | ApprovalHold::Denied { id, .. } => Some(id.clone()),
        ApprovalHold::Unavailable { .. } => None,
    };
    Capability {
        allowed: false,
        blocker_kind: Some(kind),
        blocked_reasons: vec![reason],
        operator_action: Some(action),
        forward: None,
        approval_request: id,
        ..allowed
    }
}

/// Decide one call.
pub fn resolve_task_capability(input: &CapabilityInput<'_>) -> Capability {
    let verdict =
        |blocker: Option<BlockerKind>, reasons: Vec<String>, restart, stop, action: Option<String>| Capability {
            tool: input.tool.to_owned(),
            profile: input.profile.to_owned(),
            role: input.role.to_owned(),
            classification: input.class,
            allowed: blocker.is_none(),
            blocker_kind: blocker,
            blocked_reasons: reasons,
            restart_required: restart,
            stop_required: stop,
            operator_action: action,
            forward: None,
            approval_request: None,
        };
    if let Some(ambiguity) = input.ambiguity {
        return verdict(
            Some(BlockerKind::AmbiguousArguments),
            vec![ambiguity.reason(input.tool)],
            false,
            false,
            Some(AMBIGUOUS_ACTION.into()),
        );
    }
    if !input.role_permitted {
        // A rule's refusal names the rule, the argument and its value, and hands the call to
        // the roles that may make it; the globs' names the role and the tool.
        let (reason, action) = match input.role_refusal {
            Some(refusal) => (refusal.reason.clone(), rule_action(input.tool, &refusal.may)),
            None => (
                format!("role {} ({}) may not call {}", input.role, input.profile, input.tool),
                role_action(input.tool, Some(input.role)),
            ),
        };
        return verdict(Some(BlockerKind::RoleNotPermitted), vec![reason], false, false, Some(action));
    }
    if let Some(violation) = input.protection {
        let reasons = vec![violation.reason.clone()];
        return verdict(Some(BlockerKind::ProtectedBranch), reasons, false, false, Some(violation.action.into()));
    }
    if let Some(why) = input.definition_changed {
        let reasons = vec![why.to_owned()];
        return verdict(
            Some(BlockerKind::ToolDefinitionChanged),
            reasons,
            false,
            false,
            Some(TOOL_CHANGED_ACTION.into()),
        );
    }
    let allowed =
        |verdict: &dyn Fn(Option<BlockerKind>, Vec<String>, bool, bool, Option<String>) -> Capability| match input
            .approval
            .map(ApprovalHold::refusal)
        {
            Some((kind, reason, action)) => verdict(Some(kind), vec![reason], false, false, Some(action)),
            None => verdict(None, Vec::new(), false, false, None),
        };
    if input.class == ToolClass::ReadOnly {
        return allowed(&verdict);
    }
    if let Some(why) = input.store_replaced {
        let reasons = vec![why.to_owned()];
        return verdict(Some(BlockerKind::StoreReplaced), reasons, true, false, Some(STORE_REPLACED_ACTION.into()));
    }
    let Some(ev) = input.evidence else {
        return verdict(
            Some(BlockerKind::FleetInventoryBlocked),
            vec!["the fleet evidence for this mutating call was not gathered".into()],
            false,
            false,
            Some("re-run the call; if it persists, report a fleetgate defect".into()),
        );
    };
    if let Some(b) = hard_block(ev.diagnostics) {
        return verdict(Some(b.blocker_kind), b.blocked_reasons, true, true, Some(b.operator_action));
    }
    let p = ev.provenance;
    if p.session_ownership != Ownership::Owned {
        let kind = p.blocker_kind.unwrap_or(BlockerKind::SessionAttachmentMissing);
        let reasons =
            if p.reasons.is_empty() { vec!["no live worker owns this session".into()] } else { p.reasons.clone() };
        return if kind == BlockerKind::WorkerFenced {
            verdict(Some(kind), reasons, false, true, Some(FENCED_ACTION.into()))
        } else {
            verdict(Some(BlockerKind::SessionAttachmentMissing), reasons, false, false, Some(ATTACH_ACTION.into()))
        };
    }
    if let Some(b) = inventory_block(ev.inventory) {
        return verdict(Some(b.blocker_kind), b.blocked_reasons, false, false, Some(b.operator_action));
    }
    if let Some(refusal) = input.workflow {
        let action = Some(refusal.operator_action.clone());
        return verdict(Some(refusal.blocker_kind), refusal.reasons.clone(), false, false, action);
    }
    allowed(&verdict)
}

pub(crate) const FENCED_ACTION: &str =
    "stop this server: a newer generation owns its worker; start a fresh session rather than renewing the old one";
pub(crate) const ATTACH_ACTION: &str =
    "attach a live worker to this session (fleetgate worker register) and keep its heartbeat running";

/// The operator action of `tool_definition_changed`.
pub const TOOL_CHANGED_ACTION: &str = "review the downstream's changed tool definition, then accept it (fleetgate tools accept TOOL) or pin the server's version";

/// The operator action of `store_replaced`.
pub const STORE_REPLACED_ACTION: &str = "the store file this server opened was deleted or replaced at its path: \
     put that file back at the path (mv it back), or restart this server so it opens the store now at the path; \
     mutations stay refused until one is done";

fn role_action(tool: &str, role: Option<&str>) -> String {
    match role {
        Some(role) => format!("hand this work to a role whose policy allows {tool}; the {role} role never may"),
        None => format!("hand this work to a role whose policy allows {tool}"),
    }
}

/// The operator action of a call a rule refused: hand it to the roles the rules let make it,
/// or — when none may — change the call.
fn rule_action(tool: &str, may: &[String]) -> String {
    match may {
        [] => format!(
            "no role may make this `{tool}` call: change its arguments, or add a [[rules]] entry that allows it"
        ),
        roles => format!("hand this `{tool}` call to the {} role", roles.join(" or the ")),
    }
}

fn resolve_first(reason: &str) -> String {
    format!("resolve this before mutating: {reason}")
}

/// The fleet-wide half of the gate: what refuses every permitted mutating call,
/// whichever session makes it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FleetBlock {
    /// `runtime_reconnect_required` or `fleet_inventory_blocked`.
    pub blocker_kind: BlockerKind,
    /// Every reason behind it.
    pub blocked_reasons: Vec<String>,
    /// One sentence an operator can act on.
    pub operator_action: String,
}

/// Is the fleet-wide gate closed, and why? The resolver's own precedence: a hard
/// runtime diagnostic first, then the inventory. `None`: a mutating call from a live,
/// owned session of a permitted role would be allowed.
pub fn fleet_gate(diagnostics: &[Diagnostic], inventory: &FleetInventory) -> Option<FleetBlock> {
    hard_block(diagnostics).or_else(|| inventory_block(inventory))
}

fn hard_block(diagnostics: &[Diagnostic]) -> Option<FleetBlock> {
    let hard: Vec<String> = diagnostics.iter().filter(|d| d.is_hard()).map(ToString::to_string).collect();
    let action = hard_action(hard.first()?);
    Some(FleetBlock {
        blocker_kind: BlockerKind::RuntimeReconnectRequired,
        blocked_reasons: hard,
        operator_action: action,
    })
}

fn inventory_block(inv: &FleetInventory) -> Option<FleetBlock> {
    if inv.mutation_gate_satisfied {
        return None;
    }
    let reasons = if inv.blocked_reasons.is_empty() {
        vec!["the fleet inventory gate is not satisfied".into()]
    } else {
        inv.blocked_reasons.clone()
    };
    Some(FleetBlock {
        blocker_kind: BlockerKind::FleetInventoryBlocked,
        blocked_reasons: reasons,
        operator_action: inventory_action(inv),
    })
}

/// The operator action of a recorded refusal. The audit log keeps the blocker
/// literal and the reasons, not the sentence the caller was shown, so it is
/// derived here from the same sentences the resolver uses; for
/// `fleet_inventory_blocked` (whose sentence was built from the inventory of that
/// moment) it names the first recorded reason. `None` for an unknown literal.
pub fn refusal_action(blocker_kind: &str, tool: &str, role: Option<&str>, reasons: &[String]) -> Option<String> {
    const ROLE: &str = BlockerKind::RoleNotPermitted.as_str();
    const HARD: &str = BlockerKind::RuntimeReconnectRequired.as_str();
    const ATTACH: &str = BlockerKind::SessionAttachmentMissing.as_str();
    const FENCED: &str = BlockerKind::WorkerFenced.as_str();
    const FLEET: &str = BlockerKind::FleetInventoryBlocked.as_str();
    const TOOL: &str = BlockerKind::ToolDefinitionChanged.as_str();
    const STORE: &str = BlockerKind::StoreReplaced.as_str();
    const AMBIGUOUS: &str = BlockerKind::AmbiguousArguments.as_str();
    const PROTECTED: &str = BlockerKind::ProtectedBranch.as_str();
    const PENDING: &str = BlockerKind::ApprovalPending.as_str();
    const DENIED: &str = BlockerKind::ApprovalDenied.as_str();
    let first = reasons.first().map(String::as_str);
    let request = || {
        let id = first.and_then(|r| r.split_whitespace().find(|w| w.starts_with("apr-")));
        id.map(|id| id.trim_end_matches([':', ',', '.']).to_owned())
    };
    Some(match blocker_kind {
        ROLE => role_action(tool, role),
        HARD => hard_action(first.unwrap_or_default()),
        ATTACH => ATTACH_ACTION.into(),
        FENCED => FENCED_ACTION.into(),
        FLEET => first.map_or_else(|| "re-run the fleet inventory".into(), resolve_first),
        TOOL => TOOL_CHANGED_ACTION.into(),
        STORE => STORE_REPLACED_ACTION.into(),
        AMBIGUOUS => AMBIGUOUS_ACTION.into(),
        PROTECTED => PROTECTED_ACTION.into(),
        PENDING => match request() {
            Some(id) => crate::approval::approval_action(&id),
            None => ApprovalHold::Unavailable { why: String::new() }.refusal().2,
        },
        DENIED => ApprovalHold::Denied { id: request().unwrap_or_else(|| "ID".into()), by: String::new() }.refusal().2,
        other => return BlockerKind::parse(other).map(|k| crate::workflow::action(k).to_owned()),
    })
}

fn hard_action(first: &str) -> String {
    if first.starts_with(UNSUPPORTED_ENV) {
        "restart the server named below without the unsupported override, or declare the key in fleet.pass_through_env if it belongs to the downstream server".into()
    } else if first.starts_with(STALE_RUNTIME) {
        "restart the server named below so it runs the repository's current revision".into()
    } else {
        "restart the server named below to clear the runtime diagnostic".into()
    }
}

/// The operator action for the inventory's first problem.
pub fn inventory_action(inv: &FleetInventory) -> String {
    let role_of = |profile: &str| {
        inv.configured_members
            .iter()
            .find(|m| m.profile == profile)
            .map_or_else(|| profile.to_owned(), |m| m.role.clone())
    };
    if let Some(d) = inv.duplicate_members.first()
        && let Some(newest) = d.instances.last()
    {
        return format!(
            "stop the second {} server, pid {}, started by cohort {}",
            role_of(&d.profile),
            newest.pid,
            newest.cohort_id.as_deref().unwrap_or("unknown")
        );
    }
    if let Some(u) = inv.unexpected_members.first() {
        return format!("stop the unexpected {} server, pid {}, or add its profile to the roster", u.profile, u.pid);
    }
    if let Some(m) = inv.missing_members.first() {
        return format!("start the {} server ({}) from the fleet's client", m.profile, m.namespace);
    }
    if let Some(p) = inv.unregistered_processes.first() {
        return format!(
            "stop pid {} or let it register a runtime row; unregistered fleet processes fail closed",
            p.pid
        );
    }
    if inv.mixed_cohort == Some(true) {
        return format!("restart the fleet from one client: cohorts {} are running", inv.cohort_ids.join(", "));
    }
    if inv.mixed_revision {
        return format!("restart the servers so all run one revision (seen: {})", inv.startup_revisions.join(", "));
    }
    match inv.blocked_reason.as_deref() {
        Some(r) => resolve_first(r),
        None => "re-run the fleet inventory".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_policy_deny_wins_and_no_allow_means_all() {
        let open = RolePolicy::default();
        assert!(open.permits("anything"));
        let p = RolePolicy { allow: Some(vec!["git_*".into()]), deny: vec!["git_commit".into()] };
        assert!(p.permits("git_add"));
        assert!(!p.permits("git_commit"));
        assert!(!p.permits("gitea_merge"));
    }

    #[test]
    fn classification_follows_config_then_annotation_and_defaults_to_mutating() {
        let rules = ToolRules {
            read_only: vec!["git_log".into(), "git_s*".into()],
            mutating: vec!["git_status_write".into()],
            ..ToolRules::default()
        };
        assert_eq!(classify_tool("git_log", None, &rules), ToolClass::ReadOnly);
        assert_eq!(classify_tool("git_status_write", Some(true), &rules), ToolClass::Mutating);
        assert_eq!(classify_tool("echo", Some(true), &ToolRules::default()), ToolClass::ReadOnly);
        assert_eq!(classify_tool("echo", Some(false), &ToolRules::default()), ToolClass::Mutating);
        assert_eq!(classify_tool("echo", None, &ToolRules::default()), ToolClass::Mutating, "unknown means mutating");
    }
}
