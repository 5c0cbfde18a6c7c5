//! This process's runtime row: written once when the transport is bound (with its host, in
//! the same write), then kept fresh — `last_heartbeat_at` touched and this host's process
//! scan published, so members on other hosts can be corroborated by it — by a loop the
//! supervision crate runs, on the one interval policy the heartbeats use.

use super::identity::Identity;
use crate::gate::{Observer, scan_host};
use fleetgate_config::FleetConfig;
use fleetgate_core::interval::{Cadence, heartbeat_interval_for};
use fleetgate_core::inventory::{GatewayProof, PROOF_VERSION};
use fleetgate_core::runtime::{RuntimeRecord, RuntimeStatus, StoreIdentity};
use fleetgate_core::{Clock, Timestamp};
use fleetgate_store::{HostIdentity, Store};
use fleetgate_supervise::{StopSignal, Supervisor};
use std::sync::Arc;
use std::time::Duration;

/// The supervised task (and flow) that keeps the row fresh.
pub const REFRESH_TASK: &str = "runtime-row";

/// The runtime row `identity` writes about itself, serving over `transport` on `host`.
pub fn runtime_row(
    identity: &Identity,
    transport: &str,
    client_managed: bool,
    host: Option<HostIdentity>,
    now: Timestamp,
) -> RuntimeRecord {
    let b = identity.binding.as_ref();
    RuntimeRecord {
        runtime_id: identity.runtime_id.clone(),
        namespace: identity.member.namespace.clone(),
        profile: identity.member.profile.clone(),
        role: identity.member.role.clone(),
        remote: b.map(|b| b.remote.clone()),
        org: b.map(|b| b.org.clone()),
        repo: b.map(|b| b.repo.clone()),
        repository_root: identity.repo_root.as_ref().map(|p| p.display().to_string()),
        pid: identity.pid,
        cohort_id: identity.cohort.cohort_id.clone(),
        cohort_source: identity.cohort.cohort_source,
        client_provenance: if client_managed { "client_managed".into() } else { "unmanaged".into() },
        boot_id: identity.boot_id.clone(),
        startup_head: identity.startup_head.clone(),
        daemon_start_head: identity.startup_head.clone(),
        transport: transport.into(),
        registered_at: now,
        last_heartbeat_at: Some(now),
        status: RuntimeStatus::Running,
        host,
    }
}

/// The proof this gateway publishes about itself (issue 54), from its row as written, its
/// process stamp, its fleet and its store; `None` without a stamp, a host or a store identity
/// (then other fleets cannot tell it theirs from ours, and their gates close for it).
pub fn gateway_proof(
    identity: &Identity,
    row: &RuntimeRecord,
    fleet: &str,
    store: Option<StoreIdentity>,
) -> Option<GatewayProof> {
    Some(GatewayProof {
        version: PROOF_VERSION,
        process: identity.stamp?,
        host: row.host.clone()?,
        store: store?,
        fleet: fleet.to_owned(),
        runtime_id: row.runtime_id.clone(),
        namespace: row.namespace.clone(),
        profile: row.profile.clone(),
        role: row.role.clone(),
        repository_root: row.repository_root.clone(),
        binding: identity.binding.clone(),
        transport: row.transport.clone(),
        registered_at: row.registered_at,
    })
}

/// Keeps one process's row: written, refreshed, stopped.
pub struct RowKeeper {
    pub(super) store: Arc<dyn Store>,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) config: Arc<FleetConfig>,
    pub(super) observer: Arc<dyn Observer>,
    pub(super) runtime_id: String,
    pub(super) host: Option<HostIdentity>,
    /// The interval override (`<PREFIX>WORKER_HEARTBEAT_INTERVAL_SECONDS`), as read.
    pub(super) interval_override: Option<String>,
}

impl std::fmt::Debug for RowKeeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowKeeper").field("runtime_id", &self.runtime_id).finish_non_exhaustive()
    }
}

/// Why the runtime row could not be written, or its refresh started.
#[derive(Clone, Debug, thiserror::Error)]
pub enum RowError {
    /// The store refused the row.
    #[error("cannot write the runtime row: {0}")]
    Write(fleetgate_store::StoreError),
    /// The refresh task could not be started.
    #[error("cannot start the runtime-row refresh: {0}")]
    Start(fleetgate_supervise::SpawnError),
}

impl RowKeeper {
    /// Write the row (its host in it: one write), then publish this host's scan once.
    pub fn write(&self, row: &RuntimeRecord) -> Result<(), RowError> {
        self.store.upsert_runtime(row).map_err(RowError::Write)?;
        self.refresh();
        Ok(())
    }

    /// Publish this gateway's proof (once, after its row is written): other fleets on this
    /// host tell it theirs from ours by it. A gateway that cannot publish one still serves;
    /// the others' gates close for it, and the log says why.
    pub fn publish_proof(&self, identity: &Identity, row: &RuntimeRecord) {
        let store = match self.store.fleet_snapshot() {
            Ok(snapshot) => snapshot.store,
            Err(e) => {
                tracing::warn!("no proof published: the store cannot say which it is: {e}");
                return;
            }
        };
        let Some(proof) = gateway_proof(identity, row, &self.config.name, store) else {
            tracing::warn!(
                "no proof published (this process's stamp, its host or its store is unknown): other fleets on this \
                 host close their gates for this gateway"
            );
            return;
        };
        // Held until the process exits: it stands while the process does (a gateway stopping
        // is still another fleet's until it is gone).
        match fleetgate_host::proof::publish(&proof.to_bytes()) {
            Ok(fd) => fleetgate_host::proof::hold_until_exit(fd),
            Err(e) => tracing::warn!("{e}: other fleets on this host close their gates for this gateway"),
        }
    }

    /// Keep the row fresh and publish this host's scan; say on each tick when the store
    /// was deleted or replaced under this process (the gate refuses mutations meanwhile).
    pub fn refresh(&self) {
        if let Err(e) = self.store.check_location() {
            tracing::error!(
                "{e}: mutating calls are refused (store_replaced) until it is put back or this gateway restarts"
            );
        }
        let now = self.clock.now();
        if let Err(e) = self.store.touch_runtime(&self.runtime_id, now) {
            tracing::warn!("runtime row refresh failed: {e}");
        }
        if let Some(host) = &self.host {
            let scan = scan_host(&self.config, self.observer.processes());
            if let Err(e) = self.store.publish_observation(host, &scan, now) {
                tracing::warn!("cannot publish this host's observation: {e}");
            }
        }
    }

    /// How often the row is refreshed: the heartbeat interval of the fleet's TTL.
    pub fn interval(&self) -> Duration {
        Duration::from_secs_f64(heartbeat_interval_for(
            self.config.heartbeat_ttl_seconds,
            self.interval_override.as_deref(),
        ))
    }

    /// Refresh every [`interval`](Self::interval) as a task of `supervisor` until its flow
    /// is cancelled; each refresh runs on the blocking pool.
    pub fn start(self: &Arc<Self>, supervisor: &Supervisor) -> Result<(), RowError> {
        let keeper = Arc::clone(self);
        supervisor
            .spawn_with_stop(REFRESH_TASK, REFRESH_TASK, move |stop: StopSignal| {
                let keeper = Arc::clone(&keeper);
                async move { keeper.run(stop).await }
            })
            .map_err(RowError::Start)
    }

    async fn run(self: Arc<Self>, stop: StopSignal) -> Result<(), crate::error::TaskFailed> {
        let epoch = tokio::time::Instant::now();
        let mut cadence = Cadence::new(self.interval(), Duration::ZERO);
        loop {
            tokio::select! {
                () = stop.stopped() => return Ok(()),
                () = tokio::time::sleep_until(epoch + cadence.poll_timeout()) => {}
            }
            if cadence.handle_timeout(epoch.elapsed()) {
                let keeper = Arc::clone(&self);
                tokio::task::spawn_blocking(move || keeper.refresh())
                    .await
                    .map_err(|e| crate::error::TaskFailed::new("refresh", e))?;
            }
        }
    }

    /// Mark the row stopped (orderly shutdown).
    pub fn stop(&self) {
        if let Err(e) = self.store.mark_runtime_stopped(&self.runtime_id, self.clock.now()) {
            tracing::warn!("cannot mark the runtime row stopped: {e}");
        }
    }
}
