//! Replicas behind a real load balancer (issue 46): the reviewer and the merger each run as
//! three `fleetgate serve --transport http` replicas of one profile on one PostgreSQL store,
//! behind Debian's HAProxy balancing round-robin with no affinity, so consecutive requests of
//! one client land on different replicas.
//!
//! The reviewer is the official Python SDK client on the 2025-11-25 handshake: its session
//! lives in the replica that answered its `initialize`, and every later request that reaches
//! another replica is relayed there (the store names the owner). The merger is the same SDK
//! on 2026-07-28, sessionless: its worker is the member's, found in the store by whichever
//! replica a request reaches, so the merge lease it claims on one replica is its own on the
//! next. The PR lands exactly the approved head. A second PR goes the same way with the
//! official TypeScript SDK: v1 (`@modelcontextprotocol/sdk`) reviewing on a session, v2
//! (`@modelcontextprotocol/client`, 2026-07-28) merging sessionless.
//!
//! Then one replica — the one holding the reviewer's session — is killed with SIGKILL while
//! stateless calls run through the balancer: each either completes once or fails visibly, and
//! the audit holds every completed one (none twice; only the victim's last read, whose entry was
//! still queued, may be lost, as docs/policy.md says of a kill -9); the reviewer's session is
//! answered 404 — never relayed to another process that took the dead replica's port — and a
//! fresh session (the client re-initializing) works.

use crate::httpkit::HttpGateway;
use crate::support::{Client, answer, serial, wait_until};
use crate::workflow::{Fleet, approve};
use serde_json::{Value, json};
use std::process::{Child, Command, Stdio};

const TOKEN: &str = "balanced-fleet-token-5e1f";

/// HAProxy in the foreground on its own configuration.
struct Balancer {
    child: Child,
    log: std::path::PathBuf,
}

impl Drop for Balancer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port free now (bound and released), for a listener whose address must be known first.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// HAProxy with one round-robin frontend per `(port, servers)`: no affinity, no health checks;
/// a connection a dead server refuses is tried on the next server (the request was never
/// sent), nothing else is retried.
fn balance(dir: &std::path::Path, frontends: &[(u16, Vec<String>)]) -> Balancer {
    balance_routed(dir, frontends, "")
}

/// [`balance`], with `rules` (HAProxy backend lines) in every backend, before its servers.
fn balance_routed(dir: &std::path::Path, frontends: &[(u16, Vec<String>)], rules: &str) -> Balancer {
    let mut config = String::from(
        "global\n  maxconn 512\n\ndefaults\n  mode http\n  timeout connect 2s\n  timeout client 120s\n  timeout \
         server 120s\n  timeout tunnel 120s\n  retries 2\n  option redispatch 1\n\n",
    );
    for (i, (port, servers)) in frontends.iter().enumerate() {
        config.push_str(&format!("frontend fe{i}\n  bind 127.0.0.1:{port}\n  default_backend be{i}\n\n"));
        config.push_str(&format!("backend be{i}\n  balance roundrobin\n{rules}"));
        for (n, server) in servers.iter().enumerate() {
            config.push_str(&format!("  server s{n} {server}\n"));
        }
        config.push('\n');
    }
    let path = dir.join("haproxy.cfg");
    std::fs::write(&path, config).unwrap();
    let log = dir.join("haproxy.log");
    let child = Command::new("haproxy")
        .arg("-db")
        .arg("-f")
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("haproxy (scripts/install-peers installs Debian's)");
    let up =
        wait_until(10.0, || frontends.iter().all(|(p, _)| std::net::TcpStream::connect(("127.0.0.1", *p)).is_ok()));
    assert!(up, "haproxy did not listen: {}", std::fs::read_to_string(&log).unwrap_or_default());
    Balancer { child, log }
}

/// The Python SDK client through the balancer at `port`, as `name`, on the 2025-11-25 handshake
/// or (`mode`) sessionless at that version.
fn sdk(port: u16, name: &str, mode: Option<&str>) -> Client {
    let mut env = vec![format!("MCP_DRIVE_BEARER={TOKEN}"), format!("MCP_DRIVE_CLIENT_NAME={name}")];
    env.extend(mode.map(|m| format!("MCP_DRIVE_MODE={m}")));
    Client::start_url(&format!("http://127.0.0.1:{port}/mcp"), &env)
}

/// A tool call through the SDK: refused or not, its text.
fn call(c: &mut Client, tool: &str, args: Value) -> (bool, String, Value) {
    c.call(tool, crate::support::at(args))
}

/// One raw stateless (2026-07-28) `tools/call` through the balancer: `Some(is_error)` when
/// it was answered with a result, `None` when it failed (an HTTP error, a broken connection).
fn stateless_call(agent: &ureq::Agent, port: u16, id: u64) -> Option<bool> {
    let body = json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {
            "name": "get_file_contents",
            "arguments": crate::support::at(json!({ "ref": "main", "path": "README.md" })),
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": { "name": "load", "version": "1" },
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    });
    let response = agent
        .post(&format!("http://127.0.0.1:{port}/mcp"))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", "get_file_contents")
        .header("Authorization", &format!("Bearer {TOKEN}"))
        .send(body.to_string());
    let mut response = response.ok()?;
    let status = response.status();
    let text = response.body_mut().read_to_string().ok()?;
    if status != 200 {
        eprintln!("stateless call {id}: {status} {text}");
        return None;
    }
    let line = text.lines().find_map(|l| l.strip_prefix("data: ").filter(|d| d.starts_with('{'))).unwrap_or(&text);
    let v: Value = serde_json::from_str(line).ok()?;
    v.get("result").map(|r| r["isError"].as_bool().unwrap_or(false))
}

/// How many audit entries the `load` client's `get_file_contents` calls have.
fn audited_loads(fleet: &Fleet, worker: &str) -> usize {
    let audit = fleet.f.cli(&["audit", "--limit", "100000", "--json"]);
    let entries = audit["entries"].as_array().cloned().unwrap_or_default();
    entries.iter().filter(|e| e["tool"] == "get_file_contents" && e["worker_identity"] == worker).count()
}

#[test]
fn three_replicas_behind_haproxy_serve_both_generations_and_survive_a_sigkill() {
    let _serial = serial();
    let Some(db) = fleetgate_testkit::pg::PgDatabase::fresh("fg_balanced") else { return };
    let mut fleet = Fleet::start_replicated("", &["reviewer", "merger"], 3, Some(db.url.clone()));
    let (reviewer_port, merger_port) = (free_port(), free_port());
    let mut replicas = Vec::new();
    for (member, port) in [("reviewer", reviewer_port), ("merger", merger_port)] {
        let downstream = fleet.downstream(member);
        let balancer = format!("127.0.0.1:{port}");
        let set: Vec<HttpGateway> = (0..3)
            .map(|n| HttpGateway::replica(&fleet.f, &format!("prgs-{member}"), n, &balancer, TOKEN, &downstream))
            .collect();
        replicas.push(set);
    }
    assert!(wait_until(30.0, || fleet.f.running_rows() == 8), "the replicas did not join the fleet");
    let servers = |set: &Vec<HttpGateway>| set.iter().map(|g| g.addr.clone()).collect::<Vec<_>>();
    let lb = balance(fleet.dir.path(), &[(reviewer_port, servers(&replicas[0])), (merger_port, servers(&replicas[1]))]);
    let inventory = fleet.f.cli(&["inventory", "--json"]);
    assert_eq!(inventory["mutation_gate_satisfied"], true, "three declared replicas are one member: {inventory}");

    // The author opens a PR (over stdio).
    let main_before = fleet.git(&["rev-parse", "main"]);
    answer(fleet.call("author", "create_branch", json!({ "branch": "feature" })));
    let head = fleet.push("balanced\n", "Through the balancer");
    let create = json!({ "method": "create", "title": "LB", "body": "b", "head": "feature", "base": "main" });
    let pr = answer(fleet.call("author", "pull_request_write", create))["number"].as_i64().unwrap();

    // The reviewer's session: opened on one replica, its next requests round-robined to the
    // others and relayed to it.
    let mut reviewer = sdk(reviewer_port, "reviewer-py", None);
    let tools = reviewer.step(json!({ "op": "list_tools" }));
    assert_eq!(tools["ok"], true, "{tools}");
    let claim = json!({ "pr": pr, "head": head, "purpose": "review" });
    let (err, text, _) = call(&mut reviewer, "gitea_claim_pr_lease", claim);
    assert!(!err, "the review lease: {text}");
    let (err, text, _) = call(&mut reviewer, "pull_request_review_write", approve(pr));
    assert!(!err, "the approval: {text}");
    let owners: Vec<usize> = (0..3)
        .filter(|n| {
            replicas[0][*n].log().lines().any(|l| l.contains("worker attached") && l.contains("client=reviewer_py"))
        })
        .collect();
    let attached: Vec<String> = replicas[0]
        .iter()
        .flat_map(|g| g.log().lines().filter(|l| l.contains("worker attached")).map(str::to_owned).collect::<Vec<_>>())
        .collect();
    assert_eq!(owners.len(), 1, "one replica holds the session: {attached:?}");

    // The merger, sessionless: the lease claimed through one replica is its own on the next.
    let mut merger = sdk(merger_port, "merger-py", Some("2026-07-28"));
    assert_eq!(merger.init["result"]["protocolVersion"], "2026-07-28", "{}", merger.init);
    let claim = json!({ "pr": pr, "head": head, "purpose": "merge" });
    let (err, text, _) = call(&mut merger, "gitea_claim_pr_lease", claim);
    assert!(!err, "the merge lease: {text}");
    let (err, text, _) = call(&mut merger, "pull_request_write", json!({ "method": "merge", "pull_number": pr }));
    assert!(!err, "the merge: {text}");
    let parents = fleet.git(&["rev-list", "--parents", "-n", "1", "main"]);
    assert_eq!(parents.split(' ').collect::<Vec<_>>()[1..], [main_before.as_str(), head.as_str()]);
    let served: usize = (0..3)
        .filter(|n| {
            replicas[1][*n].log().lines().any(|l| l.contains("worker attached") && l.contains("client=merger_py"))
        })
        .count();
    assert!(served >= 2, "round-robin: the merger's calls reached {served} replicas");
    let workers = fleet.f.cli(&["worker", "list", "--json"]);
    let merger_workers: Vec<&Value> = workers["workers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["client_name"] == "merger_py" && w["status"] == "active")
        .collect();
    assert_eq!(merger_workers.len(), 1, "one worker for the stateless merger, whichever replica: {workers}");

    // The same workflow by the TypeScript SDK of both generations: v1 reviews on a session,
    // v2 merges sessionless.
    answer(fleet.call("author", "create_branch", json!({ "branch": "second" })));
    let head = fleet.push_to("second", "balanced again\n", "Through the balancer, from TypeScript");
    let create = json!({ "method": "create", "title": "LB 2", "body": "b", "head": "second", "base": "main" });
    let pr = answer(fleet.call("author", "pull_request_write", create))["number"].as_i64().unwrap();
    let main_before = fleet.git(&["rev-parse", "main"]);
    let ts = |port: u16, name: &str, generation: &str| {
        let env = [format!("MCP_DRIVE_BEARER={TOKEN}"), format!("MCP_DRIVE_CLIENT_NAME={name}")];
        Client::start_ts(&format!("http://127.0.0.1:{port}/mcp"), generation, &env)
    };
    let mut ts_reviewer = ts(reviewer_port, "reviewer-ts", "v1");
    assert!(ts_reviewer.init["result"]["sessionId"].is_string(), "a v1 session: {}", ts_reviewer.init);
    let (err, text, _) =
        call(&mut ts_reviewer, "gitea_claim_pr_lease", json!({ "pr": pr, "head": head, "purpose": "review" }));
    assert!(!err, "the TypeScript review lease: {text}");
    let (err, text, _) = call(&mut ts_reviewer, "pull_request_review_write", approve(pr));
    assert!(!err, "the TypeScript approval: {text}");
    let mut ts_merger = ts(merger_port, "merger-ts", "v2");
    assert_eq!(ts_merger.init["result"]["protocolVersion"], "2026-07-28", "{}", ts_merger.init);
    let (err, text, _) =
        call(&mut ts_merger, "gitea_claim_pr_lease", json!({ "pr": pr, "head": head, "purpose": "merge" }));
    assert!(!err, "the TypeScript merge lease: {text}");
    let (err, text, _) = call(&mut ts_merger, "pull_request_write", json!({ "method": "merge", "pull_number": pr }));
    assert!(!err, "the TypeScript merge: {text}");
    let parents = fleet.git(&["rev-list", "--parents", "-n", "1", "main"]);
    assert_eq!(parents.split(' ').collect::<Vec<_>>()[1..], [main_before.as_str(), head.as_str()]);

    // Load through the balancer while the replica holding the reviewer's session is killed.
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let first = stateless_call(&agent, reviewer_port, 1);
    assert_eq!(first, Some(false), "a stateless read through the balancer");
    let load_worker = fleet.f.cli(&["worker", "list", "--json"])["workers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["client_name"] == "load")
        .map(|w| w["worker_identity"].as_str().unwrap().to_owned())
        .expect("the load client's shared worker");
    let before = audited_loads(&fleet, &load_worker);
    let victim = owners[0];
    let victim_addr = replicas[0][victim].addr.clone();
    let held: Vec<String> = db
        .client()
        .query("SELECT session_id FROM http_sessions WHERE owner = $1", &[&victim_addr])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(!held.is_empty(), "the victim's sessions are on record");
    let (answered, failed) = std::thread::scope(|scope| {
        let load = scope.spawn(|| {
            let (mut ok, mut failed) = (0usize, 0usize);
            for id in 0..120u64 {
                match stateless_call(&agent, reviewer_port, 100 + id) {
                    Some(false) => ok += 1,
                    Some(true) | None => failed += 1,
                }
            }
            (ok, failed)
        });
        std::thread::sleep(std::time::Duration::from_millis(300));
        let pid = replicas[0][victim].child.id().to_string();
        assert!(Command::new("kill").args(["-KILL", &pid]).status().unwrap().success());
        // Reaped, as its parent (a client, systemd) would: a zombie still answers signal 0.
        let _ = replicas[0][victim].child.wait();
        load.join().unwrap()
    });
    assert!(
        answered >= 100,
        "the surviving replicas served the load: {answered} answered, {failed} failed; haproxy: {}",
        std::fs::read_to_string(&lb.log).unwrap_or_default()
    );
    // A read's entry is queued behind its answer and committed within milliseconds; a kill -9
    // loses the read entries its replica queued in its last few (docs/policy.md, "The audit
    // log"). One call at a time, that is the victim's last answer (every third call): at most
    // `LOST_TO_THE_KILL` answered reads unaudited, every other one audited, none twice, none
    // that did not run. Wait for the survivors' entries to settle, then compare.
    const LOST_TO_THE_KILL: usize = 2;
    let mut audited = 0;
    wait_until(15.0, || {
        audited = audited_loads(&fleet, &load_worker) - before;
        audited >= answered
    });
    eprintln!("under SIGKILL: {answered} answered, {failed} failed, {audited} audited");
    assert!(
        answered <= audited + LOST_TO_THE_KILL && audited <= answered + failed,
        "every answered call audited once, but for the victim's last: {answered} answered, {failed} failed, \
         {audited} audited"
    );

    // Another process now listens on the dead replica's port: a request naming one of its
    // sessions, sent straight to a surviving replica, must not be relayed there (nor its
    // credential with it) — the replica holding it is judged gone first. (Its sessions were
    // read before the kill: a survivor the reviewer's SDK reconnects its stream to forgets
    // them, as it should, as soon as it judges their replica gone.)
    let squatter = std::net::TcpListener::bind(&victim_addr).expect("the dead replica's port");
    squatter.set_nonblocking(true).unwrap();
    let survivor = &replicas[0][(victim + 1) % 3];
    let patient: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(std::time::Duration::from_secs(5)))
        .build()
        .into();
    for session in &held {
        let answer = patient
            .post(&survivor.url())
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .header("Authorization", &format!("Bearer {TOKEN}"))
            .header("Mcp-Session-Id", session)
            .send(json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {} }).to_string());
        let status = answer.map(|r| r.status().as_u16()).map_err(|e| e.to_string());
        assert_eq!(status, Ok(404), "a dead replica's session");
    }
    let reached = squatter.accept().map(|(_, from)| from.to_string());
    assert!(reached.is_err(), "a request was relayed to the process on the dead replica's port: {reached:?}");
    drop(squatter);

    // The reviewer's session died with its replica: 404, and a fresh session works.
    let dead = reviewer.step(json!({ "op": "call_tool", "name": "gitea_get_runtime_context", "arguments": {} }));
    let refused = dead["ok"] == false || dead["result"]["isError"] == true;
    assert!(refused, "a session whose replica died is not served: {dead}");
    let mut again = sdk(reviewer_port, "reviewer-py", None);
    let ctx = again.step(json!({ "op": "list_tools" }));
    assert_eq!(ctx["ok"], true, "re-initialized: {ctx}");
    drop(lb);
    for set in replicas {
        for g in set {
            drop(g);
        }
    }
    fleet.stop();
}

/// A fleet `name` whose author runs as three replicas in front of `elicit_server.py` (its `ask`
/// elicits), each allowing the `Host` of a balancer on the port returned.
fn eliciting_replicas(name: &str) -> (crate::support::FleetDir, Vec<HttpGateway>, u16) {
    let roster = format!(
        "[fleet]\nname = \"{name}\"\ntool_prefix = \"gitea_\"\n\n[[members]]\nnamespace = \"gitea-author\"\nprofile \
         = \"prgs-author\"\nrole = \"author\"\nreplicas = 3\n"
    );
    let f = crate::support::FleetDir::new(&roster);
    let downstream = vec![
        crate::support::peer(".venv/bin/python").display().to_string(),
        crate::support::peer("tests/peers/elicit_server.py").display().to_string(),
        f.dir.path().join("unsolicited.jsonl").display().to_string(),
    ];
    let port = free_port();
    let balancer = format!("127.0.0.1:{port}");
    let set = (0..3).map(|n| HttpGateway::replica(&f, "prgs-author", n, &balancer, TOKEN, &downstream)).collect();
    (f, set, port)
}

/// Server→client requests through the balancer: two Python SDK sessions on three replicas
/// behind HAProxy call a tool that elicits at the same moment, round after round. Each
/// question reaches — through the relay, on the stream of the call that asked — the session
/// whose call asked it, and each answer, whichever replica it lands on, returns to that call:
/// none crossed.
#[test]
fn elicitations_through_the_balancer_reach_their_own_session() {
    let _serial = serial();
    let (f, set, port) = eliciting_replicas("balanced-elicit");
    let balancer = format!("127.0.0.1:{port}");
    let _lb = balance(f.dir.path(), &[(port, set.iter().map(|g| g.addr.clone()).collect())]);
    let out = Command::new(crate::support::peer(".venv/bin/python"))
        .arg(crate::support::peer("tests/peers/elicit_race.py"))
        .args([&format!("http://{balancer}/mcp"), "30"])
        .env("MCP_DRIVE_BEARER", TOKEN)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().rev().find(|l| l.starts_with('{'));
    let tally: Value = serde_json::from_str(line.unwrap_or_else(|| {
        panic!("elicit_race printed no result: {stdout}\n{}", String::from_utf8_lossy(&out.stderr))
    }))
    .unwrap();
    assert_eq!(tally["cross_talk"], json!([]), "{tally}");
    assert_eq!(tally["errors"], json!([]), "{tally}");
    assert_eq!(tally["answered"], 60, "{tally}");
    assert_eq!(tally["asked"], 60, "every question asked once: {tally}");
    for g in set {
        g.stop();
    }
}

/// Issue #55: an answered call must not hang when the replica relaying it dies. Three
/// replicas behind HAProxy; the balancer sends every `initialize` to the first replica (it
/// holds the sessions) and every `tools/call` to the second, which relays them; the rest goes
/// round-robin. Three official Python SDK sessions each call `ask`, held in flight by its
/// elicitation; the relaying replica is SIGKILLed; then the elicitations are answered, so the
/// calls finish on the first replica while their streams are gone, before the clients resume
/// (the SDK waits the priming event's 3 s). Each client resumes with `GET` and
/// `Last-Event-ID` through a survivor and gets its call's answer: none fails, none hangs, each
/// call ran once (audited once, asked once). Before, the holder answered each resume 200 with
/// an empty stream and the SDK retried forever.
#[test]
fn a_call_whose_relaying_replica_is_killed_is_answered_on_resume() {
    let _serial = serial();
    let (f, mut set, port) = eliciting_replicas("balanced-relay-kill");
    let balancer = format!("127.0.0.1:{port}");
    let rules = r#"  option http-buffer-request
  acl opens req.body -m sub "\"method\":\"initialize\""
  acl calls req.body -m sub "\"method\":\"tools/call\""
  use-server s0 if opens
  use-server s1 if calls
"#;
    let lb = balance_routed(f.dir.path(), &[(port, set.iter().map(|g| g.addr.clone()).collect())], rules);
    let go = f.dir.path().join("go-dir");
    std::fs::create_dir_all(&go).unwrap();
    let clients = 3;
    let driver = Command::new(crate::support::peer(".venv/bin/python"))
        .arg(crate::support::peer("tests/peers/relay_kill.py"))
        .args([&format!("http://{balancer}/mcp"), &go.display().to_string(), &clients.to_string(), "30"])
        .env("MCP_DRIVE_BEARER", TOKEN)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let asked = |n: usize| go.join(format!("asked-c{n}")).exists();
    let held = wait_until(60.0, || (0..clients).all(asked));
    assert!(held, "the calls were not all held in flight: {}", std::fs::read_to_string(&lb.log).unwrap_or_default());
    let relayed = set[1].log();
    assert!(!relayed.contains("worker attached"), "the relaying replica holds no session: {relayed}");

    // The relaying replica dies with the calls' streams; then the calls finish.
    let pid = set[1].child.id().to_string();
    assert!(Command::new("kill").args(["-KILL", &pid]).status().unwrap().success());
    let _ = set[1].child.wait();
    std::fs::write(go.join("go"), "").unwrap();

    let out = driver.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().rev().find(|l| l.starts_with('{'));
    let tally: Value =
        serde_json::from_str(line.unwrap_or_else(|| {
            panic!("relay_kill printed no result: {stdout}\n{}", String::from_utf8_lossy(&out.stderr))
        }))
        .unwrap();
    assert_eq!(tally["hung"], json!([]), "no call hangs: {tally}");
    assert_eq!(tally["failed"], json!({}), "no call fails: {tally}");
    let mut answered: Vec<String> =
        tally["answered"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_owned()).collect();
    answered.sort();
    assert_eq!(answered, ["c0", "c1", "c2"], "every call answered to its client: {tally}");
    assert_eq!(tally["asked"], json!({"c0": 1, "c1": 1, "c2": 1}), "each call asked once: {tally}");
    let audit = f.cli(&["audit", "--limit", "1000", "--json"]);
    let asks = audit["entries"].as_array().unwrap().iter().filter(|e| e["tool"] == "ask").count();
    assert_eq!(asks, clients, "each call ran once: {audit}");
    drop(lb);
    for (n, g) in set.into_iter().enumerate() {
        if n != 1 {
            g.stop();
        }
    }
}
