//! The capability resolver — the mutation gate. One pure function, called once per call
//! with everything the shell gathered, that allows the call or names the exact blocker and
//! the operator action, and says what the shell applies (the arguments to forward, the
//! approvals to use, the request to record). Nothing edits its verdict after it returns.
//!
//! Precedence, first that holds wins ([`BlockerKind::ALL`]'s order): ambiguous arguments;
//! the invariants the call's effect breaks (`protected_branch`, `invariant_violated`); role
//! policy, when the rules refuse the call whatever it does; an effect that cannot be
//! established (`forge_unavailable`: also a role policy that depends on it); a changed tool
//! definition; then, for a mutating call, a replaced store, hard runtime diagnostics, session
//! attachment and fencing, fleet inventory and the PR workflow's refusal; last, the
//! operator's part for a call a rule asks about. Read-only calls answer to the conditions up
//! to a changed definition alone. An approved override (`[approvals] may_override`) replaces
//! exactly the blocker it names — never an invariant, ambiguous arguments, a fence, a
//! replaced store or an unreadable forge — and the next condition that holds still decides.
//! (An audit entry that cannot be made durable, or an approval another identical call used
//! first, refuses an allowed mutation afterwards — the audit is written only once the decision
//! is known — and only through [`Capability::refused_in_apply`], with the blocker's one text.)

use crate::blocker::BlockerKind;
use crate::blocker::{AMBIGUOUS_ACTION, PROTECTED_ACTION};
use crate::diagnostics::{Diagnostic, STALE_RUNTIME, UNSUPPORTED_ENV};
use crate::effect::Breach;
use crate::forge_call::Ambiguity;
use crate::glob::any_match;
use crate::inventory::FleetInventory;
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

/// Everything one decision is made from: every input gathered before core decides once.
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
    /// When the server could read the call's arguments differently from the gate: which
    /// key and why (`ambiguous_arguments`, before everything else).
    pub ambiguity: Option<&'a Ambiguity>,
    /// The invariants the call's effect breaks, lifted ones left out (`protected_branch`,
    /// `invariant_violated`): no rule and no approval lifts them.
    pub breaches: &'a [Breach],
    /// Invariants the call would break but for an operator's `[invariants] lift`: the call's
    /// reasons (and so its audit entry) name each.
    pub lifted: &'a [Breach],
    /// What the call does that an invariant guards through the PR workflow's judgement (a
    /// merge onto a protected branch, `reviewed-merge`, not lifted): the workflow's
    /// `approval_required` or `stale_head` on it is never overridden.
    pub guarded: &'a [Breach],
    /// Why the call's effect could not be established (`forge_unavailable`): a read failed,
    /// a listing may be cut short, a rule names what the call does and it is not known.
    pub unestablished: Option<&'a str>,
    /// The role policy's answer for this call (the rules', or the role's globs'): false only
    /// when it refuses the call whatever the call does (else `unestablished` says why not yet).
    pub role_permitted: bool,
    /// When the rules refused it: why and who may instead (absent: the globs did).
    pub role_refusal: Option<&'a RoleRefusal>,
    /// When the downstream changed the tool's definition under `[tools] pin = "enforce"`
    /// (or its pin cannot be read): why (`tool_definition_changed`).
    pub definition_changed: Option<&'a str>,
    /// When the store file was deleted or replaced under this process: why
    /// (`store_replaced`).
    pub store_replaced: Option<&'a str>,
    /// What the fleet conditions are judged from. The shell may skip gathering it when
    /// [`needs_evidence`] says the verdict cannot depend on it; a mutating call judged
    /// without it is refused, never waved through.
    pub evidence: Option<Evidence<'a>>,
    /// The PR workflow's refusal of the call, when it judged one (after the fleet conditions,
    /// which it never outranks).
    pub workflow: Option<&'a Refusal>,
    /// The arguments to forward when the call is allowed: the gate's canonical parse with
    /// what the workflow pins (a merge's head). `None`: as sent.
    pub forward: Option<&'a serde_json::Map<String, serde_json::Value>>,
    /// The call's workflow action (`merge`, `review`, …): an allowed call settles it once the
    /// server answers.
    pub action: Option<&'a str>,
    /// `decision = "ask"`: the rule that asks an operator about the call.
    pub ask: Option<&'a str>,
    /// The operator's answers on record for exactly this call (`None`: not read — then a
    /// call that needs one waits, `approval_pending`).
    pub approvals: Option<&'a Approvals>,
    /// `[approvals] may_override`: refusals an operator may override for one exact call.
    pub may_override: &'a [BlockerKind],
    /// What the verdict carries besides the decision ([`Finish`]).
    pub finish: Finish<'a>,
}

/// What core's verdict carries besides the decision itself, each part a plain fact the shell
/// gathered: the verdict is final once core returns it, and applying it may refuse it only
/// through [`Capability::refused_in_apply`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Finish<'a> {
    /// The PR workflow's note on the call (a lock it takes, an issue lock it names): an
    /// allowed call's reasons carry it, last.
    pub note: Option<&'a str>,
    /// The head (and base) the PR workflow judged the call at: what an allowed call settles is
    /// recorded at it ([`settles_text`]).
    pub at: Option<&'a (String, Option<String>)>,
    /// The pinned request the gateway makes itself in place of forwarding an allowed call (a
    /// merge whose server declares no head pin), from the PR workflow's judgement.
    pub perform: Option<&'a crate::dialect::RestCall>,
    /// Why the call, were it allowed, would merge at whatever head the PR has then (its
    /// arguments carry no head pin, `perform` is none, `unpinned-merge` is not lifted): it is
    /// then refused `invariant_violated`, after every other condition.
    pub unpinned: Option<&'a str>,
    /// A preview (`capability`, the control tool): nothing is applied, so a refusal that
    /// would record an approval request says so.
    pub preview: bool,
    /// A real call the roster holds while it waits for an operator (`[approvals]
    /// wait_seconds`, a worker makes it): see [`Capability::held`].
    pub holds: bool,
}

/// Where an operator's answer about one exact call stands (within `[approvals]
/// ttl_seconds` of the answer).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Standing {
    /// Asked, not answered.
    Pending {
        /// The request.
        id: String,
        /// Who may answer it (empty: any operator): the operator action says who and where.
        approvers: Vec<String>,
    },
    /// Approved, not yet used: the call may pass once.
    Approved {
        /// The request.
        id: String,
        /// Who approved it.
        by: String,
    },
    /// Denied: it stands for that exact call.
    Denied {
        /// The request.
        id: String,
        /// Who denied it, and why.
        by: String,
    },
}

/// The operator's answers on record for one exact call (its digest: the worker, the tool and
/// the arguments that would be forwarded, pins included).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Approvals {
    /// About the call itself (a rule that asks).
    pub call: Option<Standing>,
    /// About overriding one refusal of it, by blocker.
    pub overrides: Vec<(BlockerKind, Standing)>,
    /// The requests of the calling worker that wait, any call: past
    /// [`MAX_PENDING_PER_WORKER`] no new one is recorded.
    pub pending_of_worker: usize,
    /// The store could not say (`approval_pending`: nothing is used, nothing recorded).
    pub unavailable: Option<String>,
}

impl Approvals {
    fn override_of(&self, kind: BlockerKind) -> Option<&Standing> {
        self.overrides.iter().find(|(k, _)| *k == kind).map(|(_, s)| s)
    }
}

/// How many requests one worker may have waiting at once: a worker that asks again and
/// again fills no operator's queue.
pub const MAX_PENDING_PER_WORKER: usize = 8;

/// Whether `kind` may ever be overridden by an operator's approval: none of
/// [`crate::approval::NEVER_OVERRIDDEN`].
pub fn overridable(kind: BlockerKind, may_override: &[BlockerKind]) -> bool {
    may_override.contains(&kind) && !crate::approval::NEVER_OVERRIDDEN.contains(&kind)
}

/// What the shell records when it applies a refusal that asks an operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestPlan {
    /// Why the gate asks (the rule, or the refusal to override).
    pub why: String,
    /// The refusal an approval would override (`None`: the call itself, for a rule that asks).
    pub overrides: Option<BlockerKind>,
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
    /// When allowed: the approvals it uses (each once).
    #[serde(skip)]
    pub use_approvals: Vec<String>,
    /// When refused: the approval request to record (a rule asks, or the refusal may be
    /// overridden), which the shell records and names in the reasons.
    #[serde(skip)]
    pub request: Option<RequestPlan>,
    /// When allowed: the workflow action whose outcome the shell records once the server
    /// answers (a decision at its head, an opened PR's creator, a merge's leases).
    #[serde(skip)]
    pub settles: Option<String>,
    /// A shadow candidate's rules would have decided this call otherwise (`fleetgate serve
    /// --shadow`): never enforced, only recorded.
    #[serde(skip)]
    pub shadow: Option<ShadowFlip>,
    /// When allowed: the call is not forwarded but made by the gateway itself, as this pinned
    /// request to the forge's REST API (a merge whose server declares no head pin), as the
    /// workflow's judgement made it ([`Finish::perform`]).
    #[serde(skip)]
    pub perform: Option<crate::dialect::RestCall>,
    /// The roster holds this call while it waits for an operator ([`Finish::holds`]).
    #[serde(skip)]
    pub holds: bool,
}

impl Capability {
    /// The approval request the gateway holds this call for: a call that waits for an
    /// operator (`approval_pending`, naming its request) when the roster holds it.
    pub fn held(&self) -> Option<&str> {
        let pending = self.blocker_kind == Some(BlockerKind::ApprovalPending);
        self.approval_request.as_deref().filter(|_| pending && self.holds)
    }

    /// The refusal that asked an operator ([`Capability::request`], `plan`), once applying
    /// tried to record its request: `recorded` is the request's id and approvers as the store
    /// holds it (the one already waiting for the same call, or the new one), or why it could
    /// not be recorded. The reasons and the operator action name it.
    pub fn requested<E: std::fmt::Display>(
        mut self,
        plan: &RequestPlan,
        recorded: Result<(&str, &[String]), E>,
    ) -> Self {
        match (recorded, plan.overrides) {
            (Ok((id, approvers)), None) => {
                self.blocked_reasons = vec![format!(
                    "{}: approval request {id} waits for an operator{}",
                    plan.why,
                    approvers_note(approvers)
                )];
                self.operator_action = Some(crate::approval::approval_action_for(id, approvers));
                self.approval_request = Some(id.to_owned());
            }
            (Ok((id, approvers)), Some(_)) => {
                self.blocked_reasons.push(format!(
                    "an operator may override this refusal for this exact call: approval request {id}{}",
                    approvers_note(approvers)
                ));
                let action = self.operator_action.take().unwrap_or_default();
                self.operator_action = Some(override_action(&action, id, approvers));
                self.approval_request = Some(id.to_owned());
            }
            (Err(e), None) => {
                self.blocked_reasons = vec![format!("{}, and the request could not be recorded: {e}", plan.why)];
                self.operator_action = Some(UNAVAILABLE_ACTION.into());
            }
            (Err(e), Some(_)) => self.blocked_reasons.push(format!("its override request could not be recorded: {e}")),
        }
        self
    }

    /// The one way applying an allowed verdict may refuse it (an approval another identical
    /// call used first, an audit entry that is not durable): refused by `kind` for `reason`,
    /// with `kind`'s one operator text. Applying never allows.
    pub fn refused_in_apply(self, kind: BlockerKind, reason: String) -> Self {
        self.refused_after(kind, reason, kind.operator_action().to_owned())
    }

    /// An allowed verdict refused by a condition judged last: forwarding, using, settling and
    /// performing nothing.
    fn refused_after(mut self, kind: BlockerKind, reason: String, action: String) -> Self {
        self.forward = None;
        self.allowed = false;
        self.blocker_kind = Some(kind);
        self.blocked_reasons = vec![reason];
        self.operator_action = Some(action);
        self.use_approvals.clear();
        self.settles = None;
        self.perform = None;
        self
    }
}

/// A live decision the shadow candidate would have made otherwise.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShadowFlip {
    /// The running rules' outcome: `allowed` or `refused`.
    pub from: &'static str,
    /// The candidate's.
    pub to: &'static str,
    /// What decided it in the candidate: its rule's origin, an invariant, or its blocker.
    pub rule: String,
    /// The candidate's blocker, when it refuses.
    pub blocker: Option<BlockerKind>,
}

impl ShadowFlip {
    /// The flip, if `candidate` decides `live`'s call otherwise (allowed against refused);
    /// `rule` names what decided it in the candidate.
    pub fn between(live: &Capability, candidate: &Capability, rule: String) -> Option<Self> {
        let word = |allowed: bool| if allowed { "allowed" } else { "refused" };
        (live.allowed != candidate.allowed).then(|| Self {
            from: word(live.allowed),
            to: word(candidate.allowed),
            rule,
            blocker: candidate.blocker_kind,
        })
    }
}

/// One condition that holds, as the resolver lists them.
#[derive(Clone, Debug)]
struct Block {
    kind: BlockerKind,
    reasons: Vec<String>,
    action: String,
    restart: bool,
    stop: bool,
    /// An invariant's, whatever its kind: never overridden.
    invariant: bool,
}

impl Block {
    fn new(kind: BlockerKind, reasons: Vec<String>, action: impl Into<String>) -> Self {
        Self { kind, reasons, action: action.into(), restart: false, stop: false, invariant: false }
    }

    /// Whether an operator's approval may override it under `may_override`.
    fn overridable(&self, may_override: &[BlockerKind]) -> bool {
        !self.invariant && overridable(self.kind, may_override)
    }
}

/// Every condition that holds for the call, in precedence order (the first decides unless
/// an approval overrides it). Read-only calls answer to the conditions up to a changed
/// definition alone.
fn blocks(input: &CapabilityInput<'_>) -> Vec<Block> {
    let mut out = Vec::new();
    if let Some(ambiguity) = input.ambiguity {
        // Nothing else can be judged of arguments the two sides read differently.
        out.push(Block::new(BlockerKind::AmbiguousArguments, vec![ambiguity.reason(input.tool)], AMBIGUOUS_ACTION));
        return out;
    }
    for kind in [BlockerKind::ProtectedBranch, BlockerKind::InvariantViolated] {
        let of: Vec<&Breach> = input.breaches.iter().filter(|b| b.invariant.blocker() == kind).collect();
        if let Some(first) = of.first() {
            let reasons = of.iter().map(|b| format!("invariant `{}`: {}", b.invariant, b.reason)).collect();
            out.push(Block::new(kind, reasons, first.invariant.action()));
        }
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
        out.push(Block::new(BlockerKind::RoleNotPermitted, vec![reason], action));
    }
    // After the role: a call the rules refuse whatever it does is refused by role, and only
    // an answer that depends on what the call does needs the forge.
    if let Some(why) = input.unestablished {
        out.push(Block::new(
            BlockerKind::ForgeUnavailable,
            vec![format!("what the call would do could not be established from the forge (fail closed): {why}")],
            UNESTABLISHED_ACTION,
        ));
    }
    if let Some(why) = input.definition_changed {
        out.push(Block::new(BlockerKind::ToolDefinitionChanged, vec![why.to_owned()], TOOL_CHANGED_ACTION));
    }
    if input.class == ToolClass::ReadOnly {
        return out;
    }
    if let Some(why) = input.store_replaced {
        let mut b = Block::new(BlockerKind::StoreReplaced, vec![why.to_owned()], STORE_REPLACED_ACTION);
        b.restart = true;
        out.push(b);
    }
    let Some(ev) = input.evidence else {
        out.push(Block::new(
            BlockerKind::FleetInventoryBlocked,
            vec!["the fleet evidence for this mutating call was not gathered".into()],
            "re-run the call; if it persists, report a fleetgate defect",
        ));
        return out;
    };
    if let Some(b) = hard_block(ev.diagnostics) {
        out.push(Block {
            kind: b.blocker_kind,
            reasons: b.blocked_reasons,
            action: b.operator_action,
            restart: true,
            stop: true,
            invariant: false,
        });
    }
    let p = ev.provenance;
    if p.session_ownership != Ownership::Owned {
        let kind = p.blocker_kind.unwrap_or(BlockerKind::SessionAttachmentMissing);
        let reasons =
            if p.reasons.is_empty() { vec!["no live worker owns this session".into()] } else { p.reasons.clone() };
        if kind == BlockerKind::WorkerFenced {
            let mut b = Block::new(kind, reasons, FENCED_ACTION);
            b.stop = true;
            out.push(b);
        } else {
            out.push(Block::new(BlockerKind::SessionAttachmentMissing, reasons, ATTACH_ACTION));
        }
    }
    if let Some(b) = inventory_block(ev.inventory) {
        out.push(Block::new(b.blocker_kind, b.blocked_reasons, b.operator_action));
    }
    if let Some(refusal) = input.workflow {
        let mut b = Block::new(refusal.blocker_kind, refusal.reasons.clone(), refusal.operator_action.clone());
        // The approval a merge onto a protected branch needs, at the head it lands, is the
        // `reviewed-merge` invariant's: no operator's approval stands in for it — nor for a
        // workflow that could not look for it (no worker to judge the merge as).
        if let Some(guard) = input.guarded.first()
            && matches!(
                refusal.blocker_kind,
                BlockerKind::ApprovalRequired | BlockerKind::StaleHead | BlockerKind::SessionAttachmentMissing
            )
        {
            b.invariant = true;
            b.reasons.push(format!(
                "invariant `{}`: {}; no operator's approval overrides it",
                guard.invariant, guard.reason
            ));
            b.action = format!("{}; {}", b.action, guard.invariant.action());
        }
        out.push(b);
    }
    out
}

/// Does deciding this call need the fleet evidence, the PR workflow's judgement and the
/// approvals on record? Not when the conditions before them already refuse it for good (one
/// no approval overrides), nor for a permitted read-only call, which answers to them alone.
/// `input`'s evidence, workflow and approvals are not looked at.
pub fn needs_evidence(input: &CapabilityInput<'_>) -> bool {
    let early = CapabilityInput { class: ToolClass::ReadOnly, ..*input };
    let settled = blocks(&early).iter().any(|b| !b.overridable(input.may_override));
    !settled && input.class == ToolClass::Mutating
}

/// Does deciding this call need the approvals on record? When a rule asks, or when a
/// refusal of it may be overridden.
pub fn needs_approvals(input: &CapabilityInput<'_>) -> bool {
    input.ask.is_some() || !input.may_override.is_empty()
}

/// Decide one call, once, from everything gathered: the first condition that holds refuses
/// it, unless an operator's approval of exactly this call overrides exactly that condition
/// (then the next one that holds decides — an override replaces one blocker, never the
/// judgement of the rest); then, for a call a rule asks about, the operator's answer. The
/// verdict carries what the shell applies: the arguments to forward, the approvals to use,
/// the request to record.
pub fn resolve_task_capability(input: &CapabilityInput<'_>) -> Capability {
    let mut verdict = decide(input);
    if verdict.allowed {
        verdict.blocked_reasons.extend(input.finish.note.map(str::to_owned));
        verdict.perform = input.finish.perform.cloned();
        if let Some(why) = input.finish.unpinned {
            // Last: a merge is never forwarded at whatever head the forge has then.
            let action = crate::effect::Invariant::UnpinnedMerge.action().to_owned();
            verdict = verdict.refused_after(BlockerKind::InvariantViolated, why.to_owned(), action);
        }
    }
    // What the call settles is recorded at the head it was judged at.
    verdict.settles = verdict.settles.take().map(|action| settles_text(&action, input.finish.at));
    if input.finish.preview && verdict.request.is_some() {
        verdict.blocked_reasons.push("(an approval request is recorded when the call is made)".into());
    }
    verdict.holds = input.finish.holds;
    verdict
}

/// What an allowed call settles, in the words handed back when its answer comes: the
/// workflow action, with the head and base it was judged at when it was.
pub fn settles_text(action: &str, at: Option<&(String, Option<String>)>) -> String {
    match at {
        Some((head, base)) => serde_json::json!({ "action": action, "head": head, "base": base }).to_string(),
        None => action.to_owned(),
    }
}

/// [`resolve_task_capability`]'s precedence: the first condition that holds decides.
fn decide(input: &CapabilityInput<'_>) -> Capability {
    let mut used: Vec<String> = Vec::new();
    let mut notes: Vec<String> = input
        .lifted
        .iter()
        .map(|b| format!("invariant `{}` lifted by [invariants] lift: {}", b.invariant, b.reason))
        .collect();
    let all = blocks(input);
    for (at, block) in all.iter().enumerate() {
        let may = block.overridable(input.may_override);
        let standing = input.approvals.and_then(|a| a.override_of(block.kind)).filter(|_| may);
        if let Some(Standing::Approved { id, by }) = standing {
            notes.push(format!(
                "{} overridden once by approval {id} of {by}: {}",
                block.kind,
                block.reasons.join("; ")
            ));
            // One approval overrides its kind wherever it holds (the session's evidence and
            // the workflow may both miss the worker): used once.
            if !used.contains(id) {
                used.push(id.clone());
            }
            continue;
        }
        // When the next block no approval overrides is an invariant's (a protected merge's
        // review), it stands whatever is overridden before it: it refuses now, and no request
        // is recorded that could never let the call through.
        let next_standing = all[at + 1..].iter().find(|b| !b.overridable(input.may_override));
        if let Some(stands) = next_standing.filter(|b| may && b.invariant) {
            return verdict_of(input, Some(stands));
        }
        let refused = verdict_of(input, Some(block));
        return if may { overridable_refusal(refused, block, standing, input.approvals) } else { refused };
    }
    let mut allowed = verdict_of(input, None);
    if let Some(rule) = input.ask {
        let (id, by) = match operator_part(input, rule) {
            Ok(approved) => approved,
            Err(held) => return *held,
        };
        notes.push(format!("approval {id} of this exact call by {by} used (once)"));
        used.push(id.clone());
        allowed.approval_request = Some(id);
    }
    allowed.blocked_reasons = notes;
    allowed.use_approvals = used;
    allowed.forward = input.forward.cloned();
    allowed.settles = input.action.map(str::to_owned);
    allowed
}

/// The verdict `block` gives (allowed when none), before anything else is added to it.
fn verdict_of(input: &CapabilityInput<'_>, block: Option<&Block>) -> Capability {
    Capability {
        tool: input.tool.to_owned(),
        profile: input.profile.to_owned(),
        role: input.role.to_owned(),
        classification: input.class,
        allowed: block.is_none(),
        blocker_kind: block.map(|b| b.kind),
        blocked_reasons: block.map(|b| b.reasons.clone()).unwrap_or_default(),
        restart_required: block.is_some_and(|b| b.restart),
        stop_required: block.is_some_and(|b| b.stop),
        operator_action: block.map(|b| b.action.clone()),
        forward: None,
        approval_request: None,
        use_approvals: Vec::new(),
        request: None,
        settles: None,
        shadow: None,
        perform: None,
        holds: false,
    }
}

/// A refusal an operator may override for this exact call: what stands of the override
/// (`standing`, never an approved one: that one is used), else the request to record.
fn overridable_refusal(
    mut refused: Capability,
    block: &Block,
    standing: Option<&Standing>,
    approvals: Option<&Approvals>,
) -> Capability {
    match (standing, approvals) {
        (_, None) => {}
        (_, Some(Approvals { unavailable: Some(why), .. })) => {
            refused.blocked_reasons.push(format!("the approvals could not be read: {why}"));
        }
        (Some(Standing::Pending { id, approvers }), _) => {
            refused.blocked_reasons.push(format!(
                "an operator may override this refusal for this exact call: approval request {id} waits{}",
                approvers_note(approvers)
            ));
            refused.operator_action = Some(override_action(&block.action, id, approvers));
            refused.approval_request = Some(id.clone());
        }
        (Some(Standing::Denied { id, by }), _) => {
            refused.blocked_reasons.push(format!("overriding it for this exact call was denied ({id}, by {by})"));
            refused.approval_request = Some(id.clone());
        }
        (Some(Standing::Approved { .. }), _) => unreachable!("an approved override is used, never refused"),
        (None, Some(a)) if a.pending_of_worker >= MAX_PENDING_PER_WORKER => {
            refused.blocked_reasons.push(too_many(a.pending_of_worker));
        }
        (None, Some(_)) => {
            refused.request = Some(RequestPlan {
                why: format!("overrides {}: {}", block.kind, block.reasons.join("; ")),
                overrides: Some(block.kind),
            });
        }
    }
    refused
}

/// The operator's part of a call rule `rule` asks about: the approval it uses (its id and
/// who gave it), or the refusal it waits with.
fn operator_part(input: &CapabilityInput<'_>, rule: &str) -> Result<(String, String), Box<Capability>> {
    let why = format!("rule {rule} asks an operator about this exact call");
    let hold = |kind: BlockerKind, reasons: Vec<String>, action: String, request: Option<&String>| Capability {
        allowed: false,
        blocker_kind: Some(kind),
        blocked_reasons: reasons,
        operator_action: Some(action),
        approval_request: request.cloned(),
        ..verdict_of(input, None)
    };
    let pending = BlockerKind::ApprovalPending;
    let a = match input.approvals {
        None => {
            let reasons = vec![format!("{why}: the approvals on record were not read")];
            return Err(Box::new(hold(pending, reasons, UNAVAILABLE_ACTION.into(), None)));
        }
        Some(Approvals { unavailable: Some(e), .. }) => {
            let reasons = vec![format!("{why}, and the approvals could not be read: {e}")];
            return Err(Box::new(hold(pending, reasons, UNAVAILABLE_ACTION.into(), None)));
        }
        Some(a) => a,
    };
    Err(Box::new(match &a.call {
        Some(Standing::Approved { id, by }) => return Ok((id.clone(), by.clone())),
        Some(Standing::Denied { id, by }) => hold(
            BlockerKind::ApprovalDenied,
            vec![format!("approval request {id} was denied by {by}")],
            BlockerKind::ApprovalDenied.operator_action().into(),
            Some(id),
        ),
        Some(Standing::Pending { id, approvers }) => hold(
            pending,
            vec![format!("{why}: approval request {id} waits for an operator{}", approvers_note(approvers))],
            crate::approval::approval_action_for(id, approvers),
            Some(id),
        ),
        None if a.pending_of_worker >= MAX_PENDING_PER_WORKER => {
            let reasons = vec![format!("{why}; {}", too_many(a.pending_of_worker))];
            hold(pending, reasons, UNAVAILABLE_ACTION.into(), None)
        }
        None => Capability {
            request: Some(RequestPlan { why: why.clone(), overrides: None }),
            ..hold(pending, vec![why.clone()], String::new(), None)
        },
    }))
}

fn too_many(n: usize) -> String {
    format!(
        "this worker already has {n} approval requests waiting (at most {MAX_PENDING_PER_WORKER}): no new one is \
         recorded until an operator answers them"
    )
}

fn override_action(action: &str, id: &str, approvers: &[String]) -> String {
    if approvers.is_empty() {
        return format!("{action}; or override it for this exact call, once: `fleetgate approvals approve {id}`");
    }
    format!("{action}; or override it for this exact call, once: {}", crate::approval::where_answered(id, approvers))
}

/// The words a waiting request's reason names its approvers with (none: any operator), read
/// back by [`refusal_action`] from an audited refusal.
pub fn approvers_note(approvers: &[String]) -> String {
    if approvers.is_empty() { String::new() } else { format!(" (approvers: {})", approvers.join(", ")) }
}

/// The approvers a reason names ([`approvers_note`]).
fn approvers_in(reason: &str) -> Vec<String> {
    reason
        .split_once(" (approvers: ")
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(list, _)| list.split(", ").map(str::to_owned).collect())
        .unwrap_or_default()
}

/// The operator action of a call whose effect could not be established: `forge_unavailable`'s
/// one text (kept by name for callers).
pub const UNESTABLISHED_ACTION: &str = BlockerKind::ForgeUnavailable.operator_action();

use crate::blocker::{APPROVAL_UNAVAILABLE_ACTION as UNAVAILABLE_ACTION, ATTACH_ACTION, FENCED_ACTION};
pub use crate::blocker::{STORE_REPLACED_ACTION, TOOL_CHANGED_ACTION};

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
    const INVARIANT: &str = BlockerKind::InvariantViolated.as_str();
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
        INVARIANT => {
            // The first reason names the invariant: `invariant `retarget`: …`.
            let named = first
                .and_then(|r| r.strip_prefix("invariant `"))
                .and_then(|r| r.split_once('`'))
                .and_then(|(name, _)| crate::effect::Invariant::parse(name));
            named.map_or(crate::blocker::INVARIANT_ACTION, crate::effect::Invariant::action).into()
        }
        PENDING => match request() {
            Some(id) => crate::approval::approval_action_for(&id, &approvers_in(first.unwrap_or_default())),
            None => UNAVAILABLE_ACTION.into(),
        },
        DENIED => BlockerKind::ApprovalDenied.operator_action().into(),
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
        let (role, cohort) = (role_of(&d.profile), newest.cohort_id.as_deref().unwrap_or("unknown"));
        if d.replicas > 1 {
            return format!(
                "stop the newest {role} server, pid {}, started by cohort {cohort}: the member declares {} replicas",
                newest.pid, d.replicas
            );
        }
        return format!("stop the second {role} server, pid {}, started by cohort {cohort}", newest.pid);
    }
    if let Some(u) = inv.unexpected_members.first() {
        return format!("stop the unexpected {} server, pid {}, or add its profile to the roster", u.profile, u.pid);
    }
    if let Some(m) = inv.missing_members.first() {
        return format!("start the {} server ({}) from the fleet's client", m.profile, m.namespace);
    }
    if let Some(p) = inv.unregistered_processes.first() {
        if let Some(g) = inv.unproven_gateways.iter().find(|g| g.pid == p.pid) {
            return format!(
                "stop the gateway pid {} ({}); if it is another fleet's, give it its own store and its own \
                 repository, start it outside this fleet's checkout, and run a fleetgate release that publishes \
                 its proof, as this fleet's user; unproven gateways fail closed",
                p.pid, g.why
            );
        }
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
