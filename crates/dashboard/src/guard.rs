//! Who may read the dashboard — the gateway's HTTP rules, applied to the page — and who may
//! answer an approval request from it ([`Guard::judge_answer`]).
//!
//! * DNS-rebinding protection: `Host` must be the listen address (on loopback also
//!   `localhost:PORT`, `127.0.0.1:PORT`, `[::1]:PORT`) or an `--allowed-host`;
//!   `Origin` must be absent or one of those over `http://`. Else 403.
//! * With a token configured, every request carries it — `Authorization: Bearer`
//!   (scrapers, scripts) or the cookie a browser gets by opening `/?token=…` once
//!   (an `EventSource` cannot send headers). Else 401, and the connection is closed
//!   (`Connection: close`), so refused sockets do not hold the connection cap. Browsers
//!   send a `127.0.0.1` cookie to every port of the host, so the cookie is named per port
//!   (`fleetgate_dashboard_token_PORT`: two dashboards do not overwrite each other's, and a
//!   dashboard accepts only its own), `HttpOnly; SameSite=Strict`; the old unsuffixed
//!   name is still accepted. (A `__Host-` prefix needs `Secure`, which a plain-HTTP
//!   listener cannot set.) Compared in constant time;
//!   neither the presented nor the expected value is ever logged.
//!
//! [`Guard::judge`] is a pure function of the request's headers; the Host/Origin half is
//! `fleetgate_core::origin::HostRules`, the same judge the gateway's HTTP listener uses.

use fleetgate_core::origin::{HostRules, same_secret};
use std::net::SocketAddr;

/// The cookie a browser carried the token in before it was named per port: still accepted.
pub const COOKIE: &str = "fleetgate_dashboard_token";

/// The rules for one listener.
#[derive(Clone)]
pub struct Guard {
    hosts: HostRules,
    token: Option<String>,
    /// The cookie this listener sets: [`COOKIE`] and its port.
    cookie: String,
    /// People sign in (OpenID Connect): a session also passes, and without one or the token
    /// nothing is read.
    sign_in: bool,
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guard")
            .field("hosts", &self.hosts.hosts())
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .finish_non_exhaustive()
    }
}

/// What a request gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Serve it.
    Pass,
    /// 403, and why (for the log; the body says only which header).
    Forbidden(&'static str),
    /// 401: no token, or the wrong one.
    Unauthorized,
}

/// The parts of a request the guard reads.
#[derive(Clone, Copy, Debug, Default)]
pub struct Presented<'a> {
    /// `Host`.
    pub host: Option<&'a str>,
    /// `Origin`.
    pub origin: Option<&'a str>,
    /// `Authorization`.
    pub authorization: Option<&'a str>,
    /// `Cookie`.
    pub cookie: Option<&'a str>,
    /// A live signed-in session came with it (the server looks it up).
    pub signed_in: bool,
}

impl Guard {
    /// The rules for `listen` (the bound address), extra `Host` values, and the token.
    pub fn new(listen: SocketAddr, extra_hosts: &[String], token: Option<String>) -> Self {
        Self {
            hosts: HostRules::new(listen, extra_hosts),
            token,
            cookie: format!("{COOKIE}_{}", listen.port()),
            sign_in: false,
        }
    }

    /// The name of the cookie this listener sets and reads.
    pub fn cookie_name(&self) -> &str {
        &self.cookie
    }

    /// Whether a token is required.
    pub fn requires_token(&self) -> bool {
        self.token.is_some()
    }

    /// Judge one request: Host and Origin first (a rebinding page learns nothing
    /// about the token), then the token.
    pub fn judge(&self, p: &Presented<'_>) -> Verdict {
        if let Err(foreign) = self.hosts.judge(p.host, p.origin) {
            return Verdict::Forbidden(foreign.as_str());
        }
        if p.signed_in
            || self.token_ok(p.authorization.and_then(fleetgate_core::origin::bearer_token))
            || self.token_ok(p.cookie.and_then(|c| cookie_token(c, &self.cookie)))
            || self.token_ok(p.cookie.and_then(|c| cookie_token(c, COOKIE)))
        {
            return Verdict::Pass;
        }
        if self.token.is_none() && !self.sign_in { Verdict::Pass } else { Verdict::Unauthorized }
    }

    /// The same rules, where people also sign in (then reading needs a session or the token).
    pub fn with_sign_in(mut self) -> Self {
        self.sign_in = true;
        self
    }

    /// Whether people sign in here.
    pub fn signs_in(&self) -> bool {
        self.sign_in
    }

    /// May a request that passed [`judge`](Self::judge) answer an approval request? Only
    /// from a signed-in person (`p.signed_in`, `csrf` the session's) or with a token
    /// configured (without either the page is read-only), from the page's own origin (a
    /// browser's POST names it: a request without `Origin` is no page's), with the CSRF token
    /// (`csrf`: the session's, else the one this process made, which only a same-origin
    /// script can read). `Err`: why not, for a 403.
    pub fn judge_answer(
        &self,
        p: &Presented<'_>,
        presented_csrf: Option<&str>,
        csrf: &str,
    ) -> Result<(), &'static str> {
        if self.token.is_none() && !p.signed_in {
            return Err("the page is read-only: sign in, or start the dashboard with FLEETGATE_DASHBOARD_TOKEN, to \
                        answer from it");
        }
        if p.origin.is_none() {
            return Err("an answer must come from the page (no Origin header)");
        }
        if let Err(foreign) = self.hosts.judge(p.host, p.origin) {
            return Err(foreign.as_str());
        }
        match presented_csrf {
            Some(given) if same_secret(given.as_bytes(), csrf.as_bytes()) => Ok(()),
            _ => Err("missing or wrong X-Fleetgate-Csrf header"),
        }
    }

    /// Is `presented` the token? False when none is configured.
    pub fn token_ok(&self, presented: Option<&str>) -> bool {
        match (&self.token, presented) {
            (Some(expected), Some(p)) => same_secret(p.as_bytes(), expected.as_bytes()),
            _ => false,
        }
    }
}

/// The value of the cookie `name` in a `Cookie` header.
fn cookie_token<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').map(str::trim).find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
}

/// One query parameter's value, percent-decoded.
pub fn query_value(raw: &str) -> Option<String> {
    percent_decode(raw)
}

/// The `token` parameter of a query string, percent-decoded.
pub fn query_token(query: Option<&str>) -> Option<String> {
    let raw = query?.split('&').find_map(|pair| pair.strip_prefix("token="))?;
    percent_decode(raw)
}

fn percent_decode(s: &str) -> Option<String> {
    let mut out = Vec::with_capacity(s.len());
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        match b {
            b'%' => {
                let hex = [bytes.next()?, bytes.next()?];
                out.push(u8::from_str_radix(std::str::from_utf8(&hex).ok()?, 16).ok()?);
            }
            b'+' => out.push(b' '),
            _ => out.push(b),
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loopback(token: Option<&str>) -> Guard {
        Guard::new("127.0.0.1:8760".parse().unwrap(), &[], token.map(str::to_owned))
    }

    fn req<'a>(host: &'a str, origin: Option<&'a str>) -> Presented<'a> {
        Presented { host: Some(host), origin, ..Presented::default() }
    }

    #[test]
    fn loopback_accepts_its_own_names_on_its_port_only() {
        let g = loopback(None);
        for host in ["127.0.0.1:8760", "localhost:8760", "LOCALHOST:8760", "[::1]:8760"] {
            assert_eq!(g.judge(&req(host, None)), Verdict::Pass, "{host}");
        }
        assert_eq!(g.judge(&req("localhost:8761", None)), Verdict::Forbidden("Host not allowed"));
        assert_eq!(g.judge(&req("evil.example:8760", None)), Verdict::Forbidden("Host not allowed"));
        assert_eq!(g.judge(&Presented::default()), Verdict::Forbidden("Host header missing"));
    }

    #[test]
    fn a_foreign_origin_is_forbidden_and_the_same_origin_passes() {
        let g = loopback(None);
        assert_eq!(g.judge(&req("localhost:8760", Some("http://localhost:8760"))), Verdict::Pass);
        assert_eq!(
            g.judge(&req("localhost:8760", Some("http://evil.example"))),
            Verdict::Forbidden("Origin not allowed")
        );
        assert_eq!(g.judge(&req("localhost:8760", Some("null"))), Verdict::Forbidden("Origin not allowed"));
    }

    #[test]
    fn a_remote_listener_accepts_only_its_address_and_the_allowed_hosts() {
        let g = Guard::new("10.1.2.3:80".parse().unwrap(), &["dash.example".into()], Some("t".into()));
        assert_eq!(g.hosts.hosts(), ["10.1.2.3:80", "dash.example"]);
        assert!(g.requires_token());
    }

    #[test]
    fn the_token_comes_as_a_bearer_header_or_our_cookie() {
        let g = loopback(Some("s3cret"));
        let host = Some("127.0.0.1:8760");
        let with =
            |authorization, cookie| g.judge(&Presented { host, origin: None, authorization, cookie, signed_in: false });
        assert_eq!(with(None, None), Verdict::Unauthorized);
        assert_eq!(with(Some("Bearer s3cret"), None), Verdict::Pass);
        assert_eq!(with(Some("Bearer s3cre"), None), Verdict::Unauthorized);
        assert_eq!(with(Some("bearer s3cret"), None), Verdict::Pass, "the scheme in any case");
        assert_eq!(with(Some("Basic s3cret"), None), Verdict::Unauthorized);
        assert_eq!(with(None, Some("a=1; fleetgate_dashboard_token=s3cret")), Verdict::Pass);
        assert_eq!(with(None, Some("fleetgate_dashboard_token=nope")), Verdict::Unauthorized);
        // The cookie is named per port; another port's is not this one's.
        assert_eq!(g.cookie_name(), "fleetgate_dashboard_token_8760");
        assert_eq!(with(None, Some("fleetgate_dashboard_token_8760=s3cret")), Verdict::Pass);
        assert_eq!(with(None, Some("fleetgate_dashboard_token_8761=s3cret")), Verdict::Unauthorized);
        assert_eq!(
            with(None, Some("fleetgate_dashboard_token_8761=x; fleetgate_dashboard_token=s3cret")),
            Verdict::Pass
        );
        // Host is judged first: a rebinding page gets 403, not a hint about the token.
        let rebinding = Presented { host: Some("evil:8760"), ..Presented::default() };
        assert_eq!(g.judge(&rebinding), Verdict::Forbidden("Host not allowed"));
        assert!(format!("{g:?}").contains("<set>") && !format!("{g:?}").contains("s3cret"));
    }

    #[test]
    fn where_people_sign_in_a_session_or_the_token_reads_and_nothing_else() {
        let g = loopback(None).with_sign_in();
        let host = Some("127.0.0.1:8760");
        assert_eq!(g.judge(&Presented { host, ..Presented::default() }), Verdict::Unauthorized);
        assert_eq!(g.judge(&Presented { host, signed_in: true, ..Presented::default() }), Verdict::Pass);
        let answer = |signed_in| {
            let p = Presented { host, origin: Some("http://127.0.0.1:8760"), signed_in, ..Presented::default() };
            g.judge_answer(&p, Some("c"), "c")
        };
        assert_eq!(answer(true), Ok(()));
        assert!(answer(false).unwrap_err().contains("read-only"));
    }

    #[test]
    fn query_tokens_are_percent_decoded() {
        assert_eq!(query_token(Some("a=1&token=x%2By%3D")), Some("x+y=".into()));
        assert_eq!(query_token(Some("token=bad%zz")), None);
        assert_eq!(query_token(Some("a=1")), None);
        assert_eq!(query_token(None), None);
    }
}
