//! The values the PR workflow and the tool pins keep in the store.

use fleetgate_core::Timestamp;
use fleetgate_core::workflow::{ClaimPlan, LeaseTerms, PrDecision, PrLease, PrOrigin, PrPush, PrRef, Purpose};

/// What the store holds for one PR.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PrRecords {
    /// Its leases, any phase, oldest first.
    pub leases: Vec<PrLease>,
    /// Its decisions, oldest first.
    pub decisions: Vec<PrDecision>,
    /// Who created it through a gateway.
    pub origin: Option<PrOrigin>,
    /// Commits pushed through a gateway at the heads of its decisions.
    pub pushes: Vec<PrPush>,
}

/// A lease claim, as judged by `fleetgate_core::workflow::judge_claim`; the store carries
/// out the plan in one guarded transaction and checks again that no other live lease of
/// the purpose exists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrLeaseClaim {
    /// The lease asked for: its holder the claimant, its head the PR's current one (the
    /// forge's).
    pub terms: LeaseTerms,
    /// The lease TTL.
    pub ttl_seconds: i64,
    /// What the judgement said to do.
    pub plan: ClaimPlan,
}

/// How a claim ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PrClaimOutcome {
    /// The caller holds this lease now.
    Claimed(PrLease),
    /// Another worker's live lease won (a racing claim committed first).
    Held(PrLease),
}

/// The pinned definition of one downstream tool of one profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolPin {
    /// The roster profile whose downstream serves the tool.
    pub profile: String,
    /// The tool.
    pub tool: String,
    /// The accepted definition's digest (`sha256:…`).
    pub pinned_digest: String,
    /// When it was pinned or accepted.
    pub pinned_at: Timestamp,
    /// The digest seen last.
    pub seen_digest: String,
    /// The definition seen last (canonical JSON), for the operator to review.
    pub seen_definition: String,
    /// When it was seen last with a new digest.
    pub seen_at: Timestamp,
}

impl ToolPin {
    /// The definition seen last differs from the accepted one.
    pub fn changed(&self) -> bool {
        self.pinned_digest != self.seen_digest
    }
}

/// A lease id: the PR, the purpose and the claim's time, and a random tail.
pub fn new_lease_id(pr: &PrRef, purpose: Purpose, now: Timestamp) -> String {
    format!("{}-{}-{}-{:012x}", pr.pr, purpose.as_str(), now.unix(), fastrand::u64(..1 << 48))
}
