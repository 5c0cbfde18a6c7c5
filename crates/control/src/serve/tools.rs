//! The control tools a gateway serves, named with the fleet's tool prefix:
//! `…get_runtime_context`, `…assess_fleet_inventory`, `…resolve_task_capability`,
//! `…assess_master_parity`, and the PR workflow's `…claim_pr_lease`, `…release_pr_lease`,
//! `…list_pr_leases`, `…assess_pr` (`serve::workflow`). All are read-only towards the
//! forge; the claim and the release change fleetgate's own lease table, so they are not
//! annotated read-only. Their arguments and answers are serde structs (the wire
//! shapes); their input schemas are derived from the argument structs. None takes evidence
//! from the caller: an argument a tool does not declare is refused.

use super::plane::FleetControl;
use super::workflow;
use crate::gate::{Call, Caller};
use fleetgate_core::diagnostics::stale_runtime_diagnostic;
use fleetgate_core::env::{UnsupportedOverride, unconsumed_env_overrides};
use fleetgate_core::runtime::CohortSource;
use fleetgate_gateway::rmcp::model::{CallToolResult, Tool, ToolAnnotations};
use fleetgate_gateway::{AttachmentId, ControlCall};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::path::PathBuf;
use std::sync::Arc;

/// A tool that takes no arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

/// `…resolve_task_capability`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ResolveArgs {
    /// The tool to evaluate.
    tool: String,
    /// The call's arguments, when the verdict may depend on them.
    #[serde(default)]
    arguments: Option<Map<String, Value>>,
}

/// `…assess_master_parity`'s answer.
#[derive(Debug, Serialize)]
struct Parity {
    startup_head: Option<String>,
    current_head: Option<String>,
    current_head_error: Option<String>,
    parity: Option<bool>,
    diagnostic: Option<fleetgate_core::diagnostics::Diagnostic>,
    read_only: bool,
}

/// `…get_runtime_context`'s `env_diagnostics`.
#[derive(Debug, Serialize)]
struct EnvDiagnostics<'a> {
    env_prefix: &'a str,
    unsupported: Vec<UnsupportedOverride>,
}

/// `…get_runtime_context`'s `store_health`: whether the store's location still names the
/// store this process opened; when not, the blocker every mutating call gets and the fix.
#[derive(Debug, Serialize)]
struct StoreHealth {
    ok: bool,
    blocker_kind: Option<fleetgate_core::BlockerKind>,
    reason: Option<String>,
    operator_action: Option<&'static str>,
}

impl StoreHealth {
    fn of(store: &dyn fleetgate_store::Store) -> Self {
        match store.check_location() {
            Ok(()) => Self { ok: true, blocker_kind: None, reason: None, operator_action: None },
            Err(e) => Self {
                ok: false,
                blocker_kind: Some(fleetgate_core::BlockerKind::StoreReplaced),
                reason: Some(e.to_string()),
                operator_action: Some(fleetgate_core::capability::STORE_REPLACED_ACTION),
            },
        }
    }
}

/// `…get_runtime_context`'s answer.
#[derive(Debug, Serialize)]
struct RuntimeContext<'a> {
    namespace: &'a str,
    profile: &'a str,
    role: &'a str,
    pid: i64,
    runtime_id: &'a str,
    boot_id: &'a str,
    transport: &'a str,
    attachment: u64,
    attachments: usize,
    cohort_id: Option<&'a str>,
    cohort_source: CohortSource,
    repository_root: Option<&'a PathBuf>,
    startup_head: Option<&'a str>,
    current_head: Option<String>,
    worker: Option<super::attachments::WorkerView>,
    worker_attach_error: Option<String>,
    worker_heartbeat: crate::heartbeat::HeartbeatStatus,
    provenance: fleetgate_core::provenance::Provenance,
    env_diagnostics: EnvDiagnostics<'a>,
    downstream: Value,
    tool_changes: Vec<Value>,
    store: String,
    store_health: StoreHealth,
    read_only: bool,
}

/// The four tools' definitions, with `prefix`.
pub fn definitions(prefix: &str) -> Vec<Tool> {
    fn writer<A: JsonSchema>(name: String, description: &str) -> Tool {
        let schema = serde_json::to_value(schemars::schema_for!(A)).unwrap_or_else(|_| json!({ "type": "object" }));
        let mut schema = schema.as_object().cloned().unwrap_or_default();
        schema.remove("$schema");
        schema.remove("title");
        Tool::new(name, description.to_owned(), Arc::new(schema))
            .with_annotations(ToolAnnotations::new().read_only(false).destructive(false))
    }
    fn tool<A: JsonSchema>(name: String, description: &str) -> Tool {
        let t = writer::<A>(name, description);
        t.with_annotations(ToolAnnotations::new().read_only(true))
    }
    vec![
        tool::<NoArgs>(
            format!("{prefix}get_runtime_context"),
            "This server's identity, cohort, revisions, worker heartbeat, provenance, env diagnostics and downstream state.",
        ),
        tool::<NoArgs>(
            format!("{prefix}assess_fleet_inventory"),
            "The fleet inventory: runtime rows checked against this host's own process observation. Takes no evidence.",
        ),
        tool::<ResolveArgs>(
            format!("{prefix}resolve_task_capability"),
            "The mutation gate's verdict for one tool (and optionally its arguments), without calling it: allowed, or \
             the blocker and the operator action.",
        ),
        tool::<NoArgs>(
            format!("{prefix}assess_master_parity"),
            "This server's startup revision against its checkout's current HEAD.",
        ),
        writer::<workflow::ClaimArgs>(
            format!("{prefix}claim_pr_lease"),
            "Claim a review or merge lease on a pull request at its current head (read from the forge). Review \
             decisions and merges are only forwarded under a live lease at the PR's current head.",
        ),
        writer::<workflow::IssueArgs>(
            format!("{prefix}claim_issue_lease"),
            "Claim the issue lock of an issue (authors): while it is live, another author's PR referencing the \
             issue (#N) is refused. Released with release_pr_lease; expires like a PR lease.",
        ),
        writer::<workflow::ReleaseArgs>(
            format!("{prefix}release_pr_lease"),
            "Release a PR lease (or an issue lock) this session holds.",
        ),
        tool::<NoArgs>(format!("{prefix}list_pr_leases"), "The fleet's live PR leases."),
        tool::<workflow::PrArgs>(
            format!("{prefix}assess_pr"),
            "A pull request's live leases, its decisions at the current head and earlier ones, and what a merge \
             at the current head still needs.",
        ),
    ]
}

fn error(text: String) -> CallToolResult {
    CallToolResult::structured_error(json!({ "error": text }))
}

fn answer(value: &impl Serialize) -> CallToolResult {
    match serde_json::to_value(value) {
        Ok(v) => CallToolResult::structured(v),
        Err(e) => error(format!("cannot encode the answer: {e}")),
    }
}

/// The arguments as `A`, or the refusal naming what is wrong: an undeclared argument is
/// evidence the caller may not give.
fn args<A: DeserializeOwned>(
    name: &str,
    arguments: Map<String, Value>,
    declared: &[&str],
) -> Result<A, CallToolResult> {
    if let Some(k) = arguments.keys().find(|k| !declared.contains(&k.as_str())) {
        return Err(error(format!("{name} takes no argument {k:?}: it accepts no evidence from the caller")));
    }
    serde_json::from_value(Value::Object(arguments)).map_err(|e| error(format!("{name}: invalid arguments: {e}")))
}

/// Answer one control-tool call.
pub fn call(plane: &FleetControl, call: ControlCall<'_>) -> CallToolResult {
    let prefix = &plane.config().tool_prefix;
    let short = call.name.strip_prefix(prefix.as_str()).unwrap_or(call.name);
    let name = call.name;
    match short {
        "get_runtime_context" => match args::<NoArgs>(name, call.arguments, &[]) {
            Ok(_) => runtime_context(plane, call.attachment, call.downstream),
            Err(refused) => refused,
        },
        "assess_fleet_inventory" => match args::<NoArgs>(name, call.arguments, &[]) {
            Ok(_) => {
                let snap = plane.gate().snapshot(plane.now(), Some(&plane.identity().member.namespace));
                let mut v = serde_json::to_value(&snap.inventory).unwrap_or_default();
                v["summary"] = json!(fleetgate_core::inventory::summarize(&snap.inventory));
                v["runtime_diagnostics"] = json!(snap.diagnostics);
                v["tool_changes"] = json!(crate::pins::changes(&**plane.gate().store(), None));
                CallToolResult::structured(v)
            }
            Err(refused) => refused,
        },
        "resolve_task_capability" => match args::<ResolveArgs>(name, call.arguments, &["tool", "arguments"]) {
            Ok(resolve) => {
                let known = (call.known_tool)(&resolve.tool);
                let hint = known.as_ref().and_then(|t| t.annotations.as_ref().and_then(|a| a.read_only_hint));
                let worker = plane.attachments().worker_of(call.attachment);
                let forge = call.link.map(super::workflow::LinkForge);
                let caller = plane.caller(call.attachment, worker.as_ref());
                let verdict = plane.gate().resolve(
                    &Call {
                        member: &plane.identity().member,
                        tool: &resolve.tool,
                        read_only_hint: hint,
                        arguments: resolve.arguments.as_ref(),
                        schema: known.as_ref().map(|t| &*t.input_schema),
                        caller,
                        forge: forge.as_ref().map(|f| f as _),
                        schemas: Some(&super::workflow::Listed(call.known_tool)),
                    },
                    plane.now(),
                );
                answer(&verdict)
            }
            Err(refused) => refused,
        },
        "assess_master_parity" => match args::<NoArgs>(name, call.arguments, &[]) {
            Ok(_) => answer(&parity(plane)),
            Err(refused) => refused,
        },
        "claim_pr_lease" => {
            match args::<workflow::ClaimArgs>(name, call.arguments, &["pr", "head", "purpose", "owner", "repo"]) {
                Ok(claim) => {
                    workflow::claim(plane, call.attachment, call.link, &workflow::Listed(call.known_tool), claim)
                }
                Err(refused) => refused,
            }
        }
        "claim_issue_lease" => match args::<workflow::IssueArgs>(name, call.arguments, &["issue", "owner", "repo"]) {
            Ok(issue) => workflow::claim_issue(plane, call.attachment, issue),
            Err(refused) => refused,
        },
        "release_pr_lease" => match args::<workflow::ReleaseArgs>(name, call.arguments, &["lease_id"]) {
            Ok(release) => workflow::release(plane, call.attachment, release),
            Err(refused) => refused,
        },
        "list_pr_leases" => match args::<NoArgs>(name, call.arguments, &[]) {
            Ok(_) => workflow::list(plane),
            Err(refused) => refused,
        },
        "assess_pr" => match args::<workflow::PrArgs>(name, call.arguments, &["pr", "owner", "repo"]) {
            Ok(pr) => workflow::assess(plane, call.link, &workflow::Listed(call.known_tool), pr),
            Err(refused) => refused,
        },
        _ => error(format!("unknown control tool {name}")),
    }
}

/// The control tools that read the forge through the attachment's downstream.
pub(crate) const READS_THE_FORGE: [&str; 3] = ["resolve_task_capability", "claim_pr_lease", "assess_pr"];

/// Why the checkout's current head is not known.
#[derive(Debug, thiserror::Error)]
enum HeadUnknown {
    #[error("no repository root is configured")]
    NoRoot,
    #[error(transparent)]
    Unread(#[from] fleetgate_host::HostError),
}

fn current_head(plane: &FleetControl) -> Result<String, HeadUnknown> {
    match &plane.identity().repo_root {
        Some(root) => Ok(plane.gate().observer().head(root)?),
        None => Err(HeadUnknown::NoRoot),
    }
}

fn parity(plane: &FleetControl) -> Parity {
    let id = plane.identity();
    let current = current_head(plane);
    let (parity, diagnostic) = match (&id.startup_head, &current) {
        (Some(s), Ok(c)) => (Some(s == c), stale_runtime_diagnostic(&id.member.namespace, id.pid, s, c)),
        _ => (None, None),
    };
    let (current_head, current_head_error) = match current {
        Ok(head) => (Some(head), None),
        Err(why) => (None, Some(why.to_string())),
    };
    Parity {
        startup_head: id.startup_head.clone(),
        current_head,
        current_head_error,
        parity,
        diagnostic,
        read_only: true,
    }
}

fn runtime_context(
    plane: &FleetControl,
    attachment: AttachmentId,
    downstream: &fleetgate_gateway::DownstreamStatus,
) -> CallToolResult {
    let id = plane.identity();
    let config = plane.config();
    let generation = plane.generation();
    let view = plane.attachments().view(attachment, generation);
    let caller = match &view.worker {
        Some(w) => Caller::Worker {
            identity: &w.worker_identity,
            generation: Some(if w.shared { super::attachments::SHARED_GENERATION } else { generation }),
            principal: None,
            served_by: w.shared.then_some(id.pid),
        },
        None => Caller::Nobody(format!("no worker is attached to this gateway for {attachment}")),
    };
    let gate = plane.gate();
    let provenance =
        crate::gate::session_provenance(&**gate.store(), gate.observer(), &caller, &config.env_prefix, plane.now());
    answer(&RuntimeContext {
        namespace: &id.member.namespace,
        profile: &id.member.profile,
        role: &id.member.role,
        pid: id.pid,
        runtime_id: &id.runtime_id,
        boot_id: &id.boot_id,
        transport: plane.transport().as_str(),
        attachment: attachment.0,
        attachments: view.attachments,
        cohort_id: id.cohort.cohort_id.as_deref(),
        cohort_source: id.cohort.cohort_source,
        repository_root: id.repo_root.as_ref(),
        startup_head: id.startup_head.as_deref(),
        current_head: current_head(plane).ok(),
        worker: view.worker.clone(),
        worker_attach_error: view.attach_error.clone(),
        worker_heartbeat: view.heartbeat.clone(),
        provenance,
        env_diagnostics: EnvDiagnostics {
            env_prefix: &config.env_prefix,
            unsupported: unconsumed_env_overrides(plane.env(), &config.env_prefix, &config.pass_through_env),
        },
        downstream: downstream.to_json(),
        tool_changes: crate::pins::changes(&**gate.store(), Some(&id.member.profile)),
        store: gate.store().describe(),
        store_health: StoreHealth::of(&**gate.store()),
        read_only: true,
    })
}
