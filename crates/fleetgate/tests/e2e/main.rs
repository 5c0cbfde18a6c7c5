//! End-to-end: the real `fleetgate serve` binary, driven by the official Python
//! MCP SDK client, in front of the real `mcp-server-git`, with the real store,
//! inventory and capability resolver deciding. Peers come from
//! `scripts/install-peers`; a missing peer fails the test, it is never skipped.
//!
//! One binary, run serially: every test's host scan sees every gateway on the
//! machine, so two tests' fleets must not overlap in time.

mod adversary;
mod approvals;
mod approvers;
mod attacks;
mod attribution;
mod balanced;
mod canary;
mod coordination;
mod demo;
mod diagnostics;
mod downstream;
mod effects;
mod faults;
mod fleets;
mod forge;
mod gitflow;
mod hostile;
mod http;
mod httpkit;
mod later;
mod lifecycle;
mod metrics;
mod neighbours;
mod oauth;
mod oracle;
mod people;
mod replicas;
mod retention;
mod routing;
mod second_host;
mod shadow;
mod stdiokit;
mod store;
mod support;
mod surfaces;
mod telemetry;
mod tenminute;
mod workflow;
