//! A stdio gateway's observability: its spans exported over OTLP/HTTP to a real receiver
//! (`tests/peers/otlp_receiver.py`, decoding with the official `opentelemetry-proto`
//! types) and linked to the caller's and the downstream's traces; its `/metrics` served on
//! `--metrics-listen`, scraped and parsed; and the settings refused at startup.

use crate::http::{CONFIG, with_reviewer};
use crate::metrics::value;
use crate::stdiokit::StdioGateway;
use crate::support::{FleetDir, bin, peer, root, serial, wait_until};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

/// The meta server (read-only `meta` echoes its `_meta`, mutating `stamp`) as the downstream.
fn meta_server() -> Vec<String> {
    vec![
        peer(".venv/bin/python").display().to_string(),
        root().join("tests/peers/meta_server.py").display().to_string(),
    ]
}

/// `KEY=V…` (env), then the gateway's argv with `flags` before the downstream.
fn argv(f: &FleetDir, env: &[&str], flags: &[&str]) -> Vec<String> {
    let mut argv: Vec<String> = env.iter().map(|s| (*s).to_owned()).collect();
    argv.extend(f.serve_argv("prgs-author", "c-otel", &[]));
    argv.extend(flags.iter().map(|s| (*s).to_owned()));
    argv.push("--".into());
    argv.extend(meta_server());
    argv
}

/// A `tools/call` carrying the caller's trace context.
fn traced_call(g: &mut StdioGateway, tool: &str, arguments: Value) -> Value {
    let meta = json!({"traceparent": format!("00-{TRACE_ID}-{CALLER_SPAN}-01"), "tracestate": "caller=e2e"});
    let answer = g.request("tools/call", json!({"name": tool, "arguments": arguments, "_meta": meta}));
    answer["result"].clone()
}

fn text(result: &Value) -> String {
    result["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

/// The OTLP receiver, its spans appended to a file.
struct Receiver {
    child: Child,
    port: u16,
    out: std::path::PathBuf,
}

impl Receiver {
    fn start(f: &FleetDir) -> Self {
        let out = f.dir.path().join("spans.jsonl");
        let mut child = Command::new(peer(".venv/bin/python"))
            .arg(root().join("tests/peers/otlp_receiver.py"))
            .arg(&out)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port = line.trim().strip_prefix("listening ").and_then(|p| p.parse().ok());
        Self { port: port.unwrap_or_else(|| panic!("the receiver did not start: {line:?}")), child, out }
    }

    fn spans(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.out).unwrap_or_default();
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn otlp_export_joins_the_callers_trace_and_the_downstream_nests_under_forward() {
    let _serial = serial();
    // A short TTL: the worker renews its lease every second, within the test.
    let f = FleetDir::new(&with_reviewer(&CONFIG.replacen("[fleet]\n", "[fleet]\nheartbeat_ttl_seconds = 3\n", 1)));
    let receiver = Receiver::start(&f);
    let endpoint = format!("OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:{}", receiver.port);
    let stderr = f.dir.path().join("gateway.stderr");
    let env = [endpoint.as_str(), "OTEL_SERVICE_NAME=fleetgate-e2e"];
    let mut g = StdioGateway::start_logging(&argv(&f, &env, &[]), Some(&stderr));
    assert!(
        g.logged("fleetgate serve: exporting spans to ").starts_with(&format!(
            "http://127.0.0.1:{}/v1/traces (OTLP/HTTP, service.name fleetgate-e2e)",
            receiver.port
        ))
    );

    // A read-only call, forwarded: the downstream's `traceparent` names the gateway's span.
    let result = traced_call(&mut g, "meta", json!({}));
    assert_ne!(result["isError"], true, "{result}");
    let seen: Value = serde_json::from_str(&text(&result)).unwrap_or_else(|e| panic!("{e}: {result}"));
    let downstream_parent = seen["traceparent"].as_str().unwrap_or_else(|| panic!("no traceparent: {seen}"));
    let parts: Vec<&str> = downstream_parent.split('-').collect();
    assert_eq!((parts.len(), parts[0], parts[1], parts[3]), (4, "00", TRACE_ID, "01"), "{downstream_parent}");
    assert_ne!(parts[2], CALLER_SPAN, "the gateway forwarded the caller's span id, not its own");
    assert_eq!(seen["tracestate"], "caller=e2e", "{seen}");
    // A mutating call, refused by the gate after reading the store.
    let result = traced_call(&mut g, "stamp", json!({"text": "x"}));
    assert_eq!(result["isError"], true, "{result}");

    // Wait (bounded) for a renewal of the worker's lease, read from the store.
    let store = rusqlite::Connection::open(f.store()).expect("the fleet's store");
    let renewed = || {
        store.query_row("SELECT COALESCE(MAX(renewal_count), 0) FROM workers", [], |r| r.get::<_, i64>(0)).unwrap_or(0)
            > 0
    };
    assert!(wait_until(10.0, renewed), "the worker's lease was not renewed");

    // The orderly stop flushes the batch exporter before the process exits.
    assert!(g.stop().success());
    let spans = receiver.spans();
    let traced: Vec<&Value> = spans.iter().filter(|s| s["trace_id"] == TRACE_ID).collect();
    let named = |name: &str| traced.iter().filter(|s| s["name"] == name).copied().collect::<Vec<_>>();
    let calls = named("tools/call");
    assert_eq!(calls.len(), 2, "{spans:#?}");
    for call in &calls {
        assert_eq!(call["parent_span_id"], CALLER_SPAN, "tools/call continues the caller's span: {call}");
        assert_eq!(call["service_name"], "fleetgate-e2e");
    }
    let by_id: BTreeMap<&str, &Value> = traced.iter().map(|s| (s["span_id"].as_str().unwrap(), *s)).collect();
    let parent_name = |s: &Value| by_id.get(s["parent_span_id"].as_str().unwrap()).map(|p| p["name"].clone());
    let forwards = named("forward");
    assert_eq!(forwards.len(), 1, "only the allowed call is forwarded: {spans:#?}");
    assert_eq!(parent_name(forwards[0]), Some(json!("tools/call")));
    assert_eq!(forwards[0]["span_id"], parts[2], "the downstream's parent is the forward span");
    // Each call was gated (a decision from memory first, the full one when it needs the store).
    let gates = named("gate");
    assert!(gates.iter().all(|s| parent_name(s) == Some(json!("tools/call"))), "{gates:#?}");
    for call in &calls {
        assert!(gates.iter().any(|s| s["parent_span_id"] == call["span_id"]), "{call} has no gate span: {gates:#?}");
    }
    let stores = named("store");
    assert!(!stores.is_empty(), "the refused mutating call read the store: {spans:#?}");
    assert!(stores.iter().all(|s| parent_name(s) == Some(json!("gate"))), "{stores:#?}");
    // A renewal is a trace of its own: a root `heartbeat` span naming the worker, the store's
    // `heartbeat` operation inside it.
    let all: BTreeMap<&str, &Value> = spans.iter().map(|s| (s["span_id"].as_str().unwrap(), s)).collect();
    let beats: Vec<&Value> = spans.iter().filter(|s| s["name"] == "heartbeat").collect();
    assert!(!beats.is_empty(), "no heartbeat span: {spans:#?}");
    assert!(beats.iter().all(|s| s["parent_span_id"] == "" && s["attributes"]["worker"] != ""), "{beats:#?}");
    let renewals: Vec<&Value> =
        spans.iter().filter(|s| s["name"] == "store" && s["attributes"]["op"] == "heartbeat").collect();
    assert!(!renewals.is_empty(), "no store span of a renewal: {spans:#?}");
    for renewal in renewals {
        let parent = all.get(renewal["parent_span_id"].as_str().unwrap()).map(|p| p["name"].clone());
        assert_eq!(parent, Some(json!("heartbeat")), "a renewal's store span is not inside its heartbeat: {renewal}");
    }
    assert!(!g_log_has_failure(&stderr), "an export failed");
}

fn g_log_has_failure(stderr: &std::path::Path) -> bool {
    std::fs::read_to_string(stderr).unwrap_or_default().contains("OpenTelemetry export to")
}

#[test]
fn a_collector_that_is_down_costs_a_logged_warning_and_no_call() {
    let _serial = serial();
    let f = FleetDir::new(&with_reviewer(CONFIG));
    // A port nobody listens on: bound, read, closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let endpoint = format!("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://127.0.0.1:{port}/v1/traces");
    let stderr = f.dir.path().join("gateway.stderr");
    let mut g = StdioGateway::start_logging(&argv(&f, &[endpoint.as_str()], &[]), Some(&stderr));
    for _ in 0..3 {
        let result = traced_call(&mut g, "meta", json!({}));
        assert_ne!(result["isError"], true, "{result}");
    }
    assert!(g.stop().success());
    let log = std::fs::read_to_string(&stderr).unwrap();
    let warnings = log.lines().filter(|l| l.contains("OpenTelemetry export to")).count();
    assert_eq!(warnings, 1, "one failure logged, rate-limited: {log}");
}

#[test]
fn a_stdio_gateway_serves_its_metrics_on_metrics_listen() {
    let _serial = serial();
    let f = FleetDir::new(&with_reviewer(CONFIG));
    let stderr = f.dir.path().join("gateway.stderr");
    let token = "FLEETGATE_METRICS_TOKEN=tok-stdio-metrics";
    let mut g = StdioGateway::start_logging(&argv(&f, &[token], &["--metrics-listen", "127.0.0.1:0"]), Some(&stderr));
    let url = format!("http://{}", g.logged("fleetgate serve: metrics on http://"));
    assert!(url.ends_with("/metrics"), "{url}");
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let get = |headers: &[(&str, &str)]| {
        let mut request = agent.get(&url);
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        let mut response = request.call().expect("the metrics listener answers");
        (response.status().as_u16(), response.body_mut().read_to_string().unwrap_or_default())
    };
    let scrape = || {
        let (status, text) = get(&[("Authorization", "Bearer tok-stdio-metrics")]);
        assert_eq!(status, 200, "{text}");
        prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).expect("Prometheus text")
    };
    assert_eq!(get(&[]).0, 401);
    assert_eq!(get(&[("Authorization", "Bearer nope")]).0, 401);
    assert_eq!(get(&[("Authorization", "Bearer tok-stdio-metrics"), ("Host", "evil.example:80")]).0, 403);

    let read_only = [("tool_class", "read_only"), ("blocker", "none"), ("profile", "prgs-author")];
    let refused = [("tool_class", "mutating"), ("blocker", "fleet_inventory_blocked"), ("profile", "prgs-author")];
    let before = scrape();
    assert_eq!(value(&before, "fleetgate_gate_decisions_total", &read_only), 0.0);
    for _ in 0..2 {
        assert_ne!(traced_call(&mut g, "meta", json!({}))["isError"], true);
    }
    assert_eq!(traced_call(&mut g, "stamp", json!({"text": "x"}))["isError"], true);
    let after = scrape();
    assert_eq!(value(&after, "fleetgate_gate_decisions_total", &read_only), 2.0);
    assert_eq!(value(&after, "fleetgate_gate_decisions_total", &refused), 1.0);
    assert_eq!(value(&after, "fleetgate_forwarded_call_duration_seconds_count", &[]), 2.0);
    // Nothing but /metrics is served.
    assert_eq!(get_path(&agent, &url.replace("/metrics", "/mcp")), 404);
    assert!(g.stop().success());
    let log = std::fs::read_to_string(&stderr).unwrap();
    assert!(!log.contains("tok-stdio-metrics"), "the token appears in the log");
    assert!(
        wait_until(5.0, || std::net::TcpStream::connect(url_addr(&url)).is_err()),
        "the listener outlived the gateway"
    );
}

fn get_path(agent: &ureq::Agent, url: &str) -> u16 {
    agent.get(url).header("Authorization", "Bearer tok-stdio-metrics").call().unwrap().status().as_u16()
}

fn url_addr(url: &str) -> String {
    url.trim_start_matches("http://").trim_end_matches("/metrics").to_owned()
}

/// `fleetgate serve` with `env` and `flags`: exits 1 before serving, saying `says`.
fn refused(f: &FleetDir, env: &[(&str, &str)], flags: &[&str], says: &str) {
    let out = Command::new(bin())
        .env_clear()
        .envs(env.iter().copied())
        .arg("--store")
        .arg(f.store())
        .arg("--config")
        .arg(f.config())
        .args(["serve", "--profile", "prgs-author"])
        .args(flags)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{env:?} {flags:?}: {stderr}");
    assert!(out.stdout.is_empty(), "stdout carries only MCP frames: {:?}", String::from_utf8_lossy(&out.stdout));
    assert!(stderr.contains(says), "{env:?} {flags:?}: {stderr}");
}

#[test]
fn bad_export_and_metrics_settings_are_refused_at_startup() {
    let _serial = serial();
    let f = FleetDir::new(CONFIG);
    let endpoint = "OTEL_EXPORTER_OTLP_ENDPOINT";
    refused(&f, &[(endpoint, "collector:4318")], &[], "OTEL_EXPORTER_OTLP_ENDPOINT \"collector:4318\" is not a usable");
    refused(&f, &[(endpoint, "https://c:4318")], &[], "https is not supported");
    refused(
        &f,
        &[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:4318/v1/traces?x=1")],
        &[],
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    );
    refused(&f, &[], &["--metrics-listen", "localhost"], "--metrics-listen \"localhost\" is not an address:port");
    refused(&f, &[], &["--metrics-listen", "0.0.0.0:0"], "refusing to serve metrics on 0.0.0.0:0: not a loopback");
    refused(&f, &[], &["--metrics-listen", "0.0.0.0:0", "--allow-remote"], "set FLEETGATE_METRICS_TOKEN");
    refused(&f, &[("FLEETGATE_METRICS_TOKEN", "")], &["--metrics-listen", "127.0.0.1:0"], "is set but empty");
    refused(
        &f,
        &[],
        &["--transport", "http", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"],
        "--metrics-listen is for --transport stdio",
    );
    let bad_roster = FleetDir::new(&format!("{CONFIG}\n[tracing]\notlp_endpoint = \"https://c\"\n"));
    refused(&bad_roster, &[], &[], "[tracing] otlp_endpoint \"https://c\"");
}
