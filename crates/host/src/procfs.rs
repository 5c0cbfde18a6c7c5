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
    /// The files a process holds open, as (device, inode), or why they cannot be read (a
    /// source that cannot tell says so: nothing is taken as held open).
    fn open_files(&self, pid: i64) -> Result<BTreeSet<(u64, u64)>, HostError> {
        Err(HostError::new(HostErrorKind::Unreadable, format!("open files of pid {pid} cannot be listed here")))
    }
    /// A process's working directory, or why it cannot be read.
    fn cwd(&self, pid: i64) -> Result<PathBuf, HostError> {
        Err(HostError::new(HostErrorKind::Unreadable, format!("the working directory of pid {pid} is unknown here")))
    }
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
        parse_btime(&text)
            .ok_or_else(|| HostError::new(HostErrorKind::Malformed, format!("{} has no btime line", path.display())))
    }

    fn read_entry(&self, dir: &Path, pid: i64, boot: i64, ticks: i64) -> Option<ProcEntry> {
        let raw = std::fs::read(dir.join("cmdline")).ok()?;
        if raw.is_empty() {
            return None;
        }
        let argv = parse_cmdline(&raw);
        let stat = parse_pid_stat(&std::fs::read_to_string(dir.join("stat")).ok()?)?;
        let uid = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(dir).ok()?);
        Some(ProcEntry { pid, ppid: stat.ppid, started_at: stat.started_at(boot, ticks)?, argv, uid: Some(uid) })
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
        Ok(parse_environ(&raw))
    }

    fn open_files(&self, pid: i64) -> Result<BTreeSet<(u64, u64)>, HostError> {
        use std::os::unix::fs::MetadataExt;
        let dir = self.root.join(pid.to_string()).join("fd");
        let unreadable = |e: std::io::Error| {
            HostError::new(HostErrorKind::Unreadable, format!("cannot list {}: {e}", dir.display()))
        };
        let mut out = BTreeSet::new();
        for item in std::fs::read_dir(&dir).map_err(unreadable)? {
            // A descriptor closed mid-listing is simply not there; `metadata` follows the
            // link to the open file itself (even a deleted one).
            if let Ok(meta) = item.map_err(unreadable).and_then(|i| std::fs::metadata(i.path()).map_err(unreadable)) {
                out.insert((meta.dev(), meta.ino()));
            }
        }
        Ok(out)
    }

    fn cwd(&self, pid: i64) -> Result<PathBuf, HostError> {
        let link = self.root.join(pid.to_string()).join("cwd");
        std::fs::read_link(&link)
            .map_err(|e| HostError::new(HostErrorKind::Unreadable, format!("cannot read {}: {e}", link.display())))
    }
}

// The parsers below are pure functions of a file's bytes, so the fuzzers (`fuzz/`) and the
// tests can feed them anything a procfs could hold.

/// The boot time (`btime`, seconds since the epoch) from the text of `/proc/stat`, if it
/// has a well-formed `btime` line.
pub fn parse_btime(text: &str) -> Option<i64> {
    text.lines().find_map(|l| l.strip_prefix("btime ").and_then(|v| v.trim().parse().ok()))
}

/// The fields of `/proc/<pid>/stat` the scan uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PidStat {
    /// Parent pid (field 4).
    pub ppid: i64,
    /// Start time in clock ticks after boot (field 22).
    pub start_ticks: i64,
}

impl PidStat {
    /// The start time, given the boot time and the clock ticks per second, rounded down to
    /// the second; `None` when the sum is no time at all (it overflows: a corrupt or hostile
    /// procfs), so the entry is unreadable rather than a panic or a wrapped-around time.
    pub fn started_at(&self, boot: i64, ticks_per_second: i64) -> Option<Timestamp> {
        boot.checked_add(self.start_ticks / ticks_per_second.max(1)).map(Timestamp::from_unix)
    }
}

/// The parent pid and start ticks from the text of `/proc/<pid>/stat`, or `None` when it
/// is not such a line.
pub fn parse_pid_stat(stat: &str) -> Option<PidStat> {
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(PidStat { ppid: fields.get(1)?.parse().ok()?, start_ticks: fields.get(19)?.parse().ok()? })
}

/// The argument vector from the bytes of `/proc/<pid>/cmdline` (NUL-separated; empty
/// arguments left out, invalid UTF-8 replaced).
pub fn parse_cmdline(raw: &[u8]) -> Vec<String> {
    raw.split(|b| *b == 0).filter(|s| !s.is_empty()).map(|s| String::from_utf8_lossy(s).into_owned()).collect()
}

/// The environment from the bytes of `/proc/<pid>/environ` (NUL-separated `KEY=value`;
/// entries without `=` left out, invalid UTF-8 replaced).
pub fn parse_environ(raw: &[u8]) -> EnvSnapshot {
    EnvSnapshot::from_pairs(raw.split(|b| *b == 0).filter(|s| !s.is_empty()).filter_map(|kv| {
        let kv = String::from_utf8_lossy(kv);
        kv.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned()))
    }))
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

    /// Found by `fuzz/fuzz_targets/procfs_stat.rs` (minimized): a `btime` and a start-tick
    /// count each near `i64::MAX` overflowed the start time (a panic in debug builds, a
    /// wrapped-around time in release). Now the entry is unreadable.
    #[test]
    fn a_start_time_past_the_end_of_time_is_refused_not_overflowed() {
        let text = ")c 3\nb 1 3 i 0\n2\n+ 0 0\ne\n' 1 - 4\nm\nb\nbtime 8888800000000003012";
        let boot = parse_btime(text).unwrap();
        let stat = parse_pid_stat(text).unwrap();
        assert_eq!((boot, stat.start_ticks), (8_888_800_000_000_003_012, 8_888_800_000_000_003_012));
        assert_eq!(stat.started_at(boot, 1), None);
        assert_eq!(
            stat.started_at(boot, 100),
            Some(Timestamp::from_unix(8_888_800_000_000_003_012 + 88_888_000_000_000_030))
        );
        assert_eq!(stat.started_at(-boot, 1), Some(Timestamp::from_unix(0)));
    }

    #[test]
    fn stat_lines_parse_with_any_command_name() {
        let line = "4711 (a) (b\n c)) R 4100 4711 4100 34816 4711 4194304 91 0 0 0 0 0 0 0 20 0 1 0 99999999 8491008\n";
        assert_eq!(parse_pid_stat(line), Some(PidStat { ppid: 4100, start_ticks: 99_999_999 }));
        assert_eq!(parse_pid_stat("4711 (a) R 1"), None);
        assert_eq!(parse_pid_stat("no parenthesis 1 2 3"), None);
        assert_eq!(parse_btime("cpu 1 2\nbtime 1733212800\n"), Some(1_733_212_800));
        assert_eq!(parse_btime("btime x\n"), None);
    }

    #[test]
    fn environ_and_cmdline_bytes_split_on_nul() {
        let env = parse_environ(b"A=1\0NOEQUALS\0\0B=x=y\0\xffK=\xfe\0");
        assert_eq!(env.iter().collect::<Vec<_>>(), [("A", "1"), ("B", "x=y"), ("\u{fffd}K", "\u{fffd}")]);
        assert_eq!(parse_cmdline(b"fleetgate\0\0serve\0"), ["fleetgate", "serve"]);
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

    #[test]
    fn a_file_a_process_holds_open_is_listed_and_one_it_only_names_is_not() {
        use std::os::unix::fs::MetadataExt;
        let dir = std::env::temp_dir().join(format!("fleetgate-open-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (held, named) = (dir.join("held"), dir.join("named"));
        std::fs::write(&held, "x").unwrap();
        std::fs::write(&named, "y").unwrap();
        let file = std::fs::File::open(&held).unwrap();
        // A child that holds `held` on its stdin and names `named` on its command line (a
        // shell: `sleep 5 NAMED` would refuse the extra argument and exit at once, and a
        // zombie lists no descriptors).
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 5; :", "sh"])
            .arg(&named)
            .current_dir(&dir)
            .stdin(file)
            .spawn()
            .unwrap();
        let pid = i64::from(child.id());
        let id = |p: &Path| std::fs::metadata(p).map(|m| (m.dev(), m.ino())).unwrap();
        // Read until the child is seen holding it (bounded): under load the listing can be
        // read before the child's descriptors are in place.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let open = loop {
            let open = ProcFs::default().open_files(pid);
            if open.as_ref().is_ok_and(|o| o.contains(&id(&held))) || std::time::Instant::now() > deadline {
                break open;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        let cwd = ProcFs::default().cwd(pid);
        child.kill().unwrap();
        child.wait().unwrap();
        let open = open.unwrap();
        assert!(open.contains(&id(&held)), "{open:?}");
        assert!(!open.contains(&id(&named)), "{open:?}");
        assert_eq!(cwd.unwrap(), dir.canonicalize().unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(ProcFs::default().open_files(pid).is_err(), "a gone process holds nothing");
    }
}
