//! OpenTelemetry export of the gateway's spans: whether it is configured, and where to.
//!
//! [`resolve`] is a pure function of the declared environment keys and the roster's
//! `[tracing] otlp_endpoint`: nothing configured is `None` (no exporter, no thread, the
//! caller's `_meta` forwarded unchanged); a bad URL is an error naming where it came from.
//! [`start`] builds the exporter (feature `otel`); on a build without the feature a
//! configured export is an error naming the feature — never silently dropped.

use fleetgate_config::otlp::{BadEndpoint, check_endpoint, shown};
use fleetgate_core::env::{EnvKey, EnvSnapshot, key_name};

#[cfg(feature = "otel")]
mod otlp;

/// The `service.name` of the exported spans when `OTEL_SERVICE_NAME` is unset.
pub const DEFAULT_SERVICE_NAME: &str = "fleetgate";

/// Where and as what the spans are exported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OtlpSettings {
    /// The full traces URL (`http://host:port/v1/traces`).
    pub traces_endpoint: String,
    /// Which setting named it (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, …), for messages.
    pub source: String,
    /// The `service.name` resource attribute.
    pub service_name: String,
    /// The headers sent with every export (`OTEL_EXPORTER_OTLP_HEADERS`, and
    /// `OTEL_EXPORTER_OTLP_TRACES_HEADERS` winning per name), handed to the exporter as
    /// values: the secrets are sealed out of the process environment, where the SDK would
    /// look for them.
    pub headers: Vec<(String, String)>,
}

impl OtlpSettings {
    /// The traces URL as messages show it (userinfo masked).
    pub fn shown_endpoint(&self) -> String {
        shown(&self.traces_endpoint)
    }
}

/// The export configured by the environment (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, used as
/// given, else `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`) or else by the roster's
/// `[tracing] otlp_endpoint` (a base URL, like `OTEL_EXPORTER_OTLP_ENDPOINT`). Empty values
/// count as unset, as the OpenTelemetry specification says.
pub fn resolve(env: &EnvSnapshot, config_endpoint: Option<&str>) -> Result<Option<OtlpSettings>, BadEndpoint> {
    let traces_key = key_name(EnvKey::OtelExporterOtlpTracesEndpoint, "");
    let base_key = key_name(EnvKey::OtelExporterOtlpEndpoint, "");
    let (endpoint, source) = if let Some(url) = env.get(EnvKey::OtelExporterOtlpTracesEndpoint, "") {
        (check_endpoint(&traces_key, url, false)?, traces_key)
    } else if let Some(url) = env.get(EnvKey::OtelExporterOtlpEndpoint, "") {
        (check_endpoint(&base_key, url, true)?, base_key)
    } else if let Some(url) = config_endpoint {
        let key = "[tracing] otlp_endpoint".to_owned();
        (check_endpoint(&key, url, true)?, key)
    } else {
        return Ok(None);
    };
    let service_name = env.get(EnvKey::OtelServiceName, "").unwrap_or(DEFAULT_SERVICE_NAME).to_owned();
    let mut headers: std::collections::BTreeMap<String, String> = std::collections::BTreeMap::new();
    for key in [EnvKey::OtelExporterOtlpHeaders, EnvKey::OtelExporterOtlpTracesHeaders] {
        headers.extend(parse_headers(env.get(key, "").unwrap_or("")));
    }
    Ok(Some(OtlpSettings { traces_endpoint: endpoint, source, service_name, headers: headers.into_iter().collect() }))
}

/// `name=value,name2=value2` (the OpenTelemetry header list: values percent-encoded,
/// whitespace around items ignored) as pairs; an item without `=` or a name is left out.
pub fn parse_headers(list: &str) -> Vec<(String, String)> {
    list.split(',')
        .filter_map(|item| item.split_once('='))
        .map(|(k, v)| (k.trim().to_owned(), percent_decode(v.trim())))
        .filter(|(k, _)| !k.is_empty())
        .collect()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A running export: flushed and shut down, bounded, by [`Telemetry::shutdown`] (or when
/// dropped).
#[derive(Debug)]
pub struct Telemetry {
    #[cfg(feature = "otel")]
    inner: otlp::Export,
}

/// What [`start`] hands the gateway: the `tracing` layer that exports, and the hooks that
/// link the gateway's spans to the caller's and the downstream's traces.
pub struct Started {
    /// Flushes at shutdown.
    pub telemetry: Telemetry,
    /// Installed beside the stderr log.
    pub layer: fleetgate_gateway::ExtraLayer,
    /// Given to the gateway ([`fleetgate_gateway::GatewayOptions::trace`]).
    pub trace: std::sync::Arc<dyn fleetgate_gateway::TraceContext>,
}

impl std::fmt::Debug for Started {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Started").field("telemetry", &self.telemetry).field("trace", &self.trace).finish()
    }
}

/// Start exporting as `settings` say. Must be called outside any async runtime.
#[cfg(feature = "otel")]
pub fn start(settings: &OtlpSettings) -> Result<Started, crate::RunError> {
    let (inner, layer, trace) = otlp::start(settings)?;
    Ok(Started { telemetry: Telemetry { inner }, layer, trace })
}

/// This build has no exporter: a configured export is refused, naming the feature.
#[cfg(not(feature = "otel"))]
pub fn start(settings: &OtlpSettings) -> Result<Started, crate::RunError> {
    Err(crate::RunError::msg(format!(
        "{} asks for OpenTelemetry export, but this fleetgate was built without the `otel` feature: \
         rebuild with `--features otel` (on by default), or unset it",
        settings.source
    )))
}

impl Telemetry {
    /// Flush the spans still queued (bounded) and stop the exporter.
    pub fn shutdown(self) {
        #[cfg(feature = "otel")]
        self.inner.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> EnvSnapshot {
        EnvSnapshot::from_pairs(pairs.iter().copied())
    }

    /// Runs on a `--no-default-features` build: a configured export is refused, never dropped.
    #[cfg(not(feature = "otel"))]
    #[test]
    fn a_build_without_the_feature_refuses_a_configured_export() {
        let settings = resolve(&env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")]), None).unwrap().unwrap();
        let e = start(&settings).unwrap_err().to_string();
        assert!(e.starts_with("OTEL_EXPORTER_OTLP_ENDPOINT asks for OpenTelemetry export"), "{e}");
        assert!(e.contains("without the `otel` feature"), "{e}");
    }

    #[test]
    fn nothing_configured_exports_nothing() {
        assert_eq!(resolve(&env(&[]), None), Ok(None));
        assert_eq!(resolve(&env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", ""), ("OTEL_SERVICE_NAME", "x")]), None), Ok(None));
    }

    #[test]
    fn a_password_in_the_endpoint_is_masked_wherever_it_is_shown() {
        let secret = "http://user:hunter2@c:4318";
        let settings = resolve(&env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", secret)]), None).unwrap().unwrap();
        assert_eq!(settings.traces_endpoint, "http://user:hunter2@c:4318/v1/traces", "used as given");
        assert!(!settings.shown_endpoint().contains("hunter2"), "{}", settings.shown_endpoint());
        let e =
            resolve(&env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://user:hunter2@c")]), None).unwrap_err().to_string();
        assert!(!e.contains("hunter2") && e.contains("user:"), "{e}");
    }

    #[test]
    fn the_traces_endpoint_is_used_as_given_and_a_base_gets_the_traces_path() {
        let traces = resolve(
            &env(&[
                ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:4318/custom"),
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://ignored:1"),
            ]),
            Some("http://ignored:2"),
        )
        .unwrap()
        .unwrap();
        assert_eq!(traces.traces_endpoint, "http://c:4318/custom");
        assert_eq!(traces.source, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
        assert_eq!(traces.service_name, DEFAULT_SERVICE_NAME);
        let base =
            resolve(&env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318/"), ("OTEL_SERVICE_NAME", "gw")]), None)
                .unwrap()
                .unwrap();
        assert_eq!((base.traces_endpoint.as_str(), base.service_name.as_str()), ("http://c:4318/v1/traces", "gw"));
        let config = resolve(&env(&[]), Some("http://127.0.0.1:4318/otlp")).unwrap().unwrap();
        assert_eq!(config.traces_endpoint, "http://127.0.0.1:4318/otlp/v1/traces");
        assert_eq!(config.source, "[tracing] otlp_endpoint");
    }

    #[test]
    fn a_bad_endpoint_is_refused_naming_its_setting() {
        for (url, why) in [
            ("collector:4318", "expected http://"),
            ("https://c:4318", "https is not supported"),
            ("ftp://c", "expected http://"),
            ("http://c:4318/x?y=1", "query or fragment"),
            ("http:///v1", "not a usable"),
            ("not a url", "not a usable"),
        ] {
            let e = resolve(&env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", url)]), None).unwrap_err().to_string();
            assert!(e.starts_with("OTEL_EXPORTER_OTLP_ENDPOINT"), "{e}");
            assert!(e.contains(why), "{url}: {e}");
        }
    }

    #[test]
    fn export_headers_are_read_from_the_snapshot_traces_ones_winning() {
        assert_eq!(
            parse_headers(" authorization = Bearer%20abc , x-a=1%2C2,broken, =v"),
            [("authorization".to_owned(), "Bearer abc".to_owned()), ("x-a".to_owned(), "1,2".to_owned())]
        );
        let settings = resolve(
            &env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
                ("OTEL_EXPORTER_OTLP_HEADERS", "a=1,b=2"),
                ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "b=3"),
            ]),
            None,
        )
        .unwrap()
        .unwrap();
        assert_eq!(settings.headers, [("a".to_owned(), "1".to_owned()), ("b".to_owned(), "3".to_owned())]);
    }
}
