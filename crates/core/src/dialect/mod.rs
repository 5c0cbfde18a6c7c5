//! Forge dialects: everything the gate knows about one forge's MCP server, in one place.
//!
//! A [`Dialect`] states, for its server: the built-in role matrix (who may make which call);
//! how its arguments are read where no tool schema says (the keys one thing goes by across
//! releases, the keys read as integers); what each tool and method does to the forge (the
//! [`Effect`] the invariants judge, and the reads of the forge it needs); which calls are
//! which workflow actions, and how a verdict, a PR's head and base, a created PR and a pushed
//! commit are read; and the reads the gate makes, built from the argument names the running
//! server's own tool schemas declare ([`Schemas`]), so a release that renamed a key is read
//! right or refused by name. The workflow, the gate, the doctor, `init` and the book ask the
//! dialect; no other module names a forge tool (a test scans the sources).
//!
//! `[fleet] forge` picks one by name ([`by_name`]): [`NAMES`].

pub mod gitea;
pub mod github;
pub mod kit;
pub mod table;

pub use kit::DialectError;

use crate::effect::{Answered, Effect, Read, ReadFailed};
use crate::rules::Rule;
use crate::workflow::{PrRef, ReviewVerdict};
use serde_json::{Map, Value};

/// The workflow action of a merge (the PR workflow judges it).
pub const ACTION_MERGE: &str = "merge";
/// The workflow action of a review (a decision is judged, and recorded at its head).
pub const ACTION_REVIEW: &str = "review";
/// The workflow action of opening a pull request (its creator is recorded, for independence).
pub const ACTION_OPEN: &str = "open";
/// The workflow action of editing a PR's title or body (its issue references are judged).
pub const ACTION_EDIT: &str = "edit";
/// The workflow action of closing a PR (its review-decision locks become moot).
pub const ACTION_CLOSE: &str = "close";
/// The workflow action of a write that pushes a commit (its pusher is recorded: an approval
/// of that head from the pushing session does not count as independent).
pub const ACTION_PUSH: &str = "push";

/// The tool schemas the running server lists (`inputSchema`), by tool: what a read the gate
/// makes is built from.
pub trait Schemas {
    /// The `inputSchema` of `tool`, when the server listed it.
    fn schema(&self, tool: &str) -> Option<Map<String, Value>>;
}

impl std::fmt::Debug for dyn Schemas + '_ {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Schemas")
    }
}

impl std::fmt::Debug for dyn Schemas + Sync + '_ {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Schemas")
    }
}

/// No schema known: every read uses its dialect's newest names.
#[derive(Clone, Copy, Debug, Default)]
pub struct Unlisted;

impl Schemas for Unlisted {
    fn schema(&self, _tool: &str) -> Option<Map<String, Value>> {
        None
    }
}

/// The key `tool`'s schema declares among `candidates` (one thing's names across releases),
/// the newest first; without a schema, the newest. A schema that declares none of them is
/// the server refusing the read by name.
pub fn declared_key(
    schemas: &dyn Schemas,
    tool: &str,
    candidates: &[&'static str],
) -> Result<&'static str, DialectError> {
    let Some(schema) = schemas.schema(tool) else { return Ok(candidates[0]) };
    let props = schema.get("properties").and_then(Value::as_object);
    let Some(props) = props else { return Ok(candidates[0]) };
    candidates
        .iter()
        .copied()
        .find(|k| props.contains_key(*k))
        .ok_or_else(|| DialectError::Undeclared { tool: tool.to_owned(), candidates: candidates.to_vec() })
}

/// The pull request a call names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrTarget {
    /// Repository owner (user or organisation).
    pub owner: String,
    /// Repository name.
    pub repo: String,
    /// The PR number.
    pub pr: u64,
}

impl PrTarget {
    /// The store key of this PR under the fleet's forge remote. Forges resolve owner and
    /// repository names case-insensitively, so the key is lowercase: `ORG/Repo` and
    /// `org/repo` are one PR's history.
    pub fn key(&self, remote: &str) -> PrRef {
        let binding = format!("{remote}/{}/{}", self.owner.to_lowercase(), self.repo.to_lowercase());
        PrRef { binding, pr: self.pr }
    }

    /// A store key (`remote/owner/repo` and the number) back into the PR to read; `None`
    /// when the key is not under `remote`.
    pub fn from_key(key: &PrRef, remote: &str) -> Option<Self> {
        let rest = key.binding.strip_prefix(remote)?.strip_prefix('/')?;
        let (owner, repo) = rest.split_once('/')?;
        Some(Self { owner: owner.to_owned(), repo: repo.to_owned(), pr: key.pr })
    }
}

/// What the forge says of a PR now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrFacts {
    /// The head commit.
    pub head: String,
    /// The target branch.
    pub base_ref: Option<String>,
    /// The target branch's head, when answered.
    pub base_sha: Option<String>,
    /// `open` or `closed`, when answered.
    pub state: Option<String>,
    /// Merged.
    pub merged: bool,
    /// The repository's canonical `owner/name` (`base.repo.full_name`), when answered.
    pub repo: Option<String>,
    /// The head branch (`head.ref`), when answered.
    pub head_ref: Option<String>,
    /// The head branch's repository (`head.repo.full_name`), when answered: another than
    /// the base's for a PR from a fork.
    pub head_repo: Option<String>,
}

impl PrFacts {
    /// `target` named as the forge names its repository (`base.repo.full_name`): the forge
    /// resolves another spelling, or a renamed repository's old name, to the same one, so
    /// the PR's records key on the forge's name.
    pub fn canonical(&self, target: &PrTarget) -> PrTarget {
        match self.repo.as_deref().and_then(|r| r.split_once('/')) {
            Some((owner, repo)) if !owner.is_empty() && !repo.is_empty() => {
                PrTarget { owner: owner.to_owned(), repo: repo.to_owned(), pr: target.pr }
            }
            _ => target.clone(),
        }
    }

    /// Open, merged or closed.
    pub fn forge_state(&self) -> crate::workflow::ForgeState {
        use crate::workflow::ForgeState;
        if self.merged {
            ForgeState::Merged
        } else if self.state.as_deref() == Some("closed") {
            ForgeState::Closed
        } else {
            ForgeState::Open
        }
    }

    /// What [`crate::workflow::assess`] takes of it.
    pub fn at(&self) -> (&str, Option<&str>, crate::workflow::ForgeState) {
        (&self.head, self.base_ref.as_deref(), self.forge_state())
    }

    /// Merged or closed: its leases may be swept (`fleetgate pr release --stale`).
    pub fn is_done(&self) -> bool {
        self.merged || self.state.as_deref() == Some("closed")
    }
}

fn pointer_str(v: &Value, pointers: &[&str]) -> Option<String> {
    pointers.iter().find_map(|p| v.pointer(p)?.as_str().filter(|s| !s.is_empty()).map(str::to_owned))
}

/// A forge's answer about a PR in the REST shape Gitea and GitHub share (`head.sha`,
/// `head.ref`, `head.repo.full_name`, `base.ref`, `base.sha`, `base.repo.full_name`, `state`,
/// `merged`). Without a head commit the answer is refused: the workflow never guesses a head.
pub fn rest_pr_facts(answer: &Value) -> Result<PrFacts, DialectError> {
    let head = pointer_str(answer, &["/head/sha", "/head_sha"])
        .ok_or_else(|| DialectError::Answer("the forge's answer names no head commit (head.sha)".to_owned()))?;
    if !(7..=64).contains(&head.len()) || !head.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(DialectError::Answer(format!("the forge's answer names head {head:?}, which is not a commit id")));
    }
    Ok(PrFacts {
        head,
        base_ref: pointer_str(answer, &["/base/ref"]),
        base_sha: pointer_str(answer, &["/base/sha"]),
        state: pointer_str(answer, &["/state"]),
        merged: answer.get("merged").and_then(Value::as_bool).unwrap_or(false),
        repo: pointer_str(answer, &["/base/repo/full_name"]),
        head_ref: pointer_str(answer, &["/head/ref"]),
        head_repo: pointer_str(answer, &["/head/repo/full_name"]),
    })
}

/// The issues a text (the call's `field`) closes, reopens or names, as `grammar`'s forge
/// reads it, in the repository `here` unless the reference names another; when the forge
/// acts on it (`when`). `pr_names`: for a merge's own texts, the issues the PR's texts already
/// close or reopen (the merge acts on those by right).
pub fn text_effects(
    grammar: &crate::textref::Grammar,
    here: &crate::effect::Repo,
    field: &str,
    text: &str,
    when: &crate::effect::When,
    pr_names: Option<&[crate::effect::IssueEffect]>,
) -> Vec<crate::effect::IssueEffect> {
    use crate::effect::{IssueChange, IssueEffect, Repo};
    use crate::textref::Act;
    crate::textref::read(text, grammar)
        .into_iter()
        .map(|r| {
            let repo = r.repo.as_ref().map_or_else(|| here.clone(), |(o, n)| Repo::new(o, n));
            let change = match r.act {
                Act::Mention => IssueChange::Referenced { field: field.to_owned(), when: when.clone() },
                Act::Close | Act::Reopen => {
                    let to = if r.act == Act::Close { "closed" } else { "open" };
                    let named_by_pr = pr_names.is_some_and(|names| {
                        names.iter().any(|n| {
                            n.repo == repo
                                && n.issue == r.number
                                && matches!(&n.change, IssueChange::ByText { to: t, .. } if t == to)
                        })
                    });
                    IssueChange::ByText {
                        to: to.to_owned(),
                        field: field.to_owned(),
                        words: r.words,
                        when: when.clone(),
                        named_by_pr,
                    }
                }
            };
            IssueEffect { repo, issue: r.number, change }
        })
        .collect()
}

/// The issues a PR's title and body, as a call sends them (`args`), close, reopen or name
/// when the PR merges.
pub fn pr_texts(
    grammar: &crate::textref::Grammar,
    args: &Map<String, Value>,
    here: &crate::effect::Repo,
    when: &crate::effect::When,
) -> Vec<crate::effect::IssueEffect> {
    let mut issues = Vec::new();
    for key in ["title", "body"] {
        if let Some(t) = text(args, key) {
            issues.extend(text_effects(grammar, here, key, t, when, None));
        }
    }
    issues
}

/// What a merge does to issues: every issue the PR's own texts close or reopen — its title
/// and body (`answer`, the forge's PR) and `conversation` (field, text) — which the forge
/// resolves at the merge, by right (`named_by_pr`); then what the merge's `own` texts (field,
/// text: its commit's message, landing on the base now) close or reopen.
pub fn merge_issues(
    grammar: &crate::textref::Grammar,
    answer: &Value,
    conversation: &[(&str, &str)],
    own: &[(&str, &str)],
    base_repo: &crate::effect::Repo,
) -> Vec<crate::effect::IssueEffect> {
    use crate::effect::{IssueChange, IssueEffect, When};
    let mut named = Vec::new();
    for key in ["title", "body"] {
        if let Some(t) = answer.get(key).and_then(Value::as_str) {
            named.extend(text_effects(grammar, base_repo, &format!("the PR's {key}"), t, &When::Now, None));
        }
    }
    for (field, t) in conversation {
        named.extend(text_effects(grammar, base_repo, field, t, &When::Now, None));
    }
    named.retain(IssueEffect::changes_state);
    for n in &mut named {
        if let IssueChange::ByText { named_by_pr, .. } = &mut n.change {
            *named_by_pr = true;
        }
    }
    let mut added: Vec<IssueEffect> = own
        .iter()
        .flat_map(|(field, t)| text_effects(grammar, base_repo, field, t, &When::Now, Some(&named)))
        .collect();
    added.retain(IssueEffect::changes_state);
    named.extend(added);
    named
}

/// A number argument as the servers read one: a JSON number, or a numeric string.
pub fn number(value: &Value) -> Option<u64> {
    match value {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A non-empty string argument.
pub fn text<'a>(args: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// A commit pushed to a branch by a call (its tip is read right after: the push's head).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pushed {
    /// Repository owner.
    pub owner: String,
    /// Repository name.
    pub repo: String,
    /// The branch written.
    pub branch: String,
}

/// What the doctor, `init` and the inventory know of the server's process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Server {
    /// The server's name, for people.
    pub title: &'static str,
    /// Command-line substrings that mark the server's process (`process_match`).
    pub process_match: &'static [&'static str],
    /// The stdio launch `init` writes (`fleetgate serve … -- <launch>`), and the CLI's
    /// `forge_command`.
    pub launch: &'static [&'static str],
    /// The environment key the server reads its forge token from.
    pub token_env: &'static str,
    /// The command-line flags that carry the token instead (the last one given wins).
    pub token_flags: &'static [&'static str],
    /// The environment key naming the forge's host (for a host other than the server's default).
    pub host_env: &'static str,
    /// The command-line flags that name the host instead (the last one given wins).
    pub host_flags: &'static [&'static str],
    /// The host the server talks to when none is set (`None`: it needs one).
    pub default_host: Option<&'static str>,
    /// The name a roster of this forge uses for its prefixes: `<prefix>_` tools, `<PREFIX>_`
    /// environment keys, `<prefix>-<role>` namespaces.
    pub prefix: &'static str,
    /// What the forge does with an approval by the PR's own author, in words.
    pub self_review: &'static str,
}

impl Server {
    /// The forge credential a launch runs with, as the server picks it: its token flag, else
    /// its token key set in a container launch's arguments (`-e KEY=V`), else the key in the
    /// environment it is started with (`env`; also what a bare `-e KEY` passes in). Where it
    /// was read, and the value; `None` when unset or empty.
    pub fn credential(&self, argv: &[String], env: &dyn Fn(&str) -> Option<String>) -> Option<(&'static str, String)> {
        self.launch_value(argv, env, self.token_flags, self.token_env)
    }

    /// The forge host a launch talks to, read as the server reads it (its host flag, else a
    /// container launch's `-e KEY=V`, else the environment); `None`: the server's default.
    pub fn host(&self, argv: &[String], env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
        self.launch_value(argv, env, self.host_flags, self.host_env).map(|(_, v)| v)
    }

    fn launch_value(
        &self,
        argv: &[String],
        env: &dyn Fn(&str) -> Option<String>,
        flags: &[&'static str],
        key: &'static str,
    ) -> Option<(&'static str, String)> {
        if let Some(v) = flag_value(argv, flags).filter(|v| !v.is_empty()) {
            return Some((flags[0], v.to_owned()));
        }
        if let Some(v) = container_env(argv, key).filter(|v| !v.is_empty()) {
            return Some(("-e", v.to_owned()));
        }
        env(key).filter(|v| !v.is_empty()).map(|v| (key, v))
    }
}

/// The last `FLAG V` / `FLAG=V` of `flags` before any `--`: the flag a server prefers over
/// its env key (gitea-mcp's `--token`, which Go's flag package also takes with one dash).
fn flag_value<'a>(args: &'a [String], flags: &[&str]) -> Option<&'a str> {
    let own = &args[..args.iter().position(|a| a == "--").unwrap_or(args.len())];
    own.iter()
        .enumerate()
        .filter_map(|(i, a)| {
            flags.iter().find_map(|f| match a.strip_prefix(f) {
                Some("") => own.get(i + 1).map(String::as_str),
                Some(rest) => rest.strip_prefix('='),
                None => None,
            })
        })
        .next_back()
}

/// A container launch's `-e KEY=V` / `-e=KEY=V` / `-eKEY=V` / `--env KEY=V` / `--env=KEY=V`
/// for `key` (`docker run -i … ghcr.io/github/github-mcp-server`): the value it sets inside;
/// `-e KEY` alone passes the launcher's own, read from the environment by the caller.
fn container_env<'a>(args: &'a [String], key: &str) -> Option<&'a str> {
    let mut set = None;
    for (i, a) in args.iter().enumerate() {
        let given = match a.as_str() {
            "-e" | "--env" => args.get(i + 1).map(String::as_str),
            _ => a.strip_prefix("--env=").or_else(|| {
                let short = a.strip_prefix("-e")?;
                // pflag takes a shorthand's value after `=` as well.
                Some(short.strip_prefix('=').unwrap_or(short)).filter(|r| !r.is_empty())
            }),
        };
        if let Some(value) = given.and_then(|g| g.strip_prefix(key)).and_then(|r| r.strip_prefix('=')) {
            set = Some(value);
        }
    }
    set
}

/// A request the gateway makes itself to the forge's REST API, as the judged and audited call
/// of its member, with the member's own credential: a merge pinned to the head the gate
/// judged, where the server's own merge declares no pin (GitHub's `PUT …/pulls/N/merge` with
/// `sha`, which GitHub refuses with 409 once the head moved).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RestCall {
    /// The tool whose call this stands for (the answer is shaped as its).
    pub tool: String,
    /// `PUT`, `POST`, …
    pub method: String,
    /// The path under the API's base (`repos/OWNER/REPO/pulls/N/merge`).
    pub path: String,
    /// The JSON body.
    pub body: Value,
}

/// What a server's tool answers: its text, and whether it is an error result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolAnswer {
    /// The one text content.
    pub text: String,
    /// `isError`.
    pub is_error: bool,
}

/// Which commit the forge records a pending review's verdict at when it is submitted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PendingAt {
    /// The call submits no pending review, or the forge records it at the PR's head at
    /// submission (Gitea re-stamps it): judged at the head like any verdict.
    Head,
    /// The forge keeps the commit the pending review was made at (GitHub's `commitID`): the
    /// verdict counts there.
    Commit(String),
    /// No pending review of the caller's to submit was found (the server refuses the call),
    /// in words.
    Missing(String),
}

/// One step of the PR workflow's plot as every forge has it: what `fleetgate demo` tells,
/// spelled by each dialect as its server's call ([`Dialect::call`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op<'a> {
    /// Make `branch` from the default branch.
    CreateBranch {
        /// The new branch.
        branch: &'a str,
    },
    /// Read `path` on `branch` (its blob id is `sha` in the answer).
    ReadFile {
        /// The branch.
        branch: &'a str,
        /// The file.
        path: &'a str,
    },
    /// Commit `content` to `path` on `branch` (`sha`: the file's current blob, to update it).
    WriteFile {
        /// The branch.
        branch: &'a str,
        /// The file.
        path: &'a str,
        /// Its new content.
        content: &'a str,
        /// The commit message.
        message: &'a str,
        /// The current blob, when the file exists.
        sha: Option<&'a str>,
    },
    /// Open a PR from `head` onto `base`.
    OpenPr {
        /// The head branch.
        head: &'a str,
        /// The base branch.
        base: &'a str,
        /// Its title.
        title: &'a str,
        /// Its body.
        body: &'a str,
    },
    /// Approve PR `pr`.
    Approve {
        /// The PR.
        pr: u64,
    },
    /// Merge PR `pr` (`squash`: squashed, else a merge commit).
    Merge {
        /// The PR.
        pr: u64,
        /// Squash it.
        squash: bool,
    },
}

/// One forge MCP server's dialect.
pub trait Dialect: Send + Sync + std::fmt::Debug {
    /// The server's vocabulary, as data (what the accessors below read).
    fn vocabulary(&self) -> &'static kit::Vocabulary;
    /// The `[fleet] forge` literal (`gitea-mcp`).
    fn name(&self) -> &'static str {
        self.vocabulary().name
    }
    /// The server's process and launch facts.
    fn server(&self) -> &'static Server {
        &self.vocabulary().server
    }
    /// The built-in role matrix: who may make which call (operator rules come before it).
    fn rules(&self) -> Vec<Rule> {
        table::rules_of(self.name(), self.vocabulary().matrix)
    }
    /// Keys that name one thing across the server's releases (at most one of a group may be
    /// sent when no schema says which the server reads).
    fn alias_groups(&self) -> &'static [&'static [&'static str]] {
        self.vocabulary().alias_groups
    }
    /// Keys the server always reads as integers, whatever a schema says or when there is none.
    fn number_keys(&self) -> &'static [&'static str] {
        self.vocabulary().number_keys
    }
    /// What the server reads differently from the canonical parse, for this dialect (a
    /// number it would wrap, a key it reads loosely): refused as ambiguous.
    fn check_parse(&self, _tool: &str, _args: &Map<String, Value>) -> Result<(), crate::forge_call::Ambiguity> {
        Ok(())
    }
    /// The grammar the forge reads a text's issue references with.
    fn grammar(&self) -> &crate::textref::Grammar;
    /// The dialect's statement of `call`: what it does to the forge, reading the forge through
    /// `cx` (`Err`: the reads still to make, or why the effect cannot be established).
    fn state(&self, call: &kit::Call<'_>, cx: kit::Cx<'_>) -> kit::Step<Effect>;
    /// What `call`'s arguments alone show it does when its statement needs a read of the
    /// forge (a merge's terms, a commit message's issues): every breach of it is one of the
    /// whole. By default, a write.
    fn shown(&self, _call: &kit::Call<'_>) -> Effect {
        Effect::write()
    }
    /// What `tool` called with its canonical `args` does (its listed `schema` when known), given
    /// the forge's `answers` so far: `Err` names the reads still to make, built by `schemas`.
    fn establish(
        &self,
        tool: &str,
        args: &Map<String, Value>,
        schema: Option<&Map<String, Value>>,
        schemas: &dyn Schemas,
        answers: &[Answered],
    ) -> Result<Effect, Vec<Read>> {
        kit::establish(self, &kit::Call { tool, args, schema }, schemas, answers)
    }
    /// What a call's arguments alone show it does (no read made): every breach of it is one of
    /// the whole (replay judges with it).
    fn evident(&self, tool: &str, args: &Map<String, Value>, schema: Option<&Map<String, Value>>) -> Effect {
        kit::evident(self, &kit::Call { tool, args, schema })
    }
    /// The PR a call names.
    fn pr_target(&self, tool: &str, args: &Map<String, Value>) -> Option<PrTarget>;
    /// The verdict a review call submits, read as the server and the forge read it.
    fn review_verdict(&self, tool: &str, args: &Map<String, Value>) -> Option<ReviewVerdict>;
    /// Whether a review call is recorded at a commit it names (the gateway pins it to the head
    /// it judged).
    fn review_is_pinned(&self, tool: &str, args: &Map<String, Value>) -> bool;
    /// The read answering a PR's current state.
    fn pr_read(&self, target: &PrTarget, schemas: &dyn Schemas) -> Result<Read, DialectError>;
    /// What the forge says of a PR, from that read's answer.
    fn pr_facts(&self, answer: &Value) -> Result<PrFacts, DialectError> {
        rest_pr_facts(answer)
    }
    /// The argument of a merge the forge checks against the PR's head (`None`: the server's
    /// merge pins no head).
    fn merge_pin(&self) -> Option<&'static str> {
        self.vocabulary().merge_pin
    }
    /// The argument of a review naming the commit it is given at.
    fn review_pin(&self) -> Option<&'static str> {
        self.vocabulary().review_pin
    }
    /// The merge the gateway makes itself through the forge's REST API, pinned at `head`, for
    /// a merge call whose server declares no pin ([`merge_pin`](Self::merge_pin) absent from
    /// its schema): `None` when the dialect has no such merge (the merge is then refused,
    /// `unpinned-merge`). `target` is the PR as the forge names it; `args` the canonical call.
    fn pinned_merge(&self, _target: &PrTarget, _head: &str, _args: &Map<String, Value>) -> Option<RestCall> {
        None
    }
    /// The API base a [`RestCall`] is made under, for the forge `host` the member's server
    /// talks to (`None`: the server's default), as the server itself derives it.
    fn rest_base(&self, _host: Option<&str>) -> Result<String, DialectError> {
        Err(DialectError::NoRestApi(self.name()))
    }
    /// What the server's own tool would have answered, given the forge's answer to `call` at
    /// `url` (`status`, `body`).
    fn rest_answer(&self, call: &RestCall, url: &str, status: u16, body: &str) -> ToolAnswer {
        ToolAnswer { text: format!("{} {url}: {status} {body}", call.method), is_error: !(200..300).contains(&status) }
    }
    /// For a call that submits a pending review: where the forge records its verdict, given the
    /// forge's `answers` so far (`Err`: the reads still to make, built by `schemas`). The
    /// default is Gitea's: the head at submission.
    fn pending_review(
        &self,
        _tool: &str,
        _args: &Map<String, Value>,
        _schemas: &dyn Schemas,
        _answers: &[Answered],
    ) -> Result<PendingAt, Vec<Read>> {
        Ok(PendingAt::Head)
    }
    /// What the forge does with a pending review when it is submitted, in words (the
    /// reference page and the book say it).
    fn pending_review_note(&self) -> &'static str {
        self.vocabulary().pending_review_note
    }
    /// The repository a call that opens a PR opens it in.
    fn repository(&self, args: &Map<String, Value>) -> Option<(String, String)> {
        Some((text(args, "owner")?.to_owned(), text(args, "repo")?.to_owned()))
    }
    /// The number of the PR a create call's answer names.
    fn created_pr(&self, answer: &Value) -> Option<u64> {
        ["/number", "/index"].iter().find_map(|p| answer.pointer(p).and_then(number))
    }
    /// The branch a push writes (read its tip right after).
    fn pushed(&self, tool: &str, args: &Map<String, Value>) -> Option<Pushed>;
    /// The read answering a branch's tip.
    fn tip_read(&self, owner: &str, repo: &str, branch: &str, schemas: &dyn Schemas) -> Result<Read, DialectError>;
    /// The commit that read names.
    fn tip_of(&self, answer: &Value) -> Option<String> {
        ["/sha", "/commit/sha"].iter().find_map(|p| answer.pointer(p).and_then(Value::as_str)).map(str::to_owned)
    }
    /// The PR a call closes (its review-decision locks become moot), when it closes one.
    fn closes(&self, tool: &str, args: &Map<String, Value>) -> Option<PrTarget>;
    /// The call that is a workflow action: who may make it is who may hold its lease.
    fn action_call(&self, action: &str) -> Option<(&'static str, Map<String, Value>)>;
    /// A forge read's error says the PR (or issue) does not exist.
    fn is_not_found(&self, error: &str) -> bool {
        error.contains("couldn't be found") || error.contains("404") || error.to_ascii_lowercase().contains("not found")
    }
    /// `op` as this server's call: the tool and its arguments (without `owner` and `repo`).
    fn call(&self, op: &Op<'_>) -> (&'static str, Map<String, Value>) {
        kit::plot_call(&self.vocabulary().plot, op)
    }
    /// What the dialect's reference page is built from: every tool and method it states.
    fn surface(&self) -> &'static table::Surface {
        &self.vocabulary().surface
    }
    /// The reference page of the dialect (`docs/reference/<name>.md`).
    fn reference(&self) -> String {
        kit::reference(self)
    }
    /// Every tool name the dialect states (for the scan that no other module names one).
    fn tools(&self) -> Vec<&'static str> {
        table::tools(self.surface())
    }
}

/// Every dialect, by its `[fleet] forge` name.
pub const NAMES: [&str; 2] = [gitea::NAME, github::NAME];

/// The dialect named `name`.
pub fn by_name(name: &str) -> Option<&'static dyn Dialect> {
    match name {
        gitea::NAME => Some(&gitea::GITEA),
        github::NAME => Some(&github::GITHUB),
        _ => None,
    }
}

/// Run `dialect`'s statement of a call to the end with `read`, answering each read the
/// statement asks for (the CLI, tests); at most `rounds` rounds.
pub fn establish_with(
    dialect: &dyn Dialect,
    tool: &str,
    args: &Map<String, Value>,
    schema: Option<&Map<String, Value>>,
    schemas: &dyn Schemas,
    read: &mut dyn FnMut(&Read) -> Result<Value, ReadFailed>,
    rounds: usize,
) -> Effect {
    let mut answers: Vec<Answered> = Vec::new();
    for _ in 0..rounds {
        match dialect.establish(tool, args, schema, schemas, &answers) {
            Ok(effect) => return effect,
            Err(reads) => {
                for r in reads {
                    let a = read(&r);
                    answers.push((r, a));
                }
            }
        }
    }
    Effect { unestablished: vec![format!("more than {rounds} rounds of forge reads were needed")], ..Effect::write() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct One(Map<String, Value>);
    impl Schemas for One {
        fn schema(&self, _tool: &str) -> Option<Map<String, Value>> {
            Some(self.0.clone())
        }
    }

    #[test]
    fn a_read_takes_the_key_the_running_server_declares_or_is_refused_by_name() {
        let page = ["per_page", "perPage", "pageSize"];
        assert_eq!(declared_key(&Unlisted, "list_pull_requests", &page), Ok("per_page"));
        let v1 = One(json!({ "properties": { "perPage": {}, "page": {} } }).as_object().cloned().unwrap());
        assert_eq!(declared_key(&v1, "list_pull_requests", &page), Ok("perPage"));
        let other = One(json!({ "properties": { "limit": {} } }).as_object().cloned().unwrap());
        let why = declared_key(&other, "list_pull_requests", &page).unwrap_err().to_string();
        assert!(why.contains("`list_pull_requests` declares none of `per_page`, `perPage`, `pageSize`"), "{why}");
    }

    /// Docker's flags take a shorthand's value after `=` too (`-e=KEY=V`, pflag's reading):
    /// the host and token the container's server sees are read from every spelling, else the
    /// gateway would send the member's token to a host its server does not talk to.
    #[test]
    fn a_container_s_env_is_read_in_every_spelling_docker_takes() {
        let github = github::GITHUB.server();
        let none = |_: &str| None;
        for spelled in [["-e", "GITHUB_HOST=https://ghes.corp"], ["-e=GITHUB_HOST=https://ghes.corp", "-i"]]
            .iter()
            .map(|a| a.to_vec())
            .chain([vec!["-eGITHUB_HOST=https://ghes.corp"], vec!["--env=GITHUB_HOST=https://ghes.corp"]])
        {
            let argv: Vec<String> = ["docker", "run", "-i"]
                .into_iter()
                .chain(spelled.iter().copied())
                .chain(["ghcr.io/github/github-mcp-server", "stdio"])
                .map(str::to_owned)
                .collect();
            assert_eq!(github.host(&argv, &none).as_deref(), Some("https://ghes.corp"), "{argv:?}");
        }
    }

    #[test]
    fn every_dialect_is_found_by_its_name_and_no_other() {
        for name in NAMES {
            assert_eq!(by_name(name).map(|d| d.name()), Some(name));
        }
        assert!(by_name("gitlab").is_none());
    }

    #[test]
    fn a_store_key_reads_back_into_its_pr_only_under_its_remote() {
        let target = PrTarget { owner: "Org".into(), repo: "Repo".into(), pr: 7 };
        let key = target.key("gitea");
        assert_eq!(
            PrTarget::from_key(&key, "gitea"),
            Some(PrTarget { owner: "org".into(), repo: "repo".into(), pr: 7 })
        );
        assert_eq!(PrTarget::from_key(&key, "other"), None);
    }

    #[test]
    fn a_head_must_be_a_commit_id() {
        let f = rest_pr_facts(&json!({"head": {"sha": "1a38ef95"}, "base": {"ref": "main"}, "state": "open"})).unwrap();
        assert_eq!((f.head.as_str(), f.base_ref.as_deref(), f.is_done()), ("1a38ef95", Some("main"), false));
        assert!(
            rest_pr_facts(&json!({"head": {"ref": "feature"}})).unwrap_err().to_string().contains("no head commit")
        );
        assert!(
            rest_pr_facts(&json!({"head": {"sha": "main; rm"}})).unwrap_err().to_string().contains("not a commit id")
        );
    }
}
