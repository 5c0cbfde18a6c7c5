//! A member that declares replicas (issue 46, first part): real HTTP gateways of one profile on
//! one store. Two of two declared are one member and the gate is open; a third closes it as the
//! seed's duplicate, naming what was declared; stopping it opens the gate again.

use crate::httpkit::{HttpGateway, Raw};
use crate::support::{FleetDir, serial, wait_until};
use serde_json::Value;

const ROSTER: &str = "[fleet]\nname = \"replicas\"\ntool_prefix = \"gitea_\"\n\n[[members]]\nnamespace = \
                      \"gitea-author\"\nprofile = \"prgs-author\"\nrole = \"author\"\nreplicas = 2\n";

/// The inventory once `ready` holds of it (bounded), or the last one read.
fn inventory_until(f: &FleetDir, ready: impl Fn(&Value) -> bool) -> Value {
    let mut v = Value::Null;
    wait_until(20.0, || {
        v = f.cli(&["inventory", "--json"]);
        ready(&v)
    });
    v
}

#[test]
fn declared_replicas_are_one_member_and_one_more_closes_the_gate() {
    let _serial = serial();
    let f = FleetDir::new(ROSTER);
    crate::support::bare_repo(f.dir.path(), "forge.git", &f.repo());
    let token = "replica-token-7c1d";
    let one = HttpGateway::start(&f, Some(token), &[]);
    let two = HttpGateway::start(&f, Some(token), &[]);
    let open = inventory_until(&f, |v| v["running_member_count"] == 1 && v["mutation_gate_satisfied"] == true);
    assert_eq!(open["mutation_gate_satisfied"], true, "{open}");
    assert_eq!(open["configured_members"][0]["instance_count"], 2, "{open}");
    assert_eq!(open["duplicate_members"], serde_json::json!([]), "{open}");

    let three = HttpGateway::start(&f, Some(token), &[]);
    let closed = inventory_until(&f, |v| v["mutation_gate_satisfied"] == false);
    assert_eq!(closed["duplicate_members"][0]["replicas"], 2, "{closed}");
    let why = closed["blocked_reason"].as_str().unwrap_or_default();
    assert!(why.contains("duplicate prgs-author: 3 running instances, 2 replicas declared"), "{closed}");

    three.stop();
    let again = inventory_until(&f, |v| v["mutation_gate_satisfied"] == true);
    assert_eq!(again["mutation_gate_satisfied"], true, "{again}");
    one.stop();
    two.stop();
}

/// The forge stand-in over a new bare repository of `f`'s, as a replica's downstream.
fn forge_downstream(f: &FleetDir) -> Vec<String> {
    let bare = crate::support::bare_repo(f.dir.path(), "forge.git", &f.repo());
    let mut downstream = crate::support::forge_fixture();
    downstream.extend(["--repo".to_owned(), bare.display().to_string()]);
    downstream
}

/// Another principal of [`alices_replicas`]'s.
const BOB: &str = "bob-token-5a0d";

/// Two replicas of the author in front of the forge stand-in, `alice` the principal of
/// `token` and `bob` of [`BOB`], each with a bound of `bound` attachments (else the default).
fn alices_replicas(token: &str, bound: Option<usize>) -> (FleetDir, [HttpGateway; 2]) {
    let bound = bound.map(|n| format!("max_attachments_per_principal = {n}\n")).unwrap_or_default();
    let roster = format!("{ROSTER}\n[http]\ntokens_file = \"tokens\"\n{bound}");
    let f = FleetDir::new(&roster);
    let sha = crate::routing::sha256;
    std::fs::write(f.dir.path().join("tokens"), format!("{}  alice\n{}  bob\n", sha(token), sha(BOB))).unwrap();
    let downstream = forge_downstream(&f);
    let replica = |n| HttpGateway::replica(&f, "prgs-author", n, "127.0.0.1:9", "shared-token-unused", &downstream);
    let replicas = [replica(0), replica(1)];
    (f, replicas)
}

/// A principal's bound on attachments holds across the member's replicas, counted in the
/// store: its sessions and its stateless client on one replica count on the other, and the
/// stateless client it already has, reaching the other replica, is no new attachment.
#[test]
fn a_principals_bound_holds_across_replicas() {
    let _serial = serial();
    const ALICE: &str = "alice-token-3f9a";
    let (_f, [one, two]) = alices_replicas(ALICE, Some(3));
    let (a, b) = (Raw::new(&one), Raw::new(&two));

    // On the first replica: a session and a stateless client of alice's.
    assert_eq!(a.initialize("s1", Some(ALICE)).status, 200);
    assert_eq!(a.stateless(1, "tools/list", serde_json::json!({}), "cursor", Some(ALICE)).status, 200);
    // On the second: the same stateless client is the one alice has, not a third attachment;
    // a session of hers is the third.
    assert_eq!(b.stateless(2, "tools/list", serde_json::json!({}), "cursor", Some(ALICE)).status, 200);
    assert_eq!(b.initialize("s2", Some(ALICE)).status, 200);
    // A fourth, on the first replica, which holds only two of hers: refused by the member's count.
    let refused = a.initialize("s3", Some(ALICE));
    assert_eq!(refused.status, 429, "{:?}", refused.body);
    let why = refused.body["error"]["message"].as_str().unwrap_or_default();
    assert!(why.contains("maximum of 3 attachments across the member's 2 replicas"), "{why}");
    // Nor may a new stateless client of hers slip past the count with a field of a type the
    // gatekeeper does not expect (a numeric `taskId`).
    let odd = a.stateless(5, "tools/list", serde_json::json!({ "taskId": 0 }), "windsurf", Some(ALICE));
    assert_eq!(odd.status, 429, "admitted past the bound: {:?}", odd.body.get("error"));
    one.stop();
    two.stop();
}

/// A stateless client's SEP-2663 task lives in the replica whose downstream made it; its
/// `tasks/get` and `tasks/cancel`, reaching another replica, are relayed there, and another
/// client naming the same id is still a stranger to it.
#[test]
fn a_stateless_clients_task_is_reached_through_any_replica() {
    let _serial = serial();
    let f = FleetDir::new(ROSTER);
    crate::support::bare_repo(f.dir.path(), "forge.git", &f.repo());
    // The gateway crate's conformance fixture: its `slow_compute` becomes a task for a client
    // that takes tasks.
    let fixture = crate::support::bin().with_file_name("examples").join("conformance_fixture");
    assert!(fixture.exists(), "{} is missing: `cargo build --all-targets` builds it", fixture.display());
    let downstream = vec![fixture.display().to_string()];
    const TOKEN: &str = "task-token-8d2e";
    let one = HttpGateway::replica(&f, "prgs-author", 0, "127.0.0.1:9", TOKEN, &downstream);
    let two = HttpGateway::replica(&f, "prgs-author", 1, "127.0.0.1:9", TOKEN, &downstream);
    let request = |g: &HttpGateway, id: u64, name: &str, method: &str, mut params: serde_json::Value| {
        params["_meta"] = serde_json::json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": { "name": name, "version": "1.0" },
            "io.modelcontextprotocol/clientCapabilities": { "extensions": { "io.modelcontextprotocol/tasks": {} } },
        });
        let named = params.get("name").or_else(|| params.get("taskId")).and_then(|v| v.as_str()).unwrap().to_owned();
        let message = serde_json::json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        let bearer = format!("Bearer {TOKEN}");
        // As a balancer in front of both would send it: its `Host`, the one the replicas accept.
        let headers = [
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", method),
            ("Mcp-Name", &named),
            ("Authorization", &bearer),
            ("Host", "127.0.0.1:9"),
        ];
        Raw::new(g).post(&message, &headers)
    };
    let compute = serde_json::json!({ "name": "slow_compute", "arguments": { "seconds": 30, "label": "alice's" } });
    let made = request(&one, 1, "alice-agent", "tools/call", compute);
    assert_eq!(made.body["result"]["resultType"], "task", "{:?}", made.body);
    let task = made.body["result"]["taskId"].as_str().expect("a task id").to_owned();

    let got = request(&two, 2, "alice-agent", "tasks/get", serde_json::json!({ "taskId": task }));
    assert_eq!(got.status, 200, "{:?}", got.body);
    assert_eq!(got.body["result"]["status"], "working", "the other replica answers for the task: {:?}", got.body);
    let stranger = request(&two, 3, "mallory-agent", "tasks/get", serde_json::json!({ "taskId": task }));
    // Refused where it landed (a first request of a client new to that replica), never relayed.
    assert!(
        stranger.body["result"].is_null() && stranger.body["error"].is_object(),
        "another client: {:?}",
        stranger.body
    );
    let cancelled = request(&two, 4, "alice-agent", "tasks/cancel", serde_json::json!({ "taskId": task }));
    assert!(cancelled.body["result"].is_object(), "cancelled through the other replica: {:?}", cancelled.body);
    let again = request(&one, 5, "alice-agent", "tasks/get", serde_json::json!({ "taskId": task }));
    assert_eq!(again.body["result"]["status"], "cancelled", "{:?}", again.body);
    one.stop();
    two.stop();
}

/// Naming another principal's session at a replica that does not hold it is answered as an
/// unknown session — and leaves the session's record alone: its own principal's next request,
/// reaching that replica, is still relayed to the one that holds it.
#[test]
fn a_stranger_naming_a_session_cannot_make_it_unreachable() {
    let _serial = serial();
    const ALICE: &str = "alice-token-51c0";
    let (_f, [one, two]) = alices_replicas(ALICE, None);
    let opened = Raw::new(&one).initialize("alice-agent", Some(ALICE));
    assert_eq!(opened.status, 200, "{opened:?}");
    let session = opened.session.clone().expect("a session id");
    let list = |token: &str| {
        let message = serde_json::json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {} });
        let bearer = format!("Bearer {token}");
        let headers =
            [("Mcp-Session-Id", session.as_str()), ("Authorization", bearer.as_str()), ("Host", "127.0.0.1:9")];
        Raw::new(&two).post(&message, &headers)
    };
    assert_eq!(list(BOB).status, 404, "bob may not use alice's session");
    let alice = list(ALICE);
    assert_eq!(alice.status, 200, "alice's session is still reached through the other replica: {alice:?}");
    one.stop();
    two.stop();
}

/// The ports at the other end of every TCP connection (any state, `TIME_WAIT` included) of
/// which one end is `port` on this host.
fn peers_of(port: u16) -> std::collections::BTreeSet<u16> {
    let port_of = |field: &str| field.rsplit(':').next().and_then(|p| u16::from_str_radix(p, 16).ok());
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let mut peers = std::collections::BTreeSet::new();
    for line in table.lines().skip(1) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (Some(local), Some(remote)) = (port_of(fields[1]), port_of(fields[2])) else { continue };
        if local == port && remote != 0 {
            peers.insert(remote);
        } else if remote == port {
            peers.insert(local);
        }
    }
    peers
}

/// Requests relayed to the replica holding a session go over kept-alive connections: twenty
/// of them, one after another, reach it over one or two connections (each used to open its
/// own: a third of the throughput behind a balancer, issue 55).
#[test]
fn relayed_requests_reuse_a_connection_to_the_replica_holding_the_session() {
    let _serial = serial();
    const ALICE: &str = "alice-token-7b2e";
    let (_f, [one, two]) = alices_replicas(ALICE, None);
    let opened = Raw::new(&one).initialize("alice-agent", Some(ALICE));
    assert_eq!(opened.status, 200, "{opened:?}");
    let session = opened.session.clone().expect("a session id");
    let port: u16 = one.addr.rsplit(':').next().unwrap().parse().unwrap();
    let before = peers_of(port);
    let relaying = Raw::new(&two);
    let bearer = format!("Bearer {ALICE}");
    let headers = [("Mcp-Session-Id", session.as_str()), ("Authorization", bearer.as_str()), ("Host", "127.0.0.1:9")];
    for id in 2..22 {
        let message = serde_json::json!({ "jsonrpc": "2.0", "id": id, "method": "tools/list", "params": {} });
        let answer = relaying.post(&message, &headers);
        assert_eq!(answer.status, 200, "relayed: {answer:?}");
        assert!(answer.body["result"]["tools"].is_array(), "relayed: {answer:?}");
    }
    let opened_since: Vec<u16> = peers_of(port).difference(&before).copied().collect();
    assert!(
        (1..=2).contains(&opened_since.len()),
        "20 relayed requests opened {} connections to the replica holding the session: {opened_since:?}",
        opened_since.len()
    );
    one.stop();
    two.stop();
}

/// A replica that relayed a session's request keeps its record (read once, not on every
/// request), but never serves from it: the session ended at its own replica, the next request
/// through the other is answered 404 on the holder's word, and the record is gone everywhere.
#[test]
fn a_session_ended_at_its_replica_is_not_served_through_one_that_relayed_it() {
    let _serial = serial();
    const ALICE: &str = "alice-token-4d8f";
    let (f, [one, two]) = alices_replicas(ALICE, None);
    let opened = Raw::new(&one).initialize("alice-agent", Some(ALICE));
    assert_eq!(opened.status, 200, "{opened:?}");
    let session = opened.session.clone().expect("a session id");
    let bearer = format!("Bearer {ALICE}");
    let headers = [("Mcp-Session-Id", session.as_str()), ("Authorization", bearer.as_str()), ("Host", "127.0.0.1:9")];
    let list = |g: &HttpGateway| {
        let message = serde_json::json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {} });
        Raw::new(g).post(&message, &headers).status
    };
    assert_eq!(list(&two), 200, "relayed to the replica holding it");

    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let mut delete = agent.delete(&one.url());
    for (name, value) in headers {
        delete = delete.header(name, value);
    }
    let ended = delete.call().expect("the replica answers").status().as_u16();
    assert!((200..300).contains(&ended), "ended at its own replica: {ended}");

    assert_eq!(list(&two), 404, "an ended session is not served through the replica that relayed it");
    let store = fleetgate_store::open(&f.store_arg()).unwrap();
    assert_eq!(store.http_session(&session).unwrap(), None, "its record is forgotten");
    assert_eq!(list(&two), 404, "nor later");
    one.stop();
    two.stop();
}

/// The adversary holding both an author's and a reviewer's credential, under `[workflow]
/// independent_review = "principal"`, with each of its stateless (2026-07-28) calls landing on
/// another replica: the PR it opened and pushed through the author's replicas is approved by
/// its own reviewer calls through the reviewer's replicas, and that approval does not count,
/// whichever replica recorded what; another principal's approval of the same head does.
#[test]
fn one_principal_cannot_approve_its_own_pr_through_any_replica() {
    let _serial = serial();
    const MALLORY: &str = "mallory-token-61ad";
    const BOB: &str = "bob-token-0c7e";
    let extra = "independent_review = \"principal\"\n\n[http]\ntokens_file = \"tokens\"\n";
    let mut fleet = crate::workflow::Fleet::start_replicated(extra, &["author", "reviewer"], 2, None);
    let sha = crate::routing::sha256;
    let tokens = format!("{}  mallory\n{}  bob\n", sha(MALLORY), sha(BOB));
    std::fs::write(fleet.f.dir.path().join("tokens"), tokens).unwrap();
    let set = |member: &str| -> Vec<HttpGateway> {
        let downstream = fleet.downstream(member);
        (0..2)
            .map(|n| HttpGateway::replica(&fleet.f, &format!("prgs-{member}"), n, "127.0.0.1:9", "unused", &downstream))
            .collect()
    };
    let (author, reviewer) = (set("author"), set("reviewer"));
    assert!(wait_until(30.0, || fleet.f.running_rows() == 6), "the replicas did not join the fleet");
    let mut id = 0u64;
    // One stateless tools/call, round-robined over `replicas`: (refused, text).
    let mut call = |replicas: &[HttpGateway], token: &str, tool: &str, args: Value| -> (bool, String) {
        id += 1;
        let g = &replicas[usize::try_from(id).unwrap() % replicas.len()];
        // A forge call names the repository; a lease is named by its id alone.
        let args = if tool.ends_with("release_pr_lease") { args } else { crate::support::at(args) };
        let params = serde_json::json!({ "name": tool, "arguments": args });
        let a = Raw::new(g).stateless(id, "tools/call", params, "agent", Some(token));
        assert_eq!(a.status, 200, "{:?}", a.body);
        let result = &a.body["result"];
        let text = result["content"][0]["text"].as_str().map_or_else(|| a.body.to_string(), str::to_owned);
        (result["isError"] == true || a.body["error"].is_object(), text)
    };
    let ok = |(refused, text): (bool, String)| -> Value {
        assert!(!refused, "refused: {text}");
        serde_json::from_str(&text).unwrap_or(Value::Null)
    };

    let before = fleet.git(&["rev-parse", "main"]);
    ok(call(&author, MALLORY, "create_branch", serde_json::json!({ "branch": "feature" })));
    let write = serde_json::json!({ "path": "f.txt", "content": "mine\n", "message": "m", "branch_name": "feature" });
    ok(call(&author, MALLORY, "create_or_update_file", write));
    let head = fleet.git(&["rev-parse", "feature"]);
    let create =
        serde_json::json!({ "method": "create", "title": "t", "body": "b", "head": "feature", "base": "main" });
    let pr = ok(call(&author, MALLORY, "pull_request_write", create))["number"].as_i64().expect("a PR number");

    // Mallory reviews her own PR: the lease and the forge's approval go through (the forge
    // sees two users), but the approval is hers.
    let claim = serde_json::json!({ "pr": pr, "head": head, "purpose": "review" });
    ok(call(&reviewer, MALLORY, "gitea_claim_pr_lease", claim.clone()));
    let lease = crate::workflow::fleet_lease(&mut fleet, pr, "review");
    ok(call(&reviewer, MALLORY, "pull_request_review_write", crate::workflow::approve(pr)));
    assert!(!fleet.claim("merger", pr, &head, "merge").0);
    let merge = serde_json::json!({ "method": "merge", "pull_number": pr });
    crate::workflow::refused(
        fleet.call("merger", "pull_request_write", merge.clone()),
        "approval_required",
        "no independent approval recorded at head",
    );
    assert_eq!(fleet.git(&["rev-parse", "main"]), before, "main received nothing");

    // Bob, through the same replicas, is independent: the same head now lands (once Mallory,
    // done reviewing, lets her lease go).
    ok(call(&reviewer, MALLORY, "gitea_release_pr_lease", serde_json::json!({ "lease_id": lease })));
    ok(call(&reviewer, BOB, "gitea_claim_pr_lease", claim));
    ok(call(&reviewer, BOB, "pull_request_review_write", crate::workflow::approve(pr)));
    assert!(!fleet.claim("merger", pr, &head, "merge").0);
    crate::support::answer(fleet.call("merger", "pull_request_write", merge));
    let parents = fleet.git(&["rev-list", "--parents", "-n", "1", "main"]);
    assert_eq!(parents.split(' ').collect::<Vec<_>>()[1..], [before.as_str(), head.as_str()]);
    for g in author.into_iter().chain(reviewer) {
        g.stop();
    }
    fleet.stop();
}

/// A session's record (which replica holds it) lives as long as the session: a DELETE that
/// reaches another replica is relayed and ends it, and a replica stopping forgets every
/// session it held — so no replica relays to an address that serves nothing of it.
#[test]
fn a_sessions_record_ends_with_the_session_and_with_its_replica() {
    let _serial = serial();
    let f = FleetDir::new(ROSTER);
    const TOKEN: &str = "record-token-2b6c";
    let downstream = forge_downstream(&f);
    let one = HttpGateway::replica(&f, "prgs-author", 0, "127.0.0.1:9", TOKEN, &downstream);
    let two = HttpGateway::replica(&f, "prgs-author", 1, "127.0.0.1:9", TOKEN, &downstream);
    let opened = |name: &str| Raw::new(&one).initialize(name, Some(TOKEN)).session.expect("a session id");
    let (deleted, kept) = (opened("s1"), opened("s2"));
    let store = fleetgate_store::open(&f.store_arg()).unwrap();
    let recorded = |session: &str| store.http_session(session).unwrap().map(|s| s.owner);
    assert_eq!(recorded(&deleted), Some(one.addr.clone()), "recorded at its replica's address");
    assert_eq!(recorded(&kept), Some(one.addr.clone()));

    // Ended through the other replica.
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let status = |session: &str| {
        let answer = agent
            .delete(&two.url())
            .header("Authorization", &format!("Bearer {TOKEN}"))
            .header("Host", "127.0.0.1:9")
            .header("Mcp-Session-Id", session)
            .call()
            .expect("the replica answers");
        answer.status().as_u16()
    };
    assert!((200..300).contains(&status(&deleted)), "the session ended through the other replica");
    assert_eq!(recorded(&deleted), None, "an ended session's record is forgotten");
    assert_eq!(recorded(&kept), Some(one.addr.clone()), "the other session stands");

    // Its replica stops: what it held is forgotten with it, and the other answers 404.
    one.stop();
    assert_eq!(recorded(&kept), None, "a stopped replica's sessions are forgotten");
    assert_eq!(status(&kept), 404);
    two.stop();
}

/// A burst of one principal's first requests spread over both replicas at once, each one
/// counted before any is registered: however they interleave, no more of them stand than
/// its bound allows, and every refused one is answered as refused.
#[test]
fn a_burst_of_first_requests_across_replicas_never_stands_over_the_bound() {
    let _serial = serial();
    const ALICE: &str = "alice-token-77e0";
    let (f, replicas) = alices_replicas(ALICE, Some(1));
    // Both replicas warmed (each has read the store for a principal and served a client), so
    // the burst reaches both at once rather than the first-served replica alone.
    for (i, g) in replicas.iter().enumerate() {
        let warm = Raw::new(g).stateless(i as u64, "tools/list", serde_json::json!({}), "warm", Some(BOB));
        assert_eq!(warm.status, 200, "{:?}", warm.body);
    }
    let start = std::sync::Barrier::new(8);
    let answers: Vec<crate::httpkit::Answer> = std::thread::scope(|scope| {
        let burst: Vec<_> = (0..8)
            .map(|i| {
                let (g, start) = (&replicas[i % 2], &start);
                scope.spawn(move || {
                    let raw = Raw::new(g);
                    start.wait();
                    raw.initialize(&format!("burst-{i}"), Some(ALICE))
                })
            })
            .collect();
        burst.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let standing = answers.iter().filter(|a| a.status == 200 && a.body["result"].is_object()).count();
    for a in answers.iter().filter(|a| !(a.status == 200 && a.body["result"].is_object())) {
        let why = a.body["error"]["message"].as_str().unwrap_or_default();
        assert!(why.contains("maximum of 1 attachments"), "a refusal names the bound: {} {:?}", a.status, a.body);
    }
    assert!(standing <= 1, "{standing} of alice's attachments stand over her bound of one");
    // The store agrees: at most one live worker of hers (each refused one retired).
    let mut active = usize::MAX;
    wait_until(10.0, || {
        let workers = f.cli(&["worker", "list", "--json"]);
        let list = workers["workers"].as_array().cloned().unwrap_or_default();
        active = list.iter().filter(|w| w["client_name"] == "alice" && w["status"] == "active").count();
        active == standing
    });
    assert_eq!(active, standing, "alice's active workers");
    for g in replicas {
        g.stop();
    }
}
