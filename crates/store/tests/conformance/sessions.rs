//! Schema v12's HTTP sessions: which replica holds each, found by any replica, forgotten
//! when it ends or its owner stops.

use crate::engines::Fixture;
use crate::support::now;
use fleetgate_store::HttpSession;

/// A session `id` held by the replica at `owner`, runtime `runtime`.
pub fn session(id: &str, owner: &str, runtime: &str) -> HttpSession {
    HttpSession {
        session_id: id.into(),
        profile: "prgs-author".into(),
        owner: owner.into(),
        runtime_id: runtime.into(),
        opened_at: now(),
    }
}

pub fn sessions_are_found_by_any_replica_and_forgotten(fx: &Fixture) {
    let one = fx.open();
    let two = fx.open();
    let a = session("a1b2", "10.0.0.1:8080", "rt-a");
    one.record_http_session(&a).unwrap();
    assert_eq!(two.http_session("a1b2").unwrap(), Some(a.clone()), "another process finds it");
    assert_eq!(two.http_session("nope").unwrap(), None);
    // Recorded again (a retried write) it stays as it was: a session never changes owner.
    one.record_http_session(&session("a1b2", "10.0.0.9:1", "rt-z")).unwrap();
    assert_eq!(two.http_session("a1b2").unwrap(), Some(a));
    assert!(two.forget_http_session("a1b2").unwrap());
    assert!(!one.forget_http_session("a1b2").unwrap(), "forgotten once");
    assert_eq!(one.http_session("a1b2").unwrap(), None);
    // A stopped runtime's sessions go together, no other's.
    for (id, rt) in [("b1", "rt-b"), ("b2", "rt-b"), ("c1", "rt-c")] {
        one.record_http_session(&session(id, "10.0.0.2:8080", rt)).unwrap();
    }
    assert_eq!(two.forget_http_sessions_of("rt-b").unwrap(), 2);
    assert_eq!(one.http_session("b1").unwrap(), None);
    assert!(one.http_session("c1").unwrap().is_some());
}

/// What a prune forgets: records opened before the cutoff that nothing can use — a task's, a
/// session of a replica stopped or never on record — and never a session of a running one.
pub fn old_records_of_gone_replicas_and_tasks_are_pruned(fx: &Fixture) {
    let store = fx.open();
    let running = crate::support::runtime_row("gitea-author", 41001);
    let stopped = crate::support::runtime_row("gitea-author", 41002);
    store.upsert_runtime(&running).unwrap();
    store.upsert_runtime(&stopped).unwrap();
    assert!(store.mark_runtime_stopped(&stopped.runtime_id, now()).unwrap());
    let at = |id: &str, runtime: &str, days: i64| HttpSession {
        opened_at: now().plus_seconds(days * 86_400),
        ..session(id, "10.0.0.1:8080", runtime)
    };
    for s in [
        at("live-old", &running.runtime_id, 0),
        at("task:s1:t-1", &running.runtime_id, 0),
        at("stopped-old", &stopped.runtime_id, 0),
        at("vanished-old", "rt-gone", 0),
        at("stopped-new", &stopped.runtime_id, 10),
        at("task:s1:t-2", &running.runtime_id, 10),
    ] {
        store.record_http_session(&s).unwrap();
    }
    assert_eq!(store.prune_http_sessions(now().plus_seconds(5 * 86_400)).unwrap(), 3);
    let kept: Vec<bool> = ["live-old", "task:s1:t-1", "stopped-old", "vanished-old", "stopped-new", "task:s1:t-2"]
        .iter()
        .map(|id| store.http_session(id).unwrap().is_some())
        .collect();
    assert_eq!(kept, [true, false, false, false, true, true]);
}
