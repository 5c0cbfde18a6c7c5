//! The README's first command: five real gateways, a second cohort, a kill; then the PR
//! workflow through four gateways over the forge stand-in.

use crate::support::{bin, serial};
use std::process::Command;

/// An operator who ran the README's quick start: `fleetgate init` in a checkout of theirs wrote
/// their roster (five members of their own profiles, bound to their forge repository) to
/// `$XDG_CONFIG_HOME/fleetgate/fleet.toml`. Its directory, whose `XDG_CONFIG_HOME` and `HOME`
/// the demo then runs with.
fn operator_who_ran_init() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let checkout = home.path().join("widgets");
    std::fs::create_dir_all(&checkout).unwrap();
    crate::support::git(&checkout, &["init", "-q"]);
    crate::support::git(&checkout, &["remote", "add", "origin", "https://gitea.example.com/acme/widgets.git"]);
    let xdg = home.path().join(".config");
    let out = Command::new(bin())
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", &xdg)
        .current_dir(&checkout)
        .arg("init")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let roster = std::fs::read_to_string(xdg.join("fleetgate/fleet.toml")).unwrap();
    assert!(roster.contains("profile = \"widgets-author\""), "{roster}");
    home
}

/// Issue 54: after `fleetgate init`, the demo failed (`only 0 of 5 gateways wrote their
/// runtime rows within 15 s`): its gateways read the operator's roster, which has no
/// `prgs-author`. The demo's fleet is its own: it tells its whole story beside that roster.
#[test]
fn the_demo_tells_the_fleet_story_and_leaves_nothing_running() {
    let home = operator_who_ran_init();
    let (home_dir, xdg) = (home.path().display().to_string(), home.path().join(".config").display().to_string());
    tells_the_story(&["demo", "--json"], "head_commit_id", &[("HOME", &home_dir), ("XDG_CONFIG_HOME", &xdg)]);
    // A roster the operator broke since stops nothing of the demo either.
    std::fs::write(home.path().join(".config/fleetgate/fleet.toml"), "[fleet\nname = ").unwrap();
    let mut demo = Command::new(bin());
    demo.env_clear().env("PATH", "/usr/bin:/bin").env("HOME", &home_dir).env("XDG_CONFIG_HOME", &xdg);
    let _serial = serial();
    let out = demo.args(["demo", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn the_demo_tells_the_workflow_in_front_of_github_s_server_too() {
    // Run from an operator's shell that holds fleet keys of its own — an identity, a cohort,
    // an unsupported knob, a store — and a roster of its own: none of them reaches the demo's
    // gateways, whose story is the same.
    // Its roster too, as `fleetgate init` wrote it (issue 54).
    let home = operator_who_ran_init();
    let (home_dir, xdg) = (home.path().display().to_string(), home.path().join(".config").display().to_string());
    let shell = [
        ("GITEA_MCP_CLIENT", "operator-shell"),
        ("GITEA_MCP_COHORT_ID", "operator-cohort"),
        ("GITEA_MCP_UNSUPPORTED_KNOB", "1"),
        ("GITEA_WORKER_REGISTRY_DB", "/nonexistent/registry.sqlite3"),
        ("HOME", &home_dir),
        ("XDG_CONFIG_HOME", &xdg),
    ];
    tells_the_story(&["demo", "--forge", "github-mcp", "--json"], "(pinned head)", &shell);
    let out = Command::new(bin()).args(["demo", "--forge", "gitlab"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "an unknown forge is refused before anything starts");
    assert!(String::from_utf8_lossy(&out.stderr).contains("known: gitea-mcp, github-mcp"));
}

/// The demo run with `args` (and `env` besides a `PATH`): the whole story, the merge pinned
/// with `pin`.
fn tells_the_story(args: &[&str], pin: &str, env: &[(&str, &str)]) {
    let _serial = serial();
    let mut demo = Command::new(bin());
    demo.env_clear().env("PATH", "/usr/bin:/bin").envs(env.iter().copied());
    let out = demo.args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let steps = v["steps"].as_array().unwrap();
    let gate: Vec<bool> = steps.iter().map(|s| s["mutation_gate_satisfied"].as_bool().unwrap()).collect();
    assert_eq!(gate, [true, false, true, false]);
    assert!(steps[0]["summary"].as_str().unwrap().starts_with("5 of 5 members running"));
    let dup = &steps[1]["inventory"];
    assert_eq!(dup["duplicate_members"][0]["profile"], "prgs-author");
    assert_eq!(dup["mixed_cohort"], true);
    assert!(steps[1]["operator_action"].as_str().unwrap().starts_with("stop the second author server, pid "));
    let killed = &steps[3]["inventory"];
    assert_eq!(killed["stale_members"][0]["liveness"], "dead");
    assert_eq!(killed["missing_members"][0]["profile"], "prgs-reviewer");
    // The workflow act: one refusal per blocker, and the merge of exactly the approved head.
    let flow = &v["workflow"];
    let refusals: Vec<&str> = flow["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["allowed"] == false)
        .filter_map(|s| s["answer"].as_str()?.split(':').next())
        .collect();
    assert_eq!(
        refusals,
        ["role_not_permitted", "review_lease_required", "review_lease_held", "stale_head", "approval_required"],
        "{flow}"
    );
    assert!(flow["outcome"].as_str().unwrap().contains("has the approved head"), "{flow}");
    // The approval act: the merge waits; the operator lists and approves exactly it; a retry
    // with other arguments is a new request; the identical retry lands the approved head.
    let act = flow["approval"].as_array().unwrap();
    let told: Vec<(&str, bool)> =
        act.iter().map(|s| (s["who"].as_str().unwrap(), s["allowed"].as_bool().unwrap())).collect();
    assert_eq!(
        told,
        [("merger", false), ("operator", true), ("operator", true), ("merger", false), ("merger", true)],
        "{flow}"
    );
    let answer = |i: usize| act[i]["answer"].as_str().unwrap();
    let request = |i: usize| answer(i).split("approval request ").nth(1).unwrap().split(' ').next().unwrap();
    assert!(answer(0).starts_with("approval_pending:") && answer(3).starts_with("approval_pending:"), "{flow}");
    assert!(act[2]["call"].as_str().unwrap().contains(&format!("approvals approve {}", request(0))), "{flow}");
    assert!(answer(1).contains(pin), "the operator sees the exact call, its head pinned: {flow}");
    assert_ne!(request(0), request(3), "other arguments are another request: {flow}");
    assert!(act[3]["call"].as_str().unwrap().contains("squash"), "{flow}");
    // Nothing it started is left: no gateway runs on the demo's store.
    let store = v["store"].as_str().unwrap();
    let ps = Command::new("ps").args(["-eo", "args"]).output().unwrap();
    let ps = String::from_utf8_lossy(&ps.stdout);
    assert!(!ps.contains(store), "a demo gateway is still running");
    let flow_store = std::path::Path::new(store).with_file_name("flow.sqlite3");
    assert!(!ps.contains(&*flow_store.to_string_lossy()), "a workflow gateway is still running");
}
