//! The client → gateway direction: the rmcp server service that answers the client.
//!
//! * `initialize`: negotiated here (the client's version when rmcp knows it and it has a
//!   handshake, else 2025-11-25), attaches this attachment once ([`ControlPlane::on_client_attach`])
//!   and waits, bounded, for the downstream so the answer mirrors its capabilities.
//! * `tools/list`: the downstream's page, filtered by [`ControlPlane::role_permits`] and
//!   annotated with [`ControlPlane::classify`], with the control tools in front of the
//!   first page; cursors pass through. While the downstream is not serving, the first page
//!   holds the control tools only (a listed tool that can only fail would mislead the
//!   model), and the client is sent `tools/list_changed` when it comes back.
//! * `tools/call`: control tools to [`ControlPlane::call_control_tool`]; every downstream
//!   tool, read-only ones included, through [`ControlPlane::decide`] first.
//! * Everything else (resources, templates, prompts, completions, logging level, custom
//!   methods) is forwarded unchanged, with the client's `_meta`, progress token and
//!   cancellation carried across.
//!
//! **Invariant:** no downstream `tools/call` is sent without a [`ControlPlane::decide`]
//! that allowed it, and no control-plane method runs on an async worker thread.

use crate::control::{
    AttachmentId, ClientAttach, ControlPlane, DownstreamState, DownstreamStatus, GateDecision, ToolClass,
};
use crate::downstream::{Connection, Downstream};
use crate::hub::Hub;
use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequest, CallToolResult, CancelledNotification, CancelledNotificationParam, ClientCapabilities,
    ClientNotification, ClientRequest, ContentBlock, DiscoverResult, ErrorCode, Implementation,
    InitializeRequestParams, InitializeResult, JsonObject, ListToolsRequest, ListToolsResult, MetaObject,
    PaginatedRequestParams, PromptsCapability, ProtocolVersion, RequestMetaObject, ResourcesCapability,
    ServerCapabilities, ServerResult, Tool, ToolsCapability,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RequestContext, RoleServer, Service, ServiceError};
use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::time::Instant;

/// The `_meta` key carrying a downstream tool's classification in `tools/list`.
pub const CLASSIFICATION_META_KEY: &str = "fleetgate/classification";

/// The blocker literal of a downstream tool called while the downstream is not serving.
pub const DOWNSTREAM_UNAVAILABLE: &str = "downstream_unavailable";

/// The blocker literal of a forwarded call the downstream did not answer in time.
pub const DOWNSTREAM_TIMEOUT: &str = "downstream_timeout";

/// Pages read, at most, when a call names a tool the gateway has not seen listed.
const MAX_CATALOGUE_PAGES: usize = 64;

/// The settings the service needs from [`crate::GatewayOptions`].
#[derive(Clone, Debug)]
pub(crate) struct ServiceSettings {
    pub(crate) call_timeout: Duration,
    pub(crate) attach_wait: Duration,
    pub(crate) server_info: Implementation,
    pub(crate) instructions: Option<String>,
}

/// The rmcp server service one client attachment talks to: the stdio client, or one
/// Streamable HTTP session (each gets its own `Gateway`, sharing everything but the
/// attachment).
pub(crate) struct Gateway {
    control: Arc<dyn ControlPlane>,
    hub: Arc<Hub>,
    downstream: Option<Arc<Downstream>>,
    control_tools: Arc<Vec<Tool>>,
    control_names: Arc<HashSet<String>>,
    settings: ServiceSettings,
    attachment: AttachmentId,
    attached: OnceLock<ClientAttach>,
    /// Tell the control plane when this service is dropped (an HTTP session ended). The
    /// stdio attachment lives as long as the process and ends in `on_shutdown`.
    detach_on_drop: bool,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if !self.detach_on_drop || self.attached.get().is_none() {
            return;
        }
        let control = self.control.clone();
        let attachment = self.attachment;
        // Dropped by rmcp's session task, inside the runtime; the store write goes to the
        // blocking pool like every other control-plane call.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn_blocking(move || control.on_detach(attachment, "session_closed"));
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
    tokio::task::spawn_blocking(f).await.map_err(|e| {
        tracing::error!(call, error = %e, "control plane call failed");
        ErrorData::internal_error(format!("control plane call `{call}` failed: {e}"), None)
    })
}

/// The version answered to `initialize`: the client's when rmcp knows it and it still has
/// a handshake, else the newest handshake version (rmcp applies the same rule to the
/// answer; this is computed here too, for [`ClientAttach`]).
fn negotiate(requested: &ProtocolVersion) -> ProtocolVersion {
    if requested.has_initialize() && ProtocolVersion::KNOWN_VERSIONS.contains(requested) {
        requested.clone()
    } else {
        ProtocolVersion::LATEST_WITH_INITIALIZE
    }
}

/// Add the classification to a downstream tool: `readOnlyHint` is set to what the gate
/// will treat it as (a mutating tool also gets `destructiveHint` unless it has one), and
/// `_meta["fleetgate/classification"]` says `read_only` or `mutating`.
pub(crate) fn annotate(mut tool: Tool, class: ToolClass) -> Tool {
    let mut annotations = tool.annotations.take().unwrap_or_default();
    match class {
        ToolClass::ReadOnly => {
            annotations.read_only_hint = Some(true);
            annotations.destructive_hint = Some(false);
        }
        ToolClass::Mutating => {
            annotations.read_only_hint = Some(false);
            annotations.destructive_hint.get_or_insert(true);
        }
    }
    tool.annotations = Some(annotations);
    let meta = tool.meta.get_or_insert_with(MetaObject::default);
    meta.0.insert(CLASSIFICATION_META_KEY.to_owned(), class.as_str().into());
    tool
}

/// The tool result of a refused call: text starting with the blocker literal, then the
/// reasons and the operator action; the decision also as `_meta["fleetgate/gate"]`.
pub(crate) fn refusal(tool: &str, class: ToolClass, decision: &GateDecision) -> CallToolResult {
    let kind = decision.blocker_kind.as_deref().unwrap_or("mutation_refused");
    let mut text = format!("{kind}: `{tool}` ({class}) was refused by the fleet's mutation gate.");
    if !decision.reasons.is_empty() {
        text.push_str("\nreasons:");
        for reason in &decision.reasons {
            text.push_str("\n- ");
            text.push_str(reason);
        }
    }
    if let Some(action) = &decision.operator_action {
        text.push_str("\noperator action: ");
        text.push_str(action);
    }
    let mut result = CallToolResult::error(vec![ContentBlock::text(text)]);
    let mut meta = MetaObject::default();
    meta.0.insert(
        "fleetgate/gate".to_owned(),
        serde_json::json!({
            "allowed": false,
            "blocker_kind": kind,
            "reasons": decision.reasons,
            "operator_action": decision.operator_action,
            "tool": tool,
            "classification": class.as_str(),
        }),
    );
    result.meta = Some(meta);
    result
}

/// Why a downstream tool or method cannot be reached now, starting with
/// [`DOWNSTREAM_UNAVAILABLE`].
pub(crate) fn unavailable_text(what: &str, status: &DownstreamStatus) -> String {
    let state = match &status.state {
        DownstreamState::Absent => "is not configured".to_owned(),
        DownstreamState::Starting => "is starting (its MCP handshake has not finished)".to_owned(),
        DownstreamState::Running => "lost its connection".to_owned(),
        DownstreamState::Restarting { retry_in } => {
            format!("is restarting after a failure; next attempt in {:.1} s", retry_in.as_secs_f64())
        }
        DownstreamState::Quarantined { until, retry_in } => format!(
            "is quarantined after repeated failures; retry in {:.1} s (at {})",
            retry_in.as_secs_f64(),
            crate::timefmt::utc(*until)
        ),
        DownstreamState::Stopped => "has stopped".to_owned(),
    };
    let mut text = format!("{DOWNSTREAM_UNAVAILABLE}: {what} cannot be served: the downstream MCP server {state}.");
    text.push_str(&format!("\nrestarts: {}", status.restarts));
    if let Some(exit) = &status.last_exit {
        text.push_str(&format!("\nlast exit: {exit}"));
    }
    text.push_str("\nThe gateway's control tools still answer.");
    text
}

fn unknown_tool(name: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!("unknown tool `{name}`: neither a control tool nor a tool of the downstream server"),
        Some(serde_json::json!({ "tool": name })),
    )
}

/// The client's `_meta` minus what is the gateway's own business on the downstream
/// connection: the progress token (rmcp picks one per request; progress is translated
/// back) and the sessionless-lifecycle keys (the downstream session was initialised).
fn forwardable_meta(meta: &RequestMetaObject) -> RequestMetaObject {
    let mut meta = meta.clone();
    meta.0.0.retain(|key, _| key != "progressToken" && !key.starts_with("io.modelcontextprotocol/"));
    meta
}

/// What the gateway advertises while it does not know the downstream's capabilities (it
/// is down at `initialize`): everything that may be forwarded, so a downstream that comes
/// back later is not cut off; a method it lacks answers its own error.
fn superset_capabilities() -> ServerCapabilities {
    let mut capabilities = ServerCapabilities::default();
    capabilities.logging = Some(JsonObject::new());
    capabilities.completions = Some(JsonObject::new());
    let mut prompts = PromptsCapability::default();
    prompts.list_changed = Some(true);
    capabilities.prompts = Some(prompts);
    let mut resources = ResourcesCapability::default();
    resources.subscribe = Some(true);
    resources.list_changed = Some(true);
    capabilities.resources = Some(resources);
    capabilities
}

impl Gateway {
    pub(crate) fn new(
        control: Arc<dyn ControlPlane>,
        hub: Arc<Hub>,
        downstream: Option<Arc<Downstream>>,
        control_tools: Vec<Tool>,
        settings: ServiceSettings,
    ) -> Self {
        let control_names = control_tools.iter().map(|t| t.name.to_string()).collect();
        Self {
            control,
            hub,
            downstream,
            control_tools: Arc::new(control_tools),
            control_names: Arc::new(control_names),
            settings,
            attachment: AttachmentId(1),
            attached: OnceLock::new(),
            detach_on_drop: false,
        }
    }

    /// Another attachment's service over the same control plane, downstream and hub (an
    /// HTTP session), detached when dropped.
    pub(crate) fn session(&self, attachment: AttachmentId) -> Self {
        Self {
            control: self.control.clone(),
            hub: self.hub.clone(),
            downstream: self.downstream.clone(),
            control_tools: self.control_tools.clone(),
            control_names: self.control_names.clone(),
            settings: self.settings.clone(),
            attachment,
            attached: OnceLock::new(),
            detach_on_drop: true,
        }
    }

    fn status(&self) -> DownstreamStatus {
        self.downstream.as_ref().map_or_else(DownstreamStatus::absent, |d| d.status())
    }

    /// Attach the client, once: remember its peer and capabilities (the downstream is
    /// initialised with them) and tell the control plane. `false` if already attached.
    async fn attach(
        &self,
        peer: rmcp::Peer<RoleServer>,
        client: ClientAttach,
        capabilities: ClientCapabilities,
    ) -> bool {
        if self.attached.set(client.clone()).is_err() {
            return false;
        }
        tracing::info!(attachment = %self.attachment, client = %client.client_name, version = %client.client_version,
            protocol = %client.protocol_version, "client attached");
        self.hub.attach(peer, capabilities);
        let control = self.control.clone();
        let attachment = self.attachment;
        match blocking("on_client_attach", move || control.on_client_attach(attachment, &client)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::error!(error = %e, "the control plane could not register the worker"),
            Err(_) => {}
        }
        true
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
        };
        let deadline = Instant::now() + self.settings.attach_wait;
        if !self.attach(context.peer.clone(), client, params.capabilities.clone()).await {
            return Err(ErrorData::invalid_request("the session is already initialized", None));
        }
        let link = match &self.downstream {
            Some(downstream) => downstream.wait_ready(deadline).await,
            None => None,
        };
        Ok(self.server_config(link.as_deref()).with_protocol_version(version))
    }

    /// The gateway's `initialize` answer: its own identity, the downstream's capabilities
    /// (or the superset while it is down), always tools with `listChanged`.
    fn server_config(&self, link: Option<&Connection>) -> InitializeResult {
        let mut capabilities = match (link, &self.downstream) {
            (Some(connection), _) => connection.capabilities.clone(),
            (None, Some(_)) => superset_capabilities(),
            (None, None) => ServerCapabilities::default(),
        };
        let mut tools = ToolsCapability::default();
        tools.list_changed = Some(true);
        capabilities.tools = Some(tools);
        let instructions =
            self.settings.instructions.clone().or_else(|| link.and_then(|connection| connection.instructions.clone()));
        let mut result = InitializeResult::new(capabilities).with_server_info(self.settings.server_info.clone());
        result.instructions = instructions;
        result
    }

    /// A sessionless (2026-07-28) client has no `initialize`: attach on its first request,
    /// from the lifecycle `_meta` rmcp already validated.
    async fn attach_inline(&self, context: &RequestContext<RoleServer>) {
        if self.attached.get().is_some() {
            return;
        }
        let Some(version) = context.meta.protocol_version() else { return };
        let info = context.meta.client_info().unwrap_or_else(|| Implementation::new("unknown", "unknown"));
        let client = ClientAttach {
            client_name: info.name,
            client_version: info.version,
            protocol_version: version.to_string(),
        };
        let capabilities = context.meta.client_capabilities().unwrap_or_default();
        self.attach(context.peer.clone(), client, capabilities).await;
    }

    /// Send `request` to the downstream on behalf of the client's request `context`.
    async fn send(
        &self,
        connection: &Connection,
        request: ClientRequest,
        context: &RequestContext<RoleServer>,
    ) -> Result<ServerResult, ForwardError> {
        let client_token = context.meta.get_progress_token();
        let options =
            PeerRequestOptions::with_timeout(self.settings.call_timeout).with_meta(forwardable_meta(&context.meta));
        let handle = connection.peer.send_cancellable_request(request, options).await.map_err(forward_error)?;
        let (id, peer, token) = (handle.id.clone(), handle.peer.clone(), handle.progress_token.clone());
        if let Some(client_token) = &client_token {
            self.hub.map_progress(token.clone(), client_token.clone(), context.peer.clone());
        }
        let result = tokio::select! {
            result = handle.await_response() => result.map_err(forward_error),
            () = context.ct.cancelled() => {
                let reason = Some("cancelled by the client".to_owned());
                let cancel = CancelledNotification::new(CancelledNotificationParam::new(Some(id), reason));
                let _ = peer.send_notification(ClientNotification::CancelledNotification(cancel)).await;
                Err(ForwardError::Cancelled)
            }
        };
        if client_token.is_some() {
            self.hub.unmap_progress(&token);
        }
        result
    }

    async fn list_tools(
        &self,
        request: ListToolsRequest,
        context: &RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let cursor = request.params.as_ref().and_then(|p| p.cursor.clone());
        let mut tools = Vec::new();
        let mut next_cursor = None;
        let link = self.downstream.as_ref().and_then(|d| d.link());
        match &link {
            Some(connection) => match self.send(connection, ClientRequest::ListToolsRequest(request), context).await {
                Ok(ServerResult::ListToolsResult(page)) => {
                    self.hub.remember_tools(connection.generation, &page.tools);
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
                        ForwardError::Cancelled => return Err(ErrorData::internal_error("cancelled", None)),
                    };
                    tracing::warn!(%message, "downstream tools/list failed; listing the control tools only");
                }
                Err(error) => return Err(self.forward_error_data(error, "tools/list")),
            },
            None if cursor.is_some() => {
                return Err(ErrorData::invalid_params(
                    unavailable_text("tools/list with a cursor", &self.status()),
                    None,
                ));
            }
            None => {}
        }
        if cursor.is_none() {
            let mut first = self.control_tools.as_ref().clone();
            first.append(&mut tools);
            tools = first;
        }
        let mut result = ListToolsResult::with_all_items(tools);
        result.next_cursor = next_cursor;
        Ok(result)
    }

    /// Drop what the role may never call and what a control tool shadows; classify the
    /// rest.
    async fn filter_and_annotate(&self, tools: Vec<Tool>) -> Result<Vec<Tool>, ErrorData> {
        let control = self.control.clone();
        let names = self.control_names.clone();
        blocking("role_permits/classify", move || {
            tools
                .into_iter()
                .filter(|tool| {
                    if names.contains(tool.name.as_ref()) {
                        tracing::warn!(tool = %tool.name, "a downstream tool is shadowed by a control tool");
                        return false;
                    }
                    control.role_permits(&tool.name)
                })
                .map(|tool| {
                    let class = control.classify(&tool);
                    annotate(tool, class)
                })
                .collect()
        })
        .await
    }

    /// The downstream's definition of `name`: from the catalogue, else by listing every
    /// page (bounded) until it shows up.
    async fn find_tool(
        &self,
        connection: &Connection,
        name: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<Option<Tool>, ForwardError> {
        if let Some(tool) = self.hub.known_tool(connection.generation, name) {
            return Ok(Some(tool));
        }
        let mut cursor = None;
        for _ in 0..MAX_CATALOGUE_PAGES {
            let request = ListToolsRequest::with_param(PaginatedRequestParams::default().with_cursor(cursor));
            let page = match self.send(connection, ClientRequest::ListToolsRequest(request), context).await? {
                ServerResult::ListToolsResult(page) => page,
                _ => return Ok(None),
            };
            self.hub.remember_tools(connection.generation, &page.tools);
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
        request: CallToolRequest,
        context: &RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        let name = request.params.name.to_string();
        if self.control_names.contains(&name) {
            let arguments = request.params.arguments.clone().unwrap_or_default();
            let status = self.status();
            let control = self.control.clone();
            let attachment = self.attachment;
            let result =
                blocking("call_control_tool", move || control.call_control_tool(attachment, &name, arguments, &status))
                    .await?;
            return Ok(ServerResult::CallToolResult(result));
        }
        let Some(downstream) = &self.downstream else { return Err(unknown_tool(&name)) };
        let Some(connection) = downstream.link() else {
            let what = format!("`{name}`");
            let text = unavailable_text(&what, &downstream.status());
            return Ok(ServerResult::CallToolResult(CallToolResult::error(vec![ContentBlock::text(text)])));
        };
        let tool = match self.find_tool(&connection, &name, context).await {
            Ok(Some(tool)) => tool,
            Ok(None) => return Err(unknown_tool(&name)),
            Err(error) => return self.call_failed(&name, error, downstream),
        };
        let control = self.control.clone();
        let gated = name.clone();
        let attachment = self.attachment;
        let (class, decision) = blocking("classify/decide", move || {
            let class = control.classify(&tool);
            let decision = control.decide(attachment, &gated, class);
            (class, decision)
        })
        .await?;
        if !decision.allowed {
            tracing::info!(attachment = %self.attachment, tool = %name, %class, blocker = ?decision.blocker_kind,
                "call refused by the gate");
            return Ok(ServerResult::CallToolResult(refusal(&name, class, &decision)));
        }
        match self.send(&connection, ClientRequest::CallToolRequest(request), context).await {
            Ok(result) => Ok(result),
            Err(error) => self.call_failed(&name, error, downstream),
        }
    }

    /// A forwarded `tools/call` that got no result: a tool error for the model, except a
    /// JSON-RPC error from the downstream, which passes through.
    fn call_failed(&self, name: &str, error: ForwardError, downstream: &Downstream) -> Result<ServerResult, ErrorData> {
        let text = match error {
            ForwardError::Mcp(error) => return Err(error),
            ForwardError::Cancelled => return Err(ErrorData::internal_error("cancelled by the client", None)),
            ForwardError::Timeout(timeout) => format!(
                "{DOWNSTREAM_TIMEOUT}: `{name}` got no answer from the downstream MCP server within {:.1} s; \
                 the call was cancelled (it may or may not have taken effect).",
                timeout.as_secs_f64()
            ),
            ForwardError::Gone(reason) => format!(
                "{}\nThe call to `{name}` was in flight ({reason}); it was not retried and may or may not have \
                 taken effect.",
                unavailable_text(&format!("`{name}`"), &downstream.status())
            ),
        };
        Ok(ServerResult::CallToolResult(CallToolResult::error(vec![ContentBlock::text(text)])))
    }

    fn forward_error_data(&self, error: ForwardError, method: &str) -> ErrorData {
        match error {
            ForwardError::Mcp(error) => error,
            ForwardError::Cancelled => ErrorData::internal_error("cancelled by the client", None),
            ForwardError::Timeout(timeout) => ErrorData::internal_error(
                format!("{DOWNSTREAM_TIMEOUT}: `{method}` got no answer within {:.1} s", timeout.as_secs_f64()),
                None,
            ),
            ForwardError::Gone(_) => {
                ErrorData::internal_error(unavailable_text(&format!("`{method}`"), &self.status()), None)
            }
        }
    }

    /// Anything else the client asks: the downstream's business.
    async fn forward(
        &self,
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
        let Some(downstream) = &self.downstream else {
            return Err(ErrorData::new(ErrorCode::METHOD_NOT_FOUND, method, None));
        };
        let Some(connection) = downstream.link() else {
            return Err(ErrorData::internal_error(
                unavailable_text(&format!("`{method}`"), &downstream.status()),
                None,
            ));
        };
        self.send(&connection, request, context).await.map_err(|e| self.forward_error_data(e, &method))
    }
}

impl Gateway {
    /// Answer one client request, unshaped: the stdio service shapes the result for the
    /// client's protocol era below, rmcp's `ServerHandler` dispatch does it over HTTP.
    pub(crate) async fn dispatch(
        &self,
        request: ClientRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        if !matches!(
            request,
            ClientRequest::InitializeRequest(_) | ClientRequest::PingRequest(_) | ClientRequest::DiscoverRequest(_)
        ) {
            self.attach_inline(&context).await;
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
            ClientRequest::ListToolsRequest(request) => {
                self.list_tools(request, &context).await.map(ServerResult::ListToolsResult)
            }
            ClientRequest::CallToolRequest(request) => self.call_tool(request, &context).await,
            other => self.forward(other, &context).await,
        }
    }

    /// A client notification: the roots list and custom notifications go to the
    /// downstream. Cancellations are rmcp's (they cancel the handler's token, which
    /// cancels the forwarded request); `initialized` is answered by the downstream's own
    /// session.
    pub(crate) async fn notify(&self, notification: ClientNotification) {
        let forward = match notification {
            ClientNotification::RootsListChangedNotification(_) | ClientNotification::CustomNotification(_) => {
                notification
            }
            _ => return,
        };
        if let Some(connection) = self.downstream.as_ref().and_then(|d| d.link())
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
        let modern = context.protocol_version().is_some_and(|v| !v.has_initialize());
        let result = self.dispatch(request, context).await;
        // The shape each protocol era expects, as rmcp's own server handler does it.
        result.map(|mut result| {
            if modern {
                result.fill_missing_cache_hints();
            } else {
                result.strip_result_type_for_legacy_peer();
                result.strip_non_object_output_for_legacy_peer();
            }
            result
        })
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
        self.server_config(self.downstream.as_ref().and_then(|d| d.link()).as_deref())
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS)
    }
}

#[cfg(test)]
mod tests {
    use super::{annotate, negotiate, refusal};
    use crate::control::{GateDecision, ToolClass};
    use rmcp::model::{ProtocolVersion, Tool};

    #[test]
    fn refusal_text_starts_with_the_blocker_and_names_reasons_and_action() {
        let decision = GateDecision::refuse(
            "fleet_inventory_blocked",
            vec!["gitea-merger is missing".to_owned()],
            Some("start the merger".to_owned()),
        );
        let result = refusal("git_add", ToolClass::Mutating, &decision);
        assert_eq!(result.is_error, Some(true));
        let text = serde_json::to_value(&result.content).unwrap()[0]["text"].as_str().unwrap().to_owned();
        assert!(text.starts_with("fleet_inventory_blocked: `git_add` (mutating)"), "{text}");
        assert!(text.contains("- gitea-merger is missing"), "{text}");
        assert!(text.ends_with("operator action: start the merger"), "{text}");
    }

    #[test]
    fn annotation_overrides_the_hint_and_records_the_class() {
        let tool = annotate(Tool::default(), ToolClass::Mutating);
        let json = serde_json::to_value(&tool).unwrap();
        assert_eq!(json["annotations"]["readOnlyHint"], false);
        assert_eq!(json["annotations"]["destructiveHint"], true);
        assert_eq!(json["_meta"]["fleetgate/classification"], "mutating");
        let json = serde_json::to_value(annotate(Tool::default(), ToolClass::ReadOnly)).unwrap();
        assert_eq!(json["annotations"]["readOnlyHint"], true);
        assert_eq!(json["_meta"]["fleetgate/classification"], "read_only");
    }

    #[test]
    fn negotiation_echoes_known_handshake_versions_only() {
        assert_eq!(negotiate(&ProtocolVersion::V_2025_03_26), ProtocolVersion::V_2025_03_26);
        assert_eq!(negotiate(&ProtocolVersion::V_2026_07_28), ProtocolVersion::V_2025_11_25);
        let unknown: ProtocolVersion = serde_json::from_str("\"2099-01-01\"").unwrap();
        assert_eq!(negotiate(&unknown), ProtocolVersion::V_2025_11_25);
    }
}
