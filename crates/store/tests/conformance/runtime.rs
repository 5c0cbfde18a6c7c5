//! Runtime rows, the host each runs on, and the process observation each
//! host publishes about itself.

use crate::engines::Fixture;
use crate::support::{now, runtime_row};
use fleetgate_core::runtime::{CohortSource, ObservedProcess, ProcessScan, RuntimeStatus};
use fleetgate_store::HostIdentity;

pub fn runtime_rows_round_trip_and_refresh(fx: &Fixture) {
    let store = fx.open();
    let author = runtime_row("gitea-author", 41001);
    let mut sparse = runtime_row("gitea-Reviewer", 41002);
    // Every optional field empty, and an unknown cohort.
    sparse.remote = None;
    sparse.org = None;
    sparse.repo = None;
    sparse.repository_root = None;
    sparse.cohort_id = None;
    sparse.cohort_source = CohortSource::Unknown;
    sparse.startup_head = None;
    sparse.daemon_start_head = None;
    sparse.last_heartbeat_at = None;
    store.upsert_runtime(&author).unwrap();
    store.upsert_runtime(&sparse).unwrap();
    // Ordered by runtime_id in bytes: 'R' sorts before 'a'.
    assert_eq!(store.list_runtime().unwrap(), [sparse.clone(), author.clone()]);

    // Writing the same id replaces the row.
    let mut moved = author.clone();
    moved.startup_head = Some("fedc4321".into());
    moved.cohort_source = CohortSource::ExplicitEnv;
    moved.cohort_id = Some("cohort-x".into());
    store.upsert_runtime(&moved).unwrap();
    assert_eq!(store.list_runtime().unwrap(), [sparse.clone(), moved.clone()]);

    let later = now().plus_seconds(120);
    assert!(store.touch_runtime(&moved.runtime_id, later).unwrap());
    assert!(!store.touch_runtime("nobody:1:x", later).unwrap());
    assert!(store.mark_runtime_stopped(&sparse.runtime_id, later).unwrap());
    assert!(!store.mark_runtime_stopped("nobody:1:x", later).unwrap());
    assert!(!store.touch_runtime(&sparse.runtime_id, later).unwrap(), "a stopped row is not refreshed");
    let rows = store.list_runtime().unwrap();
    assert_eq!(rows.len(), 2, "stopped rows stay listed, as history");
    assert_eq!((rows[0].status, rows[0].last_heartbeat_at), (RuntimeStatus::Stopped, None));
    assert_eq!((rows[1].status, rows[1].last_heartbeat_at), (RuntimeStatus::Running, Some(later)));
}

fn host(id: &str, boot: &str) -> HostIdentity {
    HostIdentity { host_id: id.into(), boot_id: boot.into() }
}

pub fn runtime_rows_carry_their_host(fx: &Fixture) {
    let store = fx.open();
    let mut a = runtime_row("gitea-author", 41001);
    a.host = Some(host("m1", "b1"));
    let mut b = runtime_row("gitea-merger", 41003);
    store.upsert_runtime(&a).unwrap();
    store.upsert_runtime(&b).unwrap();
    // The host is written and read with the row; a row without one is of
    // unknown whereabouts, not assumed local.
    assert_eq!(store.list_runtime().unwrap(), [a.clone(), b.clone()]);

    // Rewriting the row rewrites its host, in the same statement.
    a.host = Some(host("m1", "b2"));
    b.host = Some(host("m2", "b9"));
    store.upsert_runtime(&a).unwrap();
    store.upsert_runtime(&b).unwrap();
    assert_eq!(store.list_runtime().unwrap(), [a.clone(), b.clone()]);
    b.host = None;
    store.upsert_runtime(&b).unwrap();
    assert_eq!(store.list_runtime().unwrap(), [a.clone(), b.clone()]);

    // Half a host is no host.
    fx.exec(&format!("UPDATE runtimes SET host_boot_id = NULL WHERE runtime_id = '{}'", a.runtime_id));
    assert_eq!(store.list_runtime().unwrap()[0].host, None);
}

fn scan(pids: &[i64]) -> ProcessScan {
    ProcessScan::of(
        pids.iter()
            .map(|&pid| ObservedProcess {
                pid,
                started_at: now().plus_seconds(-60),
                command: format!("python3 mcp_server.py --profile p{pid} \"quoted\" ünï"),
                uid: Some(1000),
            })
            .collect(),
    )
}

pub fn observations_keep_the_newest_scan_per_host(fx: &Fixture) {
    let store = fx.open();
    assert!(store.list_observations().unwrap().is_empty());
    let t = now();
    assert!(store.publish_observation(&host("m2", "b1"), &scan(&[300, 100]), t).unwrap());
    let unavailable = ProcessScan::unavailable("cannot read /proc: permission denied");
    assert!(store.publish_observation(&host("m1", "b1"), &unavailable, t).unwrap());
    let seen = store.list_observations().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!((&seen[0].host, &seen[0].scan, seen[0].observed_at), (&host("m1", "b1"), &unavailable, t));
    assert_eq!((&seen[1].host, &seen[1].scan), (&host("m2", "b1"), &scan(&[100, 300])));

    // A late, older scan of the same boot changes nothing.
    assert!(!store.publish_observation(&host("m2", "b1"), &scan(&[7]), t.plus_seconds(-10)).unwrap());
    assert_eq!(store.list_observations().unwrap()[1].scan, scan(&[100, 300]));
    // A newer one replaces it.
    assert!(store.publish_observation(&host("m2", "b1"), &scan(&[8]), t.plus_seconds(30)).unwrap());
    let m2 = &store.list_observations().unwrap()[1];
    assert_eq!((&m2.scan, m2.observed_at), (&scan(&[8]), t.plus_seconds(30)));
    // A new boot wins even when its clock reads earlier.
    assert!(store.publish_observation(&host("m2", "b2"), &scan(&[9]), t.plus_seconds(5)).unwrap());
    let m2 = &store.list_observations().unwrap()[1];
    assert_eq!((&m2.host, &m2.scan, m2.observed_at), (&host("m2", "b2"), &scan(&[9]), t.plus_seconds(5)));
}
