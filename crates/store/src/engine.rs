//! What an engine supplies: its dialect. A connection that runs statements
//! and transactions ([`Exec`]), a way to run an operation on it and name its
//! failure ([`Engine::run`]), and its own spelling of the shared statements
//! ([`Engine::sql`]). Everything else about the store — which statements an
//! operation runs, in which transaction, and what it answers — is written
//! once for both engines, in the store's parts (`crate::registry`, `crate::ledger`, …).

use crate::StoreError;
use crate::rows::{Record, Value};
use crate::sql::Sql;
use fleetgate_core::Timestamp;
use std::fmt;

/// Why an operation failed, before its engine names it for the caller.
#[derive(Debug)]
pub(crate) enum Fail<E> {
    /// The engine's own error: the database, the connection, a value.
    Db(E),
    /// A row that does not read as a fleetgate row.
    Row(String),
    /// Already a store error (a newer schema, an unencodable value, an
    /// answer that cannot be).
    Store(StoreError),
}

impl<E> From<StoreError> for Fail<E> {
    fn from(e: StoreError) -> Self {
        Self::Store(e)
    }
}

/// The kind of transaction an operation needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tx {
    /// Reads that decide a write, and the write: SQLite takes the write lock
    /// up front (`BEGIN IMMEDIATE`); PostgreSQL locks the rows it decides on
    /// (`FOR UPDATE` in the statement).
    Write,
    /// Reads only, all from one consistent snapshot: SQLite's deferred
    /// transaction (WAL: one snapshot from the first read on); PostgreSQL's
    /// `REPEATABLE READ, READ ONLY`.
    Snapshot,
}

/// May an operation run again on a fresh connection after its first attempt
/// lost the connection? Only when a second run cannot change the answer or
/// the data: the first attempt may have committed. (SQLite never loses its
/// connection and ignores this.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Retry {
    /// Reads only. Idempotent, and run where a writer never holds them up
    /// (SQLite: its read connection).
    Read,
    /// Writes whose second run changes nothing.
    Idempotent,
    /// Renewals, claims, registrations and audit appends.
    Never,
}

/// A connection, in or out of a transaction, running statements by their
/// text. Every statement is one of the engine's [`Sql`] (so `'static`, and
/// prepared once per connection).
pub(crate) trait Exec {
    /// The engine's own error.
    type Db;

    /// Run a statement; the number of rows it changed.
    fn execute(&mut self, sql: &'static str, args: &[Value<'_>]) -> Result<u64, Fail<Self::Db>>;

    /// Every row a statement answers, decoded.
    fn query<T: Record>(&mut self, sql: &'static str, args: &[Value<'_>]) -> Result<Vec<T>, Fail<Self::Db>>;

    /// Run `op` in one transaction of `kind`: committed when it succeeds,
    /// rolled back when it fails.
    fn transaction<T>(
        &mut self,
        kind: Tx,
        op: impl FnOnce(&mut Self) -> Result<T, Fail<Self::Db>>,
    ) -> Result<T, Fail<Self::Db>>;

    /// The first row a statement answers, if any.
    fn query_opt<T: Record>(&mut self, sql: &'static str, args: &[Value<'_>]) -> Result<Option<T>, Fail<Self::Db>> {
        Ok(self.query(sql, args)?.into_iter().next())
    }

    /// The row a statement always answers.
    fn query_one<T: Record>(&mut self, sql: &'static str, args: &[Value<'_>]) -> Result<T, Fail<Self::Db>> {
        self.query_opt(sql, args)?.ok_or_else(|| Fail::Row("the statement answered no row".into()))
    }
}

/// An engine: a [`crate::Store`] once it says how to run an operation. The
/// store itself is implemented once, over this, by each of its parts.
pub(crate) trait Engine: Send + Sync + fmt::Debug {
    /// Its connection.
    type Conn: Exec;

    /// The shared statements in this engine's spelling.
    fn sql(&self) -> &'static Sql;

    /// Run `call`, the store operation `op`, through whatever wraps this engine's
    /// operations ([`crate::Layer`]): every operation of [`crate::Store`] runs in here. A
    /// database engine has nothing around it; `Layered`, the one engine with layers,
    /// overrides this and [`Engine::layered`].
    fn around<T>(&self, _op: &'static str, call: impl FnOnce() -> Result<T, StoreError>) -> Result<T, StoreError> {
        call()
    }

    /// This engine with `layer` over it, as a store ([`crate::Store::layered`]).
    fn layered(self: std::sync::Arc<Self>, layer: std::sync::Arc<dyn crate::Layer>) -> std::sync::Arc<dyn crate::Store>
    where
        Self: Sized + 'static,
    {
        crate::layer::over(self, layer)
    }

    /// Engine and location, passwords redacted ([`crate::Store::describe`]).
    fn label(&self) -> String;

    /// The database server's clock, where it has one
    /// ([`crate::Store::server_now`]).
    fn server_clock(&self) -> Result<Option<Timestamp>, StoreError>;

    /// Whether its location still names the database it opened
    /// ([`crate::Store::check_location`]).
    fn check_location(&self) -> Result<(), StoreError>;

    /// Whether [`crate::within`] bounds its waits ([`crate::Store::bounds_waits`]).
    fn bounds_waits(&self) -> bool;

    /// A watch on the approvals ([`crate::Store::approval_watch`]).
    fn approval_watch(&self) -> Result<Box<dyn crate::ApprovalWatch>, StoreError>;

    /// Which store this handle opened, as the file system or the server says
    /// ([`crate::FleetSnapshot::store`]).
    fn identity(&self) -> Option<fleetgate_core::runtime::StoreIdentity>;

    /// Run `op` on the connection (reconnecting first where it was lost, and
    /// once more where `retry` allows); a failure is named by `context`.
    fn run<T: Send>(
        &self,
        context: &str,
        retry: Retry,
        op: impl FnMut(&mut Self::Conn) -> Result<T, Fail<<Self::Conn as Exec>::Db>> + Send,
    ) -> Result<T, StoreError>;

    /// [`Engine::run`] of `op` inside one write transaction, so that what it changes
    /// commits whole or not at all.
    fn write<T: Send>(
        &self,
        context: &str,
        retry: Retry,
        mut op: impl FnMut(&mut Self::Conn) -> Result<T, Fail<<Self::Conn as Exec>::Db>> + Send,
    ) -> Result<T, StoreError> {
        self.run(context, retry, |c| c.transaction(Tx::Write, &mut op))
    }
}
