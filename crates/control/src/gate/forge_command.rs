//! The forge outside a gateway: the downstream server started for one read, as the fleet's
//! clients launch it (`[workflow] forge_command`), so `fleetgate capability` and `fleetgate
//! pr` judge the PR workflow from the forge's own answer, as a gateway does through its
//! downstream.

use super::workflow::{ForgeError, ForgeErrorKind, ForgeReader, forge_answer};
use fleetgate_core::env::EnvSnapshot;
use fleetgate_gateway::rmcp::ServiceExt;
use fleetgate_gateway::rmcp::model::CallToolRequestParams;
use serde_json::{Map, Value};
use std::process::Stdio;
use std::time::Duration;

/// How long one read may take, the server's start-up included.
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// `[workflow] forge_command`, started per read.
pub struct CommandForge {
    argv: Vec<String>,
    /// What it may see of this process's environment: what a gateway's downstream sees.
    env: Vec<(String, String)>,
}

impl std::fmt::Debug for CommandForge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The environment may hold the forge's token: its keys only.
        let keys: Vec<&str> = self.env.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("CommandForge").field("argv", &self.argv).field("env_keys", &keys).finish()
    }
}

impl CommandForge {
    /// The roster's forge command, or none when it names none. It starts with an empty
    /// environment plus what a gateway's downstream is given
    /// ([`fleetgate_core::env::downstream_env`]): never the store location, the HTTP token or
    /// an undeclared key of the CLI's environment.
    pub fn new(config: &fleetgate_config::FleetConfig, env: &EnvSnapshot) -> Option<Self> {
        let argv = &config.workflow.forge_command;
        if argv.is_empty() {
            return None;
        }
        let env = config.downstream_env(env).into_iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect();
        Some(Self { argv: argv.clone(), env })
    }

    async fn call(&self, tool: &str, arguments: Map<String, Value>) -> Result<Value, ForgeError> {
        let unreachable = |message: String| ForgeError::new(ForgeErrorKind::Unreachable, message);
        let program = &self.argv[0];
        let mut child = tokio::process::Command::new(program)
            .args(&self.argv[1..])
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| unreachable(format!("cannot start the forge command {program:?}: {e}")))?;
        let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            return Err(unreachable("the forge command's pipes were not opened".into()));
        };
        let client =
            ().serve((stdout, stdin))
                .await
                .map_err(|e| unreachable(format!("the forge command did not start MCP: {e}")))?;
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        let result = client
            .peer()
            .call_tool(params)
            .await
            .map_err(|e| ForgeError::new(ForgeErrorKind::Failed, format!("`{tool}` failed: {e}")));
        let _ = client.cancel().await;
        let _ = child.kill().await;
        forge_answer(tool, &result?)
    }
}

impl ForgeReader for CommandForge {
    fn read(&self, tool: &str, arguments: Map<String, Value>) -> Result<Value, ForgeError> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| {
            ForgeError::new(ForgeErrorKind::Unreachable, format!("cannot start a runtime for the forge read: {e}"))
        })?;
        runtime.block_on(async {
            tokio::time::timeout(READ_TIMEOUT, self.call(tool, arguments)).await.unwrap_or_else(|_| {
                Err(ForgeError::new(
                    ForgeErrorKind::Timeout,
                    format!("the forge command did not answer `{tool}` within {READ_TIMEOUT:?}"),
                ))
            })
        })
    }
}
