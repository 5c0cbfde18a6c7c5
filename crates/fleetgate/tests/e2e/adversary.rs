//! The hostile-agent suite (issue "the gate judges exactly what it forwards"): one role alone
//! tries to land an unapproved head on `main`, write a file, or do another role's job, with
//! calls the real server (gitea-mcp, with Gitea's semantics behind it) accepts. Each test is
//! one attack, end to end through real `fleetgate serve` gateways in front of the forge
//! fixture, which does what Gitea does where it differs from a naive reading: it reads one
//! key and truncates a fractional number, writes the default branch when no `branch_name` is
//! given, honours `head_commit_id` as a compare-and-swap (409), merges forced and scheduled
//! merges, refuses a self-approval (422), retargets a PR's base, matches owner and repository
//! case-insensitively, and writes a downloaded log wherever `output_path` says. Each asserts
//! what lands — `git` on the bare repository, the file system — and the refusal's blocker.

use crate::support::{answer, git};
use crate::workflow::{Fleet, approve, refused};
use serde_json::{Value, json};

/// `main`'s tip.
fn main_tip(fleet: &Fleet) -> String {
    fleet.git(&["rev-parse", "main"])
}

/// The author opens a PR from a new branch `branch` (onto `base`); its number and head.
fn open_pr(fleet: &mut Fleet, branch: &str, base: &str) -> (i64, String) {
    answer(fleet.call("author", "create_branch", json!({ "branch": branch })));
    let head = fleet.push_to(branch, &format!("{branch}\n"), "Work");
    let create = json!({ "method": "create", "title": branch, "body": "b", "head": branch, "base": base });
    let pr = answer(fleet.call("author", "pull_request_write", create))["number"].as_i64().unwrap();
    (pr, head)
}

/// `pr` approved at `head` by the independent reviewer, and the merger holding its merge lease.
fn approve_and_lease(fleet: &mut Fleet, pr: i64, head: &str) {
    assert!(!fleet.claim("reviewer", pr, head, "review").0);
    answer(fleet.call("reviewer", "pull_request_review_write", approve(pr)));
    assert!(!fleet.claim("merger", pr, head, "merge").0);
}

/// Is `path` in `rev`'s tree?
fn has_file(fleet: &Fleet, rev: &str, path: &str) -> bool {
    !git(&fleet.dir.path().join("forge.git"), &["ls-tree", "--name-only", rev, "--", path]).trim().is_empty()
}

/// The merger, holding a merge lease at `head`, is refused `approval_required` naming
/// `needle`, and `main` is still `before`.
fn merge_is_refused(fleet: &mut Fleet, pr: i64, head: &str, before: &str, needle: &str) {
    assert!(!fleet.claim("merger", pr, head, "merge").0);
    refused(fleet.call("merger", "pull_request_write", merge(json!(pr))), "approval_required", needle);
    assert_eq!(main_tip(fleet), before, "main received nothing");
}

fn merge(pr: Value) -> Value {
    json!({ "method": "merge", "pull_number": pr })
}

#[test]
fn a_parser_differential_merges_nothing() {
    let _serial = crate::support::serial();
    let mut fleet = Fleet::start("");
    let before = main_tip(&fleet);
    let (approved, head) = open_pr(&mut fleet, "approved", "main");
    approve_and_lease(&mut fleet, approved, &head);
    let (unreviewed, _) = open_pr(&mut fleet, "unreviewed", "main");
    // The server reads `pull_number` (truncating 1.0 to 1); the old gate read `index` too.
    let float = json!({ "method": "merge", "pull_number": unreviewed as f64, "index": approved });
    refused(fleet.call("merger", "pull_request_write", float), "ambiguous_arguments", "index");
    let fraction = json!({ "method": "merge", "pull_number": unreviewed as f64 + 0.5 });
    refused(fleet.call("merger", "pull_request_write", fraction), "ambiguous_arguments", "pull_number");
    let stringly = json!({ "method": "merge", "pull_number": approved, "force_merge": "true" });
    refused(fleet.call("merger", "pull_request_write", stringly), "ambiguous_arguments", "force_merge");
    assert_eq!(main_tip(&fleet), before, "main received nothing");
    fleet.stop();
}

#[test]
fn no_role_writes_deletes_or_creates_over_the_base_branch() {
    let _serial = crate::support::serial();
    let mut fleet = Fleet::start("");
    let before = main_tip(&fleet);
    let write = json!({ "path": "evil.txt", "content": "x", "message": "m", "branch_name": "main" });
    refused(fleet.call("author", "create_or_update_file", write), "protected_branch", "default branch `main`");
    // Without a branch the server writes the default branch.
    let implicit = json!({ "path": "evil.txt", "content": "x", "message": "m" });
    refused(fleet.call("author", "create_or_update_file", implicit), "protected_branch", "writes branch `main`");
    let delete = json!({ "path": "README.md", "message": "m", "branch_name": "main", "sha": "0" });
    refused(fleet.call("author", "delete_file", delete), "protected_branch", "main");
    refused(fleet.call("author", "delete_branch", json!({ "branch": "main" })), "protected_branch", "main");
    refused(fleet.call("merger", "delete_branch", json!({ "branch": "main" })), "protected_branch", "main");
    assert_eq!(main_tip(&fleet), before, "main received nothing");
    assert!(!has_file(&fleet, "main", "evil.txt"));
    fleet.stop();
}

#[test]
fn workflow_files_are_written_on_no_branch() {
    let _serial = crate::support::serial();
    let mut fleet = Fleet::start("");
    answer(fleet.call("author", "create_branch", json!({ "branch": "feature" })));
    for path in [".gitea/workflows/pwn.yml", "./.github//workflows/pwn.yaml"] {
        let write = json!({ "path": path, "content": "on: push\n", "message": "ci", "branch_name": "feature" });
        refused(fleet.call("author", "create_or_update_file", write), "protected_branch", "protected_paths");
    }
    assert!(!has_file(&fleet, "feature", ".gitea/workflows/pwn.yml"));
    assert!(!has_file(&fleet, "feature", ".github/workflows/pwn.yaml"));
    fleet.stop();
}

#[test]
fn a_pr_is_never_retargeted_and_a_branch_under_an_open_pr_is_not_deleted() {
    let _serial = crate::support::serial();
    let mut fleet = Fleet::start("");
    answer(fleet.call("author", "create_branch", json!({ "branch": "dev" })));
    let before = main_tip(&fleet);
    let (pr, head) = open_pr(&mut fleet, "feature", "dev");
    approve_and_lease(&mut fleet, pr, &head);
    // Gitea merges onto the base the PR has when the merge runs, and nothing pins it: a
    // retarget (after the approval, or racing the merge) is no role's.
    let retarget = json!({ "method": "update", "pull_number": pr, "base": "main" });
    refused(fleet.call("author", "pull_request_write", retarget), "invariant_violated", "invariant `retarget`");
    // Gitea closes every open PR a deleted branch heads (the controller's job), and moves
    // every PR based on it to the default branch (a retarget: no role's).
    for (branch, invariant) in [("feature", "pr-state"), ("dev", "retarget")] {
        let text = refused(
            fleet.call("author", "delete_branch", json!({ "branch": branch })),
            "invariant_violated",
            invariant,
        );
        assert!(text.contains(&format!("#{pr}")), "{text}");
    }
    let read = answer(fleet.call("author", "pull_request_read", json!({ "method": "get", "pull_number": pr })));
    assert_eq!((read["state"].as_str(), read["base"]["ref"].as_str()), (Some("open"), Some("dev")), "{read}");
    assert_eq!(main_tip(&fleet), before, "main received nothing");
    fleet.stop();
}

#[test]
fn a_push_racing_the_merge_is_refused_by_the_forge_on_the_pinned_head() {
    let _serial = crate::support::serial();
    let mut fleet = Fleet::start_with("", &[("merger", &["--variant", "race-merge"])]);
    let before = main_tip(&fleet);
    let (pr, head) = open_pr(&mut fleet, "feature", "main");
    approve_and_lease(&mut fleet, pr, &head);
    // The gate judged `head`; a push lands before the forge merges. Pinned, the forge refuses.
    let (err, text, _) = fleet.call("merger", "pull_request_write", merge(json!(pr)));
    assert!(err && text.contains("409"), "the forge's compare-and-swap refused it: {text}");
    assert_eq!(main_tip(&fleet), before, "main received nothing");
    assert!(!has_file(&fleet, "main", "raced.txt"), "the unreviewed push did not land");
    // A caller's own head that is not the PR's is the gate's refusal.
    let stale = json!({ "method": "merge", "pull_number": pr, "head_commit_id": head });
    refused(fleet.call("merger", "pull_request_write", stale), "stale_head", "expects head");
    fleet.stop();
}

#[test]
fn forced_and_scheduled_merges_are_no_role_s() {
    let _serial = crate::support::serial();
    let mut fleet = Fleet::start("");
    let before = main_tip(&fleet);
    let (pr, head) = open_pr(&mut fleet, "feature", "main");
    approve_and_lease(&mut fleet, pr, &head);
    for flag in ["force_merge", "merge_when_checks_succeed"] {
        let call = json!({ "method": "merge", "pull_number": pr, flag: true });
        refused(fleet.call("merger", "pull_request_write", call), "invariant_violated", flag);
    }
    assert_eq!(main_tip(&fleet), before, "main received nothing");
    fleet.stop();
}

#[test]
fn a_reader_that_writes_a_file_is_no_role_s() {
    let _serial = crate::support::serial();
    let mut fleet = Fleet::start("");
    let target = fleet.dir.path().join("written-by-a-reader");
    let download = json!({ "method": "download_job_log", "job_id": 1, "output_path": target.display().to_string() });
    for role in ["author", "reviewer", "merger"] {
        refused(fleet.call(role, "actions_run_read", download.clone()), "invariant_violated", "reader-writes");
    }
    assert!(!target.exists(), "no file was written");
    // Its plain reads stay open.
    answer(fleet.call("author", "actions_run_read", json!({ "method": "list_runs" })));
    fleet.stop();
}

#[test]
fn a_verdict_is_read_only_from_the_key_the_server_reads() {
    let _serial = crate::support::serial();
    let mut fleet = Fleet::start("");
    let before = main_tip(&fleet);
    let (pr, head) = open_pr(&mut fleet, "feature", "main");
    assert!(!fleet.claim("reviewer", pr, &head, "review").0);
    // The server reads `state` (a comment here); `event` is a key it does not read.
    let comment = json!({ "method": "create", "pull_number": pr, "state": "COMMENT", "event": "APPROVED" });
    refused(fleet.call("reviewer", "pull_request_review_write", comment), "ambiguous_arguments", "event");
    let comment = json!({ "method": "create", "pull_number": pr, "state": "COMMENT", "body": "hm" });
    answer(fleet.call("reviewer", "pull_request_review_write", comment));
    merge_is_refused(&mut fleet, pr, &head, &before, "no independent approval");
    fleet.stop();
}

#[test]
fn the_author_neither_closes_nor_reopens_a_pr_through_another_door() {
    let _serial = crate::support::serial();
    let mut fleet = Fleet::start("");
    let (pr, _) = open_pr(&mut fleet, "feature", "main");
    // PRs and issues share numbers: an issue update closes the PR.
    let close = json!({ "method": "update", "issue_number": pr, "state": "closed" });
    refused(fleet.call("author", "issue_write", close), "invariant_violated", "invariant `pr-state`");
    let reopen = json!({ "method": "update", "pull_number": pr, "state": "open" });
    refused(fleet.call("author", "pull_request_write", reopen), "invariant_violated", "invariant `pr-state`");
    let read = answer(fleet.call("author", "pull_request_read", json!({ "method": "get", "pull_number": pr })));
    assert_eq!(read["state"], "open", "{read}");
    fleet.stop();
}

#[test]
fn owner_and_repo_spelled_otherwise_are_one_pr_s_history() {
    let _serial = crate::support::serial();
    let mut fleet = Fleet::start("");
    let before = main_tip(&fleet);
    answer(fleet.call("author", "create_branch", json!({ "branch": "feature" })));
    let head = fleet.push("one\n", "First");
    // Opened as FLEET/Forge: Gitea resolves it; the origin must still be this PR's.
    let create = json!({ "method": "create", "title": "t", "body": "b", "head": "feature", "base": "main",
                         "owner": "FLEET", "repo": "Forge" });
    let pr = answer(fleet.call_as_is("author", "pull_request_write", create))["number"].as_i64().unwrap();
    // reviewer2 runs in the author's own client session: its approval is not independent.
    assert!(!fleet.claim("reviewer2", pr, &head, "review").0);
    answer(fleet.call("reviewer2", "pull_request_review_write", approve(pr)));
    merge_is_refused(&mut fleet, pr, &head, &before, "session that created the PR");
    fleet.stop();
}

#[test]
fn an_approval_the_forge_refuses_records_nothing() {
    let _serial = crate::support::serial();
    // The reviewer's server acts as the author's forge account: Gitea refuses the approval (422).
    let mut fleet = Fleet::start_with("", &[("reviewer", &["--user", "author"])]);
    let (pr, head) = open_pr(&mut fleet, "feature", "main");
    assert!(!fleet.claim("reviewer", pr, &head, "review").0);
    let (err, text, _) = fleet.call("reviewer", "pull_request_review_write", approve(pr));
    assert!(err && text.contains("422") && text.contains("your own pull"), "{text}");
    let shown = fleet.f.cli(&["pr", "show", &pr.to_string(), "--owner", "fleet", "--repo", "forge", "--json"]);
    assert_eq!(shown["current_decisions"].as_array().map(Vec::len), Some(0), "nothing recorded: {shown}");
    fleet.stop();
}

#[test]
fn a_request_changes_stands_until_its_reviewer_approves_or_an_operator_clears_it() {
    let _serial = crate::support::serial();
    // Any approval counts here, so reviewer2's stands beside the reviewer's request-changes.
    let mut fleet = Fleet::start("independent_review = \"off\"\n");
    let before = main_tip(&fleet);
    let (pr, head) = open_pr(&mut fleet, "feature", "main");
    assert!(!fleet.claim("reviewer", pr, &head, "review").0);
    let changes = json!({ "method": "create", "pull_number": pr, "state": "REQUEST_CHANGES", "body": "no" });
    answer(fleet.call("reviewer", "pull_request_review_write", changes));
    let shown = fleet.f.cli(&["pr", "show", &pr.to_string(), "--owner", "fleet", "--repo", "forge", "--json"]);
    let worker = shown["current_decisions"][0]["by"]["worker"].as_str().unwrap().to_owned();
    let lease = shown["leases"][0]["lease_id"].as_str().unwrap().to_owned();
    assert_eq!(fleet.f.cli(&["pr", "release", &lease, "--json"])["released"][0], lease.as_str());
    // Another reviewer's later approval does not outweigh it.
    assert!(!fleet.claim("reviewer2", pr, &head, "review").0);
    answer(fleet.call("reviewer2", "pull_request_review_write", approve(pr)));
    merge_is_refused(&mut fleet, pr, &head, &before, "requested changes");
    // An operator clears it (audited); the merge goes through at exactly the approved head.
    let cleared = fleet.f.cli(&[
        "pr",
        "clear-decision",
        &pr.to_string(),
        "--worker",
        &worker,
        "--reason",
        "addressed offline",
        "--owner",
        "fleet",
        "--repo",
        "forge",
        "--json",
    ]);
    assert_eq!(cleared["cleared"], 1, "{cleared}");
    assert_eq!(answer(fleet.call("merger", "pull_request_write", merge(json!(pr))))["merged"], true);
    let parents = fleet.git(&["rev-list", "--parents", "-n", "1", "main"]);
    assert_eq!(parents.split(' ').collect::<Vec<_>>()[1..], [before.as_str(), head.as_str()]);
    let audit = fleet.f.audit_until(|e| e.iter().any(|x| x["tool"] == "pr clear-decision"));
    assert!(audit.to_string().contains("addressed offline"), "{audit}");
    fleet.stop();
}

#[test]
fn the_session_that_pushed_a_head_does_not_approve_it() {
    let _serial = crate::support::serial();
    let mut fleet = Fleet::start("");
    let before = main_tip(&fleet);
    answer(fleet.call("author", "create_branch", json!({ "branch": "feature" })));
    let head = fleet.push("one\n", "Pushed through the author's gateway");
    // The PR is opened outside the gateways (no origin is recorded): only the push names
    // the author's session.
    let bare = fleet.dir.path().join("forge.git").display().to_string();
    let mut argv = crate::support::forge_fixture();
    argv.extend(["--repo".to_owned(), bare, "--user".to_owned(), "author".to_owned()]);
    let mut direct = crate::support::Client::start(&argv);
    let create = json!({ "method": "create", "title": "t", "body": "b", "head": "feature", "base": "main" });
    let pr = answer(direct.call("pull_request_write", crate::support::at(create)))["number"].as_i64().unwrap();
    direct.close();
    // reviewer2 runs in the author's client session: the session that pushed the head.
    assert!(!fleet.claim("reviewer2", pr, &head, "review").0);
    answer(fleet.call("reviewer2", "pull_request_review_write", approve(pr)));
    merge_is_refused(&mut fleet, pr, &head, &before, "session that pushed it");
    fleet.stop();
}

#[test]
fn a_renamed_repository_s_old_name_is_the_same_pr_s_history() {
    let _serial = crate::support::serial();
    // Gitea answers for a renamed repository's old name too (a redirect): every fixture here.
    let alias: &[&str] = &["--alias", "fleet/old-name"];
    let flags = [("author", alias), ("reviewer", alias), ("reviewer2", alias), ("merger", alias)];
    let mut fleet = Fleet::start_with("", &flags);
    let before = main_tip(&fleet);
    answer(fleet.call("author", "create_branch", json!({ "branch": "feature" })));
    let head = fleet.push("one\n", "First");
    // Opened under the old name; approved under the new one by the author's own session.
    let create = json!({ "method": "create", "title": "t", "body": "b", "head": "feature", "base": "main",
                         "owner": "fleet", "repo": "old-name" });
    let pr = answer(fleet.call_as_is("author", "pull_request_write", create))["number"].as_i64().unwrap();
    assert!(!fleet.claim("reviewer2", pr, &head, "review").0);
    answer(fleet.call("reviewer2", "pull_request_review_write", approve(pr)));
    merge_is_refused(&mut fleet, pr, &head, &before, "session that created the PR");
    fleet.stop();
}

#[test]
fn the_default_branch_the_forge_reports_is_protected_whatever_the_config_says() {
    let _serial = crate::support::serial();
    // The roster names another default branch; the forge's (`main`) stays protected.
    let mut fleet = Fleet::start("default_branch = \"trunk\"\n");
    let before = main_tip(&fleet);
    let write = json!({ "path": "evil.txt", "content": "x", "message": "m", "branch_name": "main" });
    refused(fleet.call("author", "create_or_update_file", write), "protected_branch", "as the forge reports it");
    refused(fleet.call("author", "delete_branch", json!({ "branch": "main" })), "protected_branch", "main");
    assert_eq!(main_tip(&fleet), before, "main received nothing");
    fleet.stop();
}

#[test]
fn a_merge_the_server_cannot_pin_to_the_approved_head_is_refused() {
    let _serial = crate::support::serial();
    // A server whose merge lists no head_commit_id would drop the gate's pin silently.
    let mut fleet = Fleet::start_with("", &[("merger", &["--variant", "no-head-pin"])]);
    let before = main_tip(&fleet);
    let (pr, head) = open_pr(&mut fleet, "feature", "main");
    approve_and_lease(&mut fleet, pr, &head);
    refused(
        fleet.call("merger", "pull_request_write", merge(json!(pr))),
        "invariant_violated",
        "cannot be merged at the head",
    );
    assert_eq!(main_tip(&fleet), before, "main received nothing");
    fleet.stop();
}
