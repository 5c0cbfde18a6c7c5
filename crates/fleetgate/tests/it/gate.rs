//! The environment gate and the mutation gate through the CLI, against real
//! peer processes whose environments fleetgate reads from /proc itself.

use crate::support::{MarkerFleet, bin, json_of};
use std::process::Command;

type Fleet = MarkerFleet;

const POLICY: &str =
    "[roles.reviewer]\ndeny = [\"git_add\", \"git_commit\"]\n\n[tools]\nread_only = [\"git_status\"]\n";

fn member(f: &mut Fleet, profile: &str, env: &[(&str, &str)], extra: &[&str]) -> i64 {
    let pid = f.spawn(env);
    let role = profile.trim_start_matches("prgs-");
    let ns = format!("gitea-{role}");
    let mut args: Vec<&str> = extra.to_vec();
    let (checkout, _) = f.checkout();
    let checkout = checkout.display().to_string();
    if !extra.contains(&"--startup-head") && !extra.contains(&"--repo-root") {
        // Its revision is its checkout's HEAD, and the checkout tells this fleet apart.
        args.extend_from_slice(&["--repo-root", &checkout]);
    }
    f.register(&ns, profile, role, pid, &args);
    pid
}

fn worker_for(f: &Fleet, pid: i64, profile: &str) -> String {
    let p = pid.to_string();
    let out = f.cli(&[
        "worker",
        "register",
        "--client",
        "claude",
        "--session",
        "s",
        "--generation",
        "g",
        "--role",
        "author",
        "--profile",
        profile,
        "--pid",
        &p,
        "--json",
    ]);
    json_of(&out)["worker_identity"].as_str().unwrap().to_owned()
}

fn capability(f: &Fleet, profile: &str, tool: &str, worker: Option<&str>) -> (Option<i32>, serde_json::Value) {
    let mut args = vec!["capability", "--profile", profile, "--tool", tool, "--json"];
    if let Some(w) = worker {
        args.extend_from_slice(&["--worker", w]);
    }
    let out = f.cli(&args);
    (out.status.code(), json_of(&out))
}

const MANAGED: (&str, &str) = ("GITEA_CLIENT_MANAGED", "1");

#[test]
fn a_healthy_owned_session_may_mutate_and_a_duplicate_closes_the_gate() {
    let mut f = Fleet::new(POLICY);
    let author = member(&mut f, "prgs-author", &[MANAGED], &["--cohort", "ppid:812"]);
    member(&mut f, "prgs-reviewer", &[MANAGED], &["--cohort", "ppid:812"]);
    let worker = worker_for(&f, author, "prgs-author");

    let (code, v) = capability(&f, "prgs-author", "git_add", Some(&worker));
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["allowed"], true);
    assert_eq!(v["classification"], "mutating");

    let (code, v) = capability(&f, "prgs-author", "git_add", None);
    assert_eq!((code, v["blocker_kind"].as_str()), (Some(3), Some("session_attachment_missing")));

    let (code, v) = capability(&f, "prgs-reviewer", "git_add", Some(&worker));
    assert_eq!((code, v["blocker_kind"].as_str()), (Some(3), Some("role_not_permitted")));
    let (code, v) = capability(&f, "prgs-reviewer", "git_status", None);
    assert_eq!((code, v["classification"].as_str()), (Some(0), Some("read_only")), "reads pass without a session");

    let second = member(&mut f, "prgs-author", &[MANAGED], &["--cohort", "ppid:999"]);
    let (code, v) = capability(&f, "prgs-author", "git_add", Some(&worker));
    assert_eq!((code, v["blocker_kind"].as_str()), (Some(3), Some("fleet_inventory_blocked")));
    assert_eq!(
        v["operator_action"],
        format!("stop the second author server, pid {second}, started by cohort ppid:999")
    );
}

#[test]
fn a_peer_with_an_unknown_key_requires_a_reconnect_naming_the_key() {
    let mut f = Fleet::new(POLICY);
    let author = member(&mut f, "prgs-author", &[MANAGED], &["--cohort", "c"]);
    member(&mut f, "prgs-reviewer", &[MANAGED, ("GITEA_TOTALLY_INVENTED_OVERRIDE", "1")], &["--cohort", "c"]);
    let worker = worker_for(&f, author, "prgs-author");
    let (code, v) = capability(&f, "prgs-author", "git_add", Some(&worker));
    assert_eq!(code, Some(3));
    assert_eq!(v["blocker_kind"], "runtime_reconnect_required");
    assert_eq!((v["restart_required"].as_bool(), v["stop_required"].as_bool()), (Some(true), Some(true)));
    let reasons = v["blocked_reasons"].to_string();
    assert!(
        reasons.contains("unsupported-env:")
            && reasons.contains("GITEA_TOTALLY_INVENTED_OVERRIDE")
            && !reasons.contains("OVERRIDE=1"),
        "{reasons}"
    );
}

#[test]
fn a_secret_looking_unknown_key_is_reported_without_its_value() {
    let mut f = Fleet::new(POLICY);
    member(&mut f, "prgs-author", &[MANAGED, ("GITEA_DEPLOY_TOKEN", "hunter2-very-secret")], &["--cohort", "c"]);
    let (_, v) = capability(&f, "prgs-author", "git_add", None);
    let text = v.to_string();
    assert_eq!(v["blocker_kind"], "runtime_reconnect_required");
    assert!(text.contains("GITEA_DEPLOY_TOKEN"), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
}

#[test]
fn a_server_behind_its_repository_head_is_stale_runtime() {
    let mut f = Fleet::new(POLICY);
    let repo = f.dir.path().join("checkout");
    std::fs::create_dir_all(&repo).unwrap();
    let git = |args: &[&str]| {
        assert!(
            Command::new("git")
                .arg("-C")
                .arg(&repo)
                .args(["-c", "user.name=t", "-c", "user.email=t@x.invalid"])
                .args(args)
                .status()
                .unwrap()
                .success()
        );
    };
    git(&["init", "-q"]);
    git(&["commit", "-q", "--allow-empty", "-m", "one"]);
    let root = repo.to_str().unwrap().to_owned();
    let author = member(&mut f, "prgs-author", &[MANAGED], &["--cohort", "c", "--repo-root", &root]);
    member(&mut f, "prgs-reviewer", &[MANAGED], &["--cohort", "c", "--repo-root", &root]);
    let worker = worker_for(&f, author, "prgs-author");
    assert_eq!(capability(&f, "prgs-author", "git_add", Some(&worker)).0, Some(0));
    git(&["commit", "-q", "--allow-empty", "-m", "two"]);
    let (code, v) = capability(&f, "prgs-author", "git_add", Some(&worker));
    assert_eq!((code, v["blocker_kind"].as_str()), (Some(3), Some("runtime_reconnect_required")));
    assert!(v["blocked_reasons"][0].as_str().unwrap().starts_with("stale-runtime:"), "{v}");
}

#[test]
fn env_check_refuses_unknown_keys_individually_and_masks_secrets() {
    let run = |env: &[(&str, &str)]| {
        let mut cmd = Command::new(bin());
        cmd.env_clear().args(["env", "check", "--json"]);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        (out.status.code(), json_of(&out))
    };
    let (code, v) =
        run(&[("GITEA_MCP_CLIENT", "codex"), ("GITEA_MCP_CLIENT_INSTANCE", "i"), ("GITEA_MCP_CLIENT_SESSION", "s")]);
    assert_eq!((code, v["supported"].as_bool()), (Some(0), Some(true)));
    let (code, v) =
        run(&[("GITEA_MCP_CLIENT", "codex"), ("GITEA_MCP_CLIENT_SOMETHING_ELSE", "x"), ("GITEA_API_KEY", "k3y")]);
    assert_eq!(code, Some(3));
    let keys: Vec<&str> = v["unsupported"].as_array().unwrap().iter().map(|o| o["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["GITEA_API_KEY", "GITEA_MCP_CLIENT_SOMETHING_ELSE"]);
    assert_eq!(v["unsupported"][0]["value"], "***");
    let keys = json_of(&Command::new(bin()).env_clear().args(["env", "keys", "--json"]).output().unwrap());
    assert!(keys["keys"].as_array().unwrap().iter().any(|k| k["key"] == "GITEA_WORKER_HEARTBEAT_INTERVAL_SECONDS"));
}

#[test]
fn audit_lists_entries_newest_last_with_since_and_limit() {
    let f = Fleet::new(POLICY);
    let store = fleetgate_store::open(f.store().to_str().unwrap()).unwrap();
    let at = fleetgate_core::Timestamp::ymd_hms(2026, 12, 1, 10, 0, 0);
    for i in 0..3 {
        store
            .append_audit(&fleetgate_core::audit::AuditEntry {
                id: None,
                at: at.plus_seconds(i * 60),
                profile: "prgs-author".into(),
                worker_identity: None,
                tool: format!("t{i}"),
                allowed: i != 1,
                blocker_kind: (i == 1).then(|| "worker_fenced".into()),
                reasons: vec![],
                principal: None,
                call: None,
            })
            .unwrap();
    }
    let v = json_of(&f.cli(&["audit", "--json", "--since", "2026-12-01T10:01:00Z", "--limit", "5"]));
    let tools: Vec<&str> = v["entries"].as_array().unwrap().iter().map(|e| e["tool"].as_str().unwrap()).collect();
    assert_eq!(tools, ["t1", "t2"]);
    assert_eq!(v["entries"][0]["blocker_kind"], "worker_fenced");
    assert_eq!(f.cli(&["audit", "--since", "yesterday"]).status.code(), Some(1));
}
