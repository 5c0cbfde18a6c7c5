//! Resolved settings: the environment snapshot, the fleet configuration, the
//! store location and the clock, decided once before a command runs.

use crate::cli::args::Cli;
use crate::config::FleetConfig;
use anyhow::anyhow;
use fleetgate_core::Clock;
use fleetgate_core::env::{EnvKey, EnvSnapshot};
use fleetgate_store::Store;
use std::sync::Arc;

/// Everything a command needs from the outside world.
#[derive(Clone)]
pub struct Ctx {
    /// This process's environment, captured once.
    pub env: EnvSnapshot,
    /// The fleet.
    pub config: FleetConfig,
    /// The store location (path or URL).
    pub store_spec: String,
    /// Where `now` comes from.
    pub clock: Arc<dyn Clock>,
    /// `--json`.
    pub json: bool,
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("store", &fleetgate_store::redact_url(&self.store_spec))
            .field("config", &self.config.source)
            .finish_non_exhaustive()
    }
}

impl Ctx {
    /// Resolve flags, config and environment.
    pub fn resolve(cli: &Cli, env: EnvSnapshot, clock: Arc<dyn Clock>) -> anyhow::Result<Self> {
        let config = FleetConfig::load(cli.config.as_deref(), &env)?;
        let store_spec = match &cli.store {
            Some(s) => s.clone(),
            None => match env.get(EnvKey::WorkerRegistryDb, &config.env_prefix) {
                Some(s) => s.to_owned(),
                None => fleetgate_host::paths::default_store_path(&env)
                    .ok_or_else(|| {
                        anyhow!(
                            "no store location: pass --store, set {}, or set HOME/XDG_STATE_HOME",
                            fleetgate_core::env::key_name(EnvKey::WorkerRegistryDb, &config.env_prefix)
                        )
                    })?
                    .display()
                    .to_string(),
            },
        };
        Ok(Self { env, config, store_spec, clock, json: cli.json })
    }

    /// Open the store.
    pub fn store(&self) -> anyhow::Result<Arc<dyn Store>> {
        Ok(fleetgate_store::open(&self.store_spec)?)
    }
}
