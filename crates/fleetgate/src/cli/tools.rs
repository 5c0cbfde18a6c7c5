//! `fleetgate tools list|accept`: the pinned downstream tool definitions.

use crate::cli::args::ToolsCommand;
use crate::cli::context::Ctx;
use crate::cli::output::{Exit, Reply, table};
use anyhow::anyhow;
use fleetgate_store::ToolPin;
use serde_json::{Value, json};

fn shown(pin: &ToolPin) -> Value {
    json!({
        "profile": pin.profile,
        "tool": pin.tool,
        "changed": pin.changed(),
        "pinned_digest": pin.pinned_digest,
        "pinned_at": pin.pinned_at,
        "seen_digest": pin.seen_digest,
        "seen_at": pin.seen_at,
        "seen_definition": serde_json::from_str::<Value>(&pin.seen_definition).unwrap_or(Value::Null),
    })
}

fn short(digest: &str) -> &str {
    digest.get(..19).unwrap_or(digest)
}

/// `fleetgate tools …`. `list` exits 3 when a definition changed since it was pinned.
pub fn tools(ctx: &Ctx, cmd: &ToolsCommand) -> anyhow::Result<Reply> {
    let store = ctx.store()?;
    match cmd {
        ToolsCommand::List { profile } => {
            let pins = store.list_tool_pins(profile.as_deref())?;
            let cells: Vec<Vec<String>> = pins
                .iter()
                .map(|p| {
                    vec![
                        p.profile.clone(),
                        p.tool.clone(),
                        if p.changed() { "changed".into() } else { "pinned".into() },
                        short(&p.pinned_digest).into(),
                        short(&p.seen_digest).into(),
                    ]
                })
                .collect();
            let changed = pins.iter().filter(|p| p.changed()).count();
            let text = if pins.is_empty() {
                "no tool definitions pinned yet".to_owned()
            } else {
                format!("{}\n{changed} changed", table(&["PROFILE", "TOOL", "STATE", "PINNED", "SEEN"], &cells))
            };
            let value = json!({ "tools": pins.iter().map(shown).collect::<Vec<_>>(), "changed": changed });
            Ok(Reply { value, text, exit: if changed == 0 { Exit::Ok } else { Exit::No } })
        }
        ToolsCommand::Accept { profile, tools } => {
            let pins = store.list_tool_pins(profile.as_deref())?;
            if let Some(unknown) = tools.iter().find(|t| !pins.iter().any(|p| &p.tool == *t)) {
                return Err(anyhow!(
                    "no pinned tool {unknown:?}{}",
                    profile.as_ref().map(|p| format!(" for profile {p}")).unwrap_or_default()
                ));
            }
            let now = ctx.now();
            let mut accepted = Vec::new();
            for pin in pins.iter().filter(|p| p.changed() && (tools.is_empty() || tools.contains(&p.tool))) {
                if store.accept_tool(&pin.profile, &pin.tool, &pin.seen_digest, now)? {
                    accepted.push(json!({ "profile": pin.profile, "tool": pin.tool, "digest": pin.seen_digest }));
                }
            }
            let text = match accepted.len() {
                0 => "nothing to accept: no named tool has changed".to_owned(),
                n => format!("accepted {n} changed definition(s)"),
            };
            Ok(Reply { value: json!({ "accepted": accepted }), text, exit: Exit::Ok })
        }
    }
}
