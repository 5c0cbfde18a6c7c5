//! The fixture's 2026-07-28 tools: results that ask for input (SEP-2322) and the
//! stateless diagnostics of SEP-2575, answering what each server scenario of the suite
//! describes. They need a client on 2026-07-28 (through the gateway: a channel whose
//! downstream connection was opened with `server/discover`).

use super::{text, tool, tool_result};
use rmcp::ErrorData as McpError;
use rmcp::RoleServer;
use rmcp::model::{CallToolRequestParams, ErrorCode, GetPromptRequestParams, InputResponses};
use rmcp::service::RequestContext;
use serde_json::{Map, Value, json};
use std::hash::{BuildHasher, RandomState};
use std::sync::OnceLock;

/// The tools this module answers, for `tools/list`.
pub fn tools() -> Vec<Value> {
    let none = || json!({ "type": "object", "properties": {} });
    [
        ("test_input_required_result_elicitation", "Asks for the user's name, then greets them"),
        ("test_input_required_result_sampling", "Asks the client to sample an answer"),
        ("test_input_required_result_list_roots", "Asks for the client's roots"),
        ("test_input_required_result_request_state", "Round-trips a request state"),
        ("test_input_required_result_multiple_inputs", "Asks for three inputs at once"),
        ("test_input_required_result_multi_round", "Asks twice, with evolving state"),
        ("test_input_required_result_tampered_state", "Rejects a request state that fails its integrity check"),
        ("test_input_required_result_capabilities", "Asks only for what the client declared"),
        ("test_missing_capability", "Requires the client's sampling capability"),
        ("test_streaming_elicitation", "Asks for input the 2026-07-28 way, never by a request"),
    ]
    .into_iter()
    .map(|(name, description)| tool(name, description, none()))
    .collect()
}

/// The prompt this module answers, for `prompts/list`.
pub fn prompt() -> Value {
    json!({ "name": "test_input_required_result_prompt", "description": "A prompt that asks for context first" })
}

/// A keyed checksum, so a state the client altered is told apart from one it echoed.
fn seal(payload: &str) -> String {
    static KEY: OnceLock<RandomState> = OnceLock::new();
    let tag = KEY.get_or_init(RandomState::new).hash_one(payload);
    format!("{payload}.{tag:016x}")
}

fn open(state: Option<&str>) -> Option<&str> {
    let (payload, _) = state?.rsplit_once('.')?;
    (seal(payload) == state?).then_some(payload)
}

fn elicit(message: &str, field: &str, kind: &str) -> Value {
    json!({ "method": "elicitation/create", "params": {
        "message": message,
        "requestedSchema": { "type": "object", "properties": { field: { "type": kind } }, "required": [field] } } })
}

fn sample(prompt: &str, max_tokens: u32) -> Value {
    json!({ "method": "sampling/createMessage", "params": {
        "messages": [{ "role": "user", "content": { "type": "text", "text": prompt } }], "maxTokens": max_tokens } })
}

fn roots() -> Value {
    json!({ "method": "roots/list", "params": {} })
}

fn ask(requests: Value, state: Option<String>) -> Value {
    let mut result = json!({ "resultType": "input_required", "inputRequests": requests });
    if let Some(state) = state {
        result["requestState"] = Value::String(state);
    }
    result
}

/// The answered input `key`, when it is a well-formed result object.
fn answered<'a>(responses: Option<&'a InputResponses>, key: &str) -> Option<&'a Map<String, Value>> {
    responses?.get(key)?.as_object()
}

/// An elicitation answer's `content.<field>`, when the user accepted.
fn accepted(responses: Option<&InputResponses>, key: &str, field: &str) -> Option<String> {
    let answer = answered(responses, key)?;
    if answer.get("action").and_then(Value::as_str) != Some("accept") {
        return None;
    }
    let value = answer.get("content")?.get(field)?;
    Some(value.as_str().map_or_else(|| value.to_string(), str::to_owned))
}

fn bad_state() -> McpError {
    McpError::invalid_params("requestState failed its integrity check: it was not issued by this server", None)
}

/// Answer one of this module's tools; `None` when `call` names another.
pub fn call(call: &CallToolRequestParams, context: &RequestContext<RoleServer>) -> Option<Result<Value, McpError>> {
    let responses = call.input_responses.as_ref();
    let state = call.request_state.as_deref();
    let done = |message: &str| Ok(tool_result(json!([text(message)])));
    Some(match call.name.as_ref() {
        "test_input_required_result_elicitation" => match accepted(responses, "user_name", "name") {
            Some(name) => done(&format!("Hello, {name}!")),
            None => Ok(ask(json!({ "user_name": elicit("What is your name?", "name", "string") }), None)),
        },
        "test_input_required_result_sampling" => match answered(responses, "capital_question") {
            Some(answer) => done(&format!("The model answered: {}", answer.get("content").unwrap_or(&Value::Null))),
            None => Ok(ask(json!({ "capital_question": sample("What is the capital of France?", 100) }), None)),
        },
        "test_input_required_result_list_roots" => {
            match answered(responses, "client_roots").and_then(|a| a.get("roots")).and_then(Value::as_array) {
                Some(roots) => {
                    let uris: Vec<&str> = roots.iter().filter_map(|r| r.get("uri")?.as_str()).collect();
                    done(&format!("The client's roots: {}", uris.join(", ")))
                }
                None => Ok(ask(json!({ "client_roots": roots() }), None)),
            }
        }
        "test_input_required_result_request_state" => match (answered(responses, "confirm"), state) {
            (Some(_), Some(_)) if open(state) == Some("confirm") => {
                done("state-ok: the request state came back intact")
            }
            (Some(_), Some(_)) => Err(bad_state()),
            _ => Ok(ask(json!({ "confirm": elicit("Please confirm", "ok", "boolean") }), Some(seal("confirm")))),
        },
        "test_input_required_result_multiple_inputs" => {
            let all = ["user_name", "greeting", "client_roots"].iter().all(|k| answered(responses, k).is_some());
            match (all, open(state)) {
                (true, Some("multiple")) => done("All three inputs arrived"),
                (true, _) if state.is_some() => Err(bad_state()),
                _ => Ok(ask(
                    json!({ "user_name": elicit("What is your name?", "name", "string"),
                            "greeting": sample("Generate a greeting", 50), "client_roots": roots() }),
                    Some(seal("multiple")),
                )),
            }
        }
        "test_input_required_result_multi_round" => match open(state) {
            Some("round-1") if answered(responses, "step1").is_some() => Ok(ask(
                json!({ "step2": elicit("Step 2: What is your favorite color?", "color", "string") }),
                Some(seal("round-2")),
            )),
            Some("round-2") if answered(responses, "step2").is_some() => done("Both rounds answered"),
            None if state.is_some() => Err(bad_state()),
            _ => Ok(ask(
                json!({ "step1": elicit("Step 1: What is your name?", "name", "string") }),
                Some(seal("round-1")),
            )),
        },
        "test_input_required_result_tampered_state" => match state {
            Some(_) if open(state) == Some("tamper-check") => done("state verified"),
            Some(_) => Err(bad_state()),
            None => {
                Ok(ask(json!({ "confirm": elicit("Please confirm", "ok", "boolean") }), Some(seal("tamper-check"))))
            }
        },
        "test_input_required_result_capabilities" => {
            let declared = context.meta.client_capabilities().unwrap_or_default();
            let mut requests = Map::new();
            if declared.elicitation.is_some() {
                requests.insert("user_name".into(), elicit("What is your name?", "name", "string"));
            }
            if declared.sampling.is_some() {
                requests.insert("greeting".into(), sample("Generate a greeting", 50));
            }
            if requests.is_empty() || responses.is_some() {
                done("Asked only for what the client declared")
            } else {
                Ok(ask(Value::Object(requests), None))
            }
        }
        "test_missing_capability" => {
            if context.meta.client_capabilities().unwrap_or_default().sampling.is_some() {
                done("The client declared sampling")
            } else {
                Err(McpError::new(
                    ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
                    "this tool requires the client's `sampling` capability",
                    Some(json!({ "requiredCapabilities": { "sampling": {} } })),
                ))
            }
        }
        "test_streaming_elicitation" => match accepted(responses, "answer", "value") {
            Some(value) => done(&format!("Streamed answer: {value}")),
            None => Ok(ask(json!({ "answer": elicit("Any value", "value", "string") }), None)),
        },
        _ => return None,
    })
}

/// The prompt of this module, as a complete result or one that asks for input.
pub fn get_prompt(request: &GetPromptRequestParams) -> Option<Result<Value, McpError>> {
    if request.name != "test_input_required_result_prompt" {
        return None;
    }
    Some(Ok(match accepted(request.input_responses.as_ref(), "user_context", "context") {
        Some(context) => json!({ "messages": [{ "role": "user",
            "content": text(&format!("Use this context: {context}")) }] }),
        None => {
            ask(json!({ "user_context": elicit("What context should the prompt use?", "context", "string") }), None)
        }
    }))
}

/// Whether an answer asks for input rather than completing.
pub fn is_input_required(value: &Value) -> bool {
    value.get("resultType").and_then(Value::as_str) == Some("input_required")
}
