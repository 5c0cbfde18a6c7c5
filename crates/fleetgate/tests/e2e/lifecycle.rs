//! Orderly shutdown of the real `fleetgate serve` on each signal: the row is
//! marked stopped and the process exits 0; SIGKILL leaves the row to expire.

use crate::support::{FleetDir, Member, serial, wait_until};
use std::process::Command;

const CONFIG: &str = "[fleet]\nname = \"life\"\n\n[[members]]\nnamespace = \"gitea-author\"\nprofile = \"prgs-author\"\nrole = \"author\"\n";

fn row_status(f: &FleetDir, pid: u32) -> Option<String> {
    f.cli(&["runtime", "list", "--json"])["runtimes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["pid"] == pid)
        .map(|r| r["status"].as_str().unwrap().to_owned())
}

#[test]
fn sigterm_and_sigint_shut_down_in_order_and_sigkill_leaves_the_row_to_expire() {
    let _serial = serial();
    let f = FleetDir::new(CONFIG);
    for signal in ["TERM", "INT"] {
        let mut m = Member::start(&f.serve_argv("prgs-author", "c", &[]));
        let pid = m.0.id();
        assert!(wait_until(10.0, || row_status(&f, pid).as_deref() == Some("running")), "{signal}: no row");
        assert!(Command::new("kill").args([&format!("-{signal}"), &pid.to_string()]).status().unwrap().success());
        let mut status = None;
        assert!(wait_until(10.0, || {
            status = m.0.try_wait().unwrap();
            status.is_some()
        }));
        assert_eq!(status.unwrap().code(), Some(0), "SIG{signal} is an orderly stop");
        assert_eq!(row_status(&f, pid).as_deref(), Some("stopped"), "SIG{signal} marks the row stopped");
    }
    let mut m = Member::start(&f.serve_argv("prgs-author", "c", &[]));
    let pid = m.0.id();
    assert!(wait_until(10.0, || row_status(&f, pid).as_deref() == Some("running")));
    m.0.kill().unwrap();
    m.0.wait().unwrap();
    assert_eq!(
        row_status(&f, pid).as_deref(),
        Some("running"),
        "nothing ran after SIGKILL: the row expires on its TTL"
    );
    let inv = f.cli(&["inventory", "--json"]);
    assert_eq!(inv["stale_members"][0]["liveness"], "dead", "{inv}");
}
