//! The one connection: set up for a fleet (bounded lock waits), its
//! statements prepared once, transactions begun and ended on it, lost and
//! found again — after a jittered backoff while the server keeps refusing —
//! and kept off any async runtime, where the client library cannot block.

use super::PostgresStore;
use crate::engine::{Exec, Fail, Retry, Tx};
use crate::rows::{Record, Value};
use crate::{StoreError, StoreErrorKind};
use ::postgres::{Client, NoTls, Statement};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long one statement may wait for a row lock before it is `Busy`: the
/// same deadline as SQLite's write lock.
pub const LOCK_TIMEOUT: Duration = crate::sqlite::BUSY_TIMEOUT;

// Reconnect backoff while the server keeps refusing: doubling, jittered.
pub(super) const BACKOFF_FIRST: Duration = Duration::from_millis(200);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// The connection, or why there is none and when to try again.
#[expect(clippy::large_enum_variant, reason = "one per store, never moved around")]
pub(super) enum Link {
    Up(Session),
    Down { retry_at: Instant, backoff: Duration, cause: String },
}

impl Link {
    /// No connection yet, or any more, because of `cause`; try again at once.
    pub fn down(cause: impl Into<String>) -> Self {
        Self::Down { retry_at: Instant::now(), backoff: BACKOFF_FIRST, cause: cause.into() }
    }
}

/// A live connection and the statements prepared on it.
pub(crate) struct Session {
    pub(super) client: Client,
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

impl Exec for Session {
    type Db = ::postgres::Error;

    fn execute(&mut self, sql: &'static str, args: &[Value<'_>]) -> Result<u64, Fail<::postgres::Error>> {
        let (statement, args) = (self.prepared(sql)?, super::bind::Args::of(args)?);
        Ok(self.client.execute(&statement, &args.refs())?)
    }

    fn query<T: Record>(&mut self, sql: &'static str, args: &[Value<'_>]) -> Result<Vec<T>, Fail<::postgres::Error>> {
        let (statement, args) = (self.prepared(sql)?, super::bind::Args::of(args)?);
        self.client.query(&statement, &args.refs())?.iter().map(T::read).collect()
    }

    /// A write runs at READ COMMITTED and locks the rows it decides on; a
    /// snapshot reads at REPEATABLE READ, so every statement sees the
    /// transaction's one snapshot.
    fn transaction<T>(
        &mut self,
        kind: Tx,
        op: impl FnOnce(&mut Self) -> Result<T, Fail<::postgres::Error>>,
    ) -> Result<T, Fail<::postgres::Error>> {
        self.client.batch_execute(match kind {
            Tx::Write => "BEGIN",
            Tx::Snapshot => "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY",
        })?;
        let done = op(self).and_then(|value| {
            self.client.batch_execute("COMMIT")?;
            Ok(value)
        });
        if done.is_err() && !self.client.is_closed() {
            // What failed is the answer; a failed rollback adds nothing to it.
            let _ = self.client.batch_execute("ROLLBACK");
        }
        done
    }
}

/// Run `f` here, or, when this thread is driving an async runtime, on a
/// scoped thread of its own. The client library blocks on a runtime of its
/// own, which panics inside another; SQLite's calls merely block, so callers
/// may not know the difference and must not crash on it.
pub(super) fn off_async_runtime<T: Send>(f: impl FnOnce() -> Result<T, StoreError> + Send) -> Result<T, StoreError> {
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
    /// A new connection, set up for the store.
    pub(super) fn connect(&self) -> Result<Session, StoreError> {
        let connected = match &self.target.connector {
            Some(tls) => self.target.config.connect(tls.clone()),
            None => self.target.config.connect(NoTls),
        };
        let mut client = connected.map_err(|e| self.name("cannot connect to store", Fail::Db(e)))?;
        // A row-lock wait is bounded like SQLite's busy wait; a process that
        // stalls inside a transaction cannot hold others' rows for long.
        client
            .batch_execute(&format!(
                "SET lock_timeout = '{}s'; SET idle_in_transaction_session_timeout = '60s'",
                LOCK_TIMEOUT.as_secs()
            ))
            .map_err(|e| self.name("cannot set up store session", Fail::Db(e)))?;
        Ok(Session { client, statements: HashMap::new() })
    }

    /// Run `op` on the connection, reconnecting first when it was lost, and
    /// once more on a fresh connection when it lost it and `retry` allows.
    pub(super) fn run_here<T>(
        &self,
        context: &str,
        retry: Retry,
        mut op: impl FnMut(&mut Session) -> Result<T, Fail<::postgres::Error>>,
    ) -> Result<T, StoreError> {
        let mut link = self.link.lock().unwrap_or_else(|e| e.into_inner());
        let mut tries_left = if matches!(retry, Retry::Read | Retry::Idempotent) { 2 } else { 1 };
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
                *link = Link::down(err.to_string());
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
            *link = Link::down("connection closed");
        }
        if let Link::Down { retry_at, backoff, cause } = link {
            let now = Instant::now();
            if now < *retry_at {
                return Err(StoreError::new(
                    StoreErrorKind::Unavailable,
                    format!(
                        "store {} is unreachable ({cause}); next reconnect in {} ms",
                        self.target.shown,
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
                format!("store {} is unreachable ({cause})", self.target.shown),
            )),
        }
    }
}

/// A connection of its own that `LISTEN`s on the approvals' channel: the store's
/// [`crate::ApprovalWatch`] on PostgreSQL. Connected on first use and again after a loss; a
/// (re)connection reports a change, since an answer may have come while it was not listening.
pub(super) struct Listener {
    config: ::postgres::Config,
    connector: Option<tokio_postgres_rustls::MakeRustlsConnect>,
    shown: String,
    client: Option<Client>,
}

impl Listener {
    pub(super) fn new(target: &super::config::Target) -> Self {
        Self {
            config: target.config.clone(),
            connector: target.connector.clone(),
            shown: target.shown.clone(),
            client: None,
        }
    }

    fn listen(&mut self) -> Result<(), StoreError> {
        let connected = match &self.connector {
            Some(tls) => self.config.connect(tls.clone()),
            None => self.config.connect(NoTls),
        };
        let unavailable = |e: ::postgres::Error| {
            StoreError::new(
                StoreErrorKind::Unavailable,
                format!(
                    "cannot listen for approvals on store {}: {}",
                    self.shown,
                    e.as_db_error().map_or_else(|| e.to_string(), |d| d.message().to_owned())
                ),
            )
        };
        let mut client = connected.map_err(unavailable)?;
        client.batch_execute(&format!("LISTEN {}", crate::sql::APPROVALS_CHANNEL)).map_err(unavailable)?;
        self.client = Some(client);
        Ok(())
    }
}

impl crate::ApprovalWatch for Listener {
    fn wait(&mut self, within: Duration) -> Result<bool, StoreError> {
        off_async_runtime(|| {
            if self.client.is_none() {
                self.listen()?;
                return Ok(true);
            }
            use ::postgres::fallible_iterator::FallibleIterator as _;
            let client = self.client.as_mut().expect("listening");
            let heard = {
                let mut notifications = client.notifications();
                let first = notifications.timeout_iter(within).next().map(|n| n.is_some());
                if matches!(first, Ok(true)) {
                    // Every notification already here is this one change.
                    while let Ok(Some(_)) = notifications.iter().next() {}
                }
                first
            };
            match heard {
                Ok(heard) => Ok(heard),
                Err(e) => {
                    self.client = None;
                    Err(StoreError::new(
                        StoreErrorKind::Unavailable,
                        format!("the approvals listener on store {} was lost: {e}", self.shown),
                    ))
                }
            }
        })
    }
}
