//! State shared by the two directions of the proxy: the clients' peer handles (for what the
//! downstream sends up), the progress-token map, the downstream tool catalogue, and the
//! first client's capabilities (the downstream is initialised with them).
//!
//! Over stdio there is one client; over Streamable HTTP every session is one. The one
//! downstream connection serves them all: progress goes back to the session whose request
//! it belongs to, other notifications go to every open session, and a request of the
//! downstream (sampling, roots, elicitation) goes to the earliest open session.
//!
//! Short critical sections only: every lock here is a `std::sync::Mutex` held for a map
//! operation, never across an await.

use rmcp::model::{ClientCapabilities, ProgressToken, Tool};
use rmcp::service::{Peer, RoleServer};
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use tokio::sync::watch;

/// What both directions share.
#[derive(Debug)]
pub(crate) struct Hub {
    /// The attached clients' peers, oldest first; closed ones are pruned as they are met.
    clients: Mutex<Vec<Peer<RoleServer>>>,
    /// The downstream's progress token (rmcp picks it per request) → the client's, and
    /// the session that asked.
    progress: Mutex<HashMap<ProgressToken, (ProgressToken, Peer<RoleServer>)>>,
    catalogue: Mutex<Catalogue>,
    /// `Some` once the client attached: its capabilities, mirrored to the downstream.
    attached: watch::Sender<Option<ClientCapabilities>>,
}

/// The downstream's tools as last seen, by name, for classifying a call without listing
/// first. Belongs to one connection (`generation`); a new connection or a
/// `tools/list_changed` empties it.
#[derive(Debug, Default)]
pub(crate) struct Catalogue {
    pub(crate) generation: u64,
    pub(crate) tools: HashMap<String, Tool>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Maps of plain values: a panic elsewhere leaves them usable.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Hub {
    pub(crate) fn new() -> Self {
        Self {
            clients: Mutex::new(Vec::new()),
            progress: Mutex::new(HashMap::new()),
            catalogue: Mutex::new(Catalogue::default()),
            attached: watch::channel(None).0,
        }
    }

    /// Remember a client's peer, and the first client's capabilities (the downstream is
    /// initialised once, with those).
    pub(crate) fn attach(&self, peer: Peer<RoleServer>, capabilities: ClientCapabilities) {
        lock(&self.clients).push(peer);
        self.attached.send_if_modified(|current| {
            if current.is_some() {
                return false;
            }
            *current = Some(capabilities);
            true
        });
    }

    /// The open clients' peers, oldest first.
    pub(crate) fn clients(&self) -> Vec<Peer<RoleServer>> {
        let mut clients = lock(&self.clients);
        clients.retain(|peer| !peer.is_transport_closed());
        clients.clone()
    }

    /// The client a downstream request goes to: the oldest open one.
    pub(crate) fn client(&self) -> Option<Peer<RoleServer>> {
        self.clients().into_iter().next()
    }

    /// Waits for the client's capabilities.
    pub(crate) fn attached(&self) -> watch::Receiver<Option<ClientCapabilities>> {
        self.attached.subscribe()
    }

    pub(crate) fn map_progress(&self, downstream: ProgressToken, client: ProgressToken, peer: Peer<RoleServer>) {
        lock(&self.progress).insert(downstream, (client, peer));
    }

    pub(crate) fn unmap_progress(&self, downstream: &ProgressToken) {
        lock(&self.progress).remove(downstream);
    }

    /// The client's token for a downstream progress token, and the session to tell.
    pub(crate) fn client_progress(&self, downstream: &ProgressToken) -> Option<(ProgressToken, Peer<RoleServer>)> {
        lock(&self.progress).get(downstream).cloned()
    }

    /// Record tools seen on connection `generation`.
    pub(crate) fn remember_tools(&self, generation: u64, tools: &[Tool]) {
        let mut catalogue = lock(&self.catalogue);
        if catalogue.generation != generation {
            *catalogue = Catalogue { generation, tools: HashMap::new() };
        }
        for tool in tools {
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
