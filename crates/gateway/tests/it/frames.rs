//! The client's wire, with raw bytes on the gateway's stdin: every bad frame is answered
//! with a JSON-RPC error and the gateway keeps serving (a `ping` after each proves it).

use crate::harness::{ANSWER, RawGateway, State};
use serde_json::json;

fn assert_still_serving(gateway: &mut RawGateway, id: u64) {
    let pong = gateway.request(id, "ping", json!({}));
    assert_eq!(pong["result"], json!({}), "ping after a bad frame: {pong}");
}

fn error_code(frame: &serde_json::Value) -> i64 {
    frame["error"]["code"].as_i64().unwrap_or_else(|| panic!("expected an error frame, got {frame}"))
}

#[test]
fn each_bad_frame_gets_its_error_and_the_gateway_keeps_serving() {
    let state = State::new();
    let mut gateway = RawGateway::start(&state, &["--max-bytes", "4096"], &[]);
    gateway.initialize();

    gateway.send_bytes(b"this is not json\n");
    let frame = gateway.answer();
    assert_eq!(error_code(&frame), -32700, "{frame}");
    assert!(frame.as_object().unwrap().contains_key("id") && frame["id"].is_null(), "id null: {frame}");
    assert_still_serving(&mut gateway, 10);

    gateway.send_bytes(b"{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"ping\",\"x\":\"\xff\xfe\"}\n");
    let frame = gateway.answer();
    assert_eq!(error_code(&frame), -32700, "{frame}");
    assert!(frame["error"]["message"].as_str().unwrap().contains("UTF-8"), "{frame}");
    assert_still_serving(&mut gateway, 12);

    gateway
        .send(&json!([{"jsonrpc": "2.0", "id": 13, "method": "ping"}, {"jsonrpc": "2.0", "id": 14, "method": "ping"}]));
    let frame = gateway.answer();
    assert_eq!(error_code(&frame), -32600, "{frame}");
    assert!(frame["error"]["message"].as_str().unwrap().contains("batch"), "{frame}");
    // Neither ping of the batch was served: the next answer is the next request's.
    assert_still_serving(&mut gateway, 15);

    let frame = gateway.request(16, "no/such/method", json!({}));
    assert_eq!(error_code(&frame), -32601, "{frame}");
    assert_still_serving(&mut gateway, 17);

    let huge = format!("{{\"jsonrpc\":\"2.0\",\"id\":18,\"method\":\"ping\",\"pad\":\"{}\"}}\n", "x".repeat(64 * 1024));
    gateway.send_bytes(huge.as_bytes());
    let frame = gateway.answer();
    assert_eq!(error_code(&frame), -32600, "{frame}");
    assert!(frame["error"]["message"].as_str().unwrap().contains("4096 bytes"), "{frame}");
    assert_eq!(frame["error"]["data"]["limit_bytes"], 4096, "{frame}");
    assert_still_serving(&mut gateway, 19);

    let frame = gateway.request(20, "tools/call", json!({"name": 42}));
    assert_eq!(error_code(&frame), -32602, "{frame}");
    assert_still_serving(&mut gateway, 21);

    gateway.send(&json!({"jsonrpc": "1.0", "id": 22, "method": "ping"}));
    let frame = gateway.answer();
    assert_eq!((error_code(&frame), frame["id"].clone()), (-32600, json!(22)), "{frame}");
    assert_still_serving(&mut gateway, 23);

    // Nothing else was written: no stray answer is waiting.
    assert!(gateway.next(std::time::Duration::from_millis(200)).is_none());
    gateway.close_stdin();
    assert_eq!(gateway.exit_code(ANSWER), Some(0));
}

#[test]
fn garbage_before_initialize_does_not_end_the_session() {
    let state = State::new();
    let mut gateway = RawGateway::start(&state, &[], &[]);
    gateway.send_bytes(b"{oops\n");
    assert_eq!(error_code(&gateway.answer()), -32700);
    // A notification before initialize would end rmcp's handshake; the gateway drops it.
    gateway.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let init = gateway.initialize();
    assert_eq!(init["result"]["serverInfo"]["name"], "fleetgate-test", "{init}");
    assert_still_serving(&mut gateway, 2);
}

#[test]
fn the_client_attaches_once_and_a_second_initialize_is_refused() {
    let state = State::new();
    let mut gateway = RawGateway::start(&state, &[], &[]);
    let init = gateway.initialize();
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    let again = gateway.request(
        2,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "other", "version": "1"}}),
    );
    assert_eq!(error_code(&again), -32600, "{again}");
    assert_still_serving(&mut gateway, 3);
    gateway.close_stdin();
    assert_eq!(gateway.exit_code(ANSWER), Some(0));
    assert_eq!(
        state.events(),
        ["transport_bound", "attach raw-test 9.9 2025-11-25", "shutdown stdin_eof"],
        "one attach, one shutdown, in order"
    );
}

#[test]
fn an_older_protocol_version_is_negotiated_as_asked() {
    let state = State::new();
    let mut gateway = RawGateway::start(&state, &[], &[]);
    let init = gateway.request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}}),
    );
    assert_eq!(init["result"]["protocolVersion"], "2025-03-26", "{init}");
}

#[test]
fn without_a_downstream_only_control_tools_exist() {
    let state = State::new();
    let mut gateway = RawGateway::start(&state, &[], &[]);
    gateway.initialize();
    let listed = gateway.request(2, "tools/list", json!({}));
    let names: Vec<&str> =
        listed["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["fleet_get_runtime_context"], "{listed}");
    let context = gateway.request(3, "tools/call", json!({"name": "fleet_get_runtime_context", "arguments": {}}));
    let body: serde_json::Value =
        serde_json::from_str(context["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(body["downstream"]["state"], "absent", "{body}");
    let unknown = gateway.request(4, "tools/call", json!({"name": "git_status", "arguments": {}}));
    assert_eq!(error_code(&unknown), -32602, "{unknown}");
    assert!(unknown["error"]["message"].as_str().unwrap().contains("git_status"), "{unknown}");
}

#[test]
fn a_sessionless_2026_client_attaches_on_its_first_request() {
    let state = State::new();
    let mut gateway = RawGateway::start(&state, &[], &[]);
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "modern", "version": "2"},
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let listed = gateway.request(1, "tools/list", json!({"_meta": meta}));
    assert_eq!(listed["result"]["resultType"], "complete", "the 2026-07-28 result shape: {listed}");
    assert_eq!(listed["result"]["tools"][0]["name"], "fleet_get_runtime_context", "{listed}");
    gateway.close_stdin();
    assert_eq!(gateway.exit_code(ANSWER), Some(0));
    assert_eq!(state.events(), ["transport_bound", "attach modern 2 2026-07-28", "shutdown stdin_eof"]);
}

/// The next frame with `id` among the client-bound frames (requests from the downstream
/// are skipped), or `None` within `within`.
fn frame_with_id(
    gateway: &mut RawGateway,
    id: &serde_json::Value,
    within: std::time::Duration,
) -> Option<serde_json::Value> {
    let deadline = std::time::Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let frame = gateway.next(left)?;
        if frame.get("method").is_none() && &frame["id"] == id {
            return Some(frame);
        }
    }
}

/// Issue #18, item 12: rmcp keyed its requests by id, so a second request with the id of
/// one in flight took over its entry and one of the two answers was dropped.
#[test]
fn a_request_reusing_an_id_in_flight_is_refused_and_the_first_still_answered() {
    let state = State::new();
    state.allow_mutations();
    let mut gateway =
        RawGateway::start(&state, &[], &[crate::harness::path_text(&crate::harness::conformance_fixture())]);
    let answer = gateway.initialize_with(json!({"elicitation": {}}));
    assert!(answer.get("result").is_some(), "{answer}");
    // The call is in flight for sure while its elicitation waits on this client.
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "test_elicitation", "arguments": {"message": "who?"}}});
    gateway.send(&call);
    let elicitation = loop {
        let frame = gateway.next(ANSWER).expect("the downstream's elicitation reaches the client");
        if frame["method"] == "elicitation/create" {
            break frame;
        }
        assert!(frame.get("id") != Some(&json!(7)), "the call was answered before it asked: {frame}");
    };

    gateway.send(&call);
    let refused = frame_with_id(&mut gateway, &json!(7), std::time::Duration::from_secs(10))
        .expect("the second request with id 7 is answered");
    assert_eq!(error_code(&refused), -32600, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("already in flight"), "{refused}");

    gateway.send(&json!({"jsonrpc": "2.0", "id": elicitation["id"], "result": {"action": "accept",
        "content": {"username": "ada", "email": "ada@example.org"}}}));
    let answered = frame_with_id(&mut gateway, &json!(7), ANSWER).expect("the first request is answered");
    let text = answered["result"]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("{answered}"));
    assert!(text.contains("ada"), "{answered}");
    // Answered, the id is free again.
    assert_still_serving(&mut gateway, 7);
}
