use super::*;
use crate::rules::RuleSet;
use serde_json::json;

const ROLES: [&str; 5] = ["author", "reviewer", "merger", "controller", "reconciler"];

fn call(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

fn who(tool: &str, args: Value) -> Vec<&'static str> {
    let rules = RuleSet::new(rules());
    ROLES
        .into_iter()
        .filter(|r| rules.decide(r, tool, Some(&call(args.clone()))).is_some_and(|d| d.permitted))
        .collect()
}

#[test]
fn the_role_matrix_is_the_fleet_s() {
    assert_eq!(who("create_pull_request", json!({})), ["author"]);
    assert_eq!(who("merge_pull_request", json!({})), ["merger"]);
    assert_eq!(who("pull_request_review_write", json!({ "method": "create" })), ["reviewer"]);
    assert_eq!(who("pull_request_review_write", json!({ "method": "dismiss" })), Vec::<&str>::new());
    assert_eq!(who("update_pull_request", json!({ "title": "t" })), ["author"]);
    assert_eq!(who("update_pull_request", json!({ "state": "closed" })), ["controller", "reconciler"]);
    assert_eq!(who("update_pull_request", json!({ "base": "dev", "title": "t" })), Vec::<&str>::new());
    assert_eq!(who("issue_write", json!({ "method": "update", "state": "closed" })), ["controller", "reconciler"]);
    assert_eq!(who("update_issue_state", json!({})), ["controller", "reconciler"]);
    assert_eq!(who("actions_run_trigger", json!({ "method": "rerun_workflow_run" })), ["controller"]);
    for tool in ["create_or_update_file", "delete_file", "push_files", "create_branch", "update_pull_request_branch"] {
        assert_eq!(who(tool, json!({})), ["author"], "{tool}");
    }
    for tool in ["assign_copilot_to_issue", "delete_repository", "fork_repository", "projects_write", "brand_new_tool"]
    {
        assert!(who(tool, json!({})).is_empty(), "{tool}");
    }
    for (tool, methods) in effect::READERS {
        let m = methods.first().copied().unwrap_or("x");
        assert_eq!(who(tool, json!({ "method": m })).len(), ROLES.len(), "{tool} reads for every role");
    }
}

#[test]
fn a_verdict_is_event_on_the_calls_that_submit_one() {
    let v = |tool: &str, args: Value| GITHUB.review_verdict(tool, &call(args));
    assert_eq!(
        v("pull_request_review_write", json!({ "method": "create", "event": "APPROVE" })),
        Some(ReviewVerdict::Approve)
    );
    assert_eq!(
        v("pull_request_review_write", json!({ "method": "submit_pending", "event": "request_changes" })),
        Some(ReviewVerdict::RequestChanges),
        "any case is judged as the verdict"
    );
    assert_eq!(v("pull_request_review_write", json!({ "method": "create", "event": "COMMENT" })), None);
    assert_eq!(
        v("pull_request_review_write", json!({ "method": "create", "state": "APPROVED" })),
        None,
        "Gitea's key is not read"
    );
    assert_eq!(v("pull_request_review_write", json!({ "method": "delete_pending", "event": "APPROVE" })), None);
    assert_eq!(v("create_pull_request_review", json!({ "event": "APPROVE" })), Some(ReviewVerdict::Approve));
    assert_eq!(v("submit_pending_pull_request_review", json!({ "event": "APPROVE" })), Some(ReviewVerdict::Approve));
    assert!(GITHUB.review_is_pinned("pull_request_review_write", &call(json!({ "method": "create" }))));
    assert!(!GITHUB.review_is_pinned("pull_request_review_write", &call(json!({ "method": "submit_pending" }))));
}

#[test]
fn a_created_pr_is_named_by_its_url_and_numbers_that_wrap_name_no_pr() {
    assert_eq!(GITHUB.created_pr(&json!({ "id": "123456", "url": "https://github.com/o/r/pull/42" })), Some(42));
    assert_eq!(GITHUB.created_pr(&json!({ "id": "1", "url": "https://github.com/o/r/issues/42" })), None);
    let target =
        |n: Value| GITHUB.pr_target("merge_pull_request", &call(json!({ "owner": "o", "repo": "r", "pullNumber": n })));
    assert_eq!(target(json!(7)).map(|t| t.pr), Some(7));
    assert_eq!(target(json!(0)), None);
    assert_eq!(target(json!(4_294_967_308_u64)), None);
    let closes = |tool: &str, args: Value| GITHUB.closes(tool, &call(args)).map(|t| t.pr);
    assert_eq!(
        closes("update_pull_request", json!({ "owner": "o", "repo": "r", "pullNumber": 3, "state": "closed" })),
        Some(3)
    );
    assert_eq!(
        closes(
            "issue_write",
            json!({ "owner": "o", "repo": "r", "method": "update", "issue_number": 4, "state": "closed" })
        ),
        Some(4)
    );
    assert_eq!(
        closes("update_pull_request", json!({ "owner": "o", "repo": "r", "pullNumber": 3, "title": "t" })),
        None
    );
}
