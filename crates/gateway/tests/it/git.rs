//! End to end with the official Python MCP SDK client in front of the real
//! `mcp-server-git`: listing, forwarding a read-only call, the mutation gate refusing and
//! then allowing `git_add` on a real repository, and a role-forbidden tool.

use crate::harness::{PyClient, State, mcp_server_git, minimal_server, path_text, text, tool};
use crate::lifecycle::git_init;
use serde_json::json;
use std::process::Command;

fn porcelain(repo: &std::path::Path) -> String {
    let out = Command::new("git").arg("-C").arg(repo).args(["status", "--porcelain"]).output().unwrap();
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn git_tools_are_listed_forwarded_and_gated() {
    let state = State::new();
    let repo = tempfile::tempdir().unwrap();
    git_init(repo.path());
    std::fs::write(repo.path().join("a.txt"), "hello\n").unwrap();
    let repo_path = path_text(repo.path());
    let mut client = PyClient::start(&state, &["--forbid", "git_log"], &[path_text(&mcp_server_git())]);
    assert_eq!(client.init["serverInfo"]["name"], "fleetgate-test", "{}", client.init);
    assert_eq!(client.init["protocolVersion"], "2025-11-25");

    let listed = client.ok(json!({"op": "list_tools"}));
    for name in ["fleet_get_runtime_context", "git_status", "git_add", "git_commit", "git_diff"] {
        assert!(tool(&listed, name).is_some(), "{name} missing from {listed}");
    }
    assert!(tool(&listed, "git_log").is_none(), "a role-forbidden tool is not listed: {listed}");
    let status_tool = tool(&listed, "git_status").unwrap();
    assert_eq!(status_tool["annotations"]["readOnlyHint"], true);
    assert_eq!(status_tool["_meta"]["fleetgate/classification"], "read_only");
    let add_tool = tool(&listed, "git_add").unwrap();
    assert_eq!(add_tool["annotations"]["readOnlyHint"], false);
    assert_eq!(add_tool["_meta"]["fleetgate/classification"], "mutating");

    let status = client.call("git_status", json!({"repo_path": repo_path}));
    assert_ne!(status["isError"], true, "{status}");
    assert!(text(&status).contains("a.txt"), "{status}");

    let refused = client.call("git_add", json!({"repo_path": repo_path, "files": ["a.txt"]}));
    assert_eq!(refused["isError"], true, "{refused}");
    let refusal = text(&refused);
    assert!(refusal.starts_with("fleet_inventory_blocked"), "{refusal}");
    assert!(refusal.contains("mutations are held") && refusal.contains("operator action: create"), "{refusal}");
    assert_eq!(porcelain(repo.path()), "?? a.txt\n", "a refused call must not reach the repository");

    state.allow_mutations();
    // The gate's read of the downstream (as the PR workflow reads a head) is made by the
    // gateway before deciding, and its answer handed to the decision.
    std::fs::write(state.path().join("probe"), format!("git_status {}", json!({"repo_path": repo_path}))).unwrap();
    let added = client.call("git_add", json!({"repo_path": repo_path, "files": ["a.txt"]}));
    assert_ne!(added["isError"], true, "{added}");
    assert_eq!(porcelain(repo.path()), "A  a.txt\n", "the allowed call was applied");
    std::fs::remove_file(state.path().join("probe")).unwrap();

    let forbidden = client.call("git_log", json!({"repo_path": repo_path}));
    assert_eq!(forbidden["isError"], true, "{forbidden}");
    assert!(text(&forbidden).starts_with("role_not_permitted"), "{forbidden}");

    let unknown = client.step(json!({"op": "call_tool", "name": "git_frobnicate", "arguments": {}}));
    assert_eq!(unknown["ok"], false, "{unknown}");
    assert!(unknown["error"]["message"].as_str().unwrap().contains("git_frobnicate"), "{unknown}");

    client.finish();
    let events = state.events();
    assert_eq!(events.first().map(String::as_str), Some("transport_bound"), "{events:?}");
    assert!(events[1].starts_with("attach mcp "), "the SDK's clientInfo name: {events:?}");
    let decisions: Vec<&str> = events.iter().filter(|e| e.starts_with("decide")).map(String::as_str).collect();
    assert_eq!(
        decisions,
        [
            "decide git_status read_only allowed",
            "decide git_add mutating refused",
            "decide git_add mutating allowed",
            "decide git_log read_only refused",
        ],
        "every downstream call, read-only ones too, went through the gate once"
    );
    let probe: Vec<&String> = events.iter().filter(|e| e.starts_with("probe")).collect();
    assert!(
        probe.len() == 1 && probe[0].starts_with("probe git_status ok") && probe[0].contains("a.txt"),
        "the decision's read reached the downstream and came back before the decision: {events:?}"
    );
    let forwarded: Vec<&str> = events.iter().filter(|e| e.starts_with("forwarded")).map(String::as_str).collect();
    assert_eq!(forwarded, ["forwarded git_status ok", "forwarded git_add ok"], "{events:?}");
    assert_eq!(events.last().map(String::as_str), Some("shutdown stdin_eof"), "{events:?}");
}

#[test]
fn a_tool_without_annotations_is_gated_as_mutating() {
    let state = State::new();
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("stamps.txt");
    let mut downstream = minimal_server();
    downstream.push(path_text(&target));
    let mut client = PyClient::start(&state, &[], &downstream);
    let listed = client.ok(json!({"op": "list_tools"}));
    let stamp = tool(&listed, "stamp").unwrap_or_else(|| panic!("stamp missing: {listed}"));
    assert_eq!(stamp["annotations"]["readOnlyHint"], false, "{stamp}");
    assert_eq!(stamp["_meta"]["fleetgate/classification"], "mutating", "{stamp}");

    let refused = client.call("stamp", json!({"text": "one"}));
    assert!(text(&refused).starts_with("fleet_inventory_blocked"), "{refused}");
    assert!(!target.exists(), "a refused call must not run");
    state.allow_mutations();
    let stamped = client.call("stamp", json!({"text": "two"}));
    assert_ne!(stamped["isError"], true, "{stamped}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "two\n");
    client.finish();
}
