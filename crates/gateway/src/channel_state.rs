//! What both directions of one channel share ([`ChannelState`]): the routes of its
//! requests in flight, the tools last listed, the clients' session peers or their
//! subscription streams, and the bounded notification queues. A channel serves one
//! attachment, or with `[downstream] sharing = "gateway"` every HTTP attachment of the
//! gateway (`shared`): then each session peer, task and in-flight request carries its
//! attachment, and nothing is delivered to an attachment it does not name. The relay reads it, the gateway writes it, the downstream's
//! connector waits on it; it knows none of them.

use crate::control::AttachmentId;
use crate::observe::GatewayObserver;
use crate::outbox::{Direction, Inbox, Outbox, json_len};
use crate::routes::{ClientFacts, ProgressSeq, Routes};
use crate::subscriptions::Subscriptions;
use rmcp::model::{ClientNotification, GetMeta, ServerNotification, Tool};
use rmcp::service::{Peer, RoleClient, RoleServer};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio::sync::watch;

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
    /// The attachment this channel serves (a shared channel: its own number, for the logs).
    pub(crate) attachment: AttachmentId,
    /// Every HTTP attachment of the gateway shares this channel's downstream connection.
    pub(crate) shared: bool,
    /// Forwarded requests in flight and their progress tokens.
    pub(crate) routes: Routes,
    catalogue: Mutex<Catalogue>,
    /// Each attachment's session peer, once it attached over a session (stdio, an HTTP
    /// session): where notifications that answer no request go. A stateless attachment
    /// has none.
    sessions: Mutex<Vec<(AttachmentId, Peer<RoleServer>)>>,
    /// The attachments the channel serves now (one, unless it is shared).
    attached: Mutex<Vec<AttachmentId>>,
    /// The client the downstream connection is opened for; the connector waits for it.
    client: watch::Sender<Option<ClientFacts>>,
    /// Notifications from the downstream on their way to the client (the relay's `forward_to_client`).
    to_client: Outbox<ServerNotification>,
    /// Notifications from the client on their way to the downstream connection they name.
    to_downstream: Outbox<(Peer<RoleClient>, ClientNotification)>,
    /// The 2026-07-28 client's `subscriptions/listen` streams.
    pub(crate) subscriptions: Subscriptions,
    /// The SEP-2663 tasks the downstream made for this channel's client.
    pub(crate) tasks: OwnedTasks,
}

/// Tasks one channel's downstream made for its clients, by id, with the attachment that owns
/// each and the call that made it (what a `tasks/update` is judged against again). Bounded:
/// the oldest is forgotten first.
#[derive(Debug, Default)]
pub(crate) struct OwnedTasks {
    by_id: Mutex<std::collections::VecDeque<(String, AttachmentId, OwnedTask)>>,
}

/// The `tools/call` a task was made for, as it was forwarded.
#[derive(Clone, Debug)]
pub(crate) struct OwnedTask {
    pub(crate) tool: Tool,
    pub(crate) arguments: Option<rmcp::model::JsonObject>,
}

/// Tasks remembered per attachment, at most.
pub(crate) const MAX_OWNED_TASKS: usize = 1024;

impl OwnedTasks {
    /// The downstream made task `id` for `owner`'s `call`: false when another attachment
    /// owns that id already (it stays that one's). Each owner keeps its newest
    /// [`MAX_OWNED_TASKS`]: one client's tasks never push out another's.
    pub(crate) fn made(&self, owner: AttachmentId, id: String, call: OwnedTask) -> bool {
        let mut tasks = lock(&self.by_id);
        if tasks.iter().any(|(known, by, _)| *known == id && *by != owner) {
            return false;
        }
        tasks.retain(|(known, _, _)| *known != id);
        if tasks.iter().filter(|(_, by, _)| *by == owner).count() >= MAX_OWNED_TASKS
            && let Some(oldest) = tasks.iter().position(|(_, by, _)| *by == owner)
        {
            tasks.remove(oldest);
        }
        tasks.push_back((id, owner, call));
        true
    }

    /// The call task `id` was made for, when `owner` owns it.
    pub(crate) fn get(&self, owner: AttachmentId, id: &str) -> Option<OwnedTask> {
        lock(&self.by_id).iter().find(|(known, by, _)| known == id && *by == owner).map(|(_, _, call)| call.clone())
    }

    /// Every task id, for cancelling them when the channel ends.
    pub(crate) fn ids(&self) -> Vec<String> {
        lock(&self.by_id).iter().map(|(id, _, _)| id.clone()).collect()
    }

    /// `owner`'s task ids, forgotten: its attachment ended.
    pub(crate) fn take(&self, owner: AttachmentId) -> Vec<String> {
        let mut tasks = lock(&self.by_id);
        let ids = tasks.iter().filter(|(_, by, _)| *by == owner).map(|(id, _, _)| id.clone()).collect();
        tasks.retain(|(_, by, _)| *by != owner);
        ids
    }
}

/// The receiving ends of a channel's notification queues, for their forwarding tasks.
pub(crate) struct Queues {
    pub(crate) to_client: Inbox<ServerNotification>,
    pub(crate) to_downstream: Inbox<(Peer<RoleClient>, ClientNotification)>,
}

impl ChannelState {
    pub(crate) fn new(
        attachment: AttachmentId,
        shared: bool,
        observer: Option<Arc<dyn GatewayObserver>>,
    ) -> (Self, Queues) {
        let (to_client, up) = Outbox::new(Direction::ToClient, attachment, observer.clone());
        let (to_downstream, down) = Outbox::new(Direction::ToDownstream, attachment, observer);
        let state = Self {
            attachment,
            shared,
            routes: Routes::default(),
            catalogue: Mutex::new(Catalogue::default()),
            sessions: Mutex::new(Vec::new()),
            attached: Mutex::new(Vec::new()),
            client: watch::channel(None).0,
            to_client,
            to_downstream,
            subscriptions: Subscriptions::default(),
            tasks: OwnedTasks::default(),
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

    /// Client `attachment` attached: its facts for the connector (once; later calls keep the
    /// first client), and its session peer.
    pub(crate) fn attach(&self, attachment: AttachmentId, facts: ClientFacts, session: Option<Peer<RoleServer>>) {
        {
            let mut attached = lock(&self.attached);
            if !attached.contains(&attachment) {
                attached.push(attachment);
            }
        }
        if let Some(peer) = session {
            let mut sessions = lock(&self.sessions);
            sessions.retain(|(known, _)| *known != attachment);
            sessions.push((attachment, peer));
        }
        self.client.send_if_modified(|current| {
            if current.is_some() {
                return false;
            }
            *current = Some(facts);
            true
        });
    }

    /// Waits for the client the channel serves.
    pub(crate) fn client(&self) -> watch::Receiver<Option<ClientFacts>> {
        self.client.subscribe()
    }

    /// The (first) session peer, while its transport is open.
    pub(crate) fn session(&self) -> Option<Peer<RoleServer>> {
        lock(&self.sessions).iter().map(|(_, peer)| peer).find(|peer| !peer.is_transport_closed()).cloned()
    }

    /// How many attachments the channel serves now.
    pub(crate) fn attached(&self) -> usize {
        lock(&self.attached).len()
    }

    /// Every attachment's session peer whose transport is open.
    pub(crate) fn sessions(&self) -> Vec<Peer<RoleServer>> {
        lock(&self.sessions).iter().map(|(_, peer)| peer).filter(|peer| !peer.is_transport_closed()).cloned().collect()
    }

    /// Attachment `attachment` ended: its session forgotten, its tasks' ids handed back.
    pub(crate) fn release(&self, attachment: AttachmentId) -> Vec<String> {
        lock(&self.attached).retain(|known| *known != attachment);
        lock(&self.sessions).retain(|(known, _)| *known != attachment);
        self.tasks.take(attachment)
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

    /// Whether connection `generation`'s tools have been listed (some are known).
    pub(crate) fn listed(&self, generation: u64) -> bool {
        let catalogue = lock(&self.catalogue);
        catalogue.generation == generation && !catalogue.tools.is_empty()
    }

    /// The downstream's tool list changed: forget it.
    pub(crate) fn forget_tools(&self) {
        lock(&self.catalogue).tools.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::{OwnedTask, OwnedTasks};
    use crate::control::AttachmentId;

    fn call() -> OwnedTask {
        OwnedTask { tool: rmcp::model::Tool::new("t", "t", rmcp::model::JsonObject::new()), arguments: None }
    }

    /// A task id is its first owner's: the same id answered to another client is not handed
    /// over, and each owner keeps its own tasks whatever another makes.
    #[test]
    fn a_task_id_stays_its_owner_s_and_owners_do_not_push_each_other_out() {
        let (alice, bob) = (AttachmentId(1), AttachmentId(2));
        let tasks = OwnedTasks::default();
        assert!(tasks.made(alice, "t-1".into(), call()));
        assert!(!tasks.made(bob, "t-1".into(), call()), "another client's id is not taken over");
        assert!(tasks.get(alice, "t-1").is_some() && tasks.get(bob, "t-1").is_none());
        for i in 0..super::MAX_OWNED_TASKS + 10 {
            assert!(tasks.made(bob, format!("b-{i}"), call()));
        }
        assert!(tasks.get(alice, "t-1").is_some(), "Bob's tasks did not push Alice's out");
        assert!(tasks.get(bob, "b-0").is_none(), "Bob's oldest went to make room for his newest");
        assert_eq!(tasks.take(alice), ["t-1"]);
    }
}
