//! The fleet evidence: the store's runtime rows (with their hosts) and other hosts'
//! published scans, read in one transaction ([`Store::fleet_snapshot`]); this host's own
//! process observation, signal-0 probes, each peer's environment and each checkout's HEAD,
//! all through the [`Observer`] — handed to the pure classifier and diagnostics. The one path behind
//! `fleetgate inventory`, `fleetgate capability`, the control tools and the gateway's gate,
//! so they can never disagree.

use super::observer::{Observer, scan_host};
use super::peers::{gone_since_scan, peer_evidence};
use fleetgate_config::FleetConfig;
use fleetgate_core::Timestamp;
use fleetgate_core::diagnostics::{Diagnostic, PeerEnv, peer_env_diagnostic, stale_runtime_diagnostic};
use fleetgate_core::inventory::{
    FleetInventory, HostView, InventoryInput, PeerView, PidProbe, RemoteObservation, classify_with_probes,
    our_repository, served_here,
};
use fleetgate_core::runtime::{ProcessScan, RuntimeRecord, RuntimeStatus};
use fleetgate_host::HostError;
use fleetgate_host::paths::canonical_root;
use fleetgate_store::{FleetSnapshot, Store, StoreError};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// One look at the fleet.
#[derive(Clone, Debug, Serialize)]
pub struct Snapshot {
    /// The inventory verdict.
    pub inventory: FleetInventory,
    /// Runtime diagnostics (hard families first-class: `unsupported-env:`, `stale-runtime:`).
    pub diagnostics: Vec<Diagnostic>,
}

/// What the store holds about the fleet, or why it cannot be read.
struct Rows {
    rows: Vec<RuntimeRecord>,
    row_hosts: BTreeMap<String, String>,
    remote: BTreeMap<String, RemoteObservation>,
    store: Option<fleetgate_core::runtime::StoreIdentity>,
    error: Option<String>,
}

/// The fleet as the store holds it, read in one transaction, or why it cannot be read.
pub fn read_fleet(store: Result<&dyn Store, &StoreError>) -> Result<FleetSnapshot, StoreError> {
    store.map_err(Clone::clone).and_then(|s| s.fleet_snapshot())
}

fn read_rows(read: Result<FleetSnapshot, StoreError>) -> Rows {
    match read {
        Ok(FleetSnapshot { runtimes: rows, observations, store, .. }) => Rows {
            row_hosts: rows
                .iter()
                .filter_map(|r| Some((r.runtime_id.clone(), r.host.as_ref()?.host_id.clone())))
                .collect(),
            rows,
            remote: observations
                .into_iter()
                .map(|o| (o.host.host_id, RemoteObservation { observed_at: o.observed_at, scan: o.scan }))
                .collect(),
            store,
            error: None,
        },
        Err(e) => Rows {
            rows: Vec::new(),
            row_hosts: BTreeMap::new(),
            remote: BTreeMap::new(),
            store: None,
            error: Some(e.to_string()),
        },
    }
}

/// Signal 0 for every pid a running row claims, taken before classification: the
/// classifier reads probe results as values.
fn probe_rows(rows: &[RuntimeRecord], observer: &dyn Observer) -> BTreeMap<i64, PidProbe> {
    rows.iter()
        .filter(|r| r.status == RuntimeStatus::Running)
        .map(|r| (r.pid, if r.pid > 0 { observer.probe(r.pid) } else { PidProbe::Unknown }))
        .collect()
}

/// Look at the fleet as of `now`. A store that cannot be read fails closed inside the
/// verdict (its error named), never as an empty healthy fleet.
pub fn snapshot(
    config: &FleetConfig,
    store: Result<&dyn Store, &StoreError>,
    observer: &dyn Observer,
    now: Timestamp,
    answering_namespace: Option<&str>,
) -> Snapshot {
    snapshot_of(config, read_fleet(store), observer, now, answering_namespace)
}

/// Look at the fleet as `read` (one [`read_fleet`]) holds it, as of `now`.
pub fn snapshot_of(
    config: &FleetConfig,
    read: Result<FleetSnapshot, StoreError>,
    observer: &dyn Observer,
    now: Timestamp,
    answering_namespace: Option<&str>,
) -> Snapshot {
    let read = read_rows(read);
    let local_identity = observer.local_host();
    let local = local_identity.as_ref().map(|h| h.host_id.clone());
    let mut scan = scan_host(config, observer.processes());
    let probes = probe_rows(&read.rows, observer);
    // Each scanned process's environment, read once (the diagnostics judge it). A process
    // that exited since the listing is gone, not a risk: any read of it after the scan that
    // finds it gone drops it from the scan.
    let mut gone = BTreeSet::new();
    let mut envs = BTreeMap::new();
    for p in &scan.processes {
        match observer.processes().environ(p.pid) {
            Ok(env) => {
                envs.insert(p.pid, PeerEnv::Read(env));
            }
            Err(_) if gone_since_scan(observer, p) => {
                gone.insert(p.pid);
            }
            Err(why) => {
                envs.insert(p.pid, PeerEnv::Unreadable(why.to_string()));
            }
        }
    }
    // Gateways no row of ours claims: the facts their own stores give, for the classifier
    // to tell another fleet's (proven, another repository) from an unregistered process.
    let matcher = fleetgate_core::procmatch::FleetMatcher::new(&config.process_match);
    let peers = peer_evidence(&config.env_prefix, &matcher, &scan, &read.rows, observer);
    gone.extend(&peers.gone);
    let evidence = peers.evidence;
    scan.processes.retain(|p| !gone.contains(&p.pid));
    let ours = our_repository(config.binding.as_ref(), &read.rows, &canonical_root);
    let hosts = HostView {
        local_host: local.as_deref(),
        row_hosts: Some(&read.row_hosts),
        observations: Some(&read.remote),
        observation_ttl_seconds: config.heartbeat_ttl_seconds,
    };
    let inventory = classify_with_probes(
        &InventoryInput {
            roster: &config.members,
            runtime_rows: &read.rows,
            process_scan: &scan,
            expected_binding: config.binding.as_ref(),
            now,
            registry_available: read.error.is_none(),
            registry_error: read.error.as_deref(),
            answering_namespace,
            hosts,
            peers: PeerView {
                evidence: Some(&evidence),
                ours: Some(&ours),
                local: local_identity.as_ref(),
                store: read.store.as_ref(),
            },
        },
        &probes,
    );
    let head_of = |root: &Path| observer.head(root);
    // Another fleet's gateway — or another store's, still pending — runs under its own
    // fleet's environment rules, not ours.
    let mut ours_only = scan;
    ours_only.processes.retain(|p| {
        !inventory.other_fleet_gateways.iter().any(|g| g.pid == p.pid)
            && !inventory.pending_gateways.iter().any(|g| g.pid == p.pid)
    });
    let diagnostics = runtime_diagnostics(config, &ours_only, &read.rows, &hosts, &envs, &head_of);
    Snapshot { inventory, diagnostics }
}

/// Diagnostics of every observed peer: its environment as read (`envs`: unknown keys, or an
/// environment that cannot be read), and for each running row of this host the
/// process still serves ([`served_here`]), revision parity against its checkout's
/// current head. A row of another host is that host's to judge: its checkout is not
/// this host's to read, and a local process sharing its pid is not it.
pub fn runtime_diagnostics(
    config: &FleetConfig,
    scan: &ProcessScan,
    rows: &[RuntimeRecord],
    hosts: &HostView<'_>,
    envs: &BTreeMap<i64, PeerEnv>,
    head_of: &dyn Fn(&Path) -> Result<String, HostError>,
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for p in &scan.processes {
        let unread = PeerEnv::Unreadable(format!("the environment of pid {} was not read", p.pid));
        let env = envs.get(&p.pid).unwrap_or(&unread);
        out.extend(peer_env_diagnostic(p.pid, env, &config.env_prefix, &config.pass_through_env));
    }
    let mut heads: BTreeMap<&str, Result<String, HostError>> = BTreeMap::new();
    for row in served_here(rows, scan, hosts) {
        let (Some(root), Some(startup)) = (row.repository_root.as_deref(), row.startup_head.as_deref()) else {
            continue;
        };
        let current = heads.entry(root).or_insert_with(|| head_of(Path::new(root)));
        match current {
            Ok(head) => out.extend(stale_runtime_diagnostic(&row.namespace, row.pid, startup, head)),
            Err(why) => out.push(Diagnostic::UnknownHead {
                root: root.to_owned(),
                namespace: row.namespace.clone(),
                pid: row.pid,
                why: why.to_string(),
            }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::PeerUnread;
    use fleetgate_core::env::EnvSnapshot;
    use fleetgate_core::inventory::PeerFacts;
    use fleetgate_core::runtime::CohortSource;
    use fleetgate_host::HostErrorKind;
    use fleetgate_host::procfs::{ProcEntry, ProcessSource};
    use std::collections::BTreeSet;
    use std::sync::Mutex;

    const MEMBER: i64 = 41;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::ymd_hms(2026, 12, 1, 12, 0, 0).plus_seconds(seconds)
    }

    fn entry(pid: i64, argv: &[&str]) -> ProcEntry {
        ProcEntry {
            pid,
            ppid: 1,
            started_at: at(0),
            argv: argv.iter().map(|a| (*a).to_owned()).collect(),
            uid: Some(1000),
        }
    }

    /// A host whose listing shows processes that exit right after it: every later read of
    /// one (its environment, its entry, its store) finds it gone, as `/proc` answers ENOENT.
    /// `exits_late` is still there for the store's first look (its entry), gone after.
    #[derive(Debug)]
    struct Churn {
        listed: Vec<ProcEntry>,
        exited: Mutex<BTreeSet<i64>>,
        exits_after_the_scan: BTreeSet<i64>,
        exits_late: i64,
    }

    impl ProcessSource for Churn {
        fn entries(&self) -> Result<Vec<ProcEntry>, HostError> {
            let listed =
                self.listed.iter().filter(|e| !self.exited.lock().unwrap().contains(&e.pid)).cloned().collect();
            self.exited.lock().unwrap().extend(&self.exits_after_the_scan);
            Ok(listed)
        }
        fn entry(&self, pid: i64) -> Option<ProcEntry> {
            let mut exited = self.exited.lock().unwrap();
            let found = self.listed.iter().find(|e| e.pid == pid && !exited.contains(&pid)).cloned();
            if pid == self.exits_late {
                exited.insert(pid);
            }
            found
        }
        fn environ(&self, pid: i64) -> Result<EnvSnapshot, HostError> {
            if self.exited.lock().unwrap().contains(&pid) {
                let why = format!("cannot read /proc/{pid}/environ: No such file or directory (os error 2)");
                return Err(HostError::new(HostErrorKind::Unreadable, why));
            }
            Ok(EnvSnapshot::from_pairs([("PATH", "/bin")]))
        }
    }

    impl Observer for Churn {
        fn processes(&self) -> &dyn ProcessSource {
            self
        }
        fn probe(&self, pid: i64) -> PidProbe {
            if self.exited.lock().unwrap().contains(&pid) { PidProbe::Dead } else { PidProbe::Alive }
        }
        fn local_host(&self) -> Option<fleetgate_store::HostIdentity> {
            Some(fleetgate_store::HostIdentity { host_id: "h".into(), boot_id: "b".into() })
        }
        fn head(&self, _: &Path) -> Result<String, fleetgate_host::HostError> {
            Err(HostError::new(HostErrorKind::Unreadable, "no checkout here"))
        }
        fn peer_facts(&self, pid: i64, _: &[String], _: &str) -> Result<PeerFacts, PeerUnread> {
            self.environ(pid).map_err(PeerUnread::OpenFiles)?;
            let why = format!("pid {pid} is still there, its store unreadable");
            Err(PeerUnread::OpenFiles(HostError::new(HostErrorKind::Unreadable, why)))
        }
    }

    fn member_row() -> RuntimeRecord {
        RuntimeRecord {
            runtime_id: format!("gitea-author:{MEMBER}:b"),
            namespace: "gitea-author".into(),
            profile: "prgs-author".into(),
            role: "author".into(),
            remote: None,
            org: None,
            repo: None,
            repository_root: None,
            pid: MEMBER,
            cohort_id: Some("c".into()),
            cohort_source: CohortSource::ExplicitEnv,
            client_provenance: "client_managed".into(),
            boot_id: "b".into(),
            startup_head: Some("82d71b77028a7abd4f8ab4a4e4d89658a187f73d".into()),
            daemon_start_head: None,
            transport: "stdio".into(),
            registered_at: at(10),
            last_heartbeat_at: Some(at(10)),
            status: RuntimeStatus::Running,
            host: None,
        }
    }

    fn look(host: &Churn) -> Snapshot {
        look_at(host)
    }

    fn look_at(host: &dyn Observer) -> Snapshot {
        let config = FleetConfig::parse(
            "[fleet]\nname = \"t\"\n\n[[members]]\nnamespace = \"gitea-author\"\nprofile = \"prgs-author\"\nrole = \"author\"\n",
            "fleet.toml",
        )
        .unwrap();
        let read = FleetSnapshot { runtimes: vec![member_row()], workers: vec![], observations: vec![], store: None };
        snapshot_of(&config, Ok(read), host, at(60), None)
    }

    /// Issue 43 (4b): a process that exited between the scan and the read of its environment
    /// ("cannot read /proc/N/environ: No such file or directory") made the gate refuse
    /// `runtime_reconnect_required`, and a gateway gone before its store was looked at was
    /// an unregistered process. A process that is gone is gone: dropped from the scan.
    #[test]
    fn a_process_gone_after_the_scan_is_dropped_not_a_risk() {
        let host = Churn {
            listed: vec![
                entry(MEMBER, &["python", "mcp_server.py"]),
                entry(7, &["fleetgate", "--store", "/other/r.sqlite3", "serve", "--profile", "p"]),
                entry(8, &["python", "mcp_server.py"]),
                entry(9, &["fleetgate", "--store", "/other/r.sqlite3", "serve", "--profile", "p"]),
            ],
            exited: Mutex::default(),
            exits_after_the_scan: BTreeSet::from([7, 8]),
            exits_late: 9,
        };
        let snap = look(&host);
        assert_eq!(snap.diagnostics, [], "a gone process's environment is no diagnostic");
        assert!(snap.inventory.unregistered_processes.is_empty(), "{:?}", snap.inventory.blocked_reasons);
        assert!(snap.inventory.mutation_gate_satisfied, "{:?}", snap.inventory.blocked_reasons);
    }

    /// A host whose processes are `listed` at a scan and `now` when one is looked up again
    /// (a process that ran another program meanwhile), whose peer reads `facts` answers and
    /// `reads` counts.
    #[derive(Debug)]
    struct Scripted {
        listed: Vec<ProcEntry>,
        now: Vec<ProcEntry>,
        facts: fn(&Scripted, i64, &[String]) -> Result<PeerFacts, PeerUnread>,
        reads: std::sync::atomic::AtomicU32,
    }

    impl Scripted {
        fn new(
            listed: Vec<ProcEntry>,
            now: Vec<ProcEntry>,
            facts: fn(&Scripted, i64, &[String]) -> Result<PeerFacts, PeerUnread>,
        ) -> Self {
            Self { listed, now, facts, reads: std::sync::atomic::AtomicU32::new(0) }
        }
    }

    impl ProcessSource for Scripted {
        fn entries(&self) -> Result<Vec<ProcEntry>, HostError> {
            Ok(self.listed.clone())
        }
        fn entry(&self, pid: i64) -> Option<ProcEntry> {
            self.now.iter().find(|e| e.pid == pid).cloned()
        }
        fn environ(&self, _: i64) -> Result<EnvSnapshot, HostError> {
            Ok(EnvSnapshot::from_pairs([("PATH", "/bin")]))
        }
    }

    impl Observer for Scripted {
        fn processes(&self) -> &dyn ProcessSource {
            self
        }
        fn probe(&self, _: i64) -> PidProbe {
            PidProbe::Alive
        }
        fn local_host(&self) -> Option<fleetgate_store::HostIdentity> {
            Some(fleetgate_store::HostIdentity { host_id: "h".into(), boot_id: "b".into() })
        }
        fn head(&self, _: &Path) -> Result<String, HostError> {
            Err(HostError::new(HostErrorKind::Unreadable, "no checkout here"))
        }
        fn peer_facts(&self, pid: i64, argv: &[String], _: &str) -> Result<PeerFacts, PeerUnread> {
            self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            (self.facts)(self, pid, argv)
        }
    }

    /// Issue 54: a gateway's child the listing caught before its exec, its parent gone (killed
    /// meanwhile), showed the gateway's command line; read a moment later it had become the
    /// downstream's guard, whose environment names no store: "it publishes no proof, and it
    /// names no store" closed the gate. Judged as it is now, it is no fleet process: dropped.
    /// One that became a bare server instead is a fleet process and still closes the gate.
    #[test]
    fn a_gateway_look_alike_that_runs_another_program_meanwhile_is_judged_as_it_is_now() {
        let gateway = ["fleetgate", "--store", "/other/r.sqlite3", "serve", "--profile", "p"];
        let member = entry(MEMBER, &["python", "mcp_server.py"]);
        // A read of a process that runs another program now is refused as such.
        let facts = |host: &Scripted, pid: i64, argv: &[String]| match host.entry(pid) {
            Some(now) if now.argv != argv => Err(PeerUnread::Execed),
            _ => Err(PeerUnread::OpenFiles(HostError::new(HostErrorKind::Unreadable, "denied"))),
        };
        let host = Scripted::new(
            vec![member.clone(), entry(7, &gateway)],
            vec![member.clone(), entry(7, &["fleetgate", "downstream-guard", "--", "python", "mcp_server.py"])],
            facts,
        );
        let snap = look_at(&host);
        assert!(snap.inventory.unregistered_processes.is_empty(), "{:?}", snap.inventory.blocked_reasons);
        assert!(snap.inventory.mutation_gate_satisfied, "{:?}", snap.inventory.blocked_reasons);
        let host = Scripted::new(
            vec![member.clone(), entry(8, &gateway)],
            vec![member, entry(8, &["python", "/srv/mcp_server.py"])],
            facts,
        );
        let snap = look_at(&host);
        assert_eq!(snap.inventory.unregistered_processes.iter().map(|p| p.pid).collect::<Vec<_>>(), [8]);
    }

    /// The inventory reads an unclaimed gateway again while a read catches it between two
    /// states (`peers::facts_of`), a bounded number of times; one that stays so still closes
    /// the gate.
    #[test]
    fn a_gateway_read_mid_change_is_read_again_and_still_fails_closed() {
        let gateway = ["fleetgate", "--store", "/other/r.sqlite3", "serve", "--profile", "p"];
        let listed = vec![entry(MEMBER, &["python", "mcp_server.py"]), entry(7, &gateway)];
        let host = Scripted::new(listed.clone(), listed, |_, _, _| Err(PeerUnread::Changed));
        let snap = look_at(&host);
        assert_eq!(host.reads.load(std::sync::atomic::Ordering::SeqCst), super::super::peers::READS);
        assert_eq!(snap.inventory.unregistered_processes.iter().map(|p| p.pid).collect::<Vec<_>>(), [7]);
    }

    /// The same reads failing for a process that is still there fail closed, as before.
    #[test]
    fn a_process_still_there_whose_reads_fail_still_closes_the_gate() {
        #[derive(Debug)]
        struct Sealed(Churn);
        impl ProcessSource for Sealed {
            fn entries(&self) -> Result<Vec<ProcEntry>, HostError> {
                self.0.entries()
            }
            fn entry(&self, pid: i64) -> Option<ProcEntry> {
                self.0.entry(pid)
            }
            fn environ(&self, pid: i64) -> Result<EnvSnapshot, HostError> {
                Err(HostError::new(
                    HostErrorKind::Unreadable,
                    format!("cannot read /proc/{pid}/environ: Permission denied"),
                ))
            }
        }
        impl Observer for Sealed {
            fn processes(&self) -> &dyn ProcessSource {
                self
            }
            fn probe(&self, pid: i64) -> PidProbe {
                self.0.probe(pid)
            }
            fn local_host(&self) -> Option<fleetgate_store::HostIdentity> {
                self.0.local_host()
            }
            fn head(&self, root: &Path) -> Result<String, HostError> {
                self.0.head(root)
            }
            fn peer_facts(&self, pid: i64, a: &[String], p: &str) -> Result<PeerFacts, PeerUnread> {
                self.0.peer_facts(pid, a, p)
            }
        }
        let host = Sealed(Churn {
            listed: vec![entry(MEMBER, &["python", "mcp_server.py"]), entry(8, &["python", "mcp_server.py"])],
            exited: Mutex::default(),
            exits_after_the_scan: BTreeSet::new(),
            exits_late: 0,
        });
        let config = FleetConfig::parse(
            "[fleet]\nname = \"t\"\n\n[[members]]\nnamespace = \"gitea-author\"\nprofile = \"prgs-author\"\nrole = \"author\"\n",
            "fleet.toml",
        )
        .unwrap();
        let read = FleetSnapshot { runtimes: vec![member_row()], workers: vec![], observations: vec![], store: None };
        let snap = snapshot_of(&config, Ok(read), &host, at(60), None);
        assert!(
            snap.diagnostics.iter().any(|d| d.is_hard() && d.to_string().contains("pid 8")),
            "{:?}",
            snap.diagnostics
        );
        assert_eq!(snap.inventory.unregistered_processes.iter().map(|p| p.pid).collect::<Vec<_>>(), [8]);
    }
}
