//! Replicas of one member behind a load balancer, no affinity: a 2025-11-25 session lives in
//! the process that opened it (its streams, its downstream), and the store — through the
//! control plane — says which replica that is. A request naming a session this process does
//! not hold is relayed to the replica that does, as it came (its credential included: the
//! owner authenticates it and checks the session is the caller's); a session whose replica
//! cannot be reached, or no longer has it, is forgotten and answered 404, so the client
//! re-initializes — the spec's answer to a session the server no longer has. A relayed
//! request is never relayed again, so two replicas that disagree cannot bounce one. A stateless
//! (2026-07-28) client has no session, but its SEP-2663 tasks live in the replica whose
//! downstream made them: a `tasks/get`, `tasks/update` or `tasks/cancel` naming a task this
//! process does not hold goes the same way to the replica that recorded it.

use axum::body::{Body, Bytes};
use axum::http::request::Parts;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use std::sync::Arc;
use std::time::Duration;

/// Set on a relayed request: the address of the replica that relayed it.
pub(super) const RELAYED_BY: &str = "x-fleetgate-relayed-by";

/// Set by the replica a session was relayed to on its 404 when it does not hold the session
/// (as against one it holds for another principal): only then is the record forgotten, so no
/// caller can make another's session unreachable by naming it.
const NOT_HELD: &str = "x-fleetgate-session-not-held";

/// How long the replica holding a session has to accept the connection: past it, it is
/// taken for gone.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Idle connections kept open to each other replica: a relayed request reuses one instead of
/// opening its own (each fresh connection cost a third of the throughput behind a balancer).
const MAX_IDLE_PER_REPLICA: usize = 32;

/// Headers of one hop (RFC 9110 §7.6.1), never passed on (with those `Connection` names).
const HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    header::PROXY_AUTHORIZATION,
    HeaderName::from_static("proxy-connection"),
];

/// Whether `name` is of one hop in `headers`: listed above, or named by its `Connection`.
fn hop_by_hop(headers: &axum::http::HeaderMap, name: &HeaderName) -> bool {
    HOP_BY_HOP.contains(name)
        || headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| v.split(',').any(|token| token.trim().eq_ignore_ascii_case(name.as_str())))
}

/// The answer to a session that does not exist, or is another principal's: rmcp's own
/// answer to an unknown session, so the two cannot be told apart. It lives here, below the
/// gatekeeper that also answers it, so the two modules do not import each other.
pub(super) fn unknown_session() -> Response {
    let mut response = Response::new(Body::from("Not Found: Session not found"));
    *response.status_mut() = StatusCode::NOT_FOUND;
    response
}

/// The 404 of a replica that does not hold a relayed request's session.
fn not_held() -> Response {
    let mut response = unknown_session();
    response.headers_mut().insert(NOT_HELD, HeaderValue::from_static("1"));
    response
}

/// What came of sending a request on to another replica.
enum Sent {
    /// Its answer (or the failure of one already sent, 502).
    Answered(Response),
    /// It could not be sent: the replica is not there.
    Unreachable(String),
}

/// Where this replica is, how it reaches the others' session records, and its connections to
/// them.
pub(super) struct Replicas {
    /// The address this process advertises (`host:port`), recorded with its sessions.
    pub(super) advertise: String,
    pub(super) control: Arc<dyn crate::control::ControlPlane>,
    /// HTTP/1.1 with keep-alive, a pool of idle connections per replica.
    client: Client<HttpConnector, Body>,
}

impl Replicas {
    /// The replica at `advertise`. `idle_timeout` is how long the replicas keep an idle
    /// connection open (their header timeout): a pooled one is let go well before, so a
    /// request is never written into a connection the other side is closing.
    pub(super) fn new(
        advertise: String,
        control: Arc<dyn crate::control::ControlPlane>,
        idle_timeout: Duration,
    ) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
        // Small writes (a relayed SSE event) go out at once, as on the listener's side.
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(idle_timeout / 2)
            .pool_max_idle_per_host(MAX_IDLE_PER_REPLICA)
            // The request's own `Host` is relayed as it came; none is made up.
            .set_host(false)
            .build(connector);
        Self { advertise, control, client }
    }

    /// Record that this process holds `session` (awaited: another replica must find it
    /// before the client, told its id, sends the next request there).
    pub(super) async fn opened(&self, session: &str) {
        let (control, session, me) = (self.control.clone(), session.to_owned(), self.advertise.clone());
        if let Err(e) = tokio::task::spawn_blocking(move || control.session_opened(&session, &me)).await {
            tracing::warn!(error = %e, "the session's record could not be written");
        }
    }

    /// Forget `session` (ended here, or its replica is gone).
    pub(super) async fn ended(&self, session: &str) {
        let (control, session) = (self.control.clone(), session.to_owned());
        let _ = tokio::task::spawn_blocking(move || control.session_ended(&session)).await;
    }

    async fn owner(&self, session: &str) -> Option<String> {
        // Known at once for a session relayed a moment ago: no hop to the blocking pool.
        if let Some(owner) = self.control.session_owner_now(session) {
            return Some(owner);
        }
        let (control, session) = (self.control.clone(), session.to_owned());
        tokio::task::spawn_blocking(move || control.session_owner(&session)).await.ok().flatten()
    }

    /// A request for `session`, which this process does not hold: relayed to the replica that
    /// does, else 404.
    pub(super) async fn relay(&self, session: &str, parts: &Parts, body: Bytes) -> Response {
        if parts.headers.contains_key(RELAYED_BY) {
            return not_held();
        }
        let Some(owner) = self.owner(session).await else { return unknown_session() };
        if owner == self.advertise {
            // Recorded by this address's previous process: that session is gone.
            self.ended(session).await;
            return unknown_session();
        }
        match self.send(&owner, parts, body).await {
            Sent::Answered(mut response) => {
                if response.headers_mut().remove(NOT_HELD).is_some() {
                    self.ended(session).await;
                }
                response
            }
            Sent::Unreachable(why) => {
                // Not forgotten: a replica its row says is alive may be unreachable for a
                // moment; a dead one is forgotten when its row says so.
                tracing::info!(%owner, why, "the replica holding a session cannot be reached: answered 404");
                unknown_session()
            }
        }
    }

    /// A stateless client's request about task `task`, which this process does not hold: relayed
    /// to the replica that made it, when one did and is alive; `None` to answer it here (as an
    /// unknown task).
    pub(super) async fn relay_task(
        &self,
        client: crate::control::ClientAttach,
        task: &str,
        parts: &Parts,
        body: Bytes,
    ) -> Option<Response> {
        if parts.headers.contains_key(RELAYED_BY) {
            return None;
        }
        let (control, id) = (self.control.clone(), task.to_owned());
        let owner = tokio::task::spawn_blocking(move || control.task_owner(&client, &id)).await.ok().flatten()?;
        if owner == self.advertise {
            return None;
        }
        match self.send(&owner, parts, body).await {
            Sent::Answered(response) => Some(response),
            Sent::Unreachable(why) => {
                tracing::info!(%owner, why, "the replica holding a task cannot be reached");
                None
            }
        }
    }

    /// The request sent to `owner` as it came, on a pooled connection; its answer streamed back.
    async fn send(&self, owner: &str, parts: &Parts, body: Bytes) -> Sent {
        let request = match self.relayed(owner, parts, body) {
            Ok(request) => request,
            Err(e) => {
                let text = format!("the request cannot be relayed: {e}");
                return Sent::Answered((StatusCode::BAD_REQUEST, text).into_response());
            }
        };
        let response = match self.client.request(request).await {
            Ok(response) => response,
            // Not connected: nothing was sent (a request written into a pooled connection
            // closed before it was sent is sent again on another by the pool).
            Err(e) if e.is_connect() => {
                let why = std::error::Error::source(&e).map_or_else(|| e.to_string(), ToString::to_string);
                return Sent::Unreachable(why);
            }
            Err(e) => {
                // Sent, perhaps handled: the caller learns it failed, not whether it ran.
                let e = std::error::Error::source(&e).map_or_else(|| e.to_string(), ToString::to_string);
                tracing::warn!(%owner, error = %e, "the replica holding a session or task failed while answering");
                let text = format!("the replica holding this session or task failed while answering: {e}");
                return Sent::Answered((StatusCode::BAD_GATEWAY, text).into_response());
            }
        };
        let (mut head, incoming) = response.into_parts();
        let named: Vec<HeaderName> = head.headers.keys().filter(|n| hop_by_hop(&head.headers, n)).cloned().collect();
        for name in named {
            head.headers.remove(name);
        }
        Sent::Answered(Response::from_parts(head, Body::new(incoming)))
    }

    /// The request as it is sent on: its method, path and headers (one hop's aside), the
    /// body read already, and who relayed it.
    fn relayed(&self, owner: &str, parts: &Parts, body: Bytes) -> Result<hyper::Request<Body>, axum::http::Error> {
        let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        // The pool is keyed by the owner's address; the request line carries the path alone.
        let uri = format!("http://{owner}{path}");
        let mut request = hyper::Request::builder().method(parts.method.clone()).uri(uri).body(Body::from(body))?;
        let headers = request.headers_mut();
        for (name, value) in &parts.headers {
            if !hop_by_hop(&parts.headers, name) && name != header::CONTENT_LENGTH {
                headers.append(name.clone(), value.clone());
            }
        }
        if let Some(len) = request.body().size_hint_exact() {
            request.headers_mut().insert(header::CONTENT_LENGTH, HeaderValue::from(len));
        }
        if let Ok(me) = HeaderValue::from_str(&self.advertise) {
            request.headers_mut().insert(RELAYED_BY, me);
        }
        Ok(request)
    }
}

trait ExactSize {
    fn size_hint_exact(&self) -> Option<u64>;
}

impl ExactSize for Body {
    fn size_hint_exact(&self) -> Option<u64> {
        http_body::Body::size_hint(self).exact()
    }
}
