//! The gate: the one component that decides a call — the `capability` CLI, the
//! `…resolve_task_capability` control tool and the gateway's every `tools/call` all go
//! through [`Gate`], so their verdicts cannot disagree.
//!
//! It gathers the evidence a decision needs — the fleet snapshot (runtime rows against
//! this host's own observation, the runtime diagnostics) and the caller's session
//! provenance — through an injectable [`Observer`], hands it to the pure resolver
//! (`fleetgate_core::capability`), and, for a real call, records the decision in the
//! audit log.

mod decide;
mod forge_command;
mod observer;
mod peers;
mod session;
mod shadow;
mod snapshot;
mod statement;
pub mod workflow;

pub use decide::{Call, Gate, Listing, NoActor, Policy};
pub use forge_command::{CommandForge, READ_TIMEOUT};
pub use observer::{Observer, PeerUnread, scan_host};
pub use peers::peer_evidence;
pub use session::{Caller, assess_provenance, session_provenance};
pub use shadow::{SHADOW_EVENT, ShadowGroup, ShadowReport, ShadowRules, shadow_report};
pub use snapshot::{Snapshot, read_fleet, runtime_diagnostics, snapshot, snapshot_of};
pub use statement::{MAX_READ_ROUNDS, Statement};
