//! The contract of `fleetgate dashboard` through the real binary: where it listens, what
//! it refuses at start (exit 1), what it answers 401 and 403 to (as the gateway does),
//! that it serves only reads, the `/api/fleet` shape and its SSE twin, its connection
//! bounds (a header timeout, a cap answered 503), and SIGTERM.

use crate::support::{dashboard, first_event, get, http, island, wait_until};
use std::process::Command;

#[test]
fn it_listens_on_loopback_by_default_and_prints_where() {
    let help = Command::new(crate::support::bin()).args(["dashboard", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("[default: 127.0.0.1:8760]"), "{help}");
    let d = dashboard(&[], &["--listen", "127.0.0.1:0"]).unwrap();
    assert!(d.addr.ip().is_loopback());
    assert!(d.log.lock().unwrap().contains(&format!("fleetgate dashboard: listening on http://{}/", d.addr)));
    assert_eq!(get(d.addr, "/", &[]).status, 200);
}

#[test]
fn what_it_refuses_at_start_exits_1_before_listening() {
    let refused = |env: &[(&str, &str)], args: &[&str], why: &str| {
        let Err((code, stderr)) = dashboard(env, args) else { panic!("{args:?} {env:?} started") };
        assert_eq!(code, Some(1), "{stderr}");
        assert!(stderr.contains(why), "{why:?} not in {stderr:?}");
        assert!(!stderr.contains("listening"), "{stderr}");
    };
    refused(&[], &["--listen", "0.0.0.0:0"], "not a loopback address (pass --allow-remote");
    refused(&[("FLEETGATE_DASHBOARD_TOKEN", "t0k3n")], &["--listen", "0.0.0.0:0"], "pass --allow-remote");
    refused(&[], &["--listen", "0.0.0.0:0", "--allow-remote"], "--allow-remote needs a token");
    refused(&[("FLEETGATE_DASHBOARD_TOKEN", "")], &["--listen", "127.0.0.1:0"], "is set but empty");
    refused(&[("FLEETGATE_DASHBOARD_TOKEN", "  ")], &["--listen", "0.0.0.0:0", "--allow-remote"], "is set but empty");
    refused(&[("FLEETGATE_DASHBOARD_TOKEN", "a b")], &["--listen", "127.0.0.1:0"], "printable ASCII");
    refused(&[], &["--listen", "nowhere"], "is not an address:port");
    refused(&[], &["--listen", "127.0.0.1:0", "--interval", "0"], "invalid --interval");
    refused(&[], &["--listen", "127.0.0.1:0", "--max-connections", "0"], "invalid --max-connections");
    refused(&[], &["--listen", "127.0.0.1:0", "--max-connections", "many"], "invalid --max-connections");
    refused(&[], &["--listen", "127.0.0.1:0", "--header-timeout", "never"], "invalid --header-timeout");
}

/// An open `GET /events` stream whose answer head has arrived, or `None` when the server
/// answered something else or closed it.
fn open_events(addr: std::net::SocketAddr) -> Option<std::io::BufReader<std::net::TcpStream>> {
    use std::io::{BufRead as _, Write as _};
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(std::time::Duration::from_secs(10))).ok()?;
    stream.write_all(format!("GET /events HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes()).ok()?;
    let mut reader = std::io::BufReader::new(stream);
    let mut status = String::new();
    reader.read_line(&mut status).ok()?;
    status.starts_with("HTTP/1.1 200").then_some(reader)
}

#[test]
fn a_silent_connection_is_closed_and_past_the_cap_a_new_one_is_answered_503() {
    use std::io::Read as _;
    let d = dashboard(&[], &["--listen", "127.0.0.1:0", "--header-timeout", "0.3", "--max-connections", "2"]).unwrap();
    let addr = d.addr;

    // A connection that never sends a request head is closed, not kept (it would be forever
    // under a server without a header timer).
    let mut silent = std::net::TcpStream::connect(addr).unwrap();
    silent.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 512];
    match silent.read(&mut buf) {
        Ok(_) => {} // closed, with or without a word first
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("a silent connection is still open after 10 s: {e}"),
    }

    // Two event streams fill the cap (the silent connection's place may take a moment to free).
    let mut held = Vec::new();
    assert!(
        wait_until(10.0, || {
            if let Some(stream) = open_events(addr) {
                held.push(stream);
            }
            held.len() == 2
        }),
        "two event streams could not be opened under a cap of 2"
    );
    // The third connection is told why and closed; the open streams stay open.
    let mut third = std::net::TcpStream::connect(addr).unwrap();
    third.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    let mut answer = String::new();
    let _ = third.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 503 Service Unavailable"), "{answer:?}");
    assert!(answer.contains("Retry-After: 1") && answer.ends_with("maximum of open connections"), "{answer:?}");
    assert!(wait_until(5.0, || d.log.lock().unwrap().contains("connection cap reached")), "{}", d.log.lock().unwrap());

    // A stream given up frees its place: a page load is served again.
    held.pop();
    assert!(
        wait_until(30.0, || std::panic::catch_unwind(|| get(addr, "/", &[]).status).ok() == Some(200)),
        "the cap never freed a place"
    );
}

#[test]
fn with_a_token_every_request_needs_it_as_on_the_gateway() {
    let token = "dash-t0k3n-f00d";
    let d = dashboard(
        &[("FLEETGATE_DASHBOARD_TOKEN", token), ("FLEETGATE_LOG", "debug")],
        &["--listen", "127.0.0.1:0", "--allow-remote"],
    )
    .unwrap();
    let bearer = format!("Bearer {token}");
    for path in ["/", "/api/fleet", "/events", "/metrics", "/assets/app.js"] {
        let refused = get(d.addr, path, &[]);
        assert_eq!(refused.status, 401, "{path}");
        assert_eq!(refused.header("www-authenticate"), Some("Bearer"));
        assert_eq!(get(d.addr, path, &[("Authorization", "Bearer wrong")]).status, 401, "{path}");
    }
    assert_eq!(get(d.addr, "/api/fleet", &[("Authorization", &bearer)]).status, 200);
    assert_eq!(get(d.addr, "/metrics", &[("Authorization", &bearer)]).status, 200);

    // A browser trades the token for a cookie once; the address bar loses it at once.
    assert_eq!(get(d.addr, "/?token=wrong", &[]).status, 401);
    let traded = get(d.addr, &format!("/?token={token}"), &[]);
    assert_eq!((traded.status, traded.header("location")), (303, Some("/")));
    let cookie = traded.header("set-cookie").unwrap().to_owned();
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "{cookie}");
    let cookie = cookie.split(';').next().unwrap();
    assert_eq!(get(d.addr, "/", &[("Cookie", cookie)]).status, 200);
    let (status, _, _, data) = first_event(d.addr, &[("Cookie", cookie)]);
    assert_eq!(status, 200);
    assert!(data.starts_with("{\"version\":1,"), "{data}");

    // Host and Origin are judged before the token, with it or without.
    let evil = get(d.addr, "/api/fleet", &[("Host", "evil.example"), ("Authorization", &bearer)]);
    assert_eq!(evil.status, 403);
    // The whole log, once the process is gone: nothing it wrote can come later.
    let mut d = d;
    let (code, log) = d.stop();
    assert_eq!(code, Some(0));
    assert!(log.contains("dashboard listening") || log.contains("listening on"), "{log}");
    assert!(!log.contains(token), "the token reached the log");
}

#[test]
fn host_and_origin_checks_answer_403() {
    let d = dashboard(&[], &["--listen", "127.0.0.1:0", "--allowed-host", "dash.example:8760"]).unwrap();
    let port = d.addr.port();
    for host in [format!("127.0.0.1:{port}"), format!("localhost:{port}"), "dash.example:8760".into()] {
        assert_eq!(get(d.addr, "/api/fleet", &[("Host", &host)]).status, 200, "{host}");
    }
    for host in [format!("evil.example:{port}"), format!("localhost:{}", port + 1)] {
        let answer = get(d.addr, "/api/fleet", &[("Host", &host)]);
        assert_eq!(answer.status, 403, "{host}");
        assert!(answer.body.contains("Host"));
    }
    let origin = format!("http://localhost:{port}");
    assert_eq!(get(d.addr, "/api/fleet", &[("Origin", &origin)]).status, 200);
    for origin in ["http://evil.example", "null", "https://localhost"] {
        assert_eq!(get(d.addr, "/events", &[("Origin", origin)]).status, 403, "{origin}");
    }
}

#[test]
fn it_serves_reads_only_with_headers_that_keep_the_page_home() {
    let d = dashboard(&[], &["--listen", "127.0.0.1:0"]).unwrap();
    for method in ["POST", "PUT", "DELETE", "PATCH"] {
        assert_eq!(http(d.addr, method, "/api/fleet", &[("Content-Length", "0")]).status, 405, "{method}");
    }
    assert_eq!(get(d.addr, "/nothing-here", &[]).status, 404);
    let page = get(d.addr, "/", &[]);
    assert!(page.header("content-type").unwrap().starts_with("text/html"));
    let csp = page.header("content-security-policy").unwrap();
    assert!(csp.contains("default-src 'none'") && csp.contains("connect-src 'self'"), "{csp}");
    assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(page.header("referrer-policy"), Some("no-referrer"));
}

#[test]
fn api_fleet_has_the_documented_shape_and_events_push_the_same_view() {
    let island = island(1, &[]);
    island.register(1);
    let pid = island.inner_pid(1);
    let mut v = serde_json::Value::Null;
    assert!(wait_until(10.0, || {
        v = serde_json::from_str(&get(island.addr, "/api/fleet", &[]).body).unwrap();
        v["gate"]["open"] == true
    }));
    let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    let mut documented = vec![
        "version",
        "generated_at",
        "fleet",
        "summary",
        "gate",
        "members",
        "unregistered_processes",
        "other_gateways",
        "facts",
        "diagnostics",
        "workers",
        "stopped_workers",
        "workers_error",
        "refusals",
        "refusals_error",
        "audit_window",
        "pr_leases",
        "pr_leases_error",
        "prs",
        "prs_error",
        "review_locks",
        "review_locks_error",
        "approvals",
        "approvals_error",
        "notify",
        "notify_owed",
        "policy",
        "policy_notes",
        "shadow",
    ];
    keys.sort_unstable();
    documented.sort_unstable();
    assert_eq!(keys, documented);
    assert!(fleetgate_core::Timestamp::parse(v["generated_at"].as_str().unwrap()).is_ok());
    assert_eq!(
        v["gate"],
        serde_json::json!({ "open": true, "blocker_kind": null, "blocked_reasons": [], "operator_action": null })
    );
    let m = &v["members"][0];
    assert_eq!(
        (m["profile"].as_str(), m["health"].as_str(), m["pid"].as_i64()),
        (Some("prgs-author"), Some("running"), Some(pid))
    );
    assert_eq!((m["liveness"].as_str(), m["cohort_id"].as_str()), (Some("alive"), Some("island")));
    for key in [
        "runtime_id",
        "startup_head",
        "registered_at",
        "last_heartbeat_at",
        "heartbeat_age_seconds",
        "duplicate",
        "expected",
    ] {
        assert!(m.get(key).is_some(), "member field {key}");
    }
    assert_eq!(v["facts"]["running_member_count"], 1);
    assert_eq!(v["pr_leases"], serde_json::json!([]), "no PR lease is claimed");
    assert_eq!(v["pr_leases_error"], serde_json::Value::Null);
    assert!(v["fleet"]["store"].as_str().unwrap().starts_with("sqlite:"));

    let (status, headers, id, data) = first_event(island.addr, &[]);
    assert_eq!(status, 200);
    assert!(headers.iter().any(|(k, v)| k == "content-type" && v.starts_with("text/event-stream")));
    let event: serde_json::Value = serde_json::from_str(&data).unwrap();
    assert_eq!(id, event["version"].to_string(), "the event id is the view's version");
    assert_eq!(
        (event["members"][0]["pid"].as_i64(), event["members"][0]["health"].as_str()),
        (Some(pid), Some("running"))
    );
    assert_eq!(event["gate"], v["gate"]);
}

#[test]
fn sigterm_stops_it_with_an_event_stream_open() {
    let mut d = dashboard(&[], &["--listen", "127.0.0.1:0"]).unwrap();
    let addr = d.addr;
    let stream = std::thread::spawn(move || first_event(addr, &[]));
    assert_eq!(stream.join().unwrap().0, 200);
    // A second stream stays open across the signal.
    let held = std::net::TcpStream::connect(addr).unwrap();
    std::io::Write::write_all(&mut &held, format!("GET /events HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes()).unwrap();
    // Its answer's head is read: the stream is open when the signal comes.
    held.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(std::io::Read::read(&mut &held, &mut byte).unwrap(), 1, "the stream closed before its head");
        head.push(byte[0]);
    }
    assert!(head.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&head));
    assert_eq!(d.stop().0, Some(0));
}

/// Issue 34, finding 11: a refused request ends its connection (`Connection: close`), so
/// unauthenticated sockets cannot hold the connection cap and lock the operator out; the
/// token cookie is named per port, and the old name is still accepted.
#[test]
fn a_refused_connection_is_closed_and_the_cookie_is_named_per_port() {
    use std::io::{Read as _, Write as _};
    let token = "dash-t0k3n-cafe";
    let d = dashboard(
        &[("FLEETGATE_DASHBOARD_TOKEN", token)],
        &["--listen", "127.0.0.1:0", "--max-connections", "4", "--header-timeout", "60"],
    )
    .unwrap();
    let addr = d.addr;
    // Ten keep-alive requests without the token, the sockets kept open by the client: each
    // is answered 401 and closed by the server, within bounds.
    let mut refused = Vec::new();
    for _ in 0..10 {
        let Ok(mut stream) = std::net::TcpStream::connect(addr) else { continue };
        stream.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
        stream.write_all(format!("GET /api/fleet HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes()).unwrap();
        let mut answer = String::new();
        let ended = stream.read_to_string(&mut answer);
        assert!(ended.is_ok(), "a refused connection is still open after 5 s: {answer:?} {ended:?}");
        assert!(answer.starts_with("HTTP/1.1 401") || answer.starts_with("HTTP/1.1 503"), "{answer:?}");
        if answer.starts_with("HTTP/1.1 401") {
            assert!(answer.to_ascii_lowercase().contains("connection: close"), "{answer:?}");
        }
        refused.push(stream);
    }
    // The operator is not locked out (a closed socket's place may take a moment to free).
    let bearer = format!("Bearer {token}");
    assert!(
        wait_until(5.0, || std::panic::catch_unwind(|| get(addr, "/api/fleet", &[("Authorization", &bearer)]).status)
            .ok()
            == Some(200)),
        "the operator is locked out by refused connections"
    );

    let traded = get(addr, &format!("/?token={token}"), &[]);
    let cookie = traded.header("set-cookie").unwrap().to_owned();
    let name = format!("fleetgate_dashboard_token_{}=", addr.port());
    assert!(cookie.starts_with(&name) && cookie.contains("SameSite=Strict"), "{cookie}");
    let other_port = format!("fleetgate_dashboard_token_{}={token}", addr.port().wrapping_add(1));
    assert_eq!(get(addr, "/api/fleet", &[("Cookie", &other_port)]).status, 401, "another port's cookie");
    let old = format!("fleetgate_dashboard_token={token}");
    assert_eq!(get(addr, "/api/fleet", &[("Cookie", &old)]).status, 200, "the old name is still accepted");
    drop(refused);
}

/// Issue 34, finding 13, on the dashboard's listener (the gateway's connection loop): two
/// `Host` headers get 400 and the connection closed, and it keeps serving.
#[test]
fn two_host_headers_get_400() {
    let d = dashboard(&[], &["--listen", "127.0.0.1:0"]).unwrap();
    let host = d.addr.to_string();
    let refused = get(d.addr, "/api/fleet", &[("Host", &host), ("Host", "evil.example")]);
    assert_eq!(refused.status, 400, "{refused:?}");
    assert_eq!(refused.header("connection"), Some("close"), "{refused:?}");
    assert_eq!(get(d.addr, "/api/fleet", &[]).status, 200);
}

/// A pending approval request in the dashboard's store; its id.
fn asked(d: &crate::support::Dashboard) -> String {
    let store = fleetgate_store::open(d.store().to_str().unwrap()).unwrap();
    let arguments = serde_json::json!({ "branch": "asked" }).as_object().cloned();
    let request = fleetgate_core::approval::ApprovalRequest {
        id: fleetgate_core::approval::request_id(0xd45b),
        requested_at: fleetgate_core::Timestamp::from_unix(1_800_000_000),
        profile: "prgs-author".into(),
        role: "author".into(),
        worker: Some("wrk-a".into()),
        principal: None,
        tool: "create_branch".into(),
        digest: fleetgate_core::approval::call_digest(Some("wrk-a"), "create_branch", arguments.as_ref()),
        arguments,
        does: None,
        why: "rule fleet.toml:9 asks".into(),
        ..fleetgate_core::approval::ApprovalRequest::default()
    };
    store.request_approval(&request).unwrap().id
}

/// Answering from the page: only with the operator token configured and presented, from the
/// page's own origin, with the page's CSRF token; once; audited as the dashboard's.
#[test]
fn an_approval_is_answered_from_the_page_only_with_the_token_the_origin_and_the_csrf_token() {
    let token = "tok-approve-1f2e3d";
    let d = dashboard(&[("FLEETGATE_DASHBOARD_TOKEN", token)], &["--listen", "127.0.0.1:0"]).unwrap();
    let id = asked(&d);
    let path = format!("/api/approvals/{id}/approve");
    let bearer = format!("Bearer {token}");
    let origin = format!("http://{}", d.addr);
    let csrf = {
        let session = get(d.addr, "/api/session", &[("Authorization", &bearer)]);
        assert_eq!(session.status, 200);
        let v: serde_json::Value = serde_json::from_str(&session.body).unwrap();
        v["csrf"].as_str().expect("a CSRF token when the token is configured").to_owned()
    };
    let post = |headers: &[(&str, &str)]| http(d.addr, "POST", &path, headers);
    assert_eq!(post(&[("Origin", &origin), ("X-Fleetgate-Csrf", &csrf)]).status, 401, "no token");
    assert_eq!(post(&[("Authorization", &bearer), ("X-Fleetgate-Csrf", &csrf)]).status, 403, "no Origin");
    let evil = post(&[("Authorization", &bearer), ("Origin", "http://evil.example"), ("X-Fleetgate-Csrf", &csrf)]);
    assert_eq!(evil.status, 403, "a cross-origin POST");
    assert_eq!(post(&[("Authorization", &bearer), ("Origin", &origin)]).status, 403, "no CSRF token");
    assert_eq!(post(&[("Authorization", &bearer), ("Origin", &origin), ("X-Fleetgate-Csrf", "0000")]).status, 403);
    let store = fleetgate_store::open(d.store().to_str().unwrap()).unwrap();
    assert_eq!(store.approval(&id).unwrap().unwrap().state, fleetgate_core::approval::ApprovalState::Pending);
    let ok = post(&[
        ("Authorization", &bearer),
        ("Origin", &origin),
        ("X-Fleetgate-Csrf", &csrf),
        ("X-Fleetgate-Reason", "looks right"),
    ]);
    assert_eq!(ok.status, 200, "{}", ok.body);
    let answered = store.approval(&id).unwrap().unwrap();
    assert_eq!(answered.state, fleetgate_core::approval::ApprovalState::Approved);
    assert!(answered.answered_by.as_deref().unwrap().contains("dashboard"), "{answered:?}");
    assert_eq!(answered.answer_reason.as_deref(), Some("looks right"));
    let again = post(&[("Authorization", &bearer), ("Origin", &origin), ("X-Fleetgate-Csrf", &csrf)]);
    assert_eq!(again.status, 409, "answered once");
    let audit = serde_json::to_string(&store.list_audit(None, 10).unwrap()).unwrap();
    assert!(audit.contains("approved by the dashboard"), "{audit}");
}

/// Without the operator token the page stays read-only: no CSRF token, every answer refused.
#[test]
fn without_its_token_the_page_answers_nothing() {
    let d = dashboard(&[], &["--listen", "127.0.0.1:0"]).unwrap();
    let id = asked(&d);
    let session = get(d.addr, "/api/session", &[]);
    let session: serde_json::Value = serde_json::from_str(&session.body).unwrap();
    assert_eq!(session, serde_json::json!({ "csrf": null, "user": null, "sign_in": false }));
    let origin = format!("http://{}", d.addr);
    let refused =
        http(d.addr, "POST", &format!("/api/approvals/{id}/approve"), &[("Origin", &origin), ("X-Fleetgate-Csrf", "")]);
    assert_eq!(refused.status, 403);
    assert!(refused.body.contains("read-only"), "{}", refused.body);
    let store = fleetgate_store::open(d.store().to_str().unwrap()).unwrap();
    assert_eq!(store.approval(&id).unwrap().unwrap().state, fleetgate_core::approval::ApprovalState::Pending);
}
