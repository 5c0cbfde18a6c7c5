//! Signing operators in to the dashboard with OpenID Connect, so an approval is recorded as the
//! person who gave it (`oidc:<subject>`, their name), not "the dashboard's token": the
//! authorization-code flow with PKCE (RFC 7636, `S256`) against the fleet's issuer, as a public
//! client (no client secret).
//!
//! * `GET /auth/login`: a fresh `state`, `nonce` and PKCE verifier kept here (at most
//!   [`MAX_PENDING`], each for [`PENDING_TTL`]); the browser is sent to the issuer's
//!   `authorization_endpoint`.
//! * `GET /auth/callback?code&state`: the `state` must be one this process sent, once; the code
//!   is exchanged at the `token_endpoint` with the verifier; the ID token must be signed by a
//!   key the issuer publishes, issued by it, for this client, unexpired, and carry the `nonce`.
//!   A session is made (a random id, at most [`MAX_SESSIONS`], each for [`SESSION_TTL`]) and
//!   set in a cookie that is `HttpOnly`, `SameSite=Strict`, and `Secure` when the dashboard's
//!   redirect URI is `https://`. The answer is a page that moves on to `/` from this origin:
//!   a `SameSite=Strict` cookie is not sent on a redirect that began on the issuer's site.
//! * `GET /auth/logout`: the session ends.
//!
//! Each session has its own CSRF token; the page reads it from `/api/session`.

use fleetgate_core::approval::Approver;
use fleetgate_core::{Clock, Timestamp};
use serde_json::{Map, Value};
use sha2::Digest as _;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

/// Logins begun and not finished, at most.
pub const MAX_PENDING: usize = 256;
/// How long a begun login may take.
pub const PENDING_TTL: Duration = Duration::from_secs(600);
/// Sessions, at most (the oldest is dropped past it).
pub const MAX_SESSIONS: usize = 1024;
/// How long a session lasts.
pub const SESSION_TTL: Duration = Duration::from_secs(8 * 3600);

/// Where and as whom the dashboard signs people in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignInSettings {
    /// The issuer.
    pub issuer: String,
    /// The dashboard's client id at the issuer.
    pub client_id: String,
    /// Where the issuer sends the browser back (`…/auth/callback`), as registered.
    pub redirect_uri: String,
    /// The claim listing the person's groups (`group:<name>` approvers).
    pub groups_claim: String,
    /// `[http.oauth] principal_claim`, when the dashboard signs people in at the gateways'
    /// own issuer: the claim whose value names an agent's calls (`oauth:<value>`), read from
    /// the ID token too, so a person signed in is the same person as their agents' principal
    /// whatever the claim (`sub`, `email`, …). `None`: another issuer, nothing to compare.
    pub principal_claim: Option<String>,
    /// `[[http.oauth.principals]]`: the principal claim's value → the principal name the
    /// gateway gives its calls (a person signed in with that value answers as the same person).
    pub principal_names: Vec<(String, String)>,
}

/// A signed-in person.
#[derive(Clone, Debug)]
pub struct Session {
    /// Who, as an approver.
    pub approver: Approver,
    /// This session's CSRF token.
    pub csrf: String,
    expires: Timestamp,
}

#[derive(Debug)]
struct Pending {
    verifier: String,
    nonce: String,
    started: Timestamp,
}

/// The sign-in of one dashboard process.
pub struct SignIn {
    settings: SignInSettings,
    authorization_endpoint: String,
    token_endpoint: String,
    verifier: fleetgate_gateway::IdTokenVerifier,
    pending: Mutex<HashMap<String, Pending>>,
    sessions: Mutex<HashMap<String, Session>>,
    cookie: String,
    /// The dashboard's clock: logins and sessions age by it, not by the machine's monotonic
    /// time, so their expiry is a function of what the clock says.
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for SignIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignIn").field("settings", &self.settings).field("cookie", &self.cookie).finish_non_exhaustive()
    }
}

/// `at` plus `ttl`.
fn after(at: Timestamp, ttl: Duration) -> Timestamp {
    at.plus_seconds(i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A random token: 256 bits, unpadded base64url.
fn random() -> String {
    let mut bytes = Vec::with_capacity(32);
    bytes.extend_from_slice(&fleetgate_host::nonce().to_le_bytes());
    bytes.extend_from_slice(&fleetgate_host::nonce().to_le_bytes());
    base64url(&bytes)
}

/// Unpadded base64url.
pub fn base64url(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(ABC[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

/// `text` percent-encoded for a URL's query.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The PKCE challenge of `verifier` (`S256`).
pub fn challenge(verifier: &str) -> String {
    base64url(&sha2::Sha256::digest(verifier.as_bytes()))
}

/// The approver a verified ID token's claims name (`oidc:<sub>`, `name` or
/// `preferred_username`, the groups under `groups_claim`) and, under the gateways' issuer,
/// the identities the same person's agents carry as aliases: `oauth:<the value of
/// principal_claim>` and `principal:<name>` for the name `principal_names` maps that value
/// to. A token without the claim brings none (then fleetgate cannot tell this person from an
/// OAuth principal, and refuses their approval of its calls); or why there is no approver.
pub fn approver(
    claims: &Map<String, Value>,
    groups_claim: &str,
    (principal_claim, principal_names): (Option<&str>, &[(String, String)]),
) -> Result<Approver, SignInError> {
    let sub = claims
        .get("sub")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty() && s.len() <= 128 && s.chars().all(|c| c.is_ascii_graphic()))
        .ok_or(SignInError::NoSubject)?;
    let name = ["name", "preferred_username"]
        .iter()
        .find_map(|k| claims.get(*k).and_then(Value::as_str))
        .map(|n| fleetgate_core::text::shown(n, 80));
    let groups = match claims.get(groups_claim) {
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
        Some(Value::String(list)) => list.split_whitespace().map(str::to_owned).collect(),
        _ => Vec::new(),
    };
    let claimed = principal_claim
        .and_then(|c| claims.get(c))
        .and_then(Value::as_str)
        .filter(|v| !v.is_empty() && v.len() <= 128 && v.chars().all(|c| c.is_ascii_graphic()));
    let mut aliases = Vec::new();
    if let Some(value) = claimed {
        aliases.push(format!("oauth:{value}"));
        aliases.extend(principal_names.iter().filter(|(s, _)| s == value).map(|(_, n)| format!("principal:{n}")));
    }
    Ok(Approver { id: format!("oidc:{sub}"), name, groups, aliases })
}

impl SignIn {
    /// Ready to sign people in at `settings.issuer` (its endpoints read now: an issuer that
    /// cannot be read stops the dashboard's start, with why). `port` names the cookie; logins
    /// and sessions expire by `clock`.
    pub fn new(settings: SignInSettings, port: u16, clock: Arc<dyn Clock>) -> Result<Self, SignInError> {
        let (authorization_endpoint, token_endpoint) = fleetgate_gateway::oidc_endpoints(&settings.issuer)?;
        Ok(Self {
            verifier: fleetgate_gateway::IdTokenVerifier::new(&settings.issuer, &settings.client_id),
            authorization_endpoint,
            token_endpoint,
            pending: Mutex::default(),
            sessions: Mutex::default(),
            cookie: format!("fleetgate_dashboard_session_{port}"),
            settings,
            clock,
        })
    }

    /// The session cookie's name.
    pub fn cookie_name(&self) -> &str {
        &self.cookie
    }

    /// Where to send the browser to sign in (a new pending login).
    pub fn begin(&self) -> String {
        let (state, nonce, verifier) = (random(), random(), random());
        let now = self.clock.now();
        let mut pending = lock(&self.pending);
        pending.retain(|_, p| now < after(p.started, PENDING_TTL));
        if pending.len() >= MAX_PENDING
            && let Some(oldest) = pending.iter().min_by_key(|(_, p)| p.started).map(|(k, _)| k.clone())
        {
            pending.remove(&oldest);
        }
        let url = format!(
            "{}{}response_type=code&client_id={}&redirect_uri={}&scope={}&state={}&nonce={}&code_challenge={}&\
             code_challenge_method=S256",
            self.authorization_endpoint,
            if self.authorization_endpoint.contains('?') { '&' } else { '?' },
            encode(&self.settings.client_id),
            encode(&self.settings.redirect_uri),
            // The ID token carries the principal claim only when asked for its scope.
            encode(if self.settings.principal_claim.as_deref() == Some("email") {
                "openid profile email"
            } else {
                "openid profile"
            }),
            encode(&state),
            encode(&nonce),
            challenge(&verifier),
        );
        pending.insert(state, Pending { verifier, nonce, started: now });
        url
    }

    /// Finish a login: the code exchanged (blocking, bounded), the ID token verified, a
    /// session made: its id.
    pub async fn finish(&self, code: &str, state: &str) -> Result<String, SignInError> {
        let now = self.clock.now();
        let pending = lock(&self.pending).remove(state).filter(|p| now < after(p.started, PENDING_TTL));
        let Some(pending) = pending else {
            return Err(SignInError::NotBegun);
        };
        let (token_endpoint, client_id, redirect_uri) =
            (self.token_endpoint.clone(), self.settings.client_id.clone(), self.settings.redirect_uri.clone());
        let (code, verifier) = (code.to_owned(), pending.verifier.clone());
        let id_token =
            tokio::task::spawn_blocking(move || exchange(&token_endpoint, &client_id, &redirect_uri, &code, &verifier))
                .await
                .map_err(|e| SignInError::ExchangeFailed(e.to_string()))??;
        let claims = self.verifier.claims(&id_token).await.map_err(SignInError::Refused)?;
        if claims.get("nonce").and_then(Value::as_str) != Some(pending.nonce.as_str()) {
            return Err(SignInError::Nonce);
        }
        let s = &self.settings;
        let approver = approver(&claims, &s.groups_claim, (s.principal_claim.as_deref(), &s.principal_names))?;
        tracing::info!(who = %approver.shown(), "signed in to the dashboard");
        Ok(self.open(approver))
    }

    /// A new session of `approver`: its id.
    fn open(&self, approver: Approver) -> String {
        let id = random();
        let now = self.clock.now();
        let mut sessions = lock(&self.sessions);
        sessions.retain(|_, s| s.expires > now);
        if sessions.len() >= MAX_SESSIONS
            && let Some(oldest) = sessions.iter().min_by_key(|(_, s)| s.expires).map(|(k, _)| k.clone())
        {
            sessions.remove(&oldest);
        }
        sessions.insert(id.clone(), Session { approver, csrf: random(), expires: after(now, SESSION_TTL) });
        id
    }

    /// The session a `Cookie` header carries, when live.
    pub fn session(&self, cookie_header: Option<&str>) -> Option<Session> {
        let id = cookie_header?
            .split(';')
            .map(str::trim)
            .find_map(|pair| pair.strip_prefix(self.cookie.as_str())?.strip_prefix('='))?;
        let sessions = lock(&self.sessions);
        let session = sessions.get(id)?;
        (session.expires > self.clock.now()).then(|| session.clone())
    }

    /// End the session a `Cookie` header carries.
    pub fn end(&self, cookie_header: Option<&str>) {
        let Some(id) = cookie_header.and_then(|h| {
            h.split(';').map(str::trim).find_map(|pair| pair.strip_prefix(self.cookie.as_str())?.strip_prefix('='))
        }) else {
            return;
        };
        lock(&self.sessions).remove(id);
    }

    /// The `Set-Cookie` value that carries session `id` (empty: ends it).
    pub fn set_cookie(&self, id: &str) -> String {
        let secure = if self.settings.redirect_uri.starts_with("https://") { "; Secure" } else { "" };
        let age = if id.is_empty() { "; Max-Age=0" } else { "" };
        format!("{}={id}; HttpOnly; SameSite=Strict; Path=/{secure}{age}", self.cookie)
    }
}

/// The code exchanged for an ID token at `token_endpoint` (a public client: the verifier is
/// its proof), within a few seconds.
fn exchange(
    token_endpoint: &str,
    client_id: &str,
    redirect_uri: &str,
    code: &str,
    verifier: &str,
) -> Result<String, SignInError> {
    let body = format!(
        "grant_type=authorization_code&code={}&redirect_uri={}&client_id={}&code_verifier={}",
        encode(code),
        encode(redirect_uri),
        encode(client_id),
        encode(verifier)
    );
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(5)))
        .max_redirects(0)
        .http_status_as_error(false)
        .build()
        .into();
    let mut response = agent
        .post(token_endpoint)
        .header("Content-Type", "application/x-www-form-urlencoded")
        .send(body.as_bytes())
        .map_err(|e| SignInError::TokenEndpoint(e.to_string()))?;
    let status = response.status();
    let text = response
        .body_mut()
        .with_config()
        .limit(64 * 1024)
        .read_to_string()
        .map_err(|e| SignInError::Unread(e.to_string()))?;
    if !status.is_success() {
        let body = fleetgate_core::text::shown(&text, 200);
        return Err(SignInError::TokenStatus { status: status.to_string(), body });
    }
    let answer: Value = serde_json::from_str(&text).map_err(|e| SignInError::TokenAnswer(e.to_string()))?;
    answer.get("id_token").and_then(Value::as_str).map(str::to_owned).ok_or(SignInError::NoIdToken)
}

/// Why a sign-in cannot start or did not finish: said to the person signing in, or (the
/// issuer unreadable) stops the dashboard's start.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[allow(missing_docs)] // each variant is its message
pub enum SignInError {
    /// The issuer's endpoints could not be read.
    #[error(transparent)]
    Discovery(#[from] fleetgate_gateway::FetchError),
    #[error("this sign-in was not begun here, or it took too long: sign in again")]
    NotBegun,
    #[error("the code exchange failed: {0}")]
    ExchangeFailed(String),
    #[error("the token endpoint: {0}")]
    TokenEndpoint(String),
    /// The token endpoint's answer could not be read (the reader's reason).
    #[error("{0}")]
    Unread(String),
    #[error("the token endpoint answered {status}: {body}")]
    TokenStatus { status: String, body: String },
    #[error("the token endpoint's answer: {0}")]
    TokenAnswer(String),
    #[error("the token endpoint sent no id_token")]
    NoIdToken,
    #[error("the ID token is refused: {0}")]
    Refused(fleetgate_gateway::IdTokenRefused),
    #[error("the ID token does not carry this sign-in's nonce")]
    Nonce,
    #[error("the ID token has no usable subject")]
    NoSubject,
}

#[cfg(test)]
mod tests {
    use super::*;
    use fleetgate_core::ManualClock;

    /// A sign-in on `clock` whose issuer is never reached (the tests stop before the exchange).
    fn sign_in(clock: Arc<ManualClock>) -> SignIn {
        let issuer = "https://issuer.invalid";
        SignIn {
            settings: SignInSettings {
                issuer: issuer.into(),
                client_id: "dashboard".into(),
                redirect_uri: "http://127.0.0.1:1/auth/callback".into(),
                groups_claim: "groups".into(),
                principal_claim: None,
                principal_names: Vec::new(),
            },
            authorization_endpoint: format!("{issuer}/authorize"),
            token_endpoint: format!("{issuer}/token"),
            verifier: fleetgate_gateway::IdTokenVerifier::new(issuer, "dashboard"),
            pending: Mutex::default(),
            sessions: Mutex::default(),
            cookie: "session".into(),
            clock,
        }
    }

    fn clock() -> Arc<ManualClock> {
        Arc::new(ManualClock::new(Timestamp::ymd_hms(2026, 12, 6, 9, 0, 0)))
    }

    #[test]
    fn a_session_lasts_its_ttl_by_the_dashboards_clock() {
        let clock = clock();
        let signed = sign_in(clock.clone());
        let alice = Approver { id: "oidc:alice".into(), name: None, groups: Vec::new(), aliases: Vec::new() };
        let cookie = format!("other=1; session={}", signed.open(alice));
        assert!(signed.session(Some(&cookie)).is_some());
        clock.advance(i64::try_from(SESSION_TTL.as_secs()).unwrap() - 1);
        assert!(signed.session(Some(&cookie)).is_some(), "a second before its end");
        clock.advance(1);
        assert!(signed.session(Some(&cookie)).is_none(), "ended at its TTL");
    }

    #[tokio::test]
    async fn a_login_finished_past_its_ttl_is_refused_before_any_exchange() {
        let clock = clock();
        let signed = sign_in(clock.clone());
        let url = signed.begin();
        let state = url.split(['?', '&']).find_map(|p| p.strip_prefix("state=")).unwrap().to_owned();
        clock.advance(i64::try_from(PENDING_TTL.as_secs()).unwrap());
        let refused = signed.finish("code", &state).await;
        assert!(refused.as_ref().is_err_and(|why| why.to_string().contains("took too long")), "{refused:?}");
        assert!(lock(&signed.pending).is_empty(), "the login is gone with its answer");
    }

    #[test]
    fn the_pkce_challenge_is_rfc_7636_s256() {
        // RFC 7636, appendix B.
        assert_eq!(
            challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn an_approver_is_the_subject_with_its_name_and_groups() {
        let claims = serde_json::json!({ "sub": "alice", "name": "Alice Liddell", "groups": ["release", "ops"] });
        let a = approver(claims.as_object().unwrap(), "groups", (None, &[])).unwrap();
        assert_eq!((a.id.as_str(), a.name.as_deref(), a.groups.len()), ("oidc:alice", Some("Alice Liddell"), 2));
        assert!(a.aliases.is_empty(), "another issuer's sign-in: nothing to compare");
        let spaced = serde_json::json!({ "sub": "bob", "preferred_username": "bob", "roles": "a b" });
        assert_eq!(approver(spaced.as_object().unwrap(), "roles", (None, &[])).unwrap().groups, ["a", "b"]);
        assert!(approver(serde_json::json!({ "name": "x" }).as_object().unwrap(), "groups", (None, &[])).is_err());
        assert!(approver(serde_json::json!({ "sub": "a b" }).as_object().unwrap(), "groups", (None, &[])).is_err());
        // Under the gateways' issuer the principal claim's value is the agents' principal, and
        // the name the gateway maps that value to.
        let names = [("alice@example.com".to_owned(), "release-bot".to_owned()), ("carol".to_owned(), "ci".to_owned())];
        let mailed = serde_json::json!({ "sub": "u-1234", "email": "alice@example.com" });
        let mapped = approver(mailed.as_object().unwrap(), "groups", (Some("email"), &names)).unwrap();
        assert_eq!(mapped.aliases, ["oauth:alice@example.com", "principal:release-bot"]);
        let by_sub = approver(mailed.as_object().unwrap(), "groups", (Some("sub"), &names)).unwrap();
        assert_eq!(by_sub.aliases, ["oauth:u-1234"], "the subject's mapping is by its own value");
        let unclaimed = approver(claims.as_object().unwrap(), "groups", (Some("email"), &names)).unwrap();
        assert!(unclaimed.aliases.is_empty(), "a token without the claim brings no alias");
    }
}
