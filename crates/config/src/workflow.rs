//! `[workflow]`: the pull-request workflow's settings.

use fleetgate_core::protect::Protection;
use fleetgate_core::workflow::Independence;
use serde::Deserialize;

/// The lease TTL when the roster names none: ten minutes, the seed's.
pub const DEFAULT_LEASE_TTL_SECONDS: i64 = 600;
/// The longest lease TTL accepted: a day.
pub const MAX_LEASE_TTL_SECONDS: i64 = 86_400;

/// `[workflow]` resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkflowSettings {
    /// A PR lease lives this long past its holder's last gated call on the PR.
    pub lease_ttl_seconds: i64,
    /// Which approvals count.
    pub independent_review: Independence,
    /// The command the CLI (`fleetgate capability`, `fleetgate pr`) starts to read a PR's
    /// head from the forge: the downstream server, as the fleet's clients launch it. A
    /// gateway reads through its own downstream and never needs it.
    pub forge_command: Vec<String>,
    /// The first part of every PR key (`remote/owner/repo`): the `[binding]` remote, else
    /// `forge`.
    pub remote: String,
    /// Protected branches and paths: `default_branch` (default `main`), the globs of
    /// `protected_branches`, and `protected_paths` (default: the forges' workflow files).
    pub protection: Protection,
    /// `decision_lock` (default true): a reviewer session that recorded a decision on a PR
    /// decides on no other PR until that one is merged or closed.
    pub decision_lock: bool,
    /// `issue_lock` (default true): an author's PR that references an issue another author
    /// holds the issue lock of is refused.
    pub issue_lock: bool,
}

impl Default for WorkflowSettings {
    fn default() -> Self {
        Self {
            lease_ttl_seconds: DEFAULT_LEASE_TTL_SECONDS,
            independent_review: Independence::Principal,
            forge_command: Vec::new(),
            remote: "forge".into(),
            protection: Protection::default(),
            decision_lock: true,
            issue_lock: true,
        }
    }
}

/// `[workflow]` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawWorkflow {
    lease_ttl_seconds: Option<i64>,
    independent_review: Option<Independence>,
    forge_command: Option<Vec<String>>,
    default_branch: Option<String>,
    protected_branches: Option<Vec<String>>,
    protected_paths: Option<Vec<String>>,
    decision_lock: Option<bool>,
    issue_lock: Option<bool>,
}

impl RawWorkflow {
    pub(super) fn resolve(raw: Option<Self>, remote: Option<&str>) -> Result<WorkflowSettings, crate::Invalid> {
        use crate::Invalid;
        let defaults = WorkflowSettings::default();
        let remote = remote.map_or(defaults.remote, str::to_owned);
        let Some(raw) = raw else { return Ok(WorkflowSettings { remote, ..defaults }) };
        let ttl = raw.lease_ttl_seconds.unwrap_or(defaults.lease_ttl_seconds);
        if !(1..=MAX_LEASE_TTL_SECONDS).contains(&ttl) {
            return Err(Invalid::LeaseTtl(ttl));
        }
        let forge_command = raw.forge_command.unwrap_or_default();
        if forge_command.first().is_some_and(|c| c.trim().is_empty()) {
            return Err(Invalid::ForgeCommand);
        }
        let default_branch = raw.default_branch.unwrap_or(defaults.protection.default_branch);
        if default_branch.trim().is_empty() {
            return Err(Invalid::DefaultBranch);
        }
        let globs = |key: &'static str, list: Vec<String>| {
            if list.iter().any(|g| g.trim().is_empty()) {
                return Err(Invalid::EmptyPattern(key));
            }
            Ok(list)
        };
        let protection = Protection {
            forge_default: None,
            default_branch,
            branches: globs("protected_branches", raw.protected_branches.unwrap_or_default())?,
            paths: globs("protected_paths", raw.protected_paths.unwrap_or(defaults.protection.paths))?,
        };
        Ok(WorkflowSettings {
            lease_ttl_seconds: ttl,
            independent_review: raw.independent_review.unwrap_or(defaults.independent_review),
            forge_command,
            remote,
            protection,
            decision_lock: raw.decision_lock.unwrap_or(defaults.decision_lock),
            issue_lock: raw.issue_lock.unwrap_or(defaults.issue_lock),
        })
    }
}
