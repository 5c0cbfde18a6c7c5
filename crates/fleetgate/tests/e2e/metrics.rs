//! The gateway's own `GET /metrics` on its HTTP listener, scraped over HTTP and
//! parsed with a Prometheus text parser: the counters move as calls are allowed and
//! refused, behind the same token as the MCP endpoint. And the caller's W3C trace context:
//! a `traceparent` in a request's `_meta` reaches the downstream unchanged.

use crate::http::{CONFIG, with_reviewer};
use crate::httpkit::{HttpGateway, Raw, STATELESS};
use crate::support::{FleetDir, peer, root, serial, wait_until};
use serde_json::{Value, json};

/// The HTTP tests' roster and a reviewer that never starts: the inventory refuses every
/// mutation (`fleet_inventory_blocked`) while read-only calls pass. A short TTL, so renewals
/// happen within the test (every 2 s).
fn roster() -> String {
    with_reviewer(&CONFIG.replacen("[fleet]\n", "[fleet]\nheartbeat_ttl_seconds = 6\n", 1))
}

const TOKEN: &str = "tok-metrics-5e2d8c1b";
const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// `GET /metrics` with `headers`: the status and the body.
fn get_metrics(g: &HttpGateway, headers: &[(&str, &str)]) -> (u16, String) {
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let mut request = agent.get(format!("http://{}/metrics", g.addr));
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    // A failure names the gateway's own account (its stderr), not only the socket's error.
    let mut response = request.call().unwrap_or_else(|e| panic!("the gateway did not answer: {e}\n{}", g.log()));
    (response.status().as_u16(), response.body_mut().read_to_string().unwrap_or_default())
}

/// Scrape with the token and parse.
fn scrape(g: &HttpGateway) -> prometheus_parse::Scrape {
    let (status, text) = get_metrics(g, &[("Authorization", &format!("Bearer {TOKEN}"))]);
    assert_eq!(status, 200, "{text}");
    prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).expect("Prometheus text")
}

/// The value of the sample `name` with these labels (0 when there is none yet).
pub fn value(s: &prometheus_parse::Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    s.samples.iter().find(|x| x.metric == name && labels.iter().all(|(k, v)| x.labels.get(k) == Some(*v))).map_or(
        0.0,
        |x| match x.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            ref other => panic!("{name}: {other:?}"),
        },
    )
}

/// A stateless (2026-07-28) `tools/call` with a `traceparent` in its `_meta`.
fn call(raw: &Raw, id: u64, tool: &str, arguments: Value) -> Value {
    let message = json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": tool, "arguments": arguments,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": STATELESS,
            "io.modelcontextprotocol/clientInfo": { "name": "scraper-test", "version": "1.0" },
            "io.modelcontextprotocol/clientCapabilities": {},
            "traceparent": TRACEPARENT,
            "tracestate": "fleetgate=e2e",
        },
    }});
    let bearer = format!("Bearer {TOKEN}");
    let headers = [
        ("MCP-Protocol-Version", STATELESS),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", tool),
        ("Authorization", bearer.as_str()),
    ];
    let answer = raw.post(&message, &headers);
    assert_eq!(answer.status, 200, "{:?}", answer.body);
    answer.body["result"].clone()
}

fn text(result: &Value) -> String {
    result["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn metrics_count_allowed_and_refused_calls_behind_the_token_and_trace_context_reaches_the_downstream() {
    let _serial = serial();
    let f = FleetDir::new(&roster());
    let python = peer(".venv/bin/python").display().to_string();
    let server = root().join("tests/peers/meta_server.py").display().to_string();
    let g = HttpGateway::start_logging(&f, Some(TOKEN), &[python.as_str(), server.as_str()], "info");

    // Behind the token: 401 without it or with another; 403 for a foreign Host even with it.
    let (status, body) = get_metrics(&g, &[]);
    assert_eq!(status, 401, "{body}");
    assert_eq!(get_metrics(&g, &[("Authorization", "Bearer not-the-token")]).0, 401);
    let bearer = format!("Bearer {TOKEN}");
    assert_eq!(get_metrics(&g, &[("Authorization", &bearer), ("Host", "evil.example:80")]).0, 403);
    let before = scrape(&g);
    let read_only = [("tool_class", "read_only"), ("blocker", "none"), ("profile", "prgs-author")];
    let refused = [("tool_class", "mutating"), ("blocker", "fleet_inventory_blocked"), ("profile", "prgs-author")];
    assert_eq!(value(&before, "fleetgate_gate_decisions_total", &read_only), 0.0);
    assert_eq!(value(&before, "fleetgate_http_sessions_open", &[]), 0.0);

    // Two read-only calls, forwarded; the downstream sees the caller's trace context.
    let raw = Raw::new(&g);
    for id in [1, 2] {
        let result = call(&raw, id, "meta", json!({}));
        assert_ne!(result["isError"], true, "{result}");
        let seen: Value = serde_json::from_str(&text(&result)).unwrap_or_else(|e| panic!("{e}: {result}"));
        assert_eq!(seen["traceparent"], TRACEPARENT, "the downstream's _meta: {seen}");
        assert_eq!(seen["tracestate"], "fleetgate=e2e", "{seen}");
    }
    // One mutating call, refused by the gate (a configured member is not running).
    let result = call(&raw, 3, "stamp", json!({ "text": "x" }));
    assert_eq!(result["isError"], true, "{result}");
    assert!(text(&result).starts_with("fleet_inventory_blocked: `stamp` (mutating) was refused"), "{result}");

    let after = scrape(&g);
    assert_eq!(value(&after, "fleetgate_gate_decisions_total", &read_only), 2.0);
    assert_eq!(value(&after, "fleetgate_gate_decisions_total", &refused), 1.0);
    assert_eq!(value(&after, "fleetgate_gate_duration_seconds_count", &[]), 3.0, "the gate timed every decision");
    assert_eq!(value(&after, "fleetgate_forwarded_call_duration_seconds_count", &[]), 2.0, "refused: not forwarded");
    assert!(value(&after, "fleetgate_forwarded_call_duration_seconds_sum", &[]) > 0.0);
    assert_eq!(value(&after, "fleetgate_http_sessions_open", &[]), 1.0, "one stateless client");
    assert_eq!(value(&after, "fleetgate_downstream_quarantined", &[]), 0.0);
    assert_eq!(value(&after, "fleetgate_downstream_restarts_total", &[]), 0.0);
    assert_eq!(value(&after, "fleetgate_store_transient_failures_total", &[]), 0.0);

    // The stateless client's worker renews its lease every 2 s.
    assert!(
        wait_until(8.0, || value(&scrape(&g), "fleetgate_heartbeat_renewals_total", &[]) >= 1.0),
        "no renewal counted: {:?}",
        scrape(&g).samples.iter().filter(|s| s.metric.starts_with("fleetgate_heartbeat")).collect::<Vec<_>>()
    );
    // Another process takes the worker over (its fencing epoch moves on): the next renewal
    // is refused as fenced, and counted so.
    let fenced = [("blocker", "worker_fenced")];
    assert_eq!(value(&scrape(&g), "fleetgate_heartbeat_refusals_total", &fenced), 0.0);
    let store = rusqlite::Connection::open(f.store()).expect("the fleet's store");
    store.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
    let moved = store.execute("UPDATE workers SET fencing_epoch = fencing_epoch + 1", []).expect("fence the workers");
    assert!(moved >= 1, "the stateless client has a worker row");
    assert!(
        wait_until(8.0, || value(&scrape(&g), "fleetgate_heartbeat_refusals_total", &fenced) >= 1.0),
        "no fenced renewal counted: {:?}",
        scrape(&g).samples.iter().filter(|s| s.metric.starts_with("fleetgate_heartbeat")).collect::<Vec<_>>()
    );
    // OpenMetrics when the scraper asks for it.
    let (status, open) = get_metrics(&g, &[("Authorization", &bearer), ("Accept", "application/openmetrics-text")]);
    assert_eq!(status, 200);
    assert!(open.ends_with("# EOF\n"), "{open}");
    let stderr = g.stderr.clone();
    g.stop();
    assert!(!std::fs::read_to_string(stderr).unwrap().contains(TOKEN), "the token appears in the log");
}
