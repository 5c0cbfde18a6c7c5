//! The store's typed error.

use std::fmt;

/// What went wrong, coarse enough to act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreErrorKind {
    /// Locked by another writer past the busy deadline: transient.
    Busy,
    /// Could not reach or open the store (connection lost, server down): transient.
    Unavailable,
    /// The file is not a fleetgate store or is damaged.
    Corrupt,
    /// Filesystem trouble (cannot create the directory, disk full).
    Io,
    /// Not permitted to read or write.
    Permission,
    /// The request itself is invalid.
    Invalid,
    /// The store's schema is newer than this build, or an engine is missing.
    Unsupported,
    /// The location no longer names the store this handle opened (an embedded file
    /// deleted or replaced while open): what it writes, no one else reads.
    Replaced,
    /// Anything else the engine reported.
    Other,
}

/// A store failure with its cause named.
#[derive(Clone, Debug)]
pub struct StoreError {
    kind: StoreErrorKind,
    message: String,
}

impl StoreError {
    /// A new error.
    pub fn new(kind: StoreErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into() }
    }

    /// Its kind.
    pub fn kind(&self) -> StoreErrorKind {
        self.kind
    }

    /// Worth retrying: the store may answer later.
    pub fn is_transient(&self) -> bool {
        matches!(self.kind, StoreErrorKind::Busy | StoreErrorKind::Unavailable)
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for StoreError {}
