//! Runtime rows: what a server process writes about itself right after its
//! MCP transport is bound, and the roster those rows are checked against.

use crate::time::Timestamp;
use serde::{Deserialize, Serialize};

/// Runtime row status. A stopped row (orderly shutdown) is history, not a member.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuntimeStatus {
    /// The server says it is serving.
    Running,
    /// The server shut down in order.
    Stopped,
}

impl RuntimeStatus {
    /// The stored literal.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Stopped => "stopped",
        }
    }

    /// Parse the stored literal.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "running" => Some(Self::Running),
            "stopped" => Some(Self::Stopped),
            _ => None,
        }
    }
}

/// Where a cohort id came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CohortSource {
    /// `<PREFIX>MCP_COHORT_ID`.
    ExplicitEnv,
    /// The parent process (`ppid:N`).
    ParentProcess,
    /// Neither: the parent is PID 1 or unknown.
    Unknown,
}

impl CohortSource {
    /// The stored literal.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::ExplicitEnv => "explicit_env",
            Self::ParentProcess => "parent_process",
            Self::Unknown => "unknown",
        }
    }

    /// Parse the stored literal.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "explicit_env" => Some(Self::ExplicitEnv),
            "parent_process" => Some(Self::ParentProcess),
            "unknown" => Some(Self::Unknown),
            _ => None,
        }
    }
}

/// A cohort: the client process family a server belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Cohort {
    /// The id, or null when unknown.
    pub cohort_id: Option<String>,
    /// Where it came from.
    pub cohort_source: CohortSource,
}

/// Derive the cohort from the explicit env id, else the parent pid. A
/// revision never enters: matching revisions do not make a cohort.
pub fn derive_cohort(explicit: Option<&str>, parent_pid: Option<i64>) -> Cohort {
    if let Some(id) = explicit.map(str::trim).filter(|s| !s.is_empty()) {
        return Cohort { cohort_id: Some(id.to_owned()), cohort_source: CohortSource::ExplicitEnv };
    }
    match parent_pid {
        Some(ppid) if ppid > 1 => {
            Cohort { cohort_id: Some(format!("ppid:{ppid}")), cohort_source: CohortSource::ParentProcess }
        }
        _ => Cohort { cohort_id: None, cohort_source: CohortSource::Unknown },
    }
}

/// `namespace:pid:boot_id`.
pub fn runtime_id(namespace: &str, pid: i64, boot_id: &str) -> String {
    format!("{namespace}:{pid}:{boot_id}")
}

/// One runtime row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeRecord {
    /// `namespace:pid:boot_id`.
    pub runtime_id: String,
    /// MCP namespace (`gitea-author`).
    pub namespace: String,
    /// Profile (`prgs-author`).
    pub profile: String,
    /// Declared role.
    pub role: String,
    /// Forge remote, when known.
    pub remote: Option<String>,
    /// Organisation, when known.
    pub org: Option<String>,
    /// Repository, when known.
    pub repo: Option<String>,
    /// Checkout the server works in.
    pub repository_root: Option<String>,
    /// Server pid.
    pub pid: i64,
    /// Cohort id; null when unknown.
    pub cohort_id: Option<String>,
    /// Where the cohort id came from.
    pub cohort_source: CohortSource,
    /// `client_managed`, `sidecar`, …
    pub client_provenance: String,
    /// Fresh per process start.
    pub boot_id: String,
    /// Repository HEAD when the server started; null when unknown.
    pub startup_head: Option<String>,
    /// HEAD when the daemon (if any) started.
    pub daemon_start_head: Option<String>,
    /// `stdio`, `http`, …
    pub transport: String,
    /// When the row was written.
    pub registered_at: Timestamp,
    /// Last refresh of the row; null when never refreshed.
    pub last_heartbeat_at: Option<Timestamp>,
    /// Running or stopped.
    pub status: RuntimeStatus,
    /// The host the process runs on, written with the row; null when it
    /// could not be told. A row without a host is of unknown whereabouts,
    /// never assumed local.
    pub host: Option<HostIdentity>,
}

/// Which machine, in which boot, a process runs on: the stable machine id
/// (`/etc/machine-id`) and the kernel's boot id. A process observation only
/// ever speaks for its own host, and a row from an earlier boot of a host
/// names no process that can still exist.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct HostIdentity {
    /// The stable machine id.
    pub host_id: String,
    /// The kernel's boot id, fresh at every boot (not the row's `boot_id`,
    /// which is fresh at every process start).
    pub boot_id: String,
}

/// Which store a process works on, as the process itself identifies it: a gateway's proof
/// names its own (issue 54), and a fleet's snapshot names the one its rows were read from, so
/// the two can be compared without either knowing the other's credentials.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreIdentity {
    /// `sqlite` or `postgres`.
    pub engine: String,
    /// Where it is, as messages may show it: a path, or a URL without its password.
    pub location: String,
    /// What tells it from every other store.
    pub key: StoreKey,
}

/// What tells one store from every other: never its spelling (two paths, two URLs may name
/// one store), always what the file system or the database server says of it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StoreKey {
    /// A SQLite file: its device and inode.
    File {
        /// The device.
        device: u64,
        /// The inode.
        inode: u64,
    },
    /// A PostgreSQL database: the server's system identifier (the cluster's, from
    /// `pg_control_system()`; its address and port where the server will not say), the
    /// database's oid and the schema the tables live in.
    Database {
        /// The database cluster.
        system: String,
        /// The database's oid.
        database: String,
        /// The schema.
        schema: String,
    },
}

/// One process as its own `/proc` entry names it: its pid in its own PID namespace, that
/// namespace (the inode of `/proc/PID/ns/pid`), and its start in clock ticks after boot. A
/// pid is reused; the three together are not, within one kernel boot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessStamp {
    /// Its pid, as its own PID namespace numbers it.
    pub pid: i64,
    /// Its PID namespace, when it could be read.
    pub pid_namespace: Option<u64>,
    /// Its start, in clock ticks after boot (`/proc/PID/stat` field 22).
    pub start_ticks: u64,
}

/// One expected server of the roster.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RosterMember {
    /// MCP namespace.
    pub namespace: String,
    /// Profile.
    pub profile: String,
    /// Role.
    pub role: String,
    /// How many instances of it may run at once (`[[members]] replicas`; 1 unless declared):
    /// HTTP gateway replicas of one profile behind a load balancer. One more is a duplicate.
    #[serde(default = "one_replica")]
    pub replicas: u32,
}

fn one_replica() -> u32 {
    1
}

/// The repository every member must be bound to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Binding {
    /// Forge remote name.
    pub remote: String,
    /// Organisation.
    pub org: String,
    /// Repository.
    pub repo: String,
}

/// Whether the replica whose runtime row is `row` may still hold sessions, as of `now`: its row
/// says it is running and was refreshed within `ttl_seconds`, and — when it runs on `local`,
/// this host — its pid is alive (`pid_alive`). A request for one of its sessions is relayed to
/// it only then: a dead replica's port may since belong to another process, which must not be
/// handed the request and its credential.
pub fn replica_alive(
    row: &RuntimeRecord,
    local: Option<&HostIdentity>,
    now: Timestamp,
    ttl_seconds: f64,
    pid_alive: &dyn Fn(i64) -> bool,
) -> bool {
    let fresh = row.last_heartbeat_at.is_some_and(|at| now.seconds_since(at) as f64 <= ttl_seconds);
    let here = local.is_some_and(|l| row.host.as_ref() == Some(l));
    row.status == RuntimeStatus::Running && fresh && (!here || pid_alive(row.pid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replica_holds_sessions_only_while_running_fresh_and_alive_where_that_can_be_seen() {
        let here = HostIdentity { host_id: "m1".into(), boot_id: "b1".into() };
        let there = HostIdentity { host_id: "m2".into(), boot_id: "b1".into() };
        let now = Timestamp::from_unix(10_000);
        let row = |status, beat: Option<i64>, host: Option<&HostIdentity>| RuntimeRecord {
            runtime_id: "rt".into(),
            namespace: "gitea-author".into(),
            profile: "prgs-author".into(),
            role: "author".into(),
            remote: None,
            org: None,
            repo: None,
            repository_root: None,
            pid: 4242,
            cohort_id: None,
            cohort_source: CohortSource::Unknown,
            client_provenance: "client-managed".into(),
            boot_id: "b".into(),
            startup_head: None,
            daemon_start_head: None,
            transport: "http".into(),
            registered_at: now,
            last_heartbeat_at: beat.map(|s| now.plus_seconds(-s)),
            status,
            host: host.cloned(),
        };
        let (alive, dead) = (|_: i64| true, |_: i64| false);
        let judge = |r: &RuntimeRecord, probe: &dyn Fn(i64) -> bool| replica_alive(r, Some(&here), now, 30.0, probe);
        assert!(judge(&row(RuntimeStatus::Running, Some(5), Some(&here)), &alive));
        assert!(!judge(&row(RuntimeStatus::Running, Some(5), Some(&here)), &dead), "its pid is gone");
        assert!(judge(&row(RuntimeStatus::Running, Some(5), Some(&there)), &dead), "another host's pid is not probed");
        assert!(judge(&row(RuntimeStatus::Running, Some(5), None), &dead), "nor a row of unknown whereabouts");
        assert!(!judge(&row(RuntimeStatus::Running, Some(31), Some(&there)), &alive), "silent past the TTL");
        assert!(!judge(&row(RuntimeStatus::Running, None, Some(&there)), &alive), "never refreshed");
        assert!(!judge(&row(RuntimeStatus::Stopped, Some(1), Some(&here)), &alive), "stopped");
    }

    #[test]
    fn cohort_comes_from_env_then_parent_and_never_from_a_revision() {
        let c = derive_cohort(Some("cohort-x"), Some(40990));
        assert_eq!((c.cohort_id.as_deref(), c.cohort_source), (Some("cohort-x"), CohortSource::ExplicitEnv));
        let c = derive_cohort(None, Some(40990));
        assert_eq!((c.cohort_id.as_deref(), c.cohort_source), (Some("ppid:40990"), CohortSource::ParentProcess));
        let c = derive_cohort(Some("  "), Some(1));
        assert_eq!((c.cohort_id, c.cohort_source), (None, CohortSource::Unknown));
        assert_eq!(derive_cohort(None, None).cohort_source, CohortSource::Unknown);
    }

    #[test]
    fn runtime_id_is_namespace_pid_boot() {
        assert_eq!(
            runtime_id("gitea-controller", 41022, "deadbeefcafe0001"),
            "gitea-controller:41022:deadbeefcafe0001"
        );
    }
}

/// One fleet process seen by the answering process's own scan.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ObservedProcess {
    /// Its pid.
    pub pid: i64,
    /// When it started (never later than the true start).
    pub started_at: Timestamp,
    /// Its command line, arguments joined by spaces, secrets masked (`redact_argv`).
    pub command: String,
    /// The user it runs as, when known: on a shared host, who owns a process that closes
    /// the gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
}

/// A process observation: the fleet processes on one host, sorted by pid, or
/// why the listing could not be made. Never an empty list standing in for
/// "could not look".
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessScan {
    /// The listing was made.
    pub available: bool,
    /// Why it was not.
    pub reason: Option<String>,
    /// What was seen, sorted by pid.
    pub processes: Vec<ObservedProcess>,
}

impl ProcessScan {
    /// A listing that could not be made.
    pub fn unavailable(reason: impl Into<String>) -> Self {
        Self { available: false, reason: Some(reason.into()), processes: Vec::new() }
    }

    /// A listing, sorted by pid.
    pub fn of(mut processes: Vec<ObservedProcess>) -> Self {
        processes.sort();
        Self { available: true, reason: None, processes }
    }
}
