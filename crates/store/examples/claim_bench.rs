//! PR lease claims per second with 8 concurrent claimers, on SQLite and on
//! PostgreSQL. Not a test: `scripts/bench-claims` runs it (PostgreSQL through
//! `scripts/with-postgres`), and BENCHMARKS.md records the figures.
//!
//! ```text
//! claim_bench --sqlite DIR | --url URL  [--claimers 8] [--seconds 5]
//! ```
//!
//! Two rounds per engine: `spread` (each claim on a PR of its own: the guarded insert's
//! throughput) and `contended` (every claimer on one PR, a fresh PR each round of 8: one
//! wins, seven read the winner). Each claimer has its own store handle (connection), as
//! gateways do.

use fleetgate_core::Timestamp;
use fleetgate_core::workflow::{Actor, ClaimPlan, LeaseTerms, PrRef, Purpose};
use fleetgate_store::{PrClaimOutcome, PrLeaseClaim, Store};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

fn now() -> Timestamp {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after 1970").as_secs();
    Timestamp::from_unix(i64::try_from(secs).expect("in range"))
}

fn claim(who: usize, pr: u64) -> PrLeaseClaim {
    PrLeaseClaim {
        terms: LeaseTerms {
            pr: PrRef { binding: "bench/o/r".into(), pr },
            purpose: Purpose::Review,
            holder: Actor {
                worker: format!("w{who}"),
                profile: "p".into(),
                client: "bench".into(),
                session: format!("s{who}"),
                principal: None,
            },
            candidate_head: "0123456789abcdef0123456789abcdef01234567".into(),
            target_branch: Some("main".into()),
            target_branch_sha: None,
        },
        ttl_seconds: 600,
        plan: ClaimPlan::Claim { release: vec![] },
    }
}

fn run(open: &dyn Fn() -> Arc<dyn Store>, claimers: usize, seconds: f64, contended: bool) {
    let next = Arc::new(AtomicU64::new(1));
    let barrier = Arc::new(Barrier::new(claimers));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let handles: Vec<_> = (0..claimers)
        .map(|who| {
            let (store, next, barrier, stop) = (open(), Arc::clone(&next), Arc::clone(&barrier), Arc::clone(&stop));
            std::thread::spawn(move || {
                let (mut done, mut won, mut lat) = (0u64, 0u64, Vec::new());
                let mut round = 0u64;
                loop {
                    let pr = if contended {
                        // Every claimer of a round agrees whether it runs: one decides.
                        barrier.wait();
                        if who == 0 {
                            stop.store(Instant::now() >= deadline, Ordering::SeqCst);
                        }
                        barrier.wait();
                        if stop.load(Ordering::SeqCst) {
                            break;
                        }
                        round += 1;
                        1_000_000 + round
                    } else if Instant::now() >= deadline {
                        break;
                    } else {
                        next.fetch_add(1, Ordering::Relaxed)
                    };
                    let t = Instant::now();
                    match store.claim_pr_lease(&claim(who, pr), now()).expect("claim") {
                        PrClaimOutcome::Claimed(_) => won += 1,
                        PrClaimOutcome::Held(_) => {}
                    }
                    lat.push(t.elapsed());
                    done += 1;
                }
                (done, won, lat)
            })
        })
        .collect();
    let started = Instant::now();
    let (mut done, mut won, mut lat) = (0, 0, Vec::new());
    for h in handles {
        let (d, w, l) = h.join().expect("claimer");
        done += d;
        won += w;
        lat.extend(l);
    }
    let elapsed = started.elapsed().as_secs_f64().max(seconds);
    lat.sort();
    let pct = |p: f64| lat.get(((lat.len() as f64 - 1.0) * p) as usize).map_or(0.0, |d| d.as_secs_f64() * 1e3);
    println!(
        "{:9} claimers={claimers} claims/s={:.0} won={won} p50={:.2}ms p99={:.2}ms",
        if contended { "contended" } else { "spread" },
        done as f64 / elapsed,
        pct(0.5),
        pct(0.99)
    );
    // A contended round has exactly one winner.
    if contended {
        assert_eq!(won * claimers as u64, done, "one winner per round of {claimers}");
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut spec, mut claimers, mut seconds) = (String::new(), 8usize, 5.0f64);
    while let Some(a) = args.next() {
        let mut val = || args.next().expect("flag needs a value");
        match a.as_str() {
            "--sqlite" => spec = format!("{}/claims.sqlite3", val()),
            "--url" => spec = val(),
            "--claimers" => claimers = val().parse().expect("--claimers"),
            "--seconds" => seconds = val().parse().expect("--seconds"),
            other => panic!("unknown flag {other}"),
        }
    }
    assert!(!spec.is_empty(), "--sqlite DIR or --url URL");
    let open = || fleetgate_store::open(&spec).expect("open the store");
    println!("engine: {}", open().describe());
    run(&open, claimers, seconds, false);
    run(&open, claimers, seconds, true);
}
