//! Every HTTP client its own channel (issue 11): a downstream's server→client requests reach
//! the client whose call caused them and no other; an unsolicited one is refused, never
//! broadcast; a stateless 2026-07-28 client is one attachment per principal, not one per
//! request; principals come from a tokens file; attachments are bounded; a batch gets a
//! JSON-RPC error body. Through the real binary, the official Python SDK client on both
//! sides (`tests/peers/elicit_server.py` downstream) and raw HTTP.

use crate::httpkit::{Conn, HttpGateway, Raw, STATELESS, eventually, open_session, refused_start};
use crate::support::{FleetDir, peer, roster, serial};
use serde_json::{Value, json};
use std::process::Command;

/// A one-member fleet: the gateway under test is its author.
fn config() -> String {
    roster("e2e-routing", &["author"], "")
}

/// The tokens of the two principals of [`fleet_with_principals`].
const ALICE: &str = "alice-token";
const BOB: &str = "bob-token";

/// The hex SHA-256 of `text` (a tokens file holds its tokens' digests).
pub(crate) fn sha256(text: &str) -> String {
    let out =
        Command::new("sha256sum").stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).spawn();
    let mut child = out.unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8(out.stdout).unwrap().split_whitespace().next().unwrap().to_owned()
}

/// A fleet whose `[http]` table names a tokens file with alice (any profile) and bob.
fn fleet_with_principals(extra_http: &str) -> FleetDir {
    let config = format!("{}\n[http]\ntokens_file = \"tokens\"\n{extra_http}\n", config());
    let f = FleetDir::new(&config);
    let tokens =
        format!("# principals of the e2e fleet\n{}  alice\n{}  bob  prgs-author\n", sha256(ALICE), sha256(BOB));
    std::fs::write(f.dir.path().join("tokens"), tokens).unwrap();
    f
}

fn elicit_server(f: &FleetDir) -> Vec<String> {
    vec![
        peer(".venv/bin/python").display().to_string(),
        peer("tests/peers/elicit_server.py").display().to_string(),
        f.dir.path().join("unsolicited.jsonl").display().to_string(),
    ]
}

fn python(script: &str, args: &[&str]) -> Value {
    let out = Command::new(peer(".venv/bin/python")).arg(peer(script)).args(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line =
        stdout.lines().rev().find(|l| l.starts_with('{')).unwrap_or_else(|| {
            panic!("{script} printed no result: {stdout}\n{}", String::from_utf8_lossy(&out.stderr))
        });
    serde_json::from_str(line).unwrap()
}

fn workers(f: &FleetDir) -> Vec<Value> {
    f.cli(&["worker", "list", "--json"])["workers"].as_array().unwrap().clone()
}

#[test]
fn concurrent_elicitations_reach_the_session_whose_call_asked() {
    let _serial = serial();
    let f = FleetDir::new(&config());
    let argv = elicit_server(&f);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let g = HttpGateway::start_logging(&f, None, &argv, "info");
    // Two sessions, both calls of every round in flight at once, 100 rounds.
    let tally = python("tests/peers/elicit_race.py", &[&g.url(), "100"]);
    assert_eq!(tally["cross_talk"], json!([]), "{tally}");
    assert_eq!(tally["errors"], json!([]), "{tally}");
    assert_eq!(tally["answered"], 200, "{tally}");
    assert_eq!(tally["asked"], 200, "every question asked once: {tally}");
    g.stop();
}

/// The same race on one downstream every session shares (`[downstream] sharing = "gateway"`):
/// a question asked while both calls are in flight cannot be told to be one's, so it is
/// refused back to the server; no question ever reaches the other session, and each session
/// is still its own worker.
#[test]
fn on_a_shared_downstream_no_elicitation_reaches_the_other_session() {
    let _serial = serial();
    let f = FleetDir::new(&format!("{}\n[downstream]\nsharing = \"gateway\"\n", config()));
    let argv = elicit_server(&f);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let g = HttpGateway::start_logging(&f, None, &argv, "info");
    let tally = python("tests/peers/elicit_race.py", &[&g.url(), "50"]);
    assert_eq!(tally["cross_talk"], json!([]), "{tally}");
    assert_eq!(tally["errors"], json!([]), "{tally}");
    let (answered, refused) = (tally["answered"].as_u64().unwrap(), tally["refused"].as_u64().unwrap());
    assert_eq!(answered + refused, 100, "every call answered or its question refused: {tally}");
    assert_eq!(tally["asked"], json!(answered), "a question asked was a question answered, by its asker: {tally}");
    let dir = f.dir.path().display().to_string();
    let pids = crate::support::downstream_processes(&["elicit_server.py", &dir]);
    assert_eq!(pids, 1, "one downstream process for both sessions");
    let sessions =
        workers(&f).iter().filter(|w| w["client_name"].as_str().is_some_and(|c| c.starts_with("race_"))).count();
    assert_eq!(sessions, 2, "each session its own worker: {:?}", workers(&f));
    g.stop();
}

#[test]
fn an_unsolicited_downstream_request_is_refused_not_broadcast() {
    let _serial = serial();
    let f = FleetDir::new(&config());
    let argv = elicit_server(&f);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let g = HttpGateway::start_logging(&f, None, &argv, "info");
    let seen = python("tests/peers/unsolicited.py", &[&g.url(), "1.5"]);
    assert_eq!(seen["scheduled"], json!(["scheduled"]), "{seen}");
    assert_eq!(seen["asked"], json!([]), "no client may be asked: {seen}");
    let outcome = f.dir.path().join("unsolicited.jsonl");
    eventually("the downstream learns its request was refused", 10.0, || outcome.exists());
    let outcome: Value =
        serde_json::from_str(std::fs::read_to_string(&outcome).unwrap().lines().next().unwrap()).unwrap();
    assert_eq!(outcome["answered"], false, "{outcome}");
    assert!(outcome["message"].as_str().unwrap().contains("no client request is in flight"), "{outcome}");
    assert!(g.log().contains("downstream request refused"), "the refusal is logged");
    g.stop();
}

#[test]
fn a_stateless_client_is_one_attachment_per_principal_not_per_request() {
    let _serial = serial();
    let f = fleet_with_principals("");
    let g = HttpGateway::start_logging(&f, None, &[], "info");
    let raw = Raw::new(&g);
    for id in 1..=10_000 {
        let a = raw.stateless(id, "tools/list", json!({}), "cursor", Some(ALICE));
        assert_eq!(a.status, 200, "request {id}: {a:?}");
        if id == 1 {
            let names: Vec<&str> =
                a.body["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
            assert!(names.contains(&"gitea_get_runtime_context"), "{a:?}");
            assert_eq!(a.body["result"]["resultType"], "complete", "a 2026-07-28 result says so: {a:?}");
        }
    }
    let active: Vec<Value> = workers(&f).into_iter().filter(|w| w["status"] == "active").collect();
    assert_eq!(active.len(), 1, "10,000 stateless requests, one worker: {active:?}");
    assert_eq!(active[0]["client_name"], "alice", "the worker records the principal");
    assert_eq!(workers(&f).len(), 1, "no rows pile up");

    // Another principal is another attachment, with a worker of its own.
    let b = raw.stateless(1, "tools/list", json!({}), "cursor", Some(BOB));
    assert_eq!(b.status, 200, "{b:?}");
    let mut names: Vec<String> = workers(&f).iter().map(|w| w["client_name"].as_str().unwrap().to_owned()).collect();
    names.sort();
    assert_eq!(names, ["alice", "bob"]);

    // The runtime context of its attachment shows the principal.
    let ctx = raw.stateless(
        3,
        "tools/call",
        json!({ "name": "gitea_get_runtime_context", "arguments": {} }),
        "cursor",
        Some(BOB),
    );
    assert_eq!(ctx.body["result"]["structuredContent"]["worker"]["principal"], "bob", "{ctx:?}");
    g.stop();
}

#[test]
fn tokens_select_principals_and_a_bad_tokens_file_stops_the_start() {
    let _serial = serial();
    let f = fleet_with_principals("");
    let argv = elicit_server(&f);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let g = HttpGateway::start_logging(&f, None, &argv, "info");
    let raw = Raw::new(&g);
    assert_eq!(raw.initialize("x", Some("wrong-token")).status, 401);
    assert_eq!(raw.initialize("x", None).status, 401);
    assert_eq!(raw.initialize("x", Some("")).status, 401, "an empty token never authenticates");
    assert_eq!(raw.initialize("x", Some(ALICE)).status, 200);
    // A gated call is audited under the principal whose token made it.
    let call =
        raw.stateless(1, "tools/call", json!({ "name": "ask", "arguments": { "tag": "t" } }), "cursor", Some(BOB));
    assert_eq!(call.status, 200, "{call:?}");
    let audit = f.audit_until(|e| e.iter().any(|x| x["tool"] == "ask"));
    let entry = audit["entries"].as_array().unwrap().iter().find(|e| e["tool"] == "ask").cloned();
    assert_eq!(entry.as_ref().map(|e| e["principal"].clone()), Some(json!("bob")), "{audit}");
    assert!(!g.log().contains(ALICE) && !g.log().contains(BOB), "no token in the log");
    g.stop();

    // A principal limited to other profiles is refused this one.
    let f = FleetDir::new(&format!("{}\n[http]\ntokens_file = \"tokens\"\n", config()));
    std::fs::write(f.dir.path().join("tokens"), format!("{}  carol  prgs-merger\n", sha256("carol-token"))).unwrap();
    let g = HttpGateway::start_logging(&f, None, &[], "info");
    assert_eq!(Raw::new(&g).initialize("x", Some("carol-token")).status, 403);
    g.stop();

    // A bad line refuses the start, naming the file and the line.
    let f = FleetDir::new(&format!("{}\n[http]\ntokens_file = \"tokens\"\n", config()));
    std::fs::write(f.dir.path().join("tokens"), format!("{}  carol\nnot-a-digest dave\n", sha256("c"))).unwrap();
    let (code, stderr) = refused_start(&f, &[], &["--listen", "127.0.0.1:0"]);
    assert_eq!(code, Some(1), "{stderr}");
    let shown = format!("{}:2:", f.dir.path().join("tokens").display());
    assert!(stderr.contains(&shown), "{stderr}");
    assert_eq!(f.cli(&["runtime", "list", "--json"])["runtimes"].as_array().unwrap().len(), 0, "nothing ran");

    // An empty FLEETGATE_HTTP_TOKEN is refused, not read as "no token".
    let f = FleetDir::new(&config());
    let (code, stderr) = refused_start(&f, &[("FLEETGATE_HTTP_TOKEN", "")], &["--listen", "127.0.0.1:0"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("empty"), "{stderr}");
    // A non-loopback address needs authentication even with --allow-remote.
    let (code, stderr) = refused_start(&f, &[], &["--listen", "0.0.0.0:0", "--allow-remote"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("without authentication"), "{stderr}");
}

#[test]
fn attachments_are_bounded_overall_and_per_principal_and_existing_ones_keep_working() {
    let _serial = serial();
    let f = fleet_with_principals("max_attachments = 3\nmax_attachments_per_principal = 2");
    let g = HttpGateway::start_logging(&f, None, &[], "info");
    let raw = Raw::new(&g);
    let first = raw.initialize("a1", Some(ALICE));
    assert_eq!(first.status, 200, "{first:?}");
    assert_eq!(raw.initialize("a2", Some(ALICE)).status, 200);
    let third = raw.initialize("a3", Some(ALICE));
    assert_eq!(third.status, 429, "past the principal's bound: {third:?}");
    assert!(third.body["error"]["message"].as_str().unwrap().contains("maximum of 2"), "{third:?}");
    assert_eq!(raw.initialize("b1", Some(BOB)).status, 200);
    let full = raw.initialize("b2", Some(BOB));
    assert_eq!(full.status, 503, "past the gateway's bound: {full:?}");
    assert!(full.body["error"]["message"].as_str().unwrap().contains("maximum of 3"), "{full:?}");
    // A stateless newcomer is refused the same way; the existing attachments are unhurt.
    let newcomer = raw.stateless(1, "tools/list", json!({}), "late", Some(BOB));
    assert_eq!(newcomer.status, 503, "{newcomer:?}");
    assert_eq!(workers(&f).iter().filter(|w| w["status"] == "active").count(), 3);
    g.stop();
}

#[test]
fn a_batch_over_http_gets_a_jsonrpc_error_body() {
    let _serial = serial();
    let f = FleetDir::new(&config());
    let g = HttpGateway::start_logging(&f, None, &[], "info");
    let raw = Raw::new(&g);
    let batch =
        json!([{ "jsonrpc": "2.0", "id": 1, "method": "ping" }, { "jsonrpc": "2.0", "id": 2, "method": "ping" }]);
    let answer = raw.post(&batch, &[]);
    assert_eq!(answer.status, 400, "{answer:?}");
    assert_eq!(answer.body["error"]["code"], -32600, "{answer:?}");
    assert_eq!(answer.body["id"], Value::Null, "{answer:?}");
    // The gateway keeps serving.
    assert_eq!(raw.initialize("after", None).status, 200);
    g.stop();
}

#[test]
fn an_initialize_offering_2026_07_28_is_negotiated_down_and_the_bare_method_is_removed() {
    let _serial = serial();
    let f = FleetDir::new(&config());
    let g = HttpGateway::start_logging(&f, None, &[], "info");
    let raw = Raw::new(&g);
    // rmcp's own client opens a session this way: the handshake, offering the newest version.
    let handshake = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": STATELESS, "capabilities": {}, "clientInfo": { "name": "rmcp", "version": "3" } } });
    let answer = raw.post(&handshake, &[("MCP-Protocol-Version", STATELESS)]);
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.body["result"]["protocolVersion"], "2025-11-25", "negotiated down: {answer:?}");
    // A 2026-07-28 request named `initialize` with no handshake in it is the removed method.
    let removed = raw.stateless(2, "initialize", json!({}), "new", None);
    assert_eq!(removed.status, 404, "{removed:?}");
    assert_eq!(removed.body["error"]["code"], -32601, "{removed:?}");
    // A field the gatekeeper reads, of a type it does not expect, does not make the message
    // skip its checks (a `taskId` that is a number).
    let odd = raw.stateless(3, "initialize", json!({ "taskId": 0 }), "new", None);
    assert_eq!((odd.status, odd.body["error"]["code"].clone()), (404, json!(-32601)), "{odd:?}");
    g.stop();
}

/// Issue 34, finding 3: a session is served to the principal that opened it only. Bob, or a
/// caller of the shared `FLEETGATE_HTTP_TOKEN`, presenting alice's `Mcp-Session-Id` gets
/// the answer an unknown session gets (404), on POST, GET and DELETE; her session is unhurt.
#[test]
fn a_session_is_served_only_to_the_principal_that_opened_it() {
    let _serial = serial();
    let f = fleet_with_principals("");
    let g = HttpGateway::start_logging(&f, Some("shared-token"), &[], "info");
    let bearer = |t: &str| format!("Bearer {t}");
    let (alice, bob, shared) = (bearer(ALICE), bearer(BOB), bearer("shared-token"));
    let mut conn = Conn::open(&g.addr);
    let session = open_session(&mut conn, &[("Authorization", &alice)]);
    let list = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {} }).to_string();
    let unknown = conn.request(
        "POST",
        &[("Authorization", &alice), ("Mcp-Session-Id", "00000000-0000-0000-0000-000000000000")],
        &list,
    );
    assert_eq!(unknown.status, 404, "{unknown:?}");
    for who in [&bob, &shared] {
        for method in ["POST", "GET", "DELETE"] {
            let body = if method == "POST" { list.as_str() } else { "" };
            let mut other = Conn::open(&g.addr);
            let reply = other.request(method, &[("Authorization", who), ("Mcp-Session-Id", &session)], body);
            assert_eq!(reply.status, 404, "{method} by another principal: {reply:?}");
            assert_eq!(reply.body, unknown.body, "answered exactly as an unknown session");
        }
    }
    // Her session still serves her, and only her DELETE ends it.
    let mine = conn.request("POST", &[("Authorization", &alice), ("Mcp-Session-Id", &session)], &list);
    assert_eq!(mine.status, 200, "{mine:?}");
    assert!(mine.json()["result"]["tools"].is_array(), "{mine:?}");
    let ended = conn.request("DELETE", &[("Authorization", &alice), ("Mcp-Session-Id", &session)], "");
    assert!(ended.status < 300, "{ended:?}");
    let after = conn.request("POST", &[("Authorization", &alice), ("Mcp-Session-Id", &session)], &list);
    assert_eq!(after.status, 404, "{after:?}");
    let audit = f.cli(&["audit", "--json"]).to_string();
    assert!(!audit.contains("\"bob\""), "nothing was done as bob: {audit}");
    g.stop();
}

/// Issue 34, finding 10: one principal cannot hold every connection. Alice holds her share
/// (half the cap of 8, two principals) with requests whose bodies she never finishes; her
/// further connections are refused 429 and closed, so bob still initializes and calls.
#[test]
fn one_principal_cannot_starve_another_of_connections() {
    let _serial = serial();
    let f = fleet_with_principals("max_connections = 8");
    let g = HttpGateway::start_logging(&f, None, &[], "info");
    let alice = format!("Bearer {ALICE}");
    let stalled_post = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: {alice}\r\nContent-Type: application/json\r\nAccept: \
         application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{{\"jsonrpc\"",
        g.addr
    );
    let mut held = Vec::new();
    let mut refused = 0;
    for _ in 0..8 {
        let mut c = Conn::open(&g.addr);
        c.send_raw(stalled_post.as_bytes());
        c.stream.set_read_timeout(Some(std::time::Duration::from_millis(500))).unwrap();
        let mut peek = [0_u8; 1];
        match c.stream.peek(&mut peek) {
            Ok(n) if n > 0 => {
                c.stream.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
                let reply = c.read_reply();
                assert_eq!(reply.status, 429, "{reply:?}");
                assert!(reply.body.contains("share of 4"), "{reply:?}");
                assert_eq!(reply.header("connection"), Some("close"), "{reply:?}");
                assert!(c.closed_within(5.0), "a refused connection was kept");
                refused += 1;
            }
            _ => held.push(c), // no answer: held, its body awaited
        }
    }
    assert_eq!((held.len(), refused), (4, 4), "alice holds her share, no more");

    // Bob is served meanwhile: a session, and a call in it.
    let bob = format!("Bearer {BOB}");
    let mut c = Conn::open(&g.addr);
    let session = open_session(&mut c, &[("Authorization", &bob)]);
    let list = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {} }).to_string();
    let reply = c.request("POST", &[("Authorization", &bob), ("Mcp-Session-Id", &session)], &list);
    assert_eq!(reply.status, 200, "{reply:?}");
    let call = json!({ "jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": { "name": "gitea_get_runtime_context", "arguments": {} } })
    .to_string();
    let reply = c.request("POST", &[("Authorization", &bob), ("Mcp-Session-Id", &session)], &call);
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.json()["result"]["structuredContent"]["worker"]["principal"], "bob", "{reply:?}");

    // A place alice gives up is hers again.
    drop(held.pop());
    eventually("alice's freed place is hers again", 5.0, || {
        let mut c = Conn::open(&g.addr);
        c.send_raw(stalled_post.as_bytes());
        c.stream.set_read_timeout(Some(std::time::Duration::from_millis(300))).unwrap();
        let answered = c.stream.peek(&mut [0_u8; 1]).is_ok_and(|n| n > 0);
        if !answered {
            held.push(c);
        }
        !answered
    });
    g.stop();
}
