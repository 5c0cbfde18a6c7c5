//! The PostgreSQL engine, for fleets across hosts: the same contract and the
//! same migration numbers as [`crate::sqlite`], one connection per process.
//!
//! * **Transactions.** Every multi-statement operation is one transaction at
//!   READ COMMITTED; the rows it decides on are locked (`SELECT … FOR UPDATE`)
//!   before it writes. A renewal is one guarded `UPDATE` whose `WHERE` carries
//!   the epoch and every expectation; a waiting `UPDATE` re-checks its `WHERE`
//!   against the row a concurrent claim committed, so it can never renew past
//!   that claim.
//! * **Migrations** run in one transaction under `pg_advisory_xact_lock`, so
//!   two processes migrating one database at once apply each exactly once.
//! * **Time.** Timestamps are `timestamptz`: the server can compare and age
//!   them itself (`now() - last_heartbeat_at`) for an operator's query, and
//!   ordering is chronological by type, not by text. Values are whole
//!   seconds, written and read as [`fleetgate_core::Timestamp`].
//! * **Text.** Keys that rows are ordered by (`worker_identity`,
//!   `runtime_id`, `host_id`) are `COLLATE "C"`, so listings come back in the
//!   byte order SQLite uses, whatever the database's locale. JSON columns are
//!   `TEXT` holding serde's output, byte for byte as in SQLite (`jsonb` would
//!   refuse a `\u0000` escape that SQLite keeps).
//! * **Connection loss.** A lost connection or a restarting server is
//!   [`StoreErrorKind::Unavailable`] (transient); the next call reconnects,
//!   after a jittered backoff while the server keeps refusing. Reads and
//!   idempotent writes retry once on a fresh connection; a renewal, a claim,
//!   a registration and an audit append never do, since their first attempt
//!   may have committed. Nothing here panics on a server's answer.
//! * **Secrets.** Every message names the store by [`redact_url`], and the
//!   password is scrubbed from the server's own texts too.
//!
//! TLS is not part of this build: `sslmode=require` is refused at open.

use crate::rows::{self, Columns, Value};
use crate::sql::Sql;
use crate::{HostIdentity, HostObservation, SCHEMA_VERSION, Store, StoreError, StoreErrorKind, redact_url};
use ::postgres::config::SslMode;
use ::postgres::types::{FromSql, ToSql};
use ::postgres::{Client, Config, GenericClient, NoTls, Row, Statement};
use fleetgate_core::Timestamp;
use fleetgate_core::audit::AuditEntry;
use fleetgate_core::runtime::{ProcessScan, RuntimeRecord};
use fleetgate_core::worker::{
    ClaimOutcome, HeartbeatOutcome, HeartbeatRequest, RegisterOutcome, Registration, WorkerRecord, explain_refusal,
};
use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long one statement may wait for a row lock before it is `Busy`: the
/// same deadline as SQLite's write lock.
pub const LOCK_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a connection attempt may take, unless the URL says otherwise.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long sent data may stay unacknowledged before the connection counts
/// as lost (Linux `TCP_USER_TIMEOUT`), unless the URL says otherwise: a
/// vanished server must surface as `Unavailable`, not as a call that hangs.
pub const TCP_USER_TIMEOUT: Duration = Duration::from_secs(30);

// Reconnect backoff while the server keeps refusing: doubling, jittered.
const BACKOFF_FIRST: Duration = Duration::from_millis(200);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

// The advisory lock every migrating process takes: "fleetgat" in ASCII.
const MIGRATION_LOCK: i64 = 0x666c_6565_7467_6174;

/// Numbered migrations, the same numbers and meaning as SQLite's. Each is
/// additive and idempotent (`IF NOT EXISTS`); all run in one transaction
/// under the migration lock.
const MIGRATIONS: &[(u32, &str, &str)] = &[
    (
        1,
        "worker registry",
        r#"CREATE TABLE IF NOT EXISTS workers (
        worker_identity       TEXT COLLATE "C" PRIMARY KEY,
        client_name           TEXT NOT NULL,
        client_instance_id    TEXT NOT NULL,
        session_id            TEXT NOT NULL,
        generation_id         TEXT NOT NULL,
        role                  TEXT NOT NULL,
        profile               TEXT NOT NULL,
        pid                   BIGINT,
        started_at            TIMESTAMPTZ NOT NULL,
        last_heartbeat_at     TIMESTAMPTZ NOT NULL,
        heartbeat_ttl_seconds DOUBLE PRECISION NOT NULL,
        fencing_epoch         BIGINT NOT NULL,
        status                TEXT NOT NULL,
        renewal_count         BIGINT NOT NULL DEFAULT 0
    );
    CREATE INDEX IF NOT EXISTS workers_by_profile ON workers (profile, status);"#,
    ),
    (
        2,
        "runtime rows",
        r#"CREATE TABLE IF NOT EXISTS runtimes (
        runtime_id        TEXT COLLATE "C" PRIMARY KEY,
        namespace         TEXT NOT NULL,
        profile           TEXT NOT NULL,
        role              TEXT NOT NULL,
        remote            TEXT,
        org               TEXT,
        repo              TEXT,
        repository_root   TEXT,
        pid               BIGINT NOT NULL,
        cohort_id         TEXT,
        cohort_source     TEXT NOT NULL,
        client_provenance TEXT NOT NULL,
        boot_id           TEXT NOT NULL,
        startup_head      TEXT,
        daemon_start_head TEXT,
        transport         TEXT NOT NULL,
        registered_at     TIMESTAMPTZ NOT NULL,
        last_heartbeat_at TIMESTAMPTZ,
        status            TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS runtimes_by_status ON runtimes (status, profile);"#,
    ),
    (
        3,
        "audit log",
        "CREATE TABLE IF NOT EXISTS audit_log (
        id              BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        at              TIMESTAMPTZ NOT NULL,
        profile         TEXT NOT NULL,
        worker_identity TEXT,
        tool            TEXT NOT NULL,
        allowed         BOOLEAN NOT NULL,
        blocker_kind    TEXT,
        reasons         TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS audit_by_time ON audit_log (at);",
    ),
    (
        4,
        "host identity and host observations",
        r#"CREATE TABLE IF NOT EXISTS host_observations (
        host_id     TEXT COLLATE "C" PRIMARY KEY,
        boot_id     TEXT NOT NULL,
        observed_at TIMESTAMPTZ NOT NULL,
        scan        TEXT NOT NULL
    );
    ALTER TABLE runtimes ADD COLUMN IF NOT EXISTS host_id TEXT, ADD COLUMN IF NOT EXISTS host_boot_id TEXT;"#,
    ),
    (5, "audit principal", "ALTER TABLE audit_log ADD COLUMN IF NOT EXISTS principal TEXT;"),
];

/// The shared statements, numbered `$N`.
static SQL: LazyLock<Sql> = LazyLock::new(|| Sql::numbered('$'));

/// A worker row, locked until the transaction ends.
static LOCK_WORKER: LazyLock<String> = LazyLock::new(|| format!("{} FOR UPDATE", SQL.select_worker));

// The fence: zero rows changed means refused. The casts type the optional
// expectations for the planner; a NULL expectation is skipped.
const RENEW: &str =
    "UPDATE workers SET last_heartbeat_at = GREATEST(last_heartbeat_at, $2), renewal_count = renewal_count + 1
     WHERE worker_identity = $1 AND fencing_epoch = $3 AND status = 'active'
       AND ($4::text IS NULL OR session_id = $4) AND ($5::text IS NULL OR generation_id = $5)
       AND ($6::text IS NULL OR client_name = $6) AND ($7::bigint IS NULL OR pid = $7)";

const LOCK_EPOCH: &str = "SELECT fencing_epoch, renewal_count FROM workers WHERE worker_identity = $1 FOR UPDATE";
const CLAIM: &str = "UPDATE workers SET fencing_epoch = $2, generation_id = $3, status = 'active',
        last_heartbeat_at = GREATEST(last_heartbeat_at, $4)
     WHERE worker_identity = $1";

/// The newest `$2` entries at or after `$1` (NULL: since the first), oldest first.
static LIST_AUDIT: LazyLock<String> = LazyLock::new(|| {
    let columns = rows::names(&rows::AUDIT);
    format!(
        "SELECT {columns} FROM (SELECT {columns} FROM audit_log WHERE ($1::timestamptz IS NULL OR at >= $1)
         ORDER BY id DESC LIMIT $2) recent ORDER BY id"
    )
});

/// A PostgreSQL-backed store: one connection, serialised by a mutex like
/// SQLite's; every operation is a short transaction.
pub struct PostgresStore {
    /// The URL with its password replaced by `***`.
    shown: String,
    config: Config,
    /// The password, kept only to scrub it from the server's messages.
    secret: Option<String>,
    link: Mutex<Link>,
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore").field("url", &self.shown).finish_non_exhaustive()
    }
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        // Closing the client blocks on its runtime too: off any async runtime.
        let link = std::mem::replace(
            self.link.get_mut().unwrap_or_else(|e| e.into_inner()),
            Link::Down { retry_at: Instant::now(), backoff: BACKOFF_FIRST, cause: "closed".into() },
        );
        let _ = off_async_runtime(move || {
            drop(link);
            Ok(())
        });
    }
}

/// The connection, or why there is none and when to try again.
#[expect(clippy::large_enum_variant, reason = "one per store, never moved around")]
enum Link {
    Up(Session),
    Down { retry_at: Instant, backoff: Duration, cause: String },
}

/// A live connection and the statements prepared on it.
struct Session {
    client: Client,
    statements: HashMap<&'static str, Statement>,
}

impl Session {
    /// The statement for `sql`, prepared once per connection.
    fn prepared(&mut self, sql: &'static str) -> Result<Statement, ::postgres::Error> {
        if let Some(statement) = self.statements.get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.client.prepare(sql)?;
        self.statements.insert(sql, statement.clone());
        Ok(statement)
    }
}

/// Why an operation failed, before it is named for the caller.
pub(crate) enum Fail {
    /// The server or the connection.
    Pg(::postgres::Error),
    /// A row that does not read as a fleetgate row.
    Row(String),
    /// Already a store error (a newer schema, an unencodable value).
    Store(StoreError),
}

impl From<::postgres::Error> for Fail {
    fn from(e: ::postgres::Error) -> Self {
        Self::Pg(e)
    }
}

impl From<StoreError> for Fail {
    fn from(e: StoreError) -> Self {
        Self::Store(e)
    }
}

/// May an operation be tried again on a fresh connection after its first
/// attempt lost the connection? Only when a second run cannot change the
/// answer or the data: the first attempt may have committed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Retry {
    Idempotent,
    Never,
}

fn kind_of(e: &::postgres::Error) -> StoreErrorKind {
    if let Some(code) = e.code() {
        let code = code.code();
        return match code {
            // Connection exceptions; admin or crash shutdown; the server is
            // starting or stopping; too many connections; out of memory.
            _ if code.starts_with("08") => StoreErrorKind::Unavailable,
            "57P01" | "57P02" | "57P03" | "53300" | "53200" => StoreErrorKind::Unavailable,
            // Serialization failure, deadlock, lock timeout, cancelled wait.
            "40001" | "40P01" | "55P03" | "57014" => StoreErrorKind::Busy,
            "53100" => StoreErrorKind::Io,
            _ if code.starts_with("28") || code == "42501" => StoreErrorKind::Permission,
            // No such database; a value the columns refuse.
            "3D000" => StoreErrorKind::Invalid,
            _ if code.starts_with("22") || code.starts_with("23") => StoreErrorKind::Invalid,
            // Damaged data or index; a table or column the schema should have.
            "XX001" | "XX002" | "42P01" | "42703" => StoreErrorKind::Corrupt,
            _ => StoreErrorKind::Other,
        };
    }
    // No SQLSTATE: the client library's own kinds are private, so tell them
    // by what they carry. An I/O cause, a closed connection or a timeout all
    // mean the server is not reachable right now.
    let io = std::error::Error::source(e).is_some_and(|s| s.downcast_ref::<std::io::Error>().is_some());
    let text = e.to_string();
    if io || e.is_closed() || text.starts_with("timeout") || text.starts_with("error connecting") {
        StoreErrorKind::Unavailable
    } else if text.starts_with("authentication") {
        StoreErrorKind::Permission
    } else {
        StoreErrorKind::Other
    }
}

/// The server's message on one line, with its SQLSTATE, or the client's error
/// with its causes.
fn detail(e: &::postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{} [SQLSTATE {}]", db.to_string().replace('\n', "; "), db.code().code());
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

fn sql_time(t: Timestamp) -> Result<SystemTime, StoreError> {
    let secs = t.unix();
    let magnitude = Duration::from_secs(secs.unsigned_abs());
    if secs >= 0 { UNIX_EPOCH.checked_add(magnitude) } else { UNIX_EPOCH.checked_sub(magnitude) }
        .ok_or_else(|| StoreError::new(StoreErrorKind::Invalid, format!("timestamp {secs} is out of range")))
}

/// Whole seconds, rounded down (the server's `now()` has microseconds).
fn from_sql_time(t: SystemTime) -> Timestamp {
    let secs = match t.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_secs()).unwrap_or(i64::MAX),
        Err(before) => {
            let d = before.duration();
            let whole = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
            -whole - i64::from(d.subsec_nanos() > 0)
        }
    };
    Timestamp::from_unix(secs)
}

fn get<'a, T: FromSql<'a>>(row: &'a Row, idx: usize) -> Result<T, Fail> {
    row.try_get(idx).map_err(|e| Fail::Row(format!("column {}: {}", idx, detail(&e))))
}

// Times are `timestamptz`, read as whole seconds.
impl Columns for Row {
    type Error = Fail;

    fn opt_text(&self, i: usize) -> Result<Option<String>, Fail> {
        get(self, i)
    }

    fn opt_int(&self, i: usize) -> Result<Option<i64>, Fail> {
        get(self, i)
    }

    fn real(&self, i: usize) -> Result<f64, Fail> {
        get(self, i)
    }

    fn boolean(&self, i: usize) -> Result<bool, Fail> {
        get(self, i)
    }

    fn opt_time(&self, i: usize) -> Result<Option<Timestamp>, Fail> {
        Ok(get::<Option<SystemTime>>(self, i)?.map(from_sql_time))
    }

    fn invalid(&self, i: usize, why: String) -> Fail {
        Fail::Row(format!("column {i}: {why}"))
    }
}

/// A parameter as the PostgreSQL type of its column.
enum Bound<'a> {
    Text(Option<Cow<'a, str>>),
    Int(Option<i64>),
    Real(f64),
    Bool(bool),
    Time(Option<SystemTime>),
}

/// A statement's parameters, bound from [`Value`]s.
struct Args<'a>(Vec<Bound<'a>>);

impl<'a> Args<'a> {
    /// Bound in order; a time out of the server's range is `Invalid`.
    fn of(values: impl IntoIterator<Item = Value<'a>>) -> Result<Self, StoreError> {
        let bind = |value| {
            Ok(match value {
                Value::Text(v) => Bound::Text(v),
                Value::Int(v) => Bound::Int(v),
                Value::Real(v) => Bound::Real(v),
                Value::Bool(v) => Bound::Bool(v),
                Value::Time(v) => Bound::Time(v.map(sql_time).transpose()?),
            })
        };
        values.into_iter().map(bind).collect::<Result<_, StoreError>>().map(Self)
    }

    fn refs(&self) -> Vec<&(dyn ToSql + Sync)> {
        self.0
            .iter()
            .map(|bound| -> &(dyn ToSql + Sync) {
                match bound {
                    Bound::Text(v) => v,
                    Bound::Int(v) => v,
                    Bound::Real(v) => v,
                    Bound::Bool(v) => v,
                    Bound::Time(v) => v,
                }
            })
            .collect()
    }
}

fn select_worker(c: &mut impl GenericClient, sql: &Statement, id: &str) -> Result<Option<WorkerRecord>, Fail> {
    c.query_opt(sql, &[&id])?.as_ref().map(rows::worker).transpose()
}

/// Every row `sql` selects, decoded by `decode`.
fn select_all<T>(
    c: &mut impl GenericClient,
    sql: &Statement,
    decode: fn(&Row) -> Result<T, Fail>,
) -> Result<Vec<T>, Fail> {
    c.query(sql, &[])?.iter().map(decode).collect()
}

/// Run `f` here, or, when this thread is driving an async runtime, on a
/// scoped thread of its own. The client library blocks on a runtime of its
/// own, which panics inside another; SQLite's calls merely block, so callers
/// may not know the difference and must not crash on it.
fn off_async_runtime<T: Send>(f: impl FnOnce() -> Result<T, StoreError> + Send) -> Result<T, StoreError> {
    if tokio::runtime::Handle::try_current().is_err() {
        return f();
    }
    std::thread::scope(|scope| {
        scope.spawn(f).join().unwrap_or_else(|_| {
            Err(StoreError::new(StoreErrorKind::Other, "a store call panicked on its helper thread"))
        })
    })
}

fn jittered(d: Duration) -> Duration {
    d.mul_f64(0.75 + fastrand::f64() / 2.0)
}

impl PostgresStore {
    /// Connect to the store at `url` (`postgres://user:password@host:port/db`)
    /// and bring its schema up to date. A schema newer than this build fails
    /// closed with `Unsupported`; an unreachable server is `Unavailable`.
    pub fn open(url: &str) -> Result<Self, StoreError> {
        off_async_runtime(|| Self::open_migrated_to(url, SCHEMA_VERSION))
    }

    /// Connect and apply only the first `version` migrations: a store as an
    /// older fleetgate left it. For the migration tests.
    #[doc(hidden)]
    pub fn open_at_version(url: &str, version: u32) -> Result<Self, StoreError> {
        off_async_runtime(|| Self::open_migrated_to(url, version.min(SCHEMA_VERSION)))
    }

    fn open_migrated_to(url: &str, target: u32) -> Result<Self, StoreError> {
        let shown = redact_url(url.trim());
        let mut config: Config = url.trim().parse().map_err(|e: ::postgres::Error| {
            // The parser may quote the part it refused; keep the URL out.
            StoreError::new(StoreErrorKind::Invalid, format!("invalid store URL {shown}: {}", detail(&e)))
        })?;
        if config.get_ssl_mode() == SslMode::Require {
            return Err(StoreError::new(
                StoreErrorKind::Unsupported,
                format!("store {shown} requires TLS, which this fleetgate build does not include"),
            ));
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_tcp_user_timeout().is_none() {
            config.tcp_user_timeout(TCP_USER_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("fleetgate");
        }
        let secret = config.get_password().map(|p| String::from_utf8_lossy(p).into_owned()).filter(|p| !p.is_empty());
        let down = Link::Down { retry_at: Instant::now(), backoff: BACKOFF_FIRST, cause: String::new() };
        let store = Self { shown, config, secret, link: Mutex::new(down) };
        let mut session = store.connect()?;
        store.migrate(&mut session, target).map_err(|f| store.name("cannot migrate store", f))?;
        *store.link.lock().unwrap_or_else(|e| e.into_inner()) = Link::Up(session);
        Ok(store)
    }

    /// The store's name in messages: the URL without its password.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    fn scrub(&self, text: String) -> String {
        match &self.secret {
            Some(secret) if text.contains(secret.as_str()) => text.replace(secret.as_str(), "***"),
            _ => text,
        }
    }

    fn name(&self, context: &str, fail: Fail) -> StoreError {
        let (kind, text) = match fail {
            Fail::Pg(e) => (kind_of(&e), detail(&e)),
            Fail::Row(text) => (StoreErrorKind::Corrupt, format!("unreadable row: {text}")),
            Fail::Store(e) => return StoreError::new(e.kind(), self.scrub(e.to_string())),
        };
        StoreError::new(kind, self.scrub(format!("{context} ({}): {text}", self.shown)))
    }

    fn connect(&self) -> Result<Session, StoreError> {
        let mut client = self.config.connect(NoTls).map_err(|e| self.name("cannot connect to store", Fail::Pg(e)))?;
        // A row-lock wait is bounded like SQLite's busy wait; a process that
        // stalls inside a transaction cannot hold others' rows for long.
        client
            .batch_execute(&format!(
                "SET lock_timeout = '{}s'; SET idle_in_transaction_session_timeout = '60s'",
                LOCK_TIMEOUT.as_secs()
            ))
            .map_err(|e| self.name("cannot set up store session", Fail::Pg(e)))?;
        Ok(Session { client, statements: HashMap::new() })
    }

    fn migrate(&self, session: &mut Session, target: u32) -> Result<(), Fail> {
        let mut tx = session.client.transaction()?;
        // Taken before anything is read or created: concurrent
        // `CREATE TABLE IF NOT EXISTS` would otherwise collide in the catalog.
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
        tx.batch_execute(
            "CREATE TABLE IF NOT EXISTS fleetgate_schema (
                version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
        )?;
        let current: i32 = get(&tx.query_one(&SQL.schema_version, &[])?, 0)?;
        let current = u32::try_from(current).unwrap_or(0);
        if current > SCHEMA_VERSION {
            return Err(Fail::Store(StoreError::new(
                StoreErrorKind::Unsupported,
                format!(
                    "store {} is at schema version {current}, newer than this fleetgate (knows {SCHEMA_VERSION})",
                    self.shown
                ),
            )));
        }
        for (version, name, sql) in MIGRATIONS.iter().filter(|(v, _, _)| *v > current && *v <= target) {
            tx.batch_execute(sql)?;
            let version = i32::try_from(*version).unwrap_or(i32::MAX);
            tx.execute(
                "INSERT INTO fleetgate_schema (version, name, applied_at) VALUES ($1, $2, now())",
                &[&version, name],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Run `op` on the connection, reconnecting first when it was lost.
    fn run<T: Send>(
        &self,
        context: &str,
        retry: Retry,
        op: impl FnMut(&mut Session) -> Result<T, Fail> + Send,
    ) -> Result<T, StoreError> {
        off_async_runtime(|| self.run_here(context, retry, op))
    }

    fn run_here<T>(
        &self,
        context: &str,
        retry: Retry,
        mut op: impl FnMut(&mut Session) -> Result<T, Fail>,
    ) -> Result<T, StoreError> {
        let mut link = self.link.lock().unwrap_or_else(|e| e.into_inner());
        let mut tries_left = if retry == Retry::Idempotent { 2 } else { 1 };
        loop {
            tries_left -= 1;
            let session = self.session(&mut link)?;
            let fail = match op(session) {
                Ok(value) => return Ok(value),
                Err(fail) => fail,
            };
            let closed = session.client.is_closed();
            let err = self.name(context, fail);
            if closed || err.kind() == StoreErrorKind::Unavailable {
                // The next attempt starts on a fresh connection, at once.
                *link = Link::Down { retry_at: Instant::now(), backoff: BACKOFF_FIRST, cause: err.to_string() };
                if tries_left > 0 {
                    continue;
                }
            }
            return Err(err);
        }
    }

    /// The live session, connecting when there is none and the backoff allows.
    fn session<'a>(&self, link: &'a mut Link) -> Result<&'a mut Session, StoreError> {
        if let Link::Up(session) = link
            && session.client.is_closed()
        {
            *link = Link::Down { retry_at: Instant::now(), backoff: BACKOFF_FIRST, cause: "connection closed".into() };
        }
        if let Link::Down { retry_at, backoff, cause } = link {
            let now = Instant::now();
            if now < *retry_at {
                return Err(StoreError::new(
                    StoreErrorKind::Unavailable,
                    format!(
                        "store {} is unreachable ({cause}); next reconnect in {} ms",
                        self.shown,
                        retry_at.duration_since(now).as_millis()
                    ),
                ));
            }
            match self.connect() {
                Ok(session) => *link = Link::Up(session),
                Err(e) => {
                    *link = Link::Down {
                        retry_at: now + jittered(*backoff),
                        backoff: (*backoff * 2).min(BACKOFF_MAX),
                        cause: e.to_string(),
                    };
                    return Err(e);
                }
            }
        }
        match link {
            Link::Up(session) => Ok(session),
            Link::Down { cause, .. } => Err(StoreError::new(
                StoreErrorKind::Unavailable,
                format!("store {} is unreachable ({cause})", self.shown),
            )),
        }
    }
}

impl Store for PostgresStore {
    fn describe(&self) -> String {
        self.shown.clone()
    }

    fn schema_version(&self) -> Result<u32, StoreError> {
        self.run("cannot read schema version", Retry::Idempotent, |s| {
            let version: i32 = get(&s.client.query_one(&SQL.schema_version, &[])?, 0)?;
            Ok(u32::try_from(version).unwrap_or(0))
        })
    }

    fn register(&self, registration: &Registration, now: Timestamp) -> Result<RegisterOutcome, StoreError> {
        let row = rows::validated(registration, now)?;
        let args = Args::of(rows::worker_values(&row))?;
        // Not retried: a first attempt that committed would come back `created: false`.
        self.run("cannot register worker", Retry::Never, |s| {
            let (insert, select) = (s.prepared(&SQL.insert_worker)?, s.prepared(&SQL.select_worker)?);
            let mut tx = s.client.transaction()?;
            let inserted = tx.execute(&insert, &args.refs())? == 1;
            let existing = if inserted { None } else { select_worker(&mut tx, &select, &row.worker_identity)? };
            tx.commit()?;
            Ok(rows::registered(&row, inserted, existing)?)
        })
    }

    fn get_worker(&self, worker_identity: &str) -> Result<Option<WorkerRecord>, StoreError> {
        self.run("cannot read worker", Retry::Idempotent, |s| {
            let select = s.prepared(&SQL.select_worker)?;
            select_worker(&mut s.client, &select, worker_identity)
        })
    }

    fn list_workers(&self) -> Result<Vec<WorkerRecord>, StoreError> {
        self.run("cannot list workers", Retry::Idempotent, |s| {
            let list = s.prepared(&SQL.list_workers)?;
            select_all(&mut s.client, &list, rows::worker)
        })
    }

    fn heartbeat(&self, request: &HeartbeatRequest, now: Timestamp) -> Result<HeartbeatOutcome, StoreError> {
        let args = Args::of(rows::renewal_values(request, now))?;
        let args = args.refs();
        // Not retried: a renewal that committed before the connection broke
        // would be counted twice.
        self.run("cannot renew worker", Retry::Never, |s| {
            let renew = s.prepared(RENEW)?;
            // Fast path: the guarded UPDATE alone is its own transaction,
            // and the fence is its WHERE clause.
            if s.client.execute(&renew, &args)? == 1 {
                return Ok(HeartbeatOutcome::renewed());
            }
            // Refused (or the row appeared meanwhile): lock the row, decide
            // again, and read the reasons from the row the UPDATE was judged
            // against, so the answer matches the row.
            let lock = s.prepared(&LOCK_WORKER)?;
            let mut tx = s.client.transaction()?;
            let locked = select_worker(&mut tx, &lock, &request.worker_identity)?;
            let outcome = if tx.execute(&renew, &args)? == 1 {
                HeartbeatOutcome::renewed()
            } else {
                // A row registered between the two statements was not
                // locked by the first: read it (locked) before explaining.
                let row = match locked {
                    Some(row) => Some(row),
                    None => select_worker(&mut tx, &lock, &request.worker_identity)?,
                };
                explain_refusal(row.as_ref(), request)
            };
            tx.commit()?;
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
        let now = sql_time(now)?;
        // Not retried: a claim that committed would bump the epoch twice.
        self.run("cannot claim generation", Retry::Never, |s| {
            let (lock, claim) = (s.prepared(LOCK_EPOCH)?, s.prepared(CLAIM)?);
            let mut tx = s.client.transaction()?;
            // The row lock makes every renewal wait for this claim and then
            // judge its WHERE against the new epoch.
            let Some(current) = tx.query_opt(&lock, &[&worker_identity])? else {
                return Ok(None);
            };
            let (epoch, renewals): (i64, i64) = (get(&current, 0)?, get(&current, 1)?);
            tx.execute(&claim, &[&worker_identity, &(epoch + 1), &generation_id, &now])?;
            tx.commit()?;
            Ok(Some(rows::claimed(worker_identity, generation_id, epoch, renewals)))
        })
    }

    fn deregister_worker(&self, worker_identity: &str, _now: Timestamp) -> Result<bool, StoreError> {
        self.run("cannot deregister worker", Retry::Idempotent, |s| {
            let deregister = s.prepared(&SQL.deregister_worker)?;
            Ok(s.client.execute(&deregister, &[&worker_identity])? == 1)
        })
    }

    fn upsert_runtime(&self, row: &RuntimeRecord) -> Result<(), StoreError> {
        let args = Args::of(rows::runtime_values(row))?;
        self.run("cannot write runtime row", Retry::Idempotent, |s| {
            let upsert = s.prepared(&SQL.upsert_runtime)?;
            s.client.execute(&upsert, &args.refs())?;
            Ok(())
        })
    }

    fn list_runtime(&self) -> Result<Vec<RuntimeRecord>, StoreError> {
        self.run("cannot list runtime rows", Retry::Idempotent, |s| {
            let list = s.prepared(&SQL.list_runtime)?;
            select_all(&mut s.client, &list, rows::runtime)
        })
    }

    fn touch_runtime(&self, runtime_id: &str, now: Timestamp) -> Result<bool, StoreError> {
        let now = sql_time(now)?;
        self.run("cannot refresh runtime row", Retry::Idempotent, |s| {
            let touch = s.prepared(&SQL.touch_runtime)?;
            Ok(s.client.execute(&touch, &[&runtime_id, &now])? == 1)
        })
    }

    fn mark_runtime_stopped(&self, runtime_id: &str, _now: Timestamp) -> Result<bool, StoreError> {
        self.run("cannot stop runtime row", Retry::Idempotent, |s| {
            let stop = s.prepared(&SQL.stop_runtime)?;
            Ok(s.client.execute(&stop, &[&runtime_id])? == 1)
        })
    }

    fn append_audit(&self, entry: &AuditEntry) -> Result<i64, StoreError> {
        let args = Args::of(rows::audit_values(entry)?)?;
        // Not retried: an append that committed would be recorded twice.
        self.run("cannot append audit entry", Retry::Never, |s| {
            let append = s.prepared(&SQL.append_audit)?;
            get(&s.client.query_one(&append, &args.refs())?, 0)
        })
    }

    fn list_audit(&self, since: Option<Timestamp>, limit: usize) -> Result<Vec<AuditEntry>, StoreError> {
        let since = since.map(sql_time).transpose()?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.run("cannot list audit entries", Retry::Idempotent, |s| {
            let list = s.prepared(&LIST_AUDIT)?;
            s.client.query(&list, &[&since, &limit])?.iter().map(rows::audit).collect()
        })
    }

    fn server_now(&self) -> Result<Option<Timestamp>, StoreError> {
        self.run("cannot read the server clock", Retry::Idempotent, |s| {
            let now: SystemTime = get(&s.client.query_one("SELECT now()", &[])?, 0)?;
            Ok(Some(from_sql_time(now)))
        })
    }

    fn publish_observation(&self, host: &HostIdentity, scan: &ProcessScan, now: Timestamp) -> Result<bool, StoreError> {
        let args = Args::of(rows::observation_values(host, scan, now)?)?;
        self.run("cannot publish host observation", Retry::Idempotent, |s| {
            let publish = s.prepared(&SQL.publish_observation)?;
            Ok(s.client.execute(&publish, &args.refs())? == 1)
        })
    }

    fn list_observations(&self) -> Result<Vec<HostObservation>, StoreError> {
        self.run("cannot list host observations", Retry::Idempotent, |s| {
            let list = s.prepared(&SQL.list_observations)?;
            select_all(&mut s.client, &list, rows::observation)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_trip_through_system_time() {
        for secs in [0, 1, 1_785_372_009, -1, -86_401] {
            let t = Timestamp::from_unix(secs);
            assert_eq!(from_sql_time(sql_time(t).unwrap()), t);
        }
        // Sub-second server times round down, before and after the epoch.
        assert_eq!(from_sql_time(UNIX_EPOCH + Duration::from_millis(1_999)), Timestamp::from_unix(1));
        assert_eq!(from_sql_time(UNIX_EPOCH - Duration::from_millis(1_001)), Timestamp::from_unix(-2));
    }

    #[test]
    fn a_bad_url_is_invalid_and_tls_is_refused_without_leaking_the_password() {
        let err = PostgresStore::open("postgres://u:hunter22@127.0.0.1:notaport/db").unwrap_err();
        assert_eq!(err.kind(), StoreErrorKind::Invalid, "{err}");
        assert!(!err.to_string().contains("hunter22"), "{err}");
        let err = PostgresStore::open("postgres://u:hunter22@127.0.0.1/db?sslmode=require").unwrap_err();
        assert_eq!(err.kind(), StoreErrorKind::Unsupported, "{err}");
        assert!(!err.to_string().contains("hunter22"), "{err}");
    }

    #[test]
    fn migrations_share_the_sqlite_numbering() {
        let numbers: Vec<u32> = MIGRATIONS.iter().map(|m| m.0).collect();
        assert_eq!(numbers, (1..=SCHEMA_VERSION).collect::<Vec<_>>());
    }
}
