//! The guarantee by what a call does (issue "invariants by effect, below every rule and
//! override, decided once"), end to end through real gateways in front of the forge fixture,
//! which does what Gitea 1.24+ does: `update_branch` merges the base into the PR's head
//! whatever the head is; deleting a branch closes the open PRs it heads and moves those
//! based on it to the default branch, after a merge too; a forced or scheduled merge merges.
//!
//! Each attack is one role's call sequence, tried under the default roster, under rules an
//! operator would plausibly write that restate or broaden every permission around it, and
//! under `[approvals] may_override`: refused every time, and the forge's record (`git` on
//! the bare repository, the PRs' state) unchanged.

use crate::support::{answer, git};
use crate::workflow::{Fleet, approve, refused};
use serde_json::json;

/// Operator rules that restate a permission around every invariant (the policy chapter's own
/// example first), and broaden the readers.
const RESTATED: &str = r#"
[[rules]]
tool = "pull_request_write"
args = { "/method" = ["merge"] }
roles = ["merger"]

[[rules]]
tool = "pull_request_write"
args = { "/method" = ["update", "update_branch"] }
roles = ["author"]

[[rules]]
tool = "issue_write"
args = { "/method" = ["update"] }
roles = ["author"]

[[rules]]
tool = "*_read"
roles = ["author", "reviewer", "merger"]

[[rules]]
tool = "delete_branch"
roles = ["author", "merger"]
"#;

/// Every refusal an operator may override (never an invariant: the roster refuses those, and
/// `approval_required` and `stale_head` without the `reviewed-merge` lift).
const OVERRIDES: &str = r#"
[approvals]
wait_seconds = 0
may_override = ["role_not_permitted", "fleet_inventory_blocked", "review_lease_required", "tool_definition_changed", "session_attachment_missing"]
"#;

/// Every refusal an operator may override, the merge's approval included: the break-glass,
/// named as the `reviewed-merge` lift.
const BREAK_GLASS: &str = r#"
[approvals]
wait_seconds = 0
may_override = ["role_not_permitted", "approval_required", "fleet_inventory_blocked", "stale_head", "review_lease_required"]

[invariants]
lift = ["reviewed-merge"]
"#;

/// The rosters every attack runs under.
fn rosters() -> [(&'static str, String); 3] {
    [("default", String::new()), ("restated", RESTATED.to_owned()), ("overridable", format!("{OVERRIDES}{RESTATED}"))]
}

fn tip(fleet: &Fleet, branch: &str) -> String {
    fleet.git(&["rev-parse", branch])
}

fn pr_state(fleet: &mut Fleet, pr: i64) -> (String, String) {
    let read = answer(fleet.call("author", "pull_request_read", json!({ "method": "get", "pull_number": pr })));
    (read["state"].as_str().unwrap_or("").to_owned(), read["base"]["ref"].as_str().unwrap_or("").to_owned())
}

/// The author opens a PR from `head` (made from main when new) onto `base`; its number.
fn open(fleet: &mut Fleet, head: &str, base: &str, content: &str) -> i64 {
    if fleet.git(&["branch", "--list", head]).is_empty() {
        answer(fleet.call("author", "create_branch", json!({ "branch": head })));
        fleet.push_to(head, content, "Work");
    }
    let create = json!({ "method": "create", "title": head, "body": "b", "head": head, "base": base });
    answer(fleet.call("author", "pull_request_write", create))["number"].as_i64().unwrap()
}

/// No operator approval request was recorded: nothing an operator could approve into it.
fn nothing_to_approve(fleet: &Fleet) {
    let requests = fleet.f.cli(&["approvals", "list", "--all", "--json"]);
    assert_eq!(requests["approvals"].as_array().map(Vec::len), Some(0), "{requests}");
}

/// `branch` merged onto main through the workflow (reviewed, leased, merged).
fn land(fleet: &mut Fleet, branch: &str) {
    let pr = open(fleet, branch, "main", &format!("{branch}\n"));
    let head = tip(fleet, branch);
    assert!(!fleet.claim("reviewer", pr, &head, "review").0);
    answer(fleet.call("reviewer", "pull_request_review_write", approve(pr)));
    assert!(!fleet.claim("merger", pr, &head, "merge").0);
    assert_eq!(
        answer(fleet.call("merger", "pull_request_write", json!({ "method": "merge", "pull_number": pr })))["merged"],
        true
    );
}

#[test]
fn update_branch_moves_no_protected_branch() {
    let _serial = crate::support::serial();
    for (name, extra) in rosters() {
        let mut fleet = Fleet::start(&extra);
        // An unreviewed commit on a branch of the author's; main moves on by a reviewed merge
        // (so main has changes the branch lacks, and the forge accepts a PR); then a PR whose
        // head is main and whose base is that branch, and "update the PR's branch": Gitea
        // merges the base — the unreviewed commit — into main.
        answer(fleet.call("author", "create_branch", json!({ "branch": "evil" })));
        fleet.push_to("evil", "unreviewed\n", "Nobody looked at this");
        land(&mut fleet, "reviewed");
        let main_before = tip(&fleet, "main");
        let create = json!({ "method": "create", "title": "t", "body": "b", "head": "main", "base": "evil" });
        let pr = answer(fleet.call("author", "pull_request_write", create))["number"].as_i64().unwrap();
        let update = json!({ "method": "update_branch", "pull_number": pr });
        refused(fleet.call("author", "pull_request_write", update), "protected_branch", "branch `main`");
        assert_eq!(tip(&fleet, "main"), main_before, "{name}: main did not move");
        nothing_to_approve(&fleet);
        // The same update of a PR whose head is a feature branch (made from `evil`, so the
        // forge's merge has no conflict to refuse) goes through.
        answer(fleet.call("author", "create_branch", json!({ "branch": "feature", "old_branch": "evil" })));
        fleet.push_to("feature", "work\n", "Work");
        let ok = open(&mut fleet, "feature", "evil", "work\n");
        let update = json!({ "method": "update_branch", "pull_number": ok });
        answer(fleet.call("author", "pull_request_write", update));
        fleet.stop();
    }
}

#[test]
fn a_merge_that_deletes_its_branch_strands_no_other_pr() {
    let _serial = crate::support::serial();
    for (name, extra) in rosters() {
        let mut fleet = Fleet::start(&extra);
        let main_before = tip(&fleet, "main");
        let first = open(&mut fleet, "feature", "main", "one\n");
        let head = tip(&fleet, "feature");
        // Another author's PR stacked on it.
        let stacked = open(&mut fleet, "stacked", "feature", "two\n");
        assert!(!fleet.claim("reviewer", first, &head, "review").0);
        answer(fleet.call("reviewer", "pull_request_review_write", approve(first)));
        assert!(!fleet.claim("merger", first, &head, "merge").0);
        let merge = json!({ "method": "merge", "pull_number": first, "delete_branch": true });
        let text = refused(fleet.call("merger", "pull_request_write", merge), "invariant_violated", "retarget");
        assert!(text.contains(&format!("#{stacked}")), "{name}: {text}");
        assert_eq!(tip(&fleet, "main"), main_before, "{name}: nothing merged");
        assert_eq!(pr_state(&mut fleet, stacked), ("open".to_owned(), "feature".to_owned()), "{name}");
        nothing_to_approve(&fleet);
        // The merge that leaves its branch is the workflow's, and lands the approved head.
        let merge = json!({ "method": "merge", "pull_number": first });
        assert_eq!(answer(fleet.call("merger", "pull_request_write", merge))["merged"], true);
        assert!(git(&fleet.dir.path().join("forge.git"), &["merge-base", "--is-ancestor", &head, "main"]).is_empty());
        fleet.stop();
    }
}

#[test]
fn a_branch_is_deleted_only_with_no_open_pr_on_it_and_never_blind() {
    let _serial = crate::support::serial();
    for (name, extra) in rosters() {
        let mut fleet = Fleet::start(&extra);
        let pr = open(&mut fleet, "feature", "main", "one\n");
        let child = open(&mut fleet, "child", "feature", "two\n");
        for role in ["author", "merger"] {
            let text = refused(
                fleet.call(role, "delete_branch", json!({ "branch": "feature" })),
                "invariant_violated",
                "pr-state",
            );
            assert!(text.contains(&format!("#{pr}")) && text.contains(&format!("#{child}")), "{name}: {text}");
        }
        assert!(!fleet.git(&["branch", "--list", "feature"]).is_empty(), "{name}: the branch is there");
        assert_eq!(pr_state(&mut fleet, pr).0, "open");
        fleet.stop();
    }
    // A repository with forks: which of their PRs pull from a branch cannot be read.
    let mut fleet = Fleet::start_with("", &[("merger", &["--forks", "1"])]);
    answer(fleet.call("author", "create_branch", json!({ "branch": "lonely" })));
    refused(fleet.call("merger", "delete_branch", json!({ "branch": "lonely" })), "forge_unavailable", "1 fork(s)");
    fleet.stop();
}

#[test]
fn restated_rules_lift_no_invariant() {
    let _serial = crate::support::serial();
    let mut fleet = Fleet::start(&format!("{OVERRIDES}{RESTATED}"));
    let main_before = tip(&fleet, "main");
    let pr = open(&mut fleet, "feature", "main", "one\n");
    let head = tip(&fleet, "feature");
    assert!(!fleet.claim("reviewer", pr, &head, "review").0);
    answer(fleet.call("reviewer", "pull_request_review_write", approve(pr)));
    assert!(!fleet.claim("merger", pr, &head, "merge").0);
    // A scheduled merge at the approved head, then a push: the forge would land the push.
    for flag in ["merge_when_checks_succeed", "force_merge"] {
        let merge = json!({ "method": "merge", "pull_number": pr, flag: true });
        refused(fleet.call("merger", "pull_request_write", merge), "invariant_violated", flag);
    }
    assert_eq!(tip(&fleet, "main"), main_before);
    // The author closes or retargets another role's PR through the restated updates.
    let close = json!({ "method": "update", "pull_number": pr, "state": "closed" });
    refused(fleet.call("author", "pull_request_write", close), "invariant_violated", "pr-state");
    let close = json!({ "method": "update", "issue_number": pr, "state": "closed" });
    refused(fleet.call("author", "issue_write", close), "invariant_violated", "pr-state");
    let retarget = json!({ "method": "update", "pull_number": pr, "base": "feature" });
    refused(fleet.call("author", "pull_request_write", retarget), "invariant_violated", "retarget");
    assert_eq!(pr_state(&mut fleet, pr), ("open".to_owned(), "main".to_owned()));
    // A reader writes no file on the server's host, with or without `output_path`.
    let target = fleet.dir.path().join("written-by-a-reader");
    let download = json!({ "method": "download_job_log", "job_id": 1, "output_path": target.display().to_string() });
    refused(fleet.call("reviewer", "actions_run_read", download), "invariant_violated", "reader-writes");
    assert!(!target.exists());
    nothing_to_approve(&fleet);
    // `rules diff` of the roster against itself is empty.
    let path = fleet.f.config().display().to_string();
    let diff = fleet.f.cli(&["rules", "diff", &path, &path, "--json"]);
    for part in ["added", "removed", "changed"] {
        assert_eq!(diff[part].as_array().map(Vec::len), Some(0), "{part}: {diff}");
    }
    fleet.stop();
}

#[test]
fn an_approved_override_skips_no_other_check_and_a_moved_head_is_another_call() {
    let _serial = crate::support::serial();
    let mut fleet = Fleet::start(BREAK_GLASS);
    let main_before = tip(&fleet, "main");
    // The reviewer writes a workflow file on main: refused by the invariant, and no override
    // is even asked (the role refusal behind it would be overridable).
    let write = json!({ "path": ".gitea/workflows/pwn.yml", "content": "on: push\n", "message": "ci",
                        "branch_name": "main" });
    refused(fleet.call("reviewer", "create_or_update_file", write), "protected_branch", "protected-path");
    nothing_to_approve(&fleet);
    assert_eq!(tip(&fleet, "main"), main_before);

    // An unreviewed PR; the merger's merge is refused approval_required, with an override
    // request for exactly that call at exactly this head.
    let pr = open(&mut fleet, "feature", "main", "one\n");
    let head = tip(&fleet, "feature");
    let merge = json!({ "method": "merge", "pull_number": pr });
    let text = refused(fleet.call("merger", "pull_request_write", merge.clone()), "approval_required", "apr-");
    let listed = fleet.f.cli(&["approvals", "list", "--json"]);
    let request = listed["approvals"][0].clone();
    assert_eq!(request["arguments"]["head_commit_id"], head.as_str(), "the head it was asked at: {request}");
    let id = request["id"].as_str().unwrap().to_owned();
    assert!(text.contains(&id));
    fleet.f.cli(&["approvals", "approve", &id, "--reason", "hotfix", "--json"]);
    // The author pushes after the approval: the identical retry is another call (another
    // head pinned), refused, and main does not move.
    let moved = fleet.push_to("feature", "unreviewed\n", "After the approval");
    assert_ne!(moved, head);
    refused(fleet.call("merger", "pull_request_write", merge.clone()), "approval_required", "apr-");
    assert_eq!(tip(&fleet, "main"), main_before, "the approval covered the old head only");
    // Approved at the new head, the merge lands exactly that head, pinned.
    let listed = fleet.f.cli(&["approvals", "list", "--json"]);
    let again =
        listed["approvals"].as_array().unwrap().iter().find(|r| r["arguments"]["head_commit_id"] == moved.as_str());
    let again = again.expect("a request at the new head").clone();
    fleet.f.cli(&["approvals", "approve", again["id"].as_str().unwrap(), "--json"]);
    assert_eq!(answer(fleet.call("merger", "pull_request_write", merge))["merged"], true);
    let parents = fleet.git(&["rev-list", "--parents", "-n", "1", "main"]);
    assert!(parents.contains(&moved), "the approved head merged: {parents}");
    let audit = fleet.f.cli(&["audit", "--json"]).to_string();
    assert!(audit.contains("approval_required overridden once by approval"), "the override is audited");
    fleet.stop();
}

#[test]
fn the_issue_lock_holds_through_an_issue_update_of_the_pr() {
    let _serial = crate::support::serial();
    let mut fleet = Fleet::start("");
    let issue = answer(fleet.call("author", "issue_write", json!({ "method": "create", "title": "Bug", "body": "b" })));
    let issue = issue["number"].as_i64().unwrap();
    assert!(!fleet.call("author", "gitea_claim_issue_lease", json!({ "issue": issue })).0);
    // Another author's PR, which then claims the held issue through an issue update.
    fleet.restart("author");
    let pr = open(&mut fleet, "other", "main", "x\n");
    let claim = json!({ "method": "update", "issue_number": pr, "body": format!("Closes #{issue}") });
    refused(fleet.call("author", "issue_write", claim), "issue_lock_held", &format!("#{issue}"));
    fleet.stop();
}

#[test]
fn a_denial_stands_for_that_exact_call() {
    let _serial = crate::support::serial();
    let extra = "[approvals]\nwait_seconds = 0\n\n[[rules]]\ntool = \"create_branch\"\nroles = [\"author\"]\ndecision = \"ask\"\n";
    let mut fleet = Fleet::start(extra);
    let ask = json!({ "branch": "asked" });
    refused(fleet.call("author", "create_branch", ask.clone()), "approval_pending", "apr-");
    let id = fleet.f.cli(&["approvals", "list", "--json"])["approvals"][0]["id"].as_str().unwrap().to_owned();
    fleet.f.cli(&["approvals", "deny", &id, "--reason", "no", "--json"]);
    // Asked again and again: the denial stands, no new request is recorded.
    for _ in 0..3 {
        refused(fleet.call("author", "create_branch", ask.clone()), "approval_denied", &id);
    }
    let all = fleet.f.cli(&["approvals", "list", "--all", "--json"]);
    assert_eq!(all["approvals"].as_array().map(Vec::len), Some(1), "{all}");
    // Other calls are asked, each once, up to the worker's bound.
    for n in 0..fleetgate_core::capability::MAX_PENDING_PER_WORKER {
        refused(
            fleet.call("author", "create_branch", json!({ "branch": format!("b{n}") })),
            "approval_pending",
            "apr-",
        );
    }
    let text =
        refused(fleet.call("author", "create_branch", json!({ "branch": "more" })), "approval_pending", "waiting");
    assert!(text.contains("at most"), "{text}");
    let pending = fleet.f.cli(&["approvals", "list", "--json"]);
    assert_eq!(
        pending["approvals"].as_array().map(Vec::len),
        Some(fleetgate_core::capability::MAX_PENDING_PER_WORKER),
        "{pending}"
    );
    fleet.stop();
}

/// Every pending request approved by the operator (who approves anything); how many.
fn approve_everything(fleet: &Fleet) -> usize {
    let list = fleet.f.cli(&["approvals", "list", "--json"]);
    let ids: Vec<String> =
        list["approvals"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect();
    for id in &ids {
        fleet.f.cli(&["approvals", "approve", id, "--json"]);
    }
    ids.len()
}

/// Issue 55: under `[approvals] may_override = ["approval_required"]` (or `stale_head`) and an
/// operator who approves everything, the merger landed on `main` heads no reviewer approved —
/// a second, quieter path around `protected-branch`. Such a roster is refused at load, naming
/// the lift; under every override a roster may still have, a rule asking before every merge
/// and the operator approving every request, the merger's merge with no review, with only a
/// pending review, and of a head pushed after the approval is refused, and `main` does not
/// move. The break-glass, named as the `reviewed-merge` lift, lands it — said in the audit.
#[test]
fn an_operator_approving_everything_lands_no_unreviewed_head_on_main() {
    let _serial = crate::support::serial();
    let asking = format!(
        "{OVERRIDES}\n[[rules]]\ntool = \"pull_request_write\"\nargs = {{ \"/method\" = [\"merge\"] }}\nroles = [\"merger\"]\ndecision = \"ask\"\n"
    );
    let mut fleet = Fleet::start(&asking);
    // The override asked for without the lift: refused at load, with the advice.
    for kind in ["approval_required", "stale_head"] {
        let text = std::fs::read_to_string(fleet.f.config()).unwrap();
        let bad = fleet.dir.path().join(format!("{kind}.toml"));
        std::fs::write(&bad, text.replace("may_override = [", &format!("may_override = [\"{kind}\", "))).unwrap();
        let out = std::process::Command::new(crate::support::bin())
            .env_clear()
            .arg("--config")
            .arg(&bad)
            .args(["approvals", "list"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains(&format!("{kind} would let an operator's approval land on a protected branch")), "{err}");
        assert!(err.contains("[invariants] lift = [\"reviewed-merge\"]"), "{err}");
    }
    let main_before = tip(&fleet, "main");
    let merge = |pr: i64| json!({ "method": "merge", "pull_number": pr });
    // No review at all.
    let lone = open(&mut fleet, "lone", "main", "unreviewed\n");
    assert!(!fleet.claim("merger", lone, &tip(&fleet, "lone"), "merge").0);
    for _ in 0..2 {
        let text =
            refused(fleet.call("merger", "pull_request_write", merge(lone)), "approval_required", "reviewed-merge");
        assert!(!text.contains("approvals approve"), "nothing to approve into the merge: {text}");
        approve_everything(&fleet);
    }
    // Only a pending (unsubmitted) review.
    let pending = open(&mut fleet, "pending", "main", "pending\n");
    let head = tip(&fleet, "pending");
    assert!(!fleet.claim("reviewer", pending, &head, "review").0);
    let draft = json!({ "method": "create", "pull_number": pending, "state": "PENDING", "body": "later" });
    let _ = fleet.call("reviewer", "pull_request_review_write", draft);
    assert!(!fleet.claim("merger", pending, &head, "merge").0);
    approve_everything(&fleet);
    refused(fleet.call("merger", "pull_request_write", merge(pending)), "approval_required", "reviewed-merge");
    approve_everything(&fleet);
    refused(fleet.call("merger", "pull_request_write", merge(pending)), "approval_required", "reviewed-merge");
    // A head pushed after the approval.
    let moved = open(&mut fleet, "moved", "main", "reviewed\n");
    let reviewed = tip(&fleet, "moved");
    assert!(!fleet.claim("reviewer", moved, &reviewed, "review").0);
    answer(fleet.call("reviewer", "pull_request_review_write", approve(moved)));
    assert!(!fleet.claim("merger", moved, &reviewed, "merge").0);
    fleet.push_to("moved", "pushed after the review\n", "Nobody looked at this");
    for _ in 0..2 {
        let (err, text, structured) = fleet.call("merger", "pull_request_write", merge(moved));
        assert!(err, "merged a head pushed after the review: {text}");
        let kind = structured["blocker_kind"].as_str().unwrap_or_else(|| text.split(':').next().unwrap_or_default());
        assert!(["stale_head", "approval_required"].contains(&kind), "{text}");
        assert!(text.contains("reviewed-merge"), "{text}");
        approve_everything(&fleet);
    }
    assert_eq!(tip(&fleet, "main"), main_before, "main did not move");
    fleet.stop();

    // The break-glass, named: lifted, the operator's override lands the unreviewed head, and
    // the lift is said with the call it let through.
    let glass = "[approvals]\nwait_seconds = 0\nmay_override = [\"approval_required\"]\n\n[invariants]\nlift = \
                 [\"reviewed-merge\"]\n";
    let mut fleet = Fleet::start(glass);
    let main_before = tip(&fleet, "main");
    let pr = open(&mut fleet, "glass", "main", "break glass\n");
    assert!(!fleet.claim("merger", pr, &tip(&fleet, "glass"), "merge").0);
    refused(fleet.call("merger", "pull_request_write", merge(pr)), "approval_required", "apr-");
    assert_eq!(approve_everything(&fleet), 1);
    let (err, text, _) = fleet.call("merger", "pull_request_write", merge(pr));
    assert!(!err, "the break-glass lands it: {text}");
    assert_ne!(tip(&fleet, "main"), main_before);
    let audit = fleet.f.cli(&["audit", "--json"]).to_string();
    assert!(audit.contains("invariant `reviewed-merge` lifted by [invariants] lift"), "the lift is said");
    assert!(audit.contains("approval_required overridden once by approval"), "the override is said");
    fleet.stop();
}
