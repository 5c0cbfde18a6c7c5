//! Pruning history: dead, expired and stopped worker rows and stopped runtime rows
//! older than the age asked for go; a live lease and a running server's row never do.

use crate::engines::Fixture;
use crate::support::{TTL, attach, now, renewal, runtime_row};
use fleetgate_core::runtime::RuntimeStatus;

pub fn pruning_deletes_old_history_and_never_a_live_row(fx: &Fixture) {
    let store = fx.open();
    let (hour, day) = (3_600, 86_400);
    // Registered at `now`; renewed, stopped or left alone, then judged `day` later.
    for id in ["w-live", "w-expired", "w-stopped", "w-recent-stop", "w-young-expiry"] {
        attach(&*store, id);
    }
    let judged_at = now().plus_seconds(day);
    // Renewed a minute before the judgement: live, whatever the age asked.
    assert!(store.heartbeat(&renewal("w-live", 1), judged_at.plus_seconds(-60)).unwrap().renewed);
    store.deregister_worker("w-stopped", now()).unwrap();
    // Stopped a little while ago: its last heartbeat is recent.
    assert!(store.heartbeat(&renewal("w-recent-stop", 1), judged_at.plus_seconds(-600)).unwrap().renewed);
    store.deregister_worker("w-recent-stop", judged_at).unwrap();
    // Expired (silent for more than its TTL), but younger than the age asked.
    let young = judged_at.plus_seconds(-(TTL as i64) - 120);
    assert!(store.heartbeat(&renewal("w-young-expiry", 1), young).unwrap().renewed);

    let pruned = store.prune_workers(hour, judged_at).unwrap();
    assert_eq!(pruned, ["w-expired", "w-stopped"], "the day-old expired and stopped rows");
    let left: Vec<String> = store.list_workers().unwrap().into_iter().map(|w| w.ids.worker_identity).collect();
    assert_eq!(left, ["w-live", "w-recent-stop", "w-young-expiry"]);
    assert!(store.prune_workers(hour, judged_at).unwrap().is_empty(), "nothing more to prune");

    // Age zero: every expired or stopped row, still never the live one.
    let pruned = store.prune_workers(0, judged_at).unwrap();
    assert_eq!(pruned, ["w-recent-stop", "w-young-expiry"]);
    let left: Vec<String> = store.list_workers().unwrap().into_iter().map(|w| w.ids.worker_identity).collect();
    assert_eq!(left, ["w-live"]);
    // The live row renews as before.
    assert!(store.heartbeat(&renewal("w-live", 1), judged_at).unwrap().renewed);
}

pub fn pruning_runtime_rows_deletes_only_old_stopped_ones(fx: &Fixture) {
    let store = fx.open();
    let day = 86_400;
    let (running, stopped, recent) =
        (runtime_row("gitea-author", 1001), runtime_row("gitea-reviewer", 1002), runtime_row("gitea-merger", 1003));
    for row in [&running, &stopped, &recent] {
        store.upsert_runtime(row).unwrap();
    }
    let judged_at = now().plus_seconds(2 * day);
    store.mark_runtime_stopped(&stopped.runtime_id, now()).unwrap();
    assert!(store.touch_runtime(&recent.runtime_id, judged_at.plus_seconds(-60)).unwrap());
    store.mark_runtime_stopped(&recent.runtime_id, judged_at).unwrap();

    // The running row has not been refreshed for two days: stale, but not history.
    assert_eq!(store.prune_runtime(day, judged_at).unwrap(), [stopped.runtime_id.as_str()]);
    let left = store.list_runtime().unwrap();
    assert_eq!(
        left.iter().map(|r| r.runtime_id.as_str()).collect::<Vec<_>>(),
        [&running.runtime_id, &recent.runtime_id]
    );
    assert_eq!(left[0].status, RuntimeStatus::Running);
    assert_eq!(store.prune_runtime(0, judged_at).unwrap(), [recent.runtime_id.as_str()]);
    assert_eq!(store.list_runtime().unwrap().len(), 1, "the running row stays");
}

/// `fleetgate prune`'s store half: every table that grows loses what is older than the
/// cutoff, and nothing still referenced — a pending approval, an event a notification target
/// still owes, a PR with a claimed lease, a live lock or a record since the cutoff (judged
/// again where it is deleted), a push newer than the cutoff.
pub fn history_older_than_the_cutoff_goes_and_nothing_still_referenced(fx: &Fixture) {
    use crate::ledger::{actor, claim_of};
    use fleetgate_core::approval::{Approver, request_id};
    use fleetgate_core::runtime::ProcessScan;
    use fleetgate_core::workflow::{ClaimPlan, PrDecision, PrOrigin, PrPush, PrRef, Purpose, ReviewVerdict};
    use fleetgate_store::{HostIdentity, LockWrite, PrClaimOutcome};

    let store = fx.open();
    let day = 86_400;
    let t0 = now();
    let cutoff = t0.plus_seconds(30 * day);
    let later = cutoff.plus_seconds(day);

    // The audit log, in batches: the oldest first, never an entry since the cutoff.
    for i in 0..5 {
        store.append_audit(&crate::support::audit_entry("old", t0.plus_seconds(i))).unwrap();
    }
    for i in 0..3 {
        store.append_audit(&crate::support::audit_entry("new", later.plus_seconds(i))).unwrap();
    }
    let mut batches = Vec::new();
    loop {
        let n = store.prune_audit(cutoff, 2).unwrap();
        batches.push(n);
        if n < 2 {
            break;
        }
    }
    assert_eq!(batches, [2, 2, 1]);
    let left = store.list_audit(None, 100).unwrap();
    assert_eq!(left.iter().map(|e| e.tool.as_str()).collect::<Vec<_>>(), ["new", "new", "new"]);

    // PRs: idle (1), touched since the cutoff (2), a claimed lease (3), a live lock (4),
    // released lease and lock only (5).
    let pr = |n: u64| PrRef { binding: "prgs/Org/Repo".into(), pr: n };
    let decision = |n: u64, who: &str, at| PrDecision {
        pr: pr(n),
        head: format!("h{n}"),
        base: Some("main".into()),
        verdict: ReviewVerdict::Approve,
        by: actor(who),
        at,
        cleared: None,
    };
    for n in [1, 2, 3, 4] {
        store.record_pr_origin(&PrOrigin { pr: pr(n), by: actor("author"), at: t0, issues: vec![] }).unwrap();
    }
    store.record_pr_decision(&decision(1, "r1", t0)).unwrap();
    store.record_pr_decision(&decision(2, "r1", later)).unwrap();
    let claim = |n: u64, who: &str| {
        let mut c = claim_of(who, Purpose::Merge, &format!("h{n}"), 365 * day);
        c.terms.pr = pr(n);
        c.plan = ClaimPlan::Claim { release: vec![] };
        c
    };
    assert!(matches!(store.claim_pr_lease(&claim(3, "m1"), t0).unwrap(), PrClaimOutcome::Claimed(_)));
    store.record_locked_decision(&decision(4, "r2", t0), &LockWrite::Take { lock_id: "L4".into() }).unwrap();
    assert!(matches!(store.claim_pr_lease(&claim(5, "m1"), t0).unwrap(), PrClaimOutcome::Claimed(_)));
    assert_eq!(store.release_pr_leases(&pr(5), "merged", t0.plus_seconds(60)).unwrap(), 1);
    store.record_locked_decision(&decision(5, "r3", t0), &LockWrite::Take { lock_id: "L5".into() }).unwrap();
    assert_eq!(store.release_review_locks(&pr(5), "moot", t0.plus_seconds(60)).unwrap().len(), 1);

    assert_eq!(store.idle_prs(cutoff).unwrap(), [pr(1), pr(5)]);
    // A decision on PR 1 after it was listed: judged again where it is deleted, kept.
    store.record_pr_decision(&decision(1, "r2", later)).unwrap();
    assert!(!store.prune_pr(&pr(1), cutoff).unwrap(), "a record since the cutoff keeps the PR");
    assert_eq!(store.pr_records(&pr(1)).unwrap().decisions.len(), 2);
    assert!(store.prune_pr(&pr(5), cutoff).unwrap());
    let five = store.pr_records(&pr(5)).unwrap();
    assert!(five.leases.is_empty() && five.decisions.is_empty() && five.origin.is_none(), "{five:?}");
    assert!(!store.prune_pr(&pr(3), cutoff).unwrap(), "a claimed lease is never pruned");
    assert!(!store.prune_pr(&pr(4), cutoff).unwrap(), "a live lock is never pruned");
    for n in [2, 3, 4] {
        assert!(store.pr_records(&pr(n)).unwrap().origin.is_some(), "PR {n} kept");
    }
    assert_eq!(store.live_review_locks("codex", "s-r2").unwrap().len(), 1);

    // Pushes: only those recorded before the cutoff, whatever ids are named.
    let push = |head: &str, at| PrPush {
        binding: "prgs/Org/Repo".into(),
        branch: "feature".into(),
        head: head.into(),
        by: actor("author"),
        at,
    };
    store.record_pr_push(&push("p-old", t0)).unwrap();
    store.record_pr_push(&push("p-new", later)).unwrap();
    let old = store.old_pushes(cutoff).unwrap();
    assert_eq!(old.iter().map(|(_, p)| p.head.as_str()).collect::<Vec<_>>(), ["p-old"]);
    let every: Vec<i64> = old.iter().map(|(id, _)| *id).chain([old[0].0 + 1, old[0].0 + 2]).collect();
    assert_eq!(store.prune_pushes(&every, cutoff).unwrap(), 1, "the newer push is kept though named");
    assert!(store.old_pushes(later.plus_seconds(60)).unwrap().iter().all(|(_, p)| p.head == "p-new"));

    // Approvals: a pending request is never pruned; answered ones older than the cutoff go;
    // events go once every target has delivered them.
    let request = |n: u128, at| {
        let mut r = crate::approvals::request(n, &format!("w{n}"), n as u64);
        r.requested_at = at;
        r
    };
    let op = Approver { id: "os:op".into(), ..Approver::default() };
    for (n, at) in [(1, t0), (2, t0), (3, t0), (4, later)] {
        store.request_approval(&request(n, at)).unwrap();
    }
    store.answer_approval(&request_id(2), (&op, &crate::approvals::people()), false, None, t0).unwrap();
    store.answer_approval(&request_id(3), (&op, &crate::approvals::people()), true, None, t0).unwrap();
    assert!(store.use_approval(&request_id(3), t0, t0).unwrap().is_some());
    store.answer_approval(&request_id(4), (&op, &crate::approvals::people()), false, None, later).unwrap();
    let events = store.approval_events(0, 100).unwrap();
    // One target has delivered up to request 2's answer only.
    let delivered = events.iter().find(|e| e.request.id == request_id(2) && e.kind == "answered").unwrap().id;
    assert_eq!(
        store.claim_notify(&fleetgate_store::NotifyHold { target: "ops", holder: "me", until: later }, 0, t0).unwrap(),
        Some(0)
    );
    assert!(store.advance_notify("ops", "me", delivered, later).unwrap());
    let pruned = store.prune_approvals(cutoff).unwrap();
    assert_eq!(pruned.requests, 2, "the answered and the used request before the cutoff");
    let left: Vec<String> = store.list_approvals(false).unwrap().into_iter().map(|r| r.id).collect();
    assert_eq!(left, [request_id(1), request_id(4)], "the pending one and the one answered since");
    let kept: Vec<i64> = store.approval_events(0, 100).unwrap().into_iter().map(|e| e.id).collect();
    // Gone: the delivered ones older than the cutoff. Kept: one since the cutoff though
    // delivered, and the old ones the target still owes.
    let expected: Vec<i64> = events.iter().filter(|e| e.id > delivered || e.at >= cutoff).map(|e| e.id).collect();
    assert_eq!(kept, expected);
    assert!(events.iter().any(|e| e.id <= delivered && e.at >= cutoff), "the story has a delivered recent event");
    assert!(events.iter().any(|e| e.id > delivered && e.at < cutoff), "and an old one still owed");

    // Host observations: hosts not heard from since the cutoff.
    let host = |id: &str| HostIdentity { host_id: id.into(), boot_id: "b1".into() };
    assert!(store.publish_observation(&host("gone"), &ProcessScan::of(vec![]), t0).unwrap());
    assert!(store.publish_observation(&host("here"), &ProcessScan::of(vec![]), later).unwrap());
    assert_eq!(store.prune_observations(cutoff).unwrap(), 1);
    let hosts: Vec<String> = store.list_observations().unwrap().into_iter().map(|o| o.host.host_id).collect();
    assert_eq!(hosts, ["here"]);
}
