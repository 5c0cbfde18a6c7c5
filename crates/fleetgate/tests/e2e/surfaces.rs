//! One operation, as each forge's MCP server spells it: the tool and the arguments (owner
//! and repo are added by the fleet). The attack definitions (`attacks.rs`) are written once
//! against these and run against both dialects.

use serde_json::{Value, json};

/// The forge server a fleet stands in front of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Forge {
    /// gitea-mcp (the go-sdk generation).
    Gitea,
    /// gitea-mcp's v1.0 release line: `index` for numbers, `perPage`, `search_repos`' `keyword`.
    GiteaV1,
    /// github-mcp-server as released up to v1.10.1: its merge declares no head pin, so the
    /// gateway makes the judged merge itself through GitHub's REST merge (`sha`), served by
    /// the stand-in over HTTP.
    Github,
    /// github-mcp-server with the `pull_requests_granular` feature: the granular review tools.
    GithubGranular,
    /// A github-mcp-server whose merge declares `expectedHeadSha` (upstream, after v1.10.1).
    GithubPinned,
    /// github-mcp-server with dynamic toolsets (v0.2.0 … v1.0.5): toolsets turned on at run time.
    GithubDynamic,
}

/// A call: the tool and its arguments.
pub(crate) type Call = (&'static str, Value);

impl Forge {
    /// The `[fleet] forge` name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Gitea | Self::GiteaV1 => "gitea-mcp",
            Self::Github | Self::GithubGranular | Self::GithubPinned | Self::GithubDynamic => "github-mcp",
        }
    }

    /// The control tools' prefix.
    pub(crate) fn prefix(self) -> &'static str {
        match self {
            Self::Gitea | Self::GiteaV1 => "gitea_",
            Self::Github | Self::GithubGranular | Self::GithubPinned | Self::GithubDynamic => "github_",
        }
    }

    /// The fixture's flags for this surface.
    pub(crate) fn fixture_flags(self) -> &'static [&'static str] {
        match self {
            Self::Gitea => &[],
            Self::GiteaV1 => &["--variant", "release-v1"],
            Self::Github => &["--surface", "github-mcp"],
            Self::GithubGranular => &["--surface", "github-mcp", "--variant", "granular"],
            Self::GithubPinned => &["--surface", "github-mcp", "--variant", "head-pin"],
            Self::GithubDynamic => &["--surface", "github-mcp", "--variant", "dynamic-toolsets"],
        }
    }

    fn github(self) -> bool {
        matches!(self, Self::Github | Self::GithubGranular | Self::GithubPinned | Self::GithubDynamic)
    }

    /// The forge's own workflow files.
    pub(crate) fn workflow_file(self) -> &'static str {
        if self.github() { ".github/workflows/release.yml" } else { ".gitea/workflows/release.yml" }
    }

    pub(crate) fn create_branch(self, branch: &str, from: Option<&str>) -> Call {
        let mut args = json!({ "branch": branch });
        if let Some(from) = from {
            args[if self.github() { "from_branch" } else { "old_branch" }] = json!(from);
        }
        ("create_branch", args)
    }

    /// Commit `content` to `path` on `branch` (`sha`: the file's current blob, to update it).
    pub(crate) fn write_file(self, branch: &str, path: &str, content: &str, message: &str, sha: Option<Value>) -> Call {
        let key = if self.github() { "branch" } else { "branch_name" };
        let mut args = json!({ "path": path, "content": content, "message": message, key: branch });
        if let Some(sha) = sha {
            args["sha"] = sha;
        }
        ("create_or_update_file", args)
    }

    /// Several files in one commit where the server has it (`push_files`), else one.
    pub(crate) fn push_files(self, branch: &str, paths: &[&str]) -> Call {
        if self.github() {
            let files: Vec<Value> = paths.iter().map(|p| json!({ "path": p, "content": "x\n" })).collect();
            ("push_files", json!({ "branch": branch, "message": "m", "files": files }))
        } else {
            self.write_file(branch, paths[paths.len() - 1], "x\n", "m", None)
        }
    }

    pub(crate) fn open_pr(self, head: &str, base: &str) -> Call {
        if self.github() {
            ("create_pull_request", json!({ "title": head, "body": "b", "head": head, "base": base }))
        } else {
            (
                "pull_request_write",
                json!({ "method": "create", "title": head, "body": "b", "head": head, "base": base }),
            )
        }
    }

    /// The number of the PR an `open_pr` answer names.
    pub(crate) fn opened(self, answer: &Value) -> i64 {
        if self.github() {
            let url = answer["url"].as_str().unwrap_or_default();
            url.rsplit('/').next().and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("no PR in {answer}"))
        } else {
            answer["number"].as_i64().unwrap_or_else(|| panic!("no PR in {answer}"))
        }
    }

    fn pr_key(self) -> &'static str {
        match self {
            Self::Gitea => "pull_number",
            Self::GiteaV1 => "index",
            Self::Github | Self::GithubGranular | Self::GithubPinned | Self::GithubDynamic => "pullNumber",
        }
    }

    fn issue_key(self) -> &'static str {
        if self == Self::GiteaV1 { "index" } else { "issue_number" }
    }

    pub(crate) fn read_pr(self, pr: i64) -> Call {
        ("pull_request_read", json!({ "method": "get", self.pr_key(): pr }))
    }

    pub(crate) fn approve(self, pr: i64) -> Call {
        if self == Self::GithubGranular {
            ("create_pull_request_review", json!({ "pullNumber": pr, "event": "APPROVE", "body": "LGTM" }))
        } else if self.github() {
            (
                "pull_request_review_write",
                json!({ "method": "create", "pullNumber": pr, "event": "APPROVE", "body": "LGTM" }),
            )
        } else {
            (
                "pull_request_review_write",
                json!({ "method": "create", self.pr_key(): pr, "state": "APPROVED", "body": "LGTM" }),
            )
        }
    }

    pub(crate) fn merge(self, pr: Value) -> Call {
        if self.github() {
            ("merge_pull_request", json!({ "pullNumber": pr }))
        } else {
            ("pull_request_write", json!({ "method": "merge", self.pr_key(): pr }))
        }
    }

    pub(crate) fn update_from_base(self, pr: i64) -> Call {
        if self.github() {
            ("update_pull_request_branch", json!({ "pullNumber": pr }))
        } else {
            ("pull_request_write", json!({ "method": "update_branch", self.pr_key(): pr }))
        }
    }

    pub(crate) fn retarget(self, pr: i64, base: &str) -> Call {
        if self.github() {
            ("update_pull_request", json!({ "pullNumber": pr, "base": base }))
        } else {
            ("pull_request_write", json!({ "method": "update", self.pr_key(): pr, "base": base }))
        }
    }

    /// Close a PR through an update of the PR itself.
    pub(crate) fn close_by_update(self, pr: i64) -> Call {
        if self.github() {
            ("update_pull_request", json!({ "pullNumber": pr, "state": "closed" }))
        } else {
            ("pull_request_write", json!({ "method": "update", self.pr_key(): pr, "state": "closed" }))
        }
    }

    /// Close a PR through the issue tool, on its number.
    pub(crate) fn close_as_issue(self, pr: i64) -> Call {
        ("issue_write", json!({ "method": "update", self.issue_key(): pr, "state": "closed" }))
    }

    /// Re-run a workflow run (the controller's job), where the fixture has the tool.
    pub(crate) fn rerun(self) -> Option<Call> {
        self.github().then(|| ("actions_run_trigger", json!({ "method": "rerun_workflow_run", "run_id": 1 })))
    }

    /// A pending review (no verdict yet).
    pub(crate) fn pending_review(self, pr: i64) -> Call {
        match self {
            Self::GithubGranular => ("create_pull_request_review", json!({ "pullNumber": pr })),
            _ if self.github() => ("pull_request_review_write", json!({ "method": "create", "pullNumber": pr })),
            _ => ("pull_request_review_write", json!({ "method": "create", self.pr_key(): pr, "state": "PENDING" })),
        }
    }

    /// Submit the caller's pending review as an approval (Gitea names it by `review`, the id
    /// its create answered).
    pub(crate) fn submit_pending(self, pr: i64, review: i64) -> Call {
        match self {
            Self::GithubGranular => {
                ("submit_pending_pull_request_review", json!({ "pullNumber": pr, "event": "APPROVE", "body": "LGTM" }))
            }
            _ if self.github() => (
                "pull_request_review_write",
                json!({ "method": "submit_pending", "pullNumber": pr, "event": "APPROVE", "body": "LGTM" }),
            ),
            _ => (
                "pull_request_review_write",
                json!({ "method": "submit", self.pr_key(): pr, "review_id": review, "state": "APPROVED", "body": "LGTM" }),
            ),
        }
    }

    /// Whether this is GitHub's server.
    pub(crate) fn is_github(self) -> bool {
        self.github()
    }

    pub(crate) fn create_issue(self, title: &str) -> Call {
        ("issue_write", json!({ "method": "create", "title": title, "body": "b" }))
    }

    pub(crate) fn read_issue(self, n: i64) -> Call {
        ("issue_read", json!({ "method": "get", self.issue_key(): n }))
    }

    /// The number of the issue a `create_issue` answer names.
    pub(crate) fn created_issue(self, answer: &Value) -> i64 {
        if self.github() {
            let url = answer["url"].as_str().unwrap_or_default();
            url.rsplit('/').next().and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("no issue in {answer}"))
        } else {
            answer["number"].as_i64().unwrap_or_else(|| panic!("no issue in {answer}"))
        }
    }

    /// A comment on issue or PR `n`.
    pub(crate) fn comment(self, n: i64, body: &str) -> Call {
        if self.github() {
            ("add_issue_comment", json!({ "issue_number": n, "body": body }))
        } else {
            ("issue_write", json!({ "method": "add_comment", self.issue_key(): n, "body": body }))
        }
    }

    /// A PR opened from `head` onto `base` with `body`.
    pub(crate) fn open_pr_saying(self, head: &str, base: &str, body: &str) -> Call {
        let (tool, mut args) = self.open_pr(head, base);
        args["body"] = json!(body);
        (tool, args)
    }

    /// A merge whose commit message (Gitea's `message`, GitHub's `commit_message`) says `message`.
    pub(crate) fn merge_saying(self, pr: i64, message: &str) -> Call {
        let (tool, mut args) = self.merge(json!(pr));
        args[if self.github() { "commit_message" } else { "message" }] = json!(message);
        (tool, args)
    }

    /// How this forge spells a closing keyword's reference to issue `n` in another
    /// repository's form and with Gitea's `!` (GitHub: its URL).
    pub(crate) fn closing_forms(self, n: i64) -> Vec<String> {
        if self.github() {
            vec![
                format!("Fixes #{n}"),
                format!("closes: FLEET/Forge#{n}"),
                format!("RESOLVED https://github.invalid/fleet/forge/issues/{n}"),
            ]
        } else {
            vec![format!("Fixes #{n}"), format!("fixes: !{n}"), format!("cloſes FLEET/Forge#{n}")]
        }
    }
}
