//! The operator's loop end to end (issue 45): approvers are people. A fleet whose merges need
//! two approvals from named people (`approvers = ["oidc:alice", "group:release"]`,
//! `approvals_required = 2`); the merger served over HTTP with OAuth, so its calls carry its
//! person (`oauth:carol`). Its merge of an independently approved PR is held: the request
//! reaches a real HTTP receiver, signed; in a real Chromium, people sign in to the dashboard at
//! an OpenID provider on loopback (authorization code with PKCE) and answer from the page.
//! Mallory (not an approver) is refused; Carol (an approver by group, but the merger whose call
//! it is) is refused; Alice's approval alone does not let the identical merge through; Bob's
//! second one does, and only then does the identical call land exactly the approved head.

use crate::approvals::{Receiver, pending};
use crate::httpkit::{HttpGateway, Raw};
use crate::support::{answer, at, serial, wait_until};
use crate::workflow::{Fleet, approve, refused};
use fleetgate_testkit::browser::Browser;
use fleetgate_testkit::oidc::Provider;
use serde_json::{Value, json};
use std::io::BufRead as _;
use std::process::{Child, Stdio};

/// The merger's resource identifier (its tokens' audience).
const AUDIENCE: &str = "https://merger.fleet.test/mcp";

/// `fleetgate dashboard`, its address.
pub(crate) struct Dashboard {
    child: Child,
    url: String,
}

impl Dashboard {
    /// Its base URL (`http://127.0.0.1:PORT`).
    pub(crate) fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The merger of `fleet` (started without it) served over HTTP, once it joins the fleet.
pub(crate) fn http_merger(fleet: &Fleet) -> HttpGateway {
    let downstream = fleet.downstream("merger");
    let downstream: Vec<&str> = downstream.iter().map(String::as_str).collect();
    let gateway = HttpGateway::start_as(
        &fleet.f,
        "prgs-merger",
        "127.0.0.1:0",
        None,
        &downstream,
        "info",
        &[("GITEA_MCP_COHORT_ID", "flow-a")],
    );
    assert!(wait_until(20.0, || fleet.f.running_rows() == 4), "the HTTP merger did not join the fleet");
    gateway
}

/// `fleetgate dashboard` with sign-in (the issuer comes from `[http.oauth]`: only the
/// dashboard's client id is given).
fn dashboard(fleet: &Fleet) -> Dashboard {
    started_dashboard(&fleet.f, &["--oidc-client-id", "fleet-dash"])
}

/// `fleetgate dashboard` on `f`'s fleet with `args`, once it listens.
pub(crate) fn started_dashboard(f: &crate::support::FleetDir, args: &[&str]) -> Dashboard {
    let mut command = vec!["dashboard", "--listen", "127.0.0.1:0", "--interval", "0.25"];
    command.extend_from_slice(args);
    let mut child = f.cli_command(&command).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(at) = line.split("listening on ").nth(1) {
                let _ = tx.send(at.trim().trim_end_matches('/').to_owned());
            }
        }
    });
    let url = rx.recv_timeout(std::time::Duration::from_secs(30)).expect("the dashboard did not start");
    Dashboard { child, url }
}

/// Sign `login` in to the dashboard at the provider (after signing out whoever was), and wait
/// for the page to greet them as `name`.
fn sign_in(b: &mut Browser, dash: &Dashboard, login: &str, name: &str) {
    b.open(&format!("{}/auth/logout", dash.url));
    b.wait("return document.getElementById('login-form') !== null", 15.0);
    b.eval(&format!(
        "document.getElementById('login').value = {login:?}; document.getElementById('login-form').submit(); return true"
    ));
    b.wait(
        &format!(
            "const who = document.getElementById('who-name'); return location.origin === {:?} && who !== null && \
             who.textContent === {name:?}",
            dash.url
        ),
        15.0,
    );
}

/// Click `verb` on request `id`'s row; what the page says came of it.
fn click(b: &mut Browser, id: &str, verb: &str) -> String {
    let row = format!("document.querySelector('tr[data-approval=\"{id}\"]')");
    b.wait(&format!("const r = {row}; return r !== null && r.querySelector('button.{verb}') !== null"), 15.0);
    b.eval(&format!("{row}.querySelector('button.{verb}').click(); return true"));
    let said = b.step(json!({ "op": "wait", "timeout": 15.0, "js": format!(
        "const r = {row}; const n = r && r.querySelector('.answer-note'); return n ? n.textContent : ''"
    ) }));
    said["value"].as_str().unwrap_or_default().to_owned()
}

/// The merger's stateless tool call: refused or not, its text.
fn merger_call(raw: &Raw, id: u64, token: &str, tool: &str, args: Value) -> (bool, String, Value) {
    let a = raw.stateless(id, "tools/call", json!({ "name": tool, "arguments": at(args) }), "merger-bot", Some(token));
    assert_eq!(a.status, 200, "{:?}", a.body);
    let result = &a.body["result"];
    let text = result["content"][0]["text"].as_str().unwrap_or_default().to_owned();
    (result["isError"].as_bool().unwrap_or(false), text, result["structuredContent"].clone())
}

#[test]
fn two_named_people_approve_a_held_merge_in_a_browser_and_no_one_else_counts() {
    let _serial = serial();
    let provider = Provider::start(&["rsa-1"]);
    provider.add_user("alice", "Alice Liddell", &["ops"]);
    provider.add_user("bob", "Bob Tables", &["release"]);
    provider.add_user("carol", "Carol Merger", &["release"]);
    provider.add_user("mallory", "Mallory", &["interns"]);
    let receiver = Receiver::start();
    let secrets = tempfile::tempdir().unwrap();
    let key = secrets.path().join("hook.key");
    std::fs::write(&key, "loop-s3cret\n").unwrap();
    let extra = format!(
        "[http.oauth]\nissuer = \"{}\"\naudience = \"{AUDIENCE}\"\nprofiles_claim = \"fleetgate_profiles\"\n\n\
         [approvals]\nwait_seconds = 0\n\n[[approvals.notify]]\nkind = \"webhook\"\nurl = \"http://{}/hook\"\n\
         secret_file = {:?}\n\n[[rules]]\ntool = \"pull_request_write\"\nargs = {{ \"/method\" = [\"merge\"] }}\n\
         roles = [\"merger\"]\ndecision = \"ask\"\napprovers = [\"oidc:alice\", \"group:release\"]\n\
         approvals_required = 2\n",
        provider.issuer,
        receiver.addr,
        key.display().to_string()
    );
    let mut fleet = Fleet::start_except(&extra, &["merger"]);
    let gateway = http_merger(&fleet);
    let raw = Raw::new(&gateway);
    let carol =
        provider.sign("rsa-1", &provider.claims(AUDIENCE, "carol", json!({ "fleetgate_profiles": ["prgs-merger"] })));

    // An independently approved PR; the merger holds the merge lease at its head.
    let main_before = fleet.git(&["rev-parse", "main"]);
    answer(fleet.call("author", "create_branch", json!({ "branch": "feature" })));
    let head = fleet.push("two people looked\n", "Needs two");
    let create = json!({ "method": "create", "title": "Two", "body": "b", "head": "feature", "base": "main" });
    let pr = answer(fleet.call("author", "pull_request_write", create))["number"].as_i64().unwrap();
    assert!(!fleet.claim("reviewer", pr, &head, "review").0);
    answer(fleet.call("reviewer", "pull_request_review_write", approve(pr)));
    let claim = json!({ "pr": pr, "head": head, "purpose": "merge" });
    let (err, text, _) = merger_call(&raw, 2, &carol, "gitea_claim_pr_lease", claim);
    assert!(!err, "{text}");

    // The merge is held: refused approval_pending with its request, which names the merger's
    // person and needs two approvals.
    let merge = json!({ "method": "merge", "pull_number": pr });
    let held = refused(merger_call(&raw, 3, &carol, "pull_request_write", merge.clone()), "approval_pending", "apr-");
    let request = pending(&fleet.f);
    let id = request["id"].as_str().unwrap().to_owned();
    assert!(held.contains(&id), "{held}");
    assert_eq!(request["principal"], "oauth:carol", "{request}");
    assert_eq!(request["required"], 2, "{request}");
    // Issue 55: who may answer and where, never a command refused for them; what the call
    // does, in words, from the judged effect, before its arguments.
    assert!(!held.contains(&format!("fleetgate approvals approve {id}`")), "{held}");
    assert!(held.contains("oidc:alice, group:release signed in to the dashboard"), "{held}");
    let does = request["does"].as_str().unwrap_or_default().to_owned();
    assert!(does.starts_with("merge ") && does.contains(&format!("#{pr} at {} onto main", &head[..7])), "{request}");
    let listed = fleet.f.cli_command(&["approvals", "list"]).output().unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(listed.contains(&format!("  does:      {does}")), "{listed}");

    // In the browser: the dashboard sends people to the issuer first.
    let dash = dashboard(&fleet);
    let mut b = Browser::start();
    sign_in(&mut b, &dash, "mallory", "Mallory");
    let said = click(&mut b, &id, "approve");
    assert!(said.contains("not among the approvers"), "mallory: {said}");
    sign_in(&mut b, &dash, "carol", "Carol Merger");
    let said = click(&mut b, &id, "approve");
    assert!(said.contains("made the call this request is about"), "carol: {said}");
    sign_in(&mut b, &dash, "alice", "Alice Liddell");
    let needs = b.step(json!({ "op": "wait", "timeout": 15.0, "js": format!(
        "const r = document.querySelector('tr[data-approval=\"{id}\"] .needed'); return r ? r.textContent : ''"
    ) }));
    assert_eq!(needs["value"], "2 more approvals", "{needs}");
    let row = b.step(json!({ "op": "wait", "timeout": 15.0, "js": format!(
        "const r = document.querySelector('tr[data-approval=\"{id}\"]'); return r ? r.textContent : ''"
    ) }));
    let row = row["value"].as_str().unwrap_or_default();
    assert!(row.contains(&does) && row.contains("signed in to the dashboard"), "the page: {row}");
    assert!(!row.contains(&format!("fleetgate approvals approve {id}")), "the page: {row}");
    assert_eq!(click(&mut b, &id, "approve"), "recorded; still pending");

    // One approval of two: the identical merge is still held, by the same request.
    let still = refused(merger_call(&raw, 4, &carol, "pull_request_write", merge.clone()), "approval_pending", &id);
    assert!(still.contains(&id), "{still}");
    assert_eq!(fleet.git(&["rev-parse", "main"]), main_before, "main did not move on one approval");

    // The page shows who answered and how many more it needs; Bob gives the second.
    sign_in(&mut b, &dash, "bob", "Bob Tables");
    let shown = b.step(json!({ "op": "wait", "timeout": 15.0, "js": format!(
        "const r = document.querySelector('tr[data-approval=\"{id}\"]'); \
         return r && r.textContent.includes('Alice Liddell (oidc:alice)') ? r.textContent : ''"
    ) }));
    assert!(shown["value"].as_str().unwrap().contains("1 more approval"), "{shown}");
    assert_eq!(click(&mut b, &id, "approve"), "approved");

    // Only now does the identical call pass, landing exactly the approved head.
    let (err, text, _) = merger_call(&raw, 5, &carol, "pull_request_write", merge);
    assert!(!err, "the twice-approved merge: {text}");
    let parents = fleet.git(&["rev-list", "--parents", "-n", "1", "main"]);
    assert_eq!(parents.split(' ').collect::<Vec<_>>()[1..], [main_before.as_str(), head.as_str()]);

    // The record: both people, by subject and name; the refused answers recorded nothing.
    let all = fleet.f.cli(&["approvals", "list", "--all", "--json"]);
    let done = all["approvals"].as_array().unwrap().iter().find(|a| a["id"] == id.as_str()).unwrap().clone();
    let by: Vec<&str> = done["answers"].as_array().unwrap().iter().filter_map(|a| a["by"].as_str()).collect();
    assert_eq!(by, ["oidc:alice", "oidc:bob"], "{done}");
    assert_eq!(done["state"], "used", "{done}");
    // The refused answers are audited as refusals, naming who tried; the accepted ones name
    // who gave them.
    let audit = fleet.f.cli(&["audit", "--json"]);
    let answers: Vec<(bool, String)> = audit["entries"]
        .as_array()
        .or_else(|| audit.as_array())
        .unwrap()
        .iter()
        .filter(|e| e["tool"] == "approval")
        .map(|e| (e["allowed"].as_bool().unwrap(), e["principal"].as_str().unwrap_or_default().to_owned()))
        .collect();
    for (allowed, who) in [(false, "oidc:mallory"), (false, "oidc:carol"), (true, "oidc:alice"), (true, "oidc:bob")] {
        assert!(answers.contains(&(allowed, who.to_owned())), "{who}: {answers:?}");
    }

    // The receiver heard it all, each signed with the file's secret.
    assert!(wait_until(20.0, || receiver.events().len() >= 4), "{:?}", receiver.events());
    let events = receiver.events();
    let kinds: Vec<&str> = events.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(kinds, ["requested", "answered", "answered", "used"]);
    for (_, (headers, body)) in &events {
        let signature = headers.iter().find(|(k, _)| k == "x-fleetgate-signature").map(|(_, v)| v.clone());
        assert_eq!(signature, Some(fleetgate_control::notify::signature(b"loop-s3cret", body.as_bytes())));
        let v: Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["request"]["id"], id.as_str(), "{v}");
        assert_eq!(v["request"]["arguments"]["pull_number"], pr, "the exact call: {v}");
    }
    drop(b);
    gateway.stop();
    fleet.stop();
}
