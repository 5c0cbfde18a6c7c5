//! The one place that reads the process environment. Everything else asks an
//! [`EnvSnapshot`] by a declared [`fleetgate_core::env::EnvKey`].
//!
//! A long-running fleetgate (`serve`, `dashboard`) keeps its secrets out of its own process
//! environment ([`seal_secrets`]): any process of the same user — its downstream included —
//! reads `/proc/PID/environ`, which shows the block the kernel placed at exec, whatever is
//! later removed from libc's `environ`. So it executes itself again (same pid, same command
//! line) with an environment without them, handing them over in an anonymous memory file
//! ([`memfd_create`](rustix::fs::memfd_create)) that [`capture`] reads once and closes.

use crate::error::{HostError, HostErrorKind};
pub use fleetgate_core::env::EnvSnapshot;
use fleetgate_core::env::{EnvKey, key_name, seal_plan, sealed_from_process_env};
use std::ffi::OsString;
use std::io::{Read, Seek, Write};
use std::sync::OnceLock;

/// The name the memory file carries (`/proc/PID/fd/N` shows `/memfd:<name>`).
const SEALED_NAME: &str = "fleetgate-sealed-env";

/// The process environment as it is, lossily as strings, and as the OS holds it.
#[expect(clippy::disallowed_methods, reason = "this is the one sanctioned reader of the process environment")]
fn process_env() -> Vec<(OsString, OsString)> {
    std::env::vars_os().collect()
}

fn lossy(pairs: &[(OsString, OsString)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| (k.to_string_lossy().into_owned(), v.to_string_lossy().into_owned())).collect()
}

/// Snapshot this process's environment. Keys or values that are not UTF-8 are
/// kept lossily so an odd override is still seen (and refused), not dropped. The
/// secrets [`seal_secrets`] took out of the environment are in it, as if they were there.
pub fn capture() -> EnvSnapshot {
    let mut pairs = lossy(&process_env());
    if let Some(fd) = EnvSnapshot::from_pairs(pairs.clone()).get(EnvKey::FleetgateSealedEnvFd, "") {
        pairs.extend(sealed(fd).iter().cloned());
    }
    EnvSnapshot::from_pairs(pairs)
}

/// The sealed secrets: read from descriptor `fd` the first time and the descriptor closed,
/// so no child inherits it and no `/proc/PID/fd` shows it after; kept for later captures.
/// When they cannot be read the process exits (status 1): running on without them would
/// serve HTTP without its token — fail closed.
fn sealed(fd: &str) -> &'static [(String, String)] {
    static SEALED: OnceLock<Vec<(String, String)>> = OnceLock::new();
    SEALED.get_or_init(|| {
        read_sealed(fd).unwrap_or_else(|why| {
            eprintln!(
                "fleetgate: the sealed secrets cannot be read ({why}): FLEETGATE_SEALED_ENV_FD is set by fleetgate \
                 itself when it re-executes; unset it"
            );
            std::process::exit(1)
        })
    })
}

fn read_sealed(fd: &str) -> Result<Vec<(String, String)>, HostError> {
    use std::os::fd::FromRawFd;
    let malformed = |why: String| HostError::new(HostErrorKind::Malformed, why);
    let unreadable = |why: String| HostError::new(HostErrorKind::Unreadable, why);
    let raw: i32 = fd.parse().map_err(|_| malformed(format!("descriptor {fd:?} is not a number")))?;
    // Only the memory file this program made for itself is taken over: the link names it.
    let link =
        std::fs::read_link(format!("/proc/self/fd/{raw}")).map_err(|e| unreadable(format!("descriptor {raw}: {e}")))?;
    if !link.to_string_lossy().starts_with(&format!("/memfd:{SEALED_NAME}")) {
        return Err(malformed(format!("descriptor {raw} is {}, not the sealed environment", link.display())));
    }
    // SAFETY: `raw` is open (its /proc link was just read) and is the memory file the
    // previous image of this process created for exactly this hand-over (its name says so)
    // and left open across exec; nothing else in this image knows it (the `OnceLock` above
    // reads it once), so taking ownership — and closing it when the file drops — is sound.
    #[allow(unsafe_code)]
    let mut file = std::fs::File::from(unsafe { std::os::fd::OwnedFd::from_raw_fd(raw) });
    let mut raw_pairs = Vec::new();
    file.seek(std::io::SeekFrom::Start(0))
        .and_then(|_| file.read_to_end(&mut raw_pairs))
        .map_err(|e| unreadable(e.to_string()))?;
    Ok(crate::procfs::parse_environ(&raw_pairs).iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect())
}

/// Keep the secrets ([`sealed_from_process_env`]) out of this process's environment: when it
/// holds any, write them to a memory file and execute this program again — same pid, same
/// arguments — with the rest of the environment and `FLEETGATE_SEALED_ENV_FD` naming the
/// file, which [`capture`] reads. Returns only when there is nothing to seal (or this image is
/// already the sealed one), or with why the exec failed. Call it first, while the process
/// has one thread and no child.
pub fn seal_secrets() -> Result<(), HostError> {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let env = process_env();
    let Some((_, secrets)) = seal_plan(&lossy(&env)) else { return Ok(()) };
    let fail = |what: &str, e: &dyn std::fmt::Display| {
        HostError::new(HostErrorKind::Unreadable, format!("cannot seal the secrets ({what}): {e}"))
    };
    // No close-on-exec: the next image must find it open.
    let fd =
        rustix::fs::memfd_create(SEALED_NAME, rustix::fs::MemfdFlags::empty()).map_err(|e| fail("memfd_create", &e))?;
    let mut file = std::fs::File::from(fd);
    for (k, v) in &secrets {
        file.write_all(format!("{k}={v}\0").as_bytes()).map_err(|e| fail("write", &e))?;
    }
    let mut args = std::env::args_os();
    let argv0 = args.next().unwrap_or_else(|| "fleetgate".into());
    let kept = env.into_iter().filter(|(k, v)| !sealed_from_process_env(&k.to_string_lossy(), &v.to_string_lossy()));
    // /proc/self/exe: this very binary, even if its path was replaced or removed since.
    let e = std::process::Command::new("/proc/self/exe")
        .arg0(argv0)
        .args(args)
        .env_clear()
        .envs(kept)
        .env(key_name(EnvKey::FleetgateSealedEnvFd, ""), file.as_raw_fd().to_string())
        .exec();
    Err(fail("exec", &e))
}
