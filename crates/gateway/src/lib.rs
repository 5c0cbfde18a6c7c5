//! The fleetgate MCP gateway (SPEC §7): an MCP server on stdio or Streamable HTTP in front of a supervised
//! downstream MCP server, serving the fleet's control tools and putting every downstream
//! `tools/call` to the control plane's mutation gate.
//!
//! The gateway asks its control plane through one trait object: [`ControlPlane`] is the
//! whole boundary (runtime row, worker registration, control tools, how a tool is listed,
//! the gate on the whole call, shutdown). [`run`] and [`serve`] are the entry points; [`GatewayOptions`] is everything
//! else the caller decides.
//!
//! * [`control`] — the boundary trait and the values that cross it.
//! * `frame` — the client's wire: line framing, validation, the one stdout writer.
//! * `gateway` — the rmcp server service: initialize, tools/list, tools/call, forwarding.
//! * `answers` — the gateway's own wire answers: annotations, refusal texts, result shapes.
//! * `engine` — what every attachment shares, and the table of attachments.
//! * `channel` — one attachment's own downstream connection and routing state.
//! * `routes` — which client request a downstream message belongs to.
//! * `relay` — the rmcp client service towards one downstream connection: notifications
//!   and requests passed up to their client.
//! * `outbox` — the bounded per-channel notification queues, one per direction.
//! * `downstream` — one channel's supervised child and its per-run MCP connection.
//! * `serve` — the stdio lifecycle.
//! * `http` — the Streamable HTTP transport: sessions, stateless clients, the gatekeeper.
//! * `auth` — bearer tokens and the principals of a tokens file.
//! * [`observe`] — what the gateway tells its metrics ([`GatewayObserver`]) and the
//!   `GET /metrics` answer it is handed.
#![deny(missing_docs)]

mod answers;
mod auth;
mod channel;
pub mod control;
mod downstream;
mod engine;
mod error;
mod frame;
#[doc(hidden)]
pub mod fuzzing;
mod gateway;
mod http;
mod link;
pub mod observe;
mod options;
mod outbox;
mod relay;
mod routes;
mod serve;
mod timefmt;

pub use answers::{CLASSIFICATION_META_KEY, DOWNSTREAM_TIMEOUT, DOWNSTREAM_UNAVAILABLE};
pub use auth::{Principal, Principals, PrincipalsError};
pub use control::{
    AttachmentId, BlockerKind, ClientAttach, ControlCall, ControlError, ControlErrorKind, ControlPlane, DownstreamLink,
    DownstreamRead, DownstreamState, DownstreamStatus, GateDecision, Listing, ReadAnswer, ToolCall, ToolClass, Verdict,
};
pub use engine::Limits;
pub use error::GatewayError;
pub use http::{
    ConnectionLimits, HTTP_ENDPOINT, HttpOptions, METRICS_ENDPOINT, run_http, serve_connections, serve_http,
};
pub use observe::{Exposition, GatewayObserver, MetaObject, TraceContext};
pub use options::{DEFAULT_MAX_MESSAGE_BYTES, DownstreamCommand, GatewayOptions, MetricsListener};
pub use serve::{ExtraLayer, ShutdownReason, init_logging, init_logging_with, run, serve, serve_io};

/// The rmcp version this crate is built on, re-exported so the control plane builds its
/// [`rmcp::model::Tool`]s and [`rmcp::model::CallToolResult`]s from the same types.
pub use rmcp;
