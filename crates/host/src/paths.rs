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

/// `$XDG_CONFIG_HOME/fleetgate/fleet.toml`, else under `~/.config`.
pub fn default_config_path(env: &EnvSnapshot) -> Option<PathBuf> {
    base(env, EnvKey::XdgConfigHome, ".config").map(|b| b.join("fleetgate").join("fleet.toml"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xdg_wins_over_home_and_relative_xdg_is_ignored() {
        let env = EnvSnapshot::from_pairs([("XDG_STATE_HOME", "/s"), ("HOME", "/h")]);
        assert_eq!(default_store_path(&env), Some(PathBuf::from("/s/fleetgate/registry.sqlite3")));
        let env = EnvSnapshot::from_pairs([("XDG_STATE_HOME", "rel"), ("HOME", "/h")]);
        assert_eq!(default_store_path(&env), Some(PathBuf::from("/h/.local/state/fleetgate/registry.sqlite3")));
        assert_eq!(default_config_path(&EnvSnapshot::default()), None);
    }
}
