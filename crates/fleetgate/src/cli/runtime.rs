//! `fleetgate runtime …`: runtime rows for servers fleetgate does not run
//! itself, so an existing fleet can be inventoried before it adopts the gateway.

use crate::cli::args::{RuntimeCommand, RuntimeRegisterArgs};
use crate::cli::context::Ctx;
use crate::cli::output::{Exit, Reply, older_than, parse_flag, pruned, table};
use anyhow::bail;
use fleetgate_core::runtime::{RuntimeRecord, RuntimeStatus, derive_cohort, runtime_id};
use fleetgate_host::procfs::{ProcFs, ProcessSource};
use serde_json::json;

/// Run one runtime command.
pub fn run(ctx: &Ctx, cmd: &RuntimeCommand) -> anyhow::Result<Reply> {
    match cmd {
        RuntimeCommand::Register(a) => register(ctx, a),
        RuntimeCommand::List => list(ctx),
        RuntimeCommand::Touch { runtime_id } => {
            let ok = ctx.store()?.touch_runtime(runtime_id, ctx.now())?;
            Ok(found(runtime_id, ok, "refreshed"))
        }
        RuntimeCommand::Deregister { runtime_id } => {
            let ok = ctx.store()?.mark_runtime_stopped(runtime_id, ctx.now())?;
            Ok(found(runtime_id, ok, "stopped"))
        }
        RuntimeCommand::Prune(a) => {
            let seconds = older_than(&a.older_than)?;
            let ids = ctx.store()?.prune_runtime(seconds, ctx.now())?;
            Ok(pruned("runtime rows", &a.older_than, seconds, ids))
        }
    }
}

fn found(id: &str, ok: bool, done: &str) -> Reply {
    if ok {
        Reply { value: json!({ "runtime_id": id, "result": done }), text: format!("{id} {done}"), exit: Exit::Ok }
    } else {
        let reason = format!("no running runtime row {id}");
        Reply { value: json!({ "runtime_id": id, "error": reason }), text: reason, exit: Exit::No }
    }
}

fn register(ctx: &Ctx, a: &RuntimeRegisterArgs) -> anyhow::Result<Reply> {
    let pid: i64 = parse_flag("--pid", &a.pid, "a positive integer")?;
    if pid <= 0 {
        bail!("invalid --pid {pid}: expected a positive integer");
    }
    for (flag, v) in [("--namespace", &a.namespace), ("--profile", &a.profile), ("--role", &a.role)] {
        if v.trim().is_empty() {
            bail!("{flag} must not be empty");
        }
    }
    let cohort = match &a.cohort {
        Some(c) => derive_cohort(Some(c), None),
        None => derive_cohort(None, ProcFs::default().entry(pid).map(|e| e.ppid)),
    };
    let startup_head = match (&a.startup_head, &a.repo_root) {
        (Some(h), _) => Some(h.clone()),
        (None, Some(root)) => Some(
            fleetgate_host::git::head(root)
                .map_err(|e| anyhow::anyhow!("cannot read the startup head of {}: {e}", root.display()))?,
        ),
        (None, None) => None,
    };
    let boot = fleetgate_host::start_id();
    let row = RuntimeRecord {
        runtime_id: runtime_id(&a.namespace, pid, &boot),
        namespace: a.namespace.clone(),
        profile: a.profile.clone(),
        role: a.role.clone(),
        remote: a.binding.remote.clone(),
        org: a.binding.org.clone(),
        repo: a.binding.repo.clone(),
        repository_root: a.repo_root.as_ref().map(|p| p.display().to_string()),
        pid,
        cohort_id: cohort.cohort_id,
        cohort_source: cohort.cohort_source,
        client_provenance: a.provenance.clone(),
        boot_id: boot,
        daemon_start_head: startup_head.clone(),
        startup_head,
        transport: a.transport.clone(),
        registered_at: ctx.now(),
        last_heartbeat_at: Some(ctx.now()),
        status: RuntimeStatus::Running,
        host: fleetgate_control::gate::Observer::local_host(&super::observer::LiveObserver::default()),
    };
    ctx.store()?.upsert_runtime(&row)?;
    let text = format!(
        "registered {} (cohort {}, revision {})",
        row.runtime_id,
        row.cohort_id.as_deref().unwrap_or("unknown"),
        row.startup_head.as_deref().unwrap_or("unknown")
    );
    Ok(Reply::new(&row, text, Exit::Ok))
}

fn list(ctx: &Ctx) -> anyhow::Result<Reply> {
    let rows = ctx.store()?.list_runtime()?;
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.runtime_id.clone(),
                r.profile.clone(),
                r.role.clone(),
                r.pid.to_string(),
                r.cohort_id.clone().unwrap_or_else(|| "-".into()),
                r.startup_head.as_deref().map_or("-".into(), |h| h.chars().take(12).collect()),
                r.status.as_str().into(),
                r.registered_at.to_string(),
            ]
        })
        .collect();
    let text = if cells.is_empty() {
        format!("no runtime rows in {}", ctx.store_shown())
    } else {
        table(&["RUNTIME", "PROFILE", "ROLE", "PID", "COHORT", "REVISION", "STATUS", "REGISTERED"], &cells)
    };
    Ok(Reply { value: json!({ "runtimes": rows }), text, exit: Exit::Ok })
}

/// `fleetgate prune`: the roster's `[retention]`, each flag over its key.
pub fn prune_history(ctx: &Ctx, args: &crate::cli::args::PruneHistoryArgs) -> anyhow::Result<Reply> {
    use fleetgate_core::prune::{MIN_HISTORY_SECONDS, parse_age_at_least};
    let mut retention = ctx.config.retention;
    let flag = |name: &str, value: &Option<String>, floor: i64, into: &mut Option<i64>| -> anyhow::Result<()> {
        if let Some(v) = value {
            *into = Some(parse_age_at_least(&format!("--{name}"), v, floor).map_err(|why| anyhow::anyhow!("{why}"))?);
        }
        Ok(())
    };
    flag("audit", &args.audit, MIN_HISTORY_SECONDS, &mut retention.audit)?;
    flag("approvals", &args.approvals, MIN_HISTORY_SECONDS, &mut retention.approvals)?;
    flag("workflow", &args.workflow, MIN_HISTORY_SECONDS, &mut retention.workflow)?;
    flag("observations", &args.observations, MIN_HISTORY_SECONDS, &mut retention.observations)?;
    flag("workers", &args.workers, 0, &mut retention.workers)?;
    flag("runtimes", &args.runtimes, 0, &mut retention.runtimes)?;
    if !retention.prunes_anything() {
        bail!("nothing to prune: give an age (--audit 180d, …) or set [retention] in the roster");
    }
    let store = ctx.store()?;
    let report = fleetgate_control::retention::prune_fleet(&*store, &ctx.config, &ctx.env, &retention, ctx.now())?;
    let mut text = vec![report.summary()];
    text.extend(report.kept.iter().map(|k| format!("kept {}: {}", k.what, k.why)));
    let exit = if report.kept.iter().any(|k| k.unanswered) { Exit::No } else { Exit::Ok };
    Ok(Reply { value: serde_json::to_value(&report)?, text: text.join("\n"), exit })
}
