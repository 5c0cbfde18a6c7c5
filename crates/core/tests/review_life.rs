//! Reviews judged through their whole life, on both forges: for every sequence of review
//! creations (pending or with a verdict), submissions of pending reviews, pushes of a new head
//! and deletions of pending reviews, the approvals the gate records (each at the head it
//! judged) are the approvals the forge records (each at the commit the forge keeps for it).
//!
//! The forges are modelled from their sources: GitHub keeps the commit a pending review was
//! made at (`commitID`) and submits the caller's *first* review, which must be pending; Gitea
//! re-stamps a pending review with the PR's head when it is submitted. The gate's side is the
//! product's: the dialect's reading of the forge (`Dialect::pending_review`, answered from the
//! model as the server would answer its reads) and `workflow::judge_pending`.

use fleetgate_core::dialect::{Dialect, PendingAt, Unlisted, gitea::GITEA, github::GITHUB};
use fleetgate_core::effect::{Answered, Read, ReadFailed};
use fleetgate_core::workflow::judge_pending;
use proptest::prelude::*;
use serde_json::{Map, Value, json};

const REVIEWERS: [&str; 2] = ["ana", "bo"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    Approve,
    Changes,
}

#[derive(Clone, Debug)]
enum Op {
    /// A review without a verdict: pending, at the head (the gateway pins it there).
    CreatePending(usize),
    /// A review submitted at once, at the head.
    Create(usize, Verdict),
    /// The reviewer's pending review submitted with a verdict.
    Submit(usize, Verdict),
    /// The author pushes a new head.
    Push,
    /// The reviewer's pending review deleted.
    DeletePending(usize),
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum State {
    Pending,
    Submitted(Verdict),
}

#[derive(Clone, Debug)]
struct Review {
    id: u64,
    by: usize,
    state: State,
    commit: String,
}

/// One forge's records of one PR.
#[derive(Debug, Default)]
struct Forge {
    /// Gitea: a submitted pending review is re-stamped with the head.
    restamps: bool,
    head: u32,
    reviews: Vec<Review>,
    next: u64,
}

impl Forge {
    fn head(&self) -> String {
        format!("{:040x}", u64::from(self.head) + 0xabc0)
    }

    /// The server's answer to a read the dialect asks for, as the caller `by`.
    fn answer(&self, read: &Read, by: usize) -> Result<Value, String> {
        match (read.tool.as_str(), read.arguments.get("method").and_then(Value::as_str)) {
            ("get_me", _) => Ok(json!({ "login": REVIEWERS[by] })),
            ("pull_request_read", Some("get_reviews")) => {
                let page = read.arguments.get("page").and_then(Value::as_u64).unwrap_or(1);
                let per = read.arguments.get("perPage").and_then(Value::as_u64).unwrap_or(30);
                let all: Vec<Value> = self
                    .reviews
                    .iter()
                    // A pending review is shown to its own author only.
                    .filter(|r| r.state != State::Pending || r.by == by)
                    .map(|r| {
                        let state = match r.state {
                            State::Pending => "PENDING",
                            State::Submitted(Verdict::Approve) => "APPROVED",
                            State::Submitted(Verdict::Changes) => "CHANGES_REQUESTED",
                        };
                        json!({ "id": r.id, "state": state, "commit_id": r.commit, "user": { "login": REVIEWERS[r.by] } })
                    })
                    .collect();
                let skip = usize::try_from((page - 1) * per).unwrap_or(usize::MAX);
                Ok(Value::Array(all.into_iter().skip(skip).take(usize::try_from(per).unwrap_or(30)).collect()))
            }
            _ => Err(format!("no such read: {read:?}")),
        }
    }

    /// The submit as the forge does it: GitHub the caller's first review (which must be
    /// pending), at its own commit; Gitea the caller's pending review, at the head.
    fn submit(&mut self, by: usize, verdict: Verdict) -> bool {
        let head = self.head();
        let at = if self.restamps {
            self.reviews.iter().position(|r| r.by == by && r.state == State::Pending)
        } else {
            self.reviews.iter().position(|r| r.by == by).filter(|i| self.reviews[*i].state == State::Pending)
        };
        let Some(i) = at else { return false };
        self.reviews[i].state = State::Submitted(verdict);
        if self.restamps {
            self.reviews[i].commit = head;
        }
        true
    }

    /// Every submitted verdict the forge holds: who, at which commit, which.
    fn verdicts(&self) -> Vec<(usize, String, Verdict)> {
        let mut out: Vec<_> = self
            .reviews
            .iter()
            .filter_map(|r| match r.state {
                State::Submitted(v) => Some((r.by, r.commit.clone(), v)),
                State::Pending => None,
            })
            .collect();
        out.sort_by(|a, b| (a.0, &a.1, a.2 as u8).cmp(&(b.0, &b.1, b.2 as u8)));
        out
    }
}

/// The dialect's reading of where the forge records `by`'s submission, its reads answered by
/// the model.
fn pending_at(dialect: &dyn Dialect, tool: &str, args: &Map<String, Value>, forge: &Forge, by: usize) -> PendingAt {
    let mut answers: Vec<Answered> = Vec::new();
    for _ in 0..32 {
        match dialect.pending_review(tool, args, &Unlisted, &answers) {
            Ok(at) => return at,
            Err(reads) => {
                for read in reads {
                    let answer = forge.answer(&read, by);
                    answers.push((read, answer.map_err(ReadFailed)));
                }
            }
        }
    }
    panic!("the dialect's reads did not end");
}

fn submit_call(github: bool, verdict: Verdict) -> (&'static str, Map<String, Value>) {
    let args = if github {
        let event = if verdict == Verdict::Approve { "APPROVE" } else { "REQUEST_CHANGES" };
        json!({ "method": "submit_pending", "owner": "o", "repo": "r", "pullNumber": 1, "event": event })
    } else {
        let state = if verdict == Verdict::Approve { "APPROVED" } else { "REQUEST_CHANGES" };
        json!({ "method": "submit", "owner": "o", "repo": "r", "pull_number": 1, "review_id": 1, "state": state })
    };
    ("pull_request_review_write", args.as_object().cloned().unwrap_or_default())
}

/// Run `ops` against the forge `dialect` speaks for: after every step, the gate's record of
/// verdicts equals the forge's.
fn run(dialect: &dyn Dialect, restamps: bool, ops: &[Op]) -> Result<(), TestCaseError> {
    let github = !restamps;
    let mut forge = Forge { restamps, ..Forge::default() };
    let mut gate: Vec<(usize, String, Verdict)> = Vec::new();
    for op in ops {
        let head = forge.head();
        match *op {
            Op::CreatePending(by) => {
                // GitHub keeps one pending review per user.
                let has = forge.reviews.iter().any(|r| r.by == by && r.state == State::Pending);
                if !(github && has) {
                    forge.next += 1;
                    forge.reviews.push(Review { id: forge.next, by, state: State::Pending, commit: head });
                }
            }
            Op::Create(by, verdict) => {
                // Judged at the head, pinned there: the forge records it there.
                forge.next += 1;
                forge.reviews.push(Review {
                    id: forge.next,
                    by,
                    state: State::Submitted(verdict),
                    commit: head.clone(),
                });
                gate.push((by, head, verdict));
            }
            Op::Submit(by, verdict) => {
                let (tool, args) = submit_call(github, verdict);
                let pending = pending_at(dialect, tool, &args, &forge, by);
                if judge_pending(&pending, &head).is_ok() && forge.submit(by, verdict) {
                    gate.push((by, head, verdict));
                }
            }
            Op::Push => forge.head += 1,
            Op::DeletePending(by) => {
                if let Some(i) = forge.reviews.iter().position(|r| r.by == by && r.state == State::Pending) {
                    forge.reviews.remove(i);
                }
            }
        }
        let mut recorded = gate.clone();
        recorded.sort_by(|a, b| (a.0, &a.1, a.2 as u8).cmp(&(b.0, &b.1, b.2 as u8)));
        prop_assert_eq!(&recorded, &forge.verdicts(), "after {:?} of {:?}", op, ops);
    }
    Ok(())
}

fn op() -> impl Strategy<Value = Op> {
    let by = 0..REVIEWERS.len();
    let verdict = prop_oneof![Just(Verdict::Approve), Just(Verdict::Changes)];
    prop_oneof![
        by.clone().prop_map(Op::CreatePending),
        (by.clone(), verdict.clone()).prop_map(|(b, v)| Op::Create(b, v)),
        (by.clone(), verdict).prop_map(|(b, v)| Op::Submit(b, v)),
        Just(Op::Push),
        by.prop_map(Op::DeletePending),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn on_github_the_gate_records_every_approval_where_the_forge_does(ops in prop::collection::vec(op(), 0..24)) {
        run(&GITHUB, false, &ops)?;
    }

    #[test]
    fn on_gitea_the_gate_records_every_approval_where_the_forge_does(ops in prop::collection::vec(op(), 0..24)) {
        run(&GITEA, true, &ops)?;
    }
}

/// The issue's sequence, spelled out: a pending review at X, a push of Y, the submission.
#[test]
fn a_pending_review_made_at_x_submitted_at_y_is_refused_on_github_and_counted_at_y_on_gitea() {
    let ops = [Op::CreatePending(0), Op::Push, Op::Submit(0, Verdict::Approve)];
    run(&GITHUB, false, &ops).unwrap();
    run(&GITEA, true, &ops).unwrap();
    // On GitHub the submission is refused naming both heads.
    let mut forge = Forge::default();
    forge.reviews.push(Review { id: 1, by: 0, state: State::Pending, commit: forge.head() });
    let x = forge.head();
    forge.head += 1;
    let (tool, args) = submit_call(true, Verdict::Approve);
    let pending = pending_at(&GITHUB, tool, &args, &forge, 0);
    assert_eq!(pending, PendingAt::Commit(x.clone()));
    let refusal = judge_pending(&pending, &forge.head()).unwrap_err();
    assert_eq!(refusal.blocker_kind.as_str(), "stale_head");
    let why = refusal.reasons.join(" ");
    assert!(why.contains(&x[..12]) && why.contains(&forge.head()[..12]), "{why}");
    // Another reviewer's pending review is not the caller's: the caller has none to submit.
    let pending = pending_at(&GITHUB, tool, &args, &forge, 1);
    assert!(matches!(pending, PendingAt::Missing(_)), "{pending:?}");
}
