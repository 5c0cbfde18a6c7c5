//! `fleetgate rules test|diff`: a rule change previewed against the fleet's own audited
//! traffic (`fleetgate_core::replay`), or two rule sets compared (`rules::diff`).

use crate::cli::args::RulesCommand;
use crate::cli::context::Ctx;
use crate::cli::output::{Exit, Reply};
use anyhow::anyhow;
use fleetgate_config::FleetConfig;
use fleetgate_core::Timestamp;
use fleetgate_core::replay::{ReplayRules, replay};

/// Run one `rules` command.
pub fn run(ctx: &Ctx, cmd: &RulesCommand) -> anyhow::Result<Reply> {
    match cmd {
        RulesCommand::Test { since, until, profile } => {
            let time = |flag: &str, t: &Option<String>| {
                t.as_deref().map(Timestamp::parse).transpose().map_err(|e| anyhow!("invalid {flag}: {e}"))
            };
            let (since, until) = (time("--since", since)?, time("--until", until)?);
            let entries = ctx.store()?.list_audit(since, usize::MAX)?;
            let digest = ctx.config.rules_digest();
            let new = ReplayRules {
                members: &ctx.config.members,
                roles: &ctx.config.roles,
                rules: &ctx.config.rules,
                digest: &digest,
            };
            let window = entries
                .iter()
                .filter(|e| until.is_none_or(|u| e.at < u) && profile.as_deref().is_none_or(|p| e.profile == p));
            let report = replay(window, &new);
            let header = format!("replayed against the rules of {} ({digest})", ctx.config.source);
            let exit = if report.flipped == 0 { Exit::Ok } else { Exit::No };
            Ok(Reply { text: report.text(&header), value: serde_json::to_value(&report)?, exit })
        }
        RulesCommand::Diff { old, new } => {
            let load = |path| FleetConfig::load(Some(path), &ctx.env);
            let diff = fleetgate_core::rules::diff(&load(old)?.rules, &load(new)?.rules);
            let exit = if diff.is_empty() { Exit::Ok } else { Exit::No };
            Ok(Reply { text: diff.text(), value: serde_json::to_value(&diff)?, exit })
        }
    }
}
