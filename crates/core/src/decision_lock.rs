//! Review-decision locks (the seed's coordination): a reviewer session that
//! records a terminal review decision (approve or request changes) on a PR holds a lock on
//! that PR, and while it holds it makes no decision on any other PR. One reviewer session,
//! one open decision: a confused session cannot approve its way through the queue, and every
//! approval traces to a session that did nothing else meanwhile.
//!
//! The lock ends in exactly two ways: **moot** — its PR was merged or closed (through the
//! gateway, or an operator's `fleetgate pr release-lock` once the forge says so) — or it is
//! carried by a **correction**: the same session decides again on the same PR at a new head
//! (the author pushed after a request-changes). A correction never moves a lock to another
//! PR; across PRs the only ways are a new session or the moot release.

use crate::blocker::BlockerKind;
use crate::time::Timestamp;
use crate::workflow::{Actor, PrRef, Refusal, ReviewVerdict};
use serde::{Deserialize, Serialize};

/// Where a lock stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LockPhase {
    /// Held.
    Live,
    /// Ended (moot, or an operator's release).
    Released,
}

impl LockPhase {
    /// The wire literal.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Live => "live",
            Self::Released => "released",
        }
    }

    /// The phase named `text`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "live" => Some(Self::Live),
            "released" => Some(Self::Released),
            _ => None,
        }
    }
}

/// Why a lock ended.
pub mod ended {
    /// Its PR was merged or closed.
    pub const MOOT: &str = "moot";
}

/// A review-decision lock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewLock {
    /// Its id.
    pub lock_id: String,
    /// The PR it names.
    #[serde(flatten)]
    pub pr: PrRef,
    /// The reviewer session (its worker, profile, client and session).
    pub holder: Actor,
    /// The head of the decision it follows from.
    pub head: String,
    /// That decision.
    pub verdict: ReviewVerdict,
    /// When it was made.
    pub decided_at: Timestamp,
    /// Decisions recorded under it (1, plus one per correction).
    pub decisions: i64,
    /// Held or ended.
    pub phase: LockPhase,
    /// Why it ended.
    pub released_reason: Option<String>,
    /// When it ended.
    pub released_at: Option<Timestamp>,
}

/// What recording a decision does to the session's lock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LockPlan {
    /// The session holds no lock: the decision takes one.
    Take,
    /// A correction: the session's lock on this PR now names this decision at the new head.
    Correct {
        /// The lock.
        lock_id: String,
        /// The head it named before.
        from_head: String,
    },
}

fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

pub use crate::blocker::LOCKED_ACTION;

/// May the reviewer session `caller` record a decision on `pr` at `head`, holding `held`
/// (its live locks: at most one)?
pub fn judge_decision(held: &[ReviewLock], caller: &Actor, pr: &PrRef, head: &str) -> Result<LockPlan, Refusal> {
    let Some(lock) = held.iter().find(|l| l.phase == LockPhase::Live) else { return Ok(LockPlan::Take) };
    let name = |l: &ReviewLock| {
        format!(
            "session {} holds the review-decision lock {} on {} ({} at head {}, {})",
            caller.session,
            l.lock_id,
            l.pr,
            l.verdict.as_str(),
            short(&l.head),
            l.decided_at
        )
    };
    if &lock.pr != pr {
        return Err(Refusal {
            blocker_kind: BlockerKind::ReviewDecisionLocked,
            reasons: vec![
                name(lock),
                format!(
                    "a decision on {pr} waits until {} is merged or closed, or comes from a new reviewer session",
                    lock.pr
                ),
            ],
            operator_action: LOCKED_ACTION.into(),
        });
    }
    if lock.head == head {
        return Err(Refusal {
            blocker_kind: BlockerKind::ReviewDecisionLocked,
            reasons: vec![
                name(lock),
                format!("the PR's head has not moved since: a correction needs a new head, not {}", short(head)),
            ],
            operator_action: LOCKED_ACTION.into(),
        });
    }
    Ok(LockPlan::Correct { lock_id: lock.lock_id.clone(), from_head: lock.head.clone() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn actor(session: &str) -> Actor {
        Actor {
            worker: "w".into(),
            profile: "prgs-reviewer".into(),
            client: "codex".into(),
            session: session.into(),
            principal: None,
        }
    }

    fn pr(n: u64) -> PrRef {
        PrRef { binding: "forge/org/repo".into(), pr: n }
    }

    fn lock(n: u64, head: &str, phase: LockPhase) -> ReviewLock {
        ReviewLock {
            lock_id: "L1".into(),
            pr: pr(n),
            holder: actor("s1"),
            head: head.into(),
            verdict: ReviewVerdict::RequestChanges,
            decided_at: Timestamp::from_unix(1_800_000_000),
            decisions: 1,
            phase,
            released_reason: None,
            released_at: None,
        }
    }

    #[test]
    fn one_session_one_open_decision_and_corrections_stay_on_their_pr() {
        let me = actor("s1");
        assert_eq!(judge_decision(&[], &me, &pr(976), "h1"), Ok(LockPlan::Take));
        let held = [lock(976, "h1", LockPhase::Live)];
        let other = judge_decision(&held, &me, &pr(977), "h9").unwrap_err();
        assert_eq!(other.blocker_kind, BlockerKind::ReviewDecisionLocked);
        assert!(other.reasons[0].contains("forge/org/repo#976") && other.reasons[0].contains("request_changes"));
        assert!(other.reasons[1].contains("merged or closed"), "{other:?}");
        let same = judge_decision(&held, &me, &pr(976), "h1").unwrap_err();
        assert!(same.reasons[1].contains("has not moved"), "{same:?}");
        assert_eq!(
            judge_decision(&held, &me, &pr(976), "h2"),
            Ok(LockPlan::Correct { lock_id: "L1".into(), from_head: "h1".into() })
        );
        assert_eq!(judge_decision(&[lock(976, "h1", LockPhase::Released)], &me, &pr(977), "h9"), Ok(LockPlan::Take));
    }
}
