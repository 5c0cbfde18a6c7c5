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

use crate::control::ControlPlane;
use crate::error::GatewayError;
use crate::frame::{ClientTransport, ReadEnd, read_frames, write_frames};
use crate::gateway::Gateway;
use crate::hub::Limits;
use crate::lifecycle::{ShutdownReason, init_logging, shutdown_signals, start_hub, stop_hub};
use crate::options::GatewayOptions;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, BufReader};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

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

/// Serve MCP on this process's stdin/stdout until stdin EOF, SIGTERM or SIGINT. Must run
/// inside a multi-threaded tokio runtime whose worker threads live as long as the
/// gateway (the downstream's parent-death signal is tied to the spawning thread).
pub async fn serve(options: GatewayOptions, control: Arc<dyn ControlPlane>) -> Result<ShutdownReason, GatewayError> {
    let signalled = shutdown_signals()?;
    serve_io(options, control, client_stdin(), client_stdout(), signalled).await
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
    let hub = start_hub(&options, &control, control_tools, Limits::default(), false).await?;
    let channel = Arc::new(hub.open_stdio_channel().map_err(GatewayError::Supervise)?);
    let gateway = Gateway::stdio(hub.clone(), channel.clone());
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

    stop_hub(&hub, Some(&channel), &reason).await;
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
