//! The demo fleet: four gateways (author, reviewer, reviewer2 in the author's own client
//! session, merger) in front of the forge stand-in on one bare repository, each a `fleetgate
//! serve` with this process as its MCP client, and the operator's CLI beside them.

use crate::{Context as _, Error, Result};
use fleetgate_gateway::rmcp::ServiceExt;
use fleetgate_gateway::rmcp::model::{CallToolRequestParams, CallToolResult};
use fleetgate_gateway::rmcp::service::{RoleClient, RunningService};
use serde_json::{Map, Value, json};
use std::path::Path;
use std::process::Stdio;

/// The roster of the second act.
const MEMBERS: [(&str, &str); 4] =
    [("author", "author"), ("reviewer", "reviewer"), ("reviewer2", "reviewer"), ("merger", "merger")];

struct Member {
    name: &'static str,
    client: RunningService<RoleClient, ()>,
    _child: tokio::process::Child,
}

/// What one step did: who, what, and the gate's or the forge's answer.
#[derive(Debug)]
pub(crate) struct Step {
    pub who: &'static str,
    pub what: String,
    pub allowed: bool,
    pub said: String,
}

fn text_of(result: &CallToolResult) -> String {
    result.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect::<Vec<_>>().join(" ")
}

/// Four gateways (author, reviewer, reviewer2 in the author's session, merger) over one
/// forge, each with this process as its MCP client: the demo's acts, and the workflow
/// benchmark's fleet (`examples/workflow_bench.rs`).
pub struct Flow {
    /// The forge's dialect: how each step of the plot is spelled as a call.
    pub dialect: &'static dyn fleetgate_core::dialect::Dialect,
    members: Vec<Member>,
    bare: std::path::PathBuf,
    exe: std::path::PathBuf,
    dir: std::path::PathBuf,
    pub(crate) steps: Vec<Step>,
    /// The forge's own API (GitHub's REST merge, which the gateway makes itself where the
    /// server's merge declares no pin), served by the stand-in; killed with the flow.
    _api: Option<tokio::process::Child>,
}

impl std::fmt::Debug for Flow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Flow").field("bare", &self.bare).field("steps", &self.steps.len()).finish_non_exhaustive()
    }
}

impl Flow {
    /// Start the fleet in `dir` (its store, roster and bare repository; `checkout` is the
    /// repository the gateways run from, whose history the forge starts with), `exe` being
    /// the fleetgate binary and `forge` the forge stand-in's. `extra` is appended to the
    /// roster (`[approvals]`, `[[rules]]`); `dialect` the forge the stand-in plays.
    pub async fn start(
        exe: &Path,
        forge: &Path,
        dir: &Path,
        checkout: &Path,
        extra: &str,
        dialect: &'static dyn fleetgate_core::dialect::Dialect,
    ) -> Result<Self> {
        let bare = dir.join("forge.git");
        let git = |args: &[&str]| std::process::Command::new("git").args(args).stdout(Stdio::null()).status();
        let ok = |what: &str, status: std::io::Result<std::process::ExitStatus>| match status {
            Ok(s) if s.success() => Ok(()),
            Ok(s) => Err(Error::new(format!("{what} failed ({s})"))),
            Err(e) => Err(Error::new(format!("cannot run git for {what}: {e}"))),
        };
        ok("the forge's bare repository", git(&["init", "-q", "--bare", "-b", "main", &bare.to_string_lossy()]))?;
        ok(
            "pushing the checkout to the forge",
            git(&["-C", &checkout.to_string_lossy(), "push", "-q", &bare.to_string_lossy(), "HEAD:refs/heads/main"]),
        )?;
        let mut fixture = vec![forge.display().to_string(), "--repo".to_owned(), bare.display().to_string()];
        // The stand-in plays the dialect's server as released (GitHub's: its merge declares no
        // head pin, so the gateway makes the merge itself through the forge's REST API, which
        // the stand-in serves too).
        fixture.extend(["--surface".to_owned(), dialect.name().to_owned()]);
        let (api, host) = if dialect.name() == fleetgate_core::dialect::gitea::NAME {
            (None, None)
        } else {
            let (child, url) = forge_api(&fixture, dir).await?;
            (Some(child), Some(url))
        };
        let config = dir.join("flow.toml");
        std::fs::write(&config, roster(&fixture, dialect, host.is_some()) + extra)
            .context(|| format!("cannot write {}", config.display()))?;
        let members = start(exe, dir, checkout, &fixture, dialect, host.as_deref()).await?;
        Ok(Self { dialect, members, bare, exe: exe.to_owned(), dir: dir.to_owned(), steps: Vec::new(), _api: api })
    }

    /// Close every client (each gateway ends when its stdin closes).
    pub async fn stop(mut self) {
        for m in self.members.drain(..) {
            let _ = m.client.cancel().await;
        }
    }

    /// `who` calls `tool` (owner and repo added): allowed, and the answer.
    pub async fn call(&mut self, who: &'static str, tool: &str, args: Value) -> Result<(bool, Value)> {
        let member =
            self.members.iter().find(|m| m.name == who).ok_or_else(|| Error::new(format!("no member {who}")))?;
        let mut arguments: Map<String, Value> = args.as_object().cloned().unwrap_or_default();
        if tool != self.control("release_pr_lease") {
            arguments.insert("owner".into(), json!("fleet"));
            arguments.insert("repo".into(), json!("forge"));
        }
        let shown = format!("{tool} {}", Value::Object(arguments.clone()));
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        let result = member.client.peer().call_tool(params).await.context(|| format!("{who}: {tool}"))?;
        let allowed = result.is_error != Some(true);
        let body = result.structured_content.clone().unwrap_or_else(|| {
            let text = text_of(&result);
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        });
        let said = match (&body, allowed) {
            (Value::Object(o), false) if o.contains_key("blocker_kind") => format!(
                "{}: {}",
                o["blocker_kind"].as_str().unwrap_or_default(),
                o["blocked_reasons"].get(0).and_then(Value::as_str).unwrap_or_default()
            ),
            // The gate's refusal: its blocker, then its reasons (`- …`).
            (Value::String(s), false) => {
                let kind = s.split(':').next().unwrap_or_default();
                let reasons: Vec<&str> = s.lines().filter_map(|l| l.strip_prefix("- ")).collect();
                if reasons.is_empty() {
                    s.lines().next().unwrap_or_default().to_owned()
                } else {
                    format!("{kind}: {}", reasons.join("; "))
                }
            }
            _ => "forwarded".into(),
        };
        self.steps.push(Step { who, what: shown, allowed, said });
        Ok((allowed, body))
    }

    /// The control tool `name` under the roster's prefix.
    pub fn control(&self, name: &str) -> String {
        format!("{}_{name}", self.dialect.server().prefix)
    }

    /// `who` makes the step `op` of the plot, as the forge's server spells it.
    pub async fn act(&mut self, who: &'static str, op: fleetgate_core::dialect::Op<'_>) -> Result<(bool, Value)> {
        let (tool, args) = self.dialect.call(&op);
        self.call(who, tool, Value::Object(args)).await
    }

    /// The number of the PR an answer to [`fleetgate_core::dialect::Op::OpenPr`] names.
    pub fn opened(&self, answer: &Value) -> Result<i64> {
        self.dialect
            .created_pr(answer)
            .and_then(|n| i64::try_from(n).ok())
            .ok_or_else(|| Error::new(format!("the forge created no PR: {answer}")))
    }

    /// git in the forge's bare repository.
    pub fn git(&self, args: &[&str]) -> Result<String> {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(&self.bare)
            .args(args)
            .output()
            .context(|| format!("git {args:?}"))?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// The operator runs `fleetgate ARGS --json` on the fleet's store and roster (the real
    /// CLI, as a process): whether it succeeded, and its JSON answer. The step is shown as
    /// the operator typed it.
    pub async fn operator(&mut self, args: &[&str]) -> Result<(bool, Value)> {
        let out = tokio::process::Command::new(&self.exe)
            .env_clear()
            .envs(crate::base_env(&self.dir))
            .arg("--store")
            .arg(self.dir.join("flow.sqlite3"))
            .arg("--config")
            .arg(self.dir.join("flow.toml"))
            .args(args)
            .arg("--json")
            .stdin(Stdio::null())
            .output()
            .await
            .context(|| format!("fleetgate {}", args.join(" ")))?;
        let answer: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
            Value::String(format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
        });
        let said = match &answer {
            Value::Object(o) if o.contains_key("error") => o["error"].as_str().unwrap_or_default().to_owned(),
            Value::Object(o) if o.contains_key("state") => format!(
                "{} by {}{}",
                o["state"].as_str().unwrap_or_default(),
                o["answered_by"].as_str().unwrap_or("the operator"),
                o["answer_reason"].as_str().map(|r| format!(": {r}")).unwrap_or_default()
            ),
            Value::Object(o) if o.contains_key("approvals") => {
                let listed = o["approvals"].as_array().map(Vec::as_slice).unwrap_or_default();
                listed
                    .iter()
                    .map(|r| {
                        format!(
                            "{} {}: {} ({}) `{}` {}",
                            r["id"].as_str().unwrap_or_default(),
                            r["state"].as_str().unwrap_or_default(),
                            r["profile"].as_str().unwrap_or_default(),
                            r["why"].as_str().unwrap_or_default(),
                            r["tool"].as_str().unwrap_or_default(),
                            r["arguments"]
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("; ")
            }
            other => other.to_string(),
        };
        let quoted: Vec<String> =
            args.iter().map(|a| if a.contains(' ') { format!("{a:?}") } else { (*a).to_owned() }).collect();
        let shown = format!("fleetgate {}", quoted.join(" "));
        self.steps.push(Step { who: "operator", what: shown, allowed: out.status.success(), said });
        Ok((out.status.success(), answer))
    }

    /// The author commits `content` to `feature` (`first`: a new file); the new head.
    pub async fn push(&mut self, content: &str, message: &str, first: bool) -> Result<String> {
        use fleetgate_core::dialect::Op;
        let mut sha = None;
        if !first {
            let (_, file) = self.act("author", Op::ReadFile { branch: "feature", path: "f.txt" }).await?;
            sha = file["sha"].as_str().map(str::to_owned);
        }
        let write = Op::WriteFile { branch: "feature", path: "f.txt", content, message, sha: sha.as_deref() };
        self.act("author", write).await?;
        self.git(&["rev-parse", "feature"])
    }
}

/// The forge's own API served by the stand-in on loopback (`--rest-listen`), each member's
/// demo token standing for its account: the child and its URL (the member's host).
async fn forge_api(fixture: &[String], dir: &Path) -> Result<(tokio::process::Child, String)> {
    use tokio::io::AsyncBufReadExt;
    let mut command = tokio::process::Command::new(&fixture[0]);
    command.args(&fixture[1..]).args(["--rest-listen", "127.0.0.1:0"]);
    for (name, _) in MEMBERS {
        command.args(["--token", &format!("{}={name}", token(name))]);
    }
    let mut child = command
        .env_clear()
        .envs(crate::base_env(dir))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context(|| "cannot start the forge's API".to_owned())?;
    let stdout = child.stdout.take().ok_or_else(|| Error::new("the forge's API has no stdout".to_owned()))?;
    let mut line = String::new();
    tokio::io::BufReader::new(stdout).read_line(&mut line).await.context(|| "the forge's API address".to_owned())?;
    let url = line.trim().strip_prefix("listening on ").unwrap_or_default().to_owned();
    if url.is_empty() {
        return Err(Error::new(format!("the forge's API did not start: {line:?}")));
    }
    Ok((child, url))
}

/// The demo's forge token of `name` (the stand-in's API maps it to the login `name`).
fn token(name: &str) -> String {
    format!("demo-token-{name}")
}

fn roster(fixture: &[String], dialect: &dyn fleetgate_core::dialect::Dialect, api: bool) -> String {
    let prefix = dialect.server().prefix;
    let mut config =
        format!("[fleet]\nname = \"demo-flow\"\ntool_prefix = \"{prefix}_\"\nforge = \"{}\"\n", dialect.name());
    if api {
        // Each member's server gets its host and token, as a real fleet's does.
        let server = dialect.server();
        config.push_str(&format!("\n[downstream]\npass_env = [\"{}\", \"{}\"]\n", server.host_env, server.token_env));
    }
    for (name, role) in MEMBERS {
        config.push_str(&format!(
            "\n[[members]]\nnamespace = \"{prefix}-{name}\"\nprofile = \"prgs-{name}\"\nrole = \"{role}\"\n"
        ));
    }
    config.push_str(&format!("\n[workflow]\nforge_command = {fixture:?}\n"));
    config
}

async fn start(
    exe: &Path,
    dir: &Path,
    checkout: &Path,
    fixture: &[String],
    dialect: &dyn fleetgate_core::dialect::Dialect,
    host: Option<&str>,
) -> Result<Vec<Member>> {
    let mut members = Vec::new();
    for (name, _) in MEMBERS {
        let session = if name == "reviewer2" { "author" } else { name };
        let server = dialect.server();
        let forge_env: Vec<(&str, String)> = match host {
            Some(host) => vec![(server.host_env, host.to_owned()), (server.token_env, token(name))],
            None => Vec::new(),
        };
        let stderr = dir.join(format!("flow-{name}.stderr"));
        let log = std::fs::File::create(&stderr).context(|| format!("cannot create {}", stderr.display()))?;
        let mut child = tokio::process::Command::new(exe)
            .env_clear()
            .envs(crate::base_env(dir))
            .envs(forge_env)
            .current_dir(dir)
            .env("GITEA_CLIENT_MANAGED", "1")
            .env("GITEA_MCP_COHORT_ID", "demo-flow")
            .env("GITEA_MCP_CLIENT_SESSION", format!("sess-{session}"))
            .arg("--store")
            .arg(dir.join("flow.sqlite3"))
            .arg("--config")
            .arg(dir.join("flow.toml"))
            .args(["serve", "--profile", &format!("prgs-{name}"), "--repo-root"])
            .arg(checkout)
            .arg("--")
            .args(fixture)
            // A forge account per role: Gitea refuses an approval by the PR's own poster.
            .args(["--user", name])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .context(|| format!("cannot start the {name} gateway"))?;
        let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            return Err(Error::new(format!("the {name} gateway's pipes were not opened")));
        };
        // One that does not start says why: its own stderr.
        let said = || {
            let text = std::fs::read_to_string(&stderr).unwrap_or_default();
            let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
            lines[lines.len().saturating_sub(3)..].join(" / ")
        };
        let client = match ().serve((stdout, stdin)).await {
            Ok(client) => client,
            Err(e) => return Err(Error::new(format!("the {name} gateway did not start MCP ({e}): {}", said()))),
        };
        members.push(Member { name, client, _child: child });
    }
    Ok(members)
}
