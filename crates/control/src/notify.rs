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
/// The header carrying the signature.
pub const SIGNATURE_HEADER: &str = "X-Fleetgate-Signature";

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
    let mut mac = <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(secret).expect("HMAC takes a key of any length");
    mac.update(payload);
    let hex: String = mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// What `event` is sent to a target of `kind` as (signed with `secret` when one is given).
pub fn body(kind: NotifyKind, event: &ApprovalEvent, secret: Option<&str>) -> Outgoing {
    let line = crate::approvals::event_line(event);
    match kind {
        NotifyKind::Webhook => {
            let body =
                json!({ "event": event.kind, "id": event.id, "at": event.at, "request": event.request }).to_string();
            let mut headers = vec![(EVENT_HEADER, event.kind.clone())];
            if let Some(secret) = secret {
                headers.push((SIGNATURE_HEADER, signature(secret.as_bytes(), body.as_bytes())));
            }
            Outgoing { body, content_type: "application/json", headers }
        }
        NotifyKind::Slack => Outgoing {
            body: json!({ "text": format!("fleetgate: {line}") }).to_string(),
            content_type: "application/json",
            headers: Vec::new(),
        },
        NotifyKind::Ntfy => {
            let tag = match event.kind.as_str() {
                "requested" => "hourglass",
                "answered" => "white_check_mark",
                _ => "information_source",
            };
            Outgoing {
                body: line,
                content_type: "text/plain; charset=utf-8",
                headers: vec![
                    ("Title", format!("fleetgate: {} {}", event.kind, event.request.id)),
                    ("Tags", tag.into()),
                ],
            }
        }
    }
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
    let out = body(target.kind, event, secret.as_deref());
    for attempt in 0..=cx.backoff.len() {
        if stop.load(Ordering::SeqCst) || !renew() {
            return false;
        }
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
        let out = body(NotifyKind::Webhook, &event(), Some("s3cret"));
        let v: serde_json::Value = serde_json::from_str(&out.body).unwrap();
        assert_eq!(
            (v["event"].as_str(), v["request"]["arguments"]["pullNumber"].as_i64()),
            (Some("requested"), Some(3))
        );
        assert_eq!(v["request"]["required"], 2);
        let sig = out.headers.iter().find(|(h, _)| *h == SIGNATURE_HEADER).map(|(_, v)| v.clone()).unwrap();
        assert_eq!(sig, signature(b"s3cret", out.body.as_bytes()));
        assert_ne!(sig, signature(b"s3cret", out.body.replace('3', "4").as_bytes()));
        // RFC 4231 test case 2: the HMAC is HMAC-SHA256.
        assert_eq!(
            signature(b"Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert!(body(NotifyKind::Webhook, &event(), None).headers.iter().all(|(h, _)| *h != SIGNATURE_HEADER));
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

    #[test]
    fn slack_and_ntfy_get_a_line_a_person_reads() {
        let slack = body(NotifyKind::Slack, &event(), None);
        let text = serde_json::from_str::<serde_json::Value>(&slack.body).unwrap()["text"].as_str().unwrap().to_owned();
        assert!(text.contains("apr-1 requested: prgs-merger") && text.contains("merge_pull_request"), "{text}");
        let ntfy = body(NotifyKind::Ntfy, &event(), None);
        assert!(ntfy.body.contains("apr-1"), "{}", ntfy.body);
        assert!(ntfy.headers.contains(&("Title", "fleetgate: requested apr-1".into())));
    }
}
