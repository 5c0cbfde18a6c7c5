//! An OpenID provider for the tests of the gateway's OAuth 2.1 resource server and the
//! dashboard's sign-in: an HTTP server on loopback that publishes its metadata
//! (`/.well-known/openid-configuration`) and its keys (`/jwks`), mints access tokens signed
//! with them, and rotates them on demand. A test can make it misbehave: a metadata document
//! that claims another issuer or names keys elsewhere, a JWKS answered with a redirect, or held
//! (a slow issuer) until released.
//!
//! It also signs people in, as an authorization server does for the authorization-code flow
//! with PKCE (RFC 7636, `S256` only): `/authorize` answers a page with a login form (the
//! people [`Provider::add_user`] made; no password), which sends the browser back to the
//! client's `redirect_uri` with a one-time code and the client's `state`; `/token` exchanges
//! that code — for the same client and `redirect_uri`, with the verifier whose SHA-256 is the
//! challenge — for an ID token (`sub`, `name`, `groups`, the client's `nonce`).
//!
//! The keys in `oidc/` (two RSA-2048, one P-256, with their public JWKs) were generated for
//! these tests and are used nowhere else; they are test fixtures, not secrets.

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

const RSA_1: &str = include_str!("oidc/rsa-1.pem");
const RSA_2: &str = include_str!("oidc/rsa-2.pem");
const EC_1: &str = include_str!("oidc/ec-1.pem");
const PUBLIC: &str = include_str!("oidc/public-keys.json");

/// The keys the provider can sign with, by key id.
pub const KEYS: [&str; 3] = ["rsa-1", "rsa-2", "ec-1"];

/// One person who may sign in: login, name, groups, more claims of their ID token.
type User = (String, String, Vec<String>, Value);

struct Shared {
    /// The key ids the JWKS publishes now.
    published: Mutex<Vec<&'static str>>,
    /// JWKS documents served.
    fetches: AtomicUsize,
    /// What the metadata document says instead of the truth: its `issuer`, its `jwks_uri`.
    metadata: Mutex<(Option<String>, Option<String>)>,
    /// Where a JWKS request is redirected to (302), when set.
    jwks_redirect: Mutex<Option<String>>,
    /// While set, a JWKS request waits before it is answered (a slow issuer).
    hold: Mutex<bool>,
    released: Condvar,
    /// JWKS requests waiting on the hold now.
    held: AtomicUsize,
    /// The people who can sign in: login, name, groups.
    users: Mutex<Vec<User>>,
    /// Codes issued and not yet exchanged.
    codes: Mutex<Vec<Code>>,
}

/// An authorization code, until it is exchanged (once).
#[derive(Clone, Debug)]
struct Code {
    code: String,
    client_id: String,
    redirect_uri: String,
    challenge: String,
    nonce: Option<String>,
    login: String,
}

/// `application/x-www-form-urlencoded` (a query string or a form body), decoded.
pub fn form(text: &str) -> Vec<(String, String)> {
    let decode = |s: &str| {
        let bytes = s.replace('+', " ").into_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%'
                && i + 2 < bytes.len()
                && let Ok(b) = u8::from_str_radix(&String::from_utf8_lossy(&bytes[i + 1..i + 3]), 16)
            {
                out.push(b);
                i += 3;
                continue;
            }
            out.push(bytes[i]);
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    };
    text.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

/// `text` percent-encoded for a URL's query.
pub fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
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

fn html(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The longest a held JWKS request waits: a test that forgets to release cannot hang a thread
/// for ever.
const MAX_HOLD: Duration = Duration::from_secs(60);

/// The provider: its issuer URL (`http://127.0.0.1:PORT`), its server thread.
#[derive(Clone)]
pub struct Provider {
    /// The issuer (and base URL).
    pub issuer: String,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider").field("issuer", &self.issuer).finish_non_exhaustive()
    }
}

fn public_jwk(kid: &str) -> Value {
    let all: Value = serde_json::from_str(PUBLIC).expect("the fixture's public keys");
    all["keys"].as_array().into_iter().flatten().find(|k| k["kid"] == kid).cloned().unwrap_or(Value::Null)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Shared {
    /// Answer one connection: its request head read, one response written.
    fn answer(&self, issuer: &str, mut stream: TcpStream) {
        let mut line = String::new();
        let mut reader = BufReader::new(&stream);
        if reader.read_line(&mut line).is_err() {
            return;
        }
        // The rest of the head, and a form body's length.
        let mut header = String::new();
        let mut length = 0usize;
        while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
            if let Some((k, v)) = header.split_once(':')
                && k.trim().eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().unwrap_or(0);
            }
            header.clear();
        }
        let mut body = vec![0; length.min(64 * 1024)];
        let _ = std::io::Read::read_exact(&mut reader, &mut body);
        let target = line.split_whitespace().nth(1).unwrap_or("/");
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        match path {
            "/authorize" => return self.reply_html(&mut stream, "200 OK", &Self::login_page(query), None),
            "/authorize/login" => {
                let (status, page, location) = self.sign_in(query);
                return self.reply_html(&mut stream, status, &page, location);
            }
            "/token" => {
                let (status, document) = self.token(issuer, &String::from_utf8_lossy(&body));
                let body = document.to_string();
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nCache-Control: no-store\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                return;
            }
            _ => {}
        }
        let (status, body, location) = match path {
            "/.well-known/openid-configuration" | "/.well-known/oauth-authorization-server" => {
                let (claimed_issuer, jwks_uri) = lock(&self.metadata).clone();
                let document = json!({
                    "issuer": claimed_issuer.unwrap_or_else(|| issuer.to_owned()),
                    "jwks_uri": jwks_uri.unwrap_or_else(|| format!("{issuer}/jwks")),
                    "authorization_endpoint": format!("{issuer}/authorize"),
                    "token_endpoint": format!("{issuer}/token"),
                    "response_types_supported": ["code"],
                    "subject_types_supported": ["public"],
                    "id_token_signing_alg_values_supported": ["RS256", "ES256"],
                    "code_challenge_methods_supported": ["S256"],
                });
                ("200 OK", document, None)
            }
            "/jwks" => match lock(&self.jwks_redirect).clone() {
                Some(to) => ("302 Found", json!({}), Some(to)),
                None => {
                    self.wait_while_held();
                    self.fetches.fetch_add(1, Ordering::SeqCst);
                    let kids = lock(&self.published).clone();
                    ("200 OK", json!({ "keys": kids.iter().map(|k| public_jwk(k)).collect::<Vec<_>>() }), None)
                }
            },
            _ => ("404 Not Found", json!({ "error": "not found" }), None),
        };
        let body = body.to_string();
        let location = location.map(|to| format!("Location: {to}\r\n")).unwrap_or_default();
        let _ = write!(
            stream,
            "HTTP/1.1 {status}\r\n{location}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
    }

    fn reply_html(&self, stream: &mut TcpStream, status: &str, page: &str, location: Option<String>) {
        let location = location.map(|to| format!("Location: {to}\r\n")).unwrap_or_default();
        let _ = write!(
            stream,
            "HTTP/1.1 {status}\r\n{location}Content-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
            page.len()
        );
    }

    /// The login form: the client's parameters carried along, a login to type.
    fn login_page(query: &str) -> String {
        let hidden: String = form(query)
            .iter()
            .map(|(k, v)| format!("<input type=\"hidden\" name=\"{}\" value=\"{}\">", html(k), html(v)))
            .collect();
        format!(
            "<!doctype html><html><head><title>Sign in</title></head><body><h1>Sign in to the test issuer</h1>\
             <form id=\"login-form\" method=\"get\" action=\"/authorize/login\">{hidden}\
             <label>Login <input id=\"login\" name=\"login\" autocomplete=\"off\"></label>\
             <button id=\"sign-in\" type=\"submit\">Sign in</button></form></body></html>"
        )
    }

    /// A login submitted: a code for a known person, sent back to the client.
    fn sign_in(&self, query: &str) -> (&'static str, String, Option<String>) {
        let params = form(query);
        let get = |k: &str| params.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone());
        let login = get("login").unwrap_or_default();
        if !lock(&self.users).iter().any(|(l, ..)| *l == login) {
            return ("200 OK", format!("<!doctype html><p id=\"error\">no such person: {}</p>", html(&login)), None);
        }
        let (Some(client_id), Some(redirect_uri), Some(challenge)) =
            (get("client_id"), get("redirect_uri"), get("code_challenge"))
        else {
            return (
                "400 Bad Request",
                "<p id=\"error\">client_id, redirect_uri and code_challenge are required</p>".into(),
                None,
            );
        };
        if get("code_challenge_method").as_deref() != Some("S256") || get("response_type").as_deref() != Some("code") {
            return ("400 Bad Request", "<p id=\"error\">only response_type=code with S256</p>".into(), None);
        }
        let code = format!("code-{:016x}", fastrand::u64(..));
        lock(&self.codes).push(Code {
            code: code.clone(),
            client_id,
            redirect_uri: redirect_uri.clone(),
            challenge,
            nonce: get("nonce"),
            login,
        });
        let state = get("state").map(|s| format!("&state={}", encode(&s))).unwrap_or_default();
        let sep = if redirect_uri.contains('?') { '&' } else { '?' };
        ("302 Found", String::new(), Some(format!("{redirect_uri}{sep}code={}{state}", encode(&code))))
    }

    /// A code exchanged for an ID token, once, by the client it was issued to.
    fn token(&self, issuer: &str, body: &str) -> (&'static str, Value) {
        use sha2::Digest as _;
        let params = form(body);
        let get = |k: &str| params.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone()).unwrap_or_default();
        let refused = |why: &str| ("400 Bad Request", json!({ "error": "invalid_grant", "error_description": why }));
        if get("grant_type") != "authorization_code" {
            return ("400 Bad Request", json!({ "error": "unsupported_grant_type" }));
        }
        let code = {
            let mut codes = lock(&self.codes);
            let Some(i) = codes.iter().position(|c| c.code == get("code")) else {
                return refused("unknown or used code");
            };
            codes.remove(i)
        };
        if code.client_id != get("client_id") || code.redirect_uri != get("redirect_uri") {
            return refused("the code was issued to another client or redirect_uri");
        }
        if base64url(&sha2::Sha256::digest(get("code_verifier").as_bytes())) != code.challenge {
            return refused("the code_verifier does not match the code_challenge");
        }
        let Some((login, name, groups, more)) = lock(&self.users).iter().find(|(l, ..)| *l == code.login).cloned()
        else {
            return refused("the person is gone");
        };
        let provider = Provider { issuer: issuer.to_owned(), shared: Arc::new(Shared::empty()) };
        let mut extra = json!({ "name": name, "groups": groups });
        if let (Some(e), Some(more)) = (extra.as_object_mut(), more.as_object()) {
            e.extend(more.clone());
        }
        if let Some(nonce) = code.nonce {
            extra["nonce"] = json!(nonce);
        }
        let id_token = provider.sign("rsa-1", &provider.claims(&code.client_id, &login, extra));
        (
            "200 OK",
            json!({ "access_token": format!("at-{login}"), "token_type": "Bearer", "expires_in": 300, "id_token": id_token }),
        )
    }

    fn empty() -> Self {
        Shared {
            published: Mutex::new(Vec::new()),
            fetches: AtomicUsize::new(0),
            metadata: Mutex::new((None, None)),
            jwks_redirect: Mutex::new(None),
            hold: Mutex::new(false),
            released: Condvar::new(),
            held: AtomicUsize::new(0),
            users: Mutex::new(Vec::new()),
            codes: Mutex::new(Vec::new()),
        }
    }

    fn wait_while_held(&self) {
        let mut held = lock(&self.hold);
        if !*held {
            return;
        }
        self.held.fetch_add(1, Ordering::SeqCst);
        let until = Instant::now() + MAX_HOLD;
        while *held && Instant::now() < until {
            held = self.released.wait_timeout(held, until - Instant::now()).map_or_else(|e| e.into_inner().0, |r| r.0);
        }
        self.held.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Provider {
    /// Start serving on loopback, publishing `published` (key ids of [`KEYS`]). Each
    /// connection is answered on a thread of its own, so a held JWKS request holds no other.
    pub fn start(published: &[&'static str]) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let issuer = format!("http://{}", listener.local_addr().expect("its address"));
        let shared = Arc::new(Shared { published: Mutex::new(published.to_vec()), ..Shared::empty() });
        let serving = (shared.clone(), issuer.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (shared, issuer) = (serving.0.clone(), serving.1.clone());
                std::thread::spawn(move || shared.answer(&issuer, stream));
            }
        });
        Self { issuer, shared }
    }

    /// Let `login` sign in, as `name`, in `groups`.
    pub fn add_user(&self, login: &str, name: &str, groups: &[&str]) {
        self.add_user_claiming(login, name, groups, json!({}));
    }

    /// Let `login` sign in, as `name`, in `groups`, their ID token also carrying `more` (an
    /// `email`, say).
    pub fn add_user_claiming(&self, login: &str, name: &str, groups: &[&str], more: Value) {
        let groups = groups.iter().map(|g| (*g).to_owned()).collect();
        lock(&self.shared.users).push((login.into(), name.into(), groups, more));
    }

    /// Publish `published` from now on (a key rotation).
    pub fn publish(&self, published: &[&'static str]) {
        *lock(&self.shared.published) = published.to_vec();
    }

    /// How many times the JWKS was served.
    pub fn jwks_fetches(&self) -> usize {
        self.shared.fetches.load(Ordering::SeqCst)
    }

    /// Make the metadata document claim `issuer` (`None`: the truth).
    pub fn claim_issuer(&self, issuer: Option<&str>) {
        lock(&self.shared.metadata).0 = issuer.map(str::to_owned);
    }

    /// Make the metadata document name `jwks_uri` (`None`: this provider's own `/jwks`).
    pub fn claim_jwks_uri(&self, jwks_uri: Option<&str>) {
        lock(&self.shared.metadata).1 = jwks_uri.map(str::to_owned);
    }

    /// Answer a JWKS request with a redirect to `to` (`None`: with the keys).
    pub fn redirect_jwks(&self, to: Option<&str>) {
        *lock(&self.shared.jwks_redirect) = to.map(str::to_owned);
    }

    /// From now on a JWKS request waits until [`release_jwks`](Self::release_jwks) (at most
    /// a minute): a slow issuer.
    pub fn hold_jwks(&self) {
        *lock(&self.shared.hold) = true;
    }

    /// Answer the held JWKS requests, and the next ones at once.
    pub fn release_jwks(&self) {
        *lock(&self.shared.hold) = false;
        self.shared.released.notify_all();
    }

    /// How many JWKS requests wait on the hold now.
    pub fn jwks_waiting(&self) -> usize {
        self.shared.held.load(Ordering::SeqCst)
    }

    /// Now, in seconds since the epoch.
    pub fn now() -> i64 {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
    }

    /// The usual claims of a token of this issuer for `audience` and `subject`, valid for
    /// five minutes; `extra` is merged in (and may override any of them).
    pub fn claims(&self, audience: &str, subject: &str, extra: Value) -> Value {
        let now = Self::now();
        let mut claims = json!({ "iss": self.issuer, "aud": audience, "sub": subject, "iat": now, "nbf": now - 1,
            "exp": now + 300 });
        if let (Some(c), Some(e)) = (claims.as_object_mut(), extra.as_object()) {
            c.extend(e.clone());
        }
        claims
    }

    /// `claims` signed with key `kid` (RS256 for the RSA keys, ES256 for the EC one).
    pub fn sign(&self, kid: &str, claims: &Value) -> String {
        self.sign_naming(kid, kid, claims)
    }

    /// `claims` signed with the fixture key `key`, its header naming the key id `kid` (which
    /// may be any text: a made-up or an oversized key id).
    pub fn sign_naming(&self, key: &str, kid: &str, claims: &Value) -> String {
        let (alg, key) = match key {
            "rsa-1" => (Algorithm::RS256, EncodingKey::from_rsa_pem(RSA_1.as_bytes())),
            "rsa-2" => (Algorithm::RS256, EncodingKey::from_rsa_pem(RSA_2.as_bytes())),
            "ec-1" => (Algorithm::ES256, EncodingKey::from_ec_pem(EC_1.as_bytes())),
            other => panic!("no fixture key {other}"),
        };
        let mut header = Header::new(alg);
        header.kid = Some(kid.to_owned());
        jsonwebtoken::encode(&header, claims, &key.expect("the fixture's key")).expect("a signed token")
    }

    /// `claims` with `alg: none` and no signature (which no verifier may accept).
    pub fn unsigned(claims: &Value) -> String {
        use std::fmt::Write as _;
        let b64 = |v: &Value| {
            let bytes = v.to_string().into_bytes();
            let mut out = String::new();
            const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
            for chunk in bytes.chunks(3) {
                let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
                for i in 0..=chunk.len() {
                    let _ = out.write_char(ABC[((n >> (18 - 6 * i)) & 63) as usize] as char);
                }
            }
            out
        };
        format!("{}.{}.", b64(&json!({ "alg": "none", "typ": "JWT", "kid": "rsa-1" })), b64(claims))
    }
}
