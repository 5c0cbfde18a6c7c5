//! People, not spellings (issue 53), end to end through real gateways over the forge
//! fixture, the real CLI and the real dashboard signing people in at an OpenID provider on
//! loopback (over raw HTTP, as a browser would):
//!
//! * the policy chapter's two-person rule on merges onto release branches, as the book writes
//!   it: a merge onto `release/1` is held until two people approve — the operator's CLI user,
//!   then the same person signed in (refused as the second), then another person — and only
//!   then lands exactly the approved head; a merge onto `main` follows the other rules;
//! * a denied exact call asked again from a new session: `approval_denied`, no new request, no
//!   notification;
//! * Bob's agent under `principal_claim = "email"` (`oauth:bob@example.com`): Bob signed in
//!   (`oidc:u-1234`) never approves his own call, nor does the CLI's user nothing says is
//!   someone else; Alice does.

use crate::approvals::{Receiver, pending};
use crate::approvers::{Dashboard, http_merger, started_dashboard};
use crate::httpkit::Raw;
use crate::support::{answer, at, serial, wait_until};
use crate::workflow::{Fleet, approve, refused};
use fleetgate_testkit::oidc::Provider;
use serde_json::{Value, json};

/// A signed-in session at a dashboard: its cookie and CSRF token.
struct Session {
    cookie: String,
    csrf: String,
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder().http_status_as_error(false).max_redirects(0).build().into()
}

/// Sign `login` in to `dash` at its issuer, following the redirects by hand.
fn sign_in(dash: &Dashboard, login: &str) -> Session {
    let agent = agent();
    let location = |r: &ureq::http::Response<ureq::Body>| {
        r.headers().get("location").and_then(|v| v.to_str().ok()).expect("a redirect").to_owned()
    };
    let to = location(&agent.get(format!("{}/auth/login", dash.url())).call().unwrap());
    let (authorize, query) = to.split_once('?').unwrap();
    let issuer = authorize.trim_end_matches("/authorize");
    let back = location(&agent.get(format!("{issuer}/authorize/login?{query}&login={login}")).call().unwrap());
    let done = agent.get(&back).call().unwrap();
    assert_eq!(done.status(), 200, "the callback makes a session");
    let cookie = done.headers().get("set-cookie").unwrap().to_str().unwrap().split(';').next().unwrap().to_owned();
    let mut me = agent.get(format!("{}/api/session", dash.url())).header("Cookie", &cookie).call().unwrap();
    let me: Value = serde_json::from_str(&me.body_mut().read_to_string().unwrap()).unwrap();
    Session { cookie, csrf: me["csrf"].as_str().unwrap().to_owned() }
}

/// `verb` (`approve`, `deny`) on request `id` from the page: status and body.
fn from_page(dash: &Dashboard, s: &Session, id: &str, verb: &str) -> (u16, String) {
    let mut a = agent()
        .post(format!("{}/api/approvals/{id}/{verb}", dash.url()))
        .header("Cookie", &s.cookie)
        .header("Origin", dash.url())
        .header("X-Fleetgate-Csrf", &s.csrf)
        .send_empty()
        .unwrap();
    (a.status().as_u16(), a.body_mut().read_to_string().unwrap_or_default())
}

/// The policy chapter's own two-person rule: the `[[rules]]` of its example under "Rules that
/// name what a call does", exactly as the book writes it.
fn books_release_rule() -> String {
    let book = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/policy.md")).unwrap();
    let at = book.find("### Rules that name what a call does").expect("the section");
    let block = book[at..].split("```toml\n").nth(1).unwrap().split("```").next().unwrap();
    let rule = &block[block.find("[[rules]]").expect("the example's rule")..];
    assert!(rule.contains("effect = { op = \"merge\", branch = [\"release/*\"] }"), "{rule}");
    rule.to_owned()
}

/// An approved PR of `branch` onto `base`, the merger holding its merge lease: its number and
/// head.
fn approved_pr(fleet: &mut Fleet, branch: &str, base: &str) -> (i64, String) {
    answer(fleet.call("author", "create_branch", json!({ "branch": branch, "old_branch": base })));
    let head = fleet.push_to(branch, &format!("{branch} onto {base}\n"), branch);
    let create = json!({ "method": "create", "title": branch, "body": "b", "head": branch, "base": base });
    let pr = answer(fleet.call("author", "pull_request_write", create))["number"].as_i64().unwrap();
    assert!(!fleet.claim("reviewer", pr, &head, "review").0);
    answer(fleet.call("reviewer", "pull_request_review_write", approve(pr)));
    let (err, text, _) = fleet.claim("merger", pr, &head, "merge");
    assert!(!err, "{text}");
    (pr, head)
}

#[test]
fn the_books_release_rule_holds_a_merge_onto_release_until_two_people_approve() {
    let _serial = serial();
    let provider = Provider::start(&["rsa-1"]);
    provider.add_user("alice", "Alice Liddell", &[]);
    provider.add_user("bob", "Bob Tables", &[]);
    let me = fleetgate_host::os_user();
    // The operator's CLI user and Alice's sign-in are one person; Bob is another.
    let extra = format!(
        "protected_branches = [\"release/*\"]\n\n[approvals]\nwait_seconds = 0\n\n[[people]]\nname = \"ops\"\n\
         identities = [\"os:{me}\", \"oidc:alice\"]\n\n{}",
        books_release_rule()
    );
    let mut fleet = Fleet::start(&extra);
    fleet.git(&["branch", "release/1", "main"]);
    let release_before = fleet.git(&["rev-parse", "release/1"]);

    // Onto release/1: held, naming its request, which needs two people.
    let (pr, head) = approved_pr(&mut fleet, "fix-1", "release/1");
    let merge = json!({ "method": "merge", "pull_number": pr });
    let held = refused(fleet.call("merger", "pull_request_write", merge.clone()), "approval_pending", "apr-");
    let request = pending(&fleet.f);
    let id = request["id"].as_str().unwrap().to_owned();
    assert!(held.contains(&id), "{held}");
    assert_eq!(request["required"], 2, "{request}");
    assert_eq!(request["arguments"]["head_commit_id"], head.as_str(), "the head it was asked at: {request}");

    // The operator approves from the CLI; then, signed in as Alice, the same person again.
    let first = fleet.f.cli(&["approvals", "approve", &id, "--json"]);
    assert_eq!(first["state"], "pending", "{first}");
    let dash = started_dashboard(&fleet.f, &["--oidc-client-id", "dash", "--oidc-issuer", &provider.issuer]);
    let alice = sign_in(&dash, "alice");
    let (status, body) = from_page(&dash, &alice, &id, "approve");
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("answered request") && body.contains("already"), "{body}");
    let still = refused(fleet.call("merger", "pull_request_write", merge.clone()), "approval_pending", &id);
    assert!(still.contains(&id), "{still}");
    assert_eq!(fleet.git(&["rev-parse", "release/1"]), release_before, "one person, however many channels");

    // Bob is the second person: the identical merge lands exactly the approved head.
    let bob = sign_in(&dash, "bob");
    let (status, body) = from_page(&dash, &bob, &id, "approve");
    assert_eq!(status, 200, "{body}");
    let (err, text, _) = fleet.call("merger", "pull_request_write", merge);
    assert!(!err, "approved by two people: {text}");
    let parents = fleet.git(&["rev-list", "--parents", "-n", "1", "release/1"]);
    assert_eq!(parents.split(' ').collect::<Vec<_>>()[1..], [release_before.as_str(), head.as_str()]);

    // Onto main: the rule does not match, and the merge follows the other rules.
    let main_before = fleet.git(&["rev-parse", "main"]);
    let (pr, head) = approved_pr(&mut fleet, "fix-2", "main");
    let (err, text, _) = fleet.call("merger", "pull_request_write", json!({ "method": "merge", "pull_number": pr }));
    assert!(!err, "a merge onto main asks no one: {text}");
    let parents = fleet.git(&["rev-list", "--parents", "-n", "1", "main"]);
    assert_eq!(parents.split(' ').collect::<Vec<_>>()[1..], [main_before.as_str(), head.as_str()]);
    let all = fleet.f.cli(&["approvals", "list", "--all", "--json"]);
    assert_eq!(all["approvals"].as_array().unwrap().len(), 1, "only the release merge asked: {all}");
    drop(dash);
    fleet.stop();
}

#[test]
fn a_denied_call_asked_again_from_a_new_session_is_denied_without_a_new_request_or_notification() {
    let _serial = serial();
    let receiver = Receiver::start();
    let extra = format!(
        "independent_review = \"off\"\n\n[approvals]\nwait_seconds = 0\n\n[[approvals.notify]]\nkind = \"webhook\"\n\
         url = \"http://{}/hook\"\n\n[[rules]]\ntool = \"create_branch\"\nroles = [\"author\"]\ndecision = \"ask\"\n",
        receiver.addr
    );
    let mut fleet = Fleet::start(&extra);
    let asked = json!({ "branch": "denied" });
    refused(fleet.call("author", "create_branch", asked.clone()), "approval_pending", "apr-");
    let id = pending(&fleet.f)["id"].as_str().unwrap().to_owned();
    let denied = fleet.f.cli(&["approvals", "deny", &id, "--reason", "not this branch", "--json"]);
    assert_eq!(denied["state"], "denied", "{denied}");
    let heard = |n: usize| wait_until(20.0, || receiver.events().len() >= n);
    assert!(heard(2), "{:?}", receiver.events());

    // A new session: the author's gateway restarted, a new worker.
    let before = fleet.f.cli(&["worker", "list", "--json"]);
    fleet.restart("author");
    let text = refused(fleet.call("author", "create_branch", asked), "approval_denied", &id);
    assert!(text.contains("not this branch"), "{text}");
    let after = fleet.f.cli(&["worker", "list", "--json"]);
    assert_ne!(before, after, "another worker asked");
    let all = fleet.f.cli(&["approvals", "list", "--all", "--json"]);
    assert_eq!(all["approvals"].as_array().unwrap().len(), 1, "no new request: {all}");

    // Another call is asked, and heard: nothing was sent about the denied one in between.
    refused(fleet.call("author", "create_branch", json!({ "branch": "other" })), "approval_pending", "apr-");
    assert!(heard(3), "{:?}", receiver.events());
    let kinds: Vec<String> = receiver.events().into_iter().map(|(k, _)| k).collect();
    assert_eq!(kinds, ["requested", "answered", "requested"], "one notification per change");
    assert!(fleet.git(&["branch", "--list", "denied"]).is_empty());
    fleet.stop();
}

/// The merger's audience for the OAuth story.
const AUDIENCE: &str = "https://merger.fleet.test/mcp";

#[test]
fn an_agents_person_never_approves_its_call_whatever_claim_names_it() {
    let _serial = serial();
    let provider = Provider::start(&["rsa-1"]);
    provider.add_user_claiming("u-1234", "Bob Tables", &[], json!({ "email": "bob@example.com" }));
    provider.add_user_claiming("u-5678", "Alice Liddell", &[], json!({ "email": "alice@example.com" }));
    // Bob's agent is the merger, named by its token's email; its reads are asked about.
    let extra = format!(
        "[http.oauth]\nissuer = \"{}\"\naudience = \"{AUDIENCE}\"\nprincipal_claim = \"email\"\n\n[approvals]\n\
         wait_seconds = 0\n\n[[rules]]\ntool = \"get_file_contents\"\nroles = [\"merger\"]\ndecision = \"ask\"\n",
        provider.issuer
    );
    let fleet = Fleet::start_except(&extra, &["merger"]);
    let gateway = http_merger(&fleet);
    let raw = Raw::new(&gateway);
    let bob_agent = provider.sign("rsa-1", &provider.claims(AUDIENCE, "u-1234", json!({ "email": "bob@example.com" })));
    let read = json!({ "name": "get_file_contents", "arguments": at(json!({ "ref": "main", "path": "README.md" })) });
    let call = |id: u64| {
        let a = raw.stateless(id, "tools/call", read.clone(), "merger-bot", Some(&bob_agent));
        let r = &a.body["result"];
        let text = r["content"][0]["text"].as_str().unwrap_or_default().to_owned();
        (r["isError"].as_bool().unwrap_or(false), text, r["structuredContent"].clone())
    };
    refused(call(2), "approval_pending", "apr-");
    let request = pending(&fleet.f);
    let id = request["id"].as_str().unwrap().to_owned();
    assert_eq!(request["principal"], "oauth:bob@example.com", "{request}");

    // Bob signed in: his subject is not his email, yet the issuer's claims say he is the agent.
    let dash = started_dashboard(&fleet.f, &["--oidc-client-id", "dash"]);
    let bob = sign_in(&dash, "u-1234");
    let (status, body) = from_page(&dash, &bob, &id, "approve");
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("made the call"), "{body}");
    // The CLI's user: nothing says who it is next to Bob's agent, so it cannot approve.
    let cli = fleet.f.cli(&["approvals", "approve", &id, "--json"]);
    assert!(cli["error"].as_str().is_some_and(|e| e.contains("fails closed")), "{cli}");
    // Alice may, and the identical call then goes through.
    let alice = sign_in(&dash, "u-5678");
    let (status, body) = from_page(&dash, &alice, &id, "approve");
    assert_eq!(status, 200, "{body}");
    let (err, text, _) = call(3);
    assert!(!err, "approved by Alice: {text}");
    drop(dash);
    gateway.stop();
    fleet.stop();
}
