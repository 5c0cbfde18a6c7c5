//! The gatekeeper: the one axum middleware in front of rmcp's service — who (the bearer
//! token or the tokens-file principal), what (one JSON-RPC message per POST, no removed
//! 2026-07-28 method, no DELETE of an ended session), and how many (attachment admission
//! and the arrival rate, one request per id in flight in a session, a few event streams
//! per session) — refusing with a JSON-RPC error body before rmcp sees the request.

use super::listen::ConnectionScope;
use super::replica::unknown_session;
use super::resume::Resumable;
use super::slots::{Slot, Slots, hold_while_answering};
use super::together::together;
use super::*;
use rmcp::transport::streamable_http_server::session::SessionManager as _;
use std::collections::HashMap;

/// New attachments admitted per second, sustained, and in one burst: a client that opens
/// sessions in a loop is slowed down before the bounds are even reached.
const ARRIVALS_PER_SECOND: f64 = 16.0;
const ARRIVALS_BURST: f64 = 32.0;

/// A token bucket for new attachments.
#[derive(Debug)]
pub(super) struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    pub(super) fn full() -> Self {
        Self { tokens: ARRIVALS_BURST, at: Instant::now() }
    }

    fn take(&mut self, now: Instant) -> bool {
        let refill = now.saturating_duration_since(self.at).as_secs_f64() * ARRIVALS_PER_SECOND;
        self.tokens = (self.tokens + refill).min(ARRIVALS_BURST);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// What the gatekeeper middleware checks against.
pub(super) struct Gatekeeper {
    pub(super) hub: Arc<Hub>,
    pub(super) token: Option<String>,
    pub(super) principals: Option<Principals>,
    /// The OAuth 2.1 resource server's verifier, when `[http.oauth]` is set.
    pub(super) oauth: Option<Arc<crate::oauth::Verifier>>,
    pub(super) profile: Option<String>,
    pub(super) max_body: usize,
    /// How long a POST's body may take to arrive (a trickled body holds a connection).
    pub(super) body_timeout: Duration,
    pub(super) arrivals: Mutex<Bucket>,
    /// Each session's request ids being answered.
    pub(super) requests: Arc<Slots<RequestKey>>,
    /// Each session's open event streams (GET).
    pub(super) event_streams: Arc<Slots<String>>,
    /// Each attachment's open `subscriptions/listen` streams.
    pub(super) listeners: Arc<Slots<Listener>>,
    /// rmcp's sessions, asked whether one a DELETE names still exists.
    pub(super) sessions: Arc<super::resume::Sessions>,
    /// Who opened each session: a session is served to the principal that opened it only.
    pub(super) owners: Mutex<Owners>,
    /// The connections each principal holds, counted from its first authenticated request.
    pub(super) connections: Arc<Slots<String>>,
    /// How many of them one principal may hold ([`connection_share`]).
    pub(super) connection_share: usize,
    /// Where this replica is, and the sessions other replicas hold (`None`: no address to
    /// advertise, so no session is recorded or relayed).
    pub(super) replicas: Option<super::replica::Replicas>,
}

/// One principal's share of the connection cap: the cap divided among the identities that
/// can authenticate (each principal of the tokens file, and the shared token's caller), so
/// no one of them can hold every connection and starve the others. Without authentication
/// there is one identity, and the share is the whole cap. Pure.
pub(super) fn connection_share(max_connections: usize, identities: usize) -> usize {
    (max_connections / identities.max(1)).max(1)
}

/// Each session's opener, recorded when its `initialize` is answered with its id.
#[derive(Debug, Default)]
pub(super) struct Owners {
    by_session: HashMap<String, Authenticated>,
}

impl Owners {
    /// Whether `caller` may use `session`: only the one that opened it — the same kind of
    /// credential, subject and principal. A session never recorded here (unknown, or ended
    /// and forgotten) is nobody's.
    pub(super) fn may_use(&self, session: &str, caller: &Authenticated) -> bool {
        self.by_session.get(session).is_some_and(|owner| owner == caller)
    }
}

/// The most of why a token was refused that is said back (in `WWW-Authenticate` and the
/// body) or logged, in characters.
const MAX_REFUSAL_SHOWN: usize = 200;

/// `text` cut to `max` characters.
fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// How many recorded owners, beyond the attachments' bound, prompt a sweep of the ended ones.
const OWNERS_SLACK: usize = 64;

/// Event streams (GET) one session may hold open at once. rmcp sends on one of them and
/// keeps the rest alive with pings; a few cover a client reconnecting before the server
/// noticed its old stream was gone.
pub(super) const MAX_EVENT_STREAMS: usize = 4;

/// A session id and a request id (its JSON text: `1` and `"1"` are different ids).
pub(super) type RequestKey = (String, String);

/// Whose `subscriptions/listen` streams a slot counts: an attachment's — a session's, or a
/// stateless client's (its principal and `clientInfo`, as the hub keys it).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Listener {
    Session(String),
    Stateless(StatelessKey),
}

/// A response that refuses a request before rmcp sees it (boxed: it is the rare path).
type Refused = Box<Response>;

/// A JSON-RPC error as an HTTP response with `status`.
fn jsonrpc_refusal(status: StatusCode, id: Option<serde_json::Value>, code: i32, message: String) -> Refused {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id.unwrap_or(serde_json::Value::Null),
        "error": { "code": code, "message": message },
    });
    let mut response = (status, body.to_string()).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if status == StatusCode::SERVICE_UNAVAILABLE {
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
    }
    Box::new(response)
}

/// The parts of a POSTed message the gatekeeper looks at; serde skips the rest.
#[derive(serde::Deserialize)]
struct Probe {
    id: Option<serde_json::Value>,
    method: Option<String>,
    params: Option<ProbeParams>,
}

#[derive(serde::Deserialize)]
struct ProbeParams {
    #[serde(rename = "_meta")]
    meta: Option<serde_json::Map<String, serde_json::Value>>,
    /// Present on a 2025-style `initialize` handshake, whatever version it offers.
    #[serde(rename = "protocolVersion")]
    protocol_version: Option<serde_json::Value>,
    /// A `subscriptions/listen`'s filter.
    notifications: Option<serde_json::Value>,
    /// A `tasks/*` request's task. Any JSON (read as a string where it is one): a field of a
    /// type rmcp would accept elsewhere must not fail the probe, or the message would skip
    /// every check the probe drives.
    #[serde(rename = "taskId")]
    task_id: Option<serde_json::Value>,
}

impl Probe {
    fn meta(&self) -> Option<&serde_json::Map<String, serde_json::Value>> {
        self.params.as_ref().and_then(|p| p.meta.as_ref())
    }
}

const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";

fn stateless_version(version: Option<&str>) -> bool {
    version
        .and_then(|v| serde_json::from_value::<ProtocolVersion>(serde_json::Value::String(v.to_owned())).ok())
        .is_some_and(|v| !v.has_initialize())
}

/// The stateless attachment a request of `principal` with `meta` is served by: its client
/// read from `clientInfo` as rmcp reads it for the gateway (anything it cannot read is
/// `unknown`), so the gatekeeper and the hub name the same attachment.
fn stateless_key(principal: &str, meta: Option<&serde_json::Map<String, serde_json::Value>>) -> StatelessKey {
    let info = meta
        .and_then(|m| m.get(META_CLIENT_INFO))
        .and_then(|i| serde_json::from_value::<rmcp::model::Implementation>(i.clone()).ok())
        .unwrap_or_else(|| rmcp::model::Implementation::new("unknown", "unknown"));
    StatelessKey { principal: principal.to_owned(), client_name: info.name, client_version: info.version }
}

impl Gatekeeper {
    /// The principal of a request, or the response refusing it.
    async fn authenticate(&self, headers: &HeaderMap) -> Result<Authenticated, Refused> {
        if self.token.is_none() && self.principals.is_none() && self.oauth.is_none() {
            return Ok(Authenticated::Anonymous);
        }
        let presented = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(fleetgate_core::origin::bearer_token);
        if let Some(presented) = presented {
            if let Some(principal) = self.principals.as_ref().and_then(|p| p.authenticate(presented)) {
                if let Some(profile) = &self.profile
                    && !principal.may_serve(profile)
                {
                    tracing::info!(principal = %principal.name, %profile, "request refused: profile not allowed");
                    let text = format!("Forbidden: principal {} may not use profile {profile}", principal.name);
                    return Err(Box::new((StatusCode::FORBIDDEN, text).into_response()));
                }
                return Ok(Authenticated::TokensFile(principal.name.clone()));
            }
            if self.token.as_deref().is_some_and(|t| same_secret(presented.as_bytes(), t.as_bytes())) {
                return Ok(Authenticated::Anonymous);
            }
            // Not one of the operator's own tokens (which may be shaped like a JWT too): an
            // access token of the authorization server, when it has the shape of one.
            if let Some(verifier) = self.oauth.as_ref().filter(|_| crate::oauth::looks_like_jwt(presented)) {
                return self.authenticate_jwt(verifier, presented).await;
            }
        }
        // Neither the presented nor the expected value is logged.
        tracing::info!("request refused: missing or wrong bearer token");
        Err(self.unauthorized("Unauthorized: a bearer token is required", None))
    }

    /// 401, with where to find the authorization server when OAuth is on (RFC 9728 §5.1)
    /// and, for a token that was refused, `error="invalid_token"` (RFC 6750 §3) with why,
    /// cut to [`MAX_REFUSAL_SHOWN`] characters of a quoted-string's plain ones.
    fn unauthorized(&self, text: &str, invalid: Option<&str>) -> Refused {
        let challenge = match &self.oauth {
            Some(verifier) => {
                let mut value = format!("Bearer resource_metadata=\"{}\"", verifier.settings().metadata_url());
                if let Some(why) = invalid {
                    let why: String = why
                        .chars()
                        .filter(|c| (c.is_ascii_graphic() || *c == ' ') && !matches!(c, '"' | '\\'))
                        .take(MAX_REFUSAL_SHOWN)
                        .collect();
                    value.push_str(&format!(", error=\"invalid_token\", error_description=\"{why}\""));
                }
                value
            }
            None => "Bearer".to_owned(),
        };
        let mut response = (StatusCode::UNAUTHORIZED, text.to_owned()).into_response();
        if let Ok(value) = HeaderValue::from_str(&challenge) {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, value);
        }
        Box::new(response)
    }

    /// A JWT access token: verified against the issuer's keys, then its principal's profiles
    /// against the one this gateway serves. Neither the token nor its claims are logged.
    async fn authenticate_jwt(
        &self,
        verifier: &Arc<crate::oauth::Verifier>,
        token: &str,
    ) -> Result<Authenticated, Refused> {
        use crate::oauth::TokenRefusal;
        match verifier.verify(token).await {
            Ok(principal) => {
                if let Some(profile) = &self.profile
                    && !principal.may_serve(profile)
                {
                    tracing::info!(principal = %principal.name, %profile, "request refused: profile not granted by the token");
                    let text = format!("Forbidden: principal {} may not use profile {profile}", principal.name);
                    let mut response = (StatusCode::FORBIDDEN, text).into_response();
                    let value = "Bearer error=\"insufficient_scope\"";
                    response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(value));
                    return Err(Box::new(response));
                }
                Ok(Authenticated::OAuth { subject: principal.subject, principal: principal.name })
            }
            Err(TokenRefusal::Invalid(why)) => {
                // What a token says is the client's: whatever it put there, only so much is said back.
                let why = cut(&why, MAX_REFUSAL_SHOWN);
                tracing::info!(%why, "request refused: access token not accepted");
                Err(self.unauthorized(&format!("Unauthorized: the access token is not accepted: {why}"), Some(&why)))
            }
            Err(TokenRefusal::KeysUnavailable(why)) => {
                tracing::warn!(%why, "request refused: the issuer's keys cannot be read");
                let text = format!("the authorization server's keys cannot be read, so no token can be checked: {why}");
                let mut response = (StatusCode::SERVICE_UNAVAILABLE, text).into_response();
                response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
                Err(Box::new(response))
            }
        }
    }

    /// Whether one more attachment for `principal` may be made now: this process's bounds and
    /// arrival rate, then the principal's attachments across the member's replicas.
    async fn admit(
        &self,
        principal: &str,
        id: Option<serde_json::Value>,
        stateless: Option<&StatelessKey>,
    ) -> Result<(), Refused> {
        self.admit_here(principal, id.clone())?;
        if principal.is_empty() {
            return Ok(());
        }
        let control = self.hub.control.clone();
        let limit = self.hub.max_per_principal();
        let who = principal.to_owned();
        let client = stateless.map(|k| (k.client_name.clone(), k.client_version.clone()));
        let judged = tokio::task::spawn_blocking(move || {
            control.admit_principal(&who, limit, client.as_ref().map(|(n, v)| (n.as_str(), v.as_str())))
        })
        .await;
        match judged {
            Ok(Err(why)) => Err(jsonrpc_refusal(StatusCode::TOO_MANY_REQUESTS, id, -32000, why.to_string())),
            _ => Ok(()),
        }
    }

    /// [`admit`](Self::admit) by this process's own count.
    fn admit_here(&self, principal: &str, id: Option<serde_json::Value>) -> Result<(), Refused> {
        match self.hub.admit(principal) {
            Ok(()) => {}
            Err(refused @ NotAdmitted::PrincipalFull(_)) => {
                return Err(jsonrpc_refusal(StatusCode::TOO_MANY_REQUESTS, id, -32000, refused.to_string()));
            }
            Err(refused) => {
                return Err(jsonrpc_refusal(StatusCode::SERVICE_UNAVAILABLE, id, -32000, refused.to_string()));
            }
        }
        if !self.arrivals.lock().unwrap_or_else(PoisonError::into_inner).take(Instant::now()) {
            let text = "too many new clients at once: retry in a moment".to_owned();
            return Err(jsonrpc_refusal(StatusCode::TOO_MANY_REQUESTS, id, -32000, text));
        }
        Ok(())
    }

    /// Judge one POSTed message (`probe`: what it says, when it parses) before rmcp sees it.
    async fn screen(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        probe: Option<&Probe>,
        principal: &Authenticated,
    ) -> Result<(), Refused> {
        if body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
            let text = "batches are not supported: send one JSON-RPC message per POST".to_owned();
            return Err(jsonrpc_refusal(StatusCode::BAD_REQUEST, None, -32600, text));
        }
        if headers.contains_key("mcp-session-id") {
            return Ok(());
        }
        // Not JSON, or not a request: rmcp answers it.
        let Some(probe) = probe else { return Ok(()) };
        let Some(method) = probe.method.as_deref() else { return Ok(()) };
        // An `initialize` that offers a version is the 2025 handshake, even when the version
        // it offers is 2026-07-28 (rmcp's client does that): it is answered, negotiated down.
        // Only a 2026-07-28 request *named* `initialize` is the removed method.
        let handshake = probe.params.as_ref().is_some_and(|p| p.protocol_version.is_some());
        let meta = probe.meta();
        let meta_version = meta.and_then(|m| m.get(META_PROTOCOL_VERSION)).and_then(serde_json::Value::as_str);
        let header_version = headers.get("mcp-protocol-version").and_then(|v| v.to_str().ok());
        let stateless = stateless_version(meta_version) || stateless_version(header_version);
        let who = principal.principal().unwrap_or_default().to_owned();
        let id = || probe.id.clone();
        if method == "initialize" {
            if stateless && !handshake {
                let text = "`initialize` does not exist in MCP 2026-07-28".to_owned();
                return Err(jsonrpc_refusal(StatusCode::NOT_FOUND, id(), -32601, text));
            }
            return self.admit(&who, id(), None).await;
        }
        if probe.id.is_none() || !stateless_version(meta_version) {
            return Ok(());
        }
        let key = stateless_key(&who, meta);
        if self.hub.knows(&key) { Ok(()) } else { self.admit(&who, id(), Some(&key)).await }
    }

    /// A request in a session holds its id while it is answered. rmcp keys a session's
    /// requests by id: a second one with an id in flight would take over the first's
    /// answer stream, and one of the two answers would be lost. It gets 409 instead.
    fn hold_id(&self, headers: &HeaderMap, probe: Option<&Probe>) -> Result<Option<Slot<RequestKey>>, Refused> {
        let Some(session) = headers.get("mcp-session-id").and_then(|v| v.to_str().ok()) else { return Ok(None) };
        // Not a request (or not JSON): nothing is answered, nothing to hold.
        let Some(Probe { id: Some(id), method: Some(_), .. }) = probe else {
            return Ok(None);
        };
        match self.requests.take((session.to_owned(), id.to_string()), 1) {
            Some(slot) => Ok(Some(slot)),
            None => {
                let error = crate::frame::duplicate_id(id);
                Err(jsonrpc_refusal(StatusCode::CONFLICT, Some(id.clone()), error.code.0, error.message.into_owned()))
            }
        }
    }

    /// A `subscriptions/listen` holds a place among its attachment's streams while its
    /// stream is open, taken here, before rmcp: rmcp acknowledges a stream before the
    /// gateway sees it, so a stream beyond the bounds — one more than a client may hold open,
    /// or more resources than one may name — is refused here, never acknowledged and then
    /// closed. (The channel's own bound, behind this one, is the same.)
    fn hold_listener(
        &self,
        headers: &HeaderMap,
        probe: Option<&Probe>,
        principal: &Authenticated,
    ) -> Result<Option<Slot<Listener>>, Refused> {
        let Some(probe) = probe.filter(|p| p.method.as_deref() == Some("subscriptions/listen")) else {
            return Ok(None);
        };
        let Some(id) = probe.id.clone() else { return Ok(None) };
        let uris = probe
            .params
            .as_ref()
            .and_then(|p| p.notifications.as_ref())
            .and_then(|n| n.get("resourceSubscriptions"))
            .and_then(serde_json::Value::as_array)
            .map_or(0, Vec::len);
        if let Some(why) = crate::subscriptions::too_many_resources(uris) {
            return Err(jsonrpc_refusal(StatusCode::BAD_REQUEST, Some(id), -32602, why));
        }
        let whose = match headers.get("mcp-session-id").and_then(|v| v.to_str().ok()) {
            Some(session) => Listener::Session(session.to_owned()),
            None => Listener::Stateless(stateless_key(principal.principal().unwrap_or_default(), probe.meta())),
        };
        match self.listeners.take(whose, crate::subscriptions::MAX_LISTENERS) {
            Some(slot) => Ok(Some(slot)),
            None => {
                let why = crate::subscriptions::too_many_streams();
                Err(jsonrpc_refusal(StatusCode::TOO_MANY_REQUESTS, Some(id), -32602, why))
            }
        }
    }

    /// Record who opened the session a response names (an answered `initialize`); past the
    /// bound, forget the sessions rmcp has ended (DELETE forgets its own at once).
    async fn record_owner(&self, session: String, principal: &Authenticated) {
        if let Some(replicas) = &self.replicas {
            replicas.opened(&session).await;
        }
        let recorded: Vec<String> = {
            let mut owners = self.owners.lock().unwrap_or_else(PoisonError::into_inner);
            owners.by_session.insert(session, principal.clone());
            if owners.by_session.len() <= self.hub.max_attachments() + OWNERS_SLACK {
                return;
            }
            owners.by_session.keys().cloned().collect()
        };
        for id in recorded {
            if !self.sessions.has_session(&id.clone().into()).await.unwrap_or(true) {
                self.owners.lock().unwrap_or_else(PoisonError::into_inner).by_session.remove(&id);
                // Ended here (expired idle): no replica relays to it again.
                if let Some(replicas) = &self.replicas {
                    replicas.ended(&id).await;
                }
            }
        }
    }

    /// Whether this process opened `session` (and has not seen it end).
    fn holds(&self, session: &str) -> bool {
        self.owners.lock().unwrap_or_else(PoisonError::into_inner).by_session.contains_key(session)
    }

    /// A request naming a session this process never opened goes to the replica that did, when
    /// there are replicas (`None`: this process judges it — its own, another principal's, or
    /// unknown).
    async fn elsewhere(
        &self,
        session: &str,
        parts: &axum::http::request::Parts,
        body: axum::body::Bytes,
    ) -> Option<Response> {
        let replicas = self.replicas.as_ref().filter(|_| !self.holds(session))?;
        Some(replicas.relay(session, parts, body).await)
    }

    /// A stateless client's `tasks/get`, `tasks/update` or `tasks/cancel` naming a task this
    /// process does not hold: the answer of the replica that made it, when another did.
    async fn task_elsewhere(
        &self,
        parts: &axum::http::request::Parts,
        probe: Option<&Probe>,
        principal: &Authenticated,
        body: &axum::body::Bytes,
    ) -> Option<Response> {
        let replicas = self.replicas.as_ref()?;
        let probe = probe?;
        if !matches!(probe.method.as_deref(), Some("tasks/get" | "tasks/update" | "tasks/cancel")) {
            return None;
        }
        let task = probe.params.as_ref()?.task_id.as_ref()?.as_str()?;
        let meta = probe.meta();
        let version = meta.and_then(|m| m.get(META_PROTOCOL_VERSION)).and_then(serde_json::Value::as_str);
        if parts.headers.contains_key("mcp-session-id") || !stateless_version(version) {
            return None;
        }
        let key = stateless_key(principal.principal().unwrap_or_default(), meta);
        if self.hub.has_task(&key, task) {
            return None;
        }
        let client = crate::control::ClientAttach {
            client_name: key.client_name,
            client_version: key.client_version,
            protocol_version: version.unwrap_or_default().to_owned(),
            principal: principal.principal().map(str::to_owned),
            stateless: true,
        };
        replicas.relay_task(client, task, parts, body.clone()).await
    }

    /// Whether `principal` may use `session` (see [`Owners::may_use`]).
    fn owns(&self, session: &str, principal: &Authenticated) -> bool {
        let owned = self.owners.lock().unwrap_or_else(PoisonError::into_inner).may_use(session, principal);
        if !owned {
            tracing::info!(
                principal = principal.principal().unwrap_or("-"),
                "request refused: a session this principal did not open (answered as unknown)"
            );
        }
        owned
    }

    /// A GET or DELETE of a session: its event streams are bounded, and a session that has
    /// ended (deleted already, say) answers 404 where rmcp would accept the DELETE again.
    async fn session_request(&self, session: String, request: Request, next: Next) -> Response {
        match *request.method() {
            Method::GET => {
                // rmcp answers a resume it cannot serve 200 with an empty stream, which a
                // client takes as "reconnect later", forever: one naming no stream of this
                // session is refused here instead.
                let resuming = request.headers().get("last-event-id").and_then(|v| v.to_str().ok());
                if let Some(last) = resuming
                    && self.sessions.resumable(&session, last) == Resumable::Unknown
                {
                    tracing::info!(last_event_id = last, "resume refused: no stream of the session has this event");
                    let text = format!(
                        "no stream of this session has the event {last:?} (an answer is kept for {} s after it \
                         is sent): nothing can be resumed from it",
                        super::resume::KEEP_FOR.as_secs()
                    );
                    return *jsonrpc_refusal(StatusCode::GONE, None, -32000, text);
                }
                let Some(slot) = self.event_streams.take(session, MAX_EVENT_STREAMS) else {
                    let text = format!(
                        "this session has {MAX_EVENT_STREAMS} event streams (GET) open already: close one before \
                         opening another"
                    );
                    return *jsonrpc_refusal(StatusCode::TOO_MANY_REQUESTS, None, -32000, text);
                };
                hold_while_answering(next.run(request).await, slot)
            }
            Method::DELETE => {
                // On an error, rmcp's own answer stands.
                let known = self.sessions.has_session(&session.clone().into()).await.unwrap_or(true);
                let response = next.run(request).await;
                if !known && response.status() == StatusCode::ACCEPTED {
                    return unknown_session();
                }
                if response.status().is_success() {
                    self.owners.lock().unwrap_or_else(PoisonError::into_inner).by_session.remove(&session);
                    if let Some(replicas) = &self.replicas {
                        replicas.ended(&session).await;
                    }
                }
                response
            }
            _ => next.run(request).await,
        }
    }
}

/// `response` to a request whose body was not read whole: hyper closes the connection
/// after it (it cannot find where the next request starts), so say so — a client that
/// pooled the connection would otherwise send its next request into a closed socket.
fn closing(mut response: Response) -> Response {
    response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// Whether a request says its body is JSON (`application/json`, parameters aside).
fn is_json(headers: &HeaderMap) -> bool {
    headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| {
        v.split(';').next().is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
    })
}

/// 400 for a POST body that is not a JSON-RPC message, with the error the stdio judge
/// gives the same bytes (`-32700` not JSON, `-32600` not a message, `-32602` bad params).
fn not_a_message(body: &[u8]) -> Refused {
    let (error, id) = match crate::frame::judge(body) {
        crate::frame::Verdict::Reply(error, id) => (error, id),
        crate::frame::Verdict::Drop(reason) => (ErrorData::invalid_request(reason, None), None),
        crate::frame::Verdict::Pass(_) => (ErrorData::invalid_request("not a JSON-RPC message", None), None),
    };
    let id = id.and_then(|id| serde_json::to_value(id).ok());
    jsonrpc_refusal(StatusCode::BAD_REQUEST, id, error.code.0, error.message.into_owned())
}

/// Who, what and how many, before rmcp: see the module doc.
pub(super) async fn gatekeeper(State(gate): State<Arc<Gatekeeper>>, request: Request, next: Next) -> Response {
    let principal = match gate.authenticate(request.headers()).await {
        Ok(principal) => principal,
        Err(refused) => return closing(*refused),
    };
    if let Some(scope) = request.extensions().get::<ConnectionScope>() {
        let key = principal.principal().unwrap_or_default().to_owned();
        let share = gate.connection_share;
        if !scope.count_against(&key, || gate.connections.take(key.clone(), share)) {
            tracing::info!(
                principal = principal.principal().unwrap_or("-"),
                share,
                "connection refused: the principal holds its share of the connection cap"
            );
            let text = format!(
                "this principal holds its share of {share} open connections: close one (or reuse a kept-alive \
                 one) before opening another"
            );
            return closing(*jsonrpc_refusal(StatusCode::TOO_MANY_REQUESTS, None, -32000, text));
        }
    }
    let (mut parts, body) = request.into_parts();
    parts.extensions.insert(principal.clone());
    if parts.method != Method::POST {
        let session = parts.headers.get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
        return match session {
            Some(session) if parts.uri.path() == HTTP_ENDPOINT => {
                if let Some(relayed) = gate.elsewhere(&session, &parts, axum::body::Bytes::new()).await {
                    return relayed;
                }
                if !gate.owns(&session, &principal) {
                    return unknown_session();
                }
                gate.session_request(session, Request::from_parts(parts, body), next).await
            }
            _ => next.run(Request::from_parts(parts, body)).await,
        };
    }
    let read = tokio::time::timeout(gate.body_timeout, axum::body::to_bytes(body, gate.max_body));
    let bytes = match read.await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(_)) => {
            let text = format!("the message is larger than the gateway accepts ({} bytes)", gate.max_body);
            return closing(*jsonrpc_refusal(StatusCode::PAYLOAD_TOO_LARGE, None, -32600, text));
        }
        Err(_) => {
            let text = format!("the request body did not arrive within {} s", gate.body_timeout.as_secs_f64());
            return closing(*jsonrpc_refusal(StatusCode::REQUEST_TIMEOUT, None, -32600, text));
        }
    };
    let session = parts.headers.get("mcp-session-id").and_then(|v| v.to_str().ok());
    if let Some(session) = session
        && parts.uri.path() == HTTP_ENDPOINT
    {
        if let Some(relayed) = gate.elsewhere(session, &parts, bytes.clone()).await {
            // The owner sent its events together; they leave this hop the same way.
            return together(relayed).await;
        }
        if !gate.owns(session, &principal) {
            return unknown_session();
        }
    }
    let opens_session = session.is_none();
    let probe = serde_json::from_slice::<Probe>(&bytes).ok();
    if let Err(refused) = gate.screen(&parts.headers, &bytes, probe.as_ref(), &principal).await {
        return *refused;
    }
    let held = match gate.hold_id(&parts.headers, probe.as_ref()) {
        Ok(held) => held,
        Err(refused) => return *refused,
    };
    if let Some(answered) = gate.task_elsewhere(&parts, probe.as_ref(), &principal, &bytes).await {
        return answered;
    }
    let listening = match gate.hold_listener(&parts.headers, probe.as_ref(), &principal) {
        Ok(listening) => listening,
        Err(refused) => return *refused,
    };
    drop(probe);
    let json = is_json(&parts.headers);
    let response = next.run(Request::from_parts(parts, Body::from(bytes.clone()))).await;
    let opened = response.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
    if opens_session && let Some(session) = opened {
        gate.record_owner(session, &principal).await;
    }
    // rmcp answers 415 to a JSON body that is no JSON-RPC message: the content type was
    // right, the message is not — 400, with the error stdio gives the same line.
    if response.status() == StatusCode::UNSUPPORTED_MEDIA_TYPE && json {
        return *not_a_message(&bytes);
    }
    let response = together(response).await;
    match (held, listening) {
        (None, None) => response,
        slots => hold_while_answering(response, slots),
    }
}

#[cfg(test)]
mod tests {
    use super::Bucket;

    #[test]
    fn new_attachments_are_rate_limited_by_a_refilling_bucket() {
        let start = tokio::time::Instant::now();
        let mut bucket = Bucket::full();
        bucket.at = start;
        let taken = (0..100).filter(|_| bucket.take(start)).count();
        assert_eq!(taken, 32, "one burst");
        assert!(!bucket.take(start + std::time::Duration::from_millis(10)), "0.16 of a token is not one");
        assert!(bucket.take(start + std::time::Duration::from_millis(100)), "1.6 tokens refilled");
    }

    #[test]
    fn each_identity_gets_a_share_of_the_connection_cap() {
        use super::connection_share;
        assert_eq!(connection_share(512, 1), 512, "one identity: the whole cap");
        assert_eq!(connection_share(512, 0), 512, "no authentication: one identity");
        assert_eq!(connection_share(512, 3), 170);
        assert_eq!(connection_share(8, 2), 4);
        assert_eq!(connection_share(2, 5), 1, "never none");
    }
}
