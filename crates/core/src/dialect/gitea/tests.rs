use super::rules as gitea_mcp_rules;
use crate::capability::ToolClass;
use crate::rules::RuleSet;
use serde_json::{Map, Value, json};

const ROLES: [&str; 5] = ["author", "reviewer", "merger", "controller", "reconciler"];

fn call(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

fn may(rules: &RuleSet, role: &str, tool: &str, args: Value) -> bool {
    rules.decide(role, tool, Some(&call(args))).is_some_and(|d| d.permitted)
}

/// The server's read tools (go-sdk generation) and their `method` values (empty: none).
const READERS: &[(&str, &[&str])] = &[
    ("get_gitea_mcp_server_version", &[]),
    ("get_me", &[]),
    ("get_user_orgs", &[]),
    ("search_users", &[]),
    ("search_org_teams", &[]),
    ("search_repos", &[]),
    ("search_issues", &[]),
    ("notification_read", &["list", "get"]),
    ("label_read", &["list_repo_labels", "get_repo_label", "list_org_labels"]),
    ("milestone_read", &["get", "list"]),
    ("wiki_read", &["list", "get", "get_revisions"]),
    ("timetracking_read", &["list_issue_times", "list_repo_times", "get_my_stopwatches", "get_my_times"]),
    ("package_read", &["list", "list_versions", "get"]),
    ("list_issues", &[]),
    ("attachment_read", &["list", "get"]),
    ("issue_read", &["get", "get_comments", "get_labels"]),
    ("list_pull_requests", &[]),
    (
        "pull_request_read",
        &["get", "get_diff", "get_files", "get_status", "get_reviews", "get_review", "get_review_comments"],
    ),
    ("actions_config_read", &["list_repo_secrets", "list_repo_variables", "get_repo_variable"]),
    ("actions_run_read", &["list_workflows", "list_runs", "get_run", "get_job_log_preview"]),
    ("list_my_repos", &[]),
    ("list_org_repos", &[]),
    ("get_repository_tree", &[]),
    ("get_file_contents", &[]),
    ("get_dir_contents", &[]),
    ("list_branches", &[]),
    ("get_tag", &[]),
    ("list_tags", &[]),
    ("list_commits", &[]),
    ("get_commit", &[]),
    ("get_release", &[]),
    ("get_latest_release", &[]),
    ("list_releases", &[]),
];

/// The server's write tools, each `method` (`""`: the tool has none) with the roles the
/// role matrix lets make it.
const WRITES: &[(&str, &str, &[&str])] = &[
    ("issue_write", "create", &["author", "controller"]),
    ("issue_write", "update", &["author", "controller", "reconciler"]),
    ("actions_run_read", "download_job_log", &[]),
    ("actions_run_read", "download_artifact", &[]),
    ("attachment_read", "download", &[]),
    ("issue_write", "add_comment", &["author", "reviewer", "merger", "controller", "reconciler"]),
    ("issue_write", "edit_comment", &["author", "reviewer", "controller", "reconciler"]),
    ("issue_write", "add_labels", &["author", "controller", "reconciler"]),
    ("issue_write", "remove_label", &["author", "controller", "reconciler"]),
    ("issue_write", "replace_labels", &["author", "controller", "reconciler"]),
    ("issue_write", "clear_labels", &["author", "controller", "reconciler"]),
    ("pull_request_write", "create", &["author"]),
    ("pull_request_write", "update", &["author"]),
    ("pull_request_write", "close", &["controller", "reconciler"]),
    ("pull_request_write", "reopen", &["controller", "reconciler"]),
    ("pull_request_write", "merge", &["merger"]),
    ("pull_request_write", "update_branch", &["author"]),
    ("pull_request_write", "add_reviewers", &["author"]),
    ("pull_request_write", "remove_reviewers", &["author"]),
    ("pull_request_review_write", "create", &["reviewer"]),
    ("pull_request_review_write", "submit", &["reviewer"]),
    ("pull_request_review_write", "delete", &["reviewer"]),
    ("pull_request_review_write", "dismiss", &["reviewer"]),
    ("pull_request_review_write", "reply_comment", &["reviewer"]),
    ("pull_request_review_write", "resolve_thread", &["reviewer"]),
    ("pull_request_review_write", "unresolve_thread", &["reviewer"]),
    ("label_write", "create_repo_label", &["controller"]),
    ("label_write", "edit_repo_label", &["controller"]),
    ("label_write", "delete_repo_label", &["controller"]),
    ("label_write", "create_org_label", &["controller"]),
    ("label_write", "edit_org_label", &["controller"]),
    ("label_write", "delete_org_label", &["controller"]),
    ("milestone_write", "create", &["controller"]),
    ("milestone_write", "update", &["controller"]),
    ("milestone_write", "edit", &["controller"]),
    ("milestone_write", "delete", &["controller"]),
    ("notification_write", "mark_read", &["reconciler"]),
    ("notification_write", "mark_all_read", &["reconciler"]),
    ("wiki_write", "create", &[]),
    ("timetracking_write", "add_time", &[]),
    ("package_write", "delete", &[]),
    ("actions_config_write", "upsert_repo_variable", &[]),
    ("actions_run_write", "dispatch_workflow", &[]),
    ("create_or_update_file", "", &["author"]),
    ("delete_file", "", &["author"]),
    ("create_branch", "", &["author"]),
    ("rename_branch", "", &["author"]),
    ("delete_branch", "", &["author", "merger"]),
    ("create_repo", "", &[]),
    ("fork_repo", "", &[]),
    ("create_tag", "", &[]),
    ("delete_tag", "", &[]),
    ("create_release", "", &[]),
    ("delete_release", "", &[]),
];

#[test]
fn the_profile_is_consistent_and_every_rule_can_decide() {
    let rules = RuleSet::new(gitea_mcp_rules());
    rules.check(rules.rules().len()).unwrap();
}

#[test]
fn every_reader_of_the_server_is_read_only_for_every_role() {
    let r = RuleSet::new(gitea_mcp_rules());
    for (tool, methods) in READERS {
        let calls: Vec<Value> = if methods.is_empty() {
            vec![json!({ "owner": "o", "repo": "r" })]
        } else {
            methods.iter().map(|m| json!({ "method": m, "owner": "o", "repo": "r" })).collect()
        };
        for (role, args) in ROLES.iter().flat_map(|role| calls.iter().map(move |a| (role, a))) {
            let d = r.decide(role, tool, Some(&call(args.clone()))).unwrap();
            assert!(d.permitted, "{role} reads {tool} {args}");
            assert_eq!(d.class, Some(ToolClass::ReadOnly), "{tool}");
        }
    }
}

#[test]
fn every_write_of_the_server_is_made_by_the_roles_of_spec_9_and_no_other() {
    let r = RuleSet::new(gitea_mcp_rules());
    for (tool, method, allowed) in WRITES {
        let args = if method.is_empty() { json!({ "owner": "o" }) } else { json!({ "method": method, "owner": "o" }) };
        for role in ROLES {
            let d = r.decide(role, tool, Some(&call(args.clone()))).unwrap();
            assert_eq!(d.permitted, allowed.contains(&role), "{role} {tool} {method}: {:?}", d.reason);
            assert_eq!(d.class, Some(ToolClass::Mutating), "{tool} {method}");
        }
    }
}

#[test]
fn the_matrix_of_spec_9() {
    let r = RuleSet::new(gitea_mcp_rules());
    for role in ROLES {
        assert!(may(&r, role, "pull_request_read", json!({ "method": "get", "pull_number": 1 })), "{role} reads");
        assert!(may(&r, role, "list_pull_requests", json!({})), "{role} lists");
        assert!(!may(&r, role, "create_release", json!({})), "{role}: not in the matrix");
    }
    assert!(may(&r, "author", "pull_request_write", json!({ "method": "update", "title": "t" })));
    assert!(!may(&r, "author", "pull_request_write", json!({ "method": "update", "state": "open" })));
    assert!(!may(&r, "author", "pull_request_write", json!({ "method": "update", "state": "closed" })));
    // What a call is (its workflow action) is the dialect's statement, not a rule's.
    let review = r.decide("reviewer", "pull_request_review_write", Some(&call(json!({ "method": "create" })))).unwrap();
    assert_eq!(review.action, None);
    let stated = crate::dialect::Dialect::establish(
        &super::GITEA,
        "pull_request_review_write",
        &call(json!({ "method": "create" })),
        None,
        &crate::dialect::Unlisted,
        &[],
    );
    assert_eq!(stated.map(|e| e.action), Ok(Some("review")));
}

/// A comment is judged for the issues its text names, and only a PR's comment acts (at the
/// merge): the forge is asked whether the number is a PR's only when the text names one, not
/// before every comment (a downstream round trip each).
#[test]
fn a_comment_naming_no_issue_is_stated_without_reading_the_forge() {
    let establish = |body: &str| {
        crate::dialect::Dialect::establish(
            &super::GITEA,
            "issue_write",
            &call(json!({ "method": "add_comment", "owner": "o", "repo": "r", "issue_number": 1, "body": body })),
            None,
            &crate::dialect::Unlisted,
            &[],
        )
    };
    let plain = establish("looks good, one nit below").expect("stated without a read");
    assert!(plain.issues.is_empty() && plain.prs.is_empty(), "{plain:?}");
    assert_eq!(plain, crate::effect::Effect::write());
    let reads = establish("this closes #9").expect_err("a comment naming an issue asks whether #1 is a PR");
    assert_eq!(reads.len(), 1, "{reads:?}");
    assert_eq!((reads[0].tool.as_str(), reads[0].arguments.get("method")), ("pull_request_read", Some(&json!("get"))));
}

#[test]
fn a_method_the_server_does_not_have_is_no_role_s_and_the_refusal_names_it() {
    let r = RuleSet::new(gitea_mcp_rules());
    for tool in [
        "issue_write",
        "pull_request_write",
        "pull_request_review_write",
        "label_write",
        "milestone_write",
        "notification_write",
    ] {
        for role in ROLES {
            let d = r.decide(role, tool, Some(&call(json!({ "method": "frobnicate" })))).unwrap();
            assert!(!d.permitted, "{role} {tool}");
            let reason = d.reason.unwrap();
            assert!(reason.contains("/method = \"frobnicate\"") && reason.contains("no role"), "{reason}");
            assert!(d.rule.unwrap().ends_with("-other"), "the tool's own fallback decides");
        }
    }
    // The role matrix lists these, the server has no such method or tool: refused like any unknown call.
    for role in ROLES {
        assert!(!may(&r, role, "issue_write", json!({ "method": "add_dependency" })), "{role}");
        assert!(!may(&r, role, "issue_write", json!({ "method": "remove_dependency" })), "{role}");
        assert!(!may(&r, role, "project_write", json!({ "method": "create" })), "{role}");
    }
}

#[test]
fn a_state_changing_update_is_refused_naming_the_state() {
    let r = RuleSet::new(gitea_mcp_rules());
    for role in ROLES {
        let d = r
            .decide(role, "pull_request_write", Some(&call(json!({ "method": "update", "state": "closed" }))))
            .unwrap();
        assert!(!d.permitted, "{role}");
        let reason = d.reason.unwrap();
        assert!(reason.contains("gitea-mcp:pr-update-state") && reason.contains("/state = \"closed\""), "{reason}");
    }
}

#[test]
fn a_merge_refused_to_the_reviewer_names_the_rule_the_value_and_the_merger() {
    let r = RuleSet::new(gitea_mcp_rules());
    let d = r
        .decide("reviewer", "pull_request_write", Some(&call(json!({ "method": "merge", "pull_number": 7 }))))
        .unwrap();
    assert!(!d.permitted);
    let reason = d.reason.unwrap();
    for part in ["gitea-mcp:pr-merge", "/method = \"merge\"", "only the merger role", "role reviewer may not"] {
        assert!(reason.contains(part), "{part}: {reason}");
    }
    assert_eq!(d.may, ["merger"]);
}

#[test]
fn readers_that_write_and_merges_the_gate_cannot_pin_are_no_roles() {
    let r = RuleSet::new(gitea_mcp_rules());
    for role in ROLES {
        let to_file = json!({ "method": "get_job_log_preview", "owner": "o", "repo": "r", "output_path": "/tmp/x" });
        let d = r.decide(role, "actions_run_read", Some(&call(to_file))).unwrap();
        assert!(!d.permitted && d.class == Some(ToolClass::Mutating), "{role}: a reader that writes a file");
        for method in ["frobnicate", "download"] {
            let d = r.decide(role, "pull_request_read", Some(&call(json!({ "method": method })))).unwrap();
            assert!(!d.permitted, "{role}: pull_request_read {method}");
        }
        for flag in ["force_merge", "merge_when_checks_succeed"] {
            let d =
                r.decide(role, "pull_request_write", Some(&call(json!({ "method": "merge", flag: true })))).unwrap();
            assert!(!d.permitted, "{role}: {flag}");
            assert!(d.reason.unwrap().contains(flag));
        }
        let retarget = json!({ "method": "update", "pull_number": 3, "base": "main" });
        let d = r.decide(role, "pull_request_write", Some(&call(retarget))).unwrap();
        assert!(!d.permitted && d.reason.unwrap().contains("/base"), "{role}: retargeting is no role's");
        let state = json!({ "method": "update", "issue_number": 3, "state": "closed" });
        let allowed = r.decide(role, "issue_write", Some(&call(state))).unwrap().permitted;
        assert_eq!(allowed, ["controller", "reconciler"].contains(&role), "{role}: issue_write update with a state");
    }
    assert!(may(&r, "merger", "pull_request_write", json!({ "method": "merge", "force_merge": false })));
}

mod workflow_reading {
    use crate::dialect::gitea::{GITEA, pr_target};
    use crate::dialect::{Dialect, PrTarget, Schemas, Unlisted};
    use crate::workflow::ReviewVerdict;
    use serde_json::{Map, Value, json};

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn targets_are_read_leniently_and_never_guessed() {
        let t = pr_target(&args(json!({"owner": "o", "repo": "r", "index": 976}))).unwrap();
        assert_eq!((t.pr, t.key("prgs").to_string()), (976, "prgs/o/r#976".to_owned()));
        let upper = pr_target(&args(json!({"owner": "ORG", "repo": "Repo", "pull_number": 5}))).unwrap();
        assert_eq!(upper.key("prgs").to_string(), "prgs/org/repo#5", "one history however the name is spelled");
        assert_eq!(pr_target(&args(json!({"owner": "o", "repo": "r", "pull_number": "12"}))).unwrap().pr, 12);
        assert_eq!(pr_target(&args(json!({"owner": "o", "repo": "r"}))), None);
        assert_eq!(pr_target(&args(json!({"owner": "o", "index": 1}))), None);
        assert_eq!(pr_target(&args(json!({"owner": "o", "repo": "r", "index": -1}))), None);
        assert_eq!(GITEA.pr_target("issue_write", &args(json!({"owner": "o", "repo": "r", "pull_number": 1}))), None);
    }

    #[test]
    fn verdicts_only_from_the_key_and_methods_the_server_reads() {
        let v = |a: Value| GITEA.review_verdict("pull_request_review_write", &args(a));
        assert_eq!(v(json!({"method": "create", "state": "APPROVED"})), Some(ReviewVerdict::Approve));
        assert_eq!(v(json!({"method": "submit", "state": "REQUEST_CHANGES"})), Some(ReviewVerdict::RequestChanges));
        assert_eq!(v(json!({"method": "create", "state": "COMMENT", "event": "APPROVED"})), None);
        assert_eq!(v(json!({"method": "dismiss", "state": "APPROVED"})), None);
        assert_eq!(v(json!({"method": "create", "state": "approved"})), None, "Gitea compares the literal");
        assert_eq!(v(json!({"state": "APPROVED"})), None);
        assert!(GITEA.is_not_found("get o/r/pr/3 err: The target couldn't be found."));
        assert_eq!(GITEA.created_pr(&json!({"number": 7})), Some(7));
    }

    struct V1;
    impl Schemas for V1 {
        fn schema(&self, tool: &str) -> Option<Map<String, Value>> {
            let props = match tool {
                "pull_request_read" => json!({ "method": {}, "owner": {}, "repo": {}, "index": {} }),
                "list_pull_requests" => json!({ "owner": {}, "repo": {}, "state": {}, "page": {}, "perPage": {} }),
                "search_repos" => json!({ "keyword": {} }),
                _ => return None,
            };
            Some(args(json!({ "properties": props })))
        }
    }

    #[test]
    fn the_gate_s_reads_take_the_keys_the_running_release_declares() {
        let target = PrTarget { owner: "o".into(), repo: "r".into(), pr: 3 };
        let now = GITEA.pr_read(&target, &Unlisted).unwrap();
        assert_eq!(now.arguments.get("pull_number"), Some(&json!(3)));
        let v1 = GITEA.pr_read(&target, &V1).unwrap();
        assert_eq!((v1.arguments.get("index"), v1.arguments.get("pull_number")), (Some(&json!(3)), None));
        let page = super::super::effect::open_prs_read("o", "r", 1, &V1).unwrap();
        assert!(page.arguments.contains_key("perPage") && !page.arguments.contains_key("per_page"));
        let search = super::super::effect::repo_read("r", &V1).unwrap();
        assert_eq!(search.arguments.get("keyword"), Some(&json!("r")));
    }
}
