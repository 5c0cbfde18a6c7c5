//! The gateway over MCP's Streamable HTTP transport: one endpoint (`/mcp`), several
//! clients, each an attachment of its own with a downstream of its own.
//!
//! rmcp's `StreamableHttpService` owns the wire: sessions (`Mcp-Session-Id`, a
//! `LocalSessionManager` whose request streams [`resume`] journals for a client resuming one),
//! SSE streams, the stateless 2026-07-28 requests, the body cap,
//! and the DNS-rebinding checks on `Host` and `Origin` (403). It builds one service per
//! session (and one per stateless request) from a factory; each is a [`Gateway`] over the
//! shared [`Hub`], which makes the attachment: a session's at its `initialize`, a
//! stateless client's at its first request (one per principal and `clientInfo`). The
//! service must be a `ServerHandler`, so [`HttpGateway`] adapts the gateway's one
//! `dispatch` to its typed methods; the gate therefore runs on exactly the code path stdio
//! uses. When rmcp drops a session's service (DELETE, idle expiry, a closed transport) the
//! attachment is detached; a stateless one is retired by the sweeper after the worker TTL.
//!
//! In front of it sits one axum middleware, the gatekeeper:
//! * who: the bearer token against `FLEETGATE_HTTP_TOKEN` or the tokens file's principals
//!   (401 otherwise; 403 for a principal not allowed this profile), compared in constant
//!   time, never logged; the principal rides the request's extensions to the gateway;
//! * what: a JSON array (a batch) is answered 400 with a JSON-RPC `-32600` body, a body
//!   that is no JSON-RPC message 400 (rmcp says 415); a 2026-07-28 request for a method
//!   that generation removed gets 404 and `-32601`; a DELETE of an ended session 404; a
//!   session is bound to the credential that opened it, its kind and principal (recorded when its `initialize` is
//!   answered): another principal, or the shared token's caller, naming it gets rmcp's own
//!   404 for an unknown session, on POST, GET and DELETE;
//! * how many: a request that would make a new attachment is admitted only within the
//!   bounds ([`Limits`]: 503 when the gateway is full, 429 when the principal is) and
//!   the rate of new attachments (429); a session's request id is held while answered
//!   (409 for a second request with it) and its event streams are bounded (429);
//! * how many connections: a connection is counted against the principal of its first
//!   authenticated request for as long as it stays open (`listen::ConnectionScope`); one
//!   principal may hold its share of the connection cap — the cap divided among the
//!   identities that can authenticate — and past it is answered 429 and closed, so it cannot
//!   starve the others. Connections not yet authenticated are bounded by the header timeout.
//!
//! Beneath it, the listener (`listen`) bounds the connections themselves: the header and
//! body timeouts and the connection cap ([`ConnectionLimits`]), before any of this runs.
//!
//! With an observer ([`GatewayOptions::observer`]) the listener also serves `GET /metrics`
//! (its exposition), behind the same gatekeeper and the same `Host`/`Origin` rules
//! (`fleetgate_core::origin::HostRules`, which also give rmcp its allowed hosts).
//!
//! ```text
//! control_tools()            once
//! bind the listener          loopback unless `allow_remote` (and then a token is required)
//! on_transport_bound()       the runtime row
//! serve                      per attachment: channel + downstream, on_client_attach … decide … on_detach
//! SIGTERM | SIGINT | shutdown future
//! sessions cancelled, listener closed (bounded)
//! on_shutdown(reason)  ‖  every attachment's downstream stopped
//! ```

use crate::auth::Principals;
use crate::control::ControlPlane;
use crate::error::GatewayError;
use crate::gateway::{Authenticated, Gateway};
use crate::hub::{Hub, Limits, NotAdmitted, StatelessKey};
use crate::lifecycle::ShutdownReason;
use crate::observe::GatewayObserver;
use crate::options::GatewayOptions;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use fleetgate_core::origin::{HostRules, same_secret};
use rmcp::ErrorData;
#[expect(deprecated, reason = "legacy-era methods are still forwarded")]
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, CallToolResult, ClientNotification, ClientRequest,
    CompleteRequest, CompleteRequestParams, CompleteResult, CustomNotification, CustomRequest, CustomResult,
    DiscoverRequest, DiscoverResult, GetPromptRequest, GetPromptRequestParams, GetPromptResponse, GetPromptResult,
    InitializeRequest, InitializeRequestParams, InitializeResult, ListPromptsRequest, ListPromptsResult,
    ListResourceTemplatesRequest, ListResourceTemplatesResult, ListResourcesRequest, ListResourcesResult,
    ListToolsRequest, ListToolsResult, PaginatedRequestParams, ProtocolVersion, ReadResourceRequest,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, RootsListChangedNotification, ServerResult,
    SetLevelRequest, SetLevelRequestParams, SubscribeRequest, SubscribeRequestParams, SubscriptionFilter,
    UnsubscribeRequest, UnsubscribeRequestParams,
};
use rmcp::model::{
    CancelTaskParams, CancelTaskRequest, GetTaskParams, GetTaskRequest, GetTaskResult, UpdateTaskParams,
    UpdateTaskRequest,
};

mod gatekeeper;
mod listen;
mod metrics_listener;
mod replica;
mod resume;
mod slots;
mod strict;
mod together;
pub use crate::options::ConnectionLimits;
use gatekeeper::{Bucket, Gatekeeper, gatekeeper};
pub use listen::serve_connections;
pub(crate) use metrics_listener::start_metrics_listener;
use rmcp::service::{NotificationContext, RequestContext, RoleServer, Service as _};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde::de::DeserializeOwned;
use std::borrow::Cow;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The path of the MCP endpoint.
pub const HTTP_ENDPOINT: &str = "/mcp";
/// The path of the Prometheus endpoint (served when [`GatewayOptions::observer`] is set).
pub const METRICS_ENDPOINT: &str = "/metrics";

/// How the HTTP transport listens.
#[derive(Clone)]
pub struct HttpOptions {
    /// The address to listen on. Loopback unless [`allow_remote`](Self::allow_remote).
    pub listen: SocketAddr,
    /// Allow a non-loopback listen address (the operator's explicit choice).
    pub allow_remote: bool,
    /// Extra `Host` values accepted besides the listen address and, on loopback, the
    /// `localhost` forms (a remote deployment's DNS name).
    pub allowed_hosts: Vec<String>,
    /// When set, a request may carry `Authorization: Bearer <token>` (it has no principal).
    pub bearer_token: Option<String>,
    /// When set, a request may carry the token of one of these principals (its client
    /// name is the principal). With neither this nor a bearer token, requests are not
    /// authenticated (loopback only).
    pub principals: Option<Principals>,
    /// When set, a request may carry a JWT access token of this authorization server (its
    /// principal and profiles from its claims or the mapping).
    pub oauth: Option<crate::oauth::OAuthSettings>,
    /// The profile this gateway serves, checked against a principal's profile list.
    pub profile: Option<String>,
    /// Bounds on attachments.
    pub limits: Limits,
    /// Bounds on connections: the cap, the header and body timeouts.
    pub connections: ConnectionLimits,
    /// The address (`host:port`) other replicas of this member reach this one at, recorded
    /// with each session it opens so a request for it that reaches another replica is
    /// relayed here. `None`: the listen address, unless that is unspecified (`0.0.0.0`),
    /// in which case sessions are neither recorded nor relayed.
    pub advertise: Option<String>,
}

impl std::fmt::Debug for HttpOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token is a secret: only whether one is set.
        f.debug_struct("HttpOptions")
            .field("listen", &self.listen)
            .field("allow_remote", &self.allow_remote)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("bearer_token", &self.bearer_token.as_ref().map(|_| "<set>"))
            .field("principals", &self.principals)
            .field("profile", &self.profile)
            .field("limits", &self.limits)
            .field("connections", &self.connections)
            .field("advertise", &self.advertise)
            .finish()
    }
}

/// Build a runtime and the log subscriber like [`crate::run`], and [`serve_http`] until
/// SIGTERM or SIGINT; `bound` is told the listening address.
pub fn run_http(
    options: GatewayOptions,
    http: HttpOptions,
    control: Arc<dyn ControlPlane>,
    bound: impl FnOnce(SocketAddr),
) -> Result<ShutdownReason, GatewayError> {
    crate::lifecycle::init_logging(options.log_filter.as_deref())?;
    // Two workers: unlike stdio, many sessions' requests arrive at once.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(64)
        .enable_all()
        .build()
        .map_err(GatewayError::Runtime)?;
    let outcome = runtime.block_on(async {
        let signalled = crate::lifecycle::shutdown_signals()?;
        serve_http(options, http, control, signalled, bound).await
    });
    runtime.shutdown_timeout(Duration::from_millis(200));
    outcome
}

/// Serve the gateway over Streamable HTTP until `shutdown` completes. `bound` is told the
/// listening address once the listener is bound (port 0 picks one).
pub async fn serve_http<S, B>(
    options: GatewayOptions,
    http: HttpOptions,
    control: Arc<dyn ControlPlane>,
    shutdown: S,
    bound: B,
) -> Result<ShutdownReason, GatewayError>
where
    S: Future<Output = ShutdownReason>,
    B: FnOnce(SocketAddr),
{
    check_listen(&http)?;
    let tools_plane = control.clone();
    let control_tools = tokio::task::spawn_blocking(move || tools_plane.control_tools())
        .await
        .map_err(|e| GatewayError::ControlPlane { call: "control_tools", reason: e.to_string() })?;
    let listener = tokio::net::TcpListener::bind(http.listen)
        .await
        .map_err(|source| GatewayError::Bind { addr: http.listen, source })?;
    let local = listener.local_addr().map_err(|source| GatewayError::Bind { addr: http.listen, source })?;
    tracing::info!(listen = %local, endpoint = HTTP_ENDPOINT, token = http.bearer_token.is_some(),
        principals = http.principals.as_ref().map_or(0, Principals::len), "listening");
    bound(local);

    let hub = crate::lifecycle::start_hub(&options, &control, control_tools, http.limits, true).await?;
    let cancel = CancellationToken::new();
    let router = router(&hub, &options, &http, local, cancel.clone());

    let stop = CancellationToken::new();
    let server = tokio::spawn(listen::serve_connections(listener, router, http.connections, stop.clone()));
    let sweeper_engine = hub.clone();
    let sweeper = tokio::spawn(async move {
        loop {
            tokio::time::sleep(sweeper_engine.sweep_every()).await;
            sweeper_engine.expire_idle().await;
        }
    });
    let reason = shutdown.await;
    tracing::info!(reason = reason.as_str(), "shutting down");
    sweeper.abort();
    // Sessions first (their SSE streams would hold graceful shutdown open), then the
    // listener, bounded.
    cancel.cancel();
    stop.cancel();
    match tokio::time::timeout(Duration::from_secs(2), server).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "the HTTP server task failed"),
        Err(_) => tracing::warn!("the HTTP server did not stop within 2 s"),
    }

    crate::lifecycle::stop_hub(&hub, None, &reason).await;
    Ok(reason)
}

/// A non-empty token; a non-loopback address only with `--allow-remote` and authentication;
/// no OAuth mapping that names another principal.
fn check_listen(http: &HttpOptions) -> Result<(), GatewayError> {
    let authenticated = http.bearer_token.is_some() || http.principals.is_some() || http.oauth.is_some();
    if http.bearer_token.as_deref() == Some("") {
        return Err(GatewayError::EmptyToken);
    }
    if !http.listen.ip().is_loopback() && !http.allow_remote {
        return Err(GatewayError::RemoteListen(http.listen));
    }
    if !http.listen.ip().is_loopback() && !authenticated {
        return Err(GatewayError::RemoteWithoutToken(http.listen));
    }
    if let Some(oauth) = &http.oauth {
        oauth.check_principals(http.principals.as_ref()).map_err(GatewayError::Principals)?;
    }
    Ok(())
}

/// The routes: rmcp's service at the MCP endpoint, `/metrics` when observed, the gatekeeper
/// in front of both.
fn router(
    hub: &Arc<Hub>,
    options: &GatewayOptions,
    http: &HttpOptions,
    local: SocketAddr,
    cancel: CancellationToken,
) -> axum::Router {
    let hosts = HostRules::new(local, &http.allowed_hosts);
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts.hosts().to_vec())
        .with_allowed_origins(hosts.origins().to_vec())
        .enforce_origin_validation()
        .with_max_request_body_bytes(options.max_message_bytes)
        .with_cancellation_token(cancel);
    let factory_engine = hub.clone();
    let sessions = Arc::new(resume::Sessions::default());
    let service = StreamableHttpService::new(
        move || Ok(HttpGateway(Gateway::http(factory_engine.clone()))),
        sessions.clone(),
        config,
    );
    let gate = Arc::new(Gatekeeper {
        hub: hub.clone(),
        token: http.bearer_token.clone(),
        principals: http.principals.clone(),
        oauth: http.oauth.clone().map(|s| Arc::new(crate::oauth::Verifier::new(s))),
        profile: http.profile.clone(),
        max_body: options.max_message_bytes,
        body_timeout: http.connections.body_timeout,
        arrivals: Mutex::new(Bucket::full()),
        requests: Arc::default(),
        event_streams: Arc::default(),
        listeners: Arc::default(),
        sessions,
        owners: Mutex::default(),
        connections: Arc::default(),
        replicas: advertised(http, local).map(|advertise| {
            let _ = hub.advertise.set(advertise.clone());
            replica::Replicas::new(advertise, hub.control.clone(), http.connections.header_timeout)
        }),
        connection_share: gatekeeper::connection_share(
            http.connections.max_connections,
            http.principals.as_ref().map_or(0, Principals::len)
                + usize::from(http.bearer_token.is_some())
                + http.oauth.as_ref().map_or(0, |o| o.principals.len().max(1)),
        ),
    });
    let mut router = axum::Router::new().route_service(HTTP_ENDPOINT, service);
    if let Some(observer) = options.observer.clone() {
        // The gatekeeper has authenticated the request.
        let endpoint = Arc::new(MetricsEndpoint { observer, hosts, token: None });
        router = router.route(METRICS_ENDPOINT, axum::routing::get(metrics).with_state(endpoint));
    }
    let mut router = router.layer(axum::middleware::from_fn_with_state(gate, gatekeeper));
    if let Some(oauth) = &http.oauth {
        // Public, as RFC 9728 has it (a client reads it before it has a token); after the
        // gatekeeper layer, so outside it, with the same Host/Origin rules.
        let document = Arc::new((oauth.metadata(), HostRules::new(local, &http.allowed_hosts)));
        for path in oauth.metadata_paths() {
            router = router.route(&path, axum::routing::get(protected_resource).with_state(document.clone()));
        }
    }
    router
}

/// The address this process's sessions are recorded at: the one the operator advertises, else
/// the listen address unless it is unspecified (no other host could reach `0.0.0.0`).
fn advertised(http: &HttpOptions, local: SocketAddr) -> Option<String> {
    if let Some(advertise) = &http.advertise {
        return Some(advertise.clone());
    }
    if local.ip().is_unspecified() {
        tracing::warn!(listen = %local, "no address to advertise: sessions are not relayed between replicas (--advertise)");
        return None;
    }
    Some(local.to_string())
}

/// `GET /.well-known/oauth-protected-resource[/mcp]`: the RFC 9728 metadata document.
async fn protected_resource(
    State(document): State<Arc<(serde_json::Value, HostRules)>>,
    headers: HeaderMap,
) -> Response {
    let header = |name| headers.get(name).and_then(|v: &HeaderValue| v.to_str().ok());
    if let Err(foreign) = document.1.judge(header(header::HOST), header(header::ORIGIN)) {
        return (StatusCode::FORBIDDEN, format!("Forbidden: {}", foreign.as_str())).into_response();
    }
    ([(header::CONTENT_TYPE, "application/json")], document.0.to_string()).into_response()
}

/// What `GET /metrics` answers with: on the HTTP transport's listener behind the gatekeeper
/// (the same token or principals as the MCP endpoint), on a stdio gateway's own listener
/// behind its `token`; the same `Host`/`Origin` rules on both.
struct MetricsEndpoint {
    observer: Arc<dyn GatewayObserver>,
    hosts: HostRules,
    /// The bearer token every request must carry (`None`: none, or the gatekeeper's).
    token: Option<String>,
}

/// `GET /metrics`: the observer's exposition (OpenMetrics when the scraper asks for it).
/// `Host`/`Origin` first (403), then the token (401).
async fn metrics(State(endpoint): State<Arc<MetricsEndpoint>>, headers: HeaderMap) -> Response {
    let header = |name| headers.get(name).and_then(|v: &HeaderValue| v.to_str().ok());
    if let Err(foreign) = endpoint.hosts.judge(header(header::HOST), header(header::ORIGIN)) {
        tracing::info!(reason = foreign.as_str(), "metrics request refused");
        return (StatusCode::FORBIDDEN, format!("Forbidden: {}", foreign.as_str())).into_response();
    }
    if let Some(token) = &endpoint.token {
        let presented = header(header::AUTHORIZATION).and_then(fleetgate_core::origin::bearer_token);
        if !presented.is_some_and(|p| same_secret(p.as_bytes(), token.as_bytes())) {
            tracing::info!("metrics request refused: no valid bearer token");
            return (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, "Bearer")], "Unauthorized\n")
                .into_response();
        }
    }
    match endpoint.observer.exposition(header(header::ACCEPT)) {
        Some(exposition) => ([(header::CONTENT_TYPE, exposition.content_type)], exposition.body).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// One session's gateway as the `ServerHandler` rmcp's HTTP service requires: every typed
/// method goes back through [`Gateway::dispatch`], so gate, forwarding and control tools
/// behave exactly as over stdio.
struct HttpGateway(Gateway);

/// A forwarded result as the typed value a handler method returns. rmcp decodes the
/// downstream's answer into one `ServerResult` variant by shape, so an answer may arrive
/// as a look-alike variant; it is re-read through JSON as the type the method answers.
fn expect<T: DeserializeOwned>(result: Result<ServerResult, ErrorData>) -> Result<T, ErrorData> {
    let value = serde_json::to_value(result?)
        .map_err(|e| ErrorData::internal_error(format!("cannot re-encode a result: {e}"), None))?;
    serde_json::from_value(value)
        .map_err(|e| ErrorData::internal_error(format!("the downstream answered an unexpected result: {e}"), None))
}

// Logging and resource subscriptions are deprecated for 2026-07-28 but still the legacy
// sessions' methods: they are forwarded like every other method.
#[expect(deprecated, reason = "legacy-era methods are still forwarded")]
impl rmcp::ServerHandler for HttpGateway {
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        match self.0.dispatch(ClientRequest::InitializeRequest(InitializeRequest::new(request)), context).await? {
            ServerResult::InitializeResult(result) => Ok(result),
            other => expect(Ok(other)),
        }
    }

    async fn ping(&self, _context: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        Ok(())
    }

    async fn discover(&self, context: RequestContext<RoleServer>) -> Result<DiscoverResult, ErrorData> {
        match self.0.dispatch(ClientRequest::DiscoverRequest(DiscoverRequest::default()), context).await? {
            ServerResult::DiscoverResult(result) => Ok(result),
            other => expect(Ok(other)),
        }
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        expect(self.0.dispatch(ClientRequest::CompleteRequest(CompleteRequest::new(request)), context).await)
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.0.dispatch(ClientRequest::SetLevelRequest(SetLevelRequest::new(request)), context).await.map(|_| ())
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        match self.0.dispatch(ClientRequest::GetPromptRequest(GetPromptRequest::new(request)), context).await? {
            ServerResult::InputRequiredResult(input) => Ok(GetPromptResponse::InputRequired(input)),
            other => expect::<GetPromptResult>(Ok(other)).map(GetPromptResponse::Complete),
        }
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let list = ListPromptsRequest { params: request, ..Default::default() };
        expect(self.0.dispatch(ClientRequest::ListPromptsRequest(list), context).await)
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let list = ListResourcesRequest { params: request, ..Default::default() };
        expect(self.0.dispatch(ClientRequest::ListResourcesRequest(list), context).await)
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let list = ListResourceTemplatesRequest { params: request, ..Default::default() };
        expect(self.0.dispatch(ClientRequest::ListResourceTemplatesRequest(list), context).await)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        match self.0.dispatch(ClientRequest::ReadResourceRequest(ReadResourceRequest::new(request)), context).await? {
            ServerResult::InputRequiredResult(input) => Ok(ReadResourceResponse::InputRequired(input)),
            other => expect::<ReadResourceResult>(Ok(other)).map(ReadResourceResponse::Complete),
        }
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.0.dispatch(ClientRequest::SubscribeRequest(SubscribeRequest::new(request)), context).await.map(|_| ())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let request = ClientRequest::UnsubscribeRequest(UnsubscribeRequest::new(request));
        self.0.dispatch(request, context).await.map(|_| ())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        match self.0.dispatch(ClientRequest::CallToolRequest(CallToolRequest::new(request)), context).await? {
            ServerResult::CallToolResult(result) => Ok(CallToolResponse::from(result)),
            ServerResult::InputRequiredResult(input) => Ok(CallToolResponse::InputRequired(input)),
            ServerResult::CreateTaskResult(task) => Ok(CallToolResponse::Task(task)),
            other => expect::<CallToolResult>(Ok(other)).map(CallToolResponse::from),
        }
    }

    // SEP-2663: rmcp has checked that the gateway advertises the tasks extension (its
    // downstream does) and that the client declared it; whose task it is, the gateway checks.
    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let get = GetTaskRequest::new(request);
        match self.0.dispatch(ClientRequest::GetTaskRequest(get), context).await? {
            ServerResult::GetTaskResult(result) => Ok(result),
            other => expect(Ok(other)),
        }
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let update = UpdateTaskRequest::new(request);
        self.0.dispatch(ClientRequest::UpdateTaskRequest(update), context).await.map(|_| ())
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let cancel = CancelTaskRequest::new(request);
        self.0.dispatch(ClientRequest::CancelTaskRequest(cancel), context).await.map(|_| ())
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let list = ListToolsRequest { params: request, ..Default::default() };
        match self.0.dispatch(ClientRequest::ListToolsRequest(list), context).await? {
            ServerResult::ListToolsResult(result) => Ok(result),
            other => expect(Ok(other)),
        }
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        match self.0.dispatch(ClientRequest::CustomRequest(request), context).await? {
            ServerResult::CustomResult(result) => Ok(result),
            other => serde_json::to_value(other)
                .map(CustomResult::new)
                .map_err(|e| ErrorData::internal_error(format!("cannot re-encode a result: {e}"), None)),
        }
    }

    async fn on_roots_list_changed(&self, _context: NotificationContext<RoleServer>) {
        self.0.notify(ClientNotification::RootsListChangedNotification(RootsListChangedNotification::default())).await;
    }

    async fn on_custom_notification(
        &self,
        notification: CustomNotification,
        _context: NotificationContext<RoleServer>,
    ) {
        self.0.notify(ClientNotification::CustomNotification(notification)).await;
    }

    fn get_info(&self) -> InitializeResult {
        self.0.get_info()
    }

    /// Every category a `subscriptions/listen` asks for; rmcp keeps those the gateway
    /// advertises (its `get_info`) before acknowledging.
    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        Some(requested.clone())
    }

    async fn listen(&self, subscription: rmcp::service::SubscriptionContext) -> Result<(), ErrorData> {
        self.0.listen(subscription).await
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        self.0.supported_protocol_versions()
    }
}
