//! The gateway's stdio frame reader (`crates/gateway/src/frame.rs`, `read_frames`): a whole
//! client stream, newline-delimited, read in chunks of several sizes under a small line
//! limit or the default one.
//!
//! Invariants, for every stream: the reader ends at EOF (never fails, never hangs); its
//! outcome does not depend on how the bytes arrive (one at a time or all at once); each
//! line over the limit is refused exactly once with the limit named, every other line gets
//! exactly the frame judge's verdict, in order; every request the judge passes reaches
//! rmcp; and every refusal goes out as one JSON-RPC 2.0 error object with an `id` member.
#![no_main]

use fleetgate_gateway::fuzzing::{self, ReadEnd, Verdict};
use fleetgate_gateway::rmcp::model::{JsonRpcMessage, ServerJsonRpcMessage};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    // A small limit the fuzzer crosses easily, or the gateway's default: chosen by the
    // input's length, so each input is read one way and the fuzzer still tries both.
    let limit = if data.len().is_multiple_of(2) { 64 } else { fleetgate_gateway::DEFAULT_MAX_MESSAGE_BYTES };
    let (replies, candidates) = model(data, limit);
    // Reads of one byte, of a size that varies with the input, and of the whole stream.
    let mut first: Option<(Vec<Value>, Vec<Value>)> = None;
    for chunk in [1, data.len() % 13 + 2, data.len().max(1)] {
        let stream = fuzzing::read_stream(data, chunk, limit);
        assert_eq!(stream.end, ReadEnd::Eof, "the reader must end at EOF");
        let passed: Vec<Value> = stream.passed.iter().map(|m| serde_json::to_value(m).unwrap()).collect();
        let sent: Vec<Value> = stream.replies.iter().map(wire).collect();
        assert_eq!(sent, replies, "refusals differ from the judge's (chunk {chunk}, limit {limit})");
        check_passed(&passed, &candidates);
        match &first {
            None => first = Some((passed, sent)),
            Some(seen) => assert_eq!(seen, &(passed, sent), "the outcome depends on the read size {chunk}"),
        }
    }
});

/// A message passed to rmcp, and whether it is a request (requests always pass).
type Candidate = (Value, bool);

/// What the reader must do, line by line: the refusals it sends (as the client sees them)
/// and the messages it may pass.
fn model(data: &[u8], limit: usize) -> (Vec<Value>, Vec<Candidate>) {
    let mut replies = Vec::new();
    let mut candidates = Vec::new();
    for line in data.split(|b| *b == b'\n') {
        if line.len() > limit {
            let message = wire(&stream_error(limit, fuzzing::leading_id(&line[..limit])));
            replies.push(message);
            continue;
        }
        match fuzzing::judge(line) {
            Verdict::Pass(message) => {
                let request = matches!(*message, JsonRpcMessage::Request(_));
                candidates.push((serde_json::to_value(&*message).unwrap(), request));
            }
            Verdict::Reply(error, id) => replies.push(wire(&ServerJsonRpcMessage::error(error, id))),
            Verdict::Drop(reason) => assert!(!reason.is_empty(), "a drop must say why"),
        }
    }
    (replies, candidates)
}

/// The refusal of an oversized line, as the reader sends it (checked field by field in
/// [`wire`], so the model need not copy its wording).
fn stream_error(limit: usize, id: Option<fleetgate_gateway::rmcp::model::RequestId>) -> ServerJsonRpcMessage {
    let text = format!("message exceeds the gateway's limit of {limit} bytes; it was discarded");
    let error = fleetgate_gateway::rmcp::model::ErrorData::new(
        fleetgate_gateway::rmcp::model::ErrorCode::INVALID_REQUEST,
        text,
        Some(serde_json::json!({ "limit_bytes": limit })),
    );
    ServerJsonRpcMessage::error(error, id)
}

/// A refusal exactly as written to stdout, checked to be a JSON-RPC 2.0 error object.
fn wire(message: &ServerJsonRpcMessage) -> Value {
    let bytes = fuzzing::encode(message).expect("a refusal always serialises");
    assert!(!bytes.contains(&b'\n'), "one line per message");
    let value: Value = serde_json::from_slice(&bytes).expect("a refusal is JSON");
    let object = value.as_object().expect("a refusal is a JSON object");
    assert_eq!(object.get("jsonrpc"), Some(&Value::from("2.0")));
    assert!(object.contains_key("id"), "JSON-RPC requires `id` on every error: {value}");
    let error = object.get("error").and_then(Value::as_object).expect("an `error` object");
    let code = error.get("code").and_then(Value::as_i64).expect("an integer code");
    assert!([-32700, -32600, -32602].contains(&code), "unexpected code {code}");
    let text = error.get("message").and_then(Value::as_str).expect("a message");
    assert!(!text.trim().is_empty(), "an empty error message");
    value
}

/// The messages rmcp got must be the judge's passes, in order, with none of the requests
/// missing (only notifications and responses before the session opens may be dropped).
fn check_passed(passed: &[Value], candidates: &[Candidate]) {
    let mut got = passed.iter().peekable();
    for (message, request) in candidates {
        if got.peek() == Some(&message) {
            got.next();
        } else {
            assert!(!request, "a request the judge passed never reached rmcp: {message}");
        }
    }
    assert!(got.next().is_none(), "rmcp got a message the judge did not pass");
}
