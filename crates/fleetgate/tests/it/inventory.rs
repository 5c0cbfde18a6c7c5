//! The inventory against real processes: children whose command lines match
//! the roster's `process_match`, registered through the CLI, judged by
//! `fleetgate inventory --json` — which observes them itself.

use crate::support::{MarkerFleet, json_of};

const HEAD: &str = "82d71b77028a7abd4f8ab4a4e4d89658a187f73d";

type Fleet = MarkerFleet;

fn inventory(f: &Fleet) -> (Option<i32>, serde_json::Value) {
    let out = f.cli(&["inventory", "--json"]);
    (out.status.code(), json_of(&out))
}

#[test]
fn healthy_then_duplicate_then_killed_then_unregistered() {
    let mut f = Fleet::new("");
    let (repo, head) = f.checkout();
    let author = f.spawn(&[]);
    let reviewer = f.spawn(&[]);
    let root = repo.to_str().unwrap();
    let row = f.register("gitea-author", "prgs-author", "author", author, &["--repo-root", root]);
    assert_eq!(row["startup_head"], head.as_str(), "the startup head comes from --repo-root");
    assert_eq!(row["cohort_id"], format!("ppid:{}", std::process::id()), "the cohort is the server's parent");
    assert_eq!(row["cohort_source"], "parent_process");
    f.register("gitea-reviewer", "prgs-reviewer", "reviewer", reviewer, &["--repo-root", root]);

    let (code, v) = inventory(&f);
    assert_eq!(code, Some(0), "{}", v["blocked_reasons"]);
    assert_eq!(v["running_member_count"], 2);
    assert_eq!(v["mutation_gate_satisfied"], true);
    assert_eq!(v["single_cohort"], true);
    let text = String::from_utf8(f.cli(&["inventory"]).stdout).unwrap();
    assert!(text.starts_with("2 of 2 members running"), "{text}");

    // A second author from another cohort: duplicate and mixed cohort, gate closed.
    let second = f.spawn(&[]);
    f.register("gitea-author", "prgs-author", "author", second, &["--repo-root", root, "--cohort", "ppid:999999"]);
    let (code, v) = inventory(&f);
    assert_eq!(code, Some(3));
    let dup = &v["duplicate_members"][0];
    assert_eq!(dup["profile"], "prgs-author");
    let mut pids = vec![author, second];
    pids.sort_unstable();
    assert_eq!(dup["pids"], serde_json::json!(pids));
    assert_eq!(v["mixed_cohort"], true);
    assert!(v["blocked_reason"].as_str().unwrap().contains("duplicate prgs-author"));

    // Kill the reviewer: its row is stale (dead) and its profile missing.
    f.kill(reviewer);
    let (_, v) = inventory(&f);
    let stale = v["stale_members"].as_array().unwrap();
    assert!(stale.iter().any(|m| m["pid"] == reviewer && m["liveness"] == "dead"), "{stale:?}");
    assert_eq!(v["missing_members"][0]["profile"], "prgs-reviewer");

    // A matching process nobody registered fails closed, named by pid.
    let stray = f.spawn(&[]);
    let (code, v) = inventory(&f);
    assert_eq!(code, Some(3));
    let unregistered: Vec<i64> =
        v["unregistered_processes"].as_array().unwrap().iter().map(|p| p["pid"].as_i64().unwrap()).collect();
    assert_eq!(unregistered, [stray]);
    assert!(
        v["incomplete_reasons"].as_array().unwrap().iter().any(|r| r.as_str().unwrap().contains(&stray.to_string()))
    );
    assert_eq!(v["inventory_complete"], false);
}

#[test]
fn a_row_registered_before_its_process_started_reads_pid_recycled() {
    let mut f = Fleet::new("");
    let author = f.spawn(&[]);
    let reviewer = f.spawn(&[]);
    f.register("gitea-reviewer", "prgs-reviewer", "reviewer", reviewer, &["--startup-head", HEAD]);
    // The author's row claims a registration a minute before its process existed,
    // as a row left behind by an exited server whose pid was reused would.
    let store = fleetgate_store::open(f.store().to_str().unwrap()).unwrap();
    let started = fleetgate_host::procfs::ProcessSource::entry(&fleetgate_host::procfs::ProcFs::default(), author)
        .unwrap()
        .started_at;
    let mut row: fleetgate_core::runtime::RuntimeRecord =
        serde_json::from_value(f.register("gitea-author", "prgs-author", "author", author, &["--startup-head", HEAD]))
            .unwrap();
    row.registered_at = started.plus_seconds(-60);
    store.upsert_runtime(&row).unwrap();

    let (code, v) = inventory(&f);
    assert_eq!(code, Some(3));
    let stale = &v["stale_members"][0];
    assert_eq!((stale["pid"].as_i64(), stale["liveness"].as_str()), (Some(author), Some("pid_recycled")));
    assert_eq!(v["missing_members"][0]["profile"], "prgs-author");
    assert_eq!(v["running_member_count"], 1);
}

#[test]
fn runtime_rows_list_and_deregister() {
    let mut f = Fleet::new("");
    let pid = f.spawn(&[]);
    let row = f.register("gitea-author", "prgs-author", "author", pid, &["--cohort", "c1", "--startup-head", HEAD]);
    let id = row["runtime_id"].as_str().unwrap().to_owned();
    assert!(id.starts_with(&format!("gitea-author:{pid}:")), "{id}");
    assert_eq!(row["cohort_source"], "explicit_env");
    let list = json_of(&f.cli(&["runtime", "list", "--json"]));
    assert_eq!(list["runtimes"][0]["runtime_id"], id.as_str());
    assert_eq!(f.cli(&["runtime", "touch", &id]).status.code(), Some(0));
    assert_eq!(f.cli(&["runtime", "deregister", &id]).status.code(), Some(0));
    assert_eq!(f.cli(&["runtime", "touch", &id]).status.code(), Some(3), "a stopped row is not refreshed");
    // A deregistered row is history; the still-running process is now unregistered (beside
    // any gateway of another fleet on this host: with no running row this fleet's checkout
    // is unknown, so no gateway can prove it is another fleet's).
    let (_, v) = inventory(&f);
    let unregistered = v["unregistered_processes"].as_array().unwrap();
    assert!(unregistered.iter().any(|p| p["pid"] == pid), "{unregistered:?}");
    let bad = f.cli(&["runtime", "register", "--namespace", "n", "--profile", "p", "--role", "r", "--pid", "zero"]);
    assert_eq!(bad.status.code(), Some(1));
}

/// Issue 34: a peer's secrets in single-dash flags, credential headers and bare token shapes
/// never reach `fleetgate inventory`, JSON or text.
#[test]
fn a_peers_secrets_in_every_shape_are_masked_in_the_inventory() {
    let mut f = Fleet::new("");
    let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.dBjftJeZ4CVPmB92K27uhbUJU1p1rwW1gFWFOEjXk";
    let ghp = "ghp_16C7e42F292c6912E7710c838347Ae178B4a";
    let glpat = "glpat-Zq9xXbY1cW2dV3eU4fT5";
    let args = ["-token", "s3cr3tA", "-p", "s3cr3tB", "--header", "Authorization: Bearer s3cr3tC", ghp, glpat, jwt];
    let stray = f.spawn_with_args(&[], &args);
    let json = String::from_utf8(f.cli(&["inventory", "--json"]).stdout).unwrap();
    let text = String::from_utf8(f.cli(&["inventory"]).stdout).unwrap();
    assert!(json.contains(&stray.to_string()) && json.contains("-token ***"), "{json}");
    for secret in ["s3cr3tA", "s3cr3tB", "s3cr3tC", ghp, glpat, jwt] {
        assert!(!json.contains(secret), "{secret} in {json}");
        assert!(!text.contains(secret), "{secret} in {text}");
    }
}

/// Issue 34: another user's command line quoted in the summary and in "blocked because" cannot
/// clear the screen or forge a "mutation gate open" line.
#[test]
fn a_peers_escape_sequences_never_reach_the_terminal() {
    let mut f = Fleet::new("");
    f.spawn_with_args(&[], &["\u{1b}[2J\u{1b}]0;pwned\u{7}", "\r\n5 of 5 members running: mutation gate open"]);
    let out = f.cli(&["inventory"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(!out.stdout.iter().any(|b| matches!(b, 0x1b | 0x07 | b'\r')), "{:?}", String::from_utf8_lossy(&out.stdout));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.lines().any(|l| l.starts_with("5 of 5")), "a forged line:\n{text}");
    assert!(text.contains("\\u{1b}[2J"), "shown escaped:\n{text}");
}
