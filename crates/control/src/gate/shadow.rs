//! The shadow candidate (`fleetgate serve --shadow`): a candidate roster's rules and
//! invariants every live decision is also judged by, never enforced, and the report of the
//! flips it would have made.

use fleetgate_config::FleetConfig;
use fleetgate_core::Timestamp;
use fleetgate_core::audit::AuditEntry;
use std::sync::Arc;

/// A candidate roster's rules and invariants in shadow (`fleetgate serve --shadow`): each live
/// decision is also judged by them, and where they would decide otherwise the flip is audited
/// and counted — the candidate decides nothing.
#[derive(Debug)]
pub struct ShadowRules {
    /// The candidate roster.
    pub config: Arc<FleetConfig>,
    /// Its rules' digest.
    pub digest: String,
    pub(crate) lifted: Vec<fleetgate_core::effect::Invariant>,
}

impl ShadowRules {
    /// The candidate `config` in shadow.
    pub fn new(config: Arc<FleetConfig>) -> Self {
        Self { digest: config.rules_digest(), lifted: config.lifted(), config }
    }
}

/// The audit log's tool prefix of a shadow flip (`shadow:<tool>`).
pub const SHADOW_EVENT: &str = "shadow:";

/// The shadow candidate's flips on live traffic, grouped like `rules test` groups replayed
/// flips: by (from, to, candidate rule, tool), with the count and the first and last time.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ShadowReport {
    /// Flips in all.
    pub flips: usize,
    /// The candidates they came from (rule digests).
    pub candidates: Vec<String>,
    /// The groups, most flips first.
    pub groups: Vec<ShadowGroup>,
}

/// One group of flips.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ShadowGroup {
    /// The running rules' outcome.
    pub from: String,
    /// The candidate's.
    pub to: String,
    /// What decided it in the candidate.
    pub rule: String,
    /// The tool.
    pub tool: String,
    /// How many calls.
    pub count: usize,
    /// The first and the last.
    pub first: Timestamp,
    /// The last.
    pub last: Timestamp,
}

impl ShadowReport {
    /// The report for a terminal.
    pub fn text(&self) -> String {
        if self.flips == 0 {
            return "the shadow candidate decided every live call as the running rules did".into();
        }
        let mut out = vec![format!(
            "{} live call(s) the shadow candidate ({}) would have decided otherwise:",
            self.flips,
            self.candidates.join(", ")
        )];
        for g in &self.groups {
            out.push(format!(
                "  {} {} -> {}  `{}` by {}  ({} to {})",
                g.count, g.from, g.to, g.tool, g.rule, g.first, g.last
            ));
        }
        // Each line escaped on its own: the newlines between them are the layout.
        out.iter().map(|line| fleetgate_core::text::shown(line, usize::MAX)).collect::<Vec<_>>().join("\n")
    }
}

/// Group the shadow flips among `entries` (the audit log's `shadow:<tool>` events).
pub fn shadow_report<E: std::borrow::Borrow<AuditEntry>>(entries: impl Iterator<Item = E>) -> ShadowReport {
    let mut report = ShadowReport::default();
    for e in entries {
        let e = e.borrow();
        let Some(tool) = e.tool.strip_prefix(SHADOW_EVENT) else { continue };
        let field = |name: &str| {
            e.reasons
                .iter()
                .find_map(|r| r.strip_prefix(name).and_then(|v| v.strip_prefix(": ")))
                .unwrap_or("")
                .to_owned()
        };
        let (from, to, rule, candidate) = (field("from"), field("to"), field("rule"), field("candidate"));
        report.flips += 1;
        if !candidate.is_empty() && !report.candidates.contains(&candidate) {
            report.candidates.push(candidate);
        }
        match report.groups.iter_mut().find(|g| g.from == from && g.to == to && g.rule == rule && g.tool == tool) {
            Some(g) => {
                g.count += 1;
                g.first = g.first.min(e.at);
                g.last = g.last.max(e.at);
            }
            None => report.groups.push(ShadowGroup {
                from,
                to,
                rule,
                tool: tool.to_owned(),
                count: 1,
                first: e.at,
                last: e.at,
            }),
        }
    }
    report.groups.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.tool.cmp(&b.tool)));
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 55: the report escaped its whole text at once, so a terminal showed a literal
    /// `\n` between its lines. Each line is escaped on its own; a newline inside a value still is.
    #[test]
    fn the_shadow_report_prints_one_line_per_group() {
        let flip = |tool: &str| {
            let mut e = AuditEntry::event(
                Timestamp::from_unix(1_700_000_000),
                "prgs-author",
                &format!("{SHADOW_EVENT}{tool}"),
                String::new(),
            );
            e.reasons = ["from: allowed", "to: refused", "rule: fleet.toml:3", "candidate: sha256:c"]
                .map(str::to_owned)
                .to_vec();
            e
        };
        let report = shadow_report([flip("git_add"), flip("evil\nforged line")].into_iter());
        let text = report.text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(!text.contains("\\n  "), "a literal \\n between lines: {text}");
        assert!(lines.iter().any(|l| l.contains("`evil\\nforged line`")), "a value's newline stays escaped: {text}");
    }
}
