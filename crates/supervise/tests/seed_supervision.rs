//! The seed's acceptance tests (`004_…`, `test_supervision.py`), case by
//! case, against the tokio shell.
//!
//! Every test runs on tokio's paused clock with the shipped lengths: the real
//! backoff (the seed zeroed it to keep its run short; simulated time costs
//! nothing) and the real 30 s quarantine, so a quarantine asserted to hold
//! cannot run out mid-assertion however loaded the machine is (the seed's
//! lesson). The expiry test does not shorten the quarantine either: it moves
//! the clock to just before and just after it.

mod common;

use common::{Alive, BUDGET, Counter, count, eventually, state, supervisor};
use fleetgate_supervise::{Event, TaskState};
use std::collections::BTreeSet;
use std::time::Duration;

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| (*s).to_owned()).collect()
}

async fn sleep_an_hour() -> Result<(), String> {
    tokio::time::sleep(Duration::from_secs(3600)).await;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_crashing_loop_is_restarted() {
    let attempts = Counter::default();
    let supervisor = supervisor();
    let a = attempts.clone();
    supervisor
        .spawn("mqtt", "heating", move || {
            let a = a.clone();
            async move { if a.bump() < 3 { Err("broker went away") } else { Ok(()) } }
        })
        .unwrap();
    eventually("the third run to finish", || state(&supervisor, "mqtt") == Some(TaskState::Finished)).await;
    assert_eq!(attempts.get(), 3);
    assert_eq!(supervisor.quarantined(), BTreeSet::new());
    assert_eq!(count(supervisor.bus(), "task_crashed"), 2);
    supervisor.cancel_all().await;
}

#[tokio::test(start_paused = true)]
async fn a_loop_that_returns_is_left_alone() {
    // Returning is how a loop says it is finished, not that it failed.
    let attempts = Counter::default();
    let supervisor = supervisor();
    let a = attempts.clone();
    supervisor
        .spawn("cron", "heating", move || {
            let a = a.clone();
            async move {
                a.bump();
                Ok::<(), String>(())
            }
        })
        .unwrap();
    eventually("the run to finish", || state(&supervisor, "cron") == Some(TaskState::Finished)).await;
    // Longer than every backoff step and the first quarantine together.
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(attempts.get(), 1);
    let task = supervisor.task("cron").unwrap();
    assert_eq!((task.restarts, task.budget_left), (0, BUDGET));
    assert_eq!(common::kinds(supervisor.bus()), ["task_started", "task_finished"]);
    supervisor.cancel_all().await;
}

#[tokio::test(start_paused = true)]
async fn a_flow_that_keeps_crashing_is_stood_down() {
    let attempts = Counter::default();
    let supervisor = supervisor();
    let a = attempts.clone();
    supervisor
        .spawn("mqtt", "heating", move || {
            let a = a.clone();
            async move {
                a.bump();
                Err::<(), _>("nope")
            }
        })
        .unwrap();
    eventually("the quarantine", || !supervisor.quarantined().is_empty()).await;
    // Restarting stops once the budget is gone, rather than spinning forever.
    assert_eq!(attempts.get(), BUDGET);
    assert_eq!(supervisor.quarantined(), set(&["heating"]));
    let bus = supervisor.bus();
    assert_eq!(count(bus, "task_crashed"), BUDGET as usize);
    let quarantine = bus.recent().into_iter().rfind(|e| e.kind() == "flow_quarantined").unwrap();
    assert_eq!(quarantine, Event::FlowQuarantined { flow: "heating".into(), task: "mqtt".into(), retry_in_s: 30.0 });
    // And it holds: twenty more (simulated) seconds, not one more attempt.
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert_eq!(attempts.get(), BUDGET);
    assert_eq!(supervisor.quarantined(), set(&["heating"]));
    assert_eq!(state(&supervisor, "mqtt"), Some(TaskState::Quarantined));
    supervisor.cancel_all().await;
}

#[tokio::test(start_paused = true)]
async fn one_flows_failure_does_not_stand_another_down() {
    let ran = Counter::default();
    let supervisor = supervisor();
    supervisor.spawn("a", "broken", || async { Err::<(), _>("nope") }).unwrap();
    let r = ran.clone();
    supervisor
        .spawn("b", "fine", move || {
            let r = r.clone();
            async move {
                r.bump();
                sleep_an_hour().await
            }
        })
        .unwrap();
    eventually("the quarantine", || !supervisor.quarantined().is_empty()).await;
    assert_eq!(supervisor.quarantined(), set(&["broken"]));
    assert_eq!(ran.get(), 1);
    assert_eq!(state(&supervisor, "b"), Some(TaskState::Running));
    supervisor.cancel_all().await;
}

#[tokio::test(start_paused = true)]
async fn two_tasks_on_one_flow_do_not_spend_each_others_budget() {
    // The house's power flow: an MQTT subscriber and its keepalive
    // publisher. Both die with the same broker. Sharing one budget meant the
    // flow was stood down after half the restarts either task was allowed.
    let (sub, publ) = (Counter::default(), Counter::default());
    let supervisor = supervisor();
    for (task, tries) in [("power.cerbo:mqtt", &sub), ("power.keepalive:mqtt-out", &publ)] {
        let tries = tries.clone();
        supervisor
            .spawn(task, "power", move || {
                let tries = tries.clone();
                async move {
                    tries.bump();
                    Err::<(), _>("broker went away")
                }
            })
            .unwrap();
    }
    eventually("both tasks stood down", || {
        supervisor.snapshot().tasks.iter().all(|t| t.state == TaskState::Quarantined)
    })
    .await;
    assert_eq!((sub.get(), publ.get()), (BUDGET, BUDGET));
    assert_eq!(supervisor.quarantined(), set(&["power"]));
    supervisor.cancel_all().await;
}

#[tokio::test(start_paused = true)]
async fn a_quarantine_expires_and_the_task_tries_again() {
    // The whole point: a broker that comes back is picked up without a human.
    let attempts = Counter::default();
    let supervisor = supervisor();
    let a = attempts.clone();
    supervisor
        .spawn("mqtt", "power", move || {
            let a = a.clone();
            async move {
                if a.bump() <= BUDGET {
                    return Err("broker went away".to_owned());
                }
                sleep_an_hour().await
            }
        })
        .unwrap();
    eventually("the quarantine", || !supervisor.quarantined().is_empty()).await;
    assert_eq!(attempts.get(), BUDGET);
    assert_eq!(supervisor.quarantined(), set(&["power"]));
    // Sit out the real quarantine on the simulated clock: up to a
    // millisecond before its end nothing moves ...
    let until = supervisor.flow("power").unwrap().quarantine.unwrap().until;
    tokio::time::sleep_until(until - Duration::from_millis(1)).await;
    assert_eq!(attempts.get(), BUDGET);
    assert_eq!(supervisor.quarantined(), set(&["power"]));
    // ... and once it has passed, the task runs again.
    eventually("the retry", || attempts.get() == BUDGET + 1).await;
    assert_eq!(supervisor.quarantined(), BTreeSet::new());
    assert_eq!(state(&supervisor, "mqtt"), Some(TaskState::Running));
    assert_eq!(supervisor.task("mqtt").unwrap().budget_left, BUDGET);
    supervisor.cancel_all().await;
}

#[tokio::test(start_paused = true)]
async fn cancel_all_is_idempotent() {
    let alive = Alive::default();
    let supervisor = supervisor();
    let al = alive.clone();
    supervisor
        .spawn("mqtt", "heating", move || {
            let guard = al.hold();
            async move {
                let _guard = guard;
                sleep_an_hour().await
            }
        })
        .unwrap();
    eventually("the run", || alive.is_alive()).await;
    let first = supervisor.cancel_all().await;
    assert_eq!(first.stopped, ["mqtt"]);
    assert!(!alive.is_alive());
    let second = supervisor.cancel_all().await;
    assert_eq!(second, Default::default());
    assert_eq!(count(supervisor.bus(), "flow_cancelled"), 1);
    assert!(supervisor.snapshot().tasks.is_empty());
}

#[tokio::test(start_paused = true)]
async fn cancelling_one_flow_leaves_another_flows_tasks_running() {
    // Rebuilding one flow must not take every other flow's loops with it.
    let (gone, fine) = (Alive::default(), Alive::default());
    let supervisor = supervisor();
    for (task, flow, alive) in [("gone.sub", "gone", &gone), ("fine.sub", "fine", &fine)] {
        let alive = alive.clone();
        supervisor
            .spawn(task, flow, move || {
                let guard = alive.hold();
                async move {
                    let _guard = guard;
                    sleep_an_hour().await
                }
            })
            .unwrap();
    }
    eventually("both runs", || gone.is_alive() && fine.is_alive()).await;
    supervisor.cancel_flow("gone").await;
    let names: Vec<String> = supervisor.snapshot().tasks.into_iter().map(|t| t.task).collect();
    assert_eq!(names, ["fine.sub"]);
    assert!(fine.is_alive(), "the other flow's run was stopped");
    assert!(!gone.is_alive(), "the cancelled flow's run is still going");
    assert_eq!(state(&supervisor, "fine.sub"), Some(TaskState::Running));
    supervisor.cancel_all().await;
}

#[tokio::test(start_paused = true)]
async fn cancelling_one_flow_lifts_only_its_quarantine() {
    let supervisor = supervisor();
    supervisor.spawn("a", "broken", || async { Err::<(), _>("nope") }).unwrap();
    supervisor.spawn("b", "also-broken", || async { Err::<(), _>("nope") }).unwrap();
    eventually("both quarantines", || supervisor.quarantined().len() == 2).await;
    assert_eq!(supervisor.quarantined(), set(&["broken", "also-broken"]));
    supervisor.cancel_flow("broken").await;
    assert_eq!(supervisor.quarantined(), set(&["also-broken"]));
    // And its budget, or the flow would be quarantined again on the first
    // crash after the rebuild that was meant to fix it.
    assert!(supervisor.task("a").is_none());
    assert_eq!(supervisor.task("b").unwrap().budget_left, 0);
    let crashes = Counter::default();
    let c = crashes.clone();
    supervisor
        .spawn("a", "broken", move || {
            let c = c.clone();
            async move {
                c.bump();
                Err::<(), _>("still broken")
            }
        })
        .unwrap();
    eventually("the rebuilt task's first crash", || state(&supervisor, "a") == Some(TaskState::BackingOff)).await;
    assert_eq!(crashes.get(), 1);
    assert_eq!(supervisor.task("a").unwrap().budget_left, BUDGET - 1);
    assert_eq!(supervisor.quarantined(), set(&["also-broken"]));
    supervisor.cancel_all().await;
}
