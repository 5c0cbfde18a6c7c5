//! The tools the fixture lists as GitHub's server (`--surface github-mcp`): the real server's
//! names, argument names, types, enums and required lists (its `__toolsnaps__` at the commit
//! `GITHUB_MCP.md` names), for the toolsets a fleet uses (context, repos, issues,
//! pull_requests, actions) and, with `--variant dynamic-toolsets`, the dynamic tools of the
//! releases before v1.1.0. The descriptions are the fixture's own words.

use serde_json::{Map, Value, json};

/// How the listing differs from the newest release read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Variant {
    /// `merge_pull_request` declares `expectedHeadSha` (upstream #3182, after the releases read).
    pub head_pin: bool,
    /// The dynamic toolsets of v0.2.0 … v1.0.5: only `context`, `repos`, `pull_requests` and the
    /// three dynamic tools at start; `enable_toolset` adds the others.
    pub dynamic: bool,
    /// Feature `pull_requests_granular`: `create_pull_request_review`,
    /// `submit_pending_pull_request_review` and `delete_pending_pull_request_review` in place
    /// of `pull_request_review_write`.
    pub granular: bool,
}

/// The methods of `pull_request_read`.
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
/// The methods of `pull_request_review_write`.
pub const REVIEW_METHODS: &[&str] =
    &["create", "submit_pending", "delete_pending", "resolve_thread", "unresolve_thread"];
/// The methods of `actions_run_trigger`.
pub const RUN_METHODS: &[&str] =
    &["run_workflow", "rerun_workflow_run", "rerun_failed_jobs", "cancel_workflow_run", "delete_workflow_run_logs"];

#[derive(Clone)]
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
    fn one_of(mut self, values: &[&str]) -> Self {
        if let Some(schema) = self.1.as_object_mut() {
            schema.insert("enum".into(), json!(values));
        }
        self
    }
}

fn owner() -> Prop {
    s("owner").required()
}
fn repo() -> Prop {
    s("repo").required()
}
fn pull_number() -> Prop {
    n("pullNumber").required()
}
fn paging() -> [Prop; 2] {
    [n("page"), n("perPage")]
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Read,
    Write,
    Destructive,
}

fn tool(name: &str, description: &str, kind: Kind, props: Vec<Prop>) -> Value {
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
        Kind::Read => json!({ "readOnlyHint": true }),
        Kind::Write => json!({ "readOnlyHint": false }),
        Kind::Destructive => json!({ "readOnlyHint": false, "destructiveHint": true }),
    };
    json!({ "name": name, "description": description, "inputSchema": schema, "annotations": annotations })
}

/// The tools of one toolset.
pub fn toolset(name: &str, variant: Variant) -> Vec<Value> {
    match name {
        "context" => vec![tool("get_me", "The authenticated user.", Kind::Read, vec![])],
        "repos" => repos(),
        "issues" => issues(),
        "pull_requests" => pull_requests(variant),
        "actions" => actions(),
        "copilot" => vec![tool(
            "assign_copilot_to_issue",
            "Assign Copilot's coding agent to an issue: it opens a PR of its own.",
            Kind::Write,
            vec![owner(), repo(), n("issue_number").required(), s("base_ref"), s("custom_instructions")],
        )],
        _ => Vec::new(),
    }
}

/// The toolsets listed at start.
pub const DEFAULT_TOOLSETS: &[&str] = &["context", "repos", "issues", "pull_requests", "actions", "copilot"];
/// The toolsets a dynamic server lists before any is enabled.
pub const DYNAMIC_START: &[&str] = &["context", "repos", "pull_requests"];

/// Every tool listed at start.
pub fn tools(variant: Variant) -> Vec<Value> {
    let sets = if variant.dynamic { DYNAMIC_START } else { DEFAULT_TOOLSETS };
    let mut tools: Vec<Value> = sets.iter().flat_map(|s| toolset(s, variant)).collect();
    if variant.dynamic {
        tools.push(tool("list_available_toolsets", "The toolsets, and which are on.", Kind::Read, vec![]));
        tools.push(tool("get_toolset_tools", "The tools of a toolset.", Kind::Read, vec![s("toolset").required()]));
        tools.push(tool(
            "enable_toolset",
            "Turn a toolset on: its tools are listed from now on.",
            Kind::Read,
            vec![s("toolset").required()],
        ));
    }
    tools
}

fn repos() -> Vec<Value> {
    vec![
        tool(
            "search_repositories",
            "Search repositories (GitHub search syntax, e.g. repo:OWNER/NAME).",
            Kind::Read,
            [vec![s("query").required(), b("minimal_output"), s("sort"), s("order")], paging().into()].concat(),
        ),
        tool(
            "get_file_contents",
            "A file or directory at a ref.",
            Kind::Read,
            vec![owner(), repo(), s("path"), s("ref"), s("sha")],
        ),
        tool(
            "list_commits",
            "Commits of a branch or commit.",
            Kind::Read,
            [vec![owner(), repo(), s("sha"), s("path"), s("author")], paging().into()].concat(),
        ),
        tool(
            "get_commit",
            "One commit (a SHA, branch or tag).",
            Kind::Read,
            [vec![owner(), repo(), s("sha").required(), s("detail")], paging().into()].concat(),
        ),
        tool(
            "list_branches",
            "The repository's branches.",
            Kind::Read,
            [vec![owner(), repo()], paging().into()].concat(),
        ),
        tool(
            "create_or_update_file",
            "Create or update one file on a branch (content is plain text).",
            Kind::Write,
            vec![
                owner(),
                repo(),
                s("path").required(),
                s("content").required(),
                s("message").required(),
                s("branch").required(),
                s("sha"),
                b("allow_symlink_write"),
            ],
        ),
        tool(
            "create_branch",
            "Create a branch from another (by default the repository's default branch).",
            Kind::Write,
            vec![owner(), repo(), s("branch").required(), s("from_branch")],
        ),
        tool(
            "push_files",
            "Push several files to a branch in one commit (the branch is created when missing).",
            Kind::Write,
            vec![
                owner(),
                repo(),
                s("branch").required(),
                a(
                    "files",
                    json!({ "type": "object", "additionalProperties": false, "required": ["path", "content"],
                            "properties": { "path": { "type": "string" }, "content": { "type": "string" } } }),
                )
                .required(),
                s("message").required(),
            ],
        ),
        tool(
            "delete_file",
            "Delete a file from a branch.",
            Kind::Destructive,
            vec![owner(), repo(), s("path").required(), s("message").required(), s("branch").required()],
        ),
    ]
}

fn issues() -> Vec<Value> {
    vec![
        tool(
            "issue_read",
            "Read an issue: itself, its comments, sub-issues, parent or labels.",
            Kind::Read,
            [
                vec![
                    s("method").required().one_of(&[
                        "get",
                        "get_comments",
                        "get_sub_issues",
                        "get_parent",
                        "get_labels",
                    ]),
                    owner(),
                    repo(),
                    n("issue_number").required(),
                ],
                paging().into(),
            ]
            .concat(),
        ),
        tool(
            "list_issues",
            "Issues of the repository.",
            Kind::Read,
            [vec![owner(), repo(), s("state").one_of(&["OPEN", "CLOSED"])], paging().into()].concat(),
        ),
        tool(
            "issue_write",
            "Create or update an issue.",
            Kind::Write,
            vec![
                s("method").required().one_of(&["create", "update"]),
                owner(),
                repo(),
                n("issue_number"),
                s("title"),
                s("body"),
                a("assignees", json!({ "type": "string" })),
                a("labels", json!({ "type": "string" })),
                n("milestone"),
                // "For updates, pass null to remove the current type."
                Prop("type", json!({ "anyOf": [{ "type": "string", "minLength": 1 }, { "type": "null" }] }), false),
                s("state").one_of(&["open", "closed"]),
                s("state_reason").one_of(&["completed", "not_planned", "duplicate"]),
                n("duplicate_of"),
            ],
        ),
        tool(
            "add_issue_comment",
            "Comment on an issue or a pull request.",
            Kind::Write,
            vec![owner(), repo(), n("issue_number").required(), s("body").required()],
        ),
    ]
}

fn pull_requests(variant: Variant) -> Vec<Value> {
    let mut merge = vec![
        owner(),
        repo(),
        pull_number(),
        s("commit_title"),
        s("commit_message"),
        s("merge_method").one_of(&["merge", "squash", "rebase"]),
    ];
    if variant.head_pin {
        merge.push(s("expectedHeadSha"));
    }
    let mut tools = vec![
        tool(
            "pull_request_read",
            "Read a pull request: itself, its diff, status, files, commits, reviews or comments.",
            Kind::Read,
            [vec![s("method").required().one_of(PR_READ_METHODS), owner(), repo(), pull_number()], paging().into()]
                .concat(),
        ),
        tool(
            "list_pull_requests",
            "Pull requests of the repository.",
            Kind::Read,
            [
                vec![
                    owner(),
                    repo(),
                    s("state").one_of(&["open", "closed", "all"]),
                    s("head"),
                    s("base"),
                    s("sort"),
                    s("direction"),
                ],
                paging().into(),
            ]
            .concat(),
        ),
        tool(
            "create_pull_request",
            "Open a pull request.",
            Kind::Write,
            vec![
                owner(),
                repo(),
                s("title").required(),
                s("head").required(),
                s("base").required(),
                s("body"),
                b("draft"),
                b("maintainer_can_modify"),
                a("reviewers", json!({ "type": "string" })),
            ],
        ),
        tool(
            "update_pull_request",
            "Edit a pull request: title, body, state, base, draft, reviewers.",
            Kind::Write,
            vec![
                owner(),
                repo(),
                pull_number(),
                s("title"),
                s("body"),
                s("state").one_of(&["open", "closed"]),
                b("draft"),
                s("base"),
                b("maintainer_can_modify"),
                a("reviewers", json!({ "type": "string" })),
            ],
        ),
        tool("merge_pull_request", "Merge a pull request.", Kind::Write, merge),
        tool(
            "update_pull_request_branch",
            "Bring a pull request's branch up to date with its base.",
            Kind::Write,
            vec![owner(), repo(), pull_number(), s("expectedHeadSha")],
        ),
    ];
    if variant.granular {
        tools.extend([
            tool(
                "create_pull_request_review",
                "Create a review: submitted with `event`, else pending.",
                Kind::Write,
                review_props(),
            ),
            tool(
                "submit_pending_pull_request_review",
                "Submit the pending review.",
                Kind::Write,
                vec![
                    owner(),
                    repo(),
                    pull_number(),
                    s("event").required().one_of(&["APPROVE", "REQUEST_CHANGES", "COMMENT"]),
                    s("body"),
                ],
            ),
            tool(
                "delete_pending_pull_request_review",
                "Delete the pending review.",
                Kind::Destructive,
                vec![owner(), repo(), pull_number()],
            ),
        ]);
    } else {
        tools.push(tool(
            "pull_request_review_write",
            "Write reviews: create (submitted with `event`, else pending), submit or delete the pending one, \
             resolve or unresolve a thread.",
            Kind::Write,
            [vec![s("method").required().one_of(REVIEW_METHODS)], review_props(), vec![s("threadId")]].concat(),
        ));
    }
    tools
}

/// The review's own arguments, shared by `pull_request_review_write` and the granular create.
fn review_props() -> Vec<Prop> {
    vec![
        owner(),
        repo(),
        pull_number(),
        s("body"),
        s("event").one_of(&["APPROVE", "REQUEST_CHANGES", "COMMENT"]),
        s("commitID"),
    ]
}

fn actions() -> Vec<Value> {
    vec![
        tool(
            "actions_list",
            "List workflows, runs, jobs or artifacts.",
            Kind::Read,
            vec![
                s("method").required().one_of(&[
                    "list_workflows",
                    "list_workflow_runs",
                    "list_workflow_jobs",
                    "list_workflow_run_artifacts",
                ]),
                owner(),
                repo(),
                s("resource_id"),
                n("page"),
                n("per_page"),
            ],
        ),
        tool(
            "actions_run_trigger",
            "Run, re-run or cancel a workflow run, or delete its logs.",
            Kind::Destructive,
            vec![
                s("method").required().one_of(RUN_METHODS),
                owner(),
                repo(),
                s("workflow_id"),
                s("ref"),
                Prop("inputs", json!({ "type": "object" }), false),
                n("run_id"),
            ],
        ),
    ]
}
