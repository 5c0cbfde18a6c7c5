//! The system clock, the only place fleetgate reads wall time for decisions.

use fleetgate_core::{Clock, Timestamp};

/// Wall-clock UTC, truncated to whole seconds.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        Timestamp::from_unix(i64::try_from(secs).unwrap_or(i64::MAX))
    }
}
