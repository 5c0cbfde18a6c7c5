//! The pull-request workflow as pure functions: leases at an exact head, review
//! decisions pinned to the head they were made at, a merge only at the approved head.
//!
//! Every function here takes what the store holds for one pull request ([`PrState`]), the
//! head the forge reports now (read by the gateway from the downstream, never taken from
//! the caller), the caller and `now` — the store's clock, so every machine judges expiry
//! alike — and answers what may happen. Nothing is written here; the shell writes what the
//! answer says.

use crate::blocker::BlockerKind;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use std::fmt;

/// What a lease is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Purpose {
    /// Reviewing: approving or requesting changes.
    Review,
    /// Merging.
    Merge,
    /// Working an issue (an author's issue lock; the lease's number is the issue's).
    Author,
}

impl Purpose {
    /// The wire literal.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Review => "review",
            Self::Merge => "merge",
            Self::Author => "author",
        }
    }

    /// The purpose named `text`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "review" => Some(Self::Review),
            "merge" => Some(Self::Merge),
            "author" => Some(Self::Author),
            _ => None,
        }
    }
}

impl fmt::Display for Purpose {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a lease stands. A `claimed` lease past its expiry reads as expired
/// ([`PrLease::phase_at`]); the row is marked when it is taken over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Held.
    Claimed,
    /// Given up (by its holder, an operator, a merge, or its holder's end).
    Released,
    /// Not renewed in time, and taken over or swept.
    Expired,
}

impl Phase {
    /// The wire literal.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Claimed => "claimed",
            Self::Released => "released",
            Self::Expired => "expired",
        }
    }

    /// The phase named `text`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "claimed" => Some(Self::Claimed),
            "released" => Some(Self::Released),
            "expired" => Some(Self::Expired),
            _ => None,
        }
    }
}

/// Why a lease was released.
pub mod released {
    /// Its holder gave it up.
    pub const BY_HOLDER: &str = "released";
    /// The PR was merged through the gateway.
    pub const MERGED: &str = "merged";
    /// Its holder's worker was fenced or deregistered.
    pub const HOLDER_GONE: &str = "holder_gone";
    /// It expired and another worker claimed the PR.
    pub const TAKEN_OVER: &str = "taken_over";
}

/// A review decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReviewVerdict {
    /// Approve.
    Approve,
    /// Request changes.
    RequestChanges,
}

impl ReviewVerdict {
    /// The wire literal.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Approve => "approve",
            Self::RequestChanges => "request_changes",
        }
    }

    /// The verdict named `text` (the wire literal).
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "approve" => Some(Self::Approve),
            "request_changes" => Some(Self::RequestChanges),
            _ => None,
        }
    }
}

/// Which approvals count (`[workflow] independent_review`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Independence {
    /// The approving client session differs from the one that created the PR.
    #[default]
    Session,
    /// The approving principal (an HTTP token's, an OAuth subject's) differs from the PR's
    /// creator's and its last pusher's; where either made its call without a principal
    /// (stdio), their sessions must differ. A second session of one principal is the same
    /// reviewer: independence survives a reconnect.
    Principal,
    /// The approving client differs from the one that created the PR.
    Client,
    /// Any approval counts.
    Off,
}

/// The worker, client and session a call comes from (a lease's holder, a decision's maker).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Actor {
    /// The worker identity.
    pub worker: String,
    /// The roster profile.
    pub profile: String,
    /// The client (`claude-code`, `codex`, …).
    pub client: String,
    /// The client session.
    pub session: String,
    /// The HTTP principal the call came from, when one authenticated (a tokens-file name, an
    /// `oauth:` subject).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
}

/// One pull request of one repository binding (`remote/org/repo`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PrRef {
    /// `remote/org/repo`.
    pub binding: String,
    /// The PR number.
    pub pr: u64,
}

impl fmt::Display for PrRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.binding, self.pr)
    }
}

/// What a lease is on and for: the PR, the purpose, who holds it and the heads it was
/// claimed at. A claim states them (the store's `PrLeaseClaim`); the lease made keeps
/// them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseTerms {
    /// The PR.
    #[serde(flatten)]
    pub pr: PrRef,
    /// Review or merge.
    pub purpose: Purpose,
    /// Who holds it.
    pub holder: Actor,
    /// The head it was claimed at.
    pub candidate_head: String,
    /// The PR's target branch, when the forge named it.
    pub target_branch: Option<String>,
    /// That branch's head at the claim, when known.
    pub target_branch_sha: Option<String>,
}

/// A PR lease.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrLease {
    /// Its id.
    pub lease_id: String,
    /// What it is on and for (flattened: the JSON keeps its keys at the top).
    #[serde(flatten)]
    pub terms: LeaseTerms,
    /// Where it stands (as stored; see [`PrLease::phase_at`]).
    pub phase: Phase,
    /// When it was claimed.
    pub claimed_at: Timestamp,
    /// The holder's last gated call on the PR.
    pub last_activity: Timestamp,
    /// `last_activity` + the lease TTL.
    pub expires_at: Timestamp,
    /// Why it was released.
    pub released_reason: Option<String>,
}

impl PrLease {
    /// Its phase as of `now`: a claimed lease past its expiry is expired.
    pub fn phase_at(&self, now: Timestamp) -> Phase {
        if self.phase == Phase::Claimed && now >= self.expires_at { Phase::Expired } else { self.phase }
    }

    /// Held as of `now`.
    pub fn is_live(&self, now: Timestamp) -> bool {
        self.phase_at(now) == Phase::Claimed
    }
}

/// A recorded review decision, pinned to the head it was made at.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrDecision {
    /// The PR.
    #[serde(flatten)]
    pub pr: PrRef,
    /// The head it was made at.
    pub head: String,
    /// The PR's base branch when it was made (as the lease or the forge named it): a
    /// decision counts only for that base.
    pub base: Option<String>,
    /// Approve or request changes.
    pub verdict: ReviewVerdict,
    /// Who made it.
    pub by: Actor,
    /// When.
    pub at: Timestamp,
    /// When an operator cleared it (`fleetgate pr clear-decision`): who and why. A cleared
    /// decision no longer counts, either way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleared: Option<String>,
}

impl PrDecision {
    /// Standing (not cleared), made at exactly this head, against exactly this base.
    pub fn is_at(&self, head: &str, base: Option<&str>) -> bool {
        self.cleared.is_none() && self.head == head && self.base.as_deref() == base
    }
}

/// A commit pushed through a gateway (a file write on a branch): who pushed which head, so
/// an approval of that head from the pushing session does not count as independent
/// (GitHub's "approval of the most recent push by someone else").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrPush {
    /// `remote/owner/repo`, as PR keys spell it.
    pub binding: String,
    /// The branch written.
    pub branch: String,
    /// The commit the write made.
    pub head: String,
    /// The writing worker, client and session.
    pub by: Actor,
    /// When.
    pub at: Timestamp,
}

/// Who created a PR through the gateway (for independence).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrOrigin {
    /// The PR.
    #[serde(flatten)]
    pub pr: PrRef,
    /// The creating worker, client and session.
    pub by: Actor,
    /// When.
    pub at: Timestamp,
    /// The issues its title and body reference (`#N`).
    #[serde(default)]
    pub issues: Vec<u64>,
}

/// What the store holds for one PR.
#[derive(Clone, Copy, Debug)]
pub struct PrState<'a> {
    /// Its leases, any phase.
    pub leases: &'a [PrLease],
    /// Its decisions, oldest first.
    pub decisions: &'a [PrDecision],
    /// Who created it through the gateway, when it was.
    pub origin: Option<&'a PrOrigin>,
    /// Commits pushed through a gateway at the heads of its decisions, under any name of
    /// the repository (a commit id names one commit whichever spelling the push used).
    pub pushes: &'a [PrPush],
}

/// A workflow refusal: the blocker, every reason, and what the operator (or the model) does.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Refusal {
    /// The blocker literal.
    pub blocker_kind: BlockerKind,
    /// Every reason.
    pub reasons: Vec<String>,
    /// One sentence to act on.
    pub operator_action: String,
}

impl Refusal {
    fn new(kind: BlockerKind, reasons: Vec<String>) -> Self {
        Self { blocker_kind: kind, operator_action: action(kind).to_owned(), reasons }
    }

    /// A refusal for one reason, with the blocker's own operator action.
    pub fn of(kind: BlockerKind, reason: String) -> Self {
        Self::new(kind, vec![reason])
    }
}

/// The operator action of a workflow blocker: the blocker's own.
pub fn action(kind: BlockerKind) -> &'static str {
    kind.operator_action()
}

fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

/// The caller's live lease of `purpose` on the PR, if it holds one.
pub fn held_by<'a>(state: &PrState<'a>, purpose: Purpose, worker: &str, now: Timestamp) -> Option<&'a PrLease> {
    state.leases.iter().find(|l| l.terms.purpose == purpose && l.terms.holder.worker == worker && l.is_live(now))
}

/// The live lease of `purpose` on the PR, whoever holds it.
pub fn live_lease<'a>(state: &PrState<'a>, purpose: Purpose, now: Timestamp) -> Option<&'a PrLease> {
    state.leases.iter().find(|l| l.terms.purpose == purpose && l.is_live(now))
}

/// May `caller` record `verdict` on the PR whose head the forge reports as `head`? Allowed:
/// the lease to touch (its `last_activity` advances).
pub fn judge_review<'a>(
    state: &PrState<'a>,
    caller: &Actor,
    (head, base): (&str, Option<&str>),
    verdict: ReviewVerdict,
    now: Timestamp,
) -> Result<&'a PrLease, Refusal> {
    let Some(lease) = held_by(state, Purpose::Review, &caller.worker, now) else {
        let mut reasons =
            vec![format!("{} needs a live review lease held by worker {} on this PR", verdict.as_str(), caller.worker)];
        if let Some(other) = live_lease(state, Purpose::Review, now) {
            reasons.push(format!(
                "the review lease is held by worker {} until {}",
                other.terms.holder.worker, other.expires_at
            ));
        } else if let Some(old) = state
            .leases
            .iter()
            .rev()
            .find(|l| l.terms.purpose == Purpose::Review && l.terms.holder.worker == caller.worker)
        {
            reasons.push(format!("this worker's lease {} is {}", old.lease_id, old.phase_at(now).as_str()));
        }
        return Err(Refusal::new(BlockerKind::ReviewLeaseRequired, reasons));
    };
    if lease.terms.candidate_head != head {
        return Err(Refusal::new(
            BlockerKind::StaleHead,
            vec![format!(
                "the review lease is at head {} but the PR's head is now {}",
                short(&lease.terms.candidate_head),
                short(head)
            )],
        ));
    }
    // The decision is recorded for the lease's base: the PR must still target it.
    if lease.terms.target_branch.is_some() && lease.terms.target_branch.as_deref() != base {
        return Err(Refusal::new(
            BlockerKind::StaleHead,
            vec![format!(
                "the review lease was claimed for base {} but the PR now targets {}",
                lease.terms.target_branch.as_deref().unwrap_or("?"),
                base.unwrap_or("no base the forge reported")
            )],
        ));
    }
    Ok(lease)
}

/// May a verdict whose pending review the forge records at `pending` (the dialect's reading of
/// the forge) be judged at `head`, the PR's head now? Only where the forge records it there: a
/// pending review made at another head would count at that commit while the gate judged (and
/// would record) the head — refused, naming both. Gitea records it at the head of its
/// submission ([`PendingAt::Head`]).
pub fn judge_pending(pending: &crate::dialect::PendingAt, head: &str) -> Result<(), Refusal> {
    use crate::dialect::PendingAt;
    match pending {
        PendingAt::Head => Ok(()),
        PendingAt::Commit(at) if at == head => Ok(()),
        PendingAt::Commit(at) => Err(Refusal::new(
            BlockerKind::StaleHead,
            vec![format!(
                "the pending review was made at head {} but the PR's head is now {}: the forge would record this \
                 verdict at {}; delete the pending review and review head {} again",
                short(at),
                short(head),
                short(at),
                short(head)
            )],
        )),
        PendingAt::Missing(why) => Err(Refusal::new(
            BlockerKind::StaleHead,
            vec![format!(
                "no pending review of the caller's at head {} is on the forge to submit ({why}): create the review at \
                 the PR's head",
                short(head)
            )],
        )),
    }
}

/// Does `approval` count against the PR's origin and the push of the approved head under
/// `independence`? Neither the session (or client) that created the PR nor the one that
/// pushed the head being approved may approve it.
pub fn independent(
    approval: &PrDecision,
    origin: Option<&PrOrigin>,
    pusher: Option<&Actor>,
    independence: Independence,
) -> bool {
    let differs = |by: &Actor| match independence {
        Independence::Session => approval.by.session != by.session,
        Independence::Principal => match (&approval.by.principal, &by.principal) {
            (Some(mine), Some(theirs)) => mine != theirs && approval.by.session != by.session,
            _ => approval.by.session != by.session,
        },
        Independence::Client => approval.by.client != by.client,
        Independence::Off => true,
    };
    origin.is_none_or(|o| differs(&o.by)) && pusher.is_none_or(differs)
}

/// Who pushed `head` through a gateway, when one did (the last record).
pub fn pusher<'a>(state: &PrState<'a>, head: &str) -> Option<&'a Actor> {
    state.pushes.iter().rev().find(|p| p.head == head).map(|p| &p.by)
}

/// The approval that lets `head` merge onto `base`: an independent approval at exactly
/// that head and base, and no reviewer whose latest decision there is a request-changes (it
/// stands until that reviewer approves at the head, the head moves, or an operator clears
/// it). A decision made against another base is historical, like one at another head.
/// Else every missing piece, in words.
pub fn approval_at<'a>(
    state: &PrState<'a>,
    head: &str,
    base: Option<&str>,
    independence: Independence,
) -> Result<&'a PrDecision, Vec<String>> {
    let at_head: Vec<&PrDecision> = state.decisions.iter().filter(|d| d.is_at(head, base)).collect();
    // Each reviewer's latest word at this head and base.
    let mut latest: Vec<&PrDecision> = Vec::new();
    for d in &at_head {
        match latest.iter_mut().find(|l| l.by.worker == d.by.worker) {
            Some(l) if d.at >= l.at => *l = d,
            Some(_) => {}
            None => latest.push(d),
        }
    }
    let standing: Vec<&&PrDecision> = latest.iter().filter(|d| d.verdict == ReviewVerdict::RequestChanges).collect();
    let approvals: Vec<&&PrDecision> = latest.iter().filter(|d| d.verdict == ReviewVerdict::Approve).collect();
    let pushed_by = pusher(state, head);
    let approval = approvals.iter().rev().find(|d| independent(d, state.origin, pushed_by, independence));
    let mut missing = Vec::new();
    if approval.is_none() {
        missing.push(format!("no independent approval recorded at head {}{}", short(head), on(base)));
        let by_origin = approvals.iter().filter(|d| !independent(d, state.origin, None, independence)).count();
        if by_origin > 0 {
            missing.push(format!("{by_origin} approval(s) at this head came from the session that created the PR"));
        }
        let by_pusher = approvals.iter().filter(|d| !independent(d, None, pushed_by, independence)).count();
        if by_pusher > 0 {
            missing.push(format!("{by_pusher} approval(s) at this head came from the session that pushed it"));
        }
        let older =
            state.decisions.iter().filter(|d| !d.is_at(head, base) && d.verdict == ReviewVerdict::Approve).count();
        if older > 0 {
            missing.push(format!("{older} approval(s) at earlier heads or other bases are historical"));
        }
    }
    for rc in standing {
        missing.push(format!(
            "worker {} requested changes at head {} and has not approved it since (it stands until that reviewer \
             approves, the head moves, or an operator clears it)",
            rc.by.worker,
            short(head)
        ));
    }
    match approval {
        Some(approval) if missing.is_empty() => Ok(approval),
        _ => Err(missing),
    }
}

fn on(base: Option<&str>) -> String {
    base.map(|b| format!(" onto {b}")).unwrap_or_default()
}

/// May `caller` merge the PR whose head the forge reports as `head`, targeting `base`?
/// Allowed: the merge lease to touch.
pub fn judge_merge<'a>(
    state: &PrState<'a>,
    caller: &Actor,
    head: &str,
    base: Option<&str>,
    independence: Independence,
    now: Timestamp,
) -> Result<&'a PrLease, Refusal> {
    let mut missing = Vec::new();
    let lease = held_by(state, Purpose::Merge, &caller.worker, now);
    match lease {
        None => missing.push(format!("no live merge lease held by worker {}", caller.worker)),
        Some(l) if l.terms.candidate_head != head => missing.push(format!(
            "the merge lease is at head {} but the PR's head is now {}",
            short(&l.terms.candidate_head),
            short(head)
        )),
        Some(l) if l.terms.target_branch.is_some() && l.terms.target_branch.as_deref() != base => {
            missing.push(format!(
                "the merge lease was claimed for base {} but the PR now targets {}",
                l.terms.target_branch.as_deref().unwrap_or("?"),
                base.unwrap_or("no base the forge reported")
            ))
        }
        Some(_) => {}
    }
    if let Err(more) = approval_at(state, head, base, independence) {
        missing.extend(more);
    }
    match lease {
        Some(l) if missing.is_empty() => Ok(l),
        _ => Err(Refusal::new(BlockerKind::ApprovalRequired, missing)),
    }
}

/// What a claim does, as judged before the store's guarded write (which checks again).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimPlan {
    /// Claim afresh; release these leases first (expired ones taken over, or ones whose
    /// holder is gone), each with its reason.
    Claim {
        /// `(lease_id, released_reason)`.
        release: Vec<(String, &'static str)>,
    },
    /// The caller already holds the live lease at this head: renew it.
    Renew {
        /// The lease.
        lease_id: String,
    },
}

/// May `caller` claim a `purpose` lease on the PR at `claimed_head`, the forge reporting
/// `head`? `holder_alive` says whether a lease holder's worker still owns its session.
pub fn judge_claim(
    state: &PrState<'_>,
    caller: &Actor,
    purpose: Purpose,
    claimed_head: &str,
    head: &str,
    now: Timestamp,
    holder_alive: &dyn Fn(&Actor) -> bool,
) -> Result<ClaimPlan, Refusal> {
    if claimed_head != head {
        return Err(Refusal::new(
            BlockerKind::StaleHead,
            vec![format!("the claim names head {} but the PR's head is {}", short(claimed_head), short(head))],
        ));
    }
    let mut release = Vec::new();
    for lease in state.leases.iter().filter(|l| l.terms.purpose == purpose && l.phase == Phase::Claimed) {
        if !lease.is_live(now) {
            release.push((lease.lease_id.clone(), released::TAKEN_OVER));
        } else if lease.terms.holder.worker == caller.worker {
            if lease.terms.candidate_head == head {
                return Ok(ClaimPlan::Renew { lease_id: lease.lease_id.clone() });
            }
            release.push((lease.lease_id.clone(), released::BY_HOLDER));
        } else if !holder_alive(&lease.terms.holder) {
            release.push((lease.lease_id.clone(), released::HOLDER_GONE));
        } else {
            return Err(Refusal::new(
                BlockerKind::ReviewLeaseHeld,
                vec![format!(
                    "worker {} ({}, session {}) holds the {} lease {} at head {} until {}",
                    lease.terms.holder.worker,
                    lease.terms.holder.client,
                    lease.terms.holder.session,
                    purpose.as_str(),
                    lease.lease_id,
                    short(&lease.terms.candidate_head),
                    lease.expires_at
                )],
            ));
        }
    }
    Ok(ClaimPlan::Claim { release })
}

/// What `<prefix>assess_pr` answers: the PR's live leases, its decisions split into current
/// (at the head) and historical, and what a merge at the head still needs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Assessment {
    /// The PR.
    pub pr: PrRef,
    /// The head the forge reports.
    pub current_head: String,
    /// The base branch the forge reports.
    pub current_base: Option<String>,
    /// Live leases.
    pub leases: Vec<PrLease>,
    /// Decisions at the current head and base.
    pub current_decisions: Vec<PrDecision>,
    /// Decisions at earlier heads or other bases (they no longer count).
    pub historical_decisions: Vec<PrDecision>,
    /// Who created it through the gateway.
    pub origin: Option<PrOrigin>,
    /// An independent approval at the head with no later request-changes exists.
    pub approved_at_head: bool,
    /// What a merge would still need besides a merge lease at the head (empty: nothing).
    pub merge_needs: Vec<String>,
    /// The PR's canonical state, computed from all of the above and the forge.
    #[serde(flatten)]
    pub status: PrStatus,
}

/// A PR's canonical state, computed from the ledger and the forge's head — the seed's
/// hand-written state block (`STATE`, `WHO_IS_NEXT`, `NEXT_ACTION`, `HEAD_SHA`,
/// `REVIEW_STATUS`, `MERGE_READY`, `BLOCKERS`), never read from comments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PrStatus {
    /// `open` PRs: `changes_requested`, `ready_for_review`, `approved`, `ready_to_merge`;
    /// else `merged` or `closed`.
    pub state: String,
    /// `author`, `reviewer`, `merger`, or `none` (merged or closed).
    pub who_is_next: String,
    /// One sentence naming the head.
    pub next_action: String,
    /// The head the forge reports.
    pub head_sha: String,
    /// `approved_at_current_head`, `historical` (approvals only at earlier heads or other
    /// bases), or `none`.
    pub review_status: String,
    /// An independent approval and a merge lease at the head: the merger may merge now.
    pub merge_ready: bool,
    /// What stands between the PR and a merge.
    pub blockers: Vec<String>,
}

/// The forge's word on whether a PR is done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForgeState {
    /// Open.
    Open,
    /// Merged.
    Merged,
    /// Closed without a merge.
    Closed,
}

fn status_of(
    state: &PrState<'_>,
    head: &str,
    base: Option<&str>,
    forge: ForgeState,
    approved: bool,
    merge_needs: &[String],
) -> PrStatus {
    let at = short(head);
    let review_status = if approved {
        "approved_at_current_head"
    } else if state.decisions.iter().any(|d| d.cleared.is_none() && d.verdict == ReviewVerdict::Approve) {
        "historical"
    } else {
        "none"
    };
    // A reviewer whose latest word at this head and base is a request-changes.
    let standing = state.decisions.iter().filter(|d| d.is_at(head, base)).any(|d| {
        d.verdict == ReviewVerdict::RequestChanges
            && !state.decisions.iter().any(|e| e.is_at(head, base) && e.by.worker == d.by.worker && e.at > d.at)
    });
    let (state_name, who, next) = match forge {
        ForgeState::Merged => ("merged", "none", format!("nothing: the PR is merged (head {at})")),
        ForgeState::Closed => ("closed", "none", format!("nothing: the PR is closed (head {at})")),
        ForgeState::Open if standing => {
            ("changes_requested", "author", format!("push a new head addressing the changes requested at {at}"))
        }
        ForgeState::Open if approved && merge_needs.is_empty() => {
            ("ready_to_merge", "merger", format!("merge at head {at} under the merge lease"))
        }
        ForgeState::Open if approved => ("approved", "merger", format!("claim a merge lease at head {at}, then merge")),
        ForgeState::Open => {
            ("ready_for_review", "reviewer", format!("claim a review lease at head {at} and review it"))
        }
    };
    let open = forge == ForgeState::Open;
    PrStatus {
        state: state_name.into(),
        who_is_next: who.into(),
        next_action: next,
        head_sha: head.to_owned(),
        review_status: review_status.into(),
        merge_ready: open && approved && merge_needs.is_empty(),
        blockers: if open { merge_needs.to_vec() } else { Vec::new() },
    }
}

/// Assess a PR whose head and base the forge reports as `head` and `base`, `forge` saying
/// whether it is done.
pub fn assess(
    pr: PrRef,
    state: &PrState<'_>,
    (head, base, forge): (&str, Option<&str>, ForgeState),
    independence: Independence,
    now: Timestamp,
) -> Assessment {
    let (current, historical): (Vec<PrDecision>, Vec<PrDecision>) =
        state.decisions.iter().cloned().partition(|d| d.is_at(head, base));
    let approval = approval_at(state, head, base, independence);
    let mut merge_needs = approval.as_ref().err().cloned().unwrap_or_default();
    if live_lease(state, Purpose::Merge, now).is_none_or(|l| l.terms.candidate_head != head) {
        merge_needs.push(format!("a merge lease at head {}", short(head)));
    }
    Assessment {
        pr,
        current_head: head.to_owned(),
        current_base: base.map(str::to_owned),
        leases: state.leases.iter().filter(|l| l.is_live(now)).cloned().collect(),
        current_decisions: current,
        historical_decisions: historical,
        origin: state.origin.cloned(),
        approved_at_head: approval.is_ok(),
        status: status_of(state, head, base, forge, approval.is_ok(), &merge_needs),
        merge_needs,
    }
}

#[cfg(test)]
mod tests;

/// The roles whose work an approval must be independent of (the PR's author, who also
/// pushes its head), and the role that approves.
pub const INDEPENDENT_ROLES: (&str, &str) = ("author", "reviewer");

/// Principals that may hold both an author's and a reviewer's profile: `principals` are
/// `(name, profiles it may use — empty: any)`, `members` `(profile, role)`. Each finding
/// names the principal and the two profiles. Under `[workflow] independent_review =
/// "principal"` such a principal's approvals of its own work do not count; under any other
/// mode they would. Reported at a gateway's start and by `fleetgate doctor`.
pub fn principals_holding_independent_roles(
    principals: &[(String, Vec<String>)],
    members: &[(String, String)],
) -> Vec<String> {
    let (author, reviewer) = INDEPENDENT_ROLES;
    let may = |profiles: &[String], role: &str| -> Option<String> {
        members
            .iter()
            .filter(|(_, r)| r == role)
            .find(|(p, _)| profiles.is_empty() || profiles.contains(p))
            .map(|(p, _)| p.clone())
    };
    principals
        .iter()
        .filter_map(|(name, profiles)| {
            let (a, r) = (may(profiles, author)?, may(profiles, reviewer)?);
            let all = if profiles.is_empty() { " (it may use every profile)" } else { "" };
            Some(format!(
                "principal {name} may use both the {author} profile {a} and the {reviewer} profile {r}{all}: a \
                 second session of it is not an independent reviewer"
            ))
        })
        .collect()
}
