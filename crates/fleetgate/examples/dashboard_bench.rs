//! The dashboard's figures (a benchmark, not a test): the page's first render and the
//! latency of a live update after a store change, on fleets of 5 and 1,000 members.
//!
//! Each fleet is real: N sleeping processes on an island (a PID namespace of their own,
//! see `tests/dashboard/fixture.rs`), a runtime row each written straight into the
//! store, and `fleetgate dashboard` at its default 1 s interval. Debian's headless
//! Chromium loads the page:
//!
//! * first render: from navigation start to the page's `fleet:first-render` mark (the
//!   first view received over `/events` and rendered), over fresh loads;
//! * update latency: a row's refresh time is rewritten in the store, and the clock runs
//!   until the page's `data-version` changes (the DOM rebuilt), observed in the page by a
//!   `MutationObserver`; changes are spaced at random so they fall anywhere in the
//!   dashboard's interval, which bounds the latency by design.
//!
//! `scripts/bench-dashboard` builds and runs it: `dashboard_bench FLEETGATE [N…]`.

#[path = "../tests/dashboard/fixture.rs"]
#[expect(dead_code, reason = "shared with the tests, which use all of it")]
mod fixture;

use fixture::{Browser, HEAD, Island, get, member, wait_until};
use fleetgate_core::Clock;
use fleetgate_core::runtime::{CohortSource, RuntimeRecord, RuntimeStatus};
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const LOADS: usize = 10;
const UPDATES: usize = 20;

fn main() {
    let mut args = std::env::args().skip(1);
    let fleetgate = PathBuf::from(args.next().expect("usage: dashboard_bench FLEETGATE [MEMBERS…]"));
    let sizes: Vec<usize> = args.map(|a| a.parse().expect("a member count")).collect();
    let sizes = if sizes.is_empty() { vec![5, 1000] } else { sizes };
    println!("| members | view JSON | one look (server) | first render p50 / max | update p50 / p95 / max |");
    println!("| ---: | ---: | ---: | ---: | ---: |");
    for n in sizes {
        let r = measure(&fleetgate, n);
        println!(
            "| {n} | {:.0} KiB | {:.1} ms | {:.0} / {:.0} ms | {:.0} / {:.0} / {:.0} ms |",
            r.json_bytes as f64 / 1024.0,
            r.look_ms,
            pct(&r.renders, 50.0),
            pct(&r.renders, 100.0),
            pct(&r.updates, 50.0),
            pct(&r.updates, 95.0),
            pct(&r.updates, 100.0),
        );
    }
}

struct Figures {
    json_bytes: usize,
    look_ms: f64,
    renders: Vec<f64>,
    updates: Vec<f64>,
}

fn pct(samples: &[f64], p: f64) -> f64 {
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    let i = ((p / 100.0) * (s.len() - 1) as f64).round() as usize;
    s[i]
}

fn wall_ms() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64() * 1000.0
}

fn measure(fleetgate: &std::path::Path, n: usize) -> Figures {
    let island = Island::start(fleetgate, n, &[]);
    let store = island.store();
    let now = fleetgate_host::clock::SystemClock.now();
    let mut first_row = None;
    for (i, (_, pid)) in island.pids() {
        let (namespace, profile, role) = member(i);
        let row = RuntimeRecord {
            runtime_id: format!("{namespace}:{pid}:bench"),
            namespace,
            profile,
            role,
            remote: None,
            org: None,
            repo: None,
            repository_root: None,
            pid,
            cohort_id: Some("bench".into()),
            cohort_source: CohortSource::ExplicitEnv,
            client_provenance: "sidecar".into(),
            boot_id: "bench".into(),
            startup_head: Some(HEAD.into()),
            daemon_start_head: None,
            transport: "stdio".into(),
            registered_at: now,
            last_heartbeat_at: Some(now),
            status: RuntimeStatus::Running,
            host: None,
        };
        store.upsert_runtime(&row).unwrap();
        first_row.get_or_insert(row.runtime_id);
    }
    let mut view = serde_json::Value::Null;
    let healthy = wait_until(60.0, || {
        view = serde_json::from_str(&get(island.addr, "/api/fleet", &[]).body).unwrap();
        view["facts"]["running_member_count"] == n && view["gate"]["open"] == true
    });
    assert!(healthy, "the fleet of {n} did not come up: {}", view["gate"]);
    let json_bytes = get(island.addr, "/api/fleet", &[]).body.len();

    let mut b = Browser::start();
    let mut renders = Vec::new();
    for _ in 0..LOADS {
        b.open(&island.url("/"));
        let js = "const m = performance.getEntriesByName('fleet:first-render')[0]; return m ? m.startTime : 0";
        renders.push(b.step(serde_json::json!({ "op": "wait", "js": js, "timeout": 30 }))["value"].as_f64().unwrap());
    }

    b.eval(
        "window.fgSeen = []; new MutationObserver(() => window.fgSeen.push({ v: Number(document.body.dataset.version), \
         t: Date.now() })).observe(document.body, { attributes: true, attributeFilter: ['data-version'] }); return true",
    );
    let id = first_row.unwrap();
    let mut updates = Vec::new();
    for k in 1..=UPDATES {
        std::thread::sleep(Duration::from_millis(300 + (fleetgate_host::nonce() % 1000) as u64));
        let seen = b.eval("return Number(document.body.dataset.version)").as_i64().unwrap();
        assert!(store.touch_runtime(&id, now.plus_seconds(k as i64)).unwrap());
        let changed = wall_ms();
        let js = format!("const e = window.fgSeen.find(e => e.v > {seen}); return e ? e.t : 0");
        let shown = b.step(serde_json::json!({ "op": "wait", "js": js, "timeout": 30 }))["value"].as_f64().unwrap();
        updates.push(shown - changed);
    }

    let metrics = get(island.addr, "/metrics", &[]).body;
    let sample =
        |name: &str| metrics.lines().find_map(|l| l.strip_prefix(name)?.trim().parse::<f64>().ok()).unwrap_or(f64::NAN);
    let look_ms = 1000.0 * sample("fleetgate_dashboard_refresh_duration_seconds_sum")
        / sample("fleetgate_dashboard_refresh_duration_seconds_count");
    Figures { json_bytes, look_ms, renders, updates }
}
