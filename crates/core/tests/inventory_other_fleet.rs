//! Several fleets on one host (issue #19): an unclaimed gateway is set aside as another
//! fleet's only when its own store proves it and it is bound to another repository; every
//! other case stays an unregistered fleet process and closes the gate. The store facts are
//! values here, as the shell hands them in.

use fleetgate_core::Timestamp;
use fleetgate_core::inventory::{
    FleetInventory, InventoryInput, OurRepository, PeerEvidence, PeerStore, PeerVerdict, PeerView, PidProbe,
    classify_with_probes, judge_peer, our_repository,
};
use fleetgate_core::runtime::{
    Binding, CohortSource, HostIdentity, ObservedProcess, ProcessScan, RosterMember, RuntimeRecord, RuntimeStatus,
};
use std::collections::BTreeMap;

const FOREIGN: i64 = 52000;
const OUR_ROOT: &str = "/work/ours";
/// A decision long after every gateway here started: no grace applies.
const LATER: Timestamp = Timestamp::from_unix(1_785_207_600); // 2026-07-28T03:00:00Z

fn ts(s: &str) -> Timestamp {
    Timestamp::parse(s).unwrap()
}

fn here() -> HostIdentity {
    HostIdentity { host_id: "machine-a".into(), boot_id: "kernel-boot-2".into() }
}

fn roster() -> Vec<RosterMember> {
    vec![RosterMember {
        namespace: "gitea-author".into(),
        profile: "prgs-author".into(),
        role: "author".into(),
        replicas: 1,
    }]
}

fn row(pid: i64, root: &str, binding: Option<Binding>) -> RuntimeRecord {
    RuntimeRecord {
        runtime_id: format!("gitea-author:{pid}:start{pid}"),
        namespace: "gitea-author".into(),
        profile: "prgs-author".into(),
        role: "author".into(),
        remote: binding.as_ref().map(|b| b.remote.clone()),
        org: binding.as_ref().map(|b| b.org.clone()),
        repo: binding.map(|b| b.repo),
        repository_root: Some(root.into()),
        pid,
        cohort_id: Some("ppid:100".into()),
        cohort_source: CohortSource::ParentProcess,
        client_provenance: "client_managed".into(),
        boot_id: format!("start{pid}"),
        startup_head: Some("82d71b77028a7abd4f8ab4a4e4d89658a187f73d".into()),
        daemon_start_head: None,
        transport: "stdio".into(),
        registered_at: ts("2026-07-28T02:00:00Z"),
        last_heartbeat_at: None,
        status: RuntimeStatus::Running,
        host: Some(here()),
    }
}

fn gateway(pid: i64) -> ObservedProcess {
    ObservedProcess {
        pid,
        started_at: ts("2026-07-28T01:59:59Z"),
        command: format!("fleetgate --store /other/{pid}.sqlite3 serve --profile prgs-author"),
        uid: Some(1000),
    }
}

fn their_store(rows: Vec<RuntimeRecord>) -> PeerStore {
    PeerStore { location: "/other/registry.sqlite3".into(), held_open: true, ours: false, rows, unread: None }
}

fn ours() -> OurRepository {
    our_repository(None, &[row(41000, OUR_ROOT, None)], &|r| r.to_owned())
}

fn judge_with(evidence: PeerEvidence, ours: &OurRepository, local: Option<&HostIdentity>) -> PeerVerdict {
    let evidence = BTreeMap::from([(FOREIGN, evidence)]);
    judge_peer(&gateway(FOREIGN), &PeerView { evidence: Some(&evidence), ours: Some(ours), local }, LATER)
}

fn judge(store: PeerStore) -> PeerVerdict {
    judge_with(PeerEvidence::Store(store), &ours(), Some(&here()))
}

fn not_proven(v: PeerVerdict, needle: &str) {
    match v {
        PeerVerdict::NotProven(why) => assert!(why.contains(needle), "{needle:?} not in {why:?}"),
        PeerVerdict::OtherFleet(g) => panic!("wrongly proven another fleet's: {g:?}"),
        PeerVerdict::Pending(g) => panic!("wrongly pending: {g:?}"),
    }
}

fn bound(repo: &str) -> Binding {
    Binding { remote: "forge".into(), org: "acme".into(), repo: repo.into() }
}

#[test]
fn a_proven_gateway_bound_to_another_repository_is_another_fleets() {
    let PeerVerdict::OtherFleet(g) = judge(their_store(vec![row(FOREIGN, "/work/theirs", None)])) else {
        panic!("not proven")
    };
    assert_eq!((g.pid, g.repository_root.as_str()), (FOREIGN, "/work/theirs"));
    assert_eq!(g.store, "/other/registry.sqlite3");
    assert_eq!(g.runtime_id, format!("gitea-author:{FOREIGN}:start{FOREIGN}"));
    // Both bound, to different repositories, in different checkouts: another fleet's too.
    let ours = our_repository(Some(&bound("ours")), &[row(41000, OUR_ROOT, None)], &|r| r.to_owned());
    let theirs = their_store(vec![row(FOREIGN, "/work/theirs", Some(bound("theirs")))]);
    assert!(matches!(judge_with(PeerEvidence::Store(theirs), &ours, Some(&here())), PeerVerdict::OtherFleet(_)));
}

#[test]
fn a_gateway_bound_to_our_checkout_is_blocked() {
    not_proven(judge(their_store(vec![row(FOREIGN, OUR_ROOT, None)])), "two fleets on one repository");
    // A checkout inside ours, or ours inside its, is the same repository.
    not_proven(judge(their_store(vec![row(FOREIGN, "/work/ours/sub", None)])), "this fleet's checkout");
    not_proven(judge(their_store(vec![row(FOREIGN, "/work", None)])), "this fleet's checkout");
    // A sibling whose name merely starts alike is not inside it.
    assert!(matches!(judge(their_store(vec![row(FOREIGN, "/work/ours2", None)])), PeerVerdict::OtherFleet(_)));
}

#[test]
fn a_gateway_bound_to_our_forge_repository_in_another_checkout_is_blocked() {
    let ours = our_repository(Some(&bound("shared")), &[row(41000, OUR_ROOT, None)], &|r| r.to_owned());
    let theirs = their_store(vec![row(FOREIGN, "/elsewhere/clone", Some(bound("shared")))]);
    not_proven(judge_with(PeerEvidence::Store(theirs), &ours, Some(&here())), "forge/acme/shared");
    // Our rows' bindings count as ours even when the roster names none.
    let ours = our_repository(None, &[row(41000, OUR_ROOT, Some(bound("shared")))], &|r| r.to_owned());
    let theirs = their_store(vec![row(FOREIGN, "/elsewhere/clone", Some(bound("shared")))]);
    not_proven(judge_with(PeerEvidence::Store(theirs), &ours, Some(&here())), "two fleets on one repository");
    // An incomplete binding cannot be told from ours.
    let ours = our_repository(Some(&bound("shared")), &[], &|r| r.to_owned());
    let mut half = row(FOREIGN, "/elsewhere/clone", Some(bound("shared")));
    half.repo = None;
    not_proven(judge_with(PeerEvidence::Store(their_store(vec![half])), &ours, Some(&here())), "incomplete binding");
}

#[test]
fn a_gateway_that_proves_nothing_is_blocked() {
    not_proven(
        judge_with(PeerEvidence::Unreadable("its environment cannot be read".into()), &ours(), Some(&here())),
        "environment cannot be read",
    );
    let none = judge_peer(&gateway(FOREIGN), &PeerView::default(), LATER);
    not_proven(none, "not looked at");
    // This host unknown: no row can be placed on it.
    not_proven(
        judge_with(PeerEvidence::Store(their_store(vec![row(FOREIGN, "/work/theirs", None)])), &ours(), None),
        "identity is unknown",
    );
    // Our own repository unknown: nothing to tell it apart from.
    not_proven(
        judge_with(
            PeerEvidence::Store(their_store(vec![row(FOREIGN, "/work/theirs", None)])),
            &OurRepository::default(),
            Some(&here()),
        ),
        "repository is unknown",
    );
    let mut rootless = row(FOREIGN, "/x", None);
    rootless.repository_root = None;
    not_proven(judge(their_store(vec![rootless])), "no repository root");
}

#[test]
fn a_forged_claim_is_blocked() {
    // Its command line names a store in which it has no running row.
    not_proven(judge(their_store(vec![])), "holds no running row for pid 52000");
    not_proven(judge(their_store(vec![row(FOREIGN + 1, "/work/theirs", None)])), "no running row");
    let mut stopped = row(FOREIGN, "/work/theirs", None);
    stopped.status = RuntimeStatus::Stopped;
    not_proven(judge(their_store(vec![stopped])), "no running row");
    // A row of an earlier kernel boot, or of another machine, names no process here.
    let mut old_boot = row(FOREIGN, "/work/theirs", None);
    old_boot.host = Some(HostIdentity { boot_id: "kernel-boot-1".into(), ..here() });
    not_proven(judge(their_store(vec![old_boot])), "no running row");
    let mut hostless = row(FOREIGN, "/work/theirs", None);
    hostless.host = None;
    not_proven(judge(their_store(vec![hostless])), "no running row");
    // A row registered before the process started belongs to an earlier holder of the pid.
    let mut recycled = row(FOREIGN, "/work/theirs", None);
    recycled.registered_at = ts("2026-07-28T01:00:00Z");
    not_proven(judge(their_store(vec![recycled])), "registered since it started");
    // It names a store it does not hold open: a claim, not a proof.
    let unheld = PeerStore { held_open: false, ..their_store(vec![row(FOREIGN, "/work/theirs", None)]) };
    not_proven(judge(unheld), "does not hold the store");
    // It names this fleet's own store, where no row claims it.
    let own = PeerStore { ours: true, ..their_store(vec![row(FOREIGN, "/work/theirs", None)]) };
    not_proven(judge(own), "this fleet's own store");
}

fn classify(evidence: PeerEvidence) -> FleetInventory {
    let rows = vec![row(41000, OUR_ROOT, None)];
    let scan = ProcessScan::of(vec![
        ObservedProcess {
            pid: 41000,
            started_at: ts("2026-07-28T01:00:00Z"),
            command: "fleetgate serve".into(),
            uid: None,
        },
        gateway(FOREIGN),
    ]);
    let evidence = BTreeMap::from([(FOREIGN, evidence)]);
    let ours = our_repository(None, &rows, &|r| r.to_owned());
    let here = here();
    let roster = roster();
    classify_with_probes(
        &InventoryInput {
            roster: &roster,
            runtime_rows: &rows,
            process_scan: &scan,
            expected_binding: None,
            now: ts("2026-07-28T03:00:00Z"),
            registry_available: true,
            registry_error: None,
            answering_namespace: None,
            hosts: Default::default(),
            peers: PeerView { evidence: Some(&evidence), ours: Some(&ours), local: Some(&here) },
        },
        &BTreeMap::from([(41000, PidProbe::Alive)]),
    )
}

#[test]
fn another_fleets_gateway_is_reported_and_leaves_the_gate_open() {
    let inv = classify(PeerEvidence::Store(their_store(vec![row(FOREIGN, "/work/theirs", None)])));
    assert!(inv.mutation_gate_satisfied, "{:?}", inv.blocked_reasons);
    assert!(inv.inventory_complete && inv.unregistered_processes.is_empty());
    assert_eq!(inv.other_fleet_gateways.iter().map(|g| g.pid).collect::<Vec<_>>(), [FOREIGN]);
    let json = serde_json::to_value(&inv).unwrap();
    assert_eq!(json["other_fleet_gateways"][0]["repository_root"], "/work/theirs");
}

#[test]
fn an_unproven_gateway_stays_unregistered_and_says_why() {
    let inv = classify(PeerEvidence::Store(their_store(vec![row(FOREIGN, OUR_ROOT, None)])));
    assert!(!inv.mutation_gate_satisfied && !inv.inventory_complete);
    assert!(inv.other_fleet_gateways.is_empty());
    assert_eq!(inv.unregistered_processes.iter().map(|p| p.pid).collect::<Vec<_>>(), [FOREIGN]);
    let reason = inv.blocked_reason.unwrap();
    assert!(reason.starts_with("unregistered fleet process pid 52000"), "{reason}");
    assert!(reason.contains("not another fleet's: it is bound to this fleet's checkout"), "{reason}");
}

/// The inventory with one unclaimed gateway started at `started` and judged at `now`.
fn classify_at(evidence: PeerEvidence, started: Timestamp, now: Timestamp) -> FleetInventory {
    let rows = vec![row(41000, OUR_ROOT, None)];
    let scan = ProcessScan::of(vec![
        ObservedProcess {
            pid: 41000,
            started_at: ts("2026-07-28T01:00:00Z"),
            command: "fleetgate serve".into(),
            uid: None,
        },
        ObservedProcess { started_at: started, ..gateway(FOREIGN) },
    ]);
    let evidence = BTreeMap::from([(FOREIGN, evidence)]);
    let ours = our_repository(None, &rows, &|r| r.to_owned());
    let here = here();
    let roster = roster();
    classify_with_probes(
        &InventoryInput {
            roster: &roster,
            runtime_rows: &rows,
            process_scan: &scan,
            expected_binding: None,
            now,
            registry_available: true,
            registry_error: None,
            answering_namespace: None,
            hosts: Default::default(),
            peers: PeerView { evidence: Some(&evidence), ours: Some(&ours), local: Some(&here) },
        },
        &BTreeMap::from([(41000, PidProbe::Alive)]),
    )
}

/// Issue 43 (4a): a neighbouring fleet's gateway that has not yet written its row (its
/// store named, not ours, not yet held open or holding no row for it) closed this gate. It
/// is that store's to account for: pending while it is younger than the grace (measured
/// from its start against the decision clock), and a blocker once it is older and still
/// unproven.
#[test]
fn a_young_gateway_of_another_store_is_pending_and_blocks_only_past_the_grace() {
    let started = ts("2026-07-28T02:00:00Z");
    let starting = PeerStore { held_open: false, ..their_store(vec![]) };
    for (evidence, why) in [
        (PeerEvidence::Store(starting.clone()), "does not hold the store"),
        (PeerEvidence::Store(their_store(vec![])), "holds no running row"),
    ] {
        for after in [0, 1, 3] {
            let inv = classify_at(evidence.clone(), started, started.plus_seconds(after));
            assert!(inv.mutation_gate_satisfied, "{after} s after its start: {:?}", inv.blocked_reasons);
            assert!(inv.inventory_complete && inv.unregistered_processes.is_empty(), "{after} s");
            let json = serde_json::to_value(&inv).unwrap();
            assert_eq!(json["pending_gateways"][0]["pid"], FOREIGN, "{json}");
            assert!(json["pending_gateways"][0]["why"].as_str().unwrap().contains(why), "{json}");
        }
        // A clock a little behind the process's start (rounded down to the second): still young.
        assert!(classify_at(evidence.clone(), started, started.plus_seconds(-1)).mutation_gate_satisfied);
        let late = classify_at(evidence.clone(), started, started.plus_seconds(30));
        assert!(!late.mutation_gate_satisfied, "it never registered: a blocker");
        assert_eq!(late.unregistered_processes.iter().map(|p| p.pid).collect::<Vec<_>>(), [FOREIGN]);
        assert!(late.blocked_reason.unwrap().contains(why));
    }
}

/// What a young gateway cannot claim: our own store, no store at all, or a row on our
/// repository — each closes the gate from its first second.
#[test]
fn a_young_gateway_of_our_store_or_of_no_store_or_on_our_repository_blocks_at_once() {
    let started = ts("2026-07-28T02:00:00Z");
    let now = started.plus_seconds(1);
    for (evidence, why) in [
        (PeerEvidence::Store(PeerStore { ours: true, held_open: false, ..their_store(vec![]) }), "own store"),
        (
            PeerEvidence::Unreadable("it names no store (no --store, store key, HOME or XDG_STATE_HOME)".into()),
            "names no store",
        ),
        (PeerEvidence::Unreadable("its command line does not parse (UnknownArgument)".into()), "does not parse"),
        (PeerEvidence::Store(their_store(vec![row(FOREIGN, OUR_ROOT, None)])), "two fleets on one repository"),
    ] {
        let inv = classify_at(evidence, started, now);
        assert!(!inv.mutation_gate_satisfied, "{why}");
        assert_eq!(inv.unregistered_processes.iter().map(|p| p.pid).collect::<Vec<_>>(), [FOREIGN], "{why}");
        assert!(inv.blocked_reason.unwrap().contains(why), "{why}");
    }
}

/// The judgement itself, its clock injected: a store not readable yet (not there, not yet a
/// store) is pending while the gateway is young, until exactly the grace's end.
#[test]
fn the_grace_is_measured_from_the_start_against_the_decision_clock() {
    let started = gateway(FOREIGN).started_at;
    let unread = PeerStore {
        unread: Some("its store /other/registry.sqlite3 cannot be looked at: No such file".into()),
        held_open: false,
        ..their_store(vec![])
    };
    let evidence = BTreeMap::from([(FOREIGN, PeerEvidence::Store(unread))]);
    let (ours, here) = (ours(), here());
    let view = PeerView { evidence: Some(&evidence), ours: Some(&ours), local: Some(&here) };
    let grace = fleetgate_core::inventory::REGISTRATION_GRACE_SECONDS;
    match judge_peer(&gateway(FOREIGN), &view, started.plus_seconds(grace)) {
        PeerVerdict::Pending(g) => {
            assert_eq!(
                (g.pid, g.until, g.store.as_str()),
                (FOREIGN, started.plus_seconds(grace), "/other/registry.sqlite3")
            );
            assert!(g.why.contains("cannot be looked at"), "{}", g.why);
        }
        other => panic!("not pending at the grace's last second: {other:?}"),
    }
    not_proven(judge_peer(&gateway(FOREIGN), &view, started.plus_seconds(grace + 1)), "cannot be looked at");
    not_proven(judge_peer(&gateway(FOREIGN), &view, started.plus_seconds(-grace - 1)), "cannot be looked at");
}
