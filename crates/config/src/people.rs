//! `[[people]]` and `[approvals] shared`: who each identity is (`fleetgate_core::person`),
//! checked where they are read, and the `approvers` lists and `approvals_required` counts
//! checked against them.
//!
//! ```toml
//! [[people]]
//! name = "bob"
//! identities = ["oidc:u-1234", "oauth:bob@example.com", "os:bob", "principal:bob-laptop"]
//!
//! [approvals]
//! shared = ["os:root"]        # an account several people use: never a person
//! ```

use crate::Invalid;
use fleetgate_core::person::{People, Person, realm, same_identity, well_formed};
use serde::Deserialize;

/// One `[[people]]` table as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPerson {
    name: String,
    identities: Vec<String>,
}

fn identity_error(where_: &str, identity: &str) -> Invalid {
    Invalid::NotAnIdentity { at: where_.to_owned(), identity: identity.to_owned() }
}

pub(crate) fn resolve(
    raw: Vec<RawPerson>,
    shared: Vec<String>,
    links: Vec<(String, String)>,
) -> Result<People, Invalid> {
    for s in &shared {
        if !well_formed(s) {
            return Err(identity_error("[approvals] shared", s));
        }
    }
    let mut people: Vec<Person> = Vec::new();
    for p in raw {
        let at = format!("[[people]] {:?}", p.name);
        if p.name.is_empty() || p.name.len() > 64 || !p.name.chars().all(|c| c.is_ascii_graphic()) {
            return Err(Invalid::PersonName(at));
        }
        if people.iter().any(|q| q.name == p.name) {
            return Err(Invalid::PersonTwice(at));
        }
        if p.identities.is_empty() {
            return Err(Invalid::PersonNoIdentity(at));
        }
        for id in &p.identities {
            if !well_formed(id) {
                return Err(identity_error(&at, id));
            }
            // What a token's claim, a sign-in's subject or a tokens-file name can be.
            let name = &id[realm(id).len() + 1..];
            let claimed = matches!(realm(id), "oidc" | "oauth" | "principal");
            if claimed && (name.len() > 128 || !name.chars().all(|c| c.is_ascii_graphic())) {
                return Err(Invalid::IdentityUnmet { at, id: id.clone() });
            }
            if id.starts_with("token:") || shared.iter().any(|s| same_identity(s, id)) {
                return Err(Invalid::IdentityShared { at, id: id.clone() });
            }
            if let Some(other) = people.iter().find(|q| q.identities.iter().any(|i| same_identity(i, id))) {
                return Err(Invalid::IdentityTaken { at, id: id.clone(), owner: other.name.clone() });
            }
        }
        people.push(Person { name: p.name, identities: p.identities });
    }
    let links = links.into_iter().map(|(subject, name)| (format!("oauth:{subject}"), format!("principal:{name}")));
    Ok(People { people, shared, links: links.collect() })
}

/// Check an `approvers` list: each an identity in its realm, a group, or a person of
/// `[[people]]`.
pub(crate) fn check_approvers(where_: &str, approvers: &[String], people: &People) -> Result<(), Invalid> {
    for a in approvers {
        if let Some(name) = a.strip_prefix("person:") {
            if people.named(name).is_none() {
                return Err(Invalid::ApproverNoPerson { at: where_.to_owned(), approver: a.clone() });
            }
            continue;
        }
        let ok = ["oidc:", "os:", "token:", "group:"]
            .iter()
            .any(|p| a.strip_prefix(p).is_some_and(|rest| !rest.trim().is_empty() && !rest.contains(char::is_control)));
        if !ok {
            return Err(Invalid::ApproverUnknown { at: where_.to_owned(), approver: a.clone() });
        }
    }
    Ok(())
}

/// Check an `approvals_required` against the approvers: more approvals than the named
/// approvers are people (one person named by two identities is one; a shared credential is
/// none) could never be given.
pub(crate) fn check_required(
    where_: &str,
    required: u32,
    approvers: &[String],
    people: &People,
) -> Result<(), Invalid> {
    if !(1..=10).contains(&required) {
        return Err(Invalid::RequiredRange { at: where_.to_owned(), required });
    }
    if required < 2 || approvers.is_empty() || approvers.iter().any(|a| a.starts_with("group:")) {
        return Ok(());
    }
    // Each approver's person (`person:<name>`), else the identity itself; one account
    // however it is spelled is one.
    let mut persons: Vec<String> = Vec::new();
    for a in approvers {
        let person = match a.strip_prefix("person:") {
            Some(_) => Some(a.clone()),
            None if people.is_shared(a) => None,
            None => Some(people.person_of(a).map_or_else(|| a.clone(), |p| format!("person:{}", p.name))),
        };
        if let Some(p) = person
            && !persons.iter().any(|q| same_identity(q, &p))
        {
            persons.push(p);
        }
    }
    if persons.len() < required as usize {
        return Err(Invalid::RequiredUnmet {
            at: where_.to_owned(),
            required,
            persons: persons.len(),
            approvers: approvers.join(", "),
        });
    }
    Ok(())
}
