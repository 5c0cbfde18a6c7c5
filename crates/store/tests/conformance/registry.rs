//! The worker registry: insert-or-nothing registration, fenced
//! renewal with every expectation, generation claims, deregistration and
//! liveness, as stories over `&dyn Store`.

use crate::engines::Fixture;
use crate::support::{TTL, attach, now, registration, renewal};
use fleetgate_core::BlockerKind;
use fleetgate_core::worker::{DriftField, FieldValue, HeartbeatRequest, WorkerStatus, is_live};
use fleetgate_store::{Store, StoreErrorKind};

pub fn register_is_insert_or_nothing(fx: &Fixture) {
    let store = fx.open();
    assert_eq!(store.get_worker("w1").unwrap(), None);
    let out = attach(&*store, "w1");
    assert_eq!((out.fencing_epoch, out.client_name.as_str(), out.started_at), (1, "claude_code", now()));
    let row = store.get_worker("w1").unwrap().expect("the row");
    assert_eq!(row.ids.client_name, "claude_code", "stored normalised");
    assert_eq!(row.started_at, row.last_heartbeat_at);
    assert_eq!(
        (row.fencing_epoch, row.status, row.renewal_count, row.ids.pid),
        (1, WorkerStatus::Active, 0, Some(4242))
    );
    assert_eq!(row.heartbeat_ttl_seconds, TTL);

    // The same identity again, with other fields and later: nothing is written.
    let mut again = registration("w1");
    again.ids.session_id = "sess-other".into();
    again.heartbeat_ttl_seconds = 30.0;
    let out = store.register(&again, now().plus_seconds(60)).unwrap();
    assert!(!out.created);
    assert_eq!((out.started_at, out.heartbeat_ttl_seconds), (now(), TTL), "the outcome describes the stored row");
    assert_eq!(store.get_worker("w1").unwrap().unwrap(), row);
    assert_eq!(store.list_workers().unwrap().len(), 1);
}

pub fn registration_is_validated(fx: &Fixture) {
    let store = fx.open();
    let mut cases = Vec::new();
    let mut r = registration("w1");
    r.ids.session_id = "  ".into();
    cases.push(r);
    let mut r = registration("w1");
    r.heartbeat_ttl_seconds = 0.0;
    cases.push(r);
    let mut r = registration("w1");
    r.ids.pid = Some(0);
    cases.push(r);
    for bad in cases {
        let err = store.register(&bad, now()).unwrap_err();
        assert_eq!(err.kind(), StoreErrorKind::Invalid, "{err}");
    }
    let err = store.claim_generation("w1", " ", now()).unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::Invalid, "{err}");
    assert!(store.list_workers().unwrap().is_empty());
    // No pid is fine, and is recorded as none.
    let mut r = registration("w2");
    r.ids.pid = None;
    assert!(store.register(&r, now()).unwrap().created);
    assert_eq!(store.get_worker("w2").unwrap().unwrap().ids.pid, None);
}

pub fn workers_list_by_start_then_identity_bytes(fx: &Fixture) {
    let store = fx.open();
    // Byte order, which a locale's collation would shuffle: 'A' < '_' < 'a'
    // and '-' < '_' in bytes, while ICU `en` sorts them the other way.
    for id in ["wa", "w_a", "wB", "w-a", "wA"] {
        attach(&*store, id);
    }
    let mut early = registration("wz-early");
    early.ids.session_id = "sess-early".into();
    store.register(&early, now().plus_seconds(-5)).unwrap();
    let ids: Vec<String> = store.list_workers().unwrap().into_iter().map(|w| w.ids.worker_identity).collect();
    assert_eq!(ids, ["wz-early", "w-a", "wA", "wB", "w_a", "wa"]);
}

fn expect_all(identity: &str) -> HeartbeatRequest {
    HeartbeatRequest {
        worker_identity: identity.into(),
        fencing_epoch: 1,
        expected_session_id: Some("sess-0001".into()),
        expected_generation_id: Some("gen-0001".into()),
        expected_client_name: Some("claude".into()),
        expected_pid: Some(4242),
    }
}

pub fn renewal_checks_every_expectation(fx: &Fixture) {
    let store = fx.open();
    attach(&*store, "w1");
    let later = now().plus_seconds(300);

    // Every expectation met; the client compared normalised (`claude-code`
    // and the stored `claude_code` are one application).
    let mut req = expect_all("w1");
    req.expected_client_name = Some("Claude-Code".into());
    let out = store.heartbeat(&req, later).unwrap();
    assert!(out.renewed && out.blocker_kind.is_none() && out.expectation_drift.is_empty(), "{out:?}");
    let row = store.get_worker("w1").unwrap().unwrap();
    assert_eq!((row.last_heartbeat_at, row.renewal_count), (later, 1));

    // Each expectation alone, mismatched: refused, that field named.
    let cases: Vec<(DriftField, HeartbeatRequest)> = vec![
        (DriftField::SessionId, HeartbeatRequest { expected_session_id: Some("sess-x".into()), ..renewal("w1", 1) }),
        (DriftField::GenerationId, HeartbeatRequest { expected_generation_id: Some("g-x".into()), ..renewal("w1", 1) }),
        (DriftField::ClientName, HeartbeatRequest { expected_client_name: Some("gemini".into()), ..renewal("w1", 1) }),
        (DriftField::Pid, HeartbeatRequest { expected_pid: Some(7), ..renewal("w1", 1) }),
    ];
    for (field, req) in cases {
        let out = store.heartbeat(&req, later.plus_seconds(1)).unwrap();
        assert!(!out.renewed, "{field:?}: {out:?}");
        assert_eq!(out.blocker_kind, Some(BlockerKind::WorkerFenced));
        assert_eq!(out.expectation_drift.iter().map(|d| d.field).collect::<Vec<_>>(), [field]);
    }
    let drift = store
        .heartbeat(&HeartbeatRequest { expected_pid: Some(7), ..renewal("w1", 1) }, later)
        .unwrap()
        .expectation_drift;
    assert_eq!((&drift[0].recorded, &drift[0].presented), (&FieldValue::Int(4242), &FieldValue::Int(7)));

    // All of them mismatched at once: every one listed, in the order a refusal explains them.
    let req = HeartbeatRequest {
        worker_identity: "w1".into(),
        fencing_epoch: 1,
        expected_session_id: Some("s-x".into()),
        expected_generation_id: Some("g-x".into()),
        expected_client_name: Some("codex".into()),
        expected_pid: Some(1),
    };
    let out = store.heartbeat(&req, later).unwrap();
    let fields: Vec<&str> = out.expectation_drift.iter().map(|d| d.field.as_str()).collect();
    assert_eq!(fields, ["session_id", "generation_id", "client_name", "pid"]);
    assert_eq!(out.reasons.len(), 4, "{out:?}");

    // A pid expected of a row that recorded none: drift, recorded null.
    let mut r = registration("w2");
    r.ids.pid = None;
    store.register(&r, now()).unwrap();
    let out = store.heartbeat(&HeartbeatRequest { expected_pid: Some(9), ..renewal("w2", 1) }, later).unwrap();
    assert_eq!(out.expectation_drift[0].recorded, FieldValue::Null);
    // Unset expectations are skipped: the epoch alone renews.
    assert!(store.heartbeat(&renewal("w2", 1), later).unwrap().renewed);

    // None of the refusals wrote anything.
    assert_eq!(store.get_worker("w1").unwrap().unwrap(), row);
}

pub fn refusals_explain_in_spec_order_and_write_nothing(fx: &Fixture) {
    let store = fx.open();
    let out = store.heartbeat(&renewal("nobody", 1), now()).unwrap();
    assert_eq!(out.blocker_kind, Some(BlockerKind::SessionAttachmentMissing));
    assert!(out.reasons[0].contains("nobody"), "{out:?}");

    attach(&*store, "w1");
    let before = store.get_worker("w1").unwrap().unwrap();
    let out = store.heartbeat(&renewal("w1", 7), now().plus_seconds(10)).unwrap();
    assert_eq!(out.blocker_kind, Some(BlockerKind::WorkerFenced));
    assert!(out.reasons[0].contains("epoch 7") && out.reasons[0].contains("epoch 1"), "{out:?}");
    assert_eq!(store.get_worker("w1").unwrap().unwrap(), before, "a refusal changes nothing");

    // Expectations are reported before status, status before the epoch.
    assert!(store.deregister_worker("w1", now()).unwrap());
    let stopped = store.get_worker("w1").unwrap().unwrap();
    let req = HeartbeatRequest { expected_session_id: Some("s-x".into()), ..renewal("w1", 7) };
    let out = store.heartbeat(&req, now()).unwrap();
    assert_eq!(out.expectation_drift.len(), 1, "{out:?}");
    let out = store.heartbeat(&renewal("w1", 7), now()).unwrap();
    assert!(out.reasons[0].contains("stopped"), "{out:?}");
    assert_eq!(store.get_worker("w1").unwrap().unwrap(), stopped);
}

pub fn renewal_never_moves_the_heartbeat_back(fx: &Fixture) {
    let store = fx.open();
    attach(&*store, "w1");
    let later = now().plus_seconds(600);
    assert!(store.heartbeat(&renewal("w1", 1), later).unwrap().renewed);
    // A renewal stamped earlier (a slower host's clock) is accepted and
    // counted, but the heartbeat stays at the later instant.
    assert!(store.heartbeat(&renewal("w1", 1), now().plus_seconds(100)).unwrap().renewed);
    let row = store.get_worker("w1").unwrap().unwrap();
    assert_eq!((row.last_heartbeat_at, row.renewal_count), (later, 2));
}

pub fn claim_fences_the_old_epoch(fx: &Fixture) {
    let store = fx.open();
    attach(&*store, "w1");
    for _ in 0..3 {
        assert!(store.heartbeat(&renewal("w1", 1), now()).unwrap().renewed);
    }
    assert_eq!(store.claim_generation("nobody", "gen-2", now()).unwrap(), None);
    let at = now().plus_seconds(5);
    let claim = store.claim_generation("w1", "gen-0002", at).unwrap().expect("claimed");
    assert_eq!((claim.previous_epoch, claim.fencing_epoch, claim.renewal_count), (1, 2, 3));
    assert_eq!(claim.generation_id, "gen-0002");
    let row = store.get_worker("w1").unwrap().unwrap();
    assert_eq!((row.fencing_epoch, row.ids.generation_id.as_str(), row.last_heartbeat_at), (2, "gen-0002", at));

    // The old epoch is fenced, whatever else it presents.
    let out = store.heartbeat(&expect_all("w1"), at).unwrap();
    assert_eq!(out.blocker_kind, Some(BlockerKind::WorkerFenced));
    let out = store.heartbeat(&renewal("w1", 1), at).unwrap();
    assert_eq!(out.blocker_kind, Some(BlockerKind::WorkerFenced));
    // The new generation renews at the new epoch.
    let req = HeartbeatRequest { expected_generation_id: Some("gen-0002".into()), ..renewal("w1", 2) };
    assert!(store.heartbeat(&req, at).unwrap().renewed);
    assert_eq!(store.get_worker("w1").unwrap().unwrap().renewal_count, 4);

    // A claim brings a stopped row back, at a fresh epoch.
    assert!(store.deregister_worker("w1", at).unwrap());
    let claim = store.claim_generation("w1", "gen-0003", at).unwrap().unwrap();
    assert_eq!(claim.fencing_epoch, 3);
    assert_eq!(store.get_worker("w1").unwrap().unwrap().status, WorkerStatus::Active);
    assert!(store.heartbeat(&renewal("w1", 3), at).unwrap().renewed);
}

pub fn deregistered_rows_are_history(fx: &Fixture) {
    let store = fx.open();
    attach(&*store, "w1");
    assert!(!store.deregister_worker("nobody", now()).unwrap());
    assert!(store.deregister_worker("w1", now()).unwrap());
    let row = store.get_worker("w1").unwrap().unwrap();
    assert_eq!(row.status, WorkerStatus::Stopped);
    assert!(!is_live(&row, now(), true).live, "a stopped row is never live");
    assert!(!store.heartbeat(&renewal("w1", 1), now()).unwrap().renewed);
    assert_eq!(store.list_workers().unwrap().len(), 1, "history stays listed");
}

pub fn liveness_follows_the_ttl(fx: &Fixture) {
    let store: &dyn Store = &*fx.open();
    attach(store, "w1");
    let row = store.get_worker("w1").unwrap().unwrap();
    let at_ttl = now().plus_seconds(900);
    assert!(is_live(&row, at_ttl, true).live);
    assert!(!is_live(&row, at_ttl, false).live, "a dead pid is never live");
    let past = is_live(&row, at_ttl.plus_seconds(1), true);
    assert!(!past.live && !past.heartbeat_fresh);
    assert_eq!(past.heartbeat_age_seconds, 901.0);
    // A renewal at +600 keeps it fresh until +1500, as stored and read back.
    assert!(store.heartbeat(&renewal("w1", 1), now().plus_seconds(600)).unwrap().renewed);
    let row = store.get_worker("w1").unwrap().unwrap();
    assert!(is_live(&row, now().plus_seconds(1500), true).heartbeat_fresh);
    assert!(!is_live(&row, now().plus_seconds(1501), true).heartbeat_fresh);
    // One worker expiring never stales another.
    let mut r = registration("w2");
    r.heartbeat_ttl_seconds = 30.0;
    store.register(&r, now()).unwrap();
    let w2 = store.get_worker("w2").unwrap().unwrap();
    assert!(!is_live(&w2, now().plus_seconds(31), true).live);
    assert!(is_live(&store.get_worker("w1").unwrap().unwrap(), now().plus_seconds(31), true).live);
}

pub fn calls_from_inside_an_async_runtime_answer(fx: &Fixture) {
    // The gateway is async: a store opened and called on a runtime's own
    // thread must answer (PostgreSQL's client would otherwise panic there).
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("a runtime");
    let spec = fx.spec();
    let renewed = runtime.block_on(async move {
        let store = fleetgate_store::open(&spec).expect("open inside the runtime");
        attach(&*store, "w-async");
        let out = store.heartbeat(&renewal("w-async", 1), now().plus_seconds(1)).expect("renew inside the runtime");
        (out.renewed, store.get_worker("w-async").expect("read inside the runtime").map(|w| w.renewal_count))
    });
    assert_eq!(renewed, (true, Some(1)));
}
