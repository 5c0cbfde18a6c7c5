//! The store, written once: every [`Store`] operation over any [`Engine`] —
//! which statements it runs, in which transaction, whether it may be retried
//! on a fresh connection, and what it answers. An engine supplies only its
//! dialect ([`crate::engine`]).

use crate::engine::{Engine, Exec, Retry, Tx};
use crate::ledger;
use crate::retention;
use crate::rows::{self, Value, text};
use crate::workflow::{PrClaimOutcome, PrLeaseClaim, PrRecords, ToolPin};
use crate::{FleetSnapshot, HostIdentity, HostObservation, Store, StoreError};
use fleetgate_core::Timestamp;
use fleetgate_core::approval::ApprovalRequest;
use fleetgate_core::audit::AuditEntry;
use fleetgate_core::decision_lock::ReviewLock;
use fleetgate_core::prune::{runtime_prunable, worker_prunable};
use fleetgate_core::runtime::{ProcessScan, RuntimeRecord};
use fleetgate_core::worker::{
    ClaimOutcome, HeartbeatOutcome, HeartbeatRequest, RegisterOutcome, Registration, WorkerRecord, explain_refusal,
};
use fleetgate_core::workflow::{PrDecision, PrLease, PrOrigin, PrPush, PrRef};

impl<E: Engine> Store for E {
    fn describe(&self) -> String {
        self.label()
    }

    fn check_location(&self) -> Result<(), StoreError> {
        Engine::check_location(self)
    }

    fn approval_watch(&self) -> Result<Box<dyn crate::ApprovalWatch>, StoreError> {
        Engine::approval_watch(self)
    }

    fn bounds_waits(&self) -> bool {
        Engine::bounds_waits(self)
    }

    fn schema_version(&self) -> Result<u32, StoreError> {
        let version: i64 =
            self.run("cannot read schema version", Retry::Read, |c| c.query_one(&self.sql().schema_version, &[]))?;
        Ok(u32::try_from(version).unwrap_or(0))
    }

    fn register(&self, registration: &Registration, now: Timestamp) -> Result<RegisterOutcome, StoreError> {
        let sql = self.sql();
        let row = rows::validated(registration, now)?;
        let values = rows::worker_values(&row);
        let id = [text(&row.worker_identity)];
        // Not retried: a first attempt that committed would come back `created: false`.
        let (inserted, existing) = self.run("cannot register worker", Retry::Never, |c| {
            c.transaction(Tx::Write, |c| {
                let inserted = c.execute(&sql.insert_worker, &values)? == 1;
                let existing = if inserted { None } else { c.query_opt(&sql.select_worker, &id)? };
                Ok((inserted, existing))
            })
        })?;
        rows::registered(&row, inserted, existing)
    }

    fn get_worker(&self, worker_identity: &str) -> Result<Option<WorkerRecord>, StoreError> {
        self.run("cannot read worker", Retry::Read, |c| {
            c.query_opt(&self.sql().select_worker, &[text(worker_identity)])
        })
    }

    fn list_workers(&self) -> Result<Vec<WorkerRecord>, StoreError> {
        self.run("cannot list workers", Retry::Read, |c| c.query(&self.sql().list_workers, &[]))
    }

    fn heartbeat(&self, request: &HeartbeatRequest, now: Timestamp) -> Result<HeartbeatOutcome, StoreError> {
        let sql = self.sql();
        let args = rows::renewal_values(request, now);
        let id = [text(&request.worker_identity)];
        // Not retried: a renewal that committed before the connection broke
        // would be counted twice.
        self.run("cannot renew worker", Retry::Never, |c| {
            // Fast path: the guarded UPDATE alone is its own transaction, and
            // the fence is its WHERE clause.
            if c.execute(&sql.renew, &args)? == 1 {
                return Ok(HeartbeatOutcome::renewed());
            }
            // Refused (or the row appeared meanwhile): lock the row, decide
            // again, and read the reasons from the row the UPDATE was judged
            // against, so the answer matches the row.
            c.transaction(Tx::Write, |c| {
                let locked = c.query_opt(&sql.lock_worker, &id)?;
                if c.execute(&sql.renew, &args)? == 1 {
                    return Ok(HeartbeatOutcome::renewed());
                }
                // A row registered between the two statements was not locked
                // by the first: read it (locked) before explaining.
                let row = match locked {
                    Some(row) => Some(row),
                    None => c.query_opt(&sql.lock_worker, &id)?,
                };
                Ok(explain_refusal(row.as_ref(), request))
            })
        })
    }

    fn claim_generation(
        &self,
        worker_identity: &str,
        generation_id: &str,
        now: Timestamp,
    ) -> Result<Option<ClaimOutcome>, StoreError> {
        let sql = self.sql();
        rows::check_generation(generation_id)?;
        let id = [text(worker_identity)];
        // Not retried: a claim that committed would bump the epoch twice.
        self.run("cannot claim generation", Retry::Never, |c| {
            c.transaction(Tx::Write, |c| {
                // The row lock makes every renewal wait for this claim and
                // then judge its WHERE against the new epoch.
                let Some((epoch, renewals)) = c.query_opt::<(i64, i64)>(&sql.lock_epoch, &id)? else {
                    return Ok(None);
                };
                let next = Value::Int(Some(epoch + 1));
                c.execute(&sql.claim, &[text(worker_identity), next, text(generation_id), Value::Time(Some(now))])?;
                Ok(Some(rows::claimed(worker_identity, generation_id, epoch, renewals)))
            })
        })
    }

    fn deregister_worker(&self, worker_identity: &str, _now: Timestamp) -> Result<bool, StoreError> {
        self.run("cannot deregister worker", Retry::Idempotent, |c| {
            Ok(c.execute(&self.sql().deregister_worker, &[text(worker_identity)])? == 1)
        })
    }

    fn upsert_runtime(&self, row: &RuntimeRecord) -> Result<(), StoreError> {
        let values = rows::runtime_values(row);
        self.run("cannot write runtime row", Retry::Idempotent, |c| {
            c.execute(&self.sql().upsert_runtime, &values)?;
            Ok(())
        })
    }

    fn list_runtime(&self) -> Result<Vec<RuntimeRecord>, StoreError> {
        self.run("cannot list runtime rows", Retry::Read, |c| c.query(&self.sql().list_runtime, &[]))
    }

    fn touch_runtime(&self, runtime_id: &str, now: Timestamp) -> Result<bool, StoreError> {
        let args = [text(runtime_id), Value::Time(Some(now))];
        self.run("cannot refresh runtime row", Retry::Idempotent, |c| {
            Ok(c.execute(&self.sql().touch_runtime, &args)? == 1)
        })
    }

    fn mark_runtime_stopped(&self, runtime_id: &str, _now: Timestamp) -> Result<bool, StoreError> {
        self.run("cannot stop runtime row", Retry::Idempotent, |c| {
            Ok(c.execute(&self.sql().stop_runtime, &[text(runtime_id)])? == 1)
        })
    }

    fn prune_workers(&self, older_than_seconds: i64, now: Timestamp) -> Result<Vec<String>, StoreError> {
        let candidates = &self.sql().lock_workers_silent_since;
        prune(self, "cannot prune workers", candidates, &self.sql().delete_worker, older_than_seconds, now, |row| {
            let row: WorkerRecord = row;
            worker_prunable(&row, now, older_than_seconds).then_some(row.worker_identity)
        })
    }

    fn prune_runtime(&self, older_than_seconds: i64, now: Timestamp) -> Result<Vec<String>, StoreError> {
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
    }

    fn prune_audit(&self, before: Timestamp, limit: usize) -> Result<u64, StoreError> {
        retention::audit(self, before, limit)
    }

    fn prune_approvals(&self, before: Timestamp) -> Result<crate::PrunedApprovals, StoreError> {
        retention::approvals(self, before)
    }

    fn prune_observations(&self, before: Timestamp) -> Result<u64, StoreError> {
        retention::observations(self, before)
    }

    fn idle_prs(&self, before: Timestamp) -> Result<Vec<PrRef>, StoreError> {
        retention::idle_prs(self, before)
    }

    fn prune_pr(&self, pr: &PrRef, before: Timestamp) -> Result<bool, StoreError> {
        retention::pr(self, pr, before)
    }

    fn old_pushes(&self, before: Timestamp) -> Result<Vec<(i64, PrPush)>, StoreError> {
        retention::old_pushes(self, before)
    }

    fn prune_pushes(&self, ids: &[i64], before: Timestamp) -> Result<u64, StoreError> {
        retention::pushes(self, ids, before)
    }

    fn append_audit(&self, entry: &AuditEntry) -> Result<i64, StoreError> {
        let values = rows::audit_values(entry)?;
        // Not retried: an append that committed would be recorded twice.
        self.run("cannot append audit entry", Retry::Never, |c| c.query_one(&self.sql().append_audit, &values))
    }

    fn append_audit_batch(
        &self,
        entries: &mut [AuditEntry],
        settle: &mut (dyn FnMut(&mut [AuditEntry]) + Send),
    ) -> Result<Vec<i64>, StoreError> {
        let sql = &self.sql().append_audit;
        // Not retried, like one append.
        self.run("cannot append audit entries", Retry::Never, |c| {
            c.transaction(Tx::Write, |c| {
                settle(entries);
                let mut ids = Vec::with_capacity(entries.len());
                for entry in entries.iter() {
                    ids.push(c.query_one(sql, &rows::audit_values(entry)?)?);
                }
                Ok(ids)
            })
        })
    }

    fn list_audit(&self, since: Option<Timestamp>, limit: usize) -> Result<Vec<AuditEntry>, StoreError> {
        let args = [Value::Time(since), Value::Int(Some(i64::try_from(limit).unwrap_or(i64::MAX)))];
        self.run("cannot list audit entries", Retry::Read, |c| c.query(&self.sql().list_audit, &args))
    }

    fn audit_after(&self, after: i64, limit: usize) -> Result<Vec<AuditEntry>, StoreError> {
        let args = [Value::Int(Some(after)), Value::Int(Some(i64::try_from(limit).unwrap_or(i64::MAX)))];
        self.run("cannot read audit entries", Retry::Read, |c| c.query(&self.sql().audit_after, &args))
    }

    fn server_now(&self) -> Result<Option<Timestamp>, StoreError> {
        self.server_clock()
    }

    fn publish_observation(&self, host: &HostIdentity, scan: &ProcessScan, now: Timestamp) -> Result<bool, StoreError> {
        let values = rows::observation_values(host, scan, now)?;
        self.run("cannot publish host observation", Retry::Idempotent, |c| {
            Ok(c.execute(&self.sql().publish_observation, &values)? == 1)
        })
    }

    fn list_observations(&self) -> Result<Vec<HostObservation>, StoreError> {
        self.run("cannot list host observations", Retry::Read, |c| c.query(&self.sql().list_observations, &[]))
    }

    fn fleet_snapshot(&self) -> Result<FleetSnapshot, StoreError> {
        let sql = self.sql();
        let store = self.identity();
        self.run("cannot read the fleet", Retry::Read, |c| {
            c.transaction(Tx::Snapshot, |c| {
                Ok(FleetSnapshot {
                    runtimes: c.query(&sql.list_runtime, &[])?,
                    workers: c.query(&sql.list_workers, &[])?,
                    observations: c.query(&sql.list_observations, &[])?,
                    store: store.clone(),
                })
            })
        })
    }

    fn claim_pr_lease(&self, claim: &PrLeaseClaim, now: Timestamp) -> Result<PrClaimOutcome, StoreError> {
        ledger::claim(self, claim, now)
    }

    fn pr_records(&self, pr: &PrRef) -> Result<PrRecords, StoreError> {
        ledger::records(self, pr)
    }

    fn touch_pr_leases(&self, pr: &PrRef, worker: &str, ttl_seconds: i64, now: Timestamp) -> Result<usize, StoreError> {
        ledger::touch(self, pr, worker, ttl_seconds, now)
    }

    fn release_pr_lease(
        &self,
        lease_id: &str,
        holder: Option<&str>,
        reason: &str,
        _now: Timestamp,
    ) -> Result<bool, StoreError> {
        ledger::release(self, lease_id, holder, reason)
    }

    fn release_pr_leases(&self, pr: &PrRef, reason: &str, _now: Timestamp) -> Result<usize, StoreError> {
        ledger::release_pr(self, pr, reason)
    }

    fn list_pr_leases(&self, live_only: bool, now: Timestamp) -> Result<Vec<PrLease>, StoreError> {
        ledger::list(self, live_only, now)
    }

    fn record_pr_decision(&self, decision: &PrDecision) -> Result<(), StoreError> {
        ledger::decide(self, decision)
    }

    fn record_pr_origin(&self, origin: &PrOrigin) -> Result<(), StoreError> {
        ledger::originate(self, origin)
    }

    fn clear_pr_decisions(&self, pr: &PrRef, worker: &str, why: &str) -> Result<usize, StoreError> {
        ledger::clear(self, pr, worker, why)
    }

    fn record_pr_push(&self, push: &PrPush) -> Result<(), StoreError> {
        ledger::pushed(self, push)
    }

    fn record_locked_decision(
        &self,
        decision: &PrDecision,
        lock: &crate::LockWrite,
    ) -> Result<Option<ReviewLock>, StoreError> {
        crate::locks::decide(self, decision, lock)
    }

    fn live_review_locks(&self, client: &str, session: &str) -> Result<Vec<ReviewLock>, StoreError> {
        crate::locks::of_session(self, client, session)
    }

    fn list_review_locks(&self, live_only: bool) -> Result<Vec<ReviewLock>, StoreError> {
        crate::locks::list(self, live_only)
    }

    fn request_approval(&self, request: &ApprovalRequest) -> Result<ApprovalRequest, StoreError> {
        crate::approvals::request(self, request)
    }

    fn approval(&self, id: &str) -> Result<Option<ApprovalRequest>, StoreError> {
        crate::approvals::get(self, id)
    }

    fn list_approvals(&self, pending_only: bool) -> Result<Vec<ApprovalRequest>, StoreError> {
        crate::approvals::list(self, pending_only)
    }

    fn answer_approval(
        &self,
        id: &str,
        by: (&fleetgate_core::approval::Approver, &fleetgate_core::person::People),
        approve: bool,
        reason: Option<&str>,
        now: Timestamp,
    ) -> Result<crate::Answered, StoreError> {
        crate::approvals::answer(self, id, by, approve, reason, now)
    }

    fn expire_approvals(&self, answered_before: Timestamp, now: Timestamp) -> Result<Vec<ApprovalRequest>, StoreError> {
        crate::approvals::expire(self, answered_before, now)
    }

    fn approval_events(&self, after: i64, limit: usize) -> Result<Vec<crate::ApprovalEvent>, StoreError> {
        crate::approvals::events_after(self, after, limit)
    }

    fn claim_notify(
        &self,
        target: &str,
        holder: &str,
        start: i64,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Option<i64>, StoreError> {
        crate::approvals::claim_notify(self, target, holder, start, until, now)
    }

    fn advance_notify(&self, target: &str, holder: &str, last: i64, until: Timestamp) -> Result<bool, StoreError> {
        crate::approvals::advance_notify(self, target, holder, last, until)
    }

    fn notify_cursor(&self, target: &str) -> Result<Option<i64>, StoreError> {
        crate::approvals::notify_cursor(self, target)
    }

    fn record_http_session(&self, session: &crate::HttpSession) -> Result<(), StoreError> {
        crate::sessions::record(self, session)
    }

    fn http_session(&self, session_id: &str) -> Result<Option<crate::HttpSession>, StoreError> {
        crate::sessions::find(self, session_id)
    }

    fn forget_http_session(&self, session_id: &str) -> Result<bool, StoreError> {
        crate::sessions::forget(self, session_id)
    }

    fn forget_http_sessions_of(&self, runtime_id: &str) -> Result<usize, StoreError> {
        crate::sessions::forget_runtime(self, runtime_id)
    }

    fn prune_http_sessions(&self, opened_before: Timestamp) -> Result<u64, StoreError> {
        crate::sessions::prune(self, opened_before)
    }

    fn approvals_on_record(
        &self,
        digests: &[String],
        asker: (Option<&str>, &str),
        not_before: Timestamp,
    ) -> Result<crate::OnRecord, StoreError> {
        crate::approvals::on_record(self, digests, asker, not_before)
    }

    fn use_approval(
        &self,
        id: &str,
        not_before: Timestamp,
        now: Timestamp,
    ) -> Result<Option<ApprovalRequest>, StoreError> {
        crate::approvals::use_one(self, id, not_before, now)
    }

    fn withdraw_approval(&self, id: &str, why: &str, now: Timestamp) -> Result<bool, StoreError> {
        crate::approvals::withdraw(self, id, why, now)
    }

    fn release_review_locks(&self, pr: &PrRef, reason: &str, now: Timestamp) -> Result<Vec<ReviewLock>, StoreError> {
        crate::locks::release_pr(self, pr, reason, now)
    }

    fn release_review_lock(
        &self,
        lock_id: &str,
        reason: &str,
        now: Timestamp,
    ) -> Result<Option<ReviewLock>, StoreError> {
        crate::locks::release_one(self, lock_id, reason, now)
    }

    fn observe_tool(
        &self,
        profile: &str,
        tool: &str,
        digest: &str,
        definition: &str,
        now: Timestamp,
    ) -> Result<ToolPin, StoreError> {
        ledger::observe(self, profile, tool, digest, definition, now)
    }

    fn tool_pin(&self, profile: &str, tool: &str) -> Result<Option<ToolPin>, StoreError> {
        ledger::pin(self, profile, tool)
    }

    fn list_tool_pins(&self, profile: Option<&str>) -> Result<Vec<ToolPin>, StoreError> {
        ledger::pins(self, profile)
    }

    fn accept_tool(&self, profile: &str, tool: &str, digest: &str, now: Timestamp) -> Result<bool, StoreError> {
        ledger::accept(self, profile, tool, digest, now)
    }
}

/// One prune, in one write transaction: the `candidates` last heard from at or before
/// `now - older_than_seconds`, locked; the ones `history` keys deleted by that key. Not
/// retried: a prune that committed would answer an empty list the second time.
fn prune<E: Engine, R: rows::Record>(
    engine: &E,
    context: &str,
    candidates: &'static str,
    delete: &'static str,
    older_than_seconds: i64,
    now: Timestamp,
    history: impl Fn(R) -> Option<String> + Sync,
) -> Result<Vec<String>, StoreError> {
    let cutoff = [Value::Time(Some(now.plus_seconds(-older_than_seconds.max(0))))];
    engine.run(context, Retry::Never, |c| {
        c.transaction(Tx::Write, |c| {
            let doomed: Vec<String> = c.query::<R>(candidates, &cutoff)?.into_iter().filter_map(&history).collect();
            for key in &doomed {
                c.execute(delete, &[text(key)])?;
            }
            Ok(doomed)
        })
    })
}
