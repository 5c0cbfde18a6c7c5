//! `fleetgate demo`, second act: the pull-request workflow (SPEC §10) told through real
//! gateways. An author, two reviewers (the second in the author's own client session) and a
//! merger, each a `fleetgate serve` in front of the forge stand-in (`fleetgate debug
//! forge-fixture`) on one bare repository, each driven by this process as its MCP client: a PR
//! created, a review lease, an approval, a new head that voids it, a re-review, the merge at
//! exactly the approved head — and one refused attempt per blocker on the way.

use anyhow::{Context as _, anyhow};
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
struct Step {
    who: &'static str,
    what: String,
    allowed: bool,
    said: String,
}

fn text_of(result: &CallToolResult) -> String {
    result.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect::<Vec<_>>().join(" ")
}

/// Four gateways (author, reviewer, reviewer2 in the author's session, merger) over one
/// forge, each with this process as its MCP client: the demo's second act, and the
/// workflow benchmark's fleet (`examples/workflow_bench.rs`).
pub struct Flow {
    members: Vec<Member>,
    bare: std::path::PathBuf,
    steps: Vec<Step>,
}

impl std::fmt::Debug for Flow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Flow").field("bare", &self.bare).field("steps", &self.steps.len()).finish_non_exhaustive()
    }
}

/// The forge stand-in, `fleetgate-forge-fixture`: beside this binary (a workspace build puts
/// it there), else on `path` (the PATH). The product binary carries no fake forge; the demo
/// needs one.
pub fn forge_stand_in(exe: &Path, path: &str) -> anyhow::Result<std::path::PathBuf> {
    const NAME: &str = "fleetgate-forge-fixture";
    let beside = exe.with_file_name(NAME);
    if beside.is_file() {
        return Ok(beside);
    }
    if let Some(found) = super::doctor::resolve(NAME, path) {
        return Ok(found);
    }
    anyhow::bail!(
        "the demo's forge stand-in `{NAME}` is neither beside {} nor on the PATH: build it with \
         `cargo build --release --workspace` (README), or install it with \
         `cargo install --locked --path crates/testkit`",
        exe.display()
    )
}

impl Flow {
    /// Start the fleet in `dir` (its store, roster and bare repository; `checkout` is the
    /// repository the gateways run from, whose history the forge starts with), `exe` being
    /// the fleetgate binary and `forge` the forge stand-in's.
    pub async fn start(exe: &Path, forge: &Path, dir: &Path, checkout: &Path) -> anyhow::Result<Self> {
        let bare = dir.join("forge.git");
        let git = |args: &[&str]| std::process::Command::new("git").args(args).stdout(Stdio::null()).status();
        git(&["init", "-q", "--bare", "-b", "main", &bare.to_string_lossy()])?;
        git(&["-C", &checkout.to_string_lossy(), "push", "-q", &bare.to_string_lossy(), "HEAD:refs/heads/main"])?;
        let fixture = vec![forge.display().to_string(), "--repo".to_owned(), bare.display().to_string()];
        std::fs::write(dir.join("flow.toml"), roster(&fixture))?;
        let members = start(exe, dir, checkout, &fixture).await?;
        Ok(Self { members, bare, steps: Vec::new() })
    }

    /// Close every client (each gateway ends when its stdin closes).
    pub async fn stop(mut self) {
        for m in self.members.drain(..) {
            let _ = m.client.cancel().await;
        }
    }

    /// `who` calls `tool` (owner and repo added): allowed, and the answer.
    pub async fn call(&mut self, who: &'static str, tool: &str, args: Value) -> anyhow::Result<(bool, Value)> {
        let member = self.members.iter().find(|m| m.name == who).ok_or_else(|| anyhow!("no member {who}"))?;
        let mut arguments: Map<String, Value> = args.as_object().cloned().unwrap_or_default();
        if !tool.starts_with("gitea_release") {
            arguments.insert("owner".into(), json!("fleet"));
            arguments.insert("repo".into(), json!("forge"));
        }
        let shown = format!("{tool} {}", Value::Object(arguments.clone()));
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        let result = member.client.peer().call_tool(params).await.with_context(|| format!("{who}: {tool}"))?;
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

    /// git in the forge's bare repository.
    pub fn git(&self, args: &[&str]) -> anyhow::Result<String> {
        let out = std::process::Command::new("git").arg("-C").arg(&self.bare).args(args).output()?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// The author commits `content` to `feature` (`first`: a new file); the new head.
    pub async fn push(&mut self, content: &str, message: &str, first: bool) -> anyhow::Result<String> {
        let mut commit = json!({ "path": "f.txt", "content": content, "message": message, "branch_name": "feature" });
        if !first {
            let (_, file) =
                self.call("author", "get_file_contents", json!({ "ref": "feature", "path": "f.txt" })).await?;
            commit["sha"] = file["sha"].clone();
        }
        self.call("author", "create_or_update_file", commit).await?;
        self.git(&["rev-parse", "feature"])
    }
}

fn roster(fixture: &[String]) -> String {
    let mut config = "[fleet]\nname = \"demo-flow\"\ntool_prefix = \"gitea_\"\nforge = \"gitea-mcp\"\n".to_owned();
    for (name, role) in MEMBERS {
        config.push_str(&format!(
            "\n[[members]]\nnamespace = \"gitea-{name}\"\nprofile = \"prgs-{name}\"\nrole = \"{role}\"\n"
        ));
    }
    config.push_str(&format!("\n[workflow]\nforge_command = {fixture:?}\n"));
    config
}

async fn start(exe: &Path, dir: &Path, checkout: &Path, fixture: &[String]) -> anyhow::Result<Vec<Member>> {
    let mut members = Vec::new();
    for (name, _) in MEMBERS {
        let session = if name == "reviewer2" { "author" } else { name };
        let mut child = tokio::process::Command::new(exe)
            .env("GITEA_CLIENT_MANAGED", "1")
            .env("GITEA_MCP_COHORT_ID", "demo-flow")
            .env("GITEA_MCP_CLIENT_SESSION", format!("sess-{session}"))
            .env_remove("GITEA_WORKER_REGISTRY_DB")
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
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start the {name} gateway"))?;
        let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            return Err(anyhow!("the {name} gateway's pipes were not opened"));
        };
        let client = ().serve((stdout, stdin)).await.with_context(|| format!("the {name} gateway did not start MCP"))?;
        members.push(Member { name, client, _child: child });
    }
    Ok(members)
}

fn approve(pr: i64) -> Value {
    json!({ "method": "create", "pull_number": pr, "state": "APPROVED", "body": "LGTM" })
}

fn claim(pr: i64, head: &str, purpose: &str) -> Value {
    json!({ "pr": pr, "head": head, "purpose": purpose })
}

/// The story, as the clients tell it.
async fn story(act: &mut Flow) -> anyhow::Result<String> {
    act.call("author", "create_branch", json!({ "branch": "feature" })).await?;
    let h1 = act.push("one\n", "The feature", true).await?;
    let create =
        json!({ "method": "create", "title": "Feature", "body": "Adds it.", "head": "feature", "base": "main" });
    let (_, pr) = act.call("author", "pull_request_write", create).await?;
    let pr = pr["number"].as_i64().ok_or_else(|| anyhow!("the forge created no PR: {pr}"))?;
    let merge = json!({ "method": "merge", "pull_number": pr });
    act.call("reviewer", "pull_request_write", merge.clone()).await?; // role_not_permitted
    act.call("reviewer", "pull_request_review_write", approve(pr)).await?; // review_lease_required
    act.call("reviewer", "gitea_claim_pr_lease", claim(pr, &h1, "review")).await?;
    act.call("reviewer2", "gitea_claim_pr_lease", claim(pr, &h1, "review")).await?; // review_lease_held
    act.call("reviewer", "pull_request_review_write", approve(pr)).await?;
    let h2 = act.push("two\n", "Second thoughts", false).await?;
    act.call("reviewer", "pull_request_review_write", approve(pr)).await?; // stale_head
    act.call("merger", "gitea_claim_pr_lease", claim(pr, &h2, "merge")).await?;
    act.call("merger", "pull_request_write", merge.clone()).await?; // approval_required: historical
    act.call("reviewer", "gitea_claim_pr_lease", claim(pr, &h2, "review")).await?;
    act.call("reviewer", "pull_request_review_write", approve(pr)).await?;
    act.call("merger", "pull_request_write", merge).await?;
    let parents = act.git(&["rev-list", "--parents", "-n", "1", "main"])?;
    Ok(if parents.split(' ').nth(2) == Some(h2.as_str()) {
        format!("main's merge commit has the approved head {} as its second parent", &h2[..12])
    } else {
        format!("main is at {parents}: NOT the approved head {h2}")
    })
}

/// Run the second act in `dir`; its lines and its steps.
pub fn run(exe: &Path, forge: &Path, dir: &Path, checkout: &Path) -> anyhow::Result<(Vec<String>, Value)> {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let (steps, outcome) = runtime.block_on(async {
        let mut act = Flow::start(exe, forge, dir, checkout).await?;
        let outcome = story(&mut act).await;
        let steps = std::mem::take(&mut act.steps);
        act.stop().await;
        anyhow::Ok((steps, outcome?))
    })?;
    let mut lines = vec!["== the pull-request workflow, four gateways over one forge".to_owned()];
    lines.extend(steps.iter().map(|s| {
        let mark = if s.allowed { "ok     " } else { "REFUSED" };
        format!("{mark} {:9} {}\n        {}", s.who, s.what, s.said)
    }));
    lines.push(format!("== {outcome}"));
    let value = json!({
        "steps": steps.iter().map(|s| json!({ "who": s.who, "call": s.what, "allowed": s.allowed, "answer": s.said })).collect::<Vec<_>>(),
        "outcome": outcome,
    });
    Ok((lines, value))
}
