//! What both transports share from start to stop: the log subscriber, the shutdown
//! signals, the hub every attachment shares started once the client transport is bound,
//! and the orderly end. The stdio (`serve`) and Streamable HTTP (`http`) transports sit on
//! top of it; it imports neither.

use crate::channel::Channel;
use crate::control::ControlPlane;
use crate::downstream::DownstreamSpec;
use crate::error::GatewayError;
use crate::hub::{Hub, Limits};
use crate::options::{GatewayOptions, ServiceSettings};
use rmcp::model::Implementation;
use std::future::Future;
use std::sync::Arc;

/// Why the gateway stopped serving. All of them are orderly: [`crate::serve()`] returns `Ok`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShutdownReason {
    /// The client closed the gateway's stdin.
    StdinEof,
    /// Reading stdin failed.
    StdinError(String),
    /// Writing to the client failed (its end of stdout is gone).
    ClientGone,
    /// SIGTERM.
    Sigterm,
    /// SIGINT.
    Sigint,
}

impl ShutdownReason {
    /// The literal passed to [`ControlPlane::on_shutdown`]: `stdin_eof`, `stdin_error`,
    /// `client_gone`, `sigterm` or `sigint`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::StdinEof => "stdin_eof",
            Self::StdinError(_) => "stdin_error",
            Self::ClientGone => "client_gone",
            Self::Sigterm => "sigterm",
            Self::Sigint => "sigint",
        }
    }
}

/// Install a `tracing` subscriber writing to stderr with `filter` (`EnvFilter` syntax;
/// `warn,rmcp=error` when `None`), under `never_logged`'s ceiling whatever the filter
/// says. A subscriber already installed is left in place.
pub fn init_logging(filter: Option<&str>) -> Result<(), GatewayError> {
    init_logging_with(filter, None)
}

/// A `tracing` layer installed beside the stderr log (fleetgate's OpenTelemetry export),
/// with its own filter: the log filter does not apply to it.
pub type ExtraLayer = Box<dyn tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync>;

/// [`init_logging`], with `extra` installed beside the stderr log.
pub fn init_logging_with(filter: Option<&str>, extra: Option<ExtraLayer>) -> Result<(), GatewayError> {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    use tracing_subscriber::{Layer as _, fmt};
    // rmcp logs every error answer at WARN; those are the client's mistakes, not the gateway's.
    let filter = filter.unwrap_or("warn,rmcp=error");
    let env_filter = tracing_subscriber::EnvFilter::try_new(filter)
        .map_err(|e| GatewayError::LogFilter { filter: filter.to_owned(), reason: e.to_string() })?;
    let layer = fmt::layer().with_writer(std::io::stderr).with_ansi(false).with_filter(env_filter);
    // Err only when a subscriber is already set (the caller's): keep theirs.
    let _ = tracing_subscriber::registry().with(extra).with(layer.with_filter(never_logged())).try_init();
    Ok(())
}

/// The ceiling no log filter lifts. rmcp logs every request and answer whole at DEBUG —
/// a tool call's arguments, which may hold secrets — and carries the `Mcp-Session-Id`,
/// which lets its holder act in the session, on its HTTP session's INFO span and
/// "create new session" event. The gateway's own events name tools, never arguments,
/// and attachments by number, never by session id.
fn never_logged() -> tracing_subscriber::filter::Targets {
    use tracing_subscriber::filter::LevelFilter;
    tracing_subscriber::filter::Targets::new()
        .with_default(LevelFilter::TRACE)
        .with_target("rmcp", LevelFilter::INFO)
        .with_target("rmcp::transport::streamable_http_server::session", LevelFilter::WARN)
}

/// SIGTERM or SIGINT as a shutdown future, for both transports. Installed
/// before serving starts, so a signal that arrives early is not lost.
pub(crate) fn shutdown_signals() -> Result<impl Future<Output = ShutdownReason>, GatewayError> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut sigterm =
        signal(SignalKind::terminate()).map_err(|source| GatewayError::Signal { signal: "SIGTERM", source })?;
    let mut sigint =
        signal(SignalKind::interrupt()).map_err(|source| GatewayError::Signal { signal: "SIGINT", source })?;
    Ok(async move {
        tokio::select! {
            _ = sigterm.recv() => ShutdownReason::Sigterm,
            _ = sigint.recv() => ShutdownReason::Sigint,
        }
    })
}

/// What both transports do once the client transport is bound: `on_transport_bound` (the
/// runtime row), then the hub every attachment shares (`http`: its attachments are
/// Streamable HTTP sessions).
pub(crate) async fn start_hub(
    options: &GatewayOptions,
    control: &Arc<dyn ControlPlane>,
    control_tools: Vec<rmcp::model::Tool>,
    limits: Limits,
    http: bool,
) -> Result<Arc<Hub>, GatewayError> {
    let bound_plane = control.clone();
    match tokio::task::spawn_blocking(move || bound_plane.on_transport_bound()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::error!(error = %e, "the control plane could not record the runtime row"),
        Err(e) => tracing::error!(error = %e, "on_transport_bound panicked"),
    }
    let gateway_info = Implementation::new(options.server_name.clone(), options.server_version.clone());
    let spec = options.downstream.as_ref().map(|command| DownstreamSpec {
        command: command.clone(),
        supervision: options.supervision.clone(),
        init_timeout: options.downstream_init_timeout,
        client_info: gateway_info.clone(),
        observer: options.observer.clone(),
        shared: options.sharing == crate::options::Sharing::Gateway,
    });
    let settings = ServiceSettings {
        call_timeout: options.call_timeout,
        attach_wait: options.attach_wait,
        server_info: gateway_info,
        instructions: options.instructions.clone(),
        observer: options.observer.clone(),
        trace: options.trace.clone(),
        http,
    };
    Ok(Arc::new(Hub::new(control.clone(), settings, control_tools, spec, limits)))
}

/// The orderly end both transports share: `on_shutdown(reason)` and every attachment's
/// downstream stopped (SIGTERM → grace → SIGKILL), concurrently. `unattached` is a channel
/// opened for a client that never attached (stdio).
pub(crate) async fn stop_hub(hub: &Hub, unattached: Option<&Channel>, reason: &ShutdownReason) {
    let shutdown_plane = hub.control.clone();
    let literal = reason.as_str();
    let marked = tokio::task::spawn_blocking(move || shutdown_plane.on_shutdown(literal));
    let stopped = async {
        hub.stop_all().await;
        if let Some(channel) = unattached {
            channel.stop().await;
        }
    };
    let (marked, ()) = tokio::join!(marked, stopped);
    if let Err(e) = marked {
        tracing::error!(error = %e, "on_shutdown panicked");
    }
}
