//! A gateway's proof on its host (issue 54): what it publishes about itself, for the other
//! fleets' inventories, in an anonymous memory file it holds open for as long as it runs.
//!
//! **Decision:** a sealed memory file, not a file in a directory. Another process finds it
//! only among the gateway's own descriptors (`/proc/PID/fd`, which only the same user or
//! root may read), so no path can be planted, no stale file outlives a `kill -9`, and no
//! directory's ownership has to be trusted; it is made close-on-exec (no child keeps it)
//! and sealed once written (nobody, the gateway included, can change it after). The file
//! belongs to the user who made it, which the reader checks against the process's own.

use crate::error::{HostError, HostErrorKind};
use fleetgate_core::runtime::ProcessStamp;
use rustix::fs::{MemfdFlags, SealFlags};
use std::io::Write;
use std::os::fd::OwnedFd;

/// The name the memory file carries (`/proc/PID/fd/N` shows `/memfd:<name> (deleted)`).
pub const NAME: &str = "fleetgate-gateway-proof";

/// Publish `bytes` as this process's proof: made, written and sealed. Hold the descriptor
/// for as long as the proof stands ([`hold_until_exit`]); dropping it withdraws the proof.
pub fn publish(bytes: &[u8]) -> Result<OwnedFd, HostError> {
    let fail = |what: &str, e: &dyn std::fmt::Display| {
        HostError::new(HostErrorKind::Unreadable, format!("cannot publish this gateway's proof ({what}): {e}"))
    };
    let fd = rustix::fs::memfd_create(NAME, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)
        .map_err(|e| fail("memfd_create", &e))?;
    let mut file = std::fs::File::from(fd);
    file.write_all(bytes).map_err(|e| fail("write", &e))?;
    let seals = SealFlags::SEAL | SealFlags::SHRINK | SealFlags::GROW | SealFlags::WRITE;
    rustix::fs::fcntl_add_seals(&file, seals).map_err(|e| fail("seal", &e))?;
    Ok(OwnedFd::from(file))
}

/// Hold `proof` until this process exits (a static is never dropped: the kernel closes it at
/// the exit itself), so no moment of an orderly shutdown finds the process without it; a
/// later proof replaces it.
pub fn hold_until_exit(proof: OwnedFd) {
    static HELD: std::sync::Mutex<Option<OwnedFd>> = std::sync::Mutex::new(None);
    *HELD.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(proof);
}

/// This process as its own `/proc` entry names it (its pid, PID namespace and start).
pub fn own_stamp() -> Result<ProcessStamp, HostError> {
    use crate::procfs::ProcessSource;
    let mut stamp = crate::procfs::ProcFs::default().stamp(i64::from(std::process::id()))?.stamp;
    // Its own number for itself, whatever namespace this `/proc` was mounted from.
    stamp.pid = i64::from(std::process::id());
    Ok(stamp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::procfs::{ProcFs, ProcessSource};

    /// The proof is read back through this process's own descriptor, with its owner; it
    /// cannot be changed once published, and withdrawing it (dropping the descriptor) leaves
    /// nothing behind.
    #[test]
    fn a_published_proof_is_read_back_sealed_and_withdrawn_with_its_descriptor() {
        let me = i64::from(std::process::id());
        let before = ProcFs::default().proofs(me).unwrap().len();
        let fd = publish(b"{\"proof\": 1}").unwrap();
        let held = ProcFs::default().proofs(me).unwrap();
        assert_eq!(held.len(), before + 1);
        let mine = held.iter().find(|h| h.bytes == b"{\"proof\": 1}").expect("read back");
        assert_eq!(mine.owner, Some(rustix::process::geteuid().as_raw()));
        // Sealed: no write, no truncation, through this descriptor or a new one.
        let mut file = std::fs::File::from(fd.try_clone().unwrap());
        assert!(file.write_all(b"x").is_err(), "written after the seal");
        assert!(file.set_len(0).is_err(), "truncated after the seal");
        let reopened = std::fs::OpenOptions::new().write(true).open(format!("/proc/self/fd/{}", {
            use std::os::fd::AsRawFd;
            fd.as_raw_fd()
        }));
        assert!(reopened.is_err() || reopened.unwrap().write_all(b"x").is_err(), "written through /proc");
        drop(file);
        drop(fd);
        assert_eq!(ProcFs::default().proofs(me).unwrap().len(), before, "withdrawn with its descriptor");
    }

    #[test]
    fn this_process_is_stamped_with_its_own_pid_namespace_and_start() {
        let stamp = own_stamp().unwrap();
        assert_eq!(stamp.pid, i64::from(std::process::id()));
        let link = std::fs::read_link("/proc/self/ns/pid").unwrap();
        assert_eq!(stamp.pid_namespace, crate::procfs::parse_namespace_link(&link.to_string_lossy()));
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
        let ticks = crate::procfs::parse_pid_stat(&stat).unwrap().start_ticks;
        assert_eq!(i64::try_from(stamp.start_ticks).unwrap(), ticks);
        let read = ProcFs::default().stamp(stamp.pid).unwrap();
        assert_eq!(read.stamp, stamp);
        assert_eq!(read.uid, Some(rustix::process::geteuid().as_raw()));
    }

    #[test]
    fn namespaced_pids_and_namespace_links_parse() {
        use crate::procfs::{parse_namespace_link, parse_nspid};
        assert_eq!(parse_nspid("Name:\tfleetgate\nNSpid:\t52000\t3\nNSsid:\t1\n"), Some(3));
        assert_eq!(parse_nspid("NSpid:\t4711\n"), Some(4711));
        assert_eq!(parse_nspid("Name:\tx\n"), None);
        assert_eq!(parse_nspid("NSpid:\tx\n"), None);
        assert_eq!(parse_nspid("NSpid:\t0\n"), None);
        assert_eq!(crate::procfs::parse_effective_uid("Name:\tx\nUid:\t1000\t65534\t65534\t65534\n"), Some(65534));
        assert_eq!(crate::procfs::parse_effective_uid("Uid:\t1000\n"), None);
        assert_eq!(parse_namespace_link("pid:[4026531836]"), Some(4_026_531_836));
        assert_eq!(parse_namespace_link("pid:4026531836"), None);
        assert_eq!(parse_namespace_link("pid:[x]"), None);
    }
}
