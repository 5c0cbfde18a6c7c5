//! The process around the gateway: the control plane built, the gateway run on its tokio
//! runtime over stdio (stdout carries only MCP frames from here on; everything else is
//! stderr) or Streamable HTTP. Everything comes in resolved ([`ServeSettings`]); the CLI
//! (`cli::serve`) does the resolving.

use super::plane::FleetControl;
use crate::error::{Context as _, RunError};
use crate::telemetry::OtlpSettings;
use fleetgate_gateway::{GatewayOptions, HttpOptions};
use std::sync::Arc;

/// A gateway process, resolved.
#[derive(Debug)]
pub struct ServeSettings {
    /// The control plane it asks.
    pub control: FleetControl,
    /// The gateway's options (downstream, limits, supervision, names, log filter).
    pub options: GatewayOptions,
    /// Streamable HTTP when set; stdio otherwise.
    pub http: Option<HttpOptions>,
    /// OpenTelemetry export of the spans when set; none otherwise.
    pub otlp: Option<OtlpSettings>,
}

/// Run the gateway until shutdown. Returns the process exit code.
///
/// With an export configured, the exporter is started before the runtime (the log
/// subscriber gets its layer, the gateway its trace-context hooks) and flushed, bounded,
/// once the gateway has stopped.
pub fn run_serve(settings: ServeSettings) -> Result<u8, RunError> {
    let mut options = settings.options;
    let (layer, telemetry) = match &settings.otlp {
        None => (None, None),
        Some(otlp) => {
            let started = crate::telemetry::start(otlp)?;
            options.trace = Some(started.trace);
            eprintln!(
                "fleetgate serve: exporting spans to {} (OTLP/HTTP, service.name {})",
                otlp.shown_endpoint(),
                otlp.service_name
            );
            (Some(started.layer), Some(started.telemetry))
        }
    };
    fleetgate_gateway::init_logging_with(options.log_filter.as_deref(), layer).context("cannot start logging")?;
    let control = Arc::new(settings.control);
    // Approval events to `[[approvals.notify]]` targets, on threads of their own: a target
    // that hangs holds up nothing of the gateway's.
    let notifier = crate::notify::Notifier::start(&control.config().approvals.notify, &control.notifier_context());
    // `[retention] every`: history pruned on a thread of its own.
    let (store, clock) = control.store_and_clock();
    let retention = crate::retention::Schedule::start(store, clock, control.retention_job());
    let reason = match settings.http {
        None => fleetgate_gateway::run(options, control),
        Some(http) => fleetgate_gateway::run_http(options, http, control, |addr| {
            // Always on stderr, whatever the log filter: with port 0 it is the only way
            // to learn the port.
            eprintln!("fleetgate serve: listening on http://{addr}{}", fleetgate_gateway::HTTP_ENDPOINT);
        }),
    }
    .context("the gateway failed");
    notifier.stop();
    retention.stop();
    if let Some(telemetry) = telemetry {
        telemetry.shutdown();
    }
    let reason = reason?;
    tracing::info!(reason = reason.as_str(), "gateway stopped");
    Ok(0)
}
