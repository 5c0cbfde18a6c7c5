//! `fleetgate worker …`: the registry for servers written in any language.

use crate::cli::args::{ClaimArgs, HeartbeatArgs, RegisterArgs, WorkerCommand};
use crate::cli::context::Ctx;
use crate::cli::output::{Exit, Reply, older_than, parse_flag, pruned, table};
use anyhow::bail;
use fleetgate_core::BlockerKind;
use fleetgate_core::worker::{HeartbeatRequest, Registration, WorkerIds, WorkerRecord, WorkerShown, worker_identity};
use fleetgate_host::probe::probe_pid;
use serde_json::json;

/// Run one worker command.
pub fn run(ctx: &Ctx, cmd: &WorkerCommand) -> anyhow::Result<Reply> {
    match cmd {
        WorkerCommand::Register(a) => register(ctx, a),
        WorkerCommand::Heartbeat(a) => heartbeat(ctx, a),
        WorkerCommand::ClaimGeneration(a) => claim(ctx, a),
        WorkerCommand::Show { identity } => show(ctx, identity),
        WorkerCommand::List => list(ctx),
        WorkerCommand::Deregister { identity } => deregister(ctx, identity),
        WorkerCommand::Prune(a) => {
            let seconds = older_than(&a.older_than)?;
            let ids = ctx.store()?.prune_workers(seconds, ctx.now())?;
            Ok(pruned("worker rows", &a.older_than, seconds, ids))
        }
    }
}

fn register(ctx: &Ctx, a: &RegisterArgs) -> anyhow::Result<Reply> {
    let pid: i64 = match &a.pid {
        Some(p) => parse_flag("--pid", p, "a positive integer")?,
        None => i64::from(std::os::unix::process::parent_id()),
    };
    let ttl: f64 = match &a.ttl {
        Some(t) => parse_flag("--ttl", t, "a number of seconds")?,
        None => ctx.config.heartbeat_ttl_seconds,
    };
    if pid <= 0 {
        bail!("invalid --pid {pid}: expected a positive integer");
    }
    if fleetgate_core::worker::check_ttl(ttl).is_err() {
        bail!("invalid --ttl {ttl}: expected 1 to 604800 seconds");
    }
    // A role the roster does not have, or not the profile's, would register a worker the
    // gate then judges under the wrong policy.
    match ctx.config.member(&a.profile) {
        Some(m) if m.role != a.role => {
            bail!("--role {:?} does not match profile {:?}, whose role is {:?}", a.role, a.profile, m.role)
        }
        None if !ctx.config.members.iter().any(|m| m.role == a.role) => {
            bail!("--role {:?} is not a role of the roster ({})", a.role, ctx.config.source)
        }
        _ => {}
    }
    let now = ctx.now();
    let registration = Registration {
        ids: WorkerIds {
            worker_identity: worker_identity(&a.client, &a.session, now, fleetgate_host::nonce()),
            client_name: a.client.clone(),
            client_instance_id: a.instance.clone().unwrap_or_else(|| a.session.clone()),
            session_id: a.session.clone(),
            generation_id: a.generation.clone(),
            role: a.role.clone(),
            profile: a.profile.clone(),
            pid: Some(pid),
        },
        heartbeat_ttl_seconds: ttl,
    };
    let outcome = ctx.store()?.register(&registration, now)?;
    let text = format!(
        "registered {} (client {}, epoch {}, ttl {}s)",
        outcome.worker_identity, outcome.client_name, outcome.fencing_epoch, outcome.heartbeat_ttl_seconds
    );
    Ok(Reply::new(&outcome, text, Exit::Ok))
}

fn heartbeat(ctx: &Ctx, a: &HeartbeatArgs) -> anyhow::Result<Reply> {
    let request = HeartbeatRequest {
        worker_identity: a.identity.clone(),
        fencing_epoch: parse_flag("--epoch", &a.epoch, "an integer fencing epoch")?,
        expected_session_id: a.expect_session.clone(),
        expected_generation_id: a.expect_generation.clone(),
        expected_client_name: a.expect_client.clone(),
        expected_pid: a.expect_pid.as_deref().map(|p| parse_flag("--expect-pid", p, "an integer pid")).transpose()?,
    };
    let outcome = ctx.store()?.heartbeat(&request, ctx.now())?;
    let (text, exit) = if outcome.renewed {
        (format!("renewed {}", request.worker_identity), Exit::Ok)
    } else {
        let kind = outcome.blocker_kind.map_or("refused", BlockerKind::as_str);
        (format!("refused: {kind}: {}", outcome.reasons.join("; ")), Exit::No)
    };
    Ok(Reply::new(&outcome, text, exit))
}

fn claim(ctx: &Ctx, a: &ClaimArgs) -> anyhow::Result<Reply> {
    match ctx.store()?.claim_generation(&a.identity, &a.generation, ctx.now())? {
        Some(c) => {
            let text = format!(
                "{} now owned by generation {} at epoch {} (epoch {} fenced)",
                c.worker_identity, c.generation_id, c.fencing_epoch, c.previous_epoch
            );
            Ok(Reply::new(&c, text, Exit::Ok))
        }
        None => Ok(missing(&a.identity)),
    }
}

fn missing(identity: &str) -> Reply {
    let reason = format!("no worker is registered as {identity}");
    let value = json!({ "blocker_kind": BlockerKind::SessionAttachmentMissing, "reasons": [reason] });
    Reply { text: format!("{}: {reason}", BlockerKind::SessionAttachmentMissing), value, exit: Exit::No }
}

fn shown(ctx: &Ctx, row: &WorkerRecord) -> serde_json::Value {
    serde_json::to_value(WorkerShown::new(row, ctx.now(), probe_pid(row.ids.pid))).unwrap_or_default()
}

fn show(ctx: &Ctx, identity: &str) -> anyhow::Result<Reply> {
    let Some(row) = ctx.store()?.get_worker(identity)? else {
        return Ok(missing(identity));
    };
    let value = shown(ctx, &row);
    let text = value
        .as_object()
        .map(|o| o.iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join("\n"))
        .unwrap_or_default();
    Ok(Reply { value, text, exit: Exit::Ok })
}

fn list(ctx: &Ctx) -> anyhow::Result<Reply> {
    let rows = ctx.store()?.list_workers()?;
    let shown_rows: Vec<serde_json::Value> = rows.iter().map(|r| shown(ctx, r)).collect();
    let cells: Vec<Vec<String>> = shown_rows
        .iter()
        .map(|v| {
            let s = |k: &str| match &v[k] {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Null => "-".into(),
                other => other.to_string(),
            };
            [
                "worker_identity",
                "client_name",
                "role",
                "profile",
                "pid",
                "fencing_epoch",
                "status",
                "last_heartbeat_at",
                "live",
            ]
            .iter()
            .map(|k| s(k))
            .collect()
        })
        .collect();
    let text = if cells.is_empty() {
        format!("no workers registered in {}", ctx.store_shown())
    } else {
        table(&["WORKER", "CLIENT", "ROLE", "PROFILE", "PID", "EPOCH", "STATUS", "LAST HEARTBEAT", "LIVE"], &cells)
    };
    Ok(Reply { value: json!({ "workers": shown_rows }), text, exit: Exit::Ok })
}

fn deregister(ctx: &Ctx, identity: &str) -> anyhow::Result<Reply> {
    if ctx.store()?.deregister_worker(identity, ctx.now())? {
        Ok(Reply {
            value: json!({ "worker_identity": identity, "status": "stopped" }),
            text: format!("{identity} stopped"),
            exit: Exit::Ok,
        })
    } else {
        Ok(missing(identity))
    }
}
