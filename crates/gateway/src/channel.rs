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
//! [`ChannelState`] is what the channel's two directions share (the relay reads it, the
//! gateway writes it); [`Channel`] adds the downstream child.

use crate::control::{AttachmentId, DownstreamStatus};
use crate::downstream::{Downstream, DownstreamSpec, EraMemo, Link};
use crate::observe::GatewayObserver;
use crate::outbox::{Direction, Inbox, Outbox, json_len};
use crate::routes::{ClientFacts, ProgressSeq, Routes};
use rmcp::model::{ClientNotification, GetMeta, ServerNotification, Tool};
use rmcp::service::{Peer, RoleClient, RoleServer};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio::sync::watch;
use tokio::time::Instant;

/// The downstream's tools as last seen on one connection (`generation`), by name, for
/// classifying a call without listing first. A new connection or a `tools/list_changed`
/// empties it.
#[derive(Debug, Default)]
struct Catalogue {
    generation: u64,
    tools: HashMap<String, Tool>,
}

/// Tools remembered per channel, at most: a downstream that lists more is still served,
/// the overflow is looked up by listing again.
const MAX_CATALOGUE: usize = 4096;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What both directions of one channel share.
#[derive(Debug)]
pub(crate) struct ChannelState {
    /// The attachment this channel serves.
    pub(crate) attachment: AttachmentId,
    /// Forwarded requests in flight and their progress tokens.
    pub(crate) routes: Routes,
    catalogue: Mutex<Catalogue>,
    /// The attachment's session peer, once it attached over a session (stdio, an HTTP
    /// session): where notifications that answer no request go. A stateless attachment
    /// has none.
    session: Mutex<Option<Peer<RoleServer>>>,
    /// The client the downstream connection is opened for; the connector waits for it.
    client: watch::Sender<Option<ClientFacts>>,
    /// Notifications from the downstream on their way to the client ([`crate::relay::forward_to_client`]).
    to_client: Outbox<ServerNotification>,
    /// Notifications from the client on their way to the downstream connection they name.
    to_downstream: Outbox<(Peer<RoleClient>, ClientNotification)>,
}

/// The receiving ends of a channel's notification queues, for their forwarding tasks.
struct Queues {
    to_client: Inbox<ServerNotification>,
    to_downstream: Inbox<(Peer<RoleClient>, ClientNotification)>,
}

impl ChannelState {
    fn new(attachment: AttachmentId, observer: Option<Arc<dyn GatewayObserver>>) -> (Self, Queues) {
        let (to_client, up) = Outbox::new(Direction::ToClient, attachment, observer.clone());
        let (to_downstream, down) = Outbox::new(Direction::ToDownstream, attachment, observer);
        let state = Self {
            attachment,
            routes: Routes::default(),
            catalogue: Mutex::new(Catalogue::default()),
            session: Mutex::new(None),
            client: watch::channel(None).0,
            to_client,
            to_downstream,
        };
        (state, Queues { to_client: up, to_downstream: down })
    }

    /// A notification the downstream sent, read off the wire in order: queued for the
    /// client without waiting. Progress is numbered here (the order
    /// [`crate::routes::Routes`] keeps it in, ahead of the answer it precedes); a
    /// `tools/list_changed` empties the catalogue even if it is dropped.
    pub(crate) fn notify_client(&self, mut notification: ServerNotification) {
        // What the downstream put in `_meta` stays with it, as rmcp's handler path did.
        *notification.get_meta_mut() = Default::default();
        let seq = match &mut notification {
            ServerNotification::ProgressNotification(progress) => {
                let seq = ProgressSeq(self.routes.progress_read());
                progress.extensions.insert(seq);
                Some(seq)
            }
            ServerNotification::ToolListChangedNotification(_) => {
                self.forget_tools();
                None
            }
            _ => None,
        };
        let size = json_len(&notification);
        if !self.to_client.push(notification, size)
            && let Some(seq) = seq
        {
            self.routes.progress_dropped(seq);
        }
    }

    /// A client notification for the downstream connection `peer`: queued without waiting.
    pub(crate) fn notify_downstream(&self, peer: Peer<RoleClient>, notification: ClientNotification) {
        let size = json_len(&notification);
        self.to_downstream.push((peer, notification), size);
    }

    /// Waits for the client the channel serves.
    pub(crate) fn client(&self) -> watch::Receiver<Option<ClientFacts>> {
        self.client.subscribe()
    }

    /// The session peer, while its transport is open.
    pub(crate) fn session(&self) -> Option<Peer<RoleServer>> {
        lock(&self.session).clone().filter(|peer| !peer.is_transport_closed())
    }

    /// Record tools seen on connection `generation`.
    pub(crate) fn remember_tools(&self, generation: u64, tools: &[Tool]) {
        let mut catalogue = lock(&self.catalogue);
        if catalogue.generation != generation {
            *catalogue = Catalogue { generation, tools: HashMap::new() };
        }
        for tool in tools {
            if catalogue.tools.len() >= MAX_CATALOGUE && !catalogue.tools.contains_key(tool.name.as_ref()) {
                break;
            }
            catalogue.tools.insert(tool.name.to_string(), tool.clone());
        }
    }

    /// The tool named `name` as seen on connection `generation`.
    pub(crate) fn known_tool(&self, generation: u64, name: &str) -> Option<Tool> {
        let catalogue = lock(&self.catalogue);
        if catalogue.generation != generation {
            return None;
        }
        catalogue.tools.get(name).cloned()
    }

    /// The downstream's tool list changed: forget it.
    pub(crate) fn forget_tools(&self) {
        lock(&self.catalogue).tools.clear();
    }
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
    ) -> Result<Self, String> {
        let (state, queues) = ChannelState::new(attachment, spec.and_then(|spec| spec.observer.clone()));
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

    /// The client attached: open the downstream connection for it (once; later calls keep
    /// the first client), and remember its session peer.
    pub(crate) fn attach(&self, facts: ClientFacts, session: Option<Peer<RoleServer>>) {
        if let Some(peer) = session {
            *lock(&self.state.session) = Some(peer);
        }
        self.state.client.send_if_modified(|current| {
            if current.is_some() {
                return false;
            }
            *current = Some(facts);
            true
        });
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
        if let Some(downstream) = &self.downstream {
            downstream.stop().await;
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
