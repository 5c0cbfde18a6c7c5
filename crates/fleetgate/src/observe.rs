//! The live fleet snapshot: runtime rows from the store, this host's own
//! process observation, signal-0 probes — handed to the pure classifier.
//! The same function backs `fleetgate inventory`, `fleetgate capability` and
//! the gateway's control tools, so they can never disagree.

use crate::config::FleetConfig;
use fleetgate_core::Timestamp;
use fleetgate_core::inventory::{FleetInventory, InventoryInput, classify_fleet_inventory};
use fleetgate_core::procmatch::FleetMatcher;
use fleetgate_core::runtime::ProcessScan;
use fleetgate_host::probe::probe_pid;
use fleetgate_host::procfs::{ProcFs, ProcessSource, scan_fleet};
use fleetgate_store::{Store, StoreError};

/// This host's fleet processes, observed by this process.
pub fn scan_host(config: &FleetConfig, source: &dyn ProcessSource) -> ProcessScan {
    scan_fleet(source, &FleetMatcher::new(&config.process_match))
}

/// Assess the fleet as of `now`. A store that cannot be read fails closed
/// inside the verdict (its error named), never as an empty healthy fleet.
pub fn assess_inventory(
    config: &FleetConfig,
    store: Result<&dyn Store, &StoreError>,
    now: Timestamp,
    answering_namespace: Option<&str>,
) -> FleetInventory {
    let (rows, registry_error) = match store.map(|s| s.list_runtime()) {
        Ok(Ok(rows)) => (rows, None),
        Ok(Err(e)) => (Vec::new(), Some(e.to_string())),
        Err(e) => (Vec::new(), Some(e.to_string())),
    };
    let scan = scan_host(config, &ProcFs::default());
    classify_fleet_inventory(
        &InventoryInput {
            roster: &config.members,
            runtime_rows: &rows,
            process_scan: &scan,
            expected_binding: config.binding.as_ref(),
            now,
            registry_available: registry_error.is_none(),
            registry_error: registry_error.as_deref(),
            answering_namespace,
        },
        &|pid| probe_pid(Some(pid)),
    )
}
