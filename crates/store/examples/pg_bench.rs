//! Renewal throughput and a fleet-scale simulation on PostgreSQL. Not a test:
//! `scripts/bench-postgres` runs it beside pgbench on the same server, and
//! BENCHMARKS.md records the figures.
//!
//! ```text
//! pg_bench renew --url URL --connections 1,8,32 --seconds 10
//! pg_bench scale --url URL --workers 10000 --ttl 30 --seconds 60 --connections 16
//! ```
//!
//! `renew`: N threads, each with its own connection (its own `PostgresStore`,
//! as N gateways would have), renew their own worker row back to back through
//! the fenced renewal: renewals per second and latency percentiles.
//!
//! `scale`: W simulated workers, spread evenly over the renewal interval
//! (ttl/3), each renewing on its own schedule; C connections carry them, so a
//! slow server shows as schedule lag. Reports the sustained rate, the p99 of
//! each renewal's latency (answer time) and of its lag behind schedule, and
//! missed renewals: refused, failed, or landing more than a TTL after the
//! worker's previous renewal, so the lease would have expired.
//!
//! Each run works in a database of its own, created and dropped here.

mod bench;

use bench::{now, registration};
use fleetgate_core::worker::HeartbeatRequest;
use fleetgate_store::postgres::PostgresStore;
use fleetgate_store::prelude::*;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

struct Opts {
    mode: String,
    url: String,
    connections: Vec<usize>,
    seconds: f64,
    workers: usize,
    ttl: f64,
}

fn opts() -> Opts {
    let mut args = std::env::args().skip(1);
    let mut o = Opts {
        mode: args.next().expect("a mode: renew or scale"),
        url: String::new(),
        connections: vec![1, 8, 32],
        seconds: 10.0,
        workers: 10_000,
        ttl: 30.0,
    };
    while let Some(a) = args.next() {
        let mut val = || args.next().expect("flag needs a value");
        match a.as_str() {
            "--url" => o.url = val(),
            "--connections" => o.connections = val().split(',').map(|n| n.parse().expect("--connections")).collect(),
            "--seconds" => o.seconds = val().parse().expect("--seconds"),
            "--workers" => o.workers = val().parse().expect("--workers"),
            "--ttl" => o.ttl = val().parse().expect("--ttl"),
            other => panic!("unknown flag {other}"),
        }
    }
    assert!(!o.url.is_empty(), "--url postgres://… is required");
    o
}

/// A database of its own, dropped at the end.
struct BenchDb {
    admin: String,
    name: String,
    url: String,
}

impl BenchDb {
    fn create(admin: &str) -> Self {
        let name = format!("fg_bench_{:08x}", fastrand::u32(..));
        // A checkpoint first, so no earlier phase's dirty pages are flushed
        // (competing with this phase's commits for the disk) while it runs.
        postgres::Client::connect(admin, postgres::NoTls)
            .and_then(|mut c| {
                c.batch_execute("CHECKPOINT").and_then(|()| c.batch_execute(&format!("CREATE DATABASE {name}")))
            })
            .expect("create the bench database");
        let (base, _) = admin.rsplit_once('/').expect("a URL with a database");
        Self { admin: admin.to_owned(), url: format!("{base}/{name}"), name }
    }
}

impl Drop for BenchDb {
    fn drop(&mut self) {
        let _ = postgres::Client::connect(&self.admin, postgres::NoTls)
            .and_then(|mut c| c.batch_execute(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name)));
    }
}

/// The request a gateway sends: the epoch and its session and generation.
fn request(identity: &str) -> HeartbeatRequest {
    HeartbeatRequest {
        worker_identity: identity.into(),
        fencing_epoch: 1,
        expected_session_id: Some("s".into()),
        expected_generation_id: Some("g".into()),
        ..Default::default()
    }
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[idx].as_secs_f64() * 1e3
}

fn renew(o: &Opts) {
    for &n in &o.connections {
        let db = BenchDb::create(&o.url);
        let setup = PostgresStore::open(&db.url).expect("open");
        for i in 0..n {
            setup.register(&registration(format!("wrk-{i}"), 900.0), now()).expect("register");
        }
        let barrier = Arc::new(Barrier::new(n));
        let seconds = o.seconds;
        let threads: Vec<_> = (0..n)
            .map(|i| {
                let (url, barrier) = (db.url.clone(), barrier.clone());
                std::thread::spawn(move || {
                    let store = PostgresStore::open(&url).expect("open");
                    let req = request(&format!("wrk-{i}"));
                    let mut latencies = Vec::new();
                    barrier.wait();
                    let until = Instant::now() + Duration::from_secs_f64(seconds);
                    while Instant::now() < until {
                        let t = Instant::now();
                        assert!(store.heartbeat(&req, now()).expect("renew").renewed);
                        latencies.push(t.elapsed());
                    }
                    latencies
                })
            })
            .collect();
        let mut all: Vec<Duration> = threads.into_iter().flat_map(|t| t.join().expect("renewer")).collect();
        all.sort();
        println!(
            "renew connections={n} seconds={seconds} renewals/s={:.0} p50_ms={:.2} p99_ms={:.2} max_ms={:.1}",
            all.len() as f64 / seconds,
            percentile(&all, 0.50),
            percentile(&all, 0.99),
            percentile(&all, 1.0),
        );
    }
}

#[derive(Default)]
struct Tally {
    done: u64,
    missed: u64,
    errors: u64,
    latency: Vec<Duration>,
    lag: Vec<Duration>,
}

fn scale(o: &Opts) {
    let c = *o.connections.first().expect("--connections");
    let (workers, ttl, seconds) = (o.workers, o.ttl, o.seconds);
    let interval = Duration::from_secs_f64(ttl / 3.0);
    let db = BenchDb::create(&o.url);
    // Register in parallel, one connection per carrier thread.
    let register: Vec<_> = (0..c)
        .map(|t| {
            let url = db.url.clone();
            std::thread::spawn(move || {
                let store = PostgresStore::open(&url).expect("open");
                for i in (t..workers).step_by(c) {
                    store.register(&registration(format!("wrk-{i:05}"), ttl), now()).expect("register");
                }
            })
        })
        .collect();
    register.into_iter().for_each(|t| t.join().expect("register"));

    let start = Instant::now() + Duration::from_millis(500);
    let end = start + Duration::from_secs_f64(seconds);
    let carriers: Vec<_> = (0..c)
        .map(|t| {
            let url = db.url.clone();
            std::thread::spawn(move || {
                let store = PostgresStore::open(&url).expect("open");
                // Worker i's renewals fall at start + phase_i + k·interval.
                let mine: Vec<(Duration, HeartbeatRequest)> = (t..workers)
                    .step_by(c)
                    .map(|i| (interval.mul_f64(i as f64 / workers as f64), request(&format!("wrk-{i:05}"))))
                    .collect();
                let mut last_ok: Vec<Instant> = mine.iter().map(|(phase, _)| start + *phase).collect();
                let mut tally = Tally::default();
                'rounds: for k in 0u32.. {
                    for (j, (phase, req)) in mine.iter().enumerate() {
                        let due = start + *phase + interval * k;
                        if due >= end {
                            break 'rounds;
                        }
                        if let Some(wait) = due.checked_duration_since(Instant::now()) {
                            std::thread::sleep(wait);
                        }
                        let sent = Instant::now();
                        let answer = store.heartbeat(req, now());
                        let answered = Instant::now();
                        tally.done += 1;
                        tally.latency.push(answered - sent);
                        tally.lag.push(answered - due);
                        match answer {
                            Ok(out) if out.renewed && k == 0 => last_ok[j] = answered,
                            Ok(out) if out.renewed => {
                                if answered.duration_since(last_ok[j]).as_secs_f64() > ttl {
                                    tally.missed += 1;
                                }
                                last_ok[j] = answered;
                            }
                            Ok(_) => tally.missed += 1,
                            Err(_) => {
                                tally.missed += 1;
                                tally.errors += 1;
                            }
                        }
                    }
                }
                tally
            })
        })
        .collect();
    let mut total = Tally::default();
    for carrier in carriers {
        let t = carrier.join().expect("carrier");
        total.done += t.done;
        total.missed += t.missed;
        total.errors += t.errors;
        total.latency.extend(t.latency);
        total.lag.extend(t.lag);
    }
    total.latency.sort();
    total.lag.sort();
    println!(
        "scale workers={workers} ttl_s={ttl} interval_s={:.1} connections={c} seconds={seconds} \
         offered/s={:.0} sustained/s={:.0} p50_ms={:.2} p99_ms={:.2} max_ms={:.1} p99_lag_ms={:.1} \
         max_lag_ms={:.1} missed={} errors={}",
        interval.as_secs_f64(),
        workers as f64 / interval.as_secs_f64(),
        total.done as f64 / seconds,
        percentile(&total.latency, 0.50),
        percentile(&total.latency, 0.99),
        percentile(&total.latency, 1.0),
        percentile(&total.lag, 0.99),
        percentile(&total.lag, 1.0),
        total.missed,
        total.errors,
    );
}

fn main() {
    let o = opts();
    match o.mode.as_str() {
        "renew" => renew(&o),
        "scale" => scale(&o),
        other => panic!("unknown mode {other}: renew or scale"),
    }
}
