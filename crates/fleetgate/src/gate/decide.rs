//! [`Gate`]: one call in, one verdict out. Classification and role policy first (pure and
//! cheap); the fleet and session evidence only for a call that can need it (a permitted
//! mutating one); the pure resolver; for a real call, the audit entry.

use super::observer::Observer;
use super::session::{Caller, session_provenance};
use super::snapshot::{Snapshot, snapshot};
use crate::audit::Auditor;
use crate::config::{FleetConfig, Member};
use fleetgate_core::Timestamp;
use fleetgate_core::audit::AuditEntry;
use fleetgate_core::capability::{
    Capability, CapabilityInput, Evidence, RoleRefusal, ToolClass, classify_tool, needs_evidence,
    resolve_task_capability,
};
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
    /// Who makes it.
    pub caller: Caller<'a>,
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
}

impl Gate {
    /// A gate that does not audit (the `capability` CLI, the control tool).
    pub fn new(config: Arc<FleetConfig>, store: Arc<dyn Store>, observer: Arc<dyn Observer>) -> Self {
        Self { config, store, observer, auditor: None }
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
            },
            None => Policy {
                permitted: self.config.role_policy(role).permits(call.tool),
                class: self.classify(call.tool, call.read_only_hint),
                refusal: None,
                action: None,
                rule: None,
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
        let member = call.member;
        let policy = self.policy(call);
        let class = policy.class;
        let role_permitted = policy.permitted;
        let input = |evidence| CapabilityInput {
            profile: &member.profile,
            role: &member.role,
            tool: call.tool,
            class,
            role_permitted,
            role_refusal: policy.refusal.as_ref(),
            evidence,
        };
        if !needs_evidence(class, role_permitted) {
            return resolve_task_capability(&input(None));
        }
        let snap = self.snapshot(now, Some(&member.namespace));
        let provenance = session_provenance(&*self.store, &*self.observer, &call.caller, &self.config.env_prefix, now);
        resolve_task_capability(&input(Some(Evidence {
            diagnostics: &snap.diagnostics,
            provenance: &provenance,
            inventory: &snap.inventory,
        })))
    }

    /// A real call: [`resolve`](Self::resolve), and record the decision in the audit log
    /// under the caller's worker and principal. An entry that is not known to be stored
    /// adds its reason to the verdict; it is never silent.
    pub fn decide(&self, call: &Call<'_>, now: Timestamp, principal: Option<String>) -> Capability {
        let mut verdict = self.resolve(call, now);
        let Some(auditor) = &self.auditor else { return verdict };
        let worker = match &call.caller {
            Caller::Worker { identity, .. } => Some((*identity).to_owned()),
            Caller::Nobody(_) => None,
        };
        let receipt = auditor.record(AuditEntry {
            id: None,
            at: now,
            profile: call.member.profile.clone(),
            worker_identity: worker,
            tool: call.tool.to_owned(),
            allowed: verdict.allowed,
            blocker_kind: verdict.blocker_kind.map(|k| k.as_str().to_owned()),
            reasons: verdict.blocked_reasons.clone(),
            principal,
        });
        if let Some(problem) = receipt.problem() {
            verdict.blocked_reasons.push(problem);
        }
        verdict
    }
}
