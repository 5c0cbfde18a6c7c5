//! The downstream → client direction of one channel: what the downstream server sends its
//! client (the gateway) that belongs to the real client. One [`Relay`] is the rmcp client
//! service of one downstream connection. Its channel serves one attachment, so nothing it
//! passes up can reach another attachment; or, shared (`[downstream] sharing = "gateway"`),
//! every HTTP attachment, and then what it passes up goes only where it names: progress and
//! answers to the request's own client, a list change to every client, anything else that
//! answers no request to no one.
//!
//! * Requests (`sampling/createMessage`, `elicitation/create`, `roots/list`, custom ones)
//!   go to the client request that caused them ([`crate::routes::originator`]), on that
//!   request's own stream, or are refused back to the downstream with the reason; `ping`
//!   is answered here. At most [`MAX_PENDING_ASKS`] wait for the client at once per
//!   channel; the excess is refused back to the downstream at once, naming the limit.
//! * Notifications are queued by the transport tap as it reads them (bounded, see
//!   [`crate::outbox`]) and sent by [`forward_to_client`], one at a time in wire order.
//!   Progress goes to the request it reports on, its token translated back to the
//!   client's (the progress lock of [`crate::routes::Routes`]). Other notifications
//!   (logging, list changes, resource updates) go to the attachment's session; a stateless
//!   attachment has none: its list changes and resource updates go to its open
//!   `subscriptions/listen` streams (each stream's filter applied, [`crate::subscriptions`]),
//!   and without one, like its logging, ride the stream of its oldest request in flight, or
//!   are dropped. A `tools/list_changed` also empties the catalogue.

use crate::channel_state::ChannelState;
use crate::outbox::NOTIFY_PATIENCE;
use crate::routes::{InputKind, MAX_PENDING_ASKS, ProgressSeq};
use rmcp::ErrorData;
use rmcp::model::{
    CancelledNotification, CancelledNotificationParam, ClientConfig, ClientResult, ErrorCode, GetExtensions,
    ProgressNotification, ServerNotification, ServerRequest,
};
use rmcp::service::{
    NotificationContext, OriginatingRequestId, PeerRequestOptions, RequestContext, RoleClient, Service, ServiceError,
};
use std::sync::{Arc, Weak};

/// The gateway's client side towards one downstream connection.
pub(crate) struct Relay {
    pub(crate) state: Arc<ChannelState>,
    /// What the gateway says about itself in the downstream's `initialize`.
    pub(crate) info: ClientConfig,
}

/// An rmcp failure talking to the client, as the error the downstream gets.
fn client_error(error: ServiceError) -> ErrorData {
    match error {
        ServiceError::McpError(error) => error,
        other => ErrorData::internal_error(format!("the gateway could not reach its client: {other}"), None),
    }
}

/// The answer to a downstream request past [`MAX_PENDING_ASKS`]: it is not forwarded.
fn too_many_asks() -> ErrorData {
    ErrorData::internal_error(
        format!(
            "refused by the fleetgate gateway: too many requests from this server are waiting for the client's \
             answer on this connection ({MAX_PENDING_ASKS}); it was not forwarded, ask again once one is answered"
        ),
        Some(serde_json::json!({ "limit": MAX_PENDING_ASKS })),
    )
}

impl Relay {
    /// Pass a downstream request to the client request that caused it, on its stream.
    async fn ask_client(
        &self,
        mut request: ServerRequest,
        context: RequestContext<RoleClient>,
    ) -> Result<ClientResult, ErrorData> {
        let kind = InputKind::of(&request);
        let Some(_pending) = self.state.routes.ask() else {
            tracing::info!(attachment = %self.state.attachment, ?kind, limit = MAX_PENDING_ASKS,
                "downstream request refused: too many waiting for the client");
            return Err(too_many_asks());
        };
        // A shared run serving several clients cannot tell whose call a request belongs to:
        // a call that ended (cancelled, timed out) may still be asking, and the gate's own
        // reads are nobody's call. Only a run serving one client asks it.
        let shared_by = self.state.attached();
        let routed = match shared_by {
            n if self.state.shared && n > 1 => Err(crate::routes::Refusal::Ambiguous(n)),
            _ => self.state.routes.route(kind),
        };
        let origin = match routed {
            Ok(origin) => origin,
            Err(refusal) => {
                tracing::info!(attachment = %self.state.attachment, ?kind, %refusal,
                    "downstream request refused");
                let code = match refusal {
                    crate::routes::Refusal::NoOriginatingRequest | crate::routes::Refusal::Ambiguous(_) => {
                        ErrorCode::INVALID_PARAMS
                    }
                    _ => ErrorCode::METHOD_NOT_FOUND,
                };
                return Err(ErrorData::new(code, refusal.to_string(), None));
            }
        };
        // The originating request's id tells the HTTP transport which stream carries the
        // question. Sent from a task of its own: rmcp marks a request sent inside a
        // handler with that handler's request id, which here would be the downstream's.
        request.extensions_mut().insert(OriginatingRequestId(origin.client_request.clone()));
        let peer = origin.peer.clone();
        let asked = tokio::spawn(async move {
            let handle = peer.send_cancellable_request(request, PeerRequestOptions::no_options()).await?;
            let (id, peer) = (handle.id.clone(), handle.peer.clone());
            Ok::<_, ServiceError>((id, peer, handle))
        });
        let (id, peer, handle) = match asked.await {
            Ok(sent) => sent.map_err(client_error)?,
            Err(e) => return Err(ErrorData::internal_error(format!("the request to the client failed: {e}"), None)),
        };
        tokio::select! {
            result = handle.await_response() => result.map_err(client_error),
            () = context.ct.cancelled() => {
                // The downstream gave up on its request: tell the client too.
                let reason = Some("cancelled by the downstream server".to_owned());
                let cancel = CancelledNotification::new(CancelledNotificationParam::new(Some(id), reason));
                let _ = peer.send_notification(cancel.into()).await;
                Err(ErrorData::internal_error("cancelled", None))
            }
        }
    }
}

impl Service<RoleClient> for Relay {
    async fn handle_request(
        &self,
        request: ServerRequest,
        context: RequestContext<RoleClient>,
    ) -> Result<ClientResult, ErrorData> {
        if matches!(request, ServerRequest::PingRequest(_)) {
            return Ok(ClientResult::empty(()));
        }
        self.ask_client(request, context).await
    }

    async fn handle_notification(
        &self,
        notification: ServerNotification,
        _context: NotificationContext<RoleClient>,
    ) -> Result<(), ErrorData> {
        // The transport tap queues every other notification itself, in wire order.
        // rmcp already resolved a cancelled request locally; the client never saw the
        // downstream's ids.
        if !matches!(notification, ServerNotification::CancelledNotification(_)) {
            self.state.notify_client(notification);
        }
        Ok(())
    }

    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }
}

/// Forward the channel's queued notifications to the client, one at a time and in the
/// order the downstream sent them (the queue is filled by the transport tap as it reads):
/// progress to the request it reports on, with the client's token; the rest to the
/// attachment's session, or for a stateless attachment, which has none, the stream of its
/// oldest request in flight (else dropped). On a shared channel, see [`deliver_shared`].
/// Ends with the channel.
pub(crate) async fn forward_to_client(state: Weak<ChannelState>, mut queue: crate::outbox::Inbox<ServerNotification>) {
    while let Some(notification) = queue.recv().await {
        let Some(state) = state.upgrade() else { return };
        match notification {
            ServerNotification::ProgressNotification(progress) => deliver_progress(&state, progress).await,
            other if state.shared => deliver_shared(&state, other).await,
            other if is_subscribable(&other) && state.subscriptions.is_listening() => {
                for sink in state.subscriptions.sinks() {
                    if let Err(e) = sink.send(other.clone()).await
                        && crate::subscriptions::closed(&e)
                    {
                        tracing::debug!(error = %e, "could not pass a downstream notification to a subscription stream");
                    }
                }
            }
            other => {
                let target = state.session().or_else(|| state.routes.sole_peer());
                match target {
                    Some(peer) => {
                        if let Err(e) = peer.send_notification(other).await {
                            tracing::debug!(error = %e, "could not pass a downstream notification to the client");
                        }
                    }
                    None => tracing::debug!(attachment = %state.attachment,
                        "downstream notification with nowhere to go: dropped"),
                }
            }
        }
        if queue.is_empty() {
            // Progress dropped behind the last one delivered is not coming.
            state.routes.caught_up();
        }
    }
}

/// A notification that answers no request, on a channel every HTTP attachment shares: a list
/// change to every client (each session, each subscription stream: the list is the same
/// for all); a resource update only to the subscription streams that asked for its URI (no
/// session subscribed: the gateway never forwards a session's `resources/subscribe` to a
/// shared run); anything else (logging, a custom notification) to no one — nothing on the
/// wire says which client's call it is about, and a guess could hand one client's data to
/// another.
async fn deliver_shared(state: &ChannelState, notification: ServerNotification) {
    let targets = match &notification {
        n if is_subscribable(n) && !matches!(n, ServerNotification::ResourceUpdatedNotification(_)) => state.sessions(),
        _ => Vec::new(),
    };
    if is_subscribable(&notification) {
        for sink in state.subscriptions.sinks() {
            match tokio::time::timeout(NOTIFY_PATIENCE, sink.send(notification.clone())).await {
                Ok(Err(e)) if crate::subscriptions::closed(&e) => {
                    tracing::debug!(error = %e, "could not pass a downstream notification to a subscription stream")
                }
                Err(_) => tracing::debug!("a subscription stream did not take a notification in time: skipped"),
                _ => {}
            }
        }
    } else {
        // Its method only: a log message's data is the server's and may carry anything.
        let method = serde_json::to_value(&notification).ok().and_then(|v| v["method"].as_str().map(str::to_owned));
        tracing::debug!(?method, "a notification of the shared downstream that names no client: dropped");
    }
    for peer in targets {
        send_bounded(&peer, notification.clone()).await;
    }
}

/// Hand `notification` to `peer` within [`NOTIFY_PATIENCE`]: on a channel several clients
/// share, one that stops reading its stream must not hold up the others' notifications.
async fn send_bounded(peer: &rmcp::service::Peer<rmcp::service::RoleServer>, notification: ServerNotification) {
    match tokio::time::timeout(NOTIFY_PATIENCE, peer.send_notification(notification)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::debug!(error = %e, "could not pass a downstream notification to a client"),
        Err(_) => tracing::debug!("a client did not take a notification in time: skipped"),
    }
}

/// A notification that answers no request and that a 2026-07-28 client hears only on its
/// `subscriptions/listen` streams.
fn is_subscribable(notification: &ServerNotification) -> bool {
    matches!(
        notification,
        ServerNotification::ToolListChangedNotification(_)
            | ServerNotification::PromptListChangedNotification(_)
            | ServerNotification::ResourceListChangedNotification(_)
            | ServerNotification::ResourceUpdatedNotification(_)
    )
}

/// Progress for a forwarded request: to its client, with the client's token; then its
/// number is delivered, so the answer it precedes may follow.
async fn deliver_progress(state: &ChannelState, mut progress: ProgressNotification) {
    let routes = &state.routes;
    let seq = progress.extensions.get::<ProgressSeq>().copied();
    // Waits while a request is being sent and its token mapped.
    let target = {
        let _mapping = routes.progress_order().lock().await;
        routes.progress_target(&progress.params.progress_token)
    };
    match target {
        Some((token, peer)) => {
            progress.params.progress_token = token;
            let progress = ServerNotification::ProgressNotification(progress);
            if state.shared {
                send_bounded(&peer, progress).await;
            } else if let Err(e) = peer.send_notification(progress).await {
                tracing::debug!(error = %e, "could not pass downstream progress to the client");
            }
        }
        None => tracing::debug!("downstream progress for a request the client asked no progress for"),
    }
    if let Some(seq) = seq {
        routes.delivered(seq);
    }
}
