//! gitea-mcp's calls, each stated by what it does to the forge ([`crate::effect::Effect`]),
//! read as the server and Gitea read them (`crates/testkit/src/forge/GITEA_MCP.md`):
//!
//! * a file write commits to `new_branch_name` (made from `branch_name`) when given, else to
//!   `branch_name`, else to the repository's default branch — read from the forge;
//! * `pull_request_write update_branch` merges the PR's base into its **head** branch, which
//!   may be any branch (the default one included): the head is read from the forge;
//! * a merge lands the PR's head on its base (the workflow's one way onto a protected
//!   branch); with `delete_branch` it deletes the head branch, and Gitea then closes every
//!   other open PR that branch heads and retargets (or closes) every PR based on it;
//! * deleting a branch closes every open PR it heads — in its own repository and, when the
//!   repository is a fork, in the parent — or bases;
//! * PRs are issues: `issue_write update` with a `state` on a PR's number closes or reopens
//!   the PR, with a title or body edits it (read: is the number a PR?);
//! * the downloads of `actions_run_read` and `attachment_read` write a file on the server's
//!   host, at `output_path` or under `~/.gitea-mcp/` when none is given.
//!
//! [`establish`] is pure: it names the reads it still needs (`Err`) until every answer is
//! at hand, then states the effect. A read that failed, or a listing that may be cut short,
//! leaves the effect unestablished (the gate refuses).

use super::{MERGE_HEAD_KEY, PAGE_SIZE, REPO_QUERY};

/// gitea-mcp's merge style argument (`merge`, `rebase`, `rebase-merge`, `squash`,
/// `fast-forward-only`; the server's default `merge`).
const MERGE_STYLE: &str = "merge_style";
use super::GITEA;
use crate::dialect::kit::{
    Call, Cx, Pending, Step, declared, flag, head_branch, listed, repo_or, strip, unknown_method, unknown_tool,
};
use crate::dialect::{
    ACTION_CLOSE, ACTION_EDIT, ACTION_MERGE, ACTION_OPEN, ACTION_PUSH, ACTION_REVIEW, Dialect, DialectError, Schemas,
    declared_key, kit, merge_issues, pr_texts, text, text_effects,
};
use crate::effect::{
    BranchMove, Effect, IssueChange, IssueEffect, Kind, MergeTerms, Move, PathWrite, PrChange, PrEffect, Read, Repo,
    When,
};
use crate::textref::Grammar;
use serde_json::{Map, Value};

/// The readers the server has, each with its `method` values (empty: none).
pub const READERS: &[(&str, &[&str])] = &[
    ("get_gitea_mcp_server_version", &[]),
    ("get_me", &[]),
    ("get_user_orgs", &[]),
    ("search_users", &[]),
    ("search_org_teams", &[]),
    ("search_repos", &[]),
    ("search_issues", &[]),
    ("list_issues", &[]),
    ("list_pull_requests", &[]),
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
    (
        "pull_request_read",
        &["get", "get_diff", "get_files", "get_status", "get_reviews", "get_review", "get_review_comments"],
    ),
    ("issue_read", &["get", "get_comments", "get_labels"]),
    ("label_read", &["list_repo_labels", "get_repo_label", "list_org_labels"]),
    ("milestone_read", &["get", "list"]),
    ("notification_read", &["list", "get"]),
    ("wiki_read", &["list", "get", "get_revisions"]),
    ("timetracking_read", &["list_issue_times", "list_repo_times", "get_my_stopwatches", "get_my_times"]),
    ("package_read", &["list", "list_versions", "get"]),
    (
        "actions_config_read",
        &[
            "list_repo_secrets",
            "list_org_secrets",
            "list_repo_variables",
            "get_repo_variable",
            "list_org_variables",
            "get_org_variable",
        ],
    ),
    (
        "actions_run_read",
        &[
            "list_workflows",
            "get_workflow",
            "list_runs",
            "get_run",
            "list_jobs",
            "list_run_jobs",
            "get_job",
            "get_job_log_preview",
            "list_artifacts",
            "list_run_artifacts",
            "get_artifact",
        ],
    ),
    ("attachment_read", &["list", "get"]),
];

/// Reader methods that write the file they fetch on the server's host, and where the server
/// puts it when no `output_path` is given.
pub const DOWNLOADS: &[(&str, &str, &str)] = &[
    ("actions_run_read", "download_job_log", "~/.gitea-mcp/artifacts/actions-logs/<owner>/<repo>/<job_id>.log"),
    ("actions_run_read", "download_artifact", "~/.gitea-mcp/artifacts/actions-artifacts/<owner>/<repo>/<name>.zip"),
    ("attachment_read", "download", "~/.gitea-mcp/attachments/<owner>/<repo>/…"),
];

/// The methods of `label_write` (the controller's tracker).
pub const LABEL_WRITE_METHODS: &[&str] = &[
    "create_repo_label",
    "edit_repo_label",
    "delete_repo_label",
    "create_org_label",
    "edit_org_label",
    "delete_org_label",
];

/// Writes whose effect no invariant guards (labels, comments, milestones, the wiki, Actions'
/// settings and runs, repositories, tags, releases): `[[rules]]` decide who makes them.
/// `""`: the tool has no `method`.
pub const PLAIN_WRITES: &[(&str, &[&str])] = &[
    ("issue_write", &["add_labels", "remove_label", "replace_labels", "clear_labels"]),
    ("pull_request_write", &["add_reviewers", "remove_reviewers"]),
    ("label_write", LABEL_WRITE_METHODS),
    ("milestone_write", &["create", "update", "edit", "delete"]),
    ("notification_write", &["mark_read", "mark_all_read"]),
    ("wiki_write", &["create", "update", "delete"]),
    ("timetracking_write", &["start_stopwatch", "stop_stopwatch", "delete_stopwatch", "add_time", "delete_time"]),
    ("package_write", &["delete"]),
    (
        "actions_config_write",
        &[
            "upsert_repo_secret",
            "delete_repo_secret",
            "upsert_org_secret",
            "delete_org_secret",
            "create_repo_variable",
            "update_repo_variable",
            "delete_repo_variable",
            "create_org_variable",
            "update_org_variable",
            "delete_org_variable",
        ],
    ),
    ("actions_run_write", &["dispatch_workflow", "cancel_run", "rerun_run"]),
    ("create_repo", &[]),
    ("fork_repo", &[]),
    ("create_tag", &[]),
    ("delete_tag", &[]),
    ("create_release", &[]),
    ("delete_release", &[]),
];

/// The methods of `pull_request_review_write`: every one is the reviewer's workflow action.
pub const REVIEW_METHODS: &[&str] =
    &["create", "submit", "delete", "dismiss", "reply_comment", "resolve_thread", "unresolve_thread"];

/// How many open PRs one read of `list_pull_requests` asks for.
pub const OPEN_PR_PAGE: u64 = 50;
/// How many pages of open PRs are read before the listing counts as cut short.
pub const OPEN_PR_PAGES: u64 = 20;

/// The number a call names under `keys` (the go-sdk generation's, then the v1.0 line's).
fn number(args: &Map<String, Value>, keys: &[&str]) -> Option<u64> {
    keys.iter().find_map(|k| args.get(*k).and_then(Value::as_u64))
}

/// The repository read: `search_repos` by name (the go-sdk server's `query`, the v1.0 line's
/// `keyword`: whichever the running server declares).
pub fn repo_read(repo: &str, schemas: &dyn Schemas) -> Result<Read, DialectError> {
    let mut args = Map::new();
    args.insert(declared_key(schemas, "search_repos", &REPO_QUERY)?.into(), Value::from(repo));
    Ok(Read::new("search_repos", args))
}

/// One page of a repository's open PRs (the page size under the name the running server
/// declares: `per_page`, `perPage` or `pageSize`).
pub fn open_prs_read(owner: &str, repo: &str, page: u64, schemas: &dyn Schemas) -> Result<Read, DialectError> {
    let mut read = kit::read_on("list_pull_requests", None, owner, repo);
    read.arguments.insert("state".into(), Value::from("open"));
    read.arguments.insert("page".into(), Value::from(page));
    read.arguments.insert(declared_key(schemas, "list_pull_requests", &PAGE_SIZE)?.into(), Value::from(OPEN_PR_PAGE));
    Ok(read)
}

/// What the forge says of a repository.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepoFacts {
    /// Its default branch.
    pub default_branch: String,
    /// The repository it is a fork of (`owner/name`), when it is one and the answer names it.
    pub parent: Option<String>,
    /// It is a fork.
    pub fork: bool,
    /// How many forks it has.
    pub forks: u64,
}

/// `search_repos`' entry for `owner/repo` (any case).
pub fn repo_facts(answer: &Value, owner: &str, repo: &str) -> Result<RepoFacts, DialectError> {
    let entries = answer.as_array().or_else(|| answer.get("data").and_then(Value::as_array));
    let entries = entries.ok_or_else(|| DialectError::Answer("`search_repos` answered no list".into()))?;
    let entry = kit::repo_entry(entries, "search_repos", owner, repo)?;
    let default_branch = kit::default_branch_of(entry, "search_repos", owner, repo)?;
    let fork = entry.get("fork").and_then(Value::as_bool).unwrap_or(false);
    let parent = entry.pointer("/parent/full_name").and_then(Value::as_str).filter(|p| !p.is_empty());
    let forks = entry.get("forks_count").and_then(Value::as_u64).unwrap_or(0);
    Ok(RepoFacts { default_branch, parent: parent.map(str::to_owned), fork, forks })
}

/// An open PR as a listing names it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Listed {
    number: u64,
    head: Option<String>,
    head_repo: Option<String>,
    base: Option<String>,
}

fn ref_name(v: Option<&Value>) -> Option<String> {
    let v = v?;
    v.as_str().or_else(|| v.get("ref").and_then(Value::as_str)).map(|s| strip(s).to_owned())
}

fn listed_pr(entry: &Value) -> Listed {
    Listed {
        number: entry.get("number").and_then(Value::as_u64).unwrap_or_default(),
        head: ref_name(entry.get("head")),
        head_repo: entry.pointer("/head/repo/full_name").and_then(Value::as_str).map(str::to_lowercase),
        base: ref_name(entry.get("base")),
    }
}

/// The repository `owner/repo` as the forge reports it.
fn repository(cx: Cx<'_>, owner: &str, repo: &str) -> Step<RepoFacts> {
    Ok(repo_facts(cx.ask(repo_read(repo, cx.schemas)?)?, owner, repo)?)
}

/// Every open PR of `owner/repo`, page by page; cut short past [`OPEN_PR_PAGES`].
fn open_prs(cx: Cx<'_>, owner: &str, repo: &str) -> Step<Vec<Listed>> {
    let mut all = Vec::new();
    for page in 1..=OPEN_PR_PAGES {
        let v = cx.ask(open_prs_read(owner, repo, page, cx.schemas)?)?;
        let prs = v.as_array().ok_or_else(|| Pending::Failed("`list_pull_requests` answered no list".into()))?;
        all.extend(prs.iter().map(listed_pr));
        if (prs.len() as u64) < OPEN_PR_PAGE {
            return Ok(all);
        }
    }
    Err(Pending::Failed(format!(
        "more than {} open PRs in {owner}/{repo}: the listing cannot show they are all read",
        OPEN_PR_PAGE * OPEN_PR_PAGES
    )))
}

/// The PRs a deletion of `branch` of `owner/name` closes (those it heads, here and in the
/// parent of a fork) or retargets (those based on it) — except `except`, the PR being
/// merged (its repository and number). A repository with forks, or a fork whose parent
/// neither the forge nor the caller (`parent`: a merged PR's base repository, which its
/// fork head's repository is a fork of) names, cannot show them all: unestablished.
fn closed_with(
    cx: Cx<'_>,
    (owner, name): (&str, &str),
    branch: &str,
    except: Option<(&Repo, u64)>,
    parent: Option<&Repo>,
) -> Step<Vec<PrEffect>> {
    let here = Repo::new(owner, name);
    let mut facts = repository(cx, owner, name)?;
    if facts.parent.is_none() {
        facts.parent = parent.map(|p| p.0.clone());
    }
    let skip = |repo: &Repo, n: u64| except.is_some_and(|(r, e)| r == repo && e == n);
    // Gitea closes the open PRs a deleted branch heads in every repository (1.24 and later:
    // a fork's PRs may pull from its parent), and no read of gitea-mcp lists a repository's
    // forks, nor a fork's parent when `search_repos` does not name it.
    if facts.forks > 0 {
        return Err(Pending::Failed(format!(
            "{owner}/{name} has {} fork(s): a PR in a fork may pull from `{branch}`, and Gitea would close it; the \
             server offers no read of a repository's forks",
            facts.forks
        )));
    }
    if facts.fork && facts.parent.is_none() {
        return Err(Pending::Failed(format!(
            "{owner}/{name} is a fork and the forge does not name its parent: a PR of the parent may pull from \
             `{branch}`, and Gitea would close it"
        )));
    }
    let mut found = Vec::new();
    for pr in open_prs(cx, owner, name)? {
        if skip(&here, pr.number) {
            continue;
        }
        let heads = pr.head.as_deref() == Some(branch) && pr.head_repo.as_ref().is_none_or(|r| *r == here.0);
        let bases = pr.base.as_deref() == Some(branch);
        // Gitea 1.24 and later move the PRs based on a deleted branch to the default branch
        // (`RETARGET_CHILDREN_ON_MERGE`, on by default), earlier ones close them: a retarget
        // either way, or a close.
        let change = if heads {
            PrChange::ClosedWithBranch { branch: branch.to_owned() }
        } else if bases {
            PrChange::RetargetedWithBranch { branch: branch.to_owned() }
        } else {
            continue;
        };
        found.push(PrEffect { repo: here.clone(), pr: pr.number, change });
    }
    if let Some(parent) = facts.parent {
        let (p_owner, p_name) =
            parent.split_once('/').ok_or_else(|| Pending::Failed(format!("parent {parent:?} is not owner/name")))?;
        for pr in open_prs(cx, p_owner, p_name)? {
            // A PR of the parent is this branch's only when its head lives here; the listing
            // names the head branch alone, so the PR itself says where it lives.
            if pr.head.as_deref() != Some(branch) || skip(&Repo::full(&parent), pr.number) {
                continue;
            }
            let facts = cx.pr(&GITEA, p_owner, p_name, pr.number)?;
            if facts.head_repo.as_deref().is_none_or(|h| Repo::full(h) == here) {
                let change = PrChange::ClosedWithBranch { branch: branch.to_owned() };
                found.push(PrEffect { repo: Repo::full(&parent), pr: pr.number, change });
            }
        }
    }
    Ok(found)
}

/// The statement of `call` (its canonical arguments and listed schema), given the forge's
/// answers so far in `cx`: `Err` names the reads still to make, or why the effect cannot be
/// established.
pub(super) fn state(call: &Call<'_>, cx: Cx<'_>) -> Step<Effect> {
    let (tool, args, method) = (call.tool, call.args, call.method());
    if let Some(effect) = reader(tool, method, args) {
        return Ok(effect);
    }
    if let Some((_, methods)) = PLAIN_WRITES.iter().find(|(t, _)| *t == tool) {
        // `issue_write update` and the PR tools are stated below; the rest plainly write.
        if methods.is_empty() || method.is_some_and(|m| methods.contains(&m)) {
            return Ok(Effect::write());
        }
    }
    let (owner, repo) = call.owner_repo();
    let here = call.here();
    match tool {
        "pull_request_review_write" => match method {
            Some(m) if REVIEW_METHODS.contains(&m) => Ok(review(args, cx, &here)),
            m => Ok(Effect::unknown(unknown_method(tool, m))),
        },
        "pull_request_write" => pull_request_write(method, args, call.schema, cx, (owner, repo)),
        "issue_write" if method == Some("update") => issue_update(args, cx, (owner, repo)),
        "issue_write" if method == Some("create") => {
            // An issue's texts close nothing (only a PR's do); its `ref` chooses the branch
            // whose commits will.
            let issues = text(args, "ref").map(|b| IssueEffect {
                repo: here,
                issue: 0,
                change: IssueChange::Ref { branch: strip(b).to_owned() },
            });
            Ok(Effect { issues: issues.into_iter().collect(), ..Effect::write() })
        }
        "issue_write" if matches!(method, Some("add_comment" | "edit_comment")) => {
            comment(method, args, cx, (owner, repo))
        }
        "create_or_update_file" | "delete_file" => file_write(args, cx, (owner, repo)),
        "create_branch" | "rename_branch" | "delete_branch" => branch_tool(tool, args, cx, (owner, repo)),
        _ => Ok(Effect::unknown(unknown_tool(super::NAME, tool, method))),
    }
}

/// A reader's statement (`None`: `tool` is no reader). A reader's download writes a file on
/// the server's host, whatever its name says; and so does any reader given `output_path`.
fn reader(tool: &str, method: Option<&str>, args: &Map<String, Value>) -> Option<Effect> {
    if tool.ends_with("_read") {
        let mut host = Vec::new();
        if let Some(path) = text(args, "output_path") {
            host.push(path.to_owned());
        }
        if let Some((_, _, default)) = DOWNLOADS.iter().find(|(t, m, _)| *t == tool && Some(*m) == method)
            && host.is_empty()
        {
            host.push(format!("{default} (the server's default path)"));
        }
        if !host.is_empty() {
            return Some(Effect { kind: Kind::Write, host_files: host, ..Effect::default() });
        }
    }
    listed(READERS, tool, method)
        .map(|known| if known { Effect::read() } else { Effect::unknown(unknown_method(tool, method)) })
}

/// A review action: its body, its comments and replies are texts on the PR, whose
/// cross-references Gitea records, resolved when the PR merges.
fn review(args: &Map<String, Value>, cx: Cx<'_>, here: &Repo) -> Effect {
    let when = When::AtMerge { pr: number(args, &["pull_number", "index"]) };
    let mut issues = Vec::new();
    for key in ["body", "message"] {
        if let Some(t) = text(args, key) {
            issues.extend(text_effects(cx.grammar, here, &format!("review {key}"), t, &when, None));
        }
    }
    for c in args.get("comments").and_then(Value::as_array).into_iter().flatten() {
        if let Some(t) = c.get("body").and_then(Value::as_str) {
            issues.extend(text_effects(cx.grammar, here, "review comment", t, &when, None));
        }
    }
    Effect { issues, ..Effect::action(ACTION_REVIEW) }
}

/// `create_or_update_file`, `delete_file`: a commit to `new_branch_name` (made from
/// `branch_name`), else `branch_name`, else the default branch.
fn file_write(args: &Map<String, Value>, cx: Cx<'_>, (owner, repo): (&str, &str)) -> Step<Effect> {
    let here = Repo::new(owner, repo);
    let facts = repository(cx, owner, repo)?;
    let named = text(args, "new_branch_name").or_else(|| text(args, "branch_name"));
    let target = strip(named.unwrap_or(&facts.default_branch)).to_owned();
    let mut branches = vec![BranchMove { repo: here.clone(), branch: target.clone(), how: Move::Write }];
    if let Some(new) = text(args, "new_branch_name") {
        branches.push(BranchMove { repo: here.clone(), branch: strip(new).to_owned(), how: Move::Create });
    }
    let path = text(args, "path").or_else(|| text(args, "filePath")).unwrap_or_default();
    // The commit's message acts when the commit lands (Gitea writes a default one
    // naming the path when none is given).
    let (field, message) = match text(args, "message") {
        Some(m) => ("message", m),
        None => ("message (the default one names `path`)", path),
    };
    let issues = text_effects(cx.grammar, &here, field, message, &When::Landing { branch: target.clone() }, None);
    Ok(Effect {
        branches,
        paths: vec![PathWrite { branch: target, path: path.to_owned() }],
        defaults: vec![facts.default_branch],
        issues,
        ..Effect::action(ACTION_PUSH)
    })
}

/// `create_branch`, `rename_branch` (both names are judged), `delete_branch` (and the PRs
/// Gitea closes or moves with it).
fn branch_tool(tool: &str, args: &Map<String, Value>, cx: Cx<'_>, (owner, repo): (&str, &str)) -> Step<Effect> {
    let here = Repo::new(owner, repo);
    let facts = repository(cx, owner, repo)?;
    match tool {
        "create_branch" => {
            let branch = text(args, "branch").unwrap_or_default();
            Ok(Effect {
                branches: vec![BranchMove { repo: here, branch: strip(branch).to_owned(), how: Move::Create }],
                defaults: vec![facts.default_branch],
                ..Effect::write()
            })
        }
        "rename_branch" => {
            let names: Vec<&str> = ["branch", "new_name"].iter().filter_map(|k| text(args, k)).collect();
            if names.is_empty() {
                return Err(Pending::Failed("`rename_branch` names no branch".into()));
            }
            let branches = names
                .into_iter()
                .map(|b| BranchMove { repo: here.clone(), branch: strip(b).to_owned(), how: Move::Rename })
                .collect();
            Ok(Effect { branches, defaults: vec![facts.default_branch], ..Effect::write() })
        }
        _ => {
            let Some(branch) = text(args, "branch").map(strip) else {
                return Err(Pending::Failed("`delete_branch` names no branch".into()));
            };
            let prs = closed_with(cx, (owner, repo), branch, None, None)?;
            Ok(Effect {
                branches: vec![BranchMove { repo: here, branch: branch.to_owned(), how: Move::Delete }],
                prs,
                defaults: vec![facts.default_branch],
                ..Effect::write()
            })
        }
    }
}

/// What a call's arguments alone show when its statement needs a read (replay judges with
/// it, and leaves the rest to the live gate): a merge's terms; a commit message's issues,
/// closed when the commit lands, wherever that is.
pub(super) fn shown(grammar: &Grammar, call: &Call<'_>) -> Effect {
    let (tool, args) = (call.tool, call.args);
    match tool {
        "pull_request_write" if call.method() == Some("merge") => Effect {
            merge: number(args, &["pull_number", "index"]).map(|pr| merge_terms(args, call.schema, pr)),
            ..Effect::action(ACTION_MERGE)
        },
        "create_or_update_file" | "delete_file" => {
            let branch =
                text(args, "new_branch_name").or_else(|| text(args, "branch_name")).unwrap_or("the default branch");
            let landing = When::Landing { branch: strip(branch).to_owned() };
            let message = text(args, "message").unwrap_or_default();
            Effect {
                issues: text_effects(grammar, &call.here(), "message", message, &landing, None),
                ..Effect::write()
            }
        }
        _ => Effect::write(),
    }
}

/// A merge's terms, as its arguments state them.
fn merge_terms(args: &Map<String, Value>, schema: Option<&Map<String, Value>>, pr: u64) -> MergeTerms {
    MergeTerms {
        pr,
        forced: flag(args, "force_merge"),
        scheduled: flag(args, "merge_when_checks_succeed"),
        pinnable: declared(schema, MERGE_HEAD_KEY),
        style: text(args, MERGE_STYLE).map(str::to_owned),
    }
}

/// The reads of a PR's conversation: its comments (`issue_read get_comments`) and its review
/// comments (`pull_request_read get_review_comments`).
fn conversation_reads(owner: &str, repo: &str, number: u64, schemas: &dyn Schemas) -> Result<[Read; 2], DialectError> {
    let mut comments = kit::read_on("issue_read", Some("get_comments"), owner, repo);
    comments.arguments.insert(declared_key(schemas, "issue_read", &super::ISSUE_NUMBER)?.into(), Value::from(number));
    let mut review = kit::read_on("pull_request_read", Some("get_review_comments"), owner, repo);
    review.arguments.insert(declared_key(schemas, "pull_request_read", &super::PR_NUMBER)?.into(), Value::from(number));
    Ok([comments, review])
}

/// What a merge does to issues ([`merge_issues`]): its PR's texts — title, body (`answer`),
/// each comment and review comment, read from the forge, which Gitea resolves at the merge —
/// and the merge's own `title` and `message` (its commit's message, landing on the base now).
fn merge_texts(
    cx: Cx<'_>,
    args: &Map<String, Value>,
    answer: &Value,
    (owner, repo, number): (&str, &str, u64),
    base_repo: &Repo,
) -> Step<Vec<IssueEffect>> {
    let reads = conversation_reads(owner, repo, number, cx.schemas)?;
    let missing: Vec<Read> = reads.iter().filter(|r| cx.answer(r).is_none()).cloned().collect();
    if !missing.is_empty() {
        return Err(Pending::Reads(missing));
    }
    let mut conversation: Vec<(&str, &str)> = Vec::new();
    for (read, field) in reads.iter().zip(["a comment on the PR", "a review comment on the PR"]) {
        let listed = cx.ask(read.clone())?;
        let items = listed.as_array().ok_or_else(|| Pending::Failed(format!("`{}` answered no list", read.tool)))?;
        conversation.extend(items.iter().filter_map(|i| i.get("body").and_then(Value::as_str)).map(|t| (field, t)));
    }
    let own: Vec<(&str, &str)> =
        ["title", "message"].into_iter().filter_map(|k| text(args, k).map(|t| (k, t))).collect();
    Ok(merge_issues(cx.grammar, answer, &conversation, &own, base_repo))
}

/// `issue_write add_comment` / `edit_comment`: a comment on a PR (read from the forge: PRs and
/// issues share numbers) is one of its texts, resolved when it merges; an edited comment's
/// thread is not named, so it is read as a PR's. A comment whose text names no issue acts on
/// nothing wherever it lands, so the forge is not asked whether its number is a PR's: that read
/// is a downstream round trip before every comment.
fn comment(method: Option<&str>, args: &Map<String, Value>, cx: Cx<'_>, (owner, repo): (&str, &str)) -> Step<Effect> {
    let here = Repo::new(owner, repo);
    let Some(body) = text(args, "body") else { return Ok(Effect::write()) };
    let pr = if method == Some("edit_comment") {
        None
    } else {
        let Some(n) = number(args, &["issue_number", "index"]) else {
            return Err(Pending::Failed("`issue_write add_comment` names no issue_number".into()));
        };
        Some(n)
    };
    let issues = text_effects(cx.grammar, &here, "comment", body, &When::AtMerge { pr }, None);
    if issues.is_empty() {
        return Ok(Effect::write());
    }
    if let Some(n) = pr
        && !cx.is_pr(&GITEA, owner, repo, n)?
    {
        return Ok(Effect::write());
    }
    Ok(Effect { issues, ..Effect::write() })
}

fn pull_request_write(
    method: Option<&str>,
    args: &Map<String, Value>,
    schema: Option<&Map<String, Value>>,
    cx: Cx<'_>,
    (owner, repo): (&str, &str),
) -> Step<Effect> {
    let here = Repo::new(owner, repo);
    let Some(method) = method else { return Ok(Effect::unknown(unknown_method("pull_request_write", None))) };
    if method == "create" {
        let issues = pr_texts(cx.grammar, args, &here, &When::AtMerge { pr: None });
        return Ok(Effect { issues, ..Effect::action(ACTION_OPEN) });
    }
    let Some(number) = number(args, &["pull_number", "index"]) else {
        // The server refuses it (`pull_number is required`): nothing to state.
        return Err(Pending::Failed(format!("`pull_request_write {method}` names no pull_number")));
    };
    let on = |change: PrChange| PrEffect { repo: here.clone(), pr: number, change };
    match method {
        "update" => {
            let mut prs = Vec::new();
            if let Some(base) = text(args, "base") {
                prs.push(on(PrChange::Retarget { to: strip(base).to_owned() }));
            }
            if let Some(state) = args.get("state").filter(|v| !v.is_null()) {
                let to = state.as_str().unwrap_or_default().to_owned();
                prs.push(on(PrChange::State { to, by: "pull_request_write update".into() }));
            }
            if ["title", "body", "draft"].iter().any(|k| args.contains_key(*k)) {
                prs.push(on(PrChange::Text));
            }
            let issues = pr_texts(cx.grammar, args, &here, &When::AtMerge { pr: Some(number) });
            Ok(Effect { prs, issues, ..Effect::action(ACTION_EDIT) })
        }
        "close" | "reopen" => {
            let to = if method == "close" { "closed" } else { "open" };
            let change = PrChange::State { to: to.into(), by: format!("pull_request_write {method}") };
            Ok(Effect { prs: vec![on(change)], ..Effect::action(ACTION_CLOSE) })
        }
        "update_branch" => update_branch(cx, (owner, repo, number)),
        "merge" => merge(args, schema, cx, (owner, repo, number)),
        m => Ok(Effect::unknown(unknown_method("pull_request_write", Some(m)))),
    }
}

/// `pull_request_write update_branch`: the PR's base merged into its head branch, read from
/// the forge.
fn update_branch(cx: Cx<'_>, (owner, repo, number): (&str, &str, u64)) -> Step<Effect> {
    let facts = cx.pr(&GITEA, owner, repo, number)?;
    let head = head_branch(&facts, number)?;
    let head_repo = repo_or(facts.head_repo.as_deref(), &Repo::new(owner, repo));
    // The head may live in a fork: its default branch is the fork's.
    let (h_owner, h_name) = head_repo.0.split_once('/').unwrap_or((owner, repo));
    let defaults = vec![repository(cx, h_owner, h_name)?.default_branch];
    let branch =
        BranchMove { repo: head_repo, branch: strip(&head).to_owned(), how: Move::UpdateFromBase { pr: number } };
    Ok(Effect { branches: vec![branch], defaults, ..Effect::action(ACTION_PUSH) })
}

/// `pull_request_write merge`: the PR's head lands on its base, both read from the forge.
fn merge(
    args: &Map<String, Value>,
    schema: Option<&Map<String, Value>>,
    cx: Cx<'_>,
    (owner, repo, number): (&str, &str, u64),
) -> Step<Effect> {
    let answer = cx.pr_answer(&GITEA, owner, repo, number)?;
    let facts = GITEA.pr_facts(answer)?;
    let base_repo = repo_or(facts.repo.as_deref(), &Repo::new(owner, repo));
    let mut effect = Effect {
        merge: Some(merge_terms(args, schema, number)),
        prs: vec![PrEffect { repo: base_repo.clone(), pr: number, change: PrChange::Merged }],
        issues: merge_texts(cx, args, answer, (owner, repo, number), &base_repo)?,
        ..Effect::action(ACTION_MERGE)
    };
    if let Some(base) = &facts.base_ref {
        effect.branches.push(BranchMove {
            repo: base_repo.clone(),
            branch: strip(base).to_owned(),
            how: Move::Merge { pr: number },
        });
    }
    // Gitea deletes the head branch in the repository it lives in — a fork's too
    // (`DeleteBranch(…, pr.HeadRepo, …)`) — and adjusts the PRs there and in the fork's
    // parent as for any deletion: stated and judged like one in the base repository.
    if flag(args, "delete_branch") {
        let head = strip(&head_branch(&facts, number)?).to_owned();
        let head_repo = repo_or(facts.head_repo.as_deref(), &base_repo);
        let in_fork = head_repo != base_repo;
        let (h_owner, h_name) = head_repo.0.split_once('/').unwrap_or((owner, repo));
        let facts_repo = repository(cx, h_owner, h_name)?;
        let parent = in_fork.then_some(&base_repo);
        effect.prs.extend(closed_with(cx, (h_owner, h_name), &head, Some((&base_repo, number)), parent)?);
        effect.branches.push(BranchMove { repo: head_repo, branch: head, how: Move::Delete });
        effect.defaults.push(facts_repo.default_branch);
    }
    Ok(effect)
}

/// `issue_write update`: on a PR's number, a state change closes or reopens the PR and a
/// title or body edits it — its texts, resolved when it merges (Gitea numbers PRs and issues
/// in one sequence); on an issue's, a state change closes or reopens the issue, and a `ref`
/// chooses the branch whose commits close it by keyword.
fn issue_update(args: &Map<String, Value>, cx: Cx<'_>, (owner, repo): (&str, &str)) -> Step<Effect> {
    let here = Repo::new(owner, repo);
    let touches = ["state", "title", "body", "ref"].iter().any(|k| args.contains_key(*k));
    if !touches {
        return Ok(Effect::write());
    }
    let Some(number) = number(args, &["issue_number", "index"]) else {
        return Err(Pending::Failed("`issue_write update` names no issue_number".into()));
    };
    let mut issues = Vec::new();
    if let Some(branch) = text(args, "ref") {
        issues.push(IssueEffect {
            repo: here.clone(),
            issue: number,
            change: IssueChange::Ref { branch: strip(branch).to_owned() },
        });
    }
    let state = args.get("state").filter(|v| !v.is_null()).map(|s| s.as_str().unwrap_or_default().to_owned());
    if !cx.is_pr(&GITEA, owner, repo, number)? {
        if let Some(to) = state {
            issues.push(IssueEffect {
                repo: here,
                issue: number,
                change: IssueChange::State { to, by: "issue_write update".into() },
            });
        }
        return Ok(Effect { issues, ..Effect::write() });
    }
    let mut prs = Vec::new();
    let mut action = ACTION_EDIT;
    if let Some(to) = state {
        prs.push(PrEffect {
            repo: here.clone(),
            pr: number,
            change: PrChange::State { to, by: "issue_write update".into() },
        });
        action = ACTION_CLOSE;
    }
    if args.contains_key("title") || args.contains_key("body") {
        prs.push(PrEffect { repo: here.clone(), pr: number, change: PrChange::Text });
        issues.extend(pr_texts(cx.grammar, args, &here, &When::AtMerge { pr: Some(number) }));
    }
    Ok(Effect { prs, issues, ..Effect::action(action) })
}

#[cfg(test)]
mod tests;

/// The calls whose effect is stated beyond "reads" or "changes what no invariant guards".
pub const STATED: &[crate::dialect::table::Stated] = {
    use crate::dialect::table::Stated;
    use crate::effect::Invariant::{
        ForcedMerge, IssueState, PrState, ProtectedBranch, ProtectedPath, ReaderWrites, Retarget, ScheduledMerge,
        UnpinnedMerge,
    };
    &[
        Stated {
            tool: "pull_request_write",
            method: "create",
            effect: "opens a PR (its creator is recorded; the issues its title and body reference are judged by the issue lock; what they close when it merges is an issue-state change)",
            invariants: &[IssueState],
        },
        Stated {
            tool: "pull_request_write",
            method: "update",
            effect: "edits the PR's title or body (the issue lock judges them, and what they close when it merges); with `base`, retargets it; with `state`, closes or reopens it",
            invariants: &[Retarget, PrState, IssueState],
        },
        Stated { tool: "pull_request_write", method: "close", effect: "closes the PR", invariants: &[PrState] },
        Stated { tool: "pull_request_write", method: "reopen", effect: "reopens the PR", invariants: &[PrState] },
        Stated {
            tool: "pull_request_write",
            method: "merge",
            effect: "lands the PR's head on its base, read from the forge (the PR workflow judges it: an independent approval at that head and base, a merge lease; the head is pinned with `head_commit_id`); closes the issues the PR's texts close (read from the forge) and those its `title` and `message` close; with `delete_branch`, deletes the head branch in the repository it lives in — a fork's too — and Gitea closes the other open PRs it heads and moves those based on it to that repository's default branch",
            invariants: &[ProtectedBranch, ForcedMerge, ScheduledMerge, UnpinnedMerge, Retarget, PrState, IssueState],
        },
        Stated {
            tool: "pull_request_write",
            method: "update_branch",
            effect: "merges the PR's base into its head branch, read from the forge (any branch: the default one too); the new head's pusher is recorded",
            invariants: &[ProtectedBranch],
        },
        Stated {
            tool: "issue_write",
            method: "update",
            effect: "edits the issue; on a PR's number (read from the forge: PRs and issues share numbers), a `state` closes or reopens the PR and a title or body edits it; on an issue's, a `state` closes or reopens the issue, and a `ref` chooses the branch whose commits close it by keyword",
            invariants: &[PrState, IssueState],
        },
        Stated {
            tool: "issue_write",
            method: "create",
            effect: "opens an issue (its texts close nothing); a `ref` chooses the branch whose commits close it by keyword",
            invariants: &[IssueState],
        },
        Stated {
            tool: "issue_write",
            method: "add_comment",
            effect: "comments on the issue or PR (read from the forge: PRs and issues share numbers); a comment on a PR closes, by keyword, issues when the PR merges",
            invariants: &[IssueState],
        },
        Stated {
            tool: "issue_write",
            method: "edit_comment",
            effect: "edits a comment (its issue or PR is not named: read as a PR's, whose keywords close issues when it merges)",
            invariants: &[IssueState],
        },
        Stated {
            tool: "create_or_update_file",
            method: "",
            effect: "commits to `new_branch_name` (made from `branch_name`), else to `branch_name`, else to the repository's default branch (read from the forge); the pusher is recorded; its message's keywords close issues when it lands",
            invariants: &[ProtectedBranch, ProtectedPath, IssueState],
        },
        Stated {
            tool: "delete_file",
            method: "",
            effect: "commits a deletion, to the branch a file write would write; its message's keywords close issues when it lands",
            invariants: &[ProtectedBranch, ProtectedPath, IssueState],
        },
        Stated { tool: "create_branch", method: "", effect: "creates `branch`", invariants: &[ProtectedBranch] },
        Stated {
            tool: "rename_branch",
            method: "",
            effect: "renames `branch` to `new_name` (both names are judged)",
            invariants: &[ProtectedBranch],
        },
        Stated {
            tool: "delete_branch",
            method: "",
            effect: "deletes `branch`: Gitea closes every open PR it heads (in the repository and, for a fork, in its parent) and moves those based on it to the default branch; in a repository with forks which PRs pull from it cannot be read, and the call is refused",
            invariants: &[ProtectedBranch, PrState, Retarget],
        },
        Stated {
            tool: "actions_run_read",
            method: "download_job_log",
            effect: "writes the job's log on the server's host (`output_path`, or under `~/.gitea-mcp/`)",
            invariants: &[ReaderWrites],
        },
        Stated {
            tool: "actions_run_read",
            method: "download_artifact",
            effect: "writes the artifact on the server's host (`output_path`, or under `~/.gitea-mcp/`)",
            invariants: &[ReaderWrites],
        },
        Stated {
            tool: "attachment_read",
            method: "download",
            effect: "writes the attachment on the server's host (`output_path`, or under `~/.gitea-mcp/`)",
            invariants: &[ReaderWrites],
        },
    ]
};

/// The calls whose texts Gitea acts on later, and what it does with them.
pub const TEXTS: &[crate::dialect::table::Texts] = {
    use crate::dialect::table::Texts;
    const LANDING: &str = "a closing (reopening) keyword closes (reopens) the issue it names — here, or in another \
                           repository (`owner/name#N`) — when the commit reaches the default branch or the issue's \
                           `ref` branch (any branch, where the instance closes issues by commits in any branch): no \
                           role but the controller and the reconciler may write one";
    const AT_MERGE: &str = "cross-references of the PR: when it merges, a closing (reopening) keyword closes (reopens) \
                            the issue it names; the author may name the issues it holds the lock of, no other role any";
    &[
        Texts {
            tool: "create_or_update_file",
            method: "",
            texts: "`message` (empty: Gitea's default, naming `path`)",
            acts: LANDING,
        },
        Texts {
            tool: "delete_file",
            method: "",
            texts: "`message` (empty: Gitea's default, naming `path`)",
            acts: LANDING,
        },
        Texts { tool: "pull_request_write", method: "create", texts: "`title`, `body`", acts: AT_MERGE },
        Texts { tool: "pull_request_write", method: "update", texts: "`title`, `body`", acts: AT_MERGE },
        Texts {
            tool: "pull_request_write",
            method: "merge",
            texts: "`title`, `message` (the merge commit's message); the PR's title, body, comments and review comments (read from the forge)",
            acts: "the merge closes (reopens) every issue its PR's texts name with a keyword, now; its own message lands on the base now and may close only those",
        },
        Texts {
            tool: "issue_write",
            method: "update",
            texts: "`ref`; on a PR's number, `title`, `body`",
            acts: "`ref`: commits landing on that branch close the issue by keyword (the controller's and the reconciler's to set); a PR's title and body: as `pull_request_write update`",
        },
        Texts { tool: "issue_write", method: "create", texts: "`ref`", acts: "as `issue_write update`'s `ref`" },
        Texts { tool: "issue_write", method: "add_comment", texts: "`body`, on a PR's number", acts: AT_MERGE },
        Texts { tool: "issue_write", method: "edit_comment", texts: "`body` (read as a PR's comment)", acts: AT_MERGE },
        Texts {
            tool: "pull_request_review_write",
            method: "",
            texts: "`body`, `comments[].body`, `message` (every method)",
            acts: AT_MERGE,
        },
    ]
};

/// What the reference page (`docs/reference/gitea-mcp.md`) is built from.
pub const SURFACE: crate::dialect::table::Surface = crate::dialect::table::Surface {
    intro: "# The gitea-mcp dialect\n\nEvery tool and `method` of the official Gitea MCP server the forge dialect \
            states (`[fleet] forge = \"gitea-mcp\"`): what a call does to the forge, the invariants it may meet \
            (judged for every call, whoever makes it, below every rule and approval), and the roles the built-in \
            profile lets make it. A tool or method not listed here has no statement: its effect is unknown and it \
            is refused (`unknown-effect`). Generated from `fleetgate_core::dialect::gitea`.",
    readers: READERS,
    stated: STATED,
    reviews: &[("pull_request_review_write", REVIEW_METHODS)],
    review_effect: "a review action (an approval or a request-changes is judged by the PR workflow: a review lease at \
                    the head, pinned with `commit_id`); its body, comments and replies close, by keyword, issues when the \
                    PR merges",
    review_invariants: &[crate::effect::Invariant::IssueState],
    texts: TEXTS,
    plain: PLAIN_WRITES,
    outro: "Any reader given `output_path` writes a file on the server's host (`reader-writes`). The invariants, what \
            each holds and what lifting it gives up: [the policy chapter](../policy.md#invariants).",
};
