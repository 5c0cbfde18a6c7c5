//! `fleetgate env …`, `fleetgate capability` and `fleetgate audit`: the
//! environment gate, the mutation gate evaluated live, and its record.

use super::observer::LiveObserver;
use crate::cli::args::EnvCommand;
use crate::cli::context::Ctx;
use crate::cli::output::{Exit, Reply, parse_flag, table};
use anyhow::anyhow;
use fleetgate_control::gate::workflow::ForgeReader;
use fleetgate_control::gate::{Call, Caller, Gate};
use fleetgate_core::Timestamp;
use fleetgate_core::env::{DECLARED, KeyName, key_name, recognized_keys, unconsumed_env_overrides};
use serde_json::{Map, Value, json};
use std::sync::Arc;

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

/// `fleetgate capability`: the gate the gateway uses, on the same path, with live inputs.
/// `arguments`: the call's arguments as JSON (`--args`), when the verdict may depend on them.
pub fn capability(
    ctx: &Ctx,
    profile: &str,
    tool: &str,
    worker: Option<&str>,
    read_only_hint: bool,
    arguments: Option<&str>,
) -> anyhow::Result<Reply> {
    let member = ctx
        .config
        .member(profile)
        .ok_or_else(|| anyhow!("profile {profile:?} is not in the roster ({})", ctx.config.source))?
        .clone();
    let arguments: Option<Map<String, Value>> = arguments
        .map(|text| serde_json::from_str(text).map_err(|e| anyhow!("--args is not a JSON object: {e}")))
        .transpose()?;
    let gate = Gate::new(Arc::new(ctx.config.clone()), ctx.store()?, Arc::new(LiveObserver::default()));
    let forge = fleetgate_control::gate::CommandForge::new(gate.config(), &ctx.env);
    let forge = forge.as_ref().map(|f| f as &dyn ForgeReader);
    Ok(capability_reply(&gate, &member, tool, worker, read_only_hint, arguments.as_ref(), forge, ctx.now()))
}

/// The `capability` answer from `gate` as of `now`, the forge read through `forge` when the
/// verdict needs it: what `fleetgate capability` prints.
#[allow(clippy::too_many_arguments)] // The command's flags, one by one.
pub fn capability_reply(
    gate: &Gate,
    member: &fleetgate_config::Member,
    tool: &str,
    worker: Option<&str>,
    read_only_hint: bool,
    arguments: Option<&Map<String, Value>>,
    forge: Option<&dyn ForgeReader>,
    now: Timestamp,
) -> Reply {
    let profile = &member.profile;
    let caller = match worker {
        Some(identity) => Caller::Worker { identity, generation: None, principal: None, served_by: None },
        None => Caller::Nobody("no --worker was given: no live worker owns a session here".into()),
    };
    let call = Call {
        member,
        tool,
        read_only_hint: read_only_hint.then_some(true),
        arguments,
        schema: None,
        caller,
        forge,
        schemas: None,
    };
    let verdict = gate.resolve(&call, now);
    let text = match verdict.blocker_kind {
        None => format!("allowed: {profile} may call {tool} ({})", verdict.classification),
        Some(kind) => format!(
            "{kind}: {}\noperator action: {}",
            verdict.blocked_reasons.join("; "),
            verdict.operator_action.as_deref().unwrap_or("-")
        ),
    };
    let exit = if verdict.allowed { Exit::Ok } else { Exit::No };
    Reply::new(&verdict, text, exit)
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
