//! The heartbeat supervisor: one per attached worker, renewing its lease in a loop that
//! runs as a task of the supervision crate's [`Supervisor`] (the gateway's own
//! loops are supervised), so thousands of workers cost tasks, not OS threads.
//!
//! The decisions are sans-I/O cores: [`fleetgate_core::heartbeat::BeatLedger`] (what a
//! result does, when to stop for good) and [`fleetgate_core::interval::Cadence`] (when the
//! next beat is due). This is the thin shell: it reads the clock, runs each renewal on the
//! blocking pool (no async worker and no MCP I/O loop ever waits on a store write), and
//! halts on a cancellation token, so a `stop` is prompt and never waits out an interval.
//!
//! Sleep-aware: the loop wakes at least every [`SUSPEND_CHECK`] and reads the clock pair
//! (`CLOCK_BOOTTIME` against `CLOCK_MONOTONIC`, through an injectable
//! [`ClockPairSource`]); when [`SuspendWatch`] says the machine slept, it beats at once
//! rather than when the monotonic schedule (which stood still while asleep) comes due, and
//! the runtime context shows `resumed after N s of suspend`. The beat is the same fenced
//! renewal as any other: a worker whose lease was taken over while it slept is refused and
//! stops, never extended.

use crate::error::TaskFailed;
use crate::metrics::GatewayMetrics;
use fleetgate_core::heartbeat::{BeatAttempt, BeatLedger, BeatReport};
use fleetgate_core::interval::{Cadence, heartbeat_interval_for};
use fleetgate_core::suspend::{CatchUp, ClockPairSource, ResumedAfterSuspend, SUSPEND_THRESHOLD, SuspendWatch};
use fleetgate_core::worker::HeartbeatRequest;
use fleetgate_core::{Clock, Timestamp};
use fleetgate_store::Store;
use fleetgate_supervise::Supervisor;
use serde::Serialize;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The longest the loop sleeps before it reads the clock pair again: a wake-up from
/// suspend is noticed, and beaten on, within this long.
pub const SUSPEND_CHECK: Duration = Duration::from_secs(1);

/// Everything a supervisor presents on each renewal.
#[derive(Clone, Debug)]
pub struct HeartbeatParams {
    /// Whose lease.
    pub worker_identity: String,
    /// The epoch the registration returned.
    pub fencing_epoch: i64,
    /// Expected session (fenced on drift).
    pub session_id: Option<String>,
    /// Expected generation.
    pub generation_id: Option<String>,
    /// Expected client (compared normalised).
    pub client_name: Option<String>,
    /// Expected pid.
    pub pid: Option<i64>,
    /// Lease length.
    pub ttl_seconds: f64,
    /// Interval override (the env key's raw value, or an explicit number);
    /// the policy caps it at ttl/2 and falls back to ttl/3.
    pub interval_override: Option<String>,
}

/// What `start` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct StartOutcome {
    /// The loop is running after this call.
    pub started: bool,
    /// It was running before this call.
    pub already_running: bool,
}

/// The supervisor's state as the runtime context shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HeartbeatStatus {
    /// A supervisor is attached.
    pub supervised: bool,
    /// `start` succeeded at some point.
    pub started: bool,
    /// The loop is running now.
    pub running: bool,
    /// Attempts that reached the store.
    pub beats_attempted: u64,
    /// Accepted renewals.
    pub beats_renewed: u64,
    /// Failures that did not stop beating.
    pub transient_failures: u64,
    /// Why beating stopped, if it did.
    pub stopped_reason: Option<String>,
    /// Whose lease.
    pub worker_identity: Option<String>,
    /// Lease length.
    pub heartbeat_ttl_seconds: Option<f64>,
    /// Interval between beats.
    pub heartbeat_interval_seconds: Option<f64>,
    /// Last accepted renewal.
    pub last_renewed_at: Option<Timestamp>,
    /// Suspends of the machine the loop woke from (and beat at once after).
    pub suspends_detected: u64,
    /// The last of them: how long, and when the loop noticed the wake-up.
    pub last_suspend: Option<ResumedAfterSuspend>,
    /// Why the status is degraded or unsupervised; empty otherwise.
    pub reasons: Vec<String>,
}

impl HeartbeatStatus {
    /// No supervisor is attached to this process.
    pub fn unsupervised(reason: impl Into<String>) -> Self {
        Self::degraded(false, reason)
    }

    fn degraded(supervised: bool, reason: impl Into<String>) -> Self {
        Self {
            supervised,
            started: false,
            running: false,
            beats_attempted: 0,
            beats_renewed: 0,
            transient_failures: 0,
            stopped_reason: None,
            worker_identity: None,
            heartbeat_ttl_seconds: None,
            heartbeat_interval_seconds: None,
            last_renewed_at: None,
            suspends_detected: 0,
            last_suspend: None,
            reasons: vec![reason.into()],
        }
    }
}

/// Anything whose heartbeat status can be shown (the supervisor, or a stand-in).
pub trait HeartbeatStatusSource {
    /// The status, or why it cannot be read.
    fn status(&self) -> Result<HeartbeatStatus, StatusUnread>;
}

/// Why a heartbeat status cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StatusUnread {
    /// A panic while the state was held left it unreadable.
    #[error("the heartbeat state was poisoned by a panic")]
    Poisoned,
}

/// The runtime context's `worker_heartbeat`: distinguishes "no supervisor"
/// from "supervisor with no beats yet", and degrades to `running: false` with
/// a reason when the status itself cannot be read, instead of failing.
pub fn worker_heartbeat_status(source: Option<&dyn HeartbeatStatusSource>) -> HeartbeatStatus {
    match source {
        None => HeartbeatStatus::unsupervised("no heartbeat supervisor is attached to this process"),
        Some(src) => src
            .status()
            .unwrap_or_else(|why| HeartbeatStatus::degraded(true, format!("heartbeat status unavailable: {why}"))),
    }
}

#[derive(Debug, Default)]
struct State {
    ledger: BeatLedger,
    started: bool,
    running: bool,
    last_renewed_at: Option<Timestamp>,
    suspends_detected: u64,
    last_suspend: Option<ResumedAfterSuspend>,
}

struct Shared {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    /// `CLOCK_BOOTTIME` and `CLOCK_MONOTONIC`, to notice a suspend.
    clocks: Arc<dyn ClockPairSource>,
    /// The longest sleep between two readings of `clocks`.
    suspend_check: Duration,
    request: HeartbeatRequest,
    ttl_seconds: f64,
    interval: Duration,
    state: Mutex<State>,
    /// Signalled when the loop exits, so `stop` can wait for it.
    exited: Condvar,
    /// Raised by `stop` and by a terminal refusal: the loop ends at its next await.
    halt: CancellationToken,
    /// Where renewals and refusals are counted (a gateway's `/metrics`), when anywhere.
    metrics: OnceLock<GatewayMetrics>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Record one answer (or failure) of the store; a terminal one halts the loop.
    fn record(&self, attempt: BeatAttempt, now: Timestamp) -> BeatReport {
        if let (Some(metrics), BeatAttempt::Answered(outcome)) = (self.metrics.get(), &attempt) {
            if outcome.renewed {
                metrics.renewals.inc();
            } else if let Some(kind) = outcome.blocker_kind {
                metrics.refused(kind.as_str());
            }
        }
        let mut s = self.lock();
        let report = s.ledger.record(attempt);
        if report.renewed {
            s.last_renewed_at = Some(now);
        }
        if !s.ledger.may_beat() {
            self.halt.cancel();
        }
        report
    }

    fn beat_once(&self) -> BeatReport {
        if let Some(skipped) = {
            let s = self.lock();
            (!s.ledger.may_beat()).then(|| s.ledger.skipped())
        } {
            return skipped;
        }
        let now = self.clock.now();
        self.record(attempt(self.store.heartbeat(&self.request, now)), now)
    }

    /// Note a suspend of `slept` noticed at `now`: counted, shown, logged.
    fn resumed(&self, slept: Duration, now: Timestamp) {
        let report = ResumedAfterSuspend::new(slept, now);
        tracing::warn!(
            worker = %self.request.worker_identity,
            resumed_after_suspend_seconds = report.resumed_after_suspend_seconds,
            "{}; renewing the lease at once",
            report.message
        );
        let mut s = self.lock();
        s.suspends_detected += 1;
        s.last_suspend = Some(report);
    }

    /// The loop: a [`Cadence`] says when; it also wakes every `suspend_check` to read
    /// the clock pair, and beats at once after a suspend, retrying a transient failure
    /// sooner than the schedule ([`CatchUp`]) until a renewal is answered. The renewal
    /// itself runs on the blocking pool, so no async worker ever waits on a store write.
    /// Ends when halted.
    async fn run(self: Arc<Self>, epoch: tokio::time::Instant) -> Result<(), TaskFailed> {
        let mut cadence = Cadence::new(self.interval, epoch.elapsed());
        let mut watch = SuspendWatch::new(self.clocks.read(), SUSPEND_THRESHOLD);
        let mut catch_up = None;
        loop {
            let due = (epoch + cadence.poll_timeout()).min(tokio::time::Instant::now() + self.suspend_check);
            tokio::select! {
                () = self.halt.cancelled() => return Ok(()),
                () = tokio::time::sleep_until(due) => {}
            }
            if let Some(slept) = watch.observe(self.clocks.read()) {
                self.resumed(slept, self.clock.now());
                cadence.fire(epoch.elapsed());
                catch_up = Some(CatchUp::new(self.suspend_check, self.interval));
            } else if !cadence.handle_timeout(epoch.elapsed()) {
                continue;
            }
            let shared = Arc::clone(&self);
            let now = shared.clock.now();
            // A renewal is no request's part: its own root span, so the store's span inside
            // it says whose renewal it was.
            let span = tracing::info_span!(parent: None, "heartbeat", worker = %shared.request.worker_identity);
            let answered =
                tokio::task::spawn_blocking(move || span.in_scope(|| shared.store.heartbeat(&shared.request, now)))
                    .await
                    .map_err(|e| TaskFailed::new("renewal", e))?;
            let report = self.record(attempt(answered), now);
            match catch_up.as_mut() {
                Some(retry) if report.transient => cadence.retry_after(epoch.elapsed(), retry.next_delay()),
                _ => catch_up = None,
            }
        }
    }

    fn exited(&self) {
        self.lock().running = false;
        self.exited.notify_all();
    }
}

/// Only a refusal is terminal; a store that cannot answer may answer later, and
/// meanwhile the lease expires on its own.
fn attempt(answered: Result<fleetgate_core::worker::HeartbeatOutcome, fleetgate_store::StoreError>) -> BeatAttempt {
    match answered {
        Ok(outcome) => BeatAttempt::Answered(outcome),
        Err(e) => BeatAttempt::Transient(e.to_string()),
    }
}

/// Renews one worker's lease every interval until stopped or fenced.
#[derive(Clone)]
pub struct WorkerHeartbeat {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for WorkerHeartbeat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerHeartbeat")
            .field("worker_identity", &self.shared.request.worker_identity)
            .field("interval", &self.shared.interval)
            .finish_non_exhaustive()
    }
}

impl WorkerHeartbeat {
    /// A supervisor for one registration. Not started.
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>, params: HeartbeatParams) -> Self {
        Self::with_clock_pair(store, clock, Arc::new(fleetgate_host::clock::SystemClockPair), SUSPEND_CHECK, params)
    }

    /// A supervisor that notices suspends through `clocks`, read at least every
    /// `suspend_check` (a test's clock pair jumps; the system's is [`new`](Self::new)'s).
    pub fn with_clock_pair(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        clocks: Arc<dyn ClockPairSource>,
        suspend_check: Duration,
        params: HeartbeatParams,
    ) -> Self {
        let interval_seconds = heartbeat_interval_for(params.ttl_seconds, params.interval_override.as_deref());
        let request = HeartbeatRequest {
            worker_identity: params.worker_identity,
            fencing_epoch: params.fencing_epoch,
            expected_session_id: params.session_id,
            expected_generation_id: params.generation_id,
            expected_client_name: params.client_name,
            expected_pid: params.pid,
        };
        Self {
            shared: Arc::new(Shared {
                store,
                clock,
                clocks,
                suspend_check,
                request,
                ttl_seconds: params.ttl_seconds,
                interval: Duration::from_secs_f64(interval_seconds),
                state: Mutex::new(State::default()),
                exited: Condvar::new(),
                halt: CancellationToken::new(),
                metrics: OnceLock::new(),
            }),
        }
    }

    /// Count this worker's renewals and refusals in `metrics` (before [`start`](Self::start)).
    pub fn with_metrics(self, metrics: GatewayMetrics) -> Self {
        let _ = self.shared.metrics.set(metrics);
        self
    }

    /// Seconds between beats.
    pub fn interval_seconds(&self) -> f64 {
        self.shared.interval.as_secs_f64()
    }

    /// Why beating stopped, if it did.
    pub fn stopped_reason(&self) -> Option<String> {
        self.shared.lock().ledger.stopped_reason.clone()
    }

    /// One renewal now. After any stop it does not reach the store.
    pub fn beat_once(&self) -> BeatReport {
        self.shared.beat_once()
    }

    /// Start the loop as a task of `supervisor` (its own task and flow, `heartbeat:ID`:
    /// a loop that keeps failing is restarted with backoff, then quarantined, without
    /// touching any other worker's); idempotent. Refuses after any stop: a stopped or
    /// fenced worker never beats its way back.
    pub fn start(&self, supervisor: &Supervisor) -> StartOutcome {
        let mut s = self.shared.lock();
        if !s.ledger.may_beat() {
            return StartOutcome { started: false, already_running: false };
        }
        if s.running {
            return StartOutcome { started: true, already_running: true };
        }
        let name = self.task_name();
        let shared = Arc::clone(&self.shared);
        let epoch = tokio::time::Instant::now();
        let spawned = supervisor.spawn(&name, &name, move || {
            let shared = Arc::clone(&shared);
            async move {
                let ended = Arc::clone(&shared).run(epoch).await;
                if ended.is_ok() {
                    shared.exited();
                }
                ended
            }
        });
        match spawned {
            Ok(()) => {
                s.started = true;
                s.running = true;
                StartOutcome { started: true, already_running: false }
            }
            Err(e) => {
                s.ledger.stop(format!("cannot start the heartbeat loop: {e}"));
                StartOutcome { started: false, already_running: false }
            }
        }
    }

    /// The supervisor task (and flow) of this worker's loop.
    pub fn task_name(&self) -> String {
        format!("heartbeat:{}", self.shared.request.worker_identity)
    }

    /// Stop for good; idempotent, the first reason is kept. Returns once the loop has
    /// exited (bounded: a renewal in flight may finish first). Call it off the async
    /// workers (it waits).
    pub fn stop(&self, reason: &str) {
        let mut s = self.shared.lock();
        s.ledger.stop(reason);
        self.shared.halt.cancel();
        let (mut s, _) = self
            .shared
            .exited
            .wait_timeout_while(s, Duration::from_secs(35), |s| s.running)
            .unwrap_or_else(|e| e.into_inner());
        s.running = false;
    }

    /// The current status.
    pub fn status(&self) -> HeartbeatStatus {
        let s = self.shared.lock();
        HeartbeatStatus {
            supervised: true,
            started: s.started,
            running: s.running,
            beats_attempted: s.ledger.beats_attempted,
            beats_renewed: s.ledger.beats_renewed,
            transient_failures: s.ledger.transient_failures,
            stopped_reason: s.ledger.stopped_reason.clone(),
            worker_identity: Some(self.shared.request.worker_identity.clone()),
            heartbeat_ttl_seconds: Some(self.shared.ttl_seconds),
            heartbeat_interval_seconds: Some(self.interval_seconds()),
            last_renewed_at: s.last_renewed_at,
            suspends_detected: s.suspends_detected,
            last_suspend: s.last_suspend.clone(),
            reasons: Vec::new(),
        }
    }
}

impl HeartbeatStatusSource for WorkerHeartbeat {
    fn status(&self) -> Result<HeartbeatStatus, StatusUnread> {
        if self.shared.state.is_poisoned() {
            return Err(StatusUnread::Poisoned);
        }
        Ok(WorkerHeartbeat::status(self))
    }
}
