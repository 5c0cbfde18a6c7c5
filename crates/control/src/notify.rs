//! `[[approvals.notify]]`: every approval event the store records — a request, an answer, a
//! use, a withdrawal, an expiry — sent to each target, from the store's record of it and never
//! from the gate: the gate writes the event in the transaction that made the change (a row),
//! and a notifier thread in `fleetgate serve` or `fleetgate dashboard` delivers it. A target
//! that hangs, refuses or is unreachable holds up its own thread and nothing else.
//!
//! One process delivers to a target at a time: each holds the target's cursor in the store
//! for a short while (`claim_notify`), sends the events after it in order, and advances it.
//! A failed attempt is retried after a wait that doubles from [`Backoff::first`] up to
//! [`Backoff::cap`], for as long as the request the event is about is open (pending, or
//! approved and not yet used or expired): an event that still matters is never dropped, and a
//! receiver that comes back gets every event it missed, in order. Once its request has ended
//! (denied, used, withdrawn, expired, pruned) an event that has failed [`ENDED_ATTEMPTS`]
//! times is dropped, counted (`fleetgate_notify_deliveries_total{outcome="failed"}`) and
//! logged, and the next one is sent. A target that is down stalls only itself and grows no
//! queue in memory (the store's events are the queue; a read is at most [`BATCH`] of them);
//! what it still owes ([`owed`]) is shown by `approvals watch`, the dashboard and
//! `fleetgate_notify_owed_events`. A target new to the store starts at the events recorded
//! after the notifier started.
//!
//! The bodies are pure ([`body`]); the signature is HMAC-SHA256 of the exact body with the
//! target's secret, hex, in `X-Fleetgate-Signature: sha256=…` (as GitHub signs its webhooks),
//! and the Standard Webhooks headers beside it.

use crate::metrics::{NotifyLabels, NotifyMetrics, TargetLabels};
use fleetgate_config::{NotifyKind, NotifyTarget};
use fleetgate_core::{Clock, Timestamp};
use fleetgate_store::{ApprovalEvent, NotifyHold, Store};
use hmac::{Hmac, KeyInit, Mac};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long one process holds a target's cursor before another may take it; renewed before
/// every attempt, so a slow target keeps its one deliverer.
pub const HOLD: i64 = 30;
/// The most events read at once.
pub const BATCH: usize = 64;
/// The waits between an event's attempts: the first, doubled after each failure up to the cap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    /// The wait after the first failure.
    pub first: Duration,
    /// The longest wait: a receiver that comes back hears again within it.
    pub cap: Duration,
}

/// The waits of every notifier: 0.5 s, 1 s, 2 s … 30 s, then every 30 s.
pub const BACKOFF: Backoff = Backoff { first: Duration::from_millis(500), cap: Duration::from_secs(30) };

impl Backoff {
    /// The wait after the `failures`-th failure (1: the first).
    pub fn after(self, failures: u32) -> Duration {
        let doubled = self.first.saturating_mul(1u32 << failures.saturating_sub(1).min(20));
        doubled.min(self.cap)
    }
}

/// The attempts an event whose request has ended gets before it is dropped (an event whose
/// request is open is never dropped).
pub const ENDED_ATTEMPTS: u32 = 4;
/// The most events of a target read to count what it owes.
pub const OWED_READ: usize = 1_000;
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
pub fn standard_key(secret: &str) -> Result<Vec<u8>, BadSecret> {
    use base64::Engine as _;
    match secret.strip_prefix("whsec_") {
        None => Ok(secret.as_bytes().to_vec()),
        Some(encoded) => base64::engine::general_purpose::STANDARD
            .decode(encoded.trim_end_matches('='))
            .or_else(|_| base64::engine::general_purpose::STANDARD_NO_PAD.decode(encoded.trim_end_matches('=')))
            .ok()
            .filter(|k| !k.is_empty())
            .ok_or(BadSecret),
    }
}

/// A `whsec_` secret whose rest is not base64 (the secret itself never named).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the secret starts with whsec_ but the rest is not base64")]
pub struct BadSecret;

/// Why one delivery attempt failed; URLs are shown by their origin only.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DeliveryError {
    /// The target's URL has no value now.
    #[error("the target's URL is not set: {0}")]
    UrlUnset(fleetgate_config::SecretUnset),
    /// The target's signing secret has no value now.
    #[error("the target's secret is not set: {0}")]
    SecretUnset(fleetgate_config::SecretUnset),
    /// The secret cannot sign.
    #[error("the notification cannot be signed: {0}")]
    Unsigned(BadSecret),
    /// The POST failed (the client's reason, scrubbed).
    #[error("POST {shown}: {why}")]
    Post {
        /// The URL's origin.
        shown: String,
        /// Why.
        why: String,
    },
    /// The receiver answered other than 2xx.
    #[error("POST {shown}: answered {status}")]
    Status {
        /// The URL's origin.
        shown: String,
        /// The status line's code and reason.
        status: String,
    },
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
    (r.state == fleetgate_core::approval::ApprovalState::Pending).then(|| {
        fleetgate_core::text::shown(&fleetgate_core::approval::where_answered(&r.id, &r.approvers), usize::MAX)
    })
}

/// What `event` is sent to a target of `kind` as, at `sent_at` (Unix seconds: the attempt's
/// Standard Webhooks timestamp), signed with `secret` when one is given. Everything from the
/// call is data: a webhook's JSON carries it structured, a Slack or ntfy message only inside a
/// fenced code block (escaped for Slack's mrkdwn, `verbatim`: no mention, link or emoji of the
/// call's is ever rendered); no header carries any of it. `Err` names why it cannot be signed.
pub fn body(
    kind: NotifyKind,
    event: &ApprovalEvent,
    secret: Option<&str>,
    sent_at: i64,
) -> Result<Outgoing, BadSecret> {
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
fn post(url: &str, out: &Outgoing) -> Result<(), DeliveryError> {
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
    let response = request
        .send(out.body.as_bytes())
        .map_err(|e| DeliveryError::Post { shown: shown.clone(), why: scrub(e.to_string()) })?;
    let status = response.status();
    if status.is_success() { Ok(()) } else { Err(DeliveryError::Status { shown, status: status.to_string() }) }
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
    /// Where deliveries and owed events are counted, when the process has metrics.
    pub metrics: Option<NotifyMetrics>,
    /// `[approvals] ttl_seconds`: an approval unused past it is expired (an event too).
    pub ttl_seconds: i64,
    /// The waits between an event's attempts ([`BACKOFF`]).
    pub backoff: Backoff,
    /// Waits a duration unless stopped first (whether it was stopped): [`pause`], or in a
    /// test one that moves an injected clock instead of sleeping.
    pub pause: Pause,
}

/// Waits a duration unless the flag stops it first; whether it was stopped.
pub type Pause = Arc<dyn Fn(&AtomicBool, Duration) -> bool + Send + Sync>;

/// The real [`Pause`]: sleeps.
pub fn real_pause() -> Pause {
    Arc::new(pause)
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
        m.deliveries.get_or_create(&NotifyLabels { target: target.to_owned(), outcome }).inc();
    }
}

/// Sleep `d` unless stopped first; whether it was stopped.
pub fn pause(stop: &AtomicBool, d: Duration) -> bool {
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
        match cx.store.claim_notify(
            &NotifyHold { target: &target.name, holder, until: now.plus_seconds(HOLD) },
            start,
            now,
        ) {
            Ok(Some(last)) => deliver_batch(target, cx, holder, last, stop),
            Ok(None) => {}
            Err(e) => tracing::warn!(target = %target.name, error = %e, "the notification cursor cannot be claimed"),
        }
        show_owed(target, cx);
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
    if let Err(e) = cx.store.claim_notify(&NotifyHold { target: &target.name, holder, until: now }, start, now) {
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

/// What a target still owes: the events after its cursor that it hears.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Owed {
    /// The target's name.
    pub target: String,
    /// How many (counted up to [`OWED_READ`]).
    pub events: usize,
    /// The oldest owed: its id, when it was recorded, its kind and its request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oldest: Option<OwedEvent>,
}

/// The oldest event a target owes.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct OwedEvent {
    /// The event's id.
    pub id: i64,
    /// When it was recorded.
    pub at: Timestamp,
    /// Its kind.
    pub kind: String,
    /// The request it is about.
    pub request: String,
}

impl Owed {
    /// One line for a terminal or a page.
    pub fn line(&self) -> String {
        let more = if self.events >= OWED_READ { "+" } else { "" };
        match &self.oldest {
            None => format!("notify target {} owes nothing", self.target),
            Some(o) => format!(
                "notify target {} owes {}{more} event(s), the oldest #{} ({} {}) since {}",
                self.target, self.events, o.id, o.kind, o.request, o.at
            ),
        }
    }
}

/// What `target` still owes, read from the store (its cursor and the events after it): any
/// process may ask (`approvals watch`, the dashboard). A target never claimed owes nothing.
pub fn owed(store: &dyn Store, target: &NotifyTarget) -> Result<Owed, fleetgate_store::StoreError> {
    let mut owed = Owed { target: target.name.clone(), ..Owed::default() };
    let Some(last) = store.notify_cursor(&target.name)? else { return Ok(owed) };
    let events: Vec<ApprovalEvent> =
        store.approval_events(last, OWED_READ)?.into_iter().filter(|e| target.events.contains(&e.kind)).collect();
    owed.events = events.len();
    owed.oldest =
        events.first().map(|e| OwedEvent { id: e.id, at: e.at, kind: e.kind.clone(), request: e.request.id.clone() });
    Ok(owed)
}

fn show_owed(target: &NotifyTarget, cx: &Context) {
    if let Some(m) = &cx.metrics
        && let Ok(o) = owed(&*cx.store, target)
    {
        let n = i64::try_from(o.events).unwrap_or(i64::MAX);
        m.owed.get_or_create(&TargetLabels { target: target.name.clone() }).set(n);
    }
}

/// Whether the request `event` is about has ended (denied, used, withdrawn, expired — an
/// approval past `[approvals] ttl_seconds` too — or pruned): its events no longer matter to
/// anyone waiting. A store that cannot say is taken as open: nothing is dropped on a doubt.
fn request_ended(cx: &Context, event: &ApprovalEvent) -> Option<String> {
    use fleetgate_core::approval::ApprovalState as S;
    match cx.store.approval(&event.request.id) {
        Err(_) => None,
        Ok(None) => Some("pruned".into()),
        Ok(Some(r)) => match r.state {
            S::Pending => None,
            S::Approved => {
                let lapsed = r.answered_at.is_some_and(|at| at.plus_seconds(cx.ttl_seconds) < cx.clock.now());
                lapsed.then(|| "expired".into())
            }
            s => Some(s.as_str().into()),
        },
    }
}

/// Send one event, retried with a doubling, capped wait ([`Backoff`]) while its request is
/// open; counted and logged whatever becomes of it. `renew` extends this process's hold on the
/// target before each attempt: `false` (another process holds it now, or the store failed)
/// ends the send, and so does a stop. Whether the cursor may move past the event (sent, or
/// dropped: its request ended and it failed [`ENDED_ATTEMPTS`] times).
fn send(
    target: &NotifyTarget,
    cx: &Context,
    event: &ApprovalEvent,
    stop: &AtomicBool,
    renew: &dyn Fn() -> bool,
) -> bool {
    let env = |k: &str| (cx.env)(k);
    let mut failures: u32 = 0;
    loop {
        if stop.load(Ordering::SeqCst) || !renew() {
            return false;
        }
        // Read and built for each attempt: a URL or secret put right meanwhile is used, and
        // the Standard Webhooks timestamp is the attempt's.
        let attempt = (|| {
            let url = target.url.read(&env).map_err(DeliveryError::UrlUnset)?;
            let secret =
                target.secret.as_ref().map(|s| s.read(&env)).transpose().map_err(DeliveryError::SecretUnset)?;
            let out =
                body(target.kind, event, secret.as_deref(), cx.clock.now().unix()).map_err(DeliveryError::Unsigned)?;
            post(&url, &out)
        })();
        let why = match attempt {
            Ok(()) => {
                count(cx, &target.name, "delivered");
                return true;
            }
            Err(why) => why.to_string(),
        };
        failures += 1;
        if failures >= ENDED_ATTEMPTS
            && let Some(state) = request_ended(cx, event)
        {
            count(cx, &target.name, "failed");
            tracing::warn!(target = %target.name, event = event.id, request = %event.request.id, why,
                "a notification was dropped after its last retry: its request has ended ({state})");
            return true;
        }
        count(cx, &target.name, "retried");
        let wait = cx.backoff.after(failures);
        tracing::info!(target = %target.name, event = event.id, why, wait = ?wait, "a notification is retried");
        if (cx.pause)(stop, wait) {
            return false;
        }
    }
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
                does: None,
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
        let bad = standard_key("whsec_not base64!").unwrap_err().to_string();
        assert!(!bad.contains("not base64!"), "the secret is never named: {bad}");
        // A secret that cannot sign fails the attempt; it never goes out unsigned.
        assert!(body(NotifyKind::Webhook, &event(), Some("whsec_%%%"), 0).is_err());
    }

    /// A notifier's context on `store` and `clock`, waiting no real time between attempts.
    fn context(store: Arc<dyn Store>, clock: Arc<dyn Clock>) -> Context {
        Context {
            store,
            clock,
            env: Arc::new(|_: &str| None),
            metrics: None,
            ttl_seconds: 600,
            backoff: Backoff { first: Duration::ZERO, cap: Duration::ZERO },
            pause: Arc::new(|stop: &AtomicBool, _| stop.load(Ordering::SeqCst)),
        }
    }

    /// A target that refuses an event whose request has ended (here: is not in the store):
    /// every attempt is counted, then the event is dropped, counted failed — and the loop goes
    /// on (nothing else waits on it).
    #[test]
    fn a_refusing_target_is_retried_then_counted_failed() {
        let dir = tempfile::tempdir().unwrap();
        let store = fleetgate_store::open(&dir.path().join("s.sqlite3").display().to_string()).unwrap();
        let metrics = NotifyMetrics::default();
        let cx = Context {
            metrics: Some(metrics.clone()),
            ..context(store, Arc::new(fleetgate_core::time::ManualClock::new(Timestamp::from_unix(0))))
        };
        let target = NotifyTarget {
            kind: NotifyKind::Webhook,
            url: fleetgate_config::Secret::Plain("http://127.0.0.1:1/nobody".into()),
            secret: None,
            events: vec!["requested".into()],
            name: "gone".into(),
        };
        assert!(send(&target, &cx, &event(), &AtomicBool::new(false), &|| true), "dropped: the cursor moves on");
        let n = |outcome| metrics.deliveries.get_or_create(&NotifyLabels { target: "gone".into(), outcome }).get();
        assert_eq!((n("retried"), n("failed"), n("delivered")), (ENDED_ATTEMPTS as u64 - 1, 1, 0));
        // A secret that cannot be read is a failure too, never a send without its signature.
        let unsigned = NotifyTarget { secret: Some(fleetgate_config::Secret::Env("NOPE".into())), ..target };
        send(&unsigned, &cx, &event(), &AtomicBool::new(false), &|| true);
        assert_eq!(n("failed"), 2);
        // Another process took the target: this one stops sending, and does not move on.
        assert!(!send(&target_named("gone"), &cx, &event(), &AtomicBool::new(false), &|| false));
        assert_eq!(n("retried"), 2 * (ENDED_ATTEMPTS as u64 - 1), "no attempt made without the hold");
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
        let cx = context(store, Arc::new(fleetgate_core::time::ManualClock::new(Timestamp::from_unix(0))));
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

    /// An HTTP receiver on loopback that is down (closes every connection unanswered) while
    /// `clock` is before `*back`, then records each body and answers 200.
    fn flaky_receiver(
        clock: Arc<fleetgate_core::time::ManualClock>,
        back: Arc<std::sync::Mutex<Timestamp>>,
    ) -> (String, Arc<std::sync::Mutex<Vec<serde_json::Value>>>) {
        use std::io::{BufRead as _, Read as _, Write as _};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let got = Arc::new(std::sync::Mutex::new(Vec::new()));
        let keep = Arc::clone(&got);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let mut reader = std::io::BufReader::new(stream);
                let (mut line, mut length) = (String::new(), 0usize);
                while reader.read_line(&mut line).unwrap_or(0) > 0 && !line.trim().is_empty() {
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                    line.clear();
                }
                let mut body = vec![0; length];
                let _ = reader.read_exact(&mut body);
                if clock.now() < *back.lock().unwrap() {
                    continue; // down: the connection closes unanswered
                }
                keep.lock().unwrap().push(serde_json::from_slice(&body).unwrap_or_default());
                let _ =
                    reader.get_mut().write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
            }
        });
        (url, got)
    }

    /// Issue 55: a receiver down for more than ~10 s lost events for good (each was dropped
    /// after 0.5 + 2 + 8 s of retries), the `requested` of a held call among them. Down for a
    /// minute (the notifier's waits move an injected clock: no real minute passes), it receives
    /// every event it missed, in order, once, when back; none is dropped while its request is
    /// open, and what it owes is shown meanwhile. An event whose request has ended is still
    /// dropped after its attempts, so a dead receiver holds nothing for ever.
    #[test]
    fn a_receiver_down_for_a_minute_gets_every_event_it_missed_in_order() {
        use fleetgate_core::approval::{Approver, call_digest};
        let dir = tempfile::tempdir().unwrap();
        let store = fleetgate_store::open(&dir.path().join("s.sqlite3").display().to_string()).unwrap();
        let t0 = Timestamp::from_unix(1_700_000_000);
        let clock = Arc::new(fleetgate_core::time::ManualClock::new(t0));
        let back = Arc::new(std::sync::Mutex::new(t0.plus_seconds(60)));
        let (url, got) = flaky_receiver(Arc::clone(&clock), Arc::clone(&back));
        let target = NotifyTarget {
            url: fleetgate_config::Secret::Plain(url),
            events: fleetgate_config::NOTIFY_EVENTS.iter().map(|e| (*e).to_owned()).collect(),
            ..target_named("ops")
        };
        // The target's cursor exists before the events (a target new to the store hears what
        // happens after its notifier starts).
        store.claim_notify(&NotifyHold { target: "ops", holder: "setup", until: t0 }, 0, t0).unwrap();
        let ask = |n: u8| {
            let mut r = event().request;
            r.id = format!("apr-{n}");
            r.approvers = Vec::new();
            r.required = 1;
            r.digest = call_digest(
                Some("w"),
                "merge_pull_request",
                Some(&serde_json::Map::from_iter([("n".to_owned(), serde_json::json!(n))])),
            );
            store.request_approval(&r).unwrap().id
        };
        let (a, b) = (ask(1), ask(2));
        let op = Approver { id: "os:op".into(), ..Approver::default() };
        store.answer_approval(&a, (&op, &fleetgate_core::person::People::default()), true, None, t0).unwrap(); // approved, not yet used: open
        let metrics = NotifyMetrics::default();
        let moving = Arc::clone(&clock);
        let cx = Context {
            metrics: Some(metrics.clone()),
            backoff: BACKOFF,
            // Each wait moves the injected clock instead of sleeping.
            pause: Arc::new(move |stop: &AtomicBool, wait: Duration| {
                moving.advance(i64::try_from(wait.as_millis().div_ceil(1000)).unwrap_or(1));
                std::thread::sleep(Duration::from_millis(2));
                stop.load(Ordering::SeqCst)
            }),
            ..context(Arc::clone(&store), clock.clone() as Arc<dyn Clock>)
        };
        let n = |outcome| metrics.deliveries.get_or_create(&NotifyLabels { target: "ops".into(), outcome }).get();
        let bounded = |what: &str, cond: &dyn Fn() -> bool| {
            let until = std::time::Instant::now() + Duration::from_secs(30);
            while !cond() {
                assert!(std::time::Instant::now() < until, "{what}: {:?}", got.lock().unwrap());
                std::thread::sleep(Duration::from_millis(10));
            }
        };
        // While it is down, what it owes is there to see.
        assert_eq!(owed(&*store, &target).unwrap().events, 3);
        let notifier = Notifier::start(std::slice::from_ref(&target), &cx);
        bounded("every missed event, once back", &|| got.lock().unwrap().len() >= 3);
        assert!(clock.now() >= t0.plus_seconds(60), "the minute passed (injected): {}", clock.now());
        let seen: Vec<(String, String)> = got
            .lock()
            .unwrap()
            .iter()
            .map(|v| (v["event"].as_str().unwrap().to_owned(), v["request"]["id"].as_str().unwrap().to_owned()))
            .collect();
        let expected = [("requested", &a), ("requested", &b), ("answered", &a)];
        assert_eq!(seen, expected.map(|(k, r)| (k.to_owned(), r.clone())), "in order, each once");
        assert_eq!(n("failed"), 0, "nothing dropped while its request was open");
        assert!(n("retried") >= 6, "retried through the minute: {}", n("retried"));
        bounded("owes nothing", &|| owed(&*store, &target).unwrap().events == 0);
        bounded("the gauge follows", &|| metrics.owed.get_or_create(&TargetLabels { target: "ops".into() }).get() == 0);

        // Down for good. A request that ends (withdrawn) has its events dropped after their
        // attempts; one still pending is retried, never dropped, and shown owed.
        *back.lock().unwrap() = Timestamp::from_unix(i64::MAX / 2);
        let c = ask(3);
        store.withdraw_approval(&c, "the caller went away", clock.now()).unwrap();
        bounded("the ended request's two events dropped", &|| n("failed") == 2);
        let d = ask(4);
        let later = clock.now().plus_seconds(600);
        bounded("ten (injected) minutes of retries", &|| clock.now() > later);
        assert_eq!(n("failed"), 2, "the open request's event is never dropped");
        let still = owed(&*store, &target).unwrap();
        assert_eq!((still.events, still.oldest.as_ref().map(|o| o.request.clone())), (1, Some(d)), "{still:?}");
        assert!(still.line().contains("owes 1 event(s), the oldest #"), "{}", still.line());
        notifier.stop();
        assert_eq!(got.lock().unwrap().len(), 3);
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
