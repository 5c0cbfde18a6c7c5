//! A wrapped server is its gateway's member (issue 34, A): the seed's `mcp_server.py`, which
//! the default `process_match` names, behind a stdio gateway and behind an HTTP gateway (each
//! started through the guard), leaves each fleet's gate open; a bare `python mcp_server.py`
//! beside them, no gateway above it, closes both, named.

use crate::httpkit::HttpGateway;
use crate::support::{Client, FleetDir, peer, roster, serial, wait_until};
use serde_json::json;
use std::process::{Command, Stdio};

/// tests/peers/minimal_server.py (one unannotated tool, `stamp`: gated as mutating) as
/// `mcp_server.py` in the fleet's directory, and the file its stamps go to.
fn mcp_server_py(f: &FleetDir) -> (String, String) {
    let script = f.dir.path().join("mcp_server.py");
    std::fs::copy(peer("tests/peers/minimal_server.py"), &script).unwrap();
    (script.display().to_string(), f.dir.path().join("stamps.txt").display().to_string())
}

/// The fleet's inventory once `ready` holds of it (bounded), or the last one read.
fn inventory_until(f: &FleetDir, ready: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let mut v = serde_json::Value::Null;
    wait_until(20.0, || {
        v = f.cli(&["inventory", "--json"]);
        ready(&v)
    });
    v
}

fn unregistered(v: &serde_json::Value) -> Vec<i64> {
    v["unregistered_processes"]
        .as_array()
        .map_or_else(Vec::new, |a| a.iter().filter_map(|p| p["pid"].as_i64()).collect())
}

#[test]
fn a_wrapped_mcp_server_py_leaves_its_gate_open_and_a_bare_one_closes_it() {
    let _serial = serial();
    let python = peer(".venv/bin/python").display().to_string();

    // Behind a stdio gateway.
    let stdio_fleet = FleetDir::new(&roster("wrapped-stdio", &["author"], ""));
    let (script, stamps) = mcp_server_py(&stdio_fleet);
    // Through a launcher script, as a client configuration does: the client's own command
    // line does not name the server (the SDK driver's would, with the gateway's argv).
    let launcher = stdio_fleet.dir.path().join("launch-gateway");
    let argv = stdio_fleet.serve_argv("prgs-author", "wrapped", &[&python, &script, &stamps]);
    std::fs::write(&launcher, format!("exec /usr/bin/env '{}'\n", argv.join("' '"))).unwrap();
    let mut stdio = Client::start(&["/bin/sh".to_owned(), launcher.display().to_string()]);
    assert!(stdio.tools().iter().any(|t| t["name"] == "stamp"), "the downstream serves");

    // Behind an HTTP gateway: each session's own downstream.
    let http_fleet = FleetDir::new(&roster("wrapped-http", &["author"], ""));
    let (http_script, http_stamps) = mcp_server_py(&http_fleet);
    let g = HttpGateway::start(&http_fleet, None, &[&python, &http_script, &http_stamps]);
    let mut http = Client::start_url(&g.url(), &["MCP_DRIVE_CLIENT_NAME=wrapped-http".to_owned()]);
    assert!(http.tools().iter().any(|t| t["name"] == "stamp"), "the session's downstream serves");

    for f in [&stdio_fleet, &http_fleet] {
        let v = inventory_until(f, |v| v["mutation_gate_satisfied"] == true);
        assert_eq!(
            v["mutation_gate_satisfied"], true,
            "a wrapped server closed its own gate: {}",
            v["blocked_reasons"]
        );
        assert!(unregistered(&v).is_empty(), "{v}");
        assert!(v["duplicate_members"].as_array().unwrap().is_empty(), "{v}");
    }
    let (err, text, _) = stdio.call("stamp", json!({ "text": "stdio" }));
    assert!(!err, "refused behind the stdio gateway: {text}");
    let (err, text, _) = http.call("stamp", json!({ "text": "http" }));
    assert!(!err, "refused behind the HTTP gateway: {text}");
    assert_eq!(std::fs::read_to_string(&stamps).unwrap(), "stdio\n");
    assert_eq!(std::fs::read_to_string(&http_stamps).unwrap(), "http\n");

    // A bare one beside them (held open by its stdin): no gateway above it.
    let mut bare = Command::new(&python)
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = i64::from(bare.id());
    for f in [&stdio_fleet, &http_fleet] {
        let v = inventory_until(f, |v| unregistered(v).contains(&pid));
        assert_eq!(v["mutation_gate_satisfied"], false, "{v}");
        assert_eq!(unregistered(&v), [pid], "{v}");
        let reasons = v["blocked_reasons"].to_string();
        assert!(reasons.contains(&format!("unregistered fleet process pid {pid}")), "{reasons}");
        assert!(reasons.contains("mcp_server.py"), "{reasons}");
    }
    let (err, text, _) = stdio.call("stamp", json!({ "text": "refused" }));
    assert!(err && text.starts_with("fleet_inventory_blocked"), "{text}");
    let (err, text, _) = http.call("stamp", json!({ "text": "refused" }));
    assert!(err && text.starts_with("fleet_inventory_blocked"), "{text}");
    assert_eq!(std::fs::read_to_string(&stamps).unwrap(), "stdio\n", "a refused call never ran");

    bare.kill().unwrap();
    bare.wait().unwrap();
    drop(http);
    g.stop();
    stdio.close();
}
