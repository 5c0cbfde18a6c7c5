//! `fleetgate serve` flags and the process around the gateway: resolve the
//! member, build the control plane, run the gateway on a tokio runtime, over
//! stdio (stdout carries only MCP frames from here on; everything else is
//! stderr) or Streamable HTTP (`--transport http --listen ADDR`).

use super::control::{FleetControl, Handle, Transport};
use crate::cli::args::BindingArgs;
use crate::cli::context::Ctx;
use anyhow::{Context as _, anyhow};
use clap::Args;
use fleetgate_core::env::EnvKey;
use fleetgate_gateway::{DownstreamCommand, GatewayOptions, HttpOptions, Limits, Principals};
use std::ffi::OsString;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

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
    /// Largest client message accepted, in bytes.
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
    /// With `--transport http`: allow a non-loopback `--listen` address.
    #[arg(long)]
    pub allow_remote: bool,
    /// With `--transport http`: another `Host` value to accept (a DNS name of a remote
    /// deployment); repeatable.
    #[arg(long = "allowed-host", value_name = "HOST[:PORT]")]
    pub allowed_hosts: Vec<String>,
    /// The downstream MCP server and its arguments, after `--`.
    #[arg(last = true, value_name = "DOWNSTREAM")]
    pub downstream: Vec<OsString>,
}

/// Run the gateway until shutdown. Returns the process exit code.
pub fn run_serve(ctx: &Ctx, args: &ServeArgs) -> anyhow::Result<u8> {
    let mut member = ctx
        .config
        .member(&args.profile)
        .ok_or_else(|| anyhow!("profile {:?} is not in the roster ({})", args.profile, ctx.config.source))?
        .clone();
    if let Some(ns) = &args.namespace {
        member.namespace = ns.clone();
    }
    let binding = args.binding.binding().or_else(|| ctx.config.binding.clone());
    let repo_root = match &args.repo_root {
        Some(p) => Some(p.clone()),
        None => std::env::current_dir().ok(),
    };
    let transport = if args.transport == "http" { Transport::Http } else { Transport::Stdio };
    let http = match transport {
        Transport::Stdio => None,
        Transport::Http => {
            let listen = args
                .listen
                .parse()
                .map_err(|_| anyhow!("--listen {:?} is not an address:port (e.g. 127.0.0.1:8750)", args.listen))?;
            let principals = match &ctx.config.http.tokens_file {
                Some(path) => Some(read_principals(path)?),
                None => None,
            };
            Some(HttpOptions {
                listen,
                allow_remote: args.allow_remote,
                allowed_hosts: args.allowed_hosts.clone(),
                // An empty token is refused by the gateway, not read as "no token".
                bearer_token: ctx.env.get_raw(EnvKey::FleetgateHttpToken, "").map(str::to_owned),
                principals,
                profile: Some(member.profile.clone()),
                limits: Limits {
                    max_attachments: ctx.config.http.max_attachments,
                    max_per_principal: ctx.config.http.max_attachments_per_principal,
                    stateless_ttl: Duration::from_secs_f64(ctx.config.heartbeat_ttl_seconds),
                },
            })
        }
    };
    if let Some(http) = &http
        && !http.listen.ip().is_loopback()
    {
        if !http.allow_remote {
            return Err(anyhow!(
                "refusing to listen on {}: not a loopback address (pass --allow-remote, and set FLEETGATE_HTTP_TOKEN)",
                http.listen
            ));
        }
        if http.bearer_token.as_deref().is_none_or(str::is_empty) && http.principals.is_none() {
            return Err(anyhow!(
                "refusing to listen on {} without authentication: set FLEETGATE_HTTP_TOKEN (non-empty) or an [http] \
                 tokens_file",
                http.listen
            ));
        }
    }
    if let Some(http) = &http
        && http.bearer_token.as_deref() == Some("")
    {
        return Err(anyhow!("FLEETGATE_HTTP_TOKEN is set but empty: set it to a non-empty secret, or unset it"));
    }
    let store = ctx.store()?;
    let control = Arc::new(FleetControl::new(
        transport,
        ctx.config.clone(),
        member.clone(),
        ctx.env.clone(),
        store,
        ctx.decision_clock()?,
        repo_root,
        binding,
    ));
    let options = GatewayOptions {
        downstream: DownstreamCommand::from_argv(args.downstream.iter().cloned()),
        max_message_bytes: args.max_message_bytes,
        supervision: ctx.config.supervision.clone(),
        server_name: format!("fleetgate {}", member.profile),
        log_filter: ctx.env.get(EnvKey::FleetgateLog, "").map(str::to_owned),
        ..GatewayOptions::default()
    };
    let control = Arc::new(Handle(control));
    let reason = match http {
        None => fleetgate_gateway::run(options, control),
        Some(http) => fleetgate_gateway::run_http(options, http, control, |addr| {
            // Always on stderr, whatever the log filter: with port 0 it is the only way
            // to learn the port.
            eprintln!("fleetgate serve: listening on http://{addr}{}", fleetgate_gateway::HTTP_ENDPOINT);
        }),
    }
    .context("the gateway failed")?;
    tracing::info!(reason = reason.as_str(), "gateway stopped");
    Ok(0)
}

/// The principals of `[http] tokens_file`; a file that cannot be read, or a bad line, stops
/// the gateway before it listens (exit 1, the file and line named).
fn read_principals(path: &Path) -> anyhow::Result<Principals> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| anyhow!("cannot read [http] tokens_file {shown}: {e}"))?;
    let principals = Principals::parse(&text, &shown).map_err(|e| anyhow!("[http] tokens_file {e}"))?;
    if principals.is_empty() {
        return Err(anyhow!("[http] tokens_file {shown} lists no principal"));
    }
    Ok(principals)
}
