//! `fleetgate inventory`: the verdict, a summary line and a readable table.

use super::observer::LiveObserver;
use crate::cli::context::Ctx;
use crate::cli::output::{Exit, Reply, shown, table};
use fleetgate_control::gate::snapshot;
use fleetgate_core::inventory::{FleetInventory, MemberRow, summarize};

/// Assess and report. Exit 0 gate open, 3 gate closed; a store that cannot be
/// opened at all is a failure (1), one that opens but cannot be read fails
/// closed inside the verdict.
pub fn run(ctx: &Ctx, answering: Option<&str>) -> anyhow::Result<Reply> {
    let store = ctx.store()?;
    let snap = snapshot(&ctx.config, Ok(&*store), &LiveObserver::default(), ctx.now(), answering);
    let exit = if snap.inventory.mutation_gate_satisfied { Exit::Ok } else { Exit::No };
    let mut text = render(&snap.inventory);
    if !snap.diagnostics.is_empty() {
        text.push_str("\n\nruntime diagnostics:");
        for d in &snap.diagnostics {
            text.push_str(&format!("\n  - {}", shown(&d.to_string(), usize::MAX)));
        }
    }
    // The verdict, plus the runtime diagnostics the gate would also weigh (the control
    // tool answers the same two).
    let mut value = serde_json::to_value(&snap.inventory)?;
    value["runtime_diagnostics"] = serde_json::json!(snap.diagnostics);
    if let Ok(store) = ctx.store() {
        value["tool_changes"] = serde_json::json!(fleetgate_control::pins::changes(&*store, None));
    }
    Ok(Reply { value, text, exit })
}

fn row_cells(m: &MemberRow) -> Vec<String> {
    vec![
        format!("{}/{}", m.namespace, m.profile),
        format!("{:?}", m.health).to_lowercase(),
        format!("{:?}", m.liveness).to_lowercase(),
        m.pid.to_string(),
        m.heartbeat_age_seconds.map_or("-".into(), |a| format!("{a}s")),
        m.cohort_id.clone().unwrap_or_else(|| "unknown".into()),
        m.startup_head.as_deref().map_or("unknown".into(), |h| h.chars().take(12).collect()),
    ]
}

/// The readable form: summary, members, then each blocked reason. The summary and the reasons
/// quote other users' command lines: each is [`shown`], so none can forge a line or send an
/// escape sequence to the terminal.
pub fn render(inv: &FleetInventory) -> String {
    let mut cells: Vec<Vec<String>> = Vec::new();
    cells.extend(inv.running_members.iter().map(row_cells));
    cells.extend(inv.unexpected_members.iter().map(row_cells));
    cells.extend(inv.stale_members.iter().map(row_cells));
    for m in &inv.missing_members {
        cells.push(vec![
            format!("{}/{}", m.namespace, m.profile),
            "missing".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
        ]);
    }
    for p in &inv.unregistered_processes {
        cells.push(vec![
            format!("(unregistered) {}", p.command.chars().take(40).collect::<String>()),
            "unknown".into(),
            "unregistered".into(),
            p.pid.to_string(),
            "-".into(),
            "-".into(),
            "-".into(),
        ]);
    }
    let mut out = vec![shown(&summarize(inv), usize::MAX), String::new()];
    out.push(table(&["MEMBER", "HEALTH", "LIVENESS", "PID", "HEARTBEAT AGE", "COHORT", "REVISION"], &cells));
    if !inv.blocked_reasons.is_empty() {
        out.push(String::new());
        out.push("blocked because:".into());
        out.extend(inv.blocked_reasons.iter().map(|r| format!("  - {}", shown(r, usize::MAX))));
    }
    if !inv.other_fleet_gateways.is_empty() {
        out.push(String::new());
        out.push("other fleets on this host (proven by their own stores; not ours):".into());
        out.extend(inv.other_fleet_gateways.iter().map(|g| {
            shown(
                &format!(
                    "  - other fleet: pid {} {} ({}), store {}, checkout {}",
                    g.pid, g.profile, g.namespace, g.store, g.repository_root
                ),
                usize::MAX,
            )
        }));
    }
    out.join("\n")
}
