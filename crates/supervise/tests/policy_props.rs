//! Properties of the supervision policy over random event sequences: random settings
//! (backoff steps, budget, quarantine steps, healthy reset, jitter), a few tasks in one or
//! two flows, and any order of run ends, clock advances, cancellations and respawns. The
//! shell is played here; time is simulated. After every step:
//!
//! * every run started has an incarnation never seen before, and no task starts in a flow
//!   its own step left quarantined;
//! * a crash that spends the budget quarantines the flow (or finds it quarantined), and no
//!   crash reports more budget than configured;
//! * a restart's delay is the configured step for that failure (jitter only shortens it, by
//!   at most its ratio); a quarantine's length is a configured step, shortened the same way;
//! * a backing-off task is not started before its time, and a quarantine is lifted once its
//!   time has come and the shell calls back;
//! * after `handle_timeout(now)` nothing is due at or before `now` (the shell never spins);
//! * a report of a run that is not the task's current one changes nothing.

use fleetgate_supervise::policy::{Action, Exit, Incarnation, Jitter, SupervisionPolicy, TaskState};
use fleetgate_supervise::{Event, SupervisionConfig};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

const TASKS: [(&str, &str); 3] = [("a", "f1"), ("b", "f1"), ("c", "f2")];

#[derive(Clone, Debug)]
enum Step {
    /// The current run of task `i` ends.
    End(usize, u8),
    /// A report for a run that is not current (an old incarnation).
    Stale(usize),
    /// The clock moves on, and the shell calls back when it was told to.
    Advance(u32),
    /// Cancel the flow of task `i`.
    Cancel(usize),
    /// Spawn task `i` again (refused while it is supervised).
    Respawn(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..3usize, 0..4u8).prop_map(|(i, e)| Step::End(i, e)),
        1 => (0..3usize).prop_map(Step::Stale),
        4 => (0..4_000u32).prop_map(Step::Advance),
        1 => (0..3usize).prop_map(Step::Cancel),
        1 => (0..3usize).prop_map(Step::Respawn),
    ]
}

fn config() -> impl Strategy<Value = SupervisionConfig> {
    (
        prop::collection::vec(0u32..100, 1..4),
        1u32..5,
        prop::collection::vec(1u32..1_000, 1..4),
        1u32..2_000,
        prop_oneof![Just(0.0), 0.0f64..0.5],
    )
        .prop_map(|(backoff, budget, quarantine, healthy, jitter)| SupervisionConfig {
            backoff_seconds: backoff.into_iter().map(f64::from).collect(),
            failure_budget: budget,
            quarantine_backoff_seconds: quarantine.into_iter().map(f64::from).collect(),
            healthy_reset_seconds: f64::from(healthy),
            jitter_ratio: jitter,
            stop_grace_seconds: 1.0,
        })
}

/// The configured step `index` of `steps` (the last repeats), in seconds.
fn nth(steps: &[f64], index: usize) -> f64 {
    steps[index.min(steps.len() - 1)]
}

/// `actual` is `step` shortened by at most `ratio` (a little slack for float rounding).
fn jittered(actual: f64, step: f64, ratio: f64) -> bool {
    actual <= step + 1e-6 && actual >= step * (1.0 - ratio) - 1e-6
}

struct Shell {
    policy: SupervisionPolicy,
    config: SupervisionConfig,
    now: Duration,
    running: BTreeMap<String, Incarnation>,
    seen: BTreeSet<Incarnation>,
    stale: Vec<(String, Incarnation)>,
    /// Consecutive failures per task as the events report them (for the backoff step).
    failures: BTreeMap<String, u32>,
}

impl Shell {
    fn flow_of(task: &str) -> &'static str {
        TASKS.iter().find(|(t, _)| *t == task).map(|(_, f)| *f).unwrap()
    }

    fn apply(&mut self, actions: Vec<Action>) -> Result<(), TestCaseError> {
        let ratio = self.config.jitter_ratio;
        for action in &actions {
            match action {
                Action::Start { task, incarnation } => {
                    prop_assert!(self.seen.insert(*incarnation), "incarnation {incarnation:?} reused");
                    let flow = self.policy.flow(Self::flow_of(task));
                    prop_assert!(
                        flow.as_ref().is_none_or(|f| f.quarantine.is_none()),
                        "{task} started in a quarantined flow: {flow:?}"
                    );
                    if let Some(old) = self.running.insert(task.clone(), *incarnation) {
                        self.stale.push((task.clone(), old));
                    }
                }
                Action::Stop { .. } => {}
                Action::Forget { task } => {
                    if let Some(old) = self.running.remove(task) {
                        self.stale.push((task.clone(), old));
                    }
                }
                Action::Publish(Event::TaskCrashed { task, flow, budget_left, .. }) => {
                    prop_assert!(*budget_left < self.config.failure_budget, "{task}: budget {budget_left}");
                    if *budget_left == 0 {
                        let quarantined = actions
                            .iter()
                            .any(|a| matches!(a, Action::Publish(Event::FlowQuarantined { flow: f, .. }) if f == flow))
                            || self.policy.flow(flow).is_some_and(|f| f.quarantine.is_some());
                        prop_assert!(quarantined, "{task} spent its budget and {flow} was not quarantined");
                    }
                    let failures = self.config.failure_budget - budget_left;
                    self.failures.insert(task.clone(), failures);
                }
                Action::Publish(Event::TaskRestarting { task, delay_s, .. }) if *delay_s > 0.0 => {
                    let failures = self.failures.get(task).copied().unwrap_or(1).max(1);
                    let step = nth(&self.config.backoff_seconds, (failures - 1) as usize);
                    prop_assert!(jittered(*delay_s, step, ratio), "{task}: delay {delay_s} for step {step}");
                }
                Action::Publish(Event::FlowQuarantined { flow, retry_in_s, .. }) => {
                    let steps = &self.config.quarantine_backoff_seconds;
                    let any = steps.iter().any(|s| jittered(*retry_in_s, *s, ratio));
                    prop_assert!(any, "{flow}: quarantine {retry_in_s} s is no configured step {steps:?}");
                }
                Action::Publish(_) => {}
            }
        }
        Ok(())
    }

    /// After a callback at `now`, nothing is due at or before it.
    fn settled(&self) -> Result<(), TestCaseError> {
        if let Some(next) = self.policy.poll_timeout() {
            prop_assert!(next > self.now, "due at {next:?}, not after the callback at {:?}", self.now);
        }
        for view in self.policy.tasks() {
            if view.state == TaskState::BackingOff {
                prop_assert!(view.next_start.is_some_and(|at| at > self.now), "{view:?} at {:?}", self.now);
            }
        }
        for flow in self.policy.flows() {
            if let Some(q) = &flow.quarantine {
                prop_assert!(q.until > self.now, "{flow:?} outlived its time at {:?}", self.now);
            }
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn the_schedule_keeps_its_promises(config in config(), seed in any::<u64>(), steps in prop::collection::vec(step(), 1..80)) {
        let settings = config.clone().validate().unwrap();
        let jitter = if config.jitter_ratio == 0.0 { Jitter::none() } else { Jitter::seeded(config.jitter_ratio, seed) };
        let mut shell = Shell {
            policy: SupervisionPolicy::with_jitter(settings, jitter),
            config,
            now: Duration::ZERO,
            running: BTreeMap::new(),
            seen: BTreeSet::new(),
            stale: Vec::new(),
            failures: BTreeMap::new(),
        };
        for (task, flow) in TASKS {
            let actions = shell.policy.spawn(task, flow, shell.now).unwrap();
            shell.apply(actions)?;
        }
        for step in steps {
            match step {
                Step::End(i, e) => {
                    let task = TASKS[i].0;
                    let Some(incarnation) = shell.running.get(task).copied() else { continue };
                    let exit = match e {
                        0 => Exit::Finished,
                        1 => Exit::Cancelled,
                        _ => Exit::Failed(format!("crash {e}")),
                    };
                    let actions = shell.policy.handle_exit(task, incarnation, exit, shell.now);
                    if shell.policy.task(task).is_none_or(|v| v.state != TaskState::Running) {
                        shell.running.remove(task);
                        shell.stale.push((task.to_owned(), incarnation));
                    }
                    shell.apply(actions)?;
                }
                Step::Stale(i) => {
                    let task = TASKS[i].0;
                    let Some((_, old)) = shell.stale.iter().rev().find(|(t, _)| t == task).cloned() else { continue };
                    if shell.running.get(task) == Some(&old) {
                        continue;
                    }
                    let (tasks, flows) = (shell.policy.tasks(), shell.policy.flows());
                    let actions = shell.policy.handle_exit(task, old, Exit::Failed("late".into()), shell.now);
                    prop_assert!(actions.is_empty(), "a stale report acted: {actions:?}");
                    prop_assert_eq!(shell.policy.tasks(), tasks);
                    prop_assert_eq!(shell.policy.flows(), flows);
                }
                Step::Advance(ms) => {
                    let target = shell.now + Duration::from_millis(u64::from(ms) * 100);
                    // The shell calls back at every deadline it was told of, up to the target.
                    while let Some(due) = shell.policy.poll_timeout().filter(|d| *d <= target) {
                        shell.now = due.max(shell.now);
                        let actions = shell.policy.handle_timeout(shell.now);
                        shell.apply(actions)?;
                        shell.settled()?;
                    }
                    shell.now = target;
                    let actions = shell.policy.handle_timeout(shell.now);
                    shell.apply(actions)?;
                    shell.settled()?;
                }
                Step::Cancel(i) => {
                    let flow = TASKS[i].1;
                    let actions = shell.policy.cancel_flow(flow, shell.now);
                    shell.apply(actions)?;
                    prop_assert!(shell.policy.flow(flow).is_none_or(|f| f.quarantine.is_none()), "a cancelled flow stays quarantined");
                    // The runs asked to stop end; the shell reports them.
                    for (task, _) in TASKS.iter().filter(|(_, f)| *f == flow) {
                        if let Some(incarnation) = shell.running.get(*task).copied() {
                            let actions = shell.policy.handle_exit(task, incarnation, Exit::Cancelled, shell.now);
                            shell.apply(actions)?;
                            if shell.policy.task(task).is_none() {
                                shell.running.remove(*task);
                                shell.stale.push(((*task).to_owned(), incarnation));
                            }
                        }
                    }
                }
                Step::Respawn(i) => {
                    let (task, flow) = TASKS[i];
                    let supervised = shell.policy.task(task).is_some_and(|v| {
                        matches!(v.state, TaskState::Running | TaskState::BackingOff | TaskState::Quarantined)
                    });
                    match shell.policy.spawn(task, flow, shell.now) {
                        Ok(actions) => {
                            prop_assert!(!supervised, "{task} was taken over while supervised");
                            shell.failures.remove(task);
                            shell.apply(actions)?;
                        }
                        Err(_) => prop_assert!(supervised, "{task} refused while not supervised"),
                    }
                }
            }
        }
    }
}
