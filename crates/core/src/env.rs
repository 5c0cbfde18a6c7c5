//! The one declaration of every environment key fleetgate reads.
//!
//! [`EnvKey`] is the only handle through which a value can be read (see
//! `fleetgate_host::env`), and the recognised-key set is derived from
//! [`DECLARED`]; so a key the program consumes can never be missing from the
//! set the gate accepts. Recognised keys are named one by one: no prefix
//! wildcard exists.

use std::collections::BTreeMap;

/// Every key the program reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum EnvKey {
    /// `<PREFIX>MCP_CLIENT`: the client application's name.
    McpClient,
    /// `<PREFIX>MCP_CLIENT_INSTANCE`: the client instance id.
    McpClientInstance,
    /// `<PREFIX>MCP_CLIENT_SESSION`: the client session id.
    McpClientSession,
    /// `<PREFIX>MCP_COHORT_ID`: an explicit cohort id.
    McpCohortId,
    /// `<PREFIX>CLIENT_MANAGED`: `1` when the client launched this process.
    ClientManaged,
    /// `<PREFIX>WORKER_REGISTRY_DB`: store path or URL.
    WorkerRegistryDb,
    /// `<PREFIX>WORKER_HEARTBEAT_INTERVAL_SECONDS`: interval override.
    WorkerHeartbeatIntervalSeconds,
    /// `FLEETGATE_LOG`: the tracing filter for stderr logs.
    FleetgateLog,
    /// `FLEETGATE_HTTP_TOKEN`: the bearer token `fleetgate serve --transport http` requires.
    FleetgateHttpToken,
    /// `FLEETGATE_DASHBOARD_TOKEN`: the token `fleetgate dashboard` requires (read-only access).
    FleetgateDashboardToken,
    /// `FLEETGATE_METRICS_TOKEN`: the token `fleetgate serve --metrics-listen` requires.
    FleetgateMetricsToken,
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`: the OTLP/HTTP base URL `fleetgate serve` exports its
    /// spans to (`/v1/traces` appended).
    OtelExporterOtlpEndpoint,
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`: the OTLP/HTTP traces URL, used as given.
    OtelExporterOtlpTracesEndpoint,
    /// `OTEL_SERVICE_NAME`: the `service.name` of the exported spans.
    OtelServiceName,
    /// `OTEL_EXPORTER_OTLP_HEADERS`: headers sent with every export (read by the OpenTelemetry SDK).
    OtelExporterOtlpHeaders,
    /// `OTEL_EXPORTER_OTLP_TRACES_HEADERS`: headers sent with every trace export (read by the OpenTelemetry SDK).
    OtelExporterOtlpTracesHeaders,
    /// `OTEL_EXPORTER_OTLP_TIMEOUT`: export timeout (read by the OpenTelemetry SDK; fleetgate sets 5 s, which wins).
    OtelExporterOtlpTimeout,
    /// `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`: trace export timeout (read by the OpenTelemetry SDK; fleetgate sets 5 s, which wins).
    OtelExporterOtlpTracesTimeout,
    /// `OTEL_BSP_MAX_CONCURRENT_EXPORTS`: batch span processor: concurrent exports (read by the OpenTelemetry SDK).
    OtelBspMaxConcurrentExports,
    /// `OTEL_BSP_MAX_QUEUE_SIZE`: batch span processor: queue size (read by the OpenTelemetry SDK).
    OtelBspMaxQueueSize,
    /// `OTEL_BSP_SCHEDULE_DELAY`: batch span processor: delay between exports (read by the OpenTelemetry SDK).
    OtelBspScheduleDelay,
    /// `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`: batch span processor: spans per export (read by the OpenTelemetry SDK).
    OtelBspMaxExportBatchSize,
    /// `OTEL_BSP_EXPORT_TIMEOUT`: batch span processor: export timeout (read by the OpenTelemetry SDK).
    OtelBspExportTimeout,
    /// `OTEL_TRACES_SAMPLER`: sampler (read by the OpenTelemetry SDK).
    OtelTracesSampler,
    /// `OTEL_TRACES_SAMPLER_ARG`: sampler argument (read by the OpenTelemetry SDK).
    OtelTracesSamplerArg,
    /// `OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT`: attributes per span (read by the OpenTelemetry SDK).
    OtelSpanAttributeCountLimit,
    /// `OTEL_SPAN_EVENT_COUNT_LIMIT`: events per span (read by the OpenTelemetry SDK).
    OtelSpanEventCountLimit,
    /// `OTEL_SPAN_LINK_COUNT_LIMIT`: links per span (read by the OpenTelemetry SDK).
    OtelSpanLinkCountLimit,
    /// `XDG_STATE_HOME`: base of the default store path.
    XdgStateHome,
    /// `XDG_CONFIG_HOME`: base of the default config path.
    XdgConfigHome,
    /// `HOME`: fallback base of both, and where the clients' user files live.
    Home,
    /// `PATH`: where `fleetgate doctor` looks for the commands client configurations launch.
    Path,
    /// `CODEX_HOME`: Codex CLI's home (its `config.toml`), read by `fleetgate doctor`.
    CodexHome,
    /// `FLEETGATE_SEALED_ENV_FD`: set by fleetgate itself when it re-executes with its
    /// secrets taken out of its environment: the descriptor they are read from, once.
    FleetgateSealedEnvFd,
}

/// How a key is named.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyName {
    /// The fleet's env prefix followed by this suffix (`GITEA_` + `MCP_CLIENT`).
    Prefixed(&'static str),
    /// A fixed name outside the fleet's prefix.
    Plain(&'static str),
}

/// One declared key.
#[derive(Clone, Copy, Debug)]
pub struct KeySpec {
    /// The handle code reads it by.
    pub key: EnvKey,
    /// Its name.
    pub name: KeyName,
    /// What it means, for `fleetgate env` and the docs.
    pub meaning: &'static str,
    /// Whether its value must never be shown.
    pub secret: bool,
}

/// The declaration. Add a key here and nowhere else.
pub const DECLARED: &[KeySpec] = &[
    KeySpec {
        key: EnvKey::McpClient,
        name: KeyName::Prefixed("MCP_CLIENT"),
        meaning: "client application name (normalised)",
        secret: false,
    },
    KeySpec {
        key: EnvKey::McpClientInstance,
        name: KeyName::Prefixed("MCP_CLIENT_INSTANCE"),
        meaning: "client instance id",
        secret: false,
    },
    KeySpec {
        key: EnvKey::McpClientSession,
        name: KeyName::Prefixed("MCP_CLIENT_SESSION"),
        meaning: "client session id",
        secret: false,
    },
    KeySpec {
        key: EnvKey::McpCohortId,
        name: KeyName::Prefixed("MCP_COHORT_ID"),
        meaning: "explicit cohort id (else the parent process)",
        secret: false,
    },
    KeySpec {
        key: EnvKey::ClientManaged,
        name: KeyName::Prefixed("CLIENT_MANAGED"),
        meaning: "1 when the client launched this process",
        secret: false,
    },
    KeySpec {
        key: EnvKey::WorkerRegistryDb,
        name: KeyName::Prefixed("WORKER_REGISTRY_DB"),
        meaning: "control-plane store: SQLite path or URL",
        secret: false,
    },
    KeySpec {
        key: EnvKey::WorkerHeartbeatIntervalSeconds,
        name: KeyName::Prefixed("WORKER_HEARTBEAT_INTERVAL_SECONDS"),
        meaning: "heartbeat interval override, capped at ttl/2",
        secret: false,
    },
    KeySpec {
        key: EnvKey::FleetgateLog,
        name: KeyName::Plain("FLEETGATE_LOG"),
        meaning: "stderr log filter (tracing syntax)",
        secret: false,
    },
    KeySpec {
        key: EnvKey::FleetgateHttpToken,
        name: KeyName::Plain("FLEETGATE_HTTP_TOKEN"),
        meaning: "bearer token every request to `serve --transport http` must carry",
        secret: true,
    },
    KeySpec {
        key: EnvKey::FleetgateDashboardToken,
        name: KeyName::Plain("FLEETGATE_DASHBOARD_TOKEN"),
        meaning: "token every request to `fleetgate dashboard` must carry (required with --allow-remote)",
        secret: true,
    },
    KeySpec {
        key: EnvKey::FleetgateMetricsToken,
        name: KeyName::Plain("FLEETGATE_METRICS_TOKEN"),
        meaning: "bearer token every scrape of `serve --metrics-listen` must carry (required with --allow-remote)",
        secret: true,
    },
    KeySpec {
        key: EnvKey::OtelExporterOtlpEndpoint,
        name: KeyName::Plain("OTEL_EXPORTER_OTLP_ENDPOINT"),
        meaning: "OTLP/HTTP collector base URL: `serve` exports its spans there (/v1/traces)",
        secret: false,
    },
    KeySpec {
        key: EnvKey::OtelExporterOtlpTracesEndpoint,
        name: KeyName::Plain("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
        meaning: "OTLP/HTTP traces URL, used as given (wins over OTEL_EXPORTER_OTLP_ENDPOINT)",
        secret: false,
    },
    KeySpec {
        key: EnvKey::OtelServiceName,
        name: KeyName::Plain("OTEL_SERVICE_NAME"),
        meaning: "service.name of the exported spans (default fleetgate)",
        secret: false,
    },
    KeySpec {
        key: EnvKey::OtelExporterOtlpHeaders,
        name: KeyName::Plain("OTEL_EXPORTER_OTLP_HEADERS"),
        meaning: "headers sent with every export (read by the OpenTelemetry SDK)",
        secret: true,
    },
    KeySpec {
        key: EnvKey::OtelExporterOtlpTracesHeaders,
        name: KeyName::Plain("OTEL_EXPORTER_OTLP_TRACES_HEADERS"),
        meaning: "headers sent with every trace export (read by the OpenTelemetry SDK)",
        secret: true,
    },
    KeySpec {
        key: EnvKey::OtelExporterOtlpTimeout,
        name: KeyName::Plain("OTEL_EXPORTER_OTLP_TIMEOUT"),
        meaning: "export timeout (read by the OpenTelemetry SDK; fleetgate sets 5 s, which wins)",
        secret: false,
    },
    KeySpec {
        key: EnvKey::OtelExporterOtlpTracesTimeout,
        name: KeyName::Plain("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"),
        meaning: "trace export timeout (read by the OpenTelemetry SDK; fleetgate sets 5 s, which wins)",
        secret: false,
    },
    KeySpec {
        key: EnvKey::OtelBspMaxConcurrentExports,
        name: KeyName::Plain("OTEL_BSP_MAX_CONCURRENT_EXPORTS"),
        meaning: "batch span processor: concurrent exports (read by the OpenTelemetry SDK)",
        secret: false,
    },
    KeySpec {
        key: EnvKey::OtelBspMaxQueueSize,
        name: KeyName::Plain("OTEL_BSP_MAX_QUEUE_SIZE"),
        meaning: "batch span processor: queue size (read by the OpenTelemetry SDK)",
        secret: false,
    },
    KeySpec {
        key: EnvKey::OtelBspScheduleDelay,
        name: KeyName::Plain("OTEL_BSP_SCHEDULE_DELAY"),
        meaning: "batch span processor: delay between exports (read by the OpenTelemetry SDK)",
        secret: false,
    },
    KeySpec {
        key: EnvKey::OtelBspMaxExportBatchSize,
        name: KeyName::Plain("OTEL_BSP_MAX_EXPORT_BATCH_SIZE"),
        meaning: "batch span processor: spans per export (read by the OpenTelemetry SDK)",
        secret: false,
    },
    KeySpec {
        key: EnvKey::OtelBspExportTimeout,
        name: KeyName::Plain("OTEL_BSP_EXPORT_TIMEOUT"),
        meaning: "batch span processor: export timeout (read by the OpenTelemetry SDK)",
        secret: false,
    },
    KeySpec {
        key: EnvKey::OtelTracesSampler,
        name: KeyName::Plain("OTEL_TRACES_SAMPLER"),
        meaning: "sampler (read by the OpenTelemetry SDK)",
        secret: false,
    },
    KeySpec {
        key: EnvKey::OtelTracesSamplerArg,
        name: KeyName::Plain("OTEL_TRACES_SAMPLER_ARG"),
        meaning: "sampler argument (read by the OpenTelemetry SDK)",
        secret: false,
    },
    KeySpec {
        key: EnvKey::OtelSpanAttributeCountLimit,
        name: KeyName::Plain("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT"),
        meaning: "attributes per span (read by the OpenTelemetry SDK)",
        secret: false,
    },
    KeySpec {
        key: EnvKey::OtelSpanEventCountLimit,
        name: KeyName::Plain("OTEL_SPAN_EVENT_COUNT_LIMIT"),
        meaning: "events per span (read by the OpenTelemetry SDK)",
        secret: false,
    },
    KeySpec {
        key: EnvKey::OtelSpanLinkCountLimit,
        name: KeyName::Plain("OTEL_SPAN_LINK_COUNT_LIMIT"),
        meaning: "links per span (read by the OpenTelemetry SDK)",
        secret: false,
    },
    KeySpec {
        key: EnvKey::XdgStateHome,
        name: KeyName::Plain("XDG_STATE_HOME"),
        meaning: "base directory of the default store",
        secret: false,
    },
    KeySpec {
        key: EnvKey::XdgConfigHome,
        name: KeyName::Plain("XDG_CONFIG_HOME"),
        meaning: "base directory of the default config",
        secret: false,
    },
    KeySpec { key: EnvKey::Home, name: KeyName::Plain("HOME"), meaning: "fallback base directory", secret: false },
    KeySpec {
        key: EnvKey::Path,
        name: KeyName::Plain("PATH"),
        meaning: "search path for the commands client configurations launch (doctor)",
        secret: false,
    },
    KeySpec {
        key: EnvKey::CodexHome,
        name: KeyName::Plain("CODEX_HOME"),
        meaning: "Codex CLI home, else ~/.codex (doctor)",
        secret: false,
    },
    KeySpec {
        key: EnvKey::FleetgateSealedEnvFd,
        name: KeyName::Plain("FLEETGATE_SEALED_ENV_FD"),
        meaning: "set by fleetgate itself (never by hand): where a re-executed serve or dashboard reads its secrets",
        secret: false,
    },
];

/// The declaration entry of `key`.
pub fn spec(key: EnvKey) -> &'static KeySpec {
    DECLARED.iter().find(|s| s.key == key).expect("every EnvKey is declared (checked by a test)")
}

/// The full name of `key` under `prefix`.
pub fn key_name(key: EnvKey, prefix: &str) -> String {
    match spec(key).name {
        KeyName::Prefixed(suffix) => format!("{prefix}{suffix}"),
        KeyName::Plain(name) => name.to_owned(),
    }
}

/// The prefixed keys the gate recognises: derived from [`DECLARED`], plus the
/// profile's declared pass-through keys (already full names).
pub fn recognized_keys(prefix: &str, pass_through: &[String]) -> Vec<String> {
    let mut keys: Vec<String> = DECLARED
        .iter()
        .filter_map(|s| match s.name {
            KeyName::Prefixed(suffix) => Some(format!("{prefix}{suffix}")),
            KeyName::Plain(_) => None,
        })
        .chain(pass_through.iter().cloned())
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

/// A snapshot of an environment: the process's own (taken once, by the
/// shell) or a peer's (read from `/proc`). Pure data.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EnvSnapshot(BTreeMap<String, String>);

impl EnvSnapshot {
    /// From name/value pairs.
    pub fn from_pairs<K: Into<String>, V: Into<String>>(pairs: impl IntoIterator<Item = (K, V)>) -> Self {
        Self(pairs.into_iter().map(|(k, v)| (k.into(), v.into())).collect())
    }

    /// The value of a declared key under `prefix`; empty values count as unset.
    pub fn get(&self, key: EnvKey, prefix: &str) -> Option<&str> {
        self.get_raw(key, prefix).filter(|v| !v.is_empty())
    }

    /// The value of `key` even when it is set but empty: for a secret whose emptiness is
    /// itself a misconfiguration to refuse (an empty token), not "unset".
    pub fn get_raw(&self, key: EnvKey, prefix: &str) -> Option<&str> {
        self.0.get(&key_name(key, prefix)).map(String::as_str)
    }

    /// The value of a declared key exactly as set, empty included: for the
    /// callers that must refuse a key set to nothing rather than read it as unset.
    pub fn raw(&self, key: EnvKey, prefix: &str) -> Option<&str> {
        self.0.get(&key_name(key, prefix)).map(String::as_str)
    }

    /// Every pair, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

/// Must `key=value` be kept out of a long-running fleetgate's own process environment, which
/// any process of the same user reads at `/proc/PID/environ` (its downstream included)? The
/// keys [`DECLARED`] secret (a prefixed one under any prefix), and the store's location
/// (`<PREFIX>WORKER_REGISTRY_DB`) when it carries a credential (a URL's userinfo, a
/// `password=` parameter). A plain store path stays: another fleet's inventory reads it there
/// to prove which store this gateway holds (`gate::peers`).
pub fn sealed_from_process_env(key: &str, value: &str) -> bool {
    let suffix_of = |k: EnvKey| match spec(k).name {
        KeyName::Prefixed(suffix) | KeyName::Plain(suffix) => suffix,
    };
    let credential = crate::redact::redact_url_userinfo(value).is_some() || value.contains("password=");
    (key.ends_with(suffix_of(EnvKey::WorkerRegistryDb)) && credential)
        || DECLARED.iter().filter(|s| s.secret).any(|s| match s.name {
            KeyName::Plain(name) => key == name,
            KeyName::Prefixed(suffix) => key.ends_with(suffix),
        })
}

/// `KEY=value` pairs of an environment, in order.
pub type Pairs = Vec<(String, String)>;

/// How to start again with the secrets out of the environment: the pairs to keep and the
/// pairs to seal (hand over through a descriptor), or `None` when nothing is to be sealed
/// or this process was already started so (its environment names the sealed descriptor:
/// never twice, so never a loop).
pub fn seal_plan(pairs: &[(String, String)]) -> Option<(Pairs, Pairs)> {
    let marker = key_name(EnvKey::FleetgateSealedEnvFd, "");
    if pairs.iter().any(|(k, _)| *k == marker) {
        return None;
    }
    let (sealed, kept): (Vec<_>, Vec<_>) = pairs.iter().cloned().partition(|(k, v)| sealed_from_process_env(k, v));
    (!sealed.is_empty()).then_some((kept, sealed))
}

/// Does this key name look like it holds a secret?
pub fn looks_secret(key: &str) -> bool {
    let upper = key.to_ascii_uppercase();
    ["TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY", "CREDENTIAL", "AUTH"].iter().any(|w| upper.contains(w))
}

/// A value fit to show: secrets masked.
pub fn shown_value(key: &str, value: &str) -> String {
    // Never the value: redaction by key name misses `GITEA_PAT=ghp_…`; the key is what an
    // operator needs to act on.
    let _ = (key, value);
    crate::redact::MASK.to_owned()
}

/// A prefixed key the program does not recognise.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct UnsupportedOverride {
    /// The key.
    pub key: String,
    /// Always `***`: values are never shown (kept for the JSON shape).
    pub value: String,
}

/// The `<PREFIX>*` keys of `env` that are not recognised, in name order.
pub fn unconsumed_env_overrides(env: &EnvSnapshot, prefix: &str, pass_through: &[String]) -> Vec<UnsupportedOverride> {
    let known = recognized_keys(prefix, pass_through);
    env.iter()
        .filter(|(k, _)| k.starts_with(prefix) && known.binary_search(&(*k).to_owned()).is_err())
        .map(|(k, v)| UnsupportedOverride { key: k.to_owned(), value: shown_value(k, v) })
        .collect()
}

/// What a downstream server gets from the gateway's environment whatever the roster says,
/// when set: what a program needs to run — search path, home and user, shell, locale,
/// terminal, time zone, temporary and XDG directories, the CA bundle. Nothing else of the
/// gateway's environment reaches it unless the roster declares it
/// ([`downstream_env`]). `LC_*` is the one pattern.
pub const DOWNSTREAM_BASE_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TERM",
    "COLORTERM",
    "TZ",
    "TMPDIR",
    "XDG_RUNTIME_DIR",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
    "XDG_STATE_HOME",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
];

/// Does `key` match `pattern`: the same name, or a name that starts with the part before a
/// trailing `*`?
fn pattern_matches(pattern: &str, key: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(stem) => key.starts_with(stem),
        None => key == pattern,
    }
}

/// Check one `[downstream] pass_env` entry: a key name or `NAME*` (letters, digits and `_`,
/// then at most a trailing `*`), outside the fleet's `prefix` (those keys are declared one by
/// one in `fleet.pass_through_env`, which the environment gate also recognises). A bare `*`
/// is refused: it would hand the downstream the gateway's whole environment, secrets included.
pub fn check_pass_env(pattern: &str, prefix: &str) -> Result<(), PassEnvError> {
    let stem = pattern.strip_suffix('*').unwrap_or(pattern);
    if stem.is_empty() {
        return Err(PassEnvError::Everything(pattern.to_owned()));
    }
    if !stem.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(PassEnvError::NotAKey(pattern.to_owned()));
    }
    if stem.starts_with(prefix) || (prefix.starts_with(stem) && pattern.ends_with('*')) {
        return Err(PassEnvError::UnderPrefix { pattern: pattern.to_owned(), prefix: prefix.to_owned() });
    }
    Ok(())
}

/// Why a `[downstream] pass_env` entry is refused ([`check_pass_env`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PassEnvError {
    /// A bare `*`: the whole environment.
    Everything(String),
    /// Not a key name.
    NotAKey(String),
    /// Under the fleet's own prefix.
    UnderPrefix {
        /// The entry.
        pattern: String,
        /// The fleet's env prefix.
        prefix: String,
    },
}

impl std::fmt::Display for PassEnvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Everything(pattern) => write!(
                f,
                "{pattern:?} would pass the gateway's whole environment, its secrets included: name the keys, or a \
                 prefix such as \"NODE_*\""
            ),
            Self::NotAKey(pattern) => {
                write!(f, "{pattern:?} is not a key name (letters, digits and _, optionally ending in *)")
            }
            Self::UnderPrefix { pattern, prefix } => write!(
                f,
                "{pattern:?} is under the fleet's env_prefix {prefix:?}: declare the downstream's own keys one by \
                 one in fleet.pass_through_env"
            ),
        }
    }
}

impl std::error::Error for PassEnvError {}

/// The environment a downstream server is started with (it inherits nothing else): the
/// [`DOWNSTREAM_BASE_ENV`] keys, the roster's `pass_through_env` (full names) and its
/// `[downstream] pass_env` patterns, as set in `env`. A pattern never passes a key fleetgate
/// declares ([`DECLARED`] under `prefix`: its tokens, the store location, the client
/// identity): such a key reaches the downstream only when one of the three lists names it
/// exactly.
pub fn downstream_env<'a>(
    env: &'a EnvSnapshot,
    prefix: &str,
    pass_through: &[String],
    pass_env: &[String],
) -> Vec<(&'a str, &'a str)> {
    let own: Vec<String> = DECLARED.iter().map(|s| key_name(s.key, prefix)).collect();
    let patterns =
        || DOWNSTREAM_BASE_ENV.iter().copied().chain(pass_through.iter().chain(pass_env).map(String::as_str));
    env.iter()
        .filter(|(key, _)| {
            if own.iter().any(|k| k == key) {
                patterns().any(|p| p == *key)
            } else {
                patterns().any(|p| pattern_matches(p, key))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: &str = "GITEA_";

    #[test]
    fn every_key_is_declared_exactly_once() {
        let all = [
            EnvKey::McpClient,
            EnvKey::McpClientInstance,
            EnvKey::McpClientSession,
            EnvKey::McpCohortId,
            EnvKey::ClientManaged,
            EnvKey::WorkerRegistryDb,
            EnvKey::WorkerHeartbeatIntervalSeconds,
            EnvKey::FleetgateLog,
            EnvKey::FleetgateHttpToken,
            EnvKey::FleetgateDashboardToken,
            EnvKey::FleetgateMetricsToken,
            EnvKey::OtelExporterOtlpEndpoint,
            EnvKey::OtelExporterOtlpTracesEndpoint,
            EnvKey::OtelServiceName,
            EnvKey::OtelExporterOtlpHeaders,
            EnvKey::OtelExporterOtlpTracesHeaders,
            EnvKey::OtelExporterOtlpTimeout,
            EnvKey::OtelExporterOtlpTracesTimeout,
            EnvKey::OtelBspMaxConcurrentExports,
            EnvKey::OtelBspMaxQueueSize,
            EnvKey::OtelBspScheduleDelay,
            EnvKey::OtelBspMaxExportBatchSize,
            EnvKey::OtelBspExportTimeout,
            EnvKey::OtelTracesSampler,
            EnvKey::OtelTracesSamplerArg,
            EnvKey::OtelSpanAttributeCountLimit,
            EnvKey::OtelSpanEventCountLimit,
            EnvKey::OtelSpanLinkCountLimit,
            EnvKey::XdgStateHome,
            EnvKey::XdgConfigHome,
            EnvKey::Home,
            EnvKey::Path,
            EnvKey::CodexHome,
            EnvKey::FleetgateSealedEnvFd,
        ];
        for key in all {
            assert_eq!(DECLARED.iter().filter(|s| s.key == key).count(), 1, "{key:?}");
        }
        assert_eq!(DECLARED.len(), all.len());
    }

    #[test]
    fn secrets_and_the_store_location_are_sealed_and_nothing_else() {
        for key in [
            "FLEETGATE_HTTP_TOKEN",
            "FLEETGATE_DASHBOARD_TOKEN",
            "FLEETGATE_METRICS_TOKEN",
            "OTEL_EXPORTER_OTLP_HEADERS",
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        ] {
            assert!(sealed_from_process_env(key, "x"), "{key}");
        }
        for (key, value) in [
            ("GITEA_WORKER_REGISTRY_DB", "postgres://fleet:pw@db/fleet"),
            ("ACME_WORKER_REGISTRY_DB", "postgres://tok@db/fleet"),
            ("GITEA_WORKER_REGISTRY_DB", "postgres://db/fleet?password=pw"),
        ] {
            assert!(sealed_from_process_env(key, value), "{key}={value}");
        }
        for (key, value) in [
            ("GITEA_WORKER_REGISTRY_DB", "/var/lib/fleet/registry.sqlite3"),
            ("GITEA_WORKER_REGISTRY_DB", "postgres://db/fleet"),
            ("PATH", "/bin"),
            ("HOME", "/root"),
            ("FLEETGATE_LOG", "info"),
            ("GITEA_MCP_COHORT_ID", "c"),
            ("GITEA_ACCESS_TOKEN", "pat"),
            ("OTEL_SERVICE_NAME", "gw"),
        ] {
            assert!(!sealed_from_process_env(key, value), "{key}={value}");
        }
        let pairs =
            |kv: &[(&str, &str)]| kv.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect::<Vec<_>>();
        let env = pairs(&[("PATH", "/bin"), ("FLEETGATE_HTTP_TOKEN", "t"), ("GITEA_WORKER_REGISTRY_DB", "pg://u:p@h")]);
        let (kept, sealed) = seal_plan(&env).unwrap();
        assert_eq!(kept, pairs(&[("PATH", "/bin")]));
        assert_eq!(sealed, pairs(&[("FLEETGATE_HTTP_TOKEN", "t"), ("GITEA_WORKER_REGISTRY_DB", "pg://u:p@h")]));
        assert_eq!(seal_plan(&pairs(&[("PATH", "/bin")])), None, "nothing to seal");
        let again = pairs(&[("FLEETGATE_SEALED_ENV_FD", "3"), ("FLEETGATE_HTTP_TOKEN", "t")]);
        assert_eq!(seal_plan(&again), None, "sealed once, never twice");
    }

    #[test]
    fn each_client_identity_key_is_recognised() {
        let known = recognized_keys(P, &[]);
        for key in ["GITEA_MCP_CLIENT", "GITEA_MCP_CLIENT_INSTANCE", "GITEA_MCP_CLIENT_SESSION"] {
            assert!(known.contains(&key.to_owned()), "{key}");
        }
        let env = EnvSnapshot::from_pairs([
            ("GITEA_MCP_CLIENT", "claude_code"),
            ("GITEA_MCP_CLIENT_INSTANCE", "inst-0001"),
            ("GITEA_MCP_CLIENT_SESSION", "sess-0001"),
        ]);
        assert!(unconsumed_env_overrides(&env, P, &[]).is_empty());
    }

    #[test]
    fn unknown_key_is_unsupported_and_siblings_do_not_shield_it() {
        let env =
            EnvSnapshot::from_pairs([("GITEA_MCP_CLIENT", "claude_code"), ("GITEA_TOTALLY_INVENTED_OVERRIDE", "1")]);
        let found = unconsumed_env_overrides(&env, P, &[]);
        assert_eq!(found, [UnsupportedOverride { key: "GITEA_TOTALLY_INVENTED_OVERRIDE".into(), value: "***".into() }]);
    }

    #[test]
    fn no_prefix_admits_near_misses() {
        let env = EnvSnapshot::from_pairs([("GITEA_MCP_CLIENT_SOMETHING_ELSE", "x")]);
        assert_eq!(unconsumed_env_overrides(&env, P, &[]).len(), 1);
    }

    #[test]
    fn secrets_are_masked_and_pass_through_keys_recognised() {
        let env = EnvSnapshot::from_pairs([("GITEA_ACCESS_TOKEN", "hunter2"), ("GITEA_HOST", "https://forge")]);
        let found = unconsumed_env_overrides(&env, P, &["GITEA_HOST".to_owned()]);
        assert_eq!(found, [UnsupportedOverride { key: "GITEA_ACCESS_TOKEN".into(), value: "***".into() }]);
    }

    #[test]
    fn lookups_use_the_prefix_and_ignore_empty_values() {
        let env = EnvSnapshot::from_pairs([("FLEET_MCP_CLIENT", "gemini"), ("FLEET_CLIENT_MANAGED", "")]);
        assert_eq!(env.get(EnvKey::McpClient, "FLEET_"), Some("gemini"));
        assert_eq!(env.get(EnvKey::McpClient, P), None);
        assert_eq!(env.get(EnvKey::ClientManaged, "FLEET_"), None);
        assert_eq!(env.raw(EnvKey::ClientManaged, "FLEET_"), Some(""), "raw keeps a key set to nothing");
        assert_eq!(env.raw(EnvKey::McpClient, P), None);
    }

    #[test]
    fn the_downstream_gets_the_basics_and_what_the_roster_declares_never_fleetgate_s_own_keys_by_pattern() {
        let env = EnvSnapshot::from_pairs([
            ("PATH", "/usr/bin"),
            ("HOME", "/home/op"),
            ("LC_CTYPE", "C.UTF-8"),
            ("FLEETGATE_HTTP_TOKEN", "tok"),
            ("FLEETGATE_DASHBOARD_TOKEN", "dash"),
            ("GITEA_WORKER_REGISTRY_DB", "postgres://u:pw@db/fleet"),
            ("GITEA_MCP_CLIENT", "claude_code"),
            ("GITEA_HOST", "https://forge"),
            ("GITEA_ACCESS_TOKEN", "pat"),
            ("AWS_SECRET_ACCESS_KEY", "aws"),
            ("NODE_OPTIONS", "--max-old-space-size=512"),
            ("FLEETGATE_LOG", "debug"),
        ]);
        let through = ["GITEA_HOST".to_owned(), "GITEA_ACCESS_TOKEN".to_owned()];
        let keys = |pass_env: &[&str]| -> Vec<String> {
            let pass_env: Vec<String> = pass_env.iter().map(|s| (*s).to_owned()).collect();
            downstream_env(&env, P, &through, &pass_env).into_iter().map(|(k, _)| k.to_owned()).collect()
        };
        assert_eq!(keys(&[]), ["GITEA_ACCESS_TOKEN", "GITEA_HOST", "HOME", "LC_CTYPE", "PATH"]);
        assert_eq!(
            keys(&["NODE_*", "FLEETGATE_*"]),
            ["GITEA_ACCESS_TOKEN", "GITEA_HOST", "HOME", "LC_CTYPE", "NODE_OPTIONS", "PATH"],
            "a pattern never passes a declared key"
        );
        assert!(
            keys(&["FLEETGATE_HTTP_TOKEN"]).contains(&"FLEETGATE_HTTP_TOKEN".to_owned()),
            "named exactly, it passes"
        );
    }

    #[test]
    fn pass_env_entries_are_names_or_prefixes_outside_the_fleet_s_prefix() {
        for good in ["NODE_OPTIONS", "NODE_*", "HTTPS_PROXY", "FLEETGATE_HTTP_TOKEN"] {
            assert_eq!(check_pass_env(good, P), Ok(()), "{good}");
        }
        for (bad, why) in [
            ("*", "whole environment"),
            ("", "whole environment"),
            ("GITEA_*", "pass_through_env"),
            ("GITEA_HOST", "pass_through_env"),
            ("GIT*", "pass_through_env"),
            ("A B", "not a key name"),
            ("NODE_*_X", "not a key name"),
        ] {
            let e = check_pass_env(bad, P).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
