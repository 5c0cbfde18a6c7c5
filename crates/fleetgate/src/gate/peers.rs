//! The evidence about gateways no row of this fleet claims (issue #19): for each such
//! `fleetgate serve` on this host, the store it names — its `--store`, else the store key
//! in its own environment, else the default path under its own `XDG_STATE_HOME`/`HOME`,
//! as `Ctx::resolve` would have found it — whether it holds that very file open, whether it
//! is the file this fleet's rows were just read from (then it is this fleet's own store),
//! and that store's rows for its pid, read through a read-only connection. Only facts:
//! [`judge_peer`] decides.
//!
//! [`judge_peer`]: fleetgate_core::inventory::judge_peer

use crate::cli::args::Cli;
use crate::config::FleetConfig;
use clap::Parser;
use fleetgate_core::env::{EnvKey, EnvSnapshot};
use fleetgate_core::inventory::{PeerEvidence, PeerStore};
use fleetgate_core::procmatch::FleetMatcher;
use fleetgate_core::runtime::{ProcessScan, RuntimeRecord, RuntimeStatus};
use fleetgate_host::procfs::ProcessSource;
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A checkout's canonical spelling (symlinks resolved), or the path as given when it cannot
/// be resolved: two spellings of one checkout compare equal, and an unresolvable one is
/// compared as written.
pub fn canonical_root(root: &str) -> String {
    std::fs::canonicalize(root).map_or_else(|_| root.to_owned(), |p| p.display().to_string())
}

/// Evidence for every gateway in `scan` whose pid no running row in `rows` claims;
/// `our_file` is the file `rows` were read from (`None` for a server's database).
pub fn peer_evidence(
    config: &FleetConfig,
    scan: &ProcessScan,
    rows: &[RuntimeRecord],
    our_file: Option<(u64, u64)>,
    source: &dyn ProcessSource,
) -> BTreeMap<i64, PeerEvidence> {
    let claimed: BTreeSet<i64> = rows.iter().filter(|r| r.status == RuntimeStatus::Running).map(|r| r.pid).collect();
    let mut out = BTreeMap::new();
    for p in scan.processes.iter().filter(|p| !claimed.contains(&p.pid)) {
        // The same process as scanned, not a pid recycled since.
        let Some(entry) = source.entry(p.pid).filter(|e| e.started_at == p.started_at) else { continue };
        if !FleetMatcher::is_gateway(&entry.argv) {
            continue;
        }
        let evidence = match read_peer(config, p.pid, &entry.argv, source, our_file) {
            Ok(store) => PeerEvidence::Store(store),
            Err(why) => PeerEvidence::Unreadable(why),
        };
        out.insert(p.pid, evidence);
    }
    out
}

fn read_peer(
    config: &FleetConfig,
    pid: i64,
    argv: &[String],
    source: &dyn ProcessSource,
    our_file: Option<(u64, u64)>,
) -> Result<PeerStore, String> {
    // The kind only: clap's message quotes the offending argument, which may be a secret.
    let cli = Cli::try_parse_from(argv).map_err(|e| format!("its command line does not parse ({:?})", e.kind()))?;
    let env = source.environ(pid).map_err(|e| format!("its environment cannot be read: {e}"))?;
    let spec = store_spec(cli.store.as_deref(), &env, &config.env_prefix)
        .ok_or_else(|| "it names no store (no --store, store key, HOME or XDG_STATE_HOME)".to_owned())?;
    let path = sqlite_path(&spec)?;
    let path = if path.is_absolute() {
        path
    } else {
        source.cwd(pid).map_err(|e| format!("its store {} is relative and {e}", path.display()))?.join(path)
    };
    let location = path.display().to_string();
    let meta = std::fs::metadata(&path).map_err(|e| format!("its store {location} cannot be looked at: {e}"))?;
    let file = (meta.dev(), meta.ino());
    let held_open = source.open_files(pid).map_err(|e| format!("its open files cannot be read: {e}"))?.contains(&file);
    let ours = our_file == Some(file);
    let rows = if held_open && !ours {
        fleetgate_store::sqlite::SqliteStore::read_runtime_rows(&path)
            .map_err(|e| format!("its store {location} cannot be read: {e}"))?
            .into_iter()
            .filter(|r| r.pid == pid)
            .map(|mut r| {
                r.repository_root = r.repository_root.as_deref().map(canonical_root);
                r
            })
            .collect()
    } else {
        Vec::new()
    };
    Ok(PeerStore { location, held_open, ours, rows })
}

/// The store a gateway with this `--store` and environment opened (`Ctx::resolve`'s order).
fn store_spec(flag: Option<&str>, env: &EnvSnapshot, prefix: &str) -> Option<String> {
    flag.map(str::to_owned)
        .or_else(|| env.get(EnvKey::WorkerRegistryDb, prefix).map(str::to_owned))
        .or_else(|| fleetgate_host::paths::default_store_path(env).map(|p| p.display().to_string()))
}

/// A SQLite store's path; a server's store proves nothing here.
fn sqlite_path(spec: &str) -> Result<PathBuf, String> {
    let spec = spec.trim();
    if spec.starts_with("postgres://") || spec.starts_with("postgresql://") {
        return Err(format!(
            "its store is PostgreSQL ({}): only a SQLite store it holds open is read as proof",
            fleetgate_store::redact_url(spec)
        ));
    }
    let path = spec.strip_prefix("sqlite://").unwrap_or(spec);
    if path.is_empty() || path.contains("://") {
        return Err(format!("its store location {:?} is not a SQLite path", fleetgate_store::redact_url(spec)));
    }
    Ok(Path::new(path).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_named_is_the_flag_then_the_key_then_the_default() {
        let env = EnvSnapshot::from_pairs([("GITEA_WORKER_REGISTRY_DB", "/k.db"), ("HOME", "/h")]);
        assert_eq!(store_spec(Some("/f.db"), &env, "GITEA_").as_deref(), Some("/f.db"));
        assert_eq!(store_spec(None, &env, "GITEA_").as_deref(), Some("/k.db"));
        let home = EnvSnapshot::from_pairs([("HOME", "/h")]);
        assert_eq!(store_spec(None, &home, "GITEA_").as_deref(), Some("/h/.local/state/fleetgate/registry.sqlite3"));
        assert_eq!(store_spec(None, &EnvSnapshot::default(), "GITEA_"), None);
    }

    #[test]
    fn only_a_sqlite_path_can_be_read_as_proof() {
        assert_eq!(sqlite_path("sqlite:///s/r.db").unwrap(), Path::new("/s/r.db"));
        assert_eq!(sqlite_path("rel.db").unwrap(), Path::new("rel.db"));
        let pg = sqlite_path("postgres://u:secret@h/db").unwrap_err();
        assert!(pg.contains("PostgreSQL") && !pg.contains("secret"), "{pg}");
        assert!(sqlite_path("mysql://h/db").is_err());
    }
}
