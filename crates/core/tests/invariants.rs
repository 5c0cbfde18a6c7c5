//! Invariants below every rule and override: over generated operator rule sets (tools and
//! globs, method matchers, roles, `decision = "ask"`) put ahead of each dialect's profile
//! (gitea-mcp, github-mcp),
//! generated `[approvals] may_override` settings with every override and every asked call
//! approved, and generated lifts, no hostile call is ever allowed while it breaks an
//! invariant the roster does not lift. Which invariant each call breaks is written here by
//! hand (the oracle), from Gitea's and GitHub's semantics, not taken from the dialect's
//! statement.

use fleetgate_core::BlockerKind;
use fleetgate_core::capability::{
    Approvals, CapabilityInput, Evidence, RoleRefusal, Standing, ToolClass, resolve_task_capability,
};
use fleetgate_core::dialect::{Dialect, Unlisted, gitea, gitea::GITEA, github::GITHUB};
use fleetgate_core::effect::{Answered, Effect, Invariant, Read, ReadFailed, judge};
use fleetgate_core::protect::Protection;
use fleetgate_core::rules::{ArgMatch, Does, EffectMatch, Op, Rule, RuleSet, operations};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

const ROLES: [&str; 5] = ["author", "reviewer", "merger", "controller", "reconciler"];

/// The forge: PR 1 `feature` → `main`; PR 2 `main` → `evil` (a PR whose head is the default
/// branch); PR 3 `child` → `feature` (stacked on PR 1).
fn answer(read: &Read) -> Result<Value, String> {
    let a = &read.arguments;
    match read.tool.as_str() {
        "search_repos" => Ok(json!([{ "full_name": "org/repo", "default_branch": "main", "forks_count": 0 }])),
        "search_repositories" => Ok(json!({ "items": [{ "full_name": "org/repo", "default_branch": "main" }] })),
        "list_pull_requests" => {
            if a.get("page").and_then(Value::as_u64) != Some(1) {
                return Ok(json!([]));
            }
            Ok(json!([
                { "number": 1, "head": "feature", "base": "main" },
                { "number": 2, "head": "main", "base": "evil" },
                { "number": 3, "head": "child", "base": "feature" },
            ]))
        }
        // A PR's conversation (a merge reads it): no comments.
        "issue_read" => Ok(json!([])),
        "pull_request_read" if a.get("method").and_then(Value::as_str) == Some("get_review_comments") => Ok(json!([])),
        "pull_request_read" => {
            let (head, base) = match a.get("pull_number").or_else(|| a.get("pullNumber")).and_then(Value::as_u64) {
                Some(1) => ("feature", "main"),
                Some(2) => ("main", "evil"),
                Some(3) => ("child", "feature"),
                _ => return Err("get org/repo/pr err: 404 not found".into()),
            };
            Ok(json!({ "head": { "ref": head, "sha": "1a38ef95aaaa", "repo": { "full_name": "org/repo" } },
                       "base": { "ref": base, "sha": "2b38ef95aaaa", "repo": { "full_name": "org/repo" } },
                       "state": "open" }))
        }
        other => Err(format!("no {other}")),
    }
}

fn effect_of(
    dialect: &dyn Dialect,
    tool: &str,
    args: &Map<String, Value>,
    schema: Option<&Map<String, Value>>,
) -> Effect {
    let mut answers: Vec<Answered> = Vec::new();
    for _ in 0..64 {
        match dialect.establish(tool, args, schema, &Unlisted, &answers) {
            Ok(e) => return e,
            Err(reads) => answers.extend(reads.into_iter().map(|r| {
                let a = answer(&r).map_err(ReadFailed);
                (r, a)
            })),
        }
    }
    panic!("no effect");
}

/// A hostile call, and the invariant it breaks for `role` (the oracle).
struct Attack {
    tool: &'static str,
    args: Value,
    breaks: fn(&str) -> Option<Invariant>,
    /// The tool's schema as the server lists it, when the attack depends on it.
    schema: Option<Value>,
}

fn state_role(role: &str) -> bool {
    role == "controller" || role == "reconciler"
}

fn attack(tool: &'static str, args: Value, breaks: fn(&str) -> Option<Invariant>) -> Attack {
    Attack { tool, args, breaks, schema: None }
}

/// The hostile calls through GitHub's server.
fn github_attacks() -> Vec<Attack> {
    let not_state = |r: &str| (!state_role(r)).then_some(Invariant::PrState);
    let protected = |_: &str| Some(Invariant::ProtectedBranch);
    vec![
        attack("update_pull_request", json!({ "pullNumber": 1, "base": "evil" }), |_| Some(Invariant::Retarget)),
        attack("update_pull_request", json!({ "pullNumber": 1, "base": "" }), |_| Some(Invariant::Retarget)),
        attack("update_pull_request", json!({ "pullNumber": 1, "state": "closed" }), not_state),
        attack("update_pull_request_state", json!({ "pullNumber": 1, "state": "closed" }), not_state),
        attack("issue_write", json!({ "method": "update", "issue_number": 1, "state": "closed" }), not_state),
        attack("update_issue_state", json!({ "issue_number": 3, "state": "closed" }), not_state),
        attack("update_pull_request_branch", json!({ "pullNumber": 2 }), protected),
        attack(
            "create_or_update_file",
            json!({ "path": "a", "content": "x", "message": "m", "branch": "main" }),
            protected,
        ),
        attack(
            "create_or_update_file",
            json!({ "path": "a", "content": "x", "message": "m", "branch": "refs/heads/main" }),
            protected,
        ),
        attack("delete_file", json!({ "path": "a", "message": "m", "branch": "main" }), protected),
        attack(
            "push_files",
            json!({ "branch": "main", "message": "m", "files": [{ "path": "a", "content": "x" }] }),
            protected,
        ),
        attack(
            "push_files",
            json!({ "branch": "f", "message": "m", "files": [{ "path": "a", "content": "x" },
                    { "path": ".github/workflows/x.yml", "content": "x" }] }),
            |_| Some(Invariant::ProtectedPath),
        ),
        attack("create_branch", json!({ "branch": "main" }), protected),
        // A merge through the released server (no `expectedHeadSha`) breaks nothing: the
        // gateway makes it itself, pinned through GitHub's REST merge (the gate refuses one it
        // cannot pin so, `unpinned-merge`, in `fleetgate-control`).
        attack("assign_copilot_to_issue", json!({ "issue_number": 5 }), |_| Some(Invariant::UnknownEffect)),
        attack("pull_request_write", json!({ "method": "merge", "pull_number": 1 }), |_| {
            Some(Invariant::UnknownEffect)
        }),
        attack("actions_list", json!({ "method": "run_everything" }), |_| Some(Invariant::UnknownEffect)),
        // Text GitHub acts on later: a closing keyword in a commit message, a merge's message;
        // an issue's state.
        attack(
            "create_or_update_file",
            json!({ "path": "a", "content": "x", "message": "Fixes #9", "branch": "f" }),
            |r| (!state_role(r)).then_some(Invariant::IssueState),
        ),
        Attack {
            tool: "merge_pull_request",
            args: json!({ "pullNumber": 1, "commit_message": "closes org/repo#9" }),
            breaks: |r| (!state_role(r)).then_some(Invariant::IssueState),
            schema: Some(json!({ "properties": { "owner": {}, "repo": {}, "pullNumber": {}, "expectedHeadSha": {},
                                                  "commit_message": {} } })),
        },
        attack("issue_write", json!({ "method": "update", "issue_number": 9, "state": "closed" }), |r| {
            (!state_role(r)).then_some(Invariant::IssueState)
        }),
    ]
}

/// A role that may name, in its PR's texts, what the PR's merge closes.
fn names(role: &str) -> bool {
    role == "author" || state_role(role)
}

/// The hostile calls through gitea-mcp.
fn gitea_attacks() -> Vec<Attack> {
    vec![
        Attack {
            schema: None,
            tool: "pull_request_write",
            args: json!({ "method": "merge", "pull_number": 1, "force_merge": true }),
            breaks: |_| Some(Invariant::ForcedMerge),
        },
        Attack {
            schema: None,
            tool: "pull_request_write",
            args: json!({ "method": "merge", "pull_number": 1, "merge_when_checks_succeed": true }),
            breaks: |_| Some(Invariant::ScheduledMerge),
        },
        Attack {
            schema: None,
            tool: "pull_request_write",
            args: json!({ "method": "merge", "pull_number": 1, "delete_branch": true }),
            breaks: |_| Some(Invariant::Retarget),
        },
        Attack {
            schema: None,
            tool: "pull_request_write",
            args: json!({ "method": "update", "pull_number": 1, "base": "evil" }),
            breaks: |_| Some(Invariant::Retarget),
        },
        Attack {
            schema: None,
            tool: "pull_request_write",
            args: json!({ "method": "update", "pull_number": 1, "state": "closed" }),
            breaks: |r| (!state_role(r)).then_some(Invariant::PrState),
        },
        Attack {
            schema: None,
            tool: "pull_request_write",
            args: json!({ "method": "close", "pull_number": 1 }),
            breaks: |r| (!state_role(r)).then_some(Invariant::PrState),
        },
        Attack {
            schema: None,
            tool: "issue_write",
            args: json!({ "method": "update", "issue_number": 1, "state": "closed" }),
            breaks: |r| (!state_role(r)).then_some(Invariant::PrState),
        },
        Attack {
            schema: None,
            tool: "pull_request_write",
            args: json!({ "method": "update_branch", "pull_number": 2 }),
            breaks: |_| Some(Invariant::ProtectedBranch),
        },
        Attack {
            schema: None,
            tool: "create_or_update_file",
            args: json!({ "path": "a", "content": "x", "branch_name": "main" }),
            breaks: |_| Some(Invariant::ProtectedBranch),
        },
        Attack {
            schema: None,
            tool: "create_or_update_file",
            args: json!({ "path": "a", "content": "x" }),
            breaks: |_| Some(Invariant::ProtectedBranch),
        },
        Attack {
            schema: None,
            tool: "create_or_update_file",
            args: json!({ "path": ".gitea/workflows/x.yml", "content": "x", "branch_name": "f" }),
            breaks: |_| Some(Invariant::ProtectedPath),
        },
        Attack {
            schema: None,
            tool: "delete_file",
            args: json!({ "path": "a", "branch_name": "f", "new_branch_name": "main" }),
            breaks: |_| Some(Invariant::ProtectedBranch),
        },
        Attack {
            schema: None,
            tool: "create_branch",
            args: json!({ "branch": "main" }),
            breaks: |_| Some(Invariant::ProtectedBranch),
        },
        Attack {
            schema: None,
            tool: "rename_branch",
            args: json!({ "branch": "f", "new_name": "main" }),
            breaks: |_| Some(Invariant::ProtectedBranch),
        },
        Attack {
            schema: None,
            tool: "delete_branch",
            args: json!({ "branch": "main" }),
            breaks: |_| Some(Invariant::ProtectedBranch),
        },
        Attack {
            schema: None,
            tool: "delete_branch",
            args: json!({ "branch": "child" }),
            breaks: |r| (!state_role(r)).then_some(Invariant::PrState),
        },
        Attack {
            schema: None,
            tool: "delete_branch",
            args: json!({ "branch": "evil" }),
            breaks: |_| Some(Invariant::Retarget),
        },
        Attack {
            schema: None,
            tool: "actions_run_read",
            args: json!({ "method": "download_job_log", "job_id": 1 }),
            breaks: |_| Some(Invariant::ReaderWrites),
        },
        Attack {
            schema: None,
            tool: "pull_request_read",
            args: json!({ "method": "get", "pull_number": 1, "output_path": "/tmp/x" }),
            breaks: |_| Some(Invariant::ReaderWrites),
        },
        Attack {
            schema: None,
            tool: "merge_pull_request",
            args: json!({ "index": 1 }),
            breaks: |_| Some(Invariant::UnknownEffect),
        },
        Attack {
            schema: None,
            tool: "pull_request_write",
            args: json!({ "method": "merge_now", "pull_number": 1 }),
            breaks: |_| Some(Invariant::UnknownEffect),
        },
        // Text Gitea acts on later: a keyword in a commit message (with `!`), a merge's message
        // (in another repository's form), a comment and a review on a PR; an issue's `ref` and
        // its state.
        Attack {
            schema: None,
            tool: "create_or_update_file",
            args: json!({ "path": "a", "content": "x", "branch_name": "f", "message": "fixes: !9" }),
            breaks: |r| (!state_role(r)).then_some(Invariant::IssueState),
        },
        Attack {
            schema: None,
            tool: "pull_request_write",
            args: json!({ "method": "merge", "pull_number": 1, "message": "Closes ORG/Repo#9" }),
            breaks: |r| (!state_role(r)).then_some(Invariant::IssueState),
        },
        Attack {
            schema: None,
            tool: "issue_write",
            args: json!({ "method": "add_comment", "issue_number": 1, "body": "cloſes #9" }),
            breaks: |r| (!names(r)).then_some(Invariant::IssueState),
        },
        Attack {
            schema: None,
            tool: "pull_request_review_write",
            args: json!({ "method": "create", "pull_number": 1, "state": "COMMENT", "body": "Resolves #9" }),
            breaks: |r| (!names(r)).then_some(Invariant::IssueState),
        },
        Attack {
            schema: None,
            tool: "issue_write",
            args: json!({ "method": "update", "issue_number": 9, "ref": "f" }),
            breaks: |r| (!state_role(r)).then_some(Invariant::IssueState),
        },
        Attack {
            schema: None,
            tool: "issue_write",
            args: json!({ "method": "update", "issue_number": 9, "state": "closed" }),
            breaks: |r| (!state_role(r)).then_some(Invariant::IssueState),
        },
    ]
}

fn operator_rules() -> impl Strategy<Value = Vec<Rule>> {
    let tool = prop::sample::select(vec![
        "pull_request_write",
        "issue_write",
        "*_read",
        "*",
        "create_or_update_file",
        "delete_*",
        "create_branch",
        "rename_branch",
        "merge_pull_request",
        "update_pull_request",
        "update_pull_request_branch",
        "push_files",
        "update_*",
    ]);
    let method =
        prop::option::of(prop::sample::select(vec!["merge", "update", "close", "update_branch", "download_job_log"]));
    let role = prop::sample::select(vec!["author", "reviewer", "merger", "controller", "reconciler", "*"]);
    // What a call does: an operator's rule on merges onto a branch, on pushes to protected
    // branches, on branch deletions, on any write.
    let effect = prop::option::of(prop::sample::select(vec![
        EffectMatch { op: vec![Op::Merge], branch: vec!["release/*".into()], ..EffectMatch::default() },
        EffectMatch { op: vec![Op::Merge, Op::Push], protected: Some(true), ..EffectMatch::default() },
        EffectMatch { op: vec![Op::BranchDelete, Op::PrState], ..EffectMatch::default() },
        EffectMatch { op: vec![Op::Write], ..EffectMatch::default() },
        EffectMatch { branch: vec!["main".into()], ..EffectMatch::default() },
    ]));
    let shape = (tool, method, effect, prop::collection::vec(role, 1..3), any::<bool>(), any::<bool>());
    prop::collection::vec(shape, 0..6).prop_map(|rules| {
        rules
            .into_iter()
            .enumerate()
            .map(|(i, (tool, method, effect, roles, ask, read_only))| Rule {
                origin: format!("fleet.toml:{i}"),
                tool: tool.into(),
                args: method
                    .map(|m| vec![("/method".to_owned(), ArgMatch::OneOf(vec![Value::from(m)]))])
                    .unwrap_or_default(),
                effect,
                roles: roles.into_iter().map(str::to_owned).collect(),
                class: read_only.then_some(ToolClass::ReadOnly),
                action: None,
                ask,
                approvers: Vec::new(),
                required: 0,
            })
            .collect()
    })
}

const OVERRIDABLE: [BlockerKind; 5] = [
    BlockerKind::RoleNotPermitted,
    BlockerKind::FleetInventoryBlocked,
    BlockerKind::ApprovalRequired,
    BlockerKind::StaleHead,
    BlockerKind::ToolDefinitionChanged,
];

/// What the generated operator rules, put ahead of `dialect`'s profile, say of `role`'s call,
/// judged on the very effect the invariants are judged on: permitted, the refusal when not,
/// the rule that asks an operator when one does, and why what it does is undetermined.
fn roster_says(
    dialect: &dyn Dialect,
    own: Vec<Rule>,
    role: &str,
    tool: &str,
    args: &Map<String, Value>,
    effect: &Effect,
    pr: Option<u64>,
) -> (bool, Option<RoleRefusal>, Option<String>, Option<String>) {
    let mut list = own;
    list.extend(dialect.rules());
    let rules = RuleSet::new(list);
    let ops = operations(effect, pr, &Protection::default());
    let does = ops.as_deref().map_or(Does::Unknown, Does::Known);
    let decided = rules.decide_with(role, tool, Some(args), does, true);
    let undetermined = decided.as_ref().and_then(|d| d.undetermined.clone());
    let permitted = decided.as_ref().is_none_or(|d| d.permitted || d.undetermined.is_some());
    let refusal = decided.as_ref().and_then(|d| d.reason.clone()).map(|reason| RoleRefusal { reason, may: vec![] });
    let ask = decided.as_ref().filter(|d| d.ask).and_then(|d| d.rule.clone());
    (permitted, refusal, ask, undetermined)
}

/// The operator says yes to anything: every asked call and every override of `kinds` approved.
fn yes_to_everything(kinds: &[BlockerKind]) -> Approvals {
    Approvals {
        call: Some(Standing::Approved { id: "apr-call".into(), by: "op".into() }),
        overrides: kinds.iter().map(|k| (*k, Standing::Approved { id: format!("apr-{k}"), by: "op".into() })).collect(),
        ..Approvals::default()
    }
}

/// A Gitea instance whose `app.ini` has keywords of its own (`[forge] close_keywords`,
/// `reopen_keywords`): German ones, in any case.
fn instance_dialect() -> &'static dyn Dialect {
    let keywords =
        fleetgate_core::textref::Keywords::new(&["schließt".into(), "behebt".into()], &["öffnet".into()]).unwrap();
    gitea::with_keywords(&keywords)
}

/// Text that closes (reopens) an issue only with the instance's own keywords.
fn instance_attacks() -> Vec<Attack> {
    let text = |tool: &'static str, args: Value, breaks: fn(&str) -> Option<Invariant>| Attack {
        schema: None,
        tool,
        args,
        breaks,
    };
    vec![
        text(
            "create_or_update_file",
            json!({ "path": "a", "content": "x", "branch_name": "f", "message": "SCHLIESST !9" }),
            |r| (!state_role(r)).then_some(Invariant::IssueState),
        ),
        text(
            "pull_request_write",
            json!({ "method": "merge", "pull_number": 1, "message": "behebt ORG/Repo#9" }),
            |r| (!state_role(r)).then_some(Invariant::IssueState),
        ),
        text("issue_write", json!({ "method": "add_comment", "issue_number": 1, "body": "Öffnet #9" }), |r| {
            (!names(r)).then_some(Invariant::IssueState)
        }),
    ]
}

#[test]
fn the_instance_s_keywords_are_what_makes_these_texts_act() {
    for attack in instance_attacks() {
        let mut args = attack.args.as_object().cloned().unwrap();
        args.insert("owner".into(), json!("org"));
        args.insert("repo".into(), json!("repo"));
        let issue_state = |dialect: &dyn Dialect| {
            let effect = effect_of(dialect, attack.tool, &args, None);
            judge(&effect, "reviewer", &Protection::default(), &[])
                .breaches
                .iter()
                .any(|b| b.invariant == Invariant::IssueState)
        };
        assert!(issue_state(instance_dialect()), "{} {}: the instance's keyword is read", attack.tool, attack.args);
        assert!(!issue_state(&GITEA), "{} {}: a mention without the instance's keywords", attack.tool, attack.args);
    }
}

/// Judge one attack through `dialect` under the generated roster, everything approved.
fn check(
    dialect: &dyn Dialect,
    attack: &Attack,
    own: Vec<Rule>,
    role: &str,
    may_override: &[BlockerKind],
    lifted: &[Invariant],
) -> Result<(), TestCaseError> {
    let mut args = attack.args.as_object().cloned().unwrap();
    args.insert("owner".into(), json!("org"));
    args.insert("repo".into(), json!("repo"));
    let schema = attack.schema.as_ref().and_then(Value::as_object);
    let effect = effect_of(dialect, attack.tool, &args, schema);
    let judged = judge(&effect, role, &Protection::default(), lifted);
    // The rules judge the very effect the invariants are judged on.
    let pr = args.get("pull_number").or_else(|| args.get("index")).and_then(Value::as_u64);
    let (permitted, refusal, ask, undetermined) = roster_says(dialect, own, role, attack.tool, &args, &effect, pr);
    let kinds: Vec<BlockerKind> =
        may_override.iter().chain(&[BlockerKind::ProtectedBranch, BlockerKind::InvariantViolated]).copied().collect();
    let approvals = yes_to_everything(&kinds);
    let verdict = resolve_task_capability(&CapabilityInput {
        profile: "p",
        role,
        tool: attack.tool,
        class: if effect.is_read() { ToolClass::ReadOnly } else { ToolClass::Mutating },
        ambiguity: None,
        breaches: &judged.breaches,
        lifted: &judged.lifted,
        guarded: &judged.guarded,
        unestablished: effect.unestablished.first().map(String::as_str).or(undetermined.as_deref()),
        role_permitted: permitted,
        role_refusal: refusal.as_ref(),
        definition_changed: None,
        store_replaced: None,
        // The fleet is whatever it is: the invariants come before it.
        evidence: None,
        workflow: None,
        forward: None,
        action: effect.action,
        ask: ask.as_deref(),
        approvals: Some(&approvals),
        may_override,
        finish: Default::default(),
    });
    if let Some(invariant) = (attack.breaks)(role) {
        if lifted.contains(&invariant) {
            prop_assert!(judged.lifted.iter().any(|b| b.invariant == invariant), "{invariant} lifted, and named");
        } else {
            prop_assert!(
                !verdict.allowed,
                "{} {} by {role} breaks {invariant} and was allowed: {:?}",
                attack.tool,
                attack.args,
                verdict
            );
            prop_assert!(
                judged.breaches.iter().any(|b| b.invariant == invariant),
                "the dialect names {invariant}: {:?}",
                judged
            );
            prop_assert!(
                matches!(verdict.blocker_kind, Some(BlockerKind::ProtectedBranch | BlockerKind::InvariantViolated)),
                "refused by the invariant, not by something an operator could lift: {:?}",
                verdict.blocker_kind
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn no_call_that_breaks_an_invariant_is_ever_allowed_unless_it_is_lifted(
        own in operator_rules(),
        attack in 0..gitea_attacks().len(),
        role in prop::sample::select(ROLES.to_vec()),
        may_override in prop::sample::subsequence(OVERRIDABLE.to_vec(), 0..=OVERRIDABLE.len()),
        lifted in prop::sample::subsequence(Invariant::ALL.to_vec(), 0..3),
    ) {
        check(&GITEA, &gitea_attacks()[attack], own, role, &may_override, &lifted)?;
    }

    #[test]
    fn no_text_with_the_instance_s_own_keywords_that_breaks_an_invariant_is_allowed_unless_lifted(
        own in operator_rules(),
        attack in 0..instance_attacks().len(),
        role in prop::sample::select(ROLES.to_vec()),
        may_override in prop::sample::subsequence(OVERRIDABLE.to_vec(), 0..=OVERRIDABLE.len()),
        lifted in prop::sample::subsequence(Invariant::ALL.to_vec(), 0..3),
    ) {
        check(instance_dialect(), &instance_attacks()[attack], own, role, &may_override, &lifted)?;
    }

    #[test]
    fn no_call_through_github_s_server_that_breaks_an_invariant_is_allowed_unless_lifted(
        own in operator_rules(),
        attack in 0..github_attacks().len(),
        role in prop::sample::select(ROLES.to_vec()),
        may_override in prop::sample::subsequence(OVERRIDABLE.to_vec(), 0..=OVERRIDABLE.len()),
        lifted in prop::sample::subsequence(Invariant::ALL.to_vec(), 0..3),
    ) {
        check(&GITHUB, &github_attacks()[attack], own, role, &may_override, &lifted)?;
    }
}

/// A healthy fleet and an owned session: the merge reaches the PR workflow's judgement.
fn healthy() -> (fleetgate_core::inventory::FleetInventory, fleetgate_core::provenance::Provenance) {
    use fleetgate_core::inventory::{InventoryInput, PidProbe, classify_fleet_inventory};
    let inventory = classify_fleet_inventory(
        &InventoryInput {
            roster: &[],
            runtime_rows: &[],
            process_scan: &fleetgate_core::runtime::ProcessScan::of(Vec::new()),
            expected_binding: None,
            now: fleetgate_core::Timestamp::from_unix(1_800_000_000),
            registry_available: true,
            registry_error: None,
            answering_namespace: None,
            hosts: Default::default(),
            peers: Default::default(),
        },
        &|_| PidProbe::Alive,
    );
    assert!(inventory.mutation_gate_satisfied, "{:?}", inventory.blocked_reasons);
    let provenance = fleetgate_core::provenance::Provenance {
        session_ownership: fleetgate_core::provenance::Ownership::Owned,
        blocker_kind: None,
        reasons: vec![],
        heartbeat_age_seconds: Some(1.0),
    };
    (inventory, provenance)
}

/// A merger's merge of PR `pr` through `dialect` (PR 1 lands on `main`, protected; PR 3 on
/// `feature`, not), refused by the PR workflow with `kind` (no independent approval at the
/// head, or a head pushed after the review), under generated operator rules with every
/// override and asked call approved and generated lifts: it lands on a protected branch only
/// under the `reviewed-merge` lift, and never without an override the roster asks for.
fn check_merge(
    dialect: &dyn Dialect,
    pr: u64,
    kind: BlockerKind,
    own: Vec<Rule>,
    may_override: &[BlockerKind],
    lifted: &[Invariant],
) -> Result<(), TestCaseError> {
    let (tool, mut args, schema) = if dialect.name() == GITEA.name() {
        ("pull_request_write", json!({ "method": "merge", "pull_number": pr }), None)
    } else {
        let schema = json!({ "properties": { "owner": {}, "repo": {}, "pullNumber": {}, "merge_method": {},
                                             "expectedHeadSha": {} } });
        ("merge_pull_request", json!({ "pullNumber": pr }), Some(schema))
    };
    args["owner"] = json!("org");
    args["repo"] = json!("repo");
    let args = args.as_object().cloned().unwrap();
    let effect = effect_of(dialect, tool, &args, schema.as_ref().and_then(Value::as_object));
    let judged = judge(&effect, "merger", &Protection::default(), lifted);
    prop_assert!(judged.breaches.is_empty(), "a plain merge breaks nothing else: {:?}", judged);
    let (permitted, refusal, ask, undetermined) = roster_says(dialect, own, "merger", tool, &args, &effect, Some(pr));
    let approvals = yes_to_everything(may_override);
    let workflow = fleetgate_core::workflow::Refusal::of(kind, "no independent approval at head 1a38ef95aaaa".into());
    let (inventory, provenance) = healthy();
    let verdict = resolve_task_capability(&CapabilityInput {
        profile: "p",
        role: "merger",
        tool,
        class: ToolClass::Mutating,
        ambiguity: None,
        breaches: &judged.breaches,
        lifted: &judged.lifted,
        guarded: &judged.guarded,
        unestablished: undetermined.as_deref(),
        role_permitted: permitted,
        role_refusal: refusal.as_ref(),
        definition_changed: None,
        store_replaced: None,
        evidence: Some(Evidence { diagnostics: &[], provenance: &provenance, inventory: &inventory }),
        workflow: Some(&workflow),
        forward: None,
        action: effect.action,
        ask: ask.as_deref(),
        approvals: Some(&approvals),
        may_override,
        finish: Default::default(),
    });
    // A rule of what the call does that cannot be told from it refuses first (`forge_unavailable`).
    let overridden = may_override.contains(&kind)
        && (permitted || may_override.contains(&BlockerKind::RoleNotPermitted))
        && undetermined.is_none();
    let onto_main = pr == 1;
    if onto_main && !lifted.contains(&Invariant::ReviewedMerge) {
        prop_assert!(!verdict.allowed, "an unreviewed head landed on main: {:?}", verdict);
        if permitted && undetermined.is_none() {
            prop_assert_eq!(verdict.blocker_kind, Some(kind));
            prop_assert!(
                verdict.blocked_reasons.iter().any(|r| r.contains("invariant `reviewed-merge`")),
                "{:?}",
                verdict
            );
        }
    } else {
        // Onto a branch no rule protects, or under the break-glass lift: the operator's
        // override decides, and a lift is named in the reasons of the call it lets through.
        prop_assert_eq!(verdict.allowed, overridden, "{:?}", verdict);
        if verdict.allowed && onto_main {
            prop_assert!(
                verdict.blocked_reasons.iter().any(|r| r.contains("invariant `reviewed-merge` lifted")),
                "{:?}",
                verdict
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Issue 55: `[approvals] may_override = ["approval_required"]` (or `stale_head`) and an
    /// operator who approves let a merger land on `main` a head no reviewer approved.
    #[test]
    fn no_override_lands_an_unreviewed_head_on_a_protected_branch_unless_lifted(
        own in operator_rules(),
        github in any::<bool>(),
        pr in prop::sample::select(vec![1u64, 3]),
        kind in prop::sample::select(vec![BlockerKind::ApprovalRequired, BlockerKind::StaleHead]),
        may_override in prop::sample::subsequence(OVERRIDABLE.to_vec(), 0..=OVERRIDABLE.len()),
        lifted in prop::sample::subsequence(vec![Invariant::ReviewedMerge, Invariant::ScheduledMerge], 0..=2),
    ) {
        let dialect: &dyn Dialect = if github { &GITHUB } else { &GITEA };
        check_merge(dialect, pr, kind, own, &may_override, &lifted)?;
    }
}

/// One rule of what a call does holds for every dialect: a merge of PR 1 (`feature` →
/// `main`, read from the forge) is a merge onto `main` whether gitea-mcp's
/// `pull_request_write` or GitHub's `merge_pull_request` makes it, and neither names `main`
/// in its arguments.
#[test]
fn a_rule_of_what_a_call_does_reads_every_dialect_s_merge_alike() {
    let onto =
        |branch: &str| EffectMatch { op: vec![Op::Merge], branch: vec![branch.into()], ..EffectMatch::default() };
    let merges: [(&dyn Dialect, &str, Value); 2] = [
        (&GITEA, "pull_request_write", json!({ "method": "merge", "pull_number": 1 })),
        (&GITHUB, "merge_pull_request", json!({ "pullNumber": 1 })),
    ];
    for (dialect, tool, args) in merges {
        let mut args = args.as_object().cloned().unwrap();
        args.insert("owner".into(), json!("org"));
        args.insert("repo".into(), json!("repo"));
        let effect = effect_of(dialect, tool, &args, None);
        let ops = operations(&effect, Some(1), &Protection::default()).expect("established");
        assert_eq!(onto("main").holds(Does::Known(&ops)), Some(true), "{tool}: {ops:?}");
        assert_eq!(onto("release/*").holds(Does::Known(&ops)), Some(false), "{tool}");
        let protected = EffectMatch { op: vec![Op::Merge], protected: Some(true), ..EffectMatch::default() };
        assert_eq!(protected.holds(Does::Known(&ops)), Some(true), "{tool}: the default branch");
    }
}
