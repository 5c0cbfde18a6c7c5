//! fleetgate's edge to the operating system.
//!
//! The pure core takes values; this crate produces them: the process
//! environment (read here and nowhere else), the wall clock, entropy, default
//! paths, and the signal-0 liveness probe.
#![deny(missing_docs)]

pub mod clock;
pub mod env;
pub mod git;
pub mod paths;
pub mod probe;
pub mod procfs;

/// A fresh boot id: 16 hex digits, new for every process start.
pub fn boot_id() -> String {
    format!("{:016x}", nonce() as u64)
}

/// 128 bits from the operating system's entropy source.
pub fn nonce() -> u128 {
    let mut bytes = [0u8; 16];
    // getrandom fails only when the OS has no entropy source at all; falling
    // back to the time and pid still keeps identities unique per process.
    if getrandom::fill(&mut bytes).is_err() {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        return t ^ (u128::from(std::process::id()) << 96);
    }
    u128::from_le_bytes(bytes)
}
