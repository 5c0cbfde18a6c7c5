use super::*;
use crate::dialect::Unlisted;
use crate::effect::{Answered, Invariant, ReadFailed, answer, judge};
use crate::protect::Protection;
use serde_json::json;

fn args(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

/// The forge: answers by read tool (and, for PRs, by number).
struct Forge {
    default_branch: &'static str,
    forks: u64,
    fork_of: Option<&'static str>,
    /// `(number, head ref, head repo, base ref)` of the open PRs of `org/repo`.
    open: Vec<(u64, &'static str, &'static str, &'static str)>,
    /// The open PRs of the parent, same shape.
    parent_open: Vec<(u64, &'static str, &'static str, &'static str)>,
    /// Reads that fail.
    failing: Vec<&'static str>,
    /// Every PR's body, and the bodies of the comments on it.
    body: &'static str,
    comments: Vec<&'static str>,
    /// The open PRs of the fork `alice/repo` (listed by `search_repos` when there are any).
    fork_open: Vec<(u64, &'static str, &'static str, &'static str)>,
}

impl Default for Forge {
    fn default() -> Self {
        Self {
            default_branch: "main",
            forks: 0,
            fork_of: None,
            open: vec![],
            parent_open: vec![],
            failing: vec![],
            body: "",
            comments: vec![],
            fork_open: vec![],
        }
    }
}

impl Forge {
    fn answer(&self, read: &Read) -> Result<Value, ReadFailed> {
        if self.failing.contains(&read.tool.as_str()) {
            return Err("timeout".into());
        }
        let a = &read.arguments;
        let owner = a.get("owner").and_then(Value::as_str).unwrap_or_default();
        match read.tool.as_str() {
            "search_repos" => {
                let mut entry = json!({
                    "full_name": "Org/Repo", "default_branch": self.default_branch, "forks_count": self.forks,
                    "fork": self.fork_of.is_some()
                });
                if let Some(parent) = self.fork_of {
                    entry["parent"] = json!({ "full_name": parent });
                }
                if self.fork_open.is_empty() {
                    return Ok(json!([entry]));
                }
                // gitea-mcp's slimmed answer names no fork's parent.
                let fork =
                    json!({ "full_name": "alice/repo", "default_branch": "main", "forks_count": 0, "fork": true });
                Ok(json!([entry, fork]))
            }
            "issue_read" => {
                assert_eq!(a["method"], "get_comments");
                Ok(Value::Array(self.comments.iter().map(|b| json!({ "body": b })).collect()))
            }
            "pull_request_read" if a["method"] == "get_review_comments" => Ok(json!([])),
            "list_pull_requests" => {
                let listed = match owner {
                    "up" => &self.parent_open,
                    "alice" => &self.fork_open,
                    _ => &self.open,
                };
                let page = a.get("page").and_then(Value::as_u64).unwrap_or(1);
                if page > 1 {
                    return Ok(json!([]));
                }
                Ok(Value::Array(
                    listed
                        .iter()
                        .map(|(n, head, _, base)| json!({ "number": n, "head": head, "base": base }))
                        .collect(),
                ))
            }
            "pull_request_read" => {
                let n = a.get("pull_number").and_then(Value::as_u64).unwrap_or_default();
                let listed = if owner == "up" { &self.parent_open } else { &self.open };
                let Some((_, head, head_repo, base)) = listed.iter().find(|p| p.0 == n) else {
                    return Err(format!("get {owner}/repo/pr/{n} err: 404 not found").into());
                };
                let base_repo = if owner == "up" { "up/repo" } else { "Org/Repo" };
                Ok(json!({
                    "number": n, "state": "open", "title": "t", "body": self.body,
                    "head": { "ref": head, "sha": "1a38ef95aaaa", "repo": { "full_name": head_repo } },
                    "base": { "ref": base, "sha": "2b38ef95aaaa", "repo": { "full_name": base_repo } },
                }))
            }
            other => Err(format!("no {other}").into()),
        }
    }

    /// The effect of a call, every read answered.
    fn effect(&self, tool: &str, call: Value) -> Effect {
        self.effect_with(tool, call, None)
    }

    fn effect_with(&self, tool: &str, call: Value, schema: Option<&Map<String, Value>>) -> Effect {
        let call = args(call);
        let mut answers: Vec<Answered> = Vec::new();
        for _ in 0..64 {
            match GITEA.establish(tool, &call, schema, &Unlisted, &answers) {
                Ok(effect) => return effect,
                Err(reads) => {
                    assert!(!reads.is_empty(), "a pending step names its reads");
                    for read in reads {
                        assert!(answer(&answers, &read).is_none(), "{read:?} asked twice");
                        let a = self.answer(&read);
                        answers.push((read, a));
                    }
                }
            }
        }
        panic!("no effect after 64 rounds");
    }
}

fn breaches(effect: &Effect, role: &str) -> Vec<Invariant> {
    judge(effect, role, &Protection::default(), &[]).breaches.into_iter().map(|b| b.invariant).collect()
}

const REPO: (&str, &str) = ("owner", "Org");

fn with_repo(mut v: Value) -> Value {
    v[REPO.0] = json!(REPO.1);
    v["repo"] = json!("Repo");
    v
}

#[test]
fn a_file_write_lands_where_the_server_writes_it() {
    let forge = Forge { default_branch: "trunk", ..Forge::default() };
    // No branch named: the server writes the default branch, read from the forge.
    let e = forge.effect("create_or_update_file", with_repo(json!({ "path": "a", "content": "x" })));
    assert_eq!((e.branches[0].branch.as_str(), e.action), ("trunk", Some(ACTION_PUSH)));
    assert_eq!(breaches(&e, "author"), [Invariant::ProtectedBranch], "the forge's default is protected");
    // A new branch made from `main` is written, never `main`.
    let e = forge.effect(
        "create_or_update_file",
        with_repo(json!({ "path": "a", "branch_name": "main", "new_branch_name": "feat" })),
    );
    assert!(breaches(&e, "author").is_empty(), "{e:?}");
    let e = forge.effect("delete_file", with_repo(json!({ "path": ".gitea/workflows/ci.yml", "branch_name": "feat" })));
    assert_eq!(breaches(&e, "author"), [Invariant::ProtectedPath]);
    // Without the repository the write fails closed.
    let down = Forge { failing: vec!["search_repos"], ..Forge::default() };
    let e = down.effect("create_or_update_file", with_repo(json!({ "path": "a", "branch_name": "feat" })));
    assert!(e.unestablished[0].contains("search_repos"), "{e:?}");
}

#[test]
fn updating_a_pr_from_its_base_moves_its_head_whatever_the_head_is() {
    let forge =
        Forge { open: vec![(7, "main", "Org/Repo", "evil"), (8, "feat", "Org/Repo", "main")], ..Forge::default() };
    let e = forge.effect("pull_request_write", with_repo(json!({ "method": "update_branch", "pull_number": 7 })));
    assert_eq!(e.branches[0].how, Move::UpdateFromBase { pr: 7 });
    assert_eq!(breaches(&e, "author"), [Invariant::ProtectedBranch], "the head is main: {e:?}");
    let e = forge.effect("pull_request_write", with_repo(json!({ "method": "update_branch", "pull_number": 8 })));
    assert!(breaches(&e, "author").is_empty());
    assert_eq!(e.action, Some(ACTION_PUSH), "the head moves: the new head's pusher is recorded");
}

#[test]
fn a_merge_states_its_terms_and_what_its_branch_deletion_does() {
    let forge = Forge {
        open: vec![(3, "feat", "Org/Repo", "main"), (4, "stacked", "Org/Repo", "feat"), (5, "feat", "Org/Repo", "dev")],
        ..Forge::default()
    };
    let merge = |extra: Value| {
        let mut call = with_repo(json!({ "method": "merge", "pull_number": 3 }));
        for (k, v) in extra.as_object().unwrap() {
            call[k] = v.clone();
        }
        forge.effect("pull_request_write", call)
    };
    let e = merge(json!({}));
    assert!(breaches(&e, "merger").is_empty(), "a merge onto the base is the workflow's: {e:?}");
    assert_eq!(e.action, Some(ACTION_MERGE));
    assert_eq!(breaches(&merge(json!({ "force_merge": true })), "merger"), [Invariant::ForcedMerge]);
    assert_eq!(breaches(&merge(json!({ "merge_when_checks_succeed": true })), "merger"), [Invariant::ScheduledMerge]);
    // Deleting its head branch: the PR stacked on it is retargeted, the other PR of that
    // head closed.
    let e = merge(json!({ "delete_branch": true }));
    let changes: Vec<(u64, &PrChange)> = e.prs.iter().map(|p| (p.pr, &p.change)).collect();
    assert!(changes.contains(&(4, &PrChange::RetargetedWithBranch { branch: "feat".into() })), "{changes:?}");
    assert!(changes.contains(&(5, &PrChange::ClosedWithBranch { branch: "feat".into() })), "{changes:?}");
    assert_eq!(breaches(&e, "merger"), [Invariant::Retarget, Invariant::PrState]);
    // A server whose merge declares no head pin cannot be pinned.
    let schema = args(json!({ "properties": { "method": {}, "pull_number": {}, "owner": {}, "repo": {} } }));
    let call = with_repo(json!({ "method": "merge", "pull_number": 3 }));
    let e = forge.effect_with("pull_request_write", call, Some(&schema));
    assert_eq!(breaches(&e, "merger"), [Invariant::UnpinnedMerge]);
}

#[test]
fn deleting_a_branch_closes_and_retargets_the_prs_it_heads_or_bases() {
    let forge =
        Forge { open: vec![(4, "feat", "Org/Repo", "main"), (6, "child", "Org/Repo", "feat")], ..Forge::default() };
    let e = forge.effect("delete_branch", with_repo(json!({ "branch": "feat" })));
    assert_eq!(breaches(&e, "merger"), [Invariant::Retarget, Invariant::PrState]);
    assert_eq!(breaches(&e, "controller"), [Invariant::Retarget], "the controller may close, no one retargets");
    let none = forge.effect("delete_branch", with_repo(json!({ "branch": "other" })));
    assert!(breaches(&none, "merger").is_empty(), "{none:?}");
    // A repository with forks cannot show which of their PRs pull from the branch.
    let forked = Forge { forks: 2, ..Forge::default() };
    let e = forked.effect("delete_branch", with_repo(json!({ "branch": "feat" })));
    assert!(e.unestablished[0].contains("2 fork(s)"), "{e:?}");
    // A fork's parent holds the PRs its branches head: read them, and each candidate's head.
    let fork = Forge {
        fork_of: Some("up/repo"),
        parent_open: vec![(9, "feat", "org/repo", "main"), (10, "feat", "someone/repo", "main")],
        ..Forge::default()
    };
    let e = fork.effect("delete_branch", with_repo(json!({ "branch": "feat" })));
    let closed: Vec<(String, u64)> = e.prs.iter().map(|p| (p.repo.0.clone(), p.pr)).collect();
    assert_eq!(closed, [("up/repo".to_owned(), 9)], "only the parent's PR whose head lives here");
    let orphan = Forge { fork_of: None, ..Forge::default() };
    let mut entry = orphan.answer(&repo_read("Repo", &Unlisted).unwrap()).unwrap();
    entry[0]["fork"] = json!(true);
    let facts = repo_facts(&entry, "Org", "Repo").unwrap();
    assert!(facts.fork && facts.parent.is_none());
}

#[test]
fn a_full_listing_is_read_page_by_page_and_never_taken_for_all() {
    struct Endless;
    let call = args(with_repo(json!({ "branch": "feat" })));
    let mut answers: Vec<Answered> = Vec::new();
    let effect = loop {
        match GITEA.establish("delete_branch", &call, None, &Unlisted, &answers) {
            Ok(e) => break e,
            Err(reads) => {
                for read in reads {
                    let a = match read.tool.as_str() {
                        "search_repos" => Ok(json!([{ "full_name": "Org/Repo", "default_branch": "main" }])),
                        _ => Ok(Value::Array(
                            (0..OPEN_PR_PAGE).map(|n| json!({ "number": n, "head": "x", "base": "y" })).collect(),
                        )),
                    };
                    answers.push((read, a));
                }
            }
        }
    };
    let _ = Endless;
    assert!(effect.unestablished[0].contains("more than"), "{effect:?}");
    let pages = answers.iter().filter(|(r, _)| r.tool == "list_pull_requests").count() as u64;
    assert_eq!(pages, OPEN_PR_PAGES);
}

#[test]
fn an_issue_update_on_a_pr_s_number_is_a_pr_update() {
    let forge = Forge { open: vec![(4, "feat", "Org/Repo", "main")], ..Forge::default() };
    let close =
        forge.effect("issue_write", with_repo(json!({ "method": "update", "issue_number": 4, "state": "closed" })));
    assert_eq!(breaches(&close, "author"), [Invariant::PrState]);
    assert!(breaches(&close, "controller").is_empty());
    assert_eq!(close.action, Some(ACTION_CLOSE));
    let edit =
        forge.effect("issue_write", with_repo(json!({ "method": "update", "issue_number": 4, "body": "Closes #1" })));
    assert_eq!(edit.action, Some(ACTION_EDIT), "the workflow judges the issues it references");
    // An issue's number: an issue update like any other.
    let issue =
        forge.effect("issue_write", with_repo(json!({ "method": "update", "issue_number": 12, "state": "closed" })));
    assert!(issue.prs.is_empty() && issue.action.is_none(), "{issue:?}");
    let down = Forge { failing: vec!["pull_request_read"], ..Forge::default() };
    let e = down.effect("issue_write", with_repo(json!({ "method": "update", "issue_number": 4, "state": "closed" })));
    assert!(!e.unestablished.is_empty());
    let labels =
        forge.effect("issue_write", with_repo(json!({ "method": "update", "issue_number": 4, "milestone": 2 })));
    assert!(labels.prs.is_empty() && labels.unestablished.is_empty());
}

#[test]
fn a_pr_update_states_its_retarget_and_its_state_change() {
    let forge = Forge::default();
    let e =
        forge.effect("pull_request_write", with_repo(json!({ "method": "update", "pull_number": 2, "base": "main" })));
    assert_eq!(breaches(&e, "controller"), [Invariant::Retarget]);
    let e = forge
        .effect("pull_request_write", with_repo(json!({ "method": "update", "pull_number": 2, "state": "closed" })));
    assert_eq!(breaches(&e, "author"), [Invariant::PrState]);
    let e = forge.effect("pull_request_write", with_repo(json!({ "method": "close", "pull_number": 2 })));
    assert_eq!(breaches(&e, "merger"), [Invariant::PrState]);
    assert!(breaches(&e, "reconciler").is_empty());
    let e =
        forge.effect("pull_request_write", with_repo(json!({ "method": "update", "pull_number": 2, "title": "t" })));
    assert!(breaches(&e, "author").is_empty() && e.action == Some(ACTION_EDIT));
}

#[test]
fn readers_that_write_files_and_calls_the_dialect_does_not_know() {
    let forge = Forge::default();
    for (tool, method) in DOWNLOADS.iter().map(|(t, m, _)| (*t, *m)) {
        let e = forge.effect(tool, with_repo(json!({ "method": method })));
        assert_eq!(breaches(&e, "author"), [Invariant::ReaderWrites], "{tool} {method}: without output_path too");
    }
    let e = forge.effect("pull_request_read", with_repo(json!({ "method": "get", "output_path": "/tmp/x" })));
    assert_eq!(breaches(&e, "reviewer"), [Invariant::ReaderWrites]);
    assert!(forge.effect("pull_request_read", with_repo(json!({ "method": "get_diff" }))).is_read());
    assert!(forge.effect("list_branches", with_repo(json!({}))).is_read());
    for (tool, call) in [
        ("pull_request_write", json!({ "method": "merge_now", "pull_number": 1 })),
        ("pull_request_read", json!({ "method": "rewrite" })),
        ("merge_pull_request", json!({ "index": 1 })),
        ("issue_write", json!({})),
    ] {
        let e = forge.effect(tool, with_repo(call));
        assert_eq!(breaches(&e, "merger"), [Invariant::UnknownEffect], "{tool}: {e:?}");
    }
    // Known writes no invariant guards.
    for (tool, method) in [("label_write", "create_repo_label"), ("create_release", ""), ("issue_write", "add_comment")]
    {
        let call = if method.is_empty() { json!({}) } else { json!({ "method": method }) };
        let e = forge.effect(tool, with_repo(call));
        assert!(breaches(&e, "controller").is_empty() && !e.is_read(), "{tool}");
    }
}

#[test]
fn every_reader_and_write_of_the_server_has_a_statement() {
    let forge = Forge { open: vec![(1, "feat", "Org/Repo", "dev")], ..Forge::default() };
    for (tool, methods) in READERS.iter().chain(PLAIN_WRITES) {
        let calls: Vec<Value> =
            if methods.is_empty() { vec![json!({})] } else { methods.iter().map(|m| json!({ "method": m })).collect() };
        for call in calls {
            let mut call = with_repo(call);
            call["pull_number"] = json!(1);
            let e = forge.effect(tool, call);
            assert!(e.unknown.is_none() && e.unestablished.is_empty(), "{tool}: {e:?}");
        }
    }
    for m in REVIEW_METHODS {
        let e = forge.effect("pull_request_review_write", with_repo(json!({ "method": m, "pull_number": 1 })));
        assert_eq!(e.action, Some(ACTION_REVIEW), "{m}");
    }
}

#[test]
fn the_reference_page_lists_every_stated_call_once_and_only_those() {
    let page = GITEA.reference();
    let forge = Forge { open: vec![(1, "feat", "Org/Repo", "dev")], ..Forge::default() };
    for s in STATED {
        let mut call = if s.method.is_empty() { json!({}) } else { json!({ "method": s.method }) };
        call["pull_number"] = json!(1);
        call["issue_number"] = json!(1);
        call["branch"] = json!("feat");
        let e = forge.effect(s.tool, with_repo(call));
        assert!(e.unknown.is_none(), "{} {}: {e:?}", s.tool, s.method);
        let method = if s.method.is_empty() { "—".to_owned() } else { format!("`{}`", s.method) };
        let needle = format!("| `{}` | {method} |", s.tool);
        let stated = page.split("## Texts the forge acts on").next().unwrap_or_default();
        assert_eq!(stated.matches(&needle).count(), 1, "{needle}");
    }
    for (tool, methods) in READERS.iter().chain(PLAIN_WRITES) {
        for m in methods.iter() {
            assert_eq!(page.matches(&format!("| `{tool}` | `{m}` |")).count(), 1, "{tool} {m}");
        }
    }
    // Each call whose texts the forge acts on is listed once more, in the texts' table.
    let (_, texts) = page.split_once("## Texts the forge acts on").expect("the texts' table");
    for t in TEXTS {
        let method = if t.method.is_empty() { "—".to_owned() } else { format!("`{}`", t.method) };
        assert_eq!(texts.matches(&format!("| `{}` | {method} |", t.tool)).count(), 1, "{} {}", t.tool, t.method);
    }
    assert!(page.contains("| `pull_request_write` | `merge` |") && page.contains("`scheduled-merge`"));
    assert!(!page.contains("frobnicate"));
}

mod protected {
    //! A file write lands, as the server and Gitea read it, on `new_branch_name`, else
    //! `branch_name`, else the default branch: no write the invariants let through lands on a
    //! protected branch or path.
    use super::*;
    use proptest::prelude::*;

    fn branch() -> impl Strategy<Value = Option<&'static str>> {
        prop::sample::select(vec![
            None,
            Some(""),
            Some("main"),
            Some("refs/heads/main"),
            Some("release/2"),
            Some("feat"),
        ])
    }

    proptest! {
        #[test]
        fn no_allowed_write_lands_on_a_protected_branch_or_path(
            tool in prop::sample::select(vec!["create_or_update_file", "delete_file"]),
            branch_name in branch(),
            new_branch_name in branch(),
            path in prop::sample::select(vec!["src/a.rs", ".gitea/workflows/x.yml", "./.github/workflows/y", "a/../.forgejo/workflows/z", "docs/../README"]),
        ) {
            let p = Protection { branches: vec!["release/*".into()], ..Protection::default() };
            let mut args = Map::new();
            for (key, value) in [("branch_name", branch_name), ("new_branch_name", new_branch_name)] {
                if let Some(v) = value {
                    args.insert(key.into(), Value::from(v));
                }
            }
            args.insert("path".into(), Value::from(path));
            let call = with_repo(Value::Object(args.clone()));
            let effect = Forge::default().effect(tool, call);
            if crate::effect::judge(&effect, "author", &p, &[]).breaches.is_empty() {
                let named = |k: &str| args.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
                let target = named("new_branch_name").or_else(|| named("branch_name")).unwrap_or("main");
                prop_assert!(p.branch_rule(target).is_none(), "{tool} {args:?} lands on {target}");
                prop_assert!(p.path_rule(path).is_none(), "{tool} {args:?} writes {path}");
            }
        }
    }
}

fn issue_breaches(effect: &Effect, role: &str) -> Vec<String> {
    judge(effect, role, &Protection::default(), &[])
        .breaches
        .into_iter()
        .filter(|b| b.invariant == Invariant::IssueState)
        .map(|b| b.reason)
        .collect()
}

/// Text the forge acts on later is part of the effect: a commit message's keyword, a PR's
/// texts, a comment on a PR, a review's, an issue's `ref`, a merge's message — each judged
/// for the role that lands it.
#[test]
fn texts_the_forge_acts_on_are_stated_and_judged_for_the_role_that_lands_them() {
    let forge = Forge { open: vec![(3, "feat", "Org/Repo", "main")], body: "Fixes #2", ..Forge::default() };
    // A commit message: the forge closes the issue when the commit lands on the default
    // branch (or the issue's ref): no role but the state roles writes one, with `!` too.
    let write = |message: &str| {
        let call = json!({ "path": "a", "branch_name": "feat", "message": message });
        forge.effect("create_or_update_file", with_repo(call))
    };
    let e = write("Fixes !7");
    assert_eq!(e.issues[0].issue, 7);
    assert_eq!(breaches(&e, "author"), [Invariant::IssueState], "{e:?}");
    assert!(issue_breaches(&e, "author")[0].contains("Fixes !7"));
    assert!(breaches(&write("cloſes other/repo#7"), "author") == [Invariant::IssueState], "another repository's");
    assert!(breaches(&write("Refs #7, see #8"), "author").is_empty(), "a mention closes nothing");
    // A PR's body: the author names what its merge closes (the issue lock judges it).
    let open = json!({ "method": "create", "title": "t", "body": "Closes Org/Repo#2", "head": "feat", "base": "main" });
    let e = forge.effect("pull_request_write", with_repo(open));
    assert!(matches!(&e.issues[0].change, IssueChange::ByText { when: When::AtMerge { pr: None }, .. }), "{e:?}");
    assert!(breaches(&e, "author").is_empty());
    // A comment on a PR and a review's comment: not the reviewer's to close with.
    let comment = json!({ "method": "add_comment", "issue_number": 3, "body": "fixes #2" });
    assert_eq!(breaches(&forge.effect("issue_write", with_repo(comment)), "reviewer"), [Invariant::IssueState]);
    let on_issue = json!({ "method": "add_comment", "issue_number": 9, "body": "fixes #2" });
    assert!(forge.effect("issue_write", with_repo(on_issue)).issues.is_empty(), "an issue's comments close nothing");
    let review = json!({ "method": "create", "pull_number": 3, "state": "COMMENT", "body": "ok",
                         "comments": [{ "path": "a", "body": "Resolves #2", "new_line_num": 1 }] });
    assert_eq!(
        breaches(&forge.effect("pull_request_review_write", with_repo(review)), "reviewer"),
        [Invariant::IssueState]
    );
    // An issue's `ref`, and its state, are the state roles'.
    let reference = json!({ "method": "update", "issue_number": 9, "ref": "feat" });
    let e = forge.effect("issue_write", with_repo(reference));
    assert_eq!(breaches(&e, "author"), [Invariant::IssueState]);
    assert!(breaches(&e, "controller").is_empty());
    let close = json!({ "method": "update", "issue_number": 9, "state": "closed" });
    assert_eq!(breaches(&forge.effect("issue_write", with_repo(close)), "author"), [Invariant::IssueState]);
    // A merge closes what its PR names; its own message no more.
    let merge = |message: &str| {
        forge
            .effect("pull_request_write", with_repo(json!({ "method": "merge", "pull_number": 3, "message": message })))
    };
    let e = merge("Closes #2");
    assert!(breaches(&e, "merger").is_empty(), "{e:?}");
    assert!(e.issues.iter().any(|i| i.issue == 2), "the PR's body closes #2 at the merge: {e:?}");
    let e = merge("Closes #5");
    assert_eq!(breaches(&e, "merger"), [Invariant::IssueState]);
    assert!(issue_breaches(&e, "merger")[0].contains("do not name"), "{:?}", issue_breaches(&e, "merger"));
}

/// A comment that names no issue is a plain write, stated without asking the forge; the
/// sequence a reviewer would try next — write it plain, then edit the keyword in — is judged
/// at the edit, as a PR's comment, whatever number the first call named.
#[test]
fn a_plain_comment_edited_to_close_an_issue_is_judged_at_the_edit() {
    let forge = Forge { open: vec![(3, "feat", "Org/Repo", "main")], ..Forge::default() };
    let plain = json!({ "method": "add_comment", "issue_number": 3, "body": "looks good" });
    assert!(forge.effect("issue_write", with_repo(plain)).issues.is_empty());
    let edited = json!({ "method": "edit_comment", "commentID": 41, "body": "looks good, fixes #2" });
    let e = forge.effect("issue_write", with_repo(edited));
    assert!(matches!(&e.issues[0].change, IssueChange::ByText { when: When::AtMerge { pr: None }, .. }), "{e:?}");
    assert_eq!(breaches(&e, "reviewer"), [Invariant::IssueState]);
}

/// The comments on a PR are its texts too: a merge reads them, and what they close is the
/// merge's (named by the PR).
#[test]
fn a_merge_reads_the_pr_s_comments() {
    let forge = Forge { open: vec![(3, "feat", "Org/Repo", "main")], comments: vec!["fixes !6"], ..Forge::default() };
    let e = forge.effect("pull_request_write", with_repo(json!({ "method": "merge", "pull_number": 3 })));
    let six = e.issues.iter().find(|i| i.issue == 6).expect("#6 closes at the merge");
    assert!(matches!(&six.change, IssueChange::ByText { named_by_pr: true, .. }), "{six:?}");
    let down = Forge { failing: vec!["issue_read"], ..forge };
    let e = down.effect("pull_request_write", with_repo(json!({ "method": "merge", "pull_number": 3 })));
    assert!(e.unestablished[0].contains("issue_read"), "{e:?}");
}

/// A merge's `delete_branch` deletes its head where the head lives: in a fork, the fork's
/// branch goes, and the fork's PRs based on it move — judged like a deletion here.
#[test]
fn a_merge_deleting_a_fork_head_is_judged_like_a_deletion_here() {
    let forge = Forge {
        open: vec![(3, "release/2", "alice/repo", "main")],
        fork_open: vec![(1, "child", "alice/repo", "release/2")],
        ..Forge::default()
    };
    let merge = json!({ "method": "merge", "pull_number": 3, "delete_branch": true });
    let e = forge.effect("pull_request_write", with_repo(merge));
    let deleted = e.branches.iter().find(|b| b.how == Move::Delete).expect("the head is deleted");
    assert_eq!((deleted.repo.0.as_str(), deleted.branch.as_str()), ("alice/repo", "release/2"));
    let moved = e.prs.iter().find(|p| p.repo.0 == "alice/repo").expect("the fork's PR");
    assert_eq!(moved.change, PrChange::RetargetedWithBranch { branch: "release/2".into() });
    let p = Protection { branches: vec!["release/*".into()], ..Protection::default() };
    let found: Vec<Invariant> = judge(&e, "merger", &p, &[]).breaches.into_iter().map(|b| b.invariant).collect();
    assert_eq!(found, [Invariant::ProtectedBranch, Invariant::Retarget], "{e:?}");
    // Without the fork's PRs to read, it is refused (never blind).
    let down = Forge { failing: vec!["list_pull_requests"], ..forge };
    let e = down
        .effect("pull_request_write", with_repo(json!({ "method": "merge", "pull_number": 3, "delete_branch": true })));
    assert!(!e.unestablished.is_empty(), "{e:?}");
}

/// What a commit message closes shows in its arguments alone: replay judges it.
#[test]
fn a_commit_message_s_keywords_are_evident_without_a_read() {
    let call = args(with_repo(json!({ "path": "a", "branch_name": "feat", "message": "Fixes !4" })));
    let e = GITEA.evident("create_or_update_file", &call, None);
    assert_eq!(breaches(&e, "author"), [Invariant::IssueState], "{e:?}");
}
