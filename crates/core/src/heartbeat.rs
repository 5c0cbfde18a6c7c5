//! The heartbeat supervisor's ledger: what a beat's result does to the
//! supervisor's state. The thread that drives it lives in the shell.

use crate::blocker::BlockerKind;
use crate::worker::HeartbeatOutcome;
use serde::Serialize;

/// How one attempt ended, as the shell saw it.
#[derive(Clone, Debug)]
pub enum BeatAttempt {
    /// The store answered.
    Answered(HeartbeatOutcome),
    /// The store could not answer (locked, connection lost): try again later.
    Transient(String),
}

/// The report of one `beat_once`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BeatReport {
    /// False when the supervisor was already stopped: the store was not asked.
    pub beat_attempted: bool,
    /// The row was renewed.
    pub renewed: bool,
    /// The failure was transient; beating continues.
    pub transient: bool,
    /// The refusal's blocker, if refused.
    pub blocker_kind: Option<BlockerKind>,
    /// Reasons for anything but a renewal.
    pub reasons: Vec<String>,
}

/// Counters and the stop reason. A stop is final, whatever caused it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BeatLedger {
    /// Attempts that reached the store.
    pub beats_attempted: u64,
    /// Attempts that renewed the row.
    pub beats_renewed: u64,
    /// Attempts that failed transiently.
    pub transient_failures: u64,
    /// Why beating stopped; the first reason is kept.
    pub stopped_reason: Option<String>,
}

impl BeatLedger {
    /// May the supervisor ask the store again?
    pub fn may_beat(&self) -> bool {
        self.stopped_reason.is_none()
    }

    /// The report for a beat that was not attempted.
    pub fn skipped(&self) -> BeatReport {
        BeatReport {
            beat_attempted: false,
            renewed: false,
            transient: false,
            blocker_kind: None,
            reasons: vec![format!(
                "heartbeat supervisor is stopped: {}",
                self.stopped_reason.as_deref().unwrap_or("not stopped")
            )],
        }
    }

    /// Fold one attempt into the ledger. A terminal refusal stops for good.
    pub fn record(&mut self, attempt: BeatAttempt) -> BeatReport {
        self.beats_attempted += 1;
        match attempt {
            BeatAttempt::Answered(out) if out.renewed => {
                self.beats_renewed += 1;
                BeatReport {
                    beat_attempted: true,
                    renewed: true,
                    transient: false,
                    blocker_kind: None,
                    reasons: Vec::new(),
                }
            }
            BeatAttempt::Answered(out) => {
                let kind = out.blocker_kind.unwrap_or(BlockerKind::WorkerFenced);
                self.stop(format!("{kind}: {}", out.reasons.join("; ")));
                BeatReport {
                    beat_attempted: true,
                    renewed: false,
                    transient: false,
                    blocker_kind: Some(kind),
                    reasons: out.reasons,
                }
            }
            BeatAttempt::Transient(why) => {
                self.transient_failures += 1;
                BeatReport {
                    beat_attempted: true,
                    renewed: false,
                    transient: true,
                    blocker_kind: None,
                    reasons: vec![why],
                }
            }
        }
    }

    /// Stop; idempotent, the first reason wins. Returns true if this call stopped it.
    pub fn stop(&mut self, reason: impl Into<String>) -> bool {
        if self.stopped_reason.is_some() {
            return false;
        }
        self.stopped_reason = Some(reason.into());
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_refusal_stops_and_later_beats_are_skipped() {
        let mut l = BeatLedger::default();
        let refused = HeartbeatOutcome {
            renewed: false,
            blocker_kind: Some(BlockerKind::WorkerFenced),
            expectation_drift: vec![],
            reasons: vec!["epoch".into()],
        };
        let r = l.record(BeatAttempt::Answered(refused));
        assert_eq!(r.blocker_kind, Some(BlockerKind::WorkerFenced));
        assert!(!l.may_beat());
        assert!(l.stopped_reason.as_deref().unwrap().starts_with("worker_fenced"));
        assert!(!l.skipped().beat_attempted);
        assert!(!l.stop("later"), "first reason is kept");
    }

    #[test]
    fn transient_is_counted_and_beating_continues() {
        let mut l = BeatLedger::default();
        let r = l.record(BeatAttempt::Transient("database is locked".into()));
        assert!(r.transient && !r.renewed);
        assert!(l.may_beat());
        l.record(BeatAttempt::Answered(HeartbeatOutcome::renewed()));
        assert_eq!((l.beats_attempted, l.beats_renewed, l.transient_failures), (2, 1, 1));
    }
}
