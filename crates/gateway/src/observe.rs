//! What the gateway tells whoever measures it: [`GatewayObserver`], set in
//! [`crate::GatewayOptions::observer`]. The gateway knows no metrics library; the caller
//! (fleetgate's Prometheus registry) records what it is told and renders `GET /metrics` on
//! the HTTP listener.
//!
//! Every method has a default that does nothing, and every call site is on a path the
//! gateway runs anyway: the observer must stay cheap (an atomic add, a histogram
//! observation) and must never block — it is called on the async workers.

use std::fmt;
use std::time::Duration;

/// A request's `_meta` object, as the trace-context hooks see it.
pub type MetaObject = serde_json::Map<String, serde_json::Value>;

/// How the gateway takes part in a distributed trace, set in
/// [`crate::GatewayOptions::trace`]. The gateway knows no tracing SDK: the caller (fleetgate's
/// OpenTelemetry export) links the gateway's `tracing` spans to the W3C trace context the
/// `_meta` of a request carries (`traceparent`, `tracestate`). Without one (`None`) the
/// caller's `_meta` is forwarded unchanged.
///
/// Both methods are called on the async workers: they must not block.
pub trait TraceContext: Send + Sync + fmt::Debug + 'static {
    /// `span` (a `tools/call` span, not yet entered) continues the caller's trace named in
    /// the request's `meta`, if it names one.
    fn adopt(&self, span: &tracing::Span, meta: &MetaObject);

    /// The `meta` about to be forwarded to the downstream, rewritten so its trace context
    /// names `span` (the `forward` span) as the parent.
    fn inject(&self, span: &tracing::Span, meta: &mut MetaObject);
}

/// A `GET /metrics` answer: its `Content-Type` and body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exposition {
    /// The `Content-Type` header (Prometheus text 0.0.4, or OpenMetrics).
    pub content_type: &'static str,
    /// The encoded metric families.
    pub body: String,
}

/// Told what the gateway does, as it does it. See the module doc.
pub trait GatewayObserver: Send + Sync + fmt::Debug + 'static {
    /// A `tools/call` the gate allowed was forwarded and got its answer (or failed) after
    /// `elapsed`, measured from the send to the answer: the downstream's time plus the
    /// gateway's own relaying, the gate excluded.
    fn forwarded_call(&self, elapsed: Duration) {
        let _ = elapsed;
    }

    /// A downstream run ended without being asked to and a new one started.
    fn downstream_restarted(&self) {}

    /// A downstream's flow was quarantined (`true`), or its quarantine ended or was
    /// lifted (`false`). Each channel reports its own; the calls pair up.
    fn downstream_quarantined(&self, quarantined: bool) {
        let _ = quarantined;
    }

    /// Over Streamable HTTP: the number of client attachments (sessions and stateless
    /// clients) open now, told after each one opens or closes.
    fn http_sessions_open(&self, open: usize) {
        let _ = open;
    }

    /// A notification was dropped because its receiver is not reading and its channel's
    /// queue is full; `direction` is `to_client` or `to_downstream`. Called once per drop.
    fn notification_dropped(&self, direction: &'static str) {
        let _ = direction;
    }

    /// The body of `GET /metrics` on the HTTP listener; `accept` is the request's `Accept`
    /// header. `None` (the default): the listener has no `/metrics` (404).
    fn exposition(&self, accept: Option<&str>) -> Option<Exposition> {
        let _ = accept;
        None
    }
}
