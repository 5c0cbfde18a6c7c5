//! `fleetgate serve`: the MCP gateway of one fleet member. The gateway engine
//! (`fleetgate-gateway`) speaks MCP and supervises the downstream; this module is the
//! control plane it asks, in parts that each own their state: the process's
//! [`Identity`] (built from values), its runtime row (`row`), its attachments
//! (`attachments`), the control tools (`tools`), wired by [`FleetControl`] (`plane`) to
//! the [`crate::gate::Gate`]. It imports nothing of the CLI: `cli::serve` resolves flags
//! into [`ServeSettings`].

mod attachments;
mod forge_api;
mod identity;
mod judging;
mod plane;
mod row;
mod run;
mod tools;
mod workflow;

pub use forge_api::ForgeApi;
pub use identity::Identity;
pub use plane::{FleetControl, Transport};
pub use run::{ServeSettings, run_serve};
