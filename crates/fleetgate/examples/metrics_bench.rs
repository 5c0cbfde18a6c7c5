//! The cost of metrics on the forwarded-call path (issue 15's benchmark; not a test). What a
//! gateway records for one forwarded `tools/call` — the gate decision counted under its
//! labels, the gate's time and the forwarded call's latency observed through the
//! `GatewayObserver` the engine calls — with the real `GatewayExposition`, against the same
//! path with metrics off (`None`: the two clock reads and the branches stay), in the same run,
//! rounds interleaved. On one thread, and on two at once (the HTTP gateway's two workers
//! recording into the same series). Then one scrape's encoding, with a realistic number of
//! series.
//!
//! `cargo run --release -p fleetgate --example metrics_bench [CALLS_PER_ROUND]`

use fleetgate_control::metrics::{GatewayExposition, GatewayMetrics};
use fleetgate_gateway::GatewayObserver;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

const ROUNDS: usize = 7;

/// One forwarded call's recording, as `FleetControl::decide` and the engine's `call_tool` do it.
fn one_call(metrics: Option<&GatewayMetrics>, observer: Option<&dyn GatewayObserver>, profile: &Arc<str>, i: u64) {
    let gate_started = Instant::now();
    let blocker = if i.is_multiple_of(8) { Some("fleet_inventory_blocked") } else { None };
    let class = if i.is_multiple_of(2) { "read_only" } else { "mutating" };
    if let Some(metrics) = metrics {
        metrics.gate_seconds.observe(gate_started.elapsed().as_secs_f64());
        metrics.decided(class, blocker, profile);
    }
    let sent = Instant::now();
    black_box(i);
    if let Some(observer) = observer {
        observer.forwarded_call(sent.elapsed());
    }
}

/// `calls` recordings on each of `threads` threads at once: nanoseconds per call per thread.
fn run(exposition: Option<&Arc<GatewayExposition>>, threads: usize, calls: u64) -> f64 {
    let profile: Arc<str> = Arc::from("prgs-author");
    let started = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let profile = profile.clone();
            scope.spawn(move || {
                let metrics = exposition.map(|e| e.metrics());
                let observer = exposition.map(|e| &**e as &dyn GatewayObserver);
                for i in 0..calls {
                    one_call(metrics, observer, &profile, i);
                }
            });
        }
    });
    started.elapsed().as_nanos() as f64 / calls as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let calls: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(1_000_000);
    let exposition = Arc::new(GatewayExposition::default());
    println!("== recording per forwarded call, ns (median of {ROUNDS} interleaved rounds of {calls} calls)");
    println!("threads | metrics off | metrics on | added");
    for threads in [1, 2] {
        let (mut off, mut on) = (Vec::new(), Vec::new());
        run(None, threads, calls / 10);
        run(Some(&exposition), threads, calls / 10);
        for _ in 0..ROUNDS {
            off.push(run(None, threads, calls));
            on.push(run(Some(&exposition), threads, calls));
        }
        let (off, on) = (median(off), median(on));
        println!("{threads:7} | {off:11.1} | {on:10.1} | {:5.1}", on - off);
    }

    // A scrape: the gateway's families with the series a busy gateway has (both classes, a
    // dozen blockers, renewals, every histogram bucket filled).
    let m = exposition.metrics();
    let profile: Arc<str> = Arc::from("prgs-author");
    for blocker in [
        "fleet_inventory_blocked",
        "runtime_reconnect_required",
        "worker_fenced",
        "session_attachment_missing",
        "role_not_permitted",
        "tool_definition_changed",
    ] {
        for class in ["read_only", "mutating"] {
            m.decided(class, Some(blocker), &profile);
        }
        m.refused(blocker);
    }
    exposition.downstream_restarted();
    exposition.http_sessions_open(12);
    for i in 0..64_u32 {
        exposition.forwarded_call(Duration::from_micros(u64::from(i) * 500));
    }
    let mut times = Vec::new();
    let mut bytes = 0;
    for _ in 0..200 {
        let started = Instant::now();
        let body = exposition.exposition(None).expect("encoded").body;
        times.push(started.elapsed().as_secs_f64() * 1e6);
        bytes = body.len();
    }
    println!("== one scrape: {bytes} bytes, encoded in {:.1} µs (median of 200)", median(times));
}
