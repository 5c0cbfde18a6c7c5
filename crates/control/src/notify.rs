//! `[[approvals.notify]]`: every approval event the store records — a request, an answer, a
//! use, a withdrawal, an expiry — sent to each target, from the store's record of it and never
//! from the gate: the gate writes the event in the transaction that made the change (a row),
//! and a notifier thread in `fleetgate serve` or `fleetgate dashboard` delivers it. A target
//! that hangs, refuses or is unreachable holds up its own thread and nothing else.
//!
//! One process delivers to a target at a time: each holds the target's cursor in the store
//! for a short while (`claim_notify`), sends the events after it in order, and advances it.
//! An event is retried with backoff ([`BACKOFF`]); after the last retry it is dropped, counted
//! (`fleetgate_notify_deliveries_total{outcome="failed"}`) and logged, and the next one is
//! sent: a target that is down never stalls the others, nor grows a queue in memory (the
//! store's events are the queue; a read is at most [`BATCH`] of them). A target new to the
//! store starts at the events recorded after the notifier started.
//!
//! The bodies are pure ([`body`]); the signature is HMAC-SHA256 of the exact body with the
//! target's secret, hex, in `X-Fleetgate-Signature: sha256=…` (as GitHub signs its webhooks).

use crate::metrics::NotifyLabels;
use fleetgate_config::{NotifyKind, NotifyTarget};
use fleetgate_core::{Clock, Timestamp};
use fleetgate_store::{ApprovalEvent, Store};
use hmac::{Hmac, KeyInit, Mac};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long one process holds a target's cursor before another may take it; renewed before
/// every attempt, so a slow target keeps its one deliverer.
pub const HOLD: i64 = 30;
/// The most events read at once.
pub const BATCH: usize = 64;
/// The waits between an event's attempts: tried `BACKOFF.len() + 1` times in all.
pub const BACKOFF: [Duration; 3] = [Duration::from_millis(500), Duration::from_secs(2), Duration::from_secs(8)];
/// One attempt's time limit (connect, send, answer).
pub const ATTEMPT: Duration = Duration::from_secs(5);
/// The header naming the event.
pub const EVENT_HEADER: &str = "X-Fleetgate-Event";
/// The header carrying the signature (`sha256=<hex>` over the body alone; kept beside the
/// Standard Webhooks headers for receivers written against it).
pub const SIGNATURE_HEADER: &str = "X-Fleetgate-Signature";
/// Standard Webhooks: the event's id, the same on every attempt (a receiver's idempotency key).
pub const WEBHOOK_ID: &str = "webhook-id";
/// Standard Webhooks: the attempt's time, Unix seconds (a receiver refuses one too old).
pub const WEBHOOK_TIMESTAMP: &str = "webhook-timestamp";
/// Standard Webhooks: `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`.
pub const WEBHOOK_SIGNATURE: &str = "webhook-signature";
/// The most characters of a call a Slack or ntfy message carries (Slack's section takes 3,000;
/// ntfy turns a longer message into an attachment): past it the text says where the whole is.
pub const MESSAGE_CHARS: usize = 2_400;

/// One request to send: its body, its content type and its headers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outgoing {
    /// The body.
    pub body: String,
    /// `Content-Type`.
    pub content_type: &'static str,
    /// Other headers.
    pub headers: Vec<(&'static str, String)>,
}

/// `payload` signed with `secret`: `sha256=<hex HMAC-SHA256>`.
pub fn signature(secret: &[u8], payload: &[u8]) -> String {
    let hex: String = hmac(secret, payload).iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

fn hmac(key: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut mac = <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(payload);
    mac.finalize().into_bytes().to_vec()
}

/// The Standard Webhooks key of a target's secret: a `whsec_<base64>` secret is its decoded
/// bytes (as the specification serializes one), any other secret its own bytes (a receiver's
/// library then takes it as `whsec_` and the base64 of those bytes). `Err` when a `whsec_`
/// secret does not decode (the secret itself never named).
pub fn standard_key(secret: &str) -> Result<Vec<u8>, String> {
    use base64::Engine as _;
    match secret.strip_prefix("whsec_") {
        None => Ok(secret.as_bytes().to_vec()),
        Some(encoded) => base64::engine::general_purpose::STANDARD
            .decode(encoded.trim_end_matches('='))
            .or_else(|_| base64::engine::general_purpose::STANDARD_NO_PAD.decode(encoded.trim_end_matches('=')))
            .ok()
            .filter(|k| !k.is_empty())
            .ok_or_else(|| "the secret starts with whsec_ but the rest is not base64".to_owned()),
    }
}

/// The Standard Webhooks signature of `body` sent as `id` at `timestamp` (Unix seconds):
/// `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`.
pub fn standard_signature(key: &[u8], id: &str, timestamp: i64, body: &str) -> String {
    use base64::Engine as _;
    let mac = hmac(key, format!("{id}.{timestamp}.{body}").as_bytes());
    format!("v1,{}", base64::engine::general_purpose::STANDARD.encode(mac))
}

/// An event's Standard Webhooks id: the same on every attempt and for every target, never a
/// `.` (the signed content is dot-separated).
pub fn webhook_id(event: &ApprovalEvent) -> String {
    format!("msg_{}_{}", event.id, event.request.id.replace('.', "_"))
}

/// Slack's mrkdwn control characters escaped (`&`, `<`, `>`): no `<!channel>`, `<@U…>` or
/// `<url|text>` survives from a call.
pub fn slack_escaped(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// A call's text as a fenced code block: no formatting, emoji code or link is rendered
/// inside one; a backtick of the text is escaped (`\u{60}`), so it cannot close the fence.
/// Cut at [`MESSAGE_CHARS`], saying where the whole call is.
fn fenced(text: &str) -> String {
    let mut text = text.replace('`', "\\u{60}");
    if text.chars().count() > MESSAGE_CHARS {
        text = text.chars().take(MESSAGE_CHARS).collect();
        text.push_str("\n… (cut here: `fleetgate approvals list` shows the whole call)");
    }
    format!("```\n{text}\n```")
}

/// The headline of an event, in fleetgate's words alone (nothing of the call): the request,
/// the event and where the request stands.
pub fn headline(event: &ApprovalEvent) -> String {
    format!("fleetgate: approval request {} {}, now {}", event.request.id, event.kind, event.request.state)
}

/// Who answers a request still waiting, and where; nothing once it is answered or closed.
fn answering(event: &ApprovalEvent) -> Option<String> {
    let r = &event.request;
    (r.state == fleetgate_core::approval::ApprovalState::Pending)
        .then(|| fleetgate_core::approval::where_answered(&r.id, &r.approvers))
}

/// What `event` is sent to a target of `kind` as, at `sent_at` (Unix seconds: the attempt's
/// Standard Webhooks timestamp), signed with `secret` when one is given. Everything from the
/// call is data: a webhook's JSON carries it structured, a Slack or ntfy message only inside a
/// fenced code block (escaped for Slack's mrkdwn, `verbatim`: no mention, link or emoji of the
/// call's is ever rendered); no header carries any of it. `Err` names why it cannot be signed.
pub fn body(kind: NotifyKind, event: &ApprovalEvent, secret: Option<&str>, sent_at: i64) -> Result<Outgoing, String> {
    let call = crate::approvals::listing(std::slice::from_ref(&event.request));
    let headline = headline(event);
    Ok(match kind {
        NotifyKind::Webhook => {
            let body =
                json!({ "event": event.kind, "id": event.id, "at": event.at, "request": event.request }).to_string();
            let mut headers = vec![(EVENT_HEADER, event.kind.clone())];
            if let Some(secret) = secret {
                let key = standard_key(secret)?;
                let id = webhook_id(event);
                headers.push((SIGNATURE_HEADER, signature(secret.as_bytes(), body.as_bytes())));
                headers.push((WEBHOOK_SIGNATURE, standard_signature(&key, &id, sent_at, &body)));
                headers.push((WEBHOOK_ID, id));
                headers.push((WEBHOOK_TIMESTAMP, sent_at.to_string()));
            }
            Outgoing { body, content_type: "application/json", headers }
        }
        NotifyKind::Slack => {
            let mut head = format!("*{}*", slack_escaped(&headline));
            if let Some(answer) = answering(event) {
                head.push_str(&format!("\n{}", slack_escaped(&answer)));
            }
            let section = |text: String| json!({ "type": "section", "text": { "type": "mrkdwn", "text": text, "verbatim": true } });
            Outgoing {
                body: json!({
                    "text": slack_escaped(&headline),
                    "blocks": [section(head), section(slack_escaped(&fenced(&call)))],
                })
                .to_string(),
                content_type: "application/json",
                headers: Vec::new(),
            }
        }
        NotifyKind::Ntfy => {
            let tag = match event.kind.as_str() {
                "requested" => "hourglass",
                "answered" => "white_check_mark",
                _ => "information_source",
            };
            let mut text = answering(event).map(|a| format!("{a}\n\n")).unwrap_or_default();
            text.push_str(&fenced(&call));
            Outgoing {
                body: text,
                content_type: "text/markdown; charset=utf-8",
                headers: vec![
                    ("Title", format!("fleetgate: {} {}", event.kind, event.request.id)),
                    ("Tags", tag.into()),
                    ("Markdown", "yes".into()),
                ],
            }
        }
    })
}

/// Send `out` to `url` once, within [`ATTEMPT`]: `Err` names why it was not taken (the
/// target's answer, or the failure), never the URL's credentials.
fn post(url: &str, out: &Outgoing) -> Result<(), String> {
    // A URL is a credential for some receivers (Slack's path, a `?token=`): only its origin
    // is named, and an error that quotes the URL has it replaced by the origin.
    let shown = fleetgate_core::redact::url_origin(url);
    let scrub = |why: String| {
        let tail = url.find("://").map_or(url, |i| &url[i + 3..]);
        let tail = &tail[tail.find(['/', '?', '#', '\\']).unwrap_or(tail.len())..];
        let why = why.replace(url, &shown);
        if tail.is_empty() { why } else { why.replace(tail, "…") }
    };
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(ATTEMPT))
        .max_redirects(0)
        .http_status_as_error(false)
        .build()
        .into();
    let mut request = agent.post(url).header("Content-Type", out.content_type);
    for (name, value) in &out.headers {
        request = request.header(*name, value);
    }
    let response = request.send(out.body.as_bytes()).map_err(|e| format!("POST {shown}: {}", scrub(e.to_string())))?;
    let status = response.status();
    if status.is_success() { Ok(()) } else { Err(format!("POST {shown}: answered {status}")) }
}

/// Reads one environment key (a target's URL or secret).
pub type EnvReader = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// The notifier of one process: a thread per target, until [`Notifier::stop`].
#[derive(Debug)]
pub struct Notifier {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

/// What a notifier thread needs.
#[derive(Clone)]
pub struct Context {
    /// The store the events are in.
    pub store: Arc<dyn Store>,
    /// The clock.
    pub clock: Arc<dyn Clock>,
    /// Reads an environment key (a target's URL or secret).
    pub env: EnvReader,
    /// `fleetgate_notify_deliveries_total`, when the process has metrics.
    pub metrics: Option<Family<NotifyLabels, Counter>>,
    /// `[approvals] ttl_seconds`: an approval unused past it is expired (an event too).
    pub ttl_seconds: i64,
    /// The waits between an event's attempts ([`BACKOFF`]).
    pub backoff: Vec<Duration>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("ttl_seconds", &self.ttl_seconds)
            .field("backoff", &self.backoff)
            .finish_non_exhaustive()
    }
}

impl Notifier {
    /// Start delivering to `targets` (none: nothing starts).
    pub fn start(targets: &[NotifyTarget], cx: &Context) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        // A new target hears what happens from now on.
        let start = cx.store.approval_events(0, usize::MAX).ok().and_then(|e| e.last().map(|e| e.id)).unwrap_or(0);
        // Unique per process start: a restarted process does not inherit a dead one's hold.
        let holder = format!("{}:{}", std::process::id(), fleetgate_host::start_id());
        let threads = targets
            .iter()
            .cloned()
            .map(|target| {
                let (cx, stop, holder) = (cx.clone(), Arc::clone(&stop), holder.clone());
                std::thread::Builder::new()
                    .name(format!("notify-{}", target.name))
                    .spawn(move || deliver_loop(&target, &cx, &holder, start, &stop))
                    .expect("a notifier thread starts")
            })
            .collect();
        Self { stop, threads }
    }

    /// Stop every thread (each finishes the attempt it is in).
    pub fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads {
            let _ = t.join();
        }
    }
}

fn count(cx: &Context, target: &str, outcome: &'static str) {
    if let Some(m) = &cx.metrics {
        m.get_or_create(&NotifyLabels { target: target.to_owned(), outcome }).inc();
    }
}

/// Sleep `d` unless stopped first; whether it was stopped.
pub(crate) fn pause(stop: &AtomicBool, d: Duration) -> bool {
    let until = std::time::Instant::now() + d;
    while std::time::Instant::now() < until {
        if stop.load(Ordering::SeqCst) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50).min(until.saturating_duration_since(std::time::Instant::now())));
    }
    stop.load(Ordering::SeqCst)
}

fn deliver_loop(target: &NotifyTarget, cx: &Context, holder: &str, start: i64, stop: &AtomicBool) {
    let mut watch = cx.store.approval_watch().ok();
    while !stop.load(Ordering::SeqCst) {
        let now: Timestamp = cx.clock.now();
        if let Err(e) = cx.store.expire_approvals(now.plus_seconds(-cx.ttl_seconds), now) {
            tracing::debug!(target = %target.name, error = %e, "approvals could not be expired");
        }
        match cx.store.claim_notify(&target.name, holder, start, now.plus_seconds(HOLD), now) {
            Ok(Some(last)) => deliver_batch(target, cx, holder, last, stop),
            Ok(None) => {}
            Err(e) => tracing::warn!(target = %target.name, error = %e, "the notification cursor cannot be claimed"),
        }
        // Woken by the store's word that something changed, else look again shortly.
        match &mut watch {
            Some(w) => {
                let _ = w.wait(Duration::from_millis(500));
            }
            None => {
                if pause(stop, Duration::from_millis(500)) {
                    break;
                }
            }
        }
    }
    // Stopping in order: the target's cursor is held until now, not for another HOLD, so the
    // next process (a restarted gateway, the dashboard) delivers from here at once. Claiming
    // it until now changes nothing when another process holds it.
    let now = cx.clock.now();
    if let Err(e) = cx.store.claim_notify(&target.name, holder, start, now, now) {
        tracing::debug!(target = %target.name, error = %e, "the notification cursor could not be let go");
    }
}

fn deliver_batch(target: &NotifyTarget, cx: &Context, holder: &str, last: i64, stop: &AtomicBool) {
    let events = match cx.store.approval_events(last, BATCH) {
        Ok(events) => events,
        Err(e) => {
            tracing::warn!(target = %target.name, error = %e, "the approval events cannot be read");
            return;
        }
    };
    for event in events {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        if target.events.contains(&event.kind) {
            // Renewed before each attempt: while an event is retried, the target stays ours.
            let renew = || {
                let until = cx.clock.now().plus_seconds(HOLD);
                cx.store.advance_notify(&target.name, holder, event.id - 1, until).unwrap_or(false)
            };
            if !send(target, cx, &event, stop, &renew) {
                return;
            }
        }
        let until = cx.clock.now().plus_seconds(HOLD);
        match cx.store.advance_notify(&target.name, holder, event.id, until) {
            Ok(true) => {}
            Ok(false) => return, // another process holds the target now
            Err(e) => {
                tracing::warn!(target = %target.name, error = %e, "the notification cursor cannot be advanced");
                return;
            }
        }
    }
}

/// Send one event, retried with backoff; counted and logged whatever becomes of it. `renew`
/// extends this process's hold on the target before each attempt: `false` (another process
/// holds it now, or the store failed) ends the send, and so does a stop. Whether the cursor
/// may move past the event (sent, or dropped after its last retry).
fn send(
    target: &NotifyTarget,
    cx: &Context,
    event: &ApprovalEvent,
    stop: &AtomicBool,
    renew: &dyn Fn() -> bool,
) -> bool {
    let env = |k: &str| (cx.env)(k);
    let url = match target.url.read(&env) {
        Ok(url) => url,
        Err(why) => {
            count(cx, &target.name, "failed");
            tracing::warn!(target = %target.name, event = event.id, why, "the notification target's URL is not set");
            return true;
        }
    };
    let secret = match target.secret.as_ref().map(|s| s.read(&env)).transpose() {
        Ok(secret) => secret,
        Err(why) => {
            count(cx, &target.name, "failed");
            tracing::warn!(target = %target.name, event = event.id, why, "the notification target's secret is not set");
            return true;
        }
    };
    for attempt in 0..=cx.backoff.len() {
        if stop.load(Ordering::SeqCst) || !renew() {
            return false;
        }
        // Built for each attempt: the Standard Webhooks timestamp is the attempt's.
        let out = match body(target.kind, event, secret.as_deref(), cx.clock.now().unix()) {
            Ok(out) => out,
            Err(why) => {
                count(cx, &target.name, "failed");
                tracing::warn!(target = %target.name, event = event.id, why, "the notification cannot be signed");
                return true;
            }
        };
        match post(&url, &out) {
            Ok(()) => {
                count(cx, &target.name, "delivered");
                return true;
            }
            Err(why) if attempt < cx.backoff.len() => {
                count(cx, &target.name, "retried");
                tracing::info!(target = %target.name, event = event.id, why, "a notification is retried");
                if pause(stop, cx.backoff[attempt]) {
                    return false;
                }
            }
            Err(why) => {
                count(cx, &target.name, "failed");
                tracing::warn!(target = %target.name, event = event.id, request = %event.request.id, why,
                    "a notification was dropped after its last retry");
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use fleetgate_core::approval::{ApprovalRequest, ApprovalState};

    fn event() -> ApprovalEvent {
        ApprovalEvent {
            id: 7,
            at: Timestamp::from_unix(1_700_000_000),
            kind: "requested".into(),
            request: ApprovalRequest {
                id: "apr-1".into(),
                requested_at: Timestamp::from_unix(1_700_000_000),
                profile: "prgs-merger".into(),
                role: "merger".into(),
                worker: Some("w".into()),
                principal: None,
                tool: "merge_pull_request".into(),
                arguments: serde_json::json!({ "pullNumber": 3 }).as_object().cloned(),
                digest: "d".into(),
                why: "rule fleet.toml:9 asks".into(),
                state: ApprovalState::Pending,
                answered_by: None,
                answered_at: None,
                answer_reason: None,
                used_at: None,
                approvers: vec!["oidc:alice".into()],
                required: 2,
                answers: Vec::new(),
            },
        }
    }

    #[test]
    fn a_webhook_body_carries_the_exact_call_and_its_signature_covers_every_byte() {
        let out = body(NotifyKind::Webhook, &event(), Some("s3cret"), 1_700_000_100).unwrap();
        let v: serde_json::Value = serde_json::from_str(&out.body).unwrap();
        assert_eq!(
            (v["event"].as_str(), v["request"]["arguments"]["pullNumber"].as_i64()),
            (Some("requested"), Some(3))
        );
        assert_eq!(v["request"]["required"], 2);
        let header = |name: &str| out.headers.iter().find(|(h, _)| *h == name).map(|(_, v)| v.clone()).unwrap();
        let sig = header(SIGNATURE_HEADER);
        assert_eq!(sig, signature(b"s3cret", out.body.as_bytes()));
        assert_ne!(sig, signature(b"s3cret", out.body.replace('3', "4").as_bytes()));
        // RFC 4231 test case 2: the HMAC is HMAC-SHA256.
        assert_eq!(
            signature(b"Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // Standard Webhooks beside it: over id.timestamp.body, the attempt's time.
        assert_eq!(
            (header(WEBHOOK_ID), header(WEBHOOK_TIMESTAMP)),
            ("msg_7_apr-1".to_owned(), "1700000100".to_owned())
        );
        assert_eq!(header(WEBHOOK_SIGNATURE), standard_signature(b"s3cret", "msg_7_apr-1", 1_700_000_100, &out.body));
        let later = body(NotifyKind::Webhook, &event(), Some("s3cret"), 1_700_000_200).unwrap();
        assert_eq!(later.body, out.body, "the same event, the same body");
        assert_ne!(later.headers, out.headers, "another attempt, another timestamp and signature");
        assert!(body(NotifyKind::Webhook, &event(), None, 0).unwrap().headers.iter().all(|(h, _)| *h == EVENT_HEADER));
    }

    /// The specification's serialization of a secret (`whsec_` and base64) and the reference
    /// libraries' test vector (checked with the `standardwebhooks` package from PyPI).
    #[test]
    fn standard_webhooks_signatures_match_the_reference_vector() {
        let key = standard_key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        assert_eq!(
            standard_signature(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1_614_265_330, r#"{"test": 2432232314}"#),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
        assert_eq!(standard_key("plain-s3cret").unwrap(), b"plain-s3cret");
        let bad = standard_key("whsec_not base64!").unwrap_err();
        assert!(!bad.contains("not base64!"), "the secret is never named: {bad}");
        // A secret that cannot sign fails the attempt; it never goes out unsigned.
        assert!(body(NotifyKind::Webhook, &event(), Some("whsec_%%%"), 0).is_err());
    }

    /// A target that refuses: every attempt is counted, then the event is dropped, counted
    /// failed — and the loop goes on (nothing else waits on it).
    #[test]
    fn a_refusing_target_is_retried_then_counted_failed() {
        let dir = tempfile::tempdir().unwrap();
        let store = fleetgate_store::open(&dir.path().join("s.sqlite3").display().to_string()).unwrap();
        let metrics: Family<NotifyLabels, Counter> = Family::default();
        let cx = Context {
            store,
            clock: Arc::new(fleetgate_core::time::ManualClock::new(Timestamp::from_unix(0))),
            env: Arc::new(|_: &str| None),
            metrics: Some(metrics.clone()),
            ttl_seconds: 600,
            backoff: vec![Duration::ZERO, Duration::ZERO],
        };
        let target = NotifyTarget {
            kind: NotifyKind::Webhook,
            url: fleetgate_config::Secret::Plain("http://127.0.0.1:1/nobody".into()),
            secret: None,
            events: vec!["requested".into()],
            name: "gone".into(),
        };
        assert!(send(&target, &cx, &event(), &AtomicBool::new(false), &|| true), "dropped: the cursor moves on");
        let n = |outcome| metrics.get_or_create(&NotifyLabels { target: "gone".into(), outcome }).get();
        assert_eq!((n("retried"), n("failed"), n("delivered")), (2, 1, 0));
        // A secret that cannot be read is a failure too, never a send without its signature.
        let unsigned = NotifyTarget { secret: Some(fleetgate_config::Secret::Env("NOPE".into())), ..target };
        send(&unsigned, &cx, &event(), &AtomicBool::new(false), &|| true);
        assert_eq!(n("failed"), 2);
        // Another process took the target: this one stops sending, and does not move on.
        assert!(!send(&target_named("gone"), &cx, &event(), &AtomicBool::new(false), &|| false));
        assert_eq!(n("retried"), 2, "no attempt made without the hold");
    }

    thread_local! {
        static CAPTURED: std::cell::RefCell<Option<Vec<u8>>> = const { std::cell::RefCell::new(None) };
    }

    /// What `f` logs on this thread, at every level, as text. One subscriber for the whole
    /// test binary (a scoped one races other threads over the callsites' cached interest),
    /// writing to the capturing thread's own buffer.
    pub(crate) fn logged(f: impl FnOnce()) -> String {
        static INSTALL: std::sync::Once = std::sync::Once::new();
        INSTALL.call_once(|| {
            let subscriber = tracing_subscriber::fmt()
                .with_max_level(tracing::Level::TRACE)
                .with_ansi(false)
                .with_writer(|| Sink)
                .finish();
            let _ = tracing::subscriber::set_global_default(subscriber);
        });
        CAPTURED.with(|c| *c.borrow_mut() = Some(Vec::new()));
        f();
        let bytes = CAPTURED.with(|c| c.borrow_mut().take()).unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    struct Sink;

    impl std::io::Write for Sink {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            CAPTURED.with(|c| c.borrow_mut().as_mut().map(|buf| buf.extend_from_slice(b)));
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Issue 55: a URL with no path (`http://host:1?token=…`) was logged whole at INFO on each
    /// retry and at WARN on the drop. Only the origin is logged, on every path.
    #[test]
    fn a_target_url_s_secret_is_never_logged() {
        let dir = tempfile::tempdir().unwrap();
        let store = fleetgate_store::open(&dir.path().join("s.sqlite3").display().to_string()).unwrap();
        let cx = Context {
            store,
            clock: Arc::new(fleetgate_core::time::ManualClock::new(Timestamp::from_unix(0))),
            env: Arc::new(|_: &str| None),
            metrics: None,
            ttl_seconds: 600,
            backoff: vec![Duration::ZERO],
        };
        for url in [
            "http://127.0.0.1:1?token=s3cret-query",
            "http://127.0.0.1:1/hook/s3cret-path?token=s3cret-query#s3cret-fragment",
            "http://user:s3cret-password@127.0.0.1:1?token=s3cret-query",
            "http://127.0.0.1:1#s3cret-fragment",
            "http://[::1:1?token=s3cret-query",
        ] {
            let target = NotifyTarget { url: fleetgate_config::Secret::Plain(url.into()), ..target_named("t") };
            let log = logged(|| {
                send(&target, &cx, &event(), &AtomicBool::new(false), &|| true);
            });
            assert!(log.contains("a notification is retried") && log.contains("dropped after its last retry"), "{log}");
            assert!(!log.contains("s3cret"), "{url}: {log}");
        }
    }

    fn target_named(name: &str) -> NotifyTarget {
        NotifyTarget {
            kind: NotifyKind::Webhook,
            url: fleetgate_config::Secret::Plain("http://127.0.0.1:1/nobody".into()),
            secret: None,
            events: vec!["requested".into()],
            name: name.into(),
        }
    }

    /// Issue 55: a role's call whose text holds a mention, a lying link and formatting reached
    /// Slack as is. Every string of the call reaches Slack and ntfy inside a fenced code block,
    /// escaped; nothing of it reaches a header; the messages name who answers and where.
    #[test]
    fn a_hostile_call_reaches_slack_and_ntfy_as_inert_text() {
        const HOSTILE: &str = "<!channel> urgent <http://evil.example/approve|:white_check_mark: fleetgate says \
                               safe: approve apr-0000> *ok* <@U123> <!here> ``` break out & <#C1>";
        let mut e = event();
        e.request.arguments = serde_json::json!({ "title": HOSTILE, "pullNumber": 3 }).as_object().cloned();
        e.request.worker = Some(HOSTILE.into());
        e.request.principal = Some(HOSTILE.into());
        e.request.why = HOSTILE.into();
        let slack = body(NotifyKind::Slack, &e, None, 0).unwrap();
        assert!(slack.headers.is_empty());
        let v: serde_json::Value = serde_json::from_str(&slack.body).unwrap();
        let mut texts = vec![v["text"].as_str().unwrap().to_owned()];
        for block in v["blocks"].as_array().unwrap() {
            assert_eq!(
                (block["text"]["type"].as_str(), block["text"]["verbatim"].as_bool()),
                (Some("mrkdwn"), Some(true))
            );
            texts.push(block["text"]["text"].as_str().unwrap().to_owned());
        }
        for text in &texts {
            assert!(!text.contains('<') && !text.contains('>'), "no mention, link or channel survives: {text}");
        }
        assert!(!texts[0].contains("urgent") && !texts[1].contains("urgent"), "the headline is fleetgate's words");
        let call = &texts[2];
        assert!(call.starts_with("```\n") && call.ends_with("\n```"), "{call}");
        assert_eq!(call.matches("```").count(), 2, "the call's own backticks cannot close the fence: {call}");
        assert!(call.contains("&lt;!channel&gt; urgent &lt;http://evil.example/approve|"), "{call}");
        assert!(call.contains("pullNumber"), "the exact arguments: {call}");
        assert!(texts[1].contains("oidc:alice signed in to the dashboard"), "who answers and where: {}", texts[1]);
        assert!(!texts[1].contains("`fleetgate approvals approve apr-1`"), "a command refused for them: {}", texts[1]);
        // Named people: who and where, never a command refused for them.
        let ntfy = body(NotifyKind::Ntfy, &e, None, 0).unwrap();
        assert_eq!(
            ntfy.headers,
            [
                ("Title", "fleetgate: requested apr-1".to_owned()),
                ("Tags", "hourglass".to_owned()),
                ("Markdown", "yes".to_owned()),
            ]
        );
        let (answer, fence) = ntfy.body.split_once("\n\n```\n").unwrap();
        assert!(!answer.contains("urgent") && answer.contains("oidc:alice signed in to the dashboard"), "{answer}");
        assert!(fence.ends_with("\n```") && fence.matches('`').count() == 3, "only the closing fence: {fence}");
        assert!(fence.contains(HOSTILE.split("``` ").next().unwrap()), "the call, as text: {fence}");
        // A webhook carries the call structured; its headers hold none of it.
        let hook = body(NotifyKind::Webhook, &e, Some("k"), 0).unwrap();
        assert!(hook.headers.iter().all(|(_, v)| !v.contains("urgent") && !v.contains('<')), "{:?}", hook.headers);
        let parsed: serde_json::Value = serde_json::from_str(&hook.body).unwrap();
        assert_eq!(parsed["request"]["arguments"]["title"], HOSTILE);
    }

    #[test]
    fn slack_and_ntfy_name_the_call_and_where_it_is_answered() {
        let mut e = event();
        e.request.approvers = Vec::new();
        let slack = body(NotifyKind::Slack, &e, None, 0).unwrap();
        let text = slack.body;
        assert!(text.contains("approval request apr-1 requested") && text.contains("merge_pull_request"), "{text}");
        assert!(text.contains("`fleetgate approvals approve apr-1`"), "the answering command: {text}");
        let ntfy = body(NotifyKind::Ntfy, &event(), None, 0).unwrap();
        assert!(ntfy.body.contains("apr-1"), "{}", ntfy.body);
        assert!(ntfy.headers.contains(&("Title", "fleetgate: requested apr-1".into())));
        // Answered and closed: no one is told to answer.
        e.request.state = ApprovalState::Used;
        e.kind = "used".into();
        let used = body(NotifyKind::Slack, &e, None, 0).unwrap().body;
        assert!(!used.contains("approvals approve"), "{used}");
    }
}
