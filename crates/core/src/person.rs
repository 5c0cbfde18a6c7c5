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

/// An OS account as the CLI records it (`bob (uid 1000)`, `uid 1000` when `/etc/passwd`
/// names no user) or a roster writes it (`bob`; `root` is uid 0 by definition).
fn account(name: &str) -> (Option<&str>, Option<&str>) {
    let numeric = |uid: &str| !uid.is_empty() && uid.bytes().all(|b| b.is_ascii_digit());
    if let Some(uid) = name.strip_prefix("uid ").filter(|u| numeric(u)) {
        return (None, Some(uid));
    }
    if let Some((user, uid)) = name.rsplit_once(" (uid ").and_then(|(u, rest)| Some((u, rest.strip_suffix(')')?)))
        && numeric(uid)
    {
        return (Some(user), Some(uid));
    }
    (Some(name), (name == "root").then_some("0"))
}

/// One identity the same as another: equal, or one OS account however it is spelled (its
/// user name when both spellings have one, else its uid). Exact otherwise: this decides who
/// an identity *is* (an approver named, a person of `[[people]]`), so a look-alike is never
/// enough — [`may_be_same`] is for refusing.
pub fn same_identity(a: &str, b: &str) -> bool {
    match (a.split_once(':'), b.split_once(':')) {
        (Some(("os", x)), Some(("os", y))) => match (account(x), account(y)) {
            ((Some(n), _), (Some(m), _)) => n == m,
            ((_, Some(u)), (_, Some(v))) => u == v,
            _ => false,
        },
        _ => a == b,
    }
}

/// Whether two identities might be one though [`same_identity`] cannot say so: spelled alike
/// but for letter case (an issuer's `Bob@Example.com`, a roster's `bob@example.com`), the
/// gateway's `oauth:<x>` and a sign-in's `oidc:<x>` (one subject when the principal claim is
/// `sub` at the same issuer; another issuer's or another claim's otherwise), an OS user named
/// on one side and known only by uid on the other. Never proof of one person, never of two.
pub fn may_be_same(a: &str, b: &str) -> bool {
    let (Some((ra, x)), Some((rb, y))) = (a.split_once(':'), b.split_once(':')) else { return a == b };
    let subject = |r: &str| r == "oauth" || r == "oidc";
    if same_identity(a, b) || ((ra == rb || (subject(ra) && subject(rb))) && x.eq_ignore_ascii_case(y)) {
        return true;
    }
    if (ra, rb) != ("os", "os") {
        return false;
    }
    let ((n, u), (m, v)) = (account(x), account(y));
    match (n.zip(m).map(|(n, m)| n.eq_ignore_ascii_case(m)), u.zip(v).map(|(u, v)| u == v)) {
        // Nothing to compare: a name against a uid.
        (None, None) => true,
        (names, uids) => names == Some(true) || uids == Some(true),
    }
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
        realm(identity) == "token" || self.shared.iter().any(|s| same_identity(s, identity))
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
        let pair = |alike: fn(&str, &str) -> bool| {
            all_a.iter().find_map(|x| all_b.iter().find(|y| alike(x, y)).map(|y| (x, y)))
        };
        if let Some((x, _)) = pair(same_identity) {
            return Relation::Same(format!("both are {x}"));
        }
        let (pa, pb) = (self.people_of(a), self.people_of(b));
        if let Some(p) = pa.iter().find(|p| pb.contains(p)) {
            return Relation::Same(format!("both are {p} ([[people]])"));
        }
        if pa.len() == 1 && pb.len() == 1 {
            return Relation::Different;
        }
        let shown = |all: &[String]| all.join(", ");
        // Spelled alike: never two people on the strength of a letter's case or an issuer.
        if let Some((x, y)) = pair(may_be_same) {
            return Relation::Unknown(format!(
                "{x} and {y} may be one identity spelled two ways (letter case, another issuer's subject, a user \
                 name against a uid), and no [[people]] entry says whose each is ({} / {})",
                shown(&all_a),
                shown(&all_b)
            ));
        }
        // A credential several people use tells no one apart.
        let personal = |all: &[String], r: &str| all.iter().any(|i| realm(i) == r && !self.is_shared(i));
        if pa.len() <= 1 && pb.len() <= 1 && PERSONAL_REALMS.iter().any(|r| personal(&all_a, r) && personal(&all_b, r))
        {
            return Relation::Different;
        }
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
        // The gateway's subject and a sign-in's of the same spelling: one person only when the
        // sign-in brings the claim itself (another issuer's subject may collide).
        assert!(matches!(none.relation(&carol, &ids(&["oidc:carol"])), Relation::Unknown(_)), "may be");
        assert!(matches!(none.relation(&carol, &ids(&["oidc:carol", "oauth:carol"])), Relation::Same(_)));
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

    #[test]
    fn one_account_or_one_claim_spelled_two_ways_is_never_two_people() {
        let p = roster();
        // The CLI records its user as `os:<user> (uid N)`; the roster writes `os:<user>`.
        let agent = ids(&["oauth:bob@example.com"]);
        assert!(matches!(p.relation(&ids(&["os:bob (uid 1000)"]), &agent), Relation::Same(_)));
        assert!(matches!(p.relation(&ids(&["os:bob (uid 1000)"]), &ids(&["oidc:u-1234"])), Relation::Same(_)));
        assert_eq!(p.person_of("os:bob (uid 1000)").map(|b| b.name.as_str()), Some("bob"));
        assert!(p.is_shared("os:root (uid 0)") && p.is_shared("os:uid 0"), "root is uid 0");
        // Known by uid alone (no /etc/passwd entry): maybe Bob, never someone else for sure.
        assert!(matches!(p.relation(&ids(&["os:uid 1000"]), &agent), Relation::Unknown(_)));
        assert!(!same_identity("os:uid 1000", "os:bob") && may_be_same("os:uid 1000", "os:bob"));
        assert!(same_identity("os:uid 1000", "os:bob (uid 1000)") && !same_identity("os:bob", "os:bobby"));
        // An issuer that capitalises the claim: maybe Bob, never someone else for sure.
        let capital = ids(&["oauth:Bob@Example.com"]);
        assert!(matches!(p.relation(&ids(&["os:bob"]), &capital), Relation::Unknown(_)));
        assert!(matches!(p.relation(&ids(&["oidc:u-1234"]), &capital), Relation::Unknown(_)));
        assert!(p.person_of("oauth:Bob@Example.com").is_none(), "who someone is: exact");
        // A sign-in whose subject is spelled as a principal claim of a person's agent is not
        // that person (another issuer, or a claim the user chose): it only may be.
        let alike = People {
            people: vec![Person { name: "alice".into(), identities: ids(&["oauth:2", "os:alice"]) }],
            ..People::default()
        };
        assert!(alike.person_of("oidc:2").is_none());
        let mallory = ids(&["oidc:2", "os:mallory"]);
        assert!(matches!(alike.relation(&mallory, &ids(&["os:alice"])), Relation::Unknown(_)));
        assert_eq!(alike.relation(&ids(&["os:mallory"]), &ids(&["os:alice"])), Relation::Different);
    }
}
