//! Schema v9's approval requests (`fleetgate_core::approval`): a call a rule asks an
//! operator about, the answer, and the one use an approval allows. Written once for both
//! engines like the rest of the store.
//!
//! **Invariants:** at most one pending request per call (digest): a partial unique index
//! says so, so the retries of a waiting call, on any connection, share one request. An
//! approval is used at most once: the use is a compare-and-set from `approved` to `used`.
//! Answers to one request are serialized (its row is locked while one is judged), so two
//! approvers answering at once are both counted. Every change a person or a script may want
//! to hear of — a new request, an answer, a use, a withdrawal, an expiry — writes an event in
//! the same transaction (schema v11's `approval_events`): notifications and `approvals watch`
//! read those, never the gate.

use crate::StoreError;
use crate::engine::{Engine, Exec, Fail, Retry, Tx};
use crate::ledger::time;
use crate::rows::{Columns, Record, Value, json, names, opt_text, text};
use crate::sql::Dialect;
use crate::{Answered, ApprovalWatch, OnRecord};
use fleetgate_core::Timestamp;
use fleetgate_core::approval::{ApprovalRequest, ApprovalState, Approver};

/// Operators' approvals of single calls, their events and the notification cursors.
/// Part of [`crate::Store`]; every operation is written once, over any engine, below.
pub trait Approvals {
    /// Record a request for an operator's approval of one call, unless a pending request
    /// names the same call (digest) already: the pending request as it stands.
    fn request_approval(&self, request: &ApprovalRequest) -> Result<ApprovalRequest, StoreError>;

    /// One approval request.
    fn approval(&self, id: &str) -> Result<Option<ApprovalRequest>, StoreError>;

    /// The approval requests (`pending_only`: those waiting), oldest first.
    fn list_approvals(&self, pending_only: bool) -> Result<Vec<ApprovalRequest>, StoreError>;

    /// `approver`'s answer to the pending request `id` (approve, or deny), judged on the
    /// request as it stands with `people` saying who is who (`fleetgate_core::person`):
    /// recorded (approved once its required people have, denied at the first denial), refused
    /// (the requester's own person, not among its approvers, answered already, not told apart
    /// from the requester or an earlier approver), or the request is not pending.
    fn answer_approval(
        &self,
        id: &str,
        by: (&Approver, &fleetgate_core::person::People),
        approve: bool,
        reason: Option<&str>,
        now: Timestamp,
    ) -> Result<Answered, StoreError>;

    /// Every approval answered before `answered_before` and never used, marked expired
    /// (with its event); those expired.
    fn expire_approvals(&self, answered_before: Timestamp, now: Timestamp) -> Result<Vec<ApprovalRequest>, StoreError>;

    /// The approvals' events after `after` (an event id; 0: from the first), at most
    /// `limit`, oldest first.
    fn approval_events(&self, after: i64, limit: usize) -> Result<Vec<ApprovalEvent>, StoreError>;

    /// Hold the delivery cursor of notification target `hold.target` as `hold.holder` until
    /// `hold.until` (one process delivers to a target at a time): the last event delivered,
    /// `None` while another holder's hold lasts. A target new to the store starts after event
    /// `start`.
    fn claim_notify(&self, hold: &NotifyHold<'_>, start: i64, now: Timestamp) -> Result<Option<i64>, StoreError>;

    /// `target`'s events up to `last` delivered by `holder`, which keeps the cursor until
    /// `until`; whether it still held it.
    fn advance_notify(&self, target: &str, holder: &str, last: i64, until: Timestamp) -> Result<bool, StoreError>;

    /// The last event delivered to `target` (its cursor), `None` for a target never claimed:
    /// what it still owes is every event after it (`approvals watch`, the dashboard, metrics).
    fn notify_cursor(&self, target: &str) -> Result<Option<i64>, StoreError>;

    /// The requests about any of `digests` (one exact call, and its overrides) that still
    /// stand — pending, or answered at `not_before` or later and not used —, every denial of
    /// `tool` answered at `not_before` or later (a denial stands for its exact call whoever
    /// asks it), and how many requests `worker` has waiting: what the gate decides the call's
    /// operator part from.
    fn approvals_on_record(
        &self,
        digests: &[String],
        asker: (Option<&str>, &str),
        not_before: Timestamp,
    ) -> Result<OnRecord, StoreError>;

    /// A watch on the approvals: [`ApprovalWatch::wait`] returns when an answer may have
    /// been given on any connection of any process or host (PostgreSQL: `LISTEN`, the
    /// answer's own `NOTIFY`; SQLite: the file changing, by inotify), so a held call waits on
    /// the store's word instead of polling it.
    fn approval_watch(&self) -> Result<Box<dyn ApprovalWatch>, StoreError>;

    /// Use the approval `id` — approved, answered at `not_before` or later, not used — once:
    /// it as used, `None` when it is not there to use (another identical call used it).
    fn use_approval(
        &self,
        id: &str,
        not_before: Timestamp,
        now: Timestamp,
    ) -> Result<Option<ApprovalRequest>, StoreError>;

    /// Withdraw a pending request (its caller went away); whether it was pending.
    fn withdraw_approval(&self, id: &str, why: &str, now: Timestamp) -> Result<bool, StoreError>;
}

impl<E: Engine> Approvals for E {
    fn request_approval(&self, request: &ApprovalRequest) -> Result<ApprovalRequest, StoreError> {
        self.around("request_approval", || self::request(self, request))
    }

    fn approval(&self, id: &str) -> Result<Option<ApprovalRequest>, StoreError> {
        self.around("approval", || get(self, id))
    }

    fn list_approvals(&self, pending_only: bool) -> Result<Vec<ApprovalRequest>, StoreError> {
        self.around("list_approvals", || list(self, pending_only))
    }

    fn answer_approval(
        &self,
        id: &str,
        by: (&fleetgate_core::approval::Approver, &fleetgate_core::person::People),
        approve: bool,
        reason: Option<&str>,
        now: Timestamp,
    ) -> Result<crate::Answered, StoreError> {
        self.around("answer_approval", || answer(self, id, by, approve, reason, now))
    }

    fn expire_approvals(&self, answered_before: Timestamp, now: Timestamp) -> Result<Vec<ApprovalRequest>, StoreError> {
        self.around("expire_approvals", || expire(self, answered_before, now))
    }

    fn approval_events(&self, after: i64, limit: usize) -> Result<Vec<crate::ApprovalEvent>, StoreError> {
        self.around("approval_events", || events_after(self, after, limit))
    }

    fn claim_notify(&self, hold: &NotifyHold<'_>, start: i64, now: Timestamp) -> Result<Option<i64>, StoreError> {
        self.around("claim_notify", || claim_notify(self, hold, start, now))
    }

    fn advance_notify(&self, target: &str, holder: &str, last: i64, until: Timestamp) -> Result<bool, StoreError> {
        self.around("advance_notify", || advance_notify(self, target, holder, last, until))
    }

    fn notify_cursor(&self, target: &str) -> Result<Option<i64>, StoreError> {
        self.around("notify_cursor", || notify_cursor(self, target))
    }

    fn approvals_on_record(
        &self,
        digests: &[String],
        asker: (Option<&str>, &str),
        not_before: Timestamp,
    ) -> Result<crate::OnRecord, StoreError> {
        self.around("approvals_on_record", || on_record(self, digests, asker, not_before))
    }

    fn approval_watch(&self) -> Result<Box<dyn crate::ApprovalWatch>, StoreError> {
        Engine::approval_watch(self)
    }

    fn use_approval(
        &self,
        id: &str,
        not_before: Timestamp,
        now: Timestamp,
    ) -> Result<Option<ApprovalRequest>, StoreError> {
        self.around("use_approval", || use_one(self, id, not_before, now))
    }

    fn withdraw_approval(&self, id: &str, why: &str, now: Timestamp) -> Result<bool, StoreError> {
        self.around("withdraw_approval", || withdraw(self, id, why, now))
    }
}

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

/// Schema v11's events and delivery cursors, types as placeholders.
pub(crate) const CREATE_EVENTS: &str = "CREATE TABLE IF NOT EXISTS approval_events (
        id          {id},
        at          {time} NOT NULL,
        kind        TEXT NOT NULL,
        request_id  TEXT NOT NULL,
        body        TEXT NOT NULL
    );
    CREATE TABLE IF NOT EXISTS notify_cursors (
        target      {key},
        last_event  {int} NOT NULL,
        holder      TEXT,
        held_until  {time}
    );";

/// Schema v13's column added to `approvals`: what the call does, in words.
pub(crate) const ADD_DOES: &[(&str, &str, &str)] = &[("approvals", "does", "TEXT")];

/// Schema v14's indexes: what every decision under `[approvals]` reads — the denials of a
/// tool since a time, a worker's pending requests — found without a scan of the table.
pub(crate) const CREATE_DECISION_INDEXES: &str =
    "CREATE INDEX IF NOT EXISTS approvals_denied_by_tool ON approvals (tool, answered_at) WHERE state = 'denied';
    CREATE INDEX IF NOT EXISTS approvals_pending_by_worker ON approvals (worker) WHERE state = 'pending';";

/// Schema v11's columns added to `approvals`.
pub(crate) const ADD: &[(&str, &str, &str)] = &[
    ("approvals", "approvers", "TEXT"),
    ("approvals", "required", "BIGINT NOT NULL DEFAULT 1"),
    ("approvals", "answers", "TEXT"),
];

const APPROVAL: [&str; 19] = [
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
    "approvers",
    "required",
    "answers",
    "does",
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
    lock_one: String,
    on_record: String,
    denied_of_tool: String,
    pending_of_worker: String,
    use_one: String,
    withdraw: String,
    expire: String,
    expired_since: String,
    event: String,
    events_after: String,
    claim_cursor: String,
    insert_cursor: String,
    advance_cursor: String,
    cursor_of: String,
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
            answer: sql("UPDATE approvals SET state = $2, answered_by = $3, answered_at = $4, answer_reason = $5,
                 answers = $6 WHERE id = $1 AND state = 'pending'"
                .into()),
            lock_one: sql(format!("SELECT {cols} FROM approvals WHERE id = $1 {}", d.lock_rows)),
            // An answer stands for its TTL from when it was given. No upper bound on
            // `answered_at`: the answering process's clock may run a second ahead of the
            // deciding one's, and an answer given is an answer seen.
            on_record: sql(format!(
                "SELECT {cols} FROM approvals WHERE digest = $1
                   AND (state = 'pending' OR (state IN ('approved', 'denied') AND answered_at >= $2))
                 ORDER BY requested_at, id"
            )),
            // A denial stands for its exact call whoever asks it: the caller compares arguments.
            denied_of_tool: sql(format!(
                "SELECT {cols} FROM approvals WHERE tool = $1 AND state = 'denied' AND answered_at >= $2
                 ORDER BY requested_at, id"
            )),
            pending_of_worker: sql(format!("SELECT {cols} FROM approvals WHERE worker = $1 AND state = 'pending'")),
            use_one: sql("UPDATE approvals SET state = 'used', used_at = $3 WHERE id = $1 AND state = 'approved'
                   AND answered_at >= $2"
                .into()),
            withdraw: sql("UPDATE approvals SET state = 'withdrawn', answered_at = $2, answer_reason = $3
                 WHERE id = $1 AND state = 'pending'"
                .into()),
            // An approval answered before `$1` and never used has expired.
            expire: sql("UPDATE approvals SET state = 'expired' WHERE state = 'approved' AND answered_at < $1".into()),
            expired_since: sql(format!(
                "SELECT {cols} FROM approvals WHERE state = 'approved' AND answered_at < $1 {}",
                d.lock_rows
            )),
            event: sql("INSERT INTO approval_events (at, kind, request_id, body) VALUES ($1, $2, $3, $4)".into()),
            events_after: sql(
                "SELECT id, at, kind, body FROM approval_events WHERE id > $1 ORDER BY id LIMIT $2".into()
            ),
            claim_cursor: sql(format!(
                "SELECT last_event, holder, held_until FROM notify_cursors WHERE target = $1 {}",
                d.lock_rows
            )),
            insert_cursor: sql(
                "INSERT INTO notify_cursors (target, last_event, holder, held_until) VALUES ($1, $2, $3, $4)
                 ON CONFLICT DO NOTHING"
                    .into(),
            ),
            advance_cursor: sql(
                "UPDATE notify_cursors SET last_event = $2, holder = $3, held_until = $4 WHERE target = $1".into(),
            ),
            cursor_of: sql("SELECT last_event, holder, held_until FROM notify_cursors WHERE target = $1".into()),
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
            approvers: match r.opt_text(15)? {
                Some(text) => serde_json::from_str(&text).map_err(|e| r.invalid(15, e.to_string()))?,
                None => Vec::new(),
            },
            required: u32::try_from(r.int(16)?).unwrap_or(1).max(1),
            answers: match r.opt_text(17)? {
                Some(text) => serde_json::from_str(&text).map_err(|e| r.invalid(17, e.to_string()))?,
                None => Vec::new(),
            },
            does: r.opt_text(18)?,
        })
    }
}

/// Who holds a notification target's delivery cursor, and until when: named, so that the
/// hold's end cannot be passed where the present is meant.
#[derive(Clone, Copy, Debug)]
pub struct NotifyHold<'a> {
    /// The notification target's name.
    pub target: &'a str,
    /// The delivering process.
    pub holder: &'a str,
    /// When the hold ends unless renewed.
    pub until: Timestamp,
}

/// One event of the approvals (`approvals watch`, notifications): what happened, and the
/// request as it stood after.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ApprovalEvent {
    /// Its place in the store's sequence.
    pub id: i64,
    /// When.
    pub at: Timestamp,
    /// `requested`, `answered`, `used`, `withdrawn`, `expired`.
    pub kind: String,
    /// The request after it.
    pub request: ApprovalRequest,
}

impl Record for ApprovalEvent {
    fn read<R: Columns>(r: &R) -> Result<Self, R::Error> {
        let body: String = r.text(3)?;
        Ok(ApprovalEvent {
            id: r.int(0)?,
            at: r.time(1)?,
            kind: r.text(2)?,
            request: serde_json::from_str(&body).map_err(|e| r.invalid(3, e.to_string()))?,
        })
    }
}

/// What a delivery cursor holds: the last event delivered, and who holds it until when.
type Cursor = (i64, Option<String>, Option<Timestamp>);

impl Record for Cursor {
    fn read<R: Columns>(r: &R) -> Result<Self, R::Error> {
        Ok((r.int(0)?, r.opt_text(1)?, r.opt_time(2)?))
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
        json("the request's approvers", &a.approvers)?,
        Value::Int(Some(i64::from(a.required.max(1)))),
        json("the request's answers", &a.answers)?,
        opt_text(a.does.as_deref()),
    ])
}

/// Record an event of `request` (as it stands after `kind`), in the transaction that made it.
fn event<C: Exec>(
    c: &mut C,
    sql: &'static ApprovalSql,
    kind: &str,
    request: &ApprovalRequest,
    now: Timestamp,
) -> Result<(), Fail<C::Db>> {
    let body = json("the approval event", request)?;
    c.execute(&sql.event, &[time(now), text(kind), text(&request.id), body])?;
    // Delivered when the change commits: a held call's listener, a watch, a notifier wake.
    if let Some(notify) = &sql.notify {
        c.execute(notify, &[text(&request.id)])?;
    }
    Ok(())
}

/// The request `id` as the change (`kind`) just made in this transaction left it, with its
/// event recorded.
fn changed<C: Exec>(
    c: &mut C,
    sql: &'static ApprovalSql,
    kind: &str,
    id: &str,
    now: Timestamp,
) -> Result<Option<ApprovalRequest>, Fail<C::Db>> {
    let request = c.query_opt::<ApprovalRequest>(&sql.select, &[text(id)])?;
    if let Some(request) = &request {
        event(c, sql, kind, request, now)?;
    }
    Ok(request)
}

/// `Store::request_approval`: `request` recorded pending, unless a pending request names
/// the same call already; the pending request as it stands (the new one, or the earlier).
pub(crate) fn request<E: Engine>(e: &E, request: &ApprovalRequest) -> Result<ApprovalRequest, StoreError> {
    let sql = &e.sql().approvals;
    let row = values(request)?;
    e.write("cannot record the approval request", Retry::Idempotent, |c| {
        let made = c.execute(&sql.insert, &row)? == 1;
        let pending = c.query_opt(&sql.pending_of, &[text(&request.digest)])?.unwrap_or_else(|| request.clone());
        if made {
            event(c, sql, "requested", &pending, request.requested_at)?;
        }
        Ok(pending)
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

/// `Store::answer_approval`: `approver`'s answer to the pending request `id`, judged on the
/// request as it stands with its row locked (so two approvers answering at once are both
/// counted): recorded, refused with why, or the request is not pending.
pub(crate) fn answer<E: Engine>(
    e: &E,
    id: &str,
    (approver, people): (&Approver, &fleetgate_core::person::People),
    approve: bool,
    reason: Option<&str>,
    now: Timestamp,
) -> Result<crate::Answered, StoreError> {
    let sql = &e.sql().approvals;
    e.write("cannot answer the approval request", Retry::Never, |c| {
        let Some(current) = c.query_opt::<ApprovalRequest>(&sql.lock_one, &[text(id)])? else {
            return Ok(crate::Answered::NotPending(None));
        };
        if current.state != ApprovalState::Pending {
            return Ok(crate::Answered::NotPending(Some(current)));
        }
        let next = match fleetgate_core::approval::answered(&current, approver, people, approve, reason, now) {
            Ok(next) => next,
            Err(why) => return Ok(crate::Answered::Refused(current, why.0)),
        };
        let args = [
            text(id),
            text(next.state.as_str()),
            opt_text(next.answered_by.as_deref()),
            Value::Time(next.answered_at),
            opt_text(next.answer_reason.as_deref()),
            json("the request's answers", &next.answers)?,
        ];
        c.execute(&sql.answer, &args)?;
        event(c, sql, "answered", &next, now)?;
        Ok(crate::Answered::Recorded(next))
    })
}

/// `Store::approvals_on_record`: the requests about any of `digests` that still stand —
/// pending, or answered (approved and unused, or denied) at `not_before` or later —, the
/// denials of `tool` answered at `not_before` or later, and how many requests `worker` has
/// waiting.
pub(crate) fn on_record<E: Engine>(
    e: &E,
    digests: &[String],
    (worker, tool): (Option<&str>, &str),
    not_before: Timestamp,
) -> Result<crate::OnRecord, StoreError> {
    let sql = &e.sql().approvals;
    e.run("cannot read the approval requests", Retry::Read, |c| {
        c.transaction(Tx::Snapshot, |c| {
            let mut requests: Vec<ApprovalRequest> = Vec::new();
            for digest in digests {
                requests.extend(c.query::<ApprovalRequest>(&sql.on_record, &[text(digest), time(not_before)])?);
            }
            let denials = c.query::<ApprovalRequest>(&sql.denied_of_tool, &[text(tool), time(not_before)])?;
            let pending_of_worker = match worker {
                Some(w) => c.query::<ApprovalRequest>(&sql.pending_of_worker, &[text(w)])?.len(),
                None => 0,
            };
            Ok(crate::OnRecord { requests, denials, pending_of_worker })
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
    e.write("cannot use the approval", Retry::Never, |c| {
        if c.execute(&sql.use_one, &[text(id), time(not_before), time(now)])? == 1 {
            return changed(c, sql, "used", id, now);
        }
        Ok(None)
    })
}

/// `Store::withdraw_approval`: a pending request withdrawn (its caller went away); whether
/// it was pending.
pub(crate) fn withdraw<E: Engine>(e: &E, id: &str, why: &str, now: Timestamp) -> Result<bool, StoreError> {
    let sql = &e.sql().approvals;
    e.write("cannot withdraw the approval request", Retry::Idempotent, |c| {
        let withdrawn = c.execute(&sql.withdraw, &[text(id), time(now), text(why)])? == 1;
        if withdrawn {
            changed(c, sql, "withdrawn", id, now)?;
        }
        Ok(withdrawn)
    })
}

/// `Store::expire_approvals`: every approval answered before `answered_before` and never
/// used, marked expired (each with its event); those expired.
pub(crate) fn expire<E: Engine>(
    e: &E,
    answered_before: Timestamp,
    now: Timestamp,
) -> Result<Vec<ApprovalRequest>, StoreError> {
    let sql = &e.sql().approvals;
    e.write("cannot expire the approvals", Retry::Idempotent, |c| {
        let mut lapsed = c.query::<ApprovalRequest>(&sql.expired_since, &[time(answered_before)])?;
        if lapsed.is_empty() {
            return Ok(lapsed);
        }
        c.execute(&sql.expire, &[time(answered_before)])?;
        for r in &mut lapsed {
            r.state = ApprovalState::Expired;
            event(c, sql, "expired", r, now)?;
        }
        Ok(lapsed)
    })
}

/// `Store::approval_events`: the events after `after`, at most `limit`, oldest first.
pub(crate) fn events_after<E: Engine>(e: &E, after: i64, limit: usize) -> Result<Vec<ApprovalEvent>, StoreError> {
    let sql = &e.sql().approvals;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    e.run("cannot read the approval events", Retry::Read, |c| {
        c.query(&sql.events_after, &[Value::Int(Some(after)), Value::Int(Some(limit))])
    })
}

/// `Store::claim_notify`: hold the delivery cursor of `target` as `holder` until `until`,
/// unless another holder's hold runs past `now`; the last event delivered, `None` when held
/// elsewhere. A target never delivered to starts at `start` (the events before it are not
/// sent: a new target hears what happens from now on).
pub(crate) fn claim_notify<E: Engine>(
    e: &E,
    hold: &NotifyHold<'_>,
    start: i64,
    now: Timestamp,
) -> Result<Option<i64>, StoreError> {
    let NotifyHold { target, holder, until } = *hold;
    let sql = &e.sql().approvals;
    e.write("cannot claim the notification cursor", Retry::Never, |c| {
        let args = [text(target), Value::Int(Some(start)), text(holder), time(until)];
        c.execute(&sql.insert_cursor, &args)?;
        let (last, held_by, held_until): Cursor = c.query_one(&sql.claim_cursor, &[text(target)])?;
        let elsewhere = held_by.as_deref().is_some_and(|h| h != holder) && held_until.is_some_and(|t| t > now);
        if elsewhere {
            return Ok(None);
        }
        c.execute(&sql.advance_cursor, &[text(target), Value::Int(Some(last)), text(holder), time(until)])?;
        Ok(Some(last))
    })
}

/// `Store::advance_notify`: the events of `target` up to `last` delivered, by `holder` (only
/// while it holds the cursor); whether it did.
pub(crate) fn advance_notify<E: Engine>(
    e: &E,
    target: &str,
    holder: &str,
    last: i64,
    until: Timestamp,
) -> Result<bool, StoreError> {
    let sql = &e.sql().approvals;
    e.write("cannot advance the notification cursor", Retry::Idempotent, |c| {
        let Some((_, held_by, _)): Option<Cursor> = c.query_opt(&sql.claim_cursor, &[text(target)])? else {
            return Ok(false);
        };
        if held_by.as_deref() != Some(holder) {
            return Ok(false);
        }
        c.execute(&sql.advance_cursor, &[text(target), Value::Int(Some(last)), text(holder), time(until)])?;
        Ok(true)
    })
}

/// `Store::notify_cursor`: the last event delivered to `target`, `None` when never claimed.
pub(crate) fn notify_cursor<E: Engine>(e: &E, target: &str) -> Result<Option<i64>, StoreError> {
    let sql = &e.sql().approvals;
    e.run("cannot read the notification cursor", Retry::Read, |c| {
        Ok(c.query_opt::<Cursor>(&sql.cursor_of, &[text(target)])?.map(|(last, _, _)| last))
    })
}
