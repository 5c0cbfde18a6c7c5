//! The workflow decision: the seed's story case by case, and two properties over random
//! call sequences — no merge of a head no independent reviewer approved, and a new head
//! never inherits an approval.

use super::*;
use proptest::prelude::*;

const T0: i64 = 1_800_000_000;
const TTL: i64 = 600;

fn at(s: i64) -> Timestamp {
    Timestamp::from_unix(T0 + s)
}

fn actor(name: &str, client: &str, session: &str) -> Actor {
    Actor { worker: name.into(), profile: name.into(), client: client.into(), session: session.into(), principal: None }
}

fn pr() -> PrRef {
    PrRef { binding: "prgs/Org/Repo".into(), pr: 976 }
}

fn lease(id: &str, purpose: Purpose, holder: &Actor, head: &str, since: i64) -> PrLease {
    PrLease {
        lease_id: id.into(),
        terms: LeaseTerms {
            pr: pr(),
            purpose,
            holder: holder.clone(),
            candidate_head: head.into(),
            target_branch: Some("main".into()),
            target_branch_sha: None,
        },
        phase: Phase::Claimed,
        claimed_at: at(since),
        last_activity: at(since),
        expires_at: at(since + TTL),
        released_reason: None,
    }
}

fn decision(by: &Actor, head: &str, verdict: ReviewVerdict, when: i64) -> PrDecision {
    PrDecision {
        pr: pr(),
        head: head.into(),
        base: Some("main".into()),
        verdict,
        by: by.clone(),
        at: at(when),
        cleared: None,
    }
}

fn origin(by: &Actor) -> PrOrigin {
    PrOrigin { pr: pr(), by: by.clone(), at: at(0), issues: vec![] }
}

const H1: &str = "1a38ef95aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const H2: &str = "b0868be6bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

#[test]
fn the_seed_story_approve_new_head_voids_rereview_merge() {
    let author = actor("author", "claude-code", "s-author");
    let reviewer = actor("reviewer", "codex", "s-review");
    let merger = actor("merger", "gemini", "s-merge");
    let o = origin(&author);
    let mut leases = vec![lease("L1", Purpose::Review, &reviewer, H1, 10)];
    let mut decisions = Vec::new();
    let st = |l: &[PrLease], d: &[PrDecision]| -> (Vec<PrLease>, Vec<PrDecision>) { (l.to_vec(), d.to_vec()) };

    let (l, d) = st(&leases, &decisions);
    let state = PrState { leases: &l, decisions: &d, origin: Some(&o), pushes: &[] };
    assert_eq!(
        judge_review(&state, &reviewer, (H1, Some("main")), ReviewVerdict::Approve, at(20)).unwrap().lease_id,
        "L1"
    );
    decisions.push(decision(&reviewer, H1, ReviewVerdict::Approve, 20));

    // The author pushes: the approval no longer counts, the lease is stale.
    let (l, d) = st(&leases, &decisions);
    let state = PrState { leases: &l, decisions: &d, origin: Some(&o), pushes: &[] };
    let stale = judge_review(&state, &reviewer, (H2, Some("main")), ReviewVerdict::Approve, at(30)).unwrap_err();
    assert_eq!(stale.blocker_kind, BlockerKind::StaleHead);
    assert!(stale.reasons[0].contains("1a38ef95aaaa") && stale.reasons[0].contains("b0868be6bbbb"), "{stale:?}");
    assert!(
        approval_at(&state, H2, Some("main"), Independence::Session).is_err(),
        "a new head never inherits an approval"
    );

    // Re-review at the new head: the claim renews into a new lease at H2.
    let plan = judge_claim(&state, &reviewer, Purpose::Review, H2, H2, at(40), &|_| true).unwrap();
    assert_eq!(plan, ClaimPlan::Claim { release: vec![("L1".into(), released::BY_HOLDER)] });
    leases[0].phase = Phase::Released;
    leases.push(lease("L2", Purpose::Review, &reviewer, H2, 40));
    decisions.push(decision(&reviewer, H2, ReviewVerdict::Approve, 50));

    // The merger: no merge lease yet.
    let (l, d) = st(&leases, &decisions);
    let state = PrState { leases: &l, decisions: &d, origin: Some(&o), pushes: &[] };
    let refused = judge_merge(&state, &merger, H2, Some("main"), Independence::Session, at(60)).unwrap_err();
    assert_eq!(refused.blocker_kind, BlockerKind::ApprovalRequired);
    assert_eq!(refused.reasons, vec!["no live merge lease held by worker merger".to_owned()]);

    leases.push(lease("M1", Purpose::Merge, &merger, H2, 60));
    let (l, d) = st(&leases, &decisions);
    let state = PrState { leases: &l, decisions: &d, origin: Some(&o), pushes: &[] };
    assert_eq!(judge_merge(&state, &merger, H2, Some("main"), Independence::Session, at(70)).unwrap().lease_id, "M1");
    let a = assess(pr(), &state, (H2, Some("main"), ForgeState::Open), Independence::Session, at(70));
    assert!(a.approved_at_head && a.merge_needs.is_empty(), "{a:?}");
    assert_eq!((a.current_decisions.len(), a.historical_decisions.len()), (1, 1));
}

#[test]
fn a_decision_without_a_lease_names_who_holds_it() {
    let reviewer = actor("r1", "codex", "s1");
    let other = actor("r2", "cursor", "s2");
    let leases = vec![lease("L", Purpose::Review, &other, H1, 0)];
    let state = PrState { leases: &leases, decisions: &[], origin: None, pushes: &[] };
    let refused =
        judge_review(&state, &reviewer, (H1, Some("main")), ReviewVerdict::RequestChanges, at(1)).unwrap_err();
    assert_eq!(refused.blocker_kind, BlockerKind::ReviewLeaseRequired);
    assert!(refused.reasons[1].contains("held by worker r2"), "{refused:?}");
}

#[test]
fn an_expired_lease_counts_for_nothing_and_may_be_taken_over() {
    let old = actor("r1", "codex", "s1");
    let new = actor("r2", "cursor", "s2");
    let leases = vec![lease("L", Purpose::Review, &old, H1, 0)];
    let state = PrState { leases: &leases, decisions: &[], origin: None, pushes: &[] };
    assert!(judge_review(&state, &old, (H1, Some("main")), ReviewVerdict::Approve, at(TTL - 1)).is_ok());
    let expired = judge_review(&state, &old, (H1, Some("main")), ReviewVerdict::Approve, at(TTL)).unwrap_err();
    assert_eq!(expired.blocker_kind, BlockerKind::ReviewLeaseRequired);
    assert!(expired.reasons[1].contains("is expired"), "{expired:?}");

    let held = judge_claim(&state, &new, Purpose::Review, H1, H1, at(TTL - 1), &|_| true).unwrap_err();
    assert_eq!(held.blocker_kind, BlockerKind::ReviewLeaseHeld);
    assert!(held.reasons[0].contains("worker r1") && held.reasons[0].contains("1a38ef95aaaa"), "{held:?}");
    let plan = judge_claim(&state, &new, Purpose::Review, H1, H1, at(TTL), &|_| true).unwrap();
    assert_eq!(plan, ClaimPlan::Claim { release: vec![("L".into(), released::TAKEN_OVER)] });
}

#[test]
fn a_gone_holder_loses_its_lease_and_a_live_one_renews() {
    let old = actor("r1", "codex", "s1");
    let new = actor("r2", "cursor", "s2");
    let leases = vec![lease("L", Purpose::Review, &old, H1, 0)];
    let state = PrState { leases: &leases, decisions: &[], origin: None, pushes: &[] };
    let plan = judge_claim(&state, &new, Purpose::Review, H1, H1, at(5), &|a| a.worker != "r1").unwrap();
    assert_eq!(plan, ClaimPlan::Claim { release: vec![("L".into(), released::HOLDER_GONE)] });
    let renew = judge_claim(&state, &old, Purpose::Review, H1, H1, at(5), &|_| true).unwrap();
    assert_eq!(renew, ClaimPlan::Renew { lease_id: "L".into() });
    let stale = judge_claim(&state, &new, Purpose::Review, H1, H2, at(5), &|_| true).unwrap_err();
    assert_eq!(stale.blocker_kind, BlockerKind::StaleHead);
}

#[test]
fn leases_of_the_other_purpose_do_not_block_a_claim() {
    let reviewer = actor("r1", "codex", "s1");
    let merger = actor("m", "gemini", "s3");
    let leases = vec![lease("L", Purpose::Review, &reviewer, H1, 0)];
    let state = PrState { leases: &leases, decisions: &[], origin: None, pushes: &[] };
    assert!(judge_claim(&state, &merger, Purpose::Merge, H1, H1, at(1), &|_| true).is_ok());
}

#[test]
fn self_approval_and_later_request_changes_do_not_count() {
    let author = actor("author", "claude-code", "s-author");
    // The author's own session approving (a reviewer profile in the same client session).
    let same_session = actor("reviewer", "claude-code", "s-author");
    let other_session = actor("reviewer", "claude-code", "s-other");
    let o = origin(&author);
    let d = vec![decision(&same_session, H1, ReviewVerdict::Approve, 1)];
    let state = PrState { leases: &[], decisions: &d, origin: Some(&o), pushes: &[] };
    let missing = approval_at(&state, H1, Some("main"), Independence::Session).unwrap_err();
    assert!(missing[1].contains("came from the session that created the PR"), "{missing:?}");
    assert!(approval_at(&state, H1, Some("main"), Independence::Off).is_ok());

    let d = vec![
        decision(&other_session, H1, ReviewVerdict::Approve, 1),
        decision(&actor("r2", "cursor", "s9"), H1, ReviewVerdict::RequestChanges, 2),
    ];
    let state = PrState { leases: &[], decisions: &d, origin: Some(&o), pushes: &[] };
    assert!(approval_at(&state, H1, Some("main"), Independence::Session).unwrap_err()[0].contains("requested changes"));
    assert!(
        approval_at(&state, H1, Some("main"), Independence::Client).is_err(),
        "same client: not independent by client"
    );

    let d = vec![
        decision(&actor("r2", "cursor", "s9"), H1, ReviewVerdict::RequestChanges, 1),
        decision(&other_session, H1, ReviewVerdict::Approve, 2),
    ];
    let state = PrState { leases: &[], decisions: &d, origin: Some(&o), pushes: &[] };
    let missing = approval_at(&state, H1, Some("main"), Independence::Session).unwrap_err();
    assert!(
        missing[0].contains("worker r2 requested changes"),
        "another reviewer's approval does not outweigh it: {missing:?}"
    );
    let mut d = d;
    d.push(decision(&actor("r2", "cursor", "s9"), H1, ReviewVerdict::Approve, 3));
    let state = PrState { leases: &[], decisions: &d, origin: Some(&o), pushes: &[] };
    assert!(
        approval_at(&state, H1, Some("main"), Independence::Session).is_ok(),
        "its own reviewer's approval lifts it"
    );
}

#[test]
fn the_session_that_pushed_a_head_does_not_approve_it_and_a_cleared_decision_no_longer_counts() {
    let author = actor("author", "claude-code", "s-author");
    let reviewer = actor("reviewer", "codex", "s-review");
    let o = origin(&author);
    let d = vec![decision(&reviewer, H1, ReviewVerdict::Approve, 1)];
    let push =
        PrPush { binding: pr().binding, branch: "feature".into(), head: H1.into(), by: reviewer.clone(), at: at(0) };
    let pushes = vec![push];
    let state = PrState { leases: &[], decisions: &d, origin: Some(&o), pushes: &pushes };
    let missing = approval_at(&state, H1, Some("main"), Independence::Session).unwrap_err();
    assert!(missing.iter().any(|m| m.contains("session that pushed it")), "{missing:?}");
    assert!(approval_at(&state, H1, Some("main"), Independence::Off).is_ok());
    let state = PrState { pushes: &[], ..state };
    assert!(
        approval_at(&state, H1, Some("main"), Independence::Session).is_ok(),
        "another head's push is not this one's"
    );

    let mut d = vec![
        decision(&actor("r2", "cursor", "s9"), H1, ReviewVerdict::RequestChanges, 1),
        decision(&reviewer, H1, ReviewVerdict::Approve, 2),
    ];
    let state = PrState { leases: &[], decisions: &d, origin: Some(&o), pushes: &[] };
    assert!(approval_at(&state, H1, Some("main"), Independence::Session).is_err(), "the request-changes stands");
    d[0].cleared = Some("operator: superseded".into());
    let state = PrState { leases: &[], decisions: &d, origin: Some(&o), pushes: &[] };
    assert!(approval_at(&state, H1, Some("main"), Independence::Session).is_ok(), "cleared, it no longer counts");
    let a = assess(pr(), &state, (H1, Some("main"), ForgeState::Open), Independence::Session, at(3));
    assert_eq!((a.current_decisions.len(), a.historical_decisions.len()), (1, 1), "a cleared decision is historical");
}

#[test]
fn a_review_lease_claimed_for_one_base_decides_nothing_on_another() {
    let reviewer = actor("reviewer", "codex", "s-review");
    let leases = vec![lease("L1", Purpose::Review, &reviewer, H1, 0)];
    let state = PrState { leases: &leases, decisions: &[], origin: None, pushes: &[] };
    let refused = judge_review(&state, &reviewer, (H1, Some("dev")), ReviewVerdict::Approve, at(1)).unwrap_err();
    assert_eq!(refused.blocker_kind, BlockerKind::StaleHead);
    assert!(refused.reasons[0].contains("claimed for base main but the PR now targets dev"), "{refused:?}");
}

#[test]
fn a_decision_counts_only_for_the_base_it_was_given_on() {
    let merger = actor("m", "gemini", "s3");
    let mut leases = vec![lease("M", Purpose::Merge, &merger, H1, 0)];
    leases[0].terms.target_branch = Some("dev".into());
    let mut approval = decision(&actor("r", "codex", "s1"), H1, ReviewVerdict::Approve, 1);
    approval.base = Some("dev".into());
    let d = vec![approval];
    let state = PrState { leases: &leases, decisions: &d, origin: None, pushes: &[] };
    assert!(judge_merge(&state, &merger, H1, Some("dev"), Independence::Session, at(2)).is_ok());
    let refused = judge_merge(&state, &merger, H1, Some("main"), Independence::Session, at(2)).unwrap_err();
    assert_eq!(refused.blocker_kind, BlockerKind::ApprovalRequired);
    let text = refused.reasons.join("; ");
    assert!(text.contains("claimed for base dev but the PR now targets main"), "{text}");
    assert!(text.contains("other bases are historical"), "{text}");
    let a = assess(pr(), &state, (H1, Some("main"), ForgeState::Open), Independence::Session, at(2));
    assert_eq!((a.current_decisions.len(), a.historical_decisions.len()), (0, 1));
}

#[test]
fn a_merge_lease_at_an_old_head_is_named() {
    let merger = actor("m", "gemini", "s3");
    let leases = vec![lease("M", Purpose::Merge, &merger, H1, 0)];
    let d = vec![decision(&actor("r", "codex", "s1"), H2, ReviewVerdict::Approve, 1)];
    let state = PrState { leases: &leases, decisions: &d, origin: None, pushes: &[] };
    let refused = judge_merge(&state, &merger, H2, Some("main"), Independence::Session, at(2)).unwrap_err();
    assert_eq!(refused.blocker_kind, BlockerKind::ApprovalRequired);
    assert!(refused.reasons[0].contains("merge lease is at head 1a38ef95aaaa"), "{refused:?}");
}

// ---- the properties: a random fleet playing the workflow through the pure functions ----

#[derive(Clone, Debug)]
enum Op {
    Push,
    Claim { who: usize, purpose: Purpose, stale: bool },
    Review { who: usize, verdict: ReviewVerdict },
    Merge { who: usize },
    Wait { seconds: i64 },
    Retarget,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => Just(Op::Push),
        3 => (0..4usize, prop_oneof![Just(Purpose::Review), Just(Purpose::Merge)], any::<bool>())
            .prop_map(|(who, purpose, stale)| Op::Claim { who, purpose, stale }),
        3 => (0..4usize, prop_oneof![Just(ReviewVerdict::Approve), Just(ReviewVerdict::RequestChanges)])
            .prop_map(|(who, verdict)| Op::Review { who, verdict }),
        2 => (0..4usize).prop_map(|who| Op::Merge { who }),
        1 => (1..900i64).prop_map(|seconds| Op::Wait { seconds }),
        1 => Just(Op::Retarget),
    ]
}

/// The shell's part, done as the gateway does it: an allowed call is recorded.
struct World {
    actors: Vec<Actor>,
    origin: PrOrigin,
    heads: Vec<String>,
    leases: Vec<PrLease>,
    decisions: Vec<PrDecision>,
    now: i64,
    /// The PR's base now (the author may retarget it).
    base: String,
    /// What a merge landed: the head and the base.
    merged: Option<(String, String)>,
}

impl World {
    fn new() -> Self {
        // 0: the author; 1: a reviewer in the author's own client session; 2, 3: independent.
        let actors = vec![
            actor("author", "claude-code", "s0"),
            actor("self-reviewer", "claude-code", "s0"),
            actor("reviewer", "codex", "s2"),
            actor("merger", "gemini", "s3"),
        ];
        let origin = PrOrigin { pr: pr(), by: actors[0].clone(), at: at(0), issues: vec![] };
        let heads = vec!["h0".into()];
        Self { actors, origin, heads, leases: vec![], decisions: vec![], now: 0, base: "dev".into(), merged: None }
    }

    fn head(&self) -> String {
        self.heads.last().cloned().unwrap_or_default()
    }

    fn apply(&mut self, op: &Op) {
        let now = at(self.now);
        let head = self.head();
        let (leases, decisions) = (self.leases.clone(), self.decisions.clone());
        let state = PrState { leases: &leases, decisions: &decisions, origin: Some(&self.origin), pushes: &[] };
        match *op {
            Op::Push => self.heads.push(format!("h{}", self.heads.len())),
            Op::Retarget => self.base = if self.base == "dev" { "main".into() } else { "dev".into() },
            Op::Wait { seconds } => self.now += seconds,
            Op::Claim { who, purpose, stale } => {
                let claimed = if stale { self.heads.first().cloned().unwrap_or_default() } else { head.clone() };
                let caller = self.actors[who].clone();
                match judge_claim(&state, &caller, purpose, &claimed, &head, now, &|_| true) {
                    Ok(ClaimPlan::Renew { lease_id }) => {
                        let l = self.leases.iter_mut().find(|l| l.lease_id == lease_id).expect("renewed lease");
                        l.last_activity = now;
                        l.expires_at = now.plus_seconds(TTL);
                    }
                    Ok(ClaimPlan::Claim { release }) => {
                        for (id, reason) in release {
                            let l = self.leases.iter_mut().find(|l| l.lease_id == id).expect("released lease");
                            l.phase = Phase::Released;
                            l.released_reason = Some(reason.into());
                        }
                        let id = format!("L{}", self.leases.len());
                        let mut l = lease(&id, purpose, &caller, &head, self.now);
                        l.terms.pr = pr();
                        l.terms.target_branch = Some(self.base.clone());
                        self.leases.push(l);
                    }
                    Err(_) => {}
                }
            }
            Op::Review { who, verdict } => {
                let caller = self.actors[who].clone();
                if let Ok(lease) = judge_review(&state, &caller, (&head, Some(&self.base)), verdict, now) {
                    // The gate records the base the lease was claimed for, else the forge's.
                    let base = lease.terms.target_branch.clone().or_else(|| Some(self.base.clone()));
                    self.decisions.push(PrDecision {
                        pr: pr(),
                        head,
                        base,
                        verdict,
                        by: caller,
                        at: now,
                        cleared: None,
                    });
                }
            }
            Op::Merge { who } => {
                let caller = self.actors[who].clone();
                if judge_merge(&state, &caller, &head, Some(&self.base), Independence::Session, now).is_ok() {
                    self.merged = Some((head, self.base.clone()));
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn no_sequence_merges_a_head_no_independent_reviewer_approved(ops in prop::collection::vec(op(), 1..60)) {
        let mut world = World::new();
        for op in &ops {
            world.merged = None;
            world.apply(op);
            if let Some((merged, base)) = &world.merged {
                let here = |d: &&PrDecision| &d.head == merged && d.base.as_ref() == Some(base);
                let approvals: Vec<&PrDecision> = world.decisions.iter().filter(here)
                    .filter(|d| d.verdict == ReviewVerdict::Approve && d.by.session != "s0")
                    .collect();
                prop_assert!(!approvals.is_empty(), "merged {merged} onto {base} with no independent approval there: {:?}", world.decisions);
                // No reviewer's latest word at that head and base is a request-changes.
                for d in world.decisions.iter().filter(here) {
                    let latest = world.decisions.iter().filter(here).filter(|e| e.by.worker == d.by.worker).map(|e| e.at).max();
                    prop_assert!(
                        !(d.verdict == ReviewVerdict::RequestChanges && Some(d.at) == latest
                            && !world.decisions.iter().filter(here).any(|e| e.by.worker == d.by.worker && e.at == d.at && e.verdict == ReviewVerdict::Approve)),
                        "merged over a standing request-changes by {}", d.by.worker
                    );
                }
            }
        }
    }

    #[test]
    fn a_new_head_never_inherits_an_approval(ops in prop::collection::vec(op(), 1..60)) {
        let mut world = World::new();
        for op in &ops {
            world.apply(op);
            if matches!(op, Op::Push | Op::Retarget) {
                let state = PrState { leases: &world.leases, decisions: &world.decisions, origin: Some(&world.origin), pushes: &[] };
                for independence in [Independence::Session, Independence::Client, Independence::Off] {
                    // A retarget back to a base with an approval at this head may find it again:
                    // only a push is a head no one has seen.
                    if matches!(op, Op::Push) {
                        prop_assert!(approval_at(&state, &world.head(), Some(&world.base), independence).is_err());
                    }
                }
                let merger = world.actors[3].clone();
                if matches!(op, Op::Push) {
                    prop_assert!(judge_merge(&state, &merger, &world.head(), Some(&world.base), Independence::Off, at(world.now)).is_err());
                }
            }
        }
    }
}

#[test]
fn the_canonical_state_is_computed_from_the_ledger_and_the_forge() {
    let author = actor("author", "claude-code", "s-author");
    let reviewer = actor("reviewer", "codex", "s-review");
    let merger = actor("merger", "gemini", "s-merge");
    let o = origin(&author);
    let st = |a: Assessment| (a.status.state, a.status.who_is_next, a.status.review_status, a.status.merge_ready);
    let state = PrState { leases: &[], decisions: &[], origin: Some(&o), pushes: &[] };
    let fresh = assess(pr(), &state, (H1, Some("main"), ForgeState::Open), Independence::Session, at(1));
    assert_eq!(st(fresh.clone()), ("ready_for_review".into(), "reviewer".into(), "none".into(), false));
    assert!(fresh.status.next_action.contains(&H1[..12]), "{}", fresh.status.next_action);
    let rc = vec![decision(&reviewer, H1, ReviewVerdict::RequestChanges, 1)];
    let state = PrState { decisions: &rc, ..state };
    let a = assess(pr(), &state, (H1, Some("main"), ForgeState::Open), Independence::Session, at(2));
    assert_eq!(st(a), ("changes_requested".into(), "author".into(), "none".into(), false));
    let approved = vec![decision(&reviewer, H1, ReviewVerdict::Approve, 1)];
    let state = PrState { decisions: &approved, ..state };
    let a = assess(pr(), &state, (H1, Some("main"), ForgeState::Open), Independence::Session, at(2));
    assert_eq!(st(a.clone()), ("approved".into(), "merger".into(), "approved_at_current_head".into(), false));
    assert!(a.status.blockers.iter().any(|b| b.contains("merge lease")), "{:?}", a.status.blockers);
    let leases = vec![lease("M", Purpose::Merge, &merger, H1, 1)];
    let state = PrState { leases: &leases, ..state };
    let a = assess(pr(), &state, (H1, Some("main"), ForgeState::Open), Independence::Session, at(2));
    assert_eq!(st(a), ("ready_to_merge".into(), "merger".into(), "approved_at_current_head".into(), true));
    let a = assess(pr(), &state, (H2, Some("main"), ForgeState::Open), Independence::Session, at(2));
    assert_eq!(st(a), ("ready_for_review".into(), "reviewer".into(), "historical".into(), false), "a new head");
    let a = assess(pr(), &state, (H1, Some("main"), ForgeState::Merged), Independence::Session, at(2));
    assert_eq!(st(a.clone()), ("merged".into(), "none".into(), "approved_at_current_head".into(), false));
    assert!(a.status.blockers.is_empty());
}

#[test]
fn under_principal_independence_a_second_session_of_one_principal_approves_nothing() {
    let as_principal = |name: &str, session: &str, principal: Option<&str>| Actor {
        principal: principal.map(str::to_owned),
        ..actor(name, "mcp", session)
    };
    // One HTTP token allowed both profiles: the author's session opens, a second session of
    // the same principal approves.
    let author = as_principal("a", "s1", Some("ci"));
    let same = as_principal("r", "s2", Some("ci"));
    let other = as_principal("r2", "s3", Some("alice"));
    let stdio = as_principal("r3", "s4", None);
    let state_of = |by: &Actor| {
        let decisions = vec![decision(by, H1, ReviewVerdict::Approve, 10)];
        let o = origin(&author);
        approval_at(
            &PrState { leases: &[], decisions: &decisions, origin: Some(&o), pushes: &[] },
            H1,
            Some("main"),
            Independence::Principal,
        )
        .is_ok()
    };
    let counts = |by: &Actor, mode: Independence| {
        let decisions = vec![decision(by, H1, ReviewVerdict::Approve, 10)];
        let o = origin(&author);
        approval_at(
            &PrState { leases: &[], decisions: &decisions, origin: Some(&o), pushes: &[] },
            H1,
            Some("main"),
            mode,
        )
        .is_ok()
    };
    assert!(!state_of(&same), "a reconnect is the same reviewer");
    assert!(counts(&same, Independence::Session), "by session alone it counted: the hole this closes");
    assert!(state_of(&other), "another principal is independent");
    assert!(state_of(&stdio), "without a principal on one side, sessions decide");
    assert!(!state_of(&as_principal("r4", "s1", None)), "and the same session never counts");
    // The pusher is held to the same.
    let decisions = vec![decision(&same, H1, ReviewVerdict::Approve, 10)];
    let push = PrPush {
        binding: pr().binding,
        branch: "f".into(),
        head: H1.into(),
        by: as_principal("p", "s9", Some("ci")),
        at: at(5),
    };
    let pushes = [push];
    let state = PrState { leases: &[], decisions: &decisions, origin: None, pushes: &pushes };
    assert!(
        approval_at(&state, H1, Some("main"), Independence::Principal).is_err(),
        "the pushing principal approves nothing"
    );
}

#[test]
fn a_principal_allowed_an_author_s_and_a_reviewer_s_profile_is_named() {
    let members: Vec<(String, String)> =
        [("prgs-author", "author"), ("prgs-reviewer", "reviewer"), ("prgs-merger", "merger")]
            .iter()
            .map(|(p, r)| ((*p).to_owned(), (*r).to_owned()))
            .collect();
    let principals = vec![
        ("ci".to_owned(), vec![]),
        ("alice".to_owned(), vec!["prgs-author".to_owned(), "prgs-reviewer".to_owned()]),
        ("bob".to_owned(), vec!["prgs-reviewer".to_owned(), "prgs-merger".to_owned()]),
    ];
    let found = principals_holding_independent_roles(&principals, &members);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found[0].starts_with("principal ci ") && found[0].contains("every profile"));
    assert!(found[1].starts_with("principal alice ") && found[1].contains("prgs-reviewer"));
}

/// A lease's JSON keeps its keys at the top level in the order they always had: its terms
/// are one struct in Rust (shared with a claim), flattened on the wire.
#[test]
fn a_lease_serialises_flat_in_its_old_key_order() {
    let text = serde_json::to_string(&lease("L1", Purpose::Review, &actor("r", "codex", "s1"), H1, 0)).unwrap();
    let keys = "lease_id binding pr purpose holder candidate_head target_branch target_branch_sha phase claimed_at \
                last_activity expires_at released_reason";
    let at: Vec<usize> =
        keys.split_whitespace().map(|k| text.find(&format!("\"{k}\":")).unwrap_or(usize::MAX)).collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{text}");
    assert!(!text.contains("\"terms\""), "{text}");
    let back: PrLease = serde_json::from_str(&text).unwrap();
    assert_eq!(back.terms.candidate_head, H1);
}
