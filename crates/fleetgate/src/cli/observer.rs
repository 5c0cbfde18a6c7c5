//! The gate's [`Observer`] on the real host: `/proc`, `kill(pid, 0)`, `/etc/machine-id`,
//! git, and another gateway's store found the way that process found it — its command line
//! read with this binary's own flags, its environment, its working directory, its open
//! files. It lives in the binary because only the binary knows its flags.

use super::args::Cli;
use clap::Parser;
use fleetgate_control::gate::Observer;
use fleetgate_core::inventory::{PeerStore, PidProbe};
use fleetgate_host::HostError;
use fleetgate_host::paths::{canonical_root, store_location};
use fleetgate_host::procfs::{ProcFs, ProcessSource};
use fleetgate_store::StoreSpec;
use std::os::unix::fs::MetadataExt;
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

    fn peer_store(
        &self,
        pid: i64,
        argv: &[String],
        env_prefix: &str,
        our_file: Option<(u64, u64)>,
    ) -> Result<PeerStore, String> {
        // The kind only: clap's message quotes the offending argument, which may be a secret.
        let cli = Cli::try_parse_from(argv).map_err(|e| format!("its command line does not parse ({:?})", e.kind()))?;
        let env = self.procfs.environ(pid).map_err(|e| format!("its environment cannot be read: {e}"))?;
        let spec = store_location(cli.store.as_deref(), &env, env_prefix)
            .ok_or_else(|| "it names no store (no --store, store key, HOME or XDG_STATE_HOME)".to_owned())?;
        let path = match StoreSpec::parse(&spec) {
            Ok(StoreSpec::Sqlite(path)) => path,
            // A server's store proves nothing here.
            Ok(StoreSpec::Postgres(url)) => {
                return Err(format!(
                    "its store is PostgreSQL ({}): only a SQLite store it holds open is read as proof",
                    fleetgate_store::redact_url(&url)
                ));
            }
            Err(_) => {
                return Err(format!(
                    "its store location {:?} is not a SQLite path",
                    fleetgate_store::redact_url(&spec)
                ));
            }
        };
        let path = if path.is_absolute() {
            path
        } else {
            self.procfs.cwd(pid).map_err(|e| format!("its store {} is relative and {e}", path.display()))?.join(path)
        };
        let location = path.display().to_string();
        // A store that cannot be looked at or read yet is told as such, not as a failure to
        // learn anything: a gateway just started may be creating it (the judgement gives
        // such a one a bounded grace).
        let meta = match std::fs::metadata(&path) {
            Ok(meta) => meta,
            Err(e) => {
                let unread = Some(format!("its store {location} cannot be looked at: {e}"));
                return Ok(PeerStore { location, held_open: false, ours: false, rows: Vec::new(), unread });
            }
        };
        let file = (meta.dev(), meta.ino());
        let held_open =
            self.procfs.open_files(pid).map_err(|e| format!("its open files cannot be read: {e}"))?.contains(&file);
        let ours = our_file == Some(file);
        let (rows, unread) = if held_open && !ours {
            match fleetgate_store::sqlite::SqliteStore::read_runtime_rows(&path) {
                Ok(rows) => (
                    rows.into_iter()
                        .filter(|r| r.pid == pid)
                        .map(|mut r| {
                            r.repository_root = r.repository_root.as_deref().map(canonical_root);
                            r
                        })
                        .collect(),
                    None,
                ),
                Err(e) => (Vec::new(), Some(format!("its store {location} cannot be read: {e}"))),
            }
        } else {
            (Vec::new(), None)
        };
        Ok(PeerStore { location, held_open, ours, rows, unread })
    }
}
