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
mod clock;
mod engine;
mod error;
mod ledger;
mod locks;
pub use locks::{LockWrite, new_lock_id};
mod ops;
pub mod postgres;
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

pub use approvals::ApprovalEvent;
use fleetgate_core::Timestamp;
use fleetgate_core::approval::{ApprovalRequest, Approver};
use fleetgate_core::audit::AuditEntry;
use fleetgate_core::decision_lock::ReviewLock;
pub use fleetgate_core::runtime::HostIdentity;
use fleetgate_core::runtime::{ProcessScan, RuntimeRecord};
use fleetgate_core::worker::{
    ClaimOutcome, HeartbeatOutcome, HeartbeatRequest, RegisterOutcome, Registration, WorkerRecord,
};
use fleetgate_core::workflow::{PrDecision, PrLease, PrOrigin, PrPush, PrRef};
pub use retention::PrunedApprovals;
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

/// The schema version this build writes. Both engines number their
/// migrations alike, so a version means the same tables everywhere.
pub const SCHEMA_VERSION: u32 = 13;

/// The control-plane store. Every method is required: a wrapper that forgets
/// to delegate one does not compile, rather than answering "unsupported" at
/// run time.
pub trait Store: Send + Sync + fmt::Debug {
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

    /// Register a worker. An identity that exists already is left as it is
    /// (`created: false`): registering twice never makes a second row.
    fn register(&self, registration: &Registration, now: Timestamp) -> Result<RegisterOutcome, StoreError>;

    /// One worker row.
    fn get_worker(&self, worker_identity: &str) -> Result<Option<WorkerRecord>, StoreError>;

    /// Every worker row, oldest registration first.
    fn list_workers(&self) -> Result<Vec<WorkerRecord>, StoreError>;

    /// A fenced renewal: renewed only when the row exists, meets
    /// every supplied expectation, is active and holds the presented epoch.
    fn heartbeat(&self, request: &HeartbeatRequest, now: Timestamp) -> Result<HeartbeatOutcome, StoreError>;

    /// Bump the epoch and record `generation_id` as the owner; every holder of
    /// the old epoch is fenced from then on. `None` when no such worker exists.
    fn claim_generation(
        &self,
        worker_identity: &str,
        generation_id: &str,
        now: Timestamp,
    ) -> Result<Option<ClaimOutcome>, StoreError>;

    /// Mark a worker stopped (orderly shutdown). False when it does not exist.
    fn deregister_worker(&self, worker_identity: &str, now: Timestamp) -> Result<bool, StoreError>;

    /// Write a runtime row, its host included, replacing the row of the same
    /// `runtime_id`: one statement, so a row is never seen without the host
    /// it was written with.
    fn upsert_runtime(&self, row: &RuntimeRecord) -> Result<(), StoreError>;

    /// Every runtime row, stopped ones included, ordered by `runtime_id`.
    fn list_runtime(&self) -> Result<Vec<RuntimeRecord>, StoreError>;

    /// Refresh a running row's `last_heartbeat_at`. False when no running row has that id.
    fn touch_runtime(&self, runtime_id: &str, now: Timestamp) -> Result<bool, StoreError>;

    /// Mark a runtime row stopped (orderly shutdown). False when it does not exist.
    fn mark_runtime_stopped(&self, runtime_id: &str, now: Timestamp) -> Result<bool, StoreError>;

    /// Delete the worker rows that are history as of `now` — stopped or expired, and last
    /// heard from at least `older_than_seconds` before `now`
    /// ([`fleetgate_core::prune::worker_prunable`]) — in one write transaction that
    /// locks them first, so a row renewed meanwhile is judged as renewed: a live row is
    /// never deleted. The identities deleted, oldest first.
    fn prune_workers(&self, older_than_seconds: i64, now: Timestamp) -> Result<Vec<String>, StoreError>;

    /// Delete the stopped runtime rows last heard from (else registered) at least
    /// `older_than_seconds` before `now` ([`fleetgate_core::prune::runtime_prunable`]),
    /// in one write transaction; a running row is never deleted. The ids deleted.
    fn prune_runtime(&self, older_than_seconds: i64, now: Timestamp) -> Result<Vec<String>, StoreError>;

    /// Delete at most `limit` of the oldest audit entries written before `before` (one
    /// transaction); how many. Called until it answers fewer than `limit`.
    fn prune_audit(&self, before: Timestamp, limit: usize) -> Result<u64, StoreError>;

    /// Delete the approval requests answered, used, withdrawn or expired before `before` — never
    /// a pending one — and their events older than `before` that every notification target
    /// has delivered.
    fn prune_approvals(&self, before: Timestamp) -> Result<PrunedApprovals, StoreError>;

    /// Delete the observations of hosts last heard from before `before`; how many.
    fn prune_observations(&self, before: Timestamp) -> Result<u64, StoreError>;

    /// The PRs whose every record (decisions, origin, leases, locks) is older than `before`,
    /// with no lease claimed and no lock live: the candidates of [`Store::prune_pr`].
    fn idle_prs(&self, before: Timestamp) -> Result<Vec<PrRef>, StoreError>;

    /// Delete every record of `pr` — decisions, origin, leases, locks — if it is still idle
    /// as [`Store::idle_prs`] says (judged again in the deleting transaction); whether it was.
    fn prune_pr(&self, pr: &PrRef, before: Timestamp) -> Result<bool, StoreError>;

    /// The pushes recorded before `before`, with their row ids, oldest first.
    fn old_pushes(&self, before: Timestamp) -> Result<Vec<(i64, PrPush)>, StoreError>;

    /// Delete the pushes `ids` that were recorded before `before`; how many.
    fn prune_pushes(&self, ids: &[i64], before: Timestamp) -> Result<u64, StoreError>;

    /// Append one audit entry; returns its sequence number.
    fn append_audit(&self, entry: &AuditEntry) -> Result<i64, StoreError>;

    /// Append `entries` in one write transaction; their sequence numbers, in order.
    /// `settle` runs once that transaction has begun (SQLite: holding the write lock),
    /// before anything is written, and may rewrite the entries: the auditor's group commit
    /// decides there, for each entry someone waits for, whether it is written as the
    /// waiter's or as given up. Nothing is appended when it fails.
    ///
    /// The default settles, then appends one by one without the transaction (a wrapper
    /// over an engine forwards to the engine's).
    fn append_audit_batch(
        &self,
        entries: &mut [AuditEntry],
        settle: &mut (dyn FnMut(&mut [AuditEntry]) + Send),
    ) -> Result<Vec<i64>, StoreError> {
        settle(entries);
        entries.iter().map(|entry| self.append_audit(entry)).collect()
    }

    /// Audit entries at or after `since`, oldest first, at most `limit` (the newest ones).
    fn list_audit(&self, since: Option<Timestamp>, limit: usize) -> Result<Vec<AuditEntry>, StoreError>;

    /// At most `limit` audit entries after the entry `after` (an id; 0: from the first), by id:
    /// one page of a read of the whole log in bounded memory (`rules test`).
    fn audit_after(&self, after: i64, limit: usize) -> Result<Vec<AuditEntry>, StoreError>;

    /// The store's own clock, when it has one: with several hosts sharing a
    /// server, TTL ages are measured against it, never against each host's
    /// wall clock. `Ok(None)`: the store has no clock (an embedded file), use
    /// the local one. [`StoreClock`] turns this into a [`fleetgate_core::Clock`].
    fn server_now(&self) -> Result<Option<Timestamp>, StoreError>;

    /// Publish this host's process scan, taken at `now`, replacing the host's
    /// previous one. An observation older than the stored one of the same
    /// boot is dropped (false), so a late writer never turns the clock back;
    /// one from a new boot always replaces it.
    fn publish_observation(&self, host: &HostIdentity, scan: &ProcessScan, now: Timestamp) -> Result<bool, StoreError>;

    /// The latest observation of every host, ordered by `host_id`. Whether
    /// one is fresh enough to corroborate a member is the caller's decision.
    fn list_observations(&self) -> Result<Vec<HostObservation>, StoreError>;

    /// What a look at the fleet needs, read in one transaction: every runtime
    /// row (its host in it), every worker row and every host's observation,
    /// as [`list_runtime`](Self::list_runtime), [`list_workers`](Self::list_workers)
    /// and [`list_observations`](Self::list_observations) order them — all
    /// as of one instant, so no write lands between two of the lists.
    fn fleet_snapshot(&self) -> Result<FleetSnapshot, StoreError>;

    /// Claim a PR lease as `claim.plan` says, in one guarded write: the plan's
    /// releases, the PR's expired lease of the purpose marked expired, and the new lease —
    /// unless another live one of the purpose exists, which is answered instead. `now` is
    /// the store's clock (the server's on PostgreSQL).
    fn claim_pr_lease(&self, claim: &PrLeaseClaim, now: Timestamp) -> Result<PrClaimOutcome, StoreError>;

    /// A PR's leases (any phase), decisions (oldest first) and origin, as of one instant.
    fn pr_records(&self, pr: &PrRef) -> Result<PrRecords, StoreError>;

    /// Advance `worker`'s live leases on `pr`: `last_activity` = `now`, expiring `ttl_seconds`
    /// later. The number advanced.
    fn touch_pr_leases(&self, pr: &PrRef, worker: &str, ttl_seconds: i64, now: Timestamp) -> Result<usize, StoreError>;

    /// End a claimed lease with `reason` (`taken_over` marks it expired, anything else
    /// released); with `holder`, only that worker's. False when it was not claimed (by it).
    fn release_pr_lease(
        &self,
        lease_id: &str,
        holder: Option<&str>,
        reason: &str,
        now: Timestamp,
    ) -> Result<bool, StoreError>;

    /// Release every claimed lease of `pr` (after a merge). The number released.
    fn release_pr_leases(&self, pr: &PrRef, reason: &str, now: Timestamp) -> Result<usize, StoreError>;

    /// Every lease (`live_only`: the claimed ones not expired at `now`), by PR.
    fn list_pr_leases(&self, live_only: bool, now: Timestamp) -> Result<Vec<PrLease>, StoreError>;

    /// Record a review decision at its head.
    fn record_pr_decision(&self, decision: &PrDecision) -> Result<(), StoreError>;

    /// Record who created a PR through a gateway; the first record stands.
    fn record_pr_origin(&self, origin: &PrOrigin) -> Result<(), StoreError>;

    /// An operator clears every standing decision `worker` made on `pr` (`why` says who
    /// and why, kept on each). The number cleared.
    fn clear_pr_decisions(&self, pr: &PrRef, worker: &str, why: &str) -> Result<usize, StoreError>;

    /// Record a commit pushed through a gateway.
    fn record_pr_push(&self, push: &PrPush) -> Result<(), StoreError>;

    /// Record a review decision and the review-decision lock it takes or corrects, in one
    /// transaction. The session's lock as it stands after (`None` when another decision of
    /// the session took one first; the decision is recorded either way).
    fn record_locked_decision(&self, decision: &PrDecision, lock: &LockWrite)
    -> Result<Option<ReviewLock>, StoreError>;

    /// The live review-decision locks of one reviewer session (at most one).
    fn live_review_locks(&self, client: &str, session: &str) -> Result<Vec<ReviewLock>, StoreError>;

    /// Record a request for an operator's approval of one call, unless a pending request
    /// names the same call (digest) already: the pending request as it stands.
    fn request_approval(&self, request: &ApprovalRequest) -> Result<ApprovalRequest, StoreError>;

    /// One approval request.
    fn approval(&self, id: &str) -> Result<Option<ApprovalRequest>, StoreError>;

    /// The approval requests (`pending_only`: those waiting), oldest first.
    fn list_approvals(&self, pending_only: bool) -> Result<Vec<ApprovalRequest>, StoreError>;

    /// `approver`'s answer to the pending request `id` (approve, or deny), judged on the
    /// request as it stands with `people` saying who is who (`fleetgate_core::person`):
    /// recorded (approved once its required people have, denied at the first denial), refused
    /// (the requester's own person, not among its approvers, answered already, not told apart
    /// from the requester or an earlier approver), or the request is not pending.
    fn answer_approval(
        &self,
        id: &str,
        by: (&Approver, &fleetgate_core::person::People),
        approve: bool,
        reason: Option<&str>,
        now: Timestamp,
    ) -> Result<Answered, StoreError>;

    /// Every approval answered before `answered_before` and never used, marked expired
    /// (with its event); those expired.
    fn expire_approvals(&self, answered_before: Timestamp, now: Timestamp) -> Result<Vec<ApprovalRequest>, StoreError>;

    /// The approvals' events after `after` (an event id; 0: from the first), at most
    /// `limit`, oldest first.
    fn approval_events(&self, after: i64, limit: usize) -> Result<Vec<ApprovalEvent>, StoreError>;

    /// Hold the delivery cursor of notification target `target` as `holder` until `until`
    /// (one process delivers to a target at a time): the last event delivered, `None` while
    /// another holder's hold lasts. A target new to the store starts after event `start`.
    fn claim_notify(
        &self,
        target: &str,
        holder: &str,
        start: i64,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Option<i64>, StoreError>;

    /// `target`'s events up to `last` delivered by `holder`, which keeps the cursor until
    /// `until`; whether it still held it.
    fn advance_notify(&self, target: &str, holder: &str, last: i64, until: Timestamp) -> Result<bool, StoreError>;

    /// The last event delivered to `target` (its cursor), `None` for a target never claimed:
    /// what it still owes is every event after it (`approvals watch`, the dashboard, metrics).
    fn notify_cursor(&self, target: &str) -> Result<Option<i64>, StoreError>;

    /// The requests about any of `digests` (one exact call, and its overrides) that still
    /// stand — pending, or answered at `not_before` or later and not used —, every denial of
    /// `tool` answered at `not_before` or later (a denial stands for its exact call whoever
    /// asks it), and how many requests `worker` has waiting: what the gate decides the call's
    /// operator part from.
    fn approvals_on_record(
        &self,
        digests: &[String],
        asker: (Option<&str>, &str),
        not_before: Timestamp,
    ) -> Result<OnRecord, StoreError>;

    /// A watch on the approvals: [`ApprovalWatch::wait`] returns when an answer may have
    /// been given on any connection of any process or host (PostgreSQL: `LISTEN`, the
    /// answer's own `NOTIFY`; SQLite: the file changing, by inotify), so a held call waits on
    /// the store's word instead of polling it.
    fn approval_watch(&self) -> Result<Box<dyn ApprovalWatch>, StoreError>;

    /// Use the approval `id` — approved, answered at `not_before` or later, not used — once:
    /// it as used, `None` when it is not there to use (another identical call used it).
    fn use_approval(
        &self,
        id: &str,
        not_before: Timestamp,
        now: Timestamp,
    ) -> Result<Option<ApprovalRequest>, StoreError>;

    /// Withdraw a pending request (its caller went away); whether it was pending.
    fn withdraw_approval(&self, id: &str, why: &str, now: Timestamp) -> Result<bool, StoreError>;

    /// Every review-decision lock (`live_only`: the held ones), oldest decision first.
    fn list_review_locks(&self, live_only: bool) -> Result<Vec<ReviewLock>, StoreError>;

    /// Release every live lock on `pr` (it was merged or closed); the ones released.
    fn release_review_locks(&self, pr: &PrRef, reason: &str, now: Timestamp) -> Result<Vec<ReviewLock>, StoreError>;

    /// Release one live lock; it as it stands after, `None` when it was not live.
    fn release_review_lock(
        &self,
        lock_id: &str,
        reason: &str,
        now: Timestamp,
    ) -> Result<Option<ReviewLock>, StoreError>;

    /// Record the definition of `profile`'s downstream tool as seen at `now`: pinned the
    /// first time, else kept as the last seen when its digest differs. The pin as it stands.
    fn observe_tool(
        &self,
        profile: &str,
        tool: &str,
        digest: &str,
        definition: &str,
        now: Timestamp,
    ) -> Result<ToolPin, StoreError>;

    /// One tool's pin.
    fn tool_pin(&self, profile: &str, tool: &str) -> Result<Option<ToolPin>, StoreError>;

    /// Every pin (of `profile`), by profile and tool.
    fn list_tool_pins(&self, profile: Option<&str>) -> Result<Vec<ToolPin>, StoreError>;

    /// Make the definition last seen (`digest`) the pinned one. False when the tool's last
    /// seen definition is not `digest`, or is pinned already.
    fn accept_tool(&self, profile: &str, tool: &str, digest: &str, now: Timestamp) -> Result<bool, StoreError>;

    /// Record which replica holds an HTTP session (schema v12); a session recorded already
    /// stays as it was.
    fn record_http_session(&self, session: &HttpSession) -> Result<(), StoreError>;

    /// The replica holding HTTP session `session_id`, when one recorded it.
    fn http_session(&self, session_id: &str) -> Result<Option<HttpSession>, StoreError>;

    /// Forget one HTTP session (it ended, or its owner is gone); whether it was recorded.
    fn forget_http_session(&self, session_id: &str) -> Result<bool, StoreError>;

    /// Forget every HTTP session of one runtime (its process stopped); how many.
    fn forget_http_sessions_of(&self, runtime_id: &str) -> Result<usize, StoreError>;

    /// Forget the session records opened before `opened_before` that nothing can use: a
    /// stateless client's task, or a session of a replica not running; how many.
    fn prune_http_sessions(&self, opened_before: Timestamp) -> Result<u64, StoreError>;
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
