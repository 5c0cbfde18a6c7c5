//! The hard diagnostics refuse identically on every preflight path: the
//! gateway's tools/call, its resolve_task_capability control tool, and the
//! `fleetgate capability` CLI — driven for real, not read from a constant.

use crate::support::{Client, FleetDir, Member, git, peer, roster, serial, wait_until};
use serde_json::json;

/// (tools/call text, control-tool verdict, CLI verdict) for git_add.
fn three_paths(author: &mut Client, f: &FleetDir, repo: &str) -> (String, serde_json::Value, serde_json::Value) {
    let (err, text, _) = author.call("git_add", json!({ "repo_path": repo, "files": ["x.txt"] }));
    assert!(err, "{text}");
    let (_, _, verdict) = author.call("gitea_resolve_task_capability", json!({ "tool": "git_add" }));
    let cli = f.cli(&["capability", "--profile", "prgs-author", "--tool", "git_add", "--json"]);
    (text, verdict, cli)
}

#[test]
fn hard_diagnostics_refuse_identically_on_every_path() {
    let _serial = serial();
    let f = FleetDir::new(&roster("diag", &["author", "reviewer"], ""));
    let repo = f.repo();
    let repo_s = repo.display().to_string();
    std::fs::write(repo.join("x.txt"), "x\n").unwrap();
    let git_server = peer(".venv/bin/mcp-server-git").display().to_string();
    let mut author = Client::start(&f.serve_argv("prgs-author", "c", &[git_server.as_str(), "--repository", &repo_s]));

    // A peer started with a key the program does not know.
    let mut argv = f.serve_argv("prgs-reviewer", "c", &[]);
    argv.insert(0, "GITEA_TOTALLY_INVENTED_OVERRIDE=1".into());
    let bad = Member::start(&argv);
    assert!(wait_until(10.0, || f.running_rows() == 2));
    let (text, verdict, cli) = three_paths(&mut author, &f, &repo_s);
    assert!(text.starts_with("runtime_reconnect_required"), "{text}");
    assert!(text.contains("GITEA_TOTALLY_INVENTED_OVERRIDE") && !text.contains("OVERRIDE=1"), "{text}");
    for v in [&verdict, &cli] {
        assert_eq!(v["blocker_kind"], "runtime_reconnect_required", "{v}");
        assert_eq!((v["restart_required"].as_bool(), v["stop_required"].as_bool()), (Some(true), Some(true)));
        assert!(v["blocked_reasons"][0].as_str().unwrap().starts_with("unsupported-env:"), "{v}");
    }
    bad.stop();

    // A clean peer: the gate opens; then the repository moves on and both
    // servers run a stale revision.
    let good = Member::start(&f.serve_argv("prgs-reviewer", "c", &[]));
    assert!(wait_until(10.0, || f.running_rows() == 2));
    let (_, _, open) = author.call("gitea_resolve_task_capability", json!({ "tool": "git_add" }));
    assert_eq!(open["allowed"], true, "{open}");
    git(&repo, &["commit", "-q", "--allow-empty", "-m", "moved on"]);
    let (text, verdict, cli) = three_paths(&mut author, &f, &repo_s);
    assert!(text.starts_with("runtime_reconnect_required") && text.contains("stale-runtime:"), "{text}");
    for v in [&verdict, &cli] {
        assert_eq!(v["blocker_kind"], "runtime_reconnect_required", "{v}");
        assert!(v["blocked_reasons"][0].as_str().unwrap().starts_with("stale-runtime:"), "{v}");
    }
    let (_, _, parity) = author.call("gitea_assess_master_parity", json!({}));
    assert_eq!(parity["parity"], false, "{parity}");
    assert!(git(&repo, &["diff", "--cached", "--name-only"]).is_empty(), "nothing was ever staged");
    good.stop();
    author.close();
}
