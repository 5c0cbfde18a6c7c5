//! Properties of the classifier over random snapshots: row order never
//! matters, every corroborated row is reported exactly once, and the gate is
//! open only when nothing is wrong and everything is known.

use fleetgate_core::Timestamp;
use fleetgate_core::inventory::{Health, InventoryInput, PidProbe, classify_fleet_inventory};
use fleetgate_core::runtime::{
    Binding, CohortSource, ObservedProcess, ProcessScan, RosterMember, RuntimeRecord, RuntimeStatus,
};
use proptest::prelude::*;
use std::collections::BTreeMap;

const PROFILES: &[&str] = &["author", "reviewer", "merger", "shadow"];

fn roster() -> Vec<RosterMember> {
    PROFILES[..3]
        .iter()
        .map(|r| RosterMember {
            namespace: format!("ns-{r}"),
            profile: format!("p-{r}"),
            role: (*r).into(),
            replicas: 1,
        })
        .collect()
}

#[derive(Clone, Debug)]
struct Gen {
    profile: usize,
    pid: i64,
    cohort: Option<u8>,
    head: Option<u8>,
    stopped: bool,
    observed: bool,
    recycled: bool,
    probe: u8,
}

fn gen_row() -> impl Strategy<Value = Gen> {
    (
        0..PROFILES.len(),
        1i64..40,
        prop::option::weighted(0.9, 0u8..2),
        prop::option::weighted(0.9, 0u8..2),
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.85),
        prop::bool::weighted(0.1),
        0u8..10,
    )
        .prop_map(|(profile, pid, cohort, head, stopped, observed, recycled, probe)| Gen {
            profile,
            pid,
            cohort,
            head,
            stopped,
            observed,
            recycled,
            probe,
        })
}

fn build(gens: &[Gen]) -> (Vec<RuntimeRecord>, ProcessScan, BTreeMap<i64, PidProbe>) {
    let reg = Timestamp::from_unix(1_000_000);
    let mut rows = Vec::new();
    let mut procs = BTreeMap::new();
    let mut probes = BTreeMap::new();
    for (i, g) in gens.iter().enumerate() {
        let pid = g.pid;
        let role = PROFILES[g.profile];
        rows.push(RuntimeRecord {
            runtime_id: format!("ns-{role}:{pid}:b{i}"),
            namespace: format!("ns-{role}"),
            profile: format!("p-{role}"),
            role: role.into(),
            remote: Some("r".into()),
            org: Some("o".into()),
            repo: Some("x".into()),
            repository_root: None,
            pid,
            cohort_id: g.cohort.map(|c| format!("ppid:{c}")),
            cohort_source: CohortSource::ParentProcess,
            client_provenance: "client_managed".into(),
            boot_id: format!("b{i}"),
            startup_head: g.head.map(|h| format!("head{h}")),
            daemon_start_head: None,
            transport: "stdio".into(),
            registered_at: reg,
            last_heartbeat_at: Some(reg),
            status: if g.stopped { RuntimeStatus::Stopped } else { RuntimeStatus::Running },
            host: None,
        });
        if g.observed {
            let started = if g.recycled { reg.plus_seconds(60) } else { reg.plus_seconds(-60) };
            procs.insert(pid, ObservedProcess { pid, started_at: started, command: "mcp_server.py".into(), uid: None });
        }
        probes.entry(pid).or_insert(match g.probe {
            0 => PidProbe::Dead,
            1 => PidProbe::Unknown,
            _ => PidProbe::Alive,
        });
    }
    (rows, ProcessScan::of(procs.into_values().collect()), probes)
}

fn run(
    rows: &[RuntimeRecord],
    scan: &ProcessScan,
    probes: &BTreeMap<i64, PidProbe>,
) -> fleetgate_core::inventory::FleetInventory {
    let roster = roster();
    let binding = Binding { remote: "r".into(), org: "o".into(), repo: "x".into() };
    classify_fleet_inventory(
        &InventoryInput {
            roster: &roster,
            runtime_rows: rows,
            process_scan: scan,
            expected_binding: Some(&binding),
            now: Timestamp::from_unix(1_000_100),
            registry_available: true,
            registry_error: None,
            answering_namespace: None,
            hosts: Default::default(),
            peers: Default::default(),
        },
        &|pid| probes.get(&pid).copied().unwrap_or(PidProbe::Unknown),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn row_order_never_changes_the_verdict(gens in prop::collection::vec(gen_row(), 0..12), seed in any::<u64>()) {
        let (rows, scan, probes) = build(&gens);
        let mut shuffled = rows.clone();
        // A deterministic shuffle from the seed.
        let n = shuffled.len();
        let mut s = seed;
        for i in (1..n).rev() {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            shuffled.swap(i, (s >> 33) as usize % (i + 1));
        }
        prop_assert_eq!(run(&rows, &scan, &probes), run(&shuffled, &scan, &probes));
    }

    #[test]
    fn every_corroborated_row_appears_exactly_once(gens in prop::collection::vec(gen_row(), 0..12)) {
        let (rows, scan, probes) = build(&gens);
        let inv = run(&rows, &scan, &probes);
        let observed: BTreeMap<i64, &ObservedProcess> = scan.processes.iter().map(|p| (p.pid, p)).collect();
        for r in rows.iter().filter(|r| r.status == RuntimeStatus::Running) {
            let corroborated = probes.get(&r.pid) == Some(&PidProbe::Alive)
                && observed.get(&r.pid).is_some_and(|p| p.started_at <= r.registered_at);
            let seen = inv.running_members.iter().chain(&inv.unexpected_members).filter(|m| m.runtime_id == r.runtime_id).count();
            let stale = inv.stale_members.iter().filter(|m| m.runtime_id == r.runtime_id).count();
            if corroborated {
                prop_assert_eq!((seen, stale), (1, 0), "{}", r.runtime_id);
            } else {
                prop_assert_eq!((seen, stale), (0, 1), "{}", r.runtime_id);
            }
        }
        prop_assert_eq!(inv.running_member_count, inv.running_members.len());
    }

    #[test]
    fn the_gate_opens_only_when_nothing_is_wrong_and_everything_is_known(gens in prop::collection::vec(gen_row(), 0..12)) {
        let (rows, scan, probes) = build(&gens);
        let inv = run(&rows, &scan, &probes);
        let clean = inv.missing_members.is_empty()
            && inv.duplicate_members.is_empty()
            && inv.unexpected_members.is_empty()
            && inv.unregistered_processes.is_empty()
            && inv.repository_binding_mismatches.is_empty()
            && inv.role_mismatches.is_empty()
            && inv.mixed_cohort == Some(false)
            && !inv.mixed_revision
            && inv.incomplete_reasons.is_empty()
            && inv.stale_members.iter().all(|m| m.health != Health::Unknown)
            && inv.running_members.iter().all(|m| m.cohort_id.is_some() && m.startup_head.is_some());
        prop_assert_eq!(inv.mutation_gate_satisfied, clean, "{:?}", inv.blocked_reasons);
        prop_assert_eq!(inv.blocked_reason.is_none(), inv.mutation_gate_satisfied);
        prop_assert!(inv.mutations_performed.is_empty() && inv.read_only);
        if inv.mutation_gate_satisfied {
            prop_assert!(inv.exactly_one_per_profile && inv.inventory_complete);
        }
    }
}
