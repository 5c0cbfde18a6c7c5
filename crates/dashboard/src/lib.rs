//! fleetgate-dashboard: `fleetgate dashboard`, one page that shows the fleet
//! live.
//!
//! * [`view`] — what the page shows: a pure function of one look.
//! * [`poll`] — the reader thread: looks on an interval, publishes changes.
//! * [`server`] — the routes: `/`, `/api/fleet`, `/events` (SSE), `/metrics`.
//! * [`guard`] — loopback, Host/Origin, the token.
//! * [`signin`] — operators signed in with OpenID Connect: approvals by named people.
//! * [`run`] — the process around it all, from resolved settings.
//!
//! **Invariant:** the dashboard writes nothing but an operator's answer to an approval
//! request, and only from a signed-in person or with its token configured, from its own
//! origin, with its CSRF token.
//!
//! It reads through the control plane's read side (`fleetgate_control::gate`, `metrics`).
//! May not import the binary (clap, anyhow, the CLI), the doctor or the test kit.

#![deny(missing_docs)]

pub mod guard;
pub mod poll;
pub mod run;
pub mod server;
pub mod signin;
pub mod view;
