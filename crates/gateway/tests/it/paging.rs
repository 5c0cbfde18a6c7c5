//! Pagination through the gateway, against a downstream that lists its tools two at a
//! time (`tests/peers/paged_server.py`): cursors pass through, the control tools come
//! first on the first page only, filtering applies per page, and a tool can be called
//! before the client has listed the page it is on.

use crate::harness::{PyClient, RawGateway, State, path_text, peers, python, tool};
use serde_json::{Value, json};

fn paged_server() -> Vec<String> {
    vec![path_text(&python()), path_text(&peers().join("tests/peers/paged_server.py"))]
}

fn names(page: &Value) -> Vec<&str> {
    page["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect()
}

#[test]
fn cursors_pass_through_and_each_page_is_filtered() {
    let state = State::new();
    let mut client = PyClient::start(&state, &["--forbid", "t3"], &paged_server());
    let first = client.ok(json!({"op": "list_tools"}));
    assert_eq!(names(&first), ["fleet_get_runtime_context", "t0", "t1"], "{first}");
    assert_eq!(first["nextCursor"], "1", "{first}");
    assert_eq!(tool(&first, "t1").unwrap()["_meta"]["fleetgate/classification"], "mutating");
    let second = client.ok(json!({"op": "list_tools", "cursor": "1"}));
    assert_eq!(names(&second), ["t2"], "t3 is forbidden, the control tools are on page one only: {second}");
    assert_eq!(second["nextCursor"], "2", "{second}");
    let third = client.ok(json!({"op": "list_tools", "cursor": "2"}));
    assert_eq!(names(&third), ["t4", "t5"], "{third}");
    assert!(third.get("nextCursor").is_none(), "the last page has no cursor: {third}");
    client.finish();
}

#[test]
fn a_tool_on_an_unlisted_page_is_found_and_gated() {
    let state = State::new();
    let mut gateway = RawGateway::start(&state, &[], &paged_server());
    gateway.initialize();
    let read_only = gateway.request(2, "tools/call", json!({"name": "t4", "arguments": {}}));
    assert_eq!(read_only["result"]["content"][0]["text"], "called t4", "{read_only}");
    let mutating = gateway.request(3, "tools/call", json!({"name": "t5", "arguments": {}}));
    assert_eq!(mutating["result"]["isError"], true, "{mutating}");
    let text = mutating["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("fleet_inventory_blocked: `t5` (mutating)"), "{text}");
    let missing = gateway.request(4, "tools/call", json!({"name": "t9", "arguments": {}}));
    assert_eq!(missing["error"]["code"], -32602, "{missing}");
    let decisions: Vec<String> = state.events().into_iter().filter(|e| e.starts_with("decide")).collect();
    assert_eq!(decisions, ["decide t4 read_only allowed", "decide t5 mutating refused"]);
}
