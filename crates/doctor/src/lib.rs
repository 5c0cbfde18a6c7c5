//! fleetgate-doctor: the client configuration doctor. Each LLM client's MCP
//! configuration read from its documented files, judged against the roster
//! and the env-key declaration, and repaired safely.
//!
//! Functional core, imperative shell: [`read`], [`findings`], [`repair`],
//! [`edit`], [`diff`], [`snippet`] and [`workflows`] (the checkout's workflow files: code the
//! forge runs from a branch) are pure functions of their inputs;
//! [`apply`] is the only code that writes, and the binary's `cli::doctor` the only
//! code that reads files or the PATH.
//!
//! May import core and the configuration; not the control plane, the dashboard, the
//! binary or the test kit.

#![deny(missing_docs)]

pub mod apply;
pub mod clients;
pub mod diff;
pub mod edit;
pub mod findings;
pub mod probe;
pub mod read;
pub mod repair;
pub mod report;
pub mod snippet;
pub mod workflows;

#[cfg(test)]
mod tests;
