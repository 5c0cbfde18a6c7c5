//! The client → gateway direction: the rmcp server service that answers one client.
//!
//! * `initialize`: negotiated here (the client's version when rmcp knows it and it has a
//!   handshake, else 2025-11-25); makes this service's attachment (the stdio one, or a new
//!   HTTP session's, within the bounds) with its own channel, and waits, bounded, for that
//!   channel's downstream so the answer mirrors its capabilities.
//! * A sessionless (2026-07-28) request has no `initialize`: over stdio it attaches the one
//!   attachment at its first request; over HTTP it is served by its principal's stateless
//!   attachment ([`crate::engine::Engine::stateless`]), made at its first request.
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
use crate::control::{ClientAttach, ControlCall, DownstreamLink, ToolCall, Verdict};
use crate::downstream::Connection;
use crate::engine::{Attachment, Engine, StatelessKey};
use crate::link::PeerLink;
use crate::observe::GatewayObserver;
use crate::routes::{ClientFacts, InFlight};
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

/// The settings the service needs from [`crate::GatewayOptions`].
#[derive(Clone, Debug)]
pub(crate) struct ServiceSettings {
    pub(crate) call_timeout: Duration,
    pub(crate) attach_wait: Duration,
    pub(crate) server_info: Implementation,
    pub(crate) instructions: Option<String>,
    /// Told of forwarded calls (and, over HTTP, of the sessions open).
    pub(crate) observer: Option<Arc<dyn GatewayObserver>>,
    /// Over Streamable HTTP: the attachments are sessions, counted for the observer.
    pub(crate) http: bool,
}

/// The principal the HTTP layer authenticated a request as: a tokens-file entry's client
/// name, or `None` (no tokens file). Carried in the request's extensions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Authenticated(pub(crate) Option<String>);

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
    engine: Arc<Engine>,
    mode: Mode,
    attached: OnceLock<Arc<Attachment>>,
    /// One attach at a time (two first requests of a sessionless stdio client).
    attaching: tokio::sync::Mutex<()>,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let (Mode::Http, Some(attachment)) = (&self.mode, self.attached.get()) else { return };
        let engine = self.engine.clone();
        let id = attachment.id;
        // Dropped by rmcp's session task, inside the runtime.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { engine.detach(id, "session_closed").await });
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
        .and_then(|a| a.0.clone())
}

/// Whether the request is on the 2026-07-28 (stateless) generation.
fn stateless_era(context: &RequestContext<RoleServer>) -> bool {
    context.protocol_version().is_some_and(|v| !v.has_initialize())
}

impl Gateway {
    /// The stdio client's service, over the channel opened at start-up.
    pub(crate) fn stdio(engine: Arc<Engine>, channel: Arc<Channel>) -> Self {
        Self { engine, mode: Mode::Stdio(channel), attached: OnceLock::new(), attaching: tokio::sync::Mutex::new(()) }
    }

    /// An HTTP session's (or stateless request's) service.
    pub(crate) fn http(engine: Arc<Engine>) -> Self {
        Self { engine, mode: Mode::Http, attached: OnceLock::new(), attaching: tokio::sync::Mutex::new(()) }
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
        let engine = &self.engine;
        let attachment = match &self.mode {
            Mode::Stdio(channel) => engine.go_live(None, channel.clone(), client, facts, Some(session)).await,
            Mode::Http => {
                let principal = client.principal.clone().unwrap_or_default();
                let reservation =
                    engine.reserve(&principal).map_err(|e| ErrorData::invalid_request(e.to_string(), None))?;
                let channel = engine.open_channel(&reservation).map_err(|e| {
                    ErrorData::internal_error(format!("the downstream server could not be started: {e}"), None)
                })?;
                engine.go_live(Some(reservation), Arc::new(channel), client, facts, Some(session)).await
            }
        };
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
        };
        let facts = ClientFacts { capabilities: params.capabilities.clone(), stateless_era: false };
        let deadline = Instant::now() + self.settings().attach_wait;
        let Some(attachment) = self.attach(client, facts, context.peer.clone()).await? else {
            return Err(ErrorData::invalid_request("the session is already initialized", None));
        };
        let link = attachment.channel.wait_ready(deadline).await;
        if let Some(connection) = &link {
            self.engine.learned_capabilities(&connection.capabilities);
        }
        Ok(self.server_config(link.as_deref()).with_protocol_version(version))
    }

    fn settings(&self) -> &ServiceSettings {
        &self.engine.settings
    }

    /// The gateway's `initialize` answer: its own identity, the downstream's capabilities
    /// (or the superset while it is down), always tools with `listChanged`.
    fn server_config(&self, link: Option<&Connection>) -> InitializeResult {
        let mut capabilities = match link {
            Some(connection) => connection.capabilities.clone(),
            None if self.engine.has_downstream() => {
                self.engine.known_capabilities().unwrap_or_else(superset_capabilities)
            }
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
                self.engine
                    .stateless(key, client, facts)
                    .await
                    .map_err(|e| ErrorData::invalid_request(e.to_string(), None))
            }
        }
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
        let routes = &attachment.channel.state.routes;
        let entry = InFlight {
            client_request: context.id.clone(),
            method: request.method().to_owned(),
            peer: context.peer.clone(),
            client: Self::facts(attachment, context),
        };
        let registration = routes.register(entry).ok_or(ForwardError::Busy)?;
        let client_token = context.meta.get_progress_token();
        let options = PeerRequestOptions::with_timeout(self.settings().call_timeout)
            .with_meta(forwardable_meta(&context.meta, connection.stateless_era));
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

    async fn list_tools(
        &self,
        attachment: &Attachment,
        request: ListToolsRequest,
        context: &RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let cursor = request.params.as_ref().and_then(|p| p.cursor.clone());
        let mut tools = Vec::new();
        let mut next_cursor = None;
        let channel = &attachment.channel;
        match channel.ready(self.settings().attach_wait).await {
            Some(connection) => {
                match self.send(attachment, &connection, ClientRequest::ListToolsRequest(request), context).await {
                    Ok(ServerResult::ListToolsResult(page)) => {
                        channel.state.remember_tools(connection.generation, &page.tools);
                        next_cursor = page.next_cursor;
                        tools = self.filter_and_annotate(page.tools).await?;
                    }
                    Ok(_) => {
                        return Err(ErrorData::internal_error(
                            "the downstream answered tools/list with something else",
                            None,
                        ));
                    }
                    Err(error) if cursor.is_none() => {
                        // The control tools are always listed: a downstream that cannot list
                        // must not hide them.
                        let message = match error {
                            ForwardError::Mcp(e) => e.message.to_string(),
                            ForwardError::Timeout(t) => format!("no answer within {t:?}"),
                            ForwardError::Gone(reason) => reason,
                            ForwardError::Busy => "too many requests in flight".to_owned(),
                            ForwardError::Cancelled => return Err(ErrorData::internal_error("cancelled", None)),
                        };
                        tracing::warn!(%message, "downstream tools/list failed; listing the control tools only");
                    }
                    Err(error) => return Err(self.forward_error_data(channel, error, "tools/list")),
                }
            }
            None if cursor.is_some() => {
                return Err(ErrorData::invalid_params(
                    unavailable_text("tools/list with a cursor", &channel.status()),
                    None,
                ));
            }
            None => {}
        }
        if cursor.is_none() {
            let mut first = self.engine.control_tools.clone();
            first.append(&mut tools);
            tools = first;
        }
        let mut result = ListToolsResult::with_all_items(tools);
        result.next_cursor = next_cursor;
        Ok(result)
    }

    /// Drop what the role may never call and what a control tool shadows; annotate the
    /// rest with their listing.
    async fn filter_and_annotate(&self, tools: Vec<Tool>) -> Result<Vec<Tool>, ErrorData> {
        let engine = self.engine.clone();
        blocking("list_tool", move || {
            tools
                .into_iter()
                .filter_map(|tool| {
                    if engine.control_names.contains(tool.name.as_ref()) {
                        tracing::warn!(tool = %tool.name, "a downstream tool is shadowed by a control tool");
                        return None;
                    }
                    let listing = engine.control.list_tool(&tool);
                    listing.visible.then(|| annotate(tool, listing.class, listing.meta))
                })
                .collect()
        })
        .await
    }

    /// The downstream's definition of `name`: from the catalogue, else by listing every
    /// page (bounded) until it shows up.
    async fn find_tool(
        &self,
        attachment: &Attachment,
        connection: &Connection,
        name: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<Option<Tool>, ForwardError> {
        let state = &attachment.channel.state;
        if let Some(tool) = state.known_tool(connection.generation, name) {
            return Ok(Some(tool));
        }
        let mut cursor = None;
        for _ in 0..MAX_CATALOGUE_PAGES {
            let request = ListToolsRequest::with_param(PaginatedRequestParams::default().with_cursor(cursor));
            let page =
                match self.send(attachment, connection, ClientRequest::ListToolsRequest(request), context).await? {
                    ServerResult::ListToolsResult(page) => page,
                    _ => return Ok(None),
                };
            state.remember_tools(connection.generation, &page.tools);
            if let Some(tool) = page.tools.into_iter().find(|t| t.name == name) {
                return Ok(Some(tool));
            }
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => return Ok(None),
            }
        }
        Ok(None)
    }

    async fn call_tool(
        &self,
        attachment: &Attachment,
        request: CallToolRequest,
        context: &RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        let name = request.params.name.to_string();
        let channel = &attachment.channel;
        let id = attachment.id;
        if self.engine.control_names.contains(&name) {
            let arguments = request.params.arguments.clone().unwrap_or_default();
            let status = channel.status();
            let control = self.engine.control.clone();
            let state = channel.state.clone();
            let generation = channel.link().map(|c| c.generation);
            let link = channel.link().map(|c| PeerLink::new(&c, self.settings().call_timeout));
            let result = blocking("call_control_tool", move || {
                let known_tool = |tool: &str| generation.and_then(|g| state.known_tool(g, tool));
                control.call_control_tool(ControlCall {
                    attachment: id,
                    name: &name,
                    arguments,
                    downstream: &status,
                    known_tool: &known_tool,
                    link: link.as_ref().map(|l| l as &dyn DownstreamLink),
                })
            })
            .await?;
            return Ok(ServerResult::CallToolResult(result));
        }
        if !channel.has_downstream() {
            return Err(unknown_tool(&name));
        }
        let Some(connection) = channel.ready(self.settings().attach_wait).await else {
            let text = unavailable_text(&format!("`{name}`"), &channel.status());
            return Ok(ServerResult::CallToolResult(CallToolResult::error(vec![ContentBlock::text(text)])));
        };
        let tool = match self.find_tool(attachment, &connection, &name, context).await {
            Ok(Some(tool)) => tool,
            Ok(None) => return Err(unknown_tool(&name)),
            Err(error) => return self.call_failed(channel, &name, error),
        };
        let control = self.engine.control.clone();
        let arguments = request.params.arguments.clone();
        let link = PeerLink::new(&connection, self.settings().call_timeout);
        let (tool, arguments, Verdict { class, decision }) = blocking("decide", move || {
            let call = ToolCall { tool: &tool, arguments: arguments.as_ref(), link: Some(&link) };
            let verdict = control.decide(id, &call);
            (tool, arguments, verdict)
        })
        .await?;
        if !decision.allowed {
            tracing::info!(attachment = %id, tool = %name, %class, blocker = ?decision.blocker_kind,
                "call refused by the gate");
            return Ok(ServerResult::CallToolResult(refusal(&name, class, &decision)));
        }
        let forward = tracing::info_span!("forward", tool = %name, pid = connection.pid);
        let sent = Instant::now();
        let answered = self
            .send(attachment, &connection, ClientRequest::CallToolRequest(request), context)
            .instrument(forward)
            .await;
        if let Some(observer) = &self.settings().observer {
            observer.forwarded_call(sent.elapsed());
        }
        match answered {
            Ok(result) => {
                if let ServerResult::CallToolResult(answer) = &result {
                    let (control, answer) = (self.engine.control.clone(), answer.clone());
                    let recorded = blocking("on_forwarded", move || {
                        let call = ToolCall { tool: &tool, arguments: arguments.as_ref(), link: None };
                        control.on_forwarded(id, &call, &answer);
                    });
                    if recorded.await.is_err() {
                        tracing::warn!(attachment = %id, tool = %name, "the forwarded call's outcome was not recorded");
                    }
                }
                Ok(result)
            }
            Err(error) => self.call_failed(channel, &name, error),
        }
    }

    /// A forwarded `tools/call` that got no result: a tool error for the model, except a
    /// JSON-RPC error from the downstream, which passes through.
    fn call_failed(&self, channel: &Channel, name: &str, error: ForwardError) -> Result<ServerResult, ErrorData> {
        let text = match error {
            ForwardError::Mcp(error) => return Err(error),
            ForwardError::Cancelled => return Err(ErrorData::internal_error("cancelled by the client", None)),
            ForwardError::Busy => return Err(busy()),
            ForwardError::Timeout(timeout) => format!(
                "{DOWNSTREAM_TIMEOUT}: `{name}` got no answer from the downstream MCP server within {:.1} s; \
                 the call was cancelled (it may or may not have taken effect).",
                timeout.as_secs_f64()
            ),
            ForwardError::Gone(reason) => format!(
                "{}\nThe call to `{name}` was in flight ({reason}); it was not retried and may or may not have \
                 taken effect.",
                unavailable_text(&format!("`{name}`"), &channel.status())
            ),
        };
        Ok(ServerResult::CallToolResult(CallToolResult::error(vec![ContentBlock::text(text)])))
    }

    fn forward_error_data(&self, channel: &Channel, error: ForwardError, method: &str) -> ErrorData {
        match error {
            ForwardError::Mcp(error) => error,
            ForwardError::Cancelled => ErrorData::internal_error("cancelled by the client", None),
            ForwardError::Busy => busy(),
            ForwardError::Timeout(timeout) => ErrorData::internal_error(
                format!("{DOWNSTREAM_TIMEOUT}: `{method}` got no answer within {:.1} s", timeout.as_secs_f64()),
                None,
            ),
            ForwardError::Gone(_) => {
                ErrorData::internal_error(unavailable_text(&format!("`{method}`"), &channel.status()), None)
            }
        }
    }

    /// Anything else the client asks: the downstream's business, on its own channel.
    async fn forward(
        &self,
        attachment: &Attachment,
        request: ClientRequest,
        context: &RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        let method = request.method().to_owned();
        if matches!(request, ClientRequest::CustomRequest(_))
            && crate::frame::STANDARD_METHODS.contains(&method.as_str())
        {
            // The frame judge refuses these already; a standard method must never reach
            // the downstream as an opaque request (a `tools/call` would skip the gate).
            return Err(ErrorData::invalid_params(format!("invalid params for `{method}`"), None));
        }
        let channel = &attachment.channel;
        if !channel.has_downstream() {
            return Err(ErrorData::new(ErrorCode::METHOD_NOT_FOUND, method, None));
        }
        let Some(connection) = channel.ready(self.settings().attach_wait).await else {
            return Err(ErrorData::internal_error(unavailable_text(&format!("`{method}`"), &channel.status()), None));
        };
        self.send(attachment, &connection, request, context)
            .await
            .map_err(|e| self.forward_error_data(channel, e, &method))
    }
}

fn busy() -> ErrorData {
    ErrorData::internal_error(
        format!(
            "too many requests in flight on this client's connection ({}); wait for an answer first",
            crate::routes::MAX_IN_FLIGHT
        ),
        None,
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
            ClientRequest::DiscoverRequest(_) => Ok(ServerResult::DiscoverResult(DiscoverResult::from_server_info(
                ProtocolVersion::KNOWN_VERSIONS.to_vec(),
                self.get_info(),
            ))),
            request => {
                let attachment = self.attachment_for(&context).await?;
                match request {
                    ClientRequest::ListToolsRequest(request) => {
                        self.list_tools(&attachment, request, &context).await.map(ServerResult::ListToolsResult)
                    }
                    ClientRequest::CallToolRequest(request) => {
                        // The caller's W3C trace context (SEP-414) names the trace; the
                        // `_meta` carrying it is forwarded to the downstream unchanged.
                        let span = tracing::info_span!("tools/call", tool = %request.params.name,
                            attachment = %attachment.id, traceparent = context.meta.get_traceparent());
                        self.call_tool(&attachment, request, &context).instrument(span).await
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
        if let Some(connection) = attachment.channel.link()
            && let Err(e) = connection.peer.send_notification(forward).await
        {
            tracing::debug!(error = %e, "could not pass a client notification to the downstream");
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
