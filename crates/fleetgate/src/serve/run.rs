//! The process around the gateway: the control plane built, the gateway run on its tokio
//! runtime over stdio (stdout carries only MCP frames from here on; everything else is
//! stderr) or Streamable HTTP. Everything comes in resolved ([`ServeSettings`]); the CLI
//! (`cli::serve`) does the resolving.

use super::plane::FleetControl;
use anyhow::Context as _;
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
}

/// Run the gateway until shutdown. Returns the process exit code.
pub fn run_serve(settings: ServeSettings) -> anyhow::Result<u8> {
    let control = Arc::new(settings.control);
    let reason = match settings.http {
        None => fleetgate_gateway::run(settings.options, control),
        Some(http) => fleetgate_gateway::run_http(settings.options, http, control, |addr| {
            // Always on stderr, whatever the log filter: with port 0 it is the only way
            // to learn the port.
            eprintln!("fleetgate serve: listening on http://{addr}{}", fleetgate_gateway::HTTP_ENDPOINT);
        }),
    }
    .context("the gateway failed")?;
    tracing::info!(reason = reason.as_str(), "gateway stopped");
    Ok(0)
}
