//! What every dialect states the same way: its role matrix as data (readers by method,
//! writes by method and role), its statement table, and the reference page built from both.

use crate::capability::ToolClass;
use crate::effect::Invariant;
use crate::rules::{ArgMatch, Rule, RuleSet};
use serde_json::{Map, Value};

/// What one argument of a matching call must be.
#[derive(Clone, Copy, Debug)]
pub enum Arg {
    /// One of these strings.
    Is(&'static [&'static str]),
    /// Any value.
    Present,
    /// The boolean `true`.
    True,
}

/// One row of a dialect's role matrix.
#[derive(Debug)]
pub struct Entry {
    /// The rule's name (`<dialect>:<name>` in reasons).
    pub name: &'static str,
    /// The tool glob.
    pub tool: &'static str,
    /// JSON pointer → what must be there.
    pub args: &'static [(&'static str, Arg)],
    /// The roles that may make such a call.
    pub roles: &'static [&'static str],
    /// Its class.
    pub class: Option<ToolClass>,
}

/// Every role.
pub const EVERY: &[&str] = &["*"];
/// No role.
pub const NOBODY: &[&str] = &[];
/// The `method` argument.
pub const METHOD: &str = "/method";

/// A reader: every role.
pub const fn read(name: &'static str, tool: &'static str) -> Entry {
    Entry { name, tool, args: &[], roles: EVERY, class: Some(ToolClass::ReadOnly) }
}

/// A reader judged by method: these `method` values read, for every role.
pub const fn read_methods(name: &'static str, tool: &'static str, args: &'static [(&'static str, Arg)]) -> Entry {
    Entry { name, tool, args, roles: EVERY, class: Some(ToolClass::ReadOnly) }
}

/// A write `roles` may make.
pub const fn write(
    name: &'static str,
    tool: &'static str,
    args: &'static [(&'static str, Arg)],
    roles: &'static [&'static str],
) -> Entry {
    Entry { name, tool, args, roles, class: Some(ToolClass::Mutating) }
}

/// A method-dispatched tool's last rule: any other `method` is no role's. (A call without a
/// `method` falls to the profile's catch-all; the server refuses it either way.)
pub const fn other_method(name: &'static str, tool: &'static str) -> Entry {
    write(name, tool, &[(METHOD, Arg::Present)], NOBODY)
}

fn matcher(arg: Arg) -> ArgMatch {
    match arg {
        Arg::Is(values) => ArgMatch::OneOf(values.iter().map(|v| Value::from(*v)).collect()),
        Arg::Present => ArgMatch::Present,
        Arg::True => ArgMatch::OneOf(vec![Value::Bool(true)]),
    }
}

/// A matrix as the rules it is, in the order they decide, named `<dialect>:<entry>`.
pub fn rules_of(dialect: &str, matrix: &[Entry]) -> Vec<Rule> {
    matrix
        .iter()
        .map(|entry| Rule {
            origin: format!("{dialect}:{}", entry.name),
            tool: entry.tool.to_owned(),
            args: entry.args.iter().map(|(pointer, arg)| ((*pointer).to_owned(), matcher(*arg))).collect(),
            effect: None,
            roles: entry.roles.iter().map(|r| (*r).to_owned()).collect(),
            class: entry.class,
            // What a call *is* (its workflow action) is the dialect's statement of its
            // effect, never a rule's.
            action: None,
            ask: false,
            approvers: Vec::new(),
            required: 0,
        })
        .collect()
}

/// One row of a reference page: a tool and method of the server, what it does to the
/// forge, the invariants it may meet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stated {
    /// The tool.
    pub tool: &'static str,
    /// Its `method` (`""`: the tool has none).
    pub method: &'static str,
    /// What it does, in words.
    pub effect: &'static str,
    /// The invariants such a call may break.
    pub invariants: &'static [Invariant],
}

/// One call's texts the forge acts on later (closing keywords, cross-references): which, and
/// what the forge does with them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Texts {
    /// The tool.
    pub tool: &'static str,
    /// Its `method` (`""`: the tool has none).
    pub method: &'static str,
    /// The texts, in words (the argument names, and what the forge reads beside them).
    pub texts: &'static str,
    /// What the forge does with them, and when.
    pub acts: &'static str,
}

/// Tools and their `method` values (empty: the tool has none).
pub type Methods = &'static [(&'static str, &'static [&'static str])];

/// What a dialect's reference page is built from.
#[derive(Debug)]
pub struct Surface {
    /// The page's title and first paragraph.
    pub intro: &'static str,
    /// The readers.
    pub readers: Methods,
    /// The calls stated beyond "reads" or "changes what no invariant guards".
    pub stated: &'static [Stated],
    /// The review tools (each a review action), and what one does.
    pub reviews: Methods,
    /// What a review action does, in words.
    pub review_effect: &'static str,
    /// The invariants a review action may meet.
    pub review_invariants: &'static [Invariant],
    /// Writes no invariant guards.
    pub plain: Methods,
    /// The calls whose texts the forge acts on later.
    pub texts: &'static [Texts],
    /// The page's last paragraph.
    pub outro: &'static str,
}

/// The roles of the fleet's role matrix, in the page's order.
pub const ROLES: [&str; 5] = ["author", "reviewer", "merger", "controller", "reconciler"];

/// `docs/reference/<dialect>.md`: every tool and method the dialect knows, what it does to the
/// forge, the invariants it may meet and the roles the built-in profile lets make it.
pub fn render(surface: &Surface, rules: Vec<Rule>) -> String {
    use std::fmt::Write as _;
    let rules = RuleSet::new(rules);
    let who = |tool: &str, method: &str| {
        let mut args = Map::new();
        if !method.is_empty() {
            args.insert("method".into(), Value::from(method));
        }
        let may: Vec<&str> =
            ROLES.iter().copied().filter(|r| rules.decide(r, tool, Some(&args)).is_none_or(|d| d.permitted)).collect();
        if may.len() == ROLES.len() {
            "every role".to_owned()
        } else if may.is_empty() {
            "no role".to_owned()
        } else {
            may.join(", ")
        }
    };
    let mut out = format!(
        "{}\n\n| Tool | Method | What it does | Invariants | Roles |\n| --- | --- | --- | --- | --- |\n",
        surface.intro
    );
    let mut row = |tool: &str, method: &str, effect: &str, invariants: &[Invariant]| {
        let inv: Vec<String> = invariants.iter().map(|i| format!("`{i}`")).collect();
        let inv = if inv.is_empty() { "—".to_owned() } else { inv.join(", ") };
        let m = if method.is_empty() { "—".to_owned() } else { format!("`{method}`") };
        let _ = writeln!(out, "| `{tool}` | {m} | {effect} | {inv} | {} |", who(tool, method));
    };
    let each = |methods: &'static [&'static str]| -> Vec<&'static str> {
        if methods.is_empty() { vec![""] } else { methods.to_vec() }
    };
    for (tool, methods) in surface.readers {
        for m in each(methods) {
            row(tool, m, "reads", &[]);
        }
    }
    for s in surface.stated {
        row(s.tool, s.method, s.effect, s.invariants);
    }
    for (tool, methods) in surface.reviews {
        let listed = |m: &str| surface.stated.iter().any(|s| s.tool == *tool && s.method == m);
        for m in each(methods).into_iter().filter(|m| !listed(m)) {
            row(tool, m, surface.review_effect, surface.review_invariants);
        }
    }
    for (tool, methods) in surface.plain {
        let listed = |m: &str| surface.stated.iter().any(|s| s.tool == *tool && s.method == m);
        for m in each(methods).into_iter().filter(|m| !listed(m)) {
            row(tool, m, "changes the forge; no invariant guards what it changes", &[]);
        }
    }
    if !surface.texts.is_empty() {
        let _ = write!(
            out,
            "\n## Texts the forge acts on\n\nThe forge reads these texts for issue references and acts on them later: \
             a closing or reopening keyword (`Fixes #N`, and every form of the forge's grammar: \
             [the threat model](../threat-model.md#what-the-forge-does-later-and-elsewhere)) closes or reopens the \
             issue it names. The gate reads each with the forge's grammar, generously, and judges what the forge will \
             do with it (`issue-state`, and the issue lock) as if the call did it.\n\n\
             | Tool | Method | Texts | What the forge does with them |\n| --- | --- | --- | --- |\n"
        );
        for t in surface.texts {
            let m = if t.method.is_empty() { "—".to_owned() } else { format!("`{}`", t.method) };
            let _ = writeln!(out, "| `{}` | {m} | {} | {} |", t.tool, t.texts, t.acts);
        }
    }
    let _ = write!(out, "\n{}\n", surface.outro);
    out
}

/// Every tool a surface names.
pub fn tools(surface: &Surface) -> Vec<&'static str> {
    let mut tools: Vec<&'static str> = surface.readers.iter().map(|(t, _)| *t).collect();
    tools.extend(surface.plain.iter().map(|(t, _)| *t));
    tools.extend(surface.reviews.iter().map(|(t, _)| *t));
    tools.extend(surface.stated.iter().map(|s| s.tool));
    tools.sort_unstable();
    tools.dedup();
    tools
}
