//! The multi-client canary: five real client sessions (the official Python SDK
//! client), one per role, against one fleet in front of the real
//! mcp-server-git, at once. The healthy cohort's reads and permitted mutations
//! keep working while each negative case is refused with its own blocker, and
//! every refusal is in the audit log.

use crate::support::{Client, FleetDir, Member, git, peer, roster, serial, wait_until};
use serde_json::json;

const ROLES: [&str; 5] = ["author", "reviewer", "merger", "controller", "reconciler"];

struct Canary {
    f: FleetDir,
    repo: String,
    clients: Vec<Client>,
}

impl Canary {
    fn reads_work(&mut self) {
        let repo = self.repo.clone();
        for (role, c) in ROLES.iter().zip(&mut self.clients) {
            let (err, text, _) = c.call("git_status", json!({ "repo_path": repo }));
            assert!(!err, "{role}'s read failed: {text}");
        }
    }

    fn add(&mut self, who: usize, file: &str) -> (bool, String) {
        std::fs::write(std::path::Path::new(&self.repo).join(file), file).unwrap();
        let repo = self.repo.clone();
        let (err, text, _) = self.clients[who].call("git_add", json!({ "repo_path": repo, "files": [file] }));
        (err, text)
    }
}

#[test]
fn the_healthy_cohort_keeps_working_while_every_negative_case_is_refused() {
    let _serial = serial();
    let f = FleetDir::new(&roster(
        "canary",
        &["author", "reviewer", "merger", "controller", "reconciler"],
        "[roles.reviewer]\ndeny = [\"git_add\", \"git_commit\", \"git_reset\", \"git_checkout\", \"git_create_branch\"]\n",
    ));
    let repo = f.repo().display().to_string();
    let git_server = peer(".venv/bin/mcp-server-git").display().to_string();
    let clients: Vec<Client> = ROLES
        .iter()
        .map(|r| {
            Client::start(&f.serve_argv(
                &format!("prgs-{r}"),
                "cohort-a",
                &[git_server.as_str(), "--repository", &repo],
            ))
        })
        .collect();
    let mut c = Canary { f, repo, clients };
    assert!(wait_until(15.0, || c.f.running_rows() == 5));
    c.reads_work();
    let (err, text) = c.add(0, "one.txt");
    assert!(!err, "the healthy fleet's author may mutate: {text}");

    // A reviewer's commit: role_not_permitted.
    let repo = c.repo.clone();
    let (err, text, _) = c.clients[1].call("git_commit", json!({ "repo_path": repo, "message": "sneaky" }));
    assert!(err && text.starts_with("role_not_permitted"), "{text}");

    // A second cohort starting the same profiles: fleet_inventory_blocked, duplicates named with pids.
    let second: Vec<Member> =
        ["prgs-author", "prgs-merger"].iter().map(|p| Member::start(&c.f.serve_argv(p, "cohort-b", &[]))).collect();
    assert!(wait_until(15.0, || c.f.running_rows() == 7));
    let (err, text) = c.add(0, "two.txt");
    assert!(err && text.starts_with("fleet_inventory_blocked"), "{text}");
    for m in &second {
        assert!(text.contains(&format!("pid {}", m.0.id())), "every duplicate pid is named: {text}");
    }
    c.reads_work();
    second.into_iter().for_each(Member::stop);
    assert!(wait_until(15.0, || c.f.running_rows() == 5));
    assert!(!c.add(0, "three.txt").0, "the gate opens again once the second cohort is gone");

    // A peer started with an unknown GITEA_* key: runtime_reconnect_required.
    let mut argv = c.f.serve_argv("prgs-controller", "cohort-a", &[]);
    argv.insert(0, "GITEA_UNKNOWN_CANARY_KEY=1".into());
    let bad = Member::start(&argv);
    assert!(wait_until(15.0, || c.f.running_rows() == 6));
    let (err, text) = c.add(0, "four.txt");
    assert!(
        err && text.starts_with("runtime_reconnect_required") && text.contains("GITEA_UNKNOWN_CANARY_KEY"),
        "{text}"
    );
    c.reads_work();
    bad.stop();
    assert!(wait_until(15.0, || c.f.running_rows() == 5));

    // A stale generation renewing after a claim: worker_fenced for the merger.
    let (_, _, ctx) = c.clients[2].call("gitea_get_runtime_context", json!({}));
    let worker = ctx["worker"]["worker_identity"].as_str().unwrap().to_owned();
    let claim =
        c.f.cli(&["worker", "claim-generation", "--identity", &worker, "--generation", "gen-usurper", "--json"]);
    assert_eq!(claim["fencing_epoch"], 2, "{claim}");
    let (err, text) = c.add(2, "five.txt");
    assert!(err && text.starts_with("worker_fenced"), "{text}");
    let (err, text) = c.add(0, "six.txt");
    assert!(!err, "the author is unaffected by the merger's fencing: {text}");

    // A server at another revision: the repository moves on; stale-runtime.
    git(std::path::Path::new(&c.repo), &["commit", "-q", "--allow-empty", "-m", "moved on"]);
    let (err, text) = c.add(0, "seven.txt");
    assert!(err && text.starts_with("runtime_reconnect_required") && text.contains("stale-runtime:"), "{text}");
    c.reads_work();

    // Each refusal is in the audit log.
    let wants = ["role_not_permitted", "fleet_inventory_blocked", "runtime_reconnect_required", "worker_fenced"];
    let audit = c.f.audit_until(|e| wants.iter().all(|w| e.iter().any(|x| x["blocker_kind"] == *w)));
    let kinds: Vec<String> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["blocker_kind"].as_str().map(str::to_owned))
        .collect();
    for want in ["role_not_permitted", "fleet_inventory_blocked", "runtime_reconnect_required", "worker_fenced"] {
        assert!(kinds.iter().any(|k| k == want), "{want} missing from the audit log: {kinds:?}");
    }
    for client in c.clients.drain(..) {
        client.close();
    }
    assert!(wait_until(15.0, || c.f.running_rows() == 0));
}
