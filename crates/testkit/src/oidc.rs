//! An OpenID provider for the tests of the gateway's OAuth 2.1 resource server: an HTTP
//! server on loopback that publishes its metadata (`/.well-known/openid-configuration`) and
//! its keys (`/jwks`), mints access tokens signed with them, and rotates them on demand. A
//! test can make it misbehave: a metadata document that claims another issuer or names keys
//! elsewhere, a JWKS answered with a redirect, or held (a slow issuer) until released.
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
        // The rest of the head.
        let mut header = String::new();
        while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
            header.clear();
        }
        let path = line.split_whitespace().nth(1).unwrap_or("/");
        let (status, body, location) = match path {
            "/.well-known/openid-configuration" | "/.well-known/oauth-authorization-server" => {
                let (claimed_issuer, jwks_uri) = lock(&self.metadata).clone();
                let document = json!({
                    "issuer": claimed_issuer.unwrap_or_else(|| issuer.to_owned()),
                    "jwks_uri": jwks_uri.unwrap_or_else(|| format!("{issuer}/jwks")),
                    // Named so a client can follow them; this fixture serves neither.
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
        let shared = Arc::new(Shared {
            published: Mutex::new(published.to_vec()),
            fetches: AtomicUsize::new(0),
            metadata: Mutex::new((None, None)),
            jwks_redirect: Mutex::new(None),
            hold: Mutex::new(false),
            released: Condvar::new(),
            held: AtomicUsize::new(0),
        });
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
