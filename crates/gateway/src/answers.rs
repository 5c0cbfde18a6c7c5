//! The gateway's own answers, as the wire wants them: the classification annotations on
//! listed tools, the refusal and unavailability texts, what is advertised while the
//! downstream is down, and the shape of a result for the client's protocol generation.

use crate::control::{DownstreamState, DownstreamStatus, GateDecision, ToolClass};
use rmcp::ErrorData;
use rmcp::model::{
    CallToolResult, ContentBlock, JsonObject, MetaObject, PromptsCapability, ProtocolVersion, RequestMetaObject,
    ResourcesCapability, ResultType, ServerCapabilities, ServerResult, Tool,
};

/// The `_meta` key carrying a downstream tool's classification in `tools/list`.
pub const CLASSIFICATION_META_KEY: &str = "fleetgate/classification";

/// The blocker literal of a downstream tool called while the downstream is not serving.
pub const DOWNSTREAM_UNAVAILABLE: &str = "downstream_unavailable";

/// The blocker literal of a forwarded call the downstream did not answer in time.
pub const DOWNSTREAM_TIMEOUT: &str = "downstream_timeout";

/// The version answered to `initialize`: the client's when rmcp knows it and it still has
/// a handshake, else the newest handshake version (rmcp applies the same rule to the
/// answer; this is computed here too, for [`crate::ClientAttach`]).
pub(crate) fn negotiate(requested: &ProtocolVersion) -> ProtocolVersion {
    if requested.has_initialize() && ProtocolVersion::KNOWN_VERSIONS.contains(requested) {
        requested.clone()
    } else {
        ProtocolVersion::LATEST_WITH_INITIALIZE
    }
}

/// Add the classification to a downstream tool: `readOnlyHint` is set to what the gate
/// will treat it as (a mutating tool also gets `destructiveHint` unless it has one), and
/// `_meta["fleetgate/classification"]` says `read_only` or `mutating`.
pub(crate) fn annotate(mut tool: Tool, class: ToolClass, extra: JsonObject) -> Tool {
    let mut annotations = tool.annotations.take().unwrap_or_default();
    match class {
        ToolClass::ReadOnly => {
            annotations.read_only_hint = Some(true);
            annotations.destructive_hint = Some(false);
        }
        ToolClass::Mutating => {
            annotations.read_only_hint = Some(false);
            annotations.destructive_hint.get_or_insert(true);
        }
    }
    tool.annotations = Some(annotations);
    let meta = tool.meta.get_or_insert_with(MetaObject::default);
    meta.0.extend(extra);
    meta.0.insert(CLASSIFICATION_META_KEY.to_owned(), class.as_str().into());
    tool
}

/// The tool result of a refused call: text starting with the blocker literal, then the
/// reasons and the operator action; the decision also as `_meta["fleetgate/gate"]`.
pub(crate) fn refusal(tool: &str, class: ToolClass, decision: &GateDecision) -> CallToolResult {
    let kind = decision.blocker_kind.map_or("mutation_refused", |k| k.as_str());
    let mut text = format!("{kind}: `{tool}` ({class}) was refused by the fleet's mutation gate.");
    if !decision.reasons.is_empty() {
        text.push_str("\nreasons:");
        for reason in &decision.reasons {
            text.push_str("\n- ");
            text.push_str(reason);
        }
    }
    if let Some(action) = &decision.operator_action {
        text.push_str("\noperator action: ");
        text.push_str(action);
    }
    let mut result = CallToolResult::error(vec![ContentBlock::text(text)]);
    let mut meta = MetaObject::default();
    meta.0.insert(
        "fleetgate/gate".to_owned(),
        serde_json::json!({
            "allowed": false,
            "blocker_kind": kind,
            "reasons": decision.reasons,
            "operator_action": decision.operator_action,
            "tool": tool,
            "classification": class.as_str(),
        }),
    );
    result.meta = Some(meta);
    result
}

/// Why a downstream tool or method cannot be reached now, starting with
/// [`DOWNSTREAM_UNAVAILABLE`].
pub(crate) fn unavailable_text(what: &str, status: &DownstreamStatus) -> String {
    let state = match &status.state {
        DownstreamState::Absent => "is not configured".to_owned(),
        DownstreamState::Starting => "is starting (its MCP handshake has not finished)".to_owned(),
        DownstreamState::Running => "lost its connection".to_owned(),
        DownstreamState::Restarting { retry_in } => {
            format!("is restarting after a failure; next attempt in {:.1} s", retry_in.as_secs_f64())
        }
        DownstreamState::Quarantined { until, retry_in } => format!(
            "is quarantined after repeated failures; retry in {:.1} s (at {})",
            retry_in.as_secs_f64(),
            crate::timefmt::utc(*until)
        ),
        DownstreamState::Stopped => "has stopped".to_owned(),
    };
    let mut text = format!("{DOWNSTREAM_UNAVAILABLE}: {what} cannot be served: the downstream MCP server {state}.");
    text.push_str(&format!("\nrestarts: {}", status.restarts));
    if let Some(exit) = &status.last_exit {
        text.push_str(&format!("\nlast exit: {exit}"));
    }
    text.push_str("\nThe gateway's control tools still answer.");
    text
}

pub(crate) fn unknown_tool(name: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!("unknown tool `{name}`: neither a control tool nor a tool of the downstream server"),
        Some(serde_json::json!({ "tool": name })),
    )
}

/// The client's `_meta` minus what is the gateway's own business on the downstream
/// connection: the progress token (rmcp picks one per request; progress is translated
/// back) and the protocol version (the connection's own). On a connection opened with
/// `initialize` the other lifecycle keys go too (the downstream session was initialised);
/// on a 2026-07-28 connection the client's per-request capabilities and log level are
/// the downstream's to read, and pass.
pub(crate) fn forwardable_meta(meta: &RequestMetaObject, stateless_era: bool) -> RequestMetaObject {
    const PER_REQUEST: &[&str] = &["io.modelcontextprotocol/clientCapabilities", "io.modelcontextprotocol/logLevel"];
    let mut meta = meta.clone();
    meta.0.0.retain(|key, _| {
        key != "progressToken"
            && (!key.starts_with("io.modelcontextprotocol/") || (stateless_era && PER_REQUEST.contains(&key.as_str())))
    });
    meta
}

/// What the gateway advertises while it does not know the downstream's capabilities (it
/// is down at `initialize`): everything that may be forwarded, so a downstream that comes
/// back later is not cut off; a method it lacks answers its own error.
pub(crate) fn superset_capabilities() -> ServerCapabilities {
    let mut capabilities = ServerCapabilities::default();
    capabilities.logging = Some(JsonObject::new());
    capabilities.completions = Some(JsonObject::new());
    let mut prompts = PromptsCapability::default();
    prompts.list_changed = Some(true);
    capabilities.prompts = Some(prompts);
    let mut resources = ResourcesCapability::default();
    resources.subscribe = Some(true);
    resources.list_changed = Some(true);
    capabilities.resources = Some(resources);
    capabilities
}

/// Shape a result for the client's protocol generation, as rmcp's own server handler does
/// for its results: a 2026-07-28 client gets `resultType` (a downstream on an older
/// generation never sends it) and the caching hints; an older client gets neither, nor
/// non-object tool output.
pub(crate) fn shape_result(result: &mut ServerResult, stateless_era: bool) {
    if stateless_era {
        let result_type = match result {
            ServerResult::CompleteResult(r) => &mut r.result_type,
            ServerResult::GetPromptResult(r) => &mut r.result_type,
            ServerResult::ListPromptsResult(r) => &mut r.result_type,
            ServerResult::ListResourcesResult(r) => &mut r.result_type,
            ServerResult::ListResourceTemplatesResult(r) => &mut r.result_type,
            ServerResult::ReadResourceResult(r) => &mut r.result_type,
            ServerResult::ListToolsResult(r) => &mut r.result_type,
            ServerResult::CallToolResult(r) => &mut r.result_type,
            _ => {
                result.fill_missing_cache_hints();
                return;
            }
        };
        result_type.get_or_insert(ResultType::COMPLETE);
        result.fill_missing_cache_hints();
    } else {
        result.strip_result_type_for_legacy_peer();
        result.strip_non_object_output_for_legacy_peer();
    }
}

#[cfg(test)]
mod tests {
    use super::{annotate, negotiate, refusal};
    use crate::control::{GateDecision, ToolClass};
    use rmcp::model::{ProtocolVersion, Tool};

    #[test]
    fn refusal_text_starts_with_the_blocker_and_names_reasons_and_action() {
        let decision = GateDecision::refuse(
            crate::control::BlockerKind::FleetInventoryBlocked,
            vec!["gitea-merger is missing".to_owned()],
            Some("start the merger".to_owned()),
        );
        let result = refusal("git_add", ToolClass::Mutating, &decision);
        assert_eq!(result.is_error, Some(true));
        let text = serde_json::to_value(&result.content).unwrap()[0]["text"].as_str().unwrap().to_owned();
        assert!(text.starts_with("fleet_inventory_blocked: `git_add` (mutating)"), "{text}");
        assert!(text.contains("- gitea-merger is missing"), "{text}");
        assert!(text.ends_with("operator action: start the merger"), "{text}");
    }

    #[test]
    fn annotation_overrides_the_hint_and_records_the_class() {
        let tool = annotate(Tool::default(), ToolClass::Mutating, Default::default());
        let json = serde_json::to_value(&tool).unwrap();
        assert_eq!(json["annotations"]["readOnlyHint"], false);
        assert_eq!(json["annotations"]["destructiveHint"], true);
        assert_eq!(json["_meta"]["fleetgate/classification"], "mutating");
        let json = serde_json::to_value(annotate(Tool::default(), ToolClass::ReadOnly, Default::default())).unwrap();
        assert_eq!(json["annotations"]["readOnlyHint"], true);
        assert_eq!(json["_meta"]["fleetgate/classification"], "read_only");
    }

    #[test]
    fn negotiation_echoes_known_handshake_versions_only() {
        assert_eq!(negotiate(&ProtocolVersion::V_2025_03_26), ProtocolVersion::V_2025_03_26);
        assert_eq!(negotiate(&ProtocolVersion::V_2026_07_28), ProtocolVersion::V_2025_11_25);
        let unknown: ProtocolVersion = serde_json::from_str("\"2099-01-01\"").unwrap();
        assert_eq!(negotiate(&unknown), ProtocolVersion::V_2025_11_25);
    }
}
