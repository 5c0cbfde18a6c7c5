//! The test control plane: a small, real [`ControlPlane`] for the gateway's integration
//! tests, compiled into the `gateway_fixture` example (the binary the tests drive) by
//! `#[path]`.
//!
//! Its state lives in a directory the test owns, so the test can both steer it and see
//! what the gateway asked of it:
//! * `allow-mutations` — while this file is absent, mutating calls are refused with
//!   `fleet_inventory_blocked`; create it and they are allowed (read-only calls always are);
//! * `events.log` — one line per lifecycle call and decision: `transport_bound`,
//!   `attach NAME VERSION PROTOCOL`, `decide TOOL CLASS allowed|refused`, `detach N REASON`,
//!   `shutdown REASON`, `forwarded TOOL ok|error` (the answer of an allowed call),
//!   `probe TOOL ok|error TEXT` (see `probe`); as the fixture's observer also
//!   `observed restart` and `observed quarantined true|false` (downstream supervision), and
//!   `observed notification dropped to_client|to_downstream` (a full notification queue);
//! * `probe` — while it holds `TOOL {json arguments}`, every `decide` first calls that tool
//!   on the downstream through the call's link, as the PR workflow reads a head.
//!
//! Tools named in `forbidden` are refused with `role_not_permitted` and not listed.
//! Classification: `readOnlyHint: true` is read-only, anything else (no annotations
//! included) is mutating.

use fleetgate_gateway::rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use fleetgate_gateway::{
    AttachmentId, BlockerKind, ClientAttach, ControlCall, ControlPlane, DownstreamRead, GateDecision, GatewayObserver,
    Listing, ToolCall, ToolClass, Verdict,
};
use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

/// The name of the control tool the policy serves.
pub const RUNTIME_CONTEXT_TOOL: &str = "fleet_get_runtime_context";

/// The test policy.
#[derive(Debug)]
pub struct TestPolicy {
    /// The directory of `allow-mutations` and `events.log`.
    dir: PathBuf,
    /// Tools the role may not call.
    forbidden: BTreeSet<String>,
    /// `events.log`, opened once in append mode: each line is one `write(2)`, visible to
    /// the test at once, and a decision costs no `open(2)`.
    events: Mutex<File>,
}

impl TestPolicy {
    /// A policy keeping its state in `dir`, refusing `forbidden` tools.
    pub fn new(dir: PathBuf, forbidden: BTreeSet<String>) -> std::io::Result<Self> {
        let events = OpenOptions::new().create(true).append(true).open(dir.join("events.log"))?;
        Ok(Self { dir, forbidden, events: Mutex::new(events) })
    }

    fn log(&self, line: &str) {
        let mut file = self.events.lock().unwrap_or_else(PoisonError::into_inner);
        file.write_all(format!("{line}\n").as_bytes()).expect("append to events.log");
    }

    fn mutations_allowed(&self) -> bool {
        self.dir.join("allow-mutations").exists()
    }
}

/// `readOnlyHint: true` is read-only; anything else, no annotations included, is mutating.
fn classify(tool: &Tool) -> ToolClass {
    match tool.annotations.as_ref().and_then(|a| a.read_only_hint) {
        Some(true) => ToolClass::ReadOnly,
        _ => ToolClass::Mutating,
    }
}

impl ControlPlane for TestPolicy {
    fn on_transport_bound(&self) -> Result<(), fleetgate_gateway::ControlError> {
        self.log("transport_bound");
        Ok(())
    }

    fn on_client_attach(
        &self,
        _attachment: AttachmentId,
        client: &ClientAttach,
    ) -> Result<(), fleetgate_gateway::ControlError> {
        self.log(&format!("attach {} {} {}", client.client_name, client.client_version, client.protocol_version));
        Ok(())
    }

    fn on_detach(&self, attachment: AttachmentId, reason: &str) {
        self.log(&format!("detach {} {reason}", attachment.0));
    }

    fn control_tools(&self) -> Vec<Tool> {
        let mut schema = JsonObject::new();
        schema.insert("type".to_owned(), "object".into());
        let mut annotations = ToolAnnotations::default();
        annotations.read_only_hint = Some(true);
        let mut tool = Tool::default();
        tool.name = RUNTIME_CONTEXT_TOOL.into();
        tool.description = Some("The gateway's runtime context (test policy).".into());
        tool.input_schema = Arc::new(schema);
        tool.annotations = Some(annotations);
        vec![tool]
    }

    fn call_control_tool(&self, call: ControlCall<'_>) -> CallToolResult {
        let body = serde_json::json!({
            "tool": call.name,
            "downstream": call.downstream.to_json(),
            "mutations_allowed": self.mutations_allowed(),
        });
        CallToolResult::success(vec![ContentBlock::text(body.to_string())])
    }

    fn list_tool(&self, tool: &Tool) -> Listing {
        Listing {
            visible: !self.forbidden.contains(tool.name.as_ref()),
            class: classify(tool),
            meta: JsonObject::new(),
        }
    }

    fn reads(&self, _attachment: AttachmentId, _call: &ToolCall<'_>) -> Vec<DownstreamRead> {
        let Ok(probe) = std::fs::read_to_string(self.dir.join("probe")) else { return Vec::new() };
        let (tool, args) = probe.trim().split_once(' ').unwrap_or((probe.trim(), "{}"));
        let arguments: JsonObject = serde_json::from_str(args).expect("probe arguments are a JSON object");
        vec![DownstreamRead { tool: tool.to_owned(), arguments }]
    }

    fn decide(&self, _attachment: AttachmentId, call: &ToolCall<'_>) -> Verdict {
        // The reads asked for in `reads`, made by the gateway before deciding.
        for made in call.answers {
            let tool = &made.read.tool;
            let line = match &made.answer {
                Ok(result) => {
                    let text: Vec<String> =
                        result.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect();
                    format!("probe {tool} ok {}", text.join(" ").replace('\n', " "))
                }
                Err(why) => format!("probe {tool} error {why}"),
            };
            self.log(&line);
        }
        let (tool, class) = (call.tool.name.as_ref(), classify(call.tool));
        let decision = if self.forbidden.contains(tool) {
            GateDecision::refuse(
                BlockerKind::RoleNotPermitted,
                vec![format!("the test role may not call `{tool}`")],
                Some("hand the task to the role that owns it".to_owned()),
            )
        } else if class == ToolClass::Mutating && !self.mutations_allowed() {
            GateDecision::refuse(
                BlockerKind::FleetInventoryBlocked,
                vec!["test policy: mutations are held until allow-mutations exists".to_owned()],
                Some(format!("create {}", self.dir.join("allow-mutations").display())),
            )
        } else {
            GateDecision::allow()
        };
        let verdict = if decision.allowed { "allowed" } else { "refused" };
        self.log(&format!("decide {tool} {class} {verdict}"));
        // Every call's answer is logged (`forwarded …`), so every allowed call settles — but
        // the conformance fixture's task tools, as the real control plane settles only the
        // workflow's calls, unless the test says otherwise (`settle-all`).
        let task_tool = matches!(tool, "slow_compute" | "failing_job" | "protocol_error_job");
        let settles = (!task_tool || self.dir.join("settle-all").exists()).then(|| "logged".to_owned());
        Verdict { class, decision, settles, forward: None, held: None, perform: None }
    }

    fn on_forwarded(&self, _attachment: AttachmentId, call: &ToolCall<'_>, result: &CallToolResult) {
        let outcome = if result.is_error == Some(true) { "error" } else { "ok" };
        self.log(&format!("forwarded {} {outcome}", call.tool.name));
    }

    fn on_shutdown(&self, reason: &str) {
        self.log(&format!("shutdown {reason}"));
    }
}

/// The fixture's observer: the downstream's restarts and quarantines, in `events.log`.
impl GatewayObserver for TestPolicy {
    fn downstream_restarted(&self) {
        self.log("observed restart");
    }

    fn downstream_quarantined(&self, quarantined: bool) {
        self.log(&format!("observed quarantined {quarantined}"));
    }

    fn notification_dropped(&self, direction: &'static str) {
        self.log(&format!("observed notification dropped {direction}"));
    }
}
