//! The heartbeat supervisor: the seed's lifecycle cases on an injected clock,
//! and the real thread on a millisecond interval with bounded polling.

use crate::support::{Attach, Instrumented, TTL, attach, fresh_store, now, wait_until};
use fleetgate_control::gate::assess_provenance;
use fleetgate_control::heartbeat::{
    HeartbeatParams, HeartbeatStatus, HeartbeatStatusSource, StatusUnread, WorkerHeartbeat, worker_heartbeat_status,
};
use fleetgate_core::env::EnvSnapshot;
use fleetgate_core::provenance::Ownership;
use fleetgate_core::suspend::{ClockPair, ClockPairSource, ManualClockPair};
use fleetgate_core::worker::{RegisterOutcome, is_live, worker_identity};
use fleetgate_core::{BlockerKind, Clock, ManualClock};
use fleetgate_store::Store;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

fn params(out: &RegisterOutcome, session: &str, ttl: f64, interval: Option<&str>) -> HeartbeatParams {
    HeartbeatParams {
        worker_identity: out.worker_identity.clone(),
        fencing_epoch: out.fencing_epoch,
        session_id: Some(session.into()),
        generation_id: Some("gen-0001".into()),
        client_name: Some("claude_code".into()),
        pid: Some(4242),
        ttl_seconds: ttl,
        interval_override: interval.map(str::to_owned),
    }
}

fn supervisor(store: Arc<dyn Store>, clock: Arc<ManualClock>, out: &RegisterOutcome) -> WorkerHeartbeat {
    WorkerHeartbeat::new(store, clock, params(out, "sess-0001", TTL, None))
}

/// A runtime and a supervisor on it: the loop runs as a supervised task.
fn loops() -> (tokio::runtime::Runtime, fleetgate_supervise::Supervisor) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let supervisor = runtime.block_on(async {
        fleetgate_supervise::Supervisor::new(
            fleetgate_supervise::SupervisionSettings::default(),
            fleetgate_supervise::EventBus::new(fleetgate_supervise::EventBus::DEFAULT_CAPACITY),
        )
    });
    (runtime, supervisor)
}

fn owned(store: &dyn Store, id: &str, at: fleetgate_core::Timestamp) -> Ownership {
    let env = EnvSnapshot::from_pairs([("GITEA_CLIENT_MANAGED", "1")]);
    assess_provenance(store, id, "gen-0001", &env, "GITEA_", true, at, &|_| true).unwrap().session_ownership
}

#[test]
fn supervised_worker_stays_owned_past_two_full_ttls() {
    let (_d, store) = fresh_store();
    let out = attach(&*store, Attach::default());
    let clock = Arc::new(ManualClock::new(now()));
    let sup = supervisor(store.clone(), clock.clone(), &out);
    let interval = sup.interval_seconds();
    assert_eq!(interval, 300.0);
    let mut elapsed = 0.0;
    while elapsed < TTL * 2.0 + interval {
        clock.advance(interval as i64);
        elapsed += interval;
        let r = sup.beat_once();
        assert!(r.renewed, "{:?}", r.reasons);
        assert_eq!(owned(&*store, &out.worker_identity, clock.now()), Ownership::Owned, "lost at {elapsed}s");
    }
    assert!(elapsed > TTL * 2.0);
}

#[test]
fn last_heartbeat_advances_and_diverges_from_started_at() {
    let (_d, store) = fresh_store();
    let out = attach(&*store, Attach::default());
    let clock = Arc::new(ManualClock::new(now()));
    let sup = supervisor(store.clone(), clock.clone(), &out);
    let before = store.get_worker(&out.worker_identity).unwrap().unwrap();
    clock.advance(300);
    assert!(sup.beat_once().renewed);
    let after = store.get_worker(&out.worker_identity).unwrap().unwrap();
    assert_eq!(before.started_at, after.started_at);
    assert_ne!(after.started_at, after.last_heartbeat_at);
    assert!(after.last_heartbeat_at > before.last_heartbeat_at);
}

#[test]
fn repeated_heartbeats_create_no_duplicate_rows() {
    let (_d, store) = fresh_store();
    let out = attach(&*store, Attach::default());
    let clock = Arc::new(ManualClock::new(now()));
    let sup = supervisor(store.clone(), clock.clone(), &out);
    for _ in 0..5 {
        clock.advance(300);
        assert!(sup.beat_once().renewed);
    }
    let rows = store.list_workers().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].ids.worker_identity, out.worker_identity);
    assert_eq!(sup.status().beats_renewed, 5);
}

#[test]
fn fenced_supervisor_stops_permanently() {
    let (_d, store) = fresh_store();
    let mut out = attach(&*store, Attach::default());
    out.fencing_epoch += 1;
    let counted = Instrumented::new(store);
    let sup = supervisor(counted.store(), Arc::new(ManualClock::new(now())), &out);
    let first = sup.beat_once();
    assert!(!first.renewed);
    assert_eq!(first.blocker_kind, Some(BlockerKind::WorkerFenced));
    assert!(sup.stopped_reason().is_some());
    let second = sup.beat_once();
    assert!(!second.renewed && !second.beat_attempted);
    assert_eq!(sup.status().beats_attempted, 1);
    assert_eq!(counted.heartbeats.load(Ordering::SeqCst), 1, "the second beat never reached the store");
    let (_rt, loops) = loops();
    assert!(!sup.start(&loops).started, "a fenced supervisor cannot be restarted");
}

#[test]
fn missing_registration_stops_the_supervisor() {
    let (_d, store) = fresh_store();
    let ghost = RegisterOutcome {
        worker_identity: worker_identity("grok", "sess-gone", now(), 7),
        fencing_epoch: 1,
        client_name: "grok".into(),
        created: false,
        started_at: now(),
        heartbeat_ttl_seconds: TTL,
    };
    let sup = WorkerHeartbeat::new(
        store,
        Arc::new(ManualClock::new(now())),
        HeartbeatParams {
            session_id: None,
            generation_id: None,
            client_name: None,
            pid: None,
            ..params(&ghost, "x", TTL, None)
        },
    );
    assert_eq!(sup.beat_once().blocker_kind, Some(BlockerKind::SessionAttachmentMissing));
    assert!(sup.stopped_reason().unwrap().starts_with("session_attachment_missing"));
}

#[test]
fn stop_ends_the_heartbeat_and_keeps_the_first_reason() {
    let (_d, store) = fresh_store();
    let out = attach(&*store, Attach::default());
    let clock = Arc::new(ManualClock::new(now()));
    let sup = supervisor(store, clock.clone(), &out);
    clock.advance(300);
    assert!(sup.beat_once().renewed);
    sup.stop("orderly shutdown");
    sup.stop("second call");
    assert!(!sup.status().running);
    assert_eq!(sup.stopped_reason().as_deref(), Some("orderly shutdown"));
    clock.advance(300);
    let after = sup.beat_once();
    assert!(!after.renewed && !after.beat_attempted);
}

#[test]
fn stopped_worker_becomes_unowned_once_the_ttl_elapses() {
    let (_d, store) = fresh_store();
    let out = attach(&*store, Attach::default());
    let clock = Arc::new(ManualClock::new(now()));
    let sup = supervisor(store.clone(), clock.clone(), &out);
    clock.advance(300);
    sup.beat_once();
    sup.stop("orderly shutdown");
    let last_beat = clock.now();
    assert_eq!(owned(&*store, &out.worker_identity, clock.now()), Ownership::Owned);
    clock.advance(TTL as i64 + 1);
    let row = store.get_worker(&out.worker_identity).unwrap().unwrap();
    let l = is_live(&row, clock.now(), true);
    assert!(!l.live);
    assert!(l.heartbeat_age_seconds > TTL);
    assert_eq!(owned(&*store, &out.worker_identity, clock.now()), Ownership::Unowned);
    assert!(last_beat < clock.now());
}

#[test]
fn one_worker_expiring_does_not_stale_healthy_workers() {
    let (_d, store) = fresh_store();
    let healthy = attach(&*store, Attach { session: "sess-live", ..Default::default() });
    let abandoned = attach(&*store, Attach { client: "gemini", session: "sess-dead", ..Default::default() });
    let clock = Arc::new(ManualClock::new(now()));
    let sup = WorkerHeartbeat::new(store.clone(), clock.clone(), params(&healthy, "sess-live", TTL, None));
    let mut elapsed = 0.0;
    while elapsed < TTL + 300.0 {
        clock.advance(sup.interval_seconds() as i64);
        elapsed += sup.interval_seconds();
        assert!(sup.beat_once().renewed);
    }
    let live = |id: &str| is_live(&store.get_worker(id).unwrap().unwrap(), clock.now(), true).live;
    assert!(live(&healthy.worker_identity));
    assert!(!live(&abandoned.worker_identity));
}

#[test]
fn transient_failure_is_counted_and_beating_continues() {
    let (_d, store) = fresh_store();
    let out = attach(&*store, Attach::default());
    let flaky = Instrumented::new(store);
    flaky.fail_next.store(1, Ordering::SeqCst);
    let clock = Arc::new(ManualClock::new(now()));
    let sup = supervisor(flaky.store(), clock.clone(), &out);
    clock.advance(300);
    let first = sup.beat_once();
    assert!(!first.renewed && first.transient);
    assert!(sup.stopped_reason().is_none());
    clock.advance(300);
    let second = sup.beat_once();
    assert!(second.renewed, "{:?}", second.reasons);
    let s = sup.status();
    assert_eq!((s.transient_failures, s.beats_renewed), (1, 1));
    assert!(s.supervised);
}

#[test]
fn status_reports_an_unstarted_supervisor_honestly() {
    let (_d, store) = fresh_store();
    let out = attach(&*store, Attach::default());
    let s = supervisor(store, Arc::new(ManualClock::new(now())), &out).status();
    assert!(s.supervised && !s.started && !s.running);
    assert_eq!(s.beats_renewed, 0);
    assert_eq!(s.stopped_reason, None);
}

#[test]
fn runtime_context_distinguishes_no_supervisor_attached_and_degraded() {
    let none = worker_heartbeat_status(None);
    assert!(!none.supervised && !none.running && !none.reasons.is_empty());

    let (_d, store) = fresh_store();
    let out = attach(&*store, Attach::default());
    let sup = supervisor(store, Arc::new(ManualClock::new(now())), &out);
    let s = worker_heartbeat_status(Some(&sup));
    assert!(s.supervised);
    assert_eq!(s.worker_identity.as_deref(), Some(out.worker_identity.as_str()));
    assert_eq!(s.heartbeat_ttl_seconds, Some(TTL));
    assert!(s.heartbeat_interval_seconds.unwrap() < TTL);

    struct Exploding;
    impl HeartbeatStatusSource for Exploding {
        fn status(&self) -> Result<HeartbeatStatus, StatusUnread> {
            Err(StatusUnread::Poisoned)
        }
    }
    let s = worker_heartbeat_status(Some(&Exploding));
    assert!(s.supervised && !s.running);
    assert!(s.reasons[0].contains("poisoned by a panic"), "{:?}", s.reasons);
}

#[test]
fn the_real_thread_beats_repeatedly_then_stops_promptly() {
    let (_d, store) = fresh_store();
    let out = attach(&*store, Attach { ttl: 1.0, ..Default::default() });
    let counted = Instrumented::new(store);
    let sup = WorkerHeartbeat::new(
        counted.store(),
        Arc::new(fleetgate_host::clock::SystemClock),
        params(&out, "sess-0001", 1.0, Some("0.01")),
    );
    assert_eq!(sup.interval_seconds(), 0.01);
    let (_rt, loops) = loops();
    let started = sup.start(&loops);
    assert!(started.started && !started.already_running);
    assert!(wait_until(10.0, || counted.heartbeats.load(Ordering::SeqCst) >= 3), "no beats from the thread");
    assert!(sup.status().running);
    let t = std::time::Instant::now();
    sup.stop("test teardown");
    let stopped_in = t.elapsed();
    let s = sup.status();
    assert!(s.beats_renewed >= 3, "{s:?}");
    assert!(!s.running);
    let beats = counted.heartbeats.load(Ordering::SeqCst);
    // The loop waits on a cancellation token, so stop returns without waiting
    // out an interval, and nothing beats afterwards.
    assert!(stopped_in < std::time::Duration::from_secs(5), "stop took {stopped_in:?}");
    // Stop waited for the loop to return; the supervisor sees its run end (its report comes
    // on the supervisor's own task, so poll, bounded): nothing can beat on its behalf. And
    // a beat asked for now does not reach the store.
    let ended = || loops.task(&sup.task_name()).is_none_or(|t| t.state != fleetgate_supervise::TaskState::Running);
    assert!(wait_until(10.0, ended), "{:?}", loops.task(&sup.task_name()));
    let _ = sup.beat_once();
    assert_eq!(counted.heartbeats.load(Ordering::SeqCst), beats, "beats after stop");
}

#[test]
fn start_is_idempotent_and_refused_after_a_stop() {
    let (_d, store) = fresh_store();
    let out = attach(&*store, Attach { ttl: 1.0, ..Default::default() });
    let sup = WorkerHeartbeat::new(
        store.clone(),
        Arc::new(fleetgate_host::clock::SystemClock),
        params(&out, "sess-0001", 1.0, Some("0.05")),
    );
    let (_rt, loops) = loops();
    assert!(!sup.start(&loops).already_running);
    assert!(sup.start(&loops).already_running);
    sup.stop("test teardown");
    let again = sup.start(&loops);
    assert!(!again.started && !again.already_running);

    let other = supervisor(store, Arc::new(ManualClock::new(now())), &out);
    other.stop("orderly shutdown");
    assert!(!other.start(&loops).started);
}

#[test]
fn a_thread_fenced_mid_run_stops_itself() {
    let (_d, store) = fresh_store();
    let out = attach(&*store, Attach { ttl: 1.0, ..Default::default() });
    let sup = WorkerHeartbeat::new(
        store.clone(),
        Arc::new(fleetgate_host::clock::SystemClock),
        params(&out, "sess-0001", 1.0, Some("0.01")),
    );
    let (_rt, loops) = loops();
    sup.start(&loops);
    assert!(wait_until(10.0, || sup.status().beats_renewed >= 1));
    store.claim_generation(&out.worker_identity, "gen-0002", now()).unwrap();
    assert!(wait_until(10.0, || !sup.status().running), "a fenced loop must end by itself");
    assert!(sup.stopped_reason().unwrap().starts_with("worker_fenced"));
}

/// The clock pair a test jumps, counting the loop's reads of it.
#[derive(Default)]
struct Watched {
    pair: ManualClockPair,
    reads: AtomicU64,
}

impl ClockPairSource for Watched {
    fn read(&self) -> ClockPair {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.pair.read()
    }
}

/// A registered worker whose loop runs on an injected wall clock and clock pair,
/// the pair read every 10 ms and beats 300 s of monotonic time apart: within a
/// test, only a suspend the loop notices can make it beat.
struct Sleeper {
    _dir: tempfile::TempDir,
    store: Arc<dyn Store>,
    /// The store as the loop sees it: its renewals counted, or failed on demand.
    counted: Arc<Instrumented>,
    out: RegisterOutcome,
    clock: Arc<ManualClock>,
    clocks: Arc<Watched>,
    sup: WorkerHeartbeat,
    _loops: (tokio::runtime::Runtime, fleetgate_supervise::Supervisor),
}

fn sleep_aware_loop() -> Sleeper {
    let (dir, store) = fresh_store();
    let out = attach(&*store, Attach::default());
    let clock = Arc::new(ManualClock::new(now()));
    let clocks = Arc::new(Watched::default());
    let counted = Instrumented::new(store.clone());
    let sup = WorkerHeartbeat::with_clock_pair(
        counted.store(),
        clock.clone(),
        clocks.clone(),
        Duration::from_millis(10),
        params(&out, "sess-0001", TTL, None),
    );
    assert_eq!(sup.interval_seconds(), 300.0);
    let loops = loops();
    assert!(sup.start(&loops.1).started);
    // The loop is up and reading the pair; awake, it has not beaten.
    assert!(wait_until(10.0, || clocks.reads.load(Ordering::SeqCst) >= 3), "the loop never read the clock pair");
    assert_eq!(sup.status().beats_attempted, 0);
    Sleeper { _dir: dir, store, counted, out, clock, clocks, sup, _loops: loops }
}

#[test]
fn a_wake_from_suspend_beats_at_once_and_the_runtime_context_says_so() {
    let Sleeper { store, out, clock, clocks, sup, .. } = &sleep_aware_loop();
    let reads = clocks.reads.load(Ordering::SeqCst);
    clocks.pair.advance(Duration::from_secs(1));
    assert!(wait_until(10.0, || clocks.reads.load(Ordering::SeqCst) >= reads + 3));
    assert_eq!(sup.status().beats_attempted, 0, "awake time is no suspend");

    // An hour asleep: the wall clock and boottime jump, monotonic does not, and every
    // lease this worker held has expired.
    clock.advance(3600);
    assert!(!is_live(&store.get_worker(&out.worker_identity).unwrap().unwrap(), clock.now(), true).live);
    clocks.pair.suspend(Duration::from_secs(3600));
    assert!(wait_until(10.0, || sup.status().beats_renewed >= 1), "no beat on wake: {:?}", sup.status());

    let s = sup.status();
    assert_eq!((s.beats_attempted, s.beats_renewed, s.suspends_detected), (1, 1, 1), "{s:?}");
    let resumed = s.last_suspend.expect("the suspend is reported");
    assert_eq!(resumed.resumed_after_suspend_seconds, 3600);
    assert_eq!(resumed.resumed_at, clock.now());
    assert_eq!(resumed.message, "resumed after 3600 s of suspend");
    let json = serde_json::to_value(worker_heartbeat_status(Some(sup))).unwrap();
    assert_eq!(json["last_suspend"]["resumed_after_suspend_seconds"], 3600, "{json}");
    assert_eq!(json["last_suspend"]["message"], "resumed after 3600 s of suspend", "{json}");
    assert_eq!(json["suspends_detected"], 1, "{json}");
    let row = store.get_worker(&out.worker_identity).unwrap().unwrap();
    assert_eq!(row.last_heartbeat_at, clock.now(), "renewed at the wake-up");
    assert!(is_live(&row, clock.now(), true).live);
    assert_eq!(owned(&**store, &out.worker_identity, clock.now()), Ownership::Owned);
    sup.stop("test teardown");
}

#[test]
fn a_worker_taken_over_while_asleep_is_refused_on_wake_not_extended() {
    let Sleeper { store, out, clock, clocks, sup, .. } = &sleep_aware_loop();

    // While this machine sleeps its lease expires and the worker is claimed anew
    // (a new generation, a new fencing epoch).
    clock.advance(3600);
    store.claim_generation(&out.worker_identity, "gen-0002", clock.now()).unwrap();
    let taken = store.get_worker(&out.worker_identity).unwrap().unwrap();
    assert!(taken.fencing_epoch > out.fencing_epoch);
    clock.advance(5);
    clocks.pair.suspend(Duration::from_secs(3605));

    assert!(wait_until(10.0, || !sup.status().running), "a fenced loop must end by itself: {:?}", sup.status());
    let s = sup.status();
    assert_eq!(s.last_suspend.as_ref().map(|r| r.resumed_after_suspend_seconds), Some(3605), "{s:?}");
    assert_eq!((s.beats_attempted, s.beats_renewed), (1, 0), "{s:?}");
    assert!(s.stopped_reason.as_deref().unwrap_or("").starts_with("worker_fenced"), "{s:?}");
    let after = store.get_worker(&out.worker_identity).unwrap().unwrap();
    assert_eq!(after.fencing_epoch, taken.fencing_epoch);
    assert_eq!(after.last_heartbeat_at, taken.last_heartbeat_at, "the new holder's lease is not extended");
    assert_eq!(after.renewal_count, taken.renewal_count);
}

#[test]
fn a_wake_whose_first_renewal_fails_transiently_retries_soon_not_an_interval_later() {
    let Sleeper { store, counted, out, clock, clocks, sup, .. } = &sleep_aware_loop();
    // The network is not back yet: the first two renewals after the wake-up fail.
    counted.fail_next.store(2, Ordering::SeqCst);
    clock.advance(3600);
    clocks.pair.suspend(Duration::from_secs(3600));
    // Retried 10 ms, then 20 ms later (the catch-up doubles from the check period),
    // not 300 s later as the schedule would.
    assert!(wait_until(10.0, || sup.status().beats_renewed >= 1), "no renewal after the wake: {:?}", sup.status());
    let s = sup.status();
    assert_eq!((s.transient_failures, s.beats_renewed, s.suspends_detected), (2, 1, 1), "{s:?}");
    assert_eq!(store.get_worker(&out.worker_identity).unwrap().unwrap().last_heartbeat_at, clock.now());
    // Caught up: no more beats until the schedule (300 s of monotonic time) or another wake.
    let reads = clocks.reads.load(Ordering::SeqCst);
    assert!(wait_until(10.0, || clocks.reads.load(Ordering::SeqCst) >= reads + 5));
    assert_eq!(counted.heartbeats.load(Ordering::SeqCst), 1, "{:?}", sup.status());
    sup.stop("test teardown");
}
