//! Schema v6's tables, written once for both engines like the rest of the store: the PR
//! workflow's leases, decisions and origins and the pinned tool definitions
//! — their column lists, encoders, row decoders, statements and operations.
//!
//! **Invariant:** at most one `claimed` lease per PR and purpose: a partial unique index
//! says so, so two claims racing on two connections (or two machines) cannot both insert;
//! the loser's `INSERT … ON CONFLICT DO NOTHING` changes nothing and it reads the winner.

use crate::LockWrite;
use crate::StoreError;
use crate::engine::{Engine, Exec, Fail, Retry, Tx};
use crate::rows::{Columns, Record, Value, names, opt_text, text};
use crate::sql::Dialect;
use crate::workflow::{PrClaimOutcome, PrLeaseClaim, PrRecords, ToolPin, new_lease_id};
use fleetgate_core::Timestamp;
use fleetgate_core::decision_lock::ReviewLock;
use fleetgate_core::workflow::{
    Actor, ClaimPlan, LeaseTerms, Phase, PrDecision, PrLease, PrOrigin, PrPush, PrRef, Purpose, ReviewVerdict, released,
};

/// The PR workflow's ledger: leases, review decisions, origins, pushes and review-decision locks.
/// Part of [`crate::Store`]; every operation is written once, over any engine, below.
pub trait Ledger {
    /// Claim a PR lease as `claim.plan` says, in one guarded write: the plan's
    /// releases, the PR's expired lease of the purpose marked expired, and the new lease —
    /// unless another live one of the purpose exists, which is answered instead. `now` is
    /// the store's clock (the server's on PostgreSQL).
    fn claim_pr_lease(&self, claim: &PrLeaseClaim, now: Timestamp) -> Result<PrClaimOutcome, StoreError>;

    /// A PR's leases (any phase), decisions (oldest first) and origin, as of one instant.
    fn pr_records(&self, pr: &PrRef) -> Result<PrRecords, StoreError>;

    /// Advance `worker`'s live leases on `pr`: `last_activity` = `now`, expiring `ttl_seconds`
    /// later. The number advanced.
    fn touch_pr_leases(&self, pr: &PrRef, worker: &str, ttl_seconds: i64, now: Timestamp) -> Result<usize, StoreError>;

    /// End a claimed lease with `reason` (`taken_over` marks it expired, anything else
    /// released); with `holder`, only that worker's. False when it was not claimed (by it).
    fn release_pr_lease(
        &self,
        lease_id: &str,
        holder: Option<&str>,
        reason: &str,
        now: Timestamp,
    ) -> Result<bool, StoreError>;

    /// Release every claimed lease of `pr` (after a merge). The number released.
    fn release_pr_leases(&self, pr: &PrRef, reason: &str, now: Timestamp) -> Result<usize, StoreError>;

    /// Every lease (`live_only`: the claimed ones not expired at `now`), by PR.
    fn list_pr_leases(&self, live_only: bool, now: Timestamp) -> Result<Vec<PrLease>, StoreError>;

    /// Record a review decision at its head.
    fn record_pr_decision(&self, decision: &PrDecision) -> Result<(), StoreError>;

    /// Record who created a PR through a gateway; the first record stands.
    fn record_pr_origin(&self, origin: &PrOrigin) -> Result<(), StoreError>;

    /// An operator clears every standing decision `worker` made on `pr` (`why` says who
    /// and why, kept on each). The number cleared.
    fn clear_pr_decisions(&self, pr: &PrRef, worker: &str, why: &str) -> Result<usize, StoreError>;

    /// Record a commit pushed through a gateway.
    fn record_pr_push(&self, push: &PrPush) -> Result<(), StoreError>;

    /// Record a review decision and the review-decision lock it takes or corrects, in one
    /// transaction. The session's lock as it stands after (`None` when another decision of
    /// the session took one first; the decision is recorded either way).
    fn record_locked_decision(&self, decision: &PrDecision, lock: &LockWrite)
    -> Result<Option<ReviewLock>, StoreError>;

    /// The live review-decision locks of one reviewer session (at most one).
    fn live_review_locks(&self, client: &str, session: &str) -> Result<Vec<ReviewLock>, StoreError>;

    /// Every review-decision lock (`live_only`: the held ones), oldest decision first.
    fn list_review_locks(&self, live_only: bool) -> Result<Vec<ReviewLock>, StoreError>;

    /// Release every live lock on `pr` (it was merged or closed); the ones released.
    fn release_review_locks(&self, pr: &PrRef, reason: &str, now: Timestamp) -> Result<Vec<ReviewLock>, StoreError>;

    /// Release one live lock; it as it stands after, `None` when it was not live.
    fn release_review_lock(
        &self,
        lock_id: &str,
        reason: &str,
        now: Timestamp,
    ) -> Result<Option<ReviewLock>, StoreError>;
}

impl<E: Engine> Ledger for E {
    fn claim_pr_lease(&self, claim: &PrLeaseClaim, now: Timestamp) -> Result<PrClaimOutcome, StoreError> {
        self.around("claim_pr_lease", || self::claim(self, claim, now))
    }

    fn pr_records(&self, pr: &PrRef) -> Result<PrRecords, StoreError> {
        self.around("pr_records", || records(self, pr))
    }

    fn touch_pr_leases(&self, pr: &PrRef, worker: &str, ttl_seconds: i64, now: Timestamp) -> Result<usize, StoreError> {
        self.around("touch_pr_leases", || touch(self, pr, worker, ttl_seconds, now))
    }

    fn release_pr_lease(
        &self,
        lease_id: &str,
        holder: Option<&str>,
        reason: &str,
        _now: Timestamp,
    ) -> Result<bool, StoreError> {
        self.around("release_pr_lease", || release(self, lease_id, holder, reason))
    }

    fn release_pr_leases(&self, pr: &PrRef, reason: &str, _now: Timestamp) -> Result<usize, StoreError> {
        self.around("release_pr_leases", || release_pr(self, pr, reason))
    }

    fn list_pr_leases(&self, live_only: bool, now: Timestamp) -> Result<Vec<PrLease>, StoreError> {
        self.around("list_pr_leases", || list(self, live_only, now))
    }

    fn record_pr_decision(&self, decision: &PrDecision) -> Result<(), StoreError> {
        self.around("record_pr_decision", || decide(self, decision))
    }

    fn record_pr_origin(&self, origin: &PrOrigin) -> Result<(), StoreError> {
        self.around("record_pr_origin", || originate(self, origin))
    }

    fn clear_pr_decisions(&self, pr: &PrRef, worker: &str, why: &str) -> Result<usize, StoreError> {
        self.around("clear_pr_decisions", || clear(self, pr, worker, why))
    }

    fn record_pr_push(&self, push: &PrPush) -> Result<(), StoreError> {
        self.around("record_pr_push", || pushed(self, push))
    }

    fn record_locked_decision(
        &self,
        decision: &PrDecision,
        lock: &crate::LockWrite,
    ) -> Result<Option<ReviewLock>, StoreError> {
        self.around("record_locked_decision", || crate::locks::decide(self, decision, lock))
    }

    fn live_review_locks(&self, client: &str, session: &str) -> Result<Vec<ReviewLock>, StoreError> {
        self.around("live_review_locks", || crate::locks::of_session(self, client, session))
    }

    fn list_review_locks(&self, live_only: bool) -> Result<Vec<ReviewLock>, StoreError> {
        self.around("list_review_locks", || crate::locks::list(self, live_only))
    }

    fn release_review_locks(&self, pr: &PrRef, reason: &str, now: Timestamp) -> Result<Vec<ReviewLock>, StoreError> {
        self.around("release_review_locks", || crate::locks::release_pr(self, pr, reason, now))
    }

    fn release_review_lock(
        &self,
        lock_id: &str,
        reason: &str,
        now: Timestamp,
    ) -> Result<Option<ReviewLock>, StoreError> {
        self.around("release_review_lock", || crate::locks::release_one(self, lock_id, reason, now))
    }
}

/// Schema v7's new tables, types as placeholders: commits pushed through a gateway, and the
/// review-decision locks (`crate::locks`).
pub(crate) const CREATE_V7_AND_LOCKS: &str = concat!(
    "CREATE TABLE IF NOT EXISTS pr_pushes (
        id       {id},
        binding  TEXT NOT NULL,
        branch   TEXT NOT NULL,
        head     TEXT NOT NULL,
        {actor},
        at       {time} NOT NULL
    );
    CREATE INDEX IF NOT EXISTS pr_pushes_by_head ON pr_pushes (head);",
    "\n    ",
    crate::locks::create_review_locks!()
);

/// Schema v6, types as placeholders (see `crate::schema`).
pub(crate) const CREATE: &str = "CREATE TABLE IF NOT EXISTS pr_leases (
        lease_id          {key},
        binding           TEXT NOT NULL,
        pr                {int} NOT NULL,
        purpose           TEXT NOT NULL,
        holder_worker     TEXT NOT NULL,
        holder_profile    TEXT NOT NULL,
        holder_client     TEXT NOT NULL,
        holder_session    TEXT NOT NULL,
        candidate_head    TEXT NOT NULL,
        target_branch     TEXT,
        target_branch_sha TEXT,
        phase             TEXT NOT NULL,
        claimed_at        {time} NOT NULL,
        last_activity     {time} NOT NULL,
        expires_at        {time} NOT NULL,
        released_reason   TEXT
    );
    CREATE UNIQUE INDEX IF NOT EXISTS pr_leases_one_claimed ON pr_leases (binding, pr, purpose) WHERE phase = 'claimed';
    CREATE INDEX IF NOT EXISTS pr_leases_by_pr ON pr_leases (binding, pr);
    CREATE TABLE IF NOT EXISTS pr_decisions (
        id       {id},
        binding  TEXT NOT NULL,
        pr       {int} NOT NULL,
        head     TEXT NOT NULL,
        verdict  TEXT NOT NULL,
        {actor},
        at       {time} NOT NULL
    );
    CREATE INDEX IF NOT EXISTS pr_decisions_by_pr ON pr_decisions (binding, pr);
    CREATE TABLE IF NOT EXISTS pr_origins (
        binding  TEXT NOT NULL,
        pr       {int} NOT NULL,
        {actor},
        at       {time} NOT NULL,
        PRIMARY KEY (binding, pr)
    );
    CREATE TABLE IF NOT EXISTS tool_pins (
        profile         TEXT NOT NULL,
        tool            TEXT NOT NULL,
        pinned_digest   TEXT NOT NULL,
        pinned_at       {time} NOT NULL,
        seen_digest     TEXT NOT NULL,
        seen_definition TEXT NOT NULL,
        seen_at         {time} NOT NULL,
        PRIMARY KEY (profile, tool)
    );";

/// The `pr_leases` table.
const LEASE: [&str; 16] = [
    "lease_id",
    "binding",
    "pr",
    "purpose",
    "holder_worker",
    "holder_profile",
    "holder_client",
    "holder_session",
    "candidate_head",
    "target_branch",
    "target_branch_sha",
    "phase",
    "claimed_at",
    "last_activity",
    "expires_at",
    "released_reason",
];

/// The `pr_decisions` table; `id` is the store's.
/// `base` and `cleared` arrived in schema v7 (a decision counts only for the base it was
/// given on, and not once an operator cleared it).
/// `principal` arrived in schema v10 (an HTTP principal's approval is independent only of
/// another principal's work).
const DECISION: [&str; 13] = [
    "id",
    "binding",
    "pr",
    "head",
    "verdict",
    "worker",
    "profile",
    "client",
    "session",
    "at",
    "base",
    "cleared",
    "principal",
];

/// The `pr_pushes` table (v7); `id` is the store's.
/// `principal` arrived in schema v10.
pub(crate) const PUSH: [&str; 10] =
    ["id", "binding", "branch", "head", "worker", "profile", "client", "session", "at", "principal"];

/// The `pr_origins` table.
/// `issues` arrived in schema v7 (`1,2`: the issues a PR references).
/// `principal` arrived in schema v10.
const ORIGIN: [&str; 9] = ["binding", "pr", "worker", "profile", "client", "session", "at", "issues", "principal"];

/// The `tool_pins` table.
const PIN: [&str; 7] = ["profile", "tool", "pinned_digest", "pinned_at", "seen_digest", "seen_definition", "seen_at"];

/// Schema v6's statements in one engine's spelling.
#[derive(Debug)]
pub(crate) struct LedgerSql {
    insert_lease: String,
    select_lease: String,
    leases_of_pr: String,
    live_leases: String,
    all_leases: String,
    end_lease: String,
    expire_leases: String,
    renew_lease: String,
    touch_leases: String,
    release_pr: String,
    insert_decision: String,
    decisions_of_pr: String,
    clear_decisions: String,
    insert_push: String,
    pushes_of_pr: String,
    insert_origin: String,
    origin_of_pr: String,
    pub(crate) observe_pin: String,
    pub(crate) select_pin: String,
    pub(crate) list_pins: String,
    pub(crate) accept_pin: String,
}

fn parameters(n: usize) -> String {
    (1..=n).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ")
}

impl LedgerSql {
    pub(crate) fn new(d: &Dialect) -> Self {
        let sql = |template: String| template.replace('$', d.mark.encode_utf8(&mut [0; 4]));
        let (lease, decision, origin, pin) = (names(&LEASE), names(&DECISION), names(&ORIGIN), names(&PIN));
        let push = names(&PUSH);
        let typed_text = if d.typed_nulls { "$1::text" } else { "$1" };
        Self {
            insert_lease: sql(format!(
                "INSERT INTO pr_leases ({lease}) VALUES ({}) ON CONFLICT DO NOTHING",
                parameters(LEASE.len())
            )),
            select_lease: sql(format!("SELECT {lease} FROM pr_leases WHERE lease_id = $1")),
            leases_of_pr: sql(format!(
                "SELECT {lease} FROM pr_leases WHERE binding = $1 AND pr = $2 ORDER BY claimed_at, lease_id"
            )),
            live_leases: sql(format!(
                "SELECT {lease} FROM pr_leases WHERE phase = 'claimed' AND expires_at > $1
                 ORDER BY binding, pr, claimed_at, lease_id"
            )),
            all_leases: sql(format!("SELECT {lease} FROM pr_leases ORDER BY binding, pr, claimed_at, lease_id")),
            end_lease: sql("UPDATE pr_leases SET phase = $2, released_reason = $3
                 WHERE lease_id = $1 AND phase = 'claimed' AND ($4 = '' OR holder_worker = $4)"
                .into()),
            expire_leases: sql("UPDATE pr_leases SET phase = 'expired', released_reason = 'taken_over'
                 WHERE binding = $1 AND pr = $2 AND purpose = $3 AND phase = 'claimed' AND expires_at <= $4"
                .into()),
            renew_lease: sql("UPDATE pr_leases SET last_activity = $3, expires_at = $4
                 WHERE lease_id = $1 AND holder_worker = $2 AND phase = 'claimed' AND expires_at > $3"
                .into()),
            touch_leases: sql("UPDATE pr_leases SET last_activity = $4, expires_at = $5
                 WHERE binding = $1 AND pr = $2 AND holder_worker = $3 AND phase = 'claimed' AND expires_at > $4"
                .into()),
            release_pr: sql("UPDATE pr_leases SET phase = 'released', released_reason = $3
                 WHERE binding = $1 AND pr = $2 AND phase = 'claimed'"
                .into()),
            insert_decision: sql(format!(
                "INSERT INTO pr_decisions ({}) VALUES ({})",
                names(&DECISION[1..]),
                parameters(DECISION.len() - 1)
            )),
            decisions_of_pr: sql(format!(
                "SELECT {decision} FROM pr_decisions WHERE binding = $1 AND pr = $2 ORDER BY id"
            )),
            clear_decisions: sql("UPDATE pr_decisions SET cleared = $4
                 WHERE binding = $1 AND pr = $2 AND worker = $3 AND cleared IS NULL"
                .into()),
            insert_push: sql(format!(
                "INSERT INTO pr_pushes ({}) VALUES ({})",
                names(&PUSH[1..]),
                parameters(PUSH.len() - 1)
            )),
            pushes_of_pr: sql(format!(
                "SELECT {push} FROM pr_pushes
                 WHERE head IN (SELECT head FROM pr_decisions WHERE binding = $1 AND pr = $2) ORDER BY id"
            )),
            insert_origin: sql(format!(
                "INSERT INTO pr_origins ({origin}) VALUES ({}) ON CONFLICT (binding, pr) DO NOTHING",
                parameters(ORIGIN.len())
            )),
            origin_of_pr: sql(format!("SELECT {origin} FROM pr_origins WHERE binding = $1 AND pr = $2")),
            observe_pin: sql(format!(
                "INSERT INTO tool_pins ({pin}) VALUES ($1, $2, $3, $4, $3, $5, $4)
                 ON CONFLICT (profile, tool) DO UPDATE SET seen_digest = excluded.seen_digest,
                    seen_definition = excluded.seen_definition, seen_at = excluded.seen_at
                 WHERE tool_pins.seen_digest <> excluded.seen_digest"
            )),
            select_pin: sql(format!("SELECT {pin} FROM tool_pins WHERE profile = $1 AND tool = $2")),
            list_pins: sql(format!(
                "SELECT {pin} FROM tool_pins WHERE ({typed_text} IS NULL OR profile = $1) ORDER BY profile, tool"
            )),
            accept_pin: sql("UPDATE tool_pins SET pinned_digest = seen_digest, pinned_at = $4
                 WHERE profile = $1 AND tool = $2 AND seen_digest = $3 AND pinned_digest <> seen_digest"
                .into()),
        }
    }
}

impl Record for PrLease {
    fn read<R: Columns>(r: &R) -> Result<Self, R::Error> {
        let pr = u64::try_from(r.int(2)?).map_err(|_| r.invalid(2, "is negative".into()))?;
        Ok(PrLease {
            lease_id: r.text(0)?,
            terms: LeaseTerms {
                pr: PrRef { binding: r.text(1)?, pr },
                purpose: r.literal(3, "lease purpose", Purpose::parse)?,
                holder: Actor {
                    worker: r.text(4)?,
                    profile: r.text(5)?,
                    client: r.text(6)?,
                    session: r.text(7)?,
                    principal: None,
                },
                candidate_head: r.text(8)?,
                target_branch: r.opt_text(9)?,
                target_branch_sha: r.opt_text(10)?,
            },
            phase: r.literal(11, "lease phase", Phase::parse)?,
            claimed_at: r.time(12)?,
            last_activity: r.time(13)?,
            expires_at: r.time(14)?,
            released_reason: r.opt_text(15)?,
        })
    }
}

pub(crate) fn read_pr<R: Columns>(r: &R, i: usize) -> Result<PrRef, R::Error> {
    let pr = u64::try_from(r.int(i + 1)?).map_err(|_| r.invalid(i + 1, "is negative".into()))?;
    Ok(PrRef { binding: r.text(i)?, pr })
}

pub(crate) fn read_actor<R: Columns>(r: &R, i: usize) -> Result<Actor, R::Error> {
    Ok(Actor {
        worker: r.text(i)?,
        profile: r.text(i + 1)?,
        client: r.text(i + 2)?,
        session: r.text(i + 3)?,
        principal: None,
    })
}

impl Record for PrDecision {
    fn read<R: Columns>(r: &R) -> Result<Self, R::Error> {
        Ok(PrDecision {
            pr: read_pr(r, 1)?,
            head: r.text(3)?,
            verdict: r.literal(4, "review verdict", ReviewVerdict::parse)?,
            by: Actor { principal: r.opt_text(12)?, ..read_actor(r, 5)? },
            at: r.time(9)?,
            base: r.opt_text(10)?,
            cleared: r.opt_text(11)?,
        })
    }
}

impl Record for PrPush {
    fn read<R: Columns>(r: &R) -> Result<Self, R::Error> {
        let by = Actor { principal: r.opt_text(9)?, ..read_actor(r, 4)? };
        Ok(PrPush { binding: r.text(1)?, branch: r.text(2)?, head: r.text(3)?, by, at: r.time(8)? })
    }
}

impl Record for PrOrigin {
    fn read<R: Columns>(r: &R) -> Result<Self, R::Error> {
        let issues = r.opt_text(7)?.unwrap_or_default();
        let issues = issues.split(',').filter_map(|n| n.trim().parse().ok()).collect();
        let by = Actor { principal: r.opt_text(8)?, ..read_actor(r, 2)? };
        Ok(PrOrigin { pr: read_pr(r, 0)?, by, at: r.time(6)?, issues })
    }
}

impl Record for ToolPin {
    fn read<R: Columns>(r: &R) -> Result<Self, R::Error> {
        Ok(ToolPin {
            profile: r.text(0)?,
            tool: r.text(1)?,
            pinned_digest: r.text(2)?,
            pinned_at: r.time(3)?,
            seen_digest: r.text(4)?,
            seen_definition: r.text(5)?,
            seen_at: r.time(6)?,
        })
    }
}

pub(crate) fn pr_number(pr: &PrRef) -> Value<'static> {
    Value::Int(Some(i64::try_from(pr.pr).unwrap_or(i64::MAX)))
}

pub(crate) fn time(t: Timestamp) -> Value<'static> {
    Value::Time(Some(t))
}

fn lease_values(l: &PrLease) -> [Value<'_>; LEASE.len()] {
    [
        text(&l.lease_id),
        text(&l.terms.pr.binding),
        pr_number(&l.terms.pr),
        text(l.terms.purpose.as_str()),
        text(&l.terms.holder.worker),
        text(&l.terms.holder.profile),
        text(&l.terms.holder.client),
        text(&l.terms.holder.session),
        text(&l.terms.candidate_head),
        opt_text(l.terms.target_branch.as_deref()),
        opt_text(l.terms.target_branch_sha.as_deref()),
        text(l.phase.as_str()),
        time(l.claimed_at),
        time(l.last_activity),
        time(l.expires_at),
        opt_text(l.released_reason.as_deref()),
    ]
}

pub(crate) fn actor_values(a: &Actor) -> [Value<'_>; 4] {
    [text(&a.worker), text(&a.profile), text(&a.client), text(&a.session)]
}

pub(crate) fn key<'a>(pr: &'a PrRef) -> [Value<'a>; 2] {
    [text(&pr.binding), pr_number(pr)]
}

fn ended(reason: &str) -> &'static str {
    if reason == released::TAKEN_OVER { Phase::Expired.as_str() } else { Phase::Released.as_str() }
}

fn invalid_ttl(ttl: i64) -> Result<(), StoreError> {
    if ttl < 1 {
        return Err(StoreError::new(
            crate::StoreErrorKind::Invalid,
            format!("a lease TTL must be positive, got {ttl}"),
        ));
    }
    Ok(())
}

/// `Store::claim_pr_lease`, over any engine.
pub(crate) fn claim<E: Engine>(e: &E, claim: &PrLeaseClaim, now: Timestamp) -> Result<PrClaimOutcome, StoreError> {
    invalid_ttl(claim.ttl_seconds)?;
    let sql = &e.sql().ledger;
    let expires = now.plus_seconds(claim.ttl_seconds);
    let fresh = PrLease {
        lease_id: new_lease_id(&claim.terms.pr, claim.terms.purpose, now),
        terms: claim.terms.clone(),
        phase: Phase::Claimed,
        claimed_at: now,
        last_activity: now,
        expires_at: expires,
        released_reason: None,
    };
    // Not retried: a claim that committed would come back as held by itself.
    e.write("cannot claim the PR lease", Retry::Never, |c| {
        match &claim.plan {
            ClaimPlan::Renew { lease_id } => {
                let args = [text(lease_id), text(&claim.terms.holder.worker), time(now), time(expires)];
                if c.execute(&sql.renew_lease, &args)? == 1 {
                    return Ok(PrClaimOutcome::Claimed(c.query_one(&sql.select_lease, &[text(lease_id)])?));
                }
            }
            ClaimPlan::Claim { release } => {
                for (id, reason) in release {
                    c.execute(&sql.end_lease, &[text(id), text(ended(reason)), text(reason), text("")])?;
                }
            }
        }
        let [binding, pr] = key(&claim.terms.pr);
        c.execute(&sql.expire_leases, &[binding, pr, text(claim.terms.purpose.as_str()), time(now)])?;
        if c.execute(&sql.insert_lease, &lease_values(&fresh))? == 1 {
            return Ok(PrClaimOutcome::Claimed(fresh.clone()));
        }
        let winner = c
            .query::<PrLease>(&sql.leases_of_pr, &key(&claim.terms.pr))?
            .into_iter()
            .find(|l| l.terms.purpose == claim.terms.purpose && l.phase == Phase::Claimed);
        winner
            .map(PrClaimOutcome::Held)
            .ok_or_else(|| Fail::Row("the claim neither inserted nor found the holder".into()))
    })
}

/// `Store::pr_records`.
pub(crate) fn records<E: Engine>(e: &E, pr: &PrRef) -> Result<PrRecords, StoreError> {
    let sql = &e.sql().ledger;
    e.run("cannot read the PR's workflow records", Retry::Read, |c| {
        c.transaction(Tx::Snapshot, |c| {
            Ok(PrRecords {
                leases: c.query(&sql.leases_of_pr, &key(pr))?,
                decisions: c.query(&sql.decisions_of_pr, &key(pr))?,
                origin: c.query_opt(&sql.origin_of_pr, &key(pr))?,
                pushes: c.query(&sql.pushes_of_pr, &key(pr))?,
            })
        })
    })
}

/// `Store::touch_pr_leases`.
pub(crate) fn touch<E: Engine>(e: &E, pr: &PrRef, worker: &str, ttl: i64, now: Timestamp) -> Result<usize, StoreError> {
    invalid_ttl(ttl)?;
    let [binding, number] = key(pr);
    let args = [binding, number, text(worker), time(now), time(now.plus_seconds(ttl))];
    e.run("cannot advance the lease", Retry::Idempotent, |c| {
        Ok(usize::try_from(c.execute(&e.sql().ledger.touch_leases, &args)?).unwrap_or(usize::MAX))
    })
}

/// `Store::release_pr_lease`.
pub(crate) fn release<E: Engine>(
    e: &E,
    lease_id: &str,
    holder: Option<&str>,
    reason: &str,
) -> Result<bool, StoreError> {
    let args = [text(lease_id), text(ended(reason)), text(reason), text(holder.unwrap_or(""))];
    e.run("cannot release the lease", Retry::Idempotent, |c| Ok(c.execute(&e.sql().ledger.end_lease, &args)? == 1))
}

/// `Store::release_pr_leases`.
pub(crate) fn release_pr<E: Engine>(e: &E, pr: &PrRef, reason: &str) -> Result<usize, StoreError> {
    let [binding, number] = key(pr);
    let args = [binding, number, text(reason)];
    e.run("cannot release the PR's leases", Retry::Idempotent, |c| {
        Ok(usize::try_from(c.execute(&e.sql().ledger.release_pr, &args)?).unwrap_or(usize::MAX))
    })
}

/// `Store::list_pr_leases`.
pub(crate) fn list<E: Engine>(e: &E, live_only: bool, now: Timestamp) -> Result<Vec<PrLease>, StoreError> {
    let sql = &e.sql().ledger;
    e.run("cannot list the PR leases", Retry::Read, |c| {
        if live_only { c.query(&sql.live_leases, &[time(now)]) } else { c.query(&sql.all_leases, &[]) }
    })
}

/// `Store::record_pr_decision`.
pub(crate) fn decide<E: Engine>(e: &E, d: &PrDecision) -> Result<(), StoreError> {
    // Not retried: a decision that committed would be recorded twice.
    e.run("cannot record the review decision", Retry::Never, |c| insert_decision(c, &e.sql().ledger, d))
}

/// Insert one decision on `c` (inside the caller's transaction, when it runs one).
pub(crate) fn insert_decision<X: Exec>(c: &mut X, sql: &'static LedgerSql, d: &PrDecision) -> Result<(), Fail<X::Db>> {
    let [binding, number] = key(&d.pr);
    let [w, p, cl, s] = actor_values(&d.by);
    let args = [
        binding,
        number,
        text(&d.head),
        text(d.verdict.as_str()),
        w,
        p,
        cl,
        s,
        time(d.at),
        opt_text(d.base.as_deref()),
        opt_text(d.cleared.as_deref()),
        opt_text(d.by.principal.as_deref()),
    ];
    c.execute(&sql.insert_decision, &args)?;
    Ok(())
}

/// `Store::clear_pr_decisions`: the number cleared.
pub(crate) fn clear<E: Engine>(e: &E, pr: &PrRef, worker: &str, why: &str) -> Result<usize, StoreError> {
    let [binding, number] = key(pr);
    let args = [binding, number, text(worker), text(why)];
    e.run("cannot clear the review decisions", Retry::Idempotent, |c| {
        Ok(usize::try_from(c.execute(&e.sql().ledger.clear_decisions, &args)?).unwrap_or(usize::MAX))
    })
}

/// `Store::record_pr_push`.
pub(crate) fn pushed<E: Engine>(e: &E, p: &PrPush) -> Result<(), StoreError> {
    let [w, pr, cl, s] = actor_values(&p.by);
    let args = [
        text(&p.binding),
        text(&p.branch),
        text(&p.head),
        w,
        pr,
        cl,
        s,
        time(p.at),
        opt_text(p.by.principal.as_deref()),
    ];
    // Not retried: a push that committed would be recorded twice.
    e.run("cannot record the push", Retry::Never, |c| {
        c.execute(&e.sql().ledger.insert_push, &args)?;
        Ok(())
    })
}

/// `Store::record_pr_origin`: the first creator recorded wins.
pub(crate) fn originate<E: Engine>(e: &E, o: &PrOrigin) -> Result<(), StoreError> {
    let [binding, number] = key(&o.pr);
    let [w, p, cl, s] = actor_values(&o.by);
    let issues = o.issues.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    let args = [
        binding,
        number,
        w,
        p,
        cl,
        s,
        time(o.at),
        opt_text((!issues.is_empty()).then_some(issues.as_str())),
        opt_text(o.by.principal.as_deref()),
    ];
    e.run("cannot record the PR's creator", Retry::Idempotent, |c| {
        c.execute(&e.sql().ledger.insert_origin, &args)?;
        Ok(())
    })
}
