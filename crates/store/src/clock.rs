//! [`StoreClock`]: one clock for every host that shares a store.
//!
//! Lease ages compared across hosts are only meaningful against one clock.
//! Kubernetes' client-go and Consul both shipped lease expiry computed from
//! each host's wall clock and learned that skew between hosts expires live
//! holders or keeps dead ones. The store's server is the one clock all hosts
//! see, so TTL decisions take `now` from it wherever it has one.

use crate::Store;
use fleetgate_core::{Clock, Timestamp};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a reading of the server's clock is extrapolated on the local
/// monotonic clock before the server is asked again.
pub const RESYNC_EVERY: Duration = Duration::from_secs(30);

/// A [`Clock`] that reads the store's clock ([`Store::server_now`]) and falls
/// back to `local` when the store has none (SQLite).
///
/// Between readings (at most [`RESYNC_EVERY`] apart) it advances the last
/// server reading by the local *monotonic* clock, so a step of the local wall
/// clock never moves it, and most calls cost no round trip. When the server
/// cannot be reached it keeps extrapolating from the last reading; before any
/// reading it answers the local clock (the store call that follows fails the
/// same way, so nothing is decided on that answer alone).
///
/// Tests inject a [`fleetgate_core::ManualClock`] directly and never build
/// one of these: the injected clock stays the only clock.
pub struct StoreClock {
    store: Arc<dyn Store>,
    local: Arc<dyn Clock>,
    last: Mutex<Reading>,
}

#[derive(Clone, Copy)]
enum Reading {
    /// Not asked yet, or the last reading is too old.
    None,
    /// The store has no clock: the local one is the clock.
    NoServerClock,
    /// The server said `at` when the local monotonic clock said `seen`.
    Server { at: Timestamp, seen: Instant },
}

impl StoreClock {
    /// A clock over `store`, with `local` for stores that have no clock.
    pub fn new(store: Arc<dyn Store>, local: Arc<dyn Clock>) -> Self {
        Self { store, local, last: Mutex::new(Reading::None) }
    }
}

impl fmt::Debug for StoreClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreClock").field("store", &self.store.describe()).finish_non_exhaustive()
    }
}

fn extrapolate(at: Timestamp, seen: Instant) -> Timestamp {
    at.plus_seconds(i64::try_from(seen.elapsed().as_secs()).unwrap_or(i64::MAX))
}

impl Clock for StoreClock {
    fn now(&self) -> Timestamp {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        match *last {
            Reading::NoServerClock => return self.local.now(),
            Reading::Server { at, seen } if seen.elapsed() < RESYNC_EVERY => return extrapolate(at, seen),
            _ => {}
        }
        match self.store.server_now() {
            Ok(Some(at)) => {
                *last = Reading::Server { at, seen: Instant::now() };
                at
            }
            Ok(None) => {
                *last = Reading::NoServerClock;
                self.local.now()
            }
            Err(_) => match *last {
                Reading::Server { at, seen } => extrapolate(at, seen),
                _ => self.local.now(),
            },
        }
    }
}
