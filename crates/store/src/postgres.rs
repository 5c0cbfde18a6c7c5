//! The PostgreSQL engine, for fleets across hosts: the same contract and the
//! same migration numbers as [`crate::sqlite`], one connection per process.
//! What every operation does is written once, in the store's parts; this module is the
//! dialect, by concern: `config` (the URL), `tls` (what is checked of the
//! server), `link` (the connection),
//! `fail` (what an error means), `bind` (the types), `migrations`.
//!
//! * **Transactions.** Every multi-statement write is one transaction at
//!   READ COMMITTED; the rows it decides on are locked (`SELECT … FOR UPDATE`)
//!   before it writes. A renewal is one guarded `UPDATE` whose `WHERE` carries
//!   the epoch and every expectation; a waiting `UPDATE` re-checks its `WHERE`
//!   against the row a concurrent claim committed, so it can never renew past
//!   that claim.
//!   The fleet snapshot reads at REPEATABLE READ, READ ONLY: its statements
//!   all see the one snapshot the first of them takes.
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
//!   [`crate::StoreErrorKind::Unavailable`] (transient); the next call reconnects,
//!   after a jittered backoff while the server keeps refusing. Reads and
//!   idempotent writes retry once on a fresh connection; a renewal, a claim,
//!   a registration and an audit append never do, since their first attempt
//!   may have committed. Nothing here panics on a server's answer.
//! * **Secrets.** Every message names the store by [`crate::redact_url`], and the
//!   password is scrubbed from the server's own texts too.
//!
//! * **TLS.** rustls, with libpq's `sslmode` values (`disable`, `prefer` —
//!   the default —, `require`, `verify-ca`, `verify-full`) and `sslrootcert`
//!   (a PEM file, else the system's roots): see `tls`. A certificate the
//!   settings refuse is [`crate::StoreErrorKind::Permission`], not transient.

mod bind;
pub(crate) mod config;
mod fail;
mod link;
mod migrations;
mod tls;

pub use config::{CONNECT_TIMEOUT, TCP_USER_TIMEOUT};
pub use link::LOCK_TIMEOUT;
pub(crate) use tls::{Roots, SslMode};

use crate::engine::{Engine, Fail, Retry};
use crate::sql::{Dialect, Sql};
use crate::{SCHEMA_VERSION, StoreError};
use config::Target;
use fleetgate_core::Timestamp;
use fleetgate_core::runtime::{StoreIdentity, StoreKey};
use link::{Link, Session, off_async_runtime};
use std::fmt;
use std::sync::{LazyLock, Mutex};
use std::time::SystemTime;

/// PostgreSQL's spelling: `$N`, `GREATEST`, rows locked `FOR UPDATE` by the
/// reads a write decides on, and a parameter tested for NULL typed for the
/// planner.
const DIALECT: Dialect = Dialect {
    mark: '$',
    greatest: "GREATEST",
    lock_rows: " FOR UPDATE",
    typed_nulls: true,
    notify_approval: Some("SELECT pg_notify('fleetgate_approvals', $1)"),
};

/// The statements, numbered `$N`.
static SQL: LazyLock<Sql> = LazyLock::new(|| Sql::new(&DIALECT));

/// A PostgreSQL-backed store: one connection, serialised by a mutex like
/// SQLite's; every operation is a short transaction.
pub struct PostgresStore {
    target: Target,
    link: Mutex<Link>,
    /// The database as the server identifies it, read once at open.
    identity: std::sync::OnceLock<StoreIdentity>,
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore").field("url", &self.target.shown).finish_non_exhaustive()
    }
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        // Closing the client blocks on its runtime too: off any async runtime.
        let link = std::mem::replace(self.link.get_mut().unwrap_or_else(|e| e.into_inner()), Link::down("closed"));
        let _ = off_async_runtime(move || {
            drop(link);
            Ok(())
        });
    }
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
        let store = Self {
            target: Target::parse(url)?,
            link: Mutex::new(Link::down("")),
            identity: std::sync::OnceLock::new(),
        };
        let mut session: Session = store.connect()?;
        store.migrate(&mut session, target).map_err(|f| store.name("cannot migrate store", f))?;
        let key = database_key(&mut session).map_err(|f| store.name("cannot identify the database", f))?;
        let location = store.target.shown.clone();
        let _ = store.identity.set(StoreIdentity { engine: "postgres".into(), location, key });
        *store.link.lock().unwrap_or_else(|e| e.into_inner()) = Link::Up(session);
        Ok(store)
    }

    /// The store's name in messages: the URL without its password.
    pub fn shown(&self) -> &str {
        &self.target.shown
    }
}

impl Engine for PostgresStore {
    type Conn = Session;

    /// Its lock waits are the server's (`lock_timeout`), not bounded per call.
    fn bounds_waits(&self) -> bool {
        false
    }

    fn sql(&self) -> &'static Sql {
        &SQL
    }

    fn label(&self) -> String {
        self.target.shown.clone()
    }

    /// A URL names a server's database, which a client cannot lose under itself the way
    /// a process can lose a deleted file: always the same store.
    fn check_location(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn identity(&self) -> Option<StoreIdentity> {
        self.identity.get().cloned()
    }

    /// A connection of its own that `LISTEN`s: an answer's `NOTIFY` (sent in its
    /// transaction, delivered at commit) wakes it, from any process on any host.
    fn approval_watch(&self) -> Result<Box<dyn crate::ApprovalWatch>, StoreError> {
        Ok(Box::new(link::Listener::new(&self.target)))
    }

    fn server_clock(&self) -> Result<Option<Timestamp>, StoreError> {
        self.run("cannot read the server clock", Retry::Read, |s| {
            let now: SystemTime = bind::get(&s.client.query_one("SELECT now()", &[])?, 0)?;
            Ok(Some(bind::from_sql_time(now)))
        })
    }

    fn run<T: Send>(
        &self,
        context: &str,
        retry: Retry,
        op: impl FnMut(&mut Session) -> Result<T, Fail<::postgres::Error>> + Send,
    ) -> Result<T, StoreError> {
        off_async_runtime(|| self.run_here(context, retry, op))
    }
}

/// What tells this database from every other, as the server says: its cluster's system
/// identifier (its address and port where the server will not say: `pg_control_system()`
/// may be revoked), the database's oid and the schema the tables live in. Two URLs of one
/// database give one key; two databases of one server, or two schemas of one database, two.
fn database_key(session: &mut Session) -> Result<StoreKey, Fail<::postgres::Error>> {
    let client = &mut session.client;
    let system = match client.query_one("SELECT system_identifier::text FROM pg_control_system()", &[]) {
        Ok(row) => row.try_get::<_, String>(0)?,
        Err(_) => client
            .query_one(
                "SELECT coalesce(host(inet_server_addr()), 'socket') || ':' || coalesce(inet_server_port()::text, '')",
                &[],
            )?
            .try_get::<_, String>(0)?,
    };
    let row = client.query_one(
        "SELECT (SELECT oid FROM pg_database WHERE datname = current_database())::text, \
         coalesce(current_schema(), '')",
        &[],
    )?;
    Ok(StoreKey::Database { system, database: row.try_get(0)?, schema: row.try_get(1)? })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StoreErrorKind;

    #[test]
    fn a_bad_url_or_sslmode_is_invalid_without_leaking_the_password() {
        let err = PostgresStore::open("postgres://u:hunter22@127.0.0.1:notaport/db").unwrap_err();
        assert_eq!(err.kind(), StoreErrorKind::Invalid, "{err}");
        assert!(!err.to_string().contains("hunter22"), "{err}");
        let err = PostgresStore::open("postgres://u:hunter22@127.0.0.1/db?sslmode=bogus").unwrap_err();
        assert_eq!(err.kind(), StoreErrorKind::Invalid, "{err}");
        assert!(err.to_string().contains("invalid sslmode \"bogus\""), "{err}");
        assert!(!err.to_string().contains("hunter22"), "{err}");
    }
}
