//! What every dialect needs, written once: the pending-read scaffolding of a statement
//! ([`Step`], [`Pending`], [`Cx`]), the drive that turns a dialect's statement into
//! [`Dialect::establish`] and [`Dialect::evident`], the reads and facts every forge of the
//! REST family shares (a PR read, whether a number is a PR, a PR's head branch), the
//! argument readers, and the typed error of a read the dialect cannot build ([`DialectError`]).
//!
//! A dialect module is then its server's vocabulary (tools, methods, argument names) and its
//! forge's semantics (what each call does, read from the forge through [`Cx`]); nothing else.
//! A dialect implements [`Dialect::state`]: given a [`Call`] and a [`Cx`], it either states
//! the effect, asks for reads (`Err(Pending::Reads)`), or says why the effect cannot be
//! established (`Err(Pending::Failed)`: the gate refuses). The kit answers the rest.

use super::table::{Entry, Surface};
use super::{Dialect, Op, PrFacts, PrTarget, Schemas, Server, Unlisted};
use crate::effect::{Answered, Effect, Kind, Read, Repo, answer};
use crate::textref::Grammar;
use serde_json::{Map, Value};
use std::fmt;

/// A dialect's vocabulary, as data: what its server is called and launched as, the tools
/// and methods it states (its reference page), its role matrix, the argument names it reads
/// and pins with, and what its forge does with a pending review. [`Dialect`]'s accessors
/// (`name`, `server`, `surface`, `rules`, `alias_groups`, `number_keys`, `merge_pin`,
/// `review_pin`, `pending_review_note`) read it.
#[derive(Debug)]
pub struct Vocabulary {
    /// The `[fleet] forge` literal.
    pub name: &'static str,
    /// The server's process and launch facts.
    pub server: Server,
    /// What its reference page is built from.
    pub surface: Surface,
    /// Its built-in role matrix, in the order it decides.
    pub matrix: &'static [Entry],
    /// Keys that name one thing across the server's releases.
    pub alias_groups: &'static [&'static [&'static str]],
    /// Keys the server always reads as integers.
    pub number_keys: &'static [&'static str],
    /// The argument of a merge the forge checks against the PR's head.
    pub merge_pin: Option<&'static str>,
    /// The argument of a review naming the commit it is given at.
    pub review_pin: Option<&'static str>,
    /// What the forge does with a pending review when it is submitted, in words.
    pub pending_review_note: &'static str,
    /// How the server spells the plot's calls.
    pub plot: Plot,
}

/// How a server spells the PR workflow's plot ([`Op`]): the tools of each step and the keys
/// they read.
#[derive(Debug)]
pub struct Plot {
    /// The tool that makes a branch (`branch`).
    pub create_branch: &'static str,
    /// The tool that reads a file (`ref`, `path`).
    pub read_file: &'static str,
    /// The tool that writes a file (`path`, `content`, `message`, `sha`), and the key it
    /// names the branch by.
    pub write_file: (&'static str, &'static str),
    /// The tool that opens a PR (`title`, `body`, `head`, `base`), and its `method`.
    pub open: (&'static str, Option<&'static str>),
    /// The tool and `method` of a review, and the key and value of an approval.
    pub approve: (&'static str, &'static str, (&'static str, &'static str)),
    /// The tool that merges a PR, its `method`, and the key of its merge style.
    pub merge: (&'static str, Option<&'static str>, &'static str),
    /// The key a PR's number goes by.
    pub number: &'static str,
}

/// `op` as `plot` spells it: the tool and its arguments (without `owner` and `repo`).
pub fn plot_call(plot: &Plot, op: &Op<'_>) -> (&'static str, Map<String, Value>) {
    use serde_json::json;
    let (tool, args) = match *op {
        Op::CreateBranch { branch } => (plot.create_branch, json!({ "branch": branch })),
        Op::ReadFile { branch, path } => (plot.read_file, json!({ "ref": branch, "path": path })),
        Op::WriteFile { branch, path, content, message, sha } => {
            let mut args = json!({ "path": path, "content": content, "message": message });
            args[plot.write_file.1] = Value::from(branch);
            set_some(&mut args, "sha", sha);
            (plot.write_file.0, args)
        }
        Op::OpenPr { head, base, title, body } => {
            let mut args = json!({ "title": title, "body": body, "head": head, "base": base });
            set_some(&mut args, "method", plot.open.1);
            (plot.open.0, args)
        }
        Op::Approve { pr } => {
            let (tool, method, (verdict, approve)) = plot.approve;
            let mut args = json!({ "method": method, "body": "LGTM" });
            args[plot.number] = Value::from(pr);
            args[verdict] = Value::from(approve);
            (tool, args)
        }
        Op::Merge { pr, squash } => {
            let (tool, method, style) = plot.merge;
            let mut args = json!({});
            set_some(&mut args, "method", method);
            args[plot.number] = Value::from(pr);
            set_some(&mut args, style, squash.then_some("squash"));
            (tool, args)
        }
    };
    (tool, object(args))
}

/// Why a dialect cannot build a read, or read what it needs from a forge's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DialectError {
    /// The running server's schema of `tool` declares none of a key's names.
    Undeclared {
        /// The tool.
        tool: String,
        /// The names the key goes by across releases, the newest first.
        candidates: Vec<&'static str>,
    },
    /// The forge's answer does not say what the dialect reads of it, in words.
    Answer(String),
    /// The forge's host cannot be made into the REST API base the server would use, in words.
    Host(String),
    /// The dialect (named) has no REST API the gateway calls.
    NoRestApi(&'static str),
}

impl fmt::Display for DialectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Undeclared { tool, candidates } => {
                let names: Vec<String> = candidates.iter().map(|c| format!("`{c}`")).collect();
                write!(
                    f,
                    "the server's `{tool}` declares none of {}: it cannot be read by this dialect",
                    names.join(", ")
                )
            }
            Self::Answer(why) | Self::Host(why) => f.write_str(why),
            Self::NoRestApi(name) => write!(f, "{name} has no REST API the gateway calls"),
        }
    }
}

impl std::error::Error for DialectError {}

/// One step of a statement: its value, or why it cannot go on yet.
pub type Step<T> = Result<T, Pending>;

/// Why a statement cannot go on: reads to make, or a failure that leaves the effect
/// unestablished (the gate refuses the call).
#[derive(Debug)]
pub enum Pending {
    /// The reads of the forge still to make.
    Reads(Vec<Read>),
    /// Why the effect cannot be established, in words.
    Failed(String),
}

impl From<DialectError> for Pending {
    fn from(e: DialectError) -> Self {
        Self::Failed(e.to_string())
    }
}

/// A call as a dialect states it: the tool, its canonical arguments (one key per thing) and
/// the schema the running server listed for it (absent: unknown).
#[derive(Clone, Copy, Debug)]
pub struct Call<'a> {
    /// The tool.
    pub tool: &'a str,
    /// Its canonical arguments.
    pub args: &'a Map<String, Value>,
    /// Its listed `inputSchema`.
    pub schema: Option<&'a Map<String, Value>>,
}

impl<'a> Call<'a> {
    /// The non-empty string argument `key`.
    pub fn text(&self, key: &str) -> Option<&'a str> {
        super::text(self.args, key)
    }

    /// The call's `method`.
    pub fn method(&self) -> Option<&'a str> {
        self.text("method")
    }

    /// The repository the call names (`owner`, `repo`; empty when absent).
    pub fn owner_repo(&self) -> (&'a str, &'a str) {
        (self.text("owner").unwrap_or_default(), self.text("repo").unwrap_or_default())
    }

    /// The repository the call names, as a [`Repo`].
    pub fn here(&self) -> Repo {
        let (owner, repo) = self.owner_repo();
        Repo::new(owner, repo)
    }
}

/// What a statement reads from: the running server's schemas (reads are built from the
/// names they declare), the forge's answers so far, and the grammar the forge reads texts
/// with.
#[derive(Clone, Copy, Debug)]
pub struct Cx<'a> {
    /// The running server's tool schemas.
    pub schemas: &'a dyn Schemas,
    /// The reads made so far, and their answers.
    pub answers: &'a [Answered],
    /// The forge's grammar for the texts a call lands.
    pub grammar: &'a Grammar,
}

impl<'a> Cx<'a> {
    /// The answer to `read`, when it was made.
    pub fn answer(self, read: &Read) -> Option<Result<&'a Value, &'a str>> {
        answer(self.answers, read)
    }

    /// The answer to `read`: asked for when not made yet; a failed read fails the step.
    pub fn ask(self, read: Read) -> Step<&'a Value> {
        match answer(self.answers, &read) {
            None => Err(Pending::Reads(vec![read])),
            Some(Ok(v)) => Ok(v),
            Some(Err(e)) => Err(Pending::Failed(format!("`{}` failed: {e}", read.tool))),
        }
    }

    /// The forge's answer about PR `number` of `owner/repo` (`dialect`'s PR read).
    pub fn pr_answer(self, dialect: &dyn Dialect, owner: &str, repo: &str, number: u64) -> Step<&'a Value> {
        let target = PrTarget { owner: owner.to_owned(), repo: repo.to_owned(), pr: number };
        self.ask(dialect.pr_read(&target, self.schemas)?)
    }

    /// What the forge says of PR `number` of `owner/repo`.
    pub fn pr(self, dialect: &dyn Dialect, owner: &str, repo: &str, number: u64) -> Step<PrFacts> {
        Ok(dialect.pr_facts(self.pr_answer(dialect, owner, repo, number)?)?)
    }

    /// Whether #`n` of `owner/repo` is a PR (forges number PRs and issues in one sequence):
    /// the PR read answers; an error that says not found (`dialect`'s reading) says it is an
    /// issue.
    pub fn is_pr(self, dialect: &dyn Dialect, owner: &str, repo: &str, n: u64) -> Step<bool> {
        let target = PrTarget { owner: owner.to_owned(), repo: repo.to_owned(), pr: n };
        let read = dialect.pr_read(&target, self.schemas)?;
        match answer(self.answers, &read) {
            None => Err(Pending::Reads(vec![read])),
            Some(Ok(_)) => Ok(true),
            Some(Err(e)) if dialect.is_not_found(e) => Ok(false),
            Some(Err(e)) => Err(Pending::Failed(format!("whether #{n} is a PR could not be read: {e}"))),
        }
    }
}

/// The head branch of PR `number` as the forge answered it (a statement that needs it fails
/// without).
pub fn head_branch(facts: &PrFacts, number: u64) -> Step<String> {
    facts
        .head_ref
        .clone()
        .ok_or_else(|| Pending::Failed(format!("the forge's answer for PR #{number} names no head branch (head.ref)")))
}

/// A repository the forge names (`full_name`), else `here`.
pub fn repo_or(full_name: Option<&str>, here: &Repo) -> Repo {
    full_name.map_or_else(|| here.clone(), Repo::full)
}

/// `dialect`'s statement of `call`, driven to an answer: `Err` names the reads still to make;
/// a failed statement is a write whose effect is unestablished.
pub fn establish<D: Dialect + ?Sized>(
    dialect: &D,
    call: &Call<'_>,
    schemas: &dyn Schemas,
    answers: &[Answered],
) -> Result<Effect, Vec<Read>> {
    match dialect.state(call, Cx { schemas, answers, grammar: dialect.grammar() }) {
        Ok(effect) => Ok(effect),
        Err(Pending::Reads(reads)) => Err(reads),
        Err(Pending::Failed(why)) => Ok(Effect { kind: Kind::Write, unestablished: vec![why], ..Effect::default() }),
    }
}

/// What `call`'s arguments alone show it does, no read of the forge made: the whole
/// statement when it needs no read, else what the dialect says the arguments show
/// ([`Dialect::shown`]).
pub fn evident<D: Dialect + ?Sized>(dialect: &D, call: &Call<'_>) -> Effect {
    establish(dialect, call, &Unlisted, &[]).unwrap_or_else(|_| dialect.shown(call))
}

/// A read of `tool` on `owner/repo` (with its `method`, for a method-dispatched tool); the
/// caller adds what else it names.
pub fn read_on(tool: &str, method: Option<&str>, owner: &str, repo: &str) -> Read {
    let mut args = Map::new();
    if let Some(method) = method {
        args.insert("method".into(), Value::from(method));
    }
    args.insert("owner".into(), Value::from(owner));
    args.insert("repo".into(), Value::from(repo));
    Read::new(tool, args)
}

/// The boolean argument `key` is `true`.
pub fn flag(args: &Map<String, Value>, key: &str) -> bool {
    args.get(key) == Some(&Value::Bool(true))
}

/// A branch name without `refs/heads/`.
pub fn strip(branch: &str) -> &str {
    branch.strip_prefix("refs/heads/").unwrap_or(branch)
}

/// The schema declares `key` (no schema: taken as declared).
pub fn declared(schema: Option<&Map<String, Value>>, key: &str) -> bool {
    schema.and_then(|s| s.get("properties")).and_then(Value::as_object).is_none_or(|p| p.contains_key(key))
}

/// Whether `table` (tools and their `method` values; none: the tool has no method) lists
/// `tool` — `Some(known)`: whether it knows `method` too.
pub fn listed(table: &[(&str, &[&str])], tool: &str, method: Option<&str>) -> Option<bool> {
    let (_, methods) = table.iter().find(|(t, _)| *t == tool)?;
    Some(methods.is_empty() || method.is_some_and(|m| methods.contains(&m)))
}

/// Why a method-dispatched tool's call is unknown.
pub fn unknown_method(tool: &str, method: Option<&str>) -> String {
    match method {
        Some(m) => format!("`{tool}` has no method `{m}` the dialect knows"),
        None => format!("`{tool}` names no method"),
    }
}

/// Why a call of a tool `server` has no statement for is unknown.
pub fn unknown_tool(server: &str, tool: &str, method: Option<&str>) -> String {
    match method {
        Some(m) => format!("{server} has no `{tool}` with method `{m}` the dialect knows"),
        None => format!("{server} has no tool `{tool}` the dialect knows"),
    }
}

/// `docs/reference/<dialect>.md`: the dialect's surface, its role matrix, and what its forge
/// does with a pending review.
pub fn reference<D: Dialect + ?Sized>(dialect: &D) -> String {
    let mut page = super::table::render(dialect.surface(), dialect.rules());
    page.push_str(&format!("\n**Pending reviews.** {}.\n", dialect.pending_review_note()));
    page
}

/// A server call's arguments, written as JSON (`op` calls and the like).
pub fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// The entry of a forge's repository `full_name` is `owner/repo` (any case: forges resolve
/// names so).
pub fn names_repo(entry: &Value, owner: &str, repo: &str) -> bool {
    let wanted = format!("{owner}/{repo}");
    entry.get("full_name").and_then(Value::as_str).is_some_and(|n| n.eq_ignore_ascii_case(&wanted))
}

/// The entry for `owner/repo` among the repositories `tool` answered.
pub fn repo_entry<'v>(entries: &'v [Value], tool: &str, owner: &str, repo: &str) -> Result<&'v Value, DialectError> {
    entries
        .iter()
        .find(|e| names_repo(e, owner, repo))
        .ok_or_else(|| DialectError::Answer(format!("`{tool}` did not list {owner}/{repo}")))
}

/// The default branch a repository entry `tool` answered names.
pub fn default_branch_of(entry: &Value, tool: &str, owner: &str, repo: &str) -> Result<String, DialectError> {
    entry
        .get("default_branch")
        .and_then(Value::as_str)
        .filter(|b| !b.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| DialectError::Answer(format!("`{tool}` names no default branch for {owner}/{repo}")))
}

/// Sets `key` of a call's JSON arguments to `value` when there is one (an absent argument is
/// left out, never sent as `null`).
pub fn set_some(args: &mut Value, key: &str, value: Option<&str>) {
    if let Some(value) = value {
        args[key] = Value::from(value);
    }
}

#[cfg(test)]
mod tests;
