//! One clock across hosts: the store's server clock where it has one, the
//! injected clock where it has none.

use crate::engines::{Fixture, Kind};
use fleetgate_core::{Clock, ManualClock, Timestamp};
use fleetgate_store::StoreClock;
use std::sync::Arc;

fn system_now() -> Timestamp {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after 1970").as_secs();
    Timestamp::from_unix(i64::try_from(secs).expect("in range"))
}

pub fn the_store_clock_is_the_servers_where_there_is_one(fx: &Fixture) {
    let store = fx.open();
    // A manual clock far from the real time tells the two sources apart.
    let manual = Arc::new(ManualClock::new(Timestamp::ymd_hms(2001, 1, 1, 0, 0, 0)));
    let clock = StoreClock::new(store.clone(), manual.clone());
    match fx.kind {
        Kind::Sqlite => {
            assert_eq!(store.server_now().unwrap(), None, "an embedded file has no clock of its own");
            assert_eq!(clock.now(), manual.now());
            manual.advance(42);
            assert_eq!(clock.now(), manual.now(), "the local clock is the clock");
        }
        Kind::Postgres => {
            // The test server runs on this machine, so its clock and ours agree.
            let server = store.server_now().unwrap().expect("the server has a clock");
            assert!(server.seconds_since(system_now()).abs() <= 5, "server {server} vs local {}", system_now());
            let read = clock.now();
            assert!(read.seconds_since(server).abs() <= 5, "store clock {read} vs server {server}");
            manual.advance(100_000);
            let again = clock.now();
            assert!(again >= read && again.seconds_since(read) <= 5, "the local clock never enters: {again}");
        }
    }
}
