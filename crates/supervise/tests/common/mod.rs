//! Helpers shared by the shell's integration tests: settings without jitter,
//! bounded polling, and event queries.
// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use fleetgate_supervise::{Event, EventBus, SupervisionConfig, SupervisionSettings, Supervisor, TaskState};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

pub const BUDGET: u32 = 5;

/// The shipped defaults, real lengths included, minus the jitter so that
/// delays can be asserted exactly.
pub fn config() -> SupervisionConfig {
    SupervisionConfig { jitter_ratio: 0.0, ..SupervisionConfig::default() }
}

pub fn settings() -> SupervisionSettings {
    config().validate().unwrap()
}

pub fn supervisor() -> Supervisor {
    Supervisor::new(settings(), EventBus::default())
}

/// Poll `cond` every 10 ms (of tokio's clock: simulated under a paused clock)
/// for at most `limit`; panic naming `what` if it never holds.
pub async fn within(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let step = Duration::from_millis(10);
    let mut waited = Duration::ZERO;
    while !cond() {
        assert!(waited < limit, "timed out after {limit:?} waiting for {what}");
        tokio::time::sleep(step).await;
        waited += step;
    }
}

/// [`within`] ten seconds: longer than the whole default backoff sequence
/// (3.6 s), far shorter than the first quarantine (30 s), so a quarantine
/// reached while polling still holds when the poll returns.
pub async fn eventually(what: &str, cond: impl FnMut() -> bool) {
    within(Duration::from_secs(10), what, cond).await;
}

pub fn kinds(bus: &EventBus) -> Vec<&'static str> {
    bus.recent().iter().map(Event::kind).collect()
}

pub fn count(bus: &EventBus, kind: &str) -> usize {
    bus.recent().iter().filter(|e| e.kind() == kind).count()
}

pub fn state(supervisor: &Supervisor, task: &str) -> Option<TaskState> {
    supervisor.task(task).map(|t| t.state)
}

/// A shared counter of runs.
#[derive(Clone, Default)]
pub struct Counter(Arc<AtomicU32>);

impl Counter {
    pub fn bump(&self) -> u32 {
        self.0.fetch_add(1, Ordering::SeqCst) + 1
    }

    pub fn get(&self) -> u32 {
        self.0.load(Ordering::SeqCst)
    }
}

/// Proof that a run's future is still alive: held by the run, lowered when
/// the future is dropped (finished, or cancelled).
#[derive(Clone, Default)]
pub struct Alive(Arc<AtomicBool>);

pub struct AliveGuard(Arc<AtomicBool>);

impl Alive {
    pub fn hold(&self) -> AliveGuard {
        self.0.store(true, Ordering::SeqCst);
        AliveGuard(self.0.clone())
    }

    pub fn is_alive(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

impl Drop for AliveGuard {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}
