//! The attached clients of one gateway process: each attachment (the stdio client, one HTTP
//! session, one stateless principal) registers its own worker and renews it with its own
//! heartbeat supervisor (a task of the process's supervisor), started at the one point
//! where identity and epoch are both known, presenting exactly what the row records.
//! Detach retires one; shutdown retires all.

use super::identity::Identity;
use crate::heartbeat::{HeartbeatParams, HeartbeatStatus, WorkerHeartbeat, worker_heartbeat_status};
use crate::metrics::GatewayMetrics;
use fleetgate_core::Clock;
use fleetgate_core::worker::{Registration, WorkerIds, worker_identity};
use fleetgate_gateway::AttachmentId;
use fleetgate_store::Store;
use fleetgate_supervise::Supervisor;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// Who attached, resolved: the client name is the principal when one authenticated, else
/// the environment's (stdio) or `clientInfo`.
#[derive(Clone, Debug)]
pub struct Client {
    /// The client name the worker registers (normalised by the store).
    pub name: String,
    /// Its session id.
    pub session: String,
    /// Its instance id.
    pub instance: String,
    /// The HTTP principal, when a tokens file authenticated it.
    pub principal: Option<String>,
    /// A stateless HTTP client: its worker is the member's, not this process's — named by
    /// its session, found or made in the store by whichever replica serves it, renewed by
    /// each that does, owned by no one process (no pid, no generation of one), and never
    /// deregistered by one replica leaving it (another may be serving it): it goes stale.
    pub shared: bool,
}

#[derive(Debug)]
struct Attached {
    worker_identity: String,
    fencing_epoch: i64,
    client_name: String,
    session_id: String,
    principal: Option<String>,
    shared: bool,
    /// Its worker was made by this registration, not found in the store (a shared one).
    made: bool,
    /// Deregister its worker at detach even when shared ([`Attachments::retire_on_detach`]).
    retire: bool,
    heartbeat: WorkerHeartbeat,
}

/// Why the row `found` under a shared worker's identity is not the one `made` would write —
/// another session, client, member or generation, a pid, or stopped — if it is not.
fn shared_mismatch(found: Option<&fleetgate_core::worker::WorkerRecord>, made: &Registration) -> Option<String> {
    let Some(row) = found else { return Some("its row cannot be read".into()) };
    let client = fleetgate_core::client::normalize_client_name(&made.ids.client_name);
    let checks = [
        (row.ids.session_id == made.ids.session_id, "another session"),
        (row.ids.client_name == client, "another client"),
        (row.ids.profile == made.ids.profile && row.ids.role == made.ids.role, "another member"),
        (row.ids.generation_id == made.ids.generation_id, "another generation"),
        (row.ids.pid.is_none(), "a process's pid"),
        (row.status == fleetgate_core::worker::WorkerStatus::Active, "stopped"),
    ];
    checks.iter().find(|(ok, _)| !ok).map(|(_, why)| format!("its row holds {why}"))
}

/// The generation a shared (stateless, member-wide) worker is registered as: no process's.
pub const SHARED_GENERATION: &str = "gen-shared";

/// An attachment's worker, as a call is judged under it.
#[derive(Clone, Debug)]
pub struct AttachedWorker {
    /// Its identity.
    pub identity: String,
    /// The HTTP principal it authenticated as, if any.
    pub principal: Option<String>,
    /// A stateless client's, the member's ([`Client::shared`]).
    pub shared: bool,
    /// Made by this attachment's registration; false for a shared worker found in the store.
    pub made: bool,
}

/// The runtime context's `worker` object: the attachment's worker, as registered.
#[derive(Clone, Debug, Serialize)]
pub struct WorkerView {
    /// Its identity.
    pub worker_identity: String,
    /// The epoch its registration returned.
    pub fencing_epoch: i64,
    /// Its client (normalised).
    pub client_name: String,
    /// Its session.
    pub session_id: String,
    /// The HTTP principal it authenticated as, if any.
    pub principal: Option<String>,
    /// The generation it registered as.
    pub generation_id: String,
    /// A stateless client's worker, the member's, renewed by every replica serving it.
    pub shared: bool,
}

/// What the runtime context shows of one attachment.
#[derive(Clone, Debug)]
pub struct AttachmentView {
    /// Its worker, once registered.
    pub worker: Option<WorkerView>,
    /// Why its registration failed, if it did.
    pub attach_error: Option<String>,
    /// Its heartbeat supervisor's status (or why there is none).
    pub heartbeat: HeartbeatStatus,
    /// Live attachments of the process.
    pub attachments: usize,
}

#[derive(Debug, Default)]
struct State {
    attached: BTreeMap<AttachmentId, Attached>,
    attach_errors: BTreeMap<AttachmentId, String>,
    shut_down: bool,
}

/// The attachments of one process.
#[derive(Debug, Default)]
pub struct Attachments {
    state: Mutex<State>,
}

/// What registering a worker needs from the process.
pub struct Registrar<'a> {
    pub(super) identity: &'a Identity,
    pub(super) store: &'a Arc<dyn Store>,
    pub(super) clock: &'a Arc<dyn Clock>,
    pub(super) supervisor: &'a Supervisor,
    pub(super) ttl_seconds: f64,
    pub(super) interval_override: Option<String>,
    /// Where the heartbeats count renewals and refusals, when anywhere.
    pub(super) metrics: Option<&'a GatewayMetrics>,
}

/// Why an attachment's worker could not be registered.
#[derive(Clone, Debug, thiserror::Error)]
pub enum AttachError {
    /// The store refused the registration.
    #[error("cannot register the worker: {0}")]
    Register(fleetgate_store::StoreError),
    /// The shared worker's row is somebody else's.
    #[error("the shared worker {identity} is not this client's: {why}")]
    NotOurs {
        /// The shared worker's identity.
        identity: String,
        /// How the row found differs.
        why: String,
    },
}

impl Attachments {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Register `attachment`'s worker and start its heartbeat; once per attachment.
    pub fn attach(&self, with: &Registrar<'_>, attachment: AttachmentId, client: Client) -> Result<(), AttachError> {
        let mut state = self.lock();
        if state.shut_down || state.attached.contains_key(&attachment) {
            return Ok(());
        }
        let now = with.clock.now();
        let generation = with.identity.generation();
        let (identity, generation, pid) = if client.shared {
            (format!("wrk-{}", client.session), SHARED_GENERATION.to_owned(), None)
        } else {
            let identity = worker_identity(&client.name, &client.session, now, fleetgate_host::nonce());
            (identity, generation, Some(with.identity.pid))
        };
        let registration = Registration {
            ids: WorkerIds {
                worker_identity: identity,
                client_name: client.name.clone(),
                client_instance_id: client.instance,
                session_id: client.session.clone(),
                generation_id: generation.clone(),
                role: with.identity.member.role.clone(),
                profile: with.identity.member.profile.clone(),
                pid,
            },
            heartbeat_ttl_seconds: with.ttl_seconds,
        };
        let outcome = match with.store.register(&registration, now) {
            Ok(o) => o,
            Err(e) => {
                let why = AttachError::Register(e);
                state.attach_errors.insert(attachment, why.to_string());
                return Err(why);
            }
        };
        if client.shared && !outcome.created {
            // A shared worker's identity is predictable: the row found under it is adopted only
            // when it is what a replica would have made, never one somebody else wrote there.
            let found = with.store.get_worker(&registration.ids.worker_identity).ok().flatten();
            if let Some(why) = shared_mismatch(found.as_ref(), &registration) {
                let why = AttachError::NotOurs { identity: registration.ids.worker_identity.clone(), why };
                state.attach_errors.insert(attachment, why.to_string());
                return Err(why);
            }
        }
        let heartbeat = WorkerHeartbeat::new(
            with.store.clone(),
            with.clock.clone(),
            HeartbeatParams {
                worker_identity: outcome.worker_identity.clone(),
                fencing_epoch: outcome.fencing_epoch,
                session_id: Some(client.session.clone()),
                // Several replicas renew a shared worker: none expects a pid; all expect the
                // shared generation, so a worker claimed away (fenced) stops being renewed.
                generation_id: Some(generation),
                client_name: Some(outcome.client_name.clone()),
                pid,
                ttl_seconds: outcome.heartbeat_ttl_seconds,
                interval_override: with.interval_override.clone(),
            },
        );
        let heartbeat = match with.metrics {
            Some(metrics) => heartbeat.with_metrics(metrics.clone()),
            None => heartbeat,
        };
        heartbeat.start(with.supervisor);
        tracing::info!(%attachment, worker = %outcome.worker_identity, client = %outcome.client_name, "worker attached");
        state.attached.insert(
            attachment,
            Attached {
                worker_identity: outcome.worker_identity,
                fencing_epoch: outcome.fencing_epoch,
                client_name: outcome.client_name,
                session_id: client.session,
                principal: client.principal,
                shared: client.shared,
                made: outcome.created,
                retire: false,
                heartbeat,
            },
        );
        Ok(())
    }

    /// The worker of `attachment`, once registered.
    pub fn worker_of(&self, attachment: AttachmentId) -> Option<AttachedWorker> {
        self.lock().attached.get(&attachment).map(|a| AttachedWorker {
            identity: a.worker_identity.clone(),
            principal: a.principal.clone(),
            shared: a.shared,
            made: a.made,
        })
    }

    /// Have `attachment`'s detach deregister its worker even when it is a shared one: one this
    /// replica made and then refused, which no other replica should go on renewing.
    pub fn retire_on_detach(&self, attachment: AttachmentId) {
        if let Some(a) = self.lock().attached.get_mut(&attachment) {
            a.retire = true;
        }
    }

    /// What the runtime context shows of `attachment`.
    pub fn view(&self, attachment: AttachmentId, generation: &str) -> AttachmentView {
        let state = self.lock();
        let mine = state.attached.get(&attachment);
        AttachmentView {
            worker: mine.map(|a| WorkerView {
                worker_identity: a.worker_identity.clone(),
                fencing_epoch: a.fencing_epoch,
                client_name: a.client_name.clone(),
                session_id: a.session_id.clone(),
                principal: a.principal.clone(),
                generation_id: if a.shared { SHARED_GENERATION.to_owned() } else { generation.to_owned() },
                shared: a.shared,
            }),
            attach_error: state.attach_errors.get(&attachment).cloned(),
            heartbeat: worker_heartbeat_status(mine.map(|a| &a.heartbeat as _)),
            attachments: state.attached.len(),
        }
    }

    /// End one attachment: its heartbeat stopped, its worker deregistered.
    pub fn detach(&self, store: &dyn Store, clock: &dyn Clock, attachment: AttachmentId, reason: &str) {
        // The attachment stays listed until its worker is deregistered: a shutdown that
        // overtakes this detach (the process ending while it runs) still finds it and retires
        // the worker itself, so no worker outlives its process as active.
        let (identity, shared, heartbeat) = {
            let mut state = self.lock();
            state.attach_errors.remove(&attachment);
            let Some(a) = state.attached.get(&attachment) else { return };
            (a.worker_identity.clone(), a.shared && !a.retire, a.heartbeat.clone())
        };
        // Stopping waits for the loop: not under the lock every call's `worker_of` takes.
        heartbeat.stop(&format!("detached: {reason}"));
        if shared {
            tracing::info!(%attachment, worker = %identity, %reason, "left a shared worker to the other replicas");
        } else if let Err(e) = store.deregister_worker(&identity, clock.now()) {
            tracing::warn!("cannot deregister the worker of {attachment}: {e}");
        } else {
            tracing::info!(%attachment, worker = %identity, %reason, "worker detached");
        }
        self.lock().attached.remove(&attachment);
    }

    /// End them all, once: every heartbeat stopped, every worker deregistered. False when
    /// it had already happened.
    pub fn shut_down(&self, store: &dyn Store, clock: &dyn Clock, reason: &str) -> bool {
        let mut state = self.lock();
        if state.shut_down {
            return false;
        }
        state.shut_down = true;
        let attached = std::mem::take(&mut state.attached);
        drop(state);
        let now = clock.now();
        for a in attached.into_values() {
            a.heartbeat.stop(&format!("orderly shutdown: {reason}"));
            if a.shared {
                continue;
            }
            if let Err(e) = store.deregister_worker(&a.worker_identity, now) {
                tracing::warn!("cannot deregister the worker {}: {e}", a.worker_identity);
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::{Registration, SHARED_GENERATION, shared_mismatch};
    use fleetgate_core::Timestamp;
    use fleetgate_core::worker::{WorkerIds, WorkerStatus};

    fn made() -> Registration {
        Registration {
            ids: WorkerIds {
                worker_identity: "wrk-stateless-00ff".into(),
                client_name: "alice".into(),
                client_instance_id: "cursor 1.0".into(),
                session_id: "stateless-00ff".into(),
                generation_id: SHARED_GENERATION.into(),
                role: "merger".into(),
                profile: "prgs-merger".into(),
                pid: None,
            },
            heartbeat_ttl_seconds: 30.0,
        }
    }

    #[test]
    fn a_shared_worker_is_adopted_only_as_a_replica_would_have_made_it() {
        let row = made().into_record(Timestamp::from_unix(1_000));
        assert_eq!(shared_mismatch(Some(&row), &made()), None, "a replica's own row");
        assert!(shared_mismatch(None, &made()).is_some(), "no row read");
        type Change = fn(&mut fleetgate_core::worker::WorkerRecord);
        let squatted: [(&str, Change); 6] = [
            ("another session", |r| r.ids.session_id = "sess-x".into()),
            ("another client", |r| r.ids.client_name = "codex".into()),
            ("another member", |r| r.ids.profile = "prgs-author".into()),
            ("another generation", |r| r.ids.generation_id = "gen-boot-1".into()),
            ("a process's pid", |r| r.ids.pid = Some(4242)),
            ("stopped", |r| r.status = WorkerStatus::Stopped),
        ];
        for (why, change) in squatted {
            let mut other = row.clone();
            change(&mut other);
            let said = shared_mismatch(Some(&other), &made());
            assert!(said.as_deref().is_some_and(|s| s.contains(why)), "{why}: {said:?}");
        }
    }
}
