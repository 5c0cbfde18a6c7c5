//! The PR workflow's control tools: `…claim_pr_lease`, `…release_pr_lease`,
//! `…list_pr_leases`, `…assess_pr`, and the gateway's [`ForgeReader`]: its own downstream,
//! read through the attachment's link (the PR's head never comes from the caller).

use super::plane::FleetControl;
use crate::gate::Call;
use crate::gate::workflow::{AsState, Forge, ForgeError, ForgeErrorKind, ForgeReader, forge_answer, read_pr, records};
use fleetgate_core::dialect::{PrTarget, Schemas};
use fleetgate_core::workflow::{self, Actor, LeaseTerms, Purpose, Refusal};
use fleetgate_core::{BlockerKind, Timestamp};
use fleetgate_gateway::DownstreamLink;
use fleetgate_gateway::rmcp::model::CallToolResult;
use fleetgate_store::{PrClaimOutcome, PrLeaseClaim, Store};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// The attachment's downstream as the forge the workflow reads.
pub struct LinkForge<'a>(pub &'a dyn DownstreamLink);

impl ForgeReader for LinkForge<'_> {
    fn read(&self, tool: &str, arguments: Map<String, Value>) -> Result<Value, ForgeError> {
        forge_answer(tool, &self.0.call_tool(tool, arguments)?)
    }
}

/// The reads the gateway made before deciding ([`ControlPlane::reads`]): a decision reads
/// its PR's head and base from these, never by waiting on the downstream. A read that was
/// not made is the forge not answering (the gate fails closed), never a read made now.
///
/// [`ControlPlane::reads`]: fleetgate_gateway::ControlPlane::reads
pub struct Prefetched<'a>(pub &'a [fleetgate_gateway::ReadAnswer]);

impl ForgeReader for Prefetched<'_> {
    fn read(&self, tool: &str, arguments: Map<String, Value>) -> Result<Value, ForgeError> {
        let made = self.0.iter().find(|a| a.read.tool == tool && a.read.arguments == arguments);
        let made = made.ok_or_else(|| {
            ForgeError::new(ForgeErrorKind::NotConfigured, format!("`{tool}` was not read before deciding"))
        })?;
        match &made.answer {
            Ok(result) => forge_answer(tool, result),
            Err(why) => Err(why.clone().into()),
        }
    }
}

/// A control tool's arguments about one PR or issue of a repository: the fields given, then
/// `owner` and `repo` (both defaulting to the roster's `[binding]`), written once for every
/// such tool. Unknown arguments are refused.
macro_rules! repository_args {
    ($(#[$doc:meta])* pub struct $name:ident { $($(#[$field_doc:meta])* pub $field:ident: $ty:ty,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Deserialize, JsonSchema)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            $($(#[$field_doc])* pub $field: $ty,)*
            /// Repository owner (default: the roster's `[binding]` org).
            #[serde(default)]
            pub owner: Option<String>,
            /// Repository name (default: the roster's `[binding]` repo).
            #[serde(default)]
            pub repo: Option<String>,
        }
    };
}

repository_args! {
    /// `…claim_pr_lease`'s arguments.
    pub struct ClaimArgs {
        /// The PR number.
        pub pr: u64,
        /// The head commit the lease is for: must be the PR's current head.
        pub head: String,
        /// `review` or `merge`.
        pub purpose: String,
    }
}

repository_args! {
    /// `…claim_issue_lease`'s arguments.
    pub struct IssueArgs {
        /// The issue number.
        pub issue: u64,
    }
}

/// `…release_pr_lease`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReleaseArgs {
    /// The lease.
    pub lease_id: String,
}

repository_args! {
    /// `…assess_pr`'s arguments.
    pub struct PrArgs {
        /// The PR number.
        pub pr: u64,
    }
}

/// A workflow refusal as a control tool answers it.
#[derive(Debug, Serialize)]
struct Refused<'a> {
    allowed: bool,
    blocker_kind: BlockerKind,
    blocked_reasons: &'a [String],
    operator_action: &'a str,
}

fn refused(r: &Refusal) -> CallToolResult {
    let body = Refused {
        allowed: false,
        blocker_kind: r.blocker_kind,
        blocked_reasons: &r.reasons,
        operator_action: &r.operator_action,
    };
    CallToolResult::structured_error(serde_json::to_value(body).unwrap_or_default())
}

fn target(plane: &FleetControl, pr: u64, owner: Option<String>, repo: Option<String>) -> Result<PrTarget, Refusal> {
    let binding = plane.config().binding.as_ref();
    let owner = owner.or_else(|| binding.map(|b| b.org.clone()));
    let repo = repo.or_else(|| binding.map(|b| b.repo.clone()));
    match (owner, repo) {
        (Some(owner), Some(repo)) => Ok(PrTarget { owner, repo, pr }),
        _ => Err(Refusal::of(
            BlockerKind::ForgeUnavailable,
            "name the repository (owner, repo) or give the roster a [binding]".into(),
        )),
    }
}

/// The forge as the workflow's control tools read it: the roster's dialect, through the
/// attachment's downstream.
fn forge_of<'a>(
    plane: &FleetControl,
    link: Option<&'a LinkForge<'a>>,
    schemas: &'a dyn Schemas,
) -> Result<Forge<'a>, Refusal> {
    let dialect = plane.config().dialect().ok_or_else(|| {
        Refusal::of(BlockerKind::ForgeUnavailable, "the PR workflow needs a forge dialect ([fleet] forge)".into())
    })?;
    Ok(Forge { dialect, schemas, reader: link.map(|l| l as &dyn ForgeReader) })
}

/// The downstream's tools as the gateway last listed them: the schemas the workflow's reads
/// are built from (a release that renamed a key is read by its own name).
pub struct Listed<'a>(pub &'a dyn Fn(&str) -> Option<fleetgate_gateway::rmcp::model::Tool>);

impl Schemas for Listed<'_> {
    fn schema(&self, tool: &str) -> Option<Map<String, Value>> {
        (self.0)(tool).map(|t| (*t.input_schema).clone())
    }
}

/// The worker of `attachment`, as the workflow knows it.
fn actor(plane: &FleetControl, attachment: fleetgate_gateway::AttachmentId) -> Result<Actor, Refusal> {
    let worker = plane.attachments().worker_of(attachment);
    let Some(attached) = &worker else {
        return Err(Refusal::of(
            BlockerKind::SessionAttachmentMissing,
            format!("no worker is attached to this gateway for {attachment}"),
        ));
    };
    let call = Call {
        member: &plane.identity().member,
        tool: "",
        read_only_hint: None,
        arguments: None,
        schema: None,
        caller: plane.caller(attachment, Some(attached)),
        forge: None,
        schemas: None,
    };
    plane.gate().actor(&call).map_err(|why| Refusal::of(BlockerKind::SessionAttachmentMissing, why.to_string()))
}

/// Does the holder still own its session (registered, active, fresh, same session)?
pub fn holder_alive(store: &dyn Store, holder: &Actor, now: Timestamp) -> bool {
    match store.get_worker(&holder.worker) {
        Ok(Some(row)) => row.ids.session_id == holder.session && fleetgate_core::worker::is_live(&row, now, true).live,
        _ => false,
    }
}

/// May this role claim a lease of `purpose`? Under a forge profile, when the rules let it
/// make the call that is that action (the merge, a review, opening a PR); else when rules
/// name the action, only the roles they allow it; with no rule naming it, any role.
fn role_may(plane: &FleetControl, purpose: Purpose) -> bool {
    // An issue lock is the author's: the role that opens PRs.
    let action = match purpose {
        Purpose::Author => crate::gate::workflow::ACTION_OPEN,
        other => other.as_str(),
    };
    let role = &plane.identity().member.role;
    if let Some(dialect) = plane.config().dialect()
        && let Some((tool, args)) = dialect.action_call(action)
    {
        // A rule of what the call does may permit some such calls (a merge onto some branch).
        return plane
            .config()
            .rules
            .decide(role, tool, Some(&args))
            .is_some_and(|d| d.permitted || d.undetermined.is_some());
    }
    let ruled: Vec<_> = plane.config().rules.rules().iter().filter(|r| r.action.as_deref() == Some(action)).collect();
    ruled.is_empty() || ruled.iter().any(|r| r.roles.iter().any(|x| x == "*" || x == role))
}

/// `…claim_pr_lease`.
pub fn claim(
    plane: &FleetControl,
    attachment: fleetgate_gateway::AttachmentId,
    link: Option<&dyn DownstreamLink>,
    schemas: &dyn Schemas,
    args: ClaimArgs,
) -> CallToolResult {
    let result = claim_inner(plane, attachment, link, schemas, args);
    let (allowed, kind, reasons) = match &result {
        Ok(lease) => (
            true,
            None,
            vec![format!(
                "{} lease {} on {} at head {}",
                lease.terms.purpose, lease.lease_id, lease.terms.pr, lease.terms.candidate_head
            )],
        ),
        Err(r) => (false, Some(r.blocker_kind), r.reasons.clone()),
    };
    plane.record_control(attachment, "claim_pr_lease", allowed, kind, reasons);
    match result {
        Ok(lease) => CallToolResult::structured(json!({ "allowed": true, "lease": lease })),
        Err(r) => refused(&r),
    }
}

fn claim_inner(
    plane: &FleetControl,
    attachment: fleetgate_gateway::AttachmentId,
    link: Option<&dyn DownstreamLink>,
    schemas: &dyn Schemas,
    args: ClaimArgs,
) -> Result<workflow::PrLease, Refusal> {
    let purpose = Purpose::parse(&args.purpose).filter(|p| *p != Purpose::Author).ok_or_else(|| {
        Refusal::of(
            BlockerKind::ReviewLeaseRequired,
            format!("purpose {:?} is neither review nor merge (an issue lock: claim_issue_lease)", args.purpose),
        )
    })?;
    if !role_may(plane, purpose) {
        return Err(Refusal::of(
            BlockerKind::RoleNotPermitted,
            format!(
                "role {} may not hold a {purpose} lease: no rule gives it the {purpose} action",
                plane.identity().member.role
            ),
        ));
    }
    let actor = actor(plane, attachment)?;
    let target = target(plane, args.pr, args.owner, args.repo)?;
    let link = link.map(LinkForge);
    let facts = read_pr(forge_of(plane, link.as_ref(), schemas)?, &target)
        .map_err(|e| Refusal::of(BlockerKind::ForgeUnavailable, e.message))?;
    let store = plane.gate().store();
    let key = facts.canonical(&target).key(&plane.config().workflow.remote);
    let held = records(&**store, &key)?;
    let now = plane.now();
    let alive = |a: &Actor| holder_alive(&**store, a, now);
    let plan = workflow::judge_claim(&held.state(), &actor, purpose, &args.head, &facts.head, now, &alive)?;
    let claim = PrLeaseClaim {
        terms: LeaseTerms {
            pr: key,
            purpose,
            holder: actor,
            candidate_head: facts.head.clone(),
            target_branch: facts.base_ref.clone(),
            target_branch_sha: facts.base_sha.clone(),
        },
        ttl_seconds: plane.config().workflow.lease_ttl_seconds,
        plan,
    };
    match store.claim_pr_lease(&claim, now) {
        Ok(PrClaimOutcome::Claimed(lease)) => Ok(lease),
        Ok(PrClaimOutcome::Held(other)) => Err(Refusal::of(
            BlockerKind::ReviewLeaseHeld,
            format!(
                "worker {} holds the {} lease {} at head {} until {}",
                other.terms.holder.worker,
                other.terms.purpose,
                other.lease_id,
                other.terms.candidate_head,
                other.expires_at
            ),
        )),
        Err(e) => Err(Refusal::of(BlockerKind::ForgeUnavailable, format!("the lease could not be recorded: {e}"))),
    }
}

/// `…claim_issue_lease`: an author's issue lock, a lease of purpose `author` on the issue's
/// number (TTL, renewal and takeover as for PR leases; one live lock per issue).
pub fn claim_issue(
    plane: &FleetControl,
    attachment: fleetgate_gateway::AttachmentId,
    args: IssueArgs,
) -> CallToolResult {
    let result = claim_issue_inner(plane, attachment, args);
    let (allowed, kind, reasons) = match &result {
        Ok(lease) => (true, None, vec![format!("issue lock {} on {}", lease.lease_id, lease.terms.pr)]),
        Err(r) => (false, Some(r.blocker_kind), r.reasons.clone()),
    };
    plane.record_control(attachment, "claim_issue_lease", allowed, kind, reasons);
    match result {
        Ok(lease) => CallToolResult::structured(json!({ "allowed": true, "lease": lease })),
        Err(r) => refused(&r),
    }
}

fn claim_issue_inner(
    plane: &FleetControl,
    attachment: fleetgate_gateway::AttachmentId,
    args: IssueArgs,
) -> Result<workflow::PrLease, Refusal> {
    if !role_may(plane, Purpose::Author) {
        return Err(Refusal::of(
            BlockerKind::RoleNotPermitted,
            format!("role {} may not hold an issue lock: only a role that opens PRs may", plane.identity().member.role),
        ));
    }
    let actor = actor(plane, attachment)?;
    let key = target(plane, args.issue, args.owner, args.repo)?.key(&plane.config().workflow.remote);
    let store = plane.gate().store();
    let held = records(&**store, &key)?;
    let now = plane.now();
    let alive = |a: &Actor| holder_alive(&**store, a, now);
    // An issue has no head: the lease names none.
    let plan = workflow::judge_claim(&held.state(), &actor, Purpose::Author, "", "", now, &alive)
        .map_err(|r| Refusal { blocker_kind: BlockerKind::IssueLockHeld, ..r })?;
    let claim = PrLeaseClaim {
        terms: LeaseTerms {
            pr: key,
            purpose: Purpose::Author,
            holder: actor,
            candidate_head: String::new(),
            target_branch: None,
            target_branch_sha: None,
        },
        ttl_seconds: plane.config().workflow.lease_ttl_seconds,
        plan,
    };
    match store.claim_pr_lease(&claim, now) {
        Ok(PrClaimOutcome::Claimed(lease)) => Ok(lease),
        Ok(PrClaimOutcome::Held(other)) => Err(Refusal::of(
            BlockerKind::IssueLockHeld,
            format!(
                "worker {} holds the issue lock {} until {}",
                other.terms.holder.worker, other.lease_id, other.expires_at
            ),
        )),
        Err(e) => Err(Refusal::of(BlockerKind::ForgeUnavailable, format!("the lock could not be recorded: {e}"))),
    }
}

/// `…release_pr_lease`: the holder releases its own lease.
pub fn release(plane: &FleetControl, attachment: fleetgate_gateway::AttachmentId, args: ReleaseArgs) -> CallToolResult {
    let actor = match actor(plane, attachment) {
        Ok(a) => a,
        Err(r) => return refused(&r),
    };
    let store = plane.gate().store();
    let outcome =
        store.release_pr_lease(&args.lease_id, Some(&actor.worker), workflow::released::BY_HOLDER, plane.now());
    let (allowed, reasons) = match &outcome {
        Ok(true) => (true, vec![format!("lease {} released", args.lease_id)]),
        Ok(false) => {
            (false, vec![format!("lease {} is not a live lease held by worker {}", args.lease_id, actor.worker)])
        }
        Err(e) => (false, vec![format!("the store cannot release lease {}: {e}", args.lease_id)]),
    };
    plane.record_control(
        attachment,
        "release_pr_lease",
        allowed,
        (!allowed).then_some(BlockerKind::ReviewLeaseRequired),
        reasons.clone(),
    );
    if allowed {
        CallToolResult::structured(json!({ "released": true, "lease_id": args.lease_id }))
    } else {
        refused(&Refusal::of(BlockerKind::ReviewLeaseRequired, reasons.join("; ")))
    }
}

/// `…list_pr_leases`: live leases of the fleet.
pub fn list(plane: &FleetControl) -> CallToolResult {
    match plane.gate().store().list_pr_leases(true, plane.now()) {
        Ok(leases) => CallToolResult::structured(json!({ "leases": leases })),
        Err(e) => CallToolResult::structured_error(json!({ "error": format!("the leases cannot be read: {e}") })),
    }
}

/// `…assess_pr`: leases, decisions, the forge's head and what a merge would need.
pub fn assess(
    plane: &FleetControl,
    link: Option<&dyn DownstreamLink>,
    schemas: &dyn Schemas,
    args: PrArgs,
) -> CallToolResult {
    let inner = || -> Result<Value, Refusal> {
        let target = target(plane, args.pr, args.owner, args.repo)?;
        let link = link.map(LinkForge);
        let facts = read_pr(forge_of(plane, link.as_ref(), schemas)?, &target)
            .map_err(|e| Refusal::of(BlockerKind::ForgeUnavailable, e.message))?;
        let key = facts.canonical(&target).key(&plane.config().workflow.remote);
        let held = records(&**plane.gate().store(), &key)?;
        let independence = plane.config().workflow.independent_review;
        let a = workflow::assess(key, &held.state(), facts.at(), independence, plane.now());
        let mut v = serde_json::to_value(a).unwrap_or_default();
        // `state` is the PR's canonical state (computed); the forge's own `open`/`closed`,
        // which `state` carried before, is `forge_state`.
        v["forge_state"] = json!(facts.state);
        v["merged"] = json!(facts.merged);
        v["target_branch"] = json!(facts.base_ref);
        Ok(v)
    };
    match inner() {
        Ok(v) => CallToolResult::structured(v),
        Err(r) => refused(&r),
    }
}
