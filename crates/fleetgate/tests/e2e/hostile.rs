//! `fleetgate serve --transport http` against hostile peers (issue #18): half-open
//! connections, a connection flood, trickled bodies. Raw sockets, so each test knows which
//! connection it uses; timeouts are configured short and waited for by polling, bounded.

use crate::http::CONFIG;
use crate::httpkit::{Conn, HttpGateway, open_session};
use crate::support::{FleetDir, serial};
use serde_json::json;
use std::time::{Duration, Instant};

/// `[http]` bounds small enough to reach in a test.
fn bounded(extra: &str) -> String {
    format!("{CONFIG}\n[http]\n{extra}\n")
}

#[test]
fn half_open_connections_are_closed_after_the_header_timeout_and_the_cap_refuses_past_it() {
    let _serial = serial();
    let f = FleetDir::new(&bounded("max_connections = 8\nheader_timeout_seconds = 2"));
    let g = HttpGateway::start_logging(&f, None, &[], "info");

    // A working session on a connection of its own, and its event stream on another.
    let mut session = Conn::open(&g.addr);
    let id = open_session(&mut session, &[]);
    let mut events = Conn::open(&g.addr);
    events.send("GET", &[("Mcp-Session-Id", id.as_str())], "");
    let head = events.read_head();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");

    // Six half-open connections: part of a request head, then nothing.
    let started = Instant::now();
    let mut stalled: Vec<Conn> = (0..6)
        .map(|_| {
            let mut c = Conn::open(&g.addr);
            c.send_raw(b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: appl");
            c
        })
        .collect();

    // The ninth connection is over the cap: told so, and closed.
    let mut refused = Conn::open(&g.addr);
    let reply = refused.read_reply();
    assert_eq!(reply.status, 503, "{reply:?}");
    assert_eq!(reply.header("connection"), Some("close"));
    assert!(refused.closed_within(5.0), "the refused connection was left open");
    // A client that writes its request in parts (head, then body) while the refusal is on
    // its way can finish writing and then read the 503: the refused connection's input is
    // drained before it is closed. Closed with unread input, it would be reset, and the
    // client's next write would fail (EPIPE) before it ever read why.
    for _ in 0..3 {
        let mut eager = Conn::open(&g.addr);
        std::thread::sleep(Duration::from_millis(50));
        eager.send_raw(b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n");
        std::thread::sleep(Duration::from_millis(50));
        eager.send_raw(b"{}");
        let reply = eager.read_reply();
        assert_eq!(reply.status, 503, "{reply:?}");
    }

    // The session keeps working on its own connection meanwhile.
    let ping = json!({ "jsonrpc": "2.0", "id": 2, "method": "ping" }).to_string();
    let reply = session.request("POST", &[("Mcp-Session-Id", id.as_str())], &ping);
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.json()["id"], 2, "{reply:?}");

    // Every half-open connection is closed once the header timeout passes, not before.
    for c in &mut stalled {
        assert!(c.closed_within(10.0), "a half-open connection outlived the header timeout");
    }
    assert!(started.elapsed() >= Duration::from_millis(1500), "closed before the timeout: {:?}", started.elapsed());
    // The idle keep-alive connection is closed too; the event stream, answering, is not.
    assert!(session.closed_within(10.0), "an idle keep-alive connection outlived the header timeout");
    assert!(!events.closed_within(0.5), "the session's event stream was closed by the header timeout");

    // The slots are free again: a new connection is served.
    let mut again = Conn::open(&g.addr);
    let reply = again.request("POST", &[("Mcp-Session-Id", id.as_str())], &ping);
    assert_eq!(reply.status, 200, "{reply:?}");
    drop(events);
    g.stop();
}

#[test]
fn a_trickled_body_is_answered_408_after_the_body_timeout() {
    let _serial = serial();
    let f = FleetDir::new(&bounded("body_timeout_seconds = 1"));
    let g = HttpGateway::start_logging(&f, None, &[], "info");
    let mut c = Conn::open(&g.addr);
    let addr = g.addr.clone();
    c.send_raw(
        format!(
            "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{{\"jsonrpc\""
        )
        .as_bytes(),
    );
    let reply = c.read_reply();
    assert_eq!(reply.status, 408, "{reply:?}");
    assert_eq!(reply.json()["error"]["code"], -32600, "{reply:?}");
    assert_eq!(reply.header("connection"), Some("close"), "the body was not read: the connection ends");
    // The gateway keeps serving.
    let mut next = Conn::open(&g.addr);
    open_session(&mut next, &[]);
    g.stop();
}

/// A gateway with no downstream logging at `log`, and a session on a connection of its own.
fn with_session(f: &FleetDir, log: &str) -> (HttpGateway, Conn, String) {
    let g = HttpGateway::start_logging(f, None, &[], log);
    let mut c = Conn::open(&g.addr);
    let id = open_session(&mut c, &[]);
    (g, c, id)
}

#[test]
fn a_body_that_is_no_jsonrpc_message_gets_400_with_its_jsonrpc_error() {
    let _serial = serial();
    let f = FleetDir::new(CONFIG);
    let (g, mut c, id) = with_session(&f, "info");
    let in_session = [("Mcp-Session-Id", id.as_str())];
    for (headers, body, code) in [
        (&[][..], "{not json", -32700),
        (&[][..], r#"{"jsonrpc":"2.0","id":1"#, -32700),
        (&[][..], r#"{"foo":1}"#, -32600),
        (&in_session[..], "{not json", -32700),
        (&in_session[..], r#"{"jsonrpc":"2.0","id":3,"result":1,"error":{}}"#, -32600),
    ] {
        let reply = c.request("POST", headers, body);
        assert_eq!(reply.status, 400, "{body}: {reply:?}");
        assert_eq!(reply.json()["error"]["code"], code, "{body}: {reply:?}");
    }
    // A body that is not said to be JSON is still 415.
    let reply = c.request("POST", &[("Content-Type", "text/plain")], "{}");
    assert_eq!(reply.status, 415, "{reply:?}");
    // The session and the gateway keep serving.
    let ping = json!({ "jsonrpc": "2.0", "id": 2, "method": "ping" }).to_string();
    let reply = c.request("POST", &in_session, &ping);
    assert_eq!(reply.json()["id"], 2, "{reply:?}");
    g.stop();
}

#[test]
fn a_session_deleted_once_is_not_found_the_second_time() {
    let _serial = serial();
    let f = FleetDir::new(CONFIG);
    let (g, mut c, id) = with_session(&f, "info");
    let in_session = [("Mcp-Session-Id", id.as_str())];
    assert_eq!(c.request("DELETE", &in_session, "").status, 202);
    let again = c.request("DELETE", &in_session, "");
    assert_eq!(again.status, 404, "{again:?}");
    let ping = json!({ "jsonrpc": "2.0", "id": 2, "method": "ping" }).to_string();
    assert_eq!(c.request("POST", &in_session, &ping).status, 404, "the deleted session is gone");
    g.stop();
}

#[test]
fn a_session_holds_at_most_four_event_streams_at_once() {
    let _serial = serial();
    let f = FleetDir::new(CONFIG);
    let (g, _session, id) = with_session(&f, "info");
    let get = |id: &str| {
        let mut stream = Conn::open(&g.addr);
        stream.send("GET", &[("Mcp-Session-Id", id)], "");
        stream
    };
    let mut streams: Vec<Conn> = (0..4)
        .map(|_| {
            let mut s = get(&id);
            let head = s.read_head();
            assert!(head.starts_with("HTTP/1.1 200"), "{head}");
            s
        })
        .collect();
    let reply = get(&id).read_reply();
    assert_eq!(reply.status, 429, "a fifth event stream: {reply:?}");
    assert_eq!(reply.json()["error"]["code"], -32000, "{reply:?}");
    assert!(reply.body.contains("event streams"), "{reply:?}");
    // Another session is counted apart.
    let mut other = Conn::open(&g.addr);
    let other_id = open_session(&mut other, &[]);
    assert!(get(&other_id).read_head().starts_with("HTTP/1.1 200"));
    // A stream the client closes frees its place.
    streams.pop();
    let reopened = crate::support::wait_until(30.0, || {
        let mut s = get(&id);
        let head = s.read_head();
        let ok = head.starts_with("HTTP/1.1 200");
        if ok {
            streams.push(s);
        }
        ok
    });
    assert!(reopened, "the closed stream's place was not freed");
    drop(streams);
    g.stop();
}

#[test]
fn neither_the_session_id_at_info_nor_tool_arguments_are_logged() {
    let _serial = serial();
    let f = FleetDir::new(CONFIG);
    // The most verbose filter there is: what it still leaves out is left out for good.
    let (g, mut c, id) = with_session(&f, "trace");
    let marker = "arg-value-5d1f0c";
    let call = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": { "name": "gitea_get_runtime_context", "arguments": { "note": marker } } });
    let reply = c.request("POST", &[("Mcp-Session-Id", id.as_str())], &call.to_string());
    assert_eq!(reply.json()["id"], 2, "{reply:?}");
    let stderr = g.stderr.clone();
    g.stop();
    let log = std::fs::read_to_string(stderr).unwrap();
    assert!(log.contains("client attached"), "the log is written: {log}");
    assert!(!log.contains(marker), "a tool argument was logged");
    for line in log.lines().filter(|l| l.contains(&id)) {
        assert!(line.contains(" DEBUG ") || line.contains(" TRACE "), "the session id logged above DEBUG: {line}");
    }
}

/// A refusal sent before the body is read ends the connection, and says so: a client that
/// pooled it would otherwise send its next request into a socket hyper has closed (the
/// e2e suite's ureq client did, now and then, after a 401).
#[test]
fn an_unauthenticated_post_is_refused_with_connection_close() {
    let _serial = serial();
    let f = FleetDir::new(CONFIG);
    let g = HttpGateway::start_logging(&f, Some("tok-e2e-hostile"), &[], "info");
    let mut c = Conn::open(&g.addr);
    let init = json!({ "jsonrpc": "2.0", "id": 1, "method": "ping" }).to_string();
    let reply = c.request("POST", &[], &init);
    assert_eq!(reply.status, 401, "{reply:?}");
    assert_eq!(reply.header("connection"), Some("close"), "{reply:?}");
    assert!(c.closed_within(5.0), "the connection was kept after a refusal that left its body unread");
    g.stop();
}

/// Issue 34, finding 13: a request with two `Host` headers, or a head whose lines end in a
/// bare LF (first request or a later one on a kept-alive connection), is answered 400 and
/// its connection closed; a well-formed request — its JSON body full of bare LFs — is
/// served on before and after.
#[test]
fn two_host_headers_or_a_bare_lf_in_a_head_get_400_and_the_connection_closed() {
    let _serial = serial();
    let f = FleetDir::new(CONFIG);
    let g = HttpGateway::start_logging(&f, None, &[], "info");
    let addr = g.addr.clone();
    let body = "{\n  \"jsonrpc\": \"2.0\",\n  \"id\": 1,\n  \"method\": \"initialize\",\n  \"params\": {\n    \
                \"protocolVersion\": \"2025-11-25\", \"capabilities\": {},\n    \"clientInfo\": {\"name\": \"lf\", \
                \"version\": \"1\"}\n  }\n}\n";
    let head = |eol: &str, hosts: &[&str]| {
        let mut h = format!("POST /mcp HTTP/1.1{eol}");
        for host in hosts {
            h.push_str(&format!("Host: {host}{eol}"));
        }
        h.push_str(&format!(
            "Accept: application/json, text/event-stream{eol}Content-Type: application/json{eol}Content-Length: \
             {}{eol}{eol}{body}",
            body.len()
        ));
        h
    };
    let refused = |c: &mut Conn, why: &str| {
        let reply = c.read_reply();
        assert_eq!(reply.status, 400, "{why}: {reply:?}");
        assert_eq!(reply.header("connection"), Some("close"), "{why}: {reply:?}");
        assert!(c.closed_within(5.0), "{why}: the connection was kept");
    };

    let mut c = Conn::open(&addr);
    c.send_raw(head("\r\n", &[&addr]).as_bytes());
    assert_eq!(c.read_reply().status, 200, "a well-formed request whose body holds bare LFs is served");

    let mut c = Conn::open(&addr);
    c.send_raw(head("\r\n", &[&addr, "evil.example"]).as_bytes());
    refused(&mut c, "two Host headers");
    let mut c = Conn::open(&addr);
    c.send_raw(head("\r\n", &[&addr, &addr]).as_bytes());
    refused(&mut c, "two equal Host headers");

    let mut c = Conn::open(&addr);
    c.send_raw(head("\n", &[&addr]).as_bytes());
    refused(&mut c, "bare LF line ends");
    let mut c = Conn::open(&addr);
    c.send_raw(
        head("\r\n", &[&addr])
            .replacen("Content-Type: application/json\r\n", "Content-Type: application/json\n", 1)
            .as_bytes(),
    );
    refused(&mut c, "one bare LF");

    // The second request of a kept-alive connection, after a body holding bare LFs.
    let mut c = Conn::open(&addr);
    c.send_raw(head("\r\n", &[&addr]).as_bytes());
    assert_eq!(c.read_reply().status, 200);
    c.send_raw(head("\n", &[&addr]).as_bytes());
    refused(&mut c, "bare LF in a later head");

    let mut c = Conn::open(&addr);
    c.send_raw(head("\r\n", &[&addr]).as_bytes());
    assert_eq!(c.read_reply().status, 200, "the server keeps serving");
    g.stop();
}
