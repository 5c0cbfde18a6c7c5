//! History a long-running fleet may delete (`fleetgate prune`, `[retention]`): what each
//! table keeps, and the statements that delete the rest. Nothing still referenced goes:
//!
//! * the audit log: entries older than the cutoff, in batches (a year of a busy fleet is one
//!   `DELETE` per batch, never one transaction holding the log);
//! * approval requests: answered, used, withdrawn or expired ones whose last change is older
//!   than the cutoff — never a pending one; their events older than the cutoff that every
//!   notification target has delivered (an event a target still owes stays);
//! * host observations: hosts not heard from since the cutoff;
//! * a PR's records — decisions, origin, leases, review-decision locks — together, only when
//!   none is newer than the cutoff, no lease on it is claimed and no lock live, re-checked in
//!   the deleting transaction ([`idle_prs`] names the candidates; whether the PR is closed is
//!   the forge's to say, asked by the caller);
//! * pushes older than the cutoff, by id (which of them still name a branch's tip is the
//!   forge's to say, asked by the caller).

use crate::engine::{Engine, Exec, Retry, Tx};
use crate::error::StoreError;
use crate::ledger::{key, time};
use crate::rows::{Columns, Record, Value, names};
use crate::sql::Dialect;
use fleetgate_core::Timestamp;
use fleetgate_core::workflow::{PrPush, PrRef};

/// What a prune of the approvals deleted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PrunedApprovals {
    /// Requests.
    pub requests: u64,
    /// Events.
    pub events: u64,
}

/// The statements, in one engine's spelling.
#[derive(Debug)]
pub(crate) struct RetentionSql {
    audit: String,
    approvals: String,
    events: String,
    observations: String,
    idle_prs: String,
    pr_active: String,
    pr_deletes: [String; 4],
    pushes: String,
    push_delete: String,
}

/// Every PR with a record, and when its newest record was written.
const PR_RECORDS: &str = "SELECT binding, pr, MAX(t) AS last FROM (
        SELECT binding, pr, at AS t FROM pr_decisions
        UNION ALL SELECT binding, pr, at FROM pr_origins
        UNION ALL SELECT binding, pr, last_activity FROM pr_leases
        UNION ALL SELECT binding, pr, COALESCE(released_at, decided_at) FROM review_locks
    ) records GROUP BY binding, pr";

impl RetentionSql {
    pub(crate) fn new(d: &Dialect) -> Self {
        let sql = |template: String| template.replace('$', d.mark.encode_utf8(&mut [0; 4]));
        // A PR that is live: a claimed lease or a live lock on it.
        let live =
            "EXISTS (SELECT 1 FROM pr_leases l WHERE l.binding = p.binding AND l.pr = p.pr AND l.phase = 'claimed')
             OR EXISTS (SELECT 1 FROM review_locks k WHERE k.binding = p.binding AND k.pr = p.pr AND k.phase = 'live')";
        Self {
            audit: sql("DELETE FROM audit_log WHERE id IN
                 (SELECT id FROM audit_log WHERE at < $1 ORDER BY id LIMIT $2)"
                .into()),
            approvals: sql("DELETE FROM approvals WHERE state <> 'pending'
                   AND COALESCE(used_at, answered_at, requested_at) < $1"
                .into()),
            // Delivered to every target: at or before the lowest cursor (none: no target owes any).
            events: sql("DELETE FROM approval_events WHERE at < $1
                   AND id <= COALESCE((SELECT MIN(last_event) FROM notify_cursors), $2)"
                .into()),
            observations: sql("DELETE FROM host_observations WHERE observed_at < $1".into()),
            idle_prs: sql(format!(
                "SELECT p.binding, p.pr FROM ({PR_RECORDS}) p WHERE p.last < $1 AND NOT ({live}) ORDER BY p.binding, p.pr"
            )),
            pr_active: sql(format!(
                "SELECT COUNT(*) FROM ({PR_RECORDS}) p WHERE p.binding = $1 AND p.pr = $2 AND (p.last >= $3 OR {live})"
            )),
            pr_deletes: ["pr_decisions", "pr_origins", "pr_leases", "review_locks"]
                .map(|table| sql(format!("DELETE FROM {table} WHERE binding = $1 AND pr = $2"))),
            pushes: sql(format!("SELECT {} FROM pr_pushes WHERE at < $1 ORDER BY id", names(&crate::ledger::PUSH))),
            push_delete: sql("DELETE FROM pr_pushes WHERE id = $1 AND at < $2".into()),
        }
    }
}

/// A PR's key as a row holds it.
struct Key(PrRef);

impl Record for Key {
    fn read<R: Columns>(r: &R) -> Result<Self, R::Error> {
        let pr = r.int(1)?;
        let pr = u64::try_from(pr).map_err(|_| r.invalid(1, format!("PR number {pr} is negative")))?;
        Ok(Key(PrRef { binding: r.text(0)?, pr }))
    }
}

/// A push and its row id.
struct Pushed(i64, PrPush);

impl Record for Pushed {
    fn read<R: Columns>(r: &R) -> Result<Self, R::Error> {
        Ok(Pushed(r.int(0)?, PrPush::read(r)?))
    }
}

/// `Store::prune_audit`.
pub(crate) fn audit<E: Engine>(e: &E, before: Timestamp, limit: usize) -> Result<u64, StoreError> {
    let limit = Value::Int(Some(i64::try_from(limit).unwrap_or(i64::MAX)));
    e.run("cannot prune the audit log", Retry::Idempotent, |c| {
        c.transaction(Tx::Write, |c| c.execute(&e.sql().retention.audit, &[time(before), limit.clone()]))
    })
}

/// `Store::prune_approvals`.
pub(crate) fn approvals<E: Engine>(e: &E, before: Timestamp) -> Result<PrunedApprovals, StoreError> {
    let sql = &e.sql().retention;
    e.run("cannot prune the approval requests", Retry::Idempotent, |c| {
        c.transaction(Tx::Write, |c| {
            let requests = c.execute(&sql.approvals, &[time(before)])?;
            let events = c.execute(&sql.events, &[time(before), Value::Int(Some(i64::MAX))])?;
            Ok(PrunedApprovals { requests, events })
        })
    })
}

/// `Store::prune_observations`.
pub(crate) fn observations<E: Engine>(e: &E, before: Timestamp) -> Result<u64, StoreError> {
    e.run("cannot prune the host observations", Retry::Idempotent, |c| {
        c.transaction(Tx::Write, |c| c.execute(&e.sql().retention.observations, &[time(before)]))
    })
}

/// `Store::idle_prs`.
pub(crate) fn idle_prs<E: Engine>(e: &E, before: Timestamp) -> Result<Vec<PrRef>, StoreError> {
    e.run("cannot list the idle PRs", Retry::Read, |c| {
        Ok(c.query::<Key>(&e.sql().retention.idle_prs, &[time(before)])?.into_iter().map(|k| k.0).collect())
    })
}

/// `Store::prune_pr`.
pub(crate) fn pr<E: Engine>(e: &E, pr: &PrRef, before: Timestamp) -> Result<bool, StoreError> {
    let sql = &e.sql().retention;
    let [binding, number] = key(pr);
    e.run("cannot prune the PR's records", Retry::Idempotent, |c| {
        c.transaction(Tx::Write, |c| {
            // Judged again where it is deleted: a decision, claim or lock since the listing keeps it.
            let active: i64 = c.query_one(&sql.pr_active, &[binding.clone(), number.clone(), time(before)])?;
            if active > 0 {
                return Ok(false);
            }
            for delete in &sql.pr_deletes {
                c.execute(delete, &[binding.clone(), number.clone()])?;
            }
            Ok(true)
        })
    })
}

/// `Store::old_pushes`.
pub(crate) fn old_pushes<E: Engine>(e: &E, before: Timestamp) -> Result<Vec<(i64, PrPush)>, StoreError> {
    e.run("cannot list the old pushes", Retry::Read, |c| {
        Ok(c.query::<Pushed>(&e.sql().retention.pushes, &[time(before)])?.into_iter().map(|p| (p.0, p.1)).collect())
    })
}

/// `Store::prune_pushes`.
pub(crate) fn pushes<E: Engine>(e: &E, ids: &[i64], before: Timestamp) -> Result<u64, StoreError> {
    let sql = &e.sql().retention;
    e.run("cannot prune the pushes", Retry::Idempotent, |c| {
        c.transaction(Tx::Write, |c| {
            let mut deleted = 0;
            for id in ids {
                deleted += c.execute(&sql.push_delete, &[Value::Int(Some(*id)), time(before)])?;
            }
            Ok(deleted)
        })
    })
}
