//! fleetgate's edge to the operating system.
//!
//! The pure core takes values; this crate produces them: the process
//! environment (read here and nowhere else), the wall clock, entropy, default
//! paths, and the signal-0 liveness probe.
//!
//! May import core only (`tests/layering.rs` in the binary crate checks).
#![deny(missing_docs)]

pub mod clock;
pub mod env;
mod error;
pub mod git;
pub mod paths;
pub mod probe;
pub mod procfs;
pub mod proof;

pub use error::{HostError, HostErrorKind};

/// This machine: its stable machine id and the kernel's id of the current
/// boot. A row carrying both is tied to one host and one boot of it.
pub fn host_identity() -> Result<(String, String), HostError> {
    let read = |paths: &[&str]| {
        paths
            .iter()
            .find_map(|p| std::fs::read_to_string(p).ok().map(|t| t.trim().to_owned()).filter(|t| !t.is_empty()))
            .ok_or_else(|| HostError::new(HostErrorKind::Unreadable, format!("cannot read {}", paths.join(" or "))))
    };
    Ok((read(&["/etc/machine-id", "/var/lib/dbus/machine-id"])?, read(&["/proc/sys/kernel/random/boot_id"])?))
}

/// A fresh start id for this process: 16 hex digits, new for every process start (the
/// runtime row's `boot_id`, which names a process start, not a kernel boot: that one is
/// [`host_identity`]'s).
pub fn start_id() -> String {
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

/// Who this process runs as, for the record of an operator's answer: the user name
/// `/etc/passwd` gives the real user id, with the id (`alice (uid 1000)`), or the id alone.
pub fn os_user() -> String {
    let uid = rustix::process::getuid().as_raw();
    let name = std::fs::read_to_string("/etc/passwd").ok().and_then(|passwd| {
        passwd.lines().find_map(|line| {
            let mut fields = line.split(':');
            let name = fields.next()?;
            (fields.nth(1)? == uid.to_string()).then(|| name.to_owned())
        })
    });
    match name {
        Some(name) => format!("{name} (uid {uid})"),
        None => format!("uid {uid}"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_host_identity_is_stable_within_a_boot() {
        let (a, b) = (super::host_identity(), super::host_identity());
        assert_eq!(a, b);
        let (machine, boot) = a.expect("this machine has a machine id and a boot id");
        assert!(!machine.is_empty() && boot.len() >= 32, "{machine} {boot}");
    }

    #[test]
    fn the_os_user_names_this_process_s_uid() {
        let uid = rustix::process::getuid().as_raw();
        let user = super::os_user();
        assert!(user.ends_with(&format!("uid {uid})")) || user == format!("uid {uid}"), "{user}");
    }
}
