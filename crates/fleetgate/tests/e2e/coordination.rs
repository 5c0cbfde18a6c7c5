//! The seed's coordination, enforced (issue 28), end to end through real gateways over the
//! forge fixture: review-decision locks (the #976 story: request changes at head 1, the
//! author pushes head 2, the same reviewer approves at head 2 as a correction, the merge
//! releases the lock `moot`; a locked session refused on another PR; an operator's release
//! refused while the forge says the PR is open; two reviewer sessions locked to their own
//! PRs without interfering), author issue locks, and each PR's canonical state computed.

use crate::support::{Client, answer, at, forge_fixture};
use crate::workflow::{Fleet, approve, refused};
use serde_json::{Value, json};

fn open_pr(fleet: &mut Fleet, branch: &str, body: &str) -> (i64, String) {
    answer(fleet.call("author", "create_branch", json!({ "branch": branch })));
    let head = fleet.push_to(branch, &format!("{branch}\n"), "Work");
    let create = json!({ "method": "create", "title": branch, "body": body, "head": branch, "base": "main" });
    let pr = answer(fleet.call("author", "pull_request_write", create))["number"].as_i64().unwrap();
    (pr, head)
}

fn request_changes(pr: i64) -> Value {
    json!({ "method": "create", "pull_number": pr, "state": "REQUEST_CHANGES", "body": "not yet" })
}

fn assessed(fleet: &mut Fleet, who: &str, pr: i64) -> Value {
    fleet.call(who, "gitea_assess_pr", json!({ "pr": pr })).2
}

fn live_locks(fleet: &Fleet) -> Vec<Value> {
    fleet.f.cli(&["pr", "locks", "--json"])["locks"].as_array().cloned().unwrap_or_default()
}

#[test]
fn a_reviewer_session_holds_one_open_decision_until_its_pr_is_moot() {
    let _serial = crate::support::serial();
    story(Fleet::start("independent_review = \"off\"\n"));
}

/// The same story on a PostgreSQL store (`scripts/with-postgres`'s server).
#[test]
fn review_decision_locks_hold_on_postgres_too() {
    let _serial = crate::support::serial();
    let Some(db) = fleetgate_testkit::pg::PgDatabase::fresh("fg_locks") else { return };
    story(Fleet::start_on("independent_review = \"off\"\n", &[], Some(db.url.clone())));
}

fn story(mut fleet: Fleet) {
    let (a, h1) = open_pr(&mut fleet, "feature", "b");
    let (b, hb) = open_pr(&mut fleet, "other", "b");
    let state = assessed(&mut fleet, "reviewer", a);
    assert_eq!((state["state"].as_str(), state["who_is_next"].as_str()), (Some("ready_for_review"), Some("reviewer")));

    // Request changes on A at head 1: the session's lock names A.
    assert!(!fleet.claim("reviewer", a, &h1, "review").0);
    answer(fleet.call("reviewer", "pull_request_review_write", request_changes(a)));
    let locks = live_locks(&fleet);
    assert_eq!(locks.len(), 1, "{locks:?}");
    assert_eq!((locks[0]["pr"].as_i64(), locks[0]["verdict"].as_str()), (Some(a), Some("request_changes")));
    let state = assessed(&mut fleet, "author", a);
    assert_eq!((state["state"].as_str(), state["who_is_next"].as_str()), (Some("changes_requested"), Some("author")));
    assert_eq!(state["head_sha"], h1.as_str());

    // The locked session decides nothing on B, and nothing again on A at the same head.
    assert!(!fleet.claim("reviewer", b, &hb, "review").0, "a claim is not a decision");
    let text = refused(fleet.call("reviewer", "pull_request_review_write", approve(b)), "review_decision_locked", "#");
    assert!(text.contains(&format!("forge/fleet/forge#{a}")) && text.contains("merged or closed"), "{text}");
    refused(fleet.call("reviewer", "pull_request_review_write", approve(a)), "review_decision_locked", "has not moved");

    // Another reviewer session locks on its own PR without interfering.
    let id = fleet.f.cli(&["pr", "list", "--json"])["leases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["pr"] == b && l["purpose"] == "review")
        .unwrap()["lease_id"]
        .as_str()
        .unwrap()
        .to_owned();
    fleet.f.cli(&["pr", "release", &id, "--json"]);
    assert!(!fleet.claim("reviewer2", b, &hb, "review").0);
    answer(fleet.call("reviewer2", "pull_request_review_write", approve(b)));
    assert_eq!(live_locks(&fleet).len(), 2, "two sessions, two locks");

    // The operator may not release A's lock while the forge says A is open.
    let lock_a = live_locks(&fleet).into_iter().find(|l| l["pr"] == a).unwrap()["lock_id"].as_str().unwrap().to_owned();
    let kept = fleet.f.cli(&["pr", "release-lock", &lock_a, "--json"]);
    assert_eq!(kept["released"], false, "{kept}");
    assert!(kept["why"].as_str().unwrap().contains("is open"), "{kept}");

    // The author pushes head 2; the same reviewer approves A at it: a correction.
    let h2 = fleet.push_to("feature", "fixed\n", "Address the review");
    assert!(!fleet.claim("reviewer", a, &h2, "review").0);
    answer(fleet.call("reviewer", "pull_request_review_write", approve(a)));
    let locks = live_locks(&fleet);
    let lock = locks.iter().find(|l| l["pr"] == a).unwrap();
    assert_eq!((lock["lock_id"].as_str(), lock["head"].as_str()), (Some(lock_a.as_str()), Some(h2.as_str())));
    assert_eq!((lock["verdict"].as_str(), lock["decisions"].as_i64()), (Some("approve"), Some(2)));

    // The merge at head 2 releases the lock as moot; the session may decide on B now.
    assert!(!fleet.claim("merger", a, &h2, "merge").0);
    let state = assessed(&mut fleet, "merger", a);
    assert_eq!((state["state"].as_str(), state["merge_ready"].as_bool()), (Some("ready_to_merge"), Some(true)));
    assert_eq!(
        answer(fleet.call("merger", "pull_request_write", json!({ "method": "merge", "pull_number": a })))["merged"],
        true
    );
    let all = fleet.f.cli(&["pr", "locks", "--all", "--json"])["locks"].as_array().cloned().unwrap();
    let released = all.iter().find(|l| l["lock_id"] == lock_a.as_str()).unwrap();
    assert_eq!((released["phase"].as_str(), released["released_reason"].as_str()), (Some("released"), Some("moot")));
    let shown = fleet.f.cli(&["pr", "show", &a.to_string(), "--owner", "fleet", "--repo", "forge", "--json"]);
    assert_eq!((shown["state"].as_str(), shown["who_is_next"].as_str()), (Some("merged"), Some("none")), "{shown}");
    let audit = fleet.f.audit_until(|e| e.iter().any(|x| x.to_string().contains("released: moot")));
    let audit = audit.to_string();
    for event in ["taken by session", "corrected by session", "released: moot"] {
        assert!(audit.contains(event), "{event} audited: {audit}");
    }

    // B is closed outside the fleet: the operator's release of reviewer2's lock goes through.
    let lock_b = live_locks(&fleet).into_iter().find(|l| l["pr"] == b).unwrap()["lock_id"].as_str().unwrap().to_owned();
    let bare = fleet.dir.path().join("forge.git").display().to_string();
    let mut argv = forge_fixture();
    argv.extend(["--repo".to_owned(), bare]);
    let mut direct = Client::start(&argv);
    answer(direct.call("pull_request_write", at(json!({ "method": "close", "pull_number": b }))));
    direct.close();
    let done = fleet.f.cli(&["pr", "release-lock", &lock_b, "--reason", "closed by hand", "--json"]);
    assert_eq!(done["released"], true, "{done}");
    assert!(live_locks(&fleet).is_empty());
    fleet.stop();
}

#[test]
fn an_issue_another_author_holds_is_not_worked_twice() {
    let _serial = crate::support::serial();
    let mut fleet = Fleet::start("");
    let issue = answer(fleet.call("author", "issue_write", json!({ "method": "create", "title": "Bug", "body": "b" })));
    let issue = issue["number"].as_i64().unwrap();
    let (err, text, claimed) = fleet.call("author", "gitea_claim_issue_lease", json!({ "issue": issue }));
    assert!(!err, "{text}");
    assert_eq!(claimed["lease"]["purpose"], "author");
    refused(
        fleet.call("reviewer", "gitea_claim_issue_lease", json!({ "issue": issue })),
        "role_not_permitted",
        "issue lock",
    );
    // The holder's own PR referencing the issue is fine, and records it.
    let (mine, _) = open_pr(&mut fleet, "fix", &format!("Closes #{issue}"));
    let shown = fleet.f.cli(&["pr", "show", &mine.to_string(), "--owner", "fleet", "--repo", "forge", "--json"]);
    assert_eq!(shown["origin"]["issues"], json!([issue]), "{shown}");
    // Another author (a new worker of the author member) may not open a PR on that issue.
    fleet.restart("author");
    answer(fleet.call("author", "create_branch", json!({ "branch": "dup" })));
    fleet.push_to("dup", "dup\n", "Same issue");
    let create =
        json!({ "method": "create", "title": format!("Fix #{issue}"), "body": "b", "head": "dup", "base": "main" });
    let text = refused(fleet.call("author", "pull_request_write", create), "issue_lock_held", &format!("#{issue}"));
    assert!(text.contains("held by worker"), "{text}");
    fleet.stop();
}
