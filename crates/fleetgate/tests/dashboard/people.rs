//! People, not spellings (issue 53), against the real binary and an OpenID provider on
//! loopback: Bob's agent calls under whatever `[http.oauth] principal_claim` names (`sub`,
//! `email`), with and without a `[[http.oauth.principals]]` name; Bob signed in to the
//! dashboard (`oidc:<sub>`) never approves that call, nor does the CLI's user when
//! `[[people]]` says it is Bob, or when nothing says who it is (fail closed); Alice, signed
//! in, does. A two-person request: the CLI's user and the dashboard's token of one person
//! leave it pending; two people approve it; a denial by either denies it.

use crate::support::{Dashboard, dashboard_with, get, http};
use fleetgate_core::approval::{ApprovalRequest, call_digest, request_id};
use fleetgate_testkit::oidc::Provider;
use serde_json::{Value, json};
use std::net::SocketAddr;

/// `http://host:port/path?query` → (address, path and query).
fn split(url: &str) -> (SocketAddr, String) {
    let rest = url.strip_prefix("http://").expect("a loopback http URL");
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    (host.parse().unwrap(), format!("/{path}"))
}

/// A signed-in session of `login` at `d`: its cookie and CSRF token.
fn sign_in(d: &Dashboard, login: &str) -> (String, String) {
    let to = get(d.addr, "/auth/login", &[]).header("location").unwrap().to_owned();
    let (issuer, authorize) = split(&to);
    let query = authorize.split_once('?').unwrap().1;
    let back = get(issuer, &format!("/authorize/login?{query}&login={login}"), &[]);
    let (_, callback) = split(back.header("location").expect("the provider sends the browser back"));
    let answered = get(d.addr, &callback, &[]);
    assert_eq!(answered.status, 200, "{}", answered.body);
    let cookie = answered.header("set-cookie").unwrap().split(';').next().unwrap().to_owned();
    let me: Value = serde_json::from_str(&get(d.addr, "/api/session", &[("Cookie", &cookie)]).body).unwrap();
    (cookie, me["csrf"].as_str().unwrap().to_owned())
}

/// `verb` (`approve`, `deny`) on request `id` from the page as `session`: status and body.
fn answer(d: &Dashboard, session: &(String, String), id: &str, verb: &str) -> (u16, String) {
    let origin = format!("http://{}", d.addr);
    let path = format!("/api/approvals/{id}/{verb}");
    let a =
        http(d.addr, "POST", &path, &[("Cookie", &session.0), ("Origin", &origin), ("X-Fleetgate-Csrf", &session.1)]);
    (a.status, a.body)
}

/// A pending request about a call `principal` made (`n` tells the calls apart), needing
/// `required` approvals.
fn asked(d: &Dashboard, n: u64, principal: Option<&str>, required: u32) -> String {
    asked_of(d, n, principal, required, &[])
}

/// [`asked`], answered only by `approvers`.
fn asked_of(d: &Dashboard, n: u64, principal: Option<&str>, required: u32, approvers: &[&str]) -> String {
    let store = fleetgate_store::open(d.store().to_str().unwrap()).unwrap();
    let arguments = json!({ "branch": format!("b{n}") }).as_object().cloned();
    let request = ApprovalRequest {
        id: request_id(u128::from(n)),
        requested_at: fleetgate_core::Timestamp::from_unix(1_800_000_000),
        profile: "prgs-author".into(),
        role: "author".into(),
        worker: Some("wrk-a".into()),
        principal: principal.map(str::to_owned),
        tool: "create_branch".into(),
        digest: call_digest(Some("wrk-a"), "create_branch", arguments.as_ref()),
        arguments,
        why: "a rule asks".into(),
        required,
        approvers: approvers.iter().map(|a| (*a).to_owned()).collect(),
        ..ApprovalRequest::default()
    };
    store.request_approval(&request).unwrap().id
}

fn state(d: &Dashboard, id: &str) -> String {
    let all = d.cli(&["approvals", "list", "--all"]);
    let found = all["approvals"].as_array().unwrap().iter().find(|r| r["id"] == id).cloned().unwrap();
    found["state"].as_str().unwrap().to_owned()
}

fn provider() -> Provider {
    let provider = Provider::start(&["rsa-1"]);
    provider.add_user_claiming("u-1234", "Bob Tables", &[], json!({ "email": "bob@example.com" }));
    provider.add_user_claiming("u-5678", "Alice Liddell", &[], json!({ "email": "alice@example.com" }));
    provider
}

#[test]
fn a_person_never_approves_their_own_call_whatever_the_principal_claim_or_the_channel() {
    let provider = provider();
    let me = fleetgate_host::os_user();
    for claim in ["sub", "email"] {
        let value = if claim == "sub" { "u-1234" } else { "bob@example.com" };
        for mapped in [false, true] {
            // Bob's agent's calls, named as the gateway names them under this roster.
            let (principal, mapping) = if mapped {
                (
                    "bob-agent".to_owned(),
                    format!("\n[[http.oauth.principals]]\nsubject = \"{value}\"\nname = \"bob-agent\"\n"),
                )
            } else {
                (format!("oauth:{value}"), String::new())
            };
            let oauth = format!(
                "[http.oauth]\nissuer = \"{}\"\naudience = \"https://gw.test/mcp\"\nprincipal_claim = \"{claim}\"\n{mapping}",
                provider.issuer
            );
            let case = format!("principal_claim {claim}, mapped {mapped}");
            let d = dashboard_with(&oauth, &[], &["--listen", "127.0.0.1:0", "--oidc-client-id", "dash"]).unwrap();
            let (bobs, other) = (asked(&d, 1, Some(&principal), 1), asked(&d, 2, Some(&principal), 1));

            // Bob, signed in: his ID token's subject is not the claim, yet he is the agent's
            // person by the issuer's claims.
            let bob = sign_in(&d, "u-1234");
            let (status, body) = answer(&d, &bob, &bobs, "approve");
            assert_eq!(status, 403, "{case}: {body}");
            assert!(body.contains("made the call"), "{case}: {body}");
            // The CLI's user: nothing says who it is, so it cannot approve (fail closed), but
            // may deny.
            let cli = d.cli(&["approvals", "approve", &bobs]);
            assert!(cli["error"].as_str().is_some_and(|e| e.contains("fails closed")), "{case}: {cli}");
            assert_eq!(state(&d, &bobs), "pending", "{case}");
            // Alice, signed in, is someone else.
            let alice = sign_in(&d, "u-5678");
            let (status, body) = answer(&d, &alice, &other, "approve");
            assert_eq!(status, 200, "{case}: {body}");
            assert_eq!(state(&d, &other), "approved", "{case}");
            drop(d);

            // `[[people]]`: the CLI's user is Bob — refused as Bob; or someone else — approves.
            for (who, refused) in [("bob", true), ("ops", false)] {
                let people = format!(
                    "{oauth}\n[[people]]\nname = \"bob\"\nidentities = [\"oidc:u-1234\", \"oauth:{value}\"{}]\n\n\
                     [[people]]\nname = \"ops\"\nidentities = [\"os:{}\"]\n",
                    if who == "bob" { format!(", \"os:{me}\"") } else { String::new() },
                    if who == "bob" { "nobody-here" } else { me.as_str() }
                );
                let d = dashboard_with(&people, &[], &["--listen", "127.0.0.1:0", "--oidc-client-id", "dash"]).unwrap();
                let id = asked(&d, 3, Some(&principal), 1);
                let cli = d.cli(&["approvals", "approve", &id]);
                if refused {
                    assert!(cli["error"].as_str().is_some_and(|e| e.contains("made the call")), "{case}: {cli}");
                } else {
                    assert_eq!(cli["state"], "approved", "{case}: {cli}");
                }
            }
        }
    }
}

#[test]
fn a_two_person_request_needs_two_people_and_one_denial_denies() {
    let provider = provider();
    let me = fleetgate_host::os_user();
    let token = "tok-two-people-5a4b";
    let roster = format!(
        "[http.oauth]\nissuer = \"{}\"\naudience = \"https://gw.test/mcp\"\n\n[[people]]\nname = \"ops\"\n\
         identities = [\"os:{me}\", \"oidc:u-5678\"]\n",
        provider.issuer
    );
    let args = ["--listen", "127.0.0.1:0", "--oidc-client-id", "dash"];
    let d = dashboard_with(&roster, &[("FLEETGATE_DASHBOARD_TOKEN", token)], &args).unwrap();
    // A token-presenting client reads the page's CSRF token and answers as `token:dashboard`.
    let bearer = format!("Bearer {token}");
    let me_json: Value =
        serde_json::from_str(&get(d.addr, "/api/session", &[("Authorization", &bearer)]).body).unwrap();
    let csrf = me_json["csrf"].as_str().unwrap().to_owned();
    let by_token = |id: &str, verb: &str| {
        let origin = format!("http://{}", d.addr);
        let path = format!("/api/approvals/{id}/{verb}");
        let a = http(
            d.addr,
            "POST",
            &path,
            &[("Authorization", &bearer), ("Origin", &origin), ("X-Fleetgate-Csrf", &csrf)],
        );
        (a.status, a.body)
    };

    // One person, the CLI's user, then the dashboard's token: still pending.
    let id = asked(&d, 1, None, 2);
    assert_eq!(d.cli(&["approvals", "approve", &id])["state"], "pending");
    let (status, body) = by_token(&id, "approve");
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("credential several people use"), "{body}");
    // The same person signed in (Alice is `ops`'s sign-in): still one person.
    let alice = sign_in(&d, "u-5678");
    let (status, body) = answer(&d, &alice, &id, "approve");
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("already"), "{body}");
    assert_eq!(state(&d, &id), "pending");
    // Bob is a second person: approved.
    let bob = sign_in(&d, "u-1234");
    assert_eq!(answer(&d, &bob, &id, "approve").0, 200);
    assert_eq!(state(&d, &id), "approved");

    // A denial by either denies: the token's, after the CLI's approval.
    let denied = asked(&d, 2, None, 2);
    assert_eq!(d.cli(&["approvals", "approve", &denied])["state"], "pending");
    assert_eq!(by_token(&denied, "deny").0, 200);
    assert_eq!(state(&d, &denied), "denied");
    let cli_denied = asked(&d, 3, None, 2);
    assert_eq!(answer(&d, &bob, &cli_denied, "approve").0, 200);
    assert_eq!(d.cli(&["approvals", "deny", &cli_denied])["state"], "denied");
}

/// The CLI's user as the book tells an operator to write it: `os:<user>`, the bare name (the
/// CLI records its answers as `os:<user> (uid N)`).
fn os_name() -> String {
    let me = fleetgate_host::os_user();
    me.split_once(" (uid ").map_or(me.clone(), |(name, _)| name.to_owned())
}

#[test]
fn the_cli_user_spelled_as_the_book_writes_it_is_the_person_listed() {
    let provider = provider();
    let user = os_name();
    // Bob, as the book's example lists him, with his OS user; `shared = []` keeps a root CLI
    // a person here, so only the spelling is on trial.
    let roster = format!(
        "[http.oauth]\nissuer = \"{}\"\naudience = \"https://gw.test/mcp\"\nprincipal_claim = \"email\"\n\n\
         [approvals]\nshared = []\n\n[[people]]\nname = \"bob\"\n\
         identities = [\"oidc:u-1234\", \"oauth:bob@example.com\", \"os:{user}\"]\n",
        provider.issuer
    );
    let d = dashboard_with(&roster, &[], &["--listen", "127.0.0.1:0", "--oidc-client-id", "dash"]).unwrap();
    // Bob's agent's call: Bob, at his terminal, never approves it.
    let own = asked(&d, 1, Some("oauth:bob@example.com"), 1);
    let cli = d.cli(&["approvals", "approve", &own]);
    assert!(cli["error"].as_str().is_some_and(|e| e.contains("made the call")), "{cli}");
    assert_eq!(state(&d, &own), "pending");
    // A two-person request: Bob at his terminal, then Bob signed in, is one person.
    let two = asked(&d, 2, None, 2);
    assert_eq!(d.cli(&["approvals", "approve", &two])["state"], "pending");
    let bob = sign_in(&d, "u-1234");
    let (status, body) = answer(&d, &bob, &two, "approve");
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("already"), "{body}");
    assert_eq!(state(&d, &two), "pending");
}

#[test]
fn a_sign_in_whose_claim_is_spelled_as_an_approvers_subject_is_not_that_approver() {
    // `principal_claim = "preferred_username"`, a claim people choose: Mallory names herself
    // `u-5678`, Alice's subject.
    let provider = provider();
    provider.add_user_claiming("u-9", "Mallory", &[], json!({ "preferred_username": "u-5678" }));
    let roster = format!(
        "[http.oauth]\nissuer = \"{}\"\naudience = \"https://gw.test/mcp\"\nprincipal_claim = \"preferred_username\"\n\n\
         [[people]]\nname = \"alice\"\nidentities = [\"oidc:u-5678\"]\n",
        provider.issuer
    );
    let d = dashboard_with(&roster, &[], &["--listen", "127.0.0.1:0", "--oidc-client-id", "dash"]).unwrap();
    let mallory = sign_in(&d, "u-9");
    for (n, approvers) in [(1, "oidc:u-5678"), (2, "person:alice")] {
        let id = asked_of(&d, n, None, 1, &[approvers]);
        let (status, body) = answer(&d, &mallory, &id, "approve");
        assert_eq!(status, 403, "{approvers}: {body}");
        assert!(body.contains("not among the approvers"), "{approvers}: {body}");
        assert_eq!(state(&d, &id), "pending", "{approvers}");
    }
    // Alice herself may.
    let id = asked_of(&d, 3, None, 1, &["oidc:u-5678"]);
    assert_eq!(answer(&d, &sign_in(&d, "u-5678"), &id, "approve").0, 200);
}
