//! The forge's record as the oracle reads it, and the checks made on it after every call.

use super::generate::{self as gen_, Arg, Dialect};
use super::{FORK, HOME, Outcome, STATE_ROLES, Step};
use crate::forge::ledger::{Ledger, State};
use crate::forge::refs::{self, Action};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;

/// A PR as the oracle compares it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pr {
    pub state: String,
    pub merged: bool,
    pub base: String,
    pub head: String,
    /// The repository the head lives in (`owner/name`, lowercase).
    pub head_repo: String,
    pub user: String,
    pub title: String,
    pub body: String,
    /// (user, body) of each comment on it, review comments included.
    pub comments: Vec<(String, String)>,
    /// (user, state, commit, dismissed) of each review.
    pub reviews: Vec<(String, String, String, bool)>,
    pub merge_commit: Option<String>,
    /// The head's commit when it merged (the head branch's tip while open).
    pub head_sha: String,
}

/// The forge's record: every repository's branches, PRs and issues.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Branch tips by repository (`owner/name`, lowercase).
    pub refs: BTreeMap<String, BTreeMap<String, String>>,
    /// Default branches by repository.
    pub defaults: BTreeMap<String, String>,
    pub prs: BTreeMap<(String, i64), Pr>,
    /// Issue states.
    pub issues: BTreeMap<(String, i64), String>,
    /// Commit → its author's name (the look-alike commits as its `--user`).
    pub authors: BTreeMap<String, String>,
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git").arg("--git-dir").arg(dir).args(args).output();
    out.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned()).unwrap_or_default()
}

impl Snapshot {
    /// Read the look-alike's record: its repositories (`owner/name`, bare repository; the
    /// served one first) and its ledger.
    pub fn read(repos: &[(&str, &Path)], ledger: &Path) -> Self {
        let mut s = Self::default();
        for (slug, dir) in repos {
            let listed = git(dir, &["for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads"]);
            let tips = listed.lines().filter_map(|l| l.split_once(' ')).map(|(b, c)| (b.to_owned(), c.to_owned()));
            s.refs.insert(slug.to_lowercase(), tips.collect());
            s.defaults.insert(slug.to_lowercase(), git(dir, &["symbolic-ref", "--short", "HEAD"]));
        }
        let state: State = Ledger::new(ledger).snapshot().unwrap_or_default();
        let home = repos[0].0.to_lowercase();
        let mut all = vec![(home.clone(), state.issues, state.pulls)];
        all.extend(state.others.into_iter().map(|(k, r)| (k, r.issues, r.pulls)));
        for (slug, issues, pulls) in all {
            for i in issues {
                s.issues.insert((slug.clone(), i.number), i.state);
            }
            for p in pulls {
                let head_repo = p.head_repo.clone().unwrap_or_else(|| slug.clone());
                let head_sha = if p.state == "open" && !p.merged {
                    s.refs.get(&head_repo).and_then(|r| r.get(&p.head)).cloned().unwrap_or(p.head_sha.clone())
                } else {
                    p.head_sha.clone()
                };
                let mut comments: Vec<(String, String)> =
                    p.comments.iter().map(|c| (c.user.clone(), c.body.clone())).collect();
                comments
                    .extend(p.reviews.iter().flat_map(|r| r.comments.iter().map(|c| (c.user.clone(), c.body.clone()))));
                let pr = Pr {
                    state: p.state,
                    merged: p.merged,
                    base: p.base,
                    head: p.head,
                    head_repo,
                    user: p.user,
                    title: p.title,
                    body: p.body,
                    comments,
                    reviews: p
                        .reviews
                        .iter()
                        .map(|r| (r.user.clone(), r.state.clone(), r.commit_id.clone(), r.dismissed))
                        .collect(),
                    merge_commit: p.merge_commit_sha,
                    head_sha,
                };
                s.prs.insert((slug.clone(), p.number), pr);
            }
        }
        let home_dir = repos[0].1;
        let heads: Vec<String> = s.prs.values().map(|p| p.head_sha.clone()).filter(|h| !h.is_empty()).collect();
        for head in heads {
            let author = git(home_dir, &["log", "-1", "--format=%an", &head]);
            s.authors.insert(head, author);
        }
        s
    }

    fn numbers(&self, slug: &str, prs: bool, issues: bool) -> Vec<i64> {
        let mut out: Vec<i64> = Vec::new();
        if prs {
            out.extend(self.prs.keys().filter(|(r, _)| r == slug).map(|(_, n)| *n));
        }
        if issues {
            out.extend(self.issues.keys().filter(|(r, _)| r == slug).map(|(_, n)| *n));
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The projection a refused call must leave unchanged.
    fn record(&self) -> (Vec<String>, Vec<String>) {
        let refs = self.refs.iter().flat_map(|(r, b)| b.iter().map(move |(n, c)| format!("{r} {n} {c}"))).collect();
        let mut rest: Vec<String> =
            self.prs.iter().map(|((r, n), p)| format!("{r}#{n} {} {} {}", p.state, p.merged, p.base)).collect();
        rest.extend(self.issues.iter().map(|((r, n), s)| format!("{r}#{n} {s}")));
        (refs, rest)
    }
}

/// One call as made: who, what, what came of it, the forge before and after.
#[derive(Clone, Copy, Debug)]
pub struct Made<'a> {
    pub member: &'a str,
    pub tool: &'a str,
    pub args: &'a Value,
    pub outcome: &'a Outcome,
    pub before: &'a Snapshot,
    pub after: &'a Snapshot,
}

/// A check that failed: its kind (what minimisation keeps) and what happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub kind: &'static str,
    pub detail: String,
}

/// What the oracle remembers across a case: who each author worker is, who opened each PR,
/// who holds each issue's lock.
#[derive(Debug)]
pub struct Run {
    dialect: Dialect,
    /// The author's worker generation (a restart makes another author).
    author: u32,
    /// (repo, PR) → (member, generation) that opened it.
    creators: BTreeMap<(String, i64), (String, u32)>,
    /// (repo, issue) → generation holding its lock.
    locks: BTreeMap<(String, i64), u32>,
    /// The PR last approved (a merge mostly merges it).
    approved: Option<i64>,
}

fn member_role(member: &str) -> &str {
    super::MEMBERS.iter().find(|(m, _)| *m == member).map_or(member, |(_, r)| r)
}

fn is_merge(tool: &str, args: &Value) -> bool {
    tool == "merge_pull_request" || (tool == "pull_request_write" && args["method"] == "merge")
}

fn protected(branch: &str, default: &str) -> bool {
    branch == default || branch.starts_with("release/")
}

impl Run {
    pub fn new(dialect: Dialect) -> Self {
        Self { dialect, author: 0, creators: BTreeMap::new(), locks: BTreeMap::new(), approved: None }
    }

    pub fn restarted(&mut self, member: &str) {
        if member == "author" {
            self.author += 1;
        }
    }

    fn generation(&self, member: &str) -> u32 {
        if member == "author" { self.author } else { 0 }
    }

    /// Remember what a call settled: a PR opened, an issue lock taken.
    pub fn observe(&mut self, made: Made<'_>) {
        let Made { member, tool, args, outcome, before, after } = made;
        if !matches!(outcome, Outcome::Forwarded { error: false, .. }) {
            return;
        }
        for key in after.prs.keys().filter(|k| !before.prs.contains_key(*k)) {
            self.creators.insert(key.clone(), (member.to_owned(), self.generation(member)));
        }
        if tool == "pull_request_review_write"
            && let Some(pr) = args.get("pull_number").or_else(|| args.get("pullNumber")).and_then(Value::as_i64)
        {
            self.approved = Some(pr);
        }
        if tool.ends_with("claim_issue_lease")
            && let Some(issue) = args["issue"].as_i64()
        {
            self.locks.insert((HOME.to_owned(), issue), self.generation(member));
        }
    }

    /// The calls `step` makes now: (member, tool, arguments); an empty tool restarts the member.
    pub fn resolve(&self, step: &Step, now: &Snapshot, outputs: &Path, prefix: &str) -> Vec<(String, String, Value)> {
        let home = HOME.to_owned();
        let open_prs: Vec<i64> = now
            .prs
            .iter()
            .filter(|((r, _), p)| *r == home && p.state == "open" && !p.merged)
            .map(|((_, n), _)| *n)
            .collect();
        let pick_pr = |k: u32| {
            let all = if open_prs.is_empty() { now.numbers(&home, true, false) } else { open_prs.clone() };
            if all.is_empty() { i64::from(k % 3) + 1 } else { all[k as usize % all.len()] }
        };
        let head_of = |pr: i64| now.prs.get(&(home.clone(), pr)).map(|p| p.head_sha.clone()).unwrap_or_default();
        let at = |mut v: Value| {
            v["owner"] = json!("fleet");
            v["repo"] = json!("forge");
            v
        };
        match step {
            Step::NewAuthor => vec![("author".into(), String::new(), Value::Null)],
            Step::ClaimIssue { issue } => {
                let issues = now.numbers(&home, false, true);
                let n = if issues.is_empty() { 1 } else { issues[*issue as usize % issues.len()] };
                vec![("author".into(), format!("{prefix}claim_issue_lease"), at(json!({ "issue": n })))]
            }
            Step::Approve { pr } => {
                let n = pick_pr(*pr);
                let claim = at(json!({ "pr": n, "head": head_of(n), "purpose": "review" }));
                let approve = match self.dialect {
                    Dialect::Gitea => {
                        json!({ "method": "create", "pull_number": n, "state": "APPROVED", "body": "LGTM" })
                    }
                    Dialect::Github => {
                        json!({ "method": "create", "pullNumber": n, "event": "APPROVE", "body": "LGTM" })
                    }
                };
                vec![
                    ("reviewer".into(), format!("{prefix}claim_pr_lease"), claim),
                    ("reviewer".into(), "pull_request_review_write".into(), at(approve)),
                ]
            }
            Step::Merge { pr, args } => {
                // Mostly the PR last approved (a merge of an unapproved head is refused anyway).
                let n = match self.approved.filter(|a| open_prs.contains(a)) {
                    Some(a) if pr % 4 != 0 => a,
                    _ => pick_pr(*pr),
                };
                let claim = at(json!({ "pr": n, "head": head_of(n), "purpose": "merge" }));
                let (tool, mut merge) = match self.dialect {
                    Dialect::Gitea => ("pull_request_write", json!({ "method": "merge", "pull_number": n })),
                    Dialect::Github => ("merge_pull_request", json!({ "pullNumber": n })),
                };
                for (k, a) in args {
                    merge[k] = self.value(a, now, &home, outputs);
                }
                vec![
                    ("merger".into(), format!("{prefix}claim_pr_lease"), claim),
                    ("merger".into(), tool.into(), at(merge)),
                ]
            }
            Step::Call { member, tool, args } => {
                let owner = args
                    .iter()
                    .find(|(k, _)| k == "owner")
                    .and_then(|(_, a)| if let Arg::Lit(v) = a { v.as_str().map(str::to_owned) } else { None })
                    .unwrap_or_else(|| "fleet".into());
                let slug = format!("{owner}/forge");
                let mut v = json!({ "owner": owner, "repo": "forge" });
                for (k, a) in args.iter().filter(|(k, _)| k != "owner") {
                    let value = self.value(a, now, &slug, outputs);
                    if k == "comments" {
                        v[k] = json!([{ "path": "x.txt", "new_line_num": 1, "body": value }]);
                    } else {
                        v[k] = value;
                    }
                }
                vec![(member.clone(), tool.clone(), v)]
            }
        }
    }

    fn value(&self, a: &Arg, now: &Snapshot, slug: &str, outputs: &Path) -> Value {
        let pick =
            |list: &[i64], k: u32| if list.is_empty() { i64::from(k % 5) + 1 } else { list[k as usize % list.len()] };
        match a {
            Arg::Lit(v) => v.clone(),
            Arg::Pr(k) => json!(pick(&now.numbers(slug, true, false), *k)),
            Arg::Issue(k) => json!(pick(&now.numbers(slug, true, true), *k)),
            Arg::Branch(k) => {
                let branches: Vec<&String> = now.refs.get(slug).map(|r| r.keys().collect()).unwrap_or_default();
                if branches.is_empty() { json!("main") } else { json!(branches[*k as usize % branches.len()]) }
            }
            Arg::Head(k) => {
                let mut heads: Vec<String> =
                    now.refs.get(HOME).map(|r| r.keys().cloned().collect()).unwrap_or_default();
                if self.dialect == Dialect::Gitea {
                    let fork_owner = FORK.split('/').next().unwrap_or_default();
                    heads.extend(
                        now.refs.get(FORK).into_iter().flat_map(|r| r.keys().map(|b| format!("{fork_owner}:{b}"))),
                    );
                }
                if heads.is_empty() { json!("main") } else { json!(heads[*k as usize % heads.len()]) }
            }
            Arg::Text(pieces) => {
                let issues = now.numbers(HOME, true, true);
                let fork_issues = now.numbers(FORK, true, true);
                json!(gen_::render(pieces, &issues, &fork_issues, self.dialect))
            }
            Arg::Output => json!(outputs.join(format!("out-{}", now.prs.len())).display().to_string()),
        }
    }

    /// The issues `pr`'s own texts close (`Closes`) or reopen, as the forge reads them, in
    /// its repository `slug`: its title and body, and (Gitea) its author's comments.
    fn named(&self, slug: &str, pr: &Pr) -> Vec<((String, i64), Action)> {
        let mut found: Vec<refs::Ref> = Vec::new();
        match self.dialect {
            Dialect::Gitea => {
                found.extend(refs::gitea_plain(&pr.title, crate::forge::APP_URL));
                found.extend(refs::gitea_markdown(&pr.body, crate::forge::APP_URL));
                for (user, body) in &pr.comments {
                    if member_role(user) == "author" {
                        found.extend(refs::gitea_markdown(body, crate::forge::APP_URL));
                    }
                }
            }
            Dialect::Github => found.extend(refs::github_closing(&pr.body)),
        }
        found
            .into_iter()
            .filter(|r| r.action != Action::None)
            .map(|r| ((r.repo.unwrap_or_else(|| slug.to_owned()), r.index), r.action))
            .collect()
    }
}

/// Hold the call `member` made (`tool`, `args`, what came of it) against the guarantee, on
/// the forge's record before and after it; every check it breaks.
pub fn check(run: &Run, made: Made<'_>, outputs: &Path) -> Vec<Violation> {
    let Made { member, tool, args, outcome, before, after } = made;
    let mut found = Vec::new();
    let mut violation = |kind: &'static str, detail: String| found.push(Violation { kind, detail });
    let role = member_role(member);
    if std::fs::read_dir(outputs).is_ok_and(|mut d| d.next().is_some()) {
        violation("read-wrote-file", format!("`{tool}` left a file in {}", outputs.display()));
    }
    if matches!(outcome, Outcome::Refused { .. }) && before.record() != after.record() {
        violation("refused-call-changed-the-forge", format!("{member}'s refused `{tool}` changed the forge"));
    }
    let merging = role == "merger" && is_merge(tool, args);
    // The PRs this call merged.
    let merged: Vec<(&(String, i64), &Pr)> =
        after.prs.iter().filter(|(k, p)| p.merged && !before.prs.get(*k).is_some_and(|b| b.merged)).collect();
    for (key, _) in &merged {
        if !merging {
            violation("pr-merged-by-another-call", format!("{member}'s `{tool}` merged {}#{}", key.0, key.1));
        }
    }
    // Protected branches move only by such a merge, of an independently approved head.
    let repos: std::collections::BTreeSet<&String> = before.refs.keys().chain(after.refs.keys()).collect();
    for repo in repos {
        let default = after.defaults.get(repo).or_else(|| before.defaults.get(repo)).cloned().unwrap_or_default();
        let (b, a) = (before.refs.get(repo), after.refs.get(repo));
        let names: std::collections::BTreeSet<&String> =
            b.into_iter().flat_map(|m| m.keys()).chain(a.into_iter().flat_map(|m| m.keys())).collect();
        for branch in names {
            let (was, now) = (b.and_then(|m| m.get(branch)), a.and_then(|m| m.get(branch)));
            if was == now || !protected(branch, &default) {
                continue;
            }
            let by_merge =
                merged.iter().find(|((r, _), p)| r == repo && p.base == *branch && p.merge_commit.as_ref() == now);
            let Some((key, p)) = by_merge else {
                violation(
                    "protected-branch-moved",
                    format!("{member}'s `{tool}` moved `{branch}` of {repo} ({was:?} → {now:?}) by no merge"),
                );
                continue;
            };
            let pusher = after.authors.get(&p.head_sha).cloned().unwrap_or_default();
            let independent = p.reviews.iter().any(|(user, state, commit, dismissed)| {
                state == "APPROVED" && !dismissed && *commit == p.head_sha && *user != p.user && *user != pusher
            });
            if !independent {
                violation(
                    "unapproved-head-landed",
                    format!(
                        "the merge of {}#{} landed head {} on `{branch}`, approved by no independent reviewer",
                        key.0, key.1, p.head_sha
                    ),
                );
            }
        }
    }
    // PRs: opened or closed only by the state roles, never retargeted.
    for (key, p) in &after.prs {
        let Some(b) = before.prs.get(key) else { continue };
        if b.base != p.base && !p.merged {
            violation(
                "pr-retargeted",
                format!("{member}'s `{tool}` moved {}#{} from `{}` to `{}`", key.0, key.1, b.base, p.base),
            );
        }
        if b.state != p.state && !p.merged && !STATE_ROLES.contains(&role) {
            violation(
                "pr-state-by-another-role",
                format!("{member} ({role})'s `{tool}` set {}#{} {}", key.0, key.1, p.state),
            );
        }
    }
    // Issues: opened or closed only by the state roles, or by the merge of a PR whose own
    // texts name them, no other author holding their lock.
    for (key, state) in &after.issues {
        let Some(was) = before.issues.get(key) else { continue };
        if was == state || STATE_ROLES.contains(&role) {
            continue;
        }
        let want = if state == "closed" { Action::Closes } else { Action::Reopens };
        let naming = merged.iter().find(|((slug, _), p)| run.named(slug, p).contains(&(key.clone(), want)));
        let Some((pr_key, _)) = naming.filter(|_| merging) else {
            violation(
                "issue-state-by-another-role",
                format!(
                    "{member} ({role})'s `{tool}` set issue {}#{} {state}, which no merged PR's own text names",
                    key.0, key.1
                ),
            );
            continue;
        };
        let creator = run.creators.get(*pr_key).map(|(_, g)| *g);
        if let Some(holder) = run.locks.get(key)
            && Some(*holder) != creator
        {
            violation(
                "issue-lock-broken",
                format!(
                    "the merge of {}#{} set issue {}#{} {state}, whose lock another author holds",
                    pr_key.0, pr_key.1, key.0, key.1
                ),
            );
        }
    }
    found
}
