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

/// How many times the facts of one gateway are read when a read catches it between two
/// states (changing, exiting, running another program), and how long apart.
pub(crate) const READS: u32 = 4;
const APART: std::time::Duration = std::time::Duration::from_millis(2);

/// The facts of gateway `pid`, read again (a few times, a moment apart) while a read catches
/// it between two states: what was read then is no fact about it, and a gate closed on it
/// would close for an instant's read.
fn facts_of(
    observer: &dyn Observer,
    pid: i64,
    argv: &[String],
    env_prefix: &str,
) -> Result<fleetgate_core::inventory::PeerFacts, super::observer::PeerUnread> {
    let mut read = observer.peer_facts(pid, argv, env_prefix);
    for _ in 1..READS {
        match &read {
            Err(why) if why.is_transient() => std::thread::sleep(APART),
            _ => break,
        }
        read = observer.peer_facts(pid, argv, env_prefix);
    }
    read
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
        let evidence = match facts_of(observer, p.pid, &entry.argv, env_prefix) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::observer::PeerUnread;
    use fleetgate_core::env::EnvSnapshot;
    use fleetgate_core::inventory::{PeerFacts, PidProbe};
    use fleetgate_host::procfs::{ProcEntry, ProcessSource};
    use fleetgate_host::{HostError, HostErrorKind};
    use std::sync::atomic::{AtomicU32, Ordering};

    /// A host whose reads of one gateway answer from a script, counting them.
    #[derive(Debug)]
    struct Script {
        answers: Vec<PeerUnread>,
        asked: AtomicU32,
    }

    impl ProcessSource for Script {
        fn entries(&self) -> Result<Vec<ProcEntry>, HostError> {
            Ok(Vec::new())
        }
        fn entry(&self, _: i64) -> Option<ProcEntry> {
            None
        }
        fn environ(&self, _: i64) -> Result<EnvSnapshot, HostError> {
            Ok(EnvSnapshot::default())
        }
    }

    impl Observer for Script {
        fn processes(&self) -> &dyn ProcessSource {
            self
        }
        fn probe(&self, _: i64) -> PidProbe {
            PidProbe::Alive
        }
        fn local_host(&self) -> Option<fleetgate_store::HostIdentity> {
            None
        }
        fn head(&self, _: &std::path::Path) -> Result<String, HostError> {
            Err(HostError::new(HostErrorKind::Unreadable, "none"))
        }
        fn peer_facts(&self, _: i64, _: &[String], _: &str) -> Result<PeerFacts, PeerUnread> {
            let n = self.asked.fetch_add(1, Ordering::SeqCst) as usize;
            Err(self.answers.get(n).or(self.answers.last()).cloned().unwrap())
        }
    }

    fn read(answers: Vec<PeerUnread>) -> (PeerUnread, u32) {
        let host = Script { answers, asked: AtomicU32::new(0) };
        let why = facts_of(&host, 7, &[], "GITEA_").unwrap_err();
        (why, host.asked.load(Ordering::SeqCst))
    }

    /// A read that catches the gateway between two states is made again, a few times; what
    /// a settled read says stands, and a lasting failure is still the answer (fail closed).
    #[test]
    fn a_read_caught_between_two_states_is_made_again() {
        let denied = PeerUnread::OpenFiles(HostError::new(HostErrorKind::Unreadable, "denied"));
        assert_eq!(read(vec![PeerUnread::Execed, PeerUnread::Changed, denied.clone()]), (denied.clone(), 3));
        assert_eq!(read(vec![denied.clone()]), (denied, 1), "a lasting failure is not read again");
        assert_eq!(read(vec![PeerUnread::Exiting]), (PeerUnread::Exiting, READS), "bounded");
    }
}
