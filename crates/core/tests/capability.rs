//! The capability resolver: one test per row of SPEC §6's precedence table,
//! combinations, and the property that nothing turns a refusal of a mutating
//! call into an allow while a blocking condition holds.

use fleetgate_core::BlockerKind;
use fleetgate_core::Timestamp;
use fleetgate_core::capability::{
    Capability, CapabilityInput, Evidence, RoleRefusal, ToolClass, fleet_gate, needs_evidence, refusal_action,
    resolve_task_capability,
};
use fleetgate_core::inventory::{FleetInventory, InventoryInput, PidProbe, classify_fleet_inventory};
use fleetgate_core::provenance::{Ownership, Provenance};
use fleetgate_core::runtime::{CohortSource, ObservedProcess, ProcessScan, RosterMember, RuntimeRecord, RuntimeStatus};
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
}

impl Case {
    fn healthy() -> Self {
        Self {
            class: ToolClass::Mutating,
            permitted: true,
            diagnostics: vec![],
            provenance: owned(),
            inventory: open_fleet(),
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

proptest! {
    #[test]
    fn no_input_turns_a_blocked_mutation_into_an_allow(
        permitted in any::<bool>(),
        diag in prop::sample::select(vec![None, Some(UNSUPPORTED), Some(STALE), Some("note: soft")]),
        prov in 0u8..3,
        dup in any::<bool>(),
    ) {
        let provenance = match prov { 0 => owned(), 1 => unowned(BlockerKind::SessionAttachmentMissing), _ => unowned(BlockerKind::WorkerFenced) };
        let case = Case {
            class: ToolClass::Mutating,
            permitted,
            diagnostics: diag.map(|d| vec![d.into()]).unwrap_or_default(),
            provenance,
            inventory: if dup { duplicate_fleet() } else { open_fleet() },
        };
        let blocking = !permitted || matches!(diag, Some(d) if d != "note: soft") || prov != 0 || dup;
        let c = case.resolve();
        prop_assert_eq!(c.allowed, !blocking);
        if !c.allowed {
            prop_assert!(c.blocker_kind.is_some() && c.operator_action.is_some() && !c.blocked_reasons.is_empty());
        }
    }
}
