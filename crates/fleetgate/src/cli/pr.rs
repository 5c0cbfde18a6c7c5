//! `fleetgate pr list|show|release|locks|release-lock|clear-decision`: the PR workflow's
//! leases, locks and decisions for the operator. `show` and `release --stale` read the forge through
//! `[workflow] forge_command`; the rest needs only the store.

use crate::cli::args::PrCommand;
use crate::cli::context::Ctx;
use crate::cli::output::{Exit, Reply, table};
use anyhow::anyhow;
use fleetgate_control::gate::CommandForge;
use fleetgate_control::gate::workflow::{AsState, Forge, ForgeReader, read_pr};
use fleetgate_core::audit::AuditEntry;
use fleetgate_core::dialect::{PrTarget, Unlisted};
use fleetgate_core::workflow::{self, PrLease, PrRef};
use serde_json::json;

/// `fleetgate pr …`.
pub fn pr(ctx: &Ctx, cmd: &PrCommand) -> anyhow::Result<Reply> {
    match cmd {
        PrCommand::List { all } => list(ctx, !*all),
        PrCommand::Show { pr, owner, repo } => show(ctx, *pr, owner.as_deref(), repo.as_deref()),
        PrCommand::Release { lease_id: Some(id), reason, stale: false } => {
            release(ctx, id, reason.as_deref().unwrap_or("released by an operator"))
        }
        PrCommand::Release { lease_id: None, stale: true, .. } => release_stale(ctx),
        PrCommand::Release { .. } => Err(anyhow!("give either a LEASE_ID or --stale")),
        PrCommand::Locks { all } => locks(ctx, !*all),
        PrCommand::ReleaseLock { lock_id, reason } => {
            release_lock(ctx, lock_id, reason.as_deref().unwrap_or("released by an operator"))
        }
        PrCommand::ClearDecision { pr, worker, reason, owner, repo } => {
            let reason = reason.as_deref().unwrap_or("cleared by an operator");
            clear_decision(ctx, *pr, worker, reason, owner.as_deref(), repo.as_deref())
        }
    }
}

/// The review-decision locks.
fn locks(ctx: &Ctx, live_only: bool) -> anyhow::Result<Reply> {
    let locks = ctx.store()?.list_review_locks(live_only)?;
    let rows: Vec<Vec<String>> = locks
        .iter()
        .map(|l| {
            vec![
                l.lock_id.clone(),
                l.pr.to_string(),
                l.holder.session.clone(),
                l.holder.profile.clone(),
                l.verdict.as_str().to_owned(),
                l.head.get(..12).unwrap_or(&l.head).to_owned(),
                l.phase.as_str().to_owned(),
                l.released_reason.clone().unwrap_or_default(),
            ]
        })
        .collect();
    let headers = ["LOCK", "PR", "SESSION", "PROFILE", "DECISION", "HEAD", "PHASE", "RELEASED"];
    let text = if locks.is_empty() { "no review-decision locks".to_owned() } else { table(&headers, &rows) };
    Ok(Reply { value: json!({ "locks": locks }), text, exit: Exit::Ok })
}

/// Release a lock whose PR the forge reports merged or closed (a PR merged or closed
/// outside the fleet leaves its locks live); audited. Refused (exit 3) while the forge says
/// the PR is open, or cannot say.
fn release_lock(ctx: &Ctx, lock_id: &str, reason: &str) -> anyhow::Result<Reply> {
    let store = ctx.store()?;
    let lock = store.list_review_locks(true)?.into_iter().find(|l| l.lock_id == lock_id);
    let lock = lock.ok_or_else(|| anyhow!("lock {lock_id} is not a live review-decision lock"))?;
    let forge = CommandForge::new(&ctx.config, &ctx.env)
        .ok_or_else(|| anyhow!("release-lock reads the forge: set [workflow] forge_command in the roster"))?;
    let target = PrTarget::from_key(&lock.pr, &ctx.config.workflow.remote)
        .ok_or_else(|| anyhow!("{} is not a PR of this fleet's forge remote", lock.pr))?;
    let refuse = |why: String| Reply {
        value: json!({ "released": false, "lock_id": lock_id, "pr": lock.pr, "why": why }),
        text: format!("lock {lock_id} kept: {why}"),
        exit: Exit::No,
    };
    let how = match read_pr(forge_of(ctx, Some(&forge))?, &target) {
        Ok(f) if f.merged => "merged",
        Ok(f) if f.is_done() => "closed",
        Ok(_) => {
            return Ok(refuse(format!(
                "the forge says {} is open: the lock ends when it is merged or closed",
                lock.pr
            )));
        }
        Err(why) => return Ok(refuse(format!("the forge cannot say whether {} is done: {why}", lock.pr))),
    };
    let now = ctx.now();
    let why = format!("{reason} ({} {how})", lock.pr);
    let released = store.release_review_lock(lock_id, &why, now)?;
    let Some(released) = released else { return Err(anyhow!("lock {lock_id} is no longer live")) };
    let event = format!(
        "lock {lock_id} on {} released by an operator: {why}; holder worker {} ({}, session {})",
        lock.pr, lock.holder.worker, lock.holder.profile, lock.holder.session
    );
    store.append_audit(&AuditEntry::event(now, "operator", fleetgate_control::gate::workflow::LOCK_EVENT, event))?;

    Ok(Reply {
        value: json!({ "released": true, "lock": released }),
        text: format!("released lock {lock_id} on {}: {why}", lock.pr),
        exit: Exit::Ok,
    })
}

/// Clear `worker`'s standing decisions on the PR, and audit it. Exit 3 when there were none.
fn clear_decision(
    ctx: &Ctx,
    pr: u64,
    worker: &str,
    reason: &str,
    owner: Option<&str>,
    repo: Option<&str>,
) -> anyhow::Result<Reply> {
    let key = target(ctx, pr, owner, repo)?.key(&ctx.config.workflow.remote);
    let store = ctx.store()?;
    let now = ctx.now();
    let why = format!("cleared by an operator at {now}: {reason}");
    let cleared = store.clear_pr_decisions(&key, worker, &why)?;
    let event = format!("cleared {cleared} decision(s) of worker {worker} on {key}: {reason}");
    store.append_audit(&AuditEntry::event(now, "operator", "pr clear-decision", event))?;

    let exit = if cleared == 0 { Exit::No } else { Exit::Ok };
    Ok(Reply {
        value: json!({ "pr": key, "worker": worker, "cleared": cleared, "reason": reason }),
        text: format!("cleared {cleared} decision(s) of worker {worker} on {key}: {reason}"),
        exit,
    })
}

fn rows(leases: &[PrLease], now: fleetgate_core::Timestamp) -> Vec<Vec<String>> {
    leases
        .iter()
        .map(|l| {
            vec![
                l.lease_id.clone(),
                l.terms.pr.to_string(),
                l.terms.purpose.to_string(),
                l.terms.holder.worker.clone(),
                l.terms.candidate_head.get(..12).unwrap_or(&l.terms.candidate_head).to_owned(),
                l.phase_at(now).as_str().to_owned(),
                l.expires_at.to_string(),
            ]
        })
        .collect()
}

const HEADERS: [&str; 7] = ["LEASE", "PR", "PURPOSE", "HOLDER", "HEAD", "PHASE", "EXPIRES"];

fn list(ctx: &Ctx, live_only: bool) -> anyhow::Result<Reply> {
    let now = ctx.now();
    let leases = ctx.store()?.list_pr_leases(live_only, now)?;
    let text = if leases.is_empty() { "no PR leases".to_owned() } else { table(&HEADERS, &rows(&leases, now)) };
    Ok(Reply { value: json!({ "leases": leases }), text, exit: Exit::Ok })
}

fn target(ctx: &Ctx, pr: u64, owner: Option<&str>, repo: Option<&str>) -> anyhow::Result<PrTarget> {
    let binding = ctx.config.binding.as_ref();
    let owner = owner.map(str::to_owned).or_else(|| binding.map(|b| b.org.clone()));
    let repo = repo.map(str::to_owned).or_else(|| binding.map(|b| b.repo.clone()));
    match (owner, repo) {
        (Some(owner), Some(repo)) => Ok(PrTarget { owner, repo, pr }),
        _ => Err(anyhow!("name the repository with --owner and --repo, or give the roster a [binding]")),
    }
}

/// The forge as the CLI reads it: the roster's dialect, through its forge command.
fn forge_of<'a>(ctx: &Ctx, reader: Option<&'a dyn ForgeReader>) -> anyhow::Result<Forge<'a>> {
    let dialect = ctx
        .config
        .dialect()
        .ok_or_else(|| anyhow!("the PR workflow reads the forge through a dialect: set [fleet] forge in the roster"))?;
    Ok(Forge { dialect, schemas: &Unlisted, reader })
}

fn show(ctx: &Ctx, pr: u64, owner: Option<&str>, repo: Option<&str>) -> anyhow::Result<Reply> {
    let target = target(ctx, pr, owner, repo)?;
    let forge = CommandForge::new(&ctx.config, &ctx.env);
    let facts = read_pr(forge_of(ctx, forge.as_ref().map(|f| f as &dyn ForgeReader))?, &target);
    // The PR as the forge names its repository, when it answered.
    let named = facts.as_ref().map_or_else(|_| target.clone(), |f| f.canonical(&target));
    let key = named.key(&ctx.config.workflow.remote);
    let held = ctx.store()?.pr_records(&key)?;
    let now = ctx.now();
    let independence = ctx.config.workflow.independent_review;
    let (value, head_line) = match &facts {
        Ok(f) => {
            let a = workflow::assess(key.clone(), &held.state(), f.at(), independence, now);
            let mut line = format!(
                "{}: {} is next — {} (review: {})",
                a.status.state, a.status.who_is_next, a.status.next_action, a.status.review_status
            );
            if !a.status.blockers.is_empty() {
                line.push_str(&format!("\nblockers: {}", a.status.blockers.join("; ")));
            }
            (serde_json::to_value(&a)?, line)
        }
        Err(why) => (
            json!({ "pr": key, "leases": held.leases, "decisions": held.decisions, "origin": held.origin,
                    "current_head": null, "forge_error": why.message }),
            format!("head unknown: {why}"),
        ),
    };
    let decisions: Vec<Vec<String>> = held
        .decisions
        .iter()
        .map(|d| {
            let verdict = if d.cleared.is_some() {
                format!("{} (cleared)", d.verdict.as_str())
            } else {
                d.verdict.as_str().into()
            };
            let base = d.base.clone().unwrap_or_else(|| "-".into());
            vec![d.at.to_string(), verdict, d.head.clone(), base, d.by.worker.clone(), d.by.session.clone()]
        })
        .collect();
    let mut text = vec![format!("{key}"), head_line];
    if !held.leases.is_empty() {
        text.push(table(&HEADERS, &rows(&held.leases, now)));
    }
    if !decisions.is_empty() {
        text.push(table(&["AT", "VERDICT", "HEAD", "BASE", "WORKER", "SESSION"], &decisions));
    }
    Ok(Reply { value, text: text.join("\n"), exit: Exit::Ok })
}

fn release(ctx: &Ctx, lease_id: &str, reason: &str) -> anyhow::Result<Reply> {
    let released = ctx.store()?.release_pr_lease(lease_id, None, reason, ctx.now())?;
    if !released {
        return Err(anyhow!("lease {lease_id} is not a claimed lease"));
    }
    Ok(Reply {
        value: json!({ "released": [lease_id], "reason": reason }),
        text: format!("released {lease_id}: {reason}"),
        exit: Exit::Ok,
    })
}

/// Release live leases whose PR the forge reports merged or closed; a PR the forge cannot
/// answer for keeps its leases (and is named).
fn release_stale(ctx: &Ctx) -> anyhow::Result<Reply> {
    let forge = CommandForge::new(&ctx.config, &ctx.env)
        .ok_or_else(|| anyhow!("--stale reads the forge: set [workflow] forge_command in the roster"))?;
    let store = ctx.store()?;
    let now = ctx.now();
    let leases = store.list_pr_leases(true, now)?;
    let mut prs: Vec<&PrRef> = leases.iter().map(|l| &l.terms.pr).collect();
    prs.sort();
    prs.dedup();
    let (mut released, mut kept) = (Vec::new(), Vec::new());
    for key in prs {
        let Some(target) = PrTarget::from_key(key, &ctx.config.workflow.remote) else {
            kept.push(json!({ "pr": key, "why": "not a PR of this fleet's forge remote" }));
            continue;
        };
        match read_pr(forge_of(ctx, Some(&forge))?, &target) {
            Ok(f) if f.is_done() => {
                let reason = if f.merged { "stale: merged" } else { "stale: closed" };
                for lease in leases.iter().filter(|l| &l.terms.pr == key) {
                    if store.release_pr_lease(&lease.lease_id, None, reason, now)? {
                        released.push(lease.lease_id.clone());
                    }
                }
            }
            Ok(_) => {}
            Err(why) => kept.push(json!({ "pr": key, "why": why.message })),
        }
    }
    let text =
        format!("released {} stale lease(s); {} PR(s) the forge could not answer for", released.len(), kept.len());
    let exit = if kept.is_empty() { Exit::Ok } else { Exit::No };
    Ok(Reply { value: json!({ "released": released, "unanswered": kept }), text, exit })
}
