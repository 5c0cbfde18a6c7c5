//! `fleetgate dashboard` flags and the process around the page: settings checked
//! before anything is bound (a bad one exits 1), the first look taken before the
//! listener opens, the reader thread, the server, and an orderly stop on SIGTERM
//! or SIGINT.

use super::guard::Guard;
use super::poll::{self, Publisher, Source};
use super::server::{self, App};
use crate::cli::context::Ctx;
use crate::cli::output::parse_flag;
use crate::metrics::{FleetMetrics, MetricsRegistry};
use anyhow::{Context as _, anyhow, bail};
use clap::Args;
use fleetgate_core::env::{EnvKey, key_name};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

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
}

/// The checked settings.
#[derive(Debug)]
struct Settings {
    listen: SocketAddr,
    token: Option<String>,
    interval: Duration,
    limits: fleetgate_gateway::ConnectionLimits,
}

impl Settings {
    fn resolve(ctx: &Ctx, args: &DashboardArgs) -> anyhow::Result<Self> {
        let listen: SocketAddr = args
            .listen
            .parse()
            .map_err(|_| anyhow!("--listen {:?} is not an address:port (e.g. 127.0.0.1:8760)", args.listen))?;
        let key = key_name(EnvKey::FleetgateDashboardToken, "");
        let token = match ctx.env.raw(EnvKey::FleetgateDashboardToken, "") {
            None => None,
            Some(t) if t.trim().is_empty() => bail!("{key} is set but empty: set a token, or unset it"),
            Some(t) if !t.bytes().all(|b| b.is_ascii_graphic() && !b"\";,\\".contains(&b)) => bail!(
                "{key} must be printable ASCII without spaces, quotes, commas, semicolons or backslashes \
                 (it travels in a header and a cookie)"
            ),
            Some(t) => Some(t.to_owned()),
        };
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
        let limits = fleetgate_gateway::ConnectionLimits {
            max_connections,
            header_timeout: Duration::from_secs_f64(header_seconds),
            ..fleetgate_gateway::ConnectionLimits::default()
        };
        Ok(Self { listen, token, interval: Duration::from_secs_f64(seconds), limits })
    }
}

/// Run the dashboard until SIGTERM or SIGINT. Returns the process exit code.
pub fn run_dashboard(ctx: &Ctx, args: &DashboardArgs) -> anyhow::Result<u8> {
    let settings = Settings::resolve(ctx, args)?;
    fleetgate_gateway::init_logging(ctx.env.get(EnvKey::FleetgateLog, "")).context("cannot start logging")?;
    let source = Source { config: ctx.config.clone(), store: ctx.store()?, clock: ctx.decision_clock()? };
    let mut registry = MetricsRegistry::default();
    let metrics = FleetMetrics::register(&mut registry);
    let (publisher, latest) = Publisher::new(source.look(), metrics.clone());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(settings.listen)
            .await
            .with_context(|| format!("cannot listen on {}", settings.listen))?;
        let local = listener.local_addr().context("cannot read the bound address")?;
        // Always on stderr, whatever the log filter: with port 0 it is the only way to learn the port.
        eprintln!("fleetgate dashboard: listening on http://{local}/");
        tracing::info!(listen = %local, token = settings.token.is_some(), "dashboard listening");
        let signalled = shutdown_signals()?;
        let (stop_reader, stopped) = std::sync::mpsc::channel::<()>();
        let reader = std::thread::Builder::new()
            .name("fleetgate-dashboard-reader".into())
            .spawn(move || poll::run(&source, publisher, settings.interval, &stopped))
            .context("cannot start the reader thread")?;
        let app = Arc::new(App {
            latest,
            registry,
            metrics,
            guard: Guard::new(local, &args.allowed_hosts, settings.token),
            stop: CancellationToken::new(),
        });
        server::serve(listener, app, settings.limits, signalled).await;
        let _ = stop_reader.send(());
        let _ = reader.join();
        tracing::info!("dashboard stopped");
        Ok(0)
    })
}

fn shutdown_signals() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut sigterm = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    let mut sigint = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
    Ok(async move {
        tokio::select! {
            _ = sigterm.recv() => tracing::info!("SIGTERM: stopping"),
            _ = sigint.recv() => tracing::info!("SIGINT: stopping"),
        }
    })
}
