//! `fleetgate demo`: the registry's guarantees, shown on a throwaway store.
//! Registers two clients' workers, renews them, lets a new generation claim
//! one, and shows the old generation fenced off — every refusal with its
//! blocker literal. Nothing outside a temporary directory is touched.

use crate::cli::context::Ctx;
use crate::cli::output::{Exit, Reply};
use fleetgate_core::worker::{HeartbeatRequest, Registration, is_live, worker_identity};
use serde_json::json;

/// Run the demo.
pub fn run(ctx: &Ctx) -> anyhow::Result<Reply> {
    let dir = tempfile::Builder::new().prefix("fleetgate-demo-").tempdir()?;
    let path = dir.path().join("registry.sqlite3");
    let store = fleetgate_store::open(&path.to_string_lossy())?;
    let now = ctx.clock.now();
    let mut steps = Vec::new();
    let mut say = |step: &str, detail: serde_json::Value| {
        steps.push(json!({ "step": step, "detail": detail }));
    };
    let mut ids = Vec::new();
    for (client, profile) in [("claude-code", "prgs-author"), ("gemini", "prgs-reviewer")] {
        let reg = Registration {
            worker_identity: worker_identity(client, "demo-session", now, fleetgate_host::nonce()),
            client_name: client.into(),
            client_instance_id: format!("{client}-1"),
            session_id: format!("{client}-session"),
            generation_id: "gen-1".into(),
            role: profile.trim_start_matches("prgs-").into(),
            profile: profile.into(),
            pid: Some(i64::from(std::process::id())),
            heartbeat_ttl_seconds: ctx.config.heartbeat_ttl_seconds,
        };
        let out = store.register(&reg, now)?;
        say(
            "register",
            json!({ "client": client, "stored_client_name": out.client_name, "worker_identity": out.worker_identity, "fencing_epoch": out.fencing_epoch }),
        );
        ids.push((out.worker_identity, out.fencing_epoch));
    }
    let (author, epoch) = ids[0].clone();
    let renew = |epoch, session: Option<&str>| HeartbeatRequest {
        worker_identity: author.clone(),
        fencing_epoch: epoch,
        expected_session_id: session.map(str::to_owned),
        ..Default::default()
    };
    let later = now.plus_seconds(300);
    say("renew at epoch 1", serde_json::to_value(store.heartbeat(&renew(epoch, Some("claude-code-session")), later)?)?);
    say(
        "renew presenting another session",
        serde_json::to_value(store.heartbeat(&renew(epoch, Some("impostor")), later)?)?,
    );
    let claim =
        store.claim_generation(&author, "gen-2", later)?.ok_or_else(|| anyhow::anyhow!("demo worker vanished"))?;
    say("a new generation claims the author", serde_json::to_value(&claim)?);
    say("the old generation renews at epoch 1", serde_json::to_value(store.heartbeat(&renew(epoch, None), later)?)?);
    say("the new generation renews", serde_json::to_value(store.heartbeat(&renew(claim.fencing_epoch, None), later)?)?);
    let expiry = now.plus_seconds(ctx.config.heartbeat_ttl_seconds as i64 + 301);
    let reviewer = store.get_worker(&ids[1].0)?.ok_or_else(|| anyhow::anyhow!("demo worker vanished"))?;
    say("the silent reviewer one TTL later", serde_json::to_value(is_live(&reviewer, expiry, true))?);

    let text = steps
        .iter()
        .map(|s| format!("{:<42} {}", s["step"].as_str().unwrap_or(""), s["detail"]))
        .collect::<Vec<_>>()
        .join("\n");
    Ok(Reply { value: json!({ "store": path.display().to_string(), "steps": steps }), text, exit: Exit::Ok })
}
