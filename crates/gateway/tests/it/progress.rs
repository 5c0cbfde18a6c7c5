//! Progress is never lost to a race (issue 11): the downstream's first notification of a
//! call, sent before the gateway could map its token, and its last, sent right before the
//! answer, both reach the client, whole and in order, on every one of 200 calls. Through
//! the official Python SDK client (`tests/peers/progress_loop.py`) in front of the rmcp
//! conformance fixture's `burst_progress`.

use crate::harness::{State, conformance_fixture, fixture, path_text, peers, python};
use serde_json::Value;
use std::process::Command;

#[test]
fn every_progress_notification_reaches_the_client_before_its_answer_200_times() {
    let state = State::new();
    state.allow_mutations();
    let out = Command::new(python())
        .arg(peers().join("tests/peers/progress_loop.py"))
        .args(["200", "5"])
        .arg(fixture())
        .args(["--state", &path_text(state.path()), "--"])
        .arg(conformance_fixture())
        .output()
        .expect("the Python client runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().unwrap_or_else(|| panic!("no result: {}", String::from_utf8_lossy(&out.stderr)));
    let tally: Value = serde_json::from_str(line).expect("one JSON line");
    assert_eq!(tally["errors"], serde_json::json!([]), "{tally}");
    assert_eq!(tally["short"], serde_json::json!([]), "progress lost: {tally}");
    assert_eq!(tally["out_of_order"], serde_json::json!([]), "{tally}");
    assert_eq!(tally["complete"], 200, "{tally}");
}
