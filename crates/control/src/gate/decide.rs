//! [`Gate`]: one call in, one verdict out, in three steps.
//!
//! 1. **Gather.** Under a forge profile the call's arguments are parsed once the way the
//!    server reads them (`fleetgate_core::forge_call`); the forge dialect states what the call
//!    does ([`fleetgate_core::effect::Effect`]: the branches it moves, the PRs it changes, the
//!    files it writes on the server's host), reading the forge for what the arguments do not
//!    say; the invariants judge that effect; the rules say who may make the call; then — unless
//!    what is gathered so far already refuses the call for good — the store's location, the
//!    fleet and session evidence, the PR workflow's judgement and pins, and the operator's
//!    answers on record for exactly the call that would be forwarded.
//! 2. **Decide.** Everything is handed to the one pure resolver
//!    (`fleetgate_core::capability::resolve_task_capability`), once. Its verdict is final:
//!    what to forward or perform, which approvals to use, which request to record, what the
//!    call settles, whether it is held, and every text an operator reads.
//! 3. **Apply** (a real call): record the request (core names it in the verdict,
//!    `Capability::requested`), use the approvals, audit, touch the leases. Applying can only
//!    refuse what the resolver allowed (an approval another identical call used first, an
//!    audit entry that is not durable), through core's `Capability::refused_in_apply` with the
//!    blocker's one operator text — never the reverse.
//!
//! `capability`, the `…resolve_task_capability` control tool and the gateway all go through
//! the same gathering and the same decision; a preview only skips the apply.

use super::observer::Observer;
use super::session::{Caller, session_provenance};
use super::shadow::{SHADOW_EVENT, ShadowRules};
use super::snapshot::{Snapshot, snapshot};
use super::statement::{Canonical, Stated, Statement, Stating};
use super::workflow::{self, Forge, ForgeReader, Judged, WorkflowCall};
use crate::audit::Auditor;
use fleetgate_config::{FleetConfig, Member};
use fleetgate_core::BlockerKind;
use fleetgate_core::Timestamp;
use fleetgate_core::approval::{ApprovalRequest, ExactCall, call_digest, on_record, override_digest, request_id};
use fleetgate_core::audit::{AuditEntry, JudgedCall, keep_arguments};
use fleetgate_core::capability::{
    Approvals, Capability, CapabilityInput, Evidence, Finish, RequestPlan, RoleRefusal, ToolClass, classify_tool,
    needs_approvals, needs_evidence, overridable, resolve_task_capability,
};
use fleetgate_core::dialect::{Dialect, Schemas, Unlisted};
use fleetgate_core::effect::{Answered, Effect, Invariant, Judgement, Read};
use fleetgate_core::provenance::Provenance;
use fleetgate_core::rules::{ArgMatch, Does, Rule, operations};
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
    /// Where the gate reads the forge: what the call would do, the PR's current head (a
    /// gateway: the reads it made before deciding; the CLI: its forge command).
    pub forge: Option<&'a dyn ForgeReader>,
    /// The tool schemas the running server lists (what the gate's reads are built from);
    /// `None`: none known, every read under its dialect's newest names.
    pub schemas: Option<&'a dyn Schemas>,
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
    /// The workflow action the matching rule names (used only for a call no forge dialect
    /// states: the dialect's statement of what a call is wins).
    pub action: Option<String>,
    /// The matching rule's origin.
    pub rule: Option<String>,
    /// The matching rule asks an operator about the call (`decision = "ask"`).
    pub ask: bool,
    /// Who may make the call depends on what it does, which is not established: why (the
    /// call is refused `forge_unavailable`, never decided on the rest).
    pub undetermined: Option<String>,
}

/// Previewing (`capability`, the control tool) or deciding a real call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Decide, apply nothing.
    Preview,
    /// Decide and apply.
    Real,
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

/// Everything one decision is made from, gathered before the resolver is asked.
#[derive(Debug)]
struct Gathered {
    /// The parse: `Ok(None)` without a forge profile (as sent).
    canonical: Canonical,
    policy: Policy,
    /// Under a forge profile: what the call does.
    stated: Option<Stated>,
    judgement: Judgement,
    class: ToolClass,
    /// The call's workflow action: the dialect's, else (a call it does not state) the rule's.
    action: Option<String>,
    definition_changed: Option<String>,
    store_replaced: Option<String>,
    evidence: Option<(Snapshot, Provenance)>,
    workflow: Option<Judged>,
    /// What would be forwarded: the parse with the workflow's pins (`None`: as sent).
    forward: Option<Map<String, Value>>,
    /// What an approval covers when it is not what is forwarded: a merge the gateway makes
    /// itself, with the head it pins ([`REST_PIN_KEY`]).
    covered: Option<Map<String, Value>>,
    worker: Option<String>,
    /// [`call_digest`] of the worker, the tool and what would be forwarded.
    digest: String,
    approvals: Option<Approvals>,
    /// The shadow candidate's role policy and invariant judgement of the call.
    shadow: Option<(Policy, Judgement)>,
}

impl Gathered {
    /// Why what the call does is not established, as far as `policy` needs it: the dialect's
    /// statement, else a rule of what the call does that cannot be told.
    fn unestablished<'a>(&'a self, policy: &'a Policy) -> Option<&'a str> {
        let stated = self.stated.as_ref().and_then(|s| s.effect.unestablished.first());
        stated.or(policy.undetermined.as_ref()).map(String::as_str)
    }

    /// The arguments the call is judged by: the parse, else as sent.
    fn arguments<'a>(&'a self, call: &Call<'a>) -> Option<&'a Map<String, Value>> {
        match &self.canonical {
            Ok(Some(arguments)) => arguments.as_ref(),
            _ => call.arguments,
        }
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
    /// The invariants the roster lifts.
    lifted: Arc<[fleetgate_core::effect::Invariant]>,
    /// The forge dialect `[fleet] forge` names.
    dialect: Option<&'static dyn Dialect>,
    /// A candidate rule set every live decision is also judged by, never enforced.
    shadow: Option<Arc<ShadowRules>>,
}

impl Gate {
    /// A gate that does not audit (the `capability` CLI, the control tool).
    pub fn new(config: Arc<FleetConfig>, store: Arc<dyn Store>, observer: Arc<dyn Observer>) -> Self {
        let rules_digest = config.rules_digest().into();
        let lifted = config.lifted().into();
        let dialect = config.dialect();
        Self { config, store, observer, auditor: None, rules_digest, lifted, dialect, shadow: None }
    }

    /// The same gate, judging every live decision also by `shadow`'s rules (never enforced).
    pub fn with_shadow(mut self, shadow: ShadowRules) -> Self {
        self.shadow = Some(Arc::new(shadow));
        self
    }

    /// The same gate, judging under `dialect` in place of the one `[fleet] forge` names (an
    /// embedding's own dialect; a test's that counts what it is asked).
    pub fn with_dialect(mut self, dialect: &'static dyn Dialect) -> Self {
        self.dialect = Some(dialect);
        self
    }

    /// The forge dialect the gate judges under.
    pub fn dialect(&self) -> Option<&'static dyn Dialect> {
        self.dialect
    }

    /// The candidate in shadow, when one.
    pub fn shadow(&self) -> Option<&ShadowRules> {
        self.shadow.as_deref()
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
    /// class; `effect`: what the call does, as its dialect states it (`None`: not stated).
    pub fn policy(&self, call: &Call<'_>, effect: Option<&Effect>) -> Policy {
        self.policy_of(&self.config, call, effect)
    }

    /// The role policy of one call under `config`'s rules (the running roster's, or a
    /// shadow candidate's), judging a rule of what the call does on `effect` — the very
    /// statement the invariants judge — under `config`'s protected branches.
    fn policy_of(&self, config: &FleetConfig, call: &Call<'_>, effect: Option<&Effect>) -> Policy {
        let role = &call.member.role;
        let globs = config.role_policy(role).permits(call.tool);
        let pr = self.pr_target(call.tool, call.arguments).map(|t| t.pr);
        let ops = effect.and_then(|e| operations(e, pr, &config.workflow.protection));
        let does = ops.as_deref().map_or(Does::Unknown, Does::Known);
        match config.rules.decide_with(role, call.tool, call.arguments, does, globs) {
            Some(decided) => Policy {
                // Undetermined: the gate refuses it for what is not established, not by role.
                permitted: decided.permitted || decided.undetermined.is_some(),
                class: decided.class.unwrap_or_else(|| self.classify(call.tool, call.read_only_hint)),
                refusal: decided.reason.map(|reason| RoleRefusal { reason, may: decided.may }),
                action: decided.action,
                rule: decided.rule,
                ask: decided.ask,
                undetermined: decided.undetermined,
            },
            None => Policy {
                permitted: globs,
                class: self.classify(call.tool, call.read_only_hint),
                refusal: None,
                action: None,
                rule: None,
                ask: false,
                undetermined: None,
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

    /// The verdict for `call` as of `now`: the same gathering and the same decision as a
    /// real call, approvals and overrides on record included; records and uses nothing.
    pub fn resolve(&self, call: &Call<'_>, now: Timestamp) -> Capability {
        let gathered = self.gather(call, self.stated(call), now);
        self.decided(call, &gathered, Mode::Preview)
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

    /// What a [`Statement`] of `call` is made from: the roster's dialect, the call's tool and
    /// schema, the schemas the server lists.
    fn stating<'c>(&self, call: &Call<'c>) -> Stating<'c> {
        Stating {
            dialect: self.dialect,
            tool: call.tool,
            schema: call.schema,
            schemas: call.schemas.unwrap_or(&Unlisted),
        }
    }

    /// `call` parsed once, with what its dialect states of it from its arguments alone (the
    /// reads it asks for are [`Statement`]'s to be fed).
    pub fn statement(&self, call: &Call<'_>) -> Statement {
        Statement::start(self.stating(call), call.arguments)
    }

    /// The answers to reads a statement of `call` asked for, fed in (each round's once).
    pub fn feed(&self, call: &Call<'_>, statement: &mut Statement, answers: Vec<Answered>) {
        statement.feed(self.stating(call), answers);
    }

    /// `statement` of `call` stated again from the arguments alone, its parse kept.
    pub fn restate(&self, call: &Call<'_>, statement: &mut Statement) {
        statement.restart(self.stating(call));
    }

    /// `call` parsed and stated, its forge reads made through `call.forge` round by round;
    /// reads it cannot make are listed as missing, and leave the effect unestablished.
    fn stated(&self, call: &Call<'_>) -> Statement {
        let mut statement = self.statement(call);
        statement.read_through(self.stating(call), call.forge);
        statement
    }

    /// The forge reads deciding `call` still needs, given the reads made so far (the
    /// gateway's, in `call.forge`): what the call would do, and the PR's head and base for a
    /// merge or a review. The gateway makes them, then asks again, until none is left.
    pub fn reads(&self, call: &Call<'_>) -> Vec<Read> {
        let statement = self.stated(call);
        let mut reads = statement.stated.as_ref().map(|s| s.missing.clone()).unwrap_or_default();
        for read in self.workflow_reads(call, &statement) {
            if !reads.contains(&read) {
                reads.push(read);
            }
        }
        reads
    }

    /// The reads `statement` of `call` still waits for: what the call would do, else — once
    /// stated — the PR's head and base for a workflow action, those `call.forge` has not made.
    pub fn pending_reads(&self, call: &Call<'_>, statement: &Statement) -> Vec<Read> {
        match statement.stated {
            None => statement.asked().to_vec(),
            Some(_) => self.workflow_reads(call, statement),
        }
    }

    /// The PR reads a stated call's workflow action needs, those `call.forge` has not made.
    fn workflow_reads(&self, call: &Call<'_>, statement: &Statement) -> Vec<Read> {
        let (Some(stated), Ok(Some(Some(args)))) = (&statement.stated, &statement.canonical) else {
            return Vec::new();
        };
        let action = stated.effect.action.filter(|_| stated.effect.unknown.is_none());
        match (action, self.forge(call)) {
            (Some(action), Some(forge)) => workflow::reads(forge, call.tool, action, args),
            _ => Vec::new(),
        }
    }

    /// The caller as the workflow knows it: its worker's client and session.
    pub fn actor(&self, call: &Call<'_>) -> Result<fleetgate_core::workflow::Actor, NoActor> {
        let Caller::Worker { identity, principal, .. } = &call.caller else {
            return Err(NoActor::NoWorker);
        };
        let row = self.store.get_worker(identity).map_err(NoActor::Registry)?;
        let row = row.ok_or_else(|| NoActor::Unregistered((*identity).to_owned()))?;
        Ok(fleetgate_core::workflow::Actor {
            worker: row.worker_identity,
            profile: call.member.profile.clone(),
            client: row.client_name,
            session: row.session_id,
            principal: principal.map(str::to_owned),
        })
    }

    fn workflow_call<'c>(
        &'c self,
        tool: &'c str,
        arguments: Option<&'c Map<String, Value>>,
        action: &'c str,
        actor: &'c fleetgate_core::workflow::Actor,
    ) -> WorkflowCall<'c> {
        WorkflowCall {
            tool,
            action,
            arguments,
            actor,
            remote: &self.config.workflow.remote,
            independence: self.config.workflow.independent_review,
            decision_lock: self.config.workflow.decision_lock,
            issue_lock: self.config.workflow.issue_lock,
        }
    }

    /// After a forwarded call the downstream accepted: record what it settles for the PR
    /// workflow (a decision at its head, an opened PR's creator, a merge's released leases).
    /// `action` is the workflow action the decision stated for the call.
    pub fn settle(&self, call: &Call<'_>, settles: &str, answer: Option<&Value>, now: Timestamp) {
        let Ok(actor) = self.actor(call) else { return };
        let Some(forge) = self.forge(call) else { return };
        let (action, at) = workflow::settled(settles);
        let wcall = self.workflow_call(call.tool, call.arguments, &action, &actor);
        match workflow::settle(&*self.store, forge, &wcall, at, answer, now) {
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

    /// How `call` reads the forge: its dialect, the server's schemas, its reader.
    fn forge<'c>(&self, call: &Call<'c>) -> Option<Forge<'c>> {
        Some(Forge { dialect: self.dialect?, schemas: call.schemas.unwrap_or(&Unlisted), reader: call.forge })
    }

    /// The PR a call names, under the roster's dialect.
    fn pr_target(&self, tool: &str, args: Option<&Map<String, Value>>) -> Option<fleetgate_core::dialect::PrTarget> {
        self.dialect?.pr_target(tool, args?)
    }

    /// The class of a call: a write the dialect states is mutating whatever a rule says; a
    /// rule may make a read mutating, never a write read-only.
    fn class_of(policy: &Policy, stated: Option<&Stated>) -> ToolClass {
        match stated.map(|s| &s.effect) {
            Some(effect) if effect.unknown.is_none() && !effect.is_read() => ToolClass::Mutating,
            _ => policy.class,
        }
    }

    /// The workflow action of a call: the dialect's statement when it states the call, else
    /// the matching rule's.
    fn action_of(policy: &Policy, stated: Option<&Stated>) -> Option<String> {
        match stated.map(|s| &s.effect) {
            Some(effect) if effect.unknown.is_none() => effect.action.map(str::to_owned),
            _ => policy.action.clone(),
        }
    }

    /// What is known of `call` without the store or the forge: its parse, what it does, the
    /// invariants and the role policy on it, its class and workflow action, its worker.
    fn known(&self, call: &Call<'_>, statement: Statement) -> Gathered {
        let Statement { canonical, stated, .. } = statement;
        let arguments = match &canonical {
            Ok(Some(arguments)) => arguments.as_ref(),
            _ => call.arguments,
        };
        let effect = stated.as_ref().map(|s| &s.effect);
        let policy = self.policy(&Call { arguments, ..call.clone() }, effect);
        let judgement = stated.as_ref().map_or_else(Judgement::default, |s| {
            fleetgate_core::effect::judge(&s.effect, &call.member.role, &self.config.workflow.protection, &self.lifted)
        });
        Gathered {
            digest: String::new(),
            forward: canonical.as_ref().ok().cloned().flatten().flatten(),
            class: Self::class_of(&policy, stated.as_ref()),
            action: Self::action_of(&policy, stated.as_ref()),
            canonical,
            policy,
            stated,
            judgement,
            definition_changed: None,
            store_replaced: None,
            evidence: None,
            workflow: None,
            covered: None,
            worker: call.caller.worker().map(str::to_owned),
            approvals: None,
            shadow: None,
        }
    }

    /// The shadow candidate's role policy and invariant judgement of the call `g` knows.
    fn shadow_of(&self, call: &Call<'_>, g: &Gathered) -> Option<(Policy, Judgement)> {
        let shadow = self.shadow.as_ref()?;
        let effect = g.stated.as_ref().map(|s| &s.effect);
        let policy = self.policy_of(&shadow.config, &Call { arguments: g.arguments(call), ..call.clone() }, effect);
        let judgement = effect.map_or_else(Judgement::default, |e| {
            fleetgate_core::effect::judge(e, &call.member.role, &shadow.config.workflow.protection, &shadow.lifted)
        });
        Some((policy, judgement))
    }

    /// Step 1: everything the decision is made from, `statement` the call's parse and
    /// effect. The fleet and session evidence, the workflow's judgement and the approvals on
    /// record are gathered only when the verdict can depend on them ([`needs_evidence`],
    /// [`needs_approvals`]).
    fn gather(&self, call: &Call<'_>, statement: Statement, now: Timestamp) -> Gathered {
        let mut g = self.known(call, statement);
        g.digest = call_digest(g.worker.as_deref(), call.tool, g.arguments(call));
        g.definition_changed =
            g.canonical.is_ok().then(|| self.changed_definition(&call.member.profile, call.tool)).flatten();
        g.shadow = self.shadow_of(call, &g);
        // The shadow's decision may need what the live one does not: gathered for both.
        let needs = needs_evidence(&self.input(call, &g, None))
            || g.shadow.as_ref().is_some_and(|s| needs_evidence(&self.shadow_input(call, &g, s, None)));
        if !needs {
            return self.with_approvals(call, g, now);
        }
        // A store deleted or replaced under this process: its evidence, its audit and its
        // leases are in a file no one else reads.
        g.store_replaced = self.store.check_location().err().map(|e| e.to_string());
        let snap = self.snapshot(now, Some(&call.member.namespace));
        let provenance = session_provenance(&*self.store, &*self.observer, &call.caller, &self.config.env_prefix, now);
        g.evidence = Some((snap, provenance));
        if let Some(action) = g.action.clone() {
            self.judge_workflow(call, &mut g, &action, now);
        }
        self.judge_issue_locks(call, &mut g, now);
        self.with_approvals(call, g, now)
    }

    /// The PR workflow's judgement of `action`, and what it pins into what is forwarded (or
    /// into what an approval covers, for a merge the gateway makes itself).
    fn judge_workflow(&self, call: &Call<'_>, g: &mut Gathered, action: &str, now: Timestamp) {
        let judged = match (self.actor(call), self.forge(call)) {
            (Ok(actor), Some(forge)) => {
                let args = g.arguments(call).cloned();
                let wcall = self.workflow_call(call.tool, args.as_ref(), action, &actor);
                workflow::judge(&*self.store, forge, &wcall, now)
            }
            (Ok(_), None) => Judged {
                refusal: Some(fleetgate_core::workflow::Refusal::of(
                    BlockerKind::ForgeUnavailable,
                    "a workflow action needs a forge dialect ([fleet] forge) to read the PR with".into(),
                )),
                ..Judged::default()
            },
            (Err(why), _) => Judged {
                refusal: Some(fleetgate_core::workflow::Refusal::of(
                    BlockerKind::SessionAttachmentMissing,
                    why.to_string(),
                )),
                ..Judged::default()
            },
        };
        if !judged.pins.is_empty() {
            let mut forward = g.arguments(call).cloned().unwrap_or_default();
            forward.extend(judged.pins.clone());
            g.digest = call_digest(g.worker.as_deref(), call.tool, Some(&forward));
            g.forward = Some(forward);
        }
        // A merge the gateway makes itself: what an approval covers is pinned at its head
        // too, as a forwarded pin would be.
        if let Some(rest) = &judged.rest {
            let mut covered = g.arguments(call).cloned().unwrap_or_default();
            covered.insert(REST_PIN_KEY.into(), rest.body.get("sha").cloned().unwrap_or_default());
            g.digest = call_digest(g.worker.as_deref(), call.tool, Some(&covered));
            g.covered = Some(covered);
        }
        g.workflow = Some(judged);
    }

    /// The issue locks against the issues the call's texts close, reopen or (a PR's own)
    /// name, as the dialect states them (`workflow::judge_issue_locks`): a refusal joins the
    /// workflow's, unless it already refuses.
    fn judge_issue_locks(&self, call: &Call<'_>, g: &mut Gathered, now: Timestamp) {
        let Some(stated) = g.stated.as_ref() else { return };
        if stated.effect.issues.is_empty() || g.workflow.as_ref().is_some_and(|w| w.refusal.is_some()) {
            return;
        }
        let (Ok(actor), Some(forge)) = (self.actor(call), self.forge(call)) else { return };
        let args = g.arguments(call).cloned();
        let action = g.action.clone().unwrap_or_default();
        let wcall = self.workflow_call(call.tool, args.as_ref(), &action, &actor);
        let judged = workflow::judge_issue_locks(&*self.store, forge, &wcall, &stated.effect.issues, now);
        match (&mut g.workflow, judged.refusal) {
            (Some(w), Some(refusal)) => w.refusal = Some(refusal),
            (None, Some(refusal)) => g.workflow = Some(Judged { refusal: Some(refusal), ..Judged::default() }),
            (Some(w), None) => {
                if let Some(note) = judged.note {
                    w.note = Some(match w.note.take() {
                        Some(n) => format!("{n}; {note}"),
                        None => note,
                    });
                }
            }
            (None, None) => g.workflow = judged.note.map(|note| Judged { note: Some(note), ..Judged::default() }),
        }
    }

    /// The operator's answers on record for exactly the call `g` would forward, when the
    /// decision can depend on them.
    fn with_approvals(&self, call: &Call<'_>, mut g: Gathered, now: Timestamp) -> Gathered {
        let needs = needs_approvals(&self.input(call, &g, None))
            || g.shadow.as_ref().is_some_and(|s| needs_approvals(&self.shadow_input(call, &g, s, None)));
        if !needs {
            return g;
        }
        let kinds: Vec<BlockerKind> = self
            .config
            .approvals
            .may_override
            .iter()
            .copied()
            .filter(|k| overridable(*k, &self.config.approvals.may_override))
            .collect();
        let mut digests = vec![g.digest.clone()];
        digests.extend(kinds.iter().map(|k| override_digest(&g.digest, *k)));
        let not_before = now.plus_seconds(-self.config.approvals.ttl_seconds);
        let asker = (g.worker.as_deref(), call.tool);
        g.approvals = Some(match self.store.approvals_on_record(&digests, asker, not_before) {
            Ok(on) => {
                // What a request records: the arguments as they would be forwarded.
                let exact = ExactCall { tool: call.tool, arguments: g.forward.as_ref().or(call.arguments) };
                on_record(&on.requests, &on.denials, (&g.digest, exact), &kinds, on.pending_of_worker)
            }
            Err(e) => Approvals { unavailable: Some(e.to_string()), ..Approvals::default() },
        });
        g
    }

    /// The resolver's input, borrowed from what was gathered (`evidence` when gathered).
    fn input<'c>(&'c self, call: &'c Call<'_>, g: &'c Gathered, evidence: Option<Evidence<'c>>) -> CapabilityInput<'c> {
        CapabilityInput {
            profile: &call.member.profile,
            role: &call.member.role,
            tool: call.tool,
            class: g.class,
            ambiguity: g.canonical.as_ref().err(),
            breaches: &g.judgement.breaches,
            lifted: &g.judgement.lifted,
            guarded: &g.judgement.guarded,
            unestablished: g.unestablished(&g.policy),
            role_permitted: g.policy.permitted,
            role_refusal: g.policy.refusal.as_ref(),
            definition_changed: g.definition_changed.as_deref(),
            store_replaced: g.store_replaced.as_deref(),
            evidence,
            workflow: g.workflow.as_ref().and_then(|w| w.refusal.as_ref()),
            forward: g.forward.as_ref(),
            action: g.action.as_deref(),
            ask: g.policy.ask.then(|| g.policy.rule.as_deref().unwrap_or("(unnamed)")),
            approvals: g.approvals.as_ref(),
            may_override: &self.config.approvals.may_override,
            finish: Finish::default(),
        }
    }

    /// The resolver's input for the shadow candidate: the live input with the candidate's
    /// role policy and invariant judgement.
    fn shadow_input<'c>(
        &'c self,
        call: &'c Call<'_>,
        g: &'c Gathered,
        (policy, judgement): &'c (Policy, Judgement),
        evidence: Option<Evidence<'c>>,
    ) -> CapabilityInput<'c> {
        CapabilityInput {
            breaches: &judgement.breaches,
            lifted: &judgement.lifted,
            guarded: &judgement.guarded,
            unestablished: g.unestablished(policy),
            role_permitted: policy.permitted,
            role_refusal: policy.refusal.as_ref(),
            ask: policy.ask.then(|| policy.rule.as_deref().unwrap_or("(unnamed)")),
            ..self.input(call, g, evidence)
        }
    }

    /// Where the shadow candidate would decide the call otherwise than `live`.
    fn shadow_flip(
        &self,
        call: &Call<'_>,
        g: &Gathered,
        live: &Capability,
    ) -> Option<fleetgate_core::capability::ShadowFlip> {
        let parts = g.shadow.as_ref()?;
        let evidence = g.evidence.as_ref().map(|(snap, provenance)| Evidence {
            diagnostics: &snap.diagnostics,
            provenance,
            inventory: &snap.inventory,
        });
        // The candidate is finished as the live verdict is (a merge it would let through
        // unpinned is refused all the same): only what the rules decide can flip.
        let unpinned = self.unpinned(call, g);
        let finish = Finish { unpinned: unpinned.as_deref(), ..Finish::default() };
        let candidate =
            resolve_task_capability(&CapabilityInput { finish, ..self.shadow_input(call, g, parts, evidence) });
        let (policy, judgement) = parts;
        let rule = match (judgement.breaches.first(), &policy.rule, candidate.blocker_kind) {
            (Some(b), _, Some(BlockerKind::ProtectedBranch | BlockerKind::InvariantViolated)) => {
                format!("invariant `{}`", b.invariant)
            }
            (_, Some(rule), _) => rule.clone(),
            (_, None, Some(kind)) => kind.as_str().to_owned(),
            (_, None, None) => "the role's tools".to_owned(),
        };
        fleetgate_core::capability::ShadowFlip::between(live, &candidate, rule)
    }

    /// Why the call, were it allowed, would go out unpinned: a merge whose arguments carry no
    /// head pin its server declares, the gateway making no pinned merge of its own (the PR
    /// was not read: an operator let a refusal through), and the roster not lifting
    /// `unpinned-merge`. A merge is never forwarded at whatever head the forge has then.
    fn unpinned(&self, call: &Call<'_>, g: &Gathered) -> Option<String> {
        let dialect = self.dialect?;
        let merges = g.stated.as_ref().is_some_and(|s| s.effect.merge.is_some());
        let performs = g.workflow.as_ref().is_some_and(|w| w.rest.is_some());
        if !merges || performs || self.lifted.contains(&Invariant::UnpinnedMerge) {
            return None;
        }
        let pin = dialect.merge_pin()?;
        let pinned = g.forward.as_ref().is_some_and(|f| f.contains_key(pin));
        (!pinned).then(|| {
            format!(
                "the merge `{}` carries no head pin (`{pin}`) and the gateway made no pinned merge of its own: the \
                 forge would land whatever head the PR has then",
                call.tool
            )
        })
    }

    /// Step 2: the one decision, from everything gathered: core's verdict, final.
    fn decided(&self, call: &Call<'_>, g: &Gathered, mode: Mode) -> Capability {
        let evidence = g.evidence.as_ref().map(|(snap, provenance)| Evidence {
            diagnostics: &snap.diagnostics,
            provenance,
            inventory: &snap.inventory,
        });
        let unpinned = self.unpinned(call, g);
        let workflow = g.workflow.as_ref();
        let finish = Finish {
            note: workflow.and_then(|w| w.note.as_deref()),
            at: workflow.and_then(|w| w.at.as_ref()),
            perform: workflow.and_then(|w| w.rest.as_ref()),
            unpinned: unpinned.as_deref(),
            preview: mode == Mode::Preview,
            holds: mode == Mode::Real && self.config.approvals.wait_seconds > 0 && g.worker.is_some(),
        };
        resolve_task_capability(&CapabilityInput { finish, ..self.input(call, g, evidence) })
    }

    /// A real call: gather, decide once, apply — and record the decision in the audit log
    /// under the caller's worker and principal. An allowed mutating call waits until its
    /// entry is committed and is refused (`audit_unavailable`) when it is not: no mutation
    /// is forwarded unaudited. Any other entry is queued; one that cannot be adds its
    /// reason to the verdict. Never silent.
    pub fn decide(&self, call: &Call<'_>, now: Timestamp, principal: Option<String>) -> Capability {
        self.decide_stated(call, self.statement(call), now, principal)
    }

    /// [`decide`](Self::decide) for a call already parsed and stated ([`Statement`], its
    /// reads fed in): what the statement still waits for is read through `call.forge`.
    pub fn decide_stated(
        &self,
        call: &Call<'_>,
        mut statement: Statement,
        now: Timestamp,
        principal: Option<String>,
    ) -> Capability {
        statement.read_through(self.stating(call), call.forge);
        let gathered = self.gather(call, statement, now);
        let mut verdict = self.decided(call, &gathered, Mode::Real);
        verdict.shadow = self.shadow_flip(call, &gathered, &verdict);
        self.apply(call, &gathered, verdict, now, principal)
    }

    /// Step 3: what the decision says to do, done — the request recorded, the approvals
    /// used, the audit entry written, the leases touched.
    fn apply(
        &self,
        call: &Call<'_>,
        g: &Gathered,
        mut verdict: Capability,
        now: Timestamp,
        principal: Option<String>,
    ) -> Capability {
        if let Some(plan) = verdict.request.take() {
            self.record_request(call, g, &mut verdict, plan, principal.as_deref(), now);
        }
        if verdict.allowed {
            let not_before = now.plus_seconds(-self.config.approvals.ttl_seconds);
            for id in verdict.use_approvals.clone() {
                match self.store.use_approval(&id, not_before, now) {
                    Ok(Some(_)) => {}
                    Ok(None) => {
                        verdict = verdict.refused_in_apply(
                            BlockerKind::ApprovalPending,
                            format!("approval {id} was used by another identical call first: nothing was forwarded"),
                        );
                        break;
                    }
                    Err(e) => {
                        verdict = verdict.refused_in_apply(
                            BlockerKind::ApprovalPending,
                            format!("approval {id} could not be used: {e}"),
                        );
                        break;
                    }
                }
            }
        }
        if let Some(auditor) = &self.auditor {
            let judged = self.judged_call(call, g);
            let shadow = verdict.shadow.clone();
            self.audit(auditor, call, &mut verdict, now, principal.clone(), Some(judged));
            // Beside the real decision: what the candidate would have done. An event (allowed,
            // no blocker): it refuses nothing and counts as no refusal.
            if let (Some(flip), Some(candidate)) = (shadow, &self.shadow) {
                let worker = call.caller.worker().map(str::to_owned);
                let blocker = flip.blocker.map(|b| format!(" ({b})")).unwrap_or_default();
                let reasons = vec![
                    format!(
                        "the shadow candidate {} would have {}{blocker} `{}` by {}; the running rules {} it",
                        candidate.digest, flip.to, call.tool, flip.rule, flip.from
                    ),
                    format!("from: {}", flip.from),
                    format!("to: {}", flip.to),
                    format!("rule: {}", flip.rule),
                    format!("candidate: {}", candidate.digest),
                ];
                let entry = AuditEntry {
                    worker_identity: worker,
                    principal,
                    reasons,
                    ..AuditEntry::event(
                        now,
                        &call.member.profile,
                        &format!("{SHADOW_EVENT}{}", call.tool),
                        String::new(),
                    )
                };
                // A failure is logged by the auditor; the shadow never holds up the call.
                let _ = auditor.queue(entry);
            }
        }
        if verdict.allowed {
            self.touch_leases(call, verdict.forward.as_ref(), now);
        }
        verdict
    }

    /// Who may answer a request, and how many must approve: an asking rule's, else the
    /// `[approvals]` defaults (an override's request is always the defaults').
    fn approvers_of(&self, g: &Gathered, asked: bool) -> (Vec<String>, u32) {
        let defaults = &self.config.approvals;
        let rule = g
            .policy
            .rule
            .as_deref()
            .filter(|_| asked && g.policy.ask)
            .and_then(|origin| self.config.rules.rules().iter().find(|r| r.origin == origin));
        let approvers = rule
            .filter(|r| !r.approvers.is_empty())
            .map_or_else(|| defaults.approvers.clone(), |r| r.approvers.clone());
        let required = rule.map(|r| r.required).filter(|n| *n > 0).unwrap_or(defaults.required).max(1);
        (approvers, required)
    }

    /// Record the request a refusal asks an operator with (or find the one already waiting
    /// for the same call), naming it in the verdict.
    fn record_request(
        &self,
        call: &Call<'_>,
        g: &Gathered,
        verdict: &mut Capability,
        plan: RequestPlan,
        principal: Option<&str>,
        now: Timestamp,
    ) {
        let digest = match plan.overrides {
            Some(kind) => override_digest(&g.digest, kind),
            None => g.digest.clone(),
        };
        let request = ApprovalRequest {
            id: request_id(fleetgate_host::nonce()),
            requested_at: now,
            profile: call.member.profile.clone(),
            role: call.member.role.clone(),
            worker: g.worker.clone(),
            principal: principal.map(str::to_owned),
            tool: call.tool.to_owned(),
            arguments: g.covered.clone().or_else(|| g.forward.clone()).or_else(|| call.arguments.cloned()),
            // What it does, in words, from the effect the invariants were judged on, at the
            // head the workflow judged it at.
            does: g.stated.as_ref().map(|s| {
                let head = g.workflow.as_ref().and_then(|w| w.at.as_ref()).map(|(head, _)| head.as_str());
                fleetgate_core::effect::describe(&s.effect, head)
            }),
            digest,
            why: plan.why.clone(),
            ..ApprovalRequest::default()
        };
        let (approvers, required) = self.approvers_of(g, plan.overrides.is_none());
        let request = ApprovalRequest { approvers, required, ..request };
        let recorded = self.store.request_approval(&request);
        let recorded = recorded.as_ref().map(|r| (r.id.as_str(), r.approvers.as_slice()));
        *verdict = verdict.clone().requested(&plan, recorded);
    }

    /// The call as judged, for its audit entry: the role, the class and rule of its policy,
    /// the rule set, and its arguments — the canonical parse when there is one, else as sent
    /// (an ambiguous call's) — as `[audit] arguments` keeps them.
    fn judged_call(&self, call: &Call<'_>, g: &Gathered) -> JudgedCall {
        JudgedCall {
            role: call.member.role.clone(),
            class: g.class,
            tool_class: Some(self.classify(call.tool, call.read_only_hint)),
            rule: g.policy.rule.clone(),
            rules: self.rules_digest.to_string(),
            arguments: keep_arguments(g.arguments(call), self.config.audit_arguments),
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
        let worker = call.caller.worker().map(str::to_owned);
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

    /// The verdict of a call decided from memory alone — a read-only call, or one refused
    /// for good by what its arguments and the rules say — with its audit entry queued;
    /// `None` for any call that needs the store or the forge (a permitted mutating call, a
    /// workflow action, an enforced pin, an approval that may apply, a PR lease to advance,
    /// an effect that needs a read): ask [`decide`](Self::decide). Never blocks.
    pub fn decide_now(&self, call: &Call<'_>, now: Timestamp, principal: Option<String>) -> Option<Capability> {
        self.decide_now_stated(call, &self.statement(call), now, principal)
    }

    /// [`decide_now`](Self::decide_now) for a call already parsed and stated.
    pub fn decide_now_stated(
        &self,
        call: &Call<'_>,
        statement: &Statement,
        now: Timestamp,
        principal: Option<String>,
    ) -> Option<Capability> {
        // Under a forge profile, only a call whose effect needs no read of the forge.
        let unstated = matches!(statement.canonical, Ok(Some(_))) && statement.stated.is_none();
        if self.config.tools.pin == fleetgate_core::capability::PinMode::Enforce || unstated {
            return None;
        }
        let g = self.known(call, statement.clone());
        let input = self.input(call, &g, None);
        if needs_evidence(&input) {
            return None;
        }
        let verdict = self.decided(call, &g, Mode::Preview);
        // Refused for good by what is at hand (no approval overrides it, none is asked), or a
        // plain read (no operator part, no workflow action, no lease to advance).
        let settled = verdict.blocker_kind.is_some_and(|k| {
            !overridable(k, &self.config.approvals.may_override)
                && !matches!(k, BlockerKind::ApprovalPending | BlockerKind::ApprovalDenied)
        }) && verdict.request.is_none();
        let plain_read = verdict.allowed
            && !needs_approvals(&input)
            && g.action.is_none()
            && self.pr_target(call.tool, g.arguments(call)).is_none();
        if !(settled || plain_read) {
            return None;
        }
        let mut verdict = verdict;
        if let Some(auditor) = &self.auditor {
            // Never a durable entry: no allowed mutation gets here.
            let judged = self.judged_call(call, &g);
            self.audit(auditor, call, &mut verdict, now, principal, Some(judged));
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
        let Some(target) = self.pr_target(call.tool, arguments) else { return };
        let pr = target.key(&self.config.workflow.remote);
        let ttl = self.config.workflow.lease_ttl_seconds;
        if let Err(e) = self.store.touch_pr_leases(&pr, identity, ttl, now) {
            tracing::warn!(%pr, error = %e, "a lease's last activity was not advanced");
        }
    }
}

/// An allowed mutation whose audit entry is not committed: refused.
fn audit_refusal(verdict: &mut Capability, problem: String) {
    *verdict = verdict.clone().refused_in_apply(BlockerKind::AuditUnavailable, problem);
}

/// Why a call has no actor the PR workflow can judge (`session_attachment_missing`).
#[derive(Debug)]
pub enum NoActor {
    /// No worker makes the call.
    NoWorker,
    /// Its worker is not in the registry.
    Unregistered(String),
    /// The registry cannot be read.
    Registry(fleetgate_store::StoreError),
}

impl std::fmt::Display for NoActor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoWorker => f.write_str("no worker makes this call"),
            Self::Unregistered(worker) => write!(f, "worker {worker} is not registered"),
            Self::Registry(e) => write!(f, "the registry cannot be read: {e}"),
        }
    }
}

impl std::error::Error for NoActor {}

/// The key under which a gateway-made merge's pinned head enters what an approval covers.
pub const REST_PIN_KEY: &str = "(pinned head)";
