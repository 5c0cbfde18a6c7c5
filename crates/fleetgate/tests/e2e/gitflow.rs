//! The mutation gate in front of the real mcp-server-git: reads pass, a
//! mutation waits for the fleet, role policy and a second cohort refuse, and
//! every decision lands in the audit log.

use crate::support::{Client, FleetDir, Member, git, peer, roster, serial, wait_until};
use serde_json::json;

fn names(tools: &[serde_json::Value]) -> Vec<String> {
    tools.iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn mutations_are_gated_by_the_real_fleet() {
    let _serial = serial();
    let f = FleetDir::new(&roster(
        "e2e",
        &["author", "reviewer"],
        "[roles.reviewer]\ndeny = [\"git_add\", \"git_commit\", \"git_reset\", \"git_create_branch\", \"git_checkout\"]\n",
    ));
    let repo = f.repo();
    let repo_s = repo.display().to_string();
    std::fs::write(repo.join("hello.txt"), "hello\n").unwrap();
    let git_server = peer(".venv/bin/mcp-server-git").display().to_string();
    let downstream = [git_server.as_str(), "--repository", repo_s.as_str()];

    // The author's gateway under the official Python SDK client.
    let mut author = Client::start(&f.serve_argv("prgs-author", "fleet-a", &downstream));
    let tools = author.tools();
    let listed = names(&tools);
    for want in [
        "git_status",
        "git_add",
        "git_commit",
        "gitea_get_runtime_context",
        "gitea_assess_fleet_inventory",
        "gitea_resolve_task_capability",
        "gitea_assess_master_parity",
    ] {
        assert!(listed.iter().any(|n| n == want), "{want} missing from {listed:?}");
    }

    let (err, text, _) = author.call("git_status", json!({ "repo_path": repo_s }));
    assert!(!err && text.contains("hello.txt"), "git_status forwarded: {text}");

    // The reviewer is not up: the fleet is incomplete, so the mutation is refused.
    let (err, text, _) = author.call("git_add", json!({ "repo_path": repo_s, "files": ["hello.txt"] }));
    assert!(err, "{text}");
    assert!(text.starts_with("fleet_inventory_blocked"), "{text}");
    assert!(text.contains("prgs-reviewer"), "the missing member is named: {text}");
    assert_eq!(git(&repo, &["diff", "--cached", "--name-only"]), "", "nothing was staged");

    // The reviewer's gateway, in front of its own mcp-server-git: the roster is up.
    let mut reviewer = Client::start(&f.serve_argv("prgs-reviewer", "fleet-a", &downstream));
    assert!(wait_until(10.0, || f.running_rows() == 2));
    let reviewer_tools = names(&reviewer.tools());
    assert!(reviewer_tools.contains(&"git_status".to_owned()));
    assert!(
        !reviewer_tools.contains(&"git_add".to_owned()),
        "a tool the role may never call is not offered: {reviewer_tools:?}"
    );
    let (err, text, _) = reviewer.call("git_add", json!({ "repo_path": repo_s, "files": ["hello.txt"] }));
    assert!(err && text.starts_with("role_not_permitted"), "{text}");

    let (_, _, verdict) = author.call("gitea_resolve_task_capability", json!({ "tool": "git_add" }));
    assert_eq!(verdict["allowed"], true, "{verdict}");
    let (err, text, _) = author.call("git_add", json!({ "repo_path": repo_s, "files": ["hello.txt"] }));
    assert!(!err, "allowed once the roster is up: {text}");
    assert_eq!(git(&repo, &["diff", "--cached", "--name-only"]).trim(), "hello.txt", "actually applied");

    // The heartbeat started at attach renews the very row registration wrote:
    // its session, generation, client, pid and epoch all match.
    let mut ctx = serde_json::Value::Null;
    assert!(
        wait_until(15.0, || {
            ctx = author.call("gitea_get_runtime_context", json!({})).2;
            ctx["worker_heartbeat"]["beats_renewed"].as_u64().unwrap_or(0) >= 2
        }),
        "no renewals accepted: {ctx}"
    );
    assert!(ctx["worker_heartbeat"]["stopped_reason"].is_null(), "{ctx}");
    let worker_id = ctx["worker"]["worker_identity"].as_str().unwrap().to_owned();
    let row = f.cli(&["worker", "show", &worker_id, "--json"]);
    assert!(row["renewal_count"].as_i64().unwrap() >= 2, "{row}");
    assert_eq!(row["generation_id"], ctx["worker"]["generation_id"]);
    assert_eq!(row["session_id"], ctx["worker"]["session_id"]);
    assert_eq!(row["pid"], ctx["pid"]);
    assert_eq!(row["client_name"], ctx["worker"]["client_name"]);
    assert_eq!(ctx["worker_heartbeat"]["supervised"], true, "{ctx}");
    assert_eq!(ctx["worker_heartbeat"]["running"], true, "{ctx}");
    assert_eq!(ctx["provenance"]["session_ownership"], "owned", "{ctx}");
    assert_eq!(ctx["downstream"]["state"], "running");
    assert_eq!(ctx["cohort_id"], "fleet-a");
    let (err, text, _) = author.call("gitea_assess_fleet_inventory", json!({ "pids": [1] }));
    assert!(err && text.contains("no argument"), "the inventory accepts no evidence: {text}");

    // A second author from another cohort closes the gate again.
    let second = Member::start(&f.serve_argv("prgs-author", "fleet-b", &[]));
    assert!(wait_until(10.0, || f.running_rows() == 3));
    std::fs::write(repo.join("second.txt"), "2\n").unwrap();
    let (err, text, _) = author.call("git_add", json!({ "repo_path": repo_s, "files": ["second.txt"] }));
    assert!(err && text.starts_with("fleet_inventory_blocked"), "{text}");
    assert!(text.contains(&format!("pid {}", second.0.id())), "the duplicate is named by pid: {text}");
    assert!(text.contains("stop the second author server"), "the operator action: {text}");
    assert!(!git(&repo, &["diff", "--cached", "--name-only"]).contains("second.txt"));

    // Every decision is in the audit log.
    let audit = f.audit_until(|e| {
        e.iter().any(|x| x["tool"] == "git_add" && x["blocker_kind"] == "fleet_inventory_blocked")
            && e.iter().any(|x| x["tool"] == "git_add" && x["blocker_kind"] == "role_not_permitted")
    });
    let entries = audit["entries"].as_array().unwrap();
    let decided = |tool: &str, blocker: Option<&str>| {
        entries.iter().any(|e| e["tool"] == tool && e["blocker_kind"].as_str() == blocker)
    };
    assert!(decided("git_add", Some("fleet_inventory_blocked")));
    assert!(decided("git_add", Some("role_not_permitted")));
    assert!(decided("git_add", None) && decided("git_status", None));

    // Each gateway recorded its host and published this host's scan.
    let store = fleetgate_store::open(f.store().to_str().unwrap()).unwrap();
    let (machine, _) = fleetgate_host::host_identity().unwrap();
    let hosts: Vec<_> = store.list_runtime().unwrap().into_iter().filter_map(|r| r.host).collect();
    assert!(hosts.len() >= 3 && hosts.iter().all(|h| h.host_id == machine), "{hosts:?}");
    let observations = store.list_observations().unwrap();
    assert_eq!(observations.len(), 1, "one host, one observation");
    assert!(observations[0].scan.processes.iter().any(|p| p.pid == i64::from(second.0.id())), "{observations:?}");

    // Orderly shutdown: rows stopped, workers stopped, downstreams gone.
    second.stop();
    author.close();
    reviewer.close();
    assert!(wait_until(10.0, || f.running_rows() == 0), "every runtime row is marked stopped");
    let workers = f.cli(&["worker", "list", "--json"]);
    assert!(workers["workers"].as_array().unwrap().iter().all(|w| w["status"] == "stopped"), "{workers}");
}
