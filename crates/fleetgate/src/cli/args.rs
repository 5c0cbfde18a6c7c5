//! Raw command-line flags. Values an operator types as numbers are taken as
//! text here and validated in the command, so a bad value is a clear error
//! with exit 1, while a malformed command line is a usage error with exit 2.

use crate::cli::examples;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// fleetgate: the control plane for a fleet of LLM-client MCP servers.
#[derive(Debug, Parser)]
#[command(name = "fleetgate", version, about, propagate_version = true)]
pub struct Cli {
    /// Control-plane store: a SQLite path, sqlite://PATH or postgres://URL
    /// (default: <PREFIX>WORKER_REGISTRY_DB, else $XDG_STATE_HOME/fleetgate/registry.sqlite3).
    #[arg(long, global = true, value_name = "PATH_OR_URL")]
    pub store: Option<String>,
    /// Roster configuration (TOML; default: $XDG_CONFIG_HOME/fleetgate/fleet.toml, else built-in).
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print exactly one JSON object on stdout.
    #[arg(long, global = true)]
    pub json: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Top-level commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the MCP gateway for one roster member on stdio, in front of an optional downstream
    /// MCP server: `fleetgate serve --profile P [-- DOWNSTREAM ARGV…]`.
    #[command(after_help = examples::SERVE)]
    Serve(Box<ServeArgs>),
    /// Serve the live fleet page (read-only but for approval answers, with its token):
    /// `fleetgate dashboard [--listen 127.0.0.1:8760]`, `/api/fleet`, `/events`, `/metrics`.
    #[command(after_help = examples::DASHBOARD)]
    Dashboard(Box<DashboardArgs>),
    /// Tell the fleet's story with real processes on a throwaway store.
    ///
    /// Five gateways open the gate, a second cohort closes it, a killed member goes stale; then
    /// the pull-request workflow through four gateways over the forge stand-in, and an
    /// operator's approval of one exact merge. `--forge github-mcp` tells the workflow in front
    /// of GitHub's server instead of Gitea's.
    Demo {
        /// The forge whose server the stand-in plays: gitea-mcp or github-mcp.
        #[arg(long, default_value = "gitea-mcp")]
        forge: String,
    },
    /// Print a shell completion script (bash, zsh, fish, powershell, elvish).
    ///
    /// `fleetgate completions bash > ~/.local/share/bash-completion/completions/fleetgate`
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write a first, commented fleet.toml for a forge profile, then the doctor's next step.
    ///
    /// `fleetgate init --forge gitea-mcp` (or `--forge github-mcp`) reads the checkout's git
    /// remote for the binding and writes the five-member roster, the workflow defaults and the
    /// forge command to `--config`
    /// (default: $XDG_CONFIG_HOME/fleetgate/fleet.toml) — never over an existing file unless
    /// `--force` (which keeps a backup). With `--client claude-code --client codex` it shows
    /// the doctor's repair of those clients, and writes it with `--apply`.
    #[command(after_help = examples::INIT)]
    Init(InitArgs),
    /// Print the manual page (roff).
    ///
    /// `fleetgate man > ~/.local/share/man/man1/fleetgate.1`
    Man,
    /// The guard `fleetgate serve` starts each downstream run through (not for operators):
    /// it runs `-- PROGRAM [ARGS…]` in its process group and SIGKILLs the group when the
    /// gateway is gone, `kill -9` included (`fleetgate_supervise::guard`).
    #[command(hide = true, name = "downstream-guard")]
    DownstreamGuard {
        /// The downstream's command line, after `--`.
        #[arg(last = true, required = true)]
        command: Vec<std::ffi::OsString>,
    },
    /// The worker registry: register, renew (fenced), claim, inspect.
    #[command(subcommand)]
    Worker(WorkerCommand),
    /// Runtime rows: what each fleet server process says about itself.
    #[command(subcommand)]
    Runtime(RuntimeCommand),
    /// Assess the fleet: runtime rows against this host's own process observation
    /// (exit 0 gate open, 3 gate closed, 1 not assessable).
    #[command(after_help = examples::INVENTORY)]
    Inventory {
        /// Who is answering (changes no field of the verdict but `answering_namespace`).
        #[arg(long)]
        answering_namespace: Option<String>,
    },
    /// The environment gate: which keys fleetgate reads, and whether this environment is supported.
    #[command(subcommand)]
    Env(EnvCommand),
    /// Evaluate the mutation gate for one tool, with diagnostics and inventory taken live
    /// (exit 0 allowed, 3 blocked).
    #[command(after_help = examples::CAPABILITY)]
    Capability {
        /// The deciding server's profile.
        #[arg(long)]
        profile: String,
        /// The tool to be called.
        #[arg(long)]
        tool: String,
        /// The worker the call would be made for.
        #[arg(long)]
        worker: Option<String>,
        /// The downstream annotates the tool readOnlyHint: true.
        #[arg(long)]
        read_only_hint: bool,
        /// The call's arguments, as a JSON object (the verdict may depend on them).
        #[arg(long = "args", value_name = "JSON")]
        arguments: Option<String>,
    },
    /// Calls a rule asks an operator about: list them, approve or deny one exact call.
    #[command(subcommand, after_help = examples::APPROVALS)]
    Approvals(ApprovalsCommand),
    /// Delete old history by `[retention]` (each flag wins over its key): audit entries,
    /// answered approvals and delivered events, closed PRs' records and superseded pushes
    /// (the forge is asked), host observations, stopped worker and runtime rows. Nothing still
    /// referenced goes. Exit 0; 3 when something old was kept because the forge could not
    /// answer for it (unreachable, or no `[workflow] forge_command`).
    #[command(after_help = examples::PRUNE)]
    Prune(PruneHistoryArgs),
    /// A rule change previewed: `rules test` judges the audited history again by the rules
    /// of `--config` (exit 0 nothing flips, 3 something flips); `rules diff OLD NEW`.
    #[command(subcommand, after_help = examples::RULES)]
    Rules(RulesCommand),
    /// The audit log of mutation-gate decisions.
    #[command(after_help = examples::AUDIT)]
    Audit {
        /// Only entries at or after this time (YYYY-MM-DDTHH:MM:SSZ).
        #[arg(long)]
        since: Option<String>,
        /// At most this many (the newest).
        #[arg(long, default_value = "100")]
        limit: String,
    },
    /// Check each LLM client's MCP configuration against the roster (exit 0 clean, 3 findings,
    /// 1 a file that cannot be read); `--fix` shows the repair, `--fix --apply` writes it.
    #[command(after_help = examples::DOCTOR)]
    Doctor(DoctorArgs),
    /// The pull-request workflow: review and merge leases, the decisions pinned to exact heads.
    #[command(subcommand, after_help = examples::PR)]
    Pr(PrCommand),
    /// Pinned downstream tool definitions: list them, accept a changed one.
    #[command(subcommand, after_help = examples::TOOLS)]
    Tools(ToolsCommand),
    /// Diagnostics for operators and tests (renewal loops, store soak).
    #[command(subcommand, hide = true)]
    Debug(DebugCommand),
}

/// `fleetgate init …`
#[derive(Debug, Args)]
pub struct InitArgs {
    /// The forge profile: gitea-mcp (the official Gitea MCP server) or github-mcp (GitHub's
    /// official MCP server, github-mcp-server).
    #[arg(long, default_value = "gitea-mcp")]
    pub forge: String,
    /// The checkout whose git remote names the repository (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub repo_root: Option<PathBuf>,
    /// The git remote to read.
    #[arg(long, default_value = "origin")]
    pub remote: String,
    /// Replace an existing file, keeping a backup beside it.
    #[arg(long)]
    pub force: bool,
    /// Add the members to this client's configuration through the doctor's repair; repeatable.
    #[arg(long = "client", value_name = "NAME", value_delimiter = ',')]
    pub clients: Vec<String>,
    /// With --client: write the repair (else it is shown as a diff).
    #[arg(long, requires = "clients")]
    pub apply: bool,
    /// With --client: read the clients' user files under DIR instead of $HOME.
    #[arg(long, value_name = "DIR", requires = "clients")]
    pub home: Option<PathBuf>,
}

/// `fleetgate approvals …`
#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// The requests waiting for an answer (`--all`: every request, answered ones too).
    List {
        /// Every request, not only the pending ones.
        #[arg(long)]
        all: bool,
    },
    /// Approve one pending request: the identical call passes once, within `[approvals] ttl_seconds`.
    Approve {
        /// The request (`apr-…`).
        id: String,
        /// Why, for the audit log.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Deny one pending request: the held call is refused `approval_denied`.
    Deny {
        /// The request (`apr-…`).
        id: String,
        /// Why, for the audit log.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Follow the requests and answers as they happen, one line each (`--json`: one JSON
    /// object per line): a request, an answer, a use, a withdrawal, an expiry. Runs until
    /// interrupted, or `--count` events.
    Watch {
        /// Stop after this many events.
        #[arg(long)]
        count: Option<usize>,
        /// Start after this event id (0: every event on record) instead of from now.
        #[arg(long)]
        after: Option<i64>,
    },
}

/// `fleetgate rules …`
#[derive(Debug, Subcommand)]
pub enum RulesCommand {
    /// Judge every audited `tools/call` decision in the window again by the rules of
    /// `--config NEW.toml`: the decisions that would flip, by rule and tool, and those that
    /// cannot be judged. Exit 0 nothing flips, 3 something flips, 1 cannot read.
    Test {
        /// Only decisions at or after this time (YYYY-MM-DDTHH:MM:SSZ).
        #[arg(long)]
        since: Option<String>,
        /// Only decisions before this time.
        #[arg(long)]
        until: Option<String>,
        /// Only the decisions of this profile.
        #[arg(long)]
        profile: Option<String>,
    },
    /// The shadow candidate's flips on live traffic (`fleetgate serve --shadow`), grouped by
    /// outcome, candidate rule and tool like `rules test` (exit 0 none, 3 some).
    ShadowReport {
        /// Only flips at or after this time (YYYY-MM-DDTHH:MM:SSZ).
        #[arg(long)]
        since: Option<String>,
        /// Only the flips of this profile.
        #[arg(long)]
        profile: Option<String>,
    },
    /// Compare the rules of two configurations without traffic: added, removed, changed,
    /// shadowed (exit 0 the same, 3 they differ).
    Diff {
        /// The current configuration.
        old: PathBuf,
        /// The proposed one.
        new: PathBuf,
    },
}

/// `fleetgate pr …`
#[derive(Debug, Subcommand)]
pub enum PrCommand {
    /// The live PR leases (`--all`: released and expired ones too).
    List {
        /// Every lease, not only the live ones.
        #[arg(long)]
        all: bool,
    },
    /// One PR: its leases, its decisions, the forge's head and what a merge still needs.
    Show {
        /// The PR number.
        pr: u64,
        /// Repository owner (default: the roster's [binding] org).
        #[arg(long)]
        owner: Option<String>,
        /// Repository name (default: the roster's [binding] repo).
        #[arg(long)]
        repo: Option<String>,
    },
    /// Release a lease (`LEASE_ID --reason R`), or every live lease whose PR the forge reports
    /// merged or closed (`--stale`).
    Release {
        /// The lease to release.
        #[arg(required_unless_present = "stale", conflicts_with = "stale")]
        lease_id: Option<String>,
        /// Why (recorded on the lease).
        #[arg(long)]
        reason: Option<String>,
        /// Release the leases of merged or closed PRs.
        #[arg(long)]
        stale: bool,
    },
    /// The review-decision locks: which reviewer session holds which PR's (`--all`: released
    /// ones too).
    Locks {
        /// Every lock, not only the live ones.
        #[arg(long)]
        all: bool,
    },
    /// Release a review-decision lock whose PR was merged or closed outside the fleet (the
    /// forge must say so).
    ReleaseLock {
        /// The lock.
        lock_id: String,
        /// Why (recorded on the lock and in the audit log).
        #[arg(long)]
        reason: Option<String>,
    },
    /// Clear every standing review decision a worker made on a PR (a request-changes that
    /// stands until its reviewer approves, or an approval an operator withdraws). Kept,
    /// marked cleared with the reason, and audited.
    ClearDecision {
        /// The PR number.
        pr: u64,
        /// The worker whose decisions are cleared (`fleetgate pr show` names it).
        #[arg(long)]
        worker: String,
        /// Why (kept on each decision and in the audit log).
        #[arg(long)]
        reason: Option<String>,
        /// Repository owner (default: the roster's [binding] org).
        #[arg(long)]
        owner: Option<String>,
        /// Repository name (default: the roster's [binding] repo).
        #[arg(long)]
        repo: Option<String>,
    },
}

/// `fleetgate tools …`
#[derive(Debug, Subcommand)]
pub enum ToolsCommand {
    /// The pinned tool definitions and the ones that changed since.
    List {
        /// Only this profile's downstream.
        #[arg(long)]
        profile: Option<String>,
    },
    /// Accept the definitions seen last as the pinned ones (every changed tool when none is named).
    Accept {
        /// Only this profile's downstream.
        #[arg(long)]
        profile: Option<String>,
        /// The tools to accept.
        tools: Vec<String>,
    },
}

/// `fleetgate doctor`
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Only these clients (claude-code, claude-desktop, gemini, codex, cursor, vscode); repeatable.
    #[arg(long = "client", value_name = "NAME", value_delimiter = ',')]
    pub clients: Vec<String>,
    /// Read the user files under DIR instead of $HOME (XDG_CONFIG_HOME and CODEX_HOME are then ignored).
    #[arg(long, value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// The project whose files to read (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub project: Option<PathBuf>,
    /// Show the repair as a unified diff (a dry run: nothing is written).
    #[arg(long, conflicts_with = "snippet")]
    pub fix: bool,
    /// With --fix: write it, each file backed up beside itself and replaced atomically.
    #[arg(long, requires = "fix")]
    pub apply: bool,
    /// Print the block to paste into one client's configuration (with exactly one --client).
    #[arg(long, requires = "clients")]
    pub snippet: bool,
    /// With --snippet: the downstream MCP server fleetgate fronts (default: as the client runs it).
    #[arg(last = true, value_name = "DOWNSTREAM")]
    pub downstream: Vec<String>,
}

/// `fleetgate worker …`
#[derive(Debug, Subcommand)]
pub enum WorkerCommand {
    /// Register a worker and print its identity and fencing epoch.
    Register(RegisterArgs),
    /// Renew a worker's lease, fenced by epoch and optional expectations (exit 3 when refused).
    Heartbeat(HeartbeatArgs),
    /// Claim a new generation: bump the epoch and fence every older holder.
    ClaimGeneration(ClaimArgs),
    /// Show one worker with its liveness as of now.
    Show {
        /// The worker identity.
        identity: String,
    },
    /// List every worker.
    List,
    /// Mark a worker stopped (orderly shutdown).
    Deregister {
        /// The worker identity.
        identity: String,
    },
    /// Delete history: stopped or expired worker rows last heard from at least D ago.
    /// A live lease is never deleted.
    Prune(PruneArgs),
}

/// `fleetgate prune`: ages over `[retention]`'s.
#[derive(Debug, Args)]
pub struct PruneHistoryArgs {
    /// Audit entries older than this (at least 1d).
    #[arg(long, value_name = "D")]
    pub audit: Option<String>,
    /// Approval requests answered longer ago than this, and delivered events (at least 1d).
    #[arg(long, value_name = "D")]
    pub approvals: Option<String>,
    /// Closed PRs' records idle this long, and pushes this old whose branch moved on (at least 1d).
    #[arg(long, value_name = "D")]
    pub workflow: Option<String>,
    /// Observations of hosts silent this long (at least 1d).
    #[arg(long, value_name = "D")]
    pub observations: Option<String>,
    /// Stopped or expired worker rows silent this long.
    #[arg(long, value_name = "D")]
    pub workers: Option<String>,
    /// Stopped runtime rows silent this long.
    #[arg(long, value_name = "D")]
    pub runtimes: Option<String>,
}

/// `worker prune`, `runtime prune`
#[derive(Debug, Args)]
pub struct PruneArgs {
    /// The age: a whole number and s, m, h, d or w (30m, 12h, 7d).
    #[arg(long, value_name = "D", allow_hyphen_values = true)]
    pub older_than: String,
}

/// `fleetgate env …`
#[derive(Debug, Subcommand)]
pub enum EnvCommand {
    /// Classify this process's environment; exit 3 when an unsupported <PREFIX>* key is set.
    Check,
    /// Every key fleetgate reads, with its meaning.
    Keys,
}

/// `fleetgate runtime …`
#[derive(Debug, Subcommand)]
pub enum RuntimeCommand {
    /// Write the runtime row of a server fleetgate does not run itself (the sidecar path).
    Register(Box<RuntimeRegisterArgs>),
    /// List runtime rows.
    List,
    /// Refresh a running row's last_heartbeat_at.
    Touch {
        /// The runtime id (`namespace:pid:boot_id`).
        runtime_id: String,
    },
    /// Mark a runtime row stopped (orderly shutdown).
    Deregister {
        /// The runtime id (`namespace:pid:boot_id`).
        runtime_id: String,
    },
    /// Delete history: stopped runtime rows last heard from at least D ago. A running row
    /// is never deleted.
    Prune(PruneArgs),
}

/// `runtime register`
#[derive(Debug, Args)]
pub struct RuntimeRegisterArgs {
    /// MCP namespace (gitea-author, …).
    #[arg(long)]
    pub namespace: String,
    /// Profile (prgs-author, …).
    #[arg(long)]
    pub profile: String,
    /// Role the server declares.
    #[arg(long)]
    pub role: String,
    /// The server's pid.
    #[arg(long, allow_negative_numbers = true)]
    pub pid: String,
    /// Repository HEAD the server started at (default: git HEAD of --repo-root, else unknown).
    #[arg(long)]
    pub startup_head: Option<String>,
    /// Cohort id (default: derived from the server's parent process).
    #[arg(long)]
    pub cohort: Option<String>,
    /// The repository the server is bound to.
    #[command(flatten)]
    pub binding: BindingArgs,
    /// The checkout the server works in.
    #[arg(long)]
    pub repo_root: Option<std::path::PathBuf>,
    /// Transport the server speaks.
    #[arg(long, default_value = "stdio")]
    pub transport: String,
    /// How the server was launched.
    #[arg(long, default_value = "sidecar")]
    pub provenance: String,
}

/// `--remote --org --repo`: a repository binding, all three or none.
#[derive(Debug, Args)]
pub struct BindingArgs {
    /// Forge remote the server is bound to.
    #[arg(long, requires_all = ["org", "repo"])]
    pub remote: Option<String>,
    /// Organisation the server is bound to.
    #[arg(long, requires_all = ["remote", "repo"])]
    pub org: Option<String>,
    /// Repository the server is bound to.
    #[arg(long, requires_all = ["remote", "org"])]
    pub repo: Option<String>,
}

impl BindingArgs {
    /// The binding, when given.
    pub fn binding(&self) -> Option<fleetgate_core::runtime::Binding> {
        match (&self.remote, &self.org, &self.repo) {
            (Some(remote), Some(org), Some(repo)) => {
                Some(fleetgate_core::runtime::Binding { remote: remote.clone(), org: org.clone(), repo: repo.clone() })
            }
            _ => None,
        }
    }
}

/// `worker register`
#[derive(Debug, Args)]
pub struct RegisterArgs {
    /// Client application (normalised: claude, claude-code → claude_code).
    #[arg(long)]
    pub client: String,
    /// Client session id.
    #[arg(long)]
    pub session: String,
    /// Generation id.
    #[arg(long)]
    pub generation: String,
    /// Role (author, reviewer, merger, controller, reconciler).
    #[arg(long)]
    pub role: String,
    /// Profile (prgs-author, …).
    #[arg(long)]
    pub profile: String,
    /// Client instance id (default: the session id).
    #[arg(long)]
    pub instance: Option<String>,
    /// Server pid (default: the calling process, this command's parent).
    #[arg(long, allow_negative_numbers = true)]
    pub pid: Option<String>,
    /// Lease length in seconds (default: the fleet's heartbeat_ttl_seconds).
    #[arg(long, allow_negative_numbers = true)]
    pub ttl: Option<String>,
}

/// `worker heartbeat`
#[derive(Debug, Args)]
pub struct HeartbeatArgs {
    /// The worker identity.
    #[arg(long)]
    pub identity: String,
    /// The fencing epoch held.
    #[arg(long, allow_negative_numbers = true)]
    pub epoch: String,
    /// Refuse unless the row's session is this.
    #[arg(long)]
    pub expect_session: Option<String>,
    /// Refuse unless the row's generation is this.
    #[arg(long)]
    pub expect_generation: Option<String>,
    /// Refuse unless the row's client is this (compared normalised).
    #[arg(long)]
    pub expect_client: Option<String>,
    /// Refuse unless the row's pid is this.
    #[arg(long, allow_negative_numbers = true)]
    pub expect_pid: Option<String>,
}

/// `worker claim-generation`
#[derive(Debug, Args)]
pub struct ClaimArgs {
    /// The worker identity.
    #[arg(long)]
    pub identity: String,
    /// The new generation id.
    #[arg(long)]
    pub generation: String,
}

/// `fleetgate debug …`
#[derive(Debug, Subcommand)]
pub enum DebugCommand {
    /// The downstream guard's former place, kept so a command line written for it still
    /// runs: the same as `fleetgate downstream-guard`.
    #[command(hide = true, name = "downstream-guard")]
    DownstreamGuard {
        /// The downstream's command line, after `--`.
        #[arg(last = true, required = true)]
        command: Vec<std::ffi::OsString>,
    },
    /// Renew one worker in a tight loop and report every answer (store soak and fencing races).
    RenewLoop {
        /// The worker identity.
        #[arg(long)]
        identity: String,
        /// The fencing epoch held.
        #[arg(long)]
        epoch: String,
        /// How many renewals to attempt.
        #[arg(long, default_value = "1000")]
        count: String,
        /// Stop early after this many seconds.
        #[arg(long, default_value = "60")]
        max_seconds: String,
    },
}

/// `fleetgate dashboard`
#[derive(Debug, Args)]
pub struct DashboardArgs {
    /// The address to listen on (loopback unless `--allow-remote`; port 0 picks one).
    #[arg(long, default_value = "127.0.0.1:8760")]
    pub listen: String,
    /// Allow a non-loopback `--listen` address; FLEETGATE_DASHBOARD_TOKEN is then required.
    #[arg(long)]
    pub allow_remote: bool,
    /// Another `Host` value to accept (a DNS name of a remote deployment); repeatable.
    #[arg(long = "allowed-host", value_name = "HOST[:PORT]")]
    pub allowed_hosts: Vec<String>,
    /// Seconds between looks at the store and the host.
    #[arg(long, default_value = "1")]
    pub interval: String,
    /// Open connections at most (event streams included); past it a new one is answered
    /// 503 and closed.
    #[arg(long, default_value = "256")]
    pub max_connections: String,
    /// Seconds a connection may take to send a request head (also the idle keep-alive
    /// timeout); an open event stream is not timed.
    #[arg(long, default_value = "10")]
    pub header_timeout: String,
    /// Sign operators in with OpenID Connect as this client (authorization code with PKCE):
    /// approvals from the page are then recorded as the person (`oidc:<subject>`).
    #[arg(long, value_name = "CLIENT_ID")]
    pub oidc_client_id: Option<String>,
    /// The issuer people sign in at (default: the roster's `[http.oauth] issuer`).
    #[arg(long, value_name = "URL", requires = "oidc_client_id")]
    pub oidc_issuer: Option<String>,
    /// Where the issuer sends people back, as registered (default: this listener's
    /// `http://ADDR/auth/callback`).
    #[arg(long, value_name = "URL", requires = "oidc_client_id")]
    pub oidc_redirect_uri: Option<String>,
    /// The ID token's claim listing a person's groups (`group:<name>` approvers).
    #[arg(long, value_name = "CLAIM", default_value = "groups")]
    pub oidc_groups_claim: String,
}

/// The `--max-message-bytes` accepted: an `initialize` fits in the least, and no single line
/// may take more than 64 MiB of memory.
pub const MESSAGE_BYTES: std::ops::RangeInclusive<usize> = 4096..=64 * 1024 * 1024;

/// `fleetgate serve`
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The roster profile this gateway serves (prgs-author, …).
    #[arg(long)]
    pub profile: String,
    /// The MCP namespace (default: the roster member's).
    #[arg(long)]
    pub namespace: Option<String>,
    /// The checkout this member works in (default: the current directory).
    #[arg(long)]
    pub repo_root: Option<PathBuf>,
    /// The repository this server is bound to (default: the roster's [binding]).
    #[command(flatten)]
    pub binding: BindingArgs,
    /// Largest client message accepted, in bytes (4096 to 67108864).
    #[arg(long, default_value_t = fleetgate_gateway::DEFAULT_MAX_MESSAGE_BYTES)]
    pub max_message_bytes: usize,
    /// The client transport: `stdio` (one client) or `http` (MCP Streamable HTTP at
    /// `http://LISTEN/mcp`, one attachment per session).
    #[arg(long, default_value = "stdio", value_parser = ["stdio", "http"])]
    pub transport: String,
    /// With `--transport http`: the address to listen on (loopback unless
    /// `--allow-remote`).
    #[arg(long, default_value = "127.0.0.1:8750")]
    pub listen: String,
    /// Allow a non-loopback `--listen` (with `--transport http`) or `--metrics-listen`
    /// address (with `--transport stdio`; FLEETGATE_METRICS_TOKEN is then required).
    #[arg(long)]
    pub allow_remote: bool,
    /// With `--transport stdio`: serve `GET /metrics` on this address (loopback unless
    /// `--allow-remote`; port 0 picks one). Default: the roster's `[metrics] listen`, else none.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<String>,
    /// Another `Host` value to accept (a DNS name of a remote deployment) on the HTTP
    /// listener or the metrics listener; repeatable.
    #[arg(long = "allowed-host", value_name = "HOST[:PORT]")]
    pub allowed_hosts: Vec<String>,
    /// With `--transport http`, for replicas behind a load balancer: the address the other
    /// replicas reach this one at, recorded with each session it opens so a request for the
    /// session that reaches another replica is relayed here. Default: the listen address
    /// (none when it is unspecified, `0.0.0.0`: sessions are then not relayed).
    #[arg(long, value_name = "HOST:PORT")]
    pub advertise: Option<String>,
    /// A candidate roster in shadow: every live decision is also judged by its rules and
    /// invariants, never enforced; where it would decide otherwise the flip is audited and
    /// counted. Default: the roster's `[shadow] config`, else none.
    #[arg(long, value_name = "CANDIDATE.toml")]
    pub shadow: Option<PathBuf>,
    /// The downstream MCP server and its arguments, after `--`.
    #[arg(last = true, value_name = "DOWNSTREAM")]
    pub downstream: Vec<std::ffi::OsString>,
}
