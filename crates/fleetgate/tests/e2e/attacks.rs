//! The hostile-agent suite written once and run against every forge dialect (issue "one forge
//! dialect in one place"): gitea-mcp in both of its release lines (the go-sdk generation's
//! argument names, and the v1.0 line's `index`/`perPage`/`keyword`, which the gate's own
//! reads must follow), and GitHub's official server. Each attack is one role's call sequence
//! through real `fleetgate serve` gateways in front of the forge look-alike (real git under
//! it), written against the operations of `surfaces.rs`; each asserts the refusal and that
//! `main` did not move. The honest path then merges exactly the approved head.

use crate::support::{answer, serial};
use crate::surfaces::{Call, Forge};
use crate::workflow::{Fleet, refused};
use serde_json::{Value, json};

fn call(fleet: &mut Fleet, who: &str, (tool, args): Call) -> (bool, String, Value) {
    fleet.call(who, tool, args)
}

fn main_tip(fleet: &Fleet) -> String {
    fleet.git(&["rev-parse", "main"])
}

/// The author makes `branch` (from `from`, else the default branch) and commits to it; the head.
fn branch(fleet: &mut Fleet, name: &str, from: Option<&str>) -> String {
    let forge = fleet.forge;
    answer(call(fleet, "author", forge.create_branch(name, from)));
    fleet.push_to(name, &format!("{name}\n"), "Work")
}

/// The author opens a PR from a new branch onto `base`: its number and head.
fn open(fleet: &mut Fleet, head: &str, base: &str) -> (i64, String) {
    let sha = branch(fleet, head, None);
    let forge = fleet.forge;
    let pr = forge.opened(&answer(call(fleet, "author", forge.open_pr(head, base))));
    (pr, sha)
}

/// `who` (a reviewer) approves `pr` at `head`, holding the review lease.
fn approve(fleet: &mut Fleet, who: &str, pr: i64, head: &str) {
    let (err, text, _) = fleet.claim(who, pr, head, "review");
    assert!(!err, "{text}");
    let forge = fleet.forge;
    answer_any(call(fleet, who, forge.approve(pr)));
}

/// A successful call (GitHub answers some writes with a bare sentence).
fn answer_any(call: (bool, String, Value)) -> String {
    assert!(!call.0, "the call failed: {}", call.1);
    call.1
}

/// The base the forge reports for `pr`, and its state.
fn base_and_state(fleet: &mut Fleet, pr: i64) -> (String, String) {
    let forge = fleet.forge;
    let read = answer(call(fleet, "author", forge.read_pr(pr)));
    (read["base"]["ref"].as_str().unwrap_or("").to_owned(), read["state"].as_str().unwrap_or("").to_owned())
}

/// Every attack against `forge`, then the honest path.
fn attacks_fail_and_the_honest_path_lands(forge: Forge) {
    let _serial = serial();
    let mut fleet = Fleet::start_forge(forge, "", &[], None);
    // A branch made before main moves on (for the update-from-base attack).
    branch(&mut fleet, "evil", None);

    // The honest path: an independent approval at the head, a merge lease, the merge at
    // exactly that head.
    let before = main_tip(&fleet);
    let (pr, head) = open(&mut fleet, "honest", "main");
    approve(&mut fleet, "reviewer", pr, &head);
    assert!(!fleet.claim("merger", pr, &head, "merge").0);
    answer_any(call(&mut fleet, "merger", forge.merge(json!(pr))));
    let parents = fleet.git(&["rev-list", "--parents", "-n", "1", "main"]);
    assert_eq!(parents.split(' ').collect::<Vec<_>>()[1..], [before.as_str(), head.as_str()], "{forge:?}");

    let before = main_tip(&fleet);
    let moved = |fleet: &Fleet, what: &str| assert_eq!(main_tip(fleet), before, "{forge:?}: {what} moved main");

    // A file write onto the protected branch, and a workflow file on any branch.
    refused(
        call(&mut fleet, "author", forge.write_file("main", "evil.txt", "x", "m", None)),
        "protected_branch",
        "main",
    );
    moved(&fleet, "a write onto main");
    branch(&mut fleet, "wf", None);
    refused(
        call(&mut fleet, "author", forge.push_files("wf", &["ok.txt", forge.workflow_file()])),
        "protected_branch",
        forge.workflow_file(),
    );

    // Updating a PR whose head is main from its base merges unreviewed work into main.
    let evil_pr = forge.opened(&answer(call(&mut fleet, "author", forge.open_pr("main", "evil"))));
    refused(call(&mut fleet, "author", forge.update_from_base(evil_pr)), "protected_branch", "main");
    moved(&fleet, "an update from base");

    // Merges without an independent approval at the head.
    let (unreviewed, head) = open(&mut fleet, "unreviewed", "main");
    assert!(!fleet.claim("merger", unreviewed, &head, "merge").0);
    refused(call(&mut fleet, "merger", forge.merge(json!(unreviewed))), "approval_required", "no independent approval");
    approve(&mut fleet, "reviewer2", unreviewed, &head);
    refused(call(&mut fleet, "merger", forge.merge(json!(unreviewed))), "approval_required", "session");
    moved(&fleet, "an approval by the author's own session");
    let (moving, h1) = open(&mut fleet, "moving", "main");
    approve(&mut fleet, "reviewer", moving, &h1);
    let h2 = fleet.push_to("moving", "moved\n", "After the approval");
    assert!(!fleet.claim("merger", moving, &h2, "merge").0);
    refused(call(&mut fleet, "merger", forge.merge(json!(moving))), "approval_required", "historical");
    moved(&fleet, "a head pushed after the approval");

    // Another role's job: the reviewer merges, the author closes (by update, as an issue).
    refused(call(&mut fleet, "reviewer", forge.merge(json!(moving))), "role_not_permitted", "merge");
    refused(call(&mut fleet, "author", forge.close_by_update(moving)), "invariant_violated", "closed");
    refused(call(&mut fleet, "author", forge.close_as_issue(moving)), "invariant_violated", "closed");
    if let Some(rerun) = forge.rerun() {
        refused(call(&mut fleet, "reviewer", rerun), "role_not_permitted", "actions_run_trigger");
    }
    // An approved PR moved to a base no reviewer judged it against.
    refused(call(&mut fleet, "author", forge.retarget(moving, "evil")), "invariant_violated", "retargets");
    assert_eq!(base_and_state(&mut fleet, moving), ("main".to_owned(), "open".to_owned()), "{forge:?}");

    // A PR number the server reads otherwise than the gate would.
    refused(call(&mut fleet, "merger", forge.merge(json!(moving as f64 + 0.5))), "ambiguous_arguments", "whole number");
    if forge.is_github() {
        // 2^32 + n is PR n to the server.
        let wrapped = json!((1_i64 << 32) + moving);
        refused(call(&mut fleet, "merger", forge.merge(wrapped)), "ambiguous_arguments", "wraps");
        // The review tool decodes loosely: the Go field name `Event` would win over `event`.
        assert!(!fleet.claim("reviewer", moving, &h2, "review").0);
        let loose = json!({ "method": "create", "pullNumber": moving, "event": "COMMENT", "Event": "APPROVE" });
        refused(fleet.call("reviewer", "pull_request_review_write", loose), "ambiguous_arguments", "Event");
    }
    moved(&fleet, "the attacks");
    fleet.stop();
}

#[test]
fn every_attack_fails_against_gitea_mcp() {
    attacks_fail_and_the_honest_path_lands(Forge::Gitea);
}

#[test]
fn every_attack_fails_against_gitea_mcp_s_v1_release_line() {
    attacks_fail_and_the_honest_path_lands(Forge::GiteaV1);
}

/// GitHub's server as released (its merge declares no head pin): the gateway makes the
/// approved merge itself through GitHub's REST merge, pinned with `sha`.
#[test]
fn every_attack_fails_against_github_mcp_server() {
    attacks_fail_and_the_honest_path_lands(Forge::Github);
}

/// A release whose merge declares `expectedHeadSha`: the server's own merge, pinned.
#[test]
fn every_attack_fails_against_a_github_mcp_server_whose_merge_pins_the_head() {
    attacks_fail_and_the_honest_path_lands(Forge::GithubPinned);
}

/// The released server's merge declares no pin: the gateway's merge goes through GitHub's REST
/// API with the judged head as `sha`, and a push landing between the judgement and the merge
/// is refused by the forge (409), not by the gate, which saw the approved head.
#[test]
fn a_push_racing_the_gateway_s_merge_is_refused_by_github() {
    let _serial = serial();
    let forge = Forge::Github;
    let mut fleet = Fleet::start_forge(forge, "", &[("rest", &["--variant", "race-merge"])], None);
    let before = main_tip(&fleet);
    let (pr, head) = open(&mut fleet, "feature", "main");
    approve(&mut fleet, "reviewer", pr, &head);
    assert!(!fleet.claim("merger", pr, &head, "merge").0);
    let (err, text, _) = call(&mut fleet, "merger", forge.merge(json!(pr)));
    assert!(err && text.contains("409") && text.contains("Head branch was modified"), "{text}");
    assert_eq!(main_tip(&fleet), before, "the raced head did not land");
    let raced = fleet.git(&["rev-parse", "feature"]);
    assert_ne!(raced, head, "the race pushed a new head");
    // The merge was judged at the approved head, made through the forge's API, and its
    // refusal audited beside it.
    let audit = fleet.f.audit_until(|e| e.iter().any(|x| x.to_string().contains("answered 409")));
    let text = audit.to_string();
    assert!(text.contains("answered 409") && text.contains(&format!("pinned at head {}", &head[..12])), "{audit}");
    assert!(!text.contains("tok-merger"), "the member's token is never audited: {audit}");
    fleet.stop();
}

/// The released server's own merge is never forwarded, so the argument it does not declare
/// (`expectedHeadSha`) is never added; the merge the gateway makes lands the approved head.
#[test]
fn the_released_github_server_is_never_sent_a_pin_it_does_not_declare() {
    let _serial = serial();
    let forge = Forge::Github;
    let mut fleet = Fleet::start_forge(forge, "", &[], None);
    let (pr, head) = open(&mut fleet, "feature", "main");
    approve(&mut fleet, "reviewer", pr, &head);
    assert!(!fleet.claim("merger", pr, &head, "merge").0);
    let merged = answer(call(&mut fleet, "merger", forge.merge(json!(pr))));
    assert_eq!(merged["merged"], true, "{merged}");
    // What the forge recorded: merged by the merger's own account (its token's login).
    let read = answer(call(&mut fleet, "author", forge.read_pr(pr)));
    assert_eq!(read["merged_by"]["login"], "merger", "{read}");
    // Every judged call's arguments are audited as forwarded: none carries the pin.
    let audit = fleet.f.audit_until(|e| e.iter().any(|x| x.to_string().contains("answered 200")));
    assert!(audit.to_string().contains("answered 200"), "{audit}");
    assert!(!audit.to_string().contains("expectedHeadSha"), "{audit}");
    assert!(!audit.to_string().contains("tok-merger"), "the member's token is never audited: {audit}");
    fleet.stop();
}

/// The reviewer makes a pending review at X (no verdict), the author pushes Y, the reviewer
/// claims a lease at Y and submits the pending review as an approval. GitHub keeps the
/// pending review's commit: the approval would count at X while the gate judged Y. Refused
/// (`stale_head`, both heads named); the merge of Y is refused; the pending review deleted,
/// a review at Y lands the merge.
fn a_pending_review_counts_where_github_records_it(forge: Forge) {
    let _serial = serial();
    let mut fleet = Fleet::start_forge(forge, "", &[], None);
    let before = main_tip(&fleet);
    let (pr, x) = open(&mut fleet, "feature", "main");
    assert!(!fleet.claim("reviewer", pr, &x, "review").0);
    answer_any(call(&mut fleet, "reviewer", forge.pending_review(pr)));
    let y = fleet.push_to("feature", "moved\n", "After the pending review");
    assert!(!fleet.claim("reviewer", pr, &y, "review").0);
    let text = refused(call(&mut fleet, "reviewer", forge.submit_pending(pr, 0)), "stale_head", &x[..12]);
    assert!(text.contains(&y[..12]), "both heads are named: {text}");
    assert!(!fleet.claim("merger", pr, &y, "merge").0);
    refused(call(&mut fleet, "merger", forge.merge(json!(pr))), "approval_required", "no independent approval");
    assert_eq!(main_tip(&fleet), before);
    // The forge holds no approval at all: the pending review stays pending.
    let reviews =
        answer(fleet.call("author", "pull_request_read", json!({ "method": "get_reviews", "pullNumber": pr })));
    assert!(reviews.as_array().unwrap().iter().all(|r| r["state"] == "PENDING"), "{reviews}");
    // Deleted, and a review at Y: the merge lands Y.
    let delete = if forge == Forge::GithubGranular {
        ("delete_pending_pull_request_review", json!({ "pullNumber": pr }))
    } else {
        ("pull_request_review_write", json!({ "method": "delete_pending", "pullNumber": pr }))
    };
    answer_any(call(&mut fleet, "reviewer", delete));
    answer_any(call(&mut fleet, "reviewer", forge.approve(pr)));
    answer(call(&mut fleet, "merger", forge.merge(json!(pr))));
    let parents = fleet.git(&["rev-list", "--parents", "-n", "1", "main"]);
    assert_eq!(parents.split(' ').collect::<Vec<_>>()[1..], [before.as_str(), y.as_str()], "{forge:?}");
    fleet.stop();
}

#[test]
fn a_pending_review_made_at_another_head_is_refused_on_github() {
    a_pending_review_counts_where_github_records_it(Forge::Github);
}

#[test]
fn a_pending_review_made_at_another_head_is_refused_through_the_granular_tools() {
    a_pending_review_counts_where_github_records_it(Forge::GithubGranular);
}

/// On Gitea the same sequence counts at Y: Gitea re-stamps a submitted pending review with
/// the head at submission, so the gate's record (Y) and the forge's agree, and Y merges.
#[test]
fn a_pending_review_submitted_on_gitea_counts_at_the_head_of_its_submission() {
    let _serial = serial();
    let forge = Forge::Gitea;
    let mut fleet = Fleet::start_forge(forge, "", &[], None);
    let before = main_tip(&fleet);
    let (pr, x) = open(&mut fleet, "feature", "main");
    assert!(!fleet.claim("reviewer", pr, &x, "review").0);
    let pending = answer(call(&mut fleet, "reviewer", forge.pending_review(pr)));
    let id = pending["id"].as_i64().unwrap_or_else(|| panic!("a review id: {pending}"));
    let y = fleet.push_to("feature", "moved\n", "After the pending review");
    assert!(!fleet.claim("reviewer", pr, &y, "review").0);
    answer(call(&mut fleet, "reviewer", forge.submit_pending(pr, id)));
    let reviews =
        answer(fleet.call("author", "pull_request_read", json!({ "method": "get_reviews", "pull_number": pr })));
    let approved: Vec<&Value> = reviews.as_array().unwrap().iter().filter(|r| r["state"] == "APPROVED").collect();
    assert_eq!(approved.len(), 1, "{reviews}");
    assert_eq!(approved[0]["stale"], false, "the forge records it at Y, the head: {reviews}");
    assert!(!fleet.claim("merger", pr, &y, "merge").0);
    answer(call(&mut fleet, "merger", forge.merge(json!(pr))));
    let parents = fleet.git(&["rev-list", "--parents", "-n", "1", "main"]);
    assert_eq!(parents.split(' ').collect::<Vec<_>>()[1..], [before.as_str(), y.as_str()]);
    fleet.stop();
}

#[test]
fn a_gitea_release_whose_read_key_no_dialect_knows_is_refused_by_name() {
    let _serial = serial();
    let mut fleet = Fleet::start_forge(Forge::Gitea, "", &[("author", &["--variant", "renamed-query"])], None);
    // Creating a branch reads the repository's default branch, as a file write does: neither
    // guesses which key the server reads.
    let before = fleet.git(&["branch", "--list"]);
    let create = Forge::Gitea.create_branch("feature", None);
    let text = refused(call(&mut fleet, "author", create), "forge_unavailable", "`search_repos` declares none of");
    assert!(text.contains("`query`") && text.contains("`keyword`"), "{text}");
    let write = Forge::Gitea.write_file("main", "a.txt", "x", "m", None);
    refused(call(&mut fleet, "author", write), "forge_unavailable", "`search_repos` declares none of");
    assert_eq!(fleet.git(&["branch", "--list"]), before, "no branch was made");
    fleet.stop();
}

#[test]
fn a_toolset_turned_on_at_run_time_is_judged_and_pinned_like_any_other() {
    let _serial = serial();
    let forge = Forge::GithubDynamic;
    let mut fleet = Fleet::start_forge(forge, "", &[], None);
    let rerun = forge.rerun().unwrap();
    // Not listed yet: the server has no such tool.
    let (client, _) = fleet.client_and_dir("reviewer");
    let mut args = rerun.1.clone();
    args["owner"] = json!("fleet");
    args["repo"] = json!("forge");
    let r = client.step(json!({ "op": "call_tool", "name": rerun.0, "arguments": args }));
    assert!(r["ok"] == false && r.to_string().contains("unknown tool"), "{r}");
    let (client, _) = fleet.client_and_dir("reviewer");
    answer_any(client.call("enable_toolset", json!({ "toolset": "actions" })));
    refused(call(&mut fleet, "reviewer", rerun), "role_not_permitted", "actions_run_trigger");
    let pinned = fleet.f.cli(&["tools", "list", "--profile", "prgs-reviewer", "--json"]);
    assert!(pinned.to_string().contains("actions_run_trigger"), "the new tool is pinned: {pinned}");
    fleet.stop();
}

/// Documented uses of GitHub's server that the gate once refused: `issue_write`'s `type: null`
/// (the schema's "pass null to remove the current type"), and a branch the server makes
/// literally named `refs/heads/x` — judged by that name, while one that reads like a protected
/// branch is still refused.
#[test]
fn documented_uses_of_github_s_server_are_not_refused() {
    let _serial = serial();
    let forge = Forge::Github;
    let mut fleet = Fleet::start_forge(forge, "", &[], None);
    let created = answer(fleet.call("author", "issue_write", json!({ "method": "create", "title": "t", "body": "b" })));
    let number = created["number"].as_i64().or_else(|| created["id"].as_str()?.parse().ok());
    let number = number.unwrap_or_else(|| panic!("an issue number: {created}"));
    let untype = json!({ "method": "update", "issue_number": number, "type": null });
    answer_any(fleet.call("author", "issue_write", untype));
    let before = main_tip(&fleet);
    answer_any(call(&mut fleet, "author", forge.create_branch("refs/heads/feature", None)));
    assert!(fleet.git(&["branch", "--list"]).contains("refs/heads/feature"), "a branch literally so named");
    let push = (
        "push_files",
        json!({ "branch": "refs/heads/feature", "message": "m",
                                        "files": [{ "path": "a.txt", "content": "x" }] }),
    );
    answer_any(call(&mut fleet, "author", push));
    refused(call(&mut fleet, "author", forge.create_branch("refs/heads/main", None)), "protected_branch", "main");
    let onto_main = (
        "push_files",
        json!({ "branch": "refs/heads/main", "message": "m",
                                             "files": [{ "path": "a.txt", "content": "x" }] }),
    );
    refused(call(&mut fleet, "author", onto_main), "protected_branch", "main");
    assert_eq!(main_tip(&fleet), before);
    fleet.stop();
}
