//! `fleetgate dashboard`: one read-only page, served by the binary, that shows the
//! fleet live (SPEC §13).
//!
//! * [`view`] — what the page shows: a pure function of one look.
//! * [`poll`] — the reader thread: looks on an interval, publishes changes.
//! * [`server`] — the routes: `/`, `/api/fleet`, `/events` (SSE), `/metrics`.
//! * [`guard`] — loopback, Host/Origin, the token.
//! * [`run`] — flags, settings, the process around it all.
//!
//! **Invariant:** the dashboard never writes to the store.

pub mod guard;
pub mod poll;
pub mod run;
pub mod server;
pub mod view;
