//! State shared by the two directions of the proxy: the client's peer handle (for what the
//! downstream sends up), the progress-token map, the downstream tool catalogue, and the
//! client's capabilities (the downstream is initialised with them).
//!
//! Short critical sections only: every lock here is a `std::sync::Mutex` held for a map
//! operation, never across an await.

use rmcp::model::{ClientCapabilities, ProgressToken, Tool};
use rmcp::service::{Peer, RoleServer};
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use tokio::sync::watch;

/// What both directions share.
#[derive(Debug)]
pub(crate) struct Hub {
    client: OnceLock<Peer<RoleServer>>,
    /// The downstream's progress token (rmcp picks it per request) → the client's.
    progress: Mutex<HashMap<ProgressToken, ProgressToken>>,
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
            client: OnceLock::new(),
            progress: Mutex::new(HashMap::new()),
            catalogue: Mutex::new(Catalogue::default()),
            attached: watch::channel(None).0,
        }
    }

    /// Remember the client's peer (the first time only) and its capabilities.
    pub(crate) fn attach(&self, peer: Peer<RoleServer>, capabilities: ClientCapabilities) {
        let _ = self.client.set(peer);
        self.attached.send_replace(Some(capabilities));
    }

    /// The client's peer, once attached.
    pub(crate) fn client(&self) -> Option<&Peer<RoleServer>> {
        self.client.get()
    }

    /// Waits for the client's capabilities.
    pub(crate) fn attached(&self) -> watch::Receiver<Option<ClientCapabilities>> {
        self.attached.subscribe()
    }

    pub(crate) fn map_progress(&self, downstream: ProgressToken, client: ProgressToken) {
        lock(&self.progress).insert(downstream, client);
    }

    pub(crate) fn unmap_progress(&self, downstream: &ProgressToken) {
        lock(&self.progress).remove(downstream);
    }

    pub(crate) fn client_progress_token(&self, downstream: &ProgressToken) -> Option<ProgressToken> {
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
