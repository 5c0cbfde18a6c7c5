//! The fleetgate MCP gateway (SPEC §7): an MCP server on stdio or Streamable HTTP in front of a supervised
//! downstream MCP server, serving the fleet's control tools and putting every downstream
//! `tools/call` to the control plane's mutation gate.
//!
//! The gateway is generic over the control plane: [`ControlPlane`] is the whole boundary
//! (runtime row, worker registration, control tools, role policy, classification, the gate,
//! shutdown). [`run`] and [`serve`] are the entry points; [`GatewayOptions`] is everything
//! else the caller decides.
//!
//! * [`control`] — the boundary trait and the values that cross it.
//! * `frame` — the client's wire: line framing, validation, the one stdout writer.
//! * `gateway` — the rmcp server service: initialize, tools/list, tools/call, forwarding.
//! * `relay` — the rmcp client service towards the downstream: notifications and
//!   requests passed up to the client.
//! * `downstream` — the supervised child and its per-run MCP connection.
//! * `hub` — what the two directions share.
//! * `serve` — the stdio lifecycle.
//! * `http` — the Streamable HTTP transport: one attachment per session.
#![deny(missing_docs)]

pub mod control;
mod downstream;
mod error;
mod frame;
mod gateway;
mod http;
mod hub;
mod options;
mod relay;
mod serve;
mod timefmt;

pub use control::{
    AttachmentId, ClientAttach, ControlPlane, DownstreamState, DownstreamStatus, GateDecision, ToolClass,
};
pub use error::GatewayError;
pub use gateway::{CLASSIFICATION_META_KEY, DOWNSTREAM_TIMEOUT, DOWNSTREAM_UNAVAILABLE};
pub use http::{HTTP_ENDPOINT, HttpOptions, run_http, serve_http};
pub use options::{DEFAULT_MAX_MESSAGE_BYTES, DownstreamCommand, GatewayOptions};
pub use serve::{ShutdownReason, init_logging, run, serve, serve_io};

/// The rmcp version this crate is built on, re-exported so the control plane builds its
/// [`rmcp::model::Tool`]s and [`rmcp::model::CallToolResult`]s from the same types.
pub use rmcp;
