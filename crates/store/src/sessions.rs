//! Schema v12's HTTP sessions: which gateway replica owns each 2025-11-25 session. A session
//! lives in one process (its SSE streams, its downstream); replicas of one member behind a
//! load balancer share this table, so a request that reaches a replica which does not hold
//! the session is relayed to the one that does (`owner`, the address it advertises), and a
//! session whose owner is gone is forgotten and answered 404 — the client re-initializes.

use crate::StoreError;
use crate::engine::{Engine, Exec, Retry};
use crate::ledger::time;
use crate::rows::{Columns, Record, text};
use crate::sql::Dialect;
use fleetgate_core::Timestamp;

/// Which replica holds each HTTP session.
/// Part of [`crate::Store`]; every operation is written once, over any engine, below.
pub trait Sessions {
    /// Record which replica holds an HTTP session (schema v12); a session recorded already
    /// stays as it was.
    fn record_http_session(&self, session: &HttpSession) -> Result<(), StoreError>;

    /// The replica holding HTTP session `session_id`, when one recorded it.
    fn http_session(&self, session_id: &str) -> Result<Option<HttpSession>, StoreError>;

    /// Forget one HTTP session (it ended, or its owner is gone); whether it was recorded.
    fn forget_http_session(&self, session_id: &str) -> Result<bool, StoreError>;

    /// Forget every HTTP session of one runtime (its process stopped); how many.
    fn forget_http_sessions_of(&self, runtime_id: &str) -> Result<usize, StoreError>;
}

impl<E: Engine> Sessions for E {
    fn record_http_session(&self, session: &crate::HttpSession) -> Result<(), StoreError> {
        self.around("record_http_session", || record(self, session))
    }

    fn http_session(&self, session_id: &str) -> Result<Option<crate::HttpSession>, StoreError> {
        self.around("http_session", || find(self, session_id))
    }

    fn forget_http_session(&self, session_id: &str) -> Result<bool, StoreError> {
        self.around("forget_http_session", || forget(self, session_id))
    }

    fn forget_http_sessions_of(&self, runtime_id: &str) -> Result<usize, StoreError> {
        self.around("forget_http_sessions_of", || forget_runtime(self, runtime_id))
    }
}

/// Schema v12's table, types as placeholders (see `crate::schema`).
pub(crate) const CREATE: &str = "CREATE TABLE IF NOT EXISTS http_sessions (
        session_id  {key},
        profile     TEXT NOT NULL,
        owner       TEXT NOT NULL,
        runtime_id  TEXT NOT NULL,
        opened_at   {time} NOT NULL
    );
    CREATE INDEX IF NOT EXISTS http_sessions_by_runtime ON http_sessions (runtime_id);";

/// One session and the replica that holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpSession {
    /// The `Mcp-Session-Id` the owner handed out.
    pub session_id: String,
    /// The roster profile its gateway serves.
    pub profile: String,
    /// Where the owner is reached: `host:port` of its listener, as it advertises it.
    pub owner: String,
    /// The owner's runtime row.
    pub runtime_id: String,
    /// When it was opened.
    pub opened_at: Timestamp,
}

impl Record for HttpSession {
    fn read<R: Columns>(r: &R) -> Result<Self, R::Error> {
        Ok(HttpSession {
            session_id: r.text(0)?,
            profile: r.text(1)?,
            owner: r.text(2)?,
            runtime_id: r.text(3)?,
            opened_at: r.time(4)?,
        })
    }
}

/// The statements, spelled for one engine.
#[derive(Debug)]
pub(crate) struct SessionSql {
    insert: String,
    select: String,
    forget: String,
    forget_runtime: String,
    prune: String,
}

impl SessionSql {
    pub(crate) fn new(d: &Dialect) -> Self {
        let sql = |template: &str| template.replace('$', d.mark.encode_utf8(&mut [0; 4]));
        let cols = "session_id, profile, owner, runtime_id, opened_at";
        Self {
            // A session id is the owner's fresh UUID: a second record of one is the same
            // session written again, which changes nothing.
            insert: sql(&format!(
                "INSERT INTO http_sessions ({cols}) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING"
            )),
            select: sql(&format!("SELECT {cols} FROM http_sessions WHERE session_id = $1")),
            forget: sql("DELETE FROM http_sessions WHERE session_id = $1"),
            forget_runtime: sql("DELETE FROM http_sessions WHERE runtime_id = $1"),
            // A session of a replica still running may still be in use; a task's record, or a
            // session of a replica that stopped or vanished, is not, once that old.
            prune: sql("DELETE FROM http_sessions WHERE opened_at < $1 AND (session_id LIKE 'task:%'
                 OR NOT EXISTS (SELECT 1 FROM runtimes r WHERE r.runtime_id = http_sessions.runtime_id
                                AND r.status = 'running'))"),
        }
    }
}

/// `Store::record_http_session`.
pub(crate) fn record<E: Engine>(e: &E, s: &HttpSession) -> Result<(), StoreError> {
    let sql = &e.sql().sessions;
    let args = [text(&s.session_id), text(&s.profile), text(&s.owner), text(&s.runtime_id), time(s.opened_at)];
    e.run("cannot record the HTTP session", Retry::Idempotent, |c| c.execute(&sql.insert, &args)).map(drop)
}

/// `Store::http_session`.
pub(crate) fn find<E: Engine>(e: &E, session_id: &str) -> Result<Option<HttpSession>, StoreError> {
    let sql = &e.sql().sessions;
    e.run("cannot read the HTTP session", Retry::Read, |c| c.query_opt(&sql.select, &[text(session_id)]))
}

/// `Store::forget_http_session`.
pub(crate) fn forget<E: Engine>(e: &E, session_id: &str) -> Result<bool, StoreError> {
    let sql = &e.sql().sessions;
    e.run("cannot forget the HTTP session", Retry::Idempotent, |c| c.execute(&sql.forget, &[text(session_id)]))
        .map(|n| n > 0)
}

/// `Store::forget_http_sessions_of`.
pub(crate) fn forget_runtime<E: Engine>(e: &E, runtime_id: &str) -> Result<usize, StoreError> {
    let sql = &e.sql().sessions;
    e.run("cannot forget the runtime's HTTP sessions", Retry::Idempotent, |c| {
        c.execute(&sql.forget_runtime, &[text(runtime_id)])
    })
    .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
}

/// `Store::prune_http_sessions`.
pub(crate) fn prune<E: Engine>(e: &E, opened_before: Timestamp) -> Result<u64, StoreError> {
    let sql = &e.sql().sessions;
    e.run("cannot prune the HTTP sessions", Retry::Idempotent, |c| c.execute(&sql.prune, &[time(opened_before)]))
}
