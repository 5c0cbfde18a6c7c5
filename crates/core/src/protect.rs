//! Protected branches and paths: no role writes, deletes, creates over or renames
//! a protected branch through the forge's file and branch tools, and no role writes a
//! protected path (the forge's workflow files, which run with the repository's Actions
//! token) on any branch. The merge, judged by the workflow, is the only way onto a
//! protected branch.
//!
//! Read the way the server (gitea-mcp, go-sdk generation) and Gitea read the arguments:
//! `create_or_update_file` / `delete_file` commit to `new_branch_name` when it is given
//! (made from `branch_name`), else to `branch_name`, and to the repository's default branch
//! when neither is given — so a write that names no branch is refused. Gitea cleans a file
//! path (`\` read as `/`, `.` dropped); a path with a `..` component is refused outright.
//! `create_branch` creates `branch` (from `old_branch`, which is only read);
//! `delete_branch` deletes `branch`; `rename_branch` renames one branch to another, and
//! every branch it names must be unprotected.

use crate::glob::glob_match;
use serde_json::{Map, Value};

/// What is protected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Protection {
    /// The repository's default branch (`[workflow] default_branch`).
    pub default_branch: String,
    /// Globs of more protected branches (`[workflow] protected_branches`, e.g. `release/*`).
    pub branches: Vec<String>,
    /// Globs of paths no role writes on any branch (`[workflow] protected_paths`).
    pub paths: Vec<String>,
    /// The default branch as the forge reports it, when it did (protected beside the
    /// configured one: a wrong `default_branch` in the config never unprotects the real one).
    pub forge_default: Option<String>,
}

/// The default `[workflow] protected_paths`: the workflow files of Gitea, GitHub and
/// Forgejo Actions.
pub const DEFAULT_PROTECTED_PATHS: &[&str] = &[".gitea/workflows/**", ".github/workflows/**", ".forgejo/workflows/**"];

impl Default for Protection {
    fn default() -> Self {
        Self {
            default_branch: "main".into(),
            branches: Vec::new(),
            paths: DEFAULT_PROTECTED_PATHS.iter().map(|p| (*p).to_owned()).collect(),
            forge_default: None,
        }
    }
}

/// The operator action of `protected_branch`.
pub const PROTECTED_ACTION: &str = "change protected branches only by merging an approved pull request: push to a \
     feature branch and open a PR; workflow files are changed by an operator, outside the fleet (or drop the \
     pattern from [workflow] protected_branches / protected_paths)";

/// The operator action of a file or branch write judged against a forge that could not
/// answer (its default branch, its open PRs).
pub const UNREAD_ACTION: &str = "check that the downstream answers search_repos and list_pull_requests for this \
     repository, then retry; file and branch writes fail closed until the forge can be read";

/// The operator action of a branch delete that would close an open PR.
pub const OPEN_PR_ACTION: &str = "merge or close the PR first (closing a PR is the controller's), then delete the \
     branch";

/// Why a call touches something protected (`protected_branch`), and what the operator does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The branch or path, the rule, in words.
    pub reason: String,
    /// One sentence an operator can act on.
    pub action: &'static str,
}

impl Violation {
    /// A call on a protected branch or path.
    pub fn protected(reason: String) -> Self {
        Self { reason, action: PROTECTED_ACTION }
    }
}

impl Protection {
    /// The rule that protects `branch`, if one does.
    pub fn branch_rule(&self, branch: &str) -> Option<String> {
        let name = branch.strip_prefix("refs/heads/").unwrap_or(branch);
        if name == self.default_branch {
            return Some(format!("the default branch `{}`", self.default_branch));
        }
        if self.forge_default.as_deref() == Some(name) {
            return Some(format!("the repository's default branch `{name}` (as the forge reports it)"));
        }
        self.branches
            .iter()
            .find(|p| glob_match(p, name))
            .map(|p| format!("[workflow] protected_branches pattern `{p}`"))
    }

    /// The rule that protects `path` (as Gitea cleans it), or why the path is refused.
    pub fn path_rule(&self, path: &str) -> Option<String> {
        let cleaned = match clean_path(path) {
            Ok(cleaned) => cleaned,
            Err(why) => return Some(why),
        };
        let lower = cleaned.to_ascii_lowercase();
        self.paths
            .iter()
            .find(|p| glob_match(&p.to_ascii_lowercase(), &lower))
            .map(|p| format!("[workflow] protected_paths pattern `{p}` (path `{cleaned}`)"))
    }
}

/// A file path as Gitea cleans it: `\` as `/`, empty and `.` components dropped; a `..`
/// component is refused (it climbs out of where the gate can follow).
fn clean_path(path: &str) -> Result<String, String> {
    let slashed = path.replace('\\', "/");
    let mut parts = Vec::new();
    for part in slashed.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(format!("path `{path}` has a `..` component")),
            p => parts.push(p),
        }
    }
    Ok(parts.join("/"))
}

fn text<'a>(args: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// Does `tool` called with `args` touch a protected branch or path? `None`: it does not (or
/// it is not a file or branch tool).
pub fn judge(protection: &Protection, tool: &str, args: &Map<String, Value>) -> Option<Violation> {
    let branch = |verb: &str, name: &str| {
        protection
            .branch_rule(name)
            .map(|rule| Violation::protected(format!("`{tool}` {verb} branch `{name}`: {rule}")))
    };
    match tool {
        "create_or_update_file" | "delete_file" => {
            let target = text(args, "new_branch_name").or_else(|| text(args, "branch_name"));
            let Some(target) = target else {
                return Some(Violation::protected(format!(
                    "`{tool}` names no branch_name: the server would write the default branch `{}`",
                    protection.default_branch
                )));
            };
            if let Some(v) = branch("writes", target) {
                return Some(v);
            }
            let path = text(args, "path").or_else(|| text(args, "filePath"))?;
            protection.path_rule(path).map(|rule| Violation::protected(format!("`{tool}` writes {rule}")))
        }
        "create_branch" => {
            text(args, "branch").or_else(|| text(args, "new_branch_name")).and_then(|b| branch("creates", b))
        }
        "delete_branch" => text(args, "branch").and_then(|b| branch("deletes", b)),
        "rename_branch" => {
            let names = ["branch", "old_branch", "old_branch_name", "new_name", "new_branch_name"];
            let named: Vec<&str> = names.iter().filter_map(|k| text(args, k)).collect();
            if named.is_empty() {
                // Without a name the server renames nothing it can be told; refuse rather
                // than guess which branch it would take (the default one, perhaps).
                return Some(Violation::protected(format!("`{tool}` names no branch")));
            }
            named.into_iter().find_map(|b| branch("renames", b))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    fn protection() -> Protection {
        Protection { branches: vec!["release/*".into()], ..Protection::default() }
    }

    #[test]
    fn writes_to_the_default_or_a_protected_branch_are_refused() {
        let p = protection();
        let refused = |tool: &str, a: Value| judge(&p, tool, &args(a)).map(|v| v.reason);
        assert!(
            refused("create_or_update_file", json!({"branch_name": "main", "path": "a"}))
                .unwrap()
                .contains("default branch")
        );
        assert!(refused("create_or_update_file", json!({"path": "a"})).unwrap().contains("names no branch_name"));
        assert!(
            refused("delete_file", json!({"branch_name": "", "path": "a"})).unwrap().contains("names no branch_name")
        );
        assert!(
            refused("create_or_update_file", json!({"branch_name": "release/1.2", "path": "a"}))
                .unwrap()
                .contains("release/*")
        );
        assert!(
            refused("create_or_update_file", json!({"branch_name": "feat", "new_branch_name": "main", "path": "a"}))
                .is_some()
        );
        assert_eq!(
            refused("create_or_update_file", json!({"branch_name": "main", "new_branch_name": "feat", "path": "a"})),
            None
        );
        assert_eq!(refused("create_or_update_file", json!({"branch_name": "feat", "path": "src/a.rs"})), None);
        assert!(refused("create_branch", json!({"branch": "main", "old_branch": "feat"})).is_some());
        assert_eq!(refused("create_branch", json!({"branch": "feat", "old_branch": "main"})), None);
        assert!(refused("delete_branch", json!({"branch": "refs/heads/main"})).is_some());
        assert!(refused("rename_branch", json!({"branch": "feat", "new_name": "main"})).is_some());
        assert!(refused("rename_branch", json!({"branch": "main", "new_name": "x"})).is_some());
        assert!(refused("rename_branch", json!({})).is_some());
        assert_eq!(refused("issue_write", json!({"branch_name": "main"})), None);
    }

    #[test]
    fn the_forge_s_default_branch_is_protected_beside_the_configured_one() {
        let p = Protection { forge_default: Some("trunk".into()), ..protection() };
        let write = |b: &str| judge(&p, "create_or_update_file", &args(json!({"branch_name": b, "path": "a"})));
        assert!(write("trunk").unwrap().reason.contains("as the forge reports it"));
        assert!(write("main").is_some(), "the configured one stays protected");
        assert_eq!(write("feat"), None);
    }

    #[test]
    fn workflow_files_are_refused_on_every_branch_however_spelled() {
        let p = protection();
        for path in [
            ".gitea/workflows/ci.yml",
            "./.github//workflows/x.yaml",
            ".forgejo\\workflows\\a.yml",
            ".GITEA/Workflows/b.yml",
        ] {
            let v = judge(&p, "create_or_update_file", &args(json!({"branch_name": "feat", "path": path})));
            assert!(v.is_some_and(|v| v.reason.contains("protected_paths")), "{path}");
        }
        let v =
            judge(&p, "delete_file", &args(json!({"branch_name": "feat", "path": "a/../.gitea/workflows/x"}))).unwrap();
        assert!(v.reason.contains(".."), "{}", v.reason);
        assert_eq!(
            judge(&p, "create_or_update_file", &args(json!({"branch_name": "feat", "path": ".gitea/README"}))),
            None
        );
    }

    /// The branch a file write lands on as the server reads it: `new_branch_name`, else
    /// `branch_name`, else the default branch (Gitea's file API).
    fn server_target<'a>(args: &'a Map<String, Value>, default: &'a str) -> &'a str {
        let named = |k: &str| args.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
        named("new_branch_name").or_else(|| named("branch_name")).unwrap_or(default)
    }

    fn branch() -> impl Strategy<Value = Option<&'static str>> {
        prop::sample::select(vec![
            None,
            Some(""),
            Some("main"),
            Some("refs/heads/main"),
            Some("release/2"),
            Some("feat"),
        ])
    }

    proptest! {
        /// No file write the gate lets through lands, as the server reads it, on a protected
        /// branch or a protected path.
        #[test]
        fn no_allowed_write_lands_on_a_protected_branch_or_path(
            tool in prop::sample::select(vec!["create_or_update_file", "delete_file"]),
            branch_name in branch(),
            new_branch_name in branch(),
            path in prop::sample::select(vec!["src/a.rs", ".gitea/workflows/x.yml", "./.github/workflows/y", "a/../.forgejo/workflows/z", "docs/../README"]),
        ) {
            let p = protection();
            let mut args = Map::new();
            for (key, value) in [("branch_name", branch_name), ("new_branch_name", new_branch_name)] {
                if let Some(v) = value {
                    args.insert(key.into(), Value::from(v));
                }
            }
            args.insert("path".into(), Value::from(path));
            if judge(&p, tool, &args).is_none() {
                let target = server_target(&args, &p.default_branch);
                prop_assert!(p.branch_rule(target).is_none(), "{tool} {args:?} lands on {target}");
                prop_assert!(p.path_rule(path).is_none(), "{tool} {args:?} writes {path}");
            }
        }
    }
}
