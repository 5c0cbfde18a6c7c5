//! `fleetgate inventory`: the verdict, a summary line and a readable table.

use super::observer::LiveObserver;
use crate::cli::context::Ctx;
use crate::cli::output::{Exit, Reply, shown};
use fleetgate_control::gate::snapshot;
pub use fleetgate_core::inventory::render;

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
