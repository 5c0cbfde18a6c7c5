//! Fleets that share a host stay independent, on any engine (issue 54): a fleet on SQLite over
//! stdio and a fleet on PostgreSQL over HTTP, each on its own repository, both gates open side
//! by side, each reporting the other by the proof it publishes; a minute of the PostgreSQL
//! fleet's gateways starting, forking their downstreams and stopping (in order, or killed)
//! closes no poll of the SQLite fleet's gate; and the fail-closed rule still holds on either
//! engine — a gateway of another store bound to our checkout, working in it, or bound to our
//! forge repository closes the gate, a bare server does, and so does a proof that is not the
//! process's own.

use crate::support::{Client, FleetDir, Member, bin, peer, roster, serial, wait_until};
use fleetgate_testkit::pg::PgDatabase;
use serde_json::{Value, json};
use std::path::Path;
use std::process::{Child, Command, Stdio};

const BINDING_A: &str = "[binding]\nremote = \"origin\"\norg = \"acme\"\nrepo = \"fleet-a\"\n";
const BINDING_B: &str = "[binding]\nremote = \"origin\"\norg = \"acme\"\nrepo = \"fleet-b\"\n";

fn inventory(f: &FleetDir) -> Value {
    f.cli(&["inventory", "--json"])
}

fn reasons(v: &Value) -> String {
    v["blocked_reasons"].to_string()
}

/// A fleet on a fresh PostgreSQL database (`None` when PostgreSQL is skipped explicitly).
fn pg_fleet(name: &str, roles: &[&str], extra: &str) -> Option<(FleetDir, PgDatabase)> {
    let db = PgDatabase::fresh("fg_neighbour")?;
    let mut f = FleetDir::new(&roster(name, roles, extra));
    f.store_url = Some(db.url.clone());
    Some((f, db))
}

/// A gateway of fleet `f` serving `profile` over `transport` ("http": on a port of its own
/// choosing), bound to the checkout `root`, started in `cwd`, killed when dropped.
struct Gateway(Child);

impl Gateway {
    fn start(f: &FleetDir, profile: &str, transport: &str, root: &Path, cwd: &Path, downstream: &[&str]) -> Self {
        Self::start_with(f, profile, transport, root, cwd, downstream, false)
    }

    /// [`start`](Self::start); with `store_in_env`, its store in its environment (a URL with
    /// a password: sealed away with the secrets at its start) rather than on its command line.
    fn start_with(
        f: &FleetDir,
        profile: &str,
        transport: &str,
        root: &Path,
        cwd: &Path,
        downstream: &[&str],
        store_in_env: bool,
    ) -> Self {
        let mut cmd = Command::new(bin());
        cmd.env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("GITEA_CLIENT_MANAGED", "1")
            .env("GITEA_MCP_COHORT_ID", "fleet-b")
            .env("FLEETGATE_LOG", "warn");
        if store_in_env {
            cmd.env("GITEA_WORKER_REGISTRY_DB", f.store_arg());
        } else {
            cmd.arg("--store").arg(f.store_arg());
        }
        cmd.arg("--config")
            .arg(f.config())
            .args(["serve", "--profile", profile, "--repo-root"])
            .arg(root)
            .current_dir(cwd);
        if transport == "http" {
            cmd.args(["--transport", "http", "--listen", "127.0.0.1:0"]);
        }
        if !downstream.is_empty() {
            cmd.arg("--").args(downstream);
        }
        Self(cmd.stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap())
    }

    fn pid(&self) -> i64 {
        i64::from(self.0.id())
    }

    /// A stdio client's first message: the gateway attaches it and starts its downstream
    /// (a fork, then an exec, under the guard).
    fn initialize(&mut self) {
        use std::io::Write;
        let hello = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "churn", "version": "1"}}});
        let _ = writeln!(self.0.stdin.as_mut().unwrap(), "{hello}");
    }

    /// In order: stdin closed (stdio) and SIGTERM (HTTP), then waited for.
    fn stop(mut self) {
        drop(self.0.stdin.take());
        let _ = Command::new("kill").arg("-TERM").arg(self.0.id().to_string()).status();
        assert!(wait_until(15.0, || self.0.try_wait().unwrap().is_some()), "a gateway did not stop");
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Fleet A: one author over stdio on SQLite, bound to `acme/fleet-a`, its row written.
fn fleet_a() -> (FleetDir, Member) {
    let a = FleetDir::new(&roster("fleet-a", &["author"], BINDING_A));
    let author = Member::start(&a.serve_argv("prgs-author", "fleet-a", &[]));
    assert!(wait_until(15.0, || a.running_rows() == 1), "fleet A's author wrote no row");
    (a, author)
}

/// `f`'s inventory once `ok` holds of it (bounded), or the last one read.
fn inventory_once(f: &FleetDir, secs: f64, ok: impl Fn(&Value) -> bool) -> Value {
    let mut v = Value::Null;
    wait_until(secs, || {
        v = inventory(f);
        ok(&v)
    });
    v
}

fn other_fleet(v: &Value, pid: i64) -> Option<&Value> {
    v["other_fleet_gateways"].as_array()?.iter().find(|g| g["pid"] == pid)
}

fn canonical(p: &Path) -> String {
    p.canonicalize().unwrap().display().to_string()
}

#[test]
fn a_sqlite_fleet_and_a_postgres_fleet_keep_both_gates_open_side_by_side() {
    let _serial = serial();
    let Some((b, _db)) = pg_fleet("fleet-b", &["author", "reviewer"], BINDING_B) else { return };
    let (a, author) = fleet_a();
    let here = std::env::current_dir().unwrap();
    let b_gateways: Vec<Gateway> =
        ["prgs-author", "prgs-reviewer"].iter().map(|p| Gateway::start(&b, p, "http", &b.repo(), &here, &[])).collect();
    assert!(wait_until(30.0, || b.running_rows() == 2), "fleet B's gateways wrote no rows");
    let a_pid = i64::from(author.0.id());

    // A sees B's two gateways by their proofs, and stays open (polled: a gateway just
    // started is pending until its proof is out).
    let proven = |v: &Value, pids: &[i64]| {
        v["mutation_gate_satisfied"] == true && pids.iter().all(|p| other_fleet(v, *p).is_some())
    };
    let b_pids: Vec<i64> = b_gateways.iter().map(Gateway::pid).collect();
    let seen_by_a = inventory_once(&a, 20.0, |v| proven(v, &b_pids));
    assert!(proven(&seen_by_a, &b_pids), "fleet A: {}", reasons(&seen_by_a));
    for pid in &b_pids {
        let g = other_fleet(&seen_by_a, *pid).unwrap();
        assert_eq!(g["engine"], "postgres", "{g}");
        assert_eq!(g["fleet"], "fleet-b", "{g}");
        assert_eq!(g["transport"], "http", "{g}");
        assert_eq!(g["repository_root"], canonical(&b.repo()), "{g}");
        assert_eq!((g["org"].as_str(), g["repo"].as_str()), (Some("acme"), Some("fleet-b")), "{g}");
        let store = g["store"].as_str().unwrap();
        assert!(
            store.starts_with("postgres://") && !store.contains(&password_of(b.store_url.as_deref().unwrap())),
            "{g}"
        );
    }
    // B sees A's gateway (and the run-long foreign fleet's) the same way, and stays open.
    let seen_by_b = inventory_once(&b, 20.0, |v| proven(v, &[a_pid]));
    assert!(proven(&seen_by_b, &[a_pid]), "fleet B: {}", reasons(&seen_by_b));
    let g = other_fleet(&seen_by_b, a_pid).unwrap();
    assert_eq!((g["engine"].as_str(), g["fleet"].as_str()), (Some("sqlite"), Some("fleet-a")), "{g}");
    assert_eq!(g["store"], a.store().display().to_string(), "{g}");
    // The text form names each neighbour, its engine and its checkout.
    let out = a.cli_command(&["inventory"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for pid in &b_pids {
        assert!(text.contains(&format!("other fleet: pid {pid} ")), "{text}");
    }
    assert!(text.contains("postgres store") && text.contains(&canonical(&b.repo())), "{text}");
    for g in b_gateways {
        g.stop();
    }
}

/// Issue 54's judgement: while fleet B (PostgreSQL) starts and stops its gateways for a
/// minute — HTTP ones, stdio ones that fork their downstream, some with their store URL (and
/// its password) in their environment, sealed away at their start, in-order stops and
/// SIGKILLs, lifetimes from a fraction of a second to a few seconds — fleet A (SQLite, stdio) makes
/// gated calls and reads its inventory in a loop: no call is refused and no poll is closed
/// for a neighbour's process.
#[test]
fn a_minute_of_a_postgres_fleets_churn_never_closes_a_sqlite_fleets_gate() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    let _serial = serial();
    let Some((b, _db)) = pg_fleet("fleet-b", &["author", "reviewer"], BINDING_B) else { return };
    let python = peer(".venv/bin/python").display().to_string();
    let a = FleetDir::new(&roster("fleet-a", &["author"], BINDING_A));
    // Not `mcp_server.py`, which the default `process_match` names.
    let script = a.dir.path().join("stamp_server.py");
    std::fs::copy(peer("tests/peers/minimal_server.py"), &script).unwrap();
    let stamps = a.dir.path().join("stamps.txt").display().to_string();
    let mut client =
        Client::start(&a.serve_argv("prgs-author", "fleet-a", &[&python, &script.display().to_string(), &stamps]));
    let settled = inventory_once(&a, 20.0, |v| v["mutation_gate_satisfied"] == true);
    assert_eq!(settled["mutation_gate_satisfied"], true, "{}", reasons(&settled));

    let b_script = b.dir.path().join("b_server.py");
    std::fs::copy(peer("tests/peers/minimal_server.py"), &b_script).unwrap();
    let (stop, cycles) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
    let pids = Arc::new(Mutex::new(Vec::<i64>::new()));
    let churn = {
        let (stop, cycles, pids) = (stop.clone(), cycles.clone(), pids.clone());
        let (python, b_script) = (python.clone(), b_script.display().to_string());
        std::thread::spawn(move || {
            let repo = b.repo();
            let here = std::env::current_dir().unwrap();
            let mut i: u64 = 0;
            while !stop.load(Ordering::SeqCst) {
                let profile = if i.is_multiple_of(2) { "prgs-author" } else { "prgs-reviewer" };
                let gateway = match i % 3 {
                    0 => Gateway::start(&b, profile, "http", &repo, &here, &[]),
                    n => {
                        let downstream = [python.as_str(), b_script.as_str()];
                        let mut g = Gateway::start_with(&b, profile, "stdio", &repo, &here, &downstream, n == 2);
                        g.initialize();
                        g
                    }
                };
                pids.lock().unwrap().push(gateway.pid());
                // Its lifetime is the load this test puts on the gate, not a wait for a state.
                std::thread::sleep(std::time::Duration::from_millis(200 + (i * 677) % 2800));
                if i % 4 == 3 {
                    drop(gateway);
                } else {
                    gateway.stop();
                }
                cycles.fetch_add(1, Ordering::SeqCst);
                i += 1;
            }
        })
    };

    let (mut calls, mut polls, mut refused, mut closed) = (0, 0, Vec::new(), Vec::new());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        let (is_error, text, _) = client.call("stamp", json!({ "text": format!("call {calls}") }));
        calls += 1;
        if is_error {
            refused.push(text);
        }
        let v = inventory(&a);
        polls += 1;
        if v["mutation_gate_satisfied"] != true {
            closed.push(reasons(&v));
        }
    }
    stop.store(true, Ordering::SeqCst);
    churn.join().unwrap();
    let (cycles, pids) = (cycles.load(Ordering::SeqCst), pids.lock().unwrap().clone());
    eprintln!(
        "{cycles} of fleet B's gateways; fleet A: {calls} calls ({} refused), {polls} polls ({} closed)",
        refused.len(),
        closed.len()
    );
    assert!(cycles >= 15 && calls >= 40 && polls >= 40, "{cycles} gateways, {calls} calls, {polls} polls in a minute");
    // Nothing else runs on a host this suite owns; on a shared one, a refusal that names no
    // process of fleet B is someone else's, and is shown, not counted.
    let names_b = |text: &str| pids.iter().any(|pid| crate::fleets::names_pid(text, *pid));
    let by_b: Vec<&String> = refused.iter().chain(&closed).filter(|t| names_b(t)).collect();
    assert!(by_b.is_empty(), "closed for fleet B's processes: {by_b:?}");
    assert!(refused.is_empty() && closed.is_empty(), "refused {refused:?}, closed {closed:?}");
}

/// The copy of the minimal server named like the default `process_match` (a bare server).
fn bare_server(dir: &Path) -> Child {
    let script = dir.join("mcp_server.py");
    std::fs::copy(peer("tests/peers/minimal_server.py"), &script).unwrap();
    Command::new(peer(".venv/bin/python"))
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// One of another fleet's gateways beside fleet A that must close A's gate, named `why`.
/// The gate closes (once its proof is out) and opens again when it stops.
fn closes_a(a: &FleetDir, gateway: Gateway, why: &str) {
    let pid = gateway.pid();
    let v = inventory_once(a, 20.0, |v| v["mutation_gate_satisfied"] == false && reasons(v).contains(why));
    assert_eq!(v["mutation_gate_satisfied"], false, "{why}: {v}");
    assert!(reasons(&v).contains(&format!("unregistered fleet process pid {pid} ")), "{why}: {}", reasons(&v));
    assert!(reasons(&v).contains(why), "{why}: {}", reasons(&v));
    let unproven = v["unproven_gateways"].as_array().unwrap();
    assert!(unproven.iter().any(|g| g["pid"] == pid && g["why"].as_str().unwrap().contains(why)), "{v}");
    gateway.stop();
    let v = inventory_once(a, 15.0, |v| v["mutation_gate_satisfied"] == true);
    assert_eq!(v["mutation_gate_satisfied"], true, "{why}: still closed after it stopped: {}", reasons(&v));
}

/// The fail-closed rule on either engine: a gateway of another store bound to fleet A's
/// checkout, working in it (its proof naming another), or bound to A's forge repository
/// closes A's gate; so does a bare server.
#[test]
fn a_gateway_of_another_store_in_our_checkout_or_on_our_repository_closes_the_gate_on_either_engine() {
    let _serial = serial();
    let Some((pg, _db)) = pg_fleet("twin", &["author"], "") else { return };
    let (a, _author) = fleet_a();
    let settled = inventory_once(&a, 20.0, |v| v["mutation_gate_satisfied"] == true);
    assert_eq!(settled["mutation_gate_satisfied"], true, "{}", reasons(&settled));
    let sqlite = FleetDir::new(&roster("twin", &["author"], ""));
    let here = std::env::current_dir().unwrap();
    for (engine, twin) in [("sqlite", &sqlite), ("postgres", &pg)] {
        eprintln!("{engine}: bound to A's checkout");
        closes_a(
            &a,
            Gateway::start(twin, "prgs-author", "http", &a.repo(), &here, &[]),
            "two fleets on one repository",
        );
        eprintln!("{engine}: working in A's checkout, its proof naming its own");
        let inside = a.repo().join("sub");
        std::fs::create_dir_all(&inside).unwrap();
        closes_a(
            &a,
            Gateway::start(twin, "prgs-author", "http", &twin.repo(), &inside, &[]),
            "it works in this fleet's checkout",
        );
    }
    eprintln!("bound to A's forge repository, from another checkout");
    let bound = FleetDir::new(&roster("twin-bound", &["author"], BINDING_A));
    let mut bound_pg = bound;
    let db2 = PgDatabase::fresh("fg_neighbour").unwrap();
    bound_pg.store_url = Some(db2.url.clone());
    closes_a(
        &a,
        Gateway::start(&bound_pg, "prgs-author", "http", &bound_pg.repo(), &here, &[]),
        "bound to this fleet's repository origin/acme/fleet-a",
    );

    eprintln!("a bare server");
    let dir = tempfile::tempdir().unwrap();
    let mut bare = bare_server(dir.path());
    let pid = i64::from(bare.id());
    let v = inventory_once(&a, 15.0, |v| reasons(v).contains(&format!("unregistered fleet process pid {pid} ")));
    assert_eq!(v["mutation_gate_satisfied"], false, "{v}");
    assert!(reasons(&v).contains("mcp_server.py"), "{}", reasons(&v));
    let _ = bare.kill();
    let _ = bare.wait();
    let v = inventory_once(&a, 15.0, |v| v["mutation_gate_satisfied"] == true);
    assert_eq!(v["mutation_gate_satisfied"], true, "{}", reasons(&v));
}

/// A look-alike gateway (`fleetgate serve`, really Python) holding the proof `env` describes
/// (tests/peers/forged_proof.py), once it says it is ready.
fn forged(dir: &Path, env: &[(&str, String)]) -> Child {
    use std::io::BufRead;
    use std::os::unix::process::CommandExt;
    std::fs::copy(peer("tests/peers/forged_proof.py"), dir.join("serve")).unwrap();
    let mut child = Command::new(peer(".venv/bin/python"))
        .arg0("fleetgate")
        .args(["serve", "--profile", "prgs-author"])
        .current_dir(dir)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        // It names a store of its own (not ours), so only its proof can vouch for it.
        .env("GITEA_WORKER_REGISTRY_DB", dir.join("forged.sqlite3"))
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready", "the look-alike did not publish its proof");
    child
}

/// A proof is its own process's: one borrowed from a real gateway, one about itself that
/// puts it in our checkout, one naming a SQLite file it does not hold, one made by another
/// user — each closes the gate at once (no grace: a proof is there), the reason said.
#[test]
fn a_proof_that_is_not_the_processes_own_closes_the_gate() {
    let _serial = serial();
    let (a, _author) = fleet_a();
    let foreign = crate::support::foreign_fleet();
    let settled = inventory_once(&a, 20.0, |v| v["mutation_gate_satisfied"] == true);
    assert_eq!(settled["mutation_gate_satisfied"], true, "{}", reasons(&settled));
    let elsewhere = tempfile::tempdir().unwrap();
    let pg_store = json!({"engine": "postgres", "location": "postgres://x@127.0.0.1:1/forged",
        "key": {"kind": "database", "system": "1", "database": "2", "schema": "public"}})
    .to_string();
    let sqlite_store = json!({"engine": "sqlite", "location": "/nonexistent/forged.sqlite3",
        "key": {"kind": "file", "device": 1, "inode": 2}})
    .to_string();
    let root = |p: &Path| p.display().to_string();
    let cases: Vec<(&str, Vec<(&str, String)>)> = vec![
        ("its proof names another process", vec![("FORGE_COPY", foreign.pid.to_string())]),
        (
            "two fleets on one repository",
            vec![("FORGE_ROOT", root(&a.repo().canonicalize().unwrap())), ("FORGE_STORE", pg_store.clone())],
        ),
        (
            "it does not hold open the store its proof names",
            vec![("FORGE_ROOT", root(elsewhere.path())), ("FORGE_STORE", sqlite_store)],
        ),
        (
            "its proof belongs to uid 0, the process runs as uid 65534",
            vec![("FORGE_ROOT", root(elsewhere.path())), ("FORGE_STORE", pg_store), ("FORGE_SETUID", "65534".into())],
        ),
    ];
    for (why, env) in cases {
        let dir = tempfile::tempdir().unwrap();
        let mut fake = forged(dir.path(), &env);
        let pid = i64::from(fake.id());
        let v = inventory(&a);
        assert_eq!(v["mutation_gate_satisfied"], false, "{why}: {v}");
        assert!(reasons(&v).contains(&format!("unregistered fleet process pid {pid} ")), "{why}: {}", reasons(&v));
        assert!(reasons(&v).contains(why), "{why}: {}", reasons(&v));
        drop(fake.stdin.take());
        fake.wait().unwrap();
        let v = inventory_once(&a, 15.0, |v| v["mutation_gate_satisfied"] == true);
        assert_eq!(v["mutation_gate_satisfied"], true, "{why}: still closed: {}", reasons(&v));
    }
}

/// The password in a `postgres://user:password@…` URL.
fn password_of(url: &str) -> String {
    let userinfo = url.split_once("://").unwrap().1.rsplit_once('@').unwrap().0;
    userinfo.split_once(':').unwrap().1.to_owned()
}
