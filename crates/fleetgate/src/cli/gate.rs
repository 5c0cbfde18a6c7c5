//! `fleetgate env …`, `fleetgate capability` and `fleetgate audit`: the
//! environment gate, the mutation gate evaluated live, and its record.

use crate::cli::args::EnvCommand;
use crate::cli::context::Ctx;
use crate::cli::output::{Exit, Reply, parse_flag, table};
use crate::observe::snapshot;
use crate::provenance::assess_provenance;
use anyhow::anyhow;
use fleetgate_core::capability::{CapabilityInput, Evidence, classify_tool, resolve_task_capability};
use fleetgate_core::env::{DECLARED, EnvSnapshot, KeyName, key_name, recognized_keys, unconsumed_env_overrides};
use fleetgate_core::provenance::{Ownership, Provenance};
use fleetgate_core::{BlockerKind, Timestamp};
use fleetgate_host::probe::probe_pid;
use fleetgate_host::procfs::{ProcFs, ProcessSource};
use serde_json::json;

/// `fleetgate env check|keys`.
pub fn env(ctx: &Ctx, cmd: &EnvCommand) -> anyhow::Result<Reply> {
    let prefix = &ctx.config.env_prefix;
    match cmd {
        EnvCommand::Check => {
            let found = unconsumed_env_overrides(&ctx.env, prefix, &ctx.config.pass_through_env);
            let supported = found.is_empty();
            let text = if supported {
                format!("no unsupported {prefix}* overrides")
            } else {
                fleetgate_core::diagnostics::unsupported_env_message(prefix, &found)
            };
            let value = json!({
                "env_prefix": prefix,
                "supported": supported,
                "unsupported": found,
                "recognized_keys": recognized_keys(prefix, &ctx.config.pass_through_env),
            });
            Ok(Reply { value, text, exit: if supported { Exit::Ok } else { Exit::No } })
        }
        EnvCommand::Keys => {
            let keys: Vec<serde_json::Value> = DECLARED
                .iter()
                .map(|s| {
                    json!({
                        "key": key_name(s.key, prefix),
                        "fleet_prefixed": matches!(s.name, KeyName::Prefixed(_)),
                        "meaning": s.meaning,
                        "secret": s.secret,
                    })
                })
                .chain(ctx.config.pass_through_env.iter().map(|k| {
                    json!({ "key": k, "fleet_prefixed": true, "meaning": "downstream pass-through (config)", "secret": fleetgate_core::env::looks_secret(k) })
                }))
                .collect();
            let cells: Vec<Vec<String>> = keys
                .iter()
                .map(|k| vec![k["key"].as_str().unwrap_or("").into(), k["meaning"].as_str().unwrap_or("").into()])
                .collect();
            Ok(Reply { value: json!({ "keys": keys }), text: table(&["KEY", "MEANING"], &cells), exit: Exit::Ok })
        }
    }
}

/// `fleetgate capability`: the resolver the gateway uses, with live inputs.
pub fn capability(
    ctx: &Ctx,
    profile: &str,
    tool: &str,
    worker: Option<&str>,
    read_only_hint: bool,
) -> anyhow::Result<Reply> {
    let member = ctx
        .config
        .member(profile)
        .ok_or_else(|| anyhow!("profile {profile:?} is not in the roster ({})", ctx.config.source))?
        .clone();
    let store = ctx.store()?;
    let now = ctx.now();
    let snap = snapshot(&ctx.config, Ok(&*store), now, Some(&member.namespace));
    let provenance = match worker {
        None => Provenance {
            session_ownership: Ownership::Unowned,
            blocker_kind: Some(BlockerKind::SessionAttachmentMissing),
            reasons: vec!["no --worker was given: no live worker owns a session here".into()],
            heartbeat_age_seconds: None,
        },
        Some(id) => worker_provenance(ctx, &*store, id, now)?,
    };
    let class = classify_tool(tool, read_only_hint.then_some(true), &ctx.config.tools);
    let verdict = resolve_task_capability(&CapabilityInput {
        profile,
        role: &member.role,
        tool,
        class,
        role_permitted: ctx.config.role_policy(&member.role).permits(tool),
        evidence: Some(Evidence {
            diagnostics: &snap.diagnostics,
            provenance: &provenance,
            inventory: &snap.inventory,
        }),
    });
    let text = match verdict.blocker_kind {
        None => format!("allowed: {profile} may call {tool} ({:?})", verdict.classification).to_lowercase(),
        Some(kind) => format!(
            "{kind}: {}\noperator action: {}",
            verdict.blocked_reasons.join("; "),
            verdict.operator_action.as_deref().unwrap_or("-")
        ),
    };
    let exit = if verdict.allowed { Exit::Ok } else { Exit::No };
    Ok(Reply::new(&verdict, text, exit))
}

/// Ownership of a worker as seen from outside its process: its own
/// generation, its process's `CLIENT_MANAGED` read from `/proc`.
fn worker_provenance(
    ctx: &Ctx,
    store: &dyn fleetgate_store::Store,
    id: &str,
    now: Timestamp,
) -> anyhow::Result<Provenance> {
    let row = store.get_worker(id)?;
    let generation = row.as_ref().map(|r| r.generation_id.clone()).unwrap_or_default();
    let env = row
        .as_ref()
        .and_then(|r| r.pid)
        .and_then(|pid| ProcFs::default().environ(pid).ok())
        .unwrap_or_else(EnvSnapshot::default);
    Ok(assess_provenance(store, id, &generation, &env, &ctx.config.env_prefix, true, now, &|pid| {
        probe_pid(pid).is_alive()
    })?)
}

/// `fleetgate audit`.
pub fn audit(ctx: &Ctx, since: Option<&str>, limit: &str) -> anyhow::Result<Reply> {
    let since = since.map(Timestamp::parse).transpose().map_err(|e| anyhow!("invalid --since: {e}"))?;
    let limit: usize = parse_flag("--limit", limit, "a whole number")?;
    let entries = ctx.store()?.list_audit(since, limit)?;
    let cells: Vec<Vec<String>> = entries
        .iter()
        .map(|e| {
            vec![
                e.at.to_string(),
                e.profile.clone(),
                e.tool.clone(),
                if e.allowed { "allowed".into() } else { e.blocker_kind.clone().unwrap_or_else(|| "refused".into()) },
                e.worker_identity.clone().unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    let text = if cells.is_empty() {
        "no audit entries".into()
    } else {
        table(&["AT", "PROFILE", "TOOL", "DECISION", "WORKER"], &cells)
    };
    Ok(Reply { value: json!({ "entries": entries }), text, exit: Exit::Ok })
}
