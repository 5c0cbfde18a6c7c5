//! Supervision of fleetgate's background loops and child processes.
//!
//! A task is a factory of runs (a future, or an external command). A run that
//! returns normally finishes the task; one that fails (error, panic, exit
//! status other than 0) is restarted after a backoff delay and spends one unit
//! of the task's own failure budget; a cancelled run is neither. A task that
//! spends its budget quarantines its *flow*: none of the flow's tasks is
//! restarted until the quarantine, whose length escalates with each repeat,
//! expires on its own; a healthy run brings the escalation back down.
//!
//! * [`policy`] — the pure schedule: decides every start, restart, quarantine
//!   and expiry from state, input and `now`. No tokio, no clock.
//! * [`supervisor`] — the tokio shell that runs tasks and feeds the policy.
//! * [`child`] — external commands as tasks, with no orphans.
//! * [`guard`] — the guard a guarded child runs under, which takes the child's whole
//!   process group down when the supervising process dies (`kill -9` included).
//! * [`events`] — the events published and the bus that carries them.
//! * [`config`] — the `[supervision]` roster table and its validation.
//!
//! May import core and host only (`tests/layering.rs` in the binary crate checks).
#![deny(missing_docs)]

#[cfg(unix)]
pub mod child;
pub mod config;
pub mod events;
#[cfg(unix)]
pub mod guard;
pub mod policy;
pub mod supervisor;

#[cfg(unix)]
pub use child::{ChildError, ChildSpec, ChildStdio, SpawnedChild, run_child};
pub use config::{ConfigError, ConfigErrorKind, SupervisionConfig, SupervisionSettings};
pub use events::{Event, EventBus};
pub use policy::{Exit, SpawnError, SupervisionPolicy, TaskState};
pub use supervisor::{CancelReport, FlowSnapshot, QuarantineSnapshot, Snapshot, StopSignal, Supervisor, TaskSnapshot};
