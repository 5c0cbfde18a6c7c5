//! The live fleet snapshot: runtime rows from the store, this host's own
//! process observation, signal-0 probes and each peer's environment — handed
//! to the pure classifier and diagnostics. The same function backs
//! `fleetgate inventory`, `fleetgate capability` and the gateway's control
//! tools and mutation gate, so they can never disagree.

use crate::config::FleetConfig;
use fleetgate_core::Timestamp;
use fleetgate_core::diagnostics::{PeerEnv, STALE_RUNTIME, peer_env_diagnostic, stale_runtime_diagnostic};
use fleetgate_core::inventory::{
    FleetInventory, HostView, InventoryInput, RemoteObservation, classify_fleet_inventory,
};
use fleetgate_core::procmatch::FleetMatcher;
use fleetgate_core::runtime::{ProcessScan, RuntimeRecord, RuntimeStatus};
use fleetgate_host::probe::probe_pid;
use fleetgate_host::procfs::{ProcFs, ProcessSource, scan_fleet};
use fleetgate_store::{Store, StoreError};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

/// One look at the fleet.
#[derive(Clone, Debug, Serialize)]
pub struct Snapshot {
    /// The inventory verdict.
    pub inventory: FleetInventory,
    /// Runtime diagnostics (hard families first-class: `unsupported-env:`, `stale-runtime:`).
    pub diagnostics: Vec<String>,
}

/// This host as the store records it, when it can be told.
pub fn local_host() -> Option<fleetgate_store::HostIdentity> {
    match fleetgate_host::host_identity() {
        Ok((host_id, boot_id)) => Some(fleetgate_store::HostIdentity { host_id, boot_id }),
        Err(e) => {
            tracing::warn!("host identity unknown: {e}");
            None
        }
    }
}

/// This host's fleet processes, observed by this process.
pub fn scan_host(config: &FleetConfig, source: &dyn ProcessSource) -> ProcessScan {
    scan_fleet(source, &FleetMatcher::new(&config.process_match))
}

/// Look at the fleet as of `now`. A store that cannot be read fails closed
/// inside the verdict (its error named), never as an empty healthy fleet.
pub fn snapshot(
    config: &FleetConfig,
    store: Result<&dyn Store, &StoreError>,
    now: Timestamp,
    answering_namespace: Option<&str>,
) -> Snapshot {
    let read = store.map_err(|e| e.to_string()).and_then(|s| {
        let rows = s.list_runtime().map_err(|e| e.to_string())?;
        let hosts = s.list_runtime_hosts().map_err(|e| e.to_string())?;
        let observations = s.list_observations().map_err(|e| e.to_string())?;
        Ok((rows, hosts, observations))
    });
    let (rows, hosts, observations, registry_error) = match read {
        Ok((rows, hosts, observations)) => (rows, hosts, observations, None),
        Err(e) => (Vec::new(), Default::default(), Vec::new(), Some(e)),
    };
    let row_hosts: BTreeMap<String, String> = hosts.into_iter().map(|(id, h)| (id, h.host_id)).collect();
    let remote: BTreeMap<String, RemoteObservation> = observations
        .into_iter()
        .map(|o| (o.host.host_id, RemoteObservation { observed_at: o.observed_at, scan: o.scan }))
        .collect();
    let local = fleetgate_host::host_identity().ok().map(|(machine, _)| machine);
    let source = ProcFs::default();
    let scan = scan_host(config, &source);
    let inventory = classify_fleet_inventory(
        &InventoryInput {
            roster: &config.members,
            runtime_rows: &rows,
            process_scan: &scan,
            expected_binding: config.binding.as_ref(),
            now,
            registry_available: registry_error.is_none(),
            registry_error: registry_error.as_deref(),
            answering_namespace,
            hosts: HostView {
                local_host: local.as_deref(),
                row_hosts: Some(&row_hosts),
                observations: Some(&remote),
                observation_ttl_seconds: config.heartbeat_ttl_seconds,
            },
        },
        &|pid| probe_pid(Some(pid)),
    );
    let diagnostics = runtime_diagnostics(config, &scan, &rows, &source, &|root| fleetgate_host::git::head(root));
    Snapshot { inventory, diagnostics }
}

/// The inventory alone.
pub fn assess_inventory(
    config: &FleetConfig,
    store: Result<&dyn Store, &StoreError>,
    now: Timestamp,
    answering_namespace: Option<&str>,
) -> FleetInventory {
    snapshot(config, store, now, answering_namespace).inventory
}

/// Diagnostics of every observed peer: its environment (unknown keys, or an
/// environment that cannot be read), and for each running row the process
/// still serves, revision parity against its checkout's current head.
pub fn runtime_diagnostics(
    config: &FleetConfig,
    scan: &ProcessScan,
    rows: &[RuntimeRecord],
    source: &dyn ProcessSource,
    head_of: &dyn Fn(&Path) -> Result<String, String>,
) -> Vec<String> {
    let mut out = Vec::new();
    for p in &scan.processes {
        let env = match source.environ(p.pid) {
            Ok(e) => PeerEnv::Read(e),
            Err(why) => PeerEnv::Unreadable(why),
        };
        out.extend(peer_env_diagnostic(p.pid, &env, &config.env_prefix, &config.pass_through_env));
    }
    let observed: BTreeMap<i64, _> = scan.processes.iter().map(|p| (p.pid, p)).collect();
    let mut heads: BTreeMap<&str, Result<String, String>> = BTreeMap::new();
    for row in rows.iter().filter(|r| r.status == RuntimeStatus::Running && observed.contains_key(&r.pid)) {
        let (Some(root), Some(startup)) = (row.repository_root.as_deref(), row.startup_head.as_deref()) else {
            continue;
        };
        let current = heads.entry(root).or_insert_with(|| head_of(Path::new(root)));
        match current {
            Ok(head) => out.extend(stale_runtime_diagnostic(&row.namespace, row.pid, startup, head)),
            Err(why) => out.push(format!(
                "{STALE_RUNTIME} the current revision of {root} cannot be read ({why}), so {} (pid {}) cannot be shown to be current.",
                row.namespace, row.pid
            )),
        }
    }
    out
}
