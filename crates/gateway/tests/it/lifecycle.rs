//! The downstream child's life and the gateway's: a child that exits at once is
//! quarantined and its tools say so while control tools keep answering; a killed child is
//! restarted and re-initialised; SIGTERM and SIGKILL of the gateway leave no child behind.

use crate::harness::{ANSWER, RawGateway, State, alive, mcp_server_git, path_text, wait_until};
use serde_json::{Value, json};
use std::time::Duration;

/// The control tool's view of the downstream.
fn downstream_status(gateway: &mut RawGateway, id: u64) -> Value {
    let answer = gateway.request(id, "tools/call", json!({"name": "fleet_get_runtime_context", "arguments": {}}));
    let text = answer["result"]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("no text: {answer}"));
    serde_json::from_str::<Value>(text).expect("the runtime context is JSON")["downstream"].clone()
}

fn git_gateway(state: &State, extra: &[&str]) -> RawGateway {
    RawGateway::start(state, extra, &[path_text(&mcp_server_git())])
}

#[test]
fn a_downstream_that_exits_at_once_is_quarantined_and_control_tools_still_answer() {
    let state = State::new();
    // Exit status 0 counts too: the downstream is a permanent child. The real 300 s
    // quarantine: it must hold for the whole test, however slow the machine.
    let downstream = ["sh".to_owned(), "-c".to_owned(), "exit 0".to_owned()];
    let mut gateway =
        RawGateway::start(&state, &["--backoff-ms", "10", "--budget", "2", "--quarantine-s", "300"], &downstream);
    gateway.initialize();
    let mut id = 10;
    assert!(
        wait_until(ANSWER, || {
            id += 1;
            downstream_status(&mut gateway, id)["state"] == "quarantined"
        }),
        "the downstream was never quarantined"
    );
    let status = downstream_status(&mut gateway, 100);
    assert!(status["retry_in_s"].as_f64().unwrap() > 200.0, "{status}");
    assert!(status["quarantined_until"].as_str().unwrap().ends_with('Z'), "{status}");
    assert!(status["last_exit"].as_str().unwrap().contains("permanent"), "{status}");

    let call = gateway.request(101, "tools/call", json!({"name": "git_status", "arguments": {"repo_path": "/"}}));
    assert_eq!(call["result"]["isError"], true, "{call}");
    let text = call["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("downstream_unavailable: `git_status`"), "{text}");
    assert!(text.contains("quarantined") && text.contains("retry in"), "{text}");

    let listed = gateway.request(102, "tools/list", json!({}));
    let names: Vec<&str> =
        listed["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["fleet_get_runtime_context"], "while quarantined only the control tools are listed: {listed}");
    // No downstream call was put to the gate: the gateway answered it.
    assert!(!state.events().iter().any(|e| e.starts_with("decide")), "{:?}", state.events());
    // The observer (the fixture's metrics) was told: a restart within the budget, then the
    // quarantine, once.
    let events = state.events();
    assert!(events.iter().any(|e| e == "observed restart"), "{events:?}");
    assert_eq!(events.iter().filter(|e| *e == "observed quarantined true").count(), 1, "{events:?}");
    assert!(!events.iter().any(|e| e == "observed quarantined false"), "{events:?}");
}

#[test]
fn a_killed_downstream_is_restarted_and_reinitialised() {
    let state = State::new();
    let repo = tempfile::tempdir().unwrap();
    git_init(repo.path());
    let mut gateway = git_gateway(&state, &["--backoff-ms", "50"]);
    gateway.initialize();
    let first = downstream_status(&mut gateway, 2);
    assert_eq!(first["state"], "running", "{first}");
    let pid = u32::try_from(first["pid"].as_u64().unwrap()).unwrap();
    kill(pid, "KILL");
    let mut id = 10;
    let mut status = Value::Null;
    assert!(
        wait_until(ANSWER, || {
            id += 1;
            status = downstream_status(&mut gateway, id);
            status["state"] == "running" && status["pid"] != json!(pid)
        }),
        "the downstream did not come back: {status}"
    );
    assert_eq!(status["restarts"], 1, "{status}");
    assert!(status["last_exit"].as_str().unwrap().contains("SIGKILL"), "{status}");
    assert_eq!(state.events().iter().filter(|e| *e == "observed restart").count(), 1, "{:?}", state.events());
    assert!(!alive(pid));
    let repo_path = path_text(repo.path());
    let call = gateway.request(200, "tools/call", json!({"name": "git_status", "arguments": {"repo_path": repo_path}}));
    assert_eq!(call["result"]["isError"], false, "{call}");
}

#[test]
fn sigterm_stops_the_downstream_and_exits_zero() {
    let state = State::new();
    let mut gateway = git_gateway(&state, &[]);
    gateway.initialize();
    let status = downstream_status(&mut gateway, 2);
    let pid = u32::try_from(status["pid"].as_u64().unwrap()).unwrap();
    assert!(alive(pid));
    gateway.signal("TERM");
    assert_eq!(gateway.exit_code(ANSWER), Some(0));
    assert!(!alive(pid), "the downstream outlived an orderly shutdown");
    assert_eq!(state.events().last().map(String::as_str), Some("shutdown sigterm"), "{:?}", state.events());
}

#[test]
fn stdin_eof_is_an_orderly_shutdown_with_a_downstream_too() {
    let state = State::new();
    let mut gateway = git_gateway(&state, &[]);
    gateway.initialize();
    let pid = u32::try_from(downstream_status(&mut gateway, 2)["pid"].as_u64().unwrap()).unwrap();
    gateway.close_stdin();
    assert_eq!(gateway.exit_code(ANSWER), Some(0));
    assert!(!alive(pid));
    assert_eq!(state.events().last().map(String::as_str), Some("shutdown stdin_eof"));
}

#[test]
fn kill_9_of_the_gateway_takes_the_downstream_with_it() {
    let state = State::new();
    let mut gateway = git_gateway(&state, &[]);
    gateway.initialize();
    let pid = u32::try_from(downstream_status(&mut gateway, 2)["pid"].as_u64().unwrap()).unwrap();
    assert!(alive(pid));
    gateway.signal("KILL");
    assert!(wait_until(Duration::from_secs(1), || !alive(pid)), "the downstream {pid} outlived its gateway by 1 s");
    // No orderly shutdown ran: the control plane was not told (the row expires on TTL).
    assert!(!state.events().iter().any(|e| e.starts_with("shutdown")), "{:?}", state.events());
}

fn kill(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill").arg(format!("-{signal}")).arg(pid.to_string()).status().unwrap();
    assert!(status.success());
}

pub fn git_init(dir: &std::path::Path) {
    for args in [
        vec!["init", "-q"],
        vec!["config", "user.email", "test@example.invalid"],
        vec!["config", "user.name", "test"],
        vec!["commit", "-q", "--allow-empty", "-m", "root"],
    ] {
        let status = std::process::Command::new("git").arg("-C").arg(dir).args(&args).status().unwrap();
        assert!(status.success(), "git {args:?}");
    }
}
