//! fleetgate's integration tests: one binary, one module per topic.

mod architecture;
mod audit;
mod book;
mod cli;
mod concurrency;
mod dialects;
mod docs;
mod doctor;
mod gate;
mod guard;
mod heartbeat;
mod inventory;
mod one_gate;
mod postgres;
mod preview;
mod principal_bound;
mod prune_year;
mod registry;
mod rules;
mod support;
