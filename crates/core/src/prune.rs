//! Which rows are history old enough to delete (`fleetgate worker prune`, `fleetgate
//! runtime prune`): pure functions of a row, `now` and the age asked for. A live lease
//! and a running server's row are never history, whatever the age.

use crate::Timestamp;
use crate::runtime::{RuntimeRecord, RuntimeStatus};
use crate::worker::{WorkerRecord, WorkerStatus};

/// The longest `--older-than` accepted: ten years.
pub const MAX_AGE_SECONDS: i64 = 10 * 365 * 86_400;

/// A worker row is history when it was stopped or its lease expired (its last heartbeat
/// is more than its TTL before `now`), and it may go once that heartbeat is at least
/// `older_than_seconds` old. An active row within its TTL is never prunable.
pub fn worker_prunable(row: &WorkerRecord, now: Timestamp, older_than_seconds: i64) -> bool {
    let age = now.seconds_since(row.last_heartbeat_at);
    let expired = age as f64 > row.heartbeat_ttl_seconds;
    (row.status == WorkerStatus::Stopped || expired) && age >= older_than_seconds.max(0)
}

/// A runtime row is history once its server stopped in order; it may go once its last
/// sign of life (its last refresh, else its registration) is at least
/// `older_than_seconds` old. A running row is never prunable: a server that died without
/// stopping is the inventory's to report (stale), not history to delete.
pub fn runtime_prunable(row: &RuntimeRecord, now: Timestamp, older_than_seconds: i64) -> bool {
    let last = row.last_heartbeat_at.unwrap_or(row.registered_at);
    row.status == RuntimeStatus::Stopped && now.seconds_since(last) >= older_than_seconds.max(0)
}

/// The shortest age history may be pruned at (`[retention]`, `fleetgate prune`): a day, past
/// the longest an approval or a denial stands (`[approvals] ttl_seconds` is at most a day), so
/// nothing pruned can still decide a call.
pub const MIN_HISTORY_SECONDS: i64 = 86_400;

/// The shortest interval between scheduled prunes (`[retention] every`).
pub const MIN_EVERY_SECONDS: i64 = 60;

/// How long each kind of history is kept (`[retention]`, and `fleetgate prune`'s flags over
/// it); `None`: kept for ever.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Retention {
    /// The audit log.
    pub audit: Option<i64>,
    /// Answered, used, withdrawn and expired approval requests, and delivered events.
    pub approvals: Option<i64>,
    /// A closed PR's records (decisions, origin, leases, locks) and pushes no branch's tip is.
    pub workflow: Option<i64>,
    /// Host observations.
    pub observations: Option<i64>,
    /// Stopped and expired worker rows ([`worker_prunable`]).
    pub workers: Option<i64>,
    /// Stopped runtime rows ([`runtime_prunable`]).
    pub runtimes: Option<i64>,
    /// How often `serve` and `dashboard` prune by themselves; `None`: never (run `fleetgate
    /// prune`).
    pub every: Option<i64>,
}

impl Retention {
    /// Whether anything is pruned at all.
    pub fn prunes_anything(&self) -> bool {
        [self.audit, self.approvals, self.workflow, self.observations, self.workers, self.runtimes]
            .iter()
            .any(Option::is_some)
    }
}

/// An age for `key` of `[retention]`: [`parse_age`], at least `floor` seconds.
pub fn parse_age_at_least(key: &str, text: &str, floor: i64) -> Result<i64, AgeError> {
    let seconds = parse_age(text).map_err(|e| AgeError::Keyed(key.to_owned(), Box::new(e)))?;
    if seconds < floor {
        return Err(AgeError::Shorter { key: key.to_owned(), text: text.to_owned(), floor });
    }
    Ok(seconds)
}

/// A push may go once its branch's tip is another commit, or the branch is gone (`tip`
/// `None`): no PR can still have it as its head by that branch. A push whose branch could
/// not be read is never judged here (the caller keeps it).
pub fn push_superseded(head: &str, tip: Option<&str>) -> bool {
    tip != Some(head)
}

/// `--older-than`: a whole number and a unit, `s`, `m`, `h`, `d` or `w` (`90s`, `30m`,
/// `12h`, `7d`, `2w`), up to [`MAX_AGE_SECONDS`]; the seconds it means.
pub fn parse_age(text: &str) -> Result<i64, AgeError> {
    let expected = || AgeError::NotAnAge(text.to_owned());
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).ok_or_else(expected)?;
    let (digits, unit) = text.split_at(split);
    let n: i64 = digits.parse().map_err(|_| expected())?;
    let unit_seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        _ => return Err(expected()),
    };
    match n.checked_mul(unit_seconds) {
        Some(seconds) if seconds <= MAX_AGE_SECONDS => Ok(seconds),
        _ => Err(AgeError::TooLong(text.to_owned())),
    }
}

/// Why an age is refused ([`parse_age`], [`parse_age_at_least`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgeError {
    /// Not a whole number and a unit (the text as given).
    NotAnAge(String),
    /// Longer than [`MAX_AGE_SECONDS`].
    TooLong(String),
    /// The error, under the key it was read for.
    Keyed(String, Box<AgeError>),
    /// Shorter than the least the key allows.
    Shorter {
        /// The key.
        key: String,
        /// The age as written.
        text: String,
        /// The least, in seconds.
        floor: i64,
    },
}

impl std::fmt::Display for AgeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotAnAge(text) => {
                write!(f, "{text:?} is not an age: expected a whole number and s, m, h, d or w (30m, 12h, 7d)")
            }
            Self::TooLong(text) => write!(f, "{text:?} is longer than ten years"),
            Self::Keyed(key, e) => write!(f, "{key}: {e}"),
            Self::Shorter { key, text, floor } => {
                write!(f, "{key} = {text:?} is shorter than {floor} s, the least it may be")
            }
        }
    }
}

impl std::error::Error for AgeError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_push_goes_only_when_its_branch_has_moved_on_or_is_gone() {
        assert!(!push_superseded("abc", Some("abc")), "still the tip: a PR may have it as its head");
        assert!(push_superseded("abc", Some("def")));
        assert!(push_superseded("abc", None));
    }

    #[test]
    fn history_ages_have_a_floor() {
        assert_eq!(parse_age_at_least("audit", "2d", MIN_HISTORY_SECONDS), Ok(2 * 86_400));
        let short = parse_age_at_least("audit", "12h", MIN_HISTORY_SECONDS).unwrap_err().to_string();
        assert!(short.contains("shorter than 86400 s"), "{short}");
        assert!(
            parse_age_at_least("audit", "soon", MIN_HISTORY_SECONDS).unwrap_err().to_string().starts_with("audit: ")
        );
    }
    use crate::runtime::{CohortSource, RuntimeRecord};

    fn now() -> Timestamp {
        Timestamp::ymd_hms(2026, 7, 30, 12, 0, 0)
    }

    /// A row with a 900 s TTL, last heard from `last_seen_ago` seconds before `now`.
    fn worker(last_seen_ago: i64, status: WorkerStatus) -> WorkerRecord {
        let mut row = crate::worker::tests::row_at(now().plus_seconds(-last_seen_ago));
        row.status = status;
        row
    }

    #[test]
    fn a_live_lease_is_never_history_however_old_the_age_asked() {
        for age in [0, 60, 899, 900] {
            assert!(!worker_prunable(&worker(age, WorkerStatus::Active), now(), 0), "{age}");
        }
        // Expired, and older than asked.
        assert!(worker_prunable(&worker(901, WorkerStatus::Active), now(), 0));
        assert!(worker_prunable(&worker(7200, WorkerStatus::Active), now(), 3600));
        // Expired, but younger than asked.
        assert!(!worker_prunable(&worker(1800, WorkerStatus::Active), now(), 3600));
        // A heartbeat from the future is no age at all.
        assert!(!worker_prunable(&worker(-60, WorkerStatus::Stopped), now(), 0));
    }

    #[test]
    fn a_stopped_worker_is_history_once_old_enough() {
        assert!(worker_prunable(&worker(10, WorkerStatus::Stopped), now(), 0));
        assert!(worker_prunable(&worker(3600, WorkerStatus::Stopped), now(), 3600));
        assert!(!worker_prunable(&worker(3599, WorkerStatus::Stopped), now(), 3600));
    }

    fn runtime(registered_ago: i64, refreshed_ago: Option<i64>, status: RuntimeStatus) -> RuntimeRecord {
        RuntimeRecord {
            runtime_id: "ns:1:b".into(),
            namespace: "ns".into(),
            profile: "p".into(),
            role: "author".into(),
            remote: None,
            org: None,
            repo: None,
            repository_root: None,
            pid: 1,
            cohort_id: None,
            cohort_source: CohortSource::Unknown,
            client_provenance: "sidecar".into(),
            boot_id: "b".into(),
            startup_head: None,
            daemon_start_head: None,
            transport: "stdio".into(),
            registered_at: now().plus_seconds(-registered_ago),
            last_heartbeat_at: refreshed_ago.map(|a| now().plus_seconds(-a)),
            status,
            host: None,
        }
    }

    #[test]
    fn only_a_stopped_runtime_row_is_history() {
        assert!(runtime_prunable(&runtime(7200, Some(3600), RuntimeStatus::Stopped), now(), 3600));
        assert!(!runtime_prunable(&runtime(7200, Some(3599), RuntimeStatus::Stopped), now(), 3600));
        assert!(runtime_prunable(&runtime(7200, None, RuntimeStatus::Stopped), now(), 3600));
        // Running, however long silent: the inventory's (stale), never deleted.
        assert!(!runtime_prunable(&runtime(86_400 * 30, Some(86_400 * 30), RuntimeStatus::Running), now(), 0));
    }

    #[test]
    fn ages_are_a_number_and_a_unit() {
        assert_eq!(parse_age("90s"), Ok(90));
        assert_eq!(parse_age("30m"), Ok(1800));
        assert_eq!(parse_age("12h"), Ok(43_200));
        assert_eq!(parse_age("7d"), Ok(604_800));
        assert_eq!(parse_age("2w"), Ok(1_209_600));
        assert_eq!(parse_age("0s"), Ok(0));
        for bad in ["", "7", "d", "-1d", "1.5h", "7 d", "7days", "1y", "99999999999999999999d"] {
            assert!(parse_age(bad).is_err(), "{bad:?}");
        }
        assert!(parse_age("3651d").unwrap_err().to_string().contains("ten years"));
    }
}
