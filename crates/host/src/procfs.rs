//! The process observation on Linux: `/proc`, read directly. The start time
//! of a process comes from its start ticks and the boot time, rounded down,
//! so it is never later than the true start (a server that registered in the
//! same second is never mistaken for a recycled pid).
//!
//! A scan runs for every gated mutating call, so [`ProcFs`] reads little twice. A process
//! the listing shows for the first time is read at once; what was read of a listed process
//! serves the scans of the next [`REUSE`] (a burst of calls lists `/proc` and reads nothing
//! else) once the process has run for 2 s (a younger one may be a launcher about to exec its
//! program, so it is read again at every scan); after that its `stat` and owner are read again, and its command line only when
//! its start or program image changed (exec maps a new image, a recycled pid starts later).
//! So a process that appears or exits is seen at the next scan, an exec within [`REUSE`],
//! and a command line rewritten in place (setproctitle) is not seen: the one it was started
//! with counts.

use crate::error::{HostError, HostErrorKind};
use fleetgate_core::Timestamp;
use fleetgate_core::env::EnvSnapshot;
use fleetgate_core::inventory::{HeldProof, PROOF_MAX_BYTES};
use fleetgate_core::procmatch::{FleetMatcher, Listed};
use fleetgate_core::runtime::{ObservedProcess, ProcessScan, ProcessStamp};
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long a read of the boot time (`/proc/stat`, which the kernel computes with every
/// CPU's counters) serves the scans after it.
const BOOT_TIME_REUSE: Duration = Duration::from_secs(1);

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
    /// A process as its own `/proc` entry names it: its pid in its own PID namespace, that
    /// namespace, its start ticks ([`ProcessStamp`]), and the user it runs as; or why that
    /// cannot be read.
    fn stamp(&self, pid: i64) -> Result<Stamped, HostError> {
        Err(HostError::new(HostErrorKind::Unreadable, format!("pid {pid} cannot be stamped here")))
    }
    /// The gateway proofs a process holds open (the memory files named
    /// [`crate::proof::NAME`]), each read through the process's own descriptor, with the
    /// owner of the file; or why its descriptors cannot be read.
    fn proofs(&self, pid: i64) -> Result<Vec<HeldProof>, HostError> {
        Err(HostError::new(HostErrorKind::Unreadable, format!("the proofs of pid {pid} cannot be read here")))
    }
}

/// A process's stamp, and the user it runs as (its effective uid, from its `status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamped {
    /// Its pid in its own namespace, that namespace, its start.
    pub stamp: ProcessStamp,
    /// Its effective uid, when the `status` says.
    pub uid: Option<u32>,
}

/// `/proc` (or another procfs mount, for tests).
#[derive(Debug)]
pub struct ProcFs {
    root: PathBuf,
    /// How long what a scan read of a listed process serves the scans after it.
    reuse: Duration,
    /// What was read of each listed process, by pid.
    known: Mutex<HashMap<i64, Known>>,
    /// The boot time, and when it was read.
    boot: Mutex<Option<(Instant, i64)>>,
}

/// What was read of one process, and under which `stat`.
#[derive(Debug)]
struct Known {
    start_ticks: i64,
    image: [u64; 4],
    /// `None`: no command line (a kernel thread).
    entry: Option<ProcEntry>,
    read_at: Instant,
    /// It had run for [`SETTLED`] when read: a wrapper that execs its program (`env`,
    /// `sh -c 'exec …'`) has done so by then, so the read may serve later scans.
    settled: bool,
    /// Its environment, once asked for: the block exec gave it, kept while the image is.
    environ: Option<EnvSnapshot>,
}

/// How long a process must have run before what was read of it serves later scans: a
/// younger one is read again at every scan, so a launcher's exec is seen at once.
const SETTLED: Duration = Duration::from_secs(2);

/// Clock ticks since boot now, the base of a `stat`'s start ticks.
fn ticks_since_boot(ticks_per_second: i64) -> i64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    now.tv_sec.saturating_mul(ticks_per_second).saturating_add(now.tv_nsec * ticks_per_second / 1_000_000_000)
}

/// How long a scan's read of a listed process serves the scans after it
/// ([`ProcFs::reusing_for`]).
pub const REUSE: Duration = Duration::from_secs(1);

impl Default for ProcFs {
    fn default() -> Self {
        Self::at("/proc")
    }
}

impl Clone for ProcFs {
    fn clone(&self) -> Self {
        Self::at(self.root.clone()).reusing_for(self.reuse)
    }
}

impl ProcFs {
    /// A procfs at `root`.
    pub fn at(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into(), reuse: REUSE, known: Mutex::default(), boot: Mutex::default() }
    }

    /// The same, a scan's read of a listed process serving the scans of the next `reuse`.
    #[must_use]
    pub fn reusing_for(mut self, reuse: Duration) -> Self {
        self.reuse = reuse;
        self
    }

    fn boot_time(&self) -> Result<i64, HostError> {
        let mut boot = self.boot.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((at, btime)) = *boot
            && at.elapsed() < BOOT_TIME_REUSE
        {
            return Ok(btime);
        }
        let path = self.root.join("stat");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| HostError::new(HostErrorKind::Unreadable, format!("cannot read {}: {e}", path.display())))?;
        let btime = parse_btime(&text)
            .ok_or_else(|| HostError::new(HostErrorKind::Malformed, format!("{} has no btime line", path.display())))?;
        *boot = Some((Instant::now(), btime));
        Ok(btime)
    }

    /// Pid `pid` as `dir` shows it: its `stat` and owner read now, its command line read
    /// only when this process was not read before under the same start and image (exec maps
    /// a new image; a recycled pid starts later). `None` for a kernel thread (no command
    /// line) or a process gone meanwhile.
    fn read_entry(&self, dir: &Path, pid: i64, boot: i64, ticks: i64) -> Option<ProcEntry> {
        // The owner of `stat` is the owner of the process's entry: one open for both.
        let mut file = std::fs::File::open(dir.join("stat")).ok()?;
        let uid = std::os::unix::fs::MetadataExt::uid(&file.metadata().ok()?);
        let mut text = String::new();
        std::io::Read::read_to_string(&mut file, &mut text).ok()?;
        let stat = parse_pid_stat(&text)?;
        // Addresses this reader may not see (all zero) tell no exec apart: read again.
        let same = |k: &Known| stat.image != [0; 4] && k.start_ticks == stat.start_ticks && k.image == stat.image;
        let argv = match self.known().get(&pid).filter(|k| same(k)) {
            Some(known) => known.entry.as_ref().map(|e| e.argv.clone()),
            None => Some(std::fs::read(dir.join("cmdline")).ok()?)
                .filter(|raw| !raw.is_empty())
                .map(|raw| parse_cmdline(&raw)),
        };
        let entry = match argv {
            Some(argv) => Some(ProcEntry {
                pid,
                ppid: stat.ppid,
                started_at: stat.started_at(boot, ticks)?,
                argv,
                uid: Some(uid),
            }),
            None => None,
        };
        let age_ticks = ticks_since_boot(ticks).saturating_sub(stat.start_ticks);
        let settled = Duration::from_secs(u64::try_from(age_ticks / ticks.max(1)).unwrap_or(0)) >= SETTLED;
        let environ = self.known().get(&pid).filter(|k| same(k)).and_then(|k| k.environ.clone());
        let known = Known {
            start_ticks: stat.start_ticks,
            image: stat.image,
            entry: entry.clone(),
            read_at: Instant::now(),
            settled,
            environ,
        };
        self.known().insert(pid, known);
        entry
    }

    fn known(&self) -> std::sync::MutexGuard<'_, HashMap<i64, Known>> {
        self.known.lock().unwrap_or_else(PoisonError::into_inner)
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
        let (mut out, mut listed) = (Vec::new(), Vec::new());
        for item in dir {
            let item = item.map_err(unlisted)?;
            let Some(pid) = item.file_name().to_str().and_then(|n| n.parse::<i64>().ok()) else { continue };
            listed.push(pid);
            let recent = self
                .known()
                .get(&pid)
                .filter(|k| k.settled && k.read_at.elapsed() < self.reuse)
                .map(|k| k.entry.clone());
            // A process may exit mid-scan; what vanished is simply not there.
            if let Some(e) = recent.unwrap_or_else(|| self.read_entry(&item.path(), pid, boot, ticks)) {
                out.push(e);
            }
        }
        out.sort_by_key(|e| e.pid);
        listed.sort_unstable();
        // What is no longer listed is forgotten: the map holds this host's processes only.
        self.known().retain(|pid, _| listed.binary_search(pid).is_ok());
        Ok(out)
    }

    fn entry(&self, pid: i64) -> Option<ProcEntry> {
        let boot = self.boot_time().ok()?;
        self.read_entry(&self.root.join(pid.to_string()), pid, boot, clock_ticks())
    }

    /// Read again unless a scan within the reuse found the process settled and unchanged
    /// since its environment was read.
    fn environ(&self, pid: i64) -> Result<EnvSnapshot, HostError> {
        let fresh = |k: &&Known| k.settled && k.read_at.elapsed() < self.reuse;
        if let Some(env) = self.known().get(&pid).filter(fresh).and_then(|k| k.environ.clone()) {
            return Ok(env);
        }
        let path = self.root.join(pid.to_string()).join("environ");
        let raw = std::fs::read(&path)
            .map_err(|e| HostError::new(HostErrorKind::Unreadable, format!("cannot read {}: {e}", path.display())))?;
        let env = parse_environ(&raw);
        if let Some(known) = self.known().get_mut(&pid).filter(|k| k.settled) {
            known.environ = Some(env.clone());
        }
        Ok(env)
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

    fn stamp(&self, pid: i64) -> Result<Stamped, HostError> {
        let dir = self.root.join(pid.to_string());
        let unreadable = |what: &Path, e: &dyn std::fmt::Display| {
            HostError::new(HostErrorKind::Unreadable, format!("cannot read {}: {e}", what.display()))
        };
        let malformed = |what: &Path| {
            HostError::new(HostErrorKind::Malformed, format!("{} is not what procfs writes", what.display()))
        };
        let stat_path = dir.join("stat");
        let stat = std::fs::read_to_string(&stat_path).map_err(|e| unreadable(&stat_path, &e))?;
        let start_ticks = parse_pid_stat(&stat)
            .and_then(|s| u64::try_from(s.start_ticks).ok())
            .ok_or_else(|| malformed(&stat_path))?;
        let status_path = dir.join("status");
        let status = std::fs::read_to_string(&status_path).map_err(|e| unreadable(&status_path, &e))?;
        // A kernel before 4.1 writes no NSpid: then the process is in this reader's namespace.
        let own_pid = parse_nspid(&status).unwrap_or(pid);
        let ns_path = dir.join("ns").join("pid");
        let pid_namespace = match std::fs::read_link(&ns_path) {
            Ok(link) => Some(parse_namespace_link(&link.to_string_lossy()).ok_or_else(|| malformed(&ns_path))?),
            // A kernel without namespaces has no link; a link that cannot be read is unknown.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && dir.exists() => None,
            Err(e) => return Err(unreadable(&ns_path, &e)),
        };
        Ok(Stamped {
            stamp: ProcessStamp { pid: own_pid, pid_namespace, start_ticks },
            uid: parse_effective_uid(&status),
        })
    }

    fn proofs(&self, pid: i64) -> Result<Vec<HeldProof>, HostError> {
        use std::io::Read;
        use std::os::unix::fs::MetadataExt;
        let dir = self.root.join(pid.to_string()).join("fd");
        let unreadable = |e: std::io::Error| {
            HostError::new(HostErrorKind::Unreadable, format!("cannot list {}: {e}", dir.display()))
        };
        let name = format!("/memfd:{}", crate::proof::NAME);
        let mut out = Vec::new();
        for item in std::fs::read_dir(&dir).map_err(unreadable)? {
            let path = item.map_err(unreadable)?.path();
            // A descriptor closed mid-listing is simply not there.
            let Ok(link) = std::fs::read_link(&path) else { continue };
            // `/memfd:NAME (deleted)`: a memory file has no path, only the name it was made with.
            if !link.to_string_lossy().strip_prefix(&name).is_some_and(|rest| rest.is_empty() || rest.starts_with(' '))
            {
                continue;
            }
            // Opened through the process's own descriptor: the very file it holds, whatever
            // else carries that name. Read at most one byte past a proof's bound.
            let Ok(file) = std::fs::File::open(&path) else { continue };
            let owner = file.metadata().ok().map(|m| m.uid());
            let mut bytes = Vec::new();
            let bound = u64::try_from(PROOF_MAX_BYTES + 1).unwrap_or(u64::MAX);
            if file.take(bound).read_to_end(&mut bytes).is_ok() {
                out.push(HeldProof { owner, bytes });
            }
        }
        Ok(out)
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
    /// Exited and not yet reaped (state `Z` or `X`, field 3): no longer running anything.
    pub zombie: bool,
    /// Start time in clock ticks after boot (field 22).
    pub start_ticks: i64,
    /// Where the program's code starts and ends and where its argument strings start and end
    /// (fields 26, 27, 48, 49): exec maps a new image, so they change with it. All zero when
    /// the reader may not see them, or the line is too short to have them.
    pub image: [u64; 4],
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
    let address = |i: usize| fields.get(i).and_then(|f| f.parse().ok()).unwrap_or(0);
    Some(PidStat {
        ppid: fields.get(1)?.parse().ok()?,
        zombie: matches!(fields.first(), Some(&("Z" | "X"))),
        start_ticks: fields.get(19)?.parse().ok()?,
        image: [address(23), address(24), address(45), address(46)],
    })
}

/// A process's pid in its own PID namespace, from the text of `/proc/<pid>/status`: the
/// last of its `NSpid` line (the first is the reader's namespace's number for it), if there
/// is a well-formed one.
pub fn parse_nspid(status: &str) -> Option<i64> {
    let line = status.lines().find_map(|l| l.strip_prefix("NSpid:"))?;
    line.split_whitespace().last()?.parse().ok().filter(|pid: &i64| *pid > 0)
}

/// The effective uid from the text of `/proc/<pid>/status` (the second of its `Uid:` line:
/// real, effective, saved, file system).
pub fn parse_effective_uid(status: &str) -> Option<u32> {
    status.lines().find_map(|l| l.strip_prefix("Uid:"))?.split_whitespace().nth(1)?.parse().ok()
}

/// The namespace a `/proc/<pid>/ns/…` link names (`pid:[4026531836]`), as its inode.
pub fn parse_namespace_link(link: &str) -> Option<u64> {
    let (_, rest) = link.split_once(":[")?;
    rest.strip_suffix(']')?.parse().ok()
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

/// The fleet processes on this host that stand on their own ([`FleetMatcher::fleet_servers`]):
/// gateways and `process_match` hits, minus every process in a gateway's downstream tree,
/// which is part of that gateway's member (core judges the ancestry from the listing's pid
/// and ppid).
pub fn scan_fleet(source: &dyn ProcessSource, matcher: &FleetMatcher) -> ProcessScan {
    let entries = match source.entries() {
        Ok(e) => e,
        Err(why) => return ProcessScan::unavailable(why.to_string()),
    };
    let listed: Vec<Listed<'_>> = entries.iter().map(|e| Listed { pid: e.pid, ppid: e.ppid, argv: &e.argv }).collect();
    ProcessScan::of(
        matcher
            .fleet_servers(&listed)
            .into_iter()
            .map(|i| &entries[i])
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
        assert_eq!(
            parse_pid_stat(line),
            Some(PidStat { ppid: 4100, zombie: false, start_ticks: 99_999_999, image: [0; 4] })
        );
        // Linux 6's 52 fields, numbered from 1 as proc(5) does.
        let mut fields: Vec<String> = (1..=52).map(|n| (n * 1000).to_string()).collect();
        fields[1] = "(x y)".into();
        fields[2] = "S".into();
        let full = fields.join(" ");
        assert_eq!(
            parse_pid_stat(&full),
            Some(PidStat { ppid: 4000, zombie: false, start_ticks: 22_000, image: [26_000, 27_000, 48_000, 49_000] }),
            "code start/end (fields 26, 27), arguments start/end (48, 49)"
        );
        let exited = line.replacen(") R ", ") Z ", 1);
        assert_eq!(parse_pid_stat(&exited).map(|s| s.zombie), Some(true), "a zombie is told apart");
        assert_eq!(parse_pid_stat("4711 (a) R 1"), None);
        assert_eq!(parse_pid_stat("no parenthesis 1 2 3"), None);
        assert_eq!(parse_btime("cpu 1 2\nbtime 1733212800\n"), Some(1_733_212_800));
        assert_eq!(parse_btime("btime x\n"), None);
    }

    /// A stat line of pid 42 started at `ticks` with this image.
    fn stat_line(ticks: i64, image: [u64; 4]) -> String {
        let mut fields: Vec<String> = vec!["0".into(); 52];
        (fields[0], fields[1], fields[2], fields[3]) = ("42".into(), "(x)".into(), "S".into(), "1".into());
        fields[21] = ticks.to_string();
        for (i, address) in [25, 26, 47, 48].into_iter().zip(image) {
            fields[i] = address.to_string();
        }
        fields.join(" ")
    }

    #[test]
    fn a_command_line_is_read_again_only_after_an_exec_or_a_new_start() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("stat"), "cpu 1\nbtime 1700000000\n").unwrap();
        let pid = root.path().join("42");
        std::fs::create_dir(&pid).unwrap();
        let write = |ticks, image, argv: &[u8]| {
            std::fs::write(pid.join("stat"), stat_line(ticks, image)).unwrap();
            std::fs::write(pid.join("cmdline"), argv).unwrap();
        };
        let fs = ProcFs::at(root.path()).reusing_for(Duration::ZERO);
        let argv = || fs.entries().unwrap().into_iter().map(|e| e.argv).collect::<Vec<_>>();
        write(100, [1, 2, 3, 4], b"sh\0-c\0exec gitea-mcp\0");
        assert_eq!(argv(), [["sh", "-c", "exec gitea-mcp"]]);
        // Rewritten in place (setproctitle): the same start and image, the line read first.
        write(100, [1, 2, 3, 4], b"renamed\0");
        assert_eq!(argv(), [["sh", "-c", "exec gitea-mcp"]]);
        write(100, [5, 6, 7, 8], b"gitea-mcp\0");
        assert_eq!(argv(), [["gitea-mcp"]], "an exec maps a new image");
        write(200, [5, 6, 7, 8], b"sleep\0");
        assert_eq!(argv(), [["sleep"]], "a recycled pid starts later");
        write(200, [0; 4], b"hidden\0");
        assert_eq!(argv(), [["hidden"]], "addresses this reader may not see: read every time");
        write(200, [0; 4], b"hidden again\0");
        assert_eq!(argv(), [["hidden again"]]);
        std::fs::remove_dir_all(&pid).unwrap();
        assert!(argv().is_empty());
        assert!(fs.known().is_empty(), "a process gone is forgotten");
    }

    #[test]
    fn within_the_reuse_a_listed_process_is_not_read_again_but_arrivals_and_exits_are_seen() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("stat"), "btime 1700000000\n").unwrap();
        let write = |pid: i64, image, argv: &[u8]| {
            let dir = root.path().join(pid.to_string());
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("stat"), stat_line(100, image)).unwrap();
            std::fs::write(dir.join("cmdline"), argv).unwrap();
        };
        let fs = ProcFs::at(root.path()).reusing_for(Duration::from_secs(3600));
        let argv = || fs.entries().unwrap().into_iter().map(|e| (e.pid, e.argv)).collect::<Vec<_>>();
        write(42, [1, 2, 3, 4], b"sh\0");
        assert_eq!(argv(), [(42, vec!["sh".to_owned()])]);
        write(42, [5, 6, 7, 8], b"gitea-mcp\0");
        write(43, [1, 2, 3, 4], b"new\0");
        assert_eq!(argv(), [(42, vec!["sh".to_owned()]), (43, vec!["new".to_owned()])], "a new pid at once");
        std::fs::remove_dir_all(root.path().join("42")).unwrap();
        assert_eq!(argv(), [(43, vec!["new".to_owned()])], "an exit at once");
        assert_eq!(fs.entry(43).map(|e| e.argv), Some(vec!["new".to_owned()]));
    }

    #[test]
    fn an_environment_is_read_once_per_image_within_the_reuse() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("stat"), "btime 1700000000\n").unwrap();
        let dir = root.path().join("42");
        std::fs::create_dir(&dir).unwrap();
        let write = |image, env: &[u8]| {
            std::fs::write(dir.join("stat"), stat_line(100, image)).unwrap();
            std::fs::write(dir.join("cmdline"), b"gitea-mcp\0").unwrap();
            std::fs::write(dir.join("environ"), env).unwrap();
        };
        let get =
            |fs: &ProcFs, key: &str| fs.environ(42).unwrap().iter().find(|(k, _)| *k == key).map(|(_, v)| v.to_owned());
        let fs = ProcFs::at(root.path()).reusing_for(Duration::from_secs(3600));
        write([1, 2, 3, 4], b"A=1\0");
        assert_eq!(get(&fs, "A"), Some("1".into()), "never scanned: read");
        write([1, 2, 3, 4], b"A=2\0");
        assert_eq!(get(&fs, "A"), Some("2".into()), "not known to a scan: read again");
        fs.entries().unwrap();
        assert_eq!(get(&fs, "A"), Some("2".into()));
        write([1, 2, 3, 4], b"A=3\0");
        assert_eq!(get(&fs, "A"), Some("2".into()), "the block exec gave it, while the image is the same");
        let rescan = ProcFs::at(root.path()).reusing_for(Duration::ZERO);
        rescan.entries().unwrap();
        assert_eq!(get(&rescan, "A"), Some("3".into()));
        write([5, 6, 7, 8], b"A=4\0");
        rescan.entries().unwrap();
        assert_eq!(get(&rescan, "A"), Some("4".into()), "an exec's new environment");
    }

    #[test]
    fn a_young_process_is_read_at_every_scan_so_a_launchers_exec_is_seen_at_once() {
        use std::io::Write;
        let mut child = std::process::Command::new("sh")
            .args(["-c", "read line; exec sleep 30"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = i64::from(child.id());
        // However long a read may serve: only the process's youth makes the scan read it again.
        let fs = ProcFs::default().reusing_for(Duration::from_secs(3600));
        let argv = |fs: &ProcFs| fs.entries().unwrap().into_iter().find(|e| e.pid == pid).map(|e| e.argv);
        // The parent of a vfork-style spawn resumes once the child's new image is mapped, a
        // moment before the kernel sets the child's argument area: its `cmdline` reads empty
        // until then (a kernel thread's look), so wait for the first scan that lists it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let first = loop {
            match argv(&fs) {
                Some(a) => break Some(a),
                None if std::time::Instant::now() > deadline => break None,
                None => std::thread::sleep(std::time::Duration::from_millis(2)),
            }
        };
        assert_eq!(first.expect("the child is listed within 10 s")[0], "sh");
        child.stdin.take().unwrap().write_all(b"go\n").unwrap();
        let exe = || std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !exe().ends_with("sleep") && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let seen = argv(&fs);
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(seen.unwrap(), ["sleep", "30"], "the next scan after the exec");
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
