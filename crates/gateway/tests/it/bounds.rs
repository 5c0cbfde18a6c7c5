//! Issue #19, resource bounds: what a client can make the gateway hold is bounded. Each test
//! drives one bound past its limit over the real gateway in front of a real downstream that
//! keeps calls open (the rmcp conformance fixture's `test_elicitation` waits for the client's
//! answer), and checks the excess gets its own clear error with its own id, the gateway's
//! resident memory stays bounded, and the rest keeps being served.

use crate::harness::{ANSWER, RawGateway, State, conformance_fixture, path_text, wait_until};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// Forwarded requests in flight on one channel (`routes::MAX_IN_FLIGHT`).
const IN_FLIGHT: u64 = 256;
/// Requests from a downstream waiting for the client on one channel (`routes::MAX_PENDING_ASKS`).
const ASKS: u64 = 256;
/// Requests a stdio client may have open at once (`frame::MAX_OPEN_REQUESTS`).
const OPEN: u64 = 512;
/// Growth of the gateway's resident set allowed across thousands of refused requests:
/// generous (allocator slack, lazily touched pages), far below what keeping them would take.
const RSS_GROWTH_KB: u64 = 16 * 1024;

/// The gateway process's resident set (`VmRSS`), in kB.
pub fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the gateway's /proc status");
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("a VmRSS line");
    line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).expect("VmRSS in kB")
}

fn elicitation_call(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "test_elicitation",
        "arguments": {"message": format!("call {id}")}, "_meta": {"progressToken": format!("progress-{id}")}}})
}

fn accept(elicitation: &Value) -> Value {
    json!({"jsonrpc": "2.0", "id": elicitation["id"], "result": {"action": "accept",
        "content": {"username": "ada", "email": "ada@example.org"}}})
}

fn lines(messages: impl IntoIterator<Item = Value>) -> Vec<u8> {
    let mut bytes = Vec::new();
    for message in messages {
        serde_json::to_writer(&mut bytes, &message).expect("serialise");
        bytes.push(b'\n');
    }
    bytes
}

/// Read frames until `done` says so (bounded by `within`); every frame is handed to `done`.
fn read_until(gateway: &mut RawGateway, within: Duration, what: &str, mut done: impl FnMut(Value) -> bool) {
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let frame = gateway.next(left).unwrap_or_else(|| panic!("{what}: not within {within:?}"));
        if done(frame) {
            return;
        }
    }
}

/// Fill the channel with `IN_FLIGHT` calls from `first`, each waiting on its elicitation:
/// the elicitations the client was sent.
fn fill(gateway: &mut RawGateway, first: u64) -> Vec<Value> {
    gateway.send_bytes(&lines((first..first + IN_FLIGHT).map(elicitation_call)));
    let mut asked = Vec::new();
    read_until(gateway, ANSWER, "every call's elicitation", |frame| {
        assert!(frame.get("error").is_none(), "no call of the first {IN_FLIGHT} is refused: {frame}");
        if frame["method"] == "elicitation/create" {
            asked.push(frame);
        }
        asked.len() == IN_FLIGHT as usize
    });
    asked
}

/// The error of a refused request, checked to be the in-flight bound's.
fn assert_busy(frame: &Value) {
    assert_eq!(frame["error"]["code"], -32603, "{frame}");
    let message = frame["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("too many requests in flight") && message.contains("256"), "{frame}");
    assert_eq!(frame["error"]["data"]["limit"], IN_FLIGHT, "{frame}");
}

/// The error of an excess request sent in a burst: the in-flight bound's, or, when the burst
/// outruns the refusals, the bound on requests open on the connection (`frame.rs`, 512) —
/// either way refused at once, with its id, and named.
fn assert_refused_by_a_bound(frame: &Value) {
    let message = frame["error"]["message"].as_str().unwrap_or_default();
    if message.contains("too many requests open on this connection") {
        assert_eq!(frame["error"]["code"], -32603, "{frame}");
        assert_eq!(frame["error"]["data"]["limit"], OPEN, "{frame}");
    } else {
        assert_busy(frame);
    }
}

/// Pending requests per session and the progress-token map (`routes.rs`): one stdio client
/// with 256 calls in flight gets the 257th — and 3,000 more — refused at once with its own
/// id; `ping` and the control tools are still answered; memory stays put; once the calls
/// are answered the table is empty again (another 256 fit, and no more).
#[test]
fn past_256_forwarded_requests_in_flight_each_is_refused_with_its_id_and_memory_stays_bounded() {
    let state = State::new();
    state.allow_mutations();
    let mut gateway = RawGateway::start(&state, &[], &[path_text(&conformance_fixture())]);
    let pid = gateway.child.id();
    let answer = gateway.initialize_with(json!({"elicitation": {}}));
    assert!(answer.get("result").is_some(), "{answer}");

    let asked = fill(&mut gateway, 1000);
    let before = rss_kb(pid);
    let excess = 5000..8000u64;
    gateway.send_bytes(&lines(excess.clone().map(elicitation_call)));
    let mut refused = BTreeSet::new();
    read_until(&mut gateway, ANSWER, "every excess call's refusal", |frame| {
        let id = frame["id"].as_u64().unwrap_or_else(|| panic!("only refusals now: {frame}"));
        assert!(excess.contains(&id), "{frame}");
        assert_refused_by_a_bound(&frame);
        assert!(refused.insert(id), "answered twice: {frame}");
        refused.len() == excess.clone().count()
    });
    let after = rss_kb(pid);
    eprintln!("gateway VmRSS: {before} kB with {IN_FLIGHT} in flight, {after} kB after 3000 refused");
    assert!(after < before + RSS_GROWTH_KB, "VmRSS grew from {before} kB to {after} kB");

    // Still served while full: what is not forwarded.
    let pong = gateway.request(2, "ping", json!({}));
    assert_eq!(pong["result"], json!({}), "{pong}");
    let context = gateway.request(3, "tools/call", json!({"name": "fleet_get_runtime_context", "arguments": {}}));
    assert_eq!(context["result"]["isError"], json!(false), "{context}");

    // Answered, the calls leave the table (and their progress tokens with it).
    gateway.send_bytes(&lines(asked.iter().map(accept)));
    let mut answered = BTreeSet::new();
    read_until(&mut gateway, ANSWER, "every call's answer", |frame| {
        if let Some(id) = frame["id"].as_u64().filter(|_| frame.get("method").is_none()) {
            let text = frame["result"]["content"][0]["text"].as_str().unwrap_or_default();
            assert!(text.contains("ada"), "{frame}");
            answered.insert(id);
        }
        answered.len() == IN_FLIGHT as usize
    });
    let asked = fill(&mut gateway, 10_000);
    gateway.send(&elicitation_call(20_000));
    read_until(&mut gateway, ANSWER, "the refusal past the bound again", |frame| {
        if frame["id"] == 20_000 {
            assert_busy(&frame);
            return true;
        }
        false
    });
    gateway.send_bytes(&lines(asked.iter().map(accept)));
    gateway.close_stdin();
    assert_eq!(gateway.exit_code(ANSWER), Some(0), "an orderly shutdown");
}

/// Requests a stdio client has open (`frame.rs`): a client that pipelines requests the
/// gateway holds before forwarding (here: waiting for a downstream that never connects)
/// gets those past 512 refused at once, each with its own id; the open ones are answered
/// when their wait ends, and the client is served again.
#[test]
fn past_512_open_requests_of_a_stdio_client_each_is_refused_with_its_id() {
    let state = State::new();
    // A downstream that never answers `initialize`: every forwarded request waits for it,
    // bounded by the gateway's 10 s attach wait.
    let mut gateway = RawGateway::start(&state, &[], &["sleep".to_owned(), "120".to_owned()]);
    let pid = gateway.child.id();
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "pipeliner", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let request = |id: u64| json!({"jsonrpc": "2.0", "id": id, "method": "resources/list", "params": {"_meta": meta}});
    let pong = gateway.request(0, "ping", json!({}));
    assert_eq!(pong["result"], json!({}), "up: {pong}");
    let before = rss_kb(pid);
    let total = OPEN + 1500;
    gateway.send_bytes(&lines((1..=total).map(request)));
    let mut refused = BTreeSet::new();
    read_until(&mut gateway, Duration::from_secs(9), "every refusal past the bound, before any wait ends", |frame| {
        assert_eq!(frame["error"]["code"], -32603, "{frame}");
        let message = frame["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("too many requests open on this connection (512)"), "{frame}");
        assert_eq!(frame["error"]["data"]["limit"], OPEN, "{frame}");
        assert!(refused.insert(frame["id"].as_u64().expect("its own id")), "{frame}");
        refused.len() as u64 == total - OPEN
    });
    assert_eq!(refused, (OPEN + 1..=total).collect(), "exactly those past the bound, in order of arrival");
    let after = rss_kb(pid);
    eprintln!("gateway VmRSS: {before} kB before, {after} kB with {OPEN} open and 1500 refused");
    assert!(after < before + RSS_GROWTH_KB, "VmRSS grew from {before} kB to {after} kB");

    let mut waited = BTreeSet::new();
    read_until(&mut gateway, ANSWER, "the open requests' answers", |frame| {
        let message = frame["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("resources/list"), "the downstream's unavailability: {frame}");
        assert!(waited.insert(frame["id"].as_u64().expect("its own id")), "{frame}");
        waited.len() as u64 == OPEN
    });
    assert_eq!(waited, (1..=OPEN).collect());
    let pong = gateway.request(total + 1, "ping", json!({"_meta": meta}));
    assert_eq!(pong["result"], json!({}), "served again: {pong}");
}

/// A new Streamable HTTP session that declares elicitation: its id.
async fn open_session(client: &reqwest::Client, url: &str, name: &str) -> String {
    open_session_with(client, url, name, json!({"elicitation": {}})).await
}

/// A new Streamable HTTP session that declares `capabilities`: its id.
async fn open_session_with(client: &reqwest::Client, url: &str, name: &str, capabilities: Value) -> String {
    use crate::http::post;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
        "capabilities": capabilities, "clientInfo": {"name": name, "version": "1"}}});
    let answer = post(client, url, None, &init).await;
    assert_eq!(answer.status(), 200);
    let session = answer.headers()["mcp-session-id"].to_str().expect("a session id").to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(post(client, url, Some(&session), &initialized).await.status(), 202);
    session
}

/// The same bound over Streamable HTTP: one session with 256 calls in flight gets each of
/// 2,000 more refused with its id, while another session's calls are forwarded and
/// answered; memory stays put; the first session's calls are answered when it answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_past_256_in_flight_in_one_session_each_is_refused_and_another_session_is_served() {
    use crate::http::{messages, post};
    let state = State::new();
    state.allow_mutations();
    let (gateway, url) = crate::http::start(&state);
    let pid = gateway.child.id();
    let client = reqwest::Client::new();
    let full = open_session(&client, &url, "full").await;

    // Each call's answer stream read by a task of its own: the gateway puts a question on
    // the stream of the session's oldest call that can ask, so one stream may carry many.
    let (frames, mut received) = tokio::sync::mpsc::unbounded_channel::<Value>();
    for id in 1000..1000 + IN_FLIGHT {
        let mut response = post(&client, &url, Some(&full), &elicitation_call(id)).await;
        assert_eq!(response.status(), 200, "call {id}");
        let frames = frames.clone();
        tokio::spawn(async move {
            let mut pending = String::new();
            while let Ok(Some(chunk)) = response.chunk().await {
                pending.push_str(&String::from_utf8_lossy(&chunk));
                let Some(end) = pending.rfind('\n') else { continue };
                let complete: String = pending.drain(..=end).collect();
                for message in messages(&complete) {
                    let _ = frames.send(message);
                }
            }
        });
    }
    let mut next = async || {
        tokio::time::timeout(ANSWER, received.recv()).await.ok().flatten().expect("a frame on a call's stream in time")
    };
    let mut asked = Vec::new();
    while asked.len() < IN_FLIGHT as usize {
        let frame = next().await;
        assert_eq!(frame["method"], "elicitation/create", "only questions while the calls wait: {frame}");
        asked.push(frame);
    }

    let before = rss_kb(pid);
    let mut refusals = tokio::task::JoinSet::new();
    for batch in 0..50u64 {
        let (client, url, full) = (client.clone(), url.clone(), full.clone());
        refusals.spawn(async move {
            for id in (5000 + batch * 40)..(5000 + (batch + 1) * 40) {
                let response = post(&client, &url, Some(&full), &elicitation_call(id)).await;
                assert_eq!(response.status(), 200, "call {id}");
                let text = response.text().await.expect("the refusal's body");
                let answer = messages(&text).into_iter().find(|m| m["id"] == id);
                assert_busy(&answer.unwrap_or_else(|| panic!("no answer with id {id}: {text}")));
            }
        });
    }
    while let Some(done) = refusals.join_next().await {
        done.expect("every refusal as expected");
    }
    let after = rss_kb(pid);
    eprintln!("gateway VmRSS over HTTP: {before} kB with {IN_FLIGHT} in flight, {after} kB after 2000 refused");
    assert!(after < before + RSS_GROWTH_KB, "VmRSS grew from {before} kB to {after} kB");

    let other = open_session(&client, &url, "other").await;
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "test_simple_text", "arguments": {}}});
    let response = post(&client, &url, Some(&other), &call).await;
    assert_eq!(response.status(), 200);
    let text = response.text().await.expect("the other session's answer");
    let answer = messages(&text).into_iter().find(|m| m["id"] == 7).unwrap_or_else(|| panic!("{text}"));
    assert!(answer["result"]["content"][0]["text"].as_str().is_some_and(|t| t.contains("simple text")), "{answer}");

    for elicitation in &asked {
        assert_eq!(post(&client, &url, Some(&full), &accept(elicitation)).await.status(), 202);
    }
    let mut answered = BTreeSet::new();
    while answered.len() < IN_FLIGHT as usize {
        let frame = next().await;
        assert!(frame["result"]["content"][0]["text"].as_str().is_some_and(|t| t.contains("ada")), "{frame}");
        answered.insert(frame["id"].as_u64().expect("a call's id"));
    }
    assert_eq!(answered, (1000..1000 + IN_FLIGHT).collect());
}

/// The SSE body of one POST, read message by message (every wait bounded).
struct SseStream {
    response: reqwest::Response,
    pending: String,
    ready: std::collections::VecDeque<Value>,
}

impl SseStream {
    fn new(response: reqwest::Response) -> Self {
        assert_eq!(response.status(), 200);
        Self { response, pending: String::new(), ready: std::collections::VecDeque::new() }
    }

    async fn next(&mut self) -> Value {
        let read = async {
            while self.ready.is_empty() {
                let chunk = self.response.chunk().await.expect("the stream reads").expect("the stream is open");
                self.pending.push_str(&String::from_utf8_lossy(&chunk));
                let Some(end) = self.pending.rfind('\n') else { continue };
                let complete: String = self.pending.drain(..=end).collect();
                self.ready.extend(crate::http::messages(&complete));
            }
            self.ready.pop_front().expect("a message")
        };
        tokio::time::timeout(ANSWER, read).await.expect("a message on the stream in time")
    }
}

/// A `tools/call` of the conformance fixture's `ask_many`: `count` `roots/list` at once.
fn ask_many(id: u64, count: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "ask_many",
        "arguments": {"count": count}, "_meta": {"progressToken": format!("asks-{id}")}}})
}

/// Read `call`'s stream until its answer: the `roots/list` questions it carried (each checked
/// to be at most `cap` so far) and the refusals the downstream reported as progress.
async fn questions_until(stream: &mut SseStream, wanted: usize, refusals: usize) -> (Vec<Value>, usize) {
    let (mut asked, mut refused) = (Vec::new(), 0);
    while asked.len() < wanted || refused < refusals {
        let frame = stream.next().await;
        match frame["method"].as_str() {
            Some("roots/list") => {
                asked.push(frame);
                assert!(asked.len() <= ASKS as usize, "never more than {ASKS} questions waiting");
            }
            Some("notifications/progress") => {
                let message = frame["params"]["message"].as_str().unwrap_or_default();
                assert!(
                    message.contains("too many requests from this server are waiting for the client's answer")
                        && message.contains("(256)"),
                    "the refusal names the bound: {frame}"
                );
                refused += 1;
            }
            _ => panic!("only questions and refusals while the call waits: {frame}"),
        }
    }
    (asked, refused)
}

/// Answer every question of `asked` with no roots.
async fn answer_roots(client: &reqwest::Client, url: &str, session: &str, asked: &[Value]) {
    use crate::http::post;
    for question in asked {
        let answer = json!({"jsonrpc": "2.0", "id": question["id"], "result": {"roots": []}});
        assert_eq!(post(client, url, Some(session), &answer).await.status(), 202);
    }
}

/// The text of the answer that ends `stream`, checked to be call `id`'s.
async fn call_answer(stream: &mut SseStream, id: u64) -> String {
    let frame = stream.next().await;
    assert_eq!(frame["id"], id, "{frame}");
    frame["result"]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("a text answer: {frame}")).to_owned()
}

/// Requests a downstream sends toward the client (`routes::MAX_PENDING_ASKS`): a downstream
/// that fires 456 `roots/list` during one call while the client answers none gets 256 passed
/// on and the other 200 refused at once, each with an error naming the bound; memory stays
/// put; another session's own questions are passed on meanwhile; once the client answers,
/// 256 fit again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_past_256_downstream_requests_waiting_for_the_client_each_is_refused_to_the_downstream() {
    use crate::http::post;
    let state = State::new();
    state.allow_mutations();
    let (gateway, url) = crate::http::start(&state);
    let pid = gateway.child.id();
    let client = reqwest::Client::new();
    let asking = open_session_with(&client, &url, "asking", json!({"roots": {}})).await;

    let before = rss_kb(pid);
    let excess = 200;
    let mut call = SseStream::new(post(&client, &url, Some(&asking), &ask_many(10, ASKS + excess)).await);
    let (asked, refused) = questions_until(&mut call, ASKS as usize, excess as usize).await;
    assert_eq!(refused, excess as usize);
    let after = rss_kb(pid);
    eprintln!("gateway VmRSS: {before} kB before, {after} kB with {ASKS} questions waiting and {excess} refused");
    assert!(after < before + RSS_GROWTH_KB, "VmRSS grew from {before} kB to {after} kB");

    // Another session's downstream asks its own client meanwhile: the bound is per attachment.
    let other = open_session_with(&client, &url, "other", json!({"roots": {}})).await;
    let mut its_call = SseStream::new(post(&client, &url, Some(&other), &ask_many(20, 2)).await);
    let (its_questions, _) = questions_until(&mut its_call, 2, 0).await;
    answer_roots(&client, &url, &other, &its_questions).await;
    assert_eq!(call_answer(&mut its_call, 20).await, "answered 2, refused 0");

    // Answered, the questions free their places: 256 fit again, and no more.
    answer_roots(&client, &url, &asking, &asked).await;
    assert_eq!(call_answer(&mut call, 10).await, format!("answered {ASKS}, refused {excess}"));
    let mut again = SseStream::new(post(&client, &url, Some(&asking), &ask_many(30, ASKS + 1)).await);
    let (asked, refused) = questions_until(&mut again, ASKS as usize, 1).await;
    assert_eq!(refused, 1);
    answer_roots(&client, &url, &asking, &asked).await;
    assert_eq!(call_answer(&mut again, 30).await, format!("answered {ASKS}, refused 1"));
}

/// Notifications a full queue dropped in `direction` so far (the fixture's observer logs each).
fn dropped(state: &State, direction: &str) -> usize {
    let line = format!("observed notification dropped {direction}");
    state.events().iter().filter(|l| **l == line).count()
}

/// Notifications to a client that stops reading (`outbox.rs`, to the client): a downstream
/// floods 5,000 log notifications of 4 KiB while the client reads nothing; the gateway
/// queues at most 256, drops and counts the rest, and its memory stays put; once the client
/// reads again, the call's answer and `ping` are answered.
#[test]
fn a_client_that_stops_reading_gets_notifications_dropped_and_counted_and_is_answered_once_it_reads() {
    let state = State::new();
    state.allow_mutations();
    let mut gateway = RawGateway::start(&state, &[], &[path_text(&conformance_fixture())]);
    let pid = gateway.child.id();
    assert!(gateway.initialize().get("result").is_some());
    let before = rss_kb(pid);
    gateway.pause_reading(true);
    let flood = 5_000;
    gateway.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "flood_logging", "arguments": {"count": flood, "size": 4096}}}));
    // At most the queue, the writer's and the pipe's few hundred get through.
    let most = wait_until(ANSWER, || dropped(&state, "to_client") >= flood - 1000);
    assert!(most, "drops counted: {} of {flood}", dropped(&state, "to_client"));
    let after = rss_kb(pid);
    eprintln!("gateway VmRSS: {before} kB before, {after} kB with a client not reading {flood} notifications");
    assert!(after < before + RSS_GROWTH_KB, "VmRSS grew from {before} kB to {after} kB");

    gateway.pause_reading(false);
    read_until(&mut gateway, ANSWER, "the flooding call's answer", |frame| {
        if frame["id"] == 2 {
            assert_eq!(frame["result"]["content"][0]["text"], format!("flooded {flood}"), "{frame}");
            return true;
        }
        assert!(frame["method"].as_str().is_some_and(|m| m.starts_with("notifications/")), "{frame}");
        false
    });
    let pong = gateway.request(3, "ping", json!({}));
    assert_eq!(pong["result"], json!({}), "{pong}");
    let dropped = dropped(&state, "to_client");
    assert!(dropped < flood, "some were delivered: {dropped}");
}

/// Flood a downstream that has stopped reading (`stall_server.py`, in front of a fresh
/// gateway) with `flood` client notifications of `pad` bytes each, and check the bound: all
/// but at most `kept` are dropped and counted, the gateway's resident set grows by less
/// than `rss_allowance_kb`, the client is answered meanwhile, and once the downstream reads
/// again it receives exactly the ones not dropped.
fn flood_a_stalled_downstream(flood: usize, pad: usize, kept: usize, rss_allowance_kb: u64) {
    use crate::harness::{peers, python};
    let state = State::new();
    state.allow_mutations();
    let until = state.path().join("read-again");
    let stall = [path_text(&python()), path_text(&peers().join("tests/peers/stall_server.py"))];
    let mut gateway = RawGateway::start(&state, &[], &stall);
    let pid = gateway.child.id();
    assert!(gateway.initialize().get("result").is_some());
    let call = |name: &str, arguments: Value| json!({"name": name, "arguments": arguments});
    let stalled = gateway.request(2, "tools/call", call("stall", json!({"until": path_text(&until)})));
    assert_eq!(stalled["result"]["content"][0]["text"], "stalling", "{stalled}");

    let before = rss_kb(pid);
    let pad = "x".repeat(pad);
    gateway.send_bytes(&lines(
        (0..flood)
            .map(|i| json!({"jsonrpc": "2.0", "method": "notifications/x-flood", "params": {"n": i, "pad": pad}})),
    ));
    let most = wait_until(ANSWER, || dropped(&state, "to_downstream") >= flood - kept);
    assert!(most, "drops counted: {} of {flood}", dropped(&state, "to_downstream"));
    let after = rss_kb(pid);
    eprintln!("gateway VmRSS: {before} kB before, {after} kB with a downstream not reading {flood} notifications");
    assert!(after < before + rss_allowance_kb, "VmRSS grew from {before} kB to {after} kB");
    let pong = gateway.request(3, "ping", json!({}));
    assert_eq!(pong["result"], json!({}), "the client is served meanwhile: {pong}");

    std::fs::write(&until, b"").expect("let the downstream read again");
    let dropped = dropped(&state, "to_downstream");
    let mut id = 10;
    let all = wait_until(ANSWER, || {
        id += 1;
        let received = gateway.request(id, "tools/call", call("received", json!({})));
        let text = received["result"]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("{received}"));
        text.parse::<usize>().expect("a count") == flood - dropped
    });
    assert!(all, "the downstream got every notification not dropped ({} of {flood})", flood - dropped);
}

/// Notifications to a downstream that stops reading (`outbox.rs`, to the downstream): the
/// client floods 5,000 custom notifications of 4 KiB while the downstream reads nothing;
/// the gateway drops and counts all but a queue's worth, its memory stays put, it keeps
/// answering the client; once the downstream reads again it gets exactly the ones not
/// dropped, and answers.
#[test]
fn a_downstream_that_stops_reading_gets_notifications_dropped_and_counted_and_serves_once_it_reads() {
    flood_a_stalled_downstream(5_000, 4096, 1000, RSS_GROWTH_KB);
}

/// The same queue bounded by bytes (`outbox::MAX_QUEUED_NOTIFICATION_BYTES`, 8 MiB): 200
/// notifications of 200 KiB (40 MiB, under the count bound of 256) to a downstream that
/// reads nothing. A count alone would keep them all; the gateway keeps about 8 MiB of them,
/// drops and counts the rest, and its memory stays well below what keeping them would take.
#[test]
fn large_notifications_to_a_downstream_that_stops_reading_are_bounded_by_bytes() {
    // 8 MiB is about 40 of them; the downstream's pipe and rmcp's sink hold a few more.
    flood_a_stalled_downstream(200, 200 * 1024, 80, 2 * RSS_GROWTH_KB);
}
