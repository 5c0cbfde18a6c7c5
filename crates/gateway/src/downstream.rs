//! One channel's downstream MCP server: a permanent child under `fleetgate_supervise` (a
//! supervisor of its own, so one channel's quarantine never stands another down, and a
//! closed channel leaves nothing behind), and the MCP client connection to each of its runs.
//!
//! Each run's pipes come out of the supervisor's `on_spawn` callback into one connector
//! task, which waits for the channel's client to attach (the downstream is initialised with
//! that client's capabilities, so roots, sampling and elicitation requests have somewhere
//! to go), then opens the MCP connection over the run's stdin/stdout and publishes it as
//! the current [`Link`]. When the run dies its stdout reaches EOF, rmcp's loop ends and the
//! link goes down; the supervisor restarts the run with backoff, or quarantines it, and the
//! next run is connected the same way. A run that does not finish the handshake in time is
//! killed, which the supervisor counts as a failure like any other.
//!
//! The protocol generation is negotiated per hop: a client on a handshake version
//! (2025-11-25 and older) gets a downstream connection opened with `initialize`; a
//! 2026-07-28 client gets one opened with `server/discover` when the downstream speaks it,
//! else `initialize` (the [`EraMemo`] remembers a legacy downstream, so later channels do
//! not probe it again). A run every client shares is opened with `initialize`: every
//! generation of client is served over that.
//!
//! **Invariant:** nothing here decides restarts: the supervisor's policy does. Any exit
//! the gateway did not ask for, status 0 included, is a failure (`permanent(true)`).

use crate::channel_state::ChannelState;
use crate::control::{DownstreamState, DownstreamStatus};
use crate::observe::GatewayObserver;
use crate::options::DownstreamCommand;
use crate::outbox::NOTIFY_PATIENCE;
use crate::relay::Relay;
use crate::routes::ClientFacts;
use fleetgate_supervise::{
    ChildSpec, ChildStdio, Event, EventBus, SpawnedChild, SupervisionSettings, Supervisor, TaskState,
};
use rmcp::model::{
    ClientConfig, Implementation, JsonRpcError, JsonRpcMessage, ProtocolVersion, ServerCapabilities, ServerNotification,
};
use rmcp::service::{ClientLifecycleMode, Peer, RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// The supervised task and its flow (each channel has a supervisor of its own).
pub(crate) const TASK: &str = "downstream";
/// The flow the downstream child runs in (cancelled when the channel closes).
pub(crate) const FLOW: &str = "downstream";

/// How every channel's downstream is run: the command and the gateway's side of it.
#[derive(Clone, Debug)]
pub(crate) struct DownstreamSpec {
    pub(crate) command: DownstreamCommand,
    pub(crate) supervision: SupervisionSettings,
    /// How long one run may take to answer `initialize` (or `server/discover`).
    pub(crate) init_timeout: Duration,
    /// The gateway's own `clientInfo` towards the downstream.
    pub(crate) client_info: Implementation,
    /// Told of restarts and quarantines.
    pub(crate) observer: Option<Arc<dyn GatewayObserver>>,
    /// Every HTTP attachment shares one run (`[downstream] sharing = "gateway"`).
    pub(crate) shared: bool,
}

/// What the gateway learned of the downstream, shared by every channel: its protocol
/// generation (once a downstream is known to lack `server/discover`, no channel probes it
/// again) and the capabilities its last connection answered with (what the gateway says of
/// it outside any connection).
#[derive(Debug, Default)]
pub(crate) struct EraMemo {
    era: AtomicU8,
    capabilities: Mutex<Option<ServerCapabilities>>,
}

impl EraMemo {
    const LEGACY: u8 = 1;
    const MODERN: u8 = 2;

    /// The capabilities the downstream's last connection answered with, if any connected.
    pub(crate) fn capabilities(&self) -> Option<ServerCapabilities> {
        self.capabilities.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn learn_capabilities(&self, capabilities: &ServerCapabilities) {
        *self.capabilities.lock().unwrap_or_else(PoisonError::into_inner) = Some(capabilities.clone());
    }

    fn lifecycle(&self, client: &ClientFacts) -> ClientLifecycleMode {
        if !client.stateless_era || self.era.load(Ordering::Relaxed) == Self::LEGACY {
            return ClientLifecycleMode::Initialize;
        }
        ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
        }
    }

    fn learn(&self, modern: bool) {
        self.era.store(if modern { Self::MODERN } else { Self::LEGACY }, Ordering::Relaxed);
    }
}

/// One live MCP connection to one run of the downstream.
#[derive(Debug)]
pub(crate) struct Connection {
    pub(crate) peer: Peer<RoleClient>,
    /// Counts connections since start-up; the tool catalogue belongs to one.
    pub(crate) generation: u64,
    pub(crate) pid: u32,
    pub(crate) server: (String, String),
    pub(crate) protocol_version: String,
    pub(crate) capabilities: ServerCapabilities,
    pub(crate) instructions: Option<String>,
    /// Opened with `server/discover` (2026-07-28): per-request `_meta` is the downstream's.
    pub(crate) stateless_era: bool,
}

/// The current connection, if any.
pub(crate) type Link = Option<Arc<Connection>>;

/// The downstream child and its connection.
pub(crate) struct Downstream {
    supervisor: Supervisor,
    link: watch::Sender<Link>,
    /// The last handshake failure, shown when the supervisor has no exit to report yet.
    handshake_error: Arc<Mutex<Option<String>>>,
    /// Whether any run has connected yet: until one has, the downstream is still coming up
    /// (its first runs may fail and be restarted), and a client's first request waits for it.
    connected_once: Arc<AtomicBool>,
}

impl std::fmt::Debug for Downstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Downstream").field("connected", &self.link.borrow().is_some()).finish_non_exhaustive()
    }
}

/// What the connector needs to initialise each run.
struct Connector {
    state: Arc<ChannelState>,
    memo: Arc<EraMemo>,
    link: watch::Sender<Link>,
    handshake_error: Arc<Mutex<Option<String>>>,
    connected_once: Arc<AtomicBool>,
    init_timeout: Duration,
    client_info: Implementation,
}

impl Downstream {
    /// Put the command under a supervisor of this channel's own and start connecting to
    /// its runs.
    pub(crate) fn start(
        spec: &DownstreamSpec,
        state: Arc<ChannelState>,
        memo: Arc<EraMemo>,
    ) -> Result<Self, fleetgate_supervise::SpawnError> {
        let command = &spec.command;
        let supervisor = Supervisor::new(spec.supervision.clone(), EventBus::new(EventBus::DEFAULT_CAPACITY));
        if let Some(observer) = &spec.observer {
            tokio::spawn(report_supervision(supervisor.bus().subscribe(), observer.clone()));
        }
        let (link, _) = watch::channel(None);
        let handshake_error = Arc::new(Mutex::new(None));
        let connected_once = Arc::new(AtomicBool::new(false));
        let (spawned_tx, spawned_rx) = mpsc::unbounded_channel::<SpawnedChild>();
        let connector = Connector {
            state,
            memo,
            link: link.clone(),
            handshake_error: handshake_error.clone(),
            connected_once: connected_once.clone(),
            init_timeout: spec.init_timeout,
            client_info: spec.client_info.clone(),
        };
        tokio::spawn(connector.run(spawned_rx));

        let mut spec = ChildSpec::new(command.program.clone())
            .args(command.args.iter().cloned())
            .stdin(ChildStdio::Piped)
            .stdout(ChildStdio::Piped)
            .stderr(ChildStdio::Inherit)
            .permanent(true)
            .on_spawn(move |spawned| {
                // The connector outlives every run; if it is gone the gateway is shutting
                // down and the run is about to be stopped anyway.
                let _ = spawned_tx.send(spawned);
            });
        if command.env_clear {
            spec = spec.env_clear();
        }
        for (key, value) in &command.env {
            spec = spec.env(key.clone(), value.clone());
        }
        if let Some(dir) = &command.cwd {
            spec = spec.current_dir(dir.clone());
        }
        if let Some((guard, args)) = &command.guard {
            spec = spec.guard(guard.clone(), args.iter().cloned());
        }
        supervisor.spawn_child(TASK, FLOW, spec)?;
        Ok(Self { supervisor, link, handshake_error, connected_once })
    }

    /// The current connection, if the downstream is serving.
    pub(crate) fn link(&self) -> Link {
        self.link.borrow().clone()
    }

    /// Whether any run has connected yet.
    pub(crate) fn connected_once(&self) -> bool {
        self.connected_once.load(Ordering::Acquire)
    }

    /// The gateway's view of the child, now.
    pub(crate) fn status(&self) -> DownstreamStatus {
        let link = self.link();
        let task = self.supervisor.task(TASK);
        let now = Instant::now();
        let state = match task.as_ref().map(|t| t.state) {
            Some(TaskState::Running) if link.is_some() => DownstreamState::Running,
            Some(TaskState::Running) => DownstreamState::Starting,
            Some(TaskState::BackingOff) => DownstreamState::Restarting {
                retry_in: task
                    .as_ref()
                    .and_then(|t| t.next_start)
                    .map(|at| at.saturating_duration_since(now))
                    .unwrap_or_default(),
            },
            Some(TaskState::Quarantined) => {
                let retry_in = self
                    .supervisor
                    .flow(FLOW)
                    .and_then(|f| f.quarantine)
                    .map(|q| q.until.saturating_duration_since(now))
                    .unwrap_or_default();
                DownstreamState::Quarantined { until: SystemTime::now() + retry_in, retry_in }
            }
            Some(TaskState::Finished | TaskState::Cancelling | TaskState::Cancelled) | None => DownstreamState::Stopped,
        };
        let last_exit = task
            .as_ref()
            .and_then(|t| t.last_error.clone())
            .or_else(|| self.handshake_error.lock().unwrap_or_else(PoisonError::into_inner).clone());
        DownstreamStatus {
            restarts: task.as_ref().map_or(0, |t| t.restarts),
            last_exit,
            server: link.as_ref().map(|c| c.server.clone()),
            protocol_version: link.as_ref().map(|c| c.protocol_version.clone()),
            pid: if matches!(state, DownstreamState::Running | DownstreamState::Starting) {
                link.as_ref().map(|c| c.pid)
            } else {
                None
            },
            state,
        }
    }

    /// Wait until the downstream is connected, is quarantined or stopped, or `deadline`
    /// passes; returns the link then.
    pub(crate) async fn wait_ready(&self, deadline: Instant) -> Link {
        let mut link = self.link.subscribe();
        let mut events = self.supervisor.bus().subscribe();
        loop {
            if let Some(connection) = link.borrow_and_update().clone() {
                return Some(connection);
            }
            if matches!(self.status().state, DownstreamState::Quarantined { .. } | DownstreamState::Stopped) {
                return None;
            }
            tokio::select! {
                changed = link.changed() => if changed.is_err() { return None },
                // Any supervisor event may be the quarantine; the loop re-reads the state.
                _ = events.recv() => {}
                () = tokio::time::sleep_until(deadline) => return self.link(),
            }
        }
    }

    /// Stop the child for good (the gateway is shutting down).
    pub(crate) async fn stop(&self) {
        let report = self.supervisor.cancel_flow(FLOW).await;
        if !report.forced.is_empty() || !report.unresponsive.is_empty() {
            tracing::warn!(?report, "the downstream server did not stop within its grace");
        }
        self.link.send_replace(None);
    }
}

/// Tell `observer` of one channel's restarts and quarantines, as its supervisor publishes
/// them, until the channel's flow is cancelled (the channel closed). A quarantine still
/// standing then is reported lifted, so the observer's count never keeps a closed channel.
async fn report_supervision(mut events: tokio::sync::broadcast::Receiver<Event>, observer: Arc<dyn GatewayObserver>) {
    use tokio::sync::broadcast::error::RecvError;
    let mut quarantined = false;
    loop {
        let event = match events.recv().await {
            Ok(event) => event,
            Err(RecvError::Lagged(_)) => continue,
            Err(RecvError::Closed) => break,
        };
        match event {
            Event::TaskStarted { attempt, .. } if attempt > 1 => observer.downstream_restarted(),
            Event::FlowQuarantined { .. } if !quarantined => {
                quarantined = true;
                observer.downstream_quarantined(true);
            }
            Event::FlowQuarantineExpired { .. } if quarantined => {
                quarantined = false;
                observer.downstream_quarantined(false);
            }
            Event::FlowCancelled { .. } => break,
            _ => {}
        }
    }
    if quarantined {
        observer.downstream_quarantined(false);
    }
}

/// The connection's transport, read in order: queues each notification for the client (but
/// a cancellation, which is rmcp's) on the channel's bounded queue, numbering progress, and
/// notes each answer, for [`crate::routes::Routes`] to keep progress ahead of the answer it
/// precedes. Requests and answers pass through unchanged.
struct Tap<T> {
    inner: T,
    state: Arc<ChannelState>,
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Tap<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), T::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            let message = self.inner.receive().await?;
            let routes = &self.state.routes;
            match &message {
                // Queued for the client here, in wire order and without waiting; only
                // cancellations are rmcp's.
                JsonRpcMessage::Notification(n)
                    if !matches!(n.notification, ServerNotification::CancelledNotification(_)) =>
                {
                    let JsonRpcMessage::Notification(n) = message else { unreachable!() };
                    self.state.notify_client(n.notification);
                    continue;
                }
                JsonRpcMessage::Response(answer) => routes.answer_read(answer.id.clone()),
                JsonRpcMessage::Error(JsonRpcError { id: Some(id), .. }) => routes.answer_read(id.clone()),
                _ => {}
            }
            return Some(message);
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), T::Error>> + Send {
        self.inner.close()
    }
}

impl Connector {
    async fn run(self, mut spawned_rx: mpsc::UnboundedReceiver<SpawnedChild>) {
        let mut attached = self.state.client();
        let mut generation = 0_u64;
        'runs: while let Some(mut spawned) = spawned_rx.recv().await {
            // The downstream is initialised with the client's capabilities: wait for them.
            // A newer run (this one died meanwhile) replaces the one waiting.
            let client = loop {
                while let Ok(newer) = spawned_rx.try_recv() {
                    spawned = newer;
                }
                if let Some(client) = attached.borrow_and_update().clone() {
                    break client;
                }
                tokio::select! {
                    changed = attached.changed() => if changed.is_err() { return },
                    newer = spawned_rx.recv() => match newer {
                        Some(newer) => spawned = newer,
                        None => return,
                    },
                }
            };
            let pid = spawned.pid;
            let (Some(stdout), Some(stdin)) = (spawned.stdout.take(), spawned.stdin.take()) else {
                self.fail(pid, "the run's pipes were not handed over".to_owned());
                continue 'runs;
            };
            let relay = Relay { state: self.state.clone(), info: self.client_config(&client) };
            let transport = Tap { inner: AsyncRwTransport::new_client(stdout, stdin), state: self.state.clone() };
            // A shared run serves clients of both generations: opened with `initialize`, the
            // connection every generation's client is served over (a 2026-07-28 client as
            // over any downstream that lacks `server/discover`), so no client's answer comes
            // in a generation it does not speak.
            let lifecycle =
                if self.state.shared { ClientLifecycleMode::Initialize } else { self.memo.lifecycle(&client) };
            let opening = rmcp::service::serve_client_with_lifecycle(relay, transport, lifecycle);
            let running = match tokio::time::timeout(self.init_timeout, opening).await {
                Ok(Ok(running)) => running,
                Ok(Err(e)) => {
                    self.fail(pid, format!("MCP handshake with the downstream failed: {e}"));
                    continue 'runs;
                }
                Err(_) => {
                    let secs = self.init_timeout.as_secs_f64();
                    self.fail(pid, format!("the downstream did not answer `initialize` within {secs} s"));
                    continue 'runs;
                }
            };
            let peer = running.peer().clone();
            let info = peer.peer_info();
            generation += 1;
            let stateless_era = info.as_ref().is_some_and(|i| !i.protocol_version.has_initialize());
            if client.stateless_era && !self.state.shared {
                self.memo.learn(stateless_era);
            }
            let connection = Arc::new(Connection {
                stateless_era,
                generation,
                pid,
                server: info
                    .as_ref()
                    .and_then(|i| i.server_info.as_ref().map(|s| (s.name.clone(), s.version.clone())))
                    .unwrap_or_default(),
                protocol_version: info.as_ref().map(|i| i.protocol_version.to_string()).unwrap_or_default(),
                capabilities: info.as_ref().map(|i| i.capabilities.clone()).unwrap_or_default(),
                instructions: info.as_ref().and_then(|i| i.instructions.clone()),
                peer,
            });
            tracing::info!(attachment = %self.state.attachment, pid, generation, server = ?connection.server,
                protocol = %connection.protocol_version, "downstream connected");
            self.connected_once.store(true, Ordering::Release);
            *self.handshake_error.lock().unwrap_or_else(PoisonError::into_inner) = None;
            let (listen_peer, listen_era) = (connection.peer.clone(), connection.stateless_era);
            self.memo.learn_capabilities(&connection.capabilities);
            self.link.send_replace(Some(connection));
            self.announce_tools_changed().await;
            // The new connection is asked for what the subscription streams want.
            self.state.subscriptions.sync(&listen_peer, generation, listen_era);
            let link = self.link.clone();
            tokio::spawn(async move {
                let reason = running.waiting().await;
                tracing::info!(pid, generation, ?reason, "downstream connection ended");
                link.send_if_modified(|current| {
                    if current.as_ref().is_some_and(|c| c.generation == generation) {
                        *current = None;
                        true
                    } else {
                        false
                    }
                });
            });
        }
    }

    /// Tell every client to list the tools again: it may hold a list without the downstream's
    /// tools, or the previous run's. A stateless client hears it on its subscription streams.
    /// Bounded: a client that stops reading its stream must not hold up the connector.
    async fn announce_tools_changed(&self) {
        for session in self.state.sessions() {
            match tokio::time::timeout(NOTIFY_PATIENCE, session.notify_tool_list_changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::debug!(error = %e, "could not tell the client the tool list changed"),
                Err(_) => tracing::debug!("a client did not take the tool-list change in time"),
            }
        }
        for sink in self.state.subscriptions.sinks() {
            let _ = tokio::time::timeout(NOTIFY_PATIENCE, sink.notify_tool_list_changed()).await;
        }
    }

    /// The gateway's `initialize` towards the run: the client's capabilities, so roots,
    /// sampling and elicitation requests have somewhere to go; for a run every client shares,
    /// none (not roots, not tasks: nothing one client declared becomes every client's).
    fn client_config(&self, client: &ClientFacts) -> ClientConfig {
        let capabilities = if self.state.shared { Default::default() } else { client.capabilities.clone() };
        ClientConfig::new(capabilities, self.client_info.clone())
            .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    /// A run that cannot be used: record why and kill its process group, so the
    /// supervisor sees the failure and restarts it.
    fn fail(&self, pid: u32, reason: String) {
        tracing::warn!(pid, %reason, "killing the downstream run");
        *self.handshake_error.lock().unwrap_or_else(PoisonError::into_inner) = Some(reason);
        if let Some(pgid) = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw) {
            // ESRCH: it is already gone, which is what we want.
            let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
        }
    }
}
