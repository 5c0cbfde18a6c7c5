//! The client side of the wire: newline-delimited JSON-RPC over the gateway's stdin and
//! stdout, validated here before rmcp sees a message.
//!
//! rmcp's own stdio transport drops what it cannot parse; the gateway must answer it
//! instead, and must refuse what rmcp would accept but other gateways let slip past their
//! policy. So every line goes through [`judge`] first:
//!
//! * not UTF-8 → `-32700` (id `null`), not JSON → `-32700` (id `null`);
//! * a JSON array (a batch) → `-32600` (id `null`): one message per line, each gated;
//! * longer than the limit → `-32600` (id `null`) as soon as the limit is crossed, and the
//!   rest of the line is skipped as it streams by, never buffered whole;
//! * JSON that is not a JSON-RPC message → `-32600`, or `-32602` for a request with a
//!   known method and bad params (with its id when it has a usable one).
//!
//! Unknown methods pass: rmcp decodes them as custom requests and the gateway answers
//! `-32601`. Until a session is opened (`initialize`, or a request carrying the
//! sessionless lifecycle `_meta`), notifications and responses are dropped here, because
//! rmcp's handshake gives up on anything but a request.
//!
//! **Invariant:** nothing but [`write_frames`] writes to the client's stdout; error
//! replies produced here go through the same channel as rmcp's messages.

use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, ClientRequest, ErrorCode, ErrorData, JsonRpcError, JsonRpcMessage,
    JsonRpcRequest, JsonRpcResponse, RequestId, ServerJsonRpcMessage,
};
use rmcp::service::RoleServer;
use rmcp::transport::Transport;
use serde_json::Value;
use std::collections::HashSet;
use std::future::Future;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

/// What to do with one line from the client.
#[derive(Debug)]
pub enum Verdict {
    /// A well-formed message for rmcp.
    Pass(Box<ClientJsonRpcMessage>),
    /// Refused: answer with this error (and the request's id, when it had one).
    Reply(ErrorData, Option<RequestId>),
    /// Nothing to answer (a blank line, a malformed notification or response).
    Drop(String),
}

/// Judge one line (without its `\n`).
pub fn judge(line: &[u8]) -> Verdict {
    let line = line.trim_ascii();
    if line.is_empty() {
        return Verdict::Drop("blank line".to_owned());
    }
    let text = match std::str::from_utf8(line) {
        Ok(text) => text,
        Err(e) => {
            return Verdict::Reply(
                ErrorData::parse_error(format!("invalid UTF-8 at byte {} of the message", e.valid_up_to()), None),
                None,
            );
        }
    };
    if text.starts_with('[') {
        return match serde_json::from_str::<Value>(text) {
            Ok(_) => Verdict::Reply(
                ErrorData::invalid_request(
                    "JSON-RPC batches are refused: send one message per line, each is gated on its own",
                    None,
                ),
                None,
            ),
            Err(e) => Verdict::Reply(ErrorData::parse_error(format!("parse error: {e}"), None), None),
        };
    }
    match serde_json::from_str::<ClientJsonRpcMessage>(text) {
        Ok(message) => match disguised(&message) {
            Some(method) if request_id(&message).is_none() => {
                Verdict::Drop(format!("notification `{method}` with invalid params"))
            }
            Some(method) => Verdict::Reply(
                ErrorData::invalid_params(format!("invalid params for `{method}`: they do not match its schema"), None),
                request_id(&message),
            ),
            None => Verdict::Pass(Box::new(message)),
        },
        Err(_) => diagnose(text),
    }
}

/// Every method the MCP schema defines (rmcp 3.11's method constants). rmcp decodes a
/// request whose params do not fit its method as a *custom* request of the same name;
/// one of those must never be forwarded, or a malformed `tools/call` would reach the
/// downstream without passing the gate.
pub const STANDARD_METHODS: &[&str] = &[
    "completion/complete",
    "elicitation/create",
    "initialize",
    "logging/setLevel",
    "notifications/cancelled",
    "notifications/elicitation/response",
    "notifications/initialized",
    "notifications/message",
    "notifications/progress",
    "notifications/prompts/list_changed",
    "notifications/resources/list_changed",
    "notifications/resources/updated",
    "notifications/roots/list_changed",
    "notifications/tasks",
    "notifications/tools/list_changed",
    "ping",
    "prompts/get",
    "prompts/list",
    "resources/directory/read",
    "resources/list",
    "resources/read",
    "resources/subscribe",
    "resources/templates/list",
    "resources/unsubscribe",
    "roots/list",
    "sampling/createMessage",
    "server/discover",
    "skills/get",
    "skills/list",
    "subscriptions/listen",
    "tasks/cancel",
    "tasks/get",
    "tasks/update",
    "tools/call",
    "tools/list",
];

/// The standard method a custom request or notification carries, if it does.
fn disguised(message: &ClientJsonRpcMessage) -> Option<&str> {
    let method = match message {
        JsonRpcMessage::Request(request) => match &request.request {
            ClientRequest::CustomRequest(custom) => custom.method.as_str(),
            _ => return None,
        },
        JsonRpcMessage::Notification(notification) => match &notification.notification {
            rmcp::model::ClientNotification::CustomNotification(custom) => custom.method.as_str(),
            _ => return None,
        },
        _ => return None,
    };
    STANDARD_METHODS.contains(&method).then_some(method)
}

fn request_id(message: &ClientJsonRpcMessage) -> Option<RequestId> {
    match message {
        JsonRpcMessage::Request(request) => Some(request.id.clone()),
        _ => None,
    }
}

/// Explain why valid-looking text is not a message rmcp accepts.
fn diagnose(text: &str) -> Verdict {
    let value: Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(e) => return Verdict::Reply(ErrorData::parse_error(format!("parse error: {e}"), None), None),
    };
    let Value::Object(object) = &value else {
        return Verdict::Reply(ErrorData::invalid_request("a JSON-RPC message must be a JSON object", None), None);
    };
    let raw_id = object.get("id");
    let id = raw_id.and_then(|v| serde_json::from_value::<RequestId>(v.clone()).ok());
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Verdict::Reply(ErrorData::invalid_request("`jsonrpc` must be \"2.0\"", None), id);
    }
    match (object.get("method"), &id) {
        (Some(Value::String(method)), Some(_)) => {
            let reason = match serde_json::from_value::<JsonRpcRequest<ClientRequest>>(value.clone()) {
                Err(e) => e.to_string(),
                Ok(_) => "the message does not match its method".to_owned(),
            };
            Verdict::Reply(ErrorData::invalid_params(format!("invalid params for `{method}`: {reason}"), None), id)
        }
        (Some(Value::String(_)), None) if raw_id.is_some() => {
            Verdict::Reply(ErrorData::invalid_request("`id` must be a string or an integer", None), None)
        }
        (Some(Value::String(method)), None) => Verdict::Drop(format!("malformed notification `{method}`")),
        (Some(_), _) => Verdict::Reply(ErrorData::invalid_request("`method` must be a string", None), id),
        (None, _) if object.contains_key("result") || object.contains_key("error") => {
            Verdict::Drop("malformed response".to_owned())
        }
        (None, _) => {
            Verdict::Reply(ErrorData::invalid_request("neither a request, a notification nor a response", None), id)
        }
    }
}

/// The error sent when a line crosses the limit.
fn oversized(limit: usize) -> ErrorData {
    ErrorData::new(
        ErrorCode::INVALID_REQUEST,
        format!("message exceeds the gateway's limit of {limit} bytes; it was discarded"),
        Some(serde_json::json!({ "limit_bytes": limit })),
    )
}

/// The `id` of a message from the start of its text, when the text up to and through it is
/// there: an oversized request is answered with its own id, so its client does not wait
/// forever. Only the top-level object's keys are looked at, in order; anything that does
/// not read as JSON before the `id` gives `None` (the refusal then has `id: null`).
pub fn leading_id(prefix: &[u8]) -> Option<RequestId> {
    let ws = |mut i: usize| {
        while prefix.get(i).is_some_and(u8::is_ascii_whitespace) {
            i += 1;
        }
        i
    };
    let mut i = ws(0);
    if prefix.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    loop {
        i = ws(i);
        let key_end = string_end(prefix, i)?;
        let key = &prefix[i..key_end];
        i = ws(key_end);
        if prefix.get(i) != Some(&b':') {
            return None;
        }
        i = ws(i + 1);
        let value_end = value_end(prefix, i)?;
        if key == b"\"id\"" {
            return serde_json::from_slice(&prefix[i..value_end]).ok();
        }
        i = ws(value_end);
        if prefix.get(i) != Some(&b',') {
            return None;
        }
        i += 1;
    }
}

/// The index just past the JSON string starting at `start`, when it ends in `text`.
fn string_end(text: &[u8], start: usize) -> Option<usize> {
    if text.get(start) != Some(&b'"') {
        return None;
    }
    let mut i = start + 1;
    while let Some(&b) = text.get(i) {
        match b {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// The index just past the JSON value starting at `start`, when it ends in `text` (a
/// scalar must be followed by something, or it may have been cut).
fn value_end(text: &[u8], start: usize) -> Option<usize> {
    match text.get(start)? {
        b'"' => string_end(text, start),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = start;
            while let Some(&b) = text.get(i) {
                match b {
                    b'"' => {
                        i = string_end(text, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            None
        }
        _ => {
            let len = text[start..].iter().position(|b| matches!(b, b',' | b'}' | b']') || b.is_ascii_whitespace())?;
            Some(start + len)
        }
    }
}

/// Whether a message opens rmcp's session: `initialize`, or a request carrying the
/// sessionless lifecycle metadata.
fn opens_session(message: &ClientJsonRpcMessage) -> bool {
    match message {
        JsonRpcMessage::Request(request) => match &request.request {
            ClientRequest::InitializeRequest(_) => true,
            ClientRequest::PingRequest(_) | ClientRequest::DiscoverRequest(_) => false,
            other => rmcp::model::GetMeta::get_meta(other).protocol_version().is_some(),
        },
        _ => false,
    }
}

/// How the client's stream ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadEnd {
    /// EOF on stdin.
    Eof,
    /// A read failed.
    Failed(String),
    /// rmcp stopped listening.
    Closed,
}

/// Read lines from `reader`, judge each, hand messages to `service` and send refusals to
/// `replies`. Returns how the stream ended.
pub async fn read_frames<R>(
    mut reader: R,
    max_bytes: usize,
    service: mpsc::Sender<ClientJsonRpcMessage>,
    replies: mpsc::Sender<ServerJsonRpcMessage>,
) -> ReadEnd
where
    R: AsyncBufRead + Unpin,
{
    let mut line: Vec<u8> = Vec::new();
    // While set, the current line already crossed the limit (and was answered): skip to
    // its end without keeping any of it.
    let mut discarding = false;
    let mut opened = false;
    loop {
        let chunk = match reader.fill_buf().await {
            Ok(chunk) => chunk,
            Err(e) => return ReadEnd::Failed(e.to_string()),
        };
        if chunk.is_empty() {
            if !discarding && !line.is_empty() {
                let verdict = judge(&line);
                if !dispatch(verdict, &mut opened, &service, &replies).await {
                    return ReadEnd::Closed;
                }
            }
            return ReadEnd::Eof;
        }
        let (taken, complete) = match chunk.iter().position(|&b| b == b'\n') {
            Some(at) => (at, true),
            None => (chunk.len(), false),
        };
        if !discarding {
            if line.len() + taken > max_bytes {
                discarding = true;
                // The first `max_bytes` of the line, however it was chunked: its id, if there.
                let room = max_bytes - line.len();
                line.extend_from_slice(&chunk[..taken.min(room)]);
                let id = leading_id(&line);
                line.clear();
                tracing::warn!(limit = max_bytes, "client message over the size limit: refused and skipped");
                if replies.send(ServerJsonRpcMessage::error(oversized(max_bytes), id)).await.is_err() {
                    return ReadEnd::Closed;
                }
            } else {
                line.extend_from_slice(&chunk[..taken]);
            }
        }
        reader.consume(if complete { taken + 1 } else { taken });
        if complete {
            if !discarding {
                let verdict = judge(&line);
                if !dispatch(verdict, &mut opened, &service, &replies).await {
                    return ReadEnd::Closed;
                }
            }
            discarding = false;
            line.clear();
            // One large message must not pin its buffer for the rest of an idle session.
            if line.capacity() > 64 * 1024 {
                line = Vec::new();
            }
        }
    }
}

/// Act on one verdict; `false` once the other side is gone.
async fn dispatch(
    verdict: Verdict,
    opened: &mut bool,
    service: &mpsc::Sender<ClientJsonRpcMessage>,
    replies: &mpsc::Sender<ServerJsonRpcMessage>,
) -> bool {
    match verdict {
        Verdict::Pass(message) => {
            if !*opened {
                if !matches!(*message, JsonRpcMessage::Request(_)) {
                    tracing::debug!("dropped a notification or response sent before the session was opened");
                    return true;
                }
                *opened = opens_session(&message);
            }
            service.send(*message).await.is_ok()
        }
        Verdict::Reply(error, id) => {
            tracing::debug!(code = error.code.0, message = %error.message, "refused a client frame");
            replies.send(ServerJsonRpcMessage::error(error, id)).await.is_ok()
        }
        Verdict::Drop(reason) => {
            tracing::debug!(%reason, "ignored a client frame");
            true
        }
    }
}

/// Write every message from `frames` to `writer`, one line each, flushing when the queue
/// is drained. Ends when every sender is gone or a write fails (the client went away).
pub(crate) async fn write_frames<W>(mut writer: W, mut frames: mpsc::Receiver<ServerJsonRpcMessage>)
where
    W: AsyncWrite + Unpin,
{
    let mut bytes = Vec::with_capacity(4096);
    while let Some(first) = frames.recv().await {
        bytes.clear();
        let mut next = Some(first);
        // Coalesce what is already queued into one write and one flush.
        while let Some(message) = next {
            match encode(&mut bytes, &message) {
                Ok(()) => bytes.push(b'\n'),
                Err(e) => tracing::error!(error = %e, "could not serialise a message for the client; dropped"),
            }
            next = frames.try_recv().ok();
        }
        if let Err(e) = writer.write_all(&bytes).await {
            tracing::info!(error = %e, "client stdout closed");
            return;
        }
        if let Err(e) = writer.flush().await {
            tracing::info!(error = %e, "client stdout closed");
            return;
        }
        if bytes.capacity() > 64 * 1024 {
            bytes = Vec::with_capacity(4096);
        }
    }
}

/// Serialise one message. JSON-RPC 2.0 requires `"id": null` on an error that answers no
/// request (a parse error, a batch); rmcp leaves the member out, so it is put back here.
pub(crate) fn encode(bytes: &mut Vec<u8>, message: &ServerJsonRpcMessage) -> serde_json::Result<()> {
    match message {
        JsonRpcMessage::Error(error) if error.id.is_none() => {
            let mut value = serde_json::to_value(message)?;
            if let Value::Object(object) = &mut value {
                object.insert("id".to_owned(), Value::Null);
            }
            serde_json::to_writer(bytes, &value)
        }
        _ => serde_json::to_writer(bytes, message),
    }
}

/// The client is gone: its stdout closed.
#[derive(Debug, thiserror::Error)]
#[error("the client's stdout is closed")]
pub(crate) struct ClientGone;

/// rmcp's view of the client connection: messages judged by [`read_frames`] in, messages
/// to [`write_frames`] out.
///
/// It also keeps the ids of the client's requests rmcp has not answered: rmcp keys its
/// requests by id, so a second request with an id still in flight would replace the
/// first's entry and one of the two answers would be dropped. The second is refused
/// here instead (`-32600`, with its id) and never reaches rmcp; the first is answered.
pub(crate) struct ClientTransport {
    inbound: mpsc::Receiver<ClientJsonRpcMessage>,
    outbound: mpsc::Sender<ServerJsonRpcMessage>,
    /// Passed to rmcp, not answered yet (nor cancelled: rmcp drops a cancelled one's answer).
    in_flight: HashSet<RequestId>,
    /// A duplicate id's refusal not yet handed to the writer: at most one, so a client that
    /// sends duplicates and never reads is simply no longer read.
    pending: Option<ServerJsonRpcMessage>,
}

impl ClientTransport {
    pub(crate) fn new(
        inbound: mpsc::Receiver<ClientJsonRpcMessage>,
        outbound: mpsc::Sender<ServerJsonRpcMessage>,
    ) -> Self {
        Self { inbound, outbound, in_flight: HashSet::new(), pending: None }
    }
}

/// Requests of the stdio client the gateway answers at once, at most: past it a request is
/// refused with its own id and never reaches rmcp, so a client that pipelines without
/// reading answers holds no more than this many tasks, decisions and waits. (Over HTTP
/// each open request holds a connection, bounded by the connection cap.) Above the
/// forwarded-request bound of a channel ([`crate::routes::MAX_IN_FLIGHT`]), so control
/// tools and `ping` are answered while that one is full.
pub(crate) const MAX_OPEN_REQUESTS: usize = 512;

/// The refusal of a request past [`MAX_OPEN_REQUESTS`].
pub(crate) fn too_many_open() -> ErrorData {
    ErrorData::internal_error(
        format!(
            "too many requests open on this connection ({MAX_OPEN_REQUESTS}): wait for answers before sending \
             more; this request was not handled"
        ),
        Some(serde_json::json!({ "limit": MAX_OPEN_REQUESTS })),
    )
}

/// The refusal of a request whose id is in flight already.
pub(crate) fn duplicate_id(id: &dyn std::fmt::Display) -> ErrorData {
    ErrorData::invalid_request(
        format!("request id {id} is already in flight: a request id must be unique among the requests in flight"),
        None,
    )
}

impl Transport<RoleServer> for ClientTransport {
    type Error = ClientGone;

    fn send(&mut self, item: ServerJsonRpcMessage) -> impl Future<Output = Result<(), ClientGone>> + Send + 'static {
        // Freed as rmcp hands the answer over, in its loop, before it reads the next request.
        if let JsonRpcMessage::Response(JsonRpcResponse { id, .. })
        | JsonRpcMessage::Error(JsonRpcError { id: Some(id), .. }) = &item
        {
            self.in_flight.remove(id);
        }
        let outbound = self.outbound.clone();
        async move { outbound.send(item).await.map_err(|_| ClientGone) }
    }

    // Cancellation-safe, as rmcp's loop needs: it polls this inside a `select!`; the awaits
    // are `mpsc::Sender::reserve` (a pending refusal stays pending) and
    // `mpsc::Receiver::recv`, which lose nothing when dropped.
    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            if self.pending.is_some() {
                let permit = self.outbound.reserve().await.ok()?;
                if let Some(refusal) = self.pending.take() {
                    permit.send(refusal);
                }
            }
            let message = self.inbound.recv().await?;
            match &message {
                JsonRpcMessage::Request(request) if self.in_flight.contains(&request.id) => {
                    tracing::debug!(id = %request.id, "refused a request whose id is in flight");
                    self.pending =
                        Some(ServerJsonRpcMessage::error(duplicate_id(&request.id), Some(request.id.clone())));
                    continue;
                }
                JsonRpcMessage::Request(request) if self.in_flight.len() >= MAX_OPEN_REQUESTS => {
                    tracing::debug!(limit = MAX_OPEN_REQUESTS, "refused a request: too many open on this connection");
                    self.pending = Some(ServerJsonRpcMessage::error(too_many_open(), Some(request.id.clone())));
                    continue;
                }
                JsonRpcMessage::Request(request) => {
                    self.in_flight.insert(request.id.clone());
                }
                JsonRpcMessage::Notification(notification) => {
                    if let ClientNotification::CancelledNotification(cancelled) = &notification.notification
                        && let Some(id) = &cancelled.params.request_id
                    {
                        self.in_flight.remove(id);
                    }
                }
                _ => {}
            }
            return Some(message);
        }
    }

    async fn close(&mut self) -> Result<(), ClientGone> {
        self.inbound.close();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{Verdict, judge, read_frames};
    use rmcp::model::{ErrorCode, RequestId, ServerJsonRpcMessage};
    use tokio::sync::mpsc;

    fn reply_code(verdict: Verdict) -> (i32, Option<RequestId>) {
        match verdict {
            Verdict::Reply(error, id) => (error.code.0, id),
            other => panic!("expected a reply, got {other:?}"),
        }
    }

    #[test]
    fn judges_each_kind_of_bad_line() {
        assert_eq!(reply_code(judge(b"{not json")).0, ErrorCode::PARSE_ERROR.0);
        assert_eq!(reply_code(judge(b"\xff\xfe{}")).0, ErrorCode::PARSE_ERROR.0);
        assert_eq!(reply_code(judge(br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#)).0, -32600);
        assert_eq!(reply_code(judge(b"[1,")).0, ErrorCode::PARSE_ERROR.0);
        assert_eq!(reply_code(judge(b"42")).0, -32600);
        let (code, id) = reply_code(judge(br#"{"jsonrpc":"1.0","id":7,"method":"ping"}"#));
        assert_eq!((code, id), (-32600, Some(RequestId::Number(7))));
        let (code, id) = reply_code(judge(br#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":3}}"#));
        assert_eq!((code, id), (-32602, Some(RequestId::String("a".into()))));
        assert!(matches!(judge(b"   \r"), Verdict::Drop(_)));
        assert!(matches!(judge(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#), Verdict::Pass(_)));
        assert!(matches!(judge(br#"{"jsonrpc":"2.0","id":1,"method":"no/such/method"}"#), Verdict::Pass(_)));
    }

    /// Found by `fuzz/fuzz_targets/jsonrpc_message.rs` (minimized): serde_json's default
    /// float parsing is not correctly rounded, so a number a client sent could reach the
    /// downstream changed in its last digit (`1191E-31` read one ulp off, then written as
    /// `1.1910000000000001e-28`), and a passed message did not survive being written and
    /// read again. The gateway builds serde_json with `float_roundtrip`.
    #[test]
    fn numbers_pass_through_unchanged() {
        for line in [
            &br#"{"jsonrpc":"2.0","method":"","params":{"":1191E-31}}"#[..],
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"x":111111110991E-31}}}"#,
        ] {
            let Verdict::Pass(message) = judge(line) else { panic!("passes") };
            let written = serde_json::to_string(&*message).unwrap();
            let Verdict::Pass(again) = judge(written.as_bytes()) else { panic!("passes again") };
            assert_eq!(serde_json::to_string(&*again).unwrap(), written, "changed by a write and a read");
            let text = std::str::from_utf8(line).unwrap();
            let number = text.rsplit(':').next().unwrap().trim_end_matches('}');
            let exact: f64 = number.parse().unwrap();
            assert!(written.contains(&format!(":{exact:e}")), "{number} became {written}");
        }
    }

    #[test]
    fn an_oversized_messages_id_is_read_from_its_start_when_it_is_there() {
        let id = |text: &str| super::leading_id(text.as_bytes());
        assert_eq!(id(r#"{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"#), Some(RequestId::Number(42)));
        assert_eq!(id(r#" { "id" : "a\"b" , "#), Some(RequestId::String("a\"b".into())));
        assert_eq!(
            id(r#"{"jsonrpc":"2.0","meta":{"x":[1,{"id":9}],"s":"}"},"id":-3,"params":"#),
            Some(RequestId::Number(-3)),
            "only the top level's id, past nested values and braces in strings"
        );
        assert_eq!(id(r#"{"jsonrpc":"2.0","id":12"#), None, "a number that may have been cut");
        assert_eq!(id(r#"{"method":"tools/call","params":{"pad":"xxxx"#), None, "the id is past the limit");
        assert_eq!(id(r#"{"id":null,"#), None);
        assert_eq!(id(r#"{"id":[1],"#), None);
        assert_eq!(id("[{\"id\":1}]"), None);
        assert_eq!(id("garbage"), None);
    }

    #[tokio::test]
    async fn an_oversized_line_is_refused_once_and_the_next_line_still_served() {
        let big = format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"pad\":\"{}\"}}\n", "x".repeat(10_000));
        let input = format!("{big}{}\n", r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#);
        // A small buffer, so the long line arrives in many chunks.
        let reader = tokio::io::BufReader::with_capacity(256, input.as_bytes());
        let (service_tx, mut service_rx) = mpsc::channel(8);
        let (reply_tx, mut reply_rx) = mpsc::channel(8);
        let end = read_frames(reader, 1000, service_tx, reply_tx).await;
        assert_eq!(end, super::ReadEnd::Eof);
        let reply = reply_rx.recv().await.expect("one refusal");
        let ServerJsonRpcMessage::Error(error) = reply else { panic!("expected an error, got {reply:?}") };
        assert_eq!(error.error.code.0, -32600);
        assert_eq!(error.id, Some(RequestId::Number(1)), "the client gets its own id back");
        assert!(error.error.message.contains("1000 bytes"), "{}", error.error.message);
        assert!(reply_rx.recv().await.is_none(), "exactly one refusal");
        let passed = service_rx.recv().await.expect("the second line passes");
        assert!(format!("{passed:?}").contains("Number(2)"), "{passed:?}");
    }
}
