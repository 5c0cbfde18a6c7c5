//! Built-in rule profiles for known downstream servers (`[fleet] forge = "…"`).
//!
//! `gitea-mcp`: the official Gitea MCP server (`gitea.com/gitea/gitea-mcp`), v1.x, whose
//! consolidated tools fold many operations into one tool chosen by a `method` argument. The
//! role matrix is the fleet's (docs/policy.md, "Argument-aware policy"); tool names, `method` values and argument names are the server's
//! own, read from its source ([`GITEA_MCP_SOURCE`]; the digest is
//! `crates/testkit/src/forge/GITEA_MCP.md`). Every reader is read-only for
//! every role; every write names the `method` values the server has and the roles that may
//! use each; a `method` the server does not have, and a tool the profile does not know, are
//! refused for every role (fail closed: the server may grow a tool or a method the fleet has
//! not decided about).
//!
//! Read against that source, the role matrix names two things the server does not have:
//! `issue_write` `add_dependency`/`remove_dependency` and a `project_write` tool. The
//! profile has no rule for them, so they are refused like any unknown call.

pub mod effect;

use crate::capability::ToolClass;
use crate::rules::{ArgMatch, Rule};
use serde_json::Value;

/// The profile name of the official Gitea MCP server.
pub const GITEA_MCP: &str = "gitea-mcp";

/// Where the tool names, `method` values and argument names of [`gitea_mcp_rules`] were
/// read: the upstream tree after its move to the official Go MCP SDK (the MCP 2026-07-28
/// generation), as carried unchanged under `operation/` by the fork
/// `github.com/wjk22/gitea-mcp-oauth` at commit 0303ae4f644d; checked against upstream commit
/// a5dd03c7f0d8 (2026-03-26, the v1.0 line), which has the same tool names with fewer
/// methods and `index` for the number arguments.
pub const GITEA_MCP_SOURCE: &str = "gitea-mcp operation/{pull,issue,repo,label,milestone,notification} \
     as of wjk22/gitea-mcp-oauth@0303ae4f644d (go-sdk generation); v1.0 line: upstream a5dd03c7f0d8";

/// The argument naming the pull request in `pull_request_read`, `pull_request_write` and
/// `pull_request_review_write` (the v1.0 line called it [`LEGACY_NUMBER_ARG`]).
pub const PR_NUMBER_ARG: &str = "pull_number";
/// The argument naming the issue (or pull request: Gitea numbers both in one sequence) in
/// `issue_read` and `issue_write` (the v1.0 line called it [`LEGACY_NUMBER_ARG`]).
pub const ISSUE_NUMBER_ARG: &str = "issue_number";
/// The v1.0 line's name for both number arguments.
pub const LEGACY_NUMBER_ARG: &str = "index";

/// The workflow action of a merge (the PR workflow reads it).
pub const ACTION_MERGE: &str = "merge";
/// The workflow action of a review decision.
pub const ACTION_REVIEW: &str = "review";
/// The workflow action of opening a pull request (its creator is recorded, for independence).
pub const ACTION_OPEN: &str = "open";
/// The workflow action of editing a PR's title or body (its issue references are judged).
pub const ACTION_EDIT: &str = "edit";
/// The workflow action of closing a PR (its review-decision locks become moot).
pub const ACTION_CLOSE: &str = "close";
/// The workflow action of a file write, which pushes a commit (its pusher is recorded: an
/// approval of that head from the pushing session is not independent).
pub const ACTION_PUSH: &str = "push";

/// What one argument of a matching call must be.
#[derive(Clone, Copy)]
enum Arg {
    /// One of these strings.
    Is(&'static [&'static str]),
    /// Any value.
    Present,
    /// The boolean `true`.
    True,
}

struct Entry {
    name: &'static str,
    tool: &'static str,
    args: &'static [(&'static str, Arg)],
    roles: &'static [&'static str],
    class: Option<ToolClass>,
}

const fn read(name: &'static str, tool: &'static str) -> Entry {
    Entry { name, tool, args: &[], roles: EVERY, class: Some(ToolClass::ReadOnly) }
}

/// A reader judged by method: these `method` values read, for every role.
const fn read_methods(name: &'static str, tool: &'static str, args: &'static [(&'static str, Arg)]) -> Entry {
    Entry { name, tool, args, roles: EVERY, class: Some(ToolClass::ReadOnly) }
}

const fn write(
    name: &'static str,
    tool: &'static str,
    args: &'static [(&'static str, Arg)],
    roles: &'static [&'static str],
) -> Entry {
    Entry { name, tool, args, roles, class: Some(ToolClass::Mutating) }
}

/// A method-dispatched tool's last rule: any other `method` is no role's. (A call without a
/// `method` falls to the profile's catch-all; the server refuses it either way.)
const fn other_method(name: &'static str, tool: &'static str) -> Entry {
    write(name, tool, &[(METHOD, Arg::Present)], NOBODY)
}

const METHOD: &str = "/method";
const OUTPUT_PATH: &str = "/output_path";
const STATE: &str = "/state";
const EVERY: &[&str] = &["*"];
const NOBODY: &[&str] = &[];

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
    write(
        "labels",
        "label_write",
        &[(
            METHOD,
            Arg::Is(&[
                "create_repo_label",
                "edit_repo_label",
                "delete_repo_label",
                "create_org_label",
                "edit_org_label",
                "delete_org_label",
            ]),
        )],
        &["controller"],
    ),
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

fn matcher(arg: Arg) -> ArgMatch {
    match arg {
        Arg::Is(values) => ArgMatch::OneOf(values.iter().map(|v| Value::from(*v)).collect()),
        Arg::Present => ArgMatch::Present,
        Arg::True => ArgMatch::OneOf(vec![Value::Bool(true)]),
    }
}

/// The `gitea-mcp` profile's rules, in the order they decide.
pub fn gitea_mcp_rules() -> Vec<Rule> {
    MATRIX
        .iter()
        .map(|entry| Rule {
            origin: format!("{GITEA_MCP}:{}", entry.name),
            tool: entry.tool.to_owned(),
            args: entry.args.iter().map(|(pointer, arg)| ((*pointer).to_owned(), matcher(*arg))).collect(),
            roles: entry.roles.iter().map(|r| (*r).to_owned()).collect(),
            class: entry.class,
            // What a call *is* (its workflow action) is the dialect's statement of its
            // effect (`effect::establish`), never a rule's.
            action: None,
            ask: false,
        })
        .collect()
}

#[cfg(test)]
mod tests;
