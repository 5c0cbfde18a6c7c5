//! The preview answers the operator's question (issue 53): `fleetgate capability` on a
//! gitea-mcp fleet with no forge to read (no `[workflow] forge_command`). A call the rules
//! refuse whatever it does is refused by role — a reviewer's merge — and an invariant its
//! arguments alone show still comes first; only an answer that depends on what the call does
//! (the merger's own merge, whose base decides the release rule) needs the forge.

use crate::support::{fleetgate, json_of};
use serde_json::Value;

const ROSTER: &str = r#"
[fleet]
forge = "gitea-mcp"

[[members]]
namespace = "gitea-reviewer"
profile = "prgs-reviewer"
role = "reviewer"

[[members]]
namespace = "gitea-merger"
profile = "prgs-merger"
role = "merger"

[[rules]]
effect = { op = "merge", branch = "release/*" }
roles = ["merger"]
decision = "ask"
approvals_required = 2
"#;

/// `capability` for `profile` calling `pull_request_write` with `args`: its answer and exit.
fn preview(profile: &str, args: &str) -> (Value, Option<i32>) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("fleet.toml");
    std::fs::write(&config, ROSTER).unwrap();
    let out = fleetgate(
        &dir.path().join("r.sqlite3"),
        &[
            "--config",
            config.to_str().unwrap(),
            "capability",
            "--profile",
            profile,
            "--tool",
            "pull_request_write",
            "--args",
            args,
            "--json",
        ],
    );
    (json_of(&out), out.status.code())
}

#[test]
fn without_a_forge_a_call_refused_whatever_it_does_is_refused_by_role() {
    let merge = r#"{"method": "merge", "owner": "o", "repo": "r", "pull_number": 3}"#;
    let (reviewer, code) = preview("prgs-reviewer", merge);
    assert_eq!(reviewer["blocker_kind"], "role_not_permitted", "{reviewer}");
    assert_eq!(code, Some(3));
    let reasons = reviewer["blocked_reasons"].to_string();
    assert!(reasons.contains("role reviewer may not"), "{reasons}");
    assert!(reviewer["operator_action"].as_str().unwrap().contains("merger"), "{reviewer}");
    // What the arguments alone show breaks an invariant: that comes first, whoever asks.
    let forced = r#"{"method": "merge", "owner": "o", "repo": "r", "pull_number": 3, "force_merge": true}"#;
    assert_eq!(preview("prgs-reviewer", forced).0["blocker_kind"], "invariant_violated");
    // The merger's merge: who may make it, and how, depends on its base: the forge is needed.
    let (merger, _) = preview("prgs-merger", merge);
    assert_eq!(merger["blocker_kind"], "forge_unavailable", "{merger}");
    assert!(merger["blocked_reasons"].to_string().contains("could not be established"), "{merger}");
}
