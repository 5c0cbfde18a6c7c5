//! What the store benchmarks share: the wall clock as the store takes it, and
//! the registration of a benchmark worker.

use fleetgate_core::Timestamp;
use fleetgate_core::worker::{Registration, WorkerIds};
use std::time::{SystemTime, UNIX_EPOCH};

pub fn now() -> Timestamp {
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970").as_secs();
    Timestamp::from_unix(i64::try_from(secs).expect("in range"))
}

/// A valid registration of `identity`, its session `s` and generation `g`.
pub fn registration(identity: impl Into<String>, ttl: f64) -> Registration {
    Registration {
        ids: WorkerIds {
            worker_identity: identity.into(),
            client_name: "bench".into(),
            client_instance_id: "i".into(),
            session_id: "s".into(),
            generation_id: "g".into(),
            role: "author".into(),
            profile: "p".into(),
            pid: Some(1),
        },
        heartbeat_ttl_seconds: ttl,
    }
}
