//! The listener: hyper's HTTP/1.1 server on every accepted connection, with the bounds
//! `axum::serve` does not set (it runs hyper without a timer, so a connection that never
//! finishes its request head is kept forever — 2,000 of them stayed open past 40 s):
//!
//! * a connection must deliver a complete request head within
//!   [`ConnectionLimits::header_timeout`] of starting to wait for one: when it opens and
//!   again after every answer, so an idle keep-alive connection is closed after it too. A
//!   response being streamed (an SSE stream) is no wait for a head and is not timed;
//! * the body of a POST must arrive within [`ConnectionLimits::body_timeout`] (the
//!   gatekeeper answers 408 otherwise);
//! * at most [`ConnectionLimits::max_connections`] at once: past it a new connection is
//!   answered 503 (`Connection: close`), its write side shut, and whatever the peer sent
//!   read and discarded for at most [`DRAIN_FOR`] before it is closed — closing a socket
//!   with unread input would reset it, and a reset can destroy the 503 before the client
//!   reads it. At most [`MAX_DRAINING`] refused connections drain at once; past that one is
//!   closed at once. The open ones keep being served meanwhile.
//!
//! * a request head with a line ending in a bare LF, or with two `Host` headers, is
//!   answered 400 and the connection closed (`strict`), before it is routed.
//!
//! All of it before authentication: the gatekeeper only runs on a complete request head.

use super::slots::Slot;
use super::strict;
use crate::options::ConnectionLimits;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How long a refused connection's input is drained before it is closed.
const DRAIN_FOR: Duration = Duration::from_secs(1);
/// Bytes of a refused connection's input read at most before it is closed.
const DRAIN_BYTES: usize = 64 * 1024;
/// Refused connections draining at once, at most (each holds a socket for up to [`DRAIN_FOR`]).
const MAX_DRAINING: usize = 64;

/// What a connection past the cap is told before it is closed.
const FULL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nRetry-After: 1\r\n\
Connection: close\r\nContent-Length: 70\r\n\r\nService Unavailable: this server holds its maximum of open connections";

/// Serve `router` on every connection `listener` accepts until `stop` is cancelled, then
/// shut every connection down gracefully and wait for them. The MCP endpoint, the metrics
/// listener and `fleetgate dashboard` all listen through it, so every HTTP server of the
/// program has the same bounds.
pub async fn serve_connections(
    listener: TcpListener,
    router: axum::Router,
    limits: ConnectionLimits,
    stop: CancellationToken,
) {
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let draining = Arc::new(Semaphore::new(MAX_DRAINING));
    let connections = TaskTracker::new();
    let mut http1 = hyper::server::conn::http1::Builder::new();
    http1.timer(TokioTimer::new()).header_read_timeout(limits.header_timeout).keep_alive(true);
    // Warn once each time the cap is reached, not once per refused connection.
    let mut at_cap = false;
    loop {
        let stream = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors, say: the open connections keep being served.
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            if !at_cap {
                tracing::warn!(max = limits.max_connections, "connection cap reached: refusing new connections");
            }
            at_cap = true;
            refuse(stream, &draining);
            continue;
        };
        at_cap = false;
        // Small writes (SSE events, JSON answers) go out at once: without TCP_NODELAY a
        // response written in parts waits on the client's delayed ACK, up to 40 ms a request.
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY on a connection");
        }
        // Heads with a bare LF and requests with two `Host`s are refused before routing
        // (`strict`): hyper accepts both.
        let bare_lf = Arc::new(AtomicBool::new(false));
        let routed = TowerToHyperService::new(router.clone());
        let flag = bare_lf.clone();
        let scope = ConnectionScope::default();
        let service = hyper::service::service_fn(move |mut request: hyper::Request<hyper::body::Incoming>| {
            request.extensions_mut().insert(scope.clone());
            let answer = match strict::refusal(request.headers(), flag.load(Ordering::Acquire)) {
                Some(why) => Err(why),
                None => Ok(hyper::service::Service::call(&routed, request)),
            };
            async move {
                match answer {
                    Ok(routed) => routed.await,
                    Err(why) => {
                        tracing::info!(why, "request refused: malformed head");
                        Ok(strict::bad_request(why))
                    }
                }
            }
        });
        let io = TokioIo::new(strict::Watched::new(stream, bare_lf));
        let connection = http1.serve_connection(io, service);
        let stop = stop.clone();
        connections.spawn(async move {
            let _permit = permit;
            tokio::pin!(connection);
            let ended = tokio::select! {
                ended = connection.as_mut() => ended,
                () = stop.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            // A header timeout, a reset by the peer: the peer's doing, not the gateway's.
            if let Err(e) = ended {
                tracing::debug!(error = %e, "connection ended");
            }
        });
    }
    drop(listener);
    connections.close();
    connections.wait().await;
}

/// One connection, as the requests it carries see it (a request extension): the principal
/// it is counted against, held as long as the connection is (the gatekeeper's per-principal
/// share of the connection cap).
#[derive(Clone, Debug, Default)]
pub(crate) struct ConnectionScope(Arc<Mutex<Option<Slot<String>>>>);

impl ConnectionScope {
    /// Count this connection against `principal`: kept when it is already, else `take`n
    /// (and the previous principal's place given back). `false` when `take` refuses.
    pub(crate) fn count_against(&self, principal: &str, take: impl FnOnce() -> Option<Slot<String>>) -> bool {
        let mut held = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if held.as_ref().is_some_and(|slot| slot.key() == principal) {
            return true;
        }
        match take() {
            Some(slot) => {
                *held = Some(slot);
                true
            }
            None => false,
        }
    }
}

/// Tell a connection past the cap why it is closed. The socket's send buffer is empty, so
/// the few bytes go out without waiting. Then, when a draining place is free, shut the
/// write side and read and discard the peer's input (bounded) until it closes, so the
/// close is not a reset; else close at once.
fn refuse(stream: TcpStream, draining: &Arc<Semaphore>) {
    tracing::debug!("connection refused: at the connection cap");
    if let Err(e) = stream.try_write(FULL) {
        tracing::debug!(error = %e, "cannot tell a refused connection why");
        return;
    }
    let Ok(place) = Arc::clone(draining).try_acquire_owned() else { return };
    tokio::spawn(async move {
        let _place = place;
        let mut stream = stream;
        if stream.shutdown().await.is_err() {
            return;
        }
        let mut buf = [0_u8; 4096];
        let mut read = 0;
        let drain = async {
            while read < DRAIN_BYTES {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => read += n,
                }
            }
        };
        let _ = tokio::time::timeout(DRAIN_FOR, drain).await;
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_refusal_is_a_complete_response() {
        let text = std::str::from_utf8(super::FULL).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        let length: usize = head.lines().find_map(|l| l.strip_prefix("Content-Length: ")).unwrap().parse().unwrap();
        assert_eq!(length, body.len());
    }
}
