//! Rules that match what a call does. A rule's `effect` names the judged effect — the kind of
//! operation, the branch it moves or merges onto, the PR, whether that branch is protected —
//! and matches the very [`Effect`] the invariants are judged on (the dialect's one statement
//! per tool, forge reads included), read here as a list of [`Operation`]s. So "merges onto
//! `release/*`" is one rule for every dialect and every way a server spells a merge, where
//! argument matchers see only what the caller sent (a gitea-mcp merge names no base).
//!
//! What a call does may not be established (a preview without a forge to read, a read that
//! failed): an effect condition is then neither true nor false ([`Does::Unknown`]), and the
//! rule set says so rather than guess.

use crate::effect::{Effect, Move, PrChange};
use crate::glob::glob_match;
use crate::protect::Protection;
use serde::Serialize;
use std::fmt;

/// The kind of one operation a call performs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Op {
    /// The PR workflow's merge lands a PR's head on its base (the branch).
    Merge,
    /// Commits land on the branch (a file write, a push, a PR's base merged into its head).
    Push,
    /// The branch is made.
    BranchCreate,
    /// The branch goes away.
    BranchDelete,
    /// The branch is renamed (either name).
    BranchRename,
    /// A review of the PR.
    Review,
    /// A PR is opened.
    PrOpen,
    /// A PR's title or body is edited.
    PrEdit,
    /// A PR is closed or reopened (by any call, a branch deletion's included).
    PrState,
    /// A PR's base changes (by an update, or a branch deletion's).
    Retarget,
    /// Any call that changes the forge.
    Write,
    /// A call that only reads.
    Read,
}

impl Op {
    /// Every kind, in the order the reference lists them.
    pub const ALL: [Self; 12] = [
        Self::Merge,
        Self::Push,
        Self::BranchCreate,
        Self::BranchDelete,
        Self::BranchRename,
        Self::Review,
        Self::PrOpen,
        Self::PrEdit,
        Self::PrState,
        Self::Retarget,
        Self::Write,
        Self::Read,
    ];

    /// The literal (`merge`, `branch-delete`, …).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Merge => "merge",
            Self::Push => "push",
            Self::BranchCreate => "branch-create",
            Self::BranchDelete => "branch-delete",
            Self::BranchRename => "branch-rename",
            Self::Review => "review",
            Self::PrOpen => "pr-open",
            Self::PrEdit => "pr-edit",
            Self::PrState => "pr-state",
            Self::Retarget => "retarget",
            Self::Write => "write",
            Self::Read => "read",
        }
    }

    /// The kind a literal names.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.as_str() == text)
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One operation of a call: its kind, the branch it moves or merges onto (a retarget's new
/// base), the PR, and whether that branch is protected.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Operation {
    /// What kind.
    pub op: Op,
    /// The branch (without `refs/heads/`), when the operation has one.
    pub branch: Option<String>,
    /// The PR, when the operation has one.
    pub pr: Option<u64>,
    /// The branch is protected (the default branch, the forge's, `[workflow] protected_branches`).
    pub protected: bool,
}

/// The operations of `effect` under `protection`; `pr` is the PR the call names (a review's).
/// `None` when the effect is not established or not known: no effect condition can be told.
pub fn operations(effect: &Effect, pr: Option<u64>, protection: &Protection) -> Option<Vec<Operation>> {
    if !effect.unestablished.is_empty() || effect.unknown.is_some() {
        return None;
    }
    let protected =
        |branch: &str| protection.branch_rule(branch).is_some() || effect.defaults.iter().any(|d| d == branch);
    let on = |op: Op, branch: Option<&str>, pr: Option<u64>| {
        let branch = branch.map(|b| b.strip_prefix("refs/heads/").unwrap_or(b).to_owned());
        Operation { op, protected: branch.as_deref().is_some_and(protected), branch, pr }
    };
    let mut out = Vec::new();
    for m in &effect.branches {
        let (op, pr) = match m.how {
            Move::Merge { pr } => (Op::Merge, Some(pr)),
            Move::Write => (Op::Push, None),
            Move::UpdateFromBase { pr } => (Op::Push, Some(pr)),
            Move::Create => (Op::BranchCreate, None),
            Move::Delete => (Op::BranchDelete, None),
            Move::Rename => (Op::BranchRename, None),
        };
        out.push(on(op, Some(&m.branch), pr));
    }
    for p in &effect.prs {
        match &p.change {
            PrChange::State { .. } => out.push(on(Op::PrState, None, Some(p.pr))),
            PrChange::ClosedWithBranch { branch } => out.push(on(Op::PrState, Some(branch), Some(p.pr))),
            PrChange::Retarget { to } => out.push(on(Op::Retarget, Some(to), Some(p.pr))),
            PrChange::RetargetedWithBranch { branch } => out.push(on(Op::Retarget, Some(branch), Some(p.pr))),
            PrChange::Text => out.push(on(Op::PrEdit, None, Some(p.pr))),
            PrChange::Merged => {}
        }
    }
    // A merge whose base the forge did not name is still a merge: onto an unknown branch.
    if let Some(m) = &effect.merge
        && !out.iter().any(|o| o.op == Op::Merge)
    {
        out.push(on(Op::Merge, None, Some(m.pr)));
    }
    match effect.action {
        Some("review") => out.push(on(Op::Review, None, pr)),
        Some("open") => out.push(on(Op::PrOpen, None, None)),
        _ => {}
    }
    if effect.is_read() {
        out.push(on(Op::Read, None, pr));
    } else {
        out.push(on(Op::Write, None, pr));
    }
    Some(out)
}

/// What the rules are told of what a call does.
#[derive(Clone, Copy, Debug)]
pub enum Does<'a> {
    /// Not established (no forge to read, a read failed, no dialect): every effect condition
    /// is undecided.
    Unknown,
    /// These operations.
    Known(&'a [Operation]),
}

/// A rule's `effect`: one operation of the call must be all of these (an empty list: any).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct EffectMatch {
    /// Its kind is one of these.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub op: Vec<Op>,
    /// Its branch matches one of these globs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub branch: Vec<String>,
    /// Its PR is one of these.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pr: Vec<u64>,
    /// Its branch is protected (or not).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protected: Option<bool>,
}

impl EffectMatch {
    /// Whether `o` is such an operation: `None` when it lacks what a condition reads (a merge
    /// whose base is not known).
    fn of(&self, o: &Operation) -> Option<bool> {
        if !self.op.is_empty() && !self.op.contains(&o.op) {
            return Some(false);
        }
        let mut known = true;
        if !self.branch.is_empty() {
            match &o.branch {
                Some(b) if !self.branch.iter().any(|g| glob_match(g, b)) => return Some(false),
                Some(_) => {}
                None => known = false,
            }
        }
        if !self.pr.is_empty() {
            match o.pr {
                Some(n) if !self.pr.contains(&n) => return Some(false),
                Some(_) => {}
                None => known = false,
            }
        }
        if let Some(p) = self.protected {
            match &o.branch {
                Some(_) if o.protected != p => return Some(false),
                Some(_) => {}
                None => known = false,
            }
        }
        known.then_some(true)
    }

    /// Whether a call that `does` this matches: `None` when that cannot be told.
    pub fn holds(&self, does: Does<'_>) -> Option<bool> {
        let Does::Known(ops) = does else { return None };
        let mut undecided = false;
        for o in ops {
            match self.of(o) {
                Some(true) => return Some(true),
                Some(false) => {}
                None => undecided = true,
            }
        }
        if undecided { None } else { Some(false) }
    }

    /// Every call `self` matches, `other` matches too.
    pub fn within(&self, other: &Self) -> bool {
        fn subset<T: PartialEq>(mine: &[T], theirs: &[T]) -> bool {
            theirs.is_empty() || (!mine.is_empty() && mine.iter().all(|m| theirs.contains(m)))
        }
        subset(&self.op, &other.op)
            && subset(&self.pr, &other.pr)
            && (other.branch.is_empty()
                || (!self.branch.is_empty()
                    && self.branch.iter().all(|b| other.branch.iter().any(|g| glob_match(g, b)))))
            && (other.protected.is_none() || other.protected == self.protected)
    }
}

impl fmt::Display for EffectMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if !self.op.is_empty() {
            parts.push(self.op.iter().map(|o| o.as_str()).collect::<Vec<_>>().join(" or "));
        }
        if !self.branch.is_empty() {
            parts.push(format!("on {}", self.branch.join(" or ")));
        }
        if !self.pr.is_empty() {
            let prs: Vec<String> = self.pr.iter().map(|n| format!("#{n}")).collect();
            parts.push(format!("of PR {}", prs.join(" or ")));
        }
        match self.protected {
            Some(true) => parts.push("a protected branch".into()),
            Some(false) => parts.push("an unprotected branch".into()),
            None => {}
        }
        f.write_str(&parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::effect::{BranchMove, MergeTerms, PrEffect, Repo};

    fn merge_onto(base: Option<&str>, delete_head: bool) -> Effect {
        let repo = Repo::new("org", "repo");
        let mut branches: Vec<BranchMove> = base
            .map(|b| BranchMove { repo: repo.clone(), branch: b.into(), how: Move::Merge { pr: 7 } })
            .into_iter()
            .collect();
        if delete_head {
            branches.push(BranchMove { repo: repo.clone(), branch: "feature".into(), how: Move::Delete });
        }
        Effect {
            branches,
            prs: vec![PrEffect { repo, pr: 7, change: PrChange::Merged }],
            merge: Some(MergeTerms { pr: 7, forced: false, scheduled: false, pinnable: true, style: None }),
            ..Effect::action("merge")
        }
    }

    fn release() -> EffectMatch {
        EffectMatch { op: vec![Op::Merge], branch: vec!["release/*".into()], ..EffectMatch::default() }
    }

    #[test]
    fn a_merge_onto_a_release_branch_is_told_by_its_base_whatever_else_it_does() {
        let p =
            Protection { default_branch: "main".into(), branches: vec!["release/*".into()], ..Protection::default() };
        let onto = |base| operations(&merge_onto(Some(base), true), Some(7), &p).unwrap();
        let ops = onto("release/1");
        assert_eq!(release().holds(Does::Known(&ops)), Some(true));
        assert!(ops.iter().any(|o| o.op == Op::BranchDelete && o.branch.as_deref() == Some("feature")));
        assert_eq!(release().holds(Does::Known(&onto("main"))), Some(false), "the deleted head is not the base");
        let protected = EffectMatch { op: vec![Op::Merge], protected: Some(true), ..EffectMatch::default() };
        assert_eq!(protected.holds(Does::Known(&onto("main"))), Some(true));
        assert_eq!(protected.holds(Does::Known(&onto("feature-2"))), Some(false));
        let pr = EffectMatch { pr: vec![7], ..EffectMatch::default() };
        assert_eq!(pr.holds(Does::Known(&onto("main"))), Some(true));
        // Not established, or a merge whose base is unknown: undecided, never a guess.
        assert_eq!(release().holds(Does::Unknown), None);
        let unknown = operations(&merge_onto(None, false), Some(7), &p).unwrap();
        assert_eq!(release().holds(Does::Known(&unknown)), None);
        let merges = EffectMatch { op: vec![Op::Merge], ..EffectMatch::default() };
        assert_eq!(merges.holds(Does::Known(&unknown)), Some(true), "a merge all the same");
        let unestablished = Effect { unestablished: vec!["no forge".into()], ..Effect::write() };
        assert_eq!(operations(&unestablished, None, &p), None);
    }

    #[test]
    fn every_kind_of_operation_is_named_by_its_literal_and_containment_is_by_field() {
        for op in Op::ALL {
            assert_eq!(Op::parse(op.as_str()), Some(op));
        }
        assert!(release().within(&EffectMatch { op: vec![Op::Merge], ..EffectMatch::default() }));
        assert!(release().within(&EffectMatch { branch: vec!["*".into()], ..EffectMatch::default() }));
        assert!(!EffectMatch { op: vec![Op::Merge], ..EffectMatch::default() }.within(&release()));
        assert_eq!(release().to_string(), "merge, on release/*");
    }
}
