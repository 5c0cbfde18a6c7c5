//! A stand-in for a Gitea forge behind the official Gitea MCP server (gitea-mcp), for the
//! end-to-end tests of the `gitea-mcp` rule profile and the pull-request workflow: no forge
//! server installs here, so this rmcp stdio MCP server offers the real server's tool names,
//! `method` values and argument shapes (`forge/GITEA_MCP.md` says which version
//! and what exactly) and does the forge's work itself, for real, on a bare git repository:
//!
//! * branches are refs (`create_branch`, `delete_branch`, `list_branches`);
//! * `create_or_update_file` / `delete_file` commit to a branch (blob, tree in a throwaway
//!   index, `commit-tree`, a compare-and-swap `update-ref`);
//! * `pull_request_write` `create` records the pull request and writes `refs/pull/<n>/head`;
//!   while the pull request is open its head is the head branch's tip, read afresh on every
//!   call (a push to the branch moves it, and `refs/pull/<n>/head` follows); `merge` merges
//!   that head into the base branch for real (`merge-tree --write-tree` then `commit-tree`
//!   with both parents; `squash`: one parent; `fast-forward-only`: the base ref moves) and
//!   marks the pull request merged; `close`, `reopen`, `update`, `update_branch` (a real merge
//!   of the base into the head branch), `add_reviewers`, `remove_reviewers` do what they say;
//! * `pull_request_read` `get` answers the number, state, head ref and sha, base ref and sha,
//!   `merged` and `mergeable`; `get_diff`, `get_files` come from git; `get_reviews` marks a
//!   review `stale` when the head moved on;
//! * `pull_request_review_write`, `issue_write`, `issue_read`, `list_issues`,
//!   `list_pull_requests`, and the readers `get_file_contents`, `get_dir_contents`,
//!   `list_commits`, `get_commit`, `get_me`, `get_gitea_mcp_server_version`;
//! * `actions_run_read` `list_runs` (none: no CI here) and `download_job_log`, which writes
//!   the log to `output_path` as the real server does (a "reader" that writes a file).
//!
//! Gitea's semantics where they differ from a naive reading (`forge/GITEA_MCP.md` lists them): a
//! fraction is truncated where a number is read, a numeric string is a number; a file write
//! without `branch_name` writes the default branch; `head_commit_id` on a merge is a
//! compare-and-swap (409 when the head moved); an approval or a request-changes by the PR's
//! own poster is refused with HTTP 422; a submitted review is at the head of its submission;
//! owner and repository names match case-insensitively, and `--alias OWNER/NAME` answers for
//! another name as Gitea does for a renamed repository's old one (answers name the
//! repository by its own name).
//!
//! The forge's own records live in a JSON file (see `ledger`) under an exclusive lock held
//! for each whole call, so several fixture processes given the same repository — one per
//! gateway of a fleet — share one forge.
//!
//! What the forge does on its own after a call (`automation`): closing keywords in commit
//! messages landing on a branch, a PR's cross-references resolved at its merge, the PRs a
//! deleted branch heads closed and those based on it moved. `--fork OWNER/NAME=PATH` adds a
//! fork of the served repository (its own bare repository at PATH, sharing objects with it):
//! calls naming it are answered for it, a PR may take its head from it (`head:
//! "owner:branch"`), and a merge's `delete_branch` deletes that head there.
//!
//! Answers are shaped like the real server's: a result is one text content holding the JSON
//! of the answer (a bare string answer is a JSON string); a failed call is a tool result with
//! `isError: true` and the server's wording (`unknown method: <m>` for a `method` the tool does
//! not have, `<key> is required` for a missing argument); an unknown tool is a JSON-RPC
//! invalid-params error (`unknown tool "<name>"`).
//!
//! It is a binary of its own, `fleetgate-forge-fixture`, in the test kit: the product binary
//! carries no fake forge. `fleetgate demo` tells the PR workflow through it too (no forge is
//! needed to see fleetgate work) and finds it beside its own executable:
//!
//! ```text
//! fleetgate-forge-fixture --repo PATH.git [--slug OWNER/NAME] [--state FILE] [--user LOGIN] [--alias OWNER/NAME]...
//!               [--fork OWNER/NAME=PATH.git]... [--variant changed-description|new-method|race-merge|no-head-pin]...
//! fleetgate-forge-fixture --surface github-mcp --repo PATH.git --rest-listen ADDR --token TOKEN=LOGIN...
//! ```
//!
//! `--repo`: the bare repository (it must exist). `--slug`: the `owner`/`repo` the tools
//! answer for (default `fleet/forge`; any other is not found). `--state`: the ledger (default
//! `<repo>/fleetgate-forge.json`; its lock is `<state>.lock`). `--user`: the login the server
//! acts as and commits as (default `fleet-bot`). `--variant changed-description` rewrites the
//! description of `pull_request_write`; `--variant new-method` adds `lock` to its `method` enum
//! (the tests of pinned tool definitions). Exits 0 when the client goes away, 1 with the cause
//! on stderr otherwise. With `--rest-listen` (and `--surface github-mcp`) it serves GitHub's REST
//! API over HTTP instead (`rest`: the merge the gateway makes itself), until killed.

mod args;
pub mod automation;
pub(crate) mod catalog;
mod git;
mod github;
pub(crate) mod github_catalog;
mod issues;
pub mod ledger;
mod pulls;
pub mod refs;
mod repo;
mod rest;

use args::Args;
use clap::Parser;
use fleetgate_gateway::rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ListToolsResult, PaginatedRequestParams, ServerConfig,
};
use fleetgate_gateway::rmcp::service::RequestContext;
use fleetgate_gateway::rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// The fixture's flags.
#[derive(Debug, Parser)]
#[command(
    name = "fleetgate-forge-fixture",
    about = "A Gitea forge behind the gitea-mcp tool surface, on a bare git repository"
)]
pub struct Flags {
    /// The bare repository the forge serves.
    #[arg(long, value_name = "PATH")]
    repo: PathBuf,
    /// The repository's `owner/name`.
    #[arg(long, default_value = "fleet/forge")]
    slug: String,
    /// The forge's records (default: `fleetgate-forge.json` inside the repository).
    #[arg(long, value_name = "FILE")]
    state: Option<PathBuf>,
    /// The login the server acts and commits as.
    #[arg(long, default_value = "fleet-bot")]
    user: String,
    /// Another `owner/name` it answers for, as Gitea resolves a renamed repository's old name.
    #[arg(long = "alias", value_name = "OWNER/NAME")]
    aliases: Vec<String>,
    /// Change the listing: `changed-description`, `new-method`.
    #[arg(long = "variant", value_name = "NAME")]
    variants: Vec<String>,
    /// How many forks the repository has (its `search_repos` entry's `forks_count`).
    #[arg(long, default_value_t = 0)]
    forks: u64,
    /// Which server's tool surface it offers: `gitea-mcp` or `github-mcp`.
    #[arg(long, default_value = "gitea-mcp")]
    surface: String,
    /// A fork of the repository: its `owner/name` and its bare repository.
    #[arg(long = "fork", value_name = "OWNER/NAME=PATH")]
    fork: Vec<String>,
    /// Serve GitHub's REST API (the merge) on this address instead of MCP on stdio; the
    /// address bound is printed on stdout (`github-mcp` only).
    #[arg(long, value_name = "ADDR")]
    rest_listen: Option<String>,
    /// A token the REST API accepts, and the login it stands for.
    #[arg(long = "token", value_name = "TOKEN=LOGIN")]
    tokens: Vec<String>,
    /// The instance's `[repository.pull-request] CLOSE_KEYWORDS`, one word a flag: given,
    /// they replace Gitea's defaults (`gitea-mcp` only).
    #[arg(long = "close-keyword", value_name = "WORD")]
    close_keywords: Vec<String>,
    /// The instance's `REOPEN_KEYWORDS`, the same way.
    #[arg(long = "reopen-keyword", value_name = "WORD")]
    reopen_keywords: Vec<String>,
}

/// The URL the forge's answers and references name its repositories under (Gitea's
/// `AppURL`).
pub const APP_URL: &str = "http://forge.invalid/";

/// The forge: the repository, its records, and who it serves.
#[derive(Debug)]
pub struct Forge {
    pub git: git::Git,
    pub ledger: ledger::Ledger,
    pub owner: String,
    pub name: String,
    pub user: String,
    /// `--variant race-merge`: a push lands on the PR's head branch while a merge is under way.
    pub race_merge: bool,
    /// `--alias`: other names of the repository (a renamed repository's old ones).
    pub aliases: Vec<String>,
    /// `--forks`: how many forks the repository has.
    pub forks: u64,
    /// `--surface github-mcp --variant head-pin`: the merge honours `expectedHeadSha`.
    pub head_pin: bool,
    /// Every repository of the forge: the served one first, then its forks.
    pub world: Arc<Vec<automation::WorldRepo>>,
}

impl Forge {
    pub fn full_name(&self) -> String {
        format!("{}/{}", self.owner, self.name)
    }

    pub fn html_base(&self) -> String {
        format!("{APP_URL}{}", self.full_name())
    }

    /// The forge's repository `slug` (any case), if it has it.
    pub fn repo_named(&self, slug: &str) -> Option<&automation::WorldRepo> {
        self.world.iter().find(|r| r.full_name.eq_ignore_ascii_case(slug))
    }

    /// The git repository a PR's head branch lives in.
    pub fn head_git(&self, pull: &ledger::Pull) -> &git::Git {
        pull.head_repo.as_deref().and_then(|h| self.repo_named(h)).map_or(&self.git, |r| &r.git)
    }

    /// The repository a PR's head lives in, as the forge spells it.
    pub fn head_full_name(&self, pull: &ledger::Pull) -> String {
        pull.head_repo
            .as_deref()
            .and_then(|h| self.repo_named(h))
            .map_or_else(|| self.full_name(), |r| r.full_name.clone())
    }

    /// The call's `owner` and `repo`, which must name this forge's repository.
    pub fn check_repo(&self, args: &Args) -> Result<(String, String), String> {
        let owner = args::string(args, "owner")?;
        let repo = args::string(args, "repo")?;
        // Gitea resolves owner and repository names case-insensitively, and a renamed
        // repository's old name to the repository.
        let named = |full: &str| full.eq_ignore_ascii_case(&format!("{owner}/{repo}"));
        if !named(&self.full_name()) && !self.aliases.iter().any(|a| named(a)) {
            return Err(format!("repository {owner}/{repo} err: The target couldn't be found."));
        }
        Ok((owner, repo))
    }

    /// One tool call: the answer, or the tool error's text; `None` for a tool it does not have.
    fn call(&self, tool: &str, args: &Args) -> Option<Result<Value, String>> {
        type Handler = fn(&Forge, &Args) -> Result<Value, String>;
        let handler: Handler = match tool {
            "get_gitea_mcp_server_version" => repo::server_version,
            "get_me" => repo::me,
            "list_branches" => repo::list_branches,
            "search_repos" => repo::search_repos,
            "create_branch" => repo::create_branch,
            "delete_branch" => repo::delete_branch,
            "get_file_contents" => repo::get_file,
            "get_dir_contents" => repo::get_dir,
            "create_or_update_file" => repo::create_or_update_file,
            "delete_file" => repo::delete_file,
            "list_commits" => repo::list_commits,
            "get_commit" => repo::get_commit,
            "list_issues" => issues::list,
            "issue_read" => issues::read,
            "issue_write" => issues::write,
            "list_pull_requests" => pulls::list,
            "pull_request_read" => pulls::read,
            "pull_request_write" => pulls::write,
            "pull_request_review_write" => pulls::review_write,
            "actions_run_read" => repo::actions_run_read,
            _ => return None,
        };
        Some(handler(self, args))
    }
}

#[derive(Clone, Debug)]
struct Fixture {
    forge: Arc<Forge>,
    /// The forge as seen by calls on each of its repositories (the served one first).
    views: Vec<Arc<Forge>>,
    surface: Surface,
}

/// The tool surface the fixture offers.
#[derive(Clone, Debug)]
enum Surface {
    Gitea(catalog::Variant),
    /// GitHub's server; the toolsets a dynamic one has turned on so far.
    Github(github_catalog::Variant, Arc<std::sync::Mutex<Vec<String>>>),
}

/// The keys gitea-mcp's v1.0 line reads instead of the go-sdk generation's: a call is
/// answered as that release reads it (the newer keys are ignored, as there).
const V1_KEYS: &[(&str, &str)] = &[("index", "pull_number"), ("perPage", "per_page"), ("keyword", "query")];

impl Fixture {
    fn listing(&self) -> Vec<Value> {
        match &self.surface {
            Surface::Gitea(variant) => catalog::tools(*variant),
            Surface::Github(variant, enabled) => {
                let mut tools = github_catalog::tools(*variant);
                let on = enabled.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                for set in on.iter() {
                    tools.extend(github_catalog::toolset(set, *variant));
                }
                tools
            }
        }
    }

    /// One call: the answer, the tool error's text, or `None` for a tool not listed.
    fn call(&self, tool: &str, mut arguments: args::Args) -> Option<Result<Value, String>> {
        match &self.surface {
            Surface::Gitea(variant) => {
                if variant.release_v1 {
                    for (old, new) in V1_KEYS {
                        let number =
                            if *new == "pull_number" && tool.starts_with("issue") { "issue_number" } else { new };
                        arguments.remove(number);
                        if let Some(v) = arguments.remove(*old) {
                            arguments.insert(number.to_owned(), v);
                        }
                    }
                }
                self.view_for(&arguments).call(tool, &arguments)
            }
            Surface::Github(variant, enabled) => {
                if variant.dynamic {
                    match tool {
                        "list_available_toolsets" => {
                            let on = enabled.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
                            return Some(Ok(json!({ "enabled": on, "available": github_catalog::DEFAULT_TOOLSETS })));
                        }
                        "get_toolset_tools" | "enable_toolset" => {
                            let set = args::string(&arguments, "toolset");
                            let set = match set {
                                Ok(set) if github_catalog::DEFAULT_TOOLSETS.contains(&set.as_str()) => set,
                                Ok(set) => return Some(Err(format!("toolset {set} not found"))),
                                Err(e) => return Some(Err(e)),
                            };
                            if tool == "get_toolset_tools" {
                                let names: Vec<Value> =
                                    github_catalog::toolset(&set, *variant).iter().map(|t| t["name"].clone()).collect();
                                return Some(Ok(json!(names)));
                            }
                            let mut on = enabled.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                            if !on.contains(&set) && !github_catalog::DYNAMIC_START.contains(&set.as_str()) {
                                on.push(set.clone());
                            }
                            return Some(Ok(json!(format!("Toolset {set} enabled"))));
                        }
                        _ => {}
                    }
                }
                if !self.listing().iter().any(|t| t["name"] == tool) {
                    return None;
                }
                github::call(&self.forge, tool, &arguments)
            }
        }
    }
}

impl Fixture {
    /// The view of the repository a call's `owner` and `repo` name (the served one when they
    /// name none of the forge's others).
    fn view_for(&self, args: &args::Args) -> &Forge {
        let (Some(owner), Some(repo)) =
            (args.get("owner").and_then(Value::as_str), args.get("repo").and_then(Value::as_str))
        else {
            return &self.forge;
        };
        let named = format!("{owner}/{repo}");
        self.views.iter().skip(1).find(|v| v.full_name().eq_ignore_ascii_case(&named)).unwrap_or(&self.forge)
    }

    /// One call under the forge's world lock, then what the forge does on its own after it.
    fn call_and_act(&self, tool: &str, arguments: args::Args) -> Option<Result<Value, String>> {
        let world = &self.forge.world;
        let grammar = match self.surface {
            Surface::Gitea(_) => automation::Grammar::Gitea,
            Surface::Github(..) => automation::Grammar::Github,
        };
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.forge.ledger.world_lock())
            .and_then(|l| l.lock().map(|()| l));
        let before = match &lock {
            Ok(_) => automation::before(world, &self.forge.ledger).map_err(|e| eprintln!("forge-fixture: {e}")).ok(),
            Err(e) => {
                eprintln!("forge-fixture: the world lock: {e}");
                None
            }
        };
        let answer = self.call(tool, arguments);
        if let (Some(before), Some(_)) = (&before, &answer)
            && let Err(e) = automation::after(world, &self.forge.ledger, grammar, APP_URL, before)
        {
            eprintln!("forge-fixture: what the forge does after `{tool}`: {e}");
        }
        drop(lock);
        answer
    }
}

fn parse<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, McpError> {
    serde_json::from_value(value).map_err(|e| McpError::internal_error(format!("fixture JSON: {e}"), None))
}

impl ServerHandler for Fixture {
    fn get_info(&self) -> ServerConfig {
        // Only tools: the real server advertises nothing else.
        parse(json!({
            "protocolVersion": "2025-11-25",
            "capabilities": { "tools": { "listChanged": false } },
            "serverInfo": { "name": "Gitea MCP Server (fleetgate forge fixture)", "version": env!("CARGO_PKG_VERSION") }
        }))
        .unwrap_or_default()
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        parse(json!({ "tools": self.listing() }))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let fixture = self.clone();
        let name = request.name.to_string();
        let arguments = request.arguments.unwrap_or_default();
        let tool = name.clone();
        // Git and the ledger's lock block: off the runtime's thread.
        let answer = tokio::task::spawn_blocking(move || fixture.call_and_act(&tool, arguments))
            .await
            .map_err(|e| McpError::internal_error(format!("forge call: {e}"), None))?;
        let result = match answer {
            None => return Err(McpError::invalid_params(format!("unknown tool {name:?}"), None)),
            Some(Ok(value)) => {
                let text = serde_json::to_string(&value).map_err(|e| McpError::internal_error(e.to_string(), None))?;
                json!({ "content": [{ "type": "text", "text": text }] })
            }
            Some(Err(why)) => json!({ "content": [{ "type": "text", "text": why }], "isError": true }),
        };
        let result: CallToolResult = parse(result)?;
        Ok(result.into())
    }
}

fn fixture(flags: Flags) -> Result<Fixture, String> {
    if !flags.close_keywords.is_empty() || !flags.reopen_keywords.is_empty() {
        if flags.surface != "gitea-mcp" {
            return Err("--close-keyword and --reopen-keyword are a Gitea instance's settings".into());
        }
        refs::set_instance_keywords(&flags.close_keywords, &flags.reopen_keywords)?;
    }
    let repo = flags.repo.canonicalize().map_err(|e| format!("--repo {}: {e}", flags.repo.display()))?;
    let (owner, name) =
        flags.slug.split_once('/').ok_or_else(|| format!("--slug {:?} is not OWNER/NAME", flags.slug))?;
    let git = git::Git::new(&repo, &flags.user);
    if git.commit_of("HEAD").is_none() && git.branches().map_or(true, |b| b.is_empty()) {
        return Err(format!("--repo {}: not a git repository with a commit", repo.display()));
    }
    let mut variant = catalog::Variant::default();
    let mut hub = github_catalog::Variant::default();
    let github = match flags.surface.as_str() {
        "gitea-mcp" => false,
        "github-mcp" => true,
        other => return Err(format!("--surface {other:?}: known are gitea-mcp, github-mcp")),
    };
    for v in &flags.variants {
        match (github, v.as_str()) {
            (false, "changed-description") => variant.changed_description = true,
            (false, "new-method") => variant.new_method = true,
            (_, "race-merge") => variant.race_merge = true,
            (false, "no-head-pin") => variant.no_head_pin = true,
            (false, "release-v1") => variant.release_v1 = true,
            (false, "renamed-query") => variant.renamed_query = true,
            (true, "head-pin") => hub.head_pin = true,
            (true, "granular") => hub.granular = true,
            (true, "dynamic-toolsets") => hub.dynamic = true,
            (false, other) => {
                return Err(format!(
                    "--variant {other:?}: known for gitea-mcp are changed-description, new-method, race-merge, \
                     no-head-pin, release-v1, renamed-query"
                ));
            }
            (true, other) => {
                return Err(format!(
                    "--variant {other:?}: known for github-mcp are head-pin, granular, dynamic-toolsets, race-merge"
                ));
            }
        }
    }
    let state = flags.state.unwrap_or_else(|| repo.join("fleetgate-forge.json"));
    let mut world = vec![automation::WorldRepo { full_name: flags.slug.clone(), git: git.clone() }];
    for fork in &flags.fork {
        let (slug, path) = fork.split_once('=').ok_or_else(|| format!("--fork {fork:?} is not OWNER/NAME=PATH"))?;
        if !slug.contains('/') {
            return Err(format!("--fork {fork:?}: {slug:?} is not OWNER/NAME"));
        }
        let path = std::path::Path::new(path).canonicalize().map_err(|e| format!("--fork {path}: {e}"))?;
        let fork_git = git::Git::new(&path, &flags.user);
        // A fork and its parent share objects on a forge: a PR's head is in both.
        fork_git.share_objects_with(&git)?;
        git.share_objects_with(&fork_git)?;
        world.push(automation::WorldRepo { full_name: slug.to_owned(), git: fork_git });
    }
    let world = Arc::new(world);
    let ledger = ledger::Ledger::new(&state).focused(&flags.slug, &flags.slug);
    let views: Vec<Arc<Forge>> = world
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let (o, n) = r.full_name.split_once('/').unwrap_or((owner, name));
            Arc::new(Forge {
                git: r.git.clone(),
                ledger: ledger.focused(&flags.slug, &r.full_name),
                owner: o.to_owned(),
                name: n.to_owned(),
                user: flags.user.clone(),
                race_merge: variant.race_merge,
                aliases: if i == 0 { flags.aliases.clone() } else { Vec::new() },
                forks: if i == 0 { flags.forks } else { 0 },
                head_pin: hub.head_pin,
                world: Arc::clone(&world),
            })
        })
        .collect();
    let surface = if github { Surface::Github(hub, Arc::default()) } else { Surface::Gitea(variant) };
    Ok(Fixture { forge: Arc::clone(&views[0]), views, surface })
}

/// Serve GitHub's REST API on `addr` until killed: the address bound is printed first.
fn serve_rest(flags: Flags, addr: &str) -> Result<(), String> {
    if flags.surface != "github-mcp" {
        return Err("--rest-listen serves GitHub's REST API: it needs --surface github-mcp".into());
    }
    let mut tokens = Vec::new();
    for t in &flags.tokens {
        let (token, login) = t.split_once('=').ok_or_else(|| format!("--token {t:?} is not TOKEN=LOGIN"))?;
        tokens.push((token.to_owned(), login.to_owned()));
    }
    let listener = std::net::TcpListener::bind(addr).map_err(|e| format!("--rest-listen {addr}: {e}"))?;
    let bound = listener.local_addr().map_err(|e| e.to_string())?;
    let forge = fixture(flags)?.forge;
    {
        use std::io::Write;
        let mut out = std::io::stdout();
        writeln!(out, "listening on http://{bound}").and_then(|()| out.flush()).map_err(|e| e.to_string())?;
    }
    rest::serve(forge, Arc::new(tokens), &listener);
    Ok(())
}

/// Serve MCP on stdin/stdout until the client goes away.
async fn serve(flags: Flags) -> Result<(), String> {
    let running = fixture(flags)?.serve((tokio::io::stdin(), tokio::io::stdout())).await.map_err(|e| e.to_string())?;
    running.waiting().await.map(drop).map_err(|e| e.to_string())
}

/// `fleetgate-forge-fixture ARGS…`: serve until the client goes away (exit 0), or
/// exit 1 with the cause on stderr.
pub fn run(argv: &[String]) -> ExitCode {
    let flags = match Flags::try_parse_from(std::iter::once("forge-fixture".to_owned()).chain(argv.iter().cloned())) {
        Ok(flags) => flags,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(2);
        }
    };
    if let Some(addr) = flags.rest_listen.clone() {
        return match serve_rest(flags, &addr) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("forge-fixture: {e}");
                ExitCode::from(1)
            }
        };
    }
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("forge-fixture: cannot start a runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(serve(flags)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("forge-fixture: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests;
