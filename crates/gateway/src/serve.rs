//! The gateway's lifecycle: bind the client transport, tell the control plane, start the
//! downstream, serve until stdin EOF or a signal, then shut down in order.
//!
//! ```text
//! control_tools()            once, before anything is read
//! bind the metrics listener  when set (`GET /metrics` only)
//! bind stdin/stdout          frame reader + frame writer tasks
//! on_transport_bound()       the runtime row
//! start the downstream       supervised; connected after the client's initialize
//! serve                      rmcp's loop over the judged frames
//! … on_client_attach()       at the first initialize (see `gateway`)
//! stdin EOF | SIGTERM | SIGINT | stdout closed
//! on_shutdown(reason)  ‖  cancel the downstream flow (SIGTERM → grace → SIGKILL)
//! drain the writer           bounded
//! ```
//!
//! **Invariant:** the crate reads no environment variable; everything comes in through
//! [`GatewayOptions`].

use crate::channel::Channel;
use crate::control::ControlPlane;
use crate::downstream::DownstreamSpec;
use crate::engine::{Engine, Limits};
use crate::error::GatewayError;
use crate::frame::{ClientTransport, ReadEnd, read_frames, write_frames};
use crate::gateway::{Gateway, ServiceSettings};
use crate::options::GatewayOptions;
use rmcp::model::Implementation;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, BufReader};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Why the gateway stopped serving. All of them are orderly: [`serve`] returns `Ok`.
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

/// Build a runtime, install the log subscriber from [`GatewayOptions::log_filter`], and
/// [`serve`] on stdin/stdout until an orderly shutdown. The caller exits 0 on `Ok`.
///
/// The runtime is shut down with a bounded wait: tokio reads stdin on a blocking thread
/// that no one can interrupt, and a signal-driven shutdown must not hang on it.
pub fn run(options: GatewayOptions, control: Arc<dyn ControlPlane>) -> Result<ShutdownReason, GatewayError> {
    init_logging(options.log_filter.as_deref())?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        // One async worker: the gateway is I/O-bound, and every control-plane call already
        // runs on the blocking pool, so a slow store never holds the worker. One worker
        // also means no cross-worker wake-ups on a call's path (measured: lower latency on
        // the 2-core targets) and less RSS. Its thread lives as long as the runtime, which
        // the downstream's parent-death signal needs.
        .worker_threads(1)
        .max_blocking_threads(32)
        .enable_all()
        .build()
        .map_err(GatewayError::Runtime)?;
    let outcome = runtime.block_on(serve(options, control));
    runtime.shutdown_timeout(Duration::from_millis(200));
    outcome
}

/// Install a `tracing` subscriber writing to stderr with `filter` (`EnvFilter` syntax;
/// `warn,rmcp=error` when `None`), under [`never_logged`]'s ceiling whatever the filter
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

/// Serve MCP on this process's stdin/stdout until stdin EOF, SIGTERM or SIGINT. Must run
/// inside a multi-threaded tokio runtime whose worker threads live as long as the
/// gateway (the downstream's parent-death signal is tied to the spawning thread).
pub async fn serve(options: GatewayOptions, control: Arc<dyn ControlPlane>) -> Result<ShutdownReason, GatewayError> {
    let signalled = shutdown_signals()?;
    serve_io(options, control, client_stdin(), client_stdout(), signalled).await
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

/// The process's stdin as an async stream. A pipe (how MCP clients start servers) is read
/// through the reactor on a duplicate of fd 0; anything else (a file, a terminal) through
/// tokio's blocking-thread stdin. The pipe path saves a thread hand-off per read, which is
/// most of the latency the gateway adds to a call.
fn client_stdin() -> Box<dyn AsyncRead + Unpin + Send> {
    use std::os::fd::AsFd;
    let pipe = std::io::stdin().as_fd().try_clone_to_owned().and_then(tokio::net::unix::pipe::Receiver::from_owned_fd);
    match pipe {
        Ok(pipe) => Box::new(pipe),
        Err(_) => Box::new(tokio::io::stdin()),
    }
}

/// The process's stdout, the same way as [`client_stdin`].
fn client_stdout() -> Box<dyn AsyncWrite + Unpin + Send> {
    use std::os::fd::AsFd;
    let pipe = std::io::stdout().as_fd().try_clone_to_owned().and_then(tokio::net::unix::pipe::Sender::from_owned_fd);
    match pipe {
        Ok(pipe) => Box::new(pipe),
        Err(_) => Box::new(tokio::io::stdout()),
    }
}

/// [`serve`] over any byte streams, stopping early when `shutdown` completes with its
/// reason (what [`serve`] does with SIGTERM and SIGINT). For embedding and tests.
pub async fn serve_io<R, W, S>(
    options: GatewayOptions,
    control: Arc<dyn ControlPlane>,
    input: R,
    output: W,
    shutdown: S,
) -> Result<ShutdownReason, GatewayError>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
    S: Future<Output = ShutdownReason>,
{
    let tools_plane = control.clone();
    let control_tools = tokio::task::spawn_blocking(move || tools_plane.control_tools())
        .await
        .map_err(|e| GatewayError::ControlPlane { call: "control_tools", reason: e.to_string() })?;

    // The `/metrics` listener, if any: refused or unbindable, the gateway does not start.
    let metrics = match &options.metrics_listener {
        Some(settings) => Some(crate::http::start_metrics_listener(settings, options.observer.clone()).await?),
        None => None,
    };

    // Bind the transport: from here the client's stdout belongs to the writer task.
    let (frames_tx, frames_rx) = mpsc::channel(256);
    let (inbound_tx, inbound_rx) = mpsc::channel(64);
    let writer = tokio::spawn(write_frames(output, frames_rx));
    let mut reader = tokio::spawn(read_frames(
        BufReader::with_capacity(64 * 1024, input),
        options.max_message_bytes,
        inbound_tx,
        frames_tx.clone(),
    ));
    let engine = start_engine(&options, &control, control_tools, Limits::default(), false).await?;
    let channel = Arc::new(engine.open_stdio_channel().map_err(GatewayError::Supervise)?);
    let gateway = Gateway::stdio(engine.clone(), channel.clone());
    let transport = ClientTransport::new(inbound_rx, frames_tx);

    let cancel = CancellationToken::new();
    let session = async {
        match rmcp::service::serve_server_with_ct(gateway, transport, cancel.clone()).await {
            Ok(running) => {
                let reason = running.waiting().await;
                tracing::debug!(?reason, "client session ended");
            }
            Err(e) => tracing::info!(error = %e, "the client session ended before it was initialised"),
        }
    };
    tokio::pin!(shutdown);
    let signalled = tokio::select! {
        () = session => None,
        reason = &mut shutdown => Some(reason),
    };
    cancel.cancel();
    let reason = match signalled {
        Some(reason) => {
            reader.abort();
            reason
        }
        // rmcp's loop ends when the reader does; bounded in case it ended otherwise.
        None => match tokio::time::timeout(Duration::from_secs(1), &mut reader).await {
            Ok(Ok(ReadEnd::Eof)) => ShutdownReason::StdinEof,
            Ok(Ok(ReadEnd::Failed(e))) => ShutdownReason::StdinError(e),
            Ok(Ok(ReadEnd::Closed) | Err(_)) => ShutdownReason::ClientGone,
            Err(_) => {
                reader.abort();
                ShutdownReason::ClientGone
            }
        },
    };
    tracing::info!(reason = reason.as_str(), "shutting down");

    stop_engine(&engine, Some(&channel), &reason).await;
    if let Some(metrics) = metrics {
        metrics.stop.cancel();
        if tokio::time::timeout(Duration::from_secs(1), metrics.task).await.is_err() {
            tracing::warn!("the metrics listener did not stop within 1 s");
        }
    }
    // Every sender is gone once rmcp's loop and the reader ended: the writer drains what
    // is queued and returns. Bounded, in case the client stopped reading its end.
    let _ = tokio::time::timeout(Duration::from_secs(1), writer).await;
    Ok(reason)
}

/// What both transports do once the client transport is bound: `on_transport_bound` (the
/// runtime row), then the engine every attachment shares (`http`: its attachments are
/// Streamable HTTP sessions).
pub(crate) async fn start_engine(
    options: &GatewayOptions,
    control: &Arc<dyn ControlPlane>,
    control_tools: Vec<rmcp::model::Tool>,
    limits: Limits,
    http: bool,
) -> Result<Arc<Engine>, GatewayError> {
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
    Ok(Arc::new(Engine::new(control.clone(), settings, control_tools, spec, limits)))
}

/// The orderly end both transports share: `on_shutdown(reason)` and every attachment's
/// downstream stopped (SIGTERM → grace → SIGKILL), concurrently. `unattached` is a channel
/// opened for a client that never attached (stdio).
pub(crate) async fn stop_engine(engine: &Engine, unattached: Option<&Channel>, reason: &ShutdownReason) {
    let shutdown_plane = engine.control.clone();
    let literal = reason.as_str();
    let marked = tokio::task::spawn_blocking(move || shutdown_plane.on_shutdown(literal));
    let stopped = async {
        engine.stop_all().await;
        if let Some(channel) = unattached {
            channel.stop().await;
        }
    };
    let (marked, ()) = tokio::join!(marked, stopped);
    if let Err(e) = marked {
        tracing::error!(error = %e, "on_shutdown panicked");
    }
}
