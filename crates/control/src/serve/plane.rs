//! [`FleetControl`]: the fleet control plane behind one gateway process — the
//! `ControlPlane` the gateway asks. It owns no logic of its own: each part owns its state
//! and its lifecycle, wired here at the one point the gateway calls:
//! * the runtime row ([`RowKeeper`]) — written when the transport is bound, refreshed by a
//!   supervised loop, marked stopped at shutdown;
//! * the attachments ([`Attachments`]) — a worker and a supervised heartbeat per client,
//!   registered at its attach, retired at its detach or at shutdown;
//! * the control tools (`tools`);
//! * the gate ([`Gate`]) — every `decide`, listing and capability question.
//!
//! The process's loops (heartbeats, row refresh) run under one
//! [`Supervisor`](fleetgate_supervise::Supervisor), made when the transport is bound
//! (inside the gateway's runtime).

use super::attachments::{AttachedWorker, Attachments, Client, Registrar};
use super::identity::Identity;
use super::judging::{self, CallJudge, Maker};
use super::row::{RowKeeper, runtime_row};
use super::tools;
use super::workflow::{LinkForge, Prefetched};
use crate::gate::{Call, Caller, Gate, Statement};
use crate::metrics::GatewayMetrics;
use fleetgate_config::FleetConfig;
use fleetgate_core::env::{EnvKey, EnvSnapshot};
use fleetgate_core::{Clock, Timestamp};
use fleetgate_gateway::rmcp::model::{CallToolResult, Tool};
use fleetgate_gateway::{
    AttachmentId, BlockerKind, CallToJudge, ClientAttach, ControlCall, ControlError, ControlErrorKind, ControlPlane,
    DownstreamLink, GateDecision, Journey, Judgement, Listing, OverBound, ToolCall, Verdict,
};
use fleetgate_supervise::{EventBus, Supervisor};
use std::sync::{Arc, OnceLock};

/// The `_meta` key of a listed tool that rules name: the calls this role may make of it
/// (`[{"rule": …, "args": {"/method": ["create", …]}}, …]`).
pub const ALLOWED_META_KEY: &str = "fleetgate/allowed";

/// The audit log's name for a call the gateway made itself (a pinned merge through the
/// forge's API) and what the forge answered.
pub const PERFORMED_EVENT: &str = "forge api";

/// The client transport this process serves, as its runtime row records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// One client on stdin/stdout; its worker identity may come from the environment.
    Stdio,
    /// Streamable HTTP: every session is its own attachment with its own generated
    /// session id (the environment describes the process, not any one session).
    Http,
}

impl Transport {
    /// The runtime row's literal.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stdio => "stdio",
            Self::Http => "http",
        }
    }
}

/// The control plane of one gateway process.
pub struct FleetControl {
    identity: Identity,
    transport: Transport,
    env: EnvSnapshot,
    clock: Arc<dyn Clock>,
    gate: Gate,
    row: Arc<RowKeeper>,
    attachments: Attachments,
    /// Made inside the gateway's runtime, when the transport is bound.
    supervisor: OnceLock<Supervisor>,
    generation: Arc<str>,
    /// The member served, shared with each call's judge.
    member: Arc<fleetgate_config::Member>,
    pins: crate::pins::Pins,
    /// Where the gate's decisions and the heartbeats are counted (`/metrics`), when anywhere.
    metrics: Option<GatewayMetrics>,
    /// The profile as the decisions' label (shared: counting allocates nothing).
    profile_label: Arc<str>,
    /// The store's word that approvals changed, for the calls this process holds.
    answers: crate::approvals::AnswerWatch,
    /// The approval requests calls of each attachment are held for: withdrawn when it ends.
    held: Arc<std::sync::Mutex<Vec<(AttachmentId, String)>>>,
    /// The runtime rows as last read, and when: whether a replica still holds its sessions is
    /// judged from them, read at most once a second however many requests are relayed.
    replicas_seen: std::sync::Mutex<Option<(std::time::Instant, Vec<fleetgate_core::runtime::RuntimeRecord>)>>,
    /// The session records read, by session (never a task's, whose maker can change): a
    /// session's record never changes, so each relayed request does not read the store again.
    /// Its holder's liveness is judged afresh each time; the record is dropped when the session
    /// is forgotten here.
    sessions_seen: std::sync::Mutex<std::collections::HashMap<String, fleetgate_store::HttpSession>>,
    /// The forge's own API as the member's server reaches it: the pinned merges the gateway
    /// makes itself go through it.
    forge_api: super::ForgeApi,
}

/// Session records [`FleetControl::owner_of`] keeps at most; past it, they are read again.
const MAX_SESSIONS_SEEN: usize = 4096;

impl std::fmt::Debug for FleetControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetControl").field("runtime_id", &self.identity.runtime_id).finish_non_exhaustive()
    }
}

impl FleetControl {
    /// What `[retention] every` prunes with: the roster and the environment.
    pub fn retention_job(&self) -> crate::retention::Job {
        crate::retention::Job { config: Arc::new(self.config().clone()), env: self.env.clone() }
    }

    /// The store and the clock this plane decides with.
    pub fn store_and_clock(&self) -> (Arc<dyn fleetgate_store::Store>, Arc<dyn Clock>) {
        (Arc::clone(self.gate.store()), Arc::clone(&self.clock))
    }

    /// What this process's notifier sends approval events with (`[[approvals.notify]]`).
    pub fn notifier_context(&self) -> crate::notify::Context {
        let env = self.env.clone();
        crate::notify::Context {
            store: Arc::clone(self.gate.store()),
            clock: Arc::clone(&self.clock),
            env: Arc::new(move |key: &str| env.iter().find(|(k, _)| *k == key).map(|(_, v)| v.to_owned())),
            metrics: self.metrics.as_ref().map(|m| m.notify.clone()),
            ttl_seconds: self.config().approvals.ttl_seconds,
            backoff: crate::notify::BACKOFF,
            pause: crate::notify::real_pause(),
        }
    }

    /// A control plane for `identity` served over `transport`, reading `env` (captured
    /// once), deciding through `gate` (which holds the store and the observer).
    pub fn new(identity: Identity, transport: Transport, env: EnvSnapshot, clock: Arc<dyn Clock>, gate: Gate) -> Self {
        let config = Arc::new(gate.config().clone());
        let row = Arc::new(RowKeeper {
            store: gate.store().clone(),
            clock: clock.clone(),
            host: gate.observer().local_host(),
            config,
            observer: gate.observer_arc(),
            runtime_id: identity.runtime_id.clone(),
            interval_override: env
                .get(EnvKey::WorkerHeartbeatIntervalSeconds, &gate.config().env_prefix)
                .map(str::to_owned),
        });
        let generation = identity.generation().into();
        let member = Arc::new(identity.member.clone());
        let profile_label = Arc::from(identity.member.profile.as_str());
        Self {
            identity,
            transport,
            env,
            clock,
            gate,
            row,
            attachments: Attachments::default(),
            supervisor: OnceLock::new(),
            generation,
            member,
            pins: crate::pins::Pins::default(),
            metrics: None,
            profile_label,
            answers: crate::approvals::AnswerWatch::default(),
            held: Arc::default(),
            replicas_seen: std::sync::Mutex::new(None),
            sessions_seen: std::sync::Mutex::default(),
            forge_api: super::ForgeApi::default(),
        }
    }

    /// Reach the forge's own API as `api` says (the member's host and token).
    pub fn with_forge_api(mut self, api: super::ForgeApi) -> Self {
        self.forge_api = api;
        self
    }

    /// The live workers `principal` holds of this member, whichever replica registered them.
    fn principal_workers(
        &self,
        principal: &str,
    ) -> Result<Vec<fleetgate_core::worker::WorkerRecord>, fleetgate_store::StoreError> {
        let workers = self.gate.store().list_workers()?;
        let now = self.clock.now();
        let name = fleetgate_core::client::normalize_client_name(principal);
        let profile = &self.identity.member.profile;
        Ok(workers
            .into_iter()
            .filter(|w| &w.ids.profile == profile && w.ids.client_name == name)
            .filter(|w| fleetgate_core::worker::is_live(w, now, true).live)
            .collect())
    }

    /// The address of the live replica holding the session or task record `key`; a record of a
    /// replica gone is forgotten.
    fn owner_of(&self, key: &str) -> Option<String> {
        let session = !key.starts_with("task:");
        let seen = session.then(|| self.sessions_seen.lock().unwrap_or_else(|e| e.into_inner()).get(key).cloned());
        let found = match seen.flatten() {
            Some(found) => found,
            None => match self.gate.store().http_session(key) {
                // Only a replica of this member serves its sessions.
                Ok(found) => {
                    let found = found.filter(|s| s.profile == self.identity.member.profile)?;
                    if session {
                        let mut seen = self.sessions_seen.lock().unwrap_or_else(|e| e.into_inner());
                        if seen.len() >= MAX_SESSIONS_SEEN {
                            seen.clear();
                        }
                        seen.insert(key.to_owned(), found.clone());
                    }
                    found
                }
                Err(e) => {
                    tracing::warn!(error = %e, "the session's replica cannot be read");
                    return None;
                }
            },
        };
        match self.replica_alive(&found.runtime_id) {
            Ok(true) => Some(found.owner),
            Ok(false) => {
                tracing::info!(owner = %found.owner, runtime = %found.runtime_id,
                    "the replica holding a session is gone: forgotten, answered 404");
                self.session_ended(key);
                None
            }
            Err(e) => {
                tracing::warn!(error = %e, "whether the session's replica lives cannot be read");
                None
            }
        }
    }

    /// Whether the runtime `runtime_id` still holds its sessions
    /// (`fleetgate_core::runtime::replica_alive`), from the rows read within the last second.
    fn replica_alive(&self, runtime_id: &str) -> Result<bool, fleetgate_store::StoreError> {
        // Held across a refresh on purpose: relays arriving meanwhile wait for that one read of
        // the rows instead of each making its own.
        let mut seen = self.replicas_seen.lock().unwrap_or_else(|e| e.into_inner());
        let known = |seen: &Option<(std::time::Instant, Vec<_>)>| {
            seen.as_ref().and_then(|(_, rows): &(_, Vec<fleetgate_core::runtime::RuntimeRecord>)| {
                rows.iter().find(|r| r.runtime_id == runtime_id).cloned()
            })
        };
        let fresh = seen.as_ref().is_some_and(|(at, _)| at.elapsed() < std::time::Duration::from_secs(1));
        // A replica started since the rows were read is not taken for gone: they are read again.
        let row = match known(&seen).filter(|_| fresh) {
            Some(row) => row,
            None => {
                *seen = Some((std::time::Instant::now(), self.gate.store().list_runtime()?));
                let Some(row) = known(&seen) else { return Ok(false) };
                row
            }
        };
        drop(seen);
        Ok(self.judge_replica(&row))
    }

    /// [`replica_alive`](Self::replica_alive) from the rows already read, when they are fresh
    /// and no one is reading them now; `None` otherwise. Never touches the store.
    fn replica_alive_now(&self, runtime_id: &str) -> Option<bool> {
        let seen = self.replicas_seen.try_lock().ok()?;
        let (at, rows) = seen.as_ref()?;
        if at.elapsed() >= std::time::Duration::from_secs(1) {
            return None;
        }
        let row = rows.iter().find(|r| r.runtime_id == runtime_id)?.clone();
        drop(seen);
        Some(self.judge_replica(&row))
    }

    /// Whether the replica of `row` still holds its sessions, judged now (its pid probed when
    /// it runs on this host).
    fn judge_replica(&self, row: &fleetgate_core::runtime::RuntimeRecord) -> bool {
        let probe = |pid: i64| self.gate.observer().probe(pid).is_alive();
        let ttl = self.config().heartbeat_ttl_seconds;
        fleetgate_core::runtime::replica_alive(row, self.row.host.as_ref(), self.clock.now(), ttl, &probe)
    }

    /// Count the gate's decisions and time, and each worker's renewals and refusals, in
    /// `metrics` (the store's transient failures are counted by the store handed to the
    /// gate: [`crate::metrics::MeteredStore`]).
    pub fn with_metrics(mut self, metrics: GatewayMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// This process's identity.
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// The roster.
    pub fn config(&self) -> &FleetConfig {
        self.gate.config()
    }

    /// The gate every decision goes through.
    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    /// The attached clients.
    pub(super) fn attachments(&self) -> &Attachments {
        &self.attachments
    }

    /// The transport served.
    pub fn transport(&self) -> Transport {
        self.transport
    }

    /// The environment captured at start.
    pub(super) fn env(&self) -> &EnvSnapshot {
        &self.env
    }

    /// The generation every worker of this process runs as.
    pub fn generation(&self) -> &str {
        &self.generation
    }

    /// The decision clock's now.
    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// Record a control tool's workflow decision (a lease claimed or refused, released) in
    /// the audit log, under the attachment's worker, with the PR and head in its reasons.
    pub(super) fn record_control(
        &self,
        attachment: AttachmentId,
        tool: &str,
        allowed: bool,
        blocker: Option<fleetgate_core::BlockerKind>,
        reasons: Vec<String>,
    ) {
        let worker = self.attachments.worker_of(attachment);
        let (worker, principal) = worker.map_or((None, None), |w| (Some(w.identity), w.principal));
        self.gate.record(fleetgate_core::audit::AuditEntry {
            id: None,
            at: self.now(),
            profile: self.identity.member.profile.clone(),
            worker_identity: worker,
            tool: format!("{}{tool}", self.config().tool_prefix),
            allowed,
            blocker_kind: blocker.map(|k| k.as_str().to_owned()),
            reasons,
            principal,
            call: None,
        });
    }

    fn call_of<'a>(
        &'a self,
        attachment: AttachmentId,
        call: &'a ToolCall<'a>,
        worker: &'a Option<AttachedWorker>,
        forge: Option<&'a dyn crate::gate::workflow::ForgeReader>,
    ) -> Call<'a> {
        let caller = self.caller(attachment, worker.as_ref());
        Call {
            member: &self.identity.member,
            tool: &call.tool.name,
            read_only_hint: call.tool.annotations.as_ref().and_then(|a| a.read_only_hint),
            arguments: call.arguments,
            schema: Some(&call.tool.input_schema),
            caller,
            forge,
            schemas: call.catalogue.map(|c| c as &dyn fleetgate_core::dialect::Schemas),
        }
    }

    /// Pin or check `tool`'s definition (unless `[tools] pin = "off"`); a change seen for
    /// the first time is reported in the audit log.
    fn observe_definition(&self, tool: &Tool, worker: Option<String>) {
        let mode = self.config().tools.pin;
        if mode == fleetgate_core::capability::PinMode::Off {
            return;
        }
        let now = self.now();
        match self.pins.observe(&**self.gate.store(), &self.identity.member.profile, tool, now) {
            Ok(Some(changed)) => {
                tracing::warn!(tool = %tool.name, pinned = %changed.pinned_digest, seen = %changed.seen_digest,
                    "a downstream tool's definition changed since it was pinned");
                let enforced = mode == fleetgate_core::capability::PinMode::Enforce;
                self.gate.record(crate::pins::change_entry(&changed, worker, now, enforced));
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(tool = %tool.name, error = %e, "the tool definition could not be pinned"),
        }
    }

    /// Who makes a call on `attachment`: its worker — this process's, of this generation;
    /// or a stateless client's shared one, served by this process.
    pub(super) fn caller<'a>(&'a self, attachment: AttachmentId, worker: Option<&'a AttachedWorker>) -> Caller<'a> {
        super::judging::caller_for(attachment, worker, &self.generation, self.identity.pid)
    }

    /// The gate on one call: the definition observed (pinned or checked), the decision
    /// made and audited, as the gateway's [`Verdict`].
    fn judge_call(&self, attachment: AttachmentId, call: &ToolCall<'_>) -> Verdict {
        let worker = self.attachments.worker_of(attachment);
        self.observe_definition(call.tool, worker.as_ref().map(|w| w.identity.clone()));
        // The PR's head and base come from the reads the gateway made before deciding.
        let forge = Prefetched(call.answers);
        let gated = self.call_of(attachment, call, &worker, Some(&forge));
        let statement = self.gate.statement(&gated);
        self.decided(&gated, statement, worker.as_ref())
    }

    /// The decision on `gated`, stated as `statement`, under `worker`: made and audited by
    /// the gate, a shadow flip counted, as the gateway's [`Verdict`].
    fn decided(&self, gated: &Call<'_>, statement: Statement, worker: Option<&AttachedWorker>) -> Verdict {
        let principal = worker.and_then(|w| w.principal.clone());
        let verdict = self.gate.decide_stated(gated, statement, self.clock.now(), principal);
        if let (Some(flip), Some(metrics)) = (&verdict.shadow, &self.metrics) {
            let labels = crate::metrics::ShadowLabels {
                from: flip.from,
                to: flip.to,
                rule: flip.rule.clone(),
                tool: gated.tool.to_owned(),
            };
            metrics.shadow_flips.get_or_create(&labels).inc();
        }
        gateway_verdict(verdict)
    }

    /// Withdraw the requests the calls of `attachment` are held for (its caller went away),
    /// each audited; the held calls wake and end.
    fn withdraw_held(&self, attachment: AttachmentId) {
        let ids: Vec<String> = {
            let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
            let (mine, rest): (Vec<_>, Vec<_>) = held.drain(..).partition(|(a, _)| *a == attachment);
            *held = rest;
            mine.into_iter().map(|(_, id)| id).collect()
        };
        let why = "the caller went away while the call waited";
        for id in ids {
            match self.gate.store().withdraw_approval(&id, why, self.clock.now()) {
                Ok(true) => {
                    let event = format!("approval request {id} ({}) withdrawn: {why}", self.identity.member.profile);
                    self.gate.record(fleetgate_core::audit::AuditEntry::event(
                        self.clock.now(),
                        &self.identity.member.profile,
                        crate::approvals::APPROVAL_EVENT,
                        event,
                    ));
                }
                Ok(false) => {}
                Err(e) => tracing::warn!(id, error = %e, "a held call's request could not be withdrawn"),
            }
        }
        self.answers.nudge();
    }

    /// [`judge_call`](Self::judge_call) from memory alone, when it can be: a definition
    /// this process has already pinned, and a call the role policy alone decides.
    fn judge_now(&self, attachment: AttachmentId, call: &ToolCall<'_>) -> Option<Verdict> {
        if self.config().tools.pin != fleetgate_core::capability::PinMode::Off && !self.pins.knows(call.tool) {
            return None;
        }
        let worker = self.attachments.worker_of(attachment);
        let principal = worker.as_ref().and_then(|w| w.principal.clone());
        let gated = self.call_of(attachment, call, &worker, None);
        let verdict = self.gate.decide_now(&gated, self.clock.now(), principal)?;
        Some(gateway_verdict(verdict))
    }

    /// Count and trace one gate decision, made since `started` inside `span`.
    fn counted(&self, span: &tracing::Span, started: std::time::Instant, verdict: &Verdict) {
        count(self.metrics.as_ref().map(|m| (m, &self.profile_label)), span, started, verdict);
    }

    fn client_managed(&self) -> bool {
        self.env.get(EnvKey::ClientManaged, &self.config().env_prefix) == Some("1")
    }

    /// The process's supervisor (made on first use, inside the gateway's runtime).
    fn supervisor(&self) -> &Supervisor {
        self.supervisor.get_or_init(|| {
            Supervisor::new(self.config().supervision.clone(), EventBus::new(EventBus::DEFAULT_CAPACITY))
        })
    }

    /// Who attached, resolved: the principal when one authenticated; over stdio the
    /// environment's identity keys; else `clientInfo`.
    fn client(&self, client: &ClientAttach) -> Client {
        let prefix = &self.config().env_prefix;
        // The environment names the one stdio client; over HTTP it describes the process,
        // and each session is a client of its own.
        let from_env = |key| match self.transport {
            Transport::Stdio => self.env.get(key, prefix),
            Transport::Http => None,
        };
        let name = match &client.principal {
            Some(principal) => principal.clone(),
            None => from_env(EnvKey::McpClient).map_or_else(|| client.client_name.clone(), str::to_owned),
        };
        // A stateless HTTP client is the member's, whichever replica serves it: its session is
        // named by what it is (the member, its principal and `clientInfo`), so every replica
        // finds the same worker in the store.
        let shared = matches!(self.transport, Transport::Http) && client.stateless;
        let session = if shared {
            stateless_session(&self.identity.member, client)
        } else {
            from_env(EnvKey::McpClientSession)
                .map_or_else(|| format!("sess-{}", fleetgate_host::start_id()), str::to_owned)
        };
        let instance = match &client.principal {
            Some(_) => format!("{} {}", client.client_name, client.client_version),
            None => from_env(EnvKey::McpClientInstance).map_or_else(|| session.clone(), str::to_owned),
        };
        // What a peer sent is bounded before it is stored, listed and quoted.
        let bounded = fleetgate_core::worker::bounded_field;
        Client {
            name: bounded(&name),
            session: bounded(&session),
            instance: bounded(&instance),
            principal: client.principal.clone(),
            shared,
        }
    }
}

/// The record of a stateless client's task among the sessions (`task:` and the client's own
/// session, then the task's id): the same on every replica, one client's task apart from
/// another's of the same id.
fn task_key(member: &fleetgate_config::Member, client: &ClientAttach, task: &str) -> String {
    format!("task:{}:{task}", stateless_session(member, client))
}

/// The session of a stateless HTTP client of `member`: `stateless-` and a digest of the member,
/// the principal and `clientInfo` — the same on every replica, and nothing a client sent is
/// spelled in it.
fn stateless_session(member: &fleetgate_config::Member, client: &ClientAttach) -> String {
    use sha2::{Digest, Sha256};
    let mut digest = Sha256::new();
    for part in [
        member.namespace.as_str(),
        member.profile.as_str(),
        client.principal.as_deref().unwrap_or(""),
        client.client_name.as_str(),
        client.client_version.as_str(),
    ] {
        // Length-prefixed, so no two different keys run together into one.
        digest.update((part.len() as u64).to_be_bytes());
        digest.update(part.as_bytes());
    }
    let hex: String = digest.finalize().iter().take(12).map(|b| format!("{b:02x}")).collect();
    format!("stateless-{hex}")
}

impl ControlPlane for FleetControl {
    fn on_transport_bound(&self) -> Result<(), ControlError> {
        let host = self.row.host.clone();
        let row = runtime_row(&self.identity, self.transport.as_str(), self.client_managed(), host, self.clock.now());
        self.row.write(&row).map_err(|e| ControlError::new(ControlErrorKind::Store, e.to_string()))?;
        self.row.publish_proof(&self.identity, &row);
        self.row.start(self.supervisor()).map_err(|e| ControlError::new(ControlErrorKind::Supervision, e.to_string()))
    }

    fn on_client_attach(&self, attachment: AttachmentId, client: &ClientAttach) -> Result<(), ControlError> {
        let registrar = Registrar {
            identity: &self.identity,
            store: self.gate.store(),
            clock: &self.clock,
            supervisor: self.supervisor(),
            ttl_seconds: self.config().heartbeat_ttl_seconds,
            interval_override: self.row.interval_override.clone(),
            metrics: self.metrics.as_ref(),
        };
        self.attachments
            .attach(&registrar, attachment, self.client(client))
            .map_err(|e| ControlError::new(ControlErrorKind::Store, e.to_string()))
    }

    fn on_detach(&self, attachment: AttachmentId, reason: &str) {
        self.withdraw_held(attachment);
        self.attachments.detach(&**self.gate.store(), &*self.clock, attachment, reason);
    }

    fn hold(
        &self,
        attachment: AttachmentId,
        request: &str,
        started: std::time::Instant,
    ) -> Option<fleetgate_gateway::HoldFuture> {
        use fleetgate_core::approval::ApprovalState;
        let wait = std::time::Duration::from_secs(self.config().approvals.wait_seconds);
        let deadline = tokio::time::Instant::from_std(started + wait);
        if wait.is_zero() || tokio::time::Instant::now() >= deadline {
            return None;
        }
        let store = Arc::clone(self.gate.store());
        let mut changes = self.answers.subscribe(&store);
        let held = Arc::clone(&self.held);
        let id = request.to_owned();
        held.lock().unwrap_or_else(|e| e.into_inner()).push((attachment, id.clone()));
        Some(Box::pin(async move {
            let answered = loop {
                let (s, i) = (Arc::clone(&store), id.clone());
                match tokio::task::spawn_blocking(move || s.approval(&i)).await {
                    Ok(Ok(Some(r))) if r.state == ApprovalState::Withdrawn => break false,
                    Ok(Ok(Some(r))) if r.state != ApprovalState::Pending => break true,
                    Ok(Ok(None)) => break false,
                    Ok(Err(e)) => tracing::warn!(id, error = %e, "a held call's approval request cannot be read"),
                    _ => {}
                }
                tokio::select! {
                    changed = changes.changed() => if changed.is_err() { break false },
                    () = tokio::time::sleep_until(deadline) => break false,
                }
            };
            held.lock().unwrap_or_else(|e| e.into_inner()).retain(|(a, r)| !(*a == attachment && *r == id));
            answered
        }))
    }

    fn control_tools(&self) -> Vec<Tool> {
        tools::definitions(&self.config().tool_prefix)
    }

    fn call_control_tool(&self, call: ControlCall<'_>) -> CallToolResult {
        tools::call(self, call)
    }

    fn control_tool_reads_downstream(&self, name: &str) -> bool {
        let short = name.strip_prefix(self.config().tool_prefix.as_str()).unwrap_or(name);
        tools::READS_THE_FORGE.contains(&short)
    }

    fn list_tool(&self, tool: &Tool) -> Listing {
        self.observe_definition(tool, None);
        let hint = tool.annotations.as_ref().and_then(|a| a.read_only_hint);
        let listing = self.gate.listing(&self.identity.member.role, &tool.name, hint);
        let mut meta = fleetgate_gateway::rmcp::model::JsonObject::new();
        if let Some(allowed) = listing.allowed {
            meta.insert(ALLOWED_META_KEY.to_owned(), allowed.into());
        }
        Listing { visible: listing.visible, class: listing.class, meta }
    }

    fn judge(&self, attachment: AttachmentId, call: &CallToJudge) -> Option<Box<dyn Judgement>> {
        let maker = Maker {
            attachment,
            worker: self.attachments.worker_of(attachment),
            generation: Arc::clone(&self.generation),
            pid: self.identity.pid,
        };
        let statement = self.gate.statement(&judging::call_of(&self.member, call, maker.caller(), None));
        let pinned = self.config().tools.pin == fleetgate_core::capability::PinMode::Off || self.pins.knows(&call.tool);
        Some(Box::new(judging::journey(CallJudge {
            gate: self.gate.clone(),
            member: Arc::clone(&self.member),
            maker,
            call: call.clone(),
            statement,
            pinned,
            clock: Arc::clone(&self.clock),
            metrics: self.metrics.clone().map(|m| (m, Arc::clone(&self.profile_label))),
        })))
    }

    fn decide_judged(&self, attachment: AttachmentId, judgement: &dyn Judgement, link: &dyn DownstreamLink) -> Verdict {
        let Some(journey) = judgement.as_any().downcast_ref::<Journey<CallJudge>>() else {
            return fleetgate_gateway::control::decide_stepwise(self, attachment, judgement, link);
        };
        let judge = journey.judge();
        let (span, started) = (gate_span(&judge.call.tool.name), std::time::Instant::now());
        let _entered = span.enter();
        let worker = self.attachments.worker_of(attachment);
        self.observe_definition(&judge.call.tool, worker.as_ref().map(|w| w.identity.clone()));
        // The PR's head and base come from the reads the gateway made before deciding.
        let forge = Prefetched(journey.answers());
        let gated = judging::call_of(&self.member, &judge.call, self.caller(attachment, worker.as_ref()), Some(&forge));
        let verdict = self.decided(&gated, judge.statement.clone(), worker.as_ref());
        self.counted(&span, started, &verdict);
        verdict
    }

    fn decide(&self, attachment: AttachmentId, call: &ToolCall<'_>) -> Verdict {
        let (span, started) = (gate_span(&call.tool.name), std::time::Instant::now());
        let _entered = span.enter();
        let verdict = self.judge_call(attachment, call);
        self.counted(&span, started, &verdict);
        verdict
    }

    fn decide_now(&self, attachment: AttachmentId, call: &ToolCall<'_>) -> Option<Verdict> {
        let (span, started) = (gate_span(&call.tool.name), std::time::Instant::now());
        let _entered = span.enter();
        let verdict = self.judge_now(attachment, call)?;
        self.counted(&span, started, &verdict);
        Some(verdict)
    }

    fn perform(&self, attachment: AttachmentId, call: &ToolCall<'_>, what: &str) -> CallToolResult {
        use fleetgate_gateway::rmcp::model::ContentBlock;
        let made = serde_json::from_str::<fleetgate_core::dialect::RestCall>(what).map_err(|e| e.to_string());
        let (answer, said) = match (made, self.config().dialect()) {
            (Ok(rest), Some(dialect)) => self.forge_api.make(dialect, &rest),
            (Err(e), _) => (
                fleetgate_core::dialect::ToolAnswer {
                    text: format!("fleetgate: {e}: nothing was done"),
                    is_error: true,
                },
                e,
            ),
            (_, None) => {
                let why = "no forge dialect to make the call with: nothing was done".to_owned();
                (fleetgate_core::dialect::ToolAnswer { text: format!("fleetgate: {why}"), is_error: true }, why)
            }
        };
        // The judged decision is audited already; what the forge answered is audited beside it.
        let worker = self.attachments.worker_of(attachment).map(|w| w.identity);
        let event = format!("`{}` made by the gateway through the forge's API: {said}", call.tool.name);
        self.gate.record(fleetgate_core::audit::AuditEntry {
            worker_identity: worker,
            ..fleetgate_core::audit::AuditEntry::event(
                self.now(),
                &self.identity.member.profile,
                PERFORMED_EVENT,
                event,
            )
        });
        tracing::info!(tool = %call.tool.name, %said, "call made by the gateway");
        let content = vec![ContentBlock::text(answer.text)];
        if answer.is_error { CallToolResult::error(content) } else { CallToolResult::success(content) }
    }

    fn on_forwarded(&self, attachment: AttachmentId, call: &ToolCall<'_>, result: &CallToolResult) {
        if result.is_error == Some(true) {
            return;
        }
        let worker = self.attachments.worker_of(attachment);
        let forge = call.link.map(LinkForge);
        let gated = self.call_of(attachment, call, &worker, forge.as_ref().map(|f| f as _));
        let Some(action) = call.settles else { return };
        let answer = crate::gate::workflow::answer_json(result);
        self.gate.settle(&gated, action, answer.as_ref(), self.clock.now());
    }

    fn admit_principal(&self, principal: &str, limit: usize, stateless: Option<(&str, &str)>) -> Result<(), OverBound> {
        let member = &self.identity.member;
        if member.replicas <= 1 {
            // One process: the gateway's own count is the member's.
            return Ok(());
        }
        let live = match self.principal_workers(principal) {
            Ok(live) => live,
            Err(e) => {
                // The replica's own bound still holds; a store that cannot answer refuses no one.
                tracing::warn!(error = %e, "the principal's attachments across replicas cannot be counted");
                return Ok(());
            }
        };
        if let Some((client_name, client_version)) = stateless {
            let attach = ClientAttach {
                client_name: client_name.to_owned(),
                client_version: client_version.to_owned(),
                protocol_version: String::new(),
                principal: Some(principal.to_owned()),
                stateless: true,
            };
            let shared = format!("wrk-{}", stateless_session(member, &attach));
            if live.iter().any(|w| w.ids.worker_identity == shared) {
                return Ok(());
            }
        }
        if live.len() >= limit {
            return Err(OverBound::Before { limit, replicas: member.replicas });
        }
        Ok(())
    }

    fn confirm_principal(&self, attachment: AttachmentId, principal: &str, limit: usize) -> Result<(), OverBound> {
        let member = &self.identity.member;
        if member.replicas <= 1 {
            return Ok(());
        }
        // No worker (its registration failed: the gate refuses its mutations), or a shared one
        // found in the store, counted already wherever it was made: nothing new to count.
        let Some(mine) = self.attachments.worker_of(attachment) else { return Ok(()) };
        if !mine.made {
            return Ok(());
        }
        let live = match self.principal_workers(principal) {
            Ok(live) => live.len(),
            Err(e) => {
                tracing::warn!(error = %e, "the principal's attachments across replicas cannot be counted again");
                return Ok(());
            }
        };
        if live <= limit {
            return Ok(());
        }
        if mine.shared {
            self.attachments.retire_on_detach(attachment);
        }
        Err(OverBound::After { limit, replicas: member.replicas, live })
    }

    fn session_opened(&self, session: &str, owner: &str) {
        let record = fleetgate_store::HttpSession {
            session_id: session.to_owned(),
            profile: self.identity.member.profile.clone(),
            owner: owner.to_owned(),
            runtime_id: self.identity.runtime_id.clone(),
            opened_at: self.clock.now(),
        };
        if let Err(e) = self.gate.store().record_http_session(&record) {
            tracing::warn!(error = %e, "the session's replica could not be recorded: other replicas answer it 404");
        }
    }

    fn session_owner(&self, session: &str) -> Option<String> {
        // A task's record is no session: a request cannot name one to reach (or forget) it.
        if session.starts_with("task:") {
            return None;
        }
        self.owner_of(session)
    }

    fn session_owner_now(&self, session: &str) -> Option<String> {
        if session.starts_with("task:") {
            return None;
        }
        let found = self.sessions_seen.lock().unwrap_or_else(|e| e.into_inner()).get(session).cloned()?;
        // A holder judged gone is forgotten on the blocking pool (a store write), not here.
        self.replica_alive_now(&found.runtime_id)?.then_some(found.owner)
    }

    fn task_made(&self, client: &ClientAttach, task: &str, owner: &str) {
        // A task id is the downstream's: made again (by this replica or another), the newest
        // maker holds it.
        let key = task_key(&self.identity.member, client, task);
        self.session_ended(&key);
        self.session_opened(&key, owner);
    }

    fn task_owner(&self, client: &ClientAttach, task: &str) -> Option<String> {
        self.owner_of(&task_key(&self.identity.member, client, task))
    }

    fn session_ended(&self, session: &str) {
        self.sessions_seen.lock().unwrap_or_else(|e| e.into_inner()).remove(session);
        if let Err(e) = self.gate.store().forget_http_session(session) {
            tracing::warn!(error = %e, "an ended session could not be forgotten");
        }
    }

    fn on_shutdown(&self, reason: &str) {
        if !self.attachments.shut_down(&**self.gate.store(), &*self.clock, reason) {
            return;
        }
        if let Some(supervisor) = self.supervisor.get() {
            // The loops end with the runtime; cancelling here only makes it prompt.
            let supervisor = supervisor.clone();
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move { supervisor.cancel_all().await });
            }
        }
        self.row.stop();
        // This process's sessions end with it: no replica relays to it any more.
        if let Err(e) = self.gate.store().forget_http_sessions_of(&self.identity.runtime_id) {
            tracing::warn!(error = %e, "this process's HTTP sessions could not be forgotten");
        }
        if !self.gate.flush_audit(std::time::Duration::from_secs(5)) {
            tracing::error!("audit entries queued before the shutdown were not all committed");
        }
        tracing::info!(%reason, "shut down");
    }
}

/// Core's verdict as the gateway's, field for field: the decision, its texts, what it
/// forwards, settles, performs and the request it is held for, as core gave them.
pub(super) fn gateway_verdict(verdict: fleetgate_core::capability::Capability) -> Verdict {
    let held = verdict.held().map(str::to_owned);
    let decision = GateDecision {
        allowed: verdict.allowed,
        blocker_kind: verdict.blocker_kind,
        reasons: verdict.blocked_reasons,
        operator_action: verdict.operator_action,
    };
    Verdict {
        class: verdict.classification,
        decision,
        settles: verdict.settles,
        forward: verdict.forward,
        held,
        perform: verdict.perform.and_then(|p| serde_json::to_string(&p).ok()),
    }
}

/// The span one gate decision of `tool` is traced in.
pub(super) fn gate_span(tool: &str) -> tracing::Span {
    tracing::info_span!("gate", tool = %tool, class = tracing::field::Empty, blocker = tracing::field::Empty)
}

/// Count (in `metrics`, under its profile label) and trace one gate decision, made since
/// `started` inside `span`.
pub(super) fn count(
    metrics: Option<(&GatewayMetrics, &Arc<str>)>,
    span: &tracing::Span,
    started: std::time::Instant,
    verdict: &Verdict,
) {
    let blocker = verdict.decision.blocker_kind.map(BlockerKind::as_str);
    span.record("class", verdict.class.as_str());
    span.record("blocker", blocker.unwrap_or("none"));
    if let Some((metrics, label)) = metrics {
        metrics.gate_seconds.observe(started.elapsed().as_secs_f64());
        metrics.decided(verdict.class.as_str(), blocker, label);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fleetgate_core::capability::{Capability, ToolClass};
    use proptest::prelude::*;

    fn verdict() -> impl Strategy<Value = Capability> {
        let kind = prop::option::of(prop::sample::select(BlockerKind::ALL.to_vec()));
        (any::<bool>(), kind, prop::collection::vec("[a-z ]{0,8}", 0..3), prop::option::of("[a-z ]{1,8}"))
            .prop_flat_map(|(allowed, kind, reasons, action)| {
                (Just((allowed, kind, reasons, action)), any::<bool>(), prop::option::of("apr-[a-z0-9]{4}"))
            })
            .prop_map(|((allowed, blocker_kind, blocked_reasons, operator_action), holds, approval_request)| {
                Capability {
                    tool: "t".into(),
                    profile: "p".into(),
                    role: "r".into(),
                    classification: ToolClass::Mutating,
                    allowed,
                    blocker_kind,
                    blocked_reasons,
                    restart_required: false,
                    stop_required: false,
                    operator_action,
                    forward: None,
                    approval_request,
                    use_approvals: Vec::new(),
                    request: None,
                    settles: allowed.then(|| "merge".to_owned()),
                    shadow: None,
                    perform: None,
                    holds,
                }
            })
    }

    proptest! {
        /// Issue 56: the gateway's verdict is core's, field for field — nothing between them
        /// recomputes whether the call is allowed, drops the operator text, or decides the hold.
        #[test]
        fn the_gateway_s_verdict_is_core_s(v in verdict()) {
            let g = gateway_verdict(v.clone());
            prop_assert_eq!(g.decision.allowed, v.allowed);
            prop_assert_eq!(g.decision.blocker_kind, v.blocker_kind);
            prop_assert_eq!(&g.decision.reasons, &v.blocked_reasons);
            prop_assert_eq!(&g.decision.operator_action, &v.operator_action);
            prop_assert_eq!(&g.settles, &v.settles);
            prop_assert_eq!(g.held.as_deref(), v.held());
        }
    }
}
