//! What the forge does on its own after a call, as Gitea (and, for `--surface github-mcp`,
//! GitHub) does it — the effects the gate must foresee (`GITEA_MCP.md`, "What the forge
//! does later and elsewhere"):
//!
//! * **Commits landing on a branch** (a file write, a merge, an update from base, a new
//!   branch: its last ten commits, as Gitea's push hook reads them): each message is read for
//!   references (`refs`); a closing or reopening one changes the referenced issue's state —
//!   Gitea: when the branch is the issue's `ref`, or the repository's default branch for an
//!   issue with none (`services/issue/commit.go` `UpdateIssuesCommit`), in this repository
//!   or another of the forge's (`owner/name#N`); only issues, never PRs. GitHub: on the
//!   default branch only.
//! * **A PR's texts** (Gitea: its title and body, every comment on it and every review
//!   comment; GitHub: its body) record cross-references to issues, each with its action
//!   (`models/issues/issue_xref.go`: a later keyword for the same issue wins; a PR's own
//!   number and a PR as the target carry none; an edit replaces what its text referenced).
//! * **A merge** resolves them (`ResolveCrossReferences`): every issue the latest reference
//!   closes is closed, every one it reopens reopened — Gitea whatever the base, GitHub when
//!   the base is the default branch.
//! * **A deleted branch** (by `delete_branch`, or a merge's `delete_branch` in the head's
//!   repository, a fork's too): every open PR whose head it is, in any repository, is closed;
//!   every open PR of its repository based on it moves to that repository's default branch.
//!
//! It works by difference: the branch tips and records before a call against those after,
//! under the forge's world lock, so every tool's effect is covered the same way.

use super::git::Git;
use super::ledger::{Issue, Ledger, Pull, State, XRef, now};
use super::refs::{self, Action, Ref};
use std::collections::BTreeMap;

/// Whose automation the forge plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grammar {
    Gitea,
    Github,
}

/// One repository of the forge.
#[derive(Clone, Debug)]
pub struct WorldRepo {
    /// `owner/name` as the forge spells it.
    pub full_name: String,
    pub git: Git,
}

impl WorldRepo {
    pub fn slug(&self) -> String {
        self.full_name.to_lowercase()
    }
}

/// The forge before a call.
#[derive(Debug)]
pub struct Before {
    refs: Vec<BTreeMap<String, String>>,
    state: State,
}

fn tips(world: &[WorldRepo]) -> Result<Vec<BTreeMap<String, String>>, String> {
    world.iter().map(|r| r.git.branches().map(|b| b.into_iter().collect())).collect()
}

/// Read the forge before a call.
pub fn before(world: &[WorldRepo], ledger: &Ledger) -> Result<Before, String> {
    Ok(Before { refs: tips(world)?, state: ledger.snapshot()? })
}

/// A repository's records in `state` (the served one's at the top level).
fn records<'a>(state: &'a State, home: &str, slug: &str) -> Option<(&'a [Issue], &'a [Pull])> {
    if slug == home {
        return Some((&state.issues, &state.pulls));
    }
    state.others.get(slug).map(|r| (r.issues.as_slice(), r.pulls.as_slice()))
}

fn strip(branch: &str) -> &str {
    branch.strip_prefix("refs/heads/").unwrap_or(branch)
}

/// Set an issue open or closed (a PR is never changed this way).
fn set_issue(state: &mut State, home: &str, slug: &str, index: i64, action: Action) {
    let Some((issues, _)) = state.records_mut(home, slug) else { return };
    let Some(issue) = issues.iter_mut().find(|i| i.number == index) else { return };
    let to = match action {
        Action::Closes => "closed",
        Action::Reopens => "open",
        Action::None => return,
    };
    if issue.state != to {
        issue.state = to.to_owned();
        issue.closed_at = (to == "closed").then(now);
        issue.updated_at = now();
    }
}

/// Act on what the call did: `world[0]` is the served repository.
pub fn after(
    world: &[WorldRepo],
    ledger: &Ledger,
    grammar: Grammar,
    app_url: &str,
    before: &Before,
) -> Result<(), String> {
    let after_refs = tips(world)?;
    let home = world[0].slug();
    let defaults: Vec<String> = world.iter().map(|r| r.git.default_branch()).collect();
    // The commits each moved branch gained, oldest first (a new branch: its last ten).
    let mut landed: Vec<(String, String, Vec<String>)> = Vec::new();
    for (i, repo) in world.iter().enumerate() {
        for (branch, tip) in &after_refs[i] {
            let old = before.refs[i].get(branch);
            if old == Some(tip) {
                continue;
            }
            let messages = repo.git.messages(old.map(String::as_str), tip, 10)?;
            landed.push((repo.slug(), branch.clone(), messages));
        }
    }
    ledger.unfocused().with(|state| {
        // Deleted branches: the PRs they head close, those based on them move.
        for (i, repo) in world.iter().enumerate() {
            for branch in before.refs[i].keys().filter(|b| !after_refs[i].contains_key(*b)) {
                branch_gone(state, world, &home, &repo.slug(), branch, &defaults[i]);
            }
        }
        cross_references(state, world, &home, grammar, app_url, &before.state);
        for (slug, branch, messages) in &landed {
            let default = world.iter().position(|r| r.slug() == *slug).map(|i| defaults[i].clone()).unwrap_or_default();
            for message in messages {
                let found = match grammar {
                    Grammar::Gitea => refs::gitea_plain(message, app_url),
                    Grammar::Github => refs::github_closing(message),
                };
                for r in found.iter().filter(|r| r.action != Action::None) {
                    let target = r.repo.clone().unwrap_or_else(|| slug.clone());
                    let Some((issues, _)) = records(state, &home, &target) else { continue };
                    let Some(issue) = issues.iter().find(|i| i.number == r.index) else { continue };
                    let applies = match (grammar, issue.branch.as_deref().filter(|b| !b.is_empty())) {
                        (Grammar::Gitea, Some(issue_branch)) => strip(issue_branch) == branch,
                        _ => *branch == default,
                    };
                    if applies {
                        set_issue(state, &home, &target, r.index, r.action);
                    }
                }
            }
        }
        // Merges resolve their PR's cross-references.
        for (i, repo) in world.iter().enumerate() {
            let slug = repo.slug();
            let Some((_, pulls)) = records(state, &home, &slug) else { continue };
            let before_pulls = records(&before.state, &home, &slug).map(|(_, p)| p).unwrap_or_default();
            let merged: Vec<Pull> = pulls
                .iter()
                .filter(|p| p.merged && !before_pulls.iter().any(|b| b.number == p.number && b.merged))
                .cloned()
                .collect();
            for p in merged {
                if grammar == Grammar::Github && p.base != defaults[i] {
                    continue;
                }
                let mut latest: Vec<&XRef> = Vec::new();
                for x in p.xrefs.iter().filter(|x| x.action != "none") {
                    latest.retain(|l| !(l.repo == x.repo && l.index == x.index));
                    latest.push(x);
                }
                for x in latest {
                    set_issue(state, &home, &x.repo, x.index, Action::parse(&x.action));
                }
            }
        }
        Ok(())
    })
}

/// Gitea's `AdjustPullsCausedByBranchDeleted` for `slug`'s `branch`.
fn branch_gone(state: &mut State, world: &[WorldRepo], home: &str, slug: &str, branch: &str, default: &str) {
    for repo in world {
        let here = repo.slug();
        let Some((_, pulls)) = state.records_mut(home, &here) else { continue };
        for p in pulls.iter_mut().filter(|p| p.state == "open" && !p.merged) {
            let head_repo = p.head_repo.clone().unwrap_or_else(|| here.clone());
            if head_repo == slug && p.head == branch {
                p.state = "closed".to_owned();
                p.closed_at = Some(now());
            } else if here == slug && p.base == branch {
                default.clone_into(&mut p.base);
            }
        }
    }
}

/// The references of one text of a PR, resolved against the forge's records as Gitea's
/// `getCrossReferences` does: the target must exist; a PR as the target, or the PR itself,
/// carries no action (the PR itself is left out); a later action for the same issue wins.
fn resolve(
    state: &State,
    world: &[WorldRepo],
    home: &str,
    here: &str,
    pr: i64,
    found: &[Ref],
    source: i64,
) -> Vec<XRef> {
    let mut out: Vec<XRef> = Vec::new();
    for r in found {
        let target = r.repo.clone().unwrap_or_else(|| here.to_owned());
        if !world.iter().any(|w| w.slug() == target) || (target == here && r.index == pr) {
            continue;
        }
        let Some((issues, pulls)) = records(state, home, &target) else { continue };
        let is_issue = issues.iter().any(|i| i.number == r.index);
        if !is_issue && !pulls.iter().any(|p| p.number == r.index) {
            continue;
        }
        let action = if is_issue { r.action } else { Action::None };
        if let Some(seen) = out.iter_mut().find(|x| x.repo == target && x.index == r.index) {
            if action != Action::None {
                action.as_str().clone_into(&mut seen.action);
            }
            continue;
        }
        out.push(XRef { source, repo: target, index: r.index, action: action.as_str().to_owned() });
    }
    out
}

/// Record the cross-references of every PR text that is new or changed since `before`.
fn cross_references(
    state: &mut State,
    world: &[WorldRepo],
    home: &str,
    grammar: Grammar,
    app_url: &str,
    before: &State,
) {
    let mut updates: Vec<(String, i64, i64, Vec<XRef>)> = Vec::new();
    for repo in world {
        let here = repo.slug();
        let Some((_, pulls)) = records(state, home, &here) else { continue };
        let old = records(before, home, &here).map(|(_, p)| p).unwrap_or_default();
        for p in pulls {
            let prev = old.iter().find(|o| o.number == p.number);
            if prev.is_none_or(|o| o.title != p.title || o.body != p.body) {
                let found = match grammar {
                    Grammar::Gitea => {
                        let mut f = refs::gitea_plain(&p.title, app_url);
                        f.extend(refs::gitea_markdown(&p.body, app_url));
                        f
                    }
                    Grammar::Github => refs::github_closing(&p.body),
                };
                updates.push((here.clone(), p.number, 0, resolve(state, world, home, &here, p.number, &found, 0)));
            }
            if grammar == Grammar::Github {
                continue;
            }
            let old_comments: Vec<(i64, &str)> = prev
                .map(|o| {
                    o.comments
                        .iter()
                        .map(|c| (c.id, c.body.as_str()))
                        .chain(o.reviews.iter().flat_map(|r| r.comments.iter().map(|c| (c.id, c.body.as_str()))))
                        .collect()
                })
                .unwrap_or_default();
            let comments = p
                .comments
                .iter()
                .map(|c| (c.id, c.body.as_str()))
                .chain(p.reviews.iter().flat_map(|r| r.comments.iter().map(|c| (c.id, c.body.as_str()))));
            for (id, body) in comments {
                if old_comments.contains(&(id, body)) {
                    continue;
                }
                let found = refs::gitea_markdown(body, app_url);
                updates.push((here.clone(), p.number, id, resolve(state, world, home, &here, p.number, &found, id)));
            }
        }
    }
    for (slug, number, source, xrefs) in updates {
        let Some((_, pulls)) = state.records_mut(home, &slug) else { continue };
        let Some(p) = pulls.iter_mut().find(|p| p.number == number) else { continue };
        p.xrefs.retain(|x| x.source != source);
        p.xrefs.extend(xrefs);
    }
}
