//! The host edge's typed error: what went wrong (a kind callers can switch on) and the
//! message naming the thing (the file, the command, the pid).

use std::fmt;

/// What kind of failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HostErrorKind {
    /// A file of the OS could not be read (absent, permission denied).
    Unreadable,
    /// The OS answered something that could not be parsed.
    Malformed,
    /// An external command (git) could not be run or failed.
    Command,
}

/// A failure at the host edge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostError {
    kind: HostErrorKind,
    message: String,
}

impl HostError {
    /// A failure of `kind`, described by `message`.
    pub fn new(kind: HostErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into() }
    }

    /// What kind of failure.
    pub fn kind(&self) -> HostErrorKind {
        self.kind
    }
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for HostError {}
