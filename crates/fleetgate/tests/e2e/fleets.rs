//! Several fleets on one host (issue #19): real gateways of other fleets, each on its own
//! store. One that proves its fleet (it holds its store open, which holds its running row)
//! and is bound to another checkout is reported and leaves this fleet's gate open; one bound
//! to this fleet's checkout, or whose store holds no running row for it, closes the gate.

use crate::support::{FleetDir, Member, foreign_fleet, roster, serial, wait_until};

fn inventory(f: &FleetDir) -> serde_json::Value {
    f.cli(&["inventory", "--json"])
}

fn unregistered(v: &serde_json::Value) -> Vec<i64> {
    v["unregistered_processes"].as_array().unwrap().iter().map(|p| p["pid"].as_i64().unwrap()).collect()
}

fn reasons(v: &serde_json::Value) -> String {
    v["blocked_reasons"].to_string()
}

/// This fleet: one author gateway on its own store and checkout, its row written.
fn our_fleet() -> (FleetDir, Member) {
    let ours = FleetDir::new(&roster("e2e", &["author"], ""));
    let author = Member::start(&ours.serve_argv("prgs-author", "fleet-a", &[]));
    assert!(wait_until(15.0, || ours.running_rows() == 1));
    (ours, author)
}

#[test]
fn another_fleets_gateway_is_reported_and_this_gate_stays_open() {
    let _serial = serial();
    let foreign = foreign_fleet();
    let (ours, _author) = our_fleet();

    // Polled: a gateway of some other run on this host closes the gate for the instant
    // between its start and its row.
    let mut v = serde_json::Value::Null;
    assert!(
        wait_until(10.0, || {
            v = inventory(&ours);
            v["mutation_gate_satisfied"] == true
        }),
        "{}",
        reasons(&v)
    );
    assert!(unregistered(&v).is_empty(), "{v}");
    let others = v["other_fleet_gateways"].as_array().unwrap();
    let other = others.iter().find(|g| g["pid"] == foreign.pid).unwrap_or_else(|| panic!("{others:?}"));
    let their_root = foreign.fleet.repo().canonicalize().unwrap();
    assert_eq!(other["repository_root"], their_root.display().to_string());
    assert_eq!(other["store"], foreign.fleet.store().display().to_string());
    assert_eq!(other["profile"], "prgs-author");
    // The text table names it as another fleet's, not as ours (polled likewise).
    let mut text = String::new();
    let shown = wait_until(10.0, || {
        let out = std::process::Command::new(crate::support::bin())
            .env_clear()
            .arg("--store")
            .arg(ours.store())
            .arg("--config")
            .arg(ours.config())
            .arg("inventory")
            .output()
            .unwrap();
        text = String::from_utf8_lossy(&out.stdout).into_owned();
        out.status.code() == Some(0) && text.contains(&format!("other fleet: pid {}", foreign.pid))
    });
    assert!(shown, "{text}");
}

#[test]
fn a_gateway_of_another_store_on_our_checkout_closes_the_gate() {
    let _serial = serial();
    let (ours, _author) = our_fleet();
    // A second fleet (own store, own roster) pointed at our checkout.
    let twin = FleetDir::new(&roster("twin", &["author"], ""));
    let mut argv = twin.serve_argv("prgs-author", "fleet-twin", &[]);
    let at = argv.iter().position(|a| a == "--repo-root").unwrap();
    argv[at + 1] = ours.repo().display().to_string();
    let twin_gateway = Member::start(&argv);
    assert!(wait_until(15.0, || twin.running_rows() == 1));
    let pid = i64::from(twin_gateway.0.id());

    let v = inventory(&ours);
    assert_eq!(v["mutation_gate_satisfied"], false);
    assert_eq!(unregistered(&v), [pid], "{v}");
    assert!(reasons(&v).contains("two fleets on one repository"), "{}", reasons(&v));
    twin_gateway.stop();
    let v = inventory(&ours);
    assert_eq!(v["mutation_gate_satisfied"], true, "{}", reasons(&v));
}

#[test]
fn a_gateway_whose_store_holds_no_running_row_for_it_closes_the_gate() {
    let _serial = serial();
    let (ours, _author) = our_fleet();
    let other = FleetDir::new(&roster("other", &["author"], ""));
    let other_gateway = Member::start(&other.serve_argv("prgs-author", "fleet-o", &[]));
    assert!(wait_until(15.0, || other.running_rows() == 1));
    let pid = i64::from(other_gateway.0.id());
    let v = inventory(&ours);
    assert_eq!(v["mutation_gate_satisfied"], true, "proven while its row runs: {}", reasons(&v));

    // Its row becomes history while it keeps running: it still names the store and holds
    // it open, but the store no longer vouches for it.
    let runtimes = other.cli(&["runtime", "list", "--json"]);
    let id = runtimes["runtimes"][0]["runtime_id"].as_str().unwrap().to_owned();
    let out = std::process::Command::new(crate::support::bin())
        .env_clear()
        .arg("--store")
        .arg(other.store())
        .args(["runtime", "deregister", &id])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v = inventory(&ours);
    assert_eq!(v["mutation_gate_satisfied"], false);
    assert_eq!(unregistered(&v), [pid], "{v}");
    assert!(reasons(&v).contains("holds no running row"), "{}", reasons(&v));
}
