//! [`FleetControl`]: the fleet control plane behind one gateway process.
//!
//! Lifecycle, each wired at the one point the gateway calls: the runtime row is
//! written when the transport is bound (one per process, whatever the
//! transport); each client attachment — the stdio client, or one Streamable
//! HTTP session — registers its own worker and starts its own heartbeat
//! supervisor (never twice for one attachment); a detach retires that one;
//! shutdown stops every heartbeat, deregisters every worker and marks the row
//! stopped. Every `decide` goes through the one resolver and the audit log,
//! under the worker of the attachment that called.

use crate::audit::Auditor;
use crate::config::{FleetConfig, Member};
use crate::heartbeat::{HeartbeatParams, HeartbeatSupervisor, worker_heartbeat_status};
use crate::observe::snapshot;
use crate::provenance::assess_provenance;
use fleetgate_core::Clock;
use fleetgate_core::audit::AuditEntry;
use fleetgate_core::capability::{
    self, CapabilityInput, Evidence, classify_tool, needs_evidence, resolve_task_capability,
};
use fleetgate_core::diagnostics::stale_runtime_diagnostic;
use fleetgate_core::env::{EnvKey, EnvSnapshot, unconsumed_env_overrides};
use fleetgate_core::provenance::{Ownership, Provenance};
use fleetgate_core::runtime::{Binding, Cohort, RuntimeRecord, RuntimeStatus, derive_cohort, runtime_id};
use fleetgate_core::worker::{Registration, worker_identity};
use fleetgate_core::{BlockerKind, Timestamp};
use fleetgate_gateway::rmcp::model::{CallToolResult, Tool, ToolAnnotations};
use fleetgate_gateway::{AttachmentId, ClientAttach, ControlPlane, DownstreamStatus, GateDecision, ToolClass};
use fleetgate_host::probe::probe_pid;
use fleetgate_store::Store;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// Who this process is, fixed at start.
#[derive(Clone, Debug)]
pub struct Identity {
    /// The roster member served.
    pub member: Member,
    /// This process.
    pub pid: i64,
    /// Fresh per start.
    pub boot_id: String,
    /// `namespace:pid:boot_id`.
    pub runtime_id: String,
    /// The client process family.
    pub cohort: Cohort,
    /// The checkout this member works in.
    pub repo_root: Option<PathBuf>,
    /// Its HEAD when this process started.
    pub startup_head: Option<String>,
    /// The repository binding this process declares.
    pub binding: Option<Binding>,
}

#[derive(Debug)]
struct Attached {
    worker_identity: String,
    fencing_epoch: i64,
    client_name: String,
    session_id: String,
    /// The HTTP principal it authenticated as, when a tokens file is in use.
    principal: Option<String>,
    heartbeat: HeartbeatSupervisor,
}

#[derive(Debug, Default)]
struct State {
    attached: BTreeMap<AttachmentId, Attached>,
    attach_errors: BTreeMap<AttachmentId, String>,
    shut_down: bool,
}

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
    config: FleetConfig,
    identity: Identity,
    transport: Transport,
    env: EnvSnapshot,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    auditor: Auditor,
    classes: Mutex<BTreeMap<String, ToolClass>>,
    host: Option<fleetgate_store::HostIdentity>,
    state: Mutex<State>,
    wake: Arc<(Mutex<bool>, Condvar)>,
}

impl std::fmt::Debug for FleetControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetControl").field("runtime_id", &self.identity.runtime_id).finish_non_exhaustive()
    }
}

impl FleetControl {
    /// A control plane for `member` served over `transport`, reading `env` (captured
    /// once) and `store`.
    #[expect(clippy::too_many_arguments, reason = "each is one independent input of the process")]
    pub fn new(
        transport: Transport,
        config: FleetConfig,
        member: Member,
        env: EnvSnapshot,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        repo_root: Option<PathBuf>,
        binding: Option<Binding>,
    ) -> Self {
        let pid = i64::from(std::process::id());
        let boot_id = fleetgate_host::boot_id();
        let cohort = derive_cohort(
            env.get(EnvKey::McpCohortId, &config.env_prefix),
            Some(i64::from(std::os::unix::process::parent_id())),
        );
        let startup_head = repo_root.as_deref().and_then(|r| match fleetgate_host::git::head(r) {
            Ok(h) => Some(h),
            Err(e) => {
                tracing::warn!("startup revision unknown: {e}");
                None
            }
        });
        let identity = Identity {
            runtime_id: runtime_id(&member.namespace, pid, &boot_id),
            member,
            pid,
            boot_id,
            cohort,
            repo_root,
            startup_head,
            binding,
        };
        let auditor = Auditor::new(store.clone(), Duration::from_secs(2));
        Self {
            config,
            identity,
            transport,
            env,
            store,
            clock,
            auditor,
            classes: Mutex::new(BTreeMap::new()),
            host: crate::observe::local_host(),
            state: Mutex::new(State::default()),
            wake: Arc::new((Mutex::new(false), Condvar::new())),
        }
    }

    /// This process's identity.
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn generation(&self) -> String {
        format!("gen-{}", self.identity.boot_id)
    }

    fn prefix(&self) -> &str {
        &self.config.env_prefix
    }

    fn runtime_row(&self, now: Timestamp) -> RuntimeRecord {
        let id = &self.identity;
        let b = id.binding.as_ref();
        RuntimeRecord {
            runtime_id: id.runtime_id.clone(),
            namespace: id.member.namespace.clone(),
            profile: id.member.profile.clone(),
            role: id.member.role.clone(),
            remote: b.map(|b| b.remote.clone()),
            org: b.map(|b| b.org.clone()),
            repo: b.map(|b| b.repo.clone()),
            repository_root: id.repo_root.as_ref().map(|p| p.display().to_string()),
            pid: id.pid,
            cohort_id: id.cohort.cohort_id.clone(),
            cohort_source: id.cohort.cohort_source,
            client_provenance: if self.client_managed() { "client_managed".into() } else { "unmanaged".into() },
            boot_id: id.boot_id.clone(),
            startup_head: id.startup_head.clone(),
            daemon_start_head: id.startup_head.clone(),
            transport: self.transport.as_str().into(),
            registered_at: now,
            last_heartbeat_at: Some(now),
            status: RuntimeStatus::Running,
        }
    }

    fn client_managed(&self) -> bool {
        self.env.get(EnvKey::ClientManaged, self.prefix()) == Some("1")
    }

    /// Refresh the runtime row every ttl/3 until shutdown, on its own thread.
    fn start_row_refresh(self: &Arc<Self>) {
        let me = Arc::clone(self);
        let every = Duration::from_secs_f64(fleetgate_core::interval::heartbeat_interval_for(
            self.config.heartbeat_ttl_seconds,
            self.env.get(EnvKey::WorkerHeartbeatIntervalSeconds, self.prefix()),
        ));
        let spawned = std::thread::Builder::new().name("fleetgate-runtime-row".into()).spawn(move || {
            let (lock, cv) = &*me.wake;
            loop {
                let stop = lock.lock().unwrap_or_else(|e| e.into_inner());
                let (stop, _) = cv.wait_timeout_while(stop, every, |s| !*s).unwrap_or_else(|e| e.into_inner());
                if *stop {
                    return;
                }
                drop(stop);
                me.refresh();
            }
        });
        if let Err(e) = spawned {
            tracing::error!("cannot start the runtime-row refresh: {e}");
        }
    }

    /// Keep the runtime row fresh and publish this host's scan, so members on
    /// other hosts sharing the store can be corroborated by it.
    fn refresh(&self) {
        let now = self.clock.now();
        if let Err(e) = self.store.touch_runtime(&self.identity.runtime_id, now) {
            tracing::warn!("runtime row refresh failed: {e}");
        }
        if let Some(host) = &self.host {
            let scan = crate::observe::scan_host(&self.config, &fleetgate_host::procfs::ProcFs::default());
            if let Err(e) = self.store.publish_observation(host, &scan, now) {
                tracing::warn!("cannot publish this host's observation: {e}");
            }
        }
    }

    fn worker_of(&self, attachment: AttachmentId) -> Option<String> {
        self.lock().attached.get(&attachment).map(|a| a.worker_identity.clone())
    }

    fn provenance(&self, attachment: AttachmentId, now: Timestamp) -> Provenance {
        let Some(id) = self.worker_of(attachment) else {
            return Provenance {
                session_ownership: Ownership::Unowned,
                blocker_kind: Some(BlockerKind::SessionAttachmentMissing),
                reasons: vec![format!("no worker is attached to this gateway for {attachment}")],
                heartbeat_age_seconds: None,
            };
        };
        assess_provenance(&*self.store, &id, &self.generation(), &self.env, self.prefix(), true, now, &|pid| {
            probe_pid(pid).is_alive()
        })
        .unwrap_or_else(|e| Provenance {
            session_ownership: Ownership::Unowned,
            blocker_kind: Some(BlockerKind::SessionAttachmentMissing),
            reasons: vec![format!("the registry cannot be read: {e}")],
            heartbeat_age_seconds: None,
        })
    }

    /// The resolver's verdict for `tool` called on `attachment`, gathering the
    /// live evidence only when the call can need it.
    pub fn resolve(&self, attachment: AttachmentId, tool: &str, class: ToolClass) -> capability::Capability {
        let core_class = match class {
            ToolClass::ReadOnly => capability::ToolClass::ReadOnly,
            ToolClass::Mutating => capability::ToolClass::Mutating,
        };
        let member = &self.identity.member;
        let role_permitted = self.config.role_policy(&member.role).permits(tool);
        let input = |evidence| CapabilityInput {
            profile: &member.profile,
            role: &member.role,
            tool,
            class: core_class,
            role_permitted,
            evidence,
        };
        if !needs_evidence(core_class, role_permitted) {
            return resolve_task_capability(&input(None));
        }
        let now = self.clock.now();
        let snap = snapshot(&self.config, Ok(&*self.store), now, Some(&member.namespace));
        let provenance = self.provenance(attachment, now);
        resolve_task_capability(&input(Some(Evidence {
            diagnostics: &snap.diagnostics,
            provenance: &provenance,
            inventory: &snap.inventory,
        })))
    }

    fn known_class(&self, tool: &str) -> ToolClass {
        let cached = self.classes.lock().unwrap_or_else(|e| e.into_inner()).get(tool).copied();
        cached.unwrap_or(match classify_tool(tool, None, &self.config.tools) {
            capability::ToolClass::ReadOnly => ToolClass::ReadOnly,
            capability::ToolClass::Mutating => ToolClass::Mutating,
        })
    }

    fn runtime_context(&self, attachment: AttachmentId, downstream: &DownstreamStatus) -> Value {
        let id = &self.identity;
        let now = self.clock.now();
        let state = self.lock();
        let mine = state.attached.get(&attachment);
        let heartbeat = worker_heartbeat_status(mine.map(|a| &a.heartbeat as _));
        let worker = mine.map(|a| {
            json!({
                "worker_identity": a.worker_identity,
                "fencing_epoch": a.fencing_epoch,
                "client_name": a.client_name,
                "session_id": a.session_id,
                "principal": a.principal,
                "generation_id": self.generation(),
            })
        });
        let attach_error = state.attach_errors.get(&attachment).cloned();
        let attachments = state.attached.len();
        drop(state);
        json!({
            "namespace": id.member.namespace,
            "profile": id.member.profile,
            "role": id.member.role,
            "pid": id.pid,
            "runtime_id": id.runtime_id,
            "boot_id": id.boot_id,
            "transport": self.transport.as_str(),
            "attachment": attachment.0,
            "attachments": attachments,
            "cohort_id": id.cohort.cohort_id,
            "cohort_source": id.cohort.cohort_source,
            "repository_root": id.repo_root,
            "startup_head": id.startup_head,
            "current_head": self.current_head().ok(),
            "worker": worker,
            "worker_attach_error": attach_error,
            "worker_heartbeat": heartbeat,
            "provenance": self.provenance(attachment, now),
            "env_diagnostics": {
                "env_prefix": self.prefix(),
                "unsupported": unconsumed_env_overrides(&self.env, self.prefix(), &self.config.pass_through_env),
            },
            "downstream": downstream.to_json(),
            "store": self.store.describe(),
            "read_only": true,
        })
    }

    fn current_head(&self) -> Result<String, String> {
        match &self.identity.repo_root {
            Some(root) => fleetgate_host::git::head(root),
            None => Err("no repository root is configured".into()),
        }
    }

    fn parity(&self) -> Value {
        let current = self.current_head();
        let startup = self.identity.startup_head.clone();
        let (parity, diagnostic) = match (&startup, &current) {
            (Some(s), Ok(c)) => {
                (Some(s == c), stale_runtime_diagnostic(&self.identity.member.namespace, self.identity.pid, s, c))
            }
            _ => (None, None),
        };
        json!({
            "startup_head": startup,
            "current_head": current.as_ref().ok(),
            "current_head_error": current.err(),
            "parity": parity,
            "diagnostic": diagnostic,
            "read_only": true,
        })
    }
}

fn schema(v: Value) -> Arc<Map<String, Value>> {
    Arc::new(v.as_object().cloned().unwrap_or_default())
}

fn no_args() -> Arc<Map<String, Value>> {
    schema(json!({ "type": "object", "properties": {}, "additionalProperties": false }))
}

/// Wire the row refresh to the transport bind: an `Arc` is needed for the thread.
pub fn bind(control: &Arc<FleetControl>) -> Result<(), String> {
    let now = control.clock.now();
    control
        .store
        .upsert_runtime(&control.runtime_row(now))
        .map_err(|e| format!("cannot write the runtime row: {e}"))?;
    if let Some(host) = &control.host {
        control
            .store
            .set_runtime_host(&control.identity.runtime_id, host)
            .map_err(|e| format!("cannot record this row's host: {e}"))?;
    }
    control.refresh();
    control.start_row_refresh();
    Ok(())
}

/// The `ControlPlane` the gateway holds: a thin handle so `on_transport_bound`
/// can start threads that share the control plane.
#[derive(Debug, Clone)]
pub struct Handle(pub Arc<FleetControl>);

impl ControlPlane for Handle {
    fn on_transport_bound(&self) -> Result<(), String> {
        bind(&self.0)
    }

    fn on_client_attach(&self, attachment: AttachmentId, client: &ClientAttach) -> Result<(), String> {
        let c = &self.0;
        let mut state = c.lock();
        if state.shut_down || state.attached.contains_key(&attachment) {
            return Ok(());
        }
        let prefix = c.prefix().to_owned();
        // The environment names the one stdio client; over HTTP it describes the
        // process, and each session is a client of its own.
        let from_env = |key| match c.transport {
            Transport::Stdio => c.env.get(key, &prefix),
            Transport::Http => None,
        };
        // An authenticated principal is who the client is; `clientInfo` is only what it says.
        let client_name = match &client.principal {
            Some(principal) => principal.clone(),
            None => from_env(EnvKey::McpClient).map_or_else(|| client.client_name.clone(), str::to_owned),
        };
        let session = from_env(EnvKey::McpClientSession)
            .map_or_else(|| format!("sess-{}", fleetgate_host::boot_id()), str::to_owned);
        let instance = match &client.principal {
            Some(_) => format!("{} {}", client.client_name, client.client_version),
            None => from_env(EnvKey::McpClientInstance).map_or_else(|| session.clone(), str::to_owned),
        };
        let now = c.clock.now();
        let registration = Registration {
            worker_identity: worker_identity(&client_name, &session, now, fleetgate_host::nonce()),
            client_name: client_name.clone(),
            client_instance_id: instance,
            session_id: session.clone(),
            generation_id: c.generation(),
            role: c.identity.member.role.clone(),
            profile: c.identity.member.profile.clone(),
            pid: Some(c.identity.pid),
            heartbeat_ttl_seconds: c.config.heartbeat_ttl_seconds,
        };
        let outcome = match c.store.register(&registration, now) {
            Ok(o) => o,
            Err(e) => {
                let why = format!("cannot register the worker: {e}");
                state.attach_errors.insert(attachment, why.clone());
                return Err(why);
            }
        };
        // Started at the one point where identity and epoch are both known,
        // presenting exactly what the row records.
        let heartbeat = HeartbeatSupervisor::new(
            c.store.clone(),
            c.clock.clone(),
            HeartbeatParams {
                worker_identity: outcome.worker_identity.clone(),
                fencing_epoch: outcome.fencing_epoch,
                session_id: Some(session.clone()),
                generation_id: Some(c.generation()),
                client_name: Some(outcome.client_name.clone()),
                pid: Some(c.identity.pid),
                ttl_seconds: outcome.heartbeat_ttl_seconds,
                interval_override: c.env.get(EnvKey::WorkerHeartbeatIntervalSeconds, &prefix).map(str::to_owned),
            },
        );
        heartbeat.start();
        tracing::info!(%attachment, worker = %outcome.worker_identity, client = %outcome.client_name, "worker attached");
        state.attached.insert(
            attachment,
            Attached {
                worker_identity: outcome.worker_identity,
                fencing_epoch: outcome.fencing_epoch,
                client_name: outcome.client_name,
                session_id: session,
                principal: client.principal.clone(),
                heartbeat,
            },
        );
        Ok(())
    }

    fn on_detach(&self, attachment: AttachmentId, reason: &str) {
        let c = &self.0;
        let attached = c.lock().attached.remove(&attachment);
        let Some(a) = attached else { return };
        a.heartbeat.stop(&format!("detached: {reason}"));
        if let Err(e) = c.store.deregister_worker(&a.worker_identity, c.clock.now()) {
            tracing::warn!("cannot deregister the worker of {attachment}: {e}");
        }
        tracing::info!(%attachment, worker = %a.worker_identity, %reason, "worker detached");
    }

    fn control_tools(&self) -> Vec<Tool> {
        let p = &self.0.config.tool_prefix;
        let ro = || ToolAnnotations::new().read_only(true);
        vec![
            Tool::new(format!("{p}get_runtime_context"), "This server's identity, cohort, revisions, worker heartbeat, provenance, env diagnostics and downstream state.", no_args()).with_annotations(ro()),
            Tool::new(format!("{p}assess_fleet_inventory"), "The fleet inventory: runtime rows checked against this host's own process observation. Takes no evidence.", no_args()).with_annotations(ro()),
            Tool::new(
                format!("{p}resolve_task_capability"),
                "The mutation gate's verdict for one tool, without calling it: allowed, or the blocker and the operator action.",
                schema(json!({
                    "type": "object",
                    "properties": { "tool": { "type": "string", "description": "the tool to evaluate" } },
                    "required": ["tool"],
                    "additionalProperties": false
                })),
            )
            .with_annotations(ro()),
            Tool::new(format!("{p}assess_master_parity"), "This server's startup revision against its checkout's current HEAD.", no_args()).with_annotations(ro()),
        ]
    }

    fn call_control_tool(
        &self,
        attachment: AttachmentId,
        name: &str,
        arguments: Map<String, Value>,
        downstream: &DownstreamStatus,
    ) -> CallToolResult {
        let c = &self.0;
        let short = name.strip_prefix(c.config.tool_prefix.as_str()).unwrap_or(name);
        let refuse_args = |allowed: &[&str]| {
            arguments.keys().find(|k| !allowed.contains(&k.as_str())).map(|k| {
                CallToolResult::structured_error(json!({ "error": format!("{name} takes no argument {k:?}: it accepts no evidence from the caller") }))
            })
        };
        match short {
            "get_runtime_context" => refuse_args(&[])
                .unwrap_or_else(|| CallToolResult::structured(c.runtime_context(attachment, downstream))),
            "assess_fleet_inventory" => refuse_args(&[]).unwrap_or_else(|| {
                let snap = snapshot(&c.config, Ok(&*c.store), c.clock.now(), Some(&c.identity.member.namespace));
                let mut v = serde_json::to_value(&snap.inventory).unwrap_or_default();
                v["summary"] = json!(fleetgate_core::inventory::summarize(&snap.inventory));
                v["runtime_diagnostics"] = json!(snap.diagnostics);
                CallToolResult::structured(v)
            }),
            "resolve_task_capability" => {
                refuse_args(&["tool"]).unwrap_or_else(|| match arguments.get("tool").and_then(Value::as_str) {
                    Some(tool) => {
                        let verdict = c.resolve(attachment, tool, c.known_class(tool));
                        CallToolResult::structured(serde_json::to_value(verdict).unwrap_or_default())
                    }
                    None => {
                        CallToolResult::structured_error(json!({ "error": "the tool argument (a string) is required" }))
                    }
                })
            }
            "assess_master_parity" => refuse_args(&[]).unwrap_or_else(|| CallToolResult::structured(c.parity())),
            _ => CallToolResult::structured_error(json!({ "error": format!("unknown control tool {name}") })),
        }
    }

    fn role_permits(&self, tool: &str) -> bool {
        self.0.config.role_policy(&self.0.identity.member.role).permits(tool)
    }

    fn classify(&self, tool: &Tool) -> ToolClass {
        let hint = tool.annotations.as_ref().and_then(|a| a.read_only_hint);
        let class = match classify_tool(&tool.name, hint, &self.0.config.tools) {
            capability::ToolClass::ReadOnly => ToolClass::ReadOnly,
            capability::ToolClass::Mutating => ToolClass::Mutating,
        };
        self.0.classes.lock().unwrap_or_else(|e| e.into_inner()).insert(tool.name.to_string(), class);
        class
    }

    fn decide(&self, attachment: AttachmentId, tool: &str, class: ToolClass) -> GateDecision {
        let c = &self.0;
        let verdict = c.resolve(attachment, tool, class);
        let (worker, principal) = c
            .lock()
            .attached
            .get(&attachment)
            .map_or((None, None), |a| (Some(a.worker_identity.clone()), a.principal.clone()));
        let receipt = c.auditor.record(AuditEntry {
            id: None,
            at: c.clock.now(),
            profile: c.identity.member.profile.clone(),
            worker_identity: worker,
            tool: tool.to_owned(),
            allowed: verdict.allowed,
            blocker_kind: verdict.blocker_kind.map(|k| k.as_str().to_owned()),
            reasons: verdict.blocked_reasons.clone(),
            principal,
        });
        let mut reasons = verdict.blocked_reasons;
        if let Some(problem) = receipt.problem() {
            reasons.push(problem);
        }
        match verdict.blocker_kind {
            None => GateDecision { allowed: true, blocker_kind: None, reasons, operator_action: None },
            Some(kind) => GateDecision::refuse(kind.as_str(), reasons, verdict.operator_action),
        }
    }

    fn on_shutdown(&self, reason: &str) {
        let c = &self.0;
        let mut state = c.lock();
        if state.shut_down {
            return;
        }
        state.shut_down = true;
        let attached = std::mem::take(&mut state.attached);
        drop(state);
        let (lock, cv) = &*c.wake;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
        let now = c.clock.now();
        for a in attached.into_values() {
            a.heartbeat.stop(&format!("orderly shutdown: {reason}"));
            if let Err(e) = c.store.deregister_worker(&a.worker_identity, now) {
                tracing::warn!("cannot deregister the worker {}: {e}", a.worker_identity);
            }
        }
        if let Err(e) = c.store.mark_runtime_stopped(&c.identity.runtime_id, now) {
            tracing::warn!("cannot mark the runtime row stopped: {e}");
        }
        tracing::info!(%reason, "shut down");
    }
}
