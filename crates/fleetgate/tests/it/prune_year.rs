//! `fleetgate prune`'s work (`retention::prune`) on a year of synthetic history at volume, on
//! both engines: every day of 365 has its audit entries, three PRs with their origin, pushes,
//! decisions and released leases, an approval asked, answered and used, a worker that came and
//! went. Some old rows are still referenced — a PR with a claimed lease, one with a live
//! review-decision lock, PRs the forge says are open, a pending approval, pushes that are still
//! their branch's tip — and every one of them survives; everything old and unreferenced goes,
//! to the count; a second prune finds nothing; the store then works as before.
//!
//! The forge is a stand-in `ForgeReader` answering in the REST shape Gitea's
//! `pull_request_read` and `get_commit` answer in (`state`, `merged`, `head.sha`; `sha`),
//! which is all the prune reads.

use fleetgate_control::gate::workflow::{Forge, ForgeError, ForgeReader};
use fleetgate_control::retention::prune;
use fleetgate_core::Timestamp;
use fleetgate_core::approval::{ApprovalRequest, ApprovalState, Approver, call_digest, request_id};
use fleetgate_core::audit::AuditEntry;
use fleetgate_core::prune::Retention;
use fleetgate_core::runtime::{HostIdentity, ProcessScan};
use fleetgate_core::worker::{Registration, WorkerIds};
use fleetgate_core::workflow::{
    Actor, ClaimPlan, LeaseTerms, PrDecision, PrOrigin, PrPush, PrRef, Purpose, ReviewVerdict,
};
use fleetgate_store::{LockWrite, PrClaimOutcome, PrLeaseClaim, Store};
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;

const DAY: i64 = 86_400;
const DAYS: i64 = 365;
const AUDIT_PER_DAY: i64 = 100;
const PRS_PER_DAY: u64 = 3;
const BINDING: &str = "prgs/Org/Repo";

fn t0() -> Timestamp {
    Timestamp::from_unix(1_700_000_000)
}

fn day(d: i64) -> Timestamp {
    t0().plus_seconds(d * DAY)
}

fn pr(n: u64) -> PrRef {
    PrRef { binding: BINDING.into(), pr: n }
}

fn actor(name: &str) -> Actor {
    Actor {
        worker: format!("wrk-{name}"),
        profile: format!("prgs-{name}"),
        client: "codex".into(),
        session: format!("s-{name}"),
        principal: None,
    }
}

fn head(n: u64) -> String {
    format!("{n:040x}")
}

/// The forge: PRs in `open` are open, every other one merged; a branch's tip is the head of
/// the PR it is named after when that PR is in `tips`, else a commit no push made.
struct StandIn {
    open: BTreeSet<u64>,
    tips: BTreeSet<u64>,
}

impl ForgeReader for StandIn {
    fn read(&self, tool: &str, arguments: Map<String, Value>) -> Result<Value, ForgeError> {
        match tool {
            "pull_request_read" => {
                let n = ["index", "pull_number", "number"]
                    .iter()
                    .find_map(|k| arguments.get(*k).and_then(Value::as_u64))
                    .expect("the PR's number");
                let open = self.open.contains(&n);
                Ok(
                    json!({ "head": { "sha": head(n) }, "state": if open { "open" } else { "closed" }, "merged": !open }),
                )
            }
            "get_commit" => {
                let branch = arguments["sha"].as_str().unwrap();
                let n: u64 = branch.trim_start_matches("feature-").parse().unwrap();
                let tip = if self.tips.contains(&n) { head(n) } else { "e".repeat(40) };
                Ok(json!({ "sha": tip }))
            }
            other => panic!("the prune reads no {other}"),
        }
    }
}

fn audit(at: Timestamp, i: i64) -> AuditEntry {
    AuditEntry {
        id: None,
        at,
        profile: "prgs-author".into(),
        worker_identity: Some("wrk-author".into()),
        tool: format!("tool-{}", i % 7),
        allowed: i % 3 != 0,
        blocker_kind: (i % 3 == 0).then(|| "worker_fenced".into()),
        reasons: vec![],
        principal: None,
        call: None,
    }
}

fn approval(n: u64, at: Timestamp) -> ApprovalRequest {
    let arguments = json!({ "method": "merge", "index": n }).as_object().cloned();
    ApprovalRequest {
        id: request_id(u128::from(n) + 1),
        requested_at: at,
        profile: "prgs-merger".into(),
        role: "merger".into(),
        worker: Some("wrk-merger".into()),
        principal: None,
        tool: "pull_request_write".into(),
        digest: call_digest(Some("wrk-merger"), "pull_request_write", arguments.as_ref()),
        arguments,
        does: None,
        why: "a rule asks".into(),
        ..ApprovalRequest::default()
    }
}

/// What was written that must survive.
struct Referenced {
    leased: u64,
    locked: u64,
    open: BTreeSet<u64>,
    tips: BTreeSet<u64>,
    pending: String,
}

/// A year of history in `store`.
fn write_year(store: &dyn Store) -> Referenced {
    let op = Approver { id: "os:op".into(), ..Default::default() };
    let mut n = 0u64;
    for d in 0..DAYS {
        let at = day(d);
        let mut entries: Vec<AuditEntry> = (0..AUDIT_PER_DAY).map(|i| audit(at.plus_seconds(i), i)).collect();
        store.append_audit_batch(&mut entries, &mut |_| {}).unwrap();
        for _ in 0..PRS_PER_DAY {
            n += 1;
            store.record_pr_origin(&PrOrigin { pr: pr(n), by: actor("author"), at, issues: vec![] }).unwrap();
            let push = PrPush {
                binding: BINDING.into(),
                branch: format!("feature-{n}"),
                head: head(n),
                by: actor("author"),
                at,
            };
            store.record_pr_push(&push).unwrap();
            for who in ["r1", "r2"] {
                let decision = PrDecision {
                    pr: pr(n),
                    head: head(n),
                    base: Some("main".into()),
                    verdict: ReviewVerdict::Approve,
                    by: actor(who),
                    at: at.plus_seconds(60),
                    cleared: None,
                };
                store.record_pr_decision(&decision).unwrap();
            }
            let claim = PrLeaseClaim {
                terms: LeaseTerms {
                    pr: pr(n),
                    purpose: Purpose::Merge,
                    holder: actor("merger"),
                    candidate_head: head(n),
                    target_branch: Some("main".into()),
                    target_branch_sha: None,
                },
                ttl_seconds: 600,
                plan: ClaimPlan::Claim { release: vec![] },
            };
            assert!(matches!(store.claim_pr_lease(&claim, at).unwrap(), PrClaimOutcome::Claimed(_)));
            assert_eq!(store.release_pr_leases(&pr(n), "merged", at.plus_seconds(120)).unwrap(), 1);
        }
        let request = approval(d as u64, at);
        store.request_approval(&request).unwrap();
        store.answer_approval(&request.id, (&op, &Default::default()), true, None, at.plus_seconds(30)).unwrap();
        assert!(store.use_approval(&request.id, at, at.plus_seconds(40)).unwrap().is_some());
        let registration = Registration {
            ids: WorkerIds {
                worker_identity: format!("wrk-day-{d}"),
                client_name: "codex".into(),
                client_instance_id: "i".into(),
                session_id: format!("s-day-{d}"),
                generation_id: "gen-1".into(),
                role: "author".into(),
                profile: "prgs-author".into(),
                pid: Some(4000 + d),
            },
            heartbeat_ttl_seconds: 30.0,
        };
        store.register(&registration, at).unwrap();
        store.deregister_worker(&registration.ids.worker_identity, at.plus_seconds(3600)).unwrap();
        let host = HostIdentity { host_id: format!("host-{}", d % 5), boot_id: format!("boot-{d}") };
        store.publish_observation(&host, &ProcessScan::of(vec![]), at).unwrap();
    }
    // Still referenced, though old: a claimed lease with a long life on PR 7, a live lock on
    // PR 8, a pending approval from day 3.
    let claim = PrLeaseClaim {
        terms: LeaseTerms {
            pr: pr(7),
            purpose: Purpose::Review,
            holder: actor("r1"),
            candidate_head: head(7),
            target_branch: Some("main".into()),
            target_branch_sha: None,
        },
        ttl_seconds: 400 * DAY,
        plan: ClaimPlan::Claim { release: vec![] },
    };
    assert!(matches!(store.claim_pr_lease(&claim, day(2)).unwrap(), PrClaimOutcome::Claimed(_)));
    let locked = PrDecision {
        pr: pr(8),
        head: head(8),
        base: Some("main".into()),
        verdict: ReviewVerdict::RequestChanges,
        by: actor("r3"),
        at: day(2),
        cleared: None,
    };
    store.record_locked_decision(&locked, &LockWrite::Take { lock_id: "lock-8".into() }).unwrap();
    let pending = approval(10_000, day(3));
    store.request_approval(&pending).unwrap();
    // A session record a replica left behind (its runtime never on record), and a stateless
    // client's task record: both old, both pruned with the runtimes' age.
    for key in ["sess-left-behind", "task:stateless-00:t-1"] {
        let record = fleetgate_store::HttpSession {
            session_id: key.into(),
            profile: "prgs-author".into(),
            owner: "127.0.0.1:9".into(),
            runtime_id: "rt-gone".into(),
            opened_at: day(4),
        };
        store.record_http_session(&record).unwrap();
    }
    Referenced {
        leased: 7,
        locked: 8,
        // Every hundredth PR is still open on the forge; every tenth PR's branch still ends at
        // its push.
        open: (1..=n).filter(|n| n % 100 == 0).collect(),
        tips: (1..=n).filter(|n| n % 10 == 0).collect(),
        pending: pending.id,
    }
}

/// The year on `store`, pruned at its end with 90 days kept (30 for observations, workers,
/// runtimes), and judged.
fn year(store: &dyn Store) {
    let refs = write_year(store);
    let now = day(DAYS);
    let keep = 90;
    let retention = Retention {
        audit: Some(keep * DAY),
        approvals: Some(keep * DAY),
        workflow: Some(keep * DAY),
        observations: Some(30 * DAY),
        workers: Some(30 * DAY),
        runtimes: Some(30 * DAY),
        every: None,
    };
    let forge = StandIn { open: refs.open.clone(), tips: refs.tips.clone() };
    let dialect = fleetgate_core::dialect::by_name("gitea-mcp").expect("the Gitea dialect");
    let schemas = fleetgate_core::dialect::Unlisted;
    let on = || Forge { dialect, schemas: &schemas, reader: Some(&forge as &dyn ForgeReader) };
    let started = std::time::Instant::now();
    let report = prune(store, Some(on()), "prgs", &retention, now).unwrap();
    eprintln!("{}: {} in {:.1} s", store.describe(), report.summary(), started.elapsed().as_secs_f64());

    // The audit: exactly the entries of the last 90 days stay.
    let cutoff_day = DAYS - keep;
    assert_eq!(report.audit, (cutoff_day * AUDIT_PER_DAY) as u64, "{}", report.summary());
    assert_eq!(store.audit_after(0, 1_000_000).unwrap().len() as i64, keep * AUDIT_PER_DAY);

    // PRs: the old, closed, unreferenced ones go; the leased, the locked, the open, the recent stay.
    let old_prs = (cutoff_day as u64) * PRS_PER_DAY;
    let total = DAYS as u64 * PRS_PER_DAY;
    let old_open = refs.open.iter().filter(|n| **n <= old_prs).count() as u64;
    assert_eq!(report.prs.len() as u64, old_prs - 2 - old_open, "{}", report.summary());
    for n in [refs.leased, refs.locked].into_iter().chain(refs.open.iter().copied()) {
        let records = store.pr_records(&pr(n)).unwrap();
        assert!(records.origin.is_some(), "PR {n} is referenced and kept");
    }
    assert!(!store.pr_records(&pr(refs.leased)).unwrap().leases.is_empty());
    assert_eq!(store.list_review_locks(true).unwrap().len(), 1, "the live lock stays");
    for n in old_prs + 1..=total {
        assert!(store.pr_records(&pr(n)).unwrap().origin.is_some(), "recent PR {n} kept");
    }
    // Pushes: an old one goes unless it is still its branch's tip.
    let old_tips = refs.tips.iter().filter(|n| **n <= old_prs).count() as u64;
    assert_eq!(report.pushes, old_prs - old_tips, "{}", report.summary());

    // Approvals: the answered and used ones of the first 275 days go; the pending one stays.
    assert_eq!(report.approvals, cutoff_day as u64, "{}", report.summary());
    assert!(store.approval(&refs.pending).unwrap().is_some_and(|a| a.state == ApprovalState::Pending));
    // The replicas' session and task records.
    assert_eq!(report.http_sessions, 2, "{}", report.summary());
    assert_eq!(store.http_session("sess-left-behind").unwrap(), None);
    // Workers: stopped and last heard from 30 days ago or before (day 335's, at its cutoff,
    // included).
    assert_eq!(report.workers.len() as i64, DAYS - 30 + 1, "{}", report.summary());

    // Nothing old is left to prune, and nothing still referenced moved.
    let again = prune(store, Some(on()), "prgs", &retention, now).unwrap();
    let left = (again.audit, again.prs.len(), again.pushes, again.approvals, again.workers.len(), again.http_sessions);
    assert_eq!(left, (0, 0, 0, 0, 0, 0));

    // The store works as before: a new worker, a lease on a pruned PR's number, an audit entry.
    let registration = Registration {
        ids: WorkerIds {
            worker_identity: "wrk-after".into(),
            client_name: "codex".into(),
            client_instance_id: "i".into(),
            session_id: "s-after".into(),
            generation_id: "gen-2".into(),
            role: "merger".into(),
            profile: "prgs-merger".into(),
            pid: Some(9999),
        },
        heartbeat_ttl_seconds: 30.0,
    };
    assert!(store.register(&registration, now).unwrap().created);
    let claim = PrLeaseClaim {
        terms: LeaseTerms {
            pr: pr(1),
            purpose: Purpose::Merge,
            holder: actor("merger"),
            candidate_head: head(1),
            target_branch: Some("main".into()),
            target_branch_sha: None,
        },
        ttl_seconds: 600,
        plan: ClaimPlan::Claim { release: vec![] },
    };
    assert!(matches!(store.claim_pr_lease(&claim, now).unwrap(), PrClaimOutcome::Claimed(_)));
    store.append_audit(&audit(now, 1)).unwrap();
}

#[test]
fn a_year_of_history_prunes_to_what_is_kept_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let store = fleetgate_store::open(&dir.path().join("year.sqlite3").display().to_string()).unwrap();
    year(&*store);
}

#[test]
fn a_year_of_history_prunes_to_what_is_kept_on_postgres() {
    let Some(db) = fleetgate_testkit::pg::PgDatabase::fresh("fg_year") else { return };
    let store = fleetgate_store::open(&db.url).unwrap();
    year(&*store);
}
