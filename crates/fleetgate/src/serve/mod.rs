//! `fleetgate serve`: the MCP gateway of one fleet member. The gateway engine
//! (`fleetgate-gateway`) speaks MCP and supervises the downstream; this module
//! is the control plane it asks — runtime row, worker and heartbeat, control
//! tools, classification, and the mutation gate.

mod control;
mod run;

pub use control::{FleetControl, Transport};
pub use run::{ServeArgs, run_serve};
