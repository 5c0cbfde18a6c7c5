//! The fleetgate control-plane store: the contract ([`Store`], [`StoreError`],
//! [`HostObservation`], and core's [`HostIdentity`]) and its engines, SQLite and
//! PostgreSQL. The engine is chosen once, at the edge, by [`open`]; nothing
//! above this crate knows which one runs.
//!
//! **Invariant:** every multi-statement operation runs in one write
//! transaction, and a renewal's fence is in its `UPDATE`'s `WHERE`: a refused
//! renewal changes nothing.
//!
//! May import core and host; not the gateway, the configuration, the control plane or
//! anything above them (`tests/layering.rs` in the binary crate checks).
#![deny(missing_docs)]

mod approvals;
mod audit;
mod clock;
mod engine;
mod error;
mod layer;
mod ledger;
mod locks;
pub use locks::{LockWrite, new_lock_id};
mod pins;
pub mod postgres;
mod registry;
mod retention;
mod rows;
mod schema;
mod sessions;
pub use sessions::HttpSession;
mod shown;
mod sql;
pub mod sqlite;
mod workflow;

pub use clock::StoreClock;
pub use error::{StoreError, StoreErrorKind};
pub use shown::redact_url;
pub use workflow::{PrClaimOutcome, PrLeaseClaim, PrRecords, ToolPin, new_lease_id};

pub use approvals::{ApprovalEvent, Approvals, NotifyHold};
pub use audit::Audit;
use engine::{Engine, Exec, Retry};
use fleetgate_core::Timestamp;
use fleetgate_core::approval::ApprovalRequest;
pub use fleetgate_core::runtime::HostIdentity;
use fleetgate_core::runtime::{ProcessScan, RuntimeRecord};
use fleetgate_core::worker::WorkerRecord;
pub use layer::Layer;
pub use ledger::Ledger;
pub use pins::{Pins, SeenTool};
pub use registry::Registry;
pub use retention::{PrunedApprovals, Retention};
pub use sessions::Sessions;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// Run `f` with every operation it makes on this thread's store handles bounded by
/// `budget` instead of the engine's own deadline, when `budget` is the shorter, where the
/// engine can bound its waits ([`Store::bounds_waits`]): an operation still waiting for a
/// lock when it runs out fails `Busy`. PostgreSQL's server-side lock timeout is not changed.
pub fn within<T>(budget: std::time::Duration, f: impl FnOnce() -> T) -> T {
    sqlite::within(budget, f)
}

/// The store's traits, for code that calls the operations on a concrete handle or a
/// generic `S: Store` (on a `dyn Store` they need no import): `use fleetgate_store::prelude::*;`.
pub mod prelude {
    pub use crate::{Approvals, Audit, Layer, Ledger, Pins, Registry, Retention, Sessions, Store};
}

/// The schema version this build writes. Both engines number their
/// migrations alike, so a version means the same tables everywhere.
pub const SCHEMA_VERSION: u32 = 14;

/// The control-plane store: what it stores, one trait per kind of record ([`Registry`],
/// [`Ledger`], [`Approvals`], [`Audit`], [`Retention`], [`Sessions`], [`Pins`]), and what
/// a handle is. Methods of every part are callable on a `dyn Store` without importing the
/// part. Every operation is written once, over any engine; a [`Layer`] wraps them all at
/// one point ([`Store::layered`]), so no wrapper lists them again.
pub trait Store:
    Registry + Ledger + Approvals + Audit + Retention + Sessions + Pins + Send + Sync + fmt::Debug
{
    /// Engine and location, passwords redacted: `sqlite:/path/registry.sqlite3`.
    fn describe(&self) -> String;

    /// Whether the location this handle was opened at still names the store it opened. An
    /// embedded file can be deleted or replaced under a running process, which would then
    /// go on writing to a file no one else sees: the path's device and inode are compared
    /// with the open file's (one `stat`, cheap enough before every mutation decision). A
    /// server's database always is. `Err` of kind [`StoreErrorKind::Replaced`] says what
    /// happened.
    fn check_location(&self) -> Result<(), StoreError>;

    /// Whether [`within`] bounds this store's waits (SQLite's lock waits): a caller that
    /// must answer within its own bound may then write itself rather than hand the write to
    /// a thread it can stop waiting for.
    fn bounds_waits(&self) -> bool;

    /// The schema version the store is at.
    fn schema_version(&self) -> Result<u32, StoreError>;

    /// The store's own clock, when it has one: with several hosts sharing a
    /// server, TTL ages are measured against it, never against each host's
    /// wall clock. `Ok(None)`: the store has no clock (an embedded file), use
    /// the local one. [`StoreClock`] turns this into a [`fleetgate_core::Clock`].
    fn server_now(&self) -> Result<Option<Timestamp>, StoreError>;

    /// This handle with `layer` around every operation (the handle's own layers, if any,
    /// inside it): one more handle on the same store, sharing its connections.
    fn layered(self: Arc<Self>, layer: Arc<dyn Layer>) -> Arc<dyn Store>;
}

impl<E: Engine + 'static> Store for E {
    fn describe(&self) -> String {
        self.label()
    }

    fn check_location(&self) -> Result<(), StoreError> {
        Engine::check_location(self)
    }

    fn bounds_waits(&self) -> bool {
        Engine::bounds_waits(self)
    }

    fn schema_version(&self) -> Result<u32, StoreError> {
        self.around("schema_version", || {
            let version: i64 =
                self.run("cannot read schema version", Retry::Read, |c| c.query_one(&self.sql().schema_version, &[]))?;
            Ok(u32::try_from(version).unwrap_or(0))
        })
    }

    fn server_now(&self) -> Result<Option<Timestamp>, StoreError> {
        self.around("server_now", || self.server_clock())
    }

    fn layered(self: Arc<Self>, layer: Arc<dyn Layer>) -> Arc<dyn Store> {
        Engine::layered(self, layer)
    }
}

/// A watch on the store's approvals ([`Store::approval_watch`]): one per process, kept open.
pub trait ApprovalWatch: Send {
    /// Block until the approvals may have changed since the last call (or since the watch
    /// was made), or `within` passes: `true` when a change may have happened (a wake-up that
    /// cannot tell is a change: the waiter looks again).
    fn wait(&mut self, within: std::time::Duration) -> Result<bool, StoreError>;
}

/// What became of an answer ([`Store::answer_approval`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answered {
    /// Recorded: the request as it stands after (approved, denied, or still waiting for more
    /// approvers).
    Recorded(ApprovalRequest),
    /// Not recorded: the approver may not answer it (why), the request as it stands.
    Refused(ApprovalRequest, String),
    /// No such request, or it is not pending (answered, used, withdrawn, expired).
    NotPending(Option<ApprovalRequest>),
}

/// The approval requests that stand for one exact call (`Store::approvals_on_record`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OnRecord {
    /// Pending, or answered within the TTL and not used, oldest request first.
    pub requests: Vec<ApprovalRequest>,
    /// The denials of the call's tool within the TTL, any worker's, oldest first.
    pub denials: Vec<ApprovalRequest>,
    /// How many requests the calling worker has waiting, any call.
    pub pending_of_worker: usize,
}

/// The fleet as the store holds it at one instant ([`Store::fleet_snapshot`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FleetSnapshot {
    /// Every runtime row, stopped ones included, ordered by `runtime_id`.
    pub runtimes: Vec<RuntimeRecord>,
    /// Every worker row, oldest registration first.
    pub workers: Vec<WorkerRecord>,
    /// The latest observation of every host, ordered by `host_id`.
    pub observations: Vec<HostObservation>,
    /// The store these rows were read from, as the file system (a SQLite file's device and
    /// inode) or the server (a PostgreSQL database's cluster, oid and schema) identifies it:
    /// tells a peer gateway whose proof names this very store from one with its own.
    pub store: Option<fleetgate_core::runtime::StoreIdentity>,
}

/// The latest process scan one host published about itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostObservation {
    /// The host that made the scan.
    pub host: HostIdentity,
    /// When it was made (the store's clock where it has one).
    pub observed_at: Timestamp,
    /// What it saw.
    pub scan: ProcessScan,
}

/// A store location, parsed once: where [`open`] goes and what a peer's store is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreSpec {
    /// A SQLite file (a path, or `sqlite://PATH`).
    Sqlite(PathBuf),
    /// A PostgreSQL server (`postgres://` or `postgresql://`), the URL as given.
    Postgres(String),
}

impl StoreSpec {
    /// Parse a store location: a filesystem path or `sqlite://PATH` selects SQLite;
    /// `postgres://` and `postgresql://` select PostgreSQL. Anything else (another
    /// scheme, an in-memory database, a libpq keyword string) is refused with why; no
    /// message echoes a URL's password.
    pub fn parse(spec: &str) -> Result<Self, StoreError> {
        let spec = spec.trim();
        if spec.is_empty() {
            return Err(StoreError::new(StoreErrorKind::Invalid, "store location is empty"));
        }
        if spec.starts_with("postgres://") || spec.starts_with("postgresql://") {
            return Ok(Self::Postgres(spec.to_owned()));
        }
        if let Some((scheme, _)) = spec.split_once("://")
            && scheme != "sqlite"
        {
            return Err(StoreError::new(
                StoreErrorKind::Invalid,
                format!("unknown store scheme {scheme:?}: use a path, sqlite://PATH or postgres://…"),
            ));
        }
        let path = spec.strip_prefix("sqlite://").unwrap_or(spec);
        if path.is_empty() {
            return Err(StoreError::new(StoreErrorKind::Invalid, "store location is empty"));
        }
        if path == ":memory:" || path.starts_with("file::memory:") {
            return Err(StoreError::new(
                StoreErrorKind::Invalid,
                "an in-memory store cannot be shared by the fleet's processes: give a file path or a postgres:// URL",
            ));
        }
        // A libpq keyword string (`host=… dbname=… password=…`) is not a path: refused before a
        // file of that name is made, and never echoed (it may hold a password).
        let keywords = ["host=", "hostaddr=", "dbname=", "user=", "password=", "port=", "sslmode="];
        if path.split_whitespace().filter(|w| keywords.iter().any(|k| w.starts_with(k))).count() >= 1
            && path.contains(' ')
        {
            return Err(StoreError::new(
                StoreErrorKind::Invalid,
                "the store looks like a libpq keyword string (host=… dbname=…): write it as a postgres:// URL",
            ));
        }
        Ok(Self::Sqlite(PathBuf::from(path)))
    }
}

impl StoreSpec {
    /// What this location names, as a process whose working directory is `cwd` would open
    /// it: the location shown (a URL without its password; a file's path, made absolute)
    /// and the store's key where it can be told without opening it (a file's device and
    /// inode; `None` for a file not made yet, or a server's database, which only a
    /// connection to it can tell).
    pub fn seen_from(&self, cwd: &std::path::Path) -> (String, Option<fleetgate_core::runtime::StoreKey>) {
        match self {
            Self::Postgres(url) => (redact_url(url), None),
            Self::Sqlite(path) => {
                let path = if path.is_absolute() { path.clone() } else { cwd.join(path) };
                let key = sqlite::file_key(&path);
                (path.display().to_string(), key)
            }
        }
    }
}

/// Open the store named by `spec` (see [`StoreSpec::parse`]).
pub fn open(spec: &str) -> Result<Arc<dyn Store>, StoreError> {
    match StoreSpec::parse(spec)? {
        StoreSpec::Postgres(url) => Ok(Arc::new(crate::postgres::PostgresStore::open(&url)?)),
        StoreSpec::Sqlite(path) => Ok(Arc::new(sqlite::SqliteStore::open(&path)?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_schemes_are_refused_and_postgres_errors_hide_the_password() {
        let err = open("mysql://x").unwrap_err();
        assert_eq!(err.kind(), StoreErrorKind::Invalid);
        // Nothing listens on port 1: the connection is refused, transiently,
        // and the message names the server without its password.
        let err = open("postgres://u:s3cret-pw@127.0.0.1:1/db").unwrap_err();
        assert_eq!(err.kind(), StoreErrorKind::Unavailable, "{err}");
        assert!(!err.to_string().contains("s3cret-pw"), "{err}");
        assert!(err.to_string().contains("postgres://u:***@127.0.0.1:1/db"), "{err}");
    }
}
