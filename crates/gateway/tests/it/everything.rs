//! End to end with the Python SDK client in front of `@modelcontextprotocol/server-everything`
//! (Node): resources, resource templates, prompts and completions are proxied unchanged,
//! progress notifications reach the client with its own token, and tools are gated by
//! their annotations (this server annotates every tool; the unannotated case is in `git`,
//! on the minimal Python server).

use crate::harness::{PyClient, State, server_everything, text, tool, wait_until};
use serde_json::json;
use std::time::Duration;

#[test]
fn resources_prompts_and_completions_pass_through() {
    let state = State::new();
    let mut client = PyClient::start(&state, &[], &server_everything());
    let capabilities = &client.init["capabilities"];
    assert!(capabilities["resources"].is_object() && capabilities["prompts"].is_object(), "{capabilities}");

    let resources = client.ok(json!({"op": "list_resources"}));
    let first = resources["resources"][0]["uri"].as_str().expect("at least one resource").to_owned();
    let read = client.ok(json!({"op": "read_resource", "uri": first}));
    assert_eq!(read["contents"][0]["uri"], first.as_str(), "{read}");

    let templates = client.ok(json!({"op": "list_resource_templates"}));
    let template = templates["resourceTemplates"][0]["uriTemplate"].as_str().expect("a template").to_owned();
    assert!(template.contains("{resourceId}"), "{template}");
    let dynamic = template.replace("{resourceId}", "7");
    let read = client.ok(json!({"op": "read_resource", "uri": dynamic}));
    assert_eq!(read["contents"][0]["uri"], dynamic.as_str(), "{read}");

    let prompts = client.ok(json!({"op": "list_prompts"}));
    let names: Vec<&str> = prompts["prompts"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"args-prompt"), "{prompts}");
    let prompt = client.ok(json!({"op": "get_prompt", "name": "args-prompt", "arguments": {"city": "Lisbon"}}));
    assert!(prompt["messages"][0]["content"]["text"].as_str().unwrap().contains("Lisbon"), "{prompt}");

    let completion = client
        .ok(json!({"op": "complete_prompt", "name": "completable-prompt", "argument": "department", "value": "E"}));
    let values = completion["completion"]["values"].as_array().expect("completion values");
    assert!(!values.is_empty() && values.iter().all(|v| v.as_str().unwrap().starts_with('E')), "{completion}");

    // A downstream JSON-RPC error passes through as an error.
    let missing = client.step(json!({"op": "get_prompt", "name": "no-such-prompt"}));
    assert_eq!(missing["ok"], false, "{missing}");
    client.finish();
}

#[test]
fn tools_are_gated_by_annotation_and_progress_reaches_the_client() {
    let state = State::new();
    let mut client = PyClient::start(&state, &[], &server_everything());
    let listed = client.ok(json!({"op": "list_tools"}));
    assert_eq!(tool(&listed, "echo").unwrap()["_meta"]["fleetgate/classification"], "read_only");
    assert_eq!(tool(&listed, "toggle-simulated-logging").unwrap()["_meta"]["fleetgate/classification"], "mutating");

    let echoed = client.call("echo", json!({"message": "through the gateway"}));
    assert!(text(&echoed).contains("through the gateway"), "{echoed}");

    let refused = client.call("toggle-simulated-logging", json!({}));
    assert!(text(&refused).starts_with("fleet_inventory_blocked"), "{refused}");

    let long = client.ok(json!({"op": "call_tool", "name": "trigger-long-running-operation",
        "arguments": {"duration": 0.3, "steps": 3}, "progress": true}));
    assert_ne!(long["isError"], true, "{long}");
    let mut seen = json!(null);
    assert!(
        wait_until(Duration::from_secs(10), || {
            seen = client.ok(json!({"op": "notifications"}));
            !seen["progress"].as_array().unwrap().is_empty()
        }),
        "no progress notification reached the client"
    );
    assert!(seen["progress"][0]["progress"].as_f64().unwrap() > 0.0, "{seen}");

    // Allowed now, and the logging notifications it starts come through.
    state.allow_mutations();
    let toggled = client.call("toggle-simulated-logging", json!({}));
    assert_ne!(toggled["isError"], true, "{toggled}");
    client.ok(json!({"op": "set_logging_level", "level": "debug"}));
    assert!(
        wait_until(Duration::from_secs(30), || {
            let notes = client.ok(json!({"op": "notifications"}));
            notes["notifications"].as_array().unwrap().iter().any(|n| n["method"] == "notifications/message")
        }),
        "no logging message from the downstream reached the client"
    );
    client.finish();
}

#[test]
fn a_call_the_downstream_does_not_answer_in_time_times_out_and_the_gateway_serves_on() {
    let state = State::new();
    let mut client = PyClient::start(&state, &["--call-timeout-ms", "500"], &server_everything());
    let slow = client.call("trigger-long-running-operation", json!({"duration": 10, "steps": 2}));
    assert_eq!(slow["isError"], true, "{slow}");
    assert!(text(&slow).starts_with("downstream_timeout: `trigger-long-running-operation`"), "{slow}");
    let echoed = client.call("echo", json!({"message": "still here"}));
    assert!(text(&echoed).contains("still here"), "{echoed}");
    client.finish();
}
