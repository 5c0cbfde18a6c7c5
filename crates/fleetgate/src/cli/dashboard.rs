//! `fleetgate dashboard`: its flags checked into [`DashboardSettings`] (a bad one exits 1
//! before anything is bound), then the page run by `fleetgate_dashboard`.

use super::args::DashboardArgs;
use super::context::Ctx;
use super::observer::LiveObserver;
use super::output::{parse_flag, token};
use anyhow::{anyhow, bail};
use fleetgate_core::env::{EnvKey, key_name};
use fleetgate_dashboard::poll::Source;
use fleetgate_dashboard::run::DashboardSettings;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Run the dashboard until SIGTERM or SIGINT. Returns the process exit code.
pub fn run(ctx: &Ctx, args: &DashboardArgs) -> anyhow::Result<u8> {
    let mut settings = resolve(ctx, args)?;
    if !ctx.config.approvals.notify.is_empty() {
        let env = ctx.env.clone();
        let cx = fleetgate_control::notify::Context {
            store: ctx.store()?,
            clock: ctx.decision_clock()?,
            env: Arc::new(move |key: &str| env.iter().find(|(k, _)| *k == key).map(|(_, v)| v.to_owned())),
            metrics: None,
            ttl_seconds: ctx.config.approvals.ttl_seconds,
            backoff: fleetgate_control::notify::BACKOFF,
            pause: fleetgate_control::notify::real_pause(),
        };
        settings.notify = Some((ctx.config.approvals.notify.clone(), cx));
    }
    if ctx.config.retention.every.is_some() {
        settings.retention =
            Some(fleetgate_control::retention::Job { config: Arc::new(ctx.config.clone()), env: ctx.env.clone() });
    }
    let source = Source {
        config: ctx.config.clone(),
        store: ctx.store()?,
        clock: ctx.decision_clock()?,
        observer: Arc::new(LiveObserver::default()),
    };
    Ok(fleetgate_dashboard::run::run_dashboard(settings, source)?)
}

/// The dashboard's settings from its flags and the environment; a bad one is an error
/// before anything is bound.
fn resolve(ctx: &Ctx, args: &DashboardArgs) -> anyhow::Result<DashboardSettings> {
    let listen: SocketAddr = args
        .listen
        .parse()
        .map_err(|_| anyhow!("--listen {:?} is not an address:port (e.g. 127.0.0.1:8760)", args.listen))?;
    let key = key_name(EnvKey::FleetgateDashboardToken, "");
    let token = token(
        ctx,
        EnvKey::FleetgateDashboardToken,
        b"\";,\\",
        "without spaces, quotes, commas, semicolons or backslashes (it travels in a header and a cookie)",
    )?;
    if !listen.ip().is_loopback() && !args.allow_remote {
        bail!("refusing to listen on {listen}: not a loopback address (pass --allow-remote, and set {key})");
    }
    if args.allow_remote && token.is_none() {
        bail!("--allow-remote needs a token: set {key} (every request must then carry it)");
    }
    let seconds: f64 = parse_flag("--interval", &args.interval, "seconds, e.g. 1 or 0.5")?;
    if !(0.05..=3600.0).contains(&seconds) {
        bail!("invalid --interval {:?}: expected 0.05 to 3600 seconds", args.interval);
    }
    let max_connections: usize = parse_flag("--max-connections", &args.max_connections, "a count, e.g. 256")?;
    if !(1..=65_536).contains(&max_connections) {
        bail!("invalid --max-connections {:?}: expected 1 to 65536", args.max_connections);
    }
    let header_seconds: f64 = parse_flag("--header-timeout", &args.header_timeout, "seconds, e.g. 10")?;
    if !(0.05..=3600.0).contains(&header_seconds) {
        bail!("invalid --header-timeout {:?}: expected 0.05 to 3600 seconds", args.header_timeout);
    }
    let sign_in = match &args.oidc_client_id {
        None => None,
        Some(client_id) => {
            let issuer = args
                .oidc_issuer
                .clone()
                .or_else(|| ctx.config.http.oauth.as_ref().map(|o| o.issuer.clone()))
                .ok_or_else(|| {
                    anyhow!("--oidc-client-id needs an issuer: pass --oidc-issuer, or set [http.oauth] issuer")
                })?;
            // Named without any userinfo the URL may carry: a refusal is printed.
            let shown = |url: &str| fleetgate_core::redact::redact_url_userinfo(url).unwrap_or_else(|| url.to_owned());
            fleetgate_gateway::check_oauth_url(&issuer)
                .map_err(|why| anyhow!("--oidc-issuer {:?} {why}", shown(&issuer)))?;
            if let Some(uri) = &args.oidc_redirect_uri {
                fleetgate_gateway::check_oauth_url(uri)
                    .map_err(|why| anyhow!("--oidc-redirect-uri {:?} {why}", shown(uri)))?;
            }
            // The gateways' principal claim, read from the ID token only at their own issuer.
            let oauth = ctx.config.http.oauth.as_ref();
            let same =
                |o: &&fleetgate_gateway::OAuthSettings| o.issuer.trim_end_matches('/') == issuer.trim_end_matches('/');
            let principal_claim = oauth.filter(same).map(|o| o.principal_claim.clone());
            Some(fleetgate_dashboard::signin::SignInSettings {
                issuer,
                client_id: client_id.clone(),
                redirect_uri: args.oidc_redirect_uri.clone().unwrap_or_default(),
                groups_claim: args.oidc_groups_claim.clone(),
                principal_claim,
                principal_names: ctx
                    .config
                    .http
                    .oauth
                    .iter()
                    .flat_map(|o| &o.principals)
                    .filter_map(|p| p.name.clone().map(|n| (p.subject.clone(), n)))
                    .collect(),
            })
        }
    };
    let limits = fleetgate_gateway::ConnectionLimits {
        max_connections,
        header_timeout: Duration::from_secs_f64(header_seconds),
        ..fleetgate_gateway::ConnectionLimits::default()
    };
    Ok(DashboardSettings {
        listen,
        allowed_hosts: args.allowed_hosts.clone(),
        token,
        interval: Duration::from_secs_f64(seconds),
        limits,
        log_filter: ctx.env.get(EnvKey::FleetgateLog, "").map(str::to_owned),
        sign_in,
        notify: None,
        retention: None,
    })
}
