//! The fixture over Streamable HTTP (`--http`), raw requests through reqwest: what the
//! HTTP transport guarantees a session, with the rmcp conformance fixture downstream.

use crate::harness::{ANSWER, RawGateway, State};
use serde_json::{Value, json};

/// Start the fixture on HTTP in front of the conformance fixture: the gateway (kept for
/// its lifetime) and the endpoint's URL.
pub(crate) fn start(state: &State) -> (RawGateway, String) {
    crate::sharing::start_sharing(state, "session", true)
}

/// A POST of `message` to `url`, in `session` when given.
pub(crate) async fn post(
    client: &reqwest::Client,
    url: &str,
    session: Option<&str>,
    message: &Value,
) -> reqwest::Response {
    let mut request = client
        .post(url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(message.to_string());
    if let Some(session) = session {
        request = request.header("Mcp-Session-Id", session);
    }
    request.send().await.expect("the gateway answers")
}

/// Read `response`'s body into `text` until it contains `needle` (bounded).
pub(crate) async fn read_until(response: &mut reqwest::Response, text: &mut String, needle: &str) {
    let read = async {
        while !text.contains(needle) {
            let chunk = response.chunk().await.expect("the stream reads").expect("the stream is still open");
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
    };
    tokio::time::timeout(ANSWER, read).await.unwrap_or_else(|_| panic!("no {needle:?} within {ANSWER:?}: {text}"));
}

/// The JSON-RPC messages of an SSE body.
pub(crate) fn messages(text: &str) -> Vec<Value> {
    text.lines().filter_map(|l| l.strip_prefix("data: ")).filter_map(|d| serde_json::from_str(d).ok()).collect()
}

/// Issue #18, item 12, over HTTP: rmcp keyed a session's requests by id, so a second
/// request with the id of one in flight took over its answer stream and one of the two
/// answers was lost. The second is refused with 409; the first is still answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_a_request_reusing_an_id_in_flight_gets_409_and_the_first_is_still_answered() {
    let state = State::new();
    state.allow_mutations();
    let (_gateway, url) = start(&state);
    let client = reqwest::Client::new();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
        "capabilities": {"elicitation": {}}, "clientInfo": {"name": "raw-http", "version": "1"}}});
    let answer = post(&client, &url, None, &init).await;
    assert_eq!(answer.status(), 200);
    let session = answer.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(post(&client, &url, Some(&session), &initialized).await.status(), 202);

    // The call is in flight for sure while its elicitation waits on this client.
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "test_elicitation", "arguments": {"message": "who?"}}});
    let mut first = post(&client, &url, Some(&session), &call).await;
    assert_eq!(first.status(), 200);
    let mut text = String::new();
    read_until(&mut first, &mut text, "elicitation/create").await;
    let elicitation = messages(&text).into_iter().find(|m| m["method"] == "elicitation/create").unwrap();

    let second = post(&client, &url, Some(&session), &call).await;
    assert_eq!(second.status(), 409, "the second request with id 7");
    let refusal: Value = serde_json::from_str(&second.text().await.unwrap()).unwrap();
    assert_eq!((refusal["id"].clone(), refusal["error"]["code"].clone()), (json!(7), json!(-32600)), "{refusal}");
    assert!(refusal["error"]["message"].as_str().unwrap().contains("already in flight"), "{refusal}");

    let accept = json!({"jsonrpc": "2.0", "id": elicitation["id"], "result": {"action": "accept",
        "content": {"username": "ada", "email": "ada@example.org"}}});
    assert_eq!(post(&client, &url, Some(&session), &accept).await.status(), 202);
    read_until(&mut first, &mut text, "\"id\":7").await;
    let answered = messages(&text).into_iter().find(|m| m["id"] == 7).unwrap();
    assert!(answered["result"]["content"][0]["text"].as_str().is_some_and(|t| t.contains("ada")), "{answered}");

    // Answered, the id is free again: once the answer's stream has ended, which the server
    // sees a moment after the client read the answer (polled, bounded).
    drop(first);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    let status = loop {
        let ping = post(&client, &url, Some(&session), &json!({"jsonrpc": "2.0", "id": 7, "method": "ping"})).await;
        if ping.status() != 409 || tokio::time::Instant::now() > deadline {
            break ping.status();
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    };
    assert_eq!(status, 200);
}

/// A stateless (2026-07-28) `tools/call` of `test_header_routing` with `region` in the body
/// and `header` (when given) as its `Mcp-Param-Region`: the HTTP status and the message.
async fn routed(client: &reqwest::Client, url: &str, id: u64, region: &str, header: Option<&str>) -> (u16, Value) {
    let message = json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "test_header_routing", "arguments": { "region": region },
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": { "name": "router", "version": "1" },
            "io.modelcontextprotocol/clientCapabilities": {},
        } } });
    let mut request = client
        .post(url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", "test_header_routing")
        .body(message.to_string());
    if let Some(header) = header {
        request = request.header("Mcp-Param-Region", header);
    }
    let response = request.send().await.expect("the gateway answers");
    let status = response.status().as_u16();
    let text = response.text().await.unwrap_or_default();
    let body = messages(&text).into_iter().next().unwrap_or_else(|| serde_json::from_str(&text).unwrap_or(Value::Null));
    (status, body)
}

/// SEP-2243: a parameter header that disagrees with the argument it mirrors is a parser
/// differential at the HTTP layer (a router reads one call, the gate and the downstream
/// another), refused before the gate with 400 and `-32020` (HeaderMismatch) — whether or not
/// the tool was listed first. Never forwarded: the downstream never answers a refused call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parameter_header_that_disagrees_with_its_argument_is_refused_before_the_gate() {
    let state = State::new();
    state.allow_mutations();
    let (_gateway, url) = start(&state);
    let client = reqwest::Client::new();
    let refused = |(status, body): (u16, Value), why: &str| {
        assert_eq!((status, &body["error"]["code"]), (400, &json!(-32020)), "{why}: {body}");
        assert!(!body.to_string().contains("routed to"), "{why}: forwarded: {body}");
    };
    // The first call of the tool, no listing before it: its definition is found and judged.
    let first = routed(&client, &url, 1, "Hello", Some("Elsewhere")).await;
    assert!(first.1["error"]["message"].as_str().unwrap_or_default().contains("Mcp-Param-Region"), "{first:?}");
    refused(first, "another value");
    refused(routed(&client, &url, 2, "Hello", None).await, "the argument without its header");
    refused(routed(&client, &url, 3, "Hello", Some("=?base64?SGVsbG8?=")).await, "unpadded Base64");
    refused(routed(&client, &url, 4, "Hello", Some("Hello, world")).await, "a prefix of the header");

    // The header that says what the body says, plain or in Base64: judged and forwarded.
    for (id, header) in [(5, "Hello"), (6, "=?base64?SGVsbG8=?=")] {
        let (status, body) = routed(&client, &url, id, "Hello", Some(header)).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["result"]["content"][0]["text"], "routed to Hello", "{body}");
    }
}

/// The `_meta` of a 2026-07-28 request from the client `name`.
fn stateless_meta(name: &str) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": { "name": name, "version": "1" },
        "io.modelcontextprotocol/clientCapabilities": {},
    })
}

/// A stateless request of `method` from `name`: the response, its body not yet read.
pub(crate) async fn stateless(
    client: &reqwest::Client,
    url: &str,
    id: u64,
    name: &str,
    method: &str,
    params: Value,
) -> reqwest::Response {
    post_with_meta(client, url, id, method, params, stateless_meta(name)).await
}

/// A 2026-07-28 request of `method` with `meta` as its `_meta` and the headers that mirror it.
async fn post_with_meta(
    client: &reqwest::Client,
    url: &str,
    id: u64,
    method: &str,
    params: Value,
    meta: Value,
) -> reqwest::Response {
    let mut params = params;
    params["_meta"] = meta;
    let message = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
    let mut request = client
        .post(url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", method);
    if let Some(named) = params.get("name").or_else(|| params.get("taskId")).and_then(Value::as_str) {
        request = request.header("Mcp-Name", named);
    }
    request.body(message.to_string()).send().await.expect("the gateway answers")
}

/// SEP-2575 through the gate: each stateless client's `subscriptions/listen` stream opens with
/// its acknowledgment and carries its own channel's list changes — asked of the downstream by
/// the gateway's own listen, tagged with that stream's id — and never another client's: two
/// clients each trigger a change, and each stream sees exactly its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_stream_carries_its_own_client_s_notifications_and_no_other_s() {
    subscription_streams("session").await;
}

/// The same two clients on one shared downstream: its tool list is every client's, so each
/// change reaches both streams, each tagged with that stream's own id, and nothing else does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_shared_downstream_a_list_change_reaches_every_stream_tagged_as_its_own() {
    subscription_streams("gateway").await;
}

async fn subscription_streams(sharing: &str) {
    let state = State::new();
    state.allow_mutations();
    let (_gateway, url) = crate::sharing::start_sharing(&state, sharing, sharing == "session");
    // Each stream hears its own client's change; shared, every client's.
    let expected = if sharing == "gateway" { 2 } else { 1 };
    let client = reqwest::Client::new();
    let filter = json!({ "notifications": { "toolsListChanged": true } });
    let mut streams = Vec::new();
    for (id, name) in [(11, "alice"), (12, "bob")] {
        // Its attachment and downstream first (a downstream that connects tells the open
        // streams to list again: not the change this test counts).
        stateless(&client, &url, id - 10, name, "tools/list", json!({})).await.text().await.unwrap();
        let mut stream = stateless(&client, &url, id, name, "subscriptions/listen", filter.clone()).await;
        assert_eq!(stream.status(), 200, "{name}'s stream opens");
        let mut text = String::new();
        read_until(&mut stream, &mut text, "notifications/subscriptions/acknowledged").await;
        streams.push((name, id, stream, text));
    }
    for (name, id, stream, text) in &mut streams {
        let call = json!({ "name": "test_trigger_tool_change", "arguments": {} });
        let answer = stateless(&client, &url, 20 + *id, name, "tools/call", call).await.text().await.unwrap();
        assert!(answer.contains("sent to 1 stream"), "the gateway listens on {name}'s downstream: {answer}");
        read_until(stream, text, "notifications/tools/list_changed").await;
    }
    for (name, id, stream, text) in &mut streams {
        // Every change this stream is owed, then a moment more for one it is not.
        while text.matches("notifications/tools/list_changed").count() < expected {
            let more = tokio::time::timeout(crate::harness::ANSWER, stream.chunk()).await;
            let chunk = more.expect("the stream's changes in time").unwrap().expect("the stream is open");
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
        if let Ok(Ok(Some(chunk))) = tokio::time::timeout(std::time::Duration::from_millis(50), stream.chunk()).await {
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
        let changes: Vec<Value> =
            messages(text).into_iter().filter(|m| m["method"] == "notifications/tools/list_changed").collect();
        assert_eq!(changes.len(), expected, "{sharing}: {name}'s stream: {text}");
        for change in &changes {
            let tag = &change["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"];
            assert_eq!(tag, &json!(*id), "tagged with {name}'s stream: {text}");
        }
    }
}

/// `response`'s body until it ends, or what came of it within `bound`: (text, ended).
async fn read_for(response: &mut reqwest::Response, bound: std::time::Duration) -> (String, bool) {
    let mut text = String::new();
    let read = async {
        while let Ok(Some(chunk)) = response.chunk().await {
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
    };
    let ended = tokio::time::timeout(bound, read).await.is_ok();
    (text, ended)
}

/// Issue 43, finding 11: a `subscriptions/listen` beyond its bounds — one stream more than a
/// client may hold, or more resources than one stream may name — is refused `-32602` before
/// anything is acknowledged: the client is never told a stream is open that is then closed.
/// Another client's stream still opens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_stream_beyond_its_bounds_is_refused_before_it_is_acknowledged() {
    const ACK: &str = "notifications/subscriptions/acknowledged";
    let state = State::new();
    let (_gateway, url) = start(&state);
    let client = reqwest::Client::new();
    let filter = json!({ "notifications": { "toolsListChanged": true } });
    stateless(&client, &url, 1, "alice", "tools/list", json!({})).await.text().await.unwrap();
    // Alice holds every stream she may (16), each acknowledged.
    let mut open = Vec::new();
    for id in 100..116 {
        let mut stream = stateless(&client, &url, id, "alice", "subscriptions/listen", filter.clone()).await;
        let mut text = String::new();
        read_until(&mut stream, &mut text, ACK).await;
        open.push(stream);
    }
    let uris: Vec<String> = (0..257).map(|i| format!("test://static/resource/{i}")).collect();
    let too_many = json!({ "notifications": { "resourceSubscriptions": uris } });
    for (who, id, filter, says) in [
        ("alice", 200, filter.clone(), "holds 16 subscription streams"),
        ("bob", 201, too_many, "at most 256 resources"),
    ] {
        let mut refused = stateless(&client, &url, id, who, "subscriptions/listen", filter).await;
        let (text, ended) = read_for(&mut refused, crate::harness::ANSWER / 4).await;
        assert!(!text.contains(ACK), "{who}: acknowledged before it was refused: {text}");
        assert!(ended, "{who}: the stream was held open: {text}");
        let answer = messages(&text).into_iter().next().unwrap_or_else(|| serde_json::from_str(&text).unwrap());
        assert_eq!((&answer["id"], &answer["error"]["code"]), (&json!(id), &json!(-32602)), "{who}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{who}: {answer}");
    }
    // Within the bounds, another client's stream opens.
    let mut bob = stateless(&client, &url, 202, "bob", "subscriptions/listen", filter).await;
    let mut text = String::new();
    read_until(&mut bob, &mut text, ACK).await;
    drop(open);
}

/// The `_meta` of a 2026-07-28 request from `name`, declaring the tasks extension.
fn tasks_meta(name: &str) -> Value {
    let mut meta = stateless_meta(name);
    meta["io.modelcontextprotocol/clientCapabilities"] =
        json!({ "extensions": { "io.modelcontextprotocol/tasks": {} } });
    meta
}

/// A stateless request of `method` from `name`, which takes tasks: its first message.
async fn task_request(client: &reqwest::Client, url: &str, id: u64, name: &str, method: &str, params: Value) -> Value {
    let response = post_with_meta(client, url, id, method, params, tasks_meta(name)).await;
    let text = response.text().await.unwrap();
    messages(&text).into_iter().next().unwrap_or_else(|| serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// SEP-2663 through the gate: a `tools/call` that would become a task is gated like any other
/// (refused while the gate holds mutations: no task is made); allowed, the task is its
/// client's — another client's `tasks/get`, `tasks/update` and `tasks/cancel` of that id are
/// "unknown" at the gateway, never forwarded (the task keeps running), while its own reach it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_is_gated_when_made_and_only_the_client_that_made_it_reaches_it() {
    task_ownership("session").await;
}

/// On one shared downstream no client's capabilities are the run's, the tasks extension
/// included: a call of a client that takes tasks is answered in full, and no task id — made
/// up, or another client's — reaches the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_shared_downstream_no_task_is_made_and_none_is_reached() {
    let state = State::new();
    state.allow_mutations();
    let (_gateway, url) = crate::sharing::start_sharing(&state, "gateway", false);
    let client = reqwest::Client::new();
    let compute = json!({ "name": "slow_compute", "arguments": { "seconds": 0, "label": "alice's" } });
    let answer = task_request(&client, &url, 1, "alice", "tools/call", compute).await;
    assert_eq!(answer["result"]["resultType"], "complete", "{answer}");
    assert_eq!(answer["result"]["content"][0]["text"], "computed alice's after 0 s", "{answer}");
    for (id, who) in [(2, "alice"), (3, "mallory")] {
        let get = task_request(&client, &url, id, who, "tasks/get", json!({ "taskId": "task-1" })).await;
        let message = get["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("this client has no such task"), "{who}: {get}");
    }
}

async fn task_ownership(sharing: &str) {
    let state = State::new();
    let (_gateway, url) = crate::sharing::start_sharing(&state, sharing, sharing == "session");
    let client = reqwest::Client::new();
    let compute = json!({ "name": "slow_compute", "arguments": { "seconds": 30, "label": "alice's" } });

    let held = task_request(&client, &url, 1, "alice", "tools/call", compute.clone()).await;
    assert_eq!(held["result"]["isError"], true, "the gate holds mutations: {held}");
    assert!(held["result"]["taskId"].is_null(), "no task is made for a refused call: {held}");

    state.allow_mutations();
    let made = task_request(&client, &url, 2, "alice", "tools/call", compute).await;
    assert_eq!(made["result"]["resultType"], "task", "{made}");
    let task = made["result"]["taskId"].as_str().expect("a task id").to_owned();

    for (id, method, params) in [
        (3, "tasks/get", json!({ "taskId": task })),
        (4, "tasks/cancel", json!({ "taskId": task })),
        (5, "tasks/update", json!({ "taskId": task, "inputResponses": {} })),
    ] {
        let foreign = task_request(&client, &url, id, "mallory", method, params).await;
        let message = foreign["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("this client has no such task"), "{method} by another client: {foreign}");
    }
    let own = task_request(&client, &url, 6, "alice", "tasks/get", json!({ "taskId": task })).await;
    assert_eq!(own["result"]["status"], "working", "alice's task, untouched by mallory's cancel: {own}");
    let cancelled = task_request(&client, &url, 7, "alice", "tasks/cancel", json!({ "taskId": task })).await;
    assert!(cancelled.get("result").is_some(), "{cancelled}");
    let own = task_request(&client, &url, 8, "alice", "tasks/get", json!({ "taskId": task })).await;
    assert_eq!(own["result"]["status"], "cancelled", "{own}");

    // A call whose outcome the control plane settles is never made a task: the client's
    // capabilities reach the downstream without the extension, and the answer comes in full.
    std::fs::write(state.path().join("settle-all"), b"").unwrap();
    let settled = json!({ "name": "slow_compute", "arguments": { "seconds": 0, "label": "settled" } });
    let answer = task_request(&client, &url, 9, "alice", "tools/call", settled).await;
    assert_eq!(answer["result"]["resultType"], "complete", "{answer}");
    assert_eq!(answer["result"]["content"][0]["text"], "computed settled after 0 s", "{answer}");
}

/// A GET resuming `session`'s stream from `last_event_id`.
async fn resume(client: &reqwest::Client, url: &str, session: &str, last_event_id: &str) -> reqwest::Response {
    client
        .get(url)
        .header("Accept", "text/event-stream")
        .header("Mcp-Session-Id", session)
        .header("Last-Event-ID", last_event_id)
        .send()
        .await
        .expect("the gateway answers")
}

/// Issue #55: a call's answer reaches the client that resumes for it. The call's stream
/// breaks after its priming event (a relaying replica killed, a proxy restarted) while the
/// call runs on; its answer is sent into the broken stream. rmcp forgot the stream with its
/// answer and answered the resume 200 with an empty stream — which the Python SDK takes as
/// "reconnect later", forever. The gateway keeps the answer: the resume gets it, once. A
/// `Last-Event-ID` naming no stream of the session is refused (410), not answered empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_stream_broke_is_answered_to_the_client_that_resumes_it() {
    let state = State::new();
    state.allow_mutations();
    let (_gateway, url) = start(&state);
    let client = reqwest::Client::new();
    let session = crate::sharing::session(&client, &url, "resumer").await;

    // `test_reconnection` answers 200 ms after it is called: the stream breaks before.
    let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "test_reconnection", "arguments": {}}});
    let mut broken = post(&client, &url, Some(&session), &call).await;
    assert_eq!(broken.status(), 200);
    let mut text = String::new();
    read_until(&mut broken, &mut text, "\n\n").await;
    let primed = text.lines().find_map(|l| l.strip_prefix("id: ")).map(str::to_owned);
    let primed = primed.unwrap_or_else(|| panic!("a priming event with an id: {text:?}"));
    drop(broken);

    // The call ran and was answered, into the broken stream.
    let answered = crate::harness::wait_until(ANSWER, || {
        state.events().iter().any(|e| e.starts_with("forwarded test_reconnection"))
    });
    assert!(answered, "the call was not answered: {:?}", state.events());

    let mut resumed = resume(&client, &url, &session, &primed).await;
    assert_eq!(resumed.status(), 200);
    let mut text = String::new();
    let read = async {
        while let Some(chunk) = resumed.chunk().await.expect("the resumed stream reads") {
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
    };
    tokio::time::timeout(ANSWER, read).await.unwrap_or_else(|_| panic!("the resumed stream did not end: {text:?}"));
    let answers: Vec<Value> = messages(&text).into_iter().filter(|m| m["id"] == 5).collect();
    assert_eq!(answers.len(), 1, "the answer, once: {text:?} (resumed from {primed})");
    let said = answers[0]["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert_eq!(said, "Reconnection test completed", "{}", answers[0]);

    // A stream the session never had: a clear refusal.
    let unknown = resume(&client, &url, &session, "0/999999").await;
    assert_eq!(unknown.status(), 410);
    let refusal: Value = serde_json::from_str(&unknown.text().await.unwrap()).unwrap();
    assert!(refusal["error"]["message"].as_str().is_some_and(|m| m.contains("no stream of this session")), "{refusal}");
}
