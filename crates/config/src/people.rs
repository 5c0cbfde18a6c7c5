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

use fleetgate_core::person::{People, Person, REALMS, realm, same_identity, well_formed};
use serde::Deserialize;

/// One `[[people]]` table as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPerson {
    name: String,
    identities: Vec<String>,
}

fn identity_error(where_: &str, identity: &str) -> String {
    format!(
        "{where_}: {identity:?} is not an identity: write one of {} followed by a name (\"oidc:<subject>\" signed in \
         at the fleet's issuer, \"oauth:<principal claim>\" an OAuth token's calls, \"os:<user>\" the CLI's user, \
         \"principal:<name>\" a tokens-file or mapped principal, \"token:<name>\" an operator token)",
        REALMS.map(|r| format!("{r}:")).join(", ")
    )
}

/// The people, checked: names unique words, identities well formed, never a token (a
/// credential), never under two people nor shared; `links` are `[[http.oauth.principals]]`'s
/// (subject, name) pairs.
pub(crate) fn resolve(
    raw: Vec<RawPerson>,
    shared: Vec<String>,
    links: Vec<(String, String)>,
) -> Result<People, String> {
    for s in &shared {
        if !well_formed(s) {
            return Err(identity_error("[approvals] shared", s));
        }
    }
    let mut people: Vec<Person> = Vec::new();
    for p in raw {
        let at = format!("[[people]] {:?}", p.name);
        if p.name.is_empty() || p.name.len() > 64 || !p.name.chars().all(|c| c.is_ascii_graphic()) {
            return Err(format!("{at}: a name is 1 to 64 printable characters without spaces"));
        }
        if people.iter().any(|q| q.name == p.name) {
            return Err(format!("{at} is declared twice"));
        }
        if p.identities.is_empty() {
            return Err(format!("{at} lists no identity"));
        }
        for id in &p.identities {
            if !well_formed(id) {
                return Err(identity_error(&at, id));
            }
            // What a token's claim, a sign-in's subject or a tokens-file name can be.
            let name = &id[realm(id).len() + 1..];
            let claimed = matches!(realm(id), "oidc" | "oauth" | "principal");
            if claimed && (name.len() > 128 || !name.chars().all(|c| c.is_ascii_graphic())) {
                return Err(format!(
                    "{at}: {id:?} can never be met: a subject, a claim's value and a principal's name are 1 to 128 \
                     printable ASCII characters without spaces (what the gateways and the dashboard accept)"
                ));
            }
            if id.starts_with("token:") || shared.iter().any(|s| same_identity(s, id)) {
                return Err(format!(
                    "{at}: {id} is a credential several people use, never one person (every token:, and [approvals] \
                     shared)"
                ));
            }
            if let Some(other) = people.iter().find(|q| q.identities.iter().any(|i| same_identity(i, id))) {
                return Err(format!("{at}: {id} is {:?}'s already: one identity is one person", other.name));
            }
        }
        people.push(Person { name: p.name, identities: p.identities });
    }
    let links = links.into_iter().map(|(subject, name)| (format!("oauth:{subject}"), format!("principal:{name}")));
    Ok(People { people, shared, links: links.collect() })
}

/// Check an `approvers` list: each an identity in its realm, a group, or a person of
/// `[[people]]`.
pub(crate) fn check_approvers(where_: &str, approvers: &[String], people: &People) -> Result<(), String> {
    for a in approvers {
        if let Some(name) = a.strip_prefix("person:") {
            if people.named(name).is_none() {
                return Err(format!("{where_} approvers: {a:?} names no person of [[people]]"));
            }
            continue;
        }
        let ok = ["oidc:", "os:", "token:", "group:"]
            .iter()
            .any(|p| a.strip_prefix(p).is_some_and(|rest| !rest.trim().is_empty() && !rest.contains(char::is_control)));
        if !ok {
            return Err(format!(
                "{where_} approvers: {a:?} names no approver: write \"oidc:<subject>\" (signed in at the fleet's \
                 issuer), \"os:<user>\" (the CLI's user), \"token:<name>\", \"group:<name>\" or \"person:<name>\" (of \
                 [[people]])"
            ));
        }
    }
    Ok(())
}

/// Check an `approvals_required` against the approvers: more approvals than the named
/// approvers are people (one person named by two identities is one; a shared credential is
/// none) could never be given.
pub(crate) fn check_required(where_: &str, required: u32, approvers: &[String], people: &People) -> Result<(), String> {
    if !(1..=10).contains(&required) {
        return Err(format!("{where_} approvals_required = {required}: expected 1 to 10"));
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
        return Err(format!(
            "{where_} approvals_required = {required} but the approvers named are {} person(s) ({}): one person \
             through two channels is one approver and a shared credential is none, so the call could never pass",
            persons.len(),
            approvers.join(", ")
        ));
    }
    Ok(())
}
