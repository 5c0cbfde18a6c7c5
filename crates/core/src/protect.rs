//! What is protected: the default branch (as configured and as the forge reports it), the
//! `[workflow] protected_branches` globs, and the `[workflow] protected_paths` (the forges'
//! workflow files, which run with the repository's Actions token, by default) — judged with
//! paths cleaned as Gitea cleans them (`\` read as `/`, `.` dropped; a `..` component is
//! refused outright). Which calls write which branch and path is each forge dialect's
//! statement (`crate::dialect`); the `protected-branch` and `protected-path` invariants
//! (`crate::effect`) hold it against this.

use crate::glob::glob_match;

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

pub use crate::blocker::PROTECTED_ACTION;

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
            Err(why) => return Some(why.to_string()),
        };
        let lower = cleaned.to_ascii_lowercase();
        self.paths
            .iter()
            .find(|p| glob_match(&p.to_ascii_lowercase(), &lower))
            .map(|p| format!("[workflow] protected_paths pattern `{p}` (path `{cleaned}`)"))
    }
}

/// A path with a `..` component (as the caller spelled it): it climbs out of where the gate
/// can follow.
struct Climbs<'a>(&'a str);

impl std::fmt::Display for Climbs<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "path `{}` has a `..` component", self.0)
    }
}

/// A file path as Gitea cleans it: `\` as `/`, empty and `.` components dropped; a `..`
/// component is refused (it climbs out of where the gate can follow).
fn clean_path(path: &str) -> Result<String, Climbs<'_>> {
    let slashed = path.replace('\\', "/");
    let mut parts = Vec::new();
    for part in slashed.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(Climbs(path)),
            p => parts.push(p),
        }
    }
    Ok(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_the_forge_s_and_the_globbed_branches_are_protected() {
        let p = Protection {
            branches: vec!["release/*".into()],
            forge_default: Some("trunk".into()),
            ..Protection::default()
        };
        assert!(p.branch_rule("main").unwrap().contains("default branch"));
        assert!(p.branch_rule("refs/heads/main").is_some());
        assert!(p.branch_rule("trunk").unwrap().contains("as the forge reports it"));
        assert!(p.branch_rule("release/1.2").unwrap().contains("release/*"));
        assert_eq!(p.branch_rule("feature"), None);
    }

    #[test]
    fn workflow_files_are_protected_however_spelled() {
        let p = Protection::default();
        for path in [
            ".gitea/workflows/ci.yml",
            "./.github//workflows/x.yaml",
            ".forgejo\\workflows\\a.yml",
            ".GITEA/Workflows/b.yml",
        ] {
            assert!(p.path_rule(path).is_some_and(|r| r.contains("protected_paths")), "{path}");
        }
        assert!(p.path_rule("a/../.gitea/workflows/x").unwrap().contains(".."));
        assert_eq!(p.path_rule(".gitea/README"), None);
    }
}
