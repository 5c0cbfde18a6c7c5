//! Renewal throughput and fairness on SQLite, fenced vs a plain UPDATE, with
//! N writer processes on one file. Not a test: see BENCHMARKS.md.
//!
//! cargo run --release -p fleetgate-store --example renew_bench -- --mode fenced --procs 8 --seconds 5

mod bench;

use bench::{now, registration};
use fleetgate_core::worker::HeartbeatRequest;
use fleetgate_store::prelude::*;
use fleetgate_store::sqlite::SqliteStore;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const ID: &str = "wrk-bench";

struct Opts {
    mode: String,
    procs: usize,
    seconds: f64,
    db: Option<PathBuf>,
    child: bool,
}

fn opts() -> Opts {
    let mut o = Opts { mode: "fenced".into(), procs: 1, seconds: 5.0, db: None, child: false };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().expect("flag needs a value");
        match a.as_str() {
            "--mode" => o.mode = val(),
            "--procs" => o.procs = val().parse().expect("--procs"),
            "--seconds" => o.seconds = val().parse().expect("--seconds"),
            "--db" => o.db = Some(PathBuf::from(val())),
            "--child" => o.child = true,
            other => panic!("unknown flag {other}"),
        }
    }
    o
}

fn child(o: &Opts) {
    let db = o.db.as_deref().expect("--db");
    let until = Instant::now() + Duration::from_secs_f64(o.seconds);
    let (mut commits, mut worst) = (0u64, Duration::ZERO);
    let mut step: Box<dyn FnMut()> = match o.mode.as_str() {
        "plain" => {
            let conn = rusqlite::Connection::open(db).unwrap();
            conn.busy_timeout(Duration::from_secs(30)).unwrap();
            conn.execute_batch("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;").unwrap();
            Box::new(move || {
                // The value changes every time: SQLite skips writing a row whose
                // bytes are unchanged, which would measure no commit at all.
                conn.prepare_cached("UPDATE plain SET beat = beat + 1, at = ?1 WHERE id = 1")
                    .unwrap()
                    .execute([now().to_string()])
                    .unwrap();
            })
        }
        "plain-workers" => {
            let conn = rusqlite::Connection::open(db).unwrap();
            conn.busy_timeout(Duration::from_secs(30)).unwrap();
            conn.execute_batch("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;").unwrap();
            Box::new(move || {
                conn.prepare_cached("UPDATE workers SET last_heartbeat_at = ?1, renewal_count = renewal_count + 1 WHERE worker_identity = ?2")
                    .unwrap()
                    .execute([now().to_string(), ID.to_owned()])
                    .unwrap();
            })
        }
        _ => {
            let store = SqliteStore::open(db).unwrap();
            let req = HeartbeatRequest { worker_identity: ID.into(), fencing_epoch: 1, ..Default::default() };
            Box::new(move || assert!(store.heartbeat(&req, now()).unwrap().renewed))
        }
    };
    while Instant::now() < until {
        let t = Instant::now();
        step();
        worst = worst.max(t.elapsed());
        commits += 1;
    }
    println!("{commits} {}", worst.as_micros());
}

fn setup(mode: &str, db: &Path) {
    let store = SqliteStore::open(db).unwrap();
    if mode == "plain" {
        let conn = rusqlite::Connection::open(db).unwrap();
        conn.execute_batch(
            "CREATE TABLE plain (id INTEGER PRIMARY KEY, beat INTEGER, at TEXT); INSERT INTO plain VALUES (1, 0, '');",
        )
        .unwrap();
    } else {
        store.register(&registration(ID, 900.0), now()).unwrap();
    }
}

fn main() {
    let o = opts();
    if o.child {
        return child(&o);
    }
    let dir = std::env::temp_dir().join(format!("fleetgate-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("bench.sqlite3");
    setup(&o.mode, &db);
    let exe = std::env::current_exe().unwrap();
    let kids: Vec<_> = (0..o.procs)
        .map(|_| {
            Command::new(&exe)
                .args(["--child", "--mode", &o.mode, "--seconds", &o.seconds.to_string(), "--db"])
                .arg(&db)
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut per: Vec<(u64, u64)> = kids
        .into_iter()
        .map(|k| {
            let out = String::from_utf8(k.wait_with_output().unwrap().stdout).unwrap();
            let mut it = out.split_whitespace().map(|n| n.parse::<u64>().unwrap());
            (it.next().unwrap(), it.next().unwrap())
        })
        .collect();
    per.sort();
    let total: u64 = per.iter().map(|p| p.0).sum();
    let (slow, fast) = (per[0].0, per[per.len() - 1].0);
    let worst_ms = per.iter().map(|p| p.1).max().unwrap() as f64 / 1e3;
    println!(
        "mode={} procs={} seconds={} commits/s={:.0} slowest/fastest={:.2} (min {} max {}) worst_latency_ms={:.1}",
        o.mode,
        o.procs,
        o.seconds,
        total as f64 / o.seconds,
        slow as f64 / fast.max(1) as f64,
        slow,
        fast,
        worst_ms
    );
    let _ = std::fs::remove_dir_all(&dir);
}
