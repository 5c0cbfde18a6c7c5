//! The demo fleet: real `fleetgate serve` gateways over the forge stand-in, each driven by
//! this process as its MCP client (rmcp). `fleetgate demo` tells its second and third acts
//! with it — the pull-request workflow pinned to exact heads, then an operator's approval of
//! one exact merge — and `examples/workflow_bench.rs` times the workflow's calls on it.
//!
//! The crate starts processes and speaks MCP; it judges nothing. Every verdict it shows is a
//! gateway's, every answer the forge's, every operator step the real `fleetgate` CLI's.

mod acts;
mod flow;

pub use acts::run;
pub use flow::Flow;

/// What a process the demo starts inherits of the demo's own environment: only what a program
/// needs to run (`fleetgate_core::env::DOWNSTREAM_BASE_ENV`). The operator's fleet keys — a
/// client identity, a cohort, an unsupported `GITEA_*` knob, a token, a store location —
/// would otherwise change what the demo's gateways show. Its XDG configuration and state
/// directories are the demo's own `dir`'s (issue 54): every process is given its store and
/// roster, and none could read the operator's `fleet.toml` or default store even by mistake.
/// Each start adds the keys it sets.
pub fn base_env(dir: &std::path::Path) -> Vec<(String, String)> {
    let env = fleetgate_host::env::capture();
    // The demo's rosters keep the default prefix.
    let basics = fleetgate_core::env::downstream_env(&env, "GITEA_", &[], &[]);
    let own = ["XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"];
    let mut out: Vec<(String, String)> =
        basics.into_iter().filter(|(k, _)| !own.contains(k)).map(|(k, v)| (k.to_owned(), v.to_owned())).collect();
    for (key, sub) in own.iter().zip(["config", "state", "data", "cache"]) {
        out.push(((*key).to_owned(), dir.join("xdg").join(sub).display().to_string()));
    }
    out
}

/// What went wrong while telling the demo (a process that did not start, a call that got no
/// answer); a refusal by the gate is a step of the story, never an error.
#[derive(Debug)]
pub struct Error(String);

impl Error {
    fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

/// The demo's result.
pub type Result<T> = std::result::Result<T, Error>;

/// `what` failed, because of `error`.
trait Context<T> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T>;
}

impl<T, E: std::fmt::Display> Context<T> for std::result::Result<T, E> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| Error(format!("{}: {e}", what())))
    }
}
