//! Who may talk to a local HTTP listener, as far as the request's own headers say: the
//! DNS-rebinding rules both of fleetgate's listeners apply (the gateway's Streamable HTTP
//! endpoint and its `/metrics`, the dashboard), and the constant-time comparison of a
//! presented secret. Pure: a function of the listen address and the headers.
//!
//! * `Host` must be the listen address (on loopback also `localhost:PORT`,
//!   `127.0.0.1:PORT`, `[::1]:PORT`) or one of the operator's extra hosts, compared
//!   without regard to ASCII case;
//! * `Origin` must be absent or one of those hosts over `http://` (a page served from
//!   anywhere else — or the opaque `null` origin — is foreign).

use std::net::SocketAddr;

/// The `Host` and `Origin` values one listener accepts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostRules {
    hosts: Vec<String>,
    origins: Vec<String>,
}

/// Why a request's headers were refused (403): which header, for the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Foreign {
    /// No `Host` header.
    HostMissing,
    /// A `Host` the listener does not answer to.
    Host,
    /// An `Origin` of another site.
    Origin,
}

impl Foreign {
    /// The reason as a short sentence.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::HostMissing => "Host header missing",
            Self::Host => "Host not allowed",
            Self::Origin => "Origin not allowed",
        }
    }
}

impl HostRules {
    /// The rules of a listener bound to `listen`, accepting `extra` hosts besides
    /// (a remote deployment's DNS name). Duplicates (ASCII case aside) are dropped.
    pub fn new(listen: SocketAddr, extra: &[String]) -> Self {
        let port = listen.port();
        let mut hosts = vec![match listen {
            SocketAddr::V4(v4) => format!("{}:{port}", v4.ip()),
            SocketAddr::V6(v6) => format!("[{}]:{port}", v6.ip()),
        }];
        if listen.ip().is_loopback() {
            hosts.extend(["localhost", "127.0.0.1", "[::1]"].map(|name| format!("{name}:{port}")));
        }
        hosts.extend(extra.iter().cloned());
        let mut seen = std::collections::HashSet::new();
        hosts.retain(|h| seen.insert(h.to_ascii_lowercase()));
        let origins = hosts.iter().map(|h| format!("http://{h}")).collect();
        Self { hosts, origins }
    }

    /// The `Host` values accepted.
    pub fn hosts(&self) -> &[String] {
        &self.hosts
    }

    /// The `Origin` values accepted.
    pub fn origins(&self) -> &[String] {
        &self.origins
    }

    /// Judge a request's `Host` and `Origin` headers.
    pub fn judge(&self, host: Option<&str>, origin: Option<&str>) -> Result<(), Foreign> {
        let host = host.ok_or(Foreign::HostMissing)?;
        if !self.hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
            return Err(Foreign::Host);
        }
        match origin {
            Some(origin) if !self.origins.iter().any(|o| o.eq_ignore_ascii_case(origin)) => Err(Foreign::Origin),
            _ => Ok(()),
        }
    }
}

/// The token of an `Authorization` header value that uses the `Bearer` scheme: the scheme
/// matched in any case (auth schemes are case-insensitive, RFC 9110 §11.1; RFC 6750 §2.1),
/// then one or more spaces, then a non-empty token. `None` for another scheme or no token.
pub fn bearer_token(authorization: &str) -> Option<&str> {
    let (scheme, rest) = authorization.split_at_checked("Bearer".len())?;
    if !scheme.eq_ignore_ascii_case("Bearer") || !rest.starts_with(' ') {
        return None;
    }
    Some(rest.trim_start_matches(' ')).filter(|token| !token.is_empty())
}

/// Whether `presented` equals `expected`, in time independent of where they differ.
pub fn same_secret(presented: &[u8], expected: &[u8]) -> bool {
    presented.len() == expected.len() && presented.iter().zip(expected).fold(0_u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loopback() -> HostRules {
        HostRules::new("127.0.0.1:8760".parse().unwrap(), &[])
    }

    #[test]
    fn the_bearer_scheme_is_matched_in_any_case() {
        for value in ["Bearer t0k", "bearer t0k", "BEARER t0k", "bEaReR t0k", "Bearer   t0k"] {
            assert_eq!(bearer_token(value), Some("t0k"), "{value}");
        }
        for value in ["Basic t0k", "Bearert0k", "Bearer", "Bearer ", "Bearer\tt0k", "Bearerx t0k", "", "é", "Beareré t"]
        {
            assert_eq!(bearer_token(value), None, "{value}");
        }
    }

    #[test]
    fn loopback_accepts_its_own_names_on_its_port_only() {
        let rules = loopback();
        assert_eq!(rules.hosts(), ["127.0.0.1:8760", "localhost:8760", "[::1]:8760"]);
        for host in ["127.0.0.1:8760", "localhost:8760", "LOCALHOST:8760", "[::1]:8760"] {
            assert_eq!(rules.judge(Some(host), None), Ok(()), "{host}");
        }
        assert_eq!(rules.judge(Some("localhost:8761"), None), Err(Foreign::Host));
        assert_eq!(rules.judge(Some("evil.example:8760"), None), Err(Foreign::Host));
        assert_eq!(rules.judge(None, None), Err(Foreign::HostMissing));
    }

    #[test]
    fn a_foreign_origin_is_refused_and_the_same_origin_passes() {
        let rules = loopback();
        assert_eq!(rules.judge(Some("localhost:8760"), Some("http://localhost:8760")), Ok(()));
        assert_eq!(rules.judge(Some("localhost:8760"), Some("http://evil.example")), Err(Foreign::Origin));
        assert_eq!(rules.judge(Some("localhost:8760"), Some("null")), Err(Foreign::Origin));
        assert!(rules.origins().contains(&"http://localhost:8760".to_owned()));
    }

    #[test]
    fn a_remote_listener_accepts_its_address_and_the_extra_hosts_once() {
        let extra = ["gw.example".to_owned(), "GW.example".to_owned()];
        let rules = HostRules::new("10.1.2.3:80".parse().unwrap(), &extra);
        assert_eq!(rules.hosts(), ["10.1.2.3:80", "gw.example"]);
        assert_eq!(Foreign::Origin.as_str(), "Origin not allowed");
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abd", b"abc"));
        assert!(!same_secret(b"ab", b"abc"));
    }
}
