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

/// A principal's bound on attachments holds across the member's replicas, counted in the
/// store: its sessions and its stateless client on one replica count on the other, and the
/// stateless client it already has, reaching the other replica, is no new attachment.
#[test]
fn a_principals_bound_holds_across_replicas() {
    let _serial = serial();
    const ALICE: &str = "alice-token-3f9a";
    let roster = format!("{ROSTER}\n[http]\ntokens_file = \"tokens\"\nmax_attachments_per_principal = 3\n");
    let f = FleetDir::new(&roster);
    std::fs::write(f.dir.path().join("tokens"), format!("{}  alice\n", crate::routing::sha256(ALICE))).unwrap();
    let bare = crate::support::bare_repo(f.dir.path(), "forge.git", &f.repo());
    let mut downstream = crate::support::forge_fixture();
    downstream.extend(["--repo".to_owned(), bare.display().to_string()]);
    let one = HttpGateway::replica(&f, "prgs-author", 0, "127.0.0.1:9", "shared-token-unused", &downstream);
    let two = HttpGateway::replica(&f, "prgs-author", 1, "127.0.0.1:9", "shared-token-unused", &downstream);
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
    const BOB: &str = "bob-token-a7e2";
    let roster = format!("{ROSTER}\n[http]\ntokens_file = \"tokens\"\n");
    let f = FleetDir::new(&roster);
    let tokens = format!("{}  alice\n{}  bob\n", crate::routing::sha256(ALICE), crate::routing::sha256(BOB));
    std::fs::write(f.dir.path().join("tokens"), tokens).unwrap();
    let bare = crate::support::bare_repo(f.dir.path(), "forge.git", &f.repo());
    let mut downstream = crate::support::forge_fixture();
    downstream.extend(["--repo".to_owned(), bare.display().to_string()]);
    let one = HttpGateway::replica(&f, "prgs-author", 0, "127.0.0.1:9", "shared-token-unused", &downstream);
    let two = HttpGateway::replica(&f, "prgs-author", 1, "127.0.0.1:9", "shared-token-unused", &downstream);
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
