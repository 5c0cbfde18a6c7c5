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
//! * the merge (`merge_pull_request`) declares no head to pin in any release read (an
//!   upstream `expectedHeadSha` arrives after them): GitHub would land whatever head the PR has
//!   when the merge runs. Where the listed schema declares no pin, the gateway makes the
//!   judged merge itself through GitHub's REST merge (`PUT /repos/O/R/pulls/N/merge` with
//!   `sha`: GitHub answers 409 once the head moved), with the member's own token and host
//!   ([`Server::credential`], [`Server::host`]), and answers the client as the server would;
//!   where the schema declares `expectedHeadSha`, the server's own merge is pinned with it;
//! * a pending review (`create` without `event`) keeps the commit it was made at: GitHub
//!   records the verdict submitted later at that commit, not at the head of its submission.

pub mod effect;

use super::kit::{self, Call, Cx, Step};
use super::table::{self, Arg, Entry, METHOD, NOBODY, other_method, read, read_methods, write};
use super::{
    ACTION_MERGE, ACTION_OPEN, ACTION_REVIEW, Dialect, DialectError, PendingAt, PrTarget, Pushed, RestCall, Schemas,
    Server, ToolAnswer, declared_key, number, text,
};
use crate::effect::{Answered, Effect, Read, answer};
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

/// The server's vocabulary: its name, launch, tools, role matrix and argument names.
static VOCABULARY: kit::Vocabulary = kit::Vocabulary {
    name: NAME,
    server: SERVER,
    surface: effect::SURFACE,
    matrix: MATRIX,
    // One name per thing across the releases that have these tools.
    alias_groups: &[],
    number_keys: NUMBER_KEYS,
    merge_pin: Some(MERGE_HEAD_KEY),
    review_pin: Some(REVIEW_COMMIT_KEY),
    pending_review_note: "GitHub keeps the commit a pending review was made at (`commitID`): a verdict submitted later \
         (`submit_pending`) counts at that commit, not at the head of its submission; the gate reads the caller's \
         pending review and refuses (`stale_head`) a submission whose review was made at another head",
    plot: kit::Plot {
        create_branch: "create_branch",
        read_file: "get_file_contents",
        write_file: ("create_or_update_file", "branch"),
        open: ("create_pull_request", None),
        approve: ("pull_request_review_write", "create", ("event", "APPROVE")),
        merge: ("merge_pull_request", None, "merge_method"),
        number: "pullNumber",
    },
};

const SERVER: Server = Server {
    title: "GitHub's official MCP server (github-mcp-server)",
    process_match: &["github-mcp-server"],
    launch: &["github-mcp-server", "stdio"],
    token_env: "GITHUB_PERSONAL_ACCESS_TOKEN",
    token_flags: &[],
    host_env: "GITHUB_HOST",
    host_flags: &["--gh-host"],
    default_host: Some("https://github.com"),
    prefix: "github",
    self_review: "GitHub refuses an approval by the pull request's own author (\"Can not approve your own pull request\")",
};

/// The container image the server is published as.
pub const IMAGE: &str = "ghcr.io/github/github-mcp-server";

/// GitHub's closing keywords and references.
static GRAMMAR: crate::textref::Grammar = crate::textref::GITHUB;

/// The github-mcp dialect.
#[derive(Clone, Copy, Debug, Default)]
pub struct GithubMcp;

/// The one instance.
pub static GITHUB: GithubMcp = GithubMcp;

/// The read answering a PR's current state: `pull_request_read get`.
pub fn pr_read(target: &PrTarget, schemas: &dyn Schemas) -> Result<Read, DialectError> {
    let mut read = kit::read_on("pull_request_read", Some("get"), &target.owner, &target.repo);
    read.arguments.insert(declared_key(schemas, "pull_request_read", &[PR_NUMBER])?.into(), Value::from(target.pr));
    Ok(read)
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

/// Reviews read per page when the caller's pending review is looked for.
pub const REVIEWS_PER_PAGE: u64 = 100;
/// At most this many pages of reviews are read (then the review is taken for missing).
pub const REVIEW_PAGES: u64 = 10;

/// The REST API base for the host `GITHUB_HOST` (or `--gh-host`) names, as the server derives
/// it (`pkg/utils/api.go`): github.com (none, or `*.github.com`) is `https://api.github.com/`;
/// a `*.ghe.com` host `https://api.HOST/`; any other is GitHub Enterprise Server,
/// `SCHEME://HOST[:PORT]/api/v3/`. Plain http only to a loopback host, as the server allows.
pub fn rest_base(host: Option<&str>) -> Result<String, DialectError> {
    let Some(host) = host.map(str::trim).filter(|h| !h.is_empty()) else {
        return Ok("https://api.github.com/".into());
    };
    let (scheme, rest) = host
        .split_once("://")
        .ok_or_else(|| DialectError::Host(format!("host must have a scheme (http or https): {host}")))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    let hostname = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.split(':').next().unwrap_or_default(),
    }
    .to_ascii_lowercase();
    if hostname.is_empty() {
        return Err(DialectError::Host(format!("host names no host: {host}")));
    }
    let loopback = matches!(hostname.as_str(), "localhost" | "127.0.0.1" | "::1");
    match scheme.to_ascii_lowercase().as_str() {
        "https" => {}
        "http" if loopback => {}
        _ => {
            return Err(DialectError::Host(format!(
                "host must use https to avoid sending credentials over cleartext: {scheme}://{hostname} (http is \
                 only permitted for loopback hosts)"
            )));
        }
    }
    if hostname == "github.com" || hostname.ends_with(".github.com") {
        return Ok("https://api.github.com/".into());
    }
    if hostname == "ghe.com" || hostname.ends_with(".ghe.com") {
        return Ok(format!("https://api.{hostname}/"));
    }
    Ok(format!("{}://{authority}/api/v3/", scheme.to_ascii_lowercase()))
}

/// A path segment as a URL carries it (owner and repository names are plain, but nothing
/// else may reach the path unescaped).
fn segment(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => char::from(b).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The merge the server would make (`MergePullRequest`: `commit_title`, `commit_message`,
/// `merge_method`, each sent only when non-empty), pinned at `head` with REST's `sha`.
pub fn pinned_merge(target: &PrTarget, head: &str, args: &Map<String, Value>) -> RestCall {
    let mut body = Map::new();
    for key in ["commit_title", "commit_message", "merge_method"] {
        if let Some(v) = text(args, key) {
            body.insert(key.into(), Value::from(v));
        }
    }
    body.insert("sha".into(), Value::from(head));
    RestCall {
        tool: "merge_pull_request".into(),
        method: "PUT".into(),
        path: format!("repos/{}/{}/pulls/{}/merge", segment(&target.owner), segment(&target.repo), target.pr),
        body: Value::Object(body),
    }
}

/// The server's answer to a merge, from GitHub's: the merge result's `sha`, `merged` and
/// `message` as JSON text; a failure as `failed to merge pull request: METHOD URL: STATUS
/// MESSAGE []` (go-github's error), a 422 as its message and details. Only a 200 whose
/// result says `merged: true` is a merge: anything else (another 2xx, a page that is no merge
/// result) is answered as a failure, never settled as a merge.
pub fn merge_answer(call: &RestCall, url: &str, status: u16, body: &str) -> ToolAnswer {
    let parsed: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    if status == 200 && parsed.get("merged") == Some(&Value::Bool(true)) {
        let mut result = Map::new();
        for key in ["sha", "merged", "message"] {
            if let Some(v) = parsed.get(key).filter(|v| !v.is_null()) {
                result.insert(key.into(), v.clone());
            }
        }
        return ToolAnswer { text: Value::Object(result).to_string(), is_error: false };
    }
    let message = parsed.get("message").and_then(Value::as_str).unwrap_or(body.trim());
    let message = if (200..300).contains(&status) && message.is_empty() { "no merge result" } else { message };
    let text = if status == 422 {
        let mut parts = vec![message.to_owned()];
        for e in parsed.get("errors").and_then(Value::as_array).into_iter().flatten() {
            let detail = e.get("message").and_then(Value::as_str).map_or_else(|| e.to_string(), str::to_owned);
            parts.push(detail);
        }
        parts.join("\n")
    } else {
        format!("{} {url}: {status} {message} []", call.method)
    };
    ToolAnswer { text: format!("failed to merge pull request: {text}"), is_error: true }
}

/// The page of `pull_request_read get_reviews` that `pending_review` reads.
fn reviews_read(target: &PrTarget, page: u64, schemas: &dyn Schemas) -> Result<Read, DialectError> {
    let mut read = pr_read(target, schemas)?;
    read.arguments.insert("method".into(), Value::from("get_reviews"));
    read.arguments.insert(declared_key(schemas, "pull_request_read", &["page"])?.into(), Value::from(page));
    read.arguments
        .insert(declared_key(schemas, "pull_request_read", &["perPage"])?.into(), Value::from(REVIEWS_PER_PAGE));
    Ok(read)
}

/// Where GitHub records the verdict of a `submit_pending`: the server submits the caller's
/// *first* review on the PR (`reviews(first: 1, author: viewer)`), which must be pending, and
/// GitHub keeps the commit that review was made at. Read: who the caller is (`get_me`), then
/// the PR's reviews page by page until the caller's first one.
fn pending_review(
    tool: &str,
    args: &Map<String, Value>,
    schemas: &dyn Schemas,
    answers: &[Answered],
) -> Result<PendingAt, Vec<Read>> {
    let submits_pending = match tool {
        "pull_request_review_write" => text(args, "method") == Some("submit_pending"),
        "submit_pending_pull_request_review" => true,
        _ => false,
    };
    if !submits_pending {
        return Ok(PendingAt::Head);
    }
    let Some(target) = pr_target(args, PR_NUMBER) else {
        return Ok(PendingAt::Missing(format!("`{tool}` names no pull request the server reads")));
    };
    let me = Read::new("get_me", Map::new());
    let login = match answer(answers, &me) {
        None => return Err(vec![me]),
        Some(Ok(v)) => v.get("login").and_then(Value::as_str).unwrap_or_default().to_owned(),
        Some(Err(e)) => return Ok(PendingAt::Missing(format!("who submits could not be read (`get_me`): {e}"))),
    };
    if login.is_empty() {
        return Ok(PendingAt::Missing("`get_me` named no login".into()));
    }
    for page in 1..=REVIEW_PAGES {
        let read = match reviews_read(&target, page, schemas) {
            Ok(read) => read,
            Err(why) => return Ok(PendingAt::Missing(why.to_string())),
        };
        let list = match answer(answers, &read) {
            None => return Err(vec![read]),
            Some(Ok(v)) => v.as_array().cloned().unwrap_or_default(),
            Some(Err(e)) => return Ok(PendingAt::Missing(format!("the PR's reviews could not be read: {e}"))),
        };
        let by = |r: &&Value| {
            r.pointer("/user/login").and_then(Value::as_str).is_some_and(|l| l.eq_ignore_ascii_case(&login))
        };
        if let Some(first) = list.iter().find(by) {
            let state = first.get("state").and_then(Value::as_str).unwrap_or_default();
            let commit = first.get("commit_id").and_then(Value::as_str).unwrap_or_default();
            return Ok(if state == "PENDING" && !commit.is_empty() {
                PendingAt::Commit(commit.to_owned())
            } else {
                PendingAt::Missing(format!(
                    "the first review of `{login}` on PR #{} is {state}, not pending: the server submits only that one",
                    target.pr
                ))
            });
        }
        if (list.len() as u64) < REVIEWS_PER_PAGE {
            break;
        }
    }
    Ok(PendingAt::Missing(format!("no review of `{login}` on PR #{} is pending", target.pr)))
}

/// A name GitHub may give an account or a repository: ASCII letters, digits, `-`, `_` (an
/// Enterprise Managed User's suffix) and `.`, neither `.` nor `..`. Empty is the server's
/// "missing" (it refuses it).
fn github_name(name: &str) -> bool {
    name.is_empty()
        || (!matches!(name, "." | "..") && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)))
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
    fn vocabulary(&self) -> &'static kit::Vocabulary {
        &VOCABULARY
    }

    /// A number beyond 2^31-1 (the server's GraphQL paths, and the review tool's decoding,
    /// wrap it to another PR's), an `owner` or `repo` that is no GitHub name (the server puts
    /// them into its REST paths unescaped: `repo: "r/pulls/7#"` reads PR 7 whatever the
    /// number), and a key of the loosely decoded tools that is not exactly one of theirs.
    fn check_parse(&self, tool: &str, args: &Map<String, Value>) -> Result<(), crate::forge_call::Ambiguity> {
        for key in ["owner", "repo"] {
            if let Some(name) = text(args, key)
                && !github_name(name)
            {
                return Err(crate::forge_call::Ambiguity::new(
                    key,
                    format!(
                        "`{name}` is no GitHub name (letters, digits, `-`, `_`, `.`): the server puts it into its \
                         URL paths unescaped, where it could name another resource"
                    ),
                ));
            }
        }
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

    fn grammar(&self) -> &crate::textref::Grammar {
        &GRAMMAR
    }

    fn state(&self, call: &Call<'_>, cx: Cx<'_>) -> Step<Effect> {
        effect::state(call, cx)
    }

    fn shown(&self, call: &Call<'_>) -> Effect {
        effect::shown(call)
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

    fn pending_review(
        &self,
        tool: &str,
        args: &Map<String, Value>,
        schemas: &dyn Schemas,
        answers: &[Answered],
    ) -> Result<PendingAt, Vec<Read>> {
        pending_review(tool, args, schemas, answers)
    }

    fn pinned_merge(&self, target: &PrTarget, head: &str, args: &Map<String, Value>) -> Option<RestCall> {
        Some(pinned_merge(target, head, args))
    }

    fn rest_base(&self, host: Option<&str>) -> Result<String, DialectError> {
        rest_base(host)
    }

    fn rest_answer(&self, call: &RestCall, url: &str, status: u16, body: &str) -> ToolAnswer {
        merge_answer(call, url, status, body)
    }

    fn pr_read(&self, target: &PrTarget, schemas: &dyn Schemas) -> Result<Read, DialectError> {
        pr_read(target, schemas)
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

    fn tip_read(&self, owner: &str, repo: &str, branch: &str, _schemas: &dyn Schemas) -> Result<Read, DialectError> {
        let mut read = kit::read_on("get_commit", None, owner, repo);
        // A branch literally named `refs/…` (the server made `refs/heads/refs/heads/x` of
        // `refs/heads/x`) is read by its full ref, never taken for the branch it names.
        let sha = if branch.starts_with("refs/") { format!("refs/heads/{branch}") } else { branch.to_owned() };
        read.arguments.insert("sha".into(), Value::from(sha));
        Ok(read)
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
}

const STATE: &str = "/state";
const BASE: &str = "/base";

/// Readers first (never blocked but by role), then writes by role, then the catch-all. The
/// same fleet as on Gitea: the author opens and maintains PRs and pushes branches; the
/// reviewer reviews; the merger merges; the controller and the reconciler change PR state;
/// the controller runs workflows and keeps the tracker.
const MATRIX: &[Entry] = &[
    read_methods("pr-read", "pull_request_read", &[(METHOD, Arg::Is(effect::PR_READ_METHODS))]),
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
    read_methods("actions-get", "actions_get", &[(METHOD, Arg::Is(effect::ACTIONS_GET_METHODS))]),
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
