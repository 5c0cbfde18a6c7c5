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

#[test]
fn the_gateway_s_merge_is_the_server_s_merge_pinned_with_sha() {
    let target = PrTarget { owner: "Org".into(), repo: "re po".into(), pr: 3 };
    let args = call(json!({ "merge_method": "squash", "commit_title": "t", "commit_message": "", "pullNumber": 3 }));
    let rest = GITHUB.pinned_merge(&target, "abc123", &args).unwrap();
    assert_eq!((rest.method.as_str(), rest.path.as_str()), ("PUT", "repos/Org/re%20po/pulls/3/merge"));
    // Sent only when non-empty, as the server sends them; the head as `sha`.
    assert_eq!(rest.body, json!({ "commit_title": "t", "merge_method": "squash", "sha": "abc123" }));
}

#[test]
fn the_rest_api_base_is_derived_from_the_host_as_the_server_derives_it() {
    for (host, base) in [
        (None, "https://api.github.com/"),
        (Some("https://github.com"), "https://api.github.com/"),
        (Some("https://api.github.com"), "https://api.github.com/"),
        (Some("https://octo.ghe.com"), "https://api.octo.ghe.com/"),
        (Some("https://ghes.corp:8443/"), "https://ghes.corp:8443/api/v3/"),
        (Some("http://127.0.0.1:4567"), "http://127.0.0.1:4567/api/v3/"),
        (Some("http://[::1]:80"), "http://[::1]:80/api/v3/"),
    ] {
        assert_eq!(rest_base(host).as_deref(), Ok(base), "{host:?}");
    }
    // Credentials never travel in cleartext to a remote host; a host needs a scheme.
    assert!(rest_base(Some("http://ghes.corp")).unwrap_err().to_string().contains("https"));
    assert!(rest_base(Some("ghes.corp")).unwrap_err().to_string().contains("scheme"));
}

#[test]
fn github_s_answers_to_the_merge_are_the_server_s() {
    let rest = GITHUB.pinned_merge(&PrTarget { owner: "o".into(), repo: "r".into(), pr: 1 }, "a", &Map::new()).unwrap();
    let url = "https://api.github.com/repos/o/r/pulls/1/merge";
    let ok = GITHUB.rest_answer(
        &rest,
        url,
        200,
        r#"{"sha":"m","merged":true,"message":"Pull Request successfully merged","x":1}"#,
    );
    assert!(!ok.is_error);
    assert_eq!(
        serde_json::from_str::<Value>(&ok.text).unwrap(),
        json!({ "sha": "m", "merged": true, "message": "Pull Request successfully merged" })
    );
    let moved = GITHUB.rest_answer(
        &rest,
        url,
        409,
        r#"{"message":"Head branch was modified. Review and try the merge again."}"#,
    );
    assert!(moved.is_error);
    assert_eq!(
        moved.text,
        format!(
            "failed to merge pull request: PUT {url}: 409 Head branch was modified. Review and try the merge again. []"
        )
    );
    let invalid =
        GITHUB.rest_answer(&rest, url, 422, r#"{"message":"Validation Failed","errors":[{"message":"bad method"}]}"#);
    assert_eq!(invalid.text, "failed to merge pull request: Validation Failed\nbad method");
}

/// Only GitHub's merge result says a merge was made (200 with `merged: true`): a 200 that
/// says otherwise, or is no merge result at all (a proxy's page), is no merge — the gate
/// would record the PR merged and release its leases — and neither is any other 2xx.
#[test]
fn an_answer_that_is_no_merge_result_is_no_merge() {
    let rest = GITHUB.pinned_merge(&PrTarget { owner: "o".into(), repo: "r".into(), pr: 1 }, "a", &Map::new()).unwrap();
    let url = "https://api.github.com/repos/o/r/pulls/1/merge";
    for (status, body) in [
        (200, r#"{"sha":"m","merged":false,"message":"Pull Request is not mergeable"}"#),
        (200, "<html>signed in?</html>"),
        (200, ""),
        (202, r#"{"merged":true}"#),
        (204, ""),
    ] {
        let answer = GITHUB.rest_answer(&rest, url, status, body);
        assert!(answer.is_error, "{status} {body}: {answer:?}");
        assert!(answer.text.starts_with("failed to merge pull request: "), "{}", answer.text);
    }
}

#[test]
fn a_submit_reads_the_caller_s_first_review_and_its_commit() {
    let submit =
        call(json!({ "method": "submit_pending", "owner": "o", "repo": "r", "pullNumber": 4, "event": "APPROVE" }));
    let first =
        GITHUB.pending_review("pull_request_review_write", &submit, &crate::dialect::Unlisted, &[]).unwrap_err();
    assert_eq!(first.iter().map(|r| r.tool.as_str()).collect::<Vec<_>>(), ["get_me"]);
    let me: Answered = (first[0].clone(), Ok(json!({ "login": "Ana" })));
    let second = GITHUB
        .pending_review("pull_request_review_write", &submit, &crate::dialect::Unlisted, std::slice::from_ref(&me))
        .unwrap_err();
    assert_eq!(second[0].arguments.get("method"), Some(&json!("get_reviews")));
    let reviews = json!([
        { "state": "APPROVED", "commit_id": "c0", "user": { "login": "bo" } },
        { "state": "PENDING", "commit_id": "c1", "user": { "login": "ana" } },
    ]);
    let answers = [me.clone(), (second[0].clone(), Ok(reviews))];
    let at = GITHUB.pending_review("submit_pending_pull_request_review", &submit, &crate::dialect::Unlisted, &answers);
    assert_eq!(at, Ok(PendingAt::Commit("c1".into())));
    // A create submits no pending review: judged at the head.
    let create = call(json!({ "method": "create", "owner": "o", "repo": "r", "pullNumber": 4, "event": "APPROVE" }));
    assert_eq!(
        GITHUB.pending_review("pull_request_review_write", &create, &crate::dialect::Unlisted, &[]),
        Ok(PendingAt::Head)
    );
}

/// The server puts `owner` and `repo` into its REST paths unescaped (go-github's
/// `repos/%v/%v/pulls/%d`): `repo: "r/pulls/7#"` makes every read of PR 3 read PR 7, while the
/// gateway's own REST merge (its path escaped, its number `pullNumber`) would merge PR 3 — the
/// gate would judge one PR and merge another. A name GitHub cannot have is refused before
/// anything is read; GitHub's own names pass, in any case.
#[test]
fn an_owner_or_repo_that_is_no_github_name_is_refused_before_anything_is_read() {
    for (key, value) in [
        ("repo", "r/pulls/7#"),
        ("repo", "r/pulls/7?"),
        ("repo", ".."),
        ("owner", "../o"),
        ("owner", "o%2Fx"),
        ("repo", "r\u{ff52}"),
        ("repo", "r "),
    ] {
        let mut args = call(json!({ "owner": "o", "repo": "r", "pullNumber": 3 }));
        args.insert(key.into(), json!(value));
        for tool in ["merge_pull_request", "pull_request_read", "push_files"] {
            let e = GITHUB.check_parse(tool, &args).expect_err(value);
            assert_eq!(e.key, key, "{tool} {value}");
        }
    }
    for (owner, repo) in [("Org-1", "re.po_x"), ("octo_emu", "R"), ("o", ".github")] {
        let args = call(json!({ "owner": owner, "repo": repo, "pullNumber": 3 }));
        assert!(GITHUB.check_parse("merge_pull_request", &args).is_ok(), "{owner}/{repo}");
    }
}
