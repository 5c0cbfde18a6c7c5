//! A channel: one client attachment's own connection to its own run of the downstream.
//!
//! Every attachment (the stdio client, each Streamable HTTP session, each stateless
//! principal) gets a channel of its own: its own supervised downstream child, its own MCP
//! connection to it, its own routing table and tool catalogue. So what the downstream sends
//! on a connection — progress, logging, a sampling or elicitation request — can only
//! belong to that one attachment, and a session's subscriptions, roots and logging level
//! are never another's. Over stdio there is one channel; over HTTP their number is bounded
//! by the number of attachments.
//!
//! With `[downstream] sharing = "gateway"` every HTTP attachment uses one channel instead
//! (for servers that keep no per-client state): one downstream child and connection,
//! restarted and quarantined as any other; the routes, tasks and session peers in its
//! state carry their attachment, so what comes back still reaches only its own client
//! ([`crate::routes::originator`], [`crate::relay`]). An attachment that ends is
//! [`released`](Channel::release) from it; the channel stops with the gateway.
//!
//! [`ChannelState`] (`channel_state`) is what the channel's two directions share; [`Channel`]
//! adds the downstream child.

use crate::channel_state::ChannelState;
use crate::control::{AttachmentId, DownstreamStatus};
use crate::downstream::{Downstream, DownstreamSpec, EraMemo, Link};
use crate::outbox::Inbox;
use crate::routes::ClientFacts;
use rmcp::model::ClientNotification;
use rmcp::service::{Peer, RoleClient, RoleServer};
use std::sync::Arc;
use tokio::time::Instant;

/// Why an attachment's channel cannot be opened.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ChannelError {
    /// The gateway is shutting down.
    #[error("the gateway is shutting down")]
    ShuttingDown,
    /// Its downstream could not be put under supervision.
    #[error(transparent)]
    Spawn(#[from] fleetgate_supervise::SpawnError),
}

/// One attachment's channel: its state and its downstream child (none when the gateway
/// fronts no downstream).
#[derive(Debug)]
pub(crate) struct Channel {
    pub(crate) state: Arc<ChannelState>,
    downstream: Option<Downstream>,
}

impl Channel {
    /// A channel for `attachment`, its downstream started (when there is one) and waiting
    /// for the client to attach before its MCP handshake.
    pub(crate) fn open(
        attachment: AttachmentId,
        spec: Option<&DownstreamSpec>,
        memo: &Arc<EraMemo>,
        shared: bool,
    ) -> Result<Self, fleetgate_supervise::SpawnError> {
        let (state, queues) = ChannelState::new(attachment, shared, spec.and_then(|spec| spec.observer.clone()));
        let state = Arc::new(state);
        // Each ends when the state (and with it the queue's sender) is gone.
        tokio::spawn(crate::relay::forward_to_client(Arc::downgrade(&state), queues.to_client));
        tokio::spawn(forward_to_downstream(queues.to_downstream));
        let downstream = match spec {
            Some(spec) => Some(Downstream::start(spec, state.clone(), memo.clone())?),
            None => None,
        };
        Ok(Self { state, downstream })
    }

    /// Client `attachment` attached: open the downstream connection for it (once; later
    /// calls keep the first client), and remember its session peer.
    pub(crate) fn attach(&self, attachment: AttachmentId, facts: ClientFacts, session: Option<Peer<RoleServer>>) {
        self.state.attach(attachment, facts, session);
    }

    /// Whether a downstream is configured.
    pub(crate) fn has_downstream(&self) -> bool {
        self.downstream.is_some()
    }

    /// The current connection, if the downstream is serving.
    pub(crate) fn link(&self) -> Link {
        self.downstream.as_ref().and_then(Downstream::link)
    }

    /// The gateway's view of this channel's child, now.
    pub(crate) fn status(&self) -> DownstreamStatus {
        self.downstream.as_ref().map_or_else(DownstreamStatus::absent, Downstream::status)
    }

    /// Wait (until `deadline`) for the downstream to be connected, or known not to come.
    pub(crate) async fn wait_ready(&self, deadline: Instant) -> Link {
        match &self.downstream {
            Some(downstream) => downstream.wait_ready(deadline).await,
            None => None,
        }
    }

    /// The connection, waiting (until `wait` has passed, the bound `initialize` waits) while
    /// a run is starting, or while the downstream has never connected yet — its first runs
    /// failing and being restarted: a client's first request (a sessionless client has no
    /// `initialize`) is served, not refused, as `initialize` is. A downstream that was
    /// connected and is restarting, or a quarantined one, is not waited for.
    pub(crate) async fn ready(&self, wait: std::time::Duration) -> Link {
        use crate::control::DownstreamState;
        if let Some(link) = self.link() {
            return Some(link);
        }
        let Some(downstream) = &self.downstream else { return None };
        match self.status().state {
            DownstreamState::Starting => self.wait_ready(Instant::now() + wait).await,
            DownstreamState::Restarting { .. } if !downstream.connected_once() => {
                self.wait_ready(Instant::now() + wait).await
            }
            _ => None,
        }
    }

    /// Stop the child for good (the attachment ended, or the gateway shuts down).
    pub(crate) async fn stop(&self) {
        self.state.subscriptions.close();
        // The client's tasks end with it: cancelled downstream (briefly; the child is stopped
        // next in any case).
        self.cancel_tasks(self.state.tasks.ids()).await;
        if let Some(downstream) = &self.downstream {
            downstream.stop().await;
        }
    }

    /// A shared channel's attachment ended: its session forgotten and its tasks cancelled
    /// downstream; the child serves the others on.
    pub(crate) async fn release(&self, attachment: AttachmentId) {
        let tasks = self.state.release(attachment);
        self.cancel_tasks(tasks).await;
    }

    async fn cancel_tasks(&self, ids: Vec<String>) {
        let Some(connection) = self.link() else { return };
        for id in ids {
            let cancel = rmcp::model::CancelTaskRequest::new(rmcp::model::CancelTaskParams::new(id));
            let sent = connection.peer.send_request(rmcp::model::ClientRequest::CancelTaskRequest(cancel));
            let _ = tokio::time::timeout(std::time::Duration::from_millis(500), sent).await;
        }
    }
}

/// Send the client's queued notifications to their downstream connections, one at a time.
async fn forward_to_downstream(mut queue: Inbox<(Peer<RoleClient>, ClientNotification)>) {
    while let Some((peer, notification)) = queue.recv().await {
        if let Err(e) = peer.send_notification(notification).await {
            tracing::debug!(error = %e, "could not pass a client notification to the downstream");
        }
    }
}
