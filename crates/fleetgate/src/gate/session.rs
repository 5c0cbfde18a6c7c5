//! The session evidence: does a live worker own the caller's session? The worker's row from
//! the store, its pid probed and its process's environment read through the [`Observer`]
//! (`<PREFIX>CLIENT_MANAGED=1`), handed to the pure `fleetgate_core::provenance::assess`.
//! The same for a gateway judging its own attachment and for `fleetgate capability
//! --worker` judging a worker from outside.

use super::observer::Observer;
use fleetgate_core::env::{EnvKey, EnvSnapshot};
use fleetgate_core::provenance::{Ownership, Provenance, ProvenanceInput, assess};
use fleetgate_core::{BlockerKind, Timestamp};
use fleetgate_store::{Store, StoreError};

/// The seed's `assess_provenance` (SPEC §2): does a live worker of `generation_id` own this
/// session? `env` is the worker process's environment; `pid_alive` the probe (signal 0 in
/// production; an unknown answer counts as not alive).
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

/// Who makes the call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Caller<'a> {
    /// A registered worker. `generation`: the one the caller runs as (a gateway knows its
    /// own; from outside, `None` takes the row's).
    Worker {
        /// The worker identity.
        identity: &'a str,
        /// The generation the caller runs as.
        generation: Option<&'a str>,
    },
    /// No worker: why (none was named, the attachment's registration failed, …).
    Nobody(String),
}

/// The provenance of `caller`'s session as of `now`; an unreadable store leaves it
/// unowned, with the error named.
pub fn session_provenance(
    store: &dyn Store,
    observer: &dyn Observer,
    caller: &Caller<'_>,
    env_prefix: &str,
    now: Timestamp,
) -> Provenance {
    let unowned = |reason: String| Provenance {
        session_ownership: Ownership::Unowned,
        blocker_kind: Some(BlockerKind::SessionAttachmentMissing),
        reasons: vec![reason],
        heartbeat_age_seconds: None,
    };
    let (identity, generation) = match caller {
        Caller::Worker { identity, generation } => (*identity, *generation),
        Caller::Nobody(why) => return unowned(why.clone()),
    };
    // The worker's own process tells whether the client launched it.
    let (pid, generation) = match store.get_worker(identity) {
        Ok(row) => {
            (row.as_ref().and_then(|r| r.pid), generation.map(str::to_owned).or_else(|| row.map(|r| r.generation_id)))
        }
        Err(e) => return unowned(format!("the registry cannot be read: {e}")),
    };
    let env = pid.and_then(|pid| observer.processes().environ(pid).ok()).unwrap_or_default();
    let probe = |pid: Option<i64>| pid.is_some_and(|pid| pid > 0 && observer.probe(pid).is_alive());
    assess_provenance(store, identity, generation.as_deref().unwrap_or_default(), &env, env_prefix, true, now, &probe)
        .unwrap_or_else(|e| unowned(format!("the registry cannot be read: {e}")))
}
