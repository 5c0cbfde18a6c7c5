//! What the roster lets through that an operator must know about: the invariants it lifts,
//! and the HTTP principals that may hold both an author's and a reviewer's profile. Named
//! at every gateway's start (the log), by `fleetgate doctor` and on the dashboard.

use fleetgate_config::FleetConfig;
use fleetgate_core::effect::Invariant;
use fleetgate_gateway::Principals;
use serde::Serialize;

/// One lifted invariant, with what lifting it gives up.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Lift {
    /// The invariant's name.
    pub invariant: Invariant,
    /// What the fleet gives up.
    pub exposes: &'static str,
}

/// What the roster lets through that an operator must know about.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PolicyNotes {
    /// Every lifted invariant.
    pub lifted: Vec<Lift>,
    /// Principals that may hold both an author's and a reviewer's profile.
    pub principals: Vec<String>,
    /// Whether such a principal's second session counts as independent (it does unless
    /// `[workflow] independent_review = "principal"`).
    pub principals_count_as_independent: bool,
}

impl PolicyNotes {
    /// The notes as log or report lines.
    pub fn lines(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .lifted
            .iter()
            .map(|l| format!("invariant {} is lifted ([invariants] lift): {}", l.invariant, l.exposes))
            .collect();
        for p in &self.principals {
            let why = if self.principals_count_as_independent {
                "; set [workflow] independent_review = \"principal\", or give it one of the two"
            } else {
                " (independent_review = \"principal\" keeps its own approvals from counting)"
            };
            out.push(format!("{p}{why}"));
        }
        out
    }
}

/// The notes of `config`, with the principals of its tokens file (`tokens`) and its
/// `[[http.oauth.principals]]`.
pub fn notes(config: &FleetConfig, tokens: Option<&Principals>) -> PolicyNotes {
    let lifted =
        config.lifted().into_iter().map(|invariant| Lift { invariant, exposes: invariant.exposes() }).collect();
    let mut principals: Vec<(String, Vec<String>)> =
        tokens.into_iter().flat_map(Principals::principals).map(|p| (p.name.clone(), p.profiles.clone())).collect();
    if let Some(oauth) = &config.http.oauth {
        principals.extend(oauth.principals.iter().map(|p| {
            let name = p.name.clone().unwrap_or_else(|| format!("oauth:{}", p.subject));
            (name, p.profiles.clone())
        }));
    }
    let members: Vec<(String, String)> = config.members.iter().map(|m| (m.profile.clone(), m.role.clone())).collect();
    PolicyNotes {
        lifted,
        principals: fleetgate_core::workflow::principals_holding_independent_roles(&principals, &members),
        principals_count_as_independent: config.workflow.independent_review
            != fleetgate_core::workflow::Independence::Principal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROSTER: &str = r#"
[fleet]
name = "f"
forge = "gitea-mcp"

[[members]]
namespace = "gitea-author"
profile = "prgs-author"
role = "author"

[[members]]
namespace = "gitea-reviewer"
profile = "prgs-reviewer"
role = "reviewer"
"#;

    #[test]
    fn every_lift_and_every_principal_of_two_independent_roles_is_named() {
        let plain = FleetConfig::parse(ROSTER, "f.toml").unwrap();
        assert_eq!(
            notes(&plain, None),
            PolicyNotes { principals_count_as_independent: false, ..PolicyNotes::default() }
        );
        let lifted = format!(
            "{ROSTER}\n[workflow]\nindependent_review = \"off\"\n\n[invariants]\nlift = [\"scheduled-merge\"]\n"
        );
        let config = FleetConfig::parse(&lifted, "f.toml").unwrap();
        let tokens =
            Principals::parse(&format!("{} ci\n{} alice prgs-author\n", "a".repeat(64), "b".repeat(64)), "tokens")
                .unwrap();
        let n = notes(&config, Some(&tokens));
        let names: Vec<&str> = n.lifted.iter().map(|l| l.invariant.as_str()).collect();
        assert_eq!(names, ["scheduled-merge", "independent-review"]);
        assert_eq!(n.principals.len(), 1, "ci may use both, alice only the author's: {:?}", n.principals);
        assert!(n.principals_count_as_independent, "under `off` its second session counts");
        let lines = n.lines();
        assert!(lines[0].contains("scheduled-merge") && lines[0].contains("push after the approval"), "{lines:?}");
        assert!(lines[2].contains("independent_review = \"principal\""), "{lines:?}");
    }
}
