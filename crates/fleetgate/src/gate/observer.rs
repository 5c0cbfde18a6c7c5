//! What the gate observes of the host: its processes (and their environments), signal-0
//! probes, this machine's identity and a checkout's HEAD. [`LiveObserver`] is the real
//! one (`/proc`, `kill(pid, 0)`, `/etc/machine-id`, git); tests hand the gate a made-up
//! fleet through their own.

use crate::config::FleetConfig;
use fleetgate_core::inventory::PidProbe;
use fleetgate_core::procmatch::FleetMatcher;
use fleetgate_core::runtime::ProcessScan;
use fleetgate_host::HostError;
use fleetgate_host::procfs::{ProcFs, ProcessSource, scan_fleet};
use std::fmt;
use std::path::Path;

/// Everything the gate learns from the host it runs on.
pub trait Observer: Send + Sync + fmt::Debug {
    /// This host's processes and their environments.
    fn processes(&self) -> &dyn ProcessSource;
    /// Signal 0, and nothing else.
    fn probe(&self, pid: i64) -> PidProbe;
    /// This machine, as the store records hosts; `None` when it cannot be told.
    fn local_host(&self) -> Option<fleetgate_store::HostIdentity>;
    /// A checkout's current HEAD, or why it cannot be read.
    fn head(&self, checkout: &Path) -> Result<String, HostError>;
}

/// The host this process runs on.
#[derive(Debug, Default)]
pub struct LiveObserver {
    procfs: ProcFs,
    /// The machine and boot ids, once read: neither changes while this process runs.
    host: std::sync::OnceLock<fleetgate_store::HostIdentity>,
}

impl Observer for LiveObserver {
    fn processes(&self) -> &dyn ProcessSource {
        &self.procfs
    }

    fn probe(&self, pid: i64) -> PidProbe {
        fleetgate_host::probe::probe_pid(Some(pid))
    }

    fn local_host(&self) -> Option<fleetgate_store::HostIdentity> {
        if let Some(host) = self.host.get() {
            return Some(host.clone());
        }
        // Not known yet, or unreadable before: read again (a failure is not kept).
        let host = local_host()?;
        Some(self.host.get_or_init(|| host).clone())
    }

    fn head(&self, checkout: &Path) -> Result<String, HostError> {
        fleetgate_host::git::head(checkout)
    }
}

/// This host as the store records it, when it can be told.
pub fn local_host() -> Option<fleetgate_store::HostIdentity> {
    match fleetgate_host::host_identity() {
        Ok((host_id, boot_id)) => Some(fleetgate_store::HostIdentity { host_id, boot_id }),
        Err(e) => {
            tracing::warn!("host identity unknown: {e}");
            None
        }
    }
}

/// This host's fleet processes, as `source` lists them.
pub fn scan_host(config: &FleetConfig, source: &dyn ProcessSource) -> ProcessScan {
    scan_fleet(source, &FleetMatcher::new(&config.process_match))
}
