//! The fixture as GitHub's official MCP server (`--surface github-mcp`): the same forge
//! underneath (real git in the bare repository, the same ledger), with the GitHub server's
//! tools, argument names and answers, and GitHub's semantics where they differ from Gitea's
//! (`GITHUB_MCP.md` lists them):
//!
//! * numbers (`pullNumber`, `issue_number`) are a JSON number or a numeric string; a fraction
//!   is refused (`non-integer numeric value`), 0 is missing;
//! * `pull_request_review_write` decodes loosely, as `mapstructure.WeakDecode` does: the Go
//!   field name (`PullNumber`, `Event`, `CommitID`, `Method`) first, then any key equal
//!   ignoring case; a float is truncated, a string parsed with its base prefix, and a number
//!   wraps to 32 bits;
//! * a review `create` with `event` is submitted at once (at `commitID`, else the head);
//!   without, it is the user's one pending review; `submit_pending` submits the user's first
//!   review, which must be pending, and leaves it at the commit it was created at; GitHub
//!   refuses an approval or a request-changes by the PR's author;
//! * `create_pull_request` answers `{id, url}` (no number); `update_pull_request` retargets
//!   with `base` (dropped when `state` is `closed` in the same call) and closes with `state`;
//! * `merge_pull_request` pins nothing unless the listing declares `expectedHeadSha`
//!   (`--variant head-pin`), which is then a compare-and-swap (409);
//! * file writes require `branch`; `push_files` makes a missing branch from the default
//!   branch's tip, then commits every file at once;
//! * `issue_write update` applies title and body by REST (a PR's too), then a `state` through
//!   GraphQL's issue lookup, which does not resolve a PR's number: the state change fails
//!   after the text landed;
//! * `search_repositories` answers GitHub's search result for a `repo:OWNER/NAME` qualifier;
//! * no CI runs here: workflow runs are listed empty and a re-run names no run.
//!
//! Where it is simpler than the real server: `get_file_contents` answers the file's metadata
//! and base64 content as one JSON object (the real server answers an embedded resource).

use super::Forge;
use super::args::{self, Args};
use super::github_catalog::{PR_READ_METHODS, REVIEW_METHODS, RUN_METHODS};
use super::ledger::{Comment, Pull, Review, State, now};
use super::pulls::{head_ref, race, refresh, set_state, update_branch};
use serde_json::{Value, json};

/// One tool call as GitHub's server: `None` for a tool it does not have.
pub fn call(f: &Forge, tool: &str, args: &Args) -> Option<Result<Value, String>> {
    type Handler = fn(&Forge, &Args) -> Result<Value, String>;
    let handler: Handler = match tool {
        "get_me" => |f, _| Ok(json!({ "login": f.user, "id": 1, "type": "User" })),
        "search_repositories" => search_repositories,
        "get_file_contents" => super::repo::get_file,
        "list_commits" => super::repo::list_commits,
        "get_commit" => super::repo::get_commit,
        "list_branches" => list_branches,
        "create_branch" => create_branch,
        "create_or_update_file" => create_or_update_file,
        "delete_file" => delete_file,
        "push_files" => push_files,
        "issue_read" => issue_read,
        "list_issues" => super::issues::list,
        "issue_write" => issue_write,
        "add_issue_comment" => add_issue_comment,
        "pull_request_read" => pull_request_read,
        "list_pull_requests" => list_pull_requests,
        "create_pull_request" => create_pull_request,
        "update_pull_request" => update_pull_request,
        "merge_pull_request" => merge_pull_request,
        "update_pull_request_branch" => update_pull_request_branch,
        "pull_request_review_write" => review_write,
        "create_pull_request_review" => |f, a| granular_review(f, "create", a),
        "submit_pending_pull_request_review" => |f, a| granular_review(f, "submit_pending", a),
        "delete_pending_pull_request_review" => |f, a| granular_review(f, "delete_pending", a),
        "actions_list" => |f, a| {
            f.check_repo(a)?;
            Ok(json!({ "total_count": 0, "workflow_runs": [] }))
        },
        "actions_run_trigger" => actions_run_trigger,
        "assign_copilot_to_issue" => |_, _| Err("copilot coding agent is not available for this repository".into()),
        _ => return None,
    };
    Some(handler(f, args))
}

/// `RequiredInt`: a JSON number or a numeric string, whole; 0 or absent is missing.
fn required_int(args: &Args, key: &str) -> Result<i64, String> {
    let missing = || format!("missing required parameter: {key}");
    let value = args.get(key).ok_or_else(missing)?;
    let f = match value {
        Value::Number(n) => n.as_f64().ok_or_else(|| format!("parameter {key} is not a valid number"))?,
        Value::String(s) => {
            s.trim().parse::<f64>().map_err(|e| format!("parameter {key} is not a valid number: {e}"))?
        }
        _ => return Err(format!("parameter {key} is not a valid number")),
    };
    if !f.is_finite() || f.fract() != 0.0 {
        return Err(format!("parameter {key} is not a valid number: non-integer numeric value: {value}"));
    }
    #[allow(clippy::cast_possible_truncation)]
    let n = f as i64;
    if n == 0 {
        return Err(missing());
    }
    Ok(n)
}

/// `RequiredParam[string]`: present, a string, not empty.
fn required(args: &Args, key: &str) -> Result<String, String> {
    match args.get(key) {
        None => Err(format!("missing required parameter: {key}")),
        Some(Value::String(s)) if s.is_empty() => Err(format!("missing required parameter: {key}")),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(format!("parameter {key} is not of type string")),
    }
}

fn not_found(what: &str) -> String {
    format!("failed to {what}: 404 Not Found")
}

fn pull<'a>(f: &Forge, state: &'a mut State, number: i64, what: &str) -> Result<&'a mut Pull, String> {
    let p = state.pull_mut(number).ok_or_else(|| not_found(what))?;
    refresh(f, p)?;
    Ok(p)
}

fn url(f: &Forge, number: i64) -> String {
    format!("https://github.invalid/{}/pull/{number}", f.full_name())
}

/// `MinimalPullRequest`.
fn minimal(f: &Forge, p: &Pull) -> Value {
    let repo = json!({ "full_name": f.full_name() });
    let base_sha = f.git.branch(&p.base).unwrap_or_default();
    let mut m = json!({
        "number": p.number,
        "title": p.title,
        "body": p.body,
        "state": p.state,
        "draft": false,
        "merged": p.merged,
        "mergeable_state": if p.state == "open" { "clean" } else { "unknown" },
        "html_url": url(f, p.number),
        "user": { "login": p.user },
        "head": { "ref": p.head, "sha": p.head_sha, "repo": repo },
        "base": { "ref": p.base, "sha": base_sha, "repo": repo },
        "created_at": p.created_at,
        "updated_at": p.updated_at,
    });
    if p.merged {
        m["merged_at"] = json!(p.merged_at);
        m["merged_by"] = json!({ "login": p.merged_by });
    }
    m
}

fn search_repositories(f: &Forge, args: &Args) -> Result<Value, String> {
    let query = required(args, "query")?;
    // Only the `repo:` qualifier is understood here; GitHub's search would also match words.
    let named = query
        .split_whitespace()
        .filter_map(|t| t.strip_prefix("repo:"))
        .any(|r| r.eq_ignore_ascii_case(&f.full_name()) || f.aliases.iter().any(|a| a.eq_ignore_ascii_case(r)));
    let items = if named {
        vec![json!({
            "id": 1, "name": f.name, "full_name": f.full_name(), "fork": false, "archived": false,
            "private": true, "default_branch": f.git.default_branch(),
            "html_url": format!("https://github.invalid/{}", f.full_name()),
        })]
    } else {
        Vec::new()
    };
    Ok(json!({ "total_count": items.len(), "incomplete_results": false, "items": items }))
}

fn list_branches(f: &Forge, args: &Args) -> Result<Value, String> {
    f.check_repo(args)?;
    let branches = f.git.branches()?;
    Ok(json!(
        branches
            .into_iter()
            .map(|(name, sha)| json!({ "name": name, "sha": sha, "protected": false }))
            .collect::<Vec<_>>()
    ))
}

fn create_branch(f: &Forge, args: &Args) -> Result<Value, String> {
    f.check_repo(args)?;
    let branch = required(args, "branch")?;
    let from =
        args::opt_string(args, "from_branch").filter(|b| !b.is_empty()).unwrap_or_else(|| f.git.default_branch());
    let sha = f.ledger.with(|_| {
        let tip = f.git.branch(&from).ok_or_else(|| not_found("get reference"))?;
        if f.git.branch(&branch).is_some() || !f.git.valid_branch_name(&branch) {
            return Err("failed to create branch: 422 Reference already exists".into());
        }
        f.git.set_ref(&format!("refs/heads/{branch}"), &tip, None)?;
        Ok(tip)
    })?;
    Ok(json!({ "ref": format!("refs/heads/{branch}"), "object": { "sha": sha, "type": "commit" } }))
}

/// One commit of `files` (`None`: delete) on `branch`'s tip `parent`.
fn commit_files(f: &Forge, parent: &str, files: &[(String, Option<Vec<u8>>)], message: &str) -> Result<String, String> {
    let mut tip = parent.to_owned();
    let mut tree = f.git.tree_of(parent)?;
    for (path, content) in files {
        let blob = content.as_ref().map(|c| f.git.hash_blob(c)).transpose()?;
        // `tree_with` builds on a commit: chain throwaway commits, keep only the last tree.
        tree = f.git.tree_with(&tip, path, blob.as_deref())?;
        tip = f.git.commit(&tree, &[&tip], "staging")?;
    }
    f.git.commit(&tree, &[parent], message)
}

fn create_or_update_file(f: &Forge, args: &Args) -> Result<Value, String> {
    f.check_repo(args)?;
    let path = required(args, "path")?;
    let path = path.strip_prefix('/').unwrap_or(&path).to_owned();
    let content = required(args, "content")?;
    let message = required(args, "message")?;
    let branch = required(args, "branch")?;
    let sha = args::opt_string(args, "sha").filter(|s| !s.is_empty());
    f.ledger.with(|_| {
        let parent = f.git.branch(&branch).ok_or_else(|| not_found(&format!("get branch {branch}")))?;
        let existing = f.git.entry(&parent, &path).filter(|(_, k)| k == "blob").map(|(s, _)| s);
        match (&sha, &existing) {
            (None, Some(_)) => {
                return Err(format!("File already exists at {path} on branch {branch}: pass its sha to update it"));
            }
            (Some(given), Some(current)) if given != current => {
                return Err(format!("SHA mismatch: the file at {path} is {current}, not {given}"));
            }
            _ => {}
        }
        let commit = commit_files(f, &parent, &[(path.clone(), Some(content.into_bytes()))], &message)?;
        f.git.set_ref(&format!("refs/heads/{branch}"), &commit, Some(&parent))?;
        let blob = f.git.entry(&commit, &path).map(|(s, _)| s).unwrap_or_default();
        Ok(json!({ "content": { "name": path.rsplit('/').next(), "path": path, "sha": blob },
                   "commit": { "sha": commit, "message": message } }))
    })
}

fn delete_file(f: &Forge, args: &Args) -> Result<Value, String> {
    f.check_repo(args)?;
    let path = required(args, "path")?;
    let message = required(args, "message")?;
    let branch = required(args, "branch")?;
    f.ledger.with(|_| {
        let parent = f.git.branch(&branch).ok_or_else(|| not_found(&format!("get branch {branch}")))?;
        let commit = commit_files(f, &parent, &[(path.clone(), None)], &message)?;
        f.git.set_ref(&format!("refs/heads/{branch}"), &commit, Some(&parent))?;
        Ok(json!({ "commit": { "sha": commit, "message": message } }))
    })
}

fn push_files(f: &Forge, args: &Args) -> Result<Value, String> {
    f.check_repo(args)?;
    let branch = required(args, "branch")?;
    let message = required(args, "message")?;
    let files = args.get("files").and_then(Value::as_array).ok_or("missing required parameter: files")?;
    let mut parsed = Vec::new();
    for file in files {
        let path = file.get("path").and_then(Value::as_str).ok_or("each file must have a path and content")?;
        let content = file.get("content").and_then(Value::as_str).ok_or("each file must have a path and content")?;
        parsed.push((path.to_owned(), Some(content.as_bytes().to_vec())));
    }
    f.ledger.with(|_| {
        let refname = format!("refs/heads/{branch}");
        let parent = match f.git.branch(&branch) {
            Some(tip) => tip,
            None => {
                // A missing branch is made from the default branch's tip first.
                let tip = f.git.branch(&f.git.default_branch()).ok_or("the default branch is gone")?;
                f.git.set_ref(&refname, &tip, None)?;
                tip
            }
        };
        let commit = commit_files(f, &parent, &parsed, &message)?;
        f.git.set_ref(&refname, &commit, Some(&parent))?;
        Ok(json!({ "ref": refname, "object": { "sha": commit, "type": "commit" } }))
    })
}

fn issue_read(f: &Forge, args: &Args) -> Result<Value, String> {
    let mut gitea = args.clone();
    gitea.insert("issue_number".into(), json!(required_int(args, "issue_number")?));
    super::issues::read(f, &gitea)
}

fn issue_write(f: &Forge, args: &Args) -> Result<Value, String> {
    let method = required(args, "method")?;
    let (owner, repo) = f.check_repo(args)?;
    match method.as_str() {
        "create" => super::issues::write(f, args),
        "update" => {
            let number = required_int(args, "issue_number")?;
            f.ledger.with(|state| {
                let is_pull = state.pulls.iter().any(|p| p.number == number);
                // REST PATCH /issues/{n}: title and body, a PR's too.
                let mut text = args.clone();
                text.remove("state");
                text.remove("state_reason");
                text.insert("method".into(), json!("update"));
                if is_pull {
                    let p = pull(f, state, number, "update issue")?;
                    if let Some(t) = args::opt_string(args, "title") {
                        p.title = t;
                    }
                    if let Some(b) = args::opt_string(args, "body") {
                        p.body = b;
                    }
                    p.updated_at = now();
                } else if !state.issues.iter().any(|i| i.number == number) {
                    return Err(not_found("update issue"));
                } else if let Some(i) = state.issues.iter_mut().find(|i| i.number == number) {
                    if let Some(t) = args::opt_string(args, "title") {
                        i.title = t;
                    }
                    if let Some(b) = args::opt_string(args, "body") {
                        i.body = b;
                    }
                }
                // Then the state, through GraphQL's `repository.issue(number)`: a PR's number
                // does not resolve.
                if let Some(to) = args::opt_string(args, "state").filter(|s| s == "open" || s == "closed") {
                    if is_pull {
                        return Ok(Err(format!(
                            "failed to find issue: Could not resolve to an Issue with the number of {number}."
                        )));
                    }
                    if let Some(i) = state.issues.iter_mut().find(|i| i.number == number) {
                        i.state = to.clone();
                        i.closed_at = (to == "closed").then(now);
                    }
                }
                Ok(Ok(json!({ "id": number.to_string(), "url": format!("https://github.invalid/{owner}/{repo}/issues/{number}") })))
            })?
        }
        other => Err(format!("unknown method: {other}")),
    }
}

fn add_issue_comment(f: &Forge, args: &Args) -> Result<Value, String> {
    f.check_repo(args)?;
    let number = required_int(args, "issue_number")?;
    let body = required(args, "body")?;
    f.ledger.with(|state| {
        let id = state.take_id();
        let at = now();
        let comment = Comment { id, body: body.clone(), user: f.user.clone(), created_at: at.clone(), updated_at: at };
        if let Some(p) = state.pull_mut(number) {
            p.comments.push(comment);
        } else if let Some(i) = state.issues.iter_mut().find(|i| i.number == number) {
            i.comments.push(comment);
        } else {
            return Err(not_found("create comment"));
        }
        Ok(json!({ "id": id, "body": body }))
    })
}

fn github_review(f: &Forge, p: &Pull, r: &Review) -> Value {
    json!({
        "id": r.id, "state": r.state, "body": r.body, "commit_id": r.commit_id,
        "user": { "login": r.user }, "submitted_at": r.submitted_at,
        "html_url": format!("{}#pullrequestreview-{}", url(f, p.number), r.id),
    })
}

fn pull_request_read(f: &Forge, args: &Args) -> Result<Value, String> {
    let method = required(args, "method")?;
    if !PR_READ_METHODS.contains(&method.as_str()) {
        return Err(format!("unknown method: {method}"));
    }
    f.check_repo(args)?;
    let number = required_int(args, "pullNumber")?;
    f.ledger.with(|state| {
        let p = pull(f, state, number, "get pull request")?;
        let p = &*p;
        let base = f.git.branch(&p.base).unwrap_or_default();
        Ok(match method.as_str() {
            "get" => minimal(f, p),
            "get_diff" => json!(f.git.diff(&base, &p.head_sha, false)?),
            "get_files" => json!(
                f.git
                    .changed_files(&base, &p.head_sha)?
                    .into_iter()
                    .map(|(status, path, add, del)| json!({ "filename": path, "status": status, "additions": add, "deletions": del }))
                    .collect::<Vec<_>>()
            ),
            "get_reviews" => json!(p.reviews.iter().map(|r| github_review(f, p, r)).collect::<Vec<_>>()),
            "get_status" => json!({ "state": "pending", "sha": p.head_sha, "total_count": 0, "statuses": [] }),
            "get_check_runs" => json!({ "total_count": 0, "check_runs": [] }),
            "get_commits" => json!([{ "sha": p.head_sha }]),
            _ => json!([]),
        })
    })
}

fn list_pull_requests(f: &Forge, args: &Args) -> Result<Value, String> {
    f.check_repo(args)?;
    let wanted = args::opt_string(args, "state").filter(|s| !s.is_empty()).unwrap_or_else(|| "open".into());
    let size = args::opt_int(args, "perPage").filter(|n| *n > 0).unwrap_or(30).min(100);
    let page = args::opt_int(args, "page").filter(|n| *n > 0).unwrap_or(1);
    f.ledger.with(|state| {
        let mut listed = Vec::new();
        for p in state.pulls.iter_mut() {
            refresh(f, p)?;
            if wanted == "all" || p.state == wanted {
                listed.push(minimal(f, p));
            }
        }
        let (page, size) = (usize::try_from(page).unwrap_or(1), usize::try_from(size).unwrap_or(30));
        Ok(json!(args::paged(listed, (page, size))))
    })
}

fn create_pull_request(f: &Forge, args: &Args) -> Result<Value, String> {
    f.check_repo(args)?;
    let title = required(args, "title")?;
    let head = required(args, "head")?;
    let base = required(args, "base")?;
    let body = args::opt_string(args, "body").unwrap_or_default();
    f.ledger.with(|state| {
        let head_sha = f
            .git
            .branch(&head)
            .ok_or_else(|| "failed to create pull request: 422 Validation Failed [head invalid]".to_owned())?;
        let base_sha = f
            .git
            .branch(&base)
            .ok_or_else(|| "failed to create pull request: 422 Validation Failed [base invalid]".to_owned())?;
        if head == base || f.git.is_ancestor(&head_sha, &base_sha) {
            return Err(format!("failed to create pull request: 422 No commits between {base} and {head}"));
        }
        if state.pulls.iter().any(|p| p.state == "open" && p.head == head && p.base == base) {
            return Err(format!("failed to create pull request: 422 A pull request already exists for {head}."));
        }
        let number = state.take_index();
        f.git.force_ref(&head_ref(number), &head_sha)?;
        let at = now();
        state.pulls.push(Pull {
            number,
            title: title.clone(),
            body: body.clone(),
            state: "open".into(),
            user: f.user.clone(),
            head: head.clone(),
            base: base.clone(),
            head_sha,
            created_at: at.clone(),
            updated_at: at,
            ..Pull::default()
        });
        Ok(json!({ "id": (1_000_000 + number).to_string(), "url": url(f, number) }))
    })
}

fn update_pull_request(f: &Forge, args: &Args) -> Result<Value, String> {
    f.check_repo(args)?;
    let number = required_int(args, "pullNumber")?;
    f.ledger.with(|state| {
        let p = pull(f, state, number, "get pull request")?;
        if let Some(t) = args::opt_string(args, "title") {
            p.title = t;
        }
        if let Some(b) = args::opt_string(args, "body") {
            p.body = b;
        }
        let to = args::opt_string(args, "state");
        // go-github's `Edit` drops `base` when the same call closes the PR.
        if let Some(base) = args::opt_string(args, "base").filter(|_| to.as_deref() != Some("closed")) {
            f.git
                .branch(&base)
                .ok_or_else(|| "failed to update pull request: 422 Validation Failed [base]".to_owned())?;
            p.base = base;
        }
        if let Some(to) = to {
            set_state(f, p, &to, "update pull request")?;
        }
        p.updated_at = now();
        Ok(json!({ "id": (1_000_000 + number).to_string(), "url": url(f, number) }))
    })
}

fn merge_pull_request(f: &Forge, args: &Args) -> Result<Value, String> {
    f.check_repo(args)?;
    let number = required_int(args, "pullNumber")?;
    let terms = MergeTerms {
        method: args::opt_string(args, "merge_method").filter(|m| !m.is_empty()),
        title: args::opt_string(args, "commit_title").filter(|t| !t.is_empty()),
        message: args::opt_string(args, "commit_message").filter(|m| !m.is_empty()),
        // The released server sends no head: `expectedHeadSha` only where a listing declares it.
        sha: if f.head_pin { args::opt_string(args, "expectedHeadSha").filter(|s| !s.is_empty()) } else { None },
    };
    merge(f, number, &f.user, &terms)
        .map_err(|(status, message)| format!("failed to merge pull request: {status} {message}"))
}

/// What a merge asks of GitHub (`PUT /repos/O/R/pulls/N/merge`'s body).
#[derive(Debug, Default)]
pub(super) struct MergeTerms {
    /// `merge_method` (absent: `merge`).
    pub method: Option<String>,
    /// `commit_title`.
    pub title: Option<String>,
    /// `commit_message`: the merge commit's body, after its title (it lands on the base, and
    /// GitHub closes the issues its keywords name).
    pub message: Option<String>,
    /// `sha`: the head the PR must still have, else 409.
    pub sha: Option<String>,
}

/// A merge as GitHub makes it, by `by`: the merge result, or GitHub's status and message (404
/// no such PR, 405 not mergeable, 409 the head moved from `sha`, 422 a method not allowed).
pub(super) fn merge(f: &Forge, number: i64, by: &str, terms: &MergeTerms) -> Result<Value, (u16, String)> {
    let method = terms.method.clone().unwrap_or_else(|| "merge".into());
    let internal = |e: String| (500, e);
    f.ledger
        .with(|state| {
            let Some(p) = state.pull_mut(number) else { return Ok(Err((404, "Not Found".to_owned()))) };
            refresh(f, p)?;
            if p.merged || p.state != "open" {
                return Ok(Err((405, "Pull Request is not mergeable".to_owned())));
            }
            if f.race_merge {
                race(f, p)?;
            }
            if let Some(expected) = &terms.sha
                && *expected != p.head_sha
            {
                return Ok(Err((409, "Head branch was modified. Review and try the merge again.".to_owned())));
            }
            let head = p.head_sha.clone();
            let base = f.git.branch(&p.base).ok_or("the base branch is gone")?;
            let subject =
                terms.title.clone().unwrap_or_else(|| format!("Merge pull request #{} from {}", p.number, p.head));
            let subject = match &terms.message {
                Some(body) => format!("{subject}\n\n{body}"),
                None => subject,
            };
            let merged = match method.as_str() {
                "merge" | "squash" => {
                    let Some(tree) = f.git.merge_tree(&base, &head)? else {
                        return Ok(Err((405, "Pull Request is not mergeable".to_owned())));
                    };
                    let parents: Vec<&str> = if method == "merge" { vec![&base, &head] } else { vec![&base] };
                    f.git.commit(&tree, &parents, &subject)?
                }
                other => return Ok(Err((422, format!("Merge method {other} is not allowed on this repository")))),
            };
            f.git.set_ref(&format!("refs/heads/{}", p.base), &merged, Some(&base))?;
            let at = now();
            p.merged = true;
            p.state = "closed".into();
            p.merged_at = Some(at.clone());
            p.closed_at = Some(at.clone());
            p.updated_at = at;
            p.merged_by = Some(by.to_owned());
            p.merge_commit_sha = Some(merged.clone());
            Ok(Ok(json!({ "sha": merged, "merged": true, "message": "Pull Request successfully merged" })))
        })
        .map_err(internal)?
}

/// The PR as GitHub's REST API answers `GET /repos/O/R/pulls/N` (the fields the tests read).
pub(super) fn rest_pull(f: &Forge, number: i64) -> Result<Value, (u16, String)> {
    f.ledger
        .with(|state| {
            let Some(p) = state.pull_mut(number) else { return Ok(Err((404, "Not Found".to_owned()))) };
            refresh(f, p)?;
            Ok(Ok(minimal(f, p)))
        })
        .map_err(|e| (500, e))?
}

fn update_pull_request_branch(f: &Forge, args: &Args) -> Result<Value, String> {
    f.check_repo(args)?;
    let number = required_int(args, "pullNumber")?;
    let expected = args::opt_string(args, "expectedHeadSha").filter(|s| !s.is_empty());
    f.ledger.with(|state| {
        let p = pull(f, state, number, "get pull request")?;
        if let Some(expected) = expected
            && expected != p.head_sha
        {
            return Err(
                "failed to update pull request branch: 422 expected head sha didn't match current head ref.".into()
            );
        }
        update_branch(f, p).map_err(|e| format!("failed to update pull request branch: {e}"))?;
        Ok(json!({ "message": "Updating pull request branch.", "url": url(f, number) }))
    })
}

/// `mapstructure.WeakDecode` of one field: the Go field name, else any key equal ignoring
/// case (Go iterates a map in random order; here, the map's order).
fn weak<'a>(args: &'a Args, field: &str) -> Option<&'a Value> {
    args.get(field).or_else(|| args.iter().find(|(k, _)| k.eq_ignore_ascii_case(field)).map(|(_, v)| v))
}

/// WeakDecode of a number into an `int32` field: a float truncated, a string parsed with its
/// base prefix, a boolean 1 or 0, then wrapped to 32 bits.
fn weak_int32(value: Option<&Value>) -> Result<i64, String> {
    let n: i64 = match value {
        None => 0,
        #[allow(clippy::cast_possible_truncation)]
        Some(Value::Number(n)) => n.as_i64().unwrap_or_else(|| n.as_f64().unwrap_or(0.0) as i64),
        Some(Value::Bool(b)) => i64::from(*b),
        Some(Value::String(s)) => {
            let t = s.replace('_', "");
            let (digits, radix) = if let Some(h) = t.strip_prefix("0x") {
                (h.to_owned(), 16)
            } else if let Some(b) = t.strip_prefix("0b") {
                (b.to_owned(), 2)
            } else if let Some(o) = t.strip_prefix("0o") {
                (o.to_owned(), 8)
            } else if t.len() > 1 && t.starts_with('0') {
                (t[1..].to_owned(), 8)
            } else {
                (t.clone(), 10)
            };
            i64::from_str_radix(&digits, radix).map_err(|e| format!("cannot parse 'PullNumber' as int: {e}"))?
        }
        Some(other) => return Err(format!("'PullNumber' expected type 'int32', got {other}")),
    };
    #[allow(clippy::cast_possible_truncation)]
    Ok(i64::from(n as i32))
}

fn weak_string(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(if *b { "1" } else { "0" }.into()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn review_write(f: &Forge, args: &Args) -> Result<Value, String> {
    let method = weak_string(weak(args, "Method")).unwrap_or_default();
    if !REVIEW_METHODS.contains(&method.as_str()) {
        return Err(format!("unknown method: {method}"));
    }
    if method == "resolve_thread" || method == "unresolve_thread" {
        return Ok(json!(format!("review thread {method}d")));
    }
    let owner = weak_string(weak(args, "Owner")).unwrap_or_default();
    let repo = weak_string(weak(args, "Repo")).unwrap_or_default();
    let mut named = Args::new();
    named.insert("owner".into(), json!(owner));
    named.insert("repo".into(), json!(repo));
    f.check_repo(&named).map_err(|_| "Could not resolve to a Repository".to_owned())?;
    let number = weak_int32(weak(args, "PullNumber"))?;
    let event = weak_string(weak(args, "Event"));
    let commit = weak(args, "CommitID").and_then(Value::as_str).map(str::to_owned);
    let body = weak_string(weak(args, "Body")).unwrap_or_default();
    review(f, &method, number, event, commit, body)
}

/// The granular review tools (feature `pull_requests_granular`): the same reviews, their
/// arguments read strictly (`event`, `body`, `commitID` with their type errors discarded).
fn granular_review(f: &Forge, method: &str, args: &Args) -> Result<Value, String> {
    f.check_repo(args)?;
    let number = required_int(args, "pullNumber")?;
    let event = args.get("event").and_then(Value::as_str).filter(|e| !e.is_empty()).map(str::to_owned);
    if method == "submit_pending" && event.is_none() {
        return Err("missing required parameter: event".into());
    }
    let commit = args.get("commitID").and_then(Value::as_str).map(str::to_owned);
    let body = args.get("body").and_then(Value::as_str).unwrap_or_default().to_owned();
    review(f, method, number, event, commit, body)
}

/// A review `method` (`create`, `submit_pending`, `delete_pending`) on PR `number`.
fn review(
    f: &Forge,
    method: &str,
    number: i64,
    event: Option<String>,
    commit: Option<String>,
    body: String,
) -> Result<Value, String> {
    f.ledger.with(|state| {
        let id = state.next_id;
        let p = pull(f, state, number, "get pull request")
            .map_err(|_| format!("Could not resolve to a PullRequest with the number of {number}."))?;
        let answer = match method {
            "create" => {
                let verdict = match event.as_deref() {
                    None => "PENDING",
                    Some("APPROVE") => "APPROVED",
                    Some("REQUEST_CHANGES") => "CHANGES_REQUESTED",
                    Some("COMMENT") => "COMMENTED",
                    Some(other) => {
                        return Err(format!("Argument 'event' on InputObject has an invalid value ({other})."));
                    }
                };
                own_pull(f, p, verdict)?;
                if verdict == "PENDING" && p.reviews.iter().any(|r| r.user == f.user && r.state == "PENDING") {
                    return Err("User can only have one pending review per pull request".into());
                }
                p.reviews.push(Review {
                    id,
                    state: verdict.into(),
                    body: if verdict == "PENDING" { String::new() } else { body },
                    commit_id: commit.filter(|c| !c.is_empty()).unwrap_or_else(|| p.head_sha.clone()),
                    user: f.user.clone(),
                    submitted_at: (verdict != "PENDING").then(now),
                    ..Review::default()
                });
                if verdict == "PENDING" {
                    "pending pull request created"
                } else {
                    "pull request review submitted successfully"
                }
            }
            "submit_pending" => {
                // The viewer's first review, which must be the pending one; GitHub keeps the
                // commit it was made at.
                let i =
                    p.reviews.iter().position(|r| r.user == f.user).ok_or("No pending review found for the viewer")?;
                if p.reviews[i].state != "PENDING" {
                    return Err("No pending review found for the viewer".into());
                }
                let verdict = match event.as_deref() {
                    Some("APPROVE") => "APPROVED",
                    Some("REQUEST_CHANGES") => "CHANGES_REQUESTED",
                    Some("COMMENT") => "COMMENTED",
                    other => return Err(format!("Argument 'event' on InputObject has an invalid value ({other:?}).")),
                };
                own_pull(f, p, verdict)?;
                p.reviews[i].state = verdict.into();
                p.reviews[i].body = body;
                p.reviews[i].submitted_at = Some(now());
                "pull request review submitted successfully"
            }
            _ => {
                let i = p
                    .reviews
                    .iter()
                    .position(|r| r.user == f.user && r.state == "PENDING")
                    .ok_or("No pending review found for the viewer")?;
                p.reviews.remove(i);
                "pending pull request review successfully deleted"
            }
        };
        state.next_id = state.next_id.max(id + 1);
        Ok(json!(answer))
    })
}

/// GitHub refuses an approval or a request-changes by the PR's author.
fn own_pull(f: &Forge, p: &Pull, verdict: &str) -> Result<(), String> {
    if p.user == f.user && verdict == "APPROVED" {
        return Err("failed to create review: Can not approve your own pull request".into());
    }
    if p.user == f.user && verdict == "CHANGES_REQUESTED" {
        return Err("failed to create review: Can not request changes on your own pull request".into());
    }
    Ok(())
}

fn actions_run_trigger(f: &Forge, args: &Args) -> Result<Value, String> {
    let method = required(args, "method")?;
    if !RUN_METHODS.contains(&method.as_str()) {
        return Err(format!("unknown method: {method}"));
    }
    f.check_repo(args)?;
    match method.as_str() {
        "run_workflow" => {
            required(args, "workflow_id")?;
            required(args, "ref")?;
            Ok(json!({ "message": "Workflow run has been queued" }))
        }
        // No CI runs here: every run id is unknown.
        _ => {
            let run = required_int(args, "run_id").map_err(|_| "missing required parameter: run_id".to_owned())?;
            Err(format!("failed to {method}: 404 Not Found [run {run}]"))
        }
    }
}
