//! The downstream → client direction of one channel: what the downstream server sends its
//! client (the gateway) that belongs to the real client. One [`Relay`] is the rmcp client
//! service of one downstream connection, and its channel serves one attachment, so nothing
//! it passes up can reach another attachment.
//!
//! * Requests (`sampling/createMessage`, `elicitation/create`, `roots/list`, custom ones)
//!   go to the client request that caused them ([`crate::routes::originator`]), on that
//!   request's own stream, or are refused back to the downstream with the reason; `ping`
//!   is answered here. At most [`MAX_PENDING_ASKS`] wait for the client at once per
//!   channel; the excess is refused back to the downstream at once, naming the limit.
//! * Progress goes to the request it reports on, its token translated back to the
//!   client's, in order (the progress lock of [`crate::routes::Routes`]).
//! * Other notifications (logging, list changes, resource updates) go to the attachment's
//!   session; a stateless attachment has none, so they ride the stream of its oldest
//!   request in flight, or are dropped. A `tools/list_changed` also empties the catalogue.

use crate::channel::ChannelState;
use crate::routes::{InputKind, MAX_PENDING_ASKS, ProgressSeq};
use rmcp::ErrorData;
use rmcp::model::{
    CancelledNotification, CancelledNotificationParam, ClientConfig, ClientResult, ErrorCode, GetExtensions,
    ServerNotification, ServerRequest,
};
use rmcp::service::{
    NotificationContext, OriginatingRequestId, PeerRequestOptions, RequestContext, RoleClient, Service, ServiceError,
};
use std::sync::Arc;

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
        let origin = match self.state.routes.route(kind) {
            Ok(origin) => origin,
            Err(refusal) => {
                tracing::info!(attachment = %self.state.attachment, ?kind, %refusal,
                    "downstream request refused");
                let code = match refusal {
                    crate::routes::Refusal::NoOriginatingRequest => ErrorCode::INVALID_PARAMS,
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

    /// Progress for a forwarded request: to its client, with the client's token, in the
    /// order the downstream sent it (`seq`, from the transport tap).
    async fn progress(&self, mut progress: rmcp::model::ProgressNotification, seq: Option<ProgressSeq>) {
        let routes = &self.state.routes;
        if let Some(seq) = seq {
            routes.wait_turn(seq).await;
        }
        // Waits while a request is being sent and its token mapped.
        let target = {
            let _mapping = routes.progress_order().lock().await;
            routes.progress_target(&progress.params.progress_token)
        };
        match target {
            Some((token, peer)) => {
                progress.params.progress_token = token;
                if let Err(e) = peer.send_notification(ServerNotification::ProgressNotification(progress)).await {
                    tracing::debug!(error = %e, "could not pass downstream progress to the client");
                }
            }
            None => tracing::debug!("downstream progress for a request the client asked no progress for"),
        }
        if let Some(seq) = seq {
            routes.delivered(seq);
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
        context: NotificationContext<RoleClient>,
    ) -> Result<(), ErrorData> {
        let notification = match notification {
            // rmcp already resolved the cancelled request locally; the client never saw
            // the downstream's ids.
            ServerNotification::CancelledNotification(_) => return Ok(()),
            ServerNotification::ProgressNotification(progress) => {
                self.progress(progress, context.extensions.get::<ProgressSeq>().copied()).await;
                return Ok(());
            }
            ServerNotification::ToolListChangedNotification(changed) => {
                self.state.forget_tools();
                ServerNotification::ToolListChangedNotification(changed)
            }
            other => other,
        };
        let target = self.state.session().or_else(|| self.state.routes.oldest_peer());
        let Some(peer) = target else {
            tracing::debug!(attachment = %self.state.attachment, "downstream notification with nowhere to go: dropped");
            return Ok(());
        };
        if let Err(e) = peer.send_notification(notification).await {
            tracing::debug!(error = %e, "could not pass a downstream notification to the client");
        }
        Ok(())
    }

    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }
}
