//! The command line: raw flags are parsed by clap ([`args`]), resolved into a
//! [`context::Ctx`], and each command returns a [`output::Reply`] that
//! `main` prints and maps to an exit code.

pub mod args;
pub mod context;
pub mod dashboard;
pub mod debug;
pub mod demo;
pub mod doctor;
pub mod examples;
pub mod gate;
pub mod init;
pub mod inventory;
pub mod observer;
pub mod output;
pub mod pr;
pub mod rules;
pub mod runtime;
pub mod serve;
pub mod tools;
pub mod worker;
