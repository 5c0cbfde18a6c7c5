//! The evidence about gateways no row of this fleet claims (issues #19 and 54): for each
//! such `fleetgate serve` on this host, the proof it publishes and what `/proc` says of it,
//! found through the [`Observer`]. Only facts: [`judge_peer`] decides. A gateway that exits
//! while they are gathered is gone, and said so, for the snapshot to drop it from the scan.
//!
//! [`judge_peer`]: fleetgate_core::inventory::judge_peer

use super::observer::Observer;
use fleetgate_core::inventory::PeerEvidence;
use fleetgate_core::procmatch::FleetMatcher;
use fleetgate_core::redact::redact_argv;
use fleetgate_core::runtime::{ObservedProcess, ProcessScan, RuntimeRecord, RuntimeStatus};
use std::collections::{BTreeMap, BTreeSet};

/// What the shell learnt of the unclaimed gateways: the evidence per pid, and the pids of
/// those that turned out gone while it was gathered.
#[derive(Debug, Default)]
pub struct Peers {
    /// pid → what was learnt of it.
    pub evidence: BTreeMap<i64, PeerEvidence>,
    /// Processes of the scan found gone: exited since the scan, or no fleet process any more
    /// (a gateway's child the scan caught before its exec, its parent gone, has run its own
    /// program since). Dropped from it, no risk.
    pub gone: BTreeSet<i64>,
}

/// Is `process` (as the scan saw it) gone now — no process under its pid, or another one
/// started since (the pid recycled)? Asked after a read of it failed: a process that exited
/// answers every read with ENOENT or ESRCH, and a running one never looks gone here, so a
/// failed read of a live process still fails closed.
pub fn gone_since_scan(observer: &dyn Observer, process: &ObservedProcess) -> bool {
    observer.processes().entry(process.pid).is_none_or(|e| e.started_at != process.started_at)
}

/// Has `process` run another program since the scan saw it, one that is no fleet process
/// (`matcher`)? Then what the scan saw is gone: the process is to be judged as it is now, and
/// now it is nothing of the fleet's. One that became another fleet process still counts.
fn no_fleet_process_now(observer: &dyn Observer, process: &ObservedProcess, matcher: &FleetMatcher) -> bool {
    observer.processes().entry(process.pid).is_some_and(|e| {
        e.started_at == process.started_at && redact_argv(&e.argv) != process.command && !matcher.matches(&e.argv)
    })
}

/// Evidence for every gateway in `scan` whose pid no running row in `rows` claims.
pub fn peer_evidence(
    env_prefix: &str,
    matcher: &FleetMatcher,
    scan: &ProcessScan,
    rows: &[RuntimeRecord],
    observer: &dyn Observer,
) -> Peers {
    let claimed: BTreeSet<i64> = rows.iter().filter(|r| r.status == RuntimeStatus::Running).map(|r| r.pid).collect();
    let mut out = Peers::default();
    for p in scan.processes.iter().filter(|p| !claimed.contains(&p.pid)) {
        // The same process as scanned, not a pid recycled since, and still a fleet process:
        // else it is gone.
        let Some(entry) = observer.processes().entry(p.pid).filter(|e| e.started_at == p.started_at) else {
            out.gone.insert(p.pid);
            continue;
        };
        if no_fleet_process_now(observer, p, matcher) {
            out.gone.insert(p.pid);
            continue;
        }
        if !FleetMatcher::is_gateway(&entry.argv) {
            continue;
        }
        let evidence = match observer.peer_facts(p.pid, &entry.argv, env_prefix) {
            Ok(facts) => PeerEvidence::Found(Box::new(facts)),
            Err(_) if gone_since_scan(observer, p) || no_fleet_process_now(observer, p, matcher) => {
                out.gone.insert(p.pid);
                continue;
            }
            Err(why) => PeerEvidence::Unreadable(why.to_string()),
        };
        out.evidence.insert(p.pid, evidence);
    }
    out
}
