//! The `gitea-mcp` profile end to end: a fleet of five gateways (`[fleet] forge =
//! "gitea-mcp"`), each in front of its own forge fixture process on one shared bare
//! repository, each driven by the official Python SDK client. Calls are decided by `method`
//! and role — a reviewer's merge is refused naming the rule, the merger's is forwarded and
//! really merges, an author's create is forwarded and writes `refs/pull/<n>/head`, an
//! invented `method` is refused for every role — `fleetgate capability --args` gives the same
//! verdicts (and so does the control tool `…resolve_task_capability` given the arguments), and
//! every refusal is in `fleetgate audit` naming its rule.
//!
//! The forge fixture itself is checked first, without gateways: its listing variant, and
//! that processes sharing a repository share one forge.

use crate::support::{Client, FleetDir, answer, at, bare_repo, forge_fixture, git, roster, serial, wait_until};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

const ROLES: [&str; 5] = ["author", "reviewer", "merger", "controller", "reconciler"];

/// The fixture alone under the Python SDK client.
fn fixture_client(bare: &Path, extra: &[&str]) -> Client {
    let mut argv = forge_fixture();
    argv.extend(["--repo".to_owned(), bare.display().to_string()]);
    argv.extend(extra.iter().map(|s| (*s).to_owned()));
    Client::start(&argv)
}

#[test]
fn the_forge_fixture_lists_the_real_tool_surface_and_its_variants_change_one_definition() {
    let _serial = serial();
    let f = FleetDir::new("");
    let bare = bare_repo(f.dir.path(), "forge.git", &f.repo());
    let mut plain = fixture_client(&bare, &[]);
    let mut changed = fixture_client(&bare, &["--variant", "changed-description", "--variant", "new-method"]);
    let (tools, other) = (plain.tools(), changed.tools());
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    for want in [
        "pull_request_read",
        "pull_request_write",
        "pull_request_review_write",
        "list_pull_requests",
        "issue_write",
        "issue_read",
        "create_branch",
        "delete_branch",
        "create_or_update_file",
        "get_file_contents",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    let write = |tools: &[Value]| tools.iter().find(|t| t["name"] == "pull_request_write").cloned().unwrap();
    let (before, after) = (write(&tools), write(&other));
    assert_ne!(before["description"], after["description"]);
    let methods = |t: &Value| t["inputSchema"]["properties"]["method"]["enum"].as_array().unwrap().len();
    assert_eq!((methods(&before), methods(&after)), (8, 9), "new-method adds one method value");
    for (a, b) in tools.iter().zip(&other).filter(|(a, _)| a["name"] != "pull_request_write") {
        assert_eq!(a, b, "every other tool is the same");
    }
    let reader = tools.iter().find(|t| t["name"] == "pull_request_read").unwrap();
    assert_eq!(reader["annotations"]["readOnlyHint"], true);
    let required = &reader["inputSchema"]["required"];
    assert!(required.as_array().unwrap().contains(&json!("pull_number")), "{required}");

    // The real server's errors: an unknown method is a tool error, an unknown tool a
    // JSON-RPC error.
    let (err, text, _) = plain.call("pull_request_write", at(json!({ "method": "lock", "pull_number": 1 })));
    assert!(err && text == "unknown method: lock", "{text}");
    let (err, text, _) = plain.call("issue_write", at(json!({})));
    assert!(err && text == "method is required", "{text}");
    let r = plain.step(json!({ "op": "call_tool", "name": "create_release", "arguments": at(json!({})) }));
    assert_eq!(r["ok"], false, "{r}");
    assert!(r["error"]["message"].as_str().unwrap().contains("unknown tool"), "{r}");
    plain.close();
    changed.close();
}

#[test]
fn fixture_processes_on_one_repository_share_one_forge() {
    let _serial = serial();
    let f = FleetDir::new("");
    let bare = bare_repo(f.dir.path(), "forge.git", &f.repo());
    let clients: Vec<Client> = (0..2).map(|_| fixture_client(&bare, &[])).collect();
    // Both at once: every issue gets its own number.
    let numbers: Vec<i64> = std::thread::scope(|s| {
        let handles: Vec<_> = clients
            .into_iter()
            .enumerate()
            .map(|(who, mut c)| {
                s.spawn(move || {
                    let mut got = Vec::new();
                    for i in 0..10 {
                        let body = format!("from {who}, {i}");
                        let issue = answer(
                            c.call("issue_write", at(json!({ "method": "create", "title": "t", "body": body }))),
                        );
                        got.push(issue["number"].as_i64().unwrap());
                    }
                    c.close();
                    got
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    let mut sorted = numbers.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (1..=20).collect::<Vec<i64>>(), "{numbers:?}");
    // A third process sees them all.
    let mut third = fixture_client(&bare, &[]);
    let listed = answer(third.call("list_issues", at(json!({ "per_page": 50 }))));
    assert_eq!(listed.as_array().unwrap().len(), 20);
    third.close();
}

/// The fleet: five gateways, one per role, each before its own forge fixture process.
struct Fleet {
    _dir: tempfile::TempDir,
    f: FleetDir,
    bare: PathBuf,
    clients: Vec<Client>,
    workers: Vec<String>,
}

impl Fleet {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let bare = dir.path().join("forge.git");
        let bare_s = bare.display().to_string();
        let mut fixture = forge_fixture();
        fixture.extend(["--repo".to_owned(), bare_s.clone()]);
        let workflow = format!("[workflow]\nforge_command = {fixture:?}\n");
        let config = roster("forge", &ROLES, &workflow).replacen("[fleet]\n", "[fleet]\nforge = \"gitea-mcp\"\n", 1);
        let f = FleetDir::new(&config);
        let made = bare_repo(dir.path(), "forge.git", &f.repo());
        assert_eq!(made, bare);
        let mut clients: Vec<Client> = ROLES
            .iter()
            .map(|r| {
                let mut downstream: Vec<&str> = fixture.iter().map(String::as_str).collect();
                // A forge account per role (Gitea refuses an approval by the PR's poster).
                downstream.extend(["--user", *r]);
                Client::start(&f.serve_argv(&format!("prgs-{r}"), "forge-a", &downstream))
            })
            .collect();
        assert!(wait_until(20.0, || f.running_rows() == 5), "the fleet did not come up");
        let workers = clients
            .iter_mut()
            .map(|c| {
                let (_, _, ctx) = c.call("gitea_get_runtime_context", json!({}));
                ctx["worker"]["worker_identity"].as_str().unwrap().to_owned()
            })
            .collect();
        Self { _dir: dir, f, bare, clients, workers }
    }

    fn who(role: &str) -> usize {
        ROLES.iter().position(|r| *r == role).unwrap()
    }

    fn call(&mut self, role: &str, tool: &str, args: Value) -> (bool, String, Value) {
        self.clients[Self::who(role)].call(tool, at(args))
    }

    /// `fleetgate capability` for `role`'s worker with these arguments.
    fn capability(&self, role: &str, tool: &str, args: &Value) -> Value {
        let args = at(args.clone()).to_string();
        let profile = format!("prgs-{role}");
        let worker = &self.workers[Self::who(role)];
        self.f.cli(&[
            "capability",
            "--profile",
            &profile,
            "--tool",
            tool,
            "--args",
            &args,
            "--worker",
            worker,
            "--json",
        ])
    }

    /// `role` claims a `purpose` lease on PR `number` at `head`.
    fn lease(&mut self, role: &str, number: i64, head: &str, purpose: &str) -> Value {
        let claim = at(json!({ "pr": number, "head": head, "purpose": purpose }));
        let (err, text, v) = self.clients[Self::who(role)].call("gitea_claim_pr_lease", claim);
        assert!(!err && v["allowed"] == true, "{role} could not claim: {text}");
        v["lease"].clone()
    }

    fn git(&self, args: &[&str]) -> String {
        git(&self.bare, args)
    }

    fn stop(self) {
        for c in self.clients {
            c.close();
        }
        assert!(wait_until(15.0, || self.f.running_rows() == 0), "every runtime row is marked stopped");
    }
}

/// Refused by the gate (never forwarded: the fixture would answer otherwise), naming `rule`.
fn refused_by(call: (bool, String, Value), rule: &str) -> String {
    let (err, text, _) = call;
    assert!(err, "forwarded, not refused: {text}");
    assert!(text.starts_with("role_not_permitted"), "{text}");
    assert!(text.contains(rule), "the rule {rule} is named: {text}");
    text
}

#[test]
fn forge_calls_are_decided_by_method_and_role_on_every_path() {
    let _serial = serial();
    let mut fleet = Fleet::start();
    let main_before = fleet.git(&["rev-parse", "main"]);

    // The author branches, commits a file, and opens a pull request: forwarded, and real.
    answer(fleet.call("author", "create_branch", json!({ "branch": "feature" })));
    let commit = json!({ "path": "src/feature.txt", "content": "one\n", "message": "Add the feature",
                         "branch_name": "feature" });
    answer(fleet.call("author", "create_or_update_file", commit));
    let feature = fleet.git(&["rev-parse", "feature"]);
    assert_ne!(feature.trim(), main_before.trim(), "a real commit on the branch");
    let create = json!({ "method": "create", "title": "The feature", "body": "Adds it.", "head": "feature",
                         "base": "main" });
    let pr = answer(fleet.call("author", "pull_request_write", create.clone()));
    let number = pr["number"].as_i64().unwrap();
    let pull_head = format!("refs/pull/{number}/head");
    assert_eq!(fleet.git(&["rev-parse", &pull_head]), feature, "{pull_head} is written");
    assert_eq!(pr["head"]["sha"].as_str().unwrap(), feature.trim());

    // A reviewer may not merge: refused naming the rule, the argument and the merger.
    let merge = json!({ "method": "merge", "pull_number": number });
    let text = refused_by(fleet.call("reviewer", "pull_request_write", merge.clone()), "gitea-mcp:pr-merge");
    assert!(text.contains("/method = \"merge\"") && text.contains("merger"), "{text}");
    assert_eq!(fleet.git(&["rev-parse", "main"]), main_before, "nothing merged");

    // An invented method's effect is unknown: no role's, and it never reaches the forge.
    let invented = json!({ "method": "frobnicate", "pull_number": number });
    for role in ROLES {
        let (err, text, _) = fleet.call(role, "pull_request_write", invented.clone());
        assert!(err && text.starts_with("invariant_violated"), "{text}");
        assert!(text.contains("unknown-effect") && text.contains("`frobnicate`"), "{text}");
        assert!(!text.contains("unknown method"), "the forge never saw it: {text}");
    }

    // A push to the branch moves the head the forge reports.
    let file =
        answer(fleet.call("merger", "get_file_contents", json!({ "ref": "feature", "path": "src/feature.txt" })));
    let update = json!({ "path": "src/feature.txt", "content": "two\n", "message": "Second thoughts",
                         "branch_name": "feature", "sha": file["sha"] });
    answer(fleet.call("author", "create_or_update_file", update));
    let head = fleet.git(&["rev-parse", "feature"]);
    let read = json!({ "method": "get", "pull_number": number });
    let seen = answer(fleet.call("merger", "pull_request_read", read.clone()));
    assert_eq!(seen["head"]["sha"].as_str().unwrap(), head.trim(), "the current head, read from the branch");
    assert_eq!((seen["state"].as_str(), seen["merged"].as_bool()), (Some("open"), Some(false)));

    // The reviewer approves under a review lease at the current head (the PR workflow,
    // `tests/e2e/workflow.rs`, tells the refusals), and the merger merges under a merge lease.
    fleet.lease("reviewer", number, head.trim(), "review");
    let review = json!({ "method": "create", "pull_number": number, "state": "APPROVED", "body": "LGTM" });
    assert_eq!(answer(fleet.call("reviewer", "pull_request_review_write", review))["state"], "APPROVED");
    fleet.lease("merger", number, head.trim(), "merge");
    let merged = answer(fleet.call("merger", "pull_request_write", merge.clone()));
    assert_eq!(merged["merged"], true, "{merged}");
    let log = fleet.git(&["log", "--format=%s", "main"]);
    assert!(log.lines().next().unwrap().starts_with("Merge pull request 'The feature'"), "{log}");
    assert!(log.contains("Second thoughts") && log.contains("Add the feature"), "{log}");
    let parents = fleet.git(&["rev-list", "--parents", "-n", "1", "main"]);
    assert!(parents.contains(main_before.trim()) && parents.contains(head.trim()), "a merge commit: {parents}");
    let after = answer(fleet.call("author", "pull_request_read", read));
    assert_eq!((after["merged"].as_bool(), after["state"].as_str()), (Some(true), Some("closed")), "{after}");

    // The same verdicts through `fleetgate capability --args`.
    // (The merger's merge, asked again after it happened, meets the PR workflow: its lease
    // was released by the merge, so the CLI, reading the forge through `[workflow]
    // forge_command`, refuses it as a gateway would.)
    let verdicts = [
        ("reviewer", "pull_request_write", merge.clone(), Some(("role_not_permitted", "gitea-mcp:pr-merge"))),
        ("merger", "pull_request_write", merge.clone(), Some(("approval_required", "no live merge lease"))),
        ("author", "pull_request_write", create, None),
        ("reviewer", "pull_request_review_write", json!({ "method": "create", "pull_number": number }), None),
    ];
    for (role, tool, args, refusal) in verdicts {
        let v = fleet.capability(role, tool, &args);
        match refusal {
            None => assert_eq!(v["allowed"], true, "{role} {tool} {args}: {v}"),
            Some((blocker, needle)) => {
                assert_eq!(v["blocker_kind"], blocker, "{v}");
                assert!(v["blocked_reasons"][0].as_str().unwrap().contains(needle), "{v}");
            }
        }
    }
    // And through the control tool, with the call's arguments.
    let asked = json!({ "tool": "pull_request_write", "arguments": at(merge.clone()) });
    let (_, _, v) = fleet.clients[Fleet::who("reviewer")].call("gitea_resolve_task_capability", asked);
    assert_eq!(v["blocker_kind"], "role_not_permitted", "{v}");
    assert!(v["blocked_reasons"][0].as_str().unwrap().contains("gitea-mcp:pr-merge"), "{v}");
    for role in ROLES {
        let v = fleet.capability(role, "pull_request_write", &invented);
        assert_eq!(v["blocker_kind"], "invariant_violated", "{role}: {v}");
        let reason = v["blocked_reasons"][0].as_str().unwrap();
        assert!(reason.contains("unknown-effect") && reason.contains("`frobnicate`"), "{reason}");
    }

    // Every refusal is in the audit log, naming its rule; the forwarded calls are there too.
    let audit = fleet.f.audit_until(|e| {
        e.iter().filter(|x| x["tool"] == "pull_request_write" && x["blocker_kind"] == "invariant_violated").count()
            >= ROLES.len()
    });
    let entries = audit["entries"].as_array().unwrap();
    let refusals = |rule: &str| {
        entries
            .iter()
            .filter(|e| {
                e["tool"] == "pull_request_write"
                    && e["blocker_kind"] != Value::Null
                    && e["reasons"]
                        .as_array()
                        .is_some_and(|r| r.iter().any(|x| x.as_str().unwrap_or("").contains(rule)))
            })
            .count()
    };
    assert_eq!(refusals("gitea-mcp:pr-merge"), 1, "{audit}");
    assert_eq!(refusals("unknown-effect"), ROLES.len(), "{audit}");
    let allowed = |tool: &str| entries.iter().filter(|e| e["tool"] == tool && e["allowed"] == true).count();
    assert_eq!(allowed("pull_request_write"), 2, "the create and the merge: {audit}");
    assert_eq!(allowed("gitea_claim_pr_lease"), 2, "the review and the merge lease: {audit}");
    assert!(allowed("create_or_update_file") == 2 && allowed("pull_request_review_write") == 1, "{audit}");
    fleet.stop();
}
