//! The roster loader (`FleetConfig::parse`, crates/config/src/lib.rs), `[[rules]]`
//! included, and the rule set it builds.
//!
//! Invariants: a refusal is an error value whose message names the file and says why; a
//! roster that loads is deterministic and holds what the loader promises (members, sorted,
//! profiles unique and non-empty, a valid env prefix, a positive TTL, bounded `[http]`,
//! only known roles); and its rules decide as documented: a call built to match rule *i*
//! is decided by rule *i* or an earlier one, and the verdict for each role is that rule's.
#![no_main]

use fleetgate_config::{FleetConfig, MAX_ATTACHMENTS_LIMIT};
use fleetgate_core::rules::{ArgMatch, RuleVerdict};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};

const SOURCE: &str = "/etc/fleetgate/fleet.toml";

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let config = match FleetConfig::parse(text, SOURCE) {
        Ok(config) => config,
        Err(e) => {
            let message = e.to_string();
            let why = message.strip_prefix(SOURCE).expect("a refusal names the file");
            assert!(why.starts_with(':') && why.len() > 2, "a refusal says why: {message:?}");
            return;
        }
    };
    assert_eq!(FleetConfig::parse(text, SOURCE).as_ref(), Ok(&config), "parsing is deterministic");
    check_roster(&config);
    check_rules(&config);
});

fn check_roster(c: &FleetConfig) {
    assert_eq!(c.source, SOURCE);
    assert!(!c.members.is_empty(), "an empty roster loaded");
    assert!(c.members.windows(2).all(|w| w[0] < w[1]), "members are sorted and distinct");
    let mut profiles: Vec<&str> = c.members.iter().map(|m| m.profile.as_str()).collect();
    profiles.sort_unstable();
    assert!(profiles.windows(2).all(|w| w[0] != w[1]), "duplicate profile loaded");
    for m in &c.members {
        assert!(![&m.namespace, &m.profile, &m.role].iter().any(|v| v.trim().is_empty()), "{m:?}");
        assert_eq!(c.member(&m.profile), Some(m));
    }
    assert!(!c.env_prefix.is_empty());
    assert!(c.env_prefix.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'));
    assert!(c.heartbeat_ttl_seconds.is_finite() && c.heartbeat_ttl_seconds > 0.0);
    assert!(c.pass_through_env.iter().all(|k| k.starts_with(&c.env_prefix)));
    assert!(c.process_match.iter().all(|m| !m.trim().is_empty()));
    assert!((1..=MAX_ATTACHMENTS_LIMIT).contains(&c.http.max_attachments));
    assert!((1..=c.http.max_attachments).contains(&c.http.max_attachments_per_principal));
    for role in c.roles.keys() {
        assert!(c.members.iter().any(|m| &m.role == role), "[roles.{role}] of no member");
    }
    for m in &c.members {
        let _ = c.role_policy(&m.role).permits(&m.profile);
    }
}

fn check_rules(c: &FleetConfig) {
    let rules = c.rules.rules();
    let mut roles: Vec<&str> = c.members.iter().map(|m| m.role.as_str()).collect();
    roles.push("nobody-has-this-role");
    for (i, rule) in rules.iter().enumerate() {
        assert!(!rule.tool.trim().is_empty());
        assert!(rule.args.iter().all(|(p, _)| p.starts_with('/')), "{rule:?}");
        let _ = rule.describe();
        // A rule of what a call does decides only with the call's effect (the gate's).
        if rule.effect.is_some() {
            continue;
        }
        let Some(arguments) = matching_arguments(&rule.args) else { continue };
        // A glob matches itself (`*` matches `*`, `?` any one character): the rule's own
        // pattern is a tool name it matches.
        let decider = match c.rules.evaluate(&rule.tool, Some(&arguments)) {
            RuleVerdict::Matched(decider) => decider,
            other => panic!("rule {i} ({rule:?}) does not decide a call built to match it: {other:?}"),
        };
        let at = rules.iter().position(|r| std::ptr::eq(r, decider)).expect("the decider is one of the rules");
        assert!(at <= i, "a later rule ({at}) decided a call that rule {i} matches");
        for role in &roles {
            let decision = c.rules.decide(role, &rule.tool, Some(&arguments)).expect("a ruled tool is decided");
            // An earlier rule of what a call does may leave it open: never a permit by default.
            if decision.undetermined.is_some() {
                continue;
            }
            assert_eq!(decision.permitted, decider.admits(role), "{decision:?}");
            assert_eq!(decision.reason.is_some(), !decision.permitted, "a refusal says why: {decision:?}");
            assert_eq!(decision.rule.as_deref(), Some(decider.origin.as_str()));
        }
        // No arguments at all: decided by some rule, or refused for every role.
        if let Some(decision) = c.rules.decide(roles[0], &rule.tool, None) {
            assert!(decision.permitted || decision.reason.is_some());
        }
    }
}

/// Arguments that satisfy every matcher of a rule whose pointers each name one top-level
/// argument; `None` for deeper pointers (the builder would have to invent structure).
fn matching_arguments(args: &[(String, ArgMatch)]) -> Option<Map<String, Value>> {
    let mut out = Map::new();
    for (pointer, matcher) in args {
        let name = pointer.strip_prefix('/')?;
        if name.contains('/') {
            return None;
        }
        let name = name.replace("~1", "/").replace("~0", "~");
        match matcher {
            ArgMatch::OneOf(values) => {
                out.insert(name, values.first()?.clone());
            }
            ArgMatch::Present => {
                out.insert(name, Value::Bool(true));
            }
            ArgMatch::Absent => {}
        }
    }
    // An `absent` pointer another matcher of the same rule needs present cannot be met.
    let satisfiable = args.iter().all(|(pointer, m)| {
        !matches!(m, ArgMatch::Absent) || !out.contains_key(&pointer[1..].replace("~1", "/").replace("~0", "~"))
    });
    satisfiable.then_some(out)
}
