//! Schema v9's approval requests (`fleetgate_core::approval`): a call a rule asks an
//! operator about, the answer, and the one use an approval allows. Written once for both
//! engines like the rest of the store.
//!
//! **Invariants:** at most one pending request per call (digest): a partial unique index
//! says so, so the retries of a waiting call, on any connection, share one request. An
//! approval is used at most once: the use is a compare-and-set from `approved` to `used`.

use crate::StoreError;
use crate::engine::{Engine, Exec, Retry, Tx};
use crate::ledger::time;
use crate::rows::{Columns, Record, Value, json, names, opt_text, text};
use crate::sql::Dialect;
use fleetgate_core::Timestamp;
use fleetgate_core::approval::{ApprovalRequest, ApprovalState};

/// Schema v9's table, types as placeholders (see `crate::schema`).
pub(crate) const CREATE: &str = "CREATE TABLE IF NOT EXISTS approvals (
        id            {key},
        requested_at  {time} NOT NULL,
        profile       TEXT NOT NULL,
        role          TEXT NOT NULL,
        worker        TEXT,
        principal     TEXT,
        tool          TEXT NOT NULL,
        arguments     TEXT,
        digest        TEXT NOT NULL,
        why           TEXT NOT NULL,
        state         TEXT NOT NULL,
        answered_by   TEXT,
        answered_at   {time},
        answer_reason TEXT,
        used_at       {time}
    );
    CREATE UNIQUE INDEX IF NOT EXISTS approvals_one_pending ON approvals (digest) WHERE state = 'pending';
    CREATE INDEX IF NOT EXISTS approvals_by_digest ON approvals (digest, state);";

const APPROVAL: [&str; 15] = [
    "id",
    "requested_at",
    "profile",
    "role",
    "worker",
    "principal",
    "tool",
    "arguments",
    "digest",
    "why",
    "state",
    "answered_by",
    "answered_at",
    "answer_reason",
    "used_at",
];

/// The statements, in one engine's spelling.
#[derive(Debug)]
pub(crate) struct ApprovalSql {
    insert: String,
    select: String,
    pending_of: String,
    list_pending: String,
    list_all: String,
    answer: String,
    on_record: String,
    pending_of_worker: String,
    use_one: String,
    withdraw: String,
    /// Tell listeners an approval changed (PostgreSQL), when the engine can.
    notify: Option<String>,
}

impl ApprovalSql {
    pub(crate) fn new(d: &Dialect) -> Self {
        let sql = |template: String| template.replace('$', d.mark.encode_utf8(&mut [0; 4]));
        let cols = names(&APPROVAL);
        let values = (1..=APPROVAL.len()).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ");
        Self {
            insert: sql(format!("INSERT INTO approvals ({cols}) VALUES ({values}) ON CONFLICT DO NOTHING")),
            select: sql(format!("SELECT {cols} FROM approvals WHERE id = $1")),
            pending_of: sql(format!("SELECT {cols} FROM approvals WHERE digest = $1 AND state = 'pending'")),
            list_pending: sql(format!(
                "SELECT {cols} FROM approvals WHERE state = 'pending' ORDER BY requested_at, id"
            )),
            list_all: sql(format!("SELECT {cols} FROM approvals ORDER BY requested_at, id")),
            answer: sql("UPDATE approvals SET state = $2, answered_by = $3, answered_at = $4, answer_reason = $5
                 WHERE id = $1 AND state = 'pending'"
                .into()),
            // An answer stands for its TTL from when it was given. No upper bound on
            // `answered_at`: the answering process's clock may run a second ahead of the
            // deciding one's, and an answer given is an answer seen.
            on_record: sql(format!(
                "SELECT {cols} FROM approvals WHERE digest = $1
                   AND (state = 'pending' OR (state IN ('approved', 'denied') AND answered_at >= $2))
                 ORDER BY requested_at, id"
            )),
            pending_of_worker: sql(format!("SELECT {cols} FROM approvals WHERE worker = $1 AND state = 'pending'")),
            use_one: sql("UPDATE approvals SET state = 'used', used_at = $3 WHERE id = $1 AND state = 'approved'
                   AND answered_at >= $2"
                .into()),
            withdraw: sql("UPDATE approvals SET state = 'withdrawn', answered_at = $2, answer_reason = $3
                 WHERE id = $1 AND state = 'pending'"
                .into()),
            notify: d.notify_approval.map(|n| sql(n.into())),
        }
    }
}

impl Record for ApprovalRequest {
    fn read<R: Columns>(r: &R) -> Result<Self, R::Error> {
        let arguments: Option<String> = r.opt_text(7)?;
        Ok(ApprovalRequest {
            id: r.text(0)?,
            requested_at: r.time(1)?,
            profile: r.text(2)?,
            role: r.text(3)?,
            worker: r.opt_text(4)?,
            principal: r.opt_text(5)?,
            tool: r.text(6)?,
            arguments: match arguments {
                Some(text) => serde_json::from_str(&text).map_err(|e| r.invalid(7, e.to_string()))?,
                None => None,
            },
            digest: r.text(8)?,
            why: r.text(9)?,
            state: r.literal(10, "approval state", ApprovalState::parse)?,
            answered_by: r.opt_text(11)?,
            answered_at: r.opt_time(12)?,
            answer_reason: r.opt_text(13)?,
            used_at: r.opt_time(14)?,
        })
    }
}

fn values(a: &ApprovalRequest) -> Result<[Value<'_>; APPROVAL.len()], StoreError> {
    Ok([
        text(&a.id),
        time(a.requested_at),
        text(&a.profile),
        text(&a.role),
        opt_text(a.worker.as_deref()),
        opt_text(a.principal.as_deref()),
        text(&a.tool),
        match &a.arguments {
            Some(arguments) => json("the call's arguments", arguments)?,
            None => Value::Text(None),
        },
        text(&a.digest),
        text(&a.why),
        text(a.state.as_str()),
        opt_text(a.answered_by.as_deref()),
        Value::Time(a.answered_at),
        opt_text(a.answer_reason.as_deref()),
        Value::Time(a.used_at),
    ])
}

/// `Store::request_approval`: `request` recorded pending, unless a pending request names
/// the same call already; the pending request as it stands (the new one, or the earlier).
pub(crate) fn request<E: Engine>(e: &E, request: &ApprovalRequest) -> Result<ApprovalRequest, StoreError> {
    let sql = &e.sql().approvals;
    let row = values(request)?;
    e.run("cannot record the approval request", Retry::Idempotent, |c| {
        c.transaction(Tx::Write, |c| {
            c.execute(&sql.insert, &row)?;
            Ok(c.query_opt(&sql.pending_of, &[text(&request.digest)])?.unwrap_or_else(|| request.clone()))
        })
    })
}

/// `Store::approval`.
pub(crate) fn get<E: Engine>(e: &E, id: &str) -> Result<Option<ApprovalRequest>, StoreError> {
    e.run("cannot read the approval request", Retry::Read, |c| c.query_opt(&e.sql().approvals.select, &[text(id)]))
}

/// `Store::list_approvals`.
pub(crate) fn list<E: Engine>(e: &E, pending_only: bool) -> Result<Vec<ApprovalRequest>, StoreError> {
    let sql = &e.sql().approvals;
    e.run("cannot list the approval requests", Retry::Read, |c| {
        c.query(if pending_only { &sql.list_pending } else { &sql.list_all }, &[])
    })
}

/// `Store::answer_approval`: a pending request approved or denied; it as it stands after,
/// `None` when it was not pending (answered already, withdrawn, or unknown).
pub(crate) fn answer<E: Engine>(
    e: &E,
    id: &str,
    approve: bool,
    by: &str,
    reason: Option<&str>,
    now: Timestamp,
) -> Result<Option<ApprovalRequest>, StoreError> {
    let sql = &e.sql().approvals;
    let state = if approve { ApprovalState::Approved } else { ApprovalState::Denied };
    e.run("cannot answer the approval request", Retry::Idempotent, |c| {
        c.transaction(Tx::Write, |c| {
            let args = [text(id), text(state.as_str()), text(by), time(now), opt_text(reason)];
            if c.execute(&sql.answer, &args)? == 0 {
                return Ok(None);
            }
            // Delivered when the answer commits: a held call's listener wakes to read it.
            if let Some(notify) = &sql.notify {
                c.execute(notify, &[text(id)])?;
            }
            c.query_opt(&sql.select, &[text(id)])
        })
    })
}

/// `Store::approvals_on_record`: the requests about any of `digests` that still stand —
/// pending, or answered (approved and unused, or denied) at `not_before` or later — and how
/// many requests `worker` has waiting.
pub(crate) fn on_record<E: Engine>(
    e: &E,
    digests: &[String],
    worker: Option<&str>,
    not_before: Timestamp,
) -> Result<crate::OnRecord, StoreError> {
    let sql = &e.sql().approvals;
    e.run("cannot read the approval requests", Retry::Read, |c| {
        c.transaction(Tx::Snapshot, |c| {
            let mut requests: Vec<ApprovalRequest> = Vec::new();
            for digest in digests {
                requests.extend(c.query::<ApprovalRequest>(&sql.on_record, &[text(digest), time(not_before)])?);
            }
            let pending_of_worker = match worker {
                Some(w) => c.query::<ApprovalRequest>(&sql.pending_of_worker, &[text(w)])?.len(),
                None => 0,
            };
            Ok(crate::OnRecord { requests, pending_of_worker })
        })
    })
}

/// `Store::use_approval`: the approval `id`, answered at `not_before` or later and not yet
/// used, marked used — once; `None` when it was not there to use (used already, too old,
/// not approved).
pub(crate) fn use_one<E: Engine>(
    e: &E,
    id: &str,
    not_before: Timestamp,
    now: Timestamp,
) -> Result<Option<ApprovalRequest>, StoreError> {
    let sql = &e.sql().approvals;
    // Not retried: a use that committed would be used twice.
    e.run("cannot use the approval", Retry::Never, |c| {
        c.transaction(Tx::Write, |c| {
            if c.execute(&sql.use_one, &[text(id), time(not_before), time(now)])? == 1 {
                return c.query_opt(&sql.select, &[text(id)]);
            }
            Ok(None)
        })
    })
}

/// `Store::withdraw_approval`: a pending request withdrawn (its caller went away); whether
/// it was pending.
pub(crate) fn withdraw<E: Engine>(e: &E, id: &str, why: &str, now: Timestamp) -> Result<bool, StoreError> {
    let sql = &e.sql().approvals;
    e.run("cannot withdraw the approval request", Retry::Idempotent, |c| {
        c.transaction(Tx::Write, |c| {
            let withdrawn = c.execute(&sql.withdraw, &[text(id), time(now), text(why)])? == 1;
            if withdrawn && let Some(notify) = &sql.notify {
                c.execute(notify, &[text(id)])?;
            }
            Ok(withdrawn)
        })
    })
}
