//! What a forge call *does*, and the invariants judged on it.
//!
//! The gate used to judge a call by which tool and rule it matched; a tool it did not watch
//! could move a protected branch, and a rule that merely restated a permission silenced the
//! refusals behind it. Here a forge dialect states every call's [`Effect`] — which branches
//! it moves (resolved from the forge: a PR's head and base, however the caller spelled
//! them), which PRs' state or base it changes (including the PRs the forge adjusts when a
//! branch goes away), which files it writes on the server's host — and [`judge`] holds that
//! effect against the [`Invariant`]s, for every call, whoever makes it, independent of
//! `[[rules]]` and of every approval. Rules decide *who* may make the calls that pass.
//!
//! An effect that cannot be established (a read failed, a page was full, the dialect does
//! not know the call) is never guessed: the call is refused.
//!
//! Pure: the dialect's statement comes in as values, with the answers of the forge reads it
//! asked for ([`Read`]).

use crate::blocker::BlockerKind;
use crate::glob::glob_match;
use crate::protect::Protection;
use serde::Serialize;
use serde_json::{Map, Value};
use std::fmt;

/// One read of the forge a dialect needs to establish a call's effect: a read-only tool of
/// the same server and its arguments.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Read {
    /// The read tool.
    pub tool: String,
    /// Its arguments.
    pub arguments: Map<String, Value>,
}

impl Read {
    /// `tool` with `arguments`.
    pub fn new(tool: &str, arguments: Map<String, Value>) -> Self {
        Self { tool: tool.to_owned(), arguments }
    }
}

/// A read and what the forge answered (its JSON, or why there is none).
pub type Answered = (Read, Result<Value, String>);

/// The answer to `read` among `answers`: `None` when it was not made.
pub fn answer<'a>(answers: &'a [Answered], read: &Read) -> Option<Result<&'a Value, &'a str>> {
    answers.iter().find(|(r, _)| r == read).map(|(_, a)| a.as_ref().map_err(String::as_str))
}

/// A repository, `owner/name`, lowercase (forges resolve names case-insensitively).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Repo(pub String);

impl Repo {
    /// `owner/name`, lowercased.
    pub fn new(owner: &str, name: &str) -> Self {
        Self(format!("{owner}/{name}").to_lowercase())
    }

    /// From a forge's `full_name`.
    pub fn full(full_name: &str) -> Self {
        Self(full_name.to_lowercase())
    }
}

impl fmt::Display for Repo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// How a call moves a branch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "how")]
pub enum Move {
    /// Commits land on it (a file write or delete).
    Write,
    /// It is made.
    Create,
    /// It goes away.
    Delete,
    /// It is renamed (this is either name).
    Rename,
    /// A PR's base is merged into it (this branch is the PR's head).
    UpdateFromBase {
        /// The PR.
        pr: u64,
    },
    /// The PR workflow's merge lands a PR's head on it (this branch is the PR's base): the
    /// one way onto a protected branch, judged by the workflow, never by an invariant.
    Merge {
        /// The PR.
        pr: u64,
    },
}

/// A branch a call moves.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BranchMove {
    /// Its repository.
    pub repo: Repo,
    /// The branch (without `refs/heads/`).
    pub branch: String,
    /// How.
    #[serde(flatten)]
    pub how: Move,
}

/// A file a call writes in a repository.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PathWrite {
    /// The branch written.
    pub branch: String,
    /// The path as sent.
    pub path: String,
}

/// What a call does to a pull request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "change")]
pub enum PrChange {
    /// Closed or reopened (`to`: the state sent), by a close or reopen, an update with a
    /// `state`, or an issue update on its number.
    State {
        /// `open` or `closed`, as sent.
        to: String,
        /// Through which call (`pull_request_write close`, `issue_write update`, …).
        by: String,
    },
    /// Its base changed.
    Retarget {
        /// The new base, as sent.
        to: String,
    },
    /// Closed by the forge because a branch it heads or bases goes away.
    ClosedWithBranch {
        /// The branch.
        branch: String,
    },
    /// Retargeted (or closed) by the forge because the branch it bases on is a merged PR's
    /// head deleted with the merge.
    RetargetedWithBranch {
        /// The branch.
        branch: String,
    },
    /// Its title or body edited (the workflow judges the issues it references).
    Text,
    /// Merged by the PR workflow's merge.
    Merged,
}

/// A PR a call changes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PrEffect {
    /// Its repository.
    pub repo: Repo,
    /// Its number.
    pub pr: u64,
    /// What changes.
    #[serde(flatten)]
    pub change: PrChange,
}

/// When the forge acts on a text a call lands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "when")]
pub enum When {
    /// As the call lands it: a merge's own commit message on the base, the PR's
    /// cross-references the merge resolves.
    Now,
    /// When the commit reaches the repository's default branch, the issue's `ref` branch — or
    /// any branch, under Gitea's "close issues via commit in any branch" setting, which no
    /// read shows: as good as now.
    Landing {
        /// The branch the commit is written to.
        branch: String,
    },
    /// When the PR merges (its title, body and comments are its cross-references).
    AtMerge {
        /// The PR (`None`: one the call opens, or a comment whose PR the call does not name).
        #[serde(skip_serializing_if = "Option::is_none")]
        pr: Option<u64>,
    },
}

impl fmt::Display for When {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Now => f.write_str("now"),
            Self::Landing { branch } => write!(
                f,
                "when the commit on `{branch}` reaches the default branch or the issue's `ref` branch (on any branch, \
                 where the forge closes issues by commits in any branch)"
            ),
            Self::AtMerge { pr: Some(pr) } => write!(f, "when PR #{pr} merges"),
            Self::AtMerge { pr: None } => f.write_str("when the PR merges"),
        }
    }
}

/// What a call does to an issue — itself, or through a text the forge acts on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "change")]
pub enum IssueChange {
    /// Closed or reopened by the call itself (`to`: the state sent).
    State {
        /// `open` or `closed`, as sent.
        to: String,
        /// Through which call.
        by: String,
    },
    /// Closed (`to: closed`) or reopened (`open`) by the forge, acting on a closing or
    /// reopening keyword in a text the call lands.
    ByText {
        /// `closed` or `open`.
        to: String,
        /// The text (`message`, `body`, `title`, a comment's `body`, …).
        field: String,
        /// The words that say so.
        words: String,
        /// When the forge acts.
        when: When,
        /// A merge closing what its PR's own texts name (as opposed to what the merge's own
        /// message adds).
        named_by_pr: bool,
    },
    /// Its `ref` set: commits landing on that branch close or reopen it by keyword.
    Ref {
        /// The branch.
        branch: String,
    },
    /// Named by a text the call lands, without a keyword: a cross-reference, no state change
    /// (the issue lock reads a PR's).
    Referenced {
        /// The text.
        field: String,
        /// When the forge records it against a PR's merge.
        when: When,
    },
}

/// An issue a call changes or names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct IssueEffect {
    /// Its repository.
    pub repo: Repo,
    /// Its number (`0`: the issue the call makes).
    pub issue: u64,
    /// What happens to it.
    #[serde(flatten)]
    pub change: IssueChange,
}

impl IssueEffect {
    /// Whether the forge changes the issue's state for it (a close or a reopen, by the call or
    /// a text), or chooses when it will (`ref`).
    pub fn changes_state(&self) -> bool {
        !matches!(self.change, IssueChange::Referenced { .. })
    }
}

/// A merge's terms.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MergeTerms {
    /// The PR.
    pub pr: u64,
    /// Skips the forge's own checks (`force_merge`).
    pub forced: bool,
    /// Lands whatever head is green later (`merge_when_checks_succeed`).
    pub scheduled: bool,
    /// The server's merge declares the argument that pins the head (the forge refuses a
    /// head that moved after the judgement).
    pub pinnable: bool,
    /// How it merges, as sent (`squash`, `rebase`, …); none: the server's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub style: Option<String>,
}

/// Whether a call changes anything at all.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// It only reads.
    #[default]
    Read,
    /// It changes the forge's state (what is guarded is listed beside).
    Write,
}

/// Everything a call does that an invariant looks at, as its dialect states it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Effect {
    /// Read or write.
    pub kind: Kind,
    /// The branches it moves.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub branches: Vec<BranchMove>,
    /// The files it writes in a repository.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<PathWrite>,
    /// The PRs it changes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub prs: Vec<PrEffect>,
    /// Files it writes on the server's host (the path, or where the server puts it by default).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub host_files: Vec<String>,
    /// The issues it changes or names — itself, or through the texts it lands that the forge
    /// acts on (closing keywords, cross-references), now or later.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub issues: Vec<IssueEffect>,
    /// When it merges a PR: how.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merge: Option<MergeTerms>,
    /// The default branches of the repositories it touches, as the forge reports them:
    /// protected beside the configured one (a wrong `default_branch` in the roster never
    /// unprotects the real one).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub defaults: Vec<String>,
    /// The workflow action it is, as the dialect states it (`merge`, `review`, `open`,
    /// `edit`, `close`, `push`): the PR workflow judges it and records what it settles.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<&'static str>,
    /// The dialect does not know this call (a tool or `method` it has no statement for): its
    /// effect is unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unknown: Option<String>,
    /// Why its effect could not be established (a read failed, a page was full).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unestablished: Vec<String>,
}

impl Effect {
    /// A call that only reads.
    pub fn read() -> Self {
        Self::default()
    }

    /// A write with nothing guarded.
    pub fn write() -> Self {
        Self { kind: Kind::Write, ..Self::default() }
    }

    /// A write that is the workflow action `action`.
    pub fn action(action: &'static str) -> Self {
        Self { kind: Kind::Write, action: Some(action), ..Self::default() }
    }

    /// A call the dialect does not know.
    pub fn unknown(why: String) -> Self {
        Self { kind: Kind::Write, unknown: Some(why), ..Self::default() }
    }

    /// Changes nothing, and is known to.
    pub fn is_read(&self) -> bool {
        self.kind == Kind::Read && self.unknown.is_none() && self.host_files.is_empty()
    }
}

/// The PR-state roles: a PR's state is theirs to change (SPEC §9's role matrix).
pub const PR_STATE_ROLES: [&str; 2] = ["controller", "reconciler"];

/// What breaks the guarantee whoever does it. The names are the `[invariants] lift` literals.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Invariant {
    /// A protected branch moves other than by the PR workflow's merge: written, created,
    /// deleted, renamed, or updated from a PR's base.
    ProtectedBranch,
    /// A protected path (the forge's workflow files) is written on any branch.
    ProtectedPath,
    /// A merge past the forge's own checks (`force_merge`).
    ForcedMerge,
    /// A merge scheduled for whatever head is green later (`merge_when_checks_succeed`).
    ScheduledMerge,
    /// A merge the gate cannot pin to the head it judged.
    UnpinnedMerge,
    /// A PR's base changed (by an update, or by the forge when a merge deletes the branch
    /// it bases on).
    Retarget,
    /// A PR's state changed by a role that is not a PR-state role ([`PR_STATE_ROLES`]), by
    /// any call: a close, an update, an issue update on its number, a branch deletion.
    PrState,
    /// An issue's state changed by a role that is not an issue-state role, by any call or any
    /// text the forge acts on.
    IssueState,
    /// A read that writes a file on the server's host.
    ReaderWrites,
    /// A call whose effect the dialect does not know.
    UnknownEffect,
    /// Approvals count only from a reviewer independent of the PR's author and last pusher
    /// (`[workflow] independent_review = "off"` lifts it).
    IndependentReview,
    /// A merge onto a protected branch lands only a head an independent reviewer approved:
    /// the PR workflow's `approval_required` and `stale_head` on it are part of
    /// `protected-branch`'s guarantee, never an operator's override. Lifting it is the
    /// break-glass that lets `[approvals] may_override` name them.
    ReviewedMerge,
}

impl Invariant {
    /// Every invariant, in the order they are judged.
    pub const ALL: [Self; 12] = [
        Self::ProtectedBranch,
        Self::ProtectedPath,
        Self::ForcedMerge,
        Self::ScheduledMerge,
        Self::UnpinnedMerge,
        Self::Retarget,
        Self::PrState,
        Self::IssueState,
        Self::ReaderWrites,
        Self::UnknownEffect,
        Self::IndependentReview,
        Self::ReviewedMerge,
    ];

    /// The `[invariants] lift` literal.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::ProtectedBranch => "protected-branch",
            Self::ProtectedPath => "protected-path",
            Self::ForcedMerge => "forced-merge",
            Self::ScheduledMerge => "scheduled-merge",
            Self::UnpinnedMerge => "unpinned-merge",
            Self::Retarget => "retarget",
            Self::PrState => "pr-state",
            Self::IssueState => "issue-state",
            Self::ReaderWrites => "reader-writes",
            Self::UnknownEffect => "unknown-effect",
            Self::IndependentReview => "independent-review",
            Self::ReviewedMerge => "reviewed-merge",
        }
    }

    /// The invariant a literal names.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|i| i.as_str() == text)
    }

    /// What it holds, in words.
    pub const fn holds(self) -> &'static str {
        match self {
            Self::ProtectedBranch => {
                "no call moves a protected branch (the default branch, `[workflow] protected_branches`) but the PR \
                 workflow's merge of an approved head: no file write, branch create, delete or rename, and no update \
                 of a PR whose head it is"
            }
            Self::ProtectedPath => {
                "no call writes a protected path (`[workflow] protected_paths`: the forge's workflow files) on any \
                 branch"
            }
            Self::ForcedMerge => "no merge skips the forge's own checks (`force_merge`)",
            Self::ScheduledMerge => {
                "no merge is scheduled for a later head (`merge_when_checks_succeed`): the forge would land whatever \
                 head is green then, which no reviewer may have seen"
            }
            Self::UnpinnedMerge => {
                "no merge goes out without the head it was judged at pinned (gitea-mcp's `head_commit_id`; on GitHub, \
                 `expectedHeadSha` where the server declares it, else the gateway's own REST merge with `sha`), so the \
                 forge refuses a head that moved after the judgement"
            }
            Self::Retarget => {
                "no PR's base changes: approvals are for a base, and the forge merges onto whatever base the PR has"
            }
            Self::PrState => {
                "only the controller and the reconciler change a PR's state: no close, reopen, state update, issue \
                 update on its number, or branch deletion that closes it by any other role"
            }
            Self::IssueState => {
                "only the controller and the reconciler change an issue's state — by an update, or by a text the \
                 forge acts on: a closing or reopening keyword in a commit message or a merge's message, in a PR's \
                 title, body or comment, or an issue's `ref`; an author's PR texts may name the issues its merge \
                 closes, and a merge closes only what its PR's own texts name"
            }
            Self::ReaderWrites => "no read writes a file on the server's host",
            Self::UnknownEffect => "no call is forwarded whose effect on the forge the dialect does not know",
            Self::IndependentReview => {
                "an approval counts only from a reviewer independent of the PR's author and of its last pusher"
            }
            Self::ReviewedMerge => {
                "a merge onto a protected branch lands only the head an independent reviewer approved: the PR \
                 workflow's `approval_required` and `stale_head` on it, and its `session_attachment_missing` (no \
                 worker to judge the merge as), are never overridden by an operator's approval"
            }
        }
    }

    /// What lifting it gives up, for the operator who considers it (the book and `doctor` say it).
    pub const fn exposes(self) -> &'static str {
        match self {
            Self::ProtectedBranch => {
                "any role the rules permit may move the protected branches directly, with no review: the \
                 guarantee is gone"
            }
            Self::ProtectedPath => {
                "a role may change the workflow files, which run with a token that can push: the guarantee is gone"
            }
            Self::ForcedMerge => "a merger may land a head past failing checks or the forge's own branch protection",
            Self::ScheduledMerge => {
                "a merger may schedule a merge, and a push after the approval lands an unreviewed head when the \
                 checks pass"
            }
            Self::UnpinnedMerge => {
                "a merge through a server that cannot pin the head may land a head pushed after the judgement"
            }
            Self::Retarget => "an approved PR may be moved to a base no reviewer judged it against",
            Self::PrState => "any role the rules permit may close, reopen or strand another role's PRs",
            Self::IssueState => {
                "any role may close or reopen issues — with a keyword in a commit, a comment or a merge message — \
                 that only the controller and the reconciler should"
            }
            Self::ReaderWrites => "a reader may write files wherever the server's process may write",
            Self::UnknownEffect => {
                "calls the dialect has no statement for are judged by `[[rules]]` alone: whatever they move, no \
                 invariant sees"
            }
            Self::IndependentReview => "a PR's own author (or last pusher) may approve it, and the merge lands it",
            Self::ReviewedMerge => {
                "with `approval_required` or `stale_head` in [approvals] may_override, an operator's approval may \
                 land on a protected branch a head no reviewer approved, or one pushed after the review: the \
                 guarantee rests on that operator (break-glass)"
            }
        }
    }

    /// What the agent (or the operator) does instead: one sentence.
    pub const fn action(self) -> &'static str {
        match self {
            Self::ProtectedBranch | Self::ProtectedPath => crate::protect::PROTECTED_ACTION,
            Self::ForcedMerge | Self::ScheduledMerge => {
                "merge without `force_merge` and `merge_when_checks_succeed`: the gateway pins the approved head, and \
                 the forge's checks stay in force; an operator who truly wants it lifts the invariant by name \
                 ([invariants] lift)"
            }
            Self::UnpinnedMerge => {
                "upgrade the downstream server to one whose merge pins the head (gitea-mcp: `head_commit_id`), or \
                 merge on the forge by hand; on GitHub, let the gate read the PR (the gateway then makes the merge \
                 itself, pinned through the REST API): no merge goes out unpinned"
            }
            Self::Retarget => {
                "close the PR and open another against the base you want (approvals are for a base); a branch other \
                 PRs are based on is deleted only once they are merged or closed"
            }
            Self::PrState => {
                "hand the close or reopen to the controller or the reconciler; a branch that heads an open PR is \
                 deleted only once the PR is merged or closed"
            }
            Self::IssueState => {
                "name the issue without a closing or reopening keyword (`Refs #N`, not `Fixes #N`), or, as the \
                 author, in your PR's title or body (its merge closes the issues you hold the lock of); hand a close, \
                 a reopen or an issue's `ref` to the controller or the reconciler"
            }
            Self::ReaderWrites => {
                "read without `output_path` and without a download method: no role writes files on the server's host"
            }
            Self::UnknownEffect => {
                "use a tool and method the forge dialect knows (docs/reference/ lists them per dialect), or upgrade \
                 fleetgate; an operator may lift `unknown-effect` to let [[rules]] alone decide such calls"
            }
            Self::IndependentReview => "get an approval from a reviewer independent of the PR's author and last pusher",
            Self::ReviewedMerge => {
                "get an independent reviewer's approval at the head the merge lands (a head pushed after the review \
                 needs a new one): no operator's approval stands in for it; an operator who truly wants a \
                 break-glass lifts `reviewed-merge` by name ([invariants] lift) and lists the blocker in \
                 [approvals] may_override"
            }
        }
    }

    /// The blocker a breach of it refuses with: `protected_branch` for the branches and
    /// paths (the literal consumers already switch on), `invariant_violated` otherwise.
    pub const fn blocker(self) -> BlockerKind {
        match self {
            Self::ProtectedBranch | Self::ProtectedPath => BlockerKind::ProtectedBranch,
            _ => BlockerKind::InvariantViolated,
        }
    }
}

impl fmt::Display for Invariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One invariant a call breaks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Breach {
    /// Which.
    pub invariant: Invariant,
    /// What the call does that breaks it, in words.
    pub reason: String,
}

/// The effect held against the invariants: what it breaks, and what it would break but for
/// an operator's lift (each audited with the call it lets through).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Judgement {
    /// Breaches that refuse the call, in [`Invariant::ALL`]'s order.
    pub breaches: Vec<Breach>,
    /// Breaches an `[invariants] lift` lets through.
    pub lifted: Vec<Breach>,
    /// What the call does that an invariant guards through the PR workflow's own judgement:
    /// a merge onto a protected branch ([`Invariant::ReviewedMerge`]), whose `approval_required`
    /// or `stale_head` no operator's approval overrides. (Lifted, it is in `lifted` instead.)
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub guarded: Vec<Breach>,
}

pub use crate::blocker::INVARIANT_ACTION;

/// Hold `effect`, made by `role`, against the invariants under `protection`; `lifted` names
/// those the operator lifted.
pub fn judge(effect: &Effect, role: &str, protection: &Protection, lifted: &[Invariant]) -> Judgement {
    let mut found: Vec<Breach> = Vec::new();
    let mut guarded: Vec<Breach> = Vec::new();
    let mut breach = |invariant: Invariant, reason: String| {
        if !found.iter().any(|b| b.invariant == invariant && b.reason == reason) {
            found.push(Breach { invariant, reason });
        }
    };
    if let Some(why) = &effect.unknown {
        breach(Invariant::UnknownEffect, why.clone());
    }
    for m in &effect.branches {
        let verb = match m.how {
            Move::Merge { pr } => {
                if let Some(rule) = protected(protection, &effect.defaults, &m.branch) {
                    guarded.push(Breach {
                        invariant: Invariant::ReviewedMerge,
                        reason: format!(
                            "the merge lands PR #{pr} on protected branch `{}` of {} ({rule}): only the head an \
                             independent reviewer approved lands there",
                            m.branch, m.repo
                        ),
                    });
                }
                continue;
            }
            Move::Write => "writes".to_owned(),
            Move::Create => "creates".to_owned(),
            Move::Delete => "deletes".to_owned(),
            Move::Rename => "renames".to_owned(),
            Move::UpdateFromBase { pr } => format!("merges PR #{pr}'s base into its head,"),
        };
        if let Some(rule) = protected(protection, &effect.defaults, &m.branch) {
            breach(Invariant::ProtectedBranch, format!("the call {verb} branch `{}` of {}: {rule}", m.branch, m.repo));
        }
    }
    for w in &effect.paths {
        if let Some(rule) = protection.path_rule(&w.path) {
            breach(Invariant::ProtectedPath, format!("the call writes {rule} on branch `{}`", w.branch));
        }
    }
    if let Some(m) = &effect.merge {
        for (invariant, reason) in merge_breaches(m) {
            breach(invariant, reason);
        }
    }
    let state_role = PR_STATE_ROLES.contains(&role);
    for p in &effect.prs {
        if let Some((invariant, reason)) = pr_breach(p, state_role) {
            breach(invariant, reason);
        }
    }
    for i in &effect.issues {
        if let Some(reason) = issue_breach(i, role) {
            breach(Invariant::IssueState, reason);
        }
    }
    for path in &effect.host_files {
        breach(Invariant::ReaderWrites, format!("the call writes a file on the server's host: {path}"));
    }
    let (lifted_now, breaches): (Vec<Breach>, Vec<Breach>) =
        found.into_iter().partition(|b| lifted.contains(&b.invariant));
    let mut breaches = breaches;
    breaches.sort_by_key(|b| b.invariant);
    let (mut lifted_now, guarded) = (lifted_now, guarded);
    let (lifted_guards, guarded): (Vec<Breach>, Vec<Breach>) =
        guarded.into_iter().partition(|b| lifted.contains(&b.invariant));
    lifted_now.extend(lifted_guards);
    Judgement { breaches, lifted: lifted_now, guarded }
}

/// What a merge's terms break: a forced merge, a scheduled one, one that cannot be pinned.
fn merge_breaches(m: &MergeTerms) -> Vec<(Invariant, String)> {
    let mut found = Vec::new();
    if m.forced {
        found.push((
            Invariant::ForcedMerge,
            format!("the merge of PR #{} skips the forge's checks (`force_merge`)", m.pr),
        ));
    }
    if m.scheduled {
        found.push((
            Invariant::ScheduledMerge,
            format!("the merge of PR #{} is scheduled for a later head (`merge_when_checks_succeed`)", m.pr),
        ));
    }
    if !m.pinnable {
        found.push((
            Invariant::UnpinnedMerge,
            format!(
                "the server's merge declares no argument pinning the head: PR #{} cannot be merged at the head it is \
                 judged at",
                m.pr
            ),
        ));
    }
    found
}

/// What a change to a PR breaks (`state_role`: the caller may change a PR's state).
fn pr_breach(p: &PrEffect, state_role: bool) -> Option<(Invariant, String)> {
    match &p.change {
        PrChange::Retarget { to } => {
            Some((Invariant::Retarget, format!("the call retargets PR #{} of {} onto `{to}`", p.pr, p.repo)))
        }
        PrChange::RetargetedWithBranch { branch } => Some((
            Invariant::Retarget,
            format!(
                "the call deletes branch `{branch}`, which PR #{} of {} bases on: the forge retargets or closes it",
                p.pr, p.repo
            ),
        )),
        PrChange::State { to, by } if !state_role => Some((
            Invariant::PrState,
            format!(
                "`{by}` sets PR #{} of {} to `{to}`: a PR's state is the controller's and the reconciler's",
                p.pr, p.repo
            ),
        )),
        PrChange::ClosedWithBranch { branch } if !state_role => Some((
            Invariant::PrState,
            format!(
                "the call deletes branch `{branch}`, which open PR #{} of {} heads or bases: the forge closes it \
                 (closing PRs is the controller's)",
                p.pr, p.repo
            ),
        )),
        _ => None,
    }
}

/// Why `branch` is protected (the roster's rule, or the forge's default branch), if it is.
fn protected(protection: &Protection, defaults: &[String], branch: &str) -> Option<String> {
    let name = branch.strip_prefix("refs/heads/").unwrap_or(branch);
    let forge_default = defaults
        .iter()
        .any(|d| d == name)
        .then(|| format!("the repository's default branch `{name}` (as the forge reports it)"));
    protection.branch_rule(branch).or(forge_default)
}

/// What a call does, in words, from its judged effect — the same [`Effect`] the invariants
/// are judged on — for the person asked to approve it, before its exact arguments: "merge
/// org/repo#1 at 3386c20 onto main, squash". `head` is the head the PR workflow judged the
/// call at (a merge's, a review's), when it did. Pure.
pub fn describe(effect: &Effect, head: Option<&str>) -> String {
    if let Some(why) = &effect.unknown {
        return format!("something the forge dialect has no statement for ({why})");
    }
    let at = head.map(|h| format!(" at {}", h.get(..7).unwrap_or(h))).unwrap_or_default();
    let mut parts: Vec<String> = Vec::new();
    if let Some(m) = &effect.merge {
        let onto = effect.branches.iter().find(|b| matches!(b.how, Move::Merge { .. }));
        let repo = onto.map(|b| b.repo.to_string()).or_else(|| effect.prs.first().map(|p| p.repo.to_string()));
        let mut s = format!("merge {}#{}{at}", repo.unwrap_or_default(), m.pr);
        if let Some(b) = onto {
            s.push_str(&format!(" onto {}", b.branch));
        }
        if let Some(style) = &m.style {
            s.push_str(&format!(", {style}"));
        }
        if m.forced {
            s.push_str(", skipping the forge's checks");
        }
        if m.scheduled {
            s.push_str(", scheduled for whatever head passes the checks later");
        }
        parts.push(s);
    }
    for b in &effect.branches {
        let (repo, branch) = (&b.repo, &b.branch);
        parts.push(match &b.how {
            Move::Merge { .. } => continue,
            Move::Write => {
                let files: Vec<&str> =
                    effect.paths.iter().filter(|p| &p.branch == branch).map(|p| p.path.as_str()).collect();
                if files.is_empty() {
                    format!("commit to branch {branch} of {repo}")
                } else {
                    format!("write {} on branch {branch} of {repo}", files.join(", "))
                }
            }
            Move::Create => format!("create branch {branch} in {repo}"),
            Move::Delete => format!("delete branch {branch} of {repo}"),
            Move::Rename => format!("rename branch {branch} of {repo}"),
            Move::UpdateFromBase { pr } => format!("merge the base of {repo}#{pr} into its head branch {branch}"),
        });
    }
    let written: Vec<&str> = effect.branches.iter().map(|b| b.branch.as_str()).collect();
    for p in effect.paths.iter().filter(|p| !written.contains(&p.branch.as_str())) {
        parts.push(format!("write {} on branch {}", p.path, p.branch));
    }
    for p in &effect.prs {
        let pr = format!("{}#{}", p.repo, p.pr);
        parts.push(match &p.change {
            PrChange::Merged => continue,
            PrChange::State { to, .. } => format!("set {pr} {to}"),
            PrChange::Retarget { to } => format!("move {pr} onto base {to}"),
            PrChange::ClosedWithBranch { branch } => format!("close {pr} (branch {branch} goes away)"),
            PrChange::RetargetedWithBranch { branch } => format!("move {pr} off branch {branch}, which goes away"),
            PrChange::Text => format!("edit the title or body of {pr}"),
        });
    }
    for f in &effect.host_files {
        parts.push(format!("write the file {f} on the server's host"));
    }
    if parts.is_empty() {
        parts.push(match effect.action {
            Some("review") => format!("a review decision{at}"),
            Some("open") => "open a pull request".to_owned(),
            Some(action) => format!("the workflow's {action}{at}"),
            None if effect.is_read() => "read only".to_owned(),
            None => "a write the dialect states no guarded change of".to_owned(),
        });
    }
    let mut text = parts.join("; ");
    if !effect.unestablished.is_empty() {
        text.push_str(&format!(" (the rest could not be established: {})", effect.unestablished.join("; ")));
    }
    text
}

/// The roles that may name, in a PR's texts, the issues its merge will close: the role that
/// opens PRs (and holds issue locks).
pub const ISSUE_NAMING_ROLES: [&str; 1] = ["author"];

/// Why `role` may not do what `i` says to an issue (`None`: it may).
fn issue_breach(i: &IssueEffect, role: &str) -> Option<String> {
    if PR_STATE_ROLES.contains(&role) {
        return None;
    }
    let issue =
        if i.issue == 0 { format!("the new issue of {}", i.repo) } else { format!("issue #{} of {}", i.issue, i.repo) };
    let theirs = "an issue's state is the controller's and the reconciler's";
    match &i.change {
        IssueChange::State { to, by } => Some(format!("`{by}` sets {issue} to `{to}`: {theirs}")),
        IssueChange::Ref { branch } => Some(format!(
            "the call sets {issue}'s `ref` to `{branch}`: the forge would close it by a keyword in any commit landing \
             there; {theirs}"
        )),
        IssueChange::ByText { to, field, words, when, named_by_pr } => {
            let allowed = match when {
                When::AtMerge { .. } => ISSUE_NAMING_ROLES.contains(&role),
                When::Now => *named_by_pr,
                When::Landing { .. } => false,
            };
            let verb = if to == "closed" { "closes" } else { "reopens" };
            (!allowed).then(|| {
                let named = if matches!(when, When::Now) { ", which the PR's own texts do not name" } else { "" };
                format!("`{field}` says `{words}`: the forge {verb} {issue} {when}{named}; {theirs}")
            })
        }
        IssueChange::Referenced { .. } => None,
    }
}

/// Does any of `globs` name `branch`? (Exposed for the dialects' own reads.)
pub fn names_branch(globs: &[String], branch: &str) -> bool {
    globs.iter().any(|g| glob_match(g, branch))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> Repo {
        Repo::new("Org", "Repo")
    }

    fn moving(branch: &str, how: Move) -> Effect {
        Effect { branches: vec![BranchMove { repo: repo(), branch: branch.into(), how }], ..Effect::write() }
    }

    #[test]
    fn a_protected_branch_moves_only_by_the_workflow_s_merge() {
        let p = Protection { branches: vec!["release/*".into()], ..Protection::default() };
        for how in [Move::Write, Move::Create, Move::Delete, Move::Rename, Move::UpdateFromBase { pr: 3 }] {
            let j = judge(&moving("main", how.clone()), "author", &p, &[]);
            assert_eq!(j.breaches.len(), 1, "{how:?}");
            assert_eq!(j.breaches[0].invariant, Invariant::ProtectedBranch);
            assert!(judge(&moving("release/1", how.clone()), "merger", &p, &[]).breaches.len() == 1, "{how:?}");
            assert!(judge(&moving("feature", how), "author", &p, &[]).breaches.is_empty());
        }
        assert!(judge(&moving("main", Move::Merge { pr: 3 }), "merger", &p, &[]).breaches.is_empty());
        assert!(judge(&moving("refs/heads/main", Move::Delete), "merger", &p, &[]).breaches.len() == 1);
    }

    /// Issue 55: a merge onto a protected branch is guarded by `reviewed-merge` (its workflow
    /// approval is the invariant's, never an override); onto another branch it is not; lifted,
    /// it is named with the lifts.
    #[test]
    fn a_merge_onto_a_protected_branch_is_guarded_by_reviewed_merge() {
        let p = Protection { branches: vec!["release/*".into()], ..Protection::default() };
        for branch in ["main", "release/2", "refs/heads/main"] {
            let j = judge(&moving(branch, Move::Merge { pr: 3 }), "merger", &p, &[]);
            assert!(j.breaches.is_empty() && j.lifted.is_empty(), "{branch}: {j:?}");
            assert_eq!(
                j.guarded.iter().map(|b| b.invariant).collect::<Vec<_>>(),
                [Invariant::ReviewedMerge],
                "{branch}"
            );
        }
        assert!(judge(&moving("feature", Move::Merge { pr: 3 }), "merger", &p, &[]).guarded.is_empty());
        let forge_default = Effect { defaults: vec!["trunk".into()], ..moving("trunk", Move::Merge { pr: 3 }) };
        assert_eq!(judge(&forge_default, "merger", &p, &[]).guarded.len(), 1, "the forge's default branch too");
        let lifted = judge(&moving("main", Move::Merge { pr: 3 }), "merger", &p, &[Invariant::ReviewedMerge]);
        assert!(lifted.guarded.is_empty());
        assert_eq!(lifted.lifted.iter().map(|b| b.invariant).collect::<Vec<_>>(), [Invariant::ReviewedMerge]);
    }

    /// Issue 55: the operator was shown raw JSON. What a call does, in words, from the judged
    /// effect, comes first.
    #[test]
    fn a_call_is_described_by_what_it_does() {
        let merge = Effect {
            merge: Some(MergeTerms {
                pr: 1,
                forced: false,
                scheduled: false,
                pinnable: true,
                style: Some("squash".into()),
            }),
            prs: vec![PrEffect { repo: Repo::new("o", "r"), pr: 1, change: PrChange::Merged }],
            branches: vec![BranchMove { repo: Repo::new("o", "r"), branch: "main".into(), how: Move::Merge { pr: 1 } }],
            ..Effect::action("merge")
        };
        assert_eq!(describe(&merge, Some("3386c20ab12")), "merge o/r#1 at 3386c20 onto main, squash");
        let write = Effect {
            paths: vec![PathWrite { branch: "feature".into(), path: "src/a.rs".into() }],
            ..moving("feature", Move::Write)
        };
        assert_eq!(describe(&write, None), "write src/a.rs on branch feature of org/repo");
        let close = Effect {
            prs: vec![PrEffect {
                repo: repo(),
                pr: 4,
                change: PrChange::State { to: "closed".into(), by: "x".into() },
            }],
            ..Effect::write()
        };
        assert_eq!(describe(&close, None), "set org/repo#4 closed");
        assert_eq!(describe(&Effect::read(), None), "read only");
        assert!(describe(&Effect::unknown("no statement".into()), None).contains("no statement"));
        let failed = Effect { unestablished: vec!["the PR read failed".into()], ..Effect::action("merge") };
        assert!(describe(&failed, None).contains("could not be established: the PR read failed"));
    }

    #[test]
    fn pr_state_is_the_controller_s_and_the_reconciler_s_whatever_the_call() {
        let closes = Effect {
            prs: vec![PrEffect {
                repo: repo(),
                pr: 4,
                change: PrChange::State { to: "closed".into(), by: "issue_write update".into() },
            }],
            ..Effect::write()
        };
        let p = Protection::default();
        for role in ["author", "reviewer", "merger"] {
            assert_eq!(judge(&closes, role, &p, &[]).breaches[0].invariant, Invariant::PrState, "{role}");
        }
        for role in PR_STATE_ROLES {
            assert!(judge(&closes, role, &p, &[]).breaches.is_empty(), "{role}");
        }
        // A retarget is no role's, the controller's neither.
        let retarget = Effect {
            prs: vec![PrEffect { repo: repo(), pr: 4, change: PrChange::Retarget { to: "main".into() } }],
            ..Effect::write()
        };
        assert_eq!(judge(&retarget, "controller", &p, &[]).breaches[0].invariant, Invariant::Retarget);
    }

    #[test]
    fn an_issue_s_state_is_the_state_roles_whatever_the_text() {
        let p = Protection::default();
        let issue = |change: IssueChange| Effect {
            issues: vec![IssueEffect { repo: repo(), issue: 7, change }],
            ..Effect::write()
        };
        let text = |when: When, named_by_pr: bool| IssueChange::ByText {
            to: "closed".into(),
            field: "message".into(),
            words: "Fixes #7".into(),
            when,
            named_by_pr,
        };
        let landing = When::Landing { branch: "feat".into() };
        let cases = [
            (issue(IssueChange::State { to: "closed".into(), by: "issue_write update".into() }), [false, false, false]),
            (issue(IssueChange::Ref { branch: "feat".into() }), [false, false, false]),
            (issue(text(landing, false)), [false, false, false]),
            // A PR's texts: the author names what its merge closes (the issue lock judges it).
            (issue(text(When::AtMerge { pr: Some(3) }, false)), [true, false, false]),
            // A merge closes what its PR names, and nothing its own message adds.
            (issue(text(When::Now, true)), [true, true, true]),
            (issue(text(When::Now, false)), [false, false, false]),
            (issue(IssueChange::Referenced { field: "body".into(), when: When::Now }), [true, true, true]),
        ];
        for (effect, allowed) in cases {
            for (role, ok) in ["author", "reviewer", "merger"].into_iter().zip(allowed) {
                let found = judge(&effect, role, &p, &[]).breaches;
                assert_eq!(found.is_empty(), ok, "{role}: {effect:?} {found:?}");
                if !ok {
                    assert_eq!(found[0].invariant, Invariant::IssueState);
                }
            }
            for role in PR_STATE_ROLES {
                assert!(judge(&effect, role, &p, &[]).breaches.is_empty(), "{role}: {effect:?}");
            }
        }
    }

    #[test]
    fn a_lift_moves_a_breach_aside_and_names_it() {
        let scheduled = Effect {
            merge: Some(MergeTerms { pr: 2, forced: true, scheduled: true, pinnable: true, style: None }),
            ..Effect::action("merge")
        };
        let j = judge(&scheduled, "merger", &Protection::default(), &[Invariant::ScheduledMerge]);
        assert_eq!(j.breaches.iter().map(|b| b.invariant).collect::<Vec<_>>(), [Invariant::ForcedMerge]);
        assert_eq!(j.lifted.iter().map(|b| b.invariant).collect::<Vec<_>>(), [Invariant::ScheduledMerge]);
    }

    #[test]
    fn every_invariant_reads_back_from_its_name() {
        for i in Invariant::ALL {
            assert_eq!(Invariant::parse(i.as_str()), Some(i));
            assert!(!i.holds().is_empty() && !i.exposes().is_empty());
        }
        assert_eq!(Invariant::parse("sunny"), None);
    }
}
