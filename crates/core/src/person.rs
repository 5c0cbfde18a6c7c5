//! People, not spellings: who an identity is.
//!
//! One person reaches fleetgate through several identities — an agent's calls under an HTTP
//! principal (`oauth:<claim value>` for an OAuth token, a tokens-file or
//! `[[http.oauth.principals]]` name), a dashboard sign-in (`oidc:<sub>`), the CLI's OS user
//! (`os:<user>`) — and a credential several people use (`token:dashboard`, an OS account named
//! in `[approvals] shared`) is nobody in particular. Every check that says "a person" — the
//! requester never answers their own request, `approvals_required = N` counts N people — asks
//! [`People::relation`] whether two parties are one person, two, or cannot be told apart.
//!
//! What says who is who: `[[people]]` (the operator's mapping, each identity under at most one
//! person), the links `[[http.oauth.principals]]` makes (a subject and the name its calls
//! carry), and the identities a party brings itself (a sign-in at the fleet's issuer is also
//! `oauth:<its principal claim>`, so the issuer's claims link it to the agent principals of the
//! same person). Two parties are **different** people when the mapping puts them under two
//! people, or when both have an identity in one personal realm (`oidc`, `oauth`, `os`) and
//! none in common there; **one** when they share an identity or a person; otherwise fleetgate
//! **cannot tell**, and fails closed: such an approval is refused (a denial never is).
//!
//! Pure: the roster's mapping and the parties' identities come in as values.

use serde::{Deserialize, Serialize};

/// The realms of an identity (`<realm>:<name>`) a person has at most one of, as far as
/// fleetgate can tell two people apart: the issuer's subjects (a sign-in), the gateway's OAuth
/// principal claim, this host's OS accounts. Tokens-file and mapped principals (`principal:`)
/// are credentials: one person may hold several.
pub const PERSONAL_REALMS: [&str; 3] = ["oidc", "oauth", "os"];

/// The realms an identity may be written in (`[[people]]`, `[approvals] shared`).
pub const REALMS: [&str; 5] = ["oidc", "oauth", "os", "principal", "token"];

/// One person of `[[people]]`: a name and every identity they reach fleetgate by.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Person {
    /// Their name (`person:<name>` in an `approvers` list).
    pub name: String,
    /// Their identities (`oidc:<sub>`, `oauth:<claim value>`, `os:<user>`, `principal:<name>`).
    pub identities: Vec<String>,
}

/// Who is who: `[[people]]`, the shared credentials and the principal mapping's links.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct People {
    /// `[[people]]`.
    pub people: Vec<Person>,
    /// `[approvals] shared`: identities several people use (every `token:` is one too).
    pub shared: Vec<String>,
    /// Identities known to be one party: an OAuth subject (`oauth:<claim value>`) and the
    /// name `[[http.oauth.principals]]` gives its calls (`principal:<name>`).
    pub links: Vec<(String, String)>,
}

/// The identity a request's HTTP principal is: `oauth:<claim value>` as recorded, any other
/// name (a tokens-file principal, a mapped OAuth subject) as `principal:<name>`.
pub fn principal_identity(principal: &str) -> String {
    if principal.starts_with("oauth:") { principal.to_owned() } else { format!("principal:{principal}") }
}

/// The realm of an identity (`os` of `os:alice`).
pub fn realm(identity: &str) -> &str {
    identity.split_once(':').map_or("", |(realm, _)| realm)
}

/// Whether `identity` is written in a realm fleetgate knows, with a name.
pub fn well_formed(identity: &str) -> bool {
    identity.split_once(':').is_some_and(|(realm, name)| REALMS.contains(&realm) && !name.is_empty())
}

/// One identity the same as another: equal, or the gateway's `oauth:<x>` and a sign-in's
/// `oidc:<x>` (when the principal claim is `sub` they are one subject of one issuer; when it
/// is not, equating them can only refuse more).
pub fn same_identity(a: &str, b: &str) -> bool {
    let subject = |i: &str| i.strip_prefix("oauth:").or_else(|| i.strip_prefix("oidc:")).map(str::to_owned);
    a == b || subject(a).is_some_and(|x| subject(b).as_deref() == Some(x.as_str()))
}

/// What two parties are to each other.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Relation {
    /// One person: why (the identity or the person they share).
    Same(String),
    /// Two people.
    Different,
    /// Fleetgate cannot tell: why.
    Unknown(String),
}

impl People {
    /// Whether `identity` is a credential several people use: every `token:`, and `[approvals]
    /// shared`.
    pub fn is_shared(&self, identity: &str) -> bool {
        realm(identity) == "token" || self.shared.iter().any(|s| s == identity)
    }

    /// The person `[[people]]` lists `identity` under.
    pub fn person_of(&self, identity: &str) -> Option<&Person> {
        self.people.iter().find(|p| p.identities.iter().any(|i| same_identity(i, identity)))
    }

    /// The person named `name`.
    pub fn named(&self, name: &str) -> Option<&Person> {
        self.people.iter().find(|p| p.name == name)
    }

    /// Every identity a party known by `known` is: those, the links of the principal mapping,
    /// and every identity of the people they are.
    pub fn known_as(&self, known: &[String]) -> Vec<String> {
        let mut all: Vec<String> = known.to_vec();
        let mut i = 0;
        while i < all.len() {
            let id = all[i].clone();
            let linked = self
                .links
                .iter()
                .filter_map(|(a, b)| if same_identity(a, &id) { Some(b) } else { same_identity(b, &id).then_some(a) });
            let theirs = self.person_of(&id).into_iter().flat_map(|p| &p.identities);
            for more in linked.chain(theirs) {
                if !all.contains(more) {
                    all.push(more.clone());
                }
            }
            i += 1;
        }
        all
    }

    /// The people of `[[people]]` a party known by `known` is (more than one: the mapping
    /// contradicts itself, and they cannot be told apart from either).
    pub fn people_of(&self, known: &[String]) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for id in self.known_as(known) {
            if let Some(p) = self.person_of(&id)
                && !names.contains(&p.name.as_str())
            {
                names.push(&p.name);
            }
        }
        names
    }

    /// Whether the party known by `known` is a shared credential and nothing else.
    pub fn only_shared(&self, known: &[String]) -> bool {
        let all = self.known_as(known);
        !all.is_empty() && all.iter().all(|i| self.is_shared(i))
    }

    /// Whether parties known by `a` and by `b` are one person, two, or cannot be told apart.
    pub fn relation(&self, a: &[String], b: &[String]) -> Relation {
        let (all_a, all_b) = (self.known_as(a), self.known_as(b));
        if let Some(x) = all_a.iter().find(|x| all_b.iter().any(|y| same_identity(x, y))) {
            return Relation::Same(format!("both are {x}"));
        }
        let (pa, pb) = (self.people_of(a), self.people_of(b));
        if let Some(p) = pa.iter().find(|p| pb.contains(p)) {
            return Relation::Same(format!("both are {p} ([[people]])"));
        }
        if pa.len() == 1 && pb.len() == 1 {
            return Relation::Different;
        }
        // A credential several people use tells no one apart.
        let personal = |all: &[String], r: &str| -> Vec<String> {
            all.iter().filter(|i| realm(i) == r && !self.is_shared(i)).cloned().collect()
        };
        if pa.len() <= 1 && pb.len() <= 1 {
            for r in PERSONAL_REALMS {
                let (ia, ib) = (personal(&all_a, r), personal(&all_b, r));
                if !ia.is_empty() && !ib.is_empty() {
                    return Relation::Different;
                }
            }
        }
        let shown = |all: &[String]| all.join(", ");
        Relation::Unknown(format!(
            "nothing says whether {} and {} are one person or two: no [[people]] entry names both apart, and \
             they share no realm a person has one identity in (a sign-in at the fleet's issuer, its OAuth \
             principal claim, an OS user)",
            shown(&all_a),
            shown(&all_b)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    fn roster() -> People {
        People {
            people: vec![
                Person { name: "bob".into(), identities: ids(&["oidc:u-1234", "oauth:bob@example.com", "os:bob"]) },
                Person { name: "alice".into(), identities: ids(&["oidc:u-5678", "os:alice"]) },
            ],
            shared: ids(&["os:root"]),
            links: vec![("oauth:svc-7".into(), "principal:ci-bot".into())],
        }
    }

    #[test]
    fn one_person_through_every_channel_is_one_person() {
        let p = roster();
        // Bob's agent (principal claim `email`) and Bob signed in at the dashboard.
        let agent = ids(&["oauth:bob@example.com"]);
        assert!(matches!(p.relation(&agent, &ids(&["oidc:u-1234"])), Relation::Same(_)));
        assert!(matches!(p.relation(&agent, &ids(&["os:bob"])), Relation::Same(_)));
        assert_eq!(p.relation(&agent, &ids(&["os:alice"])), Relation::Different);
        // The principal mapping links a subject and its name.
        let bot = ids(&[&principal_identity("ci-bot")]);
        assert!(matches!(p.relation(&bot, &ids(&["oidc:x", "oauth:svc-7"])), Relation::Same(_)));
    }

    #[test]
    fn without_a_mapping_only_one_realm_tells_people_apart_and_a_credential_never_does() {
        let none = People::default();
        // The issuer's claims: a sign-in carrying its principal claim is comparable.
        let carol = ids(&["oauth:carol"]);
        assert_eq!(none.relation(&carol, &ids(&["oidc:alice", "oauth:alice"])), Relation::Different);
        assert!(matches!(none.relation(&carol, &ids(&["oidc:carol"])), Relation::Same(_)), "sub is sub");
        // Another realm, or a sign-in without the claim: cannot tell.
        assert!(matches!(none.relation(&ids(&["oauth:bob@x"]), &ids(&["oidc:u-1234"])), Relation::Unknown(_)));
        assert!(matches!(none.relation(&carol, &ids(&["os:carol"])), Relation::Unknown(_)));
        assert!(matches!(none.relation(&ids(&["principal:bot"]), &ids(&["os:root"])), Relation::Unknown(_)));
        assert!(matches!(none.relation(&carol, &ids(&["token:dashboard"])), Relation::Unknown(_)));
        assert_eq!(none.relation(&ids(&["os:a"]), &ids(&["os:b"])), Relation::Different);
        assert!(none.only_shared(&ids(&["token:dashboard"])));
        // A shared OS account tells no one apart.
        let p = roster();
        assert!(matches!(p.relation(&ids(&["os:root"]), &ids(&["os:carol"])), Relation::Unknown(_)));
        assert!(p.only_shared(&ids(&["os:root"])));
    }

    #[test]
    fn a_declared_person_is_known_in_each_realm_they_list() {
        let p = roster();
        // Alice lists an OS user: another OS user is someone else; a sign-in she does not
        // list is another subject of the issuer, so someone else too.
        assert_eq!(p.relation(&ids(&["os:alice"]), &ids(&["os:carol"])), Relation::Different);
        assert_eq!(p.relation(&ids(&["os:alice"]), &ids(&["oidc:carol"])), Relation::Different);
        // Carol's OAuth principal: Alice lists no `oauth:` identity, so nothing says.
        assert!(matches!(p.relation(&ids(&["os:alice"]), &ids(&["oauth:carol"])), Relation::Unknown(_)));
        assert_eq!(principal_identity("oauth:x"), "oauth:x");
        assert_eq!(principal_identity("ci-bot"), "principal:ci-bot");
        assert!(well_formed("os:a") && !well_formed("alice") && !well_formed("os:") && !well_formed("mail:a"));
    }
}
