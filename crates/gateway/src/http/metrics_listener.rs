//! A stdio gateway's own `/metrics` listener ([`crate::MetricsListener`]): the HTTP
//! transport's `/metrics` handler (the observer's exposition, the `Host`/`Origin` rules, a
//! bearer token when one is set) alone on a router, served by the same connection loop
//! (header timeout, connection cap). Nothing else is routed: every other path is 404.

use super::{METRICS_ENDPOINT, MetricsEndpoint, listen, metrics};
use crate::error::GatewayError;
use crate::observe::GatewayObserver;
use crate::options::MetricsListener;
use fleetgate_core::origin::HostRules;
use std::sync::Arc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The running listener: cancel `stop`, then await `task` (bounded) at shutdown.
#[derive(Debug)]
pub(crate) struct Running {
    pub(crate) stop: CancellationToken,
    pub(crate) task: JoinHandle<()>,
}

/// Check the settings (a non-loopback address only with `allow_remote` and a non-empty
/// token), bind, tell `bound` the address, and serve until [`Running::stop`].
pub(crate) async fn start_metrics_listener(
    settings: &MetricsListener,
    observer: Option<Arc<dyn GatewayObserver>>,
) -> Result<Running, GatewayError> {
    let refuse = |reason| GatewayError::MetricsListen { addr: settings.listen, reason };
    if settings.bearer_token.as_deref().is_some_and(str::is_empty) {
        return Err(refuse("the bearer token is empty"));
    }
    if !settings.listen.ip().is_loopback() {
        if !settings.allow_remote {
            return Err(refuse("not a loopback address (remote scrapes must be allowed explicitly)"));
        }
        if settings.bearer_token.is_none() {
            return Err(refuse("a non-loopback listener needs a bearer token"));
        }
    }
    let listener = tokio::net::TcpListener::bind(settings.listen)
        .await
        .map_err(|source| GatewayError::Bind { addr: settings.listen, source })?;
    let local = listener.local_addr().map_err(|source| GatewayError::Bind { addr: settings.listen, source })?;
    tracing::info!(listen = %local, token = settings.bearer_token.is_some(), "metrics listening");
    (settings.bound)(local);
    let mut router = axum::Router::new();
    if let Some(observer) = observer {
        let endpoint = Arc::new(MetricsEndpoint {
            observer,
            hosts: HostRules::new(local, &settings.allowed_hosts),
            token: settings.bearer_token.clone(),
        });
        router = router.route(METRICS_ENDPOINT, axum::routing::get(metrics).with_state(endpoint));
    }
    let stop = CancellationToken::new();
    let task = tokio::spawn(listen::serve_connections(listener, router, settings.connections, stop.clone()));
    Ok(Running { stop, task })
}
