//! `fleetgate serve --transport http`: several official Python SDK clients on one
//! Streamable HTTP endpoint, each session its own worker, heartbeat and audit trail;
//! the DNS-rebinding checks on `Host` and `Origin`; the bearer token; the loopback rule;
//! the gate over HTTP.

use crate::httpkit::HttpGateway;
use crate::support::{Client, FleetDir, bin, peer, serial, wait_until};
use serde_json::json;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

pub const CONFIG: &str = r#"
[fleet]
name = "e2e-http"
tool_prefix = "gitea_"

[[members]]
namespace = "gitea-author"
profile = "prgs-author"
role = "author"
"#;

const TOKEN: &str = "tok-4f1c9a7e-never-logged";

/// `config` with a second member, a reviewer: while it is not running, the inventory closes
/// the gate to every mutation.
pub fn with_reviewer(config: &str) -> String {
    format!("{config}\n[[members]]\nnamespace = \"gitea-reviewer\"\nprofile = \"prgs-reviewer\"\nrole = \"reviewer\"\n")
}

/// A Python SDK client session on the gateway's endpoint.
fn session(g: &HttpGateway, name: &str, token: Option<&str>) -> Client {
    let mut env = vec![format!("MCP_DRIVE_CLIENT_NAME={name}")];
    if let Some(token) = token {
        env.push(format!("MCP_DRIVE_BEARER={token}"));
    }
    Client::start_url(&g.url(), &env)
}

/// One raw HTTP/1.1 POST of an `initialize` with extra headers: the status code.
fn post_status(addr: &str, headers: &[(&str, &str)]) -> u16 {
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": { "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "raw", "version": "1" } }
    })
    .to_string();
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        request.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(&body);
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut head = [0_u8; 12];
    stream.read_exact(&mut head).unwrap();
    let line = String::from_utf8_lossy(&head).into_owned();
    line[9..12].parse().unwrap_or_else(|_| panic!("not an HTTP status line: {line:?}"))
}

fn workers(f: &FleetDir) -> Vec<serde_json::Value> {
    f.cli(&["worker", "list", "--json"])["workers"].as_array().unwrap().clone()
}

#[test]
fn each_http_session_is_its_own_worker_heartbeat_and_audit_trail() {
    sessions_are_their_own_workers(CONFIG, 2);
}

/// The same on one downstream run both sessions share: the gate, the audit and the workers
/// stay per session, and a session that ends leaves the run serving the other.
#[test]
fn on_a_shared_downstream_each_session_is_still_its_own_worker_and_audit_trail() {
    sessions_are_their_own_workers(&format!("{CONFIG}\n[downstream]\nsharing = \"gateway\"\n"), 1);
}

/// Two sessions, each its own worker, heartbeat and audit trail; `runs` downstream processes.
fn sessions_are_their_own_workers(config: &str, runs: usize) {
    let _serial = serial();
    let f = FleetDir::new(config);
    let repo_s = f.repo().display().to_string();
    let git_server = peer(".venv/bin/mcp-server-git").display().to_string();
    let g = HttpGateway::start(&f, None, &[git_server.as_str(), "--repository", repo_s.as_str()]);

    // Two concurrent sessions on the one endpoint.
    let mut a = session(&g, "client-a", None);
    let mut b = session(&g, "client-b", None);
    assert!(wait_until(10.0, || workers(&f).iter().filter(|w| w["status"] == "active").count() == 2));
    let running: Vec<_> = workers(&f).into_iter().filter(|w| w["status"] == "active").collect();
    let ids: Vec<String> = running.iter().map(|w| w["worker_identity"].as_str().unwrap().to_owned()).collect();
    assert_ne!(ids[0], ids[1], "two sessions, two workers");
    assert_ne!(running[0]["session_id"], running[1]["session_id"], "each worker its own session");
    let mut clients: Vec<_> = running.iter().map(|w| w["client_name"].as_str().unwrap().to_owned()).collect();
    clients.sort();
    assert_eq!(clients, ["client_a", "client_b"]);
    // Each has its own heartbeat, seen through its own session's runtime context.
    let (_, _, ctx_a) = a.call("gitea_get_runtime_context", json!({}));
    let (_, _, ctx_b) = b.call("gitea_get_runtime_context", json!({}));
    assert_eq!(ctx_a["transport"], "http");
    assert_eq!(ctx_a["attachments"], 2);
    let (wa, wb) = (&ctx_a["worker"]["worker_identity"], &ctx_b["worker"]["worker_identity"]);
    assert!(wa.is_string() && wb.is_string() && wa != wb, "{wa} {wb}");
    for ctx in [&ctx_a, &ctx_b] {
        assert_eq!(ctx["worker_heartbeat"]["running"], true, "{}", ctx["worker_heartbeat"]);
    }
    for id in &ids {
        let shown = f.cli(&["worker", "show", id, "--json"]);
        assert_eq!(shown["heartbeat_fresh"], true, "{shown}");
    }
    let downstreams = crate::support::downstream_processes(&["mcp-server-git", &repo_s]);
    assert_eq!(downstreams, runs, "downstream processes for two sessions");
    // One runtime row for the process, transport http.
    let rows = f.cli(&["runtime", "list", "--json"]);
    let rows = rows["runtimes"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["transport"], "http");

    // Reads forwarded on both; the gate refuses a mutation with the blocker text.
    let (err, text, _) = a.call("git_status", json!({ "repo_path": repo_s }));
    assert!(!err, "{text}");
    let (err, _, _) = b.call("git_status", json!({ "repo_path": repo_s }));
    assert!(!err);
    std::fs::write(f.repo().join("new.txt"), "x\n").unwrap();
    // One member of a one-member fleet, but the other session's worker is not the
    // issue: the mutation is gated per session and audited under that worker.
    let (err, text, _) = b.call("git_add", json!({ "repo_path": repo_s, "files": ["new.txt"] }));
    let audit = f.audit_until(|e| {
        e.iter().filter(|x| x["tool"] == "git_status").count() >= 2 && e.iter().any(|x| x["tool"] == "git_add")
    });
    let entries = audit["entries"].as_array().unwrap();
    let by = |tool: &str, worker: &serde_json::Value| {
        entries.iter().filter(|e| e["tool"] == tool && &e["worker_identity"] == worker).count()
    };
    assert_eq!(by("git_status", wa), 1, "{audit}");
    assert_eq!(by("git_status", wb), 1, "{audit}");
    assert_eq!(by("git_add", wb), 1, "{audit}");
    assert_eq!(by("git_add", wa), 0, "{audit}");
    if err {
        let kind =
            entries.iter().find(|e| e["tool"] == "git_add").unwrap()["blocker_kind"].as_str().unwrap().to_owned();
        assert!(text.starts_with(&format!("{kind}: `git_add` (mutating) was refused")), "{text}");
    }

    // Closing one session retires its worker only.
    a.close();
    assert!(
        wait_until(10.0, || workers(&f).iter().any(|w| &w["worker_identity"] == wa && w["status"] == "stopped")),
        "the closed session's worker was not retired: {:?}",
        workers(&f)
    );
    assert!(workers(&f).iter().any(|w| &w["worker_identity"] == wb && w["status"] == "active"));
    let (err, _, _) = b.call("git_status", json!({ "repo_path": repo_s }));
    assert!(!err, "the other session keeps working");
    drop(b);
    g.stop();
    assert!(workers(&f).iter().all(|w| w["status"] == "stopped"), "{:?}", workers(&f));
    assert_eq!(f.running_rows(), 0);
}

#[test]
fn the_gate_refuses_a_mutation_over_http_with_the_blocker_text() {
    let _serial = serial();
    // Two configured members, one running: the inventory closes the gate.
    let f = FleetDir::new(&with_reviewer(CONFIG));
    let repo_s = f.repo().display().to_string();
    std::fs::write(f.repo().join("new.txt"), "x\n").unwrap();
    let git_server = peer(".venv/bin/mcp-server-git").display().to_string();
    let g = HttpGateway::start(&f, None, &[git_server.as_str(), "--repository", repo_s.as_str()]);
    let mut c = session(&g, "client-a", None);
    let (err, text, _) = c.call("git_add", json!({ "repo_path": repo_s, "files": ["new.txt"] }));
    assert!(err, "{text}");
    assert!(text.starts_with("fleet_inventory_blocked: `git_add` (mutating) was refused"), "{text}");
    assert!(text.contains("prgs-reviewer"), "{text}");
    assert!(text.contains("operator action: "), "{text}");
    let status = super::support::git(&f.repo(), &["status", "--porcelain"]);
    assert!(status.contains("?? new.txt"), "nothing was staged: {status}");
    drop(c);
    g.stop();
}

#[test]
fn foreign_host_and_origin_are_refused_and_the_token_is_required_and_never_logged() {
    let _serial = serial();
    let f = FleetDir::new(CONFIG);
    let g = HttpGateway::start(&f, Some(TOKEN), &[]);
    let bearer = format!("Bearer {TOKEN}");
    let auth = ("Authorization", bearer.as_str());

    // DNS rebinding: a foreign Host or Origin is refused even with the token.
    assert_eq!(post_status(&g.addr, &[auth, ("Host", "evil.example")]), 403);
    assert_eq!(post_status(&g.addr, &[auth, ("Host", "evil.example:80")]), 403);
    assert_eq!(post_status(&g.addr, &[auth, ("Origin", "http://evil.example")]), 403);
    let port = g.addr.rsplit(':').next().unwrap();
    let other_port = format!("http://localhost:{}", port.parse::<u16>().unwrap().wrapping_add(1));
    assert_eq!(post_status(&g.addr, &[auth, ("Origin", other_port.as_str())]), 403);
    // Same-origin localhost forms pass.
    let localhost = format!("localhost:{port}");
    assert_eq!(post_status(&g.addr, &[auth, ("Host", localhost.as_str())]), 200);
    let same = format!("http://localhost:{port}");
    assert_eq!(post_status(&g.addr, &[auth, ("Origin", same.as_str())]), 200);

    // The token: missing or wrong is 401; right works, through the SDK client too.
    assert_eq!(post_status(&g.addr, &[]), 401);
    assert_eq!(post_status(&g.addr, &[("Authorization", "Bearer wrong")]), 401);
    assert_eq!(post_status(&g.addr, &[("Authorization", TOKEN)]), 401);
    let mut c = session(&g, "client-a", Some(TOKEN));
    let (err, _, ctx) = c.call("gitea_get_runtime_context", json!({}));
    assert!(!err);
    assert_eq!(ctx["transport"], "http");
    assert!(!ctx.to_string().contains(TOKEN), "the runtime context shows no token");
    drop(c);
    let stderr = g.stderr.clone();
    g.stop();
    let log = std::fs::read_to_string(stderr).unwrap();
    assert!(log.contains("bearer token"), "the refusals are logged: {log}");
    assert!(!log.contains(TOKEN), "the token appears in the log");
}

#[test]
fn a_non_loopback_listen_needs_allow_remote() {
    let _serial = serial();
    let f = FleetDir::new(CONFIG);
    let out = Command::new(bin())
        .env_clear()
        .arg("--store")
        .arg(f.store())
        .arg("--config")
        .arg(f.config())
        .args(["serve", "--profile", "prgs-author", "--transport", "http", "--listen", "0.0.0.0:0"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not a loopback address") && stderr.contains("--allow-remote"), "{stderr}");
    assert_eq!(f.cli(&["runtime", "list", "--json"])["runtimes"].as_array().unwrap().len(), 0, "nothing written");
}
