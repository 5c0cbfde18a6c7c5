//! The pull-request workflow at the gate (SPEC §10): a call whose rule carries a workflow
//! action (`review`, `merge`) is judged, after the fleet conditions, by the pure
//! `fleetgate_core::workflow` from what the store holds for the PR and the head the forge
//! reports *now* — read through the downstream's own read tool ([`ForgeReader`]), never
//! taken from the caller. A forge that cannot answer fails closed (`forge_unavailable`).
//! For a real call the holder's lease is touched; [`Gate::settle`](super::Gate::settle)
//! records what the forwarded answer settles.

use fleetgate_core::forge_workflow::{
    MERGE_HEAD_KEY, PrFacts, PrTarget, REVIEW_COMMIT_KEY, head_read, pr_facts, pr_target, review_verdict,
};
use fleetgate_core::workflow::{self, Actor, PrRef, PrState, Refusal};
use fleetgate_core::{BlockerKind, Timestamp};
use fleetgate_store::{PrRecords, Store};
use serde_json::{Map, Value};

/// The workflow action of a merge (`[[rules]] action`).
pub const ACTION_MERGE: &str = fleetgate_core::forge::ACTION_MERGE;
/// The workflow action of a review decision.
pub const ACTION_REVIEW: &str = fleetgate_core::forge::ACTION_REVIEW;
/// The workflow action of opening a PR (its creator is recorded for independence).
pub const ACTION_OPEN: &str = fleetgate_core::forge::ACTION_OPEN;
/// The workflow action of a file write (its pusher is recorded for independence).
pub const ACTION_PUSH: &str = fleetgate_core::forge::ACTION_PUSH;

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

/// What the gate judged of an allowed workflow call: the arguments it pins in the
/// forwarded call (the merge's `head_commit_id`, a review's `commit_id`: the head it
/// judged, so the forge itself refuses if the head moved), and what it judged, in words,
/// for the audit log.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Judged {
    /// Arguments set in the forwarded call.
    pub pins: Map<String, Value>,
    /// "judged merge of forge/org/repo#12 at head 1a38ef95aaaa onto main", when it judged a PR.
    pub note: Option<String>,
}

fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

fn note(what: &str, key: &PrRef, facts: &PrFacts) -> String {
    let base = facts.base_ref.as_deref().map(|b| format!(" onto {b}")).unwrap_or_default();
    format!("judged {what} of {key} at head {}{base}", short(&facts.head))
}

/// The PR a workflow call's judgement reads from the forge, when it reads one: a merge's, a
/// review decision's, a review `create`'s (pinned to the head). The gateway makes that read
/// before deciding ([`reads`]).
fn pr_to_read(action: &str, args: &Map<String, Value>) -> Option<PrTarget> {
    let method = args.get("method").and_then(Value::as_str).unwrap_or("");
    let reads = match action {
        ACTION_MERGE => true,
        ACTION_REVIEW => review_verdict(args).is_some() || method == "create",
        _ => false,
    };
    reads.then(|| pr_target(args)).flatten()
}

/// The forge reads [`judge`] will make for a call of `action` with these (canonical)
/// arguments: the tool and its arguments.
pub fn reads(action: &str, args: &Map<String, Value>) -> Vec<(&'static str, Map<String, Value>)> {
    pr_to_read(action, args).map(|target| head_read(&target)).into_iter().collect()
}

/// Judge a workflow call (its canonical arguments). `Ok` when the action needs nothing of
/// the workflow (a comment, an action this gate does not know) or its conditions hold.
pub fn judge(
    store: &dyn Store,
    forge: Option<&dyn ForgeReader>,
    call: &WorkflowCall<'_>,
    now: Timestamp,
) -> Result<Judged, Refusal> {
    let empty = Map::new();
    let args = call.arguments.unwrap_or(&empty);
    let method = args.get("method").and_then(Value::as_str).unwrap_or("");
    let verdict = match call.action {
        ACTION_REVIEW => review_verdict(args),
        ACTION_MERGE => None,
        _ => return Ok(Judged::default()),
    };
    // A review that submits no verdict needs no lease; a `create` is still pinned to the
    // head it is made at, so a pending review submitted later is at that head.
    let pin_only = call.action == ACTION_REVIEW && verdict.is_none();
    if pin_only && method != "create" {
        return Ok(Judged::default());
    }
    let Some(target) = pr_target(args) else {
        if pin_only {
            return Ok(Judged::default());
        }
        let kind = if verdict.is_some() { BlockerKind::ReviewLeaseRequired } else { BlockerKind::ApprovalRequired };
        return Err(Refusal::of(kind, "the call names no pull request (owner, repo and pull_number)".into()));
    };
    let facts = read_pr(forge, &target).map_err(|e| Refusal::of(BlockerKind::ForgeUnavailable, e))?;
    let key = target.key(call.remote);
    let mut pins = Map::new();
    if call.action == ACTION_REVIEW {
        if let Some(sent) = args.get(REVIEW_COMMIT_KEY).and_then(Value::as_str).filter(|c| *c != facts.head) {
            return Err(Refusal::of(
                BlockerKind::StaleHead,
                format!("the review names commit {sent} but the PR's head is {}", facts.head),
            ));
        }
        if method == "create" {
            pins.insert(REVIEW_COMMIT_KEY.into(), Value::from(facts.head.clone()));
        }
    } else if let Some(sent) = args.get(MERGE_HEAD_KEY).and_then(Value::as_str).filter(|h| *h != facts.head) {
        return Err(Refusal::of(
            BlockerKind::StaleHead,
            format!("the call expects head {sent} but the PR's head is {}", facts.head),
        ));
    }
    let what = format!("{} ({method})", call.action);
    if pin_only {
        return Ok(Judged { pins, note: Some(note(&what, &key, &facts)) });
    }
    let held = records(store, &key)?;
    let state = held.state();
    let judged = match verdict {
        Some(verdict) => workflow::judge_review(&state, call.actor, &facts.head, verdict, now).map(drop),
        None => {
            let base = facts.base_ref.as_deref();
            workflow::judge_merge(&state, call.actor, &facts.head, base, call.independence, now).map(drop)
        }
    };
    match judged {
        Ok(()) => {
            if call.action == ACTION_MERGE {
                pins.insert(MERGE_HEAD_KEY.into(), Value::from(facts.head.clone()));
            }
            Ok(Judged { pins, note: Some(note(&what, &key, &facts)) })
        }
        Err(mut refusal) => {
            refusal.reasons.push(note(&what, &key, &facts));
            Err(refusal)
        }
    }
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
            // The decision is pinned to the head the gate judged it at (the lease's), and to
            // the base the lease was claimed for, else the one the forge reports.
            let key = target.key(call.remote);
            let held = store.pr_records(&key).map_err(|e| e.to_string())?;
            let (head, base) =
                match workflow::held_by(&held.state(), workflow::Purpose::Review, &call.actor.worker, now) {
                    Some(lease) if lease.target_branch.is_some() => {
                        (lease.candidate_head.clone(), lease.target_branch.clone())
                    }
                    Some(lease) => (lease.candidate_head.clone(), read_pr(forge, &target)?.base_ref),
                    None => {
                        let facts = read_pr(forge, &target)?;
                        (facts.head, facts.base_ref)
                    }
                };
            let decision =
                workflow::PrDecision { pr: key, head, base, verdict, by: call.actor.clone(), at: now, cleared: None };
            store.record_pr_decision(&decision).map_err(|e| e.to_string())
        }
        ACTION_PUSH => {
            // The write's answer names no commit: the branch's tip, read right after, is it.
            let text = |k: &str| args.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
            let (Some(owner), Some(repo)) = (text("owner"), text("repo")) else { return Ok(()) };
            let Some(branch) = text("new_branch_name").or_else(|| text("branch_name")) else { return Ok(()) };
            let forge = forge.ok_or("no forge to read the pushed branch from")?;
            let mut read = Map::new();
            read.insert("owner".into(), Value::from(owner));
            read.insert("repo".into(), Value::from(repo));
            read.insert("sha".into(), Value::from(branch));
            let tip = forge.read("get_commit", read)?;
            let head = tip.get("sha").and_then(Value::as_str).ok_or("the forge named no commit for the branch")?;
            let binding = PrTarget { owner: owner.to_owned(), repo: repo.to_owned(), pr: 0 }.key(call.remote).binding;
            let push = workflow::PrPush {
                binding,
                branch: branch.to_owned(),
                head: head.to_owned(),
                by: call.actor.clone(),
                at: now,
            };
            store.record_pr_push(&push).map_err(|e| e.to_string())
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

/// [`PrRecords`] as the pure functions take it.
pub trait AsState {
    /// Borrowed.
    fn state(&self) -> PrState<'_>;
}

impl AsState for PrRecords {
    fn state(&self) -> PrState<'_> {
        PrState { leases: &self.leases, decisions: &self.decisions, origin: self.origin.as_ref(), pushes: &self.pushes }
    }
}
