//! Pull requests and reviews. A pull request is a record in the ledger plus
//! `refs/pull/<n>/head` in the bare repository; while it is open its head is the head
//! branch's tip, read afresh on every call (a push to the branch moves it), and
//! `refs/pull/<n>/head` follows. A merge is a real merge of that head into the base branch.

use super::Forge;
use super::args::{self, Args};
use super::catalog::{MERGE_STYLES, REVIEW_STATES};
use super::ledger::{Pull, Review, ReviewComment, State, now};
use serde_json::{Value, json};

fn is_draft(title: &str) -> bool {
    ["WIP:", "[WIP]"].iter().any(|p| title.get(..p.len()).is_some_and(|t| t.eq_ignore_ascii_case(p)))
}

/// A title with (`draft`) or without the `WIP: ` prefix Gitea reads as a draft.
fn drafted(title: &str, draft: bool) -> String {
    for prefix in ["WIP:", "[WIP]"] {
        if title.get(..prefix.len()).is_some_and(|t| t.eq_ignore_ascii_case(prefix)) {
            return if draft { title.to_owned() } else { title[prefix.len()..].trim_start().to_owned() };
        }
    }
    if draft { format!("WIP: {title}") } else { title.to_owned() }
}

pub(super) fn head_ref(number: i64) -> String {
    format!("refs/pull/{number}/head")
}

/// Bring an open pull request's head up to its branch's tip (in the repository the head
/// lives in), and `refs/pull/<n>/head` with it.
pub(super) fn refresh(f: &Forge, pull: &mut Pull) -> Result<(), String> {
    if pull.state == "open"
        && !pull.merged
        && let Some(tip) = f.head_git(pull).branch(&pull.head)
        && tip != pull.head_sha
    {
        f.git.force_ref(&head_ref(pull.number), &tip)?;
        pull.head_sha = tip;
    }
    Ok(())
}

fn repo_ref(full_name: &str) -> Value {
    json!({ "full_name": full_name, "description": "" })
}

/// The pull request as the server's slim answer shows it.
fn slim(f: &Forge, pull: &Pull) -> Value {
    let open = pull.state == "open" && !pull.merged;
    let base_sha = f.git.branch(&pull.base).unwrap_or_default();
    let mergeable =
        open && !base_sha.is_empty() && f.git.merge_tree(&base_sha, &pull.head_sha).ok().flatten().is_some();
    let mut m = json!({
        "number": pull.number,
        "title": pull.title,
        "body": pull.body,
        "state": pull.state,
        "draft": is_draft(&pull.title),
        "merged": pull.merged,
        "mergeable": mergeable,
        "html_url": format!("{}/pulls/{}", f.html_base(), pull.number),
        "user": pull.user,
        "labels": pull.labels.iter().map(|l| format!("label-{l}")).collect::<Vec<_>>(),
        "comments": pull.comments.len(),
        "created_at": pull.created_at,
        "updated_at": pull.updated_at,
        "closed_at": pull.closed_at,
        "head": { "ref": pull.head, "sha": pull.head_sha, "repo": repo_ref(&f.head_full_name(pull)) },
        "base": { "ref": pull.base, "sha": base_sha, "repo": repo_ref(&f.full_name()) },
    });
    if pull.merged {
        m["merged_at"] = json!(pull.merged_at);
        m["merge_commit_sha"] = json!(pull.merge_commit_sha);
        m["merged_by"] = json!(pull.merged_by);
    }
    if !pull.assignees.is_empty() {
        m["assignees"] = json!(pull.assignees);
    }
    m
}

fn slim_listed(f: &Forge, pull: &Pull) -> Value {
    json!({
        "number": pull.number,
        "title": pull.title,
        "state": pull.state,
        "draft": is_draft(&pull.title),
        "merged": pull.merged,
        "html_url": format!("{}/pulls/{}", f.html_base(), pull.number),
        "user": pull.user,
        "created_at": pull.created_at,
        "updated_at": pull.updated_at,
        "head": pull.head,
        "base": pull.base,
    })
}

fn slim_review(f: &Forge, pull: &Pull, r: &Review) -> Value {
    json!({
        "id": r.id,
        "state": r.state,
        "body": r.body,
        "user": r.user,
        "comments_count": r.comments.len(),
        "submitted_at": r.submitted_at,
        "html_url": format!("{}/pulls/{}#issuecomment-{}", f.html_base(), pull.number, r.id),
        "stale": r.commit_id != pull.head_sha,
        "official": true,
        "dismissed": r.dismissed,
    })
}

fn slim_review_comment(f: &Forge, pull: &Pull, review: i64, c: &ReviewComment) -> Value {
    let mut m = json!({
        "id": c.id,
        "review_id": review,
        "body": c.body,
        "path": c.path,
        "position": c.new_line_num,
        "old_position": c.old_line_num,
        "diff_hunk": "",
        "user": c.user,
        "html_url": format!("{}/pulls/{}/files#issuecomment-{}", f.html_base(), pull.number, c.id),
        "created_at": c.created_at,
        "updated_at": c.created_at,
    });
    if let Some(by) = &c.resolved_by {
        m["resolved_by"] = json!(by);
    }
    m
}

fn not_found(what: &str) -> String {
    format!("{what} err: The target couldn't be found.")
}

/// The pull request `number`, brought up to date.
fn pull<'a>(f: &Forge, state: &'a mut State, number: i64, what: &str) -> Result<&'a mut Pull, String> {
    let pull = state.pull_mut(number).ok_or_else(|| not_found(what))?;
    refresh(f, pull)?;
    Ok(pull)
}

pub fn list(f: &Forge, args: &Args) -> Result<Value, String> {
    f.check_repo(args)?;
    // Absent, the server sends no state and Gitea lists open pull requests.
    let wanted = args::opt_string(args, "state").filter(|s| !s.is_empty()).unwrap_or_else(|| "open".to_owned());
    let page = args::page(args, 30);
    f.ledger.with(|state| {
        let mut listed = Vec::new();
        for p in state.pulls.iter_mut().rev() {
            refresh(f, p)?;
            if wanted == "all" || p.state == wanted {
                listed.push(slim_listed(f, p));
            }
        }
        Ok(json!(args::paged(listed, page)))
    })
}

pub fn read(f: &Forge, args: &Args) -> Result<Value, String> {
    let method = args::string(args, "method")?;
    if !super::catalog::PR_READ_METHODS.contains(&method.as_str()) {
        return Err(format!("unknown method: {method}"));
    }
    let (owner, repo) = f.check_repo(args)?;
    let number = args::index(args, "pull_number")?;
    let at = format!("{owner}/{repo}/pr/{number}");
    f.ledger.with(|state| {
        let p = pull(f, state, number, &format!("get {at}"))?;
        let p = &*p;
        Ok(match method.as_str() {
            "get" => slim(f, p),
            "get_diff" => {
                let base = f.git.branch(&p.base).unwrap_or_default();
                json!(f.git.diff(&base, &p.head_sha, args::opt_bool(args, "binary") == Some(true))?)
            }
            "get_files" => {
                let base = f.git.branch(&p.base).unwrap_or_default();
                let files = f.git.changed_files(&base, &p.head_sha)?;
                let files: Vec<Value> = files
                    .into_iter()
                    .map(|(status, path, add, del)| {
                        json!({ "filename": path, "status": status, "additions": add, "deletions": del,
                                "changes": add + del })
                    })
                    .collect();
                json!(args::paged(files, args::page(args, 30)))
            }
            // No CI runs here: no statuses.
            "get_status" => json!({ "state": "", "sha": p.head_sha, "total_count": 0, "statuses": [] }),
            "get_reviews" => {
                let reviews: Vec<Value> = p.reviews.iter().map(|r| slim_review(f, p, r)).collect();
                json!(args::paged(reviews, args::page(args, 30)))
            }
            "get_review" => {
                let id = args::index(args, "review_id")?;
                let r = p
                    .reviews
                    .iter()
                    .find(|r| r.id == id)
                    .ok_or_else(|| not_found(&format!("get review {id} for {at}")))?;
                slim_review(f, p, r)
            }
            _ => {
                let only = args::opt_int(args, "review_id").filter(|id| *id != 0);
                let comments: Vec<Value> = p
                    .reviews
                    .iter()
                    .filter(|r| only.is_none_or(|id| r.id == id))
                    .flat_map(|r| r.comments.iter().map(move |c| (r.id, c)))
                    .map(|(id, c)| slim_review_comment(f, p, id, c))
                    .collect();
                json!(comments)
            }
        })
    })
}

pub fn write(f: &Forge, args: &Args) -> Result<Value, String> {
    let method = args::string(args, "method")?;
    if !super::catalog::PR_WRITE_METHODS.contains(&method.as_str()) {
        return Err(format!("unknown method: {method}"));
    }
    let (owner, repo) = f.check_repo(args)?;
    if method == "create" {
        return create(f, args, &owner, &repo);
    }
    let number = args::index(args, "pull_number")?;
    let at = format!("{owner}/{repo}/pr/{number}");
    f.ledger.with(|state| match method.as_str() {
        "update" => {
            let p = pull(f, state, number, &format!("edit {at}"))?;
            update(f, p, args, &at)?;
            Ok(slim(f, p))
        }
        "close" | "reopen" => {
            let p = pull(f, state, number, &format!("{method} {at}"))?;
            set_state(f, p, if method == "close" { "closed" } else { "open" }, &format!("{method} {at}"))?;
            Ok(slim(f, p))
        }
        "merge" => merge(f, state, number, args, &at),
        "update_branch" => {
            let p = pull(f, state, number, &format!("update {at} branch"))?;
            update_branch(f, p).map_err(|e| format!("update {at} branch err: {e}"))?;
            Ok(json!({ "message": "branch updated from base" }))
        }
        _ => {
            let add = method == "add_reviewers";
            let p = pull(f, state, number, &format!("review requests for {at}"))?;
            let reviewers = args::strings(args, "reviewers");
            let teams = args::strings(args, "team_reviewers");
            for r in &reviewers {
                p.reviewers.retain(|x| x != r);
                if add {
                    p.reviewers.push(r.clone());
                }
            }
            let verb = if add { "create" } else { "delete" };
            Ok(json!({
                "message": format!("Successfully {verb}d review requests"),
                "reviewers": reviewers,
                "team_reviewers": teams,
                "pr_index": number,
                "repository": format!("{owner}/{repo}"),
            }))
        }
    })
}

fn create(f: &Forge, args: &Args, owner: &str, repo: &str) -> Result<Value, String> {
    let mut title = args::string(args, "title")?;
    let body = args::string(args, "body")?;
    let head = args::string(args, "head")?;
    let base = args::string(args, "base")?;
    if let Some(draft) = args::opt_bool(args, "draft") {
        title = drafted(&title, draft);
    }
    let what = format!("create {owner}/{repo}/pull_request");
    // `owner:branch`: a head in the owner's fork of this repository (or in this one).
    let (head_repo, head) = match head.split_once(':') {
        Some((o, b)) if !o.eq_ignore_ascii_case(&f.owner) => {
            let fork = f
                .world
                .iter()
                .skip(1)
                .find(|r| r.full_name.split_once('/').is_some_and(|(fo, _)| fo.eq_ignore_ascii_case(o)))
                .ok_or_else(|| not_found(&what))?;
            (Some(fork.slug()), b.to_owned())
        }
        Some((_, b)) => (None, b.to_owned()),
        None => (None, head),
    };
    f.ledger.with(|state| {
        let fail = |why: &str| format!("{what} err: {why}");
        let head_git = head_repo.as_deref().and_then(|h| f.repo_named(h)).map_or(&f.git, |r| &r.git);
        let head_sha = head_git.branch(&head).ok_or_else(|| not_found(&what))?;
        let base_sha = f.git.branch(&base).ok_or_else(|| not_found(&what))?;
        if (head == base && head_repo.is_none()) || f.git.is_ancestor(&head_sha, &base_sha) {
            return Err(fail("There are no changes between the head and the base"));
        }
        if let Some(p) = state
            .pulls
            .iter()
            .find(|p| p.state == "open" && p.head == head && p.base == base && p.head_repo == head_repo)
        {
            return Err(fail(&format!("pull request already exists for these targets [id: {}]", p.number)));
        }
        let number = state.take_index();
        f.git.force_ref(&head_ref(number), &head_sha)?;
        let at = now();
        let pull = Pull {
            number,
            title: title.clone(),
            body: body.clone(),
            state: "open".to_owned(),
            user: f.user.clone(),
            head: head.clone(),
            base: base.clone(),
            head_sha,
            head_repo: head_repo.clone(),
            labels: args::ids(args, "labels").unwrap_or_default(),
            created_at: at.clone(),
            updated_at: at,
            ..Pull::default()
        };
        let answer = slim(f, &pull);
        state.pulls.push(pull);
        Ok(answer)
    })
}

pub(super) fn set_state(f: &Forge, p: &mut Pull, to: &str, what: &str) -> Result<(), String> {
    if p.merged {
        return Err(format!("{what} err: the pull request has been merged"));
    }
    if p.state != to {
        p.state = to.to_owned();
        p.closed_at = (to == "closed").then(now);
        p.updated_at = now();
        refresh(f, p)?;
    }
    Ok(())
}

fn update(f: &Forge, p: &mut Pull, args: &Args, at: &str) -> Result<(), String> {
    if let Some(title) = args::opt_string(args, "title") {
        p.title = title;
    }
    if let Some(draft) = args::opt_bool(args, "draft") {
        p.title = drafted(&p.title, draft);
    }
    if let Some(body) = args::opt_string(args, "body") {
        p.body = body;
    }
    if let Some(base) = args::opt_string(args, "base").filter(|b| !b.is_empty()) {
        f.git.branch(&base).ok_or_else(|| not_found(&format!("edit {at}")))?;
        p.base = base;
    }
    if let Some(assignee) = args::opt_string(args, "assignee").filter(|a| !a.is_empty()) {
        p.assignees = vec![assignee];
    }
    let assignees = args::strings(args, "assignees");
    if !assignees.is_empty() {
        p.assignees = assignees;
    }
    if let Some(labels) = args::ids(args, "labels") {
        p.labels = labels;
    }
    p.updated_at = now();
    if let Some(state) = args::opt_string(args, "state") {
        set_state(f, p, &state, &format!("edit {at}"))?;
    }
    Ok(())
}

/// `--variant race-merge`: commit `raced.txt` to the PR's head branch.
pub(super) fn race(f: &Forge, p: &mut Pull) -> Result<(), String> {
    let git = f.head_git(p).clone();
    let tip = git.branch(&p.head).ok_or("the head branch is gone")?;
    let blob = git.hash_blob(b"pushed while the merge was under way\n")?;
    let tree = git.tree_with(&tip, "raced.txt", Some(&blob))?;
    let commit = git.commit(&tree, &[&tip], "A push racing the merge")?;
    git.set_ref(&format!("refs/heads/{}", p.head), &commit, Some(&tip))?;
    refresh(f, p)
}

/// Gitea refuses an approval or a request-changes by the PR's own poster.
fn own_pull(f: &Forge, p: &Pull, state: &str, at: &str) -> Result<(), String> {
    if matches!(state, "APPROVED" | "REQUEST_CHANGES") && p.user == f.user {
        return Err(format!("create review for {at} failed: HTTP 422: approve/reject your own pull is not allowed"));
    }
    Ok(())
}

/// Merge the base into the head branch (Gitea's "update branch by merge").
pub(super) fn update_branch(f: &Forge, p: &mut Pull) -> Result<(), String> {
    let base = f.git.branch(&p.base).ok_or("the base branch is gone")?;
    let head_git = f.head_git(p).clone();
    let head = head_git.branch(&p.head).ok_or("the head branch is gone")?;
    if f.git.is_ancestor(&base, &head) {
        return Ok(());
    }
    let tree = f.git.merge_tree(&head, &base)?.ok_or("merge conflict")?;
    let message = format!("Merge branch '{}' into {}", p.base, p.head);
    let commit = f.git.commit(&tree, &[&head, &base], &message)?;
    head_git.set_ref(&format!("refs/heads/{}", p.head), &commit, Some(&head))?;
    refresh(f, p)
}

fn merge(f: &Forge, state: &mut State, number: i64, args: &Args, at: &str) -> Result<Value, String> {
    let style = args::opt_string(args, "merge_style").unwrap_or_else(|| "merge".to_owned());
    let delete = args::opt_bool(args, "delete_branch") == Some(true);
    let refused = |code: &str| format!("merge {at} failed: HTTP {code}");
    let p = pull(f, state, number, &format!("merge {at}"))?;
    if p.merged || p.state != "open" {
        return Err(refused("405 405 Method Not Allowed"));
    }
    if !MERGE_STYLES.contains(&style.as_str()) {
        return Err(format!("merge {at} err: unknown merge style {style:?}"));
    }
    if f.race_merge {
        // Another push lands on the head branch now, between whatever the caller read and
        // the forge's check below.
        race(f, p)?;
    }
    if let Some(expected) = args::opt_string(args, "head_commit_id").filter(|s| !s.is_empty())
        && expected != p.head_sha
    {
        return Err(refused("409 409 Conflict"));
    }
    let head = p.head_sha.clone();
    let base = f.git.branch(&p.base).ok_or_else(|| not_found(&format!("merge {at}")))?;
    let title = args::opt_string(args, "title").filter(|t| !t.is_empty());
    let body = args::opt_string(args, "message").unwrap_or_default();
    let from = match &p.head_repo {
        Some(_) => format!("{}:{}", f.head_full_name(p), p.head),
        None => p.head.clone(),
    };
    let subject = title
        .unwrap_or_else(|| format!("Merge pull request '{}' (#{}) from {from} into {}", p.title, p.number, p.base));
    let message = if body.is_empty() { subject } else { format!("{subject}\n\n{body}") };
    let merged = match style.as_str() {
        "fast-forward-only" => {
            if !f.git.is_ancestor(&base, &head) {
                return Err(refused("405 405 Method Not Allowed"));
            }
            head.clone()
        }
        "merge" | "squash" => {
            let tree = f.git.merge_tree(&base, &head)?.ok_or_else(|| refused("409 409 Conflict"))?;
            let parents: Vec<&str> = if style == "merge" { vec![&base, &head] } else { vec![&base] };
            f.git.commit(&tree, &parents, &message)?
        }
        other => return Err(format!("merge {at} err: merge style {other} is not supported by the forge fixture")),
    };
    f.git.set_ref(&format!("refs/heads/{}", p.base), &merged, Some(&base))?;
    let at_time = now();
    p.merged = true;
    p.state = "closed".to_owned();
    p.merged_at = Some(at_time.clone());
    p.closed_at = Some(at_time.clone());
    p.updated_at = at_time;
    p.merged_by = Some(f.user.clone());
    p.merge_commit_sha = Some(merged);
    // The head branch is deleted in the repository it lives in — a fork's too — unless it
    // is that repository's default branch or another open PR still pulls from it (Gitea's
    // `HasUnmergedPullRequestsByHeadInfo`); the PRs it heads or bases on are adjusted after
    // the call (`automation`), in every repository.
    let head_git = f.head_git(p).clone();
    let (head_repo, head_branch) = (p.head_repo.clone(), p.head.clone());
    let here = f.full_name().to_lowercase();
    let pulls_from = |o: &Pull, repo: &str| {
        o.state == "open"
            && !o.merged
            && o.head == head_branch
            && o.head_repo.as_deref().unwrap_or(repo) == head_repo.as_deref().unwrap_or(&here)
    };
    let shared = state.pulls.iter().any(|o| o.number != number && pulls_from(o, &here))
        || state.others.iter().any(|(slug, r)| r.pulls.iter().any(|o| pulls_from(o, slug)));
    let deleted = (delete
        && !shared
        && head_branch != head_git.default_branch()
        && head_git.branch(&head_branch).as_deref() == Some(head.as_str()))
    .then(|| head_branch.clone());
    if let Some(branch) = &deleted {
        head_git.delete_ref(&format!("refs/heads/{branch}"), &head)?;
    }
    if let (Some(branch), None) = (deleted, &head_repo) {
        super::repo::branch_deleted(f, state, &branch);
    }
    Ok(json!({
        "merged": true,
        "pr_index": number,
        "repository": f.full_name(),
        "merge_style": style,
        "branch_deleted": delete,
    }))
}

pub fn review_write(f: &Forge, args: &Args) -> Result<Value, String> {
    let method = args::string(args, "method")?;
    if !super::catalog::REVIEW_WRITE_METHODS.contains(&method.as_str()) {
        return Err(format!("unknown method: {method}"));
    }
    let (owner, repo) = f.check_repo(args)?;
    if method == "resolve_thread" || method == "unresolve_thread" {
        let id = args::index(args, "comment_id")?;
        let resolve = method == "resolve_thread";
        return f.ledger.with(|state| {
            let c = state
                .pulls
                .iter_mut()
                .flat_map(|p| p.reviews.iter_mut())
                .flat_map(|r| r.comments.iter_mut())
                .find(|c| c.id == id)
                .ok_or_else(|| {
                    not_found(&format!("set resolved={resolve} on review comment {id} in {owner}/{repo}"))
                })?;
            c.resolved_by = resolve.then(|| f.user.clone());
            Ok(json!({ "message": "Successfully updated review thread", "comment_id": id, "resolved": resolve,
                       "repository": format!("{owner}/{repo}") }))
        });
    }
    let number = args::index(args, "pull_number")?;
    let at = format!("{owner}/{repo}/pr/{number}");
    f.ledger.with(|state| {
        let id = state.next_id;
        let p = pull(f, state, number, &format!("review {at}"))?;
        let answer = review_method(f, p, &method, args, &at, id)?;
        let used = p.reviews.iter().flat_map(|r| std::iter::once(r.id).chain(r.comments.iter().map(|c| c.id))).max();
        if let Some(max) = used {
            state.next_id = state.next_id.max(max + 1);
        }
        Ok(answer)
    })
}

/// One review method on `p`; new IDs start at `next`.
fn review_method(f: &Forge, p: &mut Pull, method: &str, args: &Args, at: &str, next: i64) -> Result<Value, String> {
    let review_at = |p: &mut Pull, what: &str| -> Result<usize, String> {
        let id = args::index(args, "review_id")?;
        p.reviews.iter().position(|r| r.id == id).ok_or_else(|| not_found(&format!("{what} review {id} for {at}")))
    };
    match method {
        "create" => {
            let state = args::opt_string(args, "state").filter(|s| !s.is_empty()).unwrap_or_else(|| "PENDING".into());
            if !REVIEW_STATES.contains(&state.as_str()) {
                return Err(format!("create review for {at} err: unknown review state {state:?}"));
            }
            own_pull(f, p, &state, at)?;
            let mut ids = next..;
            let review_id = ids.next().unwrap_or(next);
            let comments: Vec<ReviewComment> = args
                .get("comments")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_object)
                .map(|c| ReviewComment {
                    id: ids.next().unwrap_or(next),
                    path: args::opt_string(c, "path").unwrap_or_default(),
                    body: args::opt_string(c, "body").unwrap_or_default(),
                    old_line_num: args::opt_int(c, "old_line_num").unwrap_or(0),
                    new_line_num: args::opt_int(c, "new_line_num").unwrap_or(0),
                    user: f.user.clone(),
                    created_at: now(),
                    ..ReviewComment::default()
                })
                .collect();
            let commit_id = args::opt_string(args, "commit_id").filter(|s| !s.is_empty()).unwrap_or(p.head_sha.clone());
            let review = Review {
                id: review_id,
                submitted_at: (state != "PENDING").then(now),
                state,
                body: args::opt_string(args, "body").unwrap_or_default(),
                commit_id,
                user: f.user.clone(),
                dismissed: false,
                comments,
            };
            let answer = slim_review(f, p, &review);
            p.reviews.push(review);
            Ok(answer)
        }
        "submit" => {
            let state = args::string(args, "state")?;
            let i = review_at(p, "submit")?;
            if !REVIEW_STATES.contains(&state.as_str()) || state == "PENDING" {
                return Err(format!("submit review {} for {at} err: unknown review state {state:?}", p.reviews[i].id));
            }
            if p.reviews[i].state != "PENDING" {
                return Err(format!("submit review {} for {at} err: the review is not pending", p.reviews[i].id));
            }
            own_pull(f, p, &state, at)?;
            // Gitea records a submitted review at the PR's head at submission.
            p.reviews[i].commit_id = p.head_sha.clone();
            p.reviews[i].state = state;
            p.reviews[i].submitted_at = Some(now());
            if let Some(body) = args::opt_string(args, "body") {
                p.reviews[i].body = body;
            }
            Ok(slim_review(f, p, &p.reviews[i]))
        }
        "delete" => {
            let i = review_at(p, "delete")?;
            let id = p.reviews.remove(i).id;
            Ok(json!({ "message": "Successfully deleted review", "review_id": id, "pr_index": p.number,
                       "repository": f.full_name() }))
        }
        "dismiss" => {
            let i = review_at(p, "dismiss")?;
            p.reviews[i].dismissed = true;
            Ok(json!({ "message": "Successfully dismissed review", "review_id": p.reviews[i].id,
                       "pr_index": p.number, "repository": f.full_name() }))
        }
        _ => {
            let comment = args::index(args, "comment_id")?;
            let body = args::string(args, "body")?;
            let what = format!("reply to review comment {comment} on {at}");
            let review = p
                .reviews
                .iter_mut()
                .find(|r| r.comments.iter().any(|c| c.id == comment))
                .ok_or_else(|| not_found(&what))?;
            let first = review.comments.iter().find(|c| c.id == comment).cloned().unwrap_or_default();
            let reply = ReviewComment {
                id: next,
                path: first.path,
                body,
                old_line_num: first.old_line_num,
                new_line_num: first.new_line_num,
                user: f.user.clone(),
                created_at: now(),
                reply_to: Some(comment),
                resolved_by: None,
            };
            let review_id = review.id;
            review.comments.push(reply.clone());
            Ok(slim_review_comment(f, p, review_id, &reply))
        }
    }
}
