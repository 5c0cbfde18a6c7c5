//! The capability resolver: one test per row of the blocker precedence, combinations, and
//! the properties of the one decision — nothing turns a refusal into an allow while a
//! blocking condition holds; no invariant breach is ever allowed, whatever approvals and
//! overrides are on record; an approved override replaces exactly its own blocker; and what
//! the shell may skip gathering never changes the verdict.

use fleetgate_core::BlockerKind;
use fleetgate_core::Timestamp;
use fleetgate_core::capability::{
    Approvals, Capability, CapabilityInput, Evidence, Finish, MAX_PENDING_PER_WORKER, RoleRefusal, Standing, ToolClass,
    fleet_gate, needs_approvals, needs_evidence, overridable, refusal_action, resolve_task_capability,
};
use fleetgate_core::effect::{Breach, Invariant};
use fleetgate_core::forge_call::Ambiguity;
use fleetgate_core::inventory::{FleetInventory, InventoryInput, PidProbe, classify_fleet_inventory};
use fleetgate_core::provenance::{Ownership, Provenance};
use fleetgate_core::runtime::{CohortSource, ObservedProcess, ProcessScan, RosterMember, RuntimeRecord, RuntimeStatus};
use fleetgate_core::workflow::Refusal;
use proptest::prelude::*;

fn t() -> Timestamp {
    Timestamp::from_unix(1_800_000_000)
}

fn row(profile: &str, pid: i64, cohort: &str) -> RuntimeRecord {
    RuntimeRecord {
        runtime_id: format!("gitea-author:{pid}:b"),
        namespace: "gitea-author".into(),
        profile: profile.into(),
        role: "author".into(),
        remote: None,
        org: None,
        repo: None,
        repository_root: None,
        pid,
        cohort_id: Some(cohort.into()),
        cohort_source: CohortSource::ParentProcess,
        client_provenance: "client_managed".into(),
        boot_id: "b".into(),
        startup_head: Some("head".into()),
        daemon_start_head: None,
        transport: "stdio".into(),
        registered_at: t().plus_seconds(pid),
        last_heartbeat_at: None,
        status: RuntimeStatus::Running,
        host: None,
    }
}

fn inventory(rows: &[RuntimeRecord]) -> FleetInventory {
    let roster = [RosterMember {
        namespace: "gitea-author".into(),
        profile: "prgs-author".into(),
        role: "author".into(),
        replicas: 1,
    }];
    let scan = ProcessScan::of(
        rows.iter().map(|r| ObservedProcess { pid: r.pid, started_at: t(), command: "x".into(), uid: None }).collect(),
    );
    classify_fleet_inventory(
        &InventoryInput {
            roster: &roster,
            runtime_rows: rows,
            process_scan: &scan,
            expected_binding: None,
            now: t().plus_seconds(100),
            registry_available: true,
            registry_error: None,
            answering_namespace: None,
            hosts: Default::default(),
            peers: Default::default(),
        },
        &|_| PidProbe::Alive,
    )
}

fn open_fleet() -> FleetInventory {
    let inv = inventory(&[row("prgs-author", 1, "ppid:812")]);
    assert!(inv.mutation_gate_satisfied, "{:?}", inv.blocked_reasons);
    inv
}

fn duplicate_fleet() -> FleetInventory {
    inventory(&[row("prgs-author", 1, "ppid:812"), row("prgs-author", 4711, "ppid:999")])
}

fn owned() -> Provenance {
    Provenance {
        session_ownership: Ownership::Owned,
        blocker_kind: None,
        reasons: vec![],
        heartbeat_age_seconds: Some(1.0),
    }
}

fn unowned(kind: BlockerKind) -> Provenance {
    Provenance {
        session_ownership: Ownership::Unowned,
        blocker_kind: Some(kind),
        reasons: vec!["why".into()],
        heartbeat_age_seconds: None,
    }
}

const UNSUPPORTED: &str = "unsupported-env: Unsupported GITEA_* environment variable override(s) detected: GITEA_X. Unknown env overrides are unsupported.";
const STALE: &str = "stale-runtime: gitea-author (pid 1) started at revision a, the repository is now at b.";

struct Case {
    class: ToolClass,
    permitted: bool,
    diagnostics: Vec<fleetgate_core::diagnostics::Diagnostic>,
    provenance: Provenance,
    inventory: FleetInventory,
    ambiguity: Option<Ambiguity>,
    breaches: Vec<Breach>,
    unestablished: Option<&'static str>,
    changed: Option<&'static str>,
    replaced: Option<&'static str>,
    workflow: Option<Refusal>,
    guarded: Vec<Breach>,
    ask: Option<&'static str>,
    approvals: Option<Approvals>,
    may_override: Vec<BlockerKind>,
}

impl Case {
    fn healthy() -> Self {
        Self {
            class: ToolClass::Mutating,
            permitted: true,
            diagnostics: vec![],
            provenance: owned(),
            inventory: open_fleet(),
            ambiguity: None,
            breaches: vec![],
            unestablished: None,
            changed: None,
            replaced: None,
            workflow: None,
            guarded: vec![],
            ask: None,
            approvals: Some(Approvals::default()),
            may_override: vec![],
        }
    }

    fn input(&self) -> CapabilityInput<'_> {
        CapabilityInput {
            profile: "prgs-author",
            role: "author",
            tool: "git_add",
            class: self.class,
            role_permitted: self.permitted,
            role_refusal: None,
            ambiguity: self.ambiguity.as_ref(),
            breaches: &self.breaches,
            lifted: &[],
            guarded: &self.guarded,
            unestablished: self.unestablished,
            definition_changed: self.changed,
            store_replaced: self.replaced,
            workflow: self.workflow.as_ref(),
            forward: None,
            action: None,
            ask: self.ask,
            approvals: self.approvals.as_ref(),
            may_override: &self.may_override,
            finish: Default::default(),
            evidence: Some(Evidence {
                diagnostics: &self.diagnostics,
                provenance: &self.provenance,
                inventory: &self.inventory,
            }),
        }
    }

    fn resolve(&self) -> Capability {
        resolve_task_capability(&self.input())
    }
}

fn flags(c: &Capability) -> (bool, Option<BlockerKind>, bool, bool) {
    (c.allowed, c.blocker_kind, c.restart_required, c.stop_required)
}

fn breach(invariant: Invariant) -> Breach {
    Breach { invariant, reason: format!("the call breaks {invariant}") }
}

#[test]
fn a_healthy_mutation_is_allowed() {
    let c = Case::healthy().resolve();
    assert_eq!(flags(&c), (true, None, false, false));
    assert_eq!(c.operator_action, None);
}

#[test]
fn row_1_role_not_permitted_is_a_permanent_no_even_for_reads() {
    for class in [ToolClass::Mutating, ToolClass::ReadOnly] {
        let c = Case { class, permitted: false, ..Case::healthy() }.resolve();
        assert_eq!(flags(&c), (false, Some(BlockerKind::RoleNotPermitted), false, false));
        assert!(c.operator_action.unwrap().contains("hand this work"));
    }
}

#[test]
fn row_2_hard_diagnostics_require_a_reconnect_for_both_families() {
    for d in [UNSUPPORTED, STALE] {
        let c = Case { diagnostics: vec![d.into()], ..Case::healthy() }.resolve();
        assert_eq!(flags(&c), (false, Some(BlockerKind::RuntimeReconnectRequired), true, true), "{d}");
        assert_eq!(c.blocked_reasons, [d]);
    }
    let soft = Case { diagnostics: vec!["note: fine".into()], ..Case::healthy() }.resolve();
    assert!(soft.allowed, "only hard prefixes refuse");
}

#[test]
fn row_3_no_live_worker_is_session_attachment_missing() {
    let c = Case { provenance: unowned(BlockerKind::SessionAttachmentMissing), ..Case::healthy() }.resolve();
    assert_eq!(flags(&c), (false, Some(BlockerKind::SessionAttachmentMissing), false, false));
}

#[test]
fn row_4_a_fenced_worker_must_stop() {
    let c = Case { provenance: unowned(BlockerKind::WorkerFenced), ..Case::healthy() }.resolve();
    assert_eq!(flags(&c), (false, Some(BlockerKind::WorkerFenced), false, true));
}

#[test]
fn row_5_a_closed_fleet_gate_blocks_with_the_duplicate_to_stop() {
    let c = Case { inventory: duplicate_fleet(), ..Case::healthy() }.resolve();
    assert_eq!(flags(&c), (false, Some(BlockerKind::FleetInventoryBlocked), false, false));
    assert_eq!(
        c.operator_action.as_deref(),
        Some("stop the second author server, pid 4711, started by cohort ppid:999")
    );
    assert!(c.blocked_reasons.iter().any(|r| r.contains("duplicate")));
}

#[test]
fn invariants_come_before_the_rules_and_name_themselves() {
    let c = Case {
        permitted: false,
        breaches: vec![breach(Invariant::ScheduledMerge), breach(Invariant::ProtectedBranch)],
        ..Case::healthy()
    }
    .resolve();
    assert_eq!(c.blocker_kind, Some(BlockerKind::ProtectedBranch), "protected first, whatever the role");
    assert!(c.blocked_reasons[0].starts_with("invariant `protected-branch`: "), "{:?}", c.blocked_reasons);
    let c = Case { breaches: vec![breach(Invariant::PrState)], ..Case::healthy() }.resolve();
    assert_eq!(c.blocker_kind, Some(BlockerKind::InvariantViolated));
    assert!(c.operator_action.unwrap().contains("controller or the reconciler"));
    let c = Case { unestablished: Some("`search_repos` failed: timeout"), ..Case::healthy() }.resolve();
    assert_eq!(c.blocker_kind, Some(BlockerKind::ForgeUnavailable));
    assert!(c.blocked_reasons[0].contains("fail closed"), "{:?}", c.blocked_reasons);
    // A role refused whatever the call does is refused by role: no forge needed to say so.
    let c = Case { unestablished: Some("no forge"), permitted: false, ..Case::healthy() }.resolve();
    assert_eq!(c.blocker_kind, Some(BlockerKind::RoleNotPermitted), "{:?}", c.blocked_reasons);
}

#[test]
fn read_only_tools_pass_fleet_session_and_diagnostics() {
    let c = Case {
        class: ToolClass::ReadOnly,
        diagnostics: vec![UNSUPPORTED.into()],
        provenance: unowned(BlockerKind::WorkerFenced),
        inventory: duplicate_fleet(),
        permitted: true,
        replaced: Some("replaced"),
        workflow: Some(Refusal::of(BlockerKind::StaleHead, "moved".into())),
        ..Case::healthy()
    }
    .resolve();
    assert!(c.allowed);
}

#[test]
fn a_mutating_call_without_evidence_is_refused_and_reads_need_none() {
    let case = Case::healthy();
    let c = resolve_task_capability(&CapabilityInput { evidence: None, ..case.input() });
    assert_eq!(c.blocker_kind, Some(BlockerKind::FleetInventoryBlocked));
    let read = CapabilityInput { class: ToolClass::ReadOnly, evidence: None, ..case.input() };
    assert!(resolve_task_capability(&read).allowed);
    assert!(!resolve_task_capability(&CapabilityInput { role_permitted: false, ..read }).allowed);
    assert!(needs_evidence(&case.input()));
    assert!(!needs_evidence(&read) && !needs_evidence(&CapabilityInput { role_permitted: false, ..case.input() }));
    // A role refusal an operator may override needs the rest judged too.
    let overridable = Case { permitted: false, may_override: vec![BlockerKind::RoleNotPermitted], ..Case::healthy() };
    assert!(needs_evidence(&overridable.input()) && needs_approvals(&overridable.input()));
    let invariant = Case { breaches: vec![breach(Invariant::Retarget)], ..overridable };
    assert!(!needs_evidence(&invariant.input()), "an invariant settles the call");
}

#[test]
fn a_rule_s_refusal_keeps_its_reason_and_hands_the_call_to_the_roles_that_may() {
    let refusal = RoleRefusal {
        reason: "rule gitea-mcp:pr-merge (`pull_request_write` with /method one of [\"merge\"]) lets only the merger \
                 role make this call (/method = \"merge\"); role reviewer may not"
            .into(),
        may: vec!["merger".into()],
    };
    let case = Case { permitted: false, ..Case::healthy() };
    let input =
        CapabilityInput { role: "reviewer", tool: "pull_request_write", role_refusal: Some(&refusal), ..case.input() };
    let c = resolve_task_capability(&input);
    assert_eq!(c.blocker_kind, Some(BlockerKind::RoleNotPermitted));
    assert_eq!(c.blocked_reasons, vec![refusal.reason.clone()], "the rule's reason, not a generic one");
    assert_eq!(c.operator_action.as_deref(), Some("hand this `pull_request_write` call to the merger role"));
    let nobody = RoleRefusal { reason: "no rule matches".into(), may: vec![] };
    let c = resolve_task_capability(&CapabilityInput { role_refusal: Some(&nobody), ..input });
    assert_eq!(c.blocked_reasons, vec!["no rule matches".to_owned()]);
    assert!(c.operator_action.unwrap().starts_with("no role may make this `pull_request_write` call"));
}

#[test]
fn the_first_condition_that_holds_wins() {
    let everything = || Case {
        class: ToolClass::Mutating,
        permitted: false,
        diagnostics: vec![STALE.into()],
        provenance: unowned(BlockerKind::WorkerFenced),
        inventory: duplicate_fleet(),
        ..Case::healthy()
    };
    assert_eq!(everything().resolve().blocker_kind, Some(BlockerKind::RoleNotPermitted));
    assert_eq!(
        Case { permitted: true, ..everything() }.resolve().blocker_kind,
        Some(BlockerKind::RuntimeReconnectRequired)
    );
    let c = Case { permitted: true, diagnostics: vec![], ..everything() };
    assert_eq!(c.resolve().blocker_kind, Some(BlockerKind::WorkerFenced));
    let c = Case {
        permitted: true,
        diagnostics: vec![],
        provenance: unowned(BlockerKind::SessionAttachmentMissing),
        ..everything()
    };
    assert_eq!(c.resolve().blocker_kind, Some(BlockerKind::SessionAttachmentMissing));
    let c = Case { permitted: true, diagnostics: vec![], provenance: owned(), ..everything() };
    assert_eq!(c.resolve().blocker_kind, Some(BlockerKind::FleetInventoryBlocked));
}

#[test]
fn an_approved_override_replaces_its_blocker_and_the_next_one_still_decides() {
    let approved = |kind: BlockerKind| Approvals {
        overrides: vec![(kind, Standing::Approved { id: "apr-1".into(), by: "alice".into() })],
        ..Approvals::default()
    };
    // The role refusal overridden; the closed fleet gate after it still refuses.
    let c = Case {
        permitted: false,
        inventory: duplicate_fleet(),
        may_override: vec![BlockerKind::RoleNotPermitted],
        approvals: Some(approved(BlockerKind::RoleNotPermitted)),
        ..Case::healthy()
    }
    .resolve();
    assert_eq!(c.blocker_kind, Some(BlockerKind::FleetInventoryBlocked));
    assert!(c.use_approvals.is_empty(), "a refused call uses nothing");
    // Nothing after it: allowed, the approval used, the override named in the reasons.
    let c = Case {
        permitted: false,
        may_override: vec![BlockerKind::RoleNotPermitted],
        approvals: Some(approved(BlockerKind::RoleNotPermitted)),
        ..Case::healthy()
    }
    .resolve();
    assert!(c.allowed && c.use_approvals == ["apr-1"], "{c:?}");
    assert!(c.blocked_reasons[0].starts_with("role_not_permitted overridden once by approval apr-1 of alice"));
    // An approval for another blocker replaces nothing; a request is planned for this one.
    let c = Case {
        permitted: false,
        may_override: vec![BlockerKind::RoleNotPermitted, BlockerKind::FleetInventoryBlocked],
        approvals: Some(approved(BlockerKind::FleetInventoryBlocked)),
        ..Case::healthy()
    }
    .resolve();
    assert_eq!(c.blocker_kind, Some(BlockerKind::RoleNotPermitted));
    assert_eq!(c.request.as_ref().and_then(|r| r.overrides), Some(BlockerKind::RoleNotPermitted));
    // An invariant is never overridden, even when an approval names it.
    let c = Case {
        breaches: vec![breach(Invariant::ProtectedBranch)],
        may_override: vec![BlockerKind::ProtectedBranch],
        approvals: Some(approved(BlockerKind::ProtectedBranch)),
        ..Case::healthy()
    }
    .resolve();
    assert_eq!(c.blocker_kind, Some(BlockerKind::ProtectedBranch));
    assert!(c.request.is_none());
}

#[test]
fn a_call_a_rule_asks_about_waits_is_denied_or_passes_once() {
    let asked = |call: Option<Standing>, pending: usize| Case {
        ask: Some("fleet.toml:3"),
        approvals: Some(Approvals { call, pending_of_worker: pending, ..Approvals::default() }),
        ..Case::healthy()
    };
    let c = asked(None, 0).resolve();
    assert_eq!(c.blocker_kind, Some(BlockerKind::ApprovalPending));
    assert!(c.request.as_ref().is_some_and(|r| r.overrides.is_none()));
    let c = asked(Some(Standing::Pending { id: "apr-2".into(), approvers: vec![] }), 1).resolve();
    assert_eq!((c.blocker_kind, c.approval_request.as_deref()), (Some(BlockerKind::ApprovalPending), Some("apr-2")));
    assert!(c.request.is_none(), "one request per call");
    let c = asked(Some(Standing::Denied { id: "apr-2".into(), by: "bob".into() }), 0).resolve();
    assert_eq!(c.blocker_kind, Some(BlockerKind::ApprovalDenied));
    assert!(c.blocked_reasons[0].contains("denied by bob"));
    let c = asked(Some(Standing::Approved { id: "apr-2".into(), by: "bob".into() }), 0).resolve();
    assert!(c.allowed && c.use_approvals == ["apr-2"]);
    let c = asked(None, MAX_PENDING_PER_WORKER).resolve();
    assert_eq!(c.blocker_kind, Some(BlockerKind::ApprovalPending));
    assert!(c.request.is_none(), "a worker's requests are bounded");
    // Asked about, but refused before the operator's part: nothing is asked.
    let c = Case { inventory: duplicate_fleet(), ..asked(None, 0) }.resolve();
    assert_eq!((c.blocker_kind, c.request.is_none()), (Some(BlockerKind::FleetInventoryBlocked), true));
}

/// Issue 55: a request only `oidc:` people may answer told the operator to run `fleetgate
/// approvals approve apr-…`, which the CLI answers as `os:<user>` and is always refused for
/// it. The action names who may answer and where, live and read back from the audited reason.
#[test]
fn a_request_for_named_people_says_who_answers_and_where() {
    let people = vec!["oidc:alice".to_owned(), "group:release".to_owned()];
    let c = Case {
        ask: Some("fleet.toml:3"),
        approvals: Some(Approvals {
            call: Some(Standing::Pending { id: "apr-2".into(), approvers: people.clone() }),
            ..Approvals::default()
        }),
        ..Case::healthy()
    }
    .resolve();
    let action = c.operator_action.clone().unwrap();
    assert!(!action.contains("`fleetgate approvals approve apr-2`"), "a command refused for them: {action}");
    assert!(action.contains("oidc:alice, group:release signed in to the dashboard"), "{action}");
    assert!(action.contains("is refused"), "the CLI's answer named as refused: {action}");
    assert!(c.blocked_reasons[0].contains("(approvers: oidc:alice, group:release)"), "{:?}", c.blocked_reasons);
    assert_eq!(refusal_action("approval_pending", &c.tool, Some(&c.role), &c.blocked_reasons), Some(action));
    // An OS user among them answers from the CLI, run as that user.
    let os = fleetgate_core::approval::approval_action_for("apr-3", &["os:bob".to_owned()]);
    assert!(os.contains("os:bob with `fleetgate approvals approve apr-3`") && !os.contains("refused"), "{os}");
    // A person `[[people]]` names may answer through any of their identities, the CLI's too.
    let person = fleetgate_core::approval::approval_action_for("apr-5", &["person:alice".to_owned()]);
    assert!(person.contains("person:alice through any identity") && !person.contains("refused"), "{person}");
    // Anyone: the commands, as before.
    assert!(
        fleetgate_core::approval::approval_action_for("apr-4", &[]).contains("`fleetgate approvals approve apr-4`")
    );
}

#[test]
fn the_fleet_gate_is_the_resolvers_own_fleet_half() {
    assert_eq!(fleet_gate(&[], &open_fleet()), None);
    assert_eq!(fleet_gate(&["note: soft".into()], &open_fleet()), None);
    for case in [
        Case { inventory: duplicate_fleet(), ..Case::healthy() },
        Case { diagnostics: vec![STALE.into()], inventory: duplicate_fleet(), ..Case::healthy() },
    ] {
        let gate = fleet_gate(&case.diagnostics, &case.inventory).expect("closed");
        let c = case.resolve();
        assert_eq!(Some(gate.blocker_kind), c.blocker_kind);
        assert_eq!(gate.blocked_reasons, c.blocked_reasons);
        assert_eq!(Some(gate.operator_action), c.operator_action);
    }
}

#[test]
fn a_recorded_refusal_gets_the_resolvers_sentence_back() {
    let cases = [
        Case { permitted: false, ..Case::healthy() },
        Case { diagnostics: vec![UNSUPPORTED.into()], ..Case::healthy() },
        Case { diagnostics: vec![STALE.into()], ..Case::healthy() },
        Case { provenance: unowned(BlockerKind::SessionAttachmentMissing), ..Case::healthy() },
        Case { provenance: unowned(BlockerKind::WorkerFenced), ..Case::healthy() },
        Case { breaches: vec![breach(Invariant::Retarget)], ..Case::healthy() },
    ];
    for case in cases {
        let c = case.resolve();
        let kind = c.blocker_kind.unwrap().as_str();
        assert_eq!(refusal_action(kind, &c.tool, Some(&c.role), &c.blocked_reasons), c.operator_action, "{kind}");
    }
    // The inventory's own sentence needs the inventory of that moment: the first reason stands in.
    let c = Case { inventory: duplicate_fleet(), ..Case::healthy() }.resolve();
    let derived = refusal_action("fleet_inventory_blocked", "git_add", None, &c.blocked_reasons).unwrap();
    assert_eq!(derived, format!("resolve this before mutating: {}", c.blocked_reasons[0]));
    assert_eq!(refusal_action("no_such_blocker", "t", None, &[]), None);
    assert_eq!(
        refusal_action("role_not_permitted", "git_add", None, &[]).as_deref(),
        Some("hand this work to a role whose policy allows git_add")
    );
}

/// Every condition of the resolver, on or off, with the operator's part.
#[derive(Clone, Debug)]
struct Conditions {
    class: ToolClass,
    ambiguous: bool,
    invariant: Option<Invariant>,
    unestablished: bool,
    permitted: bool,
    changed: bool,
    replaced: bool,
    diag: Option<&'static str>,
    prov: u8,
    dup: bool,
    workflow: Option<BlockerKind>,
    ask: bool,
    /// 0: none on record; 1: pending; 2: denied; 3: approved.
    call_standing: u8,
    /// The blockers an operator may override, and whether an approved override of each is
    /// on record.
    may_override: Vec<(BlockerKind, bool)>,
    unavailable: bool,
    /// The call is a merge onto a protected branch (`reviewed-merge` guards it, not lifted).
    protected_merge: bool,
}

const OVERRIDABLE: [BlockerKind; 6] = [
    BlockerKind::RoleNotPermitted,
    BlockerKind::ToolDefinitionChanged,
    BlockerKind::FleetInventoryBlocked,
    BlockerKind::SessionAttachmentMissing,
    BlockerKind::ApprovalRequired,
    BlockerKind::StaleHead,
];

impl Conditions {
    fn case(&self) -> Case {
        let standing = |n: u8| match n {
            1 => Some(Standing::Pending { id: "apr-c".into(), approvers: vec![] }),
            2 => Some(Standing::Denied { id: "apr-c".into(), by: "alice".into() }),
            3 => Some(Standing::Approved { id: "apr-c".into(), by: "alice".into() }),
            _ => None,
        };
        Case {
            class: self.class,
            permitted: self.permitted,
            diagnostics: self.diag.map(|d| vec![d.into()]).unwrap_or_default(),
            provenance: match self.prov {
                0 => owned(),
                1 => unowned(BlockerKind::SessionAttachmentMissing),
                _ => unowned(BlockerKind::WorkerFenced),
            },
            inventory: if self.dup { duplicate_fleet() } else { open_fleet() },
            ambiguity: self.ambiguous.then(|| Ambiguity { key: "pull_number".into(), why: "12.5".into() }),
            breaches: self.invariant.map(breach).into_iter().collect(),
            unestablished: self.unestablished.then_some("a read failed"),
            changed: self.changed.then_some("changed"),
            replaced: self.replaced.then_some("replaced"),
            workflow: self.workflow.map(|k| Refusal::of(k, "workflow".into())),
            guarded: if self.protected_merge { vec![breach(Invariant::ReviewedMerge)] } else { vec![] },
            ask: self.ask.then_some("fleet.toml:9"),
            approvals: Some(Approvals {
                call: standing(self.call_standing),
                overrides: self
                    .may_override
                    .iter()
                    .filter(|(_, approved)| *approved)
                    .map(|(k, _)| (*k, Standing::Approved { id: format!("apr-{k}"), by: "bob".into() }))
                    .collect(),
                pending_of_worker: 0,
                unavailable: self.unavailable.then(|| "locked".into()),
            }),
            may_override: self.may_override.iter().map(|(k, _)| *k).collect(),
        }
    }

    /// Every condition that holds, in precedence order ([`BlockerKind::ALL`]'s, with the
    /// workflow's own refusal — `forge_unavailable` included — after the fleet conditions):
    /// read-only calls answer to those up to a changed definition alone.
    fn held(&self) -> Vec<BlockerKind> {
        if self.ambiguous {
            return vec![BlockerKind::AmbiguousArguments];
        }
        let hard = self.diag.is_some_and(|d| d != "note: soft");
        let mut held = Vec::new();
        for kind in [BlockerKind::ProtectedBranch, BlockerKind::InvariantViolated] {
            if self.invariant.is_some_and(|i| i.blocker() == kind) {
                held.push(kind);
            }
        }
        // A role the rules refuse whatever the call does comes before what the call does
        // could not be established: only an answer that depends on it needs the forge.
        let early = [
            (BlockerKind::RoleNotPermitted, !self.permitted),
            (BlockerKind::ForgeUnavailable, self.unestablished),
            (BlockerKind::ToolDefinitionChanged, self.changed),
        ];
        held.extend(early.into_iter().filter(|(_, on)| *on).map(|(k, _)| k));
        if self.class == ToolClass::ReadOnly {
            return held;
        }
        let fleet = [
            (BlockerKind::StoreReplaced, self.replaced),
            (BlockerKind::RuntimeReconnectRequired, hard),
            (BlockerKind::SessionAttachmentMissing, self.prov == 1),
            (BlockerKind::WorkerFenced, self.prov == 2),
            (BlockerKind::FleetInventoryBlocked, self.dup),
        ];
        held.extend(fleet.into_iter().filter(|(_, on)| *on).map(|(k, _)| k));
        held.extend(self.workflow);
        held
    }

    /// Whether an approval may override `kind` when it holds: as `may_override` says, except
    /// the workflow's approval at the head of a merge onto a protected branch (the
    /// `reviewed-merge` invariant's).
    fn may(&self, kind: BlockerKind) -> bool {
        let may: Vec<BlockerKind> = self.may_override.iter().map(|(k, _)| *k).collect();
        let guarded = self.guarded() == Some(kind) && kind != BlockerKind::SessionAttachmentMissing;
        overridable(kind, &may) && !guarded
    }

    /// The workflow's refusal of a merge onto a protected branch that the `reviewed-merge`
    /// invariant makes its own (the approval at the head, or a workflow that could not look
    /// for it for want of a worker): held last, never overridden.
    fn guarded(&self) -> Option<BlockerKind> {
        self.workflow.filter(|k| {
            self.protected_merge
                && self.class == ToolClass::Mutating
                && matches!(
                    k,
                    BlockerKind::ApprovalRequired | BlockerKind::StaleHead | BlockerKind::SessionAttachmentMissing
                )
        })
    }

    /// The verdict the precedence, the overrides and the operator's part name: the first
    /// condition no approval replaces — or, when that one is overridable and the next one no
    /// approval may override is the guarded workflow refusal, that refusal (no request that
    /// could never help).
    fn expected(&self) -> Option<BlockerKind> {
        let approved = |k: BlockerKind| self.may_override.iter().any(|(m, a)| *m == k && *a);
        let held = self.held();
        let guard = self.guarded().filter(|_| held.last() == self.workflow.as_ref());
        let may_at = |i: usize| self.may(held[i]) && !(guard.is_some() && i + 1 == held.len());
        for (i, &k) in held.iter().enumerate() {
            if may_at(i) && approved(k) {
                continue;
            }
            let next_standing = (i + 1..held.len()).find(|j| !may_at(*j));
            let guard_stands = guard.is_some() && next_standing == Some(held.len() - 1);
            return if may_at(i) && guard_stands { guard } else { Some(k) };
        }
        if guard.is_some() {
            unreachable!("the guarded refusal is never overridden");
        }
        if !self.ask {
            return None;
        }
        match self.call_standing {
            _ if self.unavailable => Some(BlockerKind::ApprovalPending),
            2 => Some(BlockerKind::ApprovalDenied),
            3 => None,
            _ => Some(BlockerKind::ApprovalPending),
        }
    }
}

fn conditions() -> impl Strategy<Value = Conditions> {
    let workflow = prop::sample::select(vec![
        None,
        Some(BlockerKind::ForgeUnavailable),
        Some(BlockerKind::ReviewLeaseHeld),
        Some(BlockerKind::ReviewLeaseRequired),
        Some(BlockerKind::StaleHead),
        Some(BlockerKind::ApprovalRequired),
        Some(BlockerKind::SessionAttachmentMissing),
    ]);
    let invariant = prop::option::weighted(0.3, prop::sample::select(Invariant::ALL.to_vec()));
    let may = prop::collection::vec((prop::sample::select(OVERRIDABLE.to_vec()), any::<bool>()), 0..4);
    (
        prop::sample::select(vec![ToolClass::Mutating, ToolClass::ReadOnly]),
        (any::<bool>(), invariant, prop::bool::weighted(0.2), any::<bool>(), any::<bool>(), any::<bool>()),
        prop::sample::select(vec![None, Some(UNSUPPORTED), Some(STALE), Some("note: soft")]),
        (0u8..3, any::<bool>(), workflow),
        (any::<bool>(), 0u8..4, may, prop::bool::weighted(0.1), prop::bool::weighted(0.3)),
    )
        .prop_map(
            |(
                class,
                (ambiguous, invariant, unestablished, permitted, changed, replaced),
                diag,
                (prov, dup, workflow),
                (ask, call_standing, mut may_override, unavailable, protected_merge),
            )| {
                may_override.sort();
                may_override.dedup_by_key(|(k, _)| *k);
                Conditions {
                    class,
                    ambiguous,
                    invariant,
                    unestablished,
                    permitted,
                    changed,
                    replaced,
                    diag,
                    prov,
                    dup,
                    workflow,
                    ask,
                    call_standing,
                    may_override,
                    unavailable,
                    protected_merge,
                }
            },
        )
}

proptest! {
    /// The whole precedence, overrides and approvals included: the call is allowed exactly
    /// when every condition that holds is overridden by an approval of it and the operator's
    /// part (if a rule asks) is an approval; otherwise it is refused by the first condition
    /// no approval replaces, with reasons and an operator action.
    #[test]
    fn the_one_decision_follows_the_precedence(c in conditions()) {
        let verdict = c.case().resolve();
        let expected = c.expected();
        prop_assert_eq!(verdict.allowed, expected.is_none(), "{:?}", verdict);
        prop_assert_eq!(verdict.blocker_kind, expected);
        if verdict.allowed {
            prop_assert!(verdict.request.is_none());
        } else {
            prop_assert!(verdict.operator_action.is_some() && !verdict.blocked_reasons.is_empty());
            prop_assert!(verdict.use_approvals.is_empty(), "a refused call uses no approval");
            let kind = verdict.blocker_kind.map(BlockerKind::as_str).unwrap_or_default();
            if kind != "fleet_inventory_blocked" && kind != "runtime_reconnect_required" {
                prop_assert_eq!(
                    refusal_action(kind, &verdict.tool, Some(&verdict.role), &verdict.blocked_reasons).is_some(),
                    true
                );
            }
        }
    }

    /// No call that breaks an invariant is ever allowed, whatever may be overridden and
    /// whatever approvals are on record.
    #[test]
    fn no_invariant_breach_is_ever_allowed(c in conditions(), invariant in prop::sample::select(Invariant::ALL.to_vec())) {
        let mut c = c;
        c.invariant = Some(invariant);
        c.may_override.extend([BlockerKind::ProtectedBranch, BlockerKind::InvariantViolated].map(|k| (k, true)));
        let verdict = c.case().resolve();
        prop_assert!(!verdict.allowed);
        let kind = verdict.blocker_kind.unwrap();
        prop_assert!(
            kind == BlockerKind::AmbiguousArguments || kind == invariant.blocker(),
            "{:?} refused by {}", invariant, kind
        );
    }

    /// Issue 55: under `may_override = ["approval_required", "stale_head"]` and an operator
    /// who approves every override, a merge onto a protected branch landed a head no reviewer
    /// approved (or one pushed after the review). The approval that merge needs, at the head it
    /// lands, is the `reviewed-merge` invariant's: never overridden, whatever else holds.
    #[test]
    fn no_override_lands_an_unreviewed_head_on_a_protected_branch(
        c in conditions(),
        kind in prop::sample::select(vec![
            BlockerKind::ApprovalRequired,
            BlockerKind::StaleHead,
            BlockerKind::SessionAttachmentMissing,
        ]),
    ) {
        let mut c = c;
        c.class = ToolClass::Mutating;
        c.workflow = Some(kind);
        c.protected_merge = true;
        let merge_kinds =
            [BlockerKind::ApprovalRequired, BlockerKind::StaleHead, BlockerKind::SessionAttachmentMissing];
        c.may_override.retain(|(k, _)| !merge_kinds.contains(k));
        c.may_override.extend(merge_kinds.map(|k| (k, true)));
        c.call_standing = 3;
        let verdict = c.case().resolve();
        prop_assert!(!verdict.allowed, "{:?}", verdict);
        prop_assert!(verdict.use_approvals.is_empty());
        if verdict.blocker_kind == Some(kind) {
            prop_assert!(verdict.blocked_reasons.iter().any(|r| r.contains("invariant `reviewed-merge`")), "{:?}", verdict);
            prop_assert!(verdict.request.is_none(), "no request an operator could approve into the merge");
            prop_assert!(verdict.operator_action.as_deref().is_some_and(|a| a.contains("lifts `reviewed-merge`")));
        }
        // Onto a branch no rule protects, the same override is the operator's to give.
        c.protected_merge = false;
        let open = c.case().resolve();
        prop_assert_ne!(open.blocker_kind, Some(kind), "{:?}", open);
    }

    /// An approved override changes at most its own blocker: with it, the call is refused by
    /// the next condition that holds (or allowed when none does), never by an earlier one,
    /// and never allowed past another.
    #[test]
    fn an_override_replaces_exactly_its_own_blocker(c in conditions()) {
        let mut plain = c.clone();
        plain.may_override.iter_mut().for_each(|(_, a)| *a = false);
        plain.ask = false;
        let refused = plain.case().resolve();
        let Some(first) = refused.blocker_kind else { return Ok(()) };
        // A guarded merge's refusal stands whatever is overridden before it
        // (`no_override_lands_an_unreviewed_head_on_a_protected_branch` covers it).
        if !plain.may(first) || plain.guarded().is_some() {
            return Ok(());
        }
        let mut one = plain.clone();
        one.may_override.iter_mut().for_each(|(k, a)| *a = *k == first);
        let after = one.case().resolve();
        let next = plain.held().into_iter().find(|k| *k != first);
        prop_assert_eq!(after.blocker_kind, next);
        if after.allowed {
            let used = format!("apr-{first}");
            prop_assert_eq!(after.use_approvals, vec![used]);
        }
    }

    /// What the shell may skip gathering never changes the verdict: when [`needs_evidence`]
    /// says no, the evidence, the workflow's refusal and the approvals on record do not
    /// matter (a read-only call still answers to its operator's part).
    #[test]
    fn skipped_evidence_never_matters(c in conditions(), other in conditions()) {
        let case = c.case();
        if needs_evidence(&case.input()) {
            return Ok(());
        }
        let mut swapped = other.case();
        swapped.class = case.class;
        let mixed = Case {
            diagnostics: swapped.diagnostics,
            provenance: swapped.provenance,
            inventory: swapped.inventory,
            workflow: swapped.workflow,
            replaced: swapped.replaced,
            ..c.case()
        };
        let (a, b) = (case.resolve(), mixed.resolve());
        prop_assert_eq!(a.blocker_kind, b.blocker_kind);
        prop_assert_eq!(a.allowed, b.allowed);
    }
}

proptest! {
    /// Issue 56: core's verdict is final. What it carries besides the decision (the workflow's
    /// note, what it settles at, the gateway's own merge, a preview's note, the hold) never
    /// changes the decision; the one condition judged last, an unpinned merge, only refuses,
    /// `invariant_violated` with `unpinned-merge`'s text.
    #[test]
    fn the_finish_never_changes_the_decision_but_to_refuse_an_unpinned_merge(
        c in conditions(),
        note in any::<bool>(),
        at in any::<bool>(),
        unpinned in prop::bool::weighted(0.3),
        preview in any::<bool>(),
        holds in any::<bool>(),
    ) {
        let case = c.case();
        let bare = case.resolve();
        let head = ("1a38ef95".to_owned(), Some("main".to_owned()));
        let finish = Finish {
            note: note.then_some("a lock is taken"),
            at: at.then_some(&head),
            perform: None,
            unpinned: unpinned.then_some("no head pin"),
            preview,
            holds,
        };
        let finished = resolve_task_capability(&CapabilityInput { finish, ..case.input() });
        if bare.allowed && unpinned {
            prop_assert!(!finished.allowed);
            prop_assert_eq!(finished.blocker_kind, Some(BlockerKind::InvariantViolated));
            prop_assert_eq!(finished.operator_action.as_deref(), Some(Invariant::UnpinnedMerge.action()));
            prop_assert!(finished.forward.is_none() && finished.use_approvals.is_empty() && finished.settles.is_none());
        } else {
            prop_assert_eq!(finished.allowed, bare.allowed);
            prop_assert_eq!(finished.blocker_kind, bare.blocker_kind);
            prop_assert_eq!(&finished.operator_action, &bare.operator_action);
            prop_assert_eq!(&finished.use_approvals, &bare.use_approvals);
        }
        prop_assert_eq!(finished.held().is_some(), holds && finished.blocker_kind == Some(BlockerKind::ApprovalPending) && finished.approval_request.is_some());
    }

    /// Applying refuses only through [`Capability::refused_in_apply`]: refused, by the kind it
    /// names, with that blocker's one operator text, forwarding, using and settling nothing.
    #[test]
    fn applying_refuses_with_the_blocker_s_one_text(c in conditions(), kind in prop::sample::select(BlockerKind::ALL.to_vec())) {
        let refused = c.case().resolve().refused_in_apply(kind, "why".into());
        prop_assert!(!refused.allowed);
        prop_assert_eq!(refused.blocker_kind, Some(kind));
        prop_assert_eq!(refused.operator_action.as_deref(), Some(kind.operator_action()));
        prop_assert_eq!(refused.blocked_reasons, vec!["why".to_owned()]);
        prop_assert!(refused.forward.is_none() && refused.use_approvals.is_empty() && refused.settles.is_none() && refused.perform.is_none());
    }
}
