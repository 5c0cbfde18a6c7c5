//! The evidence about gateways no row of this fleet claims (issue #19): for each such
//! `fleetgate serve` on this host, what its own store says about it, found through the
//! [`Observer`]. Only facts: [`judge_peer`] decides.
//!
//! [`judge_peer`]: fleetgate_core::inventory::judge_peer

use super::observer::Observer;
use fleetgate_core::inventory::PeerEvidence;
use fleetgate_core::procmatch::FleetMatcher;
use fleetgate_core::runtime::{ProcessScan, RuntimeRecord, RuntimeStatus};
use std::collections::{BTreeMap, BTreeSet};

/// Evidence for every gateway in `scan` whose pid no running row in `rows` claims;
/// `our_file` is the file `rows` were read from (`None` for a server's database).
pub fn peer_evidence(
    env_prefix: &str,
    scan: &ProcessScan,
    rows: &[RuntimeRecord],
    our_file: Option<(u64, u64)>,
    observer: &dyn Observer,
) -> BTreeMap<i64, PeerEvidence> {
    let claimed: BTreeSet<i64> = rows.iter().filter(|r| r.status == RuntimeStatus::Running).map(|r| r.pid).collect();
    let mut out = BTreeMap::new();
    for p in scan.processes.iter().filter(|p| !claimed.contains(&p.pid)) {
        // The same process as scanned, not a pid recycled since.
        let Some(entry) = observer.processes().entry(p.pid).filter(|e| e.started_at == p.started_at) else {
            continue;
        };
        if !FleetMatcher::is_gateway(&entry.argv) {
            continue;
        }
        let evidence = match observer.peer_store(p.pid, &entry.argv, env_prefix, our_file) {
            Ok(store) => PeerEvidence::Store(store),
            Err(why) => PeerEvidence::Unreadable(why),
        };
        out.insert(p.pid, evidence);
    }
    out
}
