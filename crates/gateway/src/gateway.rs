//! The client → gateway direction: the rmcp server service that answers one client.
//!
//! * `initialize`: negotiated here (the client's version when rmcp knows it and it has a
//!   handshake, else 2025-11-25); makes this service's attachment (the stdio one, or a new
//!   HTTP session's, within the bounds) with its own channel, and waits, bounded, for that
//!   channel's downstream so the answer mirrors its capabilities.
//! * A sessionless (2026-07-28) request has no `initialize`: over stdio it attaches the one
//!   attachment at its first request; over HTTP it is served by its principal's stateless
//!   attachment ([`crate::hub::Hub::stateless`]), made at its first request.
//! * `tools/list`: the channel's downstream page, each tool listed (or hidden) and annotated
//!   as [`crate::ControlPlane::list_tool`] says, with the control tools in front of the
//!   first page; cursors pass through.
//! * `tools/call`: control tools to [`crate::ControlPlane::call_control_tool`]; every downstream
//!   tool, read-only ones included, through [`crate::ControlPlane::decide`] first — a call retried
//!   with the input a result asked for is a new call, decided again.
//! * Everything else is forwarded unchanged on the attachment's channel, with the client's
//!   `_meta`, progress token and cancellation carried across.
//!
//! **Invariant:** no downstream `tools/call` is sent without a [`crate::ControlPlane::decide`]
//! that allowed it, and no control-plane method runs on an async worker thread.
//! **Invariant:** a request is forwarded on its own attachment's channel and no other.

use crate::answers::{
    DOWNSTREAM_TIMEOUT, annotate, forwardable_meta, negotiate, refusal, shape_result, superset_capabilities,
    unavailable_text, unknown_tool,
};
use crate::channel::Channel;
use crate::control::{ClientAttach, ControlCall, DownstreamLink, ReadAnswer, ToolCall, Verdict};
use crate::downstream::Connection;
use crate::hub::{Attachment, Hub, StatelessKey};
use crate::link::PeerLink;
use crate::options::ServiceSettings;
use crate::routes::{ClientFacts, InFlight};

mod calls;
use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequest, CallToolResult, CancelledNotification, CancelledNotificationParam, ClientNotification,
    ClientRequest, ContentBlock, DiscoverResult, ErrorCode, Implementation, InitializeRequestParams, InitializeResult,
    ListToolsRequest, ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerResult, Tool,
    ToolsCapability,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RequestContext, RoleServer, Service, ServiceError};
use std::borrow::Cow;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::time::Instant;
use tracing::Instrument as _;

/// Pages read, at most, when a call names a tool the gateway has not seen listed.
const MAX_CATALOGUE_PAGES: usize = 64;

/// Who the HTTP layer authenticated a request as, carried in the request's extensions: the
/// kind of credential and, for a principal, who. A session is bound to all of it, so one
/// kind of credential never uses a session another opened, whatever the names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum Authenticated {
    /// No authentication configured, or the shared `FLEETGATE_HTTP_TOKEN`: no principal.
    #[default]
    Anonymous,
    /// A principal of the tokens file, by its client name.
    TokensFile(String),
    /// An OAuth access token: its subject (the principal claim) and the principal it is
    /// (`oauth:<subject>`, or its mapping's name — never a tokens-file name).
    OAuth { subject: String, principal: String },
}

impl Authenticated {
    /// The principal's name: what its workers and audit entries record and its bounds are
    /// counted by. Names of the two sources never meet (`auth::OAUTH_PREFIX`, and the
    /// check at load, `OAuthSettings::check_principals`).
    pub(crate) fn principal(&self) -> Option<&str> {
        match self {
            Self::Anonymous => None,
            Self::TokensFile(name) | Self::OAuth { principal: name, .. } => Some(name),
        }
    }
}

/// How this service finds its attachment.
enum Mode {
    /// The stdio client: one attachment, its channel opened at start-up.
    Stdio(Arc<Channel>),
    /// An HTTP session (attached at its `initialize`, detached when rmcp drops the
    /// service), or one stateless HTTP request (served by its principal's attachment).
    Http,
}

/// The rmcp server service of one client: the stdio client, one Streamable HTTP session,
/// or one stateless HTTP request.
pub(crate) struct Gateway {
    hub: Arc<Hub>,
    mode: Mode,
    attached: OnceLock<Arc<Attachment>>,
    /// One attach at a time (two first requests of a sessionless stdio client).
    attaching: tokio::sync::Mutex<()>,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let (Mode::Http, Some(attachment)) = (&self.mode, self.attached.get()) else { return };
        let hub = self.hub.clone();
        let id = attachment.id;
        // Dropped by rmcp's session task, inside the runtime.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { hub.detach(id, "session_closed").await });
        }
    }
}

/// Why a forwarded request got no result.
enum ForwardError {
    /// The downstream answered with a JSON-RPC error: passed through as is.
    Mcp(ErrorData),
    /// No answer within the call timeout; the downstream was sent a cancellation.
    Timeout(Duration),
    /// The connection went away (the child died) before the answer.
    Gone(String),
    /// The client cancelled; rmcp drops whatever is answered.
    Cancelled,
    /// The attachment has [`crate::routes::MAX_IN_FLIGHT`] requests in flight already.
    Busy,
}

fn forward_error(error: ServiceError) -> ForwardError {
    match error {
        ServiceError::McpError(error) => ForwardError::Mcp(error),
        ServiceError::Timeout { timeout } => ForwardError::Timeout(timeout),
        ServiceError::Cancelled { .. } => ForwardError::Cancelled,
        ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
            ForwardError::Gone("the downstream connection closed".to_owned())
        }
        other => ForwardError::Mcp(ErrorData::internal_error(format!("downstream request failed: {other}"), None)),
    }
}

/// Run a control-plane call off the async workers.
async fn blocking<T, F>(call: &'static str, f: F) -> Result<T, ErrorData>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    // The control plane's own spans (the gate, the store) nest under the request's.
    let span = tracing::Span::current();
    tokio::task::spawn_blocking(move || span.in_scope(f)).await.map_err(|e| {
        tracing::error!(call, error = %e, "control plane call failed");
        ErrorData::internal_error(format!("control plane call `{call}` failed: {e}"), None)
    })
}

/// The principal an HTTP request was authenticated as (none over stdio).
fn principal(context: &RequestContext<RoleServer>) -> Option<String> {
    context
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Authenticated>())
        .and_then(|a| a.principal().map(str::to_owned))
}

/// Whether the request is on the 2026-07-28 (stateless) generation.
fn stateless_era(context: &RequestContext<RoleServer>) -> bool {
    context.protocol_version().is_some_and(|v| !v.has_initialize())
}

impl Gateway {
    /// The stdio client's service, over the channel opened at start-up.
    pub(crate) fn stdio(hub: Arc<Hub>, channel: Arc<Channel>) -> Self {
        Self { hub, mode: Mode::Stdio(channel), attached: OnceLock::new(), attaching: tokio::sync::Mutex::new(()) }
    }

    /// An HTTP session's (or stateless request's) service.
    pub(crate) fn http(hub: Arc<Hub>) -> Self {
        Self { hub, mode: Mode::Http, attached: OnceLock::new(), attaching: tokio::sync::Mutex::new(()) }
    }

    /// Make this service's attachment for `client` (stdio: its one channel; HTTP: a new
    /// session within the bounds). `None` when it is attached already.
    async fn attach(
        &self,
        client: ClientAttach,
        facts: ClientFacts,
        session: rmcp::Peer<RoleServer>,
    ) -> Result<Option<Arc<Attachment>>, ErrorData> {
        let _one = self.attaching.lock().await;
        if self.attached.get().is_some() {
            return Ok(None);
        }
        let hub = &self.hub;
        let attachment = match &self.mode {
            Mode::Stdio(channel) => hub.go_live(None, channel.clone(), client, facts, Some(session)).await,
            Mode::Http => {
                let principal = client.principal.clone().unwrap_or_default();
                let reservation =
                    hub.reserve(&principal).map_err(|e| ErrorData::invalid_request(e.to_string(), None))?;
                let channel = hub.open_channel(&reservation).map_err(|e| {
                    ErrorData::internal_error(format!("the downstream server could not be started: {e}"), None)
                })?;
                hub.go_live(Some(reservation), channel, client, facts, Some(session)).await
            }
        }
        .map_err(|why| ErrorData::invalid_request(why.to_string(), None))?;
        let _ = self.attached.set(attachment.clone());
        Ok(Some(attachment))
    }

    async fn initialize(
        &self,
        params: InitializeRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        let version = negotiate(&params.protocol_version);
        let client = ClientAttach {
            client_name: params.client_info.name.clone(),
            client_version: params.client_info.version.clone(),
            protocol_version: version.to_string(),
            principal: principal(context),
            stateless: false,
        };
        let facts = ClientFacts { capabilities: params.capabilities.clone(), stateless_era: false };
        let deadline = Instant::now() + self.settings().attach_wait;
        let Some(attachment) = self.attach(client, facts, context.peer.clone()).await? else {
            return Err(ErrorData::invalid_request("the session is already initialized", None));
        };
        let link = attachment.channel.wait_ready(deadline).await;
        Ok(self.server_config(link.as_deref()).with_protocol_version(version))
    }

    fn settings(&self) -> &ServiceSettings {
        &self.hub.settings
    }

    /// The gateway's `initialize` answer: its own identity, the downstream's capabilities
    /// (or the superset while it is down), always tools with `listChanged`.
    fn server_config(&self, link: Option<&Connection>) -> InitializeResult {
        let mut capabilities = match link {
            Some(connection) => connection.capabilities.clone(),
            None if self.hub.has_downstream() => self.hub.known_capabilities().unwrap_or_else(superset_capabilities),
            None => ServerCapabilities::default(),
        };
        let mut tools = ToolsCapability::default();
        tools.list_changed = Some(true);
        capabilities.tools = Some(tools);
        let instructions = self
            .settings()
            .instructions
            .clone()
            .or_else(|| link.and_then(|connection| connection.instructions.clone()));
        let mut result = InitializeResult::new(capabilities).with_server_info(self.settings().server_info.clone());
        result.instructions = instructions;
        result
    }

    /// The attachment a request (not `initialize`) is served by.
    async fn attachment_for(&self, context: &RequestContext<RoleServer>) -> Result<Arc<Attachment>, ErrorData> {
        if let Some(attachment) = self.attached.get() {
            return Ok(attachment.clone());
        }
        let Some(version) = context.meta.protocol_version() else {
            return Err(ErrorData::invalid_request("the session is not initialized", None));
        };
        let info = context.meta.client_info().unwrap_or_else(|| Implementation::new("unknown", "unknown"));
        let client = ClientAttach {
            client_name: info.name.clone(),
            client_version: info.version.clone(),
            protocol_version: version.to_string(),
            principal: principal(context),
            stateless: matches!(self.mode, Mode::Http),
        };
        let facts = ClientFacts {
            capabilities: context.meta.client_capabilities().unwrap_or_default(),
            stateless_era: !version.has_initialize(),
        };
        match &self.mode {
            // A sessionless client over stdio: the one attachment, at its first request.
            Mode::Stdio(_) => {
                self.attach(client, facts, context.peer.clone()).await?;
                self.attached.get().cloned().ok_or_else(|| ErrorData::internal_error("attach failed", None))
            }
            Mode::Http => {
                let key = StatelessKey {
                    principal: client.principal.clone().unwrap_or_default(),
                    client_name: info.name,
                    client_version: info.version,
                };
                self.hub
                    .stateless(key, client, facts)
                    .await
                    .map_err(|e| ErrorData::invalid_request(e.to_string(), None))
            }
        }
    }

    /// A 2026-07-28 client's `subscriptions/listen` stream, acknowledged by rmcp: a listener
    /// of its attachment's channel until the client closes it or the attachment ends; the
    /// downstream is asked for what the channel's listeners want.
    pub(crate) async fn listen(&self, subscription: rmcp::service::SubscriptionContext) -> Result<(), ErrorData> {
        let attachment = self.attachment_for(subscription.request_context()).await?;
        let state = &attachment.channel.state;
        let id = state
            .subscriptions
            .add(attachment.id, subscription.sink().clone())
            .map_err(|why| ErrorData::invalid_params(why.to_string(), None))?;
        let sync = || {
            if let Some(connection) = attachment.channel.link() {
                state.subscriptions.sync(&connection.peer, connection.generation, connection.stateless_era);
            }
        };
        sync();
        tracing::debug!(attachment = %attachment.id, stream = id, "subscription stream opened");
        tokio::select! {
            () = subscription.cancelled() => {}
            () = state.subscriptions.ended() => {}
        }
        state.subscriptions.remove(id);
        sync();
        tracing::debug!(attachment = %attachment.id, stream = id, "subscription stream closed");
        Ok(())
    }

    /// What the gateway knows of the client behind this request.
    fn facts(attachment: &Attachment, context: &RequestContext<RoleServer>) -> ClientFacts {
        ClientFacts {
            capabilities: context.client_capabilities().unwrap_or_else(|| attachment.facts.capabilities.clone()),
            stateless_era: stateless_era(context) || attachment.facts.stateless_era,
        }
    }

    /// Send `request` on the attachment's channel on behalf of the client's request
    /// `context`: registered in the channel's routes first, its progress token mapped
    /// before the downstream can answer, unregistered whichever way it ends.
    async fn send(
        &self,
        attachment: &Attachment,
        connection: &Connection,
        request: ClientRequest,
        context: &RequestContext<RoleServer>,
    ) -> Result<ServerResult, ForwardError> {
        self.send_as(attachment, connection, request, context, false).await
    }

    /// [`send`](Self::send); with `no_tasks`, the request says the client does not take
    /// SEP-2663 tasks (its capabilities without the extension), so the downstream answers it
    /// in full.
    async fn send_as(
        &self,
        attachment: &Attachment,
        connection: &Connection,
        request: ClientRequest,
        context: &RequestContext<RoleServer>,
        no_tasks: bool,
    ) -> Result<ServerResult, ForwardError> {
        let routes = &attachment.channel.state.routes;
        let entry = InFlight {
            attachment: attachment.id,
            client_request: context.id.clone(),
            method: request.method().to_owned(),
            peer: context.peer.clone(),
            client: Self::facts(attachment, context),
        };
        let registration = routes.register(entry).ok_or(ForwardError::Busy)?;
        let client_token = context.meta.get_progress_token();
        let mut meta = forwardable_meta(&context.meta, connection.stateless_era);
        if no_tasks {
            let mut capabilities = Self::facts(attachment, context).capabilities;
            if let Some(extensions) = capabilities.extensions.as_mut() {
                extensions.remove(rmcp::model::TASKS_EXTENSION_ID);
            }
            if let Ok(value) = serde_json::to_value(capabilities) {
                meta.0.0.insert("io.modelcontextprotocol/clientCapabilities".to_owned(), value);
            }
        }
        if let Some(trace) = &self.settings().trace {
            // The current span: `forward` for a `tools/call`.
            trace.inject(&tracing::Span::current(), &mut meta.0.0);
        }
        let options = PeerRequestOptions::with_timeout(self.settings().call_timeout).with_meta(meta);
        let handle = {
            let _order = routes.progress_order().lock().await;
            let handle = connection.peer.send_cancellable_request(request, options).await.map_err(forward_error)?;
            if let Some(client_token) = client_token {
                registration.map_progress(handle.progress_token.clone(), client_token);
            }
            handle
        };
        let (id, peer) = (handle.id.clone(), handle.peer.clone());
        let answered = id.clone();
        let result = tokio::select! {
            result = handle.await_response() => {
                // The progress that preceded the answer on the wire reaches the client first.
                routes.settle(&answered).await;
                result.map_err(forward_error)
            }
            () = context.ct.cancelled() => {
                let reason = Some("cancelled by the client".to_owned());
                let cancel = CancelledNotification::new(CancelledNotificationParam::new(Some(id), reason));
                let _ = peer.send_notification(ClientNotification::CancelledNotification(cancel)).await;
                Err(ForwardError::Cancelled)
            }
        };
        drop(registration);
        result
    }
}

/// A request that sets state of the client's own session in the downstream (a log level,
/// a subscription; a custom request may too), on a shared downstream connection: it would
/// set it for every client, so it is not forwarded.
fn per_session_state(method: &str) -> ErrorData {
    ErrorData::invalid_request(
        format!(
            "`{method}` sets per-session state in the downstream server, which this gateway shares between all its \
             clients ([downstream] sharing = \"gateway\"): not forwarded"
        ),
        None,
    )
}

fn busy() -> ErrorData {
    ErrorData::internal_error(
        format!(
            "too many requests in flight on this client's connection ({}); wait for an answer first",
            crate::routes::MAX_IN_FLIGHT
        ),
        Some(serde_json::json!({ "limit": crate::routes::MAX_IN_FLIGHT })),
    )
}

/// Methods the 2026-07-28 generation removed: a client on it gets "method not found".
const REMOVED_IN_STATELESS_ERA: &[&str] =
    &["initialize", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"];

impl Gateway {
    /// Answer one client request, shaped for the client's protocol generation.
    pub(crate) async fn dispatch(
        &self,
        request: ClientRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        let modern = stateless_era(&context);
        let mut result = self.answer(request, context, modern).await?;
        shape_result(&mut result, modern);
        Ok(result)
    }

    async fn answer(
        &self,
        request: ClientRequest,
        context: RequestContext<RoleServer>,
        modern: bool,
    ) -> Result<ServerResult, ErrorData> {
        // A parsed `initialize` carries a version to negotiate: the 2025 handshake, answered.
        let handshake = matches!(request, ClientRequest::InitializeRequest(_));
        if modern && !handshake && REMOVED_IN_STATELESS_ERA.contains(&request.method()) {
            return Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!("`{}` does not exist in MCP 2026-07-28", request.method()),
                None,
            ));
        }
        match request {
            ClientRequest::InitializeRequest(request) => {
                self.initialize(request.params, &context).await.map(ServerResult::InitializeResult)
            }
            ClientRequest::PingRequest(_) => Ok(ServerResult::empty(())),
            ClientRequest::DiscoverRequest(_) => {
                // What the client's own downstream can do (its attachment made, as its next
                // request would, and its downstream waited for), not a guess: a stateless
                // client learns here which notifications it may listen for.
                let link = match self.attachment_for(&context).await {
                    Ok(attachment) => attachment.channel.ready(self.settings().attach_wait).await,
                    Err(_) => None,
                };
                let info = match link {
                    Some(connection) => self.server_config(Some(&connection)),
                    None => self.get_info(),
                };
                Ok(ServerResult::DiscoverResult(DiscoverResult::from_server_info(
                    ProtocolVersion::KNOWN_VERSIONS.to_vec(),
                    info,
                )))
            }
            request => {
                let attachment = self.attachment_for(&context).await?;
                match request {
                    ClientRequest::ListToolsRequest(request) => {
                        self.list_tools(&attachment, request, &context).await.map(ServerResult::ListToolsResult)
                    }
                    ClientRequest::CallToolRequest(request) => {
                        // The caller's W3C trace context (SEP-414) names the trace; the
                        // `_meta` carrying it is forwarded to the downstream unchanged, or
                        // re-parented on the `forward` span when the spans are exported.
                        let span = tracing::info_span!("tools/call", tool = %request.params.name,
                            attachment = %attachment.id, traceparent = context.meta.get_traceparent());
                        if let Some(trace) = &self.settings().trace {
                            trace.adopt(&span, &context.meta.0.0);
                        }
                        self.call_tool(&attachment, request, &context).instrument(span).await
                    }
                    request @ (ClientRequest::GetTaskRequest(_)
                    | ClientRequest::UpdateTaskRequest(_)
                    | ClientRequest::CancelTaskRequest(_)) => self.task_request(&attachment, request, &context).await,
                    request @ (ClientRequest::SetLevelRequest(_)
                    | ClientRequest::SubscribeRequest(_)
                    | ClientRequest::UnsubscribeRequest(_)
                    | ClientRequest::CustomRequest(_))
                        if attachment.channel.state.shared =>
                    {
                        Err(per_session_state(request.method()))
                    }
                    other => self.forward(&attachment, other, &context).await,
                }
            }
        }
    }

    /// A client notification: the roots list and custom notifications go to the
    /// attachment's downstream. Cancellations are rmcp's (they cancel the handler's token,
    /// which cancels the forwarded request); `initialized` is answered by the downstream's
    /// own session.
    pub(crate) async fn notify(&self, notification: ClientNotification) {
        let forward = match notification {
            ClientNotification::RootsListChangedNotification(_) | ClientNotification::CustomNotification(_) => {
                notification
            }
            _ => return,
        };
        let Some(attachment) = self.attached.get() else { return };
        if attachment.channel.state.shared {
            // A client's roots, or a custom notification, would be every client's on a run
            // they share: not forwarded.
            tracing::debug!(attachment = %attachment.id, "a client notification not forwarded to the shared run");
            return;
        }
        if let Some(connection) = attachment.channel.link() {
            // Queued without waiting (bounded; see `outbox`): a downstream that stops
            // reading costs dropped notifications, never a task each.
            attachment.channel.state.notify_downstream(connection.peer.clone(), forward);
        }
    }
}

impl Service<RoleServer> for Gateway {
    async fn handle_request(
        &self,
        request: ClientRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        self.dispatch(request, context).await
    }

    async fn handle_notification(
        &self,
        notification: ClientNotification,
        _context: NotificationContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.notify(notification).await;
        Ok(())
    }

    fn get_info(&self) -> InitializeResult {
        let link = self.attached.get().and_then(|a| a.channel.link());
        self.server_config(link.as_deref())
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS)
    }
}
