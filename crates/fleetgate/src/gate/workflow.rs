//! The pull-request workflow at the gate (SPEC §10): a call whose rule carries a workflow
//! action (`review`, `merge`) is judged, after the fleet conditions, by the pure
//! `fleetgate_core::workflow` from what the store holds for the PR and the head the forge
//! reports *now* — read through the downstream's own read tool ([`ForgeReader`]), never
//! taken from the caller. A forge that cannot answer fails closed (`forge_unavailable`).
//! For a real call the holder's lease is touched; [`Gate::settle`](super::Gate::settle)
//! records what the forwarded answer settles.

use fleetgate_core::forge_workflow::{PrFacts, PrTarget, head_read, pr_facts, pr_target, review_verdict};
use fleetgate_core::workflow::{self, Actor, PrRef, PrState, Refusal, ReviewVerdict};
use fleetgate_core::{BlockerKind, Timestamp};
use fleetgate_store::{PrRecords, Store};
use serde_json::{Map, Value};

/// The workflow action of a merge (`[[rules]] action`).
pub const ACTION_MERGE: &str = fleetgate_core::forge::ACTION_MERGE;
/// The workflow action of a review decision.
pub const ACTION_REVIEW: &str = fleetgate_core::forge::ACTION_REVIEW;
/// The workflow action of opening a PR (its creator is recorded for independence).
pub const ACTION_OPEN: &str = fleetgate_core::forge::ACTION_OPEN;

/// Where the gate reads a PR's current state: the downstream's own read tool.
pub trait ForgeReader {
    /// Call the forge's read tool `tool` with `arguments`; its answer as JSON.
    fn read(&self, tool: &str, arguments: Map<String, Value>) -> Result<Value, String>;
}

/// The PR's state as the forge reports it now.
pub fn read_pr(forge: Option<&dyn ForgeReader>, target: &PrTarget) -> Result<PrFacts, String> {
    let forge = forge.ok_or_else(|| {
        "no forge to read the PR's head from (a gateway reads through its downstream; the CLI needs [workflow] forge_command)"
            .to_owned()
    })?;
    let (tool, arguments) = head_read(target);
    let answer = forge.read(tool, arguments).map_err(|e| format!("reading PR #{} from the forge: {e}", target.pr))?;
    pr_facts(&answer).map_err(|e| format!("reading PR #{} from the forge: {e}", target.pr))
}

/// The JSON a tool result carries: its structured content, else its first text block that
/// parses as JSON.
pub fn answer_json(result: &fleetgate_gateway::rmcp::model::CallToolResult) -> Option<Value> {
    if let Some(structured) = &result.structured_content {
        return Some(structured.clone());
    }
    result.content.iter().filter_map(|c| c.as_text()).find_map(|t| serde_json::from_str(&t.text).ok())
}

/// A forge read's answer as JSON: an error result, or one that carries no JSON, is the
/// read failing, with the forge's own words.
pub fn forge_answer(tool: &str, result: &fleetgate_gateway::rmcp::model::CallToolResult) -> Result<Value, String> {
    let text =
        || result.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect::<Vec<_>>().join(" ");
    if result.is_error == Some(true) {
        return Err(format!("`{tool}` answered an error: {}", text()));
    }
    answer_json(result).ok_or_else(|| format!("`{tool}` answered no JSON: {}", text()))
}

/// What the workflow needs of one call.
#[derive(Debug)]
pub struct WorkflowCall<'a> {
    /// The rule's action.
    pub action: &'a str,
    /// The call's arguments.
    pub arguments: Option<&'a Map<String, Value>>,
    /// Who makes it.
    pub actor: &'a Actor,
    /// The fleet's forge remote (the first part of PR keys).
    pub remote: &'a str,
    /// Which approvals count.
    pub independence: workflow::Independence,
}

/// What the store holds for `pr`, as the pure functions take it.
pub fn records(store: &dyn Store, pr: &PrRef) -> Result<PrRecords, Refusal> {
    store.pr_records(pr).map_err(|e| {
        Refusal::of(BlockerKind::ForgeUnavailable, format!("the workflow records of {pr} cannot be read: {e}"))
    })
}

/// Judge a workflow call. `Ok` when the action needs nothing of the workflow (a comment, an
/// action this gate does not know) or its conditions hold.
pub fn judge(
    store: &dyn Store,
    forge: Option<&dyn ForgeReader>,
    call: &WorkflowCall<'_>,
    now: Timestamp,
) -> Result<(), Refusal> {
    let empty = Map::new();
    let args = call.arguments.unwrap_or(&empty);
    let verdict = match call.action {
        ACTION_REVIEW => match review_verdict(args) {
            Some(v) => Some(v),
            None => return Ok(()),
        },
        ACTION_MERGE => None,
        _ => return Ok(()),
    };
    let Some(target) = pr_target(args) else {
        let kind = if verdict.is_some() { BlockerKind::ReviewLeaseRequired } else { BlockerKind::ApprovalRequired };
        return Err(Refusal::of(kind, "the call names no pull request (owner, repo and pull_number)".into()));
    };
    let facts = read_pr(forge, &target).map_err(|e| Refusal::of(BlockerKind::ForgeUnavailable, e))?;
    let key = target.key(call.remote);
    if let Some(expected) = fleetgate_core::forge_workflow::expected_head(args).filter(|h| *h != facts.head) {
        return Err(Refusal::of(
            BlockerKind::StaleHead,
            format!("the call expects head {expected} but the PR's head is {}", facts.head),
        ));
    }
    let held = records(store, &key)?;
    let state = held.state();
    match verdict {
        Some(verdict) => workflow::judge_review(&state, call.actor, &facts.head, verdict, now)?,
        None => workflow::judge_merge(&state, call.actor, &facts.head, call.independence, now)?,
    };
    Ok(())
}

/// After a forwarded call the downstream accepted: record the decision at the head it was
/// made at, the creator of an opened PR, or a merge's released leases. Best effort: a
/// failure is logged (the call itself already happened).
pub fn settle(
    store: &dyn Store,
    forge: Option<&dyn ForgeReader>,
    call: &WorkflowCall<'_>,
    answer: Option<&Value>,
    now: Timestamp,
) -> Result<(), String> {
    let empty = Map::new();
    let args = call.arguments.unwrap_or(&empty);
    match call.action {
        ACTION_OPEN => {
            let (Some(owner), Some(repo)) =
                (args.get("owner").and_then(Value::as_str), args.get("repo").and_then(Value::as_str))
            else {
                return Ok(());
            };
            let Some(pr) = answer.and_then(fleetgate_core::forge_workflow::created_pr) else { return Ok(()) };
            let target = PrTarget { owner: owner.to_owned(), repo: repo.to_owned(), pr };
            let origin = workflow::PrOrigin { pr: target.key(call.remote), by: call.actor.clone(), at: now };
            store.record_pr_origin(&origin).map_err(|e| e.to_string())
        }
        ACTION_REVIEW => {
            let (Some(verdict), Some(target)) = (review_verdict(args), pr_target(args)) else { return Ok(()) };
            // The decision is pinned to the head the gate judged it at: the lease's.
            let key = target.key(call.remote);
            let held = store.pr_records(&key).map_err(|e| e.to_string())?;
            let head = match workflow::held_by(&held.state(), workflow::Purpose::Review, &call.actor.worker, now) {
                Some(lease) => lease.candidate_head.clone(),
                None => read_pr(forge, &target)?.head,
            };
            record_decision(store, key, head, verdict, call.actor, now)
        }
        ACTION_MERGE => {
            let Some(target) = pr_target(args) else { return Ok(()) };
            store
                .release_pr_leases(&target.key(call.remote), workflow::released::MERGED, now)
                .map(drop)
                .map_err(|e| e.to_string())
        }
        _ => Ok(()),
    }
}

fn record_decision(
    store: &dyn Store,
    pr: PrRef,
    head: String,
    verdict: ReviewVerdict,
    by: &Actor,
    at: Timestamp,
) -> Result<(), String> {
    store.record_pr_decision(&workflow::PrDecision { pr, head, verdict, by: by.clone(), at }).map_err(|e| e.to_string())
}

/// [`PrRecords`] as the pure functions take it.
pub trait AsState {
    /// Borrowed.
    fn state(&self) -> PrState<'_>;
}

impl AsState for PrRecords {
    fn state(&self) -> PrState<'_> {
        PrState { leases: &self.leases, decisions: &self.decisions, origin: self.origin.as_ref() }
    }
}
