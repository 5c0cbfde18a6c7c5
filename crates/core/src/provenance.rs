//! Session provenance: does a live worker own this session?

use crate::blocker::BlockerKind;
use crate::time::Timestamp;
use crate::worker::{WorkerRecord, WorkerStatus, is_live};
use serde::Serialize;

/// Owned or not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ownership {
    /// A live worker of this generation, natively bound and client-managed.
    Owned,
    /// Anything else.
    Unowned,
}

/// What ownership is decided from. The row is read by the shell; the pid
/// probe's answer arrives as a value (`false` for dead or unknown).
#[derive(Clone, Copy, Debug)]
pub struct ProvenanceInput<'a> {
    /// The worker asked about.
    pub worker_identity: &'a str,
    /// Its row, if any.
    pub record: Option<&'a WorkerRecord>,
    /// The generation this process runs as.
    pub generation_id: &'a str,
    /// `<PREFIX>CLIENT_MANAGED=1` in this process's environment.
    pub client_managed: bool,
    /// The MCP transport is bound natively (not a replayed or proxied session).
    pub native_transport_bound: bool,
    /// The decision instant.
    pub now: Timestamp,
    /// The probe said the row's pid is alive.
    pub pid_alive: bool,
}

/// The verdict.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Provenance {
    /// `owned` or `unowned`.
    pub session_ownership: Ownership,
    /// Null when owned.
    pub blocker_kind: Option<BlockerKind>,
    /// Every unmet condition.
    pub reasons: Vec<String>,
    /// Seconds since the last renewal, when a row exists.
    pub heartbeat_age_seconds: Option<f64>,
}

/// Owned only when the row is live, the generation matches, the transport is
/// natively bound and the process is client-managed. A generation mismatch is
/// `worker_fenced`; every other failure is `session_attachment_missing`.
pub fn assess(input: &ProvenanceInput<'_>) -> Provenance {
    let unowned = |kind, reasons, age| Provenance {
        session_ownership: Ownership::Unowned,
        blocker_kind: Some(kind),
        reasons,
        heartbeat_age_seconds: age,
    };
    let Some(row) = input.record else {
        return unowned(
            BlockerKind::SessionAttachmentMissing,
            vec![format!("no worker is registered as {}", input.worker_identity)],
            None,
        );
    };
    let liveness = is_live(row, input.now, input.pid_alive);
    let mut reasons = Vec::new();
    let mut fenced = false;
    if row.ids.generation_id != input.generation_id {
        fenced = true;
        reasons.push(format!(
            "generation {} owns the worker, this process is generation {}",
            row.ids.generation_id, input.generation_id
        ));
    }
    if row.status != WorkerStatus::Active {
        reasons.push(format!("worker is {}", row.status.as_str()));
    }
    if !liveness.heartbeat_fresh {
        reasons.push(format!(
            "heartbeat expired: last renewal {:.0}s ago, ttl {:.0}s",
            liveness.heartbeat_age_seconds, row.heartbeat_ttl_seconds
        ));
    }
    if !input.pid_alive {
        reasons.push(format!(
            "worker pid {} is not alive",
            row.ids.pid.map_or_else(|| "unknown".into(), |p| p.to_string())
        ));
    }
    if !input.native_transport_bound {
        reasons.push("the MCP transport is not natively bound".to_owned());
    }
    if !input.client_managed {
        reasons.push("the process is not client-managed (CLIENT_MANAGED is not 1)".to_owned());
    }
    let age = Some(liveness.heartbeat_age_seconds);
    if reasons.is_empty() {
        return Provenance {
            session_ownership: Ownership::Owned,
            blocker_kind: None,
            reasons,
            heartbeat_age_seconds: age,
        };
    }
    let kind = if fenced { BlockerKind::WorkerFenced } else { BlockerKind::SessionAttachmentMissing };
    unowned(kind, reasons, age)
}
