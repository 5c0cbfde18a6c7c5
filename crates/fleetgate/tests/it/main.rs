//! fleetgate's integration tests: one binary, one module per topic.

mod cli;
mod concurrency;
mod heartbeat;
mod registry;
mod support;
