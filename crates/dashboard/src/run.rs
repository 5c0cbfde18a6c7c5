//! The process around the page: the first look taken before the listener opens, the
//! reader thread, the server, and an orderly stop on SIGTERM or SIGINT. Everything comes
//! in resolved ([`DashboardSettings`]); the binary checks the flags (a bad one exits 1
//! before anything is bound).

use super::guard::Guard;
use super::poll::{self, Publisher, Source};
use super::server::{self, App};
use fleetgate_control::RunError;
use fleetgate_control::error::Context as _;
use fleetgate_control::metrics::{FleetMetrics, MetricsRegistry};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The dashboard's settings, checked.
#[derive(Debug)]
pub struct DashboardSettings {
    /// The address to listen on.
    pub listen: SocketAddr,
    /// Other `Host` values to accept.
    pub allowed_hosts: Vec<String>,
    /// The token every request must carry, when set.
    pub token: Option<String>,
    /// Between looks at the store and the host.
    pub interval: Duration,
    /// Connections and header timeout.
    pub limits: fleetgate_gateway::ConnectionLimits,
    /// The log filter (`FLEETGATE_LOG`).
    pub log_filter: Option<String>,
    /// Signing people in (OpenID Connect), when configured.
    pub sign_in: Option<crate::signin::SignInSettings>,
    /// `[[approvals.notify]]`: the targets, and what the notifier reads (none: no target).
    pub notify: Option<(Vec<fleetgate_config::NotifyTarget>, fleetgate_control::notify::Context)>,
    /// `[retention] every`: what the scheduled prune reads (none: no schedule).
    pub retention: Option<fleetgate_control::retention::Job>,
}

/// Run the dashboard until SIGTERM or SIGINT. Returns the process exit code.
pub fn run_dashboard(settings: DashboardSettings, source: Source) -> Result<u8, RunError> {
    fleetgate_gateway::init_logging(settings.log_filter.as_deref()).context("cannot start logging")?;
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
        // The issuer's endpoints are read now: one that cannot be read stops the start.
        let sign_in = match settings.sign_in.clone() {
            None => None,
            Some(mut s) => {
                let port = local.port();
                if s.redirect_uri.is_empty() {
                    s.redirect_uri = format!("http://{local}/auth/callback");
                }
                let clock = source.clock.clone();
                let made = tokio::task::spawn_blocking(move || crate::signin::SignIn::new(s, port, clock))
                    .await
                    .map_err(|e| RunError::new("the sign-in could not start", e))?;
                Some(made.map_err(|why| RunError::msg(format!("cannot sign people in: {why}")))?)
            }
        };
        // Answering from the page needs the token or a signed-in person: else it stays read-only.
        let answers = (settings.token.is_some() || sign_in.is_some()).then(|| server::Answers {
            store: source.store.clone(),
            clock: source.clock.clone(),
            csrf: format!("{:032x}", fleetgate_host::nonce()),
            people: Arc::new(source.config.people.clone()),
        });
        let notifier = settings.notify.as_ref().map(|(targets, cx)| {
            let cx = fleetgate_control::notify::Context { metrics: Some(metrics.notify.clone()), ..cx.clone() };
            fleetgate_control::notify::Notifier::start(targets, &cx)
        });
        let retention = settings
            .retention
            .clone()
            .map(|job| fleetgate_control::retention::Schedule::start(source.store.clone(), source.clock.clone(), job));
        let (stop_reader, stopped) = std::sync::mpsc::channel::<()>();
        let reader = std::thread::Builder::new()
            .name("fleetgate-dashboard-reader".into())
            .spawn(move || poll::run(&source, publisher, settings.interval, &stopped))
            .context("cannot start the reader thread")?;
        let app = Arc::new(App {
            latest,
            registry,
            metrics,
            guard: {
                let guard = Guard::new(local, &settings.allowed_hosts, settings.token);
                if sign_in.is_some() { guard.with_sign_in() } else { guard }
            },
            stop: CancellationToken::new(),
            answers,
            sign_in,
        });
        server::serve(listener, app, settings.limits, signalled).await;
        let _ = stop_reader.send(());
        let _ = reader.join();
        if let Some(n) = notifier {
            n.stop();
        }
        if let Some(r) = retention {
            r.stop();
        }
        tracing::info!("dashboard stopped");
        Ok(0)
    })
}

fn shutdown_signals() -> Result<impl std::future::Future<Output = ()>, RunError> {
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
