//! Replay (`fleetgate rules test`): a history judged again by another rule set. A history is
//! made here the way the gate makes one — the role policy of each call decides, a permitted
//! mutating call may still be refused by the fleet — and replayed.

use fleetgate_core::Timestamp;
use fleetgate_core::audit::{ArgumentsMode, AuditEntry, JudgedCall, KeptArguments, keep_arguments};
use fleetgate_core::capability::{RolePolicy, ToolClass};
use fleetgate_core::replay::{Outcome, ReplayRules, Unjudged, replay};
use fleetgate_core::rules::{ArgMatch, Rule, RuleSet};
use fleetgate_core::runtime::RosterMember;
use proptest::prelude::*;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

const TOOLS: [&str; 4] = ["pull_request_write", "issue_write", "get_file_contents", "delete_branch"];
const METHODS: [&str; 3] = ["merge", "create", "close"];
const ROLES: [&str; 3] = ["author", "reviewer", "merger"];

fn members() -> Vec<RosterMember> {
    ROLES
        .iter()
        .map(|r| RosterMember {
            namespace: format!("gitea-{r}"),
            profile: format!("prgs-{r}"),
            role: (*r).into(),
            replicas: 1,
        })
        .collect()
}

fn rule(origin: &str, tool: &str, methods: &[&str], roles: &[&str], class: Option<ToolClass>) -> Rule {
    Rule {
        origin: origin.into(),
        tool: tool.into(),
        args: if methods.is_empty() {
            Vec::new()
        } else {
            vec![("/method".into(), ArgMatch::OneOf(methods.iter().map(|m| Value::from(*m)).collect()))]
        },
        effect: None,
        roles: roles.iter().map(|r| (*r).to_owned()).collect(),
        class,
        action: None,
        ask: false,
        approvers: Vec::new(),
        required: 0,
    }
}

/// What the gate records for `role` calling `tool` with `args` under `rules`/`roles`:
/// allowed when permitted, unless `fleet_down` refuses a permitted mutating call.
fn decided(
    id: i64,
    set: &ReplayRules<'_>,
    role: &str,
    tool: &str,
    args: &Map<String, Value>,
    own_class: ToolClass,
    fleet_down: bool,
) -> AuditEntry {
    let (permitted, class, rule) = match set.rules.decide(role, tool, Some(args)) {
        Some(d) => (d.permitted, d.class.unwrap_or(own_class), d.rule),
        None => (set.roles.get(role).cloned().unwrap_or_default().permits(tool), own_class, None),
    };
    let (allowed, blocker) = if !permitted {
        (false, Some("role_not_permitted"))
    } else if fleet_down && class == ToolClass::Mutating {
        (false, Some("fleet_inventory_blocked"))
    } else {
        (true, None)
    };
    AuditEntry {
        id: Some(id),
        at: Timestamp::from_unix(1_800_000_000 + id),
        profile: format!("prgs-{role}"),
        worker_identity: Some(format!("wrk-{role}")),
        tool: tool.into(),
        allowed,
        blocker_kind: blocker.map(str::to_owned),
        reasons: Vec::new(),
        principal: None,
        call: Some(Box::new(JudgedCall {
            role: role.into(),
            class,
            tool_class: Some(own_class),
            rule,
            rules: set.digest.into(),
            arguments: keep_arguments(Some(args), ArgumentsMode::Full),
        })),
    }
}

fn method(m: &str) -> Map<String, Value> {
    json!({ "method": m, "owner": "o", "repo": "r" }).as_object().cloned().unwrap()
}

#[test]
fn a_changed_rule_set_lists_exactly_the_flips_computed_by_hand() {
    let members = members();
    let roles = BTreeMap::new();
    let old_rules = RuleSet::new(vec![
        rule("old:merge", "pull_request_write", &["merge"], &["merger"], Some(ToolClass::Mutating)),
        rule("old:rest", "pull_request_write", &["create", "close"], &["author"], Some(ToolClass::Mutating)),
        rule("old:read", "get_file_contents", &[], &["*"], Some(ToolClass::ReadOnly)),
    ]);
    let old =
        ReplayRules { members: &members, roles: &roles, rules: &old_rules, digest: "sha256:old", invariants: None };
    let history = vec![
        decided(1, &old, "merger", "pull_request_write", &method("merge"), ToolClass::Mutating, false), // allowed
        decided(2, &old, "author", "pull_request_write", &method("merge"), ToolClass::Mutating, false), // refused: role
        decided(3, &old, "author", "pull_request_write", &method("close"), ToolClass::Mutating, false), // allowed
        decided(4, &old, "reviewer", "get_file_contents", &method("x"), ToolClass::ReadOnly, false),    // allowed
        decided(5, &old, "author", "pull_request_write", &method("create"), ToolClass::Mutating, true), // refused: fleet
    ];
    assert_eq!(
        history.iter().map(|e| (e.allowed, e.blocker_kind.as_deref())).collect::<Vec<_>>(),
        [
            (true, None),
            (false, Some("role_not_permitted")),
            (true, None),
            (true, None),
            (false, Some("fleet_inventory_blocked"))
        ]
    );
    // The new rules: closing becomes the merger's; reading is the author's only.
    let new_rules = RuleSet::new(vec![
        rule("new:merge", "pull_request_write", &["merge", "close"], &["merger"], Some(ToolClass::Mutating)),
        rule("new:create", "pull_request_write", &["create"], &["author"], Some(ToolClass::Mutating)),
        rule("new:read", "get_file_contents", &[], &["author"], Some(ToolClass::ReadOnly)),
    ]);
    let new =
        ReplayRules { members: &members, roles: &roles, rules: &new_rules, digest: "sha256:new", invariants: None };
    let report = replay(&history, &new);
    // By hand: 1 same (merger merges); 2 same (still refused); 3 flips to refused by
    // new:merge; 4 flips to refused by new:read; 5 same (refused by the fleet, its terms
    // unchanged).
    assert_eq!((report.decisions, report.same, report.flipped), (5, 3, 2), "{report:#?}");
    type Flip<'a> = (Outcome, Outcome, &'a str, &'a str, usize, Option<i64>);
    let flips: Vec<Flip<'_>> = report
        .flips
        .iter()
        .map(|g| (g.from, g.to, g.rule.as_str(), g.tool.as_str(), g.count, g.examples[0].id))
        .collect();
    assert_eq!(
        flips,
        [
            (Outcome::Allowed, Outcome::Refused, "new:merge", "pull_request_write", 1, Some(3)),
            (Outcome::Allowed, Outcome::Refused, "new:read", "get_file_contents", 1, Some(4)),
        ]
    );
    assert!(report.unjudged.is_empty(), "{:?}", report.unjudged);
}

#[test]
fn what_replay_cannot_judge_is_reported_never_guessed() {
    let members = members();
    let roles = BTreeMap::new();
    let rules = RuleSet::new(vec![rule("r:merge", "pull_request_write", &["merge"], &["merger"], None)]);
    let old = ReplayRules { members: &members, roles: &roles, rules: &rules, digest: "sha256:old", invariants: None };
    let mut digested = decided(1, &old, "merger", "pull_request_write", &method("merge"), ToolClass::Mutating, false);
    digested.call.as_mut().unwrap().arguments = KeptArguments::Digest { sha256: "ab".into(), bytes: 9 };
    let mut off = decided(2, &old, "merger", "pull_request_write", &method("merge"), ToolClass::Mutating, false);
    off.call.as_mut().unwrap().arguments = KeptArguments::Off;
    let long = "m".repeat(fleetgate_core::audit::MAX_KEPT_STRING + 1);
    let long_method = json!({ "method": long }).as_object().cloned().unwrap();
    let mut long_entry = decided(3, &old, "merger", "pull_request_write", &method("merge"), ToolClass::Mutating, false);
    long_entry.call.as_mut().unwrap().arguments = keep_arguments(Some(&long_method), ArgumentsMode::Full);
    let mut stranger = decided(4, &old, "merger", "pull_request_write", &method("merge"), ToolClass::Mutating, false);
    stranger.profile = "prgs-gone".into();
    // Refused by role then; an author may merge under the new rules: its fate rests on the fleet.
    let refused = decided(5, &old, "author", "pull_request_write", &method("merge"), ToolClass::Mutating, false);
    let mut event = decided(6, &old, "merger", "pull_request_write", &method("merge"), ToolClass::Mutating, false);
    event.call = None;
    // Without a rule for the tool, the arguments are not needed: judged by the role globs.
    let mut unruled = decided(7, &old, "author", "delete_branch", &method("x"), ToolClass::Mutating, false);
    unruled.call.as_mut().unwrap().arguments = KeptArguments::Off;

    let new_rules = RuleSet::new(vec![rule("n:merge", "pull_request_write", &["merge"], &["merger", "author"], None)]);
    let mut new_roles = BTreeMap::new();
    new_roles.insert("author".to_owned(), RolePolicy { allow: None, deny: vec!["delete_*".into()] });
    let new =
        ReplayRules { members: &members, roles: &new_roles, rules: &new_rules, digest: "sha256:new", invariants: None };
    let history = [digested, off, long_entry, stranger, refused, event, unruled];
    let report = replay(&history, &new);
    let why: Vec<(Unjudged, usize)> = report.unjudged.iter().map(|g| (g.why, g.count)).collect();
    assert_eq!(
        why,
        [
            (Unjudged::ArgumentsNotKept, 2),
            (Unjudged::ArgumentDigested, 1),
            (Unjudged::ProfileNotInRoster, 1),
            (Unjudged::LiveConditions, 1)
        ],
        "{report:#?}"
    );
    assert_eq!(report.not_calls, 1);
    assert_eq!(
        (report.flipped, report.flips[0].rule.as_str(), report.flips[0].examples[0].id),
        (1, "[roles.author]", Some(7))
    );
}

fn arb_rule(i: usize) -> impl Strategy<Value = Rule> {
    (
        0..TOOLS.len(),
        prop::sample::subsequence(METHODS.to_vec(), 0..=2),
        prop::sample::subsequence(ROLES.to_vec(), 0..=3),
        prop_oneof![Just(None), Just(Some(ToolClass::ReadOnly)), Just(Some(ToolClass::Mutating))],
    )
        .prop_map(move |(tool, methods, roles, class)| rule(&format!("r{i}"), TOOLS[tool], &methods, &roles, class))
}

fn arb_rules() -> impl Strategy<Value = Vec<Rule>> {
    (0usize..5).prop_flat_map(|n| (0..n).map(arb_rule).collect::<Vec<_>>())
}

fn arb_roles() -> impl Strategy<Value = BTreeMap<String, RolePolicy>> {
    prop::collection::btree_map(
        prop::sample::select(ROLES.to_vec()).prop_map(str::to_owned),
        prop::sample::subsequence(TOOLS.to_vec(), 0..=2)
            .prop_map(|deny| RolePolicy { allow: None, deny: deny.into_iter().map(str::to_owned).collect() }),
        0..=3,
    )
}

type Call = (usize, usize, usize, bool, bool);

fn arb_calls() -> impl Strategy<Value = Vec<Call>> {
    prop::collection::vec((0..ROLES.len(), 0..TOOLS.len(), 0..METHODS.len(), any::<bool>(), any::<bool>()), 1..40)
}

fn history(set: &ReplayRules<'_>, calls: &[Call]) -> Vec<AuditEntry> {
    calls
        .iter()
        .enumerate()
        .map(|(i, &(role, tool, m, read_only, fleet_down))| {
            let class = if read_only { ToolClass::ReadOnly } else { ToolClass::Mutating };
            decided(i as i64 + 1, set, ROLES[role], TOOLS[tool], &method(METHODS[m]), class, fleet_down)
        })
        .collect()
}

proptest! {
    /// Replaying a history against the rule set that produced it flips nothing — judged on
    /// its merits, not by the digest shortcut (the replay is given another digest).
    #[test]
    fn the_rule_set_that_made_a_history_flips_none_of_it(rules in arb_rules(), roles in arb_roles(), calls in arb_calls()) {
        let members = members();
        let rules = RuleSet::new(rules);
        let made = ReplayRules { members: &members, roles: &roles, rules: &rules, digest: "sha256:made", invariants: None };
        let history = history(&made, &calls);
        let again = ReplayRules { digest: "sha256:another", ..made };
        let report = replay(&history, &again);
        prop_assert_eq!(report.flipped, 0, "{:#?}", report);
        prop_assert!(report.unjudged.is_empty(), "{:#?}", report.unjudged);
        prop_assert_eq!(report.same, history.len());
    }

    /// Any other rule set: a decision flips to refused exactly when the new role policy
    /// refuses a call that was allowed, and to allowed only for a read-only call refused by
    /// its role; nothing flips that the role policy does not change.
    #[test]
    fn flips_are_exactly_the_role_policy_changes(
        old in arb_rules(), new in arb_rules(), roles in arb_roles(), new_roles in arb_roles(), calls in arb_calls()
    ) {
        let members = members();
        let old = RuleSet::new(old);
        let new = RuleSet::new(new);
        let made = ReplayRules { members: &members, roles: &roles, rules: &old, digest: "sha256:old", invariants: None };
        let history = history(&made, &calls);
        let target = ReplayRules { members: &members, roles: &new_roles, rules: &new, digest: "sha256:new", invariants: None };
        let report = replay(&history, &target);
        let mut to_refused = 0;
        for entry in &history {
            let call = entry.call.as_ref().unwrap();
            let args = match &call.arguments { KeptArguments::Full { arguments } => arguments.clone(), _ => None };
            let permitted = match new.decide(&call.role, &entry.tool, args.as_ref()) {
                Some(d) => d.permitted,
                None => new_roles.get(&call.role).cloned().unwrap_or_default().permits(&entry.tool),
            };
            if entry.allowed && !permitted {
                to_refused += 1;
            }
        }
        let counted: usize = report.flips.iter().filter(|g| g.to == Outcome::Refused).map(|g| g.count).sum();
        prop_assert_eq!(counted, to_refused);
        for group in report.flips.iter().filter(|g| g.to == Outcome::Allowed) {
            for example in &group.examples {
                prop_assert_eq!(example.blocker.as_deref(), Some("role_not_permitted"));
            }
        }
        prop_assert_eq!(report.same + report.flipped + report.unjudged.iter().map(|g| g.count).sum::<usize>(), history.len());
    }
}

#[test]
fn the_invariants_refuse_in_replay_what_their_arguments_show_whatever_the_rules() {
    use fleetgate_core::effect::Invariant;
    use fleetgate_core::protect::Protection;
    let members = members();
    let roles = BTreeMap::new();
    let rules =
        RuleSet::new(vec![rule("any", "pull_request_write", &["merge", "close"], &["*"], Some(ToolClass::Mutating))]);
    let protection = Protection::default();
    let lifted = [Invariant::ScheduledMerge, Invariant::PrState];
    let old = ReplayRules {
        members: &members,
        roles: &roles,
        rules: &rules,
        digest: "sha256:old",
        invariants: Some(fleetgate_core::replay::ReplayInvariants {
            dialect: &fleetgate_core::dialect::gitea::GITEA,
            protection: &protection,
            lifted: &lifted,
        }),
    };
    let mut scheduled = method("merge");
    scheduled.insert("merge_when_checks_succeed".into(), Value::Bool(true));
    scheduled.insert("pull_number".into(), Value::from(3));
    let mut close = method("close");
    close.insert("pull_number".into(), Value::from(3));
    // Made under a roster that lifted both: allowed.
    let history = vec![
        decided(1, &old, "merger", "pull_request_write", &scheduled, ToolClass::Mutating, false),
        decided(2, &old, "author", "pull_request_write", &close, ToolClass::Mutating, false),
    ];
    assert!(history.iter().all(|e| e.allowed));
    // The same rules without the lifts: both flip, each by its invariant.
    let new = ReplayRules {
        digest: "sha256:new",
        invariants: Some(fleetgate_core::replay::ReplayInvariants {
            dialect: &fleetgate_core::dialect::gitea::GITEA,
            protection: &protection,
            lifted: &[],
        }),
        ..old
    };
    let report = replay(&history, &new);
    let by: Vec<&str> = report.flips.iter().map(|g| g.rule.as_str()).collect();
    assert_eq!(by, ["invariant `pr-state`", "invariant `scheduled-merge`"], "{report:#?}");
}

/// A new rule of what a call does: judged where the arguments alone show it (a PR's title
/// edited, stated without a read), reported where the live gate would read the forge (a merge's
/// base), never guessed.
#[test]
fn a_rule_of_what_a_call_does_is_replayed_only_where_the_arguments_show_it() {
    use fleetgate_core::protect::Protection;
    use fleetgate_core::rules::{EffectMatch, Op};
    let members = members();
    let roles = BTreeMap::new();
    let old_rules = RuleSet::new(vec![rule("any", "pull_request_write", &["merge", "update"], &["*"], None)]);
    let protection = Protection::default();
    let inv = fleetgate_core::replay::ReplayInvariants {
        dialect: &fleetgate_core::dialect::gitea::GITEA,
        protection: &protection,
        lifted: &[],
    };
    let old = ReplayRules {
        members: &members,
        roles: &roles,
        rules: &old_rules,
        digest: "sha256:old",
        invariants: Some(inv),
    };
    let numbered = |m: &str| {
        let mut args = method(m);
        args.insert("pull_number".into(), Value::from(3));
        args
    };
    let mut edit = numbered("update");
    edit.insert("title".into(), Value::from("renamed"));
    let history = vec![
        decided(1, &old, "author", "pull_request_write", &edit, ToolClass::Mutating, false),
        decided(2, &old, "merger", "pull_request_write", &numbered("merge"), ToolClass::Mutating, false),
    ];
    // Editing PRs and merging onto release branches become the reviewer's.
    let mut state = rule("new:edit", "*", &[], &["reviewer"], None);
    state.effect = Some(EffectMatch { op: vec![Op::PrEdit], ..EffectMatch::default() });
    let mut release = rule("new:release", "*", &[], &["reviewer"], None);
    release.effect =
        Some(EffectMatch { op: vec![Op::Merge], branch: vec!["release/*".into()], ..EffectMatch::default() });
    let mut list = vec![state, release];
    list.extend(old_rules.rules().iter().cloned());
    let new_rules = RuleSet::new(list);
    let new = ReplayRules { rules: &new_rules, digest: "sha256:new", ..old };
    let report = replay(&history, &new);
    let flips: Vec<(&str, Option<i64>)> = report.flips.iter().map(|g| (g.rule.as_str(), g.examples[0].id)).collect();
    assert_eq!(flips, [("new:edit", Some(1))], "{report:#?}");
    let why: Vec<(Unjudged, usize)> = report.unjudged.iter().map(|g| (g.why, g.count)).collect();
    assert_eq!(why, [(Unjudged::EffectNotEvident, 1)], "{report:#?}");
}
