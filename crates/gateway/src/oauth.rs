//! The gateway as an OAuth 2.1 resource server, as the MCP authorization specification has
//! it: a remote client presents an access token from the fleet's authorization server; the
//! token is a JWT signed by the issuer, verified against the issuer's JWKS, meant for this
//! resource (`aud`), from this issuer (`iss`), and current (`exp`, `nbf`, a small leeway). Its
//! principal and the profiles it may use come from its claims, or from the operator's mapping
//! of subjects. The principal of a subject is `oauth:<subject>` unless the mapping names it,
//! and a mapped name is never a tokens-file principal's: the two sources never share one.
//! `/.well-known/oauth-protected-resource` (RFC 9728) names the authorization server; a 401
//! points to it (`WWW-Authenticate: Bearer resource_metadata=…`).
//!
//! Accepted: RS256 and ES256, and only with a key of the matching type that the JWKS names
//! (no `none`, no HMAC: a public key is never a shared secret). The JWKS is fetched when first
//! needed (from `jwks_uri`, else the issuer's OpenID or RFC 8414 metadata), kept, and fetched
//! again when a token names a key it lacks (a rotation) — at most once per cooldown, so a
//! stream of made-up key ids cannot turn the gateway into a load on the issuer. One fetch is
//! in flight at a time, within a deadline, and outside any lock the verification takes: a
//! token whose key is at hand is verified at once, whatever a fetch is waiting on; only a
//! token that needs the fetch waits for it. Tokens are never logged, nor their claims beyond
//! the principal.

use crate::auth::{OAUTH_PREFIX, Principals, names_an_oauth_subject};
use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `[http.oauth]`: the authorization server this gateway trusts, and how a token's claims
/// name its principal and profiles.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OAuthSettings {
    /// The issuer (`iss`), e.g. `https://auth.example.com/realms/fleet`.
    pub issuer: String,
    /// This resource's identifier (`aud`), e.g. `https://gw.example.com/mcp`; also where its
    /// metadata document says it is.
    pub audience: String,
    /// Where the issuer's keys are; `None`: read from the issuer's metadata.
    pub jwks_uri: Option<String>,
    /// The claim naming the principal (default `sub`).
    pub principal_claim: String,
    /// The claim listing the profiles the principal may use (an array of strings, or one
    /// space-separated string); `None`: the mapping decides, else any profile.
    pub profiles_claim: Option<String>,
    /// Subjects mapped to a principal name and profiles (`[[http.oauth.principals]]`).
    pub principals: Vec<OAuthPrincipal>,
    /// Clock skew allowed on `exp` and `nbf`.
    pub leeway: Duration,
    /// How long after a JWKS fetch an unknown key id may fetch it again.
    pub jwks_cooldown: Duration,
}

impl OAuthSettings {
    /// Settings for `issuer` and `audience`, the rest at their defaults.
    pub fn new(issuer: impl Into<String>, audience: impl Into<String>) -> Self {
        Self {
            issuer: issuer.into(),
            audience: audience.into(),
            jwks_uri: None,
            principal_claim: "sub".to_owned(),
            profiles_claim: None,
            principals: Vec::new(),
            leeway: Duration::from_secs(60),
            jwks_cooldown: Duration::from_secs(30),
        }
    }

    /// Refuse a `[[http.oauth.principals]]` name that could be another principal's: one that
    /// is a name of `tokens_file` or begins with `oauth:` (an unmapped subject's), or that two
    /// subjects share — compared as the workers record them (core's
    /// `normalize_client_name`). A principal is then always one credential's, never
    /// another source's of the same name.
    pub fn check_principals(&self, tokens_file: Option<&Principals>) -> Result<(), PrincipalClash> {
        let normal = fleetgate_core::client::normalize_client_name;
        let mut seen: Vec<(String, &str)> = Vec::new();
        for mapped in &self.principals {
            let Some(name) = &mapped.name else { continue };
            let subject = &mapped.subject;
            if names_an_oauth_subject(name) {
                return Err(PrincipalClash::OAuthPrefix { subject: subject.clone(), name: name.clone() });
            }
            if let Some(file) = tokens_file.and_then(|t| t.names().find(|n| normal(n) == normal(name))) {
                let file = file.to_owned();
                return Err(PrincipalClash::TokensFile { subject: subject.clone(), name: name.clone(), file });
            }
            if let Some((_, other)) = seen.iter().find(|(n, _)| *n == normal(name)) {
                let other = (*other).to_owned();
                return Err(PrincipalClash::Shared { other, subject: subject.clone(), name: name.clone() });
            }
            seen.push((normal(name), subject));
        }
        Ok(())
    }

    /// The RFC 9728 metadata document.
    pub(crate) fn metadata(&self) -> Value {
        serde_json::json!({
            "resource": self.audience,
            "authorization_servers": [self.issuer],
            "bearer_methods_supported": ["header"],
            "resource_name": "fleetgate",
        })
    }

    /// Where the metadata document is published for this resource: its origin,
    /// `/.well-known/oauth-protected-resource`, then the resource's path (RFC 9728 §3.1).
    pub(crate) fn metadata_url(&self) -> String {
        let (origin, path) = split_url(&self.audience);
        format!("{origin}{WELL_KNOWN}{}", path.trim_end_matches('/'))
    }

    /// The paths the metadata document is served at: with the resource's path, and without.
    pub(crate) fn metadata_paths(&self) -> Vec<String> {
        let (_, path) = split_url(&self.audience);
        let mut paths = vec![WELL_KNOWN.to_owned()];
        let with = format!("{WELL_KNOWN}{}", path.trim_end_matches('/'));
        if with != WELL_KNOWN {
            paths.push(with);
        }
        paths
    }
}

/// Why `url` is refused as a URL of the authorization server, if it is: it must be
/// `https://`, or `http://` on a loopback host (a development server), so tokens and keys never
/// cross a network in the clear. The rule for the configured URLs and for those the issuer's
/// metadata names alike. Pure.
pub fn check_oauth_url(url: &str) -> Result<(), UrlRefused> {
    let uri: axum::http::Uri =
        url.parse().map_err(|e: axum::http::uri::InvalidUri| UrlRefused::NotAUrl(e.to_string()))?;
    let host = uri.host().filter(|h| !h.is_empty()).ok_or(UrlRefused::NoHost)?;
    let loopback = host == "localhost"
        || host.trim_matches(['[', ']']).parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    match uri.scheme_str() {
        Some("https") => Ok(()),
        Some("http") if loopback => Ok(()),
        Some("http") => Err(UrlRefused::PlainHttp),
        _ => Err(UrlRefused::NotHttps),
    }
}

/// Whether `a` and `b` are on one origin: scheme, host (any case) and port (the scheme's
/// default when none is written). Pure.
fn same_origin(a: &str, b: &str) -> bool {
    let origin = |url: &str| {
        let uri: axum::http::Uri = url.parse().ok()?;
        let scheme = uri.scheme_str()?.to_ascii_lowercase();
        let port = uri.port_u16().or(match scheme.as_str() {
            "https" => Some(443),
            "http" => Some(80),
            _ => None,
        })?;
        Some((scheme, uri.host()?.to_ascii_lowercase(), port))
    };
    origin(a).is_some_and(|a| origin(b).is_some_and(|b| a == b))
}

/// The `jwks_uri` the issuer's metadata document `meta` names, held to what a configured one
/// is held to and more: the document must name exactly this issuer (RFC 8414 §3.3, OpenID
/// Discovery §4.3: else it is not this issuer's), and the keys must be on the issuer's
/// origin, by a URL the configured rule accepts. Keys elsewhere are trusted only when the
/// operator names them (`jwks_uri`). Pure.
fn discovered_jwks_uri(settings: &OAuthSettings, meta: &Value) -> Result<String, MetadataFault> {
    let claimed = meta.get("issuer").and_then(Value::as_str);
    if claimed != Some(settings.issuer.as_str()) {
        let claimed = claimed.map(|c| cut_short(c, 80));
        return Err(MetadataFault::OtherIssuer { claimed, issuer: settings.issuer.clone() });
    }
    let uri = meta.get("jwks_uri").and_then(Value::as_str).ok_or(MetadataFault::NoJwksUri)?;
    let shown = cut_short(uri, 120);
    if let Err(why) = check_oauth_url(uri) {
        return Err(MetadataFault::JwksUrl { shown, why });
    }
    if !same_origin(uri, &settings.issuer) {
        return Err(MetadataFault::JwksOrigin { shown });
    }
    Ok(uri.to_owned())
}

/// The RFC 9728 well-known path.
pub(crate) const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// `https://host:port/path` → (`https://host:port`, `/path`).
fn split_url(url: &str) -> (&str, &str) {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    match url[after_scheme..].find('/') {
        Some(i) => url.split_at(after_scheme + i),
        None => (url, ""),
    }
}

/// One subject of `[[http.oauth.principals]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OAuthPrincipal {
    /// The value of the principal claim.
    pub subject: String,
    /// The name its workers and audit entries record (default: `oauth:<subject>`, as an
    /// unmapped subject's). Never a tokens-file name, nor one spelled `oauth:…`
    /// ([`OAuthSettings::check_principals`]).
    pub name: Option<String>,
    /// The profiles it may use; empty: any.
    pub profiles: Vec<String>,
}

/// Who a verified token is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TokenPrincipal {
    /// The principal claim's value.
    pub(crate) subject: String,
    /// The principal: `oauth:<subject>`, or the mapping's name.
    pub(crate) name: String,
    /// `None`: any profile.
    pub(crate) profiles: Option<Vec<String>>,
}

impl TokenPrincipal {
    pub(crate) fn may_serve(&self, profile: &str) -> bool {
        self.profiles.as_ref().is_none_or(|p| p.iter().any(|q| q == profile))
    }
}

/// Why a token was not accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TokenRefusal {
    /// Not a valid token for this resource (401, `invalid_token`).
    Invalid(String),
    /// The issuer's keys could not be read (503): no token can be checked.
    KeysUnavailable(String),
}

/// The issuer's keys, by key id, as last fetched.
#[derive(Default)]
struct Keys {
    by_id: HashMap<String, (DecodingKey, Option<Algorithm>)>,
    /// Keys without a `kid`.
    unnamed: Vec<(DecodingKey, Option<Algorithm>)>,
}

impl Keys {
    /// The keys that may have signed a token naming `kid` with `alg`.
    fn for_token(&self, kid: Option<&str>, alg: Algorithm) -> Vec<DecodingKey> {
        let fits =
            |(key, key_alg): &(DecodingKey, Option<Algorithm>)| key_alg.is_none_or(|a| a == alg).then(|| key.clone());
        match kid {
            Some(kid) => self.by_id.get(kid).and_then(fits).into_iter().collect(),
            None => self.unnamed.iter().chain(self.by_id.values()).filter_map(fits).collect(),
        }
    }
}

/// The keys in use and what is known of their fetching. Read and replaced under a lock held
/// for no more than that — never across a fetch.
#[derive(Default)]
struct KeyState {
    keys: Arc<Keys>,
    /// When the keys were last fetched, or last found unfetchable while some were at hand
    /// (they are kept): the age and the cooldown count from it. `None`: none yet.
    fetched: Option<Instant>,
    /// Fetches ended so far: who waited for a fetch in flight sees it moved.
    attempts: u64,
    /// Why the last fetch failed, while no fetch ever succeeded.
    failure: Option<FetchError>,
}

/// Checks access tokens against one issuer.
pub(crate) struct Verifier {
    settings: OAuthSettings,
    state: std::sync::Mutex<KeyState>,
    /// Held by the one JWKS fetch in flight: a token whose key is not at hand waits for it
    /// (bounded by the fetch's deadline), every other token is verified meanwhile.
    fetching: Arc<tokio::sync::Mutex<()>>,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier").field("issuer", &self.settings.issuer).finish_non_exhaustive()
    }
}

/// How long fetching the keys may take, the metadata that names them included.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest JWKS or metadata document read.
const MAX_DOCUMENT: u64 = 256 * 1024;
/// How old the keys may be before the next token fetches them again anyway.
const KEYS_MAX_AGE: Duration = Duration::from_secs(3600);

/// The most of a token's key id a refusal names: any client can put kilobytes there, and
/// the refusal goes back into a response header.
const MAX_KID_SHOWN: usize = 40;

/// `kid` as a refusal names it: cut to [`MAX_KID_SHOWN`] characters.
fn shown_kid(kid: &str) -> String {
    cut_short(kid, MAX_KID_SHOWN)
}

/// `text` cut to `max` characters, saying how long it was: what a token or a metadata
/// document says is quoted back only so far.
fn cut_short(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}… ({} bytes)", &text[..end], text.len()),
        None => text.to_owned(),
    }
}

/// Whether a presented bearer value has the shape of a JWT (three base64url parts).
pub(crate) fn looks_like_jwt(token: &str) -> bool {
    let parts: Vec<&str> = token.split('.').collect();
    parts.len() == 3
        && parts[..2].iter().all(|p| !p.is_empty())
        && parts.iter().all(|p| p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
}

/// The JSON document at `url`, read by `deadline`.
fn get_json(url: &str, deadline: Instant) -> Result<Value, FetchError> {
    // Messages name the URL without any credential in it.
    let url_shown = || fleetgate_core::redact::redact_url_userinfo(url).unwrap_or_else(|| url.to_owned());
    let get = |why: String| FetchError::Get { url: url_shown(), why };
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(FetchError::NoTimeLeft { url: url_shown() });
    }
    // No redirect is followed: where the keys are is what the configuration or the checked
    // metadata says, not where an answer points.
    let agent: ureq::Agent = ureq::Agent::config_builder().timeout_global(Some(left)).max_redirects(0).build().into();
    let mut response = agent.get(url).call().map_err(|e| get(e.to_string()))?;
    let status = response.status();
    if !status.is_success() {
        let note = if status.is_redirection() { " (a redirect, which is not followed)" } else { "" };
        return Err(FetchError::Status { url: url_shown(), status: status.to_string(), note });
    }
    let text =
        response.body_mut().with_config().limit(MAX_DOCUMENT).read_to_string().map_err(|e| get(e.to_string()))?;
    serde_json::from_str(&text).map_err(|e| get(format!("not JSON: {e}")))
}

impl Verifier {
    pub(crate) fn new(settings: OAuthSettings) -> Self {
        Self { settings, state: std::sync::Mutex::default(), fetching: Arc::default() }
    }

    pub(crate) fn settings(&self) -> &OAuthSettings {
        &self.settings
    }

    fn state(&self) -> std::sync::MutexGuard<'_, KeyState> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The `jwks_uri` of the issuer's metadata (OpenID, then RFC 8414), read by `deadline`:
    /// the first document that names one decides — held to [`discovered_jwks_uri`], or
    /// refused, never passed over for the next.
    fn discover(settings: &OAuthSettings, deadline: Instant) -> Result<String, FetchError> {
        let issuer = settings.issuer.trim_end_matches('/');
        let wells = [
            format!("{issuer}/.well-known/openid-configuration"),
            format!("{issuer}/.well-known/oauth-authorization-server"),
        ];
        let mut unread = Vec::new();
        for well in wells {
            match get_json(&well, deadline) {
                Ok(meta) if meta.get("jwks_uri").is_some() => {
                    return discovered_jwks_uri(settings, &meta).map_err(|why| FetchError::Metadata { well, why });
                }
                Ok(_) => unread.push(FetchError::NamesNoJwksUri { well }),
                Err(why) => unread.push(why),
            }
        }
        Err(FetchError::NoMetadata { issuer: issuer.to_owned(), unread })
    }

    /// The JWKS, from `jwks_uri` or the issuer's metadata, read by `deadline`.
    fn fetch_keys(settings: &OAuthSettings, deadline: Instant) -> Result<Keys, FetchError> {
        let uri = match &settings.jwks_uri {
            Some(uri) => uri.clone(),
            None => Self::discover(settings, deadline)?,
        };
        let set: JwkSet = serde_json::from_value(get_json(&uri, deadline)?).map_err(|e| FetchError::NotAJwks {
            url: fleetgate_core::redact::redact_url_userinfo(&uri).unwrap_or_else(|| uri.clone()),
            why: e.to_string(),
        })?;
        let mut keys = Keys::default();
        for jwk in &set.keys {
            // Only public keys of the accepted kinds; anything else is skipped, not trusted.
            if !matches!(jwk.algorithm, AlgorithmParameters::RSA(_) | AlgorithmParameters::EllipticCurve(_)) {
                continue;
            }
            let Ok(key) = DecodingKey::from_jwk(jwk) else { continue };
            let alg = jwk.common.key_algorithm.and_then(|a| a.to_string().parse::<Algorithm>().ok());
            match &jwk.common.key_id {
                Some(kid) => {
                    keys.by_id.insert(kid.clone(), (key, alg));
                }
                None => keys.unnamed.push((key, alg)),
            }
        }
        Ok(keys)
    }

    /// Fetch the keys, holding `_one` (the right to the one fetch in flight), off the async
    /// workers and within [`FETCH_TIMEOUT`]; record what came of it.
    async fn fetch(&self, _one: tokio::sync::OwnedMutexGuard<()>) {
        let settings = self.settings.clone();
        let deadline = Instant::now() + FETCH_TIMEOUT;
        let fetch = tokio::task::spawn_blocking(move || Self::fetch_keys(&settings, deadline));
        // Every read in it is bounded by the deadline; this bounds the wait for the thread too.
        let fetched = match tokio::time::timeout(FETCH_TIMEOUT + Duration::from_secs(1), fetch).await {
            Ok(Ok(fetched)) => fetched,
            Ok(Err(e)) => Err(FetchError::Failed(e.to_string())),
            Err(_) => Err(FetchError::TimedOut),
        };
        let mut state = self.state();
        state.attempts += 1;
        match fetched {
            Ok(keys) => {
                state.keys = Arc::new(keys);
                state.fetched = Some(Instant::now());
                state.failure = None;
            }
            Err(why) if state.fetched.is_none() => state.failure = Some(why),
            Err(why) => {
                tracing::warn!(%why, "the issuer's keys could not be fetched again; the last ones are kept");
                state.fetched = Some(Instant::now());
            }
        }
    }

    /// The keys that may have signed a token naming `kid` with `alg`. Those at hand serve
    /// at once; they are fetched (or the fetch in flight waited for) only when there are none
    /// for this token — none yet, or (past the cooldown) an unknown `kid`, a rotation — and
    /// refreshed behind the token's back when old. A token never waits on a fetch its own key
    /// does not need, so a made-up key id stalls no other token.
    async fn candidates(self: &Arc<Self>, kid: Option<&str>, alg: Algorithm) -> Result<Vec<DecodingKey>, TokenRefusal> {
        let (keys, fetched, attempts) = {
            let state = self.state();
            (state.keys.clone(), state.fetched, state.attempts)
        };
        let found = keys.for_token(kid, alg);
        let stale = fetched.is_none_or(|at| at.elapsed() > KEYS_MAX_AGE);
        if !found.is_empty() {
            if stale && let Ok(one) = self.fetching.clone().try_lock_owned() {
                let verifier = self.clone();
                tokio::spawn(async move { verifier.fetch(one).await });
            }
            return Ok(found);
        }
        let may_fetch = fetched.is_none_or(|at| at.elapsed() >= self.settings.jwks_cooldown) || stale;
        if may_fetch {
            let one = self.fetching.clone().lock_owned().await;
            // A fetch that ended while this token waited is the one it needed.
            if self.state().attempts == attempts {
                self.fetch(one).await;
            }
        }
        let state = self.state();
        if state.fetched.is_none() {
            let why = state
                .failure
                .as_ref()
                .map_or_else(|| "the issuer's keys were never read".to_owned(), ToString::to_string);
            return Err(TokenRefusal::KeysUnavailable(why));
        }
        let found = state.keys.for_token(kid, alg);
        if found.is_empty() {
            return Err(TokenRefusal::Invalid(match kid {
                Some(kid) => format!("the issuer has no key {:?} for {alg:?}", shown_kid(kid)),
                None => format!("the issuer has no key for {alg:?}"),
            }));
        }
        Ok(found)
    }

    /// Verify `token`: who it is, or why it is refused.
    pub(crate) async fn verify(self: &Arc<Self>, token: &str) -> Result<TokenPrincipal, TokenRefusal> {
        let claims = self.verified_claims(token).await?;
        self.principal(&claims)
    }

    /// `token`'s claims once its signature, issuer, audience and times hold.
    async fn verified_claims(self: &Arc<Self>, token: &str) -> Result<Map<String, Value>, TokenRefusal> {
        let header =
            jsonwebtoken::decode_header(token).map_err(|e| TokenRefusal::Invalid(format!("not a JWT: {e}")))?;
        if !matches!(header.alg, Algorithm::RS256 | Algorithm::ES256) {
            return Err(TokenRefusal::Invalid(format!("alg {:?} is not accepted (RS256, ES256)", header.alg)));
        }
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.settings.issuer]);
        validation.set_audience(&[&self.settings.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.leeway = self.settings.leeway.as_secs();
        validation.validate_nbf = true;
        let mut last = String::from("no key");
        for key in self.candidates(header.kid.as_deref(), header.alg).await? {
            match jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation) {
                Ok(data) => return Ok(data.claims),
                Err(e) => last = e.to_string(),
            }
        }
        Err(TokenRefusal::Invalid(last))
    }

    fn principal(&self, claims: &Map<String, Value>) -> Result<TokenPrincipal, TokenRefusal> {
        let claim = &self.settings.principal_claim;
        let subject = claims
            .get(claim)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty() && s.len() <= 128 && s.chars().all(|c| c.is_ascii_graphic()))
            .ok_or_else(|| TokenRefusal::Invalid(format!("the token has no usable {claim:?} claim")))?;
        // Namespaced: a subject is never the tokens-file principal of the same name.
        let namespaced = || format!("{OAUTH_PREFIX}{subject}");
        if let Some(mapped) = self.settings.principals.iter().find(|p| p.subject == subject) {
            return Ok(TokenPrincipal {
                subject: subject.to_owned(),
                name: mapped.name.clone().unwrap_or_else(namespaced),
                profiles: (!mapped.profiles.is_empty()).then(|| mapped.profiles.clone()),
            });
        }
        let profiles = self.settings.profiles_claim.as_ref().map(|name| match claims.get(name) {
            Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
            Some(Value::String(list)) => list.split_whitespace().map(str::to_owned).collect(),
            // The claim is configured and absent: no profile (fail closed).
            _ => Vec::new(),
        });
        Ok(TokenPrincipal { subject: subject.to_owned(), name: namespaced(), profiles })
    }
}

/// Verifies the ID tokens an OpenID provider issues to one client (the dashboard's sign-in):
/// signed by a key the issuer publishes (RS256, ES256; the keys fetched and rotated as the
/// gateway's own), issued by it (`iss`), for the client (`aud`), unexpired.
#[derive(Debug, Clone)]
pub struct IdTokenVerifier(Arc<Verifier>);

impl IdTokenVerifier {
    /// Tokens of `issuer` for `client_id`.
    pub fn new(issuer: &str, client_id: &str) -> Self {
        Self(Arc::new(Verifier::new(OAuthSettings::new(issuer, client_id))))
    }

    /// The token's claims, or why it is refused.
    pub async fn claims(&self, token: &str) -> Result<Map<String, Value>, IdTokenRefused> {
        self.0.verified_claims(token).await.map_err(|refusal| match refusal {
            TokenRefusal::Invalid(why) | TokenRefusal::KeysUnavailable(why) => IdTokenRefused(why),
        })
    }
}

/// The OpenID provider `issuer`'s authorization and token endpoints, from its discovery
/// document (which must name this issuer), read within a few seconds. Blocking.
pub fn oidc_endpoints(issuer: &str) -> Result<(String, String), FetchError> {
    let issuer = issuer.trim_end_matches('/');
    let well = format!("{issuer}/.well-known/openid-configuration");
    let meta = get_json(&well, Instant::now() + FETCH_TIMEOUT)?;
    if meta.get("issuer").and_then(Value::as_str).map(|i| i.trim_end_matches('/')) != Some(issuer) {
        return Err(FetchError::Metadata { well, why: MetadataFault::AnotherIssuer });
    }
    let endpoint = |key: &'static str| {
        let url = meta
            .get(key)
            .and_then(Value::as_str)
            .ok_or_else(|| FetchError::Metadata { well: well.clone(), why: MetadataFault::NoEndpoint(key) })?;
        check_oauth_url(url).map_err(|why| FetchError::MetadataEndpoint { well: well.clone(), key, why })?;
        Ok::<_, FetchError>(url.to_owned())
    };
    Ok((endpoint("authorization_endpoint")?, endpoint("token_endpoint")?))
}

/// Why a URL of the authorization server is refused ([`check_oauth_url`]); the text follows
/// the URL in a message (`[http.oauth] issuer "…" has no host`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UrlRefused {
    /// It does not parse (the parser's reason).
    #[error("is not a URL: {0}")]
    NotAUrl(String),
    /// It names no host.
    #[error("has no host")]
    NoHost,
    /// `http://` to a host that is not loopback.
    #[error("must be https:// (http:// only on a loopback host)")]
    PlainHttp,
    /// Another scheme.
    #[error("must be an https:// URL")]
    NotHttps,
}

/// A `[[http.oauth.principals]]` name that could be another principal's
/// ([`OAuthSettings::check_principals`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[allow(missing_docs)] // each variant is its message
pub enum PrincipalClash {
    #[error(
        "[http.oauth] principals: subject {subject:?} is named {name:?}, which begins with {:?}: that prefix names \
         unmapped subjects",
        OAUTH_PREFIX
    )]
    OAuthPrefix { subject: String, name: String },
    #[error(
        "[http.oauth] principals: subject {subject:?} is named {name:?}, which is the [http] tokens_file's principal \
         {file:?}: an OAuth subject and a tokens-file principal are never one principal — choose another name"
    )]
    TokensFile { subject: String, name: String, file: String },
    #[error(
        "[http.oauth] principals: subjects {other:?} and {subject:?} are both named {name:?}: one name, one subject"
    )]
    Shared { other: String, subject: String, name: String },
}

/// What an issuer's metadata document says that is refused; the text follows
/// `the metadata at URL`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[allow(missing_docs)] // each variant is its message
pub enum MetadataFault {
    #[error("names the issuer {claimed:?}, not {issuer:?}: it is not this issuer's (RFC 8414 §3.3)")]
    OtherIssuer { claimed: Option<String>, issuer: String },
    #[error("names another issuer")]
    AnotherIssuer,
    #[error("names no jwks_uri")]
    NoJwksUri,
    #[error("names the jwks_uri {shown:?}, which {why}")]
    JwksUrl { shown: String, why: UrlRefused },
    #[error("names the jwks_uri {shown:?}, not on the issuer's origin: set [http.oauth] jwks_uri to trust keys there")]
    JwksOrigin { shown: String },
    #[error("names no {0}")]
    NoEndpoint(&'static str),
}

/// Why the issuer's keys or metadata could not be read; URLs are shown without credentials.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[allow(missing_docs)] // each variant is its message
pub enum FetchError {
    #[error("GET {url}: no time left within {} s", FETCH_TIMEOUT.as_secs())]
    NoTimeLeft { url: String },
    /// The request, the body or the JSON failed (their reason).
    #[error("GET {url}: {why}")]
    Get { url: String, why: String },
    /// Not 2xx; `note` says when it was a redirect.
    #[error("GET {url}: answered {status}{note}")]
    Status { url: String, status: String, note: &'static str },
    #[error("the metadata at {well} {why}")]
    Metadata { well: String, why: MetadataFault },
    #[error("the metadata at {well}: {key} {why}")]
    MetadataEndpoint { well: String, key: &'static str, why: UrlRefused },
    #[error("{well}: names no jwks_uri")]
    NamesNoJwksUri { well: String },
    #[error(
        "the issuer {issuer} publishes no metadata naming its jwks_uri ({})",
        .unread.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
    )]
    NoMetadata { issuer: String, unread: Vec<FetchError> },
    #[error("{url}: not a JWKS: {why}")]
    NotAJwks { url: String, why: String },
    #[error("the key fetch failed: {0}")]
    Failed(String),
    #[error("the keys were not read within {} s", FETCH_TIMEOUT.as_secs())]
    TimedOut,
}

/// Why an ID token is refused (the verifier's reason).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct IdTokenRefused(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metadata_is_published_where_rfc_9728_puts_it_for_the_resource() {
        let s = OAuthSettings::new("https://auth.example/realm", "https://gw.example:8750/mcp");
        assert_eq!(s.metadata_url(), "https://gw.example:8750/.well-known/oauth-protected-resource/mcp");
        assert_eq!(s.metadata_paths(), [WELL_KNOWN, "/.well-known/oauth-protected-resource/mcp"]);
        assert_eq!(s.metadata()["authorization_servers"][0], "https://auth.example/realm");
        let root = OAuthSettings::new("https://a", "https://gw.example");
        assert_eq!(root.metadata_url(), "https://gw.example/.well-known/oauth-protected-resource");
        assert_eq!(root.metadata_paths(), [WELL_KNOWN]);
    }

    #[test]
    fn a_subject_is_namespaced_unless_the_mapping_names_it() {
        let mut settings = OAuthSettings::new("https://a", "https://gw");
        settings.principals = vec![
            OAuthPrincipal { subject: "svc-1".into(), name: Some("ci-bot".into()), profiles: vec![] },
            OAuthPrincipal { subject: "svc-2".into(), name: None, profiles: vec!["p".into()] },
        ];
        let verifier = Verifier::new(settings);
        let who = |sub: &str| {
            let claims = serde_json::json!({ "sub": sub });
            let p = verifier.principal(claims.as_object().unwrap()).unwrap();
            (p.subject, p.name)
        };
        assert_eq!(who("ci"), ("ci".to_owned(), "oauth:ci".to_owned()));
        assert_eq!(who("svc-1"), ("svc-1".to_owned(), "ci-bot".to_owned()));
        assert_eq!(who("svc-2"), ("svc-2".to_owned(), "oauth:svc-2".to_owned()));
    }

    #[test]
    fn a_mapped_name_is_never_another_principal_s() {
        const CI: &str = "8a1a3b1aa4b6c88b9a4e4a3a1f24e9a61ab4e5d1b70ee7e4a2c4f1c0f2b4b1d0";
        let file = Principals::parse(&format!("{CI}  ci\n"), "tokens").unwrap();
        let named = |pairs: &[(&str, &str)]| {
            let mut settings = OAuthSettings::new("https://a", "https://gw");
            settings.principals = pairs
                .iter()
                .map(|(s, n)| OAuthPrincipal { subject: (*s).into(), name: Some((*n).into()), profiles: vec![] })
                .collect();
            settings
        };
        assert!(named(&[("svc-1", "ci-bot"), ("svc-2", "reviewer")]).check_principals(Some(&file)).is_ok());
        for (pairs, says) in [
            (vec![("svc-1", "ci")], "tokens_file's principal \"ci\""),
            (vec![("svc-1", "CI")], "tokens_file's principal \"ci\""),
            (vec![("svc-1", "oauth:alice")], "begins with \"oauth:\""),
            (vec![("svc-1", "OAuth:alice")], "begins with \"oauth:\""),
            (vec![("svc-1", "bot"), ("svc-2", "Bot")], "both named"),
        ] {
            let e = named(&pairs).check_principals(Some(&file)).unwrap_err().to_string();
            assert!(e.contains(says), "{pairs:?}: {e}");
        }
        assert!(named(&[("svc-1", "ci")]).check_principals(None).is_ok(), "no tokens file: no collision");
    }

    #[test]
    fn discovered_keys_are_this_issuer_s_at_its_origin() {
        let s = OAuthSettings::new("https://auth.example/realms/fleet", "https://gw.example/mcp");
        let meta = |issuer: &str, jwks: &str| serde_json::json!({ "issuer": issuer, "jwks_uri": jwks });
        let issuer = "https://auth.example/realms/fleet";
        for jwks in ["https://auth.example/realms/fleet/certs", "https://AUTH.example:443/other/path"] {
            assert_eq!(discovered_jwks_uri(&s, &meta(issuer, jwks)), Ok(jwks.to_owned()));
        }
        for (doc, says) in [
            (meta("https://auth.example/realms/other", "https://auth.example/c"), "not this issuer's"),
            (meta("https://auth.example/realms/fleet/", "https://auth.example/c"), "not this issuer's"),
            (serde_json::json!({ "jwks_uri": "https://auth.example/c" }), "names the issuer None"),
            (meta(issuer, "https://keys.example/certs"), "not on the issuer's origin"),
            (meta(issuer, "https://auth.example:8443/certs"), "not on the issuer's origin"),
            (meta(issuer, "http://auth.example/certs"), "must be https://"),
            (meta(issuer, "file:///etc/keys"), "jwks_uri"),
            (serde_json::json!({ "issuer": issuer }), "names no jwks_uri"),
        ] {
            let e = discovered_jwks_uri(&s, &doc).unwrap_err().to_string();
            assert!(e.contains(says), "{doc}: {e}");
        }
        let long = "x".repeat(10_000);
        let e = discovered_jwks_uri(&s, &meta(&long, "https://auth.example/c")).unwrap_err().to_string();
        assert!(e.len() < 300, "a hostile document is quoted cut short: {e}");
    }

    #[test]
    fn the_url_rule_is_https_or_http_on_loopback() {
        for ok in ["https://a.example/x", "http://127.0.0.1:8080/", "http://localhost/", "http://[::1]:9/"] {
            assert_eq!(check_oauth_url(ok), Ok(()), "{ok}");
        }
        for (bad, says) in [
            ("http://a.example/", "must be https://"),
            ("ftp://a.example/", "must be an https:// URL"),
            ("a.example", "must be an https:// URL"),
            ("https:///x", "not a URL"),
        ] {
            let e = check_oauth_url(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn a_key_id_is_named_cut_short() {
        assert_eq!(shown_kid("rsa-1"), "rsa-1");
        let long = "é".repeat(30_000);
        let shown = shown_kid(&long);
        assert_eq!(shown, format!("{}… (60000 bytes)", "é".repeat(MAX_KID_SHOWN)));
    }

    #[test]
    fn only_a_three_part_base64url_value_is_taken_for_a_jwt() {
        assert!(looks_like_jwt("eyJh.eyJz.sig-_"));
        assert!(looks_like_jwt("eyJh.eyJz."), "an unsigned token is a JWT (and refused as one)");
        for not in ["opaque-token", "a.b", "a.b.c.d", "a.b.c d", ".b.c"] {
            assert!(!looks_like_jwt(not), "{not}");
        }
    }
}
