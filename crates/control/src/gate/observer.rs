//! What the gate observes of the host: its processes (and their environments), signal-0
//! probes, this machine's identity, a checkout's HEAD and the facts about another gateway. The
//! binary implements it on the real host (`/proc`, `kill(pid, 0)`, `/etc/machine-id`,
//! git, the other process's command line); tests hand the gate a made-up fleet through
//! their own.

use fleetgate_config::FleetConfig;
use fleetgate_core::inventory::{PeerFacts, PidProbe};
use fleetgate_core::procmatch::FleetMatcher;
use fleetgate_core::runtime::ProcessScan;
use fleetgate_host::HostError;
use fleetgate_host::procfs::{ProcessSource, scan_fleet};
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
    /// The facts about the unclaimed gateway `pid` (command line `argv`): the proofs it
    /// holds open, its pid namespace and start, its working directory, the files it holds
    /// open, and the store it names (its `--store`, else the store key under `env_prefix` in
    /// its own environment, else its default path). Or why they cannot be read (the process
    /// may have gone meanwhile). Facts only: `fleetgate_core::inventory::judge_peer` decides.
    fn peer_facts(&self, pid: i64, argv: &[String], env_prefix: &str) -> Result<PeerFacts, PeerUnread>;
}

/// Why the facts about another gateway cannot be read ([`Observer::peer_facts`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PeerUnread {
    /// Its `/proc` stamp.
    #[error("its pid namespace and start cannot be read: {0}")]
    Stamp(HostError),
    /// The files it holds open (its proofs among them).
    #[error("its open files cannot be read: {0}")]
    OpenFiles(HostError),
    /// Its working directory.
    #[error("its working directory cannot be read: {0}")]
    Cwd(HostError),
    /// Its stamp changed between the first read and the last: not the process read.
    #[error("it changed while it was read")]
    Changed,
    /// Its command line reads empty: on its way out.
    #[error("it is exiting")]
    Exiting,
    /// Its command line changed meanwhile.
    #[error("it ran another program while it was read")]
    Execed,
}

impl PeerUnread {
    /// Whether the read caught the process between two states, so reading it again a
    /// moment later may tell what it is.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Changed | Self::Exiting | Self::Execed)
    }
}

/// This host's fleet processes, as `source` lists them.
pub fn scan_host(config: &FleetConfig, source: &dyn ProcessSource) -> ProcessScan {
    scan_fleet(source, &FleetMatcher::new(&config.process_match))
}
