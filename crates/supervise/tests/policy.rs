//! The pure schedule on simulated time: every test drives
//! [`SupervisionPolicy`] through one [`Sim`] that plays the shell (it records
//! actions and jumps the clock straight to the next deadline), so nothing
//! sleeps and every delay is asserted exactly.

use fleetgate_supervise::policy::{Action, Exit, Incarnation, Jitter, SupervisionPolicy, TaskState};
use fleetgate_supervise::{Event, SpawnError, SupervisionConfig};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

const BUDGET: u32 = 5;

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

struct Sim {
    policy: SupervisionPolicy,
    now: Duration,
    events: Vec<Event>,
    running: BTreeMap<String, Incarnation>,
    starts: BTreeMap<String, u32>,
    stops: Vec<(String, Incarnation)>,
    forgotten: Vec<String>,
}

impl Sim {
    /// The default settings without jitter, so delays are exact.
    fn new() -> Self {
        Self::with(SupervisionConfig { jitter_ratio: 0.0, ..SupervisionConfig::default() })
    }

    fn with(config: SupervisionConfig) -> Self {
        let settings = config.validate().unwrap();
        Self {
            policy: SupervisionPolicy::with_jitter(settings, Jitter::none()),
            now: Duration::ZERO,
            events: Vec::new(),
            running: BTreeMap::new(),
            starts: BTreeMap::new(),
            stops: Vec::new(),
            forgotten: Vec::new(),
        }
    }

    fn apply(&mut self, actions: Vec<Action>) {
        for action in actions {
            match action {
                Action::Publish(e) => self.events.push(e),
                Action::Start { task, incarnation } => {
                    *self.starts.entry(task.clone()).or_default() += 1;
                    assert!(self.running.insert(task, incarnation).is_none(), "started twice");
                }
                Action::Stop { task, incarnation } => self.stops.push((task, incarnation)),
                Action::Forget { task } => self.forgotten.push(task),
            }
        }
    }

    fn spawn(&mut self, task: &str, flow: &str) {
        let actions = self.policy.spawn(task, flow, self.now).unwrap();
        self.apply(actions);
    }

    fn exit(&mut self, task: &str, exit: Exit) {
        let incarnation = self.running.remove(task).unwrap_or_else(|| panic!("{task} is not running"));
        let actions = self.policy.handle_exit(task, incarnation, exit, self.now);
        self.apply(actions);
    }

    fn crash(&mut self, task: &str) {
        self.exit(task, Exit::Failed("broker went away".into()));
    }

    /// Jump to each deadline up to `now + d`, in order, then to `now + d`.
    fn advance(&mut self, d: Duration) {
        let target = self.now + d;
        while let Some(at) = self.policy.poll_timeout().filter(|&at| at <= target) {
            assert!(at >= self.now, "a deadline in the past was left pending");
            self.now = at;
            let actions = self.policy.handle_timeout(at);
            self.apply(actions);
        }
        self.now = target;
    }

    fn next_deadline(&self) -> Duration {
        self.policy.poll_timeout().expect("a deadline is pending") - self.now
    }

    /// Crash `task` at once on every run until its flow is quarantined;
    /// returns the quarantine length.
    fn crash_until_quarantined(&mut self, task: &str) -> Duration {
        let flow = self.policy.task(task).unwrap().flow;
        loop {
            self.crash(task);
            if self.policy.quarantined().contains(&flow) {
                return self.next_deadline();
            }
            let wait = self.next_deadline();
            self.advance(wait);
        }
    }

    fn kinds(&self) -> Vec<&'static str> {
        self.events.iter().map(Event::kind).collect()
    }

    fn count(&self, kind: &str) -> usize {
        self.events.iter().filter(|e| e.kind() == kind).count()
    }

    fn state(&self, task: &str) -> TaskState {
        self.policy.task(task).unwrap().state
    }

    fn budget_left(&self, task: &str) -> u32 {
        self.policy.task(task).unwrap().budget_left
    }
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn a_failed_task_restarts_after_each_backoff_step_then_quarantines_its_flow() {
    let mut sim = Sim::new();
    sim.spawn("mqtt", "heating");
    let mut delays = Vec::new();
    for _ in 1..BUDGET {
        sim.crash("mqtt");
        assert_eq!(sim.state("mqtt"), TaskState::BackingOff);
        let delay = sim.next_deadline();
        delays.push(delay);
        sim.advance(delay - Duration::from_millis(1));
        assert!(!sim.running.contains_key("mqtt"), "restarted before its delay");
        sim.advance(Duration::from_millis(1));
        assert_eq!(sim.state("mqtt"), TaskState::Running);
    }
    assert_eq!(delays, [secs(0.1), secs(0.5), secs(1.0), secs(2.0)]);
    sim.crash("mqtt");
    assert_eq!(sim.policy.quarantined(), set(&["heating"]));
    assert_eq!(sim.state("mqtt"), TaskState::Quarantined);
    assert_eq!(sim.starts["mqtt"], BUDGET);
    assert_eq!(sim.count("task_crashed"), BUDGET as usize);
    assert_eq!(sim.count("task_restarting"), BUDGET as usize - 1);
    let restarting: Vec<(u32, f64, u32)> = sim
        .events
        .iter()
        .filter_map(|e| match e {
            Event::TaskRestarting { attempt, delay_s, budget_left, .. } => Some((*attempt, *delay_s, *budget_left)),
            _ => None,
        })
        .collect();
    assert_eq!(restarting, [(2, 0.1, 4), (3, 0.5, 3), (4, 1.0, 2), (5, 2.0, 1)]);
    assert_eq!(
        sim.events.last().unwrap(),
        &Event::FlowQuarantined { flow: "heating".into(), task: "mqtt".into(), retry_in_s: 30.0 }
    );
}

#[test]
fn the_last_backoff_step_repeats() {
    let mut sim = Sim::with(SupervisionConfig {
        jitter_ratio: 0.0,
        backoff_seconds: vec![1.0, 3.0],
        failure_budget: 5,
        ..SupervisionConfig::default()
    });
    sim.spawn("t", "f");
    let mut delays = Vec::new();
    for _ in 1..5 {
        sim.crash("t");
        delays.push(sim.next_deadline());
        sim.advance(*delays.last().unwrap());
    }
    assert_eq!(delays, [secs(1.0), secs(3.0), secs(3.0), secs(3.0)]);
}

#[test]
fn a_normal_return_finishes_the_task_and_spends_nothing() {
    let mut sim = Sim::new();
    sim.spawn("cron", "heating");
    sim.exit("cron", Exit::Finished);
    assert_eq!(sim.state("cron"), TaskState::Finished);
    assert_eq!(sim.budget_left("cron"), BUDGET);
    assert_eq!(sim.policy.poll_timeout(), None);
    sim.advance(Duration::from_secs(3600));
    assert_eq!(sim.starts["cron"], 1);
    assert_eq!(sim.kinds(), ["task_started", "task_finished"]);
}

#[test]
fn cancellation_is_not_a_crash() {
    let mut sim = Sim::new();
    sim.spawn("a", "f");
    sim.spawn("b", "g");
    // A run the supervisor asked to stop reports an error on its way out.
    let actions = sim.policy.cancel_flow("f", sim.now);
    sim.apply(actions);
    assert_eq!(sim.state("a"), TaskState::Cancelling);
    sim.exit("a", Exit::Failed("interrupted".into()));
    assert!(sim.policy.task("a").is_none());
    assert_eq!(sim.forgotten, ["a"]);
    // A run cancelled from outside: not restarted, no budget, no crash.
    sim.exit("b", Exit::Cancelled);
    assert_eq!(sim.state("b"), TaskState::Cancelled);
    assert_eq!(sim.budget_left("b"), BUDGET);
    assert_eq!(sim.policy.poll_timeout(), None);
    assert_eq!(sim.count("task_crashed"), 0);
    assert_eq!(sim.count("task_restarting"), 0);
    assert_eq!(sim.kinds(), ["task_started", "task_started", "flow_cancelled"]);
}

#[test]
fn a_restart_pending_for_a_cancelled_flow_never_fires() {
    let mut sim = Sim::new();
    sim.spawn("mqtt", "power");
    sim.crash("mqtt");
    let old_deadline = sim.policy.poll_timeout().unwrap();
    let actions = sim.policy.cancel_flow("power", sim.now);
    sim.apply(actions);
    assert!(sim.policy.task("mqtt").is_none());
    assert_eq!(sim.policy.poll_timeout(), None);
    // The flow is rebuilt with a task of the same name before the old
    // restart would have been due; the old deadline must do nothing.
    sim.spawn("mqtt", "power");
    assert_eq!(sim.policy.flow("power").unwrap().generation, 1);
    let events_before = sim.events.len();
    sim.now = old_deadline;
    let actions = sim.policy.handle_timeout(old_deadline);
    assert_eq!(actions, []);
    assert_eq!(sim.events.len(), events_before);
    assert_eq!(sim.starts["mqtt"], 2, "the original run and the rebuilt one only");
}

#[test]
fn a_late_report_from_a_replaced_run_changes_nothing() {
    let mut sim = Sim::new();
    sim.spawn("mqtt", "power");
    let old = sim.running["mqtt"];
    let actions = sim.policy.cancel_flow("power", sim.now);
    sim.apply(actions);
    // Rebuilt before the old run has reported its end.
    sim.running.remove("mqtt");
    sim.spawn("mqtt", "power");
    let actions = sim.policy.handle_exit("mqtt", old, Exit::Failed("late".into()), sim.now);
    assert_eq!(actions, []);
    assert_eq!(sim.state("mqtt"), TaskState::Running);
    assert_eq!(sim.budget_left("mqtt"), BUDGET);
    // And a report for a task the policy never heard of is ignored too.
    assert_eq!(sim.policy.handle_exit("ghost", old, Exit::Finished, sim.now), []);
}

#[test]
fn two_tasks_of_one_flow_keep_separate_budgets() {
    let mut sim = Sim::new();
    sim.spawn("power.cerbo:mqtt", "power");
    sim.spawn("power.keepalive:mqtt-out", "power");
    // Both die with the same broker, run for run.
    for _ in 1..BUDGET {
        sim.crash("power.cerbo:mqtt");
        sim.crash("power.keepalive:mqtt-out");
        assert!(sim.policy.quarantined().is_empty());
        let wait = sim.next_deadline();
        sim.advance(wait);
    }
    assert_eq!(sim.budget_left("power.cerbo:mqtt"), 1);
    assert_eq!(sim.budget_left("power.keepalive:mqtt-out"), 1);
    sim.crash("power.cerbo:mqtt");
    assert_eq!(sim.policy.quarantined(), set(&["power"]));
    // The sibling spent only its own failures, and is merely parked by the
    // flow's quarantine when it crashes during it.
    assert_eq!(sim.budget_left("power.keepalive:mqtt-out"), 1);
    sim.crash("power.keepalive:mqtt-out");
    assert_eq!(sim.state("power.keepalive:mqtt-out"), TaskState::Quarantined);
    assert_eq!(sim.starts, BTreeMap::from([("power.cerbo:mqtt".into(), 5), ("power.keepalive:mqtt-out".into(), 5)]));
    assert_eq!(sim.count("flow_quarantined"), 1);
}

#[test]
fn a_quarantine_stops_the_flows_restarts_but_spares_its_running_tasks() {
    let mut sim = Sim::with(SupervisionConfig {
        jitter_ratio: 0.0,
        failure_budget: 2,
        backoff_seconds: vec![10.0],
        ..SupervisionConfig::default()
    });
    sim.spawn("backing", "f");
    sim.spawn("crasher", "f");
    sim.spawn("steady", "f");
    sim.crash("crasher");
    sim.advance(secs(10.0));
    sim.crash("backing");
    assert_eq!(sim.state("backing"), TaskState::BackingOff);
    // crasher's second failure spends its budget of 2 at t = 10 s.
    sim.crash("crasher");
    assert_eq!(sim.policy.quarantined(), set(&["f"]));
    let quarantine = sim.policy.flow("f").unwrap().quarantine.unwrap();
    assert_eq!((quarantine.task.as_str(), quarantine.until), ("crasher", secs(40.0)));
    // The sibling that was waiting for its restart waits for the quarantine
    // instead; the running one keeps running.
    assert_eq!(sim.state("backing"), TaskState::Quarantined);
    assert_eq!(sim.policy.task("backing").unwrap().next_start, None);
    assert_eq!(sim.state("steady"), TaskState::Running);
    sim.advance(secs(10.0));
    assert_eq!(sim.running.keys().collect::<Vec<_>>(), ["steady"], "backing's old deadline passed");
    // A crash during the quarantine is counted, then parked, budget or not.
    sim.crash("steady");
    assert_eq!(sim.state("steady"), TaskState::Quarantined);
    assert_eq!(sim.budget_left("steady"), 1);
    assert_eq!(sim.count("task_restarting"), 2, "only crasher's and backing's before the quarantine");
    // At the expiry the whole flow starts again with fresh budgets.
    sim.advance(secs(19.9));
    assert!(sim.running.is_empty());
    sim.advance(secs(0.1));
    assert_eq!(sim.running.keys().collect::<Vec<_>>(), ["backing", "crasher", "steady"]);
    for task in ["backing", "crasher", "steady"] {
        assert_eq!(sim.budget_left(task), 2, "{task}");
    }
    assert_eq!(sim.count("flow_quarantined"), 1);
}

#[test]
fn one_flows_quarantine_never_stands_another_down() {
    let mut sim = Sim::new();
    sim.spawn("a", "broken");
    sim.spawn("b", "fine");
    sim.crash_until_quarantined("a");
    assert_eq!(sim.policy.quarantined(), set(&["broken"]));
    assert_eq!(sim.state("b"), TaskState::Running);
    assert_eq!(sim.starts["b"], 1);
    // A new task in the healthy flow starts at once; one in the quarantined
    // flow waits for the expiry.
    sim.spawn("c", "fine");
    sim.spawn("d", "broken");
    assert_eq!(sim.state("c"), TaskState::Running);
    assert_eq!(sim.state("d"), TaskState::Quarantined);
}

#[test]
fn a_quarantine_expires_and_the_flow_tries_again_with_fresh_budgets() {
    let mut sim = Sim::new();
    sim.spawn("mqtt", "power");
    let length = sim.crash_until_quarantined("mqtt");
    assert_eq!(length, secs(30.0));
    let until = sim.policy.flow("power").unwrap().quarantine.unwrap().until;
    assert_eq!(until, sim.now + secs(30.0));
    sim.advance(length - Duration::from_millis(1));
    assert_eq!(sim.policy.quarantined(), set(&["power"]));
    assert_eq!(sim.starts["mqtt"], BUDGET);
    sim.advance(Duration::from_millis(1));
    assert!(sim.policy.quarantined().is_empty());
    assert_eq!(sim.starts["mqtt"], BUDGET + 1);
    assert_eq!(sim.state("mqtt"), TaskState::Running);
    assert_eq!(sim.budget_left("mqtt"), BUDGET);
    let tail: Vec<&Event> = sim.events.iter().rev().take(3).collect();
    assert_eq!(
        tail,
        [
            &Event::TaskStarted { task: "mqtt".into(), flow: "power".into(), attempt: 6 },
            &Event::TaskRestarting {
                task: "mqtt".into(),
                flow: "power".into(),
                attempt: 6,
                delay_s: 0.0,
                budget_left: BUDGET
            },
            &Event::FlowQuarantineExpired { flow: "power".into() },
        ]
    );
}

#[test]
fn quarantines_escalate_to_the_cap_and_a_healthy_run_brings_them_back_down() {
    let mut sim = Sim::new();
    sim.spawn("mqtt", "power");
    let mut lengths = Vec::new();
    for _ in 0..5 {
        let length = sim.crash_until_quarantined("mqtt");
        lengths.push(length.as_secs());
        sim.advance(length);
        assert_eq!(sim.state("mqtt"), TaskState::Running);
    }
    assert_eq!(lengths, [30, 60, 120, 300, 300]);
    assert_eq!(sim.policy.task("mqtt").unwrap().escalation, 5);
    // Running healthy for just under the reset period changes nothing ...
    sim.advance(secs(599.0));
    assert_eq!(sim.policy.task("mqtt").unwrap().escalation, 5);
    // ... reaching it resets the escalation (the deadline is a timer, so the
    // state is right even before the next crash).
    sim.advance(secs(1.0));
    assert_eq!(sim.policy.task("mqtt").unwrap().escalation, 0);
    assert_eq!(sim.policy.poll_timeout(), None);
    assert_eq!(sim.crash_until_quarantined("mqtt"), secs(30.0));
}

#[test]
fn a_crash_after_a_long_healthy_run_gets_a_fresh_budget() {
    let mut sim = Sim::new();
    sim.spawn("mqtt", "power");
    for _ in 0..3 {
        sim.crash("mqtt");
        let wait = sim.next_deadline();
        sim.advance(wait);
    }
    assert_eq!(sim.budget_left("mqtt"), 2);
    // The shell may report the crash before it ran the healthy-reset timer;
    // the exit itself carries the proof of a healthy run.
    sim.now += secs(600.0);
    sim.crash("mqtt");
    assert_eq!(sim.budget_left("mqtt"), BUDGET - 1);
    assert_eq!(sim.next_deadline(), secs(0.1), "the backoff starts over too");
}

#[test]
fn cancelling_a_flow_lifts_only_its_quarantine_and_forgets_only_its_failures() {
    let mut sim = Sim::new();
    sim.spawn("a", "broken");
    sim.spawn("b", "also-broken");
    sim.crash_until_quarantined("a");
    sim.crash_until_quarantined("b");
    assert_eq!(sim.policy.quarantined(), set(&["also-broken", "broken"]));
    let actions = sim.policy.cancel_flow("broken", sim.now);
    sim.apply(actions);
    assert_eq!(sim.policy.quarantined(), set(&["also-broken"]));
    assert!(sim.policy.task("a").is_none());
    assert_eq!(sim.budget_left("b"), 0);
    assert_eq!(sim.forgotten, ["a"]);
    assert_eq!(sim.events.last().unwrap(), &Event::FlowCancelled { flow: "broken".into(), tasks: vec!["a".into()] });
    // Rebuilt, the flow runs at once with a whole budget: one crash does not
    // quarantine it again.
    sim.spawn("a", "broken");
    sim.crash("a");
    assert_eq!(sim.state("a"), TaskState::BackingOff);
    assert_eq!(sim.budget_left("a"), BUDGET - 1);
    // The other flow's quarantine still expires on its own schedule.
    let until = sim.policy.flow("also-broken").unwrap().quarantine.unwrap().until;
    sim.advance(until - sim.now);
    assert!(sim.policy.quarantined().is_empty());
}

#[test]
fn cancel_all_is_idempotent() {
    let mut sim = Sim::new();
    sim.spawn("a", "f");
    sim.spawn("b", "g");
    let first = sim.policy.cancel_all(sim.now);
    let stops = first.iter().filter(|a| matches!(a, Action::Stop { .. })).count();
    assert_eq!(stops, 2);
    sim.apply(first);
    // Asked again while the runs are still ending: no new event, the same
    // runs to wait for.
    let again = sim.policy.cancel_all(sim.now);
    assert!(again.iter().all(|a| matches!(a, Action::Stop { .. })));
    assert_eq!(again.len(), 2);
    sim.exit("a", Exit::Cancelled);
    sim.exit("b", Exit::Finished);
    assert!(sim.policy.tasks().is_empty());
    assert_eq!(sim.policy.cancel_all(sim.now), []);
    assert_eq!(sim.count("flow_cancelled"), 2);
    assert_eq!(sim.policy.flow("f").unwrap().generation, 1);
}

#[test]
fn a_name_in_use_is_refused_and_a_finished_one_is_reused() {
    let mut sim = Sim::new();
    sim.spawn("t", "f");
    assert_eq!(
        sim.policy.spawn("t", "g", sim.now),
        Err(SpawnError::AlreadySupervised { task: "t".into(), flow: "f".into() })
    );
    sim.exit("t", Exit::Finished);
    sim.spawn("t", "g");
    assert_eq!(sim.policy.task("t").unwrap().flow, "g");
    assert_eq!(sim.policy.task("t").unwrap().restarts, 0);
}

#[test]
fn jitter_shortens_delays_within_the_ratio_and_replays_from_its_seed() {
    let base = secs(30.0);
    let draws = |seed| {
        let mut j = Jitter::seeded(0.2, seed);
        (0..200).map(|_| j.apply(base)).collect::<Vec<_>>()
    };
    let a = draws(7);
    assert_eq!(a, draws(7));
    assert_ne!(a, draws(8));
    assert!(a.iter().all(|d| *d <= base && *d >= secs(24.0)), "{a:?}");
    let spread = a.iter().max().unwrap().saturating_sub(*a.iter().min().unwrap());
    assert!(spread > secs(3.0), "jitter should spread the draws, got {spread:?}");
    assert_eq!(Jitter::none().apply(base), base);
    assert_eq!(Jitter::seeded(0.2, 1).apply(Duration::ZERO), Duration::ZERO);

    // And the policy applies it to quarantines (and backoff) with the
    // configured ratio: the event reports the delay actually used.
    let settings = SupervisionConfig::default().validate().unwrap();
    let mut policy = SupervisionPolicy::new(settings, 42);
    let mut now = Duration::ZERO;
    let mut actions = policy.spawn("t", "f", now).unwrap();
    let mut retry = None;
    for _ in 0..BUDGET {
        let inc = actions
            .iter()
            .find_map(|a| match a {
                Action::Start { incarnation, .. } => Some(*incarnation),
                _ => None,
            })
            .unwrap();
        let out = policy.handle_exit("t", inc, Exit::Failed("x".into()), now);
        retry = out.iter().find_map(|a| match a {
            Action::Publish(Event::FlowQuarantined { retry_in_s, .. }) => Some(*retry_in_s),
            _ => None,
        });
        if let Some(Action::Publish(Event::TaskRestarting { delay_s, attempt, .. })) =
            out.iter().find(|a| matches!(a, Action::Publish(Event::TaskRestarting { .. })))
        {
            let nominal = [0.1, 0.5, 1.0, 2.0][*attempt as usize - 2];
            assert!(*delay_s <= nominal && *delay_s >= nominal * 0.8 - 1e-3, "{delay_s} vs {nominal}");
        }
        if retry.is_some() {
            break;
        }
        now = policy.poll_timeout().expect("a restart is pending");
        actions = policy.handle_timeout(now);
    }
    let retry = retry.expect("the fifth crash quarantines");
    assert!((24.0..=30.0).contains(&retry), "{retry}");
    let q = policy.flow("f").unwrap().quarantine.unwrap();
    assert_eq!(q.until - q.since, secs(retry));
}

#[test]
fn nothing_pending_means_no_timeout() {
    let mut sim = Sim::new();
    assert_eq!(sim.policy.poll_timeout(), None);
    sim.spawn("t", "f");
    assert_eq!(sim.policy.poll_timeout(), None, "a first run needs no timer");
    sim.crash("t");
    assert_eq!(sim.policy.poll_timeout(), Some(secs(0.1)));
    sim.advance(secs(0.1));
    // Running with one failure: the healthy-reset deadline is pending.
    assert_eq!(sim.policy.poll_timeout(), Some(secs(600.1)));
    sim.advance(secs(600.0));
    assert_eq!(sim.policy.poll_timeout(), None);
    assert_eq!(sim.budget_left("t"), BUDGET);
}
