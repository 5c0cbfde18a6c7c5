//! Which client request a message from the downstream belongs to, on one channel.
//!
//! Every request the gateway forwards to a channel's downstream is registered here first,
//! with the client request it was made for: that request's id and the peer its answer and
//! its side messages go to (the session's, or over stateless HTTP the request's own). A
//! progress token is mapped while the request is registered, before the downstream can
//! see it, so its first progress notification is never lost to a race.
//!
//! A request from the downstream (sampling, elicitation, roots) is routed by
//! [`originator`], a pure function of what is in flight: it goes to the client request that
//! caused it, or it is refused back to the downstream with a reason; it is never broadcast.
//! On a channel several attachments share (`[downstream] sharing = "gateway"`), a request
//! that arrives while more than one attachment has requests in flight cannot be told to
//! belong to one of them (the wire does not say which call asked): it is refused.
//!
//! Progress keeps its order and is never overtaken by the answer it precedes: the channel's
//! transport tap numbers every progress notification as it is read off the wire
//! ([`Routes::progress_read`]) and notes, for every answer, how many were read before it
//! ([`Routes::answer_read`]); the tap queues notifications in that order and one task
//! delivers them in turn ([`crate::relay::forward_to_client`]), and a forwarded request's
//! answer goes to the client only once every progress read before it was delivered, or
//! dropped with its queue full ([`Routes::settle`]). The wait is bounded, so a lost
//! notification costs a delay, never a hang.
//!
//! Short critical sections only: the table is a `std::sync::Mutex` held for a map
//! operation, never across an await.

use crate::control::AttachmentId;
use rmcp::model::{ClientCapabilities, ProgressToken, RequestId, ServerRequest};
use rmcp::service::{Peer, RoleServer};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// How long the relay waits for an earlier progress notification, and an answer for the
/// progress read before it, before going ahead anyway.
const PROGRESS_PATIENCE: Duration = Duration::from_secs(2);

/// The number the transport tap gave a progress notification, carried in its extensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ProgressSeq(pub(crate) u64);

/// Forwarded requests in flight of one attachment, at most. A client that opens more waits
/// for an answer first: the table (and the downstream's queue) stays bounded.
pub(crate) const MAX_IN_FLIGHT: usize = 256;

/// Forwarded requests in flight on one channel every attachment shares, at most.
const MAX_IN_FLIGHT_SHARED: usize = 16 * MAX_IN_FLIGHT;

/// Requests from the downstream (sampling, elicitation, roots, custom) waiting for the
/// client's answer on one channel, at most. Each is a task and a pending entry until the
/// client answers; past this the downstream's request is refused at once. As many as
/// requests in flight: every forwarded call may wait on one question of its own.
pub(crate) const MAX_PENDING_ASKS: usize = MAX_IN_FLIGHT;

/// What the gateway knows of the client a forwarded request came from.
#[derive(Clone, Debug)]
pub(crate) struct ClientFacts {
    /// The capabilities it declared (in `initialize`, or in a stateless request's `_meta`).
    pub(crate) capabilities: ClientCapabilities,
    /// It speaks 2026-07-28 or later: no server→client requests reach it, results that
    /// ask for input do.
    pub(crate) stateless_era: bool,
}

/// One forwarded request, while the downstream has not answered it.
#[derive(Clone, Debug)]
pub(crate) struct InFlight {
    /// The attachment whose request it is.
    pub(crate) attachment: AttachmentId,
    /// The client's JSON-RPC id of the request it was forwarded for.
    pub(crate) client_request: RequestId,
    /// Its method (`tools/call`, …).
    pub(crate) method: String,
    /// Where its answer and side messages go.
    pub(crate) peer: Peer<RoleServer>,
    /// The client it came from.
    pub(crate) client: ClientFacts,
}

/// The kind of a server→client request, for the capability it needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum InputKind {
    /// `sampling/createMessage`: the client's `sampling` capability.
    Sampling,
    /// `elicitation/create`: its `elicitation` capability.
    Elicitation,
    /// `roots/list`: its `roots` capability.
    Roots,
    /// Anything else the downstream asks (a custom request): no capability to check.
    Other,
}

impl InputKind {
    pub(crate) fn of(request: &ServerRequest) -> Self {
        match request {
            ServerRequest::CreateMessageRequest(_) => Self::Sampling,
            ServerRequest::ElicitRequest(_) => Self::Elicitation,
            ServerRequest::ListRootsRequest(_) => Self::Roots,
            _ => Self::Other,
        }
    }

    fn capability(self) -> Option<&'static str> {
        match self {
            Self::Sampling => Some("sampling"),
            Self::Elicitation => Some("elicitation"),
            Self::Roots => Some("roots"),
            Self::Other => None,
        }
    }

    fn declared_by(self, capabilities: &ClientCapabilities) -> bool {
        match self {
            Self::Sampling => capabilities.sampling.is_some(),
            Self::Elicitation => capabilities.elicitation.is_some(),
            Self::Roots => capabilities.roots.is_some(),
            Self::Other => true,
        }
    }
}

/// Why a server→client request was refused back to the downstream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Nothing of this channel's client is in flight: the request belongs to no one.
    NoOriginatingRequest,
    /// The originating client speaks 2026-07-28, which has no server→client requests.
    StatelessClient,
    /// The originating client did not declare the capability the request needs.
    Undeclared(&'static str),
    /// Several attachments share the downstream (or have requests in flight on it): which
    /// one's call asked cannot be told.
    Ambiguous(usize),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoOriginatingRequest => f.write_str(
                "refused by the fleetgate gateway: no client request is in flight on this connection, so this \
                 request belongs to no client (server→client requests must be made while serving one, SEP-2260); \
                 it was not forwarded to anyone",
            ),
            Self::StatelessClient => f.write_str(
                "refused by the fleetgate gateway: the client speaks MCP 2026-07-28, which has no server→client \
                 requests; the gateway does not translate them into input-required results (serve the \
                 2026-07-28 protocol from the downstream to ask for input)",
            ),
            Self::Undeclared(capability) => write!(
                f,
                "refused by the fleetgate gateway: the client of the originating request did not declare the \
                 `{capability}` capability"
            ),
            Self::Ambiguous(clients) => write!(
                f,
                "refused by the fleetgate gateway: {clients} clients share this downstream connection, so this \
                 request cannot be told to belong to one of them; it was not forwarded to anyone (serve this \
                 server with [downstream] sharing = \"session\" to ask clients)"
            ),
        }
    }
}

/// The in-flight request a server→client request of `kind` belongs to, given everything in
/// flight on the channel in the order it was sent (`(seq, method, client, attachment)`).
///
/// The oldest request that can ask for input (`tools/call`, `prompts/get`,
/// `resources/read`) wins, else the oldest of any kind, when every request in flight is one
/// attachment's: the choice only picks which of its requests' streams carries the question.
/// Requests of several attachments in flight (a shared channel): refused, since the wire
/// does not say which one asked. Nothing in flight: refused, never broadcast.
pub(crate) fn originator<'a, I>(in_flight: I, kind: InputKind) -> Result<u64, Refusal>
where
    I: IntoIterator<Item = (u64, &'a str, &'a ClientFacts, AttachmentId)>,
{
    let mut oldest = None;
    let mut oldest_asking = None;
    let mut attachments: Vec<AttachmentId> = Vec::new();
    for (seq, method, client, attachment) in in_flight {
        if !attachments.contains(&attachment) {
            attachments.push(attachment);
        }
        let better = |current: Option<(u64, &'a ClientFacts)>| current.is_none_or(|(s, _)| seq < s);
        if better(oldest) {
            oldest = Some((seq, client));
        }
        if matches!(method, "tools/call" | "prompts/get" | "resources/read") && better(oldest_asking) {
            oldest_asking = Some((seq, client));
        }
    }
    if attachments.len() > 1 {
        return Err(Refusal::Ambiguous(attachments.len()));
    }
    let (seq, client) = oldest_asking.or(oldest).ok_or(Refusal::NoOriginatingRequest)?;
    if client.stateless_era && kind != InputKind::Other {
        return Err(Refusal::StatelessClient);
    }
    if !kind.declared_by(&client.capabilities) {
        return Err(Refusal::Undeclared(kind.capability().unwrap_or("?")));
    }
    Ok(seq)
}

#[derive(Debug, Default)]
struct Table {
    next: u64,
    in_flight: BTreeMap<u64, InFlight>,
    /// The downstream's progress token → the client's, and the request it reports on.
    progress: HashMap<ProgressToken, (ProgressToken, u64)>,
    /// Progress notifications read off the wire so far, and delivered (in that order).
    progress_read: u64,
    progress_delivered: u64,
    /// The highest numbered progress dropped with its queue full.
    progress_dropped: u64,
    /// A downstream request id → how many progress notifications were read before its
    /// answer; taken by the request's sender.
    answered_at: HashMap<RequestId, u64>,
}

/// The routing state of one channel.
#[derive(Debug, Default)]
pub(crate) struct Routes {
    table: Mutex<Table>,
    /// Woken whenever a progress notification was delivered.
    turn: Notify,
    /// Held while a forwarded request is sent and its progress token mapped, and while a
    /// progress notification is delivered: a notification the downstream sends at once
    /// waits for the mapping, and notifications keep their order.
    progress_order: tokio::sync::Mutex<()>,
    /// Downstream requests waiting for the client's answer ([`MAX_PENDING_ASKS`]).
    asks: AtomicUsize,
}

/// One downstream request waiting for the client's answer; frees its place on drop.
#[derive(Debug)]
pub(crate) struct PendingAsk<'a>(&'a AtomicUsize);

impl Drop for PendingAsk<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A registered in-flight request; unregisters itself (and its progress mapping) on drop,
/// whichever way the forwarding ends.
#[derive(Debug)]
pub(crate) struct Registration<'a> {
    routes: &'a Routes,
    seq: u64,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        let mut table = self.routes.lock();
        table.in_flight.remove(&self.seq);
        let seq = self.seq;
        table.progress.retain(|_, (_, owner)| *owner != seq);
    }
}

impl Registration<'_> {
    /// Map the downstream's progress token for this request to the client's.
    pub(crate) fn map_progress(&self, downstream: ProgressToken, client: ProgressToken) {
        self.routes.lock().progress.insert(downstream, (client, self.seq));
    }
}

impl Routes {
    fn lock(&self) -> MutexGuard<'_, Table> {
        // Maps of plain values: a panic elsewhere leaves them usable.
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The async lock that orders sends against progress delivery.
    pub(crate) fn progress_order(&self) -> &tokio::sync::Mutex<()> {
        &self.progress_order
    }

    /// Register a request about to be forwarded; `None` when its attachment has
    /// [`MAX_IN_FLIGHT`] in flight already (or a shared channel its overall bound): one
    /// client's requests never take another's places.
    pub(crate) fn register(&self, entry: InFlight) -> Option<Registration<'_>> {
        let mut table = self.lock();
        let mine = table.in_flight.values().filter(|e| e.attachment == entry.attachment).count();
        if mine >= MAX_IN_FLIGHT || table.in_flight.len() >= MAX_IN_FLIGHT_SHARED {
            return None;
        }
        let seq = table.next;
        table.next += 1;
        table.in_flight.insert(seq, entry);
        Some(Registration { routes: self, seq })
    }

    /// A place for a downstream request waiting for the client; `None` when
    /// [`MAX_PENDING_ASKS`] are already waiting.
    pub(crate) fn ask(&self) -> Option<PendingAsk<'_>> {
        self.asks
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < MAX_PENDING_ASKS).then_some(n + 1))
            .ok()
            .map(|_| PendingAsk(&self.asks))
    }

    /// Where a downstream request of `kind` goes: the in-flight request it belongs to.
    pub(crate) fn route(&self, kind: InputKind) -> Result<InFlight, Refusal> {
        let table = self.lock();
        let in_flight = table.in_flight.iter().map(|(seq, e)| (*seq, e.method.as_str(), &e.client, e.attachment));
        let seq = originator(in_flight, kind)?;
        Ok(table.in_flight[&seq].clone())
    }

    /// The client's token and the peer for a downstream progress token.
    pub(crate) fn progress_target(&self, downstream: &ProgressToken) -> Option<(ProgressToken, Peer<RoleServer>)> {
        let table = self.lock();
        let (client, seq) = table.progress.get(downstream)?;
        Some((client.clone(), table.in_flight.get(seq)?.peer.clone()))
    }

    /// The tap read a progress notification: its number.
    pub(crate) fn progress_read(&self) -> u64 {
        let mut table = self.lock();
        table.progress_read += 1;
        table.progress_read
    }

    /// The tap read the answer to downstream request `id`.
    pub(crate) fn answer_read(&self, id: RequestId) {
        let mut table = self.lock();
        let read = table.progress_read;
        if table.answered_at.len() >= 4 * MAX_IN_FLIGHT {
            // Answers nobody waits for (the connection's own handshake): forget them.
            table.answered_at.clear();
        }
        table.answered_at.insert(id, read);
    }

    /// Wait until `ready` holds of the delivered count, bounded; past the bound the count
    /// is moved up to `floor` so one lost notification does not delay every later one.
    async fn wait_delivered(&self, floor: u64, ready: impl Fn(u64) -> bool) {
        let deadline = Instant::now() + PROGRESS_PATIENCE;
        loop {
            let woken = self.turn.notified();
            if ready(self.lock().progress_delivered) {
                return;
            }
            if tokio::time::timeout_at(deadline, woken).await.is_err() {
                let mut table = self.lock();
                table.progress_delivered = table.progress_delivered.max(floor);
                tracing::debug!(floor, "a progress notification was not delivered in time; going on");
                return;
            }
        }
    }

    /// Progress notification `seq` was dropped, its queue full: [`Self::caught_up`] counts
    /// it delivered once everything queued before it was.
    pub(crate) fn progress_dropped(&self, seq: ProgressSeq) {
        let mut table = self.lock();
        table.progress_dropped = table.progress_dropped.max(seq.0);
    }

    /// The queue to the client is empty: every progress dropped so far counts delivered.
    pub(crate) fn caught_up(&self) {
        let mut table = self.lock();
        if table.progress_dropped <= table.progress_delivered {
            return;
        }
        table.progress_delivered = table.progress_dropped;
        drop(table);
        self.turn.notify_waiters();
    }

    /// Progress notification `seq` was delivered (or dropped).
    pub(crate) fn delivered(&self, seq: ProgressSeq) {
        let mut table = self.lock();
        table.progress_delivered = table.progress_delivered.max(seq.0);
        drop(table);
        self.turn.notify_waiters();
    }

    /// Before passing on the answer to downstream request `id`: wait until the progress
    /// read before that answer was delivered.
    pub(crate) async fn settle(&self, id: &RequestId) {
        let Some(target) = self.lock().answered_at.remove(id) else { return };
        self.wait_delivered(target, |delivered| delivered >= target).await;
    }

    /// The peer of the oldest request in flight, when every request in flight is one
    /// attachment's: where a side notification (logging) that answers no request goes,
    /// having no session stream to go to (a stateless attachment), or on a shared channel.
    pub(crate) fn sole_peer(&self) -> Option<Peer<RoleServer>> {
        let table = self.lock();
        let mut in_flight = table.in_flight.values();
        let first = in_flight.next()?;
        in_flight.all(|e| e.attachment == first.attachment).then(|| first.peer.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::{ClientFacts, InputKind, Refusal, originator};
    use crate::control::AttachmentId;

    const ONE: AttachmentId = AttachmentId(1);
    use rmcp::model::{ClientCapabilities, ElicitationCapability, RootsCapabilities};

    fn facts(elicitation: bool, stateless_era: bool) -> ClientFacts {
        let mut capabilities = ClientCapabilities::default();
        if elicitation {
            capabilities.elicitation = Some(ElicitationCapability::default());
        }
        capabilities.roots = Some(RootsCapabilities::default());
        ClientFacts { capabilities, stateless_era }
    }

    #[test]
    fn nothing_in_flight_is_refused_never_broadcast() {
        assert_eq!(originator([], InputKind::Elicitation), Err(Refusal::NoOriginatingRequest));
        assert_eq!(originator([], InputKind::Other), Err(Refusal::NoOriginatingRequest));
    }

    #[test]
    fn the_oldest_call_that_can_ask_wins_over_older_plain_requests() {
        let f = facts(true, false);
        let in_flight = [(3, "tools/list", &f, ONE), (5, "tools/call", &f, ONE), (7, "tools/call", &f, ONE)];
        assert_eq!(originator(in_flight, InputKind::Elicitation), Ok(5));
        assert_eq!(originator([(9, "resources/list", &f, ONE)], InputKind::Roots), Ok(9));
    }

    #[test]
    fn the_originating_client_must_be_able_to_answer() {
        let silent = facts(false, false);
        assert_eq!(
            originator([(1, "tools/call", &silent, ONE)], InputKind::Elicitation),
            Err(Refusal::Undeclared("elicitation"))
        );
        assert_eq!(
            originator([(1, "tools/call", &silent, ONE)], InputKind::Sampling),
            Err(Refusal::Undeclared("sampling"))
        );
        assert_eq!(originator([(1, "tools/call", &silent, ONE)], InputKind::Roots), Ok(1));
        let modern = facts(true, true);
        assert_eq!(
            originator([(1, "tools/call", &modern, ONE)], InputKind::Elicitation),
            Err(Refusal::StatelessClient)
        );
    }

    /// A `tools/call` in flight of `attachment` with client id `i`, on a session peer of a
    /// service that answers nothing (kept alive by the first value).
    fn entries() -> (Box<dyn std::any::Any>, impl Fn(AttachmentId, i64) -> super::InFlight) {
        struct Nobody;
        impl rmcp::ServerHandler for Nobody {}
        let (ours, theirs) = tokio::io::duplex(4096);
        let running = rmcp::service::serve_directly::<rmcp::RoleServer, _, _, _, _>(Nobody, ours, None);
        let peer = running.peer().clone();
        let client = facts(true, false);
        let entry = move |attachment, i| super::InFlight {
            attachment,
            client_request: rmcp::model::RequestId::Number(i),
            method: "tools/call".to_owned(),
            peer: peer.clone(),
            client: client.clone(),
        };
        (Box::new((running, theirs)), entry)
    }

    /// Issue #19, resource bounds: the in-flight table refuses past [`MAX_IN_FLIGHT`], and
    /// the progress-token map lives inside it — one entry per registered request at most,
    /// gone with its registration, whichever way the forwarding ended.
    #[tokio::test]
    async fn in_flight_requests_and_their_progress_tokens_are_bounded_and_emptied() {
        use super::{MAX_IN_FLIGHT, Routes};
        use rmcp::model::{NumberOrString, ProgressToken};
        let (_running, entry) = entries();
        let entry = |i: i64| entry(ONE, i);
        let routes = Routes::default();
        let token = |i: i64| ProgressToken(NumberOrString::Number(i));
        let held: Vec<_> = (0..MAX_IN_FLIGHT as i64)
            .map(|i| {
                let registration = routes.register(entry(i)).expect("room for the first MAX_IN_FLIGHT");
                registration.map_progress(token(10_000 + i), token(i));
                registration
            })
            .collect();
        assert!(routes.register(entry(-1)).is_none(), "one past the bound is refused");
        assert_eq!(routes.lock().progress.len(), MAX_IN_FLIGHT);
        assert_eq!(routes.progress_target(&token(10_000)).map(|(t, _)| t), Some(token(0)));
        drop(held);
        let table = routes.lock();
        assert!(table.in_flight.is_empty(), "every registration is gone");
        assert!(table.progress.is_empty(), "and every progress token with it");
        drop(table);
        assert!(routes.progress_target(&token(10_000)).is_none());
        assert!(routes.register(entry(0)).is_some(), "room again");
    }

    /// A shared channel: while two attachments have calls in flight, a server→client request
    /// cannot be told to belong to one of them, whatever the order or the kind.
    #[test]
    fn with_two_attachments_in_flight_a_server_request_is_refused_not_guessed() {
        let f = facts(true, false);
        let two = AttachmentId(2);
        let mixed = [(1, "tools/call", &f, ONE), (2, "tools/call", &f, two)];
        for kind in [InputKind::Elicitation, InputKind::Sampling, InputKind::Roots, InputKind::Other] {
            assert_eq!(originator(mixed, kind), Err(Refusal::Ambiguous(2)), "{kind:?}");
        }
        assert_eq!(
            originator([(1, "tools/list", &f, ONE), (2, "tools/call", &f, two)], InputKind::Roots),
            Err(Refusal::Ambiguous(2))
        );
        assert_eq!(originator([(4, "tools/call", &f, two), (5, "tools/call", &f, two)], InputKind::Elicitation), Ok(4));
        assert!(Refusal::Ambiguous(2).to_string().contains("not forwarded to anyone"));
    }

    /// On a shared channel one client's requests never take another's places: each
    /// attachment has its own [`MAX_IN_FLIGHT`].
    #[tokio::test]
    async fn one_attachment_filling_its_bound_leaves_room_for_another() {
        use super::{MAX_IN_FLIGHT, Routes};
        let (_running, entry) = entries();
        let routes = Routes::default();
        let held: Vec<_> = (0..MAX_IN_FLIGHT as i64).map(|i| routes.register(entry(ONE, i)).unwrap()).collect();
        assert!(routes.register(entry(ONE, -1)).is_none(), "the first client is at its bound");
        assert!(routes.register(entry(AttachmentId(2), 0)).is_some(), "the second still has room");
        drop(held);
    }

    #[test]
    fn refusals_say_why_and_that_nothing_was_forwarded() {
        let text = Refusal::NoOriginatingRequest.to_string();
        assert!(text.contains("not forwarded to anyone"), "{text}");
        assert!(Refusal::Undeclared("sampling").to_string().contains("`sampling`"));
    }
}
