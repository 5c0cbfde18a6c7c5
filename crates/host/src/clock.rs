//! The system clock, the only place fleetgate reads wall time for decisions, and the
//! clock pair the heartbeat loop notices a suspend by.

use fleetgate_core::suspend::{ClockPair, ClockPairSource};
use fleetgate_core::{Clock, Timestamp};
use rustix::time::{ClockId, Timespec, clock_gettime};
use std::time::Duration;

/// Wall-clock UTC, truncated to whole seconds.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        Timestamp::from_unix(i64::try_from(secs).unwrap_or(i64::MAX))
    }
}

/// The system's `CLOCK_BOOTTIME` (runs through suspend) and `CLOCK_MONOTONIC` (does not),
/// read back to back. Where there is no boottime clock, both are monotonic: no suspend is seen.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClockPair;

fn offset(t: Timespec) -> Duration {
    Duration::new(u64::try_from(t.tv_sec).unwrap_or(0), u32::try_from(t.tv_nsec).unwrap_or(0))
}

impl ClockPairSource for SystemClockPair {
    fn read(&self) -> ClockPair {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        let boottime = offset(clock_gettime(ClockId::Boottime));
        let monotonic = offset(clock_gettime(ClockId::Monotonic));
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        let boottime = monotonic;
        ClockPair { boottime, monotonic }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_pair_moves_forward_and_sees_no_suspend_while_awake() {
        let first = SystemClockPair.read();
        let second = SystemClockPair.read();
        assert!(second.monotonic >= first.monotonic && second.boottime >= first.boottime);
        assert_eq!(
            fleetgate_core::suspend::suspended_between(first, second, fleetgate_core::suspend::SUSPEND_THRESHOLD),
            None
        );
    }
}
