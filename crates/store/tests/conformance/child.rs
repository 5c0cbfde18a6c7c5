//! The suite's child processes: the test binary runs itself again, filtered
//! to `child_process_entry_point`, with a job in `FLEETGATE_CONFORMANCE_CHILD`.
//! Real OS processes, each with its own connection, so the races and the
//! concurrent migrations are between processes as in production.
//!
//! A child prints its report as one line `CONFORMANCE-CHILD {json}` on stdout.

use crate::engines::env;
use fleetgate_core::Timestamp;
use fleetgate_core::worker::HeartbeatRequest;
use serde_json::{Value, json};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const JOB: &str = "FLEETGATE_CONFORMANCE_CHILD";
const MARK: &str = "CONFORMANCE-CHILD ";

/// Start a child with `job`.
pub fn spawn(job: &Value) -> Child {
    Command::new(std::env::current_exe().expect("the test binary"))
        .args(["child_process_entry_point", "--exact", "--nocapture", "--test-threads", "1"])
        .env(JOB, job.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn a child process")
}

/// Wait for a child and read its report.
pub fn report(child: Child) -> Value {
    let out = child.wait_with_output().expect("wait for the child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().find_map(|l| l.split_once(MARK).map(|(_, report)| report));
    match (out.status.success(), line) {
        (true, Some(line)) => serde_json::from_str(line).expect("a JSON report"),
        _ => panic!("child failed ({}): {stdout}\n{}", out.status, String::from_utf8_lossy(&out.stderr)),
    }
}

/// Milliseconds since the epoch: children start their work at an agreed
/// instant, so they really run at once.
pub fn wall_ms() -> u64 {
    u64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970").as_millis()).expect("in range")
}

fn wait_for(start_at_ms: u64) {
    let now = wall_ms();
    if start_at_ms > now {
        std::thread::sleep(Duration::from_millis(start_at_ms - now));
    }
}

pub fn main_if_child() {
    let Some(job) = env(JOB) else { return };
    let job: Value = serde_json::from_str(&job).expect("a JSON job");
    let spec = job["spec"].as_str().expect("spec");
    wait_for(job["start_at_ms"].as_u64().unwrap_or(0));
    let result = match job["role"].as_str() {
        Some("open") => match fleetgate_store::open(spec) {
            Ok(store) => json!({ "opened": true, "version": store.schema_version().ok() }),
            Err(e) => json!({ "opened": false, "error": e.to_string() }),
        },
        Some("renew") => renew(spec, &job),
        Some("claim_pr") => {
            let store = fleetgate_store::open(spec).expect("open the store");
            let at = Timestamp::from_unix(job["now"].as_i64().expect("now"));
            crate::ledger::child_claim(&*store, job["who"].as_str().expect("who"), at)
        }
        other => panic!("unknown child role {other:?}"),
    };
    // Its own line: the harness has already printed the test's name.
    println!("\n{MARK}{result}");
}

/// Renew at the presented epoch until fenced (and a few attempts past it, to
/// catch a renewal the fence let through), or until the deadline.
fn renew(spec: &str, job: &Value) -> Value {
    let store = fleetgate_store::open(spec).expect("open the store");
    let req = HeartbeatRequest {
        worker_identity: job["identity"].as_str().expect("identity").into(),
        fencing_epoch: job["epoch"].as_i64().expect("epoch"),
        expected_session_id: job["session"].as_str().map(str::to_owned),
        ..Default::default()
    };
    let now = Timestamp::from_unix(job["now"].as_i64().expect("now"));
    let deadline = Instant::now() + Duration::from_secs(job["max_seconds"].as_u64().unwrap_or(20));
    let past_fence = job["attempts_past_fence"].as_u64().unwrap_or(20);
    let (mut renewed, mut refused, mut errors, mut renewed_after_refusal) = (0u64, 0u64, 0u64, 0u64);
    let mut worst = Duration::ZERO;
    let mut last_error = None;
    while Instant::now() < deadline && refused < past_fence {
        let t = Instant::now();
        match store.heartbeat(&req, now) {
            Ok(out) if out.renewed => {
                renewed += 1;
                renewed_after_refusal += u64::from(refused > 0);
            }
            Ok(_) => refused += 1,
            Err(e) => {
                errors += 1;
                last_error = Some(e.to_string());
            }
        }
        worst = worst.max(t.elapsed());
    }
    json!({
        "renewed": renewed,
        "refused": refused,
        "errors": errors,
        "last_error": last_error,
        "renewed_after_refusal": renewed_after_refusal,
        "max_latency_ms": worst.as_secs_f64() * 1e3,
    })
}
