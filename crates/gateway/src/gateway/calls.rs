//! A client's tool calls and everything else it asks, on its own channel: `tools/list`
//! filtered and annotated by the control plane, `tools/call` put to the gate (with the
//! downstream link the gate reads through) and forwarded only when allowed, the forwarded
//! answer handed back to the control plane, and any other request forwarded as it is.

use super::*;
use crate::channel_state::OwnedTask;
use crate::param_headers;
use crate::{CallToJudge, Step};
use rmcp::model::{CancelTaskParams, CancelTaskRequest};

/// Whether the request declares a protocol version that mirrors arguments in headers
/// (2026-07-28 and later), the rule rmcp's HTTP service applies.
fn standard_headers_required(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v >= ProtocolVersion::STANDARD_HEADERS.as_str())
}

impl Gateway {
    pub(super) async fn list_tools(
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
            let mut first = self.hub.control_tools.clone();
            first.append(&mut tools);
            tools = first;
        }
        let mut result = ListToolsResult::with_all_items(tools);
        result.next_cursor = next_cursor;
        Ok(result)
    }

    /// Drop what the role may never call and what a control tool shadows; annotate the
    /// rest with their listing.
    pub(super) async fn filter_and_annotate(&self, tools: Vec<Tool>) -> Result<Vec<Tool>, ErrorData> {
        let hub = self.hub.clone();
        blocking("list_tool", move || {
            tools
                .into_iter()
                .filter_map(|tool| {
                    if hub.control_names.contains(tool.name.as_ref()) {
                        tracing::warn!(tool = %tool.name, "a downstream tool is shadowed by a control tool");
                        return None;
                    }
                    let listing = hub.control.list_tool(&tool);
                    listing.visible.then(|| annotate(tool, listing.class, listing.meta))
                })
                .collect()
        })
        .await
    }

    /// The downstream's definition of `name`: from the catalogue, else by listing every
    /// page (bounded) until it shows up.
    pub(super) async fn find_tool(
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

    /// A call of one of the control plane's own tools, answered by it on the blocking pool.
    async fn call_control(
        &self,
        attachment: &Attachment,
        request: CallToolRequest,
        name: String,
        context: &RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        let (channel, id) = (&attachment.channel, attachment.id);
        // A control tool that reads the forge through the downstream waits for it as a
        // forwarded call would (a stateless client's first request may be this one,
        // before its downstream has connected); the others report it as it is.
        let connection = if channel.has_downstream() && self.hub.control.control_tool_reads_downstream(&name) {
            channel.ready(self.settings().attach_wait).await
        } else {
            channel.link()
        };
        // The control plane builds its reads of the downstream from the tools it lists:
        // list them once per connection when no call has yet.
        if let Some(connection) = &connection
            && !channel.state.listed(connection.generation)
        {
            let _ = self.find_tool(attachment, connection, "", context).await;
        }
        let arguments = request.params.arguments.clone().unwrap_or_default();
        let status = channel.status();
        let control = self.hub.control.clone();
        let state = channel.state.clone();
        let generation = connection.as_ref().map(|c| c.generation);
        let link = connection.as_ref().map(|c| PeerLink::new(c, self.settings().call_timeout));
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
        Ok(ServerResult::CallToolResult(result))
    }

    pub(super) async fn call_tool(
        &self,
        attachment: &Attachment,
        request: CallToolRequest,
        context: &RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        let name = request.params.name.to_string();
        let channel = &attachment.channel;
        let id = attachment.id;
        if self.hub.control_names.contains(&name) {
            return self.call_control(attachment, request, name, context).await;
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
        // SEP-2243: a parameter header that disagrees with the argument it mirrors is refused
        // here, against the definition the call is judged by, before the gate (rmcp answers
        // a stateless request's `-32020` with HTTP 400).
        if let Some(parts) = context.extensions.get::<axum::http::request::Parts>()
            && standard_headers_required(&parts.headers)
            && let Err(why) =
                param_headers::check(&parts.headers, &tool.input_schema, request.params.arguments.as_ref())
        {
            tracing::info!(attachment = %id, tool = %name, %why, "call refused: a parameter header disagrees");
            return Err(ErrorData::new(ErrorCode::HEADER_MISMATCH, why.to_string(), None));
        }
        let judging = CallToJudge {
            tool: tool.clone(),
            arguments: request.params.arguments.clone(),
            catalogue: Arc::new(Listed { state: channel.state.clone(), generation: connection.generation }),
        };
        // Held for the whole call (its reads, its decision, its forward, what it settles) when
        // the control plane serialises it.
        let (verdict, _serial) = self.judged(id, &connection, judging, context, true).await?;
        let Verdict { class, decision, settles, forward, perform, .. } = verdict;
        if !decision.allowed {
            tracing::info!(attachment = %id, tool = %name, %class, blocker = ?decision.blocker_kind,
                "call refused by the gate");
            return Ok(ServerResult::CallToolResult(refusal(&name, class, &decision)));
        }
        // What goes downstream is what the gate judged: its own serialization of the
        // arguments, with what it pins, never the client's bytes. The outcome is settled
        // against the same arguments.
        let mut request = request;
        if let Some(forward) = forward {
            request.params.arguments = Some(forward);
        }
        // Kept for the settling after the answer (or the control plane's own call) only when
        // there is one.
        let arguments = (settles.is_some() || perform.is_some()).then(|| request.params.arguments.clone()).flatten();
        // A call the control plane makes itself (a merge pinned through the forge's own API):
        // never sent downstream; its answer is settled like a forwarded one's.
        if let Some(what) = perform {
            let control = self.hub.control.clone();
            let link = PeerLink::new(&connection, self.settings().call_timeout);
            let made = blocking("perform", move || {
                let call = ToolCall {
                    tool: &tool,
                    arguments: arguments.as_ref(),
                    answers: &[],
                    link: Some(&link),
                    settles: settles.as_deref(),
                    catalogue: None,
                };
                let result = control.perform(id, &call, &what);
                if call.settles.is_some() {
                    control.on_forwarded(id, &call, &result);
                }
                result
            });
            let result = made.await?;
            tracing::info!(attachment = %id, tool = %name, error = result.is_error == Some(true),
                "call made by the control plane");
            return Ok(ServerResult::CallToolResult(result));
        }
        self.forward_judged(attachment, &connection, request, (tool, arguments, settles), context).await
    }

    /// An allowed call sent downstream as judged: its answer handed back, what it settles
    /// recorded, a task it became made this client's.
    async fn forward_judged(
        &self,
        attachment: &Attachment,
        connection: &Connection,
        request: CallToolRequest,
        (tool, arguments, settles): (Tool, Option<rmcp::model::JsonObject>, Option<String>),
        context: &RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        let (channel, id, name) = (&attachment.channel, attachment.id, request.params.name.to_string());
        // SEP-2663: a call whose outcome the control plane settles (a merge, a review, a push)
        // is never made a task — its answer must come back here; any other may be, and the
        // task is then this client's alone.
        // Only a downstream that offers tasks can make one: no other call pays for the check.
        let may_task =
            connection.capabilities.supports_tasks() && Self::facts(attachment, context).capabilities.supports_tasks();
        let owned = (may_task && settles.is_none()).then(|| request.params.arguments.clone());
        let forward = tracing::info_span!("forward", tool = %name, pid = connection.pid);
        let sent = Instant::now();
        let answered = self
            .send_as(
                attachment,
                connection,
                ClientRequest::CallToolRequest(request),
                context,
                settles.is_some() && may_task,
            )
            .instrument(forward)
            .await;
        if let Some(observer) = &self.settings().observer {
            observer.forwarded_call(sent.elapsed());
        }
        match answered {
            Ok(ServerResult::CreateTaskResult(task)) if settles.is_some() || owned.is_none() => {
                // The downstream made a task of a call it was asked to run through (or for a
                // client that did not declare tasks): its outcome cannot be settled here.
                tracing::error!(attachment = %id, tool = %name, task = %task.task.task_id,
                    "the downstream answered a settling call with a task; cancelling it");
                let cancel = CancelTaskRequest::new(CancelTaskParams::new(task.task.task_id.clone()));
                let _ = connection.peer.send_request(ClientRequest::CancelTaskRequest(cancel)).await;
                Err(ErrorData::internal_error(
                    format!("the downstream made a task of `{name}`, whose outcome the gate must see: cancelled"),
                    None,
                ))
            }
            Ok(ServerResult::CreateTaskResult(task)) => {
                let call = OwnedTask { tool, arguments: owned.flatten() };
                if channel.state.tasks.made(attachment.id, task.task.task_id.clone(), call) {
                    // A stateless client's next request may reach another replica: the task is
                    // recorded before its id is answered.
                    if let (Some(client), Some(owner)) = (&attachment.stateless, self.hub.advertise.get()) {
                        let (control, client, owner) = (self.hub.control.clone(), client.clone(), owner.clone());
                        let id = task.task.task_id.clone();
                        let _ = blocking("task_made", move || control.task_made(&client, &id, &owner)).await;
                    }
                    Ok(ServerResult::CreateTaskResult(task))
                } else {
                    tracing::error!(attachment = %id, task = %task.task.task_id,
                        "the downstream answered with a task id another client owns; not handed over");
                    Err(ErrorData::internal_error(
                        "the downstream answered with a task id that belongs to another client: not handed over",
                        None,
                    ))
                }
            }
            Ok(result) => {
                if let (Some(settles), ServerResult::CallToolResult(answer)) = (settles, &result) {
                    let (control, answer) = (self.hub.control.clone(), answer.clone());
                    // What a call settles may need a read of its own (a pushed branch's tip).
                    let link = PeerLink::new(connection, self.settings().call_timeout);
                    let recorded = blocking("on_forwarded", move || {
                        let call = ToolCall {
                            tool: &tool,
                            arguments: arguments.as_ref(),
                            answers: &[],
                            link: Some(&link),
                            settles: Some(&settles),
                            catalogue: None,
                        };
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
    pub(super) fn call_failed(
        &self,
        channel: &Channel,
        name: &str,
        error: ForwardError,
    ) -> Result<ServerResult, ErrorData> {
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

    pub(super) fn forward_error_data(&self, channel: &Channel, error: ForwardError, method: &str) -> ErrorData {
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

    /// SEP-2663 `tasks/get`, `tasks/update`, `tasks/cancel`: forwarded only for a task the
    /// downstream made for this client (any other id is unknown here, never forwarded), and a
    /// `tasks/update` — input the task asked for — only when the gate allows the call that
    /// made the task again, as it would a retried call.
    pub(super) async fn task_request(
        &self,
        attachment: &Attachment,
        request: ClientRequest,
        context: &RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        let task_id = match &request {
            ClientRequest::GetTaskRequest(r) => r.params.task_id.clone(),
            ClientRequest::UpdateTaskRequest(r) => r.params.task_id.clone(),
            ClientRequest::CancelTaskRequest(r) => r.params.task_id.clone(),
            _ => return self.forward(attachment, request, context).await,
        };
        let Some(owned) = attachment.channel.state.tasks.get(attachment.id, &task_id) else {
            tracing::info!(attachment = %attachment.id, method = request.method(), "unknown task refused");
            return Err(ErrorData::invalid_params(
                format!("unknown task {task_id:?}: this client has no such task"),
                None,
            ));
        };
        if matches!(request, ClientRequest::UpdateTaskRequest(_)) {
            let channel = &attachment.channel;
            let Some(connection) = channel.ready(self.settings().attach_wait).await else {
                return Err(ErrorData::internal_error(unavailable_text("`tasks/update`", &channel.status()), None));
            };
            let OwnedTask { tool, arguments } = owned;
            let name = tool.name.to_string();
            let catalogue = Arc::new(Listed { state: channel.state.clone(), generation: connection.generation });
            let judging = CallToJudge { tool, arguments, catalogue };
            // Input a task asked for is judged as the call that made it, and never waits.
            let (verdict, _) = self.judged(attachment.id, &connection, judging, context, false).await?;
            if !verdict.decision.allowed {
                let text = refusal(&name, verdict.class, &verdict.decision)
                    .content
                    .iter()
                    .filter_map(|c| c.as_text().map(|t| t.text.clone()))
                    .collect::<Vec<_>>()
                    .join("\n");
                return Err(ErrorData::invalid_request(format!("the task's input is refused: {text}"), None));
            }
        }
        self.forward(attachment, request, context).await
    }

    /// Anything else the client asks: the downstream's business, on its own channel.
    pub(super) async fn forward(
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

/// How often a client that asked for progress hears that a decision is still pending.
const DECIDING_PROGRESS: std::time::Duration = std::time::Duration::from_secs(5);

/// `deciding`, with a progress notification to the client every [`DECIDING_PROGRESS`] while
/// it is pending, when the request carries a progress token: a decision that waits (for an
/// operator's approval of the call) keeps the client informed, and its request alive.
async fn with_progress<T>(deciding: impl std::future::Future<Output = T>, context: &RequestContext<RoleServer>) -> T {
    let Some(token) = context.meta.get_progress_token() else { return deciding.await };
    tokio::pin!(deciding);
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + DECIDING_PROGRESS, DECIDING_PROGRESS);
    let mut sent = 0u32;
    loop {
        tokio::select! {
            done = &mut deciding => return done,
            _ = ticks.tick() => {
                sent += 1;
                let param = rmcp::model::ProgressNotificationParam::new(token.clone(), f64::from(sent))
                    .with_message("waiting for the gate's decision (an operator's approval of this call)");
                let note = rmcp::model::ServerNotification::ProgressNotification(rmcp::model::Notification::new(param));
                if let Err(e) = context.peer.send_notification(note).await {
                    tracing::debug!(error = %e, "could not tell the client its call is still being decided");
                }
            }
        }
    }
}

impl Gateway {
    /// One call judged: the control plane's [`Judgement`](crate::Judgement) of it (or the
    /// gateway's [`Stepwise`](crate::Stepwise) one) driven to its verdict — the one loop
    /// that does the judgement's I/O: the serial key taken, the reads made, the decision on
    /// the blocking pool, the call held for an operator (when `hold`), each answer fed back.
    /// The serial key, when one was taken, is handed back held.
    async fn judged(
        &self,
        id: crate::AttachmentId,
        connection: &Connection,
        call: CallToJudge,
        context: &RequestContext<RoleServer>,
        hold: bool,
    ) -> Result<(Verdict, Option<tokio::sync::OwnedMutexGuard<()>>), ErrorData> {
        let control = self.hub.control.clone();
        let mut judgement = match control.judge(id, &call) {
            Some(judgement) => judgement,
            None => Box::new(crate::Stepwise::journey(control.clone(), id, call)),
        };
        let (started, timeout) = (std::time::Instant::now(), self.settings().call_timeout);
        let mut serial = None;
        loop {
            match judgement.next() {
                Step::Serialize(key) => serial = Some(self.hub.serial.lock(&key).await),
                Step::Read(reads) => {
                    let link = PeerLink::new(connection, timeout);
                    let mut answers = Vec::with_capacity(reads.len());
                    for read in reads {
                        let answer = link.call(&read.tool, read.arguments.clone()).await;
                        answers.push(ReadAnswer { read, answer });
                    }
                    judgement.answered(answers);
                }
                Step::Decide => {
                    let (decider, link) = (control.clone(), PeerLink::new(connection, timeout));
                    let deciding = blocking("decide", move || {
                        let verdict = decider.decide_judged(id, &*judgement, &link);
                        (judgement, verdict)
                    });
                    let (back, verdict) = with_progress(deciding, context).await?;
                    judgement = back;
                    judgement.decided(verdict);
                }
                // Waiting for an operator: no lock held, no thread; once answered, the call is
                // judged again from the start (its reads included).
                Step::Hold(request) => {
                    serial = None;
                    let waiting = if hold { control.hold(id, &request, started) } else { None };
                    let answered = match waiting {
                        Some(waiting) => with_progress(waiting, context).await,
                        None => false,
                    };
                    judgement.held(answered);
                }
                Step::Done(verdict) => return Ok((verdict, serial)),
            }
        }
    }
}

/// The tool schemas the downstream listed on one connection: what the control plane builds
/// its reads from (a read of a tool the connection never listed uses the dialect's newest
/// names).
struct Listed {
    state: Arc<crate::channel_state::ChannelState>,
    generation: u64,
}

impl fleetgate_core::dialect::Schemas for Listed {
    fn schema(&self, tool: &str) -> Option<rmcp::model::JsonObject> {
        self.state.known_tool(self.generation, tool).map(|t| (*t.input_schema).clone())
    }
}
