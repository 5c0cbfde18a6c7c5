//! `[downstream] sharing = "gateway"` (the fixture's `--sharing gateway`): every HTTP session
//! of the gateway is served by one downstream run, and still nothing of one session reaches
//! another — progress goes to the call it reports on (each client's own token, though they
//! are equal), a server→client request that cannot be told to belong to one of several
//! sessions in flight is refused, never guessed, and a session's per-session requests are
//! not forwarded. The isolation suites of `http.rs` run in both modes.

use crate::harness::{ANSWER, RawGateway, State, alive, conformance_fixture, path_text, wait_until};
use crate::http::{messages, post, read_until};
use serde_json::{Value, json};

/// The fixture on HTTP with `sharing`, in front of the conformance fixture (`--no-subscribe`
/// unless `subscribe`): the gateway and its endpoint's URL.
pub(crate) fn start_sharing(state: &State, sharing: &str, subscribe: bool) -> (RawGateway, String) {
    let mut downstream = vec![path_text(&conformance_fixture())];
    if !subscribe {
        downstream.push("--no-subscribe".to_owned());
    }
    let gateway = RawGateway::start(state, &["--http", "127.0.0.1:0", "--sharing", sharing], &downstream);
    let file = state.path().join("listen-addr");
    let mut addr = String::new();
    let bound = wait_until(ANSWER, || {
        addr = std::fs::read_to_string(&file).unwrap_or_default();
        !addr.is_empty()
    });
    assert!(bound, "the fixture did not report its address");
    (gateway, format!("http://{addr}/mcp"))
}

/// A 2025-11-25 session of the client `name`, initialized: its id.
pub(crate) async fn session(client: &reqwest::Client, url: &str, name: &str) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
        "capabilities": {"elicitation": {}}, "clientInfo": {"name": name, "version": "1"}}});
    let answer = post(client, url, None, &init).await;
    assert_eq!(answer.status(), 200, "{name}'s initialize");
    let id = answer.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(post(client, url, Some(&id), &initialized).await.status(), 202);
    id
}

fn call(id: u64, tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": arguments}})
}

/// Read `response` until one of `needles` is in `text` (bounded).
async fn read_until_any(response: &mut reqwest::Response, text: &mut String, needles: &[&str]) {
    let read = async {
        while !needles.iter().any(|n| text.contains(n)) {
            let Ok(Some(chunk)) = response.chunk().await else { return };
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
    };
    tokio::time::timeout(ANSWER, read)
        .await
        .unwrap_or_else(|_| panic!("none of {needles:?} within {ANSWER:?}: {text}"));
}

/// The pids of the processes under `root` (its children, theirs, …) whose command line
/// contains `needle`.
fn descendants(root: u32, needle: &str) -> Vec<u32> {
    let mut parents = std::collections::HashMap::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // `pid (comm) state ppid …`: the comm may hold spaces, the last `)` ends it.
        let ppid = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
        if let Some(ppid) = ppid {
            parents.insert(pid, ppid);
        }
    }
    let under = |mut pid: u32| {
        while let Some(&parent) = parents.get(&pid) {
            if parent == root {
                return true;
            }
            pid = parent;
        }
        false
    };
    parents
        .keys()
        .copied()
        .filter(|pid| under(*pid))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).replace('\0', " ").contains(needle))
        })
        .collect()
}

/// Three sessions, each served: one downstream process for all of them (in session mode,
/// three).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_session_is_served_by_one_downstream_process() {
    for (sharing, runs) in [("gateway", 1), ("session", 3)] {
        let state = State::new();
        state.allow_mutations();
        let (gateway, url) = start_sharing(&state, sharing, false);
        let client = reqwest::Client::new();
        for name in ["alice", "bob", "carol"] {
            let id = session(&client, &url, name).await;
            let answer = post(&client, &url, Some(&id), &call(2, "test_simple_text", json!({}))).await;
            let text = answer.text().await.unwrap();
            assert!(text.contains("This is a simple text response"), "{sharing}: {name} is served: {text}");
        }
        let fixtures = descendants(gateway.child.id(), "conformance_fixture");
        assert_eq!(fixtures.len(), runs, "{sharing}: downstream processes {fixtures:?}");
        // The gateway's orderly end stops every run, the shared one included.
        gateway.signal("TERM");
        let gone = wait_until(ANSWER, || fixtures.iter().all(|pid| !alive(*pid)));
        assert!(gone, "{sharing}: a downstream outlived the gateway: {fixtures:?}");
    }
}

/// Two sessions call the progress tool at the same moment, each with progress token 1: each
/// stream carries exactly its own three notifications, under its own token, and its own
/// answer — the downstream saw two different tokens (the gateway's) and two request ids.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn equal_progress_tokens_of_two_sessions_each_reach_their_own_call() {
    let state = State::new();
    state.allow_mutations();
    let (_gateway, url) = start_sharing(&state, "gateway", false);
    let client = reqwest::Client::new();
    let (alice, bob) = (session(&client, &url, "alice").await, session(&client, &url, "bob").await);
    let progress = |id: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "test_tool_with_progress",
            "arguments": {}, "_meta": {"progressToken": 1}}})
    };
    for round in 0..5 {
        let message = progress(10 + round);
        let (a, b) =
            tokio::join!(post(&client, &url, Some(&alice), &message), post(&client, &url, Some(&bob), &message));
        for (who, mut response) in [("alice", a), ("bob", b)] {
            let mut text = String::new();
            read_until(&mut response, &mut text, &format!("\"id\":{}", 10 + round)).await;
            let all = messages(&text);
            let notes: Vec<&Value> = all.iter().filter(|m| m["method"] == "notifications/progress").collect();
            assert_eq!(notes.len(), 3, "{who}, round {round}: its own three, no other's: {text}");
            assert!(notes.iter().all(|n| n["params"]["progressToken"] == 1), "{who}: its own token: {text}");
            let answers: Vec<&Value> = all.iter().filter(|m| m.get("result").is_some()).collect();
            assert_eq!(answers.len(), 1, "{who}: {text}");
        }
    }
}

/// A question the downstream asks while the run serves two sessions cannot be told to be one
/// of theirs (a call that ended may still be asking): refused, asked of no one. Once the run
/// serves one session only, it is asked of that one, on its call's stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_while_two_sessions_are_in_flight_is_refused_not_guessed() {
    let state = State::new();
    state.allow_mutations();
    let (_gateway, url) = start_sharing(&state, "gateway", false);
    let client = reqwest::Client::new();
    let (alice, bob) = (session(&client, &url, "alice").await, session(&client, &url, "bob").await);

    // Bob's slow call is in flight (its answer stream open: the gateway took it) while
    // Alice's call asks.
    let slow = call(5, "slow_compute", json!({ "seconds": 3, "label": "bob's" }));
    let bobs = post(&client, &url, Some(&bob), &slow).await;
    let bobs = tokio::spawn(async move { bobs.text().await.unwrap() });
    let mut asked = post(&client, &url, Some(&alice), &call(6, "test_elicitation", json!({"message": "who?"}))).await;
    let mut text = String::new();
    read_until(&mut asked, &mut text, "\"id\":6").await;
    assert!(!text.contains("elicitation/create"), "asked of Alice though Bob was in flight: {text}");
    assert!(text.contains("cannot be told to belong to one of them"), "{text}");
    let bobs = bobs.await.unwrap();
    assert!(bobs.contains("computed bob's after 3 s"), "{bobs}");
    assert!(!bobs.contains("elicitation/create"), "asked of Bob, whose call did not ask: {bobs}");

    // Bob's session ends: the run serves Alice alone, who is asked, and answers. (The detach
    // runs a moment after the DELETE is answered: a refusal meanwhile is retried, bounded.)
    let ended = client.delete(&url).header("Mcp-Session-Id", &bob).send().await.unwrap();
    assert!(ended.status().is_success(), "{}", ended.status());
    let (mut asked, mut text) = (None, String::new());
    for id in 7..57 {
        let mut response =
            post(&client, &url, Some(&alice), &call(id, "test_elicitation", json!({"message": "who?"}))).await;
        text.clear();
        read_until_any(&mut response, &mut text, &["elicitation/create", "cannot be told"]).await;
        if text.contains("elicitation/create") {
            asked = Some((id, response));
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let (id, mut asked) = asked.unwrap_or_else(|| panic!("Alice, alone, was never asked: {text}"));
    let question = messages(&text).into_iter().find(|m| m["method"] == "elicitation/create").unwrap();
    let accept = json!({"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept",
        "content": {"username": "ada", "email": "ada@example.org"}}});
    assert_eq!(post(&client, &url, Some(&alice), &accept).await.status(), 202);
    read_until(&mut asked, &mut text, &format!("\"id\":{id}")).await;
    assert!(text.contains("ada"), "{text}");
}

/// A shared run keeps no client's session state: a session's `logging/setLevel` and
/// `resources/subscribe` would set it for every client, so the gateway answers them with an
/// error and never forwards them — the run's own subscriptions stay empty, so no resource
/// update of one client's subscription can reach another. Calls are served as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_session_requests_are_not_forwarded_to_a_shared_run() {
    let state = State::new();
    state.allow_mutations();
    let (_gateway, url) = start_sharing(&state, "gateway", true);
    let client = reqwest::Client::new();
    let alice = session(&client, &url, "alice").await;
    for (method, params) in [
        ("logging/setLevel", json!({"level": "debug"})),
        ("resources/subscribe", json!({"uri": "test://watched-resource"})),
        ("resources/unsubscribe", json!({"uri": "test://watched-resource"})),
        ("vendor/remember", json!({"key": "alice's"})),
    ] {
        let request = json!({"jsonrpc": "2.0", "id": 3, "method": method, "params": params});
        let text = post(&client, &url, Some(&alice), &request).await.text().await.unwrap();
        assert!(text.contains("per-session state") && text.contains("not forwarded"), "{method}: {text}");
    }
    let text = post(&client, &url, Some(&alice), &call(4, "test_simple_text", json!({}))).await.text().await.unwrap();
    assert!(text.contains("This is a simple text response"), "{text}");
    // The same requests on a run of its own are the session's to make.
    let state = State::new();
    let (_gateway, url) = start_sharing(&state, "session", true);
    let bob = session(&client, &url, "bob").await;
    let request = json!({"jsonrpc": "2.0", "id": 3, "method": "resources/subscribe", "params": {"uri": "test://watched-resource"}});
    let text = post(&client, &url, Some(&bob), &request).await.text().await.unwrap();
    assert!(text.contains("\"result\""), "{text}");
}

/// Two sessions' calls with the same request id on one shared run: Alice cancels hers, and
/// only hers — Bob's call of the same id goes on and is answered in full.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancellation_cancels_only_the_cancelling_session_s_call() {
    let state = State::new();
    state.allow_mutations();
    let (_gateway, url) = start_sharing(&state, "gateway", false);
    let client = reqwest::Client::new();
    let (alice, bob) = (session(&client, &url, "alice").await, session(&client, &url, "bob").await);
    let slow = |label: &str| call(9, "slow_compute", json!({ "seconds": 2, "label": label }));
    // Both calls taken (their answer streams open) before Alice cancels hers.
    let bobs = post(&client, &url, Some(&bob), &slow("bob's")).await;
    let alices = post(&client, &url, Some(&alice), &slow("alice's")).await;
    let bobs = tokio::spawn(async move { bobs.text().await.unwrap() });
    let alices = tokio::spawn(async move { alices.text().await.unwrap_or_default() });
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9, "reason": "changed my mind"}});
    assert_eq!(post(&client, &url, Some(&alice), &cancel).await.status(), 202);
    let bobs = bobs.await.unwrap();
    assert!(bobs.contains("computed bob's after 2 s"), "Bob's call of the same id is answered: {bobs}");
    let alices = tokio::time::timeout(ANSWER, alices).await.expect("Alice's stream ends").unwrap();
    assert!(!alices.contains("computed alice's"), "Alice's cancelled call is not answered: {alices}");
}

/// Clients of both generations on one shared run — a 2025-11-25 session and a 2026-07-28
/// stateless client, in either order — are each answered in their own generation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_run_serves_clients_of_both_generations() {
    for modern_first in [true, false] {
        let state = State::new();
        state.allow_mutations();
        let (gateway, url) = start_sharing(&state, "gateway", false);
        let client = reqwest::Client::new();
        let simple = json!({ "name": "test_simple_text", "arguments": {} });
        let modern = || crate::http::stateless(&client, &url, 3, "bob", "tools/call", simple.clone());
        let mut answers = Vec::new();
        if modern_first {
            answers.push(modern().await.text().await.unwrap());
        }
        let alice = session(&client, &url, "alice").await;
        answers.push(
            post(&client, &url, Some(&alice), &call(2, "test_simple_text", json!({}))).await.text().await.unwrap(),
        );
        if !modern_first {
            answers.push(modern().await.text().await.unwrap());
        }
        for text in &answers {
            assert!(text.contains("This is a simple text response"), "modern first: {modern_first}: {text}");
        }
        let stateless = answers.iter().find(|t| t.contains("\"id\":3")).unwrap();
        assert!(stateless.contains("\"resultType\":\"complete\""), "the 2026-07-28 shape: {stateless}");
        let legacy = answers.iter().find(|t| t.contains("\"id\":2")).unwrap();
        assert!(!legacy.contains("resultType"), "the 2025-11-25 shape: {legacy}");
        assert_eq!(descendants(gateway.child.id(), "conformance_fixture").len(), 1);
    }
}
