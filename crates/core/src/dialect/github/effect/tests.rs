use super::*;
use crate::dialect::Unlisted;
use crate::effect::{Answered, Invariant, ReadFailed, answer, judge};
use crate::protect::Protection;
use serde_json::json;

fn args(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

/// The forge, answering as github-mcp-server does: `search_repositories` a search result,
/// `pull_request_read get` a minimal PR (a PR number that is an issue: GitHub's 404).
struct Forge {
    default_branch: &'static str,
    /// `(number, head ref, base ref)` of the PRs of `Org/Repo`.
    prs: Vec<(u64, &'static str, &'static str)>,
    /// `(number, head ref, base ref)` of PRs of `Org/Repo` from the fork `Alice/Fork`, whose
    /// default branch is `trunk`.
    fork_prs: Vec<(u64, &'static str, &'static str)>,
    failing: Vec<&'static str>,
}

impl Default for Forge {
    fn default() -> Self {
        Self { default_branch: "main", prs: vec![], fork_prs: vec![], failing: vec![] }
    }
}

impl Forge {
    fn answer(&self, read: &Read) -> Result<Value, ReadFailed> {
        if self.failing.contains(&read.tool.as_str()) {
            return Err("timeout".into());
        }
        let a = &read.arguments;
        match read.tool.as_str() {
            "search_repositories"
                if a["query"].as_str().is_some_and(|q| q.eq_ignore_ascii_case("repo:alice/fork fork:true")) =>
            {
                Ok(json!({
                    "total_count": 1,
                    "items": [{ "full_name": "Alice/Fork", "default_branch": "trunk", "fork": true }]
                }))
            }
            "search_repositories" => {
                assert_eq!(
                    a["query"].as_str().map(str::to_lowercase).as_deref(),
                    Some("repo:org/repo fork:true"),
                    "forks are searched too"
                );
                Ok(
                    json!({ "total_count": 1, "items": [{ "full_name": "Org/Repo", "default_branch": self.default_branch }] }),
                )
            }
            "pull_request_read" => {
                assert_eq!(a["method"], "get");
                let n = a.get("pullNumber").and_then(Value::as_u64).unwrap_or_default();
                let ours = self.prs.iter().find(|p| p.0 == n).map(|p| (p, "Org/Repo"));
                let forked = self.fork_prs.iter().find(|p| p.0 == n).map(|p| (p, "Alice/Fork"));
                let Some(((_, head, base), head_repo)) = ours.or(forked) else {
                    return Err(format!("failed to get pull request: GET …/pulls/{n}: 404 Not Found []").into());
                };
                Ok(json!({
                    "number": n, "state": "open",
                    "head": { "ref": head, "sha": "1a38ef95aaaa", "repo": { "full_name": head_repo } },
                    "base": { "ref": base, "sha": "2b38ef95aaaa", "repo": { "full_name": "Org/Repo" } },
                }))
            }
            other => Err(format!("no {other}").into()),
        }
    }

    fn effect(&self, tool: &str, call: Value) -> Effect {
        self.effect_with(tool, call, None)
    }

    fn effect_with(&self, tool: &str, call: Value, schema: Option<&Map<String, Value>>) -> Effect {
        let call = args(call);
        let mut answers: Vec<Answered> = Vec::new();
        for _ in 0..16 {
            match GITHUB.establish(tool, &call, schema, &Unlisted, &answers) {
                Ok(effect) => return effect,
                Err(reads) => {
                    for read in reads {
                        assert!(answer(&answers, &read).is_none(), "{read:?} asked twice");
                        let a = self.answer(&read);
                        answers.push((read, a));
                    }
                }
            }
        }
        panic!("no effect after 16 rounds");
    }
}

fn breaches(effect: &Effect, role: &str) -> Vec<Invariant> {
    judge(effect, role, &Protection::default(), &[]).breaches.into_iter().map(|b| b.invariant).collect()
}

fn with_repo(mut v: Value) -> Value {
    v["owner"] = json!("Org");
    v["repo"] = json!("Repo");
    v
}

#[test]
fn file_writes_land_on_the_branch_they_name_and_the_default_is_read_from_the_forge() {
    let forge = Forge { default_branch: "trunk", ..Forge::default() };
    let write = |tool: &str, branch: &str| {
        forge.effect(tool, with_repo(json!({ "path": "a", "content": "x", "message": "m", "branch": branch })))
    };
    for tool in ["create_or_update_file", "delete_file"] {
        assert_eq!(breaches(&write(tool, "trunk"), "author"), [Invariant::ProtectedBranch], "{tool}");
        // A full ref name: `delete_file` makes `refs/heads/refs/heads/trunk`, which reads like the
        // default; `create_or_update_file`'s contents API may read it as `trunk` itself.
        let full = breaches(&write(tool, "refs/heads/trunk"), "author");
        assert!(full.contains(&Invariant::ProtectedBranch), "{tool}: {full:?}");
        assert_eq!(full.contains(&Invariant::UnknownEffect), tool == "create_or_update_file", "{tool}: {full:?}");
        let e = write(tool, "feat");
        assert!(breaches(&e, "author").is_empty(), "{e:?}");
        assert_eq!(e.action, Some(ACTION_PUSH));
    }
    // The server requires a branch: none named is no guess.
    let e = forge.effect("create_or_update_file", with_repo(json!({ "path": "a", "content": "x" })));
    assert!(e.unestablished[0].contains("names no branch"), "{e:?}");
    // One leading `/` is trimmed by the server: the protected path is still seen.
    let e = write("create_or_update_file", "feat");
    assert_eq!(e.paths[0].path, "a");
    let e = forge.effect(
        "create_or_update_file",
        with_repo(json!({ "path": "/.github/workflows/ci.yml", "content": "x", "message": "m", "branch": "feat" })),
    );
    assert_eq!(breaches(&e, "author"), [Invariant::ProtectedPath]);
    let down = Forge { failing: vec!["search_repositories"], ..Forge::default() };
    let e = down.effect("delete_file", with_repo(json!({ "path": "a", "message": "m", "branch": "feat" })));
    assert!(e.unestablished[0].contains("search_repositories"), "fails closed: {e:?}");
}

#[test]
fn push_files_judges_every_file_and_the_branch_it_may_create() {
    let forge = Forge::default();
    let push = |branch: &str, paths: &[&str]| {
        let files: Vec<Value> = paths.iter().map(|p| json!({ "path": p, "content": "x" })).collect();
        forge.effect("push_files", with_repo(json!({ "branch": branch, "message": "m", "files": files })))
    };
    assert!(breaches(&push("feat", &["a", "b/c"]), "author").is_empty());
    assert_eq!(breaches(&push("main", &["a"]), "author"), [Invariant::ProtectedBranch]);
    let e = push("feat", &["a", ".github/workflows/x.yml"]);
    assert_eq!(breaches(&e, "author"), [Invariant::ProtectedPath], "one file of many: {e:?}");
    assert_eq!(e.paths.len(), 2);
}

#[test]
fn update_pull_request_branch_moves_the_head_whatever_it_is() {
    let forge = Forge { prs: vec![(7, "main", "evil"), (8, "feat", "main")], ..Forge::default() };
    let e = forge.effect("update_pull_request_branch", with_repo(json!({ "pullNumber": 7 })));
    assert_eq!(e.branches[0].how, Move::UpdateFromBase { pr: 7 });
    assert_eq!(breaches(&e, "author"), [Invariant::ProtectedBranch], "the head is main: {e:?}");
    let e = forge.effect("update_pull_request_branch", with_repo(json!({ "pullNumber": 8 })));
    assert!(breaches(&e, "author").is_empty());
}

/// A PR from a fork whose head is the fork's default branch (`trunk`): the fork's default is
/// not this repository's, so updating that head from the base is no move of a protected
/// branch. The same branch name in this repository is still protected where it is ours.
#[test]
fn a_fork_s_default_branch_is_not_this_repository_s() {
    let forge = Forge {
        default_branch: "trunk",
        fork_prs: vec![(9, "trunk", "main")],
        prs: vec![(10, "trunk", "main")],
        ..Forge::default()
    };
    let e = forge.effect("update_pull_request_branch", with_repo(json!({ "pullNumber": 9 })));
    assert_eq!(e.branches[0].repo, Repo::full("Alice/Fork"));
    assert!(e.defaults.is_empty(), "{e:?}");
    assert!(breaches(&e, "author").is_empty(), "{e:?}");
    // Ours: `trunk` is this repository's default, as the forge reports it.
    let e = forge.effect("update_pull_request_branch", with_repo(json!({ "pullNumber": 10 })));
    assert_eq!(breaches(&e, "author"), [Invariant::ProtectedBranch], "{e:?}");
    // A fork's branch that the roster names (`main`) is judged by that name all the same.
    let forge = Forge { fork_prs: vec![(11, "main", "dev")], ..Forge::default() };
    let e = forge.effect("update_pull_request_branch", with_repo(json!({ "pullNumber": 11 })));
    assert_eq!(breaches(&e, "author"), [Invariant::ProtectedBranch], "{e:?}");
}

/// The server prefixes a branch name with `refs/heads/` as given: `refs/heads/x` makes a
/// branch literally named so, judged by that name, and one that reads like a protected
/// branch is still refused.
#[test]
fn a_branch_named_refs_heads_something_is_judged_by_that_name() {
    let forge = Forge::default();
    for (tool, extra) in [
        ("create_branch", json!({})),
        ("push_files", json!({ "message": "m", "files": [{ "path": "a", "content": "x" }] })),
        ("delete_file", json!({ "path": "a", "message": "m" })),
    ] {
        let mut call = with_repo(extra);
        call["branch"] = json!("refs/heads/feature");
        let e = forge.effect(tool, call.clone());
        assert_eq!(e.branches[0].branch, "refs/heads/feature", "{tool}: {e:?}");
        assert!(breaches(&e, "author").is_empty(), "{tool}: {e:?}");
        call["branch"] = json!("refs/heads/main");
        assert_eq!(breaches(&forge.effect(tool, call), "author"), [Invariant::ProtectedBranch], "{tool}");
    }
    // The push's tip is read by the literal branch's full ref.
    let read = GITHUB.tip_read("o", "r", "refs/heads/feature", &Unlisted).unwrap();
    assert_eq!(read.arguments["sha"], "refs/heads/refs/heads/feature");
    assert_eq!(GITHUB.tip_read("o", "r", "feature", &Unlisted).unwrap().arguments["sha"], "feature");
}

/// `create_or_update_file` is no ref-building tool: the server hands `branch` as given to
/// GitHub's contents API (`PUT …/contents/PATH` with `branch`, after a read with `ref`), which
/// reads `refs/heads/x` as branch `x` where it takes a full ref name — or as a branch literally
/// so named: which one was not determined. Judged as either, a push would be recorded on the
/// other; refused, with the plain name to use.
#[test]
fn a_file_write_naming_a_full_ref_is_refused_since_github_s_reading_of_it_is_unknown() {
    let forge = Forge::default();
    for branch in ["refs/heads/feature", "refs/heads/refs/heads/main", "refs/tags/v1"] {
        let call = with_repo(json!({ "path": "a", "content": "x", "message": "m", "branch": branch }));
        let e = forge.effect("create_or_update_file", call);
        assert_eq!(breaches(&e, "author"), [Invariant::UnknownEffect], "{branch}: {e:?}");
        assert!(e.unknown.as_deref().is_some_and(|why| why.contains("plain")), "{e:?}");
    }
    let call = with_repo(json!({ "path": "a", "content": "x", "message": "m", "branch": "feature" }));
    assert!(breaches(&forge.effect("create_or_update_file", call), "author").is_empty());
}

#[test]
fn update_pull_request_retargets_with_base_and_closes_with_state() {
    let forge = Forge::default();
    let update = |extra: Value| {
        let mut call = with_repo(json!({ "pullNumber": 3 }));
        for (k, v) in extra.as_object().unwrap() {
            call[k] = v.clone();
        }
        forge.effect("update_pull_request", call)
    };
    assert_eq!(breaches(&update(json!({ "base": "dev" })), "controller"), [Invariant::Retarget]);
    // Any present key counts, even "".
    assert_eq!(breaches(&update(json!({ "base": "" })), "author"), [Invariant::Retarget]);
    assert_eq!(breaches(&update(json!({ "state": "closed" })), "author"), [Invariant::PrState]);
    assert!(breaches(&update(json!({ "state": "closed" })), "controller").is_empty());
    let e = update(json!({ "title": "t" }));
    assert!(breaches(&e, "author").is_empty());
    assert_eq!((e.action, &e.prs[0].change), (Some(ACTION_EDIT), &PrChange::Text));
    let e = forge.effect("update_pull_request_state", with_repo(json!({ "pullNumber": 3, "state": "closed" })));
    assert_eq!(breaches(&e, "reviewer"), [Invariant::PrState]);
}

#[test]
fn a_merge_is_pinned_whether_the_server_declares_the_pin_or_the_gateway_makes_it() {
    let forge = Forge { prs: vec![(3, "feat", "main")], ..Forge::default() };
    let call = with_repo(json!({ "pullNumber": 3 }));
    let old = args(json!({ "properties": {
        "owner": {}, "repo": {}, "pullNumber": {}, "commit_title": {}, "commit_message": {}, "merge_method": {}
    } }));
    let e = forge.effect_with("merge_pull_request", call.clone(), Some(&old));
    assert_eq!(e.action, Some(ACTION_MERGE));
    assert_eq!(
        e.branches[0],
        BranchMove { repo: Repo::new("org", "repo"), branch: "main".into(), how: Move::Merge { pr: 3 } }
    );
    // The released server declares no pin: the gateway's own REST merge pins it (`sha`).
    assert!(breaches(&e, "merger").is_empty(), "{e:?}");
    let mut pinned = old.clone();
    pinned["properties"][crate::dialect::github::MERGE_HEAD_KEY] = json!({ "type": "string" });
    let e = forge.effect_with("merge_pull_request", call, Some(&pinned));
    assert!(breaches(&e, "merger").is_empty(), "{e:?}");
}

#[test]
fn an_issue_update_on_a_pr_s_number_changes_the_pr() {
    let forge = Forge { prs: vec![(5, "feat", "main")], ..Forge::default() };
    let close = |n: u64| {
        forge.effect("issue_write", with_repo(json!({ "method": "update", "issue_number": n, "state": "closed" })))
    };
    assert_eq!(breaches(&close(5), "author"), [Invariant::PrState]);
    assert_eq!(breaches(&close(6), "author"), [Invariant::IssueState], "#6 is an issue (GitHub's 404 for a PR read)");
    assert!(breaches(&close(6), "controller").is_empty(), "an issue's state is the controller's");
    let e = forge.effect("update_issue_state", with_repo(json!({ "issue_number": 5, "state": "closed" })));
    assert_eq!(breaches(&e, "merger"), [Invariant::PrState]);
    let e = forge.effect("update_issue_title", with_repo(json!({ "issue_number": 5, "title": "t" })));
    assert_eq!(e.prs[0].change, PrChange::Text, "a PR's title, for the issue lock");
    // Labels touch no state: no read.
    let e = forge.effect("issue_write", with_repo(json!({ "method": "update", "issue_number": 5, "labels": ["x"] })));
    assert_eq!(e, Effect::write());
}

#[test]
fn the_loosely_decoded_review_tool_takes_only_its_own_keys_and_numbers_that_do_not_wrap() {
    let forge = Forge::default();
    let review = |call: Value| forge.effect("pull_request_review_write", with_repo(call));
    let e = review(json!({ "method": "create", "pullNumber": 3, "event": "APPROVE", "commitID": "abc" }));
    assert_eq!(e.action, Some(ACTION_REVIEW));
    assert!(e.unestablished.is_empty());
    for key in ["Event", "EVENT", "PullNumber", "CommitID", "commitId"] {
        let mut call = json!({ "method": "create", "pullNumber": 3, "event": "COMMENT" });
        call[key] = json!("APPROVE");
        let e = review(call);
        assert!(e.unestablished.first().is_some_and(|w| w.contains(key)), "{key}: {e:?}");
    }
    // 2^32 + 12 is PR 12 to the server.
    let e = review(json!({ "method": "create", "pullNumber": 4_294_967_308_u64, "event": "APPROVE" }));
    assert!(e.unestablished[0].contains("wraps"), "{e:?}");
    let e = forge.effect("merge_pull_request", with_repo(json!({ "pullNumber": 0 })));
    assert!(!e.unestablished.is_empty(), "{e:?}");
    assert!(review(json!({ "method": "dismiss", "pullNumber": 3 })).unknown.is_some());
}

#[test]
fn copilot_s_coding_agent_is_an_unknown_effect_and_enabling_a_toolset_changes_no_forge() {
    let forge = Forge::default();
    let e = forge.effect("assign_copilot_to_issue", with_repo(json!({ "issue_number": 1 })));
    assert_eq!(breaches(&e, "controller"), [Invariant::UnknownEffect]);
    assert!(forge.effect("enable_toolset", json!({ "toolset": "actions" })).is_read());
    assert_eq!(breaches(&forge.effect("made_up_tool", json!({})), "author"), [Invariant::UnknownEffect]);
    let e = forge.effect("actions_list", with_repo(json!({ "method": "delete_everything" })));
    assert_eq!(breaches(&e, "author"), [Invariant::UnknownEffect]);
}

#[test]
fn every_tool_the_surface_names_has_a_statement() {
    let forge = Forge { prs: vec![(1, "feat", "main")], ..Forge::default() };
    for tool in crate::dialect::table::tools(&SURFACE) {
        let methods: Vec<&str> = READERS
            .iter()
            .chain(PLAIN_WRITES)
            .chain(REVIEWS)
            .filter(|(t, _)| *t == tool)
            .flat_map(|(_, m)| m.iter().copied())
            .collect();
        let mut call = with_repo(json!({ "pullNumber": 1, "issue_number": 1, "branch": "feat", "path": "a" }));
        if let Some(m) = methods.first() {
            call["method"] = json!(m);
        }
        if tool == "issue_write" {
            call["method"] = json!("update");
        }
        let e = forge.effect(tool, call);
        let unknown = e.unknown.as_deref().unwrap_or_default();
        assert!(!unknown.contains("has no tool"), "{tool}: {unknown}");
    }
}

#[test]
fn reads_are_built_from_the_keys_the_running_server_declares() {
    struct Renamed;
    impl Schemas for Renamed {
        fn schema(&self, tool: &str) -> Option<Map<String, Value>> {
            (tool == "search_repositories").then(|| args(json!({ "properties": { "q": {} } })))
        }
    }
    let why = repo_read("o", "r", &Renamed).unwrap_err();
    assert!(why.to_string().contains("`search_repositories` declares none of `query`"), "{why}");
    let e = GITHUB.establish("create_branch", &args(with_repo(json!({ "branch": "x" }))), None, &Renamed, &[]).unwrap();
    assert!(e.unestablished[0].contains("`query`"), "refused by name: {e:?}");
}

#[test]
fn setting_copilot_s_coding_agent_to_work_through_any_write_is_an_unknown_effect() {
    let forge = Forge { prs: vec![(5, "feat", "main")], ..Forge::default() };
    for (tool, call) in [
        ("issue_write", json!({ "method": "update", "issue_number": 7, "assignees": ["Copilot"] })),
        ("issue_write", json!({ "method": "create", "title": "t", "assignees": ["copilot-swe-agent[bot]"] })),
        ("update_issue_assignees", json!({ "issue_number": 7, "assignees": ["copilot"] })),
        ("add_issue_comment", json!({ "issue_number": 5, "body": "@Copilot please fix the tests" })),
        ("pull_request_review_write", json!({ "method": "create", "pullNumber": 5, "body": "@copilot rewrite it" })),
        ("create_pull_request", json!({ "title": "t", "head": "f", "base": "main", "reviewers": ["alice"] })),
        (
            "create_or_update_file",
            json!({ "path": "a", "content": "x", "message": "m", "branch": "f", "allow_symlink_write": true }),
        ),
    ] {
        let e = forge.effect(tool, with_repo(call.clone()));
        assert_eq!(breaches(&e, "controller"), [Invariant::UnknownEffect], "{tool} {call}: {e:?}");
    }
    let e = forge.effect("add_issue_comment", with_repo(json!({ "issue_number": 5, "body": "looks good" })));
    assert!(breaches(&e, "reviewer").is_empty());
    // No schema: the gateway's own REST merge pins the head all the same.
    let e = forge.effect("merge_pull_request", with_repo(json!({ "pullNumber": 5 })));
    assert!(breaches(&e, "merger").is_empty(), "{e:?}");
}

/// GitHub's closing keywords: in a commit message (closing when it reaches the default
/// branch), a PR's body, a merge commit's own message — each judged for the role.
#[test]
fn github_s_closing_keywords_are_stated_and_judged() {
    let forge = Forge { prs: vec![(5, "feat", "main")], ..Forge::default() };
    let write = json!({ "path": "a", "content": "x", "branch": "feat", "message": "Fixes GH-7" });
    let e = forge.effect("create_or_update_file", with_repo(write));
    assert_eq!(breaches(&e, "author"), [Invariant::IssueState], "{e:?}");
    let push =
        json!({ "branch": "feat", "message": "resolves: Org/Repo#7", "files": [{ "path": "a", "content": "x" }] });
    assert_eq!(breaches(&forge.effect("push_files", with_repo(push)), "author"), [Invariant::IssueState]);
    let open = json!({ "title": "t", "body": "Closes #7", "head": "feat", "base": "main" });
    assert!(breaches(&forge.effect("create_pull_request", with_repo(open)), "author").is_empty());
    let merge = json!({ "pullNumber": 5, "commit_message": "closes https://github.com/org/repo/issues/8" });
    // Pinned either way (the gateway's own REST merge lands `commit_message` all the same).
    assert_eq!(breaches(&forge.effect("merge_pull_request", with_repo(merge)), "merger"), [Invariant::IssueState]);
}
