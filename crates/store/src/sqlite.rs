//! The SQLite engine: one file, WAL, `BEGIN IMMEDIATE`, a 5 s deadline per
//! operation, file mode 0600, numbered additive migrations. Before SQLite writes to
//! the file, [`file`] judges it: this user's and private, writable, and empty or
//! fleetgate's.
//!
//! SQLite's own busy handler sleeps longer the longer it waits, so under
//! contention a writer that just committed wins again and again (measured here:
//! two of eight processes got one commit in 10 s). The handler installed here
//! polls after short jittered sleeps instead, bounded by the operation's
//! deadline, so every waiter keeps its chance at the lock.
//!
//! The deadline counts from the operation's start, the wait for this process's
//! connection included: a lock held by another process (an operator's `BEGIN
//! EXCLUSIVE`, a stalled writer) makes an operation `Busy` within
//! [`BUSY_TIMEOUT`], well under an MCP client's call timeout, however many
//! operations queue behind it. Reads run on a second connection ([`Retry::Read`]):
//! in WAL they never wait for the write lock, so they never queue behind a writer
//! that does.

mod file;
mod watch;

use crate::engine::{Engine, Exec, Fail, Retry, Tx};
use crate::rows::{Columns, Record, Value};
use crate::schema::{self, Types};
use crate::sql::Dialect;
use crate::{SCHEMA_VERSION, StoreError, StoreErrorKind};
use fleetgate_core::Timestamp;
use fleetgate_core::runtime::{StoreIdentity, StoreKey};
use parking_lot::Mutex;
use rusqlite::types::{ToSqlOutput, Type, Value as Sql, ValueRef};
use rusqlite::{Connection, ErrorCode, OpenFlags, Row, ToSql, params, params_from_iter};
use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

/// How long one operation may wait — for this process's connection, then for the
/// write lock — before it is `Busy`.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// SQLite's column types: times as `%Y-%m-%dT%H:%M:%SZ` text (ordered as
/// time, being one format), booleans as integers.
const TYPES: Types = Types {
    key: "TEXT PRIMARY KEY NOT NULL",
    id: "INTEGER PRIMARY KEY AUTOINCREMENT",
    int: "INTEGER",
    real: "REAL",
    boolean: "INTEGER",
    time: "TEXT",
};

/// A SQLite-backed store. Two connections per process, each serialised by a
/// mutex: one writes (every operation is a short transaction, so that costs
/// nothing), one only reads.
#[derive(Debug)]
pub struct SqliteStore {
    path: PathBuf,
    conn: Mutex<Connection>,
    reader: Mutex<Connection>,
    /// The file opened, to tell later whether `path` still names it.
    file: file::FileId,
}

thread_local! {
    /// When the running operation started: its deadline's origin.
    static OP_SINCE: Cell<Option<Instant>> = const { Cell::new(None) };
    /// Outside an operation (opening the file): when this lock wait started.
    static WAIT_SINCE: Cell<Option<Instant>> = const { Cell::new(None) };
    /// A caller's own bound on this thread's operations ([`within`]), when shorter.
    static BUDGET: Cell<Option<Duration>> = const { Cell::new(None) };
}

/// How long an operation of this thread may wait: [`BUSY_TIMEOUT`], or a caller's shorter
/// [`within`] budget.
fn deadline() -> Duration {
    BUDGET.with(Cell::get).map_or(BUSY_TIMEOUT, |budget| budget.min(BUSY_TIMEOUT))
}

/// [`crate::within`]: `f` with this thread's operations bounded by `budget`.
pub(crate) fn within<T>(budget: Duration, f: impl FnOnce() -> T) -> T {
    struct Restore(Option<Duration>);
    impl Drop for Restore {
        fn drop(&mut self) {
            BUDGET.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(BUDGET.with(|c| c.replace(Some(budget))));
    f()
}

// SQLite calls this with the number of prior calls for the same lock wait.
fn busy_handler(attempt: i32) -> bool {
    let now = Instant::now();
    let since = OP_SINCE.with(Cell::get).unwrap_or_else(|| {
        WAIT_SINCE.with(|c| {
            if attempt == 0 || c.get().is_none() {
                c.set(Some(now));
            }
            c.get().unwrap_or(now)
        })
    });
    if now.duration_since(since) >= deadline() {
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

/// An operation's failure, named by `context`.
fn named(context: &str, fail: Fail<rusqlite::Error>) -> StoreError {
    match fail {
        Fail::Db(e) => map_err(context, e),
        Fail::Row(why) => StoreError::new(StoreErrorKind::Corrupt, format!("{context}: unreadable row: {why}")),
        Fail::Store(e) => e,
    }
}

// Times are stored as `%Y-%m-%dT%H:%M:%SZ` text, booleans as integers.
impl Columns for Row<'_> {
    type Error = Fail<rusqlite::Error>;

    fn opt_text(&self, i: usize) -> Result<Option<String>, Self::Error> {
        Ok(self.get(i)?)
    }

    fn opt_int(&self, i: usize) -> Result<Option<i64>, Self::Error> {
        Ok(self.get(i)?)
    }

    fn real(&self, i: usize) -> Result<f64, Self::Error> {
        Ok(self.get(i)?)
    }

    fn boolean(&self, i: usize) -> Result<bool, Self::Error> {
        Ok(self.get(i)?)
    }

    fn opt_time(&self, i: usize) -> Result<Option<Timestamp>, Self::Error> {
        let text: Option<String> = self.get(i)?;
        text.map(|t| Timestamp::parse(&t).map_err(|e| self.invalid(i, e.to_string()))).transpose()
    }

    fn invalid(&self, i: usize, why: String) -> Self::Error {
        Fail::Db(rusqlite::Error::FromSqlConversionFailure(i, Type::Text, why.into()))
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

impl From<rusqlite::Error> for Fail<rusqlite::Error> {
    fn from(e: rusqlite::Error) -> Self {
        Self::Db(e)
    }
}

/// SQLite's spelling: `?N`, `MAX`, and no row locks — a write transaction
/// holds the whole file from its `BEGIN IMMEDIATE`.
const DIALECT: Dialect =
    Dialect { mark: '?', greatest: "MAX", lock_rows: "", typed_nulls: false, notify_approval: None };

/// The statements, numbered `?N`.
static SQL: LazyLock<crate::sql::Sql> = LazyLock::new(|| crate::sql::Sql::new(&DIALECT));

impl Exec for Connection {
    type Db = rusqlite::Error;

    fn execute(&mut self, sql: &'static str, args: &[Value<'_>]) -> Result<u64, Fail<rusqlite::Error>> {
        let changed = self.prepare_cached(sql)?.execute(params_from_iter(args))?;
        Ok(u64::try_from(changed).unwrap_or(u64::MAX))
    }

    fn query<T: Record>(&mut self, sql: &'static str, args: &[Value<'_>]) -> Result<Vec<T>, Fail<rusqlite::Error>> {
        let mut statement = self.prepare_cached(sql)?;
        let mut rows = statement.query(params_from_iter(args))?;
        let mut out = Vec::new();
        while let Some(row) = rows.next()? {
            out.push(T::read(row)?);
        }
        Ok(out)
    }

    fn transaction<T>(
        &mut self,
        kind: Tx,
        op: impl FnOnce(&mut Self) -> Result<T, Fail<rusqlite::Error>>,
    ) -> Result<T, Fail<rusqlite::Error>> {
        self.execute_batch(match kind {
            Tx::Write => "BEGIN IMMEDIATE",
            Tx::Snapshot => "BEGIN DEFERRED",
        })?;
        let done = op(self).and_then(|value| {
            self.execute_batch("COMMIT")?;
            Ok(value)
        });
        if done.is_err() && !self.is_autocommit() {
            // What failed is the answer; a failed rollback adds nothing to it.
            let _ = self.execute_batch("ROLLBACK");
        }
        done
    }
}

impl SqliteStore {
    /// Open (creating if absent) the store at `path`. A file that is not a
    /// SQLite database, another program's database, a newer schema, a file
    /// another user owns or others may write, fails closed and is left untouched.
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
        let file = file::prepare(path, &shown)?;
        let mut conn =
            Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX)
                .map_err(|e| map_err(&format!("cannot open store {shown}"), e))?;
        conn.busy_handler(Some(busy_handler)).map_err(|e| map_err(&shown, e))?;
        // Another program's database is refused before WAL mode or a table is written to it.
        file::check_adoptable(&conn, &shown)?;
        let mode = enter_wal(&conn).map_err(|e| map_err(&format!("store {shown} is unreadable"), e))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::new(
                StoreErrorKind::Unsupported,
                format!("store {shown} refused WAL mode (journal_mode is {mode})"),
            ));
        }
        conn.execute_batch("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;").map_err(|e| map_err(&shown, e))?;
        // Opened before the migration, when the file is known to be a WAL database, and
        // used only once it is migrated.
        let mut reader =
            Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX)
                .map_err(|e| map_err(&format!("cannot open store {shown}"), e))?;
        reader.busy_handler(Some(busy_handler)).map_err(|e| map_err(&shown, e))?;
        reader.execute_batch("PRAGMA query_only = ON;").map_err(|e| map_err(&shown, e))?;
        let store = Self { path: path.to_owned(), conn: Mutex::new(conn), reader: Mutex::new(reader), file };
        store.migrate(target)?;
        Ok(store)
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Apply the shared schema's pending versions inside one `BEGIN
    /// IMMEDIATE`, so two processes opening a fresh file at once apply each
    /// exactly once. SQLite has no `ADD COLUMN IF NOT EXISTS`: a column is
    /// added only when `pragma_table_info` lacks it.
    fn migrate(&self, target: u32) -> Result<(), StoreError> {
        let shown = self.path.display().to_string();
        self.run(&format!("cannot migrate store {shown}"), Retry::Never, |conn| {
            Exec::transaction(conn, Tx::Write, |conn| {
                conn.execute_batch(
                    "CREATE TABLE IF NOT EXISTS fleetgate_schema (
                        version INTEGER PRIMARY KEY NOT NULL, name TEXT NOT NULL, applied_at TEXT NOT NULL)",
                )?;
                let current: i64 = Exec::query_one(conn, &SQL.schema_version, &[])?;
                for migration in schema::pending(&shown, current, target)? {
                    conn.execute_batch(&TYPES.spell(migration.create))?;
                    for (table, column, declaration) in migration.add {
                        let present: bool = conn.query_row(
                            "SELECT EXISTS (SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2)",
                            [table, column],
                            |r| r.get(0),
                        )?;
                        if !present {
                            conn.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {declaration}"))?;
                        }
                    }
                    Connection::execute(
                        conn,
                        "INSERT INTO fleetgate_schema (version, name, applied_at)
                         VALUES (?1, ?2, strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))",
                        params![migration.version, migration.name],
                    )?;
                }
                Ok(())
            })
        })
    }
}

/// The key of the store file at `path` as the file system says (its device and inode),
/// without opening it; `None` when there is no such file yet.
pub(crate) fn file_key(path: &Path) -> Option<StoreKey> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| StoreKey::File { device: m.dev(), inode: m.ino() })
}

impl Engine for SqliteStore {
    type Conn = Connection;

    fn bounds_waits(&self) -> bool {
        true
    }

    /// inotify on the database's directory: another process's answer writes the file or
    /// its WAL.
    fn approval_watch(&self) -> Result<Box<dyn crate::ApprovalWatch>, StoreError> {
        Ok(Box::new(watch::FileWatch::new(&self.path)?))
    }

    fn sql(&self) -> &'static crate::sql::Sql {
        &SQL
    }

    fn label(&self) -> String {
        format!("sqlite:{}", self.path.display())
    }

    fn identity(&self) -> Option<StoreIdentity> {
        Some(StoreIdentity {
            engine: "sqlite".into(),
            // Absolute: another process (another working directory) reads it.
            location: std::path::absolute(&self.path).unwrap_or_else(|_| self.path.clone()).display().to_string(),
            key: StoreKey::File { device: self.file.dev, inode: self.file.ino },
        })
    }

    /// One `stat` of the path against the file opened. A path that cannot be looked at
    /// fails closed: the store is not known to be the one opened.
    fn check_location(&self) -> Result<(), StoreError> {
        let shown = self.path.display();
        let why = match file::same_file(&self.path, self.file) {
            Ok(None) => return Ok(()),
            Ok(Some(why)) => why,
            Err(e) => format!("it cannot be looked at ({e})"),
        };
        Err(StoreError::new(
            StoreErrorKind::Replaced,
            format!(
                "store {shown} is no longer the file this process opened: {why}; what this process writes, no \
                 other process reads"
            ),
        ))
    }

    /// An embedded file has no clock of its own.
    fn server_clock(&self) -> Result<Option<Timestamp>, StoreError> {
        Ok(None)
    }

    /// The connection is never lost, so `retry` only chooses the connection: reads
    /// have their own.
    fn run<T: Send>(
        &self,
        context: &str,
        retry: Retry,
        mut op: impl FnMut(&mut Connection) -> Result<T, Fail<rusqlite::Error>> + Send,
    ) -> Result<T, StoreError> {
        let since = Instant::now();
        let connection = if retry == Retry::Read { &self.reader } else { &self.conn };
        let limit = deadline();
        let Some(mut conn) = connection.try_lock_for(limit) else {
            return Err(StoreError::new(
                StoreErrorKind::Busy,
                format!(
                    "{context}: the store's connection stayed busy for {} ms (another operation of this process \
                     waits for the write lock)",
                    limit.as_millis()
                ),
            ));
        };
        OP_SINCE.with(|c| c.set(Some(since)));
        let done = op(&mut conn);
        OP_SINCE.with(|c| c.set(None));
        done.map_err(|fail| named(context, fail))
    }
}
