//! `fleetgate debug renew-loop`: renew as fast as the store allows and report
//! every answer. Tests race it against a generation claim from several OS
//! processes; operators use it to soak a store.

use crate::cli::args::DebugCommand;
use crate::cli::context::Ctx;
use crate::cli::output::{Exit, Reply, parse_flag};
use fleetgate_core::worker::HeartbeatRequest;
use serde::Serialize;
use std::time::{Duration, Instant};

#[derive(Debug, Default, Serialize)]
struct LoopReport {
    attempts: u64,
    renewed: u64,
    refused: u64,
    errors: u64,
    /// Renewals accepted after a refusal was seen: fencing is broken if non-zero.
    renewed_after_refusal: u64,
    first_refusal: Option<String>,
    max_latency_ms: f64,
    mean_latency_ms: f64,
    elapsed_s: f64,
    renewals_per_s: f64,
}

/// Run one debug command.
pub fn run(ctx: &Ctx, cmd: &DebugCommand) -> anyhow::Result<Reply> {
    let DebugCommand::RenewLoop { identity, epoch, count, max_seconds } = cmd else {
        return Err(anyhow::anyhow!("the downstream guard runs outside the reply path"));
    };
    let request = HeartbeatRequest {
        worker_identity: identity.clone(),
        fencing_epoch: parse_flag("--epoch", epoch, "an integer fencing epoch")?,
        ..Default::default()
    };
    let count: u64 = parse_flag("--count", count, "a whole number")?;
    let budget =
        Duration::from_secs_f64(parse_flag::<f64>("--max-seconds", max_seconds, "a number of seconds")?.max(0.0));
    let store = ctx.store()?;
    let mut r = LoopReport::default();
    let started = Instant::now();
    let mut total = Duration::ZERO;
    while r.attempts < count && started.elapsed() < budget {
        let t = Instant::now();
        let answer = store.heartbeat(&request, ctx.now());
        let took = t.elapsed();
        total += took;
        r.max_latency_ms = r.max_latency_ms.max(took.as_secs_f64() * 1e3);
        r.attempts += 1;
        match answer {
            Ok(o) if o.renewed => {
                r.renewed += 1;
                if r.first_refusal.is_some() {
                    r.renewed_after_refusal += 1;
                }
            }
            Ok(o) => {
                r.refused += 1;
                r.first_refusal.get_or_insert_with(|| o.reasons.join("; "));
            }
            Err(_) => r.errors += 1,
        }
    }
    r.elapsed_s = started.elapsed().as_secs_f64();
    r.mean_latency_ms = if r.attempts > 0 { total.as_secs_f64() * 1e3 / r.attempts as f64 } else { 0.0 };
    r.renewals_per_s = if r.elapsed_s > 0.0 { r.renewed as f64 / r.elapsed_s } else { 0.0 };
    let text = format!(
        "{} attempts: {} renewed, {} refused, {} errors; {:.0} renewals/s, max latency {:.1} ms",
        r.attempts, r.renewed, r.refused, r.errors, r.renewals_per_s, r.max_latency_ms
    );
    let exit = if r.errors > 0 || r.renewed_after_refusal > 0 { Exit::Failure } else { Exit::Ok };
    Ok(Reply::new(&r, text, exit))
}
