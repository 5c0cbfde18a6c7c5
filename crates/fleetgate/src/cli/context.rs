//! Resolved settings: the environment snapshot, the fleet configuration, the
//! store location and the clock, decided once before a command runs.

use crate::cli::args::Cli;
use anyhow::anyhow;
use fleetgate_config::FleetConfig;
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
    /// The store location (path or URL); `None` when nothing names one, which
    /// only matters to commands that open the store.
    pub store_spec: Option<String>,
    /// Where `now` comes from.
    pub clock: Arc<dyn Clock>,
    /// `--json`.
    pub json: bool,
    opened: std::sync::OnceLock<(Arc<dyn Store>, Arc<dyn Clock>)>,
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("store", &self.store_spec.as_deref().map(fleetgate_store::redact_url))
            .field("config", &self.config.source)
            .finish_non_exhaustive()
    }
}

impl Ctx {
    /// Resolve flags, config and environment.
    pub fn resolve(cli: &Cli, env: EnvSnapshot, clock: Arc<dyn Clock>) -> anyhow::Result<Self> {
        let config = FleetConfig::load(cli.config.as_deref(), &env)?;
        let store_spec = fleetgate_host::paths::store_location(cli.store.as_deref(), &env, &config.env_prefix);
        Ok(Self { env, config, store_spec, clock, json: cli.json, opened: std::sync::OnceLock::new() })
    }

    /// A context for `config` (a roster just written), the store found as usual.
    pub fn for_config(config: FleetConfig, env: EnvSnapshot, clock: Arc<dyn Clock>, json: bool) -> Self {
        let store_spec = fleetgate_host::paths::store_location(None, &env, &config.env_prefix);
        Self { env, config, store_spec, clock, json, opened: std::sync::OnceLock::new() }
    }

    /// The store location as messages may show it.
    pub fn store_shown(&self) -> String {
        self.store_spec.as_deref().map_or_else(|| "(no store)".into(), fleetgate_store::redact_url)
    }

    /// Open the store (once per process).
    pub fn store(&self) -> anyhow::Result<Arc<dyn Store>> {
        if let Some((store, _)) = self.opened.get() {
            return Ok(store.clone());
        }
        let spec = self.store_spec.as_deref().ok_or_else(|| {
            anyhow!(
                "no store location: pass --store, set {}, or set HOME or XDG_STATE_HOME",
                fleetgate_core::env::key_name(EnvKey::WorkerRegistryDb, &self.config.env_prefix)
            )
        })?;
        let store = fleetgate_store::open(spec)?;
        // TTL decisions take `now` from the store's clock where it has one, so
        // hosts sharing a store agree on every lease's age.
        let clock: Arc<dyn Clock> = Arc::new(fleetgate_store::StoreClock::new(store.clone(), self.clock.clone()));
        Ok(self.opened.get_or_init(|| (store, clock)).0.clone())
    }

    /// The decision clock: the store's (opening it) where it has one, else the
    /// local one. A store that cannot be opened fails the command that needs
    /// it, with its own error, right after.
    pub fn now(&self) -> fleetgate_core::Timestamp {
        let _ = self.store();
        match self.opened.get() {
            Some((_, clock)) => clock.now(),
            None => self.clock.now(),
        }
    }

    /// The decision clock as a handle (for the gateway's threads).
    pub fn decision_clock(&self) -> anyhow::Result<Arc<dyn Clock>> {
        self.store()?;
        Ok(self.opened.get().map_or_else(|| self.clock.clone(), |(_, c)| c.clone()))
    }
}
