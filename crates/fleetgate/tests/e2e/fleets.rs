//! Several fleets on one host (issues #19 and 54): real gateways of other fleets, each on its
//! own store. One that proves its fleet (the proof it publishes, tied to its process) and is
//! bound to another checkout is reported and leaves this fleet's gate open, also once its row
//! is gone; one bound to this fleet's checkout closes the gate. `neighbours` holds the same
//! on PostgreSQL, and the hostile cases.

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

/// Issue 54: a neighbour's row going away (its gateway stopping in order, or an operator
/// deregistering it in its own store) is that fleet's business: the gateway is proven by the
/// proof it holds while it runs, and leaves this gate open until it is gone.
#[test]
fn a_neighbour_whose_row_goes_away_stays_another_fleets_until_it_exits() {
    let _serial = serial();
    let (ours, _author) = our_fleet();
    let other = FleetDir::new(&roster("other", &["author"], ""));
    let other_gateway = Member::start(&other.serve_argv("prgs-author", "fleet-o", &[]));
    assert!(wait_until(15.0, || other.running_rows() == 1));
    let pid = i64::from(other_gateway.0.id());
    let mut v = serde_json::Value::Null;
    let proven = |v: &serde_json::Value| {
        v["mutation_gate_satisfied"] == true
            && v["other_fleet_gateways"].as_array().unwrap().iter().any(|g| g["pid"] == pid)
    };
    assert!(
        wait_until(15.0, || {
            v = inventory(&ours);
            proven(&v)
        }),
        "proven while its row runs: {}",
        reasons(&v)
    );

    // Its row becomes history while it keeps running.
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
    assert_eq!(other.running_rows(), 0);
    let v = inventory(&ours);
    assert!(proven(&v), "its row gone, its proof still stands: {}", reasons(&v));
    other_gateway.stop();
    let v = inventory(&ours);
    assert_eq!(v["mutation_gate_satisfied"], true, "{}", reasons(&v));
    assert!(!v["other_fleet_gateways"].as_array().unwrap().iter().any(|g| g["pid"] == pid), "gone: {v}");
}

/// `text` names the process `pid` ("pid 4242", not "pid 42421"; or its `/proc` entry).
pub(crate) fn names_pid(text: &str, pid: i64) -> bool {
    let word = format!("pid {pid}");
    text.match_indices(&word).any(|(at, _)| !text[at + word.len()..].starts_with(|c: char| c.is_ascii_digit()))
        || text.contains(&format!("/proc/{pid}/"))
}

/// A process that looks like a gateway (`fleetgate serve --profile prgs-author`: the CLI parses
/// its command line) but never serves nor writes a row: Python, named `fleetgate`, running a
/// script named `serve` that waits for its stdin to close. `env` is its whole environment.
fn fake_gateway(dir: &std::path::Path, env: &[(&str, String)]) -> std::process::Child {
    use std::os::unix::process::CommandExt;
    std::fs::write(dir.join("serve"), "import sys\nsys.stdin.read()\n").unwrap();
    std::process::Command::new(crate::support::peer(".venv/bin/python"))
        .arg0("fleetgate")
        .args(["serve", "--profile", "prgs-author"])
        .current_dir(dir)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Issue 43 (4): while another fleet on the host started and stopped its gateways, this
/// fleet's gate refused: a neighbour's gateway before its row was written was "an
/// unregistered fleet process", and one that exited between the scan and the read of its
/// environment made the gate refuse `runtime_reconnect_required`. Here a neighbour fleet (its
/// own store and checkout) starts a gateway every few hundred milliseconds and stops it
/// again (stdin EOF, or SIGKILL), while this fleet's member makes mutating calls: no refusal
/// names a neighbour's process. Then real unregistered processes — one naming this fleet's
/// store, one naming none — still close the gate, at once.
#[test]
fn a_neighbour_fleets_churn_never_closes_this_gate_and_an_unregistered_process_still_does() {
    use crate::support::{Client, peer};
    use serde_json::json;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    let _serial = serial();
    let python = peer(".venv/bin/python").display().to_string();
    let ours = FleetDir::new(&roster("e2e", &["author"], ""));
    // Not `mcp_server.py`, which the default `process_match` names: the SDK client's own
    // command line (it holds the gateway's) would then be a fleet process of its own.
    let script = ours.dir.path().join("stamp_server.py");
    std::fs::copy(peer("tests/peers/minimal_server.py"), &script).unwrap();
    let stamps = ours.dir.path().join("stamps.txt").display().to_string();
    let mut client =
        Client::start(&ours.serve_argv("prgs-author", "fleet-a", &[&python, &script.display().to_string(), &stamps]));
    let mut v = serde_json::Value::Null;
    assert!(
        wait_until(20.0, || {
            v = inventory(&ours);
            v["mutation_gate_satisfied"] == true
        }),
        "{}",
        reasons(&v)
    );

    // The neighbour: one gateway after another, each living a few hundred milliseconds.
    let neighbour = FleetDir::new(&roster("neighbour", &["author"], ""));
    let argv = neighbour.serve_argv("prgs-author", "neighbour", &[]);
    let (stop, cycles) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
    let pids = Arc::new(Mutex::new(Vec::<i64>::new()));
    let churn = {
        let (stop, cycles, pids) = (stop.clone(), cycles.clone(), pids.clone());
        std::thread::spawn(move || {
            let mut i: u64 = 0;
            while !stop.load(Ordering::SeqCst) {
                let mut gateway = Member::start(&argv);
                pids.lock().unwrap().push(i64::from(gateway.0.id()));
                // Its lifetime is the load this test puts on the gate, not a wait for a state.
                std::thread::sleep(std::time::Duration::from_millis(150 + (i * 131) % 350));
                if i % 4 == 3 {
                    let _ = gateway.0.kill();
                    let _ = gateway.0.wait();
                } else {
                    gateway.stop();
                }
                cycles.fetch_add(1, Ordering::SeqCst);
                i += 1;
            }
        })
    };
    let (mut calls, mut refusals) = (0, Vec::new());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while (cycles.load(Ordering::SeqCst) < 15 || calls < 40) && std::time::Instant::now() < deadline {
        let (refused, text, _) = client.call("stamp", json!({ "text": format!("call {calls}") }));
        if refused {
            refusals.push(text);
        }
        calls += 1;
    }
    stop.store(true, Ordering::SeqCst);
    churn.join().unwrap();
    let (cycles, pids) = (cycles.load(Ordering::SeqCst), pids.lock().unwrap().clone());
    assert!(cycles >= 15 && calls >= 40, "{cycles} neighbour gateways, {calls} calls in the time allowed");
    eprintln!("{cycles} neighbour gateways, {calls} calls, {} refused: {refusals:?}", refusals.len());
    // A refusal for another reason (something else on this host) is not the neighbour's; one
    // that names a neighbour's process is.
    for text in &refusals {
        for pid in &pids {
            assert!(
                !names_pid(text, *pid),
                "refused for the neighbour's pid {pid} ({} of {calls} calls refused): {text}",
                refusals.len()
            );
        }
    }

    // Real unregistered processes still close the gate: one naming this fleet's store (in
    // its environment, as a client's configuration would), one naming no store at all.
    for (what, env) in [
        ("this fleet's own store", vec![("GITEA_WORKER_REGISTRY_DB", ours.store().display().to_string())]),
        ("names no store", vec![]),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut fake = fake_gateway(dir.path(), &env);
        let pid = i64::from(fake.id());
        let (refused, text, _) = client.call("stamp", json!({ "text": "while it runs" }));
        assert!(refused, "{what}: the call passed beside an unregistered gateway");
        assert!(
            text.contains(&format!("unregistered fleet process pid {pid} ")) && text.contains(what),
            "{what}: {text}"
        );
        drop(fake.stdin.take());
        fake.wait().unwrap();
        let mut passed = false;
        assert!(
            wait_until(10.0, || {
                passed = !client.call("stamp", json!({ "text": "after it" })).0;
                passed
            }),
            "{what}: the gate stayed closed after it exited"
        );
    }
}
