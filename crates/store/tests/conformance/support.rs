//! Values the stories share: the seed's clock reading, registrations, runtime
//! rows, audit entries and renewals with their defaults.

use fleetgate_core::Timestamp;
use fleetgate_core::audit::AuditEntry;
use fleetgate_core::runtime::RuntimeRecord;
use fleetgate_core::worker::{HeartbeatRequest, RegisterOutcome, Registration, WorkerIds};
use fleetgate_store::Store;

/// The seed's NOW.
pub fn now() -> Timestamp {
    Timestamp::ymd_hms(2026, 7, 30, 0, 40, 9)
}

pub const TTL: f64 = 900.0;

/// A registration of `identity` with the seed's defaults.
pub fn registration(identity: &str) -> Registration {
    Registration {
        ids: WorkerIds {
            worker_identity: identity.into(),
            client_name: "claude".into(),
            client_instance_id: "inst-0001".into(),
            session_id: "sess-0001".into(),
            generation_id: "gen-0001".into(),
            role: "author".into(),
            profile: "prgs-author".into(),
            pid: Some(4242),
        },
        heartbeat_ttl_seconds: TTL,
    }
}

/// Register `identity` at `now()`; it must be new.
pub fn attach(store: &dyn Store, identity: &str) -> RegisterOutcome {
    let out = store.register(&registration(identity), now()).expect("register");
    assert!(out.created, "{identity} was registered already");
    out
}

/// A renewal at `epoch` with no expectations.
pub fn renewal(identity: &str, epoch: i64) -> HeartbeatRequest {
    HeartbeatRequest { worker_identity: identity.into(), fencing_epoch: epoch, ..Default::default() }
}

/// A running runtime row; every optional field set.
pub fn runtime_row(namespace: &str, pid: i64) -> RuntimeRecord {
    fleetgate_testkit::records::runtime_row(namespace, pid, now())
}

/// An audit entry at `at`.
pub fn audit_entry(tool: &str, at: Timestamp) -> AuditEntry {
    AuditEntry {
        id: None,
        at,
        profile: "prgs-author".into(),
        worker_identity: Some("wrk-1".into()),
        tool: tool.into(),
        allowed: false,
        blocker_kind: Some("worker_fenced".into()),
        reasons: vec!["epoch 1 presented, the row holds epoch 2".into()],
        principal: Some("claude-code".into()),
        call: None,
    }
}
