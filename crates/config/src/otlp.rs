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
pub fn check_endpoint(key: &str, url: &str, base: bool) -> Result<String, String> {
    let shown = shown(url);
    let bad = |why: &str| format!("{key} {shown:?} is not a usable OTLP/HTTP endpoint: {why}");
    let uri: http::Uri = url.parse().map_err(|e| bad(&format!("{e}")))?;
    match uri.scheme_str() {
        Some("http") => {}
        Some("https") => {
            return Err(bad(
                "https is not supported (the exporter is built without TLS): export to a collector over http://, \
                 e.g. one on this host",
            ));
        }
        _ => return Err(bad("expected http://HOST:PORT[/PATH]")),
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(bad("no host"));
    }
    if url.contains(['?', '#']) {
        return Err(bad("a query or fragment is not allowed"));
    }
    if !base {
        return Ok(url.to_owned());
    }
    Ok(format!("{}{TRACES_PATH}", url.trim_end_matches('/')))
}
