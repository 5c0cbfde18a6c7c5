//! The fleet registry's operations ([`Registry`]): workers and their fenced leases, runtime
//! rows, the hosts' observations, and the fleet read at one instant. Written once for both
//! engines.

use crate::engine::{Engine, Exec, Retry, Tx};
use crate::rows::{self, Value, text};
use crate::{FleetSnapshot, HostIdentity, HostObservation, StoreError};
use fleetgate_core::Timestamp;
use fleetgate_core::runtime::{ProcessScan, RuntimeRecord};
use fleetgate_core::worker::{
    ClaimOutcome, HeartbeatOutcome, HeartbeatRequest, RegisterOutcome, Registration, WorkerRecord, explain_refusal,
};

/// The fleet registry: workers (their fenced leases), runtime rows and the hosts' observations.
/// Part of [`crate::Store`]; every operation is written once, over any engine, below.
pub trait Registry {
    /// Register a worker. An identity that exists already is left as it is
    /// (`created: false`): registering twice never makes a second row.
    fn register(&self, registration: &Registration, now: Timestamp) -> Result<RegisterOutcome, StoreError>;

    /// One worker row.
    fn get_worker(&self, worker_identity: &str) -> Result<Option<WorkerRecord>, StoreError>;

    /// Every worker row, oldest registration first.
    fn list_workers(&self) -> Result<Vec<WorkerRecord>, StoreError>;

    /// A fenced renewal: renewed only when the row exists, meets
    /// every supplied expectation, is active and holds the presented epoch.
    fn heartbeat(&self, request: &HeartbeatRequest, now: Timestamp) -> Result<HeartbeatOutcome, StoreError>;

    /// Bump the epoch and record `generation_id` as the owner; every holder of
    /// the old epoch is fenced from then on. `None` when no such worker exists.
    fn claim_generation(
        &self,
        worker_identity: &str,
        generation_id: &str,
        now: Timestamp,
    ) -> Result<Option<ClaimOutcome>, StoreError>;

    /// Mark a worker stopped (orderly shutdown). False when it does not exist.
    fn deregister_worker(&self, worker_identity: &str, now: Timestamp) -> Result<bool, StoreError>;

    /// Write a runtime row, its host included, replacing the row of the same
    /// `runtime_id`: one statement, so a row is never seen without the host
    /// it was written with.
    fn upsert_runtime(&self, row: &RuntimeRecord) -> Result<(), StoreError>;

    /// Every runtime row, stopped ones included, ordered by `runtime_id`.
    fn list_runtime(&self) -> Result<Vec<RuntimeRecord>, StoreError>;

    /// Refresh a running row's `last_heartbeat_at`. False when no running row has that id.
    fn touch_runtime(&self, runtime_id: &str, now: Timestamp) -> Result<bool, StoreError>;

    /// Mark a runtime row stopped (orderly shutdown). False when it does not exist.
    fn mark_runtime_stopped(&self, runtime_id: &str, now: Timestamp) -> Result<bool, StoreError>;

    /// Publish this host's process scan, taken at `now`, replacing the host's
    /// previous one. An observation older than the stored one of the same
    /// boot is dropped (false), so a late writer never turns the clock back;
    /// one from a new boot always replaces it.
    fn publish_observation(&self, host: &HostIdentity, scan: &ProcessScan, now: Timestamp) -> Result<bool, StoreError>;

    /// The latest observation of every host, ordered by `host_id`. Whether
    /// one is fresh enough to corroborate a member is the caller's decision.
    fn list_observations(&self) -> Result<Vec<HostObservation>, StoreError>;

    /// What a look at the fleet needs, read in one transaction: every runtime
    /// row (its host in it), every worker row and every host's observation,
    /// as [`list_runtime`](Self::list_runtime), [`list_workers`](Self::list_workers)
    /// and [`list_observations`](Self::list_observations) order them — all
    /// as of one instant, so no write lands between two of the lists.
    fn fleet_snapshot(&self) -> Result<FleetSnapshot, StoreError>;
}

impl<E: Engine> Registry for E {
    fn register(&self, registration: &Registration, now: Timestamp) -> Result<RegisterOutcome, StoreError> {
        self.around("register", || {
            let sql = self.sql();
            let row = rows::validated(registration, now)?;
            let values = rows::worker_values(&row);
            let id = [text(&row.ids.worker_identity)];
            // Not retried: a first attempt that committed would come back `created: false`.
            let (inserted, existing) = self.write("cannot register worker", Retry::Never, |c| {
                let inserted = c.execute(&sql.insert_worker, &values)? == 1;
                let existing = if inserted { None } else { c.query_opt(&sql.select_worker, &id)? };
                Ok((inserted, existing))
            })?;
            rows::registered(&row, inserted, existing)
        })
    }

    fn get_worker(&self, worker_identity: &str) -> Result<Option<WorkerRecord>, StoreError> {
        self.around("get_worker", || {
            self.run("cannot read worker", Retry::Read, |c| {
                c.query_opt(&self.sql().select_worker, &[text(worker_identity)])
            })
        })
    }

    fn list_workers(&self) -> Result<Vec<WorkerRecord>, StoreError> {
        self.around("list_workers", || {
            self.run("cannot list workers", Retry::Read, |c| c.query(&self.sql().list_workers, &[]))
        })
    }

    fn heartbeat(&self, request: &HeartbeatRequest, now: Timestamp) -> Result<HeartbeatOutcome, StoreError> {
        self.around("heartbeat", || {
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
        })
    }

    fn claim_generation(
        &self,
        worker_identity: &str,
        generation_id: &str,
        now: Timestamp,
    ) -> Result<Option<ClaimOutcome>, StoreError> {
        self.around("claim_generation", || {
            let sql = self.sql();
            rows::check_generation(generation_id)?;
            let id = [text(worker_identity)];
            // Not retried: a claim that committed would bump the epoch twice.
            self.write("cannot claim generation", Retry::Never, |c| {
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
        self.around("deregister_worker", || {
            self.run("cannot deregister worker", Retry::Idempotent, |c| {
                Ok(c.execute(&self.sql().deregister_worker, &[text(worker_identity)])? == 1)
            })
        })
    }

    fn upsert_runtime(&self, row: &RuntimeRecord) -> Result<(), StoreError> {
        self.around("upsert_runtime", || {
            let values = rows::runtime_values(row);
            self.run("cannot write runtime row", Retry::Idempotent, |c| {
                c.execute(&self.sql().upsert_runtime, &values)?;
                Ok(())
            })
        })
    }

    fn list_runtime(&self) -> Result<Vec<RuntimeRecord>, StoreError> {
        self.around("list_runtime", || {
            self.run("cannot list runtime rows", Retry::Read, |c| c.query(&self.sql().list_runtime, &[]))
        })
    }

    fn touch_runtime(&self, runtime_id: &str, now: Timestamp) -> Result<bool, StoreError> {
        self.around("touch_runtime", || {
            let args = [text(runtime_id), Value::Time(Some(now))];
            self.run("cannot refresh runtime row", Retry::Idempotent, |c| {
                Ok(c.execute(&self.sql().touch_runtime, &args)? == 1)
            })
        })
    }

    fn mark_runtime_stopped(&self, runtime_id: &str, _now: Timestamp) -> Result<bool, StoreError> {
        self.around("mark_runtime_stopped", || {
            self.run("cannot stop runtime row", Retry::Idempotent, |c| {
                Ok(c.execute(&self.sql().stop_runtime, &[text(runtime_id)])? == 1)
            })
        })
    }

    fn publish_observation(&self, host: &HostIdentity, scan: &ProcessScan, now: Timestamp) -> Result<bool, StoreError> {
        self.around("publish_observation", || {
            let values = rows::observation_values(host, scan, now)?;
            self.run("cannot publish host observation", Retry::Idempotent, |c| {
                Ok(c.execute(&self.sql().publish_observation, &values)? == 1)
            })
        })
    }

    fn list_observations(&self) -> Result<Vec<HostObservation>, StoreError> {
        self.around("list_observations", || {
            self.run("cannot list host observations", Retry::Read, |c| c.query(&self.sql().list_observations, &[]))
        })
    }

    fn fleet_snapshot(&self) -> Result<FleetSnapshot, StoreError> {
        self.around("fleet_snapshot", || {
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
        })
    }
}
