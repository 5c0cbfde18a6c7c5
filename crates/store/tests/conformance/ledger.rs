//! Schema v6: the PR workflow's leases, decisions and origins, and the pinned tool
//! definitions. A claim is one guarded write: threads and OS processes racing to claim
//! one PR leave exactly one holder.

use crate::child;
use crate::engines::Fixture;
use crate::support::now;
use fleetgate_core::workflow::{
    Actor, ClaimPlan, LeaseTerms, Phase, PrDecision, PrOrigin, PrRef, Purpose, ReviewVerdict, released,
};
use fleetgate_store::{PrClaimOutcome, PrLeaseClaim, SeenTool, Store};
use serde_json::json;
use std::sync::{Arc, Barrier};

pub fn actor(name: &str) -> Actor {
    Actor {
        worker: name.into(),
        profile: format!("prgs-{name}"),
        client: "codex".into(),
        session: format!("s-{name}"),
        principal: None,
    }
}

pub fn pr() -> PrRef {
    PrRef { binding: "prgs/Org/Repo".into(), pr: 976 }
}

pub fn claim_of(who: &str, purpose: Purpose, head: &str, ttl: i64) -> PrLeaseClaim {
    PrLeaseClaim {
        terms: LeaseTerms {
            pr: pr(),
            purpose,
            holder: actor(who),
            candidate_head: head.into(),
            target_branch: Some("main".into()),
            target_branch_sha: None,
        },
        ttl_seconds: ttl,
        plan: ClaimPlan::Claim { release: vec![] },
    }
}

fn claimed(outcome: PrClaimOutcome) -> fleetgate_core::workflow::PrLease {
    match outcome {
        PrClaimOutcome::Claimed(lease) => lease,
        PrClaimOutcome::Held(other) => panic!("held by {other:?}"),
    }
}

pub fn leases_are_one_per_pr_and_purpose_and_expire_on_the_store_clock(fx: &Fixture) {
    let store = fx.open();
    let t0 = now();
    let first = claimed(store.claim_pr_lease(&claim_of("r1", Purpose::Review, "h1", 600), t0).unwrap());
    assert_eq!(
        (first.phase, first.expires_at, first.terms.candidate_head.as_str()),
        (Phase::Claimed, t0.plus_seconds(600), "h1")
    );
    // Another worker: held, named.
    match store.claim_pr_lease(&claim_of("r2", Purpose::Review, "h1", 600), t0.plus_seconds(1)).unwrap() {
        PrClaimOutcome::Held(other) => assert_eq!(other.lease_id, first.lease_id),
        PrClaimOutcome::Claimed(l) => panic!("two live review leases: {l:?}"),
    }
    // The other purpose is its own lease.
    let merge = claimed(store.claim_pr_lease(&claim_of("m", Purpose::Merge, "h1", 600), t0.plus_seconds(1)).unwrap());
    // A gated call advances the holder's lease only.
    assert_eq!(store.touch_pr_leases(&pr(), "r1", 600, t0.plus_seconds(100)).unwrap(), 1);
    assert_eq!(store.touch_pr_leases(&pr(), "r2", 600, t0.plus_seconds(100)).unwrap(), 0);
    let live = store.list_pr_leases(true, t0.plus_seconds(650)).unwrap();
    assert_eq!(
        live.iter().map(|l| l.lease_id.as_str()).collect::<Vec<_>>(),
        [first.lease_id.as_str()],
        "the merge lease expired at 601"
    );
    assert_eq!(live[0].last_activity, t0.plus_seconds(100));
    // Past its expiry, another worker takes over; the old row is marked expired.
    let t = t0.plus_seconds(700);
    let second = claimed(store.claim_pr_lease(&claim_of("r2", Purpose::Review, "h1", 600), t).unwrap());
    let all = store.list_pr_leases(false, t).unwrap();
    let old = all.iter().find(|l| l.lease_id == first.lease_id).unwrap();
    assert_eq!((old.phase, old.released_reason.as_deref()), (Phase::Expired, Some(released::TAKEN_OVER)));
    assert_eq!(store.touch_pr_leases(&pr(), "r1", 600, t).unwrap(), 0, "the old holder's calls no longer count");
    // Renewal by plan; release by the holder only; the merge releases every lease.
    let mut renew = claim_of("r2", Purpose::Review, "h1", 600);
    renew.plan = ClaimPlan::Renew { lease_id: second.lease_id.clone() };
    let renewed = claimed(store.claim_pr_lease(&renew, t.plus_seconds(10)).unwrap());
    assert_eq!((renewed.lease_id.as_str(), renewed.expires_at), (second.lease_id.as_str(), t.plus_seconds(610)));
    assert!(!store.release_pr_lease(&second.lease_id, Some("r1"), released::BY_HOLDER, t).unwrap());
    // The review lease and the expired (never taken over) merge lease.
    assert_eq!(store.release_pr_leases(&pr(), released::MERGED, t).unwrap(), 2);
    assert!(!store.release_pr_lease(&second.lease_id, None, "operator", t).unwrap(), "already released");
    assert!(store.list_pr_leases(true, t).unwrap().is_empty());
    assert_ne!(merge.lease_id, first.lease_id);
}

pub fn a_plan_releases_before_it_claims(fx: &Fixture) {
    let store = fx.open();
    let t0 = now();
    let gone = claimed(store.claim_pr_lease(&claim_of("r1", Purpose::Review, "h1", 600), t0).unwrap());
    let mut claim = claim_of("r2", Purpose::Review, "h1", 600);
    claim.plan = ClaimPlan::Claim { release: vec![(gone.lease_id.clone(), released::HOLDER_GONE)] };
    let taken = claimed(store.claim_pr_lease(&claim, t0.plus_seconds(5)).unwrap());
    let records = store.pr_records(&pr()).unwrap();
    assert_eq!(records.leases.len(), 2);
    assert_eq!(records.leases[0].released_reason.as_deref(), Some(released::HOLDER_GONE));
    assert_eq!(records.leases[0].phase, Phase::Released);
    assert_eq!(records.leases[1], taken);
}

pub fn decisions_and_origins_are_kept_per_pr(fx: &Fixture) {
    let store = fx.open();
    let at = now();
    for (head, verdict, who) in [("h1", ReviewVerdict::Approve, "r1"), ("h2", ReviewVerdict::RequestChanges, "r2")] {
        let base = Some("main".to_owned());
        store
            .record_pr_decision(&PrDecision {
                pr: pr(),
                head: head.into(),
                base,
                verdict,
                by: actor(who),
                at,
                cleared: None,
            })
            .unwrap();
    }
    let other = PrRef { binding: "prgs/Org/Repo".into(), pr: 977 };
    store
        .record_pr_decision(&PrDecision {
            pr: other.clone(),
            head: "x".into(),
            base: None,
            verdict: ReviewVerdict::Approve,
            by: actor("r1"),
            at,
            cleared: None,
        })
        .unwrap();
    store.record_pr_origin(&PrOrigin { pr: pr(), by: actor("author"), at, issues: vec![12, 7] }).unwrap();
    store.record_pr_origin(&PrOrigin { pr: pr(), by: actor("impostor"), at, issues: vec![] }).unwrap();
    let records = store.pr_records(&pr()).unwrap();
    assert_eq!(
        records.decisions.iter().map(|d| (d.head.as_str(), d.verdict)).collect::<Vec<_>>(),
        [("h1", ReviewVerdict::Approve), ("h2", ReviewVerdict::RequestChanges)]
    );
    assert_eq!(records.decisions[0].by, actor("r1"));
    assert_eq!(records.decisions[0].base.as_deref(), Some("main"), "the base a decision was given on is kept");
    assert_eq!(store.pr_records(&other).unwrap().decisions[0].base, None);
    // An operator clears r2's decisions: kept, marked, counted once.
    assert_eq!(store.clear_pr_decisions(&pr(), "r2", "operator alice: superseded").unwrap(), 1);
    assert_eq!(store.clear_pr_decisions(&pr(), "r2", "again").unwrap(), 0, "a cleared decision stays cleared once");
    let records = store.pr_records(&pr()).unwrap();
    assert_eq!(records.decisions[1].cleared.as_deref(), Some("operator alice: superseded"));
    assert_eq!(records.decisions[0].cleared, None);
    assert_eq!(store.pr_records(&other).unwrap().decisions[0].cleared, None, "only that PR's");
    // A push through a gateway at a head the PR has decisions at is read with the PR.
    let push = |head: &str| fleetgate_core::workflow::PrPush {
        binding: pr().binding,
        branch: "feature".into(),
        head: head.into(),
        by: actor("author"),
        at,
    };
    store.record_pr_push(&push("h1")).unwrap();
    store.record_pr_push(&push("unrelated")).unwrap();
    // A push of that head under another name of the repository (an old one) is read too.
    let renamed = fleetgate_core::workflow::PrPush { binding: "prgs/org/old-name".into(), ..push("h1") };
    store.record_pr_push(&renamed).unwrap();
    assert_eq!(store.pr_records(&pr()).unwrap().pushes, vec![push("h1"), renamed]);
    let origin = records.origin.unwrap();
    assert_eq!(origin.by.worker, "author", "the first creator recorded stands");
    assert_eq!(origin.issues, [12, 7], "with the issues it references");
    assert_eq!(store.pr_records(&other).unwrap().decisions.len(), 1);
}

pub fn tool_definitions_are_pinned_reported_and_accepted(fx: &Fixture) {
    let store = fx.open();
    let t0 = now();
    let author =
        |digest, definition| SeenTool { profile: "prgs-author", tool: "pull_request_write", digest, definition };
    let first = store.observe_tool(&author("sha256:a", "{\"d\":1}"), t0).unwrap();
    assert!(!first.changed());
    assert_eq!(first.pinned_digest, "sha256:a");
    let same = store.observe_tool(&author("sha256:a", "{\"d\":1}"), t0.plus_seconds(5)).unwrap();
    assert_eq!(same.seen_at, t0, "an unchanged definition writes nothing");
    let changed = store.observe_tool(&author("sha256:b", "{\"d\":2}"), t0.plus_seconds(9)).unwrap();
    assert!(changed.changed());
    assert_eq!(
        (changed.pinned_digest.as_str(), changed.seen_digest.as_str(), changed.seen_definition.as_str()),
        ("sha256:a", "sha256:b", "{\"d\":2}")
    );
    store
        .observe_tool(
            &SeenTool { profile: "prgs-merger", tool: "pull_request_write", digest: "sha256:a", definition: "{}" },
            t0,
        )
        .unwrap();
    assert_eq!(store.list_tool_pins(None).unwrap().len(), 2);
    assert_eq!(store.list_tool_pins(Some("prgs-author")).unwrap(), std::slice::from_ref(&changed));
    assert!(!store.accept_tool("prgs-author", "pull_request_write", "sha256:c", t0).unwrap(), "only what was seen");
    assert!(store.accept_tool("prgs-author", "pull_request_write", "sha256:b", t0.plus_seconds(20)).unwrap());
    let accepted = store.tool_pin("prgs-author", "pull_request_write").unwrap().unwrap();
    assert!(!accepted.changed());
    assert_eq!((accepted.pinned_digest.as_str(), accepted.pinned_at), ("sha256:b", t0.plus_seconds(20)));
    assert!(store.tool_pin("prgs-author", "nothing").unwrap().is_none());
}

const CLAIMERS: usize = 8;

pub fn threads_racing_to_claim_one_pr_leave_one_holder(fx: &Fixture) {
    let store = fx.open();
    let barrier = Arc::new(Barrier::new(CLAIMERS));
    let at = now();
    let handles: Vec<_> = (0..CLAIMERS)
        .map(|i| {
            let (store, barrier) = (Arc::clone(&store), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                store.claim_pr_lease(&claim_of(&format!("r{i}"), Purpose::Review, "h1", 600), at).unwrap()
            })
        })
        .collect();
    let outcomes: Vec<PrClaimOutcome> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let winners: Vec<_> = outcomes
        .iter()
        .filter_map(|o| match o {
            PrClaimOutcome::Claimed(l) => Some(l),
            _ => None,
        })
        .collect();
    assert_eq!(winners.len(), 1, "{outcomes:?}");
    for o in &outcomes {
        if let PrClaimOutcome::Held(l) = o {
            assert_eq!(l.lease_id, winners[0].lease_id, "every loser was shown the winner");
        }
    }
    assert_eq!(store.list_pr_leases(true, at).unwrap().len(), 1);
}

pub fn processes_racing_to_claim_one_pr_leave_one_holder(fx: &Fixture) {
    let store = fx.open();
    drop(store);
    let start_at_ms = child::wall_ms() + 400;
    let claimers: Vec<_> = (0..4)
        .map(|i| {
            child::spawn(&json!({ "role": "claim_pr", "spec": fx.spec(), "who": format!("p{i}"),
                                  "now": now().unix(), "start_at_ms": start_at_ms }))
        })
        .collect();
    let reports: Vec<_> = claimers.into_iter().map(child::report).collect();
    let won: Vec<_> = reports.iter().filter(|r| r["claimed"] == true).collect();
    assert_eq!(won.len(), 1, "{reports:?}");
    let winner = won[0]["lease_id"].clone();
    assert!(reports.iter().all(|r| r["lease_id"] == winner), "the losers read the winner: {reports:?}");
    let store = fx.open();
    assert_eq!(store.list_pr_leases(true, now()).unwrap().len(), 1);
}

/// A child's claim (see `child`).
pub fn child_claim(store: &dyn Store, who: &str, at: fleetgate_core::Timestamp) -> serde_json::Value {
    match store.claim_pr_lease(&claim_of(who, Purpose::Review, "h1", 600), at) {
        Ok(PrClaimOutcome::Claimed(l)) => json!({ "claimed": true, "lease_id": l.lease_id }),
        Ok(PrClaimOutcome::Held(l)) => json!({ "claimed": false, "lease_id": l.lease_id }),
        Err(e) => json!({ "error": e.to_string() }),
    }
}
