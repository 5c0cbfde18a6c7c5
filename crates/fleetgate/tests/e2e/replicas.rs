//! A member that declares replicas (issue 46, first part): real HTTP gateways of one profile on
//! one store. Two of two declared are one member and the gate is open; a third closes it as the
//! seed's duplicate, naming what was declared; stopping it opens the gate again.

use crate::httpkit::HttpGateway;
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
