//! [`Gate`]: one call in, one verdict out. Under a forge profile the call's arguments are
//! parsed once the way the server reads them (`fleetgate_core::forge_call`); every judgement
//! below is of that parse, and that parse (with what the workflow pins) is what is
//! forwarded. Classification, role policy and protected branches first (pure and cheap);
//! the fleet and session evidence only for a call that can need it (a permitted mutating
//! one); the PR workflow; every condition handed to the one pure resolver; for a real call,
//! the audit entry.

use super::observer::Observer;
use super::session::{Caller, session_provenance};
use super::snapshot::{Snapshot, snapshot};
use super::workflow::{self, ForgeReader, WorkflowCall};
use crate::audit::Auditor;
use fleetgate_config::{FleetConfig, Member};
use fleetgate_core::BlockerKind;
use fleetgate_core::Timestamp;
use fleetgate_core::approval::{ApprovalRequest, call_digest, request_id};
use fleetgate_core::audit::{AuditEntry, JudgedCall, keep_arguments};
use fleetgate_core::capability::{
    ApprovalHold, Capability, CapabilityInput, Evidence, RoleRefusal, ToolClass, classify_tool, needs_evidence,
    resolve_task_capability, with_approval,
};
use fleetgate_core::forge_call::{Ambiguity, canonicalize};
use fleetgate_core::protect::{Protection, Violation};
use fleetgate_core::rules::{ArgMatch, Rule};
use fleetgate_store::Store;
use serde::Serialize;
use serde_json::{Map, Value};
use std::sync::Arc;

/// One call to judge.
#[derive(Clone, Debug)]
pub struct Call<'a> {
    /// The roster member that would make it (its profile and role).
    pub member: &'a Member,
    /// The tool.
    pub tool: &'a str,
    /// The downstream's `readOnlyHint` for it, when known.
    pub read_only_hint: Option<bool>,
    /// The call's arguments, when it has any.
    pub arguments: Option<&'a Map<String, Value>>,
    /// The tool's `inputSchema` as the downstream lists it, when known: under a forge
    /// profile, which keys the server reads and as which types.
    pub schema: Option<&'a Map<String, Value>>,
    /// Who makes it.
    pub caller: Caller<'a>,
    /// Where the PR workflow reads a PR's current head (a gateway: its downstream).
    pub forge: Option<&'a dyn ForgeReader>,
}

impl std::fmt::Debug for dyn ForgeReader + '_ {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ForgeReader")
    }
}

/// The role policy of one call, as [`Gate::policy`] decides it.
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    /// The role may make it.
    pub permitted: bool,
    /// Its class (a rule's, else the tool's own).
    pub class: ToolClass,
    /// When the rules refused it: why, and who may.
    pub refusal: Option<RoleRefusal>,
    /// The workflow action of the matching rule.
    pub action: Option<String>,
    /// The matching rule's origin.
    pub rule: Option<String>,
    /// The matching rule asks an operator about the call (`decision = "ask"`).
    pub ask: bool,
}

/// What the gate does about a call a rule asks an operator about.
#[derive(Clone, Copy, Debug)]
enum Approving<'a> {
    /// Say it would wait; ask no one (`capability`, the control tool's assessment).
    Preview,
    /// A real call: use the approval that covers it, else record (or find) its request.
    Ask {
        /// The HTTP principal the call came from.
        principal: Option<&'a str>,
        /// The request the call was held for, when judged again after an answer.
        held: Option<&'a str>,
    },
}

/// How a tool is listed to a role.
#[derive(Clone, Debug, PartialEq)]
pub struct Listing {
    /// The role may call it (with some arguments).
    pub visible: bool,
    /// Its class.
    pub class: ToolClass,
    /// When rules name it: the calls the role may make (`_meta["fleetgate/allowed"]`).
    pub allowed: Option<Vec<Value>>,
}

/// One kind of call a role may make of a ruled tool, as the listing shows it.
#[derive(Debug, Serialize)]
struct AllowedCall<'a> {
    rule: &'a str,
    /// JSON pointer → `["v", …]`, `"present"` or `"absent"`.
    args: Map<String, Value>,
}

impl<'a> AllowedCall<'a> {
    fn of(rule: &'a Rule) -> Self {
        let args = rule
            .args
            .iter()
            .map(|(pointer, m)| {
                let shown = match m {
                    ArgMatch::OneOf(values) => Value::Array(values.clone()),
                    ArgMatch::Present => Value::from("present"),
                    ArgMatch::Absent => Value::from("absent"),
                };
                (pointer.clone(), shown)
            })
            .collect();
        Self { rule: &rule.origin, args }
    }
}

/// The gate of one process: its roster, its store, what it observes, and (in a gateway)
/// its audit log.
#[derive(Debug, Clone)]
pub struct Gate {
    config: Arc<FleetConfig>,
    store: Arc<dyn Store>,
    observer: Arc<dyn Observer>,
    auditor: Option<Auditor>,
    /// The digest of the rule set, as each judged call records it.
    rules_digest: Arc<str>,
}

impl Gate {
    /// A gate that does not audit (the `capability` CLI, the control tool).
    pub fn new(config: Arc<FleetConfig>, store: Arc<dyn Store>, observer: Arc<dyn Observer>) -> Self {
        let rules_digest = config.rules_digest().into();
        Self { config, store, observer, auditor: None, rules_digest }
    }

    /// The same gate, recording every [`decide`](Self::decide) through `auditor`.
    pub fn with_auditor(mut self, auditor: Auditor) -> Self {
        self.auditor = Some(auditor);
        self
    }

    /// The roster it judges against.
    pub fn config(&self) -> &FleetConfig {
        &self.config
    }

    /// The store it reads.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// What it observes.
    pub fn observer(&self) -> &dyn Observer {
        &*self.observer
    }

    /// What it observes, shared.
    pub fn observer_arc(&self) -> Arc<dyn Observer> {
        Arc::clone(&self.observer)
    }

    /// Read-only or mutating: the roster's `[tools]` globs, then the downstream's hint.
    pub fn classify(&self, tool: &str, read_only_hint: Option<bool>) -> ToolClass {
        classify_tool(tool, read_only_hint, &self.config.tools)
    }

    /// The role policy of one call: the rules when a rule names the tool (the first matching
    /// one decides, and gives the call its class), else the role's globs and the tool's own
    /// class.
    pub fn policy(&self, call: &Call<'_>) -> Policy {
        let role = &call.member.role;
        match self.config.rules.decide(role, call.tool, call.arguments) {
            Some(decided) => Policy {
                permitted: decided.permitted,
                class: decided.class.unwrap_or_else(|| self.classify(call.tool, call.read_only_hint)),
                refusal: decided.reason.map(|reason| RoleRefusal { reason, may: decided.may }),
                action: decided.action,
                rule: decided.rule,
                ask: decided.ask,
            },
            None => Policy {
                permitted: self.config.role_policy(role).permits(call.tool),
                class: self.classify(call.tool, call.read_only_hint),
                refusal: None,
                action: None,
                rule: None,
                ask: false,
            },
        }
    }

    /// How `tool` is listed to `role`: whether the role may call it with some arguments, its
    /// class, and — when rules name it — the argument values the role may use.
    pub fn listing(&self, role: &str, tool: &str, read_only_hint: Option<bool>) -> Listing {
        match self.config.rules.allowed_for(role, tool) {
            None => Listing {
                visible: self.config.role_policy(role).permits(tool),
                class: self.classify(tool, read_only_hint),
                allowed: None,
            },
            Some(rules) => {
                let class = if rules.iter().all(|r| r.class == Some(ToolClass::ReadOnly)) && !rules.is_empty() {
                    ToolClass::ReadOnly
                } else {
                    rules.iter().find_map(|r| r.class).unwrap_or_else(|| self.classify(tool, read_only_hint))
                };
                let allowed =
                    rules.iter().map(|r| serde_json::to_value(AllowedCall::of(r)).unwrap_or_default()).collect();
                Listing { visible: !rules.is_empty(), class, allowed: Some(allowed) }
            }
        }
    }

    /// Whether `role` may ever call `tool` (for some arguments).
    pub fn permits(&self, role: &str, tool: &str) -> bool {
        self.listing(role, tool, None).visible
    }

    /// The fleet as of `now`, answered by `answering`.
    pub fn snapshot(&self, now: Timestamp, answering: Option<&str>) -> Snapshot {
        snapshot(&self.config, Ok(&*self.store), &*self.observer, now, answering)
    }

    /// The verdict for `call` as of `now`, gathering the live evidence only when the call
    /// can need it. Records nothing.
    pub fn resolve(&self, call: &Call<'_>, now: Timestamp) -> Capability {
        self.judge(call, now)
    }

    /// Under `[tools] pin = "enforce"`: why `tool`'s definition may not be used (it changed
    /// since it was pinned, or the pin cannot be read). Otherwise nothing.
    fn changed_definition(&self, profile: &str, tool: &str) -> Option<String> {
        if self.config.tools.pin != fleetgate_core::capability::PinMode::Enforce {
            return None;
        }
        match self.store.tool_pin(profile, tool) {
            Ok(Some(pin)) if pin.changed() => Some(crate::pins::change_reason(&pin)),
            Ok(_) => None,
            Err(e) => Some(format!("the pinned definition of {tool} cannot be read: {e}")),
        }
    }

    /// The forge reads deciding `call` will make (the PR's head and base for a merge or a
    /// review): pure, from the config and the call alone, so a gateway makes them before it
    /// decides. Empty for a call that is refused before the workflow or has no PR.
    pub fn forge_reads(&self, call: &Call<'_>) -> Vec<(&'static str, Map<String, Value>)> {
        let canonical = self.canonical(call);
        if canonical.is_err() {
            return Vec::new();
        }
        let arguments = parsed_arguments(call, &canonical);
        let parsed = Call { arguments, ..call.clone() };
        let policy = self.policy(&parsed);
        let (true, Some(arguments)) = (policy.permitted, arguments) else { return Vec::new() };
        let mut reads = policy.action.as_deref().map(|a| workflow::reads(a, arguments)).unwrap_or_default();
        // Under a forge profile a file or branch tool's call is judged against the default
        // branch the forge reports.
        if self.config.forge.is_some() {
            reads.extend(workflow::branch_reads(call.tool, arguments));
        }
        reads
    }

    /// The caller as the workflow knows it: its worker's client and session.
    pub fn actor(&self, call: &Call<'_>) -> Result<fleetgate_core::workflow::Actor, String> {
        let Caller::Worker { identity, .. } = &call.caller else {
            return Err("no worker makes this call".into());
        };
        let row = self.store.get_worker(identity).map_err(|e| format!("the registry cannot be read: {e}"))?;
        let row = row.ok_or_else(|| format!("worker {identity} is not registered"))?;
        Ok(fleetgate_core::workflow::Actor {
            worker: row.worker_identity,
            profile: call.member.profile.clone(),
            client: row.client_name,
            session: row.session_id,
        })
    }

    fn workflow_call<'c>(
        &'c self,
        call: &'c Call<'_>,
        action: &'c str,
        actor: &'c fleetgate_core::workflow::Actor,
    ) -> WorkflowCall<'c> {
        WorkflowCall {
            action,
            arguments: call.arguments,
            actor,
            remote: &self.config.workflow.remote,
            independence: self.config.workflow.independent_review,
            decision_lock: self.config.workflow.decision_lock,
            issue_lock: self.config.workflow.issue_lock,
            pinnable: call
                .schema
                .and_then(|s| s.get("properties"))
                .and_then(Value::as_object)
                .is_none_or(|p| p.contains_key(fleetgate_core::forge_workflow::MERGE_HEAD_KEY)),
        }
    }

    /// The PR workflow's half of an allowed call whose rule names an action.
    fn judge_workflow(
        &self,
        call: &Call<'_>,
        action: &str,
        now: Timestamp,
    ) -> Result<workflow::Judged, fleetgate_core::workflow::Refusal> {
        let actor = self.actor(call).map_err(|why| fleetgate_core::workflow::Refusal {
            blocker_kind: fleetgate_core::BlockerKind::SessionAttachmentMissing,
            reasons: vec![why],
            operator_action: "attach a live worker to this session before a workflow call".into(),
        })?;
        workflow::judge(&*self.store, call.forge, &self.workflow_call(call, action, &actor), now)
    }

    /// After a forwarded call the downstream accepted: record what it settles for the PR
    /// workflow (a decision at its head, an opened PR's creator, a merge's released leases).
    pub fn settle(&self, call: &Call<'_>, answer: Option<&Value>, now: Timestamp) {
        let Some(action) = self.policy(call).action else { return };
        let Ok(actor) = self.actor(call) else { return };
        let wcall = self.workflow_call(call, &action, &actor);
        match workflow::settle(&*self.store, call.forge, &wcall, answer, now) {
            // What it settled that the log must show: a lock taken, corrected or made moot.
            Ok(events) => {
                for (tool, reason) in events {
                    self.record(AuditEntry {
                        worker_identity: Some(actor.worker.clone()),
                        ..AuditEntry::event(now, &call.member.profile, tool, reason)
                    });
                }
            }
            Err(e) => {
                tracing::warn!(tool = call.tool, error = %e, "the workflow outcome of a forwarded call was not recorded");
            }
        }
    }

    /// The call as the gate judges it: under a forge profile, its canonical arguments (or
    /// why the server could read them otherwise); else as sent.
    fn canonical(&self, call: &Call<'_>) -> Result<Option<Option<Map<String, Value>>>, Ambiguity> {
        if self.config.forge.is_none() {
            return Ok(None);
        }
        canonicalize(call.schema, call.arguments).map(Some)
    }

    fn judge(&self, call: &Call<'_>, now: Timestamp) -> Capability {
        let canonical = self.canonical(call);
        let policy = self.policy(&Call { arguments: parsed_arguments(call, &canonical), ..call.clone() });
        self.judge_parsed(call, canonical, policy, now, Approving::Preview)
    }

    /// [`judge`](Self::judge) with the call's parse and its policy (of the parsed
    /// arguments) already made.
    fn judge_parsed(
        &self,
        call: &Call<'_>,
        canonical: Result<Option<Option<Map<String, Value>>>, Ambiguity>,
        policy: Policy,
        now: Timestamp,
        approving: Approving<'_>,
    ) -> Capability {
        match canonical {
            Ok(None) => self.judge_with(call, policy, now, approving),
            Ok(Some(arguments)) => {
                let canonical = Call { arguments: arguments.as_ref(), ..call.clone() };
                let mut verdict = self.judge_with(&canonical, policy, now, approving);
                if verdict.allowed && verdict.forward.is_none() {
                    verdict.forward = arguments;
                }
                verdict
            }
            Err(ambiguity) => resolve_task_capability(&CapabilityInput {
                ambiguity: Some(&ambiguity),
                ..self.input(call, &policy, None)
            }),
        }
    }

    fn input<'c>(
        &'c self,
        call: &'c Call<'_>,
        policy: &'c Policy,
        evidence: Option<Evidence<'c>>,
    ) -> CapabilityInput<'c> {
        CapabilityInput {
            profile: &call.member.profile,
            role: &call.member.role,
            tool: call.tool,
            class: policy.class,
            role_permitted: policy.permitted,
            role_refusal: policy.refusal.as_ref(),
            ambiguity: None,
            protection: None,
            definition_changed: None,
            store_replaced: None,
            workflow: None,
            approval: None,
            evidence,
        }
    }

    /// [`judge_conditions`](Self::judge_conditions), then — for a call everything else
    /// allows and a rule asks an operator about — the operator's part, last.
    fn judge_with(&self, call: &Call<'_>, policy: Policy, now: Timestamp, approving: Approving<'_>) -> Capability {
        // The rule's name is needed only when it asks: no allocation on every other call.
        let (ask, rule) = (policy.ask, policy.ask.then(|| policy.rule.clone()).flatten());
        let verdict = self.judge_conditions(call, policy, now);
        let overridable = verdict.blocker_kind.filter(|k| {
            self.config.approvals.may_override.contains(k) && !fleetgate_core::approval::NEVER_OVERRIDDEN.contains(k)
        });
        if let (Some(kind), Approving::Ask { principal, .. }) = (overridable, approving) {
            return self.override_refusal(call, verdict, kind, now, principal);
        }
        if !(ask && verdict.allowed) {
            return verdict;
        }
        let why = format!("rule {} asks an operator about this exact call", rule.as_deref().unwrap_or("(unnamed)"));
        let Approving::Ask { principal, held } = approving else {
            let hold = ApprovalHold::Pending { id: "(one is made when the call is)".into(), why };
            return with_approval(verdict, Some(&hold));
        };
        self.approval(call, verdict, why, now, principal, held)
    }

    /// The worker a call is made for, and the digest of exactly that call with `arguments`:
    /// what an approval covers.
    fn exact_call<'c>(call: &Call<'c>, arguments: Option<&Map<String, Value>>) -> (Option<&'c str>, String) {
        let worker = match &call.caller {
            Caller::Worker { identity, .. } => Some(*identity),
            Caller::Nobody(_) => None,
        };
        (worker, call_digest(worker, call.tool, arguments))
    }

    /// Use the approval covering the call `digest` (answered within `[approvals] ttl_seconds`).
    fn use_covering(
        &self,
        digest: &str,
        now: Timestamp,
    ) -> Result<Option<ApprovalRequest>, fleetgate_store::StoreError> {
        self.store.use_approval(digest, now.plus_seconds(-self.config.approvals.ttl_seconds), now)
    }

    /// Record (or find, for the same call) the pending request for `call` with `arguments`.
    #[allow(clippy::too_many_arguments)] // One request's parts, each its own.
    fn request(
        &self,
        call: &Call<'_>,
        worker: Option<&str>,
        principal: Option<&str>,
        arguments: Option<Map<String, Value>>,
        digest: String,
        why: String,
        now: Timestamp,
    ) -> Result<ApprovalRequest, fleetgate_store::StoreError> {
        self.store.request_approval(&ApprovalRequest {
            id: request_id(fleetgate_host::nonce()),
            requested_at: now,
            profile: call.member.profile.clone(),
            role: call.member.role.clone(),
            worker: worker.map(str::to_owned),
            principal: principal.map(str::to_owned),
            tool: call.tool.to_owned(),
            arguments,
            digest,
            why,
            state: fleetgate_core::approval::ApprovalState::Pending,
            answered_by: None,
            answered_at: None,
            answer_reason: None,
            used_at: None,
        })
    }

    /// The operator's part in a real call: the approval that covers exactly what would be
    /// forwarded (worker, tool, arguments — pins included), used once; else the request
    /// recorded (one per call, found again on a retry), and the call refused
    /// `approval_pending`; or, judged again after its request was denied, `approval_denied`.
    fn approval(
        &self,
        call: &Call<'_>,
        mut verdict: Capability,
        why: String,
        now: Timestamp,
        principal: Option<&str>,
        held: Option<&str>,
    ) -> Capability {
        let forwarded = verdict.forward.clone().or_else(|| call.arguments.cloned());
        let (worker, digest) = Self::exact_call(call, forwarded.as_ref());
        let hold = match self.use_covering(&digest, now) {
            Ok(Some(used)) => {
                verdict.blocked_reasons.push(format!(
                    "approval {} of this exact call by {} used (once)",
                    used.id,
                    used.answered_by.as_deref().unwrap_or("an operator")
                ));
                verdict.approval_request = Some(used.id);
                return verdict;
            }
            Err(e) => ApprovalHold::Unavailable { why: format!("{why}, and the approvals could not be read: {e}") },
            Ok(None) => {
                let denied = held
                    .and_then(|id| self.store.approval(id).ok().flatten())
                    .filter(|r| r.state == fleetgate_core::approval::ApprovalState::Denied && r.digest == digest);
                match denied {
                    Some(r) => {
                        let by = match &r.answer_reason {
                            Some(reason) => format!("{} ({reason})", r.answered_by.as_deref().unwrap_or("an operator")),
                            None => r.answered_by.clone().unwrap_or_else(|| "an operator".into()),
                        };
                        ApprovalHold::Denied { id: r.id, by }
                    }
                    None => match self.request(call, worker, principal, forwarded, digest, why.clone(), now) {
                        Ok(recorded) => ApprovalHold::Pending { id: recorded.id, why },
                        Err(e) => ApprovalHold::Unavailable {
                            why: format!("{why}, and the request could not be recorded: {e}"),
                        },
                    },
                }
            }
        };
        with_approval(verdict, Some(&hold))
    }

    /// A refusal `[approvals] may_override` names, for a real call: the approval of exactly
    /// this call (worker, tool, canonical arguments) overrides it once; without one, the
    /// refusal stands and carries the request the operator may grant.
    fn override_refusal(
        &self,
        call: &Call<'_>,
        mut verdict: Capability,
        kind: BlockerKind,
        now: Timestamp,
        principal: Option<&str>,
    ) -> Capability {
        let forwarded = call.arguments.cloned();
        let (worker, digest) = Self::exact_call(call, forwarded.as_ref());
        let refused_because = verdict.blocked_reasons.join("; ");
        match self.use_covering(&digest, now) {
            Ok(Some(used)) => {
                let by = used.answered_by.clone().unwrap_or_else(|| "an operator".into());
                return Capability {
                    allowed: true,
                    blocker_kind: None,
                    blocked_reasons: vec![format!(
                        "{kind} overridden once by approval {} of {by}: {refused_because}",
                        used.id
                    )],
                    operator_action: None,
                    forward: forwarded,
                    approval_request: Some(used.id),
                    ..verdict
                };
            }
            Ok(None) => {}
            Err(e) => {
                verdict.blocked_reasons.push(format!("the approvals could not be read: {e}"));
                return verdict;
            }
        }
        let why = format!("overrides {kind}: {refused_because}");
        match self.request(call, worker, principal, forwarded, digest, why, now) {
            Ok(recorded) => {
                verdict.blocked_reasons.push(format!(
                    "an operator may override this refusal for this exact call: approval request {}",
                    recorded.id
                ));
                let action = verdict.operator_action.take().unwrap_or_default();
                verdict.operator_action = Some(format!(
                    "{action}; or override it for this exact call, once: `fleetgate approvals approve {}`",
                    recorded.id
                ));
                verdict.approval_request = Some(recorded.id);
            }
            Err(e) => verdict.blocked_reasons.push(format!("its override request could not be recorded: {e}")),
        }
        verdict
    }

    /// Every condition of the call handed to the one resolver: protected branches (under a
    /// forge profile), a changed definition, a replaced store, the fleet and session
    /// evidence, then the PR workflow — each gathered only when nothing before it refuses.
    fn judge_conditions(&self, call: &Call<'_>, policy: Policy, now: Timestamp) -> Capability {
        let role_permitted = policy.permitted;
        let empty = Map::new();
        // Only the file and branch tools, and a merge (which may delete its branch), are
        // judged against the protected branches: no other call pays for it.
        let judged = workflow::BRANCH_TOOLS.contains(&call.tool) || call.tool == "pull_request_write";
        let protection = match (&self.config.forge, role_permitted && judged) {
            (Some(_), true) => {
                let args = call.arguments.unwrap_or(&empty);
                match workflow::forge_default_branch(call.forge, call.tool, args) {
                    Ok(forge_default) => {
                        let protected = Protection { forge_default, ..self.config.workflow.protection.clone() };
                        fleetgate_core::protect::judge(&protected, call.tool, args)
                            .or_else(|| workflow::forge_branch_violation(call.forge, call.tool, args, &protected))
                    }
                    // A file or branch write whose repository the forge cannot describe fails
                    // closed: the configured default branch may not be the real one.
                    Err(why) => Some(Violation {
                        reason: format!("the repository's default branch could not be read from the forge: {why}"),
                        action: fleetgate_core::protect::UNREAD_ACTION,
                    }),
                }
            }
            _ => None,
        };
        let changed = role_permitted.then(|| self.changed_definition(&call.member.profile, call.tool)).flatten();
        let base = CapabilityInput {
            protection: protection.as_ref(),
            definition_changed: changed.as_deref(),
            ..self.input(call, &policy, None)
        };
        if !needs_evidence(policy.class, role_permitted) || protection.is_some() || changed.is_some() {
            return resolve_task_capability(&base);
        }
        // A store deleted or replaced under this process: its evidence, its audit and its
        // leases are in a file no one else reads.
        if let Err(e) = self.store.check_location() {
            let why = e.to_string();
            return resolve_task_capability(&CapabilityInput { store_replaced: Some(&why), ..base });
        }
        let snap = self.snapshot(now, Some(&call.member.namespace));
        let provenance = session_provenance(&*self.store, &*self.observer, &call.caller, &self.config.env_prefix, now);
        let evidence = Evidence { diagnostics: &snap.diagnostics, provenance: &provenance, inventory: &snap.inventory };
        let verdict = resolve_task_capability(&CapabilityInput { evidence: Some(evidence), ..base });
        let Some(action) = policy.action.as_deref().filter(|_| verdict.allowed) else { return verdict };
        match self.judge_workflow(call, action, now) {
            Err(refusal) => {
                resolve_task_capability(&CapabilityInput { evidence: Some(evidence), workflow: Some(&refusal), ..base })
            }
            Ok(judged) => {
                let mut verdict = verdict;
                verdict.blocked_reasons.extend(judged.note);
                if !judged.pins.is_empty() {
                    let mut forward = call.arguments.cloned().unwrap_or_default();
                    forward.extend(judged.pins);
                    verdict.forward = Some(forward);
                }
                verdict
            }
        }
    }

    /// A real call: [`resolve`](Self::resolve), and record the decision in the audit log
    /// under the caller's worker and principal. An allowed mutating call waits until its
    /// entry is committed and is refused (`audit_unavailable`) when it is not: no mutation
    /// is forwarded unaudited. Any other entry is queued; one that cannot be adds its
    /// reason to the verdict. Never silent.
    pub fn decide(&self, call: &Call<'_>, now: Timestamp, principal: Option<String>) -> Capability {
        self.decide_as(call, now, principal, None)
    }

    /// [`decide`](Self::decide) again, for a call held for the approval request `held`
    /// since answered: approved, the approval is used; denied, the call is refused
    /// `approval_denied`.
    pub fn decide_held(&self, call: &Call<'_>, now: Timestamp, principal: Option<String>, held: &str) -> Capability {
        self.decide_as(call, now, principal, Some(held))
    }

    fn decide_as(&self, call: &Call<'_>, now: Timestamp, principal: Option<String>, held: Option<&str>) -> Capability {
        let canonical = self.canonical(call);
        let policy = self.policy(&Call { arguments: parsed_arguments(call, &canonical), ..call.clone() });
        let judged = self.auditor.as_ref().map(|_| self.judged_call(call, &canonical, &policy));
        let approving = Approving::Ask { principal: principal.as_deref(), held };
        let mut verdict = self.judge_parsed(call, canonical, policy, now, approving);
        if let Some(auditor) = &self.auditor {
            self.audit(auditor, call, &mut verdict, now, principal, judged);
        }
        if verdict.allowed {
            self.touch_leases(call, verdict.forward.as_ref(), now);
        }
        verdict
    }

    /// The call as judged, for its audit entry: the role, the class and rule of its policy,
    /// the rule set, and its arguments — the canonical parse when there is one, else as sent
    /// (an ambiguous call's) — as `[audit] arguments` keeps them.
    fn judged_call(
        &self,
        call: &Call<'_>,
        canonical: &Result<Option<Option<Map<String, Value>>>, Ambiguity>,
        policy: &Policy,
    ) -> JudgedCall {
        JudgedCall {
            role: call.member.role.clone(),
            class: policy.class,
            tool_class: Some(self.classify(call.tool, call.read_only_hint)),
            rule: policy.rule.clone(),
            rules: self.rules_digest.to_string(),
            arguments: keep_arguments(parsed_arguments(call, canonical), self.config.audit_arguments),
        }
    }

    #[allow(clippy::too_many_arguments)] // One decision's parts, each its own.
    fn audit(
        &self,
        auditor: &Auditor,
        call: &Call<'_>,
        verdict: &mut Capability,
        now: Timestamp,
        principal: Option<String>,
        judged: Option<JudgedCall>,
    ) {
        let worker = match &call.caller {
            Caller::Worker { identity, .. } => Some((*identity).to_owned()),
            Caller::Nobody(_) => None,
        };
        let entry = AuditEntry {
            id: None,
            at: now,
            profile: call.member.profile.clone(),
            worker_identity: worker,
            tool: call.tool.to_owned(),
            allowed: verdict.allowed,
            blocker_kind: verdict.blocker_kind.map(|k| k.as_str().to_owned()),
            reasons: verdict.blocked_reasons.clone(),
            principal,
            call: judged.map(Box::new),
        };
        let durable = verdict.allowed && verdict.classification == ToolClass::Mutating;
        let receipt = if durable { auditor.record(entry) } else { auditor.queue(entry) };
        match receipt.problem() {
            Some(problem) if durable => audit_refusal(verdict, problem),
            Some(problem) => verdict.blocked_reasons.push(problem),
            None => {}
        }
    }

    /// The verdict of a call the role policy alone decides — a read-only call, or one the
    /// role may not make — from memory, with its audit entry queued; `None` for any call
    /// that needs the store or the forge (a permitted mutating call, a workflow action,
    /// an enforced pin, a PR lease to advance): ask [`decide`](Self::decide). Never blocks.
    pub fn decide_now(&self, call: &Call<'_>, now: Timestamp, principal: Option<String>) -> Option<Capability> {
        // An ambiguous call is refused from memory; a canonical one is judged (and
        // forwarded) as parsed. Parsed once, its policy decided once.
        let canonical = self.canonical(call);
        let arguments = parsed_arguments(call, &canonical);
        let policy = self.policy(&Call { arguments, ..call.clone() });
        let permitted = policy.permitted;
        if canonical.is_ok()
            && (needs_evidence(policy.class, permitted)
                || policy.action.is_some()
                || (permitted && policy.ask)
                || (!permitted && self.config.approvals.may_override.contains(&BlockerKind::RoleNotPermitted))
                || (permitted && self.config.tools.pin == fleetgate_core::capability::PinMode::Enforce)
                || (permitted && arguments.and_then(fleetgate_core::forge_workflow::pr_target).is_some()))
        {
            return None;
        }
        let judged = self.auditor.as_ref().map(|_| self.judged_call(call, &canonical, &policy));
        let mut verdict = self.judge_parsed(call, canonical, policy, now, Approving::Preview);
        if let Some(auditor) = &self.auditor {
            // Never a durable entry: no allowed mutation gets here.
            self.audit(auditor, call, &mut verdict, now, principal, judged);
        }
        Some(verdict)
    }

    /// Queue `entry` for the audit log (a gate without an auditor records nothing).
    pub fn record(&self, entry: AuditEntry) {
        if let Some(auditor) = &self.auditor {
            auditor.queue(entry);
        }
    }

    /// Wait, at most `within`, until every audit entry queued so far is committed.
    pub fn flush_audit(&self, within: std::time::Duration) -> bool {
        self.auditor.as_ref().is_none_or(|auditor| auditor.flush(within))
    }

    /// A gated call of a lease holder on its PR advances the lease's `last_activity`.
    fn touch_leases(&self, call: &Call<'_>, forwarded: Option<&Map<String, Value>>, now: Timestamp) {
        let Caller::Worker { identity, .. } = &call.caller else { return };
        let arguments = forwarded.or(call.arguments);
        let Some(target) = arguments.and_then(fleetgate_core::forge_workflow::pr_target) else { return };
        let pr = target.key(&self.config.workflow.remote);
        let ttl = self.config.workflow.lease_ttl_seconds;
        if let Err(e) = self.store.touch_pr_leases(&pr, identity, ttl, now) {
            tracing::warn!(%pr, error = %e, "a lease's last activity was not advanced");
        }
    }
}

/// The arguments a call is judged by: its canonical parse when it has one, else as sent
/// (no forge profile, or an ambiguous call, which is refused before anything reads them).
fn parsed_arguments<'a>(
    call: &Call<'a>,
    canonical: &'a Result<Option<Option<Map<String, Value>>>, Ambiguity>,
) -> Option<&'a Map<String, Value>> {
    match canonical {
        Ok(Some(arguments)) => arguments.as_ref(),
        _ => call.arguments,
    }
}

/// What operators do about `audit_unavailable`.
pub const AUDIT_UNAVAILABLE_ACTION: &str = "the store did not take the call's audit entry in time, so the mutation \
     was not forwarded: check the store (`fleetgate runtime context`, a lock held on it, a full disk, a \
     filesystem gone read-only or failing), then retry";

/// An allowed mutation whose audit entry is not committed: refused.
fn audit_refusal(verdict: &mut Capability, problem: String) {
    *verdict = refused(verdict.clone(), BlockerKind::AuditUnavailable, problem, AUDIT_UNAVAILABLE_ACTION);
}

/// `verdict` (the resolver's, before the evidence) turned into a refusal by `kind`.
fn refused(mut verdict: Capability, kind: BlockerKind, reason: String, action: &str) -> Capability {
    verdict.forward = None;
    verdict.allowed = false;
    verdict.blocker_kind = Some(kind);
    verdict.blocked_reasons = vec![reason];
    verdict.operator_action = Some(action.to_owned());
    verdict
}
