//! What the caller tells [`crate::serve`]: the downstream command, limits, supervision
//! settings and the gateway's own identity. Resolved by the caller (the `fleetgate serve`
//! CLI reads flags, the roster and `FLEETGATE_LOG`); this crate reads no environment.

use crate::observe::{GatewayObserver, TraceContext};
use fleetgate_supervise::SupervisionSettings;
use rmcp::model::Implementation;
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The default cap on one client message: 4 MiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// Options of one gateway process.
#[derive(Clone, Debug)]
pub struct GatewayOptions {
    /// The downstream MCP server to run and front; `None` serves the control tools only.
    pub downstream: Option<DownstreamCommand>,
    /// How long a forwarded request (a `tools/call`, a `resources/read`, …) may wait for
    /// the downstream before it is cancelled and answered with a timeout error.
    pub call_timeout: Duration,
    /// How long one run of the downstream may take to answer `initialize` before the run
    /// is killed (and counted as a failure by the supervisor).
    pub downstream_init_timeout: Duration,
    /// How long the client's `initialize` waits for the downstream to come up, so the
    /// first `tools/list` already holds its tools. Past it the gateway answers with what
    /// it has (a quarantined downstream is not waited for at all).
    pub attach_wait: Duration,
    /// The largest client message accepted, in bytes (the line, without its newline).
    pub max_message_bytes: usize,
    /// Restart, budget and quarantine settings for the downstream child.
    pub supervision: SupervisionSettings,
    /// `serverInfo.name` in the gateway's `initialize` answer.
    pub server_name: String,
    /// `serverInfo.version` in the gateway's `initialize` answer.
    pub server_version: String,
    /// `instructions` in the gateway's `initialize` answer (the downstream's are used when
    /// this is `None`).
    pub instructions: Option<String>,
    /// The `tracing` filter for the logs on stderr (`EnvFilter` syntax, e.g. `info` or
    /// `fleetgate_gateway=debug`); `None` logs warnings and errors. Used by [`crate::run`]
    /// only, which installs the subscriber.
    pub log_filter: Option<String>,
    /// Told what the gateway does (forwarded calls, downstream restarts and quarantine,
    /// HTTP sessions) and asked for `GET /metrics` over HTTP; `None` measures nothing.
    pub observer: Option<Arc<dyn GatewayObserver>>,
    /// Links the gateway's spans to the callers' and the downstreams' traces (OpenTelemetry
    /// export); `None` forwards the caller's `_meta` unchanged.
    pub trace: Option<Arc<dyn TraceContext>>,
    /// Over stdio: a listener of its own serving `GET /metrics` (the observer's exposition);
    /// `None` serves none. (Over HTTP the transport's listener serves `/metrics`.)
    pub metrics_listener: Option<MetricsListener>,
    /// Over HTTP: a downstream run per attachment, or one every attachment shares.
    pub sharing: Sharing,
}

/// `[downstream] sharing`: how many downstream runs an HTTP gateway keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Sharing {
    /// One run and connection per attachment (session, stateless client): what the
    /// downstream keeps per client stays that client's. The default.
    #[default]
    Session,
    /// One run and connection for every attachment of the gateway, for servers that keep
    /// no per-client state (gitea-mcp: each call is a forge API request with the one token
    /// it was started with). The gate, the audit and the workers stay per attachment.
    Gateway,
}

impl Sharing {
    /// The config literal.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Session => "session",
            Self::Gateway => "gateway",
        }
    }

    /// The value of a config literal.
    pub fn parse(literal: &str) -> Option<Self> {
        match literal {
            "session" => Some(Self::Session),
            "gateway" => Some(Self::Gateway),
            _ => None,
        }
    }
}

/// A stdio gateway's `/metrics` listener: loopback unless [`allow_remote`](Self::allow_remote),
/// and then only with a bearer token; the `Host`/`Origin` rules and the connection bounds of
/// the HTTP transport's listener.
#[derive(Clone)]
pub struct MetricsListener {
    /// The address to listen on (port 0 picks one).
    pub listen: SocketAddr,
    /// Allow a non-loopback address (the token is then required).
    pub allow_remote: bool,
    /// Extra `Host` values accepted (a remote deployment's DNS name).
    pub allowed_hosts: Vec<String>,
    /// When set, every scrape carries `Authorization: Bearer <token>` (else 401).
    pub bearer_token: Option<String>,
    /// The connection cap and the header timeout.
    pub connections: ConnectionLimits,
    /// Told the bound address, before the gateway serves its client.
    pub bound: fn(SocketAddr),
}

impl std::fmt::Debug for MetricsListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token is a secret: only whether one is set.
        f.debug_struct("MetricsListener")
            .field("listen", &self.listen)
            .field("allow_remote", &self.allow_remote)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("bearer_token", &self.bearer_token.as_ref().map(|_| "<set>"))
            .field("connections", &self.connections)
            .finish_non_exhaustive()
    }
}

impl Default for GatewayOptions {
    fn default() -> Self {
        Self {
            downstream: None,
            call_timeout: Duration::from_secs(300),
            downstream_init_timeout: Duration::from_secs(30),
            attach_wait: Duration::from_secs(10),
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            supervision: SupervisionSettings::default(),
            server_name: "fleetgate".to_owned(),
            server_version: env!("CARGO_PKG_VERSION").to_owned(),
            instructions: None,
            log_filter: None,
            observer: None,
            trace: None,
            metrics_listener: None,
            sharing: Sharing::Session,
        }
    }
}

/// The downstream MCP server's command line, environment and working directory.
#[derive(Clone)]
pub struct DownstreamCommand {
    /// The program (looked up on `PATH` when it has no slash).
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Variables set for it, on top of the inherited environment (or instead of it with
    /// [`env_clear`](Self::env_clear)).
    pub env: Vec<(OsString, OsString)>,
    /// Start it with an empty environment plus [`env`](Self::env): how the caller passes
    /// only the profile's declared pass-through keys.
    pub env_clear: bool,
    /// Its working directory; the gateway's when `None`.
    pub cwd: Option<PathBuf>,
    /// A guard program and its arguments to start each run through (see
    /// `fleetgate_supervise::ChildSpec::guard`): with one, the run's whole process group
    /// dies with the gateway even on `kill -9`; without, only the direct child does.
    pub guard: Option<(OsString, Vec<OsString>)>,
}

impl DownstreamCommand {
    /// `argv[0]` with the rest as arguments; `None` for an empty argv.
    pub fn from_argv<I, S>(argv: I) -> Option<Self>
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        let mut argv = argv.into_iter().map(Into::into);
        let program = argv.next()?;
        Some(Self { program, args: argv.collect(), env: Vec::new(), env_clear: false, cwd: None, guard: None })
    }
}

impl std::fmt::Debug for DownstreamCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Values may be secrets (a forge token): keys only.
        let env_keys: Vec<&OsString> = self.env.iter().map(|(k, _)| k).collect();
        f.debug_struct("DownstreamCommand")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("env_keys", &env_keys)
            .field("env_clear", &self.env_clear)
            .field("cwd", &self.cwd)
            .field("guard", &self.guard)
            .finish()
    }
}

/// Bounds on the HTTP listener's connections (see `http::listen`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Open connections at most; past it a new one is answered 503 and closed.
    pub max_connections: usize,
    /// How long a connection may take to deliver a request head, from when it opens or
    /// its previous answer ended (the idle keep-alive timeout too).
    pub header_timeout: Duration,
    /// How long a POST's body may take to arrive once its head has.
    pub body_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        // 512 stays below the common soft limit of 1024 open files, with room for the
        // downstreams' pipes; 10 s is plenty for a head on any working link.
        Self { max_connections: 512, header_timeout: Duration::from_secs(10), body_timeout: Duration::from_secs(30) }
    }
}

/// The settings the service needs from [`crate::GatewayOptions`].
#[derive(Clone, Debug)]
pub(crate) struct ServiceSettings {
    pub(crate) call_timeout: Duration,
    pub(crate) attach_wait: Duration,
    pub(crate) server_info: Implementation,
    pub(crate) instructions: Option<String>,
    /// Told of forwarded calls (and, over HTTP, of the sessions open).
    pub(crate) observer: Option<Arc<dyn GatewayObserver>>,
    /// Links the `tools/call` span to the caller's trace and the forwarded `_meta` to the
    /// `forward` span.
    pub(crate) trace: Option<Arc<dyn TraceContext>>,
    /// Over Streamable HTTP: the attachments are sessions, counted for the observer.
    pub(crate) http: bool,
}
