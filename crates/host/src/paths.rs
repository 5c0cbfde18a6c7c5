//! Default locations (XDG base directories).

use fleetgate_core::env::{EnvKey, EnvSnapshot};
use std::path::PathBuf;

fn base(env: &EnvSnapshot, xdg: EnvKey, fallback: &str) -> Option<PathBuf> {
    env.get(xdg, "")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| env.get(EnvKey::Home, "").map(|h| PathBuf::from(h).join(fallback)))
}

/// `$XDG_STATE_HOME/fleetgate/registry.sqlite3`, else under `~/.local/state`.
pub fn default_store_path(env: &EnvSnapshot) -> Option<PathBuf> {
    base(env, EnvKey::XdgStateHome, ".local/state").map(|b| b.join("fleetgate").join("registry.sqlite3"))
}

/// The store a fleetgate process with this `--store` flag and environment opens: the flag,
/// else the store key (under the fleet's `prefix`), else [`default_store_path`]. The one
/// place this order lives: the CLI resolves its own store with it, and the gate a peer
/// gateway's from that process's command line and environment.
pub fn store_location(flag: Option<&str>, env: &EnvSnapshot, prefix: &str) -> Option<String> {
    flag.map(str::to_owned)
        .or_else(|| env.get(EnvKey::WorkerRegistryDb, prefix).map(str::to_owned))
        .or_else(|| default_store_path(env).map(|p| p.display().to_string()))
}

/// A checkout's canonical spelling (symlinks resolved), or the path as given when it cannot
/// be resolved: two spellings of one checkout compare equal, and an unresolvable one is
/// compared as written.
pub fn canonical_root(root: &str) -> String {
    std::fs::canonicalize(root).map_or_else(|_| root.to_owned(), |p| p.display().to_string())
}

/// `$XDG_CONFIG_HOME/fleetgate/fleet.toml`, else under `~/.config`.
pub fn default_config_path(env: &EnvSnapshot) -> Option<PathBuf> {
    base(env, EnvKey::XdgConfigHome, ".config").map(|b| b.join("fleetgate").join("fleet.toml"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_is_the_flag_then_the_key_then_the_default() {
        let env = EnvSnapshot::from_pairs([("GITEA_WORKER_REGISTRY_DB", "/k.db"), ("HOME", "/h")]);
        assert_eq!(store_location(Some("/f.db"), &env, "GITEA_").as_deref(), Some("/f.db"));
        assert_eq!(store_location(None, &env, "GITEA_").as_deref(), Some("/k.db"));
        let home = EnvSnapshot::from_pairs([("HOME", "/h")]);
        assert_eq!(
            store_location(None, &home, "GITEA_").as_deref(),
            Some("/h/.local/state/fleetgate/registry.sqlite3")
        );
        assert_eq!(store_location(None, &EnvSnapshot::default(), "GITEA_"), None);
    }

    #[test]
    fn xdg_wins_over_home_and_relative_xdg_is_ignored() {
        let env = EnvSnapshot::from_pairs([("XDG_STATE_HOME", "/s"), ("HOME", "/h")]);
        assert_eq!(default_store_path(&env), Some(PathBuf::from("/s/fleetgate/registry.sqlite3")));
        let env = EnvSnapshot::from_pairs([("XDG_STATE_HOME", "rel"), ("HOME", "/h")]);
        assert_eq!(default_store_path(&env), Some(PathBuf::from("/h/.local/state/fleetgate/registry.sqlite3")));
        assert_eq!(default_config_path(&EnvSnapshot::default()), None);
    }
}
