//! One look at the fleet: runtime rows (their hosts in them), workers and
//! every host's observation, read as of one instant.

use crate::engines::{Fixture, Kind};
use crate::support::{attach, now, runtime_row};
use fleetgate_core::runtime::{ObservedProcess, ProcessScan};
use fleetgate_store::{FleetSnapshot, HostIdentity};

fn host(id: &str) -> HostIdentity {
    HostIdentity { host_id: id.into(), boot_id: "b1".into() }
}

fn scan(pid: i64) -> ProcessScan {
    let process = ObservedProcess {
        pid,
        started_at: now().plus_seconds(-60),
        command: format!("fleetgate serve --member m{pid}"),
        uid: Some(1000),
    };
    ProcessScan::of(vec![process])
}

pub fn the_fleet_snapshot_holds_what_the_lists_hold(fx: &Fixture) {
    let store = fx.open();
    let empty = store.fleet_snapshot().unwrap();
    assert_eq!(FleetSnapshot { store: None, ..empty }, FleetSnapshot::default());
    attach(&*store, "wrk-b");
    attach(&*store, "wrk-a");
    let mut author = runtime_row("gitea-author", 41001);
    author.host = Some(host("m2"));
    store.upsert_runtime(&author).unwrap();
    store.upsert_runtime(&runtime_row("gitea-merger", 41003)).unwrap();
    store.publish_observation(&host("m2"), &scan(41001), now()).unwrap();
    store.publish_observation(&host("m1"), &scan(7), now()).unwrap();

    let snapshot = store.fleet_snapshot().unwrap();
    assert_eq!(snapshot.runtimes, store.list_runtime().unwrap());
    assert_eq!(snapshot.workers, store.list_workers().unwrap());
    assert_eq!(snapshot.observations, store.list_observations().unwrap());
    assert_eq!(snapshot.runtimes[0].host, Some(host("m2")), "each row with its host");
    assert_eq!((snapshot.runtimes.len(), snapshot.workers.len(), snapshot.observations.len()), (2, 2, 2));
}

/// A writer (its own connection) refreshes a row and then publishes its
/// host's scan at the same instant, again and again: at every instant the
/// scan is no newer than the row. A read that took the rows before a round
/// and the scans after it would see a newer scan than row.
pub fn the_fleet_snapshot_is_one_instant(fx: &Fixture) {
    const ROUNDS: i64 = 150;
    let (store, writer) = (fx.open(), fx.open());
    let mut row = runtime_row("gitea-author", 41001);
    row.host = Some(host("m1"));
    store.upsert_runtime(&row).unwrap();
    store.publish_observation(&host("m1"), &scan(41001), now()).unwrap();
    let id = row.runtime_id.clone();
    let rounds = std::thread::spawn(move || {
        for n in 1..=ROUNDS {
            let at = now().plus_seconds(n);
            assert!(writer.touch_runtime(&id, at).unwrap());
            assert!(writer.publish_observation(&host("m1"), &scan(41001), at).unwrap());
        }
    });
    let mut looks = 0;
    while !rounds.is_finished() || looks == 0 {
        let snapshot = store.fleet_snapshot().unwrap();
        let row_at = snapshot.runtimes[0].last_heartbeat_at.unwrap();
        let scan_at = snapshot.observations[0].observed_at;
        assert!(scan_at <= row_at, "look {looks}: a scan of {scan_at} beside a row of {row_at}");
        looks += 1;
    }
    rounds.join().unwrap();
    let last = store.fleet_snapshot().unwrap();
    assert_eq!(last.observations[0].observed_at, now().plus_seconds(ROUNDS));
}

/// The snapshot names the store it was read from as the file system or the server says
/// (issue 54): a gateway's proof naming this very store is told from one with its own, on
/// either engine, whatever the spelling of its path or URL.
pub fn the_fleet_snapshot_names_its_store(fx: &Fixture) {
    use fleetgate_core::runtime::StoreKey;
    use std::os::unix::fs::MetadataExt;
    let store = fx.open();
    let identity = store.fleet_snapshot().unwrap().store.expect("the store names itself");
    let again = fx.open().fleet_snapshot().unwrap().store.unwrap();
    assert_eq!(again, identity, "another handle, the same store");
    let sibling = fx.sibling().open().fleet_snapshot().unwrap().store.unwrap();
    assert_ne!(sibling.key, identity.key, "another store");
    match fx.kind {
        Kind::Sqlite => {
            let meta = std::fs::metadata(fx.spec()).unwrap();
            assert_eq!(identity.engine, "sqlite");
            assert_eq!(identity.key, StoreKey::File { device: meta.dev(), inode: meta.ino() });
            assert_eq!(identity.location, fx.spec());
        }
        Kind::Postgres => {
            assert_eq!(identity.engine, "postgres");
            assert_eq!(identity.location, fleetgate_store::redact_url(&fx.spec()), "no password in it");
            let (StoreKey::Database { system, database, .. }, StoreKey::Database { system: s2, database: d2, .. }) =
                (&identity.key, &sibling.key)
            else {
                panic!("{identity:?} {sibling:?}")
            };
            assert_eq!(system, s2, "one server");
            assert_ne!(database, d2, "two databases");
            assert!(system.chars().all(|c| c.is_ascii_digit()), "the cluster's system identifier: {system}");
        }
    }
}
