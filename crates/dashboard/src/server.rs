//! The dashboard's HTTP side (axum): the page and its two assets, `/api/fleet`,
//! `/events` (server-sent events), `/metrics`, every one behind the [`Guard`] and
//! answered with headers that keep the page on its own origin (a CSP of `'self'`).
//!
//! `GET` (and so `HEAD`) is routed, and one `POST`: an operator's answer to an approval
//! request (`/api/approvals/ID/approve|deny`), only with the dashboard's token configured,
//! from the page's own origin, with the page's CSRF token ([`Guard::judge_answer`]). It is
//! the only write the dashboard makes.

use super::guard::{Guard, Presented, Verdict, query_token};
use super::poll::Published;
use axum::Router;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use fleetgate_control::metrics::{FleetMetrics, MetricsRegistry, OPENMETRICS_TEXT, PROMETHEUS_TEXT};
use fleetgate_core::Clock;
use fleetgate_store::Store;
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
    /// Where an operator's answers go, when the page may take them (a token configured, or
    /// people sign in).
    pub answers: Option<Answers>,
    /// Signing people in, when configured.
    pub sign_in: Option<crate::signin::SignIn>,
}

/// What answering from the page needs.
pub struct Answers {
    /// The store the requests are in.
    pub store: Arc<dyn Store>,
    /// The decision clock.
    pub clock: Arc<dyn Clock>,
    /// This process's CSRF token, read by the page's script from `/api/session`.
    pub csrf: String,
    /// Who is who (the roster's `[[people]]`): every answer is judged by it.
    pub people: Arc<fleetgate_core::person::People>,
}

impl std::fmt::Debug for Answers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Answers").field("store", &self.store.describe()).finish_non_exhaustive()
    }
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
        .route("/api/session", get(session))
        .route("/api/approvals/{id}/{answer}", post(answer))
        .route("/auth/login", get(login))
        .route("/auth/callback", get(callback))
        .route("/auth/logout", get(logout))
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
    let cookie = header_str(h, header::COOKIE);
    let presented = Presented {
        host: header_str(h, header::HOST),
        origin: header_str(h, header::ORIGIN),
        authorization: header_str(h, header::AUTHORIZATION),
        cookie,
        signed_in: app.sign_in.as_ref().is_some_and(|s| s.session(cookie).is_some()),
    };
    // The way in is open to everyone the Host and Origin rules let through.
    let entry = matches!(request.uri().path(), "/auth/login" | "/auth/callback" | "/auth/logout");
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
        (Verdict::Unauthorized, None) if entry => next.run(request).await,
        (Verdict::Unauthorized, None) if path == "/" && app.guard.signs_in() => {
            // A person who has not signed in is sent to sign in.
            (StatusCode::SEE_OTHER, [(header::LOCATION, "/auth/login")]).into_response()
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

/// `GET /api/session`: what the page's script needs to answer (`csrf`, null when the page is
/// read-only) and who is signed in (`user`, null when no one; `sign_in`: whether people sign
/// in here). Behind the guard, and without CORS: no other origin's script can read it.
async fn session(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    let signed_in = app.sign_in.as_ref().and_then(|s| s.session(header_str(&headers, header::COOKIE)));
    let csrf = match &signed_in {
        Some(session) => Some(session.csrf.clone()),
        None => app.answers.as_ref().filter(|_| app.guard.requires_token()).map(|a| a.csrf.clone()),
    };
    let user = signed_in
        .map(|s| serde_json::json!({ "id": s.approver.id, "name": s.approver.name, "groups": s.approver.groups }));
    let body = serde_json::json!({ "csrf": csrf, "user": user, "sign_in": app.sign_in.is_some() });
    ([(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

/// `GET /auth/login`: off to the issuer to sign in.
async fn login(State(app): State<Arc<App>>) -> Response {
    let Some(sign_in) = &app.sign_in else { return (StatusCode::NOT_FOUND, "not found\n").into_response() };
    let to = sign_in.begin();
    match HeaderValue::from_str(&to) {
        Ok(v) => (StatusCode::SEE_OTHER, [(header::LOCATION, v)]).into_response(),
        Err(_) => {
            (StatusCode::INTERNAL_SERVER_ERROR, "the issuer's authorization endpoint is not a URL\n").into_response()
        }
    }
}

/// `GET /auth/callback?code&state`: the issuer's answer; a session, and on to the page.
async fn callback(State(app): State<Arc<App>>, request: Request) -> Response {
    let Some(sign_in) = &app.sign_in else { return (StatusCode::NOT_FOUND, "not found\n").into_response() };
    let params: Vec<(String, String)> = request
        .uri()
        .query()
        .unwrap_or("")
        .split('&')
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (k.to_owned(), crate::guard::query_value(v).unwrap_or_default()))
        .collect();
    let get = |k: &str| params.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
    if let Some(error) = get("error") {
        let why = fleetgate_core::text::shown(error, 200);
        return (StatusCode::FORBIDDEN, format!("the issuer refused the sign-in: {why}\n")).into_response();
    }
    let (Some(code), Some(state)) = (get("code"), get("state")) else {
        return (StatusCode::BAD_REQUEST, "the issuer's answer names no code and state\n").into_response();
    };
    match sign_in.finish(code, state).await {
        Ok(id) => {
            // A page that moves on from this origin: a SameSite=Strict cookie is not sent on
            // a redirect chain that began on the issuer's site.
            let page = "<!doctype html><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"0;url=/\">\
                        <title>Signed in</title><p>Signed in: <a href=\"/\">on to the dashboard</a></p>";
            let mut r = ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], page).into_response();
            if let Ok(v) = HeaderValue::from_str(&sign_in.set_cookie(&id)) {
                r.headers_mut().insert(header::SET_COOKIE, v);
            }
            r
        }
        Err(why) => {
            let why = why.to_string();
            tracing::info!(why, "a sign-in refused");
            (StatusCode::FORBIDDEN, format!("Forbidden: the sign-in is refused: {why}\n")).into_response()
        }
    }
}

/// `GET /auth/logout`: the session ends.
async fn logout(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    let Some(sign_in) = &app.sign_in else { return (StatusCode::NOT_FOUND, "not found\n").into_response() };
    sign_in.end(header_str(&headers, header::COOKIE));
    let mut r = (StatusCode::SEE_OTHER, [(header::LOCATION, "/auth/login")]).into_response();
    if let Ok(v) = HeaderValue::from_str(&sign_in.set_cookie("")) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}

/// `POST /api/approvals/ID/approve|deny` (reason in `X-Fleetgate-Reason`): the operator's
/// answer, recorded (once, on a pending request) and audited as given from the dashboard.
async fn answer(
    State(app): State<Arc<App>>,
    Path((id, answer)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    // A signed-in person answers as themself, with their session's CSRF token; else the
    // dashboard's token answers, with this process's.
    let session = app.sign_in.as_ref().and_then(|s| s.session(header_str(&headers, header::COOKIE)));
    let presented = Presented {
        host: header_str(&headers, header::HOST),
        origin: header_str(&headers, header::ORIGIN),
        authorization: None,
        cookie: None,
        signed_in: session.is_some(),
    };
    let csrf = match &session {
        Some(s) => s.csrf.clone(),
        None => app.answers.as_ref().map_or_else(String::new, |a| a.csrf.clone()),
    };
    if let Err(why) =
        app.guard.judge_answer(&presented, header_str(&headers, "x-fleetgate-csrf".parse().unwrap()), &csrf)
    {
        tracing::info!(%id, why, "an answer from the page refused");
        return closing((StatusCode::FORBIDDEN, format!("Forbidden: {why}\n")).into_response());
    }
    let Some(answers) = &app.answers else { return (StatusCode::FORBIDDEN, "Forbidden\n").into_response() };
    let approve = match answer.as_str() {
        "approve" => true,
        "deny" => false,
        _ => return (StatusCode::NOT_FOUND, "not found\n").into_response(),
    };
    let reason = header_str(&headers, "x-fleetgate-reason".parse().unwrap()).map(str::to_owned);
    let (store, clock, people) = (answers.store.clone(), answers.clock.clone(), answers.people.clone());
    let done = tokio::task::spawn_blocking(move || {
        let by = session.map_or_else(
            || fleetgate_core::approval::Approver {
                id: "token:dashboard".into(),
                name: Some("the dashboard's operator token".into()),
                ..Default::default()
            },
            |s| s.approver,
        );
        fleetgate_control::approvals::answer(&*store, &id, (&by, &people), approve, reason.as_deref(), clock.now())
    })
    .await;
    match done {
        Ok(Ok(request)) => {
            ([(header::CONTENT_TYPE, "application/json")], serde_json::to_string(&request).unwrap_or_default())
                .into_response()
        }
        Ok(Err(fleetgate_control::approvals::AnswerError::NotPending(_))) => {
            (StatusCode::CONFLICT, "Conflict: the request is not pending\n").into_response()
        }
        Ok(Err(fleetgate_control::approvals::AnswerError::Refused(_, why))) => {
            (StatusCode::FORBIDDEN, format!("Forbidden: {why}\n")).into_response()
        }
        Ok(Err(e)) => {
            (StatusCode::INTERNAL_SERVER_ERROR, format!("the answer was not recorded: {e}\n")).into_response()
        }
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("the answer was not recorded: {e}\n")).into_response(),
    }
}
