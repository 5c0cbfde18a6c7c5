//! The SQLite engine: one file, WAL, `BEGIN IMMEDIATE`, a 30 s busy deadline,
//! file mode 0600, numbered additive migrations.
//!
//! SQLite's own busy handler sleeps longer the longer it waits, so under
//! contention a writer that just committed wins again and again (measured here:
//! two of eight processes got one commit in 10 s). The handler installed here
//! polls after short jittered sleeps instead, bounded by the same 30 s
//! deadline, so every waiter keeps its chance at the lock.

use crate::{HostIdentity, HostObservation, SCHEMA_VERSION, Store, StoreError, StoreErrorKind};
use fleetgate_core::Timestamp;
use fleetgate_core::audit::AuditEntry;
use fleetgate_core::runtime::{CohortSource, ProcessScan, RuntimeRecord, RuntimeStatus};
use fleetgate_core::worker::{
    ClaimOutcome, HeartbeatOutcome, HeartbeatRequest, RegisterOutcome, Registration, WorkerRecord, WorkerStatus,
    explain_refusal,
};
use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, Row, TransactionBehavior, params};
use std::cell::Cell;
use std::fs::{DirBuilder, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long one operation may wait for the write lock before it is `Busy`.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// Numbered migrations. Each is additive and idempotent (`IF NOT EXISTS`), and
/// all run inside one `BEGIN IMMEDIATE`, so two processes opening a fresh file
/// at once apply each exactly once.
const MIGRATIONS: &[(u32, &str, &str)] = &[
    (
        1,
        "worker registry",
        "CREATE TABLE IF NOT EXISTS workers (
        worker_identity       TEXT PRIMARY KEY NOT NULL,
        client_name           TEXT NOT NULL,
        client_instance_id    TEXT NOT NULL,
        session_id            TEXT NOT NULL,
        generation_id         TEXT NOT NULL,
        role                  TEXT NOT NULL,
        profile               TEXT NOT NULL,
        pid                   INTEGER,
        started_at            TEXT NOT NULL,
        last_heartbeat_at     TEXT NOT NULL,
        heartbeat_ttl_seconds REAL NOT NULL,
        fencing_epoch         INTEGER NOT NULL,
        status                TEXT NOT NULL,
        renewal_count         INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX IF NOT EXISTS workers_by_profile ON workers (profile, status);",
    ),
    (
        2,
        "runtime rows",
        "CREATE TABLE IF NOT EXISTS runtimes (
        runtime_id        TEXT PRIMARY KEY NOT NULL,
        namespace         TEXT NOT NULL,
        profile           TEXT NOT NULL,
        role              TEXT NOT NULL,
        remote            TEXT,
        org               TEXT,
        repo              TEXT,
        repository_root   TEXT,
        pid               INTEGER NOT NULL,
        cohort_id         TEXT,
        cohort_source     TEXT NOT NULL,
        client_provenance TEXT NOT NULL,
        boot_id           TEXT NOT NULL,
        startup_head      TEXT,
        daemon_start_head TEXT,
        transport         TEXT NOT NULL,
        registered_at     TEXT NOT NULL,
        last_heartbeat_at TEXT,
        status            TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS runtimes_by_status ON runtimes (status, profile);",
    ),
    (
        3,
        "audit log",
        "CREATE TABLE IF NOT EXISTS audit_log (
        id              INTEGER PRIMARY KEY AUTOINCREMENT,
        at              TEXT NOT NULL,
        profile         TEXT NOT NULL,
        worker_identity TEXT,
        tool            TEXT NOT NULL,
        allowed         INTEGER NOT NULL,
        blocker_kind    TEXT,
        reasons         TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS audit_by_time ON audit_log (at);",
    ),
    (
        // The runtime rows' `host_id`/`host_boot_id` columns are added by
        // ADD_COLUMNS below: SQLite has no `ADD COLUMN IF NOT EXISTS`.
        4,
        "host identity and host observations",
        "CREATE TABLE IF NOT EXISTS host_observations (
        host_id     TEXT PRIMARY KEY NOT NULL,
        boot_id     TEXT NOT NULL,
        observed_at TEXT NOT NULL,
        scan        TEXT NOT NULL
    );",
    ),
    // The audit entries' `principal` column is added by ADD_COLUMNS below.
    (5, "audit principal", ""),
];

/// Columns a migration adds to an existing table: `(version, table, column,
/// declaration)`. Each is added only when `pragma_table_info` lacks it, which
/// keeps the migration idempotent.
const ADD_COLUMNS: &[(u32, &str, &str, &str)] = &[
    (4, "runtimes", "host_id", "TEXT"),
    (4, "runtimes", "host_boot_id", "TEXT"),
    (5, "audit_log", "principal", "TEXT"),
];

const RUNTIME_COLUMNS: &str = "runtime_id, namespace, profile, role, remote, org, repo, repository_root, pid, \
     cohort_id, cohort_source, client_provenance, boot_id, startup_head, daemon_start_head, transport, registered_at, \
     last_heartbeat_at, status, host_id, host_boot_id";

// Every runtime column but the key, for the upsert.
const RUNTIME_UPDATE: &str = "namespace = excluded.namespace, profile = excluded.profile, role = excluded.role, \
     remote = excluded.remote, org = excluded.org, repo = excluded.repo, repository_root = excluded.repository_root, \
     pid = excluded.pid, cohort_id = excluded.cohort_id, cohort_source = excluded.cohort_source, \
     client_provenance = excluded.client_provenance, boot_id = excluded.boot_id, startup_head = excluded.startup_head, \
     daemon_start_head = excluded.daemon_start_head, transport = excluded.transport, \
     registered_at = excluded.registered_at, last_heartbeat_at = excluded.last_heartbeat_at, status = excluded.status, \
     host_id = excluded.host_id, host_boot_id = excluded.host_boot_id";

const AUDIT_COLUMNS: &str = "id, at, profile, worker_identity, tool, allowed, blocker_kind, reasons, principal";

const WORKER_COLUMNS: &str = "worker_identity, client_name, client_instance_id, session_id, generation_id, role, \
     profile, pid, started_at, last_heartbeat_at, heartbeat_ttl_seconds, fencing_epoch, status, renewal_count";

// The fence: zero rows changed means refused.
const RENEW_SQL: &str =
    "UPDATE workers SET last_heartbeat_at = MAX(last_heartbeat_at, ?2), renewal_count = renewal_count + 1
     WHERE worker_identity = ?1 AND fencing_epoch = ?3 AND status = 'active'
       AND (?4 IS NULL OR session_id = ?4) AND (?5 IS NULL OR generation_id = ?5)
       AND (?6 IS NULL OR client_name = ?6) AND (?7 IS NULL OR pid = ?7)";

/// A SQLite-backed store. One connection per process, serialised by a mutex:
/// every operation is a short transaction, so that costs nothing.
#[derive(Debug)]
pub struct SqliteStore {
    path: PathBuf,
    conn: Mutex<Connection>,
}

thread_local! {
    static BUSY_SINCE: Cell<Option<Instant>> = const { Cell::new(None) };
}

// SQLite calls this with the number of prior calls for the same lock wait.
fn busy_handler(attempt: i32) -> bool {
    let now = Instant::now();
    let since = BUSY_SINCE.with(|c| {
        if attempt == 0 || c.get().is_none() {
            c.set(Some(now));
        }
        c.get().unwrap_or(now)
    });
    if now.duration_since(since) >= BUSY_TIMEOUT {
        return false;
    }
    let cap_us: u64 = (20u64 << attempt.clamp(0, 6)).min(250);
    std::thread::sleep(Duration::from_micros(fastrand::u64(cap_us / 4..=cap_us)));
    true
}

// Switching a fresh file to WAL needs its exclusive lock, and SQLite answers
// BUSY at once, without the busy handler, when it could deadlock with another
// connection doing the same: processes opening one new store together would
// fail. Retried here, within the same deadline, after short jittered sleeps.
fn enter_wal(conn: &Connection) -> rusqlite::Result<String> {
    let since = Instant::now();
    loop {
        match conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)) {
            Err(e)
                if matches!(e.sqlite_error_code(), Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked))
                    && since.elapsed() < BUSY_TIMEOUT =>
            {
                std::thread::sleep(Duration::from_micros(fastrand::u64(500..=5_000)));
            }
            other => return other,
        }
    }
}

fn map_err(context: &str, e: rusqlite::Error) -> StoreError {
    let kind = match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => StoreErrorKind::Busy,
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => StoreErrorKind::Corrupt,
        Some(ErrorCode::CannotOpen) => StoreErrorKind::Unavailable,
        Some(ErrorCode::ReadOnly | ErrorCode::PermissionDenied | ErrorCode::AuthorizationForStatementDenied) => {
            StoreErrorKind::Permission
        }
        Some(ErrorCode::DiskFull | ErrorCode::SystemIoFailure) => StoreErrorKind::Io,
        _ => StoreErrorKind::Other,
    };
    StoreError::new(kind, format!("{context}: {e}"))
}

fn io_err(context: String, e: &std::io::Error) -> StoreError {
    let kind = match e.kind() {
        std::io::ErrorKind::PermissionDenied => StoreErrorKind::Permission,
        _ => StoreErrorKind::Io,
    };
    StoreError::new(kind, format!("{context}: {e}"))
}

fn ts(row: &Row<'_>, idx: usize) -> rusqlite::Result<Timestamp> {
    let text: String = row.get(idx)?;
    Timestamp::parse(&text)
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(idx, rusqlite::types::Type::Text, Box::new(e)))
}

fn worker_from_row(row: &Row<'_>) -> rusqlite::Result<WorkerRecord> {
    let status: String = row.get(12)?;
    Ok(WorkerRecord {
        worker_identity: row.get(0)?,
        client_name: row.get(1)?,
        client_instance_id: row.get(2)?,
        session_id: row.get(3)?,
        generation_id: row.get(4)?,
        role: row.get(5)?,
        profile: row.get(6)?,
        pid: row.get(7)?,
        started_at: ts(row, 8)?,
        last_heartbeat_at: ts(row, 9)?,
        heartbeat_ttl_seconds: row.get(10)?,
        fencing_epoch: row.get(11)?,
        status: WorkerStatus::parse(&status).ok_or_else(|| {
            rusqlite::Error::FromSqlConversionFailure(
                12,
                rusqlite::types::Type::Text,
                format!("unknown worker status {status:?}").into(),
            )
        })?,
        renewal_count: row.get(13)?,
    })
}

fn bad_value(idx: usize, what: String) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(idx, rusqlite::types::Type::Text, what.into())
}

fn runtime_from_row(row: &Row<'_>) -> rusqlite::Result<RuntimeRecord> {
    let source: String = row.get(10)?;
    let status: String = row.get(18)?;
    let last: Option<String> = row.get(17)?;
    Ok(RuntimeRecord {
        runtime_id: row.get(0)?,
        namespace: row.get(1)?,
        profile: row.get(2)?,
        role: row.get(3)?,
        remote: row.get(4)?,
        org: row.get(5)?,
        repo: row.get(6)?,
        repository_root: row.get(7)?,
        pid: row.get(8)?,
        cohort_id: row.get(9)?,
        cohort_source: CohortSource::parse(&source)
            .ok_or_else(|| bad_value(10, format!("unknown cohort source {source:?}")))?,
        client_provenance: row.get(11)?,
        boot_id: row.get(12)?,
        startup_head: row.get(13)?,
        daemon_start_head: row.get(14)?,
        transport: row.get(15)?,
        registered_at: ts(row, 16)?,
        last_heartbeat_at: last.map(|t| Timestamp::parse(&t).map_err(|e| bad_value(17, e.to_string()))).transpose()?,
        status: RuntimeStatus::parse(&status)
            .ok_or_else(|| bad_value(18, format!("unknown runtime status {status:?}")))?,
        host: match (row.get(19)?, row.get(20)?) {
            (Some(host_id), Some(boot_id)) => Some(HostIdentity { host_id, boot_id }),
            _ => None,
        },
    })
}

fn audit_from_row(row: &Row<'_>) -> rusqlite::Result<AuditEntry> {
    let reasons: String = row.get(7)?;
    Ok(AuditEntry {
        id: row.get(0)?,
        at: ts(row, 1)?,
        profile: row.get(2)?,
        worker_identity: row.get(3)?,
        tool: row.get(4)?,
        allowed: row.get(5)?,
        blocker_kind: row.get(6)?,
        reasons: serde_json::from_str(&reasons).map_err(|e| bad_value(7, e.to_string()))?,
        principal: row.get(8)?,
    })
}

fn observation_from_row(row: &Row<'_>) -> rusqlite::Result<HostObservation> {
    let scan: String = row.get(3)?;
    Ok(HostObservation {
        host: HostIdentity { host_id: row.get(0)?, boot_id: row.get(1)? },
        observed_at: ts(row, 2)?,
        scan: serde_json::from_str(&scan).map_err(|e| bad_value(3, e.to_string()))?,
    })
}

fn select_worker(conn: &Connection, identity: &str) -> rusqlite::Result<Option<WorkerRecord>> {
    conn.prepare_cached(&format!("SELECT {WORKER_COLUMNS} FROM workers WHERE worker_identity = ?1"))?
        .query_row([identity], worker_from_row)
        .optional()
}

impl SqliteStore {
    /// Open (creating if absent) the store at `path`. A file that is not a
    /// SQLite database, or a newer schema, fails closed and is left untouched.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        Self::open_migrated_to(path, SCHEMA_VERSION)
    }

    /// Open the store at `path` with only the first `version` migrations
    /// applied: a store as an older fleetgate left it. For the migration
    /// tests; a store newer than `version` is left as it is.
    #[doc(hidden)]
    pub fn open_at_version(path: &Path, version: u32) -> Result<Self, StoreError> {
        Self::open_migrated_to(path, version.min(SCHEMA_VERSION))
    }

    fn open_migrated_to(path: &Path, target: u32) -> Result<Self, StoreError> {
        let shown = path.display().to_string();
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)
                .map_err(|e| io_err(format!("cannot create store directory {}", parent.display()), &e))?;
        }
        match std::fs::metadata(path) {
            Ok(meta) if !meta.is_file() => {
                return Err(StoreError::new(
                    StoreErrorKind::Invalid,
                    format!("store {shown} exists and is not a regular file"),
                ));
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // Created here, 0600, before SQLite sees it; SQLite gives the
                // -wal and -shm files the same mode.
                match OpenOptions::new().write(true).create_new(true).mode(0o600).open(path) {
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(io_err(format!("cannot create store {shown}"), &e)),
                }
            }
            Err(e) => return Err(io_err(format!("cannot read store {shown}"), &e)),
        }
        let mut conn =
            Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX)
                .map_err(|e| map_err(&format!("cannot open store {shown}"), e))?;
        conn.busy_handler(Some(busy_handler)).map_err(|e| map_err(&shown, e))?;
        let mode = enter_wal(&conn).map_err(|e| map_err(&format!("store {shown} is unreadable"), e))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::new(
                StoreErrorKind::Unsupported,
                format!("store {shown} refused WAL mode (journal_mode is {mode})"),
            ));
        }
        conn.execute_batch("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;").map_err(|e| map_err(&shown, e))?;
        let store = Self { path: path.to_owned(), conn: Mutex::new(conn) };
        store.migrate(target)?;
        Ok(store)
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn with_conn<T>(&self, f: impl FnOnce(&mut Connection) -> Result<T, StoreError>) -> Result<T, StoreError> {
        let mut conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut conn)
    }

    fn migrate(&self, target: u32) -> Result<(), StoreError> {
        let shown = self.path.display().to_string();
        self.with_conn(|conn| {
            let ctx = |e| map_err(&format!("cannot migrate store {shown}"), e);
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(ctx)?;
            tx.execute_batch(
                "CREATE TABLE IF NOT EXISTS fleetgate_schema (
                    version INTEGER PRIMARY KEY NOT NULL, name TEXT NOT NULL, applied_at TEXT NOT NULL)",
            )
            .map_err(ctx)?;
            let current: u32 = tx.query_row("SELECT COALESCE(MAX(version), 0) FROM fleetgate_schema", [], |r| r.get(0)).map_err(ctx)?;
            if current > SCHEMA_VERSION {
                return Err(StoreError::new(
                    StoreErrorKind::Unsupported,
                    format!("store {shown} is at schema version {current}, newer than this fleetgate (knows {SCHEMA_VERSION})"),
                ));
            }
            for (version, name, sql) in MIGRATIONS.iter().filter(|(v, _, _)| *v > current && *v <= target) {
                tx.execute_batch(sql).map_err(ctx)?;
                for (_, table, column, decl) in ADD_COLUMNS.iter().filter(|(v, ..)| v == version) {
                    let present: bool = tx
                        .query_row(
                            "SELECT EXISTS (SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2)",
                            [table, column],
                            |r| r.get(0),
                        )
                        .map_err(ctx)?;
                    if !present {
                        tx.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {decl}")).map_err(ctx)?;
                    }
                }
                tx.execute(
                    "INSERT INTO fleetgate_schema (version, name, applied_at) VALUES (?1, ?2, strftime('%Y-%m-%dT%H:%M:%SZ','now'))",
                    params![version, name],
                )
                .map_err(ctx)?;
            }
            tx.commit().map_err(ctx)
        })
    }
}

impl Store for SqliteStore {
    fn describe(&self) -> String {
        format!("sqlite:{}", self.path.display())
    }

    fn schema_version(&self) -> Result<u32, StoreError> {
        self.with_conn(|conn| {
            conn.query_row("SELECT COALESCE(MAX(version), 0) FROM fleetgate_schema", [], |r| r.get(0))
                .map_err(|e| map_err("cannot read schema version", e))
        })
    }

    fn register(&self, registration: &Registration, now: Timestamp) -> Result<RegisterOutcome, StoreError> {
        registration
            .validate()
            .map_err(|why| StoreError::new(StoreErrorKind::Invalid, format!("invalid registration: {why}")))?;
        let row = registration.clone().into_record(now);
        self.with_conn(|conn| {
            let ctx = |e| map_err("cannot register worker", e);
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(ctx)?;
            let inserted = tx
                .prepare_cached(&format!(
                    "INSERT INTO workers ({WORKER_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)
                     ON CONFLICT (worker_identity) DO NOTHING"
                ))
                .map_err(ctx)?
                .execute(params![
                    row.worker_identity,
                    row.client_name,
                    row.client_instance_id,
                    row.session_id,
                    row.generation_id,
                    row.role,
                    row.profile,
                    row.pid,
                    row.started_at.to_string(),
                    row.last_heartbeat_at.to_string(),
                    row.heartbeat_ttl_seconds,
                    row.fencing_epoch,
                    row.status.as_str(),
                    row.renewal_count,
                ])
                .map_err(ctx)?;
            let outcome = if inserted == 1 {
                RegisterOutcome::of(&row, true)
            } else {
                let existing = select_worker(&tx, &row.worker_identity).map_err(ctx)?.ok_or_else(|| {
                    StoreError::new(StoreErrorKind::Other, "worker vanished inside its own transaction")
                })?;
                RegisterOutcome::of(&existing, false)
            };
            tx.commit().map_err(ctx)?;
            Ok(outcome)
        })
    }

    fn get_worker(&self, worker_identity: &str) -> Result<Option<WorkerRecord>, StoreError> {
        self.with_conn(|conn| select_worker(conn, worker_identity).map_err(|e| map_err("cannot read worker", e)))
    }

    fn list_workers(&self) -> Result<Vec<WorkerRecord>, StoreError> {
        self.with_conn(|conn| {
            let ctx = |e| map_err("cannot list workers", e);
            let mut stmt = conn
                .prepare_cached(&format!("SELECT {WORKER_COLUMNS} FROM workers ORDER BY started_at, worker_identity"))
                .map_err(ctx)?;
            let rows = stmt.query_map([], worker_from_row).map_err(ctx)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(ctx)
        })
    }

    fn heartbeat(&self, request: &HeartbeatRequest, now: Timestamp) -> Result<HeartbeatOutcome, StoreError> {
        let client = request.normalized_expected_client();
        let now = now.to_string();
        let args = params![
            request.worker_identity,
            now,
            request.fencing_epoch,
            request.expected_session_id,
            request.expected_generation_id,
            client,
            request.expected_pid,
        ];
        self.with_conn(|conn| {
            let ctx = |e| map_err("cannot renew worker", e);
            // Fast path: the guarded UPDATE alone. A single write statement
            // takes the write lock before it reads, so it is its own
            // immediate transaction, and the fence is its WHERE clause.
            if conn.prepare_cached(RENEW_SQL).map_err(ctx)?.execute(args).map_err(ctx)? == 1 {
                return Ok(HeartbeatOutcome::renewed());
            }
            // Refused (or the row appeared meanwhile): decide again and read the
            // reasons back inside one transaction, so the answer matches the row.
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(ctx)?;
            let outcome = if tx.prepare_cached(RENEW_SQL).map_err(ctx)?.execute(args).map_err(ctx)? == 1 {
                HeartbeatOutcome::renewed()
            } else {
                let row = select_worker(&tx, &request.worker_identity).map_err(ctx)?;
                explain_refusal(row.as_ref(), request)
            };
            tx.commit().map_err(ctx)?;
            Ok(outcome)
        })
    }

    fn claim_generation(
        &self,
        worker_identity: &str,
        generation_id: &str,
        now: Timestamp,
    ) -> Result<Option<ClaimOutcome>, StoreError> {
        if generation_id.trim().is_empty() {
            return Err(StoreError::new(StoreErrorKind::Invalid, "generation_id must not be empty"));
        }
        self.with_conn(|conn| {
            let ctx = |e| map_err("cannot claim generation", e);
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(ctx)?;
            let current: Option<(i64, i64)> = tx
                .query_row(
                    "SELECT fencing_epoch, renewal_count FROM workers WHERE worker_identity = ?1",
                    [worker_identity],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()
                .map_err(ctx)?;
            let Some((epoch, renewals)) = current else {
                return Ok(None);
            };
            tx.execute(
                "UPDATE workers SET fencing_epoch = ?2, generation_id = ?3, status = 'active',
                        last_heartbeat_at = MAX(last_heartbeat_at, ?4)
                 WHERE worker_identity = ?1",
                params![worker_identity, epoch + 1, generation_id, now.to_string()],
            )
            .map_err(ctx)?;
            tx.commit().map_err(ctx)?;
            Ok(Some(ClaimOutcome {
                worker_identity: worker_identity.to_owned(),
                previous_epoch: epoch,
                fencing_epoch: epoch + 1,
                generation_id: generation_id.to_owned(),
                renewal_count: renewals,
            }))
        })
    }

    fn deregister_worker(&self, worker_identity: &str, _now: Timestamp) -> Result<bool, StoreError> {
        self.with_conn(|conn| {
            let ctx = |e| map_err("cannot deregister worker", e);
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(ctx)?;
            let changed = tx
                .execute("UPDATE workers SET status = 'stopped' WHERE worker_identity = ?1", params![worker_identity])
                .map_err(ctx)?;
            tx.commit().map_err(ctx)?;
            Ok(changed == 1)
        })
    }

    fn upsert_runtime(&self, row: &RuntimeRecord) -> Result<(), StoreError> {
        self.with_conn(|conn| {
            let ctx = |e| map_err("cannot write runtime row", e);
            conn.prepare_cached(&format!(
                "INSERT INTO runtimes ({RUNTIME_COLUMNS})
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21)
                 ON CONFLICT (runtime_id) DO UPDATE SET {RUNTIME_UPDATE}"
            ))
            .map_err(ctx)?
            .execute(params![
                row.runtime_id,
                row.namespace,
                row.profile,
                row.role,
                row.remote,
                row.org,
                row.repo,
                row.repository_root,
                row.pid,
                row.cohort_id,
                row.cohort_source.as_str(),
                row.client_provenance,
                row.boot_id,
                row.startup_head,
                row.daemon_start_head,
                row.transport,
                row.registered_at.to_string(),
                row.last_heartbeat_at.map(|t| t.to_string()),
                row.status.as_str(),
                row.host.as_ref().map(|h| &h.host_id),
                row.host.as_ref().map(|h| &h.boot_id),
            ])
            .map_err(ctx)?;
            Ok(())
        })
    }

    fn list_runtime(&self) -> Result<Vec<RuntimeRecord>, StoreError> {
        self.with_conn(|conn| {
            let ctx = |e| map_err("cannot list runtime rows", e);
            let mut stmt = conn
                .prepare_cached(&format!("SELECT {RUNTIME_COLUMNS} FROM runtimes ORDER BY runtime_id"))
                .map_err(ctx)?;
            let rows = stmt.query_map([], runtime_from_row).map_err(ctx)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(ctx)
        })
    }

    fn touch_runtime(&self, runtime_id: &str, now: Timestamp) -> Result<bool, StoreError> {
        self.with_conn(|conn| {
            let changed = conn
                .prepare_cached(
                    "UPDATE runtimes SET last_heartbeat_at = ?2 WHERE runtime_id = ?1 AND status = 'running'",
                )
                .map_err(|e| map_err("cannot refresh runtime row", e))?
                .execute(params![runtime_id, now.to_string()])
                .map_err(|e| map_err("cannot refresh runtime row", e))?;
            Ok(changed == 1)
        })
    }

    fn mark_runtime_stopped(&self, runtime_id: &str, _now: Timestamp) -> Result<bool, StoreError> {
        self.with_conn(|conn| {
            let changed = conn
                .execute("UPDATE runtimes SET status = 'stopped' WHERE runtime_id = ?1", [runtime_id])
                .map_err(|e| map_err("cannot stop runtime row", e))?;
            Ok(changed == 1)
        })
    }

    fn append_audit(&self, entry: &AuditEntry) -> Result<i64, StoreError> {
        let reasons = serde_json::to_string(&entry.reasons)
            .map_err(|e| StoreError::new(StoreErrorKind::Invalid, format!("cannot encode audit reasons: {e}")))?;
        self.with_conn(|conn| {
            let ctx = |e| map_err("cannot append audit entry", e);
            conn.prepare_cached(
                "INSERT INTO audit_log (at, profile, worker_identity, tool, allowed, blocker_kind, reasons, principal)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )
            .map_err(ctx)?
            .execute(params![
                entry.at.to_string(),
                entry.profile,
                entry.worker_identity,
                entry.tool,
                entry.allowed,
                entry.blocker_kind,
                reasons,
                entry.principal
            ])
            .map_err(ctx)?;
            Ok(conn.last_insert_rowid())
        })
    }

    fn list_audit(&self, since: Option<Timestamp>, limit: usize) -> Result<Vec<AuditEntry>, StoreError> {
        let since = since.map_or_else(String::new, |t| t.to_string());
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.with_conn(|conn| {
            let ctx = |e| map_err("cannot list audit entries", e);
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {AUDIT_COLUMNS} FROM (SELECT {AUDIT_COLUMNS} FROM audit_log WHERE at >= ?1
                     ORDER BY id DESC LIMIT ?2) ORDER BY id"
                ))
                .map_err(ctx)?;
            let rows = stmt.query_map(params![since, limit], audit_from_row).map_err(ctx)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(ctx)
        })
    }

    fn server_now(&self) -> Result<Option<Timestamp>, StoreError> {
        // An embedded file has no clock of its own; one host uses it.
        Ok(None)
    }

    fn publish_observation(&self, host: &HostIdentity, scan: &ProcessScan, now: Timestamp) -> Result<bool, StoreError> {
        let scan = serde_json::to_string(scan)
            .map_err(|e| StoreError::new(StoreErrorKind::Invalid, format!("cannot encode process scan: {e}")))?;
        self.with_conn(|conn| {
            let ctx = |e| map_err("cannot publish host observation", e);
            // The newest observation wins: a late, older one changes nothing.
            // A new boot always wins: no process of the old boot is left to
            // write late, and the clock may have stepped back across the boot.
            let changed = conn
                .prepare_cached(
                    "INSERT INTO host_observations (host_id, boot_id, observed_at, scan) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (host_id) DO UPDATE SET
                        boot_id = excluded.boot_id, observed_at = excluded.observed_at, scan = excluded.scan
                     WHERE excluded.observed_at >= host_observations.observed_at
                        OR excluded.boot_id <> host_observations.boot_id",
                )
                .map_err(ctx)?
                .execute(params![host.host_id, host.boot_id, now.to_string(), scan])
                .map_err(ctx)?;
            Ok(changed == 1)
        })
    }

    fn list_observations(&self) -> Result<Vec<HostObservation>, StoreError> {
        self.with_conn(|conn| {
            let ctx = |e| map_err("cannot list host observations", e);
            let mut stmt = conn
                .prepare_cached("SELECT host_id, boot_id, observed_at, scan FROM host_observations ORDER BY host_id")
                .map_err(ctx)?;
            let rows = stmt.query_map([], observation_from_row).map_err(ctx)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(ctx)
        })
    }
}
