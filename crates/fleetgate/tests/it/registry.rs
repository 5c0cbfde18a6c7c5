//! The worker registry on a real SQLite file: the seed's registry cases.

use crate::support::{Attach, TTL, attach, fresh_store, now};
use fleetgate_control::gate::assess_provenance;
use fleetgate_core::BlockerKind;
use fleetgate_core::env::EnvSnapshot;
use fleetgate_core::provenance::Ownership;
use fleetgate_core::worker::{DriftField, HeartbeatRequest, Registration, WorkerIds, is_live};

fn managed() -> EnvSnapshot {
    EnvSnapshot::from_pairs([("GITEA_CLIENT_MANAGED", "1")])
}

fn renew(id: &str, epoch: i64) -> HeartbeatRequest {
    HeartbeatRequest { worker_identity: id.into(), fencing_epoch: epoch, ..Default::default() }
}

#[test]
fn unsupervised_worker_goes_unowned_at_the_ttl() {
    let (_d, store) = fresh_store();
    let out = attach(&*store, Attach::default());
    let row = store.get_worker(&out.worker_identity).unwrap().unwrap();
    assert_eq!(row.started_at, row.last_heartbeat_at);
    let after = now().plus_seconds(TTL as i64 + 1);
    assert!(!is_live(&row, after, true).live);
    let p = assess_provenance(&*store, &out.worker_identity, "gen-0001", &managed(), "GITEA_", true, after, &|_| true)
        .unwrap();
    assert_eq!(p.session_ownership, Ownership::Unowned);
    assert_eq!(p.blocker_kind, Some(BlockerKind::SessionAttachmentMissing));
    // Within the TTL the same worker is owned: the test above can fail.
    let p = assess_provenance(&*store, &out.worker_identity, "gen-0001", &managed(), "GITEA_", true, now(), &|_| true)
        .unwrap();
    assert_eq!(p.session_ownership, Ownership::Owned, "{:?}", p.reasons);
}

#[test]
fn ownership_needs_generation_transport_and_client_management() {
    let (_d, store) = fresh_store();
    let out = attach(&*store, Attach::default());
    let id = &out.worker_identity;
    let p = assess_provenance(&*store, id, "gen-other", &managed(), "GITEA_", true, now(), &|_| true).unwrap();
    assert_eq!(p.blocker_kind, Some(BlockerKind::WorkerFenced));
    let p =
        assess_provenance(&*store, id, "gen-0001", &EnvSnapshot::default(), "GITEA_", true, now(), &|_| true).unwrap();
    assert_eq!(p.blocker_kind, Some(BlockerKind::SessionAttachmentMissing));
    let p = assess_provenance(&*store, id, "gen-0001", &managed(), "GITEA_", false, now(), &|_| true).unwrap();
    assert_eq!(p.session_ownership, Ownership::Unowned);
    let p = assess_provenance(&*store, id, "gen-0001", &managed(), "GITEA_", true, now(), &|_| false).unwrap();
    assert_eq!(p.session_ownership, Ownership::Unowned, "a dead pid never owns a session");
    let p = assess_provenance(&*store, "wrk-nobody", "gen-0001", &managed(), "GITEA_", true, now(), &|_| true).unwrap();
    assert_eq!(p.blocker_kind, Some(BlockerKind::SessionAttachmentMissing));
}

#[test]
fn two_client_names_stay_distinct_rows_and_identities() {
    let (_d, store) = fresh_store();
    let a = attach(&*store, Attach { client: "claude_code", session: "sess-a", ..Default::default() });
    let b = attach(&*store, Attach { client: "gemini", session: "sess-b", ..Default::default() });
    assert_ne!(a.worker_identity, b.worker_identity);
    let rows = store.list_workers().unwrap();
    assert_eq!(rows.len(), 2);
    let client_of = |id: &str| rows.iter().find(|r| r.ids.worker_identity == id).unwrap().ids.client_name.clone();
    assert_eq!(client_of(&a.worker_identity), "claude_code");
    assert_eq!(client_of(&b.worker_identity), "gemini");
}

#[test]
fn registering_the_same_identity_again_makes_no_second_row() {
    let (_d, store) = fresh_store();
    let first = attach(&*store, Attach::default());
    let again = Registration {
        ids: WorkerIds {
            worker_identity: first.worker_identity.clone(),
            client_name: "gemini".into(),
            client_instance_id: "other".into(),
            session_id: "sess-other".into(),
            generation_id: "gen-other".into(),
            role: "author".into(),
            profile: "prgs-author".into(),
            pid: Some(1),
        },
        heartbeat_ttl_seconds: 5.0,
    };
    let out = store.register(&again, now().plus_seconds(10)).unwrap();
    assert!(!out.created);
    assert_eq!(out.fencing_epoch, first.fencing_epoch);
    let rows = store.list_workers().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].ids.session_id, "sess-0001", "the existing row is left as it was");
}

#[test]
fn each_expectation_fences_a_renewal() {
    let (_d, store) = fresh_store();
    let out = attach(&*store, Attach { session: "sess-real", generation: "gen-real", ..Default::default() });
    let base = renew(&out.worker_identity, out.fencing_epoch);
    let cases = [
        (HeartbeatRequest { expected_session_id: Some("sess-impostor".into()), ..base.clone() }, DriftField::SessionId),
        (
            HeartbeatRequest { expected_generation_id: Some("gen-other".into()), ..base.clone() },
            DriftField::GenerationId,
        ),
        (HeartbeatRequest { expected_client_name: Some("gemini".into()), ..base.clone() }, DriftField::ClientName),
        (HeartbeatRequest { expected_pid: Some(9999), ..base.clone() }, DriftField::Pid),
    ];
    for (req, field) in cases {
        let res = store.heartbeat(&req, now().plus_seconds(60)).unwrap();
        assert!(!res.renewed, "{field:?}");
        assert_eq!(res.blocker_kind, Some(BlockerKind::WorkerFenced), "{field:?}");
        assert_eq!(res.expectation_drift.iter().map(|d| d.field).collect::<Vec<_>>(), [field]);
    }
    let row = store.get_worker(&out.worker_identity).unwrap().unwrap();
    assert_eq!(row.last_heartbeat_at, now(), "a refused renewal changes nothing");
    assert_eq!(row.renewal_count, 0);
}

#[test]
fn aliases_of_one_application_are_not_impostors() {
    let (_d, store) = fresh_store();
    let out = attach(&*store, Attach { client: "claude", ..Default::default() });
    assert_eq!(store.get_worker(&out.worker_identity).unwrap().unwrap().ids.client_name, "claude_code");
    let req = HeartbeatRequest {
        expected_client_name: Some("claude_desktop".into()),
        ..renew(&out.worker_identity, out.fencing_epoch)
    };
    let res = store.heartbeat(&req, now()).unwrap();
    assert!(res.renewed, "{:?}", res.reasons);
}

#[test]
fn matching_and_omitted_expectations_renew() {
    let (_d, store) = fresh_store();
    let out = attach(&*store, Attach::default());
    let full = HeartbeatRequest {
        expected_session_id: Some("sess-0001".into()),
        expected_generation_id: Some("gen-0001".into()),
        expected_client_name: Some("claude_code".into()),
        expected_pid: Some(4242),
        ..renew(&out.worker_identity, out.fencing_epoch)
    };
    assert!(store.heartbeat(&full, now()).unwrap().renewed);
    assert!(store.heartbeat(&renew(&out.worker_identity, out.fencing_epoch), now()).unwrap().renewed);
}

#[test]
fn stale_epoch_is_refused_and_claims_fence_old_holders() {
    let (_d, store) = fresh_store();
    let out = attach(&*store, Attach::default());
    let id = &out.worker_identity;
    let res = store.heartbeat(&renew(id, out.fencing_epoch + 1), now()).unwrap();
    assert_eq!(res.blocker_kind, Some(BlockerKind::WorkerFenced));
    let claim = store.claim_generation(id, "gen-0002", now().plus_seconds(5)).unwrap().unwrap();
    assert_eq!((claim.previous_epoch, claim.fencing_epoch), (out.fencing_epoch, out.fencing_epoch + 1));
    let old = store.heartbeat(&renew(id, out.fencing_epoch), now().plus_seconds(10)).unwrap();
    assert_eq!(old.blocker_kind, Some(BlockerKind::WorkerFenced));
    assert!(old.reasons[0].contains("epoch"), "{:?}", old.reasons);
    assert!(store.heartbeat(&renew(id, claim.fencing_epoch), now().plus_seconds(10)).unwrap().renewed);
    assert_eq!(store.get_worker(id).unwrap().unwrap().ids.generation_id, "gen-0002");
    assert!(store.claim_generation("wrk-nobody", "g", now()).unwrap().is_none());
}

#[test]
fn missing_identity_is_no_attachment() {
    let (_d, store) = fresh_store();
    let res = store.heartbeat(&renew("wrk-nobody", 1), now()).unwrap();
    assert_eq!(res.blocker_kind, Some(BlockerKind::SessionAttachmentMissing));
}

#[test]
fn a_stopped_worker_renews_nothing() {
    let (_d, store) = fresh_store();
    let out = attach(&*store, Attach::default());
    assert!(store.deregister_worker(&out.worker_identity, now()).unwrap());
    let res = store.heartbeat(&renew(&out.worker_identity, out.fencing_epoch), now()).unwrap();
    assert_eq!(res.blocker_kind, Some(BlockerKind::WorkerFenced));
    assert!(res.reasons[0].contains("stopped"), "{:?}", res.reasons);
    assert!(!store.deregister_worker("wrk-nobody", now()).unwrap());
}

#[test]
fn dead_worker_expires_even_with_a_live_pid() {
    let (_d, store) = fresh_store();
    let out = attach(&*store, Attach::default());
    let row = store.get_worker(&out.worker_identity).unwrap().unwrap();
    let l = is_live(&row, now().plus_seconds(TTL as i64 + 1), true);
    assert!(!l.live && !l.heartbeat_fresh);
}

#[test]
fn invalid_registrations_are_refused_and_write_nothing() {
    let (_d, store) = fresh_store();
    let bad = Registration {
        ids: WorkerIds {
            worker_identity: "wrk-x".into(),
            client_name: "claude".into(),
            client_instance_id: "i".into(),
            session_id: "s".into(),
            generation_id: "g".into(),
            role: "author".into(),
            profile: "p".into(),
            pid: Some(1),
        },
        heartbeat_ttl_seconds: 0.0,
    };
    let err = store.register(&bad, now()).unwrap_err();
    assert!(err.to_string().contains("heartbeat_ttl_seconds"), "{err}");
    assert!(store.list_workers().unwrap().is_empty());
}

#[test]
fn migrations_are_idempotent_and_a_newer_schema_fails_closed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.sqlite3");
    let p = path.to_str().unwrap();
    let first = fleetgate_store::open(p).unwrap();
    attach(&*first, Attach::default());
    drop(first);
    let again = fleetgate_store::open(p).unwrap();
    assert_eq!(again.schema_version().unwrap(), fleetgate_store::SCHEMA_VERSION);
    assert_eq!(again.list_workers().unwrap().len(), 1, "reopening keeps rows");
    drop(again);
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute("INSERT INTO fleetgate_schema VALUES (999, 'future', '2030-01-01T00:00:00Z')", []).unwrap();
    drop(conn);
    let err = fleetgate_store::open(p).unwrap_err();
    assert!(err.to_string().contains("newer than this fleetgate"), "{err}");
}

#[test]
fn the_store_file_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested/deeper/r.sqlite3");
    let _store = fleetgate_store::open(path.to_str().unwrap()).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

fn runtime_row(ns: &str, pid: i64) -> fleetgate_core::runtime::RuntimeRecord {
    fleetgate_core::runtime::RuntimeRecord {
        runtime_id: fleetgate_core::runtime::runtime_id(ns, pid, "boot1"),
        org: None,
        repository_root: None,
        cohort_id: Some("ppid:7".into()),
        boot_id: "boot1".into(),
        startup_head: Some("82d71b77".into()),
        daemon_start_head: None,
        last_heartbeat_at: None,
        ..fleetgate_testkit::records::runtime_row(ns, pid, now())
    }
}

#[test]
fn runtime_rows_round_trip_refresh_and_stop() {
    use fleetgate_core::runtime::RuntimeStatus;
    let (_d, store) = fresh_store();
    let a = runtime_row("gitea-author", 41000);
    let b = runtime_row("gitea-reviewer", 41001);
    store.upsert_runtime(&b).unwrap();
    store.upsert_runtime(&a).unwrap();
    assert_eq!(store.list_runtime().unwrap(), vec![a.clone(), b.clone()], "ordered by runtime_id, fields intact");
    assert!(store.touch_runtime(&a.runtime_id, now().plus_seconds(60)).unwrap());
    assert!(store.mark_runtime_stopped(&b.runtime_id, now()).unwrap());
    assert!(!store.touch_runtime(&b.runtime_id, now()).unwrap(), "a stopped row is not refreshed");
    assert!(!store.mark_runtime_stopped("gitea-x:1:b", now()).unwrap());
    let rows = store.list_runtime().unwrap();
    assert_eq!(rows[0].last_heartbeat_at, Some(now().plus_seconds(60)));
    assert_eq!(rows[1].status, RuntimeStatus::Stopped);
    store.upsert_runtime(&a).unwrap();
    assert_eq!(store.list_runtime().unwrap().len(), 2, "upsert replaces by runtime_id");
}

#[test]
fn audit_entries_append_in_order_and_filter() {
    use fleetgate_core::audit::AuditEntry;
    let (_d, store) = fresh_store();
    let entry = |i: i64, allowed| AuditEntry {
        id: None,
        at: now().plus_seconds(i),
        profile: "prgs-author".into(),
        worker_identity: Some("wrk-1".into()),
        tool: format!("tool_{i}"),
        allowed,
        blocker_kind: (!allowed).then(|| "fleet_inventory_blocked".into()),
        reasons: vec![format!("reason {i}"), "second".into()],
        principal: (i == 3).then(|| "claude-code".into()),
        call: None,
    };
    let ids: Vec<i64> = (0..5).map(|i| store.append_audit(&entry(i, i % 2 == 0)).unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    let all = store.list_audit(None, 100).unwrap();
    assert_eq!(all.len(), 5);
    assert_eq!(all[1].blocker_kind.as_deref(), Some("fleet_inventory_blocked"));
    assert_eq!(all[1].reasons, ["reason 1", "second"]);
    assert_eq!((all[1].principal.as_deref(), all[3].principal.as_deref()), (None, Some("claude-code")));
    let recent = store.list_audit(Some(now().plus_seconds(2)), 2).unwrap();
    assert_eq!(recent.iter().map(|e| e.tool.as_str()).collect::<Vec<_>>(), ["tool_3", "tool_4"]);
}
