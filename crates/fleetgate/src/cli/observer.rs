//! The gate's [`Observer`] on the real host: `/proc`, `kill(pid, 0)`, `/etc/machine-id`,
//! git, and the facts about another gateway — the proof it holds open, its pid namespace and
//! start, its working directory, its open files, and the store it names, found the way that
//! process found it (its command line read with this binary's own flags, its environment).
//! It lives in the binary because only the binary knows its flags.

use super::args::Cli;
use clap::Parser;
use fleetgate_control::gate::{Observer, PeerUnread};
use fleetgate_core::env::EnvKey;
use fleetgate_core::inventory::{NamedStore, PeerFacts, PidProbe, StoreUntold};
use fleetgate_host::HostError;
use fleetgate_host::paths::{canonical_root, store_location};
use fleetgate_host::procfs::{ProcFs, ProcessSource};
use fleetgate_store::StoreSpec;
use std::path::Path;

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
        let host = match fleetgate_host::host_identity() {
            Ok((host_id, boot_id)) => fleetgate_store::HostIdentity { host_id, boot_id },
            Err(e) => {
                tracing::warn!("host identity unknown: {e}");
                return None;
            }
        };
        Some(self.host.get_or_init(|| host).clone())
    }

    fn head(&self, checkout: &Path) -> Result<String, HostError> {
        fleetgate_host::git::head(checkout)
    }

    fn peer_facts(&self, pid: i64, argv: &[String], env_prefix: &str) -> Result<PeerFacts, PeerUnread> {
        // Its stamp before and after its descriptors are read: a process that changed
        // meanwhile (exited, its pid taken) is not the one read, and is told so.
        let stamp = self.procfs.stamp(pid).map_err(PeerUnread::Stamp)?;
        let proofs = self.procfs.proofs(pid).map_err(PeerUnread::OpenFiles)?;
        let open_files = self.procfs.open_files(pid).map_err(PeerUnread::OpenFiles)?;
        let cwd = self.procfs.cwd(pid).map_err(PeerUnread::Cwd)?;
        let mut named_store = self.named_store(pid, argv, env_prefix, &cwd);
        // No store named and no environment at all may be the instant of an exec, when the
        // kernel has mapped the new program but not yet its environment (a gateway sealing
        // its secrets re-executes itself): read again a moment later, a few times.
        for _ in 0..3 {
            // The environment is read again only when no store was named (a rare answer).
            let bare = || self.procfs.environ(pid).is_ok_and(|env| env.iter().next().is_none());
            if !matches!(named_store, Err(StoreUntold::Nothing)) || !bare() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
            named_store = self.named_store(pid, argv, env_prefix, &cwd);
        }
        if self.procfs.stamp(pid).ok() != Some(stamp) {
            return Err(PeerUnread::Changed);
        }
        // A process on its way out closes its files after it gives up its memory (its command
        // line then reads empty), and one that ran another program meanwhile is not the one
        // read: neither is told unproven for what was read of it (the caller judges it again).
        match self.procfs.entry(pid) {
            None => return Err(PeerUnread::Exiting),
            Some(now) if now.argv != argv => return Err(PeerUnread::Execed),
            Some(_) => {}
        }
        Ok(PeerFacts {
            stamp: Some(stamp.stamp),
            uid: stamp.uid,
            proofs,
            cwd: Some(canonical_root(&cwd.display().to_string())),
            open_files,
            named_store,
        })
    }
}

impl LiveObserver {
    /// The store the gateway `pid` names, the way it found it: its `--store` (its command
    /// line read with this binary's own flags), else the store key in its own environment,
    /// else its default path; a relative path from its working directory `cwd`.
    fn named_store(&self, pid: i64, argv: &[String], env_prefix: &str, cwd: &Path) -> Result<NamedStore, StoreUntold> {
        // The kind only: clap's message quotes the offending argument, which may be a secret.
        let cli = Cli::try_parse_from(argv).map_err(|e| StoreUntold::CommandLine(format!("{:?}", e.kind())))?;
        let env = self.procfs.environ(pid).map_err(|e| StoreUntold::Environment(e.to_string()))?;
        // A store URL with a credential leaves the environment with the secrets (`seal_secrets`):
        // it names a server's database, which only its proof can say more of.
        let sealed = cli.store.is_none()
            && env.get(EnvKey::WorkerRegistryDb, env_prefix).is_none()
            && env.get(EnvKey::FleetgateSealedEnvFd, "").is_some();
        if sealed {
            return Ok(NamedStore { location: "a store location sealed away with its secrets".into(), key: None });
        }
        let spec = store_location(cli.store.as_deref(), &env, env_prefix).ok_or(StoreUntold::Nothing)?;
        // Which store a location names, and whether its key can be told from here, is the
        // store's to say (a server's database: only its proof says more).
        let spec = StoreSpec::parse(&spec).map_err(|_| StoreUntold::Location(fleetgate_store::redact_url(&spec)))?;
        let (location, key) = spec.seen_from(cwd);
        Ok(NamedStore { location, key })
    }
}
