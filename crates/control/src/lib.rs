//! fleetgate-control: the control plane. The gate every decision goes through (`gate`),
//! the gateway's control side (`serve`), the audit writer (`audit`), pinned tool
//! definitions (`pins`), the heartbeat loops (`heartbeat`), metrics (`metrics`) and span
//! export (`telemetry`).
//!
//! It owns the imperative shell around `fleetgate_core`'s decisions: it reads the store
//! (`fleetgate_store`), the host (through the gate's `Observer`, which the binary
//! implements), and the configuration (`fleetgate_config`), and answers the MCP gateway
//! (`fleetgate_gateway`) through its `ControlPlane` trait.
//!
//! May not import: the binary (`fleetgate`: clap, anyhow, the CLI), the doctor, the
//! dashboard, the test kit (`tests/layering.rs` checks).

#![deny(missing_docs)]

pub mod approvals;
pub mod audit;
pub mod error;
pub mod gate;
pub mod heartbeat;
pub mod metrics;
pub mod notify;
pub mod pins;
pub mod policy;
pub mod retention;
pub mod serve;
pub mod telemetry;

pub use error::{RunError, TaskFailed};
