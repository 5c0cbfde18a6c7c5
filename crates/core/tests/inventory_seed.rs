//! The seed's fleet-inventory acceptance cases, by behaviour, against the pure
//! classifier. Pid liveness, the one impure input, is injected per test.

use fleetgate_core::Timestamp;
use fleetgate_core::inventory::{
    FleetInventory, Health, InventoryInput, Liveness, PidProbe, classify_fleet_inventory, summarize,
};
use fleetgate_core::runtime::{
    Binding, CohortSource, ObservedProcess, ProcessScan, RosterMember, RuntimeRecord, RuntimeStatus,
};
use std::cell::RefCell;
use std::collections::BTreeSet;

const HEAD_A: &str = "82d71b77028a7abd4f8ab4a4e4d89658a187f73d";
const HEAD_B: &str = "35ed8a2fcb11134a37c862ca6eaca26e3028902a";
const COHORT_A: &str = "ppid:40990";
const COHORT_B: &str = "ppid:51022";
const BASE_PID: i64 = 41000;

fn now() -> Timestamp {
    Timestamp::ymd_hms(2026, 7, 28, 3, 0, 0)
}

fn ts(s: &str) -> Timestamp {
    Timestamp::parse(s).unwrap()
}

fn binding() -> Binding {
    Binding { remote: "prgs".into(), org: "Scaled-Tech-Consulting".into(), repo: "Gitea-Tools".into() }
}

fn roster() -> Vec<RosterMember> {
    ["author", "reviewer", "merger", "controller", "reconciler"]
        .iter()
        .map(|r| RosterMember {
            namespace: format!("gitea-{r}"),
            profile: format!("prgs-{r}"),
            role: (*r).into(),
            replicas: 1,
        })
        .collect()
}

fn row(namespace: &str, profile: &str, role: &str, pid: i64) -> RuntimeRecord {
    let b = binding();
    RuntimeRecord {
        runtime_id: format!("{namespace}:{pid}:boot{pid}"),
        namespace: namespace.into(),
        profile: profile.into(),
        role: role.into(),
        remote: Some(b.remote),
        org: Some(b.org),
        repo: Some(b.repo),
        repository_root: Some("/checkout/Gitea-Tools".into()),
        pid,
        cohort_id: Some(COHORT_A.into()),
        cohort_source: CohortSource::ParentProcess,
        client_provenance: "client_managed".into(),
        boot_id: format!("boot{pid}"),
        startup_head: Some(HEAD_A.into()),
        daemon_start_head: Some(HEAD_A.into()),
        transport: "stdio".into(),
        registered_at: ts("2026-07-28T02:00:00Z"),
        last_heartbeat_at: Some(ts("2026-07-28T02:00:00Z")),
        status: RuntimeStatus::Running,
        host: None,
    }
}

fn healthy_rows() -> Vec<RuntimeRecord> {
    roster().iter().enumerate().map(|(i, m)| row(&m.namespace, &m.profile, &m.role, BASE_PID + i as i64)).collect()
}

fn scan_for(rows: &[RuntimeRecord], extra: &[i64]) -> ProcessScan {
    let started = ts("2026-07-28T01:00:00Z");
    ProcessScan::of(
        rows.iter()
            .map(|r| r.pid)
            .chain(extra.iter().copied())
            .map(|pid| ObservedProcess { pid, started_at: started, command: "python mcp_server.py".into(), uid: None })
            .collect(),
    )
}

/// The snapshot around one classification, with dead and unknown pids.
#[derive(Default)]
struct Snap {
    dead: BTreeSet<i64>,
    unknown: BTreeSet<i64>,
    registry_error: Option<&'static str>,
    answering: Option<&'static str>,
    probed: RefCell<Vec<i64>>,
    /// The replicas `prgs-author` declares (0: none declared).
    author_replicas: u32,
}

impl Snap {
    fn classify_with(&self, rows: &[RuntimeRecord], scan: &ProcessScan) -> FleetInventory {
        let b = binding();
        let roster: Vec<RosterMember> = roster()
            .into_iter()
            .map(|m| match self.author_replicas {
                0 => m,
                replicas if m.profile == "prgs-author" => RosterMember { replicas, ..m },
                _ => m,
            })
            .collect();
        let probe = |pid: i64| {
            self.probed.borrow_mut().push(pid);
            if self.unknown.contains(&pid) {
                PidProbe::Unknown
            } else if self.dead.contains(&pid) {
                PidProbe::Dead
            } else {
                PidProbe::Alive
            }
        };
        classify_fleet_inventory(
            &InventoryInput {
                roster: &roster,
                runtime_rows: rows,
                process_scan: scan,
                expected_binding: Some(&b),
                now: now(),
                registry_available: self.registry_error.is_none(),
                registry_error: self.registry_error,
                answering_namespace: self.answering,
                hosts: Default::default(),
                peers: Default::default(),
            },
            &probe,
        )
    }

    fn classify(&self, rows: &[RuntimeRecord]) -> FleetInventory {
        self.classify_with(rows, &scan_for(rows, &[]))
    }
}

fn classify(rows: &[RuntimeRecord]) -> FleetInventory {
    Snap::default().classify(rows)
}

fn any_contains(list: &[String], needle: &str) -> bool {
    list.iter().any(|r| r.contains(needle))
}

fn with_duplicate() -> Vec<RuntimeRecord> {
    let mut rows = healthy_rows();
    rows.push(row("gitea-author", "prgs-author", "author", 49999));
    rows
}

fn without_merger() -> Vec<RuntimeRecord> {
    healthy_rows().into_iter().filter(|r| r.profile != "prgs-merger").collect()
}

// --- AC1: healthy fleet ---------------------------------------------------

#[test]
fn healthy_fleet_reports_each_member_once_and_opens_the_gate() {
    let r = classify(&healthy_rows());
    assert_eq!(r.configured_members.len(), 5);
    assert_eq!(r.running_members.len(), 5);
    assert_eq!(r.running_member_count, 5);
    assert!(r.missing_members.is_empty() && r.duplicate_members.is_empty() && r.unexpected_members.is_empty());
    assert!(r.exactly_one_per_profile);
    assert!(r.configured_members.iter().all(|m| m.instance_count == 1 && m.health == Health::Running));
    assert!(r.inventory_complete && r.mutation_gate_satisfied);
    assert_eq!(r.blocked_reason, None);
    assert_eq!((r.single_cohort, r.mixed_cohort, r.mixed_revision), (Some(true), Some(false), false));
    let mut profiles: Vec<&str> = r.configured_members.iter().map(|m| m.profile.as_str()).collect();
    profiles.sort_unstable();
    assert_eq!(profiles, ["prgs-author", "prgs-controller", "prgs-merger", "prgs-reconciler", "prgs-reviewer"]);
}

// --- AC2: duplicates ------------------------------------------------------

#[test]
fn duplicate_is_reported_with_every_pid_and_closes_the_gate() {
    let r = classify(&with_duplicate());
    assert_eq!(r.duplicate_members.len(), 1);
    let d = &r.duplicate_members[0];
    assert_eq!((d.profile.as_str(), d.instance_count), ("prgs-author", 2));
    assert_eq!(d.pids, [BASE_PID, 49999]);
    assert!(!r.exactly_one_per_profile && !r.mutation_gate_satisfied);
    assert!(r.blocked_reason.as_deref().unwrap().contains("duplicate"));
    assert!(r.missing_members.is_empty() && r.unexpected_members.is_empty(), "not missing, not unexpected");
}

// --- AC3: missing ---------------------------------------------------------

#[test]
fn missing_member_is_named_and_closes_the_gate() {
    let r = classify(&without_merger());
    assert_eq!(r.missing_members.len(), 1);
    assert_eq!(r.missing_members[0].profile, "prgs-merger");
    assert_eq!(r.missing_members[0].health, Health::Missing);
    assert!(!r.exactly_one_per_profile && !r.mutation_gate_satisfied);
    assert!(r.blocked_reason.as_deref().unwrap().contains("prgs-merger"));
    assert_eq!(r.configured_members.len(), 5);
    let merger = r.configured_members.iter().find(|m| m.profile == "prgs-merger").unwrap();
    assert_eq!((merger.instance_count, merger.health), (0, Health::Missing));
}

// --- AC4: unexpected ------------------------------------------------------

#[test]
fn unexpected_member_is_its_own_category() {
    let mut rows = healthy_rows();
    rows.push(row("gitea-shadow", "prgs-shadow", "author", 47777));
    let r = classify(&rows);
    assert_eq!(r.unexpected_members.len(), 1);
    assert_eq!(r.unexpected_members[0].profile, "prgs-shadow");
    assert_eq!(r.unexpected_members[0].health, Health::Unexpected);
    assert!(r.duplicate_members.is_empty() && r.missing_members.is_empty());
    assert!(r.exactly_one_per_profile);
    assert!(!r.no_unexpected_members && !r.mutation_gate_satisfied);
    assert!(any_contains(&r.blocked_reasons, "unexpected"));
}

// --- AC5/AC6/AC7: cohorts and revisions ------------------------------------

#[test]
fn two_cohorts_are_detected_and_close_the_gate() {
    let mut rows = healthy_rows();
    rows[0].cohort_id = Some(COHORT_B.into());
    let r = classify(&rows);
    assert_eq!((r.mixed_cohort, r.single_cohort), (Some(true), Some(false)));
    assert_eq!(
        r.cohort_ids,
        [COHORT_B, COHORT_A].iter().copied().collect::<BTreeSet<_>>().into_iter().collect::<Vec<_>>()
    );
    assert!(!r.mutation_gate_satisfied);
    assert!(any_contains(&r.blocked_reasons, "cohort"));
    assert!(r.duplicate_members.is_empty() && r.missing_members.is_empty());
}

#[test]
fn two_revisions_are_detected_without_implying_mixed_cohort() {
    let mut rows = healthy_rows();
    rows[0].startup_head = Some(HEAD_B.into());
    let r = classify(&rows);
    assert!(r.mixed_revision);
    let mut want = vec![HEAD_A.to_owned(), HEAD_B.to_owned()];
    want.sort();
    assert_eq!(r.startup_revisions, want);
    assert!(!r.mutation_gate_satisfied);
    assert!(any_contains(&r.blocked_reasons, "revision"));
    assert_eq!((r.single_cohort, r.mixed_cohort), (Some(true), Some(false)));
}

#[test]
fn identical_revisions_with_unknown_cohort_stay_unknown_and_fail_closed() {
    let mut rows = healthy_rows();
    for r in &mut rows {
        r.cohort_id = None;
    }
    let r = classify(&rows);
    assert_eq!(r.startup_revisions.len(), 1);
    assert_eq!((r.single_cohort, r.mixed_cohort), (None, None));
    assert!(!r.inventory_complete && !r.mutation_gate_satisfied);
    assert!(any_contains(&r.incomplete_reasons, "cohort"));
    // Unknown, not a named defect: nothing is missing, duplicated or unexpected.
    assert!(r.missing_members.is_empty() && r.duplicate_members.is_empty() && r.unexpected_members.is_empty());
}

#[test]
fn one_unknown_cohort_among_known_ones_still_fails_closed() {
    let mut rows = healthy_rows();
    rows[0].cohort_id = None;
    let r = classify(&rows);
    assert_eq!(r.single_cohort, None);
    assert!(!r.mutation_gate_satisfied);
}

// --- AC8: configuration is not running -------------------------------------

#[test]
fn no_rows_means_every_member_is_missing() {
    let r = Snap::default().classify_with(&[], &scan_for(&[], &[]));
    assert_eq!(r.missing_members.len(), 5);
    assert!(r.running_members.is_empty() && !r.mutation_gate_satisfied);
}

#[test]
fn dead_pid_is_stale_and_its_profile_missing() {
    let rows = healthy_rows();
    let snap = Snap { dead: [rows[0].pid].into(), ..Default::default() };
    let r = snap.classify(&rows);
    assert_eq!(r.running_members.len(), 4);
    assert_eq!(r.stale_members.len(), 1);
    assert_eq!((r.stale_members[0].liveness, r.stale_members[0].health), (Liveness::Dead, Health::Stale));
    assert_eq!(r.missing_members.len(), 1);
}

#[test]
fn a_row_without_a_matching_process_is_unobserved() {
    let rows = healthy_rows();
    let r = Snap::default().classify_with(&rows, &scan_for(&rows[1..], &[]));
    assert_eq!(r.running_members.len(), 4);
    assert_eq!(r.stale_members[0].liveness, Liveness::Unobserved);
    assert!(!r.mutation_gate_satisfied);
}

#[test]
fn a_recycled_pid_does_not_impersonate_a_dead_server() {
    let rows = healthy_rows();
    let mut scan = scan_for(&rows, &[]);
    scan.processes[0].started_at = ts("2026-07-28T02:30:00Z");
    let r = Snap::default().classify_with(&rows, &scan);
    assert_eq!(r.stale_members.iter().filter(|m| m.liveness == Liveness::PidRecycled).count(), 1);
    assert_eq!(r.running_members.len(), 4);
    assert!(!r.mutation_gate_satisfied);
}

#[test]
fn a_stale_row_beside_one_running_instance_does_not_close_the_gate() {
    let mut rows = healthy_rows();
    let mut old = row("gitea-author", "prgs-author", "author", 30001);
    old.registered_at = ts("2026-07-28T01:30:00Z");
    rows.push(old);
    let snap = Snap { dead: [30001].into(), ..Default::default() };
    let r = snap.classify(&rows);
    assert_eq!(r.stale_members.len(), 1);
    assert!(r.mutation_gate_satisfied, "{:?}", r.blocked_reasons);
}

#[test]
fn stopped_rows_are_history_not_members() {
    let mut rows = healthy_rows();
    let mut gone = row("gitea-author", "prgs-author", "author", 30002);
    gone.status = RuntimeStatus::Stopped;
    let scan = scan_for(&rows, &[]);
    rows.push(gone);
    let r = Snap::default().classify_with(&rows, &scan);
    assert!(r.stale_members.is_empty() && r.duplicate_members.is_empty());
    assert!(r.mutation_gate_satisfied, "{:?}", r.blocked_reasons);
    // A process still serving under a row that says it stopped is unregistered.
    let r = Snap::default().classify_with(&rows, &scan_for(&rows, &[]));
    assert!(any_contains(&r.incomplete_reasons, "30002"));
}

// --- AC9: incomplete evidence fails closed ---------------------------------

#[test]
fn unavailable_listing_fails_closed_with_its_reason() {
    let rows = healthy_rows();
    let r = Snap::default().classify_with(&rows, &ProcessScan::unavailable("ps unavailable"));
    assert!(!r.inventory_complete && !r.mutation_gate_satisfied);
    assert!(any_contains(&r.incomplete_reasons, "ps unavailable"));
    assert!(r.running_members.is_empty());
    assert!(r.missing_members.is_empty(), "unknown is not missing");
}

#[test]
fn unreadable_registry_fails_closed_with_its_error() {
    let snap = Snap { registry_error: Some("registry unreadable"), ..Default::default() };
    let r = snap.classify_with(&[], &scan_for(&[], &[]));
    assert!(!r.inventory_complete && !r.mutation_gate_satisfied);
    assert!(any_contains(&r.incomplete_reasons, "registry unreadable"));
}

#[test]
fn an_unregistered_fleet_process_fails_closed_naming_its_pid() {
    let rows = healthy_rows();
    let r = Snap::default().classify_with(&rows, &scan_for(&rows, &[59999]));
    assert_eq!(r.unregistered_processes.iter().map(|p| p.pid).collect::<Vec<_>>(), [59999]);
    assert!(!r.inventory_complete && !r.mutation_gate_satisfied);
    assert!(any_contains(&r.incomplete_reasons, "59999"));
}

#[test]
fn undeterminable_liveness_is_unknown_not_healthy() {
    let rows = healthy_rows();
    let snap = Snap { unknown: [rows[0].pid].into(), ..Default::default() };
    let r = snap.classify(&rows);
    assert_eq!((r.stale_members[0].liveness, r.stale_members[0].health), (Liveness::Unknown, Health::Unknown));
    assert!(!r.inventory_complete && !r.mutation_gate_satisfied);
}

#[test]
fn unknown_startup_revision_fails_closed() {
    let mut rows = healthy_rows();
    rows[0].startup_head = None;
    let r = classify(&rows);
    assert!(!r.inventory_complete && !r.mutation_gate_satisfied);
    assert!(any_contains(&r.incomplete_reasons, "startup revision"));
}

// --- binding and role consistency ------------------------------------------

#[test]
fn binding_mismatch_and_incomplete_binding_are_reported() {
    let mut rows = healthy_rows();
    rows[0].repo = Some("Some-Other-Repo".into());
    let r = classify(&rows);
    assert_eq!(r.repository_binding_mismatches.len(), 1);
    assert_eq!(r.repository_binding_mismatches[0].repo.as_deref(), Some("Some-Other-Repo"));
    assert!(!r.mutation_gate_satisfied);

    let mut rows = healthy_rows();
    rows[0].org = None;
    let r = classify(&rows);
    assert_eq!(r.repository_binding_mismatches.len(), 1);
    assert!(r.repository_binding_mismatches[0].reason.contains("incomplete"));
    assert!(!r.mutation_gate_satisfied);
}

#[test]
fn role_and_namespace_mismatches_are_reported() {
    let mut rows = healthy_rows();
    let author = rows.iter_mut().find(|r| r.profile == "prgs-author").unwrap();
    author.role = "merger".into();
    let r = classify(&rows);
    assert_eq!(r.role_mismatches.len(), 1);
    assert_eq!(
        (r.role_mismatches[0].expected_role.as_str(), r.role_mismatches[0].declared_role.as_str()),
        ("author", "merger")
    );
    assert!(!r.mutation_gate_satisfied);

    let mut rows = healthy_rows();
    rows.iter_mut().find(|r| r.profile == "prgs-author").unwrap().namespace = "gitea-reviewer".into();
    let r = classify(&rows);
    assert!(r.role_mismatches.iter().any(|m| m.expected_namespace == "gitea-author"));
    assert!(!r.mutation_gate_satisfied);

    let r = classify(&healthy_rows());
    assert!(r.repository_binding_mismatches.is_empty() && r.role_mismatches.is_empty());
}

// --- AC10: determinism -------------------------------------------------------

#[test]
fn identical_snapshots_and_row_order_give_identical_results() {
    let first = classify(&healthy_rows());
    assert_eq!(first, classify(&healthy_rows()));
    let mut reversed = healthy_rows();
    reversed.reverse();
    assert_eq!(first, classify(&reversed));
}

#[test]
fn members_are_sorted_by_namespace_profile_pid() {
    let mut rows = healthy_rows();
    rows.push(row("gitea-author", "prgs-author", "author", 40001));
    let r = classify(&rows);
    let keys: Vec<_> = r.running_members.iter().map(|m| (m.namespace.clone(), m.profile.clone(), m.pid)).collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted);
}

#[test]
fn controller_and_reconciler_agree_healthy_or_not() {
    for rows in [healthy_rows(), without_merger()] {
        let c = Snap { answering: Some("gitea-controller"), ..Default::default() }.classify(&rows);
        let r = Snap { answering: Some("gitea-reconciler"), ..Default::default() }.classify(&rows);
        assert_eq!(c.answering_namespace.as_deref(), Some("gitea-controller"));
        assert_eq!(r.answering_namespace.as_deref(), Some("gitea-reconciler"));
        let same = FleetInventory { answering_namespace: None, ..c };
        assert_eq!(same, FleetInventory { answering_namespace: None, ..r });
    }
}

// --- AC11: read-only -------------------------------------------------------

#[test]
fn classification_reports_no_mutations_and_leaves_its_input_alone() {
    let rows = with_duplicate();
    let before = rows.clone();
    let snap = Snap::default();
    let r = snap.classify(&rows);
    assert!(r.mutations_performed.is_empty() && r.read_only);
    assert_eq!(rows, before);
    assert_eq!(snap.probed.borrow().len(), rows.len(), "liveness is actually probed, once per row");
}

// --- the multi-client regression -------------------------------------------

fn two_clients() -> Vec<RuntimeRecord> {
    let mut rows = healthy_rows();
    for (i, m) in roster().iter().enumerate() {
        let mut r = row(&m.namespace, &m.profile, &m.role, 50000 + i as i64);
        r.cohort_id = Some(COHORT_B.into());
        rows.push(r);
    }
    rows
}

#[test]
fn a_second_client_running_the_same_five_profiles_is_caught() {
    let r = classify(&two_clients());
    assert_eq!(r.duplicate_members.len(), 5);
    assert!(!r.exactly_one_per_profile);
    assert_eq!((r.mixed_cohort, r.single_cohort), (Some(true), Some(false)));
    assert!(!r.mixed_revision, "both clients share a revision");
    assert_eq!(r.startup_revisions, [HEAD_A]);
    assert!(!r.mutation_gate_satisfied);
    assert!(r.missing_members.is_empty());
    assert!(r.duplicate_members.iter().all(|d| d.pids.len() == 2));
}

// --- summary and heartbeat age ---------------------------------------------

#[test]
fn summary_names_the_counts_or_repeats_the_blocked_reason() {
    assert!(summarize(&classify(&healthy_rows())).contains("5 of 5"));
    let blocked = classify(&without_merger());
    assert!(summarize(&blocked).contains(blocked.blocked_reason.as_deref().unwrap()));
}

#[test]
fn heartbeat_age_is_reported_or_null() {
    let mut rows = healthy_rows();
    rows[0].last_heartbeat_at = Some(now().plus_seconds(-1800));
    rows[1].last_heartbeat_at = None;
    let r = classify(&rows);
    let age = |pid| r.running_members.iter().find(|m| m.pid == pid).unwrap().heartbeat_age_seconds;
    assert_eq!(age(rows[0].pid), Some(1800));
    assert_eq!(age(rows[1].pid), None);
    assert!(r.mutation_gate_satisfied, "an old row refresh is diagnosis, not a verdict");
}

// --- fleets across hosts ----------------------------------------------------

mod across_hosts {
    use super::*;
    use fleetgate_core::inventory::{HostView, RemoteObservation, served_here};
    use std::collections::BTreeMap;

    /// The reviewer runs on host-b; everything else here on host-a.
    fn classify_remote(obs: Option<RemoteObservation>, local_scan: &ProcessScan) -> FleetInventory {
        let rows = healthy_rows();
        let reviewer = rows.iter().find(|r| r.profile == "prgs-reviewer").unwrap().runtime_id.clone();
        let row_hosts: BTreeMap<String, String> = rows
            .iter()
            .map(|r| (r.runtime_id.clone(), if r.runtime_id == reviewer { "host-b" } else { "host-a" }.to_owned()))
            .collect();
        let observations: BTreeMap<String, RemoteObservation> =
            obs.into_iter().map(|o| ("host-b".to_owned(), o)).collect();
        let b = binding();
        let roster = roster();
        classify_fleet_inventory(
            &InventoryInput {
                roster: &roster,
                runtime_rows: &rows,
                process_scan: local_scan,
                expected_binding: Some(&b),
                now: now(),
                registry_available: true,
                registry_error: None,
                answering_namespace: None,
                hosts: HostView {
                    local_host: Some("host-a"),
                    row_hosts: Some(&row_hosts),
                    observations: Some(&observations),
                    observation_ttl_seconds: 900.0,
                },
                peers: Default::default(),
            },
            // A remote pid is never probed: signal 0 says nothing about another host.
            &|pid| if pid == BASE_PID + 1 { PidProbe::Dead } else { PidProbe::Alive },
        )
    }

    fn local_scan() -> ProcessScan {
        let rows: Vec<RuntimeRecord> = healthy_rows().into_iter().filter(|r| r.profile != "prgs-reviewer").collect();
        scan_for(&rows, &[])
    }

    fn reviewer_scan() -> ProcessScan {
        let rows: Vec<RuntimeRecord> = healthy_rows().into_iter().filter(|r| r.profile == "prgs-reviewer").collect();
        scan_for(&rows, &[])
    }

    #[test]
    fn a_member_on_another_host_is_corroborated_by_that_hosts_fresh_observation() {
        let fresh = RemoteObservation { observed_at: now().plus_seconds(-60), scan: reviewer_scan() };
        let r = classify_remote(Some(fresh), &local_scan());
        assert!(r.mutation_gate_satisfied, "{:?}", r.blocked_reasons);
        assert_eq!(r.running_member_count, 5);
    }

    #[test]
    fn no_or_stale_observation_makes_the_remote_member_unknown() {
        for obs in [None, Some(RemoteObservation { observed_at: now().plus_seconds(-3600), scan: reviewer_scan() })] {
            let r = classify_remote(obs, &local_scan());
            let reviewer = r.stale_members.iter().find(|m| m.profile == "prgs-reviewer").expect("not running");
            assert_eq!((reviewer.liveness, reviewer.health), (Liveness::Unknown, Health::Unknown));
            assert!(!r.inventory_complete && !r.mutation_gate_satisfied);
            assert!(any_contains(&r.incomplete_reasons, "host-b"), "{:?}", r.incomplete_reasons);
        }
    }

    #[test]
    fn a_fresh_observation_without_the_pid_leaves_it_unobserved() {
        let empty = RemoteObservation { observed_at: now(), scan: ProcessScan::of(vec![]) };
        let r = classify_remote(Some(empty), &local_scan());
        let reviewer = r.stale_members.iter().find(|m| m.profile == "prgs-reviewer").unwrap();
        assert_eq!(reviewer.liveness, Liveness::Unobserved);
        assert_eq!(r.missing_members[0].profile, "prgs-reviewer");
    }

    #[test]
    fn a_local_process_sharing_a_remote_pid_is_still_unregistered() {
        let fresh = RemoteObservation { observed_at: now(), scan: reviewer_scan() };
        let mut local = local_scan();
        local.processes.push(ObservedProcess {
            pid: BASE_PID + 1,
            started_at: ts("2026-07-28T01:00:00Z"),
            command: "python mcp_server.py".into(),
            uid: None,
        });
        let r = classify_remote(Some(fresh), &ProcessScan::of(local.processes));
        assert_eq!(r.unregistered_processes.iter().map(|p| p.pid).collect::<Vec<_>>(), [BASE_PID + 1]);
    }

    #[test]
    fn a_row_of_another_host_is_never_served_by_a_local_process_with_its_pid() {
        // host-b's row and host-a's row claim the same pid (two PID namespaces, two
        // machines); host-a observes that pid, its own process. Only its own row is
        // served here: host-b's checkout is not this host's to judge.
        let mut rows = healthy_rows();
        rows.truncate(2);
        rows[1].pid = rows[0].pid;
        let row_hosts: BTreeMap<String, String> =
            [(rows[0].runtime_id.clone(), "host-a".to_owned()), (rows[1].runtime_id.clone(), "host-b".to_owned())]
                .into();
        let view = |local: &'static str| HostView {
            local_host: Some(local),
            row_hosts: Some(&row_hosts),
            observations: None,
            observation_ttl_seconds: 900.0,
        };
        let scan = scan_for(&rows[..1], &[]);
        let ids = |v: Vec<&RuntimeRecord>| v.into_iter().map(|r| r.runtime_id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(served_here(&rows, &scan, &view("host-a"))), [rows[0].runtime_id.clone()]);
        assert_eq!(ids(served_here(&rows, &scan, &view("host-b"))), [rows[1].runtime_id.clone()]);
        // A row that recorded no host is taken to be local; a stopped one is history.
        rows[0].status = RuntimeStatus::Stopped;
        let no_hosts = HostView { local_host: Some("host-a"), ..Default::default() };
        assert_eq!(ids(served_here(&rows, &scan, &no_hosts)), [rows[1].runtime_id.clone()]);
        assert!(served_here(&rows, &ProcessScan::of(vec![]), &no_hosts).is_empty());
    }
}

// --- Replicas: a member that declares them ----------------------------------

/// The roster with `prgs-author` declaring `replicas`, classified against `rows`.
fn classify_replicated(replicas: u32, rows: &[RuntimeRecord]) -> FleetInventory {
    Snap { author_replicas: replicas, ..Snap::default() }.classify(rows)
}

#[test]
fn declared_replicas_count_as_one_member_and_one_more_is_a_duplicate() {
    let mut rows = healthy_rows();
    rows.push(row("gitea-author", "prgs-author", "author", 49998));
    rows.push(row("gitea-author", "prgs-author", "author", 49999));
    // Three authors, three declared: one member, the gate open.
    let r = classify_replicated(3, &rows);
    assert!(r.duplicate_members.is_empty(), "{:?}", r.duplicate_members);
    assert!(r.mutation_gate_satisfied && r.exactly_one_per_profile, "{:?}", r.blocked_reason);
    let author = r.configured_members.iter().find(|m| m.profile == "prgs-author").unwrap();
    assert_eq!((author.instance_count, author.health), (3, Health::Running));
    // Fewer than declared is no fault (a replica restarting behind the load balancer).
    let two: Vec<RuntimeRecord> = rows.iter().filter(|r| r.pid != 49999).cloned().collect();
    assert!(classify_replicated(3, &two).mutation_gate_satisfied);
    // Undeclared, the same three are the seed's duplicate.
    let r = classify_replicated(1, &rows);
    assert_eq!(r.duplicate_members[0].instance_count, 3);
    assert!(!r.mutation_gate_satisfied);
    // One more than declared closes the gate, naming what was declared.
    rows.push(row("gitea-author", "prgs-author", "author", 49997));
    let r = classify_replicated(3, &rows);
    let d = &r.duplicate_members[0];
    assert_eq!((d.profile.as_str(), d.instance_count, d.replicas), ("prgs-author", 4, 3));
    assert!(!r.mutation_gate_satisfied && !r.exactly_one_per_profile);
    let why = r.blocked_reason.unwrap();
    assert!(why.contains("duplicate prgs-author: 4 running instances, 3 replicas declared"), "{why}");
    // Replicas of another cohort or revision are not one member: the fleet's coherence refuses them.
    let mut mixed = healthy_rows();
    let mut other = row("gitea-author", "prgs-author", "author", 49998);
    other.cohort_id = Some(COHORT_B.into());
    other.startup_head = Some(HEAD_B.into());
    mixed.push(other);
    let r = classify_replicated(3, &mixed);
    assert!(r.duplicate_members.is_empty());
    assert!(!r.mutation_gate_satisfied, "mixed cohorts and revisions close the gate");
}
