//! The one place that reads the process environment. Everything else asks an
//! [`EnvSnapshot`] by a declared [`fleetgate_core::env::EnvKey`].

pub use fleetgate_core::env::EnvSnapshot;

/// Snapshot this process's environment. Keys or values that are not UTF-8 are
/// kept lossily so an odd override is still seen (and refused), not dropped.
#[expect(clippy::disallowed_methods, reason = "this is the one sanctioned reader of the process environment")]
pub fn capture() -> EnvSnapshot {
    EnvSnapshot::from_pairs(
        std::env::vars_os().map(|(k, v)| (k.to_string_lossy().into_owned(), v.to_string_lossy().into_owned())),
    )
}
