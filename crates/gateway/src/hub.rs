//! What every attachment of one gateway process shares: the control plane, the settings,
//! the control tools, how the downstream is run, and the table of live attachments, each
//! with its own [`Channel`].
//!
//! Attachments are made here and only here:
//! * the stdio client: attachment 1, its channel opened at start-up so the downstream is
//!   warm when the client's `initialize` arrives;
//! * an HTTP session: at its `initialize`;
//! * a stateless (2026-07-28) HTTP client: at its first request, one attachment per
//!   principal and client (`clientInfo` name and version), reused by every later request
//!   and retired after `stateless_ttl` without one.
//!
//! Their number is bounded ([`Limits`]); the HTTP layer asks [`Hub::admit`] first so a
//! refusal is a clear HTTP status, and [`Hub::reserve`] enforces the bound again at
//! creation, where a race would otherwise slip one past it.

use crate::channel::{Channel, ChannelError};
use crate::control::{AttachmentId, ClientAttach, ControlPlane, OverBound};
use crate::downstream::{DownstreamSpec, EraMemo};
use crate::options::ServiceSettings;
use crate::routes::ClientFacts;
use rmcp::model::{ServerCapabilities, Tool};
use rmcp::service::{Peer, RoleServer};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::time::Instant;

/// Bounds on attachments (HTTP; the stdio transport has exactly one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Live attachments at most: sessions and stateless clients together. Each has a
    /// downstream process of its own.
    pub max_attachments: usize,
    /// Live attachments one principal may hold at most.
    pub max_per_principal: usize,
    /// A stateless attachment with no request for this long is retired (its worker
    /// deregistered, its downstream stopped): the worker TTL.
    pub stateless_ttl: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self { max_attachments: 64, max_per_principal: 16, stateless_ttl: Duration::from_secs(900) }
    }
}

/// Why a new attachment was not admitted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum NotAdmitted {
    /// The gateway holds [`Limits::max_attachments`] already (HTTP 503).
    Full(usize),
    /// This principal holds [`Limits::max_per_principal`] already (HTTP 429).
    PrincipalFull(usize),
    /// Its downstream could not be started (HTTP 503).
    Failed(ChannelError),
    /// Made, then found over the principal's bound across the member's replicas.
    OverBound(OverBound),
}

impl std::fmt::Display for NotAdmitted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Full(n) => write!(
                f,
                "the gateway serves its maximum of {n} client attachments; retry when a session ends (or raise \
                 [http] max_attachments)"
            ),
            Self::PrincipalFull(n) => {
                write!(f, "this principal holds its maximum of {n} attachments; end one of its sessions first")
            }
            Self::Failed(why) => write!(f, "the downstream server could not be started for this client: {why}"),
            Self::OverBound(why) => why.fmt(f),
        }
    }
}

/// Who a stateless attachment is: the principal and the client it says it is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct StatelessKey {
    pub(crate) principal: String,
    pub(crate) client_name: String,
    pub(crate) client_version: String,
}

/// One live attachment.
#[derive(Debug)]
pub(crate) struct Attachment {
    pub(crate) id: AttachmentId,
    pub(crate) channel: Arc<Channel>,
    pub(crate) facts: ClientFacts,
    /// The principal it counts against (`""`: none).
    principal: String,
    /// A stateless client's own description (its tasks are recorded under it for the other
    /// replicas); `None` for a session or stdio.
    pub(crate) stateless: Option<ClientAttach>,
    last_used: Mutex<Instant>,
}

impl Attachment {
    fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(PoisonError::into_inner) = Instant::now();
    }

    fn idle_since(&self) -> Instant {
        *self.last_used.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[derive(Debug, Default)]
struct Table {
    next: u64,
    live: HashMap<AttachmentId, Arc<Attachment>>,
    /// Attachments being made (counted against the bounds), by principal.
    pending: HashMap<String, usize>,
    stateless: HashMap<StatelessKey, AttachmentId>,
}

impl Table {
    fn count(&self, principal: &str) -> (usize, usize) {
        let pending: usize = self.pending.values().sum();
        let mine = self.live.values().filter(|a| a.principal == principal).count()
            + self.pending.get(principal).copied().unwrap_or(0);
        (self.live.len() + pending, mine)
    }
}

/// What every attachment shares.
pub(crate) struct Hub {
    pub(crate) control: Arc<dyn ControlPlane>,
    pub(crate) settings: ServiceSettings,
    pub(crate) control_tools: Vec<Tool>,
    pub(crate) control_names: HashSet<String>,
    spec: Option<DownstreamSpec>,
    memo: Arc<EraMemo>,
    limits: Limits,
    table: Mutex<Table>,
    /// `[downstream] sharing = "gateway"`: the one channel every HTTP attachment uses,
    /// opened with the first.
    shared: Mutex<Option<Arc<Channel>>>,
    /// Set by [`Hub::stop_all`]: no channel is opened after it (one opened then would be
    /// stopped by no one).
    closing: std::sync::atomic::AtomicBool,
    /// Serialises the making of stateless attachments, so concurrent first requests of
    /// one client make one.
    stateless_making: tokio::sync::Mutex<()>,
    /// The calls the control plane serialises, by key ([`ControlPlane::serial_key`]).
    pub(crate) serial: SerialLocks,
    /// The address other replicas reach this one at, when it has one (HTTP): a stateless
    /// client's tasks are recorded with it.
    pub(crate) advertise: std::sync::OnceLock<String>,
}

/// One async lock per key, made on first use and dropped when no call holds or awaits it.
#[derive(Debug, Default)]
pub(crate) struct SerialLocks(Mutex<std::collections::HashMap<String, Arc<tokio::sync::Mutex<()>>>>);

impl SerialLocks {
    /// Wait for `key`'s turn; the guard ends it.
    pub(crate) async fn lock(&self, key: &str) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = {
            let mut locks = self.0.lock().unwrap_or_else(|e| e.into_inner());
            // Keys no call holds or awaits any more: gone (a bounded map).
            locks.retain(|k, l| k == key || Arc::strong_count(l) > 1);
            Arc::clone(locks.entry(key.to_owned()).or_default())
        };
        lock.lock_owned().await
    }
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub").field("attachments", &self.lock().live.len()).finish_non_exhaustive()
    }
}

/// A slot for one attachment being made; given back on drop unless the attachment went live.
pub(crate) struct Reservation<'a> {
    hub: &'a Hub,
    principal: String,
    id: AttachmentId,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        let mut table = self.hub.lock();
        if let Some(n) = table.pending.get_mut(&self.principal) {
            *n -= 1;
            if *n == 0 {
                table.pending.remove(&self.principal);
            }
        }
    }
}

impl Hub {
    pub(crate) fn new(
        control: Arc<dyn ControlPlane>,
        settings: ServiceSettings,
        control_tools: Vec<Tool>,
        spec: Option<DownstreamSpec>,
        limits: Limits,
    ) -> Self {
        let control_names = control_tools.iter().map(|t| t.name.to_string()).collect();
        Self {
            control,
            settings,
            control_tools,
            control_names,
            spec,
            memo: Arc::new(EraMemo::default()),
            limits,
            table: Mutex::new(Table::default()),
            shared: Mutex::new(None),
            closing: std::sync::atomic::AtomicBool::new(false),
            stateless_making: tokio::sync::Mutex::new(()),
            serial: SerialLocks::default(),
            advertise: std::sync::OnceLock::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Tell the observer how many HTTP attachments are open (over stdio: nothing).
    fn sessions_open(&self, open: usize) {
        if self.settings.http
            && let Some(observer) = &self.settings.observer
        {
            observer.http_sessions_open(open);
        }
    }

    /// The bound on live attachments.
    /// The bound on one principal's attachments.
    pub(crate) fn max_per_principal(&self) -> usize {
        self.limits.max_per_principal
    }

    pub(crate) fn max_attachments(&self) -> usize {
        self.limits.max_attachments
    }

    /// Whether a downstream is configured.
    pub(crate) fn has_downstream(&self) -> bool {
        self.spec.is_some()
    }

    /// Whether a new attachment of `principal` would be admitted now.
    pub(crate) fn admit(&self, principal: &str) -> Result<(), NotAdmitted> {
        let (all, mine) = self.lock().count(principal);
        if all >= self.limits.max_attachments {
            return Err(NotAdmitted::Full(self.limits.max_attachments));
        }
        if mine >= self.limits.max_per_principal {
            return Err(NotAdmitted::PrincipalFull(self.limits.max_per_principal));
        }
        Ok(())
    }

    /// Take a slot and an id for a new attachment of `principal`, within the bounds.
    pub(crate) fn reserve(&self, principal: &str) -> Result<Reservation<'_>, NotAdmitted> {
        self.admit(principal)?;
        let mut table = self.lock();
        table.next += 1;
        let id = AttachmentId(table.next);
        *table.pending.entry(principal.to_owned()).or_default() += 1;
        Ok(Reservation { hub: self, principal: principal.to_owned(), id })
    }

    /// The stdio transport's one attachment, its channel opened now so the downstream
    /// starts while the client is still connecting. Not bounded.
    pub(crate) fn open_stdio_channel(&self) -> Result<Channel, fleetgate_supervise::SpawnError> {
        let id = {
            let mut table = self.lock();
            table.next += 1;
            AttachmentId(table.next)
        };
        Channel::open(id, self.spec.as_ref(), &self.memo, false)
    }

    /// Whether HTTP attachments share one downstream (`[downstream] sharing = "gateway"`).
    fn sharing(&self) -> bool {
        self.settings.http && self.spec.as_ref().is_some_and(|spec| spec.shared)
    }

    /// The channel of a reserved attachment: its own, or the gateway's shared one (opened
    /// with the first attachment, numbered apart from every attachment).
    pub(crate) fn open_channel(&self, reservation: &Reservation<'_>) -> Result<Arc<Channel>, ChannelError> {
        if self.closing.load(std::sync::atomic::Ordering::Acquire) {
            return Err(ChannelError::ShuttingDown);
        }
        if !self.sharing() {
            return Ok(Arc::new(Channel::open(reservation.id, self.spec.as_ref(), &self.memo, false)?));
        }
        let mut shared = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        // Checked again under the lock `stop_all` takes the shared channel under.
        if self.closing.load(std::sync::atomic::Ordering::Acquire) {
            return Err(ChannelError::ShuttingDown);
        }
        if let Some(channel) = &*shared {
            return Ok(channel.clone());
        }
        let id = {
            let mut table = self.lock();
            table.next += 1;
            AttachmentId(table.next)
        };
        let channel = Arc::new(Channel::open(id, self.spec.as_ref(), &self.memo, true)?);
        *shared = Some(channel.clone());
        Ok(channel)
    }

    /// Make an attachment live: its channel connects for `facts`, and the control plane
    /// registers its worker (on the blocking pool). A failing registration is logged; the
    /// attachment still lives, and the gate refuses its mutations. A reserved (HTTP) one whose
    /// principal, counted again now that its worker is registered, is over its bound across the
    /// member's replicas (`ControlPlane::confirm_principal`) is ended: `Err(why)`.
    pub(crate) async fn go_live(
        &self,
        reservation: Option<Reservation<'_>>,
        channel: Arc<Channel>,
        client: ClientAttach,
        facts: ClientFacts,
        session: Option<Peer<RoleServer>>,
    ) -> Result<Arc<Attachment>, OverBound> {
        // A reserved (HTTP) attachment's own number; the stdio one is its channel's.
        let id = reservation.as_ref().map_or(channel.state.attachment, |r| r.id);
        let bounded = reservation.is_some();
        tracing::info!(attachment = %id, client = %client.client_name, version = %client.client_version,
            protocol = %client.protocol_version, principal = client.principal.as_deref().unwrap_or("-"),
            "client attached");
        channel.attach(id, facts.clone(), session);
        let principal = client.principal.clone().unwrap_or_default();
        let stateless = client.stateless.then(|| client.clone());
        let attachment =
            Arc::new(Attachment { id, channel, facts, principal, stateless, last_used: Mutex::new(Instant::now()) });
        let control = self.control.clone();
        let registered = tokio::task::spawn_blocking(move || control.on_client_attach(id, &client)).await;
        match registered {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::error!(attachment = %id, error = %e, "the control plane could not register the worker")
            }
            Err(e) => tracing::error!(attachment = %id, error = %e, "on_client_attach panicked"),
        }
        let open = {
            let mut table = self.lock();
            table.live.insert(id, attachment.clone());
            table.live.len()
        };
        self.sessions_open(open);
        drop(reservation);
        if bounded && !attachment.principal.is_empty() {
            let (control, who, limit) =
                (self.control.clone(), attachment.principal.clone(), self.limits.max_per_principal);
            let confirmed = tokio::task::spawn_blocking(move || control.confirm_principal(id, &who, limit)).await;
            if let Ok(Err(why)) = confirmed {
                let principal = &attachment.principal;
                tracing::info!(attachment = %id, %principal, %why, "attachment over the principal's bound: ended");
                self.detach(id, "principal_bound").await;
                return Err(why);
            }
        }
        Ok(attachment)
    }

    /// The stateless attachment of `key`, made on first use (`make` builds the client
    /// record and the facts the first time). Every use refreshes its idle clock.
    pub(crate) async fn stateless(
        &self,
        key: StatelessKey,
        client: ClientAttach,
        facts: ClientFacts,
    ) -> Result<Arc<Attachment>, NotAdmitted> {
        if let Some(found) = self.find_stateless(&key) {
            return Ok(found);
        }
        let _making = self.stateless_making.lock().await;
        if let Some(found) = self.find_stateless(&key) {
            return Ok(found);
        }
        let reservation = self.reserve(&key.principal)?;
        let channel = self.open_channel(&reservation).map_err(NotAdmitted::Failed)?;
        let attachment =
            self.go_live(Some(reservation), channel, client, facts, None).await.map_err(NotAdmitted::OverBound)?;
        self.lock().stateless.insert(key, attachment.id);
        Ok(attachment)
    }

    /// Whether the stateless client `key` has a live attachment.
    pub(crate) fn knows(&self, key: &StatelessKey) -> bool {
        self.lock().stateless.contains_key(key)
    }

    /// Whether the stateless client `key` has task `task` here.
    pub(crate) fn has_task(&self, key: &StatelessKey, task: &str) -> bool {
        let table = self.lock();
        let found = table.stateless.get(key).and_then(|id| table.live.get(id).map(|a| (*id, a.channel.clone())));
        drop(table);
        found.is_some_and(|(id, channel)| channel.state.tasks.get(id, task).is_some())
    }

    fn find_stateless(&self, key: &StatelessKey) -> Option<Arc<Attachment>> {
        let table = self.lock();
        let found = table.stateless.get(key).and_then(|id| table.live.get(id)).cloned();
        drop(table);
        found.inspect(|a| a.touch())
    }

    /// End one attachment: its downstream stopped, its worker retired. Idempotent.
    pub(crate) async fn detach(&self, id: AttachmentId, reason: &'static str) {
        let (removed, open) = {
            let mut table = self.lock();
            table.stateless.retain(|_, live| *live != id);
            let removed = table.live.remove(&id);
            (removed, table.live.len())
        };
        let Some(attachment) = removed else { return };
        self.sessions_open(open);
        let control = self.control.clone();
        let retired = tokio::task::spawn_blocking(move || control.on_detach(id, reason));
        let ended = async {
            if attachment.channel.state.shared {
                attachment.channel.release(id).await;
            } else {
                attachment.channel.stop().await;
            }
        };
        let (retired, ()) = tokio::join!(retired, ended);
        if let Err(e) = retired {
            tracing::error!(attachment = %id, error = %e, "on_detach panicked");
        }
    }

    /// Retire the stateless attachments idle for longer than the TTL.
    pub(crate) async fn expire_idle(&self) {
        let ttl = self.limits.stateless_ttl;
        let expired: Vec<AttachmentId> = {
            let table = self.lock();
            table
                .stateless
                .values()
                .filter_map(|id| table.live.get(id))
                // A client listening on a subscription stream is not idle.
                .filter(|a| a.idle_since().elapsed() > ttl && !a.channel.state.subscriptions.is_listening_for(a.id))
                .map(|a| a.id)
                .collect()
        };
        for id in expired {
            tracing::info!(attachment = %id, "stateless client idle past the worker TTL: retired");
            self.detach(id, "stateless_idle").await;
        }
    }

    /// How often [`expire_idle`](Self::expire_idle) should run.
    pub(crate) fn sweep_every(&self) -> Duration {
        (self.limits.stateless_ttl / 4).clamp(Duration::from_millis(50), Duration::from_secs(30))
    }

    /// Stop every channel's downstream (shutdown; the control plane's `on_shutdown`
    /// retires the workers).
    pub(crate) async fn stop_all(&self) {
        let shared = {
            let mut shared = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
            self.closing.store(true, std::sync::atomic::Ordering::Release);
            shared.take()
        };
        let all: Vec<Arc<Attachment>> = {
            let mut table = self.lock();
            table.stateless.clear();
            table.live.drain().map(|(_, a)| a).collect()
        };
        self.sessions_open(0);
        let mut stopping = tokio::task::JoinSet::new();
        for attachment in all.into_iter().filter(|a| !a.channel.state.shared) {
            stopping.spawn(async move { attachment.channel.stop().await });
        }
        if let Some(shared) = shared {
            stopping.spawn(async move { shared.stop().await });
        }
        while stopping.join_next().await.is_some() {}
    }

    /// What the downstream last answered with, if any connection was made.
    pub(crate) fn known_capabilities(&self) -> Option<ServerCapabilities> {
        self.memo.capabilities()
    }
}

#[cfg(test)]
mod tests {
    use super::{Hub, Limits, NotAdmitted, StatelessKey};
    use crate::control::{
        AttachmentId, ClientAttach, ControlCall, ControlPlane, GateDecision, Listing, OverBound, ToolCall, ToolClass,
        Verdict,
    };
    use crate::options::ServiceSettings;
    use crate::routes::ClientFacts;
    use rmcp::model::{CallToolResult, Implementation, Tool};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    /// What `mallory`'s attachments are told once registered.
    const OVER: OverBound = OverBound::After { limit: 1, replicas: 2, live: 2 };

    /// Records what the hub tells it.
    #[derive(Default)]
    struct Recorder(Mutex<Vec<String>>);

    impl ControlPlane for Recorder {
        fn on_transport_bound(&self) -> Result<(), crate::control::ControlError> {
            Ok(())
        }
        fn on_client_attach(
            &self,
            attachment: AttachmentId,
            client: &ClientAttach,
        ) -> Result<(), crate::control::ControlError> {
            self.0.lock().unwrap().push(format!("attach {} {}", attachment.0, client.client_name));
            Ok(())
        }
        fn on_detach(&self, attachment: AttachmentId, reason: &str) {
            self.0.lock().unwrap().push(format!("detach {} {reason}", attachment.0));
        }
        fn control_tools(&self) -> Vec<Tool> {
            Vec::new()
        }
        fn call_control_tool(&self, _: ControlCall<'_>) -> CallToolResult {
            CallToolResult::success(Vec::new())
        }
        fn list_tool(&self, _: &Tool) -> Listing {
            Listing { visible: true, class: ToolClass::Mutating, meta: Default::default() }
        }
        fn decide(&self, _: AttachmentId, _: &ToolCall<'_>) -> Verdict {
            Verdict {
                class: ToolClass::Mutating,
                decision: GateDecision::allow(),
                settles: None,
                forward: None,
                held: None,
                perform: None,
            }
        }
        fn on_forwarded(&self, _: AttachmentId, _: &ToolCall<'_>, _: &CallToolResult) {}
        fn on_shutdown(&self, _: &str) {}
        /// `mallory`'s attachments are over her bound across replicas once registered.
        fn confirm_principal(&self, attachment: AttachmentId, principal: &str, _: usize) -> Result<(), OverBound> {
            self.0.lock().unwrap().push(format!("confirm {} {principal}", attachment.0));
            if principal == "mallory" { Err(OVER) } else { Ok(()) }
        }
    }

    fn hub(limits: Limits) -> (Arc<Recorder>, Hub) {
        let recorder = Arc::new(Recorder::default());
        let settings = ServiceSettings {
            call_timeout: Duration::from_secs(1),
            attach_wait: Duration::from_secs(1),
            server_info: Implementation::new("t", "1"),
            instructions: None,
            observer: None,
            trace: None,
            http: true,
        };
        (recorder.clone(), Hub::new(recorder, settings, Vec::new(), None, limits))
    }

    fn key(principal: &str, name: &str) -> StatelessKey {
        StatelessKey { principal: principal.into(), client_name: name.into(), client_version: "1".into() }
    }

    fn client(name: &str, principal: &str) -> ClientAttach {
        ClientAttach {
            client_name: name.into(),
            client_version: "1".into(),
            protocol_version: "2026-07-28".into(),
            principal: Some(principal.into()),
            stateless: true,
        }
    }

    fn facts() -> ClientFacts {
        ClientFacts { capabilities: Default::default(), stateless_era: true }
    }

    #[tokio::test(start_paused = true)]
    async fn a_stateless_client_keeps_one_attachment_until_idle_past_the_ttl() {
        let limits = Limits { stateless_ttl: Duration::from_secs(60), ..Limits::default() };
        let (recorded, hub) = hub(limits);
        let first = hub.stateless(key("alice", "cursor"), client("cursor", "alice"), facts()).await.unwrap();
        let again = hub.stateless(key("alice", "cursor"), client("cursor", "alice"), facts()).await.unwrap();
        assert_eq!(first.id, again.id, "one attachment per principal and client");
        let other = hub.stateless(key("bob", "cursor"), client("cursor", "bob"), facts()).await.unwrap();
        assert_ne!(first.id, other.id);

        tokio::time::advance(Duration::from_secs(45)).await;
        hub.stateless(key("alice", "cursor"), client("cursor", "alice"), facts()).await.unwrap();
        tokio::time::advance(Duration::from_secs(30)).await;
        hub.expire_idle().await;
        assert!(hub.knows(&key("alice", "cursor")), "used 30 s ago: kept");
        assert!(!hub.knows(&key("bob", "cursor")), "idle 75 s: retired");
        let log = recorded.0.lock().unwrap().clone();
        assert!(log.contains(&format!("detach {} stateless_idle", other.id.0)), "{log:?}");
        assert!(!log.iter().any(|l| l == &format!("detach {} stateless_idle", first.id.0)), "{log:?}");
    }

    /// An attachment counted again once registered and found over its principal's bound is
    /// ended at once — retired, out of the table, its slot free — and never served.
    #[tokio::test]
    async fn an_attachment_over_the_bound_once_registered_is_ended() {
        let (recorded, hub) = hub(Limits::default());
        let refused = hub.stateless(key("mallory", "cursor"), client("cursor", "mallory"), facts()).await;
        assert_eq!(refused.err(), Some(NotAdmitted::OverBound(OVER)));
        assert!(!hub.knows(&key("mallory", "cursor")), "not served");
        assert_eq!(hub.lock().count("mallory"), (0, 0), "no attachment and no slot left behind");
        let log = recorded.0.lock().unwrap().clone();
        let attached = log.iter().position(|l| l.starts_with("attach ") && l.ends_with(" cursor"));
        let confirmed = log.iter().position(|l| l.starts_with("confirm ") && l.ends_with(" mallory"));
        let ended = log.iter().position(|l| l.starts_with("detach ") && l.ends_with(" principal_bound"));
        assert!(attached < confirmed && confirmed < ended && attached.is_some(), "registered, counted, ended: {log:?}");
        // Another principal within its bound is served.
        assert!(hub.stateless(key("alice", "cursor"), client("cursor", "alice"), facts()).await.is_ok());
        assert!(hub.knows(&key("alice", "cursor")));
    }

    /// One key's calls take turns; another key's run alongside; a key nobody holds or awaits
    /// leaves the map.
    #[tokio::test]
    async fn serial_locks_take_turns_by_key_and_forget_idle_keys() {
        let locks = Arc::new(super::SerialLocks::default());
        let first = locks.lock("fleet/forge").await;
        let waiter = {
            let locks = locks.clone();
            tokio::spawn(async move { drop(locks.lock("fleet/forge").await) })
        };
        // The other repository is not held up by the first's turn.
        let other = tokio::time::timeout(Duration::from_secs(5), locks.lock("fleet/other")).await;
        assert!(other.is_ok(), "another key waited for the first's turn");
        drop(other);
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(!waiter.is_finished(), "the same key ran while its turn was held");
        drop(first);
        tokio::time::timeout(Duration::from_secs(5), waiter).await.expect("the waiter had its turn").unwrap();
        drop(locks.lock("fleet/third").await);
        let keys: Vec<String> = locks.0.lock().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["fleet/third"], "keys nobody holds or awaits are dropped");
    }

    /// A channel opened after the hub stopped would be stopped by no one (a downstream left
    /// running past the gateway): none is.
    #[tokio::test]
    async fn no_channel_is_opened_once_the_hub_stopped() {
        let (_, hub) = hub(Limits::default());
        let before = hub.reserve("alice").unwrap();
        assert!(hub.open_channel(&before).is_ok());
        drop(before);
        hub.stop_all().await;
        let after = hub.reserve("alice").unwrap();
        assert_eq!(hub.open_channel(&after).err(), Some(crate::channel::ChannelError::ShuttingDown));
        assert_eq!(crate::channel::ChannelError::ShuttingDown.to_string(), "the gateway is shutting down");
    }

    #[tokio::test]
    async fn attachments_are_bounded_overall_and_per_principal() {
        let limits = Limits { max_attachments: 3, max_per_principal: 2, ..Limits::default() };
        let (_, hub) = hub(limits);
        let a1 = hub.reserve("alice").unwrap();
        let a2 = hub.reserve("alice").unwrap();
        assert_eq!(hub.reserve("alice").err(), Some(NotAdmitted::PrincipalFull(2)));
        let b1 = hub.reserve("bob").unwrap();
        assert_eq!(hub.reserve("carol").err(), Some(NotAdmitted::Full(3)));
        drop(a1);
        assert!(hub.reserve("carol").is_ok(), "a slot given back is free again");
        drop((a2, b1));
    }
}
