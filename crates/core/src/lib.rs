//! The pure core of fleetgate.
//!
//! Everything here is a function of its inputs: records, the interval policy,
//! fencing explanations, liveness, provenance, the heartbeat ledger, and the
//! environment-key declaration. **This crate does no I/O and reads no clock**:
//! `now` is always a parameter, and process probes arrive as values.
//!
//! It owns every decision; it imports no other fleetgate crate (`tests/layering.rs` in
//! the binary crate checks).
#![deny(missing_docs)]

pub mod approval;
pub mod audit;
pub mod blocker;
pub mod capability;
pub mod client;
pub mod decision_lock;
pub mod diagnostics;
pub mod dialect;
pub mod effect;
pub mod env;
pub mod forge_call;
pub mod glob;
pub mod heartbeat;
pub mod interval;
pub mod inventory;
pub mod origin;
pub mod person;
pub mod procmatch;
pub mod protect;
pub mod provenance;
pub mod prune;
pub mod redact;
pub mod replay;
pub mod rules;
pub mod runtime;
pub mod suspend;
pub mod text;
pub mod textref;
pub mod time;
pub mod worker;
pub mod workflow;

pub use blocker::BlockerKind;
pub use time::{Clock, ManualClock, Timestamp};
