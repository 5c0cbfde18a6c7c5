//! The `github-mcp` dialect: GitHub's official MCP server (`github/github-mcp-server`), run
//! over stdio as its binary or its container image. Its tools are one per operation (a few
//! fold operations under a `method`), grouped in toolsets an operator turns on with
//! `--toolsets`; `--read-only` drops every write. Tool names and argument names are the
//! server's own, read from its source ([`SOURCE`]; the digest is
//! `crates/testkit/src/forge/GITHUB_MCP.md`).
//!
//! Where GitHub differs from Gitea, as the dialect reads it:
//!
//! * numbers are camelCase `pullNumber` (and `issue_number`); the review tool decodes its
//!   arguments loosely (a Go field name such as `Event` or `CommitID` wins over the schema's
//!   key, any case variant is read, and a number beyond 2^31 wraps): a key the schema does not
//!   declare is refused by the canonical parse, and a number beyond 2^31 here;
//! * a review's verdict is `event` (`APPROVE`, `REQUEST_CHANGES`, `COMMENT`) on
//!   `pull_request_review_write` `create` or `submit_pending`; `create` without `event` is a
//!   pending review, pinned (`commitID`) to the head it is made at;
//! * `update_pull_request` retargets with `base` and closes with `state`;
//!   `update_pull_request_branch` merges the base into the PR's head branch;
//! * file writes name their branch (`branch`, required: no default-branch fallback), and
//!   `push_files` commits many files at once (creating the branch when it is missing);
//! * there is no branch deletion and no forced or scheduled merge;
//! * the merge (`merge_pull_request`) declares no head to pin in the releases read
//!   (`expectedHeadSha` arrives upstream after them): through such a server a merge is refused
//!   (`unpinned-merge`), since GitHub would land whatever head the PR has when the merge
//!   runs. The threat model says what holds and how an operator may choose otherwise.

pub mod effect;

use super::table::{self, Arg, Entry, METHOD, NOBODY, other_method, read, read_methods, write};
use super::{
    ACTION_MERGE, ACTION_OPEN, ACTION_REVIEW, Dialect, PrTarget, Pushed, Schemas, Server, declared_key, number, text,
};
use crate::effect::{Answered, Effect, Read};
use crate::rules::Rule;
use crate::workflow::ReviewVerdict;
use serde_json::{Map, Value};

/// The `[fleet] forge` name of GitHub's official MCP server.
pub const NAME: &str = "github-mcp";

/// Where the tool names and argument names were read.
pub const SOURCE: &str = "github/github-mcp-server pkg/github/*.go and __toolsnaps__ at 64a49f34d076 (v1.10.1 + 3); \
     every tag v0.1.0 … v1.10.1 for the names across releases";

/// The key of a PR's number.
pub const PR_NUMBER: &str = "pullNumber";
/// The key of an issue's (or a PR's: one sequence) number.
pub const ISSUE_NUMBER: &str = "issue_number";
/// The merge's head pin: declared by the servers that have it (upstream #3182), absent
/// before; the gateway sets it to the head it judged.
pub const MERGE_HEAD_KEY: &str = "expectedHeadSha";
/// The argument of a review naming the commit it is given at.
pub const REVIEW_COMMIT_KEY: &str = "commitID";

/// The largest number the server passes on unchanged (its GraphQL paths cast to `int32`).
pub const MAX_NUMBER: u64 = i32::MAX as u64;

/// Keys the server always reads as integers.
pub const NUMBER_KEYS: &[&str] = &["pullNumber", "issue_number", "page", "perPage", "run_id", "milestone"];

const SERVER: Server = Server {
    title: "GitHub's official MCP server (github-mcp-server)",
    process_match: &["github-mcp-server"],
    launch: &["github-mcp-server", "stdio"],
    token_env: "GITHUB_PERSONAL_ACCESS_TOKEN",
    token_flags: &[],
    host_env: "GITHUB_HOST",
    default_host: Some("https://github.com"),
    prefix: "github",
    self_review: "GitHub refuses an approval by the pull request's own author (\"Can not approve your own pull request\")",
};

/// The container image the server is published as.
pub const IMAGE: &str = "ghcr.io/github/github-mcp-server";

/// The github-mcp dialect.
#[derive(Clone, Copy, Debug, Default)]
pub struct GithubMcp;

/// The one instance.
pub static GITHUB: GithubMcp = GithubMcp;

/// The read answering a PR's current state: `pull_request_read get`.
pub fn pr_read(target: &PrTarget, schemas: &dyn Schemas) -> Result<Read, String> {
    let mut args = Map::new();
    args.insert("method".into(), Value::from("get"));
    args.insert("owner".into(), Value::from(target.owner.clone()));
    args.insert("repo".into(), Value::from(target.repo.clone()));
    args.insert(declared_key(schemas, "pull_request_read", &[PR_NUMBER])?.into(), Value::from(target.pr));
    Ok(Read::new("pull_request_read", args))
}

/// The tools that name a PR by `pullNumber`.
pub const PR_TOOLS: &[&str] = &[
    "pull_request_read",
    "update_pull_request",
    "merge_pull_request",
    "update_pull_request_branch",
    "pull_request_review_write",
    "add_comment_to_pending_review",
    "request_copilot_review",
    "update_pull_request_title",
    "update_pull_request_body",
    "update_pull_request_state",
    "update_pull_request_draft_state",
    "request_pull_request_reviewers",
    "create_pull_request_review",
    "submit_pending_pull_request_review",
    "delete_pending_pull_request_review",
    "add_pull_request_review_comment",
];

/// The PR a call's canonical arguments name (a number the server passes on unchanged).
pub fn pr_target(args: &Map<String, Value>, key: &str) -> Option<PrTarget> {
    let pr = args.get(key).and_then(number).filter(|n| (1..=MAX_NUMBER).contains(n))?;
    Some(PrTarget { owner: text(args, "owner")?.to_owned(), repo: text(args, "repo")?.to_owned(), pr })
}

/// The review tools that submit a verdict, and the methods that do.
fn submits(tool: &str, args: &Map<String, Value>) -> bool {
    match tool {
        "pull_request_review_write" => matches!(text(args, "method"), Some("create" | "submit_pending")),
        "create_pull_request_review" | "submit_pending_pull_request_review" => true,
        _ => false,
    }
}

impl Dialect for GithubMcp {
    fn name(&self) -> &'static str {
        NAME
    }

    fn server(&self) -> &'static Server {
        &SERVER
    }

    fn rules(&self) -> Vec<Rule> {
        rules()
    }

    fn alias_groups(&self) -> &'static [&'static [&'static str]] {
        // One name per thing across the releases that have these tools.
        &[]
    }

    fn number_keys(&self) -> &'static [&'static str] {
        NUMBER_KEYS
    }

    /// A number beyond 2^31-1 (the server's GraphQL paths, and the review tool's decoding,
    /// wrap it to another PR's), and a key of the loosely decoded tools that is not exactly
    /// one of theirs.
    fn check_parse(&self, tool: &str, args: &Map<String, Value>) -> Result<(), crate::forge_call::Ambiguity> {
        for (key, value) in args {
            if NUMBER_KEYS.contains(&key.as_str())
                && let Some(n) = value.as_i64()
                && n.unsigned_abs() > MAX_NUMBER
            {
                return Err(crate::forge_call::Ambiguity::new(
                    key,
                    format!("{n} is beyond 2^31-1: the server wraps it to another number"),
                ));
            }
        }
        if let Some((_, keys)) = effect::LOOSE.iter().find(|(t, _)| *t == tool)
            && let Some(key) = args.keys().find(|k| !keys.contains(&k.as_str()))
        {
            return Err(crate::forge_call::Ambiguity::new(
                key,
                "the server reads this tool's keys ignoring case and by Go field name: only its own keys are \
                 judged alike",
            ));
        }
        Ok(())
    }

    fn establish(
        &self,
        tool: &str,
        args: &Map<String, Value>,
        schema: Option<&Map<String, Value>>,
        schemas: &dyn Schemas,
        answers: &[Answered],
    ) -> Result<Effect, Vec<Read>> {
        effect::establish(tool, args, schema, schemas, answers)
    }

    fn evident(&self, tool: &str, args: &Map<String, Value>, schema: Option<&Map<String, Value>>) -> Effect {
        effect::evident(tool, args, schema)
    }

    fn pr_target(&self, tool: &str, args: &Map<String, Value>) -> Option<PrTarget> {
        PR_TOOLS.contains(&tool).then(|| pr_target(args, PR_NUMBER)).flatten()
    }

    /// `event`, on the calls that submit one. GitHub's enum is case-sensitive, and the server
    /// turns a number or a boolean into a string: any case of `APPROVE` or `REQUEST_CHANGES`
    /// is read as that verdict (judging more calls as verdicts only refuses more).
    fn review_verdict(&self, tool: &str, args: &Map<String, Value>) -> Option<ReviewVerdict> {
        if !submits(tool, args) {
            return None;
        }
        let event = text(args, "event")?;
        if event.eq_ignore_ascii_case("APPROVE") {
            Some(ReviewVerdict::Approve)
        } else if event.eq_ignore_ascii_case("REQUEST_CHANGES") {
            Some(ReviewVerdict::RequestChanges)
        } else {
            None
        }
    }

    fn review_is_pinned(&self, tool: &str, args: &Map<String, Value>) -> bool {
        match tool {
            "pull_request_review_write" => text(args, "method") == Some("create"),
            "create_pull_request_review" => true,
            _ => false,
        }
    }

    fn pr_read(&self, target: &PrTarget, schemas: &dyn Schemas) -> Result<Read, String> {
        pr_read(target, schemas)
    }

    fn merge_pin(&self) -> Option<&'static str> {
        Some(MERGE_HEAD_KEY)
    }

    fn review_pin(&self) -> Option<&'static str> {
        Some(REVIEW_COMMIT_KEY)
    }

    /// `{"id": …, "url": "…/pull/<n>"}`: the number is the URL's last segment.
    fn created_pr(&self, answer: &Value) -> Option<u64> {
        if let Some(n) = answer.get("number").and_then(number) {
            return Some(n);
        }
        let url = answer.get("url").or_else(|| answer.get("html_url")).and_then(Value::as_str)?;
        let (rest, last) = url.trim_end_matches('/').rsplit_once('/')?;
        rest.ends_with("/pull").then(|| last.parse().ok()).flatten()
    }

    fn pushed(&self, tool: &str, args: &Map<String, Value>) -> Option<Pushed> {
        let (owner, repo) = (text(args, "owner")?.to_owned(), text(args, "repo")?.to_owned());
        let branch = match tool {
            "create_or_update_file" | "delete_file" | "push_files" => text(args, "branch"),
            _ => None,
        }?;
        Some(Pushed { owner, repo, branch: branch.to_owned() })
    }

    fn tip_read(&self, owner: &str, repo: &str, branch: &str, _schemas: &dyn Schemas) -> Result<Read, String> {
        let mut args = Map::new();
        args.insert("owner".into(), Value::from(owner));
        args.insert("repo".into(), Value::from(repo));
        args.insert("sha".into(), Value::from(branch));
        Ok(Read::new("get_commit", args))
    }

    fn closes(&self, tool: &str, args: &Map<String, Value>) -> Option<PrTarget> {
        let closed = text(args, "state") == Some("closed");
        let key = match tool {
            "update_pull_request" | "update_pull_request_state" if closed => PR_NUMBER,
            "issue_write" if closed && text(args, "method") == Some("update") => ISSUE_NUMBER,
            "update_issue_state" if closed => ISSUE_NUMBER,
            _ => return None,
        };
        pr_target(args, key)
    }

    fn action_call(&self, action: &str) -> Option<(&'static str, Map<String, Value>)> {
        let mut args = Map::new();
        let tool = match action {
            ACTION_MERGE => "merge_pull_request",
            ACTION_REVIEW => {
                args.insert("method".into(), Value::from("create"));
                "pull_request_review_write"
            }
            ACTION_OPEN => "create_pull_request",
            _ => return None,
        };
        Some((tool, args))
    }

    /// GitHub's REST 404, and GraphQL's "Could not resolve to" (an issue number that is a PR).
    fn is_not_found(&self, error: &str) -> bool {
        error.contains("404") || error.to_ascii_lowercase().contains("not found") || error.contains("Could not resolve")
    }

    fn call(&self, op: &super::Op<'_>) -> (&'static str, Map<String, Value>) {
        use super::Op;
        let (tool, args) = match *op {
            Op::CreateBranch { branch } => ("create_branch", serde_json::json!({ "branch": branch })),
            Op::ReadFile { branch, path } => ("get_file_contents", serde_json::json!({ "ref": branch, "path": path })),
            Op::WriteFile { branch, path, content, message, sha } => {
                let mut args =
                    serde_json::json!({ "path": path, "content": content, "message": message, "branch": branch });
                if let Some(sha) = sha {
                    args["sha"] = Value::from(sha);
                }
                ("create_or_update_file", args)
            }
            Op::OpenPr { head, base, title, body } => {
                ("create_pull_request", serde_json::json!({ "title": title, "body": body, "head": head, "base": base }))
            }
            Op::Approve { pr } => (
                "pull_request_review_write",
                serde_json::json!({ "method": "create", "pullNumber": pr, "event": "APPROVE", "body": "LGTM" }),
            ),
            Op::Merge { pr, squash } => {
                let mut args = serde_json::json!({ "pullNumber": pr });
                if squash {
                    args["merge_method"] = Value::from("squash");
                }
                ("merge_pull_request", args)
            }
        };
        (tool, args.as_object().cloned().unwrap_or_default())
    }

    fn reference(&self) -> String {
        effect::render()
    }

    fn tools(&self) -> Vec<&'static str> {
        table::tools(&effect::SURFACE)
    }
}

const STATE: &str = "/state";
const BASE: &str = "/base";

/// Readers first (never blocked but by role), then writes by role, then the catch-all. The
/// same fleet as on Gitea: the author opens and maintains PRs and pushes branches; the
/// reviewer reviews; the merger merges; the controller and the reconciler change PR state;
/// the controller runs workflows and keeps the tracker.
const MATRIX: &[Entry] = &[
    read_methods(
        "pr-read",
        "pull_request_read",
        &[(
            METHOD,
            Arg::Is(&[
                "get",
                "get_diff",
                "get_status",
                "get_files",
                "get_commits",
                "get_review_comments",
                "get_reviews",
                "get_comments",
                "get_check_runs",
            ]),
        )],
    ),
    other_method("pr-read-other", "pull_request_read"),
    read_methods(
        "issue-read",
        "issue_read",
        &[(METHOD, Arg::Is(&["get", "get_comments", "get_sub_issues", "get_parent", "get_labels"]))],
    ),
    other_method("issue-read-other", "issue_read"),
    read_methods(
        "actions-list",
        "actions_list",
        &[(
            METHOD,
            Arg::Is(&["list_workflows", "list_workflow_runs", "list_workflow_jobs", "list_workflow_run_artifacts"]),
        )],
    ),
    other_method("actions-list-other", "actions_list"),
    read_methods(
        "actions-get",
        "actions_get",
        &[(
            METHOD,
            Arg::Is(&[
                "get_workflow",
                "get_workflow_run",
                "get_workflow_job",
                "download_workflow_run_artifact",
                "get_workflow_run_usage",
                "get_workflow_run_logs_url",
            ]),
        )],
    ),
    other_method("actions-get-other", "actions_get"),
    // Every other reader the dialect knows, by name (a tool that merely looks like a reader
    // is no reader: the catch-all refuses it and its effect is unknown).
    read("read", "get_*"),
    read("list", "list_*"),
    read("search", "search_*"),
    read("projects-list", "projects_list"),
    read("projects-get", "projects_get"),
    read("toolsets", "enable_toolset"),
    read("dependency-read", "issue_dependency_read"),
    read("duplicates", "find_duplicate"),
    read("ui", "ui_get"),
    // Pull requests: the author opens and maintains; a retarget is no role's (approvals are
    // for a base); a state change is the controller's and the reconciler's.
    write("pr-create", "create_pull_request", &[], &["author"]),
    write("pr-update-base", "update_pull_request", &[(BASE, Arg::Present)], NOBODY),
    write("pr-update-state", "update_pull_request", &[(STATE, Arg::Present)], &["controller", "reconciler"]),
    write("pr-update", "update_pull_request", &[], &["author"]),
    write("pr-state", "update_pull_request_state", &[], &["controller", "reconciler"]),
    write("pr-title", "update_pull_request_title", &[], &["author"]),
    write("pr-body", "update_pull_request_body", &[], &["author"]),
    write("pr-draft", "update_pull_request_draft_state", &[], &["author"]),
    write("pr-reviewers", "request_pull_request_reviewers", &[], &["author"]),
    write("pr-copilot-review", "request_copilot_review", &[], &["author"]),
    write("pr-update-branch", "update_pull_request_branch", &[], &["author"]),
    write("pr-merge", "merge_pull_request", &[], &["merger"]),
    // Reviews: the reviewer's, every method and tool.
    write(
        "review",
        "pull_request_review_write",
        &[(METHOD, Arg::Is(&["create", "submit_pending", "delete_pending", "resolve_thread", "unresolve_thread"]))],
        &["reviewer"],
    ),
    other_method("review-other", "pull_request_review_write"),
    write("review-comment", "add_comment_to_pending_review", &[], &["reviewer"]),
    write("review-create", "create_pull_request_review", &[], &["reviewer"]),
    write("review-submit", "submit_pending_pull_request_review", &[], &["reviewer"]),
    write("review-delete", "delete_pending_pull_request_review", &[], &["reviewer"]),
    write("review-line", "add_pull_request_review_comment", &[], &["reviewer"]),
    write("review-resolve", "resolve_review_thread", &[], &["reviewer"]),
    write("review-unresolve", "unresolve_review_thread", &[], &["reviewer"]),
    write("review-reaction", "add_pull_request_review_comment_reaction", &[], &["reviewer"]),
    write("review-reply", "add_reply_to_pull_request_comment", &[], &["author", "reviewer"]),
    // Issues (PRs are issues: a state on a PR's number is the PR-state roles').
    write("issue-create", "issue_write", &[(METHOD, Arg::Is(&["create"]))], &["author", "controller"]),
    write(
        "issue-update-state",
        "issue_write",
        &[(METHOD, Arg::Is(&["update"])), (STATE, Arg::Present)],
        &["controller", "reconciler"],
    ),
    write("issue-update", "issue_write", &[(METHOD, Arg::Is(&["update"]))], &["author", "controller", "reconciler"]),
    other_method("issue-other", "issue_write"),
    write("issue-comment", "add_issue_comment", &[], &["author", "reviewer", "merger", "controller", "reconciler"]),
    write("sub-issues", "sub_issue_write", &[], &["author", "controller"]),
    write("issue-dependencies", "issue_dependency_write", &[], &["author", "controller"]),
    write("issue-create-granular", "create_issue", &[], &["author", "controller"]),
    write("issue-state", "update_issue_state", &[], &["controller", "reconciler"]),
    write("issue-granular", "update_issue_*", &[], &["author", "controller", "reconciler"]),
    write("issue-fields", "set_issue_fields", &[], &["author", "controller", "reconciler"]),
    write("issue-subs", "*_sub_issue", &[], &["author", "controller"]),
    write("issue-reactions", "add_issue_*reaction", &[], &["author", "reviewer", "controller", "reconciler"]),
    // Files and branches: the author's.
    write("files", "create_or_update_file", &[], &["author"]),
    write("file-delete", "delete_file", &[], &["author"]),
    write("push", "push_files", &[], &["author"]),
    write("branch-create", "create_branch", &[], &["author"]),
    // Workflow runs and re-runs: the controller's.
    write("actions", "actions_run_trigger", &[], &["controller"]),
    // Labels: the controller's; notifications: the reconciler's.
    write("labels", "label_write", &[], &["controller"]),
    write("notifications", "dismiss_notification", &[], &["reconciler"]),
    write("notifications-all", "mark_all_notifications_read", &[], &["reconciler"]),
    // Anything else the server offers (repositories, forks, gists, stars, projects,
    // discussions, subscriptions, Copilot's coding agent) and any tool it may grow: no role
    // of this fleet may.
    write("other", "*", &[], NOBODY),
];

/// The `github-mcp` profile's rules, in the order they decide.
pub fn rules() -> Vec<Rule> {
    table::rules_of(NAME, MATRIX)
}

#[cfg(test)]
mod tests;
