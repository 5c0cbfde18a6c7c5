//! The gateway's judgement of one client message (`crates/gateway/src/frame.rs`, `judge`),
//! which is rmcp's `ClientJsonRpcMessage` decoding plus the gateway's own checks.
//!
//! Invariants: a parse error is answered exactly when the line is not UTF-8 JSON; a batch
//! is refused; a passed message is never a standard MCP method decoded as a custom one
//! (that would reach the downstream without the gate); a passed message re-serialises and
//! passes again unchanged; a refusal carries a known code, a message, and the request's id
//! when it has a usable one; and it goes out as a JSON-RPC 2.0 error object.
#![no_main]

use fleetgate_gateway::fuzzing::{self, STANDARD_METHODS, Verdict};
use fleetgate_gateway::rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, ClientRequest, JsonRpcMessage, RequestId, ServerJsonRpcMessage,
};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let line = data.trim_ascii();
    let json: Option<Value> = std::str::from_utf8(line).ok().and_then(|t| serde_json::from_str(t).ok());
    match fuzzing::judge(data) {
        Verdict::Pass(message) => {
            assert!(json.as_ref().is_some_and(Value::is_object), "only a JSON object can pass");
            let value = serde_json::to_value(&*message).expect("a passed message serialises");
            let custom = match &*message {
                JsonRpcMessage::Request(r) => matches!(r.request, ClientRequest::CustomRequest(_)),
                JsonRpcMessage::Notification(n) => matches!(n.notification, ClientNotification::CustomNotification(_)),
                _ => false,
            };
            let method = value.get("method").and_then(Value::as_str);
            assert!(
                !(custom && method.is_some_and(|m| STANDARD_METHODS.contains(&m))),
                "the standard method {method:?} passed as a custom message: {value}"
            );
            let again = serde_json::to_vec(&value).unwrap();
            match fuzzing::judge(&again) {
                Verdict::Pass(second) => {
                    assert_eq!(serde_json::to_value(&*second).unwrap(), value, "re-serialising changes the message")
                }
                other => panic!("a passed message, re-serialised as {value}, is judged {other:?}"),
            }
        }
        Verdict::Reply(error, id) => {
            let code = error.code.0;
            assert!(!error.message.trim().is_empty(), "an empty error message");
            assert_eq!(code == -32700, json.is_none(), "parse error iff not JSON: {code} {}", error.message);
            match &json {
                Some(Value::Array(_)) => assert_eq!((code, &id), (-32600, &None), "a batch is refused whole"),
                Some(Value::Object(object)) => {
                    let usable = object.get("id").and_then(|v| serde_json::from_value::<RequestId>(v.clone()).ok());
                    if code == -32602 {
                        assert!(usable.is_some() && id == usable, "invalid params answers the request's id");
                    }
                    if id.is_some() {
                        assert_eq!(id, usable, "a refusal answers the id the request carried");
                    }
                }
                _ => assert_eq!(id, None),
            }
            let wire = fuzzing::encode(&ServerJsonRpcMessage::error(error, id)).expect("a refusal serialises");
            let wire: Value = serde_json::from_slice(&wire).expect("a refusal is JSON");
            assert!(wire.get("id").is_some() && wire.get("error").is_some(), "{wire}");
        }
        Verdict::Drop(reason) => {
            assert!(!reason.is_empty(), "a drop must say why");
            // Blank lines, and malformed notifications or responses (nothing to answer).
            assert!(line.is_empty() || json.as_ref().is_some_and(Value::is_object), "dropped {reason}");
        }
    }
    // rmcp's own decoding of the same text never panics, and what it accepts the judge
    // does not call a parse error (checked above: it is JSON).
    if let Ok(text) = std::str::from_utf8(line) {
        let _ = serde_json::from_str::<ClientJsonRpcMessage>(text);
    }
});
