//! `fleetgate serve`: the command side — flags resolved into [`ServeSettings`] (the member,
//! its binding and checkout, this process's identity read from the OS, the HTTP options and
//! principals), then [`run_serve`].

use super::observer::LiveObserver;
use crate::cli::args::{MESSAGE_BYTES, ServeArgs};
use crate::cli::context::Ctx;
use anyhow::anyhow;
use fleetgate_control::gate::Gate;
use fleetgate_control::metrics::{GatewayExposition, MeteredStore};
use fleetgate_control::serve::{FleetControl, ForgeApi, Identity, ServeSettings, Transport, run_serve};
use fleetgate_core::env::{EnvKey, key_name};
use fleetgate_core::runtime::derive_cohort;
use fleetgate_gateway::{DownstreamCommand, GatewayOptions, HttpOptions, Limits, Principals};
use std::ffi::OsString;
use std::sync::Arc;
use std::time::Duration;

/// Resolve the flags and run the gateway until shutdown. Returns the process exit code.
pub fn run(ctx: &Ctx, args: &ServeArgs) -> anyhow::Result<u8> {
    let mut member = ctx
        .config
        .member(&args.profile)
        .ok_or_else(|| anyhow!("profile {:?} is not in the roster ({})", args.profile, ctx.config.source))?
        .clone();
    if let Some(ns) = &args.namespace {
        fleetgate_core::worker::check_field("--namespace", ns).map_err(|why| anyhow!("invalid {why}"))?;
        member.namespace = ns.clone();
    }
    if !MESSAGE_BYTES.contains(&args.max_message_bytes) {
        return Err(anyhow!(
            "invalid --max-message-bytes {}: expected {} to {} (a message must at least hold an initialize)",
            args.max_message_bytes,
            MESSAGE_BYTES.start(),
            MESSAGE_BYTES.end()
        ));
    }
    let binding = args.binding.binding().or_else(|| ctx.config.binding.clone());
    // Canonical (symlinks resolved): other fleets compare it with their own checkouts.
    let repo_root = match &args.repo_root {
        Some(p) => Some(std::fs::canonicalize(p).unwrap_or_else(|_| p.clone())),
        None => std::env::current_dir().ok(),
    };
    let transport = if args.transport == "http" { Transport::Http } else { Transport::Stdio };
    let http = match transport {
        Transport::Stdio => None,
        Transport::Http => Some(http_options(ctx, args, &member.profile)?),
    };
    // What the roster lets through that the operator must know: in the start-up log.
    let notes = fleetgate_control::policy::notes(&ctx.config, http.as_ref().and_then(|h| h.principals.as_ref()));
    for line in notes.lines() {
        tracing::warn!("{line}");
    }
    let metrics_listener = metrics_listener(ctx, args, transport)?;
    // OpenTelemetry export: configured or not, checked before anything starts.
    let otlp =
        fleetgate_control::telemetry::resolve(&ctx.env, ctx.config.otlp_endpoint.as_deref()).map_err(|e| anyhow!(e))?;
    // The process's `/metrics` (served on the HTTP listener): every store handle counts
    // its transient failures there, the gate its decisions, each heartbeat its renewals.
    let exposition = Arc::new(GatewayExposition::default());
    let metrics = exposition.metrics().clone();
    let store = MeteredStore::wrap(ctx.store()?, metrics.clone());
    // This process, read from the OS once: the edge hands values to the identity.
    let pid = i64::from(std::process::id());
    let cohort = derive_cohort(
        ctx.env.get(EnvKey::McpCohortId, &ctx.config.env_prefix),
        Some(i64::from(std::os::unix::process::parent_id())),
    );
    let startup_head = repo_root.as_deref().and_then(|r| match fleetgate_host::git::head(r) {
        Ok(h) => Some(h),
        Err(e) => {
            tracing::warn!("startup revision unknown: {e}");
            None
        }
    });
    // Its proof is tied to this process as `/proc` names it (pid, PID namespace, start).
    let stamp = match fleetgate_host::proof::own_stamp() {
        Ok(stamp) => Some(stamp),
        Err(e) => {
            tracing::warn!("this process cannot be stamped, so it publishes no proof: {e}");
            None
        }
    };
    let identity =
        Identity::new(member.clone(), pid, fleetgate_host::start_id(), cohort, (repo_root, startup_head), binding)
            .with_stamp(stamp);
    let mut gate = Gate::new(Arc::new(ctx.config.clone()), store, Arc::new(LiveObserver::default())).with_auditor(
        fleetgate_control::audit::Auditor::new(
            MeteredStore::wrap(ctx.store()?, metrics.clone()),
            Duration::from_secs(2),
        ),
    );
    if let Some(shadow) = shadow_rules(ctx, args, &member)? {
        gate = gate.with_shadow(shadow);
    }
    let control = FleetControl::new(identity, transport, ctx.env.clone(), ctx.decision_clock()?, gate)
        .with_metrics(metrics)
        .with_forge_api(forge_api(ctx, &args.downstream));
    let options = GatewayOptions {
        downstream: downstream_command(ctx, &args.downstream),
        max_message_bytes: args.max_message_bytes,
        supervision: ctx.config.supervision.clone(),
        server_name: format!("fleetgate {}", member.profile),
        log_filter: ctx.env.get(EnvKey::FleetgateLog, "").map(str::to_owned),
        observer: Some(exposition),
        metrics_listener,
        sharing: ctx.config.downstream_sharing,
        ..GatewayOptions::default()
    };
    Ok(run_serve(ServeSettings { control, options, http, otlp })?)
}

/// The candidate in shadow (`--shadow`, else `[shadow] config`): loaded and checked now, so a
/// bad one stops the start, not a call.
fn shadow_rules(
    ctx: &Ctx,
    args: &ServeArgs,
    member: &fleetgate_config::Member,
) -> anyhow::Result<Option<fleetgate_control::gate::ShadowRules>> {
    let Some(path) = args.shadow.clone().or_else(|| ctx.config.shadow_config.clone()) else { return Ok(None) };
    let candidate = fleetgate_config::FleetConfig::load(Some(&path), &ctx.env)
        .map_err(|e| anyhow!("the shadow candidate {}: {e}", path.display()))?;
    if candidate.member(&member.profile).is_none_or(|m| m.role != member.role) {
        tracing::warn!(candidate = %path.display(), profile = %member.profile,
            "the shadow candidate has no member of this profile and role: it judges the role's calls as written");
    }
    let shadow = fleetgate_control::gate::ShadowRules::new(Arc::new(candidate));
    eprintln!(
        "fleetgate serve: judging every call also by the shadow candidate {} ({})",
        path.display(),
        shadow.digest
    );
    Ok(Some(shadow))
}

/// A stdio gateway's `/metrics` listener: `--metrics-listen`, else the roster's `[metrics]
/// listen`; loopback unless `--allow-remote` (or `[metrics] allow_remote`), and then only
/// with `FLEETGATE_METRICS_TOKEN`.
fn metrics_listener(
    ctx: &Ctx,
    args: &ServeArgs,
    transport: Transport,
) -> anyhow::Result<Option<fleetgate_gateway::MetricsListener>> {
    let listen = match &args.metrics_listen {
        Some(text) => Some(
            text.parse()
                .map_err(|_| anyhow!("--metrics-listen {text:?} is not an address:port (e.g. 127.0.0.1:9464)"))?,
        ),
        None => ctx.config.metrics.listen,
    };
    let Some(listen) = listen else { return Ok(None) };
    if transport == Transport::Http {
        return Err(anyhow!(
            "--metrics-listen is for --transport stdio: the HTTP transport serves /metrics on its own listener"
        ));
    }
    let key = key_name(EnvKey::FleetgateMetricsToken, "");
    let token =
        super::output::token(ctx, EnvKey::FleetgateMetricsToken, b"", "without spaces (it travels in a header)")?;
    let allow_remote = args.allow_remote || ctx.config.metrics.allow_remote;
    if !listen.ip().is_loopback() {
        if !allow_remote {
            return Err(anyhow!(
                "refusing to serve metrics on {listen}: not a loopback address (pass --allow-remote, and set {key})"
            ));
        }
        if token.is_none() {
            return Err(anyhow!("refusing to serve metrics on {listen} without a token: set {key} (non-empty)"));
        }
    }
    Ok(Some(fleetgate_gateway::MetricsListener {
        listen,
        allow_remote,
        allowed_hosts: args.allowed_hosts.clone(),
        bearer_token: token,
        connections: ctx.config.http.connections,
        // Always on stderr, whatever the log filter: with port 0 it is the only way to
        // learn the port. Never on stdout, which carries only MCP frames.
        bound: |addr| eprintln!("fleetgate serve: metrics on http://{addr}{}", fleetgate_gateway::METRICS_ENDPOINT),
    }))
}

/// The downstream's command line, started with only what it may see of this process's
/// environment ([`fleetgate_core::env::downstream_env`]): never the HTTP token, the store
/// location or an undeclared key; and through the guard (`fleetgate downstream-guard`).
fn downstream_command(ctx: &Ctx, argv: &[OsString]) -> Option<DownstreamCommand> {
    let mut command = DownstreamCommand::from_argv(argv.iter().cloned())?;
    let config = &ctx.config;
    let env = config.downstream_env(&ctx.env);
    command.env_clear = true;
    command.env = env.into_iter().map(|(k, v)| (k.into(), v.into())).collect();
    // Each run starts through this binary's guard, so its whole process group dies with the
    // gateway, `kill -9` included.
    match std::env::current_exe() {
        Ok(exe) => command.guard = Some((exe.into(), vec!["downstream-guard".into()])),
        Err(e) => tracing::warn!(
            "cannot find this binary to guard the downstream ({e}): only its direct child dies with the gateway"
        ),
    }
    Some(command)
}

/// The forge's own API as the downstream reaches it: the host and the token its command line
/// and the environment it is started with give it (the same token: the member's own).
fn forge_api(ctx: &Ctx, argv: &[OsString]) -> ForgeApi {
    let Some(dialect) = ctx.config.dialect() else { return ForgeApi::default() };
    let argv: Vec<String> = argv.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    let env: Vec<(String, String)> =
        ctx.config.downstream_env(&ctx.env).into_iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect();
    ForgeApi::of_launch(dialect, &argv, &env)
}

/// The HTTP transport's options: the listen address (loopback unless allowed), the token
/// or the principals of `[http] tokens_file` (a non-loopback address needs one), the bounds.
fn http_options(ctx: &Ctx, args: &ServeArgs, profile: &str) -> anyhow::Result<HttpOptions> {
    let listen = args
        .listen
        .parse()
        .map_err(|_| anyhow!("--listen {:?} is not an address:port (e.g. 127.0.0.1:8750)", args.listen))?;
    let principals = match &ctx.config.http.tokens_file {
        Some(path) => Some(Principals::read(path).map_err(|e| anyhow!(e))?),
        None => None,
    };
    let http = HttpOptions {
        listen,
        allow_remote: args.allow_remote,
        allowed_hosts: args.allowed_hosts.clone(),
        // An empty token is refused, not read as "no token".
        bearer_token: ctx.env.get_raw(EnvKey::FleetgateHttpToken, "").map(str::to_owned),
        principals,
        oauth: ctx.config.http.oauth.clone(),
        profile: Some(profile.to_owned()),
        limits: Limits {
            max_attachments: ctx.config.http.max_attachments,
            max_per_principal: ctx.config.http.max_attachments_per_principal,
            stateless_ttl: Duration::from_secs_f64(ctx.config.heartbeat_ttl_seconds),
        },
        connections: ctx.config.http.connections,
        advertise: args.advertise.clone(),
    };
    if http.bearer_token.as_deref() == Some("") {
        return Err(anyhow!("FLEETGATE_HTTP_TOKEN is set but empty: set it to a non-empty secret, or unset it"));
    }
    if !http.listen.ip().is_loopback() {
        if !http.allow_remote {
            return Err(anyhow!(
                "refusing to listen on {}: not a loopback address (pass --allow-remote, and set FLEETGATE_HTTP_TOKEN)",
                http.listen
            ));
        }
        if http.bearer_token.is_none() && http.principals.is_none() && http.oauth.is_none() {
            return Err(anyhow!(
                "refusing to listen on {} without authentication: set FLEETGATE_HTTP_TOKEN (non-empty), an [http] \
                 tokens_file or [http.oauth]",
                http.listen
            ));
        }
    }
    Ok(http)
}
