//! `fleetgate serve` flags and the process around the gateway: resolve the
//! member, build the control plane, run the gateway on a tokio runtime.
//! Stdout carries only MCP frames from here on; everything else is stderr.

use super::control::{FleetControl, Handle};
use crate::cli::args::BindingArgs;
use crate::cli::context::Ctx;
use anyhow::{Context as _, anyhow};
use clap::Args;
use fleetgate_core::env::EnvKey;
use fleetgate_gateway::{DownstreamCommand, GatewayOptions};
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;

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
    let store = ctx.store()?;
    let control = Arc::new(FleetControl::new(
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
    let reason = fleetgate_gateway::run(options, Arc::new(Handle(control))).context("the gateway failed")?;
    tracing::info!(reason = reason.as_str(), "gateway stopped");
    Ok(0)
}
