//! Code the forge runs from a branch: the checkout's workflow files (GitHub Actions'
//! `.github/workflows`, Gitea's `.gitea/workflows`, Forgejo's `.forgejo/workflows`) read for
//! a workflow that runs on events from branches the fleet does not protect with a token that
//! can write. Such a workflow runs *that branch's* code — its workflow file as it is there,
//! the local actions and scripts it calls — as soon as the author pushes; no gate sees it, and
//! the token lets that code push, tag, comment or approve.
//!
//! What is read (GitHub's and Gitea's syntax alike):
//!
//! * the triggers (`on`: a name, a list, or a map): `push` and `create` run the pushed
//!   branch's code — on every branch, or on those its `branches` filter names (a glob that
//!   could name an unprotected branch counts; `branches-ignore` runs everywhere it does not
//!   ignore; only `tags` runs on no branch push); `pull_request`, `pull_request_review` and
//!   `pull_request_review_comment` run the PR's head code (with a write token for a branch of
//!   the same repository), `merge_group` a queued PR's, `workflow_dispatch` the code of the ref
//!   a dispatch names (any branch); `pull_request_target` and
//!   `workflow_run` run with the base repository's token on events any branch can cause;
//! * the token (`permissions`, at the top and per job, a job's replacing the top's for it):
//!   `write-all` or any scope set to `write` can write; `read-all`, `{}` or only `read`/`none` scopes cannot; **no
//!   `permissions` key** (at the top, and on a job) means the repository's default, which may
//!   be write (GitHub: repositories and organisations that have not restricted the default;
//!   Gitea and Forgejo: write) — said so.
//!
//! Pure: a file's text and the protection in, findings (with the file's line) out.

use fleetgate_core::protect::Protection;
use serde::Serialize;
use yaml_rust2::parser::{Event, Parser};

/// The directories of workflow files under a checkout, per forge.
pub const WORKFLOW_DIRS: &[&str] = &[".github/workflows", ".gitea/workflows", ".forgejo/workflows"];

/// A workflow that runs code from unprotected branches with a token that can write.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WorkflowFinding {
    /// The file, as given.
    pub file: String,
    /// The line of the trigger.
    pub line: usize,
    /// The trigger (`push`, `pull_request_target`, …).
    pub trigger: String,
    /// The line that grants the write (a `permissions` key), or `None` when it is the
    /// repository's default (no `permissions` key).
    pub permissions_line: Option<usize>,
    /// One readable sentence.
    pub message: String,
}

/// A YAML node with the line it starts on.
#[derive(Clone, Debug)]
enum Node {
    Scalar(String, usize),
    Seq(Vec<Node>, usize),
    Map(Vec<(Node, Node)>, usize),
}

impl Node {
    fn line(&self) -> usize {
        match self {
            Self::Scalar(_, l) | Self::Seq(_, l) | Self::Map(_, l) => *l,
        }
    }

    fn text(&self) -> Option<&str> {
        match self {
            Self::Scalar(s, _) => Some(s),
            _ => None,
        }
    }

    /// A map's value under `key`, and the key's line.
    fn get(&self, key: &str) -> Option<(&Node, usize)> {
        match self {
            Self::Map(entries, _) => entries.iter().find(|(k, _)| k.text() == Some(key)).map(|(k, v)| (v, k.line())),
            _ => None,
        }
    }

    /// The scalars of a name or a list of names.
    fn names(&self) -> Vec<&str> {
        match self {
            Self::Scalar(s, _) => vec![s.as_str()],
            Self::Seq(items, _) => items.iter().filter_map(Node::text).collect(),
            Self::Map(..) => Vec::new(),
        }
    }
}

/// Deeper than this a file is refused unread: no workflow nests so deep, and a few kilobytes
/// of `- - - …` would otherwise build a node tree whose every walk recurses that deep.
const MAX_DEPTH: usize = 128;
/// The nodes a file may stand for, each alias counted as the node it repeats: past it the
/// file is refused (a "billion laughs" of nested aliases would exhaust memory).
const MAX_NODES: usize = 100_000;

/// Builds [`Node`]s from the parser's events (the first document only). An alias stands for
/// the node its anchor named.
#[derive(Default)]
struct Builder {
    /// Open collections: the node, its anchor, a map's key waiting for its value, and how
    /// many nodes were made before it opened.
    stack: Vec<(Node, usize, Option<Node>, usize)>,
    /// Each anchor's node and how many nodes it stands for.
    anchors: Vec<(usize, Node, usize)>,
    root: Option<Node>,
    /// The nodes made so far, aliases counted expanded.
    made: usize,
}

impl Builder {
    fn push(&mut self, node: Node, anchor: usize, size: usize) {
        if anchor > 0 {
            self.anchors.push((anchor, node.clone(), size));
        }
        match self.stack.last_mut() {
            None => {
                if self.root.is_none() {
                    self.root = Some(node);
                }
            }
            Some((Node::Seq(items, _), ..)) => items.push(node),
            Some((Node::Map(entries, _), _, pending, _)) => match pending.take() {
                None => *pending = Some(node),
                Some(key) => entries.push((key, node)),
            },
            Some((Node::Scalar(..), ..)) => {}
        }
    }

    /// One event of the document; `Err` when the file goes past [`MAX_DEPTH`] or [`MAX_NODES`].
    fn event(&mut self, ev: Event, line: usize) -> Result<(), Unread> {
        let opened = |node: Node, anchor: usize, this: &mut Self| {
            if this.stack.len() >= MAX_DEPTH {
                return Err(Unread::TooDeep);
            }
            this.stack.push((node, anchor, None, this.made));
            this.made += 1;
            Ok(())
        };
        match ev {
            Event::Scalar(text, _, anchor, _) => {
                self.made += 1;
                self.push(Node::Scalar(text, line), anchor, 1);
            }
            Event::Alias(anchor) => {
                let found = self.anchors.iter().rev().find(|(a, ..)| *a == anchor);
                let size = found.map_or(1, |(.., size)| *size);
                self.made = self.made.saturating_add(size);
                if self.made <= MAX_NODES {
                    let node = found.map_or_else(|| Node::Scalar(String::new(), line), |(_, node, _)| node.clone());
                    self.push(node, 0, size);
                }
            }
            Event::SequenceStart(anchor, _) => opened(Node::Seq(Vec::new(), line), anchor, self)?,
            Event::MappingStart(anchor, _) => opened(Node::Map(Vec::new(), line), anchor, self)?,
            Event::SequenceEnd | Event::MappingEnd => {
                if let Some((node, anchor, _, before)) = self.stack.pop() {
                    let size = self.made - before;
                    self.push(node, anchor, size);
                }
            }
            _ => {}
        }
        if self.made > MAX_NODES {
            return Err(Unread::TooManyNodes);
        }
        Ok(())
    }
}

/// The first document of `text`, read event by event (the parser's own loader recurses as
/// deep as the file nests).
fn parse(text: &str) -> Result<Option<Node>, Unread> {
    let mut parser = Parser::new_from_str(text);
    let mut builder = Builder::default();
    loop {
        let (ev, mark) = parser.next_token().map_err(|e| Unread::NotYaml(e.to_string()))?;
        match ev {
            Event::DocumentEnd | Event::StreamEnd => return Ok(builder.root),
            ev => builder.event(ev, mark.line())?,
        }
    }
}

/// Whether a `permissions` value grants a write.
fn writes(value: &Node) -> bool {
    match value {
        Node::Scalar(s, _) => s == "write-all" || s == "write",
        Node::Map(entries, _) => entries.iter().any(|(_, v)| v.text() == Some("write")),
        Node::Seq(..) => false,
    }
}

/// Whether a branch filter pattern could name a branch `protection` does not protect.
fn names_unprotected(pattern: &str, protection: &Protection) -> bool {
    if pattern.starts_with('!') {
        // An exclusion only narrows the filter.
        return false;
    }
    let literal = !pattern.contains(['*', '?', '[', '+']);
    if literal {
        return protection.branch_rule(pattern).is_none();
    }
    // A glob: it names an unprotected branch unless it is itself one of the protected globs.
    !protection.branches.iter().any(|p| p == pattern)
}

/// What a branch's push sets running: its own code.
const BRANCH_CODE: &str = "that branch's code (this file as it is there, its local actions and scripts) runs";
/// What a privileged trigger sets running.
const PRIVILEGED: &str = "the workflow runs privileged on an event any branch can cause (and often checks out that \
     branch's code)";

/// The reason a trigger runs code from an unprotected branch, if it does, and what runs.
fn runs_unprotected(trigger: &str, filter: Option<&Node>, protection: &Protection) -> Option<(String, &'static str)> {
    match trigger {
        "push" | "create" => {
            let branches = filter.and_then(|f| f.get("branches")).map(|(n, _)| n.names());
            let ignored = filter.and_then(|f| f.get("branches-ignore")).map(|(n, _)| n.names());
            let tags_only = filter.is_some_and(|f| {
                branches.is_none() && ignored.is_none() && (f.get("tags").is_some() || f.get("tags-ignore").is_some())
            });
            match (branches, ignored) {
                _ if tags_only => None,
                (Some(names), _) => names
                    .iter()
                    .find(|p| names_unprotected(p, protection))
                    .map(|p| format!("`{trigger}` to branches matching `{p}`, which the fleet does not protect")),
                (None, Some(names)) if names.contains(&"**") => None,
                (None, Some(_)) => Some(format!("`{trigger}` to every branch its `branches-ignore` leaves")),
                (None, None) => Some(format!("`{trigger}` to any branch")),
            }
            .map(|why| (why, BRANCH_CODE))
        }
        "pull_request" | "pull_request_review" | "pull_request_review_comment" => Some((
            format!("`{trigger}` from any branch of this repository (a write token for a branch that is not a fork's)"),
            BRANCH_CODE,
        )),
        "merge_group" => Some(("`merge_group`, on any PR a merge queue takes (its branch's code)".into(), BRANCH_CODE)),
        "workflow_dispatch" => Some((
            "`workflow_dispatch` naming any branch as its ref (a role allowed to dispatch runs that branch's code)"
                .into(),
            BRANCH_CODE,
        )),
        "pull_request_target" => {
            Some(("`pull_request_target`, with the base repository's token, on PRs from any branch".into(), PRIVILEGED))
        }
        "workflow_run" => Some((
            "`workflow_run`, with the base repository's token, after workflows any branch starts".into(),
            PRIVILEGED,
        )),
        _ => None,
    }
}

/// Read one workflow file (`file` names it in the findings): every trigger that runs code from
/// an unprotected branch when the token can write. A file that is not YAML is an `Err`.
pub fn judge(file: &str, text: &str, protection: &Protection) -> Result<Vec<WorkflowFinding>, WorkflowUnread> {
    let Some(root) = parse(text).map_err(|why| WorkflowUnread { file: file.to_owned(), why })? else {
        return Ok(Vec::new());
    };
    let Some((on, _)) = root.get("on") else { return Ok(Vec::new()) };
    let triggers: Vec<(String, Option<&Node>, usize)> = match on {
        Node::Scalar(s, l) => vec![(s.clone(), None, *l)],
        Node::Seq(items, _) => items.iter().filter_map(|n| Some((n.text()?.to_owned(), None, n.line()))).collect(),
        Node::Map(entries, _) => {
            entries.iter().filter_map(|(k, v)| Some((k.text()?.to_owned(), Some(v), k.line()))).collect()
        }
    };
    // The token: the top-level `permissions`, and each job's (which replaces it for the job).
    let top = root.get("permissions");
    let jobs: Vec<(&Node, Option<(&Node, usize)>)> = match root.get("jobs") {
        Some((Node::Map(entries, _), _)) => entries.iter().map(|(k, v)| (k, v.get("permissions"))).collect(),
        _ => Vec::new(),
    };
    let granted = |p: Option<(&Node, usize)>| p.filter(|(v, _)| writes(v)).map(|(_, l)| l);
    let mut write_line: Option<Option<usize>> = None;
    let mut default_job: Option<String> = None;
    // The top's write counts where a job keeps it (no `permissions` of its own), or with no jobs.
    if jobs.is_empty() || jobs.iter().any(|(_, own)| own.is_none()) {
        write_line = granted(top).map(Some);
    }
    for (name, own) in &jobs {
        match (own, top) {
            (Some(p), _) => {
                if let Some(line) = granted(Some(*p)) {
                    write_line.get_or_insert(Some(line));
                }
            }
            (None, Some(_)) => {}
            (None, None) => {
                default_job.get_or_insert_with(|| name.text().unwrap_or("?").to_owned());
            }
        }
    }
    if jobs.is_empty() && top.is_none() {
        default_job = Some("(every job)".into());
    }
    let token = match (write_line, &default_job) {
        (Some(Some(line)), _) => format!("its `permissions` (line {line}) grant a write"),
        (_, Some(job)) => format!(
            "no `permissions` key (job `{job}`): the repository's default token, which may be write (GitHub: unless \
             the repository or organisation restricts it; Gitea and Forgejo: write)"
        ),
        _ => return Ok(Vec::new()),
    };
    let permissions_line = write_line.flatten();
    Ok(triggers
        .into_iter()
        .filter_map(|(trigger, filter, line)| {
            let (why, runs) = runs_unprotected(&trigger, filter, protection)?;
            Some(WorkflowFinding {
                file: file.to_owned(),
                line,
                trigger: trigger.clone(),
                permissions_line,
                message: format!(
                    "{file}:{line}: runs on {why} — {runs} with a token that can write, and no gate sees it: \
                     {token}; give it `permissions: read-all` (or `contents: read`), or run it only on protected \
                     branches"
                ),
            })
        })
        .collect())
}

/// A workflow file [`judge`] cannot read: its name and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {why}")]
pub struct WorkflowUnread {
    /// The file, as the findings name it.
    pub file: String,
    /// Why it is not read.
    pub why: Unread,
}

/// Why a workflow file is not read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unread {
    /// Not YAML (the parser's reason).
    #[error("not YAML: {0}")]
    NotYaml(String),
    /// Nested past `MAX_DEPTH` levels.
    #[error("it nests deeper than {} levels: refused unread", MAX_DEPTH)]
    TooDeep,
    /// Its aliases expand past `MAX_NODES` nodes.
    #[error("its aliases stand for more than {} nodes: refused unread", MAX_NODES)]
    TooManyNodes,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(text: &str) -> Vec<(usize, String, Option<usize>)> {
        judge("w.yml", text, &Protection::default())
            .unwrap()
            .into_iter()
            .map(|f| (f.line, f.trigger, f.permissions_line))
            .collect()
    }

    #[test]
    fn a_job_s_own_permissions_replace_the_workflow_s() {
        // Read at the top, a write in one job: the job's token can write.
        let text = "on: push\npermissions: read-all\njobs:\n  a:\n    permissions:\n      contents: write\n  b: {}\n";
        assert_eq!(found(text), [(1, "push".into(), Some(5))]);
        // Read at the top, no job of its own: nothing writes.
        assert!(found("on: push\npermissions:\n  contents: read\njobs:\n  a: {}\n").is_empty());
        // `{}` grants nothing.
        assert!(found("on: push\npermissions: {}\njobs:\n  a: {}\n").is_empty());
    }

    /// A review or a review comment on a PR runs the workflow on the PR's code, as
    /// `pull_request` does (GitHub: the PR's merge commit, a write token for a branch of this
    /// repository; Gitea alike); so does a merge queue's run of a queued PR.
    #[test]
    fn a_review_of_a_pr_or_its_merge_queue_runs_the_pr_s_code() {
        let text = "on: [pull_request_review, pull_request_review_comment, merge_group]\njobs:\n  a: {}\n";
        let triggers: Vec<String> = found(text).into_iter().map(|f| f.1).collect();
        assert_eq!(triggers, ["pull_request_review", "pull_request_review_comment", "merge_group"]);
        // A dispatch names the ref it runs: any branch's code (GitHub's roster lets the
        // controller dispatch, `actions_run_trigger run_workflow` with `ref`).
        assert_eq!(found("on: workflow_dispatch\njobs:\n  a: {}\n"), [(1, "workflow_dispatch".into(), None)]);
    }

    /// A job's own `permissions` replace the workflow's: a write at the top that every job
    /// replaces with a read grants no job a write.
    #[test]
    fn a_write_at_the_top_that_every_job_replaces_grants_nothing() {
        let text = "on: push\npermissions: write-all\njobs:\n  a:\n    permissions: read-all\n";
        assert!(found(text).is_empty(), "{:?}", found(text));
        // One job that keeps it: the top's write, named by its line.
        let text = "on: push\npermissions: write-all\njobs:\n  a:\n    permissions: read-all\n  b: {}\n";
        assert_eq!(found(text), [(1, "push".into(), Some(2))]);
    }

    #[test]
    fn the_triggers_that_run_a_branch_s_code_or_privileged_code() {
        let text = "on: [create, workflow_run, issues, delete]\njobs:\n  a: {}\n";
        let triggers: Vec<String> = found(text).into_iter().map(|f| f.1).collect();
        assert_eq!(triggers, ["create", "workflow_run"]);
        // Only protected branches, by name and through an anchor: not named.
        let text = "x: &mains [main]\non:\n  push:\n    branches: *mains\njobs:\n  a: {}\n";
        assert!(found(text).is_empty(), "{:?}", found(text));
        // Every branch ignored but none: named.
        assert_eq!(found("on:\n  push:\n    branches-ignore: [main]\njobs: {}\n").len(), 1);
        assert!(found("on:\n  push:\n    branches-ignore: ['**']\njobs: {}\n").is_empty());
    }

    /// A hostile file is a clear error, never an abort: aliases that expand past a bound (a
    /// "billion laughs"), or nesting past a depth, which the parser would recurse into.
    #[test]
    fn a_hostile_file_is_an_error_not_a_crash() {
        let mut laughs = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..9 {
            let refs = vec![format!("*a{}", i - 1); 10].join(", ");
            laughs.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
        }
        laughs.push_str("on: push\njobs:\n  a: {}\n");
        let e = judge("w.yml", &laughs, &Protection::default()).unwrap_err().to_string();
        assert!(e.starts_with("w.yml: ") && e.contains("aliases"), "{e}");
        let deep = format!("on: push\nx:\n{}y\n", "- ".repeat(100_000));
        let e = judge("w.yml", &deep, &Protection::default()).unwrap_err().to_string();
        assert!(e.starts_with("w.yml: ") && e.contains("nests"), "{e}");
        // Within the bounds, anchors and nesting are read as before.
        let fine = format!("on: push\nx:\n{}y\njobs:\n  a: {{}}\n", "- ".repeat(50));
        assert_eq!(judge("w.yml", &fine, &Protection::default()).unwrap().len(), 1);
    }

    #[test]
    fn a_file_that_is_no_yaml_is_an_error_and_one_without_triggers_is_quiet() {
        assert!(judge("w.yml", "on: [push\n", &Protection::default()).unwrap_err().to_string().contains("not YAML"));
        assert!(found("name: nothing\n").is_empty());
        assert!(found("").is_empty());
    }
}
