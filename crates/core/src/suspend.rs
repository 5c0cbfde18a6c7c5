//! Suspend detection, sans I/O. `CLOCK_BOOTTIME` counts the time the machine
//! spent suspended and `CLOCK_MONOTONIC` does not, so between two readings of
//! the pair, boottime running ahead of monotonic is time spent asleep. A
//! laptop that wakes after an hour finds every lease it held expired; the
//! heartbeat loop reads the pair on each wake-up and beats at once when this
//! module says the machine slept. The shell reads the clocks
//! ([`ClockPairSource`]); nothing here does.

use serde::Serialize;
use std::sync::Mutex;
use std::time::Duration;

/// One reading of both clocks, as offsets from an arbitrary origin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockPair {
    /// `CLOCK_BOOTTIME`: runs through suspend.
    pub boottime: Duration,
    /// `CLOCK_MONOTONIC`: stops while suspended.
    pub monotonic: Duration,
}

/// A gap shorter than this is scheduling noise between the two reads, never a suspend.
pub const SUSPEND_THRESHOLD: Duration = Duration::from_secs(2);

/// How long the machine was suspended between `prev` and `cur`: the amount by
/// which boottime advanced more than monotonic, when that exceeds `threshold`.
/// A reading that goes backwards (a clock that is not what it claims) is no suspend.
pub fn suspended_between(prev: ClockPair, cur: ClockPair, threshold: Duration) -> Option<Duration> {
    let boot = cur.boottime.checked_sub(prev.boottime)?;
    let mono = cur.monotonic.checked_sub(prev.monotonic)?;
    boot.checked_sub(mono).filter(|gap| *gap > threshold)
}

/// The last reading and the threshold: feed it each new reading.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SuspendWatch {
    last: ClockPair,
    threshold: Duration,
}

impl SuspendWatch {
    /// Watching from `first`.
    pub fn new(first: ClockPair, threshold: Duration) -> Self {
        Self { last: first, threshold }
    }

    /// The suspend since the previous reading, if any; `cur` becomes the previous.
    pub fn observe(&mut self, cur: ClockPair) -> Option<Duration> {
        let suspended = suspended_between(self.last, cur, self.threshold);
        self.last = cur;
        suspended
    }
}

/// Catching up after a wake-up, when the lease has most likely expired: until a
/// renewal is answered (renewed or refused), a transient failure (the network
/// not back yet) is retried after a delay doubling from `first`, capped at
/// `cap` (the beat interval), instead of a whole interval later.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CatchUp {
    delay: Duration,
    cap: Duration,
}

impl CatchUp {
    /// Retrying first after `first`, never after more than `cap`.
    pub fn new(first: Duration, cap: Duration) -> Self {
        Self { delay: first.min(cap), cap }
    }

    /// The delay before the next retry; the one after is twice as long.
    pub fn next_delay(&mut self) -> Duration {
        let delay = self.delay;
        self.delay = delay.saturating_mul(2).min(self.cap);
        delay
    }
}

/// What the runtime context shows of the last detected suspend.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ResumedAfterSuspend {
    /// How long the machine slept, in whole seconds.
    pub resumed_after_suspend_seconds: u64,
    /// When the wake-up was noticed (wall clock).
    pub resumed_at: crate::Timestamp,
    /// The operator's sentence: `resumed after N s of suspend`.
    pub message: String,
}

impl ResumedAfterSuspend {
    /// A suspend of `slept`, noticed at `now`.
    pub fn new(slept: Duration, now: crate::Timestamp) -> Self {
        let seconds = slept.as_secs();
        Self {
            resumed_after_suspend_seconds: seconds,
            resumed_at: now,
            message: format!("resumed after {seconds} s of suspend"),
        }
    }
}

/// Reads the clock pair: the system's in the shell, a [`ManualClockPair`] in tests.
pub trait ClockPairSource: Send + Sync {
    /// Both clocks, now.
    fn read(&self) -> ClockPair;
}

/// A clock pair a test moves by hand: [`advance`](Self::advance) is time
/// awake, [`suspend`](Self::suspend) time asleep.
#[derive(Debug)]
pub struct ManualClockPair(Mutex<ClockPair>);

impl Default for ManualClockPair {
    fn default() -> Self {
        Self(Mutex::new(ClockPair { boottime: Duration::ZERO, monotonic: Duration::ZERO }))
    }
}

impl ManualClockPair {
    fn with(&self, f: impl FnOnce(&mut ClockPair)) {
        f(&mut self.0.lock().unwrap_or_else(|e| e.into_inner()));
    }

    /// Awake for `d`: both clocks move.
    pub fn advance(&self, d: Duration) {
        self.with(|p| {
            p.boottime += d;
            p.monotonic += d;
        });
    }

    /// Asleep for `d`: only boottime moves.
    pub fn suspend(&self, d: Duration) {
        self.with(|p| p.boottime += d);
    }
}

impl ClockPairSource for ManualClockPair {
    fn read(&self) -> ClockPair {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    fn at(boottime: u64, monotonic: u64) -> ClockPair {
        ClockPair { boottime: S(boottime), monotonic: S(monotonic) }
    }

    #[test]
    fn boottime_running_ahead_of_monotonic_is_a_suspend() {
        assert_eq!(suspended_between(at(100, 100), at(3801, 101), SUSPEND_THRESHOLD), Some(S(3700)));
    }

    #[test]
    fn both_clocks_moving_together_is_no_suspend() {
        assert_eq!(suspended_between(at(100, 100), at(400, 400), SUSPEND_THRESHOLD), None);
        assert_eq!(suspended_between(at(100, 100), at(100, 100), SUSPEND_THRESHOLD), None);
    }

    #[test]
    fn a_gap_at_or_below_the_threshold_is_noise() {
        assert_eq!(suspended_between(at(0, 0), at(12, 10), SUSPEND_THRESHOLD), None, "exactly the threshold");
        assert_eq!(suspended_between(at(0, 0), at(13, 10), SUSPEND_THRESHOLD), Some(S(3)));
        let tiny = ClockPair { boottime: Duration::from_millis(1_500), monotonic: Duration::from_millis(1_000) };
        assert_eq!(suspended_between(at(0, 0), tiny, SUSPEND_THRESHOLD), None);
    }

    #[test]
    fn clocks_that_go_backwards_or_monotonic_ahead_are_no_suspend() {
        assert_eq!(suspended_between(at(100, 100), at(50, 150), SUSPEND_THRESHOLD), None);
        assert_eq!(suspended_between(at(100, 100), at(5000, 50), SUSPEND_THRESHOLD), None);
        assert_eq!(suspended_between(at(100, 100), at(110, 200), SUSPEND_THRESHOLD), None);
    }

    #[test]
    fn a_watch_reports_each_suspend_once() {
        let clocks = ManualClockPair::default();
        let mut watch = SuspendWatch::new(clocks.read(), SUSPEND_THRESHOLD);
        clocks.advance(S(1));
        assert_eq!(watch.observe(clocks.read()), None);
        clocks.suspend(S(3600));
        clocks.advance(S(1));
        assert_eq!(watch.observe(clocks.read()), Some(S(3600)));
        assert_eq!(watch.observe(clocks.read()), None, "reported once");
        clocks.advance(S(600));
        assert_eq!(watch.observe(clocks.read()), None, "awake time is not a suspend, however long");
    }

    #[test]
    fn catching_up_retries_sooner_doubling_up_to_the_interval() {
        let mut c = CatchUp::new(S(1), S(300));
        let delays: Vec<u64> = (0..11).map(|_| c.next_delay().as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
        assert_eq!(CatchUp::new(S(10), S(3)).next_delay(), S(3), "never beyond the cap");
    }

    #[test]
    fn the_report_says_how_long_and_when() {
        let now = crate::Timestamp::ymd_hms(2026, 7, 30, 1, 40, 9);
        let r = ResumedAfterSuspend::new(Duration::from_millis(3_600_900), now);
        assert_eq!(r.message, "resumed after 3600 s of suspend");
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["resumed_after_suspend_seconds"], 3600);
        assert_eq!(json["resumed_at"], "2026-07-30T01:40:09Z");
        assert_eq!(json["message"], "resumed after 3600 s of suspend");
    }
}
