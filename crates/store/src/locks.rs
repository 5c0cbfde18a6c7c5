//! Schema v7's review-decision locks (`fleetgate_core::decision_lock`), written
//! once for both engines like the rest of the store.
//!
//! **Invariants:** at most one live lock per reviewer session (client and session): a
//! partial unique index says so, so two decisions of one session racing on two connections
//! cannot both take a lock. A lock is written in the same transaction as the decision it
//! follows from.

use crate::StoreError;
use crate::engine::{Engine, Exec, Retry};
use crate::ledger::{actor_values, key, pr_number, read_actor, read_pr, time};
use crate::rows::{Columns, Record, Value, names, opt_text, text};
use crate::sql::Dialect;
use fleetgate_core::Timestamp;
use fleetgate_core::decision_lock::{LockPhase, ReviewLock};
use fleetgate_core::workflow::{PrDecision, ReviewVerdict};

/// Schema v7's lock table, types as placeholders (see `crate::schema`): a literal, so the
/// migration can join it to the rest of v7's tables.
macro_rules! create_review_locks {
    () => {
        "CREATE TABLE IF NOT EXISTS review_locks (
        lock_id         {key},
        binding         TEXT NOT NULL,
        pr              {int} NOT NULL,
        {actor},
        head            TEXT NOT NULL,
        verdict         TEXT NOT NULL,
        decided_at      {time} NOT NULL,
        decisions       {int} NOT NULL,
        phase           TEXT NOT NULL,
        released_reason TEXT,
        released_at     {time}
    );
    CREATE UNIQUE INDEX IF NOT EXISTS review_locks_one_live ON review_locks (client, session) WHERE phase = 'live';
    CREATE INDEX IF NOT EXISTS review_locks_by_pr ON review_locks (binding, pr);"
    };
}
pub(crate) use create_review_locks;

const LOCK: [&str; 14] = [
    "lock_id",
    "binding",
    "pr",
    "worker",
    "profile",
    "client",
    "session",
    "head",
    "verdict",
    "decided_at",
    "decisions",
    "phase",
    "released_reason",
    "released_at",
];

/// What recording a decision does to its session's lock (the store's half of
/// `fleetgate_core::decision_lock::LockPlan`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LockWrite {
    /// Take a new lock with this id.
    Take {
        /// The new lock's id.
        lock_id: String,
    },
    /// The session's live lock now names this decision.
    Correct {
        /// The lock.
        lock_id: String,
    },
}

/// A new lock id for `pr`.
pub fn new_lock_id(pr: &fleetgate_core::workflow::PrRef, now: Timestamp) -> String {
    format!("{}-lock-{}-{:012x}", pr.pr, now.unix(), fastrand::u64(..1 << 48))
}

/// The statements, in one engine's spelling.
#[derive(Debug)]
pub(crate) struct LockSql {
    insert: String,
    correct: String,
    select: String,
    live_of_session: String,
    list_live: String,
    list_all: String,
    release_pr: String,
    release_one: String,
    of_pr_released: String,
}

impl LockSql {
    pub(crate) fn new(d: &Dialect) -> Self {
        let sql = |template: String| template.replace('$', d.mark.encode_utf8(&mut [0; 4]));
        let lock = names(&LOCK);
        let values = (1..=LOCK.len()).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ");
        Self {
            insert: sql(format!("INSERT INTO review_locks ({lock}) VALUES ({values}) ON CONFLICT DO NOTHING")),
            correct: sql("UPDATE review_locks SET head = $2, verdict = $3, decided_at = $4, decisions = decisions + 1
                 WHERE lock_id = $1 AND phase = 'live'"
                .into()),
            select: sql(format!("SELECT {lock} FROM review_locks WHERE lock_id = $1")),
            live_of_session: sql(format!(
                "SELECT {lock} FROM review_locks WHERE client = $1 AND session = $2 AND phase = 'live'"
            )),
            list_live: sql(format!(
                "SELECT {lock} FROM review_locks WHERE phase = 'live' ORDER BY decided_at, lock_id"
            )),
            list_all: sql(format!("SELECT {lock} FROM review_locks ORDER BY decided_at, lock_id")),
            release_pr: sql("UPDATE review_locks SET phase = 'released', released_reason = $3, released_at = $4
                 WHERE binding = $1 AND pr = $2 AND phase = 'live'"
                .into()),
            release_one: sql("UPDATE review_locks SET phase = 'released', released_reason = $2, released_at = $3
                 WHERE lock_id = $1 AND phase = 'live'"
                .into()),
            of_pr_released: sql(format!(
                "SELECT {lock} FROM review_locks WHERE binding = $1 AND pr = $2 AND phase = 'released'
                   AND released_at = $3 ORDER BY lock_id"
            )),
        }
    }
}

impl Record for ReviewLock {
    fn read<R: Columns>(r: &R) -> Result<Self, R::Error> {
        Ok(ReviewLock {
            lock_id: r.text(0)?,
            pr: read_pr(r, 1)?,
            holder: read_actor(r, 3)?,
            head: r.text(7)?,
            verdict: r.literal(8, "review verdict", ReviewVerdict::parse)?,
            decided_at: r.time(9)?,
            decisions: r.int(10)?,
            phase: r.literal(11, "lock phase", LockPhase::parse)?,
            released_reason: r.opt_text(12)?,
            released_at: r.opt_time(13)?,
        })
    }
}

fn lock_values(l: &ReviewLock) -> [Value<'_>; LOCK.len()] {
    let [w, p, c, s] = actor_values(&l.holder);
    [
        text(&l.lock_id),
        text(&l.pr.binding),
        pr_number(&l.pr),
        w,
        p,
        c,
        s,
        text(&l.head),
        text(l.verdict.as_str()),
        time(l.decided_at),
        Value::Int(Some(l.decisions)),
        text(l.phase.as_str()),
        opt_text(l.released_reason.as_deref()),
        Value::Time(l.released_at),
    ]
}

/// `Store::record_locked_decision`: the decision, and the lock it takes or corrects, in one
/// transaction. The session's live lock as it stands after (`None` when another decision
/// of the session took a lock first: the decision is still recorded, since the forge took it).
pub(crate) fn decide<E: Engine>(
    e: &E,
    decision: &PrDecision,
    write: &LockWrite,
) -> Result<Option<ReviewLock>, StoreError> {
    let (sql, ledger) = (&e.sql().locks, &e.sql().ledger);
    let fresh = |lock_id: &str| ReviewLock {
        lock_id: lock_id.to_owned(),
        pr: decision.pr.clone(),
        holder: decision.by.clone(),
        head: decision.head.clone(),
        verdict: decision.verdict,
        decided_at: decision.at,
        decisions: 1,
        phase: LockPhase::Live,
        released_reason: None,
        released_at: None,
    };
    // Not retried: a decision that committed would be recorded twice.
    e.write("cannot record the review decision and its lock", Retry::Never, |c| {
        crate::ledger::insert_decision(c, ledger, decision)?;
        let lock_id = match write {
            LockWrite::Take { lock_id } => {
                let lock = fresh(lock_id);
                c.execute(&sql.insert, &lock_values(&lock))?;
                lock_id
            }
            LockWrite::Correct { lock_id } => {
                let v = decision.verdict.as_str();
                c.execute(&sql.correct, &[text(lock_id), text(&decision.head), text(v), time(decision.at)])?;
                lock_id
            }
        };
        let by = &decision.by;
        let live: Vec<ReviewLock> = c.query(&sql.live_of_session, &[text(&by.client), text(&by.session)])?;
        Ok(live.into_iter().find(|l| &l.lock_id == lock_id))
    })
}

/// `Store::live_review_locks`: the live locks of one reviewer session.
pub(crate) fn of_session<E: Engine>(e: &E, client: &str, session: &str) -> Result<Vec<ReviewLock>, StoreError> {
    e.run("cannot read the session's review-decision locks", Retry::Read, |c| {
        c.query(&e.sql().locks.live_of_session, &[text(client), text(session)])
    })
}

/// `Store::list_review_locks`.
pub(crate) fn list<E: Engine>(e: &E, live_only: bool) -> Result<Vec<ReviewLock>, StoreError> {
    let sql = &e.sql().locks;
    e.run("cannot list the review-decision locks", Retry::Read, |c| {
        c.query(if live_only { &sql.list_live } else { &sql.list_all }, &[])
    })
}

/// `Store::release_review_locks`: every live lock on `pr`, released; the ones released.
pub(crate) fn release_pr<E: Engine>(
    e: &E,
    pr: &fleetgate_core::workflow::PrRef,
    reason: &str,
    now: Timestamp,
) -> Result<Vec<ReviewLock>, StoreError> {
    let sql = &e.sql().locks;
    let [binding, number] = key(pr);
    e.write("cannot release the PR's review-decision locks", Retry::Idempotent, |c| {
        if c.execute(&sql.release_pr, &[binding.clone(), number.clone(), text(reason), time(now)])? == 0 {
            return Ok(Vec::new());
        }
        c.query(&sql.of_pr_released, &[binding.clone(), number.clone(), time(now)])
    })
}

/// `Store::release_review_lock`: one live lock, released; it as it stands after.
pub(crate) fn release_one<E: Engine>(
    e: &E,
    lock_id: &str,
    reason: &str,
    now: Timestamp,
) -> Result<Option<ReviewLock>, StoreError> {
    let sql = &e.sql().locks;
    e.write("cannot release the review-decision lock", Retry::Idempotent, |c| {
        if c.execute(&sql.release_one, &[text(lock_id), text(reason), time(now)])? == 0 {
            return Ok(None);
        }
        c.query_opt(&sql.select, &[text(lock_id)])
    })
}
