//! The dashboard's HTTP side (axum): the page and its two assets, `/api/fleet`,
//! `/events` (server-sent events), `/metrics`, every one behind the [`Guard`] and
//! answered with headers that keep the page on its own origin (a CSP of `'self'`).
//!
//! Only `GET` (and so `HEAD`) is routed: **the dashboard has no handler that
//! writes**, to the store or anywhere else.

use super::guard::{Guard, Presented, Verdict, query_token};
use super::poll::Published;
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use fleetgate_control::metrics::{FleetMetrics, MetricsRegistry, OPENMETRICS_TEXT, PROMETHEUS_TEXT};
use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

const PAGE: &str = include_str!("assets/index.html");
const SCRIPT: &str = include_str!("assets/app.js");
const STYLE: &str = include_str!("assets/style.css");

/// Nothing the page loads, connects to or embeds may come from another origin.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// What the handlers share.
#[derive(Debug)]
pub struct App {
    /// The newest look; changes wake the event streams.
    pub latest: watch::Receiver<Arc<Published>>,
    /// The `/metrics` registry.
    pub registry: MetricsRegistry,
    /// The dashboard's own gauges (event streams open).
    pub metrics: FleetMetrics,
    /// Who may read.
    pub guard: Guard,
    /// Cancelled at shutdown: ends every event stream, so the server can stop.
    pub stop: CancellationToken,
}

/// The routes.
pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/", get(page))
        .route("/assets/app.js", get(|| async { asset(SCRIPT, "text/javascript; charset=utf-8") }))
        .route("/assets/style.css", get(|| async { asset(STYLE, "text/css; charset=utf-8") }))
        .route("/api/fleet", get(fleet))
        .route("/events", get(events))
        .route("/metrics", get(metrics))
        .fallback(|| async { (StatusCode::NOT_FOUND, "not found\n") })
        .layer(axum::middleware::from_fn_with_state(app.clone(), guard))
        .with_state(app)
}

/// Serve until `shutdown` completes; then end the event streams and stop, bounded.
///
/// Through the gateway's listener, not bare `axum::serve` (which sets no timer): a
/// connection that never finishes its request head is closed after `limits.header_timeout`,
/// and past `limits.max_connections` a new one is answered 503 and closed, so neither idle
/// sockets nor a flood of event streams can exhaust the process's file descriptors.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Arc<App>,
    limits: fleetgate_gateway::ConnectionLimits,
    shutdown: impl Future<Output = ()>,
) {
    let stop = app.stop.clone();
    let server = tokio::spawn(fleetgate_gateway::serve_connections(listener, router(app), limits, stop.clone()));
    shutdown.await;
    stop.cancel();
    match tokio::time::timeout(Duration::from_secs(2), server).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "the dashboard server task failed"),
        Err(_) => tracing::warn!("the dashboard server did not stop within 2 s"),
    }
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The guard, the token exchange (`/?token=…` → a cookie), and the safety headers.
async fn guard(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let h = request.headers();
    let presented = Presented {
        host: header_str(h, header::HOST),
        origin: header_str(h, header::ORIGIN),
        authorization: header_str(h, header::AUTHORIZATION),
        cookie: header_str(h, header::COOKIE),
    };
    let exchange = (request.uri().path() == "/" && app.guard.requires_token())
        .then(|| query_token(request.uri().query()))
        .flatten();
    let path = request.uri().path().to_owned();
    let response = match (app.guard.judge(&presented), exchange) {
        (Verdict::Forbidden(why), _) => {
            tracing::info!(%path, why, "request refused");
            closing((StatusCode::FORBIDDEN, format!("Forbidden: {why}\n")).into_response())
        }
        (_, Some(token)) if app.guard.token_ok(Some(&token)) => {
            // The token leaves the address bar (and the history) at once.
            let cookie = format!("{}={token}; HttpOnly; SameSite=Strict; Path=/", app.guard.cookie_name());
            let mut r = (StatusCode::SEE_OTHER, [(header::LOCATION, "/")]).into_response();
            if let Ok(v) = HeaderValue::from_str(&cookie) {
                r.headers_mut().insert(header::SET_COOKIE, v);
            }
            r
        }
        (_, Some(_)) | (Verdict::Unauthorized, None) => {
            // Neither the presented nor the expected value is logged.
            tracing::info!(%path, "request refused: missing or wrong token");
            let mut r = (
                StatusCode::UNAUTHORIZED,
                "Unauthorized: this dashboard needs its token: open /?token=TOKEN once in a browser, \
                 or send Authorization: Bearer TOKEN\n",
            )
                .into_response();
            r.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            closing(r)
        }
        (Verdict::Pass, None) => next.run(request).await,
    };
    with_safety_headers(response)
}

/// A refusal ends its connection: a refused client keeps no place under the connection cap
/// (20 unauthenticated keep-alive sockets would otherwise lock the operator out).
fn closing(mut response: Response) -> Response {
    response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

fn with_safety_headers(mut response: Response) -> Response {
    let h = response.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn asset(body: &'static str, content_type: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

async fn page() -> Response {
    asset(PAGE, "text/html; charset=utf-8")
}

async fn fleet(State(app): State<Arc<App>>) -> Response {
    let json = app.latest.borrow().json.clone();
    ([(header::CONTENT_TYPE, "application/json")], json).into_response()
}

async fn metrics(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    let openmetrics = MetricsRegistry::wants_openmetrics(header_str(&headers, header::ACCEPT));
    match app.registry.encode(openmetrics) {
        Ok(text) => {
            let content_type = if openmetrics { OPENMETRICS_TEXT } else { PROMETHEUS_TEXT };
            ([(header::CONTENT_TYPE, content_type)], text).into_response()
        }
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("cannot encode the metrics: {e}\n")).into_response(),
    }
}

/// Counts an open event stream for as long as the stream lives.
struct Open(FleetMetrics);

impl Open {
    fn new(metrics: &FleetMetrics) -> Self {
        metrics.event_streams.inc();
        Self(metrics.clone())
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.event_streams.dec();
    }
}

/// `GET /events`: the current view at once, then each changed one. `retry` asks
/// the browser to reconnect within 2 s when the dashboard restarts.
async fn events(State(app): State<Arc<App>>) -> Sse<impl futures_util::Stream<Item = Result<Event, Infallible>>> {
    let state = (app.latest.clone(), true, Open::new(&app.metrics), app.stop.clone());
    let stream = futures_util::stream::unfold(state, |(mut rx, first, open, stop)| async move {
        if !first {
            tokio::select! {
                changed = rx.changed() => changed.ok()?,
                () = stop.cancelled() => return None,
            }
        }
        let published = rx.borrow_and_update().clone();
        let mut event = Event::default().event("fleet").id(published.version.to_string()).data(&published.json);
        if first {
            event = event.retry(Duration::from_secs(2));
        }
        Some((Ok(event), (rx, false, open, stop)))
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}
