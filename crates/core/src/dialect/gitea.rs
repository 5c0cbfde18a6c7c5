//! The `gitea-mcp` dialect: the official Gitea MCP server (`gitea.com/gitea/gitea-mcp`), v1.x,
//! whose consolidated tools fold many operations into one tool chosen by a `method`
//! argument. Tool names, `method` values and argument names are the server's own, read from
//! its source ([`SOURCE`]; the digest is `crates/testkit/src/forge/GITEA_MCP.md`).
//!
//! The role matrix is the fleet's (docs/policy.md): every reader is read-only for every role;
//! every write names the `method` values the server has and the roles that may use each; a
//! `method` the server does not have, and a tool the profile does not know, are refused for
//! every role. What each call *does* is [`effect`]'s statement, which the invariants judge.
//! The workflow reads a PR at `pull_number` (the v1.0 line: `index`), its head and base from
//! `pull_request_read get`, a review's verdict from `state` of `create`/`submit`.

pub mod effect;

use super::kit::{self, Call, Cx, Step};
use super::table::{self, Arg, Entry, METHOD, NOBODY, other_method, read, read_methods, write};
use super::{
    ACTION_MERGE, ACTION_OPEN, ACTION_REVIEW, Dialect, DialectError, PrTarget, Pushed, Schemas, Server, declared_key,
    number, text,
};
use crate::capability::ToolClass;
use crate::effect::{Effect, Read};
use crate::rules::Rule;
use crate::workflow::ReviewVerdict;
use serde_json::{Map, Value};

/// The `[fleet] forge` name of the official Gitea MCP server.
pub const NAME: &str = "gitea-mcp";

/// Where the tool names, `method` values and argument names were read: the upstream tree
/// after its move to the official Go MCP SDK (the MCP 2026-07-28 generation), as carried
/// unchanged under `operation/` by the fork `github.com/wjk22/gitea-mcp-oauth` at commit
/// 0303ae4f644d; checked against upstream commit a5dd03c7f0d8 (2026-03-26, the v1.0 line),
/// which has the same tool names with fewer methods and `index` for the number arguments.
pub const SOURCE: &str = "gitea-mcp operation/{pull,issue,repo,label,milestone,notification} \
     as of wjk22/gitea-mcp-oauth@0303ae4f644d (go-sdk generation); v1.0 line: upstream a5dd03c7f0d8";

/// The names a PR's number goes by: the go-sdk generation's, then the v1.0 line's.
pub const PR_NUMBER: [&str; 2] = ["pull_number", "index"];
/// The names an issue's (or a PR's: one sequence) number goes by in `issue_*`.
pub const ISSUE_NUMBER: [&str; 2] = ["issue_number", "index"];
/// The names a listing's page size goes by across releases.
pub const PAGE_SIZE: [&str; 3] = ["per_page", "perPage", "pageSize"];
/// The names `search_repos`' query goes by (the go-sdk server's, the v1.0 line's).
pub const REPO_QUERY: [&str; 2] = ["query", "keyword"];

/// The argument of a merge the forge checks atomically against the PR's head (409 when it
/// moved): the gateway sets it to the head it judged.
pub const MERGE_HEAD_KEY: &str = "head_commit_id";
/// The argument of a review naming the commit it is given at: the gateway sets it.
pub const REVIEW_COMMIT_KEY: &str = "commit_id";

/// Keys that name one thing under different spellings across the server's releases.
pub const ALIAS_GROUPS: &[&[&str]] =
    &[&["pull_number", "index"], &["issue_number", "index"], &["path", "filePath"], &["per_page", "perPage"]];

/// Keys the server always reads as integers.
pub const NUMBER_KEYS: &[&str] = &[
    "pull_number",
    "issue_number",
    "index",
    "review_id",
    "comment_id",
    "commentID",
    "page",
    "per_page",
    "perPage",
    "milestone",
];

/// The server's vocabulary: its name, launch, tools, role matrix and argument names.
static VOCABULARY: kit::Vocabulary = kit::Vocabulary {
    name: NAME,
    server: SERVER,
    surface: effect::SURFACE,
    matrix: MATRIX,
    alias_groups: ALIAS_GROUPS,
    number_keys: NUMBER_KEYS,
    merge_pin: Some(MERGE_HEAD_KEY),
    review_pin: Some(REVIEW_COMMIT_KEY),
    pending_review_note: "Gitea records a submitted pending review at the PR's head at submission (its API re-stamps the review \
         with the head: `SubmitPullReview`), so a verdict submitted is judged, and counts, at the head then",
    plot: kit::Plot {
        create_branch: "create_branch",
        read_file: "get_file_contents",
        write_file: ("create_or_update_file", "branch_name"),
        open: ("pull_request_write", Some("create")),
        approve: ("pull_request_review_write", "create", ("state", "APPROVED")),
        merge: ("pull_request_write", Some("merge"), "merge_style"),
        number: "pull_number",
    },
};

const SERVER: Server = Server {
    title: "the official Gitea MCP server (gitea-mcp)",
    process_match: &["gitea-mcp"],
    launch: &["gitea-mcp", "-t", "stdio"],
    token_env: "GITEA_ACCESS_TOKEN",
    token_flags: &["--token", "-token"],
    host_env: "GITEA_HOST",
    host_flags: &["--host", "-host", "-H", "--H"],
    default_host: None,
    prefix: "gitea",
    self_review: "Gitea refuses an approval by the pull request's own poster (422)",
};

/// The gitea-mcp dialect, reading texts with the instance's grammar.
#[derive(Clone, Debug)]
pub struct GiteaMcp {
    grammar: crate::textref::Grammar,
}

/// The dialect of an instance with Gitea's default keywords.
pub static GITEA: GiteaMcp = GiteaMcp { grammar: crate::textref::GITEA };

/// The dialect of an instance whose `app.ini` has its own closing and reopening keywords
/// (`[forge] close_keywords`, `reopen_keywords`), read besides the defaults. The gate holds
/// its dialect for the process's life (`&'static`): one per distinct list is kept, so
/// loading the same roster again makes none.
pub fn with_keywords(keywords: &crate::textref::Keywords) -> &'static GiteaMcp {
    use std::sync::{Mutex, OnceLock};
    if keywords.is_empty() {
        return &GITEA;
    }
    static MADE: OnceLock<Mutex<Vec<&'static GiteaMcp>>> = OnceLock::new();
    let mut made = MADE.get_or_init(Mutex::default).lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(d) = made.iter().find(|d| &d.grammar.instance == keywords) {
        return d;
    }
    let d: &'static GiteaMcp = Box::leak(Box::new(GiteaMcp { grammar: crate::textref::GITEA.with(keywords.clone()) }));
    made.push(d);
    d
}

/// The read answering a PR's current state: `pull_request_read get`.
pub fn pr_read(target: &PrTarget, schemas: &dyn Schemas) -> Result<Read, DialectError> {
    let mut read = kit::read_on("pull_request_read", Some("get"), &target.owner, &target.repo);
    read.arguments.insert(declared_key(schemas, "pull_request_read", &PR_NUMBER)?.into(), Value::from(target.pr));
    Ok(read)
}

/// The PR a call's arguments name (its canonical ones: one key per thing).
pub fn pr_target(args: &Map<String, Value>) -> Option<PrTarget> {
    let pr = PR_NUMBER.iter().find_map(|k| args.get(*k).and_then(number))?;
    Some(PrTarget { owner: text(args, "owner")?.to_owned(), repo: text(args, "repo")?.to_owned(), pr })
}

impl Dialect for GiteaMcp {
    fn vocabulary(&self) -> &'static kit::Vocabulary {
        &VOCABULARY
    }

    fn grammar(&self) -> &crate::textref::Grammar {
        &self.grammar
    }

    fn state(&self, call: &Call<'_>, cx: Cx<'_>) -> Step<Effect> {
        effect::state(call, cx)
    }

    fn shown(&self, call: &Call<'_>) -> Effect {
        effect::shown(&self.grammar, call)
    }

    fn pr_target(&self, tool: &str, args: &Map<String, Value>) -> Option<PrTarget> {
        matches!(tool, "pull_request_read" | "pull_request_write" | "pull_request_review_write")
            .then(|| pr_target(args))
            .flatten()
    }

    /// Read exactly as the server and Gitea read it: `state`, only for the methods that submit
    /// one (`create`, `submit`), only the literals Gitea knows. `event` is not a key it reads.
    fn review_verdict(&self, tool: &str, args: &Map<String, Value>) -> Option<ReviewVerdict> {
        if tool != "pull_request_review_write" {
            return None;
        }
        if !matches!(text(args, "method")?, "create" | "submit") {
            return None;
        }
        match text(args, "state")? {
            "APPROVED" => Some(ReviewVerdict::Approve),
            "REQUEST_CHANGES" => Some(ReviewVerdict::RequestChanges),
            _ => None,
        }
    }

    fn review_is_pinned(&self, tool: &str, args: &Map<String, Value>) -> bool {
        tool == "pull_request_review_write" && text(args, "method") == Some("create")
    }

    fn pr_read(&self, target: &PrTarget, schemas: &dyn Schemas) -> Result<Read, DialectError> {
        pr_read(target, schemas)
    }

    fn pushed(&self, tool: &str, args: &Map<String, Value>) -> Option<Pushed> {
        let (owner, repo) = (text(args, "owner")?.to_owned(), text(args, "repo")?.to_owned());
        let branch = match tool {
            "create_or_update_file" | "delete_file" => {
                text(args, "new_branch_name").or_else(|| text(args, "branch_name"))
            }
            _ => None,
        }?;
        Some(Pushed { owner, repo, branch: branch.to_owned() })
    }

    fn tip_read(&self, owner: &str, repo: &str, branch: &str, _schemas: &dyn Schemas) -> Result<Read, DialectError> {
        let mut read = kit::read_on("get_commit", None, owner, repo);
        read.arguments.insert("sha".into(), Value::from(branch));
        Ok(read)
    }

    /// `pull_request_write close`, or `issue_write update` with `state: closed` (a PR's number,
    /// when it is one: the release finds no lock otherwise).
    fn closes(&self, tool: &str, args: &Map<String, Value>) -> Option<PrTarget> {
        let closes = match tool {
            "pull_request_write" => text(args, "method") == Some("close"),
            "issue_write" => text(args, "method") == Some("update") && text(args, "state") == Some("closed"),
            _ => false,
        };
        if !closes {
            return None;
        }
        let pr = PR_NUMBER.iter().chain(&ISSUE_NUMBER).find_map(|k| args.get(*k).and_then(number))?;
        Some(PrTarget { owner: text(args, "owner")?.to_owned(), repo: text(args, "repo")?.to_owned(), pr })
    }

    fn action_call(&self, action: &str) -> Option<(&'static str, Map<String, Value>)> {
        let (tool, method) = match action {
            ACTION_MERGE => ("pull_request_write", "merge"),
            ACTION_REVIEW => ("pull_request_review_write", "create"),
            ACTION_OPEN => ("pull_request_write", "create"),
            _ => return None,
        };
        let mut args = Map::new();
        args.insert("method".into(), Value::from(method));
        Some((tool, args))
    }
}

const OUTPUT_PATH: &str = "/output_path";
const STATE: &str = "/state";

/// Readers first (never blocked but by role), then writes by method, then the catch-all.
/// The `method` lists are the server's enums, in its order.
const MATRIX: &[Entry] = &[
    // Readers are judged by method, like writers. A download that writes a file where the
    // server's process may (`output_path`) is a write no role makes; a reader's method the
    // server does not have is no role's either.
    write("read-to-file", "*_read", &[(OUTPUT_PATH, Arg::Present)], NOBODY),
    write(
        "read-download",
        "*_read",
        &[(METHOD, Arg::Is(&["download_job_log", "download_artifact", "download"]))],
        NOBODY,
    ),
    read_methods(
        "pr-read",
        "pull_request_read",
        &[(
            METHOD,
            Arg::Is(&[
                "get",
                "get_diff",
                "get_files",
                "get_status",
                "get_reviews",
                "get_review",
                "get_review_comments",
            ]),
        )],
    ),
    other_method("pr-read-other", "pull_request_read"),
    read_methods("issue-read", "issue_read", &[(METHOD, Arg::Is(&["get", "get_comments", "get_labels"]))]),
    other_method("issue-read-other", "issue_read"),
    read_methods(
        "label-read",
        "label_read",
        &[(METHOD, Arg::Is(&["list_repo_labels", "get_repo_label", "list_org_labels"]))],
    ),
    other_method("label-read-other", "label_read"),
    read_methods("milestone-read", "milestone_read", &[(METHOD, Arg::Is(&["get", "list"]))]),
    other_method("milestone-read-other", "milestone_read"),
    read_methods("notification-read", "notification_read", &[(METHOD, Arg::Is(&["list", "get"]))]),
    other_method("notification-read-other", "notification_read"),
    read_methods("wiki-read", "wiki_read", &[(METHOD, Arg::Is(&["list", "get", "get_revisions"]))]),
    other_method("wiki-read-other", "wiki_read"),
    read_methods(
        "timetracking-read",
        "timetracking_read",
        &[(METHOD, Arg::Is(&["list_issue_times", "list_repo_times", "get_my_stopwatches", "get_my_times"]))],
    ),
    other_method("timetracking-read-other", "timetracking_read"),
    // The actions, package and attachment readers: their downloads are refused above; their
    // other methods read.
    read("read", "*_read"),
    read("list", "list_*"),
    read("get", "get_*"),
    read("search", "search_*"),
    // Issues (`issue_write`: create, update, add_comment, edit_comment, add_labels,
    // remove_label, replace_labels, clear_labels).
    write("issue-create", "issue_write", &[(METHOD, Arg::Is(&["create"]))], &["author", "controller"]),
    // Gitea numbers PRs and issues in one sequence, so `update` with a `state` may close or
    // reopen a PR: that is the controller's and the reconciler's, as for PRs.
    Entry {
        name: "issue-update-state",
        tool: "issue_write",
        args: &[(METHOD, Arg::Is(&["update"])), (STATE, Arg::Present)],
        roles: &["controller", "reconciler"],
        class: Some(ToolClass::Mutating),
    },
    write("issue-update", "issue_write", &[(METHOD, Arg::Is(&["update"]))], &["author", "controller", "reconciler"]),
    write(
        "issue-comment",
        "issue_write",
        &[(METHOD, Arg::Is(&["add_comment"]))],
        &["author", "reviewer", "merger", "controller", "reconciler"],
    ),
    write(
        "issue-edit-comment",
        "issue_write",
        &[(METHOD, Arg::Is(&["edit_comment"]))],
        &["author", "reviewer", "controller", "reconciler"],
    ),
    write(
        "issue-labels",
        "issue_write",
        &[(METHOD, Arg::Is(&["add_labels", "remove_label", "replace_labels", "clear_labels"]))],
        &["author", "controller", "reconciler"],
    ),
    other_method("issue-other", "issue_write"),
    // Pull requests (`pull_request_write`: create, update, close, reopen, merge,
    // update_branch, add_reviewers, remove_reviewers): the author opens and maintains; an
    // update is the author's and never changes the state (`/state` present is no role's:
    // a reopen is the controller's `reopen`) nor the base; the controller and the reconciler close and
    // reopen; the merger alone merges, never forced past the forge's checks nor scheduled
    // for a later head (an operator's `[[rules]]` entry may allow either).
    Entry {
        name: "pr-create",
        tool: "pull_request_write",
        args: &[(METHOD, Arg::Is(&["create"]))],
        roles: &["author"],
        class: Some(ToolClass::Mutating),
    },
    write(
        "pr-maintain",
        "pull_request_write",
        &[(METHOD, Arg::Is(&["update_branch", "add_reviewers", "remove_reviewers"]))],
        &["author"],
    ),
    // Retargeting a PR is no role's: Gitea merges onto whatever base the PR has when the
    // merge runs, and no argument of the merge pins the base (a retarget racing the merge, or
    // between a review lease and the decision, would land reviewed commits on a base no
    // reviewer judged them against). Close it and open another.
    write("pr-update-base", "pull_request_write", &[(METHOD, Arg::Is(&["update"])), ("/base", Arg::Present)], NOBODY),
    write("pr-update-state", "pull_request_write", &[(METHOD, Arg::Is(&["update"])), (STATE, Arg::Present)], NOBODY),
    Entry {
        name: "pr-update",
        tool: "pull_request_write",
        args: &[(METHOD, Arg::Is(&["update"]))],
        roles: &["author"],
        class: Some(ToolClass::Mutating),
    },
    Entry {
        name: "pr-close",
        tool: "pull_request_write",
        args: &[(METHOD, Arg::Is(&["close", "reopen"]))],
        roles: &["controller", "reconciler"],
        class: Some(ToolClass::Mutating),
    },
    write(
        "pr-merge-forced",
        "pull_request_write",
        &[(METHOD, Arg::Is(&["merge"])), ("/force_merge", Arg::True)],
        NOBODY,
    ),
    write(
        "pr-merge-scheduled",
        "pull_request_write",
        &[(METHOD, Arg::Is(&["merge"])), ("/merge_when_checks_succeed", Arg::True)],
        NOBODY,
    ),
    Entry {
        name: "pr-merge",
        tool: "pull_request_write",
        args: &[(METHOD, Arg::Is(&["merge"]))],
        roles: &["merger"],
        class: Some(ToolClass::Mutating),
    },
    other_method("pr-other", "pull_request_write"),
    // Reviews (`pull_request_review_write`): every method the server has is the reviewer's.
    Entry {
        name: "review",
        tool: "pull_request_review_write",
        args: &[(
            METHOD,
            Arg::Is(&["create", "submit", "delete", "dismiss", "reply_comment", "resolve_thread", "unresolve_thread"]),
        )],
        roles: &["reviewer"],
        class: Some(ToolClass::Mutating),
    },
    other_method("review-other", "pull_request_review_write"),
    // The controller's tracker tools; the reconciler's notifications.
    write("labels", "label_write", &[(METHOD, Arg::Is(effect::LABEL_WRITE_METHODS))], &["controller"]),
    other_method("labels-other", "label_write"),
    write(
        "milestones",
        "milestone_write",
        &[(METHOD, Arg::Is(&["create", "update", "edit", "delete"]))],
        &["controller"],
    ),
    other_method("milestones-other", "milestone_write"),
    write(
        "notifications",
        "notification_write",
        &[(METHOD, Arg::Is(&["mark_read", "mark_all_read"]))],
        &["reconciler"],
    ),
    other_method("notifications-other", "notification_write"),
    // Files and branches: the author's; the merger also deletes a merged branch.
    write("files", "create_or_update_file", &[], &["author"]),
    write("file-delete", "delete_file", &[], &["author"]),
    write("branch-create", "create_branch", &[], &["author"]),
    write("branch-rename", "rename_branch", &[], &["author"]),
    write("branch-delete", "delete_branch", &[], &["author", "merger"]),
    // Anything else the server offers (wiki, actions, time tracking, packages, repositories,
    // forks, tags, releases) and any tool it may grow: no role of this fleet may.
    write("other", "*", &[], NOBODY),
];

/// The `gitea-mcp` profile's rules, in the order they decide.
pub fn rules() -> Vec<Rule> {
    table::rules_of(NAME, MATRIX)
}

#[cfg(test)]
mod tests;
