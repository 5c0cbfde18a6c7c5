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
    one.stop();
    two.stop();
}
