//! The heartbeat interval policy: always leave room for lost beats in the TTL.

/// `ttl/3` by default; an override that parses as a positive number is
/// honoured up to `ttl/2`; anything else (empty, unparsable, zero, negative,
/// NaN, absent) falls back to `ttl/3`. The result is strictly below the TTL.
pub fn heartbeat_interval_for(ttl_seconds: f64, override_value: Option<&str>) -> f64 {
    let default = ttl_seconds / 3.0;
    let ceiling = ttl_seconds / 2.0;
    match override_value.map(str::trim).and_then(|s| s.parse::<f64>().ok()) {
        Some(v) if v > 0.0 => v.min(ceiling),
        _ => default,
    }
}

/// A periodic deadline, sans I/O: the shell asks [`poll_timeout`](Self::poll_timeout) when
/// to call back, and tells [`handle_timeout`](Self::handle_timeout) the time; times are
/// offsets on the shell's monotonic clock, so nothing here reads one. Drives the gateway's
/// heartbeat and runtime-row refresh loops.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cadence {
    every: std::time::Duration,
    next: std::time::Duration,
}

impl Cadence {
    /// Due first at `now + every`, then every `every`.
    pub fn new(every: std::time::Duration, now: std::time::Duration) -> Self {
        Self { every, next: now + every }
    }

    /// The interval.
    pub fn every(&self) -> std::time::Duration {
        self.every
    }

    /// When to call back.
    pub fn poll_timeout(&self) -> std::time::Duration {
        self.next
    }

    /// True when the deadline has passed at `now`; the next one is then scheduled an
    /// interval after `now` (a late wake-up shifts the schedule; it never bunches beats).
    pub fn handle_timeout(&mut self, now: std::time::Duration) -> bool {
        if now < self.next {
            return false;
        }
        self.next = now + self.every;
        true
    }

    /// Fired at `now` outside the schedule (a wake-up from suspend): the next
    /// deadline is an interval after `now`.
    pub fn fire(&mut self, now: std::time::Duration) {
        self.next = now + self.every;
    }

    /// Due again `delay` after `now` (never later than an interval): a retry sooner
    /// than the schedule.
    pub fn retry_after(&mut self, now: std::time::Duration, delay: std::time::Duration) {
        self.next = now + delay.min(self.every);
    }
}

#[cfg(test)]
mod tests {
    use super::heartbeat_interval_for as f;

    #[test]
    fn a_cadence_fires_once_per_deadline_and_reschedules_from_the_wake_up() {
        use super::Cadence;
        use std::time::Duration;
        let s = Duration::from_secs;
        let mut c = Cadence::new(s(10), s(0));
        assert_eq!(c.poll_timeout(), s(10));
        assert!(!c.handle_timeout(s(9)), "early");
        assert!(c.handle_timeout(s(10)));
        assert!(!c.handle_timeout(s(10)), "once per deadline");
        assert!(c.handle_timeout(s(35)), "late");
        assert_eq!(c.poll_timeout(), s(45), "from the wake-up, no burst of catch-up beats");
    }

    #[test]
    fn a_cadence_fired_early_reschedules_from_then() {
        use super::Cadence;
        use std::time::Duration;
        let s = Duration::from_secs;
        let mut c = Cadence::new(s(300), s(0));
        c.fire(s(7));
        assert_eq!(c.poll_timeout(), s(307), "an interval after the early beat");
        assert!(!c.handle_timeout(s(300)), "the old deadline no longer fires");
        assert!(c.handle_timeout(s(307)));
        c.retry_after(s(307), s(2));
        assert_eq!(c.poll_timeout(), s(309));
        c.retry_after(s(309), s(9999));
        assert_eq!(c.poll_timeout(), s(609), "a retry is never later than the interval");
    }

    #[test]
    fn default_is_a_third_of_the_ttl() {
        assert_eq!(f(900.0, None), 300.0);
    }

    #[test]
    fn override_is_capped_at_half_the_ttl() {
        assert_eq!(f(900.0, Some("5000")), 450.0);
        assert_eq!(f(900.0, Some("inf")), 450.0);
    }

    #[test]
    fn override_below_the_ceiling_is_honoured() {
        assert_eq!(f(900.0, Some("120")), 120.0);
        assert_eq!(f(900.0, Some(" 0.5 ")), 0.5);
    }

    #[test]
    fn unusable_overrides_fall_back_to_the_policy() {
        for bad in [Some(""), Some("abc"), Some("0"), Some("-5"), Some("NaN"), None] {
            assert_eq!(f(900.0, bad), 300.0, "{bad:?}");
        }
    }

    #[test]
    fn interval_is_strictly_below_the_ttl() {
        for ttl in [1.0, 30.0, 900.0, 14400.0] {
            assert!(f(ttl, None) < ttl);
            assert!(f(ttl, Some("1e12")) < ttl);
        }
    }
}
