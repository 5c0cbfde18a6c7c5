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

use crate::engine::{Engine, Exec, Retry};
use crate::error::StoreError;
use crate::ledger::{key, time};
use crate::rows::text;
use crate::rows::{Columns, Record, Value, names};
use crate::sql::Dialect;
use fleetgate_core::Timestamp;
use fleetgate_core::prune::{runtime_prunable, worker_prunable};
use fleetgate_core::runtime::RuntimeRecord;
use fleetgate_core::worker::WorkerRecord;
use fleetgate_core::workflow::{PrPush, PrRef};

/// What a long-running fleet may delete: history no live record refers to.
/// Part of [`crate::Store`]; every operation is written once, over any engine, below.
pub trait Retention {
    /// Delete the worker rows that are history as of `now` — stopped or expired, and last
    /// heard from at least `older_than_seconds` before `now`
    /// ([`fleetgate_core::prune::worker_prunable`]) — in one write transaction that
    /// locks them first, so a row renewed meanwhile is judged as renewed: a live row is
    /// never deleted. The identities deleted, oldest first.
    fn prune_workers(&self, older_than_seconds: i64, now: Timestamp) -> Result<Vec<String>, StoreError>;

    /// Delete the stopped runtime rows last heard from (else registered) at least
    /// `older_than_seconds` before `now` ([`fleetgate_core::prune::runtime_prunable`]),
    /// in one write transaction; a running row is never deleted. The ids deleted.
    fn prune_runtime(&self, older_than_seconds: i64, now: Timestamp) -> Result<Vec<String>, StoreError>;

    /// Delete at most `limit` of the oldest audit entries written before `before` (one
    /// transaction); how many. Called until it answers fewer than `limit`.
    fn prune_audit(&self, before: Timestamp, limit: usize) -> Result<u64, StoreError>;

    /// Delete the approval requests answered, used, withdrawn or expired before `before` — never
    /// a pending one — and their events older than `before` that every notification target
    /// has delivered.
    fn prune_approvals(&self, before: Timestamp) -> Result<PrunedApprovals, StoreError>;

    /// Delete the observations of hosts last heard from before `before`; how many.
    fn prune_observations(&self, before: Timestamp) -> Result<u64, StoreError>;

    /// The PRs whose every record (decisions, origin, leases, locks) is older than `before`,
    /// with no lease claimed and no lock live: the candidates of [`Store::prune_pr`].
    fn idle_prs(&self, before: Timestamp) -> Result<Vec<PrRef>, StoreError>;

    /// Delete every record of `pr` — decisions, origin, leases, locks — if it is still idle
    /// as [`Store::idle_prs`] says (judged again in the deleting transaction); whether it was.
    fn prune_pr(&self, pr: &PrRef, before: Timestamp) -> Result<bool, StoreError>;

    /// The pushes recorded before `before`, with their row ids, oldest first.
    fn old_pushes(&self, before: Timestamp) -> Result<Vec<(i64, PrPush)>, StoreError>;

    /// Delete the pushes `ids` that were recorded before `before`; how many.
    fn prune_pushes(&self, ids: &[i64], before: Timestamp) -> Result<u64, StoreError>;

    /// Forget the session records opened before `opened_before` that nothing can use: a
    /// stateless client's task, or a session of a replica not running; how many.
    fn prune_http_sessions(&self, opened_before: Timestamp) -> Result<u64, StoreError>;
}

impl<E: Engine> Retention for E {
    fn prune_workers(&self, older_than_seconds: i64, now: Timestamp) -> Result<Vec<String>, StoreError> {
        self.around("prune_workers", || {
            let candidates = &self.sql().lock_workers_silent_since;
            prune(self, "cannot prune workers", candidates, &self.sql().delete_worker, older_than_seconds, now, |row| {
                let row: WorkerRecord = row;
                worker_prunable(&row, now, older_than_seconds).then_some(row.ids.worker_identity)
            })
        })
    }

    fn prune_runtime(&self, older_than_seconds: i64, now: Timestamp) -> Result<Vec<String>, StoreError> {
        self.around("prune_runtime", || {
            let candidates = &self.sql().lock_stopped_runtime_since;
            prune(
                self,
                "cannot prune runtime rows",
                candidates,
                &self.sql().delete_runtime,
                older_than_seconds,
                now,
                |row| {
                    let row: RuntimeRecord = row;
                    runtime_prunable(&row, now, older_than_seconds).then_some(row.runtime_id)
                },
            )
        })
    }

    fn prune_audit(&self, before: Timestamp, limit: usize) -> Result<u64, StoreError> {
        self.around("prune_audit", || audit(self, before, limit))
    }

    fn prune_approvals(&self, before: Timestamp) -> Result<crate::PrunedApprovals, StoreError> {
        self.around("prune_approvals", || approvals(self, before))
    }

    fn prune_observations(&self, before: Timestamp) -> Result<u64, StoreError> {
        self.around("prune_observations", || observations(self, before))
    }

    fn idle_prs(&self, before: Timestamp) -> Result<Vec<PrRef>, StoreError> {
        self.around("idle_prs", || idle_prs(self, before))
    }

    fn prune_pr(&self, pr: &PrRef, before: Timestamp) -> Result<bool, StoreError> {
        self.around("prune_pr", || self::pr(self, pr, before))
    }

    fn old_pushes(&self, before: Timestamp) -> Result<Vec<(i64, PrPush)>, StoreError> {
        self.around("old_pushes", || old_pushes(self, before))
    }

    fn prune_pushes(&self, ids: &[i64], before: Timestamp) -> Result<u64, StoreError> {
        self.around("prune_pushes", || pushes(self, ids, before))
    }

    fn prune_http_sessions(&self, opened_before: Timestamp) -> Result<u64, StoreError> {
        self.around("prune_http_sessions", || crate::sessions::prune(self, opened_before))
    }
}

/// One prune, in one write transaction: the `candidates` last heard from at or before
/// `now - older_than_seconds`, locked; the ones `history` keys deleted by that key. Not
/// retried: a prune that committed would answer an empty list the second time.
fn prune<E: Engine, R: Record>(
    engine: &E,
    context: &str,
    candidates: &'static str,
    delete: &'static str,
    older_than_seconds: i64,
    now: Timestamp,
    history: impl Fn(R) -> Option<String> + Sync,
) -> Result<Vec<String>, StoreError> {
    let cutoff = [Value::Time(Some(now.plus_seconds(-older_than_seconds.max(0))))];
    engine.write(context, Retry::Never, |c| {
        let doomed: Vec<String> = c.query::<R>(candidates, &cutoff)?.into_iter().filter_map(&history).collect();
        for key in &doomed {
            c.execute(delete, &[text(key)])?;
        }
        Ok(doomed)
    })
}

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
    e.write("cannot prune the audit log", Retry::Idempotent, |c| {
        c.execute(&e.sql().retention.audit, &[time(before), limit.clone()])
    })
}

/// `Store::prune_approvals`.
pub(crate) fn approvals<E: Engine>(e: &E, before: Timestamp) -> Result<PrunedApprovals, StoreError> {
    let sql = &e.sql().retention;
    e.write("cannot prune the approval requests", Retry::Idempotent, |c| {
        let requests = c.execute(&sql.approvals, &[time(before)])?;
        let events = c.execute(&sql.events, &[time(before), Value::Int(Some(i64::MAX))])?;
        Ok(PrunedApprovals { requests, events })
    })
}

/// `Store::prune_observations`.
pub(crate) fn observations<E: Engine>(e: &E, before: Timestamp) -> Result<u64, StoreError> {
    e.write("cannot prune the host observations", Retry::Idempotent, |c| {
        c.execute(&e.sql().retention.observations, &[time(before)])
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
    e.write("cannot prune the PR's records", Retry::Idempotent, |c| {
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
    e.write("cannot prune the pushes", Retry::Idempotent, |c| {
        let mut deleted = 0;
        for id in ids {
            deleted += c.execute(&sql.push_delete, &[Value::Int(Some(*id)), time(before)])?;
        }
        Ok(deleted)
    })
}
