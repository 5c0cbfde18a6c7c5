//! What the roster lets through that an operator must know about: the invariants it lifts,
//! the HTTP principals that may hold both an author's and a reviewer's profile, and the
//! approvals it cannot tell people apart for. Named at every gateway's start (the log), by
//! `fleetgate doctor` and on the dashboard.

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
    /// Where an approval will be refused because nothing says who is who: a rule needing
    /// more than one person whose approvers reach fleetgate through more than one channel
    /// `[[people]]` does not map, and tokens-file principals `[[people]]` names no one behind.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub people: Vec<String>,
    /// The words the gate reads as closing or reopening an issue in text a call lands (the
    /// forge's defaults and `[forge]`'s own), when the roster names a forge dialect: the
    /// operator checks them against the instance's `app.ini`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keywords: Option<ForgeKeywords>,
}

/// The closing and reopening keywords a forge dialect reads ([`PolicyNotes::keywords`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ForgeKeywords {
    /// The dialect (`[fleet] forge`).
    pub forge: String,
    /// Read as closing an issue.
    pub close: Vec<String>,
    /// Read as reopening one (none on GitHub).
    pub reopen: Vec<String>,
}

impl ForgeKeywords {
    /// The note as one line.
    pub fn line(&self) -> String {
        let reopen = if self.reopen.is_empty() { "none".to_owned() } else { self.reopen.join(", ") };
        format!(
            "{} reads as closing an issue: {}; as reopening one: {reopen} ([forge] close_keywords / reopen_keywords \
             add an instance's own)",
            self.forge,
            self.close.join(", ")
        )
    }
}

/// What a note is about, for a reader that shows them apart (the dashboard's badges).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NoteKind {
    /// An invariant the roster lifts ([`PolicyNotes::lifted`]).
    Lifted,
    /// A principal that may hold both an author's and a reviewer's profile.
    Principal,
    /// An approval fleetgate cannot tell people apart for ([`PolicyNotes::people`]).
    People,
    /// The words the gate reads as closing or reopening an issue ([`PolicyNotes::keywords`]).
    Keywords,
}

impl NoteKind {
    /// Whether a note of this kind asks the operator to act: all but the keywords, which are
    /// shown to check against the forge's configuration.
    pub fn asks_action(self) -> bool {
        self != Self::Keywords
    }
}

/// One note as a line, with what it is about.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NoteLine {
    /// What the line is about.
    pub kind: NoteKind,
    /// The line.
    pub text: String,
}

impl PolicyNotes {
    /// Every note as a line, with its kind: the lifts, the principals, the people, then the
    /// keywords.
    pub fn labelled(&self) -> Vec<NoteLine> {
        let line = |kind, text| NoteLine { kind, text };
        let lifted = self.lifted.iter().map(|l| {
            line(NoteKind::Lifted, format!("invariant {} is lifted ([invariants] lift): {}", l.invariant, l.exposes))
        });
        let why = if self.principals_count_as_independent {
            "; set [workflow] independent_review = \"principal\", or give it one of the two"
        } else {
            " (independent_review = \"principal\" keeps its own approvals from counting)"
        };
        let principals = self.principals.iter().map(|p| line(NoteKind::Principal, format!("{p}{why}")));
        let people = self.people.iter().map(|p| line(NoteKind::People, p.clone()));
        let keywords = self.keywords.iter().map(|k| line(NoteKind::Keywords, k.line()));
        lifted.chain(principals).chain(people).chain(keywords).collect()
    }

    /// The notes an operator must act on, as log or report lines: all but the keywords (the
    /// doctor shows those apart).
    pub fn lines(&self) -> Vec<String> {
        self.labelled().into_iter().filter(|l| l.kind.asks_action()).map(|l| l.text).collect()
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
    let tokens: Vec<String> = tokens.into_iter().flat_map(Principals::principals).map(|p| p.name.clone()).collect();
    PolicyNotes {
        people: people_notes(config, &tokens),
        lifted,
        principals: fleetgate_core::workflow::principals_holding_independent_roles(&principals, &members),
        principals_count_as_independent: config.workflow.independent_review
            != fleetgate_core::workflow::Independence::Principal,
        keywords: config.dialect().map(|d| {
            let (close, reopen) = d.grammar().words();
            ForgeKeywords { forge: d.name().to_owned(), close, reopen }
        }),
    }
}

/// The approvals `config` cannot tell people apart for (see [`PolicyNotes::people`]).
fn people_notes(config: &FleetConfig, tokens: &[String]) -> Vec<String> {
    let people = &config.people;
    let defaults = ("[approvals]".to_owned(), config.approvals.approvers.clone(), config.approvals.required);
    let asking = config.rules.rules().iter().filter(|r| r.ask).map(|r| {
        let approvers = if r.approvers.is_empty() { config.approvals.approvers.clone() } else { r.approvers.clone() };
        let required = if r.required > 0 { r.required } else { config.approvals.required };
        (format!("rule {}", r.origin), approvers, required)
    });
    let mut out = Vec::new();
    let mut asks = false;
    for (rule, approvers, required) in std::iter::once(defaults).chain(asking) {
        asks |= rule != "[approvals]";
        // The channels an approver may come by, unmapped: any of them when none is named.
        let unmapped: std::collections::BTreeSet<&str> = if approvers.is_empty() {
            ["os", "oidc", "token"].into()
        } else {
            approvers
                .iter()
                .filter(|a| !a.starts_with("person:") && people.person_of(a).is_none())
                .map(|a| if a.starts_with("group:") { "oidc" } else { fleetgate_core::person::realm(a) })
                .collect()
        };
        if required > 1 && unmapped.len() > 1 {
            out.push(format!(
                "{rule} needs {required} people, and its approvers may answer through several channels ({}): a second \
                 approval counts only when fleetgate can tell the two apart (two sign-ins, two OS users, people \
                 [[people]] names); a shared credential (token:dashboard) never counts",
                unmapped.into_iter().collect::<Vec<_>>().join(", ")
            ));
        }
    }
    let behind = |t: &String| people.person_of(&fleetgate_core::person::principal_identity(t)).is_some();
    let nobody: Vec<&str> = tokens.iter().filter(|t| !behind(t)).map(String::as_str).collect();
    if (asks || !config.approvals.may_override.is_empty()) && !nobody.is_empty() {
        out.push(format!(
            "[[people]] names no one behind the principal(s) {}: an approval of their calls is refused (fleetgate \
             cannot tell the approver from the person who made the call) until [[people]] lists \
             \"principal:<name>\" under that person",
            nobody.join(", ")
        ));
    }
    out
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
        let keywords = notes(&plain, None).keywords;
        assert_eq!(keywords.as_ref().map(|k| k.forge.as_str()), Some("gitea-mcp"), "the words it reads, shown");
        assert_eq!(
            notes(&plain, None),
            PolicyNotes { principals_count_as_independent: false, keywords, ..PolicyNotes::default() }
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
        // Each line says what it is about; the keywords come last and only in the labelled lines.
        let kinds: Vec<NoteKind> = n.labelled().iter().map(|l| l.kind).collect();
        use NoteKind::{Keywords, Lifted, Principal};
        assert_eq!(kinds, [Lifted, Lifted, Principal, Keywords]);
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(n.labelled()[3].text.starts_with("gitea-mcp reads as closing an issue: "), "{:?}", n.labelled());
    }

    #[test]
    fn approvals_fleetgate_cannot_tell_people_apart_for_are_named() {
        let asking = format!(
            "{ROSTER}\n[[rules]]\ntool = \"pull_request_write\"\nargs = {{ \"/method\" = [\"merge\"] }}\n\
             roles = [\"reviewer\"]\ndecision = \"ask\"\napprovals_required = 2\n"
        );
        let tokens = Principals::parse(&format!("{} ci\n", "a".repeat(64)), "tokens").unwrap();
        let n = notes(&FleetConfig::parse(&asking, "f.toml").unwrap(), Some(&tokens));
        assert_eq!(n.people.len(), 2, "{:?}", n.people);
        assert!(n.people[0].starts_with("rule f.toml:") && n.people[0].contains("needs 2 people"), "{:?}", n.people);
        assert!(n.people[1].contains("principal(s) ci"), "{:?}", n.people);
        // Named people, one channel each: nothing to say.
        let named = asking.replace(
            "approvals_required = 2",
            "approvers = [\"person:a\", \"person:b\"]\napprovals_required = 2\n\n[[people]]\nname = \"a\"\n\
             identities = [\"os:a\", \"principal:ci\"]\n\n[[people]]\nname = \"b\"\nidentities = [\"oidc:b\"]",
        );
        let n = notes(&FleetConfig::parse(&named, "f.toml").unwrap(), Some(&tokens));
        assert!(n.people.is_empty(), "{:?}", n.people);
    }
}
