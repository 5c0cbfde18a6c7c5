//! Replay: the fleet's own audited `tools/call` decisions judged again by another rule set
//! (`fleetgate rules test`), with the same pure role policy the gate applies live — the
//! rules when one names the tool (the first matching decides), else the role's globs.
//!
//! Replay judges what the rules decide and nothing else. A decision it cannot judge is
//! reported as such, never guessed: the arguments were not kept (or a rule reads one that
//! was kept only as its digest), the profile is not in the new roster, or the new rules
//! would let a call through whose fate then rests on what replay does not invent — the
//! fleet's health, the caller's session, the PR workflow (a call that needs that evidence,
//! or one the new rules give another class or workflow action).

use crate::audit::{AuditEntry, JudgedCall, KeptArguments, is_digested};
use crate::blocker::BlockerKind;
use crate::capability::{RolePolicy, ToolClass};
use crate::rules::{RuleSet, lookup};
use crate::runtime::RosterMember;
use crate::time::Timestamp;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Examples kept per group of a report.
pub const EXAMPLES: usize = 3;

/// The rule set a history is judged against.
#[derive(Clone, Copy, Debug)]
pub struct ReplayRules<'a> {
    /// The roster: a profile's role.
    pub members: &'a [RosterMember],
    /// `[roles.<role>]` globs.
    pub roles: &'a BTreeMap<String, RolePolicy>,
    /// The rules, in order.
    pub rules: &'a RuleSet,
    /// Their digest (`FleetConfig::rules_digest`): a decision made by this very rule set,
    /// for the same role, is the same decision.
    pub digest: &'a str,
    /// Under a forge profile: the invariants, judged on what each call does as far as its
    /// arguments say (a call whose effect needs a read of the forge rests on live conditions).
    pub invariants: Option<ReplayInvariants<'a>>,
}

/// What the invariants of a replayed roster are judged with.
#[derive(Clone, Copy, Debug)]
pub struct ReplayInvariants<'a> {
    /// The roster's forge dialect.
    pub dialect: &'a dyn crate::dialect::Dialect,
    /// The protected branches and paths.
    pub protection: &'a crate::protect::Protection,
    /// The invariants the roster lifts.
    pub lifted: &'a [crate::effect::Invariant],
}

/// A decision's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Allowed.
    Allowed,
    /// Refused.
    Refused,
}

/// Why a decision cannot be judged again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unjudged {
    /// A rule naming the tool reads its arguments, which were not kept (`[audit]
    /// arguments` `digest` or `off`, or over the bound).
    ArgumentsNotKept,
    /// A rule reads an argument that was kept only as its digest (a string over 4 KiB).
    ArgumentDigested,
    /// The profile is not a member of the new roster.
    ProfileNotInRoster,
    /// The new rules would let the call through, and whether it then passes depends on
    /// the fleet's health, the session or the PR workflow.
    LiveConditions,
    /// A new rule names what the call does, which its kept arguments alone do not show (it
    /// needs a read of the forge, or the dialect has no statement for it).
    EffectNotEvident,
}

impl Unjudged {
    /// In words.
    pub fn describe(self) -> &'static str {
        match self {
            Self::ArgumentsNotKept => "the rules read the call's arguments, which the audit did not keep",
            Self::ArgumentDigested => "a rule reads an argument the audit kept only as its digest",
            Self::ProfileNotInRoster => "the profile is not in the new roster",
            Self::LiveConditions => {
                "the new rules would let it through; whether it passes then depends on the fleet's health, the \
                 session or the PR workflow, which replay does not invent"
            }
            Self::EffectNotEvident => {
                "a rule names what the call does, which its arguments alone do not show (the live gate reads the \
                 forge for it)"
            }
        }
    }
}

/// One decision judged again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rejudged {
    /// Not a `tools/call` decision with its call kept (another event of the log, or a
    /// decision recorded before the audit kept calls).
    NotACall,
    /// The same outcome.
    Same,
    /// The other outcome, by `by` (a rule's origin, `[roles.<role>]`, or `no rule matches`).
    Flip {
        /// The new outcome.
        to: Outcome,
        /// What decides it under the new rules.
        by: String,
    },
    /// Cannot be judged.
    Unjudged(Unjudged),
}

/// What the new rules say of one call: permitted, the class and action they give it, and
/// what decided.
struct Said {
    permitted: bool,
    /// `None`: the tool's own class, which the log does not keep when a rule overrode it.
    class: Option<ToolClass>,
    action: Option<String>,
    by: String,
    rule: Option<String>,
}

fn say(new: &ReplayRules<'_>, role: &str, tool: &str, call: &JudgedCall) -> Result<Said, Unjudged> {
    let candidates = new.rules.candidates(tool);
    // The tool's own class: recorded, or the judged one when no rule decided then.
    let own_class = call.tool_class.or_else(|| call.rule.is_none().then_some(call.class));
    if candidates.is_empty() {
        return Ok(Said {
            permitted: new.roles.get(role).cloned().unwrap_or_default().permits(tool),
            class: own_class,
            action: None,
            by: format!("[roles.{role}]"),
            rule: None,
        });
    }
    // Arguments are needed only when a rule naming the tool reads one.
    let reads_arguments = candidates.iter().any(|r| !r.args.is_empty());
    let arguments: Option<&Map<String, Value>> = match &call.arguments {
        KeptArguments::Full { arguments } => arguments.as_ref(),
        _ if !reads_arguments => None,
        KeptArguments::Digest { .. } | KeptArguments::Off => return Err(Unjudged::ArgumentsNotKept),
    };
    let digested = candidates
        .iter()
        .flat_map(|r| r.args.iter().map(|(pointer, _)| pointer.as_str()))
        .any(|pointer| lookup(arguments, pointer).is_some_and(is_digested));
    if digested {
        return Err(Unjudged::ArgumentDigested);
    }
    // What the call does, when its arguments alone say it (no read of the forge needed).
    let globs = new.roles.get(role).cloned().unwrap_or_default().permits(tool);
    let ops = new.invariants.and_then(|inv| {
        let empty = Map::new();
        let args = arguments.unwrap_or(&empty);
        let effect = inv.dialect.establish(tool, args, None, &crate::dialect::Unlisted, &[]).ok()?;
        let pr = inv.dialect.pr_target(tool, args).map(|t| t.pr);
        crate::rules::operations(&effect, pr, inv.protection)
    });
    let does = ops.as_deref().map_or(crate::rules::Does::Unknown, crate::rules::Does::Known);
    let Some(decided) = new.rules.decide_with(role, tool, arguments, does, globs) else {
        return Ok(Said {
            permitted: globs,
            class: own_class,
            action: None,
            by: format!("[roles.{role}]"),
            rule: None,
        });
    };
    if decided.undetermined.is_some() {
        return Err(Unjudged::EffectNotEvident);
    }
    Ok(Said {
        permitted: decided.permitted,
        class: decided.class.or(own_class),
        action: decided.action,
        by: decided.rule.clone().unwrap_or_else(|| "no rule matches".to_owned()),
        rule: decided.rule,
    })
}

/// The first invariant `call` breaks, as far as its kept arguments say; `None` when it breaks
/// none that its arguments show (one that needs a read of the forge is judged live).
fn breach(
    inv: ReplayInvariants<'_>,
    role: &str,
    tool: &str,
    call: &JudgedCall,
) -> Result<Option<crate::effect::Invariant>, Unjudged> {
    let empty = Map::new();
    let arguments = match &call.arguments {
        KeptArguments::Full { arguments } => arguments.as_ref().unwrap_or(&empty),
        KeptArguments::Digest { .. } | KeptArguments::Off => return Err(Unjudged::ArgumentsNotKept),
    };
    let effect = inv.dialect.evident(tool, arguments, None);
    if !effect.unestablished.is_empty() {
        return Ok(None);
    }
    let judged = crate::effect::judge(&effect, role, inv.protection, inv.lifted);
    Ok(judged.breaches.first().map(|b| b.invariant))
}

/// `entry` judged again by `new`.
pub fn rejudge(entry: &AuditEntry, new: &ReplayRules<'_>) -> Rejudged {
    let Some(call) = &entry.call else { return Rejudged::NotACall };
    let Some(member) = new.members.iter().find(|m| m.profile == entry.profile) else {
        return Rejudged::Unjudged(Unjudged::ProfileNotInRoster);
    };
    let role = member.role.as_str();
    // The very rule set that decided, for the same role: the same decision.
    if call.rules == new.digest && call.role == role {
        return Rejudged::Same;
    }
    // The invariants, on what the call does as far as its arguments say: a breach refuses it
    // whatever the rules.
    if let Some(inv) = new.invariants {
        match breach(inv, role, &entry.tool, call) {
            Ok(Some(invariant)) if entry.allowed => {
                return Rejudged::Flip { to: Outcome::Refused, by: format!("invariant `{invariant}`") };
            }
            Ok(Some(_)) => return Rejudged::Same,
            Ok(None) => {}
            Err(why) => return Rejudged::Unjudged(why),
        }
    }
    let said = match say(new, role, &entry.tool, call) {
        Ok(said) => said,
        Err(why) => return Rejudged::Unjudged(why),
    };
    // Refused then by its role, or by an invariant the new roster no longer breaches: a
    // refusal of policy, which the new policy may lift.
    let by_role = [BlockerKind::RoleNotPermitted, BlockerKind::InvariantViolated, BlockerKind::ProtectedBranch]
        .iter()
        .any(|k| entry.blocker_kind.as_deref() == Some(k.as_str()));
    // Permitted under a class or action other than the one judged then: the conditions
    // that class or action brings were not (or differently) judged.
    let same_terms = said.class == Some(call.class) && (said.action.is_none() || said.rule == call.rule);
    match (entry.allowed, said.permitted) {
        (true, false) => Rejudged::Flip { to: Outcome::Refused, by: said.by },
        (true, true) if same_terms || (said.class == Some(ToolClass::ReadOnly) && said.action.is_none()) => {
            Rejudged::Same
        }
        (true, true) => Rejudged::Unjudged(Unjudged::LiveConditions),
        (false, false) => Rejudged::Same,
        // Refused by its role then, permitted now: a read-only call with no workflow action
        // needs nothing else; anything else rests on the live conditions.
        (false, true) if by_role && said.class == Some(ToolClass::ReadOnly) && said.action.is_none() => {
            Rejudged::Flip { to: Outcome::Allowed, by: said.by }
        }
        (false, true) if by_role => Rejudged::Unjudged(Unjudged::LiveConditions),
        // Refused by a condition the rules do not decide: it still holds, unless the rules
        // now give the call other terms.
        (false, true) if same_terms => Rejudged::Same,
        (false, true) => Rejudged::Unjudged(Unjudged::LiveConditions),
    }
}

/// One decision, as a report shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Example {
    /// The audit entry's id.
    pub id: Option<i64>,
    /// When it was decided.
    pub at: Timestamp,
    /// The deciding server's profile.
    pub profile: String,
    /// The worker it was made for.
    pub worker: Option<String>,
    /// The blocker then, when refused.
    pub blocker: Option<String>,
    /// The arguments as kept.
    pub arguments: Option<Value>,
}

impl Example {
    fn of(entry: &AuditEntry) -> Self {
        Self {
            id: entry.id,
            at: entry.at,
            profile: entry.profile.clone(),
            worker: entry.worker_identity.clone(),
            blocker: entry.blocker_kind.clone(),
            arguments: entry.call.as_ref().and_then(|c| serde_json::to_value(&c.arguments).ok()),
        }
    }
}

/// Decisions that flip, by new rule and tool.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FlipGroup {
    /// The outcome then.
    pub from: Outcome,
    /// The outcome under the new rules.
    pub to: Outcome,
    /// What decides under the new rules.
    pub rule: String,
    /// The tool.
    pub tool: String,
    /// How many decisions.
    pub count: usize,
    /// The first [`EXAMPLES`] of them.
    pub examples: Vec<Example>,
}

/// Decisions replay cannot judge, by why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct UnjudgedGroup {
    /// Why (a literal).
    pub why: Unjudged,
    /// In words.
    pub reason: &'static str,
    /// How many decisions.
    pub count: usize,
    /// The first [`EXAMPLES`] of them.
    pub examples: Vec<Example>,
}

/// A history judged again.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ReplayReport {
    /// `tools/call` decisions with their call kept.
    pub decisions: usize,
    /// Of them, the same outcome.
    pub same: usize,
    /// Of them, the other outcome.
    pub flipped: usize,
    /// Entries that are not such decisions (the log's other events, or decisions
    /// recorded before the audit kept calls).
    pub not_calls: usize,
    /// The flips, by (from, to, rule, tool).
    pub flips: Vec<FlipGroup>,
    /// What could not be judged, by why.
    pub unjudged: Vec<UnjudgedGroup>,
}

impl Example {
    /// One line: the entry, its worker and what it was called with (escaped, cut).
    fn line(&self) -> String {
        let id = self.id.map_or_else(|| "-".to_owned(), |id| format!("#{id}"));
        let arguments = match &self.arguments {
            Some(Value::Object(kept)) if kept.get("kept") == Some(&Value::from("full")) => {
                kept.get("arguments").map_or_else(|| "(no arguments)".to_owned(), Value::to_string)
            }
            Some(other) => other.to_string(),
            None => "-".to_owned(),
        };
        let line = format!(
            "{id} {} {} {}{} {arguments}",
            self.at,
            self.profile,
            self.worker.as_deref().unwrap_or("-"),
            self.blocker.as_deref().map(|b| format!(" ({b})")).unwrap_or_default()
        );
        crate::text::shown(&line, 200)
    }
}

impl Outcome {
    fn word(self) -> &'static str {
        match self {
            Self::Allowed => "allowed",
            Self::Refused => "refused",
        }
    }
}

impl ReplayReport {
    /// The report in words, under `header`.
    pub fn text(&self, header: &str) -> String {
        let unjudged: usize = self.unjudged.iter().map(|g| g.count).sum();
        let mut out = vec![
            header.to_owned(),
            format!(
                "{} decision(s): {} the same, {} would flip, {unjudged} cannot be judged; {} other entr(ies) skipped",
                self.decisions, self.same, self.flipped, self.not_calls
            ),
        ];
        for g in &self.flips {
            out.push(format!(
                "{} → {}  {}  by {}: {}",
                g.from.word(),
                g.to.word(),
                crate::text::shown(&g.tool, 80),
                crate::text::shown(&g.rule, 80),
                g.count
            ));
            out.extend(g.examples.iter().map(|e| format!("    {}", e.line())));
        }
        for g in &self.unjudged {
            out.push(format!("cannot judge ({}): {}", g.count, g.reason));
            out.extend(g.examples.iter().map(|e| format!("    {}", e.line())));
        }
        if self.flipped == 0 {
            out.push("nothing flips".to_owned());
        }
        out.join("\n")
    }
}

/// Every entry of `history` judged again by `new`.
pub fn replay<E: std::borrow::Borrow<AuditEntry>>(
    history: impl IntoIterator<Item = E>,
    new: &ReplayRules<'_>,
) -> ReplayReport {
    let mut report = ReplayReport::default();
    let mut flips: BTreeMap<(Outcome, Outcome, String, String), FlipGroup> = BTreeMap::new();
    let mut unjudged: BTreeMap<Unjudged, UnjudgedGroup> = BTreeMap::new();
    for entry in history {
        let entry = entry.borrow();
        let rejudged = rejudge(entry, new);
        if rejudged == Rejudged::NotACall {
            report.not_calls += 1;
            continue;
        }
        report.decisions += 1;
        match rejudged {
            Rejudged::NotACall => {}
            Rejudged::Same => report.same += 1,
            Rejudged::Flip { to, by } => {
                report.flipped += 1;
                let from = if entry.allowed { Outcome::Allowed } else { Outcome::Refused };
                let group = flips.entry((from, to, by.clone(), entry.tool.clone())).or_insert_with(|| FlipGroup {
                    from,
                    to,
                    rule: by,
                    tool: entry.tool.clone(),
                    count: 0,
                    examples: Vec::new(),
                });
                group.count += 1;
                if group.examples.len() < EXAMPLES {
                    group.examples.push(Example::of(entry));
                }
            }
            Rejudged::Unjudged(why) => {
                let group = unjudged.entry(why).or_insert_with(|| UnjudgedGroup {
                    why,
                    reason: why.describe(),
                    count: 0,
                    examples: Vec::new(),
                });
                group.count += 1;
                if group.examples.len() < EXAMPLES {
                    group.examples.push(Example::of(entry));
                }
            }
        }
    }
    report.flips = flips.into_values().collect();
    report.unjudged = unjudged.into_values().collect();
    report
}
