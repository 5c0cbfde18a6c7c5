//! The OpenTelemetry side (feature `otel`): the SDK's tracer provider with a batch span
//! processor (its own thread) in front of the OTLP/HTTP protobuf exporter, the
//! `tracing-opentelemetry` layer that turns the gateway's spans into OpenTelemetry spans,
//! and the W3C trace-context hooks the gateway calls ([`MetaTraceContext`]).
//!
//! An export that fails (the collector is down) is logged on stderr at most once a minute,
//! with the number of batches lost since; it never reaches a call: spans are queued, and a
//! full queue drops them.

use super::OtlpSettings;
use crate::error::{Context as _, RunError};
use fleetgate_gateway::{ExtraLayer, MetaObject, TraceContext};
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator as _};
use opentelemetry::trace::{TraceContextExt as _, TracerProvider as _};
use opentelemetry_otlp::{Protocol, WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::Layer as _;

/// How long one export may take before it counts as failed.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long shutdown waits for the queued spans to be exported.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);
/// At most one failure logged per this long.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// The running export.
#[derive(Debug)]
pub(super) struct Export {
    provider: Option<SdkTracerProvider>,
}

impl Export {
    /// Flush what is queued and stop, bounded by [`SHUTDOWN_TIMEOUT`].
    pub(super) fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some(provider) = self.provider.take()
            && let Err(e) = provider.shutdown_with_timeout(SHUTDOWN_TIMEOUT)
        {
            eprintln!("fleetgate serve: OpenTelemetry export did not flush at shutdown: {e}");
        }
    }
}

impl Drop for Export {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Build the exporter, the provider and the layer. Outside any async runtime: the
/// blocking HTTP client runs one of its own.
pub(super) fn start(settings: &OtlpSettings) -> Result<(Export, ExtraLayer, Arc<dyn TraceContext>), RunError> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(settings.traces_endpoint.clone())
        .with_timeout(EXPORT_TIMEOUT)
        .with_headers(settings.headers.iter().cloned().collect())
        .build()
        .with_context(|| {
            format!("cannot set up OpenTelemetry export to {} ({})", settings.shown_endpoint(), settings.source)
        })?;
    let resource = opentelemetry_sdk::Resource::builder_empty()
        .with_service_name(settings.service_name.clone())
        .with_attribute(opentelemetry::KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
        .build();
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(Logged::new(exporter, settings.shown_endpoint()))
        .with_resource(resource)
        .build();
    let tracer = provider.tracer("fleetgate");
    // Only fleetgate's own spans (`tools/call`, `gate`, `store`, `forward`) and the events in
    // them, whatever FLEETGATE_LOG says: rmcp's carry whole requests and session ids.
    let targets = tracing_subscriber::filter::Targets::new()
        .with_target("fleetgate", tracing::Level::INFO)
        .with_target("fleetgate_gateway", tracing::Level::INFO);
    let layer = tracing_opentelemetry::layer().with_tracer(tracer).with_filter(targets);
    Ok((Export { provider: Some(provider) }, Box::new(layer), Arc::new(MetaTraceContext)))
}

/// The exporter, its failures logged at most once per [`WARN_EVERY`].
#[derive(Debug)]
struct Logged<E> {
    inner: E,
    endpoint: String,
    failed: AtomicU64,
    last_warned: Mutex<Option<Instant>>,
}

impl<E> Logged<E> {
    fn new(inner: E, endpoint: String) -> Self {
        Self { inner, endpoint, failed: AtomicU64::new(0), last_warned: Mutex::new(None) }
    }

    fn note(&self, result: &OTelSdkResult) {
        let Err(e) = result else { return };
        let failed = self.failed.fetch_add(1, Ordering::Relaxed) + 1;
        let mut last = self.last_warned.lock().unwrap_or_else(PoisonError::into_inner);
        if last.is_some_and(|at| at.elapsed() < WARN_EVERY) {
            return;
        }
        *last = Some(Instant::now());
        // On stderr directly: a `tracing` event here could be exported in turn.
        eprintln!(
            "fleetgate serve: OpenTelemetry export to {} failed ({failed} batch(es) lost so far; logged at most once a \
             minute): {e}",
            self.endpoint
        );
    }
}

impl<E: SpanExporter> SpanExporter for Logged<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let result = self.inner.export(batch).await;
        self.note(&result);
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.inner.set_resource(resource);
    }
}

/// The gateway's trace-context hooks: the `tools/call` span continues the caller's trace
/// (`traceparent`/`tracestate` in `_meta`), and the forwarded `_meta` names the `forward`
/// span as the downstream's parent.
#[derive(Debug)]
struct MetaTraceContext;

impl TraceContext for MetaTraceContext {
    fn adopt(&self, span: &tracing::Span, meta: &MetaObject) {
        let parent = TraceContextPropagator::new().extract(&MetaCarrier(meta));
        if parent.span().span_context().is_valid() {
            // Err only for a span no layer records (filtered out): nothing to link.
            let _ = span.set_parent(parent);
        }
    }

    fn inject(&self, span: &tracing::Span, meta: &mut MetaObject) {
        let context = span.context();
        if context.span().span_context().is_valid() {
            TraceContextPropagator::new().inject_context(&context, &mut MetaInjector(meta));
        }
    }
}

/// `_meta` read as a W3C trace-context carrier (string values only).
struct MetaCarrier<'a>(&'a MetaObject);

impl Extractor for MetaCarrier<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(serde_json::Value::as_str)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

/// `_meta` written as one: an empty `tracestate` is left out (the caller sent none).
struct MetaInjector<'a>(&'a mut MetaObject);

impl Injector for MetaInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if value.is_empty() {
            self.0.remove(key);
        } else {
            self.0.insert(key.to_owned(), serde_json::Value::String(value));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_meta_carrier_reads_strings_and_the_injector_leaves_out_an_empty_tracestate() {
        let mut meta = MetaObject::new();
        meta.insert("traceparent".into(), "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into());
        meta.insert("progressToken".into(), 7.into());
        let carrier = MetaCarrier(&meta);
        assert_eq!(carrier.get("traceparent").map(str::len), Some(55));
        assert_eq!(carrier.get("progressToken"), None);
        let parent = TraceContextPropagator::new().extract(&carrier);
        assert_eq!(parent.span().span_context().trace_id().to_string(), "0af7651916cd43dd8448eb211c80319c");
        TraceContextPropagator::new().inject_context(&parent, &mut MetaInjector(&mut meta));
        assert!(!meta.contains_key("tracestate"));
        assert_eq!(meta["traceparent"], "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    }
}
