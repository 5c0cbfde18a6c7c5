//! Built-in rule profiles for known downstream servers (`[fleet] forge = "…"`).
//!
//! `gitea-mcp`: the official Gitea MCP server, v1.x, whose consolidated tools fold many
//! operations into one tool chosen by a `method` argument. The role matrix is SPEC §9's;
//! tool names and `method` values are the server's own (see `GITEA_MCP_SOURCE`). Every
//! reader is read-only for every role; every write names the roles that may make it; a
//! `method` the matrix does not list, and a tool the profile does not know, are refused for
//! every role (fail closed: the server may grow a tool or a method the fleet has not
//! decided about).

use crate::capability::ToolClass;
use crate::rules::{ArgMatch, Rule};
use serde_json::Value;

/// The profile name of the official Gitea MCP server.
pub const GITEA_MCP: &str = "gitea-mcp";

/// Where the tool names and `method` values of [`gitea_mcp_rules`] were read.
pub const GITEA_MCP_SOURCE: &str = "gitea-mcp v1.x, operation/{pull,issue,repo,label,milestone,notification}";

/// The workflow action of a merge (the PR workflow reads it).
pub const ACTION_MERGE: &str = "merge";
/// The workflow action of a review decision.
pub const ACTION_REVIEW: &str = "review";

struct Entry {
    name: &'static str,
    tool: &'static str,
    methods: &'static [&'static str],
    roles: &'static [&'static str],
    class: Option<ToolClass>,
    action: Option<&'static str>,
}

const fn write(
    name: &'static str,
    tool: &'static str,
    methods: &'static [&'static str],
    roles: &'static [&'static str],
) -> Entry {
    Entry { name, tool, methods, roles, class: Some(ToolClass::Mutating), action: None }
}

const EVERY: &[&str] = &["*"];
const NOBODY: &[&str] = &[];

/// Readers first (never blocked but by role), then writes by method, then the catch-all.
const MATRIX: &[Entry] = &[
    Entry { name: "read", tool: "*_read", methods: &[], roles: EVERY, class: Some(ToolClass::ReadOnly), action: None },
    Entry { name: "list", tool: "list_*", methods: &[], roles: EVERY, class: Some(ToolClass::ReadOnly), action: None },
    Entry { name: "get", tool: "get_*", methods: &[], roles: EVERY, class: Some(ToolClass::ReadOnly), action: None },
    Entry {
        name: "search",
        tool: "search_*",
        methods: &[],
        roles: EVERY,
        class: Some(ToolClass::ReadOnly),
        action: None,
    },
    // Issues.
    write("issue-create", "issue_write", &["create"], &["author", "controller"]),
    write("issue-update", "issue_write", &["update"], &["author", "controller", "reconciler"]),
    write(
        "issue-comment",
        "issue_write",
        &["add_comment"],
        &["author", "reviewer", "merger", "controller", "reconciler"],
    ),
    write("issue-edit-comment", "issue_write", &["edit_comment"], &["author", "reviewer", "controller", "reconciler"]),
    write(
        "issue-labels",
        "issue_write",
        &["add_labels", "remove_label", "replace_labels", "clear_labels"],
        &["author", "controller", "reconciler"],
    ),
    write("issue-dependencies", "issue_write", &["add_dependency", "remove_dependency"], &["author", "controller"]),
    // Pull requests: the author opens and maintains; the merger alone merges; the controller
    // and the reconciler close and reopen.
    write("pr-create", "pull_request_write", &["create"], &["author"]),
    write("pr-maintain", "pull_request_write", &["update_branch", "add_reviewers", "remove_reviewers"], &["author"]),
    write("pr-close", "pull_request_write", &["close", "reopen"], &["controller", "reconciler"]),
    Entry {
        name: "pr-merge",
        tool: "pull_request_write",
        methods: &["merge"],
        roles: &["merger"],
        class: Some(ToolClass::Mutating),
        action: Some(ACTION_MERGE),
    },
    // Reviews: every method is the reviewer's.
    Entry {
        name: "review",
        tool: "pull_request_review_write",
        methods: &[],
        roles: &["reviewer"],
        class: Some(ToolClass::Mutating),
        action: Some(ACTION_REVIEW),
    },
    // The controller's tracker tools; the reconciler's notifications.
    write("labels", "label_write", &[], &["controller"]),
    write("milestones", "milestone_write", &[], &["controller"]),
    write("projects", "project_write", &[], &["controller"]),
    write("notifications", "notification_write", &[], &["reconciler"]),
    // Files and branches: the author's; the merger also deletes a merged branch.
    write("files", "create_or_update_file", &[], &["author"]),
    write("file-delete", "delete_file", &[], &["author"]),
    write("branch-create", "create_branch", &[], &["author"]),
    write("branch-rename", "rename_branch", &[], &["author"]),
    write("branch-delete", "delete_branch", &[], &["author", "merger"]),
    // Anything else the server offers: no role of this fleet may.
    write("other", "*", &[], NOBODY),
];

/// The `gitea-mcp` profile's rules, in the order they decide. A `pull_request_write` update
/// is the author's unless it closes the PR (`/state` absent or `open`); a closing update
/// matches no rule and is refused.
pub fn gitea_mcp_rules() -> Vec<Rule> {
    let mut rules = Vec::new();
    for entry in MATRIX {
        if entry.name == "pr-close" {
            rules.extend(update_rules());
        }
        let args = if entry.methods.is_empty() {
            Vec::new()
        } else {
            vec![("/method".to_owned(), ArgMatch::OneOf(entry.methods.iter().map(|m| Value::from(*m)).collect()))]
        };
        rules.push(Rule {
            origin: format!("{GITEA_MCP}:{}", entry.name),
            tool: entry.tool.to_owned(),
            args,
            roles: entry.roles.iter().map(|r| (*r).to_owned()).collect(),
            class: entry.class,
            action: entry.action.map(str::to_owned),
        });
    }
    rules
}

/// `update` never to a closed state: two rules, `/state` absent or `open`.
fn update_rules() -> Vec<Rule> {
    let update = || ("/method".to_owned(), ArgMatch::OneOf(vec![Value::from("update")]));
    [("pr-update", ArgMatch::Absent), ("pr-update-open", ArgMatch::OneOf(vec![Value::from("open")]))]
        .into_iter()
        .map(|(name, state)| Rule {
            origin: format!("{GITEA_MCP}:{name}"),
            tool: "pull_request_write".to_owned(),
            args: vec![update(), ("/state".to_owned(), state)],
            roles: vec!["author".to_owned()],
            class: Some(ToolClass::Mutating),
            action: None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::gitea_mcp_rules;
    use crate::rules::RuleSet;
    use serde_json::{Map, Value, json};

    fn call(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    fn may(rules: &RuleSet, role: &str, tool: &str, args: Value) -> bool {
        rules.decide(role, tool, Some(&call(args))).is_some_and(|d| d.permitted)
    }

    #[test]
    fn the_profile_is_consistent_and_every_rule_can_decide() {
        let rules = RuleSet::new(gitea_mcp_rules());
        rules.check(rules.rules().len()).unwrap();
    }

    #[test]
    fn the_matrix_of_spec_9() {
        let r = RuleSet::new(gitea_mcp_rules());
        for role in ["author", "reviewer", "merger", "controller", "reconciler"] {
            assert!(may(&r, role, "pull_request_read", json!({ "method": "get" })), "{role} reads");
            assert!(may(&r, role, "list_pull_requests", json!({})), "{role} lists");
            assert!(!may(&r, role, "pull_request_write", json!({ "method": "frobnicate" })), "unknown method");
            assert!(!may(&r, role, "create_release", json!({})), "{role}: not in the matrix");
        }
        assert!(may(&r, "merger", "pull_request_write", json!({ "method": "merge" })));
        for role in ["author", "reviewer", "controller", "reconciler"] {
            assert!(!may(&r, role, "pull_request_write", json!({ "method": "merge" })), "{role} never merges");
        }
        assert!(may(&r, "author", "pull_request_write", json!({ "method": "create" })));
        assert!(may(&r, "author", "pull_request_write", json!({ "method": "update", "title": "t" })));
        assert!(!may(&r, "author", "pull_request_write", json!({ "method": "update", "state": "closed" })));
        assert!(may(&r, "controller", "pull_request_write", json!({ "method": "close" })));
        assert!(may(&r, "reviewer", "pull_request_review_write", json!({ "method": "create" })));
        assert!(!may(&r, "author", "pull_request_review_write", json!({ "method": "create" })));
        assert!(may(&r, "merger", "issue_write", json!({ "method": "add_comment" })));
        assert!(!may(&r, "merger", "issue_write", json!({ "method": "edit_comment" })));
        assert!(may(&r, "merger", "delete_branch", json!({})));
        assert!(may(&r, "reconciler", "notification_write", json!({ "method": "mark_read" })));
        let review =
            r.decide("reviewer", "pull_request_review_write", Some(&call(json!({ "method": "create" })))).unwrap();
        assert_eq!(review.action.as_deref(), Some("review"));
        let merge = r.decide("merger", "pull_request_write", Some(&call(json!({ "method": "merge" })))).unwrap();
        assert_eq!(merge.action.as_deref(), Some("merge"));
    }
}
