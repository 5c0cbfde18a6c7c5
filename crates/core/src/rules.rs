//! Argument-aware policy: rules that read a call's arguments. A downstream that
//! folds many operations into one tool (the Gitea MCP server's `pull_request_write` creates,
//! updates, closes *and merges*, chosen by `method`) cannot be governed by tool names alone.
//!
//! A [`Rule`] is a tool glob, argument matchers (a JSON pointer into the call's arguments →
//! the values allowed there, or `present` / `absent`), optionally what the call does
//! ([`EffectMatch`]: the kind of operation, the branch, the PR, protected or not — judged on
//! the dialect's statement of the call, `effect`), the roles that may make such a call, an
//! optional classification and an optional workflow action. **The first matching rule
//! decides.** A tool that has rules (without an effect condition) but whose call matches none
//! is refused, whatever the role: an unknown `method` is never forwarded. A tool no such rule
//! names falls back to the role's globs. An effect condition that cannot be told (what the
//! call does is not established) makes the decision depend on it, and the rule set says so
//! ([`RuleDecision::undetermined`]) unless every possible outcome refuses the role.
//!
//! Pure: values in, verdicts out. [`RuleSet::check`] refuses, at load, a rule no call could
//! ever reach (shadowed by an earlier one).

use crate::capability::ToolClass;
use crate::glob::glob_match;
pub use effect::{Does, EffectMatch, Op, Operation, operations};
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::fmt;

/// What one argument must be.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ArgMatch {
    /// One of these values (strings, numbers, booleans; `null` never matches a value).
    OneOf(Vec<Value>),
    /// Present (any value, `null` included).
    Present,
    /// Absent.
    Absent,
}

impl ArgMatch {
    fn holds(&self, found: Option<&Value>) -> bool {
        match (self, found) {
            (Self::Absent, found) => found.is_none(),
            (Self::Present, found) => found.is_some(),
            (Self::OneOf(_), None | Some(Value::Null)) => false,
            (Self::OneOf(allowed), Some(v)) => allowed.iter().any(|a| same(a, v)),
        }
    }

    /// Every call this matcher admits, `other` admits too.
    fn within(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::OneOf(mine), Self::OneOf(theirs)) => mine.iter().all(|m| theirs.iter().any(|t| same(m, t))),
            (Self::OneOf(_) | Self::Present, Self::Present) | (Self::Absent, Self::Absent) => true,
            _ => false,
        }
    }
}

/// Equal as values: numbers by value (`1` and `1.0`), everything else exactly.
fn same(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

impl fmt::Display for ArgMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Present => f.write_str("present"),
            Self::Absent => f.write_str("absent"),
            Self::OneOf(values) => {
                let shown: Vec<String> = values.iter().map(Value::to_string).collect();
                write!(f, "one of [{}]", shown.join(", "))
            }
        }
    }
}

/// One rule.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Rule {
    /// Where it comes from, for reasons and errors: `fleet.toml:12`, `gitea-mcp:merge`.
    pub origin: String,
    /// The tool glob.
    pub tool: String,
    /// JSON pointer → what must be there. All must hold.
    pub args: Vec<(String, ArgMatch)>,
    /// What the call must do (one operation of its judged effect), when the rule says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<EffectMatch>,
    /// The roles that may make such a call (`*`: every role).
    pub roles: Vec<String>,
    /// The classification of such a call, overriding the tool's own.
    pub class: Option<ToolClass>,
    /// The workflow action such a call is (`merge`, `review`, …), for the PR workflow.
    pub action: Option<String>,
    /// `decision = "ask"`: a call of a permitted role waits for an operator's approval of
    /// that exact call (`fleetgate_core::approval`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub ask: bool,
    /// `approvers`: who may answer an asked call's request (identities and `group:` names;
    /// empty: `[approvals] approvers`, else any operator).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvers: Vec<String>,
    /// `approvals_required`: how many distinct approvers must approve an asked call (0: the
    /// `[approvals]` default).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub required: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The value at JSON pointer `pointer` in the call's arguments, without copying them (a call
/// may carry a whole file).
pub fn lookup<'a>(arguments: Option<&'a Map<String, Value>>, pointer: &str) -> Option<&'a Value> {
    let rest = pointer.strip_prefix('/')?;
    let (first, tail) = rest.split_once('/').map_or((rest, None), |(f, t)| (f, Some(t)));
    let first = first.replace("~1", "/").replace("~0", "~");
    let value = arguments?.get(&first)?;
    match tail {
        None => Some(value),
        Some(tail) => value.pointer(&format!("/{tail}")),
    }
}

impl Rule {
    /// Whether the rule matches the call: `None` when its effect condition cannot be told.
    fn matches(&self, tool: &str, arguments: Option<&Map<String, Value>>, does: Does<'_>) -> Option<bool> {
        if !glob_match(&self.tool, tool) || !self.args.iter().all(|(pointer, m)| m.holds(lookup(arguments, pointer))) {
            return Some(false);
        }
        self.effect.as_ref().map_or(Some(true), |e| e.holds(does))
    }

    /// Whether `role` may make the calls this rule matches.
    pub fn admits(&self, role: &str) -> bool {
        self.roles.iter().any(|r| r == "*" || r == role)
    }

    /// Every call `self` matches, `earlier` matches too: `self` can never decide.
    fn shadowed_by(&self, earlier: &Self) -> bool {
        glob_match(&earlier.tool, &self.tool)
            && earlier
                .args
                .iter()
                .all(|(pointer, theirs)| self.args.iter().any(|(p, mine)| p == pointer && mine.within(theirs)))
            && match (&earlier.effect, &self.effect) {
                (None, _) => true,
                (Some(theirs), Some(mine)) => mine.within(theirs),
                (Some(_), None) => false,
            }
    }

    /// The rule's condition in words: `pull_request_write with /method one of ["merge"]`,
    /// `` `*` doing merge, on release/* ``.
    pub fn describe(&self) -> String {
        let mut out = format!("`{}`", self.tool);
        if !self.args.is_empty() {
            let conditions: Vec<String> = self.args.iter().map(|(p, m)| format!("{p} {m}")).collect();
            out = format!("{out} with {}", conditions.join(" and "));
        }
        if let Some(e) = &self.effect {
            out = format!("{out} doing {e}");
        }
        out
    }
}

/// Why a rule set was refused at load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleError {
    /// The rule's origin (file and line).
    pub origin: String,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.origin, self.reason)
    }
}

/// What the rules say of one call.
#[derive(Clone, Debug, PartialEq)]
pub enum RuleVerdict<'a> {
    /// No rule names this tool: the role's globs decide.
    Unruled,
    /// This rule matched: it decides.
    Matched(&'a Rule),
    /// Rules name the tool, none matches these arguments: refused for every role.
    Unmatched {
        /// The rules that name the tool, in order.
        candidates: Vec<&'a Rule>,
    },
}

/// The decision of the rules for one call and one role.
#[derive(Clone, Debug, PartialEq)]
pub struct RuleDecision {
    /// The role may make the call.
    pub permitted: bool,
    /// When refused: why, naming the rule, the argument and its value, and who may.
    pub reason: Option<String>,
    /// When refused: the roles that may make this call (empty: none).
    pub may: Vec<String>,
    /// The class of the call: the matching rule's, else that of the first rule matching the
    /// call that states one (the forge profile's, behind an operator's rule).
    pub class: Option<ToolClass>,
    /// The workflow action of the call, found the same way.
    pub action: Option<String>,
    /// The matching rule's origin.
    pub rule: Option<String>,
    /// The matching rule asks an operator about the call (`decision = "ask"`).
    pub ask: bool,
    /// The decision depends on what the call does, which is not established: why (a rule
    /// whose effect condition cannot be told). `permitted` is then false, and the call must
    /// not be decided on the rest: the gate refuses it as unestablished (`forge_unavailable`).
    pub undetermined: Option<String>,
}

/// An ordered rule set: the operator's rules, then a forge profile's.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RuleSet {
    rules: Vec<Rule>,
    /// Rules whose tool is a literal name, by that name (indices, ascending); the rest are
    /// globs, tried on every call.
    literal: HashMap<String, Vec<usize>>,
    globbed: Vec<usize>,
}

fn is_glob(pattern: &str) -> bool {
    pattern.contains(['*', '?'])
}

impl RuleSet {
    /// The rules, in the order they decide.
    pub fn new(rules: Vec<Rule>) -> Self {
        let mut literal: HashMap<String, Vec<usize>> = HashMap::new();
        let mut globbed = Vec::new();
        for (i, rule) in rules.iter().enumerate() {
            if is_glob(&rule.tool) {
                globbed.push(i);
            } else {
                literal.entry(rule.tool.clone()).or_default().push(i);
            }
        }
        Self { rules, literal, globbed }
    }

    /// Whether there are no rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The rules, in order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The rules whose glob names `tool`, in order.
    pub fn candidates(&self, tool: &str) -> Vec<&Rule> {
        let mut at: Vec<usize> = self.literal.get(tool).cloned().unwrap_or_default();
        at.extend(self.globbed.iter().copied().filter(|i| glob_match(&self.rules[*i].tool, tool)));
        at.sort_unstable();
        at.into_iter().map(|i| &self.rules[i]).collect()
    }

    /// What the rules say of calling `tool` with `arguments`, doing what `does` says: the
    /// rules that may decide it, in order (more than one only while an effect condition
    /// cannot be told), and `None` for the fallback no rule decides.
    fn possible(&self, tool: &str, arguments: Option<&Map<String, Value>>, does: Does<'_>) -> Vec<Option<&Rule>> {
        let mut out = Vec::new();
        for rule in self.candidates(tool) {
            match rule.matches(tool, arguments, does) {
                Some(true) => {
                    out.push(Some(rule));
                    return out;
                }
                None => out.push(Some(rule)),
                Some(false) => {}
            }
        }
        out.push(None);
        out
    }

    /// What the rules that read only the tool and its arguments say of calling `tool` with
    /// `arguments` (rules of what a call does left out).
    pub fn evaluate(&self, tool: &str, arguments: Option<&Map<String, Value>>) -> RuleVerdict<'_> {
        let candidates: Vec<&Rule> = self.candidates(tool).into_iter().filter(|r| r.effect.is_none()).collect();
        if candidates.is_empty() {
            return RuleVerdict::Unruled;
        }
        match candidates.iter().find(|r| r.matches(tool, arguments, Does::Unknown) == Some(true)) {
            Some(rule) => RuleVerdict::Matched(rule),
            None => RuleVerdict::Unmatched { candidates },
        }
    }

    /// The decision for `role` calling `tool` with `arguments`, with what the call does
    /// unknown; `None` when no rule names the tool (the role's globs decide).
    pub fn decide(&self, role: &str, tool: &str, arguments: Option<&Map<String, Value>>) -> Option<RuleDecision> {
        self.decide_with(role, tool, arguments, Does::Unknown, false)
    }

    /// The decision for `role` calling `tool` with `arguments`, doing what `does` says
    /// (`globs`: whether the role's globs permit the tool, for a call no rule decides); `None`
    /// when no rule decides it and none could (the globs decide). While an effect condition
    /// cannot be told, the outcomes it leaves open decide: all refusing the role, the first
    /// such refusal; all permitting it without asking, the first; else
    /// [`RuleDecision::undetermined`].
    pub fn decide_with(
        &self,
        role: &str,
        tool: &str,
        arguments: Option<&Map<String, Value>>,
        does: Does<'_>,
        globs: bool,
    ) -> Option<RuleDecision> {
        let candidates = self.candidates(tool);
        if candidates.is_empty() {
            return None;
        }
        // A rule with an effect condition does not name the tool: a call it does not match
        // falls to the next rules, and past them to the globs when no other rule names it.
        let named = candidates.iter().any(|r| r.effect.is_none());
        let possible = self.possible(tool, arguments, does);
        let one = |p: &Option<&Rule>| match p {
            Some(rule) => Some(self.matched(rule, role, tool, arguments, does)),
            None if named => Some(Self::unmatched(tool, arguments, &candidates)),
            None => None,
        };
        if let [only] = possible.as_slice() {
            return one(only);
        }
        let outcomes: Vec<(bool, bool)> =
            possible.iter().map(|p| one(p).map_or((globs, false), |d| (d.permitted, d.ask))).collect();
        let first = one(&possible[0]);
        if outcomes.iter().all(|(permitted, _)| !permitted) || outcomes.iter().all(|o| *o == (true, false)) {
            return first;
        }
        let rule = possible[0].expect("an undecided rule comes before the fallback");
        Some(RuleDecision {
            permitted: false,
            undetermined: Some(format!(
                "rule {} ({}) names what the call does, which is not established: who may make it depends on it",
                rule.origin,
                rule.describe()
            )),
            ask: false,
            ..first.unwrap_or_else(|| Self::unmatched(tool, arguments, &candidates))
        })
    }

    /// The decision of `rule`, which matched, for `role`.
    fn matched(
        &self,
        rule: &Rule,
        role: &str,
        tool: &str,
        arguments: Option<&Map<String, Value>>,
        does: Does<'_>,
    ) -> RuleDecision {
        let permitted = rule.admits(role);
        // What the call *is* — its class and its workflow action — is a fact of the call the
        // forge profile states, not a policy: an operator's rule that decides who may make it
        // (or asks about it) without saying otherwise keeps them. Else a rule that asks before
        // every merge would take the merge out of the PR workflow's hands.
        let stated = |of: fn(&Rule) -> bool| {
            self.candidates(tool).into_iter().find(|r| of(r) && r.matches(tool, arguments, does) == Some(true))
        };
        let class = rule.class.or_else(|| stated(|r| r.class.is_some()).and_then(|r| r.class));
        let action = rule.action.clone().or_else(|| stated(|r| r.action.is_some())?.action.clone());
        RuleDecision {
            permitted,
            reason: (!permitted).then(|| {
                let shown = shown_arguments(rule, arguments);
                format!(
                    "rule {} ({}) lets {} make this call{shown}; role {role} may not",
                    rule.origin,
                    rule.describe(),
                    who(&rule.roles)
                )
            }),
            may: if permitted { Vec::new() } else { rule.roles.clone() },
            class,
            action,
            rule: Some(rule.origin.clone()),
            ask: rule.ask,
            undetermined: None,
        }
    }

    /// The refusal of a call of a ruled tool that no rule matches.
    fn unmatched(tool: &str, arguments: Option<&Map<String, Value>>, candidates: &[&Rule]) -> RuleDecision {
        let pointers: Vec<&str> = candidates.iter().flat_map(|r| r.args.iter().map(|(p, _)| p.as_str())).collect();
        let given = describe_values(&pointers, arguments);
        RuleDecision {
            permitted: false,
            reason: Some(format!(
                "no rule for `{tool}` matches this call ({given}): {} rule(s) name the tool ({}), so it is refused \
                 for every role",
                candidates.len(),
                candidates.iter().map(|r| r.origin.as_str()).collect::<Vec<_>>().join(", ")
            )),
            may: Vec::new(),
            class: None,
            action: None,
            rule: None,
            ask: false,
            undetermined: None,
        }
    }

    /// Whether `role` may call `tool` with some arguments, and with which (the matchers of
    /// the rules that admit it, in order); `None` when no rule names the tool.
    pub fn allowed_for(&self, role: &str, tool: &str) -> Option<Vec<&Rule>> {
        // A rule of what a call does names no tool: it changes no listing.
        let candidates: Vec<&Rule> = self.candidates(tool).into_iter().filter(|r| r.effect.is_none()).collect();
        if candidates.is_empty() {
            return None;
        }
        Some(candidates.into_iter().filter(|r| r.admits(role)).collect())
    }

    /// Refuse a set whose rule among the first `own` can never decide (an earlier one
    /// matches every call it matches), naming both. Only the first `own` rules are checked:
    /// they are the operator's, and a forge profile's rules after them may well be
    /// overridden by them — that is what operator rules are for.
    pub fn check(&self, own: usize) -> Result<(), RuleError> {
        for (i, rule) in self.rules.iter().enumerate().take(own) {
            if let Some(earlier) = self.rules[..i].iter().find(|e| rule.shadowed_by(e)) {
                return Err(RuleError {
                    origin: rule.origin.clone(),
                    reason: format!(
                        "this rule ({}) can never decide: the earlier rule {} ({}) matches every call it matches",
                        rule.describe(),
                        earlier.origin,
                        earlier.describe()
                    ),
                });
            }
        }
        Ok(())
    }
}

/// One rule as a diff shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RuleShown {
    /// Its origin in its file.
    pub origin: String,
    /// Its condition in words.
    pub when: String,
    /// Who may make such a call.
    pub roles: Vec<String>,
}

impl RuleShown {
    fn of(rule: &Rule) -> Self {
        Self { origin: rule.origin.clone(), when: rule.describe(), roles: rule.roles.clone() }
    }
}

/// A rule whose condition both sets have, with other terms.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RuleChanged {
    /// As the old set has it.
    pub old: RuleShown,
    /// As the new set has it.
    pub new: RuleShown,
    /// What changed: `roles`, `class`, `action`, `order`.
    pub what: Vec<&'static str>,
}

/// Two rule sets compared without traffic (`fleetgate rules diff`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RulesDiff {
    /// In the new set only (by condition: tool and arguments).
    pub added: Vec<RuleShown>,
    /// In the old set only.
    pub removed: Vec<RuleShown>,
    /// In both, with other roles, class or action, or at another place in the order.
    pub changed: Vec<RuleChanged>,
    /// Rules of the new set that can never decide: an earlier rule matches every call they
    /// match (the operator's own are refused at load; a profile's may be shadowed by an
    /// operator's, which then decides who may — the invariants still hold below both).
    pub shadowed: Vec<(RuleShown, RuleShown)>,
    /// The invariants the new roster lifts (`[invariants] lift`, `independent_review =
    /// "off"`): every one, changed or not.
    pub lifted: Vec<String>,
    /// Lifted in the new roster, not in the old.
    pub lifts_added: Vec<String>,
    /// Lifted in the old roster, not in the new.
    pub lifts_removed: Vec<String>,
}

impl RulesDiff {
    /// Nothing differs.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty()
            && self.removed.is_empty()
            && self.changed.is_empty()
            && self.lifts_added.is_empty()
            && self.lifts_removed.is_empty()
    }

    /// The same diff, with the invariants each roster lifts compared.
    #[must_use]
    pub fn with_lifts(mut self, old: &[crate::effect::Invariant], new: &[crate::effect::Invariant]) -> Self {
        let names = |l: &[crate::effect::Invariant]| l.iter().map(|i| i.as_str().to_owned()).collect::<Vec<_>>();
        self.lifted = names(new);
        self.lifts_added = names(&new.iter().copied().filter(|i| !old.contains(i)).collect::<Vec<_>>());
        self.lifts_removed = names(&old.iter().copied().filter(|i| !new.contains(i)).collect::<Vec<_>>());
        self
    }

    /// The diff in words.
    pub fn text(&self) -> String {
        let shown = |r: &RuleShown| format!("{} {} → {}", r.origin, r.when, who(&r.roles));
        let mut out = Vec::new();
        out.extend(self.added.iter().map(|r| format!("+ {}", shown(r))));
        out.extend(self.removed.iter().map(|r| format!("- {}", shown(r))));
        out.extend(
            self.changed.iter().map(|c| format!("~ {} ({}): was {}", shown(&c.new), c.what.join(", "), shown(&c.old))),
        );
        out.extend(
            self.shadowed.iter().map(|(r, by)| format!("! {} can never decide: {} comes first", shown(r), by.origin)),
        );
        out.extend(self.lifts_added.iter().map(|l| format!("+ [invariants] lift {l}: the invariant no longer holds")));
        out.extend(self.lifts_removed.iter().map(|l| format!("- [invariants] lift {l}: the invariant holds again")));
        if self.is_empty() {
            out.push("the rules are the same".to_owned());
        }
        for l in &self.lifted {
            let exposes = crate::effect::Invariant::parse(l).map_or("", |i| i.exposes());
            out.push(format!("note: invariant {l} is lifted: {exposes}"));
        }
        crate::text::terminal_text(&out.join("\n"))
    }
}

/// `old` and `new` compared rule by rule: a rule is known by its condition (the tool glob
/// and the argument matchers), not by where it sits in its file. Two rules of one set with
/// one condition (an operator's rule restating a profile's) are told apart by their order:
/// the k-th of a condition in `new` is compared with the k-th in `old`.
pub fn diff(old: &RuleSet, new: &RuleSet) -> RulesDiff {
    type Key = (String, Vec<String>);
    let key = |r: &Rule| -> Key {
        let mut conditions: Vec<String> = r.args.iter().map(|(p, m)| format!("{p} {m}")).collect();
        conditions.extend(r.effect.as_ref().map(|e| format!("doing {e}")));
        (r.tool.clone(), conditions)
    };
    // Each rule's (condition, occurrence of that condition so far).
    let keyed = |set: &RuleSet| -> Vec<(Key, usize)> {
        let mut seen: Vec<Key> = Vec::new();
        set.rules
            .iter()
            .map(|r| {
                let k = key(r);
                let n = seen.iter().filter(|s| **s == k).count();
                seen.push(k.clone());
                (k, n)
            })
            .collect()
    };
    let (old_keys, new_keys) = (keyed(old), keyed(new));
    let count = |keys: &[(Key, usize)], k: &Key| keys.iter().filter(|(o, _)| o == k).count();
    // The conditions of the rules that may decide a call before `at`: their order matters.
    let ahead = |set: &RuleSet, keys: &[(Key, usize)], at: usize| {
        let r = &set.rules[at];
        set.rules[..at]
            .iter()
            .zip(keys)
            .filter(|(e, _)| glob_match(&e.tool, &r.tool) || glob_match(&r.tool, &e.tool))
            .map(|(_, k)| k.clone())
            .collect::<Vec<_>>()
    };
    let mut out = RulesDiff::default();
    for (i, rule) in new.rules.iter().enumerate() {
        match old_keys.iter().position(|k| *k == new_keys[i]) {
            None => out.added.push(RuleShown::of(rule)),
            Some(j) => {
                let before = &old.rules[j];
                let mut what = Vec::new();
                if before.roles != rule.roles {
                    what.push("roles");
                }
                if before.class != rule.class {
                    what.push("class");
                }
                if before.action != rule.action {
                    what.push("action");
                }
                if before.ask != rule.ask {
                    what.push("decision");
                }
                // Another place among the rules that name the same tools: it may decide
                // calls an earlier one used to, or the other way round.
                let k = &new_keys[i].0;
                if ahead(old, &old_keys, j) != ahead(new, &new_keys, i) || count(&old_keys, k) != count(&new_keys, k) {
                    what.push("order");
                }
                if !what.is_empty() {
                    out.changed.push(RuleChanged { old: RuleShown::of(before), new: RuleShown::of(rule), what });
                }
            }
        }
        if let Some(earlier) = new.rules[..i].iter().find(|e| rule.shadowed_by(e)) {
            out.shadowed.push((RuleShown::of(rule), RuleShown::of(earlier)));
        }
    }
    for (j, rule) in old.rules.iter().enumerate() {
        if !new_keys.contains(&old_keys[j]) {
            out.removed.push(RuleShown::of(rule));
        }
    }
    out
}

fn who(roles: &[String]) -> String {
    match roles {
        [] => "no role".to_owned(),
        r if r.iter().any(|x| x == "*") => "every role".to_owned(),
        [one] => format!("only the {one} role"),
        many => format!("only the roles {}", many.join(", ")),
    }
}

/// `(/method = "merge")` for the arguments a rule looked at.
fn shown_arguments(rule: &Rule, arguments: Option<&Map<String, Value>>) -> String {
    let pointers: Vec<&str> = rule.args.iter().map(|(p, _)| p.as_str()).collect();
    if pointers.is_empty() { String::new() } else { format!(" ({})", describe_values(&pointers, arguments)) }
}

fn describe_values(pointers: &[&str], arguments: Option<&Map<String, Value>>) -> String {
    let mut seen: Vec<&str> = Vec::new();
    let mut parts = Vec::new();
    for p in pointers {
        if seen.contains(p) {
            continue;
        }
        seen.push(p);
        parts.push(match lookup(arguments, p) {
            Some(v) => format!("{p} = {}", shorten(v)),
            None => format!("{p} absent"),
        });
    }
    if parts.is_empty() { "no arguments examined".to_owned() } else { parts.join(", ") }
}

/// A value as a reason may quote it: scalars whole (bounded), structures by kind.
fn shorten(v: &Value) -> String {
    match v {
        Value::String(s) if s.chars().count() > 64 => format!("{:?}…", s.chars().take(64).collect::<String>()),
        Value::Array(_) => "an array".to_owned(),
        Value::Object(_) => "an object".to_owned(),
        other => other.to_string(),
    }
}

mod effect;
#[cfg(test)]
mod tests;
