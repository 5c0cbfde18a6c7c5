//! SEP-2663 Tasks in the fixture: the tools the suite's task scenarios call, and a task store.
//! A task-supporting tool called by a client that declared the extension (for the session or
//! in the request's `_meta`) becomes a task: the call is answered at once with its handle, the
//! work runs in the background, and `tasks/get` reports it (its result inlined once done);
//! `tasks/cancel` settles a running task as cancelled. Without the extension the same tool
//! runs to completion and answers a plain result.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, CreateTaskResult, DetailedTask,
    GetTaskParams, GetTaskResult, JsonObject, Task, TaskPayload, TaskStatus,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a task stays readable after it is made (milliseconds).
const TTL_MS: u64 = 60_000;

/// The tools of the task scenarios: name, description, input schema.
pub fn tools() -> Vec<Value> {
    let schema = |props: Value| json!({ "type": "object", "properties": props });
    vec![
        json!({ "name": "greet", "description": "Says hello (synchronous only)",
                "inputSchema": schema(json!({ "name": { "type": "string" } })) }),
        json!({ "name": "slow_compute", "description": "Sleeps `seconds`, then answers (task-supporting)",
                "inputSchema": schema(json!({ "seconds": { "type": "number" }, "label": { "type": "string" } })),
                "execution": { "taskSupport": "optional" } }),
        json!({ "name": "failing_job", "description": "Reports a tool error after a moment (a task only)",
                "inputSchema": schema(json!({})), "execution": { "taskSupport": "required" } }),
        json!({ "name": "protocol_error_job", "description": "Fails with a protocol error (task-supporting)",
                "inputSchema": schema(json!({})), "execution": { "taskSupport": "optional" } }),
        json!({ "name": "confirm_delete", "description": "Asks the user to confirm, then deletes (task-supporting)",
                "inputSchema": schema(json!({ "path": { "type": "string" } })),
                "execution": { "taskSupport": "optional" } }),
        json!({ "name": "multi_input", "description": "Asks two questions at once (task-supporting)",
                "inputSchema": schema(json!({})), "execution": { "taskSupport": "optional" } }),
        json!({ "name": "test_tool_with_task", "description": "Asks the user's name, then works on as a task",
                "inputSchema": schema(json!({})), "execution": { "taskSupport": "required" } }),
    ]
}

fn elicit(message: &str, field: &str) -> Value {
    json!({ "method": "elicitation/create", "params": { "mode": "form", "message": message,
        "requestedSchema": { "type": "object", "properties": { field: { "type": "string" } }, "required": [field] } } })
}

/// The questions a task tool parks on before it can finish (none: it just runs).
fn questions(name: &str) -> BTreeMap<String, Value> {
    let mut asked = BTreeMap::new();
    match name {
        "confirm_delete" => {
            asked.insert("confirm".to_owned(), elicit("Really delete it?", "confirm"));
        }
        "multi_input" => {
            asked.insert("first".to_owned(), elicit("First question?", "answer"));
            asked.insert("second".to_owned(), elicit("Second question?", "answer"));
        }
        _ => {}
    }
    asked
}

/// Whether `name` is one of these tools.
pub fn is_task_tool(name: &str) -> bool {
    matches!(
        name,
        "greet"
            | "slow_compute"
            | "failing_job"
            | "protocol_error_job"
            | "confirm_delete"
            | "multi_input"
            | "test_tool_with_task"
    )
}

/// The store: every task this fixture made, by id.
#[derive(Clone, Debug, Default)]
pub struct Tasks {
    by_id: Arc<Mutex<HashMap<String, DetailedTask>>>,
    /// A parked task's questions still open, and the answers given so far.
    parked: Arc<Mutex<HashMap<String, Parked>>>,
    next: Arc<std::sync::atomic::AtomicU64>,
}

#[derive(Debug, Default)]
struct Parked {
    open: BTreeMap<String, Value>,
    answers: BTreeMap<String, Value>,
}

fn now() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    fleetgate_core::Timestamp::from_unix(i64::try_from(secs).unwrap_or(0)).to_string()
}

fn text_result(text: &str, is_error: bool) -> JsonObject {
    let result = json!({ "content": [{ "type": "text", "text": text }], "isError": is_error });
    result.as_object().cloned().unwrap_or_default()
}

impl Tasks {
    fn settle(&self, id: &str, payload: TaskPayload) {
        if let Ok(mut tasks) = self.by_id.lock()
            && let Some(task) = tasks.get_mut(id)
            && !matches!(task.status(), TaskStatus::Cancelled)
        {
            let mut base = task.task.clone();
            base.last_updated_at = now();
            *task = DetailedTask::new(base, payload);
        }
    }

    /// Run `request` of a task tool: as a task when the client declared the extension and
    /// the tool supports it, else to completion.
    pub async fn call(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let args = request.arguments.clone().unwrap_or_default();
        let name = request.name.to_string();
        let declared = context.client_capabilities().is_some_and(|c| c.supports_tasks());
        if name == "failing_job" && !declared {
            // Task-only: a client that takes no tasks cannot call it (SEP-2663).
            return Err(McpError::missing_required_client_capability(
                rmcp::model::ClientCapabilities::builder().enable_tasks().build(),
            ));
        }
        if name == "test_tool_with_task" && !declared {
            return Err(McpError::missing_required_client_capability(
                rmcp::model::ClientCapabilities::builder().enable_tasks().build(),
            ));
        }
        // MRTR first, then a task (SEP-2663 composition): the name is asked for in a plain
        // input-required result; the call that brings it becomes a task.
        let gathered = if name == "test_tool_with_task" {
            let answer = request.input_responses.as_ref().and_then(|r| r.get("user_name"));
            match answer.and_then(|a| a.get("content")).and_then(|c| c.get("name")).and_then(Value::as_str) {
                Some(user) => Some(user.to_owned()),
                None => {
                    let ask = json!({ "resultType": "input_required",
                        "inputRequests": { "user_name": elicit("What is your name?", "name") } });
                    return serde_json::from_value(ask)
                        .map(CallToolResponse::InputRequired)
                        .map_err(|e| McpError::internal_error(e.to_string(), None));
                }
            }
        } else {
            None
        };
        if name == "greet" || !declared {
            return run(&name, &args).await.map(|r| CallToolResponse::Complete(parse(r)));
        }
        let id = format!("task-{}", self.next.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1);
        let at = now();
        let mut task = Task::new(id.clone(), TaskStatus::Working, at.clone(), at);
        task.ttl_ms = Some(TTL_MS);
        task.poll_interval_ms = Some(100);
        let asked = questions(&name);
        if !asked.is_empty() {
            let input_requests = serde_json::from_value(Value::Object(asked.clone().into_iter().collect()))
                .map_err(|e| McpError::internal_error(e.to_string(), None))?;
            if let (Ok(mut tasks), Ok(mut parked)) = (self.by_id.lock(), self.parked.lock()) {
                tasks
                    .insert(id.clone(), DetailedTask::new(task.clone(), TaskPayload::InputRequired { input_requests }));
                parked.insert(id.clone(), Parked { open: asked, answers: BTreeMap::new() });
            }
            task.status = TaskStatus::InputRequired;
            return Ok(CallToolResponse::Task(CreateTaskResult::new(task)));
        }
        if let Ok(mut tasks) = self.by_id.lock() {
            tasks.insert(id.clone(), DetailedTask::new(task.clone(), TaskPayload::Working));
        }
        if let Some(user) = gathered {
            self.settle(
                &id,
                TaskPayload::Completed { result: text_result(&format!("Hello, {user}! (from a task)"), false) },
            );
            return Ok(CallToolResponse::Task(CreateTaskResult::new(task)));
        }
        let store = self.clone();
        tokio::spawn(async move {
            let payload = match run(&name, &args).await {
                Ok(result) => TaskPayload::Completed { result },
                Err(e) => TaskPayload::Failed {
                    error: json!({ "code": e.code.0, "message": e.message }).as_object().cloned().unwrap_or_default(),
                },
            };
            store.settle(&id, payload);
        });
        Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
    }

    /// `tasks/get`: the task as it stands; an unknown id is invalid params.
    pub fn get(&self, request: &GetTaskParams) -> Result<GetTaskResult, McpError> {
        let tasks = self.by_id.lock().map_err(|_| McpError::internal_error("task store poisoned", None))?;
        let task = tasks
            .get(&request.task_id)
            .cloned()
            .ok_or_else(|| McpError::invalid_params(format!("unknown task {}", request.task_id), None))?;
        Ok(GetTaskResult::new(task))
    }

    /// `tasks/update`: answers to a parked task's open questions; answered ones close, and
    /// when none is left open the task completes with what it was told.
    pub fn update(&self, request: &rmcp::model::UpdateTaskParams) -> Result<(), McpError> {
        let mut parked = self.parked.lock().map_err(|_| McpError::internal_error("task store poisoned", None))?;
        let Some(waiting) = parked.get_mut(&request.task_id) else {
            return match self.by_id.lock().map(|t| t.contains_key(&request.task_id)) {
                Ok(true) => Ok(()),
                _ => Err(McpError::invalid_params(format!("unknown task {}", request.task_id), None)),
            };
        };
        for (key, answer) in &request.input_responses {
            if waiting.open.remove(key).is_some() {
                waiting.answers.insert(key.clone(), answer.clone());
            }
        }
        let payload = if waiting.open.is_empty() {
            let told = serde_json::to_string(&waiting.answers).unwrap_or_default();
            parked.remove(&request.task_id);
            TaskPayload::Completed { result: text_result(&format!("done with {told}"), false) }
        } else {
            let open = Value::Object(waiting.open.clone().into_iter().collect());
            TaskPayload::InputRequired {
                input_requests: serde_json::from_value(open)
                    .map_err(|e| McpError::internal_error(e.to_string(), None))?,
            }
        };
        drop(parked);
        if let Ok(mut tasks) = self.by_id.lock()
            && let Some(task) = tasks.get_mut(&request.task_id)
            && !matches!(task.status(), TaskStatus::Cancelled)
        {
            let mut base = task.task.clone();
            base.last_updated_at = now();
            *task = DetailedTask::new(base, payload);
        }
        Ok(())
    }

    /// `tasks/cancel`: a running task settles cancelled; a settled one stays as it is.
    pub fn cancel(&self, request: &CancelTaskParams) -> Result<(), McpError> {
        let mut tasks = self.by_id.lock().map_err(|_| McpError::internal_error("task store poisoned", None))?;
        let task = tasks
            .get_mut(&request.task_id)
            .ok_or_else(|| McpError::invalid_params(format!("unknown task {}", request.task_id), None))?;
        if matches!(task.status(), TaskStatus::Working | TaskStatus::InputRequired) {
            let mut base = task.task.clone();
            base.last_updated_at = now();
            *task = DetailedTask::new(base, TaskPayload::Cancelled);
        }
        Ok(())
    }
}

fn parse(result: JsonObject) -> CallToolResult {
    serde_json::from_value(Value::Object(result)).unwrap_or_else(|_| CallToolResult::error(Vec::new()))
}

async fn run(name: &str, args: &JsonObject) -> Result<JsonObject, McpError> {
    match name {
        "greet" => {
            let who = args.get("name").and_then(Value::as_str).unwrap_or("world");
            Ok(text_result(&format!("Hello, {who}!"), false))
        }
        "slow_compute" => {
            let secs = args.get("seconds").and_then(Value::as_f64).unwrap_or(0.0).clamp(0.0, 30.0);
            tokio::time::sleep(Duration::from_secs_f64(secs)).await;
            let label = args.get("label").and_then(Value::as_str).unwrap_or("done");
            Ok(text_result(&format!("computed {label} after {secs} s"), false))
        }
        "failing_job" => {
            tokio::time::sleep(Duration::from_millis(200)).await;
            Ok(text_result("the job failed", true))
        }
        _ => Err(McpError::internal_error("protocol_error_job always fails", None)),
    }
}
