//! `/metrics`, scraped and parsed with a Prometheus text-format parser, follows the fleet:
//! a real process registered, a worker attached to it, then the process killed.

use crate::support::{Island, get, island, wait_until};
use prometheus_parse::{Scrape, Value};

fn scrape(island: &Island) -> Scrape {
    let answer = get(island.addr, "/metrics", &[]);
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(answer.header("content-type").unwrap().starts_with("text/plain; version=0.0.4"));
    Scrape::parse(answer.body.lines().map(|l| Ok(l.to_owned()))).unwrap()
}

/// The value of `name` (with `label=value`, when given); panics when absent.
fn value(s: &Scrape, name: &str, label: Option<(&str, &str)>) -> f64 {
    let sample = s
        .samples
        .iter()
        .find(|x| x.metric == name && label.is_none_or(|(k, v)| x.labels.get(k) == Some(v)))
        .unwrap_or_else(|| panic!("no sample {name} {label:?}"));
    match sample.value {
        Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => v,
        ref other => panic!("{name} is not a number: {other:?}"),
    }
}

fn members(s: &Scrape, health: &str) -> f64 {
    value(s, "fleetgate_fleet_members", Some(("health", health)))
}

fn workers(s: &Scrape, state: &str) -> f64 {
    value(s, "fleetgate_fleet_workers", Some(("state", state)))
}

/// Scrape until `cond` holds (bounded); the last scrape.
fn until(island: &Island, what: &str, cond: impl Fn(&Scrape) -> bool) -> Scrape {
    let mut last = scrape(island);
    let held = wait_until(10.0, || {
        last = scrape(island);
        cond(&last)
    });
    assert!(held, "{what}: {:?}", last.samples.iter().map(|s| (&s.metric, &s.labels, &s.value)).collect::<Vec<_>>());
    last
}

#[test]
fn fleet_gauges_follow_a_member_registered_then_killed() {
    let island = island(1, &["--interval", "0.2"]);
    // The process runs but no row claims it: missing member, unregistered process, gate closed.
    let s = scrape(&island);
    assert_eq!(value(&s, "fleetgate_fleet_configured_members", None), 1.0);
    assert_eq!((members(&s, "missing"), members(&s, "running")), (1.0, 0.0));
    assert_eq!(value(&s, "fleetgate_fleet_unregistered_processes", None), 1.0);
    assert_eq!(value(&s, "fleetgate_fleet_gate_open", None), 0.0);
    let updates_before = value(&s, "fleetgate_dashboard_updates_total", None);

    island.register(1);
    let pid = island.inner_pid(1).to_string();
    let worker = island.cli(&[
        "worker",
        "register",
        "--client",
        "claude-code",
        "--session",
        "s1",
        "--generation",
        "g1",
        "--role",
        "author",
        "--profile",
        "prgs-author",
        "--pid",
        &pid,
        "--json",
    ]);
    assert_eq!(worker.status.code(), Some(0), "{}", String::from_utf8_lossy(&worker.stderr));
    // The gauges are read at the scrape; the dashboard pushes a look on its own refresh, so
    // the test waits for that push too before the next change (under load a refresh may
    // otherwise see only the second).
    let s = until(&island, "registered: running, gate open, one live worker, a look pushed", |s| {
        members(s, "running") == 1.0
            && value(s, "fleetgate_fleet_gate_open", None) == 1.0
            && workers(s, "live") == 1.0
            && value(s, "fleetgate_dashboard_updates_total", None) > updates_before
    });
    assert_eq!(members(&s, "missing"), 0.0);
    assert_eq!(value(&s, "fleetgate_fleet_unregistered_processes", None), 0.0);

    island.kill(1);
    let s = until(&island, "killed: stale and missing, gate closed, the worker's pid gone, a look pushed", |s| {
        members(s, "stale") == 1.0
            && members(s, "missing") == 1.0
            && value(s, "fleetgate_fleet_gate_open", None) == 0.0
            && workers(s, "expired") == 1.0
            && value(s, "fleetgate_dashboard_updates_total", None) >= updates_before + 2.0
    });
    assert_eq!(members(&s, "running"), 0.0);
    assert_eq!(workers(&s, "live"), 0.0);
    let updates = value(&s, "fleetgate_dashboard_updates_total", None);
    assert!(updates >= updates_before + 2.0, "registered, then killed: two changes at least ({updates})");
    assert!(value(&s, "fleetgate_dashboard_refreshes_total", None) >= updates);
    assert!(s.samples.iter().any(|x| x.metric == "fleetgate_dashboard_refresh_duration_seconds_count"
        || x.metric == "fleetgate_dashboard_refresh_duration_seconds"));
}

#[test]
fn prometheus_gets_openmetrics_when_it_asks() {
    let island = island(1, &[]);
    let accept = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5";
    let answer = get(island.addr, "/metrics", &[("Accept", accept)]);
    assert_eq!(answer.status, 200);
    assert!(answer.header("content-type").unwrap().starts_with("application/openmetrics-text"));
    assert!(answer.body.ends_with("# EOF\n"), "{}", answer.body);
    assert!(answer.body.contains("fleetgate_fleet_gate_open 0"));
}
