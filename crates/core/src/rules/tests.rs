//! Rule matching: globs, pointers into nested objects and arrays, absent vs null, first
//! match, fail closed on what no rule matches, shadowing at load; and a property: no rule
//! set turns the refusal of an unknown `method` into an allow.

use super::{ArgMatch, Does, EffectMatch, Op, Operation, Rule, RuleSet};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn rule(origin: &str, tool: &str, args: &[(&str, ArgMatch)], roles: &[&str]) -> Rule {
    Rule {
        origin: origin.into(),
        tool: tool.into(),
        args: args.iter().map(|(p, m)| ((*p).to_owned(), m.clone())).collect(),
        effect: None,
        roles: roles.iter().map(|r| (*r).to_owned()).collect(),
        class: None,
        action: None,
        ask: false,
        approvers: Vec::new(),
        required: 0,
    }
}

fn one_of(values: &[Value]) -> ArgMatch {
    ArgMatch::OneOf(values.to_vec())
}

fn args(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

fn pr_rules() -> RuleSet {
    RuleSet::new(vec![
        rule("r1", "pull_request_write", &[("/method", one_of(&[json!("merge")]))], &["merger"]),
        rule("r2", "pull_request_write", &[("/method", one_of(&[json!("create"), json!("update")]))], &["author"]),
        rule("r3", "pull_request_read", &[], &["*"]),
    ])
}

#[test]
fn the_first_matching_rule_decides_and_names_itself_when_it_refuses() {
    let rules = pr_rules();
    let merge = args(json!({ "method": "merge", "index": 976 }));
    assert!(rules.decide("merger", "pull_request_write", Some(&merge)).unwrap().permitted);
    let refused = rules.decide("reviewer", "pull_request_write", Some(&merge)).unwrap();
    assert!(!refused.permitted);
    let why = refused.reason.unwrap();
    assert!(
        why.contains("rule r1") && why.contains("/method = \"merge\"") && why.contains("only the merger role"),
        "{why}"
    );
    assert!(why.contains("role reviewer may not"), "{why}");
    assert_eq!(refused.may, ["merger"]);
    assert!(
        rules.decide("author", "pull_request_write", Some(&args(json!({ "method": "create" })))).unwrap().permitted
    );
    assert!(rules.decide("anyone", "pull_request_read", None).unwrap().permitted, "`*` is every role");
    assert!(rules.decide("author", "git_status", None).is_none(), "an unruled tool is the globs' business");
}

#[test]
fn a_call_no_rule_matches_is_refused_for_every_role() {
    let rules = pr_rules();
    for role in ["author", "reviewer", "merger", "controller"] {
        let d = rules.decide(role, "pull_request_write", Some(&args(json!({ "method": "frobnicate" })))).unwrap();
        assert!(!d.permitted, "{role}");
        let why = d.reason.unwrap();
        assert!(why.contains("/method = \"frobnicate\"") && why.contains("refused for every role"), "{why}");
        let d = rules.decide(role, "pull_request_write", None).unwrap();
        assert!(!d.permitted && d.reason.unwrap().contains("/method absent"));
    }
}

#[test]
fn pointers_reach_into_objects_and_arrays_and_tell_absent_from_null() {
    let rules = RuleSet::new(vec![
        rule("deep", "t", &[("/review/event", one_of(&[json!("APPROVE")])), ("/files/0", ArgMatch::Present)], &["r"]),
        rule("none", "t", &[("/state", ArgMatch::Absent)], &["r"]),
        rule("null", "t", &[("/state", ArgMatch::Present)], &["q"]),
    ]);
    let deep = args(json!({ "review": { "event": "APPROVE" }, "files": ["a"], "state": "x" }));
    assert_eq!(rules.decide("r", "t", Some(&deep)).unwrap().rule.as_deref(), Some("deep"));
    let empty_files = args(json!({ "review": { "event": "APPROVE" }, "files": [], "state": "x" }));
    assert_eq!(rules.decide("q", "t", Some(&empty_files)).unwrap().rule.as_deref(), Some("null"));
    assert_eq!(rules.decide("r", "t", Some(&args(json!({})))).unwrap().rule.as_deref(), Some("none"), "absent");
    let null = args(json!({ "state": null }));
    assert_eq!(rules.decide("q", "t", Some(&null)).unwrap().rule.as_deref(), Some("null"), "null is present");
    let n = RuleSet::new(vec![rule("n", "t", &[("/n", one_of(&[json!(1)]))], &["r"])]);
    assert!(n.decide("r", "t", Some(&args(json!({ "n": 1.0 })))).unwrap().permitted, "numbers by value");
    assert!(!n.decide("r", "t", Some(&args(json!({ "n": null })))).unwrap().permitted, "null is no value");
}

#[test]
fn globs_name_tools_and_literal_and_glob_rules_keep_their_order() {
    let rules = RuleSet::new(vec![
        rule("first", "*_write", &[("/method", one_of(&[json!("delete")]))], &["controller"]),
        rule("second", "issue_write", &[], &["author"]),
    ]);
    let delete = args(json!({ "method": "delete" }));
    assert_eq!(rules.decide("author", "issue_write", Some(&delete)).unwrap().rule.as_deref(), Some("first"));
    assert_eq!(rules.decide("author", "issue_write", None).unwrap().rule.as_deref(), Some("second"));
    assert_eq!(rules.allowed_for("author", "issue_write").unwrap().len(), 1);
    assert!(rules.allowed_for("author", "label_write").unwrap().is_empty(), "ruled, never for the author");
    assert!(rules.allowed_for("author", "git_add").is_none());
}

#[test]
fn a_rule_an_earlier_one_always_beats_is_refused_at_load() {
    let shadowed = RuleSet::new(vec![
        rule("fleet.toml:3", "pull_request_*", &[], &["author"]),
        rule("fleet.toml:9", "pull_request_write", &[("/method", one_of(&[json!("merge")]))], &["merger"]),
    ]);
    let e = shadowed.check(2).unwrap_err();
    assert_eq!(e.origin, "fleet.toml:9");
    assert!(e.reason.contains("fleet.toml:3") && e.reason.contains("never decide"), "{e}");
    let narrower_first = RuleSet::new(vec![
        rule("a", "pull_request_write", &[("/method", one_of(&[json!("merge")]))], &["merger"]),
        rule("b", "pull_request_write", &[("/method", one_of(&[json!("merge"), json!("create")]))], &["author"]),
    ]);
    assert!(narrower_first.check(2).is_ok(), "b still decides `create`");
    let values = RuleSet::new(vec![
        rule("a", "t", &[("/m", one_of(&[json!("x"), json!("y")]))], &["r"]),
        rule("b", "t", &[("/m", one_of(&[json!("y")]))], &["q"]),
    ]);
    assert!(values.check(2).is_err(), "y is already decided by a");
    assert!(values.check(1).is_ok(), "rules past `own` are not the operator's to fix");
}

proptest! {
    /// Whatever rules name a tool with a `/method` matcher, a method none of them lists is
    /// refused for every role.
    #[test]
    fn an_unknown_method_is_never_allowed(
        methods in proptest::collection::vec("[a-z]{1,8}", 1..6),
        roles in proptest::collection::vec(prop_oneof![Just("author"), Just("merger"), Just("*")], 1..4),
        extra_present in any::<bool>(),
        asked in "[a-z]{1,8}",
        role in prop_oneof![Just("author"), Just("merger"), Just("reviewer")],
    ) {
        prop_assume!(!methods.contains(&asked));
        let mut set = Vec::new();
        for (i, m) in methods.iter().enumerate() {
            let mut matchers = vec![("/method", one_of(&[json!(m)]))];
            if extra_present && i % 2 == 0 {
                matchers.push(("/index", ArgMatch::Present));
            }
            set.push(rule(&format!("r{i}"), "pull_request_write", &matchers, &[roles[i % roles.len()]]));
        }
        let rules = RuleSet::new(set);
        let call = args(json!({ "method": asked, "index": 1 }));
        let d = rules.decide(role, "pull_request_write", Some(&call)).unwrap();
        prop_assert!(!d.permitted);
    }
}

#[test]
fn an_operator_rule_that_asks_before_a_merge_keeps_it_a_mutating_call() {
    // The operator's rule comes first and says nothing of what the call is: the forge
    // profile's rule behind it still says it is mutating (its workflow action is the forge
    // dialect's statement, `forge::effect`, which no rule changes).
    let mut asks = rule("fleet.toml:9", "pull_request_write", &[("/method", one_of(&[json!("merge")]))], &["merger"]);
    asks.ask = true;
    let mut list = vec![asks];
    list.extend(crate::dialect::gitea::rules());
    let rules = RuleSet::new(list);
    let merge = args(json!({ "method": "merge", "pull_number": 1 }));
    let decided = rules.decide("merger", "pull_request_write", Some(&merge)).unwrap();
    assert_eq!(decided.rule.as_deref(), Some("fleet.toml:9"), "the operator's rule decides");
    assert!(decided.ask && decided.permitted);
    assert_eq!(decided.class, Some(crate::capability::ToolClass::Mutating));
    // A rule that states its own keeps its own.
    let mut own = rule("own", "pull_request_write", &[], &["merger"]);
    own.class = Some(crate::capability::ToolClass::ReadOnly);
    let mut list = vec![own];
    list.extend(crate::dialect::gitea::rules());
    let decided = RuleSet::new(list).decide("merger", "pull_request_write", Some(&merge)).unwrap();
    assert_eq!(decided.class, Some(crate::capability::ToolClass::ReadOnly));
}

/// An operator rule set as a roster might hold it: tools (literal or glob), method matchers,
/// roles, `ask`, in any order — often restating a profile's own rule.
fn operator_rules() -> impl Strategy<Value = Vec<Rule>> {
    let tool = prop::sample::select(vec![
        "pull_request_write",
        "pull_request_review_write",
        "issue_write",
        "*_read",
        "create_or_update_file",
        "delete_branch",
        "*",
    ]);
    let method = prop::option::of(prop::sample::select(vec!["merge", "update", "create", "close", "update_branch"]));
    let role = prop::sample::select(vec!["author", "reviewer", "merger", "controller", "*"]);
    prop::collection::vec((tool, method, prop::collection::vec(role, 1..3), any::<bool>()), 0..6).prop_map(|rules| {
        rules
            .into_iter()
            .enumerate()
            .map(|(i, (tool, method, roles, ask))| {
                let matchers: Vec<(&str, ArgMatch)> =
                    method.map(|m| vec![("/method", one_of(&[json!(m)]))]).unwrap_or_default();
                let mut r = rule(&format!("fleet.toml:{i}"), tool, &matchers, &roles);
                r.ask = ask;
                r
            })
            .collect()
    })
}

proptest! {
    /// `rules diff A A` is empty for every roster: the profile's rules behind the operator's,
    /// restated ones included.
    #[test]
    fn a_rule_set_differs_from_itself_in_nothing(own in operator_rules(), with_profile in any::<bool>()) {
        let mut list = own;
        if with_profile {
            list.extend(crate::dialect::gitea::rules());
        }
        let set = RuleSet::new(list);
        let diff = super::diff(&set, &set);
        prop_assert!(diff.is_empty(), "{}", diff.text());
        prop_assert!(diff.added.is_empty() && diff.removed.is_empty() && diff.changed.is_empty());
    }
}

#[test]
fn a_restated_permission_compared_with_itself_is_no_change() {
    // The policy chapter's own example, ahead of the profile's rule of the same condition.
    let mut list =
        vec![rule("fleet.toml:3", "pull_request_write", &[("/method", one_of(&[json!("merge")]))], &["merger"])];
    list.extend(crate::dialect::gitea::rules());
    let set = RuleSet::new(list);
    let diff = super::diff(&set, &set);
    assert!(diff.is_empty(), "{}", diff.text());
    assert!(!diff.shadowed.is_empty(), "the profile's restated rule is named as shadowed");
}

/// An operator's rule on merges onto release branches ahead of the profile's merge rule.
fn release_rules() -> RuleSet {
    let mut release = rule("fleet.toml:9", "*", &[], &["merger"]);
    release.effect =
        Some(EffectMatch { op: vec![Op::Merge], branch: vec!["release/*".into()], ..EffectMatch::default() });
    release.ask = true;
    release.required = 2;
    let mut list = vec![release];
    list.extend(pr_rules().rules().iter().cloned());
    RuleSet::new(list)
}

fn merge_onto(base: &str) -> Vec<Operation> {
    vec![
        Operation { op: Op::Merge, branch: Some(base.into()), pr: Some(7), protected: base == "main" },
        Operation { op: Op::Write, branch: None, pr: Some(7), protected: false },
    ]
}

#[test]
fn a_rule_of_what_a_call_does_decides_the_calls_it_matches_and_only_those() {
    let rules = release_rules();
    let merge = args(json!({ "method": "merge", "index": 7 }));
    let decide = |role: &str, does| rules.decide_with(role, "pull_request_write", Some(&merge), does, false).unwrap();
    // Onto release/1: the operator's rule, which asks two people.
    let release = merge_onto("release/1");
    let d = decide("merger", Does::Known(&release));
    assert_eq!((d.permitted, d.ask, d.rule.as_deref()), (true, true, Some("fleet.toml:9")));
    // Onto main: it does not match, and the next rule decides as if it were not there.
    let main = merge_onto("main");
    let d = decide("merger", Does::Known(&main));
    assert_eq!((d.permitted, d.ask, d.rule.as_deref()), (true, false, Some("r1")));
    assert!(!decide("reviewer", Does::Known(&main)).permitted);
    // Not established: the merger's answer depends on it; the reviewer's does not.
    let d = decide("merger", Does::Unknown);
    assert!(!d.permitted && d.undetermined.as_deref().is_some_and(|w| w.contains("fleet.toml:9")), "{d:?}");
    let d = decide("reviewer", Does::Unknown);
    assert!(!d.permitted && d.undetermined.is_none(), "refused whatever the call does: {d:?}");
    assert!(d.reason.unwrap().contains("role reviewer may not"));
    // A rule of what a call does names no tool: another tool's call falls to the globs.
    let read = [Operation { op: Op::Read, branch: None, pr: None, protected: false }];
    assert!(rules.decide_with("author", "git_status", None, Does::Known(&read), true).is_none());
    assert!(rules.decide_with("author", "git_status", None, Does::Unknown, true).is_some(), "unless it may match");
    assert!(rules.allowed_for("author", "git_status").is_none(), "nor does it change a listing");
    // Its own condition in words, and a diff names it.
    assert_eq!(rules.rules()[0].describe(), "`*` doing merge, on release/*");
    let added = super::diff(&pr_rules(), &rules);
    assert_eq!(added.added.len(), 1, "{}", added.text());
}
