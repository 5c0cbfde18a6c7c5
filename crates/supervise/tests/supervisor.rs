//! The tokio shell beyond the seed: cancellation, stale timers, panics,
//! escalation and its reset, snapshots, the bus, and drop. All on tokio's
//! paused clock with the shipped lengths.

mod common;

use common::{Alive, BUDGET, Counter, config, count, eventually, kinds, settings, state, supervisor, within};
use fleetgate_supervise::{Event, EventBus, SpawnError, SupervisionConfig, Supervisor, TaskState};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::time::Instant;

fn with(config: SupervisionConfig) -> Supervisor {
    Supervisor::new(config.validate().unwrap(), EventBus::default())
}

#[tokio::test(start_paused = true)]
async fn a_run_that_fails_on_its_way_out_of_a_cancel_is_not_a_crash() {
    let supervisor = supervisor();
    supervisor
        .spawn_with_stop("mqtt", "power", |stop| async move {
            stop.stopped().await;
            Err::<(), _>("interrupted")
        })
        .unwrap();
    eventually("the run", || state(&supervisor, "mqtt") == Some(TaskState::Running)).await;
    let started = Instant::now();
    let report = supervisor.cancel_flow("power").await;
    assert_eq!(report.stopped, ["mqtt"]);
    assert!(report.forced.is_empty() && report.unresponsive.is_empty());
    assert_eq!(Instant::now(), started, "a run that heeds the signal is not made to wait out the grace");
    assert_eq!(kinds(supervisor.bus()), ["task_started", "flow_cancelled"]);
    assert!(supervisor.task("mqtt").is_none());
}

#[tokio::test(start_paused = true)]
async fn a_run_that_ignores_the_stop_signal_is_aborted_after_the_grace() {
    let alive = Alive::default();
    let supervisor = supervisor();
    let al = alive.clone();
    supervisor
        .spawn_with_stop("stubborn", "f", move |_stop| {
            let guard = al.hold();
            async move {
                let _guard = guard;
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok::<(), String>(())
            }
        })
        .unwrap();
    eventually("the run", || alive.is_alive()).await;
    let started = Instant::now();
    let report = supervisor.cancel_flow("f").await;
    assert_eq!(report.forced, ["stubborn"]);
    assert!(report.stopped.is_empty());
    assert_eq!(Instant::now() - started, settings().stop_grace());
    assert!(!alive.is_alive());
    assert_eq!(count(supervisor.bus(), "task_crashed"), 0);
    assert!(supervisor.snapshot().tasks.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_restart_timer_that_fires_after_its_flow_was_cancelled_does_nothing() {
    let supervisor = with(SupervisionConfig { backoff_seconds: vec![10.0], ..config() });
    let old_runs = Counter::default();
    let o = old_runs.clone();
    supervisor
        .spawn("mqtt", "power", move || {
            let o = o.clone();
            async move {
                o.bump();
                Err::<(), _>("broker went away")
            }
        })
        .unwrap();
    eventually("the backoff", || state(&supervisor, "mqtt") == Some(TaskState::BackingOff)).await;
    let due = supervisor.task("mqtt").unwrap().next_start.unwrap();
    supervisor.cancel_flow("power").await;
    // Rebuilt at once under the same name; the old restart must neither run
    // the old factory nor start the new task a second time.
    let new_runs = Counter::default();
    let n = new_runs.clone();
    supervisor
        .spawn("mqtt", "power", move || {
            let n = n.clone();
            async move {
                n.bump();
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok::<(), String>(())
            }
        })
        .unwrap();
    tokio::time::sleep_until(due + Duration::from_secs(10)).await;
    assert_eq!((old_runs.get(), new_runs.get()), (1, 1));
    let events = supervisor.bus().recent();
    let cancelled_at = events.iter().position(|e| e.kind() == "flow_cancelled").unwrap();
    assert_eq!(
        events[cancelled_at + 1..].iter().map(Event::kind).collect::<Vec<_>>(),
        ["task_started"],
        "only the rebuilt task's own start after the cancel"
    );
    let task = supervisor.task("mqtt").unwrap();
    assert_eq!((task.state, task.restarts, task.budget_left), (TaskState::Running, 0, BUDGET));
    assert_eq!(supervisor.flow("power").unwrap().generation, 1);
}

#[tokio::test(start_paused = true)]
async fn a_panic_is_a_failure_and_is_restarted() {
    let runs = Counter::default();
    let supervisor = supervisor();
    let r = runs.clone();
    supervisor
        .spawn("fragile", "f", move || {
            let r = r.clone();
            async move {
                if r.bump() == 1 {
                    panic!("boom");
                }
                Ok::<(), String>(())
            }
        })
        .unwrap();
    eventually("the second run to finish", || state(&supervisor, "fragile") == Some(TaskState::Finished)).await;
    assert_eq!(runs.get(), 2);
    let crash = supervisor.bus().recent().into_iter().find(|e| e.kind() == "task_crashed").unwrap();
    assert_eq!(
        crash,
        Event::TaskCrashed {
            task: "fragile".into(),
            flow: "f".into(),
            attempt: 1,
            error: "panicked: boom".into(),
            budget_left: BUDGET - 1
        }
    );
    assert_eq!(supervisor.task("fragile").unwrap().last_error.as_deref(), Some("panicked: boom"));
}

#[tokio::test(start_paused = true)]
async fn a_panic_while_building_the_run_is_a_failure_too() {
    let supervisor = supervisor();
    supervisor
        .spawn("broken-factory", "f", || -> std::future::Ready<Result<(), String>> { panic!("no config") })
        .unwrap();
    eventually("the quarantine", || !supervisor.quarantined().is_empty()).await;
    assert_eq!(count(supervisor.bus(), "task_crashed"), BUDGET as usize);
}

#[tokio::test(start_paused = true)]
async fn quarantines_escalate_and_a_healthy_run_resets_them() {
    let supervisor = supervisor();
    // While `healthy` is set, a run lasts 700 s (longer than the 600 s reset
    // period) before it fails; otherwise it fails at once.
    let healthy = Arc::new(AtomicBool::new(false));
    let h = healthy.clone();
    supervisor
        .spawn("mqtt", "power", move || {
            let h = h.clone();
            async move {
                if h.load(Ordering::SeqCst) {
                    tokio::time::sleep(Duration::from_secs(700)).await;
                }
                Err::<(), _>("broker went away")
            }
        })
        .unwrap();
    let quarantines = |bus: &EventBus| -> Vec<f64> {
        bus.recent()
            .into_iter()
            .filter_map(|e| match e {
                Event::FlowQuarantined { retry_in_s, .. } => Some(retry_in_s),
                _ => None,
            })
            .collect()
    };
    let hour = Duration::from_secs(3600);
    within(hour, "two quarantines", || quarantines(supervisor.bus()).len() == 2).await;
    assert_eq!(quarantines(supervisor.bus()), [30.0, 60.0]);
    assert_eq!(supervisor.task("mqtt").unwrap().escalation, 2);
    // The broker comes back: the next run is healthy for the reset period.
    healthy.store(true, Ordering::SeqCst);
    let until = supervisor.flow("power").unwrap().quarantine.unwrap().until;
    tokio::time::sleep_until(until + Duration::from_secs(599)).await;
    assert_eq!(supervisor.task("mqtt").unwrap().escalation, 2, "reset before the healthy period ended");
    within(Duration::from_secs(2), "the healthy reset", || supervisor.task("mqtt").unwrap().escalation == 0).await;
    // It breaks again: the escalation starts over from the first step.
    healthy.store(false, Ordering::SeqCst);
    within(hour, "a third quarantine", || quarantines(supervisor.bus()).len() == 3).await;
    assert_eq!(quarantines(supervisor.bus()), [30.0, 60.0, 30.0]);
    supervisor.cancel_all().await;
}

#[tokio::test(start_paused = true)]
async fn the_snapshot_shows_each_state_with_its_times() {
    let supervisor = with(SupervisionConfig { failure_budget: 2, backoff_seconds: vec![10.0], ..config() });
    supervisor.spawn("done", "a", || async { Ok::<(), String>(()) }).unwrap();
    supervisor
        .spawn("up", "b", || async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok::<(), String>(())
        })
        .unwrap();
    supervisor.spawn("flaky", "c", || async { Err::<(), _>("nope") }).unwrap();
    eventually("a backoff", || state(&supervisor, "flaky") == Some(TaskState::BackingOff)).await;
    let backing = supervisor.task("flaky").unwrap();
    assert_eq!(backing.budget_left, 1);
    assert_eq!(backing.last_error.as_deref(), Some("nope"));
    let next = backing.next_start.expect("a backing-off task says when it restarts");
    assert!(next > Instant::now() && next <= Instant::now() + Duration::from_secs(10));
    assert_eq!(state(&supervisor, "done"), Some(TaskState::Finished));
    assert_eq!(state(&supervisor, "up"), Some(TaskState::Running));
    eventually("the quarantine", || state(&supervisor, "flaky") == Some(TaskState::Quarantined)).await;
    let flow = supervisor.flow("c").unwrap();
    let quarantine = flow.quarantine.unwrap();
    assert_eq!(quarantine.task, "flaky");
    // Polled in 10 ms steps: the quarantine began at most one step ago.
    assert!(quarantine.retry_in <= Duration::from_secs(30), "{:?}", quarantine.retry_in);
    assert!(quarantine.retry_in >= Duration::from_millis(29_990), "{:?}", quarantine.retry_in);
    assert_eq!(quarantine.until, Instant::now() + quarantine.retry_in);
    let snapshot = supervisor.snapshot();
    let names: Vec<&str> = snapshot.tasks.iter().map(|t| t.task.as_str()).collect();
    assert_eq!(names, ["done", "flaky", "up"]);
    let quarantined: Vec<&str> =
        snapshot.flows.iter().filter(|f| f.quarantine.is_some()).map(|f| f.flow.as_str()).collect();
    assert_eq!(quarantined, ["c"]);
    supervisor.cancel_all().await;
}

#[tokio::test(start_paused = true)]
async fn subscribers_see_the_events_in_the_order_decided() {
    let supervisor = supervisor();
    let mut rx = supervisor.bus().subscribe();
    let runs = Counter::default();
    let r = runs.clone();
    supervisor
        .spawn("t", "f", move || {
            let r = r.clone();
            async move { if r.bump() == 1 { Err("first run fails") } else { Ok(()) } }
        })
        .unwrap();
    let mut seen = Vec::new();
    while seen.last() != Some(&"task_finished") {
        let event = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.unwrap().unwrap();
        seen.push(event.kind());
    }
    assert_eq!(seen, ["task_started", "task_crashed", "task_restarting", "task_started", "task_finished"]);
    assert_eq!(kinds(supervisor.bus()), seen);
}

#[tokio::test(start_paused = true)]
async fn a_name_in_use_is_refused() {
    let supervisor = supervisor();
    let up = || async {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Ok::<(), String>(())
    };
    supervisor.spawn("t", "f", up).unwrap();
    let err = supervisor.spawn("t", "g", up).unwrap_err();
    assert_eq!(err, SpawnError::AlreadySupervised { task: "t".into(), flow: "f".into() });
    assert_eq!(err.to_string(), "spawn task `t`: a task of that name is already supervised in flow `f`");
    assert_eq!(supervisor.task("t").unwrap().flow, "f");
    supervisor.cancel_all().await;
}

#[tokio::test(start_paused = true)]
async fn dropping_the_last_handle_stops_every_run() {
    let alive = Alive::default();
    let supervisor = supervisor();
    let second_handle = supervisor.clone();
    let al = alive.clone();
    supervisor
        .spawn("t", "f", move || {
            let guard = al.hold();
            async move {
                let _guard = guard;
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok::<(), String>(())
            }
        })
        .unwrap();
    eventually("the run", || alive.is_alive()).await;
    drop(supervisor);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(alive.is_alive(), "a clone still holds the supervisor");
    drop(second_handle);
    eventually("the run to be dropped", || !alive.is_alive()).await;
}

#[tokio::test(start_paused = true)]
async fn the_shipped_jitter_keeps_delays_under_their_ceilings() {
    let supervisor = Supervisor::with_seed(SupervisionConfig::default().validate().unwrap(), EventBus::default(), 9);
    supervisor.spawn("t", "f", || async { Err::<(), _>("nope") }).unwrap();
    eventually("the quarantine", || !supervisor.quarantined().is_empty()).await;
    let events = supervisor.bus().recent();
    let delays: Vec<f64> = events
        .iter()
        .filter_map(|e| match e {
            Event::TaskRestarting { delay_s, .. } => Some(*delay_s),
            _ => None,
        })
        .collect();
    for (delay, ceiling) in delays.iter().zip([0.1, 0.5, 1.0, 2.0]) {
        assert!(*delay <= ceiling && *delay >= ceiling * 0.8 - 0.001, "{delay} vs {ceiling}");
    }
    assert_eq!(delays.len(), 4);
    let Some(Event::FlowQuarantined { retry_in_s, .. }) = events.last() else { panic!("{events:?}") };
    assert!((24.0..=30.0).contains(retry_in_s), "{retry_in_s}");
    supervisor.cancel_all().await;
}
