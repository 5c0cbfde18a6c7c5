//! Signing in to the dashboard (`--oidc-client-id`), as a hostile browser would try it, over
//! raw HTTP against the real binary and an OpenID provider on loopback
//! (`fleetgate_testkit::oidc`): reading needs a session; a callback this process never began,
//! or one replayed, makes none; the session cookie is `HttpOnly; SameSite=Strict` and named
//! per port; `/api/session` names the person; an answer without the page's Origin or the
//! session's CSRF token is refused; signing out ends the session.

use crate::support::{dashboard, get, http};
use fleetgate_testkit::oidc::Provider;
use std::net::SocketAddr;

/// `http://host:port/path?query` → (address, path and query).
fn split(url: &str) -> (SocketAddr, String) {
    let rest = url.strip_prefix("http://").expect("a loopback http URL");
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    (host.parse().unwrap(), format!("/{path}"))
}

#[test]
fn a_session_comes_only_from_a_sign_in_this_dashboard_began_once() {
    let provider = Provider::start(&["rsa-1"]);
    provider.add_user("alice", "Alice Liddell", &["release"]);
    let d = dashboard(&[], &["--listen", "127.0.0.1:0", "--oidc-client-id", "dash", "--oidc-issuer", &provider.issuer])
        .unwrap();
    let addr = d.addr;

    // Without a session, the page sends the browser to sign in; every other path is 401.
    let page = get(addr, "/", &[]);
    assert_eq!((page.status, page.header("location")), (303, Some("/auth/login")));
    assert_eq!(get(addr, "/api/fleet", &[]).status, 401);
    assert_eq!(get(addr, "/api/session", &[]).status, 401);

    // A callback this dashboard never began is refused, whatever the code.
    let forged = get(addr, "/auth/callback?code=code-0&state=never-begun", &[]);
    assert_eq!(forged.status, 403, "{}", forged.body);
    assert!(forged.body.contains("not begun here"), "{}", forged.body);
    assert!(forged.header("set-cookie").is_none());

    // The real flow: to the issuer with PKCE S256, a state and a nonce; the person signs in.
    let login = get(addr, "/auth/login", &[]);
    assert_eq!(login.status, 303);
    let to = login.header("location").unwrap().to_owned();
    assert!(to.starts_with(&format!("{}/authorize?", provider.issuer)), "{to}");
    for needle in ["code_challenge_method=S256", "code_challenge=", "state=", "nonce=", "client_id=dash"] {
        assert!(to.contains(needle), "{needle} in {to}");
    }
    let (issuer, authorize) = split(&to);
    let query = authorize.split_once('?').unwrap().1;
    let signed = get(issuer, &format!("/authorize/login?{query}&login=alice"), &[]);
    assert_eq!(signed.status, 302, "{}", signed.body);
    let back = signed.header("location").unwrap().to_owned();
    let (dash, callback) = split(&back);
    assert_eq!(dash, addr);
    let answered = get(addr, &callback, &[]);
    assert_eq!(answered.status, 200, "{}", answered.body);
    let cookie = answered.header("set-cookie").unwrap().to_owned();
    let name = format!("fleetgate_dashboard_session_{}", addr.port());
    assert!(cookie.starts_with(&format!("{name}=")), "{cookie}");
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(cookie.contains(attribute), "{attribute} in {cookie}");
    }
    assert!(!cookie.contains("Secure"), "an http:// redirect gets no Secure cookie a browser would then drop");
    let session = cookie.split(';').next().unwrap().to_owned();

    // The same callback again — a replayed state — makes no second session.
    let replayed = get(addr, &callback, &[]);
    assert_eq!(replayed.status, 403, "{}", replayed.body);
    assert!(replayed.header("set-cookie").is_none());

    // The session names the person and their groups, and reads the page.
    let me = get(addr, "/api/session", &[("Cookie", &session)]);
    assert_eq!(me.status, 200, "{}", me.body);
    let me: serde_json::Value = serde_json::from_str(&me.body).unwrap();
    assert_eq!(me["user"]["id"], "oidc:alice", "{me}");
    assert_eq!(me["user"]["name"], "Alice Liddell", "{me}");
    assert_eq!(me["user"]["groups"][0], "release", "{me}");
    assert_eq!(me["sign_in"], true);
    let csrf = me["csrf"].as_str().unwrap().to_owned();
    assert_eq!(get(addr, "/api/fleet", &[("Cookie", &session)]).status, 200);

    // An answer from elsewhere: no Origin, another Origin, no or a wrong CSRF token — 403.
    let origin = format!("http://{addr}");
    let post = |headers: &[(&str, &str)]| http(addr, "POST", "/api/approvals/apr-0000000000000001/approve", headers);
    for (why, headers) in [
        ("no Origin", vec![("Cookie", session.as_str()), ("X-Fleetgate-Csrf", csrf.as_str())]),
        (
            "another Origin",
            vec![("Cookie", session.as_str()), ("Origin", "http://evil.test"), ("X-Fleetgate-Csrf", csrf.as_str())],
        ),
        ("no CSRF token", vec![("Cookie", session.as_str()), ("Origin", origin.as_str())]),
        (
            "a wrong CSRF token",
            vec![("Cookie", session.as_str()), ("Origin", origin.as_str()), ("X-Fleetgate-Csrf", "x")],
        ),
    ] {
        assert_eq!(post(&headers).status, 403, "{why}");
    }
    // From the page, with its token: judged by the store (no such request: not pending).
    let judged = post(&[("Cookie", &session), ("Origin", &origin), ("X-Fleetgate-Csrf", &csrf)]);
    assert_eq!(judged.status, 409, "{}", judged.body);

    // Signing out ends the session: the cookie no longer reads anything.
    let out = get(addr, "/auth/logout", &[("Cookie", &session)]);
    assert_eq!(out.status, 303);
    assert!(out.header("set-cookie").is_some_and(|c| c.contains("Max-Age=0")));
    assert_eq!(get(addr, "/api/fleet", &[("Cookie", &session)]).status, 401);
}
