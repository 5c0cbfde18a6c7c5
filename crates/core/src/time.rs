//! Control-plane time: whole UTC seconds, shown as `%Y-%m-%dT%H:%M:%SZ`, and
//! the [`Clock`] every decision takes `now` from.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::sync::Mutex;

/// A UTC instant in whole seconds since the Unix epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

/// A timestamp that is not `YYYY-MM-DDTHH:MM:SSZ`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimestampError(pub String);

impl fmt::Display for TimestampError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid timestamp {:?}: expected YYYY-MM-DDTHH:MM:SSZ", self.0)
    }
}

impl std::error::Error for TimestampError {}

impl Timestamp {
    /// From seconds since the Unix epoch.
    pub const fn from_unix(seconds: i64) -> Self {
        Self(seconds)
    }

    /// Seconds since the Unix epoch.
    pub const fn unix(self) -> i64 {
        self.0
    }

    /// A civil UTC date and time. Panics on out-of-range fields, so use it for
    /// constants and tests; [`Timestamp::parse`] is for input.
    pub fn ymd_hms(y: i64, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> Self {
        assert!((1..=12).contains(&mo) && (1..=31).contains(&d) && h < 24 && mi < 60 && s < 60);
        Self(days_from_civil(y, mo, d) * 86_400 + i64::from(h * 3600 + mi * 60 + s))
    }

    /// This instant plus (or minus) whole seconds.
    pub fn plus_seconds(self, seconds: i64) -> Self {
        Self(self.0.saturating_add(seconds))
    }

    /// Seconds from `earlier` to `self` (negative when `earlier` is later).
    pub fn seconds_since(self, earlier: Timestamp) -> i64 {
        self.0.saturating_sub(earlier.0)
    }

    /// Parse `YYYY-MM-DDTHH:MM:SSZ`.
    pub fn parse(text: &str) -> Result<Self, TimestampError> {
        let err = || TimestampError(text.to_owned());
        let b = text.as_bytes();
        if b.len() != 20
            || b[4] != b'-'
            || b[7] != b'-'
            || b[10] != b'T'
            || b[13] != b':'
            || b[16] != b':'
            || b[19] != b'Z'
        {
            return Err(err());
        }
        let num = |range: std::ops::Range<usize>| -> Result<u32, TimestampError> {
            let part = &text[range];
            if !part.bytes().all(|c| c.is_ascii_digit()) {
                return Err(err());
            }
            part.parse().map_err(|_| err())
        };
        let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
        let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
        if !(1..=12).contains(&mo) || d == 0 || d > days_in_month(i64::from(y), mo) || h > 23 || mi > 59 || s > 59 {
            return Err(err());
        }
        Ok(Self::ymd_hms(i64::from(y), mo, d, h, mi, s))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let days = self.0.div_euclid(86_400);
        let secs = self.0.rem_euclid(86_400);
        let (y, mo, d) = civil_from_days(days);
        write!(f, "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}Z", secs / 3600, (secs / 60) % 60, secs % 60)
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Timestamp::parse(&text).map_err(serde::de::Error::custom)
    }
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

// Proleptic Gregorian day counts (the well-known era arithmetic).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Where decisions get `now`. The shell passes a system clock; tests pass a
/// [`ManualClock`] and move it by hand.
pub trait Clock: Send + Sync {
    /// The current instant.
    fn now(&self) -> Timestamp;
}

/// A clock that only moves when told to. Nothing that uses it sleeps.
#[derive(Debug)]
pub struct ManualClock(Mutex<Timestamp>);

impl ManualClock {
    /// A clock standing at `start`.
    pub fn new(start: Timestamp) -> Self {
        Self(Mutex::new(start))
    }

    /// Move forward by `seconds` and return the new instant.
    pub fn advance(&self, seconds: i64) -> Timestamp {
        let mut now = self.0.lock().unwrap_or_else(|e| e.into_inner());
        *now = now.plus_seconds(seconds);
        *now
    }

    /// Jump to `at`.
    pub fn set(&self, at: Timestamp) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = at;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn formats_in_the_control_plane_format() {
        let t = Timestamp::ymd_hms(2026, 7, 30, 0, 40, 9);
        assert_eq!(t.to_string(), "2026-07-30T00:40:09Z");
        assert_eq!(Timestamp::from_unix(0).to_string(), "1970-01-01T00:00:00Z");
        assert_eq!(Timestamp::parse("2026-07-30T00:40:09Z"), Ok(t));
    }

    #[test]
    fn rejects_other_shapes() {
        for bad in [
            "",
            "2026-07-30 00:40:09Z",
            "2026-07-30T00:40:09",
            "2026-02-30T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-07-30T24:00:00Z",
            "+026-07-30T00:40:09Z",
        ] {
            assert!(Timestamp::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn manual_clock_moves_only_when_told() {
        let c = ManualClock::new(Timestamp::from_unix(100));
        assert_eq!(c.now(), Timestamp::from_unix(100));
        assert_eq!(c.advance(300), Timestamp::from_unix(400));
        assert_eq!(c.now().seconds_since(Timestamp::from_unix(100)), 300);
    }

    proptest! {
        #[test]
        fn format_parse_round_trips(secs in 0i64..253_402_300_799) {
            let t = Timestamp::from_unix(secs);
            prop_assert_eq!(Timestamp::parse(&t.to_string()), Ok(t));
        }
    }
}
