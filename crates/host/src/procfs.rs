//! The process observation on Linux: `/proc`, read directly. The start time
//! of a process comes from its start ticks and the boot time, rounded down,
//! so it is never later than the true start (a server that registered in the
//! same second is never mistaken for a recycled pid).

use crate::error::{HostError, HostErrorKind};
use fleetgate_core::Timestamp;
use fleetgate_core::env::EnvSnapshot;
use fleetgate_core::procmatch::FleetMatcher;
use fleetgate_core::runtime::{ObservedProcess, ProcessScan};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// One process as the OS lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcEntry {
    /// Pid.
    pub pid: i64,
    /// Parent pid.
    pub ppid: i64,
    /// Start time, rounded down to the second.
    pub started_at: Timestamp,
    /// Command line.
    pub argv: Vec<String>,
    /// The user it runs as (the owner of its `/proc` entry).
    pub uid: Option<u32>,
}

/// Where process listings come from; `/proc` here, the platform API elsewhere.
pub trait ProcessSource {
    /// Every process with a command line (kernel threads have none), or why
    /// the listing cannot be made.
    fn entries(&self) -> Result<Vec<ProcEntry>, HostError>;
    /// One process, if it exists.
    fn entry(&self, pid: i64) -> Option<ProcEntry>;
    /// Another process's environment, or why it cannot be read.
    fn environ(&self, pid: i64) -> Result<EnvSnapshot, HostError>;
}

/// `/proc` (or another procfs mount, for tests).
#[derive(Clone, Debug)]
pub struct ProcFs {
    root: PathBuf,
}

impl Default for ProcFs {
    fn default() -> Self {
        Self { root: PathBuf::from("/proc") }
    }
}

impl ProcFs {
    /// A procfs at `root`.
    pub fn at(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    fn boot_time(&self) -> Result<i64, HostError> {
        let path = self.root.join("stat");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| HostError::new(HostErrorKind::Unreadable, format!("cannot read {}: {e}", path.display())))?;
        text.lines()
            .find_map(|l| l.strip_prefix("btime ").and_then(|v| v.trim().parse().ok()))
            .ok_or_else(|| HostError::new(HostErrorKind::Malformed, format!("{} has no btime line", path.display())))
    }

    fn read_entry(&self, dir: &Path, pid: i64, boot: i64, ticks: i64) -> Option<ProcEntry> {
        let raw = std::fs::read(dir.join("cmdline")).ok()?;
        if raw.is_empty() {
            return None;
        }
        let argv: Vec<String> =
            raw.split(|b| *b == 0).filter(|s| !s.is_empty()).map(|s| String::from_utf8_lossy(s).into_owned()).collect();
        let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
        // The command name may hold spaces and parentheses: fields start after the last ')'.
        let rest = &stat[stat.rfind(')')? + 1..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ppid: i64 = fields.get(1)?.parse().ok()?;
        let start_ticks: i64 = fields.get(19)?.parse().ok()?;
        let uid = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(dir).ok()?);
        Some(ProcEntry {
            pid,
            ppid,
            started_at: Timestamp::from_unix(boot + start_ticks / ticks.max(1)),
            argv,
            uid: Some(uid),
        })
    }
}

fn clock_ticks() -> i64 {
    i64::try_from(rustix::param::clock_ticks_per_second()).unwrap_or(100)
}

impl ProcessSource for ProcFs {
    fn entries(&self) -> Result<Vec<ProcEntry>, HostError> {
        let boot = self.boot_time()?;
        let ticks = clock_ticks();
        let unlisted = |e: std::io::Error| {
            HostError::new(HostErrorKind::Unreadable, format!("cannot list {}: {e}", self.root.display()))
        };
        let dir = std::fs::read_dir(&self.root).map_err(unlisted)?;
        let mut out = Vec::new();
        for item in dir {
            let item = item.map_err(unlisted)?;
            let Some(pid) = item.file_name().to_str().and_then(|n| n.parse::<i64>().ok()) else { continue };
            // A process may exit mid-scan; what vanished is simply not there.
            if let Some(e) = self.read_entry(&item.path(), pid, boot, ticks) {
                out.push(e);
            }
        }
        out.sort_by_key(|e| e.pid);
        Ok(out)
    }

    fn entry(&self, pid: i64) -> Option<ProcEntry> {
        let boot = self.boot_time().ok()?;
        self.read_entry(&self.root.join(pid.to_string()), pid, boot, clock_ticks())
    }

    fn environ(&self, pid: i64) -> Result<EnvSnapshot, HostError> {
        let path = self.root.join(pid.to_string()).join("environ");
        let raw = std::fs::read(&path)
            .map_err(|e| HostError::new(HostErrorKind::Unreadable, format!("cannot read {}: {e}", path.display())))?;
        Ok(EnvSnapshot::from_pairs(raw.split(|b| *b == 0).filter(|s| !s.is_empty()).filter_map(|kv| {
            let kv = String::from_utf8_lossy(kv);
            kv.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned()))
        })))
    }
}

/// The fleet processes on this host: gateways and `process_match` hits, minus
/// the children of gateways (a gateway's downstream is part of that member).
pub fn scan_fleet(source: &dyn ProcessSource, matcher: &FleetMatcher) -> ProcessScan {
    let entries = match source.entries() {
        Ok(e) => e,
        Err(why) => return ProcessScan::unavailable(why.to_string()),
    };
    let gateways: BTreeSet<i64> = entries.iter().filter(|e| FleetMatcher::is_gateway(&e.argv)).map(|e| e.pid).collect();
    ProcessScan::of(
        entries
            .into_iter()
            .filter(|e| matcher.matches(&e.argv) && !gateways.contains(&e.ppid))
            .map(|e| ObservedProcess {
                pid: e.pid,
                started_at: e.started_at,
                command: fleetgate_core::redact::redact_argv(&e.argv),
                uid: e.uid,
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_listed_with_a_start_time_not_in_the_future() {
        let fs = ProcFs::default();
        let me = i64::from(std::process::id());
        let entries = fs.entries().unwrap();
        let mine = entries.iter().find(|e| e.pid == me).expect("own pid listed");
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
        assert!(mine.started_at.unix() <= now && mine.started_at.unix() > now - 3600, "{mine:?}");
        assert_eq!(mine.ppid, i64::from(std::os::unix::process::parent_id()));
        assert!(entries.windows(2).all(|w| w[0].pid < w[1].pid));
        assert_eq!(fs.entry(me).as_ref(), Some(mine));
    }

    #[test]
    fn an_unreadable_listing_is_unavailable_not_empty() {
        let scan = scan_fleet(&ProcFs::at("/nonexistent-procfs"), &FleetMatcher::new(&[]));
        assert!(!scan.available);
        assert!(scan.reason.unwrap().contains("/nonexistent-procfs"));
    }

    #[test]
    fn environ_of_a_child_is_read() {
        let mut child =
            std::process::Command::new("sleep").arg("5").env_clear().env("GITEA_PROBE_TEST", "yes").spawn().unwrap();
        let env = ProcFs::default().environ(i64::from(child.id())).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(env.iter().collect::<Vec<_>>(), [("GITEA_PROBE_TEST", "yes")]);
        assert!(ProcFs::default().environ(i64::from(child.id())).is_err());
    }
}
