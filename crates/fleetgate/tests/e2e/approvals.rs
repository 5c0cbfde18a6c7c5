//! Operator approval of one exact call (issue 30), end to end through a real gateway over
//! the forge fixture: a rule asks about `create_branch`; the call is held until the
//! operator answers through `fleetgate approvals`, the client then gets the downstream's
//! answer; a denied call is refused `approval_denied`; a call no one answers in time is
//! refused `approval_pending` with its request, and once approved the identical retry
//! passes once — a second retry, or other arguments, are not covered. A client that asked
//! for progress hears that the call is being decided while it is held.

use crate::support::{FleetDir, at, wait_until};
use crate::workflow::{Fleet, refused};
use serde_json::{Value, json};

const ASKING: &str = r#"independent_review = "off"

[approvals]
wait_seconds = 7
ttl_seconds = 600

[[rules]]
tool = "create_branch"
roles = ["author"]
decision = "ask"
"#;

fn branch(name: &str) -> Value {
    json!({ "branch": name })
}

/// The one pending request (bounded wait), as `approvals list` shows it.
pub(crate) fn pending(f: &FleetDir) -> Value {
    let mut found = Value::Null;
    let listed = wait_until(10.0, || {
        let list = f.cli(&["approvals", "list", "--json"]);
        found = list["approvals"].get(0).cloned().unwrap_or(Value::Null);
        found.is_object()
    });
    assert!(listed, "no request appeared");
    found
}

#[test]
fn a_held_call_goes_ahead_once_approved_and_only_that_exact_call() {
    let _serial = crate::support::serial();
    let mut fleet = Fleet::start(ASKING);

    // Held, then approved from the CLI: the client gets the downstream's own answer.
    let (client, f) = fleet.client_and_dir("author");
    let answered = std::thread::scope(|s| {
        let held = s.spawn(|| client.call("create_branch", at(branch("asked"))));
        let request = pending(f);
        assert_eq!((request["tool"].as_str(), request["state"].as_str()), (Some("create_branch"), Some("pending")));
        assert_eq!((request["profile"].as_str(), request["role"].as_str()), (Some("prgs-author"), Some("author")));
        assert_eq!(request["arguments"]["branch"], "asked", "the exact arguments: {request}");
        assert!(request["worker"].as_str().is_some_and(|w| w.starts_with("wrk-")), "{request}");
        let id = request["id"].as_str().unwrap();
        let approved = f.cli(&["approvals", "approve", id, "--reason", "ok to ship", "--json"]);
        assert_eq!(approved["state"], "approved", "{approved}");
        held.join().unwrap()
    });
    assert!(!answered.0, "the held call went ahead: {}", answered.1);
    assert!(fleet.git(&["branch", "--list", "asked"]).contains("asked"));

    // Denied: the held call is refused approval_denied.
    let (client, f) = fleet.client_and_dir("author");
    let denied = std::thread::scope(|s| {
        let held = s.spawn(|| client.call("create_branch", at(branch("denied"))));
        let id = pending(f)["id"].as_str().unwrap().to_owned();
        let answer = f.cli(&["approvals", "deny", &id, "--reason", "not this one", "--json"]);
        assert_eq!(answer["state"], "denied", "{answer}");
        // A request is answered once.
        let again = f.cli(&["approvals", "approve", &id, "--json"]);
        assert!(again["error"].as_str().is_some_and(|e| e.contains("not pending")), "{again}");
        held.join().unwrap()
    });
    refused(denied, "approval_denied", "not this one");
    assert!(fleet.git(&["branch", "--list", "denied"]).is_empty());

    // No answer in time: refused approval_pending, naming its request and the command; a
    // client that asked for progress heard, while it waited (7 s), that the call is being
    // decided (every 5 s).
    let (client, _) = fleet.client_and_dir("author");
    let step =
        json!({ "op": "call_tool", "name": "create_branch", "arguments": at(branch("later")), "progress": true });
    let r = client.step(step);
    let res = &r["result"];
    let text = res["content"][0]["text"].as_str().unwrap_or("").to_owned();
    let timed_out = refused(
        (res["isError"].as_bool().unwrap_or(false), text, res["structuredContent"].clone()),
        "approval_pending",
        "apr-",
    );
    let heard = client.step(json!({ "op": "notifications" }))["result"]["progress"].clone();
    assert!(heard.as_array().is_some_and(|p| !p.is_empty()), "no progress while held: {heard}");
    assert!(heard[0]["message"].as_str().unwrap_or("").contains("operator's approval"), "{heard}");
    assert!(timed_out.contains("fleetgate approvals approve apr-"), "{timed_out}");
    let id = pending(&fleet.f)["id"].as_str().unwrap().to_owned();
    assert!(timed_out.contains(&id), "{timed_out}");
    fleet.f.cli(&["approvals", "approve", &id, "--json"]);
    // Other arguments are another call: not covered (held, then refused).
    refused(fleet.call("author", "create_branch", branch("later-other")), "approval_pending", "apr-");
    // The identical retry passes, once.
    let (err, text, _) = fleet.call("author", "create_branch", branch("later"));
    assert!(!err, "the identical retry is covered: {text}");
    assert!(fleet.git(&["branch", "--list", "later"]).contains("later"));
    refused(fleet.call("author", "create_branch", branch("later")), "approval_pending", "apr-");

    // Every request, answer and use is in the audit log.
    let audit = fleet.f.cli(&["audit", "--json"]).to_string();
    for needle in ["approved by", "denied by", "used (once)", "approval_pending", "approval_denied", "ok to ship"] {
        assert!(audit.contains(needle), "{needle} audited");
    }
    fleet.stop();
}

/// A fleet whose inventory is blocked (a roster member that never starts), with
/// `fleet_inventory_blocked` overridable: the refusal carries an approval request; once
/// approved the identical call passes once, and only it.
#[test]
fn an_operator_overrides_one_refusal_for_one_exact_call() {
    let _serial = crate::support::serial();
    let extra = r#"independent_review = "off"

[approvals]
may_override = ["fleet_inventory_blocked"]

[[members]]
namespace = "gitea-ghost"
profile = "prgs-ghost"
role = "author"
"#;
    let mut fleet = Fleet::start(extra);
    let text = refused(fleet.call("author", "create_branch", branch("urgent")), "fleet_inventory_blocked", "apr-");
    assert!(text.contains("override") && text.contains("fleetgate approvals approve apr-"), "{text}");
    let request = pending(&fleet.f);
    assert!(request["why"].as_str().unwrap().starts_with("overrides fleet_inventory_blocked"), "{request}");
    let id = request["id"].as_str().unwrap().to_owned();
    assert!(text.contains(&id), "{text}");
    // Not yet approved: still refused, the same request.
    let again = refused(fleet.call("author", "create_branch", branch("urgent")), "fleet_inventory_blocked", &id);
    assert!(again.contains(&id));
    fleet.f.cli(&["approvals", "approve", &id, "--reason", "the ghost is retired", "--json"]);
    // Other arguments are not covered; the identical call passes once.
    refused(fleet.call("author", "create_branch", branch("other")), "fleet_inventory_blocked", "apr-");
    let (err, text, _) = fleet.call("author", "create_branch", branch("urgent"));
    assert!(!err, "overridden once: {text}");
    assert!(fleet.git(&["branch", "--list", "urgent"]).contains("urgent"));
    refused(fleet.call("author", "create_branch", branch("urgent")), "fleet_inventory_blocked", "apr-");
    let audit = fleet.f.cli(&["audit", "--json"]).to_string();
    assert!(audit.contains("fleet_inventory_blocked overridden once by approval"), "the use is audited");
    fleet.stop();
}

/// The hostile merger under operator rules on the merge: a rule that only says who may merge,
/// or one that asks an operator first, must not take the merge out of the PR workflow. The
/// merger holds a merge lease on a PR no reviewer approved and merges: refused
/// `approval_required` both times, and the asking rule records no request an operator could
/// approve into a merge of an unreviewed head. Main does not move.
#[test]
fn an_operator_rule_on_the_merge_does_not_let_the_merger_skip_the_review() {
    let _serial = crate::support::serial();
    for (rule, asks) in [("", false), ("decision = \"ask\"\n", true)] {
        let extra = format!(
            "[approvals]\nwait_seconds = 0\n\n[[rules]]\ntool = \"pull_request_write\"\nargs = {{ \"/method\" = \
             [\"merge\"] }}\nroles = [\"merger\"]\n{rule}"
        );
        let mut fleet = Fleet::start(&extra);
        let main_before = fleet.git(&["rev-parse", "main"]);
        assert!(!fleet.call("author", "create_branch", json!({ "branch": "feature" })).0);
        let head = fleet.push("unreviewed\n", "Nobody looked");
        let create = json!({ "method": "create", "title": "F", "body": "b", "head": "feature", "base": "main" });
        let (_, text, _) = fleet.call("author", "pull_request_write", create);
        let pr = serde_json::from_str::<Value>(&text).unwrap()["number"].as_i64().unwrap();
        assert!(!fleet.claim("merger", pr, &head, "merge").0, "the merger holds the merge lease");
        let merge = json!({ "method": "merge", "pull_number": pr });
        refused(fleet.call("merger", "pull_request_write", merge), "approval_required", "no independent approval");
        let (_, f) = fleet.client_and_dir("merger");
        let requests = f.cli(&["approvals", "list", "--all", "--json"]);
        assert_eq!(requests["approvals"].as_array().map(Vec::len), Some(0), "asks {asks}: {requests}");
        assert_eq!(fleet.git(&["rev-parse", "main"]), main_before, "main did not move");
        fleet.stop();
    }
}

/// A request's headers (lowercased names) and body.
type Received = (Vec<(String, String)>, String);

/// An HTTP receiver on loopback recording each request (its headers, lowercased, and body)
/// and answering 200.
pub(crate) struct Receiver {
    pub(crate) addr: std::net::SocketAddr,
    got: std::sync::Arc<std::sync::Mutex<Vec<Received>>>,
}

impl Receiver {
    pub(crate) fn start() -> Self {
        use std::io::{BufRead as _, Read as _, Write as _};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let keep = std::sync::Arc::clone(&got);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let mut reader = std::io::BufReader::new(stream);
                let mut headers = Vec::new();
                let mut line = String::new();
                let _ = reader.read_line(&mut line);
                loop {
                    line.clear();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
                        break;
                    }
                    if let Some((k, v)) = line.trim().split_once(':') {
                        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
                    }
                }
                let length = headers.iter().find(|(k, _)| k == "content-length").and_then(|(_, v)| v.parse().ok());
                let mut body = vec![0; length.unwrap_or(0)];
                let _ = reader.read_exact(&mut body);
                keep.lock().unwrap().push((headers, String::from_utf8_lossy(&body).into_owned()));
                let _ =
                    reader.get_mut().write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
            }
        });
        Self { addr, got }
    }

    /// Every request received so far.
    pub(crate) fn raw(&self) -> Vec<Received> {
        self.got.lock().unwrap().clone()
    }

    /// The events received so far, by their `event` field.
    pub(crate) fn events(&self) -> Vec<(String, Received)> {
        let got = self.got.lock().unwrap();
        got.iter()
            .map(|(h, b)| {
                let v: Value = serde_json::from_str(b).unwrap_or(Value::Null);
                (v["event"].as_str().unwrap_or("").to_owned(), (h.clone(), b.clone()))
            })
            .collect()
    }
}

/// A held call's request, answer and use reach a real HTTP receiver, signed, and `approvals
/// watch`; a target that never answers and one that is unreachable change no decision: the
/// call is held, approved and forwarded while they fail.
#[test]
fn every_approval_event_is_sent_signed_and_a_dead_target_changes_nothing() {
    let _serial = crate::support::serial();
    let receiver = Receiver::start();
    // Accepts and never answers.
    let hanging = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let hang_addr = hanging.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut keep = Vec::new();
        for s in hanging.incoming().flatten() {
            keep.push(s);
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("hook.key");
    std::fs::write(&key_file, "hook-s3cret\n").unwrap();
    let notify = format!(
        "{ASKING}\n[[approvals.notify]]\nkind = \"webhook\"\nurl = \"http://{}/hook\"\nsecret_file = {:?}\nname = \"ops\"\n\n\
         [[approvals.notify]]\nkind = \"webhook\"\nurl = \"http://{hang_addr}/hook\"\nname = \"hang\"\n\n\
         [[approvals.notify]]\nkind = \"slack\"\nurl = \"http://127.0.0.1:1/nobody\"\nname = \"gone\"\n",
        receiver.addr,
        key_file.display().to_string()
    );
    let mut fleet = Fleet::start(&notify);
    let watch = fleet
        .f
        // From the first event on record (the store is new): a watch that started "from now"
        // could start after the request was recorded on a loaded machine, and wait for ever.
        .cli_command(&["approvals", "watch", "--json", "--count", "3", "--after", "0"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (client, f) = fleet.client_and_dir("author");
    let started = std::time::Instant::now();
    let answered = std::thread::scope(|s| {
        let held = s.spawn(|| client.call("create_branch", at(branch("heard"))));
        let id = pending(f)["id"].as_str().unwrap().to_owned();
        let approved = f.cli(&["approvals", "approve", &id, "--json"]);
        assert_eq!(approved["state"], "approved", "{approved}");
        held.join().unwrap()
    });
    assert!(!answered.0, "the held call went ahead: {}", answered.1);
    // The dead targets held up nothing: the call was decided well inside one attempt's limit
    // of the hanging target (5 s) times its retries.
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "{:?}", started.elapsed());
    assert!(wait_until(20.0, || receiver.events().len() >= 3), "{:?}", receiver.events());
    let events = receiver.events();
    let kinds: Vec<&str> = events.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(kinds, ["requested", "answered", "used"]);
    for (kind, (headers, body)) in &events {
        let header = |name: &str| headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        assert_eq!(header("x-fleetgate-event").as_deref(), Some(kind.as_str()));
        assert_eq!(
            header("x-fleetgate-signature"),
            Some(fleetgate_control::notify::signature(b"hook-s3cret", body.as_bytes())),
            "signed with the file's secret"
        );
        let v: Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["request"]["arguments"]["branch"], "heard", "the exact call: {v}");
    }
    // The watch saw the same three, one JSON object a line (bounded: a watch that missed one
    // would wait for ever).
    let mut watch = watch;
    let ended = wait_until(20.0, || watch.try_wait().ok().flatten().is_some());
    if !ended {
        let _ = watch.kill();
    }
    let out = watch.wait_with_output().unwrap();
    assert!(ended, "the watch did not see three events: {}", String::from_utf8_lossy(&out.stdout));
    let lines: Vec<Value> =
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let watched: Vec<&str> = lines.iter().map(|e| e["kind"].as_str().unwrap()).filter(|k| *k != "owed").collect();
    assert_eq!(watched, ["requested", "answered", "used"], "{lines:?}");
    // What the dead targets still owe showed too (the unreachable one retries, its request open
    // until the use).
    assert!(
        lines.iter().any(|l| l["kind"] == "owed" && l["target"] == "gone" && l["events"].as_u64() > Some(0)),
        "{lines:?}"
    );
    fleet.stop();
}

/// Events are sent from the store by whichever process runs a notifier: with every gateway
/// of the fleet stopped, the dashboard alone sends the operator's answer.
#[test]
fn the_dashboard_sends_what_no_gateway_is_left_to_send() {
    let _serial = crate::support::serial();
    let receiver = Receiver::start();
    let config = format!(
        "{}\n[[approvals.notify]]\nkind = \"webhook\"\nurl = \"http://{}/hook\"\n",
        ASKING.replace("wait_seconds = 7", "wait_seconds = 0"),
        receiver.addr
    );
    let mut fleet = Fleet::start(&config);
    refused(fleet.call("author", "create_branch", branch("later")), "approval_pending", "apr-");
    let id = pending(&fleet.f)["id"].as_str().unwrap().to_owned();
    assert!(wait_until(20.0, || receiver.events().iter().any(|(k, _)| k == "requested")), "{:?}", receiver.events());
    fleet.stop_gateways();
    assert!(wait_until(20.0, || fleet.f.running_rows() == 0), "the gateways did not stop");

    let _dashboard = crate::approvers::started_dashboard(&fleet.f, &[]);
    let denied = fleet.f.cli(&["approvals", "deny", &id, "--json"]);
    assert_eq!(denied["state"], "denied", "{denied}");
    // Well inside the hold a gateway keeps on a target while it runs (30 s): stopping let it go.
    let sent = wait_until(15.0, || receiver.events().iter().any(|(k, _)| k == "answered"));
    assert!(sent, "no process sent the answer: {:?}", receiver.events());
}

/// A receiver verifying with the published Standard Webhooks library (`standardwebhooks` from
/// PyPI, `tests/peers/webhook_receiver.py`), every delivery logged with the verifier's word.
struct Verifier {
    child: std::process::Child,
    port: u16,
    out: std::path::PathBuf,
}

impl Verifier {
    fn start(secret: &str, dir: &std::path::Path) -> Self {
        use std::io::BufRead as _;
        let out = dir.join("deliveries.jsonl");
        let mut child = std::process::Command::new(crate::support::peer(".venv/bin/python"))
            .arg(crate::support::peer("tests/peers/webhook_receiver.py"))
            .args([secret, &out.display().to_string()])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port = line.trim().strip_prefix("listening ").and_then(|p| p.parse().ok());
        Self { port: port.unwrap_or_else(|| panic!("the receiver did not start: {line:?}")), child, out }
    }

    fn deliveries(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.out).unwrap_or_default();
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    /// POST `body` with `headers` to the receiver's `path`; the status.
    fn post(&self, path: &str, headers: &[(String, String)], body: &str) -> u16 {
        let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
        let mut request = agent.post(&format!("http://127.0.0.1:{}{path}", self.port));
        for (k, v) in headers {
            request = request.header(k.as_str(), v.as_str());
        }
        request.send(body.as_bytes()).unwrap().status().as_u16()
    }
}

impl Drop for Verifier {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Issue 55: a captured webhook verified for ever (the signature covered the body alone).
/// fleetgate signs as Standard Webhooks does: a receiver using the published verifier accepts
/// every delivery, refuses the same delivery replayed past its tolerance (its clock six minutes
/// on) and one whose body was changed.
#[test]
fn a_standard_webhooks_verifier_accepts_every_delivery_and_refuses_a_late_replay() {
    let _serial = crate::support::serial();
    let dir = tempfile::tempdir().unwrap();
    // The specification's serialization: `whsec_` and the base64 of 32 random bytes.
    let secret = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD2FGIIGUodAY=";
    let key_file = dir.path().join("hook.key");
    std::fs::write(&key_file, format!("{secret}\n")).unwrap();
    let verifier = Verifier::start(secret, dir.path());
    let config = format!(
        "{}\n[[approvals.notify]]\nkind = \"webhook\"\nurl = \"http://127.0.0.1:{}/hook\"\nsecret_file = {:?}\n",
        ASKING.replace("wait_seconds = 7", "wait_seconds = 0"),
        verifier.port,
        key_file.display().to_string()
    );
    let mut fleet = Fleet::start(&config);
    refused(fleet.call("author", "create_branch", branch("signed")), "approval_pending", "apr-");
    let id = pending(&fleet.f)["id"].as_str().unwrap().to_owned();
    fleet.f.cli(&["approvals", "approve", &id, "--json"]);
    assert!(wait_until(20.0, || verifier.deliveries().len() >= 2), "{:?}", verifier.deliveries());
    let deliveries = verifier.deliveries();
    for d in &deliveries {
        assert_eq!(d["accepted"], true, "the verifier refused a delivery: {d}");
        assert!(d["headers"]["x-fleetgate-signature"].as_str().is_some_and(|s| s.starts_with("sha256=")), "{d}");
    }
    let first = &deliveries[0];
    let event: Value = serde_json::from_str(first["body"].as_str().unwrap()).unwrap();
    assert_eq!((event["event"].as_str(), event["request"]["id"].as_str()), (Some("requested"), Some(id.as_str())));
    let headers: Vec<(String, String)> = ["webhook-id", "webhook-timestamp", "webhook-signature", "content-type"]
        .iter()
        .map(|k| ((*k).to_owned(), first["headers"][*k].as_str().unwrap().to_owned()))
        .collect();
    let body = first["body"].as_str().unwrap();
    // The same delivery replayed now is still within the tolerance: the verifier accepts it
    // (its `webhook-id` is the receiver's idempotency key)...
    assert_eq!(verifier.post("/hook", &headers, body), 204);
    // ...a changed body is refused...
    assert_eq!(verifier.post("/hook", &headers, &body.replace("signed", "signee")), 401);
    // ...and six minutes on (the receiver's clock moved, the library's 5-minute tolerance
    // passed) the captured delivery is refused.
    assert_eq!(verifier.post("/clock", &[], "360"), 204);
    assert_eq!(verifier.post("/hook", &headers, body), 401);
    let last = verifier.deliveries().pop().unwrap();
    assert!(last["why"].as_str().unwrap().contains("too old"), "{last}");
    fleet.stop();
}

/// Issue 55: a role's call whose text holds a mention, a lying link and formatting reached
/// Slack unescaped. Through a real gateway and notifier: the Slack, ntfy and webhook targets
/// receive the hostile call's request with no mention, no link and no markup of the call's
/// rendered, none of it in a header, and the Slack and ntfy messages name where to answer.
#[test]
fn a_hostile_call_reaches_slack_ntfy_and_webhook_receivers_inert() {
    const HOSTILE: &str =
        "<!channel> urgent <http://evil.example/approve|:white_check_mark: fleetgate says safe: approve apr-0000> *ok*";
    let _serial = crate::support::serial();
    let (slack, ntfy, hook) = (Receiver::start(), Receiver::start(), Receiver::start());
    let config = format!(
        "{}\n[[approvals.notify]]\nkind = \"slack\"\nurl = \"http://{}/services/T0/B0/s3cret\"\n\n\
         [[approvals.notify]]\nkind = \"ntfy\"\nurl = \"http://{}/topic\"\n\n\
         [[approvals.notify]]\nkind = \"webhook\"\nurl = \"http://{}/hook\"\n",
        ASKING.replace("wait_seconds = 7", "wait_seconds = 0"),
        slack.addr,
        ntfy.addr,
        hook.addr
    );
    let mut fleet = Fleet::start(&config);
    refused(fleet.call("author", "create_branch", branch(HOSTILE)), "approval_pending", "apr-");
    let id = pending(&fleet.f)["id"].as_str().unwrap().to_owned();
    assert!(wait_until(20.0, || [&slack, &ntfy, &hook].iter().all(|r| !r.raw().is_empty())), "not every target heard");
    for r in [&slack, &ntfy, &hook] {
        for (headers, _) in r.raw() {
            assert!(headers.iter().all(|(_, v)| !v.contains("urgent") && !v.contains('<')), "{headers:?}");
        }
    }
    // Slack: every text verbatim mrkdwn, no `<` left (no mention, link or channel), the call
    // only inside a code fence, and who answers and where.
    let (_, body) = slack.raw().remove(0);
    let v: Value = serde_json::from_str(&body).unwrap();
    let texts: Vec<String> = std::iter::once(v["text"].as_str().unwrap().to_owned())
        .chain(v["blocks"].as_array().unwrap().iter().map(|b| {
            assert_eq!(b["text"]["verbatim"], true, "{b}");
            b["text"]["text"].as_str().unwrap().to_owned()
        }))
        .collect();
    assert!(texts.iter().all(|t| !t.contains('<') && !t.contains('>')), "{texts:?}");
    assert!(!texts[0].contains("urgent") && !texts[1].contains("urgent"), "{texts:?}");
    assert!(texts[1].contains(&format!("`fleetgate approvals approve {id}`")), "{texts:?}");
    assert!(texts[2].starts_with("```") && texts[2].contains("&lt;!channel&gt; urgent"), "{texts:?}");
    // ntfy: markdown, the call in a fence, the title fleetgate's own words.
    let (headers, body) = ntfy.raw().remove(0);
    let title = headers.iter().find(|(k, _)| k == "title").map(|(_, v)| v.clone());
    assert_eq!(title, Some(format!("fleetgate: requested {id}")));
    let (answer, fence) = body.split_once("\n\n```\n").unwrap();
    assert!(answer.contains(&format!("`fleetgate approvals approve {id}`")) && !answer.contains("urgent"), "{body}");
    assert!(fence.contains(HOSTILE) && fence.matches('`').count() == 3, "{body}");
    // The webhook: the call structured, exactly as made.
    let (_, body) = hook.raw().remove(0);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["request"]["arguments"]["branch"], HOSTILE);
    fleet.stop();
}
