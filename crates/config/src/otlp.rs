//! An OTLP/HTTP endpoint, checked where it is configured (`[tracing] otlp_endpoint`, the
//! `OTEL_EXPORTER_OTLP_*` keys): the configuration refuses a bad one before anything runs.

/// The path OTLP/HTTP appends to a base endpoint for traces.
const TRACES_PATH: &str = "/v1/traces";

/// `url` as messages show it: a password or token in its userinfo masked.
pub fn shown(url: &str) -> String {
    fleetgate_core::redact::redact_url_userinfo(url).unwrap_or_else(|| url.to_owned())
}

/// An OTLP/HTTP URL as the exporter will use it: `http://` with a host, no query or
/// fragment; a base URL (`base`) gets `/v1/traces` appended to its path. `https://` is
/// refused: this build's exporter carries no TLS (a collector on the host or a sidecar
/// speaks plain HTTP).
pub fn check_endpoint(key: &str, url: &str, base: bool) -> Result<String, BadEndpoint> {
    let bad = |why: EndpointFault| BadEndpoint { key: key.to_owned(), shown: shown(url), why };
    let uri: http::Uri = url.parse().map_err(|e: http::uri::InvalidUri| bad(EndpointFault::NotUri(e.to_string())))?;
    match uri.scheme_str() {
        Some("http") => {}
        Some("https") => return Err(bad(EndpointFault::Https)),
        _ => return Err(bad(EndpointFault::Scheme)),
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(bad(EndpointFault::NoHost));
    }
    if url.contains(['?', '#']) {
        return Err(bad(EndpointFault::QueryOrFragment));
    }
    if !base {
        return Ok(url.to_owned());
    }
    Ok(format!("{}{TRACES_PATH}", url.trim_end_matches('/')))
}

/// An endpoint [`check_endpoint`] refuses: the key, the URL as shown (credentials
/// redacted) and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{key} {shown:?} is not a usable OTLP/HTTP endpoint: {why}")]
pub struct BadEndpoint {
    /// The configuration key or environment key it came from.
    pub key: String,
    /// The URL, its userinfo redacted.
    pub shown: String,
    /// Why it is refused.
    pub why: EndpointFault,
}

/// Why an OTLP endpoint is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EndpointFault {
    /// Not a URI (the parser's reason).
    #[error("{0}")]
    NotUri(String),
    /// `https://`, which the exporter cannot speak.
    #[error(
        "https is not supported (the exporter is built without TLS): export to a collector over http://, e.g. one \
         on this host"
    )]
    Https,
    /// Another scheme, or none.
    #[error("expected http://HOST:PORT[/PATH]")]
    Scheme,
    /// No host.
    #[error("no host")]
    NoHost,
    /// A query or a fragment.
    #[error("a query or fragment is not allowed")]
    QueryOrFragment,
}
