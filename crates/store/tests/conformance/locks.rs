//! Schema v7's review-decision locks: one live lock per reviewer session, written with the
//! decision it follows from, corrected in place on the same PR, released when its PR is moot.

use crate::engines::Fixture;
use crate::ledger::{actor, pr};
use crate::support::now;
use fleetgate_core::decision_lock::LockPhase;
use fleetgate_core::workflow::{PrDecision, PrRef, ReviewVerdict};
use fleetgate_store::LockWrite;

fn decision(pr: PrRef, head: &str, verdict: ReviewVerdict, who: &str, second: i64) -> PrDecision {
    let by = actor(who);
    PrDecision {
        pr,
        head: head.into(),
        base: Some("main".into()),
        verdict,
        by,
        at: now().plus_seconds(second),
        cleared: None,
    }
}

pub fn a_lock_is_written_with_its_decision_one_per_session_and_released_when_moot(fx: &Fixture) {
    let store = fx.open();
    let other = PrRef { binding: pr().binding, pr: 977 };
    let take = |id: &str| LockWrite::Take { lock_id: id.into() };
    let lock = store
        .record_locked_decision(&decision(pr(), "h1", ReviewVerdict::RequestChanges, "r1", 0), &take("L1"))
        .unwrap()
        .expect("the lock is taken");
    assert_eq!((lock.lock_id.as_str(), lock.head.as_str(), lock.decisions), ("L1", "h1", 1));
    assert_eq!((lock.verdict, lock.phase), (ReviewVerdict::RequestChanges, LockPhase::Live));
    assert_eq!(store.pr_records(&pr()).unwrap().decisions.len(), 1, "the decision is recorded with it");
    // A second lock for the same session cannot be taken (the decision is still recorded).
    let second =
        store.record_locked_decision(&decision(other.clone(), "x", ReviewVerdict::Approve, "r1", 1), &take("L2"));
    assert_eq!(second.unwrap(), None, "one live lock per session");
    assert_eq!(store.pr_records(&other).unwrap().decisions.len(), 1);
    // Another session locks on its own.
    let theirs =
        store.record_locked_decision(&decision(other.clone(), "x", ReviewVerdict::Approve, "r2", 1), &take("L3"));
    assert_eq!(theirs.unwrap().map(|l| l.lock_id), Some("L3".to_owned()));
    // A correction: the same lock names the decision at the new head.
    let corrected = store
        .record_locked_decision(
            &decision(pr(), "h2", ReviewVerdict::Approve, "r1", 2),
            &LockWrite::Correct { lock_id: "L1".into() },
        )
        .unwrap()
        .unwrap();
    assert_eq!((corrected.head.as_str(), corrected.verdict, corrected.decisions), ("h2", ReviewVerdict::Approve, 2));
    let mine = store.live_review_locks("codex", "s-r1").unwrap();
    assert_eq!(mine, vec![corrected.clone()]);
    assert_eq!(store.list_review_locks(true).unwrap().len(), 2);
    // The PR is merged: its locks are released `moot`, once; the other PR's stays.
    let at = now().plus_seconds(3);
    let released = store.release_review_locks(&pr(), "moot", at).unwrap();
    assert_eq!(released.len(), 1);
    assert_eq!(
        (released[0].phase, released[0].released_reason.as_deref(), released[0].released_at),
        (LockPhase::Released, Some("moot"), Some(at))
    );
    assert!(store.release_review_locks(&pr(), "moot", at).unwrap().is_empty(), "released once");
    assert!(store.live_review_locks("codex", "s-r1").unwrap().is_empty(), "the session is free again");
    assert_eq!(store.list_review_locks(false).unwrap().len(), 2, "kept as history");
    // An operator's release of one lock.
    let one = store.release_review_lock("L3", "closed outside the fleet", at).unwrap().unwrap();
    assert_eq!(one.released_reason.as_deref(), Some("closed outside the fleet"));
    assert_eq!(store.release_review_lock("L3", "again", at).unwrap(), None);
    assert!(store.list_review_locks(true).unwrap().is_empty());
}
