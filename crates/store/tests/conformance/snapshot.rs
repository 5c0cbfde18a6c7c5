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
    assert_eq!(FleetSnapshot { store_file: None, ..empty }, FleetSnapshot::default());
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

/// The snapshot names the file it was read from (device and inode), so a gateway that
/// names this very store is told from one with its own; a server's database has none.
pub fn the_fleet_snapshot_names_its_file(fx: &Fixture) {
    use std::os::unix::fs::MetadataExt;
    let store = fx.open();
    let file = store.fleet_snapshot().unwrap().store_file;
    match fx.kind {
        Kind::Sqlite => {
            let meta = std::fs::metadata(fx.spec()).unwrap();
            assert_eq!(file, Some((meta.dev(), meta.ino())));
            assert_eq!(fx.open().fleet_snapshot().unwrap().store_file, file, "another handle, the same file");
            assert_ne!(fx.sibling().open().fleet_snapshot().unwrap().store_file, file, "another store");
        }
        Kind::Postgres => assert_eq!(file, None),
    }
}
