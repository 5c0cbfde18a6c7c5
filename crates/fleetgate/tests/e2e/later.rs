//! What the forge does later and elsewhere (issue "text the forge acts on, and branches in
//! other repositories"), as named hostile tests through real gateways in front of the
//! look-alikes, which act on text and forks as Gitea and GitHub do
//! (`crates/testkit/src/forge/automation.rs`), under the default roster on both dialects:
//!
//! * a closing keyword — in a commit message, a comment, a review, a merge's message; with
//!   `!`, in another repository's form, as a URL, in any case — never closes an issue its role
//!   may not close, nor one another author holds; nor does an issue's `ref`; nor does Gitea's
//!   reopening keyword reopen an issue closed by right;
//! * a merge's deletion of a head in a fork never strands the fork's PR based on it.
//!
//! Each asserts the refusal's blocker and that the forge's record did not change: the issues
//! stay open, `main` does not move, the fork's branch and PR stay.

use crate::support::{answer, git, serial};
use crate::surfaces::{Call, Forge};
use crate::workflow::{Fleet, refused};
use serde_json::{Value, json};

fn call(fleet: &mut Fleet, who: &str, (tool, args): Call) -> (bool, String, Value) {
    fleet.call(who, tool, args)
}

/// A successful call (GitHub answers some writes with a bare sentence).
fn ok(call: (bool, String, Value)) -> String {
    assert!(!call.0, "the call failed: {}", call.1);
    call.1
}

fn issue(fleet: &mut Fleet, title: &str) -> i64 {
    let forge = fleet.forge;
    let made = answer(call(fleet, "author", forge.create_issue(title)));
    made["number"].as_i64().unwrap_or_else(|| forge.created_issue(&made))
}

fn issue_state(fleet: &mut Fleet, n: i64) -> String {
    let forge = fleet.forge;
    answer(call(fleet, "author", forge.read_issue(n)))["state"].as_str().unwrap_or_default().to_owned()
}

/// The author makes `name` from the default branch and commits to it; the head.
fn branch(fleet: &mut Fleet, name: &str) -> String {
    let forge = fleet.forge;
    answer(call(fleet, "author", forge.create_branch(name, None)));
    fleet.push_to(name, &format!("{name}\n"), "Work")
}

/// The reviewer approves `pr` at `head` and the merger claims its merge lease.
fn approve(fleet: &mut Fleet, pr: i64, head: &str) {
    let forge = fleet.forge;
    assert!(!fleet.claim("reviewer", pr, head, "review").0);
    ok(call(fleet, "reviewer", forge.approve(pr)));
    assert!(!fleet.claim("merger", pr, head, "merge").0);
}

fn closing_keywords_close_nothing_their_role_may_not(forge: Forge) {
    let _serial = serial();
    let mut fleet = Fleet::start_forge(forge, "", &[], None);
    let (a, b) = (issue(&mut fleet, "Bug A"), issue(&mut fleet, "Bug B"));
    let head = branch(&mut fleet, "feature");
    let main = fleet.git(&["rev-parse", "main"]);
    // A commit message closes the issue when the commit reaches the default branch: the
    // author may not write one, in any of the forge's forms.
    for message in forge.closing_forms(a) {
        let text = refused(
            call(&mut fleet, "author", forge.write_file("feature", "evil.txt", "x", &message, None)),
            "invariant_violated",
            "issue-state",
        );
        assert!(text.contains(&format!("#{a}")), "{text}");
    }
    assert_eq!(fleet.git(&["rev-parse", "feature"]), head, "{forge:?}: nothing was committed");
    // A PR whose body names nothing; a comment and a merge message that would close an issue.
    let pr = forge.opened(&answer(call(&mut fleet, "author", forge.open_pr_saying("feature", "main", "Work"))));
    if !forge.is_github() {
        // Gitea records a PR comment's keywords and acts on them when the PR merges.
        let comment = forge.comment(pr, &format!("fixes: !{a}"));
        refused(call(&mut fleet, "reviewer", comment), "invariant_violated", "issue-state");
        let review =
            json!({ "method": "create", "pull_number": pr, "state": "COMMENT", "body": format!("Resolves #{b}") });
        refused(fleet.call("reviewer", "pull_request_review_write", review), "invariant_violated", "issue-state");
        // An issue's `ref` names the branch whose commits close it: not the author's to set.
        let reference = json!({ "method": "update", "issue_number": a, "ref": "feature" });
        refused(fleet.call("author", "issue_write", reference), "invariant_violated", "issue-state");
    }
    approve(&mut fleet, pr, &head);
    for message in forge.closing_forms(b) {
        refused(call(&mut fleet, "merger", forge.merge_saying(pr, &message)), "invariant_violated", "issue-state");
    }
    assert_eq!(fleet.git(&["rev-parse", "main"]), main, "{forge:?}: main did not move");
    assert_eq!((issue_state(&mut fleet, a), issue_state(&mut fleet, b)), ("open".into(), "open".into()), "{forge:?}");
    // The honest merge lands, and closes nothing.
    ok(call(&mut fleet, "merger", forge.merge_saying(pr, "Refs the work")));
    assert_ne!(fleet.git(&["rev-parse", "main"]), main);
    assert_eq!((issue_state(&mut fleet, a), issue_state(&mut fleet, b)), ("open".into(), "open".into()), "{forge:?}");
    fleet.stop();
}

#[test]
fn a_closing_keyword_closes_no_issue_its_role_may_not_on_gitea() {
    closing_keywords_close_nothing_their_role_may_not(Forge::Gitea);
}

#[test]
fn a_closing_keyword_closes_no_issue_its_role_may_not_on_github() {
    closing_keywords_close_nothing_their_role_may_not(Forge::Github);
}

fn no_text_closes_an_issue_another_author_holds(forge: Forge) {
    let _serial = serial();
    let mut fleet = Fleet::start_forge(forge, "", &[], None);
    let (held, later) = (issue(&mut fleet, "Held"), issue(&mut fleet, "Later"));
    let prefix = forge.prefix();
    assert!(!fleet.call("author", &format!("{prefix}claim_issue_lease"), json!({ "issue": held })).0);
    // Another author (a new worker of the author member).
    fleet.restart("author");
    let head = branch(&mut fleet, "other");
    let forms = forge.closing_forms(held);
    let text = refused(
        call(&mut fleet, "author", forge.open_pr_saying("other", "main", &forms[forms.len() - 1])),
        "issue_lock_held",
        &format!("#{held}"),
    );
    assert!(text.contains("held by worker"), "{text}");
    // Its PR naming an issue nobody holds yet, whose lock a third author takes after.
    let pr = forge.opened(&answer(call(
        &mut fleet,
        "author",
        forge.open_pr_saying("other", "main", &format!("Fixes #{later}")),
    )));
    if !forge.is_github() {
        // A comment on its own PR closing the held issue.
        refused(
            call(&mut fleet, "author", forge.comment(pr, &format!("closes !{held}"))),
            "issue_lock_held",
            "held by",
        );
    }
    fleet.restart("author");
    assert!(!fleet.call("author", &format!("{prefix}claim_issue_lease"), json!({ "issue": later })).0);
    approve(&mut fleet, pr, &head);
    let main = fleet.git(&["rev-parse", "main"]);
    let (tool, args) = forge.merge(json!(pr));
    refused(fleet.call("merger", tool, args), "issue_lock_held", &format!("#{later}"));
    assert_eq!(fleet.git(&["rev-parse", "main"]), main, "{forge:?}: main did not move");
    assert_eq!(
        (issue_state(&mut fleet, held), issue_state(&mut fleet, later)),
        ("open".into(), "open".into()),
        "{forge:?}"
    );
    fleet.stop();
}

#[test]
fn no_text_closes_an_issue_another_author_holds_on_gitea() {
    no_text_closes_an_issue_another_author_holds(Forge::Gitea);
}

#[test]
fn no_text_closes_an_issue_another_author_holds_on_github() {
    no_text_closes_an_issue_another_author_holds(Forge::Github);
}

/// A fork's `release/2` (made by its owner, outside the fleet) with a PR of the fork based on
/// it, and the served repository's PR from it: the merge's `delete_branch` would delete it in
/// the fork and move the fork's PR.
#[test]
fn a_fork_head_s_deletion_strands_no_fork_pr() {
    let _serial = serial();
    let members = [("author", "author"), ("reviewer", "reviewer"), ("reviewer2", "reviewer"), ("merger", "merger")];
    let mut fleet = Fleet::start_with_members(Forge::Gitea, &members, "", &["alice/forge"]);
    let dir = fleet.dir.path().to_owned();
    let fork = dir.join("alice-forge.git");
    let work = dir.join("fork-work");
    git(&dir, &["clone", "-q", &fork.display().to_string(), &work.display().to_string()]);
    for (name, file) in [("release/2", "r.txt"), ("child", "c.txt")] {
        git(&work, &["checkout", "-q", "-b", name]);
        std::fs::write(work.join(file), format!("{name}\n")).unwrap();
        git(&work, &["add", file]);
        git(&work, &["commit", "-q", "-m", name]);
        git(&work, &["push", "-q", "origin", &format!("HEAD:refs/heads/{name}")]);
    }
    let at_fork = json!({ "owner": "alice", "repo": "forge", "method": "create", "title": "child", "body": "b",
                          "head": "child", "base": "release/2" });
    let child = answer(fleet.call_as_is("author", "pull_request_write", at_fork))["number"].as_i64().unwrap();
    let create = json!({ "method": "create", "title": "t", "body": "b", "head": "alice:release/2", "base": "main" });
    let pr = answer(fleet.call("author", "pull_request_write", create))["number"].as_i64().unwrap();
    let head = git(&fork, &["rev-parse", "release/2"]).trim().to_owned();
    approve(&mut fleet, pr, &head);
    let main = fleet.git(&["rev-parse", "main"]);
    let merge = json!({ "method": "merge", "pull_number": pr, "delete_branch": true });
    let text = refused(fleet.call("merger", "pull_request_write", merge), "invariant_violated", "retarget");
    assert!(text.contains("alice/forge") && text.contains(&format!("#{child}")), "{text}");
    assert_eq!(fleet.git(&["rev-parse", "main"]), main, "nothing merged");
    assert_eq!(git(&fork, &["rev-parse", "release/2"]).trim(), head, "the fork's branch stays");
    let read = json!({ "owner": "alice", "repo": "forge", "method": "get", "pull_number": child });
    let read = answer(fleet.call_as_is("author", "pull_request_read", read));
    assert_eq!((read["state"].as_str(), read["base"]["ref"].as_str()), (Some("open"), Some("release/2")), "{read}");
    // The merge that leaves the fork's branch lands the approved head.
    let merge = json!({ "method": "merge", "pull_number": pr });
    assert_eq!(answer(fleet.call("merger", "pull_request_write", merge))["merged"], true);
    assert_eq!(git(&fork, &["rev-parse", "release/2"]).trim(), head);
    fleet.stop();
}

/// A Gitea instance whose `app.ini` has a closing keyword of its own (the stand-in given the
/// same list, which replaces Gitea's defaults as the setting does), copied into the roster's
/// `[forge] close_keywords`: a text with it is judged like `fixes` — refused for a role that
/// may not close the issue and for an issue another author holds — and the legitimate one,
/// an author's PR naming its own issue, merges and closes it.
#[test]
fn the_instance_s_own_closing_keyword_is_judged_on_gitea() {
    let _serial = serial();
    let words: &[&str] = &["--close-keyword", "schließt", "--close-keyword", "fixes"];
    let flags = [("author", words), ("reviewer", words), ("reviewer2", words), ("merger", words)];
    let extra = "\n[forge]\nclose_keywords = [\"schließt\"]\n";
    let mut fleet = Fleet::start_forge(Forge::Gitea, extra, &flags, None);
    let forge = fleet.forge;
    let (mine, held) = (issue(&mut fleet, "Mine"), issue(&mut fleet, "Held"));
    assert!(!fleet.call("author", "gitea_claim_issue_lease", json!({ "issue": held })).0);
    let head = branch(&mut fleet, "feature");
    let message = format!("SCHLIESST #{mine}");
    let text = refused(
        call(&mut fleet, "author", forge.write_file("feature", "evil.txt", "x", &message, None)),
        "invariant_violated",
        "issue-state",
    );
    assert!(text.contains(&format!("#{mine}")), "{text}");
    assert_eq!(fleet.git(&["rev-parse", "feature"]), head, "nothing was committed");
    // Its PR naming its own issue with the instance's word is the author's to open (the
    // stand-in records the reference as closing: the gateway's restart below drops the flags).
    let pr = forge.opened(&answer(call(
        &mut fleet,
        "author",
        forge.open_pr_saying("feature", "main", &format!("schließt #{mine}")),
    )));
    // Another author may not close the held issue with it, in a comment on its own PR (a
    // mere mention there would be no one's business).
    fleet.restart("author");
    branch(&mut fleet, "other");
    let theirs = forge.opened(&answer(call(&mut fleet, "author", forge.open_pr_saying("other", "main", "Other work"))));
    let text = refused(
        call(&mut fleet, "author", forge.comment(theirs, &format!("Schließt !{held}"))),
        "issue_lock_held",
        &format!("#{held}"),
    );
    assert!(text.contains("Schließt !"), "the refusal quotes the words: {text}");
    approve(&mut fleet, pr, &head);
    // The merge closes what its PR names, by right.
    let (tool, args) = forge.merge(json!(pr));
    assert!(!fleet.call("merger", tool, args).0);
    assert_eq!(
        (issue_state(&mut fleet, mine), issue_state(&mut fleet, held)),
        ("closed".into(), "open".into()),
        "the stand-in reads the instance's word; the held issue stays open"
    );
    fleet.stop();
}

/// Gitea also reopens: a reopening keyword (`reopens #N`) in text that reaches the default
/// branch reopens the closed issue it names. An issue closed by right (its author's PR named
/// it and merged) is not reopened by the author's commit message, by a comment on the next
/// PR (Gitea records its keywords and acts on them at the merge), nor by the merger's merge
/// message; the honest merge after them lands and leaves it closed.
#[test]
fn a_reopening_keyword_reopens_no_issue_its_role_may_not_on_gitea() {
    let _serial = serial();
    let forge = Forge::Gitea;
    let mut fleet = Fleet::start_forge(forge, "", &[], None);
    let done = issue(&mut fleet, "Done");
    let head = branch(&mut fleet, "fix");
    let pr = forge.opened(&answer(call(
        &mut fleet,
        "author",
        forge.open_pr_saying("fix", "main", &format!("Fixes #{done}")),
    )));
    approve(&mut fleet, pr, &head);
    ok(call(&mut fleet, "merger", forge.merge(json!(pr))));
    assert_eq!(issue_state(&mut fleet, done), "closed", "the stand-in closes what the merged PR names");

    let head = branch(&mut fleet, "again");
    for message in [format!("Reopens #{done}"), format!("reopened: !{done}"), format!("REOPEN FLEET/Forge#{done}")] {
        let text = refused(
            call(&mut fleet, "author", forge.write_file("again", "evil.txt", "x", &message, None)),
            "invariant_violated",
            "issue-state",
        );
        assert!(text.contains(&format!("#{done}")), "{text}");
    }
    assert_eq!(fleet.git(&["rev-parse", "again"]), head, "nothing was committed");
    let next = forge.opened(&answer(call(&mut fleet, "author", forge.open_pr_saying("again", "main", "More work"))));
    refused(
        call(&mut fleet, "reviewer", forge.comment(next, &format!("reopens #{done}"))),
        "invariant_violated",
        "issue-state",
    );
    approve(&mut fleet, next, &head);
    let main = fleet.git(&["rev-parse", "main"]);
    refused(
        call(&mut fleet, "merger", forge.merge_saying(next, &format!("Reopens #{done}"))),
        "invariant_violated",
        "issue-state",
    );
    assert_eq!(fleet.git(&["rev-parse", "main"]), main, "main did not move");
    assert_eq!(issue_state(&mut fleet, done), "closed");
    ok(call(&mut fleet, "merger", forge.merge_saying(next, "More work")));
    assert_ne!(fleet.git(&["rev-parse", "main"]), main);
    assert_eq!(issue_state(&mut fleet, done), "closed", "nothing reopened it");
    fleet.stop();
}
