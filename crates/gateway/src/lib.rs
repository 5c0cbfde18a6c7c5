//! The fleetgate MCP gateway: an MCP server on stdio or Streamable HTTP in front of a supervised
//! downstream MCP server, serving the fleet's control tools and putting every downstream
//! `tools/call` to the control plane's mutation gate.
//!
//! The gateway asks its control plane through one trait object: [`ControlPlane`] is the
//! whole boundary (runtime row, worker registration, control tools, how a tool is listed,
//! the gate on the whole call, shutdown). [`run`] and [`serve`] are the entry points; [`GatewayOptions`] is everything
//! else the caller decides.
//!
//! May import core, host and supervise; never the store, the configuration or the control
//! plane, which it reaches only through [`ControlPlane`] (`tests/layering.rs` in the binary
//! crate checks).
//!
//! The modules form layers, no file importing one above it (`tests/module_layers.rs`):
//!
//! * bottom — [`control`] (the boundary trait and the values that cross it), `options`
//!   (what the caller decides, and the settings derived from it), [`observe`] (what the
//!   gateway tells its metrics), `error`, `auth` (bearer tokens, a tokens file's
//!   principals), `oauth` (the OAuth 2.1 resource server: JWT access tokens, the JWKS), `frame` (the client's wire: line framing, validation, the one stdout
//!   writer), `routes` (which client request a downstream message belongs to), `outbox`
//!   (the bounded per-channel notification queues), `answers` (the gateway's own wire
//!   answers), `param_headers` (SEP-2243 `Mcp-Param-*` headers against the body), `timefmt`;
//! * channels — `subscriptions` (a stateless client's listen streams, and what the
//!   downstream is asked for them), `channel_state` (what one attachment's two directions share), `relay` (the
//!   rmcp client service towards one downstream connection), `downstream` (one channel's
//!   supervised child and its per-run connection), `channel` (the two together), `link`;
//! * `hub` — what every attachment shares, and the table of attachments; `gateway` — the
//!   rmcp server service: initialize, tools/list, tools/call, forwarding;
//! * `lifecycle` — logging, signals, the hub started and stopped in order;
//! * transports on top — `serve` (stdio) and `http` (Streamable HTTP: sessions, stateless
//!   clients, the gatekeeper, the metrics listener).
#![deny(missing_docs)]

mod answers;
mod auth;
mod channel;
mod channel_state;
pub mod control;
mod downstream;
mod error;
mod frame;
#[doc(hidden)]
pub mod fuzzing;
mod gateway;
mod http;
mod hub;
mod journey;
mod lifecycle;
mod link;
mod oauth;
pub mod observe;
mod options;
mod outbox;
mod param_headers;
mod relay;
mod routes;
mod serve;
mod subscriptions;
mod timefmt;

pub use answers::{CLASSIFICATION_META_KEY, DOWNSTREAM_TIMEOUT, DOWNSTREAM_UNAVAILABLE};
pub use auth::{Principal, Principals, PrincipalsError, TokensFileError};
pub use control::{
    AttachmentId, BlockerKind, CallToJudge, ClientAttach, ControlCall, ControlError, ControlErrorKind, ControlPlane,
    DownstreamError, DownstreamErrorKind, DownstreamLink, DownstreamRead, DownstreamState, DownstreamStatus,
    GateDecision, HoldFuture, Judgement, Listing, MAX_READ_ROUNDS, OverBound, ReadAnswer, Step, ToolCall, ToolClass,
    Verdict, decide_stepwise,
};
pub use error::GatewayError;
pub use http::{
    ConnectionLimits, HTTP_ENDPOINT, HttpOptions, METRICS_ENDPOINT, run_http, serve_connections, serve_http,
};
pub use hub::Limits;
pub use journey::{Journey, Judge, Stepwise};
pub use lifecycle::{ExtraLayer, ShutdownReason, init_logging, init_logging_with};
pub use oauth::{
    FetchError, IdTokenRefused, IdTokenVerifier, MetadataFault, OAuthPrincipal, OAuthSettings, PrincipalClash,
    UrlRefused, check_oauth_url, oidc_endpoints,
};
pub use observe::{Exposition, GatewayObserver, MetaObject, TraceContext};
pub use options::{DEFAULT_MAX_MESSAGE_BYTES, DownstreamCommand, GatewayOptions, MetricsListener, Sharing};
pub use serve::{run, serve, serve_io};

/// The rmcp version this crate is built on, re-exported so the control plane builds its
/// [`rmcp::model::Tool`]s and [`rmcp::model::CallToolResult`]s from the same types.
pub use rmcp;
