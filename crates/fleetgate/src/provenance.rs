//! Session provenance against the store: reads the row, probes its pid, and
//! hands both to the pure [`fleetgate_core::provenance::assess`].

use fleetgate_core::Timestamp;
use fleetgate_core::env::{EnvKey, EnvSnapshot};
use fleetgate_core::provenance::{Provenance, ProvenanceInput, assess};
use fleetgate_store::{Store, StoreError};

/// Does a live worker of `generation_id` own this session? `pid_alive` is the
/// probe (signal 0 in production); an unknown answer counts as not alive.
#[expect(clippy::too_many_arguments, reason = "mirrors the seed's assess_provenance contract")]
pub fn assess_provenance(
    store: &dyn Store,
    worker_identity: &str,
    generation_id: &str,
    env: &EnvSnapshot,
    env_prefix: &str,
    native_transport_bound: bool,
    now: Timestamp,
    pid_alive: &dyn Fn(Option<i64>) -> bool,
) -> Result<Provenance, StoreError> {
    let record = store.get_worker(worker_identity)?;
    let alive = record.as_ref().is_some_and(|r| pid_alive(r.pid));
    Ok(assess(&ProvenanceInput {
        worker_identity,
        record: record.as_ref(),
        generation_id,
        client_managed: env.get(EnvKey::ClientManaged, env_prefix) == Some("1"),
        native_transport_bound,
        now,
        pid_alive: alive,
    }))
}
