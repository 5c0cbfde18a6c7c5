//! The tokio shell around [`SupervisionPolicy`]: runs tasks, reads the clock,
//! arms one timer, publishes events.
//!
//! The shell decides nothing. It turns the policy's [`Action`]s into effects
//! (spawn a run, signal a stop, publish) and feeds back what happens (a run
//! ended, a deadline passed, a cancel was asked for), always under one lock,
//! so events are published in the order the policy decided them. Time is
//! tokio's clock measured from the supervisor's creation, so tests on a paused
//! clock drive the real shell on simulated time.
//!
//! Each run is a tokio task with a watcher that awaits its `JoinHandle`: a
//! panic arrives there as a `JoinError` and counts as a failure; an abort
//! arrives as a cancellation. A single driver task sleeps until
//! [`SupervisionPolicy::poll_timeout`] and is woken whenever the schedule
//! changes; it holds only a weak reference, so dropping the last
//! [`Supervisor`] handle aborts every run and the driver.

use crate::config::SupervisionSettings;
use crate::events::EventBus;
use crate::policy::{Action, Exit, Incarnation, SpawnError, SupervisionPolicy, TaskView};
use std::collections::hash_map::RandomState;
use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::future::Future;
use std::hash::BuildHasher;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::time::Duration;
use tokio::runtime::Handle;
use tokio::sync::Notify;
use tokio::task::{AbortHandle, JoinError, JoinHandle};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Told to a run when its supervisor wants it to stop.
///
/// A run that watches it can stop cleanly (a child process is sent SIGTERM
/// first); a run that ignores it is aborted once the stop grace has passed.
/// Whatever a stopped run returns, it is not counted as a crash.
#[derive(Clone, Debug)]
pub struct StopSignal(CancellationToken);

impl StopSignal {
    /// Completes once a stop has been asked for (at once if it already was).
    pub async fn stopped(&self) {
        self.0.cancelled().await;
    }

    /// Whether a stop has been asked for.
    pub fn is_stopped(&self) -> bool {
        self.0.is_cancelled()
    }

    /// A signal that is never raised, for running a task outside a
    /// supervisor.
    pub fn never() -> Self {
        Self(CancellationToken::new())
    }
}

/// A run's error as the supervisor shows it (`{:#}`): runs fail with any `Display` error,
/// erased here to the text the policy records and the bus publishes.
struct RunFailed(String);

type RunFuture = Pin<Box<dyn Future<Output = Result<(), RunFailed>> + Send>>;

#[derive(Clone)]
struct Factory {
    make: Arc<dyn Fn(StopSignal) -> RunFuture + Send + Sync>,
    /// Whether runs watch their [`StopSignal`]. Those that do not are
    /// stopped by dropping them (Rust's own cancellation) at once, instead of
    /// waiting out a grace they cannot use.
    graceful: bool,
}

/// What [`Supervisor::cancel_flow`] and [`Supervisor::cancel_all`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CancelReport {
    /// Runs that ended within the stop grace (a run of [`Supervisor::spawn`]
    /// is dropped at once, and counts here).
    pub stopped: Vec<String>,
    /// Runs aborted after the stop grace ran out.
    pub forced: Vec<String>,
    /// Runs that had not ended even after the abort and a second grace (a
    /// task blocking its thread). They remain listed as cancelling.
    pub unresponsive: Vec<String>,
}

/// One task as seen from outside, with times on tokio's clock.
pub type TaskSnapshot = TaskView<Instant>;

/// One flow as seen from outside.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowSnapshot {
    /// The flow's name.
    pub flow: String,
    /// How many times it has been cancelled.
    pub generation: u64,
    /// Its quarantine, while one holds.
    pub quarantine: Option<QuarantineSnapshot>,
}

/// A quarantine that holds.
#[derive(Clone, Debug, PartialEq)]
pub struct QuarantineSnapshot {
    /// The task whose failures spent the budget.
    pub task: String,
    /// When the quarantine expires and the flow's tasks run again.
    pub until: Instant,
    /// How long that is from the moment of the snapshot.
    pub retry_in: Duration,
}

/// Every task and flow at one moment.
#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot {
    /// Tasks by name.
    pub tasks: Vec<TaskSnapshot>,
    /// Flows by name.
    pub flows: Vec<FlowSnapshot>,
}

/// Runs restartable tasks under a [`SupervisionPolicy`]. Cloning gives
/// another handle on the same supervisor; dropping the last one aborts every
/// run.
#[derive(Clone)]
pub struct Supervisor {
    shared: Arc<Shared>,
}

struct Shared {
    inner: Mutex<Inner>,
    bus: EventBus,
    epoch: Instant,
    runtime: Handle,
    wake: Arc<Notify>,
    me: Weak<Shared>,
    driver: OnceLock<AbortHandle>,
    stop_grace: Duration,
}

struct Inner {
    policy: SupervisionPolicy,
    factories: HashMap<String, Factory>,
    runs: HashMap<Incarnation, Run>,
}

struct Run {
    graceful: bool,
    stop: CancellationToken,
    abort: AbortHandle,
    /// Cancelled by the run's watcher once the policy has heard of its end.
    done: CancellationToken,
}

struct Stopping {
    task: String,
    abort: AbortHandle,
    done: CancellationToken,
}

impl fmt::Debug for Supervisor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.shared.lock();
        f.debug_struct("Supervisor")
            .field("tasks", &inner.policy.tasks().len())
            .field("running", &inner.runs.len())
            .field("quarantined", &inner.policy.quarantined())
            .finish_non_exhaustive()
    }
}

impl Supervisor {
    /// A supervisor publishing on `bus`, with jitter seeded at random.
    ///
    /// # Panics
    /// Outside a tokio runtime (it spawns its timer task on the current one).
    pub fn new(settings: SupervisionSettings, bus: EventBus) -> Self {
        let seed = RandomState::new().hash_one(0x000F_1EE7_u64);
        Self::with_seed(settings, bus, seed)
    }

    /// A supervisor whose jitter replays from `jitter_seed`.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn with_seed(settings: SupervisionSettings, bus: EventBus, jitter_seed: u64) -> Self {
        let runtime = Handle::current();
        let wake = Arc::new(Notify::new());
        let stop_grace = settings.stop_grace();
        let shared = Arc::new_cyclic(|me| Shared {
            inner: Mutex::new(Inner {
                policy: SupervisionPolicy::new(settings, jitter_seed),
                factories: HashMap::new(),
                runs: HashMap::new(),
            }),
            bus,
            epoch: Instant::now(),
            runtime: runtime.clone(),
            wake: wake.clone(),
            me: me.clone(),
            driver: OnceLock::new(),
            stop_grace,
        });
        let driver = runtime.spawn(drive(Arc::downgrade(&shared), wake));
        let _ = shared.driver.set(driver.abort_handle());
        Self { shared }
    }

    /// The settings the supervisor runs on.
    pub fn settings(&self) -> SupervisionSettings {
        self.shared.lock().policy.settings().clone()
    }

    /// The bus the supervisor publishes on.
    pub fn bus(&self) -> &EventBus {
        &self.shared.bus
    }

    /// Supervise `factory` as task `task` of `flow`: call it for each run;
    /// `Ok(())` finishes the task, an error (shown with `{:#}`) or a panic is
    /// a failure. It starts at once unless its flow is quarantined. When its
    /// flow is cancelled, the run is dropped at once (Rust's cancellation).
    pub fn spawn<F, Fut, E>(&self, task: &str, flow: &str, factory: F) -> Result<(), SpawnError>
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: fmt::Display,
    {
        self.insert(task, flow, make_factory(move |_stop| factory(), false))
    }

    /// As [`spawn`](Self::spawn), for a task that watches its [`StopSignal`]
    /// to stop cleanly when its flow is cancelled.
    pub fn spawn_with_stop<F, Fut, E>(&self, task: &str, flow: &str, factory: F) -> Result<(), SpawnError>
    where
        F: Fn(StopSignal) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: fmt::Display,
    {
        self.insert(task, flow, make_factory(factory, true))
    }

    fn insert(&self, task: &str, flow: &str, factory: Factory) -> Result<(), SpawnError> {
        let shared = &self.shared;
        let mut inner = shared.lock();
        let actions = inner.policy.spawn(task, flow, shared.now())?;
        inner.factories.insert(task.to_owned(), factory);
        shared.execute(&mut inner, actions);
        drop(inner);
        shared.wake.notify_one();
        Ok(())
    }

    /// Cancel `flow`: stop its runs (each gets the stop grace, then is
    /// aborted), forget its tasks and their failures, lift its quarantine.
    /// Other flows are not touched. Returns once every run has ended, or the
    /// bounded waits ran out.
    pub async fn cancel_flow(&self, flow: &str) -> CancelReport {
        let stopping = {
            let shared = &self.shared;
            let mut inner = shared.lock();
            let actions = inner.policy.cancel_flow(flow, shared.now());
            shared.execute(&mut inner, actions)
        };
        self.shared.wake.notify_one();
        self.shared.await_stops(stopping).await
    }

    /// Cancel every flow; the supervisor stays usable. Idempotent: a second
    /// call finds nothing to do. Bounded like [`cancel_flow`](Self::cancel_flow):
    /// graceful for the stop grace, then forced.
    pub async fn cancel_all(&self) -> CancelReport {
        let stopping = {
            let shared = &self.shared;
            let mut inner = shared.lock();
            let actions = inner.policy.cancel_all(shared.now());
            shared.execute(&mut inner, actions)
        };
        self.shared.wake.notify_one();
        self.shared.await_stops(stopping).await
    }

    /// The flows whose quarantine holds.
    pub fn quarantined(&self) -> BTreeSet<String> {
        self.shared.lock().policy.quarantined()
    }

    /// Every task and flow, now.
    pub fn snapshot(&self) -> Snapshot {
        let shared = &self.shared;
        let inner = shared.lock();
        let now = Instant::now();
        Snapshot {
            tasks: inner.policy.tasks().into_iter().map(|t| shared.task_snapshot(t)).collect(),
            flows: inner.policy.flows().into_iter().map(|f| shared.flow_snapshot(f, now)).collect(),
        }
    }

    /// One task, now.
    pub fn task(&self, task: &str) -> Option<TaskSnapshot> {
        let inner = self.shared.lock();
        inner.policy.task(task).map(|t| self.shared.task_snapshot(t))
    }

    /// One flow, now.
    pub fn flow(&self, flow: &str) -> Option<FlowSnapshot> {
        let inner = self.shared.lock();
        inner.policy.flow(flow).map(|f| self.shared.flow_snapshot(f, Instant::now()))
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // The policy panics only on a broken invariant; the state is still
        // the best account there is, so keep serving it.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn now(&self) -> Duration {
        Instant::now().saturating_duration_since(self.epoch)
    }

    fn at(&self, offset: Duration) -> Instant {
        self.epoch + offset
    }

    /// Carry out `actions` in order; returns the runs asked to stop.
    fn execute(&self, inner: &mut Inner, actions: Vec<Action>) -> Vec<Stopping> {
        let mut stopping = Vec::new();
        for action in actions {
            match action {
                Action::Publish(event) => self.bus.publish(event),
                Action::Start { task, incarnation } => self.start(inner, task, incarnation),
                Action::Stop { task, incarnation } => {
                    if let Some(run) = inner.runs.get(&incarnation) {
                        run.stop.cancel();
                        if !run.graceful {
                            run.abort.abort();
                        }
                        stopping.push(Stopping { task, abort: run.abort.clone(), done: run.done.clone() });
                    }
                }
                Action::Forget { task } => {
                    inner.factories.remove(&task);
                }
            }
        }
        stopping
    }

    fn start(&self, inner: &mut Inner, task: String, incarnation: Incarnation) {
        let factory = inner
            .factories
            .get(&task)
            .cloned()
            .expect("a started task has a factory: spawn stores it, only Forget removes it");
        let stop = CancellationToken::new();
        let signal = StopSignal(stop.clone());
        // The factory is called inside the run's task, so a panic while
        // building the future is a failure of the run like any other.
        let graceful = factory.graceful;
        let handle = self.runtime.spawn(async move { (factory.make)(signal).await });
        let done = CancellationToken::new();
        inner.runs.insert(incarnation, Run { graceful, stop, abort: handle.abort_handle(), done: done.clone() });
        self.runtime.spawn(watch(self.me.clone(), task, incarnation, handle, done));
    }

    fn report(&self, task: &str, incarnation: Incarnation, exit: Exit) {
        let mut inner = self.lock();
        inner.runs.remove(&incarnation);
        let actions = inner.policy.handle_exit(task, incarnation, exit, self.now());
        self.execute(&mut inner, actions);
        drop(inner);
        self.wake.notify_one();
    }

    /// Act on due deadlines; return when to come back.
    fn tick(&self) -> Option<Instant> {
        let mut inner = self.lock();
        let actions = inner.policy.handle_timeout(self.now());
        self.execute(&mut inner, actions);
        inner.policy.poll_timeout().map(|t| self.at(t))
    }

    async fn await_stops(&self, stopping: Vec<Stopping>) -> CancelReport {
        let mut report = CancelReport::default();
        let deadline = Instant::now() + self.stop_grace;
        let mut late = Vec::new();
        for s in stopping {
            if tokio::time::timeout_at(deadline, s.done.cancelled()).await.is_ok() {
                report.stopped.push(s.task);
            } else {
                s.abort.abort();
                late.push(s);
            }
        }
        // An aborted task ends at its next poll; one that blocks its thread
        // never does, and the wait for it is bounded too.
        let deadline = Instant::now() + self.stop_grace.max(Duration::from_secs(1));
        for s in late {
            if tokio::time::timeout_at(deadline, s.done.cancelled()).await.is_ok() {
                report.forced.push(s.task);
            } else {
                report.unresponsive.push(s.task);
            }
        }
        report
    }

    fn task_snapshot(&self, t: TaskView) -> TaskSnapshot {
        t.on_clock(|at| self.at(at))
    }

    fn flow_snapshot(&self, f: crate::policy::FlowView, now: Instant) -> FlowSnapshot {
        FlowSnapshot {
            flow: f.flow,
            generation: f.generation,
            quarantine: f.quarantine.map(|q| {
                let until = self.at(q.until);
                QuarantineSnapshot { task: q.task, until, retry_in: until.saturating_duration_since(now) }
            }),
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        if let Some(driver) = self.driver.get() {
            driver.abort();
        }
        let inner = self.inner.get_mut().unwrap_or_else(PoisonError::into_inner);
        for run in inner.runs.values() {
            run.stop.cancel();
            run.abort.abort();
        }
    }
}

/// The timer: sleep until the policy's next deadline, or until woken because
/// the schedule changed; then let the policy act on what is due.
async fn drive(shared: Weak<Shared>, wake: Arc<Notify>) {
    loop {
        // Upgrade only for the tick, never across the sleep, so the driver
        // does not keep a dropped supervisor alive.
        let deadline = match shared.upgrade() {
            Some(shared) => shared.tick(),
            None => return,
        };
        match deadline {
            Some(at) => {
                tokio::select! {
                    () = tokio::time::sleep_until(at) => {}
                    () = wake.notified() => {}
                }
            }
            None => wake.notified().await,
        }
    }
}

/// Await one run and report how it ended.
async fn watch(
    shared: Weak<Shared>,
    task: String,
    incarnation: Incarnation,
    handle: JoinHandle<Result<(), RunFailed>>,
    done: CancellationToken,
) {
    // Released on every path, after the report: a canceller waiting on it
    // sees the policy already updated.
    let _done = done.drop_guard();
    let exit = match handle.await {
        Ok(Ok(())) => Exit::Finished,
        Ok(Err(RunFailed(error))) => Exit::Failed(error),
        Err(error) if error.is_panic() => Exit::Failed(panic_message(error)),
        Err(_) => Exit::Cancelled,
    };
    if let Some(shared) = shared.upgrade() {
        shared.report(&task, incarnation, exit);
    }
}

fn make_factory<F, Fut, E>(factory: F, graceful: bool) -> Factory
where
    F: Fn(StopSignal) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: fmt::Display,
{
    Factory {
        make: Arc::new(move |stop| {
            let run = factory(stop);
            Box::pin(async move { run.await.map_err(|e| RunFailed(format!("{e:#}"))) })
        }),
        graceful,
    }
}

fn panic_message(error: JoinError) -> String {
    let payload = error.into_panic();
    let message =
        payload.downcast_ref::<&str>().map(|s| (*s).to_owned()).or_else(|| payload.downcast_ref::<String>().cloned());
    match message {
        Some(message) => format!("panicked: {message}"),
        None => "panicked".to_owned(),
    }
}
