//! Branches, files and commits: real refs and real commits in the bare repository.

use super::Forge;
use super::args::{self, Args};
use super::git::CommitInfo;
use serde_json::{Value, json};

/// Standard base64 with padding (what the server answers file contents in).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> shift) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

pub fn server_version(_f: &Forge, _args: &Args) -> Result<Value, String> {
    Ok(json!(format!("fleetgate-forge-fixture {}", env!("CARGO_PKG_VERSION"))))
}

pub fn me(f: &Forge, _args: &Args) -> Result<Value, String> {
    Ok(json!({ "id": 1, "login": f.user, "full_name": f.user, "email": format!("{}@forge.invalid", f.user) }))
}

/// `search_repos`: the forge's repositories (the served one, then its forks) whose name
/// holds the query (Gitea's repository search; the go-sdk server's `query`), each with its
/// default branch.
pub fn search_repos(f: &Forge, args: &Args) -> Result<Value, String> {
    let keyword = args::string(args, "query")?.to_ascii_lowercase();
    let forks = f.world.len().saturating_sub(1) as u64;
    let found: Vec<Value> = f
        .world
        .iter()
        .enumerate()
        .filter(|(_, r)| r.full_name.to_ascii_lowercase().contains(&keyword))
        .map(|(i, r)| {
            let (owner, name) = r.full_name.split_once('/').unwrap_or(("", &r.full_name));
            json!({
                "id": i + 1,
                "name": name,
                "full_name": r.full_name,
                "owner": { "login": owner },
                "default_branch": r.git.default_branch(),
                "html_url": format!("{}{}", super::APP_URL, r.full_name),
                // gitea-mcp's slimmed repository answer names whether it is a fork and how
                // many it has, never the parent.
                "fork": i > 0,
                "forks_count": if i == 0 { f.forks + forks } else { 0 },
            })
        })
        .collect();
    Ok(json!(found))
}

pub fn list_branches(f: &Forge, args: &Args) -> Result<Value, String> {
    f.check_repo(args)?;
    let branches = f.git.branches().map_err(|e| format!("list branches error: {e}"))?;
    let listed: Vec<Value> = branches
        .into_iter()
        .map(|(name, sha)| json!({ "name": name, "protected": false, "commit_sha": sha }))
        .collect();
    Ok(json!(args::paged(listed, args::page(args, 30))))
}

pub fn create_branch(f: &Forge, args: &Args) -> Result<Value, String> {
    f.check_repo(args)?;
    let branch = args::string(args, "branch")?;
    let from = args::opt_string(args, "old_branch").filter(|b| !b.is_empty()).unwrap_or_else(|| f.git.default_branch());
    f.ledger.with(|_| {
        let fail = |why: &str| format!("create branch error: {why}");
        if !f.git.valid_branch_name(&branch) {
            return Err(fail(&format!("invalid branch name {branch:?}")));
        }
        let tip = f.git.branch(&from).ok_or_else(|| fail(&format!("branch does not exist [name: {from}]")))?;
        if f.git.branch(&branch).is_some() {
            return Err(fail(&format!("branch already exists [name: {branch}]")));
        }
        f.git.set_ref(&format!("refs/heads/{branch}"), &tip, None).map_err(|e| fail(&e))
    })?;
    Ok(json!("Branch Created"))
}

pub fn delete_branch(f: &Forge, args: &Args) -> Result<Value, String> {
    f.check_repo(args)?;
    let branch = args::string(args, "branch")?;
    f.ledger.with(|state| {
        let fail = |why: &str| format!("delete branch error: {why}");
        if branch == f.git.default_branch() {
            return Err(fail("the default branch cannot be deleted"));
        }
        let tip = f.git.branch(&branch).ok_or_else(|| fail(&format!("branch does not exist [name: {branch}]")))?;
        f.git.delete_ref(&format!("refs/heads/{branch}"), &tip).map_err(|e| fail(&e))?;
        branch_deleted(f, state, &branch);
        Ok(())
    })?;
    Ok(json!("Branch Deleted"))
}

/// What Gitea (1.24 and later: `AdjustPullsCausedByBranchDeleted`) does to the open PRs of a
/// deleted branch: those it heads are closed; those based on it move to the default branch
/// (`RETARGET_CHILDREN_ON_MERGE`, on by default).
pub fn branch_deleted(f: &Forge, state: &mut super::ledger::State, branch: &str) {
    let default = f.git.default_branch();
    for p in state.pulls.iter_mut().filter(|p| p.state == "open" && !p.merged) {
        if p.head == branch {
            p.state = "closed".to_owned();
            p.closed_at = Some(super::ledger::now());
        } else if p.base == branch {
            p.base.clone_from(&default);
        }
    }
}

/// The commit a `ref` argument names: a branch, a tag or a commit.
fn commit_at(f: &Forge, rev: &str) -> Option<String> {
    let rev = if rev.is_empty() { f.git.default_branch() } else { rev.to_owned() };
    f.git.branch(&rev).or_else(|| f.git.commit_of(&format!("refs/tags/{rev}"))).or_else(|| f.git.commit_of(&rev))
}

pub fn get_file(f: &Forge, args: &Args) -> Result<Value, String> {
    f.check_repo(args)?;
    let path = args::string(args, "path")?;
    let rev = args::opt_string(args, "ref").unwrap_or_default();
    let not_found = || "get file err: The target couldn't be found.".to_owned();
    let commit = commit_at(f, &rev).ok_or_else(not_found)?;
    let (sha, kind) = f.git.entry(&commit, &path).ok_or_else(not_found)?;
    if kind != "blob" {
        return Err(not_found());
    }
    let bytes = f.git.blob(&sha)?;
    let name = path.rsplit('/').next().unwrap_or(&path).to_owned();
    let content = if args::opt_bool(args, "withLines") == Some(true) {
        let text = String::from_utf8_lossy(&bytes);
        let lines: Vec<Value> = text.lines().enumerate().map(|(i, l)| json!({ "line": i + 1, "content": l })).collect();
        serde_json::to_string_pretty(&lines).map_err(|e| e.to_string())?
    } else {
        base64(&bytes)
    };
    Ok(json!({ "name": name, "path": path.trim_start_matches('/'), "sha": sha, "type": "file", "size": bytes.len(),
               "content": content, "encoding": "base64" }))
}

pub fn get_dir(f: &Forge, args: &Args) -> Result<Value, String> {
    f.check_repo(args)?;
    let path = args::opt_string(args, "path").unwrap_or_default();
    let rev = args::opt_string(args, "ref").unwrap_or_default();
    let not_found = || "get dir content err: The target couldn't be found.".to_owned();
    let commit = commit_at(f, &rev).ok_or_else(not_found)?;
    let entries = f.git.list_dir(&commit, &path).map_err(|_| not_found())?;
    let dir = path.trim_matches('/');
    Ok(json!(
        entries
            .into_iter()
            .map(|(name, kind, size)| {
                let full = if dir.is_empty() { name.clone() } else { format!("{dir}/{name}") };
                let kind = if kind == "tree" { "dir" } else { "file" };
                json!({ "name": name, "path": full, "type": kind, "size": size })
            })
            .collect::<Vec<_>>()
    ))
}

pub fn create_or_update_file(f: &Forge, args: &Args) -> Result<Value, String> {
    f.check_repo(args)?;
    let path = args::string(args, "path")?;
    let content = args::opt_string(args, "content").unwrap_or_default();
    let message = args::opt_string(args, "message").unwrap_or_default();
    let branch = args::opt_string(args, "branch_name").unwrap_or_default();
    let new_branch = args::opt_string(args, "new_branch_name").filter(|b| !b.is_empty());
    let sha = args::opt_string(args, "sha").filter(|s| !s.is_empty());
    let verb = if sha.is_some() { "update" } else { "create" };
    let target = new_branch.clone().unwrap_or_else(|| branch.clone());
    f.ledger.with(|_| {
        let fail = |why: &str| format!("{verb} file err: {why}");
        let branch = if branch.is_empty() { f.git.default_branch() } else { branch.clone() };
        let parent = f.git.branch(&branch).ok_or_else(|| fail(&format!("branch does not exist [name: {branch}]")))?;
        if let Some(new) = &new_branch
            && (!f.git.valid_branch_name(new) || f.git.branch(new).is_some())
        {
            return Err(fail(&format!("branch already exists [name: {new}]")));
        }
        let existing = f.git.entry(&parent, &path).filter(|(_, kind)| kind == "blob").map(|(s, _)| s);
        match (&sha, &existing) {
            (None, Some(_)) => return Err(fail(&format!("repository file already exists [path: {path}]"))),
            (Some(_), None) => return Err(fail(&format!("repository file does not exist [path: {path}]"))),
            (Some(given), Some(current)) if given != current => {
                return Err(fail(&format!("sha does not match [given: {given}, expected: {current}]")));
            }
            _ => {}
        }
        let blob = f.git.hash_blob(content.as_bytes()).map_err(|e| fail(&e))?;
        let tree = f.git.tree_with(&parent, &path, Some(&blob)).map_err(|e| fail(&e))?;
        let message = if message.is_empty() { format!("{verb} {path}") } else { message.clone() };
        let commit = f.git.commit(&tree, &[&parent], &message).map_err(|e| fail(&e))?;
        match &new_branch {
            Some(new) => f.git.set_ref(&format!("refs/heads/{new}"), &commit, None),
            None => f.git.set_ref(&format!("refs/heads/{branch}"), &commit, Some(&parent)),
        }
        .map_err(|e| fail(&e))
    })?;
    let done = if verb == "update" { "Update" } else { "Create" };
    Ok(json!(format!("{done} file success on branch {target}")))
}

pub fn delete_file(f: &Forge, args: &Args) -> Result<Value, String> {
    f.check_repo(args)?;
    let path = args::string(args, "path")?;
    let message = args::opt_string(args, "message").unwrap_or_default();
    let branch = args::opt_string(args, "branch_name").unwrap_or_default();
    let sha = args::string(args, "sha")?;
    f.ledger.with(|_| {
        let fail = |why: &str| format!("delete file err: {why}");
        let branch = if branch.is_empty() { f.git.default_branch() } else { branch.clone() };
        let parent = f.git.branch(&branch).ok_or_else(|| fail(&format!("branch does not exist [name: {branch}]")))?;
        let current = f
            .git
            .entry(&parent, &path)
            .filter(|(_, kind)| kind == "blob")
            .map(|(s, _)| s)
            .ok_or_else(|| fail(&format!("repository file does not exist [path: {path}]")))?;
        if current != sha {
            return Err(fail(&format!("sha does not match [given: {sha}, expected: {current}]")));
        }
        let tree = f.git.tree_with(&parent, &path, None).map_err(|e| fail(&e))?;
        let message = if message.is_empty() { format!("delete {path}") } else { message.clone() };
        let commit = f.git.commit(&tree, &[&parent], &message).map_err(|e| fail(&e))?;
        f.git.set_ref(&format!("refs/heads/{branch}"), &commit, Some(&parent)).map_err(|e| fail(&e))
    })?;
    Ok(json!("Delete file success"))
}

fn commit_json(f: &Forge, c: &CommitInfo) -> Value {
    json!({
        "sha": c.sha,
        "html_url": format!("{}/commit/{}", f.html_base(), c.sha),
        "created": c.date,
        "message": c.message,
        "author": { "name": c.author_name, "email": c.author_email, "date": c.date },
    })
}

pub fn list_commits(f: &Forge, args: &Args) -> Result<Value, String> {
    f.check_repo(args)?;
    let rev = args::opt_string(args, "sha").unwrap_or_default();
    let commit = commit_at(f, &rev).ok_or_else(|| "list repo commits err: The target couldn't be found.".to_owned())?;
    let (page, size) = args::page(args, 30);
    let path = args::opt_string(args, "path");
    let commits = f
        .git
        .log(&commit, path.as_deref(), (page - 1) * size, size)
        .map_err(|e| format!("list repo commits err: {e}"))?;
    Ok(json!(commits.iter().map(|c| commit_json(f, c)).collect::<Vec<_>>()))
}

pub fn get_commit(f: &Forge, args: &Args) -> Result<Value, String> {
    f.check_repo(args)?;
    let sha = args::string(args, "sha")?;
    let not_found = || format!("get commit {sha} err: The target couldn't be found.");
    let commit = commit_at(f, &sha).ok_or_else(not_found)?;
    let found = f.git.log(&commit, None, 0, 1).map_err(|_| not_found())?;
    found.first().map(|c| commit_json(f, c)).ok_or_else(not_found)
}

/// `actions_run_read`: no CI runs here, so `list_runs` is empty; `download_job_log` answers
/// a log and, given `output_path`, writes it there (as the real server does: a reader with a
/// side effect).
pub fn actions_run_read(f: &Forge, args: &Args) -> Result<Value, String> {
    let method = args::string(args, "method")?;
    f.check_repo(args)?;
    match method.as_str() {
        "list_runs" => Ok(json!({ "total_count": 0, "workflow_runs": [] })),
        "download_job_log" => {
            let job = args::index(args, "job_id")?;
            let log = format!("job {job}: no CI runs on this forge\n");
            match args::opt_string(args, "output_path").filter(|p| !p.is_empty()) {
                Some(path) => {
                    std::fs::write(&path, &log).map_err(|e| format!("write {path}: {e}"))?;
                    Ok(json!({ "message": "Log downloaded", "output_path": path, "size": log.len() }))
                }
                None => Ok(json!({ "log": log })),
            }
        }
        other => Err(format!("unknown method: {other}")),
    }
}
