//! The SQLite engine: one file, WAL, `BEGIN IMMEDIATE`, a 30 s busy deadline,
//! file mode 0600, numbered additive migrations.
//!
//! SQLite's own busy handler sleeps longer the longer it waits, so under
//! contention a writer that just committed wins again and again (measured here:
//! two of eight processes got one commit in 10 s). The handler installed here
//! polls after short jittered sleeps instead, bounded by the same 30 s
//! deadline, so every waiter keeps its chance at the lock.

use crate::rows::{self, Columns, Value};
use crate::{HostIdentity, HostObservation, SCHEMA_VERSION, Store, StoreError, StoreErrorKind};
use fleetgate_core::Timestamp;
use fleetgate_core::audit::AuditEntry;
use fleetgate_core::runtime::{ProcessScan, RuntimeRecord};
use fleetgate_core::worker::{
    ClaimOutcome, HeartbeatOutcome, HeartbeatRequest, RegisterOutcome, Registration, WorkerRecord, explain_refusal,
};
use rusqlite::types::{ToSqlOutput, Type, Value as Sql, ValueRef};
use rusqlite::{
    Connection, ErrorCode, OpenFlags, OptionalExtension, Row, ToSql, TransactionBehavior, params, params_from_iter,
};
use std::cell::Cell;
use std::fs::{DirBuilder, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};
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

// Times are stored as `%Y-%m-%dT%H:%M:%SZ` text, booleans as integers.
impl Columns for Row<'_> {
    type Error = rusqlite::Error;

    fn opt_text(&self, i: usize) -> rusqlite::Result<Option<String>> {
        self.get(i)
    }

    fn opt_int(&self, i: usize) -> rusqlite::Result<Option<i64>> {
        self.get(i)
    }

    fn real(&self, i: usize) -> rusqlite::Result<f64> {
        self.get(i)
    }

    fn boolean(&self, i: usize) -> rusqlite::Result<bool> {
        self.get(i)
    }

    fn opt_time(&self, i: usize) -> rusqlite::Result<Option<Timestamp>> {
        let text: Option<String> = self.get(i)?;
        text.map(|t| Timestamp::parse(&t).map_err(|e| self.invalid(i, e.to_string()))).transpose()
    }

    fn invalid(&self, i: usize, why: String) -> rusqlite::Error {
        rusqlite::Error::FromSqlConversionFailure(i, Type::Text, why.into())
    }
}

impl ToSql for Value<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Value::Text(Some(text)) => ToSqlOutput::Borrowed(ValueRef::Text(text.as_bytes())),
            Value::Int(Some(n)) => ToSqlOutput::Owned(Sql::Integer(*n)),
            Value::Real(x) => ToSqlOutput::Owned(Sql::Real(*x)),
            Value::Bool(b) => ToSqlOutput::Owned(Sql::Integer(i64::from(*b))),
            Value::Time(Some(t)) => ToSqlOutput::Owned(Sql::Text(t.to_string())),
            Value::Text(None) | Value::Int(None) | Value::Time(None) => ToSqlOutput::Owned(Sql::Null),
        })
    }
}

/// The shared statements, numbered `?N`.
static SQL: LazyLock<crate::sql::Sql> = LazyLock::new(|| crate::sql::Sql::numbered('?'));

fn select_worker(conn: &Connection, identity: &str) -> rusqlite::Result<Option<WorkerRecord>> {
    conn.prepare_cached(&SQL.select_worker)?.query_row([identity], |r| rows::worker(r)).optional()
}

/// Every row `sql` selects, decoded by `decode`.
fn select_all<T>(
    conn: &Connection,
    sql: &str,
    decode: impl FnMut(&Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<Vec<T>> {
    conn.prepare_cached(sql)?.query_map([], decode)?.collect()
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
            conn.query_row(&SQL.schema_version, [], |r| r.get(0)).map_err(|e| map_err("cannot read schema version", e))
        })
    }

    fn register(&self, registration: &Registration, now: Timestamp) -> Result<RegisterOutcome, StoreError> {
        let row = rows::validated(registration, now)?;
        self.with_conn(|conn| {
            let ctx = |e| map_err("cannot register worker", e);
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(ctx)?;
            let inserted = tx
                .prepare_cached(&SQL.insert_worker)
                .map_err(ctx)?
                .execute(params_from_iter(rows::worker_values(&row)))
                .map_err(ctx)?;
            let existing = if inserted == 1 { None } else { select_worker(&tx, &row.worker_identity).map_err(ctx)? };
            tx.commit().map_err(ctx)?;
            rows::registered(&row, inserted == 1, existing)
        })
    }

    fn get_worker(&self, worker_identity: &str) -> Result<Option<WorkerRecord>, StoreError> {
        self.with_conn(|conn| select_worker(conn, worker_identity).map_err(|e| map_err("cannot read worker", e)))
    }

    fn list_workers(&self) -> Result<Vec<WorkerRecord>, StoreError> {
        self.with_conn(|conn| {
            select_all(conn, &SQL.list_workers, |r| rows::worker(r)).map_err(|e| map_err("cannot list workers", e))
        })
    }

    fn heartbeat(&self, request: &HeartbeatRequest, now: Timestamp) -> Result<HeartbeatOutcome, StoreError> {
        let args = rows::renewal_values(request, now);
        self.with_conn(|conn| {
            let ctx = |e| map_err("cannot renew worker", e);
            let renew = |conn: &Connection| conn.prepare_cached(RENEW_SQL)?.execute(params_from_iter(&args));
            // Fast path: the guarded UPDATE alone. A single write statement
            // takes the write lock before it reads, so it is its own
            // immediate transaction, and the fence is its WHERE clause.
            if renew(conn).map_err(ctx)? == 1 {
                return Ok(HeartbeatOutcome::renewed());
            }
            // Refused (or the row appeared meanwhile): decide again and read the
            // reasons back inside one transaction, so the answer matches the row.
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(ctx)?;
            let outcome = if renew(&tx).map_err(ctx)? == 1 {
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
        rows::check_generation(generation_id)?;
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
            Ok(Some(rows::claimed(worker_identity, generation_id, epoch, renewals)))
        })
    }

    fn deregister_worker(&self, worker_identity: &str, _now: Timestamp) -> Result<bool, StoreError> {
        self.with_conn(|conn| {
            let changed = conn
                .execute(&SQL.deregister_worker, [worker_identity])
                .map_err(|e| map_err("cannot deregister worker", e))?;
            Ok(changed == 1)
        })
    }

    fn upsert_runtime(&self, row: &RuntimeRecord) -> Result<(), StoreError> {
        self.with_conn(|conn| {
            let ctx = |e| map_err("cannot write runtime row", e);
            conn.prepare_cached(&SQL.upsert_runtime)
                .map_err(ctx)?
                .execute(params_from_iter(rows::runtime_values(row)))
                .map_err(ctx)?;
            Ok(())
        })
    }

    fn list_runtime(&self) -> Result<Vec<RuntimeRecord>, StoreError> {
        self.with_conn(|conn| {
            select_all(conn, &SQL.list_runtime, |r| rows::runtime(r))
                .map_err(|e| map_err("cannot list runtime rows", e))
        })
    }

    fn touch_runtime(&self, runtime_id: &str, now: Timestamp) -> Result<bool, StoreError> {
        self.with_conn(|conn| {
            let ctx = |e| map_err("cannot refresh runtime row", e);
            let changed =
                conn.prepare_cached(&SQL.touch_runtime).map_err(ctx)?.execute(params![runtime_id, now.to_string()]);
            Ok(changed.map_err(ctx)? == 1)
        })
    }

    fn mark_runtime_stopped(&self, runtime_id: &str, _now: Timestamp) -> Result<bool, StoreError> {
        self.with_conn(|conn| {
            let changed =
                conn.execute(&SQL.stop_runtime, [runtime_id]).map_err(|e| map_err("cannot stop runtime row", e))?;
            Ok(changed == 1)
        })
    }

    fn append_audit(&self, entry: &AuditEntry) -> Result<i64, StoreError> {
        let values = rows::audit_values(entry)?;
        self.with_conn(|conn| {
            let ctx = |e| map_err("cannot append audit entry", e);
            conn.prepare_cached(&SQL.append_audit)
                .map_err(ctx)?
                .query_row(params_from_iter(values), |r| r.get(0))
                .map_err(ctx)
        })
    }

    fn list_audit(&self, since: Option<Timestamp>, limit: usize) -> Result<Vec<AuditEntry>, StoreError> {
        // Text in one format orders as time; every entry is at or after "".
        let since = since.map_or_else(String::new, |t| t.to_string());
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let columns = rows::names(&rows::AUDIT);
        self.with_conn(|conn| {
            let ctx = |e| map_err("cannot list audit entries", e);
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {columns} FROM (SELECT {columns} FROM audit_log WHERE at >= ?1
                     ORDER BY id DESC LIMIT ?2) ORDER BY id"
                ))
                .map_err(ctx)?;
            let rows = stmt.query_map(params![since, limit], |r| rows::audit(r)).map_err(ctx)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(ctx)
        })
    }

    fn server_now(&self) -> Result<Option<Timestamp>, StoreError> {
        // An embedded file has no clock of its own; one host uses it.
        Ok(None)
    }

    fn publish_observation(&self, host: &HostIdentity, scan: &ProcessScan, now: Timestamp) -> Result<bool, StoreError> {
        let values = rows::observation_values(host, scan, now)?;
        self.with_conn(|conn| {
            let ctx = |e| map_err("cannot publish host observation", e);
            let changed = conn.prepare_cached(&SQL.publish_observation).map_err(ctx)?.execute(params_from_iter(values));
            Ok(changed.map_err(ctx)? == 1)
        })
    }

    fn list_observations(&self) -> Result<Vec<HostObservation>, StoreError> {
        self.with_conn(|conn| {
            select_all(conn, &SQL.list_observations, |r| rows::observation(r))
                .map_err(|e| map_err("cannot list host observations", e))
        })
    }
}
