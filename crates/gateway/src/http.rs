//! The gateway over MCP's Streamable HTTP transport: one endpoint (`/mcp`), several
//! clients, each HTTP session its own client attachment.
//!
//! rmcp's `StreamableHttpService` owns the wire: sessions (`Mcp-Session-Id`, a
//! `LocalSessionManager`), SSE streams, one JSON-RPC message per POST (a JSON array is
//! refused with 4xx), the body cap, and the DNS-rebinding checks on `Host` and `Origin`
//! (403). It builds one service per session from a factory; that is the per-session hook:
//! the factory numbers the attachment and hands out a [`Gateway`] for it, sharing the
//! control plane, the downstream and the hub. The service must be a `ServerHandler`, so
//! [`HttpGateway`] adapts the gateway's one `dispatch` to its typed methods; the gate
//! therefore runs on exactly the code path stdio uses. When rmcp drops a session's
//! service (DELETE, idle expiry, a closed transport) the gateway calls `on_detach`.
//!
//! In front of it sits one axum middleware: the bearer token, when configured, on every
//! request (401 otherwise, compared in constant time, never logged).
//!
//! ```text
//! control_tools()            once
//! bind the listener          loopback unless `allow_remote`
//! on_transport_bound()       the runtime row
//! start the downstream       supervised; connected after the first session's initialize
//! serve                      per session: on_client_attach … decide … on_detach
//! SIGTERM | SIGINT | shutdown future
//! sessions cancelled, listener closed (bounded)
//! on_shutdown(reason)  ‖  cancel the downstream flow
//! ```

use crate::control::{AttachmentId, ControlPlane};
use crate::error::GatewayError;
use crate::gateway::Gateway;
use crate::options::GatewayOptions;
use crate::serve::ShutdownReason;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::ErrorData;
#[expect(deprecated, reason = "legacy-era methods are still forwarded")]
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, CallToolResult, ClientNotification, ClientRequest,
    CompleteRequest, CompleteRequestParams, CompleteResult, CustomNotification, CustomRequest, CustomResult,
    GetPromptRequest, GetPromptRequestParams, GetPromptResponse, GetPromptResult, InitializeRequest,
    InitializeRequestParams, InitializeResult, ListPromptsRequest, ListPromptsResult, ListResourceTemplatesRequest,
    ListResourceTemplatesResult, ListResourcesRequest, ListResourcesResult, ListToolsRequest, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ReadResourceRequest, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, RootsListChangedNotification, ServerResult, SetLevelRequest, SetLevelRequestParams,
    SubscribeRequest, SubscribeRequestParams, UnsubscribeRequest, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer, Service as _};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde::de::DeserializeOwned;
use std::borrow::Cow;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The path of the MCP endpoint.
pub const HTTP_ENDPOINT: &str = "/mcp";

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
    /// When set, every request must carry `Authorization: Bearer <token>`.
    pub bearer_token: Option<String>,
}

impl std::fmt::Debug for HttpOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token is a secret: only whether one is set.
        f.debug_struct("HttpOptions")
            .field("listen", &self.listen)
            .field("allow_remote", &self.allow_remote)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("bearer_token", &self.bearer_token.as_ref().map(|_| "<set>"))
            .finish()
    }
}

/// The `Host` values accepted for `listen`: its own authority, and on loopback the
/// `localhost` / `127.0.0.1` / `[::1]` forms with the same port.
fn allowed_hosts(listen: SocketAddr, extra: &[String]) -> Vec<String> {
    let port = listen.port();
    let mut hosts = vec![match listen {
        SocketAddr::V4(v4) => format!("{}:{port}", v4.ip()),
        SocketAddr::V6(v6) => format!("[{}]:{port}", v6.ip()),
    }];
    if listen.ip().is_loopback() {
        for name in ["localhost", "127.0.0.1", "[::1]"] {
            hosts.push(format!("{name}:{port}"));
        }
    }
    hosts.extend(extra.iter().cloned());
    let mut seen = std::collections::HashSet::new();
    hosts.retain(|host| seen.insert(host.clone()));
    hosts
}

/// The `Origin` values accepted: the same origins as the hosts, over http (a browser page
/// served from elsewhere is a foreign origin and gets 403).
fn allowed_origins(hosts: &[String]) -> Vec<String> {
    hosts.iter().map(|host| format!("http://{host}")).collect()
}

/// Build a runtime and the log subscriber like [`crate::run`], and [`serve_http`] until
/// SIGTERM or SIGINT; `bound` is told the listening address.
pub fn run_http(
    options: GatewayOptions,
    http: HttpOptions,
    control: Arc<dyn ControlPlane>,
    bound: impl FnOnce(SocketAddr),
) -> Result<ShutdownReason, GatewayError> {
    crate::serve::init_logging(options.log_filter.as_deref())?;
    // Two workers: unlike stdio, many sessions' requests arrive at once.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(64)
        .enable_all()
        .build()
        .map_err(GatewayError::Runtime)?;
    let outcome = runtime.block_on(async {
        let signalled = crate::serve::shutdown_signals()?;
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
    if !http.listen.ip().is_loopback() && !http.allow_remote {
        return Err(GatewayError::RemoteListen(http.listen));
    }
    let tools_plane = control.clone();
    let control_tools = tokio::task::spawn_blocking(move || tools_plane.control_tools())
        .await
        .map_err(|e| GatewayError::ControlPlane { call: "control_tools", reason: e.to_string() })?;
    let listener = tokio::net::TcpListener::bind(http.listen)
        .await
        .map_err(|source| GatewayError::Bind { addr: http.listen, source })?;
    let local = listener.local_addr().map_err(|source| GatewayError::Bind { addr: http.listen, source })?;
    tracing::info!(listen = %local, endpoint = HTTP_ENDPOINT, token = http.bearer_token.is_some(), "listening");
    bound(local);

    let (template, downstream) = crate::serve::start_engine(&options, &control, control_tools).await?;
    let next = AtomicU64::new(1);
    let cancel = CancellationToken::new();
    let hosts = allowed_hosts(local, &http.allowed_hosts);
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts.clone())
        .with_allowed_origins(allowed_origins(&hosts))
        .enforce_origin_validation()
        .with_max_request_body_bytes(options.max_message_bytes)
        .with_cancellation_token(cancel.clone());
    let service = StreamableHttpService::new(
        move || Ok(HttpGateway(template.session(AttachmentId(next.fetch_add(1, Ordering::Relaxed))))),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let token = http.bearer_token.clone().map(Arc::new);
    let router = axum::Router::new()
        .route_service(HTTP_ENDPOINT, service)
        .layer(axum::middleware::from_fn_with_state(token, require_token));

    let stop = CancellationToken::new();
    let stopped = stop.clone();
    let server = tokio::spawn(async move {
        axum::serve(listener, router).with_graceful_shutdown(async move { stopped.cancelled().await }).await
    });
    let reason = shutdown.await;
    tracing::info!(reason = reason.as_str(), "shutting down");
    // Sessions first (their SSE streams would hold graceful shutdown open), then the
    // listener, bounded.
    cancel.cancel();
    stop.cancel();
    match tokio::time::timeout(Duration::from_secs(2), server).await {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(e))) => tracing::warn!(error = %e, "the HTTP server ended with an error"),
        Ok(Err(e)) => tracing::warn!(error = %e, "the HTTP server task failed"),
        Err(_) => tracing::warn!("the HTTP server did not stop within 2 s"),
    }

    crate::serve::stop_engine(&control, downstream.as_deref(), &reason).await;
    Ok(reason)
}

/// Equal in time independent of where the first difference is.
fn same_secret(presented: &[u8], expected: &[u8]) -> bool {
    presented.len() == expected.len() && presented.iter().zip(expected).fold(0_u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

/// The bearer token, when configured, on every request.
async fn require_token(State(token): State<Option<Arc<String>>>, request: Request, next: Next) -> Response {
    let Some(token) = token else { return next.run(request).await };
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::as_bytes);
    if presented.is_some_and(|p| same_secret(p, token.as_bytes())) {
        return next.run(request).await;
    }
    // Neither the presented nor the expected value is logged.
    tracing::info!(path = %request.uri().path(), "request refused: missing or wrong bearer token");
    let mut response = (StatusCode::UNAUTHORIZED, "Unauthorized: a bearer token is required").into_response();
    response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
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
            other => expect::<CallToolResult>(Ok(other)).map(CallToolResponse::from),
        }
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

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        self.0.supported_protocol_versions()
    }
}

#[cfg(test)]
mod tests {
    use super::{allowed_hosts, allowed_origins, same_secret};

    #[test]
    fn loopback_accepts_the_localhost_forms_on_its_port_only() {
        let hosts = allowed_hosts("127.0.0.1:8123".parse().unwrap(), &[]);
        assert_eq!(hosts, ["127.0.0.1:8123", "localhost:8123", "[::1]:8123"]);
        assert!(allowed_origins(&hosts).contains(&"http://localhost:8123".to_owned()));
        let remote = allowed_hosts("10.1.2.3:80".parse().unwrap(), &["gw.example".to_owned()]);
        assert_eq!(remote, ["10.1.2.3:80", "gw.example"]);
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abd", b"abc"));
        assert!(!same_secret(b"ab", b"abc"));
    }
}
