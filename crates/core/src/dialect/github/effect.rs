//! github-mcp-server's calls, each stated by what it does to the forge
//! ([`crate::effect::Effect`]), read as the server and GitHub read them
//! (`crates/testkit/src/forge/GITHUB_MCP.md`):
//!
//! * a file write (`create_or_update_file`, `delete_file`) commits to `branch`, which the
//!   server requires; `push_files` commits every file at once to `branch`, creating it from
//!   the default branch when it is missing; the server prefixes the name with `refs/heads/` as
//!   given, so `refs/heads/x` is a branch literally named `refs/heads/x` and judged by that name
//!   (protected still when it reads like a protected branch);
//! * `update_pull_request_branch` merges the PR's base into its **head** branch, which may be
//!   any branch: the head is read from the forge;
//! * `merge_pull_request` lands the PR's head on its base, pinned at the head judged: with
//!   `expectedHeadSha` where the server declares it, else by the gateway's own REST merge
//!   with `sha` (`super::pinned_merge`), so GitHub refuses (409) a head that moved;
//! * `update_pull_request` retargets with `base` and closes or reopens with `state` (any
//!   present key counts, even `""`);
//! * PRs are issues: `issue_write update` and `update_issue_state` with a `state` on a PR's
//!   number close or reopen the PR (read: is the number a PR?); a title or body edits it;
//! * the review tool decodes loosely (a Go field name or any case variant of a key is read,
//!   and a number beyond 2^31 wraps): such a call is refused, and so is any PR or issue
//!   number the server would not pass on unchanged;
//! * assigning an issue to Copilot starts GitHub's coding agent, which pushes and opens PRs
//!   of its own that no gate sees: its effect is unknown.
//!
//! [`establish`] is pure: it names the reads it still needs (`Err`) until every answer is at
//! hand, then states the effect. A read that failed leaves the effect unestablished.

use super::{GITHUB, ISSUE_NUMBER, MAX_NUMBER, PR_NUMBER};

/// github-mcp-server's merge method argument (`merge`, `squash`, `rebase`; the server's
/// default `merge`).
const MERGE_METHOD: &str = "merge_method";
use crate::dialect::kit::{
    self, Call, Cx, Pending, Step, head_branch, listed, repo_or, strip, unknown_method, unknown_tool,
};
use crate::dialect::table::{Stated, Surface};
use crate::dialect::{
    ACTION_CLOSE, ACTION_EDIT, ACTION_MERGE, ACTION_OPEN, ACTION_PUSH, ACTION_REVIEW, Dialect, DialectError, Schemas,
    declared_key, merge_issues, number, pr_texts, text, text_effects,
};
use crate::effect::{BranchMove, Effect, MergeTerms, Move, PathWrite, PrChange, PrEffect, Read, Repo};
use crate::effect::{IssueChange, IssueEffect, When};
use crate::textref::GITHUB as GRAMMAR;
use serde_json::{Map, Value};

/// The methods of `pull_request_read` (every one reads).
pub const PR_READ_METHODS: &[&str] = &[
    "get",
    "get_diff",
    "get_status",
    "get_files",
    "get_commits",
    "get_review_comments",
    "get_reviews",
    "get_comments",
    "get_check_runs",
];

/// The methods of `actions_get` (every one reads).
pub const ACTIONS_GET_METHODS: &[&str] = &[
    "get_workflow",
    "get_workflow_run",
    "get_workflow_job",
    "download_workflow_run_artifact",
    "get_workflow_run_usage",
    "get_workflow_run_logs_url",
];

/// The readers the server has, each with its `method` values (empty: none).
pub const READERS: &[(&str, &[&str])] = &[
    ("get_me", &[]),
    ("get_teams", &[]),
    ("get_team_members", &[]),
    ("ui_get", &["labels", "assignees", "milestones", "issue_types", "branches", "issue_fields", "reviewers"]),
    ("search_repositories", &[]),
    ("get_file_contents", &[]),
    ("list_commits", &[]),
    ("search_code", &[]),
    ("search_commits", &[]),
    ("get_commit", &[]),
    ("list_branches", &[]),
    ("list_tags", &[]),
    ("get_tag", &[]),
    ("list_releases", &[]),
    ("get_latest_release", &[]),
    ("get_release_by_tag", &[]),
    ("list_repository_collaborators", &[]),
    ("get_file_blame", &[]),
    ("get_repository_tree", &[]),
    ("issue_read", &["get", "get_comments", "get_sub_issues", "get_parent", "get_labels"]),
    ("search_issues", &[]),
    ("list_issues", &[]),
    ("list_issue_types", &[]),
    ("list_issue_fields", &[]),
    ("get_label", &[]),
    ("list_label", &[]),
    ("issue_dependency_read", &["get_blocked_by", "get_blocking"]),
    ("find_duplicate", &[]),
    ("pull_request_read", PR_READ_METHODS),
    ("list_pull_requests", &[]),
    ("search_pull_requests", &[]),
    ("search_users", &[]),
    ("search_orgs", &[]),
    ("actions_list", &["list_workflows", "list_workflow_runs", "list_workflow_jobs", "list_workflow_run_artifacts"]),
    ("actions_get", ACTIONS_GET_METHODS),
    ("get_job_logs", &[]),
    ("get_code_quality_finding", &[]),
    ("get_code_scanning_alert", &[]),
    ("list_code_scanning_alerts", &[]),
    ("get_secret_scanning_alert", &[]),
    ("list_secret_scanning_alerts", &[]),
    ("get_dependabot_alert", &[]),
    ("list_dependabot_alerts", &[]),
    ("list_global_security_advisories", &[]),
    ("get_global_security_advisory", &[]),
    ("list_repository_security_advisories", &[]),
    ("list_org_repository_security_advisories", &[]),
    ("list_notifications", &[]),
    ("get_notification_details", &[]),
    ("list_discussions", &[]),
    ("get_discussion", &[]),
    ("get_discussion_comments", &[]),
    ("list_discussion_categories", &[]),
    ("list_gists", &[]),
    ("get_gist", &[]),
    (
        "projects_list",
        &[
            "list_projects",
            "list_project_fields",
            "list_project_items",
            "list_project_status_updates",
            "list_project_views",
        ],
    ),
    (
        "projects_get",
        &["get_project", "get_project_field", "get_project_item", "get_project_status_update", "get_project_view"],
    ),
    ("list_starred_repositories", &[]),
    ("list_available_toolsets", &[]),
    ("get_toolset_tools", &[]),
];

/// Writes whose effect no invariant guards: `[[rules]]` decide who makes them.
pub const PLAIN_WRITES: &[(&str, &[&str])] = &[
    ("issue_write", &["create"]),
    ("add_issue_comment", &[]),
    ("sub_issue_write", &["add", "remove", "reprioritize"]),
    ("issue_dependency_write", &["add", "remove"]),
    ("create_issue", &[]),
    ("update_issue_assignees", &[]),
    ("update_issue_labels", &[]),
    ("update_issue_milestone", &[]),
    ("update_issue_type", &[]),
    ("set_issue_fields", &[]),
    ("add_sub_issue", &[]),
    ("reprioritize_sub_issue", &[]),
    ("remove_sub_issue", &[]),
    ("add_issue_reaction", &[]),
    ("add_issue_comment_reaction", &[]),
    ("request_pull_request_reviewers", &[]),
    ("request_copilot_review", &[]),
    ("update_pull_request_draft_state", &[]),
    ("add_reply_to_pull_request_comment", &[]),
    (
        "actions_run_trigger",
        &["run_workflow", "rerun_workflow_run", "rerun_failed_jobs", "cancel_workflow_run", "delete_workflow_run_logs"],
    ),
    ("label_write", &["create", "update", "delete"]),
    ("dismiss_notification", &[]),
    ("mark_all_notifications_read", &[]),
    ("manage_notification_subscription", &[]),
    ("manage_repository_notification_subscription", &[]),
    ("discussion_comment_write", &["add", "reply", "update", "delete", "mark_answer", "unmark_answer"]),
    ("create_gist", &[]),
    ("update_gist", &[]),
    (
        "projects_write",
        &[
            "add_project_item",
            "update_project_item",
            "update_project_items",
            "delete_project_item",
            "create_project_status_update",
            "create_project_view",
            "update_project_view",
            "delete_project_view",
            "create_project",
            "create_iteration_field",
        ],
    ),
    ("star_repository", &[]),
    ("unstar_repository", &[]),
    ("create_repository", &[]),
    ("fork_repository", &[]),
    ("delete_repository", &[]),
];

/// The review tools, each with its `method` values: every one is the reviewer's workflow
/// action.
pub const REVIEWS: &[(&str, &[&str])] = &[
    (
        "pull_request_review_write",
        &["create", "submit_pending", "delete_pending", "resolve_thread", "unresolve_thread"],
    ),
    ("add_comment_to_pending_review", &[]),
    ("create_pull_request_review", &[]),
    ("submit_pending_pull_request_review", &[]),
    ("delete_pending_pull_request_review", &[]),
    ("add_pull_request_review_comment", &[]),
    ("resolve_review_thread", &[]),
    ("unresolve_review_thread", &[]),
    ("add_pull_request_review_comment_reaction", &[]),
];

/// The tools whose arguments the server decodes loosely (`mapstructure.WeakDecode`), each
/// with the keys it reads: a Go field name, or any case variant of a key, reaches the field.
pub const LOOSE: &[(&str, &[&str])] = &[
    ("pull_request_review_write", &["method", "owner", "repo", "pullNumber", "body", "event", "commitID", "threadId"]),
    ("assign_copilot_to_issue", &["owner", "repo", "issue_number", "base_ref", "custom_instructions"]),
];

/// The calls whose effect is stated beyond "reads" or "changes what no invariant guards".
pub const STATED: &[Stated] = {
    use crate::effect::Invariant::{PrState, ProtectedBranch, ProtectedPath, Retarget, UnknownEffect, UnpinnedMerge};
    &[
        Stated {
            tool: "create_pull_request",
            method: "",
            effect: "opens a PR (its creator is recorded; the issues its title and body reference are judged by the issue lock); the answer names it by URL",
            invariants: &[],
        },
        Stated {
            tool: "update_pull_request",
            method: "",
            effect: "edits the PR's title or body (the issue lock judges them); with `base`, retargets it; with `state`, closes or reopens it (any present key counts, even `\"\"`)",
            invariants: &[Retarget, PrState],
        },
        Stated {
            tool: "update_pull_request_title",
            method: "",
            effect: "edits the PR's title (the issue lock judges it)",
            invariants: &[],
        },
        Stated {
            tool: "update_pull_request_body",
            method: "",
            effect: "edits the PR's body (the issue lock judges it)",
            invariants: &[],
        },
        Stated {
            tool: "update_pull_request_state",
            method: "",
            effect: "closes or reopens the PR",
            invariants: &[PrState],
        },
        Stated {
            tool: "merge_pull_request",
            method: "",
            effect: "lands the PR's head on its base, read from the forge (the PR workflow judges it: an independent approval at that head and base, a merge lease), pinned at that head: with `expectedHeadSha` where the server declares it; where it does not (every release up to v1.10.1), the gateway makes the judged merge itself through GitHub's REST merge with `sha` (the member's own token and `GITHUB_HOST`), which GitHub refuses (409) once the head moved, and answers as the server would",
            invariants: &[UnpinnedMerge],
        },
        Stated {
            tool: "update_pull_request_branch",
            method: "",
            effect: "merges the PR's base into its head branch, read from the forge (any branch: the default one too); the new head's pusher is recorded",
            invariants: &[ProtectedBranch],
        },
        Stated {
            tool: "issue_write",
            method: "update",
            effect: "edits the issue; on a PR's number (read from the forge: PRs are issues), a `state` closes or reopens the PR and a title or body edits it",
            invariants: &[PrState],
        },
        Stated {
            tool: "update_issue_state",
            method: "",
            effect: "closes or reopens the issue; on a PR's number (read from the forge), the PR",
            invariants: &[PrState],
        },
        Stated {
            tool: "update_issue_title",
            method: "",
            effect: "edits the issue's title; on a PR's number, the PR's (the issue lock judges it)",
            invariants: &[],
        },
        Stated {
            tool: "update_issue_body",
            method: "",
            effect: "edits the issue's body; on a PR's number, the PR's (the issue lock judges it)",
            invariants: &[],
        },
        Stated {
            tool: "create_or_update_file",
            method: "",
            effect: "commits to `branch` (required: the server writes no default); the pusher is recorded",
            invariants: &[ProtectedBranch, ProtectedPath],
        },
        Stated {
            tool: "delete_file",
            method: "",
            effect: "commits a deletion to `branch`",
            invariants: &[ProtectedBranch, ProtectedPath],
        },
        Stated {
            tool: "push_files",
            method: "",
            effect: "commits every file of `files` at once to `branch`, creating it from the default branch when it is missing; the pusher is recorded",
            invariants: &[ProtectedBranch, ProtectedPath],
        },
        Stated { tool: "create_branch", method: "", effect: "creates `branch`", invariants: &[ProtectedBranch] },
        Stated {
            tool: "enable_toolset",
            method: "",
            effect: "turns a toolset on in this server (releases before v1.1.0): its tools appear, each judged when called; the forge is not changed",
            invariants: &[],
        },
        Stated {
            tool: "assign_copilot_to_issue",
            method: "",
            effect: "starts GitHub's Copilot coding agent, which pushes a branch and opens a PR of its own that no gate sees: unknown",
            invariants: &[UnknownEffect],
        },
        Stated {
            tool: "assign_copilot_to_issue_with_intent",
            method: "",
            effect: "as `assign_copilot_to_issue`: unknown",
            invariants: &[UnknownEffect],
        },
    ]
};

/// The calls whose texts GitHub acts on later, and what it does with them (its comments and
/// review bodies close nothing).
pub const TEXTS: &[crate::dialect::table::Texts] = {
    use crate::dialect::table::Texts;
    const LANDING: &str = "a closing keyword closes the issue it names (`#N`, `owner/name#N`, `GH-N`, its URL) when \
                           the commit reaches the default branch: no role but the controller and the reconciler may \
                           write one (`issue-state`)";
    const AT_MERGE: &str = "a closing keyword in the body links the issue, closed when the PR merges into the default \
                            branch (the title too, read generously: a squash carries it onto the base); the author may \
                            name the issues it holds the lock of, no other role any (`issue-state`)";
    &[
        Texts { tool: "create_or_update_file", method: "", texts: "`message`", acts: LANDING },
        Texts { tool: "delete_file", method: "", texts: "`message`", acts: LANDING },
        Texts { tool: "push_files", method: "", texts: "`message`", acts: LANDING },
        Texts { tool: "create_pull_request", method: "", texts: "`title`, `body`", acts: AT_MERGE },
        Texts { tool: "update_pull_request", method: "", texts: "`title`, `body`", acts: AT_MERGE },
        Texts { tool: "update_pull_request_title", method: "", texts: "`title`", acts: AT_MERGE },
        Texts { tool: "update_pull_request_body", method: "", texts: "`body`", acts: AT_MERGE },
        Texts {
            tool: "issue_write",
            method: "update",
            texts: "`title`, `body`, on a PR's number; `state`, on an issue's",
            acts: "a PR's title and body: as `update_pull_request`; an issue's `state` closes or reopens it, the controller's and the reconciler's (`issue-state`)",
        },
        Texts {
            tool: "update_issue_state",
            method: "",
            texts: "`state`, on an issue's number",
            acts: "closes or reopens the issue: the controller's and the reconciler's (`issue-state`)",
        },
        Texts {
            tool: "merge_pull_request",
            method: "",
            texts: "`commit_title`, `commit_message`; the PR's title and body (read from the forge)",
            acts: "the merge closes the issues its PR's texts name with a keyword; the merge commit lands on the base now, and its own message may close only those (`issue-state`)",
        },
    ]
};

/// What the reference page (`docs/reference/github-mcp.md`) is built from.
pub const SURFACE: Surface = Surface {
    intro: "# The github-mcp dialect\n\nEvery tool and `method` of GitHub's official MCP server the forge dialect \
            states (`[fleet] forge = \"github-mcp\"`): what a call does to the forge, the invariants it may meet \
            (judged for every call, whoever makes it, below every rule and approval), and the roles the built-in \
            profile lets make it. A tool or method not listed here has no statement: its effect is unknown and it \
            is refused (`unknown-effect`). The server's toolsets (`--toolsets`), `--read-only` and feature flags \
            choose which of these it lists. Generated from `fleetgate_core::dialect::github`.",
    readers: READERS,
    stated: STATED,
    reviews: REVIEWS,
    review_effect: "a review action (an approval or a request-changes, `event`, is judged by the PR workflow: a review \
                    lease at the head; a review made is pinned with `commitID`)",
    review_invariants: &[],
    plain: PLAIN_WRITES,
    texts: TEXTS,
    outro: "No tool of this server deletes a branch, forces a merge or schedules one. GitHub's \"automatically delete \
            head branches\" setting, which no tool reads, may retarget or close the PRs based on a merged PR's head: \
            approvals are for a base, so a retargeted PR needs a new one. The invariants, what each holds and what \
            lifting it gives up: [the policy chapter](../policy.md#invariants).",
};

/// The repository read: `search_repositories` for `repo:OWNER/NAME` (forks included: GitHub's
/// search leaves them out unless asked).
pub fn repo_read(owner: &str, repo: &str, schemas: &dyn Schemas) -> Result<Read, DialectError> {
    let mut args = Map::new();
    let key = declared_key(schemas, "search_repositories", &["query"])?;
    args.insert(key.into(), Value::from(format!("repo:{owner}/{repo} fork:true")));
    Ok(Read::new("search_repositories", args))
}

/// `search_repositories`' entry for `owner/repo` (any case): its default branch.
pub fn default_branch(answer: &Value, owner: &str, repo: &str) -> Result<String, DialectError> {
    let items = answer
        .get("items")
        .and_then(Value::as_array)
        .ok_or_else(|| DialectError::Answer("`search_repositories` answered no items".into()))?;
    let entry = kit::repo_entry(items, "search_repositories", owner, repo)?;
    kit::default_branch_of(entry, "search_repositories", owner, repo)
}

/// `search_repositories`' entry for `owner/repo` says it is a fork.
fn is_fork(answer: &Value, owner: &str, repo: &str) -> bool {
    answer
        .get("items")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|e| kit::names_repo(e, owner, repo) && e.get("fork").and_then(Value::as_bool) == Some(true))
}

fn repository(cx: Cx<'_>, owner: &str, repo: &str) -> Step<String> {
    Ok(default_branch(cx.ask(repo_read(owner, repo, cx.schemas)?)?, owner, repo)?)
}

/// What a merge does to issues ([`merge_issues`]): its PR's title and body (`answer`), which
/// GitHub closes when the PR merges into the default branch, and the merge commit's own
/// `commit_title` and `commit_message`, landing on the base now.
fn merge_texts(args: &Map<String, Value>, answer: &Value, base_repo: &Repo) -> Vec<IssueEffect> {
    let own: Vec<(&str, &str)> =
        ["commit_title", "commit_message"].into_iter().filter_map(|k| text(args, k).map(|t| (k, t))).collect();
    merge_issues(&GRAMMAR, answer, &[], &own, base_repo)
}

/// The number under `key`, as the server passes it on: a whole number from 1 to 2^31-1
/// (beyond, its GraphQL paths wrap it to another PR's).
fn bounded(tool: &str, args: &Map<String, Value>, key: &str) -> Step<u64> {
    let Some(value) = args.get(key) else {
        return Err(Pending::Failed(format!("`{tool}` names no {key}: the server refuses it")));
    };
    match number(value) {
        Some(n) if (1..=MAX_NUMBER).contains(&n) => Ok(n),
        _ => Err(Pending::Failed(format!(
            "`{tool}`'s {key} is {value}: the server passes on only 1 to {MAX_NUMBER} unchanged (beyond, it wraps to \
             another number)"
        ))),
    }
}

/// A loosely decoded tool's arguments, each under exactly the key it is read by: a Go field
/// name (`Event`), another case (`EVENT`), or an unknown key could reach a field the gate did
/// not judge.
fn loose_keys(tool: &str, args: &Map<String, Value>) -> Step<()> {
    let Some((_, keys)) = LOOSE.iter().find(|(t, _)| *t == tool) else { return Ok(()) };
    for key in args.keys() {
        if !keys.contains(&key.as_str()) {
            return Err(Pending::Failed(format!(
                "`{tool}` reads its arguments ignoring case and by Go field name: `{key}` is not one of its keys \
                 ({}), and may reach a field the gate did not judge",
                keys.join(", ")
            )));
        }
    }
    Ok(())
}

/// What a call's arguments alone show when its statement needs a read (replay judges with
/// it): a merge the gate let through carries its pin (replay keeps the forwarded arguments);
/// a commit's message closes what it names when the commit lands.
pub(super) fn shown(call: &Call<'_>) -> Effect {
    let (tool, args) = (call.tool, call.args);
    match tool {
        "merge_pull_request" => Effect {
            merge: args.get(PR_NUMBER).and_then(number).map(|pr| merge_terms(args, pr)),
            ..Effect::action(ACTION_MERGE)
        },
        "create_or_update_file" | "delete_file" | "push_files" => {
            let landing = When::Landing { branch: strip(text(args, "branch").unwrap_or_default()).to_owned() };
            let message = text(args, "message").unwrap_or_default();
            Effect {
                issues: text_effects(&GRAMMAR, &call.here(), "message", message, &landing, None),
                ..Effect::write()
            }
        }
        _ => Effect::write(),
    }
}

/// A merge's terms: never forced nor scheduled (no tool can), pinned by the server's
/// `expectedHeadSha` where the schema declares it, else by the gateway's own REST merge with
/// `sha`: pinned either way.
fn merge_terms(args: &Map<String, Value>, pr: u64) -> MergeTerms {
    MergeTerms {
        pr,
        forced: false,
        scheduled: false,
        pinnable: true,
        style: text(args, MERGE_METHOD).map(str::to_owned),
    }
}

/// Why a write sets GitHub's Copilot coding agent to work (which pushes and opens PRs of its
/// own that no gate sees): Copilot among an issue's assignees, or `@copilot` in a text, which
/// on a Copilot PR makes it push a new head.
fn copilot(tool: &str, args: &Map<String, Value>) -> Option<String> {
    let assigned = ["assignees", "reviewers"].iter().any(|k| {
        args.get(*k)
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().filter_map(Value::as_str).any(|who| who.to_ascii_lowercase().contains("copilot")))
    });
    if assigned {
        return Some(format!(
            "`{tool}` names Copilot among the assignees: GitHub's coding agent starts and pushes code of its own that no gate sees"
        ));
    }
    let mentioned =
        ["body", "title"].iter().any(|k| text(args, k).is_some_and(|t| t.to_ascii_lowercase().contains("@copilot")));
    mentioned.then(|| {
        format!("`{tool}` mentions @copilot: on a Copilot PR its coding agent pushes a new head that no gate sees")
    })
}

/// What a call's arguments refuse, or what its tool's table states, before any tool is
/// stated by name (`None`: stated by name).
fn refused_or_listed(tool: &str, method: Option<&str>, args: &Map<String, Value>) -> Step<Option<Effect>> {
    loose_keys(tool, args)?;
    if !READERS.iter().any(|(t, _)| *t == tool)
        && let Some(why) = copilot(tool, args)
    {
        return Ok(Some(Effect::unknown(why)));
    }
    // The server asks for reviewers after the PR exists and answers an error when one fails:
    // the PR would stand with its creator unrecorded.
    if tool == "create_pull_request" && args.get("reviewers").and_then(Value::as_array).is_some_and(|r| !r.is_empty()) {
        return Ok(Some(Effect::unknown(
            "`create_pull_request` with `reviewers` may create the PR and then fail, leaving its creator unrecorded: \
             open it without, then request reviewers"
                .into(),
        )));
    }
    if args.get("allow_symlink_write") == Some(&Value::Bool(true)) {
        return Ok(Some(Effect::unknown(format!(
            "`{tool}` with `allow_symlink_write` writes through a symbolic link, to a path the gate does not see"
        ))));
    }
    if let Some(known) = listed(READERS, tool, method) {
        return Ok(Some(if known { Effect::read() } else { Effect::unknown(unknown_method(tool, method)) }));
    }
    if let Some(known) = listed(REVIEWS, tool, method) {
        if !known {
            return Ok(Some(Effect::unknown(unknown_method(tool, method))));
        }
        if args.contains_key(PR_NUMBER) {
            bounded(tool, args, PR_NUMBER)?;
        }
        return Ok(Some(Effect::action(ACTION_REVIEW)));
    }
    Ok((listed(PLAIN_WRITES, tool, method) == Some(true)).then(Effect::write))
}

/// The statement of `call` (its canonical arguments), given the forge's answers so far in
/// `cx`: `Err` names the reads still to make, or why the effect cannot be established.
pub(super) fn state(call: &Call<'_>, cx: Cx<'_>) -> Step<Effect> {
    let (tool, args, method) = (call.tool, call.args, call.method());
    if let Some(effect) = refused_or_listed(tool, method, args)? {
        return Ok(effect);
    }
    let (owner, repo) = call.owner_repo();
    let here = call.here();
    match tool {
        "enable_toolset" => Ok(Effect::read()),
        "assign_copilot_to_issue" | "assign_copilot_to_issue_with_intent" => Ok(Effect::unknown(format!(
            "`{tool}` starts GitHub's Copilot coding agent, which pushes and opens PRs of its own that no gate sees"
        ))),
        "create_pull_request" => Ok(Effect {
            issues: pr_texts(&GRAMMAR, args, &here, &When::AtMerge { pr: None }),
            ..Effect::action(ACTION_OPEN)
        }),
        "update_pull_request"
        | "update_pull_request_title"
        | "update_pull_request_body"
        | "update_pull_request_state" => pr_update(tool, args, &here),
        "merge_pull_request" => merge(args, cx, (owner, repo)),
        "update_pull_request_branch" => update_branch(args, cx, (owner, repo)),
        "issue_write" if method == Some("update") => issue_update(tool, args, cx, &here, &["state", "title", "body"]),
        "issue_write" => Ok(Effect::unknown(unknown_method(tool, method))),
        "update_issue_state" => issue_update(tool, args, cx, &here, &["state"]),
        "update_issue_title" => issue_update(tool, args, cx, &here, &["title"]),
        "update_issue_body" => issue_update(tool, args, cx, &here, &["body"]),
        "create_or_update_file" | "delete_file" | "push_files" => file_write(tool, args, cx, (owner, repo)),
        "create_branch" => {
            let Some(branch) = text(args, "branch") else {
                return Err(Pending::Failed("`create_branch` names no branch: the server refuses it".into()));
            };
            let default = repository(cx, owner, repo)?;
            Ok(Effect {
                branches: vec![BranchMove { repo: here, branch: branch.to_owned(), how: Move::Create }],
                defaults: vec![default],
                ..Effect::write()
            })
        }
        _ => Ok(Effect::unknown(unknown_tool(super::NAME, tool, method))),
    }
}

/// `update_pull_request` (a retarget with `base`, a close or reopen with `state`, an edit with
/// `title` or `body`) and its one-field tools.
fn pr_update(tool: &str, args: &Map<String, Value>, here: &Repo) -> Step<Effect> {
    let number = bounded(tool, args, PR_NUMBER)?;
    let on = |change: PrChange| PrEffect { repo: here.clone(), pr: number, change };
    match tool {
        "update_pull_request" => {
            let mut prs = Vec::new();
            if let Some(base) = args.get("base") {
                prs.push(on(PrChange::Retarget { to: strip(base.as_str().unwrap_or_default()).to_owned() }));
            }
            let mut action = ACTION_EDIT;
            if let Some(state) = args.get("state") {
                let to = state.as_str().unwrap_or_default().to_owned();
                prs.push(on(PrChange::State { to, by: "update_pull_request".into() }));
                action = ACTION_CLOSE;
            }
            if ["title", "body"].iter().any(|k| args.contains_key(*k)) {
                prs.push(on(PrChange::Text));
            }
            let issues = pr_texts(&GRAMMAR, args, here, &When::AtMerge { pr: Some(number) });
            Ok(Effect { prs, issues, ..Effect::action(action) })
        }
        "update_pull_request_state" => {
            let to = text(args, "state").unwrap_or_default().to_owned();
            let change = PrChange::State { to, by: tool.into() };
            Ok(Effect { prs: vec![on(change)], ..Effect::action(ACTION_CLOSE) })
        }
        _ => {
            let issues = pr_texts(&GRAMMAR, args, here, &When::AtMerge { pr: Some(number) });
            Ok(Effect { prs: vec![on(PrChange::Text)], issues, ..Effect::action(ACTION_EDIT) })
        }
    }
}

/// `merge_pull_request`: the PR's head lands on its base, both read from the forge.
fn merge(args: &Map<String, Value>, cx: Cx<'_>, (owner, repo): (&str, &str)) -> Step<Effect> {
    let number = bounded("merge_pull_request", args, PR_NUMBER)?;
    let answer = cx.pr_answer(&GITHUB, owner, repo, number)?;
    let facts = GITHUB.pr_facts(answer)?;
    let base_repo = repo_or(facts.repo.as_deref(), &Repo::new(owner, repo));
    let mut effect = Effect {
        merge: Some(merge_terms(args, number)),
        prs: vec![PrEffect { repo: base_repo.clone(), pr: number, change: PrChange::Merged }],
        issues: merge_texts(args, answer, &base_repo),
        ..Effect::action(ACTION_MERGE)
    };
    if let Some(base) = &facts.base_ref {
        effect.branches.push(BranchMove {
            repo: base_repo,
            branch: strip(base).to_owned(),
            how: Move::Merge { pr: number },
        });
    }
    Ok(effect)
}

/// `update_pull_request_branch`: the PR's base merged into its head branch, read from the
/// forge.
fn update_branch(args: &Map<String, Value>, cx: Cx<'_>, (owner, repo): (&str, &str)) -> Step<Effect> {
    let number = bounded("update_pull_request_branch", args, PR_NUMBER)?;
    let facts = cx.pr(&GITHUB, owner, repo, number)?;
    let head = head_branch(&facts, number)?;
    let here = Repo::new(owner, repo);
    let head_repo = repo_or(facts.head_repo.as_deref(), &here);
    let base_repo = repo_or(facts.repo.as_deref(), &here);
    // A head in a fork — another repository than the PR's base (both named by the
    // forge in one read) that the forge reports as a fork — is the fork's branch: the
    // fork's default branch is not this repository's, and protects nothing here. (The
    // roster's own names still judge it by name.)
    let (h_owner, h_name) = head_repo.0.split_once('/').unwrap_or((owner, repo));
    let found = cx.ask(repo_read(h_owner, h_name, cx.schemas)?)?;
    let fork = head_repo != base_repo && is_fork(found, h_owner, h_name);
    let defaults = if fork { Vec::new() } else { vec![default_branch(found, h_owner, h_name)?] };
    let branch =
        BranchMove { repo: head_repo, branch: strip(&head).to_owned(), how: Move::UpdateFromBase { pr: number } };
    Ok(Effect { branches: vec![branch], defaults, ..Effect::action(ACTION_PUSH) })
}

/// `create_or_update_file`, `delete_file`, `push_files`: commits to `branch`, which the
/// server requires.
fn file_write(tool: &str, args: &Map<String, Value>, cx: Cx<'_>, (owner, repo): (&str, &str)) -> Step<Effect> {
    let here = Repo::new(owner, repo);
    // `delete_file` and `push_files` prefix the name with `refs/heads/` as given:
    // `refs/heads/x` is a branch literally named so, judged by that name (one that reads
    // like a protected branch is still protected: `Protection::branch_rule` reads past
    // the prefix).
    let Some(branch) = text(args, "branch") else {
        return Err(Pending::Failed(format!("`{tool}` names no branch: the server refuses it")));
    };
    let default = repository(cx, owner, repo)?;
    let branches = vec![BranchMove { repo: here.clone(), branch: branch.to_owned(), how: Move::Write }];
    let paths: Vec<PathWrite> = if tool == "push_files" {
        // A missing branch is made from the default branch first: judged as the
        // write it is (a protected name is refused either way).
        let files = args.get("files").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        files
            .iter()
            .map(|f| PathWrite {
                branch: branch.to_owned(),
                path: f.get("path").and_then(Value::as_str).unwrap_or_default().to_owned(),
            })
            .collect()
    } else {
        // The server trims one leading `/`.
        let path = text(args, "path").unwrap_or_default();
        vec![PathWrite { branch: branch.to_owned(), path: path.strip_prefix('/').unwrap_or(path).to_owned() }]
    };
    // `create_or_update_file` hands it to the contents API as given, which may read a
    // full ref name as the branch it names or as a branch literally so named: judged as
    // the write it may be (`refs/heads/main` is protected) and refused as unknown.
    let unknown = (tool == "create_or_update_file" && branch.starts_with("refs/")).then(|| {
        format!(
            "`create_or_update_file` on `{branch}`: GitHub's contents API may read a full ref name as the \
             branch it names or as a branch literally so named, which one was not determined; name the \
             branch by its plain name"
        )
    });
    // The commit's message acts when the commit reaches the default branch.
    let message = text(args, "message").unwrap_or_default();
    let landing = When::Landing { branch: branch.to_owned() };
    let issues = text_effects(&GRAMMAR, &here, "message", message, &landing, None);
    Ok(Effect { branches, paths, defaults: vec![default], issues, unknown, ..Effect::action(ACTION_PUSH) })
}

/// An issue update that touches `keys`: on a PR's number (GitHub numbers PRs and issues in
/// one sequence), a `state` closes or reopens the PR and a title or body edits it.
fn issue_update(tool: &str, args: &Map<String, Value>, cx: Cx<'_>, here: &Repo, keys: &[&str]) -> Step<Effect> {
    if !keys.iter().any(|k| args.contains_key(*k)) {
        return Ok(Effect::write());
    }
    let number = bounded(tool, args, ISSUE_NUMBER)?;
    let (owner, repo) = (text(args, "owner").unwrap_or_default(), text(args, "repo").unwrap_or_default());
    if !cx.is_pr(&GITHUB, owner, repo, number)? {
        // An issue's state, changed by the call (its texts close nothing).
        let to = args.get("state").filter(|_| keys.contains(&"state")).map(|s| s.as_str().unwrap_or_default());
        let by = if tool == "issue_write" { "issue_write update".to_owned() } else { tool.to_owned() };
        let issues = to.map(|to| IssueEffect {
            repo: here.clone(),
            issue: number,
            change: IssueChange::State { to: to.to_owned(), by },
        });
        return Ok(Effect { issues: issues.into_iter().collect(), ..Effect::write() });
    }
    let mut prs = Vec::new();
    let mut action = ACTION_EDIT;
    if let Some(state) = args.get("state").filter(|_| keys.contains(&"state")) {
        let to = state.as_str().unwrap_or_default().to_owned();
        let by = if tool == "issue_write" { "issue_write update".to_owned() } else { tool.to_owned() };
        prs.push(PrEffect { repo: here.clone(), pr: number, change: PrChange::State { to, by } });
        action = ACTION_CLOSE;
    }
    let mut issues = Vec::new();
    if ["title", "body"].iter().any(|k| keys.contains(k) && args.contains_key(*k)) {
        prs.push(PrEffect { repo: here.clone(), pr: number, change: PrChange::Text });
        let sent: Map<String, Value> =
            args.iter().filter(|(k, _)| keys.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect();
        issues = pr_texts(&GRAMMAR, &sent, here, &When::AtMerge { pr: Some(number) });
    }
    Ok(Effect { prs, issues, ..Effect::action(action) })
}

#[cfg(test)]
mod tests;
