//! The downstream `scripts/conformance` runs behind `fleetgate serve --transport http`: an rmcp
//! stdio MCP server with the fixture tools, resources and prompts the server scenarios of the
//! official conformance suite (`@modelcontextprotocol/conformance`) call — `test_simple_text`,
//! `test://static-text`, `test_simple_prompt` and the rest — answering exactly what each scenario
//! expects. The suite's own reference server is not published on the registries, so this is it.
//!
//! The 2026-07-28 scenarios' tools (results that ask for input, the stateless diagnostics) are in
//! `mrtr.rs`; `burst_progress` is the gateway's own progress-ordering test tool, `ask_many` and
//! `flood_logging` its resource-bound test tools.
//!
//! ```text
//! conformance_fixture        (no arguments: MCP over stdin/stdout until stdin closes)
//! ```
//!
//! Results are written as the protocol's JSON and parsed into rmcp's types, so the fixture says
//! on the wire what the scenario descriptions say, field for field. Exits 0 when the client goes
//! away, 1 with the cause on stderr otherwise.

// Sampling, logging and resources/subscribe are deprecated in rmcp (SEP-2577, 2026-07-28);
// the suite's scenarios exercise exactly them, so the fixture uses them on purpose.
#![allow(deprecated)]

mod mrtr;
mod tasks;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientResult, CompleteRequestParams, CompleteResult,
    CreateMessageRequest, ElicitRequest, GetPromptRequestParams, GetPromptResponse, GetPromptResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, LoggingMessageNotificationParam,
    PaginatedRequestParams, ProgressNotificationParam, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, ServerConfig, ServerRequest, SetLevelRequestParams, SubscribeRequestParams,
    UnsubscribeRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::process::ExitCode;
use std::time::Duration;

/// A 1×1 red PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A 44-byte WAV header with one silent 8-bit sample (8 kHz mono).
const WAV: &str = "UklGRiUAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQEAAACA";

/// Protocol JSON into one of rmcp's types; a mismatch is the fixture's own bug, reported as an
/// internal error rather than a panic.
fn parse<T: DeserializeOwned>(value: Value) -> Result<T, McpError> {
    serde_json::from_value(value).map_err(|e| McpError::internal_error(format!("fixture JSON: {e}"), None))
}

fn no_args() -> Value {
    json!({ "type": "object", "properties": {} })
}

fn string_args(names: &[(&str, &str)]) -> Value {
    let properties: serde_json::Map<String, Value> =
        names.iter().map(|(n, d)| ((*n).to_owned(), json!({ "type": "string", "description": d }))).collect();
    let required: Vec<&str> = names.iter().map(|(n, _)| *n).collect();
    json!({ "type": "object", "properties": properties, "required": required })
}

fn tool(name: &str, description: &str, input_schema: Value) -> Value {
    json!({ "name": name, "description": description, "inputSchema": input_schema })
}

fn tools() -> Value {
    let mut listed = json!({ "tools": [
        tool("test_simple_text", "Returns a simple text response", no_args()),
        tool("test_image_content", "Returns an image", no_args()),
        tool("test_audio_content", "Returns audio", no_args()),
        tool("test_embedded_resource", "Returns an embedded resource", no_args()),
        tool("test_multiple_content_types", "Returns text, an image and a resource", no_args()),
        tool("test_tool_with_logging", "Sends three log notifications while it runs", no_args()),
        tool("test_tool_with_progress", "Reports progress 0, 50, 100 of 100", no_args()),
        tool("test_error_handling", "Always answers a tool error", no_args()),
        tool("test_sampling", "Asks the client to sample an LLM",
             string_args(&[("prompt", "The prompt to send to the LLM")])),
        tool("test_elicitation", "Asks the user for a username and email",
             string_args(&[("message", "The message to show the user")])),
        tool("test_elicitation_sep1034_defaults", "Elicitation with defaults for every primitive type", no_args()),
        tool("test_elicitation_sep1330_enums", "Elicitation with all five enum schema forms", no_args()),
        tool("test_reconnection", "Answers after a short delay (SSE polling scenario)", no_args()),
        tool("test_logging_tool", "Logs only when the request asked for a log level (2026-07-28)", no_args()),
        tool("test_trigger_tool_change", "Sends notifications/tools/list_changed (SEP-2575 subscription streams)",
             no_args()),
        // SEP-2243: `region` is mirrored by the client in the header `Mcp-Param-Region`.
        tool("test_header_routing", "Answers the region it was routed to (an argument mirrored in a header)", json!({
            "type": "object",
            "properties": { "region": { "type": "string", "x-mcp-header": "Region",
                                        "description": "Where the call is routed" } },
            "required": ["region"] })),
        tool("burst_progress", "Sends `count` progress notifications back to back, the first at once and the \
              last right before the answer (the gateway's progress-ordering tests)", json!({
            "type": "object", "properties": { "count": { "type": "integer" } }, "required": ["count"] })),
        tool("ask_many", "Sends `count` roots/list requests to the client at once; reports each refused one as \
              progress carrying the error, and answers how many were answered and refused (the gateway's \
              resource-bound tests)", json!({
            "type": "object", "properties": { "count": { "type": "integer" } }, "required": ["count"] })),
        tool("flood_logging", "Sends `count` log notifications of `size` bytes back to back, then answers \
              (the gateway's resource-bound tests)", json!({
            "type": "object", "properties": { "count": { "type": "integer" }, "size": { "type": "integer" } },
            "required": ["count"] })),
        tool("json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features", json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": { "address": { "$anchor": "addressDef", "type": "object", "properties": {
                "street": { "type": "string" }, "city": { "type": "string" } } } },
            "properties": {
                "name": { "type": "string" },
                "address": { "$ref": "#/$defs/address" },
                "contactMethod": { "type": "string", "enum": ["phone", "email"] },
                "phone": { "type": "string" },
                "email": { "type": "string" }
            },
            "allOf": [{ "anyOf": [{ "required": ["phone"] }, { "required": ["email"] }] }],
            "if": { "properties": { "contactMethod": { "const": "phone" } }, "required": ["contactMethod"] },
            "then": { "required": ["phone"] },
            "else": { "required": ["email"] },
            "additionalProperties": false
        })),
    ]});
    if let Some(all) = listed["tools"].as_array_mut() {
        all.extend(mrtr::tools());
        all.extend(tasks::tools());
    }
    listed
}

fn text(text: &str) -> Value {
    json!({ "type": "text", "text": text })
}

fn image() -> Value {
    json!({ "type": "image", "data": PNG, "mimeType": "image/png" })
}

fn tool_result(content: Value) -> Value {
    json!({ "content": content })
}

/// The elicitation schemas of the SEP-1034 and SEP-1330 scenarios.
fn sep1034_schema() -> Value {
    json!({ "type": "object", "properties": {
        "name": { "type": "string", "default": "John Doe" },
        "age": { "type": "integer", "default": 30 },
        "score": { "type": "number", "default": 95.5 },
        "status": { "type": "string", "enum": ["active", "inactive", "pending"], "default": "active" },
        "verified": { "type": "boolean", "default": true }
    }})
}

fn sep1330_schema() -> Value {
    json!({ "type": "object", "properties": {
        "untitledSingle": { "type": "string", "enum": ["option1", "option2", "option3"] },
        "titledSingle": { "type": "string", "oneOf": [
            { "const": "value1", "title": "First Option" },
            { "const": "value2", "title": "Second Option" },
            { "const": "value3", "title": "Third Option" } ] },
        "legacyEnum": { "type": "string", "enum": ["opt1", "opt2", "opt3"],
                        "enumNames": ["Option One", "Option Two", "Option Three"] },
        "untitledMulti": { "type": "array", "items": { "type": "string", "enum": ["option1", "option2", "option3"] } },
        "titledMulti": { "type": "array", "items": { "anyOf": [
            { "const": "value1", "title": "First Choice" },
            { "const": "value2", "title": "Second Choice" },
            { "const": "value3", "title": "Third Choice" } ] } }
    }})
}

/// The fixture server; stateless (subscriptions are acknowledged, nothing is ever updated).
#[derive(Debug, Clone, Default)]
struct Fixture {
    /// The open `subscriptions/listen` streams of a 2026-07-28 client (the gateway's own,
    /// asked for its clients): where a 2026-07-28 server sends list changes.
    listeners: std::sync::Arc<std::sync::Mutex<Vec<rmcp::service::SubscriptionSink>>>,
    /// SEP-2663 tasks made for a client that declared the extension.
    tasks: tasks::Tasks,
}

impl Fixture {
    async fn elicit(
        &self,
        context: &RequestContext<RoleServer>,
        message: &str,
        schema: Value,
    ) -> Result<Value, McpError> {
        let params = parse(json!({ "mode": "form", "message": message, "requestedSchema": schema }))?;
        let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
        let answer =
            context.peer.send_request(request).await.map_err(|e| McpError::internal_error(e.to_string(), None))?;
        match answer {
            ClientResult::ElicitResult(result) => {
                serde_json::to_value(result).map_err(|e| McpError::internal_error(e.to_string(), None))
            }
            other => Err(McpError::internal_error(format!("unexpected elicitation answer: {other:?}"), None)),
        }
    }

    async fn sample(&self, context: &RequestContext<RoleServer>, prompt: &str) -> Result<String, McpError> {
        let params = parse(json!({
            "messages": [{ "role": "user", "content": { "type": "text", "text": prompt } }],
            "maxTokens": 100
        }))?;
        let request = ServerRequest::CreateMessageRequest(CreateMessageRequest::new(params));
        let answer =
            context.peer.send_request(request).await.map_err(|e| McpError::internal_error(e.to_string(), None))?;
        match answer {
            ClientResult::CreateMessageResult(result) => {
                let value = serde_json::to_value(&result).map_err(|e| McpError::internal_error(e.to_string(), None))?;
                Ok(value["content"]["text"].as_str().map_or_else(|| value["content"].to_string(), str::to_owned))
            }
            other => Err(McpError::internal_error(format!("unexpected sampling answer: {other:?}"), None)),
        }
    }

    async fn log(&self, context: &RequestContext<RoleServer>, message: &str) {
        if let Ok(param) = parse::<LoggingMessageNotificationParam>(json!({ "level": "info", "data": message })) {
            let _ = context.peer.notify_logging_message(param).await;
        }
    }

    async fn run_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<Value, McpError> {
        let arg = |name: &str| {
            request.arguments.as_ref().and_then(|a| a.get(name)).and_then(Value::as_str).unwrap_or_default().to_owned()
        };
        let pause = || tokio::time::sleep(Duration::from_millis(50));
        Ok(match request.name.as_ref() {
            "test_simple_text" => tool_result(json!([text("This is a simple text response for testing.")])),
            "test_image_content" => tool_result(json!([image()])),
            "test_audio_content" => tool_result(json!([{ "type": "audio", "data": WAV, "mimeType": "audio/wav" }])),
            "test_embedded_resource" => tool_result(json!([{ "type": "resource", "resource": {
                "uri": "test://embedded-resource", "mimeType": "text/plain",
                "text": "This is an embedded resource content." } }])),
            "test_multiple_content_types" => tool_result(json!([
                text("Multiple content types test:"),
                image(),
                { "type": "resource", "resource": { "uri": "test://mixed-content-resource",
                  "mimeType": "application/json", "text": "{\"test\":\"data\",\"value\":123}" } }
            ])),
            "test_tool_with_logging" => {
                self.log(&context, "Tool execution started").await;
                pause().await;
                self.log(&context, "Tool processing data").await;
                pause().await;
                self.log(&context, "Tool execution completed").await;
                tool_result(json!([text("Tool with logging executed successfully")]))
            }
            "test_tool_with_progress" => {
                let token = context.meta.get_progress_token().or_else(|| request.meta.as_ref()?.get_progress_token());
                for (step, progress) in [0, 50, 100].into_iter().enumerate() {
                    if step > 0 {
                        pause().await;
                    }
                    if let Some(token) = &token {
                        let param: ProgressNotificationParam =
                            parse(json!({ "progressToken": token, "progress": progress, "total": 100 }))?;
                        let _ = context.peer.notify_progress(param).await;
                    }
                }
                tool_result(json!([text("Tool with progress executed successfully")]))
            }
            "test_error_handling" => json!({ "isError": true,
                "content": [text("This tool intentionally returns an error for testing")] }),
            "test_sampling" => {
                let answer = self.sample(&context, &arg("prompt")).await?;
                tool_result(json!([text(&format!("LLM response: {answer}"))]))
            }
            "test_elicitation" => {
                let schema = json!({ "type": "object", "properties": {
                    "username": { "type": "string", "description": "User's response" },
                    "email": { "type": "string", "description": "User's email address" } },
                    "required": ["username", "email"] });
                let answer = self.elicit(&context, &arg("message"), schema).await?;
                tool_result(json!([text(&format!("User response: {answer}"))]))
            }
            "test_elicitation_sep1034_defaults" | "test_elicitation_sep1330_enums" => {
                let schema = if request.name == "test_elicitation_sep1034_defaults" {
                    sep1034_schema()
                } else {
                    sep1330_schema()
                };
                let answer = self.elicit(&context, "Please review and update the form fields", schema).await?;
                let done = format!("Elicitation completed: action={}, content={}", answer["action"], answer["content"]);
                tool_result(json!([text(&done)]))
            }
            "test_reconnection" => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                tool_result(json!([text("Reconnection test completed")]))
            }
            "json_schema_2020_12_tool" => tool_result(json!([text("JSON Schema 2020-12 tool called")])),
            "burst_progress" => {
                let count = request.arguments.as_ref().and_then(|a| a.get("count")).and_then(Value::as_u64);
                let token = context.meta.get_progress_token();
                for step in 1..=count.unwrap_or(3).min(1000) {
                    if let Some(token) = &token {
                        let param: ProgressNotificationParam =
                            parse(json!({ "progressToken": token, "progress": step }))?;
                        let _ = context.peer.notify_progress(param).await;
                    }
                }
                tool_result(json!([text("burst sent")]))
            }
            "ask_many" => {
                let count = request.arguments.as_ref().and_then(|a| a.get("count")).and_then(Value::as_u64);
                let token = context.meta.get_progress_token();
                let mut asks = tokio::task::JoinSet::new();
                for _ in 0..count.unwrap_or(1).min(5000) {
                    let peer = context.peer.clone();
                    asks.spawn(
                        async move { peer.send_request(ServerRequest::ListRootsRequest(Default::default())).await },
                    );
                }
                let (mut answered, mut refused) = (0_u64, 0_u64);
                while let Some(outcome) = asks.join_next().await {
                    match outcome {
                        Ok(Ok(_)) => answered += 1,
                        Ok(Err(error)) => {
                            refused += 1;
                            if let Some(token) = &token {
                                let param: ProgressNotificationParam = parse(json!({ "progressToken": token,
                                    "progress": refused, "message": format!("refused: {error}") }))?;
                                let _ = context.peer.notify_progress(param).await;
                            }
                        }
                        Err(e) => return Err(McpError::internal_error(e.to_string(), None)),
                    }
                }
                tool_result(json!([text(&format!("answered {answered}, refused {refused}"))]))
            }
            "flood_logging" => {
                let number = |name: &str| request.arguments.as_ref().and_then(|a| a.get(name)).and_then(Value::as_u64);
                let count = number("count").unwrap_or(1).min(100_000);
                let line = "x".repeat(usize::try_from(number("size").unwrap_or(16).min(65_536)).unwrap_or(16));
                for step in 0..count {
                    self.log(&context, &format!("{step} {line}")).await;
                }
                tool_result(json!([text(&format!("flooded {count}"))]))
            }
            "test_trigger_tool_change" => {
                // 2026-07-28: only on the client's subscription streams (none open: none sent);
                // earlier generations: to the session.
                let sent = if context.meta.protocol_version().is_some() {
                    let sinks = self.listeners.lock().map(|l| l.clone()).unwrap_or_default();
                    let mut sent = 0;
                    for sink in sinks {
                        sent += usize::from(sink.notify_tool_list_changed().await.is_ok());
                    }
                    sent
                } else {
                    usize::from(context.peer.notify_tool_list_changed().await.is_ok())
                };
                tool_result(json!([text(&format!("tool list change sent to {sent} stream(s)"))]))
            }
            "test_header_routing" => {
                let region = request.arguments.as_ref().and_then(|a| a.get("region")).and_then(Value::as_str);
                tool_result(json!([text(&format!("routed to {}", region.unwrap_or("nowhere")))]))
            }
            "test_logging_tool" => {
                // 2026-07-28: a server logs only for a request that asked for a level.
                if context.meta.log_level().is_some() {
                    self.log(&context, "test_logging_tool ran").await;
                }
                tool_result(json!([text("Logging tool executed")]))
            }
            other => return Err(McpError::invalid_params(format!("no such tool: {other}"), None)),
        })
    }
}

impl ServerHandler for Fixture {
    fn accepted_subscription_filter(
        &self,
        requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        Some(requested.clone())
    }

    async fn listen(&self, subscription: rmcp::service::SubscriptionContext) -> Result<(), McpError> {
        let sink = subscription.sink().clone();
        if let Ok(mut listeners) = self.listeners.lock() {
            listeners.push(sink.clone());
        }
        subscription.cancelled().await;
        if let Ok(mut listeners) = self.listeners.lock() {
            listeners.retain(|s| s.id() != sink.id());
        }
        Ok(())
    }

    fn get_info(&self) -> ServerConfig {
        let mut info: ServerConfig = parse(json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {
                "tools": { "listChanged": true },
                "resources": { "subscribe": true, "listChanged": false },
                "prompts": { "listChanged": false },
                "completions": {},
                "logging": {},
                "extensions": { "io.modelcontextprotocol/tasks": {} }
            },
            "serverInfo": { "name": "fleetgate-conformance-fixture", "version": env!("CARGO_PKG_VERSION") }
        }))
        .unwrap_or_default();
        if info.server_info.name.is_empty() {
            info.server_info.name = "fleetgate-conformance-fixture".to_owned();
        }
        // `--no-subscribe`: the same server without per-session subscriptions, which a
        // gateway may share between its clients (`[downstream] sharing = "gateway"`).
        if std::env::args().any(|a| a == "--no-subscribe")
            && let Some(resources) = info.capabilities.resources.as_mut()
        {
            resources.subscribe = None;
        }
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        parse(tools())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if tasks::is_task_tool(&request.name) {
            return self.tasks.call(&request, &context).await;
        }
        let answer = match mrtr::call(&request, &context) {
            Some(answer) => answer?,
            None => self.run_tool(request, context).await?,
        };
        if mrtr::is_input_required(&answer) {
            return Ok(CallToolResponse::InputRequired(parse(answer)?));
        }
        let result: CallToolResult = parse(answer)?;
        Ok(result.into())
    }

    async fn get_task(
        &self,
        request: rmcp::model::GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetTaskResult, McpError> {
        self.tasks.get(&request)
    }

    async fn update_task(
        &self,
        request: rmcp::model::UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tasks.update(&request)
    }

    async fn cancel_task(
        &self,
        request: rmcp::model::CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tasks.cancel(&request)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        parse(json!({ "resources": [
            { "uri": "test://static-text", "name": "static-text", "description": "A static text resource",
              "mimeType": "text/plain" },
            { "uri": "test://static-binary", "name": "static-binary", "description": "A static binary resource (PNG)",
              "mimeType": "image/png" },
            { "uri": "test://watched-resource", "name": "watched-resource", "description": "A resource to subscribe to",
              "mimeType": "text/plain" }
        ]}))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        parse(json!({ "resourceTemplates": [
            { "uriTemplate": "test://template/{id}/data", "name": "template-data",
              "description": "Data for an id", "mimeType": "application/json" }
        ]}))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let uri = request.uri.as_str();
        let content = match uri {
            "test://static-text" => {
                json!({ "uri": uri, "mimeType": "text/plain", "text": "This is the content of the static text resource." })
            }
            "test://static-binary" => json!({ "uri": uri, "mimeType": "image/png", "blob": PNG }),
            "test://watched-resource" => {
                json!({ "uri": uri, "mimeType": "text/plain", "text": "Watched resource content" })
            }
            _ => match uri.strip_prefix("test://template/").and_then(|rest| rest.strip_suffix("/data")) {
                Some(id) if !id.is_empty() && !id.contains('/') => json!({
                    "uri": uri, "mimeType": "application/json",
                    "text": json!({ "id": id, "templateTest": true, "data": format!("Data for ID: {id}") }).to_string()
                }),
                _ => {
                    return Err(McpError::resource_not_found(
                        format!("no such resource: {uri}"),
                        Some(json!({ "uri": uri })),
                    ));
                }
            },
        };
        let result: ReadResourceResult = parse(json!({ "contents": [content] }))?;
        Ok(result.into())
    }

    async fn subscribe(
        &self,
        _request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Ok(())
    }

    async fn unsubscribe(
        &self,
        _request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        parse(json!({ "prompts": [
            { "name": "test_simple_prompt", "description": "A prompt without arguments" },
            { "name": "test_prompt_with_arguments", "description": "A prompt with two arguments", "arguments": [
                { "name": "arg1", "description": "First test argument", "required": true },
                { "name": "arg2", "description": "Second test argument", "required": true } ] },
            { "name": "test_prompt_with_embedded_resource", "description": "A prompt embedding a resource",
              "arguments": [ { "name": "resourceUri", "description": "URI of the resource to embed", "required": true } ] },
            { "name": "test_prompt_with_image", "description": "A prompt with an image" },
            mrtr::prompt()
        ]}))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let arg = |name: &str| {
            request.arguments.as_ref().and_then(|a| a.get(name)).and_then(Value::as_str).unwrap_or_default().to_owned()
        };
        if let Some(answer) = mrtr::get_prompt(&request) {
            let answer = answer?;
            if mrtr::is_input_required(&answer) {
                return Ok(GetPromptResponse::InputRequired(parse(answer)?));
            }
            let result: GetPromptResult = parse(answer)?;
            return Ok(result.into());
        }
        let user = |content: Value| json!({ "role": "user", "content": content });
        let messages = match request.name.as_str() {
            "test_simple_prompt" => json!([user(text("This is a simple prompt for testing."))]),
            "test_prompt_with_arguments" => {
                json!([user(text(&format!("Prompt with arguments: arg1='{}', arg2='{}'", arg("arg1"), arg("arg2"))))])
            }
            "test_prompt_with_embedded_resource" => json!([
                user(json!({ "type": "resource", "resource": { "uri": arg("resourceUri"), "mimeType": "text/plain",
                     "text": "Embedded resource content for testing." } })),
                user(text("Please process the embedded resource above."))
            ]),
            "test_prompt_with_image" => json!([user(image()), user(text("Please analyze the image above."))]),
            other => return Err(McpError::invalid_params(format!("no such prompt: {other}"), None)),
        };
        let result: GetPromptResult = parse(json!({ "messages": messages }))?;
        Ok(result.into())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let typed = request.argument.value.to_lowercase();
        let values: Vec<&str> = ["paris", "park", "party"].into_iter().filter(|v| v.starts_with(&typed)).collect();
        parse(json!({ "completion": { "values": values, "total": values.len(), "hasMore": false } }))
    }

    async fn set_level(
        &self,
        _request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Ok(())
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let running = match Fixture::default().serve((tokio::io::stdin(), tokio::io::stdout())).await {
        Ok(running) => running,
        Err(e) => {
            eprintln!("conformance_fixture: {e}");
            return ExitCode::from(1);
        }
    };
    match running.waiting().await {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("conformance_fixture: {e}");
            ExitCode::from(1)
        }
    }
}
