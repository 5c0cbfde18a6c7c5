//! The capability resolver: one test per row of the blocker precedence,
//! combinations, and the property that nothing turns a refusal of a mutating
//! call into an allow while a blocking condition holds.

use fleetgate_core::BlockerKind;
use fleetgate_core::Timestamp;
use fleetgate_core::capability::{
    ApprovalHold, Capability, CapabilityInput, Evidence, RoleRefusal, ToolClass, fleet_gate, needs_evidence,
    refusal_action, resolve_task_capability,
};
use fleetgate_core::forge_call::Ambiguity;
use fleetgate_core::inventory::{FleetInventory, InventoryInput, PidProbe, classify_fleet_inventory};
use fleetgate_core::protect::Violation;
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
    let roster =
        [RosterMember { namespace: "gitea-author".into(), profile: "prgs-author".into(), role: "author".into() }];
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
    protection: Option<Violation>,
    changed: Option<&'static str>,
    replaced: Option<&'static str>,
    workflow: Option<Refusal>,
    approval: Option<ApprovalHold>,
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
            protection: None,
            changed: None,
            replaced: None,
            workflow: None,
            approval: None,
        }
    }
    fn resolve(&self) -> Capability {
        resolve_task_capability(&CapabilityInput {
            profile: "prgs-author",
            role: "author",
            tool: "git_add",
            class: self.class,
            role_permitted: self.permitted,
            role_refusal: None,
            ambiguity: self.ambiguity.as_ref(),
            protection: self.protection.as_ref(),
            definition_changed: self.changed,
            store_replaced: self.replaced,
            workflow: self.workflow.as_ref(),
            approval: self.approval.as_ref(),
            evidence: Some(Evidence {
                diagnostics: &self.diagnostics,
                provenance: &self.provenance,
                inventory: &self.inventory,
            }),
        })
    }
}

fn flags(c: &Capability) -> (bool, Option<BlockerKind>, bool, bool) {
    (c.allowed, c.blocker_kind, c.restart_required, c.stop_required)
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
    let c = resolve_task_capability(&CapabilityInput {
        profile: "p",
        role: "author",
        tool: "git_add",
        class: ToolClass::Mutating,
        role_permitted: true,
        role_refusal: None,
        ambiguity: None,
        protection: None,
        definition_changed: None,
        store_replaced: None,
        workflow: None,
        approval: None,
        evidence: None,
    });
    assert_eq!(c.blocker_kind, Some(BlockerKind::FleetInventoryBlocked));
    let read = CapabilityInput {
        class: ToolClass::ReadOnly,
        evidence: None,
        profile: "p",
        role: "r",
        tool: "t",
        role_permitted: true,
        role_refusal: None,
        ambiguity: None,
        protection: None,
        definition_changed: None,
        store_replaced: None,
        workflow: None,
        approval: None,
    };
    assert!(resolve_task_capability(&read).allowed);
    assert!(!resolve_task_capability(&CapabilityInput { role_permitted: false, ..read }).allowed);
    assert!(needs_evidence(ToolClass::Mutating, true));
    assert!(!needs_evidence(ToolClass::ReadOnly, true) && !needs_evidence(ToolClass::Mutating, false));
}

#[test]
fn a_rule_s_refusal_keeps_its_reason_and_hands_the_call_to_the_roles_that_may() {
    let refusal = RoleRefusal {
        reason: "rule gitea-mcp:pr-merge (`pull_request_write` with /method one of [\"merge\"]) lets only the merger \
                 role make this call (/method = \"merge\"); role reviewer may not"
            .into(),
        may: vec!["merger".into()],
    };
    let input = CapabilityInput {
        profile: "prgs-reviewer",
        role: "reviewer",
        tool: "pull_request_write",
        class: ToolClass::Mutating,
        role_permitted: false,
        role_refusal: Some(&refusal),
        ambiguity: None,
        protection: None,
        definition_changed: None,
        store_replaced: None,
        workflow: None,
        approval: None,
        evidence: None,
    };
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

/// Every condition of the resolver, on or off.
#[derive(Clone, Copy, Debug)]
struct Conditions {
    class: ToolClass,
    ambiguous: bool,
    permitted: bool,
    protected: bool,
    changed: bool,
    replaced: bool,
    diag: Option<&'static str>,
    prov: u8,
    dup: bool,
    workflow: Option<BlockerKind>,
    /// 0: no operator's part; 1: pending; 2: denied; 3: no request could be made.
    approval: u8,
}

impl Conditions {
    fn case(self) -> Case {
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
            protection: self.protected.then(|| Violation::protected("writes main".into())),
            changed: self.changed.then_some("changed"),
            replaced: self.replaced.then_some("replaced"),
            workflow: self.workflow.map(|k| Refusal::of(k, "workflow".into())),
            approval: match self.approval {
                0 => None,
                1 => Some(ApprovalHold::Pending { id: "apr-1".into(), why: "rule r asks".into() }),
                2 => Some(ApprovalHold::Denied { id: "apr-1".into(), by: "alice".into() }),
                _ => Some(ApprovalHold::Unavailable { why: "rule r asks, and the store is locked".into() }),
            },
        }
    }

    /// The blocker the precedence table names: the first condition that holds, in
    /// [`BlockerKind::ALL`]'s order; read-only calls answer to the first three alone.
    fn expected(self) -> Option<BlockerKind> {
        let hard = self.diag.is_some_and(|d| d != "note: soft");
        let read = self.class == ToolClass::ReadOnly;
        let held = |kind: BlockerKind| match kind {
            BlockerKind::AmbiguousArguments => self.ambiguous,
            BlockerKind::RoleNotPermitted => !self.permitted,
            BlockerKind::ProtectedBranch => self.protected,
            BlockerKind::ToolDefinitionChanged => self.changed,
            BlockerKind::StoreReplaced => !read && self.replaced,
            BlockerKind::RuntimeReconnectRequired => !read && hard,
            BlockerKind::SessionAttachmentMissing => !read && self.prov == 1,
            BlockerKind::WorkerFenced => !read && self.prov == 2,
            BlockerKind::FleetInventoryBlocked => !read && self.dup,
            // An operator's part comes last, and read-only calls answer to it too.
            BlockerKind::ApprovalPending => self.approval == 1 || self.approval == 3,
            BlockerKind::ApprovalDenied => self.approval == 2,
            other => !read && self.workflow == Some(other),
        };
        BlockerKind::ALL.into_iter().find(|k| held(*k))
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
    ]);
    (
        prop::sample::select(vec![ToolClass::Mutating, ToolClass::ReadOnly]),
        (any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>()),
        prop::sample::select(vec![None, Some(UNSUPPORTED), Some(STALE), Some("note: soft")]),
        (0u8..3, any::<bool>(), 0u8..4),
        workflow,
    )
        .prop_map(
            |(class, (ambiguous, permitted, protected, changed, replaced), diag, (prov, dup, approval), workflow)| {
                Conditions {
                    class,
                    ambiguous,
                    permitted,
                    protected,
                    changed,
                    replaced,
                    diag,
                    prov,
                    dup,
                    workflow,
                    approval,
                }
            },
        )
}

proptest! {
    /// The whole precedence: the call is allowed exactly when no condition holds, and
    /// otherwise refused by the first that does, with reasons and an operator action.
    #[test]
    fn no_input_turns_a_blocked_call_into_an_allow(c in conditions()) {
        let verdict = c.case().resolve();
        let expected = c.expected();
        prop_assert_eq!(verdict.allowed, expected.is_none());
        prop_assert_eq!(verdict.blocker_kind, expected);
        if !verdict.allowed {
            prop_assert!(verdict.operator_action.is_some() && !verdict.blocked_reasons.is_empty());
            let kind = verdict.blocker_kind.map(BlockerKind::as_str).unwrap_or_default();
            if kind != "fleet_inventory_blocked" && kind != "runtime_reconnect_required" {
                prop_assert_eq!(
                    refusal_action(kind, &verdict.tool, Some(&verdict.role), &verdict.blocked_reasons).is_some(),
                    true
                );
            }
        }
    }
}
