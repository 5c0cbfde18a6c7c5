//! Inventory costs, measured side by side in one run (not a test; see
//! BENCHMARKS.md): classifying 10,000 runtime rows, and this host's process
//! scan against `ps -eo pid,lstart,args`.
//!
//! cargo run --release -p fleetgate --example inventory_bench

use fleetgate_core::Timestamp;
use fleetgate_core::inventory::{InventoryInput, PidProbe, classify_fleet_inventory};
use fleetgate_core::procmatch::FleetMatcher;
use fleetgate_core::runtime::{CohortSource, ObservedProcess, ProcessScan, RosterMember, RuntimeRecord, RuntimeStatus};
use fleetgate_host::procfs::{ProcFs, scan_fleet};
use std::time::{Duration, Instant};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time<T>(runs: usize, mut f: impl FnMut() -> T) -> Duration {
    median(
        (0..runs)
            .map(|_| {
                let t = Instant::now();
                std::hint::black_box(f());
                t.elapsed()
            })
            .collect(),
    )
}

fn main() {
    let roster: Vec<RosterMember> = (0..1000)
        .map(|i| RosterMember {
            namespace: format!("ns-{i}"),
            profile: format!("p-{i}"),
            role: "author".into(),
            replicas: 1,
        })
        .collect();
    let reg = Timestamp::from_unix(1_800_000_000);
    let rows: Vec<RuntimeRecord> = (0..10_000)
        .map(|i| RuntimeRecord {
            runtime_id: format!("ns-{}:{}:boot", i % 1000, 10_000 + i),
            namespace: format!("ns-{}", i % 1000),
            profile: format!("p-{}", i % 1000),
            role: "author".into(),
            remote: Some("r".into()),
            org: Some("o".into()),
            repo: Some("x".into()),
            repository_root: None,
            pid: 10_000 + i,
            cohort_id: Some(format!("ppid:{}", i % 3)),
            cohort_source: CohortSource::ParentProcess,
            client_provenance: "client_managed".into(),
            boot_id: "boot".into(),
            startup_head: Some("head".into()),
            daemon_start_head: None,
            transport: "stdio".into(),
            registered_at: reg,
            last_heartbeat_at: Some(reg),
            status: RuntimeStatus::Running,
            host: None,
        })
        .collect();
    let scan = ProcessScan::of(
        rows.iter()
            .map(|r| ObservedProcess {
                pid: r.pid,
                started_at: reg.plus_seconds(-5),
                command: "mcp_server.py".into(),
                uid: None,
            })
            .collect(),
    );
    let classify = time(21, || {
        classify_fleet_inventory(
            &InventoryInput {
                roster: &roster,
                runtime_rows: &rows,
                process_scan: &scan,
                expected_binding: None,
                now: reg.plus_seconds(60),
                registry_available: true,
                registry_error: None,
                answering_namespace: None,
                hosts: Default::default(),
                peers: Default::default(),
            },
            &|_| PidProbe::Alive,
        )
    });
    let matcher = FleetMatcher::new(&["mcp_server.py".to_owned()]);
    let procs = ProcFs::default();
    let scan_t = time(21, || scan_fleet(&procs, &matcher));
    let ps_t = time(21, || std::process::Command::new("ps").args(["-eo", "pid,lstart,args"]).output().expect("ps"));
    let nproc = std::fs::read_dir("/proc")
        .unwrap()
        .filter(|e| e.as_ref().is_ok_and(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok()))
        .count();
    println!("classify 10000 rows (3 cohorts, 1000 profiles): median {:.2} ms", classify.as_secs_f64() * 1e3);
    println!(
        "process scan of this host ({nproc} processes): fleetgate /proc {:.2} ms, ps -eo pid,lstart,args {:.2} ms, ratio {:.2}x",
        scan_t.as_secs_f64() * 1e3,
        ps_t.as_secs_f64() * 1e3,
        ps_t.as_secs_f64() / scan_t.as_secs_f64()
    );
}
