//! The fleet evidence: the store's runtime rows (with their hosts) and other hosts'
//! published scans, read in one transaction ([`Store::fleet_snapshot`]); this host's own
//! process observation, signal-0 probes, each peer's environment and each checkout's HEAD,
//! all through the [`Observer`] — handed to the pure classifier and diagnostics. The one path behind
//! `fleetgate inventory`, `fleetgate capability`, the control tools and the gateway's gate,
//! so they can never disagree.

use super::observer::{Observer, scan_host};
use super::peers::peer_evidence;
use fleetgate_config::FleetConfig;
use fleetgate_core::Timestamp;
use fleetgate_core::diagnostics::{Diagnostic, PeerEnv, peer_env_diagnostic, stale_runtime_diagnostic};
use fleetgate_core::inventory::{
    FleetInventory, HostView, InventoryInput, PeerView, PidProbe, RemoteObservation, classify_with_probes,
    our_repository, served_here,
};
use fleetgate_core::runtime::{ProcessScan, RuntimeRecord, RuntimeStatus};
use fleetgate_host::paths::canonical_root;
use fleetgate_host::procfs::ProcessSource;
use fleetgate_store::{FleetSnapshot, Store, StoreError};
use serde::Serialize;
use std::collections::BTreeMap;
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
    store_file: Option<(u64, u64)>,
    error: Option<String>,
}

/// The fleet as the store holds it, read in one transaction, or why it cannot be read.
pub fn read_fleet(store: Result<&dyn Store, &StoreError>) -> Result<FleetSnapshot, StoreError> {
    store.map_err(Clone::clone).and_then(|s| s.fleet_snapshot())
}

fn read_rows(read: Result<FleetSnapshot, StoreError>) -> Rows {
    match read {
        Ok(FleetSnapshot { runtimes: rows, observations, store_file, .. }) => Rows {
            row_hosts: rows
                .iter()
                .filter_map(|r| Some((r.runtime_id.clone(), r.host.as_ref()?.host_id.clone())))
                .collect(),
            rows,
            remote: observations
                .into_iter()
                .map(|o| (o.host.host_id, RemoteObservation { observed_at: o.observed_at, scan: o.scan }))
                .collect(),
            store_file,
            error: None,
        },
        Err(e) => Rows {
            rows: Vec::new(),
            row_hosts: BTreeMap::new(),
            remote: BTreeMap::new(),
            store_file: None,
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
    let scan = scan_host(config, observer.processes());
    let probes = probe_rows(&read.rows, observer);
    // Gateways no row of ours claims: the facts their own stores give, for the classifier
    // to tell another fleet's (proven, another repository) from an unregistered process.
    let evidence = peer_evidence(&config.env_prefix, &scan, &read.rows, read.store_file, observer);
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
            peers: PeerView { evidence: Some(&evidence), ours: Some(&ours), local: local_identity.as_ref() },
        },
        &probes,
    );
    let head_of = |root: &Path| observer.head(root).map_err(|e| e.to_string());
    // Another fleet's gateway runs under its own fleet's environment rules, not ours.
    let mut ours_only = scan;
    ours_only.processes.retain(|p| !inventory.other_fleet_gateways.iter().any(|g| g.pid == p.pid));
    let diagnostics = runtime_diagnostics(config, &ours_only, &read.rows, &hosts, observer.processes(), &head_of);
    Snapshot { inventory, diagnostics }
}

/// The inventory alone.
pub fn assess_inventory(
    config: &FleetConfig,
    store: Result<&dyn Store, &StoreError>,
    observer: &dyn Observer,
    now: Timestamp,
    answering_namespace: Option<&str>,
) -> FleetInventory {
    snapshot(config, store, observer, now, answering_namespace).inventory
}

/// Diagnostics of every observed peer: its environment (unknown keys, or an
/// environment that cannot be read), and for each running row of this host the
/// process still serves ([`served_here`]), revision parity against its checkout's
/// current head. A row of another host is that host's to judge: its checkout is not
/// this host's to read, and a local process sharing its pid is not it.
pub fn runtime_diagnostics(
    config: &FleetConfig,
    scan: &ProcessScan,
    rows: &[RuntimeRecord],
    hosts: &HostView<'_>,
    source: &dyn ProcessSource,
    head_of: &dyn Fn(&Path) -> Result<String, String>,
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for p in &scan.processes {
        let env = match source.environ(p.pid) {
            Ok(e) => PeerEnv::Read(e),
            Err(why) => PeerEnv::Unreadable(why.to_string()),
        };
        out.extend(peer_env_diagnostic(p.pid, &env, &config.env_prefix, &config.pass_through_env));
    }
    let mut heads: BTreeMap<&str, Result<String, String>> = BTreeMap::new();
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
                why: why.clone(),
            }),
        }
    }
    out
}
