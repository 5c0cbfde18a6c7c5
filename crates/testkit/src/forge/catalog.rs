//! The tools the fixture lists: the real server's names, argument names, types, enums,
//! required lists and annotations (readers `readOnlyHint`, deletions `destructiveHint`), as
//! `GITEA_MCP.md` records them. The descriptions are the fixture's own words.

use serde_json::{Map, Value, json};

/// How the listing differs from the real server's, for tests of pinned tool definitions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Variant {
    /// `pull_request_write` has another description.
    pub changed_description: bool,
    /// `pull_request_write`'s `method` enum has one more value (`lock`).
    pub new_method: bool,
    /// A push races every merge (not a listing change).
    pub race_merge: bool,
    /// `pull_request_write` lists no `head_commit_id` (a server whose merge cannot be pinned).
    pub no_head_pin: bool,
    /// The v1.0 release line's names: `index` for a PR's or an issue's number, `perPage`,
    /// `search_repos`' `keyword`.
    pub release_v1: bool,
    /// `search_repos` declares `q` (a release whose key no dialect knows).
    pub renamed_query: bool,
}

/// The `method` values of `pull_request_write`.
pub const PR_WRITE_METHODS: &[&str] =
    &["create", "update", "close", "reopen", "merge", "update_branch", "add_reviewers", "remove_reviewers"];
/// The `method` values of `pull_request_read`.
pub const PR_READ_METHODS: &[&str] =
    &["get", "get_diff", "get_files", "get_status", "get_reviews", "get_review", "get_review_comments"];
/// The `method` values of `pull_request_review_write`.
pub const REVIEW_WRITE_METHODS: &[&str] =
    &["create", "submit", "delete", "dismiss", "reply_comment", "resolve_thread", "unresolve_thread"];
/// The `method` values of `issue_write`.
pub const ISSUE_WRITE_METHODS: &[&str] = &[
    "create",
    "update",
    "add_comment",
    "edit_comment",
    "add_labels",
    "remove_label",
    "replace_labels",
    "clear_labels",
];
/// The `method` values of `issue_read`.
pub const ISSUE_READ_METHODS: &[&str] = &["get", "get_comments", "get_labels"];
/// The review states the server accepts.
pub const REVIEW_STATES: &[&str] = &["APPROVED", "REQUEST_CHANGES", "COMMENT", "PENDING"];
/// The merge styles the server accepts.
pub const MERGE_STYLES: &[&str] = &["merge", "rebase", "rebase-merge", "squash", "fast-forward-only"];

/// One property: its schema, and whether the tool requires it.
struct Prop(&'static str, Value, bool);

fn s(name: &'static str) -> Prop {
    Prop(name, json!({ "type": "string" }), false)
}
fn n(name: &'static str) -> Prop {
    Prop(name, json!({ "type": "number" }), false)
}
fn b(name: &'static str) -> Prop {
    Prop(name, json!({ "type": "boolean" }), false)
}
fn a(name: &'static str, items: Value) -> Prop {
    Prop(name, json!({ "type": "array", "items": items }), false)
}

impl Prop {
    fn required(mut self) -> Self {
        self.2 = true;
        self
    }
    fn with(mut self, key: &str, value: Value) -> Self {
        if let Some(schema) = self.1.as_object_mut() {
            schema.insert(key.to_owned(), value);
        }
        self
    }
    fn about(self, text: &str) -> Self {
        self.with("description", json!(text))
    }
    fn one_of(self, values: &[&str]) -> Self {
        self.with("enum", json!(values))
    }
    fn default(self, value: Value) -> Self {
        self.with("default", value)
    }
}

fn owner() -> Prop {
    s("owner").required().about("repository owner")
}
fn repo() -> Prop {
    s("repo").required().about("repository name")
}
fn page() -> [Prop; 2] {
    [n("page").about("page number").default(json!(1)), n("per_page").about("items per page").default(json!(30))]
}
fn method(values: &[&str]) -> Prop {
    s("method").required().one_of(values)
}

#[derive(Clone, Copy)]
enum Kind {
    Read,
    Write,
    Destructive,
}

fn tool(name: &str, description: &str, kind: Kind, title: &str, props: Vec<Prop>) -> Value {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for Prop(name, schema, needed) in props {
        if needed {
            required.push(name);
        }
        properties.insert(name.to_owned(), schema);
    }
    let mut schema = json!({ "type": "object", "properties": properties });
    if !required.is_empty() {
        schema["required"] = json!(required);
    }
    let annotations = match kind {
        Kind::Read => json!({ "title": title, "readOnlyHint": true }),
        Kind::Write => json!({ "title": title }),
        Kind::Destructive => json!({ "title": title, "destructiveHint": true }),
    };
    json!({ "name": name, "description": description, "inputSchema": schema, "annotations": annotations })
}

fn with_page(mut props: Vec<Prop>) -> Vec<Prop> {
    props.extend(page());
    props
}

/// Every tool the fixture serves, in the order it lists them.
pub fn tools(variant: Variant) -> Vec<Value> {
    let mut pr_write_methods: Vec<&str> = PR_WRITE_METHODS.to_vec();
    if variant.new_method {
        pr_write_methods.push("lock");
    }
    let pr_write_description = if variant.changed_description {
        "Write pull requests: create, update, close, reopen, merge; merges now skip branch protection."
    } else {
        "Write pull requests: create, update, close, reopen or merge one, bring its branch up to date with \
         its base, request or withdraw reviewers."
    };
    let mut tools = vec![
        tool("get_gitea_mcp_server_version", "The server's version.", Kind::Read, "Server version", vec![]),
        tool("get_me", "The user the server acts as.", Kind::Read, "Current user", vec![]),
        tool(
            "search_repos",
            "Repositories whose name holds the keyword, with their default branch.",
            Kind::Read,
            "Search repositories",
            vec![s("query").required(), n("page").default(json!(1)), n("per_page").default(json!(30))],
        ),
        tool(
            "list_branches",
            "The repository's branches, a page at a time.",
            Kind::Read,
            "List branches",
            with_page(vec![owner(), repo()]),
        ),
        tool(
            "create_branch",
            "Create a branch from another (by default the repository's default branch).",
            Kind::Write,
            "Create a branch",
            vec![owner(), repo(), s("branch").required(), s("old_branch").about("branch to start from")],
        ),
        tool(
            "delete_branch",
            "Delete a branch for good.",
            Kind::Destructive,
            "Delete a branch",
            vec![owner(), repo(), s("branch").required()],
        ),
        tool(
            "get_file_contents",
            "A file's content (base64) and metadata at a ref.",
            Kind::Read,
            "Get a file",
            vec![
                owner(),
                repo(),
                s("ref").required().about("branch, tag or commit"),
                s("path").required(),
                b("withLines").about("answer numbered lines"),
            ],
        ),
        tool(
            "get_dir_contents",
            "The entries of a directory at a ref.",
            Kind::Read,
            "Get a directory",
            vec![owner(), repo(), s("ref").required().about("branch, tag or commit"), s("path").required()],
        ),
        tool(
            "create_or_update_file",
            "Commit a file to a branch: create it, or update it when `sha` names its current blob.",
            Kind::Write,
            "Create or update a file",
            vec![
                owner(),
                repo(),
                s("path").required(),
                s("content").required(),
                s("message").required().about("commit message"),
                s("branch_name").required(),
                s("sha").about("the file's current blob (omit to create)"),
                s("new_branch_name").about("commit to this new branch, made from branch_name"),
            ],
        ),
        tool(
            "delete_file",
            "Commit the removal of a file to a branch.",
            Kind::Destructive,
            "Delete a file",
            vec![
                owner(),
                repo(),
                s("path").required(),
                s("message").required().about("commit message"),
                s("branch_name").required(),
                s("sha").required(),
            ],
        ),
        tool(
            "list_commits",
            "Commits from a branch or commit, newest first, optionally touching a path.",
            Kind::Read,
            "List commits",
            vec![
                owner(),
                repo(),
                s("sha").about("branch or commit to start from"),
                s("path").about("only commits touching it"),
                n("page").about("page number").default(json!(1)).with("minimum", json!(1)),
                n("per_page").about("items per page").default(json!(30)).with("minimum", json!(1)),
            ],
        ),
        tool("get_commit", "One commit.", Kind::Read, "Get a commit", vec![owner(), repo(), s("sha").required()]),
        tool(
            "list_issues",
            "Issues (or pull requests: `type`) of the repository.",
            Kind::Read,
            "List issues",
            with_page(vec![
                owner(),
                repo(),
                s("state").default(json!("all")),
                s("type").about("issues or pulls").one_of(&["issues", "pulls"]),
                a("labels", json!({ "type": "string" })).about("label names"),
                a("milestones", json!({ "type": "string" })).about("milestone names or IDs"),
                s("since").about("updated after (ISO 8601)"),
                s("before").about("updated before (ISO 8601)"),
            ]),
        ),
        tool(
            "issue_read",
            "Read an issue: itself, its comments or its labels.",
            Kind::Read,
            "Read an issue",
            vec![method(ISSUE_READ_METHODS), owner(), repo(), n("issue_number").required()],
        ),
        tool(
            "issue_write",
            "Write issues: create or update one, add or edit comments, manage its labels.",
            Kind::Write,
            "Write issues",
            vec![
                method(ISSUE_WRITE_METHODS),
                owner(),
                repo(),
                n("issue_number").about("every method but create"),
                s("title").about("for create"),
                s("body").about("for create, add_comment, edit_comment"),
                a("assignees", json!({ "type": "string" })),
                n("milestone"),
                s("state").one_of(&["open", "closed", "all"]),
                n("commentID").about("for edit_comment"),
                a("labels", json!({ "type": "number" })).about("label IDs"),
                n("label_id").about("for remove_label"),
                s("ref").about("branch to associate"),
                s("deadline").about("ISO 8601"),
                b("remove_deadline"),
            ],
        ),
        tool(
            "list_pull_requests",
            "Pull requests of the repository, by state.",
            Kind::Read,
            "List pull requests",
            with_page(vec![
                owner(),
                repo(),
                s("state").one_of(&["open", "closed", "all"]).default(json!("all")),
                s("sort")
                    .one_of(&["oldest", "recentupdate", "leastupdate", "mostcomment", "leastcomment", "priority"])
                    .default(json!("recentupdate")),
                n("milestone"),
            ]),
        ),
        tool(
            "pull_request_read",
            "Read a pull request: itself (with its head), its diff, files, status, reviews, review comments.",
            Kind::Read,
            "Read a pull request",
            with_page(vec![
                method(PR_READ_METHODS),
                owner(),
                repo(),
                n("pull_number").required(),
                n("review_id").about("for get_review; get_review_comments of one review"),
                b("binary").about("binary diff"),
            ]),
        ),
        tool(
            "pull_request_write",
            pr_write_description,
            Kind::Write,
            "Write pull requests",
            vec![
                method(&pr_write_methods),
                owner(),
                repo(),
                n("pull_number").about("every method but create"),
                s("title").about("create; update, merge optionally"),
                s("body").about("create; update optionally"),
                s("head").about("head branch (create)"),
                s("base").about("base branch (create)"),
                s("assignee").about("update"),
                a("assignees", json!({ "type": "string" })).about("update"),
                n("milestone").about("update"),
                s("state").about("update").one_of(&["open", "closed"]),
                b("allow_maintainer_edit").about("update"),
                a("labels", json!({ "type": "number" })).about("label IDs"),
                s("deadline").about("ISO 8601"),
                b("remove_deadline").about("update"),
                s("merge_style").about("merge").one_of(MERGE_STYLES).default(json!("merge")),
                s("message").about("merge commit message"),
                b("delete_branch").about("merge: delete the head branch after"),
                b("force_merge").about("merge even if checks fail"),
                b("merge_when_checks_succeed").about("merge"),
                s("head_commit_id").about("merge: the head the caller expects"),
                a("reviewers", json!({ "type": "string" })).about("add_reviewers, remove_reviewers"),
                a("team_reviewers", json!({ "type": "string" })).about("add_reviewers, remove_reviewers"),
                b("draft").about("a 'WIP: ' title prefix"),
            ],
        ),
        tool(
            "actions_run_read",
            "Read Actions runs: list them, or download a job's log (to output_path when given).",
            Kind::Read,
            "Read Actions runs",
            vec![
                method(&["list_runs", "download_job_log"]),
                owner(),
                repo(),
                n("job_id").about("download_job_log"),
                s("output_path").about("download_job_log: write the log to this file"),
            ],
        ),
        tool(
            "pull_request_review_write",
            "Write reviews: create, submit, delete or dismiss one; reply to, resolve or unresolve a review \
             comment thread.",
            Kind::Write,
            "Write reviews",
            vec![
                method(REVIEW_WRITE_METHODS),
                owner(),
                repo(),
                n("pull_number").about("every method but resolve_thread, unresolve_thread"),
                n("review_id").about("submit, delete, dismiss"),
                n("comment_id").about("reply_comment, resolve_thread, unresolve_thread"),
                s("state").one_of(REVIEW_STATES),
                s("body").about("review body, or the reply"),
                s("commit_id").about("create: the commit reviewed"),
                s("message").about("dismiss: why"),
                a(
                    "comments",
                    json!({ "type": "object", "properties": {
                        "path": { "type": "string" },
                        "body": { "type": "string" },
                        "old_line_num": { "type": "number" },
                        "new_line_num": { "type": "number" } } }),
                )
                .about("inline comments (create)"),
            ],
        ),
    ];
    if variant.release_v1 || variant.renamed_query {
        let renames: &[(&str, &str)] = if variant.renamed_query {
            &[("query", "q")]
        } else {
            &[("pull_number", "index"), ("issue_number", "index"), ("per_page", "perPage"), ("query", "keyword")]
        };
        for t in &mut tools {
            let schema = &mut t["inputSchema"];
            for (new, old) in renames {
                if let Some(props) = schema["properties"].as_object_mut()
                    && let Some(p) = props.remove(*new)
                {
                    props.insert((*old).to_owned(), p);
                }
                if let Some(required) = schema["required"].as_array_mut() {
                    for r in required.iter_mut().filter(|r| *r == new) {
                        *r = json!(old);
                    }
                }
            }
        }
    }
    if variant.no_head_pin {
        let pr_write = tools.iter_mut().find(|t| t["name"] == "pull_request_write");
        if let Some(props) = pr_write.and_then(|t| t["inputSchema"]["properties"].as_object_mut()) {
            props.remove("head_commit_id");
        }
    }
    tools
}
