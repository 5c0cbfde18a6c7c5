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

/// The seed's `assess_provenance`: does a live worker of `generation_id` own this
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
    Ok(provenance_of(
        worker_identity,
        record.as_ref(),
        generation_id,
        env.get(EnvKey::ClientManaged, env_prefix) == Some("1"),
        native_transport_bound,
        now,
        pid_alive,
    ))
}

/// [`assess_provenance`] of a worker row already read.
fn provenance_of(
    worker_identity: &str,
    record: Option<&fleetgate_core::worker::WorkerRecord>,
    generation_id: &str,
    client_managed: bool,
    native_transport_bound: bool,
    now: Timestamp,
    pid_alive: &dyn Fn(Option<i64>) -> bool,
) -> Provenance {
    let alive = record.is_some_and(|r| pid_alive(r.ids.pid));
    assess(&ProvenanceInput {
        worker_identity,
        record,
        generation_id,
        client_managed,
        native_transport_bound,
        now,
        pid_alive: alive,
    })
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
        /// The HTTP principal its session authenticated as, when one did.
        principal: Option<&'a str>,
        /// A shared worker (a stateless HTTP client's, the member's, no one process's): the
        /// pid of the replica serving the call, whose life and environment stand for the
        /// session's in place of the row's pid. `None` for a worker one process owns.
        served_by: Option<i64>,
    },
    /// No worker: why (none was named, the attachment's registration failed, …).
    Nobody(String),
}

impl Caller<'_> {
    /// The worker identity that makes the call, when a worker does.
    pub fn worker(&self) -> Option<&str> {
        match self {
            Self::Worker { identity, .. } => Some(identity),
            Self::Nobody(_) => None,
        }
    }
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
    let (identity, generation, served_by) = match caller {
        Caller::Worker { identity, generation, served_by, .. } => (*identity, *generation, *served_by),
        Caller::Nobody(why) => return unowned(why.clone()),
    };
    // The worker's own process tells whether the client launched it.
    let row = match store.get_worker(identity) {
        Ok(row) => row,
        Err(e) => return unowned(format!("the registry cannot be read: {e}")),
    };
    let generation = generation.map(str::to_owned).or_else(|| row.as_ref().map(|r| r.ids.generation_id.clone()));
    let pid = served_by.or_else(|| row.as_ref().and_then(|r| r.ids.pid));
    let client_managed = pid
        .and_then(|pid| observer.processes().environ(pid).ok())
        .is_some_and(|env| env.get(EnvKey::ClientManaged, env_prefix) == Some("1"));
    let probe = |pid: Option<i64>| served_by.or(pid).is_some_and(|pid| pid > 0 && observer.probe(pid).is_alive());
    provenance_of(identity, row.as_ref(), generation.as_deref().unwrap_or_default(), client_managed, true, now, &probe)
}
