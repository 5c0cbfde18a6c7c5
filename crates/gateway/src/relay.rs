//! The downstream → client direction: what the downstream server sends its client (the
//! gateway) that belongs to the real client. One [`Relay`] is the rmcp client service of
//! one downstream connection.
//!
//! * Notifications (logging messages, resource updates, list changes, progress) are passed
//!   up unchanged, except that a progress token is translated back to the client's (rmcp
//!   gives every forwarded request a token of its own), and a `tools/list_changed` also
//!   empties the gateway's tool catalogue.
//! * Requests (`roots/list`, `sampling/createMessage`, `elicitation/create`, custom ones)
//!   are forwarded to the client, which the downstream was told about through the client's
//!   own capabilities; `ping` is answered here.

use crate::hub::Hub;
use rmcp::ErrorData;
use rmcp::model::{
    CancelledNotification, CancelledNotificationParam, ClientConfig, ClientResult, ServerNotification, ServerRequest,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RequestContext, RoleClient, Service, ServiceError};
use std::sync::Arc;

/// The gateway's client side towards one downstream connection.
pub(crate) struct Relay {
    pub(crate) hub: Arc<Hub>,
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

impl Service<RoleClient> for Relay {
    async fn handle_request(
        &self,
        request: ServerRequest,
        context: RequestContext<RoleClient>,
    ) -> Result<ClientResult, ErrorData> {
        if matches!(request, ServerRequest::PingRequest(_)) {
            return Ok(ClientResult::empty(()));
        }
        let Some(client) = self.hub.client() else {
            return Err(ErrorData::internal_error("no client is attached to the gateway yet", None));
        };
        let handle =
            client.send_cancellable_request(request, PeerRequestOptions::no_options()).await.map_err(client_error)?;
        let (id, peer) = (handle.id.clone(), handle.peer.clone());
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

    async fn handle_notification(
        &self,
        notification: ServerNotification,
        _context: NotificationContext<RoleClient>,
    ) -> Result<(), ErrorData> {
        let notification = match notification {
            // rmcp already resolved the cancelled request locally; the client never saw
            // the downstream's ids.
            ServerNotification::CancelledNotification(_) => return Ok(()),
            ServerNotification::ProgressNotification(mut progress) => {
                let Some((token, client)) = self.hub.client_progress(&progress.params.progress_token) else {
                    tracing::debug!("downstream progress for a request the client asked no progress for");
                    return Ok(());
                };
                progress.params.progress_token = token;
                // Progress belongs to the one session whose request it reports on.
                if let Err(e) = client.send_notification(ServerNotification::ProgressNotification(progress)).await {
                    tracing::debug!(error = %e, "could not pass downstream progress to the client");
                }
                return Ok(());
            }
            ServerNotification::ToolListChangedNotification(changed) => {
                self.hub.forget_tools();
                ServerNotification::ToolListChangedNotification(changed)
            }
            other => other,
        };
        let clients = self.hub.clients();
        if clients.is_empty() {
            tracing::debug!("downstream notification before a client attached: dropped");
        }
        // Logging, list changes and resource updates concern every session.
        for client in clients {
            if let Err(e) = client.send_notification(notification.clone()).await {
                tracing::debug!(error = %e, "could not pass a downstream notification to the client");
            }
        }
        Ok(())
    }

    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }
}
