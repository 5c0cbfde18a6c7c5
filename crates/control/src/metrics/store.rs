//! [`MeteredStore`]: the store as a gateway process uses it, each operation in a `store`
//! span (named by the operation, nested under the gate's or the heartbeat's) and every
//! transient failure (busy, unavailable) counted in
//! `fleetgate_store_transient_failures_total`. Delegates everything else unchanged.

use super::GatewayMetrics;
use fleetgate_core::Timestamp;
use fleetgate_core::approval::ApprovalRequest;
use fleetgate_core::audit::AuditEntry;
use fleetgate_core::decision_lock::ReviewLock;
use fleetgate_core::runtime::{HostIdentity, ProcessScan, RuntimeRecord};
use fleetgate_core::worker::{
    ClaimOutcome, HeartbeatOutcome, HeartbeatRequest, RegisterOutcome, Registration, WorkerRecord,
};
use fleetgate_core::workflow::{PrDecision, PrLease, PrOrigin, PrPush, PrRef};
use fleetgate_store::{
    FleetSnapshot, HostObservation, LockWrite, PrClaimOutcome, PrLeaseClaim, PrRecords, Store, StoreError, ToolPin,
};
use std::sync::Arc;

/// A store whose operations are traced and whose transient failures are counted.
#[derive(Debug)]
pub struct MeteredStore {
    inner: Arc<dyn Store>,
    metrics: GatewayMetrics,
}

impl MeteredStore {
    /// `inner`, counted into `metrics`.
    pub fn wrap(inner: Arc<dyn Store>, metrics: GatewayMetrics) -> Arc<dyn Store> {
        Arc::new(Self { inner, metrics })
    }

    fn metered<T>(&self, op: &'static str, call: impl FnOnce() -> Result<T, StoreError>) -> Result<T, StoreError> {
        let _span = tracing::info_span!("store", op).entered();
        let result = call();
        if let Err(e) = &result
            && e.is_transient()
        {
            self.metrics.store_transient_failures.inc();
            tracing::debug!(op, error = %e, "transient store failure");
        }
        result
    }
}

/// Every fallible operation: traced, counted, delegated.
macro_rules! metered {
    ($(fn $name:ident(&self $(, $arg:ident: $ty:ty)*) -> $ret:ty;)*) => {
        $(fn $name(&self $(, $arg: $ty)*) -> Result<$ret, StoreError> {
            self.metered(stringify!($name), || self.inner.$name($($arg),*))
        })*
    };
}

impl Store for MeteredStore {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn append_audit_batch(
        &self,
        entries: &mut [AuditEntry],
        settle: &mut (dyn FnMut(&mut [AuditEntry]) + Send),
    ) -> Result<Vec<i64>, StoreError> {
        self.metered("append_audit_batch", || self.inner.append_audit_batch(entries, settle))
    }

    fn check_location(&self) -> Result<(), StoreError> {
        self.inner.check_location()
    }

    fn bounds_waits(&self) -> bool {
        self.inner.bounds_waits()
    }

    fn approval_watch(&self) -> Result<Box<dyn fleetgate_store::ApprovalWatch>, StoreError> {
        self.inner.approval_watch()
    }

    metered! {
        fn schema_version(&self) -> u32;
        fn register(&self, registration: &Registration, now: Timestamp) -> RegisterOutcome;
        fn get_worker(&self, worker_identity: &str) -> Option<WorkerRecord>;
        fn list_workers(&self) -> Vec<WorkerRecord>;
        fn heartbeat(&self, request: &HeartbeatRequest, now: Timestamp) -> HeartbeatOutcome;
        fn claim_generation(&self, worker_identity: &str, generation_id: &str, now: Timestamp) -> Option<ClaimOutcome>;
        fn deregister_worker(&self, worker_identity: &str, now: Timestamp) -> bool;
        fn upsert_runtime(&self, row: &RuntimeRecord) -> ();
        fn list_runtime(&self) -> Vec<RuntimeRecord>;
        fn touch_runtime(&self, runtime_id: &str, now: Timestamp) -> bool;
        fn mark_runtime_stopped(&self, runtime_id: &str, now: Timestamp) -> bool;
        fn prune_workers(&self, older_than_seconds: i64, now: Timestamp) -> Vec<String>;
        fn prune_runtime(&self, older_than_seconds: i64, now: Timestamp) -> Vec<String>;
        fn prune_audit(&self, before: Timestamp, limit: usize) -> u64;
        fn prune_approvals(&self, before: Timestamp) -> fleetgate_store::PrunedApprovals;
        fn prune_observations(&self, before: Timestamp) -> u64;
        fn idle_prs(&self, before: Timestamp) -> Vec<fleetgate_core::workflow::PrRef>;
        fn prune_pr(&self, pr: &fleetgate_core::workflow::PrRef, before: Timestamp) -> bool;
        fn old_pushes(&self, before: Timestamp) -> Vec<(i64, fleetgate_core::workflow::PrPush)>;
        fn prune_pushes(&self, ids: &[i64], before: Timestamp) -> u64;
        fn append_audit(&self, entry: &AuditEntry) -> i64;
        fn list_audit(&self, since: Option<Timestamp>, limit: usize) -> Vec<AuditEntry>;
        fn audit_after(&self, after: i64, limit: usize) -> Vec<AuditEntry>;
        fn server_now(&self) -> Option<Timestamp>;
        fn publish_observation(&self, host: &HostIdentity, scan: &ProcessScan, now: Timestamp) -> bool;
        fn list_observations(&self) -> Vec<HostObservation>;
        fn fleet_snapshot(&self) -> FleetSnapshot;
        fn claim_pr_lease(&self, claim: &PrLeaseClaim, now: Timestamp) -> PrClaimOutcome;
        fn pr_records(&self, pr: &PrRef) -> PrRecords;
        fn touch_pr_leases(&self, pr: &PrRef, worker: &str, ttl_seconds: i64, now: Timestamp) -> usize;
        fn release_pr_lease(&self, lease_id: &str, holder: Option<&str>, reason: &str, now: Timestamp) -> bool;
        fn release_pr_leases(&self, pr: &PrRef, reason: &str, now: Timestamp) -> usize;
        fn list_pr_leases(&self, live_only: bool, now: Timestamp) -> Vec<PrLease>;
        fn record_pr_decision(&self, decision: &PrDecision) -> ();
        fn record_pr_origin(&self, origin: &PrOrigin) -> ();
        fn clear_pr_decisions(&self, pr: &PrRef, worker: &str, why: &str) -> usize;
        fn record_pr_push(&self, push: &PrPush) -> ();
        fn record_locked_decision(&self, decision: &PrDecision, lock: &LockWrite) -> Option<ReviewLock>;
        fn live_review_locks(&self, client: &str, session: &str) -> Vec<ReviewLock>;
        fn list_review_locks(&self, live_only: bool) -> Vec<ReviewLock>;
        fn release_review_locks(&self, pr: &PrRef, reason: &str, now: Timestamp) -> Vec<ReviewLock>;
        fn release_review_lock(&self, lock_id: &str, reason: &str, now: Timestamp) -> Option<ReviewLock>;
        fn request_approval(&self, request: &ApprovalRequest) -> ApprovalRequest;
        fn approval(&self, id: &str) -> Option<ApprovalRequest>;
        fn list_approvals(&self, pending_only: bool) -> Vec<ApprovalRequest>;
        fn answer_approval(&self, id: &str, by: (&fleetgate_core::approval::Approver, &fleetgate_core::person::People), approve: bool, reason: Option<&str>, now: Timestamp) -> fleetgate_store::Answered;
        fn expire_approvals(&self, answered_before: Timestamp, now: Timestamp) -> Vec<ApprovalRequest>;
        fn approval_events(&self, after: i64, limit: usize) -> Vec<fleetgate_store::ApprovalEvent>;
        fn claim_notify(&self, target: &str, holder: &str, start: i64, until: Timestamp, now: Timestamp) -> Option<i64>;
        fn advance_notify(&self, target: &str, holder: &str, last: i64, until: Timestamp) -> bool;
        fn notify_cursor(&self, target: &str) -> Option<i64>;
        fn record_http_session(&self, session: &fleetgate_store::HttpSession) -> ();
        fn http_session(&self, session_id: &str) -> Option<fleetgate_store::HttpSession>;
        fn forget_http_session(&self, session_id: &str) -> bool;
        fn forget_http_sessions_of(&self, runtime_id: &str) -> usize;
        fn prune_http_sessions(&self, opened_before: Timestamp) -> u64;
        fn approvals_on_record(&self, digests: &[String], asker: (Option<&str>, &str), not_before: Timestamp) -> fleetgate_store::OnRecord;
        fn use_approval(&self, id: &str, not_before: Timestamp, now: Timestamp) -> Option<ApprovalRequest>;
        fn withdraw_approval(&self, id: &str, why: &str, now: Timestamp) -> bool;
        fn observe_tool(&self, profile: &str, tool: &str, digest: &str, definition: &str, now: Timestamp) -> ToolPin;
        fn tool_pin(&self, profile: &str, tool: &str) -> Option<ToolPin>;
        fn list_tool_pins(&self, profile: Option<&str>) -> Vec<ToolPin>;
        fn accept_tool(&self, profile: &str, tool: &str, digest: &str, now: Timestamp) -> bool;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::GatewayExposition;
    use fleetgate_store::StoreErrorKind;

    #[test]
    fn only_transient_failures_are_counted() {
        let exposition = GatewayExposition::default();
        let dir = tempfile::tempdir().unwrap();
        let real = fleetgate_store::open(&dir.path().join("s.sqlite3").display().to_string()).unwrap();
        let store = MeteredStore { inner: real, metrics: exposition.metrics().clone() };
        assert!(store.list_workers().unwrap().is_empty());
        let counted = || exposition.metrics().store_transient_failures.get();
        assert_eq!(counted(), 0);
        for (kind, after) in [(StoreErrorKind::Busy, 1), (StoreErrorKind::Unavailable, 2), (StoreErrorKind::Io, 2)] {
            let failed = store.metered("schema_version", || Err::<u32, _>(StoreError::new(kind, "failing")));
            assert!(failed.is_err());
            assert_eq!(counted(), after, "{kind:?}");
        }
    }
}
